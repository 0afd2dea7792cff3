//! The per-thread slots of a writer and how a slot changes hands, without a lock on
//! the event path.
//!
//! Each thread that records gets a [`ThreadSlot`] holding its batch. Slots sit in an
//! append-only, lock-free list, so that an exit-time flusher can reach every thread's
//! batch. A slot's state word says who may touch its data:
//!
//! | state | meaning |
//! |---|---|
//! | `FREE` | no thread owns it; the next new thread may take it |
//! | `IDLE` | owned by a thread that is not inside an event |
//! | `BUSY` | its owner is encoding (or writing) |
//! | `FLUSHING` | another thread is writing the batch out |
//!
//! The owner moves `IDLE → BUSY` with one compare-and-swap per event and back with a
//! store; a flusher moves `IDLE → FLUSHING` and back, so the two never touch the data
//! at the same time. An owner that finds the slot `FLUSHING` waits the few
//! microseconds the write takes. This module holds all the `unsafe` of the writer.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::encode::BatchEncoder;

const FREE: u32 = 0;
const IDLE: u32 = 1;
const BUSY: u32 = 2;
const FLUSHING: u32 = 3;

/// What a slot holds besides its state.
pub(crate) struct SlotData {
    /// The thread's batch.
    pub enc: BatchEncoder,
    /// The claim of the thread that owns the slot (a new number for every owner), so a
    /// thread whose claim went stale (the slot was freed and taken again) notices.
    pub claim: u64,
    /// The `sid` (address, length) and depth last checked against the stream, so that
    /// the usual record costs a comparison of integers.
    pub sid: (usize, usize),
    /// See `sid`.
    pub depth: u32,
    /// The batch (stream generation, batch number) the idle flusher found unwritten at
    /// its last visit: still there at the next visit, it is old enough to write.
    pub flusher_seen: Option<(u64, u64)>,
}

/// One thread's batch and its state word.
pub(crate) struct ThreadSlot {
    state: AtomicU32,
    /// The next slot of the list; set before the slot is published, never changed.
    next: *const ThreadSlot,
    data: UnsafeCell<SlotData>,
}

// SAFETY: `data` is only reached through a `Guard`, which exists only while this thread
// moved the state word to BUSY or FLUSHING (or, after a fork, is the only thread); `next`
// is immutable once the slot is published.
unsafe impl Sync for ThreadSlot {}
// SAFETY: as above; nothing in a slot is tied to a thread.
unsafe impl Send for ThreadSlot {}

/// Exclusive access to a slot's data; gives the slot back when dropped.
pub(crate) struct Guard<'a> {
    slot: &'a ThreadSlot,
    release_to: u32,
}

impl Deref for Guard<'_> {
    type Target = SlotData;
    fn deref(&self) -> &SlotData {
        // SAFETY: the guard's existence means this thread holds the slot exclusively.
        unsafe { &*self.slot.data.get() }
    }
}

impl DerefMut for Guard<'_> {
    fn deref_mut(&mut self) -> &mut SlotData {
        // SAFETY: as in `deref`, and `&mut self` makes this the only borrow.
        unsafe { &mut *self.slot.data.get() }
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        self.slot.state.store(self.release_to, Ordering::Release);
    }
}

impl Guard<'_> {
    /// Gives the slot up for good: the next new thread may take it.
    pub fn free(mut self) {
        self.release_to = FREE;
    }

    /// The slot this guard holds.
    pub fn slot(&self) -> &ThreadSlot {
        self.slot
    }
}

/// Waits a little: spins first, then lets other threads run.
fn backoff(round: &mut u32) {
    if *round < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
    *round = round.saturating_add(1);
}

