//! The decoder: frames scanned and checked, batches put back in order per thread,
//! threads merged in time order, and every event replayed as the [`Record`] the writer
//! was given.
//!
//! ```text
//! input ──scan──▶ frames ──group by stream id──▶ per-thread queues (by batch_seq)
//!                                                   │ one cursor per thread
//!                                  min-heap on (wall time, stream, ticks, thread,
//!                                  batch, position) ──▶ on_record(&StreamInfo, &Record)
//! ```
//!
//! [`decode`] takes a callback; [`decode_to_text`](crate::decode_to_text) and
//! [`decode_to_event_json`](crate::decode_to_event_json) pass the records to the Normal,
//! Perf and Event formatters. Damage never stops the decoder and never makes it
//! invent an event: what it skipped is in the [`DecodeReport`].
//!
//! # Memory
//!
//! Batches are held until they can be merged. They are all held up to
//! [`DecodeOptions::with_window_bytes`] (64 MiB of payload by default); past that the
//! decoder writes out the oldest events until half the window is free. Memory is thus
//! bounded by the window, one frame being read (≤ 16 MiB) and a few dozen bytes per
//! thread and stream of the input, whatever the input's size. A file whose batches all
//! fit the window is merged exactly; in a larger one, a batch that arrives more than a
//! window after events later than its own comes out late (per-thread order is always
//! kept; [`DecodeReport::late_events`] counts the rest).

mod batch;
mod report;
pub mod scan;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};
use std::io::{self, Read};

use crate::frame;
use crate::header::{BatchHeader, ClockChange, End, KNOWN_FLAGS, StreamHeader};
use crate::record::Record;
use crate::spec;

pub use batch::BatchError;
pub use report::{DecodeReport, StreamReport, ThreadReport};
pub use scan::{CutFrame, FrameScanner, RawFrame, ScanStats};

use batch::{BatchReader, KindTable};

/// How the decoder works.
#[derive(Clone, Debug)]
pub struct DecodeOptions {
    window_bytes: usize,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            window_bytes: 64 << 20,
        }
    }
}

impl DecodeOptions {
    /// The default options.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many bytes of batches to hold for the merge before writing the oldest events
    /// out (at least 1 MiB; 64 MiB by default).
    pub fn with_window_bytes(mut self, bytes: usize) -> Self {
        self.window_bytes = bytes.max(1 << 20);
        self
    }

    /// The merge window, bytes.
    pub fn window_bytes(&self) -> usize {
        self.window_bytes
    }
}

/// A stream (one process) as its header describes it.
#[derive(Clone, Debug)]
pub struct StreamInfo {
    /// The stream header.
    pub header: StreamHeader,
    /// The stream's number in the order streams appeared in the input, from 0.
    pub index: usize,
    clock: Vec<ClockChange>,
}

impl StreamInfo {
    /// Microseconds of `ticks` (`t_abs`).
    pub fn micros(&self, ticks: u64) -> u64 {
        let freq = self.header.freq;
        if freq == 1_000_000 {
            ticks
        } else {
            u64::try_from(u128::from(ticks) * 1_000_000 / u128::from(freq.max(1)))
                .unwrap_or(u64::MAX)
        }
    }

    /// The wall time of tick 0 in force at `ticks` (a CLOCK frame may re-anchor it).
    pub fn anchor_at(&self, ticks: u64) -> i64 {
        if self.clock.is_empty() {
            return self.header.anchor_wall_us;
        }
        let change = self
            .clock
            .iter()
            .rev()
            .find(|c| c.at_ticks <= ticks && c.wall_us.is_some());
        match change {
            Some(ClockChange {
                wall_us: Some(wall),
                at_ticks,
                ..
            }) => wall.wrapping_sub(self.micros(*at_ticks) as i64),
            _ => self.header.anchor_wall_us,
        }
    }

    /// The local UTC offset in force at `t_abs_us`, for Normal and Perf times of day.
    pub fn utc_offset_at(&self, t_abs_us: u64) -> i32 {
        self.clock
            .iter()
            .rev()
            .find(|c| self.micros(c.at_ticks) <= t_abs_us)
            .map_or(self.header.utc_offset_s, |c| c.utc_offset_s)
    }
}

