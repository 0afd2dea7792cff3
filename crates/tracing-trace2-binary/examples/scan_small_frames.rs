//! Decode-side throughput of a file of small frames, as many short processes appending
//! to one file leave it (each record of a short process goes out in a frame of its own):
//! the frame scanner alone, and the whole decoder to Event text, in MB/s of input.
//!
//! ```text
//! cargo run --release -p tracing-trace2-binary --example scan_small_frames [STREAMS] [ROUNDS]
//! perf stat -e instructions:u target/release/examples/scan_small_frames 2000 20
//! ```
//!
//! The frames are under the 1 KiB below which a writing process keeps its table CRC
//! until the `crc32c` crate has run; a decoder that reads nothing else would keep it too.
//! Each round scans the input ten times, then decodes it once.

use std::time::Instant;

use tracing_trace2_binary::decode::FrameScanner;
use tracing_trace2_binary::dest::MemorySink;
use tracing_trace2_binary::{BinaryWriter, TextFormat, TextOptions, decode_to_text};
use tracing_trace2_record::{Callsite, Record, RegionInfo, Timestamp, Trace2Event};

const ANCHOR: i64 = 1_700_000_000_000_000;

/// One short process's stream: `version`, `start`, `cmd_name`, a region around a datum,
/// `exit`, `atexit`.
fn short_process(n: usize) -> Vec<u8> {
    let sid = format!("20261121T232137.816920Z-H0a7c9cdf-P{n:08x}");
    let argv = ["tool", "status", "--porcelain"];
    let region = RegionInfo {
        category: Some("index"),
        label: Some("do_read_index"),
        msg: Some(".git/index"),
        repo: None,
    };
    let events = [
        Trace2Event::Version { exe: "2.47.3" },
        Trace2Event::Start { argv: &argv },
        Trace2Event::CmdName {
            name: "status",
            hierarchy: "status",
        },
        Trace2Event::RegionEnter { region, nesting: 1 },
        Trace2Event::Data {
            repo: None,
            category: "index",
            key: "entries",
            value: "1500",
            nesting: 2,
            t_rel_us: 40,
        },
        Trace2Event::RegionLeave {
            region,
            nesting: 1,
            t_rel_us: 95,
        },
        Trace2Event::Exit { code: 0 },
        Trace2Event::Atexit { code: 0 },
    ];
    let sink = MemorySink::new();
    let writer = BinaryWriter::builder()
        .with_anchor_wall_us(ANCHOR + n as i64 * 1000)
        .with_utc_offset(0)
        .with_exit_handler(false)
        .with_lazy_flusher(true)
        .build(sink.clone());
    for (i, event) in events.into_iter().enumerate() {
        let t_abs_us = 100 + 50 * i as u64;
        writer.record(&Record {
            event,
            time: Timestamp {
                wall_us: ANCHOR + n as i64 * 1000 + t_abs_us as i64,
                t_abs_us,
            },
            sid: &sid,
            depth: 0,
            thread: "main",
            callsite: Callsite {
                file: Some("src/main.rs"),
                line: 10 + i as u32,
            },
            open_regions: u32::from(matches!(event, Trace2Event::Data { .. })),
        });
    }
    writer.finish();
    sink.contents()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let streams: usize = args.next().map_or(2000, |a| a.parse().expect("STREAMS"));
    let rounds: usize = args.next().map_or(10, |a| a.parse().expect("ROUNDS"));
    let input: Vec<u8> = (0..streams).flat_map(short_process).collect();
    let mut frames = 0u64;
    let mut largest = 0usize;
    let mut scanner = FrameScanner::new(&input[..]);
    while let Some(frame) = scanner.next_frame().expect("memory") {
        frames += 1;
        largest = largest.max(frame.payload.len() + 12);
    }
    let size = input.len() as f64 / 1e6;
    println!("{streams} streams, {frames} frames (largest {largest} bytes), {size:.2} MB");
    let (mut scan_best, mut decode_best) = (f64::MAX, f64::MAX);
    let mut out = Vec::with_capacity(input.len() * 4);
    for round in 0..rounds {
        let t = Instant::now();
        for _ in 0..10 {
            let mut scanner = FrameScanner::new(&input[..]);
            while scanner.next_frame().expect("memory").is_some() {}
        }
        let scan = t.elapsed().as_secs_f64() / 10.0;
        out.clear();
        let t = Instant::now();
        let report = decode_to_text(&input[..], &mut out, &TextOptions::new(TextFormat::Event))
            .expect("memory");
        let whole = t.elapsed().as_secs_f64();
        assert!(report.is_complete(), "{report}");
        println!(
            "round {round}: scan {:.0} MB/s, decode to Event text {:.0} MB/s",
            size / scan,
            size / whole
        );
        scan_best = scan_best.min(scan);
        decode_best = decode_best.min(whole);
    }
    println!(
        "best: scan {:.0} MB/s, decode to Event text {:.0} MB/s",
        size / scan_best,
        size / decode_best
    );
}
