//! One Trace2 event as this tool sees it: the keys every line carries, plus what its kind
//! means here (kinds merged where the tool treats them alike, times in microseconds).
//!
//! Both inputs give records (the event crate's reader for Event JSON lines, the binary
//! decoder for `t2b` traces); module [`record_event`](crate::record_event) turns a record
//! into a [`TraceEvent`], so the summary and the exports see one event type whatever the
//! input. This module only declares the type and the reasons a line is not used.

use std::borrow::Cow;

use tracing_trace2_event::ReadError;

/// A parsed event: the keys every line carries, plus what its kind adds.
#[derive(Debug)]
pub struct TraceEvent<'a> {
    /// Session id of the process that wrote the line (`parent/child` for a child process).
    pub sid: Cow<'a, str>,
    /// Trace2 thread name: `main`, `th01:preload`, …
    pub thread: Cow<'a, str>,
    /// Wall time of the line in Unix µs, when the line has a `time` (brief mode drops it).
    pub time_us: Option<i64>,
    /// Microseconds since the process started, for the kinds that carry `t_abs`.
    pub t_abs_us: Option<i64>,
    /// Source location, `file:line`, when given.
    pub file: Option<Cow<'a, str>>,
    /// Source line of `file`.
    pub line: Option<i64>,
    /// Repository id (`repo`), when the event names one.
    pub repo: Option<i64>,
    /// What happened.
    pub kind: Kind<'a>,
}

/// The kind-specific part of an event.
#[derive(Debug)]
pub enum Kind<'a> {
    /// `version`: first line of a process.
    Version {
        /// Version of the program (`exe`).
        exe: Option<Cow<'a, str>>,
    },
    /// `start`: the command line.
    Start {
        /// `argv` as received (redacted).
        argv: Vec<Cow<'a, str>>,
    },
    /// `cmd_name`: the command verb.
    CmdName {
        /// The verb (`status`, `_run_git_alias_`, …).
        name: Cow<'a, str>,
        /// `parent/…/name` hierarchy.
        hierarchy: Option<Cow<'a, str>>,
    },
    /// `cmd_mode`: a sub-mode of the verb.
    CmdMode {
        /// The mode (`branch`, …).
        name: Cow<'a, str>,
    },
    /// `alias`: an alias was expanded.
    Alias {
        /// The alias name.
        alias: Cow<'a, str>,
        /// What it expanded to.
        argv: Vec<Cow<'a, str>>,
    },
    /// `def_param`: a configuration or environment value.
    DefParam {
        /// Where it was set (`global`, `command`, …).
        scope: Option<Cow<'a, str>>,
        /// Key.
        param: Cow<'a, str>,
        /// Value; `None` for a config key set without one (`git -c foo.bar`), whose
        /// line git (2.49+) writes without a `value`.
        value: Option<Cow<'a, str>>,
    },
    /// `def_repo`: a repository got an id.
    DefRepo {
        /// Its worktree.
        worktree: Cow<'a, str>,
    },
    /// `region_enter`.
    RegionEnter(Region<'a>),
    /// `region_leave` with the region's duration.
    RegionLeave(Region<'a>, i64),
    /// `data`: a string value (`data_json`: a JSON value, `json` set).
    Data {
        /// Nesting level, as for regions.
        nesting: i64,
        /// Category.
        category: Cow<'a, str>,
        /// Key.
        key: Cow<'a, str>,
        /// The text of a `data` value; the JSON text of a `data_json` value (always JSON).
        value: Cow<'a, str>,
        /// True for `data_json`.
        json: bool,
    },
    /// `printf`: a free-form message.
    Printf {
        /// The message.
        msg: Option<Cow<'a, str>>,
    },
    /// `error`: an error or warning message.
    Error {
        /// The formatted message.
        msg: Option<Cow<'a, str>>,
        /// Its format string.
        fmt: Option<Cow<'a, str>>,
    },
    /// `child_start`.
    ChildStart {
        /// Per-process child number.
        child_id: i64,
        /// `child_class`: a class, `hook` or `?`.
        class: Cow<'a, str>,
        /// `hook_name` of a hook.
        hook_name: Option<Cow<'a, str>>,
        /// The child's command line.
        argv: Vec<Cow<'a, str>>,
    },
    /// `child_exit` (or `child_ready`, `ready` set).
    ChildEnd {
        /// Which child.
        child_id: i64,
        /// Its pid (-1 if it could not start).
        pid: Option<i64>,
        /// Exit code (absent for `child_ready`).
        code: Option<i64>,
        /// `ready`, `timeout` or `error` for `child_ready`.
        ready: Option<Cow<'a, str>>,
        /// Child's elapsed time in µs.
        elapsed_us: i64,
    },
    /// `exec`: the process replaces itself.
    Exec {
        /// Per-process exec number.
        exec_id: i64,
        /// The new program's command line.
        argv: Vec<Cow<'a, str>>,
    },
    /// `exec_result`: the exec failed.
    ExecResult {
        /// Which exec.
        exec_id: i64,
        /// errno.
        code: i64,
    },
    /// `thread_start`.
    ThreadStart,
    /// `thread_exit` with the thread's lifetime in µs.
    ThreadExit(i64),
    /// `timer` or `th_timer` (`per_thread`).
    Timer {
        /// True for `th_timer`.
        per_thread: bool,
        /// Category.
        category: Cow<'a, str>,
        /// Name.
        name: Cow<'a, str>,
        /// Completed intervals.
        intervals: i64,
        /// Total time in µs.
        total_us: i64,
        /// Shortest interval in µs.
        min_us: i64,
        /// Longest interval in µs.
        max_us: i64,
    },
    /// `counter` or `th_counter` (`per_thread`).
    Counter {
        /// True for `th_counter`.
        per_thread: bool,
        /// Category.
        category: Cow<'a, str>,
        /// Name.
        name: Cow<'a, str>,
        /// Value.
        count: i64,
    },
    /// `exit`.
    Exit {
        /// Exit code.
        code: i64,
    },
    /// `atexit`: the last line of a process.
    Atexit {
        /// Exit code.
        code: i64,
    },
    /// `signal`: killed by a signal.
    Signal {
        /// Signal number.
        signo: i64,
    },
    /// A kind this tool only passes along (`cmd_path`, `cmd_ancestry`, `too_many_files`, a
    /// kind it does not know…).
    Other(Cow<'a, str>),
}

/// A region of `region_enter`/`region_leave`.
#[derive(Debug)]
pub struct Region<'a> {
    /// 1 + the regions open on the thread outside this one.
    pub nesting: i64,
    /// `category`, when not null.
    pub category: Option<Cow<'a, str>>,
    /// `label`, when not null.
    pub label: Option<Cow<'a, str>>,
    /// `msg`, when given.
    pub msg: Option<Cow<'a, str>>,
}

/// Why a line was not turned into an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineError {
    /// Not JSON.
    NotJson(String),
    /// JSON that stops before its end: a line cut short.
    CutShort,
    /// JSON, but not a Trace2 event (`event`, `sid` or `thread` missing, or a key of the wrong type).
    NotTrace2(String),
    /// A Trace2 event that lacks a key its kind needs (`t_rel` of a `region_leave`, …).
    Incomplete(String),
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LineError::NotJson(why) => write!(f, "not JSON ({why})"),
            LineError::CutShort => write!(f, "cut short"),
            LineError::NotTrace2(why) => write!(f, "not a Trace2 event ({why})"),
            LineError::Incomplete(why) => write!(f, "incomplete Trace2 event ({why})"),
        }
    }
}

