//! Dates and times: the Normal/Perf time of day, the Event `time` (UTC) with a
//! per-thread cache of the current second, and the compact time of a session id.

use super::numbers::{digits6, micros6, push_2, push_micros6};

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
        let local_us = wall_us.wrapping_add(i64::from(offset_secs) * 1_000_000);
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
    let local_us = wall_us.wrapping_add(i64::from(offset_secs) * 1_000_000);
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
/// same bytes [`push_utc_datetime`](super::push_utc_datetime) appends.
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
/// [`utc_datetime_text`](super::utc_datetime_text) writes before the microseconds). A time `t` lies in the same
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
/// in [`push_seconds`](super::push_seconds) and [`utc_datetime_text`](super::utc_datetime_text).
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
    /// The first microsecond of the last second [`utc_datetime_text`](super::utc_datetime_text) wrote on this
    /// thread, and that second's text up to and including the `.` (20 bytes). It
    /// starts out as the epoch's second, whose text is known.
    static UTC_SECOND: std::cell::Cell<(i64, [u8; 20])> =
        const { std::cell::Cell::new((0, *b"1970-01-01T00:00:00.")) };
}

/// Appends the UTC time in the compact form of a session id: `YYYYMMDDTHHMMSS.ffffffZ`.
pub fn push_sid_datetime(out: &mut Vec<u8>, wall_us: i64) {
    push_datetime(out, wall_us, false);
}

pub(super) fn push_datetime(out: &mut Vec<u8>, wall_us: i64, separators: bool) {
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
