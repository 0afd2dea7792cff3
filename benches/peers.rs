//! Per-line cost of tracing-trace2 against what a Rust program would otherwise install.
//!
//! Four workloads, each counted per Trace2 line it produces:
//!
//! | workload | one iteration | Trace2 lines |
//! |---|---|---|
//! | `regions` | three nested spans with `trace2.category`, `trace2.label`, `trace2.msg`, entered and left | 6 |
//! | `data` | one `info!(category, key, value)` inside an entered span | 1 |
//! | `threads` | `regions` on two threads at once (wall time of the pair) | 12 |
//! | `mixed` | one span holding two data events | 4 |
//!
//! Each workload runs through: no subscriber; the registry with a no-op layer; the
//! registry with our layer switched off (`None`, what the facade installs when no target
//! is enabled); tracing-subscriber's `fmt` (full format, span close events) and
//! `fmt().json()` (span new and close events) into an append-mode file and `/dev/null`;
//! tracing-chrome (its writer thread does the I/O); tracing-perfetto-file (Perfetto's
//! protobuf from per-thread buffers into a file, fields and call sites recorded: the peer
//! of our binary target); two floors that write a preformatted
//! line as long as our Event line (one `write` per line, and through a 64 KiB buffer),
//! and the first floor as one program with the Registry (`registry+write`, a layer that
//! writes that line wherever ours writes one); `fmt` with a line at each span entry as
//! well (`fmt-lines`, as many lines as ours);
//! and our Event, Perf and Normal targets into an append-mode file and `/dev/null`,
//! opened with `dst::open` as the facade opens them: written directly, through a
//! `BackgroundSink` (`-bg`), or through the deferred writer (`-df`, formatting on the
//! worker), the last two also in bursts that fit the queue (`-burst`); and our binary
//! target (t2b) into an append-mode file (`binary/file`), whose goal is measured
//! against `registry+noop` plus `floor-64k` (what any layer costs, plus writing the
//! lines in 64 KiB blocks); and the flight recorder (`flight/ring`: the binary target's
//! batches kept in a 4 MiB ring), measured against `binary/file`.
//!
//! Run with `cargo bench --bench peers` (three to four minutes on two cores); a filter
//! argument runs a subset (`cargo bench --bench peers -- regions/`, or alternatives:
//! `-- 'floor|event|perf'`). After criterion's own report the bench prints a Markdown
//! table: median ns per Trace2 line, bytes per Trace2 line, and the ratios of our
//! targets to the floors and to each peer. Files go to `target/tmp/peers` and are
//! emptied between samples.

#[path = "measure/mod.rs"]
mod measure;
#[path = "support/mod.rs"]
pub(crate) mod support;

use measure::ROUNDS;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};
use support::{append, criterion_filter_matches, data, empty, median, mixed, regions};

use criterion::{SamplingMode, Throughput};
use tracing::dispatcher::{self, Dispatch};
use tracing::info_span;
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::layer::{Identity, SubscriberExt};
use tracing_trace2_core::background::{BackgroundOptions, BackgroundSink};
use tracing_trace2_core::{MemorySink, RegionMode, Sink, Target, Trace2Layer, clock};
use tracing_trace2_dst::{self as dst, OpenSettings, Opened};
use tracing_trace2_event::EventFormat;
use tracing_trace2_normal::NormalFormat;
use tracing_trace2_perf::PerfFormat;

/// Lines per burst through the background writer: half its default queue.
const BURST_LINES: u64 = 2048;
/// A sustained background sample queues at least this many times the queue's
/// capacity, so that it measures the writer's steady pace rather than the queue
/// filling up.
const SUSTAINED_QUEUES: u64 = 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Workload {
    Regions,
    Data,
    Threads,
    Mixed,
}

impl Workload {
    pub(crate) const ALL: [Workload; 4] = [
        Workload::Regions,
        Workload::Data,
        Workload::Threads,
        Workload::Mixed,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Workload::Regions => "regions",
            Workload::Data => "data",
            Workload::Threads => "threads",
            Workload::Mixed => "mixed",
        }
    }

    /// Trace2 lines one iteration produces (both threads for `threads`).
    pub(crate) fn lines(self) -> u64 {
        match self {
            Workload::Regions => 6,
            Workload::Data => 1,
            Workload::Threads => 12,
            Workload::Mixed => 4,
        }
    }

    /// Threads running the workload at once.
    pub(crate) fn threads(self) -> usize {
        if self == Workload::Threads { 2 } else { 1 }
    }

    /// Lines one thread writes per iteration.
    fn lines_per_thread(self) -> u64 {
        self.lines() / self.threads() as u64
    }

    /// Runs `iters` iterations on the calling thread, which already has its subscriber.
    pub(crate) fn run(self, iters: u64) {
        match self {
            Workload::Regions | Workload::Threads => {
                for _ in 0..iters {
                    regions();
                }
            }
            Workload::Data => {
                // The span is the context the data lives in; its two lines are outside
                // the loop and do not count.
                let span = info_span!(
                    "data",
                    trace2.category = "bench",
                    trace2.msg = "data events"
                );
                let _entered = span.enter();
                for i in 0..iters {
                    data(i);
                }
            }
            Workload::Mixed => {
                for i in 0..iters {
                    mixed(i);
                }
            }
        }
    }
}

