//! Measures the flight recorder's bounds (issue 24), on Linux:
//!
//! 1. memory: a thread records about `rate` events per second for `seconds` seconds
//!    into a recorder with a `cap`-byte ring; the resident set is sampled every 100 ms
//!    and its peak (`VmHWM`) compared with the resident set before recording;
//! 2. snapshot: a recorder with a 10 MiB cap is filled to its cap and a snapshot written
//!    to a temporary directory, timed, while another thread keeps recording (its
//!    longest single `record` call during the snapshot is reported).
//!
//! ```sh
//! cargo run --release -p tracing-trace2-binary --example flight_bounds -- 30 1000000 4194304
//! ```

use std::time::{Duration, Instant};

use tracing_trace2_binary::flight::{FlightRecorder, Trigger};
use tracing_trace2_binary::{BinaryWriter, TextFormat, TextOptions, decode_to_text};
use tracing_trace2_record::{Callsite, Record, RegionInfo, Timestamp, Trace2Event};

const SID: &str = "20261125T180000.000000Z-H0123abcd-P00001234";

fn now() -> Timestamp {
    let start = tracing_trace2_dst::clock::start();
    let t = start.t_abs_us();
    Timestamp {
        wall_us: start.wall_us() + t as i64,
        t_abs_us: t,
    }
}

