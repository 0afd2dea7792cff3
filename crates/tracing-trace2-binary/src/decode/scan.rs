//! Finding frames in a byte stream, and finding them again after damage.
//!
//! [`FrameScanner`] reads any [`Read`] in chunks and yields each intact frame (marker
//! right, length within bounds, CRC matching) with its offset. Bytes that are not part
//! of an intact frame are skipped and counted: after a bad byte it looks for the next
//! marker and checks the frame there. A frame cut short is never yielded; its bytes
//! count as skipped, unless it is what a killed writer leaves: a whole, sound header,
//! and the frame stopped at a page end (a multiple of [`PAGE`] bytes into the input)
//! where the input ends, another intact frame starts, or another such cut frame starts.
//! The kernel stops a buffered file write only between pages when a fatal signal
//! arrives, and in a file that several processes append to, the next process's `write`
//! starts right where the killed one's stopped; when that process is killed in turn
//! (`pkill`, an OOM killer, a supervisor stopping processes one by one), its frame is
//! cut at a later page end, and so on, up to [`MAX_CHAIN`] in a row. Each such frame is
//! a [`CutFrame`] (counted apart in [`ScanStats::cut_frames`] and
//! [`ScanStats::cut_bytes`], not as damage, with its stream and, for a batch, its
//! thread and batch number when the cut bytes hold them), and the scan goes on with
//! the frame after it. No cut may hold an intact frame: a damaged length that claims
//! the frames after its own is damage, and a whole frame damaged in place (a flipped
//! bit, a wrong CRC) is never a cut, nor is a frame before it that needs it to be one.
//!
//! One process's kill cuts at most one of its frames in a file: its threads' appends
//! to a file take turns (the kernel's per-file lock), and one still waiting when the
//! kill arrives writes nothing. Two cut frames of one stream are two writers of it
//! (a process and a copy of it that kept its stream: a child made by a raw `clone`,
//! which runs no `fork` handler). A cut frame after its stream's END frame is a thread
//! that the process's `exit` ended in its `write` (the exit ends the other threads as
//! a kill does).
//!
//! Memory: the buffer holds at most the frames of one chain (≤ 16 MiB + 12 bytes each:
//! up to [`MAX_CHAIN`] + 1 cut ones and the one checked after them) plus one read chunk;
//! real cut frames are a batch each (64 KiB by default).

use std::collections::HashMap;
use std::io::{self, Read};

use crate::frame::{self, Check};
use crate::header;

/// The page size a killed writer's last `write` can stop at (the smallest the kernels
/// we run on use; a larger page is a multiple of it).
pub const PAGE: u64 = 4096;
/// Frames a kill cut that may follow one another (each process killed in its `write`
/// right after the one before it was: `pkill`, an OOM killer, a supervisor stopping a
/// group one by one); what is read ahead to tell them is at most this many frames.
pub const MAX_CHAIN: usize = 8;
/// Bytes asked of the input per read.
const CHUNK: usize = 64 << 10;
/// The first read's size; reads grow to [`CHUNK`] as the buffer does.
const FIRST_CHUNK: usize = 4 << 10;

/// One intact frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawFrame {
    /// The frame kind.
    pub kind: u8,
    /// The payload (without header and CRC).
    pub payload: Vec<u8>,
    /// Where the frame starts in the input.
    pub offset: u64,
}

/// What the scanner saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanStats {
    /// Bytes read from the input.
    pub bytes: u64,
    /// Intact frames found.
    pub frames: u64,
    /// Bytes that were not part of any intact frame.
    pub skipped_bytes: u64,
    /// Runs of skipped bytes (each damaged place counts once).
    pub damaged_regions: u64,
    /// Frames cut short at a page end, where the input ends or another frame starts:
    /// writers killed in their last `write` (see [`CutFrame`]).
    pub cut_frames: u64,
    /// The bytes of those frames (not counted in `skipped_bytes`).
    pub cut_bytes: u64,
}

