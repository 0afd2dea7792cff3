//! The cost of tracing on a CLI shaped like jj (issue 21): one iteration is one
//! command, `log`, of a program whose instrumented methods take big `Debug` arguments
//! (`self` included) and do real work between them, with an `EnvFilter` fmt layer
//! installed (showing warnings, so it formats none of the spans).
//!
//! | level | span | arguments (`Debug`) | work |
//! |---|---|---|---|
//! | 1 | `Repo::run_log` | `self` (the whole repo, ~20 KB), `limit` | — |
//! | 2 | `ConfigEnv::reload_workspace_config` | `self` (~4 KB) | — |
//! | 3 | `ConfigEnv::parse_layer` × 4 | `self`, the layer (~1 KB) | hash the layer's values |
//! | 2 | `Repo::resolve_revset` | `self`, the revset | — |
//! | 3 | `Repo::index_entry` × 64 | `self`, the commit id | look the commit up |
//! | 4 | `Repo::render_commit` × 64 | `self`, the commit | format a log line, then hash it [`RENDER_PASSES`] times (~80 µs) |
//!
//! 135 spans per command. Configurations, in one interleaved run: `untraced` (the
//! program's own subscriber: the registry and the fmt layer), `chrome` (plus
//! tracing-chrome as jj installs it, without arguments, writing on its own thread), and
//! plus our layer as the facade builds it: `event` (git's default nesting, 2), `perf`,
//! `binary` (the t2b target at the Event nesting), and `event-n99` / `binary-n99`
//! (every level, as jj's worst scenario). The table gives the median time per command,
//! its ratio to `untraced` (median of per-round ratios) and the bytes each writes per
//! command.
//!
//! Run with `cargo bench --bench cli_shaped` (about a minute). For instruction counts,
//! run the bench binary under callgrind with `CLI_SHAPED_ONLY=<configuration>` and
//! `CLI_SHAPED_ITERS=<n>`: it then runs that configuration `n` times and nothing else
//! (the difference between two values of `n` is the cost of the commands alone).

#[path = "measure/mod.rs"]
mod measure;
#[path = "support/mod.rs"]
mod support;

#[path = "support/program.rs"]
mod program;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::SamplingMode;
use program::program_layer;
use tracing::dispatcher::{self, Dispatch};
use tracing_subscriber::Registry;
use tracing_subscriber::prelude::*;
use tracing_trace2::{Settings, Trace2, Trace2Layer};

use support::{empty, median};

/// Commits `log` shows per command.
const LOG_LIMIT: usize = 64;
/// Passes over a rendered log line: the work per commit. Set so that tracing-chrome
/// (without arguments) costs about what it cost on jj's `jj log`, ×1.16 (issue 21).
const RENDER_PASSES: u32 = 384;

// Some fields are read only by `Debug`, as much of a real program's state is by tracing.
#[allow(dead_code)]
#[derive(Clone, Debug)]
struct ConfigLayer {
    path: PathBuf,
    values: Vec<(String, String)>,
}

#[allow(dead_code)]
#[derive(Clone, Debug)]
struct ConfigEnv {
    home: PathBuf,
    layers: Vec<ConfigLayer>,
}

#[derive(Clone, Debug)]
struct Commit {
    id: [u8; 20],
    parents: Vec<[u8; 20]>,
    author: String,
    description: String,
}

#[derive(Debug)]
struct Repo {
    env: ConfigEnv,
    commits: Vec<Commit>,
}

/// FNV-1a: the stand-in for real work on bytes.
fn hash(bytes: &[u8], mut h: u64) -> u64 {
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    h
}

impl ConfigEnv {
    #[tracing::instrument]
    fn reload_workspace_config(&self) -> u64 {
        self.layers
            .iter()
            .fold(0, |h, layer| h ^ self.parse_layer(layer))
    }

    #[tracing::instrument]
    fn parse_layer(&self, layer: &ConfigLayer) -> u64 {
        layer
            .values
            .iter()
            .fold(0xcbf2_9ce4_8422_2325, |h, (k, v)| {
                hash(v.as_bytes(), hash(k.as_bytes(), h))
            })
    }
}

