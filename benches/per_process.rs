//! What tracing costs a short process, measured by spawning processes: the cost git
//! tools pay dozens of times per user action.
//!
//! **Lifecycle** (`PER_PROCESS_ONLY=lifecycle`): this bench binary started again as a
//! child (`--child lifecycle`) that does what a small traced program does and nothing
//! else: `Trace2::from_env().init()` (`version`, `start`, `cmd_ancestry`), `cmd_name`,
//! three `info!` lines, `finish` (`exit`, `atexit`). Each target is enabled the way a
//! user enables it, by its environment variable: untraced (none set: nothing is
//! installed), `GIT_TRACE2_EVENT`, `GIT_TRACE2_PERF`, `GIT_TRACE2` (Normal),
//! `TRACING_TRACE2_BINARY`, `TRACING_TRACE2_FLIGHT`; beside them `git rev-parse HEAD` in
//! a one-commit repository, untraced and with `GIT_TRACE2_EVENT`. The table gives per
//! configuration the median wall time per process; the time added over its untraced
//! run (ours over the untraced child, git's over untraced git; per round the difference
//! of the two medians, then the median over rounds); that added time minus git's Event
//! added time, and divided by it; then the median minor page faults and CPU time (user +
//! system) per process, from `wait4`'s resource usage of each child. Git's own added
//! time moves by a factor of two between runs on a shared machine, so the added time,
//! the difference and the ratio each come with a 95 % interval (below): ours is above
//! git's when the difference's interval lies above 0, and within the noise when it
//! holds 0.
//!
//! **Hook-shaped** (`PER_PROCESS_ONLY=hook`): a child (`--child hook`) shaped like a git
//! hook of a companion tool: about 2–3 ms of real work (hashing) through a dozen
//! `#[instrument]` functions, a dependency-like module (`noisy_dep`) warning on its slow
//! path, and the program's own subscriber, an `EnvFilter("warn,noisy_dep=error")` fmt
//! layer on stderr that hides those warnings. Configurations: untraced (the program's
//! own subscriber; the lifecycle's layer is there but no target is enabled); `registry
//! floor` (untraced plus a layer that does nothing, filtered as ours is: see
//! `support/floor.rs`; what the Registry costs to make, enter, exit and close the 80 INFO
//! spans the program's own filter hides, which any layer built on the Registry pays);
//! Event with only the lifecycle (spans and events turned off by
//! `TRACING_TRACE2_SPAN_LEVEL=off` and `TRACING_TRACE2_EVENT_LEVEL=off`: the process's
//! lines alone); Event, binary, flight recorder (each through its environment variable,
//! with the layer installed beside the fmt layer as the README shows);
//! tracing-perfetto-file (fields and call sites, as `peers` builds it) and tracing-chrome,
//! each writing a file, once behind our filter (`Trace2Filter`: they see what our layer
//! sees) and once unfiltered as such tools install them (they then also see the
//! dependency's warnings, so those are built and dispatched). The table gives the median
//! wall time per process and its ratio to untraced (median of the per-round ratios of the
//! round medians) with its 95 % interval, and the same ratio of the CPU time (user +
//! system, from `wait4`), which a loaded machine moves less than the wall time.
//!
//! **Intervals**: a two-stage percentile bootstrap of the statistic exactly as the table
//! computes it (2,000 resamples, fixed seed). Each resample draws the rounds with
//! replacement and then, within each drawn round, each configuration's runs with
//! replacement, and recomputes the round medians and the statistic; the interval is the
//! 2.5th to 97.5th percentile of the resampled values. Drawing rounds keeps what varies
//! between rounds (the machine's load drifts) in the interval, and a drawn round is the
//! same round for every configuration, so the differences and ratios stay paired as the
//! interleaving made them; the difference and the ratio to git's added time take both
//! added times from the same resample, so their interval carries how the two move
//! together. The ratio's interval is Fieller's construction on the same resamples: a
//! ratio ρ is inside when 0 lies within the percentile interval of `ours − ρ·git's`,
//! which stays sound when git's added time comes near zero in some resamples (an end is
//! then `unbounded`; both, shown `[unbounded]`, when git's added time is not clear of
//! zero: no ratio can be ruled out) and holds 1 exactly when the difference's interval
//! holds 0 (ends are searched within ±100). The
//! hook table's ratios have the untraced time, never near zero, below the line, and
//! take the plain percentile interval. The intervals describe this run's conditions: a
//! machine quieter or busier than during the run can move all of them. The Mann–Whitney
//! and Hodges–Lehmann statistics of `trace2 compare` are for one shift between two sets
//! of independent samples, not for a difference of two shifts or for rounds; the
//! percentiles come from its `quantile`.
//!
//! Runs are interleaved: every round runs each configuration once in turn, `RUNS` times
//! over, so that a change of the machine's load hits all alike; each pass starts one
//! configuration further on, so that each follows every other equally often (a process
//! started after another program's starts colder). `PER_PROCESS_ROUNDS`
//! (default 7) and `PER_PROCESS_RUNS` (default 80) set the sizes. With
//! `PER_PROCESS_STRACE=1` each configuration also runs once under `strace -f -c` and the
//! table gets its system calls per process (the whole process tree).
//!
//! Run with `cargo bench --bench per_process` (about half a minute on two cores; needs
//! `git` on PATH). `cargo test --benches` runs this target without `--bench`: it does
//! nothing then.

