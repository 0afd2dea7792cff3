//! The re-entrancy flag and the in-flight marks.
//!
//! The flag marks a thread that is inside the layer (or inside the deferred writer's
//! worker), so that a `tracing` call raised from there (a field's `Debug` impl that
//! logs, a sink that logs) is dropped instead of recursing or deadlocking.
//!
//! One exception: a field's `Debug` or `Display` impl that panics while the layer reads
//! it. The panic hook then runs on that thread with the flag still set, and its `error`
//! line would be dropped. The layer reads fields inside [`visiting`], which marks the
//! thread's state as consistent (no buffer or stack of the layer is half changed), and
//! [`in_panic_hook`] lets a panic hook's own events through in exactly that case.
//!
//! The in-flight mark says, for other threads to see, which layer a thread is inside.
//! A layer that closes (it writes `atexit`) first refuses new callers, then waits until
//! no other thread is still inside it, and only then writes its last line: a thread
//! that got past the closed check just before cannot write after `atexit`. The mark is
//! set with the closed flag read after it (both sequentially consistent), so either
//! the caller sees the layer closed or the closing thread sees the caller's mark.
//! Callbacks that write nothing (a span created or recorded, a span exited in the
//! region-per-span mode, a span entered again there) take the flag alone: no closing
//! layer needs to wait for them, and the mark's sequentially consistent store is a full
//! fence. One that finds it has a line to write after all adds the mark first.
//!
//! A layer may also close to every thread but the one closing it ([`Gate`]): the
//! process end ends every other thread's lane, then writes the totals and `atexit`, and
//! no other thread may write in between.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

thread_local! {
    static BUSY: Cell<bool> = const { Cell::new(false) };
    /// Set while the layer runs a field's `Debug`/`Display` (user code).
    static VISITING: Cell<bool> = const { Cell::new(false) };
    /// This thread's in-flight mark: the key of the layer it is inside, or 0.
    static IN_FLIGHT: Arc<AtomicUsize> = register_mark();
}

/// Every thread's in-flight mark (threads that ended are pruned when one starts). Held
/// only to read or change the list, and by a thread that forks across its `fork` (see
/// [`hold_marks_across_forks`]).
static MARKS: Mutex<Vec<Arc<AtomicUsize>>> = Mutex::new(Vec::new());

/// Threads inside a layer that have no mark any more (their thread-locals are being
/// destroyed): counted here instead, whatever the layer.
static UNMARKED: AtomicUsize = AtomicUsize::new(0);

/// The longest a closing layer waits for other threads to leave it: a thread stuck in a
/// write (a destination that stopped reading) must not hold the exit for ever.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

held_across_forks! {
    /// Installs, once, the `fork` handlers that hold [`MARKS`] in the forking thread
    /// across the `fork`: without them, a child forked while another thread of its
    /// parent held the list (a thread starting, a layer closing) would hang on its first
    /// new thread entering the layer, and on closing a layer.
    fn hold_marks_across_forks for MARKS: Vec<Arc<AtomicUsize>>
}

/// Locks [`MARKS`], once the `fork` handlers that keep it usable in a child are
/// installed.
fn marks() -> MutexGuard<'static, Vec<Arc<AtomicUsize>>> {
    hold_marks_across_forks();
    MARKS.lock().unwrap_or_else(PoisonError::into_inner)
}

fn register_mark() -> Arc<AtomicUsize> {
    let mark = Arc::new(AtomicUsize::new(0));
    let mut marks = marks();
    marks.retain(|m| Arc::strong_count(m) > 1);
    marks.push(Arc::clone(&mark));
    mark
}

/// Whether a layer takes lines, and from which threads: open to all, closed to all, or
/// closed to all but the thread that is writing the process's last lines.
#[derive(Debug)]
pub(crate) struct Gate(AtomicUsize);

/// [`Gate`] value: open to every thread.
const OPEN: usize = 0;
/// [`Gate`] value: closed to every thread. (Any other value is the token of the one
/// thread still let in: the address of its in-flight mark, never 0 or `usize::MAX`.)
const SHUT: usize = usize::MAX;

impl Gate {
    pub(crate) const fn new() -> Gate {
        Gate(AtomicUsize::new(OPEN))
    }

    /// Whether the calling thread may write (a quick, relaxed look first: open is the
    /// common case).
    #[inline]
    pub(crate) fn admits_caller(&self) -> bool {
        self.0.load(Ordering::Relaxed) == OPEN || self.admits_caller_now()
    }

