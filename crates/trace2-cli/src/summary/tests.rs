//! Summary of git's own captures and of hand-made streams, checked against the lines themselves.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::*;
use crate::input::{self, Report};
use crate::progress::Progress;

/// git's captures: `shared/spec/samples` beside the repository, or the folder `TRACE2_SAMPLES` names.
pub(crate) fn samples() -> PathBuf {
    match std::env::var_os("TRACE2_SAMPLES") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/spec/samples"),
    }
}

/// Every Event capture of git, plus the two directory captures.
pub(crate) fn captures() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(samples())
        .expect("the captures in shared/spec/samples")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "event"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 40, "captures missing: {paths:?}");
    paths.push(samples().join("dir-target"));
    paths.push(samples().join("maxfiles-dir"));
    paths
}

fn summarise(paths: &[PathBuf]) -> (Summary, Report) {
    let mut report = Report::default();
    let specs = input::expand(paths);
    let mut summariser = Summariser::new();
    input::for_each_event(&specs, &Progress::hidden(), &mut report, |event| {
        summariser.event(event)
    });
    (summariser.finish(), report)
}

fn summarise_text(text: &str) -> Summary {
    let mut summariser = Summariser::new();
    for line in text.lines() {
        crate::record_event::with_line(line, |event| summariser.event(event))
            .unwrap_or_else(|e| panic!("{e}: {line}"));
    }
    summariser.finish()
}

fn names(summary: &Summary) -> Vec<&str> {
    summary.processes.iter().map(|p| p.name.as_str()).collect()
}

fn region<'p>(process: &'p ProcessSummary, category: &str, label: &str) -> &'p RegionSummary {
    process
        .regions
        .iter()
        .find(|r| r.category == category && r.label == label)
        .unwrap_or_else(|| panic!("no {category}/{label}"))
}

/// Count and total of the `region_leave` lines per (sid, category, label), read with plain
/// serde_json, as a check independent of the summariser.
fn leaves_in(path: &Path) -> HashMap<(String, String, String), (u64, i64)> {
    let files: Vec<PathBuf> = if path.is_dir() {
        std::fs::read_dir(path)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect()
    } else {
        vec![path.to_owned()]
    };
    let mut totals = HashMap::new();
    for file in files {
        let bytes = std::fs::read(file).unwrap();
        for line in String::from_utf8_lossy(&bytes).lines() {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            if value["event"] != "region_leave" {
                continue;
            }
            let text = |key: &str| value[key].as_str().unwrap_or("").to_owned();
            let micros = (value["t_rel"].as_f64().unwrap() * 1e6).round() as i64;
            let entry = totals
                .entry((text("sid"), text("category"), text("label")))
                .or_insert((0, 0));
            entry.0 += 1;
            entry.1 += micros;
        }
    }
    totals
}

#[test]
fn every_capture_is_summarised_with_totals_that_match_its_lines() {
    for path in captures() {
        let (summary, report) = summarise(std::slice::from_ref(&path));
        assert!(
            report.clean(),
            "{}: {:?}",
            path.display(),
            report.messages()
        );
        assert!(!summary.processes.is_empty(), "{}", path.display());
        let expected = leaves_in(&path);
        let mut seen = 0;
        for process in &summary.processes {
            for region in &process.regions {
                let key = (
                    process.sid.clone(),
                    region.category.clone(),
                    region.label.clone(),
                );
                assert_eq!(
                    expected.get(&key),
                    Some(&(region.count, region.total_us)),
                    "{}: {key:?}",
                    path.display()
                );
                assert!(region.self_us <= region.total_us && region.max_us <= region.total_us);
                seen += 1;
            }
        }
        assert_eq!(seen, expected.len(), "{}", path.display());
        // The text form names every process.
        let text = render_text(&summary, 5);
        for process in &summary.processes {
            assert!(text.contains(&process.sid), "{}", path.display());
        }
    }
}

