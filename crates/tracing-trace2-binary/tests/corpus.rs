//! The seeds of the decoder's fuzz target (`fuzz/corpus/decode`): small streams of
//! every shape the writer makes. Each committed seed must decode without loss (or, for
//! the damaged ones, with the loss reported); `T2B_WRITE_CORPUS=1` writes them anew.

mod support;

use std::path::PathBuf;

use support::{KINDS, Owned, Rng, builder, decode_all, write_all};
use tracing_trace2_binary::MIN_BATCH_SIZE;
use tracing_trace2_core::{MemorySink, Record};

const SID: &str = "20260101T000000.000000Z-H0123abcd-P00001234/20260101T000001.000000Z-H0-P2";

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/decode")
}

fn records(seed: u64, count: usize) -> Vec<Owned> {
    let mut rng = Rng(seed);
    (0..count)
        .map(|i| Owned::new(&mut rng, i % KINDS))
        .collect()
}

fn stream(owned: &[Owned], sid: &str) -> Vec<u8> {
    let lists: Vec<Vec<&str>> = owned.iter().map(Owned::list_refs).collect();
    let recs: Vec<Record<'_>> = owned
        .iter()
        .zip(&lists)
        .map(|(o, l)| o.record_in(l, sid, 1))
        .collect();
    write_all(builder().with_batch_size(MIN_BATCH_SIZE), &recs)
}

/// The seeds: (name, bytes, whether they decode complete).
fn seeds() -> Vec<(&'static str, Vec<u8>, bool)> {
    let every_kind = stream(&records(1, KINDS), SID);
    let small = stream(&records(2, 8), SID);
    let mut two = stream(&records(3, 6), SID);
    two.extend(stream(&records(4, 6), "other-process"));
    let threads = {
        let sink = MemorySink::new();
        let writer = builder().build(sink.clone());
        std::thread::scope(|scope| {
            for n in 0..3u64 {
                let writer = writer.clone();
                scope.spawn(move || {
                    let owned = records(10 + n, 5);
                    for o in &owned {
                        let list = o.list_refs();
                        writer.record(&o.record_in(&list, SID, 1));
                    }
                });
            }
        });
        writer.finish();
        sink.contents()
    };
    let truncated = every_kind[..every_kind.len() * 2 / 3].to_vec();
    vec![
        ("every-kind.t2b", every_kind, true),
        ("small.t2b", small, true),
        ("two-processes.t2b", two, true),
        ("threads.t2b", threads, true),
        ("truncated.t2b", truncated, false),
    ]
}

#[test]
fn fuzz_seeds_decode() {
    let dir = corpus_dir();
    if std::env::var_os("T2B_WRITE_CORPUS").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes, _) in seeds() {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
    for (name, _, complete) in seeds() {
        let bytes = std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let (decoded, report) = decode_all(&bytes);
        assert_eq!(report.is_complete(), complete, "{name}: {report}");
        assert!(!decoded.is_empty(), "{name}");
    }
}
