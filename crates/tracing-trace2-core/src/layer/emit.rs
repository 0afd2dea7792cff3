//! What every Trace2 line goes through, whichever callback makes it: the record built
//! on a lane, the lane's `thread_start` before its first line, the `version` line before
//! the process's first, the formatting for every target (or the encoding for the
//! deferred writer) into the per-thread buffer, and the write; and a region's
//! `region_enter`/`region_leave` on a lane's stack, shared by span regions and the
//! typed API's regions.
//!
//! The bottom floor of the layer's submodules: it uses none of its siblings.
//!
//! The small steps every line goes through (the in-flight mark, building a record,
//! handing it to the targets) are forced inline in optimized builds only, as the
//! Event format's helpers are: each call boundary cost more than the step
//! (docs/performance.md, "Round 3, third step"), and unoptimized, forced inlining only
//! grows the callers' stack frames.

use std::cell::RefCell;

use crate::output::CallbackOutput;
use crate::thread::{Frame, ThreadState};
use tracing_trace2_record::{Callsite, Record, RegionInfo, Timestamp, Trace2Event};

use super::Trace2Layer;

thread_local! {
    static PENDING: RefCell<CallbackOutput> = RefCell::new(CallbackOutput::default());
}

pub(super) fn with_pending<R>(mut f: impl FnMut(&mut CallbackOutput) -> R) -> R {
    // `FnMut`, called through a reference: a `FnOnce` would be moved out of an
    // `Option` first, a copy of every word it captured, on every line.
    let result = PENDING.try_with(|cell| {
        cell.try_borrow_mut().ok().map(|mut lines| {
            lines.clear();
            f(&mut lines)
        })
    });
    match result {
        Ok(Some(r)) => r,
        // The thread is shutting down or the buffer is in use: use a fresh one.
        _ => f(&mut CallbackOutput::default()),
    }
}

