//! The sub-commands of git's `test-tool trace2` helper, written with the public API of
//! tracing-trace2, so that our streams can be compared with git's for the same calls.
//!
//! ```sh
//! GIT_TRACE2_PERF=/tmp/c.perf cargo run -q --example conformance -- 100timer 3 20
//! ```
//!
//! Each sub-command takes git's arguments in git's order and behaves as git's helper
//! does: the same events, the same `error` messages and formats, the same exit codes,
//! the same thread names. git's leading `trace2` word may be given or left out. The
//! command name is `trace2`, as git's helper reports.

use std::process::{Command, ExitCode};
use std::time::Duration;

use tracing_trace2::Trace2;
use tracing_trace2::api;
use tracing_trace2::command::{Trace2CommandExt, exit_code};
use tracing_trace2::core::timers::{Counter, PerThread, Timer};

/// git's compiled-in test timers and counters (spec §10.1).
static TEST1_TIMER: Timer = Timer::new("test", "test1", PerThread::No);
static TEST2_TIMER: Timer = Timer::new("test", "test2", PerThread::Yes);
static TEST1_COUNTER: Counter = Counter::new("test", "test1", PerThread::No);
static TEST2_COUNTER: Counter = Counter::new("test", "test2", PerThread::Yes);

/// The sub-commands and their argument synopses, as git's helper lists them.
const USAGE: &[(&str, &str)] = &[
    ("001return", "<exit_code>"),
    ("002exit", "<exit_code>"),
    ("003error", "<error_message>+"),
    ("004child", "[<child_command_line>]"),
    ("005exec", "<git_command_args>"),
    ("006data", "[<category> <key> <value>]+"),
    ("007bug", ""),
    ("008bug", ""),
    ("100timer", "<count> <ms_delay>"),
    ("101timer", "<count> <ms_delay> <threads>"),
    ("200counter", "<v1> [<v2> [<v3> [...]]]"),
    ("201counter", "<v1> <v2> <threads>"),
    ("300redact_start", "<argv...>"),
    ("301redact_child_start", "<argv...>"),
    ("302redact_exec", "<exe> <argv...>"),
    ("303redact_def_param", "<key> <value>"),
    ("400ancestry", "<target> <output_file> <child_command_line>"),
];

pub(crate) fn main() -> ExitCode {
    let trace2 = Trace2::from_env()
        .with_exe_version(env!("CARGO_PKG_VERSION"))
        .init();
    api::cmd_name("trace2");
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args = match args.first().map(String::as_str) {
        Some("trace2") => &args[1..],
        _ => &args[..],
    };
    let Some((name, rest)) = args.split_first() else {
        return trace2.finish(usage());
    };
    let code = match name.as_str() {
        "001return" => {
            let rc = int_or_die(rest.first(), "expect <exit_code>");
            return trace2.finish(ExitCode::from((rc & 0xff) as u8));
        }
        "002exit" => {
            // Deliberately not through the guard: the exit handler writes the end lines.
            let rc = int_or_die(rest.first(), "expect <exit_code>");
            std::process::exit(rc);
        }
        "003error" => {
            if rest.first().is_none_or(String::is_empty) {
                die("expect <error_message>");
            }
            for message in rest {
                error(message);
            }
            0
        }
        "004child" => child(rest),
        "005exec" => exec_git(rest),
        "006data" => data(rest),
        "007bug" => {
            bug_exit("the bug message");
        }
        "008bug" => {
            bug("a bug message");
            bug("another bug message");
            bug_exit("an explicit BUG_if_bug() following bug() call(s) is nice, but not required");
        }
        "100timer" => {
            let [count, delay] = ints_or_die(rest, "expect <count> <ms_delay>");
            for _ in 0..count {
                TEST1_TIMER.time(|| sleep_ms(delay));
            }
            0
        }
        "101timer" => {
            let [count, delay, threads] = ints_or_die(rest, "expect <count> <ms_delay> <threads>");
            run_threads("ut_101", threads, move || {
                for _ in 0..count {
                    TEST2_TIMER.time(|| sleep_ms(delay));
                }
            });
            0
        }
        "200counter" => {
            let usage = "expect <v1> [<v2> [...]]";
            if rest.is_empty() {
                die(usage);
            }
            for arg in rest {
                let Some(value) = get_i(arg) else {
                    die(&format!("invalid value[{arg}] -- {usage}"));
                };
                // git adds the int to a uint64 counter: negative values wrap.
                TEST1_COUNTER.add(value as u64);
            }
            0
        }
        "201counter" => {
            let [v1, v2, threads] = ints_or_die(rest, "expect <v1> <v2> <threads>");
            run_threads("ut_201", threads, move || {
                TEST2_COUNTER.add(v1 as u64);
                TEST2_COUNTER.add(v2 as u64);
            });
            0
        }
        "300redact_start" => {
            if rest.is_empty() {
                die("expect <argv...>");
            }
            api::start(rest);
            0
        }
        "301redact_child_start" => {
            if rest.is_empty() {
                die("expect <argv...>");
            }
            let argv: Vec<&str> = rest.iter().map(String::as_str).collect();
            // Only the start is announced, as in git's helper: nothing is run.
            api::child_start(&api::ChildStart::new("?", &argv));
            0
        }
        "302redact_exec" => {
            let Some((exe, argv)) = rest.split_first() else {
                die("expect <exe> <argv...>");
            };
            api::exec(Some(exe), argv);
            0
        }
        "303redact_def_param" => {
            let [key, value, ..] = rest else {
                die("expect <key> <value>");
            };
            api::def_param("unknown", key, Some(value));
            0
        }
        "400ancestry" => ancestry(rest),
        _ => return trace2.finish(usage()),
    };
    trace2.finish(ExitCode::from((code & 0xff) as u8))
}

