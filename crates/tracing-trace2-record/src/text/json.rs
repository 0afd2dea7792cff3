//! JSON strings escaped as git's json-writer escapes them, and compacting of JSON text.

use super::chunk;

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
pub(super) fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// Whether any byte of `bytes` must be escaped in JSON.
///
/// The string is tested sixteen bytes at a time; blocks may overlap (the last one ends
/// at the string's end), which only tests some bytes twice. Strings of 8 to 16 bytes,
/// the most common, take a single block made of their first and last eight bytes.
#[cfg_attr(not(debug_assertions), inline(always))]
pub(super) fn needs_escape_any(bytes: &[u8]) -> bool {
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
pub(super) fn block_needs_escape(block: [u8; 16]) -> bool {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
        };
        // The one `unsafe` of the crate outside the appender: a safe intrinsic still
        // needs it when called from a function without `#[target_feature]`.
        // SAFETY: SSE2 is enabled (the `cfg` above), so the intrinsics may run; they
        // only compute on registers. `[u8; 16]` and `__m128i` have the same size and
        // every bit pattern is valid for both.
        #[allow(unsafe_code)]
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
pub(super) fn block_needs_escape_portable(block: [u8; 16]) -> bool {
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
pub(super) fn push_json_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
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
    use super::{compact_json, push_json_str};

    /// A string that needs no escaping is written with the one reservation made up
    /// front, of exactly its quoted length: from an empty vector (which a reservation
    /// grows to the size asked), the capacity is the length, whatever the text's size.
    /// A reservation too small would grow the vector again (doubling it), one too
    /// large would show as spare capacity.
    #[test]
    fn a_plain_string_takes_one_exact_reservation() {
        for len in [20, 100, 1000] {
            let text = "p".repeat(len);
            let mut out = Vec::new();
            push_json_str(&mut out, &text);
            assert_eq!(out.len(), len + 2);
            assert_eq!(out.capacity(), out.len(), "{len}");
        }
    }

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
