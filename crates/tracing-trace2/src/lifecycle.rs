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
//! // dropping the guard at the end of main writes exit (code 0) and atexit
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
//! # How each way out of the process is traced
//!
//! | the process ends by | lines written |
//! |---|---|
//! | returning from `main` (the guard is dropped) | `exit` code 0, then `atexit` |
//! | `main` returning [`Trace2Guard::finish`]`(value)` (`ExitCode`, `Result`, …) | `exit` with the code the value reports, then `atexit` |
//! | [`Trace2Guard::exit`] / [`exit`] | `exit` with the code (masked to 0..=255), then `atexit` |
//! | `std::process::exit` called directly, or `exit` from C code | Linux with glibc: `exit` with the code and `atexit`, from an exit handler (see below); elsewhere `exit` code 0 and `atexit` |
//! | a panic that unwinds out of `main` | `error` (the panic message, at the panic's file:line), `exit` code 101, `atexit` |
//! | a panic with `panic = "abort"` | `error`, then the process dies of SIGABRT: no `exit`/`atexit`, like git's `BUG()` |
//! | a panic on another thread | `error` only; the process goes on |
//! | SIGPIPE, when its default action is in force (see below) | `signal` (signo 13), then the process dies of it: no `exit`/`atexit`, as git |
//! | any other fatal signal, `abort`, `_exit` | the trace stops where it was, as git's |
//! | a child made by `fork` without `exec` ends | nothing: its lines are traced, but `exit` and `atexit` are the parent's |
//!
//! Timer and counter totals (the calling thread's `th_timer`/`th_counter`, then the
//! process's `timer`/`counter`) are written right before every `atexit`. Each line is
//! written once: whichever path runs first writes `exit` and `atexit`; the others then
//! write nothing. After `atexit` the layer's sinks are flushed.
//!
//! ## `std::process::exit`
//!
//! On Linux with glibc the lifecycle registers an exit handler (`on_exit`), which learns
//! the status passed to `exit`. By the time exit handlers run, glibc has destroyed the
//! exiting thread's thread-local storage, where the layer keeps the thread's name and
//! region stack; so the handler writes its lines from a short-lived helper thread named
//! `main` and waits for it. The lines therefore show thread `main` and no region
//! indentation (git's `exit` keeps the dots of regions still open), the helper needs the
//! layer to be installed as the *global* default subscriber, and the main thread's
//! per-thread timer values are not among the totals. A program that can call
//! [`Trace2Guard::exit`] instead gets exact lines.
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
//! `GIT_TRACE2_PARENT_NAME`) into its own environment so that every child, however it is
//! started, nests under it. Changing the environment is only sound while no other thread
//! can read it (see [`tracing_trace2_core::Session::export_env`]), so the lifecycle does
//! it only when it can check that the process has a single thread (Linux: the entries of
//! `/proc/self/task`); start the lifecycle first thing in `main` to get it. Children
//! started through [`crate::command::Trace2CommandExt`] get both variables set on their
//! own command in any case.

use std::panic::Location;
use std::process::{ExitCode, Termination};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use tracing_subscriber::prelude::*;
use tracing_trace2_core::timers;
use tracing_trace2_core::{Session, Trace2Layer, api};

use crate::Trace2;

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
}

impl Trace2 {
    /// The layer from [`Trace2::layer`] with its lifecycle, for a program that builds its
    /// own subscriber: install [`Lifecycle::layer`], then call [`Lifecycle::start`].
    pub fn lifecycle(&self) -> Lifecycle {
        Lifecycle {
            layer: self.layer(),
            exe_version: self.exe_version().to_owned(),
            argv: None,
            ancestry: true,
            sigpipe: Sigpipe::Keep,
        }
    }

