//! How the core layer maps `tracing` calls to Trace2 records, seen through a formatter
//! that prints every record's fields, and how it handles failing sinks.

use std::io;
use std::sync::{Arc, Mutex};

use tracing::{Level, error, info, info_span, warn};
use tracing_subscriber::prelude::*;
use tracing_trace2_core::{
    Format, MemorySink, Record, RegionMode, Sink, Target, Trace2Event, Trace2Layer, api,
};

/// Prints each record as `name key=value ...` with the fields a test needs.
struct Describe;

impl Format for Describe {
    fn format(&self, r: &Record<'_>, out: &mut Vec<u8>) {
        use std::fmt::Write;
        // Test threads are not `main`: each announces itself before its first line, which
        // these tests do not look at (tests/lanes.rs does).
        if matches!(
            r.event,
            Trace2Event::ThreadStart | Trace2Event::ThreadExit { .. }
        ) {
            return;
        }
        let mut s = String::new();
        let _ = write!(s, "{} open={}", r.event.name(), r.open_regions);
        match r.event {
            Trace2Event::RegionEnter { region, nesting }
            | Trace2Event::RegionLeave {
                region, nesting, ..
            } => {
                let _ = write!(
                    s,
                    " n={nesting} cat={:?} label={:?} msg={:?} repo={:?}",
                    region.category, region.label, region.msg, region.repo
                );
            }
            Trace2Event::Data {
                category,
                key,
                value,
                nesting,
                repo,
                ..
            } => {
                let _ = write!(s, " n={nesting} cat={category} {key}={value} repo={repo:?}");
            }
            Trace2Event::DataJson {
                category,
                key,
                json,
                ..
            } => {
                let _ = write!(s, " cat={category} {key}={json}");
            }
            Trace2Event::Printf { msg } => {
                let _ = write!(s, " msg={msg:?}");
            }
            Trace2Event::Error { msg, fmt } => {
                let _ = write!(s, " msg={msg:?} fmt={fmt:?}");
            }
            Trace2Event::Version { exe } => {
                let _ = write!(s, " exe={exe}");
            }
            _ => {}
        }
        s.push('\n');
        out.extend_from_slice(s.as_bytes());
    }
}

/// Runs `f` under a layer in git's region-per-entry mode, every level shown.
fn run(f: impl FnOnce()) -> Vec<String> {
    let sink = MemorySink::new();
    let layer = Trace2Layer::builder()
        .with_region_mode(RegionMode::Entry)
        .with_max_level(tracing::level_filters::LevelFilter::TRACE)
        .with_exe_version("9.9")
        .with_target(Target::new("GIT_TRACE2_EVENT", Describe, sink.clone()))
        .build();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), f);
    sink.to_string_lossy().lines().map(str::to_owned).collect()
}

#[test]
fn version_comes_first_and_once() {
    let lines = run(|| {
        info!("one");
        api::version("1.2");
        info!("two");
    });
    assert_eq!(lines[0], "version open=0 exe=9.9");
    assert_eq!(lines.iter().filter(|l| l.starts_with("version")).count(), 1);
    assert_eq!(lines.len(), 3);
}

#[test]
fn explicit_version_names_the_program() {
    let lines = run(|| {
        api::version("1.2");
        info!("after");
    });
    assert_eq!(lines[0], "version open=0 exe=1.2");
}

#[test]
fn spans_become_regions_with_nesting() {
    let lines = run(|| {
        let outer = info_span!(
            "outer",
            trace2.category = "cat",
            trace2.msg = "m",
            trace2.repo = 3
        );
        let _o = outer.enter();
        let inner = info_span!(target: "my_target", "inner", path = "/x", n = 2);
        let _i = inner.enter();
        info!(category = "c2", key = "k", value = "v");
    });
    assert_eq!(
        &lines[1..],
        &[
            "region_enter open=0 n=1 cat=Some(\"cat\") label=Some(\"outer\") msg=Some(\"m\") repo=Some(3)",
            "region_enter open=1 n=2 cat=Some(\"my_target\") label=Some(\"inner\") msg=Some(\"path=/x n=2\") repo=None",
            "data open=2 n=3 cat=c2 k=v repo=None",
            "region_leave open=1 n=2 cat=Some(\"my_target\") label=Some(\"inner\") msg=Some(\"path=/x n=2\") repo=None",
            "region_leave open=0 n=1 cat=Some(\"cat\") label=Some(\"outer\") msg=Some(\"m\") repo=Some(3)",
        ]
    );
}

