//! Typed functions for the Trace2 events that are not spans or ordinary events.
//!
//! Each function emits one `tracing` event with the reserved target [`TARGET`] and a
//! field `event` naming the Trace2 event, so every layer of the subscriber sees it (an
//! `fmt` layer prints `event="cmd_name" name="status"`), and the Trace2 layers render it
//! exactly as git would. Argument lists travel as a JSON array in one field.
//!
//! The functions are `#[track_caller]`: the line's file and line are those of the
//! code that called them. Values of `start`, `child_start`, `exec` and `def_param` are
//! redacted here (see [`crate::redact`]), before any layer sees them.
//!
//! Do not filter out the `trace2` target in a subscriber that carries a Trace2 layer:
//! the process lifecycle lines travel through it.

use std::panic::Location;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::time::Instant;

use tracing::Level;

use crate::redact::redact;
use crate::session::Session;

/// The target of every event emitted by this module.
pub const TARGET: &str = "trace2";

static NEXT_CHILD_ID: AtomicU64 = AtomicU64::new(0);
static NEXT_EXEC_ID: AtomicU64 = AtomicU64::new(0);
static LAST_EXIT_CODE: AtomicI32 = AtomicI32::new(0);
static EXIT_WRITTEN: AtomicBool = AtomicBool::new(false);

macro_rules! emit {
    ($level:expr, $loc:expr, $kind:expr $(, $($fields:tt)*)?) => {
        tracing::event!(
            target: "trace2",
            $level,
            event = $kind,
            file = $loc.file(),
            line = $loc.line()
            $(, $($fields)*)?
        )
    };
}

fn json_list<S: AsRef<str>>(items: &[S], redacted: bool) -> String {
    let list: Vec<String> = items
        .iter()
        .map(|s| {
            if redacted {
                redact(s.as_ref()).into_owned()
            } else {
                s.as_ref().to_owned()
            }
        })
        .collect();
    serde_json::Value::from(list).to_string()
}

/// `version`: the first line of a process. The layers write it by themselves before
/// their first line if the program does not call this.
#[track_caller]
pub fn version(exe: &str) {
    let loc = Location::caller();
    emit!(Level::INFO, loc, "version", exe);
}

/// `start`: the program's arguments (redacted).
#[track_caller]
pub fn start<S: AsRef<str>>(argv: &[S]) {
    let loc = Location::caller();
    let argv = json_list(argv, true);
    emit!(Level::INFO, loc, "start", argv = argv.as_str());
}

/// `cmd_ancestry`: the names of the parent processes, nearest first.
#[track_caller]
pub fn cmd_ancestry<S: AsRef<str>>(ancestry: &[S]) {
    let loc = Location::caller();
    let ancestry = json_list(ancestry, false);
    emit!(
        Level::INFO,
        loc,
        "cmd_ancestry",
        ancestry = ancestry.as_str()
    );
}

/// `cmd_path`: the resolved executable path.
#[track_caller]
pub fn cmd_path(path: &str) {
    let loc = Location::caller();
    emit!(Level::INFO, loc, "cmd_path", path);
}

/// `cmd_name`: the command verb. Its hierarchy (`<parent hierarchy>/<name>`) becomes the
/// hierarchy children inherit; repeated calls chain, as in git. The first call of the
/// process then runs the hook set with [`set_after_first_cmd_name`] (git lists the
/// `def_param` events there).
#[track_caller]
pub fn cmd_name(name: &str) {
    let loc = Location::caller();
    let hierarchy = Session::global().push_cmd_name(name);
    emit!(
        Level::INFO,
        loc,
        "cmd_name",
        name,
        hierarchy = hierarchy.as_str()
    );
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
    let loc = Location::caller();
    emit!(Level::INFO, loc, "cmd_mode", name = mode);
}

/// `alias`: an alias and what it expands to.
#[track_caller]
pub fn alias<S: AsRef<str>>(alias: &str, argv: &[S]) {
    let loc = Location::caller();
    let argv = json_list(argv, false);
    emit!(Level::INFO, loc, "alias", alias, argv = argv.as_str());
}

