//! Trace2 threads ("lanes"): the value of the `thread` field, with its name, start time
//! and region stack.
//!
//! Every OS thread has a *base lane*, named as git names threads: Rust's main thread is
//! `main`; every other thread gets the next number from a process-wide counter the first
//! time it writes (or when it announces itself with `thread_start`) and is named
//! `thNN:<base>` cut to 24 bytes. The base is the name given to `thread_start`, else the
//! Rust thread name, else `unknown`. A lane that was not announced gets its
//! `thread_start` before its first line; an OS thread's lane gets `thread_exit` (with the
//! thread's `th_timer`/`th_counter` lines) from a thread-local destructor when the thread
//! ends, unless it said `thread_exit` itself, or from the thread that writes `atexit`
//! when the thread is still running then (the lane keeps a handle on the thread's timer
//! and counter values for that).
//!
//! In the default region mode (one region per span lifetime) a region may stay open
//! while its span is suspended (an `async fn` waiting), so the layer also uses *task
//! lanes*: a span whose first entry cannot go on top of the current lane's stack without
//! breaking its strict order (its parent is not on top) opens its region on a task lane,
//! named `task-lane-NN`. The layer keeps a bounded set of them and hands an idle one
//! (empty stack) to the next span that needs one, so their number follows how many such
//! regions are open at once, never how many there were; they are announced once and end
//! (`thread_exit`) before `atexit`. Lanes are shared (`Arc<Mutex<…>>`) because a task
//! moves between OS threads; each OS thread remembers which lanes the spans it has
//! entered are on (`entered`), so lines it writes go to the lane of its innermost
//! entered span.
//!
//! The region stack holds one frame per open region: the span it belongs to and its
//! start time. Region nesting and Perf's indentation dots are positions in that stack.

use std::cell::RefCell;
use std::io::Write;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use crate::timer_table::{self, ThreadValues};

/// Longest Trace2 thread name, in bytes.
pub const MAX_THREAD_NAME: usize = 24;

static NEXT_THREAD_ID: AtomicU32 = AtomicU32::new(1);

/// One open region on a lane's stack.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Frame {
    /// The span behind the region (or a marker for regions not tied to a span).
    pub span: u64,
    /// When it was entered (`t_abs`, µs).
    pub start_us: u64,
    /// Extra enters of the same span on this thread, each cancelled by one exit
    /// (region-per-entry mode).
    pub repeats: u32,
}

/// A lane, shared by the OS threads that write on it.
pub(crate) type Lane = Arc<Mutex<ThreadState>>;

/// Locks a lane; a panic elsewhere while it was locked leaves its state usable.
pub(crate) fn lock(lane: &Lane) -> MutexGuard<'_, ThreadState> {
    lane.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Who writes the end of an OS thread's lane when the thread-local destructor runs: the
/// layer that last wrote on it.
pub(crate) trait LaneOwner: Send + Sync {
    /// The OS thread behind `lane` ended: write its totals and `thread_exit` (`state` is
    /// `lane`, locked), or keep `lane` for the end of the process when the owner no
    /// longer takes lines from this thread.
    fn end_os_thread(self: Arc<Self>, lane: &Lane, state: &mut ThreadState);
}

/// What the core layer keeps for each lane.
pub(crate) struct ThreadState {
    pub name: String,
    pub is_main: bool,
    pub start_us: u64,
    pub stack: Vec<Frame>,
    /// `thread_start` was written (always true for `main`, which git never announces).
    pub announced: bool,
    /// A task lane (not an OS thread's): idle when its stack is empty, ended before
    /// `atexit`.
    pub task: bool,
    /// The OS thread of this base lane has ended; its `thread_exit` follows the last
    /// region still open on it.
    pub os_gone: bool,
    /// The layer that last wrote on this lane.
    owner: Option<Weak<dyn LaneOwner>>,
    /// The file:line of this OS thread's `thread_start`, kept for the `thread_exit` its
    /// thread-local destructor writes, which has no caller of its own.
    start_site: Option<(Box<str>, u32)>,
    /// The address of `owner`'s shared state, to tell cheaply on every line whether
    /// the owner is the same: 0 (no `Arc` is there) while `owner` is `None`, so that
    /// one comparison answers (`owner` is set and cleared only with it).
    owner_addr: usize,
    /// Created under the name `thread_start` gave, by that same call.
    fresh: bool,
    /// The OS thread's timer and counter values (base lanes), so that another thread
    /// can end this lane at the process end.
    pub values: Option<Arc<ThreadValues>>,
    /// This lane itself, for the layer's list of announced lanes.
    pub me: Weak<Mutex<ThreadState>>,
}

