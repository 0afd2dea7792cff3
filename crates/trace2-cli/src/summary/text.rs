//! The summary as text for people: the process tree first (one line per process), then for each
//! process its top regions, children, timers and counters in small aligned tables.

use std::borrow::Cow;
use std::fmt::Write as _;

use super::{ProcessSummary, RegionSummary, Summary};
use std::collections::HashMap;

use crate::process::{command_line, own_sid, program_name, shorten};
use crate::time::human;
use crate::visible::visible;

/// Width of a command line in the tree.
const COMMAND_WIDTH: usize = 60;

/// Renders `summary`, with at most `top` rows per region table. Every text from the trace is
/// shown with its control characters made visible (module `visible`).
pub fn render_text(summary: &Summary, top: usize) -> String {
    // Copied only when some text needs it: most traces hold no control character.
    let shown;
    let summary = if has_hidden(summary) {
        shown = visible_summary(summary);
        &shown
    } else {
        summary
    };
    let mut out = String::new();
    let processes = &summary.processes;
    if processes.is_empty() {
        out.push_str("no processes\n");
        return out;
    }
    let trees = processes.iter().filter(|p| p.depth == 0).count();
    let _ = writeln!(
        out,
        "{} process{} in {} tree{}\n",
        processes.len(),
        plural(processes.len(), "es"),
        trees,
        plural(trees, "s")
    );
    tree(&mut out, processes);
    let names: HashMap<&str, &ProcessSummary> =
        processes.iter().map(|p| (p.sid.as_str(), p)).collect();
    for process in processes {
        out.push('\n');
        details(&mut out, process, top, &names);
    }
    out
}

/// True when a text of `summary` holds a character that [`visible`] would escape (the same texts
/// as [`visible_summary`] goes through).
pub(super) fn has_hidden(summary: &Summary) -> bool {
    let hidden = |s: &str| matches!(visible(s), Cow::Owned(_));
    summary.processes.iter().any(|p| {
        let optional = [
            &p.parent_sid,
            &p.cmd_name,
            &p.hierarchy,
            &p.cmd_mode,
            &p.alias,
            &p.exe_version,
            &p.started_as,
        ];
        [&p.sid, &p.name].into_iter().any(|s| hidden(s))
            || optional.into_iter().flatten().any(|s| hidden(s))
            || p.argv.iter().chain(&p.first_errors).any(|s| hidden(s))
            || p.regions
                .iter()
                .any(|r| hidden(&r.category) || hidden(&r.label))
            || p.children.iter().any(|c| {
                hidden(&c.class)
                    || c.hook_name.iter().chain(&c.ready).any(|s| hidden(s))
                    || c.argv.iter().chain(&c.processes).any(|s| hidden(s))
            })
            || p.timers
                .iter()
                .any(|t| hidden(&t.category) || hidden(&t.name))
            || p.counters
                .iter()
                .any(|c| hidden(&c.category) || hidden(&c.name))
    })
}

/// A copy of `summary` whose texts hold no control character: a trace is untrusted input, and a
/// region label may carry terminal escapes.
pub(super) fn visible_summary(summary: &Summary) -> Summary {
    let text = |s: &mut String| {
        if let Cow::Owned(shown) = visible(s) {
            *s = shown;
        }
    };
    let texts = |v: &mut Vec<String>| v.iter_mut().for_each(text);
    let maybe = |s: &mut Option<String>| s.iter_mut().for_each(text);
    let mut summary = summary.clone();
    for p in &mut summary.processes {
        for s in [&mut p.sid, &mut p.name] {
            text(s);
        }
        for s in [
            &mut p.parent_sid,
            &mut p.cmd_name,
            &mut p.hierarchy,
            &mut p.cmd_mode,
            &mut p.alias,
            &mut p.exe_version,
            &mut p.started_as,
        ] {
            maybe(s);
        }
        texts(&mut p.argv);
        texts(&mut p.first_errors);
        for r in &mut p.regions {
            text(&mut r.category);
            text(&mut r.label);
        }
        for c in &mut p.children {
            text(&mut c.class);
            maybe(&mut c.hook_name);
            maybe(&mut c.ready);
            texts(&mut c.argv);
            texts(&mut c.processes);
        }
        for t in &mut p.timers {
            text(&mut t.category);
            text(&mut t.name);
        }
        for c in &mut p.counters {
            text(&mut c.category);
            text(&mut c.name);
        }
    }
    summary
}

fn plural(n: usize, suffix: &str) -> &str {
    if n == 1 { "" } else { suffix }
}

