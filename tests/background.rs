//! The background writer seen from outside: the `emit` example runs as a child process
//! (this very binary, with `TRACE2_EMIT_CHILD` set, so that its main thread is a real
//! `main` and its ending is a real return, `exit` or panic) and every line it traced is
//! counted in the files it wrote.

#[path = "../examples/emit.rs"]
mod emit;
#[path = "support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::process::{Command, ExitCode, Output, Stdio};

use support::process::{self, EMIT_CHILD};

fn main() -> ExitCode {
    if std::env::var_os(EMIT_CHILD).is_some() {
        return emit::main();
    }
    support::runner::run_tests(&[
        ("lossless_return", lossless_return),
        ("lossless_return_with_guard", lossless_return_with_guard),
        ("lossless_exit", lossless_exit),
        ("lossless_panic", lossless_panic),
        ("two_threads_1e5_in_order", two_threads_1e5_in_order),
        ("lossy_reports_its_drops", lossy_reports_its_drops),
        ("direct_writer_for_reference", direct_writer_for_reference),
        (
            "processes_append_batches_without_tearing",
            processes_append_batches_without_tearing,
        ),
    ])
}

/// The `emit` program with a clean Trace2 environment (no host config, no GIT_*).
fn emit(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = process::clean_command(std::env::current_exe().unwrap());
    process::without_config(cmd.env(EMIT_CHILD, "1"))
        .args(args)
        .envs(env.iter().copied());
    cmd
}

/// The Event lines of a file, each checked to be one complete JSON object.
fn event_lines(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.ends_with('\n'), "torn last line in {}", path.display());
    support::json_lines(text.lines())
}

/// Checks that `lines` printf lines of each of `threads` threads arrived, in order;
/// returns how many lines of each event kind there were.
fn check_printf(events: &[serde_json::Value], threads: u64, lines: u64) -> HashMap<String, u64> {
    let mut next = vec![0u64; threads as usize];
    let mut kinds = HashMap::new();
    for e in events {
        let kind = e["event"].as_str().unwrap().to_owned();
        if kind == "printf" {
            let msg = e["msg"].as_str().unwrap();
            let (t, i) = msg.split_once(' ').unwrap();
            let t: usize = t.trim_start_matches('t').parse().unwrap();
            let i: u64 = i.parse().unwrap();
            assert_eq!(i, next[t], "thread {t} out of order");
            next[t] += 1;
        }
        *kinds.entry(kind).or_insert(0) += 1;
    }
    assert_eq!(
        next,
        vec![lines; threads as usize],
        "printf lines per thread"
    );
    kinds
}

/// Normal-format printf lines, counted per thread and checked in order.
fn check_normal_printf(path: &Path, threads: u64, lines: u64) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut next = vec![0u64; threads as usize];
    let mut others = Vec::new();
    for line in text.lines() {
        match line.strip_prefix('t').and_then(|r| r.split_once(' ')) {
            Some((t, i)) if t.parse::<usize>().is_ok() => {
                let t: usize = t.parse().unwrap();
                assert_eq!(i.parse::<u64>().unwrap(), next[t]);
                next[t] += 1;
            }
            _ => others.push(line.split(' ').next().unwrap_or("").to_owned()),
        }
    }
    assert_eq!(next, vec![lines; threads as usize]);
    others
}

struct Run {
    out: Output,
    events: Vec<serde_json::Value>,
    normal_others: Vec<String>,
}

/// Runs `emit` through the background writer into an Event and a brief Normal file.
fn run_ending(end: &str, extra: &[&str], threads: u64, lines: u64) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let event = dir.path().join("trace.event");
    let normal = dir.path().join("trace.normal");
    let (t, n) = (threads.to_string(), lines.to_string());
    let mut args = vec!["--threads", &t, "--lines", &n, "--end", end, "--code", "3"];
    args.extend_from_slice(&["--background", "lossless", "--capacity", "16"]);
    args.extend_from_slice(extra);
    let out = emit(
        &args,
        &[
            ("GIT_TRACE2_EVENT", event.to_str().unwrap()),
            ("GIT_TRACE2", normal.to_str().unwrap()),
            ("GIT_TRACE2_BRIEF", "1"),
        ],
    )
    .output()
    .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("emit: {lines} lines from {threads} threads\n")
    );
    let events = event_lines(&event);
    let normal_others = check_normal_printf(&normal, threads, lines);
    Run {
        out,
        events,
        normal_others,
    }
}

