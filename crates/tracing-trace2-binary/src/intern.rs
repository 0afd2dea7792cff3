//! The per-batch dictionaries of the encoder: strings and callsites.
//!
//! A batch defines each string it refers to once (`STR_DEF`) and then refers to it by a
//! small id. Looking a string up must cost a few nanoseconds, so there are two small
//! open-addressing tables:
//!
//! * by address and length: `tracing`'s names are `&'static str`, so the same name
//!   comes back at the same address, and the lookup hashes two integers instead of the
//!   text. A `Record`'s strings need not be `'static`, though, and an address can be
//!   reused for other text; a hit is therefore confirmed by comparing the text with the
//!   copy the batch already holds (a short `memcmp`);
//! * by content, with a fast word-wise hash, for equal text at another address.
//!
//! A hit on text in a read-only segment of the program (string literals, `tracing`'s
//! metadata) needs no comparison: that text cannot change (`tracing_trace2_dst::statics`).
//!
//! A third, small table ([`Shapes`]) serves the encoder's steady path: the addresses
//! and lengths of a record's callsite file and strings together, mapped to their ids,
//! so that a repeated region or datum costs one lookup instead of four.
//!
//! Entries carry the number of the batch they were made in, so starting a new batch
//! empties both tables in O(1). A table stops taking entries at half its size: the
//! strings after that are still defined, just not shared within that batch.

use tracing_trace2_dst::statics;

/// Whether two byte strings are equal; short ones (nearly all names) compared with a
/// few word loads rather than a call to `memcmp`.
#[inline]
pub(crate) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n >= 8 {
        if n > 16 {
            return a == b;
        }
        // Two overlapping words cover 8 to 16 bytes.
        return match (a.first_chunk::<8>(), b.first_chunk::<8>()) {
            (Some(a0), Some(b0)) => a0 == b0 && a.last_chunk::<8>() == b.last_chunk::<8>(),
            _ => false,
        };
    }
    if n >= 4 {
        return match (a.first_chunk::<4>(), b.first_chunk::<4>()) {
            (Some(a0), Some(b0)) => a0 == b0 && a.last_chunk::<4>() == b.last_chunk::<4>(),
            _ => false,
        };
    }
    // 0 to 3 bytes: first, middle and last cover them all.
    n == 0 || (a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1])
}

/// Whether `batch` holds `bytes` at `offset`.
#[inline(always)]
pub(crate) fn holds(batch: &[u8], offset: u32, bytes: &[u8]) -> bool {
    let start = offset as usize;
    batch
        .get(start..start + bytes.len())
        .is_some_and(|copy| same_bytes(copy, bytes))
}

/// One slot of the table by address.
#[derive(Clone, Copy, Default)]
struct ByAddress {
    generation: u32,
    id: u32,
    len: u32,
    offset: u32,
    addr: usize,
    /// The text is in a read-only segment of the program: a hit needs no check.
    fixed: bool,
}

/// One slot of the table by content.
#[derive(Clone, Copy, Default)]
struct ByContent {
    generation: u32,
    id: u32,
    len: u32,
    offset: u32,
    hash: u64,
}

/// What [`Strings::find_or_miss`] learnt of a string the batch does not hold yet.
pub(crate) struct Miss {
    /// The address table's slot holding this address with other text, if any.
    stale: Option<usize>,
    /// Else the free slot that ended the walk from the string's home.
    free: usize,
    /// The tables' mask then (they may grow before the string is recorded).
    mask: usize,
    /// The hash of the string's text.
    hash: u64,
}

/// The string dictionary of the current batch.
pub(crate) struct Strings {
    generation: u32,
    /// Strings defined in the batch so far (the next id is this + 1).
    pub count: u32,
    by_address: Box<[ByAddress]>,
    by_content: Box<[ByContent]>,
    used_address: usize,
    used_content: usize,
    mask: usize,
    /// The size the two tables may grow to.
    max_slots: usize,
}

/// Slots a table starts with: a batch of a short process defines a handful of
/// strings and callsites, and a table sized for a full batch from the start would touch
/// pages (tens of KiB) such a process never uses. A table doubles when half full, up to
/// its cap, so that what it holds is the same as a table of the cap's size would. At 16
/// (8 entries before a table doubles) the three tables take 1,400 bytes, enough for
/// the batch of one lifecycle record: a short process writes a batch per record.
const FIRST_SLOTS: usize = 16;

const MIX: u64 = 0x9E37_79B9_7F4A_7C15;

#[inline]
fn address_hash(addr: usize, len: usize) -> u64 {
    ((addr as u64) ^ (len as u64).rotate_left(32)).wrapping_mul(MIX)
}

