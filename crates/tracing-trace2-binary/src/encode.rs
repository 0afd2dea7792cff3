//! The per-thread batch: records encoded into one frame buffer until it is full.
//!
//! A [`BatchEncoder`] belongs to one writing thread (the writer hands it over between
//! the thread and exit-time flushers, see `slots`). Encoding a record allocates nothing:
//! the frame buffer is allocated once at the batch size, and the dictionaries are fixed
//! tables (`intern`). A record is encoded optimistically into the room left; if it does
//! not fit, nothing of it is kept, and the caller's [`BatchEncoder::encode`] writes the
//! batch out and tries again in an empty one. A record too big for an empty batch goes
//! alone into a jumbo frame (up to [`frame::MAX_PAYLOAD`]); one too big for that has its
//! texts cut to fit and is flagged with a `CUT` record.
//!
//! The batch carries what makes it decodable on its own: its thread's name and open
//! regions at its start, its own string and callsite definitions, and absolute ticks
//! in its header. See [`crate::spec`] for the records and [`crate::header`] for the
//! batch header.

use crate::frame;
use crate::intern::{Callsites, Shapes, Strings, common_prefix, common_suffix, same_bytes};
use crate::record::text::copy_short;
use crate::record::{FieldValue, Record, Trace2Event};
use crate::spec::{self, ArgType, Origins, Place, control, kind};
use crate::varint;

mod steady;

/// Bytes a batch may hold when no size is configured: 64 KiB, frame overhead included.
pub const DEFAULT_BATCH_SIZE: usize = 64 << 10;
/// The smallest configurable batch: a pipe's atomic write size.
pub const MIN_BATCH_SIZE: usize = 4 << 10;
/// The largest configurable batch.
pub const MAX_BATCH_SIZE: usize = 1 << 20;
/// The buffer a thread's batch starts in: it doubles as records fill it, up to the
/// batch size, so that a short process (or thread) that records a few lines does not
/// allocate and touch the pages of a whole batch (64 KiB by default) it never fills.
/// 1 KiB holds several lifecycle records, and a short process's batches are a record
/// each (the facade's lazy flusher writes every record's batch at once at first).
const FIRST_BUFFER: usize = 1 << 10;
/// The buffer grows when less than this share of it (1/n) is left.
const GROW_WHEN_LEFT: usize = 4;
/// The largest frame of all, for one record that does not fit a batch.
const MAX_FRAME: usize = frame::MAX_PAYLOAD + frame::OVERHEAD;
/// What a record's texts may take in all when they must be cut: the jumbo frame less
/// room for the fixed fields.
const CUT_BUDGET: usize = frame::MAX_PAYLOAD - (64 << 10);
/// What one text costs on top of its bytes in the cut budget (a definition's head, id
/// and length, a reference).
const TEXT_OVERHEAD: usize = 24;

/// One thread's batch being filled.
pub(crate) struct BatchEncoder {
    /// The frame: header (written with the first record), payload, room for the CRC.
    buf: Box<[u8]>,
    /// Bytes of `buf` in use; 0 while the batch is empty.
    len: usize,
    /// The configured frame size, which `buf` returns to after a jumbo frame.
    batch_size: usize,
    /// Wall time at tick 0 of the stream, µs.
    anchor_wall_us: i64,
    /// The stream the batch belongs to.
    pub stream_id: u64,
    /// The writer's stream generation that `stream_id` belongs to.
    pub epoch: u64,
    /// The thread's number in the stream.
    pub thread_index: u64,
    /// The number of the batch being filled (the next one written).
    pub seq: u64,
    /// Open regions after the last record, as the decoder tracks them.
    open_state: u32,
    /// The thread's name as the batch (or the previous one) last stated it.
    thread_name: String,
    /// Ticks of the batch's first and last records.
    first_ticks: u64,
    /// The ticks from which the batch is due to be written (see [`Self::due`]).
    flush_at: u64,
    /// The writer's flush interval, in ticks (`u64::MAX`: none).
    flush_interval: u64,
    last_ticks: u64,
    /// Wall-clock correction in force in the batch (see `control::WALL`).
    wall_offset: i64,
    /// The anchor plus the correction in force (wrapping): a record needs no new
    /// correction if its wall clock less its ticks is this.
    wall_base: i64,
    strings: Strings,
    callsites: Callsites,
    /// The steady path's ids by the addresses of a record's texts.
    shapes: Shapes,
    /// Where the batch predicts `t_rel` values to count from.
    origins: Origins,
    /// The last `d` text of the batch (see `spec::DELTA_MAX`).
    prev_delta: Vec<u8>,
    /// Records dropped because not even a cut version fitted a frame (never expected).
    pub dropped: u64,
}

/// The result of encoding one record.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Encoded {
    /// The record is in the batch.
    Added,
    /// The record could not be encoded at all (counted in `dropped`).
    Dropped,
}

