//! The append cursor and the short copies behind it: the only `unsafe` code of the
//! record crate (writes into a vector's spare capacity).

#![allow(unsafe_code)]

use super::chunk;
use super::json::{block_needs_escape, needs_escape, needs_escape_any, push_json_escaped};
use super::numbers::{digits6, pair};

#[cfg(test)]
thread_local! {
    /// How many JSON fields the calling thread wrote by the no-escape fast path
    /// (tests only: the fast path and its fallback write the same bytes, so only this
    /// count shows whether the fast path is taken).
    pub(super) static PLAIN_JSON_FIELDS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// An append cursor over a `Vec<u8>` for formatters that write many small pieces per
/// line.
///
/// `Vec::extend_from_slice` keeps the vector's length in memory and re-checks the
/// capacity (with a call out to grow it) for every piece; a JSON line is some thirty
/// pieces, and that bookkeeping was most of the cost of writing one. The appender holds
/// the buffer address, length and capacity in locals instead, copies short pieces
/// with a few word-sized moves rather than a call to `memcpy`, and lets a group of pieces
/// share one capacity check ([`Appender::put_all`], [`Appender::put_json_field`]).
/// The vector's length is brought up to date when the appender is dropped.
///
/// Every method checks the room it needs (and grows the vector if it must), so no
/// caller can write past the allocation; [`Appender::reserve`] up front only spares
/// the growing.
pub struct Appender<'a> {
    vec: &'a mut Vec<u8>,
    /// Where the next byte goes: `vec`'s buffer plus the number of bytes written, all
    /// of which are initialized.
    cur: *mut u8,
    /// How many bytes of the buffer's capacity are left after `cur`.
    room: usize,
}

impl<'a> Appender<'a> {
    /// Starts appending after what `vec` already holds.
    #[inline]
    pub fn new(vec: &'a mut Vec<u8>) -> Self {
        let (len, room) = (vec.len(), vec.capacity() - vec.len());
        let cur = vec.as_mut_ptr().wrapping_add(len);
        Appender { vec, cur, room }
    }

    /// The vector's length so far, what it held before included.
    #[inline]
    pub fn len(&self) -> usize {
        self.cur as usize - self.vec.as_ptr() as usize
    }

