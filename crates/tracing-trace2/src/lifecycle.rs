//! The process lifecycle: the lines git writes around a process without being asked
//! (`version`, `start`, `cmd_ancestry`, `exit`, `atexit`, `signal`, and an `error` for a
//! crash), from one call at the top of `main`.
//!
//! ```no_run
//! let trace2 = tracing_trace2::Trace2::from_env()
//!     .with_exe_version(env!("CARGO_PKG_VERSION"))
//!     .init(); // installs the layer, writes version, start, cmd_ancestry
//! tracing_trace2::api::cmd_name("mytool");
//! // ... the program ...
//! if std::env::args().count() > 3 {
//!     trace2.exit(2); // exit + atexit, then std::process::exit(2)
//! }
//! // when the guard is dropped at the end of main, exit and atexit carry the code the
//! // process exits with (Linux with glibc, Windows; see below)
//! ```
//!
//! [`Trace2::init`] installs `registry().with(layer)` as the global default subscriber.
//! A program that builds its own subscriber takes the layer from
//! [`Trace2::lifecycle`] and starts the lifecycle once the subscriber is installed:
//!
//! ```no_run
//! use tracing_subscriber::prelude::*;
//!
//! let lifecycle = tracing_trace2::Trace2::from_env()
//!     .with_exe_version(env!("CARGO_PKG_VERSION"))
//!     .lifecycle();
//! tracing_subscriber::registry()
//!     .with(lifecycle.layer())
//!     // .with(tracing_subscriber::fmt::layer()) and any other layer
//!     .init();
//! let trace2 = lifecycle.start();
//! # drop(trace2);
//! ```
//!
//! A program that installs its own layers later, or only for some commands, still starts
//! the lifecycle first: it installs the layer beside an empty
//! `tracing_subscriber::reload` slot and fills the slot once the command is known (the
//! repository's README, "Wiring a real program", and `examples/late_subscriber.rs`).
//!
//! # How each way out of the process is traced
//!
//! | the process ends by | lines written |
//! |---|---|
//! | returning from `main` with the guard dropped (`Ok`, `Err`, an `ExitCode`) | Linux with glibc: `exit` with the code the process exits with (1 for `Err`), then `atexit`, from the exit handler (see below); Windows: the same, from `ExitProcess`'s callbacks (see below); elsewhere `exit` code 0 and `atexit`, when the guard is dropped |
//! | `main` returning [`Trace2Guard::finish`]`(value)` (`ExitCode`, `Result`, …), [`Trace2Guard::finish_code`]`(code)` or [`Trace2Guard::finish_result`] | `exit` with the code the value reports (a number masked to 0..=255), then `atexit`; an `Err` given to `finish_result` is written as an `error` line first, as git's `die()` writes its message |
//! | [`Trace2Guard::exit`] / [`exit`] | `exit` with the code (masked to 0..=255), then `atexit` |
//! | `std::process::exit` called directly | Linux with glibc: `exit` with the code and `atexit`, from an exit handler (see below); Windows: the same, from `ExitProcess`'s callbacks (see below); elsewhere `exit` code 0 and `atexit` |
//! | `exit` from C code | Linux with glibc and Windows: `exit` with the code and `atexit`; elsewhere `exit` code 0 and `atexit` |
//! | a panic that unwinds out of `main` | `error` (the panic message, at the panic's file:line), `exit` code 101, `atexit` |
//! | a panic with `panic = "abort"` | `error`, then the process dies of SIGABRT: no `exit`/`atexit`, like git's `BUG()` |
//! | a panic on another thread | `error` only; the process goes on |
//! | SIGPIPE, when its default action is in force (see below) | `signal` (signo 13), then the process dies of it: no `exit`/`atexit`, as git |
//! | any other fatal signal, `abort`, `_exit` | the trace stops where it was, as git's |
//! | a child made by `fork` without `exec` ends | nothing: its lines are traced, but `exit` and `atexit` are the parent's |
//!
//! Timer and counter totals (the calling thread's `th_timer`/`th_counter`, then the
//! process's `timer`/`counter`) are written right before every `atexit`, after every
//! other thread still running (the workers of `#[tokio::main]`'s runtime) has been
//! ended with its own `th_timer`/`th_counter` and `thread_exit` ([`api::end_threads`]). Each line is
//! written once: whichever path runs first writes `exit` and `atexit`; the others then
//! write nothing. After `atexit` the layer's sinks are flushed.
//!
//! ## `std::process::exit` and a dropped guard
//!
//! On Linux with glibc the lifecycle registers an exit handler (`on_exit`), which learns
//! the status passed to `exit`, also the one Rust's runtime passes once `main` returned.
//! A dropped guard (its last clone) therefore writes nothing there: `main`'s `Result` is
//! reported only after the guard is gone, and only the handler knows the code. The guard
//! hands the main thread's per-thread timer and counter values over to the handler
//! first. By the time exit handlers run, glibc has destroyed the
//! exiting thread's thread-local storage, where the layer keeps the thread's name and
//! region stack; so the handler writes its lines from a short-lived helper thread named
//! `main` and waits for it. The lines therefore show thread `main` and no region
//! indentation (git's `exit` keeps the dots of regions still open); the helper writes
//! through the subscriber that was current where the lifecycle started. After a direct
//! `std::process::exit` the main thread's per-thread timer values are not among the
//! totals (a dropped guard hands them over). A program that can call
//! [`Trace2Guard::exit`] instead gets exact lines.
//!
//! ## Windows
//!
//! `std::process::exit` calls `ExitProcess`, which runs no C runtime `atexit` handler.
//! It ends every other thread first, each with the exit code, then runs the exiting
//! thread's fiber-local storage callbacks and the executable's TLS callbacks; the
//! lifecycle registers one of each and keeps a parked "witness" thread (64 KiB of
//! stack), whose exit code tells the process's there. The first callback that runs
//! writes `exit` with that code and `atexit` (Wine 8 runs the fiber-local one; on a real
//! Windows the TLS callback is expected to run, which is not verified here). By then the
//! other threads are gone without cleanup: a background writer's worker too, so what it
//! had not written is lost, and a lock another thread held at that moment stays held.
//!
//! When `main` returns (or C code calls `exit`), the C runtime runs its `atexit`
//! handlers while the threads still run, then calls `ExitProcess` with the code. A
//! dropped guard therefore writes nothing, as on Linux with glibc: the lifecycle's
//! `atexit` handler drains the background writers (nothing queued is lost) and the
//! callbacks write `exit` and `atexit` with the code the process exits with, 1 for a
//! `main` that returns `Err`. This needs the exit to happen on the thread that started
//! the lifecycle (the one whose fiber-local callback Wine runs) with the witness
//! running; otherwise the dropped guard, or the `atexit` handler, writes code 0 at once,
//! as before. A guard dropped on that thread followed by `std::process::exit` on
//! another thread leaves `exit` and `atexit` to the TLS callback alone (none under Wine).
//! Git for Windows also writes `data` `windows/debugger_present` at startup when a
//! debugger is attached, and `data_json` `windows/memory` (peak memory counters) right
//! before every `exit`; so do we (see [`tracing_trace2_core::process_info`]).
//!
//! ## SIGPIPE
//!
//! Git installs a SIGPIPE handler that writes `signal` and then dies of the signal. A Rust
//! binary starts with SIGPIPE *ignored*, so writing to a closed pipe fails with `EPIPE`
//! instead: `println!` then panics ("failed printing to stdout"), which is traced as a
//! panic, and a program that handles the error exits as it decides. The lifecycle keeps
//! this behaviour and writes `signal` only where the signal's default action is in
//! force: when the program restored it before starting the lifecycle, or asked for it
//! with [`Lifecycle::with_default_sigpipe`] (then a write to a closed stdout ends the
//! process as it ends `git` or `cat`, with a `signal` line). A handler the program
//! installed itself is left alone.
//!
//! ## Children and the environment
//!
//! Git exports `GIT_TRACE2_PARENT_SID` (and the command hierarchy in
//! `GIT_TRACE2_PARENT_NAME`, updated at every `cmd_name`) into its own environment so
//! that every child, however it is started, nests under it. The lifecycle does the same:
//! when [`Trace2::lifecycle`] builds the layer, or at the latest at [`Lifecycle::start`],
//! whether or not other threads run by then, and every [`api::cmd_name`] updates the
//! name (see [`Trace2::with_env_export`], `docs/real-programs.md` and the reasons in
//! `docs/decisions.md`). Build the lifecycle before layers or runtimes that start
//! threads, so that the environment changes while the process has one thread. Children
//! started through [`crate::command::Trace2CommandExt`] get both variables set on their
//! own command in any case. A command whose environment was cleared or copied before the
//! lifecycle started inherits neither: [`crate::add_session_env`] sets them on it.