/// A frame a kill cut short: a whole, sound header, and its bytes stop at a page end
/// where the input ends or another intact frame starts. Its writer was killed in the
/// `write` that carried it, so this was the writer's last frame: its batch is lost,
/// nothing else of that stream is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CutFrame {
    /// Where the frame starts in the input.
    pub offset: u64,
    /// Its bytes that are there (header included).
    pub bytes: u64,
    /// The frame kind.
    pub kind: u8,
    /// The stream the frame belongs to, when the bytes there hold its id.
    pub stream_id: Option<u64>,
    /// For a BATCH frame whose bytes hold them, its thread index and batch number: the
    /// batch the kill cost.
    pub batch: Option<(u64, u64)>,
}

/// The thread index and batch number at the start of a (cut) BATCH payload.
fn batch_of(payload: &[u8]) -> Option<(u64, u64)> {
    let mut r = crate::varint::ByteCursor::new(payload);
    r.u64_le()?;
    Some((r.uvarint()?, r.uvarint()?))
}

/// The length of the whole frame whose header starts `bytes`, if that header is whole
/// and sound (marker, length within bounds); its CRC is not checked.
fn sound_frame_len(bytes: &[u8]) -> Option<usize> {
    if bytes.len() < frame::HEADER_LEN || bytes[..3] != frame::MARKER {
        return None;
    }
    let len = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
    (len <= frame::MAX_PAYLOAD).then_some(len + frame::OVERHEAD)
}

/// Yields the intact frames of an input, skipping damage.
#[derive(Debug)]
pub struct FrameScanner<R> {
    input: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    /// Input offset of `buf[start]`.
    offset: u64,
    in_damage: bool,
    stats: ScanStats,
    /// Cut frames found and not yet taken.
    cuts: Vec<CutFrame>,
    /// While one cut is judged: what [`cut_at`](Self::cut_at) found at each input
    /// offset it looked at, so that a chain's frames are each judged once (a crafted
    /// input with a sound header at every page end would otherwise cost a walk per path).
    judged: HashMap<u64, Option<usize>>,
}

impl<R: Read> FrameScanner<R> {
    /// A scanner at the start of `input`.
    pub fn new(input: R) -> Self {
        FrameScanner {
            input,
            buf: Vec::new(),
            start: 0,
            end: 0,
            eof: false,
            offset: 0,
            in_damage: false,
            stats: ScanStats::default(),
            cuts: Vec::new(),
            judged: HashMap::new(),
        }
    }