impl ThreadSlot {
    /// The owner's access for one event. Waits while a flusher holds the slot; `None`
    /// when the slot is free (it was taken from the thread: after a fork, or because
    /// the writer was closed).
    #[inline]
    pub fn acquire(&self) -> Option<Guard<'_>> {
        let mut round = 0;
        loop {
            match self
                .state
                .compare_exchange_weak(IDLE, BUSY, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => {
                    return Some(Guard {
                        slot: self,
                        release_to: IDLE,
                    });
                }
                Err(FREE) => return None,
                // A flusher (or a spurious failure): try again.
                Err(_) => backoff(&mut round),
            }
        }
    }

    /// A flusher's access. `None` if the slot is free, or still in use after `wait`.
    pub fn acquire_for_flush(&self, wait: Duration) -> Option<Guard<'_>> {
        let mut round = 0;
        let deadline = (!wait.is_zero()).then(|| Instant::now() + wait);
        loop {
            match self.state.compare_exchange_weak(
                IDLE,
                FLUSHING,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    return Some(Guard {
                        slot: self,
                        release_to: IDLE,
                    });
                }
                Err(FREE) => return None,
                Err(_) => {
                    if deadline.is_none_or(|d| Instant::now() >= d) && round > 64 {
                        return None;
                    }
                    backoff(&mut round);
                }
            }
        }
    }

    /// A flusher's access if the slot is idle now: `Ok(None)` for a free slot,
    /// `Err(())` for one in use (by its owner or another flusher). Never waits: for a
    /// signal handler, whose interrupted thread may be the one holding it.
    #[cfg_attr(not(unix), allow(dead_code))] // used by the `SIGUSR2` handler (Unix)
    pub fn try_acquire_for_flush(&self) -> Result<Option<Guard<'_>>, ()> {
        match self
            .state
            .compare_exchange(IDLE, FLUSHING, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => Ok(Some(Guard {
                slot: self,
                release_to: IDLE,
            })),
            Err(FREE) => Ok(None),
            Err(_) => Err(()),
        }
    }

    /// Whether `other` is this very slot.
    pub fn is(&self, other: &ThreadSlot) -> bool {
        ptr::eq(self, other)
    }
}

/// A slot's address, kept in a thread-local while the thread owns the slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlotPtr(*const ThreadSlot);

impl SlotPtr {
    /// No slot.
    pub const NONE: SlotPtr = SlotPtr(ptr::null());
}

/// The slots of one writer: an append-only list.
pub(crate) struct SlotList {
    head: AtomicPtr<ThreadSlot>,
}

