//! Helpers shared by the integration tests. This file: where git's captures live, how a
//! stream splits into records, and masking of the values that must differ between two
//! runs (times, elapsed numbers, timer values, file:line, session ids, pids), so that
//! everything else is compared exactly. [`runner`] runs the tests of a binary without
//! libtest; [`process`] starts child processes; [`receiver`] stands in for the
//! OpenTelemetry trace2receiver (an `af_unix` listener and its rules).
//!
//! Each test binary compiles all of it and uses a part, hence the `dead_code` allowance.

#![allow(dead_code)]

pub mod process;
pub mod receiver;
pub mod runner;

use std::path::PathBuf;

/// The folder of git 2.47.3's captures (`shared/` beside the repository), or the one
/// `TRACE2_SAMPLES` names.
pub fn samples_dir() -> PathBuf {
    match std::env::var_os("TRACE2_SAMPLES") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/spec/samples"),
    }
}

/// A capture's text; invalid UTF-8 becomes U+FFFD, as it does in our inputs.
pub fn sample(name: &str) -> String {
    let path = samples_dir().join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Replaces the value of each `"key":` in a compact JSON line with `*`.
pub fn mask_json(line: &str, keys: &[&str]) -> String {
    let mut out = line.to_owned();
    for key in keys {
        let pattern = format!("\"{key}\":");
        let mut from = 0;
        while let Some(pos) = out[from..].find(&pattern) {
            let start = from + pos + pattern.len();
            let end = value_end(&out, start);
            out.replace_range(start..end, "*");
            from = start + 1;
        }
    }
    out
}

fn value_end(s: &str, start: usize) -> usize {
    let bytes = s.as_bytes();
    let (mut depth, mut in_string, mut i) = (0usize, false, start);
    while i < bytes.len() {
        match (in_string, bytes[i]) {
            (true, b'\\') => i += 1,
            (true, b'"') => {
                in_string = false;
                if depth == 0 {
                    return i + 1;
                }
            }
            (false, b'"') => in_string = true,
            (false, b'[' | b'{') => depth += 1,
            (false, b']' | b'}') if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            (false, b',' | b'}' | b']') if depth == 0 => return i,
            _ => {}
        }
        i += 1;
    }
    bytes.len()
}

/// The keys whose values differ from run to run in an Event line.
pub const EVENT_VOLATILE: &[&str] = &["time", "sid", "file", "line", "t_abs", "t_rel", "pid"];

/// An Event line with its volatile values masked.
pub fn mask_event(line: &str) -> String {
    mask_json(line, EVENT_VOLATILE)
}

/// Replaces the digits after each `marker` (e.g. `pid:`) with `*`.
pub fn mask_after(line: &str, marker: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(pos) = rest.find(marker) {
        out.push_str(&rest[..pos + marker.len()]);
        rest = &rest[pos + marker.len()..];
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
            .unwrap_or(rest.len());
        if end > 0 {
            out.push('*');
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// A Perf line with time, file:line, t_abs/t_rel (when present) and pids masked; the
/// column layout (widths, blanks, dots) is kept so it is compared exactly.
pub fn mask_perf(line: &str, brief: bool) -> String {
    let mut cols: Vec<String> = line.split(" | ").map(str::to_owned).collect();
    let first_data = if brief {
        0
    } else {
        // "HH:MM:SS.ffffff <file:line 28>" is the first column.
        let head = &cols[0];
        assert!(head.len() == 44, "perf prefix width: {line:?}");
        cols[0] = format!(
            "<time> <{}>",
            if head[16..].trim().is_empty() {
                ""
            } else {
                "file"
            }
        );
        1
    };
    // d, thread, event, repo, t_abs, t_rel, category, payload
    for idx in [first_data + 4, first_data + 5] {
        if let Some(col) = cols.get_mut(idx) {
            assert_eq!(col.len(), 9, "perf time column width: {line:?}");
            if !col.trim().is_empty() {
                *col = "*********".to_owned();
            }
        }
    }
    mask_after(&cols.join(" | "), "pid:")
}

/// A Normal line with its time and file:line masked (the payload must start at byte
/// 50, or right after a file:line too long for that); elapsed values and pids masked.
pub fn mask_normal(line: &str, brief: bool) -> String {
    let payload = if brief {
        line
    } else {
        assert!(
            line.len() >= 16 && line.as_bytes()[15] == b' ',
            "normal prefix: {line:?}"
        );
        let after_time = &line[16..];
        let token_end = if after_time.starts_with(' ') {
            0
        } else {
            after_time.find(' ').map_or(after_time.len(), |p| p + 1)
        };
        if 16 + token_end < 50 {
            assert!(
                line.len() >= 50 && line[16 + token_end..50].bytes().all(|b| b == b' '),
                "normal padding: {line:?}"
            );
            &line[50..]
        } else {
            &line[16 + token_end..]
        }
    };
    mask_after(&mask_after(payload, "elapsed:"), "pid:")
}

/// Masks the values of a timer line (`total:`, `min:`, `max:`) in a Normal or Perf
/// line, used after [`mask_normal`] or [`mask_perf`].
pub fn mask_timer_values(line: &str) -> String {
    ["total:", "min:", "max:"]
        .iter()
        .fold(line.to_owned(), |l, m| mask_after(&l, m))
}

/// The physical lines of a stream, each record kept whole when a message spans lines
/// (a Normal/Perf record starts with a time of day, or with `d<N> |` in brief Perf).
pub fn records(text: &str, starts: impl Fn(&str) -> bool) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.split_inclusive('\n') {
        match out.last_mut() {
            Some(last) if !starts(line) => last.push_str(line),
            _ => out.push(line.to_owned()),
        }
    }
    out.into_iter()
        .map(|r| r.trim_end_matches('\n').to_owned())
        .collect()
}

/// Whether `line` starts with `HH:MM:SS.` (a Normal or Perf record in full mode).
pub fn starts_with_time(line: &str) -> bool {
    let b = line.as_bytes();
    b.len() > 9
        && b[2] == b':'
        && b[5] == b':'
        && b[8] == b'.'
        && [0, 1, 3, 4, 6, 7].iter().all(|&i| b[i].is_ascii_digit())
}

/// Event lines, parsed; panics on a line that is not JSON.
pub fn json_lines<'a>(lines: impl IntoIterator<Item = &'a str>) -> Vec<serde_json::Value> {
    lines
        .into_iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Where two sequences of masked lines first differ (or differ in length), told for a
/// failure message; `None` if they are the same.
pub fn first_difference(ours: &[String], theirs: &[String]) -> Option<String> {
    for (i, (a, b)) in ours.iter().zip(theirs).enumerate() {
        if a != b {
            return Some(format!("line {}:\n    ours: {a}\n    git:  {b}", i + 1));
        }
    }
    (ours.len() != theirs.len()).then(|| {
        format!(
            "{} lines from us, {} from git; first extra: {:?}",
            ours.len(),
            theirs.len(),
            ours.get(theirs.len()).or(theirs.get(ours.len()))
        )
    })
}
