//! `trace2 compare --html`: one self-contained page (inline SVG and CSS, no script, nothing
//! fetched) with, per command, the region tree with each region coloured by its verdict, and
//! the base and new distributions of the groups that changed, then the table of the text
//! output. Every text from a trace is escaped for HTML.

use std::fmt::Write as _;

use super::{CommandComparison, Comparison, GroupComparison, GroupKind, Verdict};
use crate::time::human;

/// Colours: slower red, faster green, no change grey, too few runs amber; base blue, new orange.
const SLOWER: &str = "#d7301f";
const FASTER: &str = "#1a9850";
const UNCHANGED: &str = "#c8c8c8";
const TOO_FEW: &str = "#f0b429";
const BASE: &str = "#3b6fb6";
const NEW: &str = "#f26b21";

const WIDTH: f64 = 1100.0;
const ROW: f64 = 22.0;

fn colour(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Slower | Verdict::Higher | Verdict::OnlyInNew => SLOWER,
        Verdict::Faster | Verdict::Lower | Verdict::OnlyInBase => FASTER,
        Verdict::TooFewRuns => TOO_FEW,
        Verdict::NoChange => UNCHANGED,
    }
}

/// `text` escaped for HTML text and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

fn signed_time(v: f64) -> String {
    let sign = if v < 0.0 { "-" } else { "+" };
    format!("{sign}{}", human(v.abs().round() as i64))
}

fn change_text(group: &GroupComparison) -> String {
    match &group.change {
        Some(c) if group.kind.is_time() => format!(
            "{} [{}, {}]",
            signed_time(c.shift),
            signed_time(c.low),
            signed_time(c.high)
        ),
        Some(c) => format!("{:+} [{:+}, {:+}]", c.shift, c.low, c.high),
        None => String::new(),
    }
}

fn median(stats: &Option<super::GroupStats>) -> f64 {
    stats.as_ref().map_or(0.0, |s| s.total.median)
}

/// The region tree: one bar per region, indented by depth, as long as its larger median total
/// against the process's, coloured by its verdict.
fn tree(out: &mut String, command: &CommandComparison) {
    let process = command.groups.iter().find(|g| g.kind == GroupKind::Process);
    let mut regions: Vec<(Vec<&str>, &GroupComparison)> = command
        .groups
        .iter()
        .filter(|g| g.kind == GroupKind::Region)
        .map(|g| (g.name.split(" / ").collect(), g))
        .collect();
    regions.sort_by(|a, b| a.0.cmp(&b.0));
    let mut rows: Vec<(usize, String, &GroupComparison)> = Vec::new();
    if let Some(process) = process {
        rows.push((0, "(process)".to_owned(), process));
    }
    for (path, group) in &regions {
        rows.push((
            path.len(),
            path.last().copied().unwrap_or("").to_owned(),
            group,
        ));
    }
    let scale = rows
        .iter()
        .map(|(_, _, g)| median(&g.base).max(median(&g.new)))
        .fold(1.0f64, f64::max);
    let height = ROW * rows.len() as f64 + 8.0;
    let (bars_x, bars_width) = (430.0, 400.0);
    let _ = writeln!(
        out,
        r#"<svg class="tree" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="region tree">"#
    );
    for (i, (depth, label, group)) in rows.iter().enumerate() {
        let y = 4.0 + ROW * i as f64;
        let length = median(&group.base).max(median(&group.new)) / scale * bars_width;
        let indent = 14.0 * *depth as f64;
        let title = format!(
            "{}: {} (base median {}, new median {}) {}",
            group.name,
            group.verdict.name(),
            human(median(&group.base).round() as i64),
            human(median(&group.new).round() as i64),
            change_text(group)
        );
        let _ = writeln!(
            out,
            r#"<g><title>{}</title><text x="{}" y="{}" class="label">{}</text><rect x="{bars_x}" y="{}" width="{:.1}" height="{}" fill="{}" stroke="dimgray" stroke-width="0.5"/><text x="{}" y="{}" class="change">{} {}</text></g>"#,
            escape(&title),
            6.0 + indent,
            y + 15.0,
            escape(&crate::process::shorten(label, 60 - depth * 2)),
            y + 3.0,
            length.max(1.0),
            ROW - 6.0,
            colour(group.verdict),
            bars_x + bars_width + 8.0,
            y + 15.0,
            escape(group.verdict.name()),
            escape(&change_text(group)),
        );
    }
    out.push_str("</svg>\n");
}

