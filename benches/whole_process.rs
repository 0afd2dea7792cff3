//! The ratio goals of `benches/peers.rs`, measured whole: one process per measurement.
//!
//! `peers` times a configuration inside one long-lived process, in 12 ms slices
//! interleaved with every other configuration. A program pays differently: it starts,
//! uses each path for the first time, grows its buffers, and exits (the last batch is
//! written then). This bench runs each configuration of `peers` (the same workloads,
//! the same set-up code, see `peers::configs`) in a process of its own, that installs
//! its subscriber as the global default (as a program does), runs N iterations of the
//! workload, flushes what the configuration still buffers, and exits.
//!
//! Method. Each (workload, configuration) runs at three sizes: no iteration, a small
//! run and a big run ([`SMALL_LINES`] and [`BIG_LINES`] Trace2 lines). [`ROUNDS`]
//! rounds, each running every configuration at every size, one process at a time. The
//! per-line figure of the goals is `(time(big) − time(small)) / (big − small lines)`: the
//! process's start, its set-up and everything done once (first use of each call site and
//! path, the first buffers) are in both runs and drop out. The same goals are printed a
//! second time on `(time(small) − time(0)) / small lines`: a process's first lines, first
//! use included, start-up excluded. Two clocks are read for every process:
//!
//! - `process`: wall time from `spawn` to `wait` in this parent (what `peers` reports in
//!   the goal table for every configuration but the background writers);
//! - `traced`: the wall time the traced thread(s) spent in the workload, read by the
//!   child (for `-bg` and `-df`, whose goal is about the traced thread; the writer
//!   thread's own work goes on after it);
//!
//! (The children's CPU time is not read: `getrusage` needs `unsafe`, and
//! `/proc/<pid>/stat` counts in 10 ms ticks; use `perf stat` on one child for it.)
//!
//! Besides `peers`' configurations (our layer bare on the Registry), three run our
//! targets as a program installs them: `Trace2::from_env().layer_with_guard()` (the layer
//! behind its per-layer level filter, in an `OptionalLayer`), the target chosen by the
//! environment (`facade-event/file`, `facade-event-df/file` with the background writer,
//! `facade-binary/file`), held to the same goals.
//!
//! Ratios are taken within a round and the median over rounds is shown, as in `peers`.
//!
//! Run with `cargo bench --bench whole_process` (about a minute and a half on two cores); a
//! filter argument keeps the matching `workload/configuration` ids (`-- regions/`,
//! `-- 'binary|perfetto|floor'`). Without `--bench` (`cargo test --benches`) it does
//! nothing. Files go to `target/tmp/whole_process`.

#[allow(dead_code, unused_imports)]
#[path = "peers.rs"]
mod peers;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use peers::support::{criterion_filter_matches, empty, median, on_threads};
use peers::{GOALS, Runner, Workload, configs};
use tracing::dispatcher;

/// Interleaved rounds.
const ROUNDS: usize = 5;
/// Trace2 lines of the small run.
const SMALL_LINES: u64 = 10_000;
/// Trace2 lines of the big run.
const BIG_LINES: u64 = 110_000;
/// The three sizes each configuration runs at, in Trace2 lines.
const SIZES: [u64; 3] = [0, SMALL_LINES, BIG_LINES];

/// The two clocks read for one process, in ns.
#[derive(Clone, Copy, Default)]
struct Times {
    process: f64,
    traced: f64,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--child") {
        child(&args[2..]);
        return;
    }
    if !args.iter().any(|a| a == "--bench") {
        // `cargo test --benches`: spawning hundreds of processes is not a test.
        return;
    }
    parent();
}