    /// [`Self::admits_caller`] with the sequentially consistent read the in-flight
    /// protocol needs (see the module documentation).
    #[inline]
    fn admits_caller_now(&self) -> bool {
        match self.0.load(Ordering::SeqCst) {
            OPEN => true,
            SHUT => false,
            only => own_token() == Some(only),
        }
    }
}

/// The calling thread's token: the address of its in-flight mark.
fn own_token() -> Option<usize> {
    IN_FLIGHT.try_with(|mark| Arc::as_ptr(mark) as usize).ok()
}

/// How a [`Busy`] thread announced itself to closing layers.
enum Mark {
    /// Not inside a layer's output (the worker, or a plain re-entrancy guard).
    None,
    /// Its thread's mark holds the layer's key.
    Marked,
    /// Counted in [`UNMARKED`].
    Counted,
}

/// Marks the thread as inside the layer until dropped.
pub(crate) struct Busy {
    mark: Mark,
}

impl Busy {
    /// `None` when the thread already is inside the layer (a re-entrant call).
    pub(crate) fn enter() -> Option<Busy> {
        // `then`, not `then_some`: a `Busy` built for nothing would reset the flag on drop.
        BUSY.try_with(|busy| (!busy.replace(true)).then(|| Busy { mark: Mark::None }))
            .ok()
            .flatten()
    }

    /// Enters the layer identified by `key` (not 0) unless the thread already is inside
    /// it or the layer's gate is closed to it; while the guard lives, a closing layer
    /// waits for it.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn enter_layer(key: usize, closed: &Gate) -> Option<Busy> {
        let mut busy = Busy::enter()?;
        // Dropping `busy` takes the mark back.
        busy.mark_layer(key, closed).then_some(busy)
    }

    /// Adds the in-flight mark of the layer identified by `key` to a thread that took
    /// the flag alone ([`Busy::enter`]) and is about to write: `false` when the layer's
    /// gate is closed to it (the caller then writes nothing; dropping the guard takes
    /// the mark back).
    #[inline]
    pub(crate) fn mark_layer(&mut self, key: usize, closed: &Gate) -> bool {
        if matches!(self.mark, Mark::None) {
            self.mark = match IN_FLIGHT.try_with(|mark| mark.store(key, Ordering::SeqCst)) {
                Ok(()) => Mark::Marked,
                Err(_) => {
                    UNMARKED.fetch_add(1, Ordering::SeqCst);
                    Mark::Counted
                }
            };
        }
        closed.admits_caller_now()
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        match self.mark {
            Mark::None => {}
            Mark::Marked => {
                let _ = IN_FLIGHT.try_with(|mark| mark.store(0, Ordering::Release));
            }
            Mark::Counted => {
                UNMARKED.fetch_sub(1, Ordering::Release);
            }
        }
        let _ = BUSY.try_with(|busy| busy.set(false));
    }
}

/// Runs `visit`, which hands field values to their `Debug`/`Display` impls, marked as
/// user code run from inside the layer (see [`in_panic_hook`]).
#[inline]
pub(crate) fn visiting<R>(visit: impl FnOnce() -> R) -> R {
    /// Clears the mark on the way out, by return or by unwinding.
    struct Visiting;
    impl Drop for Visiting {
        fn drop(&mut self) {
            let _ = VISITING.try_with(|v| v.set(false));
        }
    }
    let _ = VISITING.try_with(|v| v.set(true));
    let _visiting = Visiting;
    visit()
}

/// Runs `hook` (a panic hook's tracing: an `error` line, a flush) so that its events
/// reach the layer even when the panic was raised by a field's `Debug` or `Display`
/// while the layer was reading it: they would otherwise be dropped as re-entrant
/// calls. Outside that case it just runs `hook`.
pub fn in_panic_hook<R>(hook: impl FnOnce() -> R) -> R {
    let reading_fields =
        VISITING.try_with(Cell::get).unwrap_or(false) && BUSY.try_with(Cell::get).unwrap_or(false);
    if !reading_fields {
        return hook();
    }
    /// Puts the thread back inside the layer, where the unwinding will find it.
    struct Restore(usize);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = BUSY.try_with(|b| b.set(true));
            let _ = VISITING.try_with(|v| v.set(true));
            let _ = IN_FLIGHT.try_with(|mark| mark.store(self.0, Ordering::SeqCst));
        }
    }
    let mark = IN_FLIGHT
        .try_with(|mark| mark.load(Ordering::SeqCst))
        .unwrap_or(0);
    let _restore = Restore(mark);
    let _ = BUSY.try_with(|b| b.set(false));
    let _ = VISITING.try_with(|v| v.set(false));
    hook()
}

