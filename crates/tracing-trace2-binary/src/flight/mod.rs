//! The flight recorder: the binary target's per-thread batches kept in a bounded ring in
//! memory instead of written, and written out as an ordinary t2b file (which
//! `trace2 decode`, `summary` and `export` read like any other) when a trigger fires.
//!
//! ```
//! use tracing_trace2_binary::flight::{FlightRecorder, Trigger};
//! # let dir = tempfile::tempdir()?;
//! let recorder = FlightRecorder::builder(dir.path())
//!     .with_max_bytes(4 << 20)
//!     .with_min_age(std::time::Duration::from_secs(10))
//!     .build()
//!     .expect("a writable directory");
//! // recorder.record(&record) for every Trace2 record (the facade's target does it) …
//! // … and on demand:
//! let written = recorder.snapshot(Trigger::Request)?;
//! assert!(written.is_none(), "nothing recorded, nothing written");
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Recording costs what the binary target costs: the records go into the same
//! per-thread batches, and a full batch (or one older than the flush interval) is
//! copied into the ring instead of written (`ring`). Memory stays within the byte cap
//! plus one batch per recording thread.
//!
//! # Triggers
//!
//! | trigger | when | marker at the end of the snapshot |
//! |---|---|---|
//! | [`Trigger::Request`] | [`FlightRecorder::snapshot`] | `data` `flight`/`trigger` = `request` |
//! | [`Trigger::Signal`] | `SIGUSR2` on Unix (when the process left it at its default) | … = `signal` |
//! | [`Trigger::Exit`] | an `atexit` record with a non-zero code | the process's own `exit`/`atexit` lines |
//! | [`Trigger::FatalSignal`] | a Trace2 `signal` record (the process is dying of a signal) | the `signal` line, then … = `fatal_signal` |
//! | [`Trigger::Panic`] | an `error` record written from a panic hook | … = `panic` |
//! | [`Trigger::Error`] | an `error` record, with [`FlightRecorderBuilder::with_error_trigger`] | … = `error` |
//! | [`Trigger::SlowRegion`] | a `region_leave` slower than [`FlightRecorderBuilder::with_slow_region`] | … = `slow_region` |
//!
//! A process that ends with code 0 writes nothing. Error and slow-region snapshots are
//! written at most once per minimum age, so a service that fails often does not fill
//! the disk. A trigger that fires while a snapshot is being written does not wait: the
//! snapshot in progress writes another one after itself for it (unless the process
//! ends first).

mod ring;
#[cfg(unix)]
mod signal;
mod snapshot;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use crate::record::{Format, Record, Trace2Event};
use crate::writer::{BinaryWriter, BinaryWriterBuilder};
use ring::{Ring, RingSink};

#[cfg(unix)]
pub use signal::SNAPSHOT_SIGNAL;
pub use snapshot::{MARKER_CATEGORY, MARKER_KEY};

/// The environment variable naming the directory snapshots go to.
pub const ENV_NAME: &str = "TRACING_TRACE2_FLIGHT";
/// The default byte cap of the ring (frames of batches, before compression: none).
pub const DEFAULT_MAX_BYTES: usize = 10 << 20;
/// The default minimum age of the window.
pub const DEFAULT_MIN_AGE: Duration = Duration::from_secs(10);

/// Why a snapshot was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// [`FlightRecorder::snapshot`] was called.
    Request,
    /// The on-demand signal (`SIGUSR2`) arrived.
    Signal,
    /// The process ends with this non-zero code.
    Exit(i32),
    /// The process is dying of a signal (a Trace2 `signal` record).
    FatalSignal,
    /// A panic (an `error` record written from a panic hook).
    Panic,
    /// An `error` record (opt-in).
    Error,
    /// A region ran longer than the threshold (opt-in).
    SlowRegion,
}

