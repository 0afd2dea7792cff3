//! Formatting primitives shared by the Normal, Perf and Event formatters.
//!
//! Every function appends to a `Vec<u8>` and allocates nothing beyond growing it. Small
//! numbers are written from a table of digit pairs, larger ones with `itoa`; elapsed
//! times are whole microseconds, printed as seconds with six decimals straight from the
//! integer (no floating point involved).
//!
//! The `push_*` functions each take the vector; [`Appender`] writes the same texts for
//! a formatter that puts many small pieces on one line, at a fraction of the cost per
//! piece.
//!
//! The hot helpers are inlined by force only in optimized builds
//! (`cfg_attr(not(debug_assertions), inline(always))`): an unoptimized build gives every
//! inlined copy's temporaries stack slots of their own, which made a formatter's frame
//! hundreds of KiB and overflowed threads with small stacks.

/// Appends an unsigned integer in decimal.
#[inline]
pub fn push_u64(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
}

/// Appends a signed integer in decimal.
#[inline]
pub fn push_i64(out: &mut Vec<u8>, value: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
}

/// The two-digit texts `00` to `99`, back to back.
const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Appends `value` (< 1 000 000) as exactly six digits (with leading zeros), two digits
/// at a time.
#[inline]
fn push_micros6(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(&micros6(value));
}

/// Appends `value` (< 100) as two digits.
#[inline]
fn push_2(out: &mut Vec<u8>, value: u32) {
    out.push(b'0' + (value / 10 % 10) as u8);
    out.push(b'0' + (value % 10) as u8);
}

/// The six digits of `value` (< 1 000 000), with leading zeros.
#[cfg_attr(not(debug_assertions), inline(always))]
fn micros6(value: u64) -> [u8; 6] {
    digits6((value % 1_000_000) as u32)
}

/// The six digits of `v`, which is below 1 000 000, with leading zeros: split in
/// three pairs with 32-bit arithmetic, each pair looked up whole.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn digits6(v: u32) -> [u8; 6] {
    debug_assert!(v < 1_000_000);
    // Remainders rather than subtractions: the compiler then knows every pair is
    // below 100 and drops the table's bounds checks.
    let high = v / 10_000;
    let rest = v % 10_000;
    let mid = rest / 100;
    let low = rest % 100;
    let ([a, b], [c, d], [e, f]) = (
        pair(high as usize % 100),
        pair(mid as usize),
        pair(low as usize),
    );
    [a, b, c, d, e, f]
}

/// Appends microseconds as seconds with six decimals (`%.6f`): `0.000410`, `12.500000`.
#[inline]
pub fn push_seconds(out: &mut Vec<u8>, micros: u64) {
    let whole = micros / 1_000_000;
    if whole < 10 {
        // The usual case, in one fixed-size copy.
        let mut text = [b'.'; 8];
        text[0] = b'0' + whole as u8;
        text[2..].copy_from_slice(&micros6(micros));
        out.extend_from_slice(&text);
    } else {
        push_u64(out, whole);
        out.push(b'.');
        out.extend_from_slice(&micros6(micros));
    }
}

/// Appends microseconds as seconds right-aligned in at least nine columns (`%9.6f`).
#[inline]
pub fn push_seconds_9(out: &mut Vec<u8>, micros: u64) {
    if micros < 10_000_000 {
        let mut text = [b' '; 9];
        text[1] = b'0' + (micros / 1_000_000) as u8;
        text[2] = b'.';
        text[3..].copy_from_slice(&micros6(micros));
        out.extend_from_slice(&text);
    } else {
        push_seconds(out, micros);
    }
}

/// Appends nanoseconds as seconds rounded to six decimals (`%.6f` of `ns / 1e9`), the way
/// timer totals are printed. The rounding is the one C's printf applies to the double.
pub fn push_timer_seconds(out: &mut Vec<u8>, nanos: u64) {
    use std::io::Write;
    let _ = write!(out, "{:.6}", nanos as f64 / 1e9);
}

/// Whether `byte` may stand unquoted in a shell-style quoted argument.
#[inline]
fn is_plain(byte: u8) -> bool {
    byte.is_ascii_alphanumeric()
        || matches!(
            byte,
            b'+' | b',' | b'-' | b'.' | b'/' | b':' | b'=' | b'@' | b'_' | b'^'
        )
}

