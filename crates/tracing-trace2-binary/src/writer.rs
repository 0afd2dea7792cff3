//! The binary target: [`BinaryWriter`] records every [`Record`] it is given into the
//! calling thread's batch and writes whole batches as frames.
//!
//! Per record: one thread-local read, one compare-and-swap on the thread's own slot
//! (see `slots`), the encoding, one store. No system call, no lock, no allocation once
//! the thread's batch exists. A batch is written (one `write` call per frame; where the
//! sink takes several frames at once, a regular file, the STREAM frame goes with the
//! stream's first batch and the END frame with the caller's last batch):
//!
//! * when it is full ([`BinaryWriterBuilder::with_batch_size`], 64 KiB by default);
//! * when a record arrives and the batch's first record is older than the flush
//!   interval ([`BinaryWriterBuilder::with_flush_interval`], 250 ms by default);
//! * by the writer's idle flusher, a thread started with the first slot claimed, that
//!   wakes every half interval and writes each batch it already found unwritten at its
//!   previous visit, so that no batch of a thread that stopped recording stays unwritten
//!   longer than the interval (a SIGKILL loses at most that much); with
//!   [`BinaryWriterBuilder::with_lazy_flusher`] it starts only after the writer's first
//!   [`WRITE_THROUGH_FRAMES`] frames, until when every record's batch is written at once;
//! * after `error`, `exit`, `signal`, `child_start` and `exec` records, together with
//!   every other thread's batch (whichever is not in use at that moment), so that
//!   nothing the parent recorded is behind a child's lines or lost to `exec`;
//! * after `thread_exit`, and when the thread ends;
//! * after `atexit` and `signal` records: all batches, then an END frame (see
//!   [`BinaryWriter::finish`]);
//! * from a C `atexit` handler (which `std::process::exit` runs too), when the last
//!   handle is dropped, and on [`BinaryWriter::flush_all`] / [`BinaryWriter::finish`].
//!
//! A `fork`ed child starts a stream of its own (a new stream id and pid) and drops the
//! copy of its parent's unwritten batches, which the parent writes itself; it starts an
//! idle flusher of its own when it records (its parent's is not copied into it). The
//! list of writers the exit handler finishes is locked by the forking thread across a
//! `fork` (`pthread_atfork`), so a child never inherits it held by a thread it does not
//! have.
//!
//! The idle flusher takes a slot only between two of its owner's records, with the
//! same compare-and-swap as every other flusher, and writes the whole batch: it adds
//! nothing to the event path, and each thread's batches still go out whole, once, in
//! order. It holds the writer weakly and ends when the writer is dropped or turned
//! off; nothing waits for it at exit.

use std::cell::{Cell, RefCell};
use std::io;
#[cfg(unix)]
use std::sync::MutexGuard;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once, PoisonError, Weak};
use std::thread::Thread;
use std::time::{Duration, Instant};

use crate::dest::Sink;
use crate::encode::{BatchEncoder, DEFAULT_BATCH_SIZE, Encoded};
use crate::header::{End, StreamHeader, TextDefaults};
use crate::record::{Record, Trace2Event};
use crate::slots::{Guard, SlotData, SlotList, SlotPtr, SpinLock, ThreadSlot};
use crate::spec;

/// The default flush interval.
pub const DEFAULT_FLUSH_INTERVAL: Duration = Duration::from_millis(250);

/// The STREAM frame is written again after this many batch frames (and before every
/// END frame), so that one damaged copy does not cost the stream.
const HEADER_EVERY: u64 = 16;

/// How long an exit-time flusher waits for a thread that is inside an event.
const EXIT_WAIT: Duration = Duration::from_millis(50);

/// The gate of a writer that is off: no fork generation reaches it.
const GATE_CLOSED: u64 = u64::MAX;

/// Frames a writer with a lazy flusher writes (a batch per record) before it starts
/// its idle flusher and keeps batches: more than a short process's lifecycle and
/// lines (see [`BinaryWriterBuilder::with_lazy_flusher`]).
pub const WRITE_THROUGH_FRAMES: u64 = 32;

/// The idle flusher wakes at most this often, whatever the interval.
const MIN_FLUSHER_PERIOD: Duration = Duration::from_millis(1);

/// Builds a [`BinaryWriter`].
#[derive(Clone, Debug)]
pub struct BinaryWriterBuilder {
    batch_size: usize,
    flush_interval: Duration,
    defaults: TextDefaults,
    anchor_wall_us: Option<i64>,
    utc_offset_s: Option<i32>,
    exit_handler: bool,
    dst_debug: bool,
    writer_name: String,
    lazy_flusher: bool,
    idle_flusher: bool,
}

impl Default for BinaryWriterBuilder {
    fn default() -> Self {
        BinaryWriterBuilder {
            batch_size: DEFAULT_BATCH_SIZE,
            flush_interval: DEFAULT_FLUSH_INTERVAL,
            defaults: TextDefaults::default(),
            anchor_wall_us: None,
            utc_offset_s: None,
            exit_handler: true,
            dst_debug: false,
            lazy_flusher: false,
            idle_flusher: true,
            writer_name: concat!("tracing-trace2/", env!("CARGO_PKG_VERSION")).to_owned(),
        }
    }
}

impl BinaryWriterBuilder {
    /// The size of a batch frame in bytes, 4 KiB to 1 MiB (clamped); 64 KiB by default.
    /// Use 4 KiB for a FIFO shared by several processes, so that frames are written
    /// atomically.
    pub fn with_batch_size(mut self, bytes: usize) -> Self {
        self.batch_size = bytes;
        self
    }

    /// How old a batch may get before it is written out; 250 ms by default. A record
    /// that finds its batch older writes it; a thread that stops recording has its
    /// batch written by the writer's idle flusher thread, which wakes every half
    /// interval (and is not started at all for a zero interval, where every record
    /// writes its batch).
    pub fn with_flush_interval(mut self, interval: Duration) -> Self {
        self.flush_interval = interval;
        self
    }

    /// The settings of the text targets that run beside this one (brief flags, Event
    /// nesting), recorded in the stream header so that a default decode writes what
    /// they wrote.
    pub fn with_text_defaults(mut self, defaults: TextDefaults) -> Self {
        self.defaults = defaults;
        self
    }

    /// The wall time of tick 0 (`t_abs` 0), Unix µs. By default the core's process
    /// start, from which the core derives every record's wall time; a record whose
    /// wall time is not `anchor + t_abs` still decodes exactly, at a few bytes' cost.
    pub fn with_anchor_wall_us(mut self, wall_us: i64) -> Self {
        self.anchor_wall_us = Some(wall_us);
        self
    }

    /// The local UTC offset for Normal and Perf times of day, in seconds east. By
    /// default the one the core captured at process start (what the text targets use).
    pub fn with_utc_offset(mut self, seconds_east: i32) -> Self {
        self.utc_offset_s = Some(seconds_east);
        self
    }

    /// Whether to flush every batch and write the END frame from a C `atexit` handler
    /// (on by default); `std::process::exit` runs those handlers.
    pub fn with_exit_handler(mut self, enabled: bool) -> Self {
        self.exit_handler = enabled;
        self
    }