/// The configurations the goals name, and the two without a target.
fn names() -> Vec<&'static str> {
    let mut names = vec!["none", "registry+noop", "ours-off"];
    for (ours, floor, base, _) in GOALS {
        for name in [Some(ours), Some(floor), base].into_iter().flatten() {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names.extend(FACADE.iter().map(|(name, _)| *name));
    names
}

/// Our targets as a program installs them (`Trace2::from_env().layer_with_guard()`,
/// the layer behind its per-layer level filter in an `OptionalLayer`), turned on by
/// the environment the parent sets: (configuration, file name written to).
/// `…-plain`: `unfiltered_layer_with_guard()` under its own filter as the global filter
/// instead, what `Trace2::init` installs (ours the only layer: no per-layer filter).
const FACADE: [(&str, &str); 5] = [
    ("facade-event/file", "facade-event"),
    ("facade-event-df/file", "facade-event-df"),
    ("facade-binary/file", "facade-binary.t2b"),
    ("facade-event-plain/file", "facade-event-plain"),
    ("facade-binary-plain/file", "facade-binary-plain.t2b"),
];

/// The goals of `peers` that the facade's configurations are held to as well.
const FACADE_GOALS: [(&str, &str, Option<&str>, f64); 7] = [
    ("facade-event/file", "registry+write/file", None, 1.25),
    ("facade-event-df/file", "floor-64k/file", None, 3.0),
    (
        "facade-binary/file",
        "floor-64k/file",
        Some("registry+noop"),
        1.5,
    ),
    ("facade-binary/file", "perfetto/file", None, 0.8),
    ("facade-event-plain/file", "registry+write/file", None, 1.25),
    (
        "facade-binary-plain/file",
        "floor-64k/file",
        Some("registry+noop"),
        1.5,
    ),
    ("facade-binary-plain/file", "perfetto/file", None, 0.8),
];

/// The environment that turns a facade configuration's target on.
fn facade_env(name: &str, dir: &Path) -> Vec<(&'static str, PathBuf)> {
    let Some((_, file)) = FACADE.iter().find(|(n, _)| *n == name) else {
        return Vec::new();
    };
    let path = dir.join(file);
    if name.contains("binary") {
        vec![(tracing_trace2_binary::ENV_NAME, path)]
    } else {
        // All three region levels written, as `peers` sets it.
        vec![
            ("GIT_TRACE2_EVENT", path),
            ("GIT_TRACE2_EVENT_NESTING", PathBuf::from("10")),
        ]
    }
}

/// A facade configuration's process: the layer from the environment, the workload,
/// and the guard dropped (the background writer flushed and joined); the binary
/// target's last batch is written by its exit handler.
fn facade_child(workload: Workload, name: &str, iters: u64) -> std::time::Duration {
    use tracing_subscriber::layer::SubscriberExt;
    let mut trace2 = tracing_trace2::Trace2::from_env();
    if name.contains("-df") {
        trace2 = trace2.with_background_writer(tracing_trace2::BackgroundOptions::new());
    }
    let (dispatch, guard) = if name.contains("-plain") {
        let (layer, guard) = trace2.unfiltered_layer_with_guard();
        let layer = layer.expect("the environment enables a target");
        let subscriber = tracing_subscriber::registry()
            .with(layer.filter())
            .with(layer);
        (dispatcher::Dispatch::new(subscriber), guard)
    } else {
        let (layer, guard) = trace2.layer_with_guard();
        let subscriber = tracing_subscriber::registry().with(layer);
        (dispatcher::Dispatch::new(subscriber), guard)
    };
    dispatcher::set_global_default(dispatch).expect("first global default");
    let traced = on_threads(workload.threads(), |barrier| {
        if let Some(barrier) = barrier {
            barrier.wait();
        }
        let start = Instant::now();
        workload.run(iters);
        start.elapsed()
    });
    drop(guard);
    traced
}

fn workload_named(name: &str) -> Workload {
    Workload::ALL
        .into_iter()
        .find(|w| w.name() == name)
        .unwrap_or_else(|| panic!("no workload {name}"))
}

/// One process: set up `name` as `peers` does, install it, run `iters` iterations,
/// flush, print the set-up and traced times in ns.
fn child(args: &[String]) {
    let [workload, name, iters, dir] = args else {
        panic!("--child <workload> <configuration> <iterations> <dir>");
    };
    let workload = workload_named(workload);
    let iters: u64 = iters.parse().expect("iterations");
    let dir = PathBuf::from(dir);
    if name.starts_with("facade-") {
        println!("{}", facade_child(workload, name, iters).as_nanos());
        return;
    }
    let (_, make) = configs(workload, &dir)
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no configuration {name}"));
    let bench = make();
    if let Some(file) = &bench.file {
        empty(file);
    }
    if let Runner::Traced(Some(dispatch)) = &bench.runner {
        dispatcher::set_global_default(dispatch.clone()).expect("first global default");
    }
    let traced = on_threads(workload.threads(), |barrier| match &bench.runner {
        Runner::Traced(_) => {
            if let Some(barrier) = barrier {
                barrier.wait();
            }
            let start = Instant::now();
            workload.run(iters);
            start.elapsed()
        }
        _ => bench.on_this_thread(workload, iters, barrier),
    });
    // What the process does at exit: write out what is still buffered.
    if let Some(layer) = &bench.layer {
        layer.flush();
    }
    bench.flush_perfetto();
    // tracing-chrome's guard joins its writer thread when dropped.
    drop(bench);
    println!("{}", traced.as_nanos());
}

/// Empties every file the configurations write, so that no process pays for
/// truncating what an earlier one wrote (freeing a big file's cached pages takes
/// milliseconds).
fn empty_all(dir: &Path) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_type().is_ok_and(|t| t.is_file()) {
            empty(&entry.path());
        }
    }
}

