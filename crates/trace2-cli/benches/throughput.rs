//! Throughput of `trace2 summary` and `trace2 export --format chrome|perfetto` on a made-up trace of
//! 100 000 Event lines (about 23 MB), read from a file through the same path as the tool.

use std::fs::File;
use std::io::{BufWriter, sink};
use std::path::PathBuf;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use trace2_cli::export::{ChromeExporter, PerfettoExporter};
use trace2_cli::input::{self, Report};
use trace2_cli::progress::Progress;
use trace2_cli::summary::Summariser;

#[path = "../tests/common/synthetic.rs"]
mod synthetic;

fn throughput(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("bench.event");
    synthetic::write_trace(
        &mut BufWriter::new(File::create(&path).unwrap()),
        100_000,
        4,
    )
    .unwrap();
    let bytes = std::fs::metadata(&path).unwrap().len();
    let specs = input::expand(std::slice::from_ref(&path));

    let mut group = c.benchmark_group("trace2");
    group.throughput(Throughput::Bytes(bytes));
    group.sample_size(10);
    group.bench_function("summary", |b| {
        b.iter(|| {
            let mut summariser = Summariser::new();
            let mut report = Report::default();
            input::for_each_event(&specs, &Progress::hidden(), &mut report, |event| {
                summariser.event(event)
            });
            summariser.finish()
        })
    });
    group.bench_function("export_chrome", |b| {
        b.iter(|| {
            let mut exporter = ChromeExporter::new(BufWriter::new(sink())).unwrap();
            let mut report = Report::default();
            input::for_each_event(&specs, &Progress::hidden(), &mut report, |event| {
                exporter.event(event).unwrap()
            });
            exporter.finish().unwrap().1
        })
    });
    group.bench_function("export_perfetto", |b| {
        b.iter(|| {
            let mut exporter = PerfettoExporter::new(BufWriter::new(sink())).unwrap();
            let mut report = Report::default();
            input::for_each_event(&specs, &Progress::hidden(), &mut report, |event| {
                exporter.event(event).unwrap()
            });
            exporter.finish().unwrap().1
        })
    });
    group.finish();
}

criterion_group!(benches, throughput);
criterion_main!(benches);
