//! The axum service (`examples/web.rs`, compiled into this binary and run as a child
//! process) behind tower-http's `TraceLayer`, under load from [`CONNECTIONS`] keep-alive
//! clients side by side, traced with `GIT_TRACE2_EVENT`:
//!
//! * with the default settings, each request's DEBUG span is a region;
//! * (with DEBUG asked for, so that the rest holds whatever the default) each request is
//!   one `request` region holding its handler's region, the Trace2 threads stay bounded
//!   (the workers and a few task lanes, whatever the number of requests), every thread
//!   ends before `atexit`, the receiver's rules pass and `trace2 summary` reads it.

mod support;

#[path = "real/mod.rs"]
mod real;

#[path = "../examples/web.rs"]
mod example;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use real::{Trace, ensure};
use serde_json::Value;
use support::runner::{Check, run_checks};

/// Set in the environment of a process that must act as the example program.
const PROGRAM_ENV: &str = "TRACE2_WEB_PROGRAM";
/// Client connections side by side, and requests on each.
const CONNECTIONS: usize = 8;
const REQUESTS: usize = 40;
/// All requests.
const TOTAL: usize = CONNECTIONS * REQUESTS;
/// The longest the service may take to end once it has answered every request.
const END_WAIT: Duration = Duration::from_secs(20);

