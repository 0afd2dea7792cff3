//! [`BackgroundSink`]: a single sink whose already formatted lines a worker writes.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::queue::{Delivery, Drain, Queue, for_each_message};
use super::{BackgroundGuard, BackgroundOptions, DROP_REPORT_FMT, drop_report_message};
use tracing_trace2_dst::Sink;

/// The failure state of a [`BackgroundSink`], shared by its senders and its worker.
#[derive(Default)]
struct Status {
    /// Set after the first failed write; the worker writes nothing more.
    failed: AtomicBool,
    /// That write's error, until someone reports it.
    error: Mutex<Failure>,
    /// Print git's warning and an `error` event when the worker reports a failure.
    dst_debug: AtomicBool,
}

#[derive(Default)]
struct Failure {
    error: Option<io::Error>,
    /// The worker reported the failure itself: later lines are dropped silently.
    reported_by_worker: bool,
}

impl Status {
    fn fail(&self, err: io::Error) {
        self.error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .error = Some(err);
        self.failed.store(true, Ordering::Release);
    }

    fn has_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// What `write_line` returns once the worker has failed: the error the first time
    /// (the layer then disables the target and reports it), `Ok` when the worker has
    /// already reported it.
    fn failed_write(&self) -> io::Result<()> {
        let mut failure = self.error.lock().unwrap_or_else(PoisonError::into_inner);
        if failure.reported_by_worker {
            return Ok(());
        }
        Err(failure
            .error
            .take()
            .unwrap_or_else(|| io::Error::other("the background writer's destination failed")))
    }

    /// Takes a failure that no caller has seen yet, for the worker to report.
    fn take_unreported(&self) -> Option<io::Error> {
        if !self.has_failed() {
            return None;
        }
        let mut failure = self.error.lock().unwrap_or_else(PoisonError::into_inner);
        let error = failure.error.take()?;
        failure.reported_by_worker = true;
        Some(error)
    }
}

/// The worker side of a [`BackgroundSink`]: each message is one line for `inner`.
struct SinkDrain {
    name: &'static str,
    inner: Box<dyn Sink>,
    status: Status,
    /// `inner`'s [`Sink::batch_limit`]: 0 writes each line as it comes.
    batch_limit: usize,
    /// Lines gathered for one `write_lines` (only the worker touches it).
    batch: Mutex<Vec<u8>>,
}

impl SinkDrain {
    fn write_batch(&self, batch: &mut Vec<u8>) {
        if !batch.is_empty()
            && !self.status.has_failed()
            && let Err(err) = self.inner.write_lines(batch)
        {
            self.status.fail(err);
        }
        batch.clear();
    }
}

impl SinkDrain {
    /// Writes `line` at once, or adds it to `batch` (writing the batch first if the
    /// line would take it past the limit); nothing after a failed write.
    fn take_line(&self, line: &[u8], batch: &mut Vec<u8>) {
        if self.status.has_failed() {
            return;
        }
        if self.batch_limit == 0 {
            if let Err(err) = self.inner.write_line(line) {
                self.status.fail(err);
            }
            return;
        }
        if batch.len() + line.len() > self.batch_limit {
            self.write_batch(batch);
        }
        // A line longer than the limit goes alone, whole.
        batch.extend_from_slice(line);
    }
}

impl Drain for SinkDrain {
    fn handle(&self, line: &[u8]) {
        self.take_line(
            line,
            &mut self.batch.lock().unwrap_or_else(PoisonError::into_inner),
        );
    }

    fn handle_all(&self, lines: &[u8]) {
        // One lock for all the lines the worker took at once.
        let mut batch = self.batch.lock().unwrap_or_else(PoisonError::into_inner);
        for_each_message(lines, |line| self.take_line(line, &mut batch));
    }

    fn end_batch(&self) {
        self.write_batch(&mut self.batch.lock().unwrap_or_else(PoisonError::into_inner));
    }

