//! Real processes writing a binary trace file, ended every way a program ends: nothing
//! is lost on `std::process::exit` or a panic out of `main` (the C `atexit` handler
//! writes every thread's batch and the END frame), a thread's end writes its batch, a
//! SIGKILL loses at most each thread's unwritten batch, threads that went idle have their
//! batches written within the flush interval (so a SIGKILL then loses nothing they
//! recorded), and a `fork`ed child writes a stream of its own without repeating its
//! parent's records (and flushes its idle threads itself).
//!
//! This binary is its own child: with `T2B_SCENARIO` set it plays that scenario in its
//! main thread (so that exits and panics are the program's own, not a test harness's);
//! without it, it runs the tests.

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Arc, Barrier};

use std::time::{Duration, Instant};
use support::decode_all;

use tracing_trace2_binary::{BinaryWriter, DEFAULT_BATCH_SIZE, DestSettings, MIN_BATCH_SIZE, dest};
use tracing_trace2_core::{Callsite, Record, Trace2Event, clock};

const SCENARIO: &str = "T2B_SCENARIO";
const SID: &str = "20260101T000000.000000Z-H0123abcd-P00001234";
/// The flush interval of the idle scenarios.
const IDLE_INTERVAL: Duration = Duration::from_millis(200);
/// How long the idle scenarios wait for the idle threads' batches before giving up:
/// far beyond the interval, for a loaded machine; without a flusher they never come.
const IDLE_PATIENCE: Duration = Duration::from_secs(10);

fn main() -> ExitCode {
    if let Ok(scenario) = std::env::var(SCENARIO) {
        play(&scenario);
        return ExitCode::SUCCESS;
    }
    // Unix only: `fork`, and `std::process::exit` running the C `atexit` handler
    // (on Windows it is `ExitProcess`, which runs none: batches not yet written are lost).
    let tests: &[(&str, fn())] = &[
        #[cfg(unix)]
        (
            "process_exit_writes_everything",
            process_exit_writes_everything,
        ),
        (
            "panic_out_of_main_writes_everything",
            panic_out_of_main_writes_everything,
        ),
        (
            "dropping_the_writer_ends_the_stream",
            dropping_the_writer_ends_the_stream,
        ),
        (
            "a_threads_end_writes_its_batch",
            a_threads_end_writes_its_batch,
        ),
        (
            "sigkill_loses_only_unwritten_batches",
            sigkill_loses_only_unwritten_batches,
        ),
        #[cfg(unix)]
        (
            "a_forked_child_writes_its_own_stream",
            a_forked_child_writes_its_own_stream,
        ),
        (
            "idle_threads_batches_are_written_within_the_interval",
            idle_threads_batches_are_written_within_the_interval,
        ),
        #[cfg(unix)]
        (
            "a_forked_child_flushes_its_idle_threads",
            a_forked_child_flushes_its_idle_threads,
        ),
    ];
    support::run_tests("process", tests)
}

// ---- the child's side ----

fn writer(batch: usize, exit_handler: bool) -> BinaryWriter {
    writer_with_interval(
        batch,
        exit_handler,
        tracing_trace2_binary::DEFAULT_FLUSH_INTERVAL,
    )
}

fn writer_with_interval(batch: usize, exit_handler: bool, interval: Duration) -> BinaryWriter {
    let settings = DestSettings {
        dst_debug: true,
        max_files: 0,
        sid: SID.to_owned(),
    };
    let dest = dest::open_from_env(&settings).expect("TRACING_TRACE2_BINARY opens");
    BinaryWriter::builder()
        .with_batch_size(batch)
        .with_exit_handler(exit_handler)
        .with_flush_interval(interval)
        .build(dest.sink)
}

fn say(writer: &BinaryWriter, thread: &str, msg: &str) {
    writer.record(&Record {
        event: Trace2Event::Printf { msg: Some(msg) },
        time: clock::now(),
        sid: SID,
        depth: 0,
        thread,
        callsite: Callsite {
            file: Some(file!()),
            line: line!(),
        },
        open_regions: 0,
    });
}

