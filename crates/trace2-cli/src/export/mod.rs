//! `trace2 export --format chrome`: Chrome trace event JSON that the Perfetto UI, chrome://tracing
//! and speedscope open, following binary-format.md §11.
//!
//! - a pid per process (the one in its SID, or a free one when two processes share it, as an
//!   `exec`'d image does), a tid per Trace2 thread, named by `M` events;
//! - the process's lifetime, each thread's lifetime and every region as `X` slices that nest
//!   strictly per (pid, tid) (module `track`); regions are written when they are left;
//! - children as async `b`/`e` slices, and a flow (`s` → `f`) from the parent's `child_start` (or
//!   `exec`) to the child process;
//! - counters and timers as `C` counter tracks, and instants (`i`) for data, errors, printf,
//!   parameters and the process's end.
//!
//! Memory: per process its metadata, the open slices of each thread and its launches (for the
//! flows, which are written at the end); nothing grows with the number of lines.

mod json;
mod track;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{self, Write};

use serde_json::{Map, Value, json};

use crate::event::{Kind, Region, TraceEvent, value_text};
use crate::process::{
    Clock, Launch, argv_of, argv_tail_hash, command_line, hash_str, match_launch, parent_sid,
    pid_from_sid, qualified_name,
};
use json::ChromeJson;
use track::{Closed, Track};

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
    /// Trace events written.
    pub events: u64,
    /// Processes.
    pub processes: usize,
    /// Region slices that had to go on a separate track (damaged input).
    pub moved_slices: u64,
}

/// Streams events into Chrome trace JSON.
pub struct ChromeExporter<W: Write> {
    doc: ChromeJson<W>,
    processes: HashMap<String, ProcessState>,
    pids: HashSet<u32>,
    next_spare_pid: u32,
    next_tid: u32,
    moved_slices: u64,
}

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
    threads: HashMap<String, ThreadState>,
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

struct ThreadState {
    tid: u32,
    sort_index: i64,
    track: Track<Slice>,
    overflow: Vec<(u32, i64)>,
}

/// What a slice shows once closed.
struct Slice {
    name: String,
    category: &'static str,
    cat: Option<String>,
    /// A region's args, kept as fields: regions are most of a trace.
    region: Option<RegionArgs>,
    /// Args of process and thread slices.
    args: Map<String, Value>,
}

struct RegionArgs {
    msg: Option<String>,
    repo: Option<i64>,
    nesting: i64,
    file: Option<String>,
    line: Option<i64>,
    unmatched_leave: bool,
}

