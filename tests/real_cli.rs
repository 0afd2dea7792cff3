//! A program shaped like jj, run for real (`examples/vcs.rs`, compiled into this test
//! binary): a reloadable `EnvFilter` fmt layer and a tracing-chrome layer beside ours,
//! `cmd_name` set after start, the real `git` run through plain `std::process::Command`,
//! `fn main() -> Result<_, E>`, the tracing setup kept in a cloneable handle. Each check
//! runs it with `GIT_TRACE2_EVENT` pointed at one file that the program and its git
//! children all append to, and reads the process tree and exit codes back from it.
//!
//! The binary has its own `main` (no libtest harness) because it doubles as the program.

#[path = "support/mod.rs"]
mod support;

#[path = "../examples/vcs.rs"]
mod vcs;

use std::path::{Path, PathBuf};
use std::process::{ExitCode, Output};

use serde_json::Value;
use support::process::{self, GIT};
use support::runner::{self, Check};

/// Set in the environment of this test binary when it must act as `examples/vcs.rs`.
const PROGRAM_ENV: &str = "TRACE2_REAL_CLI_PROGRAM";

fn main() -> Result<ExitCode, vcs::VcsError> {
    if std::env::var_os(PROGRAM_ENV).is_some() {
        return vcs::main();
    }
    let checks: &[Check] = &[
        (
            "git_children_nest_when_chrome_is_built_first",
            git_children_nest_when_chrome_is_built_first,
        ),
        (
            "git_children_nest_when_trace2_is_built_first",
            git_children_nest_when_trace2_is_built_first,
        ),
        (
            "git_children_nest_when_a_runtime_is_built_first",
            git_children_nest_when_a_runtime_is_built_first,
        ),
        (
            "an_export_with_threads_running_is_reported_once",
            an_export_with_threads_running_is_reported_once,
        ),
        (
            "without_the_export_children_escape_and_it_is_said",
            without_the_export_children_escape_and_it_is_said,
        ),
        (
            "main_returning_err_with_the_guard_held_exits_1",
            main_returning_err_with_the_guard_held_exits_1,
        ),
        (
            "main_returning_err_with_a_scoped_subscriber_exits_1",
            main_returning_err_with_a_scoped_subscriber_exits_1,
        ),
        (
            "a_computed_code_through_a_cloned_handle",
            a_computed_code_through_a_cloned_handle,
        ),
        ("a_panic_in_main_exits_101", a_panic_in_main_exits_101),
    ];
    Ok(runner::run_checks("real_cli", checks))
}

/// One run of the program: its output and every Event line of the trace file.
struct Run {
    output: Output,
    events: Vec<Value>,
}

impl Run {
    /// The program's own session id (the one line source without a parent).
    fn own_sid(&self) -> Result<String, String> {
        let sids: Vec<&str> = self
            .events
            .iter()
            .filter(|e| e["event"] == "version" && e["exe"] == env!("CARGO_PKG_VERSION"))
            .filter_map(|e| e["sid"].as_str())
            .collect();
        match sids[..] {
            [sid] => Ok(sid.to_owned()),
            _ => Err(format!("not one `version` of ours: {sids:?}")),
        }
    }

    /// The lines of the session `sid`, of event `name`.
    fn of<'a>(&'a self, sid: &'a str, name: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.events
            .iter()
            .filter(move |e| e["sid"] == sid && e["event"] == name)
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    /// Checks the process's real exit code, and that our `exit` and `atexit` carry it.
    fn ends_with(&self, code: i32) -> Result<(), String> {
        ensure(self.output.status.code() == Some(code), || {
            format!(
                "exit status {:?}, expected {code}; stderr:\n{}",
                self.output.status,
                self.stderr()
            )
        })?;
        let sid = self.own_sid()?;
        for name in ["exit", "atexit"] {
            let codes: Vec<&Value> = self.of(&sid, name).map(|e| &e["code"]).collect();
            ensure(codes == [&Value::from(code)], || {
                format!("`{name}` codes {codes:?}, the process exited with {code}")
            })?;
        }
        Ok(())
    }
}

fn ensure(ok: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if ok { Ok(()) } else { Err(why()) }
}

/// A fresh scratch directory, removed when dropped (also when a check fails).
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        Scratch(process::fresh_dir(&format!("real-cli-{name}")).expect("a scratch directory"))
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh directory holding a repository with one commit, to fetch from.
fn scratch_with_remote(name: &str) -> Scratch {
    let dir = Scratch::new(name);
    let remote = dir.join("remote");
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["commit", "-q", "--allow-empty", "-m", "first"][..],
    ] {
        let mut git = process::clean_command(GIT);
        process::home_in(&mut git, &dir)
            .env("GIT_AUTHOR_NAME", "A U Thor")
            .env("GIT_AUTHOR_EMAIL", "author@example.com")
            .env("GIT_COMMITTER_NAME", "A U Thor")
            .env("GIT_COMMITTER_EMAIL", "author@example.com")
            .arg("-C")
            .arg(if args[0] == "init" { &*dir } else { &*remote });
        if args[0] == "init" {
            git.args(args).arg(&remote);
        } else {
            git.args(args);
        }
        let out = process::run(git);
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }
    dir
}

