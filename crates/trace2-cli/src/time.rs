//! Durations for people (the event crate's reader turns the Event format's times into
//! integer microseconds).

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
    fn human_units() {
        assert_eq!(human(65), "65 µs");
        assert_eq!(human(3_380), "3.38 ms");
        assert_eq!(human(1_234_000), "1.234 s");
        assert_eq!(human(125_000_000), "2 m 05 s");
    }
}
