//! The background writer: a [`Sink`] that hands lines to a worker thread, so the traced
//! thread only formats and enqueues.
//!
//! [`BackgroundSink`] wraps any other sink. The traced thread copies each line into a
//! recycled buffer and sends it over a bounded crossbeam channel; one worker thread per
//! sink writes it with the inner sink's single `write`, then sends the buffer back over
//! a second channel for reuse, so the steady state allocates nothing per line. One
//! channel per sink keeps every thread's lines in the order that thread sent them.
//!
//! * **Lossless by default**: when the queue is full the caller waits. With
//!   [`BackgroundOptions::with_lossy`] a full queue drops the line instead and counts it; the
//!   count is reported in the trace itself as an `error` event (all three formats
//!   render it; the Normal format skips `data`), with the message
//!   `trace2: background writer for '<ENV>' dropped <N> lines`, emitted by the worker
//!   when the writer is flushed through [`Sink::flush`], a [`BackgroundGuard`] or at exit.
//!   The event goes through `tracing`'s *global* default subscriber (the worker thread
//!   has no scoped one); [`BackgroundSink::dropped_lines`] gives the count in any case.
//! * **Flush** ([`Sink::flush`], [`BackgroundGuard::flush`]) returns once every line
//!   sent before the call has been written and the inner sink flushed.
//! * **Shutdown** ([`BackgroundGuard`] drop, [`shutdown_all`], the exit handler, the
//!   last handle dropped): flush, report, stop the worker and join it. Lines sent after
//!   that are written synchronously on the caller's thread, still one `write` each.
//! * **Write errors**: the worker stops writing after the first failed write and the
//!   next [`Sink::write_line`] returns that error, so the layer disables the target and
//!   prints git's `unable to write trace` warning one line later than a direct writer.
//!   If no line follows, the worker reports it at the next flush or shutdown: with
//!   [`BackgroundSink::with_dst_debug`], git's warning and an `error` event from the
//!   worker's thread (`thNN:trace2-writer`) for the other targets.
//!
//! # Which exits are covered
//!
//! | how the process ends | lines written? |
//! |---|---|
//! | `main` returns | yes: the C runtime calls `exit`, which runs the `atexit` handler |
//! | `std::process::exit` | yes: the `atexit` handler registered with the first writer |
//! | a panic that unwinds out of `main` | yes: the panic hook flushes, then `exit` runs the handler |
//! | a panic with `panic = "abort"` | yes, flushed by the panic hook (no drop report) |
//! | a panic in another thread | the process goes on; the panic hook flushes anyway |
//! | a [`BackgroundGuard`] dropped | yes, that guard's writers are shut down and joined |
//! | `std::process::abort`, `libc::_exit`, a fatal signal (SIGKILL, SIGSEGV, a SIGTERM with no handler) | **no**: lines still queued are lost |
//! | `exec` without exit | **no** (flush first) |
//!
//! The panic hook is installed once, when the first writer that asks for it is built; it
//! runs the hook that was in place before, then flushes. A hook set later by the
//! program replaces it (call [`flush_all`] from that hook instead). A process made by
//! `fork` without `exec` has no worker thread: its exit handler leaves the writers alone.
//! Exit waits for the worker like a direct writer would wait for its `write`: a
//! destination that blocks forever (a pipe nobody reads) blocks the exit too.

use std::cell::Cell;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once, PoisonError, Weak};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, TrySendError};

use crate::sink::Sink;

/// Buffers that grew beyond this are freed rather than kept for reuse, so one huge
/// line does not pin its memory for the life of the process.
const MAX_POOLED_CAPACITY: usize = 64 * 1024;
/// Capacity of a fresh line buffer; most Trace2 lines fit.
const FRESH_CAPACITY: usize = 512;

/// How a [`BackgroundSink`] behaves.
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

    /// How many lines may wait in the queue (at least 1).
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

    /// The queue length in lines.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether a full queue drops lines.
    pub fn is_lossy(&self) -> bool {
        self.lossy
    }
}

/// What travels to the worker.
enum Msg {
    Line(Vec<u8>),
    /// Flush the inner sink, report drops if asked, then answer.
    Flush {
        report: bool,
        done: Sender<io::Result<()>>,
    },
    Shutdown,
}