    fn handle_here(&self, line: &[u8]) -> io::Result<()> {
        if self.status.has_failed() {
            return self.status.failed_write();
        }
        self.inner.write_line(line)
    }

    fn handle_in_fork(&self, line: &[u8]) -> io::Result<()> {
        // No lock on this path unless the worker failed (then it reports the error).
        self.handle_here(line)
    }

    fn flush(&self) -> io::Result<()> {
        self.inner.flush()
    }

    fn report(&self, dropped: u64) {
        self.report_failure();
        if dropped > 0 && !self.status.has_failed() {
            let message = drop_report_message(self.name, dropped);
            super::report_failure(&message, DROP_REPORT_FMT);
        }
    }
}

impl SinkDrain {
    /// Reports a failed write that no `write_line` caller has returned to the layer
    /// (the last lines were all queued before the write failed), as the layer would
    /// have: git's warning and an `error` event for the other targets, when
    /// destination debugging is on.
    fn report_failure(&self) {
        let Some(err) = self.status.take_unreported() else {
            return;
        };
        if self.status.dst_debug.load(Ordering::Relaxed) {
            let message = tracing_trace2_dst::write_failed_message(self.name, &err);
            tracing_trace2_dst::warning(&message);
            super::report_failure(&message, "unable to write trace to '%s': %s");
        }
    }
}

/// A [`Sink`] that writes already formatted lines through a worker thread. See the
/// module documentation.
pub struct BackgroundSink {
    queue: Arc<Queue>,
    drain: Arc<SinkDrain>,
}

impl std::fmt::Debug for BackgroundSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackgroundSink")
            .field("name", &self.drain.name)
            .field("lossy", &self.queue.is_lossy())
            .field("dropped", &self.dropped_lines())
            .finish_non_exhaustive()
    }
}

impl BackgroundSink {
    /// Starts a worker writing to `inner`. `name` is the target's environment variable
    /// (`GIT_TRACE2_EVENT`), used in the drop report. If the thread cannot be started,
    /// the sink writes synchronously instead.
    pub fn new(inner: impl Sink, name: &'static str, options: &BackgroundOptions) -> Self {
        let drain = Arc::new(SinkDrain {
            name,
            batch_limit: inner.batch_limit(),
            inner: Box::new(inner),
            status: Status::default(),
            batch: Mutex::new(Vec::new()),
        });
        let queue = Queue::start(Arc::clone(&drain) as Arc<dyn Drain>, options);
        BackgroundSink { queue, drain }
    }

    /// Whether a write failure the worker has to report itself (see the module
    /// documentation) prints git's warning and an `error` event; the target's
    /// `GIT_TRACE2_DST_DEBUG` setting. Off by default.
    pub fn with_dst_debug(self, dst_debug: bool) -> Self {
        self.drain
            .status
            .dst_debug
            .store(dst_debug, Ordering::Relaxed);
        self
    }

    /// A guard that shuts this writer down (flush, report, join) when dropped.
    pub fn guard(&self) -> BackgroundGuard {
        BackgroundGuard::of(Arc::clone(&self.queue))
    }

    /// Lines dropped so far because the queue was full (lossy mode only).
    pub fn dropped_lines(&self) -> u64 {
        self.queue.dropped()
    }

    /// Whether the writer is lossy.
    pub fn is_lossy(&self) -> bool {
        self.queue.is_lossy()
    }
}

impl Sink for BackgroundSink {
    fn write_line(&self, line: &[u8]) -> io::Result<()> {
        if self.drain.status.has_failed() {
            return self.drain.status.failed_write();
        }
        // Formatted lines do not say what they are: a lossy sink may drop any of them.
        self.queue.send(line, 1, Delivery::MayDrop)
    }

