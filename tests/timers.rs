//! Stopwatch timers, counters and the thread helpers, end to end.
//!
//! This test binary has its own `main` (no libtest harness) because Trace2 names the
//! process's main thread `main` and the main thread's totals belong to the process exit:
//! each scenario runs in a fresh child process (this same binary, with
//! `TRACE2_TIMERS_SCENARIO` set) whose main thread does the work with the `GIT_TRACE2*`
//! variables pointing at files, then ends the process as git does (`exit`, the main
//! thread's totals, the process totals, `atexit`).
//!
//! * `tt-timer`, `tt-thread-timer`, `tt-counter`, `tt-thread-counter`: the behaviour of
//!   git's `test-tool trace2 100timer`, `101timer`, `200counter` and `201counter` with the
//!   captures' arguments, compared with the captures in all three formats after masking
//!   times, elapsed numbers, timer values, file:line and sids. Lines of concurrent
//!   threads are compared thread by thread, since their interleaving is up to the OS.
//!   The lifecycle lines before the work (`version`, `start`, `cmd_ancestry`) are taken
//!   from the capture: they are not what is tested here.
//! * `four-threads`: four helper threads and the main thread use timers and counters;
//!   the Event stream's per-thread and total lines must add up and follow spec 10.2.
//! * `rayon`: a rayon pool announced through `start_handler`/`exit_handler`.
//! * `hot-path`: (in this process) no allocation on start/stop/add once a thread has
//!   used a timer or counter, counted by this binary's global allocator.

#[path = "support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use serde_json::Value;
use tracing_subscriber::prelude::*;
use tracing_trace2::api;
use tracing_trace2::core::timers::{self, Counter, PerThread, Timer};
use tracing_trace2::thread::{self as t2thread, ThreadGuard};
use tracing_trace2_event::read_line;
use tracing_trace2_record::Trace2Event;

use support::first_difference;
use support::process;
use support::runner::{Check, run_checks};
use tracing_trace2_test_support::alloc::{CountingAlloc, allocations};

// === allocation counting (this thread's allocations only) ===

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

// === the timers and counters of git's test-tool, and of the other scenarios ===

static TEST1: Timer = Timer::new("test", "test1", PerThread::No);
static TEST2: Timer = Timer::new("test", "test2", PerThread::Yes);
static COUNT1: Counter = Counter::new("test", "test1", PerThread::No);
static COUNT2: Counter = Counter::new("test", "test2", PerThread::Yes);

static PARSE: Timer = Timer::new("index", "parse", PerThread::Yes);
static LOOKUP: Timer = Timer::new("index", "lookup", PerThread::No);
static ENTRIES: Counter = Counter::new("index", "entries", PerThread::Yes);
static BYTES: Counter = Counter::new("index", "bytes", PerThread::No);
static UNUSED: Counter = Counter::new("index", "unused", PerThread::Yes);

fn main() -> ExitCode {
    if let Ok(scenario) = std::env::var("TRACE2_TIMERS_SCENARIO") {
        drive(&scenario);
        return ExitCode::SUCCESS;
    }
    let tests: &[Check] = &[
        ("hot-path", hot_path_does_not_allocate),
        ("tt-timer", || replay("tt-timer", &["100timer", "3", "20"])),
        ("tt-thread-timer", || {
            replay("tt-thread-timer", &["101timer", "2", "10", "3"])
        }),
        ("tt-counter", || {
            replay("tt-counter", &["200counter", "1", "2", "39"])
        }),
        ("tt-thread-counter", || {
            replay("tt-thread-counter", &["201counter", "5", "7", "3"])
        }),
        ("four-threads", four_threads),
        ("rayon", rayon_pool),
    ];
    run_checks("timers", tests)
}

// === the driver (child process) ===

