//! The binary writer allocates nothing per record in steady state: once the thread's
//! slot exists, records of every common kind (regions, data, printf with changing
//! text) are encoded, batches written to a real file and new batches started, all
//! without an allocation. The same through the core layer, for a span entered and
//! left and data events inside it.
//!
//! A counting global allocator counts the calling thread's allocations only.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write;

use tracing::{info, info_span};
use tracing_subscriber::layer::SubscriberExt;
use tracing_trace2_binary::{BinaryWriter, DestSettings, MIN_BATCH_SIZE, dest};
use tracing_trace2_core::{Callsite, Record, RegionInfo, Target, Trace2Event, Trace2Layer, clock};

struct Counting;

thread_local! {
    // Const-initialised and without a destructor: usable from inside the allocator.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded to the system allocator unchanged; the count is a
// thread-local integer that never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

const SID: &str = "20260101T000000.000000Z-H0123abcd-P00001234";

/// A writer into a real file, opened as a `TRACING_TRACE2_BINARY` value.
fn file_writer(dir: &std::path::Path) -> BinaryWriter {
    let path = dir.join("trace.t2b");
    let settings = DestSettings {
        dst_debug: true,
        max_files: 0,
        sid: SID.to_owned(),
    };
    let dest = dest::open(path.to_str().unwrap(), &settings).unwrap();
    BinaryWriter::builder()
        .with_batch_size(MIN_BATCH_SIZE)
        .with_exit_handler(false)
        .build(dest.sink)
}

fn records(writer: &BinaryWriter, i: u64, text: &mut Vec<u8>) {
    let region = RegionInfo {
        repo: None,
        category: Some("index"),
        label: Some("do_read_index"),
        msg: Some(".git/index"),
    };
    let record = |event, open| Record {
        event,
        time: clock::now(),
        sid: SID,
        depth: 0,
        thread: "main",
        callsite: Callsite {
            file: Some(file!()),
            line: line!(),
        },
        open_regions: open,
    };
    text.clear();
    let _ = write!(text, "{i}");
    let value = std::str::from_utf8(text).unwrap();
    writer.record(&record(Trace2Event::RegionEnter { region, nesting: 1 }, 0));
    writer.record(&record(
        Trace2Event::Data {
            repo: None,
            category: "index",
            key: "cache_nr",
            value,
            nesting: 2,
            t_rel_us: 3,
        },
        1,
    ));
    writer.record(&record(Trace2Event::Printf { msg: Some(value) }, 1));
    writer.record(&record(
        Trace2Event::RegionLeave {
            region,
            nesting: 1,
            t_rel_us: 5,
        },
        0,
    ));
}

#[test]
fn records_allocate_nothing_in_steady_state() {
    let dir = tempfile::tempdir().unwrap();
    let writer = file_writer(dir.path());
    let mut text = Vec::with_capacity(32);
    for i in 0..2000 {
        records(&writer, i, &mut text);
    }
    let before = writer.stats().frames;
    let n = allocations(|| {
        for i in 0..20_000 {
            records(&writer, i, &mut text);
        }
    });
    // Many batches were written meanwhile, each followed by a fresh one.
    assert!(writer.stats().frames - before > 50, "{:?}", writer.stats());
    assert_eq!(n, 0, "allocations for 80 000 records");
}

#[test]
fn through_the_layer_nothing_is_allocated_either() {
    let dir = tempfile::tempdir().unwrap();
    let writer = file_writer(dir.path());
    let layer = Trace2Layer::builder()
        .with_target(Target::new(
            tracing_trace2_binary::ENV_NAME,
            tracing_trace2_binary::RecordingFormat(writer.clone()),
            tracing_trace2_binary::FlushingSink(writer.clone()),
        ))
        .build();
    let subscriber = tracing_subscriber::registry().with(layer);
    let _default = tracing::subscriber::set_default(subscriber);
    let outer = info_span!("outer", trace2.category = "test", trace2.msg = "held open");
    let work = |i: u64| {
        let _entered = outer.enter();
        info!(category = "index", key = "cache_nr", value = i);
        info!("read {i} entries");
    };
    for i in 0..2000 {
        work(i);
    }
    let n = allocations(|| {
        for i in 0..20_000 {
            work(i);
        }
    });
    assert_eq!(n, 0, "allocations for 80 000 records");
    assert!(writer.stats().frames > 50);
}

/// The flight recorder's ring, once full, recycles the buffers of the batches it evicts:
/// no allocation per batch either. (A fresh batch-sized buffer per batch made the
/// traced thread pay, under glibc, for merging every small block the rest of the
/// process had freed: `malloc_consolidate`, see docs/performance.md.)
#[test]
fn a_full_flight_ring_allocates_nothing_per_batch() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing here depends on time: no batch goes out before it is full (a batch the
    // flush interval sends early is short, and a short frame gets a buffer of its own
    // size: on a loaded machine a pause of the test thread did that), and no frame
    // ages out of the ring.
    let never = std::time::Duration::from_secs(24 * 3600);
    let recorder = tracing_trace2_binary::FlightRecorder::builder(dir.path())
        .with_max_bytes(32 << 10)
        .with_min_age(never)
        .with_signal(false)
        .with_writer(
            BinaryWriter::builder()
                .with_batch_size(MIN_BATCH_SIZE)
                .with_flush_interval(never)
                .with_exit_handler(false),
        )
        .build()
        .unwrap();
    let writer = recorder.writer();
    let mut text = Vec::with_capacity(32);
    // Fill the ring well past its cap, so that every new batch evicts an old one.
    for i in 0..20_000 {
        records(writer, i, &mut text);
    }
    let evicted_before = recorder.stats().evicted_batches;
    let n = allocations(|| {
        for i in 0..20_000 {
            records(writer, i, &mut text);
        }
    });
    assert!(
        recorder.stats().evicted_batches - evicted_before > 50,
        "{:?}",
        recorder.stats()
    );
    assert_eq!(n, 0, "allocations for 80 000 records into a full ring");
}