#[test]
fn commit_with_a_hook_and_a_detached_maintenance() {
    let (summary, _) = summarise(&[samples().join("commit.event")]);
    assert_eq!(
        names(&summary),
        ["git:commit", "git:rev-parse", "git:maintenance"]
    );
    let commit = &summary.processes[0];
    assert_eq!(commit.depth, 0);
    assert_eq!(
        commit.argv,
        ["git", "commit", "-q", "-m", "commit with hook"]
    );
    assert_eq!(commit.exit_code, Some(0));
    assert_eq!(commit.elapsed_us, 9170); // atexit t_abs 0.009170
    assert_eq!(commit.exe_version.as_deref(), Some("2.47.3"));
    assert_eq!(commit.pid, Some(0x2cdd));
    // do_read_index twice (65 + 77 µs), each around a cache_tree/read (8 + 24 µs).
    let read = region(commit, "index", "do_read_index");
    assert_eq!(
        (read.count, read.total_us, read.self_us, read.max_us),
        (2, 142, 110, 77)
    );
    let hook = region(commit, "hook", "pre-commit");
    assert_eq!((hook.count, hook.total_us), (1, 3383));
    assert_eq!(commit.regions[0].label, "pre-commit", "longest total first");

    // The hook's git and the maintenance child hang under their child_start.
    assert_eq!(commit.children.len(), 2);
    let (hook_child, maintenance) = (&commit.children[0], &commit.children[1]);
    assert_eq!(hook_child.class, "hook");
    assert_eq!(hook_child.hook_name.as_deref(), Some("pre-commit"));
    assert_eq!(hook_child.elapsed_us, Some(3324));
    assert_eq!(hook_child.processes, [summary.processes[1].sid.clone()]);
    assert_eq!(maintenance.processes, [summary.processes[2].sid.clone()]);
    let rev_parse = &summary.processes[1];
    assert_eq!(rev_parse.depth, 1);
    assert_eq!(rev_parse.started_as.as_deref(), Some("hook pre-commit"));
    assert_eq!(rev_parse.hierarchy.as_deref(), Some("commit/rev-parse"));
    // git maintenance forks: two exit/atexit pairs under one SID; the last and longest count.
    let forked = &summary.processes[2];
    assert_eq!((forked.exit_code, forked.elapsed_us), (Some(0), 1087));
    assert_eq!(region(forked, "maintenance", "detach").total_us, 207);
}

#[test]
fn timers_and_counters_per_thread_and_per_process() {
    let (summary, _) = summarise(&[samples().join("tt-thread-timer.event")]);
    let process = &summary.processes[0];
    assert_eq!(process.threads, 3);
    let total = process.timers.iter().find(|t| !t.per_thread).unwrap();
    assert_eq!(
        (
            total.category.as_str(),
            total.name.as_str(),
            total.intervals,
            total.total_us
        ),
        ("test", "test2", 6, 60928)
    );
    let per_thread = process.timers.iter().find(|t| t.per_thread).unwrap();
    assert_eq!(per_thread.threads, 3);
    assert_eq!(per_thread.intervals, 6);
    assert_eq!(per_thread.total_us, 20250 + 20473 + 20204);
    assert_eq!((per_thread.min_us, per_thread.max_us), (10090, 10343));

    let (summary, _) = summarise(&[samples().join("tt-thread-counter.event")]);
    let counters = &summary.processes[0].counters;
    assert_eq!(counters.iter().find(|c| !c.per_thread).unwrap().count, 36);
    let per_thread = counters.iter().find(|c| c.per_thread).unwrap();
    assert_eq!((per_thread.threads, per_thread.count), (3, 36));
    let text = render_text(&summary, 5);
    assert!(
        text.contains("test/test2 (per thread, 3 threads)"),
        "{text}"
    );
}

#[test]
fn exec_signal_and_a_trace_that_stops() {
    let (summary, _) = summarise(&[samples().join("exec.event")]);
    assert_eq!(summary.processes.len(), 2);
    assert_eq!(summary.processes[1].started_as.as_deref(), Some("exec"));
    assert_eq!(summary.processes[1].depth, 1);
    // The image that exec'd ends without exit or atexit: its stream simply stops.
    assert!(!summary.processes[0].ended);
    assert_eq!(summary.processes[1].exit_code, Some(0));

    let (summary, _) = summarise(&[samples().join("signal-sigpipe.event")]);
    let killed = &summary.processes[0];
    assert_eq!(
        (killed.signal, killed.elapsed_us, killed.ended),
        (Some(13), 1371, true)
    );
    assert!(render_text(&summary, 5).contains("signal 13"));

    let (summary, _) = summarise(&[samples().join("signal-sigterm.event")]);
    assert!(!summary.processes[0].ended);
    assert!(render_text(&summary, 5).contains("no exit"));
}

#[test]
fn errors_are_counted_with_their_first_messages() {
    let (summary, _) = summarise(&[samples().join("tt-errors.event")]);
    let process = &summary.processes[0];
    assert_eq!(process.errors, 2);
    assert_eq!(process.first_errors, ["first error", "second\nline"]);
}

const SID: &str = "20260101T000000.000000Z-H0a7c9cdf-P00000010";

