//! A host program wired with the full Trace2 lifecycle, for the fault-injection tests:
//! it traces `printf` lines from several threads, can do the awkward things real hosts
//! do (fork, close and reuse a descriptor, remove the trace directory, panic inside a
//! field's `Debug`), and ends in the way it is told to. `tests/faults.rs` runs it as a
//! child process under each fault.
//!
//! ```sh
//! GIT_TRACE2_EVENT=/tmp/host.event cargo run --example host -- \
//!     --threads 2 --lines 1000 --background lossy --end exit-from-thread --code 3
//! ```
//!
//! | option | meaning |
//! |---|---|
//! | `--lines N` | `printf` lines per thread (`t<T> <i>`), default 3 |
//! | `--threads N` | threads tracing them, default 1 (the main thread) |
//! | `--line-bytes N` | pad every `printf` message to at least N bytes |
//! | `--background lossless\|lossy` | the deferred background writer |
//! | `--capacity N` | its queue length |
//! | `--reuse-fd N:PATH` | halfway, close fd N and open PATH, which gets number N again, and write `host's own line` into it |
//! | `--remove-dir PATH` | halfway, remove the directory PATH and everything in it |
//! | `--field-panic` | trace an event whose field's `Debug` panics (caught) |
//! | `--fork exit\|exec` | after the lines, fork: the child traces `c <i>` lines and exits (or execs `true`); the parent waits for it |
//! | `--end return\|exit\|exit-from-thread\|return-while-tracing\|forever` | how it ends, default `return` |
//! | `--code N` | exit code, default 0 |
//!
//! Its stdout is exactly `host: <lines> lines from <threads> threads\n`, printed before
//! it ends; with `--end forever` it prints that line and then traces until it is killed.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use tracing_subscriber::prelude::*;
use tracing_trace2::{BackgroundOptions, Trace2, api};

#[derive(Debug, Default)]
struct Args {
    lines: u64,
    threads: u64,
    line_bytes: usize,
    background: Option<BackgroundOptions>,
    reuse_fd: Option<(i32, String)>,
    remove_dir: Option<String>,
    field_panic: bool,
    fork: Option<String>,
    end: String,
    code: u8,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        lines: 3,
        threads: 1,
        end: "return".to_owned(),
        ..Args::default()
    };
    let mut capacity = None;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--field-panic" {
            args.field_panic = true;
            continue;
        }
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let number = || value.parse::<u64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--lines" => args.lines = number()?,
            "--threads" => args.threads = number()?.max(1),
            "--line-bytes" => args.line_bytes = number()? as usize,
            "--capacity" => capacity = Some(number()? as usize),
            "--background" => {
                let lossy = match value.as_str() {
                    "lossless" => false,
                    "lossy" => true,
                    other => return Err(format!("--background {other}?")),
                };
                args.background = Some(BackgroundOptions::new().with_lossy(lossy));
            }
            "--reuse-fd" => {
                let (fd, path) = value.split_once(':').ok_or("--reuse-fd N:PATH")?;
                let fd = fd.parse().map_err(|e| format!("--reuse-fd: {e}"))?;
                args.reuse_fd = Some((fd, path.to_owned()));
            }
            "--remove-dir" => args.remove_dir = Some(value),
            "--fork" => args.fork = Some(value),
            "--end" => args.end = value,
            "--code" => args.code = number()? as u8,
            other => return Err(format!("unknown option {other}")),
        }
    }
    if let Some(capacity) = capacity {
        let options = args.background.take().unwrap_or_default();
        args.background = Some(options.with_capacity(capacity));
    }
    Ok(args)
}

/// The `printf` message `<prefix> <i>`, padded with dots to `bytes`.
fn message(prefix: &str, i: u64, bytes: usize) -> String {
    let mut msg = format!("{prefix} {i} ");
    while msg.len() < bytes {
        msg.push('.');
    }
    msg
}

fn trace_lines(prefix: &str, from: u64, to: u64, bytes: usize) {
    for i in from..to {
        tracing::info!("{}", message(prefix, i, bytes));
    }
}

/// Traces `t<thread> <i>` lines for ever (the threads still tracing while the process
/// ends).
fn trace_for_ever(thread: u64, bytes: usize) -> ! {
    for i in 0.. {
        tracing::info!("{}", message(&format!("t{thread}"), i, bytes));
    }
    unreachable!("u64 lines")
}

