//! Stopwatch timers and counters, with the per-thread and process totals Git writes
//! (`th_timer`, `th_counter`, `timer`, `counter`).
//!
//! A program declares its timers and counters as statics:
//!
//! ```
//! use tracing_trace2_core::timers::{Counter, PerThread, Timer};
//!
//! static PARSE: Timer = Timer::new("index", "parse", PerThread::Yes);
//! static ENTRIES: Counter = Counter::new("index", "entries", PerThread::No);
//!
//! fn parse(entries: &[&str]) {
//!     let _running = PARSE.scope();
//!     ENTRIES.add(entries.len() as u64);
//! }
//! parse(&["a", "b"]);
//! ```
//!
//! Values are kept per thread and cost no allocation once a thread has used a given
//! timer or counter: each static gets an index the first time any thread uses it (a
//! process-wide lock, taken once per static), and each thread keeps its values in a
//! table of its own at that index, behind a lock that only that thread takes, except
//! once at the process end (so it is never contended while the program runs). Nothing
//! is written while timing. When a thread leaves through [`emit_thread_totals`] (the
//! thread helpers of the facade call it, and the process lifecycle calls it for the
//! main thread), its `th_timer`/`th_counter` lines are written and its values are added
//! to the process totals, which [`emit_process_totals`] writes just before `atexit`. A
//! thread still running at the process end (a worker of a runtime that is shut down
//! after `main` returns, as `#[tokio::main]`'s) is ended by the layer before the totals:
//! its lines are written from the exiting thread, with the values its table holds then.
//! A thread that is never ended is never added, as in Git.
//!
//! The table order Git uses for its compiled-in table is here the order in which the
//! statics were first used (or [`Timer::register`]ed / [`Counter::register`]ed).
//!
//! The values live in the timer tables (`timer_table.rs`, on the crate's lowest floor,
//! next to the thread state that holds each thread's table); this module, above the
//! layer, writes their lines through [`crate::api`].

use crate::api;
use crate::timer_table::{self, TotalLine};

pub use crate::timer_table::{Counter, PerThread, Timer, TimerGuard, hand_over_thread_totals};

/// Writes the calling thread's `th_timer` lines (per-thread timers with at least one
/// interval on this thread, in table order), then its `th_counter` lines (per-thread
/// counters non-zero on this thread), then adds its values to the process totals and
/// clears them, so a second call adds nothing twice.
///
/// The thread helpers call this right before `thread_exit`; the process lifecycle
/// calls it for the main thread right before [`emit_process_totals`].
pub fn emit_thread_totals() {
    emit_lines(timer_table::take_thread_totals(), true);
}

/// Writes the lines kept by [`hand_over_thread_totals`] (on the calling thread, which
/// writes them for the thread that handed them over) and forgets them.
pub fn emit_handed_over_totals() {
    emit_lines(timer_table::take_handed_over_totals(), true);
}

/// Writes the process totals: `timer` for every timer with at least one interval, then
/// `counter` for every non-zero counter, in table order. Totals hold the values of the
/// threads that went through [`emit_thread_totals`]. They are cleared as they are
/// written, so a second call writes only what was added since.
///
/// The process lifecycle calls this right before `atexit`.
pub fn emit_process_totals() {
    emit_lines(timer_table::take_process_totals(), false);
}

/// Writes `lines` as `th_timer`/`th_counter` (`per_thread`) or `timer`/`counter` lines.
fn emit_lines(lines: Vec<TotalLine>, per_thread: bool) {
    for line in lines {
        match line {
            TotalLine::Timer(t) => api::timer(
                per_thread,
                t.category,
                t.name,
                t.intervals,
                t.total_ns,
                t.min_ns,
                t.max_ns,
            ),
            TotalLine::Counter(c) => api::counter(per_thread, c.category, c.name, c.value),
        }
    }
}
