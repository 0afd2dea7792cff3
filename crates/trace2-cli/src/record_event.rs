//! Binary input without a detour through JSON text: a record decoded from a `t2b` trace becomes
//! the [`TraceEvent`] that its Event line (no brief mode, no nesting limit) would parse to, so
//! that the summary and the exports see one event type whatever the input.
//!
//! The keys follow what the Event format writes for each kind (trace2-format.md §4.4): `t_abs`
//! only on `start`, `printf`, `data`, `data_json`, `exit`, `atexit` and `signal`; `"git"` before
//! the argv of a child that is a git command; a `data` value as a JSON string.

use std::borrow::Cow;

use serde_json::value::RawValue;
use tracing_trace2_record::{Event, Record};

use crate::event::{Kind, Region, TraceEvent};

/// Calls `f` with the event `record` stands for.
pub fn with_event<T>(record: &Record<'_>, f: impl FnOnce(&TraceEvent<'_>) -> T) -> T {
    // A `data` value is a JSON string in the Event line: it is made one here, and lives
    // while `f` runs.
    let quoted: Option<Box<RawValue>> = match record.event {
        Event::Data { value, .. } => Some(json_string(value)),
        Event::DataJson { json, .. } if serde_json::from_str::<&RawValue>(json).is_err() => {
            // What the Event format writes for an empty text; other text that is not JSON is
            // kept as a string rather than lost.
            Some(if json.is_empty() {
                RawValue::from_string("null".to_owned()).expect("JSON")
            } else {
                json_string(json)
            })
        }
        _ => None,
    };
    let event = TraceEvent {
        sid: Cow::Borrowed(record.sid),
        thread: Cow::Borrowed(record.thread),
        time_us: Some(record.time.wall_us),
        t_abs_us: carries_t_abs(&record.event).then_some(record.time.t_abs_us as i64),
        file: record
            .callsite
            .file
            .filter(|file| !file.is_empty())
            .map(Cow::Borrowed),
        line: record
            .callsite
            .file
            .filter(|file| !file.is_empty())
            .map(|_| i64::from(record.callsite.line)),
        repo: repo_of(&record.event),
        kind: kind_of(&record.event, quoted.as_deref()),
    };
    f(&event)
}

fn json_string(text: &str) -> Box<RawValue> {
    let quoted = serde_json::to_string(text).expect("a string serialises");
    RawValue::from_string(quoted).expect("a JSON string is JSON")
}

/// The kinds whose Event line has `t_abs`.
fn carries_t_abs(event: &Event<'_>) -> bool {
    matches!(
        event,
        Event::Start { .. }
            | Event::Printf { .. }
            | Event::Data { .. }
            | Event::DataJson { .. }
            | Event::Exit { .. }
            | Event::Atexit { .. }
            | Event::Signal { .. }
    )
}

/// The `repo` key of the Event line.
fn repo_of(event: &Event<'_>) -> Option<i64> {
    match event {
        Event::DefRepo { repo, .. } => Some(*repo),
        Event::RegionEnter { region, .. } | Event::RegionLeave { region, .. } => region.repo,
        Event::Data { repo, .. } | Event::DataJson { repo, .. } => *repo,
        _ => None,
    }
}

fn words<'a>(argv: &[&'a str]) -> Vec<Cow<'a, str>> {
    argv.iter().map(|word| Cow::Borrowed(*word)).collect()
}