/// A fast hash of short text, eight bytes at a time.
#[inline]
fn content_hash(bytes: &[u8]) -> u64 {
    let mut hash = (bytes.len() as u64).wrapping_mul(MIX);
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
        hash = (hash.rotate_left(5) ^ word).wrapping_mul(MIX);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        hash = (hash.rotate_left(5) ^ u64::from_le_bytes(last)).wrapping_mul(MIX);
    }
    hash ^ (hash >> 29)
}

/// The table slot for `hash` (the high bits, which the multiplication mixes best).
#[inline]
fn slot(hash: u64, mask: usize) -> usize {
    (hash >> 40) as usize & mask
}

impl Strings {
    /// Tables of `slots` entries each (a power of two).
    pub fn new(slots: usize) -> Strings {
        let max_slots = slots.next_power_of_two().max(16);
        let slots = FIRST_SLOTS.min(max_slots);
        Strings {
            generation: 1,
            count: 0,
            by_address: vec![ByAddress::default(); slots].into_boxed_slice(),
            by_content: vec![ByContent::default(); slots].into_boxed_slice(),
            used_address: 0,
            used_content: 0,
            mask: slots - 1,
            max_slots,
        }
    }

    /// Whether a table holding `used` entries takes one more: below half full, or
    /// after both tables doubled (while below their cap).
    #[inline]
    fn room(&mut self, used: usize) -> bool {
        if used * 2 < self.by_address.len() {
            return true;
        }
        if self.by_address.len() >= self.max_slots {
            return false;
        }
        self.grow();
        true
    }

