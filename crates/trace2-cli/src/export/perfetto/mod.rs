//! `trace2 export --format perfetto`: the process model's output as Perfetto's own protobuf
//! trace, a `Trace` of `TracePacket`s (protos/perfetto/trace/…), smaller than Chrome JSON and
//! read by the Perfetto UI and trace processor without conversion.
//!
//! - a process track (`TrackDescriptor.process`) per process, holding the process's slice and
//!   its end instants; a thread track (`.thread`) per Trace2 thread, where regions nest as
//!   `TYPE_SLICE_BEGIN`/`TYPE_SLICE_END` pairs;
//! - a child track per concurrent child of a process, with a slice per `child_start` …
//!   `child_exit`;
//! - flows (`flow_ids` → `terminating_flow_ids`) from the parent's `child_start` (or the parent
//!   itself) to the child's process slice;
//! - counter tracks (`.counter`) for timers and counters; data, printf, errors as instants with
//!   debug annotations.
//!
//! All packets are on one sequence. Event names, categories and debug annotation names are
//! interned (module `intern`); the first event packet clears the sequence's incremental state,
//! every event packet says it needs it, and when the tables reach their bound they are cleared
//! with the next packet, so memory stays bounded on any trace.
//!
//! A region's slice begins at its `region_enter` line's time and ends at its leave (Chrome's
//! JSON puts the start at `leave − t_rel`): begins and ends are written as they come, so the
//! export streams like the Chrome one. Times never go back on a track.

mod intern;
mod proto;

use std::collections::HashMap;
use std::io::{self, Write};

use serde_json::Value;

use super::Exporter;
use super::sink::{Arg, Child, ExportSink, Flow, Instant, ProcessEnd, Scope, Slice, TrackId};
use super::track::Closed;
use intern::{Interner, Table};

/// The Perfetto protobuf export.
pub type PerfettoExporter<W> = Exporter<PerfettoSink<W>>;

impl<W: Write> Exporter<PerfettoSink<W>> {
    /// Starts the trace on `out` (give it a buffered writer).
    pub fn new(out: W) -> io::Result<Self> {
        Ok(Exporter::with_sink(PerfettoSink::new(out)))
    }
}

/// `trusted_packet_sequence_id` of every packet.
const SEQUENCE: u64 = 1;
/// `SEQ_INCREMENTAL_STATE_CLEARED`.
const STATE_CLEARED: u64 = 1;
/// `SEQ_NEEDS_INCREMENTAL_STATE`.
const NEEDS_STATE: u64 = 2;

/// `TrackEvent.Type`.
#[derive(Clone, Copy)]
enum EventType {
    SliceBegin = 1,
    SliceEnd = 2,
    Instant = 3,
    Counter = 4,
}

/// Field numbers (perfetto_trace.proto).
mod field {
    pub const TRACE_PACKET: u32 = 1;
    pub const PACKET_TIMESTAMP: u32 = 8;
    pub const PACKET_SEQUENCE_ID: u32 = 10;
    pub const PACKET_TRACK_EVENT: u32 = 11;
    pub const PACKET_INTERNED_DATA: u32 = 12;
    pub const PACKET_SEQUENCE_FLAGS: u32 = 13;
    pub const PACKET_TRACK_DESCRIPTOR: u32 = 60;
    pub const EVENT_CATEGORY_IIDS: u32 = 3;
    pub const EVENT_DEBUG_ANNOTATIONS: u32 = 4;
    pub const EVENT_TYPE: u32 = 9;
    pub const EVENT_NAME_IID: u32 = 10;
    pub const EVENT_TRACK_UUID: u32 = 11;
    pub const EVENT_COUNTER_VALUE: u32 = 30;
    pub const EVENT_FLOW_IDS: u32 = 47;
    pub const EVENT_TERMINATING_FLOW_IDS: u32 = 48;
    pub const ANNOTATION_NAME_IID: u32 = 1;
    pub const ANNOTATION_BOOL: u32 = 2;
    pub const ANNOTATION_UINT: u32 = 3;
    pub const ANNOTATION_INT: u32 = 4;
    pub const ANNOTATION_DOUBLE: u32 = 5;
    pub const ANNOTATION_STRING: u32 = 6;
    pub const ANNOTATION_NAME: u32 = 10;
    pub const ANNOTATION_DICT_ENTRIES: u32 = 11;
    pub const ANNOTATION_ARRAY_VALUES: u32 = 12;
    pub const TRACK_UUID: u32 = 1;
    pub const TRACK_NAME: u32 = 2;
    pub const TRACK_PROCESS: u32 = 3;
    pub const TRACK_THREAD: u32 = 4;
    pub const TRACK_PARENT_UUID: u32 = 5;
    pub const TRACK_COUNTER: u32 = 8;
    pub const PROCESS_PID: u32 = 1;
    pub const PROCESS_CMDLINE: u32 = 2;
    pub const PROCESS_NAME: u32 = 6;
    pub const PROCESS_LABELS: u32 = 8;
    pub const THREAD_PID: u32 = 1;
    pub const THREAD_TID: u32 = 2;
    pub const THREAD_NAME: u32 = 5;
}