fn main() -> ExitCode {
    if std::env::var_os(PROGRAM_ENV).is_some() {
        return example::main();
    }
    let checks: &[Check] = &[
        (
            "request_spans_are_regions_by_default",
            request_spans_are_regions_by_default,
        ),
        (
            "each_request_is_one_region_holding_its_handler",
            each_request_is_one_region_holding_its_handler,
        ),
        (
            "threads_stay_bounded_and_end_before_atexit",
            threads_stay_bounded_and_end_before_atexit,
        ),
        (
            "the_receiver_accepts_the_stream",
            the_receiver_accepts_the_stream,
        ),
        ("trace2_summary_reads_it", trace2_summary_reads_it),
        (
            "a_signal_snapshot_holds_the_requests",
            a_signal_snapshot_holds_the_requests,
        ),
    ];
    let code = run_checks("real_web", checks);
    for name in ["web-default", "web-debug"] {
        if let Ok(dir) = support::process::fresh_dir(name) {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    code
}

/// What one run of the service left.
struct Run {
    event_path: PathBuf,
    trace: Trace,
    /// The flight recorder's snapshots (the DEBUG run records, and gets `SIGUSR2` when
    /// half the requests are answered).
    snapshots: Vec<PathBuf>,
}

/// The run with the default settings, and the one with DEBUG asked for (each run once).
fn run(debug: bool) -> Result<&'static Run, String> {
    static DEFAULT: OnceLock<Result<Run, String>> = OnceLock::new();
    static DEBUG: OnceLock<Result<Run, String>> = OnceLock::new();
    let (cell, name) = if debug {
        (&DEBUG, "web-debug")
    } else {
        (&DEFAULT, "web-default")
    };
    cell.get_or_init(|| {
        let dir = support::process::fresh_dir(name).map_err(|e| e.to_string())?;
        run_service(&dir, debug)
    })
    .as_ref()
    .map_err(Clone::clone)
}

fn run_service(dir: &Path, debug: bool) -> Result<Run, String> {
    let event_path = dir.join("trace.event");
    let mut cmd = support::process::clean_command(std::env::current_exe().unwrap());
    support::process::without_config(&mut cmd);
    cmd.env(PROGRAM_ENV, "1")
        .env("GIT_TRACE2_EVENT", &event_path)
        .env_remove("TRACING_TRACE2_MAX_LEVEL")
        .args(["serve", &TOTAL.to_string()])
        .stdout(Stdio::piped());
    if debug {
        cmd.env("TRACING_TRACE2_MAX_LEVEL", "debug");
    }
    let flight = dir.join("flight");
    if debug {
        std::fs::create_dir_all(&flight).map_err(|e| e.to_string())?;
        cmd.env("TRACING_TRACE2_FLIGHT", &flight);
    }
    let mut server = cmd.spawn().map_err(|e| format!("start the service: {e}"))?;
    let port = support::process::read_port(&mut server);
    // Half the requests, a snapshot asked for (DEBUG run), the other half.
    let served = port.and_then(|port| {
        let half =
            || example::client(port, CONNECTIONS, REQUESTS / 2).map_err(|e| format!("client: {e}"));
        half()?;
        if debug {
            let pid = libc::pid_t::try_from(server.id()).map_err(|e| e.to_string())?;
            // SAFETY: sends a signal to the child this test started (and has not reaped).
            let sent = unsafe { libc::kill(pid, libc::SIGUSR2) };
            ensure(sent == 0, || "kill failed".to_owned())?;
        }
        half()
    });
    let status = support::process::wait_bounded(&mut server, END_WAIT);
    served?;
    let status = status?;
    ensure(status.success(), || format!("service: {status}"))?;
    let trace = Trace::read(&event_path)?;
    let snapshots = std::fs::read_dir(&flight)
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    Ok(Run {
        event_path,
        trace,
        snapshots,
    })
}

fn name(v: &Value) -> &str {
    v["event"].as_str().unwrap_or("")
}

fn thread(v: &Value) -> &str {
    v["thread"].as_str().unwrap_or("")
}

/// The regions entered with label `label`.
fn entered(run: &Run, label: &str) -> usize {
    run.trace
        .events
        .iter()
        .filter(|v| name(v) == "region_enter" && v["label"] == label)
        .count()
}

fn request_spans_are_regions_by_default() -> Result<(), String> {
    let run = run(false)?;
    let requests = entered(run, "request");
    ensure(requests == TOTAL, || {
        format!("{requests} request regions for {TOTAL} requests, with the default settings")
    })
}

fn each_request_is_one_region_holding_its_handler() -> Result<(), String> {
    let run = run(true)?;
    let (requests, items) = (entered(run, "request"), entered(run, "item"));
    ensure(requests == TOTAL && items == TOTAL, || {
        format!("{requests} request and {items} item regions for {TOTAL} requests")
    })?;
    // Each thread's stack of labels: every `item` region opens inside a `request`.
    let mut stacks: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for v in &run.trace.events {
        let stack = stacks.entry(thread(v)).or_default();
        match name(v) {
            "region_enter" => {
                let label = v["label"].as_str().unwrap_or("");
                if label == "item" {
                    ensure(stack.last() == Some(&"request"), || {
                        format!("an item region inside {stack:?} on {}", thread(v))
                    })?;
                }
                stack.push(label);
            }
            "region_leave" => {
                stack.pop();
            }
            _ => {}
        }
    }
    ensure(
        !run.trace
            .events
            .iter()
            .any(|v| v["key"] == "task_regions_dropped"),
        || "regions were left out".into(),
    )
}

fn threads_stay_bounded_and_end_before_atexit() -> Result<(), String> {
    let run = run(true)?;
    let events = &run.trace.events;
    let names: BTreeSet<&str> = events.iter().map(thread).collect();
    // `main`, the workers, and task lanes for the connections open side by side (the
    // service may still be ending some when others start: twice that).
    let bound = 1 + example::WORKERS + 2 * CONNECTIONS;
    ensure(names.len() <= bound, || {
        format!(
            "{} thread names for {TOTAL} requests on {CONNECTIONS} connections, bound {bound}: {names:?}",
            names.len()
        )
    })?;
    for name in &names {
        ensure(
            *name == "main" || name.ends_with(":tokio-rt-worker") || name.starts_with("task-lane-"),
            || format!("unexpected thread name {name}"),
        )?;
    }
    let atexit = events
        .iter()
        .position(|v| name(v) == "atexit")
        .ok_or("no atexit")?;
    ensure(atexit == events.len() - 1, || "lines after atexit".into())?;
    let mut counts: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for v in events {
        match name(v) {
            "thread_start" => counts.entry(thread(v)).or_default().0 += 1,
            "thread_exit" => counts.entry(thread(v)).or_default().1 += 1,
            _ => {}
        }
    }
    ensure(
        !counts.is_empty() && counts.values().all(|&c| c == (1, 1)),
        || format!("(thread_start, thread_exit) per thread: {counts:?}"),
    )
}

fn the_receiver_accepts_the_stream() -> Result<(), String> {
    let run = run(true)?;
    run.trace.receiver_accepts_all()?;
    ensure(run.trace.sessions.len() == 1, || {
        format!("{} sessions", run.trace.sessions.len())
    })
}

fn trace2_summary_reads_it() -> Result<(), String> {
    let run = run(true)?;
    let summary = real::summary(&run.event_path)?;
    let [process] = summary.processes.as_slice() else {
        return Err(format!("{} processes", summary.processes.len()));
    };
    ensure(
        process.ended && process.exit_code == Some(0) && process.errors == 0,
        || {
            format!(
                "ended {} code {:?} errors {}",
                process.ended, process.exit_code, process.errors
            )
        },
    )?;
    ensure(process.unclosed_regions == 0, || {
        format!("{} regions left open", process.unclosed_regions)
    })?;
    ensure(
        process
            .regions
            .iter()
            .any(|r| r.label == "request" && r.count == TOTAL as u64),
        || format!("request regions: {:?}", process.regions),
    )?;
    let answered = process
        .counters
        .iter()
        .find(|c| c.name == "answered")
        .map(|c| c.count);
    ensure(answered == Some(TOTAL as i64), || {
        format!("counter `answered`: {answered:?}")
    })
}

/// `SIGUSR2` under load: one snapshot, which decodes to a window of the requests' regions
/// ending with the trigger.
fn a_signal_snapshot_holds_the_requests() -> Result<(), String> {
    use tracing_trace2_binary::{TextFormat, TextOptions, decode_to_text};
    let run = run(true)?;
    let [file] = run.snapshots.as_slice() else {
        return Err(format!("snapshots: {:?}", run.snapshots));
    };
    ensure(file.to_string_lossy().ends_with("-signal.t2b"), || {
        format!("snapshot {}", file.display())
    })?;
    let bytes = std::fs::read(file).map_err(|e| e.to_string())?;
    let mut perf = Vec::new();
    decode_to_text(&bytes[..], &mut perf, &TextOptions::new(TextFormat::Perf))
        .map_err(|e| format!("decode: {e}"))?;
    let perf = String::from_utf8_lossy(&perf);
    let lines: Vec<&str> = perf.lines().collect();
    let requests = lines
        .iter()
        .filter(|l| l.contains("| region_enter ") && l.contains("label:request"))
        .count();
    ensure(
        requests > 0 && lines.last().is_some_and(|l| l.contains("trigger:signal")),
        || {
            format!(
                "{requests} request regions in the snapshot; last line {:?}",
                lines.last()
            )
        },
    )
}
