//! The process clock: `t_abs` is measured from the process start.
//!
//! The start and the monotonic clock live in `tracing_trace2_dst::clock` (re-exported
//! here), below this crate, so that the binary target anchors to the same start
//! without depending on the core. This module adds the one reading every Trace2 call
//! takes: [`now`], from which both `t_abs` and the wall-clock time are derived, so all
//! targets see the same numbers.

use tracing_trace2_record::Timestamp;

pub use tracing_trace2_dst::clock::{ProcessStart, local_offset_secs, start};

/// One clock reading.
#[inline]
pub fn now() -> Timestamp {
    let start = start();
    let t_abs_us = start.t_abs_us();
    Timestamp {
        wall_us: start.wall_us() + t_abs_us as i64,
        t_abs_us,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{SystemTime, UNIX_EPOCH};

    #[test]
    fn readings_are_monotonic_and_consistent() {
        let a = now();
        let b = now();
        assert!(b.t_abs_us >= a.t_abs_us);
        assert_eq!(b.wall_us - a.wall_us, (b.t_abs_us - a.t_abs_us) as i64);
        let sys = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros() as i64;
        assert!((sys - b.wall_us).abs() < 5_000_000);
    }
}
