//! The depth of every line is the number of regions open on its Trace2 thread, as git
//! writes it: Perf draws two dots per open region and Event's `nesting` of a datum is one
//! more. The rule is first checked on git's own Perf captures (so the checker is git's
//! rule, not ours), then on our streams when a span's region stays open after the span
//! was exited (a value that holds the span, such as an error carrying its spans, keeps
//! it from closing).

#[path = "support/mod.rs"]
mod support;

use std::collections::HashMap;

use tracing::{error, info, info_span};
use tracing_subscriber::prelude::*;
use tracing_trace2::{Settings, Trace2};

/// Lines written after the thread's regions were unwound: git writes them without dots.
const UNWOUND: &[&str] = &[
    "atexit",
    "thread_exit",
    "timer",
    "counter",
    "th_timer",
    "th_counter",
];

/// Checks that every Perf line has two dots per region open on its thread (the regions
/// counted from the stream's own `region_enter`/`region_leave` lines), and returns the
/// number of lines written inside at least one region.
fn dots_follow_open_regions(perf: &str) -> Result<usize, String> {
    let mut open: HashMap<(String, String), usize> = HashMap::new();
    let mut inside = 0;
    for (n, line) in perf.lines().enumerate() {
        let columns: Vec<&str> = line.splitn(9, " | ").collect();
        let [_, process, thread, kind, _, _, _, _, payload] = columns[..] else {
            return Err(format!("line {}: not a Perf line: {line}", n + 1));
        };
        let (process, thread, kind) = (process.trim(), thread.trim(), kind.trim());
        // A file may hold a process and its children (`dN`, one after another at a
        // depth): a process's first line starts its threads afresh.
        if kind == "version" {
            open.retain(|(p, _), _| p != process);
        }
        let depth = open
            .entry((process.to_owned(), thread.to_owned()))
            .or_default();
        if kind == "region_leave" {
            *depth = depth
                .checked_sub(1)
                .ok_or_else(|| format!("line {}: a leave without an enter", n + 1))?;
        }
        let expected = if UNWOUND.contains(&kind) {
            0
        } else {
            2 * *depth
        };
        let dots = payload.len() - payload.trim_start_matches('.').len();
        if dots != expected {
            return Err(format!(
                "line {}: {dots} dots, {expected} expected: {line}",
                n + 1
            ));
        }
        if *depth > 0 && kind != "region_leave" {
            inside += 1;
        }
        if kind == "region_enter" {
            *depth += 1;
        }
    }
    Ok(inside)
}

#[test]
fn git_indents_every_line_by_the_regions_open_on_its_thread() {
    let mut checked = 0;
    for name in [
        "tt-spec.perf",
        "status.perf",
        "commit.perf",
        "grep-threads.perf",
        "status-index-threads.perf",
        "submodule-status.perf",
    ] {
        let inside = dots_follow_open_regions(&support::sample(name))
            .unwrap_or_else(|why| panic!("{name}: {why}"));
        checked += inside;
    }
    // The captures have lines inside regions: the rule was tested, not just read.
    assert!(checked > 20, "{checked} lines inside regions");
}

/// Spans exited but held (an error value that keeps its spans), then an `error!`, a
/// `printf` and a datum: each is written inside the two regions still open on `main`.
#[test]
fn a_span_exited_but_not_closed_keeps_its_region_open_for_every_line() {
    let dir = support::process::fresh_dir("depth").unwrap();
    let path = |ext: &str| dir.join(format!("t.{ext}"));
    let mut settings = Settings::default();
    settings.perf_destination = Some(path("perf").display().to_string());
    settings.event_destination = Some(path("event").display().to_string());
    settings.event_nesting = 9;
    let layer = Trace2::with_settings(settings).layer();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        let outer = info_span!("outer", trace2.category = "work");
        let inner = outer.in_scope(|| info_span!("inner", trace2.category = "work"));
        // Entered and exited: the spans live on in the error the call returned.
        let held: Result<(), (tracing::Span, tracing::Span)> =
            outer.in_scope(|| inner.in_scope(|| Err((outer.clone(), inner.clone()))));
        error!("the call failed");
        info!("after the failure");
        info!(key = "attempts", value = 3);
        drop(held);
        drop((inner, outer));
        info!(key = "after", value = 0);
    });
    let perf = std::fs::read_to_string(path("perf")).unwrap();
    let inside = dots_follow_open_regions(&perf).unwrap_or_else(|why| panic!("{why}\n{perf}"));
    assert_eq!(inside, 4, "{perf}"); // inner's enter, error, printf, data
    let error = perf.lines().find(|l| l.contains("| error ")).unwrap();
    assert!(error.ends_with("| ....the call failed"), "{error}");

    let event = std::fs::read_to_string(path("event")).unwrap();
    let nesting: Vec<(String, u64)> = support::json_lines(event.lines())
        .iter()
        .filter(|e| e["event"] == "data")
        .map(|e| {
            (
                e["key"].as_str().unwrap().to_owned(),
                e["nesting"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        nesting,
        [("attempts".to_owned(), 3), ("after".to_owned(), 1)]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
