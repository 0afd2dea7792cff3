//! Per-thread Trace2 state: the thread's name, its start time and its region stack.
//!
//! Rust's main thread is `main`. Every other thread gets the next number from a
//! process-wide counter the first time it emits anything (or when it announces itself
//! with `thread_start`) and is named `thNN:<base>` cut to 24 bytes, as git does. The
//! base is the name given to `thread_start`, else the Rust thread name, else `unknown`.
//!
//! The region stack holds one frame per open region: the span it belongs to and its
//! start time. Region nesting and Perf's indentation dots are the stack's length.

use std::cell::RefCell;
use std::io::Write;
use std::sync::atomic::{AtomicU32, Ordering};

/// Longest Trace2 thread name, in bytes.
pub const MAX_THREAD_NAME: usize = 24;

static NEXT_THREAD_ID: AtomicU32 = AtomicU32::new(1);

/// One open region on a thread's stack.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Frame {
    /// The span behind the region (0 for regions not tied to a span).
    pub span: u64,
    /// When it was entered (`t_abs`, µs).
    pub start_us: u64,
    /// Extra enters of the same span on this thread, each cancelled by one exit.
    pub repeats: u32,
}

/// What the core layer keeps for each thread.
#[derive(Debug)]
pub(crate) struct ThreadState {
    pub name: String,
    pub is_main: bool,
    pub start_us: u64,
    pub stack: Vec<Frame>,
    /// Created under the name `thread_start` gave, by that same call.
    fresh: bool,
}

impl ThreadState {
    fn new(base: Option<&str>, start_us: u64) -> ThreadState {
        let current = std::thread::current();
        let is_main = current.name() == Some("main");
        let name = if is_main {
            "main".to_owned()
        } else {
            numbered_name(base.or(current.name()).unwrap_or("unknown"))
        };
        ThreadState {
            name,
            is_main,
            start_us: if is_main { 0 } else { start_us },
            stack: Vec::with_capacity(16),
            fresh: base.is_some(),
        }
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

    /// `t_rel` for a datum: time since the innermost open region, or since the thread began.
    pub fn since_innermost(&self, now_us: u64) -> u64 {
        let from = self.stack.last().map_or(self.start_us, |f| f.start_us);
        now_us.saturating_sub(from)
    }

    /// Number of open regions.
    pub fn depth(&self) -> u32 {
        self.stack.len() as u32
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

thread_local! {
    static STATE: RefCell<Option<ThreadState>> = const { RefCell::new(None) };
}

/// Runs `f` on this thread's state, creating it (with `now_us` as its start) on first
/// use. Returns `None` when the state is already borrowed (a re-entrant call) or the
/// thread is being torn down.
pub(crate) fn with_state<R>(now_us: u64, f: impl FnOnce(&mut ThreadState) -> R) -> Option<R> {
    with_state_as(None, now_us, f)
}

/// [`with_state`] for a thread that names itself: a state created now takes `base` as
/// its name right away, so no thread number is spent on a provisional name.
pub(crate) fn with_state_as<R>(
    base: Option<&str>,
    now_us: u64,
    f: impl FnOnce(&mut ThreadState) -> R,
) -> Option<R> {
    STATE
        .try_with(|cell| {
            let mut slot = cell.try_borrow_mut().ok()?;
            let state = slot.get_or_insert_with(|| ThreadState::new(base, now_us));
            Some(f(state))
        })
        .ok()
        .flatten()
}

/// Forgets this thread's state (after `thread_exit`): a later event starts a new one.
pub(crate) fn reset() {
    let _ = STATE.try_with(|cell| {
        if let Ok(mut slot) = cell.try_borrow_mut() {
            *slot = None;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

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
            .spawn(|| with_state(5, |s| (s.name.clone(), s.start_us)).unwrap())
            .unwrap()
            .join()
            .unwrap();
        assert!(name.0.ends_with(":unknown"), "{}", name.0);
        assert_eq!(name.1, 5);
    }

    #[test]
    fn reentrant_borrow_is_refused() {
        let inner = std::thread::spawn(|| with_state(0, |_| with_state(0, |_| ()).is_none()))
            .join()
            .unwrap();
        assert_eq!(inner, Some(true));
    }
}
