//! The binary target beside the three text targets of the core layer, fed the very same
//! records: decoding its frames gives back the Normal, Perf and Event text byte for
//! byte (with each format's defaults recorded by the writer), and for several threads
//! each thread's lines.

use std::collections::BTreeMap;

use tracing::{info, info_span, warn};
use tracing_subscriber::layer::SubscriberExt;
use tracing_trace2_binary::{
    BinaryWriter, TextDefaults, TextFormat, TextOptions, decode_to_event_json, decode_to_text,
};
use tracing_trace2_core::{MemorySink, Target, Trace2Layer, api, clock};
use tracing_trace2_event::EventFormat;
use tracing_trace2_normal::NormalFormat;
use tracing_trace2_perf::PerfFormat;

struct Run {
    normal: MemorySink,
    perf: MemorySink,
    event: MemorySink,
    binary: MemorySink,
}

/// A layer with the three text targets and the binary one, as the facade would build
/// them (Event nesting 3, Perf brief), running `work` under it.
fn run(work: impl FnOnce()) -> Run {
    let offset = clock::local_offset_secs();
    let run = Run {
        normal: MemorySink::new(),
        perf: MemorySink::new(),
        event: MemorySink::new(),
        binary: MemorySink::new(),
    };
    let binary = BinaryWriter::builder()
        .with_exit_handler(false)
        .with_text_defaults(TextDefaults {
            normal_brief: false,
            perf_brief: true,
            event_brief: false,
            event_nesting: 3,
        })
        .build(run.binary.clone());
    let layer = Trace2Layer::builder()
        .with_target(Target::new(
            "GIT_TRACE2",
            NormalFormat::new().with_utc_offset(offset),
            run.normal.clone(),
        ))
        .with_target(Target::new(
            "GIT_TRACE2_PERF",
            PerfFormat::new().with_brief(true).with_utc_offset(offset),
            run.perf.clone(),
        ))
        .with_target(Target::new(
            "GIT_TRACE2_EVENT",
            EventFormat::new().with_max_nesting(3),
            run.event.clone(),
        ))
        .with_target(Target::new(
            tracing_trace2_binary::ENV_NAME,
            tracing_trace2_binary::RecordingFormat(binary.clone()),
            tracing_trace2_binary::FlushingSink(binary.clone()),
        ))
        .build();
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, work);
    binary.finish();
    run
}

fn decoded(run: &Run, format: TextFormat) -> String {
    let mut out = Vec::new();
    let report = decode_to_text(
        &run.binary.contents()[..],
        &mut out,
        &TextOptions::new(format),
    )
    .unwrap();
    assert!(report.is_complete(), "{report}");
    String::from_utf8(out).unwrap()
}

fn single_threaded_work() {
    api::cmd_name("binary-test");
    let outer = info_span!(
        "outer",
        trace2.category = "index",
        trace2.label = "do_read_index",
        trace2.msg = "x"
    );
    let _outer = outer.enter();
    for i in 0..50 {
        let inner = info_span!("inner", trace2.category = "index", trace2.label = "entry");
        let _inner = inner.enter();
        info!(category = "index", key = "n", value = i);
        info!("a message with \"quotes\" and é {i}");
        if i % 10 == 0 {
            warn!(path = "/tmp/x", "something odd");
            let deep = info_span!(
                "deep",
                trace2.category = "x",
                trace2.label = "nested-too-deep"
            );
            let _deep = deep.enter();
            info!(category = "x", key = "json", json = "{\"a\":[1,2]}");
        }
    }
}

#[test]
fn one_thread_decodes_to_the_text_targets_bytes() {
    let run = run(single_threaded_work);
    for (format, sink) in [
        (TextFormat::Normal, &run.normal),
        (TextFormat::Perf, &run.perf),
        (TextFormat::Event, &run.event),
    ] {
        let want = sink.to_string_lossy();
        assert!(want.lines().count() > 5, "{format:?}");
        assert_eq!(decoded(&run, format), want, "{format:?}");
    }
}

#[test]
fn event_json_for_consumers_has_every_region() {
    let run = run(single_threaded_work);
    let mut json = Vec::new();
    decode_to_event_json(&run.binary.contents()[..], &mut json).unwrap();
    let json = String::from_utf8(json).unwrap();
    // The live Event target stopped at nesting 3; the decode for consumers does not.
    assert!(json.contains("nested-too-deep"));
    assert!(json.lines().count() > run.event.to_string_lossy().lines().count());
}

/// Lines of each thread, in order: the thread name is a column of Perf and a key of
/// Event.
fn per_thread(text: &str, thread_of: impl Fn(&str) -> String) -> BTreeMap<String, Vec<String>> {
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in text.lines() {
        map.entry(thread_of(line))
            .or_default()
            .push(line.to_owned());
    }
    map
}

#[test]
fn several_threads_decode_to_each_threads_lines() {
    let run = run(|| {
        let dispatch = tracing::dispatcher::get_default(Clone::clone);
        std::thread::scope(|scope| {
            for n in 0..4 {
                let dispatch = dispatch.clone();
                scope.spawn(move || {
                    tracing::dispatcher::with_default(&dispatch, || {
                        api::thread_start(&format!("worker{n}"));
                        for i in 0..200 {
                            let span =
                                info_span!("work", trace2.category = "pool", trace2.label = "item");
                            let _e = span.enter();
                            info!(category = "pool", key = "item", value = i);
                        }
                        api::thread_exit();
                    });
                });
            }
        });
    });
    let perf_thread = |line: &str| line.split('|').nth(1).unwrap_or("").trim().to_owned();
    let event_thread = |line: &str| {
        let t = line.split("\"thread\":\"").nth(1).unwrap_or("");
        t[..t.find('"').unwrap_or(0)].to_owned()
    };
    let perf = decoded(&run, TextFormat::Perf);
    assert_eq!(
        per_thread(&perf, perf_thread),
        per_thread(&run.perf.to_string_lossy(), perf_thread)
    );
    let event = decoded(&run, TextFormat::Event);
    assert_eq!(
        per_thread(&event, event_thread),
        per_thread(&run.event.to_string_lossy(), event_thread)
    );
    assert_eq!(
        perf.lines().count(),
        run.perf.to_string_lossy().lines().count()
    );
}