/// `def_param`: an interesting setting with its scope (`system`, `global`, `local`,
/// `worktree`, `command`, `submodule`, `unknown`); `value` is redacted. `None` is a
/// valueless config entry.
#[track_caller]
pub fn def_param(scope: &str, param: &str, value: Option<&str>) {
    let loc = Location::caller();
    let redacted = value.map(redact);
    emit!(
        Level::INFO,
        loc,
        "def_param",
        scope,
        param,
        has_value = value.is_some(),
        value = redacted.as_deref().unwrap_or("")
    );
}

/// `def_repo`: a repository got its id.
#[track_caller]
pub fn def_repo(repo: i64, worktree: &str) {
    let loc = Location::caller();
    emit!(Level::INFO, loc, "def_repo", repo, worktree);
}

/// `region_enter` without a span: for code that needs git's exact region calls, where
/// the leave may carry another message than the enter. Spans are the usual way.
/// Empty strings are left out of the lines.
#[track_caller]
pub fn region_enter(category: &str, label: &str, msg: Option<&str>, repo: Option<i64>) {
    region("region_enter", category, label, msg, repo);
}

/// `region_leave` for the innermost region opened with [`region_enter`] on this thread.
#[track_caller]
pub fn region_leave(category: &str, label: &str, msg: Option<&str>, repo: Option<i64>) {
    region("region_leave", category, label, msg, repo);
}

#[track_caller]
fn region(kind: &'static str, category: &str, label: &str, msg: Option<&str>, repo: Option<i64>) {
    let loc = Location::caller();
    emit!(
        Level::INFO,
        loc,
        kind,
        category,
        label,
        has_msg = msg.is_some(),
        msg = msg.unwrap_or(""),
        has_repo = repo.is_some(),
        repo = repo.unwrap_or(0)
    );
}

/// `printf`: a free-form message (an empty message is written without text).
#[track_caller]
pub fn printf(msg: &str) {
    let loc = Location::caller();
    emit!(Level::INFO, loc, "printf", msg);
}

/// `printf` with an explicit source location (`None`: no file:line at all).
pub fn printf_at(file: Option<&str>, line: u32, msg: &str) {
    tracing::event!(
        target: "trace2",
        Level::INFO,
        event = "printf",
        file = file.unwrap_or(""),
        line,
        msg
    );
}

/// `error`: an error message; `fmt` stands for git's format string (the message
/// template, without the values). Empty strings are left out of the line, as git does.
#[track_caller]
pub fn error(msg: &str, fmt: &str) {
    let loc = Location::caller();
    emit!(Level::ERROR, loc, "error", msg, fmt);
}

/// `data`: a string datum. `repo` adds the repository column.
#[track_caller]
pub fn data(category: &str, key: &str, value: &str, repo: Option<i64>) {
    let loc = Location::caller();
    emit!(
        Level::INFO,
        loc,
        "data",
        category,
        key,
        value,
        has_repo = repo.is_some(),
        repo = repo.unwrap_or(0)
    );
}

/// `data_json`: a JSON datum, written compactly.
#[track_caller]
pub fn data_json(category: &str, key: &str, value: &serde_json::Value, repo: Option<i64>) {
    let loc = Location::caller();
    let json = value.to_string();
    emit!(
        Level::INFO,
        loc,
        "data_json",
        category,
        key,
        json = json.as_str(),
        has_repo = repo.is_some(),
        repo = repo.unwrap_or(0)
    );
}

/// What a `child_start` says about a child process.
#[derive(Clone, Debug, Default)]
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
    let loc = Location::caller();
    let id = NEXT_CHILD_ID.fetch_add(1, Ordering::Relaxed);
    let argv = json_list(child.argv, true);
    emit!(
        Level::INFO,
        loc,
        "child_start",
        child_id = id,
        class = child.class,
        hook_name = child.hook_name.unwrap_or(""),
        cd = child.cd.unwrap_or(""),
        use_shell = child.use_shell,
        is_git = child.is_git,
        argv = argv.as_str()
    );
    ChildToken {
        id,
        started: Instant::now(),
    }
}

