//! Which addresses hold text that cannot change: the read-only segments of the program
//! itself, where string literals and `tracing`'s callsite metadata live.
//!
//! A `&str` need not be `'static`, and an address can be reused for other text, so the
//! binary encoder confirms every string it finds by address against its batch's copy,
//! and the core layer copies a span's `trace2.*` values into buffers of its own. Text in
//! a read-only segment of the executable can be neither freed nor written for as long
//! as the process runs: the encoder takes a hit there without confirmation, and the
//! layer keeps such a value (a literal, nearly always) by reference ([`as_static`]). The
//! segments are read once from the program headers (`dl_iterate_phdr`, which reports
//! the main program first), adjacent ones joined; elsewhere than on Linux the list is
//! empty and every string is confirmed or copied. The range that holds the literals is
//! checked first, inline, in two loads and two comparisons (the check runs for every
//! span's `trace2.*` value and every event's text field); other text is checked against
//! the second range, then any others, out of line.
//!
//! Text that lives on the heap but is known never to change can be added with [`pin`]:
//! a `&'static str` can be neither freed nor written for the rest of the process (the
//! session id of the process, which every text line names, is the one use). Pinned
//! ranges are checked last, out of line.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The read-only loaded segments of the main program, `[start, end)`, adjacent ones
/// joined; read once.
static READ_ONLY: OnceLock<Segments> = OnceLock::new();

/// The read-only ranges, laid out for the check: the range that holds the program's
/// string literals first (nearly every text asked about is one), then one other range
/// (usually the only other: the code), then any further ranges. A range that is not
/// there is `(usize::MAX, 0)`, which holds nothing.
#[derive(Debug, PartialEq)]
struct Segments {
    literals: (usize, usize),
    other: (usize, usize),
    rest: Vec<(usize, usize)>,
}

/// A range that holds nothing.
const NONE: (usize, usize) = (usize::MAX, 0);

/// A literal of this crate: the range that holds it holds the program's literals.
const PROBE: &str = "tracing-trace2: where the literals lie";

/// `[start, end)` of the literals' range (see [`Segments`]) again, for the check inline
/// without the lock's state: `[usize::MAX, 0]`, which holds nothing, until the segments
/// are read. The end is stored before the start, and the start read first (release and
/// acquire), so a start seen set comes with its end; a start not yet set fails the
/// check whatever the end. Anything else goes to [`Segments::hold`], out of line.
static LITERALS: [AtomicUsize; 2] = [AtomicUsize::new(usize::MAX), AtomicUsize::new(0)];

/// How many heap texts [`pin`] keeps; later ones are not kept (their text is then
/// compared or copied, as any other).
const PINNED_SLOTS: usize = 4;

/// The pinned heap texts, `[start, end)` (see [`pin`]); a slot not used yet holds
/// `[usize::MAX, 0]`, which holds nothing. The end is stored before the start, and the
/// start read first, as for [`LITERALS`].
static PINNED: [[AtomicUsize; 2]; PINNED_SLOTS] =
    [const { [AtomicUsize::new(usize::MAX), AtomicUsize::new(0)] }; PINNED_SLOTS];

/// The slots of [`PINNED`] handed out so far.
static PINNED_TAKEN: AtomicUsize = AtomicUsize::new(0);

/// Counts `text` as text that cannot change from now on, as if it lay in a read-only
/// segment: [`is_immutable`] and [`as_static`] answer for it as for a literal. A
/// `&'static str` is borrowed for the rest of the process, so its bytes can be neither
/// freed nor written (`str` has no interior mutability). At most four texts
/// are kept.
pub fn pin(text: &'static str) {
    let slot = PINNED_TAKEN.fetch_add(1, Ordering::Relaxed);
    let Some([start, end]) = PINNED.get(slot) else {
        return;
    };
    let addr = text.as_ptr() as usize;
    end.store(addr + text.len(), Ordering::Relaxed);
    start.store(addr, Ordering::Release);
}

/// Whether a pinned text holds `[addr, end)` (see [`pin`]).
fn is_pinned(addr: usize, end: usize) -> bool {
    PINNED
        .iter()
        .any(|[s, e]| s.load(Ordering::Acquire) <= addr && end <= e.load(Ordering::Relaxed))
}

/// Whether `len` bytes at `addr` lie in a read-only segment of the program (or in a
/// text [`pin`]ned as unchangeable).
#[inline]
pub fn is_immutable(addr: usize, len: usize) -> bool {
    let Some(end) = addr.checked_add(len) else {
        return false;
    };
    (LITERALS[0].load(Ordering::Acquire) <= addr && end <= LITERALS[1].load(Ordering::Relaxed))
        || is_in_other_segment(addr, end)
}

