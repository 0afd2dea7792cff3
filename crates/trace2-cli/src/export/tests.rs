//! Chrome export of git's captures and of damaged streams: valid JSON, integer µs, strict nesting
//! per track, named processes and threads, flows from parent to child.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;

use serde_json::Value;

use super::*;
use crate::input::{self, Report};
use crate::progress::Progress;
use crate::summary::tests::{captures, samples};

fn export(paths: &[PathBuf]) -> (Value, ExportStats, Report) {
    let mut report = Report::default();
    let specs = input::expand(paths);
    let mut exporter = ChromeExporter::new(Vec::new()).unwrap();
    input::for_each_event(&specs, &Progress::hidden(), &mut report, |event| {
        exporter.event(event).unwrap()
    });
    let (bytes, stats) = exporter.finish().unwrap();
    let doc = serde_json::from_slice(&bytes).expect("valid JSON (and so valid UTF-8)");
    (doc, stats, report)
}

fn export_text(text: &str) -> (Value, ExportStats) {
    let mut exporter = ChromeExporter::new(Vec::new()).unwrap();
    for line in text.lines() {
        crate::record_event::with_line(line, |event| exporter.event(event).unwrap())
            .unwrap_or_else(|e| panic!("{e}: {line}"));
    }
    let (bytes, stats) = exporter.finish().unwrap();
    (serde_json::from_slice(&bytes).unwrap(), stats)
}

fn events(doc: &Value) -> &Vec<Value> {
    doc["traceEvents"].as_array().unwrap()
}

fn of_phase<'d>(doc: &'d Value, ph: &str) -> Vec<&'d Value> {
    events(doc).iter().filter(|e| e["ph"] == ph).collect()
}

/// A slice: start, end, name.
type Span = (i64, i64, String);

/// What a viewer demands of the file; panics with the offending events.
fn check(doc: &Value) {
    let mut tracks: HashMap<(i64, i64), Vec<Span>> = HashMap::new();
    let mut named_processes = HashSet::new();
    let mut named_threads = HashSet::new();
    let mut used_threads = HashSet::new();
    let mut open_async: HashMap<String, i64> = HashMap::new();
    let mut flows: HashMap<i64, Vec<String>> = HashMap::new();
    for event in events(doc) {
        let ph = event["ph"].as_str().unwrap();
        let pid = event["pid"].as_i64().expect("integer pid");
        let tid = event["tid"].as_i64().expect("integer tid");
        let ts = event["ts"].as_i64().expect("integer µs ts");
        assert!(event["name"].is_string(), "{event}");
        match ph {
            "X" => {
                let dur = event["dur"].as_i64().expect("integer µs dur");
                assert!(dur >= 0, "{event}");
                let name = event["name"].as_str().unwrap().to_owned();
                tracks
                    .entry((pid, tid))
                    .or_default()
                    .push((ts, ts + dur, name));
                used_threads.insert((pid, tid));
            }
            "M" if event["name"] == "process_name" => {
                named_processes.insert(pid);
            }
            "M" if event["name"] == "thread_name" => {
                named_threads.insert((pid, tid));
            }
            "b" => {
                *open_async
                    .entry(event["id"].as_str().unwrap().to_owned())
                    .or_default() += 1
            }
            "e" => {
                *open_async
                    .entry(event["id"].as_str().unwrap().to_owned())
                    .or_default() -= 1
            }
            "s" | "f" => flows
                .entry(event["id"].as_i64().unwrap())
                .or_default()
                .push(ph.to_owned()),
            "i" | "C" => {
                used_threads.insert((pid, tid));
            }
            "M" => {}
            other => panic!("unexpected phase {other}"),
        }
    }
    for (track, slices) in &mut tracks {
        // As a viewer sorts them: by start, longer first; each inside the one that is open.
        slices.sort_by_key(|&(s, e, _)| (s, -e));
        let mut stack: Vec<&Span> = Vec::new();
        for slice in slices.iter() {
            while stack.last().is_some_and(|top| top.1 <= slice.0) {
                stack.pop();
            }
            if let Some(top) = stack.last() {
                assert!(slice.1 <= top.1, "{track:?}: {slice:?} overlaps {top:?}");
            }
            stack.push(slice);
        }
    }
    for (pid, tid) in &used_threads {
        assert!(
            named_processes.contains(pid),
            "pid {pid} has no process_name"
        );
        assert!(
            named_threads.contains(&(*pid, *tid)),
            "{pid}/{tid} has no thread_name"
        );
    }
    assert!(
        open_async.values().all(|&n| n == 0),
        "unbalanced b/e: {open_async:?}"
    );
    for (id, phases) in &flows {
        assert_eq!(phases, &["s", "f"], "flow {id}");
    }
    assert_eq!(doc["displayTimeUnit"], "ms");
    assert_eq!(doc["otherData"]["format"], "trace2");
}

