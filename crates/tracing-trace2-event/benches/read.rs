//! The Event reader's cost per line: every line of the crate's git 2.47.3 samples
//! (`testdata/*.event`) read into a record, as the `trace2` tool reads Event input.
//!
//! - `read/git_lines`: the lines as git wrote them (`event` first: the fast path);
//! - `read/event_last`: the same lines with `event` moved to the end, which only the
//!   general path (serde_json) reads.
//!
//! Run with `cargo bench -p tracing-trace2-event --bench read`.

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tracing_trace2_event::{AnyLine, read_any_line};

/// The samples' lines, without their LF.
fn git_lines() -> Vec<String> {
    let testdata = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let mut paths: Vec<_> = std::fs::read_dir(testdata)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "event"))
        .collect();
    paths.sort();
    paths
        .iter()
        .flat_map(|path| {
            let bytes = std::fs::read(path).unwrap();
            String::from_utf8_lossy(&bytes)
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// `line` with its first key (`event`) moved to the end.
fn event_last(line: &str) -> String {
    let (event, rest) = line[1..].split_once(',').unwrap();
    format!("{{{},{event}}}", rest.strip_suffix('}').unwrap())
}

/// Reads every line into a record; how many fields the records had, so that nothing is
/// optimised away.
fn read_all(lines: &[String]) -> usize {
    let mut fields = 0;
    for line in lines {
        if let AnyLine::Known(line) = read_any_line(line).unwrap() {
            let mut list = Vec::new();
            let record = line.record_filling_missing(&mut list).unwrap();
            fields += record.event.field_values().1 + record.sid.len();
        }
    }
    fields
}

fn read(c: &mut Criterion) {
    let git = git_lines();
    let moved: Vec<String> = git.iter().map(|line| event_last(line)).collect();
    let bytes = git.iter().map(|line| line.len() as u64 + 1).sum();
    let mut group = c.benchmark_group("read");
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function("git_lines", |b| b.iter(|| read_all(black_box(&git))));
    group.bench_function("event_last", |b| b.iter(|| read_all(black_box(&moved))));
    group.finish();
}

criterion_group!(benches, read);
criterion_main!(benches);
