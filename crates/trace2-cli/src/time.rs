//! Time values of the Event format: the UTC `time` string and the `%.6f` seconds of `t_abs`,
//! `t_rel`, `t_total` and friends, all turned into integer microseconds.

/// Microseconds since the Unix epoch of a `time` value written as `YYYY-MM-DDTHH:MM:SS[.ffffff]Z`.
///
/// Git always writes six fractional digits; fewer or more are accepted (digits past the sixth are
/// dropped). Returns `None` for anything else, so a foreign timestamp never becomes a wrong one.
pub fn parse_utc_micros(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let year = digits(&b[0..4])? as i32;
    let month = digits(&b[5..7])? as u8;
    let day = digits(&b[8..10])? as u8;
    let hour = digits(&b[11..13])?;
    let minute = digits(&b[14..16])?;
    let second = digits(&b[17..19])?;
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let rest = &b[19..];
    let (fraction, zone) = match rest.split_first() {
        Some((b'.', after)) => {
            let len = after.iter().take_while(|c| c.is_ascii_digit()).count();
            if len == 0 {
                return None;
            }
            after.split_at(len)
        }
        _ => (&rest[..0], rest),
    };
    if zone != b"Z" {
        return None;
    }
    let micros = (0..6).fold(0i64, |acc, i| {
        acc * 10 + fraction.get(i).map_or(0, |c| i64::from(c - b'0'))
    });
    let month = time::Month::try_from(month).ok()?;
    let date = time::Date::from_calendar_date(year, month, day).ok()?;
    let days = i64::from(date.to_julian_day() - UNIX_EPOCH_JULIAN_DAY);
    let seconds = days * 86_400 + i64::from(hour * 3600 + minute * 60 + second);
    Some(seconds * 1_000_000 + micros)
}

/// Julian day number of 1970-01-01.
const UNIX_EPOCH_JULIAN_DAY: i32 = 2_440_588;

fn digits(bytes: &[u8]) -> Option<u32> {
    bytes.iter().try_fold(0u32, |acc, c| {
        c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
    })
}

/// Whole microseconds of a seconds value (`0.000065` → 65). Negative, NaN and absurdly large
/// values (damaged input) are clamped into `0..=i64::MAX / 4` so sums cannot overflow.
pub fn seconds_to_micros(seconds: f64) -> i64 {
    const LIMIT: i64 = i64::MAX / 4;
    if seconds.is_nan() || seconds <= 0.0 {
        return 0;
    }
    let micros = (seconds * 1e6).round();
    if micros >= LIMIT as f64 {
        LIMIT
    } else {
        micros as i64
    }
}

/// A duration for people: `65 µs`, `3.38 ms`, `1.234 s`, `2 m 05 s`.
pub fn human(micros: i64) -> String {
    let us = micros.max(0);
    if us < 1_000 {
        format!("{us} µs")
    } else if us < 1_000_000 {
        format!("{:.2} ms", us as f64 / 1e3)
    } else if us < 60_000_000 {
        format!("{:.3} s", us as f64 / 1e6)
    } else {
        let s = us / 1_000_000;
        format!("{} m {:02} s", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_git_time() {
        // 2026-11-21T23:22:00Z is 1795303320 s after the epoch.
        assert_eq!(
            parse_utc_micros("2026-11-21T23:22:00.038534Z"),
            Some(1_795_303_320_038_534)
        );
        assert_eq!(parse_utc_micros("1970-01-01T00:00:00.000001Z"), Some(1));
        assert_eq!(parse_utc_micros("1970-01-01T00:00:01Z"), Some(1_000_000));
        assert_eq!(
            parse_utc_micros("2024-02-29T00:00:00.5Z"),
            Some(1_709_164_800_500_000)
        );
    }

    #[test]
    fn refuses_foreign_time() {
        for bad in [
            "",
            "2026-11-21 23:22:00.038534Z",
            "2026-11-21T23:22:00.038534",
            "2026-11-21T23:22:00.038534+01:00",
            "2026-13-21T23:22:00.038534Z",
            "2026-02-30T23:22:00.038534Z",
            "2026-11-21T24:22:00.038534Z",
            "2026-11-21T23:22:00.Z",
            "2026-11-21T23:22:00.03x534Z",
            "yyyy-11-21T23:22:00.038534Z",
        ] {
            assert_eq!(parse_utc_micros(bad), None, "{bad}");
        }
    }

    #[test]
    fn seconds_round_to_micros() {
        assert_eq!(seconds_to_micros(0.000065), 65);
        assert_eq!(seconds_to_micros(3.001686), 3_001_686);
        assert_eq!(seconds_to_micros(-1.0), 0);
        assert_eq!(seconds_to_micros(f64::NAN), 0);
        assert_eq!(seconds_to_micros(1e300), i64::MAX / 4);
    }

    #[test]
    fn human_units() {
        assert_eq!(human(65), "65 µs");
        assert_eq!(human(3_380), "3.38 ms");
        assert_eq!(human(1_234_000), "1.234 s");
        assert_eq!(human(125_000_000), "2 m 05 s");
    }
}