use std::panic::Location;
use std::process::{ExitCode, Termination};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use tracing_subscriber::prelude::*;
use tracing_trace2_core::timers;
use tracing_trace2_core::{Trace2Layer, api};

use crate::session_env;
use crate::{FilteredLayer, OptionalLayer, Trace2};
use tracing_core::Subscriber;
use tracing_subscriber::registry::LookupSpan;

/// What a process does on SIGPIPE once the lifecycle has started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sigpipe {
    /// Leave the disposition as it is (Rust ignores SIGPIPE); trace a `signal` line only
    /// if the default action is in force at start.
    #[default]
    Keep,
    /// Restore the default action (the process dies of SIGPIPE, as git does) and trace
    /// it with a `signal` line.
    Default,
}

/// A Trace2 layer and the lifecycle that goes with it, not started yet. Made by
/// [`Trace2::lifecycle`]; [`Lifecycle::start`] writes the first lines.
#[derive(Debug)]
pub struct Lifecycle {
    layer: Option<Trace2Layer>,
    exe_version: String,
    argv: Option<Vec<String>>,
    ancestry: bool,
    sigpipe: Sigpipe,
    env_export: bool,
    dst_debug: bool,
    message_limit: usize,
}

impl Trace2 {
    /// The layer from [`Trace2::layer`] with its lifecycle, for a program that builds its
    /// own subscriber: install [`Lifecycle::layer`], then call [`Lifecycle::start`].
    ///
    /// When a target is enabled, this also puts the session into the process's
    /// environment (see [`Trace2::with_env_export`]), so call it before building layers
    /// or runtimes that start threads when you can.
    pub fn lifecycle(&self) -> Lifecycle {
        let dst_debug = self.settings().dst_debug;
        // Before the layer is built: a background writer starts a thread there.
        if self.names_a_target() {
            session_env::export_session(self.env_export(), dst_debug);
        }
        let layer = self.unfiltered_layer();
        Lifecycle {
            layer,
            exe_version: self.exe_version().to_owned(),
            argv: None,
            ancestry: true,
            sigpipe: Sigpipe::Keep,
            env_export: self.env_export(),
            dst_debug,
            message_limit: self.message_limit(),
        }
    }