impl Trigger {
    /// The name in the file name and the marker.
    pub fn name(self) -> &'static str {
        match self {
            Trigger::Request => "request",
            Trigger::Signal => "signal",
            Trigger::Exit(_) => "exit",
            Trigger::FatalSignal => "fatal_signal",
            Trigger::Panic => "panic",
            Trigger::Error => "error",
            Trigger::SlowRegion => "slow_region",
        }
    }

    /// Whether the snapshot ends with a marker event (the exit trigger ends with the
    /// process's own `exit` and `atexit`).
    fn has_marker(self) -> bool {
        !matches!(self, Trigger::Exit(_))
    }

    /// Whether this trigger fires at most once per minimum age.
    fn is_rate_limited(self) -> bool {
        matches!(self, Trigger::Error | Trigger::SlowRegion)
    }
}

/// Builds a [`FlightRecorder`].
#[derive(Clone, Debug)]
pub struct FlightRecorderBuilder {
    dir: PathBuf,
    max_bytes: usize,
    min_age: Duration,
    error_trigger: bool,
    slow_region: Option<Duration>,
    signal: bool,
    dst_debug: bool,
    writer: BinaryWriterBuilder,
}

impl FlightRecorderBuilder {
    /// The most bytes of batches the ring holds (default [`DEFAULT_MAX_BYTES`]); the
    /// oldest go first. Each recording thread holds one more batch of its own.
    pub fn with_max_bytes(mut self, bytes: usize) -> Self {
        self.max_bytes = bytes;
        self
    }

    /// How far back the window reaches at least, when the cap allows (default
    /// [`DEFAULT_MIN_AGE`]); batches older than that are dropped.
    pub fn with_min_age(mut self, age: Duration) -> Self {
        self.min_age = age;
        self
    }

    /// Also write a snapshot on an `error` record (off by default).
    pub fn with_error_trigger(mut self, enabled: bool) -> Self {
        self.error_trigger = enabled;
        self
    }

    /// Also write a snapshot when a region takes longer than `threshold` (off by
    /// default).
    pub fn with_slow_region(mut self, threshold: Option<Duration>) -> Self {
        self.slow_region = threshold;
        self
    }

    /// Whether `SIGUSR2` writes a snapshot (Unix; on by default). The handler is only
    /// installed where the signal still has its default action (which ends the
    /// process), never over a handler of the program's own.
    pub fn with_signal(mut self, enabled: bool) -> Self {
        self.signal = enabled;
        self
    }

    /// Print git's warning when the directory is not usable (`GIT_TRACE2_DST_DEBUG`). A
    /// snapshot that cannot be written is reported always: its window is lost.
    pub fn with_dst_debug(mut self, dst_debug: bool) -> Self {
        self.dst_debug = dst_debug;
        self
    }

    /// The settings of the binary writer underneath (batch size, flush interval, text
    /// defaults, writer name). Its exit handler is not used.
    pub fn with_writer(mut self, writer: BinaryWriterBuilder) -> Self {
        self.writer = writer;
        self
    }

    /// The recorder, or `None` (with git's warning under `dst_debug`) when the
    /// directory is not a writable directory: the process goes on untraced.
    pub fn build(self) -> Option<FlightRecorder> {
        if let Err(err) = check_dir(&self.dir) {
            if self.dst_debug {
                tracing_trace2_dst::warning(&format!(
                    "trace2: could not open '{}' for '{ENV_NAME}' tracing: {}",
                    self.dir.display(),
                    tracing_trace2_dst::strerror(&err)
                ));
            }
            return None;
        }
        let min_age_us = u64::try_from(self.min_age.as_micros()).unwrap_or(u64::MAX);
        let ring = Arc::new(Ring::new(self.max_bytes, min_age_us));
        let writer = self
            .writer
            .with_exit_handler(false)
            .with_dst_debug(false)
            // A snapshot writes every batch into the ring first: batches need no flusher
            // to reach it, and a short process starts no thread for one.
            .without_idle_flusher()
            .build(RingSink(Arc::clone(&ring)));
        #[cfg(unix)]
        let signal_scratch = if self.signal && signal::install_once() {
            signal::HandlerRoom::new(&self.dir).map(crate::slots::SpinLock::new)
        } else {
            None
        };
        let inner = Arc::new(RecorderState {
            writer,
            ring,
            dir: self.dir,
            min_age_us,
            error_trigger: self.error_trigger,
            slow_region_us: self
                .slow_region
                .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
            writing: WritingClaim::new(),
            pending: AtomicU64::new(0),
            signal_pending: AtomicBool::new(false),
            deferred: AtomicBool::new(false),
            #[cfg(unix)]
            signal_scratch,
            #[cfg(unix)]
            signal_entry: std::sync::atomic::AtomicUsize::new(usize::MAX),
            next_number: AtomicU64::new(0),
            last_limited_us: AtomicU64::new(0),
            limited_once: AtomicBool::new(false),
            stats: Counters::default(),
        });
        #[cfg(unix)]
        if inner.signal_scratch.is_some()
            && let Some(entry) = signal::register(&inner)
        {
            inner.signal_entry.store(entry, Ordering::Release);
        }
        let mut list = lock_recorder_list();
        list.retain(|w| w.strong_count() > 0);
        list.push(Arc::downgrade(&inner));
        Some(FlightRecorder { inner })
    }
}

