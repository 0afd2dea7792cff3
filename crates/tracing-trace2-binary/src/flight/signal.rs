//! The on-demand signal on Unix: `SIGUSR2` writes a snapshot of every recorder that
//! asked for it.
//!
//! Nothing but `write` is safe in a signal handler, so the handler writes one byte to
//! a pipe and a thread of the recorder's (`t2-flight-sig`, started with the first
//! recorder) reads it and writes the snapshots. The thread must exist before the signal
//! comes: a process that has gone idle or hangs, which is when a snapshot is asked for,
//! records nothing that could start one. It is a bare POSIX thread rather than a
//! `std::thread`: it waits in `read` for the whole life of most processes, and std's
//! start of a thread (its handle and result packet, the alternate signal stack it maps
//! for stack-overflow reports, its name) made it the flight recorder's largest cost in a
//! short process. The handler is installed only where the signal still has its default
//! action, which would end the process: a program that handles `SIGUSR2` itself keeps
//! its handler (and can call
//! [`FlightRecorder::snapshot`](super::FlightRecorder::snapshot) from it instead).

use std::sync::Once;
use std::sync::atomic::{AtomicI32, Ordering};

use super::Trigger;

/// The signal that asks for a snapshot.
pub const SNAPSHOT_SIGNAL: libc::c_int = libc::SIGUSR2;

/// The serving thread's stack: a snapshot copies the ring's batches on the heap and
/// writes them with a few calls deep, far from this (std's default is 2 MiB); only the
/// pages touched are ever backed, so this bounds address space, not memory.
const SERVER_STACK: usize = 256 * 1024;

/// The pipe's write end, for the handler; -1 until it exists.
static PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);
/// The pipe's read end, for the serving thread; -1 until it exists.
static PIPE_READ: AtomicI32 = AtomicI32::new(-1);

/// Installs the handler (once per process).
pub(super) fn install_once() {
    static ONCE: Once = Once::new();
    ONCE.call_once(install);
}

fn install() {
    let Some([read_end, write_end]) = pipe_cloexec() else {
        return;
    };
    // SAFETY: a zeroed `sigaction` is a valid "query" argument; the kernel only writes
    // the current disposition into `current`.
    let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: as above; a null new action only reads the current one.
    let queried = unsafe { libc::sigaction(SNAPSHOT_SIGNAL, std::ptr::null(), &mut current) };
    if queried != 0 || current.sa_sigaction != libc::SIG_DFL {
        close_both(read_end, write_end);
        return;
    }
    PIPE_READ.store(read_end, Ordering::Release);
    if !start_server() {
        PIPE_READ.store(-1, Ordering::Release);
        close_both(read_end, write_end);
        return;
    }
    PIPE_WRITE.store(write_end, Ordering::Release);
    // SAFETY: zeroed then filled: a handler that only calls `write` (async-signal-safe),
    // with SA_RESTART so that the host's interrupted system calls resume.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(SNAPSHOT_SIGNAL, &action, std::ptr::null_mut());
    }
}

/// A pipe whose two ends children do not inherit, in one call where the system has it.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn pipe_cloexec() -> Option<[libc::c_int; 2]> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `pipe2` fills the two-element array it is given.
    let made = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    (made == 0).then_some(fds)
}

/// A pipe whose two ends children do not inherit (no `pipe2` here: marked after).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn pipe_cloexec() -> Option<[libc::c_int; 2]> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `pipe` fills the two-element array it is given.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return None;
    }
    for fd in fds {
        // SAFETY: marks a descriptor this module just opened close-on-exec.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    Some(fds)
}

/// Starts the serving thread, detached (nobody joins it: it waits until the process
/// ends). False if it could not be started.
fn start_server() -> bool {
    // SAFETY: `attr` is initialised by `pthread_attr_init` before any other use and
    // destroyed after `pthread_create` has read it; `thread` is written by
    // `pthread_create` only. `server_main` takes no argument (it reads `PIPE_READ`,
    // stored before this call) and catches every panic, so nothing unwinds out of it.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_attr_init(&mut attr) != 0 {
            return false;
        }
        let stack = SERVER_STACK.max(libc::PTHREAD_STACK_MIN);
        libc::pthread_attr_setstacksize(&mut attr, stack);
        libc::pthread_attr_setdetachstate(&mut attr, libc::PTHREAD_CREATE_DETACHED);
        let mut thread: libc::pthread_t = std::mem::zeroed();
        let created = libc::pthread_create(&mut thread, &attr, server_main, std::ptr::null_mut());
        libc::pthread_attr_destroy(&mut attr);
        created == 0
    }
}

fn close_both(a: libc::c_int, b: libc::c_int) {
    // SAFETY: both are descriptors this module opened and nothing else uses.
    unsafe {
        libc::close(a);
        libc::close(b);
    }
}

extern "C" fn on_signal(_: libc::c_int) {
    let fd = PIPE_WRITE.load(Ordering::Acquire);
    if fd < 0 {
        return;
    }
    // SAFETY: `write` and reading/writing errno are async-signal-safe; errno is put
    // back so the interrupted code sees its own.
    unsafe {
        let errno = *errno_location();
        let byte = 1u8;
        libc::write(fd, (&byte as *const u8).cast(), 1);
        *errno_location() = errno;
    }
}

/// Where the calling thread's `errno` lives.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn errno_location() -> *mut libc::c_int {
    // SAFETY: returns the calling thread's errno slot; no precondition.
    unsafe { libc::__errno_location() }
}

/// Where the calling thread's `errno` lives.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn errno_location() -> *mut libc::c_int {
    // SAFETY: returns the calling thread's errno slot; no precondition.
    unsafe { libc::__error() }
}

/// The serving thread's entry point.
extern "C" fn server_main(_: *mut libc::c_void) -> *mut libc::c_void {
    name_this_thread();
    serve(PIPE_READ.load(Ordering::Acquire));
    std::ptr::null_mut()
}

/// Names the serving thread, as `ps -L` and debuggers show it (15 bytes at most).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn name_this_thread() {
    // SAFETY: `PR_SET_NAME` reads the NUL-terminated name and names the calling thread.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"t2-flight-sig".as_ptr()) };
}

/// Names the serving thread, as debuggers show it.
#[cfg(target_vendor = "apple")]
fn name_this_thread() {
    // SAFETY: reads the NUL-terminated name and names the calling thread.
    unsafe { libc::pthread_setname_np(c"t2-flight-sig".as_ptr()) };
}

/// Names the serving thread where the system has a way (not here).
#[cfg(not(any(target_os = "linux", target_os = "android", target_vendor = "apple")))]
fn name_this_thread() {}

/// The signal thread: one round of snapshots per byte read.
fn serve(read_end: libc::c_int) {
    let mut byte = 0u8;
    loop {
        // SAFETY: reads at most one byte into `byte`.
        let n = unsafe { libc::read(read_end, (&mut byte as *mut u8).cast(), 1) };
        if n == 0 {
            return;
        }
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        // A panic may not leave `server_main` (a C function): a round that panics is
        // reported by the panic hook and the thread serves the next signal.
        let _ = std::panic::catch_unwind(|| {
            for recorder in super::live_recorders() {
                if recorder.inner.signal {
                    let _ = recorder.snapshot(Trigger::Signal);
                }
            }
        });
    }
}
