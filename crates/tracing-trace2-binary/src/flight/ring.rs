//! The flight recorder's memory: the frames a [`BinaryWriter`](crate::BinaryWriter)
//! hands its sink, kept in a bounded ring instead of written.
//!
//! Batch frames queue in the order they were written and the oldest go first, while the
//! ring holds more than its byte cap or a frame was written longer than the minimum age
//! ago (so the window is never shorter than the minimum age unless the cap forces it).
//! Two kinds of frame are kept aside from the queue: each stream's newest STREAM frame
//! and CLOCK frames, and the stream's first batch of its first thread, which holds
//! `version` and `start` (the recorder writes that batch out right after `start`), so an
//! old window still says which process it is. END frames are dropped: a snapshot writes
//! its own. The lock is held for a copy of one frame at most; after a `fork` the child
//! starts with an empty ring (but its parent's `version`/`start`).
//!
//! The cap counts every buffer the ring owns, at its capacity: the queued frames, the
//! frames kept aside and the spare buffers below. A buffer that a snapshot's copy still
//! holds after its eviction is the copy's, and goes with it.
//!
//! A batch frame's buffer is recycled: an evicted frame that no snapshot copy still
//! holds is kept as a spare (one always, when the cap has room for it beside the
//! queue: the queue gives up its oldest frame for it; more while the queue is shorter,
//! so that a ring emptied by the minimum age refills without allocating) and the next
//! full batch is copied into it, so a ring that once filled allocates nothing per
//! batch. With glibc, a fresh 64 KiB buffer per batch (and the free of an evicted
//! one) made the traced thread merge every small block the rest of the process had
//! freed since the last such call (`malloc_consolidate`): the host's allocator
//! housekeeping, paid on the hot path.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::dest::Sink;
use crate::frame::{self, kind};
use crate::header::{BatchHeader, stream_id_of};
use crate::slots::SpinLock;
use crate::writer::fork_generation;

/// How many streams keep their STREAM frame and `version`/`start` batch (a process
/// starts a stream at a `fork` and when the session id changes, both rare).
const STREAMS_KEPT: usize = 4;
/// How many CLOCK frames a stream keeps (the newest ones).
const CLOCKS_KEPT: usize = 8;

/// One batch frame in the ring.
#[derive(Clone, Debug)]
pub(crate) struct RingFrame {
    /// The whole frame as the writer made it (its buffer is reused once evicted).
    pub bytes: Arc<Vec<u8>>,
    pub stream_id: u64,
    pub thread_index: u64,
    /// When the ring received it (µs since the process start).
    pub written_us: u64,
}

/// What a stream keeps aside from the ring.
#[derive(Clone, Debug, Default)]
pub(crate) struct StreamAside {
    pub stream_id: u64,
    /// The newest copy of the STREAM frame.
    pub header: Option<Arc<Vec<u8>>>,
    pub clocks: Vec<Arc<Vec<u8>>>,
    /// The first batch of thread 0 (`version`, `start`).
    pub first_batch: Option<RingFrame>,
    /// `first_batch` went out right after a `start` record: it says which process this is.
    pub holds_start: bool,
    /// Kept from the parent by a `fork`ed child: the parent's `version`/`start`, which
    /// the child's snapshots repeat (the child records none of its own).
    pub inherited: bool,
    /// What a snapshot needs of the STREAM frame, read from it when it was kept (a
    /// signal handler may not parse it: that allocates).
    pub parsed: Option<Arc<HeaderFacts>>,
}

/// The fields of a STREAM frame a snapshot uses.
#[derive(Clone, Debug, Default)]
#[cfg_attr(not(unix), allow(dead_code))] // used by the `SIGUSR2` handler (Unix)
pub(crate) struct HeaderFacts {
    pub sid: String,
    pub depth: u32,
    pub anchor_wall_us: i64,
    /// The session id's own component, as a file name may hold it.
    pub name_part: String,
}

/// What a snapshot taken in place sees of the ring (see [`Ring::try_view`]).
#[cfg_attr(not(unix), allow(dead_code))] // used by the `SIGUSR2` handler (Unix)
pub(crate) struct RingView<'a> {
    pub streams: &'a [StreamAside],
    /// The queued frames, oldest first.
    pub frames: &'a std::collections::VecDeque<RingFrame>,
    /// How many of the oldest frames are past the minimum age (a copy would drop them).
    pub skip: usize,
    /// See `RingState::forked`.
    pub forked: bool,
    /// See `RingState::start_noted`.
    pub start_noted: bool,
}