    /// Builds the layer, installs it on `tracing_subscriber::registry()` as the global
    /// default subscriber and starts the lifecycle. Call it first thing in `main`.
    ///
    /// The layer is the subscriber's only one, so its level filter is installed as the
    /// subscriber's global filter rather than as a per-layer filter: it lets through the
    /// same spans and events, and spares the per-layer filter's work for every new span
    /// and event (its bit in the thread's filter state and in the span's record). With no
    /// target enabled, the disabled layer of
    /// [`Lifecycle::layer`] is installed, which changes nothing.
    ///
    /// When another global subscriber is already installed, it stays, and the lifecycle
    /// lines go to it.
    ///
    /// Keep the guard for the whole of `main`: a bare `init();` drops it at once (see
    /// [`Trace2Guard`] for what a drop writes), so it warns (`unused_must_use`; denied
    /// here to show it):
    ///
    /// ```compile_fail
    /// #![deny(unused_must_use)]
    /// tracing_trace2::Trace2::from_env().init();
    /// ```
    ///
    /// ```no_run
    /// #![deny(unused_must_use)]
    /// let _trace2 = tracing_trace2::Trace2::from_env().init();
    /// ```
    #[must_use = "the guard ends the trace when dropped: keep it for the whole of `main`"]
    #[track_caller]
    pub fn init(&self) -> Trace2Guard {
        let lifecycle = self.lifecycle();
        match lifecycle.unfiltered_layer() {
            // Ours is the subscriber's only layer: its filter as the global filter
            // decides what the per-layer filter would, without the per-layer filter's
            // work for every new span and event (see `Trace2Filter`'s `Layer`).
            Some(layer) => {
                let _ = tracing_subscriber::registry()
                    .with(layer.filter())
                    .with(layer)
                    .try_init();
            }
            None => {
                let _ = tracing_subscriber::registry()
                    .with(lifecycle.layer())
                    .try_init();
            }
        }
        lifecycle.start()
    }
}