#[path = "support/floor.rs"]
mod floor;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use trace2_cli::stats::rank::quantile;
use tracing::instrument;
use tracing_subscriber::prelude::*;
use tracing_subscriber::{EnvFilter, Layer};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let Some(pos) = args.iter().position(|a| a == "--child") {
        return match args.get(pos + 1).map(String::as_str) {
            Some("lifecycle") => child_lifecycle(),
            Some("hook") => hook::child(args.get(pos + 2).map(String::as_str)),
            other => {
                eprintln!("per_process: unknown child {other:?}");
                ExitCode::from(2)
            }
        };
    }
    // `cargo test --benches` runs bench targets with `--bench` absent: do nothing then.
    if !args.iter().any(|a| a == "--bench") {
        return ExitCode::SUCCESS;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("per_process");
    let repo = match build_repo(&dir) {
        Ok(repo) => repo,
        Err(err) => {
            eprintln!("per_process: cannot build the repository ({err}); is git installed?");
            return ExitCode::FAILURE;
        }
    };
    let only = std::env::var("PER_PROCESS_ONLY").unwrap_or_default();
    let rounds = env_number("PER_PROCESS_ROUNDS", 7);
    let runs = env_number("PER_PROCESS_RUNS", 80);
    let strace = std::env::var_os("PER_PROCESS_STRACE").is_some_and(|v| v == "1");
    if only.is_empty() || only == "lifecycle" {
        lifecycle_table(&dir, &repo, rounds, runs, strace);
    }
    if only.is_empty() || only == "hook" {
        hook_table(&dir, rounds, runs, strace);
    }
    ExitCode::SUCCESS
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(default)
}

/// The lifecycle child: a traced program that writes the lifecycle and three lines.
fn child_lifecycle() -> ExitCode {
    let trace2 = tracing_trace2::Trace2::from_env()
        .with_exe_version("bench")
        .init();
    tracing_trace2::api::cmd_name("emit");
    for i in 0..3 {
        tracing::info!("t0 {i}");
    }
    trace2.finish(ExitCode::SUCCESS)
}

/// The hook-shaped child and its work.
mod hook {
    use super::*;

    /// Stands for a library the hook depends on: it warns on its slow path, which the
    /// program's fmt filter hides.
    mod noisy_dep {
        /// Looks `key` up; every fourth key takes the slow path, with a warning.
        pub fn lookup(key: u64) -> u64 {
            if key % 4 == 3 {
                tracing::warn!(target: "noisy_dep::cache", key, "slow path: cache miss, reading from disk");
            }
            key.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        }
    }

    /// Bytes hashed per file checked: sets the work to about 2–3 ms per process.
    const FILE_BYTES: usize = 24 << 10;
    /// Hash passes over each file.
    const PASSES: u32 = 6;
    /// Files the hook checks.
    const FILES: u64 = 12;

    fn hash(bytes: &[u8], seed: u64) -> u64 {
        let mut h = seed ^ 0xcbf2_9ce4_8422_2325;
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        h
    }

    #[instrument]
    fn read_config() -> Vec<(String, String)> {
        (0..3).flat_map(parse_layer).collect()
    }

