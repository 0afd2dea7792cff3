//! Windows: writing lines to a handle, one `WriteFile` per line, as Git for Windows
//! writes a trace line to its C runtime descriptor.
//!
//! A numeric target names a descriptor, as in git: `1`/`true` and `2` are the standard
//! error handle, looked up at each write (what it is at that moment). The C runtime's
//! descriptors 3 to 9, which Git for Windows can also write to, are not reached: a Rust
//! program has none of its own, and asking the C runtime about one that is not open
//! (`_get_osfhandle`) ends the process in its default invalid-parameter handler, which
//! a library must not risk. Such a target fails on its first write with "Bad file
//! descriptor", as git's does for a descriptor that is not open. Files, directories and
//! named pipes opened by path are owned and closed with the sink.
//!
//! A file opened for appending (std's `append(true)` asks only for `FILE_APPEND_DATA`,
//! like git's `mingw_open_append`) takes every write at its end in one piece whatever
//! other processes append, so whole lines stay whole; a regular file also takes
//! batches of whole lines ([`Sink::write_lines`], up to [`FILE_BATCH_LIMIT`]). Writes
//! to a regular file are still taken one at a time within the process: wine appends by
//! finding the end and writing there, so two threads' lines could land on the same
//! spot (observed under load); an uncontended lock costs far less than the `WriteFile`
//! it guards. Other processes appending under wine can still collide. Once the other
//! threads are gone ([`other_threads_gone`], inside `ExitProcess`), the lock is tried, not
//! waited for: a thread killed while writing never gives it back. Windows
//! has no SIGPIPE: a reader that went away makes the write fail (`ERROR_NO_DATA`,
//! `ERROR_BROKEN_PIPE`), and the caller disables the target.

use std::fs::File;
use std::io::{self, Write};
use std::mem::ManuallyDrop;
use std::os::windows::io::{AsRawHandle, FromRawHandle, RawHandle};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

use crate::sink::{FILE_BATCH_LIMIT, Sink};

/// Set once the process's other threads are gone (see [`other_threads_gone`]).
static OTHER_THREADS_GONE: AtomicBool = AtomicBool::new(false);

/// From now on a sink writes without waiting for its write lock (see the module docs).
pub(crate) fn other_threads_gone() {
    OTHER_THREADS_GONE.store(true, Ordering::Release);
}

/// Where a [`HandleSink`] writes.
#[derive(Debug)]
enum HandleDestination {
    /// One of the C runtime's descriptors, looked up at each write; never closed.
    Descriptor(i32),
    /// A handle we opened (or duplicated), closed with the sink.
    Owned(File),
}

/// A sink writing to a Windows handle with one `WriteFile` per line.
#[derive(Debug)]
pub(crate) struct HandleSink {
    destination: HandleDestination,
    /// [`FILE_BATCH_LIMIT`] for a regular file, else 0.
    batch_limit: usize,
    /// Held around each write to a regular file (see the module documentation).
    file_writes: Mutex<()>,
}

/// The standard handle behind descriptor `fd` now (1 and 2); `None` for any other
/// number (see the module documentation) and when there is no such handle.
fn descriptor_handle(fd: i32) -> Option<RawHandle> {
    let handle = match fd {
        1 => io::stdout().as_raw_handle(),
        2 => io::stderr().as_raw_handle(),
        _ => return None,
    };
    let invalid = handle.is_null() || handle as isize == -1;
    (!invalid).then_some(handle)
}

/// Runs `with` on a `File` standing for `handle` without taking ownership of it.
fn with_borrowed<T>(handle: RawHandle, with: impl FnOnce(&File) -> T) -> T {
    // SAFETY: the handle stays open for the call (it is the host's standard handle or
    // runtime descriptor); `ManuallyDrop` keeps the `File` from closing it.
    let file = ManuallyDrop::new(unsafe { File::from_raw_handle(handle) });
    with(&file)
}

/// The error a write to a descriptor that names nothing gets (`EBADF` in git).
fn bad_descriptor() -> io::Error {
    io::Error::from_raw_os_error(ERROR_INVALID_HANDLE)
}

/// Win32 `ERROR_INVALID_HANDLE`.
const ERROR_INVALID_HANDLE: i32 = 6;

