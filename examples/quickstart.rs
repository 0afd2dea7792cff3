//! A small program as a newcomer would write it: `#[instrument]` functions with nested
//! regions, data events, a warning and a worker thread. Run it with any of the
//! `GIT_TRACE2*` variables set to see the Normal, Perf and Event streams:
//!
//! ```sh
//! GIT_TRACE2=/tmp/qs.normal GIT_TRACE2_PERF=/tmp/qs.perf GIT_TRACE2_EVENT=/tmp/qs.event \
//!     cargo run --example quickstart
//! ```

use std::time::Duration;

use tracing::{info, instrument, warn};
use tracing_subscriber::prelude::*;
use tracing_trace2::api;

#[instrument(skip(path), fields(category = "index", msg = path))]
fn read_index(path: &str) -> usize {
    let entries = parse_entries(3);
    info!(category = "index", key = "entries", value = entries);
    entries
}

#[instrument(fields(category = "index"))]
fn parse_entries(count: usize) -> usize {
    std::thread::sleep(Duration::from_millis(2));
    count
}

#[instrument(fields(category = "status"))]
fn compare(entries: usize) {
    if entries < 5 {
        warn!("only {entries} entries in the index");
    }
    info!(category = "status", changed = 1, untracked = 0);
}

fn main() {
    let trace2 = tracing_trace2::Trace2::from_env().with_exe_version(env!("CARGO_PKG_VERSION"));
    tracing_subscriber::registry().with(trace2.layer()).init();

    let argv: Vec<String> = std::env::args().collect();
    api::start(&argv);
    api::cmd_name("quickstart");

    let entries = read_index(".git/index");
    compare(entries);

    let worker = std::thread::Builder::new()
        .name("preload".into())
        .spawn(|| {
            api::thread_start("preload");
            let span = tracing::info_span!("preload_index", category = "index");
            span.in_scope(|| info!(key = "preloaded", value = 3));
            api::thread_exit();
        })
        .expect("spawn the worker thread");
    let _ = worker.join();

    info!("quickstart finished");
    let code = api::exit(0);
    api::atexit();
    std::process::exit(code);
}
