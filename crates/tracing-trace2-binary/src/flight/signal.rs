//! The on-demand signal on Unix: `SIGUSR2` writes a snapshot of every recorder that
//! asked for it, from the signal handler itself.
//!
//! A process that has gone idle or hangs, which is when a snapshot is asked for, records
//! nothing that could start one, and a thread kept waiting for the signal cost a short
//! process more than anything else of the recorder (its start, and at exit the kernel
//! waking it to end it). So the handler writes the snapshot: it calls nothing but
//! what a handler may (`open`, `write`, `rename`, `unlink`, `close`, `getpid`,
//! `clock_gettime`, atomics), allocates nothing, and never waits for a lock. Everything
//! it needs is made with the recorder: the directory as bytes, the renumbering table,
//! the marker's batch encoder, the output buffer ([`HandlerRoom`]). It writes the ring's
//! frames from the ring's own memory and each thread's unwritten batch from its slot,
//! sealed in place, so the file is byte for byte what a thread's snapshot writes.
//!
//! What the handler cannot take at once — the ring's lock, a thread's batch while its
//! owner is recording (perhaps the very thread the signal interrupted), a snapshot
//! already being written — it does not wait for beyond a short spin: it leaves the
//! snapshot pending, and the holder, which is running, writes it in normal context when
//! it lets go (after its record, or at the end of the snapshot it is writing). A
//! recorder whose snapshot cannot be taken in place for another reason (more threads
//! than the tables hold, a batch of a stream whose header the ring has not kept yet)
//! gets it at its next record.
//!
//! A `fork` copies whatever a thread of the parent held at that moment — a snapshot
//! being written, the handler's room, a handler's place in the table — into a child
//! where that thread does not exist. So what the handler takes is marked with the
//! process that took it (its pid and `fork` generation): the child treats the parent's
//! as free, and its first snapshot takes the room back.
//!
//! The handler is installed only where the signal still has its default action, which
//! would end the process: a program that handles `SIGUSR2` itself keeps its handler
//! (and can call [`FlightRecorder::snapshot`](super::FlightRecorder::snapshot) from a
//! thread of its own instead). It restores `errno` and is installed with `SA_RESTART`.

use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

use super::ring::HeaderFacts;
use super::snapshot::{self, Assembled, Out, Stop};
use super::{RecorderState, Trigger};

/// The signal that asks for a snapshot.
pub const SNAPSHOT_SIGNAL: libc::c_int = libc::SIGUSR2;

/// How many recorders the handler serves at once (a process has one or two).
const TABLE_LEN: usize = 16;
/// The output buffer in front of a snapshot file.
const BUFFER: usize = 4 << 10;
/// The longest file name a snapshot may have here.
const NAME_MAX: usize = 255;
/// How long the handler tries again for something another thread holds: a record
/// holds a thread's batch for microseconds. The thread it interrupted holds it until
/// the handler returns: that one writes the snapshot when it lets go.
const SPIN_NS: u64 = 2_000_000;

/// One recorder the handler serves.
struct HandledRecorder {
    state: AtomicPtr<RecorderState>,
    /// Handlers looking at this entry now (a recorder is dropped only once none is),
    /// counted per process: the count in the low 16 bits, the process's tag
    /// ([`super::process_tag`]) above it. A `fork` while a handler of the parent runs
    /// copies its count into the child, where that handler does not: the child counts
    /// its own from 0, and its `unregister` does not wait for the parent's.
    users: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: HandledRecorder = HandledRecorder {
    state: AtomicPtr::new(std::ptr::null_mut()),
    users: AtomicU64::new(0),
};

/// The bits of [`HandledRecorder::users`] that count.
const USERS_COUNT: u64 = 0xFFFF;

impl HandledRecorder {
    /// Counts a handler of the process tagged `tag` in; false when 65,535 are in
    /// already (it then leaves this entry alone).
    fn enter(&self, tag: u64) -> bool {
        self.users
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |users| {
                if users & !USERS_COUNT != tag {
                    // None, or another process's (copied by a fork): this is the first.
                    Some(tag | 1)
                } else if users & USERS_COUNT == USERS_COUNT {
                    None
                } else {
                    Some(users + 1)
                }
            })
            .is_ok()
    }