    /// Start the idle flusher only once the writer has written [`WRITE_THROUGH_FRAMES`]
    /// frames; until then every record's batch is written at once (a `write` per
    /// record, as the text targets do). A short process that records a few lines then
    /// starts no thread and touches no more memory than a record needs, and loses
    /// nothing to a `SIGKILL`; a longer one batches as usual from then on. Off by
    /// default; the facade's binary target turns it on.
    pub fn with_lazy_flusher(mut self, lazy: bool) -> Self {
        self.lazy_flusher = lazy;
        self
    }

    /// No idle flusher at all: for a sink that is read only after a
    /// [`BinaryWriter::flush_all`] (the flight recorder's ring).
    pub(crate) fn without_idle_flusher(mut self) -> Self {
        self.idle_flusher = false;
        self
    }

    /// Print git's warning when a write fails (`GIT_TRACE2_DST_DEBUG`). The target stops
    /// writing after a failed write either way.
    pub fn with_dst_debug(mut self, dst_debug: bool) -> Self {
        self.dst_debug = dst_debug;
        self
    }

    /// The writer name recorded in the stream header.
    pub fn with_writer_name(mut self, name: impl Into<String>) -> Self {
        self.writer_name = name.into();
        self
    }

    /// A writer that writes its frames to `sink`, one `write_line` call per frame.
    pub fn build(self, sink: impl Sink) -> BinaryWriter {
        install_fork_handler();
        let start = tracing_trace2_dst::clock::start();
        let interval_us = u64::try_from(self.flush_interval.as_micros()).unwrap_or(u64::MAX);
        let gather_limit = sink.batch_limit();
        let pid = std::process::id();
        let shared = Arc::new_cyclic(|this| WriterCore {
            this: this.clone(),
            sink: Box::new(sink),
            gather_limit,
            batch_size: self.batch_size,
            flush_interval_ticks: interval_us,
            flusher_period: (self.idle_flusher && !self.flush_interval.is_zero())
                .then(|| (self.flush_interval / 2).max(MIN_FLUSHER_PERIOD)),
            batching: AtomicBool::new(!self.lazy_flusher || self.flush_interval.is_zero()),
            flusher: AtomicU64::new(0),
            flusher_thread: SpinLock::new(None),
            closed: AtomicBool::new(false),
            anchor_wall_us: self.anchor_wall_us.unwrap_or_else(|| start.wall_us()),
            utc_offset_s: self
                .utc_offset_s
                .unwrap_or_else(tracing_trace2_dst::clock::local_offset_secs),
            defaults: self.defaults,
            writer_name: self.writer_name,
            dst_debug: self.dst_debug,
            slots: SlotList::new(),
            stream: SpinLock::new(CurrentStream {
                epoch: 1,
                stream_id: random_id(pid),
                sid: None,
                depth: 0,
                pid,
                next_thread: 0,
                finished: Vec::new(),
                header_frame: Vec::new(),
            }),
            epoch: AtomicU64::new(1),
            header_epoch: AtomicU64::new(0),
            fork_gen: AtomicU64::new(FORK_GEN.load(Ordering::Acquire)),
            gate: AtomicU64::new(FORK_GEN.load(Ordering::Acquire)),
            end_epoch: AtomicU64::new(0),
            dirty: AtomicBool::new(false),
            since_header: AtomicU64::new(0),
            resetting: AtomicBool::new(false),
            enabled: AtomicBool::new(true),
            frames: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            write_errors: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        });
        let handle = Arc::new(Handle { shared });
        if self.exit_handler {
            register_for_exit(&handle);
        }
        BinaryWriter { handle }
    }
}

/// The binary target. Cheap to clone; the last clone dropped writes everything out and
/// ends the stream ([`BinaryWriter::finish`]).
///
/// The core layer calls [`BinaryWriter::record`] with the same [`Record`] it hands to
/// the text targets (one clock reading for all), on the thread the event happened on.
#[derive(Clone, Debug)]
pub struct BinaryWriter {
    handle: Arc<Handle>,
}

/// Counters of what a writer wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriterStats {
    /// Frames written (headers, batches, ends).
    pub frames: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Writes that failed (the first one turns the writer off).
    pub write_errors: u64,
    /// Records that could not be encoded (none is expected).
    pub dropped_records: u64,
}

struct Handle {
    shared: Arc<WriterCore>,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BinaryWriter")
            .field("stats", &self.shared.stats())
            .finish_non_exhaustive()
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.finish(None);
        self.shared.release_all();
        self.shared.closed.store(true, Ordering::Release);
        if let Some(flusher) = self.shared.flusher_thread.lock().take() {
            flusher.unpark();
        }
    }
}

impl BinaryWriter {
    /// A builder with the default settings.
    pub fn builder() -> BinaryWriterBuilder {
        BinaryWriterBuilder::default()
    }

    /// Records one Trace2 event. Writes nothing unless a flush trigger applies (see the
    /// module docs). Inlined into each caller (the binary target's and the flight
    /// recorder's formats), so that the encoder's state stays in registers.
    #[inline(always)]
    pub fn record(&self, record: &Record<'_>) {
        let shared = &self.handle.shared;
        // The writer on and not forked since its state was set up, in one comparison.
        if shared.gate.load(Ordering::Acquire) != FORK_GEN.load(Ordering::Acquire)
            && !shared.reopen_gate()
        {
            return;
        }
        match own_slot(shared) {
            Some(mut guard) => shared.record_in(&mut guard, record),
            None => with_new_slot(shared, |shared, guard| shared.record_in(guard, record)),
        }
    }

    /// Writes every thread's batch out (a thread that is inside an event at that moment
    /// is waited for, briefly). For exit paths the layer handles itself.
    pub fn flush_all(&self) {
        let shared = &self.handle.shared;
        shared.check_fork();
        shared.flush_all(None, EXIT_WAIT);
    }