/// git's `strtol` check: the whole string is a decimal integer.
fn get_i(text: &str) -> Option<i32> {
    text.parse().ok()
}

fn int_or_die(arg: Option<&String>, usage: &str) -> i32 {
    match arg.and_then(|a| get_i(a)) {
        Some(value) => value,
        None => die(usage),
    }
}

fn ints_or_die<const N: usize>(args: &[String], usage: &str) -> [i32; N] {
    if args.len() != N {
        die(usage);
    }
    let mut values = [0; N];
    for (value, arg) in values.iter_mut().zip(args) {
        *value = get_i(arg).unwrap_or_else(|| die(usage));
    }
    values
}

/// git's `die()`: `fatal: ` on stderr, an `error` line, exit code 128.
fn die(message: &str) -> ! {
    eprintln!("fatal: {message}");
    api::error(message, message);
    tracing_trace2::exit_process(128)
}

/// git's `error("%s", message)`.
fn error(message: &str) {
    eprintln!("error: {message}");
    api::error(message, "%s");
}

/// git's `bug()`: reported, and the process goes on.
#[track_caller]
fn bug(message: &str) {
    let at = std::panic::Location::caller();
    eprintln!("BUG: {}:{}: {message}", at.file(), at.line());
    api::error(message, message);
}

/// git's `BUG()` under its test helper, which exits with 99 instead of aborting.
#[track_caller]
fn bug_exit(message: &str) -> ! {
    bug(message);
    tracing_trace2::exit_process(99)
}

fn sleep_ms(ms: i32) {
    std::thread::sleep(Duration::from_millis(u64::try_from(ms).unwrap_or(0)));
}

/// Runs `threads` threads named `thNN:<name>` doing `work`, and waits for them all.
fn run_threads(name: &str, threads: i32, work: impl Fn() + Send + Sync + Copy + 'static) {
    let handles: Vec<_> = (0..threads)
        .filter_map(|_| tracing_trace2::thread::spawn(name, work).ok())
        .collect();
    for handle in handles {
        let _ = handle.join();
    }
}

/// Runs the command line as a traced child and returns its exit code (-1 if it could
/// not be started, which the process exit turns into 255, as in git).
fn child(argv: &[String]) -> i32 {
    let Some((program, args)) = argv.split_first() else {
        return 0;
    };
    match Command::new(program).args(args).trace2_status() {
        Ok(status) => exit_code(status),
        Err(_) => -1,
    }
}

/// Replaces the process with `git <args>`; returns -1 if that failed.
fn exec_git(args: &[String]) -> i32 {
    if args.is_empty() {
        return 0;
    }
    let _err = Command::new("git").args(args).trace2().exec();
    -1
}

fn data(args: &[String]) -> i32 {
    let usage = "expect <cat0> <k0> <v0> [<cat1> <k1> <v1> [...]]";
    if !args.len().is_multiple_of(3) || args.iter().any(String::is_empty) {
        die(usage);
    }
    for triple in args.chunks(3) {
        // git's helper names the (unregistered) repository: repo 0.
        tracing::info!(category = %triple[0], key = %triple[1], value = %triple[2], repo = 0);
    }
    0
}

/// Runs the command line as a traced child whose only Trace2 target is `<target>`
/// (`normal`, `perf` or `event`) written to `<output_file>` in brief mode.
fn ancestry(args: &[String]) -> i32 {
    let [target, output, program, rest @ ..] = args else {
        die("expect <target> <output_file> <child_command_line>");
    };
    let variable = match target.as_str() {
        "normal" => "GIT_TRACE2",
        "perf" => "GIT_TRACE2_PERF",
        "event" => "GIT_TRACE2_EVENT",
        _ => die(&format!(
            "invalid target '{target}', expected: normal, perf, event"
        )),
    };
    let mut command = Command::new(program);
    command
        .args(rest)
        .env("GIT_TRACE2", "")
        .env("GIT_TRACE2_PERF", "")
        .env("GIT_TRACE2_EVENT", "")
        .env("GIT_TRACE2_BRIEF", "1")
        .env(variable, output);
    match command.trace2_status() {
        Ok(status) => exit_code(status),
        Err(_) => -1,
    }
}

fn usage() -> ExitCode {
    eprintln!("usage:");
    for (name, synopsis) in USAGE {
        eprintln!("\ttest-tool trace2 {name} {synopsis}");
    }
    ExitCode::from(129)
}