    /// Counts out a handler that [`Self::enter`] counted in with `tag`.
    fn leave(&self, tag: u64) {
        let _ = self
            .users
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |users| {
                (users & !USERS_COUNT == tag && users & USERS_COUNT != 0).then(|| users - 1)
            });
    }

    /// Whether a handler of this process is looking at the entry.
    fn in_use(&self) -> bool {
        let users = self.users.load(Ordering::SeqCst);
        users & !USERS_COUNT == super::process_tag() && users & USERS_COUNT != 0
    }
}
static TABLE: [HandledRecorder; TABLE_LEN] = [EMPTY; TABLE_LEN];

/// Whether the handler is installed.
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Installs the handler (once per process); whether it is installed.
pub(super) fn install_once() -> bool {
    static ONCE: Once = Once::new();
    ONCE.call_once(install);
    INSTALLED.load(Ordering::Acquire)
}

fn install() {
    // SAFETY: a zeroed `sigaction` is a valid "query" argument; the kernel only writes
    // the current disposition into `current`.
    let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: as above; a null new action only reads the current one.
    let queried = unsafe { libc::sigaction(SNAPSHOT_SIGNAL, std::ptr::null(), &mut current) };
    if queried != 0 || current.sa_sigaction != libc::SIG_DFL {
        return;
    }
    // SAFETY: zeroed then filled: a handler that calls only async-signal-safe functions
    // (see `on_signal`), with SA_RESTART so that the host's interrupted system calls
    // resume.
    let installed = unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(SNAPSHOT_SIGNAL, &action, std::ptr::null_mut()) == 0
    };
    INSTALLED.store(installed, Ordering::Release);
}

/// What a snapshot in the handler works in, made with the recorder.
pub(super) struct HandlerRoom {
    snap: snapshot::InPlaceTables,
    /// The directory, with a `/` after it.
    dir: Vec<u8>,
    /// The file's path and its temporary path, NUL-terminated (room made beforehand).
    path: Vec<u8>,
    temp: Vec<u8>,
    file: FileOut,
}

impl HandlerRoom {
    /// Room for snapshots into `dir`. `None` where the path is not bytes a C call
    /// takes (a NUL in it).
    pub fn new(dir: &std::path::Path) -> Option<HandlerRoom> {
        use std::os::unix::ffi::OsStrExt;
        let mut dir = dir.as_os_str().as_bytes().to_vec();
        if dir.contains(&0) {
            return None;
        }
        if !dir.ends_with(b"/") {
            dir.push(b'/');
        }
        let room = dir.len() + NAME_MAX + 8;
        Some(HandlerRoom {
            snap: snapshot::InPlaceTables::new(),
            dir,
            path: Vec::with_capacity(room),
            temp: Vec::with_capacity(room),
            file: FileOut {
                fd: -1,
                buffer: Vec::with_capacity(BUFFER),
                errno: 0,
            },
        })
    }
}

/// Adds `state` to the recorders the handler serves; the entry's index, for
/// [`unregister`]. `None` when the table is full (the recorder answers no signal).
pub(super) fn register(state: &RecorderState) -> Option<usize> {
    let ptr = std::ptr::from_ref(state).cast_mut();
    TABLE.iter().position(|entry| {
        entry
            .state
            .compare_exchange(
                std::ptr::null_mut(),
                ptr,
                Ordering::SeqCst,
                Ordering::SeqCst,
            )
            .is_ok()
    })
}

/// Takes a recorder out of the table before it is dropped, and waits for any handler
/// still looking at it.
pub(super) fn unregister(index: usize) {
    let entry = &TABLE[index];
    entry.state.store(std::ptr::null_mut(), Ordering::SeqCst);
    while entry.in_use() {
        std::thread::yield_now();
    }
}