    /// Whether the vector is still empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Makes sure that `additional` more bytes fit without growing the vector.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn reserve(&mut self, additional: usize) {
        if additional > self.room {
            self.grow(additional);
        }
    }

    /// The room that will be left once `n` more bytes are written, after making room
    /// for them if needed. Subtracting and testing for the overflow is all the usual
    /// path costs: one subtraction and one branch per piece.
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn room_after(&mut self, n: usize) -> usize {
        match self.room.checked_sub(n) {
            Some(room) => room,
            None => {
                self.grow(n);
                self.room - n
            }
        }
    }

    #[cfg_attr(not(debug_assertions), inline(always))]
    fn grow(&mut self, additional: usize) {
        self.with_vec(move |vec| vec.reserve(additional));
    }

    /// Lets `append` add to the vector itself (with the `push_*` functions, say). The
    /// appender goes on after whatever the vector then holds.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn with_vec(&mut self, append: impl FnOnce(&mut Vec<u8>)) {
        // The rare paths go through a function that gets the appender's fields as
        // values, never the appender's address: with no pointer to it escaping, the
        // compiler keeps the fields in registers on the usual path.
        #[cold]
        #[inline(never)]
        fn outlined(
            vec: &mut Vec<u8>,
            len: usize,
            append: &mut dyn FnMut(&mut Vec<u8>),
        ) -> (*mut u8, usize) {
            // SAFETY: `len <= capacity` and the first `len` bytes of the buffer are
            // written (the appender's invariant).
            unsafe { vec.set_len(len) };
            append(vec);
            let len = vec.len();
            (vec.as_mut_ptr().wrapping_add(len), vec.capacity() - len)
        }
        let mut append = Some(append);
        let mut call = |vec: &mut Vec<u8>| {
            if let Some(append) = append.take() {
                append(vec);
            }
        };
        let len = self.len();
        // Should `append` panic, the vector (brought up to date before the call) is the
        // truth and `drop` must leave it alone: a null `cur` says so.
        self.cur = std::ptr::null_mut();
        (self.cur, self.room) = outlined(self.vec, len, &mut call);
    }

    /// Appends `bytes`.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn put(&mut self, bytes: &[u8]) {
        let room = self.room_after(bytes.len());
        // SAFETY: `room_after` made sure that `bytes.len()` bytes fit after `cur`;
        // `bytes` is a shared borrow, so it cannot overlap the spare capacity that
        // `self` borrows mutably.
        unsafe { copy_to(bytes, self.cur) };
        // Only now that they are written do the bytes count.
        self.cur = self.cur.wrapping_add(bytes.len());
        self.room = room;
    }

    /// Appends `bytes` as [`Appender::put`] does, for a piece that is usually longer than
    /// 32 bytes (a cached run of keys): the copy tests its length from the long end, two
    /// tests to the usual case instead of four.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn put_long(&mut self, bytes: &[u8]) {
        let room = self.room_after(bytes.len());
        // SAFETY: `room_after` made sure that `bytes.len()` bytes fit after `cur`;
        // `bytes` is a shared borrow, so it cannot overlap the spare capacity that
        // `self` borrows mutably.
        unsafe { copy_long_to(bytes, self.cur) };
        self.cur = self.cur.wrapping_add(bytes.len());
        self.room = room;
    }

    /// Appends one byte.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn put_byte(&mut self, byte: u8) {
        self.put(&[byte]);
    }

    /// Appends a fixed-size array with one store: unlike a slice, its length is known
    /// where the copy is made, so no size has to be tested at run time.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn put_array<const N: usize>(&mut self, bytes: [u8; N]) {
        self.put_array_then(bytes, b"");
    }

    /// Appends a fixed-size array and then `bytes`, with a single test for room (a
    /// length prefix and what it counts, say).
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn put_array_then<const N: usize>(&mut self, array: [u8; N], bytes: &[u8]) {
        let room = self.room_after(N + bytes.len());
        // SAFETY: `room_after` made sure that `N + bytes.len()` bytes fit after `cur`;
        // `write_unaligned` has no alignment requirement, and `bytes`, a shared borrow,
        // cannot overlap the spare capacity that `self` borrows mutably.
        unsafe {
            self.cur.cast::<[u8; N]>().write_unaligned(array);
            copy_to(bytes, self.cur.add(N));
        }
        self.cur = self.cur.wrapping_add(N + bytes.len());
        self.room = room;
    }

    /// Appends every piece of `parts`, in order, with a single test for room.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn put_all<const N: usize>(&mut self, parts: [&[u8]; N]) {
        let total = parts.iter().map(|part| part.len()).sum();
        let room = self.room_after(total);
        let mut at = self.cur;
        for part in parts {
            // SAFETY: `room_after` made sure that all the parts fit after `cur`, and
            // `at` has only moved past the parts before this one.
            unsafe { copy_to(part, at) };
            at = at.wrapping_add(part.len());
        }
        self.cur = at;
        self.room = room;
    }

    /// Appends `text` as a JSON string, exactly as [`push_json_str`](super::push_json_str) does.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn put_json_str(&mut self, text: &str) {
        self.put_json_field(b"", text);
    }

    /// Appends `prefix` (copied as it is, typically a `,"key":`) and then `text` as a
    /// JSON string, exactly as [`push_json_str`](super::push_json_str) writes it.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn put_json_field(&mut self, prefix: &[u8], text: &str) {
        self.put_json_field_then(prefix, text, b"");
    }

    /// [`Appender::put_json_field`] followed by `suffix` (copied as it is), all with a
    /// single test for room on the usual path.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn put_json_field_then(&mut self, prefix: &[u8], text: &str, suffix: &[u8]) {
        if !self.try_put_plain_json_field_then(prefix, text, suffix) {
            self.put(prefix);
            self.put_json_escaped(text.as_bytes());
            self.put(suffix);
        }
    }

    /// Appends `prefix`, `text` between quotes and `suffix` when `text` needs no JSON
    /// escaping, and returns `true`; otherwise appends nothing and returns `false`.
    ///
    /// A text of up to sixteen bytes (nearly all of them) is read once: the blocks that
    /// copy it are the ones tested, so its length is tested once, not once for the test
    /// and again for the copy. The copy goes to the spare capacity first and counts only
    /// when the test passes.
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn try_put_plain_json_field_then(&mut self, prefix: &[u8], text: &str, suffix: &[u8]) -> bool {
        let bytes = text.as_bytes();
        let n = bytes.len();
        let total = prefix.len() + n + 2 + suffix.len();
        let room = self.room_after(total);
        let body = self.cur.wrapping_add(prefix.len() + 1);
        // SAFETY (every block): `room_after` made sure that `total` bytes fit after
        // `cur`, and every write below stays inside them: the prefix and the opening
        // quote, the text's `n` bytes at `body`, the closing quote and the suffix; the
        // sources are shared borrows and cannot overlap the spare capacity.
        let escapes = unsafe {
            copy_to(prefix, self.cur);
            body.sub(1).write(b'"');
            if n > 16 {
                copy_to(bytes, body);
                needs_escape_any(bytes)
            } else if n >= 8 {
                let (low, high) = (chunk::<8>(bytes, 0), chunk::<8>(bytes, n - 8));
                body.cast::<[u8; 8]>().write_unaligned(low);
                body.add(n - 8).cast::<[u8; 8]>().write_unaligned(high);
                let mut block = [0u8; 16];
                block[..8].copy_from_slice(&low);
                block[8..].copy_from_slice(&high);
                block_needs_escape(block)
            } else if n >= 4 {
                let (low, high) = (chunk::<4>(bytes, 0), chunk::<4>(bytes, n - 4));
                body.cast::<[u8; 4]>().write_unaligned(low);
                body.add(n - 4).cast::<[u8; 4]>().write_unaligned(high);
                let ([a, b, c, d], [e, f, g, h]) = (low, high);
                block_needs_escape([a, b, c, d, e, f, g, h, a, b, c, d, e, f, g, h])
            } else {
                copy_to(bytes, body);
                bytes.iter().any(|&b| needs_escape(b))
            }
        };
        if escapes {
            return false;
        }
        // SAFETY: as above.
        unsafe {
            body.add(n).write(b'"');
            copy_to(suffix, body.add(n + 1));
        }
        self.cur = self.cur.wrapping_add(total);
        self.room = room;
        #[cfg(test)]
        PLAIN_JSON_FIELDS.with(|hits| hits.set(hits.get() + 1));
        true
    }

    #[cfg_attr(not(debug_assertions), inline(always))]
    fn put_json_escaped(&mut self, bytes: &[u8]) {
        self.with_vec(|out| {
            out.push(b'"');
            push_json_escaped(out, bytes);
            out.push(b'"');
        });
    }

    /// Appends an unsigned integer in decimal, as [`push_u64`](super::push_u64) does.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn put_u64(&mut self, value: u64) {
        self.put_u64_after(b"", value);
    }

    /// Appends `prefix` (typically a `,"key":`) and then an unsigned integer in decimal,
    /// as [`push_u64`](super::push_u64) writes it.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn put_u64_after(&mut self, prefix: &[u8], value: u64) {
        // Nesting levels, line numbers, ids: most values have four digits or fewer.
        // Those are stored as four bytes in one go, of which only the digits count.
        if value >= 10_000 {
            self.put_all([prefix, itoa::Buffer::new().format(value).as_bytes()]);
            return;
        }
        let v = value as usize;
        if v < 10 {
            // A nesting level, nearly always: one byte after the prefix, with nothing
            // to assemble.
            self.put_all([prefix, &[b'0' + v as u8]]);
            return;
        }
        let (digits, used) = if v < 100 {
            let [a, b] = pair(v);
            ([a, b, 0, 0], 2)
        } else if v < 1000 {
            let [a, b] = pair(v % 100);
            ([b'0' + (v / 100) as u8, a, b, 0], 3)
        } else {
            let ([a, b], [c, d]) = (pair(v / 100), pair(v % 100));
            ([a, b, c, d], 4)
        };
        let room = self.room_after(prefix.len() + digits.len());
        // SAFETY: `room_after` made sure that the prefix and all four bytes fit after
        // `cur`; `prefix` is a shared borrow and cannot overlap the spare capacity.
        unsafe {
            copy_to(prefix, self.cur);
            copy_to(&digits, self.cur.add(prefix.len()));
        }
        self.cur = self.cur.wrapping_add(prefix.len() + used);
        self.room = room + (digits.len() - used);
    }

    /// Appends a signed integer in decimal, as [`push_i64`](super::push_i64) does.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn put_i64(&mut self, value: i64) {
        self.put_i64_after(b"", value);
    }

    /// Appends `prefix` and then a signed integer in decimal, as [`push_i64`](super::push_i64) writes it.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn put_i64_after(&mut self, prefix: &[u8], value: i64) {
        if value < 0 {
            self.put_all([prefix, b"-"]);
            self.put_u64_after(b"", value.unsigned_abs());
        } else {
            self.put_u64_after(prefix, value.unsigned_abs());
        }
    }

    /// Appends microseconds as seconds with six decimals, as [`push_seconds`](super::push_seconds) does.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn put_seconds(&mut self, micros: u64) {
        self.put_seconds_after(b"", micros);
    }

    /// Appends `prefix` and then microseconds as seconds with six decimals, as
    /// [`push_seconds`](super::push_seconds) writes them.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn put_seconds_after(&mut self, prefix: &[u8], micros: u64) {
        let whole = micros / 1_000_000;
        let fraction = digits6((micros - whole * 1_000_000) as u32);
        if whole < 10 {
            let [a, b, c, d, e, f] = fraction;
            let text = [b'0' + whole as u8, b'.', a, b, c, d, e, f];
            self.put_all([prefix, &text]);
        } else {
            self.put_all([prefix, itoa::Buffer::new().format(whole).as_bytes()]);
            self.put_all([b".", &fraction]);
        }
    }
}

