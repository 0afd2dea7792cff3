//! Shared by the lifecycle and interop tests: the test binary doubles as the example
//! program (`examples/lifecycle.rs`, compiled in) when [`PROGRAM_ENV`] is set, and these
//! helpers run it, or real git, with the three targets pointed at files of a fresh
//! directory and read back what was written.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support;

/// Set in the environment of a process that must act as the example program.
pub const PROGRAM_ENV: &str = "TRACE2_LIFECYCLE_PROGRAM";

/// The git binary the interop checks run.
pub const GIT: &str = "/usr/local/bin/git";

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
        let read = |ext: &str| {
            let bytes = std::fs::read(dir.join(format!("trace.{ext}"))).unwrap_or_default();
            String::from_utf8_lossy(&bytes).into_owned()
        };
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
        self.event
            .iter()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }
}

/// A fresh, empty directory for one check.
pub fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("trace2-life-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a temporary directory");
    dir
}

/// A command with a clean environment (no inherited `GIT_*`, no user or system config)
/// and the three targets pointed at `<dir>/trace.*`.
pub fn traced_command(program: impl AsRef<std::ffi::OsStr>, dir: &Path) -> Command {
    let mut cmd = Command::new(program);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GIT_") {
            cmd.env_remove(key);
        }
    }
    cmd.env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", dir.join("no-gitconfig"))
        .env("GIT_AUTHOR_NAME", "A U Thor")
        .env("GIT_AUTHOR_EMAIL", "author@example.com")
        .env("GIT_COMMITTER_NAME", "A U Thor")
        .env("GIT_COMMITTER_EMAIL", "author@example.com")
        .env("RUST_BACKTRACE", "0")
        .env("GIT_TRACE2", dir.join("trace.normal"))
        .env("GIT_TRACE2_PERF", dir.join("trace.perf"))
        .env("GIT_TRACE2_EVENT", dir.join("trace.event"));
    cmd
}

/// This test binary, started as the example program with `args`.
pub fn ours(dir: &Path, args: &[&str]) -> Command {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = traced_command(exe, dir);
    cmd.env(PROGRAM_ENV, "1").args(args);
    cmd
}

/// Runs `cmd` to its end, its output collected.
pub fn run(mut cmd: Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// Real git's last `n` records (masked) when it exits with `code`: a shell alias that
/// exits with that code makes git exit with it too.
pub fn git_final_lines(code: i32, n: usize) -> [Vec<String>; 3] {
    let dir = tempdir(&format!("git-exit-{code}"));
    let mut cmd = traced_command(GIT, &dir);
    cmd.arg("-c")
        .arg(format!("alias.x=!exit {code}"))
        .arg("x")
        .current_dir(&dir);
    let out = run(cmd);
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
    let read = |ext: &str| support::sample(&format!("{name}.{ext}"));
    let streams = Streams {
        normal: support::records(&read("normal"), support::starts_with_time),
        perf: support::records(&read("perf"), support::starts_with_time),
        event: read("event").lines().map(str::to_owned).collect(),
    };
    streams.masked_tail(n)
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

/// A named check: `Err` holds why it failed.
pub type Check = (&'static str, fn() -> Result<(), String>);

/// Runs each named check, prints libtest-like lines, and tells whether all passed.
pub fn run_checks(suite: &str, checks: &[Check]) -> bool {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let (mut passed, mut failed) = (0, 0);
    for (name, check) in checks {
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        match check() {
            Ok(()) => {
                println!("test {suite}::{name} ... ok");
                passed += 1;
            }
            Err(why) => {
                println!("test {suite}::{name} ... FAILED\n{why}");
                failed += 1;
            }
        }
    }
    println!("\n{suite}: {passed} passed, {failed} failed");
    failed == 0
}

/// Fails with `message` unless `condition` holds.
pub fn ensure(condition: bool, message: impl FnOnce() -> String) -> Result<(), String> {
    if condition { Ok(()) } else { Err(message()) }
}
