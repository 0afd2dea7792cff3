//! Typed functions for the Trace2 events that are not spans or ordinary events.
//!
//! Each function hands its call straight to the [`crate::Trace2Layer`] of the calling
//! thread's current `tracing` dispatcher (the call's value is a `wire::ApiCall`), which renders it exactly as git
//! would. The calls are not `tracing` events: the program's filters (a global
//! `EnvFilter::new("warn")`, per-layer filters) cannot drop them, and other layers
//! (`fmt`, exporters) never see them. Without a Trace2 layer they do nothing.
//!
//! The functions are `#[track_caller]`: the line's file and line are those of the
//! code that called them (as a relative path, see [`crate::callsite`]). Values of
//! `start`, `child_start`, `exec` and `def_param` are redacted here (see
//! [`crate::redact`]).

use std::panic::Location;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::time::Instant;

use std::borrow::Cow;

use crate::redact::redact;
use crate::session::Session;
use crate::wire::{ApiCall, ApiChild, ApiRegion, ApiTimer, Origin};
use tracing_trace2_record::Trace2Event;

static NEXT_CHILD_ID: AtomicU64 = AtomicU64::new(0);
static NEXT_EXEC_ID: AtomicU64 = AtomicU64::new(0);
static LAST_EXIT_CODE: AtomicI32 = AtomicI32::new(0);
static EXIT_WRITTEN: AtomicBool = AtomicBool::new(false);
/// Whether repository 1 was defined: git's `the_repository`, which its process lines
/// (`windows/memory`) name, has id 1 once set up and 0 before.
static FIRST_REPO_DEFINED: AtomicBool = AtomicBool::new(false);

/// The caller of the public function, as the origin of its line.
#[track_caller]
fn caller() -> Origin<'static> {
    Origin::Caller(Location::caller())
}

/// A list for the wire, each item redacted when `redacted`.
fn list<S: AsRef<str>>(items: &[S], redacted: bool) -> Vec<Cow<'_, str>> {
    items
        .iter()
        .map(|s| {
            if redacted {
                redact(s.as_ref())
            } else {
                Cow::Borrowed(s.as_ref())
            }
        })
        .collect()
}