impl Drop for Appender<'_> {
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn drop(&mut self) {
        if self.cur.is_null() {
            return;
        }
        let len = self.len();
        // SAFETY: `len` is within the capacity and every byte before `cur` is written.
        unsafe { self.vec.set_len(len) };
    }
}

/// Copies `src` to the start of `dst`, safely (out of room is a panic). Nearly every
/// piece of a trace line is short: up to 32 bytes go as two overlapping fixed-size
/// copies, which the compiler turns into a few moves, rather than a call to `memcpy`.
/// For formatters that fill a stretch of the output in place; [`Appender`](super::Appender) is the
/// same idea for appending.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn copy_short(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    let dst = &mut dst[..n];
    match n {
        0 => {}
        1..=3 => {
            dst[0] = src[0];
            dst[n / 2] = src[n / 2];
            dst[n - 1] = src[n - 1];
        }
        4..=7 => {
            dst[..4].copy_from_slice(&src[..4]);
            dst[n - 4..].copy_from_slice(&src[n - 4..]);
        }
        8..=15 => {
            dst[..8].copy_from_slice(&src[..8]);
            dst[n - 8..].copy_from_slice(&src[n - 8..]);
        }
        16..=32 => {
            dst[..16].copy_from_slice(&src[..16]);
            dst[n - 16..].copy_from_slice(&src[n - 16..]);
        }
        _ => dst.copy_from_slice(src),
    }
}