/// A field value whose `Debug` panics.
struct PanicsInDebug;

impl std::fmt::Debug for PanicsInDebug {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        panic!("a field's Debug panicked")
    }
}

/// The halfway faults: a reused descriptor, a removed trace directory.
fn halfway(args: &Args) {
    if let Some((fd, path)) = &args.reuse_fd {
        // SAFETY: the host closes a descriptor of its own, as a program may.
        unsafe { libc::close(*fd) };
        let file = std::fs::File::create(path).expect("create the host's file");
        let got = std::os::fd::AsRawFd::as_raw_fd(&file);
        if got != *fd {
            // SAFETY: gives the new file the closed number, as an `open` would have
            // where no lower number was free.
            assert_eq!(unsafe { libc::dup2(got, *fd) }, *fd, "dup2");
        }
        // SAFETY: `fd` now names the host's new file; it stays open until the end.
        let mut reused = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(*fd) };
        reused
            .write_all(b"host's own line\n")
            .expect("write the host's file");
        std::mem::forget(reused);
    }
    if let Some(dir) = &args.remove_dir {
        std::fs::remove_dir_all(dir).expect("remove the trace directory");
    }
    if args.field_panic {
        let caught = std::panic::catch_unwind(|| {
            tracing::info!(value = ?PanicsInDebug, "with a bad field");
        });
        assert!(caught.is_err(), "the field's Debug did not panic");
    }
}

/// Forks; the child traces and exits (or execs), the parent waits for it.
fn fork_child(how: &str, args: &Args) {
    // SAFETY: the child only traces, writes and exits; this is what the test is about.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        if how == "exec" {
            let program = c"/bin/true";
            let argv = [program.as_ptr(), std::ptr::null()];
            // SAFETY: a NUL-terminated argv of C strings that outlive the call.
            unsafe { libc::execv(program.as_ptr(), argv.as_ptr()) };
            // SAFETY: exec failed; leave without running the parent's exit handlers.
            unsafe { libc::_exit(127) };
        }
        trace_lines("c", 0, args.lines, args.line_bytes);
        std::process::exit(0);
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child status {status:#x}"
    );
    tracing::info!("after fork");
}

pub fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("host: {message}");
            return ExitCode::from(2);
        }
    };
    // The padded messages are written whole: the bound on text from values is raised
    // to hold them (a padded line is how the fault tests fill a destination).
    let limit = tracing_trace2::core::DEFAULT_MESSAGE_LIMIT.max(args.line_bytes + 64);
    let mut trace2 = Trace2::from_env()
        .with_exe_version(env!("CARGO_PKG_VERSION"))
        .with_message_limit(limit);
    if let Some(options) = &args.background {
        trace2 = trace2.with_background_writer(options.clone());
    }
    let lifecycle = trace2.lifecycle();
    tracing_subscriber::registry()
        .with(lifecycle.layer())
        .init();
    let guard = lifecycle.start();
    api::cmd_name("host");

    let (threads, lines, bytes) = (args.threads, args.lines, args.line_bytes);
    let endless = matches!(
        args.end.as_str(),
        "exit-from-thread" | "return-while-tracing" | "forever"
    );
    let workers: Vec<_> = (1..threads)
        .map(|t| {
            std::thread::Builder::new()
                .name(format!("host{t}"))
                .spawn(move || {
                    trace_lines(&format!("t{t}"), 0, lines, bytes);
                    if endless {
                        trace_for_ever(t, bytes);
                    }
                })
                .expect("spawn a thread")
        })
        .collect();
    trace_lines("t0", 0, lines / 2, bytes);
    halfway(&args);
    trace_lines("t0", lines / 2, lines, bytes);
    if !endless {
        for worker in workers {
            worker.join().expect("a tracing thread panicked");
        }
    }
    if let Some(how) = &args.fork {
        fork_child(how, &args);
    }
    println!("host: {lines} lines from {threads} threads");
    let _ = std::io::stdout().flush();

    let code = args.code;
    match args.end.as_str() {
        "exit" => std::process::exit(i32::from(code)),
        "exit-from-thread" => {
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                std::process::exit(i32::from(code));
            });
            trace_for_ever(0, bytes)
        }
        "forever" => trace_for_ever(0, bytes),
        // "return" and "return-while-tracing": the guard writes exit and atexit.
        _ => guard.finish(ExitCode::from(code)),
    }
}