/// Appends `arg` with git's shell-style quoting: verbatim when every byte is plain, else
/// inside single quotes with `'` written as `'\''` and `!` as `'\!'`; `''` when empty.
pub fn push_quoted(out: &mut Vec<u8>, arg: &str) {
    let bytes = arg.as_bytes();
    if !bytes.is_empty() && bytes.iter().all(|&b| is_plain(b)) {
        out.extend_from_slice(bytes);
        return;
    }
    out.push(b'\'');
    for &b in bytes {
        match b {
            b'\'' => out.extend_from_slice(b"'\\''"),
            b'!' => out.extend_from_slice(b"'\\!'"),
            _ => out.push(b),
        }
    }
    out.push(b'\'');
}

/// Appends every element quoted with [`push_quoted`], separated by single spaces.
pub fn push_quoted_list(out: &mut Vec<u8>, args: &[&str]) {
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        push_quoted(out, arg);
    }
}

/// Appends spaces until `out` is at least `len` bytes long.
#[inline]
pub fn pad_to(out: &mut Vec<u8>, len: usize) {
    if out.len() < len {
        out.resize(len, b' ');
    }
}

/// Appends `text` left-justified in at least `width` bytes (`%-Ns`); never truncates.
#[inline]
pub fn push_padded(out: &mut Vec<u8>, text: &str, width: usize) {
    let start = out.len();
    out.extend_from_slice(text.as_bytes());
    pad_to(out, start + width);
}

/// Appends `text` cut to `width` bytes and padded to exactly `width` (`%-N.Ns`). The cut
/// is byte-wise, as git's.
#[inline]
pub fn push_cut_padded(out: &mut Vec<u8>, text: &str, width: usize) {
    let bytes = text.as_bytes();
    let start = out.len();
    out.extend_from_slice(&bytes[..bytes.len().min(width)]);
    pad_to(out, start + width);
}

/// Appends `text` as a JSON string, quotes included, escaped as git's json-writer does:
/// `"` `\` and control characters are escaped (`\n` `\r` `\t` `\f` `\b`, else `\u00xx`
/// in lowercase), everything else (DEL, `/`, non-ASCII) is copied as it is.
#[inline]
pub fn push_json_str(out: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    // Nearly every string in a trace needs no escaping: test eight bytes at a time and
    // copy the whole string in one go; escape byte by byte only when a word says so.
    if needs_escape_any(bytes) {
        push_json_escaped(out, bytes);
    } else {
        out.extend_from_slice(bytes);
    }
    out.push(b'"');
}

/// Whether a byte must be escaped inside a JSON string.
#[inline]
fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// Whether any byte of `bytes` must be escaped in JSON.
///
/// The string is tested sixteen bytes at a time; blocks may overlap (the last one ends
/// at the string's end), which only tests some bytes twice. Strings of 8 to 16 bytes,
/// the most common, take a single block made of their first and last eight bytes.
#[cfg_attr(not(debug_assertions), inline(always))]
fn needs_escape_any(bytes: &[u8]) -> bool {
    let len = bytes.len();
    if len < 8 {
        if len >= 4 {
            // Two overlapping four-byte halves, twice over, make a block of the
            // string's own bytes.
            let ([a, b, c, d], [e, f, g, h]) = (chunk(bytes, 0), chunk(bytes, len - 4));
            return block_needs_escape([a, b, c, d, e, f, g, h, a, b, c, d, e, f, g, h]);
        }
        return bytes.iter().any(|&b| needs_escape(b));
    }
    let pair_at = |first: usize, second: usize| {
        let mut block = [0u8; 16];
        block[..8].copy_from_slice(&bytes[first..first + 8]);
        block[8..].copy_from_slice(&bytes[second..second + 8]);
        block
    };
    if len <= 16 {
        return block_needs_escape(pair_at(0, len - 8));
    }
    let mut i = 0;
    while i + 16 < len {
        if block_needs_escape(chunk(bytes, i)) {
            return true;
        }
        i += 16;
    }
    // The tail: the last sixteen bytes, overlapping bytes already tested.
    block_needs_escape(chunk(bytes, len - 16))
}

/// Whether any of the sixteen bytes in `block` is `"`, `\` or below 0x20.
#[cfg_attr(not(debug_assertions), inline(always))]
fn block_needs_escape(block: [u8; 16]) -> bool {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
        };
        // SAFETY: SSE2 is enabled (the `cfg` above), so the intrinsics may run; they
        // only compute on registers. `[u8; 16]` and `__m128i` have the same size and
        // every bit pattern is valid for both.
        unsafe {
            let v: __m128i = std::mem::transmute::<[u8; 16], __m128i>(block);
            let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
            let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
            // Unsigned `min(v, 0x1f) == v` is `v <= 0x1f`.
            let control = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
            _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)) != 0
        }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        block_needs_escape_portable(block)
    }
}