/// Closes the layer identified by `key` to every thread, or to every thread but the
/// caller (`but_caller`), then waits (at most [`CLOSE_WAIT`]) until no other thread is
/// inside it. The calling thread may itself be inside it (it is about to write the last
/// lines). A thread whose thread-locals are gone cannot be told apart: the gate then
/// closes to all. Returns whether every thread it waited for left in time (`false`:
/// the wait ended at its deadline).
pub(crate) fn close(key: usize, closed: &Gate, but_caller: bool) -> bool {
    let token = if but_caller { own_token() } else { None };
    closed.0.store(token.unwrap_or(SHUT), Ordering::SeqCst);
    let own = IN_FLIGHT.try_with(Arc::as_ptr).ok();
    let own_counted = own.is_none() && BUSY.try_with(Cell::get).unwrap_or(false);
    let others: Vec<Arc<AtomicUsize>> = marks()
        .iter()
        .filter(|m| Some(Arc::as_ptr(m)) != own)
        .cloned()
        .collect();
    let deadline = Instant::now() + CLOSE_WAIT;
    let wait = |inside: &dyn Fn() -> bool| {
        while inside() {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::yield_now();
        }
        true
    };
    let mut left = true;
    for mark in &others {
        left &= wait(&|| mark.load(Ordering::SeqCst) == key);
    }
    let mine = usize::from(own_counted);
    left & wait(&|| UNMARKED.load(Ordering::SeqCst) > mine)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn a_closed_layer_refuses_callers() {
        let closed = Gate::new();
        let key = &closed as *const Gate as usize;
        let busy = Busy::enter_layer(key, &closed).unwrap();
        // Re-entrant: refused while inside.
        assert!(Busy::enter_layer(key, &closed).is_none());
        drop(busy);
        close(key, &closed, false);
        assert!(Busy::enter_layer(key, &closed).is_none());
        // The refusal left the thread free.
        assert!(Busy::enter().is_some());
    }

    /// Closed but to the caller: the caller goes on writing, every other thread is
    /// refused, until the gate closes to all.
    #[test]
    fn a_gate_closed_but_to_the_caller() {
        let closed = Gate::new();
        let key = &closed as *const Gate as usize;
        close(key, &closed, true);
        assert!(closed.admits_caller());
        assert!(Busy::enter_layer(key, &closed).is_some());
        std::thread::scope(|scope| {
            scope.spawn(|| {
                assert!(!closed.admits_caller());
                assert!(Busy::enter_layer(key, &closed).is_none());
            });
        });
        close(key, &closed, false);
        assert!(Busy::enter_layer(key, &closed).is_none());
    }

    /// Close waits for a thread that is inside the layer, and only for that layer.
    #[test]
    fn close_waits_for_threads_inside() {
        let closed = Gate::new();
        let other_layer = Gate::new();
        let key = &closed as *const Gate as usize;
        let other_key = &other_layer as *const Gate as usize;
        let inside = Barrier::new(3);
        let left = AtomicBool::new(false);
        let (closed_tx, closed_rx) = std::sync::mpsc::channel::<()>();
        let (other_layer, inside) = (&other_layer, &inside);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let busy = Busy::enter_layer(key, &closed).unwrap();
                inside.wait();
                std::thread::sleep(Duration::from_millis(100));
                left.store(true, Ordering::SeqCst);
                drop(busy);
            });
            scope.spawn(move || {
                // Inside another layer until the close has returned: not waited for
                // (a close that waited would run to its deadline and say so).
                let _busy = Busy::enter_layer(other_key, other_layer).unwrap();
                inside.wait();
                closed_rx.recv().unwrap();
            });
            inside.wait();
            let in_time = close(key, &closed, false);
            closed_tx.send(()).unwrap();
            assert!(left.load(Ordering::SeqCst), "close did not wait");
            assert!(in_time, "close waited for a thread inside another layer");
        });
    }

    /// A child forked while another thread of its parent holds the list of marks (a
    /// thread starting, a layer closing) lets a new thread into a layer and closes it.
    #[cfg(unix)]
    #[test]
    fn a_child_forked_while_the_marks_are_held_enters_and_closes_layers() {
        crate::fork_lock::tests::forked_while_held(
            || drop(marks()),
            || MARKS.lock().unwrap_or_else(PoisonError::into_inner),
            || {
                let closed = Gate::new();
                let key = &closed as *const Gate as usize;
                let entered = std::thread::scope(|scope| {
                    scope
                        .spawn(|| Busy::enter_layer(key, &closed).is_some())
                        .join()
                        .unwrap_or(false)
                });
                entered && close(key, &closed, false) && !closed.admits_caller()
            },
        );
    }
}