fn line(event: &str, thread: &str, rest: &str) -> String {
    format!(r#"{{"event":"{event}","sid":"{SID}","thread":"{thread}"{rest}}}"#)
}

#[test]
fn self_time_is_total_minus_directly_nested_regions_on_the_same_thread() {
    let enter = |thread: &str, nesting: u32, label: &str| {
        line(
            "region_enter",
            thread,
            &format!(r#","nesting":{nesting},"category":"c","label":"{label}""#),
        )
    };
    let leave = |thread: &str, nesting: u32, label: &str, t_rel: &str| {
        line(
            "region_leave",
            thread,
            &format!(r#","t_rel":{t_rel},"nesting":{nesting},"category":"c","label":"{label}""#),
        )
    };
    let stream = [
        line("start", "main", r#","t_abs":0.000010,"argv":["tool"]"#),
        enter("main", 1, "outer"),
        enter("main", 2, "middle"),
        // A thread's regions interleave with main's but count only on their own thread.
        line("thread_start", "th01:w", ""),
        enter("th01:w", 1, "work"),
        enter("main", 3, "inner"),
        leave("main", 3, "inner", "0.000100"),
        leave("th01:w", 1, "work", "0.000500"),
        line("thread_exit", "th01:w", r#","t_rel":0.000600"#),
        leave("main", 2, "middle", "0.000300"),
        enter("main", 2, "middle"),
        leave("main", 2, "middle", "0.000050"),
        leave("main", 1, "outer", "0.001000"),
        line("atexit", "main", r#","t_abs":0.002000,"code":3"#),
    ]
    .join("\n");
    let summary = summarise_text(&stream);
    let p = &summary.processes[0];
    let stats = |label| {
        let r = region(p, "c", label);
        (r.count, r.total_us, r.self_us, r.max_us)
    };
    assert_eq!(stats("outer"), (1, 1000, 650, 1000));
    assert_eq!(stats("middle"), (2, 350, 250, 300));
    assert_eq!(stats("inner"), (1, 100, 100, 100));
    assert_eq!(stats("work"), (1, 500, 500, 500));
    assert_eq!((p.exit_code, p.elapsed_us, p.threads), (Some(3), 2000, 1));
    assert_eq!(p.unclosed_regions, 0);
}

#[test]
fn damaged_region_streams_are_summarised_as_far_as_they_go() {
    let stream = [
        line(
            "region_enter",
            "main",
            r#","nesting":1,"category":"c","label":"a""#,
        ),
        line(
            "region_enter",
            "main",
            r#","nesting":2,"category":"c","label":"lost""#,
        ),
        // The leave of "lost" is missing: the next level-2 enter replaces it.
        line(
            "region_enter",
            "main",
            r#","nesting":2,"category":"c","label":"b""#,
        ),
        line(
            "region_leave",
            "main",
            r#","t_rel":0.000010,"nesting":2,"category":"c","label":"b""#,
        ),
        // A leave whose enter is missing still has its duration.
        line(
            "region_leave",
            "main",
            r#","t_rel":0.000004,"nesting":2,"category":"c","label":"orphan""#,
        ),
        line(
            "region_leave",
            "main",
            r#","t_rel":0.000100,"nesting":1,"category":"c","label":"a""#,
        ),
        line(
            "region_enter",
            "main",
            r#","nesting":1,"category":"c","label":"never left""#,
        ),
    ]
    .join("\n");
    let summary = summarise_text(&stream);
    let p = &summary.processes[0];
    assert_eq!(p.unclosed_regions, 2);
    assert_eq!(region(p, "c", "orphan").total_us, 4);
    assert_eq!(region(p, "c", "a").self_us, 100 - 10 - 4);
    assert!(!p.ended);
    assert!(p.argv.is_empty());
    let text = render_text(&summary, 5);
    assert!(text.contains("2 regions entered and never left"), "{text}");
    assert!(text.contains("no exit"), "{text}");
}

#[test]
fn the_tree_draws_siblings_and_descendants() {
    let sid = |path: &str| format!("{SID}{path}");
    let start = |s: &str, at: &str, cmd: &str| {
        format!(
            r#"{{"event":"start","sid":"{}","thread":"main","time":"2026-01-01T00:00:00.{at}Z","t_abs":0.000001,"argv":["git","{cmd}"]}}"#,
            sid(s)
        )
    };
    let stream = [
        start("", "000001", "root"),
        start("/B-P00000012", "000003", "second"),
        start("/A-P00000011", "000002", "first"),
        start("/A-P00000011/C-P00000013", "000004", "grandchild"),
    ]
    .join("\n");
    let summary = summarise_text(&stream);
    assert_eq!(
        summary
            .processes
            .iter()
            .map(|p| (p.argv[1].as_str(), p.depth))
            .collect::<Vec<_>>(),
        [("root", 0), ("first", 1), ("grandchild", 2), ("second", 1)]
    );
    let text = render_text(&summary, 5);
    let tree: Vec<&str> = text.lines().skip(2).take(4).collect();
    assert!(tree[0].starts_with("git root"), "{text}");
    assert!(tree[1].starts_with("├─ git first"), "{text}");
    assert!(tree[2].starts_with("│  └─ git grandchild"), "{text}");
    assert!(tree[3].starts_with("└─ git second"), "{text}");
}

#[test]
fn json_form_has_every_region_in_microseconds() {
    let (summary, _) = summarise(&[samples().join("status.event")]);
    let json = serde_json::to_value(&summary).unwrap();
    let status = &json["processes"][0];
    assert_eq!(status["name"], "git:status");
    let regions = status["regions"].as_array().unwrap();
    assert_eq!(regions.len(), summary.processes[0].regions.len());
    assert!(
        regions
            .iter()
            .all(|r| r["total_us"].is_i64() && r["self_us"].is_i64())
    );
}

#[test]
fn an_unfinished_process_lasts_until_the_last_thing_known_of_it() {
    // A server stopped by SIGTERM: its last line with `t_abs` is a printf at 2.94 ms, but its
    // last line (a region left 48 ms later) came after that.
    let time = |ms: f64| {
        format!(
            r#","time":"2026-01-01T00:00:00.{:06}Z""#,
            (ms * 1000.0) as i64
        )
    };
    let stream = [
        line(
            "version",
            "main",
            &format!(r#"{},"evt":"4","exe":"1""#, time(0.01)),
        ),
        line(
            "start",
            "main",
            &format!(r#"{},"t_abs":0.000010,"argv":["server"]"#, time(0.01)),
        ),
        line(
            "region_enter",
            "main",
            &format!(
                r#"{},"nesting":1,"category":"serve","label":"loop""#,
                time(1.0)
            ),
        ),
        line(
            "printf",
            "main",
            &format!(r#"{},"t_abs":0.002940,"msg":"ready""#, time(2.94)),
        ),
        line(
            "region_leave",
            "main",
            &format!(
                r#"{},"t_rel":0.050000,"nesting":1,"category":"serve","label":"loop""#,
                time(51.0)
            ),
        ),
    ]
    .join("\n");
    let summary = summarise_text(&stream);
    let server = &summary.processes[0];
    assert!(!server.ended);
    assert_eq!(server.elapsed_us, 51_000);
}

#[test]
fn terminal_escapes_in_a_trace_are_shown_not_sent() {
    let stream = [
        line("start", "main", r#","t_abs":0.000010,"argv":["tool","\u001b[2J"]"#),
        line(
            "region_leave",
            "main",
            r#","t_abs":0.5,"t_rel":0.1,"nesting":1,"category":"c","label":"x\u001b]0;pwned\u0007y""#,
        ),
        line("error", "main", r#","msg":"bad \u009b31m""#),
        line("atexit", "main", r#","t_abs":0.6,"code":0"#),
    ]
    .join("\n");
    let summary = summarise_text(&stream);
    // The JSON form keeps the text as it is (JSON escapes it).
    assert_eq!(
        summary.processes[0].regions[0].label,
        "x\u{1b}]0;pwned\u{7}y"
    );
    let text = render_text(&summary, 5);
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "{text:?}"
    );
    assert!(text.contains("x\\e]0;pwned\\x07y"), "{text}");
    assert!(text.contains("\\e[2J"), "{text}");
    assert!(text.contains("bad \\u{9b}31m"), "{text}");
}

#[test]
fn the_check_for_hidden_text_sees_what_the_copy_escapes() {
    let value = |s: &Summary| serde_json::to_value(s).unwrap();
    for capture in captures() {
        let (summary, _) = summarise(&[capture]);
        let escaped = value(&text::visible_summary(&summary)) != value(&summary);
        assert_eq!(text::has_hidden(&summary), escaped);
    }
    // One control character in each kind of text, one at a time.
    let base =
        summarise_text(&[line("start", "main", r#","t_abs":0.1,"argv":["tool"]"#)].join("\n"));
    type Edit = Box<dyn Fn(&mut ProcessSummary)>;
    let edits: Vec<Edit> = vec![
        Box::new(|p| p.name.push('\u{1b}')),
        Box::new(|p| p.alias = Some("\u{7}".into())),
        Box::new(|p| p.argv.push("\u{9b}".into())),
        Box::new(|p| p.first_errors.push("\r".into())),
        Box::new(|p| {
            p.timers.push(TimerSummary {
                category: "c".into(),
                name: "\u{202e}".into(),
                per_thread: false,
                threads: 1,
                intervals: 1,
                total_us: 1,
                min_us: 1,
                max_us: 1,
            })
        }),
    ];
    for edit in edits {
        let mut summary = Summary {
            processes: base.processes.clone(),
        };
        edit(&mut summary.processes[0]);
        assert!(text::has_hidden(&summary));
        assert_ne!(value(&text::visible_summary(&summary)), value(&summary));
    }
}