    /// Calls `f` with every thread's batch that holds a record, sealed but left in
    /// place (in the order [`Self::flush_all`] would write them), while no thread can
    /// add to them; allocates nothing and never waits, for a signal handler. `Err` when
    /// that cannot be done now: a slot in use (its owner is recording, perhaps in the
    /// very thread the handler interrupted), more than [`HELD_MAX`] slots, or a `fork`
    /// not taken in yet.
    #[cfg_attr(not(unix), allow(dead_code))] // used by the `SIGUSR2` handler (Unix)
    pub(crate) fn with_batches<R>(&self, f: impl FnOnce(&[&[u8]]) -> R) -> Result<R, Unheld> {
        let shared = &self.handle.shared;
        if shared.fork_gen.load(Ordering::Acquire) != FORK_GEN.load(Ordering::Acquire) {
            return Err(Unheld::Forked);
        }
        let mut held: [Option<Guard<'_>>; HELD_MAX] = std::array::from_fn(|_| None);
        let mut count = 0;
        for slot in shared.slots.iter() {
            match slot.try_acquire_for_flush() {
                Ok(None) => {}
                Ok(Some(mut guard)) => {
                    if guard.enc.is_empty() {
                        continue;
                    }
                    if count == HELD_MAX {
                        return Err(Unheld::TooMany);
                    }
                    guard.enc.seal();
                    held[count] = Some(guard);
                    count += 1;
                }
                Err(()) => return Err(Unheld::Busy),
            }
        }
        let mut frames: [&[u8]; HELD_MAX] = [&[]; HELD_MAX];
        for (frame, guard) in frames.iter_mut().zip(held.iter().flatten()) {
            *frame = guard.enc.sealed();
        }
        Ok(f(&frames[..count]))
    }

    /// Writes every batch out, then an END frame: a decoder then knows the stream ended
    /// cleanly and how many batches each thread wrote. Records that come later are
    /// still written (and another END follows them at the next `finish`).
    pub fn finish(&self) {
        self.handle.shared.finish(None);
    }

    /// Whether the writer still writes (a failed write turns it off, as git does).
    pub fn is_enabled(&self) -> bool {
        self.handle.shared.enabled.load(Ordering::Relaxed)
    }

    /// What was written so far.
    pub fn stats(&self) -> WriterStats {
        self.handle.shared.stats()
    }
}

/// The most thread batches [`BinaryWriter::with_batches`] holds at once.
#[cfg_attr(not(unix), allow(dead_code))] // used by the `SIGUSR2` handler (Unix)
pub(crate) const HELD_MAX: usize = 64;

/// Why [`BinaryWriter::with_batches`] could not hold the batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(unix), allow(dead_code))] // used by the `SIGUSR2` handler (Unix)
pub(crate) enum Unheld {
    /// A slot is in use.
    Busy,
    /// More threads hold a batch than [`HELD_MAX`].
    TooMany,
    /// A forked child whose writer has not started its own stream yet.
    Forked,
}

/// The thread-local side: which slot of which writer this thread used last.
#[derive(Clone, Copy)]
struct Current {
    shared: *const WriterCore,
    slot: SlotPtr,
    claim: u64,
}

/// A slot this thread owns; given back (after a last flush) when the thread ends.
struct Claim {
    shared: Arc<WriterCore>,
    slot: SlotPtr,
    claim: u64,
}

impl Drop for Claim {
    fn drop(&mut self) {
        let _ = CURRENT.try_with(|c| {
            if c.get().slot == self.slot {
                c.set(Current::NONE);
            }
        });
        self.shared.release(self.slot, self.claim);
    }
}

impl Current {
    const NONE: Current = Current {
        shared: std::ptr::null(),
        slot: SlotPtr::NONE,
        claim: 0,
    };
}

thread_local! {
    // Const-initialised and without a destructor: readable at any point of a thread's
    // life, at the cost of one TLS access.
    static CURRENT: Cell<Current> = const { Cell::new(Current::NONE) };
    static CLAIMS: RefCell<Vec<Claim>> = const { RefCell::new(Vec::new()) };
}

/// Numbers the claims of slots, so a stale one is told from the current one.
static NEXT_CLAIM: AtomicU64 = AtomicU64::new(1);

/// The calling thread's slot of `shared`, held, if the thread has one that is still
/// its own; otherwise [`with_new_slot`] must run. One thread-local read, one
/// compare-and-swap.
#[inline(always)]
fn own_slot(shared: &Arc<WriterCore>) -> Option<Guard<'_>> {
    let current = CURRENT.with(Cell::get);
    if std::ptr::eq(current.shared, Arc::as_ptr(shared))
        && let Some(slot) = shared.slots.get(current.slot)
        && let Some(guard) = slot.acquire()
        && guard.claim == current.claim
    {
        return Some(guard);
    }
    None
}

/// Runs `f` with the calling thread's slot of `shared` where [`own_slot`] has none:
/// the thread's first record for this writer, a switch between writers, a claim gone
/// stale, or a thread being torn down.
#[cold]
fn with_new_slot(shared: &Arc<WriterCore>, f: impl FnOnce(&WriterCore, &mut Guard<'_>)) {
    // A thread's first record for this writer (in this process): from now on a batch
    // may be left behind by a thread that stops recording. (A lazy flusher that is not
    // started yet is not needed: every batch is written at once until it is.)
    if shared.batching.load(Ordering::Acquire) {
        shared.ensure_flusher();
    }
    let owned = CLAIMS.try_with(|claims| {
        let mut claims = claims.try_borrow_mut().ok()?;
        // Claims whose slot was taken away (fork, writer dropped) are forgotten.
        claims.retain(|c| {
            c.shared
                .slots
                .get(c.slot)
                .and_then(ThreadSlot::acquire)
                .is_some_and(|g| g.claim == c.claim)
        });
        let found = claims
            .iter()
            .find(|c| Arc::ptr_eq(&c.shared, shared))
            .map(|c| (c.slot, c.claim));
        let (slot, claim) = match found {
            Some(found) => found,
            None => {
                let (slot, claim) = shared.claim_slot();
                claims.push(Claim {
                    shared: Arc::clone(shared),
                    slot,
                    claim,
                });
                (slot, claim)
            }
        };
        let current = Current {
            shared: Arc::as_ptr(shared),
            slot,
            claim,
        };
        CURRENT.with(|c| c.set(current));
        Some(current)
    });
    if let Ok(Some(current)) = owned
        && let Some(slot) = shared.slots.get(current.slot)
        && let Some(mut guard) = slot.acquire()
        && guard.claim == current.claim
    {
        f(shared, &mut guard);
        return;
    }
    // No thread-local storage any more (the thread is ending), or it is in use: a slot
    // just for this record, written out and given back at once.
    let (slot, _) = shared.claim_slot();
    if let Some(slot) = shared.slots.get(slot)
        && let Some(mut guard) = slot.acquire()
    {
        f(shared, &mut guard);
        shared.flush_guard(&mut guard);
        shared.retire(&mut guard);
        guard.free();
    }
}

/// Bumped in a forked child (by a `pthread_atfork` handler): writers compare it with the
/// generation they were set up in.
static FORK_GEN: AtomicU64 = AtomicU64::new(0);

#[cfg(unix)]
thread_local! {
    /// [`AT_EXIT`], locked by a thread that forks from just before the `fork` to just
    /// after it, in the parent and in the child. A `fork` copies a lock as it is: held
    /// by another thread of the parent, a `Mutex` would stay locked in the child for
    /// good, and the child would hang on its first writer with an exit handler. Taken
    /// before the `fork`, no other thread is in the middle of changing the list when
    /// memory is copied, and the forking thread, which the child has, gives it back.
    /// (The flight recorder's list is held the same way, by handlers of its own.)
    static HELD_ACROSS_FORK: Cell<Option<MutexGuard<'static, Vec<Weak<Handle>>>>> =
        const { Cell::new(None) };
}

/// Before a `fork`, in the forking thread: waits for [`AT_EXIT`] (held only to read or
/// change it, never while waiting for anything else).
#[cfg(unix)]
extern "C" fn before_fork() {
    let held = AT_EXIT.lock().unwrap_or_else(PoisonError::into_inner);
    // A thread whose thread-locals are gone forks with the list unlocked (as before).
    let _ = HELD_ACROSS_FORK.try_with(|cell| cell.set(Some(held)));
}

/// After a `fork`, in the parent: the list given back.
#[cfg(unix)]
extern "C" fn after_fork_in_parent() {
    let _ = HELD_ACROSS_FORK.try_with(Cell::take);
}

/// After a `fork`, in the child, before `fork` returns: the list given back by the
/// thread that locked it (an atomic swap, and a `futex` wake if a thread of the parent
/// was waiting: no allocation, nothing a child of a multi-threaded process may not do),
/// then the generation counted.
#[cfg(unix)]
extern "C" fn forked_child() {
    let _ = HELD_ACROSS_FORK.try_with(Cell::take);
    FORK_GEN.fetch_add(1, Ordering::AcqRel);
}

/// Windows has no `fork`: nothing to watch for.
#[cfg(not(unix))]
fn install_fork_handler() {}

/// Installs the `fork` handlers once, before the first writer is built.
#[cfg(unix)]
fn install_fork_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: registering plain functions that lock and unlock the exit list in the
        // forking thread and count the generation in the child; none panics or unwinds.
        unsafe {
            libc::pthread_atfork(
                Some(before_fork),
                Some(after_fork_in_parent),
                Some(forked_child),
            )
        };
    });
}

