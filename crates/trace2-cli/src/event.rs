//! One Trace2 event parsed from one Event-format JSON line (git's `GIT_TRACE2_EVENT` output, or
//! ours, which is the same), with strings borrowed from the line where they need no unescaping.
//!
//! Field names and types follow git 2.47.3 (`trace2-format.md` §4.4). Keys this tool does not use
//! (`cmd_ancestry`'s list, `file` of most events…) are skipped by the parser without being copied.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::time::{parse_utc_micros, seconds_to_micros};

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
        /// The value's JSON text (a string for `data`, anything for `data_json`).
        value: &'a RawValue,
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
    /// A kind this tool only passes along (`cmd_ancestry`, `too_many_files`, a future kind…).
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

/// Every key any kind uses, all optional: one pass of serde over the line, then the kind picks.
#[derive(Deserialize)]
struct Keys<'a> {
    #[serde(borrow)]
    event: Cow<'a, str>,
    #[serde(borrow)]
    sid: Cow<'a, str>,
    #[serde(borrow)]
    thread: Cow<'a, str>,
    #[serde(borrow, default)]
    time: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    file: Option<Cow<'a, str>>,
    #[serde(default)]
    line: Option<i64>,
    #[serde(default)]
    repo: Option<i64>,
    #[serde(default)]
    t_abs: Option<f64>,
    #[serde(default)]
    t_rel: Option<f64>,
    #[serde(default)]
    nesting: Option<i64>,
    #[serde(borrow, default)]
    category: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    label: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    msg: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    fmt: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    hierarchy: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    exe: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    argv: Option<Vec<Cow<'a, str>>>,
    #[serde(borrow, default)]
    alias: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    scope: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    param: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    key: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    value: Option<&'a RawValue>,
    #[serde(borrow, default)]
    worktree: Option<Cow<'a, str>>,
    #[serde(default)]
    child_id: Option<i64>,
    #[serde(borrow, default)]
    child_class: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    hook_name: Option<Cow<'a, str>>,
    #[serde(default)]
    pid: Option<i64>,
    #[serde(default)]
    code: Option<i64>,
    #[serde(borrow, default)]
    ready: Option<Cow<'a, str>>,
    #[serde(default)]
    exec_id: Option<i64>,
    #[serde(default)]
    intervals: Option<i64>,
    #[serde(default)]
    t_total: Option<f64>,
    #[serde(default)]
    t_min: Option<f64>,
    #[serde(default)]
    t_max: Option<f64>,
    #[serde(default)]
    count: Option<i64>,
    #[serde(default)]
    signo: Option<i64>,
}

fn need<T>(value: Option<T>, kind: &str, key: &str) -> Result<T, LineError> {
    value.ok_or_else(|| LineError::Incomplete(format!("{kind} without `{key}`")))
}

