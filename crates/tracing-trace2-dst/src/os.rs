//! The platform's sinks: what a descriptor number, an opened file and fd 2 become on
//! Unix (file descriptors, `fd.rs`) and on Windows (handles, `handle.rs`).

use std::fs::File;

use crate::sink::Sink;

#[cfg(unix)]
use crate::fd::{FdSink, WriteMode};
#[cfg(windows)]
use crate::handle::HandleSink;

/// A sink for one of the host's descriptors (`1`..`9`), never closed.
pub(crate) fn descriptor(fd: i32) -> Box<dyn Sink> {
    #[cfg(unix)]
    return Box::new(FdSink::borrowed(fd));
    #[cfg(windows)]
    return Box::new(HandleSink::borrowed(fd));
}

/// A sink for a private duplicate of what the host's descriptor names now.
pub(crate) fn pinned_descriptor(fd: i32) -> Box<dyn Sink> {
    #[cfg(unix)]
    return Box::new(FdSink::pinned(fd));
    #[cfg(windows)]
    return Box::new(HandleSink::pinned(fd));
}

/// A sink owning a file (or named pipe, or FIFO) opened by path.
pub(crate) fn opened_file(file: File) -> Box<dyn Sink> {
    // Usually a regular file, but a FIFO given by path can raise SIGPIPE: the sink
    // looks (one `fstat`).
    #[cfg(unix)]
    return Box::new(FdSink::opened(std::os::fd::OwnedFd::from(file)));
    #[cfg(windows)]
    Box::new(HandleSink::owned(file))
}

/// Hands `bytes` to fd 2 (the standard error handle) in one write.
pub(crate) fn write_stderr(bytes: &[u8]) -> std::io::Result<()> {
    #[cfg(unix)]
    return crate::fd::write_fd(2, bytes, WriteMode::NoSigpipe).map(|_| ());
    #[cfg(windows)]
    return crate::handle::write_stderr(bytes);
}