impl BatchEncoder {
    /// An encoder for batches of `batch_size` bytes (clamped to the allowed range), for
    /// a stream whose tick 0 is at `anchor_wall_us`.
    pub fn new(batch_size: usize, anchor_wall_us: i64) -> BatchEncoder {
        let batch_size = batch_size.clamp(MIN_BATCH_SIZE, MAX_BATCH_SIZE);
        // About one dictionary slot per 64 bytes of batch: half of them usable.
        let slots = (batch_size / 64).max(64);
        BatchEncoder {
            buf: vec![0; FIRST_BUFFER.min(batch_size)].into_boxed_slice(),
            len: 0,
            batch_size,
            anchor_wall_us,
            stream_id: 0,
            epoch: 0,
            thread_index: 0,
            seq: 0,
            open_state: 0,
            thread_name: String::with_capacity(32),
            first_ticks: 0,
            flush_at: u64::MAX,
            flush_interval: u64::MAX,
            last_ticks: 0,
            wall_offset: 0,
            wall_base: anchor_wall_us,
            strings: Strings::new(slots),
            callsites: Callsites::new(slots / 4),
            shapes: Shapes::new(),
            origins: Origins::default(),
            prev_delta: Vec::with_capacity(spec::DELTA_MAX),
            dropped: 0,
        }
    }

    /// Whether the batch holds no record.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Ticks from the batch's first record to `ticks` (0 for an empty batch).
    #[inline]
    pub fn age(&self, ticks: u64) -> u64 {
        if self.is_empty() {
            0
        } else {
            ticks.saturating_sub(self.first_ticks)
        }
    }

    /// The flush interval in force, in ticks.
    #[inline]
    pub fn flush_interval(&self) -> u64 {
        self.flush_interval
    }

    /// Sets the interval after which a batch is due to be written ([`Self::due`]).
    pub fn set_flush_interval(&mut self, ticks: u64) {
        self.flush_interval = ticks;
        self.flush_at = Self::flush_at(self.first_ticks, ticks);
    }

    /// When a batch whose first record is at `first` is due: [`Self::age`] at least
    /// `interval` from then on (an interval of 0: at once, even for time gone back).
    /// Past the last tick (an interval that long), at the last tick.
    fn flush_at(first: u64, interval: u64) -> u64 {
        if interval == 0 {
            0
        } else {
            first.saturating_add(interval)
        }
    }

    /// Whether a batch known to hold a record (one the steady path just wrote) is due
    /// to be written at `ticks`: its [`Self::age`] is at least the flush interval. One
    /// comparison with the time worked out at the batch's first record.
    #[inline(always)]
    pub fn due(&self, ticks: u64) -> bool {
        debug_assert!(!self.is_empty());
        debug_assert_eq!(
            ticks >= self.flush_at,
            self.age(ticks) >= self.flush_interval || ticks == u64::MAX
        );
        ticks >= self.flush_at
    }

    /// Starts over as another thread of another stream: the batch must be empty.
    pub fn rebind(&mut self, stream_id: u64, epoch: u64, thread_index: u64) {
        debug_assert!(self.is_empty());
        self.stream_id = stream_id;
        self.epoch = epoch;
        self.thread_index = thread_index;
        self.seq = 0;
    }

    /// Forgets the thread's carried state (a slot taken over by a new thread).
    pub fn forget_thread(&mut self) {
        self.open_state = 0;
        self.thread_name.clear();
    }

    /// Starts over as a new encoder would, for a stream whose tick 0 is at
    /// `anchor_wall_us` (a flight snapshot's marker batch, made again in a signal
    /// handler, which may not allocate a new encoder).
    #[cfg_attr(not(unix), allow(dead_code))] // used by the `SIGUSR2` handler (Unix)
    pub fn restart(&mut self, anchor_wall_us: i64) {
        self.anchor_wall_us = anchor_wall_us;
        self.discard();
        self.forget_thread();
    }

    /// Throws the batch's records away (a forked child's copy of its parent's batch).
    pub fn discard(&mut self) {
        self.len = 0;
        self.start_batch();
    }

    /// Encodes `record`, handing every frame that must be written first (the full
    /// batch, a jumbo frame) to `write`.
    #[inline(always)]
    pub fn encode(&mut self, record: &Record<'_>, write: impl FnMut(&[u8])) -> Encoded {
        if self.try_encode_steady(record) {
            return Encoded::Added;
        }
        self.encode_general(record, write)
    }

    /// [`Self::encode`] past the steady path (which the caller tried).
    #[inline(always)]
    pub fn encode_general(&mut self, record: &Record<'_>, write: impl FnMut(&[u8])) -> Encoded {
        if self.buf.len() < self.batch_size
            && (self.buf.len() - self.len) * GROW_WHEN_LEFT < self.buf.len()
        {
            self.grow();
        }
        if self.try_encode(record, false) {
            return Encoded::Added;
        }
        self.encode_in_next(record, write)
    }

    /// [`Self::encode`] when the record did not fit the room left: the batch is written
    /// and the record goes into the next one, or alone into a larger frame.
    #[cold]
    #[inline(never)]
    fn encode_in_next(&mut self, record: &Record<'_>, mut write: impl FnMut(&[u8])) -> Encoded {
        if !self.is_empty() {
            write(self.seal());
            self.next_batch();
            if self.try_encode(record, false) {
                return Encoded::Added;
            }
        }
        // A buffer still growing: doubled until the record fits the empty batch, up to
        // the batch size (a short process's one long record does not take a whole
        // batch's pages).
        while self.buf.len() < self.batch_size {
            self.resize((self.buf.len() * 2).min(self.batch_size));
            if self.try_encode(record, false) {
                return Encoded::Added;
            }
        }
        // Too big for an empty batch: alone in a larger frame, cut if it must be.
        let mut size = self.buf.len();
        let added = loop {
            size = size.saturating_mul(2).min(MAX_FRAME);
            self.resize(size);
            if self.try_encode(record, false) {
                break true;
            }
            if size == MAX_FRAME {
                break self.try_encode(record, true);
            }
        };
        if added {
            write(self.seal());
            self.next_batch();
        }
        self.resize(self.batch_size);
        if added {
            Encoded::Added
        } else {
            self.dropped += 1;
            Encoded::Dropped
        }
    }

