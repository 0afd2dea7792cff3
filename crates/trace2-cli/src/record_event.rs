//! The [`TraceEvent`] of a record, whichever input it came from: a `t2b` trace's records
//! from the binary decoder, an Event line's from the event crate's reader
//! ([`with_line`]). No JSON text is made in between.
//!
//! A binary record gets the keys its Event line (no brief mode, no nesting limit) would
//! have (trace2-format.md §4.4): `t_abs` only on `start`, `printf`, `data`, `data_json`,
//! `exit`, `atexit` and `signal`; `"git"` before the argv of a child that is a git command.
//! An Event line's event has the `time`, `t_abs`, `file` and `line` the line had.

use std::borrow::Cow;

use tracing_trace2_event::{AnyLine, read_any_line};
use tracing_trace2_record::catalogue::Kind as RecordKind;
use tracing_trace2_record::{Record, Trace2Event};

use crate::trace_event::{Kind, LineError, Region, TraceEvent};

/// Calls `f` with the event `record` (from a binary trace) stands for.
pub fn with_event<T>(record: &Record<'_>, f: impl FnOnce(&TraceEvent<'_>) -> T) -> T {
    f(&event_of(record))
}

/// The event a record from a binary trace stands for: the keys its Event line would have.
pub fn event_of<'a>(record: &Record<'a>) -> TraceEvent<'a> {
    let file = record.callsite.file.filter(|file| !file.is_empty());
    TraceEvent {
        sid: Cow::Borrowed(record.sid),
        thread: Cow::Borrowed(record.thread),
        time_us: Some(record.time.wall_us),
        t_abs_us: carries_t_abs(&record.event).then_some(micros(record.time.t_abs_us)),
        file: file.map(Cow::Borrowed),
        line: file.map(|_| i64::from(record.callsite.line)),
        repo: repo_of(&record.event),
        kind: kind_of(&record.event),
    }
}

/// The event of an Event line's record: `time`, `t_abs` and `line` only when the line had
/// them (the record holds 0 for a missing one).
fn line_event<'a>(record: &Record<'a>, has_key: impl Fn(&str) -> bool) -> TraceEvent<'a> {
    let file = record.callsite.file;
    TraceEvent {
        sid: Cow::Borrowed(record.sid),
        thread: Cow::Borrowed(record.thread),
        time_us: has_key("time").then_some(record.time.wall_us),
        t_abs_us: has_key("t_abs").then(|| micros(record.time.t_abs_us)),
        file: file.map(Cow::Borrowed),
        line: (file.is_some() && has_key("line")).then_some(i64::from(record.callsite.line)),
        repo: repo_of(&record.event),
        kind: kind_of(&record.event),
    }
}

/// What a line had that the tool does not use; the line itself was used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineNote {
    /// Its kind is not one the tool knows (a newer git's, another program's): the line was
    /// passed along as [`Kind::Other`].
    UnknownKind(String),
    /// It has a key its kind does not have (the first such key).
    UnknownKey {
        /// The kind.
        kind: &'static str,
        /// The key.
        key: String,
    },
}

impl std::fmt::Display for LineNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LineNote::UnknownKind(name) => write!(f, "kind `{name}`"),
            LineNote::UnknownKey { kind, key } => write!(f, "`{key}` in {kind}"),
        }
    }
}

