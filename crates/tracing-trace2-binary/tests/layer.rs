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
use tracing_trace2_core::{MemorySink, RegionMode, Target, Trace2Layer, api, clock};
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
    run_in(RegionMode::default(), work)
}

/// [`run`] with spans made regions as `mode` says.
fn run_in(mode: RegionMode, work: impl FnOnce()) -> Run {
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
        .with_region_mode(mode)
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

/// A region span with `label`.
macro_rules! region {
    ($label:expr) => {
        info_span!("region", trace2.category = "close", trace2.label = $label)
    };
}

/// Spans closed while they are still entered (the Registry holds no reference for an
/// entry: the last handle's drop closes the span wherever it is entered), in the ways a
/// program gets there: the last handle dropped between a manual enter and exit, an
/// `Entered` guard forgotten, guards dropped out of order with the outer span dropped
/// first, and a span entered on one thread and closed on another. After each, a span
/// `after-N` is entered and left at the top: it must be written whole, at nesting 1.
fn spans_closed_while_entered() {
    let dispatch = tracing::dispatcher::get_default(Clone::clone);
    // The last handle dropped while entered: close, then exit.
    let span = region!("dropped-while-entered");
    let id = span.id().unwrap();
    dispatch.enter(&id);
    info!("inside");
    drop(span);
    info!("inside, closed");
    dispatch.exit(&id);
    region!("after-1").in_scope(|| info!("after"));
    // Guards dropped out of order, the outer span dropped while the inner is entered.
    let outer = region!("outer");
    let inner = region!("inner");
    let outer_guard = outer.enter();
    let inner_guard = inner.enter();
    drop(outer_guard);
    drop(outer);
    info!("inner only");
    drop(inner_guard);
    drop(inner);
    region!("after-2").in_scope(|| info!("after"));
    // Entered on a thread, closed on another while still entered there.
    let span = region!("entered-on-a-worker");
    let id = span.id().unwrap();
    let (entered, closed) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
    std::thread::scope(|scope| {
        scope.spawn(|| {
            tracing::dispatcher::with_default(&dispatch, || {
                api::thread_start("closer-worker");
                dispatch.enter(&id);
                entered.wait();
                closed.wait();
                info!("worker inside, closed");
                dispatch.exit(&id);
                region!("worker-after").in_scope(|| info!("worker after"));
                api::thread_exit();
            });
        });
        entered.wait();
        drop(span);
        closed.wait();
    });
    region!("after-3").in_scope(|| info!("after"));
    // A forgotten guard: the span closes at its drop, never exited.
    let span = region!("forgotten");
    std::mem::forget(span.enter());
    drop(span);
    region!("after-4").in_scope(|| info!("after"));
}

/// The value of `"key":` in an Event line, without quotes.
fn event_field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let rest = line.split(&format!("\"{key}\":")).nth(1)?;
    let rest = rest.strip_prefix('"').unwrap_or(rest);
    let end = rest.find(['"', ',', '}']).unwrap_or(rest.len());
    Some(&rest[..end])
}

/// Per thread, the Event lines' regions form a stack: each `region_enter` one deeper
/// than what is open, each `region_leave` an open region at its own nesting (the
/// innermost, or one closed out of order, removed where it stands). Returns the labels
/// entered and left, in order.
fn check_region_stacks(event: &str) -> (Vec<String>, Vec<String>) {
    let mut open: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let (mut entered, mut left) = (Vec::new(), Vec::new());
    for line in event.lines() {
        assert!(line.starts_with('{') && line.ends_with('}'), "{line}");
        let thread = event_field(line, "thread").unwrap().to_owned();
        let stack = open.entry(thread).or_default();
        let nesting = || {
            event_field(line, "nesting")
                .unwrap()
                .parse::<usize>()
                .unwrap()
        };
        let label = || event_field(line, "label").unwrap().to_owned();
        match event_field(line, "event").unwrap() {
            "region_enter" => {
                assert_eq!(nesting(), stack.len() + 1, "{line}\n{event}");
                stack.push(label());
                entered.push(label());
            }
            "region_leave" => {
                let at = nesting() - 1;
                assert_eq!(stack.get(at), Some(&label()), "{line}\n{event}");
                stack.remove(at);
                left.push(label());
            }
            _ => {}
        }
    }
    (entered, left)
}

#[test]
fn spans_closed_while_entered_keep_every_target_well_formed() {
    for mode in [RegionMode::Span, RegionMode::Entry] {
        let run = run_in(mode, spans_closed_while_entered);
        let event = run.event.to_string_lossy();
        // Per entry, the worker's region of the span closed on another thread stays
        // open to the worker's exit, where it goes without a line (its texts went with
        // the span): the stacks are checked without it.
        let lost = "\"label\":\"entered-on-a-worker\"";
        let stacks: String = if mode == RegionMode::Entry {
            assert_eq!(event.matches(lost).count(), 1, "{event}");
            event
                .lines()
                .filter(|l| !l.contains(lost))
                .map(|l| format!("{l}\n"))
                .collect()
        } else {
            event.clone()
        };
        let (entered, left) = check_region_stacks(&stacks);
        // Every span after a trick is written whole, at the top.
        for after in ["after-1", "after-2", "after-3", "after-4", "worker-after"] {
            assert_eq!(
                (
                    entered.iter().filter(|l| *l == after).count(),
                    left.iter().filter(|l| *l == after).count()
                ),
                (1, 1),
                "{mode:?}: {after}\n{event}"
            );
            let line = event
                .lines()
                .find(|l| l.contains("region_enter") && l.contains(&format!("\"{after}\"")))
                .unwrap();
            assert_eq!(event_field(line, "nesting"), Some("1"), "{mode:?}: {line}");
        }
        // Every closed span's region is left.
        let worker = (mode == RegionMode::Span).then_some("entered-on-a-worker");
        for closed in ["dropped-while-entered", "outer", "inner", "forgotten"]
            .into_iter()
            .chain(worker)
        {
            assert!(
                left.iter().any(|l| l == closed),
                "{mode:?}: {closed}\n{event}"
            );
        }
        // The binary target decodes to the text targets' bytes.
        for (format, sink) in [
            (TextFormat::Normal, &run.normal),
            (TextFormat::Perf, &run.perf),
            (TextFormat::Event, &run.event),
        ] {
            let want = sink.to_string_lossy();
            assert_eq!(decoded(&run, format), want, "{mode:?} {format:?}");
        }
        // Perf: every line a whole row (brief: seven columns).
        for line in run.perf.to_string_lossy().lines() {
            assert_eq!(line.matches('|').count(), 7, "{mode:?}: {line}");
        }
    }
}