#[test]
fn label_and_empty_fields() {
    let lines = run(|| {
        info_span!("name", trace2.label = "dynamic", trace2.category = "").in_scope(|| {});
        info_span!("name", trace2.label = "").in_scope(|| {});
    });
    assert!(
        lines[1].contains("cat=None label=Some(\"dynamic\")"),
        "{lines:?}"
    );
    assert!(lines[3].contains("label=None"), "{lines:?}");
}

#[test]
fn recorded_fields_update_the_region() {
    let lines = run(|| {
        let span = info_span!(
            "r",
            trace2.category = "c",
            trace2.msg = tracing::field::Empty
        );
        let _e = span.enter();
        span.record("trace2.msg", "later");
    });
    assert!(lines[1].contains("msg=None"), "{lines:?}");
    assert!(lines[2].contains("msg=Some(\"later\")"), "{lines:?}");
}

/// How many of `lines` are of the event `kind`.
fn count(lines: &[String], kind: &str) -> usize {
    lines.iter().filter(|l| l.starts_with(kind)).count()
}

#[test]
fn a_span_entered_twice_is_one_region() {
    let lines = run(|| {
        let span = info_span!("twice");
        let _a = span.enter();
        let _b = span.enter();
    });
    assert_eq!(count(&lines, "region_enter"), 1);
    assert_eq!(count(&lines, "region_leave"), 1);
}

#[test]
fn out_of_order_exit_closes_the_right_region() {
    let lines = run(|| {
        let a = info_span!("a");
        let b = info_span!("b");
        let ga = a.enter();
        let gb = b.enter();
        drop(ga); // a leaves while b is still open
        info!(key = "k", value = "v");
        drop(gb);
    });
    assert!(
        lines[3].starts_with("region_leave open=0 n=1") && lines[3].contains("\"a\""),
        "{lines:?}"
    );
    assert!(lines[4].starts_with("data open=1 n=2"), "{lines:?}");
    assert!(
        lines[5].starts_with("region_leave open=0 n=1") && lines[5].contains("\"b\""),
        "{lines:?}"
    );
}

#[test]
fn a_span_left_on_another_thread_has_no_region_there() {
    let lines = run(|| {
        let span = info_span!("moved");
        let entered = span.clone().entered();
        let dispatch = tracing::dispatcher::get_default(|d| d.clone());
        std::thread::spawn(move || {
            tracing::dispatcher::with_default(&dispatch, || {
                let _g = span.enter();
            })
        })
        .join()
        .unwrap();
        drop(entered);
    });
    // main: enter + leave; the other thread: its own enter + leave.
    assert_eq!(count(&lines, "region_enter"), 2);
    assert_eq!(count(&lines, "region_leave"), 2);
}

#[test]
fn events_become_messages() {
    let lines = run(|| {
        info!("plain {}", 1);
        info!(target: "t", n = 5, flag = true, ratio = 0.5, "counted");
        info!(category = "c", key = "k", value = 7);
        info!(
            category = "c",
            key = "j",
            json = "{ \"z\": 1, \"a\": [true] }"
        );
        info!(category = "c", key = "bad", json = "{nope");
        warn!(path = "/p", "cannot {}", "read");
        error!("boom");
        tracing::event!(Level::DEBUG, repo = 4, key = "r", value = "x");
    });
    assert_eq!(
        &lines[1..],
        &[
            "printf open=0 msg=Some(\"plain 1\")",
            "printf open=0 msg=Some(\"counted\")",
            "data open=0 n=1 cat=t n=5 repo=None",
            "data open=0 n=1 cat=t flag=true repo=None",
            "data open=0 n=1 cat=t ratio=0.5 repo=None",
            "data open=0 n=1 cat=c k=7 repo=None",
            "data_json open=0 cat=c j={\"z\":1,\"a\":[true]}",
            "data open=0 n=1 cat=c bad={nope repo=None",
            // The warning: nothing by default (see below).
            "error open=0 msg=Some(\"boom\") fmt=Some(\"boom\")",
            "data open=0 n=1 cat=layer r=x repo=Some(4)",
        ]
    );
}