/// Track uuids by kind, in the top byte: a process's, a thread's (by its tid, unique in the
/// export), a counter series', a child lane's.
fn process_uuid(pid: u32) -> u64 {
    1 << 56 | u64::from(pid)
}

fn thread_uuid(tid: u32) -> u64 {
    2 << 56 | u64::from(tid)
}

fn lane_uuid(pid: u32, lane: usize) -> u64 {
    4 << 56 | u64::from(pid) << 20 | lane as u64
}

const COUNTER_UUIDS: u64 = 3 << 56;

/// Writes a Perfetto protobuf trace.
pub struct PerfettoSink<W: Write> {
    out: W,
    /// The packet being built, its track event and its interned data.
    packet: Vec<u8>,
    event: Vec<u8>,
    interned: Vec<u8>,
    strings: Interner,
    /// The next event packet clears the sequence's incremental state.
    clear_state: bool,
    /// Latest time written on each slice track (times never go back on a track).
    last_us: HashMap<u64, i64>,
    /// Counter track of each series, per process.
    counters: HashMap<u32, HashMap<String, u64>>,
    next_counter: u64,
    /// Per process, which child lanes are busy; the lane of each open child.
    lanes: HashMap<u32, Vec<bool>>,
    child_lane: HashMap<(u32, i64), usize>,
    packets: u64,
}

/// The parts of the sink an event's fields are written with.
struct EventWriter<'a> {
    strings: &'a mut Interner,
    interned: &'a mut Vec<u8>,
    event: &'a mut Vec<u8>,
}

impl EventWriter<'_> {
    fn name(&mut self, name: &str) {
        let iid = self.strings.iid(Table::EventName, name, self.interned);
        proto::uint(self.event, field::EVENT_NAME_IID, iid);
    }

    fn category(&mut self, category: &str) {
        let iid = self.strings.iid(Table::Category, category, self.interned);
        proto::uint(self.event, field::EVENT_CATEGORY_IIDS, iid);
    }

    fn annotation(&mut self, key: &str, arg: Arg<'_>) {
        let iid = self.strings.iid(Table::AnnotationName, key, self.interned);
        proto::message(self.event, field::EVENT_DEBUG_ANNOTATIONS, |b| {
            proto::uint(b, field::ANNOTATION_NAME_IID, iid);
            arg_value(b, arg);
        });
    }

    fn json_annotation(&mut self, key: &str, value: &Value) {
        let iid = self.strings.iid(Table::AnnotationName, key, self.interned);
        proto::message(self.event, field::EVENT_DEBUG_ANNOTATIONS, |b| {
            proto::uint(b, field::ANNOTATION_NAME_IID, iid);
            json_value(b, value);
        });
    }
}

/// The value fields of a debug annotation for `arg`.
fn arg_value(b: &mut Vec<u8>, arg: Arg<'_>) {
    match arg {
        Arg::Str(text) => proto::string(b, field::ANNOTATION_STRING, text),
        Arg::Int(n) => proto::int(b, field::ANNOTATION_INT, n),
        Arg::Bool(flag) => proto::uint(b, field::ANNOTATION_BOOL, u64::from(flag)),
        Arg::Json(text) => match serde_json::from_str::<Value>(text) {
            Ok(value) => json_value(b, &value),
            Err(_) => proto::string(b, field::ANNOTATION_STRING, text),
        },
        Arg::Words(words) => {
            if words.is_empty() {
                proto::string(b, field::ANNOTATION_STRING, "");
            }
            for word in words {
                proto::message(b, field::ANNOTATION_ARRAY_VALUES, |v| {
                    proto::string(v, field::ANNOTATION_STRING, word)
                });
            }
        }
    }
}

