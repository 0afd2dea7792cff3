//! Numbers and times as Event lines write them: seconds with decimals (`t_abs`, `t_rel`,
//! timer totals) and the UTC `time`, read exactly (no float on the way for the forms
//! git writes), with some slack for other writers' forms.

use tracing_trace2_record::text::push_timer_seconds;

/// Whole microseconds of a seconds value: exact for the six decimals the formatter
/// writes (`12.345678`, no float on the way); other decimal forms (`0.5`,
/// `0.0000005`, `1e-3`) are rounded to the nearest microsecond. Negative values are
/// refused.
pub(super) fn micros(text: &str) -> Option<u64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) || text.ends_with('.') {
        return float_micros(text);
    }
    let whole: u64 = whole.parse().unwrap_or(u64::MAX);
    let fraction = fraction.as_bytes();
    let mut us = (0..6).fold(0u64, |acc, i| {
        acc * 10 + fraction.get(i).map_or(0, |c| u64::from(c - b'0'))
    });
    if fraction.get(6).is_some_and(|&c| c >= b'5') {
        us += 1;
    }
    Some(whole.saturating_mul(1_000_000).saturating_add(us))
}

/// [`micros`] of a number in a form other than plain decimals.
fn float_micros(text: &str) -> Option<u64> {
    let seconds: f64 = text.parse().ok()?;
    // NaN and negative values are refused.
    if seconds.is_nan() || seconds < 0.0 {
        return None;
    }
    let us = (seconds * 1e6).round();
    // `as` saturates at u64::MAX.
    Some(us as u64)
}

/// Nanoseconds that the formatter writes as `text` (seconds through a float, six
/// decimals): the whole microseconds the text shows, or a neighbour where the float's
/// rounding of a large value moved the last digit.
pub(super) fn nanos(text: &str) -> Option<u64> {
    let ns = micros(text)?.saturating_mul(1000);
    let mut out = Vec::new();
    [0i64, -1000, 1000, -2000, 2000, -500, 500]
        .into_iter()
        .filter_map(|delta| ns.checked_add_signed(delta))
        .find(|&candidate| {
            out.clear();
            push_timer_seconds(&mut out, candidate);
            out == text.as_bytes()
        })
        .or(Some(ns))
}

/// Microseconds since the epoch of a `YYYY-MM-DDTHH:MM:SS.ffffffZ` time. Git writes
/// six fractional digits; fewer, more (dropped past the sixth) or none are accepted.
pub(super) fn wall_us(time: &str) -> Option<i64> {
    let b = time.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = &b[range];
        part.iter().try_fold(0i64, |acc, &c| {
            c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
        })
    };
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let (fraction, zone) = match &b[19..] {
        [b'.', after @ ..] => {
            let len = after.iter().take_while(|c| c.is_ascii_digit()).count();
            if len == 0 {
                return None;
            }
            after.split_at(len)
        }
        rest => (&rest[..0], rest),
    };
    if zone != b"Z" {
        return None;
    }
    let fraction = (0..6).fold(0i64, |acc, i| {
        acc * 10 + fraction.get(i).map_or(0, |c| i64::from(c - b'0'))
    });
    // Days from 1970-01-01 of a proleptic Gregorian date (March-based year).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second;
    Some(secs * 1_000_000 + fraction)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_seconds_read_exactly() {
        assert_eq!(wall_us("1970-01-01T00:00:00.000001Z"), Some(1));
        assert_eq!(
            wall_us("2026-11-21T23:21:37.817135Z"),
            Some(1_795_303_297_817_135)
        );
        assert_eq!(wall_us("2026-13-21T23:21:37.817135Z"), None);
        assert_eq!(wall_us("2026-11-21 23:21:37.817135Z"), None);
        assert_eq!(micros("0.000563"), Some(563));
        assert_eq!(micros("18446744073709.551615"), Some(u64::MAX));
        assert_eq!(micros("-1.000000"), None);
    }

    #[test]
    fn seconds_and_times_of_other_writers_are_read() {
        assert_eq!(micros("1.5"), Some(1_500_000));
        assert_eq!(micros("2"), Some(2_000_000));
        assert_eq!(micros("0.0000005"), Some(1));
        assert_eq!(micros("0.0000004"), Some(0));
        assert_eq!(micros("1e-3"), Some(1000));
        // Zero in a float's form is zero, not refused like a negative value.
        assert_eq!(micros("0e0"), Some(0));
        assert_eq!(micros("-0e0"), Some(0));
        assert_eq!(micros("-0.5"), None);
        assert_eq!(micros("\"1\""), None);
        assert_eq!(wall_us("2026-11-21T23:21:37Z"), Some(1_795_303_297_000_000));
        assert_eq!(
            wall_us("2026-11-21T23:21:37.8171359Z"),
            Some(1_795_303_297_817_135)
        );
        assert_eq!(
            wall_us("2026-11-21T23:21:37.8Z"),
            Some(1_795_303_297_800_000)
        );
        assert_eq!(wall_us("2026-02-30T00:00:00.000000Z"), None);
        assert_eq!(
            wall_us("2024-02-29T00:00:00.000000Z"),
            Some(1_709_164_800_000_000)
        );
        // Month lengths, and leap years by the Gregorian rules.
        for (date, valid) in [
            ("2026-01-31", true),
            ("2026-04-30", true),
            ("2026-04-31", false),
            ("2026-06-31", false),
            ("2026-09-31", false),
            ("2026-11-31", false),
            ("2026-12-31", true),
            ("2026-02-28", true),
            ("2026-02-29", false),
            ("2000-02-29", true),
            ("2400-02-29", true),
            ("1900-02-29", false),
            ("2100-02-29", false),
            ("2024-02-30", false),
        ] {
            let time = format!("{date}T00:00:00.000000Z");
            assert_eq!(wall_us(&time).is_some(), valid, "{time}");
        }
        assert_eq!(wall_us("2000-02-29T00:00:00Z"), Some(951_782_400_000_000));
        assert_eq!(wall_us("2026-11-21T24:00:00.000000Z"), None);
        assert_eq!(wall_us("2026-11-21T23:21:37.Z"), None);
        for bad in [
            "",
            "2026-11-21 23:22:00.038534Z",
            "2026-11-21T23:22:00.038534",
            "2026-11-21T23:22:00.038534+01:00",
            "2026-13-21T23:22:00.038534Z",
            "2026-11-21T23:60:00.038534Z",
            "2026-11-21T23:22:00.03x534Z",
            "yyyy-11-21T23:22:00.038534Z",
            "2026-11-21T23:22:00.0385340000000000000000000000Zx",
        ] {
            assert_eq!(wall_us(bad), None, "{bad}");
        }
    }
}
