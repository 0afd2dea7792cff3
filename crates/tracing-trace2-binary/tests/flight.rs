//! The flight recorder beside the three text targets of the core layer: a snapshot
//! decodes to their bytes for the events of its window (with `version` and `start` kept
//! however old), says which trigger wrote it, and each trigger writes (or does not
//! write) a file as documented.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tracing_subscriber::layer::SubscriberExt;
use tracing_trace2_binary::flight::{
    FlightFormat, FlightRecorder, FlightRecorderBuilder, NestedFlightFormat, Trigger,
};
use tracing_trace2_binary::{
    BinaryWriter, FlushingSink, TextDefaults, TextFormat, TextOptions, decode_to_text,
};
use tracing_trace2_core::{Format, MemorySink, Target, Trace2Layer, api, clock};
use tracing_trace2_event::EventFormat;
use tracing_trace2_normal::NormalFormat;
use tracing_trace2_perf::PerfFormat;

struct Run {
    normal: MemorySink,
    perf: MemorySink,
    event: MemorySink,
}

fn builder(dir: &Path) -> FlightRecorderBuilder {
    FlightRecorder::builder(dir)
        // The signal goes to every recorder of the process: only its own test uses it.
        .with_signal(false)
        .with_min_age(Duration::from_secs(3600))
        .with_writer(BinaryWriter::builder().with_text_defaults(TextDefaults {
            normal_brief: false,
            perf_brief: false,
            event_brief: false,
            event_nesting: 2,
        }))
}

/// `work` under a layer with the three text targets and `recorder`.
fn run(recorder: &FlightRecorder, work: impl FnOnce()) -> Run {
    run_with(
        flight_target(FlightFormat(recorder.clone()), recorder),
        work,
    )
}

/// The flight recorder as a target of the layer, with `format`.
fn flight_target(format: impl Format + 'static, recorder: &FlightRecorder) -> Target {
    Target::new(
        tracing_trace2_binary::flight::ENV_NAME,
        format,
        FlushingSink(recorder.writer().clone()),
    )
}

/// `work` under a layer with the three text targets and `flight`.
fn run_with(flight: Target, work: impl FnOnce()) -> Run {
    let offset = clock::local_offset_secs();
    let run = Run {
        normal: MemorySink::new(),
        perf: MemorySink::new(),
        event: MemorySink::new(),
    };
    let layer = Trace2Layer::builder()
        .with_target(Target::new(
            "GIT_TRACE2",
            NormalFormat::new().with_utc_offset(offset),
            run.normal.clone(),
        ))
        .with_target(Target::new(
            "GIT_TRACE2_PERF",
            PerfFormat::new().with_utc_offset(offset),
            run.perf.clone(),
        ))
        .with_target(Target::new(
            "GIT_TRACE2_EVENT",
            EventFormat::new(),
            run.event.clone(),
        ))
        .with_target(flight)
        .build();
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        api::start(&["flight-test", "--now"]);
        work();
    });
    run
}

fn work(items: usize) {
    api::cmd_name("flight-test");
    for i in 0..items {
        api::region_enter("work", "item", None, None);
        api::data("work", "n", &i.to_string(), None);
        api::printf(&format!("item {i} done"));
        api::region_leave("work", "item", None, None);
    }
}

fn decoded(snapshot: &[u8], format: TextFormat) -> String {
    let mut out = Vec::new();
    let report = decode_to_text(snapshot, &mut out, &TextOptions::new(format)).unwrap();
    assert!(report.is_complete(), "{report}");
    String::from_utf8(out).unwrap()
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

/// The snapshot's text without its marker line, and the marker line.
fn split_marker(text: &str) -> (String, &str) {
    let cut = text.trim_end_matches('\n').rfind('\n').map_or(0, |i| i + 1);
    (text[..cut].to_owned(), &text[cut..])
}

#[test]
fn a_whole_window_decodes_to_the_text_targets_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = builder(dir.path()).build().unwrap();
    let run = run(&recorder, || work(200));
    let snapshot = recorder.snapshot_bytes(Trigger::Request);
    // Normal shows no `data`: the marker is not in it.
    assert_eq!(
        decoded(&snapshot, TextFormat::Normal),
        run.normal.to_string_lossy()
    );
    for (format, sink) in [
        (TextFormat::Perf, &run.perf),
        (TextFormat::Event, &run.event),
    ] {
        let text = decoded(&snapshot, format);
        let (window, marker) = split_marker(&text);
        assert_eq!(window, sink.to_string_lossy(), "{format:?}");
        assert!(
            marker.contains("flight") && marker.contains("trigger") && marker.contains("request"),
            "{marker}"
        );
    }
    assert!(
        files(dir.path()).is_empty(),
        "snapshot_bytes writes no file"
    );
}