/// Writers to finish from the C `atexit` handler.
static AT_EXIT: Mutex<Vec<Weak<Handle>>> = Mutex::new(Vec::new());

fn register_for_exit(handle: &Arc<Handle>) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: registering a plain function; it catches every panic.
        unsafe { libc::atexit(finish_at_exit) };
    });
    let mut list = AT_EXIT.lock().unwrap_or_else(PoisonError::into_inner);
    list.retain(|w| w.strong_count() > 0);
    list.push(Arc::downgrade(handle));
}

extern "C" fn finish_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        // `try_lock`: a forked child may have inherited the lock held by a thread it
        // does not have; better to skip than to hang at exit.
        let writers: Vec<Arc<Handle>> = match AT_EXIT.try_lock() {
            Ok(list) => list.iter().filter_map(Weak::upgrade).collect(),
            Err(std::sync::TryLockError::Poisoned(p)) => {
                p.into_inner().iter().filter_map(Weak::upgrade).collect()
            }
            Err(std::sync::TryLockError::WouldBlock) => Vec::new(),
        };
        for handle in writers {
            handle.shared.finish(None);
        }
    });
}

/// The `fork` generation of this process (0 in the first process, bumped in every
/// forked child): what the flight recorder's ring compares, as the writer does.
pub(crate) fn fork_generation() -> u64 {
    FORK_GEN.load(Ordering::Acquire)
}

/// A stream id no other process is likely to pick (`pid`: this process's id).
fn random_id(pid: u32) -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let local = 0u8;
    let mut x = nanos
        ^ u64::from(pid).rotate_left(32)
        ^ (&local as *const u8 as u64).rotate_left(17)
        ^ COUNTER
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    // splitmix64's finaliser.
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The stream being written: changes only when a stream starts.
struct CurrentStream {
    epoch: u64,
    stream_id: u64,
    sid: Option<String>,
    depth: u32,
    pid: u32,
    next_thread: u64,
    /// Threads of this stream that gave their slot back: (thread index, batches).
    finished: Vec<(u64, u64)>,
    /// The STREAM frame, once made.
    header_frame: Vec<u8>,
}

struct WriterCore {
    /// The writer itself, for the idle flusher (which holds it weakly).
    this: Weak<WriterCore>,
    sink: Box<dyn Sink>,
    /// The most bytes of frames the sink takes in one `write` ([`Sink::batch_limit`]: a
    /// regular file's; 0 for pipes, sockets and the flight recorder's ring, which get one
    /// frame per call).
    gather_limit: usize,
    batch_size: usize,
    flush_interval_ticks: u64,
    /// How often the idle flusher wakes (half the flush interval); `None`: no flusher.
    flusher_period: Option<Duration>,
    /// `FORK_GEN + 1` of the process whose idle flusher runs; 0 before it is started.
    flusher: AtomicU64,
    /// Batches are kept for the flush interval (with an idle flusher running, if the
    /// writer has one). `false` while a lazy flusher is not started yet: every record's
    /// batch is written at once (see [`BinaryWriterBuilder::with_lazy_flusher`]).
    batching: AtomicBool,
    /// The idle flusher, to wake it when the writer is dropped.
    flusher_thread: SpinLock<Option<Thread>>,
    /// The last handle is gone: no record can come any more.
    closed: AtomicBool,
    anchor_wall_us: i64,
    utc_offset_s: i32,
    defaults: TextDefaults,
    writer_name: String,
    dst_debug: bool,
    slots: SlotList,
    stream: SpinLock<CurrentStream>,
    /// The current stream's generation (`CurrentStream::epoch`), readable without the lock.
    epoch: AtomicU64,
    /// The newest generation whose STREAM frame is written.
    header_epoch: AtomicU64,
    /// The fork generation the writer's state belongs to.
    fork_gen: AtomicU64,
    /// `fork_gen` while the writer is `enabled`, [`GATE_CLOSED`] once it is not: what
    /// [`BinaryWriter::record`] compares with `FORK_GEN`, so that a record pays one
    /// comparison for both checks.
    gate: AtomicU64,
    /// The generation whose END frame was written last.
    end_epoch: AtomicU64,
    /// Whether a batch was written since that END frame.
    dirty: AtomicBool,
    /// Batch frames written since the last copy of the STREAM frame.
    since_header: AtomicU64,
    resetting: AtomicBool,
    enabled: AtomicBool,
    frames: AtomicU64,
    bytes: AtomicU64,
    write_errors: AtomicU64,
    dropped: AtomicU64,
}

impl WriterCore {
    fn stats(&self) -> WriterStats {
        WriterStats {
            frames: self.frames.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            write_errors: self.write_errors.load(Ordering::Relaxed),
            dropped_records: self.dropped.load(Ordering::Relaxed),
        }
    }