/// Base and new samples of each changed time group, as dots on one axis with their medians.
fn distributions(out: &mut String, command: &CommandComparison) {
    let changed: Vec<&GroupComparison> = command
        .groups
        .iter()
        .filter(|g| g.kind.is_time() && g.verdict.changed())
        .collect();
    if changed.is_empty() {
        out.push_str("<p class=\"none\">No group changed at the stated level.</p>\n");
        return;
    }
    let (plot_x, plot_width, band) = (330.0, 720.0, 46.0);
    let height = band * changed.len() as f64 + 30.0;
    let _ = writeln!(
        out,
        r#"<svg class="dist" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="distributions">"#
    );
    for (i, group) in changed.iter().enumerate() {
        let top = 8.0 + band * i as f64;
        let (base, new) = &group.samples;
        // The axis starts at the smallest run (not at 0: a shift of a few per cent must show)
        // and ends where the runs stop being outliers: a few runs 100 times slower would
        // squeeze the rest into a dot. Those beyond are drawn at the end, as open circles.
        let min = base.iter().chain(new).copied().min().unwrap_or(0) as f64;
        let max = base.iter().chain(new).copied().max().unwrap_or(0) as f64;
        let fence = |samples: &[i64]| match (
            super::rank::quantile(samples, 0.1),
            super::rank::quantile(samples, 0.9),
        ) {
            (Some(p10), Some(p90)) => p90 + 2.0 * (p90 - p10),
            _ => min,
        };
        let max = max.min(fence(base).max(fence(new)));
        let span = (max - min).max(1.0);
        let x_of = |v: f64| plot_x + (v.min(max) - min) / span * plot_width;
        let label = match group.kind {
            GroupKind::Process => "(process)".to_owned(),
            _ => crate::process::shorten(&group.name, 48),
        };
        let _ = writeln!(
            out,
            r#"<text x="6" y="{}" class="label">{}</text><text x="6" y="{}" class="change">{} {}</text><line x1="{plot_x}" x2="{}" y1="{}" y2="{}" stroke="darkgray"/><text x="{plot_x}" y="{}" class="axis">{}</text><text x="{}" y="{}" class="axis" text-anchor="end">{}</text>"#,
            top + 14.0,
            escape(&label),
            top + 30.0,
            escape(group.verdict.name()),
            escape(&change_text(group)),
            plot_x + plot_width,
            top + 36.0,
            top + 36.0,
            top + 46.0,
            escape(&human(min as i64)),
            plot_x + plot_width,
            top + 46.0,
            escape(&human(max as i64)),
        );
        for (samples, y, fill) in [(base, top + 10.0, BASE), (new, top + 26.0, NEW)] {
            for (j, &v) in samples.iter().enumerate() {
                // A little vertical jitter (by index, so the page is the same every time).
                let jitter = (j * 3 % 5) as f64 * 1.6 - 3.2;
                let beyond = v as f64 > max;
                let _ = write!(
                    out,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}" stroke="{fill}"/>"#,
                    x_of(v as f64) + if beyond { 8.0 } else { 0.0 },
                    y + jitter,
                    if beyond { "white" } else { fill },
                );
            }
            if let Some(m) = super::rank::quantile(samples, 0.5) {
                let x = x_of(m);
                let _ = write!(
                    out,
                    r#"<line x1="{x:.1}" x2="{x:.1}" y1="{}" y2="{}" stroke="black" stroke-width="2"/>"#,
                    y - 8.0,
                    y + 8.0
                );
            }
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        r#"<text x="{plot_x}" y="{}" class="axis"><tspan fill="{BASE}">● base</tspan>  <tspan fill="{NEW}">● new</tspan>  (bars: medians; open circles: runs beyond the axis's end)</text>"#,
        height - 6.0
    );
    out.push_str("</svg>\n");
}

