//! The flight recorder across a `fork` and threads that end: a forked child's ring
//! starts empty (its snapshot holds its own records, none of its parent's) and the
//! parent's ring goes on undisturbed; a thread's batch reaches the ring when the thread
//! ends, and a snapshot taken afterwards holds all of it. Several recorders in one
//! process keep to their own rings.
//!
//! This binary is its own child: with `FLIGHT_SCENARIO` set it plays that scenario in
//! its main thread (a `fork` from a test harness's thread would copy the harness).

mod support;

use std::path::{Path, PathBuf};
#[cfg(unix)]
use std::process::Command;
use std::process::ExitCode;

use support::decode_all;
use tracing_trace2_binary::flight::{self, FlightRecorder, Trigger};
use tracing_trace2_binary::{BinaryWriter, MIN_BATCH_SIZE};
use tracing_trace2_core::{Callsite, Record, Trace2Event, clock};

const SCENARIO: &str = "FLIGHT_SCENARIO";
const DIR: &str = "FLIGHT_DIR";
const SID: &str = "20260101T000000.000000Z-H0123abcd-P00001234";

fn main() -> ExitCode {
    if let Ok(scenario) = std::env::var(SCENARIO) {
        play(
            &scenario,
            Path::new(&std::env::var_os(DIR).expect("a directory")),
        );
        return ExitCode::SUCCESS;
    }
    #[cfg_attr(not(unix), allow(unused_mut))]
    let mut tests: Vec<(&str, fn())> = vec![
        (
            "ended_threads_are_in_the_window",
            ended_threads_are_in_the_window,
        ),
        (
            "recorders_keep_to_their_own_rings",
            recorders_keep_to_their_own_rings,
        ),
        (
            "a_failed_snapshot_says_so_once",
            a_failed_snapshot_says_so_once,
        ),
        (
            "every_live_recorder_is_snapshotted",
            every_live_recorder_is_snapshotted,
        ),
    ];
    // Windows has no fork.
    #[cfg(unix)]
    tests.insert(
        0,
        (
            "a_forked_child_starts_an_empty_ring",
            a_forked_child_starts_an_empty_ring,
        ),
    );
    // The memory figures come from Linux's /proc.
    #[cfg(target_os = "linux")]
    tests.push((
        "the_cap_bounds_all_the_memory_the_recorder_holds",
        the_cap_bounds_all_the_memory_the_recorder_holds,
    ));
    #[cfg(unix)]
    tests.insert(
        1,
        (
            "forked_processes_snapshotting_together_lose_nothing",
            forked_processes_snapshotting_together_lose_nothing,
        ),
    );
    #[cfg(unix)]
    tests.extend([
        (
            "an_idle_process_answers_the_signal_without_a_thread",
            an_idle_process_answers_the_signal_without_a_thread as fn(),
        ),
        (
            "signals_while_threads_record_heavily_neither_block_nor_tear",
            signals_while_threads_record_heavily_neither_block_nor_tear,
        ),
        (
            "a_child_forked_while_a_snapshot_is_written_answers_sigusr2",
            a_child_forked_while_a_snapshot_is_written_answers_sigusr2,
        ),
    ]);
    support::run_tests("flight_process", &tests)
}

fn recorder(dir: &Path) -> FlightRecorder {
    FlightRecorder::builder(dir)
        .with_signal(false)
        .with_writer(BinaryWriter::builder().with_batch_size(MIN_BATCH_SIZE))
        .build()
        .expect("a writable directory")
}