/// Counts how often a span field is formatted.
struct Counted<'a>(&'a AtomicUsize);

impl std::fmt::Debug for Counted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fetch_add(1, Ordering::SeqCst);
        f.write_str("counted")
    }
}

/// Four regions, each inside the one before, from spans with a counted field each.
fn deep_regions(formatted: &AtomicUsize) {
    api::cmd_name("flight-test");
    let _one = tracing::info_span!("one", value = ?Counted(formatted)).entered();
    let _two = tracing::info_span!("two", value = ?Counted(formatted)).entered();
    let _three = tracing::info_span!("three", value = ?Counted(formatted)).entered();
    let _four = tracing::info_span!("four", value = ?Counted(formatted)).entered();
    api::data("work", "deep", "yes", None);
}

/// `deep_regions` under a layer whose only target is the flight recorder `format`;
/// returns how many span fields were formatted.
fn fields_formatted_with_flight_alone(
    format: impl Format + 'static,
    recorder: &FlightRecorder,
) -> usize {
    let formatted = AtomicUsize::new(0);
    let layer = Trace2Layer::builder()
        .with_target(flight_target(format, recorder))
        .build();
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        api::start(&["flight-test"]);
        deep_regions(&formatted);
    });
    formatted.load(Ordering::SeqCst)
}

#[test]
fn the_flight_target_formats_no_fields_of_regions_nested_deeper_than_it_records() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = builder(dir.path()).build().unwrap();
    let nested = NestedFlightFormat {
        recorder: recorder.clone(),
        max_nesting: 2,
    };
    assert_eq!(fields_formatted_with_flight_alone(nested, &recorder), 2);
    // Every nesting recorded: every region's fields are formatted.
    let recorder = builder(dir.path()).build().unwrap();
    let every = FlightFormat(recorder.clone());
    assert_eq!(fields_formatted_with_flight_alone(every, &recorder), 4);
}

#[test]
fn a_window_of_nested_regions_decodes_to_the_event_targets_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = builder(dir.path()).build().unwrap();
    let nested = NestedFlightFormat {
        recorder: recorder.clone(),
        max_nesting: 2,
    };
    let formatted = AtomicUsize::new(0);
    let run = run_with(flight_target(nested, &recorder), || {
        deep_regions(&formatted)
    });
    let event = run.event.to_string_lossy();
    // The Event target (nesting 2) writes two of the four regions, and the data inside
    // the fourth not at all.
    assert_eq!(
        event.matches("\"event\":\"region_enter\"").count(),
        2,
        "{event}"
    );
    let text = decoded(
        &recorder.snapshot_bytes(Trigger::Request),
        TextFormat::Event,
    );
    let (window, _marker) = split_marker(&text);
    assert_eq!(window, event);
}

#[test]
fn an_evicted_window_keeps_version_and_start_and_a_tail_of_the_stream() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = builder(dir.path())
        .with_max_bytes(16 << 10)
        .with_writer(BinaryWriter::builder().with_batch_size(4096))
        .build()
        .unwrap();
    let run = run(&recorder, || work(5_000));
    let stats = recorder.stats();
    assert!(stats.evicted_batches > 0, "{stats:?}");
    assert!(stats.peak_ring_bytes <= (16 << 10) + 4096, "{stats:?}");
    let snapshot = recorder.snapshot_bytes(Trigger::Request);
    for (format, sink) in [
        (TextFormat::Normal, &run.normal),
        (TextFormat::Perf, &run.perf),
        (TextFormat::Event, &run.event),
    ] {
        let text = decoded(&snapshot, format);
        let window = match format {
            TextFormat::Normal => text.clone(),
            _ => split_marker(&text).0,
        };
        let full = sink.to_string_lossy();
        let lines: Vec<&str> = window.lines().collect();
        let all: Vec<&str> = full.lines().collect();
        // `version` … `start` first, as the process wrote them …
        let start = all
            .iter()
            .position(|l| l.contains("flight-test") && l.contains("--now"))
            .unwrap();
        let head = start + 1;
        assert_eq!(lines[..head], all[..head], "{format:?}");
        assert!(lines[0].contains("version"));
        // … then the newest lines, every one of them, to the last.
        assert!(
            lines.len() > 100 && lines.len() < all.len() / 2,
            "{format:?}"
        );
        let tail = lines.len() - head;
        assert!(
            lines[head..] == all[all.len() - tail..],
            "{format:?}: not the newest lines"
        );
    }
}

