//! The command line as a user meets it: help, usage errors (exit 2), and damaged or foreign input
//! (exit 1, one line per file on stderr naming what was skipped, everything intact still used,
//! never a panic).

mod common;

use std::fs;
use std::path::Path;

use common::{run_trace2, stderr, stdout, trace2};

/// git's captures: `shared/spec/samples` beside the repository, or the folder `TRACE2_SAMPLES` names.
fn sample(name: &str) -> String {
    let dir = std::env::var("TRACE2_SAMPLES").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/spec/samples").to_owned()
    });
    format!("{dir}/{name}")
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn assert_no_panic(out: &std::process::Output) {
    let err = stderr(out);
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.status.code().is_some(), "killed by a signal: {out:?}");
}

#[test]
fn help_names_the_subcommands_and_exit_codes() {
    let out = run_trace2(&["--help"]);
    assert!(out.status.success());
    let help = stdout(&out);
    for word in ["decode", "summary", "export", "Exit status"] {
        assert!(help.contains(word), "{help}");
    }
    let out = run_trace2(&["export", "--help"]);
    assert!(
        stdout(&out).contains("--format <FORMAT>"),
        "{}",
        stdout(&out)
    );
    assert!(run_trace2(&["--version"]).status.success());
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &["summary"][..],
        &["frobnicate", "x"],
        &["export", "--format", "svg", "-o", "/tmp/x", "y"],
        &["export", "--format", "chrome", "y"],
        // `decode` needs a format.
        &["decode", "x.t2b"],
    ] {
        let out = run_trace2(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).is_empty());
    }
}

