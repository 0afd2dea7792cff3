//! Round trips: every record written comes back from the decoder field for field, and
//! renders to the same bytes in the Normal, Perf and Event formats (brief and not) as
//! the record that was written, through the writer's defaults and through overrides.

mod support;

use support::{KINDS, Owned, Rng, builder, decode_all, formats, render, write_all};
use tracing_trace2_binary::{
    DecodeOptions, MIN_BATCH_SIZE, TextDefaults, TextFormat, TextOptions, decode,
    decode_to_event_json, decode_to_text,
};
use tracing_trace2_core::{Callsite, Record, RegionInfo, Timestamp, Trace2Event};
use tracing_trace2_event::EventFormat;
use tracing_trace2_normal::NormalFormat;
use tracing_trace2_perf::PerfFormat;

const SID: &str =
    "20260101T000000.000000Z-H0123abcd-P00001234/20260101T000000.100000Z-H0123abcd-P00001235";

/// Records of every kind with arbitrary values, in the session `SID` at depth 1.
fn arbitrary(seed: u64, per_kind: usize) -> Vec<Owned> {
    let mut rng = Rng(seed);
    let mut owned = Vec::new();
    for _ in 0..per_kind {
        for kind in 0..KINDS {
            owned.push(Owned::new(&mut rng, kind));
        }
    }
    owned
}

#[test]
fn every_kind_round_trips_field_for_field() {
    let owned = arbitrary(0x9E37_79B9_7F4A_7C15, 100);
    let lists: Vec<Vec<&str>> = owned.iter().map(Owned::list_refs).collect();
    let records: Vec<Record<'_>> = owned
        .iter()
        .zip(&lists)
        .map(|(o, l)| o.record_in(l, SID, 1))
        .collect();
    // Small batches: many frames, with definitions repeated in each.
    for size in [MIN_BATCH_SIZE, 1 << 20] {
        let bytes = write_all(builder().with_batch_size(size), &records);
        let (decoded, report) = decode_all(&bytes);
        assert!(report.is_complete(), "{report}");
        assert_eq!(report.events, records.len() as u64);
        assert_eq!(decoded.len(), records.len());
        for (d, r) in decoded.iter().zip(&records) {
            assert_eq!(d.1, format!("{r:?}"));
        }
    }
}

#[test]
fn edge_values_round_trip() {
    let argv = ["", "a b", "é\"\n", "\u{0}"];
    let region = RegionInfo {
        repo: Some(i64::MIN),
        category: Some(""),
        label: None,
        msg: Some(""),
    };
    let events = [
        Trace2Event::RegionEnter {
            region,
            nesting: u32::MAX,
        },
        Trace2Event::RegionLeave {
            region: RegionInfo::default(),
            nesting: 0,
            t_rel_us: u64::MAX,
        },
        Trace2Event::Exit { code: i32::MIN },
        Trace2Event::Signal { signo: -1 },
        Trace2Event::ChildExit {
            child_id: u64::MAX,
            pid: i64::MIN,
            code: i64::MAX,
            elapsed_us: 0,
        },
        Trace2Event::DefRepo {
            repo: i64::MAX,
            worktree: "",
        },
        Trace2Event::Start { argv: &argv },
        Trace2Event::Start { argv: &[] },
        Trace2Event::Printf { msg: None },
        Trace2Event::Printf { msg: Some("") },
        Trace2Event::Error {
            msg: None,
            fmt: None,
        },
    ];
    let mut records = Vec::new();
    for (i, event) in events.into_iter().enumerate() {
        for (wall_us, t_abs_us, open) in [
            (i64::MIN, u64::MAX, u32::MAX),
            (i64::MAX, 0, 0),
            (0, u64::MAX / 2, 1),
        ] {
            records.push(Record {
                event,
                time: Timestamp { wall_us, t_abs_us },
                sid: SID,
                depth: u32::MAX,
                thread: if i % 2 == 0 { "main" } else { "" },
                callsite: Callsite {
                    file: (i % 3 != 0).then_some(""),
                    line: u32::MAX,
                },
                open_regions: open,
            });
        }
    }
    let bytes = write_all(builder().with_anchor_wall_us(i64::MIN), &records);
    let (decoded, report) = decode_all(&bytes);
    assert!(report.is_complete(), "{report}");
    let want: Vec<String> = records.iter().map(|r| format!("{r:?}")).collect();
    let got: Vec<String> = decoded.into_iter().map(|d| d.1).collect();
    assert_eq!(got, want);
}