#[test]
fn a_failed_exit_writes_a_snapshot_that_ends_with_exit_and_a_good_one_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = builder(dir.path()).build().unwrap();
    run(&recorder, || {
        work(3);
        api::exit(0);
        api::atexit();
    });
    assert!(files(dir.path()).is_empty(), "exit 0 writes nothing");
    let run = run(&recorder, || {
        work(3);
        api::exit(3);
        api::atexit();
    });
    let written = files(dir.path());
    assert_eq!(written.len(), 1);
    let name = written[0].file_name().unwrap().to_str().unwrap();
    assert!(name.ends_with("-000-exit.t2b"), "{name}");
    let event = decoded(&std::fs::read(&written[0]).unwrap(), TextFormat::Event);
    // The window ends with the process's own end, `exit` then `atexit` with the real
    // code: no other lane is open, and (as in git) the thread that writes `atexit` has
    // no `thread_exit` before it.
    let last: Vec<&str> = event.lines().rev().take(2).collect();
    assert!(last[1].contains("\"event\":\"exit\"") && last[1].contains("\"code\":3"));
    assert!(last[0].contains("\"event\":\"atexit\"") && last[0].contains("\"code\":3"));
    // The second run's lines are in the window too.
    assert!(event.ends_with(&run.event.to_string_lossy()[..]));
}

#[test]
fn error_and_slow_region_triggers_are_opt_in_and_rate_limited() {
    let off = tempfile::tempdir().unwrap();
    let recorder = builder(off.path()).build().unwrap();
    run(&recorder, || {
        api::error("bad", "bad");
        api::region_enter("work", "slow", None, None);
        std::thread::sleep(Duration::from_millis(5));
        api::region_leave("work", "slow", None, None);
    });
    assert!(files(off.path()).is_empty());

    let on = tempfile::tempdir().unwrap();
    let recorder = builder(on.path())
        .with_error_trigger(true)
        .with_slow_region(Some(Duration::from_millis(1)))
        .build()
        .unwrap();
    run(&recorder, || {
        api::error("bad", "bad");
        api::error("worse", "worse");
    });
    let written = files(on.path());
    assert_eq!(written.len(), 1, "{written:?}");
    assert!(written[0].to_str().unwrap().ends_with("-error.t2b"));
    assert_eq!(recorder.stats().rate_limited, 1);

    let slow = tempfile::tempdir().unwrap();
    let recorder = builder(slow.path())
        .with_slow_region(Some(Duration::from_millis(1)))
        .build()
        .unwrap();
    run(&recorder, || {
        api::region_enter("work", "fast", None, None);
        api::region_leave("work", "fast", None, None);
        api::region_enter("work", "slow", None, None);
        std::thread::sleep(Duration::from_millis(5));
        api::region_leave("work", "slow", None, None);
    });
    let written = files(slow.path());
    assert_eq!(written.len(), 1, "{written:?}");
    let perf = decoded(&std::fs::read(&written[0]).unwrap(), TextFormat::Perf);
    let (window, marker) = split_marker(&perf);
    assert!(marker.contains("slow_region"), "{marker}");
    assert!(window.lines().last().unwrap().contains("region_leave"));
}

#[test]
fn a_panic_writes_a_snapshot() {
    struct ErrorOnUnwind;
    impl Drop for ErrorOnUnwind {
        fn drop(&mut self) {
            // What the facade's panic hook records.
            api::error("boom", "boom");
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let recorder = builder(dir.path()).build().unwrap();
    run(&recorder, || {
        work(2);
        let unwound = std::panic::catch_unwind(|| {
            let _error = ErrorOnUnwind;
            std::panic::resume_unwind(Box::new("boom"));
        });
        assert!(unwound.is_err());
    });
    let written = files(dir.path());
    assert_eq!(written.len(), 1, "{written:?}");
    let event = decoded(&std::fs::read(&written[0]).unwrap(), TextFormat::Event);
    let (window, marker) = split_marker(&event);
    assert!(marker.contains("\"value\":\"panic\""), "{marker}");
    assert!(window.lines().last().unwrap().contains("\"msg\":\"boom\""));
}

#[test]
fn triggers_at_once_do_not_wait_for_each_other_or_tear_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = builder(dir.path()).build().unwrap();
    run(&recorder, || work(2_000));
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..5 {
                    recorder.snapshot(Trigger::Request).unwrap();
                }
            });
        }
    });
    let stats = recorder.stats();
    let written = files(dir.path());
    assert_eq!(written.len() as u64, stats.snapshots);
    // A trigger that found a snapshot in progress was written by it, or merged with
    // another that was already waiting.
    assert!(
        stats.snapshots >= 1 && stats.snapshots + stats.deferred >= 20,
        "{stats:?}"
    );
    for file in &written {
        let name = file.file_name().unwrap().to_str().unwrap();
        assert!(!name.starts_with('.'), "no temporary file is left: {name}");
        decoded(&std::fs::read(file).unwrap(), TextFormat::Event);
    }
}