/// The items of a list, borrowed.
fn items<'a>(list: &'a [Cow<'_, str>]) -> Vec<&'a str> {
    list.iter().map(|s| s.as_ref()).collect()
}

/// `version`: the first line of a process. The layers write it by themselves before
/// their first line if the program does not call this.
#[track_caller]
pub fn version(exe: &str) {
    ApiCall::Version { exe }.send(caller());
}

/// `start`: the program's arguments (redacted).
#[track_caller]
pub fn start<S: AsRef<str>>(argv: &[S]) {
    let argv = list(argv, true);
    ApiCall::Start {
        argv: &items(&argv),
    }
    .send(caller());
}

/// `cmd_ancestry`: the names of the parent processes, nearest first.
#[track_caller]
pub fn cmd_ancestry<S: AsRef<str>>(ancestry: &[S]) {
    let ancestry = list(ancestry, false);
    ApiCall::Plain(Trace2Event::CmdAncestry {
        ancestry: &items(&ancestry),
    })
    .send(caller());
}

/// `cmd_path`: the resolved executable path.
#[track_caller]
pub fn cmd_path(path: &str) {
    ApiCall::Plain(Trace2Event::CmdPath { path }).send(caller());
}

/// `cmd_name`: the command verb. Its hierarchy (`<parent hierarchy>/<name>`) becomes the
/// hierarchy children inherit; repeated calls chain, as in git. The first call of the
/// process then runs the hook set with [`set_after_first_cmd_name`] (git lists the
/// `def_param` events there).
#[track_caller]
pub fn cmd_name(name: &str) {
    let hierarchy = Session::global().push_cmd_name(name);
    ApiCall::CmdName {
        name,
        hierarchy: &hierarchy,
    }
    .send(caller());
    if !CMD_NAME_SEEN.swap(true, Ordering::AcqRel)
        && let Some(hook) = AFTER_FIRST_CMD_NAME.get()
    {
        hook();
    }
}

/// What runs once, right after the first `cmd_name` of the process.
type CmdNameHook = Box<dyn Fn() + Send + Sync>;

static AFTER_FIRST_CMD_NAME: OnceLock<CmdNameHook> = OnceLock::new();
static CMD_NAME_SEEN: AtomicBool = AtomicBool::new(false);

/// Sets the function the first [`cmd_name`] of the process calls right after its own
/// event (the facade emits the `def_param` listing there, as git does). Only the first
/// hook set is kept: returns `false` when one was already set. A hook set after the
/// first `cmd_name` never runs.
pub fn set_after_first_cmd_name(hook: impl Fn() + Send + Sync + 'static) -> bool {
    AFTER_FIRST_CMD_NAME.set(Box::new(hook)).is_ok()
}

/// `cmd_mode`: a command sub-mode.
#[track_caller]
pub fn cmd_mode(mode: &str) {
    ApiCall::Plain(Trace2Event::CmdMode { name: mode }).send(caller());
}

/// `alias`: an alias and what it expands to.
#[track_caller]
pub fn alias<S: AsRef<str>>(alias: &str, argv: &[S]) {
    let argv = list(argv, false);
    ApiCall::Plain(Trace2Event::Alias {
        alias,
        argv: &items(&argv),
    })
    .send(caller());
}

/// `def_param`: an interesting setting with its scope (`system`, `global`, `local`,
/// `worktree`, `command`, `submodule`, `unknown`); `value` is redacted. `None` is a
/// valueless config entry.
#[track_caller]
pub fn def_param(scope: &str, param: &str, value: Option<&str>) {
    let redacted = value.map(redact);
    ApiCall::DefParam {
        scope,
        param,
        value: redacted.as_deref(),
    }
    .send(caller());
}

/// `def_repo`: a repository got its id.
#[track_caller]
pub fn def_repo(repo: i64, worktree: &str) {
    if repo == 1 {
        FIRST_REPO_DEFINED.store(true, Ordering::Relaxed);
    }
    ApiCall::Plain(Trace2Event::DefRepo { repo, worktree }).send(caller());
}

/// `region_enter` without a span: for code that needs git's exact region calls, where
/// the leave may carry another message than the enter. Spans are the usual way.
/// Empty strings are left out of the lines.
#[track_caller]
pub fn region_enter(category: &str, label: &str, msg: Option<&str>, repo: Option<i64>) {
    let region = ApiRegion {
        category,
        label,
        msg,
        repo,
    };
    ApiCall::RegionEnter(region).send(caller());
}

/// `region_leave` for the innermost region opened with [`region_enter`] on this thread.
#[track_caller]
pub fn region_leave(category: &str, label: &str, msg: Option<&str>, repo: Option<i64>) {
    let region = ApiRegion {
        category,
        label,
        msg,
        repo,
    };
    ApiCall::RegionLeave(region).send(caller());
}

/// `printf`: a free-form message (an empty message is written without text).
#[track_caller]
pub fn printf(msg: &str) {
    ApiCall::Printf { msg }.send(caller());
}

/// `printf` with an explicit source location (`None`: no file:line at all).
pub fn printf_at(file: Option<&str>, line: u32, msg: &str) {
    ApiCall::Printf { msg }.send(Origin::At(file, line));
}

/// `error`: an error message; `fmt` stands for git's format string (the message
/// template, without the values). Empty strings are left out of the line, as git does.
#[track_caller]
pub fn error(msg: &str, fmt: &str) {
    ApiCall::Error { msg, fmt }.send(caller());
}

/// `data`: a string datum. `repo` adds the repository column.
#[track_caller]
pub fn data(category: &str, key: &str, value: &str, repo: Option<i64>) {
    ApiCall::Data {
        category,
        key,
        value,
        repo,
    }
    .send(caller());
}

/// `data_json`: a JSON datum, written compactly.
#[track_caller]
pub fn data_json(category: &str, key: &str, value: &serde_json::Value, repo: Option<i64>) {
    let json = value.to_string();
    ApiCall::DataJson {
        category,
        key,
        json: &json,
        repo,
    }
    .send(caller());
}

/// What a `child_start` says about a child process: made with [`ChildStart::new`] and
/// the `with_*` methods (the type may gain fields, so it has no public literal).
///
/// ```
/// use tracing_trace2_core::api::{self, ChildStart};
///
/// let child = api::child_start(&ChildStart::new("?", &["version"]).with_git(true));
/// api::child_exit(&child, 4242, 0);
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ChildStart<'a> {
    /// Class (`?` when unclassified).
    pub class: &'a str,
    /// Hook name, for class `hook`.
    pub hook_name: Option<&'a str>,
    /// Working directory of the child, when set.
    pub cd: Option<&'a str>,
    /// Whether the child runs through a shell.
    pub use_shell: bool,
    /// Whether the child is a git sub-command (argv then leaves out the leading `git`).
    pub is_git: bool,
    /// The child's arguments (redacted when written).
    pub argv: &'a [&'a str],
}