impl Trace2Layer {
    #[inline]
    pub(super) fn record<'a>(
        &'a self,
        thread: &'a ThreadState,
        event: Trace2Event<'a>,
        time: Timestamp,
        callsite: Callsite<'a>,
        open_regions: u32,
    ) -> Record<'a> {
        Record {
            event,
            time,
            sid: self.inner.session.sid(),
            depth: self.inner.session.depth(),
            thread: &thread.name,
            callsite,
            open_regions,
        }
    }

    /// Formats `event` on lane `t` for every target, after the lane's `thread_start` if
    /// the lane was not announced yet (and after `version` for the first line).
    pub(super) fn emit(
        &self,
        t: &mut ThreadState,
        event: Trace2Event<'_>,
        now: Timestamp,
        callsite: Callsite<'_>,
        open: u32,
        lines: &mut CallbackOutput,
    ) {
        self.emit_inline(t, event, now, callsite, open, lines);
    }

    /// [`Self::emit`] inlined into its caller: for the region lines, written by every
    /// span, whose callers call it once (a user event's several call sites share the
    /// out-of-line `emit`).
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(super) fn emit_inline(
        &self,
        t: &mut ThreadState,
        event: Trace2Event<'_>,
        now: Timestamp,
        callsite: Callsite<'_>,
        open: u32,
        lines: &mut CallbackOutput,
    ) {
        if !t.announced && (self.inner.announce || t.task) {
            self.announce(t, now, callsite, lines);
        }
        if !t.task && self.inner.announce {
            t.set_owner(&self.inner);
        }
        let record = self.record(t, event, now, callsite, open);
        self.format_all(&record, lines);
    }

    /// The lane's `thread_start`, before its first line.
    #[cold]
    #[inline(never)]
    fn announce(
        &self,
        t: &mut ThreadState,
        now: Timestamp,
        callsite: Callsite<'_>,
        lines: &mut CallbackOutput,
    ) {
        t.announced = true;
        self.inner.lanes.announced(&t.me);
        t.set_start_site(callsite.file, callsite.line);
        let start = self.record(t, Trace2Event::ThreadStart, now, callsite, 0);
        self.format_all(&start, lines);
    }

    /// Formats `record` for every enabled target, after the `version` line if this is
    /// the first record of the process.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(super) fn format_all(&self, record: &Record<'_>, lines: &mut CallbackOutput) {
        self.ensure_version(record, None);
        self.format_into(record, lines);
    }

    /// Takes `record` into `pending` (formatted, or encoded for the deferred writer).
    #[inline]
    fn format_into(&self, record: &Record<'_>, pending: &mut CallbackOutput) {
        self.inner.output.take(record, pending);
    }

    /// Writes `version` (and `too_many_files` where asked) once per layer, before any
    /// other line. `exe` overrides the configured version (an explicit `version` call).
    #[inline]
    pub(super) fn ensure_version(&self, context: &Record<'_>, exe: Option<&str>) {
        if !self.inner.version.is_completed() {
            self.write_version(context, exe);
        }
    }

    /// The first line of the layer: `version` (and `too_many_files`), once.
    #[cold]
    #[inline(never)]
    fn write_version(&self, context: &Record<'_>, exe: Option<&str>) {
        self.inner.version.call_once(|| {
            let mut lines = CallbackOutput::default();
            let version = Record {
                event: Trace2Event::Version {
                    exe: exe.unwrap_or(&self.inner.exe),
                },
                ..*context
            };
            self.format_into(&version, &mut lines);
            let too_many = Record {
                event: Trace2Event::TooManyFiles,
                ..version
            };
            self.format_into(&too_many, &mut lines);
            self.write_lines_from(&lines, Some(&version));
        });
    }

    /// Writes each formatted line with one call to its target's sink, while lane `t` is
    /// locked (it names the thread of an `error` line about a failed write).
    #[inline]
    pub(super) fn write_lines(&self, t: &ThreadState, pending: &CallbackOutput) {
        // Nothing taken (a Normal target shows no regions or data): nothing to do.
        if !pending.is_empty() {
            self.write_taken(t, pending);
        }
    }

    /// [`Self::write_lines`] when something was taken.
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn write_taken(&self, t: &ThreadState, pending: &CallbackOutput) {
        // The context of an `error` line, made only if a write fails.
        let context = || {
            Some(self.record(
                t,
                Trace2Event::Printf { msg: None },
                Timestamp::default(),
                Callsite::default(),
                t.depth(),
            ))
        };
        self.inner.output.write_with(pending, context);
    }

    /// [`Self::write_lines`] while the calling thread's state is borrowed: `context` then
    /// names the thread for an `error` line about a failed write.
    #[inline]
    fn write_lines_from(&self, pending: &CallbackOutput, context: Option<&Record<'_>>) {
        self.inner.output.write(pending, context);
    }

    /// Formats `region_enter` and opens the region on the lane's stack under `marker`
    /// (a span id, or one of the markers of regions that are not spans).
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(super) fn enter_region(
        &self,
        t: &mut ThreadState,
        marker: u64,
        region: RegionInfo<'_>,
        now: Timestamp,
        callsite: Callsite<'_>,
        lines: &mut CallbackOutput,
    ) {
        let open = t.depth();
        let event = Trace2Event::RegionEnter {
            region,
            nesting: open + 1,
        };
        self.emit_inline(t, event, now, callsite, open, lines);
        t.stack.push(Frame {
            span: marker,
            start_us: now.t_abs_us,
            repeats: 0,
        });
    }

    /// Closes the innermost region opened under `marker`, wherever it stands in the
    /// stack, and formats its `region_leave` at its own depth.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(super) fn leave_region(
        &self,
        t: &mut ThreadState,
        marker: u64,
        region: RegionInfo<'_>,
        now: Timestamp,
        callsite: Callsite<'_>,
        lines: &mut CallbackOutput,
    ) {
        let Some(pos) = t.stack.iter().rposition(|f| f.span == marker) else {
            return;
        };
        // The usual case, the innermost region: a pop, without the `memmove` call of a
        // removal.
        let frame = if pos + 1 == t.stack.len() {
            t.stack.pop().expect("the frame found")
        } else {
            t.stack.remove(pos)
        };
        let event = Trace2Event::RegionLeave {
            region,
            nesting: pos as u32 + 1,
            t_rel_us: now.t_abs_us.saturating_sub(frame.start_us),
        };
        self.emit_inline(t, event, now, callsite, pos as u32, lines);
    }
}
