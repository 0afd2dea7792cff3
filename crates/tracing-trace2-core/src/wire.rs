//! The API wire: how a typed Trace2 call of [`crate::api`] travels through `tracing` to
//! the layer, and how the layer reads it back. Both directions live here, so every field
//! name is spelled once.
//!
//! A call is one `tracing` event with the reserved target [`TARGET`], a field `event`
//! naming the Trace2 event, the caller's `file` and `line`, and the call's own fields.
//! Argument lists travel as one JSON array in one field. [`ApiCall::send`] writes such an
//! event; [`ApiFields`] collects its fields on the layer's side and [`ApiCall::receive`]
//! turns them back into the call.

use std::fmt;
use std::panic::Location;

use tracing::Level;
use tracing_core::field::{Field, Visit};

/// The target of every event that carries a typed Trace2 call.
pub const TARGET: &str = "trace2";

/// One typed Trace2 call. Lists (`argv`, `ancestry`) are JSON arrays of strings.
#[derive(Debug)]
pub(crate) enum ApiCall<'a> {
    Version {
        exe: &'a str,
    },
    Start {
        argv: &'a str,
    },
    CmdAncestry {
        ancestry: &'a str,
    },
    CmdPath {
        path: &'a str,
    },
    CmdName {
        name: &'a str,
        hierarchy: &'a str,
    },
    CmdMode {
        name: &'a str,
    },
    Alias {
        alias: &'a str,
        argv: &'a str,
    },
    DefParam {
        scope: &'a str,
        param: &'a str,
        value: Option<&'a str>,
    },
    DefRepo {
        repo: i64,
        worktree: &'a str,
    },
    RegionEnter(ApiRegion<'a>),
    RegionLeave(ApiRegion<'a>),
    Printf {
        msg: &'a str,
    },
    Error {
        msg: &'a str,
        fmt: &'a str,
    },
    Data {
        category: &'a str,
        key: &'a str,
        value: &'a str,
        repo: Option<i64>,
    },
    DataJson {
        category: &'a str,
        key: &'a str,
        json: &'a str,
        repo: Option<i64>,
    },
    ChildStart(ApiChild<'a>),
    ChildExit {
        child_id: u64,
        pid: i64,
        code: i64,
        elapsed_us: u64,
    },
    ChildReady {
        child_id: u64,
        pid: i64,
        ready: &'a str,
        elapsed_us: u64,
    },
    Exec {
        exec_id: u64,
        exe: Option<&'a str>,
        argv: &'a str,
    },
    ExecResult {
        exec_id: u64,
        code: i64,
        err: &'a str,
    },
    ThreadStart {
        name: &'a str,
    },
    ThreadExit,
    Timer(ApiTimer<'a>),
    Counter {
        per_thread: bool,
        category: &'a str,
        name: &'a str,
        value: u64,
    },
    Exit {
        code: i32,
    },
    Atexit {
        code: i32,
    },
    Signal {
        signo: i32,
    },
}

/// A region opened or closed without a span ([`crate::api::region_enter`]).
#[derive(Debug)]
pub(crate) struct ApiRegion<'a> {
    pub category: &'a str,
    pub label: &'a str,
    pub msg: Option<&'a str>,
    pub repo: Option<i64>,
}

/// A `child_start`; `argv` is a JSON array (already redacted).
#[derive(Debug)]
pub(crate) struct ApiChild<'a> {
    pub child_id: u64,
    pub class: &'a str,
    pub hook_name: &'a str,
    pub cd: &'a str,
    pub use_shell: bool,
    pub is_git: bool,
    pub argv: &'a str,
}

/// A `timer` or `th_timer`.
#[derive(Debug)]
pub(crate) struct ApiTimer<'a> {
    pub per_thread: bool,
    pub category: &'a str,
    pub name: &'a str,
    pub intervals: u64,
    pub total_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
}

/// Where a call reports itself from: the caller's location, or an explicit one (`None`:
/// no file:line at all).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Origin<'a> {
    Caller(&'static Location<'static>),
    At(Option<&'a str>, u32),
}