    /// Builds the layer, installs `tracing_subscriber::registry().with(layer)` as the
    /// global default subscriber and starts the lifecycle. Call it first thing in `main`.
    ///
    /// When another global subscriber is already installed, it stays, and the lifecycle
    /// lines go to it.
    ///
    /// Keep the guard for the whole of `main`: a bare `init();` would end the trace at
    /// once, so it warns (`unused_must_use`; denied here to show it):
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
    #[must_use = "dropping the guard writes the exit lines at once"]
    #[track_caller]
    pub fn init(&self) -> Trace2Guard {
        let lifecycle = self.lifecycle();
        let _ = tracing_subscriber::registry()
            .with(lifecycle.layer())
            .try_init();
        lifecycle.start()
    }
}

impl Lifecycle {
    /// The layer to add to the program's subscriber; `None` when no target is enabled.
    pub fn layer(&self) -> Option<Trace2Layer> {
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

    /// Whether to write `cmd_ancestry` (default: yes, where the platform tells).
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
    /// exports the session for children
    /// when the process has a single thread, and installs the exit, panic and SIGPIPE
    /// hooks. The layer should be installed by now, else these lines go nowhere.
    ///
    /// Without an enabled target nothing is written or installed; the guard's exit
    /// helpers still end the process. A second start in one process writes nothing.
    #[must_use = "dropping the guard writes the exit lines at once"]
    #[track_caller]
    pub fn start(self) -> Trace2Guard {
        let Some(layer) = self.layer else {
            return Trace2Guard { _private: () };
        };
        let started_at = Location::caller();
        let mut first = false;
        SHARED.get_or_init(|| {
            first = true;
            Shared {
                layer,
                started_at,
                done: AtomicBool::new(false),
                pid: std::process::id(),
            }
        });
        if !first {
            return Trace2Guard { _private: () };
        }
        if single_threaded() {
            // SAFETY: this process has one thread (checked just above, and this thread
            // starts none in between), so nothing else can read or write the environment.
            unsafe { Session::global().export_env() };
        }
        api::version(&self.exe_version);
        let argv = self.argv.unwrap_or_else(|| {
            std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        });
        api::start(&argv);
        if self.ancestry {
            let names = crate::ancestry::ancestry();
            if !names.is_empty() {
                api::cmd_ancestry(&names);
            }
        }
        hooks::install_exit_handler();
        install_panic_hook();
        hooks::install_sigpipe(self.sigpipe);
        Trace2Guard { _private: () }
    }
}

/// Ends the traced process: dropping it writes `exit` (code 0, or 101 while a panic
/// unwinds) and `atexit`; [`Trace2Guard::exit`] and [`Trace2Guard::finish`] end it with
/// another code. Keep it alive for the whole of `main`.
#[derive(Debug)]
#[must_use = "dropping the guard writes the exit lines at once"]
pub struct Trace2Guard {
    _private: (),
}

impl Trace2Guard {
    /// Writes `exit` with `code` (masked to 0..=255 as the system does) and `atexit`,
    /// then ends the process with `std::process::exit(code)`.
    #[track_caller]
    pub fn exit(self, code: i32) -> ! {
        std::mem::forget(self);
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
        std::mem::forget(self);
        let code = value.report();
        finish_process(exit_code_value(code));
        code
    }