/// Decodes `input` and hands every event to `on_record`, in time order; returns what
/// was read and what was skipped.
///
/// Errors are the input's read errors only: damaged data is skipped and reported.
pub fn decode(
    input: impl Read,
    options: &DecodeOptions,
    mut on_record: impl FnMut(&StreamInfo, &Record<'_>),
) -> io::Result<DecodeReport> {
    let mut decoder = Decoder::new(options.clone());
    decoder.read(input, &mut on_record)?;
    Ok(decoder.finish(&mut on_record))
}

/// The callback records go to.
pub type OnRecord<'f> = dyn FnMut(&StreamInfo, &Record<'_>) + 'f;

/// A decoder fed from one or more inputs (files of the same run, say), then finished.
pub struct Decoder {
    options: DecodeOptions,
    streams: Vec<InputStream>,
    stream_by_id: HashMap<u64, usize>,
    threads: Vec<ThreadQueue>,
    thread_by_key: HashMap<(u64, u64), usize>,
    heap: BinaryHeap<Reverse<Key>>,
    buffered: usize,
    scan: ScanStats,
    unknown_frames: u64,
    invalid_frames: u64,
    duplicate_batches: u64,
    late_events: u64,
    events: u64,
    orphans_dropped: u64,
    undecodable_dropped: u64,
    warnings: Vec<String>,
    /// Frames a kill cut, and their bytes, per stream id (streams are told apart at
    /// the report: a cut frame may be all a stream left in this input).
    cuts: HashMap<u64, (u64, u64)>,
    /// The batches those frames held, per (stream id, thread index), where the cut
    /// bytes tell: lost to the kill, not missing.
    cut_batches: HashMap<(u64, u64), HashSet<u64>>,
    /// The merge key of the last event written, to count late ones.
    last_key: Option<(i64, usize, u64)>,
}

/// The merge order of the next event of each thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    wall: i64,
    stream: usize,
    ticks: u64,
    thread_index: u64,
    batch_seq: u64,
    position: u64,
    queue: usize,
}

struct InputStream {
    id: u64,
    info: Option<StreamInfo>,
    kinds: Option<std::sync::Arc<KindTable>>,
    /// Why the stream cannot be decoded, when it cannot.
    unsupported: Option<String>,
    clock: Vec<ClockChange>,
    /// Batches each thread wrote, from END frames.
    end_counts: HashMap<u64, u64>,
    ended: bool,
    events: u64,
}

struct ThreadQueue {
    stream: usize,
    thread_index: u64,
    pending: BTreeMap<u64, (Vec<u8>, BatchHeader)>,
    received: HashSet<u64>,
    /// The batch to read next.
    next_seq: u64,
    cursor: Option<BatchReader>,
    /// Ticks of the last event of the batch read before, for the ordering check.
    last_ticks: Option<u64>,
    name: String,
    events: u64,
    skipped_seqs: u64,
    abandoned: u64,
    unknown_events: u64,
    cut_events: u64,
}

const MAX_WARNINGS: usize = 100;

impl Decoder {
    /// A decoder with nothing read yet.
    pub fn new(options: DecodeOptions) -> Decoder {
        Decoder {
            options,
            streams: Vec::new(),
            stream_by_id: HashMap::new(),
            threads: Vec::new(),
            thread_by_key: HashMap::new(),
            heap: BinaryHeap::new(),
            buffered: 0,
            scan: ScanStats::default(),
            unknown_frames: 0,
            invalid_frames: 0,
            duplicate_batches: 0,
            late_events: 0,
            events: 0,
            orphans_dropped: 0,
            undecodable_dropped: 0,
            warnings: Vec::new(),
            cuts: HashMap::new(),
            cut_batches: HashMap::new(),
            last_key: None,
        }
    }