/// [`block_needs_escape`] without SIMD: two word-wide tests.
#[cfg_attr(
    all(target_arch = "x86_64", target_feature = "sse2", not(test)),
    allow(dead_code)
)]
#[cfg_attr(not(debug_assertions), inline(always))]
fn block_needs_escape_portable(block: [u8; 16]) -> bool {
    let (low, high) = (chunk(&block, 0), chunk(&block, 8));
    word_needs_escape(u64::from_ne_bytes(low)) || word_needs_escape(u64::from_ne_bytes(high))
}

/// Whether any of the eight bytes in `v` is `"`, `\` or below 0x20. These word-wide
/// tests are exact for the word as a whole (they may only mislabel which byte matched).
#[inline]
fn word_needs_escape(v: u64) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    const QUOTE: u64 = u64::from_ne_bytes([b'"'; 8]);
    const BACKSLASH: u64 = u64::from_ne_bytes([b'\\'; 8]);
    const SPACE: u64 = u64::from_ne_bytes([0x20; 8]);
    let zero_in = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let below_space = v.wrapping_sub(SPACE) & !v & HIGH;
    (zero_in(v ^ QUOTE) | zero_in(v ^ BACKSLASH) | below_space) != 0
}

/// Escapes `bytes` into `out`, byte by byte.
fn push_json_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut plain_from = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if !needs_escape(b) {
            continue;
        }
        out.extend_from_slice(&bytes[plain_from..i]);
        plain_from = i + 1;
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x0c => b"\\f",
            0x08 => b"\\b",
            _ => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(b >> 4) as usize]);
                out.push(HEX[(b & 0xf) as usize]);
                continue;
            }
        };
        out.extend_from_slice(escape);
    }
    out.extend_from_slice(&bytes[plain_from..]);
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

    /// Appends `text` as a JSON string, exactly as [`push_json_str`] does.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn put_json_str(&mut self, text: &str) {
        self.put_json_field(b"", text);
    }

    /// Appends `prefix` (copied as it is, typically a `,"key":`) and then `text` as a
    /// JSON string, exactly as [`push_json_str`] writes it.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn put_json_field(&mut self, prefix: &[u8], text: &str) {
        self.put_json_field_then(prefix, text, b"");
    }

    /// [`Appender::put_json_field`] followed by `suffix` (copied as it is), all with a
    /// single test for room on the usual path.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn put_json_field_then(&mut self, prefix: &[u8], text: &str, suffix: &[u8]) {
        let bytes = text.as_bytes();
        if needs_escape_any(bytes) {
            self.put(prefix);
            self.put_json_escaped(bytes);
            self.put(suffix);
            return;
        }
        self.put_all([prefix, b"\"", bytes, b"\"", suffix]);
    }

    #[cfg_attr(not(debug_assertions), inline(always))]
    fn put_json_escaped(&mut self, bytes: &[u8]) {
        self.with_vec(|out| {
            out.push(b'"');
            push_json_escaped(out, bytes);
            out.push(b'"');
        });
    }

    /// Appends an unsigned integer in decimal, as [`push_u64`] does.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn put_u64(&mut self, value: u64) {
        self.put_u64_after(b"", value);
    }

    /// Appends `prefix` (typically a `,"key":`) and then an unsigned integer in decimal,
    /// as [`push_u64`] writes it.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn put_u64_after(&mut self, prefix: &[u8], value: u64) {
        // Nesting levels, line numbers, ids: most values have four digits or fewer.
        // Those are stored as four bytes in one go, of which only the digits count.
        if value >= 10_000 {
            self.put_all([prefix, itoa::Buffer::new().format(value).as_bytes()]);
            return;
        }
        let v = value as usize;
        let (digits, used) = if v < 10 {
            ([b'0' + v as u8, 0, 0, 0], 1)
        } else if v < 100 {
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

    /// Appends a signed integer in decimal, as [`push_i64`] does.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn put_i64(&mut self, value: i64) {
        self.put_i64_after(b"", value);
    }

    /// Appends `prefix` and then a signed integer in decimal, as [`push_i64`] writes it.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn put_i64_after(&mut self, prefix: &[u8], value: i64) {
        if value < 0 {
            self.put_all([prefix, b"-"]);
            self.put_u64_after(b"", value.unsigned_abs());
        } else {
            self.put_u64_after(prefix, value.unsigned_abs());
        }
    }

    /// Appends microseconds as seconds with six decimals, as [`push_seconds`] does.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn put_seconds(&mut self, micros: u64) {
        self.put_seconds_after(b"", micros);
    }

    /// Appends `prefix` and then microseconds as seconds with six decimals, as
    /// [`push_seconds`] writes them.
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