/// Two threads that record `count` messages each and then stay alive, idle.
fn idle_threads(writer: &BinaryWriter, count: usize) {
    let recorded = Arc::new(Barrier::new(3));
    for n in 1..=2 {
        let writer = writer.clone();
        let recorded = Arc::clone(&recorded);
        std::thread::spawn(move || {
            let name = format!("th{n:02}:idle");
            for i in 0..count {
                say(&writer, &name, &format!("{name} {i}"));
            }
            recorded.wait();
            loop {
                std::thread::park();
            }
        });
    }
    recorded.wait();
}

fn play(scenario: &str) {
    match scenario {
        "exit" => {
            let w = writer(MIN_BATCH_SIZE, true);
            (0..10).for_each(|i| say(&w, "main", &format!("main {i}")));
            idle_threads(&w, 10);
            std::process::exit(3);
        }
        "panic" => {
            let w = writer(MIN_BATCH_SIZE, true);
            (0..10).for_each(|i| say(&w, "main", &format!("main {i}")));
            idle_threads(&w, 10);
            panic!("out of main");
        }
        "drop" => {
            let w = writer(MIN_BATCH_SIZE, false);
            (0..10).for_each(|i| say(&w, "main", &format!("main {i}")));
        }
        "thread-end" => {
            let w = writer(MIN_BATCH_SIZE, false);
            let t = {
                let w = w.clone();
                std::thread::spawn(move || {
                    (0..10).for_each(|i| say(&w, "th01:short", &format!("short {i}")));
                })
            };
            t.join().unwrap();
            // No exit handler runs: only the thread's end wrote its batch.
            // SAFETY: ends the process at once, as a crash would.
            unsafe { libc::_exit(0) };
        }
        "kill" => {
            // No idle flush while the test kills: a batch the flusher is writing at that
            // moment may be cut by the kernel between two pages (a torn last batch, which
            // the decoder skips and reports), and this scenario is about batches left
            // unwritten. The flusher meets a kill in
            // `idle_threads_batches_are_written_within_the_interval`.
            let w = writer_with_interval(MIN_BATCH_SIZE, true, Duration::from_secs(3600));
            let recorded = Arc::new(Barrier::new(3));
            // The other threads first: main's part waits for them at the end.
            for n in [1, 2, 0] {
                let w = w.clone();
                let recorded = Arc::clone(&recorded);
                let body = move || {
                    let name = if n == 0 {
                        "main".to_owned()
                    } else {
                        format!("th{n:02}:busy")
                    };
                    for i in 0..5000 {
                        say(&w, &name, &format!("{name} {i}"));
                    }
                    recorded.wait();
                };
                if n == 0 {
                    body();
                } else {
                    std::thread::spawn(body);
                }
            }
            println!("ready");
            loop {
                std::thread::park();
            }
        }
        #[cfg(unix)]
        "fork" => {
            let w = writer(MIN_BATCH_SIZE, true);
            (0..5).for_each(|i| say(&w, "main", &format!("parent before {i}")));
            // SAFETY: the child only records, exits and never returns here.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                (0..5).for_each(|i| say(&w, "main", &format!("child {i}")));
                std::process::exit(0);
            }
            let mut status = 0;
            // SAFETY: waits for the child just forked.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            (0..5).for_each(|i| say(&w, "main", &format!("parent after {i}")));
            std::process::exit(0);
        }
        "idle-kill" => {
            // Batches far from full: only the flush interval can write them.
            let w = writer_with_interval(DEFAULT_BATCH_SIZE, true, IDLE_INTERVAL);
            (0..5).for_each(|i| say(&w, "main", &format!("main {i}")));
            idle_threads(&w, 10);
            println!("ready");
            loop {
                std::thread::park();
            }
        }
        #[cfg(unix)]
        "fork-idle" => {
            let file = std::env::var_os(dest::ENV_NAME).expect("a file");
            let w = writer_with_interval(DEFAULT_BATCH_SIZE, true, IDLE_INTERVAL);
            // The parent's flusher runs before the fork; the child must start its own.
            (0..3).for_each(|i| say(&w, "main", &format!("parent {i}")));
            // SAFETY: the child only records and waits to be killed.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                (0..5).for_each(|i| say(&w, "main", &format!("child {i}")));
                loop {
                    std::thread::park();
                }
            }
            let started = Instant::now();
            while started.elapsed() < IDLE_PATIENCE {
                std::thread::sleep(IDLE_INTERVAL);
                let (msgs, _) = messages(&std::fs::read(&file).unwrap_or_default());
                if msgs.iter().any(|m| m.1 == "child 4") {
                    break;
                }
            }
            // SAFETY: kills and reaps the child just forked.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
            std::process::exit(0);
        }
        other => panic!("no scenario {other}"),
    }
}