    /// Encodes `record` into the thread's batch and applies the flush triggers.
    #[inline(always)]
    fn record_in(&self, guard: &mut Guard<'_>, record: &Record<'_>) {
        let data: &mut SlotData = guard;
        if data.enc.epoch != self.epoch.load(Ordering::Relaxed)
            || data.sid != (record.sid.as_ptr() as usize, record.sid.len())
            || data.depth != record.depth
        {
            self.sync_stream(data, record);
        }
        // The usual region or datum, which no flush trigger but the batch's age
        // concerns.
        if data.enc.try_encode_steady(record) {
            if data.enc.due(record.time.t_abs_us) {
                self.flush_guard(guard);
            }
            return;
        }
        let epoch = data.enc.epoch;
        if data
            .enc
            .encode_general(record, |frame| self.write_batch(epoch, frame))
            == Encoded::Dropped
        {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        match record.event {
            Trace2Event::Atexit { .. } | Trace2Event::Signal { .. } => self.finish(Some(guard)),
            Trace2Event::Exit { .. }
            | Trace2Event::Error { .. }
            | Trace2Event::ChildStart(_)
            | Trace2Event::Exec { .. } => {
                self.flush_guard(guard);
                // The others' batches too, but without waiting for a thread that is
                // recording right now (it may be waiting for ours).
                self.flush_all(Some(guard.slot()), Duration::ZERO);
            }
            Trace2Event::ThreadExit { .. } => self.flush_guard(guard),
            _ => {
                if data_age(guard, record) >= guard.enc.flush_interval() {
                    self.flush_guard(guard);
                }
            }
        }
    }

    /// Writes the batch in `guard`'s slot, if it holds any record.
    fn flush_guard(&self, guard: &mut Guard<'_>) {
        let enc = &mut guard.enc;
        if enc.is_empty() {
            return;
        }
        let epoch = enc.epoch;
        self.write_batch(epoch, enc.seal());
        enc.next_batch();
        if enc.flush_interval() != self.flush_interval_ticks {
            self.after_write_through(guard);
        }
    }

    /// After a batch written at once while the lazy flusher is not started: once the
    /// writer wrote [`WRITE_THROUGH_FRAMES`] frames, the flusher starts and batches are
    /// kept from then on (each thread's slot switches at its next write).
    #[cold]
    #[inline(never)]
    fn after_write_through(&self, guard: &mut Guard<'_>) {
        if !self.batching.load(Ordering::Acquire) {
            if self.frames.load(Ordering::Relaxed) < WRITE_THROUGH_FRAMES {
                return;
            }
            self.batching.store(true, Ordering::Release);
        }
        self.ensure_flusher();
        guard.enc.set_flush_interval(self.flush_interval_ticks);
    }

    /// Writes a sealed batch frame of stream generation `epoch`, its STREAM frame first
    /// if that is not written yet.
    fn write_batch(&self, epoch: u64, frame: &[u8]) {
        if self.header_epoch.load(Ordering::Acquire) < epoch {
            let mut stream = self.stream.lock();
            if stream.epoch == epoch && self.header_epoch.load(Ordering::Acquire) < epoch {
                // The STREAM frame and the stream's first batch: one `write` where the
                // sink takes both (a short process's first record costs one call).
                self.make_header_frame(&mut stream);
                self.write_frames(&[&stream.header_frame, frame]);
                self.header_written(stream.epoch);
                drop(stream);
                self.batch_written(epoch);
                return;
            }
        }
        self.write_frame(frame);
        self.batch_written(epoch);
    }

    /// The bookkeeping after a batch frame of generation `epoch` went out: an END frame
    /// is due again, and every [`HEADER_EVERY`] batches a copy of the STREAM frame.
    fn batch_written(&self, epoch: u64) {
        self.dirty.store(true, Ordering::Release);
        if self.since_header.fetch_add(1, Ordering::AcqRel) + 1 >= HEADER_EVERY {
            let mut stream = self.stream.lock();
            if stream.epoch == epoch {
                self.write_header(&mut stream, true);
            }
        }
    }

    /// Writes the STREAM frame of `stream` unless it is written already, or a copy of
    /// it (`again`).
    fn write_header(&self, stream: &mut CurrentStream, again: bool) {
        if self.header_epoch.load(Ordering::Acquire) >= stream.epoch && !again {
            return;
        }
        self.make_header_frame(stream);
        self.write_frame(&stream.header_frame);
        self.header_written(stream.epoch);
    }

    /// Notes that the STREAM frame of generation `epoch` (or a copy of it) went out.
    fn header_written(&self, epoch: u64) {
        self.since_header.store(0, Ordering::Release);
        self.header_epoch.store(epoch, Ordering::Release);
    }

    /// Makes the STREAM frame of `stream`, unless it is made already.
    fn make_header_frame(&self, stream: &mut CurrentStream) {
        if stream.header_frame.is_empty() {
            let header = StreamHeader {
                major: spec::MAJOR,
                minor: spec::MINOR,
                stream_id: stream.stream_id,
                flags: 0,
                writer: self.writer_name.clone(),
                sid: cut_header_text(stream.sid.as_deref().unwrap_or_default()),
                depth: stream.depth,
                pid: stream.pid,
                freq: 1_000_000,
                anchor_wall_us: self.anchor_wall_us,
                utc_offset_s: self.utc_offset_s,
                event_format_version: EVENT_FORMAT_VERSION.to_owned(),
                defaults: self.defaults,
                declared: Vec::new(),
            };
            header.write_frame(&mut stream.header_frame);
        }
    }

    /// One `write` call for one frame; the first failure turns the writer off.
    fn write_frame(&self, frame: &[u8]) {
        if !self.enabled.load(Ordering::Relaxed) {
            return;
        }
        match self.sink.write_line(frame) {
            Ok(()) => {
                self.frames.fetch_add(1, Ordering::Relaxed);
                self.bytes.fetch_add(frame.len() as u64, Ordering::Relaxed);
            }
            Err(err) => self.write_failed(&err),
        }
    }

    /// Writes `frames` back to back: in one `write` where the sink takes several frames
    /// at once and they fit its limit (a regular file, where one `write` to an
    /// `O_APPEND` file lands whole as well), else one `write` per frame. For the
    /// moments a few frames go out together: a stream's STREAM frame and first batch,
    /// the last batch and the END frame.
    fn write_frames(&self, frames: &[&[u8]]) {
        let total: usize = frames.iter().map(|f| f.len()).sum();
        if frames.len() < 2 || total > self.gather_limit {
            for frame in frames {
                self.write_frame(frame);
            }
            return;
        }
        if !self.enabled.load(Ordering::Relaxed) {
            return;
        }
        let joined = frames.concat();
        // As one frame, not as text lines: a sink with a file size limit takes the whole
        // or refuses it, and never cuts it at a newline byte inside a frame.
        match self.sink.write_line(&joined) {
            Ok(()) => {
                self.frames
                    .fetch_add(frames.len() as u64, Ordering::Relaxed);
                self.bytes.fetch_add(total as u64, Ordering::Relaxed);
            }
            Err(err) => self.write_failed(&err),
        }
    }

    #[cold]
    fn write_failed(&self, err: &io::Error) {
        self.write_errors.fetch_add(1, Ordering::Relaxed);
        let was_enabled = self.enabled.swap(false, Ordering::Relaxed);
        self.gate.store(GATE_CLOSED, Ordering::Release);
        if was_enabled && self.dst_debug {
            crate::dest::warn_write_failed(err);
        }
    }

    /// Brings the slot in line with the current stream: the slot's batch belongs to an
    /// older stream, or the record names a session the stream has not checked yet.
    #[cold]
    fn sync_stream(&self, data: &mut SlotData, record: &Record<'_>) {
        loop {
            let mut stream = self.stream.lock();
            if data.enc.epoch != stream.epoch {
                if !data.enc.is_empty() {
                    // Written under the old stream's id, whose header is out already.
                    drop(stream);
                    let epoch = data.enc.epoch;
                    self.write_batch(epoch, data.enc.seal());
                    data.enc.next_batch();
                    continue;
                }
                let index = stream.next_thread;
                stream.next_thread += 1;
                data.enc.rebind(stream.stream_id, stream.epoch, index);
            }
            let same = match &stream.sid {
                None => {
                    stream.sid = Some(record.sid.to_owned());
                    stream.depth = record.depth;
                    true
                }
                Some(sid) => sid == record.sid && stream.depth == record.depth,
            };
            if !same {
                // Another session: the stream ends here and a new one starts.
                self.write_header(&mut stream, false);
                let end = End {
                    stream_id: stream.stream_id,
                    threads: Vec::new(),
                };
                stream.epoch += 1;
                stream.stream_id = random_id(stream.pid);
                stream.sid = Some(record.sid.to_owned());
                stream.depth = record.depth;
                stream.next_thread = 0;
                stream.finished.clear();
                stream.header_frame.clear();
                self.epoch.store(stream.epoch, Ordering::Release);
                drop(stream);
                let mut frame = Vec::new();
                end.write_frame(&mut frame);
                self.write_frame(&frame);
                continue;
            }
            data.sid = (record.sid.as_ptr() as usize, record.sid.len());
            data.depth = record.depth;
            return;
        }
    }

    /// Takes a slot for a new thread and numbers the thread in the current stream.
    fn claim_slot(&self) -> (SlotPtr, u64) {
        let claim = NEXT_CLAIM.fetch_add(1, Ordering::Relaxed);
        let (ptr, mut guard) = self.slots.take(|| SlotData {
            enc: BatchEncoder::new(self.batch_size, self.anchor_wall_us),
            claim,
            sid: (0, 0),
            depth: 0,
            flusher_seen: None,
        });
        guard.claim = claim;
        guard
            .enc
            .set_flush_interval(if self.batching.load(Ordering::Acquire) {
                self.flush_interval_ticks
            } else {
                0
            });
        guard.sid = (0, 0);
        // What the idle flusher saw was the previous owner's batch.
        guard.flusher_seen = None;
        guard.enc.forget_thread();
        let mut stream = self.stream.lock();
        let index = stream.next_thread;
        stream.next_thread += 1;
        guard.enc.rebind(stream.stream_id, stream.epoch, index);
        (ptr, claim)
    }

    /// Gives a thread's slot back when the thread ends: last batch out, counts kept for
    /// the END frame.
    fn release(&self, slot: SlotPtr, claim: u64) {
        if self.fork_gen.load(Ordering::Acquire) != FORK_GEN.load(Ordering::Acquire) {
            // A forked child's copy of a slot: its batch is the parent's to write.
            return;
        }
        let Some(slot) = self.slots.get(slot) else {
            return;
        };
        let Some(mut guard) = slot.acquire() else {
            return;
        };
        if guard.claim != claim {
            return;
        }
        self.flush_guard(&mut guard);
        self.retire(&mut guard);
        guard.free();
    }

    /// Notes how many batches the slot's thread wrote in its stream.
    fn retire(&self, guard: &mut Guard<'_>) {
        let enc = &mut guard.enc;
        let mut stream = self.stream.lock();
        if enc.epoch == stream.epoch {
            stream.finished.push((enc.thread_index, enc.seq));
        }
    }

    /// Writes every slot's batch (skipping `own`, which the caller holds); waits up to
    /// `wait` for a slot in use. Returns (thread index, batches) of the current stream's
    /// threads it saw.
    fn flush_all(&self, own: Option<&ThreadSlot>, wait: Duration) -> Vec<(u64, u64)> {
        let epoch = self.epoch.load(Ordering::Acquire);
        let mut counts = Vec::new();
        for slot in self.slots.iter() {
            if own.is_some_and(|own| own.is(slot)) {
                continue;
            }
            if let Some(mut guard) = slot.acquire_for_flush(wait) {
                self.flush_guard(&mut guard);
                if guard.enc.epoch == epoch {
                    counts.push((guard.enc.thread_index, guard.enc.seq));
                }
            }
        }
        counts
    }

    /// Writes every batch, then the END frame of the current stream (if anything of
    /// it was written). `own` is the caller's slot, if it holds one: its batch goes out
    /// last, with the copy of the STREAM frame and the END frame, in one `write` where
    /// the sink takes several frames (a short process's `atexit` costs one call).
    fn finish(&self, mut own: Option<&mut Guard<'_>>) {
        if !self.enabled.load(Ordering::Relaxed) {
            return;
        }
        self.check_fork();
        let own_slot = own.as_ref().map(|g| g.slot());
        let mut counts = self.flush_all(own_slot, EXIT_WAIT);
        // The caller's batch, kept for the END frame's write when its stream's header is
        // out already (else written now, after its header).
        let mut own_batch = Vec::new();
        if let Some(own) = own.as_deref_mut()
            && !own.enc.is_empty()
        {
            let epoch = own.enc.epoch;
            if self.gather_limit > 0 && self.header_epoch.load(Ordering::Acquire) >= epoch {
                own_batch.extend_from_slice(own.enc.seal());
                own.enc.next_batch();
                self.dirty.store(true, Ordering::Release);
                self.since_header.fetch_add(1, Ordering::AcqRel);
            } else {
                self.flush_guard(own);
            }
        }
        let mut stream = self.stream.lock();
        if self.header_epoch.load(Ordering::Acquire) < stream.epoch {
            // A new stream began meanwhile (another thread's record named another
            // session): the kept batch is of the old one, whose END that thread wrote.
            drop(stream);
            self.write_frame_if_any(&own_batch);
            return;
        }
        // Nothing written since the last END of this stream: it stands. (The kept batch
        // counts as written: another thread's `finish` may have taken the mark meanwhile.)
        let dirty = self.dirty.swap(false, Ordering::AcqRel) || !own_batch.is_empty();
        if !dirty && self.end_epoch.load(Ordering::Acquire) == stream.epoch {
            return;
        }
        self.end_epoch.store(stream.epoch, Ordering::Release);
        if let Some(own) = &own
            && own.enc.epoch == stream.epoch
        {
            counts.push((own.enc.thread_index, own.enc.seq));
        }
        counts.extend_from_slice(&stream.finished);
        counts.sort_unstable();
        let end = End {
            stream_id: stream.stream_id,
            threads: counts,
        };
        let mut end_frame = Vec::new();
        end.write_frame(&mut end_frame);
        let mut frames: Vec<&[u8]> = Vec::with_capacity(3);
        if !own_batch.is_empty() {
            frames.push(&own_batch);
        }
        let again = self.since_header.load(Ordering::Acquire) > 0;
        if again {
            // A last copy of the header, so that a damaged first one costs nothing.
            self.make_header_frame(&mut stream);
            frames.push(&stream.header_frame);
        }
        frames.push(&end_frame);
        self.write_frames(&frames);
        if again {
            self.header_written(stream.epoch);
        }
    }

    /// Writes `frame` unless it is empty.
    fn write_frame_if_any(&self, frame: &[u8]) {
        if !frame.is_empty() {
            self.write_frame(frame);
        }
    }

    /// Frees every slot's buffer once the last handle is gone (threads that still hold a
    /// claim find their slot free and forget it).
    fn release_all(&self) {
        for slot in self.slots.iter() {
            if let Some(mut guard) = slot.acquire_for_flush(EXIT_WAIT) {
                self.flush_guard(&mut guard);
                guard.enc = BatchEncoder::new(0, self.anchor_wall_us);
                guard.free();
            }
        }
    }

    /// Starts this process's idle flusher for the writer, unless it runs already (or
    /// the writer has none). A forked child, where the parent's flusher thread does not
    /// exist, starts its own.
    fn ensure_flusher(&self) {
        let Some(period) = self.flusher_period else {
            return;
        };
        let process = FORK_GEN.load(Ordering::Acquire) + 1;
        let running = self.flusher.load(Ordering::Acquire);
        if running == process
            || self
                .flusher
                .compare_exchange(running, process, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return;
        }
        let shared = self.this.clone();
        let spawned = std::thread::Builder::new()
            .name("t2b-flusher".into())
            .spawn(move || run_flusher(&shared, period));
        // Without a thread (the system refuses one), batches are still written by their
        // next record, their thread's end and the exit paths.
        if let Ok(handle) = spawned {
            *self.flusher_thread.lock() = Some(handle.thread().clone());
        }
    }

    /// One visit of the idle flusher: writes every batch that was already there, not
    /// written, at the previous visit (so it is at least half an interval old, and no
    /// batch gets older than the interval unwritten). A slot whose owner is recording
    /// right now is left to its owner.
    fn flush_idle(&self) {
        for slot in self.slots.iter() {
            let Some(mut guard) = slot.acquire_for_flush(Duration::ZERO) else {
                continue;
            };
            let batch = (guard.enc.epoch, guard.enc.seq);
            if guard.enc.is_empty() {
                guard.flusher_seen = None;
            } else if guard.flusher_seen == Some(batch) {
                self.flush_guard(&mut guard);
                guard.flusher_seen = None;
            } else {
                guard.flusher_seen = Some(batch);
            }
        }
    }

    /// Whether a record may go on after the gate (see `gate`) did not match: `false`
    /// when the writer is off; after a `fork` (this is the child), the child's own
    /// stream is started first.
    #[cold]
    fn reopen_gate(&self) -> bool {
        if !self.enabled.load(Ordering::Relaxed) {
            return false;
        }
        self.check_fork();
        true
    }

    /// Notices a `fork` (this is the child) and starts the child's own stream.
    #[inline]
    fn check_fork(&self) {
        let now = FORK_GEN.load(Ordering::Acquire);
        if self.fork_gen.load(Ordering::Acquire) != now {
            self.after_fork(now);
        }
    }

    #[cold]
    fn after_fork(&self, now: u64) {
        if self
            .resetting
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            while self.fork_gen.load(Ordering::Acquire) != now {
                std::thread::yield_now();
            }
            return;
        }
        // SAFETY: this is a forked child (the generation changed) and this thread won
        // `resetting`: the parent's other threads do not exist here, and any thread the
        // child started waits above until `fork_gen` is set below.
        unsafe {
            self.stream.unlock_after_fork();
            self.flusher_thread.unlock_after_fork();
            self.slots.reset_after_fork(|data| {
                data.enc.discard();
                data.claim = 0;
            });
        }
        {
            let mut stream = self.stream.lock();
            stream.epoch += 1;
            stream.pid = std::process::id();
            stream.stream_id = random_id(stream.pid);
            stream.next_thread = 0;
            stream.finished.clear();
            stream.header_frame.clear();
            self.epoch.store(stream.epoch, Ordering::Release);
        }
        self.fork_gen.store(now, Ordering::Release);
        self.gate.store(now, Ordering::Release);
        if !self.enabled.load(Ordering::Relaxed) {
            // Turned off meanwhile (a failed write): the gate stays shut.
            self.gate.store(GATE_CLOSED, Ordering::Release);
        }
        self.resetting.store(false, Ordering::Release);
    }
}