/// The value fields of a debug annotation for a JSON value: objects as dict entries, arrays as
/// array values.
fn json_value(b: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => proto::string(b, field::ANNOTATION_STRING, "null"),
        Value::Bool(flag) => proto::uint(b, field::ANNOTATION_BOOL, u64::from(*flag)),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => proto::int(b, field::ANNOTATION_INT, i),
            (None, Some(u), _) => proto::uint(b, field::ANNOTATION_UINT, u),
            (None, None, Some(f)) => proto::double(b, field::ANNOTATION_DOUBLE, f),
            _ => proto::string(b, field::ANNOTATION_STRING, &n.to_string()),
        },
        Value::String(text) => proto::string(b, field::ANNOTATION_STRING, text),
        Value::Array(items) if items.is_empty() => proto::string(b, field::ANNOTATION_STRING, "[]"),
        Value::Array(items) => {
            for item in items {
                proto::message(b, field::ANNOTATION_ARRAY_VALUES, |v| json_value(v, item));
            }
        }
        Value::Object(map) if map.is_empty() => proto::string(b, field::ANNOTATION_STRING, "{}"),
        Value::Object(map) => {
            for (key, item) in map {
                proto::message(b, field::ANNOTATION_DICT_ENTRIES, |v| {
                    proto::string(v, field::ANNOTATION_NAME, key);
                    json_value(v, item);
                });
            }
        }
    }
}

/// Nanoseconds for `TracePacket.timestamp` (times before 1970 are taken as 1970).
fn nanos(us: i64) -> u64 {
    (us.max(0) as u64).saturating_mul(1000)
}

impl<W: Write> PerfettoSink<W> {
    /// A sink writing to `out`.
    pub fn new(out: W) -> Self {
        PerfettoSink {
            out,
            packet: Vec::with_capacity(1024),
            event: Vec::with_capacity(512),
            interned: Vec::with_capacity(256),
            strings: Interner::default(),
            clear_state: true,
            last_us: HashMap::new(),
            counters: HashMap::new(),
            next_counter: 0,
            lanes: HashMap::new(),
            child_lane: HashMap::new(),
            packets: 0,
        }
    }