/// Reads one Event line (without its newline) with the event crate's reader and calls
/// `f` with its event. The note says what the line had that the tool does not use.
pub fn with_line<T>(
    line: &str,
    f: impl FnOnce(&TraceEvent<'_>) -> T,
) -> Result<(T, Option<LineNote>), LineError> {
    // Matched in place: a read line is a few hundred bytes to move.
    let read = read_any_line(line);
    match &read {
        Err(error) => Err(error.clone().into()),
        Ok(AnyLine::Known(line)) => {
            let kind = line.kind();
            // A `data_json` value may be `null` (an empty JSON text); elsewhere `null` is
            // no value.
            let present = |key: &str| match key {
                "value" => line.has_key(key),
                _ => line.has_value(key),
            };
            if let Some(key) = needs(kind).iter().find(|key| !present(key)) {
                return Err(LineError::Incomplete(format!("{kind} without `{key}`")));
            }
            let mut list = Vec::new();
            let record = line.record_filling_missing(&mut list)?;
            check_sid(record.sid)?;
            let mut event = line_event(&record, |key| line.has_value(key));
            unset_missing(&mut event.kind, |key| line.has_value(key));
            let note = line.unknown_keys().next().map(|key| LineNote::UnknownKey {
                kind: kind.name(),
                key: key.to_owned(),
            });
            Ok((f(&event), note))
        }
        Ok(AnyLine::Unknown(line)) => {
            let header = line.header()?;
            check_sid(header.sid)?;
            let event = TraceEvent {
                sid: Cow::Borrowed(header.sid),
                thread: Cow::Borrowed(header.thread),
                time_us: header.wall_us,
                t_abs_us: header.t_abs_us.map(micros),
                file: header.file.map(Cow::Borrowed),
                line: header.line.map(i64::from),
                repo: None,
                kind: Kind::Other(Cow::Borrowed(line.name())),
            };
            let note = LineNote::UnknownKind(line.name().to_owned());
            Ok((f(&event), Some(note)))
        }
    }
}

/// The keys without which a line of `kind` means nothing to this tool. Other keys may be
/// missing from lines written by hand or by other programs: the reader fills them with
/// defaults, and [`unset_missing`] marks those the tool shows as absent.
fn needs(kind: RecordKind) -> &'static [&'static str] {
    use RecordKind as K;
    match kind {
        K::Start => &["argv"],
        K::CmdName | K::CmdMode => &["name"],
        K::Alias => &["alias"],
        K::DefParam => &["param"],
        K::DefRepo => &["worktree"],
        K::RegionEnter => &["nesting"],
        K::RegionLeave => &["nesting", "t_rel"],
        K::Data | K::DataJson => &["nesting", "category", "key", "value"],
        K::ChildStart => &["child_id"],
        K::ChildExit => &["child_id", "code", "t_rel"],
        K::ChildReady => &["child_id", "t_rel"],
        K::Exec => &["exec_id"],
        K::ExecResult => &["exec_id", "code"],
        K::ThreadExit => &["t_rel"],
        K::Timer | K::ThTimer => &["category", "name", "intervals", "t_total", "t_min", "t_max"],
        K::Counter | K::ThCounter => &["category", "name", "count"],
        K::Exit | K::Atexit => &["code"],
        K::Signal => &["signo"],
        // Kinds the tool passes along (`Kind::Other`, as a kind new to the catalogue is)
        // or reads nothing of that a line could lack.
        _ => &[],
    }
}

/// Shows as absent (or as `?`, for a child's class and readiness) what a line did not
/// have and the reader filled in.
fn unset_missing(kind: &mut Kind<'_>, has_key: impl Fn(&str) -> bool) {
    match kind {
        Kind::Version { exe } if !has_key("exe") => *exe = None,
        Kind::DefParam { scope, .. } if !has_key("scope") => *scope = None,
        Kind::ChildStart { class, .. } if !has_key("child_class") => *class = Cow::Borrowed("?"),
        Kind::ChildEnd { pid, ready, .. } => {
            if !has_key("pid") {
                *pid = None;
            }
            if let Some(ready) = ready
                && !has_key("ready")
            {
                *ready = Cow::Borrowed("?");
            }
        }
        _ => {}
    }
}

/// A session id names the process; an empty one cannot.
fn check_sid(sid: &str) -> Result<(), LineError> {
    if sid.is_empty() {
        return Err(LineError::NotTrace2("empty `sid`".into()));
    }
    Ok(())
}

/// Quotes a text as a JSON string.
fn json_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serialises")
}

