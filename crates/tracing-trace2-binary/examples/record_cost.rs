//! A fixed workload for counting the binary target's instructions per record with
//! `valgrind --tool=callgrind`, which is steady where wall-clock benches are not:
//!
//! ```text
//! cargo build --release -p tracing-trace2-binary --example record_cost
//! valgrind --tool=callgrind --toggle-collect='*record_cost*measured*' \
//!     target/release/examples/record_cost records 100000
//! ```
//!
//! The workloads are the benches' `regions`, `data`, `mixed` and `threads` (`regions` on
//! two threads at once: add the threads' counts, `--separate-threads=yes`).
//!
//! Modes: `records` hands the records of a region around a datum and a message straight
//! to the writer (the binary crate alone), 1 µs apart; `records_spaced` the same 1 ms
//! apart (each record's time delta takes two bytes); `binary-<workload>` and `nothing-<workload>`
//! run the benches' `regions`, `data` or `mixed` workload through the core layer with
//! the binary target, or with a target that formats nothing: their difference is the
//! binary target's share. `event-<workload>` runs them with an Event target writing on
//! the traced thread (the direct path), `event_deferred-<workload>` with the deferred
//! writer (the traced thread encodes; count the worker thread with
//! `--separate-threads=yes`); `perf-<workload>` and `perf_deferred-<workload>` do the
//! same with a Perf target (UTC); `registry-<workload>` runs them through the Registry with a
//! layer that does nothing (the floor of every layer). The writer writes to a sink that drops the bytes (frames are
//! still sealed, CRC included). Divide the collected instructions by the records made
//! (printed on exit).

// The benches' workloads and records, so that the counts compare with their figures.
#[path = "../../../benches/support/mod.rs"]
mod support;

use support::sample_records;
use tracing::dispatcher::{self, Dispatch};
use tracing_subscriber::layer::SubscriberExt;
use tracing_trace2_binary::BinaryWriter;
use tracing_trace2_binary::dest::NullSink;
use tracing_trace2_core::{Format, Record, Target, Timestamp, Trace2Event, Trace2Layer};

/// A format that writes nothing: the layer's own cost.
struct Nothing;