    #[instrument]
    fn parse_layer(layer: u32) -> Vec<(String, String)> {
        (0..4u64)
            .map(|k| {
                (
                    format!("hook.key{layer}{k}"),
                    format!("{}", noisy_dep::lookup(k)),
                )
            })
            .collect()
    }

    #[instrument(skip(config))]
    fn list_staged(config: &[(String, String)]) -> Vec<u64> {
        (0..FILES).map(|f| f + config.len() as u64).collect()
    }

    #[instrument(skip(content))]
    fn read_blob(id: u64, content: &mut Vec<u8>) {
        content.clear();
        content.extend((0..FILE_BYTES).map(|i| (i as u64 ^ id) as u8));
    }

    #[instrument(skip(content))]
    fn check_whitespace(id: u64, content: &[u8]) -> u64 {
        hash(content, id)
    }

    #[instrument(skip(content))]
    fn check_conflict_markers(id: u64, content: &[u8]) -> u64 {
        (0..PASSES / 2).fold(id, |h, p| hash(content, h ^ u64::from(p)))
    }

    #[instrument(skip(content))]
    fn check_size(id: u64, content: &[u8]) -> u64 {
        (0..8).fold(content.len() as u64, |h, k| {
            h ^ noisy_dep::lookup(id * 8 + k)
        })
    }

    #[instrument(skip(content))]
    fn lint(id: u64, content: &[u8]) -> u64 {
        (0..PASSES / 2).fold(id, |h, p| hash(content, h.rotate_left(p)))
    }

    #[instrument(skip(content))]
    fn check_file(id: u64, content: &mut Vec<u8>) -> u64 {
        read_blob(id, content);
        check_whitespace(id, content)
            ^ check_conflict_markers(id, content)
            ^ check_size(id, content)
            ^ lint(id, content)
    }

    #[instrument(skip(files))]
    fn check_files(files: &[u64]) -> u64 {
        let mut content = Vec::with_capacity(FILE_BYTES);
        files
            .iter()
            .fold(0, |h, &f| h ^ check_file(f, &mut content))
    }

    #[instrument]
    fn report(result: u64) {
        tracing::info!(key = "checked", value = FILES);
        std::hint::black_box(result);
    }

    #[instrument]
    fn run_hook() {
        let config = read_config();
        let files = list_staged(&config);
        let result = check_files(&files);
        report(result);
    }

    /// The hook process: the program's own fmt layer, the lifecycle's layer beside it
    /// (it installs nothing unless a target is enabled), and the layer `peer` names:
    /// `chrome` (tracing-chrome as such tools install it, unfiltered), `chrome-filtered`
    /// and `perfetto-filtered` (tracing-chrome, tracing-perfetto-file behind our filter),
    /// `perfetto` (unfiltered), `floor` (a layer that does nothing, filtered as ours is).
    pub fn child(peer: Option<&str>) -> ExitCode {
        let lifecycle = tracing_trace2::Trace2::from_env()
            .with_exe_version("bench")
            .lifecycle();
        let fmt = tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_filter(EnvFilter::new("warn,noisy_dep=error"));
        // What writes the peer's file out when dropped, after `finish`.
        let (peer, _flush) = peer_layer(peer);
        tracing_subscriber::registry()
            .with(fmt)
            .with(peer)
            .with(lifecycle.layer())
            .init();
        let trace2 = lifecycle.start();
        tracing_trace2::api::cmd_name("pre-commit");
        run_hook();
        trace2.finish(ExitCode::SUCCESS)
    }

    /// A layer written for the hook process; what flushes it when dropped.
    type Peer<S> = (
        Option<Box<dyn Layer<S> + Send + Sync>>,
        Option<Box<dyn std::any::Any>>,
    );

