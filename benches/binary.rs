//! Cost and size of the binary target (t2b) against its floors.
//!
//! Workloads, counted per Trace2 line they produce (as in `benches/peers.rs`):
//!
//! | workload | one iteration | Trace2 lines |
//! |---|---|---|
//! | `regions` | three nested spans with `category`, `label`, `msg`, entered and left | 6 |
//! | `data` | one `info!(category, key, value = i)` inside an entered span | 1 |
//! | `threads` | `regions` on two threads at once (wall time of the pair) | 12 |
//! | `mixed` | one span holding two data events | 4 |
//! | `printf` | one `info!("…{i}…")` message | 1 |
//!
//! Configurations: `registry+noop` (the Registry with a no-op layer); `floor-64k`, a
//! preformatted line as long as our Event line written through a 64 KiB buffer into a
//! file; `event/file`, our Event target into a file (one `write` per line);
//! `layer-only`, the core layer with a target that formats nothing (what the layer
//! costs before any target writes); and the core layer with only the binary target
//! (`binary/file`, `binary/null`). Then, without
//! `tracing` at all, records handed straight to the writer (`records/binary`) and to
//! the Event formatter plus a 64 KiB buffered write (`records/event-64k`).
//!
//! Run with `cargo bench --bench binary` (about two minutes on two cores). The table at
//! the end gives median ns per line over interleaved rounds, bytes per line (10 000
//! iterations), the ratio `binary / (registry+noop + floor-64k)` (median of per-round
//! ratios) and the size ratio Event / binary.

#[path = "measure/mod.rs"]
mod measure;
#[path = "support/mod.rs"]
mod support;

use measure::ROUNDS;
use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::time::{Duration, Instant};
use support::{
    append, criterion_filter_matches, data, empty, median, mixed, regions, sample_records,
};

use criterion::{SamplingMode, Throughput};
use tracing::dispatcher::{self, Dispatch};
use tracing::{info, info_span};
use tracing_subscriber::layer::{Identity, SubscriberExt};
use tracing_trace2_binary::{BinaryWriter, DestSettings, dest};
use tracing_trace2_core::{Format, MemorySink, Record, Sink, Timestamp, Trace2Layer};
use tracing_trace2_dst::{self as core_dst, OpenSettings, Opened};
use tracing_trace2_event::EventFormat;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Workload {
    Regions,
    Data,
    Threads,
    Mixed,
    Printf,
}

impl Workload {
    const ALL: [Workload; 5] = [
        Workload::Regions,
        Workload::Data,
        Workload::Threads,
        Workload::Mixed,
        Workload::Printf,
    ];

    fn name(self) -> &'static str {
        match self {
            Workload::Regions => "regions",
            Workload::Data => "data",
            Workload::Threads => "threads",
            Workload::Mixed => "mixed",
            Workload::Printf => "printf",
        }
    }

    fn lines(self) -> u64 {
        match self {
            Workload::Regions => 6,
            Workload::Data | Workload::Printf => 1,
            Workload::Threads => 12,
            Workload::Mixed => 4,
        }
    }

    fn threads(self) -> usize {
        if self == Workload::Threads { 2 } else { 1 }
    }

    fn run(self, iters: u64) {
        match self {
            Workload::Regions | Workload::Threads => (0..iters).for_each(|_| regions()),
            Workload::Data => {
                let span = info_span!(
                    "data",
                    trace2.category = "bench",
                    trace2.msg = "data events"
                );
                let _entered = span.enter();
                (0..iters).for_each(data);
            }
            Workload::Mixed => (0..iters).for_each(mixed),
            Workload::Printf => (0..iters).for_each(printf),
        }
    }
}

#[inline(never)]
fn printf(i: u64) {
    info!("refreshed {i} index entries in .git/index");
}

enum Runner {
    Traced(Dispatch),
    Floor(Vec<u8>),
    /// Records handed to the binary writer, or formatted by the Event formatter and
    /// written through a 64 KiB buffer.
    Records {
        binary: Option<BinaryWriter>,
    },
}