impl<'a> TraceEvent<'a> {
    /// Parses one line (without its newline).
    pub fn parse(line: &'a str) -> Result<Self, LineError> {
        let keys: Keys<'a> = serde_json::from_str(line).map_err(|e| {
            if e.is_eof() {
                LineError::CutShort
            } else if e.is_data() {
                LineError::NotTrace2(strip_position(&e))
            } else {
                LineError::NotJson(strip_position(&e))
            }
        })?;
        Self::from_keys(keys)
    }

    fn from_keys(k: Keys<'a>) -> Result<Self, LineError> {
        let ev = k.event.as_ref();
        let micros = |v: Option<f64>, key: &str| need(v, ev, key).map(seconds_to_micros);
        let kind = match ev {
            "version" => Kind::Version { exe: k.exe },
            "start" => Kind::Start {
                argv: need(k.argv, ev, "argv")?,
            },
            "cmd_name" => Kind::CmdName {
                name: need(k.name, ev, "name")?,
                hierarchy: k.hierarchy,
            },
            "cmd_mode" => Kind::CmdMode {
                name: need(k.name, ev, "name")?,
            },
            "alias" => Kind::Alias {
                alias: need(k.alias, ev, "alias")?,
                argv: k.argv.unwrap_or_default(),
            },
            "def_param" => Kind::DefParam {
                scope: k.scope,
                param: need(k.param, ev, "param")?,
                value: k.value.map(|value| {
                    serde_json::from_str::<Cow<'a, str>>(value.get())
                        .unwrap_or(Cow::Borrowed(value.get()))
                }),
            },
            "def_repo" => Kind::DefRepo {
                worktree: need(k.worktree, ev, "worktree")?,
            },
            "region_enter" | "region_leave" => {
                let region = Region {
                    nesting: need(k.nesting, ev, "nesting")?,
                    category: k.category,
                    label: k.label,
                    msg: k.msg,
                };
                if ev == "region_enter" {
                    Kind::RegionEnter(region)
                } else {
                    Kind::RegionLeave(region, micros(k.t_rel, "t_rel")?)
                }
            }
            "data" | "data_json" => Kind::Data {
                nesting: need(k.nesting, ev, "nesting")?,
                category: need(k.category, ev, "category")?,
                key: need(k.key, ev, "key")?,
                value: need(k.value, ev, "value")?,
                json: ev == "data_json",
            },
            "printf" => Kind::Printf { msg: k.msg },
            "error" => Kind::Error {
                msg: k.msg,
                fmt: k.fmt,
            },
            "child_start" => Kind::ChildStart {
                child_id: need(k.child_id, ev, "child_id")?,
                class: k.child_class.unwrap_or(Cow::Borrowed("?")),
                hook_name: k.hook_name,
                argv: k.argv.unwrap_or_default(),
            },
            "child_exit" | "child_ready" => Kind::ChildEnd {
                child_id: need(k.child_id, ev, "child_id")?,
                pid: k.pid,
                code: if ev == "child_exit" {
                    Some(need(k.code, ev, "code")?)
                } else {
                    None
                },
                ready: if ev == "child_ready" {
                    Some(k.ready.unwrap_or(Cow::Borrowed("?")))
                } else {
                    None
                },
                elapsed_us: micros(k.t_rel, "t_rel")?,
            },
            "exec" => Kind::Exec {
                exec_id: need(k.exec_id, ev, "exec_id")?,
                argv: k.argv.unwrap_or_default(),
            },
            "exec_result" => Kind::ExecResult {
                exec_id: need(k.exec_id, ev, "exec_id")?,
                code: need(k.code, ev, "code")?,
            },
            "thread_start" => Kind::ThreadStart,
            "thread_exit" => Kind::ThreadExit(micros(k.t_rel, "t_rel")?),
            "timer" | "th_timer" => Kind::Timer {
                per_thread: ev == "th_timer",
                category: need(k.category, ev, "category")?,
                name: need(k.name, ev, "name")?,
                intervals: need(k.intervals, ev, "intervals")?,
                total_us: micros(k.t_total, "t_total")?,
                min_us: micros(k.t_min, "t_min")?,
                max_us: micros(k.t_max, "t_max")?,
            },
            "counter" | "th_counter" => Kind::Counter {
                per_thread: ev == "th_counter",
                category: need(k.category, ev, "category")?,
                name: need(k.name, ev, "name")?,
                count: need(k.count, ev, "count")?,
            },
            "exit" => Kind::Exit {
                code: need(k.code, ev, "code")?,
            },
            "atexit" => Kind::Atexit {
                code: need(k.code, ev, "code")?,
            },
            "signal" => Kind::Signal {
                signo: need(k.signo, ev, "signo")?,
            },
            _ => Kind::Other(k.event.clone()),
        };
        if k.sid.is_empty() {
            return Err(LineError::NotTrace2("empty `sid`".into()));
        }
        let time_us =
            match &k.time {
                Some(text) => Some(parse_utc_micros(text).ok_or_else(|| {
                    LineError::NotTrace2(format!("`time` {text:?} is not UTC ISO"))
                })?),
                None => None,
            };
        Ok(TraceEvent {
            sid: k.sid,
            thread: k.thread,
            time_us,
            t_abs_us: k.t_abs.map(seconds_to_micros),
            file: k.file,
            line: k.line,
            repo: k.repo,
            kind,
        })
    }

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
fn strip_position(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.rfind(" at line ") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

/// Text of a JSON string value, or the JSON text itself for other values.
pub fn value_text(value: &RawValue) -> Cow<'_, str> {
    serde_json::from_str::<Cow<'_, str>>(value.get()).unwrap_or(Cow::Borrowed(value.get()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEAVE: &str = r#"{"event":"region_leave","sid":"20261121T232200.038465Z-H0a7c9cdf-P00002cdd","thread":"main","time":"2026-11-21T23:22:00.039105Z","file":"read-cache.c","line":2388,"repo":1,"t_rel":0.000065,"nesting":1,"category":"index","label":"do_read_index","msg":".git/index"}"#;

    #[test]
    fn parses_a_region_leave() {
        let ev = TraceEvent::parse(LEAVE).unwrap();
        assert_eq!(ev.sid, "20261121T232200.038465Z-H0a7c9cdf-P00002cdd");
        assert_eq!(ev.thread, "main");
        assert_eq!(ev.time_us, Some(1_795_303_320_039_105));
        assert_eq!(ev.repo, Some(1));
        assert_eq!(ev.name(), "region_leave");
        match ev.kind {
            Kind::RegionLeave(r, t_rel) => {
                assert_eq!(t_rel, 65);
                assert_eq!(r.nesting, 1);
                assert_eq!(r.category.as_deref(), Some("index"));
                assert_eq!(r.label.as_deref(), Some("do_read_index"));
                assert_eq!(r.msg.as_deref(), Some(".git/index"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn data_json_keeps_its_value() {
        let line = r#"{"event":"data_json","sid":"s","thread":"main","t_abs":0.1,"t_rel":0.1,"nesting":1,"category":"c","key":"k","value":{"a":[1,"two"]}}"#;
        let ev = TraceEvent::parse(line).unwrap();
        match ev.kind {
            Kind::Data {
                value, json: true, ..
            } => assert_eq!(value.get(), r#"{"a":[1,"two"]}"#),
            other => panic!("{other:?}"),
        }
        assert_eq!(ev.t_abs_us, Some(100_000));
    }

    #[test]
    fn def_param_of_a_valueless_key_has_no_value() {
        // Git 2.49+ writes a key set without a value (`git -c foo.bar`) without `value`.
        let line = r#"{"event":"def_param","sid":"s","thread":"main","scope":"command","param":"foo.bar"}"#;
        match TraceEvent::parse(line).unwrap().kind {
            Kind::DefParam { param, value, .. } => {
                assert_eq!(param, "foo.bar");
                assert_eq!(value, None);
            }
            other => panic!("{other:?}"),
        }
        let line = r#"{"event":"def_param","sid":"s","thread":"main","scope":"command","param":"foo.bar","value":""}"#;
        match TraceEvent::parse(line).unwrap().kind {
            Kind::DefParam { value, .. } => assert_eq!(value.as_deref(), Some("")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            TraceEvent::parse(r#"{"event":"def_param","sid":"s","thread":"main","value":"1"}"#),
            Err(LineError::Incomplete(_))
        ));
    }

    #[test]
    fn unknown_kinds_pass_through() {
        let ev =
            TraceEvent::parse(r#"{"event":"too_many_files","sid":"s","thread":"main"}"#).unwrap();
        assert!(matches!(ev.kind, Kind::Other(ref n) if n == "too_many_files"));
    }

    #[test]
    fn foreign_lines_are_named() {
        assert!(matches!(
            TraceEvent::parse("hello"),
            Err(LineError::NotJson(_))
        ));
        assert_eq!(
            TraceEvent::parse(r#"{"event":"start","sid":"s","thread":"main","argv":["gi"#)
                .unwrap_err(),
            LineError::CutShort
        );
        assert!(matches!(
            TraceEvent::parse(r#"{"level":"info","msg":"x"}"#),
            Err(LineError::NotTrace2(m)) if m.contains("event")
        ));
        assert!(matches!(
            TraceEvent::parse(r#"{"event":"exit","sid":"s","thread":"main","code":"0"}"#),
            Err(LineError::NotTrace2(_))
        ));
        assert_eq!(
            TraceEvent::parse(r#"{"event":"region_leave","sid":"s","thread":"main","nesting":1}"#)
                .unwrap_err(),
            LineError::Incomplete("region_leave without `t_rel`".into())
        );
        assert!(matches!(
            TraceEvent::parse(r#"{"event":"exit","sid":"s","thread":"main","time":"yesterday","code":0}"#),
            Err(LineError::NotTrace2(m)) if m.contains("time")
        ));
    }
}