/// Every recorder of the process that is still alive. Held only to read or change the
/// list, and by a thread that forks across its `fork` (see [`hold_across_forks`]).
static RECORDERS: Mutex<Vec<Weak<RecorderState>>> = Mutex::new(Vec::new());

/// Locks [`RECORDERS`], once the `fork` handlers that keep it usable in a child are
/// installed.
fn lock_recorder_list() -> MutexGuard<'static, Vec<Weak<RecorderState>>> {
    hold_across_forks();
    RECORDERS.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(unix)]
thread_local! {
    /// [`RECORDERS`], locked by a thread that forks from just before the `fork` to just
    /// after it, in the parent and in the child.
    static HELD_ACROSS_FORK: std::cell::Cell<Option<MutexGuard<'static, Vec<Weak<RecorderState>>>>> =
        const { std::cell::Cell::new(None) };
}

/// Windows has no `fork`.
#[cfg(not(unix))]
fn hold_across_forks() {}

/// Has the thread that forks hold [`RECORDERS`] across the `fork`. A `fork` copies a
/// lock as it is: held by another thread of the parent (building a recorder, or
/// collecting them for [`snapshot_all`]), a `Mutex` would stay locked in the child for
/// good, and the child would hang on its first recorder or `snapshot_all`. Taken before
/// the `fork`, no other thread is in the middle of changing the list when memory is
/// copied, and the forking thread, which the child has, gives it back.
#[cfg(unix)]
fn hold_across_forks() {
    /// Before a `fork`, in the forking thread: waits for the list (held only to read or
    /// change it, never while waiting for anything else).
    extern "C" fn before_fork() {
        let held = RECORDERS.lock().unwrap_or_else(PoisonError::into_inner);
        // A thread whose thread-locals are gone forks with the list unlocked.
        let _ = HELD_ACROSS_FORK.try_with(|cell| cell.set(Some(held)));
    }
    /// After a `fork`, in the parent and in the child (before `fork` returns): the list
    /// given back by the thread that locked it (an atomic swap, and a `futex` wake if a
    /// thread of the parent was waiting: no allocation, nothing a child of a
    /// multi-threaded process may not do).
    extern "C" fn after_fork() {
        let _ = HELD_ACROSS_FORK.try_with(std::cell::Cell::take);
    }
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: registering plain functions that lock and unlock the list in the
        // forking thread; neither panics or unwinds.
        unsafe { libc::pthread_atfork(Some(before_fork), Some(after_fork), Some(after_fork)) };
    });
}

fn live_recorders() -> Vec<FlightRecorder> {
    lock_recorder_list()
        .iter()
        .filter_map(Weak::upgrade)
        .map(|inner| FlightRecorder { inner })
        .collect()
}

