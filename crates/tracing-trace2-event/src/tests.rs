//! Tests of the Event formatter against git 2.47.3's own captures.
//!
//! Each sample line is parsed back into the `Record` that would have produced it (its
//! own sid, thread, time, file and line included), formatted again and compared with
//! git's bytes, so nothing needs masking.

use std::path::PathBuf;

use proptest::prelude::*;
use serde_json::Value;
use tracing_trace2_record::{
    Callsite, ChildInfo, Format, Record, RegionInfo, TimerInfo, Timestamp, Trace2Event,
};

use crate::{EventFormat, read_line};
use tracing_trace2_test_support::alloc::{CountingAlloc, allocations};

// ---------------------------------------------------------------------------------------
// Allocation counting: the formatter must not allocate except to grow `out`.

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

// ---------------------------------------------------------------------------------------
// Sample replay.

/// A git 2.47.3 capture: the files of the project's `spec/samples` these tests read are
/// copied into the crate's `testdata/`, so that its package tests itself.
fn sample_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(name)
}

/// The sample's lines, each with its LF. Invalid UTF-8 is replaced by U+FFFD, as our
/// caller does with the inputs of a record; `lossy` says whether that was needed.
fn sample_lines(name: &str) -> (Vec<String>, bool) {
    let bytes = std::fs::read(sample_path(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let text = String::from_utf8_lossy(&bytes);
    let lossy = std::str::from_utf8(&bytes).is_err();
    let lines: Vec<String> = text.split_inclusive('\n').map(str::to_owned).collect();
    assert!(!lines.is_empty(), "{name} is empty");
    (lines, lossy)
}

/// Rebuilds the record behind one git line with the Event reader and formats it with
/// `format` into `out`.
///
/// In brief mode git's line has no file and (mostly) no time; the record still gets a
/// callsite and a time so that the test shows the formatter dropping them. What Event
/// JSON never shows (`exec_result`'s errno text) is put in for the same reason. Returns
/// how many allocations (or reallocations) happened on this thread during `format`
/// itself.
fn replay(line: &str, format: &EventFormat, out: &mut Vec<u8>) -> usize {
    let read = read_line(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    let mut list = Vec::new();
    let mut record = read
        .record(&mut list)
        .unwrap_or_else(|e| panic!("{e}: {line}"));
    if record.callsite.file.is_none() && format.brief() {
        record.callsite = Callsite {
            file: Some("src/hidden-in-brief.rs"),
            line: 7,
        };
    }
    if record.time.wall_us == 0 {
        record.time.wall_us = 1_795_303_297_816_991;
    }
    if let Trace2Event::ExecResult { exec_id, code, .. } = record.event {
        record.event = Trace2Event::ExecResult {
            exec_id,
            code,
            // Present in the record (Normal and Perf show it) but not in JSON.
            err: (code > 0).then_some("No such file or directory"),
        };
    }
    let before = allocations();
    format.format(&record, out);
    (allocations() - before) as usize
}

fn formatted(line: &str, format: &EventFormat) -> String {
    let mut out = Vec::new();
    replay(line, format, &mut out);
    String::from_utf8(out).expect("an Event line is valid UTF-8")
}

/// Replays the lines of `name` accepted by `pick` and compares each with git's.
/// Returns how many lines were compared.
fn check_sample(name: &str, format: &EventFormat, pick: impl Fn(&str) -> bool) -> usize {
    let (lines, lossy) = sample_lines(name);
    assert!(!lossy, "{name} is not valid UTF-8");
    let mut compared = 0;
    for line in lines.iter().filter(|l| pick(l)) {
        assert_eq!(formatted(line, format), *line, "in {name}");
        compared += 1;
    }
    assert!(compared > 0, "no line of {name} was compared");
    compared
}

fn all(_: &str) -> bool {
    true
}

#[test]
fn version_sample() {
    assert_eq!(check_sample("version.event", &EventFormat::new(), all), 6);
}

#[test]
fn version_brief_sample_keeps_time_on_version_and_atexit_only() {
    let brief = EventFormat::new().with_brief(true);
    assert_eq!(check_sample("version-brief.event", &brief, all), 6);
    assert_eq!(
        check_sample("status-brief.event", &brief, all),
        sample_lines("status-brief.event").0.len()
    );
    assert_eq!(
        check_sample("parent-sid.event", &brief, all),
        sample_lines("parent-sid.event").0.len()
    );
}

#[test]
fn data_sample_with_repo_zero_and_escapes() {
    assert_eq!(check_sample("tt-data.event", &EventFormat::new(), all), 8);
}

#[test]
fn errors_sample() {
    assert_eq!(check_sample("tt-errors.event", &EventFormat::new(), all), 8);
    check_sample("error-unknown-option.event", &EventFormat::new(), all);
    check_sample("warning.event", &EventFormat::new(), all);
}

#[test]
fn def_param_sample() {
    assert_eq!(
        check_sample("def-param.event", &EventFormat::new(), all),
        14
    );
}

#[test]
fn commit_sample_regions_data_and_children() {
    let wanted = |l: &str| {
        [
            "region_enter",
            "region_leave",
            "data",
            "data_json",
            "child_start",
            "child_exit",
        ]
        .iter()
        .any(|e| l.starts_with(&format!("{{\"event\":\"{e}\"")))
    };
    assert_eq!(
        check_sample("commit.event", &EventFormat::new(), wanted),
        43
    );
    // The rest of the file too (version, start, def_repo, cmd_name, exit, atexit).
    check_sample("commit.event", &EventFormat::new(), all);
}

#[test]
fn spec_sample_every_line() {
    let (lines, _) = sample_lines("tt-spec.event");
    assert_eq!(
        check_sample("tt-spec.event", &EventFormat::new(), all),
        lines.len()
    );
}

#[test]
fn timer_and_counter_samples() {
    check_sample("tt-thread-timer.event", &EventFormat::new(), all);
    check_sample("tt-counter.event", &EventFormat::new(), all);
    check_sample("tt-timer.event", &EventFormat::new(), all);
    check_sample("tt-thread-counter.event", &EventFormat::new(), all);
    check_sample("repack-counters.event", &EventFormat::new(), all);
}

#[test]
fn exec_and_alias_samples() {
    check_sample("exec-fail.event", &EventFormat::new(), all);
    check_sample("exec.event", &EventFormat::new(), all);
    check_sample("alias-shell.event", &EventFormat::new(), all);
    check_sample("alias-git.event", &EventFormat::new(), all);
}

#[test]
fn other_samples() {
    for name in [
        "status.event",
        "submodule-status.event",
        "submodule-grep.event",
        "ipc-daemon.event",
        "signal-sigpipe.event",
        "pager.event",
        "cmd-mode.event",
        "redact-url.event",
        "tt-child-nested.event",
        "maxfiles-dir/git-trace2-discard",
    ] {
        check_sample(name, &EventFormat::new(), all);
    }
}

#[test]
fn too_many_files_has_common_keys_only() {
    let picked = |l: &str| l.contains("\"too_many_files\"");
    assert_eq!(
        check_sample(
            "maxfiles-dir/git-trace2-discard",
            &EventFormat::new(),
            picked
        ),
        1
    );
}

#[test]
fn invalid_utf8_becomes_replacement_character() {
    let (lines, lossy) = sample_lines("error-escape.event");
    assert!(lossy, "the sample should hold git's raw 0xFF byte");
    let mut replaced = 0;
    for line in &lines {
        let mut out = Vec::new();
        replay(line, &EventFormat::new(), &mut out);
        let ours = std::str::from_utf8(&out).expect("our line is valid UTF-8");
        assert_eq!(ours, line);
        if ours.contains('\u{FFFD}') {
            replaced += 1;
            assert!(ours.contains("\\u0001\u{7f}é\u{FFFD}"), "{ours}");
        }
    }
    // The argument shows up in `start` and in the error message.
    assert_eq!(replaced, 2);
}

#[test]
fn empty_file_name_is_omitted_like_none() {
    // The `null file` printf of tt-spec has no file/line; a record whose file is an
    // empty string must give the same bytes.
    let (lines, _) = sample_lines("tt-spec.event");
    let line = lines
        .iter()
        .find(|l| l.contains("\"msg\":\"null file\""))
        .unwrap();
    let read = read_line(line).unwrap();
    let mut list = Vec::new();
    let read = read.record(&mut list).unwrap();
    assert_eq!(read.callsite, Callsite::default());
    for file in [None, Some("")] {
        let record = Record {
            callsite: Callsite { file, line: 99 },
            ..read
        };
        let mut out = Vec::new();
        EventFormat::new().format(&record, &mut out);
        assert_eq!(String::from_utf8(out).unwrap(), *line);
    }
}

// ---------------------------------------------------------------------------------------
// Nesting filter.

fn is_filtered_kind(v: &Value) -> bool {
    matches!(
        v["event"].as_str(),
        Some("region_enter" | "region_leave" | "data" | "data_json")
    )
}

/// What identifies a filtered line across two runs whose times differ.
fn identity(v: &Value) -> (Value, Value, Value, Value, Value) {
    let get = |k: &str| v.get(k).cloned().unwrap_or(Value::Null);
    (
        get("event"),
        get("category"),
        get("label"),
        get("key"),
        get("nesting"),
    )
}

/// Replays the region/data lines of `from` through `format` and checks that exactly the
/// region/data lines of `expected` come out, in order.
fn check_nesting(from: &str, format: &EventFormat, expected: &str) {
    let (source, _) = sample_lines(from);
    let mut ours = Vec::new();
    let mut source_count = 0;
    for line in &source {
        let v: Value = serde_json::from_str(line).unwrap();
        if !is_filtered_kind(&v) {
            continue;
        }
        source_count += 1;
        let out = formatted(line, format);
        if out.is_empty() {
            continue;
        }
        // A line that is kept is git's own line, byte for byte.
        assert_eq!(out, *line);
        ours.push(identity(&serde_json::from_str(&out).unwrap()));
    }
    let (git_lines, _) = sample_lines(expected);
    let git: Vec<_> = git_lines
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(is_filtered_kind)
        .map(|v| identity(&v))
        .collect();
    assert!(
        git.len() < source_count,
        "{expected} should hold fewer lines than {from}"
    );
    assert_eq!(ours, git);
}

#[test]
fn nesting_one_keeps_only_top_level() {
    let format = EventFormat::new().with_max_nesting(1);
    check_nesting("status-nesting9.event", &format, "status-nesting1.event");
}

#[test]
fn nesting_default_and_zero_keep_two_levels() {
    assert_eq!(EventFormat::new().max_nesting(), 2);
    assert_eq!(EventFormat::new().with_max_nesting(0), EventFormat::new());
    check_nesting(
        "status-nesting9.event",
        &EventFormat::new(),
        "status-nesting-default.event",
    );
    let zero = EventFormat::new().with_max_nesting(0);
    check_nesting("status-nesting9.event", &zero, "status-nesting0.event");
}

#[test]
fn nesting_nine_keeps_everything() {
    let format = EventFormat::new().with_max_nesting(9);
    check_sample("status-nesting9.event", &format, all);
}

#[test]
fn nesting_filter_leaves_other_events_alone() {
    // printf, child_start, exit… are written whatever their surrounding depth.
    let format = EventFormat::new().with_max_nesting(1);
    let unfiltered = |l: &str| {
        let v: Value = serde_json::from_str(l).unwrap();
        !is_filtered_kind(&v)
    };
    check_sample("tt-spec.event", &format, unfiltered);
}

// ---------------------------------------------------------------------------------------
// Optional keys without a sample of their own: checked on the parsed line.

fn record_with(event: Trace2Event<'_>) -> Record<'_> {
    Record {
        event,
        time: Timestamp::default(),
        sid: "sid",
        depth: 0,
        thread: "main",
        callsite: Callsite::default(),
        open_regions: 0,
    }
}

fn parse(event: Trace2Event<'_>, format: &EventFormat) -> serde_json::Map<String, Value> {
    let mut out = Vec::new();
    format.format(&record_with(event), &mut out);
    match serde_json::from_slice(&out).unwrap() {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

#[test]
fn absent_optional_values_drop_their_keys() {
    let f = EventFormat::new();
    let error = parse(
        Trace2Event::Error {
            msg: None,
            fmt: None,
        },
        &f,
    );
    assert!(!error.contains_key("msg") && !error.contains_key("fmt"));
    let error = parse(
        Trace2Event::Error {
            msg: Some(""),
            fmt: None,
        },
        &f,
    );
    assert_eq!(error["msg"], "");
    assert!(!error.contains_key("fmt"));
    let printf = parse(Trace2Event::Printf { msg: None }, &f);
    assert!(!printf.contains_key("msg") && printf.contains_key("t_abs"));
    let def_param = parse(
        Trace2Event::DefParam {
            scope: "command",
            param: "foo.bar",
            value: None,
        },
        &f,
    );
    assert!(!def_param.contains_key("value"));
    let cmd_name = parse(
        Trace2Event::CmdName {
            name: "x",
            hierarchy: "",
        },
        &f,
    );
    assert!(!cmd_name.contains_key("hierarchy"));
    let exec = parse(
        Trace2Event::Exec {
            exec_id: 1,
            exe: None,
            argv: &["a"],
        },
        &f,
    );
    assert!(!exec.contains_key("exe"));
    let region = parse(
        Trace2Event::RegionEnter {
            region: RegionInfo {
                msg: Some(""),
                ..RegionInfo::default()
            },
            nesting: 1,
        },
        &f,
    );
    assert_eq!(region["msg"], "");
    assert!(!region.contains_key("repo") && !region.contains_key("label"));
    // No file at all: no line either.
    assert!(!region.contains_key("file") && !region.contains_key("line"));
}

#[test]
fn git_child_without_arguments_is_just_git() {
    let child = parse(
        Trace2Event::ChildStart(ChildInfo {
            class: "?",
            is_git: true,
            ..ChildInfo::default()
        }),
        &EventFormat::new(),
    );
    assert_eq!(child["argv"], serde_json::json!(["git"]));
    assert_eq!(child["use_shell"], false);
    assert!(!child.contains_key("hook_name") && !child.contains_key("cd"));
}

#[test]
fn empty_data_json_text_still_gives_a_json_line() {
    let line = parse(
        Trace2Event::DataJson {
            repo: None,
            category: "c",
            key: "k",
            json: "",
            nesting: 1,
            t_rel_us: 0,
        },
        &EventFormat::new(),
    );
    assert_eq!(line["value"], Value::Null);
}

#[test]
fn huge_counts_print_through_a_signed_conversion() {
    let counter = parse(
        Trace2Event::Counter {
            per_thread: false,
            category: "c",
            name: "n",
            value: u64::MAX,
        },
        &EventFormat::new(),
    );
    assert_eq!(counter["count"], -1);
}

#[test]
fn formatting_allocates_only_to_grow_the_buffer() {
    let format = EventFormat::new();
    let mut checked = 0;
    for name in [
        "tt-spec.event",
        "tt-thread-timer.event",
        "commit.event",
        "def-param.event",
    ] {
        for line in &sample_lines(name).0 {
            let mut roomy = Vec::with_capacity(64 * 1024);
            assert_eq!(
                replay(line, &format, &mut roomy),
                0,
                "format allocated for {line}"
            );
            // Growing the buffer is the one allocation allowed.
            let mut tight = Vec::new();
            assert!(replay(line, &format, &mut tight) > 0);
            checked += 1;
        }
    }
    assert!(checked > 100);
}

/// Reading a git line into a record allocates only for what the line cannot lend: a
/// string with escapes, an argument list, a key its kind does not have (`evt`), and a
/// timer's totals (matched by formatting candidates as the formatter would). The reader
/// used to collect every line's keys into a vector first.
#[test]
fn reading_a_plain_git_line_allocates_nothing() {
    let mut checked = 0;
    for name in [
        "commit.event",
        "status.event",
        "tt-spec.event",
        "tt-timer.event",
    ] {
        for line in &sample_lines(name).0 {
            if line.contains(['\\', '[']) || line.contains("\"evt\"") || line.contains("t_total") {
                continue;
            }
            let before = allocations();
            let read = read_line(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            let mut list = Vec::new();
            let record = read
                .record(&mut list)
                .unwrap_or_else(|e| panic!("{e}: {line}"));
            assert_eq!(allocations() - before, 0, "{line}");
            assert!(!record.sid.is_empty());
            checked += 1;
        }
    }
    assert!(checked > 100, "{checked}");
}

// ---------------------------------------------------------------------------------------
// Property test: any text in any field yields one parseable line.

fn text() -> impl Strategy<Value = String> {
    let tricky = prop_oneof![
        Just('"'),
        Just('\\'),
        Just('/'),
        Just('\n'),
        Just('\r'),
        Just('\t'),
        Just('\u{7f}'),
        Just('é'),
        Just('\u{2028}'),
        Just('\u{FFFD}'),
        (0u32..0x20).prop_map(|c| char::from_u32(c).unwrap()),
        any::<char>(),
    ];
    prop::collection::vec(tricky, 0..12).prop_map(|chars| chars.into_iter().collect())
}

/// Formats `event` and checks the line's shape; returns the parsed object.
fn round_trip(record: &Record<'_>, format: &EventFormat) -> serde_json::Map<String, Value> {
    let mut out = Vec::new();
    format.format(record, &mut out);
    assert_eq!(out.last(), Some(&b'\n'), "line must end in LF");
    assert_eq!(
        out.iter().filter(|&&b| b == b'\n').count(),
        1,
        "exactly one LF"
    );
    let line = std::str::from_utf8(&out).unwrap();
    match serde_json::from_str(line) {
        Ok(Value::Object(map)) => map,
        other => panic!("{line}: {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_text_round_trips(
        a in text(),
        b in text(),
        c in text(),
        d in text(),
        list in prop::collection::vec(text(), 0..4),
        brief in any::<bool>(),
    ) {
        let format = EventFormat::new().with_brief(brief);
        let strs: Vec<&str> = list.iter().map(String::as_str).collect();
        let json = serde_json::to_string(&Value::String(d.clone())).unwrap();
        let events = [
            Trace2Event::Version { exe: &a },
            Trace2Event::Start { argv: &strs },
            Trace2Event::CmdAncestry { ancestry: &strs },
            Trace2Event::CmdPath { path: &a },
            Trace2Event::CmdName { name: &a, hierarchy: &b },
            Trace2Event::CmdMode { name: &a },
            Trace2Event::Alias { alias: &a, argv: &strs },
            Trace2Event::DefParam { scope: &a, param: &b, value: Some(&c) },
            Trace2Event::DefRepo { repo: 3, worktree: &a },
            Trace2Event::RegionEnter {
                region: RegionInfo { repo: Some(1), category: Some(&a), label: Some(&b), msg: Some(&c) },
                nesting: 1,
            },
            Trace2Event::RegionLeave {
                region: RegionInfo { repo: None, category: Some(&a), label: Some(&b), msg: Some(&c) },
                nesting: 2,
                t_rel_us: 5,
            },
            Trace2Event::Data { repo: Some(0), category: &a, key: &b, value: &c, nesting: 1, t_rel_us: 1 },
            Trace2Event::DataJson { repo: None, category: &a, key: &b, json: &json, nesting: 1, t_rel_us: 1 },
            Trace2Event::Printf { msg: Some(&a) },
            Trace2Event::Error { msg: Some(&a), fmt: Some(&b) },
            Trace2Event::ChildStart(ChildInfo {
                child_id: 4,
                class: &a,
                hook_name: Some(&b),
                cd: Some(&c),
                use_shell: true,
                is_git: false,
                argv: &strs,
            }),
            Trace2Event::ChildReady { child_id: 1, pid: 2, ready: &a, elapsed_us: 3 },
            Trace2Event::Exec { exec_id: 0, exe: Some(&a), argv: &strs },
            Trace2Event::Timer {
                per_thread: true,
                timer: TimerInfo { category: &a, name: &b, intervals: 1, total_ns: 1, min_ns: 1, max_ns: 1 },
            },
            Trace2Event::Counter { per_thread: false, category: &a, name: &b, value: 9 },
        ];
        for event in events {
            let record = Record {
                event,
                time: Timestamp { wall_us: 1_795_303_297_816_991, t_abs_us: 410 },
                sid: &b,
                depth: 0,
                thread: &c,
                callsite: Callsite { file: Some(&d), line: 12 },
                open_regions: 0,
            };
            let map = round_trip(&record, &format);
            prop_assert_eq!(&map["event"], event.name());
            prop_assert_eq!(&map["sid"], b.as_str());
            prop_assert_eq!(&map["thread"], c.as_str());
            if !brief && !d.is_empty() {
                prop_assert_eq!(&map["file"], d.as_str());
            } else {
                prop_assert!(!map.contains_key("file"));
            }
            let list_value = Value::from(strs.clone());
            let expected: Vec<(&str, Value)> = match event {
                Trace2Event::Version { .. } => vec![("exe", a.clone().into())],
                Trace2Event::Start { .. } => vec![("argv", list_value)],
                Trace2Event::CmdAncestry { .. } => vec![("ancestry", list_value)],
                Trace2Event::CmdPath { .. } => vec![("path", a.clone().into())],
                Trace2Event::CmdName { .. } => {
                    let mut e = vec![("name", a.clone().into())];
                    if !b.is_empty() {
                        e.push(("hierarchy", b.clone().into()));
                    }
                    e
                }
                Trace2Event::CmdMode { .. } => vec![("name", a.clone().into())],
                Trace2Event::Alias { .. } => vec![("alias", a.clone().into()), ("argv", list_value)],
                Trace2Event::DefParam { .. } => vec![
                    ("scope", a.clone().into()),
                    ("param", b.clone().into()),
                    ("value", c.clone().into()),
                ],
                Trace2Event::DefRepo { .. } => vec![("worktree", a.clone().into())],
                Trace2Event::RegionEnter { .. } | Trace2Event::RegionLeave { .. } => vec![
                    ("category", a.clone().into()),
                    ("label", b.clone().into()),
                    ("msg", c.clone().into()),
                ],
                Trace2Event::Data { .. } => vec![
                    ("category", a.clone().into()),
                    ("key", b.clone().into()),
                    ("value", c.clone().into()),
                ],
                Trace2Event::DataJson { .. } => vec![
                    ("category", a.clone().into()),
                    ("key", b.clone().into()),
                    ("value", d.clone().into()),
                ],
                Trace2Event::Printf { .. } => vec![("msg", a.clone().into())],
                Trace2Event::ChildReady { .. } => vec![("ready", a.clone().into())],
                Trace2Event::Error { .. } => vec![("msg", a.clone().into()), ("fmt", b.clone().into())],
                Trace2Event::ChildStart(_) => vec![
                    ("child_class", a.clone().into()),
                    ("hook_name", b.clone().into()),
                    ("cd", c.clone().into()),
                    ("argv", list_value),
                ],
                Trace2Event::Exec { .. } => vec![("exe", a.clone().into()), ("argv", list_value)],
                Trace2Event::Timer { .. } | Trace2Event::Counter { .. } => {
                    vec![("category", a.clone().into()), ("name", b.clone().into())]
                }
                _ => vec![],
            };
            prop_assert!(!expected.is_empty());
            for (key, value) in expected {
                prop_assert_eq!(map.get(key), Some(&value), "key {}", key);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The Event reader against the formatter.

/// For random records of every kind, reading the line the formatter wrote gives the
/// record back: the very same event for everything a line carries exactly, and for
/// the rest (see the reader's docs) a record that the formatter writes as the same line.
#[test]
fn reading_a_formatted_line_gives_the_record_back() {
    use tracing_trace2_test_support::random::{KINDS, Owned, Rng};
    let mut rng = Rng(0x05EE_D0FE_7E47);
    let full = EventFormat::new().with_max_nesting(100);
    let brief = EventFormat::new().with_max_nesting(100).with_brief(true);
    for round in 0..400 {
        for kind in 0..KINDS {
            let mut owned = Owned::new(&mut rng, kind);
            // A data_json value is JSON text; the generator's is arbitrary text.
            owned.s[2] = serde_json::to_string(&owned.s[2]).unwrap();
            let list = owned.list_refs();
            let part = |s: &str| s.replace('/', "_");
            let sid = format!("{}/{}", part(&owned.s[6]), part(&owned.s[3]));
            let mut record = owned.record_in(&list, &sid, 1);
            record.open_regions = record.event.nesting().map_or(0, |n| n.saturating_sub(1));
            for format in [&full, &brief] {
                let mut line = Vec::new();
                format.format(&record, &mut line);
                let line = String::from_utf8(line).unwrap();
                let read = read_line(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
                let mut items = Vec::new();
                let back = read
                    .record(&mut items)
                    .unwrap_or_else(|e| panic!("{e}: {line}"));
                let mut again = Vec::new();
                format.format(&back, &mut again);
                assert_eq!(String::from_utf8(again).unwrap(), line, "round {round}");
                assert_eq!(
                    (back.sid, back.depth, back.thread),
                    (record.sid, 1, record.thread)
                );
                assert_eq!(back.open_regions, record.open_regions);
                let lossy = matches!(
                    record.event,
                    Trace2Event::ChildStart(ChildInfo { is_git: true, .. })
                        | Trace2Event::ChildStart(ChildInfo {
                            argv: ["git", ..],
                            ..
                        })
                        | Trace2Event::ExecResult { err: Some(_), .. }
                        | Trace2Event::Timer { .. }
                ) || matches!(record.event, Trace2Event::CmdName { hierarchy, .. } if hierarchy.is_empty());
                if !lossy {
                    assert_eq!(
                        format!("{:?}", back.event),
                        format!("{:?}", record.event),
                        "{line}"
                    );
                }
                if format.brief() {
                    continue;
                }
                assert_eq!(back.time.wall_us, record.time.wall_us, "{line}");
                let file = record.callsite.file.filter(|f| !f.is_empty());
                assert_eq!(back.callsite.file, file, "{line}");
                if file.is_some() {
                    assert_eq!(back.callsite.line, record.callsite.line);
                }
            }
        }
    }
}

/// A line of a kind the catalogue does not know is reported, never skipped, and so is
/// a line whose fields do not match its kind.
#[test]
fn the_reader_reports_unknown_kinds_and_bad_fields() {
    let unknown = r#"{"event":"future","sid":"s","thread":"main","title":"t","count":3}"#;
    assert!(matches!(
        read_line(unknown),
        Err(crate::ReadError::UnknownKind(name)) if name == "future"
    ));
    let bad = r#"{"event":"region_enter","sid":"s","thread":"main","nesting":"one"}"#;
    let mut list = Vec::new();
    assert!(read_line(bad).unwrap().record(&mut list).is_err());
}
