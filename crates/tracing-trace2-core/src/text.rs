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

/// Appends `value` as exactly six digits (with leading zeros).
#[inline]
fn push_micros6(out: &mut Vec<u8>, value: u64) {
    let mut digits = [b'0'; 6];
    let mut v = value;
    for d in digits.iter_mut().rev() {
        *d = b'0' + (v % 10) as u8;
        v /= 10;
    }
    out.extend_from_slice(&digits);
}

/// Appends `value` (< 100) as two digits.
#[inline]
fn push_2(out: &mut Vec<u8>, value: u32) {
    out.push(b'0' + (value / 10 % 10) as u8);
    out.push(b'0' + (value % 10) as u8);
}

/// Appends microseconds as seconds with six decimals (`%.6f`): `0.000410`, `12.500000`.
#[inline]
pub fn push_seconds(out: &mut Vec<u8>, micros: u64) {
    push_u64(out, micros / 1_000_000);
    out.push(b'.');
    push_micros6(out, micros % 1_000_000);
}

/// Appends microseconds as seconds right-aligned in at least nine columns (`%9.6f`).
#[inline]
pub fn push_seconds_9(out: &mut Vec<u8>, micros: u64) {
    let whole = micros / 1_000_000;
    if whole < 10 {
        out.push(b' ');
    }
    push_seconds(out, micros);
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
pub fn push_json_str(out: &mut Vec<u8>, text: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let bytes = text.as_bytes();
    let mut plain_from = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x0c => b"\\f",
            0x08 => b"\\b",
            0..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[plain_from..i]);
        plain_from = i + 1;
        if escape.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[(b >> 4) as usize]);
            out.push(HEX[(b & 0xf) as usize]);
        } else {
            out.extend_from_slice(escape);
        }
    }
    out.extend_from_slice(&bytes[plain_from..]);
    out.push(b'"');
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
pub fn push_time_of_day(out: &mut Vec<u8>, wall_us: i64, offset_secs: i32) {
    let t = DateTime::from_micros(wall_us, offset_secs);
    push_2(out, t.hour);
    out.push(b':');
    push_2(out, t.minute);
    out.push(b':');
    push_2(out, t.second);
    out.push(b'.');
    push_micros6(out, u64::from(t.micros));
}

/// Appends the UTC time `YYYY-MM-DDTHH:MM:SS.ffffffZ` (the Event `time` key, unquoted).
pub fn push_utc_datetime(out: &mut Vec<u8>, wall_us: i64) {
    push_datetime(out, wall_us, true);
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
