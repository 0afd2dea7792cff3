//! The async example (`examples/async.rs`, compiled into this binary and run as a child
//! process) checked against the OpenTelemetry trace2receiver's rules: one region pair
//! per `#[instrument] async fn` call, `t_rel` at least the time the call slept, children
//! nested in their parents, a strict stack per `thread`, every thread announced; and the
//! example's other modes: lifecycle lines under a global `EnvFilter("warn")` beside a
//! `fmt` layer, a `main` that returns `Err`, call sites as relative paths, git children
//! of async tasks started through the traced `tokio::process::Command`.

mod support;

#[path = "../examples/async.rs"]
mod example;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, ExitCode, Output};

use serde_json::Value;
use support::receiver;
use support::runner::{Check, run_checks};

/// Set in the environment of a process that must act as the example program.
const PROGRAM_ENV: &str = "TRACE2_ASYNC_PROGRAM";

fn main() -> ExitCode {
    if std::env::var_os(PROGRAM_ENV).is_some() {
        return example::main();
    }
    let checks: &[Check] = &[
        (
            "one_region_pair_per_async_call",
            one_region_pair_per_async_call,
        ),
        (
            "lifecycle_under_a_warn_filter",
            lifecycle_under_a_warn_filter,
        ),
        ("main_returning_err", main_returning_err),
        ("git_children_of_tokio_tasks", git_children_of_tokio_tasks),
    ];
    run_checks("async", checks)
}

/// Runs the example in `mode` with its Event stream in `dir`; returns the process's
/// output and the lines of its own session (a git child appends its lines too).
fn run_example(mode: Option<&str>, dir: &Path) -> (Output, Vec<Value>, Vec<u8>) {
    let event = dir.join("trace.event");
    let mut cmd = support::process::clean_command(std::env::current_exe().unwrap());
    support::process::without_config(&mut cmd);
    cmd.env(PROGRAM_ENV, "1")
        .env("GIT_TRACE2_EVENT", &event)
        .env("GIT_TRACE2_EVENT_NESTING", "10");
    if let Some(mode) = mode {
        cmd.arg(mode);
    }
    let out = run(cmd);
    let bytes = std::fs::read(&event).unwrap_or_default();
    let all = support::json_lines(String::from_utf8_lossy(&bytes).lines());
    let sid = all.first().map(|v| v["sid"].clone()).unwrap_or_default();
    let own: Vec<Value> = all.into_iter().filter(|v| v["sid"] == sid).collect();
    let mut own_bytes = Vec::new();
    for v in &own {
        own_bytes.extend_from_slice(v.to_string().as_bytes());
        own_bytes.push(b'\n');
    }
    (out, own, own_bytes)
}

fn run(mut cmd: Command) -> Output {
    cmd.output().expect("run the example")
}

fn ensure(ok: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if ok { Ok(()) } else { Err(why()) }
}

fn name(v: &Value) -> &str {
    v["event"].as_str().unwrap_or("")
}

