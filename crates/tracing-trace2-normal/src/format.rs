//! The Normal line formatter: git's terse, human-oriented Trace2 stream.
//!
//! A line is an optional prefix (local time of day, `file:line`, padding to byte 50)
//! followed by the event's payload. Only the "summary" events are written; regions,
//! data and thread lifecycle events produce nothing.

use tracing_trace2_record::text;
use tracing_trace2_record::{ChildInfo, Format, Record, TimerInfo, Trace2Event};

/// The byte offset, counted from the start of the line, where the payload begins when
/// the prefix is shorter.
const PAYLOAD_COLUMN: usize = 50;

/// Formats records as git's Normal target does (`GIT_TRACE2`).
///
/// The settings are fixed when the formatter is built, so formatting never reads a
/// clock or the environment: the caller works out the local UTC offset once.
#[derive(Clone, Debug, Default)]
pub struct NormalFormat {
    brief: bool,
    utc_offset: i32,
}

impl NormalFormat {
    /// A formatter writing full lines, with times of day in UTC.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether to omit the time and `file:line` prefix (git's `GIT_TRACE2_BRIEF`).
    pub fn with_brief(mut self, brief: bool) -> Self {
        self.brief = brief;
        self
    }

    /// The local time zone, as seconds east of UTC, used for the time of day.
    pub fn with_utc_offset(mut self, seconds_east: i32) -> Self {
        self.utc_offset = seconds_east;
        self
    }

    /// Whether the prefix is omitted.
    pub fn brief(&self) -> bool {
        self.brief
    }

    /// The UTC offset in seconds east.
    pub fn utc_offset(&self) -> i32 {
        self.utc_offset
    }

    fn push_prefix(&self, record: &Record<'_>, out: &mut Vec<u8>, line_start: usize) {
        text::push_time_of_day(out, record.time.wall_us, self.utc_offset);
        out.push(b' ');
        if let Some(file) = record.callsite.file.filter(|f| !f.is_empty()) {
            out.extend_from_slice(file.as_bytes());
            out.push(b':');
            text::push_u64(out, u64::from(record.callsite.line));
            out.push(b' ');
        }
        text::pad_to(out, line_start + PAYLOAD_COLUMN);
    }
}

impl Format for NormalFormat {
    fn format(&self, record: &Record<'_>, out: &mut Vec<u8>) {
        if !is_written(&record.event) {
            return;
        }
        let line_start = out.len();
        if !self.brief {
            self.push_prefix(record, out, line_start);
        }
        push_payload(record, out);
        // Git completes the line only when it is non-empty and does not already end in
        // LF: a message ending in LF keeps a single one, and an empty brief line writes
        // nothing at all.
        if out.len() > line_start && out.last() != Some(&b'\n') {
            out.push(b'\n');
        }
    }

    fn writes(&self, record: &Record<'_>) -> bool {
        is_written(&record.event)
    }
}

/// Whether the Normal target writes anything for `event`.
fn is_written(event: &Trace2Event<'_>) -> bool {
    !matches!(
        event,
        Trace2Event::RegionEnter { .. }
            | Trace2Event::RegionLeave { .. }
            | Trace2Event::Data { .. }
            | Trace2Event::DataJson { .. }
            | Trace2Event::ThreadStart
            | Trace2Event::ThreadExit { .. }
            | Trace2Event::TooManyFiles
    )
}

/// Appends `<name>[<id>]`, the head of the child and exec payloads.
fn push_indexed(out: &mut Vec<u8>, name: &str, id: u64) {
    out.extend_from_slice(name.as_bytes());
    out.push(b'[');
    text::push_u64(out, id);
    out.push(b']');
}

/// `child_exit[<id>] pid:<pid> code:<code> elapsed:<seconds>`.
fn push_child_exit(out: &mut Vec<u8>, child_id: u64, pid: i64, code: i64, elapsed_us: u64) {
    push_indexed(out, "child_exit", child_id);
    out.extend_from_slice(b" pid:");
    text::push_i64(out, pid);
    out.extend_from_slice(b" code:");
    text::push_i64(out, code);
    out.extend_from_slice(b" elapsed:");
    text::push_seconds(out, elapsed_us);
}

/// `child_ready[<id>] pid:<pid> ready:<ready> elapsed:<seconds>`.
fn push_child_ready(out: &mut Vec<u8>, child_id: u64, pid: i64, ready: &str, elapsed_us: u64) {
    push_indexed(out, "child_ready", child_id);
    out.extend_from_slice(b" pid:");
    text::push_i64(out, pid);
    out.extend_from_slice(b" ready:");
    out.extend_from_slice(ready.as_bytes());
    out.extend_from_slice(b" elapsed:");
    text::push_seconds(out, elapsed_us);
}

/// `exec[<id>] [<exe> ]<quoted argv>`.
fn push_exec(out: &mut Vec<u8>, exec_id: u64, exe: Option<&str>, argv: &[&str]) {
    push_indexed(out, "exec", exec_id);
    out.push(b' ');
    if let Some(exe) = exe {
        out.extend_from_slice(exe.as_bytes());
        out.push(b' ');
    }
    text::push_quoted_list(out, argv);
}

/// `exec_result[<id>] code:<code>`, with ` err:<text>` for a failed exec.
fn push_exec_result(out: &mut Vec<u8>, exec_id: u64, code: i64, err: Option<&str>) {
    push_indexed(out, "exec_result", exec_id);
    out.extend_from_slice(b" code:");
    text::push_i64(out, code);
    if code > 0
        && let Some(err) = err
    {
        out.extend_from_slice(b" err:");
        out.extend_from_slice(err.as_bytes());
    }
}

