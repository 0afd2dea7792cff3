//! Tests of the Perf formatter: every line of git's own Perf captures rebuilt from its
//! record, and a differential test against a reference copy of the plain formatter.
//!
//! Every expected line below is a real line of git 2.47.3's Perf output, read from
//! the captures in the spec's `samples/` directory (the files used are copied into the
//! crate's `testdata/`). Each test rebuilds the record behind each line and compares
//! the formatted bytes with the captured bytes.

use super::*;
use tracing_trace2_record::{Callsite, TimerInfo, Timestamp};

/// The formatter as it was before the fixed layout and the private primitives: it
/// writes column by column with the shared `text` primitives. Every line the fast
/// paths write is compared with the line this one writes.
mod reference {
    use tracing_trace2_record::text::{
        pad_to, push_cut_padded, push_i64, push_padded, push_seconds_9, push_time_of_day, push_u64,
    };
    use tracing_trace2_record::{Format, Record, RegionInfo, Trace2Event};

    // The widths (checked against git's captures by the other tests) are shared.
    use super::super::{CATEGORY_WIDTH, EVENT_WIDTH, FILE_LINE_WIDTH, REPO_WIDTH, THREAD_WIDTH};

    /// The column separator.
    const SEP: &[u8] = b" | ";

    // The column values are the live formatter's; how they are written is the old way.
    use super::super::{Category, Columns, other_columns, region_columns};

    /// The old formatter, with the settings of the formatter under test.
    pub struct Reference(pub super::super::PerfFormat);

    impl Reference {
        /// Writes everything up to the dots: the prefix and the nine fixed columns.
        fn push_columns(&self, record: &Record<'_>, cols: &Columns<'_>, out: &mut Vec<u8>) {
            if !self.0.is_brief() {
                push_time_of_day(out, record.time.wall_us, self.0.utc_offset());
                out.push(b' ');
                push_file_line(out, record.callsite.file, record.callsite.line);
                out.extend_from_slice(SEP);
            }
            out.push(b'd');
            push_u64(out, u64::from(record.depth));
            out.extend_from_slice(SEP);
            push_padded(out, record.thread, THREAD_WIDTH);
            out.extend_from_slice(SEP);
            push_padded(out, record.event.name(), EVENT_WIDTH);
            out.extend_from_slice(SEP);

            let start = out.len();
            if let Some(repo) = cols.repo {
                out.push(b'r');
                push_i64(out, repo);
                out.push(b' ');
            }
            pad_to(out, start + REPO_WIDTH);
            out.extend_from_slice(SEP);

            push_optional_seconds(out, cols.t_abs.then_some(record.time.t_abs_us));
            out.extend_from_slice(SEP);
            push_optional_seconds(out, cols.t_rel_us);
            out.extend_from_slice(SEP);

            match cols.category {
                Category::Blank => push_cut_padded(out, "", CATEGORY_WIDTH),
                Category::Text(category) => push_cut_padded(out, category, CATEGORY_WIDTH),
                Category::Scope(scope) => {
                    let start = out.len();
                    out.extend_from_slice(b"scope:");
                    out.extend_from_slice(scope.as_bytes());
                    out.truncate(start + CATEGORY_WIDTH);
                    pad_to(out, start + CATEGORY_WIDTH);
                }
            }
            out.extend_from_slice(SEP);

            let dots = 2 * record.open_regions as usize;
            out.resize(out.len() + dots, b'.');
        }
    }

    /// Writes the 28-byte `file:line` column: long locations keep their last 25 bytes.
    fn push_file_line(out: &mut Vec<u8>, file: Option<&str>, line: u32) {
        let start = out.len();
        if let Some(file) = file.filter(|f| !f.is_empty()) {
            out.extend_from_slice(file.as_bytes());
            out.push(b':');
            push_u64(out, u64::from(line));
            let len = out.len() - start;
            if len > FILE_LINE_WIDTH {
                // Cut in place rather than building `file:line` in a scratch buffer.
                let keep = FILE_LINE_WIDTH - 3;
                let end = out.len();
                out.copy_within(end - keep..end, start + 3);
                out[start..start + 3].copy_from_slice(b"...");
                out.truncate(start + FILE_LINE_WIDTH);
            }
        }
        pad_to(out, start + FILE_LINE_WIDTH);
    }

    /// Writes a `%9.6f` seconds column, or nine spaces when the event has no such value.
    fn push_optional_seconds(out: &mut Vec<u8>, micros: Option<u64>) {
        match micros {
            Some(us) => push_seconds_9(out, us),
            None => out.extend_from_slice(b"         "),
        }
    }

    /// `label:<label>` then ` <message>`: the space comes with the message, label or not.
    fn push_region_payload(out: &mut Vec<u8>, region: &RegionInfo<'_>) {
        if let Some(label) = region.label {
            out.extend_from_slice(b"label:");
            out.extend_from_slice(label.as_bytes());
        }
        if let Some(msg) = region.msg {
            out.push(b' ');
            out.extend_from_slice(msg.as_bytes());
        }
    }

    impl Format for Reference {
        fn format(&self, record: &Record<'_>, out: &mut Vec<u8>) {
            let cols = match record.event {
                Trace2Event::TooManyFiles => return,
                Trace2Event::RegionEnter { region, .. } => region_columns(&region, None),
                Trace2Event::RegionLeave {
                    region, t_rel_us, ..
                } => region_columns(&region, Some(t_rel_us)),
                Trace2Event::Data {
                    repo,
                    category,
                    t_rel_us,
                    ..
                }
                | Trace2Event::DataJson {
                    repo,
                    category,
                    t_rel_us,
                    ..
                } => Columns {
                    repo,
                    t_abs: true,
                    t_rel_us: Some(t_rel_us),
                    category: Category::Text(category),
                },
                // The columns of other lines were not rewritten: the same code.
                _ => other_columns(&record.event),
            };
            self.push_columns(record, &cols, out);

            match record.event {
                Trace2Event::RegionEnter { region, .. }
                | Trace2Event::RegionLeave { region, .. } => push_region_payload(out, &region),
                Trace2Event::Data { key, value, .. } => {
                    out.extend_from_slice(key.as_bytes());
                    out.push(b':');
                    out.extend_from_slice(value.as_bytes());
                }
                Trace2Event::DataJson { key, json, .. } => {
                    out.extend_from_slice(key.as_bytes());
                    out.push(b':');
                    out.extend_from_slice(json.as_bytes());
                }
                // The payloads of other lines were not rewritten: the same code.
                _ => super::super::push_other_payload(out, record),
            }

            // Like git, a payload that already ends the line gets no second LF.
            if out.last() != Some(&b'\n') {
                out.push(b'\n');
            }
        }
    }
}

use tracing_trace2_test_support::random::Rng;