fn say(recorder: &FlightRecorder, thread: &str, msg: &str) {
    recorder.record(&Record {
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

// ---- the child's side ----

fn play(scenario: &str, #[cfg_attr(not(unix), allow(unused_variables))] dir: &Path) {
    match scenario {
        #[cfg(unix)]
        "fork" => {
            let r = recorder(dir);
            (0..5).for_each(|i| say(&r, "main", &format!("parent before {i}")));
            // In the ring before the fork: the child's copy of it must not show.
            r.writer().flush_all();
            // SAFETY: the child only records, snapshots and exits.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                (0..5).for_each(|i| say(&r, "main", &format!("child {i}")));
                r.snapshot(Trigger::Request).expect("the child's snapshot");
                std::process::exit(0);
            }
            let mut status = 0;
            // SAFETY: waits for the child just forked.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            assert_eq!(status, 0);
            (0..5).for_each(|i| say(&r, "main", &format!("parent after {i}")));
            r.snapshot(Trigger::Request).expect("the parent's snapshot");
        }
        #[cfg(unix)]
        "storm" => {
            // A minimum age longer than the storm: every snapshot has the records.
            let r = FlightRecorder::builder(dir)
                .with_signal(false)
                .with_min_age(std::time::Duration::from_secs(3600))
                .build()
                .expect("a writable directory");
            record(&r, Trace2Event::Version { exe: "2.47.3" });
            record(
                &r,
                Trace2Event::Start {
                    argv: &["storm", "--all"],
                },
            );
            say(&r, "main", "parent before");
            let mut children = Vec::new();
            for _ in 0..STORM_CHILDREN {
                // SAFETY: the child only records, snapshots and exits.
                let pid = unsafe { libc::fork() };
                if pid == 0 {
                    storm(&r);
                    // SAFETY: leaves without the parent's exit handlers.
                    unsafe { libc::_exit(0) };
                }
                children.push(pid);
            }
            storm(&r);
            for pid in children {
                let mut status = 0;
                // SAFETY: waits for a child just forked.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                assert_eq!(status, 0);
            }
        }
        #[cfg(target_os = "linux")]
        "memory" => memory_workload(),
        "vanished" => {
            let r = recorder(dir);
            say(&r, "main", "before");
            std::fs::remove_dir(dir).expect("the directory removed");
            let err = r.snapshot(Trigger::Request).expect_err("no directory");
            assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
            assert_eq!(r.stats().failed, 1);
        }
        #[cfg(unix)]
        "signal-idle" => {
            let r = FlightRecorder::builder(dir)
                .with_writer(BinaryWriter::builder().with_batch_size(MIN_BATCH_SIZE))
                .build()
                .expect("a writable directory");
            record(&r, Trace2Event::Version { exe: "2.47.3" });
            record(&r, Trace2Event::Start { argv: &["idle"] });
            // Enough to fill batches into the ring, and a last one left in the slot.
            (0..200).for_each(|i| say(&r, "main", &format!("idle {i}")));
            ready_then_wait_for_stdin();
        }
        #[cfg(unix)]
        "signal-busy" => {
            let r = FlightRecorder::builder(dir)
                .with_min_age(std::time::Duration::from_millis(50))
                .with_writer(BinaryWriter::builder().with_batch_size(MIN_BATCH_SIZE))
                .build()
                .expect("a writable directory");
            record(&r, Trace2Event::Version { exe: "2.47.3" });
            record(&r, Trace2Event::Start { argv: &["busy"] });
            let stop = std::sync::atomic::AtomicBool::new(false);
            let started = std::sync::Barrier::new(3);
            std::thread::scope(|scope| {
                for t in 0..2 {
                    let (r, stop, started) = (&r, &stop, &started);
                    scope.spawn(move || {
                        let name = format!("th{t:02}:busy");
                        say(r, &name, &format!("busy{t} first"));
                        started.wait();
                        let mut i = 0u64;
                        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                            say(r, &name, &format!("busy{t} {i}"));
                            i += 1;
                        }
                    });
                }
                // Both threads recording before the first signal.
                started.wait();
                ready_then_wait_for_stdin();
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            });
        }
        #[cfg(unix)]
        "signal-fork" => fork_while_a_snapshot_is_written(dir),
        other => panic!("unknown scenario {other}"),
    }
}

/// A thread writes a snapshot that fails (the directory is gone) and stays in the
/// middle of it, writing its warning to a full stderr, while the main thread forks.
/// The child makes the directory again, records, says "ready child=<pid>" and waits
/// for stdin to close; the parent waits for the child, then for its writing thread,
/// whose warning goes out once the test reads stderr.
#[cfg(unix)]
fn fork_while_a_snapshot_is_written(dir: &Path) {
    use std::time::{Duration, Instant};
    let r = FlightRecorder::builder(dir)
        .with_writer(BinaryWriter::builder().with_batch_size(MIN_BATCH_SIZE))
        .build()
        .expect("a writable directory");
    record(&r, Trace2Event::Version { exe: "2.47.3" });
    record(&r, Trace2Event::Start { argv: &["fork"] });
    (0..200).for_each(|i| say(&r, "main", &format!("parent {i}")));
    fill_stderr();
    std::fs::remove_dir(dir).expect("the directory removed");
    std::thread::scope(|scope| {
        let writing = scope.spawn(|| r.snapshot(Trigger::Request));
        // Counted as failed before the warning is written: from here on the thread
        // holds the snapshot in progress until the test reads stderr.
        let deadline = Instant::now() + Duration::from_secs(10);
        while r.stats().failed == 0 {
            assert!(Instant::now() < deadline, "the snapshot never failed");
            std::thread::sleep(Duration::from_millis(1));
        }
        // SAFETY: the child records, waits and leaves with `_exit`.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // A panic must not unwind into the scope, which would wait for a thread
            // the child does not have.
            let played = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                std::fs::create_dir(dir).expect("the directory made again");
                // Batches into the ring: the handler serves a child whose ring holds
                // something of its own (before that, the ring is still the parent's).
                (0..1000).for_each(|i| say(&r, "main", &format!("child {i}")));
                println!("ready child={}", std::process::id());
                use std::io::{Read, Write};
                std::io::stdout().flush().unwrap();
                std::io::stdin().read_to_end(&mut Vec::new()).unwrap();
            }));
            // SAFETY: leaves without the parent's exit handlers.
            unsafe { libc::_exit(i32::from(played.is_err())) };
        }
        let mut status = 0;
        // SAFETY: waits for the child just forked.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(status, 0);
        let written = writing.join().unwrap();
        assert!(written.is_err(), "{written:?}");
    });
}

