//! The process model behind every export format: which process and thread an event belongs to
//! (a pid per process, a tid per Trace2 thread), its slices kept strictly nested per track
//! (module `track`), its children and launches, and at the end the flows from parents to
//! children. What it finds goes to an [`ExportSink`], which only encodes.
//!
//! Memory: per process its metadata, the open slices of each live thread and its launches (for
//! the flows, which are made at the end); nothing grows with the number of lines.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;

use serde_json::{Map, Value, json};

use super::sink::{
    Arg, Child, ExportSink, Flow, Instant, ProcessEnd, RegionArgs, Scope, Slice, TrackId,
};
use super::track::{Closed, Track};
use crate::process::{
    Clock, Launch, argv_of, argv_tail_hash, command_line, hash_str, match_launch, parent_sid,
    pid_from_sid, qualified_name,
};
use crate::trace_event::{Kind, Region, TraceEvent};

/// Launches kept per process for flow links; later ones get no flow arrow.
const MAX_LAUNCHES: usize = 10_000;
/// Keys merged into a process slice's `data` and `params` args.
const MAX_PROCESS_ARGS: usize = 256;
/// Extra tracks per thread for regions that fit nowhere on the thread's own track.
const MAX_OVERFLOW_TRACKS: usize = 8;
/// First pid handed out when a SID's pid is taken or missing: above Linux's pid range.
const FIRST_SPARE_PID: u32 = 1 << 22 | 1;
/// First tid of threads other than `main`.
const FIRST_TID: u32 = 100_000_000;

/// What an export wrote.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExportStats {
    /// Trace events (Chrome) or packets (Perfetto) written.
    pub events: u64,
    /// Processes.
    pub processes: usize,
    /// Region slices that had to go on a separate track (damaged input).
    pub moved_slices: u64,
    /// Flows from a parent to a child process.
    pub flows: usize,
}

/// Streams events into a format: `Exporter<ChromeSink<W>>` is the Chrome export,
/// `Exporter<PerfettoSink<W>>` the Perfetto one.
pub struct Exporter<S: ExportSink> {
    sink: S,
    processes: HashMap<String, ProcessState>,
    pids: HashSet<u32>,
    next_spare_pid: u32,
    next_tid: u32,
    moved_slices: u64,
}

#[derive(Default)]
struct ProcessState {
    pid: u32,
    order: usize,
    clock: Clock,
    first_us: i64,
    end_us: Option<i64>,
    argv: Vec<String>,
    exe_version: Option<String>,
    cmd_name: Option<String>,
    hierarchy: Option<String>,
    cmd_mode: Option<String>,
    alias: Option<String>,
    exit_code: Option<i64>,
    signal: Option<i64>,
    threads: HashMap<String, ThreadTrack>,
    open_children: HashMap<i64, OpenChild>,
    launches: Vec<(Launch, u32)>,
    timers: BTreeMap<String, Value>,
    counters: BTreeMap<String, Value>,
    data: Map<String, Value>,
    params: Map<String, Value>,
    worktrees: BTreeMap<i64, String>,
}

struct OpenChild {
    name: String,
    tid: u32,
    launch: Option<usize>,
}

struct ThreadTrack {
    tid: u32,
    track: Track<Slice>,
    overflow: Vec<(u32, i64)>,
}

/// A process closed at the end of input, before its slice is handed out.
struct Finished {
    start_us: i64,
    end_us: i64,
    incomplete: bool,
    args: Map<String, Value>,
}

impl Slice {
    fn region(event: &TraceEvent<'_>, region: &Region<'_>, unmatched_leave: bool) -> Slice {
        Slice {
            name: region_name(
                region.category.as_deref(),
                region.label.as_deref(),
                region.msg.as_deref(),
            ),
            kind: "region",
            cat: region.category.as_deref().map(str::to_owned),
            region: Some(RegionArgs {
                msg: region.msg.as_deref().map(str::to_owned),
                repo: event.repo,
                nesting: region.nesting,
                file: event.file.as_deref().map(str::to_owned),
                line: event.line,
                unmatched_leave,
            }),
            args: Map::new(),
        }
    }

    fn lifetime(name: String, kind: &'static str) -> Slice {
        Slice {
            name,
            kind,
            cat: None,
            region: None,
            args: Map::new(),
        }
    }
}