/// Runs the program in `dir` with `args` and the extra environment `env`, with the Event
/// target at `<dir>/trace.event` (git's children inherit it and append there too).
fn run_program(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = process::clean_command(exe);
    let event = process::trace_file(dir, "trace", "event");
    process::home_in(&mut cmd, dir)
        .env(PROGRAM_ENV, "1")
        .env("GIT_TRACE2_EVENT", &event)
        .env("VCS_CHROME_FILE", dir.join("chrome.json"))
        .env("RUST_BACKTRACE", "0")
        // The program's children run `git` from PATH: make it the git we compare with.
        .env("PATH", path_with_git_first())
        .args(args)
        .current_dir(dir);
    for (key, value) in env {
        cmd.env(key, value);
    }
    let output = process::run(cmd);
    let text = std::fs::read_to_string(&event).unwrap_or_default();
    Run {
        output,
        events: support::json_lines(text.lines()),
    }
}

fn path_with_git_first() -> String {
    let git_dir = Path::new(GIT).parent().expect("git's directory");
    let rest = std::env::var("PATH").unwrap_or_default();
    format!("{}:{rest}", git_dir.display())
}

/// Every session of the trace other than ours descends from ours; our direct children's
/// hierarchies extend our `cmd_name`'s; returns the number of git sessions.
fn git_sessions_nest_under(run: &Run, our_name: &str) -> Result<usize, String> {
    let ours = run.own_sid()?;
    let mut git_sids: Vec<&str> = run
        .events
        .iter()
        .filter(|e| e["event"] == "version")
        .filter_map(|e| e["sid"].as_str())
        .filter(|sid| *sid != ours)
        .collect();
    git_sids.dedup();
    // git init, git fetch and what fetch starts (upload-pack, and more).
    ensure(git_sids.len() >= 3, || {
        format!("only {} git sessions: {git_sids:?}", git_sids.len())
    })?;
    let prefix = format!("{ours}/");
    for sid in &git_sids {
        ensure(sid.starts_with(&prefix), || {
            format!(
                "git session {sid} is not under ours ({ours}); stderr:\n{}",
                run.stderr()
            )
        })?;
        let depth = sid.matches('/').count();
        for cmd_name in run.of(sid, "cmd_name") {
            let hierarchy = cmd_name["hierarchy"].as_str().unwrap_or_default();
            let name = cmd_name["name"].as_str().unwrap_or_default();
            ensure(hierarchy.starts_with(&format!("{our_name}/")), || {
                format!("git's hierarchy {hierarchy:?} does not start with ours ({our_name:?})")
            })?;
            if depth == 1 {
                ensure(hierarchy == format!("{our_name}/{name}"), || {
                    format!("a direct child's hierarchy is {hierarchy:?}, name {name:?}")
                })?;
            }
        }
    }
    for name in ["init", "fetch"] {
        let hierarchy = format!("{our_name}/{name}");
        ensure(
            run.events
                .iter()
                .any(|e| e["event"] == "cmd_name" && e["hierarchy"] == hierarchy.as_str()),
            || format!("no child with hierarchy {hierarchy:?}"),
        )?;
    }
    Ok(git_sids.len())
}