/// Fills stderr (a pipe) up to the last byte, so that the next write to it blocks.
#[cfg(unix)]
fn fill_stderr() {
    // SAFETY: reads and sets the flags of descriptor 2 and writes to it from a live
    // buffer; the flags are put back.
    unsafe {
        let flags = libc::fcntl(2, libc::F_GETFL);
        assert!(flags >= 0);
        assert_eq!(libc::fcntl(2, libc::F_SETFL, flags | libc::O_NONBLOCK), 0);
        let chunk = [b'.'; 4096];
        for size in [chunk.len(), 1] {
            while libc::write(2, chunk.as_ptr().cast(), size) > 0 {}
        }
        assert_eq!(libc::fcntl(2, libc::F_SETFL, flags), 0);
    }
}

/// Says "ready" with the number of this process's threads, then blocks in `read` until
/// stdin closes: an idle process, as far as the recorder can tell.
#[cfg(unix)]
fn ready_then_wait_for_stdin() {
    use std::io::{Read, Write};
    let threads = std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count());
    println!("ready threads={threads}");
    std::io::stdout().flush().unwrap();
    let mut rest = Vec::new();
    std::io::stdin().read_to_end(&mut rest).unwrap();
}

/// Processes taking snapshots together in the storm (the parent and its children).
#[cfg(unix)]
const STORM_CHILDREN: usize = 3;
/// Snapshots each of them takes: 10,000 in all.
#[cfg(unix)]
const STORM_SNAPSHOTS: usize = 2_500;

#[cfg(unix)]
fn record(recorder: &FlightRecorder, event: Trace2Event<'_>) {
    recorder.record(&Record {
        event,
        time: clock::now(),
        sid: SID,
        depth: 0,
        thread: "main",
        callsite: Callsite::default(),
        open_regions: 0,
    });
}

/// One process's share of the storm: a record of its own, then snapshots one after the
/// other, each of which must be written.
#[cfg(unix)]
fn storm(r: &FlightRecorder) {
    say(r, "main", &format!("process {}", std::process::id()));
    for i in 0..STORM_SNAPSHOTS {
        let written = r.snapshot(Trigger::Request).expect("a snapshot");
        assert!(
            written.is_some(),
            "snapshot {i} not written: {:?}",
            r.stats()
        );
    }
}

