//! The process clock: `t_abs` is measured from the process start.
//!
//! Git captures its start time at the very top of `main`. A Rust program gets an even
//! earlier reading: on Linux the core crate registers a constructor in `.init_array`, so
//! the start is taken while the program is being loaded, before `main` and before any
//! thread exists. Elsewhere the start is taken on first use; a program that wants it
//! early calls [`start`] as the first statement of `main`.
//!
//! Every Trace2 call takes one reading (the core's `clock::now`, built on [`t_abs_us`]):
//! one monotonic clock read, from which both `t_abs` and the wall-clock time are derived
//! (the start's wall time plus `t_abs`), so all targets see the same numbers and a wall
//! clock that steps mid-process cannot produce negative durations.
//!
//! It lives in this crate, below the core and the binary target, so that both anchor
//! their times to the one process start and the binary target needs no core.
//!
//! The local UTC offset for the Normal and Perf prefixes is computed once, at the same
//! early moment (the only moment the `time` crate can read it safely, since the program
//! has a single thread then). When it cannot be determined the offset is 0 (UTC).

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// The clock readings taken at process start.
#[derive(Debug)]
pub struct ProcessStart {
    monotonic: Monotonic,
    wall_us: i64,
    utc_offset_secs: Option<i32>,
}

static START: OnceLock<ProcessStart> = OnceLock::new();

/// Runs while the program is loaded, before `main`, so the start time is as early as can be.
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static CAPTURE_AT_LOAD: extern "C" fn() = capture_at_load;

#[cfg(target_os = "linux")]
extern "C" fn capture_at_load() {
    start();
}

/// The process start, captured on first use (or at load time on Linux). Inlined: every
/// Trace2 call reads it, from the core crate.
#[inline]
pub fn start() -> &'static ProcessStart {
    START.get_or_init(|| {
        let monotonic = Monotonic::now();
        let wall_us = match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_micros() as i64,
            Err(e) => -(e.duration().as_micros() as i64),
        };
        let utc_offset_secs = time::UtcOffset::current_local_offset()
            .ok()
            .map(|o| o.whole_seconds());
        ProcessStart {
            monotonic,
            wall_us,
            utc_offset_secs,
        }
    })
}

impl ProcessStart {
    /// Wall-clock time of the process start, µs since the Unix epoch.
    pub fn wall_us(&self) -> i64 {
        self.wall_us
    }

    /// The local offset east of UTC in seconds, if it could be determined at start.
    pub fn utc_offset_secs(&self) -> Option<i32> {
        self.utc_offset_secs
    }

    /// Microseconds from this start to now, from one monotonic clock read.
    #[inline]
    pub fn t_abs_us(&self) -> u64 {
        self.monotonic.micros_since()
    }
}

/// The process start if it was captured already (never captures it: for a signal
/// handler, which may not run the capture's first-use set-up).
pub fn started() -> Option<&'static ProcessStart> {
    START.get()
}

/// Microseconds since the process start, from one monotonic clock read.
#[inline]
pub fn t_abs_us() -> u64 {
    start().t_abs_us()
}

/// The local offset east of UTC in seconds (0 when it could not be determined).
pub fn local_offset_secs() -> i32 {
    start().utc_offset_secs.unwrap_or(0)
}

/// A reading of the monotonic clock. On Unix it is `CLOCK_MONOTONIC` (the clock
/// `Instant` reads there) in nanoseconds, read directly: `Instant::elapsed` subtracts
/// two timespecs with carries and builds a `Duration`, which cost more than the clock
/// read itself on every traced call.
#[derive(Clone, Copy, Debug)]
struct Monotonic {
    #[cfg(unix)]
    nanos: u64,
    #[cfg(not(unix))]
    instant: std::time::Instant,
}

impl Monotonic {
    #[inline]
    fn now() -> Monotonic {
        #[cfg(unix)]
        {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `ts` is a valid timespec to write to; CLOCK_MONOTONIC always
            // exists, so the call cannot fail.
            unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
            let nanos = (ts.tv_sec as u64)
                .wrapping_mul(1_000_000_000)
                .wrapping_add(ts.tv_nsec as u64);
            Monotonic { nanos }
        }
        #[cfg(not(unix))]
        {
            Monotonic {
                instant: std::time::Instant::now(),
            }
        }
    }

    /// Whole microseconds from this reading to now.
    #[inline]
    fn micros_since(&self) -> u64 {
        #[cfg(unix)]
        {
            Monotonic::now().nanos.saturating_sub(self.nanos) / 1000
        }
        #[cfg(not(unix))]
        {
            self.instant.elapsed().as_micros() as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_are_monotonic_and_near_the_wall_clock() {
        let a = t_abs_us();
        let b = t_abs_us();
        assert!(b >= a);
        let sys = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros() as i64;
        assert!((sys - (start().wall_us() + b as i64)).abs() < 5_000_000);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn start_was_captured_before_main() {
        // The test harness has run for a while by now; the capture at load time must
        // precede this test's own start by at least the time it took to get here.
        assert!(t_abs_us() > 0);
        assert!(START.get().is_some());
    }
}