impl std::fmt::Debug for ThreadState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadState")
            .field("name", &self.name)
            .field("stack", &self.stack)
            .field("announced", &self.announced)
            .field("task", &self.task)
            .finish_non_exhaustive()
    }
}

impl ThreadState {
    /// The calling OS thread's base lane.
    fn base(base: Option<&str>, start_us: u64) -> Lane {
        let current = std::thread::current();
        let is_main = current.name() == Some("main");
        let name = if is_main {
            "main".to_owned()
        } else {
            numbered_name(base.or(current.name()).unwrap_or("unknown"))
        };
        Arc::new_cyclic(|me| {
            Mutex::new(ThreadState {
                name,
                is_main,
                start_us: if is_main { 0 } else { start_us },
                stack: Vec::with_capacity(16),
                announced: is_main,
                task: false,
                os_gone: false,
                owner: None,
                start_site: None,
                owner_addr: 0,
                fresh: base.is_some(),
                values: timer_table::this_thread_values(),
                me: me.clone(),
            })
        })
    }

    /// Task lane number `number` (see the module documentation).
    pub fn task(number: usize, start_us: u64) -> Lane {
        let mut name = String::with_capacity(16);
        let _ = std::fmt::Write::write_fmt(&mut name, format_args!("task-lane-{number:02}"));
        Arc::new_cyclic(|me| {
            Mutex::new(ThreadState {
                name,
                is_main: false,
                start_us,
                stack: Vec::with_capacity(8),
                announced: false,
                task: true,
                os_gone: false,
                owner: None,
                start_site: None,
                owner_addr: 0,
                fresh: false,
                values: None,
                me: me.clone(),
            })
        })
    }

    /// Renames this thread as `thread_start` asks: a new number and the given base
    /// (unless it was created under that name by this very call).
    pub fn register(&mut self, base: &str, start_us: u64) {
        if !std::mem::take(&mut self.fresh) {
            self.name = numbered_name(base);
        }
        self.start_us = start_us;
        self.stack.clear();
    }

    /// `t_rel` for a datum: time since the region at `depth` (1-based) began, or since
    /// the thread began when `depth` is 0.
    pub fn since_region(&self, depth: u32, now_us: u64) -> u64 {
        let from = match depth {
            0 => self.start_us,
            d => self
                .stack
                .get(d as usize - 1)
                .map_or(self.start_us, |f| f.start_us),
        };
        now_us.saturating_sub(from)
    }

    /// Number of open regions.
    pub fn depth(&self) -> u32 {
        self.stack.len() as u32
    }

    /// Remembers where the `thread_start` of an OS thread's lane was written (a task
    /// lane ends at its last region's close, which has a call site of its own).
    pub fn set_start_site(&mut self, file: Option<&str>, line: u32) {
        if !self.task {
            self.start_site = file.map(|file| (Box::from(file), line));
        }
    }

    /// Takes the file:line of the lane's `thread_start` (see [`Self::set_start_site`]).
    pub fn take_start_site(&mut self) -> Option<(Box<str>, u32)> {
        self.start_site.take()
    }

    /// Remembers `owner` as the layer that writes this lane's end.
    #[inline]
    pub fn set_owner(&mut self, owner: &Arc<impl LaneOwner + 'static>) {
        let addr = Arc::as_ptr(owner) as *const () as usize;
        if self.owner_addr != addr {
            self.replace_owner(owner, addr);
        }
    }

    /// Takes the layer that last wrote on this lane, if any.
    pub(crate) fn take_owner(&mut self) -> Option<Weak<dyn LaneOwner>> {
        self.owner_addr = 0;
        self.owner.take()
    }

    #[cold]
    fn replace_owner(&mut self, owner: &Arc<impl LaneOwner + 'static>, addr: usize) {
        let arc: Arc<dyn LaneOwner> = owner.clone();
        self.owner = Some(Arc::downgrade(&arc));
        self.owner_addr = addr;
    }
}

fn numbered_name(base: &str) -> String {
    let id = NEXT_THREAD_ID.fetch_add(1, Ordering::Relaxed);
    let mut name = Vec::with_capacity(MAX_THREAD_NAME + 8);
    let _ = write!(name, "th{id:02}:{base}");
    name.truncate(MAX_THREAD_NAME);
    // A cut in the middle of a multi-byte character is replaced rather than kept broken.
    String::from_utf8_lossy(&name).into_owned()
}

