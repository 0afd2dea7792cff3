//! LEB128 varints, zigzag for signed values, and a bounds-checked reader over a byte
//! slice.
//!
//! Writing is done by the encoder straight into its batch buffer; this module gives it
//! the pieces ([`encode`], [`zigzag`]). [`ByteCursor`] is what every decoder step reads
//! with: each method returns `None` instead of reading past the end, so damaged input
//! can never make the decoder index out of bounds.

/// The longest LEB128 encoding of a `u64`.
pub const MAX_LEN: usize = 10;

/// Maps a signed value to an unsigned one with small magnitudes staying small
/// (0, -1, 1, -2 … become 0, 1, 2, 3 …).
#[inline]
pub fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

/// The inverse of [`zigzag`].
#[inline]
pub fn unzigzag(value: u64) -> i64 {
    ((value >> 1) as i64) ^ -((value & 1) as i64)
}

/// Writes `value` as LEB128 at the start of `out`, which must hold [`MAX_LEN`] bytes;
/// returns the number of bytes written.
#[inline]
pub fn encode(out: &mut [u8; MAX_LEN], mut value: u64) -> usize {
    let mut n = 0;
    while value >= 0x80 {
        out[n] = (value as u8) | 0x80;
        value >>= 7;
        n += 1;
    }
    out[n] = value as u8;
    n + 1
}

/// Bytes that [`encode`] takes for `value`.
#[inline]
pub fn encoded_len(value: u64) -> usize {
    // One byte per started group of seven bits; zero takes one byte too.
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// A cursor over bytes that refuses to read past their end.
#[derive(Clone, Copy, Debug)]
pub struct ByteCursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> ByteCursor<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        ByteCursor { buf, pos: 0 }
    }

    /// The whole buffer being read.
    pub fn buf(&self) -> &'a [u8] {
        self.buf
    }

    /// The offset of the next byte to read.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left to read.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// One byte.
    pub fn u8(&mut self) -> Option<u8> {
        let byte = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(byte)
    }

    /// A little-endian `u64` in eight bytes.
    pub fn u64_le(&mut self) -> Option<u64> {
        let bytes = self.bytes(8)?;
        Some(u64::from_le_bytes(bytes.try_into().ok()?))
    }

    /// An unsigned LEB128 varint; `None` if it runs past the end or past 64 bits.
    pub fn uvarint(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for i in 0..MAX_LEN {
            let byte = self.u8()?;
            let bits = u64::from(byte & 0x7F);
            if i == MAX_LEN - 1 && byte > 1 {
                // The tenth byte may only carry the 64th bit.
                return None;
            }
            value |= bits << (7 * i);
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }

    /// A zigzag varint.
    pub fn ivarint(&mut self) -> Option<i64> {
        self.uvarint().map(unzigzag)
    }

    /// A varint that must fit a `u32`.
    pub fn u32var(&mut self) -> Option<u32> {
        u32::try_from(self.uvarint()?).ok()
    }

    /// `len` raw bytes.
    pub fn bytes(&mut self, len: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(len)?;
        let bytes = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(bytes)
    }

    /// A varint length followed by that many bytes; returns the bytes' offset and
    /// length within the reader's buffer.
    pub fn span(&mut self) -> Option<(usize, usize)> {
        let len = usize::try_from(self.uvarint()?).ok()?;
        let start = self.pos;
        self.bytes(len)?;
        Some((start, len))
    }

    /// A varint length followed by that many bytes of UTF-8.
    pub fn str(&mut self) -> Option<&'a str> {
        let (start, len) = self.span()?;
        std::str::from_utf8(&self.buf[start..start + len]).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_edges() {
        for value in [0, 1, 127, 128, 300, u32::MAX as u64, u64::MAX - 1, u64::MAX] {
            let mut buf = [0; MAX_LEN];
            let n = encode(&mut buf, value);
            assert_eq!(n, encoded_len(value), "{value}");
            let mut r = ByteCursor::new(&buf[..n]);
            assert_eq!(r.uvarint(), Some(value));
            assert!(r.is_empty());
            // Every cut is refused.
            for cut in 0..n {
                assert_eq!(ByteCursor::new(&buf[..cut]).uvarint(), None);
            }
        }
    }

    #[test]
    fn zigzag_keeps_small_values_small() {
        for (v, z) in [(0, 0), (-1, 1), (1, 2), (-2, 3), (i64::MAX, u64::MAX - 1)] {
            assert_eq!(zigzag(v), z);
            assert_eq!(unzigzag(z), v);
        }
        assert_eq!(unzigzag(zigzag(i64::MIN)), i64::MIN);
    }

    #[test]
    fn overlong_and_overflowing_varints_are_refused() {
        // Eleven continuation bytes, and a tenth byte with bits past the 64th.
        assert_eq!(ByteCursor::new(&[0x80; 11]).uvarint(), None);
        let mut too_big = [0xFF; MAX_LEN];
        too_big[9] = 0x02;
        assert_eq!(ByteCursor::new(&too_big).uvarint(), None);
        assert_eq!(
            ByteCursor::new(&[0xFF, 0xFF, 0xFF, 0xFF, 0x10]).u32var(),
            None
        );
    }

    #[test]
    fn spans_stay_in_bounds() {
        let mut r = ByteCursor::new(&[3, b'a', b'b']);
        assert_eq!(r.span(), None);
        let mut r = ByteCursor::new(&[2, 0xC3, 0xA9, 1, 0xFF]);
        assert_eq!(r.str(), Some("é"));
        assert_eq!(r.str(), None, "invalid UTF-8");
        let mut r = ByteCursor::new(&[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]);
        assert_eq!(r.span(), None, "a length near u64::MAX");
    }
}