/// The ring's cap of the memory workload (`0`: the binary target into nothing, the
/// baseline).
#[cfg(target_os = "linux")]
const CAP: &str = "FLIGHT_CAP";

/// Records until a ring of `FLIGHT_CAP` bytes has been full for a while (or, with no
/// cap, a fixed number of records into the binary target), then prints the process's
/// anonymous memory in KiB.
#[cfg(target_os = "linux")]
fn memory_workload() {
    let cap: usize = std::env::var(CAP).unwrap().parse().unwrap();
    let text: String = "x".repeat(40);
    let start = std::time::Instant::now();
    if cap == 0 {
        let writer = BinaryWriter::builder()
            .with_exit_handler(false)
            .build(tracing_trace2_binary::dest::NullSink);
        for i in 0..200_000u64 {
            writer.record(&memory_record(i, &text));
        }
        writer.flush_all();
        println!("anon_kib={}", anonymous_kib());
        drop(writer);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let r = FlightRecorder::builder(dir.path())
        .with_signal(false)
        .with_max_bytes(cap)
        .with_min_age(std::time::Duration::from_secs(3600))
        .build()
        .expect("a writable directory");
    // Full, then as much again: every buffer the ring will ever hold is in use.
    let mut i = 0u64;
    let mut full_at = None;
    loop {
        for _ in 0..1_000 {
            r.record(&memory_record(i, &text));
            i += 1;
        }
        let evicted = r.stats().evicted_batches;
        match full_at {
            None if evicted > 0 => full_at = Some(i),
            Some(at) if i >= 2 * at => break,
            _ => {}
        }
        assert!(start.elapsed().as_secs() < 60, "the ring never filled");
    }
    r.writer().flush_all();
    println!("anon_kib={}", anonymous_kib());
}

#[cfg(target_os = "linux")]
fn memory_record<'a>(i: u64, text: &'a str) -> Record<'a> {
    Record {
        event: if i.is_multiple_of(2) {
            Trace2Event::Printf { msg: Some(text) }
        } else {
            Trace2Event::Printf {
                msg: Some(&text[..(i % 40) as usize]),
            }
        },
        time: clock::now(),
        sid: SID,
        depth: 0,
        thread: "main",
        callsite: Callsite::default(),
        open_regions: 0,
    }
}

/// The anonymous memory of this process (heap and stacks), in KiB.
#[cfg(target_os = "linux")]
fn anonymous_kib() -> u64 {
    std::fs::read_to_string("/proc/self/smaps_rollup")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Anonymous:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("an Anonymous line")
}

// ---- the tests ----

fn messages(file: &Path) -> Vec<String> {
    let (decoded, report) = decode_all(&std::fs::read(file).unwrap());
    assert!(report.is_complete(), "{report}");
    decoded
        .into_iter()
        .filter_map(|(_, text)| {
            let m = text.split("msg: Some(\"").nth(1)?;
            Some(m[..m.find('"')?].to_owned())
        })
        .collect()
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix} {i}")).collect()
}

fn snapshots(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

#[cfg(unix)]
fn a_forked_child_starts_an_empty_ring() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .env(SCENARIO, "fork")
        .env(DIR, dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let files = snapshots(dir.path());
    assert_eq!(files.len(), 2, "{files:?}");
    let mut texts: Vec<Vec<String>> = files.iter().map(|f| messages(f)).collect();
    texts.sort();
    // The child's: its own records only (the marker is not a printf).
    assert_eq!(texts[0], names("child", 5));
    let mut parent = names("parent before", 5);
    parent.extend(names("parent after", 5));
    assert_eq!(texts[1], parent);
}

fn ended_threads_are_in_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let r = recorder(dir.path());
    std::thread::scope(|scope| {
        for n in 0..4 {
            let r = r.clone();
            scope.spawn(move || {
                let name = format!("th{n:02}:short");
                (0..300).for_each(|i| say(&r, &name, &format!("{name} {i}")));
            });
        }
    });
    let file = r.snapshot(Trigger::Request).unwrap().expect("a snapshot");
    let mut got = messages(&file);
    got.sort();
    let mut want: Vec<String> = (0..4)
        .flat_map(|n| names(&format!("th{n:02}:short"), 300))
        .collect();
    want.sort();
    assert_eq!(got, want);
}

