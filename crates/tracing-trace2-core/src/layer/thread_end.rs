//! The ends of lanes (Trace2 threads). Every lane writes `thread_start` before its first
//! line (`emit`); an OS thread's lane writes its per-thread timers and `thread_exit` when
//! the thread ends. Lanes still announced when the process ends
//! ([`crate::api::end_threads`], else `atexit`) are ended by the exiting thread, which
//! alone writes from then on.
//!
//! A floor above `emit`, which it uses; below `spans` and `api_calls`, which end lanes
//! through it.

use std::sync::Arc;

use crate::clock;
use crate::output::CallbackOutput;
use crate::thread::{self, Lane, ThreadState};
use crate::timer_table::{self, TotalLine};
use tracing_trace2_record::{Callsite, TimerInfo, Timestamp, Trace2Event};

use super::Trace2Layer;
use super::emit::with_pending;

impl Trace2Layer {
    /// Formats `thread_exit` for lane `t` and forgets that it was announced.
    pub(super) fn exit_lane(
        &self,
        t: &mut ThreadState,
        now: Timestamp,
        callsite: Callsite<'_>,
        lines: &mut CallbackOutput,
    ) {
        t.stack.clear();
        let event = Trace2Event::ThreadExit {
            elapsed_us: now.t_abs_us.saturating_sub(t.start_us),
        };
        let record = self.record(t, event, now, callsite, 0);
        self.format_all(&record, lines);
        self.end_lane_silently(t);
    }

    /// Forgets that lane `t` was announced, writing nothing (the lane that wrote
    /// `atexit`).
    pub(super) fn end_lane_silently(&self, t: &mut ThreadState) {
        t.announced = false;
        drop(t.take_owner());
        self.inner.lanes.ended(&t.me);
    }

    /// The end of an OS thread whose lane was announced (its thread-local destructor):
    /// the thread's `th_timer`/`th_counter` lines, then `thread_exit`. Nothing in the
    /// program called for them: they name the call site of the thread's `thread_start`
    /// (where the thread first traced, or announced itself).
    ///
    /// A thread that ends while the process does may find the layer closed to it (the
    /// process end is ending the other threads' lanes, or has written `atexit`): its
    /// lane then stays in the book, alive, for that end to write its `thread_exit`
    /// (dropped, the book's weak handle would miss it and the thread would have none).
    pub(super) fn end_os_thread(&self, lane: &Lane, t: &mut ThreadState) {
        if !self.inner.announce {
            return;
        }
        let Some(_busy) = self.busy() else {
            self.inner.lanes.keep_until_ended(lane);
            return;
        };
        let now = clock::now();
        let start_site = t.take_start_site();
        let callsite = Callsite {
            file: start_site.as_ref().map(|(file, _)| &**file),
            line: start_site.as_ref().map_or(0, |&(_, line)| line),
        };
        with_pending(|lines| {
            self.thread_totals(t, now, callsite, lines);
            if t.announced {
                self.exit_lane(t, now, callsite, lines);
            }
            self.write_lines(t, lines);
        });
    }

    /// The `th_timer`/`th_counter` lines of lane `t`'s OS thread (none for a task lane);
    /// its values join the process totals.
    fn thread_totals(
        &self,
        t: &ThreadState,
        now: Timestamp,
        callsite: Callsite<'_>,
        lines: &mut CallbackOutput,
    ) {
        let Some(values) = &t.values else { return };
        for total in timer_table::take_totals_of(values) {
            let event = thread_total_event(&total);
            let record = self.record(t, event, now, callsite, 0);
            self.format_all(&record, lines);
        }
    }

    /// The process end: every lane still announced but `main` and `caller` (the lane
    /// the calling thread writes on now, which ends with its `atexit`) gets its totals
    /// and `thread_exit`, and the number of regions left out for want of a task lane is
    /// written on `caller`. The calling thread's own lane is spared too unless this is
    /// the `atexit` call (`last`): the thread's own totals and the process totals come
    /// on it before. The layer is closed to other threads when this runs.
    pub(super) fn end_other_lanes(
        &self,
        caller: &Lane,
        last: bool,
        now: Timestamp,
        callsite: Callsite<'_>,
    ) {
        for lane in self.inner.lanes.open_lanes() {
            if Arc::ptr_eq(&lane, caller) || (!last && thread::is_own_base(&lane)) {
                continue;
            }
            with_pending(|lines| {
                let mut t = thread::lock(&lane);
                if !t.announced || t.is_main {
                    return;
                }
                self.thread_totals(&t, now, callsite, lines);
                self.exit_lane(&mut t, now, callsite, lines);
                self.write_lines(&t, lines);
            });
        }
        let refused = self.inner.lanes.take_refused();
        if refused > 0 {
            with_pending(|lines| {
                let mut t = thread::lock(caller);
                let value = refused.to_string();
                let event = Trace2Event::Data {
                    repo: None,
                    category: "trace2",
                    key: "task_regions_dropped",
                    value: &value,
                    nesting: 1,
                    t_rel_us: t.since_region(0, now.t_abs_us),
                };
                self.emit(&mut t, event, now, callsite, 0, lines);
                self.write_lines(&t, lines);
            });
        }
    }
}

/// The `th_timer`/`th_counter` event of a thread's total.
fn thread_total_event(total: &TotalLine) -> Trace2Event<'static> {
    match *total {
        TotalLine::Timer(t) => Trace2Event::Timer {
            per_thread: true,
            timer: TimerInfo {
                category: t.category,
                name: t.name,
                intervals: t.intervals,
                total_ns: t.total_ns,
                min_ns: t.min_ns,
                max_ns: t.max_ns,
            },
        },
        TotalLine::Counter(c) => Trace2Event::Counter {
            per_thread: true,
            category: c.category,
            name: c.name,
            value: c.value,
        },
    }
}