// ---- the tests' side ----

fn run(scenario: &str, file: &Path) -> std::process::Output {
    Command::new(std::env::current_exe().unwrap())
        .env(SCENARIO, scenario)
        .env(dest::ENV_NAME, file)
        .output()
        .unwrap()
}

/// Messages of the decoded printf records, per stream.
fn messages(bytes: &[u8]) -> (Vec<(usize, String)>, tracing_trace2_binary::DecodeReport) {
    let (decoded, report) = decode_all(bytes);
    let msgs = decoded
        .into_iter()
        .filter_map(|(s, text)| {
            let m = text.split("msg: Some(\"").nth(1)?;
            Some((s, m[..m.find('"')?].to_owned()))
        })
        .collect();
    (msgs, report)
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix} {i}")).collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[cfg(unix)]
fn process_exit_writes_everything() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("exit.t2b");
    let out = run("exit", &file);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let (msgs, report) = messages(&std::fs::read(&file).unwrap());
    assert!(report.is_complete(), "{report}");
    let mut want = names("main", 10);
    want.extend(names("th01:idle", 10));
    want.extend(names("th02:idle", 10));
    assert_eq!(
        sorted(msgs.into_iter().map(|m| m.1).collect()),
        sorted(want)
    );
}

fn panic_out_of_main_writes_everything() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("panic.t2b");
    let out = run("panic", &file);
    assert_eq!(out.status.code(), Some(101), "{out:?}");
    let (msgs, report) = messages(&std::fs::read(&file).unwrap());
    assert!(report.is_complete(), "{report}");
    assert_eq!(msgs.len(), 30);
}

fn dropping_the_writer_ends_the_stream() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("drop.t2b");
    let out = run("drop", &file);
    assert!(out.status.success(), "{out:?}");
    let (msgs, report) = messages(&std::fs::read(&file).unwrap());
    assert!(report.is_complete(), "{report}");
    assert_eq!(
        msgs.into_iter().map(|m| m.1).collect::<Vec<_>>(),
        names("main", 10)
    );
}

fn a_threads_end_writes_its_batch() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("thread.t2b");
    let out = run("thread-end", &file);
    assert!(out.status.success(), "{out:?}");
    let (msgs, report) = messages(&std::fs::read(&file).unwrap());
    assert_eq!(
        msgs.into_iter().map(|m| m.1).collect::<Vec<_>>(),
        names("short", 10)
    );
    // `_exit`: no END frame, and the decoder says so.
    assert!(!report.streams[0].ended && !report.is_complete());
}

fn sigkill_loses_only_unwritten_batches() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("kill.t2b");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(SCENARIO, "kill")
        .env(dest::ENV_NAME, &file)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(std::time::Duration::from_secs(120));
    if line.is_err() {
        let _ = child.kill();
    }
    assert_eq!(line.as_deref(), Ok("ready\n"));
    child.kill().unwrap();
    child.wait().unwrap();
    let bytes = std::fs::read(&file).unwrap();
    let (msgs, report) = messages(&bytes);
    assert_eq!(report.skipped_bytes, 0, "{report}");
    assert!(!report.streams[0].ended);
    for (index, name) in ["main", "th01:busy", "th02:busy"].into_iter().enumerate() {
        let got: Vec<String> = msgs
            .iter()
            .filter(|m| m.1.starts_with(&format!("{name} ")))
            .map(|m| m.1.clone())
            .collect();
        let want = names(name, 5000);
        // Every complete batch is there, in order; what is missing is the last batch,
        // no more records than the thread's batches held on average (give or take).
        assert!(want.starts_with(&got), "{name}");
        let thread = report.streams[0]
            .threads
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("{name}: {report}"));
        let per_batch = (thread.events / thread.batches.max(1)) as usize;
        assert!(thread.batches > 2, "{name}: {}", thread.batches);
        assert!(
            !got.is_empty() && want.len() - got.len() < per_batch * 3 / 2,
            "{name} ({index}): {} of 5000, {per_batch} per batch",
            got.len()
        );
    }
}

