//! What every background writer shares: a bounded queue of messages drained by one
//! worker thread, with flush, shutdown, drop accounting, and the exit handler and panic
//! hook that flush every queue of the process.
//!
//! What a message means is up to its [`Drain`]: a formatted line for
//! [`BackgroundSink`](super::BackgroundSink), the encoded records of one `tracing` call
//! for the deferred writer (`crate::background::replay`). After the messages of each batch
//! the worker calls [`Drain::end_batch`], where a drain writes the lines it gathered for a
//! file: nothing waits for more messages once the queue has been drained.
//!
//! # Why one buffer under a lock
//!
//! Senders append each message (length-prefixed, unless the drain's messages say their
//! own length: [`Drain::frames_itself`]) to one pending buffer under a mutex; the worker
//! swaps the whole buffer for an empty one and handles the batch with one call
//! ([`Drain::handle_all`]), so a drain takes its locks once per batch. A sender
//! thus pays an uncontended lock and a copy, and nothing crosses to the other core per
//! message: a channel with a slot per message (measured first) spent more on moving its
//! slots, buffers and wake-ups between cores than the traced thread spent encoding.
//! Appending under one lock also keeps the messages of all threads in the order they
//! were sent, so the worker writes them in that order (`version` first, each thread's
//! lines in order, causality across threads kept).
//!
//! The worker does not make senders wake it for every message: while messages keep
//! coming it looks again every [`POLL`] (at once after a batch of [`FULL_BATCH`] or
//! more), so that messages gather into batches; after [`IDLE_POLLS`] empty looks it
//! sleeps until the next sender wakes it. A full queue, a flush and a shutdown wake it
//! at once.
//!
//! After shutdown (or when the worker could not start or died, or when a worker itself
//! sends), messages are handled on the calling thread, under a lock that keeps them from
//! overtaking messages still queued.
//!
//! A lossy queue drops only what a sender marks as droppable: a message marked
//! [`Delivery::Keep`] (the lifecycle lines) is queued even when the queue is full, so a
//! lossy writer neither blocks its sender nor loses `exit` or `atexit`.
//!
//! A process made by `fork` without `exec` inherits the queue but not its worker (only
//! the forking thread survives a fork). A `pthread_atfork` handler counts forks, and
//! the forking thread holds the list of queues across each fork (so the child's exit
//! handler and new queues find it unlocked); a queue started before the last fork
//! handles every message on the sending thread, without touching a lock another thread of the parent may have held when it forked, and leaves
//! the parent's queued messages to the parent. On Windows, `ExitProcess` ends every
//! other thread (the workers too) before the exit hooks run: the lifecycle then calls
//! [`other_threads_gone`] and the queues behave as in a forked child.

use std::cell::Cell;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Once, PoisonError, TryLockError, Weak};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

use super::options::BackgroundOptions;
use tracing_trace2_record::text::Appender;

/// How long the worker waits before looking again while messages keep coming: the most
/// a line waits in the queue.
pub(crate) const POLL: Duration = Duration::from_millis(1);
/// Empty looks after which the worker sleeps until a sender wakes it.
const IDLE_POLLS: u32 = 20;
/// A batch at least this long means senders keep the worker busy: no pause before
/// the next one.
const FULL_BATCH: usize = 256;
/// A batch buffer that grew beyond this (a burst of huge lines) is not kept for reuse.
const MAX_KEPT_CAPACITY: usize = 8 << 20;