/// A thread took the writing claim over from a parent process's thread (this process
/// was forked while that one wrote a snapshot): the handler's room, which only the
/// claim's holder takes, may have been locked by it, and nothing would unlock it.
pub(super) fn after_claim_from_parent(state: &RecorderState) {
    if let Some(room) = &state.signal_scratch {
        // SAFETY: only the holder of the writing claim takes the room. The claim was a
        // parent's until this thread took it, so whoever locked the room was a thread of
        // the parent, which does not exist in this process; and no other thread of this
        // process can take the room while this one holds the claim.
        unsafe { room.unlock_after_fork() };
    }
}

extern "C" fn on_signal(_: libc::c_int) {
    let errno = errno_location();
    // SAFETY: reading and writing errno is async-signal-safe; it is put back so the
    // interrupted code sees its own.
    let saved = unsafe { *errno };
    let tag = super::process_tag();
    for entry in &TABLE {
        if !entry.enter(tag) {
            continue;
        }
        let state = entry.state.load(Ordering::SeqCst);
        if !state.is_null() {
            // SAFETY: a recorder's state is taken out of the table (`unregister`, from
            // its `Drop`) and then waits until no handler of its process is counted in
            // `users` before it is freed; this handler was counted in before the
            // pointer was read (both SeqCst), under this process's tag (a handler that
            // ran in a forked child before the `fork` handler counted the generation
            // ran on the child's only thread and so returned before any `unregister`
            // of the child could start), so either the pointer read is null or the
            // state lives until the count goes down below.
            serve(unsafe { &*state });
        }
        entry.leave(tag);
    }
    // SAFETY: as above.
    unsafe { *errno = saved };
}

/// The handler's work for one recorder: the signal's snapshot (and one a thread left
/// pending meanwhile), in place; what it cannot take in place is left pending for a
/// thread.
fn serve(state: &RecorderState) {
    // First, so that whoever writes now, or holds what a snapshot needs, sees it.
    state.signal_pending.store(true, Ordering::SeqCst);
    loop {
        if !state.take_writing() {
            // A snapshot is being written: its writer serves the signal after it.
            return;
        }
        let mut left = false;
        if let Some(trigger) = super::take_trigger(&state.pending)
            && !write_in_place(state, trigger)
        {
            super::put_trigger(&state.pending, trigger);
            left = true;
        }
        if !left
            && state.signal_pending.swap(false, Ordering::SeqCst)
            && !write_in_place(state, Trigger::Signal)
        {
            state.signal_pending.store(true, Ordering::SeqCst);
            left = true;
        }
        state.writing.release();
        if left {
            // Held by a thread (the one interrupted, or one slower than the spin): it
            // looks for this when it lets go.
            state.deferred.store(true, Ordering::SeqCst);
            return;
        }
        // A trigger that came while this wrote, whose caller saw `writing` still set.
        if !state.has_pending() {
            return;
        }
    }
}

/// Writes a snapshot of `state` for `trigger` from the handler; false when it must be
/// left to a thread (something it needs stayed held for the whole spin).
fn write_in_place(state: &RecorderState, trigger: Trigger) -> bool {
    let Some(started) = tracing_trace2_dst::clock::started() else {
        // Nothing was recorded yet (a record reads the clock).
        return true;
    };
    let Some(scratch) = &state.signal_scratch else {
        return false;
    };
    let begun = monotonic_ns();
    loop {
        match try_in_place(state, scratch, started, trigger) {
            Ok(_) => return true,
            Err(Stop::Io(_)) => {
                state.stats.failed.fetch_add(1, Ordering::Relaxed);
                // Given to a thread, which reports the failure (a handler cannot
                // format the warning) or writes it after all.
                return false;
            }
            Err(Stop::Unavailable) => {
                if monotonic_ns().saturating_sub(begun) >= SPIN_NS {
                    return false;
                }
                std::hint::spin_loop();
            }
        }
    }
}

