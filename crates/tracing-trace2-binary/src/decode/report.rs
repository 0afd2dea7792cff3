//! What a decode read, showed and skipped.

use std::fmt;

use super::Decoder;

/// What a decode read, showed and skipped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DecodeReport {
    /// Bytes read.
    pub bytes: u64,
    /// Intact frames.
    pub frames: u64,
    /// Bytes outside any intact frame (damage, truncation, foreign data).
    pub skipped_bytes: u64,
    /// Places where bytes were skipped.
    pub damaged_regions: u64,
    /// Frames cut short at a page end, where the input ends or another process's frame
    /// starts: their writers were killed in their last `write` (a file write stops only
    /// between pages), so the events of each one's batch are lost and nothing else.
    /// [`StreamReport::cut_frames`] says whose they were, where the bytes tell.
    pub cut_frames: u64,
    /// The bytes of those frames; not counted as skipped.
    pub cut_bytes: u64,
    /// Intact frames of kinds this decoder does not know (extension batches included).
    pub unknown_frames: u64,
    /// Intact frames whose payload could not be read.
    pub invalid_frames: u64,
    /// Batches read twice (the second copy is ignored).
    pub duplicate_batches: u64,
    /// Batches of streams whose STREAM frame never appeared.
    pub orphan_batches: u64,
    /// Batches of streams this decoder cannot read (another major version).
    pub undecodable_batches: u64,
    /// Events handed out.
    pub events: u64,
    /// Events handed out after a later one (input beyond the merge window, or time
    /// going back in the input).
    pub late_events: u64,
    /// Per stream, in the order they appeared.
    pub streams: Vec<StreamReport>,
    /// The first hundred problems, in words.
    pub warnings: Vec<String>,
}

/// One stream of a [`DecodeReport`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamReport {
    /// The stream id.
    pub stream_id: u64,
    /// The session id, if the STREAM frame was read.
    pub sid: Option<String>,
    /// The process id, if the STREAM frame was read.
    pub pid: Option<u32>,
    /// Why the stream could not be decoded, if it could not.
    pub unsupported: Option<String>,
    /// Whether an END frame was read: the writer ended the stream cleanly.
    pub ended: bool,
    /// Frames of this stream a kill cut at a page end (its last one: the process was
    /// killed while writing it, and that batch is lost).
    pub cut_frames: u64,
    /// The bytes of those frames.
    pub cut_bytes: u64,
    /// Events handed out.
    pub events: u64,
    /// Per thread, by thread index.
    pub threads: Vec<ThreadReport>,
}

/// One thread of a [`StreamReport`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadReport {
    /// The thread's number in the stream.
    pub thread_index: u64,
    /// Its name in its first batch read.
    pub name: String,
    /// Batches read.
    pub batches: u64,
    /// Events handed out.
    pub events: u64,
    /// Batches missing: gaps in the sequence numbers, and those the END frame counts
    /// but the input lacks, save those in [`cut_batches`](Self::cut_batches).
    pub lost_batches: u64,
    /// Batches whose frame a kill cut at a page end (the cut bytes name the batch):
    /// lost to the kill, not missing. Usually the thread's last; one the END frame
    /// counts when the process exited while this thread was writing (the exit ends
    /// the other threads as a kill does).
    pub cut_batches: u64,
    /// Batches whose rest was skipped at a record that did not parse.
    pub abandoned_batches: u64,
    /// Events of kinds this decoder cannot show (declared by a later minor version).
    pub unknown_events: u64,
    /// Events whose texts the writer cut to fit a frame.
    pub cut_events: u64,
}

impl DecodeReport {
    /// Batches lost, all threads of all streams.
    pub fn lost_batches(&self) -> u64 {
        self.streams
            .iter()
            .flat_map(|s| &s.threads)
            .map(|t| t.lost_batches)
            .sum()
    }

    /// Whether the input was read whole: no byte skipped, no batch lost or cut short,
    /// no event of a kind this decoder does not know, and every stream ended with its
    /// END frame.
    pub fn is_complete(&self) -> bool {
        self.skipped_bytes == 0
            && self.cut_frames == 0
            && self.invalid_frames == 0
            && self.orphan_batches == 0
            && self.undecodable_batches == 0
            && self.streams.iter().all(|s| {
                s.ended
                    && s.unsupported.is_none()
                    && s.threads.iter().all(|t| {
                        t.lost_batches == 0 && t.abandoned_batches == 0 && t.unknown_events == 0
                    })
            })
    }
}

