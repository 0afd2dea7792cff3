//! The benches' workloads through a peer layer, for counting its instructions per
//! operation with `valgrind --tool=callgrind` beside the binary crate's `record_cost`
//! (which runs them through our layer and targets):
//!
//! ```text
//! cargo build --release --example peer_cost
//! valgrind --tool=callgrind --toggle-collect='*peer_cost*measured*' \
//!     target/release/examples/peer_cost perfetto-regions 20000
//! ```
//!
//! `perfetto-<workload>` runs `regions`, `data` or `mixed` through tracing-perfetto-file
//! (fields and call sites recorded, as `benches/peers.rs` sets it up) into `/dev/null`.
//! Divide the collected instructions by the operations (Trace2 lines of our targets)
//! printed on exit.

#[path = "../benches/support/mod.rs"]
mod support;

use tracing::dispatcher::{self, Dispatch};
use tracing_subscriber::layer::SubscriberExt;

#[inline(never)]
fn measured_workload(workload: &str, n: u64) {
    run_workload(workload, n);
}

#[inline(never)]
fn run_workload(workload: &str, n: u64) {
    match workload {
        "regions" => (0..n).for_each(|_| support::regions()),
        "data" => {
            let span = tracing::info_span!(
                "data",
                trace2.category = "bench",
                trace2.msg = "data events"
            );
            let _entered = span.enter();
            (0..n).for_each(support::data);
        }
        "mixed" => (0..n).for_each(support::mixed),
        other => panic!("no workload {other}"),
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "perfetto-regions".into());
    let n: u64 = args.next().map_or(100_000, |a| a.parse().expect("a count"));
    let (peer, workload) = mode.split_once('-').expect("perfetto-<workload>");
    assert_eq!(peer, "perfetto", "no peer {peer}");
    let null = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .expect("/dev/null");
    let (layer, guard) = tracing_perfetto_file::PerfettoLayer::builder(null)
        .with_debug_annotations()
        .with_source_locations()
        .build();
    let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer));
    dispatcher::with_default(&dispatch, || {
        run_workload(workload, 1000);
        measured_workload(workload, n);
    });
    guard.flush().expect("/dev/null takes everything");
    let per_iter = match workload {
        "regions" => 6,
        "mixed" => 4,
        _ => 1,
    };
    println!("{} operations", n * per_iter);
}