#[cfg(unix)]
fn a_forked_child_writes_its_own_stream() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fork.t2b");
    let out = run("fork", &file);
    assert!(out.status.success(), "{out:?}");
    let (msgs, report) = messages(&std::fs::read(&file).unwrap());
    assert!(report.is_complete(), "{report}");
    assert_eq!(report.streams.len(), 2, "{report}");
    assert_ne!(report.streams[0].pid, report.streams[1].pid);
    let of = |s: usize| -> Vec<String> {
        msgs.iter()
            .filter(|m| m.0 == s)
            .map(|m| m.1.clone())
            .collect()
    };
    let (parent, child) = if of(0)[0].starts_with("parent") {
        (of(0), of(1))
    } else {
        (of(1), of(0))
    };
    let mut want = names("parent before", 5);
    want.extend(names("parent after", 5));
    assert_eq!(parent, want);
    // Not one of the parent's records is repeated in the child's stream.
    assert_eq!(child, names("child", 5));
}

/// Threads that record a few events and then idle (their batches far from full): the
/// flusher writes the batches within the flush interval, so a SIGKILL after the idle
/// loses none of their events.
fn idle_threads_batches_are_written_within_the_interval() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("idle.t2b");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(SCENARIO, "idle-kill")
        .env(dest::ENV_NAME, &file)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    let _ = BufReader::new(stdout).read_line(&mut line);
    assert_eq!(line, "ready\n");
    let mut want = names("main", 5);
    want.extend(names("th01:idle", 10));
    want.extend(names("th02:idle", 10));
    let want = sorted(want);
    // Idle beyond the interval, then as long as a loaded machine may need.
    std::thread::sleep(IDLE_INTERVAL * 2);
    let started = Instant::now();
    while started.elapsed() < IDLE_PATIENCE {
        let (msgs, _) = messages(&std::fs::read(&file).unwrap_or_default());
        if sorted(msgs.into_iter().map(|m| m.1).collect()) == want {
            break;
        }
        std::thread::sleep(IDLE_INTERVAL / 2);
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let (msgs, report) = messages(&std::fs::read(&file).unwrap());
    // Every event recorded before the idle, each thread's in order, none twice.
    assert_eq!(
        sorted(msgs.iter().map(|m| m.1.clone()).collect()),
        want,
        "{report}"
    );
    assert_eq!(report.skipped_bytes, 0, "{report}");
    assert!(!report.streams[0].ended, "{report}");
    for name in ["main", "th01:idle", "th02:idle"] {
        let of: Vec<String> = msgs
            .iter()
            .filter(|m| m.1.starts_with(&format!("{name} ")))
            .map(|m| m.1.clone())
            .collect();
        assert_eq!(of, names(name, if name == "main" { 5 } else { 10 }));
    }
    for thread in &report.streams[0].threads {
        assert_eq!(thread.lost_batches, 0, "{report}");
    }
}

/// A `fork`ed child's idle batches are written by a flusher of its own (the parent's
/// flusher thread does not exist in the child).
#[cfg(unix)]
fn a_forked_child_flushes_its_idle_threads() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fork-idle.t2b");
    let out = run("fork-idle", &file);
    assert!(out.status.success(), "{out:?}");
    let (msgs, report) = messages(&std::fs::read(&file).unwrap());
    assert_eq!(report.streams.len(), 2, "{report}");
    let of = |prefix: &str| -> Vec<String> {
        msgs.iter()
            .filter(|m| m.1.starts_with(prefix))
            .map(|m| m.1.clone())
            .collect()
    };
    assert_eq!(of("parent "), names("parent", 3));
    assert_eq!(of("child "), names("child", 5), "{report}");
}