    /// The frames cut by a kill found since the last call (each found before the frame
    /// [`next_frame`](Self::next_frame) returned after it).
    pub fn take_cuts(&mut self) -> std::vec::Drain<'_, CutFrame> {
        self.cuts.drain(..)
    }

    /// What the scanner has seen so far.
    pub fn stats(&self) -> ScanStats {
        self.stats
    }

    /// The next intact frame, or `None` at the end of the input.
    pub fn next_frame(&mut self) -> io::Result<Option<RawFrame>> {
        loop {
            if self.start == self.end && (self.eof || !self.fill(1)?) {
                return Ok(None);
            }
            let available = &self.buf[self.start..self.end];
            match frame::check_read(available) {
                Check::Frame { kind, len } => {
                    let payload = available[frame::HEADER_LEN..frame::HEADER_LEN + len].to_vec();
                    let offset = self.offset;
                    self.consume(len + frame::OVERHEAD);
                    self.in_damage = false;
                    self.stats.frames += 1;
                    return Ok(Some(RawFrame {
                        kind,
                        payload,
                        offset,
                    }));
                }
                Check::Incomplete(needed) => {
                    if !self.fill(needed)? {
                        // The input ends inside it: a frame a kill cut, or what looked
                        // like a frame is cut short (or a false marker); look further
                        // along.
                        if !self.take_kill_cut()? {
                            self.skip(1);
                        }
                    }
                }
                Check::Bad => {
                    if self.take_kill_cut()? {
                        continue;
                    }
                    // Resynchronise on the next possible marker.
                    let available = &self.buf[self.start..self.end];
                    let next = available[1..]
                        .iter()
                        .position(|&b| b == frame::MARKER[0])
                        .map_or(available.len(), |p| p + 1);
                    self.skip(next);
                }
            }
        }
    }

    /// At a frame that is not intact: if it is one a kill cut (see [`CutFrame`]),
    /// records it, moves past it and returns `true`.
    fn take_kill_cut(&mut self) -> io::Result<bool> {
        let Some(len) = self.kill_cut_len()? else {
            return Ok(false);
        };
        let head = &self.buf[self.start..self.start + len];
        let kind = head[3];
        let payload = &head[frame::HEADER_LEN..];
        let stream_id = match kind {
            frame::kind::STREAM => payload.get(2..).and_then(header::stream_id_of),
            frame::kind::CLOCK | frame::kind::BATCH | frame::kind::END => {
                header::stream_id_of(payload)
            }
            _ => None,
        };
        let batch = match kind {
            frame::kind::BATCH => batch_of(payload),
            _ => None,
        };
        self.cuts.push(CutFrame {
            offset: self.offset,
            bytes: len as u64,
            kind,
            stream_id,
            batch,
        });
        self.stats.cut_frames += 1;
        self.stats.cut_bytes += len as u64;
        self.consume(len);
        self.in_damage = false;
        Ok(true)
    }

    /// The length of the frame a kill cut at `start`, if there is one there (see
    /// [`cut_at`](Self::cut_at)).
    fn kill_cut_len(&mut self) -> io::Result<Option<usize>> {
        self.judged.clear();
        self.cut_at(0, 0)
    }

    /// The length of the frame a kill cut `rel` bytes past `start`, if there is one
    /// there: a sound header (marker, length within bounds) whose frame is not intact,
    /// and the first page end inside it, past the header, where the input ends, an
    /// intact frame starts, or another frame a kill cut starts (the next process to
    /// append was killed in its own `write`, up to [`MAX_CHAIN`] in a row), with no
    /// intact frame starting before it (a damaged length that claims the frames after
    /// its own must not hide them). Reads ahead as far as the frames there need.
    fn cut_at(&mut self, rel: usize, depth: usize) -> io::Result<Option<usize>> {
        let from = self.offset + rel as u64;
        if let Some(&known) = self.judged.get(&from) {
            return Ok(known);
        }
        let found = self.judge_cut_at(rel, depth)?;
        self.judged.insert(from, found);
        Ok(found)
    }

    /// [`cut_at`](Self::cut_at), the first time it looks at an offset.
    fn judge_cut_at(&mut self, rel: usize, depth: usize) -> io::Result<Option<usize>> {
        self.fill(rel + frame::HEADER_LEN)?;
        let Some(total) = sound_frame_len(&self.buf[self.start + rel..self.end]) else {
            return Ok(None);
        };
        let from = self.offset + rel as u64;
        // The first page end that leaves the header whole.
        let mut page = (from + frame::HEADER_LEN as u64).next_multiple_of(PAGE);
        while page < from + total as u64 {
            let at = (page - self.offset) as usize;
            if !self.fill(at)? {
                return Ok(None);
            }
            if self.follows_a_cut(at, depth)? {
                let (cut_from, cut_to) = (self.start + rel, self.start + at);
                let hides_a_frame = (cut_from + 1..cut_to)
                    .filter(|&i| self.buf[i] == frame::MARKER[0])
                    .any(|i| {
                        matches!(
                            frame::check_read(&self.buf[i..self.end]),
                            Check::Frame { .. }
                        )
                    });
                return Ok((!hides_a_frame).then_some(at - rel));
            }
            page += PAGE;
        }
        Ok(None)
    }

    /// Whether what is `at` bytes past `start` (a page end) can follow a frame a kill
    /// cut: the end of the input, an intact frame, or (within `depth` of [`MAX_CHAIN`])
    /// another cut frame.
    fn follows_a_cut(&mut self, at: usize, depth: usize) -> io::Result<bool> {
        if !self.fill(at + 1)? {
            // The input ends right here, at a page end.
            return Ok(true);
        }
        if self.buf[self.start + at] != frame::MARKER[0] {
            return Ok(false);
        }
        // Bytes enough for the header there, then for its frame.
        self.fill(at + frame::HEADER_LEN)?;
        let Some(next) = sound_frame_len(&self.buf[self.start + at..self.end]) else {
            return Ok(false);
        };
        self.fill(at + next)?;
        if let Check::Frame { .. } = frame::check_read(&self.buf[self.start + at..self.end]) {
            return Ok(true);
        }
        Ok(depth < MAX_CHAIN && self.cut_at(at, depth + 1)?.is_some())
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        self.offset += n as u64;
    }

    fn skip(&mut self, n: usize) {
        if !self.in_damage {
            self.stats.damaged_regions += 1;
            self.in_damage = true;
        }
        self.stats.skipped_bytes += n as u64;
        self.consume(n);
    }

    /// Reads until at least `needed` bytes are available from `start`; `false` if the
    /// input ended first.
    fn fill(&mut self, needed: usize) -> io::Result<bool> {
        while self.end - self.start < needed {
            if self.eof {
                return Ok(false);
            }
            if self.start > 0 && (self.start >= self.buf.len() / 2 || self.end == self.start) {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            // A chunk at a time (the first ones smaller, for small inputs): a length
            // read from damaged bytes may claim megabytes that the input does not
            // have, and must not cost their allocation.
            let chunk = self.buf.len().clamp(FIRST_CHUNK, CHUNK);
            if self.buf.len() < self.end + chunk {
                self.buf.resize(self.end + chunk, 0);
            }
            match self.input.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => {
                    self.end += n;
                    self.stats.bytes += n as u64;
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_of(kind: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let start = frame::begin(&mut out, kind);
        out.extend_from_slice(payload);
        frame::seal(&mut out, start);
        out
    }

    fn scan(bytes: &[u8]) -> (Vec<RawFrame>, ScanStats) {
        let mut s = FrameScanner::new(bytes);
        let mut frames = Vec::new();
        while let Some(f) = s.next_frame().unwrap() {
            frames.push(f);
        }
        (frames, s.stats())
    }

    /// Hands out at most `n` bytes per read, to exercise refills.
    struct Trickle<'a>(&'a [u8], usize);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.1.min(buf.len()).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn frames_back_to_back_and_junk_between() {
        let a = frame_of(0x10, b"alpha");
        let b = frame_of(0x7F, &[0x89; 300]);
        let mut input = a.clone();
        input.extend_from_slice(b"\x89T2junk\x89");
        input.extend_from_slice(&b);
        let (frames, stats) = scan(&input);
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0].payload, b"alpha");
        assert_eq!(frames[1].offset, (a.len() + 8) as u64);
        assert_eq!(frames[1].payload, [0x89; 300]);
        assert_eq!(stats.skipped_bytes, 8);
        assert_eq!(stats.damaged_regions, 1);
        // The same through reads of a few bytes.
        let mut s = FrameScanner::new(Trickle(&input, 3));
        let mut n = 0;
        while s.next_frame().unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, 2);
    }

    #[test]
    fn a_truncated_frame_is_skipped_not_yielded() {
        let a = frame_of(0x10, b"first");
        let b = frame_of(0x10, b"second frame");
        let mut input = a.clone();
        input.extend_from_slice(&b);
        for cut in 0..input.len() {
            let (frames, stats) = scan(&input[..cut]);
            let whole = usize::from(cut >= a.len());
            assert_eq!(frames.len(), whole, "{cut}");
            let kept: usize = frames.iter().map(|f| f.payload.len() + 12).sum();
            assert_eq!(stats.skipped_bytes as usize, cut - kept);
        }
    }

    #[test]
    fn a_frame_cut_at_a_page_end_is_a_killed_writer_not_damage() {
        // Frames up to a page end and past it, as a writer's buffered `write` lays them.
        let mut input = Vec::new();
        let mut n = 0u32;
        while input.len() < 2 * PAGE as usize {
            input.extend_from_slice(&frame_of(
                0x10,
                format!("frame {n} of the batch").as_bytes(),
            ));
            n += 1;
        }
        // Cut at the page end: the frame across it is cut, nothing else is lost.
        let cut = PAGE as usize;
        let (frames, stats) = scan(&input[..cut]);
        let kept: usize = frames.iter().map(|f| f.payload.len() + 12).sum();
        assert_eq!(stats.skipped_bytes, 0);
        assert_eq!(stats.damaged_regions, 0);
        assert_eq!(stats.cut_bytes as usize, cut - kept);
        assert_eq!(stats.cut_frames, 1);
        // The same bytes ending one byte earlier or later are damage, as before.
        for cut in [cut - 1, cut + 1] {
            let (frames, stats) = scan(&input[..cut]);
            let kept: usize = frames.iter().map(|f| f.payload.len() + 12).sum();
            assert_eq!(stats.cut_frames, 0, "{cut}");
            assert_eq!(stats.skipped_bytes as usize, cut - kept, "{cut}");
        }
    }

    /// A batch-like payload of `len` bytes: the stream id, then filler with markers in it.
    fn payload_of(stream_id: u64, len: usize) -> Vec<u8> {
        let mut p = stream_id.to_le_bytes().to_vec();
        p.extend((0..len - 8).map(|i| [0x89, b'T', b'2', i as u8][i % 4]));
        p
    }

    #[test]
    fn a_frame_cut_at_a_page_end_with_another_writers_frames_after_it_is_a_kill() {
        // Writer A's frame starts `k` bytes before a page end, its `write` stops there, and
        // writer B's frames follow: every k from a bare header to one byte short.
        let cut_frame = frame_of(frame::kind::BATCH, &payload_of(7, 300));
        let b1 = frame_of(frame::kind::BATCH, &payload_of(9, 50));
        let b2 = frame_of(frame::kind::END, &payload_of(9, 20));
        for k in 1..cut_frame.len() {
            let lead = frame_of(frame::kind::BATCH, &payload_of(7, PAGE as usize - 12 - k));
            let mut input = lead.clone();
            input.extend_from_slice(&cut_frame[..k]);
            assert_eq!(input.len(), PAGE as usize);
            input.extend_from_slice(&b1);
            input.extend_from_slice(&b2);
            let mut s = FrameScanner::new(Trickle(&input, 1000));
            let mut frames = Vec::new();
            let mut cuts = Vec::new();
            while let Some(f) = s.next_frame().unwrap() {
                cuts.extend(s.take_cuts());
                frames.push(f.payload);
            }
            let stats = s.stats();
            // B's frames, whole, whatever the cut.
            assert_eq!(frames.len(), 3, "{k}");
            assert_eq!(
                frames[1..],
                [b1[8..b1.len() - 4].to_vec(), b2[8..b2.len() - 4].to_vec()]
            );
            if k < frame::HEADER_LEN {
                // Not even the header: bytes that cannot be told from damage.
                assert_eq!(
                    (stats.cut_frames, stats.skipped_bytes),
                    (0, k as u64),
                    "{k}"
                );
                continue;
            }
            assert_eq!((stats.skipped_bytes, stats.damaged_regions), (0, 0), "{k}");
            assert_eq!((stats.cut_frames, stats.cut_bytes), (1, k as u64), "{k}");
            let stream_id = (k >= frame::HEADER_LEN + 8).then_some(7);
            assert_eq!(
                cuts,
                [CutFrame {
                    offset: PAGE - k as u64,
                    bytes: k as u64,
                    kind: frame::kind::BATCH,
                    stream_id,
                    // The filler's first bytes, read as the thread index and batch number.
                    batch: (k >= frame::HEADER_LEN + 8 + 3).then_some((0x09 | 0x54 << 7, 0x32)),
                }],
                "{k}"
            );
        }
    }

    /// `cuts` frames cut one after the other, each by a kill in its `write` (the first
    /// `k` bytes before a page end, each next one from that page end to a later one),
    /// then `tail`: the frames each cut frame was, and the input.
    fn chain(k: usize, cuts: usize, tail: &[u8]) -> (Vec<Vec<u8>>, Vec<u8>) {
        let lead = frame_of(frame::kind::BATCH, &payload_of(1, PAGE as usize - 12 - k));
        let mut input = lead;
        // A's frame ends before the next page end.
        input.extend_from_slice(&frame_of(frame::kind::BATCH, &payload_of(7, k + 200))[..k]);
        let mut whole = Vec::new();
        for n in 0..cuts {
            // Frames of two to three pages, cut at their first or second page end.
            let f = frame_of(
                frame::kind::BATCH,
                &payload_of(10 + n as u64, 2 * PAGE as usize + 100 * n),
            );
            let at = input.len() as u64;
            let end = if n % 2 == 0 {
                (at + 8).next_multiple_of(PAGE)
            } else {
                (at + 8).next_multiple_of(PAGE) + PAGE
            };
            input.extend_from_slice(&f[..(end - at) as usize]);
            whole.push(f);
        }
        input.extend_from_slice(tail);
        (whole, input)
    }

    #[test]
    fn frames_cut_back_to_back_are_each_a_kill() {
        // Process A is killed in its `write`, the next to append (B) in its own, which
        // began where A's stopped, and so on; then C's frames, or the end of the input.
        let c = [
            frame_of(frame::kind::BATCH, &payload_of(99, 50)),
            frame_of(frame::kind::END, &payload_of(99, 20)),
        ]
        .concat();
        for cuts in 1..=4 {
            for k in [frame::HEADER_LEN, 100, 3000] {
                for tail in [&c[..], &[]] {
                    let (_, input) = chain(k, cuts, tail);
                    let mut s = FrameScanner::new(Trickle(&input, 1000));
                    let mut frames = Vec::new();
                    let mut cut = Vec::new();
                    while let Some(f) = s.next_frame().unwrap() {
                        cut.extend(s.take_cuts());
                        frames.push(f.offset);
                    }
                    cut.extend(s.take_cuts());
                    let stats = s.stats();
                    let what = format!("{cuts} cut, A's {k} bytes, tail {}", tail.len());
                    assert_eq!(
                        (stats.skipped_bytes, stats.damaged_regions),
                        (0, 0),
                        "{what}"
                    );
                    assert_eq!(stats.cut_frames, cuts as u64 + 1, "{what}");
                    assert_eq!(frames.len(), 1 + tail.len().min(1) * 2, "{what}");
                    let ids: Vec<Option<u64>> = cut.iter().map(|c| c.stream_id).collect();
                    let mut want = vec![(k >= 16).then_some(7)];
                    want.extend((0..cuts).map(|n| Some(10 + n as u64)));
                    assert_eq!(ids, want, "{what}");
                    assert!(cut[1..].iter().all(|c| c.offset % PAGE == 0), "{what}");
                }
            }
        }
    }

    #[test]
    fn damage_after_a_cut_is_damage_and_hides_nothing() {
        let c = frame_of(frame::kind::BATCH, &payload_of(99, 50));
        let k = 100;
        let (whole, input) = chain(k, 1, &c);
        let b_at = PAGE as usize;
        let b_len = PAGE as usize;
        // B whole with a bit flipped in its payload, or B with its CRC flipped: not a
        // kill's cut, so neither is A's. (A flipped bit in the bytes of a cut frame
        // cannot show: a cut frame has no CRC to check.)
        for (what, file) in [
            ("CRC flipped", {
                let mut f = input[..b_at].to_vec();
                let mut b = whole[0].clone();
                let n = b.len();
                b[n - 2] ^= 0x10;
                f.extend_from_slice(&b);
                f.extend_from_slice(&c);
                f
            }),
            ("whole, flipped", {
                let mut f = input[..b_at].to_vec();
                let mut b = whole[0].clone();
                b[500] ^= 4;
                f.extend_from_slice(&b);
                f.extend_from_slice(&c);
                f
            }),
        ] {
            let (frames, stats) = scan(&file);
            assert_eq!(frames.len(), 2, "{what}");
            assert_eq!(frames[1].payload, c[8..c.len() - 4], "{what}");
            assert_eq!(stats.cut_frames, 0, "{what}");
            assert_eq!(
                stats.skipped_bytes as usize,
                file.len() - PAGE as usize + k - c.len()
            );
        }
        // B's length damaged: C stays intact whatever it claims. A length that stops
        // before the page end, or one out of bounds, is damage; one that still reaches
        // past the page end cannot be told from B's own (a cut frame has no CRC).
        for bit in 0..32 {
            let mut file = input.clone();
            file[b_at + 4 + bit / 8] ^= 1 << (bit % 8);
            let claimed = u32::from_le_bytes(file[b_at + 4..b_at + 8].try_into().unwrap());
            let (frames, stats) = scan(&file);
            assert_eq!(frames.last().unwrap().payload, c[8..c.len() - 4], "{bit}");
            assert_eq!(frames.len(), 2, "{bit}");
            if (claimed as usize) < b_len - 12 || claimed as usize > frame::MAX_PAYLOAD {
                assert_eq!(stats.cut_frames, 0, "{bit}");
                assert_eq!(stats.skipped_bytes as usize, k + b_len, "{bit}");
            } else {
                assert_eq!((stats.cut_frames, stats.skipped_bytes), (2, 0), "{bit}");
            }
        }
    }

    #[test]
    fn sound_headers_at_every_page_end_are_judged_once_each() {
        // A header claiming 16 MiB at the start of every page, and an input that does
        // not end at a page end: no frame is intact, none is a cut, and each of the
        // chains the scanner could follow from one to the next is judged once (walking
        // every path would take some 48^8 steps).
        let mut input = vec![0u8; 48 * PAGE as usize + 5];
        for page in input.chunks_mut(PAGE as usize) {
            if page.len() >= frame::HEADER_LEN {
                page[..3].copy_from_slice(&frame::MARKER);
                page[3] = frame::kind::BATCH;
                page[4..8].copy_from_slice(&(frame::MAX_PAYLOAD as u32).to_le_bytes());
            }
        }
        let (frames, stats) = scan(&input);
        assert!(frames.is_empty());
        assert_eq!(stats.cut_frames, 0);
        assert_eq!(stats.skipped_bytes as usize, input.len());
    }

    #[test]
    fn a_cut_frame_needs_a_page_end_and_an_intact_frame_after_it() {
        let cut_frame = frame_of(frame::kind::BATCH, &payload_of(7, 300));
        let b = frame_of(frame::kind::BATCH, &payload_of(9, 50));
        let k = 100;
        let lead = frame_of(frame::kind::BATCH, &payload_of(7, PAGE as usize - 12 - k));
        // Cut one byte off a page end: damage.
        for shift in [-1i64, 1] {
            let mut input = lead.clone();
            input.extend_from_slice(&cut_frame[..(k as i64 + shift) as usize]);
            input.extend_from_slice(&b);
            let (frames, stats) = scan(&input);
            assert_eq!(frames.len(), 2, "{shift}");
            assert_eq!(stats.cut_frames, 0, "{shift}");
            assert_eq!(stats.skipped_bytes as i64, k as i64 + shift);
        }
        // At a page end, but what follows is not an intact frame: damage.
        let mut bad = b.clone();
        bad[20] ^= 1;
        let mut input = lead.clone();
        input.extend_from_slice(&cut_frame[..k]);
        input.extend_from_slice(&bad);
        input.extend_from_slice(&b);
        let (frames, stats) = scan(&input);
        assert_eq!(frames.len(), 2);
        assert_eq!(stats.cut_frames, 0);
        assert_eq!(stats.skipped_bytes as usize, k + bad.len());
        // A frame damaged in place (a flipped byte) with an intact one after it: damage,
        // page end or not.
        let mut input = lead.clone();
        let mut flipped = cut_frame.clone();
        flipped[50] ^= 1;
        input.extend_from_slice(&flipped);
        input.extend_from_slice(&b);
        let (frames, stats) = scan(&input);
        assert_eq!(frames.len(), 2);
        assert_eq!(stats.cut_frames, 0);
        assert_eq!(stats.skipped_bytes as usize, flipped.len());
    }

    #[test]
    fn a_damaged_length_reaching_past_a_page_end_is_not_a_cut() {
        // Frames up to a page end and after it; the first one's length is then damaged
        // to claim past the page end, where an intact frame starts.
        let first = frame_of(0x10, &[b'a'; 100]);
        let second = frame_of(0x10, &[b'b'; 200]);
        let used = first.len() + second.len();
        let filler = frame_of(0x10, &vec![b'c'; PAGE as usize - used - 12]);
        let mut input = [first.clone(), second, filler].concat();
        assert_eq!(input.len(), PAGE as usize);
        input.extend_from_slice(&frame_of(0x10, &[b'd'; 50]));
        input.extend_from_slice(&frame_of(0x10, &[b'e'; 50]));
        assert_eq!(scan(&input).0.len(), 5);
        input[5] ^= 0x40;
        let (frames, stats) = scan(&input);
        assert_eq!(stats.cut_frames, 0, "{stats:?}");
        assert_eq!(frames.len(), 4);
        assert_eq!(stats.skipped_bytes as usize, first.len());
    }

    #[test]
    fn a_lying_length_does_not_hide_later_frames() {
        // A frame whose length was damaged to claim more bytes than there are.
        let mut bad = frame_of(0x10, b"damaged");
        bad[4] = 0xFF;
        bad[5] = 0xFF;
        let good = frame_of(0x10, b"good");
        let mut input = bad;
        input.extend_from_slice(&good);
        let (frames, _) = scan(&input);
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].payload, b"good");
    }
}