/// How one benchmark spends an iteration.
pub(crate) enum Runner {
    /// The workload, under this dispatcher (`None`: no subscriber at all).
    Traced(Option<Dispatch>),
    /// The workload through a background writer, in bursts that fit its queue: each
    /// burst is timed, then the layer is flushed (untimed), so the time is what the
    /// traced thread spends while the queue has room.
    Burst {
        dispatch: Dispatch,
        layer: Trace2Layer,
    },
    /// The floor: preformatted lines written straight to a file.
    Floor { buffered: bool, line: Vec<u8> },
}

/// One configuration of one workload, ready to run.
pub(crate) struct Bench {
    pub(crate) runner: Runner,
    /// Our layer, flushed before a sample starts and before bytes are counted (the
    /// background writer may still hold lines).
    pub(crate) layer: Option<Trace2Layer>,
    /// The file the configuration writes to, emptied before every sample.
    pub(crate) file: Option<PathBuf>,
    /// tracing-chrome's writer thread and the two files it alternates between.
    pub(crate) chrome: Option<Mutex<Chrome>>,
    /// tracing-perfetto-file's guard: its per-thread buffers are written out before a
    /// sample starts (untimed) and before bytes are counted.
    perfetto: Option<tracing_perfetto_file::FlushGuard>,
    /// Our Normal target, which writes none of the workloads' lines.
    normal: bool,
    /// The fewest iterations a sample runs (a sustained background writer: at least
    /// [`SUSTAINED_QUEUES`] queues full); a shorter sample is stretched to this and its
    /// time scaled back to the iterations asked for.
    min_iters: u64,
}

impl Bench {
    fn traced(dispatch: Option<Dispatch>, file: Option<&Path>) -> Bench {
        Bench {
            runner: Runner::Traced(dispatch),
            layer: None,
            file: file.map(Path::to_path_buf),
            chrome: None,
            perfetto: None,
            normal: false,
            min_iters: 0,
        }
    }

    /// Runs `iters` iterations on the workload's threads and returns the wall time of
    /// the slowest thread, measured from a common start.
    fn sample(&self, workload: Workload, iters: u64) -> Duration {
        if let Some(layer) = &self.layer {
            layer.flush();
        }
        self.flush_perfetto();
        if let Some(file) = &self.file {
            empty(file);
        }
        let ran = iters.max(self.min_iters);
        let took = self.timed(workload, ran).mul_f64(iters as f64 / ran as f64);
        // tracing-chrome's writer thread works through its queue after the traced
        // thread is done: let it finish (untimed), or it would run during the next
        // measurement and slow down whatever is measured then.
        self.drain_chrome();
        took
    }

    /// Writes out what tracing-perfetto-file's threads still buffer.
    pub(crate) fn flush_perfetto(&self) {
        if let Some(guard) = &self.perfetto {
            let _ = guard.flush();
        }
    }

    /// Waits until tracing-chrome's writer has written everything queued so far into
    /// its current file, then moves it on to the other (emptied) file. Returns the
    /// finished file.
    pub(crate) fn drain_chrome(&self) -> Option<PathBuf> {
        let chrome = self.chrome.as_ref()?;
        let mut chrome = chrome.lock().expect("chrome guard");
        let next = chrome.files[1 - chrome.current].clone();
        let fresh = File::create(&next).ok()?;
        let (tx, rx) = std::sync::mpsc::channel();
        // The new writer reports its first write, which comes once everything queued
        // before it is done.
        chrome.guard.start_new(Some(Box::new(Reporting {
            file: fresh,
            tx: Some(tx),
        })));
        chrome.guard.flush();
        let _ = rx.recv_timeout(Duration::from_secs(120));
        let finished = chrome.files[chrome.current].clone();
        chrome.current = 1 - chrome.current;
        Some(finished)
    }