/// Every kind of line, with values at and around every width and fast-path limit,
/// formatted by the new formatter and by the reference one: the bytes must match.
#[test]
fn same_bytes_as_the_reference_formatter() {
    let long = "x".repeat(300);
    let file_names: Vec<String> = (0..=40).map(|n| "f".repeat(n)).collect();
    let mut files: Vec<Option<&str>> = vec![
        None,
        Some(""),
        Some("src/main.rs"),
        Some("dir/\u{fc}n\u{ef}code.c"),
        Some(&long),
    ];
    files.extend(file_names.iter().map(|f| Some(f.as_str())));
    let threads = [
        "main",
        "",
        "th01:ipc-accept",
        "th99:exactly-24-bytes-xx",
        "th99:twenty-five-bytes-xx",
        "th07:\u{e9}t\u{e9}",
        &long,
    ];
    let texts = [
        "",
        "a",
        ":",
        "ab",
        "abc",
        "index",
        "label",
        "12",
        "do_read_index",
        "\u{e9}t\u{e9}",
        "exactly-12-b",
        "thirteen-byte",
        "sixteen-bytes-xx",
        "seventeen-bytes-x",
        "thirty-two-bytes-of-text-exactly",
        "thirty-three-bytes-of-text-exactly",
        "ends with LF\n",
        "two\nlines\n",
        "it's \"quoted\" !",
        &long,
    ];
    let seconds = [
        0,
        1,
        999_999,
        1_000_000,
        9_999_999,
        10_000_000,
        99_999_999,
        100_000_000,
        123_456_789_012,
        u64::MAX,
    ];
    let repos = [
        None,
        Some(0),
        Some(1),
        Some(9),
        Some(10),
        Some(-1),
        Some(i64::MIN),
        Some(i64::MAX),
    ];
    let argv: &[&str] = &["git", "it's", "a b", ""];
    let mut rng = Rng(0x5eed);
    for i in 0..60_000u32 {
        let text = |rng: &mut Rng| rng.pick(&texts);
        let maybe = |rng: &mut Rng| (!rng.next_u64().is_multiple_of(3)).then(|| rng.pick(&texts));
        let region = RegionInfo {
            repo: rng.pick(&repos),
            category: maybe(&mut rng),
            label: maybe(&mut rng),
            msg: maybe(&mut rng),
        };
        let t_rel_us = rng.pick(&seconds);
        let event = match i % 16 {
            0..=3 => Trace2Event::RegionEnter { region, nesting: 1 },
            4..=7 => Trace2Event::RegionLeave {
                region,
                nesting: 1,
                t_rel_us,
            },
            8..=10 => Trace2Event::Data {
                repo: rng.pick(&repos),
                category: text(&mut rng),
                key: text(&mut rng),
                value: text(&mut rng),
                nesting: 2,
                t_rel_us,
            },
            11 => Trace2Event::DataJson {
                repo: rng.pick(&repos),
                category: text(&mut rng),
                key: text(&mut rng),
                json: text(&mut rng),
                nesting: 2,
                t_rel_us,
            },
            12 => Trace2Event::DefParam {
                scope: text(&mut rng),
                param: text(&mut rng),
                value: maybe(&mut rng),
            },
            13 => Trace2Event::Printf {
                msg: maybe(&mut rng),
            },
            14 => Trace2Event::ChildStart(ChildInfo {
                child_id: rng.next_u64() % 12,
                class: text(&mut rng),
                hook_name: maybe(&mut rng),
                cd: maybe(&mut rng),
                use_shell: false,
                is_git: rng.next_u64().is_multiple_of(2),
                argv,
            }),
            _ => Trace2Event::Counter {
                per_thread: rng.next_u64().is_multiple_of(2),
                category: text(&mut rng),
                name: text(&mut rng),
                value: rng.next_u64(),
            },
        };
        let record = Record {
            event,
            time: Timestamp {
                wall_us: rng.pick(&[
                    DAY_US,
                    DAY_US - 1,
                    DAY_US + 86_399_999_999,
                    -1,
                    -86_400_000_001,
                    0,
                    1_795_300_000_123_456,
                ]) + (rng.next_u64() % 4_000_000_000) as i64,
                t_abs_us: rng.pick(&seconds),
            },
            sid: "sid",
            depth: rng.pick(&[0, 1, 9, 10, 99, u32::MAX]),
            thread: rng.pick(&threads),
            callsite: Callsite {
                file: rng.pick(&files),
                line: rng.pick(&[
                    0,
                    1,
                    9,
                    10,
                    99,
                    100,
                    999,
                    1000,
                    9999,
                    10_000,
                    123_456,
                    u32::MAX,
                ]),
            },
            open_regions: rng.pick(&[0, 1, 2, 3, 89, 90, 91, 150, 160, 1000]),
        };
        let brief = rng.next_u64().is_multiple_of(4);
        let offset = rng.pick(&[0, 19_800, -28_800, 50_400, -43_200]);
        let ours = PerfFormat::new().with_brief(brief).with_utc_offset(offset);
        let theirs = reference::Reference(ours);
        let mut got = b"before".to_vec();
        let mut want = got.clone();
        ours.format(&record, &mut got);
        theirs.format(&record, &mut want);
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
            "{record:?} brief={brief} offset={offset}"
        );
    }
}

/// A line with every column at its widest (the longest number of each, a file name
/// and a category cut to their columns, seconds too large for the narrow form) fits
/// in the room the general path reserves, and reads as the reference writes it.
#[test]
fn the_widest_columns_fit_the_room_reserved() {
    let long = "w".repeat(100);
    // The room counts the thread name and the event name beyond their columns' widths:
    // an empty thread name and the shortest event name leave the least to spare.
    for (brief, thread, open_regions) in
        [(false, "", 0), (true, "", 0), (false, long.as_str(), 1000)]
    {
        let events = [
            Trace2Event::Data {
                repo: Some(i64::MIN),
                category: &long,
                key: "k",
                value: "v",
                nesting: 2,
                t_rel_us: u64::MAX,
            },
            Trace2Event::RegionLeave {
                region: RegionInfo {
                    repo: Some(i64::MIN),
                    category: Some(&long),
                    label: Some("l"),
                    msg: None,
                },
                nesting: 1,
                t_rel_us: u64::MAX,
            },
        ];
        for event in events {
            let record = Record {
                event,
                time: Timestamp {
                    wall_us: 1_795_300_000_123_456,
                    t_abs_us: u64::MAX,
                },
                sid: "sid",
                depth: u32::MAX,
                thread,
                callsite: Callsite {
                    file: Some(&long),
                    line: u32::MAX,
                },
                open_regions,
            };
            let ours = PerfFormat::new().with_brief(brief);
            let mut got = Vec::new();
            let mut want = Vec::new();
            ours.format(&record, &mut got);
            reference::Reference(ours).format(&record, &mut want);
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want)
            );
        }
    }
}