#[test]
fn a_clean_capture_exits_0_and_writes_nothing_to_stderr() {
    let out = run_trace2(&["summary", &sample("status.event")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(out.stderr.is_empty());
    assert!(stdout(&out).contains("git:status"));
}

#[test]
fn damaged_lines_are_reported_and_the_rest_summarised() {
    let dir = tempfile::tempdir().unwrap();
    let damaged = dir.path().join("damaged.event");
    let mut text = fs::read_to_string(sample("commit.event")).unwrap();
    // A foreign JSON line, a line of garbage, and a last line cut short.
    let lines: Vec<&str> = text.lines().collect();
    let total = lines.len();
    let mut mangled: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    mangled.insert(3, r#"{"level":"info","message":"not trace2"}"#.to_owned());
    mangled.insert(7, "garbage".to_owned());
    text = mangled.join("\n");
    text.push('\n');
    text.push_str(
        r#"{"event":"atexit","sid":"20261121T232200.038465Z-H0a7c9cdf-P00002cdd","thread":"ma"#,
    );
    fs::write(&damaged, text).unwrap();

    let out = run_trace2(&["summary", path(&damaged)]);
    assert_no_panic(&out);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "one line per file: {err}");
    assert!(err.starts_with(&format!("trace2: {}: skipped 2 of {} lines (line 4: not a Trace2 event (missing field `event`); line 8: not JSON", path(&damaged), total + 3)), "{err}");
    assert!(
        err.contains(&format!("last line {} is cut short, skipped", total + 3)),
        "{err}"
    );
    assert!(err.contains(&format!("{total} events used")), "{err}");
    // Everything intact is still there.
    let summary = stdout(&out);
    for name in [
        "git:commit",
        "git:rev-parse",
        "git:maintenance",
        "hook/pre-commit",
    ] {
        assert!(summary.contains(name), "{summary}");
    }

    let chrome = dir.path().join("out.json");
    let out = run_trace2(&[
        "export",
        "--format",
        "chrome",
        "-o",
        path(&chrome),
        path(&damaged),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out).lines().count(), 1);
    let doc: serde_json::Value = serde_json::from_slice(&fs::read(&chrome).unwrap()).unwrap();
    common::assert_chrome_nests(&doc);
}

#[test]
fn empty_binary_missing_and_random_inputs_are_named_and_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.event");
    fs::write(&empty, "").unwrap();
    let binary = dir.path().join("trace.t2b");
    fs::write(&binary, [0x89, b'T', b'2', 0x01, 0, 0, 0, 0, 1, 0]).unwrap();
    let random = dir.path().join("random.bin");
    let noise: Vec<u8> = (0u32..50_000)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    fs::write(&random, noise).unwrap();
    let missing = dir.path().join("missing.event");
    let good = sample("version.event");

    for command in [
        &["summary"][..],
        &["export", "--format", "chrome", "-o", "-"],
    ] {
        let mut args: Vec<&str> = command.to_vec();
        args.extend([
            path(&empty),
            path(&binary),
            path(&random),
            path(&missing),
            &good,
        ]);
        let out = run_trace2(&args);
        assert_no_panic(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = stderr(&out);
        let line_about = |file: &Path| {
            let lines: Vec<&str> = err.lines().filter(|l| l.contains(path(file))).collect();
            assert_eq!(lines.len(), 1, "{err}");
            lines[0].to_owned()
        };
        assert!(
            line_about(&empty).ends_with("empty file, no Trace2 events"),
            "{err}"
        );
        assert!(
            line_about(&binary).contains("binary trace damaged"),
            "{err}"
        );
        assert!(line_about(&random).contains("not JSON"), "{err}");
        // Windows' own text for the error: "File not found."
        let not_found = if cfg!(windows) {
            "File not found"
        } else {
            "No such file"
        };
        assert!(line_about(&missing).contains(not_found), "{err}");
        assert_eq!(err.lines().count(), 4, "{err}");
        assert!(stdout(&out).contains("git:version") || stdout(&out).contains("\"git:version\""));
    }
}

#[test]
fn standard_input_and_output() {
    let input = fs::File::open(sample("commit.event")).unwrap();
    let out = trace2()
        .args(["export", "--format", "chrome", "-o", "-", "-"])
        .stdin(input)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(common::assert_chrome_nests(&doc) > 10);
}

#[test]
fn an_unwritable_output_is_an_error() {
    let out = run_trace2(&[
        "export",
        "--format",
        "chrome",
        "-o",
        "/nonexistent/dir/out.json",
        &sample("version.event"),
    ]);
    assert_no_panic(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("/nonexistent/dir/out.json"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn control_characters_in_file_names_and_messages_are_shown_not_sent() {
    let dir = tempfile::tempdir().unwrap();
    // Windows refuses control characters in file names: there only the message carries them.
    let name = if cfg!(windows) {
        "bad.event"
    } else {
        "bad\u{1b}[2J.event"
    };
    let shown = if cfg!(windows) {
        "bad.event"
    } else {
        "bad\\e[2J.event"
    };
    let file = dir.path().join(name);
    fs::write(&file, "not json \u{1b}]0;title\u{7}\n").unwrap();
    let out = run_trace2(&["summary", path(&file)]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(!err.contains('\u{1b}') && !err.contains('\u{7}'), "{err:?}");
    assert!(err.contains(shown), "{err}");
    let out = run_trace2(&["decode", "--format", "normal", path(&file)]);
    let err = stderr(&out);
    assert!(!err.contains('\u{1b}'), "{err:?}");
    assert!(
        err.contains(&format!("{shown}: not a binary trace")),
        "{err}"
    );
}

/// A kind the tool does not know (a newer git's) and a key its kind does not have are
/// passed along and named on stderr, not dropped silently; nothing was lost, so the exit
/// status is 0 and the summary is the one of the same lines without them.
#[test]
fn unknown_kinds_and_keys_are_reported_and_passed_along() {
    let dir = tempfile::tempdir().unwrap();
    let text = fs::read_to_string(sample("status.event")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let sid = lines[0]
        .split(r#""sid":""#)
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap();
    let mut newer: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    newer.insert(
        2,
        format!(r#"{{"event":"progress","sid":"{sid}","thread":"main","title":"t","count":3}}"#),
    );
    let leave = newer
        .iter()
        .position(|l| l.contains(r#""event":"region_leave""#))
        .unwrap();
    newer[leave] = newer[leave].replacen(r#""nesting""#, r#""newer":[1],"nesting""#, 1);
    let file = dir.path().join("newer.event");
    fs::write(&file, newer.join("\n") + "\n").unwrap();

    let out = run_trace2(&["summary", path(&file)]);
    assert_no_panic(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("1 line of a kind this tool does not know, passed along")
            && err.contains("line 3: kind `progress`")
            && err.contains(&format!("line {}: `newer` in region_leave", leave + 1)),
        "{err}"
    );
    let plain = run_trace2(&["summary", &sample("status.event")]);
    assert_eq!(stdout(&out), stdout(&plain));
}

#[test]
fn a_killed_process_cut_last_line_is_the_end_of_its_trace() {
    let dir = tempfile::tempdir().unwrap();
    let killed = dir.path().join("killed.event");
    let sid = "20261121T232200.038465Z-H0a7c9cdf-P00002cdd";
    let line = |rest: &str| {
        format!(
            r#"{{"event":{rest},"sid":"{sid}","thread":"main","time":"2026-11-21T23:22:00.038465Z","file":"git.c","line":1"#
        )
    };
    let text = format!(
        "{}{}\n{}{}\n{}",
        line(r#""version""#),
        r#","evt":"4","exe":"2.47.3"}"#,
        line(r#""start""#),
        r#","t_abs":0.001,"argv":["git","status"]}"#,
        // Killed while it wrote this one.
        &line(r#""printf""#)[..60],
    );
    fs::write(&killed, text).unwrap();
    let out = run_trace2(&["summary", path(&killed)]);
    assert_no_panic(&out);
    // Said, but not damage: the exit status is 0.
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("last line 3 is cut short, skipped (where a killed process stopped writing)"),
        "{err}"
    );
    assert!(
        stdout(&out).contains("git status  git  no exit"),
        "{}",
        stdout(&out)
    );
}