/// A consistent copy of the ring's contents, taken for a snapshot.
#[derive(Clone, Debug, Default)]
pub(crate) struct RingCopy {
    pub streams: Vec<StreamAside>,
    pub frames: Vec<RingFrame>,
}

#[derive(Default)]
struct RingState {
    frames: std::collections::VecDeque<RingFrame>,
    bytes: usize,
    streams: Vec<StreamAside>,
    /// Buffers of evicted frames that nothing else held, for the next frames.
    spares: Vec<Arc<Vec<u8>>>,
    /// The capacity of those buffers, in bytes.
    spare_bytes: usize,
    /// The capacity of the buffers of `streams`, in bytes.
    aside_bytes: usize,
    /// The longest batch frame kept so far: what a full batch is.
    largest_frame: usize,
    /// A `start` record was recorded and its batch has not come yet.
    start_noted: bool,
    /// This is a `fork`ed child's ring: a new stream's first batch is an ordinary one
    /// (the child records no `version`/`start`) unless a `start` was noted.
    forked: bool,
}

impl RingState {
    /// A batch frame's `bytes`, in a recycled buffer when the frame is about as long as
    /// the longest seen (a full batch) and a spare is free, else in a new buffer. Only
    /// near-full frames are recycled so that a short frame (a flush) never sits in a
    /// batch-sized buffer: the cap counts frame lengths, and a buffer is at most about
    /// 4/3 of its frame's.
    fn frame_buffer(&mut self, bytes: &[u8]) -> Arc<Vec<u8>> {
        self.largest_frame = self.largest_frame.max(bytes.len());
        if !self.is_batch_sized(bytes.len()) {
            return Arc::new(bytes.to_vec());
        }
        let spare = self.spares.pop();
        if let Some(spare) = &spare {
            self.spare_bytes -= spare.capacity();
        }
        refilled(spare, bytes)
    }

    /// Whether a buffer of `len` bytes is worth recycling for full batches.
    fn is_batch_sized(&self, len: usize) -> bool {
        len >= self.largest_frame - self.largest_frame / 4
    }

    /// Every byte the ring owns: queued frames, spares and frames kept aside.
    fn owned_bytes(&self) -> usize {
        self.bytes + self.spare_bytes + self.aside_bytes
    }

    /// Counts the buffers kept aside again (after one of them changed: rare).
    fn count_aside(&mut self) {
        self.aside_bytes = self
            .streams
            .iter()
            .map(|s| {
                s.header.as_ref().map_or(0, |h| h.capacity())
                    + s.clocks.iter().map(|c| c.capacity()).sum::<usize>()
                    + s.first_batch.as_ref().map_or(0, |f| f.bytes.capacity())
            })
            .sum();
    }
}

/// `bytes` copied into `old`'s buffer when nothing else (a snapshot's copy) holds it
/// and it has the room, else into a new buffer with room for a slightly longer frame next time (full batches
/// differ by a record's length).
fn refilled(old: Option<Arc<Vec<u8>>>, bytes: &[u8]) -> Arc<Vec<u8>> {
    if let Some(mut old) = old
        && let Some(buffer) = Arc::get_mut(&mut old)
        && buffer.capacity() >= bytes.len()
    {
        buffer.clear();
        buffer.extend_from_slice(bytes);
        return old;
    }
    let mut buffer = Vec::with_capacity(bytes.len() + bytes.len() / 16);
    buffer.extend_from_slice(bytes);
    Arc::new(buffer)
}

/// The bounded ring; the [`Sink`] of the recorder's writer.
pub(crate) struct Ring {
    max_bytes: usize,
    min_age_us: u64,
    state: SpinLock<RingState>,
    fork_gen: AtomicU64,
    /// Batch frames evicted so far.
    pub evicted: AtomicU64,
    /// The most bytes the ring held at once (frames kept aside not counted).
    pub peak_bytes: AtomicU64,
}

impl Ring {
    pub fn new(max_bytes: usize, min_age_us: u64) -> Ring {
        Ring {
            max_bytes,
            min_age_us,
            state: SpinLock::new(RingState::default()),
            fork_gen: AtomicU64::new(fork_generation()),
            evicted: AtomicU64::new(0),
            peak_bytes: AtomicU64::new(0),
        }
    }

    /// Bytes of batch frames held now.
    pub fn bytes(&self) -> usize {
        self.locked().bytes
    }