fn one_region_pair_per_async_call() -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (out, events, bytes) = run_example(None, dir.path());
    ensure(out.status.success(), || format!("{out:?}"))?;
    // Every line accepted under the receiver's rules: strict stacks per thread, every
    // thread announced, atexit last, …
    receiver::check_connection(&bytes).map_err(|p| p.join("\n"))?;

    // Region pairs per label, matched on each thread's stack; t_rel of each.
    let mut stacks: HashMap<&str, Vec<&Value>> = HashMap::new();
    let mut pairs: HashMap<String, Vec<f64>> = HashMap::new();
    let mut parents: Vec<(String, Option<String>)> = Vec::new();
    for v in &events {
        let thread = v["thread"].as_str().unwrap_or("");
        let label = || v["label"].as_str().unwrap_or("").to_owned();
        match name(v) {
            "region_enter" => {
                let stack = stacks.entry(thread).or_default();
                let parent = stack
                    .last()
                    .map(|p| p["label"].as_str().unwrap_or("").to_owned());
                parents.push((label(), parent));
                stack.push(v);
            }
            "region_leave" => {
                let enter = stacks
                    .entry(thread)
                    .or_default()
                    .pop()
                    .ok_or("leave without enter")?;
                ensure(enter["label"] == v["label"], || {
                    format!("{enter} closed by {v}")
                })?;
                pairs
                    .entry(label())
                    .or_default()
                    .push(v["t_rel"].as_f64().unwrap_or(-1.0));
            }
            _ => {}
        }
    }
    let count = |label: &str| pairs.get(label).map_or(0, Vec::len);
    // 4 calls on the multi-thread runtime, 3 on the current-thread one: one pair each.
    ensure(count("fetch") == 7, || format!("fetch pairs: {pairs:?}"))?;
    ensure(count("parse") == 7, || format!("parse pairs: {pairs:?}"))?;
    ensure(count("run_tasks") == 2, || {
        format!("run_tasks pairs: {pairs:?}")
    })?;
    let slept = example::FETCH_SLEEP_MS as f64 / 1000.0;
    for t_rel in &pairs["fetch"] {
        ensure(*t_rel >= slept, || {
            format!("fetch lasted {t_rel} s < {slept} s")
        })?;
    }
    // Each parse is nested in a fetch (its parent), on the same thread.
    for (label, parent) in &parents {
        if label == "parse" {
            ensure(parent.as_deref() == Some("fetch"), || {
                format!("parse nested in {parent:?}")
            })?;
        }
    }

    // Every non-main thread: thread_start first, thread_exit before atexit.
    let mut started = Vec::new();
    let mut exited = Vec::new();
    for v in &events {
        match name(v) {
            "thread_start" => started.push(v["thread"].as_str().unwrap_or("").to_owned()),
            "thread_exit" => exited.push(v["thread"].as_str().unwrap_or("").to_owned()),
            _ => {}
        }
    }
    ensure(!started.is_empty(), || "no thread_start".into())?;
    for thread in &started {
        ensure(exited.contains(thread), || format!("{thread} never exits"))?;
    }
    // The plain std::thread's datum is on an announced thread that exits.
    let plain = events
        .iter()
        .find(|v| v["category"] == "plain")
        .ok_or("no datum from the plain thread")?;
    let plain_thread = plain["thread"].as_str().unwrap_or("");
    ensure(plain_thread != "main", || "plain thread is main".into())?;
    ensure(started.iter().any(|t| t == plain_thread), || {
        format!("{plain_thread} not announced")
    })?;
    ensure(exited.iter().any(|t| t == plain_thread), || {
        format!("{plain_thread} has no thread_exit")
    })?;

    // Call sites: never absolute; the panic inside the standard library names its file
    // relative to the library; exit and atexit name the example, not this crate. Every
    // thread_exit has one: the workers' stop hook in the example; for the threads that
    // end in a thread-local destructor, the call site of their thread_start.
    let mut start_sites = HashMap::new();
    for v in &events {
        if let Some(file) = v["file"].as_str() {
            ensure(!file.starts_with('/'), || {
                format!("absolute call site: {v}")
            })?;
        }
        let site = (v["file"].clone(), v["line"].clone());
        match name(v) {
            "thread_start" => {
                start_sites.insert(v["thread"].clone(), site);
            }
            "thread_exit" => {
                let file = v["file"].as_str().unwrap_or("");
                let from_start = start_sites.get(&v["thread"]) == Some(&site);
                ensure(
                    v["line"].as_u64().is_some_and(|l| l > 0)
                        && (file.ends_with("examples/async.rs") || from_start),
                    || format!("thread_exit at {file:?}: {v}"),
                )?;
            }
            _ => {}
        }
    }
    let error = events
        .iter()
        .find(|v| name(v) == "error")
        .ok_or("no error line for the caught panic")?;
    let file = error["file"].as_str().unwrap_or("");
    ensure(file.starts_with("library/alloc/"), || {
        format!("panic call site {file:?}")
    })?;
    for v in events
        .iter()
        .filter(|v| matches!(name(v), "exit" | "atexit"))
    {
        let file = v["file"].as_str().unwrap_or("");
        ensure(file.ends_with("examples/async.rs"), || {
            format!("{} at {file:?}", name(v))
        })?;
    }
    Ok(())
}

fn lifecycle_under_a_warn_filter() -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (out, events, bytes) = run_example(Some("filters"), dir.path());
    ensure(out.status.success(), || format!("{out:?}"))?;
    receiver::check_connection(&bytes).map_err(|p| p.join("\n"))?;
    let names: Vec<&str> = events.iter().map(name).collect();
    for wanted in [
        "version",
        "start",
        "cmd_name",
        "child_start",
        "child_exit",
        "exit",
        "atexit",
    ] {
        ensure(names.contains(&wanted), || {
            format!("no {wanted}: {names:?}")
        })?;
    }
    // The error passes the filter and reaches both layers; the info does not.
    ensure(
        events.iter().any(|v| v["msg"] == "kept by the filter"),
        || format!("{names:?}"),
    )?;
    ensure(
        !events.iter().any(|v| v["msg"] == "filtered out everywhere"),
        || "the filter was ignored".into(),
    )?;
    // fmt printed the warning and none of the lifecycle.
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure(stderr.contains("kept by the filter"), || stderr.to_string())?;
    for leak in ["child_start", "cmd_name", "atexit", "argv", "event="] {
        ensure(!stderr.contains(leak), || {
            format!("fmt printed {leak}: {stderr}")
        })?;
    }
    Ok(())
}

fn main_returning_err() -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (out, events, bytes) = run_example(Some("result-err"), dir.path());
    ensure(out.status.code() == Some(1), || format!("{out:?}"))?;
    receiver::check_connection(&bytes).map_err(|p| p.join("\n"))?;
    let code = |event: &str| {
        events
            .iter()
            .find(|v| name(v) == event)
            .map(|v| v["code"].clone())
    };
    ensure(code("exit") == Some(1.into()), || format!("{events:?}"))?;
    ensure(code("atexit") == Some(1.into()), || format!("{events:?}"))?;
    Ok(())
}