    /// Completes the batch's frame and returns its bytes; [`Self::next_batch`] must
    /// follow once they are written. The batch must not be empty.
    pub fn seal(&mut self) -> &[u8] {
        debug_assert!(!self.is_empty());
        let total = frame::seal_in_place(&mut self.buf, self.len - frame::HEADER_LEN);
        &self.buf[..total]
    }

    /// The frame the last [`Self::seal`] completed, with no record added since (a
    /// snapshot's look at a batch it leaves in place).
    #[cfg_attr(not(unix), allow(dead_code))] // used by the `SIGUSR2` handler (Unix)
    pub fn sealed(&self) -> &[u8] {
        &self.buf[..self.len + frame::TRAILER_LEN]
    }

    /// Moves on to the next batch after the sealed one was written.
    pub fn next_batch(&mut self) {
        self.len = 0;
        self.seq += 1;
        self.start_batch();
    }

    fn start_batch(&mut self) {
        self.wall_offset = 0;
        self.wall_base = self.anchor_wall_us;
        self.strings.reset();
        self.callsites.reset();
        self.shapes.reset();
        self.origins.reset();
        self.prev_delta.clear();
    }

    /// Doubles the buffer (up to the batch size), keeping the batch in it.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let size = (self.buf.len() * 2).min(self.batch_size);
        let mut buf = vec![0; size].into_boxed_slice();
        buf[..self.len].copy_from_slice(&self.buf[..self.len]);
        self.buf = buf;
    }

    fn resize(&mut self, size: usize) {
        if self.buf.len() != size {
            debug_assert!(self.is_empty());
            self.buf = vec![0; size].into_boxed_slice();
            self.start_batch();
        }
    }

    /// Encodes `record` into the room left. On failure nothing is kept of it (and the
    /// dictionaries are emptied: the caller starts a new batch).
    ///
    /// The kind is told apart first, so that a region or datum (a record per region or
    /// datum) is written by straight-line code, and every other kind by its catalogue
    /// row in a copy of this function of its own, out of line (a `printf`, a line per
    /// log message, by hand there).
    #[inline(always)]
    fn try_encode(&mut self, record: &Record<'_>, cut: bool) -> bool {
        match record.event {
            Trace2Event::RegionEnter { .. }
            | Trace2Event::RegionLeave { .. }
            | Trace2Event::Data { .. }
            | Trace2Event::DataJson { .. } => {
                self.try_encode_with(record, cut, |e, record, event_kind, dt, cs, ticks| {
                    e.hot_event(record, event_kind, dt, cs, ticks);
                })
            }
            // A new kind not in `regular_event!` stops the build here: list it there
            // (its row then says everything), or give it an arm of its own.
            tracing_trace2_record::regular_event!() => self.try_encode_by_catalogue(record, cut),
        }
    }

    /// [`Self::try_encode`] of a kind that is not hot.
    #[inline(never)]
    fn try_encode_by_catalogue(&mut self, record: &Record<'_>, cut: bool) -> bool {
        self.try_encode_with(record, cut, |e, record, event_kind, dt, cs, ticks| {
            if let Trace2Event::Printf { msg } = record.event {
                e.printf(msg, event_kind, dt, cs);
            } else {
                e.by_catalogue(&record.event, event_kind, dt, cs, ticks);
            }
        })
    }

    /// [`Self::try_encode`] with the event's own part written by `event`.
    #[inline(always)]
    fn try_encode_with(
        &mut self,
        record: &Record<'_>,
        cut: bool,
        event: impl FnOnce(&mut Enc<'_>, &Record<'_>, u8, u64, u64, u64),
    ) -> bool {
        let limit = self.buf.len() - frame::TRAILER_LEN;
        let first = self.is_empty();
        let ticks = record.time.t_abs_us;
        let wall_offset = record
            .time
            .wall_us
            .wrapping_sub(self.anchor_wall_us)
            .wrapping_sub(ticks as i64);
        let event_kind = spec::kind_of(&record.event);
        let nesting = record.event.nesting().unwrap_or(0);
        let predicted = spec::predicted_open(event_kind, nesting, self.open_state);
        let same_thread = same_bytes(record.thread.as_bytes(), self.thread_name.as_bytes());
        let mut e = Enc {
            out: &mut self.buf[..limit],
            pos: self.len,
            ok: true,
            strings: &mut self.strings,
            callsites: &mut self.callsites,
            origins: &mut self.origins,
            prev_delta: &mut self.prev_delta,
            budget: if cut { CUT_BUDGET } else { usize::MAX },
        };
        let dt;
        if first {
            e.put(&frame::MARKER);
            e.byte(frame::kind::BATCH);
            e.put(&[0; 4]);
            e.put(&self.stream_id.to_le_bytes());
            e.u(self.thread_index);
            e.u(self.seq);
            e.u(ticks);
            e.u(u64::from(self.open_state) + 1);
            let name = e.cut(record.thread);
            e.bytes(name.as_bytes());
            dt = 0;
        } else {
            if ticks >= self.last_ticks {
                dt = ticks - self.last_ticks;
            } else {
                // Time went back (records handed over out of order): restate it.
                e.byte(control::TICKS);
                e.u(ticks);
                dt = 0;
            }
            if !same_thread {
                e.byte(control::THREAD);
                let name = e.cut(record.thread);
                e.bytes(name.as_bytes());
            }
        }
        if wall_offset != if first { 0 } else { self.wall_offset } {
            e.byte(control::WALL);
            e.i(wall_offset);
        }
        if record.open_regions != predicted {
            e.byte(control::OPEN);
            e.u(u64::from(record.open_regions));
        }
        if cut {
            e.byte(control::CUT);
        }
        let callsite = e.callsite(record);
        event(&mut e, record, event_kind, dt, callsite, ticks);
        if !e.ok {
            self.start_batch();
            return false;
        }
        self.len = e.pos;
        if first {
            self.first_ticks = ticks;
            self.flush_at = Self::flush_at(ticks, self.flush_interval);
        }
        self.last_ticks = ticks;
        self.wall_offset = wall_offset;
        self.wall_base = self.anchor_wall_us.wrapping_add(wall_offset);
        if !same_thread {
            self.thread_name.clear();
            self.thread_name.push_str(record.thread);
        }
        self.open_state = spec::open_after(event_kind, record.open_regions, self.open_state);
        true
    }
}