/// The two digits of `value` (< 100).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn pair(value: usize) -> [u8; 2] {
    [PAIRS[2 * value], PAIRS[2 * value + 1]]
}

/// Copies `src` to the start of `dst`, safely (out of room is a panic). Nearly every
/// piece of a trace line is short: up to 32 bytes go as two overlapping fixed-size
/// copies, which the compiler turns into a few moves, rather than a call to `memcpy`.
/// For formatters that fill a stretch of the output in place; [`Appender`] is the
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

/// The `N` bytes of `src` from `at` (the caller knows they are there).
#[cfg_attr(not(debug_assertions), inline(always))]
fn chunk<const N: usize>(src: &[u8], at: usize) -> [u8; N] {
    let mut bytes = [0; N];
    bytes.copy_from_slice(&src[at..at + N]);
    bytes
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

/// A calendar date and time of day, broken down from a Unix time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DateTime {
    /// Year (proleptic Gregorian).
    pub year: i64,
    /// Month, 1..=12.
    pub month: u32,
    /// Day of the month, 1..=31.
    pub day: u32,
    /// Hour, 0..=23.
    pub hour: u32,
    /// Minute, 0..=59.
    pub minute: u32,
    /// Second, 0..=59.
    pub second: u32,
    /// Microsecond, 0..=999999.
    pub micros: u32,
}

impl DateTime {
    /// Breaks down `wall_us` (µs since the epoch) shifted by `offset_secs` (east of UTC).
    pub fn from_micros(wall_us: i64, offset_secs: i32) -> DateTime {
        let local_us = wall_us + i64::from(offset_secs) * 1_000_000;
        let secs = local_us.div_euclid(1_000_000);
        let micros = local_us.rem_euclid(1_000_000) as u32;
        let days = secs.div_euclid(86_400);
        let sod = secs.rem_euclid(86_400) as u32;
        // Civil date from a day count (Howard Hinnant's days-to-civil algorithm).
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let year = yoe + era * 400 + i64::from(month <= 2);
        DateTime {
            year,
            month,
            day,
            hour: sod / 3600,
            minute: sod / 60 % 60,
            second: sod % 60,
            micros,
        }
    }
}

/// Appends the time of day `HH:MM:SS.ffffff` of `wall_us` in the zone `offset_secs`
/// east of UTC (the Normal and Perf line prefix).
#[inline]
pub fn push_time_of_day(out: &mut Vec<u8>, wall_us: i64, offset_secs: i32) {
    // Only the time of day is needed: no calendar date to work out.
    let local_us = wall_us + i64::from(offset_secs) * 1_000_000;
    let sod = local_us.div_euclid(1_000_000).rem_euclid(86_400) as u32;
    let micros = local_us.rem_euclid(1_000_000) as u64;
    push_2(out, sod / 3600);
    out.push(b':');
    push_2(out, sod / 60 % 60);
    out.push(b':');
    push_2(out, sod % 60);
    out.push(b'.');
    push_micros6(out, micros);
}

/// Appends the UTC time `YYYY-MM-DDTHH:MM:SS.ffffffZ` (the Event `time` key, unquoted).
#[inline]
pub fn push_utc_datetime(out: &mut Vec<u8>, wall_us: i64) {
    out.extend_from_slice(&utc_datetime_text(wall_us));
}

/// The UTC time `YYYY-MM-DDTHH:MM:SS.ffffffZ` of `wall_us` as a fixed-size text, the
/// same bytes [`push_utc_datetime`] appends.
#[inline]
pub fn utc_datetime_text(wall_us: i64) -> [u8; 27] {
    // Lines come many per second: the date and time up to the second are worked out
    // once per second and thread, and only the microseconds for each line. The cache
    // holds the first microsecond of its second, so that a hit costs a subtraction
    // and a comparison rather than a division.
    let cached = UTC_SECOND.try_with(|cached| {
        let (start, text) = cached.get();
        let into = wall_us.wrapping_sub(start) as u64;
        if into < 1_000_000 {
            return (text, into as u32);
        }
        match utc_second(wall_us) {
            Some((start, text)) => {
                cached.set((start, text));
                (text, (wall_us - start) as u32)
            }
            None => (
                utc_second_text(wall_us.div_euclid(1_000_000)),
                wall_us.rem_euclid(1_000_000) as u32,
            ),
        }
    });
    // While the thread's storage is being torn down: work it out every time.
    let (prefix, micros) = cached.unwrap_or_else(|_| {
        let secs = wall_us.div_euclid(1_000_000);
        (utc_second_text(secs), wall_us.rem_euclid(1_000_000) as u32)
    });
    let mut text = [b'Z'; 27];
    text[..20].copy_from_slice(&prefix);
    text[20..26].copy_from_slice(&digits6(micros));
    text
}