/// State the worker shares with the senders.
#[derive(Default)]
struct Status {
    /// Set after the first failed write; the worker writes nothing more.
    failed: AtomicBool,
    /// That write's error, until someone reports it.
    error: Mutex<Failure>,
    dropped: AtomicU64,
    reported: AtomicU64,
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
        if !self.failed.load(Ordering::Acquire) {
            return None;
        }
        let mut failure = self.error.lock().unwrap_or_else(PoisonError::into_inner);
        let error = failure.error.take()?;
        failure.reported_by_worker = true;
        Some(error)
    }
}

thread_local! {
    /// Set on worker threads: their own writes (the drop report) bypass every queue,
    /// so a worker never waits on a queue that only workers drain.
    static ON_WORKER: Cell<bool> = const { Cell::new(false) };
}

fn on_worker() -> bool {
    ON_WORKER.try_with(Cell::get).unwrap_or(false)
}

struct Shared {
    name: &'static str,
    lossy: bool,
    tx: Sender<Msg>,
    pool: Receiver<Vec<u8>>,
    inner: Arc<dyn Sink>,
    status: Arc<Status>,
    /// Set by shutdown: lines then go straight to `inner`.
    closed: AtomicBool,
    /// Senders between their `closed` check and the end of their send; shutdown waits
    /// for zero before it queues `Shutdown`, so no line lands behind it.
    in_flight: AtomicUsize,
    /// Held by shutdown until the worker is joined, so a direct write cannot overtake
    /// lines still in the queue.
    closing: Mutex<()>,
    worker: Mutex<Option<JoinHandle<()>>>,
    /// The process that started the worker (a forked child has no worker).
    pid: u32,
}

impl Shared {
    fn write_direct(&self, line: &[u8]) -> io::Result<()> {
        let _closing = self.closing.lock().unwrap_or_else(PoisonError::into_inner);
        if self.status.failed.load(Ordering::Acquire) {
            return self.status.failed_write();
        }
        self.inner.write_line(line)
    }

    fn enqueue(&self, line: &[u8]) -> io::Result<()> {
        let mut buf = self
            .pool
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(FRESH_CAPACITY.max(line.len())));
        buf.clear();
        buf.extend_from_slice(line);
        let msg = Msg::Line(buf);
        let unsent = if self.lossy {
            match self.tx.try_send(msg) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Full(_)) => {
                    // The buffer is freed here; the pool refills from the worker.
                    self.status.dropped.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                Err(TrySendError::Disconnected(msg)) => msg,
            }
        } else {
            match self.tx.send(msg) {
                Ok(()) => return Ok(()),
                Err(err) => err.into_inner(),
            }
        };
        // The worker is gone (it could not start or it died): write here instead.
        match unsent {
            Msg::Line(buf) => self.inner.write_line(&buf),
            _ => Ok(()),
        }
    }

    /// Sends a flush request and waits for its answer.
    fn flush(&self, report: bool) -> io::Result<()> {
        if on_worker() {
            return self.inner.flush();
        }
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        if self.closed.load(Ordering::SeqCst) {
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            let _closing = self.closing.lock().unwrap_or_else(PoisonError::into_inner);
            return self.inner.flush();
        }
        let (done, answer) = crossbeam_channel::bounded(1);
        let sent = self.tx.send(Msg::Flush { report, done });
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        if sent.is_err() {
            return self.inner.flush();
        }
        // No answer means the worker died; there is nothing left to wait for.
        answer.recv().unwrap_or(Ok(()))
    }

    /// Flushes, reports drops, stops the worker and joins it. Idempotent.
    fn shutdown(&self) {
        if on_worker() || self.pid != std::process::id() {
            return;
        }
        let Some(handle) = self
            .worker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return;
        };
        let _ = self.flush(true);
        let _closing = self.closing.lock().unwrap_or_else(PoisonError::into_inner);
        self.closed.store(true, Ordering::SeqCst);
        while self.in_flight.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
        let _ = self.tx.send(Msg::Shutdown);
        let _ = handle.join();
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A [`Sink`] that writes through a worker thread. See the module documentation.
pub struct BackgroundSink {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for BackgroundSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackgroundSink")
            .field("name", &self.shared.name)
            .field("lossy", &self.shared.lossy)
            .field("dropped", &self.dropped_lines())
            .finish_non_exhaustive()
    }
}