/// Records one of four events (a region's enter and leave, a datum, a message).
fn record(recorder: &FlightRecorder, i: u64, text: &mut String) {
    use std::fmt::Write;
    text.clear();
    let _ = write!(text, "{i}");
    let region = RegionInfo {
        repo: None,
        category: Some("work"),
        label: Some("item"),
        msg: None,
    };
    let event = match i % 4 {
        0 => Trace2Event::RegionEnter { region, nesting: 1 },
        1 => Trace2Event::Data {
            repo: None,
            category: "work",
            key: "n",
            value: text,
            nesting: 2,
            t_rel_us: 3,
        },
        2 => Trace2Event::Printf { msg: Some(text) },
        _ => Trace2Event::RegionLeave {
            region,
            nesting: 1,
            t_rel_us: 7,
        },
    };
    recorder.record(&Record {
        event,
        time: now(),
        sid: SID,
        depth: 0,
        thread: "main",
        callsite: Callsite {
            file: Some("src/work.rs"),
            line: 42,
        },
        open_regions: u32::from(i % 4 == 1 || i % 4 == 2),
    });
}

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn memory(seconds: u64, rate: u64, cap: usize) {
    let dir = std::env::temp_dir().join(format!("flight-bounds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let recorder = FlightRecorder::builder(&dir)
        .with_max_bytes(cap)
        .with_signal(false)
        .build()
        .expect("recorder");
    let before = status_kib("VmRSS:");
    let started = Instant::now();
    let mut text = String::new();
    let mut i = 0u64;
    let mut peak_rss = before;
    let mut next_sample = Duration::ZERO;
    while started.elapsed() < Duration::from_secs(seconds) {
        // Bursts of 1000, paced to the rate.
        for _ in 0..1000 {
            record(&recorder, i, &mut text);
            i += 1;
        }
        let due = Duration::from_secs_f64(i as f64 / rate as f64);
        let elapsed = started.elapsed();
        if due > elapsed {
            std::thread::sleep(due - elapsed);
        }
        if elapsed >= next_sample {
            peak_rss = peak_rss.max(status_kib("VmRSS:"));
            next_sample = elapsed + Duration::from_millis(100);
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let stats = recorder.stats();
    println!("## memory: {seconds} s at {rate} events/s, cap {cap} bytes");
    println!("events recorded: {i} ({:.0}/s)", i as f64 / elapsed);
    println!("RSS before recording: {before} KiB");
    println!(
        "RSS peak sampled: {peak_rss} KiB; VmHWM: {} KiB",
        status_kib("VmHWM:")
    );
    println!(
        "growth over the start: {} KiB (cap {} KiB + one 64 KiB batch)",
        status_kib("VmHWM:").saturating_sub(before),
        cap / 1024
    );
    println!(
        "ring now {} bytes, peak {} bytes, batches evicted {}",
        stats.ring_bytes, stats.peak_ring_bytes, stats.evicted_batches
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn snapshot() {
    let dir = std::env::temp_dir().join(format!("flight-snap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let cap = 10 << 20;
    let recorder = FlightRecorder::builder(&dir)
        .with_max_bytes(cap)
        .with_min_age(Duration::from_secs(3600))
        .with_signal(false)
        .with_writer(BinaryWriter::builder())
        .build()
        .expect("recorder");
    let mut text = String::new();
    let mut i = 0u64;
    while recorder.stats().evicted_batches == 0 {
        for _ in 0..10_000 {
            record(&recorder, i, &mut text);
            i += 1;
        }
    }
    // The same recording thread for as long, without a snapshot: what the machine's
    // scheduling alone costs a `record` call at worst.
    let baseline =
        longest_record_while(&recorder, || std::thread::sleep(Duration::from_millis(100)));
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (elapsed, path, longest) = std::thread::scope(|scope| {
        let other = scope.spawn(|| {
            let mut text = String::new();
            let mut longest = Duration::ZERO;
            let mut j = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let t = Instant::now();
                record(&recorder, j, &mut text);
                longest = longest.max(t.elapsed());
                j += 1;
            }
            longest
        });
        std::thread::sleep(Duration::from_millis(50));
        let started = Instant::now();
        let path = recorder.snapshot(Trigger::Request).expect("snapshot");
        let elapsed = started.elapsed();
        std::thread::sleep(Duration::from_millis(10));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (elapsed, path, other.join().expect("recording thread"))
    });
    let path = path.expect("a snapshot file");
    // Where the time goes: the snapshot's bytes alone, then writing them.
    let started = Instant::now();
    let assembled = recorder.snapshot_bytes(Trigger::Request);
    let assemble = started.elapsed();
    let started = Instant::now();
    std::fs::write(dir.join("again.t2b"), &assembled).expect("write");
    let write = started.elapsed();
    println!(
        "of which (measured again): assembling {:.1} ms, writing the file {:.1} ms",
        assemble.as_secs_f64() * 1e3,
        write.as_secs_f64() * 1e3
    );
    let bytes = std::fs::read(&path).expect("read the snapshot");
    let mut perf = Vec::new();
    let report =
        decode_to_text(&bytes[..], &mut perf, &TextOptions::new(TextFormat::Perf)).expect("decode");
    println!("## snapshot of a full {} MiB window", cap >> 20);
    println!(
        "written in {:.1} ms: {} bytes, {} Perf lines, complete: {}",
        elapsed.as_secs_f64() * 1e3,
        bytes.len(),
        perf.iter().filter(|&&b| b == b'\n').count(),
        report.is_complete()
    );
    println!(
        "longest record() call of a thread recording meanwhile: {:.3} ms (without a snapshot: {:.3} ms)",
        longest.as_secs_f64() * 1e3,
        baseline.as_secs_f64() * 1e3
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The longest `record` call of a thread that records while `during` runs.
fn longest_record_while(recorder: &FlightRecorder, during: impl FnOnce()) -> Duration {
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let other = scope.spawn(|| {
            let mut text = String::new();
            let mut longest = Duration::ZERO;
            let mut j = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let t = Instant::now();
                record(recorder, j, &mut text);
                longest = longest.max(t.elapsed());
                j += 1;
            }
            longest
        });
        during();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        other.join().expect("recording thread")
    })
}

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let seconds = args.first().copied().unwrap_or(30);
    let rate = args.get(1).copied().unwrap_or(1_000_000);
    let cap = args.get(2).copied().unwrap_or(4 << 20) as usize;
    memory(seconds, rate, cap);
    snapshot();
}