fn push_payload(record: &Record<'_>, out: &mut Vec<u8>) {
    match &record.event {
        Trace2Event::Version { exe } => {
            out.extend_from_slice(b"version ");
            out.extend_from_slice(exe.as_bytes());
        }
        Trace2Event::Start { argv } => {
            out.extend_from_slice(b"start ");
            text::push_quoted_list(out, argv);
        }
        Trace2Event::CmdAncestry { ancestry } => {
            out.extend_from_slice(b"cmd_ancestry");
            for (i, name) in ancestry.iter().enumerate() {
                out.extend_from_slice(if i == 0 { b" " } else { b" <- " });
                out.extend_from_slice(name.as_bytes());
            }
        }
        Trace2Event::CmdPath { path } => {
            out.extend_from_slice(b"cmd_path ");
            out.extend_from_slice(path.as_bytes());
        }
        Trace2Event::CmdName { name, hierarchy } => {
            out.extend_from_slice(b"cmd_name ");
            out.extend_from_slice(name.as_bytes());
            if !hierarchy.is_empty() {
                out.extend_from_slice(b" (");
                out.extend_from_slice(hierarchy.as_bytes());
                out.push(b')');
            }
        }
        Trace2Event::CmdMode { name } => {
            out.extend_from_slice(b"cmd_mode ");
            out.extend_from_slice(name.as_bytes());
        }
        Trace2Event::Alias { alias, argv } => {
            out.extend_from_slice(b"alias ");
            out.extend_from_slice(alias.as_bytes());
            out.extend_from_slice(b" -> ");
            text::push_quoted_list(out, argv);
        }
        Trace2Event::DefParam {
            scope,
            param,
            value,
        } => {
            out.extend_from_slice(b"def_param scope:");
            out.extend_from_slice(scope.as_bytes());
            out.push(b' ');
            out.extend_from_slice(param.as_bytes());
            if let Some(value) = value {
                out.push(b'=');
                out.extend_from_slice(value.as_bytes());
            }
        }
        Trace2Event::DefRepo { worktree, .. } => {
            out.extend_from_slice(b"worktree ");
            text::push_quoted(out, worktree);
        }
        Trace2Event::Error { msg, .. } => {
            out.extend_from_slice(b"error");
            if let Some(msg) = msg {
                out.push(b' ');
                out.extend_from_slice(msg.as_bytes());
            }
        }
        Trace2Event::ChildStart(child) => push_child_start(child, out),
        Trace2Event::ChildExit {
            child_id,
            pid,
            code,
            elapsed_us,
        } => push_child_exit(out, *child_id, *pid, *code, *elapsed_us),
        Trace2Event::ChildReady {
            child_id,
            pid,
            ready,
            elapsed_us,
        } => push_child_ready(out, *child_id, *pid, ready, *elapsed_us),
        Trace2Event::Exec { exec_id, exe, argv } => push_exec(out, *exec_id, *exe, argv),
        Trace2Event::ExecResult { exec_id, code, err } => {
            push_exec_result(out, *exec_id, *code, *err)
        }
        Trace2Event::Printf { msg } => {
            if let Some(msg) = msg {
                out.extend_from_slice(msg.as_bytes());
            }
        }
        Trace2Event::Timer { timer, .. } => push_timer(record.event.name(), timer, out),
        Trace2Event::Counter {
            category,
            name,
            value,
            ..
        } => {
            out.extend_from_slice(record.event.name().as_bytes());
            out.push(b' ');
            out.extend_from_slice(category.as_bytes());
            out.push(b'/');
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b" value:");
            text::push_u64(out, *value);
        }
        Trace2Event::Exit { code } | Trace2Event::Atexit { code } => {
            out.extend_from_slice(record.event.name().as_bytes());
            push_elapsed_code(out, record.time.t_abs_us, *code);
        }
        Trace2Event::Signal { signo } => {
            out.extend_from_slice(b"signal");
            push_elapsed_code(out, record.time.t_abs_us, *signo);
        }
        // Filtered out by `is_written`; listed so that a new variant forces a decision.
        Trace2Event::TooManyFiles
        | Trace2Event::RegionEnter { .. }
        | Trace2Event::RegionLeave { .. }
        | Trace2Event::Data { .. }
        | Trace2Event::DataJson { .. }
        | Trace2Event::ThreadStart
        | Trace2Event::ThreadExit { .. } => {}
    }
}

fn push_child_start(child: &ChildInfo<'_>, out: &mut Vec<u8>) {
    push_indexed(out, "child_start", child.child_id);
    if let Some(dir) = child.cd {
        out.extend_from_slice(b" cd ");
        text::push_quoted(out, dir);
        out.push(b';');
    }
    out.push(b' ');
    if child.is_git {
        out.extend_from_slice(b"git ");
    }
    text::push_quoted_list(out, child.argv);
}

/// Appends `<timer|th_timer> <category>/<name> intervals:… total:… min:… max:…`.
fn push_timer(name: &str, timer: &TimerInfo<'_>, out: &mut Vec<u8>) {
    out.extend_from_slice(name.as_bytes());
    out.push(b' ');
    out.extend_from_slice(timer.category.as_bytes());
    out.push(b'/');
    out.extend_from_slice(timer.name.as_bytes());
    out.extend_from_slice(b" intervals:");
    text::push_u64(out, timer.intervals);
    out.extend_from_slice(b" total:");
    text::push_timer_seconds(out, timer.total_ns);
    out.extend_from_slice(b" min:");
    text::push_timer_seconds(out, timer.min_ns);
    out.extend_from_slice(b" max:");
    text::push_timer_seconds(out, timer.max_ns);
}

