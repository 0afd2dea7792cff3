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
//! empty and every string is confirmed or copied.

use std::sync::OnceLock;

/// `[start, end)` of each read-only loaded segment of the main program, adjacent ones
/// joined (usually one or two ranges).
static READ_ONLY: OnceLock<Vec<(usize, usize)>> = OnceLock::new();

/// Whether `len` bytes at `addr` lie in a read-only segment of the program.
#[inline]
pub fn is_immutable(addr: usize, len: usize) -> bool {
    let Some(end) = addr.checked_add(len) else {
        return false;
    };
    READ_ONLY
        .get_or_init(read_only_segments)
        .iter()
        .any(|&(s, e)| s <= addr && end <= e)
}

/// `text` itself for as long as the process runs, when it lies in a read-only segment
/// of the program (a string literal); `None` otherwise (the caller copies it).
#[inline]
pub fn as_static(text: &str) -> Option<&'static str> {
    if !is_immutable(text.as_ptr() as usize, text.len()) {
        return None;
    }
    // SAFETY: the bytes lie in a loaded segment of the main program without write
    // permission: the program is never unloaded and nothing can write there, so they
    // stay valid, unchanged UTF-8 (they were a `&str`) until the process ends.
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
    fn literals_are_kept_by_reference_and_other_text_is_not() {
        let literal = "index";
        #[cfg(target_os = "linux")]
        assert_eq!(as_static(literal).map(str::as_ptr), Some(literal.as_ptr()));
        let owned = String::from(literal);
        assert_eq!(as_static(&owned), None);
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