    /// Reads every frame of `input`; events may be handed to `on_record` already, when
    /// the merge window fills.
    pub fn read(&mut self, input: impl Read, on_record: &mut OnRecord<'_>) -> io::Result<()> {
        let mut scanner = FrameScanner::new(input);
        let result = loop {
            let next = scanner.next_frame();
            for cut in scanner.take_cuts() {
                self.cut(cut);
            }
            match next {
                Ok(Some(frame)) => self.ingest(frame, on_record),
                Ok(None) => break Ok(()),
                Err(err) => break Err(err),
            }
        };
        let s = scanner.stats();
        self.scan.bytes += s.bytes;
        self.scan.frames += s.frames;
        self.scan.skipped_bytes += s.skipped_bytes;
        self.scan.damaged_regions += s.damaged_regions;
        self.scan.cut_frames += s.cut_frames;
        self.scan.cut_bytes += s.cut_bytes;
        result
    }

    /// Takes note of a frame a kill cut: its stream's last, whose batch is lost.
    fn cut(&mut self, cut: CutFrame) {
        if let Some(id) = cut.stream_id {
            let (frames, bytes) = self.cuts.entry(id).or_default();
            *frames += 1;
            *bytes += cut.bytes;
            if let Some((thread, seq)) = cut.batch {
                self.cut_batches
                    .entry((id, thread))
                    .or_default()
                    .insert(seq);
            }
        }
    }

    /// Takes one intact frame.
    pub fn ingest(&mut self, frame: RawFrame, on_record: &mut OnRecord<'_>) {
        match frame.kind {
            frame::kind::STREAM => self.stream_frame(&frame),
            frame::kind::CLOCK => match ClockChange::parse(&frame.payload) {
                Some(change) => {
                    let s = self.stream_slot(change.stream_id);
                    let state = &mut self.streams[s];
                    let at = state
                        .clock
                        .partition_point(|c| c.at_ticks <= change.at_ticks);
                    state.clock.insert(at, change);
                    if let Some(info) = &mut state.info {
                        info.clock = state.clock.clone();
                    }
                }
                None => self.invalid(&frame, "CLOCK"),
            },
            frame::kind::END => match End::parse(&frame.payload) {
                Some(end) => {
                    let s = self.stream_slot(end.stream_id);
                    let state = &mut self.streams[s];
                    state.ended = true;
                    for (thread, batches) in end.threads {
                        let count = state.end_counts.entry(thread).or_default();
                        *count = (*count).max(batches);
                    }
                }
                None => self.invalid(&frame, "END"),
            },
            frame::kind::BATCH => self.batch_frame(frame),
            _ => self.unknown_frames += 1,
        }
        if self.buffered > self.options.window_bytes {
            self.drain(on_record, Some(self.options.window_bytes / 2));
        }
    }

    /// Merges and hands out everything still held; returns the report.
    pub fn finish(mut self, on_record: &mut OnRecord<'_>) -> DecodeReport {
        self.drain(on_record, None);
        self.report()
    }

    fn warn(&mut self, message: String) {
        if self.warnings.len() < MAX_WARNINGS {
            self.warnings.push(message);
        }
    }

    fn invalid(&mut self, frame: &RawFrame, what: &str) {
        self.invalid_frames += 1;
        self.warn(format!(
            "offset {}: {what} frame with an unreadable payload",
            frame.offset
        ));
    }

    /// The index of stream `id`, making an entry (without header yet) if it is new.
    fn stream_slot(&mut self, id: u64) -> usize {
        if let Some(&s) = self.stream_by_id.get(&id) {
            return s;
        }
        let s = self.streams.len();
        self.streams.push(InputStream {
            id,
            info: None,
            kinds: None,
            unsupported: None,
            clock: Vec::new(),
            end_counts: HashMap::new(),
            ended: false,
            events: 0,
        });
        self.stream_by_id.insert(id, s);
        s
    }

