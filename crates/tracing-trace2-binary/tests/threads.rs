//! Many threads recording at once through one writer: nothing is lost, each thread's
//! records come back in its own order, thread ends and exit-time flushes reach every
//! batch, and the END frame accounts for every thread.

mod support;

use std::sync::{Arc, Barrier};

use support::{builder, decode_all};
use tracing_trace2_binary::MIN_BATCH_SIZE;
use tracing_trace2_core::{Callsite, MemorySink, Record, RegionInfo, Timestamp, Trace2Event};

const SID: &str = "20260101T000000.000000Z-H0123abcd-P00001234";

fn record<'a>(thread: &'a str, event: Trace2Event<'a>, t: u64, open: u32) -> Record<'a> {
    Record {
        event,
        time: Timestamp {
            wall_us: 1_700_000_000_000_000 + t as i64,
            t_abs_us: t,
        },
        sid: SID,
        depth: 0,
        thread,
        callsite: Callsite {
            file: Some(file!()),
            line: line!(),
        },
        open_regions: open,
    }
}

fn record_script(writer: &tracing_trace2_binary::BinaryWriter, name: &str, count: u64) {
    let region = RegionInfo {
        repo: None,
        category: Some("bench"),
        label: Some("step"),
        msg: None,
    };
    for i in 0..count {
        let value = i.to_string();
        let t = i * 3;
        writer.record(&record(
            name,
            Trace2Event::RegionEnter { region, nesting: 1 },
            t,
            0,
        ));
        writer.record(&record(
            name,
            Trace2Event::Data {
                repo: None,
                category: "bench",
                key: "i",
                value: &value,
                nesting: 2,
                t_rel_us: 1,
            },
            t + 1,
            1,
        ));
        writer.record(&record(
            name,
            Trace2Event::RegionLeave {
                region,
                nesting: 1,
                t_rel_us: 2,
            },
            t + 2,
            0,
        ));
    }
}

#[test]
fn each_threads_records_come_back_in_order() {
    const THREADS: usize = 8;
    const COUNT: u64 = 3000;
    let sink = MemorySink::new();
    let writer = builder()
        .with_batch_size(MIN_BATCH_SIZE)
        .with_anchor_wall_us(1_700_000_000_000_000)
        .build(sink.clone());
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|n| {
            let writer = writer.clone();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let name = format!("th{n:02}:worker");
                barrier.wait();
                record_script(&writer, &name, COUNT);
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    writer.finish();
    let (decoded, report) = decode_all(&sink.contents());
    assert!(report.is_complete(), "{report}");
    assert_eq!(decoded.len(), THREADS * COUNT as usize * 3);
    assert_eq!(report.streams[0].threads.len(), THREADS);
    for n in 0..THREADS {
        let name = format!("thread: \"th{n:02}:worker\"");
        let values: Vec<u64> = decoded
            .iter()
            .filter(|d| d.1.contains(&name) && d.1.contains("Data"))
            .map(|d| {
                let v = d.1.split("value: \"").nth(1).unwrap();
                v[..v.find('"').unwrap()].parse().unwrap()
            })
            .collect();
        assert_eq!(values, (0..COUNT).collect::<Vec<_>>(), "thread {n}");
    }
}

#[test]
fn flush_all_reaches_threads_that_are_still_running() {
    let sink = MemorySink::new();
    let writer = builder().build(sink.clone());
    let recorded = Arc::new(Barrier::new(3));
    let release = Arc::new(Barrier::new(3));
    let handles: Vec<_> = (0..2)
        .map(|n| {
            let writer = writer.clone();
            let (recorded, release) = (Arc::clone(&recorded), Arc::clone(&release));
            std::thread::spawn(move || {
                record_script(&writer, &format!("th{n:02}:idle"), 10);
                recorded.wait();
                // Alive, idle, its batch unwritten until someone flushes it.
                release.wait();
            })
        })
        .collect();
    recorded.wait();
    assert_eq!(decode_all(&sink.contents()).0.len(), 0);
    writer.finish();
    let (decoded, report) = decode_all(&sink.contents());
    assert_eq!(decoded.len(), 60);
    assert!(report.is_complete(), "{report}");
    release.wait();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn a_thread_that_ends_writes_its_batch() {
    let sink = MemorySink::new();
    let writer = builder().build(sink.clone());
    {
        let writer = writer.clone();
        std::thread::spawn(move || record_script(&writer, "th01:short", 5))
            .join()
            .unwrap();
    }
    // Not finished: the thread's end alone wrote its batch.
    let (decoded, report) = decode_all(&sink.contents());
    assert_eq!(decoded.len(), 15);
    assert!(!report.streams[0].ended);
    writer.finish();
    let (_, report) = decode_all(&sink.contents());
    assert!(report.is_complete(), "{report}");
    // Its slot is taken by the next new thread, as a new thread of the stream.
    {
        let writer = writer.clone();
        std::thread::spawn(move || record_script(&writer, "th02:next", 5))
            .join()
            .unwrap();
    }
    writer.finish();
    let (decoded, report) = decode_all(&sink.contents());
    assert_eq!(decoded.len(), 30);
    assert_eq!(report.streams[0].threads.len(), 2);
    assert!(report.is_complete(), "{report}");
}

#[test]
fn lifecycle_events_write_the_batches_out() {
    let sink = MemorySink::new();
    let writer = builder().build(sink.clone());
    let other = {
        let writer = writer.clone();
        std::thread::spawn(move || record_script(&writer, "th01:other", 3))
    };
    other.join().unwrap();
    record_script(&writer, "main", 2);
    assert_eq!(decode_all(&sink.contents()).0.len(), 9);
    // `exit` writes every batch (no END yet), `atexit` ends the stream.
    writer.record(&record("main", Trace2Event::Exit { code: 0 }, 100, 0));
    let (decoded, report) = decode_all(&sink.contents());
    assert_eq!(decoded.len(), 16);
    assert!(!report.streams[0].ended);
    writer.record(&record("main", Trace2Event::Atexit { code: 0 }, 101, 0));
    let (decoded, report) = decode_all(&sink.contents());
    assert_eq!(decoded.len(), 17);
    assert!(report.is_complete(), "{report}");
}

#[test]
fn the_flush_interval_writes_an_old_batch_at_the_next_record() {
    let sink = MemorySink::new();
    let writer = tracing_trace2_binary::BinaryWriter::builder()
        .with_exit_handler(false)
        .build(sink.clone());
    record_script(&writer, "main", 1);
    assert!(sink.contents().is_empty());
    // 250 ms later by the records' clock.
    writer.record(&record(
        "main",
        Trace2Event::Printf { msg: Some("late") },
        250_000,
        0,
    ));
    assert_eq!(decode_all(&sink.contents()).0.len(), 4);
}
