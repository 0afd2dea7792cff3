//! A program that runs git with a copied environment: the copy is taken first thing (as
//! git companion tools do), then each git runs with `env_clear()` and the copy, through a
//! plain `std::process::Command` given the session's variables by
//! `tracing_trace2::add_session_env`, or through `Trace2CommandExt` (which sets them
//! itself). The copy holds whatever the program's parent exported, as when git runs the
//! program as a hook: the checks run the program both with no parent and under one, and
//! each git child must nest under the program, not beside it under the parent.
//!
//! The binary has its own `main` (no libtest harness) because it doubles as the program.

#[path = "support/mod.rs"]
mod support;

#[path = "real/mod.rs"]
mod real;

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, ExitCode};

use real::{Trace, ensure, parent_sid};
use support::process::{self, GIT};
use support::runner::{self, Check};
use tracing_trace2::{Trace2, Trace2CommandExt, api};

/// Set in the environment of this test binary when it must act as the program.
const PROGRAM_ENV: &str = "TRACE2_SESSION_ENV_PROGRAM";

/// The program's `cmd_name`.
const NAME: &str = "copied-env";

fn main() -> ExitCode {
    if std::env::var_os(PROGRAM_ENV).is_some() {
        return program();
    }
    let checks: &[Check] = &[
        (
            "git_children_nest_without_a_parent",
            git_children_nest_without_a_parent,
        ),
        (
            "git_children_nest_under_a_hook_of_git",
            git_children_nest_under_a_hook_of_git,
        ),
    ];
    runner::run_checks("real_session_env", checks)
}

/// The program: two `git version` runs with the environment copied before the lifecycle
/// started, one through a plain `Command`, one traced.
fn program() -> ExitCode {
    let copy: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let trace2 = Trace2::from_env()
        .with_exe_version(env!("CARGO_PKG_VERSION"))
        .init();
    api::cmd_name(NAME);
    let git = || {
        let mut git = Command::new(GIT);
        git.env_clear().envs(copy.iter().map(|(k, v)| (k, v)));
        git
    };
    let mut plain = git();
    let plain = tracing_trace2::add_session_env(&mut plain)
        .arg("version")
        .status();
    let traced = git().arg("version").trace2_status();
    let ok = [plain, traced]
        .iter()
        .all(|s| s.as_ref().is_ok_and(|s| s.success()));
    trace2.finish_code(if ok { 0 } else { 1 })
}

/// Runs the program with `env`, its Event target at `<dir>/trace.event`; checks that it
/// ends 0 and that both git children nest under it with its hierarchy.
fn run_and_check(dir: &Path, env: &[(&str, &str)]) -> Result<(), String> {
    let event = process::trace_file(dir, "trace", "event");
    let mut cmd = process::clean_command(std::env::current_exe().expect("the test binary"));
    process::home_in(&mut cmd, dir)
        .env(PROGRAM_ENV, "1")
        .env("GIT_TRACE2_EVENT", &event);
    for (key, value) in env {
        cmd.env(key, value);
    }
    let out = process::run(cmd);
    ensure(out.status.success(), || format!("program: {out:?}"))?;
    let trace = Trace::read(&event)?;
    let ours = trace.sessions_of(env!("CARGO_PKG_VERSION"));
    let [sid] = &ours[..] else {
        return Err(format!("not one session of ours: {ours:?}"));
    };
    trace.ends_with(sid, 0)?;
    let hierarchy = trace
        .named(sid, "cmd_name")
        .next()
        .and_then(|e| e["hierarchy"].as_str().map(str::to_owned))
        .ok_or("no cmd_name of ours")?;
    let gits: Vec<&String> = trace.sessions.keys().filter(|s| *s != sid).collect();
    ensure(gits.len() == 2, || format!("git sessions: {gits:?}"))?;
    for git in gits {
        ensure(parent_sid(git) == Some(sid.as_str()), || {
            format!("git session {git} is not under ours ({sid})")
        })?;
        let git_hierarchy = trace
            .named(git, "cmd_name")
            .next()
            .and_then(|e| e["hierarchy"].as_str().map(str::to_owned));
        ensure(
            git_hierarchy.as_deref() == Some(&*format!("{hierarchy}/version")),
            || format!("git's hierarchy {git_hierarchy:?} under ours {hierarchy:?}"),
        )?;
        trace.ends_with(git, 0)?;
    }
    trace.receiver_accepts_all()
}

fn git_children_nest_without_a_parent() -> Result<(), String> {
    let dir = process::fresh_dir("session-env-top").map_err(|e| e.to_string())?;
    let result = run_and_check(&dir, &[]);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn git_children_nest_under_a_hook_of_git() -> Result<(), String> {
    let dir = process::fresh_dir("session-env-hook").map_err(|e| e.to_string())?;
    // What git exports to a hook it runs: its own session and command hierarchy.
    let result = run_and_check(
        &dir,
        &[
            (
                "GIT_TRACE2_PARENT_SID",
                "20261128T120000.000000Z-H0a7c9cdf-P00000001",
            ),
            ("GIT_TRACE2_PARENT_NAME", "commit"),
        ],
    );
    let _ = std::fs::remove_dir_all(&dir);
    result
}