    fn stream_frame(&mut self, frame: &RawFrame) {
        let Some(header) = StreamHeader::parse(&frame.payload) else {
            self.invalid(frame, "STREAM");
            return;
        };
        let s = self.stream_slot(header.stream_id);
        if self.streams[s].info.is_some() || self.streams[s].unsupported.is_some() {
            // A repeated header (the same file read twice, say): the first one stands.
            return;
        }
        let problem = if header.major != spec::MAJOR {
            Some(format!("format version {}.{}", header.major, header.minor))
        } else if header.flags & !KNOWN_FLAGS != 0 {
            Some(format!("stream flags {:#x}", header.flags))
        } else if header.freq == 0 {
            Some("a tick frequency of 0".to_owned())
        } else {
            None
        };
        let kinds = match problem {
            Some(_) => None,
            None => match KindTable::new(&header.declared) {
                Ok(kinds) => Some(kinds),
                Err(why) => {
                    self.streams[s].unsupported = Some(why);
                    None
                }
            },
        };
        if let Some(problem) = problem {
            self.warn(format!(
                "stream {:016x} ({}): not decoded: {problem}",
                header.stream_id, header.sid
            ));
            self.streams[s].unsupported = Some(problem);
        }
        let index = s;
        let state = &mut self.streams[s];
        state.kinds = kinds;
        state.info = Some(StreamInfo {
            header,
            index,
            clock: state.clock.clone(),
        });
    }

    fn batch_frame(&mut self, frame: RawFrame) {
        let Some(header) = BatchHeader::parse(&frame.payload) else {
            self.invalid(&frame, "BATCH");
            return;
        };
        let s = self.stream_slot(header.stream_id);
        if self.streams[s].unsupported.is_some() {
            self.undecodable_dropped += 1;
            return;
        }
        let key = (header.stream_id, header.thread_index);
        let q = match self.thread_by_key.get(&key) {
            Some(&q) => q,
            None => {
                let q = self.threads.len();
                self.threads.push(ThreadQueue {
                    stream: s,
                    thread_index: header.thread_index,
                    pending: BTreeMap::new(),
                    received: HashSet::new(),
                    next_seq: 0,
                    cursor: None,
                    last_ticks: None,
                    name: String::new(),
                    events: 0,
                    skipped_seqs: 0,
                    abandoned: 0,
                    unknown_events: 0,
                    cut_events: 0,
                });
                self.thread_by_key.insert(key, q);
                q
            }
        };
        let queue = &mut self.threads[q];
        if !queue.received.insert(header.batch_seq) {
            self.duplicate_batches += 1;
            return;
        }
        let name = &frame.payload[header.thread_name.0..][..header.thread_name.1];
        if queue.name.is_empty() {
            queue.name = String::from_utf8_lossy(name).into_owned();
        }
        self.buffered += frame.payload.len();
        queue
            .pending
            .insert(header.batch_seq, (frame.payload, header));
    }

    /// Starts the next batch of queue `q` if it can: the batch it waits for, or (when
    /// `resolve` says the missing ones are not coming) the first one it holds. Batches
    /// without an event are passed over.
    fn activate(&mut self, q: usize, resolve: bool) {
        while let Some(has_event) = self.start_next(q, resolve) {
            if has_event {
                return;
            }
            self.close_cursor(q);
        }
    }

    /// Opens a cursor on queue `q`'s next batch; whether it has an event to show, or
    /// `None` if no batch could be opened.
    fn start_next(&mut self, q: usize, resolve: bool) -> Option<bool> {
        let Decoder {
            threads,
            streams,
            heap,
            warnings,
            ..
        } = self;
        let queue = &mut threads[q];
        if queue.cursor.is_some() {
            return None;
        }
        let stream = &streams[queue.stream];
        let (Some(info), Some(kinds)) = (&stream.info, &stream.kinds) else {
            return None;
        };
        let first = *queue.pending.keys().next()?;
        if first != queue.next_seq && !resolve {
            return None;
        }
        let (_, (payload, header)) = queue.pending.pop_first()?;
        if first > queue.next_seq {
            queue.skipped_seqs += first - queue.next_seq;
        }
        queue.next_seq = queue.next_seq.max(first.saturating_add(1));
        if let Some(last) = queue.last_ticks
            && header.base_ticks < last
            && warnings.len() < MAX_WARNINGS
        {
            warnings.push(format!(
                "stream {:016x} thread {} batch {}: starts before the previous batch ended",
                stream.id, header.thread_index, header.batch_seq
            ));
        }
        let cursor = BatchReader::new(payload, header, kinds);
        let key = key_of(info, &cursor, q);
        queue.cursor = Some(cursor);
        match key {
            Some(key) => {
                heap.push(Reverse(key));
                Some(true)
            }
            None => Some(false),
        }
    }

