//! A program with a controlled delay in one region, for `trace2 compare`: three regions
//! (`work:prepare`, `work:compute`, `work:finish`) each spin for 100 µs; `work:compute`
//! spins `DELAY_US` microseconds more (the first argument, 0 when absent). Spinning on the
//! clock, not sleeping, so the delay is what was asked to within the timer's grain. Short
//! regions, because a region the scheduler interrupts (on a busy machine, at a timer tick
//! every few ms) comes out milliseconds long: the shorter the region, the fewer runs that
//! happens to.
//!
//! ```sh
//! mkdir -p /tmp/base /tmp/new
//! for i in $(seq 30); do
//!     GIT_TRACE2_EVENT=/tmp/base cargo run -q --example delay
//!     GIT_TRACE2_EVENT=/tmp/new cargo run -q --example delay -- 200
//! done
//! cargo run -q -p trace2-cli -- compare /tmp/base /tmp/new
//! ```

use std::time::{Duration, Instant};

use tracing::info_span;
use tracing_trace2::{Trace2, api};

/// Busy-waits for `duration`.
fn spin(duration: Duration) {
    let start = Instant::now();
    while start.elapsed() < duration {
        std::hint::spin_loop();
    }
}

fn region(label: &'static str, micros: u64) {
    let _region = info_span!("region", trace2.category = "work", trace2.label = label).entered();
    spin(Duration::from_micros(micros));
}

/// Runs the program; `delay_us` more in `work:compute`.
pub fn run(delay_us: u64) {
    let _trace2 = Trace2::from_env().with_exe_version("1.0").init();
    api::cmd_name("delay");
    region("prepare", 100);
    region("compute", 100 + delay_us);
    region("finish", 100);
}

#[allow(dead_code)]
fn main() {
    let delay_us = std::env::args()
        .nth(1)
        .and_then(|arg| arg.parse().ok())
        .unwrap_or(0);
    run(delay_us);
}
