//! Numbers: integers, microseconds as seconds with six decimals, timer seconds.
//!
//! Small numbers are written from a table of digit pairs, larger ones with `itoa`;
//! elapsed times are whole microseconds printed straight from the integer (no floating
//! point involved).

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
pub(crate) fn push_micros6(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(&micros6(value));
}

/// Appends `value` (< 100) as two digits.
#[inline]
pub(crate) fn push_2(out: &mut Vec<u8>, value: u32) {
    out.push(b'0' + (value / 10 % 10) as u8);
    out.push(b'0' + (value % 10) as u8);
}

/// The six digits of `value` (< 1 000 000), with leading zeros.
#[cfg_attr(not(debug_assertions), inline(always))]
pub(crate) fn micros6(value: u64) -> [u8; 6] {
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

/// The two digits of `value` (< 100).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn pair(value: usize) -> [u8; 2] {
    [PAIRS[2 * value], PAIRS[2 * value + 1]]
}
