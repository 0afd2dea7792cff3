//! Background writers: the traced thread hands its work to a worker thread.
//!
//! | module | job |
//! |---|---|
//! | `options` | how a writer behaves (capacity, lossy, flush on panic) |
//! | `guard` | the guard that flushes and shuts writers down |
//! | `queue` | the queue and worker thread behind every background writer |
//! | `replay` | the deferred writer's worker: decode records, run the layer's targets |
//! | `sink` | [`BackgroundSink`]: one sink's already formatted lines, written by a worker |
//!
//! Two kinds share one queue and one set of guarantees:
//!
//! * The **deferred writer** (`Trace2LayerBuilder::with_deferred`, what
//!   `Trace2::with_background_writer` builds): the traced thread encodes each record once
//!   ([`tracing_trace2_record::codec`]) and queues it; the worker decodes it and runs every target's
//!   formatter and sink, in git's order. Formatting leaves the traced thread as well as
//!   the write.
//! * [`BackgroundSink`] wraps any single [`Sink`](crate::Sink): the traced thread formats, the worker
//!   writes the bytes. For a slow sink of one's own next to direct targets.
//!
//! The traced thread appends its message to the writer's pending buffer under a lock;
//! the worker takes the whole buffer at once and leaves an empty one of the same size,
//! so the steady state allocates nothing per line. Messages keep the order in which
//! they were queued, across threads too. A line waits at most about a millisecond
//! while lines keep coming (see `queue` for how the worker is woken).
//!
//! Both writers write lines for a **file** in batches: the worker gathers a target's
//! lines while it works through what it took from the queue and writes them with one
//! `write` of whole lines, at most [`FILE_BATCH_LIMIT`](tracing_trace2_dst::FILE_BATCH_LIMIT)
//! bytes (a longer line goes alone), when the next line would not fit and as soon as it
//! has handled everything it took: a line never waits for more lines. With `O_APPEND`
//! such a write lands whole among other processes' writes, as a single line does; a
//! short write is followed by the rest. Sockets, pipes and terminals, and sinks that do
//! not ask for batches ([`Sink::batch_limit`](crate::Sink::batch_limit)), get one call
//! per line. Under sustained load this is what keeps the worker ahead: a `write` per
//! line cost it more than decoding and formatting.
//!
//! * **Lossless by default**: when the queue is full the caller waits. With
//!   [`BackgroundOptions::with_lossy`] a full queue drops the message instead and counts
//!   it, except the deferred writer's lifecycle lines (`version`, `start`, the command
//!   and its parameters, `exec`, the totals, `exit`, `signal`, `atexit`), which are
//!   queued beyond the capacity rather than dropped or waited for; the count is reported in the trace itself as an `error` event (all three formats
//!   render it; the Normal format skips `data`), with the message
//!   `trace2: background writer for '<ENV>' dropped <N> lines`, emitted by the worker
//!   when the writer is flushed ([`Sink::flush`](crate::Sink::flush), `Trace2Layer::flush`, a
//!   [`BackgroundGuard`]) or at exit, so before `atexit`. The deferred writer writes one
//!   report per target into every target, counting dropped *records* (a target that
//!   writes no line for some of them, like Normal for regions, lost fewer lines).
//!   [`BackgroundSink`]'s report goes through `tracing`'s *global* default subscriber
//!   (the worker thread has no scoped one); [`BackgroundGuard::dropped_lines`] gives the
//!   count in any case.
//! * **Flush** returns once every line sent before the call has been written and the
//!   sinks flushed.
//! * **Shutdown** ([`BackgroundGuard`] drop, [`shutdown_all`], the exit handler, the
//!   last handle dropped): flush, report, stop the worker and join it. Lines sent after
//!   that are written synchronously on the caller's thread, before the call returns.
//! * **Write errors**: the deferred writer's worker handles a failed write exactly as a
//!   direct writer does (the target is disabled; with `GIT_TRACE2_DST_DEBUG`, git's
//!   warning and an `error` line in the other targets, named after the thread that
//!   traced the line). [`BackgroundSink`]'s worker stops writing after the first failed
//!   write and the next [`Sink::write_line`](crate::Sink::write_line) returns that error, so the layer disables
//!   the target one line later than a direct writer would; if no line follows, the
//!   worker reports it at the next flush or shutdown (with
//!   [`BackgroundSink::with_dst_debug`], git's warning and an `error` event from the
//!   worker's thread, `thNN:trace2-writer`).
//!
//! # Which exits are covered
//!
//! | how the process ends | lines written? |
//! |---|---|
//! | `main` returns | yes: the C runtime calls `exit`, which runs the `atexit` handler |
//! | `std::process::exit` | yes: the `atexit` handler registered with the first writer |
//! | a panic that unwinds out of `main` | yes: the panic hook flushes, then `exit` runs the handler |
//! | a panic with `panic = "abort"` | yes, flushed by the panic hook (no drop report) |
//! | a panic in another thread | the process goes on; the panic hook flushes anyway |
//! | a [`BackgroundGuard`] dropped | yes, that guard's writers are shut down and joined |
//! | `std::process::abort`, `libc::_exit`, a fatal signal (SIGKILL, SIGSEGV, a SIGTERM with no handler) | **no**: lines still queued, and those the worker has gathered for a file and not yet written (at most one batch per target), are lost |
//! | `exec` without exit | **no** (flush first) |
//!
//! The panic hook is installed once, when the first writer that asks for it is built; it
//! runs the hook that was in place before, then flushes. A hook set later by the
//! program replaces it (call [`flush_all`] from that hook instead). A process made by
//! `fork` without `exec` has no worker thread: it writes its own lines on the traced
//! thread, leaves the lines its parent had queued to the parent, and its exit handler
//! leaves the writers alone.
//! Exit waits for the worker like a direct writer would wait for its `write`: a
//! destination that blocks forever (a pipe nobody reads) blocks the exit too.