impl Origin<'_> {
    fn file_line(&self) -> (&str, u32) {
        match *self {
            Origin::Caller(loc) => (loc.file(), loc.line()),
            Origin::At(file, line) => (file.unwrap_or(""), line),
        }
    }
}

macro_rules! send {
    ($from:expr, $level:expr, $kind:expr $(, $($fields:tt)*)?) => {{
        let (file, line) = $from.file_line();
        tracing::event!(
            target: "trace2",
            $level,
            event = $kind,
            file,
            line
            $(, $($fields)*)?
        )
    }};
}

impl ApiCall<'_> {
    /// Emits the call as one `tracing` event.
    pub(crate) fn send(&self, from: Origin<'_>) {
        match *self {
            ApiCall::Version { exe } => send!(from, Level::INFO, "version", exe),
            ApiCall::Start { argv } => send!(from, Level::INFO, "start", argv),
            ApiCall::CmdAncestry { ancestry } => {
                send!(from, Level::INFO, "cmd_ancestry", ancestry)
            }
            ApiCall::CmdPath { path } => send!(from, Level::INFO, "cmd_path", path),
            ApiCall::CmdName { name, hierarchy } => {
                send!(from, Level::INFO, "cmd_name", name, hierarchy)
            }
            ApiCall::CmdMode { name } => send!(from, Level::INFO, "cmd_mode", name),
            ApiCall::Alias { alias, argv } => send!(from, Level::INFO, "alias", alias, argv),
            ApiCall::DefParam {
                scope,
                param,
                value,
            } => send!(
                from,
                Level::INFO,
                "def_param",
                scope,
                param,
                has_value = value.is_some(),
                value = value.unwrap_or("")
            ),
            ApiCall::DefRepo { repo, worktree } => {
                send!(from, Level::INFO, "def_repo", repo, worktree)
            }
            ApiCall::RegionEnter(ref region) => region.send(from, "region_enter"),
            ApiCall::RegionLeave(ref region) => region.send(from, "region_leave"),
            ApiCall::Printf { msg } => send!(from, Level::INFO, "printf", msg),
            ApiCall::Error { msg, fmt } => send!(from, Level::ERROR, "error", msg, fmt),
            ApiCall::Data {
                category,
                key,
                value,
                repo,
            } => send!(
                from,
                Level::INFO,
                "data",
                category,
                key,
                value,
                has_repo = repo.is_some(),
                repo = repo.unwrap_or(0)
            ),
            ApiCall::DataJson {
                category,
                key,
                json,
                repo,
            } => send!(
                from,
                Level::INFO,
                "data_json",
                category,
                key,
                json,
                has_repo = repo.is_some(),
                repo = repo.unwrap_or(0)
            ),
            ApiCall::ChildStart(ref c) => send!(
                from,
                Level::INFO,
                "child_start",
                child_id = c.child_id,
                class = c.class,
                hook_name = c.hook_name,
                cd = c.cd,
                use_shell = c.use_shell,
                is_git = c.is_git,
                argv = c.argv
            ),
            ApiCall::ChildExit {
                child_id,
                pid,
                code,
                elapsed_us,
            } => send!(
                from,
                Level::INFO,
                "child_exit",
                child_id,
                pid,
                code,
                elapsed_us
            ),
            ApiCall::ChildReady {
                child_id,
                pid,
                ready,
                elapsed_us,
            } => send!(
                from,
                Level::INFO,
                "child_ready",
                child_id,
                pid,
                ready,
                elapsed_us
            ),
            ApiCall::Exec { exec_id, exe, argv } => send!(
                from,
                Level::INFO,
                "exec",
                exec_id,
                has_exe = exe.is_some(),
                exe = exe.unwrap_or(""),
                argv
            ),
            ApiCall::ExecResult { exec_id, code, err } => {
                send!(from, Level::INFO, "exec_result", exec_id, code, err)
            }
            ApiCall::ThreadStart { name } => send!(from, Level::INFO, "thread_start", name),
            ApiCall::ThreadExit => send!(from, Level::INFO, "thread_exit"),
            ApiCall::Timer(ref t) => send!(
                from,
                Level::INFO,
                "timer",
                per_thread = t.per_thread,
                category = t.category,
                name = t.name,
                intervals = t.intervals,
                total_ns = t.total_ns,
                min_ns = t.min_ns,
                max_ns = t.max_ns
            ),
            ApiCall::Counter {
                per_thread,
                category,
                name,
                value,
            } => send!(
                from,
                Level::INFO,
                "counter",
                per_thread,
                category,
                name,
                value
            ),
            ApiCall::Exit { code } => send!(from, Level::INFO, "exit", code),
            ApiCall::Atexit { code } => send!(from, Level::INFO, "atexit", code),
            ApiCall::Signal { signo } => send!(from, Level::INFO, "signal", signo),
        }
    }
}

