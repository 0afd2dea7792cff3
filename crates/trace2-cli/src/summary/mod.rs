//! `trace2 summary`: per process, what it was (command, name, exit code, elapsed time), where its
//! time went (regions by category and label: count, total, self, max), which children it ran and
//! for how long, and its timers and counters.
//!
//! Only aggregates are kept while reading: per process a map of region statistics, one stack of
//! open regions per thread and a bounded list of children, so memory grows with the number of
//! processes and distinct regions, never with the number of lines.

mod text;

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::process::{
    Clock, Launch, argv_of, argv_tail_hash, match_launch, parent_sid, pid_from_sid, qualified_name,
};
use crate::trace_event::{Kind, Region, TraceEvent};

pub use text::render_text;

/// Children listed per process; more are counted, not listed.
pub const MAX_CHILDREN: usize = 1000;
/// Error messages kept per process.
const MAX_ERRORS: usize = 3;

/// Reads events one at a time; [`Summariser::finish`] gives the [`Summary`].
#[derive(Default)]
pub struct Summariser {
    processes: HashMap<String, ProcessStats>,
}

/// The finished summary: the processes in tree order (each parent before its children).
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Processes, roots in start order, each followed by its descendants.
    pub processes: Vec<ProcessSummary>,
}

/// One process.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessSummary {
    /// Full session id.
    pub sid: String,
    /// SID of the parent when the parent is in the input too.
    pub parent_sid: Option<String>,
    /// Depth in the tree of the input (0 for a root).
    pub depth: usize,
    /// The pid in the SID.
    pub pid: Option<u32>,
    /// `<exe>[:<verb>][#<mode>]`.
    pub name: String,
    /// `argv` of `start`.
    pub argv: Vec<String>,
    /// `cmd_name`.
    pub cmd_name: Option<String>,
    /// `hierarchy` of `cmd_name`.
    pub hierarchy: Option<String>,
    /// `cmd_mode`.
    pub cmd_mode: Option<String>,
    /// `alias` expanded, if any.
    pub alias: Option<String>,
    /// `exe` of `version`.
    pub exe_version: Option<String>,
    /// How the parent started it: a child class (`hook pre-commit`, `?`, …) or `exec`.
    pub started_as: Option<String>,
    /// Code of the last `atexit` (else `exit`).
    pub exit_code: Option<i64>,
    /// Signal that ended it (`signal` event).
    pub signal: Option<i64>,
    /// Wall time of its first line, Unix µs.
    pub start_unix_us: Option<i64>,
    /// `t_abs` of its end (`atexit`, `signal` or `exit`); for a process that never ended, the
    /// latest time known of it (`t_abs`, or a line's wall time after its clock's zero).
    pub elapsed_us: i64,
    /// False when the trace stops without `atexit`, `exit` or `signal`.
    pub ended: bool,
    /// Regions aggregated by category and label, longest total first.
    pub regions: Vec<RegionSummary>,
    /// Regions entered and never left (the trace ends inside them).
    pub unclosed_regions: u64,
    /// Children, in start order.
    pub children: Vec<ChildSummary>,
    /// Children beyond [`MAX_CHILDREN`]: counted here, not listed.
    pub children_not_listed: u64,
    /// Threads started (`thread_start`).
    pub threads: u64,
    /// Timers: process totals, then per-thread ones summed over threads.
    pub timers: Vec<TimerSummary>,
    /// Counters, likewise.
    pub counters: Vec<CounterSummary>,
    /// `error` events.
    pub errors: u64,
    /// The first few error messages.
    pub first_errors: Vec<String>,
    /// Lines read for it.
    pub events: u64,
}

/// Regions of one category and label in one process.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RegionSummary {
    /// Category (empty when null).
    pub category: String,
    /// Label (empty when null).
    pub label: String,
    /// Regions left.
    pub count: u64,
    /// Sum of their durations.
    pub total_us: i64,
    /// Total minus the time of regions directly nested in them on the same thread.
    pub self_us: i64,
    /// Longest one.
    pub max_us: i64,
}

