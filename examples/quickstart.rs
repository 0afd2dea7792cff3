//! A small program as a newcomer would write it: `#[instrument]` functions with nested
//! regions, data events, a warning, a worker thread and a `git` child whose own trace
//! nests under ours. Run it with any of the `GIT_TRACE2*` variables set to see the
//! Normal, Perf and Event streams:
//!
//! ```sh
//! GIT_TRACE2=/tmp/qs.normal GIT_TRACE2_PERF=/tmp/qs.perf GIT_TRACE2_EVENT=/tmp/qs.event \
//!     cargo run --example quickstart
//! ```

use std::process::{Command, ExitCode};
use std::time::Duration;

use tracing::{info, instrument, warn};
use tracing_trace2::{Trace2, Trace2CommandExt, api};

#[instrument(skip(path), fields(trace2.category = "index", trace2.msg = path))]
fn read_index(path: &str) -> usize {
    let entries = parse_entries(3);
    info!(category = "index", key = "entries", value = entries);
    entries
}

#[instrument(fields(trace2.category = "index"))]
fn parse_entries(count: usize) -> usize {
    std::thread::sleep(Duration::from_millis(2));
    count
}

#[instrument(fields(trace2.category = "status"))]
fn compare(entries: usize) {
    if entries < 5 {
        warn!("only {entries} entries in the index");
    }
    info!(category = "status", changed = 1, untracked = 0);
}

fn run() -> std::io::Result<()> {
    let entries = read_index(".git/index");
    compare(entries);

    // A named worker thread: thread_start, its own regions, thread_exit.
    let worker = tracing_trace2::thread::spawn("preload", || {
        tracing::info_span!("preload_index", trace2.category = "index")
            .in_scope(|| info!(category = "index", key = "preloaded", value = 3));
    })?;
    let _ = worker.join();

    // A git child: its lines carry our session id as their parent, one level deeper.
    let status = Command::new("git").arg("version").trace2_status()?;
    info!(
        category = "child",
        key = "git_version_ok",
        value = status.success()
    );

    info!("quickstart finished");
    Ok(())
}

/// The program; `tests/collector.rs` also runs it inside its own binary.
pub fn main() -> ExitCode {
    // Installs the layer (if a target is enabled) and writes version, start, cmd_ancestry.
    let trace2 = Trace2::from_env()
        .with_exe_version(env!("CARGO_PKG_VERSION"))
        .init();
    api::cmd_name("quickstart");
    // exit and atexit, with run()'s exit code.
    trace2.finish(run())
}