    /// Starts an event packet of `kind` on track `uuid`; the caller adds its fields through the
    /// writer, then calls [`PerfettoSink::end_event`].
    fn begin_event(&mut self, kind: EventType, uuid: u64) -> EventWriter<'_> {
        if self.strings.nearly_full() {
            self.strings.clear();
            self.clear_state = true;
        }
        self.event.clear();
        self.interned.clear();
        proto::uint(&mut self.event, field::EVENT_TYPE, kind as u64);
        proto::uint(&mut self.event, field::EVENT_TRACK_UUID, uuid);
        EventWriter {
            strings: &mut self.strings,
            interned: &mut self.interned,
            event: &mut self.event,
        }
    }

    /// Writes the event packet built since [`PerfettoSink::begin_event`].
    fn end_event(&mut self, at_us: i64) -> io::Result<()> {
        let packet = &mut self.packet;
        packet.clear();
        proto::uint(packet, field::PACKET_TIMESTAMP, nanos(at_us));
        proto::uint(packet, field::PACKET_SEQUENCE_ID, SEQUENCE);
        let mut flags = NEEDS_STATE;
        if self.clear_state {
            flags |= STATE_CLEARED;
            self.clear_state = false;
        }
        proto::uint(packet, field::PACKET_SEQUENCE_FLAGS, flags);
        if !self.interned.is_empty() {
            proto::bytes(packet, field::PACKET_INTERNED_DATA, &self.interned);
        }
        proto::bytes(packet, field::PACKET_TRACK_EVENT, &self.event);
        self.write_packet()
    }

    fn write_packet(&mut self) -> io::Result<()> {
        let mut header = Vec::with_capacity(6);
        proto::varint(&mut header, u64::from(field::TRACE_PACKET << 3 | 2));
        proto::varint(&mut header, self.packet.len() as u64);
        self.out.write_all(&header)?;
        self.out.write_all(&self.packet)?;
        self.packets += 1;
        Ok(())
    }

    /// Writes a packet holding one track descriptor, whose fields `body` appends.
    fn descriptor(&mut self, body: impl FnOnce(&mut Vec<u8>)) -> io::Result<()> {
        self.packet.clear();
        proto::uint(&mut self.packet, field::PACKET_SEQUENCE_ID, SEQUENCE);
        proto::message(&mut self.packet, field::PACKET_TRACK_DESCRIPTOR, body);
        self.write_packet()
    }

    /// `at`, or the latest time written on the track if later; remembered for the track.
    fn track_time(&mut self, uuid: u64, at: i64) -> i64 {
        let last = self.last_us.entry(uuid).or_insert(at);
        *last = (*last).max(at);
        *last
    }

    fn slice_begin(&mut self, uuid: u64, at: i64, slice: &Slice) -> io::Result<()> {
        let at = self.track_time(uuid, at);
        let mut event = self.begin_event(EventType::SliceBegin, uuid);
        event.name(&slice.name);
        event.category(slice.category());
        if let Some(region) = &slice.region {
            if let Some(msg) = &region.msg {
                event.annotation("msg", Arg::Str(msg));
            }
            if let Some(repo) = region.repo {
                event.annotation("repo", Arg::Int(repo));
            }
            event.annotation("nesting", Arg::Int(region.nesting));
            if let (Some(file), Some(line)) = (&region.file, region.line) {
                event.annotation("file:line", Arg::Str(&format!("{file}:{line}")));
            }
            if region.unmatched_leave {
                event.annotation("unmatched_leave", Arg::Bool(true));
            }
        }
        self.end_event(at)
    }

    fn slice_end(&mut self, uuid: u64, closed: &Closed<Slice>) -> io::Result<()> {
        let at = self.track_time(uuid, closed.end);
        let mut event = self.begin_event(EventType::SliceEnd, uuid);
        for (key, value) in &closed.payload.args {
            event.json_annotation(key, value);
        }
        if closed.incomplete {
            event.annotation("incomplete", Arg::Bool(true));
        }
        self.end_event(at)
    }

    /// The counter track of `series` in process `pid`, described on first use.
    fn counter_track(&mut self, pid: u32, series: &str) -> io::Result<u64> {
        if let Some(uuid) = self.counters.get(&pid).and_then(|c| c.get(series)) {
            return Ok(*uuid);
        }
        self.next_counter += 1;
        let uuid = COUNTER_UUIDS | self.next_counter;
        self.counters
            .entry(pid)
            .or_default()
            .insert(series.to_owned(), uuid);
        self.descriptor(|d| {
            proto::uint(d, field::TRACK_UUID, uuid);
            proto::uint(d, field::TRACK_PARENT_UUID, process_uuid(pid));
            proto::string(d, field::TRACK_NAME, series);
            proto::message(d, field::TRACK_COUNTER, |_| {});
        })?;
        Ok(uuid)
    }

    /// A free child lane of process `pid` for child `child_id`, described on first use.
    fn take_lane(&mut self, pid: u32, child_id: i64) -> io::Result<u64> {
        let lanes = self.lanes.entry(pid).or_default();
        let lane = match lanes.iter().position(|busy| !busy) {
            Some(lane) => lane,
            None => {
                lanes.push(false);
                let lane = lanes.len() - 1;
                let name = if lane == 0 {
                    "children".to_owned()
                } else {
                    format!("children ({})", lane + 1)
                };
                self.descriptor(|d| {
                    proto::uint(d, field::TRACK_UUID, lane_uuid(pid, lane));
                    proto::uint(d, field::TRACK_PARENT_UUID, process_uuid(pid));
                    proto::string(d, field::TRACK_NAME, &name);
                })?;
                lane
            }
        };
        self.lanes.entry(pid).or_default()[lane] = true;
        self.child_lane.insert((pid, child_id), lane);
        Ok(lane_uuid(pid, lane))
    }

    fn annotations(event: &mut EventWriter<'_>, args: &[(&str, Arg<'_>)]) {
        for (key, arg) in args {
            event.annotation(key, *arg);
        }
    }
}

impl<W: Write> ExportSink for PerfettoSink<W> {
    type Output = W;

    fn process_track(&mut self, pid: u32, sid: &str) -> io::Result<()> {
        self.descriptor(|d| {
            proto::uint(d, field::TRACK_UUID, process_uuid(pid));
            proto::message(d, field::TRACK_PROCESS, |p| {
                proto::int(p, field::PROCESS_PID, i64::from(pid));
                proto::string(p, field::PROCESS_LABELS, sid);
            });
        })
    }

    fn thread_track(
        &mut self,
        track: TrackId,
        name: &str,
        _sort_index: Option<i64>,
    ) -> io::Result<()> {
        self.descriptor(|d| {
            proto::uint(d, field::TRACK_UUID, thread_uuid(track.tid));
            proto::message(d, field::TRACK_THREAD, |t| {
                proto::int(t, field::THREAD_PID, i64::from(track.pid));
                proto::int(t, field::THREAD_TID, i64::from(track.tid));
                proto::string(t, field::THREAD_NAME, name);
            });
        })
    }

    fn track_done(&mut self, track: TrackId) -> io::Result<()> {
        self.last_us.remove(&thread_uuid(track.tid));
        Ok(())
    }

