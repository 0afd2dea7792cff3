//! The binary record encoding round-trips: for every event variant, with arbitrary
//! strings and numbers, a decoded record is field for field the record that was encoded,
//! and the three formats (brief and not) render it to exactly the same bytes. That is
//! what lets the deferred writer format on another thread what the traced thread saw.

use tracing_trace2_event::EventFormat;
use tracing_trace2_normal::NormalFormat;
use tracing_trace2_perf::PerfFormat;
use tracing_trace2_record::codec::{self, Replayer};
use tracing_trace2_record::{Format, Record};
use tracing_trace2_test_support::random::{KINDS, Owned, Rng};

fn formats() -> Vec<(&'static str, Box<dyn Format>)> {
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

fn render(format: &dyn Format, record: &Record<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    format.format(record, &mut out);
    out
}

#[test]
fn every_variant_round_trips_through_all_formats() {
    let formats = formats();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut names = std::collections::BTreeSet::new();
    let mut lines = 0;
    let mut not_written = std::collections::BTreeMap::new();
    let mut replayer = Replayer::new();
    for kind in 0..KINDS {
        for _ in 0..300 {
            let owned = Owned::new(&mut rng, kind);
            let list: Vec<&str> = owned.list.iter().map(String::as_str).collect();
            let record = owned.record(&list);
            names.insert(record.event.name());
            // Behind other bytes, as records follow each other in a queue message.
            let mut buf = b"prefix".to_vec();
            codec::encode(&record, &mut buf);
            let mut decoded_list = Vec::new();
            let (back, rest) = codec::decode(&buf[6..], &mut decoded_list).unwrap();
            assert!(rest.is_empty());
            // Every field, not only those some format prints.
            assert_eq!(format!("{back:?}"), format!("{record:?}"));
            for (name, format) in &formats {
                let want = render(format.as_ref(), &record);
                lines += usize::from(!want.is_empty());
                // The deferred writer skips what a format says it does not write: that
                // must never be a line.
                if !format.writes(&record) {
                    assert!(want.is_empty(), "{name} writes {record:?}");
                    *not_written.entry(*name).or_insert(0) += 1;
                }
                assert_eq!(
                    String::from_utf8_lossy(&render(format.as_ref(), &back)),
                    String::from_utf8_lossy(&want),
                    "{name}: {record:?}"
                );
            }
            // The same through the reusable decoder.
            let mut seen = 0;
            replayer
                .replay(&buf[6..], |r| {
                    seen += 1;
                    assert_eq!(format!("{r:?}"), format!("{record:?}"));
                })
                .unwrap();
            assert_eq!(seen, 1);
        }
    }
    // Every variant (and the per-thread timer and counter) was generated ...
    assert_eq!(names.len(), KINDS, "{names:?}");
    // ... and most records render to a line in most formats.
    assert!(lines > KINDS * 300 * 3, "{lines}");
    // Normal skips regions, data and thread lines; Event skips deep nesting.
    for name in ["normal", "normal-brief", "event-brief"] {
        assert!(
            not_written.get(name).is_some_and(|&n| n > 300),
            "{not_written:?}"
        );
    }
}
