//! From events to per-run samples: each process is followed while its lines arrive, and when it
//! ends its figures join the samples of its groups (its command; each region path, child kind,
//! timer and counter under that command). A process's open state is dropped then, so memory
//! grows with the number of groups and runs, never with the number of lines.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::process::program_name;
use crate::trace_event::{Kind, TraceEvent};

/// What a group measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupKind {
    /// The whole process: its elapsed time.
    Process,
    /// A region path (`category:label` under its parents, ` / ` between them).
    Region,
    /// Children of one class and program (`git rev-parse`, `hook pre-commit`).
    Child,
    /// A timer (`category/name`), total time summed over threads.
    Timer,
    /// A counter (`category/name`), value summed over threads; not a time.
    Counter,
}

impl GroupKind {
    /// True when the samples are microseconds (all but counters).
    pub fn is_time(self) -> bool {
        self != GroupKind::Counter
    }

    /// Its name in the tables and the JSON.
    pub fn name(self) -> &'static str {
        match self {
            GroupKind::Process => "process",
            GroupKind::Region => "region",
            GroupKind::Child => "child",
            GroupKind::Timer => "timer",
            GroupKind::Counter => "counter",
        }
    }
}

/// The samples of one group: one value per run that had it.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    /// Total time (or a counter's value) per run.
    pub total: Vec<i64>,
    /// Self time per run: the total less time in sub-regions and children.
    pub self_time: Vec<i64>,
    /// Occurrences summed over the runs (a region entered 3 times in each of 10 runs: 30).
    pub occurrences: u64,
}

/// How the processes of one command ended.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Runs {
    /// Ended with `exit`/`atexit`: their figures are the samples.
    pub ended: u64,
    /// Killed by a signal (`signal`): counted, not sampled (their times stop early).
    pub killed: u64,
    /// Flight-recorder snapshots taken while the process ran (they end with the recorder's
    /// marker, a `data` event `flight`/`trigger`): a window of the run, counted, not sampled.
    pub snapshots: u64,
    /// Other traces that stop before the end (a cut-short file, a process killed with no
    /// `signal` line): counted, not sampled.
    pub unfinished: u64,
}

/// Everything read from one side: per command, how its runs ended, and the samples of each
/// of its groups.
#[derive(Debug, Default)]
pub struct SampleSet {
    /// Runs per command.
    pub commands: BTreeMap<String, Runs>,
    /// Samples per (command, kind, name). Runs without the group are not in it; see
    /// [`SampleSet::padded`].
    pub groups: BTreeMap<(String, GroupKind, String), Samples>,
    /// Lines of a process that came after its end (ignored).
    pub late_lines: u64,
}

impl SampleSet {
    /// The samples of a group with one 0 for each ended run of its command that did not have
    /// it (a region a run never entered took no time in it), sorted.
    pub fn padded(&self, command: &str, kind: GroupKind, name: &str) -> (Vec<i64>, Vec<i64>) {
        let runs = self.commands.get(command).map_or(0, |r| r.ended) as usize;
        let key = (command.to_owned(), kind, name.to_owned());
        let (mut total, mut self_time) = match self.groups.get(&key) {
            Some(samples) => (samples.total.clone(), samples.self_time.clone()),
            None => (Vec::new(), Vec::new()),
        };
        total.resize(runs.max(total.len()), 0);
        self_time.resize(runs.max(self_time.len()), 0);
        total.sort_unstable();
        self_time.sort_unstable();
        (total, self_time)
    }
}

/// Reads events; [`Collector::finish`] gives the [`SampleSet`].
#[derive(Default)]
pub struct Collector {
    open: HashMap<String, ProcessRun>,
    /// SIDs whose process ended and was sampled.
    done: HashSet<String>,
    set: SampleSet,
    /// Name commands without their program (`status`, not `git:status`).
    without_program: bool,
}

/// An open region on a thread's stack.
struct OpenPath {
    nesting: i64,
    /// Its path (parents' paths, then its own `category:label`).
    path: String,
    /// Time of regions directly inside it and children started while it was innermost.
    inner_us: i64,
}

/// Per-run figures of one group inside one process.
#[derive(Default)]
struct Figures {
    total: i64,
    self_time: i64,
    occurrences: u64,
}

#[derive(Default)]
struct ProcessRun {
    last_t_abs: i64,
    /// `t_abs` of `exit`, when seen (its `atexit` normally follows).
    exit_t_abs: Option<i64>,
    argv0: Option<String>,
    argv1: Option<String>,
    verb: Option<String>,
    hierarchy: Option<String>,
    mode: Option<String>,
    stacks: HashMap<String, Vec<OpenPath>>,
    groups: HashMap<(GroupKind, String), Figures>,
    /// Open children: child id → (group name, thread that started it, its stack depth then).
    children: HashMap<i64, (String, String, usize)>,
    /// Time of the main thread's outermost regions and of children started outside any region.
    covered_us: i64,
    /// The flight recorder's marker was seen: this trace is a snapshot's window.
    snapshot: bool,
}