impl<'a> ChildStart<'a> {
    /// A child of class `class` (`?` when unclassified) run with `argv`; no hook, no
    /// directory of its own, no shell, not a git sub-command.
    pub fn new(class: &'a str, argv: &'a [&'a str]) -> Self {
        ChildStart {
            class,
            argv,
            ..ChildStart::default()
        }
    }

    /// The hook's name (for class `hook`).
    pub fn with_hook_name(mut self, hook_name: &'a str) -> Self {
        self.hook_name = Some(hook_name);
        self
    }

    /// The child's working directory (`cd`), or `None` for this process's.
    pub fn with_cd(mut self, cd: Option<&'a str>) -> Self {
        self.cd = cd;
        self
    }

    /// Whether the child runs through a shell (`use_shell`).
    pub fn with_shell(mut self, use_shell: bool) -> Self {
        self.use_shell = use_shell;
        self
    }

    /// Whether the child is a git sub-command: its argv then leaves out the leading
    /// `git`, which the line adds back.
    pub fn with_git(mut self, is_git: bool) -> Self {
        self.is_git = is_git;
        self
    }
}

/// A started child, to be closed with [`child_exit`] or [`child_ready`].
#[derive(Clone, Copy, Debug)]
pub struct ChildToken {
    id: u64,
    started: Instant,
}

impl ChildToken {
    /// The child id (0, 1, 2, … per process).
    pub fn id(&self) -> u64 {
        self.id
    }

