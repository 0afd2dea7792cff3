//! `trace2 stats` and `trace2 compare`: where the time of many runs goes, and what changed
//! between two sets of runs.
//!
//! Runs are grouped by command (`git:status`, from argv, `cmd_name`'s hierarchy and the mode);
//! under each command, regions by their path (category and label under their parents), children
//! by class and program, timers and counters by name. Each group has one sample per run: its
//! total (and self) time in that run, 0 for a run that never entered it. [`collect`] gathers the
//! samples while the events stream by; [`rank`] holds the statistics; this module builds the
//! results, which [`text`], JSON (serde) and [`html`] render.

pub mod collect;
pub mod html;
pub mod rank;
pub mod text;

use serde::Serialize;

pub use collect::{Collector, GroupKind, Runs, SampleSet, Samples};

/// The family-wise false-positive rate of a comparison unless the command line says otherwise.
pub const DEFAULT_ALPHA: f64 = 0.05;

/// Percentiles and extremes of one group's samples.
#[derive(Debug, Clone, Serialize)]
pub struct Distribution {
    /// Median.
    pub median: f64,
    /// 10th percentile.
    pub p10: f64,
    /// 90th percentile.
    pub p90: f64,
    /// Smallest.
    pub min: i64,
    /// Largest.
    pub max: i64,
}

impl Distribution {
    fn of(sorted: &[i64]) -> Option<Distribution> {
        Some(Distribution {
            median: rank::quantile(sorted, 0.5)?,
            p10: rank::quantile(sorted, 0.1)?,
            p90: rank::quantile(sorted, 0.9)?,
            min: *sorted.first()?,
            max: *sorted.last()?,
        })
    }
}

/// One group of one set of runs.
#[derive(Debug, Clone, Serialize)]
pub struct GroupStats {
    /// Runs of the command (the group's sample count: runs without it count 0).
    pub runs: usize,
    /// Runs that had the group.
    pub present: usize,
    /// Occurrences over all runs (regions entered, children started, timer intervals).
    pub occurrences: u64,
    /// Total time per run in µs (a counter's value for counters).
    pub total: Distribution,
    /// Self time per run in µs: total less time in sub-regions and children.
    pub self_time: Distribution,
}

/// A group's samples, padded and sorted, with their statistics.
struct Side {
    total: Vec<i64>,
    stats: Option<GroupStats>,
}

fn side(set: &SampleSet, command: &str, kind: GroupKind, name: &str) -> Side {
    let (total, self_time) = set.padded(command, kind, name);
    let key = (command.to_owned(), kind, name.to_owned());
    let found = set.groups.get(&key);
    let stats = match (Distribution::of(&total), Distribution::of(&self_time)) {
        (Some(t), Some(s)) => Some(GroupStats {
            runs: total.len(),
            present: found.map_or(0, |g| g.total.len()),
            occurrences: found.map_or(0, |g| g.occurrences),
            total: t,
            self_time: s,
        }),
        _ => None,
    };
    Side { total, stats }
}

/// `trace2 stats`: every command's groups.
#[derive(Debug, Clone, Serialize)]
pub struct Stats {
    /// Commands by name.
    pub commands: Vec<CommandStats>,
}

/// One command of `trace2 stats`.
#[derive(Debug, Clone, Serialize)]
pub struct CommandStats {
    /// `<program>:<hierarchy>#<mode>`.
    pub command: String,
    /// How its runs ended.
    pub runs: Runs,
    /// The process first, then regions, children, timers and counters, each by median total.
    pub groups: Vec<NamedStats>,
}

/// A group and its statistics.
#[derive(Debug, Clone, Serialize)]
pub struct NamedStats {
    /// What it measures.
    pub kind: GroupKind,
    /// Region path, child kind, timer or counter name (empty for the process).
    pub name: String,
    /// `us` or `count`.
    pub unit: &'static str,
    /// Its statistics.
    #[serde(flatten)]
    pub stats: GroupStats,
}

fn unit(kind: GroupKind) -> &'static str {
    if kind.is_time() { "us" } else { "count" }
}

/// The groups of each command of `set`.
fn group_names(set: &SampleSet, command: &str) -> Vec<(GroupKind, String)> {
    set.groups
        .range((command.to_owned(), GroupKind::Process, String::new())..)
        .take_while(|((c, _, _), _)| c == command)
        .map(|((_, kind, name), _)| (*kind, name.clone()))
        .collect()
}