fn assert_complete_run(run: &Run, threads: u64, lines: u64, code: i32) {
    assert_eq!(run.out.status.code(), Some(code), "{:?}", run.out);
    let kinds = check_printf(&run.events, threads, lines);
    for kind in ["version", "start", "cmd_name", "exit", "atexit"] {
        assert_eq!(kinds.get(kind), Some(&1), "{kind}: {kinds:?}");
    }
    assert_eq!(run.events.last().unwrap()["event"], "atexit");
    assert_eq!(
        run.normal_others,
        ["version", "start", "cmd_name", "exit", "atexit"]
    );
    assert!(run.out.stderr.is_empty(), "{:?}", run.out);
}

fn lossless_return() {
    let run = run_ending("return", &[], 2, 20_000);
    assert_complete_run(&run, 2, 20_000, 3);
}

fn lossless_return_with_guard() {
    let run = run_ending("return", &["--guard"], 2, 20_000);
    assert_complete_run(&run, 2, 20_000, 3);
}

fn lossless_exit() {
    let run = run_ending("exit", &[], 2, 20_000);
    assert_complete_run(&run, 2, 20_000, 3);
}

fn lossless_panic() {
    let run = run_ending("panic", &[], 2, 20_000);
    assert_eq!(run.out.status.code(), Some(101), "{:?}", run.out);
    let stderr = String::from_utf8_lossy(&run.out.stderr);
    assert!(stderr.contains("emit: told to panic"), "{stderr}");
    let kinds = check_printf(&run.events, 2, 20_000);
    for kind in ["version", "start", "cmd_name"] {
        assert_eq!(kinds.get(kind), Some(&1), "{kind}: {kinds:?}");
    }
    // A panic is not an exit the program reports: no exit/atexit lines, and nothing
    // else lost (the worker thread, a plain `std::thread`, is announced: thread_start
    // and thread_exit).
    assert_eq!(kinds.len(), 4 + 2, "{kinds:?}");
    assert_eq!(run.normal_others, ["version", "start", "cmd_name"]);
}

fn two_threads_1e5_in_order() {
    let run = run_ending("return", &[], 2, 100_000);
    assert_complete_run(&run, 2, 100_000, 3);
}

