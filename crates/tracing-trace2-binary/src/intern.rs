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
//! Entries carry the number of the batch they were made in, so starting a new batch
//! empties both tables in O(1). A table stops taking entries at half its size: the
//! strings after that are still defined, just not shared within that batch.

/// One slot of the table by address.
#[derive(Clone, Copy, Default)]
struct ByAddress {
    generation: u32,
    id: u32,
    len: u32,
    offset: u32,
    addr: usize,
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
}

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
        let slots = slots.next_power_of_two().max(16);
        Strings {
            generation: 1,
            count: 0,
            by_address: vec![ByAddress::default(); slots].into_boxed_slice(),
            by_content: vec![ByContent::default(); slots].into_boxed_slice(),
            used_address: 0,
            used_content: 0,
            mask: slots - 1,
        }
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

    /// The id of `text` in this batch, whose bytes so far are `batch`.
    #[inline]
    pub fn find(&mut self, text: &str, batch: &[u8]) -> Option<u32> {
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
                let start = e.offset as usize;
                if batch.get(start..start + bytes.len()) == Some(bytes) {
                    return Some(e.id);
                }
                stale = Some(i);
                break;
            }
            i = (i + 1) & self.mask;
        }
        let (id, offset) = self.content_entry(bytes, batch)?;
        // Next time the address alone finds it.
        self.put_address(stale, addr, bytes.len(), id, offset);
        Some(id)
    }

    fn content_entry(&self, bytes: &[u8], batch: &[u8]) -> Option<(u32, u32)> {
        let hash = content_hash(bytes);
        let mut i = slot(hash, self.mask);
        loop {
            let e = self.by_content[i];
            if e.generation != self.generation {
                return None;
            }
            if e.hash == hash && e.len as usize == bytes.len() {
                let start = e.offset as usize;
                if batch.get(start..start + bytes.len()) == Some(bytes) {
                    return Some((e.id, e.offset));
                }
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Records that `text` was defined as `id` with its bytes at `offset` of the batch.
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
        if self.used_content * 2 < self.by_content.len() {
            let hash = content_hash(bytes);
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
    }

    fn put_address(&mut self, stale: Option<usize>, addr: usize, len: usize, id: u32, offset: u32) {
        let entry = ByAddress {
            generation: self.generation,
            id,
            len: len as u32,
            offset,
            addr,
        };
        if let Some(i) = stale {
            self.by_address[i] = entry;
            return;
        }
        if self.used_address * 2 >= self.by_address.len() {
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
    key: u64,
}

/// The callsite dictionary of the current batch, keyed by (file's string id, line):
/// the file name is checked through [`Strings`], so the key is two integers.
pub(crate) struct Callsites {
    generation: u32,
    /// Callsites defined in the batch so far.
    pub count: u32,
    table: Box<[Site]>,
    used: usize,
    mask: usize,
}

impl Callsites {
    /// A table of `slots` entries (a power of two).
    pub fn new(slots: usize) -> Callsites {
        let slots = slots.next_power_of_two().max(16);
        Callsites {
            generation: 1,
            count: 0,
            table: vec![Site::default(); slots].into_boxed_slice(),
            used: 0,
            mask: slots - 1,
        }
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

    fn key(file: u32, line: u32) -> u64 {
        u64::from(file) << 32 | u64::from(line)
    }

    /// The id of the callsite (`file` string id, 0 for none; `line`).
    #[inline]
    pub fn find(&self, file: u32, line: u32) -> Option<u32> {
        let key = Self::key(file, line);
        let mut i = slot(key.wrapping_mul(MIX), self.mask);
        loop {
            let e = self.table[i];
            if e.generation != self.generation {
                return None;
            }
            if e.key == key {
                return Some(e.id);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Records that the callsite was defined as `id`.
    pub fn insert(&mut self, file: u32, line: u32, id: u32) {
        if self.used * 2 >= self.table.len() {
            return;
        }
        let key = Self::key(file, line);
        let mut i = slot(key.wrapping_mul(MIX), self.mask);
        while self.table[i].generation == self.generation {
            i = (i + 1) & self.mask;
        }
        self.table[i] = Site {
            generation: self.generation,
            id,
            key,
        };
        self.used += 1;
    }
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

    #[test]
    fn finds_by_address_and_by_content() {
        let mut s = Strings::new(64);
        let mut batch = b"header".to_vec();
        let a = define(&mut s, &mut batch, "index");
        assert_eq!(s.find("index", &batch), Some(a));
        // The same text elsewhere in memory.
        let owned = String::from("index");
        assert_eq!(s.find(&owned, &batch), Some(a));
        assert_eq!(s.find("other", &batch), None);
        s.reset();
        assert_eq!(s.find("index", &batch), None);
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
        assert_eq!(s.find(omega, &batch), Some(b));
        assert_eq!(s.find("alpha", &batch), Some(a));
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
            if let Some(found) = s.find(text, &batch) {
                assert_eq!(found, *id);
            }
        }
        assert_eq!(s.find(&texts[0], &batch), Some(ids[0]));
    }

    #[test]
    fn callsites_by_file_and_line() {
        let mut c = Callsites::new(16);
        assert_eq!(c.find(1, 10), None);
        c.insert(1, 10, 1);
        c.insert(0, 10, 2);
        assert_eq!(c.find(1, 10), Some(1));
        assert_eq!(c.find(0, 10), Some(2));
        assert_eq!(c.find(1, 11), None);
        c.reset();
        assert_eq!(c.find(1, 10), None);
    }
}
