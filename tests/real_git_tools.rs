//! Programs shaped like two real git tools, run for real (compiled into this test binary,
//! which doubles as them):
//!
//! * `examples/git_tool.rs`, a git companion CLI: git run with a copied environment, the
//!   program installed as git's `pre-commit` and `post-commit` hooks of a chain of
//!   repositories (each hook commits in the next one, four deep), `tracing-error` errors
//!   holding spans returned from `main`, a dependency that warns behind the program's
//!   `EnvFilter`, a rayon pool dropped as `main` returns;
//! * `examples/gix_workspace.rs`, a git implementation made of crates whose modules share
//!   names, with spans at INFO and DEBUG from its own macros.
//!
//! Each check points `GIT_TRACE2_EVENT` (and sometimes `GIT_TRACE2_PERF`) at one file that
//! the program, git and the hooks all append to, then reads the process tree, the exit
//! codes, the receiver's rules per process and `trace2 summary`'s reading back from it.

#[path = "support/mod.rs"]
mod support;

#[path = "real/mod.rs"]
mod real;

#[path = "../examples/git_tool.rs"]
mod git_tool;

#[path = "../examples/gix_workspace.rs"]
mod gix_workspace;

use std::path::{Path, PathBuf};
use std::process::{ExitCode, Output};

use real::{Trace, ensure, parent_sid};
use support::process::{self, GIT};
use support::runner::{self, Check};

/// Set in the environment of this test binary when it must act as one of the programs:
/// `git_tool` or `gix`.
const PROGRAM_ENV: &str = "TRACE2_REAL_TOOL_PROGRAM";

/// Our processes' `version.exe`.
const EXE: &str = env!("CARGO_PKG_VERSION");

/// Repositories in the chain of hooks: the tool commits in the first, whose hook commits
/// in the second, and so on.
const CHAIN: usize = 4;

/// Runs of the program that drops its pool at the end (one in about 30 lost a worker's
/// `thread_exit` when the lifecycle ended while the workers were ending).
const POOL_RUNS: usize = 48;

fn main() -> anyhow::Result<ExitCode> {
    match std::env::var(PROGRAM_ENV).as_deref() {
        Ok("git_tool") => return git_tool::main(),
        Ok("gix") => return Ok(gix_workspace::main()),
        _ => {}
    }
    let checks: &[Check] = &[
        (
            "hooks_nest_under_the_git_that_ran_them",
            hooks_nest_under_the_git_that_ran_them,
        ),
        (
            "a_failing_main_reports_its_error_inside_the_regions_it_holds",
            a_failing_main_reports_its_error_inside_the_regions_it_holds,
        ),
        (
            "a_computed_code_is_masked_as_git_masks_it",
            a_computed_code_is_masked_as_git_masks_it,
        ),
        (
            "dependency_warnings_the_fmt_filter_hides_stay_out",
            dependency_warnings_the_fmt_filter_hides_stay_out,
        ),
        (
            "warnings_of_a_process_that_succeeds_are_no_errors",
            warnings_of_a_process_that_succeeds_are_no_errors,
        ),
        (
            "a_pool_dropped_at_exit_ends_every_thread_before_atexit",
            a_pool_dropped_at_exit_ends_every_thread_before_atexit,
        ),
        (
            "debug_spans_of_the_workspace_are_regions_by_default",
            debug_spans_of_the_workspace_are_regions_by_default,
        ),
        (
            "same_named_modules_of_two_crates_keep_their_categories_apart",
            same_named_modules_of_two_crates_keep_their_categories_apart,
        ),
        (
            "a_command_without_a_subscriber_writes_nothing",
            a_command_without_a_subscriber_writes_nothing,
        ),
    ];
    Ok(runner::run_checks("real_git_tools", checks))
}

/// A fresh scratch directory, removed when dropped (also when a check fails).
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        Scratch(process::fresh_dir(&format!("real-tools-{name}")).expect("a scratch directory"))
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

/// One run of a program: its output, where its Event (and Perf) lines went.
struct Run {
    output: Output,
    event: PathBuf,
    perf: PathBuf,
}