/// How a process's trace ended.
enum RunEnd {
    Exit(i64),
    Signal,
}

impl Collector {
    /// An empty collector.
    pub fn new() -> Self {
        Self::default()
    }

    /// Names commands without their program (`status` for `git:status` and `gix:status`), so
    /// that two programs' runs of one command are compared with each other.
    pub fn without_program(mut self) -> Self {
        self.without_program = true;
        self
    }

    /// Takes one event.
    pub fn event(&mut self, event: &TraceEvent<'_>) {
        if let Some(run) = self.open.get_mut(&*event.sid) {
            if let Some(end) = run.event(event) {
                let run = self.open.remove(&*event.sid).expect("found above");
                self.finish_run(event.sid.to_string(), run, end);
            }
            return;
        }
        if self.done.contains(&*event.sid) {
            self.set.late_lines += 1;
            return;
        }
        let mut run = ProcessRun::default();
        if let Some(end) = run.event(event) {
            self.finish_run(event.sid.to_string(), run, end);
        } else {
            self.open.insert(event.sid.to_string(), run);
        }
    }

    fn finish_run(&mut self, sid: String, run: ProcessRun, end: RunEnd) {
        self.done.insert(sid);
        let command = run.command(self.without_program);
        let runs = self.set.commands.entry(command.clone()).or_default();
        let elapsed = match end {
            RunEnd::Signal => {
                runs.killed += 1;
                return;
            }
            RunEnd::Exit(elapsed) => elapsed,
        };
        runs.ended += 1;
        let process = (elapsed - run.covered_us).max(0);
        let mut add = |kind: GroupKind, name: String, figures: Figures| {
            let samples = self
                .set
                .groups
                .entry((command.clone(), kind, name))
                .or_default();
            samples.total.push(figures.total);
            samples.self_time.push(figures.self_time);
            samples.occurrences += figures.occurrences;
        };
        add(
            GroupKind::Process,
            String::new(),
            Figures {
                total: elapsed,
                self_time: process,
                occurrences: 1,
            },
        );
        for ((kind, name), figures) in run.groups {
            add(kind, name, figures);
        }
    }

    /// The samples of every process that ended; processes whose trace stops before their end
    /// are counted as unfinished.
    pub fn finish(mut self) -> SampleSet {
        let open: Vec<(String, ProcessRun)> = self.open.drain().collect();
        for (sid, run) in open {
            // An `exit` without its `atexit` still gave the process's end.
            match run.exit_t_abs {
                Some(elapsed) => self.finish_run(sid, run, RunEnd::Exit(elapsed)),
                None => {
                    let runs = self
                        .set
                        .commands
                        .entry(run.command(self.without_program))
                        .or_default();
                    if run.snapshot {
                        runs.snapshots += 1;
                    } else {
                        runs.unfinished += 1;
                    }
                }
            }
        }
        self.set
    }
}

impl ProcessRun {
    /// `<program>:<hierarchy or verb>#<mode>`: `git:status`, `git:commit/rev-parse`; without
    /// `<program>:` when `without_program` (the program alone when there is no verb).
    fn command(&self, without_program: bool) -> String {
        let program = program_name(self.argv0.as_deref().unwrap_or("?"));
        let verb = self.hierarchy.as_deref().or(self.verb.as_deref());
        let mut name = String::new();
        if !without_program || verb.is_none() {
            name.push_str(program);
        }
        if let Some(verb) = verb {
            if !name.is_empty() {
                name.push(':');
            }
            match (self.verb.as_deref(), &self.argv1) {
                (Some("_run_dashed_"), Some(dashed)) => name.push_str(dashed),
                _ => name.push_str(verb),
            }
        }
        if let Some(mode) = &self.mode {
            name.push('#');
            name.push_str(mode);
        }
        name
    }

    fn figures(&mut self, kind: GroupKind, name: &str) -> &mut Figures {
        let key = (kind, name.to_owned());
        self.groups.entry(key).or_default()
    }