fn spawn(exe: &Path, workload: Workload, name: &str, iters: u64, dir: &Path) -> Times {
    empty_all(dir);
    let start = Instant::now();
    let out = Command::new(exe)
        .args(["--child", workload.name(), name, &iters.to_string()])
        .arg(dir)
        .envs(facade_env(name, dir))
        .stderr(Stdio::inherit())
        .output()
        .expect("child process");
    let process = start.elapsed();
    assert!(out.status.success(), "{}/{name} failed", workload.name());
    let traced: f64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("child's traced time");
    Times {
        process: process.as_nanos() as f64,
        traced,
    }
}

/// Results: per (workload, configuration), per round, the times at each size.
type Rounds = BTreeMap<(Workload, &'static str), Vec<[Times; 3]>>;

fn parent() {
    let exe = std::env::current_exe().expect("own path");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("whole_process");
    std::fs::create_dir_all(&dir).expect("bench directory");
    let mut runs: Vec<(Workload, &'static str)> = Vec::new();
    for workload in Workload::ALL {
        for name in names() {
            if criterion_filter_matches(&format!("{}/{name}", workload.name())) {
                runs.push((workload, name));
            }
        }
    }
    let mut rounds: Rounds = BTreeMap::new();
    let began = Instant::now();
    for round in 0..ROUNDS {
        for &(workload, name) in &runs {
            let mut times = [Times::default(); 3];
            // Sizes in a different order each round, so that no size always follows
            // the same one.
            for k in 0..SIZES.len() {
                let i = (k + round) % SIZES.len();
                let iters = SIZES[i].div_ceil(workload.lines());
                times[i] = spawn(&exe, workload, name, iters, &dir);
            }
            rounds.entry((workload, name)).or_default().push(times);
        }
        eprintln!(
            "whole_process: round {} of {ROUNDS} done ({:.0} s)",
            round + 1,
            began.elapsed().as_secs_f64()
        );
    }
    empty_all(&dir);
    print_tables(&rounds);
}

/// Which clock a configuration's goal reads: the traced thread for the background
/// writers, the whole process otherwise.
fn goal_clock(name: &str) -> fn(&Times) -> f64 {
    if name.contains("-bg") || name.contains("-df") {
        |t| t.traced
    } else {
        |t| t.process
    }
}

/// Trace2 lines a run of `size` makes (whole iterations).
fn lines_of(workload: Workload, size: u64) -> u64 {
    size.div_ceil(workload.lines()) * workload.lines()
}

/// ns per Trace2 line in each round between the runs of sizes `SIZES[from]` and
/// `SIZES[to]`, on `clock`.
fn per_line(
    rounds: &Rounds,
    workload: Workload,
    name: &str,
    (from, to): (usize, usize),
    clock: fn(&Times) -> f64,
) -> Option<Vec<f64>> {
    let runs = rounds.get(&(workload, name))?;
    let between = (lines_of(workload, SIZES[to]) - lines_of(workload, SIZES[from])) as f64;
    Some(
        runs.iter()
            .map(|t| (clock(&t[to]) - clock(&t[from])) / between)
            .collect(),
    )
}

/// From the small run to the big one: the per-line figure of the goals.
const STEADY: (usize, usize) = (1, 2);
/// From the empty run to the small one: the first lines of a process, first use of
/// every path included.
const FIRST: (usize, usize) = (0, 1);

fn ratio(a: &[f64], b: &[f64]) -> Option<f64> {
    median(&a.iter().zip(b).map(|(a, b)| a / b).collect::<Vec<_>>())
}

fn print_tables(rounds: &Rounds) {
    let workloads: Vec<Workload> = Workload::ALL
        .into_iter()
        .filter(|w| rounds.keys().any(|(rw, _)| rw == w))
        .collect();
    let cell = |v: Option<f64>, digits: usize| v.map_or("-".into(), |v| format!("{v:.digits$}"));
    println!("\n## Whole process: ns per Trace2 line (median of {ROUNDS} rounds)\n");
    println!(
        "`process`: wall time of the process, from the {SMALL_LINES}-line run to the {BIG_LINES}-line run \
         ((big − small) / lines between); `traced`: the same on the traced thread's clock; \
         `first`: the process's wall time from the empty run to the {SMALL_LINES}-line run (the \
         first lines of a process, first use included); `start`: ms of the empty run \
         (start, set-up, exit).\n"
    );
    print!("| configuration |");
    for w in &workloads {
        let n = w.name();
        print!(" {n} process | {n} traced | {n} first | {n} start ms |");
    }
    println!();
    println!("|---|{}", "---:|".repeat(4 * workloads.len()));
    for name in names() {
        if !workloads.iter().any(|&w| rounds.contains_key(&(w, name))) {
            continue;
        }
        print!("| {name} |");
        for &w in &workloads {
            let m = |span, clock: fn(&Times) -> f64| {
                cell(
                    per_line(rounds, w, name, span, clock).and_then(|v| median(&v)),
                    0,
                )
            };
            let start = rounds
                .get(&(w, name))
                .and_then(|r| median(&r.iter().map(|t| t[0].process / 1e6).collect::<Vec<_>>()));
            print!(
                " {} | {} | {} | {} |",
                m(STEADY, |t| t.process),
                m(STEADY, |t| t.traced),
                m(FIRST, |t| t.process),
                cell(start, 2),
            );
        }
        println!();
    }
    print_goals(
        rounds,
        &workloads,
        STEADY,
        "Goals, measured whole (from the small run to the big one)",
    );
    print_goals(
        rounds,
        &workloads,
        FIRST,
        "The same goals on a process's first lines (from the empty run to the small one)",
    );
}

/// The goals of `peers`, each ratio the median over rounds of the ratio within a round.
fn print_goals(rounds: &Rounds, workloads: &[Workload], span: (usize, usize), title: &str) {
    println!("\n## {title}\n");
    println!("Medians of per-round ratios; ✔ met, ✘ missed. `-bg`/`-df`: the traced thread's");
    println!("time; every other configuration: the process's.\n");
    print!("| ours | ÷ | goal |");
    for w in workloads {
        print!(" {} |", w.name());
    }
    println!();
    println!("|---|---|---:|{}", "---:|".repeat(workloads.len()));
    for (ours, floor, base, goal) in GOALS.into_iter().chain(FACADE_GOALS) {
        let denominator = base.map_or(floor.to_owned(), |b| format!("{floor} + {b}"));
        print!("| {ours} | {denominator} | ≤ {goal} |");
        for &w in workloads {
            let a = per_line(rounds, w, ours, span, goal_clock(ours));
            let f = per_line(rounds, w, floor, span, goal_clock(floor));
            let b = base.map(|b| per_line(rounds, w, b, span, goal_clock(b)));
            let r = match (a, f, b) {
                (Some(a), Some(f), None) => ratio(&a, &f),
                (Some(a), Some(f), Some(Some(b))) => {
                    let sum: Vec<f64> = f.iter().zip(&b).map(|(f, b)| f + b).collect();
                    ratio(&a, &sum)
                }
                _ => None,
            };
            match r {
                Some(r) => print!(" {r:.2} {} |", if r <= goal { "✔" } else { "✘" }),
                None => print!(" - |"),
            }
        }
        println!();
    }
}
