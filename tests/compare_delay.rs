//! `trace2 compare` on a Rust program with a controlled delay in one region
//! (`examples/delay.rs`, compiled into this test binary, which doubles as the program): 40
//! runs without the delay against 40 runs with it, for delays of 0, 5, 20 and 100 µs in
//! `work:compute` (a 100 µs region). From 20 µs up the region is flagged slower; at no size
//! is `work:prepare` or `work:finish` flagged, nor the process faster, and with no delay
//! nothing is flagged. (The process's elapsed time holds its start-up, whose noise on a
//! busy machine hides shifts this small: it is not required to show them.) Each run
//! writes both an Event trace and a binary (t2b) trace: both give the same answer.
//!
//! What can fail by chance on a sound build, per run of this test:
//! - a group with no real change flagged: at most 0.1 % per comparison (`--alpha 0.001`,
//!   family-wise), 0.4 % for the four, if base and new runs differ only by the delay. So
//!   nothing but the delay tells the sides apart: the runs go in pairs that alternate
//!   which side runs first (base new, new base, base new, …): each side runs first as
//!   often as second, and after a base run as often as after a new one. The second
//!   process of a pair finds the caches the first one warmed, and with base always first
//!   that alone would shift every group of one side.
//! - the delay missed: a run the scheduler interrupts inside `work:compute` (1 in 10 runs
//!   of a 300 µs region under a load of 6 on 2 cores) is milliseconds long whichever
//!   side it is on, and dilutes the rank test: the failure seen once, with 30 runs of
//!   300 µs a side, was `p = 0.0011` where Holm asks for 0.001 / 4. The chance of an
//!   interruption grows with the region's length: with regions of 100 µs and 40 runs a
//!   side, the delay is still found at p < 0.001 / 4 (the rank test's z near 4.9) with
//!   a fifth of the runs of each side interrupted, and with 12 of 40 (z near 3.8).
//! - the interval missing the delay by more than 5 µs: its level is 95 %, and the clean
//!   runs of a side lie within about 2 µs of one another.
//!
//! 320 runs: about 4 s on a 2-core machine.

#[path = "support/mod.rs"]
mod support;

#[path = "../examples/delay.rs"]
mod delay;

use std::path::Path;
use std::process::{Command, ExitCode};

use serde_json::Value;
use support::runner::Runner;

/// Set in the environment of this test binary when it must act as `examples/delay.rs`; its
/// value is the delay in µs.
const PROGRAM_ENV: &str = "TRACE2_COMPARE_DELAY_PROGRAM";
const RUNS: usize = 40;
/// The smallest delay this test says is found.
const DETECTED_FROM_US: u64 = 20;

fn main() -> ExitCode {
    if let Some(delay) = std::env::var_os(PROGRAM_ENV) {
        delay::run(delay.to_str().and_then(|d| d.parse().ok()).unwrap_or(0));
        return ExitCode::SUCCESS;
    }
    let mut runner = Runner::plain();
    runner.test(
        "a_delay_is_found_in_its_region_from_20_us_and_nowhere_else",
        a_delay_is_found_in_its_region_from_20_us_and_nowhere_else,
    );
    runner.finish()
}

/// One run of the program with `delay_us`, tracing to the Event directory `events` and to
/// the binary file `binary`.
fn run_program(delay_us: u64, events: &Path, binary: &Path) {
    let mut command = Command::new(std::env::current_exe().unwrap());
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        if key.starts_with("GIT_TRACE2") || key.starts_with("TRACING_TRACE2") {
            command.env_remove(key);
        }
    }
    let status = command
        .env(PROGRAM_ENV, delay_us.to_string())
        .env("GIT_TRACE2_EVENT", events)
        .env("TRACING_TRACE2_BINARY", binary)
        .status()
        .expect("the program runs");
    assert!(status.success());
}

/// `trace2 compare --json --alpha 0.001 BASE NEW`, through the library.
fn compare(base: &Path, new: &Path) -> Value {
    let mut report = trace2_cli::input::Report::default();
    let base = trace2_cli::run::collect(&[base.to_owned()], &mut report);
    let new = trace2_cli::run::collect(&[new.to_owned()], &mut report);
    assert!(report.clean(), "{:?}", report.messages());
    serde_json::to_value(trace2_cli::stats::compare(&base, &new, 0.001)).unwrap()
}

fn a_delay_is_found_in_its_region_from_20_us_and_nowhere_else() {
    let root = tempfile::tempdir().unwrap();
    for delay_us in [0, 5, DETECTED_FROM_US, 100] {
        let side = |name: &str| {
            let dir = root.path().join(format!("{delay_us}-{name}"));
            std::fs::create_dir_all(dir.join("event")).unwrap();
            std::fs::create_dir_all(dir.join("t2b")).unwrap();
            dir
        };
        let (base, new) = (side("base"), side("new"));
        for i in 0..RUNS {
            let run_base = || {
                run_program(
                    0,
                    &base.join("event"),
                    &base.join(format!("t2b/{i:02}.t2b")),
                );
            };
            let run_new = || {
                run_program(
                    delay_us,
                    &new.join("event"),
                    &new.join(format!("t2b/{i:02}.t2b")),
                );
            };
            // A B, B A, A B, …: each side first in half of the pairs, and after each side
            // as often as after the other.
            if i % 2 == 0 {
                run_base();
                run_new();
            } else {
                run_new();
                run_base();
            }
        }
        let from_event = compare(&base.join("event"), &new.join("event"));
        let from_binary = compare(&base.join("t2b"), &new.join("t2b"));
        assert_eq!(from_event, from_binary, "delay {delay_us} µs");

        let command = &from_event["commands"][0];
        // `<program>:delay`: the program is this test binary.
        assert!(
            command["command"].as_str().unwrap().ends_with(":delay"),
            "{from_event}"
        );
        assert_eq!(command["base_runs"]["ended"], RUNS);
        let verdict = |name: &str| {
            let group = command["groups"]
                .as_array()
                .unwrap()
                .iter()
                .find(|g| g["name"] == name)
                .unwrap_or_else(|| panic!("no group {name:?}: {command}"));
            (
                group["verdict"].as_str().unwrap().to_owned(),
                group["change"].clone(),
            )
        };
        let (compute, change) = verdict("work:compute");
        println!("delay {delay_us:>3} µs: work:compute {compute}, change {change}");
        for other in ["work:prepare", "work:finish"] {
            assert_eq!(
                verdict(other).0,
                "no_change",
                "{other} at delay {delay_us} µs"
            );
        }
        match delay_us {
            0 => {
                assert_eq!(compute, "no_change");
                assert_eq!(verdict("").0, "no_change");
            }
            d if d >= DETECTED_FROM_US => {
                assert_eq!(compute, "slower", "delay {d} µs: {change}");
                assert_ne!(verdict("").0, "faster", "delay {d} µs");
                // The interval holds the delay (the spin overshoots by the clock's grain).
                let (low, high) = (
                    change["low"].as_f64().unwrap(),
                    change["high"].as_f64().unwrap(),
                );
                assert!(
                    low <= d as f64 + 5.0 && high >= d as f64 - 5.0,
                    "delay {d}: {change}"
                );
            }
            // Below the stated size: either verdict is right.
            _ => assert!(
                ["slower", "no_change"].contains(&compute.as_str()),
                "{compute}"
            ),
        }
    }
}