/// Every text from the program's values is cut at the message limit (16 bytes here),
/// on a character boundary, with `...`: messages, data values, keys, categories, an
/// error's message with its fields, bytes, a span's category and label; JSON too long
/// to keep whole becomes a plain datum. Numbers stay whole.
#[test]
fn event_and_span_text_is_cut_at_the_message_limit() {
    let sink = MemorySink::new();
    let layer = Trace2Layer::builder()
        .with_message_limit(16)
        .with_target(Target::new("GIT_TRACE2_EVENT", Describe, sink.clone()))
        .build();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        // 26 bytes: 13 fit (the bound less the mark's 3), which cut no further than
        // the 6th `é`.
        let long = "ééééééééééééé";
        info!("{long}");
        info!(category = long, key = "k", value = long);
        info!(key = long, value = 12345678901234567890u64);
        info!(key = "j", json = "{\"list\": [1, 2, 3, 4, 5, 6]}");
        info!(bytes = &b"0123456789abcdefghij"[..]);
        error!(path = "/some/where", "cannot read");
        let span = info_span!("s", trace2.category = ?long, trace2.label = long);
        span.in_scope(|| {});
    });
    let text = sink.to_string_lossy();
    let lines: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(
        lines,
        [
            "printf open=0 msg=Some(\"éééééé...\")",
            "data open=0 n=1 cat=éééééé... k=éééééé... repo=None",
            "data open=0 n=1 cat=layer éééééé...=12345678901234567890 repo=None",
            "data open=0 n=1 cat=layer j={\"list\": [1, ... repo=None",
            "data open=0 n=1 cat=layer bytes=0123456789abc... repo=None",
            "error open=0 msg=Some(\"cannot read p...\") fmt=Some(\"cannot read\")",
            "region_enter open=0 n=1 cat=Some(\"\\\"éééééé...\") label=Some(\"éééééé...\") msg=None repo=None",
            "region_leave open=0 n=1 cat=Some(\"\\\"éééééé...\") label=Some(\"éééééé...\") msg=None repo=None",
        ]
    );
}

/// A warning is no `error` by default (git traces its errors, never its warnings, and
/// readers count every `error` line); `with_warnings` makes it a `printf` or an `error`.
#[test]
fn warnings_become_what_the_program_asks() {
    use tracing_trace2_core::Warnings;
    let program = || warn!(path = "/p", "cannot {}", "read");
    let lines = |warnings| {
        run_with(|b| b.with_warnings(warnings), program)
            .into_iter()
            .filter(|l| l != "thread_start")
            .collect::<Vec<_>>()
    };
    assert!(run_with(|b| b, program).is_empty());
    assert!(lines(Warnings::Off).is_empty());
    assert_eq!(lines(Warnings::Error), ["error"]);
    assert_eq!(lines(Warnings::Printf), ["printf"]);
    // Through the Describe format: the error carries the message and the fields.
    let sink = MemorySink::new();
    let layer = Trace2Layer::builder()
        .with_warnings(Warnings::Error)
        .with_target(Target::new("GIT_TRACE2_EVENT", Describe, sink.clone()))
        .build();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), program);
    assert!(
        sink.to_string_lossy()
            .contains("error open=0 msg=Some(\"cannot read path=/p\") fmt=Some(\"cannot read\")"),
        "{}",
        sink.to_string_lossy()
    );
}