/// Payloads at and around the longest the fixed layout holds (whatever the
/// indentation) are written as the reference writes them: those that fit in the fixed
/// layout, up to the last, and the first that takes the general path (the count of
/// fixed lines shows which path each took).
#[test]
fn payloads_at_the_template_limit() {
    let room = TEMPLATE.len() - AT_DOTS - 1;
    let value = "v".repeat(room + 2);
    for open_regions in [0, 1, 3] {
        let dots = 2 * open_regions as usize;
        // `<key>:<value>` with a one-byte key.
        for len in [
            room - dots - 3,
            room - dots - 2,
            room - dots - 1,
            room - dots,
        ] {
            let record = Record {
                event: Trace2Event::Data {
                    repo: Some(0),
                    category: "c",
                    key: "k",
                    value: &value[..len],
                    nesting: 1,
                    t_rel_us: 5,
                },
                time: Timestamp {
                    wall_us: 1_795_300_000_123_456,
                    t_abs_us: 5,
                },
                sid: "sid",
                depth: 0,
                thread: "main",
                callsite: Callsite {
                    file: Some("src/a.rs"),
                    line: 1,
                },
                open_regions,
            };
            for ours in [PerfFormat::new(), PerfFormat::new().with_brief(true)] {
                let mut got = Vec::new();
                let mut want = Vec::new();
                let fixed = FIXED_LINES.with(std::cell::Cell::get);
                ours.format(&record, &mut got);
                let payload = 2 + len;
                assert_eq!(
                    FIXED_LINES.with(std::cell::Cell::get) - fixed,
                    u64::from(payload <= room - dots),
                    "{payload} bytes after {dots} dots"
                );
                reference::Reference(ours).format(&record, &mut want);
                assert_eq!(
                    String::from_utf8_lossy(&got),
                    String::from_utf8_lossy(&want),
                    "{len}"
                );
            }
        }
    }
}

#[test]
fn decimal_matches_display() {
    let mut values = vec![0, 9, 10, 99, 100, 999, 1000, u64::from(u32::MAX), u64::MAX];
    values.extend((0..20).map(|p| 10u64.pow(p)));
    values.extend((1..20).map(|p| 10u64.pow(p) - 1));
    for value in values {
        let mut digits = [0; 20];
        let from = decimal(value, &mut digits);
        assert_eq!(&digits[from..], value.to_string().as_bytes());
    }
}

#[test]
fn digit_primitives_match_the_shared_ones() {
    use tracing_trace2_record::text::{push_seconds_9, push_time_of_day};
    let mut micros = 0u32;
    while micros < 1_000_000 {
        assert_eq!(digits6(micros), format!("{micros:06}").as_bytes());
        micros += 997;
    }
    assert_eq!(digits6(999_999), *b"999999");
    for us in [0, 1, 999_999, 1_000_000, 9_999_999, 10_000_000, 99_999_999] {
        let mut ours = [b' '; SECONDS_WIDTH];
        put_narrow_seconds(&mut ours, us);
        let mut shared = Vec::new();
        push_seconds_9(&mut shared, us);
        assert_eq!(ours.as_slice(), shared, "{us}");
    }
    // The cached `HH:MM:SS` must follow the clock, backwards as well as forwards.
    let mut wall = -90_000_000_123i64;
    for step in [
        1,
        999_999,
        1_000_000,
        59_000_001,
        3_600_000_000,
        -7_200_000_000,
    ] {
        for offset in [0, 19_800, -28_800] {
            let mut shared = Vec::new();
            push_time_of_day(&mut shared, wall, offset);
            shared.push(b' ');
            assert_eq!(
                time_of_day(wall, offset).as_slice(),
                shared,
                "{wall} {offset}"
            );
        }
        wall += step * 7919;
    }
}

/// Names of 3 to 23 bytes with lines below 10,000 (nearly every callsite) take the
/// short form, and only they: the column is the same either way (the test above checks
/// it), so the count is what shows the path.
#[test]
fn usual_file_lines_take_the_short_form() {
    let name = "f".repeat(40);
    for len in 0..40 {
        for line in [0, 7, 9999, 10_000, u32::MAX] {
            let before = SHORT_FILE_LINES.with(std::cell::Cell::get);
            let column = file_line_column(Some(&name[..len]), line);
            let short = SHORT_FILE_LINES.with(std::cell::Cell::get) - before;
            let usual = line < 10_000 && (3..=23).contains(&len);
            assert_eq!(short, u64::from(usual), "{len} {line}");
            if usual {
                let text = format!("{}:{line}", &name[..len]);
                assert_eq!(column[..text.len()], *text.as_bytes());
            }
        }
    }
}

#[test]
fn file_line_column_cuts_and_pads() {
    // The expected columns, spaces included, are exactly 28 bytes.
    let cases: &[(Option<&str>, u32, &str)] = &[
        (None, 5, "                            "),
        (Some(""), 5, "                            "),
        (Some("a"), 0, "a:0                         "),
        (Some("ab"), 7, "ab:7                        "),
        (Some("abc"), 9999, "abc:9999                    "),
        (Some("abc"), 10_000, "abc:10000                   "),
        (Some("common-main.c"), 57, "common-main.c:57            "),
        (
            Some("exactly/28chars/file.c"),
            12345,
            "exactly/28chars/file.c:12345",
        ),
        (
            Some("exactly/28chars/file.c"),
            123_456,
            "...tly/28chars/file.c:123456",
        ),
        (
            Some("compat/simple-ipc/ipc-unix-socket.c"),
            1,
            "...e-ipc/ipc-unix-socket.c:1",
        ),
        (Some("f"), u32::MAX, "f:4294967295                "),
        (
            Some("abcdefghijklmnopqrstuvwxyz"),
            u32::MAX,
            "...mnopqrstuvwxyz:4294967295",
        ),
    ];
    for &(file, line, expected) in cases {
        let column = file_line_column(file, line);
        assert_eq!(column.as_slice(), expected.as_bytes(), "{file:?} {line}");
    }
}

/// Where the captures live: the files of the project's `spec/samples` these tests read,
/// copied into the crate so that its package tests itself. `TRACE2_SAMPLES` overrides it.
const SAMPLES_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata");

/// Midnight UTC of the capture day; only the time of day is printed.
const DAY_US: i64 = 1_795_219_200_000_000;

/// Put in `t_abs` when the captured column is blank: it must never show up.
const UNSHOWN_T_ABS: u64 = 987_654_321;

/// The usual ancestry of the capture script.
const ANCESTRY: &[&str] = &[
    "cap.sh",
    "bash",
    "bash",
    "bash",
    "memfd:sealed-91",
    "process_api",
];

/// One captured record split into its columns. `raw` is the whole record, LF
/// included (it may span several physical lines when a message holds a LF).
#[derive(Clone, Debug)]
struct Line {
    raw: String,
    brief: bool,
    wall_us: i64,
    file: Option<String>,
    line: u32,
    depth: u32,
    thread: String,
    t_abs_us: Option<u64>,
    t_rel_us: Option<u64>,
    dots: u32,
}

fn is_record_start(text: &str) -> bool {
    let b = text.as_bytes();
    let full =
        b.len() >= 47 && b[2] == b':' && b[5] == b':' && b[8] == b'.' && &b[44..47] == b" | ";
    let brief = b.first() == Some(&b'd')
        && text[1..]
            .find(" | ")
            .is_some_and(|i| text[1..=i].bytes().all(|c| c.is_ascii_digit()));
    full || brief
}

fn parse_seconds(col: &str) -> Option<u64> {
    let col = col.trim();
    if col.is_empty() {
        return None;
    }
    let (whole, frac) = col.split_once('.').unwrap();
    assert_eq!(frac.len(), 6, "{col}");
    Some(whole.parse::<u64>().unwrap() * 1_000_000 + frac.parse::<u64>().unwrap())
}