    /// The end of a `main` that returns a `Result`: writes `exit` with code 1 for an
    /// `Err` (the code Rust exits with once it has printed `Error: …`) or 0 for `Ok`,
    /// then `atexit`, and hands the result back for `main` to return.
    ///
    /// Dropping the guard instead (`let _trace2 = …init(); run()?; Ok(())`) cannot know
    /// that `main` is about to return an error: it writes code 0. End such a `main`
    /// with this:
    ///
    /// ```no_run
    /// fn run() -> Result<(), String> { Err("no repository".into()) }
    ///
    /// fn main() -> Result<(), String> {
    ///     let trace2 = tracing_trace2::Trace2::from_env().init();
    ///     trace2.finish_result(run()) // exit code 1 in the trace, as the process
    /// }
    /// ```
    #[track_caller]
    pub fn finish_result<T, E>(self, result: Result<T, E>) -> Result<T, E> {
        std::mem::forget(self);
        finish_process(if result.is_ok() { 0 } else { 1 });
        result
    }
}

impl Drop for Trace2Guard {
    fn drop(&mut self) {
        // The value Rust's runtime exits with when `main` panics.
        let code = if std::thread::panicking() { 101 } else { 0 };
        // A destructor has no caller location: the lines name where the lifecycle
        // started (the top of `main`), not this crate.
        let at = SHARED.get().map(|s| s.started_at);
        finish_process_at(code, at);
    }
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
struct Shared {
    layer: Trace2Layer,
    /// Where the program started the lifecycle: the location of the lines written
    /// where no caller is known (a dropped guard, the exit handler).
    started_at: &'static Location<'static>,
    /// Set once the last lines (`atexit`, or `signal`) are written: nothing follows them.
    done: AtomicBool,
    /// The process that started the lifecycle. A child made by `fork` without `exec`
    /// inherits the hooks and this state, but its ending is not the traced process's:
    /// it writes no `exit`, `atexit` or `signal` under the parent's session.
    pid: u32,
}

static SHARED: OnceLock<Shared> = OnceLock::new();

/// The shared state, if the lifecycle runs and its last lines are not written yet;
/// claims the right to write them.
fn claim_end() -> Option<&'static Shared> {
    let shared = SHARED.get()?;
    if shared.pid != std::process::id() {
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

fn write_atexit(shared: &Shared, at: &'static Location<'static>) {
    timers::emit_thread_totals();
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

/// Whether this process has exactly one thread.
fn single_threaded() -> bool {
    #[cfg(target_os = "linux")]
    {
        std::fs::read_dir("/proc/self/task").is_ok_and(|tasks| tasks.count() == 1)
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// The C-level hooks: the exit handler and the SIGPIPE handler.
#[cfg(unix)]
mod hooks {
    use std::ffi::c_int;
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    use std::ffi::c_void;

    use super::{Shared, Sigpipe, claim_end, write_atexit};
    use tracing_trace2_core::api;

    use libc::{SIG_DFL, SIG_ERR, SIG_IGN, SIGPIPE, raise, signal};

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
        let write = move || write_exit_lines(shared, status);
        if let Ok(helper) = std::thread::Builder::new()
            .name("main".to_owned())
            .spawn(write)
        {
            let _ = helper.join();
        }
    }

    fn write_exit_lines(shared: &'static Shared, status: c_int) {
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

/// Windows: the C runtime's `atexit`, which runs when `main` returns through the C
/// runtime and when C code calls `exit`. `std::process::exit` calls `ExitProcess`
/// directly, which runs no `atexit` handler: a process that ends that way has no `exit`
/// and `atexit` lines, like one that is killed ([`Trace2Guard::exit`] writes them). There
/// is no SIGPIPE: a write to a closed pipe fails with an error.
#[cfg(windows)]
mod hooks {
    use super::{Sigpipe, claim_end, write_atexit};
    use tracing_trace2_core::api;

    pub(super) fn install_exit_handler() {
        // SAFETY: the handler is a plain function that lives for the whole process.
        unsafe {
            libc::atexit(exit_handler);
        }
    }

    /// Runs when the process calls `exit` without going through the guard; the code is
    /// not known here (0 is written, as on Unix without glibc).
    extern "C" fn exit_handler() {
        let Some(shared) = claim_end() else { return };
        if !api::exit_written() {
            api::exit_at(shared.started_at, 0);
        }
        write_atexit(shared, shared.started_at);
    }

    pub(super) fn install_sigpipe(_mode: Sigpipe) {}
}

#[cfg(not(any(unix, windows)))]
mod hooks {
    use super::Sigpipe;

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
    fn a_lifecycle_without_targets_installs_nothing() {
        let guard = Trace2::with_settings(crate::Settings::default())
            .lifecycle()
            .start();
        assert!(!is_active());
        drop(guard);
        assert!(!is_active());
    }
}