/// [`is_immutable`] for text outside the literals' range (or before the segments were
/// read), out of line.
#[inline(never)]
fn is_in_other_segment(addr: usize, end: usize) -> bool {
    READ_ONLY
        .get_or_init(|| {
            let segments = laid_out(read_only_segments(), PROBE.as_ptr() as usize);
            let (start, end) = segments.literals;
            LITERALS[1].store(end, Ordering::Relaxed);
            LITERALS[0].store(start, Ordering::Release);
            segments
        })
        .hold(addr, end)
        || is_pinned(addr, end)
}

impl Segments {
    /// Whether one of the ranges holds `[addr, end)`: the literals' range, the other,
    /// then the list (rarely any).
    #[inline]
    fn hold(&self, addr: usize, end: usize) -> bool {
        let holds = |(s, e): (usize, usize)| s <= addr && end <= e;
        holds(self.literals) || holds(self.other) || self.rest.iter().any(|&r| holds(r))
    }
}

/// `ranges` laid out for the check: the one that holds `literal` first, then the
/// largest of the others.
fn laid_out(mut ranges: Vec<(usize, usize)>, literal: usize) -> Segments {
    let literals = match ranges
        .iter()
        .position(|&(s, e)| s <= literal && literal < e)
    {
        Some(i) => ranges.remove(i),
        None => NONE,
    };
    let other = match (0..ranges.len()).max_by_key(|&i| ranges[i].1 - ranges[i].0) {
        Some(i) => ranges.remove(i),
        None => NONE,
    };
    Segments {
        literals,
        other,
        rest: ranges,
    }
}

/// `text` itself for as long as the process runs, when it lies in a read-only segment
/// of the program (a string literal) or in a [`pin`]ned text; `None` otherwise (the
/// caller copies it).
#[inline]
pub fn as_static(text: &str) -> Option<&'static str> {
    let addr = text.as_ptr() as usize;
    // The test of [`is_immutable`] without its overflow check: a slice never wraps
    // around the address space (`slice::from_raw_parts`' contract), so its end is
    // `addr + len` exactly. This runs on every literal span field.
    let end = addr.wrapping_add(text.len());
    let held = (LITERALS[0].load(Ordering::Acquire) <= addr
        && end <= LITERALS[1].load(Ordering::Relaxed))
        || is_in_other_segment(addr, end);
    if !held {
        return None;
    }
    // SAFETY: the bytes lie in a loaded segment of the main program without write
    // permission (the program is never unloaded and nothing can write there), or inside
    // a `&'static str` handed to `pin` (borrowed shared for the rest of the process:
    // never freed, never written), so they stay valid, unchanged UTF-8 (they were a
    // `&str`) until the process ends.
    Some(unsafe {
        std::str::from_utf8_unchecked(std::slice::from_raw_parts(text.as_ptr(), text.len()))
    })
}

#[cfg(target_os = "linux")]
fn read_only_segments() -> Vec<(usize, usize)> {
    use std::ffi::{c_int, c_void};

    unsafe extern "C" fn main_program(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: `dl_iterate_phdr` passes a valid `info` for the duration of the call,
        // whose `dlpi_phdr` points to `dlpi_phnum` program headers, and `data` is the
        // vector handed to it below, not otherwise borrowed meanwhile.
        unsafe {
            let segments = &mut *data.cast::<Vec<(usize, usize)>>();
            let info = &*info;
            for i in 0..usize::from(info.dlpi_phnum) {
                let header = &*info.dlpi_phdr.add(i);
                if header.p_type == libc::PT_LOAD && header.p_flags & libc::PF_W == 0 {
                    let start = (info.dlpi_addr as usize).wrapping_add(header.p_vaddr as usize);
                    segments.push((start, start.saturating_add(header.p_memsz as usize)));
                }
            }
        }
        // The main program comes first: stop after it.
        1
    }

    let mut segments: Vec<(usize, usize)> = Vec::new();
    // SAFETY: the callback only reads the headers it is given and writes to `segments`,
    // which outlives the call.
    unsafe {
        libc::dl_iterate_phdr(
            Some(main_program),
            (&mut segments as *mut Vec<(usize, usize)>).cast(),
        )
    };
    joined(segments)
}

#[cfg(not(target_os = "linux"))]
fn read_only_segments() -> Vec<(usize, usize)> {
    Vec::new()
}

