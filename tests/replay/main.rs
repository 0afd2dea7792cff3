//! Replays the Trace2 calls behind git's own captures through our public API and
//! compares our three streams with git's, line by line.
//!
//! This test binary has its own `main` (no libtest harness) because Trace2 names the
//! process's main thread `main`: each scenario runs in a fresh child process (this same
//! binary, with `TRACE2_REPLAY` set) whose main thread makes the calls, with the
//! `GIT_TRACE2*` variables pointing at files, exactly as a real program would run. The
//! calls are read from the capture's Event stream (top-level process only, each line turned
//! back into a record by the Event reader, `tracing_trace2_event::read_line`): spans for
//! regions, `info!` for data, `tracing_trace2::api` for the rest, threads for threads.
//! Then the Normal, Perf and Event files are compared with git's captures after masking
//! only times, elapsed numbers, file:line, session ids and pids.

#[path = "../support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;

use serde_json::Value;
use tracing::info;
use tracing::span::EnteredSpan;
use tracing_subscriber::prelude::*;
use tracing_trace2::api;
use tracing_trace2_event::read_line;
use tracing_trace2_record::Trace2Event;

use support::first_difference;
use support::process;
use support::runner::Runner;

/// One scenario: a capture to replay and the environment git had for it.
struct Scenario {
    /// Base name of the captures compared against (`<name>.event`, …).
    name: &'static str,
    /// The Event capture whose calls are replayed (defaults to `<name>.event`).
    calls_from: Option<&'static str>,
    /// Extra environment (brief modes, nesting, parent sid).
    env: &'static [(&'static str, &'static str)],
    /// Streams not compared (see where it is set for why).
    skip: &'static [&'static str],
}

const fn scenario(name: &'static str) -> Scenario {
    Scenario {
        name,
        calls_from: None,
        env: &[],
        skip: &[],
    }
}

const BRIEF: &[(&str, &str)] = &[
    ("GIT_TRACE2_BRIEF", "1"),
    ("GIT_TRACE2_PERF_BRIEF", "true"),
    ("GIT_TRACE2_EVENT_BRIEF", "yes"),
];

/// Captures whose Event stream holds every call of the top-level process. (`status`
/// and `submodule-status` are not replayable: their Event captures were filtered at
/// nesting 2 and so lack the deeper regions that Perf shows.)
const SCENARIOS: &[Scenario] = &[
    scenario("version"),
    Scenario {
        env: BRIEF,
        ..scenario("version-brief")
    },
    scenario("tt-data"),
    scenario("tt-errors"),
    // tt-spec's Event capture was filtered at nesting 2, so its calls come from a script
    // written after the capture's description (samples/README.md, `900spec`).
    Scenario {
        calls_from: Some("script:tt-spec"),
        ..scenario("tt-spec")
    },
    scenario("tt-timer"),
    scenario("tt-thread-timer"),
    scenario("tt-counter"),
    scenario("tt-thread-counter"),
    scenario("tt-return"),
    scenario("tt-exit"),
    scenario("tt-child-nested"),
    scenario("def-param"),
    scenario("commit"),
    scenario("cmd-mode"),
    scenario("alias-shell"),
    scenario("alias-git"),
    scenario("exec-fail"),
    scenario("error-escape"),
    scenario("error-unknown-option"),
    scenario("error-die"),
    scenario("warning"),
    scenario("submodule-grep"),
    // The top-level process dies before it reaps its child, so its Normal lines cannot be
    // told apart from the child's (Normal has no depth column); Perf and Event can.
    Scenario {
        skip: &["normal"],
        ..scenario("redact-url")
    },
    scenario("signal-sigpipe"),
    Scenario {
        env: &[
            ("GIT_TRACE2_PARENT_SID", "external-tool-123/step-2"),
            ("GIT_TRACE2_PARENT_NAME", "mytool/sub"),
            ("GIT_TRACE2_BRIEF", "1"),
            ("GIT_TRACE2_PERF_BRIEF", "1"),
            ("GIT_TRACE2_EVENT_BRIEF", "1"),
        ],
        ..scenario("parent-sid")
    },
    Scenario {
        calls_from: Some("status-nesting9.event"),
        env: &[("GIT_TRACE2_EVENT_NESTING", "1")],
        ..scenario("status-nesting1")
    },
    Scenario {
        calls_from: Some("status-nesting9.event"),
        env: &[],
        ..scenario("status-nesting-default")
    },
    Scenario {
        calls_from: Some("status-nesting9.event"),
        env: &[("GIT_TRACE2_EVENT_NESTING", "0")],
        ..scenario("status-nesting0")
    },
    Scenario {
        calls_from: Some("status-nesting9.event"),
        env: &[("GIT_TRACE2_EVENT_NESTING", "9")],
        ..scenario("status-nesting9")
    },
];