#[test]
fn decoded_records_render_like_the_originals_in_every_format() {
    let owned = arbitrary(42, 40);
    let lists: Vec<Vec<&str>> = owned.iter().map(Owned::list_refs).collect();
    let records: Vec<Record<'_>> = owned
        .iter()
        .zip(&lists)
        .map(|(o, l)| o.record_in(l, SID, 1))
        .collect();
    let bytes = write_all(builder(), &records);
    let formats = formats();
    let mut index = 0;
    let mut lines = 0;
    decode(&bytes[..], &DecodeOptions::default(), |_, record| {
        for (name, format) in &formats {
            let want = render(format.as_ref(), &records[index]);
            lines += usize::from(!want.is_empty());
            assert_eq!(
                String::from_utf8_lossy(&render(format.as_ref(), record)),
                String::from_utf8_lossy(&want),
                "{name}: {:?}",
                records[index]
            );
        }
        index += 1;
    })
    .unwrap();
    assert_eq!(index, records.len());
    assert!(lines > records.len() * 3, "{lines}");
}

/// Records as the core writes them: wall time = anchor + t_abs, times increasing.
fn live_like(owned: &[Owned], anchor: i64) -> Vec<Owned> {
    let mut t = 0;
    owned
        .iter()
        .map(|o| {
            t += 1 + o.t_abs_us % 1000;
            Owned {
                t_abs_us: t,
                wall_us: anchor + t as i64,
                ..o.clone()
            }
        })
        .collect()
}

#[test]
fn text_decode_defaults_to_the_writers_settings() {
    const ANCHOR: i64 = 1_795_303_297_816_635;
    let owned = live_like(&arbitrary(7, 20), ANCHOR);
    let lists: Vec<Vec<&str>> = owned.iter().map(Owned::list_refs).collect();
    let records: Vec<Record<'_>> = owned
        .iter()
        .zip(&lists)
        .map(|(o, l)| o.record_in(l, SID, 1))
        .collect();
    let defaults = TextDefaults {
        normal_brief: true,
        perf_brief: false,
        event_brief: true,
        event_nesting: 5,
    };
    let bytes = write_all(
        builder()
            .with_anchor_wall_us(ANCHOR)
            .with_utc_offset(-12_600)
            .with_text_defaults(defaults),
        &records,
    );
    let expect = |format: &dyn tracing_trace2_core::Format| -> Vec<u8> {
        records.iter().flat_map(|r| render(format, r)).collect()
    };
    let cases: [(TextOptions, Vec<u8>); 5] = [
        (
            TextOptions::new(TextFormat::Normal),
            expect(
                &NormalFormat::new()
                    .with_brief(true)
                    .with_utc_offset(-12_600),
            ),
        ),
        (
            TextOptions::new(TextFormat::Perf),
            expect(&PerfFormat::new().with_utc_offset(-12_600)),
        ),
        (
            TextOptions::new(TextFormat::Event),
            expect(&EventFormat::new().with_brief(true).with_max_nesting(5)),
        ),
        // Overrides.
        (
            TextOptions::new(TextFormat::Perf)
                .with_brief(true)
                .with_utc_offset(3600),
            expect(&PerfFormat::new().with_brief(true).with_utc_offset(3600)),
        ),
        (
            TextOptions::new(TextFormat::Event).with_event_nesting(1),
            expect(&EventFormat::new().with_brief(true).with_max_nesting(1)),
        ),
    ];
    for (options, want) in cases {
        let mut got = Vec::new();
        let report = decode_to_text(&bytes[..], &mut got, &options).unwrap();
        assert!(report.is_complete());
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
            "{options:?}"
        );
    }
    let mut json = Vec::new();
    decode_to_event_json(&bytes[..], &mut json).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&json),
        String::from_utf8_lossy(&expect(&EventFormat::new().with_max_nesting(u32::MAX)))
    );
}