impl Lifecycle {
    /// The layer to add to the program's subscriber, behind its level filter (see
    /// [`Trace2::layer`]); disabled when no target is enabled: it then changes nothing
    /// in the program's subscriber (see [`OptionalLayer`]).
    pub fn layer<S>(&self) -> OptionalLayer<FilteredLayer<S>, S>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        OptionalLayer::from_option(self.layer.clone().map(Trace2Layer::filtered))
    }

    /// The layer without its level filter (see [`Trace2::unfiltered_layer`]).
    pub fn unfiltered_layer(&self) -> Option<Trace2Layer> {
        self.layer.clone()
    }

    /// The arguments written in `start` (default: the process's own, `std::env::args_os`,
    /// non-UTF-8 bytes replaced).
    pub fn with_argv<I, S>(mut self, argv: I) -> Lifecycle
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.argv = Some(argv.into_iter().map(Into::into).collect());
        self
    }

    /// Whether to write `cmd_ancestry`, and on Windows Git for Windows' `data_json`
    /// `windows/ancestry` line before it (default: yes, where the platform tells).
    pub fn with_ancestry(mut self, ancestry: bool) -> Lifecycle {
        self.ancestry = ancestry;
        self
    }

    /// Restores SIGPIPE's default action at start: writing to a closed pipe then ends the
    /// process with a `signal` line, as it ends git (see the module documentation).
    pub fn with_default_sigpipe(mut self) -> Lifecycle {
        self.sigpipe = Sigpipe::Default;
        self
    }

    /// Writes `version`, `start` and `cmd_ancestry` (at the caller's source location),
    /// exports the session for children if [`Trace2::lifecycle`] did not already, and
    /// installs the exit, panic and SIGPIPE hooks. The layer should be installed by now
    /// (as the global default, or as the calling thread's default): these lines, and
    /// those of the exit handler, go to the subscriber that is current here.
    ///
    /// Without an enabled target nothing is written or installed; the guard's exit
    /// helpers still end the process. A second start in one process writes nothing.
    #[must_use = "the guard ends the trace when dropped: keep it for the whole of `main`"]
    #[track_caller]
    pub fn start(self) -> Trace2Guard {
        let Some(layer) = self.layer else {
            return Trace2Guard::new();
        };
        let started_at = Location::caller();
        let mut first = false;
        SHARED.get_or_init(|| {
            first = true;
            LifecycleState {
                layer,
                dispatch: tracing::dispatcher::get_default(tracing::Dispatch::clone),
                started_at,
                done: AtomicBool::new(false),
                pid: std::process::id(),
                message_limit: self.message_limit,
            }
        });
        if !first {
            return Trace2Guard::new();
        }
        session_env::export_session(self.env_export, self.dst_debug);
        api::version(&self.exe_version);
        let argv = self.argv.unwrap_or_else(|| {
            std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        });
        api::start(&argv);
        // Git for Windows' startup line for a debugger that started the process (git's
        // `the_repository`, not set up yet, has repository id 0 in it).
        #[cfg(windows)]
        if tracing_trace2_core::process_info::debugger_present() {
            api::data("process", "windows/debugger_present", "1", Some(0));
        }
        if self.ancestry {
            let names = crate::ancestry::ancestry();
            if !names.is_empty() {
                // Git for Windows' older line first, for the consumers that read it.
                #[cfg(windows)]
                api::data_json(
                    "process",
                    "windows/ancestry",
                    &crate::ancestry::windows_ancestry_json(&names),
                    Some(0),
                );
                api::cmd_ancestry(&names);
            }
        }
        hooks::install_exit_handler();
        install_panic_hook();
        hooks::install_sigpipe(self.sigpipe);
        Trace2Guard::new()
    }
}