    /// Doubles both tables, every entry of the batch moved to its new place.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let slots = self.by_address.len() * 2;
        let mask = slots - 1;
        let generation = self.generation;
        let mut by_address = vec![ByAddress::default(); slots].into_boxed_slice();
        for e in self
            .by_address
            .iter()
            .filter(|e| e.generation == generation)
        {
            let mut i = slot(address_hash(e.addr, e.len as usize), mask);
            while by_address[i].generation == generation {
                i = (i + 1) & mask;
            }
            by_address[i] = *e;
        }
        let mut by_content = vec![ByContent::default(); slots].into_boxed_slice();
        for e in self
            .by_content
            .iter()
            .filter(|e| e.generation == generation)
        {
            let mut i = slot(e.hash, mask);
            while by_content[i].generation == generation {
                i = (i + 1) & mask;
            }
            by_content[i] = *e;
        }
        self.by_address = by_address;
        self.by_content = by_content;
        self.mask = mask;
    }

    /// Forgets every entry: the next batch starts empty.
    pub fn reset(&mut self) {
        self.count = 0;
        self.used_address = 0;
        self.used_content = 0;
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // Once in four billion batches: entries of generation 1 could look current.
            self.by_address.fill(ByAddress::default());
            self.by_content.fill(ByContent::default());
            self.generation = 1;
        }
    }

    /// The entry for `text`'s address and length where they hash to: (id, where the
    /// batch holds the bytes, whether they are fixed). Unless fixed, the text at that
    /// address may have changed since: compare it with the batch's copy.
    #[inline(always)]
    pub fn home_entry(&self, text: &str) -> Option<(u32, u32, bool)> {
        let bytes = text.as_bytes();
        let addr = bytes.as_ptr() as usize;
        let e = self
            .by_address
            .get(slot(address_hash(addr, bytes.len()), self.mask))?;
        if e.generation != self.generation || e.addr != addr || e.len as usize != bytes.len() {
            return None;
        }
        Some((e.id, e.offset, e.fixed))
    }

    /// [`Self::home_entry`] wherever the entry sits: at its home or further along the
    /// probe, where a string goes whose home another string took first. `None`: this
    /// address and length have no entry in the batch.
    #[inline]
    pub fn entry(&self, text: &str) -> Option<(u32, u32, bool)> {
        let bytes = text.as_bytes();
        let addr = bytes.as_ptr() as usize;
        let mut i = slot(address_hash(addr, bytes.len()), self.mask);
        // The table is at most half full: the probe ends at an unused slot.
        loop {
            let e = self.by_address.get(i)?;
            if e.generation != self.generation {
                return None;
            }
            if e.addr == addr && e.len as usize == bytes.len() {
                return Some((e.id, e.offset, e.fixed));
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The slot `text`'s address and length hash to (for tests that need two strings
    /// of one slot).
    #[cfg(test)]
    pub fn home_slot(&self, text: &str) -> usize {
        slot(address_hash(text.as_ptr() as usize, text.len()), self.mask)
    }

    /// [`Self::find`] for the usual repeat, whose entry sits where its address hashes
    /// to: a few loads and compares. `None` says nothing: ask `find`.
    #[inline(always)]
    pub fn find_at_home(&self, text: &str, batch: &[u8]) -> Option<(u32, u32)> {
        let (id, offset, fixed) = self.home_entry(text)?;
        (fixed || holds(batch, offset, text.as_bytes())).then_some((id, offset))
    }

    /// The id of `text` in this batch, whose bytes so far are `batch`, and where the
    /// batch holds its bytes.
    #[cfg(test)]
    pub fn find(&mut self, text: &str, batch: &[u8]) -> Option<(u32, u32)> {
        self.find_or_miss(text, batch).ok()
    }

    /// [`Self::find`], or on a miss what its probes learnt, for
    /// [`Self::insert_missed`]: a string seen once (a request's URI) is then looked up
    /// and recorded with one walk of each table and one hash of its text.
    #[inline]
    pub fn find_or_miss(&mut self, text: &str, batch: &[u8]) -> Result<(u32, u32), Miss> {
        let bytes = text.as_bytes();
        let addr = bytes.as_ptr() as usize;
        let mut i = slot(address_hash(addr, bytes.len()), self.mask);
        // Where a stale entry for this address sits (its text changed), to update.
        let mut stale = None;
        loop {
            let e = self.by_address[i];
            if e.generation != self.generation {
                break;
            }
            if e.addr == addr && e.len as usize == bytes.len() {
                if e.fixed {
                    return Ok((e.id, e.offset));
                }
                let start = e.offset as usize;
                if batch
                    .get(start..start + bytes.len())
                    .is_some_and(|copy| same_bytes(copy, bytes))
                {
                    return Ok((e.id, e.offset));
                }
                stale = Some(i);
                break;
            }
            i = (i + 1) & self.mask;
        }
        let hash = content_hash(bytes);
        let Some((id, offset)) = self.content_entry(hash, bytes, batch) else {
            // `i`: the free slot that ended the walk, unless a stale entry did.
            return Err(Miss {
                stale,
                free: i,
                mask: self.mask,
                hash,
            });
        };
        // Next time the address alone finds it.
        self.put_address(stale, addr, bytes.len(), id, offset);
        Ok((id, offset))
    }

    fn content_entry(&self, hash: u64, bytes: &[u8], batch: &[u8]) -> Option<(u32, u32)> {
        let mut i = slot(hash, self.mask);
        loop {
            let e = self.by_content[i];
            if e.generation != self.generation {
                return None;
            }
            if e.hash == hash && e.len as usize == bytes.len() {
                let start = e.offset as usize;
                if batch
                    .get(start..start + bytes.len())
                    .is_some_and(|copy| same_bytes(copy, bytes))
                {
                    return Some((e.id, e.offset));
                }
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Records that `text` was defined as `id` with its bytes at `offset` of the batch
    /// (the encoder records what it missed with [`Self::insert_missed`]).
    #[cfg(test)]
    pub fn insert(&mut self, text: &str, id: u32, offset: usize) {
        let bytes = text.as_bytes();
        let addr = bytes.as_ptr() as usize;
        let (Ok(offset), Ok(len)) = (u32::try_from(offset), u32::try_from(bytes.len())) else {
            return;
        };
        // An entry for this address with other text is replaced where it stands.
        let mut stale = None;
        let mut i = slot(address_hash(addr, bytes.len()), self.mask);
        loop {
            let e = self.by_address[i];
            if e.generation != self.generation {
                break;
            }
            if e.addr == addr && e.len == len {
                stale = Some(i);
                break;
            }
            i = (i + 1) & self.mask;
        }
        self.put_address(stale, addr, bytes.len(), id, offset);
        if self.room(self.used_content) {
            self.put_content(content_hash(bytes), id, len, offset);
        }
    }

    /// Keeps string `id` by the hash of its content, in the first free slot from its
    /// home (the caller checked the room).
    fn put_content(&mut self, hash: u64, id: u32, len: u32, offset: u32) {
        let mut i = slot(hash, self.mask);
        while self.by_content[i].generation == self.generation {
            i = (i + 1) & self.mask;
        }
        self.by_content[i] = ByContent {
            generation: self.generation,
            id,
            len,
            offset,
            hash,
        };
        self.used_content += 1;
    }

    /// [`Self::insert`] for the `text` that [`Self::find_or_miss`] just missed (no
    /// other change to the tables in between): the same entries, in the same slots,
    /// without walking the address table or hashing the text again.
    pub fn insert_missed(&mut self, text: &str, id: u32, offset: usize, miss: Miss) {
        let bytes = text.as_bytes();
        let addr = bytes.as_ptr() as usize;
        let (Ok(offset), Ok(len)) = (u32::try_from(offset), u32::try_from(bytes.len())) else {
            return;
        };
        let entry = ByAddress {
            generation: self.generation,
            id,
            len,
            offset,
            addr,
            fixed: statics::is_immutable(addr, bytes.len()),
        };
        if let Some(i) = miss.stale {
            self.by_address[i] = entry;
        } else if self.room(self.used_address) {
            // The free slot found is where the walk from the string's home ends, unless
            // the tables just grew.
            let mut i = miss.free;
            if self.mask != miss.mask {
                i = slot(address_hash(addr, bytes.len()), self.mask);
                while self.by_address[i].generation == self.generation {
                    i = (i + 1) & self.mask;
                }
            }
            self.by_address[i] = entry;
            self.used_address += 1;
        }
        if self.room(self.used_content) {
            self.put_content(miss.hash, id, len, offset);
        }
    }

    fn put_address(&mut self, stale: Option<usize>, addr: usize, len: usize, id: u32, offset: u32) {
        let entry = ByAddress {
            generation: self.generation,
            id,
            len: len as u32,
            offset,
            addr,
            fixed: statics::is_immutable(addr, len),
        };
        if let Some(i) = stale {
            self.by_address[i] = entry;
            return;
        }
        if !self.room(self.used_address) {
            return;
        }
        let mut i = slot(address_hash(addr, len), self.mask);
        while self.by_address[i].generation == self.generation {
            i = (i + 1) & self.mask;
        }
        self.by_address[i] = entry;
        self.used_address += 1;
    }
}

/// One slot of the callsite table.
#[derive(Clone, Copy, Default)]
struct Site {
    generation: u32,
    id: u32,
    line: u32,
    /// The file name's length, `u32::MAX` for none.
    len: u32,
    addr: usize,
    /// Where the batch holds the file name's bytes.
    offset: u32,
    /// The file name is in a read-only segment of the program: a hit needs no check.
    fixed: bool,
}

/// The callsite dictionary of the current batch, keyed by the file name's address and
/// length and the line (one lookup per record), each hit confirmed by comparing the
/// file name with the batch's copy, as for [`Strings`].
pub(crate) struct Callsites {
    generation: u32,
    /// Callsites defined in the batch so far.
    pub count: u32,
    table: Box<[Site]>,
    used: usize,
    mask: usize,
    /// The size the table may grow to.
    max_slots: usize,
}

/// The key parts of a callsite's file name: address and length (`u32::MAX` for none).
#[inline(always)]
fn site_key(file: Option<&str>) -> (usize, u32) {
    match file {
        Some(f) => (
            f.as_ptr() as usize,
            u32::try_from(f.len()).unwrap_or(u32::MAX - 1),
        ),
        None => (0, u32::MAX),
    }
}

#[inline(always)]
fn site_hash(addr: usize, len: u32, line: u32) -> u64 {
    ((addr as u64) ^ u64::from(len).rotate_left(32) ^ u64::from(line).rotate_left(17))
        .wrapping_mul(MIX)
}

impl Callsites {
    /// A table of `slots` entries (a power of two).
    pub fn new(slots: usize) -> Callsites {
        let max_slots = slots.next_power_of_two().max(16);
        let slots = FIRST_SLOTS.min(max_slots);
        Callsites {
            generation: 1,
            count: 0,
            table: vec![Site::default(); slots].into_boxed_slice(),
            used: 0,
            mask: slots - 1,
            max_slots,
        }
    }

    /// Doubles the table, every entry of the batch moved to its new place.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let slots = self.table.len() * 2;
        let mask = slots - 1;
        let generation = self.generation;
        let mut table = vec![Site::default(); slots].into_boxed_slice();
        for e in self.table.iter().filter(|e| e.generation == generation) {
            let mut i = slot(site_hash(e.addr, e.len, e.line), mask);
            while table[i].generation == generation {
                i = (i + 1) & mask;
            }
            table[i] = *e;
        }
        self.table = table;
        self.mask = mask;
    }

    /// Forgets every entry.
    pub fn reset(&mut self) {
        self.count = 0;
        self.used = 0;
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.table.fill(Site::default());
            self.generation = 1;
        }
    }

    /// The entry for the callsite's key where it hashes to: (id, where the batch holds
    /// the file name's bytes, whether no check is needed: fixed, or no file).
    #[inline(always)]
    pub fn home_entry(&self, file: Option<&str>, line: u32) -> Option<(u32, u32, bool)> {
        let (addr, len) = site_key(file);
        let e = self
            .table
            .get(slot(site_hash(addr, len, line), self.mask))?;
        if e.generation != self.generation || e.addr != addr || e.len != len || e.line != line {
            return None;
        }
        Some((e.id, e.offset, e.fixed || file.is_none()))
    }

    /// [`Self::home_entry`] wherever the entry sits along the probe. `None`: the
    /// callsite has no entry in the batch.
    #[inline]
    pub fn entry(&self, file: Option<&str>, line: u32) -> Option<(u32, u32, bool)> {
        let (addr, len) = site_key(file);
        let mut i = slot(site_hash(addr, len, line), self.mask);
        // The table is at most half full: the probe ends at an unused slot.
        loop {
            let e = self.table.get(i)?;
            if e.generation != self.generation {
                return None;
            }
            if e.addr == addr && e.len == len && e.line == line {
                return Some((e.id, e.offset, e.fixed || file.is_none()));
            }
            i = (i + 1) & self.mask;
        }
    }

    /// [`Self::find`] for the usual repeat, whose entry sits where its key hashes to.
    /// `None` says nothing: ask `find`.
    #[inline(always)]
    pub fn find_at_home(&self, file: Option<&str>, line: u32, batch: &[u8]) -> Option<u32> {
        let (id, offset, fixed) = self.home_entry(file, line)?;
        (fixed || file.is_some_and(|f| holds(batch, offset, f.as_bytes()))).then_some(id)
    }

    /// The id of the callsite (`file`, `line`) in this batch, whose bytes so far are
    /// `batch`.
    #[inline]
    pub fn find(&self, file: Option<&str>, line: u32, batch: &[u8]) -> Option<u32> {
        let (addr, len) = site_key(file);
        let mut i = slot(site_hash(addr, len, line), self.mask);
        loop {
            let e = self.table[i];
            if e.generation != self.generation {
                return None;
            }
            if e.addr == addr && e.len == len && e.line == line {
                let same = match file {
                    None => true,
                    Some(_) if e.fixed => true,
                    Some(f) => {
                        let start = e.offset as usize;
                        batch
                            .get(start..start + f.len())
                            .is_some_and(|copy| same_bytes(copy, f.as_bytes()))
                    }
                };
                if same {
                    return Some(e.id);
                }
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Records that the callsite was defined as `id`, its file name's bytes at
    /// `offset` of the batch.
    pub fn insert(&mut self, file: Option<&str>, line: u32, id: u32, offset: u32) {
        if self.used * 2 >= self.table.len() {
            if self.table.len() >= self.max_slots {
                return;
            }
            self.grow();
        }
        let (addr, len) = site_key(file);
        let mut i = slot(site_hash(addr, len, line), self.mask);
        while self.table[i].generation == self.generation {
            i = (i + 1) & self.mask;
        }
        self.table[i] = Site {
            generation: self.generation,
            id,
            line,
            len,
            addr,
            offset,
            fixed: file.is_some_and(|f| statics::is_immutable(addr, f.len())),
        };
        self.used += 1;
    }
}

/// What a steady record refers to, by address: its callsite's file (address, and
/// length and line in one word; length `u32::MAX` for none) and up to three strings
/// (address and length; 0 and 0 for none).
pub(crate) type ShapeKey = [usize; 8];

/// The key part of an optional text.
#[inline(always)]
pub(crate) fn text_key(text: Option<&str>) -> [usize; 2] {
    text.map_or([0, 0], |t| [t.as_ptr() as usize, t.len()])
}

/// The key parts of a callsite.
#[inline(always)]
pub(crate) fn site_key_parts(file: Option<&str>, line: u32) -> [usize; 2] {
    let (addr, len) = site_key(file);
    [addr, (u64::from(len) | u64::from(line) << 32) as usize]
}

/// How many shapes a batch remembers.
const SHAPES: usize = 32;

/// One remembered shape.
#[derive(Clone, Copy, Default)]
pub(crate) struct Shape {
    key: ShapeKey,
    generation: u32,
    /// The callsite's id.
    pub callsite: u32,
    /// The strings' ids (0 for none).
    pub ids: [u32; 3],
    /// Where the batch holds the file name's and the strings' bytes.
    pub offsets: [u32; 4],
    /// Bit `i` set: part `i` (the file name, then the strings) is not fixed and must be
    /// compared with the batch's copy at every use.
    pub unfixed: u8,
    /// The callsite's and the strings' ids as one byte each, in their order from the
    /// low byte (see [`one_byte_refs`]); 0 when one of them takes more than a byte.
    pub one_byte: u64,
}

/// The callsite id and string ids as bytes of one word, callsite in the low byte, for
/// the steady path's one-store record; 0 (never a valid packing: the callsite is not 0)
/// if there is no callsite or a value takes more than one byte.
#[inline]
pub(crate) fn one_byte_refs(callsite: u32, ids: [u32; 3]) -> u64 {
    if callsite == 0 || (callsite | ids[0] | ids[1] | ids[2]) >= 0x80 {
        return 0;
    }
    u64::from(callsite) | u64::from(ids[0]) << 8 | u64::from(ids[1]) << 16 | u64::from(ids[2]) << 24
}

/// The ids a steady record's callsite and strings have in the batch, by the addresses
/// of its texts: one lookup instead of four. Each shape sits where its key hashes to or
/// in the slot beside it (two ways, so that two shapes of one slot, which a program's
/// few hot regions meet by chance of their addresses, do not keep evicting each other);
/// starting a batch empties the table in O(1), as for
/// [`Strings`]. A text that is not fixed is compared with the batch's copy at every
/// use, as the other tables do.
pub(crate) struct Shapes {
    generation: u32,
    table: Box<[Shape; SHAPES]>,
}

#[inline(always)]
fn shape_slot(key: &ShapeKey) -> usize {
    // The callsite and the label (or a datum's key) tell most shapes apart.
    let mixed = (key[0] ^ key[1].rotate_left(17) ^ key[4]) as u64;
    (mixed.wrapping_mul(MIX) >> (64 - SHAPES.trailing_zeros())) as usize
}

impl Shapes {
    /// An empty table.
    pub fn new() -> Shapes {
        Shapes {
            generation: 1,
            table: Box::new([Shape::default(); SHAPES]),
        }
    }

    /// Forgets every shape.
    pub fn reset(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.table.fill(Shape::default());
            self.generation = 1;
        }
    }

    /// The shape of `key`, if remembered in this batch (its unfixed parts unchecked).
    #[inline(always)]
    pub fn find(&self, key: &ShapeKey) -> Option<&Shape> {
        let home = shape_slot(key) % SHAPES;
        let e = &self.table[home];
        if self.holds(e, key) {
            return Some(e);
        }
        let e = &self.table[(home ^ 1) % SHAPES];
        self.holds(e, key).then_some(e)
    }

    /// Whether `e` is `key`'s shape, of this batch.
    #[inline(always)]
    fn holds(&self, e: &Shape, key: &ShapeKey) -> bool {
        // Every word compared without a branch or a call to `bcmp`.
        let differ = e
            .key
            .iter()
            .zip(key)
            .fold(0, |differ, (a, b)| differ | (a ^ b));
        e.generation == self.generation && differ == 0
    }

    /// Remembers a shape.
    pub fn insert(
        &mut self,
        key: ShapeKey,
        callsite: u32,
        ids: [u32; 3],
        offsets: [u32; 4],
        unfixed: u8,
    ) {
        let home = shape_slot(&key) % SHAPES;
        // Home if this batch has not taken it yet, else beside (what was there gives
        // way): the first shape of a slot stays where the lookup looks first.
        let at = if self.table[home].generation == self.generation {
            home ^ 1
        } else {
            home
        };
        self.table[at % SHAPES] = Shape {
            key,
            generation: self.generation,
            callsite,
            ids,
            offsets,
            unfixed,
            one_byte: one_byte_refs(callsite, ids),
        };
    }
}

/// The length of the common prefix of `a` and `b`, eight bytes at a time.
#[inline]
pub(crate) fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let x = word_le(a, i) ^ word_le(b, i);
        if x != 0 {
            return i + (x.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// The length of the common suffix of `a` and `b`, eight bytes at a time.
#[inline]
pub(crate) fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (la, lb) = (a.len(), b.len());
    let mut i = 0;
    while i + 8 <= n {
        let x = word_le(a, la - i - 8) ^ word_le(b, lb - i - 8);
        if x != 0 {
            return i + (x.leading_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < n && a[la - 1 - i] == b[lb - 1 - i] {
        i += 1;
    }
    i
}

fn word_le(s: &[u8], at: usize) -> u64 {
    s.get(at..at + 8)
        .and_then(|w| w.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch buffer with `text` defined at some offset.
    fn define(strings: &mut Strings, batch: &mut Vec<u8>, text: &str) -> u32 {
        let offset = batch.len();
        batch.extend_from_slice(text.as_bytes());
        strings.count += 1;
        let id = strings.count;
        strings.insert(text, id, offset);
        id
    }

    fn id(found: Option<(u32, u32)>) -> Option<u32> {
        found.map(|(id, _)| id)
    }

    #[test]
    fn finds_by_address_and_by_content() {
        let mut s = Strings::new(64);
        let mut batch = b"header".to_vec();
        let a = define(&mut s, &mut batch, "index");
        assert_eq!(id(s.find("index", &batch)), Some(a));
        // The only entry is where its text hashes to: the fast lookup finds it too.
        assert_eq!(id(s.find_at_home("index", &batch)), Some(a));
        assert_eq!(s.find_at_home("other", &batch), None);
        // The same text elsewhere in memory.
        let owned = String::from("index");
        assert_eq!(id(s.find(&owned, &batch)), Some(a));
        assert_eq!(s.find("other", &batch), None);
        s.reset();
        assert_eq!(s.find("index", &batch), None);
    }

    /// Keys made up from a number, each with the slot it hashes to.
    fn shape_keys() -> impl Iterator<Item = (ShapeKey, usize)> {
        (1..).map(|n: usize| {
            let key = [n * 64, 7 | 12 << 32, 0, 0, n * 40, 5, 0, 0];
            (key, shape_slot(&key) % SHAPES)
        })
    }

    #[test]
    fn two_shapes_of_one_slot_are_both_remembered() {
        let (first, slot) = shape_keys().next().unwrap();
        let (second, _) = shape_keys()
            .skip(1)
            .find(|&(_, s)| s == slot)
            .expect("another key of that slot");
        let mut shapes = Shapes::new();
        shapes.insert(first, 1, [1, 0, 0], [0; 4], 0);
        shapes.insert(second, 2, [2, 0, 0], [0; 4], 0);
        assert_eq!(shapes.find(&first).map(|s| s.callsite), Some(1));
        assert_eq!(shapes.find(&second).map(|s| s.callsite), Some(2));
        // A third of that slot takes one of their places, never a wrong one.
        let (third, _) = shape_keys()
            .skip(1)
            .filter(|&(_, s)| s == slot)
            .nth(1)
            .expect("a third key of that slot");
        shapes.insert(third, 3, [3, 0, 0], [0; 4], 0);
        assert_eq!(shapes.find(&third).map(|s| s.callsite), Some(3));
        for (key, callsite) in [(first, 1), (second, 2)] {
            assert!(shapes.find(&key).is_none_or(|s| s.callsite == callsite));
        }
        shapes.reset();
        assert!(shapes.find(&first).is_none() && shapes.find(&second).is_none());
    }

    #[test]
    fn one_byte_refs_only_when_every_id_fits_a_byte() {
        assert_eq!(one_byte_refs(1, [2, 3, 4]), 0x0403_0201);
        assert_eq!(one_byte_refs(0x7f, [0x7f, 0, 0x7f]), 0x7f00_7f7f);
        // No callsite, or an id of two bytes.
        assert_eq!(one_byte_refs(0, [1, 2, 3]), 0);
        for ids in [[0x80, 0, 0], [0, 0x80, 0], [0, 0, 0x80]] {
            assert_eq!(one_byte_refs(1, ids), 0);
        }
        assert_eq!(one_byte_refs(0x80, [1, 1, 1]), 0);
    }

    #[test]
    fn a_reused_address_with_new_text_is_not_taken_for_the_old() {
        let mut s = Strings::new(64);
        let mut batch = Vec::new();
        let mut buf = *b"alpha";
        let a = define(&mut s, &mut batch, std::str::from_utf8(&buf).unwrap());
        // Same address and length, other text.
        buf.copy_from_slice(b"omega");
        let omega = std::str::from_utf8(&buf).unwrap();
        assert_eq!(s.find(omega, &batch), None);
        let b = define(&mut s, &mut batch, omega);
        assert_ne!(a, b);
        assert_eq!(id(s.find(omega, &batch)), Some(b));
        assert_eq!(id(s.find("alpha", &batch)), Some(a));
    }

    /// The tables' entries, for comparing two dictionaries.
    fn entries(s: &Strings) -> Vec<(u32, u32, u32, u32, usize, bool, u64)> {
        let by_address = s
            .by_address
            .iter()
            .map(|e| (e.generation, e.id, e.len, e.offset, e.addr, e.fixed, 0));
        let by_content = s
            .by_content
            .iter()
            .map(|e| (e.generation, e.id, e.len, e.offset, 0, false, e.hash));
        by_address.chain(by_content).collect()
    }

    /// A miss recorded with what its lookup learnt leaves the tables as looking the
    /// string up and recording it afresh does: new texts, repeats, an address reused with
    /// new text, tables that grow and tables that are full.
    #[test]
    fn recording_a_miss_matches_recording_afresh() {
        for max in [16, 64, 4096] {
            let (mut afresh, mut missed) = (Strings::new(max), Strings::new(max));
            let (mut batch_afresh, mut batch_missed) = (Vec::new(), Vec::new());
            let owned: Vec<String> = (0..400).map(|i| format!("/item/{}", i % 170)).collect();
            let mut buf = *b"reused-000";
            for (n, text) in owned.iter().enumerate() {
                buf[7..].copy_from_slice(format!("{:03}", n % 7).as_bytes());
                let reused = std::str::from_utf8(&buf).unwrap().to_owned();
                for text in [
                    text.as_str(),
                    std::str::from_utf8(&buf).unwrap(),
                    &reused,
                    "index",
                ] {
                    let found = match afresh.find(text, &batch_afresh) {
                        Some(hit) => hit.0,
                        None => define(&mut afresh, &mut batch_afresh, text),
                    };
                    let got = match missed.find_or_miss(text, &batch_missed) {
                        Ok(hit) => hit.0,
                        Err(miss) => {
                            let offset = batch_missed.len();
                            batch_missed.extend_from_slice(text.as_bytes());
                            missed.count += 1;
                            missed.insert_missed(text, missed.count, offset, miss);
                            missed.count
                        }
                    };
                    assert_eq!(found, got, "{text} ({max} slots)");
                    assert!(entries(&afresh) == entries(&missed), "{text} ({max} slots)");
                }
            }
        }
    }

    #[test]
    fn full_tables_stop_taking_entries_but_keep_finding() {
        let mut s = Strings::new(16);
        let mut batch = Vec::new();
        let texts: Vec<String> = (0..40).map(|i| format!("name{i}")).collect();
        let ids: Vec<u32> = texts
            .iter()
            .map(|t| define(&mut s, &mut batch, t))
            .collect();
        // The first eight fit (half of 16 slots) and are found; none is misfound.
        for (text, id) in texts.iter().zip(&ids) {
            if let Some((found, _)) = s.find(text, &batch) {
                assert_eq!(found, *id);
            }
        }
        assert_eq!(id(s.find(&texts[0], &batch)), Some(ids[0]));
    }

    #[test]
    fn short_comparisons_match_slice_equality() {
        let texts = [
            "",
            "a",
            "ab",
            "abc",
            "abcd",
            "abcdefg",
            "abcdefgh",
            "abcdefghijklmnop",
        ];
        for a in texts {
            for b in texts {
                assert_eq!(same_bytes(a.as_bytes(), b.as_bytes()), a == b);
            }
            // One byte changed anywhere.
            for i in 0..a.len() {
                let mut c = a.as_bytes().to_vec();
                c[i] ^= 1;
                assert!(!same_bytes(a.as_bytes(), &c), "{a} at {i}");
            }
        }
        let long = "x".repeat(40);
        assert!(same_bytes(long.as_bytes(), long.clone().as_bytes()));
    }

    #[test]
    fn callsites_by_file_and_line() {
        let mut c = Callsites::new(16);
        let batch = b"..src/a.rs..".to_vec();
        // On the heap, so every hit is checked against the batch's copy.
        let heap = String::from("src/a.rs");
        let file = heap.as_str();
        assert_eq!(c.find(Some(file), 10, &batch), None);
        c.insert(Some(file), 10, 1, 2);
        // The first entry of an empty table is where its key hashes to: the usual
        // repeat's fast lookup finds it (and, like `find`, checks the batch's copy).
        assert_eq!(c.find_at_home(Some(file), 10, &batch), Some(1));
        assert_eq!(c.find_at_home(Some(file), 10, b"..src/b.rs.."), None);
        assert_eq!(c.find_at_home(Some(file), 11, &batch), None);
        c.insert(None, 10, 2, 0);
        assert_eq!(c.find(Some(file), 10, &batch), Some(1));
        assert_eq!(c.find(Some("src/a.rs"), 10, &batch), None, "by address");
        assert_eq!(c.find(None, 10, &batch), Some(2));
        assert_eq!(c.find(Some(file), 11, &batch), None);
        // The batch's copy differs: not a hit.
        let other = b"..src/b.rs..".to_vec();
        assert_eq!(c.find(Some(file), 10, &other), None);
        // A literal cannot change: its hit is taken as it is.
        #[cfg(target_os = "linux")]
        {
            c.insert(Some("src/lit.rs"), 3, 3, 0);
            assert_eq!(c.find(Some("src/lit.rs"), 3, &other), Some(3));
        }
        c.reset();
        assert_eq!(c.find(Some(file), 10, &batch), None);
    }

    #[test]
    fn common_prefixes_and_suffixes() {
        for (a, b, p, q) in [
            ("", "", 0, 0),
            ("read 122 entries", "read 123 entries", 7, 8),
            ("abc", "abcdef", 3, 0),
            ("a rather long message 1", "a rather long message 2", 22, 0),
            ("x", "y", 0, 0),
        ] {
            assert_eq!(common_prefix(a.as_bytes(), b.as_bytes()), p, "{a} {b}");
            assert_eq!(common_suffix(a.as_bytes(), b.as_bytes()), q, "{a} {b}");
        }
    }
}