/// Writes a snapshot of every live recorder of the process (those a program built
/// itself and the one the facade built from `TRACING_TRACE2_FLIGHT`), and returns the
/// files written.
pub fn snapshot_all(trigger: Trigger) -> Vec<PathBuf> {
    live_recorders()
        .iter()
        .filter_map(|r| r.snapshot(trigger).ok().flatten())
        .collect()
}

/// Whether `dir` is a directory the process may create files in: one `access` of
/// `dir/.` on Unix (which fails with `ENOTDIR` for a file, `ENOENT` for nothing there),
/// so that the warning reads as C's strerror, as git's do.
#[cfg(unix)]
fn check_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let mut path = dir.as_os_str().as_bytes().to_vec();
    path.extend_from_slice(b"/.");
    let path =
        std::ffi::CString::new(path).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `access` reads the NUL-terminated path and nothing else.
    if unsafe { libc::access(path.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether `dir` is a directory (the files' permissions are found out when a snapshot
/// is written).
#[cfg(not(unix))]
fn check_dir(dir: &Path) -> io::Result<()> {
    if !std::fs::metadata(dir)?.is_dir() {
        return Err(io::ErrorKind::NotADirectory.into());
    }
    Ok(())
}

/// A flight recorder. Cheap to clone; every clone records into the same ring. Several
/// recorders in one process each have their own ring and directory.
#[derive(Clone, Debug)]
pub struct FlightRecorder {
    inner: Arc<RecorderState>,
}

/// What a recorder did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlightStats {
    /// Snapshots written.
    pub snapshots: u64,
    /// Snapshots that could not be written.
    pub failed: u64,
    /// Triggers that found a snapshot in progress and were left to it.
    pub deferred: u64,
    /// Error and slow-region triggers skipped (within the minimum age of the last).
    pub rate_limited: u64,
    /// Batch frames dropped from the ring (over the cap or the minimum age).
    pub evicted_batches: u64,
    /// Bytes of batch buffers queued in the ring now (at their capacity; the cap also
    /// counts the spare buffers and the frames kept aside).
    pub ring_bytes: u64,
    /// The most bytes of batch buffers the ring queued.
    pub peak_ring_bytes: u64,
}

#[derive(Debug, Default)]
struct Counters {
    snapshots: AtomicU64,
    failed: AtomicU64,
    deferred: AtomicU64,
    rate_limited: AtomicU64,
}

struct RecorderState {
    writer: BinaryWriter,
    ring: Arc<Ring>,
    dir: PathBuf,
    min_age_us: u64,
    error_trigger: bool,
    slow_region_us: Option<u64>,
    /// Who writes a snapshot now ([`RecorderState::take_writing`]).
    writing: WritingClaim,
    /// A trigger that fired meanwhile, for the snapshot in progress to write next
    /// ([`encode_trigger`]; 0: none). An atomic, not a lock: the signal handler takes it.
    pending: AtomicU64,
    /// The signal came and its snapshot is not written yet.
    signal_pending: AtomicBool,
    /// The signal handler left a snapshot to a thread (something it needed was held):
    /// the recording path looks at this after each record.
    deferred: AtomicBool,
    /// What the signal handler writes a snapshot with (when it serves this recorder).
    #[cfg(unix)]
    signal_scratch: Option<crate::slots::SpinLock<signal::HandlerRoom>>,
    /// This recorder's entry in the signal handler's table (`usize::MAX`: none).
    #[cfg(unix)]
    signal_entry: std::sync::atomic::AtomicUsize,
    next_number: AtomicU64,
    /// When the last rate-limited snapshot was written (µs since the process start).
    last_limited_us: AtomicU64,
    limited_once: AtomicBool,
    stats: Counters,
}

#[cfg(unix)]
impl Drop for RecorderState {
    fn drop(&mut self) {
        let entry = *self.signal_entry.get_mut();
        if entry != usize::MAX {
            signal::unregister(entry);
        }
    }
}

/// The process a claim belongs to, never 0: its pid in the high 32 bits, the low 16 bits
/// of its `fork` generation (the binary writer's `pthread_atfork` count) in the 16 below,
/// and the lowest 16 bits 0 (the signal handler counts there). Both, because neither
/// alone tells a process from every one whose memory it copied: a pid may be a
/// grandparent's that exited, and a signal may reach a child before the `fork` handler
/// has counted the generation. `getpid` and an atomic load: async-signal-safe.
fn process_tag() -> u64 {
    let generation = crate::writer::fork_generation() & 0xFFFF;
    (u64::from(std::process::id()) << 32) | (generation << 16)
}

/// Who writes a recorder's snapshots now: 0 for nobody, else the [`process_tag`] of the
/// process whose thread (or signal handler) does. A `fork` while a thread writes copies
/// the claim into the child, where that thread does not exist: a claim of another
/// process is free, or the child could never write a snapshot.
struct WritingClaim(AtomicU64);

/// What [`WritingClaim::take`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Claimed {
    /// A thread of this process holds it: not taken.
    Held,
    /// Nobody held it: taken.
    Free,
    /// A thread of a parent process held it when this process was forked: taken.
    FromParent,
}

impl WritingClaim {
    const fn new() -> WritingClaim {
        WritingClaim(AtomicU64::new(0))
    }

    /// Takes the claim unless a thread of this process holds it.
    fn take(&self) -> Claimed {
        self.take_as(process_tag())
    }

    fn take_as(&self, tag: u64) -> Claimed {
        let mut held = self.0.load(Ordering::SeqCst);
        loop {
            if held == tag {
                return Claimed::Held;
            }
            match self
                .0
                .compare_exchange(held, tag, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) if held == 0 => return Claimed::Free,
                Ok(_) => return Claimed::FromParent,
                Err(now) => held = now,
            }
        }
    }

    fn release(&self) {
        self.0.store(0, Ordering::SeqCst);
    }
}