/// Ends the traced process. Keep it (or a clone) alive for the whole of `main`.
///
/// - [`Trace2Guard::finish`], [`Trace2Guard::finish_code`],
///   [`Trace2Guard::finish_result`] and [`Trace2Guard::exit`] write `exit` with the
///   code the process ends with, then `atexit`.
/// - Dropping the last clone leaves the code to the process's real exit: on Linux with
///   glibc the exit handler writes `exit` and `atexit` with the status the process
///   exits with, so a `main` that returns `Err` is traced with code 1 (see the module
///   documentation); on Windows `ExitProcess`'s callbacks do the same. While a panic
///   unwinds, the dropped guard writes code 101 at once. Elsewhere (and on Windows when
///   the callbacks cannot learn the code), it writes code 0 at once: end `main` with a
///   `finish` method there.
///
/// The guard is `Clone`, `Send` and `Sync`: a program that keeps its tracing setup in a
/// cloneable handle keeps a clone there; the lines are written once, by the first
/// `finish`/`exit`, or when the last clone is dropped.
///
/// Every method is `#[track_caller]`: the `exit` and `atexit` lines name the code that
/// called it. A helper of the program that calls one for `main` should be
/// `#[track_caller]` too, so that the lines name `main`'s call of the helper.
#[derive(Clone, Debug)]
#[must_use = "the guard ends the trace when dropped: keep it for the whole of `main`"]
pub struct Trace2Guard {
    /// Shared by the clones; its drop is the dropped guard's ending.
    _ending: Arc<EndOnDrop>,
}

/// The ending of a guard whose last clone is dropped.
#[derive(Debug)]
struct EndOnDrop;

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        end_on_drop();
    }
}

impl Trace2Guard {
    fn new() -> Trace2Guard {
        Trace2Guard {
            _ending: Arc::new(EndOnDrop),
        }
    }

    /// Writes `exit` with `code` (masked to 0..=255 as the system does) and `atexit`,
    /// then ends the process with `std::process::exit(code)`.
    #[track_caller]
    pub fn exit(self, code: i32) -> ! {
        exit_process(code)
    }

    /// The end of a `main` that returns a value: reports `value` as Rust would (an `Err`
    /// is printed to stderr as `Error: …`), writes `exit` with the resulting code and
    /// `atexit`, and returns the code for `main` to return.
    ///
    /// ```no_run
    /// use std::process::ExitCode;
    ///
    /// fn run() -> Result<(), String> { Err("no repository".into()) }
    ///
    /// fn main() -> ExitCode {
    ///     let trace2 = tracing_trace2::Trace2::from_env().init();
    ///     trace2.finish(run()) // exit code 1, traced as `exit code:1`
    /// }
    /// ```
    #[track_caller]
    pub fn finish<T: Termination>(self, value: T) -> ExitCode {
        let code = value.report();
        finish_process(exit_code_value(code));
        code
    }

    /// The end of a program that computes its exit code as a number (an `i32`, or a
    /// `u8`): writes `exit` with `code` and `atexit`, and returns the `ExitCode` for
    /// `main` to return. The code is masked to 0..=255 for both, as git masks the code
    /// it traces and as `exit` passes it to a Unix parent: -1 becomes 255, 256 becomes 0.
    ///
    /// ```no_run
    /// use std::process::ExitCode;
    ///
    /// fn main() -> ExitCode {
    ///     let trace2 = tracing_trace2::Trace2::from_env().init();
    ///     let code: i32 = 3; // computed by the program
    ///     trace2.finish_code(code) // exit code 3, traced as `exit code:3`
    /// }
    /// ```
    #[track_caller]
    pub fn finish_code(self, code: impl Into<i32>) -> ExitCode {
        let code = code.into() & 0xff;
        finish_process(code);
        ExitCode::from(code as u8)
    }

    /// The end of a `main` that returns a `Result`: writes `exit` with code 1 for an
    /// `Err` (the code Rust exits with once it has printed `Error: …`) or 0 for `Ok`,
    /// then `atexit`, and hands the result back for `main` to return.
    ///
    /// An `Err` is first written as an `error` line, as git's `die()` writes its message
    /// before `exit`: its `Display` text in the alternate form (`{:#}`), which for
    /// `anyhow::Error` and `eyre::Report` is the whole chain on one line (`reading
    /// config: No such file or directory`) where `{}` would give the outermost context
    /// alone; other types' `Display` usually ignores the flag. The text is bounded like a
    /// region's message ([`Trace2::with_message_limit`]).
    ///
    /// Simply dropping the guard (`let _trace2 = …init(); run()?; Ok(())`) gets the same
    /// code on Linux with glibc and on Windows, from the exit hooks; this works everywhere
    /// and names the caller in the lines:
    ///
    /// ```no_run
    /// fn run() -> Result<(), String> { Err("no repository".into()) }
    ///
    /// fn main() -> Result<(), String> {
    ///     let trace2 = tracing_trace2::Trace2::from_env().init();
    ///     // error "no repository", then exit code 1 in the trace, as the process
    ///     trace2.finish_result(run())
    /// }
    /// ```
    ///
    /// An error type with `Debug` alone (Rust's `main` needs no more) does not compile
    /// here; [`Trace2Guard::finish`] takes it (`exit` code 1, no `error` line), or map it
    /// to a text first.
    #[track_caller]
    pub fn finish_result<T, E: std::fmt::Display>(self, result: Result<T, E>) -> Result<T, E> {
        if let Err(err) = &result {
            write_error(err);
        }
        finish_process(if result.is_ok() { 0 } else { 1 });
        result
    }
}