fn parse_time_of_day(text: &str) -> i64 {
    let n = |r: std::ops::Range<usize>| text[r].parse::<i64>().unwrap();
    DAY_US + ((n(0..2) * 60 + n(3..5)) * 60 + n(6..8)) * 1_000_000 + n(9..15)
}

fn parse_line(raw: String) -> Line {
    let text = raw.strip_suffix('\n').unwrap();
    let brief = !text.as_bytes()[2].eq(&b':');
    let (wall_us, file, line, rest) = if brief {
        (0, None, 0, text)
    } else {
        let file_line = text[16..44].trim_end();
        let (file, line) = match file_line.rsplit_once(':') {
            Some((f, l)) => (Some(f.to_string()), l.parse().unwrap()),
            None => {
                assert!(file_line.is_empty(), "{file_line}");
                (None, 0)
            }
        };
        (parse_time_of_day(&text[..15]), file, line, &text[47..])
    };
    let cols: Vec<&str> = rest.splitn(8, " | ").collect();
    assert_eq!(cols.len(), 8, "{raw}");
    let payload = cols[7];
    let dots = payload.len() - payload.trim_start_matches('.').len();
    Line {
        brief,
        wall_us,
        file,
        line,
        depth: cols[0].strip_prefix('d').unwrap().parse().unwrap(),
        thread: cols[1].trim_end().to_string(),
        t_abs_us: parse_seconds(cols[4]),
        t_rel_us: parse_seconds(cols[5]),
        dots: u32::try_from(dots / 2).unwrap(),
        raw,
    }
}

/// Reads a capture and splits it into records.
fn sample(name: &str) -> Vec<Line> {
    let dir = std::env::var("TRACE2_SAMPLES").unwrap_or_else(|_| SAMPLES_DIR.to_string());
    let path = format!("{dir}/{name}");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut records: Vec<String> = Vec::new();
    for physical in text.split_inclusive('\n') {
        match records.last_mut() {
            Some(last) if !is_record_start(physical) => last.push_str(physical),
            _ => records.push(physical.to_string()),
        }
    }
    records.into_iter().map(parse_line).collect()
}

/// Gives the event the elapsed value git printed in the `t_rel` column.
fn with_t_rel(event: Trace2Event<'_>, t_rel: Option<u64>) -> Trace2Event<'_> {
    let mut event = event;
    match &mut event {
        Trace2Event::RegionLeave { t_rel_us, .. }
        | Trace2Event::Data { t_rel_us, .. }
        | Trace2Event::DataJson { t_rel_us, .. } => *t_rel_us = t_rel.unwrap(),
        Trace2Event::ChildExit { elapsed_us, .. }
        | Trace2Event::ChildReady { elapsed_us, .. }
        | Trace2Event::ThreadExit { elapsed_us } => *elapsed_us = t_rel.unwrap(),
        _ => {}
    }
    event
}

fn record<'a>(line: &'a Line, event: Trace2Event<'a>) -> Record<'a> {
    Record {
        event: with_t_rel(event, line.t_rel_us),
        time: Timestamp {
            wall_us: line.wall_us,
            t_abs_us: line.t_abs_us.unwrap_or(UNSHOWN_T_ABS),
        },
        sid: "20261121T232137.816920Z-H0a7c9cdf-P00002a1e",
        depth: line.depth,
        thread: &line.thread,
        callsite: Callsite {
            file: line.file.as_deref(),
            line: line.line,
        },
        open_regions: line.dots,
    }
}

fn render(format: &PerfFormat, record: &Record<'_>) -> String {
    let mut out = Vec::new();
    format.format(record, &mut out);
    String::from_utf8(out).unwrap()
}

/// Formats the record behind `line` and compares it with the captured bytes.
fn check(line: &Line, event: Trace2Event<'_>) {
    let format = PerfFormat::new().with_brief(line.brief);
    assert_eq!(render(&format, &record(line, event)), line.raw);
}

/// Checks a whole capture: one event per record, in order.
fn check_all(lines: &[Line], events: &[Trace2Event<'_>]) {
    assert_eq!(lines.len(), events.len(), "record count");
    for (line, event) in lines.iter().zip(events) {
        check(line, *event);
    }
}

const VERSION: Trace2Event<'static> = Trace2Event::Version { exe: "2.47.3" };
const EXIT0: Trace2Event<'static> = Trace2Event::Exit { code: 0 };
const ATEXIT0: Trace2Event<'static> = Trace2Event::Atexit { code: 0 };

fn ancestry(names: &'static [&'static str]) -> Trace2Event<'static> {
    Trace2Event::CmdAncestry { ancestry: names }
}

fn cmd_name(name: &'static str, hierarchy: &'static str) -> Trace2Event<'static> {
    Trace2Event::CmdName { name, hierarchy }
}

fn region(
    category: Option<&'static str>,
    label: Option<&'static str>,
    msg: Option<&'static str>,
) -> RegionInfo<'static> {
    RegionInfo {
        repo: None,
        category,
        label,
        msg,
    }
}