struct Bench {
    runner: Runner,
    layer: Option<Trace2Layer>,
    file: Option<PathBuf>,
}

impl Bench {
    fn sample(&self, workload: Workload, iters: u64) -> Duration {
        if let Some(layer) = &self.layer {
            layer.flush();
        }
        if let Some(file) = &self.file {
            empty(file);
        }
        support::on_threads(workload.threads(), |barrier| {
            self.on_this_thread(workload, iters, barrier)
        })
    }

    fn on_this_thread(
        &self,
        workload: Workload,
        iters: u64,
        barrier: Option<&Barrier>,
    ) -> Duration {
        let lines = iters * workload.lines() / workload.threads() as u64;
        match &self.runner {
            Runner::Traced(dispatch) => {
                let _default = dispatcher::set_default(dispatch);
                if let Some(barrier) = barrier {
                    barrier.wait();
                }
                let start = Instant::now();
                workload.run(iters);
                start.elapsed()
            }
            Runner::Floor(line) => {
                let file = append(self.file.as_deref().expect("floor file"));
                if let Some(barrier) = barrier {
                    barrier.wait();
                }
                let start = Instant::now();
                let mut out = BufWriter::with_capacity(64 * 1024, &file);
                for _ in 0..lines {
                    let _ = out.write_all(std::hint::black_box(line));
                }
                let _ = out.flush();
                start.elapsed()
            }
            Runner::Records { binary } => {
                let file = append(self.file.as_deref().expect("records file"));
                let recs = sample_records();
                if let Some(barrier) = barrier {
                    barrier.wait();
                }
                let start = Instant::now();
                match binary {
                    Some(writer) => {
                        for i in 0..lines {
                            let mut r = recs[(i % recs.len() as u64) as usize];
                            r.time = Timestamp {
                                wall_us: 1_700_000_000_000_000 + i as i64,
                                t_abs_us: i,
                            };
                            writer.record(std::hint::black_box(&r));
                        }
                        writer.flush_all();
                    }
                    None => {
                        let format = EventFormat::new().with_max_nesting(10);
                        let mut out = BufWriter::with_capacity(64 * 1024, &file);
                        let mut line = Vec::with_capacity(512);
                        for i in 0..lines {
                            let mut r = recs[(i % recs.len() as u64) as usize];
                            r.time = Timestamp {
                                wall_us: 1_700_000_000_000_000 + i as i64,
                                t_abs_us: i,
                            };
                            line.clear();
                            format.format(std::hint::black_box(&r), &mut line);
                            let _ = out.write_all(&line);
                        }
                        let _ = out.flush();
                    }
                }
                start.elapsed()
            }
        }
    }

    fn bytes_per_line(&self, workload: Workload) -> Option<f64> {
        const ITERS: u64 = 10_000;
        let file = self.file.as_deref()?;
        if file == Path::new("/dev/null") {
            return None;
        }
        self.sample(workload, ITERS);
        if let Some(layer) = &self.layer {
            layer.flush();
        }
        let len = std::fs::metadata(file).ok()?.len();
        Some(len as f64 / (ITERS * workload.lines()) as f64)
    }
}

/// The Event target into `path`, opened as the facade opens it.
fn event_sink(path: &Path) -> Box<dyn Sink> {
    let settings = OpenSettings {
        env_name: tracing_trace2::targets::EVENT_ENV,
        dst_debug: true,
        max_files: 0,
        sid_component: "bench".to_owned(),
    };
    match core_dst::open(path.to_str().expect("UTF-8 path"), &settings) {
        Opened::Sink(sink) | Opened::Sentinel(sink) => sink,
        Opened::Disabled => panic!("cannot open {}", path.display()),
    }
}