/// Two tasks run `git version` and `git rev-parse --verify nosuchref` (code 128) through
/// the traced tokio command at the same time: a child_start/child_exit pair for each,
/// with its argv and code, on the Trace2 thread of the task that ran it; each git's own
/// lines nested under our session; every stream accepted by the receiver.
fn git_children_of_tokio_tasks() -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (out, events, bytes) = run_example(Some("tokio-children"), dir.path());
    ensure(out.status.success(), || format!("{out:?}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure(
        stdout.contains("git version ") && stdout.contains("rev-parse code Some(128)"),
        || format!("{out:?}"),
    )?;
    receiver::check_connection(&bytes).map_err(|p| p.join("\n"))?;

    // Each task's region, and the thread it is on.
    let region_thread = |label: &str| {
        events
            .iter()
            .find(|v| name(v) == "region_enter" && v["label"] == label)
            .map(|v| v["thread"].clone())
            .ok_or_else(|| format!("no region {label}"))
    };
    let version_thread = region_thread("git_version")?;
    let lookup_thread = region_thread("git_no_such_ref")?;
    let child = |event: &str, id: &Value| {
        events
            .iter()
            .find(|v| name(v) == event && v["child_id"] == *id)
            .ok_or_else(|| format!("no {event} for child {id}"))
    };
    let starts: Vec<&Value> = events.iter().filter(|v| name(v) == "child_start").collect();
    ensure(starts.len() == 2, || {
        format!("child_start lines: {starts:?}")
    })?;
    let mut ids = Vec::new();
    for start in starts {
        let id = &start["child_id"];
        let exit = child("child_exit", id)?;
        let (argv, class, code, thread) = match start["argv"][1].as_str() {
            Some("version") => (vec!["git", "version"], "?", 0, &version_thread),
            Some("rev-parse") => (
                vec!["git", "rev-parse", "--verify", "nosuchref"],
                "lookup",
                128,
                &lookup_thread,
            ),
            _ => return Err(format!("unexpected child: {start}")),
        };
        ensure(start["argv"] == serde_json::json!(argv), || {
            format!("{start}")
        })?;
        ensure(start["child_class"] == class, || format!("{start}"))?;
        ensure(exit["code"] == code, || format!("{exit}"))?;
        ensure(exit["pid"].as_i64().is_some_and(|pid| pid > 0), || {
            format!("{exit}")
        })?;
        ensure(exit["t_rel"].as_f64().is_some_and(|t| t > 0.0), || {
            format!("{exit}")
        })?;
        // Written by the task that ran the child, on its span's Trace2 thread.
        ensure(
            start["thread"] == *thread && exit["thread"] == *thread,
            || format!("child lines on another thread than {thread}: {start} {exit}"),
        )?;
        // Both lines name the example's own code.
        for v in [start, exit] {
            let file = v["file"].as_str().unwrap_or("");
            ensure(file.ends_with("examples/async.rs"), || format!("{v}"))?;
        }
        ids.push(id.clone());
    }
    ensure(ids[0] != ids[1], || format!("child ids {ids:?}"))?;

    // Each git wrote its own lines into the same file, under a session nested in ours,
    // and its stream is accepted too.
    let text =
        std::fs::read_to_string(dir.path().join("trace.event")).map_err(|e| e.to_string())?;
    let all = support::json_lines(text.lines());
    let ours = events[0]["sid"].as_str().unwrap_or("").to_owned();
    let mut children: HashMap<String, Vec<u8>> = HashMap::new();
    for v in &all {
        let sid = v["sid"].as_str().unwrap_or("");
        if sid == ours {
            continue;
        }
        ensure(sid.starts_with(&format!("{ours}/")), || {
            format!("a line of another session: {v}")
        })?;
        let lines = children.entry(sid.to_owned()).or_default();
        lines.extend_from_slice(v.to_string().as_bytes());
        lines.push(b'\n');
    }
    ensure(children.len() == 2, || {
        format!("git sessions: {:?}", children.keys().collect::<Vec<_>>())
    })?;
    let mut git_codes = Vec::new();
    for (sid, lines) in &children {
        receiver::check_connection(lines).map_err(|p| format!("{sid}: {}", p.join("\n")))?;
        let git_events = support::json_lines(String::from_utf8_lossy(lines).lines());
        let exit = git_events
            .iter()
            .find(|v| name(v) == "exit")
            .ok_or_else(|| format!("{sid}: no exit"))?;
        git_codes.push(exit["code"].as_i64().unwrap_or(-1));
        // The git child's command hierarchy continues ours.
        if let Some(cmd) = git_events.iter().find(|v| name(v) == "cmd_name") {
            let hierarchy = cmd["hierarchy"].as_str().unwrap_or("");
            ensure(hierarchy.starts_with("tokio-children/"), || {
                format!("{cmd}")
            })?;
        }
    }
    git_codes.sort_unstable();
    ensure(git_codes == [0, 128], || {
        format!("git exit codes {git_codes:?}")
    })?;
    Ok(())
}