/// The JSON text of a `data_json` value: as recorded when it is JSON; `null` for an empty
/// text (as the Event format writes it); other text that is not JSON as a string rather
/// than lost.
fn json_value<'a>(json: &'a str) -> Cow<'a, str> {
    if serde_json::from_str::<serde::de::IgnoredAny>(json).is_ok() {
        Cow::Borrowed(json)
    } else if json.is_empty() {
        Cow::Borrowed("null")
    } else {
        Cow::Owned(json_string(json))
    }
}

/// The kinds whose Event line has `t_abs`.
fn carries_t_abs(event: &Trace2Event<'_>) -> bool {
    matches!(
        event.kind(),
        RecordKind::Start
            | RecordKind::Printf
            | RecordKind::Data
            | RecordKind::DataJson
            | RecordKind::Exit
            | RecordKind::Atexit
            | RecordKind::Signal
    )
}

/// The `repo` key of the Event line.
fn repo_of(event: &Trace2Event<'_>) -> Option<i64> {
    match event {
        Trace2Event::DefRepo { repo, .. } => Some(*repo),
        Trace2Event::RegionEnter { region, .. } | Trace2Event::RegionLeave { region, .. } => {
            region.repo
        }
        Trace2Event::Data { repo, .. } | Trace2Event::DataJson { repo, .. } => *repo,
        _ => None,
    }
}

fn words<'a>(argv: &[&'a str]) -> Vec<Cow<'a, str>> {
    argv.iter().map(|word| Cow::Borrowed(*word)).collect()
}

/// Microseconds as the tool counts them, clamped (damaged input) so that sums cannot
/// overflow.
fn micros(value: u64) -> i64 {
    const LIMIT: u64 = (i64::MAX / 4) as u64;
    value.min(LIMIT) as i64
}

/// Timer totals are written as seconds with six decimals: rounded to the microsecond.
fn nanos_to_micros(nanos: u64) -> i64 {
    micros(nanos.saturating_add(500) / 1000)
}

/// The kind-specific part.
fn kind_of<'a>(event: &Trace2Event<'a>) -> Kind<'a> {
    match *event {
        Trace2Event::Version { exe } => Kind::Version {
            exe: Some(Cow::Borrowed(exe)),
        },
        Trace2Event::Start { argv } => Kind::Start { argv: words(argv) },
        Trace2Event::CmdName { name, hierarchy } => Kind::CmdName {
            name: Cow::Borrowed(name),
            hierarchy: (!hierarchy.is_empty()).then_some(Cow::Borrowed(hierarchy)),
        },
        Trace2Event::CmdMode { name } => Kind::CmdMode {
            name: Cow::Borrowed(name),
        },
        Trace2Event::Alias { alias, argv } => Kind::Alias {
            alias: Cow::Borrowed(alias),
            argv: words(argv),
        },
        Trace2Event::DefParam {
            scope,
            param,
            value,
        } => Kind::DefParam {
            scope: Some(Cow::Borrowed(scope)),
            param: Cow::Borrowed(param),
            value: value.map(Cow::Borrowed),
        },
        Trace2Event::DefRepo { worktree, .. } => Kind::DefRepo {
            worktree: Cow::Borrowed(worktree),
        },
        Trace2Event::RegionEnter { region, nesting } => {
            Kind::RegionEnter(region_of(&region, nesting))
        }
        Trace2Event::RegionLeave {
            region,
            nesting,
            t_rel_us,
        } => Kind::RegionLeave(region_of(&region, nesting), micros(t_rel_us)),
        Trace2Event::Data {
            category,
            key,
            value,
            nesting,
            ..
        } => Kind::Data {
            nesting: i64::from(nesting),
            category: Cow::Borrowed(category),
            key: Cow::Borrowed(key),
            value: Cow::Borrowed(value),
            json: false,
        },
        Trace2Event::DataJson {
            category,
            key,
            json,
            nesting,
            ..
        } => Kind::Data {
            nesting: i64::from(nesting),
            category: Cow::Borrowed(category),
            key: Cow::Borrowed(key),
            value: json_value(json),
            json: true,
        },
        Trace2Event::Printf { msg } => Kind::Printf {
            msg: msg.map(Cow::Borrowed),
        },
        Trace2Event::Error { msg, fmt } => Kind::Error {
            msg: msg.map(Cow::Borrowed),
            fmt: fmt.map(Cow::Borrowed),
        },
        _ => process_kind_of(event),
    }
}

