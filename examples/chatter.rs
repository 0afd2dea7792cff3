//! What a dependency's chatter costs a program beside the Trace2 layer.
//!
//! Each "command" is a region with a datum of the program's own, and a call into a graph
//! library (target `noisy_dep::graph`) that warns of its slow path 94 times and logs 94
//! `debug!` lines. The program's own fmt layer hides the library
//! (`EnvFilter("info,noisy_dep=off")`), as the program this was measured on did. The
//! Trace2 layer writes an Event trace into a temporary file.
//!
//! ```sh
//! cargo run --release --example chatter -- <mode> [commands] [warnings]
//! ```
//!
//! | mode | Trace2 layer |
//! |---|---|
//! | `none` | none: the fmt layer alone |
//! | `absent` | `Trace2::layer()` with no target enabled: the disabled layer |
//! | `init-off` | `Trace2::init()` with no target enabled, and no fmt layer |
//! | `defaults` | the layer's defaults: spans from DEBUG, events from INFO, warnings nothing |
//! | `former` | the former defaults: spans and events from INFO, warnings as `error` |
//!
//! It prints the wall time per command (the best of 5 rounds) and the Trace2 lines per
//! command by kind. `warnings` (default 94) is how many nodes the library visits per
//! command: under `valgrind --tool=callgrind`, the difference of a run with 94 and one
//! with 0, divided by the commands run (5 rounds of `commands`), is what the chatter
//! costs per command (docs/decisions.md, "Default levels, warnings, category").

use std::time::Instant;

use tracing_subscriber::prelude::*;
use tracing_subscriber::{EnvFilter, Registry};
use tracing_trace2::{Settings, Trace2, Warnings};

/// The graph library: its slow path warns, its inner loop logs at DEBUG.
mod noisy_dep {
    pub fn walk(nodes: u32) -> u32 {
        let mut sum = 0;
        for node in 0..nodes {
            tracing::debug!(target: "noisy_dep::graph", node, "visiting");
            tracing::warn!(target: "noisy_dep::graph", node, "slow path");
            sum += std::hint::black_box(node);
        }
        sum
    }
}

/// One command of the program.
fn command(n: u32, nodes: u32) -> u32 {
    let span = tracing::info_span!("command", trace2.category = "cmd");
    let _entered = span.enter();
    let sum = noisy_dep::walk(nodes);
    tracing::info!(category = "cmd", key = "nodes", value = n);
    sum
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "defaults".to_owned());
    let commands: u32 = args.next().and_then(|n| n.parse().ok()).unwrap_or(2_000);
    let nodes: u32 = args.next().and_then(|n| n.parse().ok()).unwrap_or(94);
    let dir = std::env::temp_dir().join(format!("chatter-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let trace = dir.join("trace.event");
    let mut settings = Settings::default();
    settings.event_destination = Some(trace.display().to_string());
    let trace2 = match mode.as_str() {
        "none" | "init-off" => None,
        "absent" => Some(Trace2::with_settings(Settings::default())),
        "defaults" => Some(Trace2::with_settings(settings)),
        "former" => Some(
            Trace2::with_settings(settings)
                .with_max_level(tracing::Level::INFO)
                .with_warnings(Warnings::Error),
        ),
        other => {
            eprintln!("unknown mode {other:?}: none, absent, init-off, defaults or former");
            std::process::exit(2);
        }
    };
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::sink)
        .with_filter(EnvFilter::new("info,noisy_dep=off"));
    let _guard;
    if mode == "none" {
        Registry::default().with(fmt).init();
    } else if mode == "init-off" {
        _guard = Trace2::with_settings(Settings::default()).init();
    } else if let Some(trace2) = trace2 {
        Registry::default().with(fmt).with(trace2.layer()).init();
    }

    let mut best = f64::INFINITY;
    let rounds = 5;
    for _ in 0..rounds {
        let start = Instant::now();
        for n in 0..commands {
            std::hint::black_box(command(n, nodes));
        }
        let ns = start.elapsed().as_nanos() as f64 / f64::from(commands);
        best = best.min(ns);
    }
    let text = std::fs::read_to_string(&trace).unwrap_or_default();
    let per_command = |kind: &str| {
        let needle = format!("\"event\":\"{kind}\"");
        text.lines().filter(|l| l.contains(&needle)).count() as f64 / f64::from(commands * rounds)
    };
    println!(
        "{mode}: {best:.0} ns per command; per command: {} region_enter, {} data, {} error lines",
        per_command("region_enter"),
        per_command("data"),
        per_command("error"),
    );
    let _ = std::fs::remove_dir_all(&dir);
}