impl Repo {
    fn new() -> Repo {
        let layers = (0..4)
            .map(|l| ConfigLayer {
                path: PathBuf::from(format!("/home/user/.config/jj/conf.d/{l}.toml")),
                values: (0..24)
                    .map(|k| {
                        (
                            format!("ui.section{l}.key{k}"),
                            format!("value-{l}-{k}-xxxx"),
                        )
                    })
                    .collect(),
            })
            .collect();
        let commits = (0..LOG_LIMIT as u8)
            .map(|i| Commit {
                id: [i; 20],
                parents: vec![[i.wrapping_sub(1); 20]],
                author: format!("Author {i} <author{i}@example.com>"),
                description: format!("commit {i}: {}", "describe the change at length ".repeat(4)),
            })
            .collect();
        Repo {
            env: ConfigEnv {
                home: PathBuf::from("/home/user"),
                layers,
            },
            commits,
        }
    }

    #[tracing::instrument]
    fn run_log(&self, limit: usize) -> u64 {
        self.env.reload_workspace_config() ^ self.resolve_revset("::@", limit)
    }

    #[tracing::instrument]
    fn resolve_revset(&self, revset: &str, limit: usize) -> u64 {
        let mut h = hash(revset.as_bytes(), 0);
        for commit in self.commits.iter().take(limit) {
            h ^= self.index_entry(&commit.id);
        }
        h
    }

    #[tracing::instrument]
    fn index_entry(&self, id: &[u8; 20]) -> u64 {
        let commit = self
            .commits
            .iter()
            .find(|c| &c.id == id)
            .expect("a known commit");
        self.render_commit(commit)
    }

    #[tracing::instrument]
    fn render_commit(&self, commit: &Commit) -> u64 {
        let mut line = String::with_capacity(256);
        for b in commit.id {
            let _ = write!(line, "{b:02x}");
        }
        let _ = write!(
            line,
            " {} {} parents={}",
            commit.author,
            commit.description.lines().next().unwrap_or(""),
            commit.parents.len()
        );
        // The template engine, graph layout and object reads of a real `log`: passes over
        // the line, RENDER_PASSES of them (see the module documentation).
        (0..RENDER_PASSES).fold(0, |h, _| hash(std::hint::black_box(line.as_bytes()), h))
    }
}

/// One configuration: its dispatcher, our layer (to flush) and the file it writes.
struct Config {
    dispatch: Dispatch,
    layer: Option<Trace2Layer>,
    file: Option<PathBuf>,
    chrome: Option<tracing_chrome::FlushGuard>,
}

impl Config {
    /// Runs `iters` commands and returns the time they took.
    fn sample(&self, repo: &Repo, iters: u64) -> Duration {
        if let Some(file) = &self.file {
            empty(file);
        }
        let _default = dispatcher::set_default(&self.dispatch);
        let start = Instant::now();
        for _ in 0..iters {
            std::hint::black_box(repo.run_log(LOG_LIMIT));
        }
        let took = start.elapsed();
        if let Some(layer) = &self.layer {
            layer.flush();
        }
        if let Some(chrome) = &self.chrome {
            chrome.flush();
        }
        took
    }

    /// Bytes written per command, on a fresh file.
    fn bytes_per_command(&self, repo: &Repo) -> Option<f64> {
        const ITERS: u64 = 100;
        let file = self.file.as_deref()?;
        self.sample(repo, ITERS);
        Some(std::fs::metadata(file).ok()?.len() as f64 / ITERS as f64)
    }
}

/// Our layer as the facade builds it from `settings` (and a binary target at `binary`).
fn ours(settings: Settings, binary: Option<&Path>) -> Trace2Layer {
    let mut trace2 = Trace2::with_settings(settings).with_exe_version("bench");
    if let Some(path) = binary {
        trace2 = trace2.with_binary_target(path.display().to_string());
    }
    trace2.unfiltered_layer().expect("a target is enabled")
}