/// The kinds about children, threads, values and the process's end.
fn process_kind_of<'a>(event: &Trace2Event<'a>) -> Kind<'a> {
    match *event {
        Trace2Event::ChildStart(child) => {
            let mut argv = Vec::with_capacity(child.argv.len() + 1);
            if child.is_git {
                argv.push(Cow::Borrowed("git"));
            }
            argv.extend(words(child.argv));
            Kind::ChildStart {
                child_id: child.child_id as i64,
                class: Cow::Borrowed(child.class),
                hook_name: child.hook_name.map(Cow::Borrowed),
                argv,
            }
        }
        Trace2Event::ChildExit {
            child_id,
            pid,
            code,
            elapsed_us,
        } => Kind::ChildEnd {
            child_id: child_id as i64,
            pid: Some(pid),
            code: Some(code),
            ready: None,
            elapsed_us: micros(elapsed_us),
        },
        Trace2Event::ChildReady {
            child_id,
            pid,
            ready,
            elapsed_us,
        } => Kind::ChildEnd {
            child_id: child_id as i64,
            pid: Some(pid),
            code: None,
            ready: Some(Cow::Borrowed(ready)),
            elapsed_us: micros(elapsed_us),
        },
        Trace2Event::Exec { exec_id, argv, .. } => Kind::Exec {
            exec_id: exec_id as i64,
            argv: words(argv),
        },
        Trace2Event::ExecResult { exec_id, code, .. } => Kind::ExecResult {
            exec_id: exec_id as i64,
            code,
        },
        Trace2Event::ThreadStart => Kind::ThreadStart,
        Trace2Event::ThreadExit { elapsed_us } => Kind::ThreadExit(micros(elapsed_us)),
        Trace2Event::Timer { per_thread, timer } => Kind::Timer {
            per_thread,
            category: Cow::Borrowed(timer.category),
            name: Cow::Borrowed(timer.name),
            intervals: timer.intervals as i64,
            total_us: nanos_to_micros(timer.total_ns),
            min_us: nanos_to_micros(timer.min_ns),
            max_us: nanos_to_micros(timer.max_ns),
        },
        Trace2Event::Counter {
            per_thread,
            category,
            name,
            value,
        } => Kind::Counter {
            per_thread,
            category: Cow::Borrowed(category),
            name: Cow::Borrowed(name),
            count: value as i64,
        },
        Trace2Event::Exit { code } => Kind::Exit {
            code: i64::from(code),
        },
        Trace2Event::Atexit { code } => Kind::Atexit {
            code: i64::from(code),
        },
        Trace2Event::Signal { signo } => Kind::Signal {
            signo: i64::from(signo),
        },
        // `cmd_path`, `cmd_ancestry`, `too_many_files`, and a kind new to the catalogue
        // until the tool gives it a meaning: passed along by name, never dropped.
        ref other => Kind::Other(Cow::Borrowed(other.name())),
    }
}

fn region_of<'a>(region: &tracing_trace2_record::RegionInfo<'a>, nesting: u32) -> Region<'a> {
    Region {
        nesting: i64::from(nesting),
        category: region.category.map(Cow::Borrowed),
        label: region.label.map(Cow::Borrowed),
        msg: region.msg.map(Cow::Borrowed),
    }
}

#[cfg(test)]
mod tests {
    use tracing_trace2_event::EventFormat;
    use tracing_trace2_record::catalogue::FieldError;
    use tracing_trace2_record::{
        CATALOGUE, Callsite, ChildInfo, FieldType, FieldValue, Format, Record, RegionInfo,
        TimerInfo, Timestamp, Trace2Event,
    };

    use super::*;