    fn timed(&self, workload: Workload, iters: u64) -> Duration {
        support::on_threads(workload.threads(), |barrier| {
            self.on_this_thread(workload, iters, barrier)
        })
    }

    pub(crate) fn on_this_thread(
        &self,
        workload: Workload,
        iters: u64,
        barrier: Option<&Barrier>,
    ) -> Duration {
        match &self.runner {
            Runner::Traced(dispatch) => {
                let _default = dispatch.as_ref().map(dispatcher::set_default);
                if let Some(barrier) = barrier {
                    barrier.wait();
                }
                let start = Instant::now();
                workload.run(iters);
                start.elapsed()
            }
            Runner::Burst { dispatch, layer } => {
                let _default = dispatcher::set_default(dispatch);
                if let Some(barrier) = barrier {
                    barrier.wait();
                }
                let per_burst = (BURST_LINES / workload.lines()).max(1);
                let mut took = Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    let n = left.min(per_burst);
                    let start = Instant::now();
                    workload.run(n);
                    took += start.elapsed();
                    layer.flush();
                    left -= n;
                }
                took
            }
            Runner::Floor { buffered, line } => {
                let path = self.file.as_deref().expect("floors write to a file");
                let file = append(path);
                let lines = iters * workload.lines_per_thread();
                if let Some(barrier) = barrier {
                    barrier.wait();
                }
                let start = Instant::now();
                if *buffered {
                    let mut out = BufWriter::with_capacity(64 * 1024, &file);
                    for _ in 0..lines {
                        let _ = out.write_all(std::hint::black_box(line));
                    }
                    let _ = out.flush();
                } else {
                    for _ in 0..lines {
                        // One `write` per line, as git does; a short write is not retried.
                        let _ = (&file).write(std::hint::black_box(line));
                    }
                }
                start.elapsed()
            }
        }
    }

    /// Bytes written per Trace2 line, measured on a fresh file.
    fn bytes_per_line(&self, workload: Workload) -> Option<f64> {
        const ITERS: u64 = 1000;
        // What a sample of ITERS iterations really runs.
        let iters = ITERS.max(self.min_iters);
        let text = if self.chrome.is_some() {
            // The file the writer is on now holds exactly this run's events once drained.
            self.drain_chrome();
            self.timed(workload, ITERS);
            std::fs::read(self.drain_chrome()?).ok()?
        } else {
            let file = self.file.as_deref()?;
            if file == Path::new("/dev/null") {
                return None;
            }
            self.sample(workload, ITERS);
            if let Some(layer) = &self.layer {
                layer.flush();
            }
            self.flush_perfetto();
            std::fs::read(file).ok()?
        };
        let binary = self.file.as_deref().and_then(Path::extension) == Some("t2b".as_ref());
        if self.layer.is_some() && !binary {
            // Every line must be there, the background writer's included: the workload's
            // lines, plus `version` and the `data` workload's enclosing region pair.
            let lines = text.iter().filter(|&&b| b == b'\n').count() as u64;
            let written_per_iter = lines as f64 / iters as f64;
            if written_per_iter < (workload.lines() as f64) * self.line_share() {
                println!("LOST LINES: {lines} lines for {iters} iterations");
            }
        }
        Some(text.len() as f64 / (iters * workload.lines()) as f64)
    }

    /// The share of the workload's lines this configuration writes (Normal writes none
    /// of the region and data lines).
    fn line_share(&self) -> f64 {
        if self.normal { 0.0 } else { 1.0 }
    }
}

/// tracing-chrome's guard and files: the writer goes on into the other file after each
/// sample, so that a finished file holds one sample's events.
pub(crate) struct Chrome {
    guard: tracing_chrome::FlushGuard,
    files: [PathBuf; 2],
    current: usize,
}

/// A writer that reports its first write.
struct Reporting {
    file: File,
    tx: Option<std::sync::mpsc::Sender<()>>,
}

impl Write for Reporting {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(());
        }
        self.file.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// A sink opened exactly as the facade opens a destination value.
fn open_sink(path: &Path) -> Box<dyn Sink> {
    let settings = OpenSettings {
        env_name: tracing_trace2::targets::EVENT_ENV,
        dst_debug: true,
        max_files: 0,
        sid_component: "bench".to_owned(),
    };
    let value = path.to_str().expect("UTF-8 path");
    match dst::open(value, &settings) {
        Opened::Sink(sink) | Opened::Sentinel(sink) => sink,
        Opened::Disabled => panic!("cannot open {value}"),
    }
}

/// Our three formats, as the facade configures them; the Event nesting limit is raised
/// (`GIT_TRACE2_EVENT_NESTING`) so that the third region level is written too.
#[derive(Clone, Copy)]
enum Ours {
    Event,
    Perf,
    Normal,
}