#[test]
fn thread_start_on_the_main_thread_is_a_region() {
    // Runs on a test thread, so use a real `main`-named thread.
    let lines = std::thread::Builder::new()
        .name("main".into())
        .spawn(|| {
            run(|| {
                api::thread_start("misuse");
                api::thread_exit();
            })
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(
        &lines[1..],
        &[
            "region_enter open=0 n=1 cat=None label=None msg=Some(\"thread-proc on main: misuse\") repo=None",
            "region_leave open=0 n=1 cat=None label=None msg=Some(\"thread-proc on main\") repo=None",
        ]
    );
}

/// A sink whose writes fail after `ok` lines.
struct Failing {
    ok: Mutex<usize>,
}

impl Sink for Failing {
    fn write_line(&self, _line: &[u8]) -> io::Result<()> {
        let mut ok = self.ok.lock().unwrap();
        if *ok == 0 {
            return Err(io::Error::from_raw_os_error(libc_epipe()));
        }
        *ok -= 1;
        Ok(())
    }
}

/// EPIPE on Linux.
fn libc_epipe() -> i32 {
    32
}

#[test]
fn a_failing_target_is_disabled_and_reported_to_the_others() {
    // The failure is on purpose: its warning goes to fd 2, so the scenario runs in a
    // child whose stderr is asserted (nothing alarming reaches the test output).
    let out = tracing_trace2_test_support::child::child_or_run(
        concat!(
            module_path!(),
            "::a_failing_target_is_disabled_and_reported_to_the_others"
        ),
        || {
            let good = MemorySink::new();
            let failing = Arc::new(Failing { ok: Mutex::new(1) });
            let layer = Trace2Layer::builder()
                .with_target(
                    Target::new("GIT_TRACE2", Describe, failing.clone()).with_dst_debug(true),
                )
                .with_target(Target::new("GIT_TRACE2_EVENT", Describe, good.clone()))
                .build();
            let probe = layer.clone();
            tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
                info!("first");
                info!("second");
                info!("third");
            });
            let lines: Vec<String> = good.to_string_lossy().lines().map(str::to_owned).collect();
            // As in git (dst-badfd.*): the failure is reported during the same call, so the
            // other targets get the error line before that call's own line.
            assert_eq!(lines[0], "version open=0 exe=0.1.0");
            assert_eq!(lines[2], "printf open=0 msg=Some(\"first\")");
            assert_eq!(
                lines[1],
                "error open=0 msg=Some(\"unable to write trace to 'GIT_TRACE2': Broken pipe\") \
             fmt=Some(\"unable to write trace to '%s': %s\")"
            );
            assert_eq!(lines.len(), 5, "{lines:?}");
            assert!(!probe.targets()[0].is_enabled());
            assert!(probe.targets()[1].is_enabled());
        },
    );
    tracing_trace2_test_support::child::assert_child_stderr(
        &out,
        "warning: unable to write trace to 'GIT_TRACE2': Broken pipe\n",
    );
}

/// One target alone (its callbacks write one line each, without the loop over several):
/// its failed write disables it, and it is not written to again.
#[test]
fn a_lone_failing_target_is_disabled_and_not_written_again() {
    // The failure is on purpose: its warning goes to fd 2, so the scenario runs in a
    // child whose stderr is asserted (nothing alarming reaches the test output).
    let out = tracing_trace2_test_support::child::child_or_run(
        concat!(
            module_path!(),
            "::a_lone_failing_target_is_disabled_and_not_written_again"
        ),
        || {
            struct Counting {
                calls: Mutex<usize>,
                failing: Failing,
            }
            impl Sink for Counting {
                fn write_line(&self, line: &[u8]) -> io::Result<()> {
                    *self.calls.lock().unwrap() += 1;
                    self.failing.write_line(line)
                }
            }
            let sink = Arc::new(Counting {
                calls: Mutex::new(0),
                failing: Failing { ok: Mutex::new(2) },
            });
            let layer = Trace2Layer::builder()
                .with_target(Target::new("GIT_TRACE2", Describe, sink.clone()).with_dst_debug(true))
                .build();
            let probe = layer.clone();
            tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
                info!("first");
                assert!(probe.targets()[0].is_enabled());
                info!("second");
                assert!(!probe.targets()[0].is_enabled());
                info!("third");
                let _span = tracing::info_span!("region").entered();
            });
            // `version`, `first`, then `second`, which fails; nothing after it.
            assert_eq!(*sink.calls.lock().unwrap(), 3);
        },
    );
    tracing_trace2_test_support::child::assert_child_stderr(
        &out,
        "warning: unable to write trace to 'GIT_TRACE2': Broken pipe\n",
    );
}

#[test]
fn without_dst_debug_a_failure_is_silent() {
    let good = MemorySink::new();
    let layer = Trace2Layer::builder()
        .with_target(Target::new(
            "GIT_TRACE2",
            Describe,
            Failing { ok: Mutex::new(0) },
        ))
        .with_target(Target::new("GIT_TRACE2_EVENT", Describe, good.clone()))
        .build();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        info!("first");
    });
    assert!(!good.to_string_lossy().contains("error"));
}

