//! Eight threads write regions and data through a global default subscriber into one
//! file per format: every Event line parses, none is torn, none is lost, and each
//! thread's lines keep their order. Then four processes append to the same files.

#[path = "support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;
use tracing::info;
use tracing_subscriber::prelude::*;
use tracing_trace2::{Settings, Trace2};

const THREADS: usize = 8;
const ROUNDS: usize = 500;

fn settings(dir: &Path) -> Settings {
    let mut settings = Settings::default();
    settings.normal_destination = Some(dir.join("t.normal").display().to_string());
    settings.perf_destination = Some(dir.join("t.perf").display().to_string());
    settings.event_destination = Some(dir.join("t.event").display().to_string());
    settings.event_nesting = 9;
    settings
}

#[test]
fn threads_and_processes_never_tear_lines() {
    let dir = support::process::fresh_dir("concurrency").unwrap();
    let layer = Trace2::with_settings(settings(&dir))
        .layer()
        .into_inner()
        .expect("targets enabled");
    tracing_subscriber::registry().with(layer).init();

    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            std::thread::Builder::new()
                .name(format!("w{t}"))
                .spawn(move || {
                    for i in 0..ROUNDS {
                        let span = tracing::info_span!("work", trace2.category = "conc", trace2.msg = "a message long enough to make the line exceed a pipe buffer's atomic size? no, but long");
                        let _e = span.enter();
                        info!(category = "conc", key = "i", value = i);
                    }
                })
                .unwrap()
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }

    let text = std::fs::read_to_string(dir.join("t.event")).unwrap();
    let mut per_thread: HashMap<String, Vec<u64>> = HashMap::new();
    let mut lines = 0;
    for line in text.lines() {
        let v: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("torn line {line:?}: {e}"));
        lines += 1;
        if v["event"] == "data" {
            let i = v["value"].as_str().unwrap().parse().unwrap();
            per_thread
                .entry(v["thread"].as_str().unwrap().to_owned())
                .or_default()
                .push(i);
        }
    }
    // version + 3 lines per round per thread, and each thread's thread_start and
    // thread_exit (they are plain `std::thread`s, announced by the layer)
    assert_eq!(lines, 1 + THREADS * (ROUNDS * 3 + 2));
    assert_eq!(per_thread.len(), THREADS);
    for (thread, values) in &per_thread {
        assert!(
            thread.starts_with("th") && thread.contains(":w"),
            "{thread}"
        );
        assert_eq!(
            values,
            &(0..ROUNDS as u64).collect::<Vec<_>>(),
            "order of {thread}"
        );
    }
    let perf = std::fs::read_to_string(dir.join("t.perf")).unwrap();
    assert_eq!(perf.lines().count(), lines);
    for line in perf.lines() {
        assert_eq!(line.matches(" | ").count(), 8, "torn perf line {line:?}");
    }

    // Four processes appending to the same three files at once.
    let quickstart = env!("CARGO_BIN_EXE_trace2-emit");
    let before = lines;
    let children: Vec<_> = (0..4)
        .map(|_| {
            Command::new(quickstart)
                .env("GIT_TRACE2", dir.join("t.normal"))
                .env("GIT_TRACE2_PERF", dir.join("t.perf"))
                .env("GIT_TRACE2_EVENT", dir.join("t.event"))
                .env("GIT_TRACE2_EVENT_NESTING", "9")
                .env("EMIT_LINES", "2000")
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let text = std::fs::read_to_string(dir.join("t.event")).unwrap();
    let mut sids = HashMap::<String, usize>::new();
    for line in text.lines().skip(before) {
        let v: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("torn line {line:?}: {e}"));
        *sids
            .entry(v["sid"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    assert_eq!(sids.len(), 4);
    let counts: Vec<usize> = sids.values().copied().collect();
    assert!(counts.iter().all(|&c| c == counts[0]), "{counts:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
