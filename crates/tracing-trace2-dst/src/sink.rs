//! The one small interface between formatted lines and the place they go.
//!
//! A [`Sink`] receives complete lines (each ending in LF) and must hand each one to the
//! operating system in a single `write` call, so that lines from many threads and many
//! processes appending to one file never interleave. Concrete destinations (stderr, a
//! file, a directory, an fd, a Unix socket, the background writer) live in
//! [`crate`].

use std::io;
use std::sync::{Arc, Mutex, PoisonError};

/// Where the lines of one target go.
pub trait Sink: Send + Sync + 'static {
    /// Writes one complete line (ending in LF) with one `write` call. A short write is
    /// not retried (as in git); an error disables the target.
    fn write_line(&self, line: &[u8]) -> io::Result<()>;

    /// Pushes out anything held back (only buffering sinks hold lines back).
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
}

impl<S: Sink + ?Sized> Sink for Box<S> {
    fn write_line(&self, line: &[u8]) -> io::Result<()> {
        (**self).write_line(line)
    }
    fn flush(&self) -> io::Result<()> {
        (**self).flush()
    }
}

impl<S: Sink + ?Sized> Sink for Arc<S> {
    fn write_line(&self, line: &[u8]) -> io::Result<()> {
        (**self).write_line(line)
    }
    fn flush(&self) -> io::Result<()> {
        (**self).flush()
    }
}

/// A sink that keeps every line in memory; for tests and for programs that inspect
/// their own trace.
#[derive(Clone, Debug, Default)]
pub struct MemorySink {
    lines: Arc<Mutex<Vec<u8>>>,
}

impl MemorySink {
    /// An empty sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// Everything written so far.
    pub fn contents(&self) -> Vec<u8> {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Everything written so far, as text (invalid UTF-8 replaced).
    pub fn to_string_lossy(&self) -> String {
        String::from_utf8_lossy(&self.contents()).into_owned()
    }
}

impl Sink for MemorySink {
    fn write_line(&self, line: &[u8]) -> io::Result<()> {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(line);
        Ok(())
    }
}

/// A sink that discards every line (for benchmarks of the formatting cost).
#[derive(Clone, Copy, Debug, Default)]
pub struct NullSink;

impl Sink for NullSink {
    fn write_line(&self, _line: &[u8]) -> io::Result<()> {
        Ok(())
    }
}