/// The writing cursor of one encoding attempt: every write checks the room and, when
/// there is none, marks the attempt failed instead (nothing can be written out of
/// bounds, and nothing panics).
struct Enc<'a> {
    out: &'a mut [u8],
    pos: usize,
    ok: bool,
    strings: &'a mut Strings,
    callsites: &'a mut Callsites,
    origins: &'a mut Origins,
    prev_delta: &'a mut Vec<u8>,
    /// What the texts may still take when cutting (else `usize::MAX`).
    budget: usize,
}

impl Enc<'_> {
    #[inline]
    fn byte(&mut self, byte: u8) {
        match self.out.get_mut(self.pos) {
            Some(slot) => {
                *slot = byte;
                self.pos += 1;
            }
            None => self.ok = false,
        }
    }

    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        match self.out.get_mut(self.pos..self.pos + bytes.len()) {
            Some(slot) => {
                // Short pieces as a few moves rather than a call to `memcpy`.
                copy_short(slot, bytes);
                self.pos += bytes.len();
            }
            None => self.ok = false,
        }
    }

    #[inline(always)]
    fn u(&mut self, value: u64) {
        // Most values (ids, small deltas, lengths) take one byte: no call for them.
        if value < 0x80 {
            self.byte(value as u8);
            return;
        }
        self.u_long(value);
    }

    /// [`Self::u`] of a value of two bytes or more.
    #[inline(never)]
    fn u_long(&mut self, value: u64) {
        // Straight into the batch when ten bytes of room are left (nearly always).
        match self
            .out
            .get_mut(self.pos..)
            .and_then(|rest| rest.first_chunk_mut::<{ varint::MAX_LEN }>())
        {
            Some(slot) => self.pos += varint::encode(slot, value),
            None => {
                let mut buf = [0; varint::MAX_LEN];
                let n = varint::encode(&mut buf, value);
                self.put(&buf[..n]);
            }
        }
    }

    #[inline]
    fn i(&mut self, value: i64) {
        self.u(varint::zigzag(value));
    }

    #[inline]
    fn bytes(&mut self, bytes: &[u8]) {
        self.u(bytes.len() as u64);
        self.put(bytes);
    }

    /// `text`, or as much of it as the cut budget leaves (at a character boundary).
    #[inline]
    fn cut<'t>(&mut self, text: &'t str) -> &'t str {
        if self.budget == usize::MAX {
            return text;
        }
        let cost = text.len().saturating_add(TEXT_OVERHEAD);
        if cost <= self.budget {
            self.budget -= cost;
            return text;
        }
        let mut keep = self.budget.saturating_sub(TEXT_OVERHEAD).min(text.len());
        while !text.is_char_boundary(keep) {
            keep -= 1;
        }
        self.budget = 0;
        &text[..keep]
    }

    /// Inline text (`b`).
    #[inline]
    fn text(&mut self, text: &str) {
        let text = self.cut(text);
        self.bytes(text.as_bytes());
    }

    /// Optional inline text (`o`).
    #[inline]
    fn opt_text(&mut self, text: Option<&str>) {
        match text {
            None => self.byte(0),
            Some(text) => {
                let text = self.cut(text);
                self.u(text.len() as u64 + 1);
                self.put(text.as_bytes());
            }
        }
    }

    /// Text with numbers packed (`n`).
    #[inline]
    fn num_text(&mut self, text: &str) {
        let text = self.cut(text);
        match spec::packed_number(text) {
            Some(n) => self.u(n << 1),
            None => {
                self.u((text.len() as u64) << 1 | 1);
                self.put(text.as_bytes());
            }
        }
    }

    /// Optional text as an edit of the batch's previous one (`d`).
    #[inline]
    fn delta_text(&mut self, text: Option<&str>) {
        let Some(text) = text else {
            self.byte(0);
            return;
        };
        let text = self.cut(text).as_bytes();
        let prev = &self.prev_delta[..];
        let prefix = common_prefix(prev, text);
        let suffix = common_suffix(&prev[prefix..], &text[prefix..]);
        self.u(prefix as u64 + 1);
        self.u(suffix as u64);
        self.bytes(&text[prefix..text.len() - suffix]);
        self.prev_delta.clear();
        if text.len() <= spec::DELTA_MAX {
            self.prev_delta.extend_from_slice(text);
        }
    }

    /// A `t_rel` relative to the batch's prediction (`r`).
    #[inline]
    fn rel_time(&mut self, event_kind: u8, nesting: u32, ticks: u64, t_rel: u64) {
        let predicted = self.origins.predict(event_kind, nesting, ticks);
        self.u(spec::rel_time_to_wire(t_rel, predicted));
        self.origins.learn(event_kind, nesting, ticks, t_rel);
    }

    /// A list of inline texts (`v`).
    fn list(&mut self, items: &[&str]) {
        let count = if self.budget == usize::MAX {
            items.len()
        } else {
            // Each item takes at least its overhead from the budget.
            items.len().min(self.budget / TEXT_OVERHEAD)
        };
        self.u(count as u64);
        for item in &items[..count] {
            self.text(item);
        }
    }

    /// The id of `text` in the batch's dictionary, defining it first if it is new.
    #[inline]
    fn string(&mut self, text: &str) -> u64 {
        self.string_at(text).0
    }

    /// [`Self::string`], and where the batch holds the string's bytes.
    #[inline(always)]
    fn string_at(&mut self, text: &str) -> (u64, u32) {
        // The usual repeat, found where its address hashes to, costs no call.
        if self.budget == usize::MAX
            && let Some((id, offset)) = self.strings.find_at_home(text, &self.out[..self.pos])
        {
            return (u64::from(id), offset);
        }
        self.string_at_elsewhere(text)
    }

    /// [`Self::string_at`] past its quick look: the full lookup, or a definition.
    #[inline(never)]
    fn string_at_elsewhere(&mut self, text: &str) -> (u64, u32) {
        let text = self.cut(text);
        let miss = match self.strings.find_or_miss(text, &self.out[..self.pos]) {
            Ok((id, offset)) => return (u64::from(id), offset),
            Err(miss) => miss,
        };
        let id = self.strings.count + 1;
        self.strings.count = id;
        self.byte(control::STR_DEF);
        self.u(u64::from(id));
        self.u(text.len() as u64);
        let offset = self.pos;
        self.put(text.as_bytes());
        if self.ok {
            self.strings.insert_missed(text, id, offset, miss);
        }
        (u64::from(id), offset as u32)
    }

    /// A string reference that may be absent (`s`, 0 = absent).
    #[inline]
    fn opt_string(&mut self, text: Option<&str>) -> u64 {
        text.map_or(0, |text| self.string(text))
    }

    /// The id of the record's callsite (0: none), defining it first if it is new.
    #[inline(always)]
    fn callsite(&mut self, record: &Record<'_>) -> u64 {
        let site = record.callsite;
        if site.file.is_none() && site.line == 0 {
            return 0;
        }
        if self.budget == usize::MAX
            && let Some(id) =
                self.callsites
                    .find_at_home(site.file, site.line, &self.out[..self.pos])
        {
            return u64::from(id);
        }
        self.callsite_elsewhere(record)
    }

    /// [`Self::callsite`] past its quick look: the full lookup, or a definition.
    #[inline(never)]
    fn callsite_elsewhere(&mut self, record: &Record<'_>) -> u64 {
        let site = record.callsite;
        let file = site.file.map(|f| self.cut(f));
        if let Some(id) = self.callsites.find(file, site.line, &self.out[..self.pos]) {
            return u64::from(id);
        }
        let (file_id, offset) = match file {
            Some(f) => self.string_at(f),
            None => (0, 0),
        };
        let id = self.callsites.count + 1;
        self.callsites.count = id;
        self.byte(control::CS_DEF);
        self.u(u64::from(id));
        self.u(file_id);
        self.u(u64::from(site.line));
        if self.ok {
            self.callsites.insert(file, site.line, id, offset);
        }
        u64::from(id)
    }

    /// The head byte, time, callsite and repository of an event.
    #[inline]
    fn head(&mut self, event_kind: u8, dt: u64, callsite: u64, repo: Option<i64>) {
        let mut head = event_kind;
        if callsite != 0 {
            head |= spec::HAS_CALLSITE;
        }
        if repo.is_some() {
            head |= spec::HAS_REPO;
        }
        self.byte(head);
        self.u(dt);
        if callsite != 0 {
            self.u(callsite);
        }
        if let Some(repo) = repo {
            self.i(repo);
        }
    }

    /// A region or datum: its strings' definitions, then its head and arguments, in the
    /// order of its signature in [`spec::EVENT_KINDS`], written out by hand.
    #[inline(always)]
    fn hot_event(&mut self, record: &Record<'_>, event_kind: u8, dt: u64, cs: u64, ticks: u64) {
        match record.event {
            Trace2Event::RegionEnter { region, nesting } => {
                let category = self.opt_string(region.category);
                let label = self.opt_string(region.label);
                let msg = self.opt_string(region.msg);
                self.head(event_kind, dt, cs, region.repo);
                self.u(u64::from(nesting));
                self.u(category);
                self.u(label);
                self.u(msg);
                self.origins.learn(kind::REGION_ENTER, nesting, ticks, 0);
            }
            Trace2Event::RegionLeave {
                region,
                nesting,
                t_rel_us,
            } => {
                let category = self.opt_string(region.category);
                let label = self.opt_string(region.label);
                let msg = self.opt_string(region.msg);
                self.head(event_kind, dt, cs, region.repo);
                self.u(u64::from(nesting));
                self.rel_time(event_kind, nesting, ticks, t_rel_us);
                self.u(category);
                self.u(label);
                self.u(msg);
            }
            Trace2Event::Data {
                repo,
                category,
                key,
                value: text,
                nesting,
                t_rel_us,
            }
            | Trace2Event::DataJson {
                repo,
                category,
                key,
                json: text,
                nesting,
                t_rel_us,
            } => {
                let category = self.string(category);
                let key = self.string(key);
                self.head(event_kind, dt, cs, repo);
                self.u(u64::from(nesting));
                self.rel_time(event_kind, nesting, ticks, t_rel_us);
                self.u(category);
                self.u(key);
                if event_kind == kind::DATA {
                    self.num_text(text);
                } else {
                    self.text(text);
                }
            }
            // `try_encode` sends these to `by_catalogue` before.
            tracing_trace2_record::regular_event!() => {
                self.by_catalogue(&record.event, event_kind, dt, cs, ticks);
            }
        }
    }

    /// A `printf` (a line per log message): its row (no repository, no flags, the
    /// message as an edit of the batch's last, `d`) written by hand, without the walk
    /// of [`Self::by_catalogue`].
    #[inline(always)]
    fn printf(&mut self, msg: Option<&str>, event_kind: u8, dt: u64, cs: u64) {
        self.head(event_kind, dt, cs, None);
        self.delta_text(msg);
    }

    /// An event of a kind that is not hot, as its catalogue row and [`spec::Layout`]
    /// say: the definitions of its `s` strings, its head, then its arguments.
    #[inline(never)]
    fn by_catalogue(
        &mut self,
        event: &Trace2Event<'_>,
        event_kind: u8,
        dt: u64,
        cs: u64,
        ticks: u64,
    ) {
        let layout = spec::layout(event.kind());
        let (values, count) = event.field_values();
        let mut refs = [0; spec::MAX_ARGS];
        for (arg, (field, ty)) in layout.args().enumerate() {
            if ty == ArgType::StrRef {
                refs[arg] = match values[field] {
                    FieldValue::Text(text) => self.string(text),
                    FieldValue::OptText(text) => self.opt_string(text),
                    _ => self.mismatch(),
                };
            }
        }
        let mut repo = None;
        let mut flags = 0;
        let outside_args = if layout.has_repo || layout.flag_count > 0 {
            count
        } else {
            0
        };
        for (place, value) in layout.places.iter().zip(&values[..outside_args]) {
            match (place, *value) {
                (Place::Head, FieldValue::Int(id)) => repo = Some(id),
                (Place::Head, FieldValue::OptInt(id)) => repo = id,
                (&Place::Flag { bit, .. }, FieldValue::Flag(set)) => {
                    flags |= u64::from(set) << bit;
                }
                _ => {}
            }
        }
        self.head(event_kind, dt, cs, repo);
        let nesting = event.nesting().unwrap_or(0);
        for (arg, (field, ty)) in layout.args().enumerate() {
            match (ty, values[field]) {
                (ArgType::Uint, FieldValue::Uint(v)) => self.u(v),
                (ArgType::Uint, FieldValue::Nesting(v)) => self.u(u64::from(v)),
                (ArgType::Int, FieldValue::Int(v)) => self.i(v),
                (ArgType::Int, FieldValue::Code(v)) => self.i(i64::from(v)),
                (ArgType::StrRef, _) => self.u(refs[arg]),
                (ArgType::Bytes | ArgType::Json, FieldValue::Text(text)) => self.text(text),
                (ArgType::OptBytes, FieldValue::OptText(text)) => self.opt_text(text),
                (ArgType::List, FieldValue::TextList(items)) => self.list(items),
                (ArgType::Flags, _) => self.u(flags),
                (ArgType::NumText, FieldValue::Text(text)) => self.num_text(text),
                (ArgType::Delta, FieldValue::OptText(text)) => self.delta_text(text),
                (ArgType::RelTime, FieldValue::Uint(t_rel)) => {
                    self.rel_time(event_kind, nesting, ticks, t_rel);
                }
                _ => {
                    self.mismatch();
                }
            }
        }
    }

    /// A field whose value does not suit its argument's type: ruled out when the
    /// layouts are made (a row that breaks it does not compile), so this is a bug; the
    /// record is lost (counted as dropped) rather than written wrong.
    #[cold]
    fn mismatch(&mut self) -> u64 {
        debug_assert!(false, "a field's value does not suit its argument");
        self.ok = false;
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Callsite, RegionInfo, Timestamp};

    /// The session's start in the tests' records (µs since the epoch).
    pub(super) const ANCHOR: i64 = 1_700_000_000_000_000;

    /// A record of `event` at `t` µs after [`ANCHOR`], with `open_regions` and a call
    /// site at `line` of `src/lib.rs` (none for line 0); shared with the steady path's
    /// tests.
    pub(super) fn at(event: Trace2Event<'_>, t: u64, open_regions: u32, line: u32) -> Record<'_> {
        Record {
            event,
            time: Timestamp {
                wall_us: ANCHOR + t as i64,
                t_abs_us: t,
            },
            sid: "sid",
            depth: 0,
            thread: "main",
            callsite: Callsite {
                file: (line != 0).then_some("src/lib.rs"),
                line,
            },
            open_regions,
        }
    }

    fn record(event: Trace2Event<'_>, t: u64) -> Record<'_> {
        at(event, t, 0, 10)
    }

    fn enter(t: u64) -> Record<'static> {
        let mut r = record(
            Trace2Event::RegionEnter {
                region: RegionInfo {
                    repo: None,
                    category: Some("index"),
                    label: Some("do_read_index"),
                    msg: None,
                },
                nesting: 1,
            },
            t,
        );
        r.open_regions = 0;
        r
    }

    fn leave(t: u64) -> Record<'static> {
        record(
            Trace2Event::RegionLeave {
                region: RegionInfo {
                    repo: None,
                    category: Some("index"),
                    label: Some("do_read_index"),
                    msg: None,
                },
                nesting: 1,
                t_rel_us: 3,
            },
            t,
        )
    }

    /// The bytes `write` puts down for `record` after a `region_enter` at nesting 1
    /// and 2 (so that `t_rel` has origins to count from), in a fresh batch.
    fn written_by(record: &Record<'_>, write: fn(&mut Enc<'_>, &Record<'_>, u8, u64)) -> Vec<u8> {
        let mut out = vec![0; 4096];
        let mut strings = Strings::new(64);
        let mut callsites = Callsites::new(16);
        let mut origins = Origins::default();
        let mut prev_delta = Vec::new();
        let mut e = Enc {
            out: &mut out,
            pos: 0,
            ok: true,
            strings: &mut strings,
            callsites: &mut callsites,
            origins: &mut origins,
            prev_delta: &mut prev_delta,
            budget: usize::MAX,
        };
        let ticks = record.time.t_abs_us;
        for nesting in [1, 2] {
            e.origins.learn(kind::REGION_ENTER, nesting, ticks / 2, 0);
        }
        write(&mut e, record, spec::kind_of(&record.event), ticks);
        assert!(e.ok);
        let len = e.pos;
        out.truncate(len);
        out
    }

    #[test]
    fn a_batch_is_due_once_its_age_reaches_the_interval() {
        let mut enc = BatchEncoder::new(DEFAULT_BATCH_SIZE, ANCHOR);
        enc.set_flush_interval(100);
        assert!(enc.try_encode(&enter(1_000), false));
        for (t, due) in [(1_000, false), (1_099, false), (1_100, true), (5_000, true)] {
            assert_eq!(enc.due(t), due, "at {t}");
            assert_eq!(enc.due(t), enc.age(t) >= 100, "at {t}");
        }
        // Time gone back: the age is 0.
        assert!(!enc.due(10));
        // The next batch counts from its own first record.
        enc.seal();
        enc.next_batch();
        assert!(enc.try_encode(&enter(3_000), false));
        assert!(!enc.due(3_050) && enc.due(3_100));
        // An interval of 0: due at once; an interval past the last tick: never before it.
        enc.set_flush_interval(0);
        assert!(enc.due(3_000) && enc.due(10));
        enc.set_flush_interval(u64::MAX - 10);
        assert!(!enc.due(u64::MAX - 1));
    }

    /// The hot kinds, written by hand, agree with their catalogue rows' layouts: the
    /// generic writer puts down the very same bytes for them.
    #[test]
    fn hot_kinds_follow_their_layouts() {
        let region = RegionInfo {
            repo: Some(-3),
            category: Some("index"),
            label: None,
            msg: Some("m"),
        };
        for event in [
            Trace2Event::RegionEnter { region, nesting: 2 },
            Trace2Event::RegionLeave {
                region,
                nesting: 2,
                t_rel_us: 40,
            },
            Trace2Event::Data {
                repo: None,
                category: "c",
                key: "k",
                value: "12345",
                nesting: 2,
                t_rel_us: 7,
            },
            Trace2Event::Data {
                repo: Some(1),
                category: "c",
                key: "k",
                value: "text",
                nesting: 2,
                t_rel_us: 7,
            },
            Trace2Event::DataJson {
                repo: Some(2),
                category: "c",
                key: "k",
                json: "{}",
                nesting: 1,
                t_rel_us: 900,
            },
        ] {
            let r = record(event, 1000);
            let by_hand = written_by(&r, |e, r, k, t| e.hot_event(r, k, 5, 1, t));
            let by_row = written_by(&r, |e, r, k, t| e.by_catalogue(&r.event, k, 5, 1, t));
            assert_eq!(by_hand, by_row, "{}", r.event.name());
        }
    }

    /// `printf` by hand writes what its row does, each message an edit of the last.
    #[test]
    fn printf_follows_its_layout() {
        let messages = [
            None,
            Some(""),
            Some("refreshed 1234 index entries"),
            Some("refreshed 1240 index entries"),
            None,
            Some("refreshed 1240 index entries, done"),
            Some("other"),
        ];
        let write = |by_hand: bool| {
            let mut enc = BatchEncoder::new(DEFAULT_BATCH_SIZE, ANCHOR);
            for (t, msg) in messages.into_iter().enumerate() {
                let r = record(Trace2Event::Printf { msg }, t as u64);
                assert!(enc.try_encode_with(&r, false, |e, r, k, dt, cs, ticks| {
                    if by_hand {
                        e.printf(msg, k, dt, cs);
                    } else {
                        e.by_catalogue(&r.event, k, dt, cs, ticks);
                    }
                }));
            }
            enc.buf[..enc.len].to_vec()
        };
        assert_eq!(write(true), write(false));
        // And that is what `try_encode` writes.
        let mut enc = BatchEncoder::new(DEFAULT_BATCH_SIZE, ANCHOR);
        for (t, msg) in messages.into_iter().enumerate() {
            assert!(enc.try_encode(&record(Trace2Event::Printf { msg }, t as u64), false));
        }
        assert_eq!(enc.buf[..enc.len], write(false));
    }

    #[test]
    fn steady_state_regions_take_few_bytes() {
        let mut enc = BatchEncoder::new(DEFAULT_BATCH_SIZE, ANCHOR);
        let mut written = Vec::new();
        for i in 0..100u64 {
            enc.encode(&enter(i * 10), |f| written.push(f.len()));
            enc.encode(&leave(i * 10 + 3), |f| written.push(f.len()));
        }
        assert!(written.is_empty());
        let before = enc.len;
        enc.encode(&enter(1000), |_| unreachable!());
        enc.encode(&leave(1003), |_| unreachable!());
        // head, dt, callsite, nesting, category, label, msg (+ t_rel for the leave)
        assert_eq!(enc.len - before, 7 + 8);
        // A datum with a number in a region: ten bytes.
        let before = enc.len;
        let mut data = record(
            Trace2Event::Data {
                repo: None,
                category: "index",
                key: "cache_nr",
                value: "123456",
                nesting: 2,
                t_rel_us: 4,
            },
            1014,
        );
        data.open_regions = 1;
        enc.encode(&enter(1010), |_| unreachable!());
        let after_enter = enc.len;
        enc.encode(&data, |_| unreachable!());
        assert_eq!(after_enter - before, 7);
        // head, dt, callsite, nesting, t_rel, category, key, value (3 bytes): the
        // category and key are defined once, then referred to.
        enc.encode(&data, |_| unreachable!());
        let n = enc.len;
        enc.encode(&data, |_| unreachable!());
        assert_eq!(enc.len - n, 10);
    }

    #[test]
    fn a_full_batch_is_written_and_the_record_goes_to_the_next() {
        let mut enc = BatchEncoder::new(MIN_BATCH_SIZE, ANCHOR);
        let mut frames: Vec<Vec<u8>> = Vec::new();
        for i in 0..2000u64 {
            enc.encode(&enter(i), |f| frames.push(f.to_vec()));
        }
        assert!(frames.len() >= 2);
        for (seq, f) in frames.iter().enumerate() {
            assert!(f.len() <= MIN_BATCH_SIZE);
            let frame::Check::Frame { kind, len } = frame::check(f) else {
                panic!("bad frame");
            };
            assert_eq!(kind, frame::kind::BATCH);
            let header = crate::header::BatchHeader::parse(&f[frame::HEADER_LEN..][..len]).unwrap();
            assert_eq!(header.batch_seq, seq as u64);
        }
    }

    #[test]
    fn oversize_records_get_a_jumbo_frame_and_huge_ones_are_cut() {
        let mut enc = BatchEncoder::new(MIN_BATCH_SIZE, ANCHOR);
        enc.encode(&enter(0), |_| unreachable!());
        let big = "x".repeat(100_000);
        let mut frames: Vec<usize> = Vec::new();
        let r = record(Trace2Event::Printf { msg: Some(&big) }, 1);
        assert_eq!(enc.encode(&r, |f| frames.push(f.len())), Encoded::Added);
        // The pending batch, then the jumbo frame.
        assert_eq!(frames.len(), 2);
        assert!(frames[1] > 100_000 && frames[1] < 101_000);
        assert!(enc.is_empty());
        assert_eq!(enc.buf.len(), MIN_BATCH_SIZE);

        let huge = "é".repeat(frame::MAX_PAYLOAD / 2 + 10);
        let r = record(Trace2Event::Printf { msg: Some(&huge) }, 2);
        let mut sizes = Vec::new();
        assert_eq!(enc.encode(&r, |f| sizes.push(f.len())), Encoded::Added);
        assert_eq!(sizes.len(), 1);
        assert!(sizes[0] <= MAX_FRAME && sizes[0] > CUT_BUDGET / 2);
    }
}