/// A trigger as a non-zero number, for [`RecorderState::pending`].
fn encode_trigger(trigger: Trigger) -> u64 {
    match trigger {
        Trigger::Request => 1,
        Trigger::Signal => 2,
        Trigger::Exit(code) => 3 | (u64::from(code as u32) << 8),
        Trigger::FatalSignal => 4,
        Trigger::Panic => 5,
        Trigger::Error => 6,
        Trigger::SlowRegion => 7,
    }
}

/// The trigger [`encode_trigger`] made `value`, if any.
fn decode_trigger(value: u64) -> Option<Trigger> {
    Some(match value & 0xFF {
        1 => Trigger::Request,
        2 => Trigger::Signal,
        3 => Trigger::Exit((value >> 8) as u32 as i32),
        4 => Trigger::FatalSignal,
        5 => Trigger::Panic,
        6 => Trigger::Error,
        7 => Trigger::SlowRegion,
        _ => return None,
    })
}

/// Takes the pending trigger, if any.
fn take_trigger(pending: &AtomicU64) -> Option<Trigger> {
    decode_trigger(pending.swap(0, Ordering::SeqCst))
}

/// Leaves `trigger` pending (unless a newer one is).
#[cfg_attr(not(unix), allow(dead_code))]
fn put_trigger(pending: &AtomicU64, trigger: Trigger) {
    let _ = pending.compare_exchange(
        0,
        encode_trigger(trigger),
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
}

impl std::fmt::Debug for RecorderState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlightRecorder")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl FlightRecorder {
    /// A builder writing snapshots into `dir`, with the default settings.
    pub fn builder(dir: impl Into<PathBuf>) -> FlightRecorderBuilder {
        FlightRecorderBuilder {
            dir: dir.into(),
            max_bytes: DEFAULT_MAX_BYTES,
            min_age: DEFAULT_MIN_AGE,
            error_trigger: false,
            slow_region: None,
            signal: true,
            dst_debug: false,
            writer: BinaryWriter::builder(),
        }
    }

    /// Records one Trace2 event into the calling thread's batch, and fires the trigger
    /// it stands for, if any.
    #[inline]
    pub fn record(&self, record: &Record<'_>) {
        self.inner.writer.record(record);
        // A snapshot the signal handler could not take while this thread (or another)
        // held what it needs: written now, in normal context.
        if self.inner.deferred.load(Ordering::Relaxed) {
            self.inner.serve_deferred();
        }
        match record.event {
            Trace2Event::Start { .. }
            | Trace2Event::Atexit { .. }
            | Trace2Event::Signal { .. }
            | Trace2Event::Error { .. } => self.after_lifecycle(record),
            // Every other region record: the slow-region test here, not behind a call.
            Trace2Event::RegionLeave { t_rel_us, .. }
                if self
                    .inner
                    .slow_region_us
                    .is_some_and(|limit| t_rel_us > limit) =>
            {
                self.after_lifecycle(record);
            }
            _ => {}
        }
    }

    #[cold]
    fn after_lifecycle(&self, record: &Record<'_>) {
        let trigger = match record.event {
            // `version` and `start` go out as one batch, which the ring keeps aside.
            Trace2Event::Start { .. } => {
                self.inner.ring.note_start();
                self.inner.writer.flush_all();
                return;
            }
            Trace2Event::Atexit { code, .. } if code != 0 => Trigger::Exit(code),
            Trace2Event::Signal { .. } => Trigger::FatalSignal,
            Trace2Event::Error { .. } if std::thread::panicking() => Trigger::Panic,
            Trace2Event::Error { .. } if self.inner.error_trigger => Trigger::Error,
            Trace2Event::RegionLeave { t_rel_us, .. }
                if self
                    .inner
                    .slow_region_us
                    .is_some_and(|limit| t_rel_us > limit) =>
            {
                Trigger::SlowRegion
            }
            _ => return,
        };
        // A trigger on the recording path has nowhere to report a failure: the counters
        // and the warning say it.
        let _ = self.snapshot(trigger);
    }

    /// Writes a snapshot of the window now, named after `trigger`, and returns its
    /// path; `Ok(None)` when there is nothing to write, when another snapshot is being
    /// written (it writes this one next) or when a rate-limited trigger came too soon.
    /// The recording threads are held only for the hand-over of their current batch.
    pub fn snapshot(&self, trigger: Trigger) -> io::Result<Option<PathBuf>> {
        let inner = &self.inner;
        if trigger.is_rate_limited() && !inner.rate_allows() {
            inner.stats.rate_limited.fetch_add(1, Ordering::Relaxed);
            return Ok(None);
        }
        if !inner.take_writing() {
            inner
                .pending
                .store(encode_trigger(trigger), Ordering::SeqCst);
            inner.stats.deferred.fetch_add(1, Ordering::Relaxed);
            // The snapshot in progress may have ended between the two: then nobody
            // would write this one, so this caller does.
            if inner.take_writing() {
                inner.write_pending();
            }
            return Ok(None);
        }
        let first = inner.write_snapshot(trigger);
        inner.write_pending();
        first
    }

    /// The snapshot's bytes, without writing a file (for tests and for programs that
    /// send the window elsewhere).
    pub fn snapshot_bytes(&self, trigger: Trigger) -> Vec<u8> {
        self.inner.writer.flush_all();
        self.snapshot_bytes_at(trigger, tracing_trace2_dst::clock::t_abs_us())
    }

    /// [`Self::snapshot_bytes`] at `now_us` (µs since the process start), after the
    /// batches were flushed.
    fn snapshot_bytes_at(&self, trigger: Trigger, now_us: u64) -> Vec<u8> {
        let copy = self.inner.ring.copy(now_us);
        let mut out = Vec::new();
        let marker = trigger.has_marker().then(|| trigger.name());
        // Writing into a Vec cannot fail.
        let _ = snapshot::assemble(&copy, marker, now_us, &mut out);
        drop(copy);
        self.inner.serve_deferred_if_any();
        out
    }

    /// The binary writer that fills the ring (for [`crate::RecordingFormat`]-style
    /// wiring; recording through it directly skips the triggers).
    pub fn writer(&self) -> &BinaryWriter {
        &self.inner.writer
    }

    /// The directory snapshots go to.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// What the recorder did so far.
    pub fn stats(&self) -> FlightStats {
        let s = &self.inner.stats;
        let ring = &self.inner.ring;
        let ring_bytes = ring.bytes() as u64;
        self.inner.serve_deferred_if_any();
        FlightStats {
            snapshots: s.snapshots.load(Ordering::Relaxed),
            failed: s.failed.load(Ordering::Relaxed),
            deferred: s.deferred.load(Ordering::Relaxed),
            rate_limited: s.rate_limited.load(Ordering::Relaxed),
            evicted_batches: ring.evicted.load(Ordering::Relaxed),
            ring_bytes,
            peak_ring_bytes: ring.peak_bytes.load(Ordering::Relaxed),
        }
    }
}