    /// One record of every kind (and the variants of a few), with values that read back
    /// exactly from the Event text.
    fn events() -> Vec<Trace2Event<'static>> {
        let region = RegionInfo {
            repo: Some(1),
            category: Some("index"),
            label: Some("do_read_index"),
            msg: Some(".git/index"),
        };
        let child = ChildInfo {
            child_id: 3,
            class: "hook",
            hook_name: Some("pre-commit"),
            cd: None,
            use_shell: true,
            is_git: false,
            argv: &[".git/hooks/pre-commit"],
        };
        let timer = TimerInfo {
            category: "test",
            name: "t",
            intervals: 4,
            total_ns: 2_000_000,
            min_ns: 100_000,
            max_ns: 900_000,
        };
        let mut events = vec![
            Trace2Event::Version { exe: "2.47.3" },
            Trace2Event::TooManyFiles,
            Trace2Event::Start {
                argv: &["git", "commit", "-m", "it's \"done\""],
            },
            Trace2Event::CmdPath {
                path: "/usr/bin/git",
            },
            Trace2Event::CmdName {
                name: "commit",
                hierarchy: "commit",
            },
            Trace2Event::CmdName {
                name: "x",
                hierarchy: "",
            },
            Trace2Event::CmdMode { name: "branch" },
            Trace2Event::Alias {
                alias: "co",
                argv: &["checkout"],
            },
            Trace2Event::DefParam {
                scope: "global",
                param: "core.abbrev",
                value: Some("8"),
            },
            Trace2Event::DefRepo {
                repo: 1,
                worktree: "/tmp/repo",
            },
            Trace2Event::RegionEnter { region, nesting: 1 },
            Trace2Event::RegionLeave {
                region,
                nesting: 1,
                t_rel_us: 1234,
            },
            Trace2Event::RegionLeave {
                region: RegionInfo::default(),
                nesting: 2,
                t_rel_us: 5,
            },
            Trace2Event::Data {
                repo: None,
                category: "status",
                key: "count",
                value: "line\n\u{1b}[2J \"quoted\"",
                nesting: 2,
                t_rel_us: 40,
            },
            Trace2Event::DataJson {
                repo: Some(1),
                category: "traverse_trees",
                key: "statistics",
                json: r#"{"count":1,"list":[1,"two"]}"#,
                nesting: 1,
                t_rel_us: 40,
            },
            Trace2Event::DataJson {
                repo: None,
                category: "c",
                key: "empty",
                json: "",
                nesting: 1,
                t_rel_us: 1,
            },
            Trace2Event::Printf { msg: Some("hello") },
            Trace2Event::Error {
                msg: Some("bad"),
                fmt: Some("bad %s"),
            },
            Trace2Event::ChildStart(child),
            Trace2Event::ChildStart(ChildInfo {
                is_git: true,
                hook_name: None,
                class: "?",
                argv: &["rev-parse", "HEAD"],
                ..child
            }),
            Trace2Event::ChildExit {
                child_id: 3,
                pid: 4242,
                code: 1,
                elapsed_us: 777,
            },
            Trace2Event::ChildReady {
                child_id: 4,
                pid: 4243,
                ready: "ready",
                elapsed_us: 888,
            },
            Trace2Event::Exec {
                exec_id: 0,
                exe: Some("git"),
                argv: &["git", "status"],
            },
            Trace2Event::ExecResult {
                exec_id: 0,
                code: 2,
                err: Some("ENOENT"),
            },
            Trace2Event::ThreadStart,
            Trace2Event::ThreadExit { elapsed_us: 99 },
            Trace2Event::Timer {
                per_thread: true,
                timer,
            },
            Trace2Event::Timer {
                per_thread: false,
                timer,
            },
            Trace2Event::Counter {
                per_thread: false,
                category: "fsync",
                name: "writeout-only",
                value: 7,
            },
            Trace2Event::Exit { code: 0 },
            Trace2Event::Atexit { code: 0 },
            Trace2Event::Signal { signo: 15 },
        ];
        // Every kind not written out above (`cmd_ancestry`, a kind new to the
        // catalogue), built from its catalogue row with values that read back exactly.
        for spec in CATALOGUE {
            if events.iter().all(|event| event.kind() != spec.kind) {
                events.push(
                    Trace2Event::from_fields(spec.kind, |field| {
                        Ok::<_, FieldError>(match field.ty {
                            FieldType::Text | FieldType::TextOmittedWhenEmpty => {
                                FieldValue::Text(field.name)
                            }
                            FieldType::Json => FieldValue::Text("[1]"),
                            FieldType::OptText => FieldValue::OptText(None),
                            FieldType::TextList => FieldValue::TextList(&["bash", "sshd"]),
                            FieldType::Uint
                            | FieldType::Count
                            | FieldType::Micros
                            | FieldType::Nanos => FieldValue::Uint(1000),
                            FieldType::Int => FieldValue::Int(-1),
                            FieldType::OptInt => FieldValue::OptInt(Some(1)),
                            FieldType::Nesting => FieldValue::Nesting(1),
                            FieldType::Code => FieldValue::Code(1),
                            FieldType::Flag => FieldValue::Flag(false),
                        })
                    })
                    .unwrap(),
                );
            }
        }
        assert!(events.len() > CATALOGUE.len(), "{}", events.len());
        events
    }

    #[test]
    fn a_record_becomes_the_event_its_event_line_parses_to() {
        let format = EventFormat::new()
            .with_brief(false)
            .with_max_nesting(u32::MAX);
        let mut line = Vec::new();
        for (i, event) in events().into_iter().enumerate() {
            let record = Record {
                event,
                time: Timestamp {
                    wall_us: 1_795_303_297_816_000 + i as i64,
                    t_abs_us: 100 + i as u64,
                },
                sid: "20261121T232137.816920Z-H0a7c9cdf-P00002a1e",
                depth: 0,
                thread: "th01:preload",
                callsite: Callsite {
                    file: (i % 3 != 0).then_some("src/main.rs"),
                    line: 10 + i as u32,
                },
                open_regions: 0,
            };
            line.clear();
            format.format(&record, &mut line);
            let text = std::str::from_utf8(&line).unwrap().trim_end();
            let direct = with_event(&record, |event| format!("{event:?}"));
            // Debug shows every field.
            let (read, note) = with_line(text, |event| format!("{event:?}"))
                .unwrap_or_else(|e| panic!("{e}: {text}"));
            assert_eq!(direct, read, "{text}");
            assert_eq!(note, None, "{text}");
        }
    }

    const LEAVE: &str = r#"{"event":"region_leave","sid":"20261121T232200.038465Z-H0a7c9cdf-P00002cdd","thread":"main","time":"2026-11-21T23:22:00.039105Z","file":"read-cache.c","line":2388,"repo":1,"t_rel":0.000065,"nesting":1,"category":"index","label":"do_read_index","msg":".git/index"}"#;

    /// The event of one line, its note, or why it was not used.
    fn read(line: &str) -> Result<(String, Option<LineNote>), LineError> {
        with_line(line, |event| format!("{event:?}"))
    }

    #[test]
    fn reads_a_region_leave() {
        with_line(LEAVE, |ev| {
            assert_eq!(ev.sid, "20261121T232200.038465Z-H0a7c9cdf-P00002cdd");
            assert_eq!(ev.thread, "main");
            assert_eq!(ev.time_us, Some(1_795_303_320_039_105));
            assert_eq!(ev.t_abs_us, None);
            assert_eq!(
                (ev.file.as_deref(), ev.line),
                (Some("read-cache.c"), Some(2388))
            );
            assert_eq!(ev.repo, Some(1));
            assert_eq!(ev.name(), "region_leave");
            match &ev.kind {
                Kind::RegionLeave(r, t_rel) => {
                    assert_eq!(*t_rel, 65);
                    assert_eq!(r.nesting, 1);
                    assert_eq!(r.category.as_deref(), Some("index"));
                    assert_eq!(r.label.as_deref(), Some("do_read_index"));
                    assert_eq!(r.msg.as_deref(), Some(".git/index"));
                }
                other => panic!("{other:?}"),
            }
        })
        .unwrap();
    }

    #[test]
    fn a_brief_line_has_no_time_and_no_callsite() {
        let line = r#"{"event":"exit","sid":"s","thread":"main","t_abs":0.5,"code":3}"#;
        with_line(line, |ev| {
            assert_eq!((ev.time_us, ev.t_abs_us), (None, Some(500_000)));
            assert_eq!((ev.file.as_deref(), ev.line), (None, None));
            assert!(matches!(ev.kind, Kind::Exit { code: 3 }));
        })
        .unwrap();
    }

    #[test]
    fn data_keeps_its_value() {
        let line = r#"{"event":"data_json","sid":"s","thread":"main","t_abs":0.1,"t_rel":0.1,"nesting":1,"category":"c","key":"k","value":{"a":[1,"two"]}}"#;
        with_line(line, |ev| {
            match &ev.kind {
                Kind::Data {
                    value, json: true, ..
                } => assert_eq!(value, r#"{"a":[1,"two"]}"#),
                other => panic!("{other:?}"),
            }
            assert_eq!(ev.t_abs_us, Some(100_000));
        })
        .unwrap();
        let line = r#"{"event":"data","sid":"s","thread":"main","t_abs":0.1,"t_rel":0.1,"nesting":2,"category":"c","key":"k","value":"a \"b\"\n"}"#;
        with_line(line, |ev| match &ev.kind {
            Kind::Data {
                value,
                json: false,
                nesting: 2,
                ..
            } => assert_eq!(value, "a \"b\"\n"),
            other => panic!("{other:?}"),
        })
        .unwrap();
    }

    /// The Event format writes an empty `data_json` value as `null` (the old line parser
    /// of this tool refused such a line for its missing value).
    #[test]
    fn a_null_data_json_value_is_kept() {
        let line = r#"{"event":"data_json","sid":"s","thread":"main","t_abs":0.1,"t_rel":0.1,"nesting":1,"category":"c","key":"k","value":null}"#;
        with_line(line, |ev| match &ev.kind {
            Kind::Data {
                value, json: true, ..
            } => assert_eq!(value, "null"),
            other => panic!("{other:?}"),
        })
        .unwrap();
    }

    #[test]
    fn def_param_of_a_valueless_key_has_no_value() {
        // Git 2.49+ writes a key set without a value (`git -c foo.bar`) without `value`.
        let line = r#"{"event":"def_param","sid":"s","thread":"main","scope":"command","param":"foo.bar"}"#;
        with_line(line, |ev| match &ev.kind {
            Kind::DefParam { param, value, .. } => {
                assert_eq!(param, "foo.bar");
                assert_eq!(*value, None);
            }
            other => panic!("{other:?}"),
        })
        .unwrap();
        let line = r#"{"event":"def_param","sid":"s","thread":"main","scope":"command","param":"foo.bar","value":""}"#;
        with_line(line, |ev| match &ev.kind {
            Kind::DefParam { value, .. } => assert_eq!(value.as_deref(), Some("")),
            other => panic!("{other:?}"),
        })
        .unwrap();
        assert_eq!(
            read(r#"{"event":"def_param","sid":"s","thread":"main","scope":"global","value":"1"}"#),
            Err(LineError::Incomplete("def_param without `param`".into()))
        );
    }

    /// A kind the catalogue does not have is passed along and noted, not dropped.
    #[test]
    fn unknown_kinds_pass_through_with_a_note() {
        let (event, note) = read(
            r#"{"event":"progress","sid":"s","thread":"main","time":"1970-01-01T00:00:00.000007Z","title":"t","count":3}"#,
        )
        .unwrap();
        assert!(event.contains(r#"kind: Other("progress")"#), "{event}");
        assert!(event.contains("time_us: Some(7)"), "{event}");
        assert_eq!(note, Some(LineNote::UnknownKind("progress".into())));
        // Kinds the tool gives no meaning of its own are known, and not noted.
        let (event, note) =
            read(r#"{"event":"cmd_ancestry","sid":"s","thread":"main","ancestry":["bash"]}"#)
                .unwrap();
        assert!(event.contains(r#"kind: Other("cmd_ancestry")"#), "{event}");
        assert_eq!(note, None);
    }

    #[test]
    fn unknown_keys_are_noted() {
        let line = LEAVE.replace(r#""msg""#, r#""newer":[1],"msg""#);
        let (_, note) = read(&line).unwrap();
        assert_eq!(
            note,
            Some(LineNote::UnknownKey {
                kind: "region_leave",
                key: "newer".into()
            })
        );
    }

    /// Lines written by hand or by other tools may lack keys the tool does not need.
    #[test]
    fn keys_the_tool_does_not_need_may_be_missing() {
        let (event, _) = read(
            r#"{"event":"data_json","sid":"s","thread":"main","nesting":2,"category":"c","key":"k","value":{"a":1}}"#,
        )
        .unwrap();
        assert!(event.contains(r#"value: "{\"a\":1}""#), "{event}");
        let (event, _) = read(r#"{"event":"version","sid":"s","thread":"main"}"#).unwrap();
        assert!(event.contains("Version { exe: None }"), "{event}");
        let (event, _) =
            read(r#"{"event":"child_ready","sid":"s","thread":"main","child_id":1,"t_rel":0.1}"#)
                .unwrap();
        assert!(
            event.contains(r#"pid: None, code: None, ready: Some("?")"#),
            "{event}"
        );
        let (event, _) =
            read(r#"{"event":"child_start","sid":"s","thread":"main","child_id":1}"#).unwrap();
        assert!(event.contains(r#"class: "?""#), "{event}");
        assert_eq!(
            read(r#"{"event":"start","sid":"s","thread":"main"}"#).unwrap_err(),
            LineError::Incomplete("start without `argv`".into())
        );
        assert_eq!(
            read(r#"{"event":"exit","sid":"s","thread":"main","code":null}"#).unwrap_err(),
            LineError::Incomplete("exit without `code`".into())
        );
        let (event, _) =
            read(r#"{"event":"exit","sid":"s","thread":"main","time":null,"t_abs":null,"code":0}"#)
                .unwrap();
        assert!(event.contains("time_us: None, t_abs_us: None"), "{event}");
    }

    #[test]
    fn foreign_lines_are_named() {
        assert!(matches!(read("hello"), Err(LineError::NotJson(_))));
        assert_eq!(
            read(r#"{"event":"start","sid":"s","thread":"main","argv":["gi"#).unwrap_err(),
            LineError::CutShort
        );
        assert_eq!(
            read(r#"{"level":"info","msg":"x"}"#).unwrap_err(),
            LineError::NotTrace2("missing field `event`".into())
        );
        assert!(matches!(read("[1, 2]"), Err(LineError::NotTrace2(_))));
        assert_eq!(
            read(r#"{"event":"exit","sid":"s","thread":"main","code":"0"}"#).unwrap_err(),
            LineError::NotTrace2("`code` of exit has a value of the wrong type".into())
        );
        assert_eq!(
            read(r#"{"event":"region_leave","sid":"s","thread":"main","nesting":1}"#).unwrap_err(),
            LineError::Incomplete("region_leave without `t_rel`".into())
        );
        assert!(matches!(
            read(r#"{"event":"exit","sid":"s","thread":"main","time":"yesterday","code":0}"#),
            Err(LineError::NotTrace2(m)) if m.contains("time")
        ));
        assert_eq!(
            read(r#"{"event":"exit","thread":"main","code":0}"#).unwrap_err(),
            LineError::NotTrace2("missing field `sid`".into())
        );
        assert_eq!(
            read(r#"{"event":"exit","sid":"","thread":"main","code":0}"#).unwrap_err(),
            LineError::NotTrace2("empty `sid`".into())
        );
        assert_eq!(
            read(r#"{"event":"progress","sid":"","thread":"main"}"#).unwrap_err(),
            LineError::NotTrace2("empty `sid`".into())
        );
    }
}
