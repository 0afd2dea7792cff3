//! Every text formatted from a program's values is bounded, the same on every target:
//! an event's message and fields (`error`'s `msg` and `fmt`, `printf`, data values, a
//! JSON text too long to keep whole), a span's category, label and message. A value
//! longer than the bound (`Trace2::with_message_limit`, 256 bytes by default) is cut on
//! a character boundary and ends with `...`, in Normal, Perf, Event and the binary
//! target alike; and a huge `Debug` value is formatted no further than the bound, so it
//! allocates nothing near its size (a counting allocator checks it).

#[path = "support/mod.rs"]
mod support;

use std::path::Path;

use serde_json::Value;
use tracing::{error, info, info_span};
use tracing_subscriber::prelude::*;
use tracing_trace2::{Settings, Trace2};
use tracing_trace2_binary::{TextFormat, TextOptions, decode_to_text};
use tracing_trace2_test_support::alloc::{self as counting, CountingAlloc};

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// The Debug text of 500,000 zeros: `[0, 0, …]`, about 1.5 MB.
fn big() -> Vec<u8> {
    vec![0; 500_000]
}

/// The four streams one run wrote: Normal, Perf and Event, and the binary target's
/// stream decoded to each of them.
struct Streams {
    text: [String; 3],
    decoded: [String; 3],
}

/// Runs `f` with every target on, writing into `dir`, the bound at `limit` when given.
fn traced(dir: &Path, limit: Option<usize>, f: impl FnOnce()) -> Streams {
    let path = |ext: &str| dir.join(format!("t.{ext}"));
    let mut settings = Settings::default();
    settings.normal_destination = Some(path("normal").display().to_string());
    settings.perf_destination = Some(path("perf").display().to_string());
    settings.event_destination = Some(path("event").display().to_string());
    settings.event_nesting = 9;
    let mut trace2 =
        Trace2::with_settings(settings).with_binary_target(path("t2b").display().to_string());
    if let Some(limit) = limit {
        trace2 = trace2.with_message_limit(limit);
    }
    let layer = trace2.layer();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), f);
    let read = |ext: &str| std::fs::read_to_string(path(ext)).unwrap();
    let binary = std::fs::read(path("t2b")).unwrap();
    let decode = |format| {
        let mut out = Vec::new();
        let report = decode_to_text(&binary[..], &mut out, &TextOptions::new(format)).unwrap();
        assert!(report.is_complete(), "{report}");
        String::from_utf8(out).unwrap()
    };
    Streams {
        text: [read("normal"), read("perf"), read("event")],
        decoded: [
            decode(TextFormat::Normal),
            decode(TextFormat::Perf),
            decode(TextFormat::Event),
        ],
    }
}

/// The values one program writes from a huge value and from long text.
fn huge_values() {
    let big = big();
    let accents = "é".repeat(2000);
    let json = format!("{{\"list\":[{}0]}}", "1,".repeat(600));
    let span = info_span!("work", trace2.category = accents.as_str(), arg = ?big);
    let _entered = span.enter();
    error!(?big, "the value was too big");
    error!("{big:?}");
    info!(dump = ?big);
    info!(text = accents.as_str());
    info!("{accents}");
    info!(key = "list", json = json.as_str());
    info!(key = "small", json = "{\"a\": 1}");
}

/// The Event lines of kind `kind`.
fn lines_of<'a>(event: &'a [Value], kind: &str) -> Vec<&'a Value> {
    event.iter().filter(|e| e["event"] == kind).collect()
}

/// Checks one value: at most `limit` bytes, and cut (ending with `...`).
fn cut(value: &Value, limit: usize) -> Result<(), String> {
    let text = value.as_str().ok_or_else(|| format!("not text: {value}"))?;
    if text.len() > limit || !text.ends_with("...") {
        return Err(format!("{} bytes, not cut: {:.80}…", text.len(), text));
    }
    Ok(())
}

fn check_bounded(streams: &Streams, limit: usize) {
    // The binary target carries the same texts: decoded, it writes the same lines.
    for (text, decoded) in streams.text.iter().zip(&streams.decoded) {
        assert_eq!(text, decoded, "the binary target differs");
    }
    // No line comes near the values' size.
    for text in &streams.text {
        for line in text.lines() {
            assert!(
                line.len() < 3 * limit + 600,
                "{} bytes: {line:.200}",
                line.len()
            );
        }
    }
    let event = support::json_lines(streams.text[2].lines());
    let errors = lines_of(&event, "error");
    assert_eq!(errors.len(), 2);
    for error in &errors {
        cut(&error["msg"], limit).unwrap();
    }
    assert_eq!(errors[0]["fmt"], "the value was too big");
    cut(&errors[1]["fmt"], limit).unwrap();
    let data = lines_of(&event, "data");
    let value = |key: &str| &data.iter().find(|d| d["key"] == key).unwrap()["value"];
    cut(value("dump"), limit).unwrap();
    cut(value("text"), limit).unwrap();
    // A JSON text too long to keep whole is no JSON once cut: a plain datum.
    cut(value("list"), limit).unwrap();
    let json = lines_of(&event, "data_json");
    assert_eq!(json.len(), 1);
    assert_eq!(json[0]["value"], serde_json::json!({"a": 1}));
    let printf = lines_of(&event, "printf");
    cut(&printf[0]["msg"], limit).unwrap();
    let enter = lines_of(&event, "region_enter");
    cut(&enter[0]["category"], limit).unwrap();
    cut(&enter[0]["msg"], limit).unwrap();
    // Normal and Perf show the same cut texts.
    let msg = errors[0]["msg"].as_str().unwrap();
    assert!(streams.text[0].contains(msg) && streams.text[1].contains(msg));
}

#[test]
fn every_text_from_values_is_bounded_on_every_target() {
    let dir = support::process::fresh_dir("bounds-default").unwrap();
    let streams = traced(&dir, None, huge_values);
    check_bounded(&streams, 256);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_bound_is_the_message_limit() {
    let dir = support::process::fresh_dir("bounds-1000").unwrap();
    let streams = traced(&dir, Some(1000), huge_values);
    check_bounded(&streams, 1000);
    let event = support::json_lines(streams.text[2].lines());
    let data = lines_of(&event, "data");
    let dump = data.iter().find(|d| d["key"] == "dump").unwrap();
    assert_eq!(dump["value"].as_str().unwrap().len(), 1000);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A 1.5 MB `Debug` value in an error and in a datum is formatted no further than the
/// bound: the thread allocates far less than the value's text while tracing it.
#[test]
fn a_huge_debug_value_is_not_formatted_whole() {
    let dir = support::process::fresh_dir("bounds-alloc").unwrap();
    let big = big();
    let mut measured = Vec::new();
    traced(&dir, None, || {
        for _ in 0..3 {
            let before = counting::allocated_bytes();
            error!(?big, "the value was too big");
            info!(dump = ?big);
            info!("{big:?}");
            measured.push(counting::allocated_bytes() - before);
        }
    });
    assert_eq!(format!("{big:?}").len(), 1_500_000);
    // The first round grows the thread's buffers (and the binary target's batch); the
    // others reuse them. Neither comes near the 4.5 MB of the three values' text.
    assert!(
        measured[0] < 512 << 10 && measured[1..].iter().all(|&bytes| bytes < 16 << 10),
        "bytes allocated per round: {measured:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