impl SlotList {
    /// An empty list.
    pub fn new() -> SlotList {
        SlotList {
            head: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// The slot behind `ptr`, which must come from this list ([`Self::take`]); `None`
    /// for [`SlotPtr::NONE`].
    pub fn get(&self, ptr: SlotPtr) -> Option<&ThreadSlot> {
        debug_assert!(ptr.0.is_null() || self.iter().any(|s| ptr::eq(s, ptr.0)));
        // SAFETY: a non-null `SlotPtr` is only made by `take` from a slot of this list,
        // and the list frees its slots only when it is dropped, which the `&self`
        // borrow rules out for the returned lifetime.
        unsafe { ptr.0.as_ref() }
    }

    /// Takes a free slot, or adds a new one made by `make`, and returns it held by the
    /// calling thread as its owner.
    pub fn take(&self, make: impl FnOnce() -> SlotData) -> (SlotPtr, Guard<'_>) {
        for slot in self.iter() {
            if slot
                .state
                .compare_exchange(FREE, BUSY, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                let guard = Guard {
                    slot,
                    release_to: IDLE,
                };
                return (SlotPtr(slot), guard);
            }
        }
        let slot = Box::into_raw(Box::new(ThreadSlot {
            state: AtomicU32::new(BUSY),
            next: ptr::null(),
            data: UnsafeCell::new(make()),
        }));
        let mut head = self.head.load(Ordering::Acquire);
        loop {
            // SAFETY: `slot` is ours alone until the exchange below publishes it.
            unsafe { (*slot).next = head };
            match self
                .head
                .compare_exchange_weak(head, slot, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => break,
                Err(current) => head = current,
            }
        }
        // SAFETY: the slot is in the list now and lives as long as the list.
        let slot = unsafe { &*slot };
        (
            SlotPtr(slot),
            Guard {
                slot,
                release_to: IDLE,
            },
        )
    }

    /// Every slot, newest first.
    pub fn iter(&self) -> impl Iterator<Item = &ThreadSlot> {
        let mut next = self.head.load(Ordering::Acquire).cast_const();
        std::iter::from_fn(move || {
            // SAFETY: published slots live as long as the list, and their `next` was
            // written before they were published (Release/Acquire on `head`).
            let slot = unsafe { next.as_ref()? };
            next = slot.next;
            Some(slot)
        })
    }

    /// Frees every slot after `fork`, in the child, where the threads that owned them
    /// no longer exist: `clean` empties each one's data first.
    ///
    /// # Safety
    ///
    /// No other thread may use any slot of the list meanwhile. In a freshly forked
    /// child only the forking thread exists; the writer keeps threads the child starts
    /// later waiting until this is done.
    pub unsafe fn reset_after_fork(&self, mut clean: impl FnMut(&mut SlotData)) {
        for slot in self.iter() {
            // SAFETY: the caller guarantees that nothing else touches the slots.
            clean(unsafe { &mut *slot.data.get() });
            slot.state.store(FREE, Ordering::Release);
        }
    }
}

impl Drop for SlotList {
    fn drop(&mut self) {
        let mut next = *self.head.get_mut();
        while !next.is_null() {
            // SAFETY: every slot was made by `Box::into_raw` in `take` and is freed once,
            // here, when nothing can reach the list any more.
            let slot = unsafe { Box::from_raw(next) };
            next = slot.next.cast_mut();
        }
    }
}

/// A lock for what is touched only when a stream starts or a header is written. A spin
/// lock rather than a `Mutex` so that a forked child can take it back
/// ([`SpinLock::unlock_after_fork`]) even if a thread that no longer exists held it.
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: `value` is only reached through a `SpinGuard`, which exists only while
// `locked` was taken by the calling thread.
unsafe impl<T: Send> Sync for SpinLock<T> {}

/// Access to a [`SpinLock`]'s value.
pub(crate) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> SpinLock<T> {
    /// An unlocked lock.
    pub fn new(value: T) -> Self {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Waits for the lock.
    pub fn lock(&self) -> SpinGuard<'_, T> {
        let mut round = 0;
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            backoff(&mut round);
        }
        SpinGuard { lock: self }
    }

    /// The lock if it is free now, without waiting (a signal handler's way: the holder
    /// may be the very thread it interrupted).
    #[cfg_attr(not(unix), allow(dead_code))] // used by the `SIGUSR2` handler (Unix)
    pub fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        self.locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| SpinGuard { lock: self })
    }

    /// Releases the lock whoever held it.
    ///
    /// # Safety
    ///
    /// Only for a forked child, whose other threads are gone: the holder, if any, no
    /// longer exists, and no one else may be using the lock meanwhile.
    pub unsafe fn unlock_after_fork(&self) {
        self.locked.store(false, Ordering::Release);
    }
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock, and `&mut self` makes this the only borrow.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn data() -> SlotData {
        SlotData {
            enc: BatchEncoder::new(4096, 0),
            claim: 0,
            sid: (0, 0),
            depth: 0,
            flusher_seen: None,
        }
    }

    #[test]
    fn owner_and_flusher_exclude_each_other() {
        let list = SlotList::new();
        let (ptr, guard) = list.take(data);
        let slot = list.get(ptr).unwrap();
        // Held by the owner: a flusher that does not wait gets nothing.
        assert!(slot.acquire_for_flush(Duration::ZERO).is_none());
        drop(guard);
        let flushing = slot.acquire_for_flush(Duration::ZERO).unwrap();
        drop(flushing);
        let mut own = slot.acquire().unwrap();
        own.claim = 7;
        drop(own);
        assert_eq!(slot.acquire().unwrap().claim, 7);
    }

    #[test]
    fn freed_slots_are_taken_again() {
        let list = SlotList::new();
        let (a, guard) = list.take(data);
        guard.free();
        assert!(list.get(a).unwrap().acquire().is_none());
        let (b, _guard) = list.take(|| panic!("a free slot exists"));
        assert_eq!(a, b);
        assert_eq!(list.iter().count(), 1);
    }

    /// Rounds of the concurrent tests: fewer under Miri (each step is interpreted, and
    /// Miri explores the threads' interleavings on its own schedule).
    const ROUNDS: u32 = if cfg!(miri) { 300 } else { 20_000 };

    #[test]
    fn concurrent_owner_and_flusher_count_exactly() {
        let list = SlotList::new();
        let (ptr, guard) = list.take(data);
        drop(guard);
        let slot = list.get(ptr).unwrap();
        let flushed = std::thread::scope(|scope| {
            let flusher = scope.spawn(|| {
                let mut flushed = 0;
                for _ in 0..ROUNDS {
                    if let Some(mut g) = slot.acquire_for_flush(Duration::from_millis(10)) {
                        g.claim += 1;
                        flushed += 1;
                    }
                }
                flushed
            });
            for _ in 0..ROUNDS {
                let mut g = slot.acquire().unwrap();
                g.claim += 1;
            }
            flusher.join().unwrap()
        });
        assert!(flushed > 0);
        // No increment was lost to a race between the two.
        assert_eq!(slot.acquire().unwrap().claim, u64::from(ROUNDS) + flushed);
    }

    #[test]
    fn spin_lock_serialises() {
        let lock = Arc::new(SpinLock::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let lock = Arc::clone(&lock);
                std::thread::spawn(move || {
                    for _ in 0..ROUNDS / 2 {
                        *lock.lock() += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*lock.lock(), 4 * u64::from(ROUNDS / 2));
    }
}
