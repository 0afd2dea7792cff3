//! The steady state of the layer allocates nothing: once a thread has warmed up (its
//! buffers grown, its callsites registered, the `version` line written), region
//! enters and leaves, data events and printf messages through all three formats into a
//! real file sink allocate 0 times, and so does creating a span: the layer keeps a span's
//! state in a store of its own (by value, in a table that keeps its room), not boxed in
//! the Registry's extensions, and the span's strings come from a per-thread pool.
//!
//! The same holds for the traced thread of the deferred writer, which only encodes each
//! record into a recycled buffer and queues it (the worker thread formats and writes),
//! for a binary (t2b) target beside the text targets, and in both region modes (a
//! region per span lifetime, the default, and git's region per entry).
//!
//! A counting global allocator counts the allocations of the calling thread only, so
//! the test harness's own threads (and the deferred writer's worker) do not disturb the
//! counts.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tracing::{info, info_span};
use tracing_subscriber::layer::SubscriberExt;
use tracing_trace2_binary::{self as binary, BinaryWriter, DestSettings, MIN_BATCH_SIZE};
use tracing_trace2_core::background::BackgroundOptions;
use tracing_trace2_core::{RegionMode, Sink, Trace2Layer};
use tracing_trace2_dst::{self as dst, OpenSettings, Opened};
use tracing_trace2_event::EventFormat;
use tracing_trace2_normal::NormalFormat;
use tracing_trace2_perf::PerfFormat;
use tracing_trace2_test_support::alloc::{self as counting, CountingAlloc};

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// Allocations made on this thread while `f` runs.
fn allocations(f: impl FnOnce()) -> u64 {
    let before = counting::allocations();
    f();
    counting::allocations() - before
}

const N: u64 = 1000;

/// A sink opened as the facade opens a destination value: a real file, one `write` per line.
fn sink(path: &std::path::Path) -> Box<dyn Sink> {
    let settings = OpenSettings {
        env_name: tracing_trace2::targets::EVENT_ENV,
        dst_debug: true,
        max_files: 0,
        sid_component: "alloc".to_owned(),
    };
    match dst::open(path.to_str().unwrap(), &settings) {
        Opened::Sink(sink) => sink,
        other => panic!("{other:?}"),
    }
}

/// While set, every write of a [`Slow`] sink first sleeps a little (only the deferred
/// test uses them).
static SLOW: AtomicBool = AtomicBool::new(false);

/// A sink that can be made slow, so that the warm-up of the deferred writer fills its
/// queue for sure: the steady state is the one after the queue has been full once, when
/// its two buffers (the one senders fill, the one the worker empties) have grown to the
/// most they need.
struct Slow(Box<dyn Sink>);

impl Sink for Slow {
    fn write_line(&self, line: &[u8]) -> std::io::Result<()> {
        if SLOW.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_micros(100));
        }
        self.0.write_line(line)
    }
}

/// A binary (t2b) writer into a real file, as `TRACING_TRACE2_BINARY` opens one; its
/// batches are small so that many frames are written during the test.
fn binary_writer(dir: &std::path::Path) -> BinaryWriter {
    let settings = DestSettings {
        dst_debug: true,
        max_files: 0,
        sid: "alloc".to_owned(),
    };
    let dest = binary::dest::open(dir.join("binary").to_str().unwrap(), &settings).unwrap();
    BinaryWriter::builder()
        .with_batch_size(MIN_BATCH_SIZE)
        .with_exit_handler(false)
        .build(dest.sink)
}

/// The three targets, each into its own file (and a binary target when `binary` is
/// given); formatted on the traced thread, or on the deferred writer's worker.
fn layer(
    dir: &std::path::Path,
    mode: RegionMode,
    deferred: bool,
    binary: Option<&BinaryWriter>,
) -> Trace2Layer {
    let sink = |path: &std::path::Path| -> Box<dyn Sink> {
        if deferred {
            Box::new(Slow(sink(path)))
        } else {
            sink(path)
        }
    };
    let builder = Trace2Layer::builder()
        .with_region_mode(mode)
        .with_target(tracing_trace2::targets::normal(
            NormalFormat::new().with_utc_offset(3600),
            sink(&dir.join("normal")),
        ))
        .with_target(tracing_trace2::targets::perf(
            PerfFormat::new().with_utc_offset(3600),
            sink(&dir.join("perf")),
        ))
        .with_target(tracing_trace2::targets::event(
            EventFormat::new().with_max_nesting(10),
            sink(&dir.join("event")),
        ));
    let builder = match binary {
        Some(writer) => builder.with_target(tracing_trace2::targets::binary(writer, false)),
        None => builder,
    };
    let builder = if deferred {
        // A short queue, which the warm-up fills.
        builder.with_deferred(
            BackgroundOptions::new()
                .with_capacity(16)
                .with_flush_on_panic(false),
        )
    } else {
        builder
    };
    builder.build()
}

fn data(i: u64) {
    info!(category = "index", key = "cache_nr", value = i);
    info!(category = "index", key = "path", value = "a/b/c");
}

