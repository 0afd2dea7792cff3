//! The guard that flushes a program's background writers and shuts them down when dropped.

use std::io;
use std::sync::Arc;

use super::queue::Queue;

/// Shuts its writers down when dropped: flush, drop report, stop and join the worker.
/// Lines sent afterwards are written synchronously.
#[must_use = "dropping the guard shuts the background writer down at once"]
#[derive(Default)]
pub struct BackgroundGuard {
    writers: Vec<Arc<Queue>>,
}

impl std::fmt::Debug for BackgroundGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackgroundGuard")
            .field("writers", &self.writers.len())
            .finish()
    }
}

impl BackgroundGuard {
    /// A guard over no writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// A guard over one queue.
    pub(crate) fn of(queue: Arc<Queue>) -> Self {
        BackgroundGuard {
            writers: vec![queue],
        }
    }

    /// Takes over `other`'s writers.
    pub fn merge(&mut self, mut other: BackgroundGuard) {
        self.writers.append(&mut other.writers);
    }

    /// The number of writers this guard shuts down.
    pub fn len(&self) -> usize {
        self.writers.len()
    }

    /// Whether the guard holds no writer.
    pub fn is_empty(&self) -> bool {
        self.writers.is_empty()
    }

    /// Flushes every writer (see [`Sink::flush`](crate::Sink::flush)); returns the first error.
    pub fn flush(&self) -> io::Result<()> {
        let mut result = Ok(());
        for writer in &self.writers {
            let flushed = writer.flush(true);
            if result.is_ok() {
                result = flushed;
            }
        }
        result
    }

    /// Messages dropped so far by all of this guard's writers (lines of a
    /// [`BackgroundSink`](super::BackgroundSink), records of the deferred writer).
    pub fn dropped_lines(&self) -> u64 {
        self.writers.iter().map(|w| w.dropped()).sum()
    }
}

impl Drop for BackgroundGuard {
    fn drop(&mut self) {
        for writer in &self.writers {
            writer.shutdown();
        }
    }
}
