//! The flight recorder's memory: the frames a [`BinaryWriter`](crate::BinaryWriter)
//! hands its sink, kept in a bounded ring instead of written.
//!
//! Batch frames queue in the order they were written and the oldest go first, while the
//! ring holds more than its byte cap or a frame was written longer than the minimum age
//! ago (so the window is never shorter than the minimum age unless the cap forces it).
//! Two kinds of frame are kept aside, outside the cap: each stream's newest STREAM frame
//! and CLOCK frames, and the stream's first batch of its first thread, which holds
//! `version` and `start` (the recorder writes that batch out right after `start`), so an
//! old window still says which process it is. END frames are dropped: a snapshot writes
//! its own. The lock is held for a copy of one frame at most; after a `fork` the child
//! starts with an empty ring.

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
    /// The whole frame as the writer made it.
    pub bytes: Arc<[u8]>,
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
    pub header: Option<Arc<[u8]>>,
    pub clocks: Vec<Arc<[u8]>>,
    /// The first batch of thread 0 (`version`, `start`).
    pub first_batch: Option<RingFrame>,
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
    /// than the minimum age are evicted first, as on a write.
    pub fn copy(&self, now_us: u64) -> RingCopy {
        let mut state = self.locked();
        self.evict(&mut state, now_us);
        RingCopy {
            streams: state.streams.clone(),
            frames: state.frames.iter().cloned().collect(),
        }
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
            // The parent's history is the parent's: the child keeps nothing of it.
            *state = RingState::default();
            self.fork_gen.store(now, Ordering::Release);
        }
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
                let Some(header) = crate::header::StreamHeader::parse(payload) else {
                    return;
                };
                stream_aside(&mut state.streams, header.stream_id).header = Some(bytes.into());
            }
            kind::CLOCK => {
                let Some(id) = stream_id_of(payload) else {
                    return;
                };
                let clocks = &mut stream_aside(&mut state.streams, id).clocks;
                if clocks.len() == CLOCKS_KEPT {
                    clocks.remove(0);
                }
                clocks.push(bytes.into());
            }
            kind::BATCH | kind::XBATCH => {
                let Some(batch) = BatchHeader::parse(payload) else {
                    return;
                };
                let ring_frame = RingFrame {
                    bytes: bytes.into(),
                    stream_id: batch.stream_id,
                    thread_index: batch.thread_index,
                    written_us: now_us,
                };
                let aside = stream_aside(&mut state.streams, batch.stream_id);
                if batch.thread_index == 0 && batch.batch_seq == 0 && aside.first_batch.is_none() {
                    aside.first_batch = Some(ring_frame);
                    return;
                }
                state.bytes += ring_frame.bytes.len();
                state.frames.push_back(ring_frame);
                self.peak_bytes
                    .fetch_max(state.bytes as u64, Ordering::Relaxed);
                self.evict(&mut state, now_us);
            }
            // END: a snapshot writes its own.
            _ => {}
        }
    }

    /// Drops the oldest frames while over the cap, or written before the minimum age.
    fn evict(&self, state: &mut RingState, now_us: u64) {
        let oldest_kept = now_us.saturating_sub(self.min_age_us);
        while let Some(front) = state.frames.front() {
            if state.bytes <= self.max_bytes && front.written_us >= oldest_kept {
                break;
            }
            state.bytes -= front.bytes.len();
            state.frames.pop_front();
            self.evicted.fetch_add(1, Ordering::Relaxed);
        }
    }
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
        // 200-byte frames: five fit the cap.
        assert_eq!(ring.bytes(), 1000);
        let copy = ring.copy(0);
        assert_eq!(copy.frames.len(), 5);
        assert_eq!(ring.evicted.load(Ordering::Relaxed), 15);
        assert!(copy.streams[0].first_batch.is_some());
        assert!(ring.peak_bytes.load(Ordering::Relaxed) <= 1000 + 200);
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
