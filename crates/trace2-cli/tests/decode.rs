//! `trace2 decode` and binary input to `summary`: a stream written by the binary target decodes
//! to exactly the lines the Normal, Perf and Event formatters write for the same records; a cut
//! stream yields the intact prefix, one line on stderr and exit 1; a text file is refused.

mod common;

use std::fs;

use common::{run_trace2, stderr, stdout};
use tracing_trace2_binary::BinaryWriter;
use tracing_trace2_core::{
    Callsite, Format, MemorySink, Record, RegionInfo, Timestamp, Trace2Event,
};
use tracing_trace2_event::EventFormat;
use tracing_trace2_normal::NormalFormat;
use tracing_trace2_perf::PerfFormat;

const SID: &str = "20261121T232137.816920Z-H0a7c9cdf-P00002a1e";
const ANCHOR: i64 = 1_795_303_297_816_000;

fn records() -> Vec<Record<'static>> {
    let region = RegionInfo {
        category: Some("index"),
        label: Some("do_read_index"),
        msg: Some(".git/index"),
        repo: None,
    };
    let events = [
        Trace2Event::Version { exe: "1.0" },
        Trace2Event::Start {
            argv: &["tool", "status"],
        },
        Trace2Event::CmdName {
            name: "status",
            hierarchy: "status",
        },
        Trace2Event::RegionEnter { region, nesting: 1 },
        Trace2Event::Data {
            repo: None,
            category: "index",
            key: "entries",
            value: "1500",
            nesting: 2,
            t_rel_us: 40,
        },
        Trace2Event::RegionLeave {
            region,
            nesting: 1,
            t_rel_us: 95,
        },
        Trace2Event::Exit { code: 0 },
        Trace2Event::Atexit { code: 0 },
    ];
    events
        .into_iter()
        .enumerate()
        .map(|(i, event)| {
            let t_abs_us = 100 + 50 * i as u64;
            let open_regions = match event {
                Trace2Event::Data { .. } => 1,
                _ => 0,
            };
            Record {
                event,
                time: Timestamp {
                    wall_us: ANCHOR + t_abs_us as i64,
                    t_abs_us,
                },
                sid: SID,
                depth: 0,
                thread: "main",
                callsite: Callsite {
                    file: Some("src/main.rs"),
                    line: 10 + i as u32,
                },
                open_regions,
            }
        })
        .collect()
}

fn stream() -> Vec<u8> {
    let sink = MemorySink::new();
    let writer = BinaryWriter::builder()
        .with_anchor_wall_us(ANCHOR)
        .with_utc_offset(0)
        .with_exit_handler(false)
        .build(sink.clone());
    for record in records() {
        writer.record(&record);
    }
    writer.finish();
    sink.contents()
}

fn formatted(format: &dyn Format) -> String {
    let mut out = Vec::new();
    for record in records() {
        format.format(&record, &mut out);
    }
    String::from_utf8(out).unwrap()
}

#[test]
fn decode_writes_what_the_text_formatters_write() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("trace.t2b");
    fs::write(&file, stream()).unwrap();
    let file = file.to_str().unwrap();
    for (name, format) in [
        (
            "normal",
            &NormalFormat::new().with_utc_offset(0) as &dyn Format,
        ),
        ("perf", &PerfFormat::new().with_utc_offset(0)),
        ("event", &EventFormat::new()),
    ] {
        let out = run_trace2(&["decode", "--format", name, file]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(stdout(&out), formatted(format), "{name}");
    }
    let out = run_trace2(&["decode", "--format", "event", "--brief", file]);
    assert_eq!(
        stdout(&out),
        formatted(&EventFormat::new().with_brief(true))
    );
}

#[test]
fn a_cut_stream_gives_its_intact_prefix_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let whole = stream();
    let cut = dir.path().join("cut.t2b");
    fs::write(&cut, &whole[..whole.len() - 7]).unwrap();
    let text = dir.path().join("trace.event");
    fs::write(&text, formatted(&EventFormat::new())).unwrap();
    let out = run_trace2(&[
        "decode",
        "--format",
        "normal",
        cut.to_str().unwrap(),
        text.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let want = formatted(&NormalFormat::new().with_utc_offset(0));
    assert!(want.starts_with(&stdout(&out)), "{}", stdout(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 2, "{err}");
    assert!(
        err.contains("cut.t2b") && err.contains("trace.event: not a binary trace"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn summary_reads_binary_input() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("trace.t2b");
    fs::write(&file, stream()).unwrap();
    let out = run_trace2(&["summary", "--json", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("do_read_index"), "{text}");
    assert!(text.contains(SID), "{text}");
}

/// The records of `stream()` written by a process that is killed before it ends: every batch is
/// flushed, but no END frame follows.
fn killed_stream() -> Vec<u8> {
    let sink = MemorySink::new();
    let writer = BinaryWriter::builder()
        .with_anchor_wall_us(ANCHOR)
        .with_utc_offset(0)
        .with_exit_handler(false)
        .build(sink.clone());
    let records = records();
    for record in &records[..records.len() - 2] {
        writer.record(record);
    }
    writer.flush_all();
    sink.contents()
}

#[test]
fn a_killed_process_is_not_damage() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("killed.t2b");
    fs::write(&file, killed_stream()).unwrap();
    let file = file.to_str().unwrap();
    let out = run_trace2(&["decode", "--format", "event", file]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(stdout(&out).lines().count(), records().len() - 2);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(SID) && err.contains("ended without an END frame") && !err.contains("damaged"),
        "{err}"
    );
    let out = run_trace2(&["summary", file]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("no exit"), "{}", stdout(&out));
    assert_eq!(stderr(&out), "");
}

#[test]
fn a_binary_trace_summarises_and_exports_as_its_event_text_does() {
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("trace.t2b");
    fs::write(&binary, stream()).unwrap();
    let text = dir.path().join("trace.event");
    fs::write(&text, formatted(&EventFormat::new())).unwrap();
    let run = |args: &[&str], file: &std::path::Path| {
        let mut args = args.to_vec();
        args.push(file.to_str().unwrap());
        let out = run_trace2(&args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        out.stdout
    };
    let summary = ["summary", "--json"];
    assert_eq!(run(&summary, &binary), run(&summary, &text));
    let export = ["export", "--format", "chrome", "-o", "-"];
    assert_eq!(run(&export, &binary), run(&export, &text));
}