fn try_in_place(
    state: &RecorderState,
    scratch: &crate::slots::SpinLock<HandlerRoom>,
    started: &tracing_trace2_dst::clock::ProcessStart,
    trigger: Trigger,
) -> Result<Assembled, Stop> {
    // Only the holder of `writing` reaches the scratch: never held here (one that a
    // parent's thread held when this process was forked was freed with its claim).
    let mut scratch = scratch.try_lock().ok_or(Stop::Unavailable)?;
    let HandlerRoom {
        snap,
        dir,
        path,
        temp,
        file,
    } = &mut *scratch;
    let now_us = started.t_abs_us();
    let wall_us = started
        .wall_us()
        .saturating_add(i64::try_from(now_us).unwrap_or(i64::MAX));
    let marker = trigger.has_marker().then(|| trigger.name());
    let mut target = SnapshotFile {
        state,
        dir,
        path,
        temp,
        file,
        wall_us,
        trigger,
    };
    let done = state
        .writer
        .with_batches(|batches| {
            state.ring.try_view(now_us, |view| {
                let assembled = snapshot::assemble_in_place(
                    view,
                    batches,
                    marker,
                    (now_us, wall_us),
                    snap,
                    &mut target,
                );
                match assembled {
                    Ok(Assembled::Written) => target
                        .file
                        .finish(target.path, target.temp)
                        .map(|()| Assembled::Written),
                    Ok(Assembled::Nothing) => Ok(Assembled::Nothing),
                    Err(stop) => {
                        target.file.abandon(target.temp);
                        Err(stop)
                    }
                }
            })
        })
        .map_err(|_| Stop::Unavailable)?
        .ok_or(Stop::Unavailable)??;
    if done == Assembled::Written {
        state.stats.snapshots.fetch_add(1, Ordering::Relaxed);
    }
    Ok(done)
}

/// The snapshot file the handler writes: opened when the snapshot knows its session.
struct SnapshotFile<'a> {
    state: &'a RecorderState,
    dir: &'a [u8],
    path: &'a mut Vec<u8>,
    temp: &'a mut Vec<u8>,
    file: &'a mut FileOut,
    wall_us: i64,
    trigger: Trigger,
}

impl Out for SnapshotFile<'_> {
    /// Opens the snapshot's temporary file, created exclusively: under the next number
    /// when a name is taken (a file left by a killed process whose pid this one reuses).
    fn begin(&mut self, newest: &HeaderFacts) -> Result<(), Stop> {
        let pid = std::process::id();
        let mut name = [0u8; NAME_MAX];
        let (dir, path, temp) = (self.dir, &mut *self.path, &mut *self.temp);
        for _ in 0..8 {
            let number = self.state.next_number.fetch_add(1, Ordering::Relaxed);
            let n = snapshot::file_name_into(
                &mut name,
                self.wall_us,
                &newest.name_part,
                pid,
                number,
                self.trigger.name(),
            )
            .ok_or(Stop::Unavailable)?;
            let name = &name[..n];
            // Within the room made for them: no allocation.
            if dir.len() + n + 7 > path.capacity().min(temp.capacity()) {
                return Err(Stop::Unavailable);
            }
            path.clear();
            path.extend_from_slice(dir);
            path.extend_from_slice(name);
            path.push(0);
            temp.clear();
            temp.extend_from_slice(dir);
            temp.push(b'.');
            temp.extend_from_slice(name);
            temp.extend_from_slice(b".tmp\0");
            match self.file.create(temp) {
                Err(libc::EEXIST) => continue,
                Err(errno) => return Err(Stop::Io(errno)),
                Ok(()) => return Ok(()),
            }
        }
        Err(Stop::Io(libc::EEXIST))
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), Stop> {
        self.file.put(bytes)
    }
}

/// A snapshot file being written from the handler, through a buffer made beforehand.
struct FileOut {
    fd: libc::c_int,
    buffer: Vec<u8>,
    /// The first failure's `errno`.
    errno: i32,
}

