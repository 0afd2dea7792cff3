//! Shared by the lifecycle and interop tests: the test binary doubles as the example
//! program (`examples/lifecycle.rs`, compiled in) when [`PROGRAM_ENV`] is set, and these
//! helpers run it, or real git, with the three targets pointed at files of a fresh
//! directory and read back what was written.

#![allow(dead_code)]

#[path = "../../examples/lifecycle.rs"]
mod example;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use crate::support;
use crate::support::process;
use crate::support::runner::{self, Check};

/// Set in the environment of a process that must act as the example program.
pub const PROGRAM_ENV: &str = "TRACE2_LIFECYCLE_PROGRAM";

/// The `main` of a test binary that doubles as the example program: the program when
/// [`PROGRAM_ENV`] is set, else the `checks` of `suite`.
pub fn main(suite: &'static str, checks: &[Check]) -> ExitCode {
    if std::env::var_os(PROGRAM_ENV).is_some() {
        return example::main();
    }
    runner::run_checks(suite, checks)
}

/// The records of the three streams of one run (one file per target).
#[derive(Debug, Default)]
pub struct Streams {
    /// Normal records.
    pub normal: Vec<String>,
    /// Perf records.
    pub perf: Vec<String>,
    /// Event records.
    pub event: Vec<String>,
}

impl Streams {
    /// Reads `<dir>/trace.{normal,perf,event}` (a missing file reads as empty).
    pub fn read(dir: &Path) -> Streams {
        Streams::split(|ext| {
            let bytes = std::fs::read(process::trace_file(dir, "trace", ext)).unwrap_or_default();
            String::from_utf8_lossy(&bytes).into_owned()
        })
    }

    /// The records of the texts `read` gives for `normal`, `perf` and `event`.
    fn split(read: impl Fn(&str) -> String) -> Streams {
        Streams {
            normal: support::records(&read("normal"), support::starts_with_time),
            perf: support::records(&read("perf"), support::starts_with_time),
            event: read("event").lines().map(str::to_owned).collect(),
        }
    }

    /// The last `n` records of each stream, masked (times, elapsed, sid, pid, file:line).
    pub fn masked_tail(&self, n: usize) -> [Vec<String>; 3] {
        let tail = |v: &[String]| v[v.len().saturating_sub(n)..].to_vec();
        [
            tail(&self.normal)
                .iter()
                .map(|l| support::mask_normal(l, false))
                .collect(),
            tail(&self.perf)
                .iter()
                .map(|l| support::mask_perf(l, false))
                .collect(),
            tail(&self.event)
                .iter()
                .map(|l| support::mask_event(l))
                .collect(),
        ]
    }

    /// The parsed Event lines.
    pub fn events(&self) -> Vec<serde_json::Value> {
        support::json_lines(self.event.iter().map(String::as_str))
    }
}

/// A fresh, empty directory for one check.
pub fn tempdir(name: &str) -> PathBuf {
    process::fresh_dir(&format!("life-{name}")).expect("create a temporary directory")
}

/// A command with a clean environment (no inherited `GIT_*`, no user or system config)
/// and the three targets pointed at `<dir>/trace.*`.
pub fn traced_command(program: impl AsRef<std::ffi::OsStr>, dir: &Path) -> Command {
    let mut cmd = process::clean_command(program);
    process::home_in(&mut cmd, dir)
        .env("GIT_AUTHOR_NAME", "A U Thor")
        .env("GIT_AUTHOR_EMAIL", "author@example.com")
        .env("GIT_COMMITTER_NAME", "A U Thor")
        .env("GIT_COMMITTER_EMAIL", "author@example.com")
        .env("RUST_BACKTRACE", "0");
    process::trace_to(&mut cmd, dir, "trace");
    cmd
}

/// This test binary, started as the example program with `args`.
pub fn ours(dir: &Path, args: &[&str]) -> Command {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = traced_command(exe, dir);
    cmd.env(PROGRAM_ENV, "1").args(args);
    cmd
}

/// Real git's last `n` records (masked) when it exits with `code`: a shell alias that
/// exits with that code makes git exit with it too.
pub fn git_final_lines(code: i32, n: usize) -> [Vec<String>; 3] {
    let dir = tempdir(&format!("git-exit-{code}"));
    let mut cmd = traced_command(process::GIT, &dir);
    cmd.arg("-c")
        .arg(format!("alias.x=!exit {code}"))
        .arg("x")
        .current_dir(&dir);
    let out = process::run(cmd);
    assert_eq!(
        out.status.code(),
        Some(code & 0xff),
        "git alias exit {code}"
    );
    let streams = Streams::read(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    streams.masked_tail(n)
}

/// The masked records of a git capture (`<name>.<ext>`), the last `n`.
pub fn capture_tail(name: &str, n: usize) -> [Vec<String>; 3] {
    Streams::split(|ext| support::sample(&format!("{name}.{ext}"))).masked_tail(n)
}

/// Compares two sets of masked records stream by stream.
pub fn same_lines(ours: &[Vec<String>; 3], expected: &[Vec<String>; 3]) -> Result<(), String> {
    for (name, (a, b)) in ["normal", "perf", "event"]
        .iter()
        .zip(ours.iter().zip(expected))
    {
        if a != b {
            return Err(format!(
                "{name} differs:\n  ours:     {a:#?}\n  expected: {b:#?}"
            ));
        }
    }
    Ok(())
}

/// Fails with `message` unless `condition` holds.
pub fn ensure(condition: bool, message: impl FnOnce() -> String) -> Result<(), String> {
    if condition { Ok(()) } else { Err(message()) }
}
