//! A test program for destinations and the background writer: it writes a chosen
//! number of `printf` lines from a chosen number of threads, prints its own output, and
//! ends the way it is told to. The integration tests run it as a child process.
//!
//! ```sh
//! GIT_TRACE2_EVENT=/tmp/emit.event cargo run --example emit -- \
//!     --threads 2 --lines 1000 --background lossless --end exit --code 3
//! ```
//!
//! Options (all optional):
//!
//! | option | meaning |
//! |---|---|
//! | `--lines N` | `printf` lines per thread (`t<T> <i>`), default 3 |
//! | `--threads N` | threads writing them, default 1 (the main thread) |
//! | `--background lossless\|lossy` | write through the background writer |
//! | `--capacity N` | the background writer's queue length |
//! | `--guard` | keep the background guard and drop it before ending |
//! | `--cmd-name NAME` | the `cmd_name` to emit (default `emit`) |
//! | `--config-write KEY=VALUE` | report a config write of the program itself |
//! | `--end return\|exit\|panic` | how the program ends, default `return` |
//! | `--code N` | exit code for `return` and `exit`, default 0 |
//!
//! Its stdout is exactly `emit: <lines> lines from <threads> threads\n`.

use std::process::ExitCode;
use std::sync::OnceLock;

use tracing_subscriber::prelude::*;
use tracing_trace2::{BackgroundGuard, BackgroundOptions};
use tracing_trace2::{Trace2, api};

#[derive(Debug)]
struct Args {
    lines: u64,
    threads: u64,
    background: Option<BackgroundOptions>,
    guard: bool,
    cmd_name: String,
    config_writes: Vec<(String, String)>,
    end: String,
    code: u8,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        lines: 3,
        threads: 1,
        background: None,
        guard: false,
        cmd_name: "emit".to_owned(),
        config_writes: Vec::new(),
        end: "return".to_owned(),
        code: 0,
    };
    let mut capacity = None;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--guard" {
            args.guard = true;
            continue;
        }
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let number = || value.parse::<u64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--lines" => args.lines = number()?,
            "--threads" => args.threads = number()?.max(1),
            "--capacity" => capacity = Some(number()? as usize),
            "--background" => {
                let lossy = match value.as_str() {
                    "lossless" => false,
                    "lossy" => true,
                    other => return Err(format!("--background {other}?")),
                };
                args.background = Some(BackgroundOptions::new().with_lossy(lossy));
            }
            "--cmd-name" => args.cmd_name = value,
            "--config-write" => {
                let (k, v) = value.split_once('=').ok_or("--config-write KEY=VALUE")?;
                args.config_writes.push((k.to_owned(), v.to_owned()));
            }
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

fn emit_lines(thread: u64, lines: u64) {
    for i in 0..lines {
        tracing::info!("t{thread} {i}");
    }
}

/// The program; also run by the integration tests inside their own binaries.
pub fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("emit: {message}");
            return ExitCode::from(2);
        }
    };
    let mut trace2 = Trace2::from_env().with_exe_version(env!("CARGO_PKG_VERSION"));
    if let Some(options) = &args.background {
        trace2 = trace2.with_background_writer(options.clone());
    }
    let (layer, guard) = trace2.layer_with_guard();
    tracing_subscriber::registry().with(layer).init();
    if !args.guard {
        // Kept, never dropped, as a program that holds its guard to the end: the exit
        // handler shuts the writers down. (In a static rather than forgotten, so that
        // a leak checker sees it still in use at exit.)
        static KEPT: OnceLock<BackgroundGuard> = OnceLock::new();
        let _ = KEPT.set(guard);
    }

    let argv: Vec<String> = std::env::args().collect();
    api::start(&argv);
    api::cmd_name(&args.cmd_name);
    for (key, value) in &args.config_writes {
        trace2.report_config_write(key, Some(value));
    }

    let workers: Vec<_> = (1..args.threads)
        .map(|t| {
            let lines = args.lines;
            std::thread::Builder::new()
                .name(format!("emit{t}"))
                .spawn(move || emit_lines(t, lines))
                .expect("spawn a thread")
        })
        .collect();
    emit_lines(0, args.lines);
    for worker in workers {
        let _ = worker.join();
    }
    println!("emit: {} lines from {} threads", args.lines, args.threads);

    match args.end.as_str() {
        "panic" => panic!("emit: told to panic"),
        "exit" => {
            let code = api::exit(i32::from(args.code));
            api::atexit();
            std::process::exit(code);
        }
        _ => {
            let code = api::exit(i32::from(args.code));
            api::atexit();
            ExitCode::from(code as u8)
        }
    }
}