impl FileOut {
    /// Creates `path` (NUL-terminated) exclusively, as `OpenOptions::create_new` does.
    fn create(&mut self, path: &[u8]) -> Result<(), i32> {
        self.buffer.clear();
        self.errno = 0;
        // SAFETY: `path` ends with a NUL (the caller put it there); `open` is
        // async-signal-safe.
        let fd = unsafe {
            libc::open(
                path.as_ptr().cast(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                0o666 as libc::c_uint,
            )
        };
        if fd < 0 {
            return Err(last_errno());
        }
        self.fd = fd;
        Ok(())
    }

    /// Writes all of `bytes` to the file.
    fn write_all(&mut self, mut bytes: &[u8]) -> Result<(), Stop> {
        while !bytes.is_empty() {
            // SAFETY: writes from a live slice to a descriptor this module opened.
            let n = unsafe { libc::write(self.fd, bytes.as_ptr().cast(), bytes.len()) };
            if n < 0 {
                let errno = last_errno();
                if errno == libc::EINTR {
                    continue;
                }
                self.errno = errno;
                return Err(Stop::Io(errno));
            }
            if n == 0 {
                self.errno = libc::EIO;
                return Err(Stop::Io(libc::EIO));
            }
            bytes = &bytes[n as usize..];
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), Stop> {
        let buffer = std::mem::take(&mut self.buffer);
        let written = self.write_all(&buffer);
        self.buffer = buffer;
        self.buffer.clear();
        written
    }

    /// Writes what is buffered, closes the file and renames it to `path`.
    fn finish(&mut self, path: &[u8], temp: &[u8]) -> Result<(), Stop> {
        let flushed = self.flush();
        // SAFETY: closes the descriptor this module opened, once.
        let closed = unsafe { libc::close(self.fd) };
        self.fd = -1;
        let result = flushed.and_then(|()| {
            if closed != 0 {
                return Err(Stop::Io(last_errno()));
            }
            // SAFETY: both paths end with a NUL; `rename` is async-signal-safe.
            if unsafe { libc::rename(temp.as_ptr().cast(), path.as_ptr().cast()) } != 0 {
                return Err(Stop::Io(last_errno()));
            }
            Ok(())
        });
        if result.is_err() {
            // SAFETY: `temp` ends with a NUL; this call created the file.
            unsafe { libc::unlink(temp.as_ptr().cast()) };
        }
        result
    }

    /// Closes and removes the temporary file after a failure, if one was opened.
    fn abandon(&mut self, temp: &[u8]) {
        if self.fd < 0 {
            return;
        }
        // SAFETY: closes the descriptor this module opened, once; `temp` ends with a
        // NUL and names the file this call created.
        unsafe {
            libc::close(self.fd);
            libc::unlink(temp.as_ptr().cast());
        }
        self.fd = -1;
    }
}

impl FileOut {
    /// Buffers `bytes` (or writes them, when the buffer has no room for them).
    fn put(&mut self, bytes: &[u8]) -> Result<(), Stop> {
        if self.buffer.len() + bytes.len() > self.buffer.capacity() {
            self.flush()?;
        }
        if bytes.len() >= self.buffer.capacity() {
            return self.write_all(bytes);
        }
        // Within capacity: no allocation.
        self.buffer.extend_from_slice(bytes);
        Ok(())
    }
}

/// The calling thread's `errno` now.
fn last_errno() -> i32 {
    // SAFETY: reads the calling thread's errno slot.
    unsafe { *errno_location() }
}

/// `CLOCK_MONOTONIC` in nanoseconds (`clock_gettime` is async-signal-safe).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: fills the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// Where the calling thread's `errno` lives.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn errno_location() -> *mut libc::c_int {
    // SAFETY: returns the calling thread's errno slot; no precondition.
    unsafe { libc::__errno_location() }
}

/// Where the calling thread's `errno` lives.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn errno_location() -> *mut libc::c_int {
    // SAFETY: returns the calling thread's errno slot; no precondition.
    unsafe { libc::__error() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flight::{Claimed, FlightRecorder};
    use crate::record::{Callsite, Record, Timestamp, Trace2Event};
    use crate::{BinaryWriter, MIN_BATCH_SIZE, TextFormat, TextOptions};
    use std::sync::{Arc, Barrier};

    const SID: &str = "20260101T000000.000000Z-H0123abcd-P00001234";

    fn record(r: &FlightRecorder, thread: &str, event: Trace2Event<'_>) {
        let t = tracing_trace2_dst::clock::t_abs_us();
        let wall = tracing_trace2_dst::clock::start().wall_us() + t as i64;
        r.record(&Record {
            event,
            time: Timestamp {
                wall_us: wall,
                t_abs_us: t,
            },
            sid: SID,
            depth: 0,
            thread,
            callsite: Callsite::default(),
            open_regions: 0,
        });
    }

    fn say(r: &FlightRecorder, thread: &str, msg: &str) {
        record(r, thread, Trace2Event::Printf { msg: Some(msg) });
    }

    /// The snapshot the signal handler would write now, into memory.
    fn in_place(
        r: &FlightRecorder,
        scratch: &mut HandlerRoom,
        trigger: Trigger,
        now_us: u64,
    ) -> Option<Vec<u8>> {
        let state = &r.inner;
        let wall_us = tracing_trace2_dst::clock::start().wall_us() + now_us as i64;
        let marker = trigger.has_marker().then(|| trigger.name());
        let mut out = Vec::new();
        let assembled = state
            .writer
            .with_batches(|batches| {
                state.ring.try_view(now_us, |view| {
                    snapshot::assemble_in_place(
                        view,
                        batches,
                        marker,
                        (now_us, wall_us),
                        &mut scratch.snap,
                        &mut out,
                    )
                })
            })
            .unwrap()
            .unwrap()
            .unwrap();
        (assembled == Assembled::Written).then_some(out)
    }

    fn assert_complete(bytes: &[u8]) -> String {
        let mut text = Vec::new();
        let report =
            crate::decode_to_text(bytes, &mut text, &TextOptions::new(TextFormat::Perf)).unwrap();
        assert!(report.is_complete(), "{report}");
        String::from_utf8(text).unwrap()
    }

    #[test]
    fn a_snapshot_in_place_is_the_copy_paths_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let r = FlightRecorder::builder(dir.path())
            .with_signal(false)
            .with_min_age(std::time::Duration::from_secs(3600))
            .with_writer(BinaryWriter::builder().with_batch_size(MIN_BATCH_SIZE))
            .build()
            .unwrap();
        // One scratch for every snapshot, as the handler's: the marker's encoder is
        // reused.
        let mut scratch = HandlerRoom::new(dir.path()).unwrap();
        // Nothing recorded: nothing to write, both ways.
        assert!(in_place(&r, &mut scratch, Trigger::Signal, 1).is_none());
        record(&r, "main", Trace2Event::Version { exe: "2.47.3" });
        record(&r, "main", Trace2Event::Start { argv: &["t", "x"] });
        let threads = 3;
        let recorded = Arc::new(Barrier::new(threads + 1));
        let compared = Arc::new(Barrier::new(threads + 1));
        std::thread::scope(|scope| {
            for t in 0..threads {
                let (r, recorded, compared) = (&r, &recorded, &compared);
                scope.spawn(move || {
                    let name = format!("th{t:02}:work");
                    for round in 0..3 {
                        // Some batches fill (into the ring), the last stays in the slot.
                        for i in 0..(40 + 25 * t) {
                            say(r, &name, &format!("round {round} line {i} of thread {t}"));
                        }
                        recorded.wait();
                        compared.wait();
                    }
                });
            }
            for round in 0..3 {
                say(&r, "main", &format!("main in round {round}"));
                recorded.wait();
                for trigger in [Trigger::Signal, Trigger::Exit(3)] {
                    let now_us = tracing_trace2_dst::clock::t_abs_us();
                    let ours = in_place(&r, &mut scratch, trigger, now_us).expect("a snapshot");
                    // The copy path hands the batches over to the ring first.
                    r.inner.writer.flush_all();
                    let theirs = r.snapshot_bytes_at(trigger, now_us);
                    assert!(
                        ours == theirs,
                        "round {round}, {trigger:?}: the bytes differ"
                    );
                    let text = assert_complete(&ours);
                    assert!(text.contains(&format!("main in round {round}")), "{text}");
                    assert!(text.contains(&format!("round {round} line 39 of thread 0")));
                    assert!(text.contains(&format!("round {round} line 89 of thread 2")));
                    assert_eq!(text.contains("trigger:signal"), trigger == Trigger::Signal);
                }
                compared.wait();
            }
        });
    }