/// What an OS thread keeps: its base lane and the lanes of the spans it has entered.
struct OsThread {
    base: Option<Lane>,
    /// Spans entered on this thread (innermost last), each with the lane of its region
    /// and the nesting its region opened at (the span's `RegionState::nesting`).
    entered: Vec<(u64, Lane, Option<u32>)>,
}

impl Drop for OsThread {
    fn drop(&mut self) {
        self.entered.clear();
        let Some(base) = self.base.take() else { return };
        let mut state = lock(&base);
        state.os_gone = true;
        if state.announced && !state.is_main && state.stack.is_empty() {
            end_lane_now(&base, &mut state);
        }
        // Otherwise a task's region is still open on this lane: the layer writes
        // `thread_exit` after its leave.
    }
}

/// Hands a lane whose OS thread ended to the layer that wrote on it (`state` is `lane`,
/// locked).
pub(crate) fn end_lane_now(lane: &Lane, state: &mut ThreadState) {
    if let Some(owner) = state.take_owner().and_then(|w| w.upgrade()) {
        owner.end_os_thread(lane, state);
    }
}

thread_local! {
    static OS: RefCell<OsThread> = const {
        RefCell::new(OsThread { base: None, entered: Vec::new() })
    };
}

/// This OS thread's base lane, created (with `now_us` as its start, named `base` when
/// given) on first use. `None` while the thread is being torn down.
pub(crate) fn base_lane(base: Option<&str>, now_us: u64) -> Option<Lane> {
    OS.try_with(|os| {
        let mut os = os.try_borrow_mut().ok()?;
        Some(
            os.base
                .get_or_insert_with(|| ThreadState::base(base, now_us))
                .clone(),
        )
    })
    .ok()
    .flatten()
}

/// This OS thread's base lane, if it has one (none is made).
pub(crate) fn own_base_lane() -> Option<Lane> {
    OS.try_with(|os| os.try_borrow().ok().and_then(|os| os.base.clone()))
        .ok()
        .flatten()
}

/// The lane this OS thread writes on now: that of its innermost entered span (with the
/// span), else its base lane (with no span).
pub(crate) fn current_lane(now_us: u64) -> Option<(Lane, Option<u64>)> {
    OS.try_with(|os| {
        let mut os = os.try_borrow_mut().ok()?;
        if let Some((span, lane, _)) = os.entered.last() {
            return Some((lane.clone(), Some(*span)));
        }
        let base = os
            .base
            .get_or_insert_with(|| ThreadState::base(None, now_us));
        Some((base.clone(), None))
    })
    .ok()
    .flatten()
}

/// The innermost span entered on this OS thread and the lane of its region, if any
/// ([`current_lane`] without making the base lane of a thread that has none).
pub(crate) fn entered_lane() -> Option<(u64, Lane)> {
    OS.try_with(|os| {
        os.try_borrow().ok().and_then(|os| {
            os.entered
                .last()
                .map(|(span, lane, _)| (*span, lane.clone()))
        })
    })
    .ok()
    .flatten()
}

/// Runs `f` with the lane this OS thread writes on now and its innermost entered span
/// (as [`current_lane`] gives them), borrowed rather than cloned: no reference count
/// changes hands on every line. While `f` runs, this thread's list of entered spans
/// cannot change (a re-entrant `tracing` call is dropped by the layer anyway). `None`
/// while the thread is being torn down.
pub(crate) fn with_current_lane<R>(
    now_us: u64,
    f: impl FnOnce(&Lane, Option<u64>) -> R,
) -> Option<R> {
    OS.try_with(|os| {
        let needs_base = {
            let os = os.try_borrow().ok()?;
            os.entered.is_empty() && os.base.is_none()
        };
        if needs_base {
            let mut os = os.try_borrow_mut().ok()?;
            os.base = Some(ThreadState::base(None, now_us));
        }
        let os = os.try_borrow().ok()?;
        match os.entered.last() {
            Some((span, lane, _)) => Some(f(lane, Some(*span))),
            None => Some(f(os.base.as_ref()?, None)),
        }
    })
    .ok()
    .flatten()
}

/// Notes that `span`, whose region is on `lane` and opened at `nesting` (its state's,
/// `None` if it has none), is entered on this OS thread.
#[cfg_attr(not(debug_assertions), inline(always))]
pub(crate) fn push_entered(span: u64, lane: Lane, nesting: Option<u32>) {
    let _ = OS.try_with(|os| {
        if let Ok(mut os) = os.try_borrow_mut() {
            os.entered.push((span, lane, nesting));
        }
    });
}