#[test]
fn counters_keep_all_64_bits() {
    struct Counters;
    impl Format for Counters {
        fn format(&self, r: &Record<'_>, out: &mut Vec<u8>) {
            if let Trace2Event::Counter { value, .. } = r.event {
                out.extend_from_slice(format!("{value}\n").as_bytes());
            }
        }
    }
    let sink = MemorySink::new();
    let layer = Trace2Layer::builder()
        .with_target(Target::new("GIT_TRACE2", Counters, sink.clone()))
        .build();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        api::counter(false, "c", "n", u64::MAX - 1);
    });
    assert_eq!(sink.to_string_lossy(), format!("{}\n", u64::MAX - 1));
}

#[test]
fn nothing_is_written_after_atexit() {
    let lines = run(|| {
        info!("before");
        api::atexit();
        info!("after");
        info_span!("late").in_scope(|| {});
    });
    assert_eq!(lines.last().unwrap(), "atexit open=0");
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("after") || l.contains("late")),
        "{lines:?}"
    );
}

/// Prints `<thread> <event> [label] [nesting]`, thread lines included.
struct Lanes;

impl Format for Lanes {
    fn format(&self, r: &Record<'_>, out: &mut Vec<u8>) {
        let mut s = format!("{} {}", r.thread, r.event.name());
        match r.event {
            Trace2Event::RegionEnter { region, nesting }
            | Trace2Event::RegionLeave {
                region, nesting, ..
            } => {
                s.push_str(&format!(" {} {nesting}", region.label.unwrap_or("")));
            }
            Trace2Event::Data {
                category, nesting, ..
            } => s.push_str(&format!(" {category} {nesting}")),
            _ => {}
        }
        s.push('\n');
        out.extend_from_slice(s.as_bytes());
    }
}

/// Runs `f` under a layer writing [`Lanes`] lines, built by `build` (region-per-span
/// mode unless it says otherwise), and returns everything it wrote.
fn lanes_text(
    build: impl FnOnce(
        tracing_trace2_core::Trace2LayerBuilder,
    ) -> tracing_trace2_core::Trace2LayerBuilder,
    f: impl FnOnce(),
) -> String {
    let sink = MemorySink::new();
    let layer = build(Trace2Layer::builder().with_target(Target::new(
        "GIT_TRACE2_EVENT",
        Lanes,
        sink.clone(),
    )))
    .build();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), f);
    sink.to_string_lossy()
}

/// Runs `f` under a layer built by `build` (region-per-span mode unless it says
/// otherwise) and returns its lines without `version`.
fn run_with(
    build: impl FnOnce(
        tracing_trace2_core::Trace2LayerBuilder,
    ) -> tracing_trace2_core::Trace2LayerBuilder,
    f: impl FnOnce(),
) -> Vec<String> {
    lanes_text(build, f)
        .lines()
        .filter(|l| !l.ends_with(" version"))
        .map(|l| l.split_once(' ').map_or(l, |(_, rest)| rest).to_owned())
        .collect()
}

#[test]
fn a_span_entered_many_times_is_one_region_for_its_lifetime() {
    let lines = run_with(
        |b| b,
        || {
            let span = info_span!("kept");
            for _ in 0..3 {
                span.in_scope(|| info!(key = "k", value = 1));
            }
            drop(span);
        },
    );
    assert_eq!(
        lines,
        [
            "thread_start",
            "region_enter kept 1",
            "data layer 2",
            "data layer 2",
            "data layer 2",
            "region_leave kept 1",
        ]
    );
    // Git's mode: one pair per entry.
    let entry = run_with(
        |b| b.with_region_mode(RegionMode::Entry),
        || {
            let span = info_span!("kept");
            for _ in 0..3 {
                span.in_scope(|| {});
            }
        },
    );
    assert_eq!(
        entry
            .iter()
            .filter(|l| l.starts_with("region_enter"))
            .count(),
        3
    );
}

/// Runs `f` under a region-per-span layer writing [`Lanes`] lines, built by `build`;
/// returns the lines without `version`.
fn lanes_of(
    build: impl FnOnce(
        tracing_trace2_core::Trace2LayerBuilder,
    ) -> tracing_trace2_core::Trace2LayerBuilder,
    f: impl FnOnce(),
) -> Vec<String> {
    lanes_text(build, f)
        .lines()
        .skip(1)
        .map(str::to_owned)
        .collect()
}