/// Hands each slice the track closes to the sink, keeping the first error.
fn forward<'s, S: ExportSink>(
    sink: &'s mut S,
    track: TrackId,
    result: &'s mut io::Result<()>,
) -> impl FnMut(Closed<Slice>) + 's {
    move |closed| {
        if result.is_ok() {
            *result = sink.close_slice(track, closed);
        }
    }
}

impl<S: ExportSink> Exporter<S> {
    /// An exporter writing to `sink`.
    pub fn with_sink(sink: S) -> Self {
        Exporter {
            sink,
            processes: HashMap::new(),
            pids: HashSet::new(),
            next_spare_pid: FIRST_SPARE_PID,
            next_tid: FIRST_TID,
            moved_slices: 0,
        }
    }

    fn spare_pid(&mut self) -> u32 {
        while self.pids.contains(&self.next_spare_pid) {
            self.next_spare_pid += 1;
        }
        self.pids.insert(self.next_spare_pid);
        self.next_spare_pid
    }

    /// The process of `event`, created on its first line.
    fn process_of(&mut self, event: &TraceEvent<'_>) -> io::Result<()> {
        if self.processes.contains_key(&*event.sid) {
            return Ok(());
        }
        let pid = match pid_from_sid(&event.sid) {
            Some(pid) if pid != 0 && self.pids.insert(pid) => pid,
            _ => self.spare_pid(),
        };
        let process = ProcessState {
            pid,
            order: self.processes.len(),
            ..ProcessState::default()
        };
        self.processes.insert(event.sid.to_string(), process);
        self.sink.process_track(pid, &event.sid)
    }

    /// The thread of `event` in its process, created (with its track) on its first line. The
    /// `main` thread's track has the process slice as its base.
    fn thread_of(&mut self, event: &TraceEvent<'_>, at: i64) -> io::Result<()> {
        let process = self.processes.get_mut(&*event.sid).expect("created first");
        if process.threads.contains_key(&*event.thread) {
            return Ok(());
        }
        let main = event.thread == "main";
        let tid = if main {
            process.pid
        } else {
            self.next_tid += 1;
            self.next_tid
        };
        let mut thread = ThreadTrack {
            tid,
            track: Track::default(),
            overflow: Vec::new(),
        };
        if main {
            let base = Slice::lifetime(String::new(), "process");
            thread.track.open_base(at, base, &mut |_| {});
        }
        process.threads.insert(event.thread.to_string(), thread);
        let track = TrackId {
            pid: process.pid,
            tid,
        };
        self.sink
            .thread_track(track, &event.thread, Some(thread_index(&event.thread)))
    }

    /// Writes what `event` shows.
    pub fn event(&mut self, event: &TraceEvent<'_>) -> io::Result<()> {
        self.process_of(event)?;
        let process = self.processes.get_mut(&*event.sid).expect("created above");
        let new_process = process.clock.last_us.is_none();
        let had_zero = process.clock.zero_us.is_some();
        let at = process.clock.at(event);
        if new_process {
            process.first_us = at;
        }
        self.thread_of(event, at)?;
        let process = self.processes.get_mut(&*event.sid).expect("created above");
        if !had_zero
            && let Some(zero) = process.clock.zero_us
            && let Some(main) = process.threads.get_mut("main")
        {
            main.track.lower_base_start(zero);
        }
        let sink = &mut self.sink;
        let thread = process.threads.get_mut(&*event.thread).expect("created");
        let track = TrackId {
            pid: process.pid,
            tid: thread.tid,
        };
        match &event.kind {
            Kind::RegionEnter(region) => {
                let mut result = Ok(());
                let slice = Slice::region(event, region, false);
                let nesting = region.nesting;
                thread
                    .track
                    .open(nesting, at, slice, &mut forward(sink, track, &mut result));
                result?;
                if let Some(slice) = thread.track.top_payload() {
                    sink.open_slice(track, at, slice)?;
                }
            }
            Kind::RegionLeave(region, duration) => {
                let mut result = Ok(());
                let closed = thread.track.close(
                    region.nesting,
                    at,
                    *duration,
                    &mut forward(sink, track, &mut result),
                );
                result?;
                if !closed {
                    let slice = Slice::region(event, region, true);
                    let ids = (&mut self.next_tid, &mut self.moved_slices);
                    let place = (track, &*event.thread, at, *duration);
                    unmatched_leave(sink, thread, place, slice, ids)?;
                }
            }
            Kind::ThreadStart if event.thread != "main" => {
                let name = event.thread.to_string();
                let mut result = Ok(());
                let base = Slice::lifetime(name, "thread");
                thread
                    .track
                    .open_base(at, base, &mut forward(sink, track, &mut result));
                result?;
                if let Some(slice) = thread.track.top_payload() {
                    sink.open_slice(track, at, slice)?;
                }
            }
            Kind::ThreadExit(lifetime) if event.thread != "main" => {
                let mut result = Ok(());
                let lifetime = *lifetime;
                thread
                    .track
                    .close_base(at, lifetime, &mut forward(sink, track, &mut result));
                result?;
                // A thread that exited is forgotten: memory follows the live threads.
                if thread.track.is_empty() {
                    process.threads.remove(&*event.thread);
                    sink.track_done(track)?;
                }
            }
            Kind::Timer { .. } | Kind::Counter { .. } => {
                let maps = (&mut process.timers, &mut process.counters);
                values(sink, maps, thread, track, at, event)?;
            }
            _ => process_event(sink, process, track, at, event)?,
        }
        Ok(())
    }