/// The statistics of one set of runs.
pub fn stats(set: &SampleSet) -> Stats {
    let commands = set
        .commands
        .iter()
        .map(|(command, runs)| {
            let mut groups: Vec<NamedStats> = group_names(set, command)
                .into_iter()
                .filter_map(|(kind, name)| {
                    let stats = side(set, command, kind, &name).stats?;
                    Some(NamedStats {
                        kind,
                        unit: unit(kind),
                        name,
                        stats,
                    })
                })
                .collect();
            groups.sort_by(|a, b| {
                a.kind
                    .cmp(&b.kind)
                    .then(b.stats.total.median.total_cmp(&a.stats.total.median))
                    .then_with(|| a.name.cmp(&b.name))
            });
            CommandStats {
                command: command.clone(),
                runs: *runs,
                groups,
            }
        })
        .collect();
    Stats { commands }
}

/// What a comparison says of a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// More time in the new runs.
    Slower,
    /// Less time in the new runs.
    Faster,
    /// A counter higher in the new runs.
    Higher,
    /// A counter lower in the new runs.
    Lower,
    /// No change shown at the stated level.
    NoChange,
    /// Too few runs on a side: even if every new run were beyond every base run, the test
    /// could not show it at the stated level.
    TooFewRuns,
    /// Only the base runs have this command.
    OnlyInBase,
    /// Only the new runs have this command.
    OnlyInNew,
}

impl Verdict {
    /// Its name in the tables.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Slower => "slower",
            Verdict::Faster => "faster",
            Verdict::Higher => "higher",
            Verdict::Lower => "lower",
            Verdict::NoChange => "no change",
            Verdict::TooFewRuns => "too few runs",
            Verdict::OnlyInBase => "only in base",
            Verdict::OnlyInNew => "only in new",
        }
    }

    /// True for a change shown at the stated level.
    pub fn changed(self) -> bool {
        matches!(
            self,
            Verdict::Slower | Verdict::Faster | Verdict::Higher | Verdict::Lower
        )
    }
}

/// The change of a group's total, new against base.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    /// Hodges–Lehmann shift (µs, or counts): the median of all differences new − base.
    pub shift: f64,
    /// Confidence interval of the shift at the comparison's `level`, lower end.
    pub low: f64,
    /// Upper end.
    pub high: f64,
    /// The shift relative to the base median, when that is not 0.
    pub relative: Option<f64>,
    /// Two-sided p-value of the Mann–Whitney U test, before the correction for many groups.
    pub p_value: f64,
    /// The shift as a share of the command's elapsed-time shift (time groups, when that shift
    /// is not 0). Regions nest and threads overlap, so shares need not add up to 1.
    pub share: Option<f64>,
}

/// One group compared.
#[derive(Debug, Clone, Serialize)]
pub struct GroupComparison {
    /// What it measures.
    pub kind: GroupKind,
    /// Region path, child kind, timer or counter name (empty for the process).
    pub name: String,
    /// `us` or `count`.
    pub unit: &'static str,
    /// The base runs' statistics (absent when the base has no run of the command).
    pub base: Option<GroupStats>,
    /// The new runs'.
    pub new: Option<GroupStats>,
    /// The change (absent when a side has no run).
    pub change: Option<Change>,
    /// The verdict.
    pub verdict: Verdict,
    /// The samples of the total, sorted (base, new): kept for the pictures, not serialised.
    #[serde(skip)]
    pub samples: (Vec<i64>, Vec<i64>),
}

/// One command compared.
#[derive(Debug, Clone, Serialize)]
pub struct CommandComparison {
    /// `<program>:<hierarchy>#<mode>`.
    pub command: String,
    /// How the base runs ended.
    pub base_runs: Runs,
    /// How the new runs ended.
    pub new_runs: Runs,
    /// The process first, then the time groups by the size of their shift (their impact),
    /// then counters.
    pub groups: Vec<GroupComparison>,
}

/// `trace2 compare`.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// `mann-whitney-u`: the test; the shift is Hodges–Lehmann's with Moses' interval.
    pub method: &'static str,
    /// Confidence level of the intervals (1 − alpha).
    pub level: f64,
    /// The family-wise false-positive rate: the chance that an A/A comparison flags any
    /// group at all.
    pub alpha: f64,
    /// `holm`: how alpha is shared among the groups tested.
    pub correction: &'static str,
    /// Groups tested (those with runs on both sides).
    pub groups_tested: usize,
    /// Commands by name.
    pub commands: Vec<CommandComparison>,
}

