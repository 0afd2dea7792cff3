//! One trace tree with real git, as real processes: the example program
//! (`examples/lifecycle.rs`, compiled into this test binary) runs git as a child, git runs
//! it as a shell alias and as a hook, and a three-level chain ours -> git -> ours writes
//! into one file per target. The checks are those a Trace2 consumer relies on: session
//! ids nest (`<parent sid>/<own>`), Perf depths grow by one per level, the command
//! hierarchy carries over, and a child's lines sit between its parent's `child_start`
//! and `child_exit`.
//!
//! The binary has its own `main` (no libtest harness) because it doubles as the program.

#[path = "support/mod.rs"]
mod support;

#[path = "program/mod.rs"]
mod program;

use std::path::Path;
use std::process::ExitCode;

use program::{Streams, ensure, ours, tempdir, traced_command};
use serde_json::Value;
use support::process::{GIT, run};

fn main() -> ExitCode {
    program::main(
        "interop",
        &[
            ("ours_runs_git", ours_runs_git),
            (
                "git_with_a_copied_environment_nests",
                git_with_a_copied_environment_nests,
            ),
            ("git_runs_ours_as_shell_alias", git_runs_ours_as_shell_alias),
            ("git_runs_ours_as_hook", git_runs_ours_as_hook),
            ("three_level_chain", three_level_chain),
            ("ours_execs_git", ours_execs_git),
            ("failed_exec_matches_git", failed_exec_matches_git),
        ],
    )
}

/// A fresh repository (made without tracing).
fn init_repo(dir: &Path) -> Result<std::path::PathBuf, String> {
    let repo = dir.join("repo");
    let mut cmd = traced_command(GIT, dir);
    cmd.env_remove("GIT_TRACE2")
        .env_remove("GIT_TRACE2_PERF")
        .env_remove("GIT_TRACE2_EVENT")
        .args(["init", "-q"])
        .arg(&repo);
    let out = run(cmd);
    ensure(out.status.success(), || format!("git init: {out:?}"))?;
    Ok(repo)
}

fn str_of<'a>(event: &'a Value, key: &str) -> &'a str {
    event[key].as_str().unwrap_or("")
}

/// The Perf depth column (`d<N>`) of a full-format Perf record.
fn perf_depth(record: &str) -> Option<u32> {
    record.split(" | ").nth(1)?.strip_prefix('d')?.parse().ok()
}

/// The distinct session ids of an Event stream, in order of first appearance.
fn sids(events: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in events {
        let sid = str_of(e, "sid");
        if !out.iter().any(|s| s == sid) {
            out.push(sid.to_owned());
        }
    }
    out
}

/// Index of the first Event line matching `f`.
fn find(events: &[Value], f: impl Fn(&Value) -> bool) -> Result<usize, String> {
    events
        .iter()
        .position(f)
        .ok_or_else(|| "line not found".to_owned())
}

/// All lines of session `sid` sit strictly between lines `start` and `end`.
fn framed(events: &[Value], sid: &str, start: usize, end: usize) -> Result<(), String> {
    for (i, e) in events.iter().enumerate() {
        if str_of(e, "sid") == sid {
            ensure(start < i && i < end, || {
                format!("line {i} of {sid} outside child_start {start} .. child_exit {end}")
            })?;
        }
    }
    Ok(())
}

/// The distinct Perf depths (`d0`, `d1`, …) of a stream, sorted.
fn perf_depths(streams: &Streams) -> Vec<u32> {
    let mut depths: Vec<u32> = streams.perf.iter().filter_map(|r| perf_depth(r)).collect();
    depths.sort_unstable();
    depths.dedup();
    depths
}