    /// The frames, under the lock for the time of cloning their handles; frames older
    /// than the minimum age are evicted first. Nothing else is evicted here (a spare is
    /// made by the next write), so that [`Self::try_view`] sees the same window.
    pub fn copy(&self, now_us: u64) -> RingCopy {
        let mut state = self.locked();
        self.evict(&mut state, now_us, false);
        RingCopy {
            streams: state.streams.clone(),
            frames: state.frames.iter().cloned().collect(),
        }
    }

    /// Calls `f` with the ring as [`Self::copy`] would copy it at `now_us`, in place:
    /// without waiting for the lock, allocating, or evicting (frames past the minimum
    /// age are counted in `skip`, not dropped: a drop may free a buffer). `None` when
    /// the lock is held, or after a `fork` not taken in yet. For a signal handler.
    #[cfg_attr(not(unix), allow(dead_code))] // used by the `SIGUSR2` handler (Unix)
    pub fn try_view<R>(&self, now_us: u64, f: impl FnOnce(&RingView<'_>) -> R) -> Option<R> {
        if self.fork_gen.load(Ordering::Acquire) != fork_generation() {
            return None;
        }
        let state = self.state.try_lock()?;
        let oldest_kept = now_us.saturating_sub(self.min_age_us);
        let skip = state
            .frames
            .iter()
            .take_while(|f| f.written_us < oldest_kept)
            .count();
        Some(f(&RingView {
            streams: &state.streams,
            frames: &state.frames,
            skip,
            forked: state.forked,
            start_noted: state.start_noted,
        }))
    }

    /// The state, taken back from a thread of the parent after a `fork`.
    fn locked(&self) -> crate::slots::SpinGuard<'_, RingState> {
        let now = fork_generation();
        if self.fork_gen.load(Ordering::Acquire) != now {
            self.after_fork(now);
        }
        self.state.lock()
    }

    #[cold]
    fn after_fork(&self, now: u64) {
        // SAFETY: the generation changed, so this is a forked child. The writer takes
        // its slots back (and so every writing thread of the child waits) before it
        // writes a frame; a snapshot of the child runs on the child's own threads, of
        // which only the forking one existed when the lock could have been held. A
        // second thread of the child racing here sees the generation stored below only
        // after the reset.
        unsafe { self.state.unlock_after_fork() };
        let mut state = self.state.lock();
        if self.fork_gen.load(Ordering::Acquire) != now {
            // The parent's history is the parent's: the child keeps nothing of it but
            // the `version`/`start` batch (with its stream's header and clocks), which
            // the child's snapshots need to say which process they are.
            let inherited = state
                .streams
                .iter()
                .rev()
                .find(|s| s.holds_start && s.first_batch.is_some())
                .cloned();
            *state = RingState {
                forked: true,
                ..RingState::default()
            };
            if let Some(mut aside) = inherited {
                aside.inherited = true;
                state.streams.push(aside);
            }
            state.count_aside();
            self.fork_gen.store(now, Ordering::Release);
        }
    }

    /// A `start` record was recorded: the next first batch of a stream holds it.
    pub fn note_start(&self) {
        self.locked().start_noted = true;
    }

