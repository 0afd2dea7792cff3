//! Grouping from real event lines, and the honesty of the verdicts: A/A comparisons within the
//! stated false-positive rate, real shifts found, too few runs said as such.

use super::*;
use crate::record_event::with_line;

/// Event lines of one process `n` of command `verb`: a region with a nested one, a child run
/// inside the outer region, a timer and a counter; `slow` µs more in the nested region.
fn process_lines(n: u32, verb: &str, slow: i64, end: &str) -> Vec<String> {
    let sid = format!("20260101T000000.000000Z-H0a7c9cdf-P{n:08x}");
    let head = |event: &str| format!(r#"{{"event":"{event}","sid":"{sid}","thread":"main""#);
    let inner = 300 + slow;
    let outer = 1000 + slow;
    let mut lines = vec![
        format!(r#"{},"evt":"4","exe":"2.47.3"}}"#, head("version")),
        format!(
            r#"{},"t_abs":0.0001,"argv":["git","{verb}"]}}"#,
            head("start")
        ),
        format!(
            r#"{},"name":"{verb}","hierarchy":"{verb}"}}"#,
            head("cmd_name")
        ),
        format!(
            r#"{},"nesting":1,"category":"a","label":"outer"}}"#,
            head("region_enter")
        ),
        format!(
            r#"{},"nesting":2,"category":"b","label":"inner"}}"#,
            head("region_enter")
        ),
        format!(
            r#"{},"t_rel":{},"nesting":2,"category":"b","label":"inner"}}"#,
            head("region_leave"),
            inner as f64 / 1e6
        ),
        format!(
            r#"{},"child_id":0,"child_class":"?","use_shell":false,"argv":["git","rev-parse"]}}"#,
            head("child_start")
        ),
        format!(
            r#"{},"child_id":0,"pid":7,"code":0,"t_rel":0.0002}}"#,
            head("child_exit")
        ),
        format!(
            r#"{},"t_rel":{},"nesting":1,"category":"a","label":"outer"}}"#,
            head("region_leave"),
            outer as f64 / 1e6
        ),
        format!(
            r#"{},"category":"t","name":"tick","intervals":2,"t_total":0.00005,"t_min":0.00002,"t_max":0.00003}}"#,
            head("timer")
        ),
        format!(
            r#"{},"category":"c","name":"objects","count":42}}"#,
            head("counter")
        ),
    ];
    let elapsed = (2000 + slow) as f64 / 1e6;
    match end {
        "exit" => {
            lines.push(format!(r#"{},"t_abs":{elapsed},"code":0}}"#, head("exit")));
            lines.push(format!(
                r#"{},"t_abs":{elapsed},"code":0}}"#,
                head("atexit")
            ));
        }
        "signal" => lines.push(format!(
            r#"{},"t_abs":{elapsed},"signo":9}}"#,
            head("signal")
        )),
        _ => {}
    }
    lines
}

fn collect(lines: &[String]) -> SampleSet {
    let mut collector = Collector::new();
    for line in lines {
        with_line(line, |event| collector.event(event)).unwrap();
    }
    collector.finish()
}

#[test]
fn groups_paths_self_times_children_timers_counters() {
    let mut lines = process_lines(1, "status", 0, "exit");
    lines.extend(process_lines(2, "status", 0, "signal"));
    lines.extend(process_lines(3, "status", 0, "none"));
    lines.extend(process_lines(4, "fetch", 0, "exit"));
    let set = collect(&lines);
    let runs = set.commands["git:status"];
    assert_eq!((runs.ended, runs.killed, runs.unfinished), (1, 1, 1));
    assert_eq!(set.commands["git:fetch"].ended, 1);
    let group = |kind, name: &str| &set.groups[&("git:status".to_owned(), kind, name.to_owned())];
    let process = group(GroupKind::Process, "");
    // Elapsed 2000 µs; the outer region (1000) covers the rest but 1000.
    assert_eq!(
        (process.total.clone(), process.self_time.clone()),
        (vec![2000], vec![1000])
    );
    let outer = group(GroupKind::Region, "a:outer");
    // 1000 less the inner region (300) and the child started inside it (200).
    assert_eq!(
        (outer.total.clone(), outer.self_time.clone()),
        (vec![1000], vec![500])
    );
    let inner = group(GroupKind::Region, "a:outer / b:inner");
    assert_eq!(
        (inner.total.clone(), inner.self_time.clone()),
        (vec![300], vec![300])
    );
    assert_eq!(group(GroupKind::Child, "? git rev-parse").total, [200]);
    assert_eq!(group(GroupKind::Timer, "t/tick").total, [50]);
    assert_eq!(group(GroupKind::Timer, "t/tick").occurrences, 2);
    assert_eq!(group(GroupKind::Counter, "c/objects").total, [42]);
}

#[test]
fn a_group_a_run_lacks_counts_zero_for_that_run() {
    let mut set = SampleSet::default();
    set.commands.insert(
        "git:status".into(),
        Runs {
            ended: 4,
            ..Runs::default()
        },
    );
    set.groups.insert(
        ("git:status".into(), GroupKind::Region, "x:y".into()),
        Samples {
            total: vec![9, 5],
            self_time: vec![4, 5],
            occurrences: 2,
        },
    );
    let (total, self_time) = set.padded("git:status", GroupKind::Region, "x:y");
    assert_eq!(total, [0, 0, 5, 9]);
    assert_eq!(self_time, [0, 0, 4, 5]);
}

/// A small deterministic generator (xorshift64*), so every run of the tests draws the same.
struct Draw(u64);

impl Draw {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A timing-like value: a floor plus a heavy right tail (log-normal), whole µs (ties).
    fn timing(&mut self, floor: f64, scale: f64) -> i64 {
        let (u1, u2) = (self.unit().max(1e-12), self.unit());
        let normal = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        (floor + scale * (0.6 * normal).exp()).round() as i64
    }
}

/// A side of `runs` runs with `groups` region groups, group g drawn from its own distribution,
/// `extra[g]` µs added to group g.
fn draw_side(draw: &mut Draw, runs: usize, groups: usize, extra: &[i64]) -> SampleSet {
    let mut set = SampleSet::default();
    set.commands.insert(
        "tool:run".into(),
        Runs {
            ended: runs as u64,
            ..Runs::default()
        },
    );
    for g in 0..groups {
        let mut samples = Samples::default();
        for _ in 0..runs {
            let value = draw.timing(50.0 * (g + 1) as f64, 10.0 * (g + 1) as f64)
                + extra.get(g).copied().unwrap_or(0);
            samples.total.push(value);
            samples.self_time.push(value);
            samples.occurrences += 1;
        }
        set.groups.insert(
            ("tool:run".into(), GroupKind::Region, format!("r:{g}")),
            samples,
        );
    }
    set
}

/// A/A: both sides drawn from the same distributions, 1,000 times. The stated rate is
/// family-wise (Holm): comparisons that flag any group at all must stay within 5 % (plus
/// three binomial standard errors of the estimate: 1,000 trials give ±0.7 %).
#[test]
fn a_against_a_stays_within_the_stated_false_positive_rate() {
    let mut draw = Draw(0x9e37_79b9_7f4a_7c15);
    let trials = 1000;
    let mut any_flagged = 0;
    let mut groups_flagged = 0;
    let mut groups_tested = 0;
    for _ in 0..trials {
        let base = draw_side(&mut draw, 30, 8, &[]);
        let new = draw_side(&mut draw, 30, 8, &[]);
        let comparison = compare(&base, &new, DEFAULT_ALPHA);
        let flagged = comparison.commands[0]
            .groups
            .iter()
            .filter(|g| g.verdict.changed())
            .count();
        groups_flagged += flagged;
        groups_tested += comparison.groups_tested;
        any_flagged += usize::from(flagged > 0);
        assert!(
            comparison.commands[0]
                .groups
                .iter()
                .all(|g| g.verdict != Verdict::TooFewRuns)
        );
    }
    let rate = any_flagged as f64 / trials as f64;
    let bound =
        DEFAULT_ALPHA + 3.0 * (DEFAULT_ALPHA * (1.0 - DEFAULT_ALPHA) / trials as f64).sqrt();
    println!(
        "A/A: {any_flagged} of {trials} comparisons flagged a group ({:.1} %), {groups_flagged} of {groups_tested} groups",
        rate * 100.0
    );
    assert!(rate <= bound, "family-wise false-positive rate {rate}");
    // Not vacuous: the test does flag groups now and then (it is not simply blind).
    assert!(any_flagged > 0);
}

/// Each interval covers the true shift (0 in A/A) at its level or better, per group.
#[test]
fn intervals_cover_a_zero_shift_at_their_level() {
    let mut draw = Draw(7);
    let (trials, mut covered) = (1000, 0);
    for _ in 0..trials {
        let base = draw_side(&mut draw, 20, 1, &[]);
        let new = draw_side(&mut draw, 25, 1, &[]);
        let comparison = compare(&base, &new, DEFAULT_ALPHA);
        let region = comparison.commands[0]
            .groups
            .iter()
            .find(|g| g.kind == GroupKind::Region)
            .unwrap();
        let change = region.change.as_ref().unwrap();
        covered += usize::from(change.low <= 0.0 && change.high >= 0.0);
    }
    let coverage = covered as f64 / trials as f64;
    assert!(
        coverage >= 0.95 - 3.0 * (0.05f64 * 0.95 / trials as f64).sqrt(),
        "{coverage}"
    );
}

#[test]
fn a_real_shift_in_one_group_is_found_there_only() {
    let mut draw = Draw(42);
    let base = draw_side(&mut draw, 30, 6, &[]);
    let new = draw_side(&mut draw, 30, 6, &[0, 0, 0, 60, 0, 0]);
    let comparison = compare(&base, &new, DEFAULT_ALPHA);
    for group in &comparison.commands[0].groups {
        let expected = if group.name == "r:3" {
            Verdict::Slower
        } else {
            Verdict::NoChange
        };
        assert_eq!(group.verdict, expected, "{}", group.name);
    }
    let shifted = comparison.commands[0]
        .groups
        .iter()
        .find(|g| g.name == "r:3")
        .unwrap();
    let change = shifted.change.as_ref().unwrap();
    assert!(change.low <= 60.0 && 60.0 <= change.high, "{change:?}");
    // Sorted by impact: the shifted group first after the process row.
    assert_eq!(comparison.commands[0].groups[0].name, "r:3");
}

#[test]
fn too_few_runs_is_said_as_such_never_as_no_change() {
    let mut draw = Draw(3);
    let base = draw_side(&mut draw, 3, 2, &[]);
    // Even a huge shift cannot be shown with 3 runs a side (smallest p-value 0.1).
    let new = draw_side(&mut draw, 3, 2, &[100_000, 0]);
    let comparison = compare(&base, &new, DEFAULT_ALPHA);
    for group in &comparison.commands[0].groups {
        assert_eq!(group.verdict, Verdict::TooFewRuns, "{}", group.name);
        assert!(group.change.is_some());
    }
    // 8 runs a side suffice for a clear shift among 2 groups.
    let base = draw_side(&mut draw, 8, 2, &[]);
    let new = draw_side(&mut draw, 8, 2, &[100_000, 0]);
    let comparison = compare(&base, &new, DEFAULT_ALPHA);
    let verdicts: Vec<Verdict> = comparison.commands[0]
        .groups
        .iter()
        .map(|g| g.verdict)
        .collect();
    assert_eq!(verdicts, [Verdict::Slower, Verdict::NoChange]);
}

#[test]
fn commands_on_one_side_only_are_named_so() {
    let mut draw = Draw(5);
    let base = draw_side(&mut draw, 10, 1, &[]);
    let comparison = compare(&base, &SampleSet::default(), DEFAULT_ALPHA);
    assert!(
        comparison.commands[0]
            .groups
            .iter()
            .all(|g| g.verdict == Verdict::OnlyInBase)
    );
    assert_eq!(comparison.groups_tested, 0);
    let comparison = compare(&SampleSet::default(), &base, DEFAULT_ALPHA);
    assert!(
        comparison.commands[0]
            .groups
            .iter()
            .all(|g| g.verdict == Verdict::OnlyInNew)
    );
}

#[test]
fn shares_round_without_a_negative_zero() {
    assert_eq!(text::percent(-0.001), "0 %");
    assert_eq!(text::percent(0.931), "93 %");
    assert_eq!(text::percent(-0.27), "-27 %");
    assert_eq!(text::rate(0.95), "95 %");
    assert_eq!(text::rate(0.999), "99.9 %");
    assert_eq!(text::rate(0.001), "0.1 %");
}

#[test]
fn text_and_html_show_trace_text_safely() {
    let mut lines = process_lines(1, "st\u{1b}[2Jatus", 0, "exit");
    lines.extend(process_lines(2, "st\u{1b}[2Jatus", 0, "exit"));
    // JSON-escape the ESC the verb carries.
    let lines: Vec<String> = lines
        .iter()
        .map(|l| l.replace('\u{1b}', "\\u001b"))
        .collect();
    let set = collect(&lines);
    let text = text::render_stats(&stats(&set));
    assert!(
        !text.contains('\u{1b}') && text.contains("st\\e[2Jatus"),
        "{text}"
    );
    let comparison = compare(&set, &set, DEFAULT_ALPHA);
    let text = text::render_comparison(&comparison);
    assert!(!text.contains('\u{1b}'), "{text}");
    let page = html::render(&comparison);
    assert!(!page.contains('\u{1b}'));
    assert!(!page.contains("<script") && !page.contains("http://") && !page.contains("https://"));
}

#[test]
fn without_program_two_programs_runs_of_one_command_meet() {
    let git = process_lines(1, "status", 0, "exit");
    let other: Vec<String> = process_lines(2, "status", 0, "exit")
        .into_iter()
        .map(|line| line.replace(r#"["git","status"]"#, r#"["/opt/bin/gix","status"]"#))
        .collect();
    let by_program = collect(&[git.clone(), other.clone()].concat());
    assert_eq!(
        by_program.commands.keys().collect::<Vec<_>>(),
        ["git:status", "gix:status"]
    );
    let mut collector = Collector::new().without_program();
    for line in git.iter().chain(&other) {
        with_line(line, |event| collector.event(event)).unwrap();
    }
    let set = collector.finish();
    assert_eq!(set.commands.keys().collect::<Vec<_>>(), ["status"]);
    assert_eq!(set.commands["status"].ended, 2);
}