fn main() -> ExitCode {
    if let Ok(calls) = std::env::var("TRACE2_REPLAY") {
        drive(Path::new(&calls));
        return ExitCode::SUCCESS;
    }
    let mut runner = Runner::suite("replay");
    for scenario in SCENARIOS {
        runner.check(scenario.name, || run(scenario));
    }
    runner.finish()
}

// === the runner: one child process per scenario ===

fn run(scenario: &Scenario) -> Result<(), String> {
    let dir = process::fresh_dir(&format!("replay-{}", scenario.name))
        .expect("create a temporary directory");
    let calls = match scenario.calls_from {
        Some(script) if script.starts_with("script:") => PathBuf::from(script),
        Some(file) => support::samples_dir().join(file),
        None => support::samples_dir().join(format!("{}.event", scenario.name)),
    };
    let mut cmd = process::clean_command(std::env::current_exe().map_err(|e| e.to_string())?);
    cmd.env("TRACE2_REPLAY", &calls);
    process::home_in(&mut cmd, &dir);
    process::trace_to(&mut cmd, &dir, "ours");
    for (key, value) in scenario.env {
        cmd.env(key, value);
    }
    let status = cmd.output().map_err(|e| e.to_string())?;
    if !status.status.success() {
        return Err(format!("driver failed: {status:?}"));
    }
    let brief = |var: &str| scenario.env.iter().any(|(k, _)| *k == var);
    let mut problems = String::new();
    let mut compared = 0;
    for ext in ["event", "perf", "normal"] {
        let theirs_path = support::samples_dir().join(format!("{}.{ext}", scenario.name));
        if !theirs_path.exists() || scenario.skip.contains(&ext) {
            continue;
        }
        compared += 1;
        let ours = std::fs::read(process::trace_file(&dir, "ours", ext))
            .map_err(|e| format!("{ext}: {e}"))?;
        let ours = String::from_utf8(ours).map_err(|_| format!("{ext}: not UTF-8"))?;
        let theirs = support::sample(&format!("{}.{ext}", scenario.name));
        let (ours, theirs) = match ext {
            "event" => (event_lines(&ours), top_level_event(&theirs)),
            "perf" => {
                let b = brief("GIT_TRACE2_PERF_BRIEF");
                (perf_lines(&ours, b), top_level_perf(&theirs, b))
            }
            _ => {
                let b = brief("GIT_TRACE2_BRIEF");
                (normal_lines(&ours, b), top_level_normal(&theirs, b))
            }
        };
        if let Some(diff) = first_difference(&ours, &theirs) {
            problems.push_str(&format!("  {ext}: {diff}\n"));
        }
    }
    if compared == 0 {
        return Err("no capture to compare with".into());
    }
    let _ = std::fs::remove_dir_all(&dir);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

fn event_lines(text: &str) -> Vec<String> {
    text.lines().map(support::mask_event).collect()
}

/// git's Event lines of the top-level process (the children have longer session ids).
fn top_level_event(text: &str) -> Vec<String> {
    let sid = |line: &str| -> String {
        let v: Value = serde_json::from_str(line).expect("git's line is JSON");
        v["sid"].as_str().unwrap_or_default().to_owned()
    };
    let Some(first) = text.lines().next() else {
        return Vec::new();
    };
    let top = sid(first);
    text.lines()
        .filter(|l| sid(l) == top)
        .map(support::mask_event)
        .collect()
}

fn perf_starts(brief: bool) -> impl Fn(&str) -> bool {
    move |line: &str| {
        if brief {
            line.starts_with('d')
                && line[1..]
                    .split(' ')
                    .next()
                    .is_some_and(|d| d.parse::<u32>().is_ok())
        } else {
            support::starts_with_time(line)
        }
    }
}

fn perf_lines(text: &str, brief: bool) -> Vec<String> {
    support::records(text, perf_starts(brief))
        .iter()
        .map(|l| support::mask_perf(l, brief))
        .collect()
}

/// git's Perf lines of the top-level process: those at the smallest depth.
fn top_level_perf(text: &str, brief: bool) -> Vec<String> {
    let records = support::records(text, perf_starts(brief));
    let depth = |line: &str| -> String {
        let cols: Vec<&str> = line.split(" | ").collect();
        cols[usize::from(!brief)].to_owned()
    };
    let Some(top) = records.first().map(|l| depth(l)) else {
        return Vec::new();
    };
    records
        .iter()
        .filter(|l| depth(l) == top)
        .map(|l| support::mask_perf(l, brief))
        .collect()
}

fn normal_lines(text: &str, brief: bool) -> Vec<String> {
    support::records(text, |l| brief || support::starts_with_time(l))
        .iter()
        .map(|l| support::mask_normal(l, brief))
        .collect()
}

/// git's Normal lines of the top-level process. Normal has no depth column: lines
/// written while one of our children runs (between its `child_start[k]` and its
/// `child_exit[k]`/`child_ready[k]`) are the child's.
fn top_level_normal(text: &str, brief: bool) -> Vec<String> {
    // Children nest: a traced child may itself start children with the same ids.
    let mut open: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for line in support::records(text, |l| brief || support::starts_with_time(l)) {
        let payload = support::mask_normal(&line, brief);
        let id = |prefix: &str| {
            payload
                .strip_prefix(prefix)
                .and_then(|r| r.split(']').next())
                .map(str::to_owned)
        };
        if let Some(started) = id("child_start[") {
            if open.is_empty() {
                out.push(payload.clone());
            }
            open.push(started);
            continue;
        }
        if let Some(closing) = id("child_exit[").or_else(|| id("child_ready["))
            && open.last() == Some(&closing)
        {
            open.pop();
            if open.is_empty() {
                out.push(payload);
            }
            continue;
        }
        if open.is_empty() {
            out.push(payload);
        }
    }
    out
}

// === the driver: makes the calls behind a capture ===

/// An open region (kept open until it is dropped): a span, or `api::region_enter` where the capture's leave line differs
/// from its enter line (git lets a leave carry another message; a span cannot).
#[allow(dead_code)]
enum Region {
    Span(EnteredSpan),
    Api,
}

/// Per-thread replay state: open regions and running children.
#[derive(Default)]
struct Replayer {
    regions: Vec<Region>,
    children: HashMap<u64, api::ChildToken>,
}

/// For each `region_enter` line (by index), whether its `region_leave` names the same
/// category, label, message and repository.
fn leaves_match(lines: &[Value]) -> HashMap<usize, bool> {
    let key = |v: &Value| {
        (
            v["category"].clone(),
            v["label"].clone(),
            v["msg"].clone(),
            v["repo"].clone(),
        )
    };
    let mut stacks: HashMap<String, Vec<usize>> = HashMap::new();
    let mut out = HashMap::new();
    for (i, v) in lines.iter().enumerate() {
        let thread = format!("{}{}", v["sid"], v["thread"]);
        match v["event"].as_str() {
            Some("region_enter") => stacks.entry(thread).or_default().push(i),
            Some("region_leave") => {
                if let Some(enter) = stacks.entry(thread).or_default().pop() {
                    out.insert(enter, key(&lines[enter]) == key(v));
                }
            }
            _ => {}
        }
    }
    out
}

fn drive(calls: &Path) {
    tracing_subscriber::registry()
        .with(
            tracing_trace2::Trace2::from_env()
                .with_exe_version("replay")
                // Git's captures: threads are announced only where git announces them.
                .with_thread_announcement(false)
                .layer(),
        )
        .init();
    if calls == Path::new("script:tt-spec") {
        tt_spec();
        return;
    }
    let text =
        String::from_utf8_lossy(&std::fs::read(calls).expect("read the capture")).into_owned();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("capture line is JSON"))
        .collect();
    let top = lines[0]["sid"].clone();
    let matching = leaves_match(&lines);
    let mut main = Replayer::default();
    let mut workers: HashMap<String, Worker> = HashMap::new();
    let mut raw_lines = text.lines();
    for (i, v) in lines.iter().enumerate() {
        let raw = raw_lines.next().unwrap_or_default();
        if v["sid"] != top {
            continue;
        }
        let as_span = matching.get(&i).copied().unwrap_or(true);
        let thread = v["thread"].as_str().unwrap_or("main");
        if thread == "main" {
            main.apply(raw, as_span);
        } else {
            let worker = workers
                .entry(thread.to_owned())
                .or_insert_with(Worker::spawn);
            worker.call(raw.to_owned(), as_span);
            if v["event"] == "thread_exit"
                && let Some(w) = workers.remove(thread)
            {
                w.join();
            }
        }
    }
    // Regions still open at exit stay open: the process ends here, as git's did.
    std::mem::forget(main);
}

