//! Windows: the hooks that see the process end, and every `unsafe` call they need.
//!
//! - `std::process::exit` calls `ExitProcess`, which runs no `atexit` handler. It ends
//!   every other thread first, each with the exit code, then tells the loaded modules
//!   (DLL_PROCESS_DETACH; for this executable its TLS callbacks) and runs the exiting
//!   thread's fiber-local storage callbacks (Wine 8 runs these, not an executable's TLS
//!   callbacks). Both kinds of callback are registered here; the first that runs while
//!   nothing was written yet writes `exit` and `atexit`. The code comes from a parked
//!   "witness" thread started with the lifecycle: `ExitProcess` ends it with the code,
//!   so its exit code is the process's. `GetExitCodeProcess` does not help there: the
//!   process's status stays `STILL_ACTIVE` until the modules were told (Microsoft's
//!   documented order, and what Wine 8 answers).
//! - The C runtime's `atexit` handler runs when `main` returns through the C runtime and
//!   when C code calls `exit`, while every thread still runs; the code is not known
//!   there, but `ExitProcess` follows on the same thread with it. So when the callbacks
//!   will see that (the witness runs and this thread carries the fiber-local slot), the
//!   handler only drains the background writers, whose workers `ExitProcess` is about to
//!   end, and leaves `exit` and `atexit` to the callbacks: a `main` that returns `Err`
//!   after the guard was dropped is traced with code 1, as on Linux with glibc. Otherwise
//!   it writes `exit` code 0 and `atexit` at once (as on Unix without glibc), so that
//!   nothing depends on a callback that may not run.
//!
//! At that point the other threads are gone without cleanup: a lock one of them held
//! stays held. The deferred writers are told (their workers are gone; what a worker had
//! not written is lost, which the drain above avoids on the way through `exit`) and the
//! lines are written on the exiting thread.

use std::ffi::c_void;
use std::os::windows::io::AsRawHandle;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use super::{Sigpipe, claim_end, write_atexit};
use tracing_trace2_core::api;

type Handle = *mut c_void;

/// `GetExitCodeThread`'s answer for a thread that still runs.
const STILL_ACTIVE: u32 = 259;
/// A TLS callback's reason when the process ends or the module is unloaded.
const DLL_PROCESS_DETACH: u32 = 0;
/// `FlsAlloc`'s failure.
const FLS_OUT_OF_INDEXES: u32 = u32::MAX;

#[link(name = "kernel32")]
unsafe extern "system" {
    fn GetExitCodeThread(thread: Handle, code: *mut u32) -> i32;
    fn FlsAlloc(callback: Option<unsafe extern "system" fn(*const c_void)>) -> u32;
    fn FlsSetValue(index: u32, value: *const c_void) -> i32;
    fn FlsGetValue(index: u32) -> *const c_void;
}

/// The witness thread's handle (as an address: a raw handle is not `Sync`). It stays
/// open for the whole process.
static WITNESS: OnceLock<usize> = OnceLock::new();

/// The fiber-local storage slot whose callback runs when the thread that started the
/// lifecycle ends (or the process ends on it).
static FLS_SLOT: AtomicU32 = AtomicU32::new(FLS_OUT_OF_INDEXES);

/// The executable's TLS callback, in the loader's list before the standard library's
/// (`.CRT$XLB`, whose callback destroys the thread's thread-locals at DLL_PROCESS_DETACH):
/// the layer's thread-locals are still there when this one runs.
#[used]
#[unsafe(link_section = ".CRT$XLAT")]
static TLS_CALLBACK: unsafe extern "system" fn(*mut c_void, u32, *mut c_void) = on_tls_callback;

pub(super) fn install_exit_handler() {
    // SAFETY: the handler is a plain function that lives for the whole process.
    unsafe {
        libc::atexit(exit_handler);
    }
    start_witness();
    // SAFETY: reading the callback's static keeps it (and the `.CRT$XLAT` entry) in the
    // linked program, as the standard library does for its own; it is a valid value.
    unsafe {
        std::ptr::read_volatile(&raw const TLS_CALLBACK);
    }
    // SAFETY: the callback is a plain function that lives for the whole process; the
    // slot's value only marks this thread (it is never dereferenced).
    unsafe {
        let slot = FlsAlloc(Some(on_fls_callback));
        if slot != FLS_OUT_OF_INDEXES && FlsSetValue(slot, std::ptr::dangling::<u8>().cast()) != 0 {
            FLS_SLOT.store(slot, Ordering::Release);
        }
    }
}

