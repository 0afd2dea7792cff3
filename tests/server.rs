//! The tokio server example (`examples/server.rs`, compiled into this binary and run as
//! a child process), traced with `GIT_TRACE2_EVENT` and `GIT_TRACE2_PERF` while this
//! test opens connections to it over time, as a client of a long-running server would:
//!
//! * every announced thread (the `#[tokio::main]` runtime's workers, which end only
//!   after `main` returns, and the task lanes) has its `thread_exit` before `atexit`,
//!   with its `th_counter` before it, and the process total is the sum of them;
//! * the number of distinct `thread` values stays below a bound that does not grow
//!   with the number of connections (`main`, the workers, and at most as many task
//!   lanes as connections were open side by side);
//! * the Event stream passes the receiver's rules and `trace2 summary` reads it; the
//!   Perf stream ends every thread before `atexit` too; the binary target's stream
//!   decodes to the Event stream's lines, each thread's in the same order.

mod support;

#[path = "../examples/server.rs"]
mod example;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;
use support::receiver;
use support::runner::{Check, run_checks};

/// Set in the environment of a process that must act as the example program.
const PROGRAM_ENV: &str = "TRACE2_SERVER_PROGRAM";
/// Connections the test opens over the server's life, and requests on each.
const CONNECTIONS: usize = 30;
const REQUESTS: usize = 4;
/// The longest the server may take to end once it has answered every request.
const END_WAIT: Duration = Duration::from_secs(20);

fn main() -> ExitCode {
    if std::env::var_os(PROGRAM_ENV).is_some() {
        return example::main();
    }
    let checks: &[Check] = &[
        (
            "every_thread_ends_before_atexit",
            every_thread_ends_before_atexit,
        ),
        (
            "per_thread_counters_are_ended_and_summed",
            per_thread_counters_are_ended_and_summed,
        ),
        ("lanes_stay_bounded", lanes_stay_bounded),
        (
            "the_receiver_accepts_the_stream",
            the_receiver_accepts_the_stream,
        ),
        ("trace2_summary_reads_it", trace2_summary_reads_it),
        ("perf_ends_every_thread", perf_ends_every_thread),
        (
            "binary_decodes_to_the_event_lines",
            binary_decodes_to_the_event_lines,
        ),
    ];
    run_checks("server", checks)
}

/// What one run of the server left.
struct Run {
    event_path: PathBuf,
    event_bytes: Vec<u8>,
    events: Vec<Value>,
    perf: String,
    binary: Vec<u8>,
}

/// Runs the server once (shared by every check): `CONNECTIONS` connections of
/// `REQUESTS` requests each, the server ending after the last answer.
fn run() -> Result<&'static Run, String> {
    static RUN: OnceLock<Result<Run, String>> = OnceLock::new();
    RUN.get_or_init(|| {
        let dir = support::process::fresh_dir("server").map_err(|e| e.to_string())?;
        run_server(&dir)
    })
    .as_ref()
    .map_err(Clone::clone)
}

fn run_server(dir: &Path) -> Result<Run, String> {
    let event_path = dir.join("trace.event");
    let perf_path = dir.join("trace.perf");
    let binary_path = dir.join("trace.t2b");
    let mut cmd = support::process::clean_command(std::env::current_exe().unwrap());
    support::process::without_config(&mut cmd);
    cmd.env(PROGRAM_ENV, "1")
        .env("GIT_TRACE2_EVENT", &event_path)
        .env("GIT_TRACE2_PERF", &perf_path)
        .env(tracing_trace2_binary::ENV_NAME, &binary_path)
        .args(["serve", &(CONNECTIONS * REQUESTS).to_string()])
        .stdout(Stdio::piped());
    let mut server = cmd.spawn().map_err(|e| format!("start the server: {e}"))?;
    let port = support::process::read_port(&mut server);
    let served = port.and_then(|port| {
        example::client(port, CONNECTIONS, REQUESTS).map_err(|e| format!("client: {e}"))
    });
    let status = support::process::wait_bounded(&mut server, END_WAIT);
    served?;
    let status = status?;
    if !status.success() {
        return Err(format!("server: {status}"));
    }
    let event_bytes = std::fs::read(&event_path).map_err(|e| e.to_string())?;
    let events = support::json_lines(String::from_utf8_lossy(&event_bytes).lines());
    let perf = std::fs::read_to_string(&perf_path).map_err(|e| e.to_string())?;
    let binary = std::fs::read(&binary_path).map_err(|e| e.to_string())?;
    Ok(Run {
        event_path,
        event_bytes,
        events,
        perf,
        binary,
    })
}

