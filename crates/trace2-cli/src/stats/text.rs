//! `trace2 stats` and `trace2 compare` as text for people: one small aligned table per
//! command. Every text from a trace goes through [`visible`] (a region label may hold
//! terminal escapes).

use std::fmt::Write as _;

use super::{Comparison, Distribution, GroupKind, Runs, Stats};
use crate::time::human;
use crate::visible::visible;

/// A value of a group: a duration for time groups, a number for counters.
fn value(kind: GroupKind, v: f64) -> String {
    if kind.is_time() {
        human(v.round() as i64)
    } else if v.fract() == 0.0 {
        format!("{v}")
    } else {
        format!("{v:.1}")
    }
}

/// A rate or level as a percentage with as many decimals as it needs: `95 %`, `99.9 %`,
/// `0.1 %`.
pub fn rate(value: f64) -> String {
    let percent = value * 100.0;
    let mut text = format!("{percent:.4}");
    while text.ends_with('0') {
        text.pop();
    }
    if text.ends_with('.') {
        text.pop();
    }
    format!("{text} %")
}

/// A share as a whole percentage; a share that rounds to 0 shows as `0 %`, never `-0 %`.
pub fn percent(share: f64) -> String {
    let rounded = (share * 100.0).round();
    format!("{} %", if rounded == 0.0 { 0.0 } else { rounded })
}

/// A signed change: `+1.20 ms`, `−350 µs`, `+0`.
fn signed(kind: GroupKind, v: f64) -> String {
    let sign = if v < 0.0 { "-" } else { "+" };
    format!("{sign}{}", value(kind, v.abs()))
}

fn runs_note(runs: &Runs) -> String {
    let mut note = format!(
        "{} run{}",
        runs.ended,
        if runs.ended == 1 { "" } else { "s" }
    );
    let mut left_out = Vec::new();
    if runs.killed > 0 {
        left_out.push(format!("{} killed", runs.killed));
    }
    if runs.snapshots > 0 {
        left_out.push(format!(
            "{} flight snapshot{}",
            runs.snapshots,
            if runs.snapshots == 1 { "" } else { "s" }
        ));
    }
    if runs.unfinished > 0 {
        left_out.push(format!("{} unfinished", runs.unfinished));
    }
    if !left_out.is_empty() {
        let _ = write!(note, " (+{}, not in the figures)", left_out.join(", "));
    }
    note
}

fn group_label(kind: GroupKind, name: &str) -> String {
    match kind {
        GroupKind::Process => "(process)".to_owned(),
        _ => format!("{} {}", kind.name(), visible(name)),
    }
}

/// Writes rows as columns padded to their widest cell; the first `left` columns align left.
fn table(out: &mut String, rows: &[Vec<String>], left: usize) {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let mut line = String::from(" ");
        for (c, cell) in row.iter().enumerate() {
            let pad = widths[c] - cell.chars().count();
            line.push_str("  ");
            if c < left {
                line.push_str(cell);
                line.extend(std::iter::repeat_n(' ', pad));
            } else {
                line.extend(std::iter::repeat_n(' ', pad));
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

fn spread(kind: GroupKind, d: &Distribution) -> String {
    format!("{}–{}", value(kind, d.p10), value(kind, d.p90))
}

/// `trace2 stats` as text.
pub fn render_stats(stats: &Stats) -> String {
    let mut out = String::new();
    if stats.commands.is_empty() {
        out.push_str("no processes\n");
        return out;
    }
    for command in &stats.commands {
        let _ = writeln!(
            out,
            "{}  {}",
            visible(&command.command),
            runs_note(&command.runs)
        );
        let mut rows = vec![vec![
            "group".to_owned(),
            "runs with it".to_owned(),
            "median".to_owned(),
            "p10–p90".to_owned(),
            "min–max".to_owned(),
            "self median".to_owned(),
            "self p10–p90".to_owned(),
        ]];
        for group in &command.groups {
            let (kind, s) = (group.kind, &group.stats);
            rows.push(vec![
                group_label(kind, &group.name),
                format!("{}/{}", s.present, s.runs),
                value(kind, s.total.median),
                spread(kind, &s.total),
                format!(
                    "{}–{}",
                    value(kind, s.total.min as f64),
                    value(kind, s.total.max as f64)
                ),
                value(kind, s.self_time.median),
                spread(kind, &s.self_time),
            ]);
        }
        table(&mut out, &rows, 1);
        out.push('\n');
    }
    out
}

/// `trace2 compare` as text.
pub fn render_comparison(comparison: &Comparison) -> String {
    let mut out = String::new();
    if comparison.commands.is_empty() {
        out.push_str("no processes\n");
        return out;
    }
    let level = rate(comparison.level);
    for command in &comparison.commands {
        let _ = writeln!(
            out,
            "{}  base {}, new {}",
            visible(&command.command),
            runs_note(&command.base_runs),
            runs_note(&command.new_runs)
        );
        let mut rows = vec![vec![
            "verdict".to_owned(),
            "group".to_owned(),
            "base median".to_owned(),
            "new median".to_owned(),
            format!("change [{level} interval]"),
            "relative".to_owned(),
            "share".to_owned(),
        ]];
        for group in &command.groups {
            let kind = group.kind;
            let median = |s: &Option<super::GroupStats>| {
                s.as_ref()
                    .map_or("-".to_owned(), |s| value(kind, s.total.median))
            };
            let (change, relative, share) = match &group.change {
                Some(c) => (
                    format!(
                        "{} [{}, {}]",
                        signed(kind, c.shift),
                        signed(kind, c.low),
                        signed(kind, c.high)
                    ),
                    c.relative
                        .map_or(String::new(), |r| format!("{:+.1} %", r * 100.0)),
                    c.share.map_or(String::new(), super::text::percent),
                ),
                None => Default::default(),
            };
            rows.push(vec![
                group.verdict.name().to_owned(),
                group_label(kind, &group.name),
                median(&group.base),
                median(&group.new),
                change,
                relative,
                share,
            ]);
        }
        table(&mut out, &rows, 2);
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "Mann–Whitney U test; change = Hodges–Lehmann shift of the total per run, new − base, \
         with its {level} interval; false-positive rate {} across all {} groups (Holm); \
         share = part of the command's elapsed-time change.",
        rate(comparison.alpha),
        comparison.groups_tested
    );
    out
}