#[test]
fn a_change_of_session_starts_a_new_stream() {
    let owned = arbitrary(3, 2);
    let lists: Vec<Vec<&str>> = owned.iter().map(Owned::list_refs).collect();
    let sids = ["a/b", "c", "a/b"];
    let records: Vec<Record<'_>> = owned
        .iter()
        .zip(&lists)
        .enumerate()
        .map(|(i, (o, l))| o.record_in(l, sids[i * 3 / owned.len()], (i * 3 / owned.len()) as u32))
        .collect();
    let bytes = write_all(builder(), &records);
    let (decoded, report) = decode_all(&bytes);
    assert_eq!(report.streams.len(), 3, "{report}");
    assert!(report.streams.iter().all(|s| s.ended), "{report}");
    let got: Vec<&String> = decoded.iter().map(|d| &d.1).collect();
    let want: Vec<String> = records.iter().map(|r| format!("{r:?}")).collect();
    assert_eq!(got.len(), want.len());
    // Each stream's records, in order, whatever the order of the streams.
    for s in 0..3 {
        let ours: Vec<&String> = decoded.iter().filter(|d| d.0 == s).map(|d| &d.1).collect();
        let first = want.iter().position(|w| w == ours[0]).unwrap();
        assert_eq!(
            ours,
            want[first..first + ours.len()].iter().collect::<Vec<_>>()
        );
    }
}

#[test]
fn huge_values_go_in_jumbo_frames_and_longer_ones_are_cut() {
    let big = "v".repeat(300_000);
    let huge = "日".repeat(6 << 20);
    let records = [
        Record {
            event: Trace2Event::Printf { msg: Some(&big) },
            time: Timestamp {
                wall_us: 5,
                t_abs_us: 5,
            },
            sid: SID,
            depth: 0,
            thread: "main",
            callsite: Callsite::default(),
            open_regions: 0,
        },
        Record {
            event: Trace2Event::Printf { msg: Some(&huge) },
            time: Timestamp {
                wall_us: 6,
                t_abs_us: 6,
            },
            sid: SID,
            depth: 0,
            thread: "main",
            callsite: Callsite::default(),
            open_regions: 0,
        },
    ];
    let bytes = write_all(builder().with_anchor_wall_us(0), &records);
    let (decoded, report) = decode_all(&bytes);
    assert_eq!(decoded.len(), 2);
    assert_eq!(decoded[0].1, format!("{:?}", records[0]));
    let cut = report.streams[0].threads[0].cut_events;
    assert_eq!(cut, 1, "{report}");
    assert!(decoded[1].1.len() > 10 << 20 && decoded[1].1.len() < huge.len());
}

/// A config key set without a value (`git -c foo.bar`) comes back without one, apart
/// from an empty value, and decodes to git's (2.49+) text of each format: the key alone.
#[test]
fn valueless_def_param_round_trips_and_decodes_to_the_key_alone() {
    let records: Vec<Record<'_>> = [None, Some(""), Some("1")]
        .into_iter()
        .map(|value| Record {
            event: Trace2Event::DefParam {
                scope: "command",
                param: "foo.bar",
                value,
            },
            time: Timestamp {
                wall_us: 1_700_000_000_000_000,
                t_abs_us: 1_000,
            },
            sid: SID,
            depth: 1,
            thread: "main",
            callsite: Callsite {
                file: Some("main.rs"),
                line: 7,
            },
            open_regions: 0,
        })
        .collect();
    let bytes = write_all(builder(), &records);
    let (decoded, report) = decode_all(&bytes);
    assert!(report.is_complete(), "{report}");
    let want: Vec<String> = records.iter().map(|r| format!("{r:?}")).collect();
    let got: Vec<String> = decoded.into_iter().map(|d| d.1).collect();
    assert_eq!(got, want);
    let text = |format: TextFormat| {
        let mut out = Vec::new();
        let options = TextOptions::new(format).with_brief(true);
        decode_to_text(&bytes[..], &mut out, &options).unwrap();
        String::from_utf8(out).unwrap()
    };
    let normal = text(TextFormat::Normal);
    let normal: Vec<&str> = normal.lines().collect();
    assert_eq!(
        normal,
        [
            "def_param scope:command foo.bar",
            "def_param scope:command foo.bar=",
            "def_param scope:command foo.bar=1"
        ]
    );
    let perf = text(TextFormat::Perf);
    let payloads: Vec<&str> = perf
        .lines()
        .map(|l| l.rsplit(" | ").next().unwrap())
        .collect();
    assert_eq!(payloads, ["foo.bar", "foo.bar:", "foo.bar:1"]);
    let event = text(TextFormat::Event);
    let tails: Vec<&str> = event
        .lines()
        .map(|l| &l[l.find("\"param\"").unwrap()..])
        .collect();
    assert_eq!(
        tails,
        [
            r#""param":"foo.bar"}"#,
            r#""param":"foo.bar","value":""}"#,
            r#""param":"foo.bar","value":"1"}"#
        ]
    );
}
