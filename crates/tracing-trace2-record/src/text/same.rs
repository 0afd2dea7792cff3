//! Byte-string equality for the formatters' per-thread caches, tested inline.

use super::chunk;

/// `a == b`, tested inline: a call to `memcmp` for the short texts the formatters'
/// caches compare on every line (a sid, a thread name, a file name) cost more than the
/// comparison itself.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    // Two blocks (four from 33 bytes), possibly overlapping, cover the whole length
    // (for one to three bytes: the first, middle and last byte); their differences are
    // joined and tested with one branch.
    if n < 4 {
        n == 0 || (a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1])
    } else if n < 8 {
        let diff = |at: usize| {
            u32::from_ne_bytes(chunk::<4>(a, at)) ^ u32::from_ne_bytes(chunk::<4>(b, at))
        };
        (diff(0) | diff(n - 4)) == 0
    } else if n <= 16 {
        let diff = |at: usize| {
            u64::from_ne_bytes(chunk::<8>(a, at)) ^ u64::from_ne_bytes(chunk::<8>(b, at))
        };
        (diff(0) | diff(n - 8)) == 0
    } else if n <= 32 {
        let diff = |at: usize| {
            u128::from_ne_bytes(chunk::<16>(a, at)) ^ u128::from_ne_bytes(chunk::<16>(b, at))
        };
        (diff(0) | diff(n - 16)) == 0
    } else if n <= 64 {
        // Four sixteen-byte blocks, their differences joined and tested once (compared
        // as two 32-byte arrays, the blocks went through the stack).
        let diff = |at: usize| {
            u128::from_ne_bytes(chunk::<16>(a, at)) ^ u128::from_ne_bytes(chunk::<16>(b, at))
        };
        (diff(0) | diff(16) | diff(n - 32) | diff(n - 16)) == 0
    } else {
        a == b
    }
}

/// [`same_bytes`] for texts usually longer than 32 bytes (a session id): the length is
/// tested from the long end, two tests to the usual case instead of five.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn same_long_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n > 64 {
        a == b
    } else if n > 32 {
        let diff = |at: usize| {
            u128::from_ne_bytes(chunk::<16>(a, at)) ^ u128::from_ne_bytes(chunk::<16>(b, at))
        };
        (diff(0) | diff(16) | diff(n - 32) | diff(n - 16)) == 0
    } else {
        same_bytes(a, b)
    }
}

#[cfg(test)]
mod same_tests {
    use super::{same_bytes, same_long_bytes};

    /// The inline comparison agrees with `==` at every length and for a difference at
    /// every position.
    #[test]
    fn same_bytes_matches_slice_equality() {
        for len in 0..80 {
            let a: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            for same in [same_bytes, same_long_bytes] {
                assert!(same(&a, &a.clone()), "{len}");
                assert!(len == 0 || !same(&a, &a[..len - 1]));
                for pos in 0..len {
                    let mut b = a.clone();
                    b[pos] ^= 0x20;
                    assert!(!same(&a, &b), "{len} {pos}");
                }
            }
        }
    }
}