/// The binary writer into `path`, opened as a `TRACING_TRACE2_BINARY` value.
fn binary_writer(path: &Path) -> BinaryWriter {
    let settings = DestSettings {
        dst_debug: true,
        max_files: 0,
        sid: "bench".to_owned(),
    };
    let dest = dest::open(path.to_str().expect("UTF-8 path"), &settings).expect("open");
    BinaryWriter::builder()
        .with_exit_handler(false)
        .build(dest.sink)
}

fn event_line_len(workload: Workload) -> usize {
    let sink = MemorySink::new();
    let layer = Trace2Layer::builder()
        .with_target(tracing_trace2::targets::event(
            EventFormat::new().with_max_nesting(10),
            sink.clone(),
        ))
        .build();
    let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer));
    dispatcher::with_default(&dispatch, || workload.run(1));
    let text = sink.to_string_lossy();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains("\"event\":\"version\""))
        .filter(|l| workload != Workload::Data || l.contains("\"event\":\"data\""))
        .collect();
    let total: usize = lines.iter().map(|l| l.len() + 1).sum();
    total / lines.len().max(1)
}

fn configs(workload: Workload, dir: &Path) -> Vec<(String, Box<dyn FnOnce() -> Bench>)> {
    let traced = |layer: Option<Trace2Layer>, file: Option<PathBuf>| {
        let dispatch = match &layer {
            Some(layer) => Dispatch::new(tracing_subscriber::registry().with(layer.clone())),
            None => Dispatch::new(tracing_subscriber::registry().with(Identity::new())),
        };
        Bench {
            runner: Runner::Traced(dispatch),
            layer,
            file,
        }
    };
    let line_len = event_line_len(workload);
    let floor = dir.join("floor-64k");
    let event = dir.join("event");
    let binary_file = dir.join("binary.t2b");
    let mut list: Vec<(String, Box<dyn FnOnce() -> Bench>)> = vec![
        ("registry+noop".into(), Box::new(move || traced(None, None))),
        (
            "floor-64k/file".into(),
            Box::new(move || {
                let mut line = vec![b'x'; line_len.max(1)];
                *line.last_mut().expect("a byte") = b'\n';
                Bench {
                    runner: Runner::Floor(line),
                    layer: None,
                    file: Some(floor),
                }
            }),
        ),
        (
            "event/file".into(),
            Box::new(move || {
                empty(&event);
                let layer = event_layer(&event);
                traced(Some(layer), Some(event))
            }),
        ),
    ];
    list.push((
        "layer-only".into(),
        Box::new(move || {
            let layer = Trace2Layer::builder()
                .with_target(tracing_trace2_core::Target::new(
                    "NOTHING",
                    Nothing,
                    MemorySink::new(),
                ))
                .build();
            traced(Some(layer), None)
        }),
    ));
    for (name, path) in [
        ("binary/file", binary_file),
        ("binary/null", PathBuf::from("/dev/null")),
    ] {
        list.push((
            name.into(),
            Box::new(move || {
                empty(&path);
                let writer = binary_writer(&path);
                let layer = Trace2Layer::builder()
                    .with_target(tracing_trace2::targets::binary(&writer, false))
                    .build();
                traced(Some(layer), Some(path))
            }),
        ));
    }
    if workload == Workload::Mixed {
        let records_binary = dir.join("records.t2b");
        let records_event = dir.join("records-event");
        list.push((
            "records/binary".into(),
            Box::new(move || {
                empty(&records_binary);
                Bench {
                    runner: Runner::Records {
                        binary: Some(binary_writer(&records_binary)),
                    },
                    layer: None,
                    file: Some(records_binary),
                }
            }),
        ));
        list.push((
            "records/event-64k".into(),
            Box::new(move || Bench {
                runner: Runner::Records { binary: None },
                layer: None,
                file: Some(records_event),
            }),
        ));
    }
    list
}

/// A format that writes nothing: the layer's own cost.
struct Nothing;