/// A replay thread: runs the calls of one Trace2 thread, one at a time.
struct Worker {
    calls: mpsc::Sender<(String, bool)>,
    done: mpsc::Receiver<()>,
    handle: std::thread::JoinHandle<()>,
}

impl Worker {
    fn spawn() -> Worker {
        let (calls, rx) = mpsc::channel::<(String, bool)>();
        let (tx, done) = mpsc::channel();
        let handle = std::thread::Builder::new()
            .spawn(move || {
                let mut replayer = Replayer::default();
                for (raw, as_span) in rx {
                    replayer.apply(&raw, as_span);
                    let _ = tx.send(());
                }
            })
            .expect("spawn a replay thread");
        Worker {
            calls,
            done,
            handle,
        }
    }

    fn call(&self, raw: String, as_span: bool) {
        self.calls
            .send((raw, as_span))
            .expect("replay thread alive");
        self.done.recv().expect("replay thread answered");
    }

    fn join(self) {
        drop(self.calls);
        let _ = self.handle.join();
    }
}

impl Replayer {
    /// Makes the call behind one of git's Event lines, read back into a record by the
    /// Event reader.
    fn apply(&mut self, raw: &str, as_span: bool) {
        let line = read_line(raw).unwrap_or_else(|e| panic!("{e}: {raw}"));
        let mut list = Vec::new();
        let record = line
            .record(&mut list)
            .unwrap_or_else(|e| panic!("{e}: {raw}"));
        match record.event {
            Trace2Event::Version { exe } => api::version(exe),
            Trace2Event::Start { argv } => api::start(argv),
            Trace2Event::CmdAncestry { ancestry } => api::cmd_ancestry(ancestry),
            Trace2Event::CmdPath { path } => api::cmd_path(path),
            Trace2Event::CmdName { name, .. } => api::cmd_name(name),
            Trace2Event::CmdMode { name } => api::cmd_mode(name),
            Trace2Event::Alias { alias, argv } => api::alias(alias, argv),
            Trace2Event::DefParam {
                scope,
                param,
                value,
            } => api::def_param(scope, param, value),
            Trace2Event::DefRepo { repo, worktree } => api::def_repo(repo, worktree),
            Trace2Event::RegionEnter { region, .. } if as_span => {
                let span = tracing::info_span!(
                    "region",
                    trace2.category = region.category.unwrap_or(""),
                    trace2.label = region.label.unwrap_or(""),
                    trace2.msg = region.msg,
                    trace2.repo = region.repo
                );
                self.regions.push(Region::Span(span.entered()));
            }
            Trace2Event::RegionEnter { region, .. } => {
                let (category, label) = (region.category.unwrap_or(""), region.label.unwrap_or(""));
                api::region_enter(category, label, region.msg, region.repo);
                self.regions.push(Region::Api);
            }
            Trace2Event::RegionLeave { region, .. } => {
                if let Some(Region::Api) = self.regions.pop() {
                    let (category, label) =
                        (region.category.unwrap_or(""), region.label.unwrap_or(""));
                    api::region_leave(category, label, region.msg, region.repo);
                }
            }
            Trace2Event::Data {
                repo,
                category,
                key,
                value,
                ..
            } => info!(category, key, value, repo),
            Trace2Event::DataJson {
                repo,
                category,
                key,
                json,
                ..
            } => info!(category, key, json, repo),
            // A message-only event is a printf; git's captures also have printf lines
            // without a file or a message, which only the explicit form can express.
            Trace2Event::Printf { msg } => match (record.callsite.file, msg) {
                (Some(_), Some(msg)) => info!("{msg}"),
                (file, msg) => api::printf_at(file, record.callsite.line, msg.unwrap_or("")),
            },
            Trace2Event::Error { msg, fmt } => api::error(msg.unwrap_or(""), fmt.unwrap_or("")),
            Trace2Event::ChildStart(child) => {
                let mut start = api::ChildStart::new(child.class, child.argv)
                    .with_cd(child.cd)
                    .with_shell(child.use_shell)
                    .with_git(child.is_git);
                if let Some(hook_name) = child.hook_name {
                    start = start.with_hook_name(hook_name);
                }
                let token = api::child_start(&start);
                self.children.insert(child.child_id, token);
            }
            Trace2Event::ChildExit {
                child_id,
                pid,
                code,
                ..
            } => {
                if let Some(token) = self.children.remove(&child_id) {
                    api::child_exit(&token, pid, code);
                }
            }
            Trace2Event::ChildReady {
                child_id,
                pid,
                ready,
                ..
            } => {
                if let Some(token) = self.children.remove(&child_id) {
                    api::child_ready(&token, pid, ready);
                }
            }
            Trace2Event::Exec { exe, argv, .. } => {
                api::exec(exe, argv);
            }
            Trace2Event::ExecResult { exec_id, code, .. } => api::exec_result(exec_id, code),
            Trace2Event::ThreadStart => {
                let name = record.thread;
                api::thread_start(name.split_once(':').map_or(name, |(_, base)| base));
            }
            Trace2Event::ThreadExit { .. } => api::thread_exit(),
            Trace2Event::Timer { per_thread, timer } => api::timer(
                per_thread,
                timer.category,
                timer.name,
                timer.intervals,
                timer.total_ns,
                timer.min_ns,
                timer.max_ns,
            ),
            Trace2Event::Counter {
                per_thread,
                category,
                name,
                value,
            } => api::counter(per_thread, category, name, value),
            Trace2Event::Exit { code } => {
                api::exit(code);
            }
            Trace2Event::Atexit { .. } => api::atexit(),
            Trace2Event::Signal { signo } => api::signal(signo),
            // Written by the layer itself after `version`.
            Trace2Event::TooManyFiles => {}
        }
    }
}

