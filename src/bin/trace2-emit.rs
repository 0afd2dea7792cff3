//! A test program for the cross-crate tests: sets up Trace2 from the environment,
//! writes `EMIT_LINES` data events (default 100) inside a region, then ends.

use tracing::info;
use tracing_subscriber::prelude::*;

fn main() {
    let lines: usize = std::env::var("EMIT_LINES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let trace2 = tracing_trace2::Trace2::from_env().with_exe_version(env!("CARGO_PKG_VERSION"));
    tracing_subscriber::registry().with(trace2.layer()).init();
    let span = tracing::info_span!("emit", trace2.category = "test");
    let _entered = span.enter();
    for i in 0..lines {
        info!(category = "test", key = "i", value = i);
    }
}