    /// Done with queue `q`'s batch: account for it and free its memory.
    fn close_cursor(&mut self, q: usize) {
        let queue = &mut self.threads[q];
        let Some(cursor) = queue.cursor.take() else {
            return;
        };
        self.buffered = self.buffered.saturating_sub(cursor.size());
        queue.last_ticks = Some(cursor.last_ticks());
        queue.unknown_events += cursor.unknown_events;
        queue.cut_events += cursor.cut_events;
        if let Some(err) = &cursor.error {
            queue.abandoned += 1;
            let message = format!(
                "stream {:016x} thread {} batch {}: rest of the batch skipped: {err}",
                self.streams[queue.stream].id, queue.thread_index, cursor.header.batch_seq
            );
            self.warn(message);
        }
    }

    /// Hands out events in merge order: all of them (`until` = `None`, at the end of
    /// the input), or until the batches held take no more than `until` bytes.
    fn drain(&mut self, on_record: &mut OnRecord<'_>, until: Option<usize>) {
        let finishing = until.is_none();
        for q in 0..self.threads.len() {
            self.activate(q, finishing);
        }
        loop {
            if until.is_some_and(|limit| self.buffered <= limit) {
                return;
            }
            match self.heap.pop() {
                Some(Reverse(key)) => self.emit(key, on_record, finishing),
                None => {
                    // Every queue waits for a batch that has not come: it is taken as
                    // lost, and the queues move on.
                    for q in 0..self.threads.len() {
                        self.activate(q, true);
                    }
                    if self.heap.is_empty() {
                        if !finishing {
                            self.drop_orphans(until);
                        }
                        return;
                    }
                }
            }
        }
    }

    /// Hands out the event at the head of `key.queue` and moves that queue on.
    fn emit(&mut self, key: Key, on_record: &mut OnRecord<'_>, resolve: bool) {
        let q = key.queue;
        let order = (key.wall, key.stream, key.ticks);
        if self.last_key.is_some_and(|last| order < last) {
            self.late_events += 1;
        } else {
            self.last_key = Some(order);
        }
        let Decoder {
            threads,
            streams,
            heap,
            events,
            ..
        } = self;
        let queue = &mut threads[q];
        let stream = &mut streams[queue.stream];
        let (Some(cursor), Some(info), Some(kinds)) =
            (&mut queue.cursor, &stream.info, &stream.kinds)
        else {
            return;
        };
        let items = cursor.items();
        if let Some(record) = cursor.record(info, &items) {
            on_record(info, &record);
            *events += 1;
            queue.events += 1;
            stream.events += 1;
        }
        drop(items);
        cursor.advance(kinds);
        match key_of(info, cursor, q) {
            Some(key) => heap.push(Reverse(key)),
            None => {
                self.close_cursor(q);
                self.activate(q, resolve);
            }
        }
    }

    /// Under memory pressure with nothing left to merge: batches whose stream header
    /// has not been seen are dropped (and counted as orphans in the report).
    fn drop_orphans(&mut self, until: Option<usize>) {
        for q in 0..self.threads.len() {
            if until.is_some_and(|limit| self.buffered <= limit) {
                return;
            }
            let queue = &mut self.threads[q];
            let stream = &self.streams[queue.stream];
            if stream.kinds.is_some() {
                continue;
            }
            let count = if stream.info.is_none() {
                &mut self.orphans_dropped
            } else {
                &mut self.undecodable_dropped
            };
            for (_, (payload, _)) in std::mem::take(&mut queue.pending) {
                self.buffered = self.buffered.saturating_sub(payload.len());
                *count += 1;
            }
        }
    }

    fn report(&self) -> DecodeReport {
        report::build(self)
    }
}

/// The merge key of `cursor`'s next event.
fn key_of(info: &StreamInfo, cursor: &BatchReader, queue: usize) -> Option<Key> {
    let ticks = cursor.next_ticks()?;
    Some(Key {
        wall: info
            .anchor_at(ticks)
            .wrapping_add(info.micros(ticks) as i64),
        stream: info.index,
        ticks,
        thread_index: cursor.header.thread_index,
        batch_seq: cursor.header.batch_seq,
        position: cursor.position,
        queue,
    })
}