impl Slice {
    fn region(event: &TraceEvent<'_>, region: &Region<'_>, unmatched_leave: bool) -> Slice {
        Slice {
            name: region_name(
                region.category.as_deref(),
                region.label.as_deref(),
                region.msg.as_deref(),
            ),
            category: "region",
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

    fn lifetime(name: String, category: &'static str) -> Slice {
        Slice {
            name,
            category,
            cat: None,
            region: None,
            args: Map::new(),
        }
    }
}

impl<W: Write> ChromeExporter<W> {
    /// Starts the document on `out` (give it a buffered writer).
    pub fn new(out: W) -> io::Result<Self> {
        Ok(ChromeExporter {
            doc: ChromeJson::new(out)?,
            processes: HashMap::new(),
            pids: HashSet::new(),
            next_spare_pid: FIRST_SPARE_PID,
            next_tid: FIRST_TID,
            moved_slices: 0,
        })
    }

    fn spare_pid(&mut self) -> u32 {
        while self.pids.contains(&self.next_spare_pid) {
            self.next_spare_pid += 1;
        }
        self.pids.insert(self.next_spare_pid);
        self.next_spare_pid
    }

    /// Writes what `event` shows.
    pub fn event(&mut self, event: &TraceEvent<'_>) -> io::Result<()> {
        if !self.processes.contains_key(&*event.sid) {
            let pid = match pid_from_sid(&event.sid) {
                Some(pid) if pid != 0 && self.pids.insert(pid) => pid,
                _ => self.spare_pid(),
            };
            let order = self.processes.len();
            self.processes.insert(
                event.sid.to_string(),
                ProcessState {
                    pid,
                    order,
                    clock: Clock::default(),
                    first_us: 0,
                    end_us: None,
                    argv: Vec::new(),
                    exe_version: None,
                    cmd_name: None,
                    hierarchy: None,
                    cmd_mode: None,
                    alias: None,
                    exit_code: None,
                    signal: None,
                    threads: HashMap::new(),
                    open_children: HashMap::new(),
                    launches: Vec::new(),
                    timers: BTreeMap::new(),
                    counters: BTreeMap::new(),
                    data: Map::new(),
                    params: Map::new(),
                    worktrees: BTreeMap::new(),
                },
            );
        }
        let process = self.processes.get_mut(&*event.sid).expect("inserted above");
        let new_process = process.clock.last_us.is_none();
        let had_zero = process.clock.zero_us.is_some();
        let at = process.clock.at(event);
        let pid = process.pid;
        if new_process {
            process.first_us = at;
        }
        // The thread's track: `main` is the process's own, with the process slice as its base.
        if !process.threads.contains_key(&*event.thread) {
            let main = event.thread == "main";
            let tid = if main {
                pid
            } else {
                self.next_tid += 1;
                self.next_tid
            };
            let mut thread = ThreadState {
                tid,
                sort_index: thread_index(&event.thread),
                track: Track::default(),
                overflow: Vec::new(),
            };
            if main {
                thread
                    .track
                    .open_base(at, Slice::lifetime(String::new(), "process"), &mut |_| {});
            }
            process.threads.insert(event.thread.to_string(), thread);
        }
        if !had_zero
            && let Some(zero) = process.clock.zero_us
            && let Some(main) = process.threads.get_mut("main")
        {
            main.track.lower_base_start(zero);
        }
        let thread = process
            .threads
            .get_mut(&*event.thread)
            .expect("inserted above");
        let tid = thread.tid;
        let doc = &mut self.doc;
        let mut result = Ok(());
        let mut emit = |closed: Closed<Slice>| {
            if result.is_ok() {
                result = write_slice(doc, pid, tid, closed);
            }
        };
        match &event.kind {
            Kind::Version { exe } => process.exe_version = exe.as_deref().map(str::to_owned),
            Kind::Start { .. } => process.argv = argv_of(event).unwrap_or_default(),
            Kind::CmdName { name, hierarchy } => {
                process.cmd_name = Some(name.to_string());
                process.hierarchy = hierarchy.as_deref().map(str::to_owned);
                instant(doc, pid, tid, at, "cmd_name", "process")
                    .args()
                    .str("name", name)
                    .end()?;
            }
            Kind::CmdMode { name } => {
                process.cmd_mode = Some(name.to_string());
                instant(doc, pid, tid, at, "cmd_mode", "process")
                    .args()
                    .str("name", name)
                    .end()?;
            }
            Kind::Alias { alias, argv } => {
                process.alias = Some(alias.to_string());
                instant(doc, pid, tid, at, "alias", "process")
                    .args()
                    .str("alias", alias)
                    .value("argv", argv)
                    .end()?;
            }
            Kind::DefParam {
                scope,
                param,
                value,
            } => {
                if process.params.len() < MAX_PROCESS_ARGS {
                    process
                        .params
                        .insert(param.to_string(), Value::from(value.as_ref()));
                }
                let doc = instant(doc, pid, tid, at, "def_param", "process");
                doc.args().str("param", param).str("value", value);
                if let Some(scope) = scope {
                    doc.str("scope", scope);
                }
                doc.end()?;
            }
            Kind::DefRepo { worktree } => {
                let repo = event.repo.unwrap_or(0);
                if process.worktrees.len() < MAX_PROCESS_ARGS {
                    process.worktrees.insert(repo, worktree.to_string());
                }
                instant(doc, pid, tid, at, "def_repo", "process")
                    .args()
                    .int("repo", repo)
                    .str("worktree", worktree)
                    .end()?;
            }
            Kind::RegionEnter(region) => {
                let slice = Slice::region(event, region, false);
                thread.track.open(region.nesting, at, slice, &mut emit);
            }
            Kind::RegionLeave(region, duration) => {
                if !thread.track.close(region.nesting, at, *duration, &mut emit) {
                    // A leave without its enter: the slice is known from the leave alone.
                    let start = at - duration;
                    let slice = Slice::region(event, region, true);
                    match thread.track.place(start, at) {
                        Some((start, end)) => {
                            emit(Closed {
                                start,
                                end,
                                payload: slice,
                                incomplete: false,
                            });
                        }
                        None => {
                            // Give it a track of its own, where it does not overlap.
                            let slot =
                                match thread.overflow.iter().position(|&(_, end)| end <= start) {
                                    Some(slot) => slot,
                                    None if thread.overflow.len() < MAX_OVERFLOW_TRACKS => {
                                        self.next_tid += 1;
                                        thread.overflow.push((self.next_tid, i64::MIN));
                                        thread.overflow.len() - 1
                                    }
                                    None => thread.overflow.len() - 1,
                                };
                            let (overflow_tid, last_end) = thread.overflow[slot];
                            let start = start.max(last_end);
                            let end = at.max(start);
                            thread.overflow[slot].1 = end;
                            self.moved_slices += 1;
                            if result.is_ok() {
                                result = write_slice(
                                    doc,
                                    pid,
                                    overflow_tid,
                                    Closed {
                                        start,
                                        end,
                                        payload: slice,
                                        incomplete: false,
                                    },
                                );
                            }
                        }
                    }
                }
            }
            Kind::Data {
                nesting,
                category,
                key,
                value,
                json,
            } => {
                if *nesting <= 1 && process.data.len() < MAX_PROCESS_ARGS {
                    let value = if *json {
                        serde_json::from_str(value.get()).unwrap_or(Value::Null)
                    } else {
                        Value::from(value_text(value).as_ref())
                    };
                    process.data.insert(format!("{category}/{key}"), value);
                }
                let doc = instant(doc, pid, tid, at, key, category);
                doc.args();
                if *json {
                    doc.raw("value", value.get());
                } else {
                    doc.str("value", &value_text(value));
                }
                doc.int("nesting", *nesting).end()?;
            }
            Kind::Printf { msg } => {
                let text = msg.as_deref().unwrap_or("");
                instant(doc, pid, tid, at, &short(text), "printf")
                    .args()
                    .str("msg", text)
                    .end()?;
            }
            Kind::Error { msg, fmt } => {
                let text = msg.as_deref().or(fmt.as_deref()).unwrap_or("");
                let doc = instant(
                    doc,
                    pid,
                    tid,
                    at,
                    &format!("error: {}", short(text)),
                    "error",
                );
                doc.args().str("msg", text);
                if let Some(fmt) = fmt {
                    doc.str("fmt", fmt);
                }
                doc.end()?;
            }
            Kind::ChildStart {
                child_id,
                class,
                hook_name,
                argv,
            } => {
                let argv_owned = argv_of(event).unwrap_or_default();
                let launch = (process.launches.len() < MAX_LAUNCHES).then(|| {
                    process.launches.push((
                        Launch {
                            start_us: at,
                            end_us: None,
                            argv_tail: argv_tail_hash(argv),
                        },
                        tid,
                    ));
                    process.launches.len() - 1
                });
                let name = match hook_name {
                    Some(hook) => format!("hook {hook}"),
                    None => format!("child: {}", command_line(&argv_owned, 60)),
                };
                let doc = doc.begin("b", &name, pid, tid, at);
                doc.str("cat", "child")
                    .str("id", &format!("{pid}:{child_id}"))
                    .args();
                doc.str("class", class).value("argv", argv);
                if let Some(hook) = hook_name {
                    doc.str("hook", hook);
                }
                doc.end()?;
                process
                    .open_children
                    .insert(*child_id, OpenChild { name, tid, launch });
            }
            Kind::ChildEnd {
                child_id,
                pid: child_pid,
                code,
                ready,
                elapsed_us,
            } => {
                if let Some(child) = process.open_children.remove(child_id) {
                    if let Some((launch, _)) =
                        child.launch.and_then(|l| process.launches.get_mut(l))
                    {
                        launch.end_us = Some(at);
                    }
                    let doc = doc.begin("e", &child.name, pid, child.tid, at);
                    doc.str("cat", "child")
                        .str("id", &format!("{pid}:{child_id}"))
                        .args();
                    if let Some(child_pid) = child_pid {
                        doc.int("pid", *child_pid);
                    }
                    if let Some(code) = code {
                        doc.int("code", *code);
                    }
                    if let Some(ready) = ready {
                        doc.str("ready", ready);
                    }
                    doc.int("elapsed_us", *elapsed_us).end()?;
                }
            }
            Kind::Exec { exec_id, argv } => {
                if process.launches.len() < MAX_LAUNCHES {
                    process.launches.push((
                        Launch {
                            start_us: at,
                            end_us: None,
                            argv_tail: argv_tail_hash(argv),
                        },
                        tid,
                    ));
                }
                let argv_owned = argv_of(event).unwrap_or_default();
                instant(
                    doc,
                    pid,
                    tid,
                    at,
                    &format!("exec {}", command_line(&argv_owned, 60)),
                    "exec",
                )
                .args()
                .int("exec_id", *exec_id)
                .value("argv", argv)
                .end()?;
            }
            Kind::ExecResult { exec_id, code } => {
                instant(doc, pid, tid, at, "exec_result", "exec")
                    .args()
                    .int("exec_id", *exec_id)
                    .int("code", *code)
                    .end()?;
            }
            Kind::ThreadStart => {
                if event.thread != "main" {
                    let name = event.thread.to_string();
                    thread
                        .track
                        .open_base(at, Slice::lifetime(name, "thread"), &mut emit);
                }
            }
            Kind::ThreadExit(lifetime) => {
                if event.thread != "main" {
                    thread.track.close_base(at, *lifetime, &mut emit);
                }
            }
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
                    process.timers.insert(key.clone(), stats);
                    format!("{key} timer")
                };
                counter(doc, pid, at, &series, "total_us", *total_us)?;
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
                    process.counters.insert(key.clone(), Value::from(*count));
                    key
                };
                counter(doc, pid, at, &series, "value", *count)?;
            }
            Kind::Exit { code } | Kind::Atexit { code } => {
                process.exit_code = Some(*code);
                process.end_us = Some(process.end_us.map_or(at, |end| end.max(at)));
                let name = event.name().to_owned();
                doc.begin("i", &name, pid, tid, at)
                    .str("s", "p")
                    .str("cat", "process")
                    .args()
                    .int("code", *code)
                    .end()?;
            }
            Kind::Signal { signo } => {
                process.signal = Some(*signo);
                process.end_us = Some(process.end_us.map_or(at, |end| end.max(at)));
                doc.begin("i", "signal", pid, tid, at)
                    .str("s", "p")
                    .str("cat", "process")
                    .args()
                    .int("signo", *signo)
                    .end()?;
            }
            Kind::Other(_) => {}
        }
        result?;
        // A thread that exited is named now and forgotten: memory follows the live threads.
        if matches!(event.kind, Kind::ThreadExit(_))
            && event.thread != "main"
            && process
                .threads
                .get(&*event.thread)
                .is_some_and(|t| t.track.is_empty())
            && let Some(thread) = process.threads.remove(&*event.thread)
        {
            write_thread_names(&mut self.doc, pid, &event.thread, &thread)?;
        }
        Ok(())
    }

    /// Closes what is still open, writes the process and thread metadata and the flows between
    /// processes, and ends the document.
    pub fn finish(mut self) -> io::Result<(W, ExportStats)> {
        let mut processes: Vec<(String, ProcessState)> = self.processes.drain().collect();
        processes.sort_by_key(|(_, p)| (p.first_us, p.order));
        let mut starts = Vec::with_capacity(processes.len());
        for (sort_index, (sid, process)) in processes.iter_mut().enumerate() {
            starts.push(finish_process(&mut self.doc, sid, process, sort_index)?);
        }

        // Flows: from the launch in the parent to the child process.
        let index: HashMap<&str, usize> = processes
            .iter()
            .enumerate()
            .map(|(i, (sid, _))| (sid.as_str(), i))
            .collect();
        for (i, (sid, child)) in processes.iter().enumerate() {
            let Some(&p) = parent_sid(sid).and_then(|up| index.get(up)) else {
                continue;
            };
            let parent = &processes[p].1;
            let launches: Vec<Launch> = parent.launches.iter().map(|(l, _)| l.clone()).collect();
            let Some(l) = match_launch(&launches, child.first_us, argv_tail_hash(&child.argv))
            else {
                continue;
            };
            let (launch, parent_tid) = &parent.launches[l];
            let id = (hash_str(sid) & ((1 << 53) - 1)) as i64;
            self.doc
                .begin(
                    "s",
                    "child process",
                    parent.pid,
                    *parent_tid,
                    launch.start_us,
                )
                .str("cat", "child")
                .int("id", id)
                .end()?;
            let arrival = starts[i].max(child.first_us);
            self.doc
                .begin("f", "child process", child.pid, child.pid, arrival)
                .str("cat", "child")
                .str("bp", "e")
                .int("id", id)
                .end()?;
        }

        let root = processes
            .iter()
            .find(|(sid, _)| parent_sid(sid).is_none_or(|up| !index.contains_key(up)))
            .map(|(sid, _)| sid.clone());
        let other = json!({
            "format": "trace2",
            "sid": root,
            "processes": processes.len(),
            "generator": concat!("trace2 ", env!("CARGO_PKG_VERSION")),
        });
        let stats = ExportStats {
            events: self.doc.events(),
            processes: processes.len(),
            moved_slices: self.moved_slices,
        };
        Ok((self.doc.finish(&other)?, stats))
    }
}