fn drive(scenario: &str) {
    let exe = std::env::var("TRACE2_TIMERS_EXE").unwrap_or_else(|_| "timers-test".into());
    tracing_subscriber::registry()
        .with(
            tracing_trace2::Trace2::from_env()
                .with_exe_version(exe)
                .layer(),
        )
        .init();
    let list = |var: &str| -> Vec<String> {
        std::env::var(var)
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or_default()
    };
    api::start(&list("TRACE2_TIMERS_ARGV"));
    let ancestry = list("TRACE2_TIMERS_ANCESTRY");
    if !ancestry.is_empty() {
        api::cmd_ancestry(&ancestry);
    }
    api::cmd_name("trace2");
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize| -> u64 { args[i].parse().expect("a number argument") };
    match scenario {
        "100timer" => {
            // <count> <ms>: one thread, the non-per-thread timer.
            for _ in 0..num(0) {
                TEST1.start();
                std::thread::sleep(Duration::from_millis(num(1)));
                TEST1.stop();
            }
        }
        "101timer" => {
            // <count> <ms> <threads>: each thread times <count> sleeps on the per-thread timer.
            let (count, ms) = (num(0), num(1));
            let workers: Vec<_> = (0..num(2))
                .map(|_| {
                    t2thread::spawn("ut_101", move || {
                        for _ in 0..count {
                            let _running = TEST2.scope();
                            std::thread::sleep(Duration::from_millis(ms));
                        }
                    })
                    .expect("spawn")
                })
                .collect();
            for w in workers {
                w.join().expect("worker");
            }
        }
        "200counter" => {
            for i in 0..args.len() {
                COUNT1.add(num(i));
            }
        }
        "201counter" => {
            // <v1> <v2> <threads>: each thread adds both values to the per-thread counter.
            // These threads announce themselves with a guard rather than the spawn helper.
            let (v1, v2) = (num(0), num(1));
            let workers: Vec<_> = (0..num(2))
                .map(|_| {
                    std::thread::spawn(move || {
                        let _trace2 = ThreadGuard::start("ut_201");
                        COUNT2.add(v1);
                        COUNT2.add(v2);
                    })
                })
                .collect();
            for w in workers {
                w.join().expect("worker");
            }
        }
        "four-threads" => four_threads_work(),
        "rayon" => rayon_work(),
        other => panic!("unknown scenario {other}"),
    }
    // The end of a process, as spec 11.1 and 10.2 order it.
    api::exit(0);
    timers::emit_thread_totals();
    timers::emit_process_totals();
    api::atexit();
}

/// Thread `k` (1..=4): `k + 1` parse intervals (each with a nested start inside), `k`
/// lookup intervals, entries += 10k, bytes += 1000k. Thread 4 panics after its work.
/// The main thread: one parse interval and entries += 7. A fifth, unannounced thread
/// does work whose values must never reach the totals.
fn four_threads_work() {
    for_table_order();
    fn parse_once() {
        PARSE.time(|| {
            // Nested: only the outer pair counts.
            PARSE.time(|| std::thread::sleep(Duration::from_millis(2)));
            std::thread::sleep(Duration::from_millis(1));
        });
    }
    fn work(k: u64) {
        for _ in 0..=k {
            parse_once();
        }
        for _ in 0..k {
            LOOKUP.time(|| std::thread::sleep(Duration::from_millis(1)));
        }
        ENTRIES.add(10 * k);
        BYTES.add(1000 * k);
    }
    let one = t2thread::spawn("w1", || work(1)).expect("spawn");
    let two = t2thread::Builder::new("w2")
        .stack_size(512 * 1024)
        .spawn(|| work(2))
        .expect("spawn");
    let three = std::thread::spawn(|| {
        let _trace2 = ThreadGuard::start("w3");
        work(3);
    });
    let four = t2thread::spawn("w4", || {
        work(4);
        panic!("w4 fails after its work");
    })
    .expect("spawn");
    let unannounced = std::thread::spawn(|| work(100));
    one.join().expect("w1");
    two.join().expect("w2");
    three.join().expect("w3");
    assert!(four.join().is_err(), "w4's panic reaches its JoinHandle");
    unannounced.join().expect("unannounced");
    parse_once();
    ENTRIES.add(7);
}

fn for_table_order() {
    PARSE.register();
    LOOKUP.register();
    ENTRIES.register();
    BYTES.register();
    UNUSED.register();
}