/// The nesting of `span`'s region when `span` is the innermost span entered on this
/// OS thread: what its store entry says (a region's nesting no longer changes once it
/// opens), without taking the span's shard. `None` when it is not the innermost or has
/// no region state.
#[inline]
pub(crate) fn innermost_nesting(span: u64) -> Option<u32> {
    OS.try_with(|os| {
        let os = os.try_borrow().ok()?;
        match os.entered.last() {
            Some(&(innermost, _, nesting)) if innermost == span => nesting,
            _ => None,
        }
    })
    .ok()
    .flatten()
}

/// Notes that `span` is exited on this OS thread (the innermost entry of it).
#[cfg_attr(not(debug_assertions), inline(always))]
pub(crate) fn pop_entered(span: u64) {
    let _ = OS.try_with(|os| {
        let Ok(mut os) = os.try_borrow_mut() else {
            return;
        };
        // The usual case, a span exited where it was entered last: a pop, without the
        // `memmove` call of a removal.
        if os.entered.last().is_some_and(|(s, _, _)| *s == span) {
            os.entered.pop();
        } else if let Some(pos) = os.entered.iter().rposition(|(s, _, _)| *s == span) {
            os.entered.remove(pos);
        }
    });
}

/// Whether `lane` is the calling OS thread's base lane.
pub(crate) fn is_own_base(lane: &Lane) -> bool {
    OS.try_with(|os| {
        os.try_borrow()
            .is_ok_and(|os| os.base.as_ref().is_some_and(|base| Arc::ptr_eq(base, lane)))
    })
    .unwrap_or(false)
}

/// Forgets this OS thread's base lane (after `thread_exit`): a later line starts a new one.
pub(crate) fn reset() {
    let _ = OS.try_with(|os| {
        if let Ok(mut os) = os.try_borrow_mut() {
            os.base = None;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Owner;
    impl LaneOwner for Owner {
        fn end_os_thread(self: Arc<Self>, _lane: &Lane, _state: &mut ThreadState) {}
    }

    #[test]
    fn an_owner_taken_is_set_again_by_the_same_layer() {
        let (first, second) = (Arc::new(Owner), Arc::new(Owner));
        let lane = ThreadState::task(1, 0);
        let mut t = lock(&lane);
        assert!(t.take_owner().is_none());
        t.set_owner(&first);
        assert!(t.take_owner().is_some());
        assert!(t.take_owner().is_none());
        t.set_owner(&first);
        let owner = t.take_owner().and_then(|w| w.upgrade());
        assert!(owner.is_some(), "the same layer again after a take");
        t.set_owner(&first);
        t.set_owner(&second);
        let owner = t.take_owner().and_then(|w| w.upgrade()).unwrap();
        assert!(std::ptr::addr_eq(Arc::as_ptr(&owner), Arc::as_ptr(&second)));
    }

    #[test]
    fn names_are_numbered_and_cut() {
        let a = numbered_name("a-really-long-thread-base-name");
        assert!(a.starts_with("th"));
        assert_eq!(a.len(), MAX_THREAD_NAME);
        let b = numbered_name("short");
        assert!(b.ends_with(":short"));
        let na: u32 = a[2..a.find(':').unwrap()].parse().unwrap();
        let nb: u32 = b[2..b.find(':').unwrap()].parse().unwrap();
        assert!(nb > na);
    }

    #[test]
    fn unnamed_threads_are_unknown() {
        let name = std::thread::Builder::new()
            .spawn(|| {
                let lane = base_lane(None, 5).unwrap();
                let state = lock(&lane);
                (state.name.clone(), state.start_us, state.announced)
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(name.0.ends_with(":unknown"), "{}", name.0);
        assert_eq!(name.1, 5);
        assert!(!name.2);
    }

    #[test]
    fn the_innermost_entered_span_names_the_lane() {
        std::thread::spawn(|| {
            let base = base_lane(None, 0).unwrap();
            let task = ThreadState::task(1, 0);
            assert_eq!(lock(&task).name, "task-lane-01");
            assert!(Arc::ptr_eq(&current_lane(0).unwrap().0, &base));
            push_entered(7, task.clone(), Some(3));
            let (lane, span) = current_lane(0).unwrap();
            assert!(Arc::ptr_eq(&lane, &task));
            assert_eq!(span, Some(7));
            assert_eq!(innermost_nesting(7), Some(3));
            assert_eq!(innermost_nesting(8), None, "not the innermost");
            pop_entered(7);
            assert_eq!(innermost_nesting(7), None);
            assert!(Arc::ptr_eq(&current_lane(0).unwrap().0, &base));
        })
        .join()
        .unwrap();
    }
}