/// The `error` line of a failed `main`, at the caller: `err`'s alternate `Display`
/// text, bounded, as both message and format (Rust has no format string to show). Not
/// formatted at all unless the lifecycle runs and its last lines are still to come.
#[track_caller]
fn write_error(err: &dyn std::fmt::Display) {
    let Some(shared) = SHARED.get() else { return };
    if shared.done.load(Ordering::Acquire) || shared.pid != std::process::id() {
        return;
    }
    let text = error_text::bounded(err, shared.message_limit);
    api::error(&text, &text);
}

/// What a dropped guard does (its last clone): see [`Trace2Guard`].
fn end_on_drop() {
    let Some(shared) = SHARED.get() else { return };
    // A destructor has no caller location: the lines name where the lifecycle started
    // (the top of `main`), not this crate.
    if std::thread::panicking() {
        // The value Rust's runtime exits with when `main` panics.
        finish_process_at(101, None);
        return;
    }
    if hooks::exit_status_known()
        && !shared.done.load(Ordering::Acquire)
        && shared.pid == std::process::id()
        && shared.writes_to_trace2()
    {
        // The exit hooks write `exit` with the status the process really exits with
        // (`main`'s `Err` becomes 1 only after this drop): glibc's exit handler, from a
        // thread of its own after this thread's thread-locals are gone; on Windows
        // `ExitProcess`'s callbacks, where they may be gone too. Hand over this thread's
        // timer and counter values, and flush what is written so far.
        timers::hand_over_thread_totals();
        shared.layer.flush();
        return;
    }
    finish_process_at(0, None);
}

/// Writes `exit` with `code` (masked to 0..=255) and `atexit` if the lifecycle is
/// running, then ends the process with `std::process::exit(code)`. Usable anywhere,
/// without the guard.
#[track_caller]
pub fn exit_process(code: i32) -> ! {
    finish_process(code);
    std::process::exit(code)
}

/// Whether a lifecycle with an enabled target has started in this process (and so
/// whether children should nest under this session).
pub fn is_active() -> bool {
    SHARED.get().is_some()
}

/// Flushes the layer's sinks (before an exec replaces the process).
#[cfg(unix)]
pub(crate) fn flush() {
    if let Some(shared) = SHARED.get() {
        shared.layer.flush();
    }
}

/// The process-wide lifecycle state, shared with the exit, panic and signal hooks.
struct LifecycleState {
    layer: Trace2Layer,
    /// The subscriber that was current where the lifecycle started: the exit handler's
    /// helper thread writes through it (it has no scoped default of its own).
    dispatch: tracing::Dispatch,
    /// Where the program started the lifecycle: the location of the lines written
    /// where no caller is known (a dropped guard, the exit handler).
    started_at: &'static Location<'static>,
    /// Set once the last lines (`atexit`, or `signal`) are written: nothing follows them.
    done: AtomicBool,
    /// The process that started the lifecycle. A child made by `fork` without `exec`
    /// inherits the hooks and this state, but its ending is not the traced process's:
    /// it writes no `exit`, `atexit` or `signal` under the parent's session.
    pid: u32,
    /// The bound of the `error` line of a failed `main` (the message bound).
    message_limit: usize,
}

static SHARED: OnceLock<LifecycleState> = OnceLock::new();

impl LifecycleState {
    /// Whether the subscriber current at start holds the Trace2 layer, so that the exit
    /// handler's helper thread can write through it.
    fn writes_to_trace2(&self) -> bool {
        self.dispatch.downcast_ref::<Trace2Layer>().is_some()
    }

