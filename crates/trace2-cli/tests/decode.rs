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

/// A writer of this file's test streams (fixed clock anchor, UTC, no exit handler) and
/// the memory it writes to.
fn test_writer() -> (MemorySink, BinaryWriter) {
    let sink = MemorySink::new();
    let writer = BinaryWriter::builder()
        .with_anchor_wall_us(ANCHOR)
        .with_utc_offset(0)
        .with_exit_handler(false)
        .build(sink.clone());
    (sink, writer)
}

fn stream() -> Vec<u8> {
    let (sink, writer) = test_writer();
    for record in records() {
        writer.record(&record);
    }
    writer.finish();
    sink.contents()
}

/// The text `format` makes of the streams' records merged in time order (at equal times,
/// in the order the streams are given): what `trace2 decode` prints for them.
fn merged_text(format: &dyn Format, streams: &[&[Record<'_>]]) -> String {
    let mut merged: Vec<(usize, &Record<'_>)> = streams
        .iter()
        .enumerate()
        .flat_map(|(n, records)| records.iter().map(move |r| (n, r)))
        .collect();
    merged.sort_by_key(|(stream, r)| (r.time.wall_us, *stream));
    let mut text = Vec::new();
    for (_, record) in merged {
        format.format(record, &mut text);
    }
    String::from_utf8(text).unwrap()
}

/// The three text formats by their `--format` names, at UTC as the test streams are.
fn text_formats() -> [(&'static str, Box<dyn Format>); 3] {
    [
        ("normal", Box::new(NormalFormat::new().with_utc_offset(0))),
        ("perf", Box::new(PerfFormat::new().with_utc_offset(0))),
        ("event", Box::new(EventFormat::new())),
    ]
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
    for (name, format) in text_formats() {
        let out = run_trace2(&["decode", "--format", name, file]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(stdout(&out), formatted(format.as_ref()), "{name}");
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
    let (sink, writer) = test_writer();
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

const SID_B: &str = "20261121T232137.816920Z-H0a7c9cdf-P00002a1f";

/// The records of `stream()` of another process (session `SID_B`).
fn records_b() -> Vec<Record<'static>> {
    records()
        .into_iter()
        .map(|r| Record { sid: SID_B, ..r })
        .collect()
}

/// A file two processes appended to: A, killed while it wrote its second batch (the
/// kernel stopped the `write` at the first page end), then B's whole stream after it.
/// Also the records A's intact first batch holds.
fn killed_mid_file() -> (Vec<u8>, Vec<Record<'static>>) {
    let (sink, writer) = test_writer();
    let records = records();
    let first = &records[..records.len() - 2];
    for record in first {
        writer.record(record);
    }
    writer.flush_all();
    let intact = sink.contents().len();
    // A second batch longer than a page: the one the kill cut.
    let long: &'static str = Box::leak("x".repeat(6000).into_boxed_str());
    let mut data = records[4];
    if let Trace2Event::Data { value, .. } = &mut data.event {
        *value = long;
    }
    writer.record(&data);
    writer.flush_all();
    let mut file = sink.contents();
    assert!(file.len() > 4096 + 8 + intact, "{}", file.len());
    file.truncate(4096);
    let (b, writer) = test_writer();
    for record in records_b() {
        writer.record(&record);
    }
    writer.finish();
    file.extend_from_slice(&b.contents());
    (file, first.to_vec())
}

#[test]
fn a_process_killed_mid_frame_with_another_after_it_is_a_kill_not_damage() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("shared.t2b");
    let (bytes, a_records) = killed_mid_file();
    fs::write(&file, bytes).unwrap();
    let file = file.to_str().unwrap();
    for (name, format) in text_formats() {
        let out = run_trace2(&["decode", "--format", name, file]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(0), "{name}: {err}");
        // One note, on A: killed while writing, not damage.
        assert_eq!(err.lines().count(), 1, "{name}: {err}");
        assert!(
            err.contains(SID)
                && err.contains("was killed while writing")
                && !err.contains("damaged"),
            "{name}: {err}"
        );
        // Each process's lines are what its text target wrote: A's up to its cut batch,
        // B's all, merged in time order (A first at equal times: it came first).
        let want = merged_text(format.as_ref(), &[&a_records, &records_b()]);
        assert_eq!(stdout(&out), want, "{name}");
    }
    let out = run_trace2(&["summary", file]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
    let text = stdout(&out);
    assert!(text.contains("no exit"), "{text}");
    let out = run_trace2(&["summary", "--json", file]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains(SID) && text.contains(SID_B), "{text}");
}

const SID_C: &str = "20261121T232137.816920Z-H0a7c9cdf-P00002a20";

/// A process that wrote a first batch (the records but `exit` and `atexit`), then a
/// second batch longer than a page: its first batch's frames (with its STREAM frame),
/// the long batch's frame, and the records of the first batch.
fn writer_with_a_long_batch(sid: &'static str) -> (Vec<u8>, Vec<u8>, Vec<Record<'static>>) {
    let (sink, writer) = test_writer();
    let records: Vec<Record<'static>> =
        records().into_iter().map(|r| Record { sid, ..r }).collect();
    let first = &records[..records.len() - 2];
    for record in first {
        writer.record(record);
    }
    writer.flush_all();
    let intact = sink.contents();
    let long: &'static str = Box::leak("x".repeat(6000).into_boxed_str());
    let mut data = records[4];
    if let Trace2Event::Data { value, .. } = &mut data.event {
        *value = long;
    }
    writer.record(&data);
    writer.flush_all();
    let long_frame = sink.contents()[intact.len()..].to_vec();
    assert!(long_frame.len() > 4096 + 8, "{}", long_frame.len());
    (intact, long_frame, first.to_vec())
}

#[test]
fn processes_killed_one_after_the_other_are_kills_not_damage() {
    // A and B each wrote a first batch; A is killed in the `write` of its long batch,
    // which stops at the first page end; B, waiting to append, writes its own long
    // batch from there and is killed in turn (at the next page end); C then appends its
    // whole stream.
    let (a_intact, a_long, a_records) = writer_with_a_long_batch(SID);
    let (b_intact, b_long, b_records) = writer_with_a_long_batch(SID_B);
    let mut bytes = [a_intact, b_intact].concat();
    let a_cut = 4096 - bytes.len();
    bytes.extend_from_slice(&a_long[..a_cut]);
    bytes.extend_from_slice(&b_long[..4096]);
    let (c, writer) = test_writer();
    let c_records: Vec<Record<'static>> = records()
        .into_iter()
        .map(|r| Record { sid: SID_C, ..r })
        .collect();
    for record in &c_records {
        writer.record(record);
    }
    writer.finish();
    bytes.extend_from_slice(&c.contents());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("shared.t2b");
    fs::write(&file, bytes).unwrap();
    let file = file.to_str().unwrap();
    for (name, format) in text_formats() {
        let out = run_trace2(&["decode", "--format", name, file]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(0), "{name}: {err}");
        // One note each on A and B: killed while writing, not damage.
        let notes: Vec<&str> = err.lines().collect();
        assert_eq!(notes.len(), 2, "{name}: {err}");
        for (note, (sid, bytes)) in notes.iter().zip([(SID, a_cut), (SID_B, 4096)]) {
            let want = format!(
                "stream {sid} (pid {}) was killed while writing: its last frame ({bytes} bytes) \
                 stops at a page end; that batch is lost, its other 6 events are all there",
                std::process::id()
            );
            assert!(note.ends_with(&want), "{name}: {note}\nwant {want}");
        }
        // Each process's lines are what its text target wrote, merged in time order
        // (at equal times, in the order the streams came).
        let want = merged_text(format.as_ref(), &[&a_records, &b_records, &c_records]);
        assert_eq!(stdout(&out), want, "{name}");
    }
    let out = run_trace2(&["summary", file]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
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

/// A stream of one process whose texts carry terminal escapes: a window title (`ESC ] 0 ; … BEL`),
/// a screen clear (`ESC [ 2 J`) and a C1 CSI (U+009B).
fn stream_with_escapes() -> Vec<u8> {
    let (sink, writer) = test_writer();
    let mut records = records();
    let mut error = records[2];
    error.event = Trace2Event::Error {
        msg: Some("title\u{1b}]0;pwned\u{7} clear\u{1b}[2J csi\u{9b}31m"),
        fmt: Some("%s"),
    };
    records.insert(3, error);
    for record in &records {
        writer.record(record);
    }
    writer.finish();
    sink.contents()
}

/// Runs `trace2 args…` with its standard output on a terminal (a pty that `script` opens);
/// the terminal's CR LF line ends are read back as LF.
#[cfg(target_os = "linux")]
fn on_a_terminal(args: &[&str]) -> (Option<i32>, String) {
    let mut command = String::from(env!("CARGO_BIN_EXE_trace2"));
    for arg in args {
        command.push_str(" '");
        command.push_str(&arg.replace('\'', r"'\''"));
        command.push('\'');
    }
    let out = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("`script` (util-linux) runs a command on a pty");
    let text = String::from_utf8(out.stdout).unwrap().replace("\r\n", "\n");
    (out.status.code(), text)
}

/// On a terminal, `decode` shows a trace's control characters as escapes, as the other
/// commands do; `--raw` writes them as they are; into a pipe the text stays byte-exact.
#[cfg(target_os = "linux")]
#[test]
fn decode_to_a_terminal_shows_escapes_unless_raw() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("escapes.t2b");
    fs::write(&file, stream_with_escapes()).unwrap();
    let file = file.to_str().unwrap();
    let raw_text = {
        let out = run_trace2(&["decode", "--format", "normal", file]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stdout(&out)
    };
    // A pipe gets the bytes the Normal target writes: the escapes themselves.
    assert!(
        raw_text.contains("title\u{1b}]0;pwned\u{7} clear\u{1b}[2J csi\u{9b}31m"),
        "{raw_text:?}"
    );

    let (code, shown) = on_a_terminal(&["decode", "--format", "normal", file]);
    assert_eq!(code, Some(0), "{shown}");
    assert!(
        !shown.contains(['\u{1b}', '\u{7}', '\u{9b}']),
        "raw control characters on the terminal: {shown:?}"
    );
    // Line for line the text, made visible as the other commands show it.
    let want: Vec<String> = raw_text
        .lines()
        .map(|line| trace2_cli::visible::visible(line).into_owned())
        .collect();
    assert_eq!(shown.lines().collect::<Vec<_>>(), want);
    assert!(
        shown.contains(r"title\e]0;pwned\x07 clear\e[2J csi\u{9b}31m"),
        "{shown}"
    );

    let (code, raw) = on_a_terminal(&["decode", "--raw", "--format", "normal", file]);
    assert_eq!(code, Some(0), "{raw}");
    assert_eq!(raw, raw_text);
}

/// `decode DIR` decodes the directory's binary traces in name order, one after another as
/// several files are, and passes over its other files; a directory without a binary trace,
/// and a `.t2b` file in it that is not one, are errors.
#[test]
fn decode_reads_a_directory_of_binary_traces() {
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces");
    fs::create_dir(&traces).unwrap();
    fs::write(traces.join("b.t2b"), stream_with_escapes()).unwrap();
    fs::write(traces.join("a.t2b"), stream()).unwrap();
    // Another target's file and a sentinel beside them.
    fs::write(
        traces.join("c.event"),
        formatted(&EventFormat::new()).as_bytes(),
    )
    .unwrap();
    fs::write(traces.join("git-trace2-discard"), b"").unwrap();
    let files = |names: &[&str]| -> Vec<String> {
        names
            .iter()
            .map(|n| traces.join(n).to_str().unwrap().to_owned())
            .collect()
    };
    let decode = |paths: &[String]| {
        let mut args = vec!["decode", "--format", "perf"];
        args.extend(paths.iter().map(String::as_str));
        run_trace2(&args)
    };
    let of_files = decode(&files(&["a.t2b", "b.t2b"]));
    assert_eq!(of_files.status.code(), Some(0), "{}", stderr(&of_files));
    let of_dir = decode(&[traces.to_str().unwrap().to_owned()]);
    assert_eq!(of_dir.status.code(), Some(0), "{}", stderr(&of_dir));
    assert_eq!(stderr(&of_dir), "");
    assert!(!of_dir.stdout.is_empty());
    assert_eq!(of_dir.stdout, of_files.stdout);

    // A `.t2b` file that holds nothing: reported, the rest still decoded.
    fs::write(traces.join("d.t2b"), b"").unwrap();
    let out = decode(&[traces.to_str().unwrap().to_owned()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(out.stdout, of_files.stdout);
    let err = stderr(&out);
    assert!(err.contains("d.t2b: empty; skipped"), "{err}");

    let empty = dir.path().join("empty");
    fs::create_dir(&empty).unwrap();
    fs::write(empty.join("c.event"), formatted(&EventFormat::new())).unwrap();
    let out = decode(&[empty.to_str().unwrap().to_owned()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), "");
    let err = stderr(&out);
    assert!(err.contains("directory holds no binary trace"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}