/// One line per process, indented by depth, with how it ended and its time.
fn tree(out: &mut String, processes: &[ProcessSummary]) {
    let mut table = ColumnTable::new(&["", "", "", ""], &[false, false, false, true]);
    for (i, process) in processes.iter().enumerate() {
        let mut prefix = String::new();
        for depth in 1..=process.depth {
            // Does another process follow at this depth before the tree climbs above it?
            let more = processes[i + 1..]
                .iter()
                .take_while(|p| p.depth >= depth)
                .any(|p| p.depth == depth);
            prefix.push_str(match (depth == process.depth, more) {
                (true, true) => "├─ ",
                (true, false) => "└─ ",
                (false, true) => "│  ",
                (false, false) => "   ",
            });
        }
        let via = match &process.started_as {
            Some(how) if how != "?" && !how.is_empty() => format!("  ({how})"),
            _ => String::new(),
        };
        table.row(vec![
            format!("{prefix}{}{via}", command(process)),
            process.name.clone(),
            ending(process),
            human(process.elapsed_us),
        ]);
    }
    table.write(out, "");
}

/// The command line, with the program's directory left out (`git`, not
/// `/usr/libexec/git-core/git`).
fn command(process: &ProcessSummary) -> String {
    match process.argv.split_first() {
        None => format!("(no start line: {})", own_sid(&process.sid)),
        Some((program, args)) => {
            let mut argv = vec![program_name(program).to_owned()];
            argv.extend(args.iter().cloned());
            command_line(&argv, COMMAND_WIDTH)
        }
    }
}

fn ending(process: &ProcessSummary) -> String {
    match (process.signal, process.exit_code, process.ended) {
        (Some(signo), _, _) => format!("signal {signo}"),
        (None, Some(code), _) => format!("exit {code}"),
        _ => "no exit".to_owned(),
    }
}

fn details(
    out: &mut String,
    process: &ProcessSummary,
    top: usize,
    names: &HashMap<&str, &ProcessSummary>,
) {
    let _ = writeln!(out, "{}", command(process));
    let mut facts = vec![process.name.clone()];
    if let Some(version) = &process.exe_version {
        facts.push(format!("version {version}"));
    }
    if let Some(pid) = process.pid {
        facts.push(format!("pid {pid}"));
    }
    facts.push(ending(process));
    facts.push(human(process.elapsed_us));
    if process.threads > 0 {
        facts.push(format!(
            "{} thread{}",
            process.threads,
            plural(process.threads as usize, "s")
        ));
    }
    let _ = writeln!(out, "  {}", facts.join(" · "));
    let _ = writeln!(out, "  sid {}", process.sid);
    if let Some(alias) = &process.alias {
        let _ = writeln!(out, "  alias {alias}");
    }
    if !process.ended {
        let _ = writeln!(
            out,
            "  the trace stops before this process ends (no exit, atexit or signal)"
        );
    }
    if process.errors > 0 {
        let first = process.first_errors.first().map_or(String::new(), |m| {
            format!(", first: {}", shorten(&m.replace('\n', " "), 100))
        });
        let _ = writeln!(
            out,
            "  {} error{}{first}",
            process.errors,
            plural(process.errors as usize, "s")
        );
    }
    regions(out, process, top);
    children(out, process, names);
    timers(out, process);
    if process.unclosed_regions > 0 {
        let _ = writeln!(
            out,
            "  {} region{} entered and never left (not counted)",
            process.unclosed_regions,
            plural(process.unclosed_regions as usize, "s")
        );
    }
}

fn region_name(region: &RegionSummary) -> String {
    match (region.category.as_str(), region.label.as_str()) {
        ("", "") => "(no category, no label)".to_owned(),
        ("", label) => label.to_owned(),
        (category, "") => format!("{category}/"),
        (category, label) => format!("{category}/{label}"),
    }
}

/// One table: the `top` regions by total time and the `top` by self time, longest total first.
fn regions(out: &mut String, process: &ProcessSummary, top: usize) {
    if process.regions.is_empty() || top == 0 {
        return;
    }
    let mut by_self: Vec<usize> = (0..process.regions.len()).collect();
    by_self.sort_by_key(|&i| std::cmp::Reverse(process.regions[i].self_us));
    by_self.truncate(top);
    // `regions` is sorted by total already.
    let shown: Vec<&RegionSummary> = process
        .regions
        .iter()
        .enumerate()
        .filter(|(i, _)| *i < top || by_self.contains(i))
        .map(|(_, region)| region)
        .collect();
    let title = if shown.len() == process.regions.len() {
        "regions".to_owned()
    } else {
        format!("regions (top {top} by total and by self time)")
    };
    let mut table = ColumnTable::new(
        &[&title, "count", "total", "self", "max"],
        &[false, true, true, true, true],
    );
    for region in &shown {
        table.row(vec![
            region_name(region),
            region.count.to_string(),
            human(region.total_us),
            human(region.self_us),
            human(region.max_us),
        ]);
    }
    table.write(out, "  ");
    let more = process.regions.len() - shown.len();
    if more > 0 {
        let _ = writeln!(out, "  ({more} more; --top N shows more, --json all)");
    }
}