/// A `child_start` and what came of it.
#[derive(Debug, Clone, Serialize)]
pub struct ChildSummary {
    /// `child_id`.
    pub child_id: i64,
    /// `child_class`.
    pub class: String,
    /// `hook_name` of a hook.
    pub hook_name: Option<String>,
    /// Its command line.
    pub argv: Vec<String>,
    /// Its pid (`child_exit`/`child_ready`).
    pub pid: Option<i64>,
    /// Exit code (`child_exit`).
    pub code: Option<i64>,
    /// `ready` of `child_ready`.
    pub ready: Option<String>,
    /// Its elapsed time seen by the parent; `None` while it never ended in the trace.
    pub elapsed_us: Option<i64>,
    /// SIDs of the traced processes it started (a git child, or the gits a hook ran).
    pub processes: Vec<String>,
}

/// A timer.
#[derive(Debug, Clone, Serialize)]
pub struct TimerSummary {
    /// Category.
    pub category: String,
    /// Name.
    pub name: String,
    /// True for `th_timer` values summed over `threads` threads.
    pub per_thread: bool,
    /// Threads summed (1 for a process total).
    pub threads: u64,
    /// Intervals.
    pub intervals: i64,
    /// Total time.
    pub total_us: i64,
    /// Shortest interval.
    pub min_us: i64,
    /// Longest interval.
    pub max_us: i64,
}

/// A counter.
#[derive(Debug, Clone, Serialize)]
pub struct CounterSummary {
    /// Category.
    pub category: String,
    /// Name.
    pub name: String,
    /// True for `th_counter` values summed over `threads` threads.
    pub per_thread: bool,
    /// Threads summed (1 for a process total).
    pub threads: u64,
    /// Value.
    pub count: i64,
}

#[derive(Default)]
struct ProcessStats {
    order: usize,
    clock: Clock,
    first_us: Option<i64>,
    events: u64,
    exe_version: Option<String>,
    argv: Vec<String>,
    cmd_name: Option<String>,
    hierarchy: Option<String>,
    cmd_mode: Option<String>,
    alias: Option<String>,
    exit_code: Option<i64>,
    signal: Option<i64>,
    end_t_abs: Option<i64>,
    atexit_seen: bool,
    last_t_abs: i64,
    regions: HashMap<String, HashMap<String, RegionSummary>>,
    stacks: HashMap<String, Vec<OpenRegion>>,
    unclosed_regions: u64,
    children: Vec<ChildSummary>,
    children_not_listed: u64,
    open_children: HashMap<i64, usize>,
    /// Launches for linking child processes, with the child's index or `None` for an exec.
    launches: Vec<(Launch, Option<usize>)>,
    threads: u64,
    timers: BTreeMap<(String, String, bool), TimerSummary>,
    counters: BTreeMap<(String, String, bool), CounterSummary>,
    errors: u64,
    first_errors: Vec<String>,
}

struct OpenRegion {
    nesting: i64,
    /// Time of the regions directly nested in it, so far.
    child_us: i64,
}

impl Summariser {
    /// An empty summariser.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one event into account.
    pub fn event(&mut self, event: &TraceEvent<'_>) {
        let next = self.processes.len();
        let process = match self.processes.get_mut(&*event.sid) {
            Some(process) => process,
            None => self
                .processes
                .entry(event.sid.to_string())
                .or_insert_with(|| ProcessStats {
                    order: next,
                    ..ProcessStats::default()
                }),
        };
        process.event(event);
    }