/// The same run without the background writer: the line set the writer must match.
fn direct_writer_for_reference() {
    let dir = tempfile::tempdir().unwrap();
    let event = dir.path().join("trace.event");
    let out = emit(
        &["--threads", "2", "--lines", "1000", "--end", "exit"],
        &[("GIT_TRACE2_EVENT", event.to_str().unwrap())],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    let events = event_lines(&event);
    let kinds = check_printf(&events, 2, 1000);
    // + thread_start and thread_exit of the worker thread.
    assert_eq!(kinds.len(), 6 + 2, "{kinds:?}");
}

/// A pipe whose write end becomes fd 3 of the child: returns (read end, our copy of
/// the write end, to be dropped once the child has started).
fn pipe_to_fd3(cmd: &mut Command) -> (OwnedFd, OwnedFd) {
    let (read, write) = process::pipe();
    process::give_fd(cmd, write.as_raw_fd(), 3);
    (read, write)
}

/// Lossy mode over a pipe nobody reads until the program has traced everything: the
/// pipe fills, the worker waits, the queue overflows. Every line is either delivered or
/// counted in the drop report, which comes right before `atexit`.
fn lossy_reports_its_drops() {
    let (threads, lines) = (2u64, 20_000u64);
    let (t, n) = (threads.to_string(), lines.to_string());
    let mut cmd = emit(
        &[
            "--threads",
            &t,
            "--lines",
            &n,
            "--background",
            "lossy",
            "--capacity",
            "8",
        ],
        &[("GIT_TRACE2_EVENT", "3")],
    );
    let (read, write) = pipe_to_fd3(&mut cmd);
    let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
    // Only the child may hold the write end, or EOF never comes.
    drop(write);
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut said = String::new();
    stdout.read_line(&mut said).unwrap();
    assert_eq!(
        said,
        format!("emit: {lines} lines from {threads} threads\n")
    );
    let mut trace = String::new();
    std::fs::File::from(read)
        .read_to_string(&mut trace)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success());
    let events = support::json_lines(trace.lines());
    // The drop report comes right before `atexit`, which stays the last line.
    assert_eq!(events.last().unwrap()["event"], "atexit");
    let last = &events[events.len() - 2];
    assert_eq!(last["event"], "error", "{last}");
    let msg = last["msg"].as_str().unwrap();
    let dropped: u64 = msg
        .strip_prefix("trace2: background writer for 'GIT_TRACE2_EVENT' dropped ")
        .and_then(|r| r.strip_suffix(" lines"))
        .unwrap_or_else(|| panic!("{msg}"))
        .parse()
        .unwrap();
    assert_eq!(
        last["fmt"],
        "trace2: background writer for '%s' dropped %lu lines"
    );
    assert!(dropped > 0);
    // version, start, cmd_name, the printf lines, exit, atexit were all sent, and the
    // worker thread's thread_start and thread_exit.
    let sent = threads * lines + 5 + 2;
    assert_eq!(events.len() as u64 - 1 + dropped, sent);
    // What arrived is still in per-thread order.
    let mut next = [0u64; 2];
    for e in &events {
        if e["event"] == "printf" {
            let (t, i) = e["msg"].as_str().unwrap().split_once(' ').unwrap();
            let t: usize = t[1..].parse().unwrap();
            let i: u64 = i.parse().unwrap();
            assert!(i >= next[t], "thread {t} out of order");
            next[t] = i + 1;
        }
    }
}

/// Four processes append to the same Event and Perf files at once, each through its
/// background writer, which writes many lines per `write` (up to 64 KiB): every line
/// arrives whole, none is lost, each thread's lines keep their order.
fn processes_append_batches_without_tearing() {
    const PROCESSES: usize = 4;
    let (threads, lines) = (2u64, 30_000u64);
    let dir = tempfile::tempdir().unwrap();
    let event = dir.path().join("shared.event");
    let perf = dir.path().join("shared.perf");
    let (t, n) = (threads.to_string(), lines.to_string());
    let children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            emit(
                &["--threads", &t, "--lines", &n, "--background", "lossless"],
                &[
                    ("GIT_TRACE2_EVENT", event.to_str().unwrap()),
                    ("GIT_TRACE2_PERF", perf.to_str().unwrap()),
                ],
            )
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let events = event_lines(&event);
    let mut per_process: HashMap<String, Vec<serde_json::Value>> = HashMap::new();
    for e in events {
        let sid = e["sid"].as_str().unwrap().to_owned();
        per_process.entry(sid).or_default().push(e);
    }
    assert_eq!(per_process.len(), PROCESSES);
    for events in per_process.values() {
        let kinds = check_printf(events, threads, lines);
        assert_eq!(kinds.get("atexit"), Some(&1), "{kinds:?}");
        assert_eq!(events.last().unwrap()["event"], "atexit");
    }
    let perf = std::fs::read_to_string(&perf).unwrap();
    assert!(perf.ends_with('\n'));
    let mut printf = 0;
    for line in perf.lines() {
        assert_eq!(line.matches(" | ").count(), 8, "torn perf line {line:?}");
        printf += u64::from(line.contains("| printf "));
    }
    assert_eq!(printf, PROCESSES as u64 * threads * lines);
}