/// Closes a process's tracks and writes its slice and metadata; returns the slice's start.
fn finish_process<W: Write>(
    doc: &mut ChromeJson<W>,
    sid: &str,
    process: &mut ProcessState,
    sort_index: usize,
) -> io::Result<i64> {
    let pid = process.pid;
    let end = process
        .end_us
        .unwrap_or(0)
        .max(process.clock.last_us.unwrap_or(0));
    let name = qualified_name(
        &process.argv,
        process.cmd_name.as_deref(),
        process.cmd_mode.as_deref(),
    );
    let mut process_start = process.first_us;
    let mut main_args = Some(process_slice_args(sid, process));
    let mut threads: Vec<(&String, &mut ThreadState)> = process.threads.iter_mut().collect();
    threads.sort_by_key(|(name, thread)| (thread.sort_index, name.as_str().to_owned()));
    for (thread_name, thread) in threads {
        let tid = thread.tid;
        let mut result = Ok(());
        let main = thread_name == "main";
        if main && let Some(base) = thread.track.base_payload() {
            base.name = name.clone();
            base.args = main_args.take().unwrap_or_default();
        }
        let ended = process.end_us.is_some() || process.signal.is_some();
        thread
            .track
            .close_all(end, main && ended, &mut |closed: Closed<Slice>| {
                if main && closed.payload.category == "process" {
                    process_start = closed.start;
                }
                if result.is_ok() {
                    result = write_slice(doc, pid, tid, closed);
                }
            });
        result?;
        write_thread_names(doc, pid, thread_name, thread)?;
    }
    for (child_id, child) in process.open_children.drain() {
        doc.begin("e", &child.name, pid, child.tid, end)
            .str("cat", "child")
            .str("id", &format!("{pid}:{child_id}"))
            .args()
            .value("incomplete", &true)
            .end()?;
    }
    doc.begin("M", "process_name", pid, pid, 0)
        .args()
        .str("name", &name)
        .end()?;
    doc.begin("M", "process_labels", pid, pid, 0)
        .args()
        .str("labels", sid)
        .end()?;
    doc.begin("M", "process_sort_index", pid, pid, 0)
        .args()
        .int("sort_index", sort_index as i64)
        .end()?;
    Ok(process_start)
}