impl From<ReadError> for LineError {
    fn from(error: ReadError) -> Self {
        match error {
            ReadError::CutShort => LineError::CutShort,
            ReadError::Json(why) => LineError::NotJson(strip_position(&why)),
            ReadError::BadObject(why) => LineError::NotTrace2(strip_position(&why)),
            ReadError::NoEvent => LineError::NotTrace2("missing field `event`".into()),
            ReadError::UnknownKind(name) => LineError::NotTrace2(format!("unknown kind {name:?}")),
            ReadError::Missing { key, .. } if key == "sid" || key == "thread" => {
                LineError::NotTrace2(format!("missing field `{key}`"))
            }
            ReadError::Missing { kind, key } => {
                LineError::Incomplete(format!("{kind} without `{key}`"))
            }
            ReadError::BadValue { key: "time", .. } => {
                LineError::NotTrace2("`time` is not UTC ISO".into())
            }
            ReadError::BadValue {
                kind: Some(kind),
                key,
            } => LineError::NotTrace2(format!("`{key}` of {kind} has a value of the wrong type")),
            ReadError::BadValue { kind: None, key } => {
                LineError::NotTrace2(format!("`{key}` has a value of the wrong type"))
            }
            // A variant added later: its own words.
            other => LineError::NotTrace2(other.to_string()),
        }
    }
}

impl TraceEvent<'_> {
    /// The event's name as written in the line (`region_leave`, …).
    pub fn name(&self) -> &str {
        match &self.kind {
            Kind::Version { .. } => "version",
            Kind::Start { .. } => "start",
            Kind::CmdName { .. } => "cmd_name",
            Kind::CmdMode { .. } => "cmd_mode",
            Kind::Alias { .. } => "alias",
            Kind::DefParam { .. } => "def_param",
            Kind::DefRepo { .. } => "def_repo",
            Kind::RegionEnter(_) => "region_enter",
            Kind::RegionLeave(..) => "region_leave",
            Kind::Data { json: false, .. } => "data",
            Kind::Data { json: true, .. } => "data_json",
            Kind::Printf { .. } => "printf",
            Kind::Error { .. } => "error",
            Kind::ChildStart { .. } => "child_start",
            Kind::ChildEnd { ready: None, .. } => "child_exit",
            Kind::ChildEnd { ready: Some(_), .. } => "child_ready",
            Kind::Exec { .. } => "exec",
            Kind::ExecResult { .. } => "exec_result",
            Kind::ThreadStart => "thread_start",
            Kind::ThreadExit(_) => "thread_exit",
            Kind::Timer {
                per_thread: false, ..
            } => "timer",
            Kind::Timer {
                per_thread: true, ..
            } => "th_timer",
            Kind::Counter {
                per_thread: false, ..
            } => "counter",
            Kind::Counter {
                per_thread: true, ..
            } => "th_counter",
            Kind::Exit { .. } => "exit",
            Kind::Atexit { .. } => "atexit",
            Kind::Signal { .. } => "signal",
            Kind::Other(name) => name,
        }
    }
}

/// serde_json appends " at line 1 column N"; the caller names the line itself.
fn strip_position(text: &str) -> String {
    match text.rfind(" at line ") {
        Some(at) => text[..at].to_owned(),
        None => text.to_owned(),
    }
}