/// The second that `wall_us` falls in, for callers that keep its text: the first
/// microsecond of that second and its text `YYYY-MM-DDTHH:MM:SS.` (what
/// [`utc_datetime_text`] writes before the microseconds). A time `t` lies in the same
/// second exactly when `t.wrapping_sub(start) as u64 < 1_000_000`. `None` for a
/// second at the far ends of the `i64` range, for which that test would wrap around.
pub fn utc_second(wall_us: i64) -> Option<(i64, [u8; 20])> {
    let secs = wall_us.div_euclid(1_000_000);
    let start = secs
        .checked_mul(1_000_000)
        .filter(|&start| start <= i64::MAX - 1_000_000)?;
    Some((start, utc_second_text(secs)))
}

/// The six digits `ffffff` of `micros % 1_000_000`, with leading zeros: the fraction
/// in [`push_seconds`] and [`utc_datetime_text`].
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn micros_digits(micros: u64) -> [u8; 6] {
    micros6(micros)
}

/// `YYYY-MM-DDTHH:MM:SS.` of a Unix time in whole seconds.
fn utc_second_text(secs: i64) -> [u8; 20] {
    let t = DateTime::from_micros(secs.saturating_mul(1_000_000), 0);
    let year = t.year.clamp(0, 9999) as u32;
    let two = |v: u32| [b'0' + (v / 10 % 10) as u8, b'0' + (v % 10) as u8];
    let mut text = [0u8; 20];
    text[0..2].copy_from_slice(&two(year / 100));
    text[2..4].copy_from_slice(&two(year % 100));
    text[4] = b'-';
    text[5..7].copy_from_slice(&two(t.month));
    text[7] = b'-';
    text[8..10].copy_from_slice(&two(t.day));
    text[10] = b'T';
    text[11..13].copy_from_slice(&two(t.hour));
    text[13] = b':';
    text[14..16].copy_from_slice(&two(t.minute));
    text[16] = b':';
    text[17..19].copy_from_slice(&two(t.second));
    text[19] = b'.';
    text
}

thread_local! {
    /// The first microsecond of the last second [`utc_datetime_text`] wrote on this
    /// thread, and that second's text up to and including the `.` (20 bytes). It
    /// starts out as the epoch's second, whose text is known.
    static UTC_SECOND: std::cell::Cell<(i64, [u8; 20])> =
        const { std::cell::Cell::new((0, *b"1970-01-01T00:00:00.")) };
}

/// Appends the UTC time in the compact form of a session id: `YYYYMMDDTHHMMSS.ffffffZ`.
pub fn push_sid_datetime(out: &mut Vec<u8>, wall_us: i64) {
    push_datetime(out, wall_us, false);
}