/// A pool of three rayon workers; each does one parse interval and entries += 1.
fn rayon_work() {
    for_table_order();
    let (tx, rx) = mpsc::channel();
    let exit = t2thread::exit_handler();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .start_handler(t2thread::start_handler("rayon"))
        .exit_handler(move |i| {
            exit(i);
            let _ = tx.send(i);
        })
        .build()
        .expect("pool");
    pool.broadcast(|_| {
        PARSE.time(|| std::thread::sleep(Duration::from_millis(1)));
        ENTRIES.add(1);
    });
    drop(pool);
    // Rayon ends its workers in the background: wait for all three exit hooks.
    for _ in 0..3 {
        rx.recv_timeout(Duration::from_secs(30))
            .expect("a worker's exit hook ran");
    }
}

// === the runner ===

/// Runs `scenario` in a child process with all three targets on; returns the three
/// streams (normal, perf, event).
fn run_child(scenario: &str, args: &[&str], env: &[(&str, String)]) -> Result<[String; 3], String> {
    let dir = process::fresh_dir(&format!("timers-{scenario}")).map_err(|e| e.to_string())?;
    let mut cmd = process::clean_command(std::env::current_exe().map_err(|e| e.to_string())?);
    cmd.args(args).env("TRACE2_TIMERS_SCENARIO", scenario);
    process::home_in(&mut cmd, &dir);
    process::trace_to(&mut cmd, &dir, "ours");
    for (key, value) in env {
        cmd.env(key, value);
    }
    let output = cmd.output().map_err(|e| e.to_string())?;
    if !output.status.success() {
        return Err(format!(
            "driver failed: {:?}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let read = |ext: &str| -> Result<String, String> {
        std::fs::read_to_string(process::trace_file(&dir, "ours", ext))
            .map_err(|e| format!("{ext}: {e}"))
    };
    let streams = [read("normal")?, read("perf")?, read("event")?];
    let _ = std::fs::remove_dir_all(&dir);
    Ok(streams)
}

/// Replays git's `test-tool trace2 <args>` and compares with capture `name`.
fn replay(name: &str, args: &[&str]) -> Result<(), String> {
    let theirs_event = support::sample(&format!("{name}.event"));
    let git = support::json_lines(theirs_event.lines());
    let find = |event: &str| git.iter().find(|v| v["event"] == event).cloned();
    let version = find("version").ok_or("no version line")?;
    let start = find("start").ok_or("no start line")?;
    let ancestry = find("cmd_ancestry").map(|v| v["ancestry"].to_string());
    // Our own argv[0..2] ("test-tool", "trace2") never reach us: take git's whole argv.
    let argv: Vec<&str> = start["argv"]
        .as_array()
        .ok_or("argv")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    if argv.get(2..) != Some(args) {
        return Err(format!("the capture ran {argv:?}, not {args:?}"));
    }
    let mut env = vec![
        (
            "TRACE2_TIMERS_EXE",
            version["exe"].as_str().unwrap_or("").to_owned(),
        ),
        ("TRACE2_TIMERS_ARGV", start["argv"].to_string()),
    ];
    if let Some(a) = ancestry {
        env.push(("TRACE2_TIMERS_ANCESTRY", a));
    }
    let [normal, perf, event] = run_child(args[0], &args[1..], &env)?;

    let mut problems = String::new();
    // Event.
    let ours = event_records(&event);
    let theirs = event_records(&theirs_event);
    if let Err(e) = compare_by_thread(&ours, &theirs) {
        problems.push_str(&format!("  event: {e}\n"));
    }
    // Perf.
    let ours = perf_records(&perf);
    let theirs = perf_records(&support::sample(&format!("{name}.perf")));
    if let Err(e) = compare_by_thread(&ours, &theirs) {
        problems.push_str(&format!("  perf: {e}\n"));
    }
    // Normal has no thread column, and the masked lines of concurrent threads are alike.
    let ours = normal_records(&normal);
    let theirs = normal_records(&support::sample(&format!("{name}.normal")));
    if let Err(e) = compare_by_thread(&ours, &theirs) {
        problems.push_str(&format!("  normal: {e}\n"));
    }
    // The masked timer values must still add up.
    if let Err(e) = timers_add_up(&event) {
        problems.push_str(&format!("  timer values: {e}\n"));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// (thread, masked line) of each Event line; timer values are masked too.
fn event_records(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("JSON");
            let masked =
                support::mask_json(&support::mask_event(l), &["t_total", "t_min", "t_max"]);
            (v["thread"].as_str().unwrap_or("").to_owned(), masked)
        })
        .collect()
}

fn perf_records(text: &str) -> Vec<(String, String)> {
    support::records(text, support::starts_with_time)
        .iter()
        .map(|l| {
            let thread = l.split(" | ").nth(2).unwrap_or("").trim().to_owned();
            (
                thread,
                support::mask_timer_values(&support::mask_perf(l, false)),
            )
        })
        .collect()
}

fn normal_records(text: &str) -> Vec<(String, String)> {
    support::records(text, support::starts_with_time)
        .iter()
        .map(|l| {
            (
                "main".to_owned(),
                support::mask_timer_values(&support::mask_normal(l, false)),
            )
        })
        .collect()
}

/// `thNN:` (a number given in start order, which concurrent threads race for) → `thNN:`.
fn unnumbered(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(pos) = rest.find("th") {
        out.push_str(&rest[..pos + 2]);
        rest = &rest[pos + 2..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && rest[digits..].starts_with(':') {
            out.push_str("NN");
            rest = &rest[digits..];
        }
    }
    out.push_str(rest);
    out
}

/// Compares two streams thread by thread: the main thread's lines exactly and in order;
/// the other threads' line sequences as a set (which thread got which number is a race);
/// the thread names exactly; and in ours, every other thread's lines between the main
/// thread's `cmd_name` and `exit`.
fn compare_by_thread(ours: &[(String, String)], theirs: &[(String, String)]) -> Result<(), String> {
    fn split(records: &[(String, String)]) -> (Vec<String>, BTreeMap<String, Vec<String>>) {
        let mut main = Vec::new();
        let mut others: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (thread, line) in records {
            if thread == "main" {
                main.push(line.clone());
            } else {
                others
                    .entry(thread.clone())
                    .or_default()
                    .push(unnumbered(line));
            }
        }
        (main, others)
    }
    let (our_main, our_others) = split(ours);
    let (their_main, their_others) = split(theirs);
    if let Some(d) = first_difference(&our_main, &their_main) {
        return Err(format!("main thread: {d}"));
    }
    let names = |m: &BTreeMap<String, Vec<String>>| m.keys().cloned().collect::<Vec<_>>();
    if names(&our_others) != names(&their_others) {
        return Err(format!(
            "threads {:?}, git's {:?}",
            names(&our_others),
            names(&their_others)
        ));
    }
    let sequences = |m: BTreeMap<String, Vec<String>>| {
        let mut v: Vec<Vec<String>> = m.into_values().collect();
        v.sort();
        v
    };
    let (ours_seq, theirs_seq) = (sequences(our_others), sequences(their_others));
    for (a, b) in ours_seq.iter().zip(&theirs_seq) {
        if let Some(d) = first_difference(a, b) {
            return Err(format!("a thread: {d}"));
        }
    }
    let position = |needle: &str| {
        ours.iter()
            .position(|(t, l)| t == "main" && l.contains(needle))
    };
    let (Some(named), Some(exit)) = (
        position("cmd_name").or(position("\"cmd_name\"")),
        position("\"exit\"")
            .or(position("| exit "))
            .or(position("exit elapsed")),
    ) else {
        return Err("no cmd_name or exit on main".into());
    };
    if let Some(stray) = ours
        .iter()
        .enumerate()
        .find(|(i, (t, _))| t != "main" && !(named < *i && *i < exit))
    {
        return Err(format!("a thread's line outside cmd_name..exit: {stray:?}"));
    }
    Ok(())
}

/// The values of one `timer`/`th_timer` line, in µs (as written, %.6f seconds).
#[derive(Debug, Clone, Copy)]
struct TimerLine {
    intervals: u64,
    total: u64,
    min: u64,
    max: u64,
}

/// One `timer` or `th_timer` line, read back into its record by the Event reader.
#[derive(Debug)]
struct TimerRecord {
    per_thread: bool,
    category: String,
    name: String,
    values: TimerLine,
}

/// The timer lines of an Event text, in order.
fn timer_records(event: &str) -> Result<Vec<TimerRecord>, String> {
    // The Event format writes seconds with six decimals: the reader's nanoseconds are
    // whole microseconds.
    let micros = |ns: u64| ns.div_ceil(1000);
    let mut timers = Vec::new();
    for text in event.lines() {
        let line = read_line(text).map_err(|e| format!("{e}: {text}"))?;
        let mut list = Vec::new();
        let record = line.record(&mut list).map_err(|e| format!("{e}: {text}"))?;
        if let Trace2Event::Timer { per_thread, timer } = record.event {
            timers.push(TimerRecord {
                per_thread,
                category: timer.category.to_owned(),
                name: timer.name.to_owned(),
                values: TimerLine {
                    intervals: timer.intervals,
                    total: micros(timer.total_ns),
                    min: micros(timer.min_ns),
                    max: micros(timer.max_ns),
                },
            });
        }
    }
    Ok(timers)
}

/// For every timer with a `timer` line: its values agree with its `th_timer` lines (if
/// it has any), min <= max, and each interval lasted at least min.
fn timers_add_up(event: &str) -> Result<(), String> {
    let timers = timer_records(event)?;
    for total in timers.iter().filter(|timer| !timer.per_thread) {
        let t = &total.values;
        if !(t.min <= t.max && t.min * t.intervals <= t.total && t.total <= t.max * t.intervals) {
            return Err(format!("inconsistent total {total:?}"));
        }
        let parts: Vec<&TimerLine> = timers
            .iter()
            .filter(|part| {
                part.per_thread && (&part.category, &part.name) == (&total.category, &total.name)
            })
            .map(|part| &part.values)
            .collect();
        if parts.is_empty() {
            continue;
        }
        let n = parts.len() as u64;
        let sum = parts.iter().map(|p| p.total).sum::<u64>();
        let ok = parts.iter().map(|p| p.intervals).sum::<u64>() == t.intervals
            // Each part and the total are rounded to the µs on their own.
            && sum.abs_diff(t.total) <= n
            && parts.iter().map(|p| p.min).min() == Some(t.min)
            && parts.iter().map(|p| p.max).max() == Some(t.max);
        if !ok {
            return Err(format!("total {t:?} is not the sum of {parts:?}"));
        }
    }
    Ok(())
}

/// What the four-threads scenario must write, from its own parameters (see
/// `four_threads_work`).
fn four_threads() -> Result<(), String> {
    let [_, _, event] = run_child("four-threads", &[], &[])?;
    let lines = support::json_lines(event.lines());
    let mut by_thread: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for v in &lines {
        by_thread
            .entry(v["thread"].as_str().unwrap_or("").to_owned())
            .or_default()
            .push(v);
    }
    let kinds = |vs: &[&Value]| -> Vec<String> {
        vs.iter()
            .map(|v| {
                let e = v["event"].as_str().unwrap_or("");
                match v["name"].as_str() {
                    Some(n) if e.contains("timer") || e.contains("counter") => format!("{e} {n}"),
                    _ => e.to_owned(),
                }
            })
            .collect()
    };
    let mut problems = Vec::new();
    let mut seen = 0;
    for (thread, vs) in &by_thread {
        if thread == "main" {
            continue;
        }
        let Some(k) = thread
            .rsplit_once(":w")
            .and_then(|(_, k)| k.parse::<u64>().ok())
        else {
            problems.push(format!("unexpected thread {thread}"));
            continue;
        };
        seen += 1;
        let got = kinds(vs);
        let want = [
            "thread_start",
            "th_timer parse",
            "th_counter entries",
            "thread_exit",
        ];
        if got != want {
            problems.push(format!("{thread}: {got:?}"));
            continue;
        }
        if vs[1]["intervals"] != k + 1 || vs[2]["count"] != 10 * k {
            problems.push(format!("{thread}: values {} / {}", vs[1], vs[2]));
        }
    }
    if seen != 4 {
        problems.push(format!(
            "{seen} announced threads, not 4: {:?}",
            by_thread.keys()
        ));
    }
    let main = by_thread.get("main").map(Vec::as_slice).unwrap_or_default();
    let tail = main
        .iter()
        .position(|v| v["event"] == "exit")
        .map(|i| &main[i..])
        .unwrap_or_default();
    let want_tail = [
        "exit",
        "th_timer parse",
        "th_counter entries",
        "timer parse",
        "timer lookup",
        "counter entries",
        "counter bytes",
        "atexit",
    ];
    if kinds(tail) != want_tail {
        problems.push(format!("main ends with {:?}", kinds(tail)));
    } else {
        let values = (
            &tail[1]["intervals"],
            &tail[2]["count"],
            &tail[3]["intervals"],
            &tail[4]["intervals"],
            &tail[5]["count"],
            &tail[6]["count"],
        );
        // parse: 2+3+4+5 on the threads + 1 on main; lookup: 1+2+3+4; entries:
        // 10+20+30+40 + 7; bytes: 1000+2000+3000+4000. The unannounced thread adds nothing.
        let want = (1, 7, 15, 10, 107, 10000);
        if (
            values.0.as_u64(),
            values.1.as_u64(),
            values.2.as_u64(),
            values.3.as_u64(),
            values.4.as_u64(),
            values.5.as_u64(),
        ) != (
            Some(want.0),
            Some(want.1),
            Some(want.2),
            Some(want.3),
            Some(want.4),
            Some(want.5),
        ) {
            problems.push(format!("totals {values:?}, want {want:?}"));
        }
        // Each parse interval slept 3 ms, each lookup interval 1 ms.
        let timers = timer_records(&event)?;
        let main_timer = |name: &str| {
            timers
                .iter()
                .find(|timer| !timer.per_thread && timer.name == name)
                .map(|timer| &timer.values)
        };
        let (Some(parse), Some(lookup)) = (main_timer("parse"), main_timer("lookup")) else {
            return Err(format!("no parse or lookup timer in {timers:?}"));
        };
        if parse.min < 3000 || lookup.min < 1000 {
            problems.push(format!("intervals too short: {parse:?} {lookup:?}"));
        }
    }
    if let Err(e) = timers_add_up(&event) {
        problems.push(e);
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

fn rayon_pool() -> Result<(), String> {
    let [_, _, event] = run_child("rayon", &[], &[])?;
    let lines = support::json_lines(event.lines());
    let mut workers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for v in &lines {
        let thread = v["thread"].as_str().unwrap_or("");
        if thread != "main" {
            workers
                .entry(thread.to_owned())
                .or_default()
                .push(format!("{} {}", v["event"], v["count"]));
        }
    }
    let want = [
        "\"thread_start\" null",
        "\"th_timer\" null",
        "\"th_counter\" 1",
        "\"thread_exit\" null",
    ];
    if workers.len() != 3
        || workers
            .iter()
            .any(|(name, events)| !name.ends_with(":rayon") || events != &want)
    {
        return Err(format!("workers: {workers:#?}"));
    }
    let counter = lines
        .iter()
        .find(|v| v["event"] == "counter" && v["name"] == "entries")
        .map(|v| v["count"].clone());
    if counter != Some(Value::from(3)) {
        return Err(format!("entries total {counter:?}"));
    }
    timers_add_up(&event)
}

/// Once a thread has used a timer and a counter, starting, stopping and adding
/// allocate nothing (and take no lock: the only lock is in the first-use path).
fn hot_path_does_not_allocate() -> Result<(), String> {
    static HOT: Timer = Timer::new("hot", "timer", PerThread::Yes);
    static HOT_COUNT: Counter = Counter::new("hot", "counter", PerThread::Yes);
    let result = Arc::new(Mutex::new(None));
    let slot = Arc::clone(&result);
    std::thread::spawn(move || {
        // The counting works: a box is one allocation.
        let before = allocations();
        let boxed = std::hint::black_box(Box::new(1u64));
        drop(boxed);
        let sanity = allocations() - before;
        // First use: registration and the thread's tables may allocate.
        HOT.start();
        HOT.stop();
        HOT_COUNT.add(1);
        let before = allocations();
        for i in 0..10_000u64 {
            HOT.start();
            HOT.start();
            HOT_COUNT.add(i);
            HOT.stop();
            HOT.stop();
            let _guard = HOT.scope();
        }
        let hot = allocations() - before;
        *slot.lock().expect("lock") = Some((sanity, hot));
    })
    .join()
    .map_err(|_| "the hot loop panicked".to_owned())?;
    match *result.lock().map_err(|e| e.to_string())? {
        Some((1, 0)) => Ok(()),
        other => Err(format!(
            "(allocations of one Box, of the hot loop): {other:?}"
        )),
    }
}
