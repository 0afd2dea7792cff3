//! How a background writer behaves: queue capacity, lossy or lossless, flush on panic.

/// How a background writer behaves.
#[derive(Clone, Debug)]
pub struct BackgroundOptions {
    capacity: usize,
    lossy: bool,
    flush_on_panic: bool,
}

impl Default for BackgroundOptions {
    /// Lossless, 4096 queued lines, flushed by a panic hook.
    fn default() -> Self {
        BackgroundOptions {
            capacity: 4096,
            lossy: false,
            flush_on_panic: true,
        }
    }
}

impl BackgroundOptions {
    /// The defaults: lossless, 4096 queued lines, flushed by a panic hook.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many messages may wait in the queue (at least 1): lines for a
    /// [`BackgroundSink`](super::BackgroundSink); for the deferred writer, the records of one `tracing` call
    /// (usually one) count as one.
    pub fn with_capacity(mut self, lines: usize) -> Self {
        self.capacity = lines.max(1);
        self
    }

    /// Drop lines instead of waiting when the queue is full; the drops are counted and
    /// reported (see the module documentation).
    pub fn with_lossy(mut self, lossy: bool) -> Self {
        self.lossy = lossy;
        self
    }

    /// Install (once per process) a panic hook that flushes every writer; on by default.
    pub fn with_flush_on_panic(mut self, flush_on_panic: bool) -> Self {
        self.flush_on_panic = flush_on_panic;
        self
    }

    /// The queue length.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether a full queue drops lines.
    pub fn is_lossy(&self) -> bool {
        self.lossy
    }

    /// Whether a panic hook flushes the writers.
    pub fn flush_on_panic(&self) -> bool {
        self.flush_on_panic
    }
}