impl ApiRegion<'_> {
    fn send(&self, from: Origin<'_>, kind: &'static str) {
        send!(
            from,
            Level::INFO,
            kind,
            category = self.category,
            label = self.label,
            has_msg = self.msg.is_some(),
            msg = self.msg.unwrap_or(""),
            has_repo = self.repo.is_some(),
            repo = self.repo.unwrap_or(0)
        )
    }
}

impl<'a> ApiCall<'a> {
    /// Reads a call back from its fields; `None` for an `event` this version does not
    /// know.
    pub(crate) fn receive(f: &'a ApiFields) -> Option<ApiCall<'a>> {
        let text = |name: &str| f.str(name).unwrap_or("");
        let int = |name: &str| f.int(name).unwrap_or(0);
        let repo = || f.bool("has_repo").then(|| int("repo"));
        let region = || ApiRegion {
            category: text("category"),
            label: text("label"),
            msg: f.bool("has_msg").then(|| text("msg")),
            repo: repo(),
        };
        Some(match f.str("event")? {
            "version" => ApiCall::Version { exe: text("exe") },
            "start" => ApiCall::Start { argv: text("argv") },
            "cmd_ancestry" => ApiCall::CmdAncestry {
                ancestry: text("ancestry"),
            },
            "cmd_path" => ApiCall::CmdPath { path: text("path") },
            "cmd_name" => ApiCall::CmdName {
                name: text("name"),
                hierarchy: text("hierarchy"),
            },
            "cmd_mode" => ApiCall::CmdMode { name: text("name") },
            "alias" => ApiCall::Alias {
                alias: text("alias"),
                argv: text("argv"),
            },
            "def_param" => ApiCall::DefParam {
                scope: text("scope"),
                param: text("param"),
                value: f.bool("has_value").then(|| text("value")),
            },
            "def_repo" => ApiCall::DefRepo {
                repo: int("repo"),
                worktree: text("worktree"),
            },
            "region_enter" => ApiCall::RegionEnter(region()),
            "region_leave" => ApiCall::RegionLeave(region()),
            "printf" => ApiCall::Printf { msg: text("msg") },
            "error" => ApiCall::Error {
                msg: text("msg"),
                fmt: text("fmt"),
            },
            "data" => ApiCall::Data {
                category: text("category"),
                key: text("key"),
                value: text("value"),
                repo: repo(),
            },
            "data_json" => ApiCall::DataJson {
                category: text("category"),
                key: text("key"),
                json: text("json"),
                repo: repo(),
            },
            "child_start" => ApiCall::ChildStart(ApiChild {
                child_id: int("child_id") as u64,
                class: text("class"),
                hook_name: text("hook_name"),
                cd: text("cd"),
                use_shell: f.bool("use_shell"),
                is_git: f.bool("is_git"),
                argv: text("argv"),
            }),
            "child_exit" => ApiCall::ChildExit {
                child_id: int("child_id") as u64,
                pid: int("pid"),
                code: int("code"),
                elapsed_us: int("elapsed_us") as u64,
            },
            "child_ready" => ApiCall::ChildReady {
                child_id: int("child_id") as u64,
                pid: int("pid"),
                ready: text("ready"),
                elapsed_us: int("elapsed_us") as u64,
            },
            "exec" => ApiCall::Exec {
                exec_id: int("exec_id") as u64,
                exe: f.bool("has_exe").then(|| text("exe")),
                argv: text("argv"),
            },
            "exec_result" => ApiCall::ExecResult {
                exec_id: int("exec_id") as u64,
                code: int("code"),
                err: text("err"),
            },
            "thread_start" => ApiCall::ThreadStart { name: text("name") },
            "thread_exit" => ApiCall::ThreadExit,
            "timer" => ApiCall::Timer(ApiTimer {
                per_thread: f.bool("per_thread"),
                category: text("category"),
                name: text("name"),
                intervals: int("intervals") as u64,
                total_ns: int("total_ns") as u64,
                min_ns: int("min_ns") as u64,
                max_ns: int("max_ns") as u64,
            }),
            "counter" => ApiCall::Counter {
                per_thread: f.bool("per_thread"),
                category: text("category"),
                name: text("name"),
                value: int("value") as u64,
            },
            "exit" => ApiCall::Exit {
                code: int("code") as i32,
            },
            "atexit" => ApiCall::Atexit {
                code: int("code") as i32,
            },
            "signal" => ApiCall::Signal {
                signo: int("signo") as i32,
            },
            _ => return None,
        })
    }
}

/// The caller's location as the event carries it: `Some(None)` for an explicit "no
/// location" (an empty `file`), `None` when the event names none (then the `tracing`
/// callsite is used).
pub(crate) fn location(f: &ApiFields) -> Option<Option<(&str, u32)>> {
    let file = f.str("file")?;
    Some((!file.is_empty()).then(|| (file, f.int("line").unwrap_or(0) as u32)))
}

/// A list as it travels: a JSON array of strings.
pub(crate) fn encode_list<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> String {
    let list: Vec<String> = items.into_iter().map(|s| s.as_ref().to_owned()).collect();
    serde_json::Value::from(list).to_string()
}

/// A list read back (empty when the text is not a JSON array of strings).
pub(crate) fn decode_list(text: &str) -> Vec<String> {
    serde_json::from_str(text).unwrap_or_default()
}

/// One value of a typed Trace2 event.
#[derive(Clone, Debug)]
enum ApiValue {
    Str(String),
    Int(i64),
    Bool(bool),
}

/// The fields of one typed Trace2 event (rare events: plain owned values).
#[derive(Debug, Default)]
pub(crate) struct ApiFields {
    values: Vec<(&'static str, ApiValue)>,
}

impl ApiFields {
    fn get(&self, name: &str) -> Option<&ApiValue> {
        self.values.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    fn str(&self, name: &str) -> Option<&str> {
        match self.get(name)? {
            ApiValue::Str(s) => Some(s.as_str()),
            _ => None,
        }
    }

    fn int(&self, name: &str) -> Option<i64> {
        match self.get(name)? {
            ApiValue::Int(i) => Some(*i),
            ApiValue::Str(s) => s.parse().ok(),
            ApiValue::Bool(_) => None,
        }
    }

    fn bool(&self, name: &str) -> bool {
        matches!(self.get(name), Some(ApiValue::Bool(true)))
    }
}

impl Visit for ApiFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.values
            .push((field.name(), ApiValue::Str(value.to_owned())));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.values.push((field.name(), ApiValue::Int(value)));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        // Kept bit for bit: counters and timer totals are read back `as u64`, so values
        // above `i64::MAX` survive (git prints them unsigned in Normal and Perf).
        self.values
            .push((field.name(), ApiValue::Int(value as i64)));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.values.push((field.name(), ApiValue::Bool(value)));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.values
            .push((field.name(), ApiValue::Str(format!("{value:?}"))));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every call, sent and read back through a real `tracing` dispatch, is the call.
    #[test]
    fn every_call_survives_the_trip() {
        use std::sync::{Arc, Mutex};
        use tracing_subscriber::layer::{Context, SubscriberExt};

        struct Collect(Arc<Mutex<Vec<String>>>);
        impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Collect {
            fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
                let mut fields = ApiFields::default();
                event.record(&mut fields);
                let call = ApiCall::receive(&fields).map(|c| format!("{c:?}"));
                let at = location(&fields);
                self.0
                    .lock()
                    .unwrap()
                    .push(format!("{} {call:?} {at:?}", event.metadata().target()));
            }
        }