impl RecorderState {
    /// Whether a rate-limited trigger may write now (and if so, notes the time).
    fn rate_allows(&self) -> bool {
        let now = tracing_trace2_dst::clock::t_abs_us();
        let last = self.last_limited_us.load(Ordering::Acquire);
        if self.limited_once.load(Ordering::Acquire) && now.saturating_sub(last) < self.min_age_us {
            return false;
        }
        self.limited_once.store(true, Ordering::Release);
        self.last_limited_us.store(now, Ordering::Release);
        true
    }

    /// Takes the right to write this recorder's snapshots; false when a thread of this
    /// process holds it (it writes what is left pending after its own snapshot).
    ///
    /// A claim taken over from a parent process (a `fork` while one of the parent's
    /// threads wrote) also frees what that thread held with it: the signal handler's
    /// room. A trigger the parent left pending then is written by the child too, as a
    /// snapshot of the child's window.
    fn take_writing(&self) -> bool {
        match self.writing.take() {
            Claimed::Held => false,
            Claimed::Free => true,
            Claimed::FromParent => {
                #[cfg(unix)]
                signal::after_claim_from_parent(self);
                true
            }
        }
    }

    /// Whether a trigger or the signal waits for a snapshot.
    fn has_pending(&self) -> bool {
        self.pending.load(Ordering::SeqCst) != 0 || self.signal_pending.load(Ordering::SeqCst)
    }