    /// The layer `peer` names (see [`child`]), boxed so that one subscriber type takes
    /// any of them.
    fn peer_layer<S>(peer: Option<&str>) -> Peer<S>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
        S: Send + Sync + 'static,
    {
        let out = |var: &str| PathBuf::from(std::env::var_os(var).expect(var));
        let chrome = || {
            tracing_chrome::ChromeLayerBuilder::new()
                .file(out("PER_PROCESS_CHROME"))
                .build()
        };
        let perfetto = || {
            let file = std::fs::File::create(out("PER_PROCESS_PERFETTO")).expect("the file");
            // As `peers` builds it: fields and call sites recorded, as our binary target
            // records them.
            tracing_perfetto_file::PerfettoLayer::builder(file)
                .with_debug_annotations()
                .with_source_locations()
                .build()
        };
        let ours = || tracing_trace2::Trace2Filter::new(tracing_trace2::Levels::default());
        fn boxed<S, L, G>(layer: L, guard: G) -> Peer<S>
        where
            S: tracing::Subscriber,
            L: Layer<S> + Send + Sync + 'static,
            G: 'static,
        {
            (Some(Box::new(layer)), Some(Box::new(guard)))
        }
        match peer {
            None => (None, None),
            Some("chrome") => {
                let (layer, guard) = chrome();
                boxed(layer, guard)
            }
            Some("chrome-filtered") => {
                let (layer, guard) = chrome();
                boxed(layer.with_filter(ours()), guard)
            }
            Some("perfetto") => {
                let (layer, guard) = perfetto();
                boxed(layer, guard)
            }
            Some("perfetto-filtered") => {
                let (layer, guard) = perfetto();
                boxed(layer.with_filter(ours()), guard)
            }
            Some("floor") => (Some(Box::new(super::floor::floor())), None),
            Some(other) => panic!("unknown hook configuration {other}"),
        }
    }
}