    /// Waits until every line sent before this call is written, reports drops, and
    /// flushes the inner sink.
    fn flush(&self) -> io::Result<()> {
        self.queue.flush(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;
    use tracing_trace2_dst::MemorySink;

    /// A sink whose writes wait for a go-ahead, to fill the queue on purpose.
    struct Gate {
        started: Mutex<mpsc::Sender<()>>,
        go: Mutex<mpsc::Receiver<()>>,
        out: MemorySink,
    }

    impl Sink for Gate {
        fn write_line(&self, line: &[u8]) -> io::Result<()> {
            let _ = self.started.lock().unwrap().send(());
            let _ = self.go.lock().unwrap().recv();
            self.out.write_line(line)
        }
    }

    fn gate() -> (Gate, mpsc::Receiver<()>, mpsc::Sender<()>, MemorySink) {
        let (started_tx, started) = mpsc::channel();
        let (go, go_rx) = mpsc::channel();
        let out = MemorySink::new();
        let g = Gate {
            started: Mutex::new(started_tx),
            go: Mutex::new(go_rx),
            out: out.clone(),
        };
        (g, started, go, out)
    }

    struct Failing;
    impl Sink for Failing {
        fn write_line(&self, _line: &[u8]) -> io::Result<()> {
            Err(io::Error::from_raw_os_error(libc::EPIPE))
        }
    }

    #[test]
    fn flush_waits_for_every_line() {
        let out = MemorySink::new();
        let sink = BackgroundSink::new(out.clone(), "T", &BackgroundOptions::new());
        let mut want = Vec::new();
        for i in 0..1000 {
            let line = format!("line {i}\n");
            sink.write_line(line.as_bytes()).unwrap();
            want.extend_from_slice(line.as_bytes());
        }
        sink.flush().unwrap();
        assert_eq!(out.contents(), want);
    }

    #[test]
    fn threads_keep_their_order() {
        let out = MemorySink::new();
        let sink = Arc::new(BackgroundSink::new(
            out.clone(),
            "T",
            &BackgroundOptions::new().with_capacity(8),
        ));
        let handles: Vec<_> = (0..3)
            .map(|t| {
                let sink = Arc::clone(&sink);
                std::thread::spawn(move || {
                    for i in 0..5000 {
                        sink.write_line(format!("{t} {i}\n").as_bytes()).unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        drop(sink.guard());
        let text = out.to_string_lossy();
        let mut next = [0u32; 3];
        for line in text.lines() {
            let (t, i) = line.split_once(' ').unwrap();
            let t: usize = t.parse().unwrap();
            assert_eq!(i.parse::<u32>().unwrap(), next[t], "{line}");
            next[t] += 1;
        }
        assert_eq!(next, [5000; 3]);
    }

    #[test]
    fn lossless_caller_waits_when_full() {
        let (g, started, go, out) = gate();
        let sink = Arc::new(BackgroundSink::new(
            g,
            "T",
            &BackgroundOptions::new().with_capacity(1),
        ));
        sink.write_line(b"a\n").unwrap();
        started.recv().unwrap(); // the worker holds "a"
        sink.write_line(b"b\n").unwrap(); // queued
        let (wrote, wrote_rx) = mpsc::channel();
        let writer = {
            let sink = Arc::clone(&sink);
            std::thread::spawn(move || {
                sink.write_line(b"c\n").unwrap();
                wrote.send(()).unwrap();
            })
        };
        // The queue is full: the third write must still be waiting.
        assert!(wrote_rx.recv_timeout(Duration::from_millis(100)).is_err());
        for _ in 0..3 {
            go.send(()).unwrap();
        }
        wrote_rx.recv().unwrap();
        writer.join().unwrap();
        sink.flush().unwrap();
        assert_eq!(out.to_string_lossy(), "a\nb\nc\n");
        assert_eq!(sink.dropped_lines(), 0);
    }

    #[test]
    fn lossy_counts_drops() {
        let (g, started, go, out) = gate();
        let sink = BackgroundSink::new(
            g,
            "T",
            &BackgroundOptions::new().with_capacity(2).with_lossy(true),
        );
        assert!(sink.is_lossy());
        sink.write_line(b"0\n").unwrap();
        started.recv().unwrap();
        for i in 1..10 {
            sink.write_line(format!("{i}\n").as_bytes()).unwrap();
        }
        assert_eq!(sink.dropped_lines(), 7);
        for _ in 0..3 {
            go.send(()).unwrap();
        }
        let guard = sink.guard();
        assert_eq!(guard.dropped_lines(), 7);
        drop(guard);
        assert_eq!(out.to_string_lossy(), "0\n1\n2\n");
    }

    #[test]
    fn write_error_reaches_the_next_caller_once() {
        let (failed_tx, failed) = mpsc::channel();
        struct Signal(Mutex<mpsc::Sender<()>>);
        impl Sink for Signal {
            fn write_line(&self, _line: &[u8]) -> io::Result<()> {
                let _ = self.0.lock().unwrap().send(());
                Err(io::Error::from_raw_os_error(libc::EPIPE))
            }
        }
        let sink = BackgroundSink::new(
            Signal(Mutex::new(failed_tx)),
            "T",
            &BackgroundOptions::new(),
        );
        sink.write_line(b"lost\n").unwrap();
        failed.recv().unwrap();
        while !sink.drain.status.has_failed() {
            std::thread::yield_now();
        }
        let err = sink.write_line(b"next\n").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EPIPE));
        // Still an error afterwards (the layer disables the target on the first one).
        assert!(sink.write_line(b"again\n").is_err());
    }

    #[test]
    fn after_shutdown_lines_are_written_directly() {
        let out = MemorySink::new();
        let sink = BackgroundSink::new(out.clone(), "T", &BackgroundOptions::new());
        sink.write_line(b"queued\n").unwrap();
        let mut guard = BackgroundGuard::new();
        assert!(guard.is_empty());
        guard.merge(sink.guard());
        assert_eq!(guard.len(), 1);
        drop(guard);
        assert_eq!(out.to_string_lossy(), "queued\n");
        sink.write_line(b"direct\n").unwrap();
        assert_eq!(out.to_string_lossy(), "queued\ndirect\n");
        sink.flush().unwrap();
        // A second shutdown does nothing.
        drop(sink.guard());
    }

    #[test]
    fn failure_reported_by_the_worker_is_not_returned_again() {
        let sink = BackgroundSink::new(Failing, "T", &BackgroundOptions::new());
        sink.write_line(b"lost\n").unwrap();
        // The flush reports the failure (silently: no dst-debug) ...
        sink.flush().unwrap();
        // ... so the layer must not report it a second time.
        sink.write_line(b"dropped\n").unwrap();
        assert!(sink.drain.status.take_unreported().is_none());
    }

    #[test]
    fn direct_write_after_shutdown_fails_like_the_inner_sink() {
        let sink = BackgroundSink::new(Failing, "T", &BackgroundOptions::new());
        drop(sink.guard());
        let err = sink.write_line(b"y\n").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EPIPE));
    }

    #[test]
    fn lines_wait_in_the_queue_until_the_worker_looks() {
        let (g, started, go, out) = gate();
        let sink = BackgroundSink::new(g, "T", &BackgroundOptions::new());
        sink.write_line(b"held\n").unwrap();
        started.recv().unwrap();
        // The worker is inside the first write: these wait, in order, in one batch.
        for line in [&b"a\n"[..], b"b\n", b"c\n"] {
            sink.write_line(line).unwrap();
        }
        assert_eq!(sink.queue.queued(), 3);
        for _ in 0..4 {
            go.send(()).unwrap();
        }
        sink.flush().unwrap();
        assert_eq!(sink.queue.queued(), 0);
        assert_eq!(out.to_string_lossy(), "held\na\nb\nc\n");
    }

    /// Takes batches of up to `limit` bytes, keeps each call; the first call waits for
    /// a go-ahead, the call numbered `fail_at` fails.
    struct Batching {
        limit: usize,
        calls: Calls,
        started: Mutex<mpsc::Sender<()>>,
        go: Mutex<mpsc::Receiver<()>>,
        fail_at: Option<usize>,
    }

    impl Sink for Batching {
        fn write_line(&self, line: &[u8]) -> io::Result<()> {
            self.write_lines(line)
        }
        fn batch_limit(&self) -> usize {
            self.limit
        }
        fn write_lines(&self, lines: &[u8]) -> io::Result<()> {
            let mut calls = self.calls.lock().unwrap();
            if calls.is_empty() {
                let _ = self.started.lock().unwrap().send(());
                let _ = self.go.lock().unwrap().recv();
            }
            if self.fail_at == Some(calls.len()) {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            calls.push(lines.to_vec());
            Ok(())
        }
    }

    type Calls = Arc<Mutex<Vec<Vec<u8>>>>;

    fn batching(
        limit: usize,
        fail_at: Option<usize>,
    ) -> (BackgroundSink, Calls, mpsc::Receiver<()>, mpsc::Sender<()>) {
        let (started_tx, started) = mpsc::channel();
        let (go, go_rx) = mpsc::channel();
        let calls = Arc::new(Mutex::new(Vec::new()));
        let inner = Batching {
            limit,
            calls: Arc::clone(&calls),
            started: Mutex::new(started_tx),
            go: Mutex::new(go_rx),
            fail_at,
        };
        let options = BackgroundOptions::new().with_flush_on_panic(false);
        (
            BackgroundSink::new(inner, "T", &options),
            calls,
            started,
            go,
        )
    }

    #[test]
    fn queued_lines_are_written_in_batches_of_whole_lines() {
        const LIMIT: usize = 100;
        let (sink, calls, started, go) = batching(LIMIT, None);
        sink.write_line(b"held\n").unwrap();
        started.recv().unwrap();
        let mut want = b"held\n".to_vec();
        for i in 0..200 {
            let line = format!("line {i}\n");
            sink.write_line(line.as_bytes()).unwrap();
            want.extend_from_slice(line.as_bytes());
        }
        // One line longer than the limit goes alone.
        let long = [&[b'x'; 150][..], b"\n"].concat();
        sink.write_line(&long).unwrap();
        want.extend_from_slice(&long);
        go.send(()).unwrap();
        sink.flush().unwrap();
        let calls = calls.lock().unwrap();
        assert_eq!(calls.concat(), want);
        for call in calls.iter() {
            assert!(call.ends_with(b"\n"), "a torn batch");
            assert!(call.len() <= LIMIT || call == &long, "{} bytes", call.len());
        }
        // 9 bytes a line: 11 lines per write.
        assert!(calls.len() < 30, "{} writes for 202 lines", calls.len());
    }

    #[test]
    fn a_failed_batch_reaches_the_next_caller() {
        let (sink, calls, started, go) = batching(100, Some(1));
        sink.write_line(b"held\n").unwrap();
        started.recv().unwrap();
        for i in 0..50 {
            sink.write_line(format!("line {i}\n").as_bytes()).unwrap();
        }
        go.send(()).unwrap();
        sink.flush().unwrap();
        // Reported by the flush (no dst-debug: silently); nothing written after.
        assert!(sink.write_line(b"next\n").is_ok());
        sink.flush().unwrap();
        assert_eq!(*calls.lock().unwrap(), [b"held\n".to_vec()]);
    }

    #[test]
    fn drop_report_text() {
        assert_eq!(
            drop_report_message("GIT_TRACE2_EVENT", 42),
            "trace2: background writer for 'GIT_TRACE2_EVENT' dropped 42 lines"
        );
        let options = BackgroundOptions::new().with_capacity(0);
        assert_eq!(options.capacity(), 1);
        assert!(!options.is_lossy());
    }
}