fn micros(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Timer totals are written as seconds with six decimals: rounded to the microsecond.
fn nanos_to_micros(nanos: u64) -> i64 {
    micros(nanos.saturating_add(500) / 1000)
}

/// The kind-specific part. `data_value` is the JSON text of a `data` value (or of a
/// `data_json` value that is not JSON).
fn kind_of<'a>(event: &Event<'a>, data_value: Option<&'a RawValue>) -> Kind<'a> {
    match *event {
        Event::Version { exe } => Kind::Version {
            exe: Some(Cow::Borrowed(exe)),
        },
        Event::Start { argv } => Kind::Start { argv: words(argv) },
        Event::CmdName { name, hierarchy } => Kind::CmdName {
            name: Cow::Borrowed(name),
            hierarchy: (!hierarchy.is_empty()).then_some(Cow::Borrowed(hierarchy)),
        },
        Event::CmdMode { name } => Kind::CmdMode {
            name: Cow::Borrowed(name),
        },
        Event::Alias { alias, argv } => Kind::Alias {
            alias: Cow::Borrowed(alias),
            argv: words(argv),
        },
        Event::DefParam {
            scope,
            param,
            value,
        } => Kind::DefParam {
            scope: Some(Cow::Borrowed(scope)),
            param: Cow::Borrowed(param),
            value: value.map(Cow::Borrowed),
        },
        Event::DefRepo { worktree, .. } => Kind::DefRepo {
            worktree: Cow::Borrowed(worktree),
        },
        Event::RegionEnter { region, nesting } => Kind::RegionEnter(region_of(&region, nesting)),
        Event::RegionLeave {
            region,
            nesting,
            t_rel_us,
        } => Kind::RegionLeave(region_of(&region, nesting), micros(t_rel_us)),
        Event::Data {
            category,
            key,
            nesting,
            ..
        } => Kind::Data {
            nesting: i64::from(nesting),
            category: Cow::Borrowed(category),
            key: Cow::Borrowed(key),
            value: data_value.expect("quoted by with_event"),
            json: false,
        },
        Event::DataJson {
            category,
            key,
            json,
            nesting,
            ..
        } => Kind::Data {
            nesting: i64::from(nesting),
            category: Cow::Borrowed(category),
            key: Cow::Borrowed(key),
            value: data_value.unwrap_or_else(|| {
                serde_json::from_str::<&RawValue>(json).expect("checked by with_event")
            }),
            json: true,
        },
        Event::Printf { msg } => Kind::Printf {
            msg: msg.map(Cow::Borrowed),
        },
        Event::Error { msg, fmt } => Kind::Error {
            msg: msg.map(Cow::Borrowed),
            fmt: fmt.map(Cow::Borrowed),
        },
        _ => process_kind_of(event),
    }
}

/// The kinds about children, threads, values and the process's end.
fn process_kind_of<'a>(event: &Event<'a>) -> Kind<'a> {
    match *event {
        Event::ChildStart(child) => {
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
        Event::ChildExit {
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
        Event::ChildReady {
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
        Event::Exec { exec_id, argv, .. } => Kind::Exec {
            exec_id: exec_id as i64,
            argv: words(argv),
        },
        Event::ExecResult { exec_id, code, .. } => Kind::ExecResult {
            exec_id: exec_id as i64,
            code,
        },
        Event::ThreadStart => Kind::ThreadStart,
        Event::ThreadExit { elapsed_us } => Kind::ThreadExit(micros(elapsed_us)),
        Event::Timer { per_thread, timer } => Kind::Timer {
            per_thread,
            category: Cow::Borrowed(timer.category),
            name: Cow::Borrowed(timer.name),
            intervals: timer.intervals as i64,
            total_us: nanos_to_micros(timer.total_ns),
            min_us: nanos_to_micros(timer.min_ns),
            max_us: nanos_to_micros(timer.max_ns),
        },
        Event::Counter {
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
        Event::Exit { code } => Kind::Exit {
            code: i64::from(code),
        },
        Event::Atexit { code } => Kind::Atexit {
            code: i64::from(code),
        },
        Event::Signal { signo } => Kind::Signal {
            signo: i64::from(signo),
        },
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
    use tracing_trace2_record::{
        Callsite, ChildInfo, Event, Format, Record, RegionInfo, TimerInfo, Timestamp,
    };

    use super::*;

    /// One record of every kind (and the variants of a few), with values that read back
    /// exactly from the Event text.
    fn events() -> Vec<Event<'static>> {
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
        vec![
            Event::Version { exe: "2.47.3" },
            Event::TooManyFiles,
            Event::Start {
                argv: &["git", "commit", "-m", "it's \"done\""],
            },
            Event::CmdAncestry {
                ancestry: &["bash", "sshd"],
            },
            Event::CmdPath {
                path: "/usr/bin/git",
            },
            Event::CmdName {
                name: "commit",
                hierarchy: "commit",
            },
            Event::CmdName {
                name: "x",
                hierarchy: "",
            },
            Event::CmdMode { name: "branch" },
            Event::Alias {
                alias: "co",
                argv: &["checkout"],
            },
            Event::DefParam {
                scope: "global",
                param: "core.abbrev",
                value: Some("8"),
            },
            Event::DefRepo {
                repo: 1,
                worktree: "/tmp/repo",
            },
            Event::RegionEnter { region, nesting: 1 },
            Event::RegionLeave {
                region,
                nesting: 1,
                t_rel_us: 1234,
            },
            Event::RegionLeave {
                region: RegionInfo::default(),
                nesting: 2,
                t_rel_us: 5,
            },
            Event::Data {
                repo: None,
                category: "status",
                key: "count",
                value: "line\n\u{1b}[2J \"quoted\"",
                nesting: 2,
                t_rel_us: 40,
            },
            Event::DataJson {
                repo: Some(1),
                category: "traverse_trees",
                key: "statistics",
                json: r#"{"count":1,"list":[1,"two"]}"#,
                nesting: 1,
                t_rel_us: 40,
            },
            Event::DataJson {
                repo: None,
                category: "c",
                key: "empty",
                json: "",
                nesting: 1,
                t_rel_us: 1,
            },
            Event::Printf { msg: Some("hello") },
            Event::Error {
                msg: Some("bad"),
                fmt: Some("bad %s"),
            },
            Event::ChildStart(child),
            Event::ChildStart(ChildInfo {
                is_git: true,
                hook_name: None,
                class: "?",
                argv: &["rev-parse", "HEAD"],
                ..child
            }),
            Event::ChildExit {
                child_id: 3,
                pid: 4242,
                code: 1,
                elapsed_us: 777,
            },
            Event::ChildReady {
                child_id: 4,
                pid: 4243,
                ready: "ready",
                elapsed_us: 888,
            },
            Event::Exec {
                exec_id: 0,
                exe: Some("git"),
                argv: &["git", "status"],
            },
            Event::ExecResult {
                exec_id: 0,
                code: 2,
                err: Some("ENOENT"),
            },
            Event::ThreadStart,
            Event::ThreadExit { elapsed_us: 99 },
            Event::Timer {
                per_thread: true,
                timer,
            },
            Event::Timer {
                per_thread: false,
                timer,
            },
            Event::Counter {
                per_thread: false,
                category: "fsync",
                name: "writeout-only",
                value: 7,
            },
            Event::Exit { code: 0 },
            Event::Atexit { code: 0 },
            Event::Signal { signo: 15 },
        ]
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
            match TraceEvent::parse(text) {
                // Debug shows every field; a raw JSON value by its text, which both make alike.
                Ok(parsed) => assert_eq!(direct, format!("{parsed:?}"), "{text}"),
                // The line parser takes `"value":null` for a missing value; the record is
                // kept, with its null.
                Err(_) => {
                    assert!(text.contains(r#""value":null"#), "{text}");
                    assert!(direct.contains("RawValue(null)"), "{direct}");
                }
            }
        }
    }
}
