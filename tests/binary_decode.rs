//! The binary target beside the three text targets, in real processes: the conformance
//! program (git's `test-tool trace2` verbs written with our public API) runs with
//! `GIT_TRACE2`, `GIT_TRACE2_PERF`, `GIT_TRACE2_EVENT` and `TRACING_TRACE2_BINARY` all
//! set; the binary stream, decoded with the writer's own settings, must be byte for byte
//! the three text files for the single-threaded verbs. For the verbs that run threads,
//! the claim is the one `docs/binary-format.md` §6 makes: each thread's lines byte for
//! byte and in its order, the same lines in all, and the lines of different threads
//! merged by time (the text targets have them in the order the threads wrote, which the
//! binary stream does not record). Brief modes and the Event nesting limit travel in the
//! stream's header: a decode without options reproduces what the text targets wrote with
//! theirs.

#[path = "../examples/conformance.rs"]
mod program;
#[path = "support/mod.rs"]
mod support;

use std::process::ExitCode;

use support::process;
use support::runner::Runner;
use tracing_trace2_binary::{TextFormat, TextOptions, decode_to_text};

const PROGRAM_ENV: &str = "TRACE2_BINARY_DECODE_PROGRAM";

/// A case: its name, the program's arguments, extra environment.
type Case = (
    &'static str,
    &'static [&'static str],
    &'static [(&'static str, &'static str)],
);

/// Single-threaded verbs of the conformance program, with the settings they run under.
#[rustfmt::skip]
const CASES: &[Case] = &[
    ("return", &["001return", "3"], &[]),
    ("exit", &["002exit", "300"], &[]),
    ("errors", &["003error", "first error", "second\nline"], &[]),
    ("data", &["006data", "cat1", "key1", "value one", "category-longer-than-12", "k\"2", "v\n2"], &[]),
    ("bug", &["007bug"], &[]),
    ("timer", &["100timer", "3", "20"], &[]),
    ("counter", &["200counter", "1", "2", "39"], &[]),
    ("redact", &["303redact_def_param", "url", "https://user:pwd@host/"], &[]),
    ("brief", &["006data", "c", "k", "v"], &[
        ("GIT_TRACE2_BRIEF", "1"), ("GIT_TRACE2_PERF_BRIEF", "1"), ("GIT_TRACE2_EVENT_BRIEF", "1"),
    ]),
    ("nesting", &["100timer", "2", "5"], &[("GIT_TRACE2_EVENT_NESTING", "1")]),
];

/// Verbs of the conformance program that run threads (`<…> <threads>`).
#[rustfmt::skip]
const THREADED_CASES: &[Case] = &[
    ("threads-timer", &["101timer", "5", "1", "8"], &[]),
    ("threads-counter", &["201counter", "1", "2", "8"], &[]),
];

fn main() -> ExitCode {
    if std::env::var_os(PROGRAM_ENV).is_some() {
        let code = program::main();
        std::process::exit(i32::from(code != ExitCode::SUCCESS));
    }
    let mut runner = Runner::suite("binary_decode");
    for &(name, args, env) in CASES {
        runner.check(name, || run(name, args, env, Compare::Exact));
    }
    for &(name, args, env) in THREADED_CASES {
        runner.check(name, || run(name, args, env, Compare::PerThread));
    }
    runner.finish()
}

/// How a decode is held against its text target.
#[derive(Clone, Copy)]
enum Compare {
    /// Byte for byte.
    Exact,
    /// Byte for byte per thread, merged by time across threads.
    PerThread,
}