/// What a queue's messages mean: how the worker handles them.
pub(crate) trait Drain: Send + Sync + 'static {
    /// Handles one message on the worker thread; it may keep what it made (lines for a
    /// file) until [`end_batch`](Drain::end_batch).
    fn handle(&self, msg: &[u8]);

    /// Handles every message of `batch` in order, as [`handle`](Drain::handle) would
    /// one by one; a drain with work to do once per batch rather than per message (a
    /// lock, a mark) overrides it. The messages are back to back, each behind its
    /// `len:u32`, or without it when the drain [frames its messages
    /// itself](Drain::frames_itself).
    fn handle_all(&self, batch: &[u8]) {
        for_each_message(batch, |msg| self.handle(msg));
    }

    /// Whether a message says its own length (the deferred writer's encoded records
    /// do): the queue then keeps messages back to back without a length prefix, and
    /// [`handle_all`](Drain::handle_all) (which such a drain must override) and
    /// [`handle_in_fork`](Drain::handle_in_fork) may get several at once.
    fn frames_itself(&self) -> bool {
        false
    }

    /// Called on the worker once it has handled every message it took from the queue:
    /// writes out whatever `handle` kept, since no more messages are waiting for now.
    fn end_batch(&self) {}

    /// Handles one message in a forked child, on the sending thread, without taking a
    /// lock that a thread of the parent may have held at the fork.
    fn handle_in_fork(&self, msg: &[u8]) -> io::Result<()>;

    /// Handles one message on the sending thread (after shutdown, or without a worker),
    /// returning what the destination said.
    fn handle_here(&self, msg: &[u8]) -> io::Result<()>;

    /// Flushes the destinations.
    fn flush(&self) -> io::Result<()>;

    /// Reports, on the worker, the weight of the messages dropped since the last report
    /// (0 if none) and whatever else waits to be reported.
    fn report(&self, dropped: u64);
}

/// Whether a lossy queue may drop a message when it is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// Dropped (and counted) when a lossy queue is full.
    MayDrop,
    /// Queued even when a lossy queue is full: a lifecycle line is never dropped.
    Keep,
}

/// Forks this process has been through, counted in each child by a `pthread_atfork`
/// handler: a queue started in an earlier generation has no worker here.
static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);