fn recorders_keep_to_their_own_rings() {
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (recorder(a_dir.path()), recorder(b_dir.path()));
    std::thread::scope(|scope| {
        scope.spawn(|| (0..500).for_each(|i| say(&a, "main", &format!("a {i}"))));
        scope.spawn(|| {
            for i in 0..500 {
                say(&b, "main", &format!("b {i}"));
                if i % 100 == 0 {
                    // A snapshot of one while the other records.
                    a.snapshot(Trigger::Request).unwrap();
                }
            }
        });
    });
    let a_file = a.snapshot(Trigger::Request).unwrap().expect("a's snapshot");
    let b_file = b.snapshot(Trigger::Request).unwrap().expect("b's snapshot");
    assert_eq!(messages(&a_file), names("a", 500));
    assert_eq!(messages(&b_file), names("b", 500));
    assert_eq!(snapshots(b_dir.path()).len(), 1);
}

/// `snapshot_all` (what the signal and the facade's request do) writes a snapshot of
/// every recorder still alive, each in its directory with its own records, and none of
/// a recorder that is gone. The tests of this binary run one after the other, so no
/// other test's recorder is alive here.
fn every_live_recorder_is_snapshotted() {
    let dirs = [(); 3].map(|()| tempfile::tempdir().unwrap());
    let [a, b, gone] = [0, 1, 2].map(|i| recorder(dirs[i].path()));
    for (r, name) in [(&a, "a"), (&b, "b"), (&gone, "gone")] {
        (0..3).for_each(|i| say(r, "main", &format!("{name} {i}")));
    }
    drop(gone);
    let mut written = flight::snapshot_all(Trigger::Request);
    written.sort();
    let mut expected: Vec<PathBuf> = [&dirs[0], &dirs[1]]
        .iter()
        .flat_map(|dir| snapshots(dir.path()))
        .collect();
    expected.sort();
    assert_eq!(written, expected);
    assert!(snapshots(dirs[2].path()).is_empty());
    for (dir, name) in [(&dirs[0], "a"), (&dirs[1], "b")] {
        let files = snapshots(dir.path());
        assert_eq!(files.len(), 1, "{files:?}");
        assert_eq!(messages(&files[0]), names(name, 3));
    }
}

/// A child playing `scenario`, started and ready: its stdout's "ready" line read.
#[cfg(unix)]
fn ready_child(scenario: &str, dir: &Path) -> (std::process::Child, String) {
    use std::io::BufRead;
    use std::process::Stdio;
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(SCENARIO, scenario)
        .env(DIR, dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("ready"), "{line:?}");
    (child, line)
}

/// Sends the snapshot signal to `child`.
#[cfg(unix)]
fn signal(child: &std::process::Child) {
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: sends a signal to a child this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(pid, flight::SNAPSHOT_SIGNAL) }, 0);
}

/// Waits (10 s at most) until `dir` holds at least `n` finished snapshots.
#[cfg(unix)]
fn wait_for_snapshots(dir: &Path, n: usize) -> Vec<PathBuf> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let files: Vec<PathBuf> = snapshots(dir)
            .into_iter()
            .filter(|f| f.extension().is_some_and(|e| e == "t2b"))
            .collect();
        if files.len() >= n {
            return files;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} snapshots after 10 s: {files:?}",
            files.len()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Ends a ready child (its stdin closed) and checks that it exited cleanly.