    /// The summary of everything read.
    pub fn finish(self) -> Summary {
        let mut processes: Vec<(String, ProcessStats)> = self.processes.into_iter().collect();
        processes.sort_by_key(|(_, p)| (p.first_us, p.order));
        let index: HashMap<&str, usize> = processes
            .iter()
            .enumerate()
            .map(|(i, (sid, _))| (sid.as_str(), i))
            .collect();

        // Parent of each process (when in the input) and how the parent started it.
        let mut parent = vec![None; processes.len()];
        let mut links = Vec::new();
        for (i, (sid, stats)) in processes.iter().enumerate() {
            let Some(&p) = parent_sid(sid).and_then(|up| index.get(up)) else {
                continue;
            };
            parent[i] = Some(p);
            let launches: Vec<Launch> = processes[p]
                .1
                .launches
                .iter()
                .map(|l| l.0.clone())
                .collect();
            let start = stats.first_us.unwrap_or(i64::MIN);
            if let Some(l) = match_launch(&launches, start, argv_tail_hash(&stats.argv)) {
                links.push((i, p, processes[p].1.launches[l].1));
            }
        }
        let mut started_as = vec![None; processes.len()];
        for (child, p, launch) in links {
            match launch {
                Some(c) => {
                    let sid = processes[child].0.clone();
                    let info = &mut processes[p].1.children[c];
                    started_as[child] = Some(match &info.hook_name {
                        Some(hook) => format!("{} {hook}", info.class),
                        None => info.class.clone(),
                    });
                    info.processes.push(sid);
                }
                None => started_as[child] = Some("exec".to_owned()),
            }
        }

        // Tree order: roots by start, each followed by its children by start.
        let mut kids: Vec<Vec<usize>> = vec![Vec::new(); processes.len()];
        let mut roots = Vec::new();
        for (i, up) in parent.iter().enumerate() {
            match up {
                Some(p) => kids[*p].push(i),
                None => roots.push(i),
            }
        }
        let mut order = Vec::with_capacity(processes.len());
        let mut todo: Vec<(usize, usize)> = roots.iter().rev().map(|&r| (r, 0)).collect();
        while let Some((i, depth)) = todo.pop() {
            order.push((i, depth));
            todo.extend(kids[i].iter().rev().map(|&k| (k, depth + 1)));
        }

        let mut slots: Vec<Option<(String, ProcessStats)>> =
            processes.into_iter().map(Some).collect();
        let parent_sids: Vec<Option<String>> = parent
            .iter()
            .map(|p| p.and_then(|p| slots[p].as_ref().map(|(sid, _)| sid.clone())))
            .collect();
        let processes = order
            .into_iter()
            .filter_map(|(i, depth)| {
                let (sid, stats) = slots[i].take()?;
                Some(stats.into_summary(sid, parent_sids[i].clone(), depth, started_as[i].take()))
            })
            .collect();
        Summary { processes }
    }
}

impl ProcessStats {
    fn event(&mut self, event: &TraceEvent<'_>) {
        self.events += 1;
        let at = self.clock.at(event);
        self.first_us.get_or_insert(at);
        if let Some(t_abs) = event.t_abs_us {
            self.last_t_abs = self.last_t_abs.max(t_abs);
        }
        match &event.kind {
            Kind::Version { exe } => self.exe_version = exe.as_deref().map(str::to_owned),
            Kind::Start { .. } => self.argv = argv_of(event).unwrap_or_default(),
            Kind::CmdName { name, hierarchy } => {
                self.cmd_name = Some(name.to_string());
                self.hierarchy = hierarchy.as_deref().map(str::to_owned);
            }
            Kind::CmdMode { name } => self.cmd_mode = Some(name.to_string()),
            Kind::Alias { alias, .. } => self.alias = Some(alias.to_string()),
            Kind::RegionEnter(region) => self.enter(&event.thread, region),
            Kind::RegionLeave(region, duration) => self.leave(&event.thread, region, *duration),
            Kind::Error { msg, fmt } => {
                self.errors += 1;
                if self.first_errors.len() < MAX_ERRORS {
                    let text = msg.as_deref().or(fmt.as_deref()).unwrap_or("");
                    self.first_errors.push(text.to_owned());
                }
            }
            Kind::ChildStart { .. } => self.child_start(event, at),
            Kind::ChildEnd { .. } => self.child_end(event, at),
            Kind::Exec { .. } if self.launches.len() < 2 * MAX_CHILDREN => {
                let argv = argv_of(event).unwrap_or_default();
                self.launches.push((
                    Launch {
                        start_us: at,
                        end_us: None,
                        argv_tail: argv_tail_hash(&argv),
                    },
                    None,
                ));
            }
            Kind::ThreadStart => self.threads += 1,
            // Git never reuses a thread name: forget an exited thread's (empty) stack.
            Kind::ThreadExit(_) if self.stacks.get(&*event.thread).is_some_and(Vec::is_empty) => {
                self.stacks.remove(&*event.thread);
            }
            Kind::Timer { .. } => self.timer(event),
            Kind::Counter { .. } => self.counter(event),
            Kind::Exit { code } => {
                // A later atexit (the same process, or a forked one under the same SID) wins.
                if !self.atexit_seen {
                    self.exit_code = Some(*code);
                }
                self.end(event.t_abs_us);
            }
            Kind::Atexit { code } => {
                self.atexit_seen = true;
                self.exit_code = Some(*code);
                self.end(event.t_abs_us);
            }
            Kind::Signal { signo } => {
                self.signal = Some(*signo);
                self.end(event.t_abs_us);
            }
            _ => {}
        }
    }