/// Starts the parked thread whose exit code tells the process's at `ExitProcess`.
fn start_witness() {
    let spawned = std::thread::Builder::new()
        .name("trace2-exit-witness".to_owned())
        .stack_size(64 * 1024)
        .spawn(|| {
            loop {
                std::thread::park();
            }
        });
    if let Ok(witness) = spawned {
        let _ = WITNESS.set(witness.as_raw_handle() as usize);
        // Its handle stays open: the thread is never joined.
        std::mem::forget(witness);
    }
}

/// The code `ExitProcess` ends the process with, once it has ended the other threads;
/// `None` while the process goes on (or without a witness).
fn exit_code_of_ending_process() -> Option<u32> {
    let witness = *WITNESS.get()? as Handle;
    let mut code = STILL_ACTIVE;
    // SAFETY: `witness` is the open handle of a thread of this process (never closed),
    // and `code` is a writable u32.
    let ok = unsafe { GetExitCodeThread(witness, &mut code) };
    (ok != 0 && code != STILL_ACTIVE).then_some(code)
}

/// Whether `exit` and `atexit` can wait for `ExitProcess`'s callbacks when the process
/// ends on this thread: the witness still runs (so its exit code will be the process's)
/// and this thread carries the fiber-local slot (so its callback runs inside
/// `ExitProcess`, as under Wine; a real Windows also runs the TLS callback, on any
/// thread, which is not verified here and so not relied upon).
pub(super) fn exit_status_known() -> bool {
    WITNESS.get().is_some() && exit_code_of_ending_process().is_none() && slot_marks_this_thread()
}

/// Whether the fiber-local slot holds this thread's mark (set where the lifecycle
/// started).
fn slot_marks_this_thread() -> bool {
    let slot = FLS_SLOT.load(Ordering::Acquire);
    // SAFETY: `slot` is an index `FlsAlloc` returned and that is never freed; reading
    // this thread's value has no other effect.
    slot != FLS_OUT_OF_INDEXES && unsafe { !FlsGetValue(slot).is_null() }
}

/// Runs when the process calls `exit` (`main` returned through the C runtime, or C code
/// called it), while every thread still runs; the code is not known here. When
/// `ExitProcess`'s callbacks will know it, only the background writers are drained
/// now; otherwise `exit` code 0 and `atexit` are written at once.
extern "C" fn exit_handler() {
    if exit_status_known() {
        // Unwinding out of an `extern "C"` function would abort: contain it.
        let _ = std::panic::catch_unwind(drain_before_exit_process);
        return;
    }
    write_exit_lines(0);
}

/// Writes out everything the background writers hold and stops their workers, which
/// `ExitProcess` would end with lines still in hand; what is traced later (the exit
/// lines among it) is written on the thread that traces it.
fn drain_before_exit_process() {
    let Some(shared) = super::SHARED.get() else {
        return;
    };
    if shared.done.load(Ordering::Acquire) {
        return;
    }
    tracing_trace2_core::background::shutdown_all();
    shared.layer.flush();
}

/// The TLS callback: at `ExitProcess` (DLL_PROCESS_DETACH with a non-null `reserved`),
/// `exit` and `atexit` with the code the witness ended with (0 if unknown).
unsafe extern "system" fn on_tls_callback(
    _module: *mut c_void,
    reason: u32,
    reserved: *mut c_void,
) {
    if reason == DLL_PROCESS_DETACH && !reserved.is_null() {
        let code = exit_code_of_ending_process().unwrap_or(0);
        end_in_exit_process(code);
    }
}

/// The fiber-local storage callback: runs when the thread that started the lifecycle
/// ends, and (on Wine) when the process ends on it. Only the latter ends the trace: the
/// witness has ended then.
unsafe extern "system" fn on_fls_callback(_value: *const c_void) {
    if let Some(code) = exit_code_of_ending_process() {
        end_in_exit_process(code);
    }
}

/// `exit` and `atexit` from inside `ExitProcess`, where the other threads are gone.
fn end_in_exit_process(code: u32) {
    if super::SHARED
        .get()
        .is_none_or(|shared| shared.done.load(Ordering::Acquire))
    {
        return;
    }
    tracing_trace2_core::background::other_threads_gone();
    // `ExitProcess` takes a UINT: the bits of `std::process::exit`'s i32.
    write_exit_lines(code as i32);
}

/// `exit` (unless the program wrote one) and `atexit`, once per process, through the
/// subscriber that was current where the lifecycle started, as on Unix.
fn write_exit_lines(code: i32) {
    let Some(shared) = claim_end() else { return };
    shared.with_dispatch(|| {
        if !api::exit_written() {
            api::exit_at(shared.started_at, code);
        }
        write_atexit(shared, shared.started_at);
    });
}

pub(super) fn install_sigpipe(_mode: Sigpipe) {}