#[cfg(unix)]
fn end(mut child: std::process::Child) {
    drop(child.stdin.take());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

/// A process that recorded, then blocks in `read` (recording nothing more), writes a
/// snapshot on `SIGUSR2` with everything it recorded, the batch still in its thread's
/// slot included; and the recorder started no thread for it.
#[cfg(unix)]
fn an_idle_process_answers_the_signal_without_a_thread() {
    let dir = tempfile::tempdir().unwrap();
    let (child, ready) = ready_child("signal-idle", dir.path());
    #[cfg(target_os = "linux")]
    assert_eq!(ready.trim(), "ready threads=1");
    #[cfg(not(target_os = "linux"))]
    let _ = ready;
    signal(&child);
    let files = wait_for_snapshots(dir.path(), 1);
    assert!(
        files[0].to_string_lossy().ends_with("-000-signal.t2b"),
        "{files:?}"
    );
    assert_eq!(messages(&files[0]), names("idle", 200));
    // A second signal: a second snapshot, as whole.
    signal(&child);
    let files = wait_for_snapshots(dir.path(), 2);
    assert_eq!(messages(&files[1]), names("idle", 200));
    end(child);
    // Nothing left behind: no temporary file.
    assert_eq!(snapshots(dir.path()).len(), 2);
}

/// Signals that land while two threads record as fast as they can (on those threads,
/// mid-record, or on the idle main thread): every one is answered, in the handler or
/// by a recording thread it was left to, nothing waits for ever, and every snapshot
/// decodes whole, with recent records (of both threads, over the 20: a thread the
/// machine leaves waiting may have none in one window of 50 ms).
#[cfg(unix)]
fn signals_while_threads_record_heavily_neither_block_nor_tear() {
    let dir = tempfile::tempdir().unwrap();
    let (child, _) = ready_child("signal-busy", dir.path());
    let rounds = 20;
    for n in 1..=rounds {
        signal(&child);
        wait_for_snapshots(dir.path(), n);
    }
    end(child);
    let files = snapshots(dir.path());
    assert_eq!(files.len(), rounds, "{files:?}");
    let mut seen = [false; 2];
    for file in &files {
        let got = messages(file);
        assert!(got.iter().any(|m| m.starts_with("busy")), "{file:?}");
        for (t, seen) in seen.iter_mut().enumerate() {
            *seen |= got.iter().any(|m| m.starts_with(&format!("busy{t} ")));
        }
    }
    assert_eq!(seen, [true, true]);
}

/// A process forked while another thread of its parent writes a snapshot inherits the
/// snapshot in progress, whose writer it does not have: it still answers `SIGUSR2`
/// (in the handler, at once) with a snapshot of its own records, and the parent's
/// snapshot ends as it would have (its failure said once).
#[cfg(unix)]
fn a_child_forked_while_a_snapshot_is_written_answers_sigusr2() {
    use std::io::{BufRead, Read};
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let snapshots_dir = dir.path().join("snapshots");
    std::fs::create_dir(&snapshots_dir).unwrap();
    let mut parent = Command::new(std::env::current_exe().unwrap())
        .env(SCENARIO, "signal-fork")
        .env(DIR, &snapshots_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(parent.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let child: libc::pid_t = line
        .trim()
        .strip_prefix("ready child=")
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("{line:?}"));
    // SAFETY: the child is this test's grandchild, waiting for stdin to close.
    assert_eq!(unsafe { libc::kill(child, flight::SNAPSHOT_SIGNAL) }, 0);
    let files = wait_for_snapshots(&snapshots_dir, 1);
    assert_eq!(files.len(), 1, "{files:?}");
    let name = files[0].file_name().unwrap().to_str().unwrap().to_owned();
    assert!(name.ends_with("-signal.t2b"), "{name}");
    assert_eq!(name.rsplit('-').nth(2), Some(child.to_string().as_str()));
    assert_eq!(messages(&files[0]), names("child", 1000));
    drop(parent.stdin.take());
    let mut err = Vec::new();
    parent.stderr.take().unwrap().read_to_end(&mut err).unwrap();
    let status = parent.wait().unwrap();
    let err = String::from_utf8_lossy(&err);
    let err = err.trim_start_matches('.');
    assert!(status.success(), "{status:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{err:?}");
    assert!(
        err.starts_with("warning: trace2: could not write '")
            && err.ends_with(
                "-request.t2b' for 'TRACING_TRACE2_FLIGHT' tracing: No such file or directory\n"
            ),
        "{err:?}"
    );
    // The child's only file: the parent's snapshot failed, and wrote no other.
    assert_eq!(snapshots(&snapshots_dir).len(), 1);
}

#[cfg(unix)]
fn forked_processes_snapshotting_together_lose_nothing() {
    // In memory where there is such a file system: 10,000 files in seconds.
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let out = Command::new(std::env::current_exe().unwrap())
        .env(SCENARIO, "storm")
        .env(DIR, dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let files = snapshots(dir.path());
    // Every trigger made its file, and no temporary file is left.
    assert_eq!(files.len(), (STORM_CHILDREN + 1) * STORM_SNAPSHOTS);
    let mut per_pid = std::collections::BTreeMap::<u32, usize>::new();
    for file in &files {
        let name = file.file_name().unwrap().to_str().unwrap();
        assert!(name.ends_with("-request.t2b"), "{name}");
        let pid: u32 = name.rsplit('-').nth(2).unwrap().parse().unwrap();
        *per_pid.entry(pid).or_default() += 1;
        let mut kinds = Vec::new();
        let mut newest_pid = 0;
        let report = tracing_trace2_binary::decode(
            std::fs::read(file).unwrap().as_slice(),
            &Default::default(),
            |stream, record| {
                newest_pid = stream.header.pid;
                kinds.push(format!("{:?}", record.event));
            },
        )
        .unwrap();
        assert!(report.is_complete(), "{name}: {report}");
        // Each says which process it is: `version` and `start` first, then the
        // process's own records, in a stream of the process named in the file name.
        assert!(kinds[0].starts_with("Version"), "{name}: {kinds:?}");
        assert!(kinds[1].starts_with("Start"), "{name}: {kinds:?}");
        assert_eq!(newest_pid, pid, "{name}");
        let own = format!("process {pid}");
        assert!(kinds.iter().any(|k| k.contains(&own)), "{name}: {kinds:?}");
    }
    assert_eq!(per_pid.len(), STORM_CHILDREN + 1, "{per_pid:?}");
    assert!(
        per_pid.values().all(|&n| n == STORM_SNAPSHOTS),
        "{per_pid:?}"
    );
}

#[cfg(target_os = "linux")]
fn the_cap_bounds_all_the_memory_the_recorder_holds() {
    let run = |cap: usize| -> u64 {
        let out = Command::new(std::env::current_exe().unwrap())
            .env(SCENARIO, "memory")
            .env(DIR, "/")
            .env(CAP, cap.to_string())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        text.trim()
            .strip_prefix("anon_kib=")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no figure in {text:?}"))
    };
    let baseline = run(0);
    // The promise: the cap, plus one batch per recording thread (one here), beyond the
    // same program with the binary target. (Before the cap counted every buffer, the
    // spares and the buffers' slack took 228, 444 and 1,236 KiB more than the cap.)
    let batch_kib = (tracing_trace2_binary::DEFAULT_BATCH_SIZE >> 10) as u64;
    for cap_kib in [1024u64, 4096, 16384] {
        let anon = run((cap_kib as usize) << 10);
        let excess = anon.saturating_sub(baseline);
        eprintln!("cap {cap_kib} KiB: {anon} KiB anonymous, {excess} KiB over the binary target");
        assert!(
            excess <= cap_kib + batch_kib,
            "cap {cap_kib} KiB: {excess} KiB over the binary target ({anon} vs {baseline})"
        );
    }
}

fn a_failed_snapshot_says_so_once() {
    let dir = tempfile::tempdir().unwrap();
    let gone = dir.path().join("gone");
    std::fs::create_dir(&gone).unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .env(SCENARIO, "vanished")
        .env(DIR, &gone)
        .env_remove("GIT_TRACE2_DST_DEBUG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    // git's warning, once, without GIT_TRACE2_DST_DEBUG: the window is lost.
    let prefix = format!("warning: trace2: could not write '{}/", gone.display());
    assert_eq!(err.lines().count(), 1, "{err:?}");
    assert!(err.starts_with(&prefix), "{err:?}");
    assert!(
        err.ends_with(
            "-request.t2b' for 'TRACING_TRACE2_FLIGHT' tracing: No such file or directory\n"
        ),
        "{err:?}"
    );
}
