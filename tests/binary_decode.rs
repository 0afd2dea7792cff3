//! The binary target beside the three text targets, in real processes: the conformance
//! program (git's `test-tool trace2` verbs written with our public API) runs with
//! `GIT_TRACE2`, `GIT_TRACE2_PERF`, `GIT_TRACE2_EVENT` and `TRACING_TRACE2_BINARY` all
//! set; the binary stream, decoded with the writer's own settings, must be byte for byte
//! the three text files. The verbs here are single-threaded, so the line order is exact
//! too. Brief modes and the Event nesting limit travel in the stream's header: a decode
//! without options reproduces what the text targets wrote with theirs.

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

fn main() -> ExitCode {
    if std::env::var_os(PROGRAM_ENV).is_some() {
        let code = program::main();
        std::process::exit(i32::from(code != ExitCode::SUCCESS));
    }
    let mut runner = Runner::suite("binary_decode");
    for &(name, args, env) in CASES {
        runner.check(name, || run(name, args, env));
    }
    runner.finish()
}

fn run(name: &str, args: &[&str], env: &[(&str, &str)]) -> Result<(), String> {
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
        if got != want {
            return Err(first_difference(ext, &want, &got));
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