impl Ours {
    const ALL: [Ours; 3] = [Ours::Event, Ours::Perf, Ours::Normal];

    fn name(self) -> &'static str {
        match self {
            Ours::Event => "event",
            Ours::Perf => "perf",
            Ours::Normal => "normal",
        }
    }

    fn target(self, sink: impl Sink) -> Target {
        let offset = clock::local_offset_secs();
        match self {
            Ours::Event => {
                tracing_trace2::targets::event(EventFormat::new().with_max_nesting(10), sink)
            }
            Ours::Perf => {
                tracing_trace2::targets::perf(PerfFormat::new().with_utc_offset(offset), sink)
            }
            Ours::Normal => {
                tracing_trace2::targets::normal(NormalFormat::new().with_utc_offset(offset), sink)
            }
        }
    }

    fn env_name(self) -> &'static str {
        match self {
            Ours::Event => tracing_trace2::targets::EVENT_ENV,
            Ours::Perf => tracing_trace2::targets::PERF_ENV,
            Ours::Normal => tracing_trace2::targets::NORMAL_ENV,
        }
    }

    fn layer(self, sink: impl Sink) -> Trace2Layer {
        Trace2Layer::builder()
            .with_target(self.target(sink))
            .build()
    }

    fn dispatch(self, sink: impl Sink) -> Dispatch {
        Dispatch::new(tracing_subscriber::registry().with(self.layer(sink)))
    }
}

/// How our target reaches its destination.
#[derive(Clone, Copy)]
enum Mode {
    /// One `write` per line on the traced thread.
    Direct,
    /// Formatted on the traced thread, written by a `BackgroundSink`'s worker, measured
    /// sustained: once its queue is full the traced thread waits for the writer thread.
    Background,
    /// The same, in bursts that fit its queue.
    Burst,
    /// The deferred writer (what `Trace2::with_background_writer` builds): the traced
    /// thread encodes, the worker formats and writes; sustained.
    Deferred,
    /// The deferred writer in bursts that fit its queue.
    DeferredBurst,
}

impl Mode {
    const ALL: [Mode; 5] = [
        Mode::Direct,
        Mode::Background,
        Mode::Burst,
        Mode::Deferred,
        Mode::DeferredBurst,
    ];

    fn suffix(self) -> &'static str {
        match self {
            Mode::Direct => "",
            Mode::Background => "-bg",
            Mode::Burst => "-bg-burst",
            Mode::Deferred => "-df",
            Mode::DeferredBurst => "-df-burst",
        }
    }
}

/// Average length of the Event lines of `workload`, captured in memory: the length of
/// the floors' preformatted line.
fn event_line_len(workload: Workload) -> usize {
    let sink = MemorySink::new();
    let dispatch = Ours::Event.dispatch(sink.clone());
    dispatcher::with_default(&dispatch, || workload.run(1));
    let text = sink.to_string_lossy();
    // Skip `version` and, for `data`, the enclosing span's two region lines.
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains("\"event\":\"version\""))
        .filter(|l| workload != Workload::Data || l.contains("\"event\":\"data\""))
        .collect();
    let total: usize = lines.iter().map(|l| l.len() + 1).sum();
    total / lines.len().max(1)
}

/// Per-line results of the interleaved pass, keyed by (workload, configuration).
#[derive(Default)]
struct Results {
    /// ns per Trace2 line, one value per round.
    rounds: BTreeMap<(Workload, String), Vec<f64>>,
    /// Bytes written per Trace2 line.
    bytes: BTreeMap<(Workload, String), f64>,
}

impl Results {
    fn median_ns(&self, workload: Workload, name: &str) -> Option<f64> {
        median(self.rounds.get(&(workload, name.to_owned()))?)
    }

    /// The median over rounds of `name / peer` within each round.
    fn ratio(&self, workload: Workload, name: &str, peer: &str) -> Option<f64> {
        let ours = self.rounds.get(&(workload, name.to_owned()))?;
        let theirs = self.rounds.get(&(workload, peer.to_owned()))?;
        let ratios: Vec<f64> = ours.iter().zip(theirs).map(|(a, b)| a / b).collect();
        median(&ratios)
    }

