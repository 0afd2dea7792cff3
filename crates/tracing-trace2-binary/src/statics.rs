//! Which addresses hold text that cannot change: the read-only segments of the program
//! itself, where string literals and `tracing`'s callsite metadata live.
//!
//! The encoder interns strings by address and confirms every hit against the batch's
//! copy, because a `&str` need not be `'static` and an address can be reused for other
//! text. Text in a read-only segment of the executable can be neither freed nor
//! written, so a hit there needs no confirmation. The segments are read once from the
//! program headers (`dl_iterate_phdr`, which reports the main program first); elsewhere
//! than on Linux the list is empty and every hit is confirmed.

use std::sync::OnceLock;

/// `[start, end)` of each read-only loaded segment of the main program.
static READ_ONLY: OnceLock<Vec<(usize, usize)>> = OnceLock::new();

/// Whether `len` bytes at `addr` lie in a read-only segment of the program.
pub(crate) fn is_immutable(addr: usize, len: usize) -> bool {
    let Some(end) = addr.checked_add(len) else {
        return false;
    };
    READ_ONLY
        .get_or_init(read_only_segments)
        .iter()
        .any(|&(s, e)| s <= addr && end <= e)
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
    segments
}

#[cfg(not(target_os = "linux"))]
fn read_only_segments() -> Vec<(usize, usize)> {
    Vec::new()
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
}
