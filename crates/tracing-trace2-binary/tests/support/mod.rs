//! Helpers of the integration tests: the workspace's generator of arbitrary records
//! (test-support, with the session fixed per stream: `Owned::record_in`), writing records
//! with a writer into memory, and decoding them back; and the runner of the tests that
//! have their own `main` (they start themselves again as the traced program).
//!
//! Each test binary uses a part of it, hence the `dead_code` allowance.

#![allow(dead_code)]

use tracing_trace2_binary::{BinaryWriter, BinaryWriterBuilder, DecodeOptions, DecodeReport};
use tracing_trace2_core::{Format, MemorySink, Record};
use tracing_trace2_event::EventFormat;
use tracing_trace2_normal::NormalFormat;
use tracing_trace2_perf::PerfFormat;

#[allow(unused_imports)]
pub use tracing_trace2_test_support::random::{KINDS, Owned, Rng};

/// The formats and settings the tests compare under.
pub fn formats() -> Vec<(&'static str, Box<dyn Format>)> {
    vec![
        (
            "normal",
            Box::new(NormalFormat::new().with_utc_offset(3600)),
        ),
        (
            "normal-brief",
            Box::new(NormalFormat::new().with_brief(true).with_utc_offset(-19800)),
        ),
        ("perf", Box::new(PerfFormat::new().with_utc_offset(-7200))),
        (
            "perf-brief",
            Box::new(PerfFormat::new().with_brief(true).with_utc_offset(0)),
        ),
        ("event", Box::new(EventFormat::new().with_max_nesting(100))),
        (
            "event-brief",
            Box::new(EventFormat::new().with_brief(true).with_max_nesting(2)),
        ),
    ]
}

/// The line `format` writes for `record`.
pub fn render(format: &dyn Format, record: &Record<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    format.format(record, &mut out);
    out
}

/// A builder for tests: no exit handler (tests end their streams themselves), and a
/// flush interval that never fires.
pub fn builder() -> BinaryWriterBuilder {
    BinaryWriter::builder()
        .with_exit_handler(false)
        .with_flush_interval(std::time::Duration::from_secs(3600))
}

/// Writes `records` with a writer from `builder`, finishes the stream, and returns
/// the bytes.
pub fn write_all(builder: BinaryWriterBuilder, records: &[Record<'_>]) -> Vec<u8> {
    let sink = MemorySink::new();
    let writer = builder.build(sink.clone());
    for r in records {
        writer.record(r);
    }
    writer.finish();
    drop(writer);
    sink.contents()
}

/// One decoded record, owned: its stream index and the `Debug` text of the record
/// (every field).
pub type Decoded = (usize, String);

/// Decodes `bytes` into owned records.
pub fn decode_all(bytes: &[u8]) -> (Vec<Decoded>, DecodeReport) {
    decode_with(bytes, &DecodeOptions::default())
}

/// [`decode_all`] with options.
pub fn decode_with(bytes: &[u8], options: &DecodeOptions) -> (Vec<Decoded>, DecodeReport) {
    let mut out = Vec::new();
    let report = tracing_trace2_binary::decode(bytes, options, |stream, record| {
        out.push((stream.index, format!("{record:?}")));
    })
    .expect("reading from memory cannot fail");
    (out, report)
}

/// Splits a stream of frames into its frames (all intact).
pub fn frames(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut scanner = tracing_trace2_binary::decode::FrameScanner::new(bytes);
    let mut out = Vec::new();
    while let Some(f) = scanner.next_frame().unwrap() {
        let start = f.offset as usize;
        out.push(bytes[start..start + f.payload.len() + 12].to_vec());
    }
    assert_eq!(scanner.stats().skipped_bytes, 0);
    out
}

/// Whether `part` is a sub-multiset of `whole`.
pub fn is_subset(part: &[Decoded], whole: &[Decoded]) -> bool {
    let mut counts = std::collections::HashMap::new();
    for d in whole {
        *counts.entry(d).or_insert(0i64) += 1;
    }
    part.iter().all(|d| {
        let c = counts.entry(d).or_insert(0);
        *c -= 1;
        *c >= 0
    })
}

/// Runs `tests` whose names contain one of the command line's non-flag arguments (all
/// when there is none), each caught if it panics, and prints libtest-like lines.
pub fn run_tests(suite: &str, tests: &[(&str, fn())]) -> std::process::ExitCode {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let (mut passed, mut failed) = (0, 0);
    for &(name, test) in tests {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let ok = std::panic::catch_unwind(test).is_ok();
        println!("test {name} ... {}", if ok { "ok" } else { "FAILED" });
        if ok {
            passed += 1;
        } else {
            failed += 1;
        }
    }
    println!("\n{suite}: {passed} passed, {failed} failed");
    if failed == 0 {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}