fn children(out: &mut String, process: &ProcessSummary, names: &HashMap<&str, &ProcessSummary>) {
    if process.children.is_empty() {
        return;
    }
    let mut table = ColumnTable::new(
        &["children", "class", "exit", "time", "traced process"],
        &[false, false, true, true, false],
    );
    for child in &process.children {
        let class = match &child.hook_name {
            Some(hook) => format!("{} {hook}", child.class),
            None => child.class.clone(),
        };
        let end = match (&child.ready, child.code) {
            (Some(ready), _) => ready.clone(),
            (None, Some(code)) => code.to_string(),
            (None, None) => "-".to_owned(),
        };
        let traced = child
            .processes
            .iter()
            .filter_map(|sid| names.get(sid.as_str()))
            .map(|p| match p.pid {
                Some(pid) => format!("{} (pid {pid})", p.name),
                None => p.name.clone(),
            })
            .collect::<Vec<_>>()
            .join(", ");
        table.row(vec![
            format!("[{}] {}", child.child_id, command_line(&child.argv, 50)),
            class,
            end,
            child.elapsed_us.map_or_else(|| "-".to_owned(), human),
            traced,
        ]);
    }
    table.write(out, "  ");
    if process.children_not_listed > 0 {
        let _ = writeln!(
            out,
            "  ({} more children not listed)",
            process.children_not_listed
        );
    }
}

fn timers(out: &mut String, process: &ProcessSummary) {
    if !process.timers.is_empty() {
        let mut table = ColumnTable::new(
            &["timers", "intervals", "total", "min", "max"],
            &[false, true, true, true, true],
        );
        for timer in &process.timers {
            table.row(vec![
                format!(
                    "{}/{}{}",
                    timer.category,
                    timer.name,
                    threads_note(timer.per_thread, timer.threads)
                ),
                timer.intervals.to_string(),
                human(timer.total_us),
                human(timer.min_us),
                human(timer.max_us),
            ]);
        }
        table.write(out, "  ");
    }
    if !process.counters.is_empty() {
        let mut table = ColumnTable::new(&["counters", "value"], &[false, true]);
        for counter in &process.counters {
            table.row(vec![
                format!(
                    "{}/{}{}",
                    counter.category,
                    counter.name,
                    threads_note(counter.per_thread, counter.threads)
                ),
                counter.count.to_string(),
            ]);
        }
        table.write(out, "  ");
    }
}

fn threads_note(per_thread: bool, threads: u64) -> String {
    if per_thread {
        format!(
            " (per thread, {threads} thread{})",
            plural(threads as usize, "s")
        )
    } else {
        String::new()
    }
}

/// Columns padded to their widest cell; `right` aligns numbers.
struct ColumnTable {
    headers: Vec<String>,
    right: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl ColumnTable {
    fn new(headers: &[&str], right: &[bool]) -> ColumnTable {
        ColumnTable {
            headers: headers.iter().map(|h| (*h).to_owned()).collect(),
            right: right.to_vec(),
            rows: Vec::new(),
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    fn write(&self, out: &mut String, indent: &str) {
        let show_headers = self.headers.iter().any(|h| !h.is_empty());
        let mut lines: Vec<Vec<String>> = Vec::new();
        if show_headers {
            lines.push(self.headers.clone());
        }
        for cells in &self.rows {
            let mut cells = cells.clone();
            // Rows sit two columns right of their table's title.
            if show_headers {
                cells[0].insert_str(0, "  ");
            }
            lines.push(cells);
        }
        let mut widths = vec![0; self.headers.len()];
        for cells in &lines {
            for (w, cell) in widths.iter_mut().zip(cells) {
                *w = (*w).max(cell.chars().count());
            }
        }
        for cells in &lines {
            let mut line = indent.to_owned();
            for (i, cell) in cells.iter().enumerate() {
                let pad = widths[i].saturating_sub(cell.chars().count());
                if i > 0 {
                    line.push_str("  ");
                }
                if self.right[i] {
                    line.extend(std::iter::repeat_n(' ', pad));
                    line.push_str(cell);
                } else {
                    line.push_str(cell);
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
}
