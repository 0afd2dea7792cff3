//! Formatting primitives shared by the Normal, Perf and Event formatters.
//!
//! Every function appends to a `Vec<u8>` and allocates nothing beyond growing it. Numbers
//! are written with `itoa`; elapsed times are whole microseconds, printed as seconds
//! with six decimals straight from the integer (no floating point involved).

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
#[inline]
fn micros6(value: u64) -> [u8; 6] {
    let v = (value % 1_000_000) as usize;
    let (high, mid, low) = (v / 10_000, v / 100 % 100, v % 100);
    let mut digits = [0u8; 6];
    digits[0..2].copy_from_slice(&PAIRS[2 * high..2 * high + 2]);
    digits[2..4].copy_from_slice(&PAIRS[2 * mid..2 * mid + 2]);
    digits[4..6].copy_from_slice(&PAIRS[2 * low..2 * low + 2]);
    digits
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
#[inline]
fn needs_escape_any(bytes: &[u8]) -> bool {
    let len = bytes.len();
    if len < 8 {
        return bytes.iter().any(|&b| needs_escape(b));
    }
    let word_at = |i: usize| {
        let mut word = [0u8; 8];
        word.copy_from_slice(&bytes[i..i + 8]);
        u64::from_ne_bytes(word)
    };
    let mut i = 0;
    while i + 8 <= len {
        if word_needs_escape(word_at(i)) {
            return true;
        }
        i += 8;
    }
    // The tail: the last eight bytes, overlapping bytes already tested.
    i < len && word_needs_escape(word_at(len - 8))
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
    let secs = wall_us.div_euclid(1_000_000);
    // Lines come many per second: the date and time up to the second are worked out
    // once per second and thread, and only the microseconds for each line.
    let prefix = UTC_SECOND
        .try_with(|cached| {
            let (second, text) = cached.get();
            if second == secs {
                return text;
            }
            let text = utc_second_text(secs);
            cached.set((secs, text));
            text
        })
        // While the thread's storage is being torn down: work it out every time.
        .unwrap_or_else(|_| utc_second_text(secs));
    out.extend_from_slice(&prefix);
    push_micros6(out, wall_us.rem_euclid(1_000_000) as u64);
    out.push(b'Z');
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
    /// The last second [`push_utc_datetime`] wrote on this thread, and its text up to
    /// and including the `.` (20 bytes).
    static UTC_SECOND: std::cell::Cell<(i64, [u8; 20])> =
        const { std::cell::Cell::new((i64::MIN, [0; 20])) };
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
            for len in 0..20 {
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