/// The calls of git's `test-tool trace2 900spec` (samples/README.md), made the way a Rust
/// program makes them: spans for regions, `info!` for data and messages.
fn tt_spec() {
    api::version("2.47.3");
    api::start(&["/tmp/gitsrc/t/helper/test-tool", "trace2", "900spec"]);
    api::cmd_ancestry(&[
        "cap.sh",
        "bash",
        "bash",
        "bash",
        "memfd:sealed-91",
        "process_api",
    ]);
    api::cmd_name("trace2");
    api::cmd_mode("spec-mode");
    info!("hello printf {}", 42);
    api::printf_at(
        Some("a/very/long/directory/name/for/testing/file.c"),
        12345,
        "long file:line",
    );
    api::printf_at(Some("exactly/28chars/file.c"), 12345, "28 char file:line");
    api::printf_at(None, 0, "null file");
    let mut levels = Vec::new();
    for depth in 1..=5 {
        let msg = format!("depth={depth}");
        let span =
            tracing::info_span!("level", trace2.category = "spec", trace2.msg = msg.as_str());
        levels.push(span.entered());
        info!(category = "spec", key = "depth", value = depth);
    }
    info!("printf inside 5 regions");
    while levels.pop().is_some() {}
    tracing::info_span!("unnamed", trace2.category = "", trace2.label = "").in_scope(|| {});
    tracing::info_span!(
        "only-msg",
        trace2.category = "spec",
        trace2.label = "",
        trace2.msg = "only-msg"
    )
    .in_scope(|| {});
    tracing::info_span!(
        "long-category",
        trace2.category = "a-category-longer-than-twelve",
        trace2.repo = 0
    )
    .in_scope(|| {});
    info!(
        category = "spec",
        key = "json",
        json = r#"{"s":"str\"\\/\u0001","i":-7,"d":0.667,"d_default":1.500000,"b":true,"n":null,"arr":[1,"two"]}"#,
        repo = 0
    );
    for name in ["a-really-long-thread-base-name", "short"] {
        std::thread::spawn(move || {
            api::thread_start(name);
            tracing::info_span!("in-thread", trace2.category = "spec").in_scope(|| {
                info!(
                    category = "spec",
                    key = "thread-key",
                    value = "thread-value"
                );
            });
            api::thread_exit();
        })
        .join()
        .expect("thread");
    }
    std::thread::Builder::new()
        .spawn(|| info!(category = "spec", key = "no-thread-start", value = "x"))
        .expect("spawn")
        .join()
        .expect("thread");
    api::thread_start("main-misuse");
    api::thread_exit();
    let shell = api::child_start(
        &api::ChildStart::new("spec-class", &["echo child with 'quote'; exit 3"])
            .with_cd(Some("/tmp"))
            .with_shell(true),
    );
    api::child_exit(&shell, 15835, 3);
    let git = api::child_start(&api::ChildStart::new("?", &["version"]).with_git(true));
    api::child_exit(&git, 15836, 0);
    let bg = api::child_start(&api::ChildStart::new("bg", &["sleep", "1"]));
    api::child_ready(&bg, 15837, "ready");
    let outer = tracing::info_span!("outer-open", trace2.category = "spec").entered();
    let inner = tracing::info_span!("inner-open", trace2.category = "spec").entered();
    api::exit(0);
    api::atexit();
    // The process ends with both regions open, as git's did.
    std::mem::forget((outer, inner));
}
