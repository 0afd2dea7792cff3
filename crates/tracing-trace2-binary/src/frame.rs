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
//! the CPU has them (a 64 KiB batch in a few microseconds) and a table otherwise. Until
//! the first frame of 1 KiB or more, frames take a one-table CRC of
//! our own instead (the same value): the crate finds the CPU's instructions with
//! `cpuid` on its first call, several of them, and in a virtual machine each one traps
//! to the hypervisor (27 µs in all on the VM the benches run on: most of what the binary
//! target added to a short process beyond what the Event target adds). A short process,
//! whose frames are a record each, never pays it; a long one pays it once, with its
//! first full batch. A reader ([`check_read`], the decoder's scanner) takes the crate's
//! CRC for every frame: it runs long enough that the check is nothing, and a file of
//! short processes' frames would otherwise keep it on the table.

use std::sync::atomic::{AtomicBool, Ordering};

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

/// Frames shorter than this take the table CRC until a longer one has had the
/// `crc32c` crate's (see the module docs). At about a byte per table step, 1 KiB
/// costs a microsecond or two: well below the detection it may save.
const TABLE_CRC_BELOW: usize = 1 << 10;

/// The `crc32c` crate has run: its CPU feature detection is done, and every later
/// call costs one load to find it.
static CRATE_CRC_READY: AtomicBool = AtomicBool::new(false);

/// The CRC32C of `bytes`.
#[inline]
pub fn crc(bytes: &[u8]) -> u32 {
    if bytes.len() < TABLE_CRC_BELOW && !CRATE_CRC_READY.load(Ordering::Relaxed) {
        return table_crc(bytes);
    }
    crate_crc(bytes)
}

/// The `crc32c` crate's CRC (its hardware path where the CPU has one).
fn crate_crc(bytes: &[u8]) -> u32 {
    let crc = crc32c::crc32c(bytes);
    CRATE_CRC_READY.store(true, Ordering::Relaxed);
    crc
}

/// The CRC32C (Castagnoli, reflected) of each byte value: 1 KiB of constants, built by
/// the compiler.
static CRC_TABLE: [u32; 256] = {
    const POLYNOMIAL: u32 = 0x82F6_3B78;
    let mut table = [0u32; 256];
    let mut n = 0;
    while n < 256 {
        let mut crc = n as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLYNOMIAL
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[n] = crc;
        n += 1;
    }
    table
};

/// The CRC32C of `bytes`, a table step per byte: for short frames, with no CPU feature
/// detection.
fn table_crc(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc = CRC_TABLE[usize::from(crc as u8 ^ byte)] ^ (crc >> 8);
    }
    !crc
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

/// Checks whether `bytes` start with an intact frame, with the writer's CRC (the table
/// for short frames until the `crc32c` crate has run): for code that runs in a writing
/// process, such as the flight recorder's ring.
pub fn check(bytes: &[u8]) -> Check {
    check_with(bytes, crc)
}

/// [`check`] for a reader (the decoder's scanner): the `crc32c` crate's CRC for every
/// frame, whatever its size. A reader is long-running and may see only small frames (a
/// file of short processes' traces): the table, about a byte per step, would cost it
/// several times the crate's hardware path for the one CPU feature check it spares.
pub fn check_read(bytes: &[u8]) -> Check {
    check_with(bytes, crate_crc)
}

#[inline(always)]
fn check_with(bytes: &[u8], crc: fn(&[u8]) -> u32) -> Check {
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
    fn table_crc_is_the_crates() {
        assert_eq!(table_crc(b""), 0);
        assert_eq!(table_crc(b"Hello world!"), 0x7B98_E751);
        let bytes: Vec<u8> = (0..3100u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for len in (0..64).chain([255, 256, 1023, 1024, 1025, 2999]) {
            for start in [0, 1, 3, 7] {
                let part = &bytes[start..start + len];
                assert_eq!(table_crc(part), crc32c::crc32c(part), "{start}+{len}");
                assert_eq!(crc(part), crc32c::crc32c(part), "{start}+{len}");
            }
        }
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
        for cut in 0..f.len() {
            assert_eq!(check_read(&f[..cut]), check(&f[..cut]), "{cut}");
        }
        assert_eq!(check_read(&f), check(&f));
        let mut huge = f.clone();
        huge[4..8].copy_from_slice(&(MAX_PAYLOAD as u32 + 1).to_le_bytes());
        assert_eq!(check(&huge), Check::Bad);
        assert_eq!(check(b"xyz"), Check::Bad);
    }
}