fn r1(region: RegionInfo<'static>) -> RegionInfo<'static> {
    RegionInfo {
        repo: Some(1),
        ..region
    }
}

fn enter(region: RegionInfo<'static>) -> Trace2Event<'static> {
    Trace2Event::RegionEnter { region, nesting: 1 }
}

fn leave(region: RegionInfo<'static>) -> Trace2Event<'static> {
    Trace2Event::RegionLeave {
        region,
        nesting: 1,
        t_rel_us: 0,
    }
}

fn data(
    repo: Option<i64>,
    category: &'static str,
    key: &'static str,
    value: &'static str,
) -> Trace2Event<'static> {
    Trace2Event::Data {
        repo,
        category,
        key,
        value,
        nesting: 1,
        t_rel_us: 0,
    }
}

fn printf(msg: &'static str) -> Trace2Event<'static> {
    Trace2Event::Printf { msg: Some(msg) }
}

fn error(msg: &'static str) -> Trace2Event<'static> {
    Trace2Event::Error {
        msg: Some(msg),
        fmt: Some(msg),
    }
}

fn child(
    child_id: u64,
    class: &'static str,
    is_git: bool,
    argv: &'static [&'static str],
) -> ChildInfo<'static> {
    ChildInfo {
        child_id,
        class,
        hook_name: None,
        cd: None,
        use_shell: false,
        is_git,
        argv,
    }
}

fn child_exit(child_id: u64, pid: i64, code: i64) -> Trace2Event<'static> {
    Trace2Event::ChildExit {
        child_id,
        pid,
        code,
        elapsed_us: 0,
    }
}

fn def_repo(worktree: &'static str) -> Trace2Event<'static> {
    Trace2Event::DefRepo { repo: 1, worktree }
}

fn def_param(
    scope: &'static str,
    param: &'static str,
    value: &'static str,
) -> Trace2Event<'static> {
    Trace2Event::DefParam {
        scope,
        param,
        value: Some(value),
    }
}

/// The events of `git version`, behind `version.perf` and `version-brief.perf`.
fn git_version_events() -> [Trace2Event<'static>; 6] {
    [
        VERSION,
        Trace2Event::Start {
            argv: &["git", "version"],
        },
        ancestry(ANCESTRY),
        cmd_name("version", "version"),
        EXIT0,
        ATEXIT0,
    ]
}

#[test]
fn version_sample() {
    check_all(&sample("version.perf"), &git_version_events());
}

#[test]
fn version_brief_sample() {
    let lines = sample("version-brief.perf");
    assert!(lines.iter().all(|l| l.brief && l.raw.starts_with("d0 | ")));
    check_all(&lines, &git_version_events());
}

#[test]
fn parent_sid_sample_has_depth_two() {
    let lines = sample("parent-sid.perf");
    assert!(lines.iter().all(|l| l.depth == 2));
    check_all(
        &lines,
        &[
            VERSION,
            Trace2Event::Start {
                argv: &["git", "version"],
            },
            ancestry(ANCESTRY),
            cmd_name("version", "mytool/sub/version"),
            EXIT0,
            ATEXIT0,
        ],
    );
}

#[test]
fn ancestry_quoting_sample() {
    check_all(
        &sample("ancestry-quoting.perf"),
        &[
            VERSION,
            Trace2Event::Start {
                argv: &["git", "version"],
            },
            ancestry(&[
                "my proc (x)'q",
                "cap.sh",
                "bash",
                "bash",
                "bash",
                "memfd:sealed-91",
                "process_api",
            ]),
            cmd_name("version", "version"),
            EXIT0,
            ATEXIT0,
        ],
    );
}

#[test]
fn dst_badfd_sample_error_before_version() {
    check_all(
        &sample("dst-badfd.perf"),
        &[
            error("unable to write trace to 'GIT_TRACE2': Bad file descriptor"),
            VERSION,
            Trace2Event::Start {
                argv: &["git", "version"],
            },
            ancestry(&["bash", "bash", "bash", "memfd:sealed-91", "process_api"]),
            cmd_name("version", "version"),
            EXIT0,
            ATEXIT0,
        ],
    );
}

#[test]
fn tt_errors_sample_keeps_raw_newlines() {
    let lines = sample("tt-errors.perf");
    check_all(
        &lines,
        &[
            VERSION,
            Trace2Event::Start {
                argv: &[
                    "/tmp/gitsrc/t/helper/test-tool",
                    "trace2",
                    "003error",
                    "first error",
                    "second\nline",
                ],
            },
            ancestry(ANCESTRY),
            cmd_name("trace2", "trace2"),
            error("first error"),
            error("second\nline"),
            EXIT0,
            ATEXIT0,
        ],
    );
    // The records holding a LF span two physical lines.
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.raw.matches('\n').count() == 2)
            .count(),
        2
    );
}

#[test]
fn def_param_sample() {
    check_all(
        &sample("def-param.perf"),
        &[
            VERSION,
            Trace2Event::Start {
                argv: &[
                    "git",
                    "-c",
                    "color.ui=false",
                    "-c",
                    "remote.origin.url=https://carol:pw2@example.org/r",
                    "version",
                ],
            },
            ancestry(ANCESTRY),
            cmd_name("version", "version"),
            def_param("system", "color.ui", "never"),
            def_param("global", "color.ui", "always"),
            def_param("local", "color.ui", "auto"),
            def_param(
                "local",
                "remote.origin.url",
                "https://alice:<REDACTED>@example.com/repo.git",
            ),
            def_param("command", "color.ui", "false"),
            def_param(
                "command",
                "remote.origin.url",
                "https://carol:<REDACTED>@example.org/r",
            ),
            def_param("command", "GIT_HTTP_USER_AGENT", "agent/1.0"),
            def_param("command", "MY_VAR", "https://bob:<REDACTED>@host/x"),
            EXIT0,
            ATEXIT0,
        ],
    );
}

#[test]
fn alias_shell_sample() {
    check_all(
        &sample("alias-shell.perf"),
        &[
            VERSION,
            Trace2Event::Start {
                argv: &["git", "-c", "alias.x=!echo hi", "x", "arg1", "arg two"],
            },
            ancestry(ANCESTRY),
            cmd_name("_run_dashed_", "_run_dashed_"),
            Trace2Event::ChildStart(child(0, "dashed", false, &["git-x", "arg1", "arg two"])),
            child_exit(0, -1, -1),
            def_repo("/tmp/t2/repo"),
            Trace2Event::Alias {
                alias: "x",
                argv: &["echo hi", "arg1", "arg two"],
            },
            cmd_name("_run_shell_alias_", "_run_dashed_/_run_shell_alias_"),
            Trace2Event::ChildStart(ChildInfo {
                use_shell: true,
                ..child(1, "shell_alias", false, &["echo hi", "arg1", "arg two"])
            }),
            child_exit(1, 12054, 0),
            EXIT0,
            ATEXIT0,
        ],
    );
}

#[test]
fn exec_fail_sample() {
    check_all(
        &sample("exec-fail.perf"),
        &[
            VERSION,
            Trace2Event::Start {
                argv: &["/usr/local/bin/git", "notes", "show", "HEAD"],
            },
            ancestry(ANCESTRY),
            def_repo("/tmp/t2/repo"),
            cmd_name("notes", "notes"),
            Trace2Event::Exec {
                exec_id: 0,
                exe: Some("git"),
                argv: &["git", "show", "a941c2e33656b2444712059e9c8c4dbbf3acd958"],
            },
            Trace2Event::ExecResult {
                exec_id: 0,
                code: 2,
                err: Some("No such file or directory"),
            },
            Trace2Event::Exit { code: 1 },
            Trace2Event::Atexit { code: 1 },
        ],
    );
}

#[test]
fn tt_thread_timer_sample() {
    let th_timer = |total_ns, min_ns, max_ns| Trace2Event::Timer {
        per_thread: true,
        timer: TimerInfo {
            category: "test",
            name: "test2",
            intervals: 2,
            total_ns,
            min_ns,
            max_ns,
        },
    };
    check_all(
        &sample("tt-thread-timer.perf"),
        &[
            VERSION,
            Trace2Event::Start {
                argv: &[
                    "/tmp/gitsrc/t/helper/test-tool",
                    "trace2",
                    "101timer",
                    "2",
                    "10",
                    "3",
                ],
            },
            ancestry(ANCESTRY),
            cmd_name("trace2", "trace2"),
            Trace2Event::ThreadStart,
            Trace2Event::ThreadStart,
            Trace2Event::ThreadStart,
            // Nanosecond values chosen to exercise the rounding to microseconds.
            th_timer(20_249_501, 10_108_700, 10_142_499),
            Trace2Event::ThreadExit { elapsed_us: 0 },
            th_timer(20_473_000, 10_130_000, 10_343_000),
            Trace2Event::ThreadExit { elapsed_us: 0 },
            th_timer(20_204_000, 10_090_000, 10_114_000),
            Trace2Event::ThreadExit { elapsed_us: 0 },
            EXIT0,
            Trace2Event::Timer {
                per_thread: false,
                timer: TimerInfo {
                    category: "test",
                    name: "test2",
                    intervals: 6,
                    total_ns: 60_928_000,
                    min_ns: 10_090_000,
                    max_ns: 10_343_000,
                },
            },
            ATEXIT0,
        ],
    );
}