/// [`copy_to`] with the length tested from the long end: 65 to 128 bytes and 33 to 64
/// bytes take two tests each.
///
/// # Safety
///
/// As [`copy_to`]: `dst` must be valid for writes of `src.len()` bytes and must not
/// overlap `src`.
#[cfg_attr(not(debug_assertions), inline(always))]
unsafe fn copy_long_to(src: &[u8], dst: *mut u8) {
    let n = src.len();
    // SAFETY (every block): each write stays inside `dst[..n]`, which the caller
    // guarantees is writable; `write_unaligned` has no alignment requirement.
    if n > 64 {
        if n <= 128 {
            unsafe {
                dst.cast::<[u8; 64]>().write_unaligned(chunk(src, 0));
                dst.add(n - 64)
                    .cast::<[u8; 64]>()
                    .write_unaligned(chunk(src, n - 64));
            }
        } else {
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst, n) };
        }
    } else if n > 32 {
        unsafe {
            dst.cast::<[u8; 32]>().write_unaligned(chunk(src, 0));
            dst.add(n - 32)
                .cast::<[u8; 32]>()
                .write_unaligned(chunk(src, n - 32));
        }
    } else {
        // SAFETY: as above.
        unsafe { copy_to(src, dst) };
    }
}

/// Copies `src` to `dst`. Up to 128 bytes (nearly every piece of a trace line) go as
/// two possibly overlapping word-sized moves instead of a call to `memcpy`.
///
/// # Safety
///
/// `dst` must be valid for writes of `src.len()` bytes and must not overlap `src`.
#[cfg_attr(not(debug_assertions), inline(always))]
unsafe fn copy_to(src: &[u8], dst: *mut u8) {
    let n = src.len();
    // SAFETY (every block): each write stays inside `dst[..n]`, which the caller
    // guarantees is writable; `write_unaligned` has no alignment requirement.
    if n <= 16 {
        if n >= 8 {
            unsafe {
                dst.cast::<[u8; 8]>().write_unaligned(chunk(src, 0));
                dst.add(n - 8)
                    .cast::<[u8; 8]>()
                    .write_unaligned(chunk(src, n - 8));
            }
        } else if n >= 4 {
            unsafe {
                dst.cast::<[u8; 4]>().write_unaligned(chunk(src, 0));
                dst.add(n - 4)
                    .cast::<[u8; 4]>()
                    .write_unaligned(chunk(src, n - 4));
            }
        } else if n > 0 {
            // One to three bytes: first, middle and last cover them all.
            unsafe {
                dst.write(src[0]);
                dst.add(n / 2).write(src[n / 2]);
                dst.add(n - 1).write(src[n - 1]);
            }
        }
    } else if n <= 32 {
        unsafe {
            dst.cast::<[u8; 16]>().write_unaligned(chunk(src, 0));
            dst.add(n - 16)
                .cast::<[u8; 16]>()
                .write_unaligned(chunk(src, n - 16));
        }
    } else if n <= 64 {
        unsafe {
            dst.cast::<[u8; 32]>().write_unaligned(chunk(src, 0));
            dst.add(n - 32)
                .cast::<[u8; 32]>()
                .write_unaligned(chunk(src, n - 32));
        }
    } else if n <= 128 {
        // The sid and thread of a line (some 70 bytes) come this way.
        unsafe {
            dst.cast::<[u8; 64]>().write_unaligned(chunk(src, 0));
            dst.add(n - 64)
                .cast::<[u8; 64]>()
                .write_unaligned(chunk(src, n - 64));
        }
    } else {
        // SAFETY: as above, for the whole of `src`.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst, n) };
    }
}