use std::panic::Location;
use std::sync::OnceLock;

mod guard;
mod options;
pub(crate) mod queue;
pub(crate) mod replay;
mod sink;

pub use guard::BackgroundGuard;
pub use options::BackgroundOptions;
pub use sink::BackgroundSink;

/// The `fmt` of the drop report's `error` event.
pub const DROP_REPORT_FMT: &str = "trace2: background writer for '%s' dropped %lu lines";

/// The `msg` of the drop report's `error` event for `count` lines of target `name`.
pub fn drop_report_message(name: &str, count: u64) -> String {
    format!("trace2: background writer for '{name}' dropped {count} lines")
}

/// How a background sink reports a failure: the `error` call of the layer of the
/// reporting thread's dispatcher, with the place it reports from. Set by the layer when
/// it is built: this floor is below the layer (which uses it), so a sink cannot call
/// the layer, or `api` above it, itself.
type FailureReport = fn(msg: &str, fmt: &str, at: &'static Location<'static>);

static FAILURE_REPORT: OnceLock<FailureReport> = OnceLock::new();

/// Sets where [`report_failure`] goes (the first setting stays: it is one function).
pub(crate) fn set_failure_report(report: FailureReport) {
    let _ = FAILURE_REPORT.get_or_init(|| report);
}

/// Reports a sink's failure as an `error` call would: nothing when no layer was ever
/// built (no dispatcher has one to report to either).
#[track_caller]
pub(crate) fn report_failure(msg: &str, fmt: &str) {
    if let Some(report) = FAILURE_REPORT.get() {
        report(msg, fmt, Location::caller());
    }
}

/// Flushes every background writer of the process (with drop reports); for a panic
/// hook of the program's own, or before `exec`.
pub fn flush_all() {
    queue::flush_all();
}

/// Tells every background writer that the other threads of the process, its worker
/// among them, ended without cleanup (Windows' `ExitProcess` before the exit hooks run):
/// what the calling thread writes from then on is written on it, without a lock another
/// thread may have held; what a worker had not written yet is lost.
pub fn other_threads_gone() {
    tracing_trace2_dst::other_threads_gone();
    queue::other_threads_gone();
}

/// Shuts every background writer of the process down, as the exit handler does.
pub fn shutdown_all() {
    queue::shutdown_all();
}