/// A sibling entered while a kept span's region is still open cannot go on top of it
/// (that region may close first): it goes on a task lane, announced once and ended
/// (with every other lane still announced) before `atexit`.
#[test]
fn a_region_that_would_break_the_stack_goes_on_a_task_lane() {
    let lines = lanes_of(
        |b| b,
        || {
            let kept = info_span!("kept");
            kept.in_scope(|| {});
            info_span!("sibling").in_scope(|| info!(key = "k", value = 1));
            drop(kept);
            api::atexit();
        },
    );
    let thread = |i: usize| lines[i].split(' ').next().unwrap();
    assert_eq!(lines.len(), 9, "{lines:?}");
    assert!(lines[1].ends_with("region_enter kept 1"), "{lines:?}");
    // The task lane: thread_start, the sibling's region at nesting 1, its datum.
    assert_eq!(lines[2], "task-lane-01 thread_start", "{lines:?}");
    assert!(lines[3].ends_with("region_enter sibling 1"), "{lines:?}");
    assert!(lines[4].ends_with("data layer 2"), "{lines:?}");
    assert!(lines[5].ends_with("region_leave sibling 1"), "{lines:?}");
    assert!((2..6).all(|i| thread(i) == "task-lane-01"));
    assert!(lines[6].ends_with("region_leave kept 1") && thread(6) == thread(1));
    // The process end: the task lane ends before `atexit`; the test thread's lane ends
    // with its `atexit` (as in git, the thread that writes it has no `thread_exit`).
    assert_eq!(lines[7], "task-lane-01 thread_exit", "{lines:?}");
    assert_eq!(lines[8], format!("{} atexit", thread(1)));
}

/// A span whose nearest traced ancestor has no region yet (the child is entered before
/// its parent) opens under the nearest ancestor whose region is open: on the thread's
/// lane when that one is on top of it, not on a task lane. (The first entry takes the
/// nearest ancestor noted at creation without a walk only when it is the span the thread
/// is in.)
#[test]
fn a_child_entered_before_its_parent_opens_under_the_nearest_open_region() {
    let lines = lanes_of(
        |b| b,
        || {
            info_span!("grand").in_scope(|| {
                let parent = info_span!("parent");
                let child = info_span!(parent: &parent, "child");
                child.in_scope(|| {});
                drop(child);
                parent.in_scope(|| {});
            });
        },
    );
    let lane = lines[0].split(' ').next().unwrap();
    let body: Vec<&str> = lines
        .iter()
        .map(|l| l.strip_prefix(lane).unwrap_or(l).trim_start())
        .collect();
    assert_eq!(
        body,
        [
            "thread_start",
            "region_enter grand 1",
            "region_enter child 2",
            "region_leave child 2",
            "region_enter parent 2",
            "region_leave parent 2",
            "region_leave grand 1",
        ],
        "{lines:?}"
    );
}

/// Siblings of a kept region, one after the other: the task lane of the first is idle
/// again when the next one comes, which takes it rather than a new one.
#[test]
fn an_idle_task_lane_is_reused() {
    let lines = lanes_of(
        |b| b,
        || {
            let kept = info_span!("kept");
            kept.in_scope(|| {});
            for _ in 0..20 {
                info_span!("sibling").in_scope(|| {});
            }
        },
    );
    let starts: Vec<&String> = lines
        .iter()
        .filter(|l| l.ends_with("thread_start"))
        .collect();
    // The test thread's lane, and one task lane for all twenty siblings.
    assert_eq!(starts.len(), 2, "{lines:?}");
    assert_eq!(starts[1], "task-lane-01 thread_start");
    let on_task = lines
        .iter()
        .filter(|l| l.starts_with("task-lane-01 region_enter sibling 1"))
        .count();
    assert_eq!(on_task, 20, "{lines:?}");
    assert!(
        !lines.iter().any(|l| l.ends_with("thread_exit")),
        "{lines:?}"
    );
}

