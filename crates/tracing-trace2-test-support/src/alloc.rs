//! A global allocator that counts the allocations (and reallocations) of the calling
//! thread only, so a test harness's other threads do not disturb the counts.
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: tracing_trace2_test_support::alloc::CountingAlloc =
//!     tracing_trace2_test_support::alloc::CountingAlloc;
//! let before = tracing_trace2_test_support::alloc::allocations();
//! ```

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Forwards every call to the system allocator and counts this thread's allocations.
#[derive(Debug)]
pub struct CountingAlloc;

thread_local! {
    // Const-initialised and without a destructor: usable from inside the allocator.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static BYTES: Cell<u64> = const { Cell::new(0) };
}

/// Counts one allocation of `bytes` bytes (a reallocation counts its new size).
fn count(bytes: usize) {
    // `try_with`: the allocator also runs while thread locals are torn down.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
    let _ = BYTES.try_with(|n| n.set(n.get() + bytes as u64));
}

/// Bytes the calling thread asked for so far, allocations and reallocations (the new
/// size) added up: an upper bound of what it held at any time (0 unless
/// [`CountingAlloc`] is the global allocator).
pub fn allocated_bytes() -> u64 {
    BYTES.with(Cell::get)
}

/// Allocations and reallocations made by the calling thread so far (0 unless
/// [`CountingAlloc`] is the global allocator).
pub fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

// SAFETY: every call is forwarded unchanged to the system allocator, whose contract is
// the same; the count is a thread-local integer that never allocates.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: the caller upholds `alloc`'s contract, which we forward.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        // SAFETY: `ptr` came from this allocator, which is the system's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, which is the system's.
        unsafe { System.dealloc(ptr, layout) }
    }
}