fn ensure(ok: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if ok { Ok(()) } else { Err(why()) }
}

fn name(v: &Value) -> &str {
    v["event"].as_str().unwrap_or("")
}

fn thread(v: &Value) -> &str {
    v["thread"].as_str().unwrap_or("")
}

/// Every thread that starts ends once, before `atexit`, which is the last line; the
/// runtime's workers are among them.
fn every_thread_ends_before_atexit() -> Result<(), String> {
    let run = run()?;
    let events = &run.events;
    let atexit = events
        .iter()
        .position(|v| name(v) == "atexit")
        .ok_or("no atexit")?;
    ensure(atexit == events.len() - 1, || {
        format!("lines after atexit: {:?}", &events[atexit + 1..])
    })?;
    let mut started: HashMap<&str, usize> = HashMap::new();
    let mut exited: HashMap<&str, usize> = HashMap::new();
    for (i, v) in events.iter().enumerate() {
        match name(v) {
            "thread_start" => *started.entry(thread(v)).or_default() += 1,
            "thread_exit" => {
                *exited.entry(thread(v)).or_default() += 1;
                ensure(started.contains_key(thread(v)), || {
                    format!("line {i}: thread_exit before thread_start: {v}")
                })?;
            }
            _ => {}
        }
    }
    let workers = started
        .keys()
        .filter(|t| t.ends_with(":tokio-rt-worker"))
        .count();
    ensure(workers > 0, || format!("no worker announced: {started:?}"))?;
    for (name, &count) in &started {
        ensure(count == 1, || format!("{name} started {count} times"))?;
        ensure(exited.get(name) == Some(&1), || {
            format!("{name} ends {:?} times before atexit", exited.get(name))
        })?;
    }
    Ok(())
}

/// Each worker's `th_counter` comes on its own thread before its `thread_exit`, and
/// the process `counter` is their sum: every request answered.
fn per_thread_counters_are_ended_and_summed() -> Result<(), String> {
    let run = run()?;
    let answered = |v: &&Value| v["category"] == "server" && v["name"] == "answered";
    let per_thread: Vec<&Value> = run
        .events
        .iter()
        .filter(|v| name(v) == "th_counter")
        .filter(answered)
        .collect();
    ensure(!per_thread.is_empty(), || "no th_counter".into())?;
    let mut sum = 0;
    for line in &per_thread {
        sum += line["count"].as_u64().unwrap_or(0);
        let at = run
            .events
            .iter()
            .position(|v| std::ptr::eq(v, *line))
            .unwrap();
        let exit = run.events[at..]
            .iter()
            .find(|v| thread(v) == thread(line) && name(v) == "thread_exit");
        ensure(exit.is_some() || thread(line) == "main", || {
            format!(
                "th_counter of {} without a thread_exit after it",
                thread(line)
            )
        })?;
    }
    let total = run
        .events
        .iter()
        .filter(|v| name(v) == "counter")
        .find(answered)
        .ok_or("no process counter")?;
    let expected = (CONNECTIONS * REQUESTS) as u64;
    ensure(total["count"].as_u64() == Some(expected), || {
        format!("process counter {total}, expected {expected}")
    })?;
    ensure(sum == expected, || {
        format!("th_counter lines sum to {sum}, expected {expected}: {per_thread:?}")
    })
}

/// The bound on distinct `thread` values: `main`, the workers, and a task lane for each
/// connection open side by side beyond one per worker (the client opens
/// [`example::WAVE`] at a time; the server may still be ending a wave's connections
/// when the next one comes, so twice that).
fn lanes_stay_bounded() -> Result<(), String> {
    let run = run()?;
    let names: BTreeSet<&str> = run.events.iter().map(thread).collect();
    let bound = 1 + example::WORKERS + 2 * example::WAVE;
    ensure(names.len() <= bound, || {
        format!(
            "{} thread names for {CONNECTIONS} connections, bound {bound}: {names:?}",
            names.len()
        )
    })?;
    for name in &names {
        ensure(
            *name == "main" || name.ends_with(":tokio-rt-worker") || name.starts_with("task-lane-"),
            || format!("unexpected thread name {name}"),
        )?;
    }
    // No region was left out: one connection region per connection.
    let connections = run
        .events
        .iter()
        .filter(|v| name(v) == "region_enter" && v["label"] == "connection")
        .count();
    ensure(connections == CONNECTIONS, || {
        format!("{connections} connection regions for {CONNECTIONS} connections")
    })?;
    ensure(
        !run.events
            .iter()
            .any(|v| v["key"] == "task_regions_dropped"),
        || "regions were left out".into(),
    )
}