    /// The median over rounds of `name / (floor + base)` within each round: what a line
    /// costs against the `write` alone plus what `tracing` and the Registry cost anyway
    /// (the goal of issue 16's direct writer).
    fn ratio_to_sum(&self, workload: Workload, name: &str, floor: &str, base: &str) -> Option<f64> {
        let ours = self.rounds.get(&(workload, name.to_owned()))?;
        let floor = self.rounds.get(&(workload, floor.to_owned()))?;
        let base = self.rounds.get(&(workload, base.to_owned()))?;
        let ratios: Vec<f64> = ours
            .iter()
            .zip(floor.iter().zip(base))
            .map(|(a, (f, b))| a / (f + b))
            .collect();
        median(&ratios)
    }
}

/// The configurations, in the order they run. `none` comes first: once a dispatcher
/// exists, tracing's callsites stop taking the "nobody listens" shortcut.
pub(crate) fn configs(workload: Workload, dir: &Path) -> Vec<(String, Box<dyn FnOnce() -> Bench>)> {
    let null = PathBuf::from("/dev/null");
    let mut list: Vec<(String, Box<dyn FnOnce() -> Bench>)> = vec![
        ("none".into(), Box::new(|| Bench::traced(None, None))),
        (
            "registry+noop".into(),
            Box::new(|| {
                let subscriber = tracing_subscriber::registry().with(Identity::new());
                Bench::traced(Some(Dispatch::new(subscriber)), None)
            }),
        ),
        (
            "ours-off".into(),
            Box::new(|| {
                let subscriber = tracing_subscriber::registry().with(None::<Trace2Layer>);
                Bench::traced(Some(Dispatch::new(subscriber)), None)
            }),
        ),
    ];
    let line_len = event_line_len(workload);
    let joint = dir.join("registry+write");
    list.push((
        "registry+write/file".into(),
        Box::new(move || {
            empty(&joint);
            let layer = LineWriter {
                file: append(&joint),
                line: line_of(line_len),
            };
            let subscriber = tracing_subscriber::registry().with(layer);
            Bench::traced(Some(Dispatch::new(subscriber)), Some(&joint))
        }),
    ));
    for buffered in [false, true] {
        let name = if buffered { "floor-64k" } else { "floor-write" };
        let path = dir.join(name);
        list.push((
            format!("{name}/file"),
            Box::new(move || Bench {
                runner: Runner::Floor {
                    buffered,
                    line: line_of(line_len),
                },
                layer: None,
                file: Some(path),
                chrome: None,
                perfetto: None,
                normal: false,
                min_iters: 0,
            }),
        ));
    }
    for (dst, path) in [("file", dir.join("fmt")), ("null", null.clone())] {
        list.push((
            format!("fmt/{dst}"),
            Box::new(move || {
                let layer = tracing_subscriber::fmt::layer()
                    .with_ansi(false)
                    .with_span_events(FmtSpan::CLOSE)
                    .with_writer(Arc::new(append(&path)));
                let subscriber = tracing_subscriber::registry().with(layer);
                Bench::traced(Some(Dispatch::new(subscriber)), Some(&path))
            }),
        ));
    }
    // fmt with a line at each entry as well: as many lines (and `write`s) as ours on
    // every workload; `fmt/…` writes one line per span, half of ours on `regions`.
    let fmt_lines = dir.join("fmt-lines");
    list.push((
        "fmt-lines/file".into(),
        Box::new(move || {
            let layer = tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_span_events(FmtSpan::ENTER | FmtSpan::CLOSE)
                .with_writer(Arc::new(append(&fmt_lines)));
            let subscriber = tracing_subscriber::registry().with(layer);
            Bench::traced(Some(Dispatch::new(subscriber)), Some(&fmt_lines))
        }),
    ));
    for (dst, path) in [("file", dir.join("json")), ("null", null.clone())] {
        list.push((
            format!("json/{dst}"),
            Box::new(move || {
                let layer = tracing_subscriber::fmt::layer()
                    .json()
                    .with_span_events(FmtSpan::NEW | FmtSpan::CLOSE)
                    .with_writer(Arc::new(append(&path)));
                let subscriber = tracing_subscriber::registry().with(layer);
                Bench::traced(Some(Dispatch::new(subscriber)), Some(&path))
            }),
        ));
    }
    let chrome_files = [dir.join("chrome-a.json"), dir.join("chrome-b.json")];
    list.push((
        "chrome/file".into(),
        Box::new(move || {
            let (layer, guard) = tracing_chrome::ChromeLayerBuilder::new()
                .file(&chrome_files[0])
                .include_args(true)
                .build();
            let subscriber = tracing_subscriber::registry().with(layer);
            let mut bench = Bench::traced(Some(Dispatch::new(subscriber)), None);
            bench.chrome = Some(Mutex::new(Chrome {
                guard,
                files: chrome_files,
                current: 0,
            }));
            bench
        }),
    ));
    // tracing-perfetto-file: Perfetto's protobuf written from per-thread buffers straight
    // to the file on the traced thread, with fields and call sites recorded as our
    // binary target records them. The peer of `binary/file`.
    let perfetto = dir.join("perfetto.pftrace");
    list.push((
        "perfetto/file".into(),
        Box::new(move || {
            empty(&perfetto);
            let (layer, guard) = tracing_perfetto_file::PerfettoLayer::builder(append(&perfetto))
                .with_debug_annotations()
                .with_source_locations()
                .build();
            let subscriber = tracing_subscriber::registry().with(layer);
            let mut bench = Bench::traced(Some(Dispatch::new(subscriber)), Some(&perfetto));
            bench.perfetto = Some(guard);
            bench
        }),
    ));
    // Git's region-per-entry mode beside the default region-per-span mode (`event/…`).
    for (dst, path) in [("file", dir.join("event-entry")), ("null", null.clone())] {
        list.push((
            format!("event-entry/{dst}"),
            Box::new(move || {
                empty(&path);
                let layer = Trace2Layer::builder()
                    .with_target(Ours::Event.target(open_sink(&path)))
                    .with_region_mode(RegionMode::Entry)
                    .build();
                let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer.clone()));
                Bench {
                    runner: Runner::Traced(Some(dispatch)),
                    layer: Some(layer),
                    file: Some(path),
                    chrome: None,
                    perfetto: None,
                    normal: false,
                    min_iters: 0,
                }
            }),
        ));
    }
    let binary = dir.join("binary.t2b");
    list.push((
        "binary/file".into(),
        Box::new(move || {
            empty(&binary);
            let settings = tracing_trace2_binary::DestSettings {
                dst_debug: true,
                max_files: 0,
                sid: "bench".to_owned(),
            };
            let value = binary.to_str().expect("UTF-8 path");
            let dest = tracing_trace2_binary::dest::open(value, &settings).expect("t2b file");
            let writer = tracing_trace2_binary::BinaryWriter::builder()
                .with_exit_handler(false)
                .build(dest.sink);
            let layer = Trace2Layer::builder()
                .with_target(tracing_trace2::targets::binary(&writer, false))
                .build();
            let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer.clone()));
            Bench {
                runner: Runner::Traced(Some(dispatch)),
                layer: Some(layer),
                file: Some(binary),
                chrome: None,
                perfetto: None,
                normal: false,
                min_iters: 0,
            }
        }),
    ));
    // The flight recorder: the binary target's batches into a 4 MiB ring, no file.
    let flight = dir.join("flight");
    list.push((
        "flight/ring".into(),
        Box::new(move || {
            let _ = std::fs::create_dir_all(&flight);
            let recorder = tracing_trace2::flight::FlightRecorder::builder(&flight)
                .with_max_bytes(4 << 20)
                .with_signal(false)
                .build()
                .expect("flight directory");
            let layer = Trace2Layer::builder()
                .with_target(tracing_trace2::targets::flight(&recorder))
                .build();
            let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer.clone()));
            Bench {
                runner: Runner::Traced(Some(dispatch)),
                layer: Some(layer),
                file: None,
                chrome: None,
                perfetto: None,
                normal: false,
                min_iters: 0,
            }
        }),
    ));
    for ours in Ours::ALL {
        for (dst, path) in [("file", dir.join(ours.name())), ("null", null.clone())] {
            for mode in Mode::ALL {
                let path = path.clone();
                list.push((
                    format!("{}{}/{dst}", ours.name(), mode.suffix()),
                    Box::new(move || {
                        empty(&path);
                        let sink = open_sink(&path);
                        let options = BackgroundOptions::new().with_flush_on_panic(false);
                        let capacity = options.capacity() as u64;
                        let layer = match mode {
                            Mode::Direct => ours.layer(sink),
                            Mode::Background | Mode::Burst => {
                                ours.layer(BackgroundSink::new(sink, ours.env_name(), &options))
                            }
                            Mode::Deferred | Mode::DeferredBurst => Trace2Layer::builder()
                                .with_target(ours.target(sink))
                                .with_deferred(options)
                                .build(),
                        };
                        let dispatch =
                            Dispatch::new(tracing_subscriber::registry().with(layer.clone()));
                        let runner = match mode {
                            Mode::Burst | Mode::DeferredBurst => Runner::Burst {
                                dispatch,
                                layer: layer.clone(),
                            },
                            _ => Runner::Traced(Some(dispatch)),
                        };
                        // Sustained: every message (one per `tracing` call, one per line
                        // here) of at least SUSTAINED_QUEUES full queues per sample.
                        let min_iters = match mode {
                            Mode::Background | Mode::Deferred => {
                                (SUSTAINED_QUEUES * capacity).div_ceil(workload.lines())
                            }
                            _ => 0,
                        };
                        Bench {
                            runner,
                            layer: Some(layer),
                            file: Some(path),
                            chrome: None,
                            perfetto: None,
                            normal: matches!(ours, Ours::Normal),
                            min_iters,
                        }
                    }),
                ));
            }
        }
    }
    list
}