/// Past the bound, a region that needs a task lane is left out, with the spans under
/// it, and the number left out is written at the process end.
#[test]
fn task_lanes_are_bounded() {
    let lines = lanes_of(
        |b| b.with_max_task_lanes(2),
        || {
            let kept = info_span!("kept");
            kept.in_scope(|| {});
            // Each sibling stays open: each needs a lane of its own.
            let siblings: Vec<_> = (0..4).map(|_| info_span!("sibling")).collect();
            for sibling in &siblings {
                sibling.in_scope(|| info_span!("child").in_scope(|| {}));
            }
            drop(siblings);
            api::atexit();
        },
    );
    let lanes: std::collections::BTreeSet<&str> = lines
        .iter()
        .filter(|l| l.ends_with("thread_start"))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(lanes.len(), 3, "{lines:?}");
    assert!(lanes.contains("task-lane-01") && lanes.contains("task-lane-02"));
    let count = |what: &str| lines.iter().filter(|l| l.contains(what)).count();
    assert_eq!(count("region_enter sibling"), 2, "{lines:?}");
    assert_eq!(count("region_leave sibling"), 2, "{lines:?}");
    // A child of a region left out is left out too, not moved under another one.
    assert_eq!(count("region_enter child"), 2, "{lines:?}");
    assert!(
        lines.iter().any(|l| l.ends_with("data trace2 1")),
        "the count of regions left out: {lines:?}"
    );
    assert!(lines.last().unwrap().ends_with("atexit"), "{lines:?}");
}

#[test]
fn data_takes_the_category_of_the_enclosing_span() {
    let lines = run_with(
        |b| b,
        || {
            info_span!("s", trace2.category = "index").in_scope(|| {
                info!(key = "inherited", value = 1);
                info!(category = "own", key = "named", value = 1);
            });
            info!(key = "outside", value = 1);
        },
    );
    assert!(lines.contains(&"data index 2".to_owned()), "{lines:?}");
    assert!(lines.contains(&"data own 2".to_owned()), "{lines:?}");
    assert!(lines.contains(&"data layer 1".to_owned()), "{lines:?}");
}

/// The default category is the crate: two crates with a module of the same name (every
/// `function`, `init` or `write`) never share one, for regions and for data events.
#[test]
fn the_default_category_is_the_crate() {
    let lines = run_with(
        |b| b,
        || {
            info_span!(target: "gix_dir::walk::function", "walk")
                .in_scope(|| info!(key = "entries", value = 1));
            info_span!(target: "gix_status::index_as_worktree::function", "status")
                .in_scope(|| info!(key = "entries", value = 1));
            info!(target: "gix_protocol::command::function", key = "k", value = 1);
        },
    );
    let data: Vec<&str> = lines
        .iter()
        .filter(|l| l.starts_with("data"))
        .map(String::as_str)
        .collect();
    assert_eq!(
        data,
        ["data gix_dir 2", "data gix_status 2", "data gix_protocol 1"]
    );
}

/// By default DEBUG spans are regions (libraries put their request and detail spans
/// there) while DEBUG events are left out, and TRACE spans too; `with_max_level` (both),
/// `with_span_level`, `with_event_level` and the standard per-layer filter choose
/// otherwise; API calls pass either way.
#[test]
fn default_level_and_per_layer_filters() {
    use tracing::level_filters::LevelFilter;
    let program = || {
        tracing::debug_span!("quiet").in_scope(|| {
            tracing::debug!(key = "debug", value = 1);
            info!(key = "info", value = 1);
            tracing::trace_span!("fine").in_scope(|| info!(key = "fine", value = 1));
        });
        api::data("api", "call", "v", None);
    };
    let default = run_with(|b| b, program);
    assert_eq!(
        default,
        [
            "thread_start",
            "region_enter quiet 1",
            "data layer 2",
            "data layer 2",
            "region_leave quiet 1",
            "data api 1"
        ]
    );
    // (This thread was announced by the first run: thread state is per thread.)
    let verbose = run_with(|b| b.with_max_level(LevelFilter::DEBUG), program);
    assert_eq!(
        verbose,
        [
            "region_enter quiet 1",
            "data layer 2",
            "data layer 2",
            "data layer 2",
            "region_leave quiet 1",
            "data api 1"
        ]
    );
    let info_spans = run_with(|b| b.with_span_level(LevelFilter::INFO), program);
    assert_eq!(info_spans, ["data layer 1", "data layer 1", "data api 1"]);
    let everything = run_with(
        |b| {
            b.with_span_level(LevelFilter::TRACE)
                .with_event_level(LevelFilter::TRACE)
        },
        program,
    );
    assert_eq!(everything.len(), 8, "{everything:?}");

    // A per-layer filter narrows further: the API call still arrives.
    let sink = MemorySink::new();
    let layer = Trace2Layer::builder()
        .with_target(Target::new("GIT_TRACE2_EVENT", Lanes, sink.clone()))
        .build()
        .with_filter(tracing::level_filters::LevelFilter::WARN);
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), program);
    let text = sink.to_string_lossy();
    assert!(!text.contains("data layer"), "{text}");
    assert!(text.contains("data api 1"), "{text}");
}