    fn open_slice(&mut self, track: TrackId, at: i64, slice: &Slice) -> io::Result<()> {
        self.slice_begin(thread_uuid(track.tid), at, slice)
    }

    fn close_slice(&mut self, track: TrackId, closed: Closed<Slice>) -> io::Result<()> {
        self.slice_end(thread_uuid(track.tid), &closed)
    }

    fn leaf_slice(&mut self, track: TrackId, closed: Closed<Slice>) -> io::Result<()> {
        let uuid = thread_uuid(track.tid);
        self.slice_begin(uuid, closed.start, &closed.payload)?;
        self.slice_end(uuid, &closed)
    }

    fn instant(&mut self, track: TrackId, at: i64, instant: &Instant<'_>) -> io::Result<()> {
        let uuid = match instant.scope {
            Scope::Thread => thread_uuid(track.tid),
            Scope::Process => process_uuid(track.pid),
        };
        let mut event = self.begin_event(EventType::Instant, uuid);
        event.name(instant.name);
        event.category(instant.category);
        Self::annotations(&mut event, instant.args);
        self.end_event(at)
    }

    fn counter(
        &mut self,
        pid: u32,
        at: i64,
        series: &str,
        _key: &str,
        value: i64,
    ) -> io::Result<()> {
        let uuid = self.counter_track(pid, series)?;
        self.begin_event(EventType::Counter, uuid);
        proto::int(&mut self.event, field::EVENT_COUNTER_VALUE, value);
        self.end_event(at)
    }

    fn child_begin(
        &mut self,
        track: TrackId,
        at: i64,
        child: &Child<'_>,
        args: &[(&str, Arg<'_>)],
    ) -> io::Result<()> {
        let uuid = self.take_lane(track.pid, child.child_id)?;
        let at = self.track_time(uuid, at);
        let mut event = self.begin_event(EventType::SliceBegin, uuid);
        event.name(child.name);
        event.category("child");
        Self::annotations(&mut event, args);
        self.end_event(at)
    }

    fn child_end(
        &mut self,
        track: TrackId,
        at: i64,
        child: &Child<'_>,
        args: &[(&str, Arg<'_>)],
    ) -> io::Result<()> {
        let Some(lane) = self.child_lane.remove(&(track.pid, child.child_id)) else {
            return Ok(());
        };
        if let Some(busy) = self.lanes.get_mut(&track.pid).and_then(|l| l.get_mut(lane)) {
            *busy = false;
        }
        let uuid = lane_uuid(track.pid, lane);
        let at = self.track_time(uuid, at);
        let mut event = self.begin_event(EventType::SliceEnd, uuid);
        Self::annotations(&mut event, args);
        self.end_event(at)
    }

    fn process_end(&mut self, process: ProcessEnd<'_>) -> io::Result<()> {
        let pid = process.pid;
        let uuid = process_uuid(pid);
        self.descriptor(|d| {
            proto::uint(d, field::TRACK_UUID, uuid);
            proto::message(d, field::TRACK_PROCESS, |p| {
                proto::int(p, field::PROCESS_PID, i64::from(pid));
                if let Some(Value::Array(argv)) = process.args.get("argv") {
                    for word in argv.iter().filter_map(Value::as_str) {
                        proto::string(p, field::PROCESS_CMDLINE, word);
                    }
                }
                proto::string(p, field::PROCESS_NAME, process.name);
                proto::string(p, field::PROCESS_LABELS, process.sid);
            });
        })?;
        let mut event = self.begin_event(EventType::SliceBegin, uuid);
        event.name(process.name);
        event.category("process");
        for (key, value) in &process.args {
            event.json_annotation(key, value);
        }
        if let Some(flow) = process.flow_in {
            proto::fixed64(event.event, field::EVENT_TERMINATING_FLOW_IDS, flow);
        }
        self.end_event(process.start_us)?;
        let mut event = self.begin_event(EventType::SliceEnd, uuid);
        if process.incomplete {
            event.annotation("incomplete", Arg::Bool(true));
        }
        self.end_event(process.end_us.max(process.start_us))?;
        self.counters.remove(&pid);
        self.lanes.remove(&pid);
        Ok(())
    }

    fn flow(&mut self, flow: &Flow) -> io::Result<()> {
        let mut event = self.begin_event(EventType::Instant, thread_uuid(flow.from.tid));
        event.name("child process");
        event.category("child");
        proto::fixed64(event.event, field::EVENT_FLOW_IDS, flow.id);
        self.end_event(flow.from_us)
    }

    fn events(&self) -> u64 {
        self.packets
    }

    fn finish(mut self, _root: Option<&str>, _processes: usize) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}