    /// Closes what is still open, hands out the process slices and the flows between
    /// processes, and ends the output.
    pub fn finish(mut self) -> io::Result<(S::Output, ExportStats)> {
        let mut processes: Vec<(String, ProcessState)> = self.processes.drain().collect();
        processes.sort_by_key(|(_, p)| (p.first_us, p.order));
        let mut finished = Vec::with_capacity(processes.len());
        for (sid, process) in processes.iter_mut() {
            finished.push(close_process(&mut self.sink, sid, process)?);
        }
        let flows = flows(&processes, &finished);
        // Flows first: a reader that meets a flow's end before its start at the same time
        // would drop it.
        for flow in &flows {
            self.sink.flow(flow)?;
        }
        let mut flow_in: HashMap<u32, u64> = flows.iter().map(|f| (f.to_pid, f.id)).collect();
        for (sort_index, ((sid, process), done)) in processes.iter().zip(finished).enumerate() {
            let name = qualified_name(
                &process.argv,
                process.cmd_name.as_deref(),
                process.cmd_mode.as_deref(),
            );
            self.sink.process_end(ProcessEnd {
                pid: process.pid,
                sid,
                name: &name,
                sort_index,
                start_us: done.start_us,
                end_us: done.end_us,
                incomplete: done.incomplete,
                args: done.args,
                flow_in: flow_in.remove(&process.pid),
            })?;
        }
        let in_input: HashSet<&str> = processes.iter().map(|(sid, _)| sid.as_str()).collect();
        let root = processes
            .iter()
            .find(|(sid, _)| parent_sid(sid).is_none_or(|up| !in_input.contains(up)))
            .map(|(sid, _)| sid.as_str());
        let stats = ExportStats {
            events: self.sink.events(),
            processes: processes.len(),
            moved_slices: self.moved_slices,
            flows: flows.len(),
        };
        Ok((self.sink.finish(root, processes.len())?, stats))
    }
}

/// A leave without its enter: its slice is known from the leave alone. It goes on the thread's
/// track when it fits after everything closed there, else on an extra track where it does not
/// overlap.
fn unmatched_leave<S: ExportSink>(
    sink: &mut S,
    thread: &mut ThreadTrack,
    (track, thread_name, at, duration): (TrackId, &str, i64, i64),
    slice: Slice,
    (next_tid, moved_slices): (&mut u32, &mut u64),
) -> io::Result<()> {
    let start = at - duration;
    if let Some((start, end)) = thread.track.place(start, at) {
        return sink.leaf_slice(track, whole(start, end, slice));
    }
    let slot = match thread.overflow.iter().position(|&(_, end)| end <= start) {
        Some(slot) => slot,
        None if thread.overflow.len() < MAX_OVERFLOW_TRACKS => {
            *next_tid += 1;
            thread.overflow.push((*next_tid, i64::MIN));
            let extra = TrackId {
                pid: track.pid,
                tid: *next_tid,
            };
            let name = format!(
                "{thread_name} (unmatched regions {})",
                thread.overflow.len()
            );
            sink.thread_track(extra, &name, None)?;
            thread.overflow.len() - 1
        }
        None => thread.overflow.len() - 1,
    };
    let (overflow_tid, last_end) = thread.overflow[slot];
    let start = start.max(last_end);
    let end = at.max(start);
    thread.overflow[slot].1 = end;
    *moved_slices += 1;
    let extra = TrackId {
        pid: track.pid,
        tid: overflow_tid,
    };
    sink.leaf_slice(extra, whole(start, end, slice))
}