/// As in git, the thread that writes `atexit` gets no `thread_exit`: `atexit` is its
/// last line. Two layers one after the other on the same (non-main) thread each
/// announce it and end with `exit`, `atexit`.
#[test]
fn the_thread_that_writes_atexit_has_no_thread_exit() {
    for _ in 0..2 {
        let lines = lanes_of(
            |b| b,
            || {
                api::start(&["x"]);
                api::exit(3);
                api::atexit();
            },
        );
        let events: Vec<&str> = lines
            .iter()
            .map(|l| l.split_once(' ').map_or(&l[..], |(_, e)| e))
            .collect();
        assert_eq!(
            events,
            ["thread_start", "start", "exit", "atexit"],
            "{lines:?}"
        );
        let thread = lines[0].split(' ').next().unwrap();
        assert!(lines.iter().all(|l| l.starts_with(thread)), "{lines:?}");
    }
}

/// A layer that records nothing but wants every span: it keeps the spans our layer
/// leaves out in the Registry (the program's other layers do that in real use).
struct WantsAll;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for WantsAll {}

/// Spans the layer does not record (below its level, or behind its per-layer filter)
/// are looked through: a span created under one nests under the region above it, an
/// explicit parent that is one does the same, and an event inside one takes the
/// category of the region above it. (An event whose explicit parent the per-layer
/// filter hides has no enclosing span for `tracing`'s `event_span`: it keeps the
/// default category, as it did when the state was kept in the Registry's extensions.)
#[test]
fn spans_the_layer_does_not_record_are_looked_through() {
    let program = || {
        let outer = info_span!("outer", trace2.category = "outer_cat");
        let _outer = outer.enter();
        let hidden = tracing::trace_span!("hidden");
        let entered_hidden = hidden.enter();
        info!(key = "under_hidden", value = 1);
        let inner = info_span!("inner");
        inner.in_scope(|| info!(key = "in_inner", value = 1));
        drop(inner);
        let explicit = info_span!(parent: &hidden, "explicit");
        drop(entered_hidden);
        explicit.in_scope(|| info!(parent: &hidden, key = "explicit_parent", value = 1));
    };
    let expected = |explicit_parent_category: &str| {
        [
            "region_enter outer 1",
            "data outer_cat 2",
            "region_enter inner 2",
            "data layer 3",
            "region_leave inner 2",
            "region_enter explicit 2",
            &format!("data {explicit_parent_category} 3"),
            "region_leave explicit 2",
            "region_leave outer 1",
        ]
        .map(str::to_owned)
    };
    for per_layer_filter in [false, true] {
        let sink = MemorySink::new();
        let layer = Trace2Layer::builder()
            .with_target(Target::new("GIT_TRACE2_EVENT", Lanes, sink.clone()))
            .build();
        let registry = tracing_subscriber::registry().with(WantsAll);
        if per_layer_filter {
            tracing::subscriber::with_default(registry.with(layer.filtered()), program);
        } else {
            tracing::subscriber::with_default(registry.with(layer), program);
        }
        let text = sink.to_string_lossy();
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| !l.ends_with(" version") && !l.ends_with(" thread_start"))
            .map(|l| l.split_once(' ').map_or(l, |(_, rest)| rest))
            .collect();
        let category = if per_layer_filter {
            "layer"
        } else {
            "outer_cat"
        };
        assert_eq!(
            lines,
            expected(category),
            "per-layer filter: {per_layer_filter}"
        );
    }
}