    /// The handler's own writing (called here in normal context): a file named as the
    /// copy path names it, whole, no temporary file left; and after a failure none.
    #[test]
    fn the_handlers_writer_writes_a_whole_file_and_cleans_up_after_a_failure() {
        let dir = tempfile::tempdir().unwrap();
        let r = FlightRecorder::builder(dir.path())
            .with_signal(false)
            .build()
            .unwrap();
        let state = &r.inner;
        let scratch = crate::slots::SpinLock::new(HandlerRoom::new(dir.path()).unwrap());
        let started = tracing_trace2_dst::clock::started().unwrap();
        assert_eq!(
            try_in_place(state, &scratch, started, Trigger::Signal),
            Ok(Assembled::Nothing)
        );
        record(&r, "main", Trace2Event::Version { exe: "2.47.3" });
        record(&r, "main", Trace2Event::Start { argv: &["t"] });
        say(&r, "main", "in the slot");
        for trigger in [Trigger::Signal, Trigger::Exit(2)] {
            assert_eq!(
                try_in_place(state, &scratch, started, trigger),
                Ok(Assembled::Written)
            );
        }
        let mut files: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        files.sort();
        assert_eq!(files.len(), 2, "{files:?}");
        assert!(files[0].ends_with("-P00001234-") || files[0].contains("-P00001234-"));
        assert!(
            files.iter().any(|f| f.ends_with("-000-signal.t2b")),
            "{files:?}"
        );
        assert!(
            files.iter().any(|f| f.ends_with("-001-exit.t2b")),
            "{files:?}"
        );
        for f in &files {
            let text = assert_complete(&std::fs::read(dir.path().join(f)).unwrap());
            assert!(text.contains("in the slot"), "{text}");
        }
        assert_eq!(r.stats().snapshots, 2);
        // The directory gone: an error, and nothing left behind.
        let gone = tempfile::tempdir().unwrap();
        let scratch =
            crate::slots::SpinLock::new(HandlerRoom::new(&gone.path().join("x")).unwrap());
        assert_eq!(
            try_in_place(state, &scratch, started, Trigger::Signal),
            Err(Stop::Io(libc::ENOENT))
        );
        assert_eq!(std::fs::read_dir(gone.path()).unwrap().count(), 0);
    }