fn printf(i: u64) {
    info!("read {i} entries from {}", "a/b/c");
}

fn region(i: u64) {
    let span = info_span!(
        "do_read_index",
        trace2.category = "index",
        trace2.label = "read",
        trace2.msg = ".git/index",
        entries = i
    );
    let _entered = span.enter();
    data(i);
}

/// The default mode: a region per span lifetime.
#[test]
fn steady_state_allocates_nothing() {
    steady_state(RegionMode::Span, false, false);
}

/// Git's region-per-entry mode: every `outer.enter()` below is a region pair.
#[test]
fn steady_state_allocates_nothing_per_entry() {
    steady_state(RegionMode::Entry, false, false);
}

// Each case runs on a test thread of its own: a thread is announced (`thread_start`)
// once, whatever the layer, and the line counts below expect it.

#[test]
fn deferred_steady_state_allocates_nothing_on_the_traced_thread() {
    steady_state(RegionMode::Span, true, false);
}

#[test]
fn deferred_steady_state_allocates_nothing_per_entry() {
    steady_state(RegionMode::Entry, true, false);
}

/// The binary target beside the three text targets.
#[test]
fn binary_target_allocates_nothing_either() {
    steady_state(RegionMode::Span, false, true);
}

#[test]
fn binary_target_allocates_nothing_per_entry() {
    steady_state(RegionMode::Entry, false, true);
}

fn steady_state(mode: RegionMode, deferred: bool, with_binary: bool) {
    let dir = tempfile::tempdir().unwrap();
    let binary = with_binary.then(|| binary_writer(dir.path()));
    let layer = layer(dir.path(), mode, deferred, binary.as_ref());
    let subscriber = tracing_subscriber::registry().with(layer.clone());
    let _default = tracing::subscriber::set_default(subscriber);

    let outer = info_span!("outer", trace2.category = "test", trace2.msg = "held open");
    if deferred {
        SLOW.store(true, Ordering::Relaxed);
    }
    let warm_up = || {
        for i in 0..100 {
            let _entered = outer.enter();
            region(i);
            data(i);
            printf(i);
        }
    };
    warm_up();
    if deferred {
        SLOW.store(false, Ordering::Relaxed);
    }

    // Entering and leaving a span that exists (per entry: two lines per format; per
    // span lifetime: its region stays open), nothing allocated.
    let pairs = allocations(|| {
        for _ in 0..N {
            let _entered = outer.enter();
        }
    });
    assert_eq!(pairs, 0, "allocations for {N} region enter/leave pairs");

    let events = allocations(|| {
        let _entered = outer.enter();
        for i in 0..N {
            data(i);
            printf(i);
        }
    });
    assert_eq!(
        events,
        0,
        "allocations for {} data and printf events",
        3 * N
    );

    // A new span per region: nothing allocated either. (The spans are
    // children of `outer`, entered: their regions go on top of its region. Root spans
    // beside it are measured below.)
    let spans = allocations(|| {
        let _entered = outer.enter();
        for i in 0..N {
            region(i);
        }
    });
    assert_eq!(
        spans, 0,
        "allocations for {N} spans created, entered and left"
    );

    // A root span beside `outer`'s open region: per span lifetime it cannot go on top
    // of `outer`, so it goes on a task lane, the one the span before it left idle (the
    // first one, below, makes it); per entry it goes on the thread's lane. Either way:
    // nothing allocated.
    region(0);
    let beside = allocations(|| {
        for i in 0..N {
            region(i);
        }
    });
    assert_eq!(
        beside, 0,
        "allocations for {N} spans beside a region held open"
    );

    if let Some(writer) = &binary {
        // Batches were written while the spans were counted, each followed by a fresh one.
        assert!(writer.stats().frames > 10, "{:?}", writer.stats());
    }
    drop(outer);
    drop(_default);
    layer.flush();
    let event = std::fs::read_to_string(dir.path().join("event")).unwrap();
    let perf = std::fs::read_to_string(dir.path().join("perf")).unwrap();
    // The lines were really written: version and the `thread_start` of the test's
    // thread, which is not `main`; per entry, 100 warm-up rounds (2 + 2 + 2 + 2 + 1
    // each), the pairs (2 each), the events (2 + 1 each, inside one pair), the regions
    // (4 each, inside one pair); per span lifetime, `outer`'s one region (2) and,
    // without its pairs, the same warm-up rounds (2 + 2 + 1), events (3 each) and
    // regions (4 each); then the regions beside `outer` (4 each, the first one's task
    // lane announced once per span lifetime).
    let beside = 4 * (N + 1);
    let expected = match mode {
        RegionMode::Entry => 1 + 1 + 100 * 9 + 2 * N + (2 + 3 * N) + (2 + 4 * N) + beside,
        _ => 1 + 1 + 2 + 100 * 7 + 3 * N + 4 * N + 1 + beside,
    };
    assert_eq!(event.lines().count() as u64, expected);
    assert_eq!(perf.lines().count() as u64, expected);
    assert!(event.lines().all(|l| l.starts_with("{\"event\":")));
}