    fn elapsed_us(&self) -> u64 {
        self.started.elapsed().as_micros() as u64
    }
}

/// `child_start`: a child process is about to start. Returns the token that closes it.
#[track_caller]
pub fn child_start(child: &ChildStart<'_>) -> ChildToken {
    let id = NEXT_CHILD_ID.fetch_add(1, Ordering::Relaxed);
    let argv = list(child.argv, true);
    ApiCall::ChildStart(ApiChild {
        child_id: id,
        class: child.class,
        hook_name: child.hook_name.unwrap_or(""),
        cd: child.cd.unwrap_or(""),
        use_shell: child.use_shell,
        is_git: child.is_git,
        argv: &items(&argv),
    })
    .send(caller());
    ChildToken {
        id,
        started: Instant::now(),
    }
}

/// `child_exit`: the child was reaped (pid and code -1 when it could not start).
#[track_caller]
pub fn child_exit(child: &ChildToken, pid: i64, code: i64) {
    ApiCall::ChildExit {
        child_id: child.id,
        pid,
        code,
        elapsed_us: child.elapsed_us(),
    }
    .send(caller());
}

/// [`child_exit`] reported at `at` (a location captured earlier: an `async` wait, whose
/// line is written when the future completes, or a destructor).
pub fn child_exit_at(at: &'static Location<'static>, child: &ChildToken, pid: i64, code: i64) {
    ApiCall::ChildExit {
        child_id: child.id,
        pid,
        code,
        elapsed_us: child.elapsed_us(),
    }
    .send(Origin::Caller(at));
}

/// `child_ready`: a background child was released (`ready`, `timeout` or `error`).
#[track_caller]
pub fn child_ready(child: &ChildToken, pid: i64, ready: &str) {
    ApiCall::ChildReady {
        child_id: child.id,
        pid,
        ready,
        elapsed_us: child.elapsed_us(),
    }
    .send(caller());
}

/// `exec`: the program is about to replace itself. Returns the exec id.
#[track_caller]
pub fn exec<S: AsRef<str>>(exe: Option<&str>, argv: &[S]) -> u64 {
    let id = NEXT_EXEC_ID.fetch_add(1, Ordering::Relaxed);
    let argv = list(argv, true);
    ApiCall::Exec {
        exec_id: id,
        exe,
        argv: &items(&argv),
    }
    .send(caller());
    id
}

/// `exec_result`: the exec failed with `code` (a C `errno`, on Windows too).
#[track_caller]
pub fn exec_result(exec_id: u64, code: i64) {
    let err = exec_error_text(code);
    ApiCall::ExecResult {
        exec_id,
        code,
        err: &err,
    }
    .send(caller());
}

/// The `err` text of an `exec_result` with `code`: C's `strerror` of the `errno`
/// (empty for 0 or a negative code, which have none). `code` is an `errno` on every
/// platform, never a Windows system error code.
fn exec_error_text(code: i64) -> String {
    match i32::try_from(code) {
        Ok(errno) if errno > 0 => tracing_trace2_dst::errno_text(errno),
        _ => String::new(),
    }
}

/// `thread_start`: the calling thread announces itself as `thNN:<name>`. On the main
/// thread git writes a region instead, and so do we.
#[track_caller]
pub fn thread_start(name: &str) {
    ApiCall::ThreadStart { name }.send(caller());
}

/// `thread_exit`: the calling thread ends (its region stack is dropped).
#[track_caller]
pub fn thread_exit() {
    ApiCall::ThreadExit.send(caller());
}

/// `timer` (process total) or `th_timer` (`per_thread`): a stopwatch timer's values.
#[track_caller]
pub fn timer(
    per_thread: bool,
    category: &str,
    name: &str,
    intervals: u64,
    total_ns: u64,
    min_ns: u64,
    max_ns: u64,
) {
    ApiCall::Timer(ApiTimer {
        per_thread,
        category,
        name,
        intervals,
        total_ns,
        min_ns,
        max_ns,
    })
    .send(caller());
}

/// `counter` (process total) or `th_counter` (`per_thread`): a counter's value.
#[track_caller]
pub fn counter(per_thread: bool, category: &str, name: &str, value: u64) {
    ApiCall::Counter {
        per_thread,
        category,
        name,
        value,
    }
    .send(caller());
}

/// `exit`: the program exits. The code is masked to 0..=255 as the OS does, recorded
/// for `atexit`, and returned.
#[track_caller]
pub fn exit(code: i32) -> i32 {
    exit_from(caller(), code)
}

/// [`exit`] reported at `at` (a location the program captured earlier, for exits
/// written where no caller is known: a destructor, an exit handler).
pub fn exit_at(at: &'static Location<'static>, code: i32) -> i32 {
    exit_from(Origin::Caller(at), code)
}

/// `exit` from `from`; on Windows Git for Windows' `windows/memory` line first.
fn exit_from(from: Origin<'_>, code: i32) -> i32 {
    let code = code & 0xff;
    LAST_EXIT_CODE.store(code, Ordering::Relaxed);
    EXIT_WRITTEN.store(true, Ordering::Relaxed);
    #[cfg(windows)]
    peak_memory_line(from);
    ApiCall::Exit { code }.send(from);
    code
}

/// `data_json` `windows/memory` (category `process`), which Git for Windows writes right
/// before every `exit` (see [`crate::process_info`]); nothing without a Trace2 layer.
#[cfg(windows)]
fn peak_memory_line(from: Origin<'_>) {
    let traced =
        tracing::dispatcher::get_default(|d| d.downcast_ref::<crate::Trace2Layer>().is_some());
    if !traced {
        return;
    }
    if let Some(memory) = crate::process_info::peak_memory() {
        ApiCall::DataJson {
            category: "process",
            key: "windows/memory",
            json: &memory.to_json(),
            repo: Some(the_repository_id()),
        }
        .send(from);
    }
}

/// The id git's `the_repository` has in the process lines git writes about itself:
/// 1 once [`def_repo`] defined repository 1, else 0.
pub fn the_repository_id() -> i64 {
    i64::from(FIRST_REPO_DEFINED.load(Ordering::Relaxed))
}

/// Whether [`exit`] was called (an exit handler then does not write a second `exit`).
pub fn exit_written() -> bool {
    EXIT_WRITTEN.load(Ordering::Relaxed)
}

/// The code of the last [`exit`] (0 if none).
pub fn last_exit_code() -> i32 {
    LAST_EXIT_CODE.load(Ordering::Relaxed)
}

/// `atexit`: the last line of a process, with the code of the last [`exit`].
#[track_caller]
pub fn atexit() {
    ApiCall::Atexit {
        code: last_exit_code(),
    }
    .send(caller());
}

/// [`atexit`] reported at `at` (see [`exit_at`]).
pub fn atexit_at(at: &'static Location<'static>) {
    ApiCall::Atexit {
        code: last_exit_code(),
    }
    .send(Origin::Caller(at));
}

/// [`thread_start`] reported at `at` (the location where a helper was set up).
pub fn thread_start_at(at: &'static Location<'static>, name: &str) {
    ApiCall::ThreadStart { name }.send(Origin::Caller(at));
}

/// [`thread_exit`] reported at `at`.
pub fn thread_exit_at(at: &'static Location<'static>) {
    ApiCall::ThreadExit.send(Origin::Caller(at));
}

/// Ends every other thread before the process ends: for each lane still announced
/// (the OS threads that are still running, such as the workers of a runtime that is
/// shut down only after `main` returns, and the task lanes), its `th_timer` /
/// `th_counter` lines (OS threads; their values join the process totals) and its
/// `thread_exit`. From then on only the calling thread writes: call it right before the
/// calling thread's own totals, the process totals and [`atexit`], as the process
/// lifecycle of `tracing-trace2` does. [`atexit`] does it too when it was not done,
/// but then the other threads' values come after the process totals and are not in
/// them.
#[track_caller]
pub fn end_threads() {
    ApiCall::EndThreads.send(caller());
}

/// [`end_threads`] reported at `at` (see [`exit_at`]).
pub fn end_threads_at(at: &'static Location<'static>) {
    ApiCall::EndThreads.send(Origin::Caller(at));
}

/// `signal`: the process is being killed by `signo`.
#[track_caller]
pub fn signal(signo: i32) {
    ApiCall::Signal { signo }.send(caller());
}

/// `error` with an explicit source location (`None`: no file:line at all), for reports
/// whose origin is known but is not the caller, such as a panic's location.
pub fn error_at(file: Option<&str>, line: u32, msg: &str, fmt: &str) {
    ApiCall::Error { msg, fmt }.send(Origin::At(file, line));
}

impl ApiCall<'_> {
    /// Hands the call to the Trace2 layer of the calling thread's current dispatcher
    /// (nothing happens when it has none).
    pub(crate) fn send(&self, from: Origin<'_>) {
        crate::layer::send(self, from);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::filter::LevelFilter;
    use tracing_subscriber::layer::{Context, SubscriberExt};

    use super::*;
    use crate::{Format, MemorySink, Record, Target, Trace2Layer};

    #[test]
    fn exec_result_reads_its_code_as_an_errno() {
        // On Windows 13 is also ERROR_INVALID_DATA and 8 ERROR_NOT_ENOUGH_MEMORY: the
        // text must be C's for the errno, as Git for Windows prints it.
        assert_eq!(
            exec_error_text(i64::from(libc::EACCES)),
            "Permission denied"
        );
        assert_eq!(
            exec_error_text(i64::from(libc::ENOEXEC)),
            "Exec format error"
        );
        assert_eq!(exec_error_text(0), "");
        assert_eq!(exec_error_text(-1), "");
        assert_eq!(exec_error_text(i64::MAX), "");
    }

    /// Event names and file:line, one per line.
    struct Names;
    impl Format for Names {
        fn format(&self, record: &Record<'_>, out: &mut Vec<u8>) {
            let at = format!(
                " {}:{}\n",
                record.callsite.file.unwrap_or("-"),
                record.callsite.line
            );
            // Test threads are not `main`: they announce themselves first.
            if !matches!(record.event, crate::Trace2Event::ThreadStart) {
                out.extend_from_slice(record.event.name().as_bytes());
                out.extend_from_slice(at.as_bytes());
            }
        }
    }

    /// Counts the events another layer sees.
    struct Count(Arc<Mutex<usize>>);
    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Count {
        fn on_event(&self, _: &tracing::Event<'_>, _: Context<'_, S>) {
            *self.0.lock().unwrap() += 1;
        }
    }

    /// A call reaches the Trace2 layer under a global filter that lets nothing through,
    /// and no other layer sees it.
    #[test]
    fn calls_bypass_filters_and_other_layers() {
        let sink = MemorySink::new();
        let layer = Trace2Layer::builder()
            .with_target(Target::new("GIT_TRACE2_EVENT", Names, sink.clone()))
            .build();
        let seen = Arc::new(Mutex::new(0));
        let subscriber = tracing_subscriber::registry()
            .with(LevelFilter::OFF)
            .with(Count(Arc::clone(&seen)))
            .with(Some(layer));
        tracing::subscriber::with_default(subscriber, || {
            ApiCall::CmdName {
                name: "n",
                hierarchy: "n",
            }
            .send(Origin::At(Some("f.rs"), 7));
            ApiCall::Start { argv: &["a", "b"] }.send(Origin::At(None, 0));
        });
        assert_eq!(
            sink.to_string_lossy(),
            "version f.rs:7\ncmd_name f.rs:7\nstart -:0\n"
        );
        assert_eq!(*seen.lock().unwrap(), 0);
    }

    /// Without a Trace2 layer a call goes nowhere (and does not panic).
    #[test]
    fn calls_without_a_layer_go_nowhere() {
        let subscriber = tracing_subscriber::registry();
        tracing::subscriber::with_default(subscriber, || {
            ApiCall::Exit { code: 3 }.send(Origin::At(None, 0));
        });
    }

    #[test]
    fn the_repository_is_repository_one_once_defined() {
        // Without a layer nothing is written; the id git's own process lines name is kept.
        def_repo(2, "/elsewhere");
        def_repo(1, "/work/repo");
        assert_eq!(the_repository_id(), 1);
    }
}