impl BackgroundSink {
    /// Starts a worker writing to `inner`. `name` is the target's environment variable
    /// (`GIT_TRACE2_EVENT`), used in the drop report. If the thread cannot be started,
    /// the sink writes synchronously instead.
    pub fn new(inner: impl Sink, name: &'static str, options: &BackgroundOptions) -> Self {
        let inner: Arc<dyn Sink> = Arc::new(inner);
        let (tx, rx) = crossbeam_channel::bounded(options.capacity);
        // Room for every queued buffer plus the ones in the senders' hands.
        let (pool_tx, pool) = crossbeam_channel::bounded(options.capacity + 64);
        let status = Arc::new(Status::default());
        let worker = {
            let inner = Arc::clone(&inner);
            let status = Arc::clone(&status);
            std::thread::Builder::new()
                .name("trace2-writer".to_owned())
                .spawn(move || run_worker(rx, pool_tx, inner, status, name))
                .ok()
        };
        let shared = Arc::new(Shared {
            name,
            lossy: options.lossy,
            tx,
            pool,
            inner,
            status,
            closed: AtomicBool::new(worker.is_none()),
            in_flight: AtomicUsize::new(0),
            closing: Mutex::new(()),
            worker: Mutex::new(worker),
            pid: std::process::id(),
        });
        register(&shared, options.flush_on_panic);
        BackgroundSink { shared }
    }

    /// Whether a write failure the worker has to report itself (see the module
    /// documentation) prints git's warning and an `error` event; the target's
    /// `GIT_TRACE2_DST_DEBUG` setting. Off by default.
    pub fn with_dst_debug(self, dst_debug: bool) -> Self {
        self.shared
            .status
            .dst_debug
            .store(dst_debug, Ordering::Relaxed);
        self
    }

    /// A guard that shuts this writer down (flush, report, join) when dropped.
    pub fn guard(&self) -> BackgroundGuard {
        BackgroundGuard {
            writers: vec![Arc::clone(&self.shared)],
        }
    }

    /// Lines dropped so far because the queue was full (lossy mode only).
    pub fn dropped_lines(&self) -> u64 {
        self.shared.status.dropped.load(Ordering::Relaxed)
    }

    /// Whether the writer is lossy.
    pub fn is_lossy(&self) -> bool {
        self.shared.lossy
    }
}

impl Sink for BackgroundSink {
    fn write_line(&self, line: &[u8]) -> io::Result<()> {
        let s = &*self.shared;
        if s.status.failed.load(Ordering::Acquire) {
            return s.status.failed_write();
        }
        if on_worker() {
            return s.inner.write_line(line);
        }
        s.in_flight.fetch_add(1, Ordering::SeqCst);
        if s.closed.load(Ordering::SeqCst) {
            s.in_flight.fetch_sub(1, Ordering::SeqCst);
            return s.write_direct(line);
        }
        let result = s.enqueue(line);
        s.in_flight.fetch_sub(1, Ordering::SeqCst);
        result
    }

    /// Waits until every line sent before this call is written, reports drops, and
    /// flushes the inner sink.
    fn flush(&self) -> io::Result<()> {
        self.shared.flush(true)
    }
}

/// Shuts its writers down when dropped: flush, drop report, stop and join the worker.
/// Lines sent afterwards are written synchronously.
#[must_use = "dropping the guard shuts the background writer down at once"]
#[derive(Default)]
pub struct BackgroundGuard {
    writers: Vec<Arc<Shared>>,
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

    /// Flushes every writer (see [`Sink::flush`]); returns the first error.
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

    /// Lines dropped so far by all of this guard's writers.
    pub fn dropped_lines(&self) -> u64 {
        self.writers
            .iter()
            .map(|w| w.status.dropped.load(Ordering::Relaxed))
            .sum()
    }
}

impl Drop for BackgroundGuard {
    fn drop(&mut self) {
        for writer in &self.writers {
            writer.shutdown();
        }
    }
}

fn run_worker(
    rx: Receiver<Msg>,
    pool: Sender<Vec<u8>>,
    inner: Arc<dyn Sink>,
    status: Arc<Status>,
    name: &'static str,
) {
    let _ = ON_WORKER.try_with(|w| w.set(true));
    for msg in rx.iter() {
        match msg {
            Msg::Line(mut buf) => {
                if !status.failed.load(Ordering::Acquire)
                    && let Err(err) = inner.write_line(&buf)
                {
                    status.fail(err);
                }
                if buf.capacity() <= MAX_POOLED_CAPACITY {
                    buf.clear();
                    let _ = pool.try_send(buf);
                }
            }
            Msg::Flush { report, done } => {
                if report {
                    report_failure(&status, name);
                    report_drops(&status, name);
                }
                let _ = done.send(inner.flush());
            }
            Msg::Shutdown => break,
        }
    }
}