#[test]
fn an_unusable_directory_turns_the_recorder_off() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"").unwrap();
    for path in [dir.path().join("missing"), file] {
        assert!(builder(&path).with_dst_debug(true).build().is_none());
    }
}

#[test]
fn a_directory_removed_later_fails_the_snapshot_and_not_the_process() {
    let dir = tempfile::tempdir().unwrap();
    let gone = dir.path().join("gone");
    std::fs::create_dir(&gone).unwrap();
    let recorder = builder(&gone).build().unwrap();
    run(&recorder, || work(3));
    std::fs::remove_dir(&gone).unwrap();
    assert!(recorder.snapshot(Trigger::Request).is_err());
    assert_eq!(recorder.stats().failed, 1);
    // Recording goes on.
    run(&recorder, || work(3));
    assert!(!recorder.snapshot_bytes(Trigger::Request).is_empty());
}

#[test]
fn nothing_recorded_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = builder(dir.path()).build().unwrap();
    assert_eq!(recorder.snapshot(Trigger::Request).unwrap(), None);
    assert!(files(dir.path()).is_empty());
}

#[test]
fn the_window_reaches_back_the_minimum_age_and_not_much_further() {
    use tracing_trace2_binary::{DecodeOptions, decode};
    use tracing_trace2_core::{Callsite, Record, Trace2Event};

    let dir = tempfile::tempdir().unwrap();
    let min_age = Duration::from_millis(300);
    let recorder = builder(dir.path())
        .with_min_age(min_age)
        .with_writer(BinaryWriter::builder().with_flush_interval(Duration::from_millis(20)))
        .build()
        .unwrap();
    let say = |msg: &str| {
        let time = clock::now();
        recorder.record(&Record {
            event: Trace2Event::Printf { msg: Some(msg) },
            time,
            sid: "20260101T000000.000000Z-H0123abcd-P00001234",
            depth: 0,
            thread: "main",
            callsite: Callsite::default(),
            open_regions: 0,
        });
        time.t_abs_us
    };
    // The stream's first batch is kept aside however old (it holds `version` and
    // `start` in a real process): here, one message of its own.
    say("first");
    recorder.writer().flush_all();
    let started = clock::now().t_abs_us;
    // A message every 5 ms for 1.2 s: four times the minimum age.
    let mut sent = Vec::new();
    while clock::now().t_abs_us - started < 1_200_000 {
        sent.push(say("tick"));
        std::thread::sleep(Duration::from_millis(5));
    }
    let snapshot = recorder.snapshot_bytes(Trigger::Request);
    let taken = clock::now().t_abs_us;
    let mut times = Vec::new();
    let mut first = 0;
    let report = decode(
        &snapshot[..],
        &DecodeOptions::default(),
        |_, record| match record.event {
            Trace2Event::Printf { msg: Some("tick") } => times.push(record.time.t_abs_us),
            Trace2Event::Printf { msg: Some("first") } => first += 1,
            _ => {}
        },
    )
    .unwrap();
    assert!(report.is_complete(), "{report}");
    assert_eq!(first, 1, "the first batch is kept");
    let oldest = taken - times[0];
    let min_age_us = min_age.as_micros() as u64;
    // Every tick sent in the last minimum age before the snapshot was taken is kept
    // (judged by the ticks' own times, so a machine that delays the sleeps cannot fail it).
    let must_keep = sent
        .iter()
        .copied()
        .find(|&t| t + min_age_us >= taken)
        .expect("ticks in the last minimum age");
    assert!(
        times[0] <= must_keep,
        "the window reaches back {oldest} µs only (a tick sent {} µs before was lost)",
        taken - must_keep
    );
    // Batches handed over before the minimum age are gone: the window is well short of
    // the 1.2 s recorded (a batch spans the 20 ms flush interval, but on a loaded machine
    // the flusher hands batches over late, so the bound leaves room for that).
    assert!(
        oldest < 3 * min_age_us,
        "the window reaches back {oldest} µs"
    );
    assert!(recorder.stats().evicted_batches > 0);
}