/// The ranges sorted, with those that touch or overlap joined: one range to test
/// instead of several on every lookup.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn joined(mut ranges: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    ranges.sort_unstable();
    let mut out: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        match out.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => out.push((start, end)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_immutable_and_heap_text_is_not() {
        let literal = "a string literal";
        let owned = String::from(literal);
        let on_stack = *b"stack";
        #[cfg(target_os = "linux")]
        assert!(is_immutable(literal.as_ptr() as usize, literal.len()));
        assert!(!is_immutable(owned.as_ptr() as usize, owned.len()));
        assert!(!is_immutable(on_stack.as_ptr() as usize, on_stack.len()));
        assert!(!is_immutable(usize::MAX, 2));
        // A mutable static is not in a read-only segment.
        static MUTABLE: std::sync::Mutex<[u8; 4]> = std::sync::Mutex::new(*b"abcd");
        let guard = MUTABLE.lock().unwrap();
        assert!(!is_immutable(guard.as_ptr() as usize, 4));
    }

    #[test]
    fn pinned_heap_text_is_immutable_and_its_neighbours_are_not() {
        let pinned: &'static str = String::from("20261128T221500.000000Z-H0-P1").leak();
        let other = String::from("20261128T221500.000000Z-H0-P1");
        let addr = pinned.as_ptr() as usize;
        assert!(!is_immutable(addr, pinned.len()));
        pin(pinned);
        assert!(is_immutable(addr, pinned.len()));
        assert!(is_immutable(addr + 3, 5));
        assert_eq!(
            as_static(&pinned[3..8]).map(str::as_ptr),
            Some(pinned[3..].as_ptr())
        );
        // One byte past either end, and equal text elsewhere, are not pinned.
        assert!(!is_immutable(addr, pinned.len() + 1));
        assert!(!is_immutable(addr - 1, 2));
        assert!(!is_immutable(other.as_ptr() as usize, other.len()));
    }

    #[test]
    fn literals_are_kept_by_reference_and_other_text_is_not() {
        let literal = "index";
        #[cfg(target_os = "linux")]
        assert_eq!(as_static(literal).map(str::as_ptr), Some(literal.as_ptr()));
        let owned = String::from(literal);
        assert_eq!(as_static(&owned), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_literals_range_comes_first_and_holds_the_literals() {
        let literal = "another string literal";
        assert!(is_immutable(literal.as_ptr() as usize, literal.len()));
        let segments = READ_ONLY.get().expect("read at the first check");
        let range = segments.literals;
        // The copy checked inline is the same range.
        assert_eq!(
            (
                LITERALS[0].load(Ordering::Acquire),
                LITERALS[1].load(Ordering::Relaxed)
            ),
            range
        );
        for text in [literal, PROBE, file!()] {
            let addr = text.as_ptr() as usize;
            assert!(
                range.0 <= addr && addr + text.len() <= range.1,
                "{segments:x?}"
            );
        }
        // Text across its end is in no range (joined ranges never touch).
        assert!(!is_immutable(range.1 - 1, 2));
    }

    #[test]
    fn ranges_are_laid_out_literals_first_then_the_largest() {
        let ranges = vec![(0, 10), (20, 30), (40, 100), (200, 205)];
        assert_eq!(
            laid_out(ranges.clone(), 25),
            Segments {
                literals: (20, 30),
                other: (40, 100),
                rest: vec![(0, 10), (200, 205)],
            }
        );
        // No range holds the literal (the program is not the main one): all by size.
        assert_eq!(
            laid_out(vec![(0, 10)], 50),
            Segments {
                literals: NONE,
                other: (0, 10),
                rest: vec![],
            }
        );
        assert_eq!(
            laid_out(Vec::new(), 5),
            Segments {
                literals: NONE,
                other: NONE,
                rest: vec![],
            }
        );
    }

    #[test]
    fn every_range_is_checked() {
        let segments = laid_out(vec![(0, 10), (20, 30), (40, 100), (200, 205)], 25);
        let holds = |addr: usize, len: usize| segments.hold(addr, addr + len);
        for (addr, len, held) in [(0, 10, true), (22, 3, true), (50, 50, true), (201, 4, true)]
            .into_iter()
            .chain([
                (9, 2, false),
                (30, 1, false),
                (205, 1, false),
                (150, 1, false),
            ])
        {
            assert_eq!(holds(addr, len), held, "{addr} {len}");
        }
    }

    #[test]
    fn touching_ranges_are_joined() {
        assert_eq!(
            joined(vec![(30, 40), (0, 10), (10, 20), (15, 18), (21, 25)]),
            vec![(0, 20), (21, 25), (30, 40)]
        );
        assert_eq!(joined(Vec::new()), Vec::new());
    }
}