/// Appends ` elapsed:<t_abs> code:<code>`, the tail of `exit`, `atexit` and `signal`.
fn push_elapsed_code(out: &mut Vec<u8>, t_abs_us: u64, code: i32) {
    out.extend_from_slice(b" elapsed:");
    text::push_seconds(out, t_abs_us);
    out.extend_from_slice(b" code:");
    text::push_i64(out, i64::from(code));
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_trace2_record::{Callsite, RegionInfo, Timestamp};
    use tracing_trace2_test_support::alloc::{CountingAlloc, allocations};

    /// The real git 2.47.3 captures the expected lines come from: the files of the
    /// project's `spec/samples` these tests read, copied into the crate so that its
    /// package tests itself.
    const SAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata");

    /// 2026-11-21T00:00:00Z, the day the samples were captured (in UTC).
    const CAPTURE_DAY_US: i64 = 1_795_219_200_000_000;
    const DAY_US: i64 = 86_400_000_000;

    #[global_allocator]
    static GLOBAL: CountingAlloc = CountingAlloc;

    /// The inputs of one event, owned, as read back from a line of git's output.
    #[derive(Debug, Clone, PartialEq)]
    enum Owned {
        Version(String),
        Start(Vec<String>),
        CmdAncestry(Vec<String>),
        CmdPath(String),
        CmdName(String, String),
        CmdMode(String),
        Alias(String, Vec<String>),
        DefParam(String, String, Option<String>),
        DefRepo(String),
        Error(Option<String>),
        ChildStart {
            id: u64,
            cd: Option<String>,
            is_git: bool,
            argv: Vec<String>,
        },
        ChildExit {
            id: u64,
            pid: i64,
            code: i64,
            elapsed_us: u64,
        },
        ChildReady {
            id: u64,
            pid: i64,
            ready: String,
            elapsed_us: u64,
        },
        Exec {
            id: u64,
            exe: Option<String>,
            argv: Vec<String>,
        },
        ExecResult {
            id: u64,
            code: i64,
            err: Option<String>,
        },
        Printf(Option<String>),
        Timer {
            per_thread: bool,
            category: String,
            name: String,
            intervals: u64,
            total_ns: u64,
            min_ns: u64,
            max_ns: u64,
        },
        Counter {
            per_thread: bool,
            category: String,
            name: String,
            value: u64,
        },
        Exit(i32),
        Atexit(i32),
        Signal(i32),
    }

    impl Owned {
        /// The one list an event carries (argv or ancestry), to be borrowed by `event`.
        fn list(&self) -> &[String] {
            match self {
                Owned::Start(l)
                | Owned::CmdAncestry(l)
                | Owned::Alias(_, l)
                | Owned::ChildStart { argv: l, .. }
                | Owned::Exec { argv: l, .. } => l,
                _ => &[],
            }
        }

        fn event<'a>(&'a self, list: &'a [&'a str]) -> Trace2Event<'a> {
            match self {
                Owned::Version(exe) => Trace2Event::Version { exe },
                Owned::Start(_) => Trace2Event::Start { argv: list },
                Owned::CmdAncestry(_) => Trace2Event::CmdAncestry { ancestry: list },
                Owned::CmdPath(path) => Trace2Event::CmdPath { path },
                Owned::CmdName(name, hierarchy) => Trace2Event::CmdName { name, hierarchy },
                Owned::CmdMode(name) => Trace2Event::CmdMode { name },
                Owned::Alias(alias, _) => Trace2Event::Alias { alias, argv: list },
                Owned::DefParam(scope, param, value) => Trace2Event::DefParam {
                    scope,
                    param,
                    value: value.as_deref(),
                },
                Owned::DefRepo(worktree) => Trace2Event::DefRepo { repo: 1, worktree },
                Owned::Error(msg) => Trace2Event::Error {
                    msg: msg.as_deref(),
                    fmt: msg.as_deref(),
                },
                Owned::ChildStart { id, cd, is_git, .. } => Trace2Event::ChildStart(ChildInfo {
                    child_id: *id,
                    class: "?",
                    hook_name: None,
                    cd: cd.as_deref(),
                    use_shell: false,
                    is_git: *is_git,
                    argv: list,
                }),
                Owned::ChildExit {
                    id,
                    pid,
                    code,
                    elapsed_us,
                } => Trace2Event::ChildExit {
                    child_id: *id,
                    pid: *pid,
                    code: *code,
                    elapsed_us: *elapsed_us,
                },
                Owned::ChildReady {
                    id,
                    pid,
                    ready,
                    elapsed_us,
                } => Trace2Event::ChildReady {
                    child_id: *id,
                    pid: *pid,
                    ready,
                    elapsed_us: *elapsed_us,
                },
                Owned::Exec { id, exe, .. } => Trace2Event::Exec {
                    exec_id: *id,
                    exe: exe.as_deref(),
                    argv: list,
                },
                Owned::ExecResult { id, code, err } => Trace2Event::ExecResult {
                    exec_id: *id,
                    code: *code,
                    err: err.as_deref(),
                },
                Owned::Printf(msg) => Trace2Event::Printf {
                    msg: msg.as_deref(),
                },
                Owned::Timer {
                    per_thread,
                    category,
                    name,
                    intervals,
                    total_ns,
                    min_ns,
                    max_ns,
                } => Trace2Event::Timer {
                    per_thread: *per_thread,
                    timer: TimerInfo {
                        category,
                        name,
                        intervals: *intervals,
                        total_ns: *total_ns,
                        min_ns: *min_ns,
                        max_ns: *max_ns,
                    },
                },
                Owned::Counter {
                    per_thread,
                    category,
                    name,
                    value,
                } => Trace2Event::Counter {
                    per_thread: *per_thread,
                    category,
                    name,
                    value: *value,
                },
                Owned::Exit(code) => Trace2Event::Exit { code: *code },
                Owned::Atexit(code) => Trace2Event::Atexit { code: *code },
                Owned::Signal(signo) => Trace2Event::Signal { signo: *signo },
            }
        }
    }

    /// Splits a shell-quoted list the way a POSIX shell would: unquoted spaces separate
    /// words, single quotes keep everything literal, a backslash outside quotes keeps
    /// the next character.
    fn unquote_list(text: &str) -> Vec<String> {
        let mut words = Vec::new();
        let mut word = String::new();
        let mut in_word = false;
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            match c {
                ' ' => {
                    if in_word {
                        words.push(std::mem::take(&mut word));
                        in_word = false;
                    }
                }
                '\'' => {
                    in_word = true;
                    for q in chars.by_ref() {
                        if q == '\'' {
                            break;
                        }
                        word.push(q);
                    }
                }
                '\\' => {
                    in_word = true;
                    word.extend(chars.next());
                }
                _ => {
                    in_word = true;
                    word.push(c);
                }
            }
        }
        if in_word {
            words.push(word);
        }
        words
    }

    fn unquote_one(text: &str) -> String {
        let mut words = unquote_list(text);
        assert_eq!(words.len(), 1, "one word expected in {text:?}");
        words.remove(0)
    }

    /// `0.000563` -> 563 µs.
    fn parse_micros(text: &str) -> u64 {
        let (whole, frac) = text.split_once('.').unwrap();
        assert_eq!(frac.len(), 6, "{text}");
        whole.parse::<u64>().unwrap() * 1_000_000 + frac.parse::<u64>().unwrap()
    }

    /// `child_exit[3] rest` -> (3, "rest").
    fn indexed<'a>(payload: &'a str, name: &str) -> Option<(u64, &'a str)> {
        let rest = payload.strip_prefix(name)?.strip_prefix('[')?;
        let (id, rest) = rest.split_once(']')?;
        Some((id.parse().unwrap(), rest.strip_prefix(' ').unwrap_or(rest)))
    }

    /// `key:value` fields separated by spaces, in order.
    fn fields<'a>(text: &'a str, keys: &[&str]) -> Vec<&'a str> {
        let parts: Vec<&str> = text.split(' ').collect();
        assert_eq!(parts.len(), keys.len(), "{text}");
        parts
            .iter()
            .zip(keys)
            .map(|(p, k)| p.strip_prefix(k).unwrap().strip_prefix(':').unwrap())
            .collect()
    }

    /// Reads back the event inputs and `t_abs` (µs) from a Normal payload.
    fn parse_payload(payload: &str) -> (Owned, u64) {
        let mut t_abs = 0;
        let mut elapsed_code = |rest: &str| {
            let f = fields(rest, &["elapsed", "code"]);
            t_abs = parse_micros(f[0]);
            f[1].parse::<i32>().unwrap()
        };
        let owned = if let Some(v) = payload.strip_prefix("version ") {
            Owned::Version(v.to_owned())
        } else if let Some(argv) = payload.strip_prefix("start ") {
            Owned::Start(unquote_list(argv))
        } else if let Some(names) = payload.strip_prefix("cmd_ancestry ") {
            Owned::CmdAncestry(names.split(" <- ").map(str::to_owned).collect())
        } else if let Some(path) = payload.strip_prefix("cmd_path ") {
            Owned::CmdPath(path.to_owned())
        } else if let Some(rest) = payload.strip_prefix("cmd_name ") {
            match rest.split_once(" (") {
                Some((name, h)) => Owned::CmdName(name.into(), h.strip_suffix(')').unwrap().into()),
                None => Owned::CmdName(rest.into(), String::new()),
            }
        } else if let Some(mode) = payload.strip_prefix("cmd_mode ") {
            Owned::CmdMode(mode.to_owned())
        } else if let Some(rest) = payload.strip_prefix("alias ") {
            let (alias, argv) = rest.split_once(" -> ").unwrap();
            Owned::Alias(alias.to_owned(), unquote_list(argv))
        } else if let Some(rest) = payload.strip_prefix("def_param scope:") {
            let (scope, kv) = rest.split_once(' ').unwrap();
            match kv.split_once('=') {
                Some((k, v)) => Owned::DefParam(scope.into(), k.into(), Some(v.into())),
                None => Owned::DefParam(scope.into(), kv.into(), None),
            }
        } else if let Some(wt) = payload.strip_prefix("worktree ") {
            Owned::DefRepo(unquote_one(wt))
        } else if payload == "error" {
            Owned::Error(None)
        } else if let Some(msg) = payload.strip_prefix("error ") {
            Owned::Error(Some(msg.to_owned()))
        } else if let Some((id, rest)) = indexed(payload, "child_start") {
            let (cd, rest) = match rest.strip_prefix("cd ") {
                Some(r) => {
                    let (dir, r) = r.split_once("; ").unwrap();
                    (Some(unquote_one(dir)), r)
                }
                None => (None, rest),
            };
            let (is_git, rest) = match rest.strip_prefix("git ") {
                Some(r) => (true, r),
                None => (false, rest),
            };
            Owned::ChildStart {
                id,
                cd,
                is_git,
                argv: unquote_list(rest),
            }
        } else if let Some((id, rest)) = indexed(payload, "child_exit") {
            let f = fields(rest, &["pid", "code", "elapsed"]);
            Owned::ChildExit {
                id,
                pid: f[0].parse().unwrap(),
                code: f[1].parse().unwrap(),
                elapsed_us: parse_micros(f[2]),
            }
        } else if let Some((id, rest)) = indexed(payload, "child_ready") {
            let f = fields(rest, &["pid", "ready", "elapsed"]);
            Owned::ChildReady {
                id,
                pid: f[0].parse().unwrap(),
                ready: f[1].to_owned(),
                elapsed_us: parse_micros(f[2]),
            }
        } else if let Some((id, rest)) = indexed(payload, "exec") {
            // The executable is written raw before the quoted argv; git's own exec
            // always names it, so read the first word as the executable.
            let (exe, argv) = rest.split_once(' ').unwrap();
            Owned::Exec {
                id,
                exe: Some(exe.to_owned()),
                argv: unquote_list(argv),
            }
        } else if let Some((id, rest)) = indexed(payload, "exec_result") {
            let (code, err) = match rest.split_once(" err:") {
                Some((c, e)) => (c, Some(e.to_owned())),
                None => (rest, None),
            };
            Owned::ExecResult {
                id,
                code: code.strip_prefix("code:").unwrap().parse().unwrap(),
                err,
            }
        } else if let Some((per_thread, rest)) = payload
            .strip_prefix("timer ")
            .map(|r| (false, r))
            .or_else(|| payload.strip_prefix("th_timer ").map(|r| (true, r)))
        {
            let (cat_name, rest) = rest.split_once(' ').unwrap();
            let (category, name) = cat_name.split_once('/').unwrap();
            let f = fields(rest, &["intervals", "total", "min", "max"]);
            Owned::Timer {
                per_thread,
                category: category.into(),
                name: name.into(),
                intervals: f[0].parse().unwrap(),
                total_ns: parse_micros(f[1]) * 1000,
                min_ns: parse_micros(f[2]) * 1000,
                max_ns: parse_micros(f[3]) * 1000,
            }
        } else if let Some((per_thread, rest)) = payload
            .strip_prefix("counter ")
            .map(|r| (false, r))
            .or_else(|| payload.strip_prefix("th_counter ").map(|r| (true, r)))
        {
            let (cat_name, value) = rest.split_once(" value:").unwrap();
            let (category, name) = cat_name.split_once('/').unwrap();
            Owned::Counter {
                per_thread,
                category: category.into(),
                name: name.into(),
                value: value.parse().unwrap(),
            }
        } else if let Some(rest) = payload.strip_prefix("exit") {
            Owned::Exit(elapsed_code(rest.strip_prefix(' ').unwrap()))
        } else if let Some(rest) = payload.strip_prefix("atexit") {
            Owned::Atexit(elapsed_code(rest.strip_prefix(' ').unwrap()))
        } else if let Some(rest) = payload.strip_prefix("signal") {
            Owned::Signal(elapsed_code(rest.strip_prefix(' ').unwrap()))
        } else if payload.is_empty() {
            Owned::Printf(None)
        } else {
            Owned::Printf(Some(payload.to_owned()))
        };
        (owned, t_abs)
    }

    /// One line (or multi-line record) of a capture, taken apart.
    struct Line<'a> {
        /// The record's bytes as git wrote them, final LF included.
        text: &'a str,
        wall_us: i64,
        callsite: Callsite<'a>,
        payload: &'a str,
    }

    fn is_time_of_day(line: &str) -> bool {
        let b = line.as_bytes();
        b.len() >= 16
            && b[..15].iter().enumerate().all(|(i, &c)| match i {
                2 | 5 => c == b':',
                8 => c == b'.',
                _ => c.is_ascii_digit(),
            })
            && b[15] == b' '
    }

    /// Splits a capture into records: in full mode a record starts with a time of day
    /// (so a message with an embedded LF continues on the next physical line); in
    /// brief mode every line is a record.
    fn split_records(capture: &str, brief: bool) -> Vec<&str> {
        let mut records: Vec<&str> = Vec::new();
        let mut start = 0;
        for (pos, line) in line_starts(capture) {
            if pos > start && (brief || is_time_of_day(line)) {
                records.push(&capture[start..pos]);
                start = pos;
            }
        }
        if start < capture.len() {
            records.push(&capture[start..]);
        }
        records
    }

    fn line_starts(capture: &str) -> impl Iterator<Item = (usize, &str)> {
        capture.split_inclusive('\n').scan(0, |pos, line| {
            let here = *pos;
            *pos += line.len();
            Some((here, line))
        })
    }

    fn parse_line(text: &str, brief: bool) -> Line<'_> {
        let body = text.strip_suffix('\n').expect("every record ends in LF");
        if brief {
            return Line {
                text,
                wall_us: 0,
                callsite: Callsite::default(),
                payload: body,
            };
        }
        assert!(is_time_of_day(body), "{body:?}");
        let field = |r: std::ops::Range<usize>| body[r].parse::<i64>().unwrap();
        let time_of_day =
            ((field(0..2) * 60 + field(3..5)) * 60 + field(6..8)) * 1_000_000 + field(9..15);
        let (callsite, prefix_end) = if body.as_bytes()[16] == b' ' {
            (Callsite::default(), 16)
        } else {
            let (file_line, _) = body[16..].split_once(' ').unwrap();
            let (file, line) = file_line.rsplit_once(':').unwrap();
            let callsite = Callsite {
                file: Some(file),
                line: line.parse().unwrap(),
            };
            (callsite, 16 + file_line.len() + 1)
        };
        let payload_start = prefix_end.max(PAYLOAD_COLUMN);
        assert!(body[prefix_end..payload_start].bytes().all(|b| b == b' '));
        Line {
            text,
            wall_us: CAPTURE_DAY_US + time_of_day,
            callsite,
            payload: &body[payload_start..],
        }
    }

    fn record<'a>(
        event: Trace2Event<'a>,
        wall_us: i64,
        t_abs_us: u64,
        callsite: Callsite<'a>,
    ) -> Record<'a> {
        Record {
            event,
            time: Timestamp { wall_us, t_abs_us },
            sid: "20261121T232137.816920Z-H1c4a9a2f-P00002b68",
            depth: 0,
            thread: "main",
            callsite,
            open_regions: 0,
        }
    }

    fn read_sample(name: &str) -> Vec<u8> {
        let path = format!("{SAMPLES}/{name}");
        std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
    }

    /// Rebuilds the record behind every line of `capture`, formats it and compares the
    /// bytes with git's, line by line and for the whole file at once.
    fn check_capture(capture: &str, brief: bool) -> usize {
        let format = NormalFormat::new().with_brief(brief);
        let mut all = Vec::new();
        let records = split_records(capture, brief);
        assert!(!records.is_empty());
        for text in &records {
            let line = parse_line(text, brief);
            let (owned, t_abs) = parse_payload(line.payload);
            let list: Vec<&str> = owned.list().iter().map(String::as_str).collect();
            let rec = record(owned.event(&list), line.wall_us, t_abs, line.callsite);
            let mut one = Vec::new();
            format.format(&rec, &mut one);
            assert_eq!(
                String::from_utf8_lossy(&one),
                line.text,
                "record {owned:?} of {t_abs} µs"
            );
            // Formatting after earlier lines must give the same bytes: padding is
            // counted from the start of the line, not of the buffer.
            format.format(&rec, &mut all);
        }
        assert_eq!(String::from_utf8_lossy(&all), capture);
        records.len()
    }

    fn check_sample(name: &str, brief: bool) -> usize {
        let bytes = read_sample(name);
        let capture = String::from_utf8(bytes).expect("this capture is valid UTF-8");
        check_capture(&capture, brief)
    }

    #[test]
    fn tt_spec() {
        // Long and absent file:line, printf, cd, child_ready, nested processes.
        assert_eq!(check_sample("tt-spec.normal", false), 24);
    }

    #[test]
    fn tt_errors_multi_line_messages() {
        // Ten physical lines, eight records: two of them span two lines.
        assert_eq!(check_sample("tt-errors.normal", false), 8);
    }

    #[test]
    fn commit() {
        assert_eq!(check_sample("commit.normal", false), 27);
    }

    #[test]
    fn def_param() {
        assert_eq!(check_sample("def-param.normal", false), 14);
    }

    #[test]
    fn thread_timers() {
        assert_eq!(check_sample("tt-thread-timer.normal", false), 10);
    }

    #[test]
    fn counters() {
        assert_eq!(check_sample("tt-counter.normal", false), 7);
    }

    #[test]
    fn alias_shell() {
        assert_eq!(check_sample("alias-shell.normal", false), 13);
    }

    #[test]
    fn exec_fail() {
        assert_eq!(check_sample("exec-fail.normal", false), 9);
    }

    #[test]
    fn version() {
        assert_eq!(check_sample("version.normal", false), 6);
    }

    #[test]
    fn brief_captures() {
        assert_eq!(check_sample("version-brief.normal", true), 6);
        assert_eq!(check_sample("query.normal", true), 6);
        assert_eq!(check_sample("usage.normal", true), 6);
        assert_eq!(check_sample("set-config.normal", true), 9);
    }

    #[test]
    fn submodule_status_cd() {
        assert_eq!(check_sample("submodule-status.normal", false), 17);
    }

    #[test]
    fn signal_sigpipe() {
        assert_eq!(check_sample("signal-sigpipe.normal", false), 6);
    }

    #[test]
    fn redact_url() {
        assert_eq!(check_sample("redact-url.normal", false), 24);
    }

    #[test]
    fn error_escape_invalid_utf8() {
        let bytes = read_sample("error-escape.normal");
        assert!(
            std::str::from_utf8(&bytes).is_err(),
            "git wrote byte 0xFF raw"
        );
        // Our messages are &str: the invalid byte can only reach us as U+FFFD.
        let capture = String::from_utf8_lossy(&bytes);
        assert_eq!(capture.matches('\u{FFFD}').count(), 2);
        assert_eq!(check_capture(&capture, false), 9);
    }

    /// A fresh trace from the real git binary: a worktree and arguments that need
    /// quoting (`'` and `!`), and an error message spanning three lines.
    #[test]
    #[cfg_attr(
        windows,
        ignore = "needs the real git, which Windows runs here do not have"
    )]
    fn real_git_trace() {
        let root = std::env::temp_dir().join(format!("tt2-normal-{}", std::process::id()));
        let repo = root.join("it's here");
        std::fs::create_dir_all(&repo).unwrap();
        let trace = root.join("trace.normal");
        let git = || tracing_trace2_test_support::git::clean_git(&root);
        let init = git().args(["init", "-q"]).arg(&repo).status().unwrap();
        assert!(init.success());
        let output = git()
            .env("GIT_TRACE2", &trace)
            .arg("-C")
            .arg(&repo)
            .args(["rev-parse", "--show-toplevel", "a b!"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(128));
        let capture = String::from_utf8(std::fs::read(&trace).unwrap()).unwrap();
        std::fs::remove_dir_all(&root).unwrap();
        assert!(capture.contains("worktree '"), "{capture}");
        assert!(capture.contains(" 'a b'\\!''\n"), "{capture}");
        assert!(capture.contains("\nUse '--' to separate"), "{capture}");
        check_capture(&capture, false);
    }

    /// The parser must really unquote, or a formatter that forgot to quote would pass.
    #[test]
    fn parser_reads_semantic_values() {
        let capture = String::from_utf8(read_sample("alias-shell.normal")).unwrap();
        let records = split_records(&capture, false);
        let payload = |i: usize| parse_payload(parse_line(records[i], false).payload).0;
        let words = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            payload(1),
            Owned::Start(words(&[
                "git",
                "-c",
                "alias.x=!echo hi",
                "x",
                "arg1",
                "arg two"
            ]))
        );
        assert_eq!(
            payload(7),
            Owned::Alias("x".into(), words(&["echo hi", "arg1", "arg two"]))
        );
        let capture = String::from_utf8(read_sample("tt-spec.normal")).unwrap();
        let records = split_records(&capture, false);
        let line = parse_line(records[10], false);
        assert_eq!(
            parse_payload(line.payload).0,
            Owned::ChildStart {
                id: 0,
                cd: Some("/tmp".into()),
                is_git: false,
                argv: words(&["echo child with 'quote'; exit 3"]),
            }
        );
        assert_eq!(line.callsite.file, Some("run-command.c"));
        assert_eq!(line.callsite.line, 733);
    }

    /// The first line of `version.normal`, its record and its time of day in µs.
    fn version_line() -> (String, Line<'static>) {
        let capture = String::from_utf8(read_sample("version.normal")).unwrap();
        let first = capture.split_inclusive('\n').next().unwrap().to_owned();
        let leaked: &'static str = Box::leak(first.clone().into_boxed_str());
        (first, parse_line(leaked, false))
    }

    fn format_line(
        format: &NormalFormat,
        event: Trace2Event<'_>,
        line: &Line<'_>,
        t_abs: u64,
    ) -> Vec<u8> {
        let mut out = Vec::new();
        format.format(&record(event, line.wall_us, t_abs, line.callsite), &mut out);
        out
    }

    #[test]
    fn utc_offset_shifts_the_time_of_day() {
        // git's line shows 23:21:37.816960 UTC. The same local time comes out of a
        // wall clock one hour earlier in UTC+1, and of one 2.5 hours later (the next
        // day in UTC) in UTC-2:30.
        let (expected, line) = version_line();
        let event = Trace2Event::Version { exe: "2.47.3" };
        let east = NormalFormat::new().with_utc_offset(3600);
        let shifted = Line {
            wall_us: line.wall_us - 3_600_000_000,
            ..line
        };
        assert_eq!(
            String::from_utf8(format_line(&east, event, &shifted, 0)).unwrap(),
            expected
        );

        let west = NormalFormat::new().with_utc_offset(-9000);
        let next_day = Line {
            wall_us: line.wall_us + 9_000_000_000,
            ..shifted
        };
        assert!(
            next_day.wall_us >= CAPTURE_DAY_US + DAY_US,
            "crosses midnight in UTC"
        );
        assert_eq!(
            String::from_utf8(format_line(&west, event, &next_day, 0)).unwrap(),
            expected
        );

        // The same wall clock in UTC+1 has moved past midnight.
        let got = String::from_utf8(format_line(&east, event, &line, 0)).unwrap();
        assert_eq!(got, format!("00{}", &expected[2..]));
        assert_eq!(east.utc_offset(), 3600);
        assert_eq!(NormalFormat::new().utc_offset(), 0);
    }

    #[test]
    fn events_normal_does_not_write() {
        let region = RegionInfo {
            repo: Some(1),
            category: Some("spec"),
            label: Some("level"),
            msg: Some("depth=1"),
        };
        let silent = [
            Trace2Event::TooManyFiles,
            Trace2Event::RegionEnter { region, nesting: 1 },
            Trace2Event::RegionLeave {
                region,
                nesting: 1,
                t_rel_us: 5,
            },
            Trace2Event::Data {
                repo: None,
                category: "spec",
                key: "depth",
                value: "1",
                nesting: 2,
                t_rel_us: 5,
            },
            Trace2Event::DataJson {
                repo: Some(1),
                category: "spec",
                key: "json",
                json: "{}",
                nesting: 1,
                t_rel_us: 5,
            },
            Trace2Event::ThreadStart,
            Trace2Event::ThreadExit { elapsed_us: 7 },
        ];
        for brief in [false, true] {
            let format = NormalFormat::new().with_brief(brief);
            for event in silent {
                let mut out = b"earlier line".to_vec();
                format.format(&record(event, 0, 1, Callsite::default()), &mut out);
                assert_eq!(out, b"earlier line", "{} wrote something", event.name());
            }
        }
    }

    #[test]
    fn empty_payloads() {
        // In brief mode an empty printf writes zero bytes, even after a partial line.
        let brief = NormalFormat::new().with_brief(true);
        for msg in [None, Some("")] {
            let mut out = b"no LF yet".to_vec();
            brief.format(
                &record(Trace2Event::Printf { msg }, 0, 0, Callsite::default()),
                &mut out,
            );
            assert_eq!(out, b"no LF yet");
        }
        // In full mode the prefix remains: git's line up to the payload, then LF.
        let (expected, line) = version_line();
        let got = format_line(
            &NormalFormat::new(),
            Trace2Event::Printf { msg: None },
            &line,
            0,
        );
        assert_eq!(got, format!("{}\n", &expected[..PAYLOAD_COLUMN]).as_bytes());
    }

    #[test]
    fn empty_file_name_counts_as_no_file() {
        let capture = String::from_utf8(read_sample("tt-spec.normal")).unwrap();
        let text = split_records(&capture, false)[8];
        let line = parse_line(text, false);
        assert_eq!(line.callsite.file, None, "the `null file` line");
        let empty = Line {
            callsite: Callsite {
                file: Some(""),
                line: 17,
            },
            ..line
        };
        let got = format_line(
            &NormalFormat::new(),
            Trace2Event::Printf {
                msg: Some("null file"),
            },
            &empty,
            0,
        );
        assert_eq!(String::from_utf8(got).unwrap(), text);
    }

    #[test]
    fn message_ending_in_lf_gets_no_second_lf() {
        let capture = String::from_utf8(read_sample("tt-errors.normal")).unwrap();
        let text = split_records(&capture, false)[5];
        assert!(text.ends_with("error second\nline\n"), "{text:?}");
        let line = parse_line(text, false);
        for format in [NormalFormat::new(), NormalFormat::new().with_brief(true)] {
            let event = Trace2Event::Error {
                msg: Some("second\nline\n"),
                fmt: Some("%s"),
            };
            let got = String::from_utf8(format_line(&format, event, &line, 0)).unwrap();
            let want = if format.brief() {
                &text[PAYLOAD_COLUMN..]
            } else {
                text
            };
            assert_eq!(got, want);
        }
    }

    #[test]
    fn error_without_message() {
        let event = Trace2Event::Error {
            msg: None,
            fmt: None,
        };
        let mut out = Vec::new();
        NormalFormat::new()
            .with_brief(true)
            .format(&record(event, 0, 0, Callsite::default()), &mut out);
        assert_eq!(out, b"error\n");
    }

    #[test]
    fn exec_without_separate_executable() {
        // git names the executable and repeats it in argv; leaving it out and putting
        // it first in argv instead reads the same.
        let capture = String::from_utf8(read_sample("exec-fail.normal")).unwrap();
        let text = split_records(&capture, false)[5];
        let line = parse_line(text, false);
        let argv = [
            "git",
            "git",
            "show",
            "a941c2e33656b2444712059e9c8c4dbbf3acd958",
        ];
        let event = Trace2Event::Exec {
            exec_id: 0,
            exe: None,
            argv: &argv,
        };
        let got = String::from_utf8(format_line(&NormalFormat::new(), event, &line, 0)).unwrap();
        assert_eq!(got, text);
    }

    #[test]
    fn exec_result_error_text_only_for_positive_codes() {
        for code in [0, -1] {
            let event = Trace2Event::ExecResult {
                exec_id: 0,
                code,
                err: Some("No such file or directory"),
            };
            let mut out = Vec::new();
            NormalFormat::new().format(&record(event, 0, 0, Callsite::default()), &mut out);
            assert!(!out.windows(4).any(|w| w == b"err:"), "code {code}");
            assert!(out.ends_with(format!(" code:{code}\n").as_bytes()));
        }
    }

    #[test]
    fn optional_parts_left_out() {
        // A valueless def_param drops `=<value>`; an empty hierarchy drops ` (...)`.
        let capture = String::from_utf8(read_sample("def-param.normal")).unwrap();
        let text = split_records(&capture, false)[4];
        assert!(text.ends_with(" color.ui=never\n"));
        let line = parse_line(text, false);
        let event = Trace2Event::DefParam {
            scope: "system",
            param: "color.ui",
            value: None,
        };
        let got = String::from_utf8(format_line(&NormalFormat::new(), event, &line, 0)).unwrap();
        assert_eq!(got, text.replace("=never", ""));

        let capture = String::from_utf8(read_sample("version-brief.normal")).unwrap();
        let text = split_records(&capture, true)[3];
        assert_eq!(text, "cmd_name version (version)\n");
        let event = Trace2Event::CmdName {
            name: "version",
            hierarchy: "",
        };
        let mut out = Vec::new();
        NormalFormat::new()
            .with_brief(true)
            .format(&record(event, 0, 0, Callsite::default()), &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            text.replace(" (version)", "")
        );
    }

    #[test]
    fn formatting_only_grows_the_output() {
        // Every written event kind from tt-spec and tt-thread-timer, formatted into a
        // buffer large enough to never grow: no allocation at all.
        let mut captures = String::from_utf8(read_sample("tt-spec.normal")).unwrap();
        captures.push_str(&String::from_utf8(read_sample("tt-thread-timer.normal")).unwrap());
        captures.push_str(&String::from_utf8(read_sample("def-param.normal")).unwrap());
        captures.push_str(&String::from_utf8(read_sample("exec-fail.normal")).unwrap());
        let parsed: Vec<_> = split_records(&captures, false)
            .into_iter()
            .map(|t| {
                let line = parse_line(t, false);
                let (owned, t_abs) = parse_payload(line.payload);
                (line, owned, t_abs)
            })
            .collect();
        let lists: Vec<Vec<&str>> = parsed
            .iter()
            .map(|(_, owned, _)| owned.list().iter().map(String::as_str).collect())
            .collect();
        for format in [NormalFormat::new(), NormalFormat::new().with_brief(true)] {
            let mut out = Vec::with_capacity(64 * 1024);
            let before = allocations();
            for ((line, owned, t_abs), list) in parsed.iter().zip(&lists) {
                let rec = record(owned.event(list), line.wall_us, *t_abs, line.callsite);
                format.format(&rec, &mut out);
            }
            assert_eq!(allocations(), before, "brief: {}", format.brief());
            assert!(out.len() > 1000);
        }
    }

    /// `writes` answers for `format`, which the deferred writer relies on: a full line
    /// always has its prefix, so it says exactly whether the line is written; the
    /// brief form writes nothing when `writes` says no (and may write nothing for an
    /// empty message when it says yes). Kinds it skips and kinds it writes are both
    /// seen.
    #[test]
    fn writes_says_whether_format_writes() {
        use tracing_trace2_test_support::random::{KINDS, Owned, Rng};
        let mut rng = Rng(0x7772_6974_6573);
        let (mut skipped, mut written) = (0, 0);
        for kind in 0..KINDS {
            for _ in 0..4 {
                let owned = Owned::new(&mut rng, kind);
                let list = owned.list_refs();
                let record = owned.record(&list);
                for format in [NormalFormat::new(), NormalFormat::new().with_brief(true)] {
                    let mut out = Vec::new();
                    format.format(&record, &mut out);
                    let writes = format.writes(&record);
                    if format.brief() {
                        assert!(writes || out.is_empty(), "{:?}", record.event);
                    } else {
                        assert_eq!(writes, !out.is_empty(), "{:?}", record.event);
                        if writes { written += 1 } else { skipped += 1 }
                    }
                }
            }
        }
        assert!(
            skipped > 0 && written > 0,
            "{skipped} skipped, {written} written"
        );
    }
}