fn table(out: &mut String, command: &CommandComparison) {
    out.push_str(
        "<table><tr><th>verdict</th><th>group</th><th>base median</th><th>new median</th>\
         <th>change [interval]</th><th>share</th></tr>\n",
    );
    for group in &command.groups {
        let value = |stats: &Option<super::GroupStats>| match stats {
            Some(s) if group.kind.is_time() => human(s.total.median.round() as i64),
            Some(s) => format!("{}", s.total.median),
            None => "-".to_owned(),
        };
        let name = match group.kind {
            GroupKind::Process => "(process)".to_owned(),
            kind => format!("{} {}", kind.name(), group.name),
        };
        let share = group
            .change
            .as_ref()
            .and_then(|c| c.share)
            .map_or(String::new(), super::text::percent);
        let _ = writeln!(
            out,
            r#"<tr><td><span class="swatch" style="background:{}"></span>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>"#,
            colour(group.verdict),
            escape(group.verdict.name()),
            escape(&name),
            escape(&value(&group.base)),
            escape(&value(&group.new)),
            escape(&change_text(group)),
            escape(&share),
        );
    }
    out.push_str("</table>\n");
}

/// The page.
pub fn render(comparison: &Comparison) -> String {
    let mut out = String::new();
    out.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>trace2 compare</title>\n<style>\
         body{font:14px system-ui,sans-serif;margin:16px;color:#222;background:#fff}\
         h2{font-size:17px;margin:28px 0 6px}svg{display:block;margin:6px 0}\
         .label{font:12px monospace;fill:#222}.change{font:11px sans-serif;fill:#444}\
         .axis{font:11px sans-serif;fill:#666}.none{color:#666}\
         table{border-collapse:collapse;font-size:12px}td,th{padding:2px 8px;text-align:left;\
         border-bottom:1px solid #eee}.swatch{display:inline-block;width:10px;height:10px;\
         margin-right:6px}.legend span{margin-right:14px}\
         </style></head><body>\n<h1>trace2 compare</h1>\n",
    );
    let _ = writeln!(
        out,
        "<p>Mann–Whitney U test; change = Hodges–Lehmann shift of the total per run (new − base) \
         with its {} interval; false-positive rate {} across all {} groups (Holm).</p>",
        super::text::rate(comparison.level),
        super::text::rate(comparison.alpha),
        comparison.groups_tested
    );
    let _ = writeln!(
        out,
        r#"<p class="legend"><span><span class="swatch" style="background:{SLOWER}"></span>slower</span><span><span class="swatch" style="background:{FASTER}"></span>faster</span><span><span class="swatch" style="background:{UNCHANGED}"></span>no change</span><span><span class="swatch" style="background:{TOO_FEW}"></span>too few runs</span></p>"#
    );
    for command in &comparison.commands {
        let runs = |r: &super::Runs| {
            let mut text = format!("{} runs", r.ended);
            if r.killed + r.snapshots + r.unfinished > 0 {
                let _ = write!(
                    text,
                    " (+{} killed, {} flight snapshots, {} unfinished: not in the figures)",
                    r.killed, r.snapshots, r.unfinished
                );
            }
            text
        };
        let _ = writeln!(
            out,
            "<section><h2>{}</h2><p>base {}, new {}</p>",
            escape(&command.command),
            runs(&command.base_runs),
            runs(&command.new_runs)
        );
        tree(&mut out, command);
        distributions(&mut out, command);
        table(&mut out, command);
        out.push_str("</section>\n");
    }
    out.push_str("</body></html>\n");
    out
}
