//! Finding frames in a byte stream, and finding them again after damage.
//!
//! [`FrameScanner`] reads any [`Read`] in chunks and yields each intact frame (marker
//! right, length within bounds, CRC matching) with its offset. Bytes that are not part
//! of an intact frame are skipped and counted: after a bad byte it looks for the next
//! marker and checks the frame there. A frame cut short by the end of the input is
//! never yielded; its bytes count as skipped, unless the input ends at a page end (a
//! multiple of [`PAGE`] bytes) inside a frame whose header is whole and sound: that is
//! where a killed writer's last `write` stopped (the kernel stops a buffered file write
//! between pages when a fatal signal arrives), counted apart as [`ScanStats::cut_at_end`].
//!
//! Memory: the buffer holds at most one frame (≤ 16 MiB + 12 bytes) plus one read
//! chunk.

use std::io::{self, Read};

use crate::frame::{self, Check};

/// The page size a killed writer's last `write` can stop at (the smallest the kernels
/// we run on use; a larger page is a multiple of it).
pub const PAGE: u64 = 4096;
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
    /// Bytes of a last frame cut short where the input ends at a page end: a writer
    /// killed in its last `write` (not counted in `skipped_bytes`).
    pub cut_at_end: u64,
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
        }
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
            match frame::check(available) {
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
                        let rest = self.end - self.start;
                        let input_end = self.offset + rest as u64;
                        if rest >= frame::HEADER_LEN && input_end.is_multiple_of(PAGE) {
                            // A sound header, its frame cut where a page ends: the
                            // writer was killed in this `write`. Nothing follows.
                            self.stats.cut_at_end += rest as u64;
                            self.consume(rest);
                            return Ok(None);
                        }
                        // The input ends inside it: what looked like a frame is cut
                        // short (or a false marker); look further along.
                        self.skip(1);
                    }
                }
                Check::Bad => {
                    // Resynchronise on the next possible marker.
                    let next = available[1..]
                        .iter()
                        .position(|&b| b == frame::MARKER[0])
                        .map_or(available.len(), |p| p + 1);
                    self.skip(next);
                }
            }
        }
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
        assert_eq!(stats.cut_at_end as usize, cut - kept);
        assert!(stats.cut_at_end > 0);
        // The same bytes ending one byte earlier or later are damage, as before.
        for cut in [cut - 1, cut + 1] {
            let (frames, stats) = scan(&input[..cut]);
            let kept: usize = frames.iter().map(|f| f.payload.len() + 12).sum();
            assert_eq!(stats.cut_at_end, 0, "{cut}");
            assert_eq!(stats.skipped_bytes as usize, cut - kept, "{cut}");
        }
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
