//! Memory stays bounded: peak RSS of `trace2 summary` and of both `trace2 export` formats on a
//! 200 000-line trace is about what it is on a 20 000-line one. The peak is the child's own
//! `ru_maxrss`, taken with `wait4` so that no other test's processes count.

// `wait4` and `ru_maxrss` are Unix's.
#![cfg(unix)]

mod common;
#[path = "common/synthetic.rs"]
mod synthetic;

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::process::Stdio;

/// Runs `trace2 ARGS` and returns (exit code, peak RSS in KiB).
// The child is reaped by wait4 below, which std's Child cannot see.
#[allow(clippy::zombie_processes)]
fn peak_rss_kib(args: &[&str]) -> (i32, i64) {
    let child = common::trace2()
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("trace2 runs");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: `rusage` is plain data that wait4 fills; zeroed is a valid value for it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not waited for by anyone else (`child` is never waited on
    // through std), and both pointers are valid for the call.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4: {}", std::io::Error::last_os_error());
    assert!(
        libc::WIFEXITED(status),
        "trace2 did not exit normally: {status}"
    );
    (libc::WEXITSTATUS(status), usage.ru_maxrss)
}

fn generate(path: &Path, lines: usize) {
    let mut out = BufWriter::new(File::create(path).unwrap());
    synthetic::write_trace(&mut out, lines, 4).unwrap();
}

#[test]
fn memory_does_not_grow_with_the_number_of_lines() {
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small.event");
    let large = dir.path().join("large.event");
    generate(&small, 20_000);
    generate(&large, 200_000);
    let large_size = std::fs::metadata(&large).unwrap().len();
    assert!(large_size > 40 << 20, "{large_size} bytes");

    // The six runs go in parallel (wait4 reaps each child by its pid).
    let commands = [
        &["summary"][..],
        &["export", "--format", "chrome", "-o", "/dev/null"],
        &["export", "--format", "perfetto", "-o", "/dev/null"],
    ];
    let runs: Vec<(&[&str], &Path)> = commands
        .iter()
        .flat_map(|command| [(*command, small.as_path()), (*command, large.as_path())])
        .collect();
    let peaks: Vec<i64> = std::thread::scope(|scope| {
        let handles: Vec<_> = runs
            .iter()
            .map(|(command, file)| {
                scope.spawn(move || {
                    let mut args = command.to_vec();
                    args.push(file.to_str().unwrap());
                    let (code, rss) = peak_rss_kib(&args);
                    assert_eq!(code, 0, "{args:?}");
                    rss
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (command, pair) in commands.iter().zip(peaks.chunks(2)) {
        let (small_rss, large_rss) = (pair[0], pair[1]);
        println!(
            "{command:?}: peak RSS {small_rss} KiB for 20k lines, {large_rss} KiB for 200k lines ({} MiB)",
            large_size >> 20
        );
        assert!(
            large_rss < small_rss + 4 * 1024,
            "{command:?}: {small_rss} KiB for 20k lines, {large_rss} KiB for 200k lines"
        );
        assert!(large_rss < 48 * 1024, "{command:?}: {large_rss} KiB");
    }
}