#[test]
fn tt_counter_sample() {
    check_all(
        &sample("tt-counter.perf"),
        &[
            VERSION,
            Trace2Event::Start {
                argv: &[
                    "/tmp/gitsrc/t/helper/test-tool",
                    "trace2",
                    "200counter",
                    "1",
                    "2",
                    "39",
                ],
            },
            ancestry(ANCESTRY),
            cmd_name("trace2", "trace2"),
            EXIT0,
            Trace2Event::Counter {
                per_thread: false,
                category: "test",
                name: "test1",
                value: 42,
            },
            ATEXIT0,
        ],
    );
}

#[test]
fn tt_spec_sample() {
    let mut lines = sample("tt-spec.perf");
    // The capture cut this location to its last 25 bytes; the record holds all of it.
    assert_eq!(lines[6].file.as_deref(), Some(".../for/testing/file.c"));
    lines[6].file = Some("a/very/long/directory/name/for/testing/file.c".to_string());
    assert_eq!(lines[8].file, None);

    let level: [RegionInfo<'static>; 5] = [
        region(Some("spec"), Some("level"), Some("depth=1")),
        region(Some("spec"), Some("level"), Some("depth=2")),
        region(Some("spec"), Some("level"), Some("depth=3")),
        region(Some("spec"), Some("level"), Some("depth=4")),
        region(Some("spec"), Some("level"), Some("depth=5")),
    ];
    let depth = |k: usize| data(None, "spec", "depth", ["1", "2", "3", "4", "5"][k]);
    let bare = region(None, None, None);
    let only_msg = region(Some("spec"), None, Some("only-msg"));
    let long_category = RegionInfo {
        repo: Some(0),
        ..region(
            Some("a-category-longer-than-twelve"),
            Some("long-category"),
            None,
        )
    };
    let in_thread = region(Some("spec"), Some("in-thread"), None);
    let thread_data = data(None, "spec", "thread-key", "thread-value");
    let misuse_enter = region(None, None, Some("thread-proc on main: main-misuse"));
    let misuse_leave = region(None, None, Some("thread-proc on main"));
    let json = r#"{"s":"str\"\\/\u0001","i":-7,"d":0.667,"d_default":1.500000,"b":true,"n":null,"arr":[1,"two"]}"#;
    check_all(
        &lines,
        &[
            VERSION,
            Trace2Event::Start {
                argv: &["/tmp/gitsrc/t/helper/test-tool", "trace2", "900spec"],
            },
            ancestry(ANCESTRY),
            cmd_name("trace2", "trace2"),
            Trace2Event::CmdMode { name: "spec-mode" },
            printf("hello printf 42"),
            printf("long file:line"),
            printf("28 char file:line"),
            printf("null file"),
            enter(level[0]),
            depth(0),
            enter(level[1]),
            depth(1),
            enter(level[2]),
            depth(2),
            enter(level[3]),
            depth(3),
            enter(level[4]),
            depth(4),
            printf("printf inside 5 regions"),
            leave(level[4]),
            leave(level[3]),
            leave(level[2]),
            leave(level[1]),
            leave(level[0]),
            enter(bare),
            leave(bare),
            enter(only_msg),
            leave(only_msg),
            enter(long_category),
            leave(long_category),
            Trace2Event::DataJson {
                repo: Some(0),
                category: "spec",
                key: "json",
                json,
                nesting: 1,
                t_rel_us: 0,
            },
            Trace2Event::ThreadStart,
            enter(in_thread),
            thread_data,
            leave(in_thread),
            Trace2Event::ThreadExit { elapsed_us: 0 },
            Trace2Event::ThreadStart,
            enter(in_thread),
            thread_data,
            leave(in_thread),
            Trace2Event::ThreadExit { elapsed_us: 0 },
            data(None, "spec", "no-thread-start", "x"),
            enter(misuse_enter),
            leave(misuse_leave),
            Trace2Event::ChildStart(ChildInfo {
                cd: Some("/tmp"),
                use_shell: true,
                ..child(0, "spec-class", false, &["echo child with 'quote'; exit 3"])
            }),
            child_exit(0, 15835, 3),
            Trace2Event::ChildStart(child(1, "?", true, &["version"])),
            VERSION,
            Trace2Event::Start {
                argv: &["/usr/local/bin/git", "version"],
            },
            ancestry(&[
                "test-tool",
                "cap.sh",
                "bash",
                "bash",
                "bash",
                "memfd:sealed-91",
                "process_api",
            ]),
            cmd_name("version", "trace2/version"),
            EXIT0,
            ATEXIT0,
            child_exit(1, 15836, 0),
            Trace2Event::ChildStart(child(2, "bg", false, &["sleep", "1"])),
            Trace2Event::ChildReady {
                child_id: 2,
                pid: 15837,
                ready: "ready",
                elapsed_us: 0,
            },
            enter(region(Some("spec"), Some("outer-open"), None)),
            enter(region(Some("spec"), Some("inner-open"), None)),
            EXIT0,
            ATEXIT0,
        ],
    );
}

#[test]
fn commit_sample() {
    let do_read = r1(region(
        Some("index"),
        Some("do_read_index"),
        Some(".git/index"),
    ));
    let read = r1(region(Some("cache_tree"), Some("read"), None));
    let refresh = region(Some("index"), Some("refresh"), None);
    let update = r1(region(Some("cache_tree"), Some("update"), None));
    let do_write = r1(region(
        Some("index"),
        Some("do_write_index"),
        Some("/tmp/t2/repo/.git/index.lock"),
    ));
    let write = r1(region(Some("cache_tree"), Some("write"), None));
    let hook_enter = region(Some("hook"), Some("pre-commit"), Some("max:1"));
    let hook_leave = region(Some("hook"), Some("pre-commit"), None);
    let unpack = r1(region(Some("unpack_trees"), Some("unpack_trees"), None));
    let traverse = r1(region(Some("unpack_trees"), Some("traverse_trees"), None));
    let setup = r1(region(Some("diff"), Some("setup"), None));
    let write_back = r1(region(Some("diff"), Some("write back to queue"), None));
    let detach = r1(region(Some("maintenance"), Some("detach"), None));
    let maintenance: &[&str] = &["maintenance", "run", "--auto", "--quiet", "--detach"];
    check_all(
        &sample("commit.perf"),
        &[
            VERSION,
            Trace2Event::Start {
                argv: &["git", "commit", "-q", "-m", "commit with hook"],
            },
            ancestry(ANCESTRY),
            def_repo("/tmp/t2/repo"),
            cmd_name("commit", "commit"),
            enter(do_read),
            enter(read),
            leave(read),
            data(Some(1), "index", "read/version", "2"),
            data(Some(1), "index", "read/cache_nr", "21"),
            leave(do_read),
            enter(refresh),
            data(None, "index", "refresh/sum_lstat", "21"),
            data(None, "index", "refresh/sum_scan", "0"),
            leave(refresh),
            enter(update),
            leave(update),
            enter(do_write),
            enter(write),
            leave(write),
            data(Some(1), "index", "write/version", "2"),
            data(Some(1), "index", "write/cache_nr", "21"),
            leave(do_write),
            enter(hook_enter),
            Trace2Event::ChildStart(ChildInfo {
                hook_name: Some("pre-commit"),
                ..child(0, "hook", false, &[".git/hooks/pre-commit"])
            }),
            VERSION,
            Trace2Event::Start {
                argv: &["git", "rev-parse", "--short", "HEAD"],
            },
            ancestry(&[
                "pre-commit",
                "git",
                "cap.sh",
                "bash",
                "bash",
                "bash",
                "memfd:sealed-91",
                "process_api",
            ]),
            cmd_name("rev-parse", "commit/rev-parse"),
            def_repo("/tmp/t2/repo"),
            EXIT0,
            ATEXIT0,
            child_exit(0, 11486, 0),
            leave(hook_leave),
            enter(unpack),
            enter(traverse),
            leave(traverse),
            leave(unpack),
            enter(setup),
            leave(setup),
            enter(write_back),
            leave(write_back),
            enter(do_read),
            enter(read),
            leave(read),
            data(Some(1), "index", "read/version", "2"),
            data(Some(1), "index", "read/cache_nr", "21"),
            leave(do_read),
            enter(update),
            leave(update),
            Trace2Event::ChildStart(child(1, "?", true, maintenance)),
            VERSION,
            Trace2Event::Start {
                argv: &[
                    "/usr/local/libexec/git-core/git",
                    "maintenance",
                    "run",
                    "--auto",
                    "--quiet",
                    "--detach",
                ],
            },
            ancestry(&[
                "git",
                "cap.sh",
                "bash",
                "bash",
                "bash",
                "memfd:sealed-91",
                "process_api",
            ]),
            def_repo("/tmp/t2/repo"),
            cmd_name("maintenance", "commit/maintenance"),
            enter(detach),
            EXIT0,
            ATEXIT0,
            leave(detach),
            EXIT0,
            ATEXIT0,
            child_exit(1, 11488, 0),
            EXIT0,
            Trace2Event::DataJson {
                repo: Some(1),
                category: "traverse_trees",
                key: "statistics",
                json: r#"{"traverse_trees_count":1,"traverse_trees_max_depth":1}"#,
                nesting: 1,
                t_rel_us: 0,
            },
            ATEXIT0,
        ],
    );
}

