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
use tracing_trace2_binary::flight::{FlightRecorder, Trigger};
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
        other => panic!("unknown scenario {other}"),
    }
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