fn whole(start: i64, end: i64, payload: Slice) -> Closed<Slice> {
    Closed {
        start,
        end,
        payload,
        incomplete: false,
    }
}

/// `timer`, `th_timer`, `counter`, `th_counter`: a counter series, and the value in the process
/// slice's (or the thread slice's) args.
fn values<S: ExportSink>(
    sink: &mut S,
    (timers, counters): (&mut BTreeMap<String, Value>, &mut BTreeMap<String, Value>),
    thread: &mut ThreadTrack,
    track: TrackId,
    at: i64,
    event: &TraceEvent<'_>,
) -> io::Result<()> {
    match &event.kind {
        Kind::Timer {
            per_thread,
            category,
            name,
            intervals,
            total_us,
            min_us,
            max_us,
        } => {
            let stats = json!({"intervals": intervals, "total_us": total_us, "min_us": min_us, "max_us": max_us});
            let key = format!("{category}/{name}");
            let series = if *per_thread {
                if let Some(base) = thread.track.base_payload() {
                    add_to(&mut base.args, "th_timers", &key, stats);
                }
                format!("{key} timer ({})", event.thread)
            } else {
                timers.insert(key.clone(), stats);
                format!("{key} timer")
            };
            sink.counter(track.pid, at, &series, "total_us", *total_us)
        }
        Kind::Counter {
            per_thread,
            category,
            name,
            count,
        } => {
            let key = format!("{category}/{name}");
            let series = if *per_thread {
                if let Some(base) = thread.track.base_payload() {
                    add_to(&mut base.args, "th_counters", &key, Value::from(*count));
                }
                format!("{key} ({})", event.thread)
            } else {
                counters.insert(key.clone(), Value::from(*count));
                key
            };
            sink.counter(track.pid, at, &series, "value", *count)
        }
        _ => Ok(()),
    }
}