/// One configuration: how to start its process.
struct Config {
    name: &'static str,
    program: PathBuf,
    args: Vec<String>,
    cwd: PathBuf,
    env: Vec<(&'static str, PathBuf)>,
    /// Files the configuration writes, emptied before every round.
    writes: Option<PathBuf>,
}

impl Config {
    fn command(&self, dir: &Path) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args).current_dir(&self.cwd);
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy().into_owned();
            if key.starts_with("GIT_") || key.starts_with("TRACING_TRACE2") {
                cmd.env_remove(key);
            }
        }
        cmd.env("HOME", dir)
            .env("XDG_CONFIG_HOME", dir.join("xdg"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for (key, value) in &self.env {
            cmd.env(key, value);
        }
        cmd
    }

    fn clean(&self) {
        if let Some(path) = &self.writes {
            if self.env.iter().any(|(k, _)| *k == "TRACING_TRACE2_FLIGHT") {
                let _ = std::fs::remove_dir_all(path);
                let _ = std::fs::create_dir_all(path);
            } else {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// One run's measures.
#[derive(Clone, Copy, Default)]
struct Sample {
    wall: Duration,
    cpu: Duration,
    minflt: i64,
}

/// Runs the command to its end; its wall time, CPU time and page faults.
fn run(mut cmd: Command) -> Sample {
    let start = Instant::now();
    let child = cmd.spawn().expect("spawn");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: `rusage` is plain data that `wait4` fills; an all-zero value is valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet waited for (`Child` is dropped without a wait);
    // `status` and `usage` are valid for writes.
    let got = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = start.elapsed();
    assert_eq!(got, pid, "wait4: {}", std::io::Error::last_os_error());
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{cmd:?} failed: status {status}"
    );
    drop(child);
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    Sample {
        wall,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
        minflt: usage.ru_minflt,
    }
}

/// The system calls of one run of the command's process tree, from `strace -f -c`.
fn syscalls(cmd: &Command, dir: &Path) -> Option<u64> {
    let out = dir.join("strace.txt");
    let mut traced = Command::new("strace");
    traced
        .args(["-f", "-c", "-o"])
        .arg(&out)
        .arg(cmd.get_program());
    traced.args(cmd.get_args());
    if let Some(cwd) = cmd.get_current_dir() {
        traced.current_dir(cwd);
    }
    for (key, value) in cmd.get_envs() {
        match value {
            Some(value) => traced.env(key, value),
            None => traced.env_remove(key),
        };
    }
    let status = traced
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    if !status.success() {
        return None;
    }
    let text = std::fs::read_to_string(&out).ok()?;
    // The last line: `100.00 <seconds> <usecs/call> <calls> [<errors>] total`.
    let total = text
        .lines()
        .rev()
        .find(|l| l.trim_end().ends_with("total"))?;
    let fields: Vec<&str> = total.split_whitespace().collect();
    fields.get(3)?.parse().ok()
}

fn median<T: Copy + PartialOrd>(values: &mut [T]) -> T {
    values.sort_by(|a, b| a.partial_cmp(b).expect("comparable"));
    values[values.len() / 2]
}

/// Every configuration's samples, by round.
struct Results {
    /// `[config][round][run]`
    samples: Vec<Vec<Vec<Sample>>>,
}

impl Results {
    fn measure(configs: &[Config], dir: &Path, rounds: usize, runs: usize) -> Results {
        // One warm-up run each: the binaries and the repository in the page cache.
        for config in configs {
            config.clean();
            run(config.command(dir));
        }
        let mut samples = vec![Vec::with_capacity(rounds); configs.len()];
        for _ in 0..rounds {
            for (config, rounds) in configs.iter().zip(&mut samples) {
                config.clean();
                rounds.push(Vec::with_capacity(runs));
            }
            // Each run starts one configuration further on, so that every configuration
            // follows every other equally often: a process that follows git's (another
            // binary) starts colder than one that follows its own kind.
            for r in 0..runs {
                for c in (0..configs.len()).map(|i| (i + r) % configs.len()) {
                    if let Some(round) = samples[c].last_mut() {
                        round.push(run(configs[c].command(dir)));
                    }
                }
            }
        }
        Results { samples }
    }

    fn all(&self, c: usize) -> impl Iterator<Item = &Sample> {
        self.samples[c].iter().flatten()
    }

    /// The median of `measure` of each configuration in each round: `[config][round]`.
    fn round_medians(&self, measure: Measure) -> Vec<Vec<i64>> {
        self.samples
            .iter()
            .map(|rounds| {
                rounds
                    .iter()
                    .map(|round| median(&mut round.iter().map(measure).collect::<Vec<_>>()))
                    .collect()
            })
            .collect()
    }

    /// [`RESAMPLES`] bootstrap replicates of [`Results::round_medians`], each
    /// `[config][round]`: the rounds drawn with replacement, then within each drawn round
    /// each configuration's runs drawn with replacement (two stages, as for clustered
    /// data). A drawn round stays one round for every configuration, so the per-round
    /// differences and ratios keep their pairing.
    fn resampled_round_medians(&self, measure: Measure) -> Vec<Vec<Vec<i64>>> {
        let rounds = self.samples.first().map_or(0, Vec::len);
        let mut rng = SplitMix64(0x7472_6163_6532_7070);
        let mut scratch = Vec::new();
        (0..RESAMPLES)
            .map(|_| {
                let drawn: Vec<usize> = (0..rounds).map(|_| rng.below(rounds)).collect();
                self.samples
                    .iter()
                    .map(|by_round| {
                        drawn
                            .iter()
                            .map(|&r| {
                                let round = &by_round[r];
                                scratch.clear();
                                scratch.extend(
                                    (0..round.len())
                                        .map(|_| measure(&round[rng.below(round.len())])),
                                );
                                median(&mut scratch)
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect()
    }

    fn wall_us(&self, c: usize) -> f64 {
        median(&mut self.round_medians(wall_ns)[c]) as f64 / 1e3
    }

    fn cpu_us(&self, c: usize) -> f64 {
        median(&mut self.all(c).map(cpu_ns).collect::<Vec<_>>()) as f64 / 1e3
    }

    fn minflt(&self, c: usize) -> i64 {
        median(&mut self.all(c).map(|s| s.minflt).collect::<Vec<_>>())
    }
}

/// One process's measure, in ns.
type Measure = fn(&Sample) -> i64;

fn wall_ns(s: &Sample) -> i64 {
    s.wall.as_nanos() as i64
}

fn cpu_ns(s: &Sample) -> i64 {
    s.cpu.as_nanos() as i64
}

/// Bootstrap replicates behind each 95 % interval.
const RESAMPLES: usize = 2000;

/// Ratios are held in millionths, so that their replicates go through the same integer
/// quantile as times.
const MILLIONTHS: f64 = 1e6;

/// SplitMix64: a fixed-seed generator for the resampling, so that the same samples give
/// the same intervals (statistical quality is ample for drawing indices).
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (multiply-shift; the bias is below 2^-50 for these `n`).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }
}

/// Over rounds, the median of the differences `m[c][r] − m[base][r]`, in ns.
fn added_ns(m: &[Vec<i64>], c: usize, base: usize) -> i64 {
    median(
        &mut m[c]
            .iter()
            .zip(&m[base])
            .map(|(a, b)| a - b)
            .collect::<Vec<_>>(),
    )
}

/// Over rounds, the median of the ratios `m[c][r] / m[base][r]`, in millionths.
fn ratio_millionths(m: &[Vec<i64>], c: usize, base: usize) -> i64 {
    median(
        &mut m[c]
            .iter()
            .zip(&m[base])
            .map(|(&a, &b)| (a as f64 / b as f64 * MILLIONTHS).round() as i64)
            .collect::<Vec<_>>(),
    )
}

/// Ratios searched for the ends of a ratio's interval: beyond them an end is unbounded.
const RATIO_RANGE: f64 = 100.0;

/// The 95 % interval of the ratio `ours / git` from replicates of `(ours, git)`, by
/// inverting the percentile interval of `ours − ρ·git` (Fieller's construction with the
/// bootstrap in place of the normal law): `ρ` is inside when 0 lies within the 2.5th to
/// 97.5th percentile of `ours − ρ·git` over the replicates. It stays sound when `git`
/// comes near zero in some replicates, where the percentiles of the ratio itself do not
/// (an end is then unbounded, `None`), and the interval holds 1 exactly when the
/// difference's percentile interval holds 0.
fn ratio_interval(pairs: &[(i64, i64)]) -> (Option<f64>, Option<f64>) {
    // The `q` percentile of `ours − ρ·git`, in ns.
    let percentile = |rho: f64, q: f64| {
        let mut values: Vec<i64> = pairs
            .iter()
            .map(|&(o, g)| (o as f64 - rho * g as f64).round() as i64)
            .collect();
        values.sort_unstable();
        quantile(&values, q).expect("replicates")
    };
    // Where the percentile falls through 0 as `ρ` grows (it falls when `git` > 0, as in
    // nearly every replicate); `None` when it does not within the range searched.
    let crossing = |q: f64| {
        let (mut low, mut high) = (-RATIO_RANGE, RATIO_RANGE);
        if percentile(low, q) <= 0.0 || percentile(high, q) > 0.0 {
            return None;
        }
        for _ in 0..60 {
            let mid = (low + high) / 2.0;
            if percentile(mid, q) > 0.0 {
                low = mid;
            } else {
                high = mid;
            }
        }
        Some((low + high) / 2.0)
    };
    (crossing(0.025), crossing(0.975))
}

/// The 95 % percentile interval of the replicates of a statistic (the 2.5th and 97.5th
/// percentiles, by the stats module of `trace2 compare`).
fn interval(mut replicates: Vec<i64>) -> (f64, f64) {
    replicates.sort_unstable();
    let at = |q| quantile(&replicates, q).expect("replicates");
    (at(0.025), at(0.975))
}

/// `estimate [low, high]`, each value divided by `scale` and shown with `decimals`.
fn with_interval(estimate: i64, (low, high): (f64, f64), scale: f64, decimals: usize) -> String {
    format!(
        "{:.decimals$} [{:.decimals$}, {:.decimals$}]",
        estimate as f64 / scale,
        low / scale,
        high / scale
    )
}

fn lifecycle_table(dir: &Path, repo: &Path, rounds: usize, runs: usize, strace: bool) {
    let exe = std::env::current_exe().expect("own path");
    let ours = |name, env: Option<(&'static str, PathBuf)>| Config {
        name,
        program: exe.clone(),
        args: vec!["--child".into(), "lifecycle".into()],
        cwd: repo.to_path_buf(),
        writes: env.as_ref().map(|(_, p)| p.clone()),
        env: env.into_iter().collect(),
    };
    let git = |name, env: Option<(&'static str, PathBuf)>| Config {
        name,
        program: "git".into(),
        args: vec!["rev-parse".into(), "HEAD".into()],
        cwd: repo.to_path_buf(),
        writes: env.as_ref().map(|(_, p)| p.clone()),
        env: env.into_iter().collect(),
    };
    let configs = [
        ours("untraced", None),
        ours("Event", Some(("GIT_TRACE2_EVENT", dir.join("life.event")))),
        ours("Perf", Some(("GIT_TRACE2_PERF", dir.join("life.perf")))),
        ours("Normal", Some(("GIT_TRACE2", dir.join("life.normal")))),
        ours(
            "binary",
            Some(("TRACING_TRACE2_BINARY", dir.join("life.t2b"))),
        ),
        ours(
            "flight",
            Some(("TRACING_TRACE2_FLIGHT", dir.join("flight"))),
        ),
        git("git rev-parse HEAD", None),
        git(
            "git rev-parse HEAD, Event",
            Some(("GIT_TRACE2_EVENT", dir.join("git.event"))),
        ),
    ];
    let results = Results::measure(&configs, dir, rounds, runs);
    let (untraced, git_plain, git_event) = (0, 6, 7);
    let observed = results.round_medians(wall_ns);
    let replicates = results.resampled_round_medians(wall_ns);
    let git_added = added_ns(&observed, git_event, git_plain);
    println!(
        "\n## Per process: the lifecycle and three lines ({rounds} interleaved rounds × {runs} runs)\n"
    );
    println!(
        "Added µs: median over rounds of (median − untraced median); [95 % interval], two-stage bootstrap \
         ({RESAMPLES} resamples of rounds, then of runs within each round).\n"
    );
    println!(
        "| configuration | µs per process | added µs | − git's Event added, µs | ÷ git's Event added | page faults | CPU µs |{}",
        if strace { " system calls |" } else { "" }
    );
    println!(
        "|---|---:|---:|---:|---:|---:|---:|{}",
        if strace { "---:|" } else { "" }
    );
    for (c, config) in configs.iter().enumerate() {
        let base = if c >= git_plain { git_plain } else { untraced };
        let (added, minus_git, over_git) = if c == base {
            ("-".to_owned(), "-".to_owned(), "-".to_owned())
        } else {
            let ours = added_ns(&observed, c, base);
            let added = with_interval(
                ours,
                interval(replicates.iter().map(|m| added_ns(m, c, base)).collect()),
                1e3,
                0,
            );
            if c == git_event {
                (added, "-".to_owned(), "-".to_owned())
            } else {
                // Both added times from the same replicate: the interval of the
                // difference and of the ratio carries their covariance.
                let pairs: Vec<(i64, i64)> = replicates
                    .iter()
                    .map(|m| (added_ns(m, c, base), added_ns(m, git_event, git_plain)))
                    .collect();
                let minus = with_interval(
                    ours - git_added,
                    interval(pairs.iter().map(|(o, g)| o - g).collect()),
                    1e3,
                    0,
                );
                let estimate = if git_added > 0 {
                    format!("{:.2}", ours as f64 / git_added as f64)
                } else {
                    "n/a".to_owned()
                };
                let (low, high) = ratio_interval(&pairs);
                let end = |e: Option<f64>| {
                    e.map_or_else(|| "unbounded".to_owned(), |e| format!("{e:.2}"))
                };
                // Both ends open: git's added time is not clear of zero, and no ratio
                // can be ruled out (Fieller's set is then the whole line or two rays).
                let over = if low.is_none() && high.is_none() {
                    format!("{estimate} [unbounded]")
                } else {
                    format!("{estimate} [{}, {}]", end(low), end(high))
                };
                (added, minus, over)
            }
        };
        let calls = syscall_cell(config, dir, strace);
        println!(
            "| {} | {:.0} | {added} | {minus_git} | {over_git} | {} | {:.0} |{calls}",
            config.name,
            results.wall_us(c),
            results.minflt(c),
            results.cpu_us(c),
        );
    }
}

/// The system-call column's cell: one `strace -f -c` run of the configuration, when asked.
fn syscall_cell(config: &Config, dir: &Path, strace: bool) -> String {
    if !strace {
        return String::new();
    }
    config.clean();
    let calls =
        syscalls(&config.command(dir), dir).map_or_else(|| "?".to_owned(), |n| n.to_string());
    format!(" {calls} |")
}

fn hook_table(dir: &Path, rounds: usize, runs: usize, strace: bool) {
    let exe = std::env::current_exe().expect("own path");
    let hook = |name, env: Vec<(&'static str, PathBuf)>, peer: Option<&str>| Config {
        name,
        program: exe.clone(),
        args: ["--child", "hook"]
            .into_iter()
            .chain(peer)
            .map(String::from)
            .collect(),
        cwd: dir.to_path_buf(),
        writes: env.first().map(|(_, p)| p.clone()),
        env,
    };
    let configs = [
        hook("untraced (own fmt layer)", vec![], None),
        hook("registry floor", vec![], Some("floor")),
        hook(
            "Event, lifecycle only (no spans, no events)",
            vec![
                ("GIT_TRACE2_EVENT", dir.join("hook-life.event")),
                ("TRACING_TRACE2_SPAN_LEVEL", "off".into()),
                ("TRACING_TRACE2_EVENT_LEVEL", "off".into()),
            ],
            None,
        ),
        hook(
            "Event",
            vec![("GIT_TRACE2_EVENT", dir.join("hook.event"))],
            None,
        ),
        hook(
            "binary",
            vec![("TRACING_TRACE2_BINARY", dir.join("hook.t2b"))],
            None,
        ),
        hook(
            "flight",
            vec![("TRACING_TRACE2_FLIGHT", dir.join("hook-flight"))],
            None,
        ),
        hook(
            "tracing-perfetto-file, our filter",
            vec![("PER_PROCESS_PERFETTO", dir.join("hook-filtered.pftrace"))],
            Some("perfetto-filtered"),
        ),
        hook(
            "tracing-perfetto-file",
            vec![("PER_PROCESS_PERFETTO", dir.join("hook.pftrace"))],
            Some("perfetto"),
        ),
        hook(
            "tracing-chrome, our filter",
            vec![("PER_PROCESS_CHROME", dir.join("hook-filtered.json"))],
            Some("chrome-filtered"),
        ),
        hook(
            "tracing-chrome",
            vec![("PER_PROCESS_CHROME", dir.join("hook.json"))],
            Some("chrome"),
        ),
    ];
    let results = Results::measure(&configs, dir, rounds, runs);
    let walls = results.round_medians(wall_ns);
    let cpus = results.round_medians(cpu_ns);
    let wall_replicates = results.resampled_round_medians(wall_ns);
    let cpu_replicates = results.resampled_round_medians(cpu_ns);
    println!("\n## Hook-shaped process ({rounds} interleaved rounds × {runs} runs)\n");
    println!(
        "× untraced: median over rounds of (median ÷ untraced median); [95 % interval], two-stage bootstrap \
         ({RESAMPLES} resamples of rounds, then of runs within each round).\n"
    );
    println!(
        "| configuration | µs per process | × untraced | page faults | CPU µs | CPU × untraced |{}",
        if strace { " system calls |" } else { "" }
    );
    println!(
        "|---|---:|---:|---:|---:|---:|{}",
        if strace { "---:|" } else { "" }
    );
    let ratio = |observed: &[Vec<i64>], replicates: &[Vec<Vec<i64>>], c: usize| {
        if c == 0 {
            return "1".to_owned();
        }
        with_interval(
            ratio_millionths(observed, c, 0),
            interval(
                replicates
                    .iter()
                    .map(|m| ratio_millionths(m, c, 0))
                    .collect(),
            ),
            MILLIONTHS,
            3,
        )
    };
    for (c, config) in configs.iter().enumerate() {
        let calls = syscall_cell(config, dir, strace);
        println!(
            "| {} | {:.0} | {} | {} | {:.0} | {} |{calls}",
            config.name,
            results.wall_us(c),
            ratio(&walls, &wall_replicates, c),
            results.minflt(c),
            results.cpu_us(c),
            ratio(&cpus, &cpu_replicates, c),
        );
    }
}

/// Builds (once) a repository with one commit for `git rev-parse HEAD`.
fn build_repo(dir: &Path) -> std::io::Result<PathBuf> {
    let repo = dir.join("repo");
    let done = dir.join("built");
    std::fs::create_dir_all(dir.join("xdg"))?;
    if done.exists() {
        return Ok(repo);
    }
    std::fs::create_dir_all(&repo)?;
    let git = |args: &[&str]| -> std::io::Result<()> {
        let status = Command::new("git")
            .args([
                "-c",
                "user.name=bench",
                "-c",
                "user.email=bench@example.invalid",
            ])
            .args(["-c", "init.defaultBranch=main"])
            .args(args)
            .current_dir(&repo)
            .env("HOME", dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?;
        if status.success() {
            Ok(())
        } else {
            Err(std::io::Error::other(format!("git {args:?} failed")))
        }
    };
    git(&["init", "-q", "."])?;
    std::fs::write(repo.join("file"), "content\n")?;
    git(&["add", "."])?;
    git(&["commit", "-qm", "one"])?;
    std::fs::write(done, "")?;
    Ok(repo)
}