        let region = || ApiRegion {
            category: "c",
            label: "l",
            msg: Some(""),
            repo: Some(3),
        };
        let calls = [
            ApiCall::Version { exe: "1.2" },
            ApiCall::Start { argv: "[\"a\"]" },
            ApiCall::CmdAncestry { ancestry: "[]" },
            ApiCall::CmdPath { path: "/x" },
            ApiCall::CmdName {
                name: "n",
                hierarchy: "h/n",
            },
            ApiCall::CmdMode { name: "m" },
            ApiCall::Alias {
                alias: "a",
                argv: "[\"b\"]",
            },
            ApiCall::DefParam {
                scope: "global",
                param: "p",
                value: None,
            },
            ApiCall::DefRepo {
                repo: 1,
                worktree: "/w",
            },
            ApiCall::RegionEnter(region()),
            ApiCall::RegionLeave(ApiRegion {
                msg: None,
                repo: None,
                ..region()
            }),
            ApiCall::Printf { msg: "p" },
            ApiCall::Error { msg: "m", fmt: "f" },
            ApiCall::Data {
                category: "c",
                key: "k",
                value: "v",
                repo: None,
            },
            ApiCall::DataJson {
                category: "c",
                key: "k",
                json: "{}",
                repo: Some(-1),
            },
            ApiCall::ChildStart(ApiChild {
                child_id: 4,
                class: "hook",
                hook_name: "pre-commit",
                cd: "",
                use_shell: true,
                is_git: false,
                argv: "[]",
            }),
            ApiCall::ChildExit {
                child_id: 4,
                pid: 9,
                code: -1,
                elapsed_us: 5,
            },
            ApiCall::ChildReady {
                child_id: 4,
                pid: 9,
                ready: "ready",
                elapsed_us: 5,
            },
            ApiCall::Exec {
                exec_id: 0,
                exe: Some("git"),
                argv: "[]",
            },
            ApiCall::ExecResult {
                exec_id: 0,
                code: 2,
                err: "No such file or directory",
            },
            ApiCall::ThreadStart { name: "t" },
            ApiCall::ThreadExit,
            ApiCall::Timer(ApiTimer {
                per_thread: true,
                category: "c",
                name: "n",
                intervals: 1,
                total_ns: u64::MAX,
                min_ns: 2,
                max_ns: 3,
            }),
            ApiCall::Counter {
                per_thread: false,
                category: "c",
                name: "n",
                value: u64::MAX,
            },
            ApiCall::Exit { code: 255 },
            ApiCall::Atexit { code: 1 },
            ApiCall::Signal { signo: 13 },
        ];
        let seen = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry().with(Collect(Arc::clone(&seen)));
        tracing::subscriber::with_default(subscriber, || {
            for call in &calls {
                call.send(Origin::At(Some("f.rs"), 7));
            }
            calls[0].send(Origin::At(None, 0));
        });
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), calls.len() + 1);
        for (call, line) in calls.iter().zip(seen.iter()) {
            assert_eq!(
                *line,
                format!(
                    "trace2 Some({:?}) Some(Some((\"f.rs\", 7)))",
                    format!("{call:?}")
                )
            );
        }
        assert!(
            seen[calls.len()].ends_with(" Some(None)"),
            "{}",
            seen[calls.len()]
        );
    }

    #[test]
    fn lists_round_trip() {
        let text = encode_list(["a b", "\"q\"", ""]);
        assert_eq!(text, r#"["a b","\"q\"",""]"#);
        assert_eq!(decode_list(&text), ["a b", "\"q\"", ""]);
        assert!(decode_list("not json").is_empty());
    }
}
