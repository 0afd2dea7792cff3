//! The flight recorder in a command-line program: every run records into a ring in
//! memory, and only a run that fails (or is asked to) leaves a trace. Run it a few
//! times; only the failed runs write a `.t2b` file:
//!
//! ```sh
//! mkdir -p /tmp/flight
//! TRACING_TRACE2_FLIGHT=/tmp/flight cargo run -q --example flight          # ok: nothing
//! TRACING_TRACE2_FLIGHT=/tmp/flight cargo run -q --example flight -- fail  # exit 1: a snapshot
//! cargo run -q -p trace2-cli -- decode --format perf /tmp/flight/*.t2b
//! ```
//!
//! `slow` makes a region take 300 ms (a snapshot with
//! `TRACING_TRACE2_FLIGHT_SLOW_REGION_MS=200`), and `snapshot` asks for one from the
//! program itself, as a service would on an admin request. Without
//! `TRACING_TRACE2_FLIGHT` the program records into `$TMPDIR/trace2-flight`.

use std::process::ExitCode;
use std::time::Duration;

use tracing::{info, info_span, warn};
use tracing_trace2::flight::{self, Trigger};
use tracing_trace2::{Trace2, api};

fn step(n: u32, slow: bool) {
    let _region = info_span!("step", trace2.category = "work").entered();
    info!(category = "work", key = "n", value = n);
    if slow && n == 3 {
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn main() -> ExitCode {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let mut trace2 = Trace2::from_env().with_exe_version(env!("CARGO_PKG_VERSION"));
    if std::env::var_os(flight::ENV_NAME).is_none() {
        let dir = std::env::temp_dir().join("trace2-flight");
        let _ = std::fs::create_dir_all(&dir);
        trace2 = trace2.with_flight_recorder(dir.to_string_lossy());
    }
    let trace2 = trace2.init();
    api::cmd_name("flight");
    for n in 0..5 {
        step(n, mode == "slow");
    }
    if mode == "snapshot" {
        for path in flight::snapshot_all(Trigger::Request) {
            println!("snapshot: {}", path.display());
        }
    }
    if mode == "fail" {
        warn!("step 5 failed");
        // A non-zero exit: the recorder writes the window, ending with exit/atexit.
        return trace2.finish(ExitCode::from(1));
    }
    trace2.finish(ExitCode::SUCCESS)
}