impl Run {
    fn trace(&self) -> Result<Trace, String> {
        Trace::read(&self.event)
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    /// The process's own exit status is `code`.
    fn exited(&self, code: i32) -> Result<(), String> {
        ensure(self.output.status.code() == Some(code), || {
            format!(
                "exit status {:?}, expected {code}; stderr:\n{}",
                self.output.status,
                self.stderr()
            )
        })
    }
}

/// The directory of the git the tests compare with, first on the `PATH`.
fn path_with_git_first() -> String {
    let git_dir = Path::new(GIT).parent().expect("git's directory");
    let rest = std::env::var("PATH").unwrap_or_default();
    format!("{}:{rest}", git_dir.display())
}

/// Runs this binary as `program` in `cwd` with `args`, the Event and Perf targets at
/// `<dir>/<stem>.event` and `.perf`, and `env` on top.
fn run_program(
    program: &str,
    dir: &Path,
    stem: &str,
    cwd: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> Run {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = process::clean_command(exe);
    let event = process::trace_file(dir, stem, "event");
    let perf = process::trace_file(dir, stem, "perf");
    process::home_in(&mut cmd, dir)
        .env(PROGRAM_ENV, program)
        .env("GIT_TRACE2_EVENT", &event)
        .env("GIT_TRACE2_PERF", &perf)
        .env("GIT_TOOL_CHROME", dir.join(format!("{stem}.chrome.json")))
        .env("GIT_AUTHOR_NAME", "A U Thor")
        .env("GIT_AUTHOR_EMAIL", "author@example.com")
        .env("GIT_COMMITTER_NAME", "A U Thor")
        .env("GIT_COMMITTER_EMAIL", "author@example.com")
        .env("RUST_BACKTRACE", "0")
        .env("PATH", path_with_git_first())
        .args(args)
        .current_dir(cwd);
    for (key, value) in env {
        cmd.env(key, value);
    }
    Run {
        output: process::run(cmd),
        event,
        perf,
    }
}

/// `git init` of `repo`, untraced, without the automatic maintenance after a commit
/// (it detaches a process that goes on writing to the trace under the same session).
fn git_init(dir: &Path, repo: &Path) {
    let repo = repo.to_str().expect("a UTF-8 path");
    for args in [
        &["init", "-q", "-b", "main", repo][..],
        &["-C", repo, "config", "maintenance.auto", "false"][..],
    ] {
        let mut git = process::clean_command(GIT);
        process::home_in(&mut git, dir).args(args);
        let out = process::run(git);
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }
}

/// Makes `path` a shell script running this test binary with `args`.
fn install_hook(path: &Path, args: &[&Path]) {
    use std::os::unix::fs::PermissionsExt;
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut script = format!("#!/bin/sh\nexec '{}'", exe.display());
    for arg in args {
        script.push_str(&format!(" '{}'", arg.display()));
    }
    script.push('\n');
    std::fs::write(path, script).expect("write a hook");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// Hook processes in the chain: a `pre-commit` and a `post-commit` per repository.
const HOOKS: usize = 2 * CHAIN;

fn hooks_nest_under_the_git_that_ran_them() -> Result<(), String> {
    let dir = Scratch::new("hooks");
    let repos: Vec<PathBuf> = (0..CHAIN).map(|i| dir.join(format!("repo{i}"))).collect();
    for (i, repo) in repos.iter().enumerate() {
        git_init(&dir, repo);
        let hooks = repo.join(".git/hooks");
        let mut pre: Vec<&Path> = vec![Path::new("hook"), Path::new("pre-commit")];
        if let Some(next) = repos.get(i + 1) {
            pre.push(next);
        }
        install_hook(&hooks.join("pre-commit"), &pre);
        install_hook(
            &hooks.join("post-commit"),
            &[Path::new("hook"), Path::new("post-commit")],
        );
    }
    let first = repos[0].to_str().expect("a UTF-8 path");
    let run = run_program("git_tool", &dir, "trace", &dir, &["commit", first], &[]);
    run.exited(0)?;
    let trace = run.trace()?;
    let ours = trace.sessions_of(EXE);
    let [top] = ours
        .iter()
        .filter(|sid| parent_sid(sid).is_none())
        .collect::<Vec<_>>()[..]
    else {
        return Err(format!("not one top-level session of ours: {ours:?}"));
    };
    let hooks: Vec<&String> = ours.iter().filter(|sid| *sid != top).collect();
    ensure(hooks.len() == HOOKS, || {
        format!(
            "{} hook processes of ours, expected {HOOKS}: {hooks:?}",
            hooks.len()
        )
    })?;
    // Every hook process of ours nests under a `git commit` that ran it as that hook,
    // which nests under the process of ours that ran it.
    for hook in &hooks {
        let argv = trace.argv(hook);
        let name = argv.get(2).cloned().unwrap_or_default();
        let git = parent_sid(hook).ok_or_else(|| format!("hook {hook} has no parent"))?;
        ensure(trace.cmd_name(git).as_deref() == Some("commit"), || {
            format!(
                "hook {hook} ({argv:?}) is under {git}, which is {:?} ({:?}), not a git commit",
                trace.cmd_name(git),
                trace.argv(git)
            )
        })?;
        ensure(
            trace
                .named(git, "child_start")
                .any(|c| c["child_class"] == "hook" && c["hook_name"] == name.as_str()),
            || format!("git {git} started no {name} hook"),
        )?;
        let runner = parent_sid(git).unwrap_or_default();
        ensure(ours.iter().any(|s| s == runner), || {
            format!(
                "the git commit {git} that ran hook {hook} is not under a process of ours \
                 (under {runner:?}, {:?})",
                trace.argv(runner)
            )
        })?;
    }
    // Four levels of hooks: the deepest is a session of 1 + 2 * CHAIN parts.
    let deepest = hooks.iter().map(|s| s.split('/').count()).max();
    ensure(deepest == Some(1 + 2 * CHAIN), || {
        format!("deepest hook session has {deepest:?} parts: {hooks:?}")
    })?;
    // Each process of ours ran its git child traced, with the code it ended with.
    for sid in &ours {
        let argv = trace.argv(sid);
        let runs_git = argv.get(1).is_some_and(|a| a == "commit") || argv.len() > 3;
        let exits: Vec<i64> = trace
            .named(sid, "child_exit")
            .filter_map(|c| c["code"].as_i64())
            .collect();
        ensure(!runs_git || exits == [0], || {
            format!("{sid} ({argv:?}): child_exit codes {exits:?}")
        })?;
    }
    for sid in trace.sessions.keys() {
        trace.ends_with(sid, 0)?;
    }
    trace.receiver_accepts_all()?;
    // `trace2 summary`: one tree, every process ended 0 without errors.
    let summary = real::summary(&run.event)?;
    let processes = &summary.processes;
    ensure(processes.len() == trace.sessions.len(), || {
        format!(
            "summary: {} processes, trace: {}",
            processes.len(),
            trace.sessions.len()
        )
    })?;
    let roots = processes.iter().filter(|p| p.depth == 0).count();
    ensure(roots == 1, || format!("{roots} process trees"))?;
    for p in processes {
        ensure(p.ended && p.exit_code == Some(0) && p.errors == 0, || {
            format!(
                "summary of {:?}: ended {} code {:?} errors {}",
                p.argv, p.ended, p.exit_code, p.errors
            )
        })?;
    }
    Ok(())
}

/// The regions open on `main` (entered, not left) when the Perf line of event `name`
/// comes, and that line's dots.
fn open_regions_at(perf: &str, name: &str) -> Result<(usize, usize), String> {
    let mut open = 0usize;
    for line in perf.lines() {
        let Some((thread, event)) = real::perf_thread_event(line) else {
            continue;
        };
        if thread != "main" {
            continue;
        }
        match event {
            "region_enter" => open += 1,
            "region_leave" => open = open.saturating_sub(1),
            e if e == name => return Ok((open, real::perf_dots(line))),
            _ => {}
        }
    }
    Err(format!("no `{name}` line in the Perf stream:\n{perf}"))
}

fn a_failing_main_reports_its_error_inside_the_regions_it_holds() -> Result<(), String> {
    let dir = Scratch::new("fail");
    let run = run_program("git_tool", &dir, "trace", &dir, &["fail"], &[]);
    run.exited(1)?;
    ensure(
        run.stderr()
            .contains("Error: bad value for branchless.core.mainBranch"),
        || format!("Rust did not report the error:\n{}", run.stderr()),
    )?;
    let trace = run.trace()?;
    let [sid] = &trace.sessions_of(EXE)[..] else {
        return Err("not one session of ours".into());
    };
    trace.ends_with(sid, 1)?;
    // The displayed error, as git's `die()` writes it, right before `exit`.
    let names: Vec<&str> = trace.of(sid).filter_map(|e| e["event"].as_str()).collect();
    let exit = names.iter().position(|n| *n == "exit").unwrap_or(0);
    ensure(exit > 0 && names[exit - 1] == "error", || {
        format!("no `error` line right before `exit`: {names:?}")
    })?;
    let error = trace.named(sid, "error").next().ok_or("no error line")?;
    ensure(
        error["msg"]
            .as_str()
            .is_some_and(|m| m.starts_with("bad value for branchless.core.mainBranch")),
        || format!("error line {error}"),
    )?;
    // The error holds its spans (`configure`, `load_config`): their regions are open
    // (exited, not closed) when the error is written, and the Perf lines say so.
    let perf = std::fs::read_to_string(&run.perf).map_err(|e| e.to_string())?;
    for name in ["error", "exit"] {
        let (open, dots) = open_regions_at(&perf, name)?;
        ensure(open == 2 && dots == open, || {
            format!("`{name}` written with {open} regions open, {dots} levels of dots:\n{perf}")
        })?;
    }
    // The receiver takes the process: the two held regions stay open to its end (as
    // git's do when it dies inside regions), or are closed before `atexit`.
    let problems = trace.receiver_problems(sid);
    ensure(
        problems.is_empty() || problems == ["thread 'main' ends with 2 regions open"],
        || problems.join("\n"),
    )?;
    let summary = real::summary(&run.event)?;
    let [process] = &summary.processes[..] else {
        return Err(format!("{} processes", summary.processes.len()));
    };
    ensure(
        process.exit_code == Some(1)
            && process.errors == 1
            && process.first_errors.iter().any(|e| e.contains("bad value")),
        || {
            format!(
                "summary: code {:?}, errors {} {:?}",
                process.exit_code, process.errors, process.first_errors
            )
        },
    )
}

fn a_computed_code_is_masked_as_git_masks_it() -> Result<(), String> {
    for (computed, code) in [("3", 3), ("259", 3), ("-1", 255)] {
        let dir = Scratch::new(&format!("code{code}"));
        let run = run_program("git_tool", &dir, "trace", &dir, &["code", computed], &[]);
        run.exited(code)?;
        let trace = run.trace()?;
        let [sid] = &trace.sessions_of(EXE)[..] else {
            return Err(format!("code {computed}: not one session of ours"));
        };
        trace
            .ends_with(sid, i64::from(code))
            .map_err(|e| format!("code {computed}: {e}"))?;
    }
    Ok(())
}

/// Runs `status` in a fresh repository with the fmt filter `log` (default when `None`).
fn status_run(name: &str, log: Option<&str>) -> Result<(Scratch, Run, Trace), String> {
    let dir = Scratch::new(name);
    let repo = dir.join("repo");
    git_init(&dir, &repo);
    let env: Vec<(&str, &str)> = log.map(|l| ("GIT_TOOL_LOG", l)).into_iter().collect();
    let run = run_program("git_tool", &dir, "trace", &repo, &["status"], &env);
    run.exited(0)?;
    let trace = run.trace()?;
    for sid in trace.sessions.keys() {
        trace.ends_with(sid, 0)?;
    }
    let ours = trace.sessions_of(EXE);
    ensure(ours.len() == 1 && trace.sessions.len() == 2, || {
        format!("sessions: {:?}", trace.sessions.keys())
    })?;
    Ok((dir, run, trace))
}

/// No `error` line in any session, and `trace2 summary` counts none.
fn no_errors(run: &Run, trace: &Trace) -> Result<(), String> {
    let errors: Vec<&serde_json::Value> = trace
        .events
        .iter()
        .filter(|e| e["event"] == "error")
        .collect();
    ensure(errors.is_empty(), || {
        format!(
            "{} error lines in a run that ended 0, first: {}",
            errors.len(),
            errors[0]
        )
    })?;
    let summary = real::summary(&run.event)?;
    for p in &summary.processes {
        ensure(p.errors == 0, || {
            format!("summary of {:?}: {} errors", p.argv, p.errors)
        })?;
    }
    trace.receiver_accepts_all()
}

fn dependency_warnings_the_fmt_filter_hides_stay_out() -> Result<(), String> {
    let (_dir, run, trace) = status_run("hidden", None)?;
    ensure(!run.stderr().contains("slow path"), || {
        format!("the fmt filter let the warnings through:\n{}", run.stderr())
    })?;
    let written: Vec<&serde_json::Value> = trace
        .events
        .iter()
        .filter(|e| e.to_string().contains("slow path"))
        .collect();
    ensure(written.is_empty(), || {
        format!(
            "{} lines of the dependency's hidden warnings, first: {}",
            written.len(),
            written[0]
        )
    })?;
    no_errors(&run, &trace)
}

fn warnings_of_a_process_that_succeeds_are_no_errors() -> Result<(), String> {
    let (_dir, run, trace) = status_run("shown", Some("warn"))?;
    let shown = run.stderr().matches("slow path").count();
    ensure(shown == 100, || {
        format!("the fmt layer showed {shown} warnings, expected 100")
    })?;
    no_errors(&run, &trace)
}

fn a_pool_dropped_at_exit_ends_every_thread_before_atexit() -> Result<(), String> {
    let dir = Scratch::new("pool");
    for i in 0..POOL_RUNS {
        let stem = format!("run{i}");
        // Dropped as `main` returns (one run in three), or 0 to 58 µs before the trace
        // ends: the workers end while it does (the race is rare: each run is a chance).
        let micros = ((2 * i) % 60).to_string();
        let when: &[&str] = if i % 3 == 2 {
            &["pool"]
        } else {
            &["pool", "before", &micros]
        };
        let run = run_program("git_tool", &dir, &stem, &dir, when, &[]);
        run.exited(0)?;
        let trace = run.trace()?;
        let [sid] = &trace.sessions_of(EXE)[..] else {
            return Err(format!("run {i}: not one session of ours"));
        };
        trace
            .ends_with(sid, 0)
            .map_err(|e| format!("run {i}: {e}"))?;
        let mut started = std::collections::BTreeMap::<String, (usize, usize)>::new();
        for e in trace.of(sid) {
            let thread = e["thread"].as_str().unwrap_or_default().to_owned();
            match e["event"].as_str() {
                Some("thread_start") => started.entry(thread).or_default().0 += 1,
                Some("thread_exit") => started.entry(thread).or_default().1 += 1,
                _ => {}
            }
        }
        ensure(!started.is_empty(), || {
            format!("run {i}: no worker announced")
        })?;
        ensure(started.values().all(|&n| n == (1, 1)), || {
            format!("run {i}: (thread_start, thread_exit) per thread: {started:?}")
        })?;
        trace
            .receiver_accepts_all()
            .map_err(|e| format!("run {i}: {e}"))?;
    }
    Ok(())
}

/// Runs the gix-shaped program's `status`, with `env`.
fn gix_status(name: &str, env: &[(&str, &str)]) -> Result<(Scratch, Run, Trace), String> {
    let dir = Scratch::new(name);
    let run = run_program("gix", &dir, "trace", &dir, &["status"], env);
    run.exited(0)?;
    let trace = run.trace()?;
    let [sid] = &trace.sessions_of(EXE)[..] else {
        return Err("not one session of ours".into());
    };
    trace.ends_with(sid, 0)?;
    trace.receiver_accepts_all()?;
    Ok((dir, run, trace))
}

/// The category of each `walk` region (one per crate).
fn walk_categories(trace: &Trace) -> Vec<String> {
    trace
        .events
        .iter()
        .filter(|e| e["event"] == "region_enter" && e["label"] == "walk")
        .map(|e| e["category"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn debug_spans_of_the_workspace_are_regions_by_default() -> Result<(), String> {
    let (_dir, _run, trace) = gix_status("gix-default", &[])?;
    let labels: Vec<&str> = trace
        .events
        .iter()
        .filter(|e| e["event"] == "region_enter")
        .filter_map(|e| e["label"].as_str())
        .collect();
    ensure(labels == ["status", "walk", "walk"], || {
        format!("regions entered: {labels:?}")
    })
}

fn same_named_modules_of_two_crates_keep_their_categories_apart() -> Result<(), String> {
    // DEBUG asked for, so that only the categories are in question here.
    let (_dir, run, trace) =
        gix_status("gix-categories", &[("TRACING_TRACE2_MAX_LEVEL", "debug")])?;
    let categories = walk_categories(&trace);
    ensure(
        categories.len() == 2 && categories[0] != categories[1],
        || format!("the two crates' `walk` regions have categories {categories:?}"),
    )?;
    let summary = real::summary(&run.event)?;
    let [process] = &summary.processes[..] else {
        return Err(format!("{} processes", summary.processes.len()));
    };
    let rows = process.regions.iter().filter(|r| r.label == "walk").count();
    ensure(rows == 2, || {
        format!(
            "`trace2 summary` has {rows} rows of `walk`: {:?}",
            process.regions
        )
    })
}

fn a_command_without_a_subscriber_writes_nothing() -> Result<(), String> {
    let dir = Scratch::new("gix-version");
    let run = run_program("gix", &dir, "trace", &dir, &["version"], &[]);
    run.exited(0)?;
    ensure(
        String::from_utf8_lossy(&run.output.stdout).starts_with("gix "),
        || "no version printed".into(),
    )?;
    let lines = run.trace()?.events.len();
    ensure(lines == 0, || format!("{lines} lines written"))
}
