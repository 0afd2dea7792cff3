//! A program wired for Trace2 from `main` to exit: the lifecycle guard, traced child
//! processes, and every way out of a process. The lifecycle and interop tests run it
//! (they compile this file into their own binary), and it shows the wiring a real
//! program needs:
//!
//! ```sh
//! GIT_TRACE2=/tmp/l.normal GIT_TRACE2_PERF=/tmp/l.perf GIT_TRACE2_EVENT=/tmp/l.event \
//!     cargo run -q --example lifecycle -- run git version
//! ```
//!
//! Sub-commands (the first argument; none means `return`):
//!
//! | arguments | how the process ends |
//! |---|---|
//! | `return` | `main` returns, the guard is dropped: code 0 |
//! | `exit-code <n>` | `main` returns `guard.finish(ExitCode::from(n))` |
//! | `result-err` | `main` returns `guard.finish(Err(..))`: code 1 |
//! | `finish-result-err <message>` | `guard.finish_result(Err(message))`: an `error` line, then code 1 |
//! | `finish-code <n>` | `main` returns `guard.finish_code(n)` (an `i32`): code `n & 0xff` |
//! | `exit <n>` | `guard.exit(n)` |
//! | `process-exit <n>` | `std::process::exit(n)`, without the guard |
//! | `panic <message>` | a panic that unwinds out of `main`: code 101 |
//! | `panic-abort <message>` | a panic whose unwinding panics again: the process aborts |
//! | `run-panic <cmd> [args]` | runs the command as a traced child, then panics: code 101 |
//! | `flood` | writes to stdout until that fails (SIGPIPE ignored, as in Rust) |
//! | `flood-sigpipe` | the same with SIGPIPE's default action, as git has it |
//! | `run <cmd> [args] [-- <cmd> [args]]…` | runs each command as a traced child; the code of the last |
//! | `run-env-copy <how> <cmd> [args]` | runs the command with `env_clear()` and a copy of the environment taken before the lifecycle started: `plain` as it is, `add` through `add_session_env`, `traced` through `Trace2CommandExt` |
//! | `exec <cmd> [args]` | replaces itself with the command; if that fails, exits with code 1 |
//! | `pool-at-exit` | two rayon workers write a line each; the pool is dropped (which does not wait for its workers) and `main` returns at once |

use std::io::Write;
use std::process::{Command, ExitCode};

use tracing_subscriber::prelude::*;
use tracing_trace2::api;
use tracing_trace2::command::Trace2CommandExt;

/// Takes its number of microseconds to drop (at its thread's end).
struct SlowDrop(std::cell::Cell<u64>);

impl SlowDrop {
    fn set(&self, micros: u64) {
        self.0.set(micros);
    }
}

impl Drop for SlowDrop {
    fn drop(&mut self) {
        // Spun, not slept: a sleep takes a scheduler's tick more than asked.
        let until = std::time::Instant::now() + std::time::Duration::from_micros(self.0.get());
        while std::time::Instant::now() < until {
            std::hint::spin_loop();
        }
    }
}

thread_local! {
    static SLOW_DROP: SlowDrop = const { SlowDrop(std::cell::Cell::new(0)) };
}

/// Panics when dropped: a second panic during unwinding makes Rust abort.
struct PanicOnDrop(String);

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        if std::thread::panicking() {
            panic!("{} (again, while unwinding)", self.0);
        }
    }
}

