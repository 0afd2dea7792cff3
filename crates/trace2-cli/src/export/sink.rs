//! What the process model hands an output format: tracks, slices, instants, counters, children,
//! flows and the end of each process, already placed in time and nested. A format (Chrome JSON,
//! Perfetto protobuf) implements [`ExportSink`] and only encodes; it decides nothing about the trace.

use std::borrow::Cow;
use std::io;

use serde_json::{Map, Value};

use super::track::Closed;

/// A track: a Trace2 thread of a process (`tid` = `pid` for `main`), or an extra track of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TrackId {
    /// The process's pid (the SID's, or a spare one).
    pub pid: u32,
    /// The thread's id, unique in the whole export.
    pub tid: u32,
}

/// An argument of an event.
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    /// Text.
    Str(&'a str),
    /// An integer.
    Int(i64),
    /// A flag.
    Bool(bool),
    /// JSON text as the trace gave it (a `data_json` value).
    Json(&'a str),
    /// A command line.
    Words(&'a [Cow<'a, str>]),
}

/// Whether an instant belongs to its thread or to the whole process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// On its thread's track.
    Thread,
    /// On the process (its end: `exit`, `atexit`, `signal`).
    Process,
}

/// A point event: `data`, `printf`, `error`, `def_param`, `exec`, the process's end…
#[derive(Debug, Clone, Copy)]
pub struct Instant<'a> {
    /// What it is called in the viewer.
    pub name: &'a str,
    /// Its category.
    pub category: &'a str,
    /// Thread or process.
    pub scope: Scope,
    /// Its arguments, in order.
    pub args: &'a [(&'a str, Arg<'a>)],
}

/// What a slice shows: its name, category and arguments.
#[derive(Debug)]
pub struct Slice {
    /// Name in the viewer (`category:label` for a region).
    pub name: String,
    /// `region`, `thread` or `process`.
    pub kind: &'static str,
    /// The region's category, when it has one (else `kind` is the category).
    pub cat: Option<String>,
    /// A region's arguments, kept as fields: regions are most of a trace.
    pub region: Option<RegionArgs>,
    /// Arguments of process and thread slices (per-thread timers and counters…).
    pub args: Map<String, Value>,
}

impl Slice {
    /// The category a viewer shows: the region's own, else the kind.
    pub fn category(&self) -> &str {
        self.cat.as_deref().unwrap_or(self.kind)
    }
}

/// Arguments of a region's slice.
#[derive(Debug)]
pub struct RegionArgs {
    /// `msg`.
    pub msg: Option<String>,
    /// `repo` id.
    pub repo: Option<i64>,
    /// `nesting`.
    pub nesting: i64,
    /// Source file.
    pub file: Option<String>,
    /// Source line.
    pub line: Option<i64>,
    /// Known from its `region_leave` alone (damaged input).
    pub unmatched_leave: bool,
}

/// A child process as its parent saw it, from `child_start` to `child_exit`/`child_ready`.
#[derive(Debug, Clone, Copy)]
pub struct Child<'a> {
    /// Name in the viewer (`child: git …`, `hook pre-commit`).
    pub name: &'a str,
    /// Its `child_id` in the parent.
    pub child_id: i64,
}

/// A process that is over (end of input): what it was and where its slice lies.
#[derive(Debug)]
pub struct ProcessEnd<'a> {
    /// Its pid in the export.
    pub pid: u32,
    /// Its SID.
    pub sid: &'a str,
    /// `<exe>[:<verb>][#<mode>]`.
    pub name: &'a str,
    /// Start order among all processes.
    pub sort_index: usize,
    /// The process slice: from its clock's zero to its end (or last line).
    pub start_us: i64,
    /// End of the slice.
    pub end_us: i64,
    /// The trace stops before the process ends.
    pub incomplete: bool,
    /// Argv, exit code, version, repos, data, timers, counters…
    pub args: Map<String, Value>,
    /// The flow from its parent that ends at its slice's start, if any.
    pub flow_in: Option<u64>,
}

/// A link from a parent's `child_start` (or `exec`, or the parent itself when it started the
/// child without a traced launch) to the child process's slice.
#[derive(Debug, Clone, Copy)]
pub struct Flow {
    /// Id, unique in the export.
    pub id: u64,
    /// The parent's track and time where it starts.
    pub from: TrackId,
    /// Start time: never after the child's process slice starts.
    pub from_us: i64,
    /// The child's pid. The flow arrives where the child's process slice starts: its
    /// [`ProcessEnd`] names the flow in `flow_in`.
    pub to_pid: u32,
}

/// An output format. Calls come in trace order per track, except at the end, where the
/// process slices and flows come once every track is closed.
pub trait ExportSink {
    /// What [`ExportSink::finish`] gives back (the writer).
    type Output;

    /// A process was seen for the first time.
    fn process_track(&mut self, pid: u32, sid: &str) -> io::Result<()>;

    /// A thread's track (or an extra track for damaged regions) was created.
    fn thread_track(
        &mut self,
        track: TrackId,
        name: &str,
        sort_index: Option<i64>,
    ) -> io::Result<()>;

    /// A thread's track is over: nothing more will come on it.
    fn track_done(&mut self, track: TrackId) -> io::Result<()> {
        let _ = track;
        Ok(())
    }

    /// A slice opened at `at` (a region entered, a thread started). Its bounds are final only
    /// when it closes: a format that writes whole slices waits for [`ExportSink::close_slice`].
    fn open_slice(&mut self, track: TrackId, at: i64, slice: &Slice) -> io::Result<()>;

    /// A slice that [`ExportSink::open_slice`] opened has closed.
    fn close_slice(&mut self, track: TrackId, closed: Closed<Slice>) -> io::Result<()>;

    /// A slice that was never opened (a leave without its enter), whole.
    fn leaf_slice(&mut self, track: TrackId, closed: Closed<Slice>) -> io::Result<()>;

    /// A point event.
    fn instant(&mut self, track: TrackId, at: i64, instant: &Instant<'_>) -> io::Result<()>;

    /// A value of a counter series of process `pid` (`key` says what the value is).
    fn counter(&mut self, pid: u32, at: i64, series: &str, key: &str, value: i64)
    -> io::Result<()>;

    /// A child process started.
    fn child_begin(
        &mut self,
        track: TrackId,
        at: i64,
        child: &Child<'_>,
        args: &[(&str, Arg<'_>)],
    ) -> io::Result<()>;

    /// A child process ended (or never did: `args` then says `incomplete`).
    fn child_end(
        &mut self,
        track: TrackId,
        at: i64,
        child: &Child<'_>,
        args: &[(&str, Arg<'_>)],
    ) -> io::Result<()>;

    /// A process at the end of input, with its slice.
    fn process_end(&mut self, process: ProcessEnd<'_>) -> io::Result<()>;

    /// Where a flow from a parent to a child process starts (before every
    /// [`ExportSink::process_end`], which ends it).
    fn flow(&mut self, flow: &Flow) -> io::Result<()>;

    /// Events (or packets) written so far.
    fn events(&self) -> u64;

    /// Ends the output. `root` is the SID of the first root process.
    fn finish(self, root: Option<&str>, processes: usize) -> io::Result<Self::Output>;
}