/// Compares `new` against `base` with family-wise false-positive rate `alpha`.
pub fn compare(base: &SampleSet, new: &SampleSet, alpha: f64) -> Comparison {
    let level = 1.0 - alpha;
    let mut commands: Vec<String> = base.commands.keys().cloned().collect();
    commands.extend(new.commands.keys().cloned());
    commands.sort();
    commands.dedup();

    let mut out = Vec::new();
    // (command index, group index, p-value, smallest possible p) of each group tested.
    let mut tested: Vec<(usize, usize, f64, f64)> = Vec::new();
    for command in &commands {
        let mut names = group_names(base, command);
        names.extend(group_names(new, command));
        names.sort();
        names.dedup();
        let base_runs = base.commands.get(command).copied().unwrap_or_default();
        let new_runs = new.commands.get(command).copied().unwrap_or_default();
        let mut groups = Vec::new();
        for (kind, name) in names {
            let b = side(base, command, kind, &name);
            let n = side(new, command, kind, &name);
            let (change, verdict) = match (b.stats.is_some(), n.stats.is_some()) {
                (true, true) => {
                    let shift = rank::compare(&b.total, &n.total, level);
                    let median = b.stats.as_ref().map_or(0.0, |s| s.total.median);
                    let change = Change {
                        shift: shift.estimate,
                        low: shift.low,
                        high: shift.high,
                        relative: (median != 0.0).then(|| shift.estimate / median),
                        p_value: shift.p_value,
                        share: None,
                    };
                    tested.push((
                        out.len(),
                        groups.len(),
                        shift.p_value,
                        rank::smallest_p(b.total.len(), n.total.len()),
                    ));
                    (Some(change), Verdict::NoChange)
                }
                (true, false) => (None, Verdict::OnlyInBase),
                (false, _) => (None, Verdict::OnlyInNew),
            };
            groups.push(GroupComparison {
                kind,
                unit: unit(kind),
                name,
                base: b.stats,
                new: n.stats,
                change,
                verdict,
                samples: (b.total, n.total),
            });
        }
        out.push(CommandComparison {
            command: command.clone(),
            base_runs,
            new_runs,
            groups,
        });
    }

    // Holm across every group tested; a group whose smallest possible p-value cannot pass
    // even the first step (alpha / groups) has too few runs to decide.
    let p_values: Vec<f64> = tested.iter().map(|t| t.2).collect();
    let rejected = rank::holm(&p_values, alpha);
    let first_step = alpha / tested.len().max(1) as f64;
    for (&(c, g, _, smallest), rejected) in tested.iter().zip(rejected) {
        let group = &mut out[c].groups[g];
        let change = group.change.as_ref().expect("tested groups have a change");
        group.verdict = if rejected {
            match (change.shift > 0.0, group.kind.is_time()) {
                (true, true) => Verdict::Slower,
                (false, true) => Verdict::Faster,
                (true, false) => Verdict::Higher,
                (false, false) => Verdict::Lower,
            }
        } else if smallest > first_step {
            Verdict::TooFewRuns
        } else {
            Verdict::NoChange
        };
    }

    for command in &mut out {
        let elapsed_shift = command
            .groups
            .iter()
            .find(|g| g.kind == GroupKind::Process)
            .and_then(|g| g.change.as_ref())
            .map(|c| c.shift);
        for group in &mut command.groups {
            if let (Some(change), Some(total)) = (&mut group.change, elapsed_shift)
                && group.kind.is_time()
                && total != 0.0
            {
                change.share = Some(change.shift / total);
            }
        }
        command.groups.sort_by(|a, b| {
            let rank = |g: &GroupComparison| match g.kind {
                GroupKind::Process => 0,
                GroupKind::Counter => 2,
                _ => 1,
            };
            let size = |g: &GroupComparison| g.change.as_ref().map_or(0.0, |c| c.shift.abs());
            rank(a)
                .cmp(&rank(b))
                .then(size(b).total_cmp(&size(a)))
                .then_with(|| a.kind.cmp(&b.kind))
                .then_with(|| a.name.cmp(&b.name))
        });
    }

    Comparison {
        method: "mann-whitney-u",
        level,
        alpha,
        correction: "holm",
        groups_tested: tested.len(),
        commands: out,
    }
}

#[cfg(test)]
mod tests;
