//! A kind this reader does not know is reported, never dropped silently: in a stream of
//! a later minor version that declares it, the events around it are decoded and the
//! unknown event is counted (and `is_complete` says so); an undeclared kind byte ends
//! its batch with a warning that names it; and the Event reader refuses a line of an
//! unknown kind with an error that names it.

use tracing_trace2_binary::frame;
use tracing_trace2_binary::header::{DeclaredKind, End, StreamHeader, TextDefaults};
use tracing_trace2_binary::spec::kind;
use tracing_trace2_binary::varint;
use tracing_trace2_binary::{DecodeOptions, decode};

const STREAM_ID: u64 = 7;

fn put_u(out: &mut Vec<u8>, value: u64) {
    let mut buf = [0; varint::MAX_LEN];
    let n = varint::encode(&mut buf, value);
    out.extend_from_slice(&buf[..n]);
}

/// A stream header, one batch of `printf`, a `future` (the kind `0x20`, with a title
/// and a count, declared in the header when `declared`) and another `printf`, and the
/// END frame.
fn stream_with_kind_0x20(declared: bool) -> Vec<u8> {
    let mut out = Vec::new();
    StreamHeader {
        major: 1,
        minor: 1,
        stream_id: STREAM_ID,
        flags: 0,
        writer: "a later writer".into(),
        sid: "20260101T000000.000000Z-H01234567-P0000abcd".into(),
        depth: 0,
        pid: 43981,
        freq: 1_000_000,
        anchor_wall_us: 1_700_000_000_000_000,
        utc_offset_s: 0,
        event_format_version: "4".into(),
        defaults: TextDefaults::default(),
        declared: if declared {
            vec![DeclaredKind {
                id: 0x20,
                name: "future".into(),
                signature: "bu".into(),
            }]
        } else {
            Vec::new()
        },
    }
    .write_frame(&mut out);
    let start = frame::begin(&mut out, frame::kind::BATCH);
    out.extend_from_slice(&STREAM_ID.to_le_bytes());
    for header_field in [0, 0, 0, 1] {
        // thread_index, batch_seq, base_ticks, depth_at_start
        put_u(&mut out, header_field);
    }
    put_u(&mut out, 4);
    out.extend_from_slice(b"main");
    // printf, 0 ticks later, no message.
    out.extend_from_slice(&[kind::PRINTF, 0, 0]);
    // progress "title" 3, one tick later.
    out.extend_from_slice(&[0x20, 1, 5]);
    out.extend_from_slice(b"title");
    put_u(&mut out, 3);
    out.extend_from_slice(&[kind::PRINTF, 1, 0]);
    frame::seal(&mut out, start);
    End {
        stream_id: STREAM_ID,
        threads: vec![(0, 1)],
    }
    .write_frame(&mut out);
    out
}

#[test]
fn an_unknown_kind_is_reported_not_dropped() {
    let bytes = stream_with_kind_0x20(true);
    let mut names = Vec::new();
    let report = decode(&bytes[..], &DecodeOptions::default(), |_, record| {
        names.push(record.event.name())
    })
    .unwrap();
    assert_eq!(names, ["printf", "printf"]);
    let thread = &report.streams[0].threads[0];
    assert_eq!((thread.events, thread.unknown_events), (2, 1));
    assert!(!report.is_complete(), "{report}");
    assert!(report.to_string().contains("1 events unknown"), "{report}");
}

#[test]
fn an_undeclared_kind_ends_its_batch_with_a_warning() {
    let bytes = stream_with_kind_0x20(false);
    let mut names = Vec::new();
    let report = decode(&bytes[..], &DecodeOptions::default(), |_, record| {
        names.push(record.event.name())
    })
    .unwrap();
    // The event before it is kept; nothing after it in the batch is guessed at.
    assert_eq!(names, ["printf"]);
    assert_eq!(report.streams[0].threads[0].abandoned_batches, 1);
    assert!(!report.is_complete(), "{report}");
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("undeclared record kind 0x20")),
        "{:?}",
        report.warnings
    );
}

#[test]
fn the_event_reader_reports_an_unknown_kind() {
    let line = r#"{"event":"future","sid":"s","thread":"main","title":"t","count":3}"#;
    let err = tracing_trace2_event::read_line(line).unwrap_err();
    assert_eq!(
        err,
        tracing_trace2_event::ReadError::UnknownKind("future".into())
    );
    assert!(err.to_string().contains("\"future\""), "{err}");
    // A known kind of the same shape reads.
    let known = r#"{"event":"cmd_mode","sid":"s","thread":"main","name":"t"}"#;
    assert!(tracing_trace2_event::read_line(known).is_ok());
}