/// The main thread's per-thread timer (two git runs) is written for thread `main`,
/// then the process total, then `atexit`: also when the exit lines come from the exit
/// handler, after the main thread's thread-locals are gone.
fn main_thread_timer_is_written(run: &Run) -> Result<(), String> {
    let sid = run.own_sid()?;
    let tail: Vec<(&str, &str, u64)> = run
        .events
        .iter()
        .filter(|e| e["sid"] == sid.as_str())
        .filter(|e| matches!(e["event"].as_str(), Some("th_timer" | "timer" | "atexit")))
        .map(|e| {
            (
                e["event"].as_str().unwrap_or_default(),
                e["thread"].as_str().unwrap_or_default(),
                e["intervals"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    ensure(
        tail == [
            ("th_timer", "main", 2),
            ("timer", "main", 2),
            ("atexit", "main", 0),
        ],
        || format!("timer lines {tail:?}"),
    )
}

fn fetch_with_order(name: &str, order: &str) -> Result<Run, String> {
    fetch_with_env(name, &[("VCS_LAYER_ORDER", order)])
}

/// `fetch` with `env` and destination debugging: ends 0, git's sessions nest under ours,
/// every program's layer wrote.
fn fetch_with_env(name: &str, env: &[(&str, &str)]) -> Result<Run, String> {
    let dir = scratch_with_remote(name);
    let remote = dir.join("remote");
    let mut env = env.to_vec();
    env.push(("GIT_TRACE2_DST_DEBUG", "1"));
    let run = run_program(
        &dir,
        &["fetch", remote.to_str().expect("a UTF-8 path")],
        &env,
    );
    run.ends_with(0)?;
    git_sessions_nest_under(&run, "git fetch")?;
    main_thread_timer_is_written(&run)?;
    let chrome = std::fs::read_to_string(dir.join("chrome.json")).unwrap_or_default();
    ensure(chrome.contains("\"fetch\""), || {
        format!("tracing-chrome wrote no `fetch` span: {chrome:.200}")
    })?;
    Ok(run)
}

fn git_children_nest_when_chrome_is_built_first() -> Result<(), String> {
    fetch_with_order("chrome-first", "chrome-first").map(drop)
}

fn git_children_nest_when_trace2_is_built_first() -> Result<(), String> {
    let run = fetch_with_order("trace2-first", "trace2-first")?;
    // Built first, the lifecycle exported while the process had one thread.
    ensure(
        !run.stderr().contains("exported GIT_TRACE2_PARENT_SID"),
        || format!("a warning with one thread:\n{}", run.stderr()),
    )
}

fn git_children_nest_when_a_runtime_is_built_first() -> Result<(), String> {
    let run = fetch_with_env(
        "runtime-first",
        &[
            ("VCS_RUNTIME_FIRST", "1"),
            ("VCS_LAYER_ORDER", "trace2-first"),
        ],
    )?;
    ensure(
        run.stderr()
            .contains("exported GIT_TRACE2_PARENT_SID while the process had"),
        || {
            format!(
                "the export with worker threads running was not reported:\n{}",
                run.stderr()
            )
        },
    )
}

fn an_export_with_threads_running_is_reported_once() -> Result<(), String> {
    let run = fetch_with_order("reported", "chrome-first")?;
    let n = run
        .stderr()
        .matches("exported GIT_TRACE2_PARENT_SID while")
        .count();
    ensure(n == 1, || format!("{n} reports:\n{}", run.stderr()))
}

fn without_the_export_children_escape_and_it_is_said() -> Result<(), String> {
    let dir = scratch_with_remote("no-export");
    let remote = dir.join("remote");
    let run = run_program(
        &dir,
        &["fetch", remote.to_str().expect("a UTF-8 path")],
        &[("VCS_NO_ENV_EXPORT", "1"), ("GIT_TRACE2_DST_DEBUG", "1")],
    );
    run.ends_with(0)?;
    let n = run
        .stderr()
        .matches("GIT_TRACE2_PARENT_SID not exported")
        .count();
    ensure(n == 1, || format!("{n} reports:\n{}", run.stderr()))?;
    let ours = run.own_sid()?;
    let nested = run
        .events
        .iter()
        .filter_map(|e| e["sid"].as_str())
        .filter(|sid| sid.starts_with(&format!("{ours}/")))
        .count();
    ensure(nested == 0, || {
        format!("{nested} lines nested without export")
    })?;
    Ok(())
}

fn main_returning_err_with_the_guard_held_exits_1() -> Result<(), String> {
    let dir = scratch_with_remote("err");
    let remote = dir.join("remote");
    let run = run_program(&dir, &["fail", remote.to_str().expect("a UTF-8 path")], &[]);
    ensure(run.stderr().contains("Error: the fetched history"), || {
        format!("Rust did not report the error:\n{}", run.stderr())
    })?;
    run.ends_with(1)?;
    git_sessions_nest_under(&run, "git fail")?;
    Ok(())
}

fn main_returning_err_with_a_scoped_subscriber_exits_1() -> Result<(), String> {
    let dir = scratch_with_remote("err-scoped");
    let remote = dir.join("remote");
    let run = run_program(
        &dir,
        &["fail", remote.to_str().expect("a UTF-8 path")],
        &[("VCS_SCOPED_SUBSCRIBER", "1")],
    );
    run.ends_with(1)?;
    git_sessions_nest_under(&run, "git fail")?;
    Ok(())
}

fn a_computed_code_through_a_cloned_handle() -> Result<(), String> {
    let dir = Scratch::new("code");
    let run = run_program(&dir, &["--debug", "code", "3"], &[]);
    run.ends_with(3)?;
    // The helper is `#[track_caller]`: the lines name `main`'s call of it.
    let source = include_str!("../examples/vcs.rs");
    let site = source
        .lines()
        .position(|l| l.trim_end().ends_with("// exit site"))
        .expect("the example marks its exit site")
        + 1;
    let sid = run.own_sid()?;
    for name in ["exit", "atexit"] {
        let line = run
            .of(&sid, name)
            .next()
            .map(|e| (e["file"].clone(), e["line"].clone()));
        ensure(
            line.as_ref().is_some_and(|(f, l)| {
                f.as_str().is_some_and(|f| f.ends_with("vcs.rs")) && *l == site
            }),
            || format!("`{name}` at {line:?}, expected vcs.rs:{site}"),
        )?;
    }
    Ok(())
}

fn a_panic_in_main_exits_101() -> Result<(), String> {
    let dir = Scratch::new("panic");
    let run = run_program(&dir, &["panic"], &[]);
    run.ends_with(101)?;
    let sid = run.own_sid()?;
    ensure(
        run.of(&sid, "error").any(|e| {
            e["msg"]
                .as_str()
                .is_some_and(|m| m.starts_with("invariant broken"))
        }),
        || "no `error` line for the panic".to_owned(),
    )?;
    Ok(())
}