impl Format for Nothing {
    fn format(&self, _record: &Record<'_>, _out: &mut Vec<u8>) {}
}

/// Our Event target (nesting 10, so that every region line is written) into `path`.
fn event_layer(path: &Path) -> Trace2Layer {
    Trace2Layer::builder()
        .with_target(tracing_trace2::targets::event(
            EventFormat::new().with_max_nesting(10),
            event_sink(path),
        ))
        .build()
}

#[derive(Default)]
struct Results {
    rounds: BTreeMap<(Workload, String), Vec<f64>>,
    bytes: BTreeMap<(Workload, String), f64>,
}

fn main() {
    let mut criterion = measure::criterion();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("binary");
    std::fs::create_dir_all(&dir).expect("bench directory");
    let bench_mode = std::env::args().any(|a| a == "--bench");
    let mut results = Results::default();
    for workload in Workload::ALL {
        let mut group = criterion.benchmark_group(workload.name());
        group
            .throughput(Throughput::Elements(workload.lines()))
            .sampling_mode(SamplingMode::Flat);
        let mut ran: Vec<(String, Bench, f64)> = Vec::new();
        for (name, make) in configs(workload, &dir) {
            if !criterion_filter_matches(&format!("{}/{name}", workload.name())) {
                continue;
            }
            let bench = make();
            if let Some(per_iter) =
                measure::calibrate(&mut group, &name, |iters| bench.sample(workload, iters))
            {
                ran.push((name, bench, per_iter));
            }
        }
        group.finish();
        if !bench_mode {
            continue;
        }
        measure::interleave(
            &ran,
            workload.lines(),
            |bench, iters| bench.sample(workload, iters),
            |name, per_line| {
                results
                    .rounds
                    .entry((workload, name.to_owned()))
                    .or_default()
                    .push(per_line)
            },
        );
        for (name, bench, _) in &ran {
            if let Some(bytes) = bench.bytes_per_line(workload) {
                results.bytes.insert((workload, name.clone()), bytes);
            }
        }
    }
    criterion.final_summary();
    print_table(&results);
}

fn print_table(results: &Results) {
    if results.rounds.is_empty() {
        return;
    }
    println!("\n## ns per Trace2 line (median of {ROUNDS} interleaved rounds), bytes per line\n");
    println!("| workload | configuration | ns | B |");
    println!("|---|---|---:|---:|");
    for ((w, name), rounds) in &results.rounds {
        let ns = median(rounds).map_or("-".into(), |v| format!("{v:.0}"));
        let b = results
            .bytes
            .get(&(*w, name.clone()))
            .map_or("-".into(), |v| format!("{v:.1}"));
        println!("| {} | {name} | {ns} | {b} |", w.name());
    }
    println!(
        "\n## binary / (registry+noop + floor-64k), median of per-round ratios; Event B / binary B\n"
    );
    println!("| workload | binary/file | binary/null | layer-only | size ratio |");
    println!("|---|---:|---:|---:|---:|");
    for w in Workload::ALL {
        let ratio = |name: &str| -> String {
            let get = |n: &str| results.rounds.get(&(w, n.to_owned()));
            let (Some(ours), Some(noop), Some(floor)) =
                (get(name), get("registry+noop"), get("floor-64k/file"))
            else {
                return "-".into();
            };
            let per_round: Vec<f64> = ours
                .iter()
                .zip(noop)
                .zip(floor)
                .map(|((o, n), f)| o / (n + f))
                .collect();
            median(&per_round).map_or("-".into(), |r| format!("{r:.2}"))
        };
        let size = match (
            results.bytes.get(&(w, "event/file".to_owned())),
            results.bytes.get(&(w, "binary/file".to_owned())),
        ) {
            (Some(e), Some(b)) => format!("{:.1}", e / b),
            _ => "-".into(),
        };
        println!(
            "| {} | {} | {} | {} | {size} |",
            w.name(),
            ratio("binary/file"),
            ratio("binary/null"),
            ratio("layer-only")
        );
    }
}
