//! Frames: the unit of writing and of damage detection.
//!
//! ```text
//! frame   := marker(3) kind(1) len(u32 LE) payload(len) crc(u32 LE)
//! marker  := 0x89 'T' '2'
//! crc     := CRC32C over kind, len and payload
//! ```
//!
//! There is no file header: a file is frames back to back, so several processes can
//! append to one file. Each frame is written whole by one `write` call (which may carry
//! a few frames: a stream's header and first batch, say). A reader accepts a
//! frame only if its length is within [`MAX_PAYLOAD`] and its CRC matches; after
//! damage it looks for the next marker.
//!
//! The CRC is the `crc32c` crate's: it uses the SSE 4.2 / ARMv8 CRC instructions when
//! the CPU has them (a 64 KiB batch in a few microseconds) and a table otherwise.

/// The three bytes that start every frame. `0x89` is not ASCII, so text-mode damage
/// (a lost high bit) shows.
pub const MARKER: [u8; 3] = [0x89, b'T', b'2'];
/// Bytes before the payload: marker, kind, length.
pub const HEADER_LEN: usize = 8;
/// Bytes after the payload: the CRC.
pub const TRAILER_LEN: usize = 4;
/// Bytes a frame adds to its payload.
pub const OVERHEAD: usize = HEADER_LEN + TRAILER_LEN;
/// The largest payload a frame may have (16 MiB); a reader treats a longer length as
/// damage.
pub const MAX_PAYLOAD: usize = 16 << 20;

/// Frame kinds.
pub mod kind {
    /// The first frame of every process stream: the stream header.
    pub const STREAM: u8 = 0x01;
    /// A change of the local UTC offset (or a wall-clock re-anchor) from a tick on.
    pub const CLOCK: u8 = 0x02;
    /// One thread's batch of records.
    pub const BATCH: u8 = 0x10;
    /// An extension batch that decoders which do not know it skip whole.
    pub const XBATCH: u8 = 0x11;
    /// A clean end of the stream, with the number of batches each thread wrote.
    pub const END: u8 = 0x7F;
}

/// The CRC32C of `bytes`.
#[inline]
pub fn crc(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// Appends the header of a frame of `kind` (its length still 0) and returns where the
/// frame starts, for [`seal`].
pub fn begin(out: &mut Vec<u8>, kind: u8) -> usize {
    let start = out.len();
    out.extend_from_slice(&MARKER);
    out.push(kind);
    out.extend_from_slice(&[0; 4]);
    start
}

/// Completes the frame that starts at `start` and runs to the end of `out`: patches its
/// length and appends its CRC. The payload must not exceed [`MAX_PAYLOAD`].
pub fn seal(out: &mut Vec<u8>, start: usize) {
    let len = out.len() - start - HEADER_LEN;
    debug_assert!(len <= MAX_PAYLOAD);
    out[start + 4..start + HEADER_LEN].copy_from_slice(&(len as u32).to_le_bytes());
    let crc = crc(&out[start + 3..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// Seals a frame written into a fixed buffer: `buf[..HEADER_LEN + len]` holds the header
/// and the payload, and four bytes of room follow. Returns the frame's total length.
pub fn seal_in_place(buf: &mut [u8], len: usize) -> usize {
    debug_assert!(len <= MAX_PAYLOAD && buf.len() >= len + OVERHEAD);
    buf[4..HEADER_LEN].copy_from_slice(&(len as u32).to_le_bytes());
    let crc = crc(&buf[3..HEADER_LEN + len]);
    buf[HEADER_LEN + len..HEADER_LEN + len + TRAILER_LEN].copy_from_slice(&crc.to_le_bytes());
    len + OVERHEAD
}

/// What [`check`] finds at the start of some bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// A whole, intact frame: its kind and its payload's length (the payload starts at
    /// [`HEADER_LEN`]).
    Frame {
        /// The frame kind.
        kind: u8,
        /// The payload length.
        len: usize,
    },
    /// A frame header that looks right, but the frame needs this many bytes in all and
    /// fewer are there.
    Incomplete(usize),
    /// Not a frame: no marker, a length out of bounds, or a CRC that does not match.
    Bad,
}

/// Checks whether `bytes` start with an intact frame.
pub fn check(bytes: &[u8]) -> Check {
    if bytes.len() < HEADER_LEN {
        return if MARKER.starts_with(&bytes[..bytes.len().min(3)]) {
            Check::Incomplete(HEADER_LEN)
        } else {
            Check::Bad
        };
    }
    if bytes[..3] != MARKER {
        return Check::Bad;
    }
    let kind = bytes[3];
    let len = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
    if len > MAX_PAYLOAD {
        return Check::Bad;
    }
    let total = len + OVERHEAD;
    let Some(frame) = bytes.get(..total) else {
        return Check::Incomplete(total);
    };
    let (body, stored) = frame.split_at(HEADER_LEN + len);
    let stored = u32::from_le_bytes([stored[0], stored[1], stored[2], stored[3]]);
    if crc(&body[3..]) == stored {
        Check::Frame { kind, len }
    } else {
        Check::Bad
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = b"xy".to_vec();
        let start = begin(&mut out, kind);
        out.extend_from_slice(payload);
        seal(&mut out, start);
        out.split_off(2)
    }

    #[test]
    fn sealed_frames_check() {
        let f = frame(kind::BATCH, b"hello");
        assert_eq!(f.len(), 5 + OVERHEAD);
        assert_eq!(&f[..4], &[0x89, b'T', b'2', 0x10]);
        assert_eq!(check(&f), Check::Frame { kind: 0x10, len: 5 });
        // With more bytes after it.
        let mut longer = f.clone();
        longer.extend_from_slice(b"more");
        assert_eq!(check(&longer), Check::Frame { kind: 0x10, len: 5 });
    }

    #[test]
    fn in_place_sealing_matches() {
        let f = frame(kind::END, b"abc");
        let mut buf = vec![0u8; 64];
        buf[..4].copy_from_slice(&[0x89, b'T', b'2', kind::END]);
        buf[HEADER_LEN..HEADER_LEN + 3].copy_from_slice(b"abc");
        let n = seal_in_place(&mut buf, 3);
        assert_eq!(&buf[..n], &f[..]);
    }

    #[test]
    fn damage_is_detected() {
        let f = frame(kind::STREAM, b"payload");
        for cut in 0..f.len() {
            match check(&f[..cut]) {
                Check::Incomplete(n) => assert!(n > cut),
                other => panic!("{cut}: {other:?}"),
            }
        }
        for byte in 0..f.len() {
            for bit in 0..8 {
                let mut g = f.clone();
                g[byte] ^= 1 << bit;
                assert!(
                    !matches!(check(&g), Check::Frame { .. }),
                    "flip {byte}:{bit}"
                );
            }
        }
        let mut huge = f.clone();
        huge[4..8].copy_from_slice(&(MAX_PAYLOAD as u32 + 1).to_le_bytes());
        assert_eq!(check(&huge), Check::Bad);
        assert_eq!(check(b"xyz"), Check::Bad);
    }
}