fn push_datetime(out: &mut Vec<u8>, wall_us: i64, separators: bool) {
    let t = DateTime::from_micros(wall_us, 0);
    let year = t.year.clamp(0, 9999) as u32;
    push_2(out, year / 100);
    push_2(out, year % 100);
    if separators {
        out.push(b'-');
    }
    push_2(out, t.month);
    if separators {
        out.push(b'-');
    }
    push_2(out, t.day);
    out.push(b'T');
    push_2(out, t.hour);
    if separators {
        out.push(b':');
    }
    push_2(out, t.minute);
    if separators {
        out.push(b':');
    }
    push_2(out, t.second);
    out.push(b'.');
    push_micros6(out, u64::from(t.micros));
    out.push(b'Z');
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length up to 80, and nothing past the copy is touched.
    #[test]
    fn copy_short_copies_every_length() {
        let src: Vec<u8> = (0..80u8)
            .map(|b| b.wrapping_mul(7).wrapping_add(1))
            .collect();
        for n in 0..=src.len() {
            let mut dst = vec![0xaa; 90];
            copy_short(&mut dst, &src[..n]);
            assert_eq!(&dst[..n], &src[..n], "{n}");
            assert!(dst[n..].iter().all(|&b| b == 0xaa), "{n}");
        }
    }

    fn s(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut v = Vec::new();
        f(&mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn seconds() {
        assert_eq!(s(|o| push_seconds(o, 410)), "0.000410");
        assert_eq!(s(|o| push_seconds(o, 3_001_686)), "3.001686");
        assert_eq!(s(|o| push_seconds_9(o, 845)), " 0.000845");
        assert_eq!(s(|o| push_seconds_9(o, 10_000_000)), "10.000000");
        assert_eq!(s(|o| push_seconds_9(o, 123_000_000)), "123.000000");
        for micros in [
            0,
            1,
            999_999,
            1_000_000,
            9_999_999,
            10_000_000,
            86_400_123_456,
        ] {
            let expected = format!("{}.{:06}", micros / 1_000_000, micros % 1_000_000);
            assert_eq!(s(|o| push_seconds(o, micros)), expected);
            assert_eq!(s(|o| push_seconds_9(o, micros)), format!("{expected:>9}"));
        }
    }

    #[test]
    fn timer_seconds_round_like_printf() {
        assert_eq!(s(|o| push_timer_seconds(o, 20_141_499)), "0.020141");
        assert_eq!(s(|o| push_timer_seconds(o, 20_141_501)), "0.020142");
        assert_eq!(s(|o| push_timer_seconds(o, 0)), "0.000000");
    }

    #[test]
    fn quoting() {
        assert_eq!(s(|o| push_quoted(o, "")), "''");
        assert_eq!(
            s(|o| push_quoted(o, "a-b_c.d/e:f=g@h+i,j^k")),
            "a-b_c.d/e:f=g@h+i,j^k"
        );
        assert_eq!(s(|o| push_quoted(o, "arg two")), "'arg two'");
        assert_eq!(
            s(|o| push_quoted(o, "alias.x=!echo hi")),
            "'alias.x='\\!'echo hi'"
        );
        assert_eq!(
            s(|o| push_quoted(o, "my proc (x)'q")),
            "'my proc (x)'\\''q'"
        );
        assert_eq!(s(|o| push_quoted(o, "é")), "'é'");
        assert_eq!(
            s(|o| push_quoted_list(o, &["git", "-c", "a b", ""])),
            "git -c 'a b' ''"
        );
    }

    #[test]
    fn padding() {
        assert_eq!(s(|o| push_padded(o, "data", 12)), "data        ");
        assert_eq!(s(|o| push_padded(o, "region_enter!", 12)), "region_enter!");
        assert_eq!(
            s(|o| push_cut_padded(o, "traverse_trees", 12)),
            "traverse_tre"
        );
        assert_eq!(s(|o| push_cut_padded(o, "", 3)), "   ");
    }

    #[test]
    fn json_escaping() {
        assert_eq!(
            s(|o| push_json_str(o, "bad\"na\\me\tx\u{1}\u{7f}é/")),
            "\"bad\\\"na\\\\me\\tx\\u0001\u{7f}é/\""
        );
        assert_eq!(
            s(|o| push_json_str(o, "\u{1b}\u{8}\u{c}\r\n")),
            "\"\\u001b\\b\\f\\r\\n\""
        );
    }

    /// Escaping one byte at a time, the plain way: the reference for the fast scan.
    fn json_reference(text: &str) -> String {
        let mut out = String::from("\"");
        for c in text.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{c}' => out.push_str("\\f"),
                '\u{8}' => out.push_str("\\b"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    /// Every special byte at every position of strings longer than one scan word,
    /// next to bytes that look alike to a word-wide test (0x20, 0x21, 0x5b, 0xdc, DEL).
    #[test]
    fn json_escaping_at_every_position() {
        let specials = ['"', '\\', '\n', '\u{0}', '\u{1f}', '\u{c}'];
        let fillers = ["a", " ", "!", "[", "\u{7f}", "é", "ü"];
        for filler in fillers {
            for len in 0..70 {
                let base: String = filler.repeat(len);
                assert_eq!(s(|o| push_json_str(o, &base)), json_reference(&base));
                for special in specials {
                    for pos in 0..=base.chars().count() {
                        let mut text: String = base.chars().take(pos).collect();
                        text.push(special);
                        text.extend(base.chars().skip(pos));
                        text.push(special);
                        assert_eq!(
                            s(|o| push_json_str(o, &text)),
                            json_reference(&text),
                            "{text:?}"
                        );
                    }
                }
            }
        }
    }

    /// Everything the appender writes equals what the `push_*` functions write, from
    /// an empty vector, after existing bytes, and at every capacity around the size
    /// of the result (so that growing happens at every possible piece).
    #[test]
    fn appender_matches_push_functions() {
        let long = "x".repeat(300);
        let strings = [
            "",
            "a",
            "ab",
            "abc",
            "main",
            "index",
            "cache_nr",
            "benches/peers.rs",
            "count/untracked!",
            "exactly-seventeen",
            "tab\there",
            "q\"uote",
            "back\\slash",
            "ctl\u{1}\u{1f}",
            "é ü \u{7f} 日本",
            "20261121T232137.816920Z-H0a7c9cdf-P00002a1e",
            &long,
        ];
        let numbers = [
            0u64,
            1,
            9,
            10,
            99,
            100,
            999,
            1000,
            9999,
            10_000,
            123_456_789,
            u64::MAX,
        ];
        let signed = [0i64, 1, -1, -9, 9999, -10_000, i64::MIN, i64::MAX];
        let micros = [
            0u64,
            410,
            999_999,
            1_000_000,
            9_999_999,
            10_000_000,
            u64::MAX,
        ];
        let expected = {
            let mut out = b"head".to_vec();
            for text in strings {
                out.extend_from_slice(b",\"k\":");
                push_json_str(&mut out, text);
                out.push(b';');
                push_json_str(&mut out, text);
                out.extend_from_slice(text.as_bytes());
            }
            for n in numbers {
                out.extend_from_slice(b",\"n\":");
                push_u64(&mut out, n);
                push_u64(&mut out, n);
            }
            for n in signed {
                out.extend_from_slice(b",\"i\":");
                push_i64(&mut out, n);
                push_i64(&mut out, n);
            }
            for m in micros {
                out.extend_from_slice(b",\"t\":");
                push_seconds(&mut out, m);
                push_seconds(&mut out, m);
            }
            out.extend_from_slice(b"[tail]\n");
            out
        };
        let write = |out: &mut Vec<u8>| {
            let w = &mut Appender::new(out);
            for text in strings {
                w.put_json_field_then(b",\"k\":", text, b";");
                w.put_json_str(text);
                w.put(text.as_bytes());
            }
            for n in numbers {
                w.put_u64_after(b",\"n\":", n);
                w.put_u64(n);
            }
            for n in signed {
                w.put_i64_after(b",\"i\":", n);
                w.put_i64(n);
            }
            for m in micros {
                w.put_seconds_after(b",\"t\":", m);
                w.put_seconds(m);
            }
            w.with_vec(|out| out.push(b'['));
            w.put_all([b"tail", b"]", b"\n"]);
        };
        for capacity in (0..16).chain(expected.len() - 600..expected.len() + 2) {
            let mut out = Vec::with_capacity(capacity);
            out.extend_from_slice(b"head");
            write(&mut out);
            assert_eq!(
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&expected),
                "capacity {capacity}"
            );
        }
        let mut out = Vec::new();
        let w = &mut Appender::new(&mut out);
        assert!(w.is_empty());
        w.reserve(100);
        w.put_byte(b'x');
        assert_eq!(w.len(), 1);
    }

    /// A panic inside `with_vec`, after the vector has grown elsewhere, leaves the
    /// vector as `with_vec` left it.
    #[test]
    fn appender_survives_a_panic_in_with_vec() {
        let mut out = b"start".to_vec();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let w = &mut Appender::new(&mut out);
            w.put(b"-one");
            w.with_vec(|vec| {
                vec.extend_from_slice(&[b'x'; 4096]);
                panic!("inside");
            });
        }));
        assert!(result.is_err());
        assert_eq!(out.len(), 5 + 4 + 4096);
        assert!(out.starts_with(b"start-one"));
    }

    /// Every length up to two blocks and beyond, through the word-sized copies.
    #[test]
    fn appender_copies_every_length() {
        let source: Vec<u8> = (0..300).map(|i| b'a' + (i % 26) as u8).collect();
        for len in 0..source.len() {
            for start in [0, 1, 7] {
                let mut out = vec![b'-'; start];
                Appender::new(&mut out).put(&source[..len]);
                assert_eq!(&out[..start], &vec![b'-'; start][..]);
                assert_eq!(&out[start..], &source[..len], "{len}");
            }
        }
    }

    /// Fixed-size arrays, alone and before a slice of every length, whatever room the
    /// vector starts with (none, exactly enough, one byte short).
    #[test]
    fn appender_puts_arrays() {
        let source: Vec<u8> = (0..100).map(|i| b'A' + (i % 26) as u8).collect();
        for len in 0..source.len() {
            let want: Vec<u8> = [&b"pre"[..], &[1, 2, 3, 4], &source[..len], &[9; 9]].concat();
            for spare in [0, want.len() - 3, want.len() - 4, want.len()] {
                let mut out = Vec::with_capacity(spare);
                out.extend_from_slice(b"pre");
                {
                    let w = &mut Appender::new(&mut out);
                    w.put_array_then([1, 2, 3, 4], &source[..len]);
                    w.put_array([9u8; 9]);
                }
                assert_eq!(out, want, "{len} {spare}");
            }
        }
    }

    /// The SIMD block test, the portable one and the byte-wise one agree for every
    /// byte value at every position of a block.
    #[test]
    fn block_tests_agree() {
        for byte in 0..=255u8 {
            for pos in 0..16 {
                for filler in [b'a', b' ', 0x7f, 0xc3, 0x21, 0x5d] {
                    let mut block = [filler; 16];
                    block[pos] = byte;
                    let expected = block.iter().any(|&b| needs_escape(b));
                    assert_eq!(block_needs_escape(block), expected, "{byte} {pos}");
                    assert_eq!(block_needs_escape_portable(block), expected, "{byte} {pos}");
                }
            }
        }
    }

    #[test]
    fn dates() {
        // 2026-11-21T23:21:37.816991Z
        let wall = 1_795_303_297_816_991;
        assert_eq!(
            s(|o| push_utc_datetime(o, wall)),
            "2026-11-21T23:21:37.816991Z"
        );
        assert_eq!(s(|o| push_sid_datetime(o, wall)), "20261121T232137.816991Z");
        assert_eq!(s(|o| push_time_of_day(o, wall, 0)), "23:21:37.816991");
        assert_eq!(s(|o| push_time_of_day(o, wall, 3600)), "00:21:37.816991");
        assert_eq!(
            s(|o| push_utc_datetime(o, 951_782_400_000_000)),
            "2000-02-29T00:00:00.000000Z"
        );
    }

    /// The per-thread second cache must never hand out a stale second: alternate
    /// between seconds, cross minute, day and year boundaries, and go before 1970.
    #[test]
    fn cached_dates_match_the_uncached_ones() {
        let uncached = |wall: i64| s(|o| push_datetime(o, wall, true));
        let times = [
            1_795_303_297_816_991,
            1_795_303_297_000_000,
            1_795_303_298_000_001,
            1_795_303_297_999_999,
            1_798_761_599_999_999, // 2026-12-31T23:59:59.999999Z
            1_798_761_600_000_000,
            -1,
            -1_000_000,
            0,
        ];
        for _ in 0..2 {
            for wall in times {
                assert_eq!(s(|o| push_utc_datetime(o, wall)), uncached(wall), "{wall}");
            }
        }
        assert_eq!(
            s(|o| push_utc_datetime(o, -1)),
            "1969-12-31T23:59:59.999999Z"
        );
        // The far ends of the range: the last second is never kept (its range test
        // would wrap around to the first one).
        for _ in 0..2 {
            for wall in [i64::MAX, i64::MIN, i64::MIN + 5, i64::MAX - 5, i64::MAX] {
                assert_eq!(s(|o| push_utc_datetime(o, wall)), uncached(wall), "{wall}");
            }
        }
        // A new thread starts with the epoch's second in its cache.
        std::thread::spawn(move || {
            for wall in [999_999, 0, 1_000_000, -1, 0] {
                assert_eq!(s(|o| push_utc_datetime(o, wall)), uncached(wall), "{wall}");
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn time_of_day_matches_the_calendar_breakdown() {
        for wall in [
            1_795_303_297_816_991_i64,
            -1,
            0,
            86_399_999_999,
            3_600_000_000,
        ] {
            for offset in [0, 3600, -3600, 19_800, -36_000] {
                let t = DateTime::from_micros(wall, offset);
                let expected = format!(
                    "{:02}:{:02}:{:02}.{:06}",
                    t.hour, t.minute, t.second, t.micros
                );
                assert_eq!(s(|o| push_time_of_day(o, wall, offset)), expected);
            }
        }
    }
}

/// `text` as compact JSON (whitespace outside strings removed, key order kept), or `None`
/// when it is not valid JSON. Git embeds a `data_json` value verbatim and compact.
pub fn compact_json(text: &str) -> Option<String> {
    serde_json::from_str::<serde_json::Value>(text).ok()?;
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if !c.is_ascii_whitespace() {
            in_string = c == '"';
            out.push(c);
        }
    }
    Some(out)
}

#[cfg(test)]
mod json_tests {
    use super::compact_json;

    #[test]
    fn compacts_and_keeps_key_order() {
        assert_eq!(
            compact_json("{ \"z\": 1,\n  \"a\" : [1, \"t w\\\"o \"] }").as_deref(),
            Some("{\"z\":1,\"a\":[1,\"t w\\\"o \"]}")
        );
        assert_eq!(compact_json("{\"a\":"), None);
        assert_eq!(compact_json(" 7 ").as_deref(), Some("7"));
    }
}