/// The direct writer's floor as one program: the Registry and a layer that writes a
/// preformatted line with one `write` wherever ours writes a Trace2 line (a span's
/// first entry, its close, an event). Unlike `floor-write/file` plus `registry+noop`,
/// measured apart, the Registry's work here runs between the `write`s, as ours does.
struct LineWriter {
    file: File,
    line: Vec<u8>,
}

impl LineWriter {
    fn write_line(&self) {
        let _ = (&self.file).write(std::hint::black_box(&self.line));
    }
}

impl<S> tracing_subscriber::Layer<S> for LineWriter
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_enter(&self, _: &tracing::span::Id, _: tracing_subscriber::layer::Context<'_, S>) {
        self.write_line();
    }

    fn on_close(&self, _: tracing::span::Id, _: tracing_subscriber::layer::Context<'_, S>) {
        self.write_line();
    }

    fn on_event(&self, _: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        self.write_line();
    }
}

/// A line of `len` bytes ending in LF.
fn line_of(len: usize) -> Vec<u8> {
    let mut line = vec![b'x'; len.max(1)];
    if let Some(last) = line.last_mut() {
        *last = b'\n';
    }
    line
}

fn main() {
    let mut criterion = measure::criterion();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("peers");
    std::fs::create_dir_all(&dir).expect("bench directory");
    let mut results = Results::default();
    let bench_mode = std::env::args().any(|a| a == "--bench");

    for workload in Workload::ALL {
        let mut group = criterion.benchmark_group(workload.name());
        group
            .throughput(Throughput::Elements(workload.lines()))
            .sampling_mode(SamplingMode::Flat);
        // (name, bench, criterion's median ns per iteration)
        let mut ran: Vec<(String, Bench, f64)> = Vec::new();
        for (name, make) in configs(workload, &dir) {
            let id = format!("{}/{name}", workload.name());
            // Setting up opens files and starts threads: only for benchmarks that run.
            if !criterion_filter_matches(&id) {
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
            // `cargo test --benches`: criterion ran each benchmark once; that is all.
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

/// The ratio goals: (ours, floor, base added to the floor, highest ratio that meets
/// the goal). `benches/whole_process.rs` prints the same goals, measured whole.
pub(crate) const GOALS: [(&str, &str, Option<&str>, f64); 15] = [
    (
        "event/file",
        "floor-write/file",
        Some("registry+noop"),
        1.25,
    ),
    ("perf/file", "floor-write/file", Some("registry+noop"), 1.25),
    // The same floor measured as one program (see `LineWriter`).
    ("event/file", "registry+write/file", None, 1.25),
    ("perf/file", "registry+write/file", None, 1.25),
    ("event-df/file", "floor-64k/file", None, 3.0),
    ("perf-df/file", "floor-64k/file", None, 3.0),
    ("event-bg/file", "floor-64k/file", None, 3.0),
    ("perf-bg/file", "floor-64k/file", None, 3.0),
    ("binary/file", "floor-64k/file", Some("registry+noop"), 1.5),
    // Issue 26: the fastest published `tracing` layer, recording what ours records.
    ("binary/file", "perfetto/file", None, 0.8),
    // Issue 24: recording into the flight recorder's ring costs what the binary
    // target costs.
    ("flight/ring", "binary/file", None, 1.1),
    ("event/file", "fmt/file", None, 0.8),
    ("event/file", "fmt-lines/file", None, 0.8),
    ("event/file", "json/file", None, 0.5),
    // tracing-chrome writes on a thread of its own: the peer of our background writer.
    ("event-df/file", "chrome/file", None, 1.0),
];

/// Issue 16's goals: for each, the median over rounds of ours ÷ (floor + base), and
/// whether it is met.
fn print_goals(results: &Results, workloads: &[Workload]) {
    println!("\n## Goals (medians of per-round ratios; ✔ met, ✘ missed)\n");
    print!("| ours | ÷ | goal |");
    for w in workloads {
        print!(" {} |", w.name());
    }
    println!();
    println!("|---|---|---:|{}", "---:|".repeat(workloads.len()));
    for (ours, floor, base, goal) in GOALS {
        let denominator = base.map_or(floor.to_owned(), |b| format!("{floor} + {b}"));
        print!("| {ours} | {denominator} | ≤ {goal} |");
        for &w in workloads {
            let ratio = match base {
                Some(base) => results.ratio_to_sum(w, ours, floor, base),
                None => results.ratio(w, ours, floor),
            };
            match ratio {
                Some(r) => print!(" {r:.2} {} |", if r <= goal { "✔" } else { "✘" }),
                None => print!(" - |"),
            }
        }
        println!();
    }
    // Issue 26: our binary files at most 15 % of tracing-perfetto-file's.
    print!("| binary/file bytes | perfetto/file bytes | ≤ 0.15 |");
    for &w in workloads {
        let bytes = |name: &str| results.bytes.get(&(w, name.to_owned())).copied();
        match (bytes("binary/file"), bytes("perfetto/file")) {
            (Some(ours), Some(peer)) if peer > 0.0 => {
                let r = ours / peer;
                print!(" {r:.2} {} |", if r <= 0.15 { "✔" } else { "✘" });
            }
            _ => print!(" - |"),
        }
    }
    println!();
}

fn print_table(results: &Results) {
    let workloads: Vec<Workload> = Workload::ALL
        .into_iter()
        .filter(|w| results.rounds.keys().any(|(rw, _)| rw == w))
        .collect();
    if workloads.is_empty() {
        return;
    }
    let mut names: Vec<&String> = Vec::new();
    for (_, name) in results.rounds.keys() {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names.sort();
    println!(
        "\n## ns per Trace2 line (median of {ROUNDS} interleaved rounds), bytes per Trace2 line\n"
    );
    print!("| configuration |");
    for w in &workloads {
        print!(" {} ns | {} B |", w.name(), w.name());
    }
    println!();
    println!("|---|{}", "---:|---:|".repeat(workloads.len()));
    for name in &names {
        print!("| {name} |");
        for &w in &workloads {
            let ns = results
                .median_ns(w, name)
                .map_or("-".into(), |v| format!("{v:.0}"));
            let b = results
                .bytes
                .get(&(w, (*name).clone()))
                .map_or("-".into(), |v| format!("{v:.0}"));
            print!(" {ns} | {b} |");
        }
        println!();
    }
    println!("\n## Ratios of our targets (medians of per-round ratios)\n");
    println!(
        "| ours | workload | / floor-write | / (floor-write + registry+noop) | / floor-64k | / fmt | / json | / chrome | / registry+noop |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    // Every configuration of ours: the three formats in each writer mode, then git's
    // region-per-entry mode beside the default region-per-span mode.
    let mut names: Vec<(String, &str)> = Vec::new();
    for ours in Ours::ALL {
        for mode in Mode::ALL {
            for dst in ["file", "null"] {
                names.push((format!("{}{}/{dst}", ours.name(), mode.suffix()), dst));
            }
        }
    }
    for dst in ["file", "null"] {
        names.push((format!("event-entry/{dst}"), dst));
    }
    for (name, dst) in &names {
        for &w in &workloads {
            if results.median_ns(w, name).is_none() {
                continue;
            }
            let ratio = |peer: &str| {
                results
                    .ratio(w, name, peer)
                    .map_or("-".into(), |r| format!("{r:.2}"))
            };
            let to_sum = results
                .ratio_to_sum(w, name, "floor-write/file", "registry+noop")
                .map_or("-".into(), |r| format!("{r:.2}"));
            println!(
                "| {name} | {} | {} | {to_sum} | {} | {} | {} | {} | {} |",
                w.name(),
                ratio("floor-write/file"),
                ratio("floor-64k/file"),
                ratio(&format!("fmt/{dst}")),
                ratio(&format!("json/{dst}")),
                ratio("chrome/file"),
                ratio("registry+noop"),
            );
        }
    }
    print_goals(results, &workloads);
    println!("\n## No target enabled\n");
    println!("| workload | ours-off / registry+noop | ours-off ns | registry+noop ns |");
    println!("|---|---:|---:|---:|");
    for &w in &workloads {
        let fmt = |v: Option<f64>, digits: usize| v.map_or("-".into(), |v| format!("{v:.digits$}"));
        println!(
            "| {} | {} | {} | {} |",
            w.name(),
            fmt(results.ratio(w, "ours-off", "registry+noop"), 2),
            fmt(results.median_ns(w, "ours-off"), 1),
            fmt(results.median_ns(w, "registry+noop"), 1),
        );
    }
}