fn ours_runs_git() -> Result<(), String> {
    let dir = tempdir("ours-runs-git");
    let repo = init_repo(&dir)?;
    let repo_arg = repo.to_string_lossy().into_owned();
    let out = run(ours(
        &dir,
        &[
            "run", "git", "version", "--", "git", "-C", &repo_arg, "status",
        ],
    ));
    ensure(out.status.success(), || format!("{out:?}"))?;
    let streams = Streams::read(&dir);
    let events = streams.events();
    let all = sids(&events);
    ensure(all.len() == 3, || format!("sessions: {all:?}"))?;
    let ours = &all[0];
    for (child, (git_sid, verb)) in all[1..].iter().zip(["version", "status"]).enumerate() {
        // <our sid>/<git's own>
        ensure(
            git_sid.starts_with(&format!("{ours}/")) && git_sid.matches('/').count() == 1,
            || format!("git sid {git_sid} under {ours}"),
        )?;
        let start = find(&events, |e| {
            e["event"] == "child_start" && e["child_id"] == child && str_of(e, "sid") == ours
        })?;
        let exit = find(&events, |e| {
            e["event"] == "child_exit" && e["child_id"] == child && str_of(e, "sid") == ours
        })?;
        framed(&events, git_sid, start, exit)?;
        let started = &events[start];
        ensure(
            started["child_class"] == "?" && started["use_shell"] == false,
            || format!("child_start {started}"),
        )?;
        // A git child's argv is written with a leading `git`, as git writes its own.
        let argv: Vec<&str> = match verb {
            "version" => vec!["git", "version"],
            _ => vec!["git", "-C", &repo_arg, "status"],
        };
        ensure(started["argv"] == serde_json::json!(argv), || {
            format!("git child argv {started}")
        })?;
        ensure(events[exit]["code"] == 0, || format!("{}", events[exit]))?;
        // The hierarchy carries our cmd_name.
        let name = find(&events, |e| {
            e["event"] == "cmd_name" && str_of(e, "sid") == git_sid
        })?;
        let expected = format!("lifecycle/{verb}");
        ensure(events[name]["hierarchy"] == expected.as_str(), || {
            format!("git cmd_name {}", events[name])
        })?;
    }
    // Perf: ours at d0, git's at d1; Normal: git's cmd_name lines with our hierarchy.
    ensure(perf_depths(&streams) == [0, 1], || {
        format!("perf depths {:?}", perf_depths(&streams))
    })?;
    for verb in ["version", "status"] {
        let line = format!("cmd_name {verb} (lifecycle/{verb})");
        ensure(streams.normal.iter().any(|l| l.ends_with(&line)), || {
            format!("no `{line}` in {:#?}", streams.normal)
        })?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// A git child started with `env_clear()` and a copy of the environment taken before the
/// lifecycle started: as it is, it escapes our tree (a root of its own, or our sibling
/// under our own parent); through `add_session_env` or `Trace2CommandExt` it nests.
fn git_with_a_copied_environment_nests() -> Result<(), String> {
    // As if git had started us: the copy then carries git's session id.
    let parent = "20261128T120000.000000Z-H00000000-P00000001";
    for (how, nests) in [("plain", false), ("add", true), ("traced", true)] {
        for parent in [None, Some(parent)] {
            let dir = tempdir(&format!("env-copy-{how}-{}", parent.is_some()));
            let mut cmd = ours(&dir, &["run-env-copy", how, GIT, "version"]);
            if let Some(parent) = parent {
                cmd.env("GIT_TRACE2_PARENT_SID", parent);
            }
            let out = run(cmd);
            ensure(out.status.success(), || format!("{how}: {out:?}"))?;
            let events = Streams::read(&dir).events();
            let all = sids(&events);
            ensure(all.len() == 2, || format!("{how}: sessions {all:?}"))?;
            let (ours, git) = (&all[0], &all[1]);
            let expected_ours = parent.map_or(0, |_| 1);
            ensure(ours.matches('/').count() == expected_ours, || {
                format!("{how}: our sid {ours}")
            })?;
            let nested = git.starts_with(&format!("{ours}/"))
                && git.matches('/').count() == expected_ours + 1;
            ensure(nested == nests, || {
                format!("{how} (parent {parent:?}): git sid {git}, ours {ours}, nests: {nested}")
            })?;
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    Ok(())
}

/// Checks the lines of our program run by git: one session under git's, depth 1, between
/// git's `child_start`/`child_exit` of class `class`; returns our session's events.
fn nested_under_git(streams: &Streams, class: &str) -> Result<Vec<Value>, String> {
    let events = streams.events();
    let git = str_of(&events[0], "sid");
    let start = find(&events, |e| {
        e["event"] == "child_start" && e["child_class"] == class && str_of(e, "sid") == git
    })?;
    // Our session is the one that starts right after that child_start (git may run
    // other children too, such as `git maintenance` after a commit).
    let ours = events[start + 1..]
        .iter()
        .map(|e| str_of(e, "sid"))
        .find(|sid| *sid != git)
        .ok_or("no nested session")?;
    ensure(
        ours.starts_with(&format!("{git}/")) && ours.matches('/').count() == 1,
        || format!("our sid {ours} under {git}"),
    )?;
    let version = find(&events, |e| str_of(e, "sid") == ours)?;
    ensure(events[version]["exe"] == env!("CARGO_PKG_VERSION"), || {
        format!("not our program: {}", events[version])
    })?;
    let child_id = events[start]["child_id"].clone();
    let exit = find(&events, |e| {
        e["event"] == "child_exit" && e["child_id"] == child_id && str_of(e, "sid") == git
    })?;
    framed(&events, ours, start, exit)?;
    ensure(events[exit]["code"] == 0, || format!("{}", events[exit]))?;
    // Our stream is complete: version first, atexit last.
    let mine: Vec<Value> = events
        .iter()
        .filter(|e| str_of(e, "sid") == ours)
        .cloned()
        .collect();
    ensure(
        mine.first().is_some_and(|e| e["event"] == "version")
            && mine.last().is_some_and(|e| e["event"] == "atexit"),
        || format!("our lines {mine:#?}"),
    )?;
    ensure(perf_depths(streams) == [0, 1], || {
        format!("perf depths {:?}", perf_depths(streams))
    })?;
    Ok(mine)
}

fn git_runs_ours_as_shell_alias() -> Result<(), String> {
    let dir = tempdir("alias");
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = traced_command(GIT, &dir);
    cmd.env(program::PROGRAM_ENV, "1")
        .arg("-c")
        .arg(format!("alias.t=!{} return", exe.display()))
        .arg("t")
        .current_dir(&dir);
    let out = run(cmd);
    ensure(out.status.success(), || format!("{out:?}"))?;
    let streams = Streams::read(&dir);
    let mine = nested_under_git(&streams, "shell_alias")?;
    let name = mine
        .iter()
        .find(|e| e["event"] == "cmd_name")
        .ok_or("no cmd_name")?;
    ensure(
        name["hierarchy"] == "_run_dashed_/_run_shell_alias_/lifecycle",
        || format!("{name}"),
    )?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn git_runs_ours_as_hook() -> Result<(), String> {
    let dir = tempdir("hook");
    let repo = init_repo(&dir)?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let hook = repo.join(".git/hooks/pre-commit");
    std::os::unix::fs::symlink(&exe, &hook).map_err(|e| e.to_string())?;
    let mut cmd = traced_command(GIT, &dir);
    cmd.env(program::PROGRAM_ENV, "1")
        .args(["commit", "-q", "--allow-empty", "-m", "hooked"])
        .current_dir(&repo);
    let out = run(cmd);
    ensure(out.status.success(), || format!("{out:?}"))?;
    let streams = Streams::read(&dir);
    let events = streams.events();
    let start = events
        .iter()
        .find(|e| e["event"] == "child_start" && e["child_class"] == "hook")
        .ok_or("no hook child_start")?;
    ensure(start["hook_name"] == "pre-commit", || format!("{start}"))?;
    let mine = nested_under_git(&streams, "hook")?;
    let started = mine
        .iter()
        .find(|e| e["event"] == "start")
        .ok_or("no start")?;
    ensure(started["argv"] == start["argv"], || {
        format!("our argv {started} vs git's child argv {start}")
    })?;
    let name = mine
        .iter()
        .find(|e| e["event"] == "cmd_name")
        .ok_or("no cmd_name")?;
    ensure(name["hierarchy"] == "commit/lifecycle", || {
        format!("{name}")
    })?;
    let ancestry = mine
        .iter()
        .find(|e| e["event"] == "cmd_ancestry")
        .ok_or("no cmd_ancestry")?;
    ensure(ancestry["ancestry"][0] == "git", || format!("{ancestry}"))?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn three_level_chain() -> Result<(), String> {
    let dir = tempdir("chain");
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let alias = format!("alias.t=!{} exit 3", exe.display());
    let out = run(ours(&dir, &["run", "git", "-c", &alias, "t"]));
    ensure(out.status.code() == Some(3), || format!("{out:?}"))?;
    let streams = Streams::read(&dir);
    let events = streams.events();
    let all = sids(&events);
    ensure(all.len() == 3, || format!("sessions: {all:?}"))?;
    for (level, sid) in all.iter().enumerate() {
        ensure(sid.matches('/').count() == level, || {
            format!("sid {sid} at level {level}")
        })?;
        if level > 0 {
            ensure(sid.starts_with(&format!("{}/", all[level - 1])), || {
                format!("{sid} under {}", all[level - 1])
            })?;
        }
    }
    ensure(perf_depths(&streams) == [0, 1, 2], || {
        format!("perf depths {:?}", perf_depths(&streams))
    })?;
    // The innermost exit code travels up: ours(3) -> git(3) -> ours' child_exit.
    let exit = find(&events, |e| {
        e["event"] == "child_exit" && str_of(e, "sid") == all[0]
    })?;
    ensure(events[exit]["code"] == 3, || format!("{}", events[exit]))?;
    let inner = find(&events, |e| {
        e["event"] == "cmd_name" && str_of(e, "sid") == all[2]
    })?;
    ensure(
        events[inner]["hierarchy"] == "lifecycle/_run_dashed_/_run_shell_alias_/lifecycle",
        || format!("{}", events[inner]),
    )?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn ours_execs_git() -> Result<(), String> {
    let dir = tempdir("exec");
    let out = run(ours(&dir, &["exec", "git", "version"]));
    ensure(out.status.success(), || format!("{out:?}"))?;
    let streams = Streams::read(&dir);
    let events = streams.events();
    let all = sids(&events);
    ensure(all.len() == 2, || format!("sessions: {all:?}"))?;
    let (ours, git) = (&all[0], &all[1]);
    // The exec'd image is a child of ours with the same pid (git's `exec.*` capture).
    ensure(git.starts_with(&format!("{ours}/")), || {
        format!("{git} under {ours}")
    })?;
    let pid = |sid: &str| sid.rsplit("-P").next().map(str::to_owned);
    ensure(pid(ours) == pid(git), || {
        format!("pids of {ours} and {git}")
    })?;
    let exec = find(&events, |e| e["event"] == "exec")?;
    ensure(
        events[exec]["exe"] == "git"
            && events[exec]["argv"] == serde_json::json!(["git", "version"]),
        || format!("{}", events[exec]),
    )?;
    // Our stream ends with the exec: no exit, no atexit.
    let last_ours = events.iter().rposition(|e| str_of(e, "sid") == ours);
    ensure(last_ours == Some(exec), || format!("{events:#?}"))?;
    let name = find(&events, |e| {
        e["event"] == "cmd_name" && str_of(e, "sid") == git
    })?;
    ensure(events[name]["hierarchy"] == "lifecycle/version", || {
        format!("{}", events[name])
    })?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn failed_exec_matches_git() -> Result<(), String> {
    // git's `exec-fail.*`: `git notes show HEAD` execs `git show <oid>` with no git on
    // PATH: exec, exec_result code 2, exit 1, atexit. Ours does the same exec.
    let dir = tempdir("exec-fail");
    let mut cmd = ours(
        &dir,
        &[
            "exec",
            "git",
            "show",
            "a941c2e33656b2444712059e9c8c4dbbf3acd958",
        ],
    );
    cmd.env("PATH", "/nonexistent");
    let out = run(cmd);
    ensure(out.status.code() == Some(1), || format!("{out:?}"))?;
    let streams = Streams::read(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    program::same_lines(
        &streams.masked_tail(4),
        &program::capture_tail("exec-fail", 4),
    )
}