impl Format for Nothing {
    fn format(&self, _record: &Record<'_>, _out: &mut Vec<u8>) {}
}

#[inline(never)]
fn measured_records(writer: &BinaryWriter, records: &[Record<'_>], n: u64) {
    for i in 0..n {
        let mut r = records[(i % records.len() as u64) as usize];
        r.time = Timestamp {
            wall_us: 1_700_000_000_000_000 + i as i64,
            t_abs_us: i,
        };
        writer.record(std::hint::black_box(&r));
    }
}

/// [`measured_records`] with the records `SPACING_US` apart, their `t_rel` what the
/// layer would compute.
#[inline(never)]
fn measured_spaced_records(writer: &BinaryWriter, records: &[Record<'_>], n: u64) {
    const SPACING_US: u64 = 1000;
    for i in 0..n {
        let at = (i % records.len() as u64) as usize;
        let mut r = records[at];
        let t = i * SPACING_US;
        r.time = Timestamp {
            wall_us: 1_700_000_000_000_000 + t as i64,
            t_abs_us: t,
        };
        // The time since the region's enter (the first of the records).
        let since_enter = at as u64 * SPACING_US;
        match &mut r.event {
            Trace2Event::Data { t_rel_us, .. } | Trace2Event::RegionLeave { t_rel_us, .. } => {
                *t_rel_us = since_enter;
            }
            _ => {}
        }
        writer.record(std::hint::black_box(&r));
    }
}

#[inline(never)]
fn measured_workload(workload: &str, n: u64) {
    run_workload(workload, n, true);
}

/// Runs `n` iterations of `workload`; `measured` says whether the threads of `threads`
/// are collected.
#[inline(never)]
fn run_workload(workload: &str, n: u64, measured: bool) {
    match workload {
        "regions" => (0..n).for_each(|_| support::regions()),
        "data" => {
            let span = tracing::info_span!(
                "data",
                trace2.category = "bench",
                trace2.msg = "data events"
            );
            let _entered = span.enter();
            (0..n).for_each(support::data);
        }
        "mixed" => (0..n).for_each(support::mixed),
        "threads" => {
            // `regions` on two threads at once, through the caller's dispatcher.
            let dispatch = dispatcher::get_default(Dispatch::clone);
            std::thread::scope(|scope| {
                for _ in 0..2 {
                    let dispatch = dispatch.clone();
                    scope.spawn(move || {
                        dispatcher::with_default(&dispatch, || {
                            if measured {
                                measured_thread(n);
                            } else {
                                (0..n).for_each(|_| support::regions());
                            }
                        });
                    });
                }
            });
        }
        other => panic!("no workload {other}"),
    }
}

/// One thread of the `threads` workload (collected like the measured workload).
#[inline(never)]
fn measured_thread(n: u64) {
    (0..n).for_each(|_| support::regions());
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "records".into());
    let n: u64 = args.next().map_or(100_000, |a| a.parse().expect("a count"));
    let writer = BinaryWriter::builder()
        .with_exit_handler(false)
        .build(NullSink);
    if mode == "records" || mode == "records_spaced" {
        let records = sample_records();
        // Warm: the thread's slot and batch exist before the measured part.
        writer.record(&records[2]);
        if mode == "records" {
            measured_records(&writer, &records, n);
        } else {
            measured_spaced_records(&writer, &records, n);
        }
        println!("{n} records");
        return;
    }
    let (target_name, workload) = mode.split_once('-').expect("binary-<workload>");
    if target_name == "registry" {
        // The floor every layer starts from: the Registry with a layer that does nothing.
        let subscriber =
            tracing_subscriber::registry().with(tracing_subscriber::layer::Identity::new());
        dispatcher::with_default(&Dispatch::new(subscriber), || {
            run_workload(workload, 1000, false);
            measured_workload(workload, n);
        });
        println!("{} records", n * lines_per_iteration(workload));
        return;
    }
    let target = match target_name {
        "binary" => Target::new(
            tracing_trace2_binary::ENV_NAME,
            tracing_trace2_binary::RecordingFormat(writer.clone()),
            tracing_trace2_binary::FlushingSink(writer.clone()),
        ),
        "flight" => {
            let dir =
                std::env::temp_dir().join(format!("record_cost-flight-{}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("a writable temporary directory");
            let recorder = tracing_trace2_binary::flight::FlightRecorder::builder(&dir)
                .with_signal(false)
                .build()
                .expect("a writable temporary directory");
            Target::new(
                tracing_trace2_binary::flight::ENV_NAME,
                tracing_trace2_binary::flight::FlightFormat(recorder.clone()),
                tracing_trace2_binary::FlushingSink(recorder.writer().clone()),
            )
        }
        "nothing" | "deferred" => Target::new("NOTHING", Nothing, NullSink),
        "event" | "event_deferred" => Target::new(
            "GIT_TRACE2_EVENT",
            tracing_trace2_event::EventFormat::new().with_max_nesting(100),
            NullSink,
        ),
        // UTC (offset 0), as on the machines the figures come from.
        "perf" | "perf_deferred" => Target::new(
            "GIT_TRACE2_PERF",
            tracing_trace2_perf::PerfFormat::new(),
            NullSink,
        ),
        other => panic!("no target {other}"),
    };
    let mut builder = Trace2Layer::builder().with_target(target);
    if target_name.ends_with("deferred") {
        builder = builder.with_deferred(tracing_trace2_core::background::BackgroundOptions::new());
    }
    let layer = builder.build();
    // Waits for the deferred writer's worker to have written everything.
    let guard = layer.background_guard();
    let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer));
    dispatcher::with_default(&dispatch, || {
        run_workload(workload, 1000, false);
        measured_workload(workload, n);
    });
    guard
        .flush()
        .expect("the worker writes to a sink that cannot fail");
    println!("{} records", n * lines_per_iteration(workload));
}

/// The Trace2 lines one iteration of `workload` makes.
fn lines_per_iteration(workload: &str) -> u64 {
    match workload {
        "regions" => 6,
        "threads" => 12,
        "mixed" => 4,
        _ => 1,
    }
}