    /// Runs `write` with the subscriber current at start as the default (the global
    /// default if that one has no Trace2 layer).
    fn with_dispatch(&self, write: impl FnOnce()) {
        if self.writes_to_trace2() {
            tracing::dispatcher::with_default(&self.dispatch, write);
        } else {
            write();
        }
    }
}

/// The shared state, if the lifecycle runs and its last lines are not written yet;
/// claims the right to write them.
fn claim_end() -> Option<&'static LifecycleState> {
    let shared = SHARED.get()?;
    // `done` first: once the lines are written, the guard's drop and the exit handler
    // that follow cost no `getpid` (a forked child copied `done` with the rest).
    if shared.done.load(Ordering::Acquire) || shared.pid != std::process::id() {
        return None;
    }
    (!shared.done.swap(true, Ordering::AcqRel)).then_some(shared)
}

/// `exit`, the totals, `atexit`, then a flush; once per process. The lines name the
/// caller's location.
#[track_caller]
fn finish_process(code: i32) {
    finish_process_at(code, Some(Location::caller()));
}

/// [`finish_process`] at `at` (else at the lifecycle's start).
fn finish_process_at(code: i32, at: Option<&'static Location<'static>>) {
    let Some(shared) = claim_end() else { return };
    let at = at.unwrap_or(shared.started_at);
    api::exit_at(at, code);
    write_atexit(shared, at);
}

fn write_atexit(shared: &LifecycleState, at: &'static Location<'static>) {
    // Threads still running (the workers of `#[tokio::main]`'s runtime, shut down after
    // `main` returns) end first, their values joining the totals below.
    api::end_threads_at(at);
    timers::emit_thread_totals();
    timers::emit_handed_over_totals();
    timers::emit_process_totals();
    api::atexit_at(at);
    shared.layer.flush();
}

/// The number behind an `ExitCode`, which has no getter: the code it equals.
fn exit_code_value(code: ExitCode) -> i32 {
    (0..=u8::MAX)
        .find(|&n| ExitCode::from(n) == code)
        .map_or(1, i32::from)
}

fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if let Some(shared) = SHARED.get()
            && !shared.done.load(Ordering::Acquire)
        {
            let payload = info.payload();
            let msg = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("Box<dyn Any>");
            let (file, line) = info
                .location()
                .map_or((None, 0), |l| (Some(l.file()), l.line()));
            // A panic inside a field's Debug/Display happens while the layer reads
            // the field: let this line through all the same.
            tracing_trace2_core::in_panic_hook(|| {
                api::error_at(file, line, msg, msg);
                // With panic = "abort" the process dies right after the hooks.
                shared.layer.flush();
            });
        }
        previous(info);
    }));
}

/// The C-level hooks: the exit handler and the SIGPIPE handler.
#[cfg(unix)]
mod hooks {
    use std::ffi::c_int;
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    use std::ffi::c_void;

    use super::{LifecycleState, Sigpipe, claim_end, write_atexit};
    use tracing_trace2_core::api;

    use libc::{SIG_DFL, SIG_ERR, SIG_IGN, SIGPIPE, raise, signal};

    /// Whether the exit handler learns the status the process exits with (glibc's
    /// `on_exit`); elsewhere it is registered with `atexit` and does not.
    pub(super) fn exit_status_known() -> bool {
        cfg!(all(target_os = "linux", target_env = "gnu"))
    }

    unsafe extern "C" {
        // glibc's `on_exit` passes the exit status to the handler; the libc crate does not
        // declare it.
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        fn on_exit(function: extern "C" fn(c_int, *mut c_void), arg: *mut c_void) -> c_int;
    }