/// Events that change what the process is (its metadata) or show as an instant.
fn process_event<S: ExportSink>(
    sink: &mut S,
    process: &mut ProcessState,
    track: TrackId,
    at: i64,
    event: &TraceEvent<'_>,
) -> io::Result<()> {
    let instant = |sink: &mut S, name: &str, category: &str, args: &[(&str, Arg<'_>)]| {
        let scope = Scope::Thread;
        sink.instant(
            track,
            at,
            &Instant {
                name,
                category,
                scope,
                args,
            },
        )
    };
    match &event.kind {
        Kind::Version { exe } => process.exe_version = exe.as_deref().map(str::to_owned),
        Kind::Start { .. } => process.argv = argv_of(event).unwrap_or_default(),
        Kind::CmdName { name, hierarchy } => {
            process.cmd_name = Some(name.to_string());
            process.hierarchy = hierarchy.as_deref().map(str::to_owned);
            instant(sink, "cmd_name", "process", &[("name", Arg::Str(name))])?;
        }
        Kind::CmdMode { name } => {
            process.cmd_mode = Some(name.to_string());
            instant(sink, "cmd_mode", "process", &[("name", Arg::Str(name))])?;
        }
        Kind::Alias { alias, argv } => {
            process.alias = Some(alias.to_string());
            let args = [("alias", Arg::Str(alias)), ("argv", Arg::Words(argv))];
            instant(sink, "alias", "process", &args)?;
        }
        Kind::DefParam {
            scope,
            param,
            value,
        } => {
            // A key set without a value (`git -c foo.bar`) has no `value` arg, and
            // `null` among the process's params.
            if process.params.len() < MAX_PROCESS_ARGS {
                let value = value.as_deref().map_or(Value::Null, Value::from);
                process.params.insert(param.to_string(), value);
            }
            let mut args = vec![("param", Arg::Str(param))];
            if let Some(value) = value {
                args.push(("value", Arg::Str(value)));
            }
            if let Some(scope) = scope {
                args.push(("scope", Arg::Str(scope)));
            }
            instant(sink, "def_param", "process", &args)?;
        }
        Kind::DefRepo { worktree } => {
            let repo = event.repo.unwrap_or(0);
            if process.worktrees.len() < MAX_PROCESS_ARGS {
                process.worktrees.insert(repo, worktree.to_string());
            }
            let args = [("repo", Arg::Int(repo)), ("worktree", Arg::Str(worktree))];
            instant(sink, "def_repo", "process", &args)?;
        }
        Kind::Data { .. } => data(sink, process, track, at, event)?,
        Kind::Printf { msg } => {
            let text = msg.as_deref().unwrap_or("");
            instant(sink, &short(text), "printf", &[("msg", Arg::Str(text))])?;
        }
        Kind::Error { msg, fmt } => {
            let text = msg.as_deref().or(fmt.as_deref()).unwrap_or("");
            let mut args = vec![("msg", Arg::Str(text))];
            if let Some(fmt) = fmt {
                args.push(("fmt", Arg::Str(fmt)));
            }
            instant(sink, &format!("error: {}", short(text)), "error", &args)?;
        }
        Kind::ChildStart { .. } => child_start(sink, process, track, at, event)?,
        Kind::ChildEnd { .. } => child_end(sink, process, track, at, event)?,
        Kind::Exec { exec_id, argv } => {
            if process.launches.len() < MAX_LAUNCHES {
                let launch = Launch {
                    start_us: at,
                    end_us: None,
                    argv_tail: argv_tail_hash(argv),
                };
                process.launches.push((launch, track.tid));
            }
            let words = argv_of(event).unwrap_or_default();
            let name = format!("exec {}", command_line(&words, 60));
            let args = [("exec_id", Arg::Int(*exec_id)), ("argv", Arg::Words(argv))];
            instant(sink, &name, "exec", &args)?;
        }
        Kind::ExecResult { exec_id, code } => {
            let args = [("exec_id", Arg::Int(*exec_id)), ("code", Arg::Int(*code))];
            instant(sink, "exec_result", "exec", &args)?;
        }
        Kind::Exit { code } | Kind::Atexit { code } => {
            process.exit_code = Some(*code);
            process.end_us = Some(process.end_us.map_or(at, |end| end.max(at)));
            let args = [("code", Arg::Int(*code))];
            process_instant(sink, track, at, event.name(), &args)?;
        }
        Kind::Signal { signo } => {
            process.signal = Some(*signo);
            process.end_us = Some(process.end_us.map_or(at, |end| end.max(at)));
            let args = [("signo", Arg::Int(*signo))];
            process_instant(sink, track, at, "signal", &args)?;
        }
        _ => {}
    }
    Ok(())
}

fn process_instant<S: ExportSink>(
    sink: &mut S,
    track: TrackId,
    at: i64,
    name: &str,
    args: &[(&str, Arg<'_>)],
) -> io::Result<()> {
    let instant = Instant {
        name,
        category: "process",
        scope: Scope::Process,
        args,
    };
    sink.instant(track, at, &instant)
}

/// `data` and `data_json`: an instant, and (at nesting 1) a key of the process slice's `data`.
fn data<S: ExportSink>(
    sink: &mut S,
    process: &mut ProcessState,
    track: TrackId,
    at: i64,
    event: &TraceEvent<'_>,
) -> io::Result<()> {
    let Kind::Data {
        nesting,
        category,
        key,
        value,
        json,
    } = &event.kind
    else {
        return Ok(());
    };
    if *nesting <= 1 && process.data.len() < MAX_PROCESS_ARGS {
        let value = if *json {
            serde_json::from_str(value).unwrap_or(Value::Null)
        } else {
            Value::from(value.as_ref())
        };
        process.data.insert(format!("{category}/{key}"), value);
    }
    let shown = if *json {
        Arg::Json(value)
    } else {
        Arg::Str(value)
    };
    let args = [("value", shown), ("nesting", Arg::Int(*nesting))];
    let instant = Instant {
        name: key,
        category,
        scope: Scope::Thread,
        args: &args,
    };
    sink.instant(track, at, &instant)
}

fn child_start<S: ExportSink>(
    sink: &mut S,
    process: &mut ProcessState,
    track: TrackId,
    at: i64,
    event: &TraceEvent<'_>,
) -> io::Result<()> {
    let Kind::ChildStart {
        child_id,
        class,
        hook_name,
        argv,
    } = &event.kind
    else {
        return Ok(());
    };
    let launch = (process.launches.len() < MAX_LAUNCHES).then(|| {
        let launch = Launch {
            start_us: at,
            end_us: None,
            argv_tail: argv_tail_hash(argv),
        };
        process.launches.push((launch, track.tid));
        process.launches.len() - 1
    });
    let name = match hook_name {
        Some(hook) => format!("hook {hook}"),
        None => {
            let words = argv_of(event).unwrap_or_default();
            format!("child: {}", command_line(&words, 60))
        }
    };
    let mut args = vec![("class", Arg::Str(class)), ("argv", Arg::Words(argv))];
    if let Some(hook) = hook_name {
        args.push(("hook", Arg::Str(hook)));
    }
    let child = Child {
        name: &name,
        child_id: *child_id,
    };
    sink.child_begin(track, at, &child, &args)?;
    let open = OpenChild {
        name,
        tid: track.tid,
        launch,
    };
    process.open_children.insert(*child_id, open);
    Ok(())
}

fn child_end<S: ExportSink>(
    sink: &mut S,
    process: &mut ProcessState,
    track: TrackId,
    at: i64,
    event: &TraceEvent<'_>,
) -> io::Result<()> {
    let Kind::ChildEnd {
        child_id,
        pid,
        code,
        ready,
        elapsed_us,
    } = &event.kind
    else {
        return Ok(());
    };
    let Some(open) = process.open_children.remove(child_id) else {
        return Ok(());
    };
    if let Some((launch, _)) = open.launch.and_then(|l| process.launches.get_mut(l)) {
        launch.end_us = Some(at);
    }
    let mut args = Vec::with_capacity(4);
    if let Some(pid) = pid {
        args.push(("pid", Arg::Int(*pid)));
    }
    if let Some(code) = code {
        args.push(("code", Arg::Int(*code)));
    }
    if let Some(ready) = ready {
        args.push(("ready", Arg::Str(ready)));
    }
    args.push(("elapsed_us", Arg::Int(*elapsed_us)));
    let child = Child {
        name: &open.name,
        child_id: *child_id,
    };
    let on = TrackId {
        pid: track.pid,
        tid: open.tid,
    };
    sink.child_end(on, at, &child, &args)
}

/// Closes a process's tracks (its regions as incomplete) and children at the end of input;
/// gives back its slice's bounds and args.
fn close_process<S: ExportSink>(
    sink: &mut S,
    sid: &str,
    process: &mut ProcessState,
) -> io::Result<Finished> {
    let pid = process.pid;
    let end = process
        .end_us
        .unwrap_or(0)
        .max(process.clock.last_us.unwrap_or(0));
    let ended = process.end_us.is_some() || process.signal.is_some();
    let mut finished = Finished {
        start_us: process.first_us,
        end_us: end,
        incomplete: !ended,
        args: process_slice_args(sid, process),
    };
    let mut threads: Vec<(&String, &mut ThreadTrack)> = process.threads.iter_mut().collect();
    threads.sort_by_key(|(name, thread)| (thread_index(name), thread.tid));
    for (thread_name, thread) in threads {
        let track = TrackId {
            pid,
            tid: thread.tid,
        };
        let main = thread_name == "main";
        let mut result = Ok(());
        thread.track.close_all(end, main && ended, &mut |closed| {
            if main && closed.payload.kind == "process" {
                finished.start_us = closed.start;
                finished.end_us = closed.end;
            } else if result.is_ok() {
                result = sink.close_slice(track, closed);
            }
        });
        result?;
        sink.track_done(track)?;
    }
    let mut children: Vec<(i64, OpenChild)> = process.open_children.drain().collect();
    children.sort_by_key(|(child_id, _)| *child_id);
    for (child_id, child) in children {
        let on = TrackId {
            pid,
            tid: child.tid,
        };
        let named = Child {
            name: &child.name,
            child_id,
        };
        sink.child_end(on, end, &named, &[("incomplete", Arg::Bool(true))])?;
    }
    Ok(finished)
}

/// Flows from each parent to its children: from the launch (`child_start` or `exec`) that
/// started the child when one matches by time and arguments, else from the parent itself at
/// the child's start (a program that runs git through a plain `Command`: the child's SID
/// still names the parent).
///
/// A flow arrives at the child's process slice start, the one time every format can land it
/// on (Perfetto ends it on the slice's begin event). That start is the child's clock zero
/// (`time - t_abs`), which comes before its first line, and can come before the parent's
/// record of the launch (a parent that logs `child_start` after spawning, clocks that
/// disagree by a few µs): the flow then leaves the parent no later than it arrives.
fn flows(processes: &[(String, ProcessState)], finished: &[Finished]) -> Vec<Flow> {
    let index: HashMap<&str, usize> = processes
        .iter()
        .enumerate()
        .map(|(i, (sid, _))| (sid.as_str(), i))
        .collect();
    let mut flows = Vec::new();
    for (i, (sid, child)) in processes.iter().enumerate() {
        let Some(&p) = parent_sid(sid).and_then(|up| index.get(up)) else {
            continue;
        };
        let parent = &processes[p].1;
        let launches: Vec<Launch> = parent.launches.iter().map(|(l, _)| l.clone()).collect();
        let to_us = finished[i].start_us;
        let (from_tid, from_us) =
            match match_launch(&launches, child.first_us, argv_tail_hash(&child.argv)) {
                Some(l) => (parent.launches[l].1, parent.launches[l].0.start_us),
                None => {
                    let (start, end) = (finished[p].start_us, finished[p].end_us);
                    (parent.pid, to_us.clamp(start, end.max(start)))
                }
            };
        let from_us = from_us.min(to_us);
        flows.push(Flow {
            id: hash_str(sid) & ((1 << 53) - 1),
            from: TrackId {
                pid: parent.pid,
                tid: from_tid,
            },
            from_us,
            to_pid: child.pid,
        });
    }
    flows
}

/// Args of a process's slice: what it was, how it ended, and its process-level values.
fn process_slice_args(sid: &str, process: &ProcessState) -> Map<String, Value> {
    let mut args = Map::new();
    args.insert("argv".into(), json!(process.argv));
    for (key, value) in [
        ("exit_code", process.exit_code.map(Value::from)),
        ("signal", process.signal.map(Value::from)),
        (
            "exe_version",
            process.exe_version.as_deref().map(Value::from),
        ),
        ("cmd_name", process.cmd_name.as_deref().map(Value::from)),
        ("hierarchy", process.hierarchy.as_deref().map(Value::from)),
        ("cmd_mode", process.cmd_mode.as_deref().map(Value::from)),
        ("alias", process.alias.as_deref().map(Value::from)),
    ] {
        if let Some(value) = value {
            args.insert(key.into(), value);
        }
    }
    args.insert("sid".into(), Value::from(sid));
    for (key, map) in [("timers", &process.timers), ("counters", &process.counters)] {
        if !map.is_empty() {
            let map: Map<String, Value> = map.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            args.insert(key.into(), Value::Object(map));
        }
    }
    if !process.data.is_empty() {
        args.insert("data".into(), Value::Object(process.data.clone()));
    }
    if !process.params.is_empty() {
        args.insert("params".into(), Value::Object(process.params.clone()));
    }
    if !process.worktrees.is_empty() {
        let repos: Map<String, Value> = process
            .worktrees
            .iter()
            .map(|(repo, path)| (repo.to_string(), Value::from(path.as_str())))
            .collect();
        args.insert("repos".into(), Value::Object(repos));
    }
    args
}

fn add_to(args: &mut Map<String, Value>, group: &str, key: &str, value: Value) {
    if let Value::Object(map) = args
        .entry(group)
        .or_insert_with(|| Value::Object(Map::new()))
    {
        map.insert(key.to_owned(), value);
    }
}

/// `category:label` (binary-format.md §11), or what there is of it.
fn region_name(category: Option<&str>, label: Option<&str>, msg: Option<&str>) -> String {
    match (category, label) {
        (Some(category), Some(label)) => format!("{category}:{label}"),
        (None, Some(label)) => label.to_owned(),
        (Some(category), None) => category.to_owned(),
        (None, None) => msg.map_or_else(|| "region".to_owned(), short),
    }
}

fn short(text: &str) -> String {
    crate::process::shorten(text.lines().next().unwrap_or(""), 80)
}

/// Sort order of a thread: `main` first, then `thNN:` by NN.
pub fn thread_index(name: &str) -> i64 {
    if name == "main" {
        return 0;
    }
    name.strip_prefix("th")
        .and_then(|rest| rest.split(':').next())
        .and_then(|digits| digits.parse().ok())
        .unwrap_or(i64::from(u16::MAX))
}