    fn keep(&self, bytes: &[u8]) {
        let frame::Check::Frame { kind, len } = frame::check(bytes) else {
            return;
        };
        let payload = &bytes[frame::HEADER_LEN..][..len];
        let now_us = tracing_trace2_dst::clock::t_abs_us();
        let mut state = self.locked();
        match kind {
            kind::STREAM => {
                // The writer repeats its STREAM frame unchanged; a copy already kept needs
                // neither the parse (which allocates its strings) nor a new buffer. The
                // stream id follows the two version bytes.
                let id = payload.get(2..).and_then(stream_id_of);
                let kept = |s: &StreamAside| {
                    Some(s.stream_id) == id
                        && s.header.as_deref().is_some_and(|h| h.as_slice() == bytes)
                };
                if state.streams.iter().any(kept) {
                    return;
                }
                let Some(header) = crate::header::StreamHeader::parse(payload) else {
                    return;
                };
                let facts = HeaderFacts {
                    name_part: name_part(&header.sid),
                    sid: header.sid,
                    depth: header.depth,
                    anchor_wall_us: header.anchor_wall_us,
                };
                let aside = stream_aside(&mut state.streams, header.stream_id);
                aside.header = Some(Arc::new(bytes.to_vec()));
                aside.parsed = Some(Arc::new(facts));
                state.count_aside();
                self.evict(&mut state, now_us, true);
            }
            kind::CLOCK => {
                let Some(id) = stream_id_of(payload) else {
                    return;
                };
                let clocks = &mut stream_aside(&mut state.streams, id).clocks;
                let oldest = (clocks.len() == CLOCKS_KEPT).then(|| clocks.remove(0));
                clocks.push(refilled(oldest, bytes));
                state.count_aside();
                self.evict(&mut state, now_us, true);
            }
            kind::BATCH | kind::XBATCH => {
                let Some(batch) = BatchHeader::parse(payload) else {
                    return;
                };
                let ring_frame = RingFrame {
                    bytes: state.frame_buffer(bytes),
                    stream_id: batch.stream_id,
                    thread_index: batch.thread_index,
                    written_us: now_us,
                };
                let first = batch.thread_index == 0 && batch.batch_seq == 0;
                let start_noted = first && std::mem::take(&mut state.start_noted);
                let forked = state.forked;
                let aside = stream_aside(&mut state.streams, batch.stream_id);
                if first && aside.first_batch.is_none() && (!forked || start_noted) {
                    aside.first_batch = Some(ring_frame);
                    aside.holds_start = start_noted;
                    state.count_aside();
                    self.evict(&mut state, now_us, true);
                    return;
                }
                state.bytes += ring_frame.bytes.capacity();
                state.frames.push_back(ring_frame);
                self.peak_bytes
                    .fetch_max(state.bytes as u64, Ordering::Relaxed);
                self.evict(&mut state, now_us, true);
            }
            // END: a snapshot writes its own.
            _ => {}
        }
    }

    /// Drops the oldest frames while the ring owns more than the cap, or written before
    /// the minimum age; and one more, to be the spare the next full batch is copied
    /// into, when there is none and the cap has no room for one beside the queue
    /// (`make_spare`: on a write, not on a copy).
    fn evict(&self, state: &mut RingState, now_us: u64, make_spare: bool) {
        let oldest_kept = now_us.saturating_sub(self.min_age_us);
        while let Some(front) = state.frames.front() {
            let old = front.written_us < oldest_kept;
            let over = state.owned_bytes() > self.max_bytes;
            // The room a spare for a full batch takes (its buffer has 1/16 of slack).
            let spare_room = state.largest_frame + state.largest_frame / 16;
            let wants_spare = make_spare
                && state.spares.is_empty()
                && state.frames.len() > 1
                && state.owned_bytes() + spare_room > self.max_bytes;
            if !old && !over && !wants_spare {
                break;
            }
            let Some(mut evicted) = state.frames.pop_front() else {
                break;
            };
            let capacity = evicted.bytes.capacity();
            state.bytes -= capacity;
            if Arc::get_mut(&mut evicted.bytes).is_some()
                && state.is_batch_sized(evicted.bytes.len())
                && state.owned_bytes() + capacity <= self.max_bytes
            {
                state.spare_bytes += capacity;
                state.spares.push(evicted.bytes);
            }
            self.evicted.fetch_add(1, Ordering::Relaxed);
            if !old && !over {
                // The one frame given up for a spare (kept as one or not): no more.
                break;
            }
        }
        // Frames kept aside that grew (or a cap below them): spares go before anything.
        while state.owned_bytes() > self.max_bytes
            && let Some(spare) = state.spares.pop()
        {
            state.spare_bytes -= spare.capacity();
        }
    }
}