pub(crate) fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().map_or("return", String::as_str);
    let number = |i: usize| args.get(i).and_then(|a| a.parse::<i32>().ok()).unwrap_or(0);
    // Some programs copy their environment at start and give children that copy: it
    // predates the session the lifecycle exports.
    let early_env: Vec<_> = match mode {
        "run-env-copy" => std::env::vars_os().collect(),
        _ => Vec::new(),
    };

    // A program with its own subscriber: take the layer, install it with the other
    // layers, then start the lifecycle (version, start, cmd_ancestry).
    let mut lifecycle = tracing_trace2::Trace2::from_env()
        .with_exe_version(env!("CARGO_PKG_VERSION"))
        .lifecycle();
    if mode == "flood-sigpipe" {
        lifecycle = lifecycle.with_default_sigpipe();
    }
    tracing_subscriber::registry()
        .with(lifecycle.layer())
        .init();
    let trace2 = lifecycle.start();
    api::cmd_name("lifecycle");

    match mode {
        "exit-code" => trace2.finish(ExitCode::from(number(1) as u8)),
        "result-err" => trace2.finish(Err::<(), _>("the result was an error")),
        "finish-result-err" => {
            let message = args.get(1).cloned().unwrap_or_default();
            match trace2.finish_result(Err::<(), _>(message)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(err) => {
                    let _ = writeln!(std::io::stderr(), "Error: {err}");
                    ExitCode::FAILURE
                }
            }
        }
        "finish-code" => trace2.finish_code(number(1)),
        "exit" => trace2.exit(number(1)),
        "process-exit" => std::process::exit(number(1)),
        "panic" => panic!("{}", args.get(1).map_or("panic", String::as_str)),
        "run-panic" => {
            if let Some((program, rest)) = args[1..].split_first() {
                let _ = Command::new(program).args(rest).trace2_status();
            }
            panic!("after the child");
        }
        "panic-abort" => {
            let message = args.get(1).map_or("panic", String::as_str);
            let _bomb = PanicOnDrop(message.to_owned());
            panic!("{message}");
        }
        "flood" | "flood-sigpipe" => loop {
            // println! panics once stdout is a closed pipe (EPIPE).
            println!("a line for a reader that stops reading");
        },
        "run" => {
            let mut code = 0;
            for words in args[1..].split(|a| a == "--") {
                let Some((program, rest)) = words.split_first() else {
                    continue;
                };
                let status = Command::new(program).args(rest).trace2_status();
                code = match status {
                    Ok(status) => tracing_trace2::command::exit_code(status),
                    Err(err) => {
                        let _ = writeln!(std::io::stderr(), "{program}: {err}");
                        127
                    }
                };
            }
            trace2.finish(ExitCode::from(code as u8))
        }
        "run-env-copy" => {
            let how = args.get(1).map_or("plain", String::as_str);
            let Some((program, rest)) = args.get(2..).unwrap_or_default().split_first() else {
                trace2.exit(2)
            };
            let mut cmd = Command::new(program);
            cmd.args(rest).env_clear().envs(early_env);
            let status = match how {
                "add" => tracing_trace2::add_session_env(&mut cmd).status(),
                "traced" => cmd.trace2_status(),
                _ => cmd.status(),
            };
            let code = status.map_or(127, tracing_trace2::command::exit_code);
            trace2.finish_code(code)
        }
        // Windows has no exec: the argument falls through to `return` there.
        #[cfg(unix)]
        "exec" => {
            let Some((program, rest)) = args[1..].split_first() else {
                trace2.exit(2)
            };
            let err = Command::new(program).args(rest).trace2().exec();
            let _ = writeln!(std::io::stderr(), "{program}: {err}");
            trace2.exit(1)
        }
        "pool-at-exit" => {
            // The workers end while the process does: each must get exactly one
            // `thread_exit` (its own, or the lifecycle's) before `atexit`.
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(2)
                .build()
                .expect("a rayon pool");
            pool.broadcast(|context| {
                tracing::info!(worker = context.index());
                // A thread-local of the program's that takes a moment to drop, different
                // in every process: the worker's own end (its later thread-local
                // destructor) then falls anywhere in the process's last lines.
                let pause = (std::process::id() as u64 * 7 + context.index() as u64 * 13) % 200;
                SLOW_DROP.with(|slow| slow.set(pause));
            });
            drop(pool);
            ExitCode::SUCCESS
        }
        _ => ExitCode::SUCCESS, // `return`: the guard is dropped here
    }
}