    /// `child_start`: a child listed, and a launch to link the child process to.
    fn child_start(&mut self, event: &TraceEvent<'_>, at: i64) {
        let Kind::ChildStart {
            child_id,
            class,
            hook_name,
            ..
        } = &event.kind
        else {
            return;
        };
        if self.children.len() >= MAX_CHILDREN {
            self.children_not_listed += 1;
            return;
        }
        let argv = argv_of(event).unwrap_or_default();
        let index = self.children.len();
        self.launches.push((
            Launch {
                start_us: at,
                end_us: None,
                argv_tail: argv_tail_hash(&argv),
            },
            Some(index),
        ));
        self.children.push(ChildSummary {
            child_id: *child_id,
            class: class.to_string(),
            hook_name: hook_name.as_deref().map(str::to_owned),
            argv,
            pid: None,
            code: None,
            ready: None,
            elapsed_us: None,
            processes: Vec::new(),
        });
        self.open_children.insert(*child_id, index);
    }

    /// `child_exit`/`child_ready`: how the child ended.
    fn child_end(&mut self, event: &TraceEvent<'_>, at: i64) {
        let Kind::ChildEnd {
            child_id,
            pid,
            code,
            ready,
            elapsed_us,
        } = &event.kind
        else {
            return;
        };
        if let Some(index) = self.open_children.remove(child_id) {
            let child = &mut self.children[index];
            child.pid = *pid;
            child.code = *code;
            child.ready = ready.as_deref().map(str::to_owned);
            child.elapsed_us = Some(*elapsed_us);
            if let Some((launch, _)) = self
                .launches
                .iter_mut()
                .rev()
                .find(|(_, c)| *c == Some(index))
            {
                launch.end_us = Some(at);
            }
        }
    }

    /// `timer`/`th_timer`: summed per category and name.
    fn timer(&mut self, event: &TraceEvent<'_>) {
        let Kind::Timer {
            per_thread,
            category,
            name,
            intervals,
            total_us,
            min_us,
            max_us,
        } = &event.kind
        else {
            return;
        };
        let key = (category.to_string(), name.to_string(), *per_thread);
        let timer = self.timers.entry(key).or_insert_with(|| TimerSummary {
            category: category.to_string(),
            name: name.to_string(),
            per_thread: *per_thread,
            threads: 0,
            intervals: 0,
            total_us: 0,
            min_us: i64::MAX,
            max_us: 0,
        });
        timer.threads += 1;
        timer.intervals = timer.intervals.saturating_add(*intervals);
        timer.total_us = timer.total_us.saturating_add(*total_us);
        timer.min_us = timer.min_us.min(*min_us);
        timer.max_us = timer.max_us.max(*max_us);
    }

    /// `counter`/`th_counter`: summed per category and name.
    fn counter(&mut self, event: &TraceEvent<'_>) {
        let Kind::Counter {
            per_thread,
            category,
            name,
            count,
        } = &event.kind
        else {
            return;
        };
        let key = (category.to_string(), name.to_string(), *per_thread);
        let counter = self.counters.entry(key).or_insert_with(|| CounterSummary {
            category: category.to_string(),
            name: name.to_string(),
            per_thread: *per_thread,
            threads: 0,
            count: 0,
        });
        counter.threads += 1;
        counter.count = counter.count.wrapping_add(*count);
    }

    fn end(&mut self, t_abs: Option<i64>) {
        let t_abs = t_abs.unwrap_or(self.last_t_abs);
        self.end_t_abs = Some(self.end_t_abs.map_or(t_abs, |end| end.max(t_abs)));
    }

    /// For a process whose trace stops without an end: the latest time known of it, from its
    /// lines' `t_abs` and from their wall time on its clock (a region left after the last line
    /// with `t_abs` still happened while the process ran).
    fn last_known_t_abs(&self) -> i64 {
        let by_wall_time = match (self.clock.zero_us, self.clock.last_us) {
            (Some(zero), Some(last)) => last - zero,
            _ => 0,
        };
        self.last_t_abs.max(by_wall_time)
    }