    /// Writes what the signal handler left to a thread, if anything.
    #[inline]
    fn serve_deferred_if_any(&self) {
        if self.deferred.load(Ordering::Relaxed) {
            self.serve_deferred();
        }
    }

    /// Writes what the signal handler left to a thread, unless a snapshot is being
    /// written (its writer takes it after).
    #[cold]
    #[inline(never)]
    fn serve_deferred(&self) {
        self.deferred.store(false, Ordering::SeqCst);
        if !self.has_pending() || !self.take_writing() {
            return;
        }
        self.write_pending();
    }

    /// Writes the triggers (and the signal's snapshot) that came while this thread was
    /// writing (it holds `writing`), then gives `writing` up, unless one came just then.
    fn write_pending(&self) {
        loop {
            loop {
                if let Some(next) = take_trigger(&self.pending) {
                    let _ = self.write_snapshot(next);
                } else if self.signal_pending.swap(false, Ordering::SeqCst) {
                    let _ = self.write_snapshot(Trigger::Signal);
                } else {
                    break;
                }
            }
            self.writing.release();
            let late = self.has_pending();
            // A late trigger whose caller saw `writing` still set: write it, unless
            // that caller (or another) has taken over meanwhile.
            if !late || !self.take_writing() {
                return;
            }
        }
    }

