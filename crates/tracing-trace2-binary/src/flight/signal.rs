//! The on-demand signal on Unix: `SIGUSR2` writes a snapshot of every recorder that
//! asked for it.
//!
//! Nothing but `write` is safe in a signal handler, so the handler writes one byte to
//! a pipe and a thread of the recorder's (`t2-flight-signal`, started with the first
//! recorder) reads it and writes the snapshots. The handler is installed only where
//! the signal still has its default action, which would end the process: a program
//! that handles `SIGUSR2` itself keeps its handler (and can call
//! [`FlightRecorder::snapshot`](super::FlightRecorder::snapshot) from it instead).

use std::sync::Once;
use std::sync::atomic::{AtomicI32, Ordering};

use super::Trigger;

/// The signal that asks for a snapshot.
pub const SNAPSHOT_SIGNAL: libc::c_int = libc::SIGUSR2;

/// The pipe's write end, for the handler; -1 until it exists.
static PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);

/// Installs the handler (once per process).
pub(super) fn install_once() {
    static ONCE: Once = Once::new();
    ONCE.call_once(install);
}

fn install() {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `pipe` fills the two-element array it is given.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return;
    }
    let [read_end, write_end] = fds;
    for fd in fds {
        // SAFETY: marks a descriptor this module just opened close-on-exec, so that
        // children do not inherit it.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    // SAFETY: a zeroed `sigaction` is a valid "query" argument; the kernel only writes
    // the current disposition into `current`.
    let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: as above; a null new action only reads the current one.
    let queried = unsafe { libc::sigaction(SNAPSHOT_SIGNAL, std::ptr::null(), &mut current) };
    if queried != 0 || current.sa_sigaction != libc::SIG_DFL {
        close_both(read_end, write_end);
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("t2-flight-signal".into())
        .spawn(move || serve(read_end));
    if spawned.is_err() {
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
        for recorder in super::live_recorders() {
            if recorder.inner.signal {
                let _ = recorder.snapshot(Trigger::Signal);
            }
        }
    }
}
