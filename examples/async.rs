//! An async program traced with Trace2: `#[instrument] async fn`s spawned on a tokio
//! multi-thread runtime and on a current-thread runtime, each awaiting timers and a
//! nested `#[instrument] async fn`; a plain `std::thread::spawn` thread that writes a
//! datum; a panic inside the standard library caught on a thread (its `error` line names
//! a call site outside this crate).
//!
//! Every call writes one region pair however often it is polled, its `t_rel` is the whole
//! call, children nest in their parents, and every `thread` value is a strict stack (see
//! `RegionMode` in the documentation of `tracing-trace2-core`):
//!
//! ```sh
//! GIT_TRACE2_EVENT=/tmp/async.event GIT_TRACE2_PERF=/tmp/async.perf \
//!     cargo run --example async && cat /tmp/async.perf
//! ```
//!
//! `cargo run --example async -- <mode>` picks another program, used by `tests/async.rs`:
//!
//! | mode | what it does |
//! |---|---|
//! | (none) | the async program above |
//! | `filters` | a global `EnvFilter::new("warn")` and a `fmt` layer on stderr beside Trace2: the lifecycle lines are written, fmt prints none of them |
//! | `result-err` | `main` returns `Err` through [`Trace2Guard::finish_result`]: the trace says `exit` code 1 |
//! | `tokio-children` | two `#[instrument] async fn` tasks on a multi-thread runtime run `git version` and a failing `git rev-parse --verify` through the traced `tokio::process::Command` at the same time |

use std::process::{Command, ExitCode};
use std::time::Duration;

use tracing::{error, info, instrument};
use tracing_subscriber::prelude::*;
use tracing_trace2::{Trace2, Trace2CommandExt, Trace2Guard, Trace2TokioCommandExt, api};

/// How long each `fetch` sleeps in all: the tests check that its region lasts as long.
pub const FETCH_SLEEP_MS: u64 = 6;

#[instrument(fields(trace2.category = "async"))]
async fn fetch(id: u64) -> u64 {
    tokio::time::sleep(Duration::from_millis(FETCH_SLEEP_MS / 2)).await;
    let parsed = parse(id).await;
    tokio::time::sleep(Duration::from_millis(FETCH_SLEEP_MS / 2)).await;
    info!(key = "parsed", value = parsed);
    parsed
}

#[instrument(fields(trace2.category = "async"))]
async fn parse(id: u64) -> u64 {
    tokio::task::yield_now().await;
    id * 2
}

#[instrument(skip(rt), fields(trace2.category = "async"))]
fn run_tasks(kind: &str, rt: &tokio::runtime::Runtime, tasks: u64) {
    rt.block_on(async {
        let handles: Vec<_> = (0..tasks).map(|i| tokio::spawn(fetch(i))).collect();
        for handle in handles {
            let _ = handle.await;
        }
    });
}

fn async_program() -> std::io::Result<()> {
    // The workers are announced when they first write; ending them from tokio's stop
    // hook writes their thread_exit before the runtime's shutdown returns (a thread-local
    // destructor would run after it, possibly after `atexit`).
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .on_thread_stop(tracing_trace2::thread::stop_handler())
        .enable_time()
        .build()?;
    run_tasks("multi-thread", &multi, 4);
    // Waits for the workers, so that their thread_exit lines come before atexit.
    multi.shutdown_timeout(Duration::from_secs(5));

    let current = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    run_tasks("current-thread", &current, 3);
    drop(current);

    // A thread the program starts itself, without the Trace2 helpers: announced all the
    // same, and its thread_exit comes when it ends.
    std::thread::spawn(|| info!(category = "plain", key = "from", value = "std-thread"))
        .join()
        .ok();

    // A panic inside the standard library: the `error` line's call site is not an
    // absolute build path.
    std::thread::spawn(|| {
        let _ = std::panic::catch_unwind(|| Vec::<u8>::with_capacity(usize::MAX));
    })
    .join()
    .ok();
    Ok(())
}

/// EnvFilter("warn") for the whole subscriber and a fmt layer on stderr, beside Trace2.
fn filters_program() -> ExitCode {
    let lifecycle = Trace2::from_env()
        .with_exe_version(env!("CARGO_PKG_VERSION"))
        .lifecycle();
    tracing_subscriber::registry()
        .with(tracing_subscriber::EnvFilter::new("warn"))
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .with(lifecycle.layer())
        .init();
    let trace2 = lifecycle.start();
    api::cmd_name("filters");
    info!("filtered out everywhere");
    // An error passes the filter to both layers (a `warn!` would reach fmt only: the
    // Trace2 layer writes no warnings unless asked, `Trace2::with_warnings`).
    error!("kept by the filter");
    let status = Command::new("git").arg("version").trace2_output();
    trace2.finish(status.map(|_| ()))
}

/// The documented pattern for a `main` that returns a `Result`.
fn result_err_program() -> Result<(), String> {
    let trace2: Trace2Guard = Trace2::from_env().init();
    api::cmd_name("result-err");
    trace2.finish_result(Err("no repository here".to_owned()))
}

/// `git version`, its output collected.
#[instrument(fields(trace2.category = "children"))]
async fn git_version() -> std::io::Result<String> {
    let out = tokio::process::Command::new("git")
        .arg("version")
        .trace2_output()
        .await?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A git command that fails (exit code 128), spawned and waited for.
#[instrument(fields(trace2.category = "children"))]
async fn git_no_such_ref() -> std::io::Result<Option<i32>> {
    let mut child = tokio::process::Command::new("git")
        .args(["rev-parse", "--verify", "nosuchref"])
        .stderr(std::process::Stdio::null())
        .trace2_class("lookup")
        .spawn()?;
    let status = child.wait().await?;
    Ok(status.code())
}

/// Git children of async tasks, traced with the tokio form of the command.
fn tokio_children_program() -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .on_thread_stop(tracing_trace2::thread::stop_handler())
        .enable_all()
        .build()?;
    let (version, code) = rt.block_on(async {
        let version = tokio::spawn(git_version());
        let code = tokio::spawn(git_no_such_ref());
        (version.await, code.await)
    });
    rt.shutdown_timeout(Duration::from_secs(5));
    let version = version.map_err(std::io::Error::other)??;
    let code = code.map_err(std::io::Error::other)??;
    println!("{}", version.trim_end());
    println!("rev-parse code {code:?}");
    Ok(())
}

/// The program; `tests/async.rs` also runs it inside its own binary.
pub fn main() -> ExitCode {
    match std::env::args().nth(1).as_deref() {
        Some("filters") => filters_program(),
        Some("result-err") => match result_err_program() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("Error: {e:?}");
                ExitCode::FAILURE
            }
        },
        Some("tokio-children") => {
            let trace2 = Trace2::from_env()
                .with_exe_version(env!("CARGO_PKG_VERSION"))
                .init();
            api::cmd_name("tokio-children");
            trace2.finish(tokio_children_program())
        }
        _ => {
            let trace2 = Trace2::from_env()
                .with_exe_version(env!("CARGO_PKG_VERSION"))
                .init();
            api::cmd_name("async");
            trace2.finish(async_program())
        }
    }
}