#[test]
fn redact_url_sample() {
    const URL: &str = "https://user:<REDACTED>@127.0.0.1:1/repo.git";
    let d2_ancestry: &[&str] = &[
        "git",
        "git",
        "cap.sh",
        "bash",
        "bash",
        "bash",
        "memfd:sealed-91",
        "process_api",
    ];
    check_all(
        &sample("redact-url.perf"),
        &[
            VERSION,
            Trace2Event::Start {
                argv: &[
                    "git",
                    "ls-remote",
                    URL,
                    "http://nopass@127.0.0.1/x",
                    "https://u:<REDACTED>@h",
                ],
            },
            ancestry(ANCESTRY),
            def_repo("/tmp/t2/repo"),
            cmd_name("ls-remote", "ls-remote"),
            Trace2Event::ChildStart(child(0, "remote-https", true, &["remote-https", URL, URL])),
            VERSION,
            Trace2Event::Start {
                argv: &["/usr/local/libexec/git-core/git", "remote-https", URL, URL],
            },
            ancestry(&[
                "git",
                "cap.sh",
                "bash",
                "bash",
                "bash",
                "memfd:sealed-91",
                "process_api",
            ]),
            cmd_name("_run_dashed_", "ls-remote/_run_dashed_"),
            Trace2Event::ChildStart(child(0, "dashed", false, &["git-remote-https", URL, URL])),
            VERSION,
            Trace2Event::Start {
                argv: &["/usr/local/libexec/git-core/git-remote-https", URL, URL],
            },
            ancestry(d2_ancestry),
            def_repo("/tmp/t2/repo"),
            cmd_name("remote-curl", "ls-remote/_run_dashed_/remote-curl"),
            error(
                "unable to access 'https://127.0.0.1:1/repo.git/': Failed to connect to 127.0.0.1 port 1 after 0 ms: Couldn't connect to server",
            ),
            Trace2Event::Exit { code: 128 },
            Trace2Event::Atexit { code: 128 },
            child_exit(0, 13199, 128),
            Trace2Event::Exit { code: 128 },
            Trace2Event::Atexit { code: 128 },
            Trace2Event::Exit { code: 128 },
            Trace2Event::Atexit { code: 128 },
        ],
    );
}

#[test]
fn signal_sigpipe_sample() {
    check_all(
        &sample("signal-sigpipe.perf"),
        &[
            VERSION,
            Trace2Event::Start {
                argv: &["git", "cat-file", "-p", "HEAD:big.txt"],
            },
            ancestry(&[
                "bash",
                "cap.sh",
                "bash",
                "bash",
                "bash",
                "memfd:sealed-91",
                "process_api",
            ]),
            def_repo("/tmp/t2/repo"),
            cmd_name("cat-file", "cat-file"),
            Trace2Event::Signal { signo: 13 },
        ],
    );
}

#[test]
fn ipc_daemon_long_file_names_keep_their_tail() {
    let lines = sample("ipc-daemon.perf");
    let mut accept = lines
        .iter()
        .find(|l| l.thread == "th01:ipc-accept")
        .unwrap()
        .clone();
    assert_eq!(accept.file.as_deref(), Some("...ipc/ipc-unix-socket.c"));
    accept.file = Some("compat/simple-ipc/ipc-unix-socket.c".to_string());
    check(&accept, Trace2Event::ThreadStart);
    let mut ready = lines
        .iter()
        .find(|l| l.raw.contains("child_ready"))
        .unwrap()
        .clone();
    ready.file = Some("run-command.c".to_string());
    check(
        &ready,
        Trace2Event::ChildReady {
            child_id: 0,
            pid: 16663,
            ready: "ready",
            elapsed_us: 0,
        },
    );
}

#[test]
fn local_time_uses_the_given_offset() {
    let lines = sample("version.perf");
    let line = &lines[0];
    // The capture was made in UTC; the same instant seen from UTC+05:30 and from
    // UTC-08:00 must print the captured time of day when the wall clock is moved back.
    for offset in [19_800, -28_800] {
        let mut shifted = line.clone();
        shifted.wall_us -= i64::from(offset) * 1_000_000;
        let format = PerfFormat::new().with_utc_offset(offset);
        assert_eq!(format.utc_offset(), offset);
        assert_eq!(render(&format, &record(&shifted, VERSION)), line.raw);
        assert_ne!(
            render(&PerfFormat::new(), &record(&shifted, VERSION)),
            line.raw
        );
    }
}

#[test]
fn brief_drops_time_and_file_line() {
    // Every full capture line, rendered brief, is the same line from the `d` on.
    let format = PerfFormat::new().with_brief(true);
    assert!(format.is_brief() && !PerfFormat::new().is_brief());
    for line in sample("version.perf")
        .iter()
        .chain(&sample("exec-fail.perf")[..5])
    {
        let event = match line.raw.split(" | ").nth(3).unwrap().trim_end() {
            "version" => VERSION,
            "start" if line.depth == 0 && line.raw.contains("notes") => Trace2Event::Start {
                argv: &["/usr/local/bin/git", "notes", "show", "HEAD"],
            },
            "start" => Trace2Event::Start {
                argv: &["git", "version"],
            },
            "cmd_ancestry" => ancestry(ANCESTRY),
            "cmd_name" if line.raw.contains("notes") => cmd_name("notes", "notes"),
            "cmd_name" => cmd_name("version", "version"),
            "def_repo" => def_repo("/tmp/t2/repo"),
            "exit" => EXIT0,
            "atexit" => ATEXIT0,
            other => panic!("unexpected {other}"),
        };
        assert_eq!(render(&format, &record(line, event)), line.raw[47..]);
    }
}