    pub(super) fn install_exit_handler() {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: the handler is a plain function that lives for the whole process and
        // ignores its argument.
        unsafe {
            on_exit(exit_handler_with_status, std::ptr::null_mut());
        }
        #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
        // SAFETY: the handler is a plain function that lives for the whole process.
        unsafe {
            libc::atexit(exit_handler);
        }
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    extern "C" fn exit_handler_with_status(status: c_int, _arg: *mut c_void) {
        at_exit(status);
    }

    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    extern "C" fn exit_handler() {
        at_exit(0);
    }

    /// Runs when the process calls `exit` without going through the guard.
    fn at_exit(status: c_int) {
        let Some(shared) = claim_end() else { return };
        // glibc destroyed this thread's thread-locals before running exit handlers; a
        // fresh thread named `main` has its own and is traced as the main thread.
        let write = move || shared.with_dispatch(|| write_exit_lines(shared, status));
        if let Ok(helper) = std::thread::Builder::new()
            .name("main".to_owned())
            .spawn(write)
        {
            let _ = helper.join();
        }
    }

    fn write_exit_lines(shared: &'static LifecycleState, status: c_int) {
        // A program that wrote `exit` itself before calling `std::process::exit` gets one.
        if !api::exit_written() {
            api::exit_at(shared.started_at, status);
        }
        write_atexit(shared, shared.started_at);
    }

    pub(super) fn install_sigpipe(mode: Sigpipe) {
        // SAFETY: `signal` only swaps the disposition; the handler is a plain function.
        unsafe {
            let previous = signal(SIGPIPE, SIG_IGN);
            let trace = match mode {
                Sigpipe::Default => true,
                Sigpipe::Keep => previous == SIG_DFL,
            };
            if trace {
                signal(
                    SIGPIPE,
                    on_sigpipe as extern "C" fn(c_int) as libc::sighandler_t,
                );
            } else if previous != SIG_IGN && previous != SIG_ERR {
                signal(SIGPIPE, previous);
            }
        }
    }

    /// Writes `signal`, then dies of the signal with its default action, as git does.
    extern "C" fn on_sigpipe(signo: c_int) {
        if let Some(shared) = claim_end() {
            api::signal(signo);
            shared.layer.flush();
        }
        // SAFETY: restoring the default action and raising the signal again is what ends
        // the process; the signal stays blocked until this handler returns.
        unsafe {
            signal(SIGPIPE, SIG_DFL);
            raise(SIGPIPE);
        }
    }
}

mod error_text;

/// Windows: the C runtime's `atexit`, and `ExitProcess`'s callbacks for
/// `std::process::exit` (see the module).
#[cfg(windows)]
mod windows_hooks;
#[cfg(windows)]
use windows_hooks as hooks;

#[cfg(not(any(unix, windows)))]
mod hooks {
    use super::Sigpipe;

    /// No exit handler here.
    pub(super) fn exit_status_known() -> bool {
        false
    }

    pub(super) fn install_exit_handler() {}

    pub(super) fn install_sigpipe(_mode: Sigpipe) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_recovered_from_exit_code_values() {
        assert_eq!(exit_code_value(ExitCode::SUCCESS), 0);
        assert_eq!(exit_code_value(ExitCode::FAILURE), 1);
        assert_eq!(exit_code_value(ExitCode::from(44)), 44);
        assert_eq!(exit_code_value(ExitCode::from(255)), 255);
        assert_eq!(exit_code_value(Err::<(), _>("x").report()), 1);
    }

    #[test]
    fn the_guard_can_live_in_a_shared_handle() {
        fn shareable<T: Clone + Send + Sync + 'static>() {}
        shareable::<Trace2Guard>();
    }

    #[test]
    fn finish_code_returns_the_code_it_was_given() {
        // Without a started lifecycle nothing is written; the code still goes back.
        let guard = Trace2::with_settings(crate::Settings::default())
            .lifecycle()
            .start();
        let clone = guard.clone();
        drop(guard);
        assert_eq!(clone.finish_code(42), ExitCode::from(42));
    }

    #[test]
    fn finish_code_takes_the_codes_programs_have_and_masks_them() {
        let guard = || {
            Trace2::with_settings(crate::Settings::default())
                .lifecycle()
                .start()
        };
        let code: u8 = 200;
        assert_eq!(guard().finish_code(code), ExitCode::from(200));
        let code: i32 = 3;
        assert_eq!(guard().finish_code(code), ExitCode::from(3));
        // As git masks its code (`code & 0xff`) and a Unix parent sees it.
        assert_eq!(guard().finish_code(-1), ExitCode::from(255));
        assert_eq!(guard().finish_code(256), ExitCode::from(0));
        assert_eq!(guard().finish_code(300), ExitCode::from(44));
    }

    #[test]
    fn a_lifecycle_without_targets_installs_nothing() {
        let guard = Trace2::with_settings(crate::Settings::default())
            .lifecycle()
            .start();
        assert!(!is_active());
        drop(guard);
        assert!(!is_active());
    }
}