/// Whether `file` is a regular file on disk (pipes, consoles and devices are not).
fn is_regular_file(file: &File) -> bool {
    file.metadata().is_ok_and(|meta| meta.is_file())
}

impl HandleSink {
    /// Writes to descriptor `fd`, whatever it names at each write.
    pub(crate) fn borrowed(fd: i32) -> Self {
        let batch_limit = match descriptor_handle(fd) {
            Some(handle) if with_borrowed(handle, is_regular_file) => FILE_BATCH_LIMIT,
            _ => 0,
        };
        Self {
            destination: HandleDestination::Descriptor(fd),
            batch_limit,
            file_writes: Mutex::new(()),
        }
    }

    /// Writes to a private duplicate of what descriptor `fd` names now (not inherited
    /// by children), whatever the host later does with the number. A descriptor that
    /// names nothing is used as it is (its first write fails, as in git).
    pub(crate) fn pinned(fd: i32) -> Self {
        match descriptor_handle(fd).and_then(|h| with_borrowed(h, |f| f.try_clone().ok())) {
            Some(copy) => Self::owned(copy),
            None => Self::borrowed(fd),
        }
    }

    /// Writes to a file, directory file or named pipe we opened, closing it on drop.
    pub(crate) fn owned(file: File) -> Self {
        let batch_limit = if is_regular_file(&file) {
            FILE_BATCH_LIMIT
        } else {
            0
        };
        Self {
            destination: HandleDestination::Owned(file),
            batch_limit,
            file_writes: Mutex::new(()),
        }
    }

    /// The write lock; once the other threads are gone, only if it is free (a killed
    /// holder would keep it forever, and no other thread is left to write beside us).
    fn lock_file_writes(&self) -> Option<MutexGuard<'_, ()>> {
        if !OTHER_THREADS_GONE.load(Ordering::Acquire) {
            return Some(
                self.file_writes
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner),
            );
        }
        match self.file_writes.try_lock() {
            Ok(guard) => Some(guard),
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// Runs `with` on the file this sink writes to now, alone in this process when it
    /// is a regular file.
    fn with_file<T>(&self, with: impl FnOnce(&File) -> io::Result<T>) -> io::Result<T> {
        let _alone = if self.batch_limit > 0 {
            self.lock_file_writes()
        } else {
            None
        };
        match &self.destination {
            HandleDestination::Owned(file) => with(file),
            HandleDestination::Descriptor(fd) => match descriptor_handle(*fd) {
                Some(handle) => with_borrowed(handle, with),
                None => Err(bad_descriptor()),
            },
        }
    }
}

impl Sink for HandleSink {
    fn write_line(&self, line: &[u8]) -> io::Result<()> {
        // One `WriteFile`; a short write is not retried, as in git.
        self.with_file(|mut file| file.write(line)).map(|_| ())
    }

    fn batch_limit(&self) -> usize {
        self.batch_limit
    }

    fn write_lines(&self, lines: &[u8]) -> io::Result<()> {
        if self.batch_limit == 0 {
            for line in lines.split_inclusive(|&b| b == b'\n') {
                self.write_line(line)?;
            }
            return Ok(());
        }
        // Appending: each write lands whole at the end; the rest of a short write follows.
        self.with_file(|mut file| file.write_all(lines))
    }
}

/// Writes `bytes` to the standard error handle in one `WriteFile` (git's warnings).
pub(crate) fn write_stderr(bytes: &[u8]) -> io::Result<()> {
    HandleSink::borrowed(2).write_line(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_file_appends_whole_lines_and_batches() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.txt");
        let open = || {
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(&path)
                .unwrap()
        };
        let a = HandleSink::owned(open());
        let b = HandleSink::owned(open());
        assert_eq!(a.batch_limit(), FILE_BATCH_LIMIT);
        a.write_line(b"a1\n").unwrap();
        b.write_lines(b"b1\nb2\n").unwrap();
        a.write_line(b"a2\n").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"a1\nb1\nb2\na2\n");
    }

    #[test]
    fn descriptor_that_names_nothing_fails_on_write() {
        let sink = HandleSink::borrowed(9);
        let err = sink.write_line(b"x\n").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(ERROR_INVALID_HANDLE));
        assert_eq!(crate::strerror(&err), "Bad file descriptor");
    }
}