    /// Takes one event; `Some` when it ends the process.
    fn event(&mut self, event: &TraceEvent<'_>) -> Option<RunEnd> {
        if let Some(t_abs) = event.t_abs_us {
            self.last_t_abs = self.last_t_abs.max(t_abs);
        }
        match &event.kind {
            Kind::Start { argv } => {
                self.argv0 = argv.first().map(|w| w.to_string());
                self.argv1 = argv.get(1).map(|w| w.to_string());
            }
            Kind::CmdName { name, hierarchy } => {
                self.verb = Some(name.to_string());
                self.hierarchy = hierarchy.as_deref().map(str::to_owned);
            }
            Kind::CmdMode { name } => self.mode = Some(name.to_string()),
            Kind::RegionEnter(region) => {
                let stack = self.stacks.entry(event.thread.to_string()).or_default();
                // Regions at this level or deeper still open were never left (lost lines).
                let keep = stack
                    .iter()
                    .rposition(|open| open.nesting < region.nesting)
                    .map_or(0, |p| p + 1);
                stack.truncate(keep);
                let own = format!(
                    "{}:{}",
                    region.category.as_deref().unwrap_or(""),
                    region.label.as_deref().unwrap_or("")
                );
                let path = match stack.last() {
                    Some(parent) => format!("{} / {own}", parent.path),
                    None => own,
                };
                stack.push(OpenPath {
                    nesting: region.nesting,
                    path,
                    inner_us: 0,
                });
            }
            Kind::RegionLeave(region, duration) => {
                self.leave(&event.thread, region.nesting, *duration)
            }
            Kind::ChildStart {
                child_id,
                class,
                hook_name,
                argv,
            } => {
                let mut name = match hook_name {
                    Some(hook) => format!("{class} {hook}"),
                    None => class.to_string(),
                };
                if hook_name.is_none() {
                    let program = argv.first().map_or("?", |w| program_name(w));
                    name.push(' ');
                    name.push_str(program);
                    // A git child's verb says more than `git`.
                    if program == "git"
                        && let Some(verb) = argv.get(1)
                    {
                        name.push(' ');
                        name.push_str(verb);
                    }
                }
                let depth = self.stacks.get(&*event.thread).map_or(0, Vec::len);
                self.children
                    .insert(*child_id, (name, event.thread.to_string(), depth));
            }
            Kind::ChildEnd {
                child_id,
                elapsed_us,
                ..
            } => {
                if let Some((name, thread, depth)) = self.children.remove(child_id) {
                    let figures = self.figures(GroupKind::Child, &name);
                    figures.total = figures.total.saturating_add(*elapsed_us);
                    figures.self_time = figures.self_time.saturating_add(*elapsed_us);
                    figures.occurrences += 1;
                    match self.stacks.get_mut(&thread) {
                        Some(stack) if depth > 0 && stack.len() >= depth => {
                            let open = &mut stack[depth - 1];
                            open.inner_us = open.inner_us.saturating_add(*elapsed_us);
                        }
                        _ if thread == "main" => self.covered_us += *elapsed_us,
                        _ => {}
                    }
                }
            }
            Kind::Timer {
                category,
                name,
                intervals,
                total_us,
                ..
            } => {
                let figures = self.figures(GroupKind::Timer, &format!("{category}/{name}"));
                figures.total = figures.total.saturating_add(*total_us);
                figures.self_time = figures.total;
                figures.occurrences += (*intervals).max(0) as u64;
            }
            Kind::Counter {
                category,
                name,
                count,
                ..
            } => {
                let figures = self.figures(GroupKind::Counter, &format!("{category}/{name}"));
                figures.total = figures.total.wrapping_add(*count);
                figures.self_time = figures.total;
                figures.occurrences += 1;
            }
            Kind::Exit { .. } => {
                self.exit_t_abs = Some(event.t_abs_us.unwrap_or(self.last_t_abs));
            }
            // `atexit` is a process's last line: the run is complete.
            Kind::Atexit { .. } => {
                return Some(RunEnd::Exit(event.t_abs_us.unwrap_or(self.last_t_abs)));
            }
            Kind::Signal { .. } => return Some(RunEnd::Signal),
            Kind::Data { category, key, .. } if category == "flight" && key == "trigger" => {
                self.snapshot = true;
            }
            _ => {}
        }
        None
    }

    fn leave(&mut self, thread: &str, nesting: i64, duration: i64) {
        let Some(stack) = self.stacks.get_mut(thread) else {
            return;
        };
        let Some(at) = stack.iter().rposition(|open| open.nesting == nesting) else {
            return;
        };
        stack.truncate(at + 1);
        let open = stack.pop().expect("truncated to at + 1");
        if let Some(outer) = stack.last_mut() {
            outer.inner_us = outer.inner_us.saturating_add(duration);
        } else if thread == "main" {
            self.covered_us = self.covered_us.saturating_add(duration);
        }
        let figures = self.figures(GroupKind::Region, &open.path);
        figures.total = figures.total.saturating_add(duration);
        figures.self_time = figures
            .self_time
            .saturating_add((duration - open.inner_us).max(0));
        figures.occurrences += 1;
    }
}