fn run(name: &str, args: &[&str], env: &[(&str, &str)], compare: Compare) -> Result<(), String> {
    let dir = process::fresh_dir(&format!("binary-decode-{name}")).map_err(|e| e.to_string())?;
    let path = |ext: &str| dir.join(format!("trace.{ext}"));
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = process::clean_command(&me);
    process::without_config(&mut cmd);
    let out = cmd
        .arg("trace2")
        .args(args)
        .env(PROGRAM_ENV, "1")
        .env("GIT_TRACE2", path("normal"))
        .env("GIT_TRACE2_PERF", path("perf"))
        .env("GIT_TRACE2_EVENT", path("event"))
        .env("TRACING_TRACE2_BINARY", path("t2b"))
        .envs(env.iter().copied())
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.code().is_none() {
        return Err(format!("killed: {:?}", out.status));
    }
    let binary = std::fs::read(path("t2b")).map_err(|e| format!("t2b: {e}"))?;
    for (ext, format) in [
        ("normal", TextFormat::Normal),
        ("perf", TextFormat::Perf),
        ("event", TextFormat::Event),
    ] {
        let want = std::fs::read(path(ext)).map_err(|e| format!("{ext}: {e}"))?;
        let mut got = Vec::new();
        let report = decode_to_text(&binary[..], &mut got, &TextOptions::new(format))
            .map_err(|e| format!("{ext}: decode: {e}"))?;
        if !report.is_complete() {
            return Err(format!("{ext}: incomplete stream: {report}"));
        }
        if want.is_empty() {
            return Err(format!("{ext}: the text target wrote nothing"));
        }
        match compare {
            Compare::Exact if got != want => return Err(first_difference(ext, &want, &got)),
            Compare::Exact => {}
            Compare::PerThread => {
                per_thread(format, &want, &got).map_err(|e| format!("{ext}: {e}"))?
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn first_difference(ext: &str, want: &[u8], got: &[u8]) -> String {
    let (want, got) = (String::from_utf8_lossy(want), String::from_utf8_lossy(got));
    for (i, (w, g)) in want.lines().zip(got.lines()).enumerate() {
        if w != g {
            return format!("{ext}: line {}:\n  text:    {w}\n  decoded: {g}", i + 1);
        }
    }
    format!(
        "{ext}: {} text lines, {} decoded",
        want.lines().count(),
        got.lines().count()
    )
}

/// The thread and the time of a line, as far as the format shows them (Normal has no thread
/// column; its lines are all put on one).
fn thread_and_time(format: TextFormat, line: &str) -> Result<(String, String), String> {
    match format {
        TextFormat::Event => {
            let v: serde_json::Value =
                serde_json::from_str(line).map_err(|e| format!("{e}: {line}"))?;
            let field = |k: &str| {
                v[k].as_str()
                    .map(str::to_owned)
                    .ok_or(format!("no {k}: {line}"))
            };
            Ok((field("thread")?, field("time")?))
        }
        _ => {
            let time = line.get(..15).ok_or(format!("no time: {line}"))?.to_owned();
            let thread = match format {
                TextFormat::Perf => line.split('|').nth(2).unwrap_or_default().trim().to_owned(),
                _ => String::new(),
            };
            Ok((thread, time))
        }
    }
}

/// `got` (decoded) against `want` (the text target) for a process with threads: the same
/// lines; each thread's lines the same and in the same order where the format names the
/// thread (Perf, Event); and `got`'s lines in time order.
fn per_thread(format: TextFormat, want: &[u8], got: &[u8]) -> Result<(), String> {
    let (want, got) = (String::from_utf8_lossy(want), String::from_utf8_lossy(got));
    let split = |text: &str| -> Result<Vec<(String, String, String)>, String> {
        text.lines()
            .map(|l| thread_and_time(format, l).map(|(th, t)| (th, t, l.to_owned())))
            .collect()
    };
    let (want, got) = (split(&want)?, split(&got)?);
    let threads = |lines: &[(String, String, String)]| {
        let mut by: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for (thread, _, line) in lines {
            by.entry(thread.clone()).or_default().push(line.clone());
        }
        by
    };
    fn sorted(lines: &[(String, String, String)]) -> Vec<&String> {
        let mut all: Vec<&String> = lines.iter().map(|l| &l.2).collect();
        all.sort();
        all
    }
    if sorted(&want) != sorted(&got) {
        return Err(format!(
            "{} text lines, {} decoded, not the same",
            want.len(),
            got.len()
        ));
    }
    let (want_threads, got_threads) = (threads(&want), threads(&got));
    if format != TextFormat::Normal && want_threads.len() < 9 {
        return Err(format!(
            "{} threads wrote, expected main and 8",
            want_threads.len()
        ));
    }
    // Normal has no thread column, so its lines cannot be told apart by thread: the text
    // target has them in the order the threads wrote, and a thread can take its time before
    // another yet write after it, so that order is not time order and the decoded one is.
    // Each thread's order is held in Perf and Event, which name the thread.
    let named_threads = want_threads.iter().filter(|_| format != TextFormat::Normal);
    for (thread, lines) in named_threads {
        if got_threads.get(thread) != Some(lines) {
            return Err(format!(
                "thread {thread:?}: its lines differ or are out of order"
            ));
        }
    }
    for pair in got.windows(2) {
        let (before, after) = (&pair[0].1, &pair[1].1);
        // A time of day goes back at midnight; an Event time never does.
        let midnight =
            format != TextFormat::Event && before.starts_with("23") && after.starts_with("00");
        if after < before && !midnight {
            return Err(format!(
                "decoded out of time order:\n  {}\n  {}",
                pair[0].2, pair[1].2
            ));
        }
    }
    Ok(())
}