    fn stack(&mut self, thread: &str) -> &mut Vec<OpenRegion> {
        if !self.stacks.contains_key(thread) {
            self.stacks.insert(thread.to_owned(), Vec::new());
        }
        self.stacks.get_mut(thread).expect("inserted above")
    }

    fn enter(&mut self, thread: &str, region: &Region<'_>) {
        let stack = self.stack(thread);
        // Regions at this level or deeper that are still open were never left (lost lines).
        let stale = stack
            .iter()
            .rposition(|open| open.nesting < region.nesting)
            .map_or(0, |p| p + 1);
        let unclosed = (stack.len() - stale) as u64;
        stack.truncate(stale);
        stack.push(OpenRegion {
            nesting: region.nesting,
            child_us: 0,
        });
        self.unclosed_regions += unclosed;
    }

    fn leave(&mut self, thread: &str, region: &Region<'_>, duration: i64) {
        let stack = self.stack(thread);
        let mut unclosed = 0;
        let mut nested = 0;
        if let Some(at) = stack
            .iter()
            .rposition(|open| open.nesting == region.nesting)
        {
            unclosed = (stack.len() - at - 1) as u64;
            stack.truncate(at + 1);
            nested = stack.pop().map_or(0, |open| open.child_us);
        }
        if let Some(outer) = stack.last_mut()
            && outer.nesting == region.nesting - 1
        {
            outer.child_us = outer.child_us.saturating_add(duration);
        }
        self.unclosed_regions += unclosed;

        let category = region.category.as_deref().unwrap_or("");
        let label = region.label.as_deref().unwrap_or("");
        let by_label = match self.regions.get_mut(category) {
            Some(by_label) => by_label,
            None => self.regions.entry(category.to_owned()).or_default(),
        };
        let stats = match by_label.get_mut(label) {
            Some(stats) => stats,
            None => by_label.entry(label.to_owned()).or_default(),
        };
        stats.count += 1;
        stats.total_us = stats.total_us.saturating_add(duration);
        stats.self_us = stats.self_us.saturating_add((duration - nested).max(0));
        stats.max_us = stats.max_us.max(duration);
    }

    fn into_summary(
        self,
        sid: String,
        parent_sid: Option<String>,
        depth: usize,
        started_as: Option<String>,
    ) -> ProcessSummary {
        let elapsed_us = self.end_t_abs.unwrap_or_else(|| self.last_known_t_abs());
        let mut regions: Vec<RegionSummary> = self
            .regions
            .into_iter()
            .flat_map(|(category, by_label)| {
                by_label
                    .into_iter()
                    .map(move |(label, stats)| RegionSummary {
                        category: category.clone(),
                        label,
                        ..stats
                    })
            })
            .collect();
        regions.sort_by(|a, b| {
            (b.total_us, &a.category, &a.label).cmp(&(a.total_us, &b.category, &b.label))
        });
        let unclosed_regions =
            self.unclosed_regions + self.stacks.values().map(|s| s.len() as u64).sum::<u64>();
        let mut timers: Vec<TimerSummary> = self.timers.into_values().collect();
        timers.sort_by_key(|t| t.per_thread);
        let mut counters: Vec<CounterSummary> = self.counters.into_values().collect();
        counters.sort_by_key(|c| c.per_thread);
        ProcessSummary {
            pid: pid_from_sid(&sid),
            name: qualified_name(
                &self.argv,
                self.cmd_name.as_deref(),
                self.cmd_mode.as_deref(),
            ),
            sid,
            parent_sid,
            depth,
            argv: self.argv,
            cmd_name: self.cmd_name,
            hierarchy: self.hierarchy,
            cmd_mode: self.cmd_mode,
            alias: self.alias,
            exe_version: self.exe_version,
            started_as,
            exit_code: self.exit_code,
            signal: self.signal,
            start_unix_us: self.first_us,
            elapsed_us,
            ended: self.end_t_abs.is_some(),
            regions,
            unclosed_regions,
            children: self.children,
            children_not_listed: self.children_not_listed,
            threads: self.threads,
            timers,
            counters,
            errors: self.errors,
            first_errors: self.first_errors,
            events: self.events,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