/// The own component of a session id (after its last `/`) with every byte a file
/// name should not hold made `_`.
pub(crate) fn name_part(sid: &str) -> String {
    let own = sid.rsplit('/').next().unwrap_or_default();
    own.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The entry of stream `id`, made (and the oldest forgotten) if it is new.
fn stream_aside(streams: &mut Vec<StreamAside>, id: u64) -> &mut StreamAside {
    let at = match streams.iter().position(|s| s.stream_id == id) {
        Some(at) => at,
        None => {
            if streams.len() == STREAMS_KEPT {
                streams.remove(0);
            }
            streams.push(StreamAside {
                stream_id: id,
                ..StreamAside::default()
            });
            streams.len() - 1
        }
    };
    &mut streams[at]
}

/// The writer's sink: every frame goes to the ring.
pub(crate) struct RingSink(pub Arc<Ring>);

impl Sink for RingSink {
    fn write_line(&self, frame: &[u8]) -> io::Result<()> {
        self.0.keep(frame);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::End;

    /// A batch frame of `len` payload bytes for thread `thread`, batch `seq`.
    fn batch(stream_id: u64, thread: u64, seq: u64, len: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let start = frame::begin(&mut out, kind::BATCH);
        out.extend_from_slice(&stream_id.to_le_bytes());
        out.extend_from_slice(&[thread as u8, seq as u8, 0, 1, 0]);
        out.resize(start + frame::HEADER_LEN + len, 0);
        frame::seal(&mut out, start);
        out
    }

    #[test]
    fn the_cap_evicts_the_oldest_batches_and_keeps_the_first_aside() {
        let ring = Ring::new(1000, u64::MAX);
        let sink = RingSink(Arc::new(ring));
        sink.write_line(&batch(7, 0, 0, 100)).unwrap();
        for seq in 1..=20 {
            sink.write_line(&batch(7, 0, seq, 188)).unwrap();
        }
        let ring = &sink.0;
        // 200-byte frames in buffers of 212 (1/16 of slack), the first batch aside in
        // one of 119, and a spare for the next frame: three frames fit the cap.
        assert_eq!(ring.bytes(), 3 * 212);
        assert_eq!(ring.locked().owned_bytes(), 119 + 3 * 212 + 212);
        let copy = ring.copy(0);
        assert_eq!(copy.frames.len(), 3);
        assert_eq!(ring.evicted.load(Ordering::Relaxed), 17);
        assert!(copy.streams[0].first_batch.is_some());
        assert!(ring.peak_bytes.load(Ordering::Relaxed) <= 1000);
    }

    #[test]
    fn the_cap_counts_every_buffer_at_every_size() {
        for cap in [300, 1000, 4096, 20_000] {
            for len in [40, 188, 788] {
                let ring = Arc::new(Ring::new(cap, u64::MAX));
                let sink = RingSink(Arc::clone(&ring));
                // `version` and `start` (kept aside, and counted).
                sink.write_line(&batch(7, 0, 0, 40)).unwrap();
                for seq in 1..=100 {
                    // Full batches, and now and then a short one (a flush).
                    let len = if seq % 7 == 0 { len / 3 } else { len };
                    sink.write_line(&batch(7, 1, seq, len)).unwrap();
                    let owned = ring.locked().owned_bytes();
                    assert!(owned <= cap, "cap {cap}, frames of {len}: {owned}");
                }
                let copy = ring.copy(0);
                // Whatever fits stays: the newest frame at least, when it fits alone.
                if 2 * (len + 12) < cap {
                    assert!(!copy.frames.is_empty(), "cap {cap}, frames of {len}");
                }
            }
        }
    }

    /// A batch frame of `len` payload bytes filled with `seq` (thread 1, batch `seq`).
    fn marked(seq: u64, len: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let start = frame::begin(&mut out, kind::BATCH);
        out.extend_from_slice(&7u64.to_le_bytes());
        out.extend_from_slice(&[1, seq as u8, 0, 1, 0]);
        out.resize(start + frame::HEADER_LEN + len, seq as u8);
        frame::seal(&mut out, start);
        out
    }

    // Reuse is seen in a buffer's capacity, not its address (a freed buffer's address
    // can come back from the allocator, under Miri too): frames of 400 bytes get buffers
    // of 425 (1/16 of slack); later frames of 320 bytes, still full batches, would get
    // 340 in a fresh buffer and keep 425 in a recycled one.
    const OLD_FRAME: usize = 388;
    const OLD_CAPACITY: usize = 425;
    const NEW_FRAME: usize = 308;

    #[test]
    fn evicted_buffers_are_reused_but_never_one_a_copy_still_holds() {
        let ring = Arc::new(Ring::new(2000, u64::MAX));
        let sink = RingSink(Arc::clone(&ring));
        for seq in 0..10 {
            sink.write_line(&marked(seq, OLD_FRAME)).unwrap();
        }
        let held = ring.copy(0);
        let held_bytes: Vec<Vec<u8>> = held.frames.iter().map(|f| f.bytes.to_vec()).collect();
        // Live buffers have distinct addresses, so this comparison is sound.
        let held_at: Vec<*const u8> = held.frames.iter().map(|f| f.bytes.as_ptr()).collect();
        for seq in 10..40 {
            sink.write_line(&marked(seq, OLD_FRAME)).unwrap();
        }
        // The copy's frames were evicted meanwhile but are intact, and none of their
        // buffers took a newer frame.
        let after: Vec<Vec<u8>> = held.frames.iter().map(|f| f.bytes.to_vec()).collect();
        assert_eq!(after, held_bytes);
        let now = ring.copy(0);
        assert!(
            now.frames
                .iter()
                .all(|f| !held_at.contains(&f.bytes.as_ptr()))
        );
        assert_eq!(
            now.frames.last().unwrap().bytes.as_slice(),
            marked(39, OLD_FRAME).as_slice()
        );
        // Once the copy is gone, evicted buffers are recycled: shorter frames (still
        // full batches) land in the 425-byte buffers of the frames they evict.
        drop((held, now));
        for seq in 40..50 {
            sink.write_line(&marked(seq, NEW_FRAME)).unwrap();
        }
        let reused = ring.copy(0);
        let capacities: Vec<usize> = reused.frames.iter().map(|f| f.bytes.capacity()).collect();
        assert!(capacities.len() > 1, "{capacities:?}");
        assert!(
            capacities.iter().all(|&c| c == OLD_CAPACITY),
            "{capacities:?}"
        );
        assert_eq!(
            reused.frames.last().unwrap().bytes.as_slice(),
            marked(49, NEW_FRAME).as_slice()
        );
    }

    #[test]
    fn a_ring_emptied_by_the_minimum_age_refills_into_its_old_buffers() {
        // Five frames in buffers of 425 and a spare. A minimum age out of reach (1,000 s):
        // the writes below (slow under Miri) are all younger.
        let ring = Arc::new(Ring::new(6 * OLD_CAPACITY, 1_000_000_000));
        let sink = RingSink(Arc::clone(&ring));
        for seq in 1..=5 {
            sink.write_line(&marked(seq, OLD_FRAME)).unwrap();
        }
        let old = ring.copy(0);
        assert_eq!(old.frames.len(), 5);
        assert!(
            old.frames
                .iter()
                .all(|f| f.bytes.capacity() == OLD_CAPACITY)
        );
        drop(old);
        // Far in the future: every frame is past the minimum age and goes.
        assert!(ring.copy(u64::MAX / 2).frames.is_empty());
        // Shorter frames, still full batches: in the old buffers (425), not fresh ones
        // (340).
        for seq in 6..=10 {
            sink.write_line(&marked(seq, NEW_FRAME)).unwrap();
        }
        let new = ring.copy(0);
        assert_eq!(new.frames.len(), 5);
        assert!(
            new.frames
                .iter()
                .all(|f| f.bytes.capacity() == OLD_CAPACITY)
        );
        assert_eq!(
            new.frames[4].bytes.as_slice(),
            marked(10, NEW_FRAME).as_slice()
        );
    }

    #[test]
    fn a_short_frame_never_sits_in_a_batch_sized_buffer() {
        let ring = Arc::new(Ring::new(4000, u64::MAX));
        let sink = RingSink(Arc::clone(&ring));
        // Full batches first, so that spares of their size wait; then flushes.
        for seq in 1..=20 {
            sink.write_line(&batch(7, 1, seq, 788)).unwrap();
        }
        for seq in 21..=80 {
            let len = if seq % 3 == 0 { 788 } else { 40 };
            sink.write_line(&batch(7, 1, seq, len)).unwrap();
        }
        let copy = ring.copy(0);
        assert!(copy.frames.iter().any(|f| f.bytes.len() < 100));
        for frame in &copy.frames {
            let (len, capacity) = (frame.bytes.len(), frame.bytes.capacity());
            assert!(capacity <= len + len / 3, "{len} bytes in {capacity}");
        }
    }

    #[test]
    fn frames_older_than_the_minimum_age_go() {
        let ring = Arc::new(Ring::new(1 << 20, 1_000));
        RingSink(Arc::clone(&ring))
            .write_line(&batch(7, 1, 0, 100))
            .unwrap();
        let written = ring.copy(0).frames[0].written_us;
        assert_eq!(ring.copy(written + 1_000).frames.len(), 1);
        assert_eq!(ring.copy(written + 1_001).frames.len(), 0);
    }

    #[test]
    fn end_frames_and_damage_are_not_kept() {
        let ring = Arc::new(Ring::new(1 << 20, u64::MAX));
        let sink = RingSink(Arc::clone(&ring));
        let mut end = Vec::new();
        End {
            stream_id: 7,
            threads: vec![(0, 1)],
        }
        .write_frame(&mut end);
        sink.write_line(&end).unwrap();
        let mut damaged = batch(7, 1, 0, 100);
        damaged[20] ^= 1;
        sink.write_line(&damaged).unwrap();
        let copy = ring.copy(0);
        assert!(copy.frames.is_empty() && copy.streams.is_empty());
    }
}
