//! Replays the Trace2 calls behind git's own captures through our public API and
//! compares our three streams with git's, line by line.
//!
//! This test binary has its own `main` (no libtest harness) because Trace2 names the
//! process's main thread `main`: each scenario runs in a fresh child process (this same
//! binary, with `TRACE2_REPLAY` set) whose main thread makes the calls, with the
//! `GIT_TRACE2*` variables pointing at files, exactly as a real program would run. The
//! calls are read from the capture's Event stream (top-level process only): spans for
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
            main.apply(v, raw, as_span);
        } else {
            let worker = workers
                .entry(thread.to_owned())
                .or_insert_with(Worker::spawn);
            worker.call(v.clone(), raw.to_owned(), as_span);
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
    calls: mpsc::Sender<(Value, String, bool)>,
    done: mpsc::Receiver<()>,
    handle: std::thread::JoinHandle<()>,
}

impl Worker {
    fn spawn() -> Worker {
        let (calls, rx) = mpsc::channel::<(Value, String, bool)>();
        let (tx, done) = mpsc::channel();
        let handle = std::thread::Builder::new()
            .spawn(move || {
                let mut replayer = Replayer::default();
                for (v, raw, as_span) in rx {
                    replayer.apply(&v, &raw, as_span);
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

    fn call(&self, v: Value, raw: String, as_span: bool) {
        self.calls
            .send((v, raw, as_span))
            .expect("replay thread alive");
        self.done.recv().expect("replay thread answered");
    }

    fn join(self) {
        drop(self.calls);
        let _ = self.handle.join();
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|s| s.as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The raw text of the last key's value in a compact JSON line (`data_json` values keep
/// git's key order this way).
fn raw_value(line: &str) -> &str {
    let start = line.rfind("\"value\":").expect("data_json has a value") + "\"value\":".len();
    &line[start..line.len() - 1]
}

impl Replayer {
    fn apply(&mut self, v: &Value, raw: &str, as_span: bool) {
        let s = |key: &str| v[key].as_str();
        let text = |key: &str| v[key].as_str().unwrap_or_default();
        let int = |key: &str| v[key].as_i64().unwrap_or_default();
        let secs_to_ns = |key: &str| (v[key].as_f64().unwrap_or_default() * 1e9).round() as u64;
        let repo = v.get("repo").and_then(Value::as_i64);
        match text("event") {
            "version" => api::version(text("exe")),
            "start" => api::start(&strings(&v["argv"])),
            "cmd_ancestry" => api::cmd_ancestry(&strings(&v["ancestry"])),
            "cmd_path" => api::cmd_path(text("path")),
            "cmd_name" => api::cmd_name(text("name")),
            "cmd_mode" => api::cmd_mode(text("name")),
            "alias" => api::alias(text("alias"), &strings(&v["argv"])),
            "def_param" => api::def_param(text("scope"), text("param"), s("value")),
            "def_repo" => api::def_repo(int("repo"), text("worktree")),
            "region_enter" if as_span => {
                let span = tracing::info_span!(
                    "region",
                    trace2.category = s("category").unwrap_or(""),
                    trace2.label = s("label").unwrap_or(""),
                    trace2.msg = s("msg"),
                    trace2.repo = repo
                );
                self.regions.push(Region::Span(span.entered()));
            }
            "region_enter" | "region_leave" => {
                let (category, label) = (text("category"), text("label"));
                if text("event") == "region_enter" {
                    api::region_enter(category, label, s("msg"), repo);
                    self.regions.push(Region::Api);
                } else if let Some(Region::Api) = self.regions.pop() {
                    api::region_leave(category, label, s("msg"), repo);
                }
            }
            "data" => info!(
                category = text("category"),
                key = text("key"),
                value = text("value"),
                repo
            ),
            "data_json" => info!(
                category = text("category"),
                key = text("key"),
                json = raw_value(raw),
                repo
            ),
            // A message-only event is a printf; git's captures also have printf lines
            // without a file or a message, which only the explicit form can express.
            "printf" => match (s("file"), s("msg")) {
                (Some(_), Some(msg)) => info!("{msg}"),
                (file, msg) => api::printf_at(file, int("line") as u32, msg.unwrap_or("")),
            },
            "error" => api::error(text("msg"), text("fmt")),
            "child_start" => {
                let mut argv = strings(&v["argv"]);
                let is_git = argv.first().is_some_and(|a| a == "git");
                if is_git {
                    argv.remove(0);
                }
                let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
                let mut child = api::ChildStart::new(text("child_class"), &argv)
                    .with_cd(s("cd"))
                    .with_shell(v["use_shell"].as_bool().unwrap_or_default())
                    .with_git(is_git);
                if let Some(hook_name) = s("hook_name") {
                    child = child.with_hook_name(hook_name);
                }
                let token = api::child_start(&child);
                self.children.insert(int("child_id") as u64, token);
            }
            "child_exit" | "child_ready" => {
                let Some(token) = self.children.remove(&(int("child_id") as u64)) else {
                    return;
                };
                if text("event") == "child_exit" {
                    api::child_exit(&token, int("pid"), int("code"));
                } else {
                    api::child_ready(&token, int("pid"), text("ready"));
                }
            }
            "exec" => {
                api::exec(s("exe"), &strings(&v["argv"]));
            }
            "exec_result" => api::exec_result(int("exec_id") as u64, int("code")),
            "thread_start" => {
                let name = text("thread");
                api::thread_start(name.split_once(':').map_or(name, |(_, base)| base));
            }
            "thread_exit" => api::thread_exit(),
            "timer" | "th_timer" => api::timer(
                text("event") == "th_timer",
                text("category"),
                text("name"),
                int("intervals") as u64,
                secs_to_ns("t_total"),
                secs_to_ns("t_min"),
                secs_to_ns("t_max"),
            ),
            "counter" | "th_counter" => api::counter(
                text("event") == "th_counter",
                text("category"),
                text("name"),
                int("count") as u64,
            ),
            "exit" => {
                api::exit(int("code") as i32);
            }
            "atexit" => api::atexit(),
            "signal" => api::signal(int("signo") as i32),
            // Written by the layer itself after `version`.
            "too_many_files" => {}
            other => panic!("no replay for event {other:?}"),
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