fn config(name: &str, dir: &Path) -> Config {
    let file = dir.join(name);
    empty(&file);
    let path = file.display().to_string();
    let traced = |layer: Trace2Layer| Config {
        dispatch: Dispatch::new(
            Registry::default()
                .with(program_layer())
                .with(layer.clone().filtered()),
        ),
        layer: Some(layer),
        file: Some(file.clone()),
        chrome: None,
    };
    let mut settings = Settings::default();
    match name {
        "untraced" => Config {
            dispatch: Dispatch::new(Registry::default().with(program_layer())),
            layer: None,
            file: None,
            chrome: None,
        },
        "chrome" => {
            let (layer, guard) = tracing_chrome::ChromeLayerBuilder::new()
                .file(&file)
                .build();
            Config {
                dispatch: Dispatch::new(Registry::default().with(program_layer()).with(layer)),
                layer: None,
                file: Some(file.clone()),
                chrome: Some(guard),
            }
        }
        "event" => {
            settings.event_destination = Some(path);
            traced(ours(settings, None))
        }
        "event-n99" => {
            settings.event_destination = Some(path);
            settings.event_nesting = 99;
            traced(ours(settings, None))
        }
        "perf" => {
            settings.perf_destination = Some(path);
            traced(ours(settings, None))
        }
        "binary" => traced(ours(settings, Some(&file))),
        "binary-n99" => {
            settings.binary_nesting = Some(99);
            traced(ours(settings, Some(&file)))
        }
        _ => panic!("unknown configuration {name}"),
    }
}

const CONFIGS: [&str; 7] = [
    "untraced",
    "chrome",
    "event",
    "perf",
    "binary",
    "event-n99",
    "binary-n99",
];

fn main() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli_shaped");
    std::fs::create_dir_all(&dir).expect("bench directory");
    let repo = Repo::new();
    if let Ok(only) = std::env::var("CLI_SHAPED_ONLY") {
        // One configuration, a given number of commands: for callgrind.
        let iters = std::env::var("CLI_SHAPED_ITERS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(100);
        config(&only, &dir).sample(&repo, iters);
        return;
    }
    let mut criterion = measure::criterion();
    let bench_mode = std::env::args().any(|a| a == "--bench");
    let mut group = criterion.benchmark_group("cli_shaped");
    group.sampling_mode(SamplingMode::Flat);
    let mut ran = Vec::new();
    for name in CONFIGS {
        if !support::criterion_filter_matches(&format!("cli_shaped/{name}")) {
            continue;
        }
        let config = config(name, &dir);
        if let Some(per_iter) =
            measure::calibrate(&mut group, name, |iters| config.sample(&repo, iters))
        {
            ran.push((name.to_owned(), config, per_iter));
        }
    }
    group.finish();
    if !bench_mode {
        return;
    }
    let mut rounds: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    measure::interleave(
        &ran,
        1,
        |config, iters| config.sample(&repo, iters),
        |name, ns| rounds.entry(name.to_owned()).or_default().push(ns),
    );
    criterion.final_summary();
    println!(
        "\n## jj-shaped CLI: µs per command (median of {} interleaved rounds)\n",
        measure::ROUNDS
    );
    println!("| configuration | µs per command | ÷ untraced | bytes per command |");
    println!("|---|---:|---:|---:|");
    let base = rounds.get("untraced");
    for (name, config, _) in &ran {
        let ns = rounds.get(name).and_then(|r| median(r));
        let ratio = base.zip(rounds.get(name)).and_then(|(b, r)| {
            let ratios: Vec<f64> = r.iter().zip(b).map(|(r, b)| r / b).collect();
            median(&ratios)
        });
        let bytes = config.bytes_per_command(&repo);
        println!(
            "| {name} | {} | {} | {} |",
            ns.map_or("-".into(), |v| format!("{:.1}", v / 1000.0)),
            ratio.map_or("-".into(), |v| format!("{v:.3}")),
            bytes.map_or("-".into(), |v| format!("{v:.0}")),
        );
    }
}