/// The `M` events that name a thread's track (and its extra tracks).
fn write_thread_names<W: Write>(
    doc: &mut ChromeJson<W>,
    pid: u32,
    name: &str,
    thread: &ThreadState,
) -> io::Result<()> {
    doc.begin("M", "thread_name", pid, thread.tid, 0)
        .args()
        .str("name", name)
        .end()?;
    doc.begin("M", "thread_sort_index", pid, thread.tid, 0)
        .args()
        .int("sort_index", thread.sort_index)
        .end()?;
    for (n, (overflow_tid, _)) in thread.overflow.iter().enumerate() {
        doc.begin("M", "thread_name", pid, *overflow_tid, 0)
            .args()
            .str("name", &format!("{name} (unmatched regions {})", n + 1))
            .end()?;
    }
    Ok(())
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

fn write_slice<W: Write>(
    doc: &mut ChromeJson<W>,
    pid: u32,
    tid: u32,
    closed: Closed<Slice>,
) -> io::Result<()> {
    let slice = closed.payload;
    let doc = doc
        .begin("X", &slice.name, pid, tid, closed.start)
        .int("dur", closed.end - closed.start);
    doc.str("cat", slice.cat.as_deref().unwrap_or(slice.category));
    doc.args();
    if let Some(region) = &slice.region {
        if let Some(msg) = &region.msg {
            doc.str("msg", msg);
        }
        if let Some(repo) = region.repo {
            doc.int("repo", repo);
        }
        doc.int("nesting", region.nesting);
        if let (Some(file), Some(line)) = (&region.file, region.line) {
            doc.str("file:line", &format!("{file}:{line}"));
        }
        if region.unmatched_leave {
            doc.value("unmatched_leave", &true);
        }
    }
    for (key, value) in &slice.args {
        doc.value(key, value);
    }
    if closed.incomplete {
        doc.value("incomplete", &true);
    }
    doc.end()
}

fn instant<'d, W: Write>(
    doc: &'d mut ChromeJson<W>,
    pid: u32,
    tid: u32,
    at: i64,
    name: &str,
    cat: &str,
) -> &'d mut ChromeJson<W> {
    doc.begin("i", name, pid, tid, at)
        .str("s", "t")
        .str("cat", cat)
}

fn counter<W: Write>(
    doc: &mut ChromeJson<W>,
    pid: u32,
    at: i64,
    name: &str,
    key: &str,
    value: i64,
) -> io::Result<()> {
    doc.begin("C", name, pid, pid, at)
        .args()
        .int(key, value)
        .end()
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
fn thread_index(name: &str) -> i64 {
    if name == "main" {
        return 0;
    }
    name.strip_prefix("th")
        .and_then(|rest| rest.split(':').next())
        .and_then(|digits| digits.parse().ok())
        .unwrap_or(i64::from(u16::MAX))
}

#[cfg(test)]
mod tests;