#[cfg(unix)]
extern "C" fn count_fork_in_child() {
    // Async-signal-safe: one atomic add.
    FORK_GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// Every other thread of the process has ended without cleanup (Windows' `ExitProcess`
/// before its exit hooks): each queue handles what follows on the sending thread, as in
/// a forked child. What the workers had not written yet is lost, as for a killed process.
pub(crate) fn other_threads_gone() {
    // What senders queued and the worker had not taken yet is written here first, where
    // no dead thread holds the locks (a worker's batch in hand is lost).
    let registry = match REGISTRY.try_lock() {
        Ok(all) => Some(all),
        Err(TryLockError::Poisoned(all)) => Some(all.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    };
    let queues: Vec<Arc<Queue>> = registry
        .map(|all| all.iter().filter_map(Weak::upgrade).collect())
        .unwrap_or_default();
    for queue in queues.iter().filter(|q| !q.in_fork()) {
        let queued = match queue.shared.pending.try_lock() {
            Ok(mut p) => {
                p.messages = 0;
                std::mem::take(&mut p.buf)
            }
            Err(_) => continue,
        };
        if queue.shared.prefixed {
            for_each_message(&queued, |msg| {
                let _ = queue.shared.drain.handle_in_fork(msg);
            });
        } else {
            let _ = queue.shared.drain.handle_in_fork(&queued);
        }
    }
    FORK_GENERATION.fetch_add(1, Ordering::Relaxed);
}

fn fork_generation() -> u64 {
    FORK_GENERATION.load(Ordering::Relaxed)
}

held_across_forks! {
    /// Installs, once, the `fork` handlers: the forking thread holds [`REGISTRY`] across
    /// the `fork` (held only to read or change the list, never while a queue's drain or
    /// any other code runs), and the child counts the fork. Without them, a child forked
    /// while another thread of its parent held the list (starting a queue, or the exit
    /// handler or a flush collecting them) would hang at its exit and on its first queue.
    fn watch_forks for REGISTRY: Vec<Weak<Queue>>, then_in_child count_fork_in_child
}

thread_local! {
    /// Set on worker threads: what they send bypasses every queue, so a worker never
    /// waits on a queue that only workers drain.
    static ON_WORKER: Cell<bool> = const { Cell::new(false) };
}

pub(crate) fn on_worker() -> bool {
    ON_WORKER.try_with(Cell::get).unwrap_or(false)
}

/// The messages waiting for the worker, and what senders and worker tell each other.
#[derive(Default)]
struct Mailbox {
    /// `len:u32` + bytes, per message (the bytes alone if the drain frames its own).
    buf: Vec<u8>,
    messages: usize,
    /// A lossless sender waits for room.
    waiting_for_room: bool,
    /// The worker sleeps until woken (no more polling).
    worker_asleep: bool,
    /// Flushes asked for so far; the worker answers each by raising `Flushed::done`.
    flushes: u64,
    /// A flush asked for the drop report.
    report: bool,
    /// Shut down (or the worker is gone): senders handle messages themselves.
    closed: bool,
}

/// Flushes answered so far.
struct Flushed {
    done: u64,
}

/// State shared by the senders and the worker.
struct QueueCore {
    drain: Arc<dyn Drain>,
    /// Each message is queued behind its length (the drain does not frame its own).
    prefixed: bool,
    lossy: bool,
    capacity: usize,
    pending: Mutex<Mailbox>,
    /// Signalled when the worker takes a batch (room for waiting senders).
    room: Condvar,
    flushed: Mutex<Flushed>,
    /// Signalled when a flush is answered.
    answered: Condvar,
    dropped: AtomicU64,
    reported: AtomicU64,
}

impl QueueCore {
    fn pending(&self) -> MutexGuard<'_, Mailbox> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One queue and its worker.
pub(crate) struct Queue {
    shared: Arc<QueueCore>,
    worker: Mutex<Option<JoinHandle<()>>>,
    thread: Option<Thread>,
    /// Held by shutdown until the worker is joined, so a message handled on the
    /// sending thread cannot overtake messages still queued.
    closing: Mutex<()>,
    /// The fork generation that started the worker (a forked child has no worker).
    generation: u64,
}

impl Queue {
    /// Starts a worker draining into `drain`, and registers the queue with the exit
    /// handler (and the panic hook, if the options ask for it). If the thread cannot
    /// be started, every message is handled on its sender's thread.
    pub fn start(drain: Arc<dyn Drain>, options: &BackgroundOptions) -> Arc<Queue> {
        watch_forks();
        let shared = Arc::new(QueueCore {
            prefixed: !drain.frames_itself(),
            drain,
            lossy: options.is_lossy(),
            capacity: options.capacity(),
            pending: Mutex::new(Mailbox::default()),
            room: Condvar::new(),
            flushed: Mutex::new(Flushed { done: 0 }),
            answered: Condvar::new(),
            dropped: AtomicU64::new(0),
            reported: AtomicU64::new(0),
        });
        let worker = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("trace2-writer".to_owned())
                .spawn(move || run_worker(&shared))
                .ok()
        };
        if worker.is_none() {
            shared.pending().closed = true;
        }
        let queue = Arc::new(Queue {
            thread: worker.as_ref().map(|w| w.thread().clone()),
            worker: Mutex::new(worker),
            shared,
            closing: Mutex::new(()),
            generation: fork_generation(),
        });
        register(&queue, options.flush_on_panic());
        queue
    }

    /// Whether this process is a fork of the one that started the worker.
    fn in_fork(&self) -> bool {
        self.generation != fork_generation()
    }

    fn wake(&self) {
        if let Some(thread) = &self.thread {
            thread.unpark();
        }
    }

    /// Queues a copy of `msg`, which counts `weight` in a drop report if a lossy queue
    /// drops it (only if `delivery` allows it). Lossless, a full queue makes the caller
    /// wait.
    pub fn send(&self, msg: &[u8], weight: u64, delivery: Delivery) -> io::Result<()> {
        let s = &*self.shared;
        if self.in_fork() {
            return s.drain.handle_in_fork(msg);
        }
        if on_worker() {
            return s.drain.handle_here(msg);
        }
        let mut p = s.pending();
        loop {
            if p.closed {
                drop(p);
                let _closing = self.closing.lock().unwrap_or_else(PoisonError::into_inner);
                return s.drain.handle_here(msg);
            }
            if p.messages < s.capacity {
                break;
            }
            if s.lossy && delivery == Delivery::Keep {
                // Beyond the capacity: a lossy sender never waits, and this one is kept.
                break;
            }
            if s.lossy {
                s.dropped.fetch_add(weight, Ordering::Relaxed);
                return Ok(());
            }
            p.waiting_for_room = true;
            self.wake();
            p = s.room.wait(p).unwrap_or_else(PoisonError::into_inner);
        }
        // A message longer than 4 GiB cannot be framed; no Trace2 line comes near it.
        let Ok(len) = u32::try_from(msg.len()) else {
            return Ok(());
        };
        if s.prefixed {
            // One test for room and one copy for the prefix and the message.
            Appender::new(&mut p.buf).put_array_then(len.to_le_bytes(), msg);
        } else {
            Appender::new(&mut p.buf).put(msg);
        }
        p.messages += 1;
        let wake = std::mem::take(&mut p.worker_asleep);
        drop(p);
        if wake {
            self.wake();
        }
        Ok(())
    }

    /// Returns once every message sent before the call has been handled and the
    /// destinations flushed; with `report`, the worker reports drops first.
    pub fn flush(&self, report: bool) -> io::Result<()> {
        let s = &*self.shared;
        if on_worker() || self.in_fork() {
            return s.drain.flush();
        }
        let mut p = s.pending();
        if p.closed {
            drop(p);
            let _closing = self.closing.lock().unwrap_or_else(PoisonError::into_inner);
            return s.drain.flush();
        }
        p.flushes += 1;
        p.report |= report;
        let asked = p.flushes;
        drop(p);
        self.wake();
        let mut flushed = s.flushed.lock().unwrap_or_else(PoisonError::into_inner);
        while flushed.done < asked {
            flushed = s
                .answered
                .wait(flushed)
                .unwrap_or_else(PoisonError::into_inner);
        }
        Ok(())
    }

    /// Flushes, reports, stops the worker and joins it. Idempotent.
    pub fn shutdown(&self) {
        if on_worker() || self.in_fork() {
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
        // From here senders handle their messages themselves, once the worker has
        // handled what was queued before (it sees `closed` and stops after that batch).
        self.shared.pending().closed = true;
        self.wake();
        let _ = handle.join();
    }

    /// The weight dropped so far because the queue was full (lossy queues only).
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Whether a full queue drops messages.
    pub fn is_lossy(&self) -> bool {
        self.shared.lossy
    }

    /// Messages waiting for the worker (for tests).
    #[cfg(test)]
    pub fn queued(&self) -> usize {
        self.shared.pending().messages
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Closes the queue when the worker ends, even by a panic of a sink or a formatter:
/// senders then handle their messages themselves and no flush waits forever.
struct WorkerGone<'a>(&'a QueueCore);

impl Drop for WorkerGone<'_> {
    fn drop(&mut self) {
        let mut p = self.0.pending();
        p.closed = true;
        drop(p);
        self.0.room.notify_all();
        self.0
            .flushed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .done = u64::MAX;
        self.0.answered.notify_all();
    }
}

fn run_worker(shared: &QueueCore) {
    let _ = ON_WORKER.try_with(|w| w.set(true));
    let _gone = WorkerGone(shared);
    let mut batch = Vec::new();
    let mut idle = 0;
    loop {
        // Only this thread raises `done` (and `WorkerGone`, after it).
        let answered = shared
            .flushed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .done;
        let (messages, flushes, report, closed) = {
            let mut p = shared.pending();
            if batch.capacity() < p.buf.capacity() {
                // The buffer senders fill next is as roomy as this one: they never grow
                // it (an allocation on the traced thread) once the queue has been full.
                batch.reserve(p.buf.capacity());
            }
            std::mem::swap(&mut batch, &mut p.buf);
            let messages = std::mem::take(&mut p.messages);
            if std::mem::take(&mut p.waiting_for_room) {
                shared.room.notify_all();
            }
            let nothing = messages == 0 && p.flushes == answered && !p.closed;
            // Set under the lock with nothing queued: the next sender wakes us.
            p.worker_asleep = nothing && idle >= IDLE_POLLS;
            (messages, p.flushes, std::mem::take(&mut p.report), p.closed)
        };
        if messages > 0 {
            shared.drain.handle_all(&batch);
            shared.drain.end_batch();
        }
        batch.clear();
        if batch.capacity() > MAX_KEPT_CAPACITY {
            batch = Vec::new();
        }
        if flushes > answered {
            if report {
                let dropped = shared.dropped.load(Ordering::Relaxed);
                let reported = shared.reported.swap(dropped, Ordering::Relaxed);
                shared.drain.report(dropped.saturating_sub(reported));
            }
            let _ = shared.drain.flush();
            shared
                .flushed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .done = flushes;
            shared.answered.notify_all();
        }
        if closed {
            return;
        }
        if messages >= FULL_BATCH || flushes > answered {
            // Senders keep it busy: look again at once.
            idle = 0;
        } else if messages > 0 {
            // Let messages gather: one big batch costs senders less than many small
            // ones (each take moves the lock's cache line to this core and back).
            idle = 0;
            std::thread::park_timeout(POLL);
        } else if idle < IDLE_POLLS {
            idle += 1;
            std::thread::park_timeout(POLL);
        } else {
            // An unpark that came first only makes this return at once.
            std::thread::park();
            idle = 0;
        }
    }
}

/// Each `len:u32` + bytes message of a batch.
pub(crate) fn for_each_message(mut batch: &[u8], mut handle: impl FnMut(&[u8])) {
    while let Some((len, rest)) = batch.split_first_chunk::<4>() {
        let len = u32::from_le_bytes(*len) as usize;
        let Some(msg) = rest.get(..len) else { return };
        handle(msg);
        batch = &rest[len..];
    }
}

/// Every queue of the process, for the exit handler and the panic hook. Held only to
/// read or change the list, and by a thread that forks across its `fork` (see
/// [`watch_forks`]).
static REGISTRY: Mutex<Vec<Weak<Queue>>> = Mutex::new(Vec::new());

/// Locks [`REGISTRY`], once the `fork` handlers that keep it usable in a child are
/// installed.
fn registry() -> MutexGuard<'static, Vec<Weak<Queue>>> {
    watch_forks();
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

fn register(queue: &Arc<Queue>, flush_on_panic: bool) {
    {
        let mut all = registry();
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(queue));
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

fn live_queues() -> Vec<Arc<Queue>> {
    registry()
        .iter()
        .filter_map(Weak::upgrade)
        .filter(|q| !q.in_fork())
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
    for queue in live_queues() {
        let _ = queue.flush(false);
    }
}

/// Flushes every background writer of the process (with drop reports).
pub(crate) fn flush_all() {
    for queue in live_queues() {
        let _ = queue.flush(true);
    }
}

/// Shuts every background writer of the process down, as the exit handler does.
pub(crate) fn shutdown_all() {
    for queue in live_queues() {
        queue.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::time::Instant;

    /// Keeps what the worker and the senders handled.
    #[derive(Default)]
    struct Recorder {
        handled: Mutex<Vec<Vec<u8>>>,
        here: Mutex<Vec<Vec<u8>>>,
        reports: Mutex<Vec<u64>>,
        /// While set, `handle` waits (to fill the queue on purpose) ...
        hold: AtomicBool,
        /// ... and says so here.
        holding: AtomicBool,
    }

    fn wait_for(what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "{what}");
            std::thread::sleep(POLL);
        }
    }

    impl Drain for Recorder {
        fn handle(&self, msg: &[u8]) {
            assert_ne!(msg, b"boom", "told to panic");
            if self.hold.load(Ordering::SeqCst) {
                self.holding.store(true, Ordering::SeqCst);
                wait_for("never released", || !self.hold.load(Ordering::SeqCst));
            }
            self.handled.lock().unwrap().push(msg.to_vec());
        }
        fn handle_here(&self, msg: &[u8]) -> io::Result<()> {
            self.here.lock().unwrap().push(msg.to_vec());
            Ok(())
        }
        fn handle_in_fork(&self, msg: &[u8]) -> io::Result<()> {
            self.handle_here(msg)
        }
        fn flush(&self) -> io::Result<()> {
            Ok(())
        }
        fn report(&self, dropped: u64) {
            self.reports.lock().unwrap().push(dropped);
        }
    }

    fn start(options: BackgroundOptions) -> (Arc<Recorder>, Arc<Queue>) {
        let recorder = Arc::new(Recorder::default());
        let queue = Queue::start(
            Arc::clone(&recorder) as Arc<dyn Drain>,
            &options.with_flush_on_panic(false),
        );
        (recorder, queue)
    }

    #[test]
    fn flush_waits_for_every_message_of_every_thread() {
        let (recorder, queue) = start(BackgroundOptions::new().with_capacity(8));
        std::thread::scope(|scope| {
            for t in 0..3u8 {
                let queue = &queue;
                scope.spawn(move || {
                    for i in 0..3000u32 {
                        let mut msg = vec![t];
                        msg.extend_from_slice(&i.to_le_bytes());
                        queue.send(&msg, 1, Delivery::MayDrop).unwrap();
                    }
                });
            }
        });
        queue.flush(true).unwrap();
        let handled = recorder.handled.lock().unwrap();
        let mut next = [0u32; 3];
        for msg in handled.iter() {
            let t = msg[0] as usize;
            assert_eq!(u32::from_le_bytes(msg[1..5].try_into().unwrap()), next[t]);
            next[t] += 1;
        }
        assert_eq!(next, [3000; 3]);
        assert_eq!(*recorder.reports.lock().unwrap(), [0]);
        assert!(recorder.here.lock().unwrap().is_empty());
    }

    #[test]
    fn lossy_drops_count_their_weight_and_are_reported_once() {
        let (recorder, queue) = start(BackgroundOptions::new().with_capacity(2).with_lossy(true));
        recorder.hold.store(true, Ordering::SeqCst);
        queue.send(b"first", 1, Delivery::MayDrop).unwrap();
        wait_for("the worker never took the first message", || {
            recorder.holding.load(Ordering::SeqCst)
        });
        for _ in 0..2 {
            queue.send(b"kept", 1, Delivery::MayDrop).unwrap();
        }
        queue.send(b"three records", 3, Delivery::MayDrop).unwrap();
        queue.send(b"one more", 1, Delivery::MayDrop).unwrap();
        assert_eq!(queue.dropped(), 4);
        assert_eq!(queue.queued(), 2);
        recorder.hold.store(false, Ordering::SeqCst);
        queue.flush(true).unwrap();
        queue.flush(true).unwrap();
        assert_eq!(*recorder.reports.lock().unwrap(), [4, 0]);
        assert_eq!(recorder.handled.lock().unwrap().len(), 3);
    }

    /// A full lossy queue drops what may be dropped, keeps what must be kept (the
    /// lifecycle lines), and never makes its sender wait for either.
    #[test]
    fn lossy_keeps_what_must_be_kept_without_waiting() {
        let (recorder, queue) = start(BackgroundOptions::new().with_capacity(1).with_lossy(true));
        recorder.hold.store(true, Ordering::SeqCst);
        queue.send(b"first", 1, Delivery::MayDrop).unwrap();
        wait_for("the worker never took the first message", || {
            recorder.holding.load(Ordering::SeqCst)
        });
        queue
            .send(b"fills the queue", 1, Delivery::MayDrop)
            .unwrap();
        queue.send(b"dropped", 1, Delivery::MayDrop).unwrap();
        queue.send(b"exit", 1, Delivery::Keep).unwrap();
        queue.send(b"atexit", 1, Delivery::Keep).unwrap();
        assert_eq!(queue.dropped(), 1);
        assert_eq!(queue.queued(), 3);
        recorder.hold.store(false, Ordering::SeqCst);
        queue.flush(true).unwrap();
        let handled = recorder.handled.lock().unwrap();
        let handled: Vec<&[u8]> = handled.iter().map(Vec::as_slice).collect();
        assert_eq!(
            handled,
            [&b"first"[..], b"fills the queue", b"exit", b"atexit"]
        );
        assert_eq!(*recorder.reports.lock().unwrap(), [1]);
    }

    /// Keeps the batches of a drain whose messages say their own length.
    #[derive(Default)]
    struct SelfFramed {
        batches: Mutex<Vec<u8>>,
    }

    impl Drain for SelfFramed {
        fn handle(&self, _msg: &[u8]) {
            unreachable!("a self-framing drain gets whole batches");
        }
        fn handle_all(&self, batch: &[u8]) {
            self.batches.lock().unwrap().extend_from_slice(batch);
        }
        fn frames_itself(&self) -> bool {
            true
        }
        fn handle_here(&self, msg: &[u8]) -> io::Result<()> {
            self.handle_all(msg);
            Ok(())
        }
        fn handle_in_fork(&self, msg: &[u8]) -> io::Result<()> {
            self.handle_here(msg)
        }
        fn flush(&self) -> io::Result<()> {
            Ok(())
        }
        fn report(&self, _dropped: u64) {}
    }

    /// A drain that frames its own messages gets them back to back, with no length
    /// prefix between them, in order.
    #[test]
    fn self_framed_messages_come_back_to_back() {
        let drain = Arc::new(SelfFramed::default());
        let queue = Queue::start(
            Arc::clone(&drain) as Arc<dyn Drain>,
            &BackgroundOptions::new()
                .with_capacity(2)
                .with_flush_on_panic(false),
        );
        let mut want = Vec::new();
        for i in 0..100u8 {
            let msg = [i; 3];
            queue.send(&msg, 1, Delivery::MayDrop).unwrap();
            want.extend_from_slice(&msg);
        }
        queue.flush(false).unwrap();
        assert_eq!(*drain.batches.lock().unwrap(), want);
        queue.shutdown();
    }

    #[test]
    fn a_sleeping_worker_is_woken_by_the_next_message() {
        let (recorder, queue) = start(BackgroundOptions::new());
        queue.send(b"a", 1, Delivery::MayDrop).unwrap();
        queue.flush(false).unwrap();
        wait_for("the idle worker never went to sleep", || {
            queue.shared.pending().worker_asleep
        });
        queue.send(b"b", 1, Delivery::MayDrop).unwrap();
        // No flush: the message alone must wake the worker.
        wait_for("the sleeping worker was not woken", || {
            recorder.handled.lock().unwrap().len() == 2
        });
        assert!(!queue.shared.pending().worker_asleep);
    }

    #[test]
    fn after_shutdown_and_after_a_dead_worker_senders_handle_messages() {
        let (recorder, queue) = start(BackgroundOptions::new());
        queue.send(b"queued", 1, Delivery::MayDrop).unwrap();
        queue.shutdown();
        queue.send(b"here", 1, Delivery::MayDrop).unwrap();
        queue.flush(true).unwrap();
        assert_eq!(*recorder.handled.lock().unwrap(), [b"queued".to_vec()]);
        assert_eq!(*recorder.here.lock().unwrap(), [b"here".to_vec()]);

        let (recorder, queue) = start(BackgroundOptions::new().with_capacity(1));
        queue.send(b"boom", 1, Delivery::MayDrop).unwrap();
        // The worker panics on it; neither a flush nor a full queue waits forever.
        queue.flush(false).unwrap();
        queue.send(b"after", 1, Delivery::MayDrop).unwrap();
        queue.send(b"after", 1, Delivery::MayDrop).unwrap();
        assert_eq!(recorder.here.lock().unwrap().len(), 2);
        queue.shutdown();
    }

    /// A child forked while another thread of its parent holds the list of queues
    /// (starting a queue, or the exit handler or a flush collecting them) starts a queue
    /// of its own and shuts every queue down as its exit handler does.
    #[cfg(unix)]
    #[test]
    fn a_child_forked_while_the_queue_list_is_held_starts_queues_and_exits() {
        let mut parents = None;
        crate::fork_lock::tests::forked_while_held(
            // A queue of the parent: the fork handlers are installed.
            || parents = Some(start(BackgroundOptions::new()).1),
            || REGISTRY.lock().unwrap_or_else(PoisonError::into_inner),
            || {
                let (recorder, own) = start(BackgroundOptions::new());
                let sent = own.send(b"child", 1, Delivery::Keep).is_ok();
                // What the exit handler does.
                shutdown_all();
                let handled = recorder.handled.lock().unwrap();
                sent && *handled == [b"child".to_vec()]
            },
        );
        parents.unwrap().shutdown();
    }
}
