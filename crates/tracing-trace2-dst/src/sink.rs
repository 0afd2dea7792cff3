//! The one small interface between formatted lines and the place they go.
//!
//! A [`Sink`] receives complete lines (each ending in LF) and must hand each one to the
//! operating system in a single `write` call, so that lines from many threads and many
//! processes appending to one file never interleave. Concrete destinations (stderr, a
//! file, a directory, an fd, a Unix socket, the background writer) live in
//! [`crate`].
//!
//! A sink may also take several whole lines at once ([`Sink::write_lines`], up to its
//! [`Sink::batch_limit`]): a background writer uses that for files, where one `write`
//! of whole lines to an `O_APPEND` file lands whole as well, and saves a system call per
//! line. Sockets and pipes keep one line per call.

use std::io;
use std::sync::{Arc, Mutex, PoisonError};

/// The most bytes of whole lines one `write` of a batch carries to a regular file.
pub const FILE_BATCH_LIMIT: usize = 64 * 1024;

/// Where the lines of one target go.
pub trait Sink: Send + Sync + 'static {
    /// Writes one complete line (ending in LF) with one `write` call. A short write is
    /// not retried (as in git); an error disables the target.
    fn write_line(&self, line: &[u8]) -> io::Result<()>;

    /// Pushes out anything held back (only buffering sinks hold lines back).
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }

    /// The most bytes of whole lines [`write_lines`](Sink::write_lines) hands to the
    /// kernel in one `write`; 0 (the default) when the destination takes one line per
    /// call only (sockets, pipes, terminals, sinks of one's own).
    fn batch_limit(&self) -> usize {
        0
    }

    /// Writes `lines`, whole lines back to back: with one `write` when the sink has a
    /// [`batch_limit`](Sink::batch_limit) and they fit in it (a caller keeps batches
    /// within it; a single longer line goes alone). A sink that batches follows a short
    /// write with the rest, so nothing is lost; an error is returned at once and the
    /// caller disables the target. The default writes each line with
    /// [`write_line`](Sink::write_line).
    fn write_lines(&self, lines: &[u8]) -> io::Result<()> {
        for line in lines.split_inclusive(|&b| b == b'\n') {
            self.write_line(line)?;
        }
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
    fn batch_limit(&self) -> usize {
        (**self).batch_limit()
    }
    fn write_lines(&self, lines: &[u8]) -> io::Result<()> {
        (**self).write_lines(lines)
    }
}

impl<S: Sink + ?Sized> Sink for Arc<S> {
    fn write_line(&self, line: &[u8]) -> io::Result<()> {
        (**self).write_line(line)
    }
    fn flush(&self) -> io::Result<()> {
        (**self).flush()
    }
    fn batch_limit(&self) -> usize {
        (**self).batch_limit()
    }
    fn write_lines(&self, lines: &[u8]) -> io::Result<()> {
        (**self).write_lines(lines)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts the calls it gets.
    #[derive(Default)]
    struct Calls(Mutex<Vec<Vec<u8>>>);

    impl Sink for Calls {
        fn write_line(&self, line: &[u8]) -> io::Result<()> {
            if line == b"bad\n" {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            self.0.lock().unwrap().push(line.to_vec());
            Ok(())
        }
    }

    /// A sink without batches gets lines one per call, through a `Box` and an `Arc` too.
    #[test]
    fn default_write_lines_goes_line_by_line() {
        let sink = Arc::new(Calls::default());
        let boxed: Box<dyn Sink> = Box::new(Arc::clone(&sink));
        assert_eq!(boxed.batch_limit(), 0);
        boxed.write_lines(b"a\nbb\nccc\n").unwrap();
        assert_eq!(*sink.0.lock().unwrap(), [&b"a\n"[..], b"bb\n", b"ccc\n"]);
        let err = boxed.write_lines(b"d\nbad\ne\n").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EIO));
        assert_eq!(sink.0.lock().unwrap().len(), 4);
    }
}
