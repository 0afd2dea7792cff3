//! `trace2 stats` and `trace2 compare` from the command line: one set of runs written both as
//! Event files and as binary (t2b) traces gives the same answer; killed and unfinished runs
//! are counted as such; the sides can be several paths; usage errors exit 2.

mod common;

use std::fs;
use std::path::Path;

use common::{run_trace2, stderr, stdout};
use serde_json::Value;
use tracing_trace2_binary::BinaryWriter;
use tracing_trace2_core::{
    Callsite, Format, MemorySink, Record, RegionInfo, Timestamp, Trace2Event,
};
use tracing_trace2_event::EventFormat;

const ANCHOR: i64 = 1_795_303_297_816_000;

fn region(category: &'static str, label: &'static str) -> RegionInfo<'static> {
    RegionInfo {
        category: Some(category),
        label: Some(label),
        msg: None,
        repo: None,
    }
}

/// How a run ends.
#[derive(Clone, Copy)]
enum End {
    Exit,
    Killed,
    Unfinished,
    /// A flight-recorder snapshot taken while the run went on (its marker last).
    Snapshot,
}

/// The records of run `n`: `index:read` (with `cache:load` inside) then `status:untracked`,
/// which takes `slow` µs more; times vary a little from run to run.
fn run_records(n: u32, slow: u64, end: End) -> (String, Vec<(Trace2Event<'static>, u64)>) {
    let sid = format!("20261121T232137.816920Z-H0a7c9cdf-P{:08x}", 0x1000 + n);
    let jitter = u64::from(n % 100 * 37 % 23);
    let (read, load, untracked) = (400 + jitter, 150 + jitter / 2, 300 + slow + jitter * 3);
    let mut t = 100;
    let mut events = Vec::new();
    let mut at = |event, step: u64| {
        t += step;
        events.push((event, t));
    };
    at(Trace2Event::Version { exe: "2.47.3" }, 0);
    at(
        Trace2Event::Start {
            argv: &["git", "status"],
        },
        10,
    );
    at(
        Trace2Event::CmdName {
            name: "status",
            hierarchy: "status",
        },
        10,
    );
    let (r, c, u) = (
        region("index", "read"),
        region("cache", "load"),
        region("status", "untracked"),
    );
    at(
        Trace2Event::RegionEnter {
            region: r,
            nesting: 1,
        },
        10,
    );
    at(
        Trace2Event::RegionEnter {
            region: c,
            nesting: 2,
        },
        20,
    );
    at(
        Trace2Event::RegionLeave {
            region: c,
            nesting: 2,
            t_rel_us: load,
        },
        load,
    );
    at(
        Trace2Event::RegionLeave {
            region: r,
            nesting: 1,
            t_rel_us: read,
        },
        read - load - 20,
    );
    at(
        Trace2Event::RegionEnter {
            region: u,
            nesting: 1,
        },
        30,
    );
    match end {
        End::Unfinished => return (sid, events),
        End::Killed => {
            at(Trace2Event::Signal { signo: 15 }, 50);
            return (sid, events);
        }
        End::Snapshot => {
            at(
                Trace2Event::Data {
                    repo: None,
                    category: "flight",
                    key: "trigger",
                    value: "request",
                    nesting: 2,
                    t_rel_us: 40,
                },
                40,
            );
            return (sid, events);
        }
        End::Exit => {}
    }
    at(
        Trace2Event::RegionLeave {
            region: u,
            nesting: 1,
            t_rel_us: untracked,
        },
        untracked,
    );
    at(Trace2Event::Exit { code: 0 }, 40);
    at(Trace2Event::Atexit { code: 0 }, 5);
    (sid, events)
}

fn records<'a>(sid: &'a str, events: &[(Trace2Event<'static>, u64)], n: u32) -> Vec<Record<'a>> {
    let anchor = ANCHOR + i64::from(n) * 1_000_000;
    let mut open = 0u32;
    events
        .iter()
        .map(|&(event, t_abs_us)| {
            if let Trace2Event::RegionLeave { .. } = event {
                open -= 1;
            }
            let record = Record {
                event,
                time: Timestamp {
                    wall_us: anchor + t_abs_us as i64,
                    t_abs_us,
                },
                sid,
                depth: 0,
                thread: "main",
                callsite: Callsite {
                    file: Some("src/main.rs"),
                    line: 10,
                },
                open_regions: open,
            };
            if let Trace2Event::RegionEnter { .. } = event {
                open += 1;
            }
            record
        })
        .collect()
}

/// Writes `runs` runs (the last three a snapshot, killed and unfinished) into `event_dir` (one Event file
/// each) and `binary_dir` (one t2b file each).
fn write_side(event_dir: &Path, binary_dir: &Path, first: u32, runs: u32, slow: u64) {
    fs::create_dir_all(event_dir).unwrap();
    fs::create_dir_all(binary_dir).unwrap();
    for n in first..first + runs {
        let end = match n - first {
            i if i == runs - 1 => End::Unfinished,
            i if i == runs - 2 => End::Killed,
            i if i == runs - 3 => End::Snapshot,
            _ => End::Exit,
        };
        let (sid, events) = run_records(n, slow, end);
        let records = records(&sid, &events, n);
        let mut text = Vec::new();
        for record in &records {
            EventFormat::new().format(record, &mut text);
        }
        fs::write(event_dir.join(format!("{n:04}.event")), text).unwrap();
        let sink = MemorySink::new();
        let writer = BinaryWriter::builder()
            .with_anchor_wall_us(ANCHOR + i64::from(n) * 1_000_000)
            .with_utc_offset(0)
            .with_exit_handler(false)
            .build(sink.clone());
        for record in &records {
            writer.record(record);
        }
        // An unfinished run's batches reach the file, but no END frame (as when killed -9).
        match end {
            End::Unfinished => writer.flush_all(),
            _ => writer.finish(),
        }
        fs::write(binary_dir.join(format!("{n:04}.t2b")), sink.contents()).unwrap();
    }
}

fn json(args: &[&str]) -> Value {
    let out = run_trace2(args);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

fn group<'v>(command: &'v Value, name: &str) -> &'v Value {
    command["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == name)
        .unwrap_or_else(|| panic!("no group {name}"))
}

#[test]
fn event_and_binary_inputs_of_one_run_give_the_same_answer() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    write_side(
        &dir.path().join("base-event"),
        &dir.path().join("base-t2b"),
        0,
        22,
        0,
    );
    write_side(
        &dir.path().join("new-event"),
        &dir.path().join("new-t2b"),
        100,
        22,
        250,
    );

    let from_event = json(&["compare", "--json", &p("base-event"), &p("new-event")]);
    let from_binary = json(&["compare", "--json", &p("base-t2b"), &p("new-t2b")]);
    assert_eq!(from_event, from_binary);
    // And mixed: several paths a side.
    let mixed = json(&[
        "compare",
        "--json",
        "--base",
        &p("base-event"),
        "--new",
        &p("new-t2b"),
    ]);
    assert_eq!(from_event, mixed);

    let status = &from_event["commands"][0];
    assert_eq!(status["command"], "git:status");
    // 19 ended runs a side; the snapshot, the killed and the unfinished one are counted, not
    // sampled.
    assert_eq!(status["base_runs"]["ended"], 19);
    assert_eq!(status["base_runs"]["snapshots"], 1);
    assert_eq!(status["base_runs"]["killed"], 1);
    assert_eq!(status["base_runs"]["unfinished"], 1);
    assert_eq!(group(status, "status:untracked")["verdict"], "slower");
    assert_eq!(group(status, "")["verdict"], "slower");
    assert_eq!(group(status, "index:read")["verdict"], "no_change");
    assert_eq!(
        group(status, "index:read / cache:load")["verdict"],
        "no_change"
    );
    let change = &group(status, "status:untracked")["change"];
    assert_eq!(change["shift"], 250.0);
    assert!(change["low"].as_f64().unwrap() <= 250.0 && change["high"].as_f64().unwrap() >= 250.0);
    // The slowed region explains the whole elapsed-time change.
    assert_eq!(change["share"], 1.0);
    assert_eq!(from_event["method"], "mann-whitney-u");
    assert_eq!(from_event["correction"], "holm");

    // The text says the same, and the stats of one side agree with the comparison's.
    let out = run_trace2(&["compare", &p("base-event"), &p("new-t2b")]);
    let text = stdout(&out);
    assert!(
        text.lines()
            .any(|l| l.contains("slower") && l.contains("region status:untracked")),
        "{text}"
    );
    assert!(
        text.contains(
            "base 19 runs (+1 killed, 1 flight snapshot, 1 unfinished, not in the figures)"
        ),
        "{text}"
    );
    let stats = json(&["stats", "--json", &p("base-t2b")]);
    let read = group(&stats["commands"][0], "index:read");
    assert_eq!(read["total"], group(status, "index:read")["base"]["total"]);
    // index:read less the cache:load inside it.
    assert!(
        read["self_time"]["median"].as_f64().unwrap() < read["total"]["median"].as_f64().unwrap()
    );
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &["compare", "one"][..],
        &["compare", "--base", "a"],
        &["compare", "a", "b", "--base", "c", "--new", "d"],
        &["compare", "--alpha", "2", "a", "b"],
        &["stats"],
    ] {
        let out = run_trace2(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn an_html_page_is_written_self_contained() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    write_side(
        &dir.path().join("base-event"),
        &dir.path().join("base-t2b"),
        0,
        12,
        0,
    );
    write_side(
        &dir.path().join("new-event"),
        &dir.path().join("new-t2b"),
        100,
        12,
        250,
    );
    let out = run_trace2(&[
        "compare",
        "--html",
        &p("page.html"),
        &p("base-event"),
        &p("new-event"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let page = fs::read_to_string(p("page.html")).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    for needle in [
        "<svg class=\"tree\"",
        "<svg class=\"dist\"",
        "status:untracked",
        "git:status",
    ] {
        assert!(page.contains(needle), "{needle}");
    }
    for outside in ["src=", "href=", "@import", "url("] {
        assert!(
            !page.contains(outside),
            "the page fetches something: {outside}"
        );
    }
}

/// What is missing to open the page in a browser, if anything.
fn missing_browser() -> Option<String> {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    if !Path::new(&chromium).exists() {
        return Some(format!("Chromium ({chromium})"));
    }
    if std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_err()
    {
        return Some("node".to_owned());
    }
    let viewer = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/viewer");
    if !viewer.join("node_modules/playwright-core").exists() {
        return Some(format!(
            "npm package playwright-core (npm ci in {})",
            viewer.display()
        ));
    }
    None
}

/// The page in headless Chromium (`tests/viewer/compare.mjs`, offline): it renders with no
/// console error and no request; the screenshot, read back, has ink and the colours of a
/// slower region (red bar), an unchanged one (grey bar) and both distributions (blue, orange).
/// Needs what `tests/viewer.rs` needs (`.ci/run` installs it): fails under CI without it,
/// skips with a message elsewhere.
#[test]
fn the_html_page_renders_in_a_real_browser() {
    if let Some(missing) = missing_browser() {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("browser test needs {missing}: .ci/run installs it");
        }
        println!("SKIPPED browser test: {missing} not found (CI=true makes this a failure)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    write_side(
        &dir.path().join("base-event"),
        &dir.path().join("base-t2b"),
        0,
        22,
        0,
    );
    write_side(
        &dir.path().join("new-event"),
        &dir.path().join("new-t2b"),
        100,
        22,
        250,
    );
    let out = run_trace2(&[
        "compare",
        "--html",
        &p("page.html"),
        &p("base-event"),
        &p("new-t2b"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    let screenshot =
        std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace2-compare.png");
    let out = std::process::Command::new("node")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/viewer/compare.mjs"))
        .arg(p("page.html"))
        .arg(&screenshot)
        .output()
        .expect("node runs");
    assert!(
        out.status.success(),
        "compare.mjs failed:\n{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    let shown: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    println!("screenshot: {} {shown}", screenshot.display());
    assert_eq!(shown["errors"], serde_json::json!([]), "console errors");
    assert_eq!(shown["requests"], serde_json::json!([]), "the page fetched");
    assert_eq!(shown["trees"], 1);
    // The process and three regions.
    assert_eq!(shown["bars"], 4);
    assert_eq!(shown["dists"], 1);
    let png = fs::read(&screenshot).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "{}", screenshot.display());
    let pixels = &shown["pixels"];
    let count = |name: &str| pixels[name].as_u64().unwrap();
    let [width, height] = [&shown["size"][0], &shown["size"][1]].map(|v| v.as_u64().unwrap());
    assert!(count("ink") > width * height / 50, "{pixels}");
    for colour in ["slower", "unchanged", "base", "new"] {
        assert!(count(colour) >= 100, "{colour}: {pixels}");
    }
    // Nothing got faster here.
    assert!(count("faster") < count("slower") / 10, "{pixels}");
}