impl fmt::Display for DecodeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} events from {} frames ({} bytes) in {} stream(s)",
            self.events,
            self.frames,
            self.bytes,
            self.streams.len()
        )?;
        if self.skipped_bytes > 0 {
            writeln!(
                f,
                "skipped {} bytes in {} damaged place(s)",
                self.skipped_bytes, self.damaged_regions
            )?;
        }
        if self.cut_frames > 0 {
            writeln!(
                f,
                "{} frame(s) ({} bytes) cut at a page end: the writer was killed in its last write",
                self.cut_frames, self.cut_bytes
            )?;
        }
        for (what, n) in [
            ("frames of unknown kinds", self.unknown_frames),
            ("unreadable frames", self.invalid_frames),
            ("duplicate batches", self.duplicate_batches),
            ("batches without their stream header", self.orphan_batches),
            ("batches of undecodable streams", self.undecodable_batches),
            ("events out of time order", self.late_events),
        ] {
            if n > 0 {
                writeln!(f, "{n} {what}")?;
            }
        }
        for s in &self.streams {
            let sid = s.sid.as_deref().unwrap_or("(no stream header)");
            let end = if s.ended { "ended" } else { "no END frame" };
            write!(
                f,
                "stream {:016x} {sid}: {} events, {end}",
                s.stream_id, s.events
            )?;
            if s.cut_frames == 1 {
                write!(
                    f,
                    ", last frame ({} bytes) cut where the writer was killed",
                    s.cut_bytes
                )?;
            } else if s.cut_frames > 1 {
                write!(
                    f,
                    ", {} frames ({} bytes) cut where writers were killed",
                    s.cut_frames, s.cut_bytes
                )?;
            }
            writeln!(f)?;
            for t in &s.threads {
                if t.lost_batches + t.abandoned_batches + t.unknown_events + t.cut_events > 0 {
                    writeln!(
                        f,
                        "  thread {} {}: {} batches lost, {} cut short, {} events unknown, {} events cut",
                        t.thread_index,
                        t.name,
                        t.lost_batches,
                        t.abandoned_batches,
                        t.unknown_events,
                        t.cut_events
                    )?;
                }
            }
        }
        for w in &self.warnings {
            writeln!(f, "warning: {w}")?;
        }
        Ok(())
    }
}

pub(super) fn build(d: &Decoder) -> DecodeReport {
    let mut streams: Vec<StreamReport> = d
        .streams
        .iter()
        .map(|s| {
            let (cut_frames, cut_bytes) = d.cuts.get(&s.id).copied().unwrap_or_default();
            StreamReport {
                stream_id: s.id,
                sid: s.info.as_ref().map(|i| i.header.sid.clone()),
                pid: s.info.as_ref().map(|i| i.header.pid),
                unsupported: s.unsupported.clone(),
                ended: s.ended,
                cut_frames,
                cut_bytes,
                events: s.events,
                threads: Vec::new(),
            }
        })
        .collect();
    let mut orphan = d.orphans_dropped;
    let mut undecodable = d.undecodable_dropped;
    for q in &d.threads {
        let stream = &d.streams[q.stream];
        let left = q.pending.len() as u64;
        if stream.info.is_none() {
            orphan += left;
        } else if stream.kinds.is_none() {
            undecodable += left;
        }
        let max_seq = q.received.iter().max().map_or(0, |m| m.saturating_add(1));
        let expected = max_seq.max(stream.end_counts.get(&q.thread_index).copied().unwrap_or(0));
        let cut = d.cut_batches.get(&(stream.id, q.thread_index));
        // Cut batches inside the expected range are the kill's, not missing.
        let cut_missing = cut.map_or(0, |seqs| {
            seqs.iter()
                .filter(|&&seq| seq < expected && !q.received.contains(&seq))
                .count() as u64
        });
        streams[q.stream].threads.push(ThreadReport {
            thread_index: q.thread_index,
            name: q.name.clone(),
            batches: q.received.len() as u64,
            events: q.events,
            lost_batches: expected
                .saturating_sub(q.received.len() as u64)
                .saturating_sub(cut_missing),
            cut_batches: cut.map_or(0, |seqs| seqs.len() as u64),
            abandoned_batches: q.abandoned,
            unknown_events: q.unknown_events,
            cut_events: q.cut_events,
        });
    }
    // Threads the END frame names, or a cut frame does, that left no intact batch.
    for (s, stream) in d.streams.iter().enumerate() {
        let mut threads: Vec<u64> = stream
            .end_counts
            .iter()
            .filter(|&(_, &batches)| batches > 0)
            .map(|(&thread, _)| thread)
            .collect();
        threads.extend(
            d.cut_batches
                .keys()
                .filter(|(id, _)| *id == stream.id)
                .map(|&(_, thread)| thread),
        );
        threads.sort_unstable();
        threads.dedup();
        for thread in threads {
            if d.thread_by_key.contains_key(&(stream.id, thread)) {
                continue;
            }
            let batches = stream.end_counts.get(&thread).copied().unwrap_or(0);
            let cut = d.cut_batches.get(&(stream.id, thread));
            let cut_missing = cut.map_or(0, |seqs| {
                seqs.iter().filter(|&&seq| seq < batches).count() as u64
            });
            streams[s].threads.push(ThreadReport {
                thread_index: thread,
                lost_batches: batches - cut_missing,
                cut_batches: cut.map_or(0, |seqs| seqs.len() as u64),
                ..ThreadReport::default()
            });
        }
        streams[s].threads.sort_by_key(|t| t.thread_index);
    }
    DecodeReport {
        bytes: d.scan.bytes,
        frames: d.scan.frames,
        skipped_bytes: d.scan.skipped_bytes,
        damaged_regions: d.scan.damaged_regions,
        cut_frames: d.scan.cut_frames,
        cut_bytes: d.scan.cut_bytes,
        unknown_frames: d.unknown_frames,
        invalid_frames: d.invalid_frames,
        duplicate_batches: d.duplicate_batches,
        orphan_batches: orphan,
        undecodable_batches: undecodable,
        events: d.events,
        late_events: d.late_events,
        streams,
        warnings: d.warnings.clone(),
    }
}
