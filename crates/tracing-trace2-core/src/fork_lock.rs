//! Process-wide locks held across `fork` by the thread that forks.
//!
//! A `fork` copies a `Mutex` as it is. Held at that moment by another thread of the
//! parent, it stays locked in the child for good: the child has no copy of that thread,
//! and hangs the first time it takes the lock (at exit, starting a writer, a new thread
//! entering the layer). [`held_across_forks!`] defines, for one `static` `Mutex`, a
//! function that installs once a `pthread_atfork` handler pair: before a `fork` the
//! forking thread takes the lock (waiting for a holder to finish, so no other thread is
//! in the middle of changing what it guards when memory is copied) and keeps the guard
//! in a thread-local; after the `fork`, in the parent and in the child, it gives it back
//! (an atomic swap, and a `futex` wake if a thread of the parent waits: nothing a child
//! of a multi-threaded process may not do).
//!
//! The prepare step waits for the lock, so a lock may use it only if no code holds it
//! while running user code or anything that may `fork` (the forking thread would then
//! wait for itself). The core's locks held this way are each held only to read or
//! change a list (no callback, no other lock of these), which also makes the order of
//! their prepare steps irrelevant. A thread whose thread-locals are already gone (a
//! `fork` from a thread-local destructor) forks with the lock unlocked, as without
//! these handlers. A child made by `vfork`, `posix_spawn` or a raw `clone` runs no
//! handler (and, but for the raw `clone`, runs none of this crate's code before `exec`).

/// Defines `fn $name()`, to be called before each `lock()` of `$lock` (a
/// `static Mutex<$ty>`): it installs, once, the `fork` handlers that hold `$lock` in the
/// forking thread across the `fork` (see the module documentation). Once installed it
/// costs one load; every caller returns only once they are installed. An optional `then_in_child` names a plain function the
/// child handler calls after giving the lock back.
macro_rules! held_across_forks {
    ($(#[$meta:meta])* fn $name:ident for $lock:path : $ty:ty $(, then_in_child $child:path)?) => {
        $(#[$meta])*
        #[cfg(unix)]
        fn $name() {
            thread_local! {
                /// The lock, held by this thread from just before its `fork` to just
                /// after it, in the parent and in the child.
                static HELD: std::cell::Cell<Option<std::sync::MutexGuard<'static, $ty>>> =
                    const { std::cell::Cell::new(None) };
            }
            /// Before a `fork`, in the forking thread: waits for the lock (once, should
            /// the handlers be registered twice: see below).
            extern "C" fn before_fork() {
                let holding = HELD
                    .try_with(|cell| {
                        let held = cell.take();
                        let holding = held.is_some();
                        cell.set(held);
                        holding
                    })
                    // A thread whose thread-locals are gone forks with the lock unlocked.
                    .unwrap_or(true);
                if !holding {
                    let held = $lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    let _ = HELD.try_with(|cell| cell.set(Some(held)));
                }
            }
            /// After a `fork`, in the parent: the lock given back.
            extern "C" fn after_fork_in_parent() {
                let _ = HELD.try_with(std::cell::Cell::take);
            }
            /// After a `fork`, in the child, before `fork` returns: the lock given back.
            extern "C" fn after_fork_in_child() {
                let _ = HELD.try_with(std::cell::Cell::take);
                $($child();)?
            }
            // 0: not installed; `u64::MAX`: installed; else the id of the process one of
            // whose threads is installing them. Not a `Once`: glibc's `pthread_atfork`
            // waits while a `fork` runs its handlers, and a `Once` left running by a
            // thread the child does not have would hang the child for good. Here a
            // caller waits for an installer of its own process only (which a `fork`
            // delays, never stops); a child that finds its parent's installer unfinished
            // installs them again (were they registered before the `fork` after all,
            // the prepare step above takes the lock once, and a second child step finds
            // it given back and counts a fork twice, which only says "forked").
            static STATE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            const DONE: u64 = u64::MAX;
            use std::sync::atomic::Ordering::{AcqRel, Acquire, Release};
            let mut seen = STATE.load(Acquire);
            if seen == DONE {
                return;
            }
            let pid = u64::from(std::process::id());
            loop {
                if seen == DONE {
                    return;
                }
                if seen == pid {
                    std::thread::yield_now();
                    seen = STATE.load(Acquire);
                    continue;
                }
                match STATE.compare_exchange(seen, pid, AcqRel, Acquire) {
                    Ok(_) => {
                        $crate::fork_lock::install(
                            before_fork,
                            after_fork_in_parent,
                            after_fork_in_child,
                        );
                        STATE.store(DONE, Release);
                        return;
                    }
                    Err(now) => seen = now,
                }
            }
        }
        $(#[$meta])*
        /// Windows has no `fork`.
        #[cfg(not(unix))]
        fn $name() {}
    };
}

/// Registers the three handlers with `pthread_atfork`. A failure (no memory) leaves
/// the lock unheld across forks, as before; nothing else to do.
#[cfg(unix)]
pub(crate) fn install(prepare: extern "C" fn(), parent: extern "C" fn(), child: extern "C" fn()) {
    // SAFETY: registers plain functions (made by `held_across_forks!`) that lock and
    // unlock a `static` `Mutex` in the forking thread and may add to an atomic in the
    // child; none panics or unwinds (`lock` cannot panic once poisoning is absorbed).
    unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
}

#[cfg(all(test, unix))]
pub(crate) mod tests {
    use std::sync::{Mutex, PoisonError};

    /// Taken by each test that forks, so that the 200 ms one holds its lock do not add
    /// up in another test's `fork` (its prepare steps wait for every held list).
    static ONE_FORK_AT_A_TIME: Mutex<()> = Mutex::new(());

    /// Runs `child` in a child forked while another thread of this process holds what
    /// `hold` locks (taken before the `fork` starts, given back 200 ms later), and says
    /// whether the child succeeded; `install` first installs the `fork` handlers of
    /// every lock the child takes, as their first use in a program would. The child
    /// gets ten seconds: one that hangs on the lock its parent's thread held is ended
    /// by `SIGALRM`, and the test fails.
    pub(crate) fn forked_while_held<G>(
        install: impl FnOnce(),
        hold: impl FnOnce() -> G + Send,
        child: impl FnOnce() -> bool,
    ) {
        let _one = ONE_FORK_AT_A_TIME
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        install();
        tracing_trace2_test_support::fork::forked_while_held(hold, child);
    }
}
