//! The layer's book of lanes: every lane it announced and has not ended yet (so that
//! all of them end before `atexit`), and its task lanes (how many it made, which are
//! idle, how many regions found none free).
//!
//! Task lanes are bounded: a span that needs one takes an idle lane (its stack is
//! empty) if there is one, else a new one while fewer than the bound exist; past the
//! bound its region is left out of the trace (and counted), as git leaves out regions
//! nested deeper than a target's nesting limit. A long-running server therefore shows
//! as many task lanes as it had regions open side by side at its busiest, never one per
//! connection or request over its life.
//!
//! The book's lock is a leaf: it is taken with a lane locked, never the other way round.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use crate::thread::{Lane, ThreadState};

/// The default bound on the number of task lanes of one layer.
pub const DEFAULT_MAX_TASK_LANES: usize = 32;

/// A layer's lanes (see the module documentation).
#[derive(Debug)]
pub(crate) struct LaneBook {
    book: Mutex<Book>,
    max_task_lanes: usize,
}

#[derive(Debug, Default)]
struct Book {
    /// Lanes announced and not ended yet (a lane that was dropped is skipped).
    announced: Vec<Weak<Mutex<ThreadState>>>,
    /// Lanes of OS threads that ended while the layer was closed to them: held here
    /// until the process end writes their `thread_exit`.
    kept: Vec<Lane>,
    /// Task lanes with an empty stack, ready for the next span that needs one.
    idle: Vec<Lane>,
    /// Task lanes made so far (the number of the last one).
    made: usize,
    /// Regions left out because every task lane was busy.
    refused: u64,
}

impl LaneBook {
    pub(crate) fn new(max_task_lanes: usize) -> LaneBook {
        LaneBook {
            book: Mutex::new(Book::default()),
            max_task_lanes,
        }
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        // Every update is a push, a pop or an addition: always consistent.
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes a lane that was just announced (`thread_start`).
    pub(crate) fn announced(&self, lane: &Weak<Mutex<ThreadState>>) {
        let mut book = self.book();
        // Lanes dropped without an end (a layer used without `atexit`) go here.
        if book.announced.len() >= 64 && book.announced.len().is_power_of_two() {
            book.announced.retain(|l| l.strong_count() > 0);
        }
        book.announced.push(lane.clone());
    }

    /// Notes a lane that was just ended (`thread_exit`).
    pub(crate) fn ended(&self, lane: &Weak<Mutex<ThreadState>>) {
        let mut book = self.book();
        book.announced.retain(|l| !l.ptr_eq(lane));
        if !book.kept.is_empty() {
            book.kept
                .retain(|l| !std::ptr::eq(Arc::as_ptr(l), lane.as_ptr()));
        }
    }

    /// Keeps `lane` (announced, its OS thread gone) alive until it is ended, so that
    /// [`Self::open_lanes`] still finds it.
    pub(crate) fn keep_until_ended(&self, lane: &Lane) {
        self.book().kept.push(lane.clone());
    }

    /// The lanes announced and not ended yet.
    pub(crate) fn open_lanes(&self) -> Vec<Lane> {
        self.book()
            .announced
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// A task lane for a region that cannot go on the current lane: an idle one, else a
    /// new one (starting at `start_us`) within the bound; `None` past the bound.
    pub(crate) fn task_lane(&self, start_us: u64) -> Option<Lane> {
        let mut book = self.book();
        if let Some(lane) = book.idle.pop() {
            return Some(lane);
        }
        if book.made < self.max_task_lanes {
            book.made += 1;
            return Some(ThreadState::task(book.made, start_us));
        }
        book.refused += 1;
        None
    }

    /// Hands back a task lane whose stack is empty.
    pub(crate) fn idle(&self, lane: Lane) {
        self.book().idle.push(lane);
    }

    /// Regions left out because every task lane was busy, since the last call.
    pub(crate) fn take_refused(&self) -> u64 {
        std::mem::take(&mut self.book().refused)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thread::lock;
    use std::sync::Arc;

    #[test]
    fn task_lanes_are_reused_and_bounded() {
        let book = LaneBook::new(2);
        let first = book.task_lane(5).unwrap();
        let second = book.task_lane(6).unwrap();
        assert_eq!(lock(&first).name, "task-lane-01");
        assert_eq!(lock(&second).name, "task-lane-02");
        assert_eq!(lock(&first).start_us, 5);
        // Both busy: refused and counted.
        assert!(book.task_lane(7).is_none());
        assert_eq!(book.take_refused(), 1);
        // An idle lane is handed out again, not a new one.
        book.idle(first.clone());
        let again = book.task_lane(8).unwrap();
        assert!(Arc::ptr_eq(&again, &first));
        assert!(book.task_lane(9).is_none());
        assert_eq!(book.take_refused(), 1);
    }

    #[test]
    fn announced_lanes_are_listed_until_ended() {
        let book = LaneBook::new(4);
        let lane = book.task_lane(0).unwrap();
        let me = lock(&lane).me.clone();
        book.announced(&me);
        assert_eq!(book.open_lanes().len(), 1);
        book.ended(&me);
        assert!(book.open_lanes().is_empty());
        // A dropped lane is not listed.
        let gone = book.task_lane(0).unwrap();
        book.announced(&lock(&gone).me.clone());
        drop(gone);
        assert!(book.open_lanes().is_empty());
    }
}
