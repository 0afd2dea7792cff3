//! What the benches share: the traced workloads (the same call sites in every bench, so
//! their figures compare), appending to and emptying the destination files, criterion's
//! command-line filter, and the median.

#![allow(dead_code)]

use std::fs::{File, OpenOptions};
use std::path::Path;
use std::sync::Barrier;
use std::time::Duration;

use tracing::{info, info_span};
use tracing_trace2_core::{Callsite, Record, RegionInfo, Timestamp, Trace2Event};

#[inline(never)]
pub fn regions() {
    let outer = info_span!(
        "outer",
        trace2.category = "index",
        trace2.label = "do_read_index",
        trace2.msg = ".git/index"
    );
    let _outer = outer.enter();
    let middle = info_span!(
        "middle",
        trace2.category = "index",
        trace2.label = "read_cache",
        trace2.msg = "entries"
    );
    let _middle = middle.enter();
    let inner = info_span!(
        "inner",
        trace2.category = "index",
        trace2.label = "lookup",
        trace2.msg = "ce_mem"
    );
    let _inner = inner.enter();
}

#[inline(never)]
pub fn data(i: u64) {
    info!(category = "index", key = "cache_nr", value = i);
}

#[inline(never)]
pub fn mixed(i: u64) {
    let span = info_span!(
        "mixed",
        trace2.category = "status",
        trace2.label = "worktrees",
        trace2.msg = "untracked"
    );
    let _entered = span.enter();
    info!(category = "status", key = "count/changed", value = i);
    info!(category = "status", key = "count/untracked", value = "12");
}

pub fn append(path: &Path) -> File {
    OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Empties a file the benchmark appends to (a no-op for `/dev/null`).
pub fn empty(path: &Path) {
    if path != Path::new("/dev/null") {
        let _ = append(path).set_len(0);
    }
}

/// Whether the command line's filter (criterion's first free argument, a regular
/// expression for criterion) selects `id`; plain text and `a|b` alternatives are
/// understood here.
pub fn criterion_filter_matches(id: &str) -> bool {
    let mut args = std::env::args().skip(1);
    let mut filter = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--bench" | "--exact" | "--nocapture" | "--quiet" | "--noplot" | "--list" => {}
            a if a.starts_with("--") => {
                // Options with a value (`--measurement-time 2`) skip it.
                if !a.contains('=') && !matches!(a, "--verbose" | "--discard-baseline") {
                    args.next();
                }
            }
            a => filter = Some(a.to_owned()),
        }
    }
    filter.is_none_or(|f| f.split('|').any(|alt| id.contains(alt)))
}

pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// Records written straight to a writer (no tracing): a region around data and a
/// message, as the `regions` and `mixed` workloads make them.
pub fn sample_records() -> [Record<'static>; 4] {
    let region = RegionInfo {
        repo: None,
        category: Some("index"),
        label: Some("do_read_index"),
        msg: Some(".git/index"),
    };
    let record = |event, open| Record {
        event,
        time: Timestamp::default(),
        sid: "20261121T232137.816920Z-H1c4a9a2f-P00002b68",
        depth: 0,
        thread: "main",
        callsite: Callsite {
            file: Some("src/index.rs"),
            line: 120,
        },
        open_regions: open,
    };
    [
        record(Trace2Event::RegionEnter { region, nesting: 1 }, 0),
        record(
            Trace2Event::Data {
                repo: None,
                category: "index",
                key: "cache_nr",
                value: "1234",
                nesting: 2,
                t_rel_us: 3,
            },
            1,
        ),
        record(
            Trace2Event::Printf {
                msg: Some("refreshed 1234 index entries"),
            },
            1,
        ),
        record(
            Trace2Event::RegionLeave {
                region,
                nesting: 1,
                t_rel_us: 9,
            },
            0,
        ),
    ]
}

/// Runs `on_thread` on `threads` threads started together (on the calling thread
/// alone, without a barrier, when `threads` is 1) and returns the longest time one of
/// them took: the wall time of a multi-threaded sample.
pub fn on_threads(
    threads: usize,
    on_thread: impl Fn(Option<&Barrier>) -> Duration + Sync,
) -> Duration {
    if threads == 1 {
        return on_thread(None);
    }
    let barrier = Barrier::new(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| scope.spawn(|| on_thread(Some(&barrier))))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("bench thread"))
            .max()
            .unwrap_or_default()
    })
}