/// The Event format's `evt` version, which the Event formatter prints.
const EVENT_FORMAT_VERSION: &str = "4";

/// A header text cut to 1 MiB at a character boundary: the STREAM frame must stay
/// within a frame's bounds whatever the SID.
fn cut_header_text(text: &str) -> String {
    let mut keep = text.len().min(1 << 20);
    while !text.is_char_boundary(keep) {
        keep -= 1;
    }
    text[..keep].to_owned()
}

/// The idle flusher's thread: a visit every `period` until the writer is dropped or
/// turned off. It holds the writer only during a visit, so it keeps nothing alive.
fn run_flusher(shared: &Weak<WriterCore>, period: Duration) {
    let open = |shared: &Weak<WriterCore>| {
        let shared = shared.upgrade()?;
        (!shared.closed.load(Ordering::Acquire) && shared.enabled.load(Ordering::Relaxed))
            .then_some(shared)
    };
    loop {
        let wake = Instant::now() + period;
        loop {
            let left = wake.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::park_timeout(left);
            if open(shared).is_none() {
                return;
            }
        }
        let Some(shared) = open(shared) else {
            return;
        };
        shared.flush_idle();
    }
}

fn data_age(guard: &Guard<'_>, record: &Record<'_>) -> u64 {
    guard.enc.age(record.time.t_abs_us)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Callsite, Timestamp, Trace2Event};
    use tracing_trace2_dst::MemorySink;

    fn printf(writer: &BinaryWriter, msg: &str) {
        writer.record(&Record {
            event: Trace2Event::Printf { msg: Some(msg) },
            time: Timestamp::default(),
            sid: "sid",
            depth: 0,
            thread: "main",
            callsite: Callsite::default(),
            open_regions: 0,
        });
    }

    fn wait_for(what: impl Fn() -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !what() {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    #[test]
    fn the_flusher_starts_with_the_first_record_and_ends_with_the_writer() {
        let sink = MemorySink::new();
        let writer = BinaryWriter::builder()
            .with_exit_handler(false)
            .with_flush_interval(Duration::from_millis(20))
            .build(sink.clone());
        let shared = Arc::clone(&writer.handle.shared);
        assert_eq!(shared.flusher.load(Ordering::Acquire), 0);
        // The writer's own reference to itself (`this`).
        assert_eq!(Arc::weak_count(&shared), 1);
        printf(&writer, "one");
        assert_ne!(shared.flusher.load(Ordering::Acquire), 0);
        // The flusher writes the batch this thread left, without another record.
        assert!(wait_for(|| !sink.contents().is_empty()));
        drop(writer);
        // Its weak reference goes when the thread ends.
        assert!(wait_for(|| Arc::weak_count(&shared) == 1));
    }

    #[test]
    fn a_lazy_flusher_writes_through_until_enough_frames_then_batches() {
        let sink = MemorySink::new();
        let writer = BinaryWriter::builder()
            .with_exit_handler(false)
            .with_lazy_flusher(true)
            .build(sink.clone());
        let shared = Arc::clone(&writer.handle.shared);
        printf(&writer, "one");
        // No thread, and the record is written already (after the stream's header).
        assert_eq!(shared.flusher.load(Ordering::Acquire), 0);
        assert_eq!(writer.stats().frames, 2);
        let mut sent = 1;
        while writer.stats().frames < WRITE_THROUGH_FRAMES {
            printf(&writer, "more");
            sent += 1;
        }
        // The write that reached the count started the flusher; from then on records
        // stay in the batch.
        assert_ne!(shared.flusher.load(Ordering::Acquire), 0);
        let frames = writer.stats().frames;
        for _ in 0..10 {
            printf(&writer, "kept");
        }
        assert_eq!(writer.stats().frames, frames);
        drop(writer);
        // Every record is in the stream once, in order.
        let mut text = Vec::new();
        let options = crate::text::TextOptions::new(crate::text::TextFormat::Event);
        let bytes = sink.contents();
        crate::text::decode_to_text(&bytes[..], &mut text, &options).expect("decode");
        let text = String::from_utf8(text).expect("utf-8");
        let msgs: Vec<&str> = text
            .lines()
            .filter_map(|l| l.split("\"msg\":\"").nth(1))
            .map(|m| m.split('"').next().unwrap_or_default())
            .collect();
        assert_eq!(msgs.len(), sent + 10, "{text}");
        assert_eq!(msgs[0], "one");
        assert!(msgs[1..sent].iter().all(|m| *m == "more"));
        assert!(msgs[sent..].iter().all(|m| *m == "kept"));
    }

    /// A sink that takes several frames per call, as a regular file does, and keeps
    /// each call's bytes apart.
    #[derive(Clone, Default)]
    struct Calls(Arc<Mutex<Vec<Vec<u8>>>>);

    impl Sink for Calls {
        fn write_line(&self, line: &[u8]) -> io::Result<()> {
            self.0.lock().unwrap().push(line.to_vec());
            Ok(())
        }

        fn batch_limit(&self) -> usize {
            tracing_trace2_dst::FILE_BATCH_LIMIT
        }

        fn write_lines(&self, lines: &[u8]) -> io::Result<()> {
            self.write_line(lines)
        }
    }

    fn record_at(writer: &BinaryWriter, event: Trace2Event<'_>, t: u64) {
        writer.record(&Record {
            event,
            time: Timestamp {
                wall_us: 1_795_303_297_816_635 + t as i64,
                t_abs_us: t,
            },
            sid: "sid",
            depth: 0,
            thread: "main",
            callsite: Callsite::default(),
            open_regions: 0,
        });
    }

    /// A short process's records, written through (`lazy`) or kept in one batch until
    /// `atexit`: to `sink`.
    fn short_process(sink: impl Sink, lazy: bool) -> WriterStats {
        let writer = BinaryWriter::builder()
            .with_exit_handler(false)
            .with_anchor_wall_us(1_795_303_297_816_635)
            .with_utc_offset(0)
            .with_lazy_flusher(lazy)
            // No idle flusher visit during the test.
            .with_flush_interval(Duration::from_secs(3600))
            .build(sink);
        for (t, msg) in ["one", "two", "three"].into_iter().enumerate() {
            record_at(
                &writer,
                Trace2Event::Printf { msg: Some(msg) },
                t as u64 * 10,
            );
        }
        record_at(&writer, Trace2Event::Atexit { code: 0 }, 40);
        writer.stats()
    }

    fn event_text(bytes: &[u8]) -> String {
        let mut text = Vec::new();
        let options = crate::text::TextOptions::new(crate::text::TextFormat::Event);
        let report = crate::text::decode_to_text(bytes, &mut text, &options).expect("decode");
        assert!(report.is_complete(), "{report:?}");
        String::from_utf8(text).expect("utf-8")
    }

    #[test]
    fn a_file_gets_the_header_with_the_first_batch_and_the_end_with_the_last() {
        let calls = Calls::default();
        let gathered = short_process(calls.clone(), true);
        let apart = MemorySink::new();
        let one_each = short_process(apart.clone(), true);
        let calls = calls.0.lock().unwrap().clone();
        // STREAM + first batch; two batches; last batch + STREAM copy + END.
        assert_eq!(calls.len(), 4, "{calls:?}");
        // The same frames either way: seven, of the same sizes.
        assert_eq!(gathered.frames, 7);
        assert_eq!(one_each.frames, 7);
        assert_eq!(gathered.bytes, one_each.bytes);
        assert_eq!(
            calls.iter().map(Vec::len).sum::<usize>() as u64,
            gathered.bytes
        );
        assert_eq!(frames_in(&calls[0]), 2);
        assert_eq!(frames_in(&calls[3]), 3);
        let text = event_text(&calls.concat());
        assert_eq!(text, event_text(&apart.contents()));
        assert_eq!(text.lines().count(), 4, "{text}");
    }

    fn frames_in(bytes: &[u8]) -> usize {
        let mut scanner = crate::decode::scan::FrameScanner::new(bytes);
        let mut n = 0;
        while scanner.next_frame().expect("in memory").is_some() {
            n += 1;
        }
        n
    }

    #[test]
    fn a_batch_first_written_at_atexit_goes_after_its_header_then_the_end() {
        let calls = Calls::default();
        let gathered = short_process(calls.clone(), false);
        let apart = MemorySink::new();
        short_process(apart.clone(), false);
        let calls = calls.0.lock().unwrap().clone();
        // STREAM + the one batch; STREAM copy + END.
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert_eq!(gathered.frames, 4);
        assert_eq!(frames_in(&calls[0]), 2);
        assert_eq!(frames_in(&calls[1]), 2);
        let text = event_text(&calls.concat());
        assert_eq!(text, event_text(&apart.contents()));
        assert_eq!(text.lines().count(), 4, "{text}");
    }

    /// A sink whose every write fails.
    struct Failing;

    impl Sink for Failing {
        fn write_line(&self, _line: &[u8]) -> io::Result<()> {
            Err(io::Error::other("full"))
        }
    }

    #[test]
    fn a_failed_write_stops_the_recording_too() {
        let writer = BinaryWriter::builder()
            .with_exit_handler(false)
            // No idle flusher visit during the test.
            .with_flush_interval(Duration::from_secs(3600))
            .build(Failing);
        printf(&writer, "one");
        writer.flush_all();
        assert!(!writer.is_enabled());
        assert_eq!(writer.stats().write_errors, 1);
        // Later records are not even encoded: the thread's batch stays empty.
        printf(&writer, "two");
        let shared = &writer.handle.shared;
        assert!(shared.slots.iter().all(|slot| {
            slot.acquire_for_flush(EXIT_WAIT)
                .is_some_and(|guard| guard.enc.is_empty())
        }));
        assert_eq!(writer.stats().write_errors, 1);
    }

    #[test]
    fn a_zero_interval_needs_no_flusher() {
        let writer = BinaryWriter::builder()
            .with_exit_handler(false)
            .with_flush_interval(Duration::ZERO)
            .build(MemorySink::new());
        printf(&writer, "one");
        assert_eq!(writer.handle.shared.flusher.load(Ordering::Acquire), 0);
        assert_eq!(writer.stats().frames, 2, "header and the one batch");
    }

    #[test]
    fn the_flusher_writes_a_batch_only_at_its_second_visit() {
        let writer = BinaryWriter::builder()
            .with_exit_handler(false)
            // The flusher thread sleeps for half an hour: the visits are made by hand.
            .with_flush_interval(Duration::from_secs(3600))
            .build(MemorySink::new());
        let shared = &writer.handle.shared;
        let frames = || shared.stats().frames;
        shared.flush_idle();
        printf(&writer, "kept");
        assert_eq!(frames(), 0);
        shared.flush_idle();
        assert_eq!(frames(), 0, "first visit: seen, not written");
        shared.flush_idle();
        assert_eq!(frames(), 2, "second visit: header and batch");
        printf(&writer, "next");
        shared.flush_idle();
        shared.flush_idle();
        assert_eq!(frames(), 3, "the next batch, once");
        shared.flush_idle();
        shared.flush_idle();
        assert_eq!(frames(), 3, "an empty batch is not written");
    }

    /// A child forked while another thread registered a writer for the exit handler
    /// builds writers of its own (which register too).
    #[cfg(unix)]
    #[test]
    fn a_child_forked_while_the_exit_list_is_held_builds_writers() {
        // The fork handler installed before the fork, as by any writer of the process.
        drop(
            BinaryWriter::builder()
                .with_exit_handler(false)
                .build(MemorySink::new()),
        );
        tracing_trace2_test_support::fork::forked_while_held(
            || AT_EXIT.lock().unwrap_or_else(PoisonError::into_inner),
            || {
                let writer = BinaryWriter::builder().build(MemorySink::new());
                AT_EXIT
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .iter()
                    .any(|w| w.upgrade().is_some_and(|h| Arc::ptr_eq(&h, &writer.handle)))
            },
        );
    }
}
