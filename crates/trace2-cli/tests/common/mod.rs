//! Helpers shared by the integration tests: running `trace2` and a `git` isolated from the
//! machine's configuration, with its Event trace going where the test says.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// The `trace2` binary under test.
pub fn trace2() -> Command {
    Command::new(env!("CARGO_BIN_EXE_trace2"))
}

/// Runs `trace2 ARGS`, returning its output.
pub fn run_trace2(args: &[&str]) -> Output {
    trace2().args(args).output().expect("trace2 runs")
}

/// A `git` in `dir` that reads no system or user configuration and writes its Event trace (and
/// its children's) to `event_destination`, or traces nothing when `None`.
pub fn git(dir: &Path, home: &Path, event_destination: Option<&Path>) -> Command {
    let mut git = Command::new("git");
    git.current_dir(dir)
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", home.join(".gitconfig"))
        .env("GIT_AUTHOR_NAME", "A U Thor")
        .env("GIT_AUTHOR_EMAIL", "author@example.com")
        .env("GIT_COMMITTER_NAME", "C O Mitter")
        .env("GIT_COMMITTER_EMAIL", "committer@example.com");
    for var in [
        "GIT_TRACE2",
        "GIT_TRACE2_PERF",
        "GIT_TRACE2_EVENT",
        "GIT_TRACE2_BRIEF",
        "GIT_TRACE2_EVENT_BRIEF",
        "GIT_TRACE2_EVENT_NESTING",
        "GIT_TRACE2_PARENT_SID",
        "GIT_TRACE2_PARENT_NAME",
        "GIT_TRACE2_CONFIG_PARAMS",
        "GIT_TRACE2_ENV_VARS",
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
    ] {
        git.env_remove(var);
    }
    if let Some(target) = event_destination {
        git.env("GIT_TRACE2_EVENT", target);
    }
    git
}

/// Runs a git command and insists that it succeeds.
pub fn run_git(dir: &Path, home: &Path, event_destination: Option<&Path>, args: &[&str]) {
    let out = git(dir, home, event_destination)
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Stdout of a command as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("UTF-8 output")
}

/// Stderr of a command as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Checks a Chrome export the way a viewer reads it: every `X` slice nests strictly inside the
/// one open on its (pid, tid) track, times are integer µs, every used pid is named. Returns the
/// number of `X` slices.
pub fn assert_chrome_nests(doc: &serde_json::Value) -> usize {
    use std::collections::{HashMap, HashSet};
    let events = doc["traceEvents"].as_array().expect("traceEvents");
    let mut tracks: HashMap<(i64, i64), Vec<(i64, i64)>> = HashMap::new();
    let mut named = HashSet::new();
    let mut pids = HashSet::new();
    for event in events {
        let pid = event["pid"].as_i64().expect("integer pid");
        event["tid"].as_i64().expect("integer tid");
        let ts = event["ts"].as_i64().expect("integer ts");
        pids.insert(pid);
        match event["ph"].as_str().expect("ph") {
            "X" => {
                let dur = event["dur"].as_i64().expect("integer dur");
                assert!(dur >= 0, "{event}");
                tracks
                    .entry((pid, event["tid"].as_i64().unwrap()))
                    .or_default()
                    .push((ts, ts + dur));
            }
            "M" if event["name"] == "process_name" => {
                named.insert(pid);
            }
            _ => {}
        }
    }
    assert_eq!(pids, named, "every pid has a process_name");
    let mut count = 0;
    for (track, slices) in &mut tracks {
        slices.sort_by_key(|&(s, e)| (s, -e));
        let mut stack: Vec<(i64, i64)> = Vec::new();
        for &(s, e) in slices.iter() {
            while stack.last().is_some_and(|&(_, end)| end <= s) {
                stack.pop();
            }
            if let Some(&(ts, te)) = stack.last() {
                assert!(e <= te, "{track:?}: [{s}, {e}] overlaps [{ts}, {te}]");
            }
            stack.push((s, e));
            count += 1;
        }
    }
    count
}