    /// A `fork` while a thread of the parent wrote a snapshot in the handler leaves the
    /// child the writing claim set and the handler's room locked, for a thread it does
    /// not have. Made here by hand: the claim under another process's tag, the room
    /// locked by a guard never dropped. The handler takes both over and writes; a claim
    /// of this process still makes it leave the snapshot to the holder.
    #[test]
    fn a_snapshot_a_parent_process_was_writing_does_not_block_the_child() {
        let dir = tempfile::tempdir().unwrap();
        let r = FlightRecorder::builder(dir.path())
            .with_writer(BinaryWriter::builder().with_batch_size(MIN_BATCH_SIZE))
            .build()
            .unwrap();
        let state = &r.inner;
        let room = state
            .signal_scratch
            .as_ref()
            .expect("the handler installed");
        record(&r, "main", Trace2Event::Version { exe: "2.47.3" });
        record(&r, "main", Trace2Event::Start { argv: &["t"] });
        (0..50).for_each(|i| say(&r, "main", &format!("line {i}")));
        let files = || {
            let mut files: Vec<String> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            files.sort();
            files
        };
        let ours = super::super::process_tag();
        // Held by a thread of this process: left to it.
        state.writing.0.store(ours, Ordering::SeqCst);
        serve(state);
        assert!(files().is_empty());
        assert_eq!(state.writing.0.load(Ordering::SeqCst), ours);
        // Held by a thread of the parent, with the room.
        state.writing.0.store(ours + (1 << 32), Ordering::SeqCst);
        std::mem::forget(room.lock());
        serve(state);
        assert_eq!(state.writing.0.load(Ordering::SeqCst), 0);
        let written = files();
        assert_eq!(written.len(), 1, "{written:?}");
        assert!(written[0].ends_with("-signal.t2b"), "{written:?}");
        let text = assert_complete(&std::fs::read(dir.path().join(&written[0])).unwrap());
        assert!(text.contains("line 49"), "{text}");
        // And the room is free again for the next.
        assert!(room.try_lock().is_some());
        serve(state);
        assert_eq!(files().len(), 2);
        assert_eq!(r.stats().snapshots, 2);
    }