fn the_receiver_accepts_the_stream() -> Result<(), String> {
    let run = run()?;
    receiver::check_connection(&run.event_bytes)
        .map(|_| ())
        .map_err(|problems| problems.join("\n"))
}

/// `trace2 summary`'s reading: one process that ended with code 0, no region left
/// open, as many threads as `thread_start` lines, and the counter's total.
fn trace2_summary_reads_it() -> Result<(), String> {
    use trace2_cli::{input, progress::Progress, summary::Summariser};
    let run = run()?;
    let specs = input::expand(std::slice::from_ref(&run.event_path));
    let mut report = input::Report::default();
    let mut summariser = Summariser::new();
    input::for_each_event(&specs, &Progress::hidden(), &mut report, |event| {
        summariser.event(event)
    });
    ensure(report.clean(), || format!("{:?}", report.messages()))?;
    let summary = summariser.finish();
    let [process] = summary.processes.as_slice() else {
        return Err(format!("{} processes", summary.processes.len()));
    };
    ensure(process.ended && process.exit_code == Some(0), || {
        format!("ended {} code {:?}", process.ended, process.exit_code)
    })?;
    ensure(process.unclosed_regions == 0, || {
        format!("{} regions left open", process.unclosed_regions)
    })?;
    let starts = run
        .events
        .iter()
        .filter(|v| name(v) == "thread_start")
        .count() as u64;
    ensure(process.threads == starts, || {
        format!("summary: {} threads, stream: {starts}", process.threads)
    })?;
    ensure(
        process
            .regions
            .iter()
            .any(|r| r.label == "connection" && r.count == CONNECTIONS as u64),
        || format!("connection regions: {:?}", process.regions),
    )
}

/// The Perf stream: every thread that starts ends before `atexit`, the last line.
fn perf_ends_every_thread() -> Result<(), String> {
    let run = run()?;
    // `<time> <file:line> | d0 | <thread> | <event> | …`
    let columns: Vec<(String, String)> = run
        .perf
        .lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split('|').map(str::trim).collect();
            Some((cols.get(2)?.to_string(), cols.get(3)?.to_string()))
        })
        .collect();
    let last = columns.last().ok_or("empty Perf stream")?;
    ensure(last.1 == "atexit", || format!("last Perf line: {last:?}"))?;
    let started: BTreeSet<&str> = columns
        .iter()
        .filter(|(_, e)| e == "thread_start")
        .map(|(t, _)| t.as_str())
        .collect();
    let exited: BTreeSet<&str> = columns
        .iter()
        .filter(|(_, e)| e == "thread_exit")
        .map(|(t, _)| t.as_str())
        .collect();
    ensure(!started.is_empty() && started == exited, || {
        format!("started {started:?}, ended {exited:?}")
    })
}

/// The binary stream decodes to the Event file's lines: the same lines, and each
/// thread's in the same order (threads interleave differently: the decoder merges each
/// thread's batches in time order).
fn binary_decodes_to_the_event_lines() -> Result<(), String> {
    use tracing_trace2_binary::{TextFormat, TextOptions, decode_to_text};
    let run = run()?;
    let mut decoded = Vec::new();
    let report = decode_to_text(
        &run.binary[..],
        &mut decoded,
        &TextOptions::new(TextFormat::Event),
    )
    .map_err(|e| format!("decode: {e}"))?;
    ensure(report.is_complete(), || {
        format!("incomplete stream: {report}")
    })?;
    let by_thread = |bytes: &[u8]| {
        let mut threads: HashMap<String, Vec<String>> = HashMap::new();
        for line in String::from_utf8_lossy(bytes).lines() {
            let v: Value = serde_json::from_str(line).unwrap_or_default();
            threads
                .entry(thread(&v).to_owned())
                .or_default()
                .push(line.to_owned());
        }
        threads
    };
    let (want, got) = (by_thread(&run.event_bytes), by_thread(&decoded));
    ensure(want == got, || {
        let names: BTreeSet<&String> = want.keys().chain(got.keys()).collect();
        let differ: Vec<&&String> = names
            .iter()
            .filter(|t| want.get(**t) != got.get(**t))
            .collect();
        format!("threads whose lines differ: {differ:?}")
    })?;
    let last = String::from_utf8_lossy(&decoded)
        .lines()
        .last()
        .map(str::to_owned)
        .unwrap_or_default();
    ensure(last.starts_with("{\"event\":\"atexit\""), || {
        format!("last decoded line: {last}")
    })
}