/// `child_exit`: the child was reaped (pid and code -1 when it could not start).
#[track_caller]
pub fn child_exit(child: &ChildToken, pid: i64, code: i64) {
    let loc = Location::caller();
    emit!(
        Level::INFO,
        loc,
        "child_exit",
        child_id = child.id,
        pid,
        code,
        elapsed_us = child.elapsed_us()
    );
}

/// `child_ready`: a background child was released (`ready`, `timeout` or `error`).
#[track_caller]
pub fn child_ready(child: &ChildToken, pid: i64, ready: &str) {
    let loc = Location::caller();
    emit!(
        Level::INFO,
        loc,
        "child_ready",
        child_id = child.id,
        pid,
        ready,
        elapsed_us = child.elapsed_us()
    );
}

/// `exec`: the program is about to replace itself. Returns the exec id.
#[track_caller]
pub fn exec<S: AsRef<str>>(exe: Option<&str>, argv: &[S]) -> u64 {
    let loc = Location::caller();
    let id = NEXT_EXEC_ID.fetch_add(1, Ordering::Relaxed);
    let argv = json_list(argv, true);
    emit!(
        Level::INFO,
        loc,
        "exec",
        exec_id = id,
        has_exe = exe.is_some(),
        exe = exe.unwrap_or(""),
        argv = argv.as_str()
    );
    id
}

/// `exec_result`: the exec failed with `code` (an errno).
#[track_caller]
pub fn exec_result(exec_id: u64, code: i64) {
    let loc = Location::caller();
    let err = if code > 0 {
        crate::dst::strerror(&std::io::Error::from_raw_os_error(code as i32))
    } else {
        String::new()
    };
    emit!(
        Level::INFO,
        loc,
        "exec_result",
        exec_id,
        code,
        err = err.as_str()
    );
}

/// `thread_start`: the calling thread announces itself as `thNN:<name>`. On the main
/// thread git writes a region instead, and so do we.
#[track_caller]
pub fn thread_start(name: &str) {
    let loc = Location::caller();
    emit!(Level::INFO, loc, "thread_start", name);
}

/// `thread_exit`: the calling thread ends (its region stack is dropped).
#[track_caller]
pub fn thread_exit() {
    let loc = Location::caller();
    emit!(Level::INFO, loc, "thread_exit");
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
    let loc = Location::caller();
    emit!(
        Level::INFO,
        loc,
        "timer",
        per_thread,
        category,
        name,
        intervals,
        total_ns,
        min_ns,
        max_ns
    );
}

/// `counter` (process total) or `th_counter` (`per_thread`): a counter's value.
#[track_caller]
pub fn counter(per_thread: bool, category: &str, name: &str, value: u64) {
    let loc = Location::caller();
    emit!(
        Level::INFO,
        loc,
        "counter",
        per_thread,
        category,
        name,
        value
    );
}

/// `exit`: the program exits. The code is masked to 0..=255 as the OS does, recorded
/// for `atexit`, and returned.
#[track_caller]
pub fn exit(code: i32) -> i32 {
    let loc = Location::caller();
    let code = code & 0xff;
    LAST_EXIT_CODE.store(code, Ordering::Relaxed);
    EXIT_WRITTEN.store(true, Ordering::Relaxed);
    emit!(Level::INFO, loc, "exit", code);
    code
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
    let loc = Location::caller();
    emit!(Level::INFO, loc, "atexit", code = last_exit_code());
}

/// `signal`: the process is being killed by `signo`.
#[track_caller]
pub fn signal(signo: i32) {
    let loc = Location::caller();
    emit!(Level::INFO, loc, "signal", signo);
}

/// `error` with an explicit source location (`None`: no file:line at all), for reports
/// whose origin is known but is not the caller, such as a panic's location.
pub fn error_at(file: Option<&str>, line: u32, msg: &str, fmt: &str) {
    tracing::event!(
        target: "trace2",
        Level::ERROR,
        event = "error",
        file = file.unwrap_or(""),
        line,
        msg,
        fmt
    );
}