fn region_leaves(path: &PathBuf) -> usize {
    let text = String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned();
    text.lines()
        .filter(|l| l.contains(r#""event":"region_leave""#))
        .count()
}

#[test]
fn every_capture_exports_strictly_nested_named_tracks() {
    for path in captures() {
        let (doc, stats, report) = export(std::slice::from_ref(&path));
        assert!(report.clean(), "{}", path.display());
        check(&doc);
        assert_eq!(
            stats.moved_slices,
            0,
            "{}: git's own regions fit",
            path.display()
        );
        if path.is_file() {
            let regions = of_phase(&doc, "X")
                .into_iter()
                .filter(|x| !matches!(x["cat"].as_str(), Some("process" | "thread")))
                .filter(|x| x["args"]["incomplete"] != true)
                .count();
            assert_eq!(
                regions,
                region_leaves(&path),
                "{}: one slice per leave",
                path.display()
            );
        }
    }
}

#[test]
fn commit_has_three_named_processes_linked_by_flows() {
    let (doc, stats, _) = export(&[samples().join("commit.event")]);
    check(&doc);
    assert_eq!(stats.processes, 3);
    let names: BTreeMap<i64, String> = of_phase(&doc, "M")
        .into_iter()
        .filter(|m| m["name"] == "process_name")
        .map(|m| {
            (
                m["pid"].as_i64().unwrap(),
                m["args"]["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        names,
        BTreeMap::from([
            (0x2cdd, "git:commit".to_owned()),
            (0x2cdf, "git:rev-parse".to_owned()),
            (0x2ce0, "git:maintenance".to_owned()),
        ])
    );
    let flows_to: Vec<i64> = of_phase(&doc, "f")
        .iter()
        .map(|f| f["pid"].as_i64().unwrap())
        .collect();
    assert_eq!(flows_to, [0x2cdf, 0x2ce0]);
    assert!(of_phase(&doc, "s").iter().all(|s| s["pid"] == 0x2cdd));
    assert!(of_phase(&doc, "f").iter().all(|f| f["bp"] == "e"));
    // The flow starts at the hook's child_start, inside the hook region's slice.
    let hook = of_phase(&doc, "X")
        .into_iter()
        .find(|x| x["name"] == "hook:pre-commit")
        .unwrap();
    let first_flow = of_phase(&doc, "s")[0]["ts"].as_i64().unwrap();
    let (start, dur) = (hook["ts"].as_i64().unwrap(), hook["dur"].as_i64().unwrap());
    assert!(start <= first_flow && first_flow <= start + dur);
    assert_eq!(dur, 3383);
    // The process slice carries what the process was.
    let process = of_phase(&doc, "X")
        .into_iter()
        .find(|x| x["cat"] == "process" && x["pid"] == 0x2cdd)
        .unwrap();
    assert_eq!(process["name"], "git:commit");
    assert_eq!(process["args"]["exit_code"], 0);
    assert_eq!(process["args"]["argv"][1], "commit");
    assert_eq!(process["args"]["repos"]["1"], "/tmp/t2/repo");
    // Children as async slices, with what child_exit said.
    let ends = of_phase(&doc, "e");
    assert_eq!(ends.len(), 2);
    assert_eq!(ends[0]["args"]["pid"], 11486);
    assert_eq!(ends[0]["args"]["code"], 0);
}

#[test]
fn an_exec_shares_the_pid_but_not_the_track() {
    let (doc, _, _) = export(&[samples().join("exec.event")]);
    check(&doc);
    let labels: Vec<(i64, String)> = of_phase(&doc, "M")
        .into_iter()
        .filter(|m| m["name"] == "process_labels")
        .map(|m| {
            (
                m["pid"].as_i64().unwrap(),
                m["args"]["labels"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(labels.len(), 2);
    assert_ne!(labels[0].0, labels[1].0);
    assert!(labels.iter().any(|(pid, _)| *pid == 0x314c));
    assert_eq!(
        of_phase(&doc, "f").len(),
        1,
        "the exec links to the new image"
    );
}

#[test]
fn threads_counters_and_instants() {
    let (doc, _, _) = export(&[samples().join("tt-spec.event")]);
    check(&doc);
    let threads: HashSet<&str> = of_phase(&doc, "M")
        .into_iter()
        .filter(|m| m["name"] == "thread_name")
        .map(|m| m["args"]["name"].as_str().unwrap())
        .collect();
    for name in [
        "main",
        "th01:a-really-long-threa",
        "th02:short",
        "th03:unknown",
    ] {
        assert!(threads.contains(name), "{threads:?}");
    }
    let lifetimes = of_phase(&doc, "X")
        .into_iter()
        .filter(|x| x["cat"] == "thread")
        .count();
    assert_eq!(lifetimes, 2, "th03 never called thread_start");
    assert!(
        of_phase(&doc, "i")
            .iter()
            .any(|i| i["name"] == "hello printf 42")
    );
    let json = of_phase(&doc, "i")
        .into_iter()
        .find(|i| i["name"] == "json")
        .unwrap();
    assert_eq!(json["args"]["value"]["arr"][1], "two");
    // Regions still open at exit end with the process, marked.
    let open: Vec<&Value> = of_phase(&doc, "X")
        .into_iter()
        .filter(|x| x["args"]["incomplete"] == true)
        .collect();
    assert_eq!(open.len(), 2);

    let (doc, _, _) = export(&[samples().join("tt-thread-counter.event")]);
    check(&doc);
    let counters = of_phase(&doc, "C");
    assert!(
        counters
            .iter()
            .any(|c| c["name"] == "test/test2" && c["args"]["value"] == 36)
    );
    assert_eq!(counters.len(), 4);

    let (doc, _, _) = export(&[samples().join("tt-errors.event")]);
    let errors: Vec<&Value> = of_phase(&doc, "i")
        .into_iter()
        .filter(|i| i["cat"] == "error")
        .collect();
    assert_eq!(errors.len(), 2);
    assert_eq!(errors[1]["args"]["msg"], "second\nline");
}

#[test]
fn invalid_utf8_becomes_valid_json() {
    let (doc, _, report) = export(&[samples().join("error-escape.event")]);
    assert!(report.clean());
    let error = of_phase(&doc, "i")
        .into_iter()
        .find(|i| i["cat"] == "error")
        .unwrap();
    assert!(
        error["args"]["msg"]
            .as_str()
            .unwrap()
            .contains("x\u{1}\u{7f}é\u{fffd}'")
    );
}

const SID: &str = "20260101T000000.000000Z-H0a7c9cdf-P00000010";

fn line(event: &str, time_us: u32, rest: &str) -> String {
    format!(
        r#"{{"event":"{event}","sid":"{SID}","thread":"main","time":"2026-01-01T00:00:00.{time_us:06}Z"{rest}}}"#
    )
}

#[test]
fn overlapping_damaged_regions_move_to_a_track_of_their_own() {
    let leave = |at, t_rel: &str, label: &str| {
        line(
            "region_leave",
            at,
            &format!(r#","t_rel":{t_rel},"nesting":1,"category":"c","label":"{label}""#),
        )
    };
    let stream = [
        line("version", 100, r#","evt":"4","exe":"x""#),
        line("start", 101, r#","t_abs":0.000001,"argv":["tool"]"#),
        // Two leaves without enters whose spans overlap: [200, 400] and [300, 500].
        leave(400, "0.000200", "a"),
        leave(500, "0.000200", "b"),
        // A third overlaps both: it needs a second extra track.
        leave(450, "0.000100", "c"),
        line("atexit", 600, r#","t_abs":0.000500,"code":0"#),
    ]
    .join("\n");
    let (doc, stats) = export_text(&stream);
    check(&doc);
    assert_eq!(stats.moved_slices, 2);
    let tracks: HashSet<i64> = of_phase(&doc, "X")
        .into_iter()
        .filter(|x| x["cat"] == "c")
        .map(|x| x["tid"].as_i64().unwrap())
        .collect();
    assert_eq!(tracks.len(), 3);
    let names: Vec<&str> = of_phase(&doc, "M")
        .into_iter()
        .filter(|m| m["name"] == "thread_name")
        .map(|m| m["args"]["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"main (unmatched regions 1)"), "{names:?}");
    // Each slice kept its own duration.
    let durations: Vec<i64> = of_phase(&doc, "X")
        .into_iter()
        .filter(|x| x["cat"] == "c")
        .map(|x| x["dur"].as_i64().unwrap())
        .collect();
    assert_eq!(durations, [200, 200, 100]);
}

#[test]
fn jittered_wall_times_are_nested_by_moving_bounds_a_little() {
    let stream = [
        line("version", 100, r#","evt":"4","exe":"x""#),
        line(
            "region_enter",
            200,
            r#","nesting":1,"category":"c","label":"outer""#,
        ),
        line(
            "region_enter",
            201,
            r#","nesting":2,"category":"c","label":"inner""#,
        ),
        // leave − t_rel = 195: before outer's enter.
        line(
            "region_leave",
            300,
            r#","t_rel":0.000105,"nesting":2,"category":"c","label":"inner""#,
        ),
        line(
            "region_enter",
            301,
            r#","nesting":2,"category":"c","label":"next""#,
        ),
        // leave − t_rel = 290: inside the previous sibling.
        line(
            "region_leave",
            400,
            r#","t_rel":0.000110,"nesting":2,"category":"c","label":"next""#,
        ),
        // outer ends (by its own numbers) before its last child.
        line(
            "region_leave",
            399,
            r#","t_rel":0.000199,"nesting":1,"category":"c","label":"outer""#,
        ),
        line("atexit", 500, r#","t_abs":0.000400,"code":0"#),
    ]
    .join("\n");
    let (doc, stats) = export_text(&stream);
    check(&doc);
    assert_eq!(stats.moved_slices, 0);
    let span = |name: &str| {
        let x = of_phase(&doc, "X")
            .into_iter()
            .find(|x| x["name"] == name)
            .unwrap();
        let ts = x["ts"].as_i64().unwrap() - 1_767_225_600_000_000;
        (ts, ts + x["dur"].as_i64().unwrap())
    };
    assert_eq!(span("c:inner"), (195, 300));
    assert_eq!(span("c:next"), (300, 400));
    assert_eq!(span("c:outer"), (195, 400));
}

/// A tool that runs git through a plain `Command` (jj): no `child_start` in the parent, but the
/// git's SID names it as the parent.
pub(crate) fn parent_without_launches() -> String {
    let git_sid = format!("{SID}/20260101T000000.000300Z-H0a7c9cdf-P00000020");
    let git = |event: &str, time_us: u32, rest: &str| {
        line(event, time_us, rest).replace(
            &format!(r#""sid":"{SID}""#),
            &format!(r#""sid":"{git_sid}""#),
        )
    };
    [
        line("version", 10, r#","evt":"4","exe":"0.30""#),
        line("start", 20, r#","t_abs":0.000020,"argv":["jj","status"]"#),
        line("cmd_name", 30, r#","name":"status","hierarchy":"status""#),
        git("version", 300, r#","evt":"4","exe":"2.47.3""#),
        git("start", 310, r#","t_abs":0.000010,"argv":["git","status"]"#),
        git("cmd_name", 320, r#","name":"status","hierarchy":"status""#),
        git("atexit", 900, r#","t_abs":0.000600,"code":0"#),
        line("atexit", 990_000, r#","t_abs":0.99,"code":0"#),
    ]
    .join("\n")
}

#[test]
fn a_git_run_without_child_start_is_connected_by_its_sid() {
    let (doc, stats) = export_text(&parent_without_launches());
    check(&doc);
    assert_eq!(stats.processes, 2);
    assert_eq!(stats.flows, 1);
    let starts = of_phase(&doc, "s");
    let ends = of_phase(&doc, "f");
    assert_eq!((starts.len(), ends.len()), (1, 1));
    // From the parent's main thread at the child's start, to the child's process slice.
    assert_eq!(starts[0]["pid"], 0x10);
    assert_eq!(starts[0]["tid"], 0x10);
    assert_eq!(ends[0]["pid"], 0x20);
    assert_eq!(starts[0]["id"], ends[0]["id"]);
    let git_start = of_phase(&doc, "X")
        .into_iter()
        .find(|x| x["cat"] == "process" && x["pid"] == 0x20)
        .unwrap()["ts"]
        .as_i64()
        .unwrap();
    assert!(starts[0]["ts"].as_i64().unwrap() <= git_start);
}

/// The start of the flow into the process slice of `pid`, and that slice's start.
fn flow_into(doc: &Value, pid: i64) -> (i64, i64) {
    let end = of_phase(doc, "f")
        .into_iter()
        .find(|f| f["pid"] == pid)
        .unwrap();
    let start = of_phase(doc, "s")
        .into_iter()
        .find(|s| s["id"] == end["id"])
        .unwrap();
    let slice = of_phase(doc, "X")
        .into_iter()
        .find(|x| x["cat"] == "process" && x["pid"] == pid)
        .unwrap();
    assert_eq!(end["ts"], slice["ts"], "lands at the slice's start");
    (start["ts"].as_i64().unwrap(), slice["ts"].as_i64().unwrap())
}

#[test]
fn a_flow_by_sid_lands_at_the_childs_clock_zero_and_leaves_no_later() {
    // git's slice starts at its clock zero, 300 µs before its first line.
    let text = parent_without_launches().replace(
        r#""t_abs":0.000010,"argv":["git","status"]"#,
        r#""t_abs":0.000310,"argv":["git","status"]"#,
    );
    let (doc, stats) = export_text(&text);
    check(&doc);
    assert_eq!(stats.flows, 1);
    let (from, to) = flow_into(&doc, 0x20);
    assert_eq!(to - 1_767_225_600_000_000, 0);
    assert!(from <= to, "{from} > {to}");
}

#[test]
fn a_flow_from_a_child_start_logged_after_the_child_began_leaves_no_later() {
    // The parent writes `child_start` 50 µs after the child's clock zero (after spawning it).
    let child_sid = format!("{SID}/20260101T000000.000400Z-H0a7c9cdf-P00000020");
    let child =
        |event: &str, time_us: u32, rest: &str| line(event, time_us, rest).replace(SID, &child_sid);
    let text = [
        line("version", 10, r#","evt":"4","exe":"2.47.3""#),
        line("start", 20, r#","t_abs":0.000020,"argv":["git","fetch"]"#),
        child("version", 440, r#","evt":"4","exe":"2.47.3""#),
        child("start", 450, r#","t_abs":0.000100,"argv":["git","gc"]"#),
        line(
            "child_start",
            400,
            r#","child_id":0,"child_class":"?","use_shell":false,"argv":["git","gc"]"#,
        ),
        child("atexit", 900, r#","t_abs":0.000550,"code":0"#),
        line(
            "child_exit",
            950,
            r#","child_id":0,"pid":32,"code":0,"t_rel":0.00055"#,
        ),
        line("atexit", 990, r#","t_abs":0.00099,"code":0"#),
    ]
    .join("\n");
    let (doc, stats) = export_text(&text);
    check(&doc);
    assert_eq!(stats.flows, 1);
    let (from, to) = flow_into(&doc, 0x20);
    assert_eq!(to - 1_767_225_600_000_000, 350);
    assert!(from <= to, "{from} > {to}");
}

#[test]
fn a_valueless_def_param_exports_without_a_value() {
    // Git 2.49+ writes a key set without a value (`git -c foo.bar`) without `value`.
    let text = [
        line("version", 0, r#","evt":"4","exe":"2.49.0""#),
        line("start", 1, r#","t_abs":0.000001,"argv":["git","version"]"#),
        line("def_param", 2, r#","scope":"command","param":"foo.bar""#),
        line(
            "def_param",
            3,
            r#","scope":"command","param":"foo.baz","value":"1""#,
        ),
        line("exit", 4, r#","t_abs":0.000004,"code":0"#),
        line("atexit", 5, r#","t_abs":0.000005,"code":0"#),
    ]
    .join("\n");
    let (doc, _) = export_text(&text);
    check(&doc);
    let params: Vec<&Value> = of_phase(&doc, "i")
        .into_iter()
        .filter(|i| i["name"] == "def_param")
        .map(|i| &i["args"])
        .collect();
    assert_eq!(params.len(), 2, "{doc}");
    assert_eq!(params[0]["param"], "foo.bar");
    assert!(params[0].get("value").is_none(), "{}", params[0]);
    assert_eq!(params[1]["value"], "1");
    let process = events(&doc)
        .iter()
        .find(|e| e["args"].get("params").is_some())
        .unwrap();
    assert_eq!(process["args"]["params"]["foo.bar"], Value::Null);
    assert_eq!(process["args"]["params"]["foo.baz"], "1");
}