#[test]
fn empty_file_name_is_no_file() {
    let lines = sample("tt-spec.perf");
    let mut null_file = lines[8].clone();
    assert_eq!(null_file.file, None);
    null_file.file = Some(String::new());
    null_file.line = 42;
    check(&null_file, printf("null file"));
}

#[test]
fn exactly_28_bytes_is_not_cut_but_29_is() {
    let lines = sample("tt-spec.perf");
    let mut exact = lines[7].clone();
    assert_eq!(exact.file.as_deref(), Some("exactly/28chars/file.c"));
    // One more digit in the line number pushes the location over the width: the
    // column then keeps `...` and the last 25 bytes, as in `ipc-daemon.perf`.
    exact.line = 123_456;
    let out = render(
        &PerfFormat::new(),
        &record(&exact, printf("28 char file:line")),
    );
    let expected = lines[7].raw.replace(
        "exactly/28chars/file.c:12345",
        "...tly/28chars/file.c:123456",
    );
    assert_eq!(out, expected);
}

#[test]
fn too_many_files_writes_nothing() {
    let lines = sample("version.perf");
    let mut out = b"kept".to_vec();
    PerfFormat::new().format(&record(&lines[0], Trace2Event::TooManyFiles), &mut out);
    assert_eq!(out, b"kept");
}

#[test]
fn appends_after_what_is_already_in_the_buffer() {
    let lines = sample("version.perf");
    let format = PerfFormat::new();
    let mut out = Vec::new();
    format.format(&record(&lines[0], VERSION), &mut out);
    format.format(&record(&lines[4], EXIT0), &mut out);
    assert_eq!(
        out,
        [lines[0].raw.as_bytes(), lines[4].raw.as_bytes()].concat()
    );
}

#[test]
fn a_message_ending_the_line_gets_no_second_lf() {
    let lines = sample("tt-spec.perf");
    check(&lines[5], printf("hello printf 42\n"));
    let errors = sample("tt-errors.perf");
    check(&errors[5], error("second\nline\n"));
}

#[test]
fn missing_messages_leave_an_empty_payload() {
    // thread_start lines show what an empty payload looks like: the line ends in `| `.
    let lines = sample("tt-spec.perf");
    let thread_start = &lines[32];
    assert!(thread_start.raw.ends_with("|              | \n"));
    let line = |event| render(&PerfFormat::new(), &record(thread_start, event));
    let printf_none = line(Trace2Event::Printf { msg: None });
    let error_none = line(Trace2Event::Error {
        msg: None,
        fmt: None,
    });
    let expected = |name: &str| thread_start.raw.replace("thread_start", name);
    assert_eq!(printf_none, expected("printf      "));
    assert_eq!(
        error_none,
        expected("error       ").replace(" 0.000850", "         ")
    );
}

#[test]
fn exec_result_err_only_for_positive_codes() {
    let lines = sample("exec-fail.perf");
    let line = &lines[6];
    check(
        line,
        Trace2Event::ExecResult {
            exec_id: 0,
            code: 2,
            err: Some("No such file or directory"),
        },
    );
    let render_code = |code, err| {
        render(
            &PerfFormat::new(),
            &record(
                line,
                Trace2Event::ExecResult {
                    exec_id: 0,
                    code,
                    err,
                },
            ),
        )
    };
    let without_err = line.raw.replace(" err:No such file or directory", "");
    assert_eq!(render_code(2, None), without_err);
    assert_eq!(
        render_code(0, Some("Success")),
        without_err.replace("code:2", "code:0")
    );
    assert_eq!(
        render_code(-1, Some("x")),
        without_err.replace("code:2", "code:-1")
    );
}

#[test]
fn exec_without_exe_or_arguments() {
    let lines = sample("exec-fail.perf");
    let line = &lines[5];
    let render_exec = |exe, argv| {
        render(
            &PerfFormat::new(),
            &record(
                line,
                Trace2Event::Exec {
                    exec_id: 0,
                    exe,
                    argv,
                },
            ),
        )
    };
    let args: &[&str] = &["git", "show", "a941c2e33656b2444712059e9c8c4dbbf3acd958"];
    assert_eq!(
        render_exec(None, args),
        line.raw.replace("[git git ", "[git ")
    );
    let tail = " git show a941c2e33656b2444712059e9c8c4dbbf3acd958]";
    assert_eq!(render_exec(Some("git"), &[]), line.raw.replace(tail, "]"));
}

#[test]
fn git_child_without_arguments_shows_just_git() {
    let lines = sample("tt-spec.perf");
    let line = &lines[47];
    check(
        line,
        Trace2Event::ChildStart(child(1, "?", true, &["version"])),
    );
    let out = render(
        &PerfFormat::new(),
        &record(line, Trace2Event::ChildStart(child(1, "?", true, &[]))),
    );
    assert_eq!(out, line.raw.replace("[git version]", "[git]"));
}

#[test]
fn def_param_without_value_shows_the_name_only() {
    // git 2.47.3 crashes on this case; newer git drops `:<value>` (spec 13.1).
    let lines = sample("def-param.perf");
    let line = &lines[4];
    let event = Trace2Event::DefParam {
        scope: "system",
        param: "color.ui",
        value: None,
    };
    assert_eq!(
        render(&PerfFormat::new(), &record(line, event)),
        line.raw.replace("color.ui:never", "color.ui")
    );
}

#[test]
fn wide_repo_ids_and_depths_shift_the_columns() {
    let lines = sample("commit.perf");
    let line = &lines[3];
    assert!(line.raw.contains("| d0 |") && line.raw.contains("| r1  |"));
    let mut deep = line.clone();
    deep.depth = 10;
    let out = render(
        &PerfFormat::new(),
        &record(
            &deep,
            Trace2Event::DefRepo {
                repo: 10,
                worktree: "/tmp/t2/repo",
            },
        ),
    );
    assert_eq!(
        out,
        line.raw
            .replace("| d0 |", "| d10 |")
            .replace("| r1  |", "| r10  |")
    );
}

/// A record claiming an absurd number of open regions (a damaged recording replayed;
/// found by the `perf_normal_format` fuzz target) gets a bounded indentation.
#[test]
fn indentation_is_capped() {
    let mut line = sample("commit.perf")[3].clone();
    line.dots = u32::MAX;
    let out = render(
        &PerfFormat::new(),
        &record(&line, Trace2Event::Printf { msg: Some("x") }),
    );
    let dots = out.bytes().filter(|&b| b == b'.').count();
    assert!(
        dots <= 2 * super::MAX_INDENT_REGIONS as usize + 16,
        "{dots}"
    );
    assert!(out.ends_with("x\n"));
}