/// Emits the drop report for the lines dropped since the last one. It runs on the
/// worker, whose thread-locals are intact even while `exit` runs.
fn report_drops(status: &Status, name: &str) {
    let dropped = status.dropped.load(Ordering::Relaxed);
    let reported = status.reported.swap(dropped, Ordering::Relaxed);
    if dropped > reported && !status.failed.load(Ordering::Acquire) {
        let message = drop_report_message(name, dropped - reported);
        crate::api::error(&message, DROP_REPORT_FMT);
    }
}

/// Reports a failed write that no `write_line` caller has returned to the layer (the
/// last lines were all queued before the write failed), as the layer would have: git's
/// warning and an `error` event for the other targets, when destination debugging is on.
fn report_failure(status: &Status, name: &str) {
    let Some(err) = status.take_unreported() else {
        return;
    };
    if status.dst_debug.load(Ordering::Relaxed) {
        let message = crate::dst::write_failed_message(name, &err);
        crate::dst::warning(&message);
        crate::api::error(&message, "unable to write trace to '%s': %s");
    }
}

/// The `fmt` of the drop report's `error` event.
pub const DROP_REPORT_FMT: &str = "trace2: background writer for '%s' dropped %lu lines";

/// The `msg` of the drop report's `error` event for `count` lines of target `name`.
pub fn drop_report_message(name: &str, count: u64) -> String {
    format!("trace2: background writer for '{name}' dropped {count} lines")
}

/// Every writer of the process, for the exit handler and the panic hook.
static REGISTRY: Mutex<Vec<Weak<Shared>>> = Mutex::new(Vec::new());

fn register(shared: &Arc<Shared>, flush_on_panic: bool) {
    {
        let mut all = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(shared));
    }
    static AT_EXIT: Once = Once::new();
    AT_EXIT.call_once(|| {
        // SAFETY: registers a function with no captured state that never unwinds.
        // A failure (no room left) only means exits are not covered; nothing to do.
        unsafe { libc::atexit(at_exit) };
    });
    if flush_on_panic && !std::thread::panicking() {
        static PANIC_HOOK: Once = Once::new();
        PANIC_HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                previous(info);
                flush_quietly();
            }));
        });
    }
}

fn live_writers() -> Vec<Arc<Shared>> {
    REGISTRY
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter_map(Weak::upgrade)
        .collect()
}

extern "C" fn at_exit() {
    // Unwinding out of an `extern "C"` function would abort: contain it.
    let _ = std::panic::catch_unwind(shutdown_all);
}

/// Flushes without a drop report: used from the panic hook, where the panicking
/// thread may be inside the layer and the report would be lost anyway.
fn flush_quietly() {
    if on_worker() {
        return;
    }
    for writer in live_writers() {
        if writer.pid == std::process::id() {
            let _ = writer.flush(false);
        }
    }
}

/// Flushes every background writer of the process (with drop reports); for a panic
/// hook of the program's own, or before `exec`.
pub fn flush_all() {
    for writer in live_writers() {
        if writer.pid == std::process::id() {
            let _ = writer.flush(true);
        }
    }
}

/// Shuts every background writer of the process down, as the exit handler does.
pub fn shutdown_all() {
    for writer in live_writers() {
        writer.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::MemorySink;
    use std::sync::mpsc;
    use std::time::Duration;

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
        while !sink.shared.status.failed.load(Ordering::Acquire) {
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
        assert!(sink.shared.status.take_unreported().is_none());
    }

    #[test]
    fn direct_write_after_shutdown_fails_like_the_inner_sink() {
        let sink = BackgroundSink::new(Failing, "T", &BackgroundOptions::new());
        drop(sink.guard());
        let err = sink.write_line(b"y\n").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EPIPE));
    }

    #[test]
    fn buffers_are_recycled() {
        let out = MemorySink::new();
        let sink = BackgroundSink::new(out.clone(), "T", &BackgroundOptions::new());
        for _ in 0..10 {
            sink.write_line(b"abc\n").unwrap();
            sink.flush().unwrap();
        }
        // After each flush the one buffer in use is back in the pool.
        assert_eq!(sink.shared.pool.len(), 1);
        let big = vec![b'x'; MAX_POOLED_CAPACITY + 1];
        sink.write_line(&big).unwrap();
        sink.flush().unwrap();
        assert_eq!(sink.shared.pool.len(), 0);
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