    #[test]
    fn the_writing_claim_of_another_process_is_free() {
        let claim = super::super::WritingClaim::new();
        let (ours, parents) = (0x1234_0000_0005_0000, 0x1233_0000_0004_0000);
        assert_eq!(claim.take_as(ours), Claimed::Free);
        assert_eq!(claim.take_as(ours), Claimed::Held);
        claim.release();
        claim.0.store(parents, Ordering::SeqCst);
        assert_eq!(claim.take_as(ours), Claimed::FromParent);
        assert_eq!(claim.take_as(ours), Claimed::Held);
        // The same pid in another generation (a grandparent's pid reused) is another
        // process too.
        assert_eq!(claim.take_as(ours + (1 << 16)), Claimed::FromParent);
        claim.release();
        assert_eq!(claim.take(), Claimed::Free);
    }

    /// Handlers counted in a parent that was forked while they ran are not this
    /// process's: a recorder dropped in the child does not wait for them.
    #[test]
    fn handlers_are_counted_per_process() {
        let entry = EMPTY;
        let ours = super::super::process_tag();
        let parents = ours + (1 << 32);
        assert_eq!(ours & USERS_COUNT, 0);
        entry.users.store(parents | 2, Ordering::SeqCst);
        assert!(!entry.in_use());
        assert!(entry.enter(ours));
        assert!(entry.in_use());
        entry.leave(parents);
        assert!(entry.in_use());
        entry.leave(ours);
        assert!(!entry.in_use());
        entry.leave(ours);
        assert_eq!(entry.users.load(Ordering::SeqCst), ours);
        // A full count: the handler passes the entry by rather than wrap it.
        entry.users.store(ours | USERS_COUNT, Ordering::SeqCst);
        assert!(!entry.enter(ours));
        assert!(entry.in_use());
    }

    #[test]
    fn file_names_in_place_are_the_copy_paths() {
        let mut name = [0u8; NAME_MAX];
        for (wall_us, sid, pid, number) in [
            (
                1_795_303_297_816_635,
                "a/20260101T000001.000000Z-H0a-P00000002",
                2,
                1,
            ),
            (0, "a/b c", 7, 2),
            (-1_000_001, "x", 4_000_000_000, 12_345),
        ] {
            let part = super::super::ring::name_part(sid);
            let n =
                snapshot::file_name_into(&mut name, wall_us, &part, pid, number, "signal").unwrap();
            assert_eq!(
                std::str::from_utf8(&name[..n]).unwrap(),
                snapshot::file_name(wall_us, sid, pid, number, "signal")
            );
        }
        assert!(snapshot::file_name_into(&mut [0; 20], 0, "x", 1, 1, "signal").is_none());
    }
}