    fn write_snapshot(&self, trigger: Trigger) -> io::Result<Option<PathBuf>> {
        self.writer.flush_all();
        let now_us = tracing_trace2_dst::clock::t_abs_us();
        let copy = self.ring.copy(now_us);
        // A forked child that recorded nothing has nothing of its own to show.
        if copy.frames.is_empty()
            && copy
                .streams
                .iter()
                .all(|s| s.first_batch.is_none() || s.inherited)
        {
            return Ok(None);
        }
        let sid = snapshot::newest_sid(&copy).unwrap_or_default();
        let wall_us = tracing_trace2_dst::clock::start()
            .wall_us()
            .saturating_add(i64::try_from(now_us).unwrap_or(i64::MAX));
        let marker = trigger.has_marker().then(|| trigger.name());
        let pid = std::process::id();
        let mut attempts = 0;
        let (name, written) = loop {
            let number = self.next_number.fetch_add(1, Ordering::Relaxed);
            let name = snapshot::file_name(wall_us, &sid, pid, number, trigger.name());
            let written = snapshot::write_file(&self.dir, &name, |out| {
                snapshot::assemble(&copy, marker, now_us, out)
            });
            attempts += 1;
            // A name taken already (a file left by a killed process whose pid this one
            // reuses): the next number.
            match written {
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists && attempts < 8 => {}
                written => break (name, written),
            }
        };
        match written {
            Ok(path) => {
                self.stats.snapshots.fetch_add(1, Ordering::Relaxed);
                Ok(Some(path))
            }
            Err(err) => {
                self.stats.failed.fetch_add(1, Ordering::Relaxed);
                // A lost snapshot is a lost window: said always, once per snapshot.
                tracing_trace2_dst::warning(&format!(
                    "trace2: could not write '{}' for '{ENV_NAME}' tracing: {}",
                    self.dir.join(&name).display(),
                    tracing_trace2_dst::strerror(&err)
                ));
                Err(err)
            }
        }
    }
}

/// The recorder as a format of the core layer: records each record it is asked to
/// format (and fires its triggers), and writes nothing, like
/// [`RecordingFormat`](crate::RecordingFormat).
#[derive(Clone, Debug)]
pub struct FlightFormat(pub FlightRecorder);

impl Format for FlightFormat {
    fn format(&self, record: &Record<'_>, _out: &mut Vec<u8>) {
        self.0.record(record);
    }
}

/// [`FlightFormat`] recording regions (and the data inside them) no deeper than
/// `max_nesting`, the binary target's rule
/// ([`NestedRecordingFormat`](crate::NestedRecordingFormat)): the layer asks
/// [`Format::writes`] before it formats a span's fields, so the recorder alone never
/// makes it format the fields of regions no other target writes. A region left out
/// fires no trigger either (its `region_leave` is not recorded).
#[derive(Clone, Debug)]
pub struct NestedFlightFormat {
    /// The recorder records go to.
    pub recorder: FlightRecorder,
    /// The deepest region nesting recorded (`u32::MAX`: every one).
    pub max_nesting: u32,
}

impl Format for NestedFlightFormat {
    fn format(&self, record: &Record<'_>, _out: &mut Vec<u8>) {
        if self.writes(record) {
            self.recorder.record(record);
        }
    }

    fn writes(&self, record: &Record<'_>) -> bool {
        record
            .event
            .nesting()
            .is_none_or(|nesting| nesting <= self.max_nesting)
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// A child forked while another thread of its parent holds the list of recorders
    /// (building one, or collecting them for `snapshot_all`) builds a recorder of its
    /// own and finds every recorder it has, its parent's included.
    #[test]
    fn a_child_forked_while_the_recorder_list_is_held_builds_and_snapshots() {
        let dir = tempfile::tempdir().unwrap();
        let build = || {
            FlightRecorder::builder(dir.path())
                .with_signal(false)
                .build()
        };
        let parents = build().unwrap();
        tracing_trace2_test_support::fork::forked_while_held(
            || RECORDERS.lock().unwrap_or_else(PoisonError::into_inner),
            || {
                let Some(own) = build() else { return false };
                let live = live_recorders();
                let has = |r: &FlightRecorder| live.iter().any(|l| Arc::ptr_eq(&l.inner, &r.inner));
                // Nothing recorded: nothing written, but every recorder was asked.
                has(&own) && has(&parents) && snapshot_all(Trigger::Request).is_empty()
            },
        );
    }
}
