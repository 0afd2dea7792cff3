//! Spans into regions. `on_new_span`/`on_record` keep a
//! [`RegionState`](crate::region::RegionState) in the layer's span store
//! (`span_store.rs`, by span id, beside the Registry); this file finds a new span's
//! nearest ancestor with a region, and opens and closes the regions. In the default
//! [`RegionMode::Span`](super::RegionMode::Span) a span's region opens when the span is
//! first entered (`region_enter`) and closes when the span closes (`region_leave`,
//! `t_rel` the wall time between): one region per `#[instrument] async fn` call however
//! often it is polled. Each region goes on a *lane* (a Trace2 thread, `thread.rs`): the
//! lane the entering OS thread is on when the span's parent region is on top of it (or
//! it is empty), else an idle *task lane* (`task-lane-NN`, at most
//! [`Trace2LayerBuilder::with_max_task_lanes`](super::Trace2LayerBuilder::with_max_task_lanes)
//! of them, reused once their stack is empty, ended before `atexit`; past the bound the
//! region is left out). So every lane's enters and leaves form a strict stack, however
//! tasks interleave and move between threads. A span entered once, on top of its parent,
//! writes what git's per-entry mode writes.
//! [`RegionMode::Entry`](super::RegionMode::Entry) is git's own behaviour: a region per
//! entry, on the entering thread (a span entered again where it is already open is
//! counted, not reopened).
//!
//! A floor above `emit` and `thread_end` (a task lane's last region ends it); it uses no
//! other sibling.

use tracing_core::Subscriber;
use tracing_core::span::{Attributes, Id};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use crate::busy::Busy;
use crate::callsite;
use crate::clock;
use crate::output::CallbackOutput;
use crate::span_store::SpanEntry;
use crate::thread::{self, ThreadState};
use tracing_trace2_record::{Callsite, RegionInfo, Timestamp};

use super::Trace2Layer;
use super::emit::with_pending;

/// A span's nearest ancestor with a region had it left out (no task lane was free).
struct LeftOut;

impl Trace2Layer {
    /// The nearest ancestor of a new span with a region state, and the nesting it
    /// opens (or will open) at. The usual case takes the parent as the Registry records
    /// it (the explicit one, else the Registry's current span) and finds it in the store:
    /// a span this layer recorded, so one its filter lets through, which is what the
    /// filtered walk up the parents would find first. Else (a parent the layer never saw:
    /// filtered out by level or by a per-layer filter) the Registry's parents are walked.
    pub(super) fn nearest_region<S>(
        &self,
        attrs: &Attributes<'_>,
        id: &Id,
        ctx: &Context<'_, S>,
    ) -> Option<(u64, u32)>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let parent = if let Some(parent) = attrs.parent() {
            parent.into_u64()
        } else if attrs.is_contextual() {
            ctx.current_span().id()?.into_u64()
        } else {
            return None;
        };
        let nesting = |id: u64| {
            self.inner
                .spans
                .with(id, |entry| entry.region.state().map(|state| state.nesting))
                .flatten()
        };
        // The usual parent, the span this thread is in: its nesting is on the thread's
        // list of entered spans, no shard taken.
        if let Some(n) = thread::innermost_nesting(parent).or_else(|| nesting(parent)) {
            return Some((parent, n));
        }
        let span = ctx.span(id)?;
        let mut next = span.parent();
        while let Some(ancestor) = next {
            let ancestor_id = ancestor.id().into_u64();
            if let Some(n) = nesting(ancestor_id) {
                return Some((ancestor_id, n));
            }
            next = ancestor.parent();
        }
        None
    }

    /// Region-per-entry mode: runs `f` with the calling thread's lane and the region of
    /// span `id`, then writes what it formatted; `false` when the span is not in the
    /// store (closed, or one the layer never saw).
    pub(super) fn with_span_region(
        &self,
        id: &Id,
        mut f: impl FnMut(
            &mut ThreadState,
            RegionInfo<'_>,
            Timestamp,
            Callsite<'static>,
            &mut CallbackOutput,
        ),
    ) -> bool {
        let key = id.into_u64();
        // Held while the lines are formatted (shard, then lane), released before they
        // are written.
        let mut shard = self.inner.spans.lock(key);
        let Some(meta) = shard.get_mut(key).map(|entry| entry.meta) else {
            return false;
        };
        let now = clock::now();
        let callsite = callsite::of(meta);
        let Some(lane) = thread::base_lane(None, now.t_abs_us) else {
            return true;
        };
        let mut shard = Some(shard);
        with_pending(|lines| {
            let mut t = thread::lock(&lane);
            {
                let Some(mut shard) = shard.take() else {
                    return;
                };
                let Some(state) = shard.get_mut(key).and_then(|e| e.region.state()) else {
                    return;
                };
                f(&mut t, state.info(), now, callsite, lines);
            }
            self.write_lines(&t, lines);
        });
        true
    }

    /// Region-per-entry mode, `on_close`: a span closed while this thread still has it
    /// entered (its last handle dropped with an `Entered` guard forgotten, or between a
    /// manual enter and exit; the Registry holds no reference for an entry) has its
    /// region left here, as its exit would have, every repeated entry at once. A span
    /// exited first has no region open any more: nothing to do. `entry` is the span's,
    /// already taken out of the store.
    pub(super) fn entry_close(&self, id: &Id, entry: &SpanEntry) {
        let key = id.into_u64();
        let Some(state) = entry.region.state() else {
            return;
        };
        let Some(lane) = thread::own_base_lane() else {
            return;
        };
        let mut t = thread::lock(&lane);
        if !t.stack.iter().any(|f| f.span == key) {
            return;
        }
        let now = clock::now();
        let callsite = callsite::of(entry.meta);
        with_pending(|lines| {
            self.leave_region(&mut t, key, state.info(), now, callsite, lines);
            self.write_lines(&t, lines);
        });
    }

    /// Region-per-entry mode, `on_exit` of a span no longer in the store: a span closed
    /// on another thread while this one had it entered. Its region here is dropped
    /// without a line (its texts went with the span), so that the regions after it open
    /// at the right nesting.
    pub(super) fn drop_closed_entry(&self, key: u64) {
        let Some(lane) = thread::own_base_lane() else {
            return;
        };
        let mut t = thread::lock(&lane);
        if let Some(pos) = t.stack.iter().rposition(|f| f.span == key) {
            t.stack.remove(pos);
        }
    }

    /// The id of the nearest ancestor whose region is open (`Err` when that ancestor's
    /// region was left out), walked along the `nearest` links from `next` (a span's
    /// nearest ancestor with a region state), one store entry at a time: no shard is
    /// held while another is taken.
    fn parent_region(&self, mut next: Option<u64>) -> Result<Option<u64>, LeftOut> {
        while let Some(id) = next {
            let step = self.inner.spans.with(id, |entry| {
                let region = &entry.region;
                if region.is_left_out() {
                    Err(LeftOut)
                } else if region.lane().is_some() {
                    Ok(None)
                } else {
                    Ok(Some(region.nearest()))
                }
            });
            match step {
                Some(Err(LeftOut)) => return Err(LeftOut),
                Some(Ok(None)) => return Ok(Some(id)),
                Some(Ok(Some(further))) => next = further,
                // An ancestor's entry goes only when it closes, after its descendants:
                // not reached.
                None => return Ok(None),
            }
        }
        Ok(None)
    }

    /// Region-per-span mode, `on_enter`: the first entry opens the region on the lane
    /// where it keeps the stack strict; every entry notes the lane for this OS thread.
    pub(super) fn span_enter(&self, id: &Id, busy: &mut Busy) {
        let key = id.into_u64();
        // The span's shard is held for the whole entry (but the rare walk up the
        // ancestors): another thread entering the span at the same moment waits, then
        // finds the region open.
        let mut shard = self.inner.spans.lock(key);
        let (nearest, meta) = match shard.get_mut(key) {
            None => return,
            Some(entry) => {
                if let Some((lane, nesting)) = entry.region.entered_again() {
                    drop(shard);
                    thread::push_entered(key, lane, nesting);
                    return;
                }
                if entry.region.state().is_none() || entry.region.is_left_out() {
                    return;
                }
                (entry.region.nearest(), entry.meta)
            }
        };
        // The region opens: a line to write, which a closing layer must wait for.
        if !busy.mark_layer(self.key(), &self.inner.closed) {
            return;
        }
        let now = clock::now();
        let callsite = callsite::of(meta);
        // The usual case needs no walk up the parents: no ancestor has a region at all,
        // or the nearest one is the span this thread is in (an entered span's region is
        // open, never left out).
        let entered = nearest.and_then(|_| thread::entered_lane());
        let parent = match &entered {
            _ if nearest.is_none() => None,
            Some((innermost, _)) if Some(*innermost) == nearest => nearest,
            _ => {
                // The walk reads other entries: the shard is released meanwhile, and
                // what another thread did to the span then is checked again after.
                drop(shard);
                let found = self.parent_region(nearest);
                shard = self.inner.spans.lock(key);
                let Some(entry) = shard.get_mut(key) else {
                    return;
                };
                if let Some((lane, nesting)) = entry.region.entered_again() {
                    drop(shard);
                    thread::push_entered(key, lane, nesting);
                    return;
                }
                if entry.region.is_left_out() {
                    return;
                }
                match found {
                    Ok(parent) => parent,
                    Err(LeftOut) => {
                        entry.region.leave_out();
                        return;
                    }
                }
            }
        };
        // The lane this thread writes on now (made only after the parent is known, so
        // that a region left out makes no lane for a thread that has none).
        let current = match entered {
            Some((_, lane)) => lane,
            None => match thread::current_lane(now.t_abs_us) {
                Some((lane, _)) => lane,
                None => return,
            },
        };
        // The current lane keeps a strict stack if the parent's region is on top of it
        // (or it is empty); else the region goes on an idle task lane. Checked and pushed
        // under one lock, as other threads may write on the same lane.
        let guard = thread::lock(&current);
        let fits = guard
            .stack
            .last()
            .is_none_or(|top| Some(top.span) == parent);
        let task_lane = if fits {
            None
        } else {
            // (The book's lock is a leaf: taking it with a lane locked is allowed.)
            match self.inner.lanes.task_lane(now.t_abs_us) {
                Some(task) => Some(task),
                None => {
                    // Every task lane is busy: the region is left out, and counted.
                    if let Some(entry) = shard.get_mut(key) {
                        entry.region.leave_out();
                    }
                    return;
                }
            }
        };
        let (lane, mut t) = match &task_lane {
            None => (&current, guard),
            Some(task) => {
                drop(guard);
                (task, thread::lock(task))
            }
        };
        // Released before the line is written (the closure is called once).
        let mut shard = Some(shard);
        let mut opened_at = None;
        with_pending(|lines| {
            if let Some(mut shard) = shard.take()
                && let Some(entry) = shard.get_mut(key)
            {
                let region = &mut entry.region;
                if let Some(state) = region.state_mut() {
                    // Where the region really opens (a lane of its own starts at 1):
                    // what the children's estimate starts from.
                    state.nesting = t.depth() + 1;
                    opened_at = Some(state.nesting);
                    self.enter_region(&mut t, key, state.info(), now, callsite, lines);
                }
                region.set_lane(lane.clone());
            }
            self.write_lines(&t, lines);
        });
        drop(t);
        // The lane's own handle moves into the list of entered spans (no extra count).
        thread::push_entered(key, task_lane.unwrap_or(current), opened_at);
    }

    /// Region-per-span mode, `on_close`: the region's `region_leave`, and the lane's
    /// `thread_exit` when that was its last region and the lane has ended. `entry` is
    /// the span's, already taken out of the store.
    pub(super) fn span_close(&self, id: &Id, entry: &SpanEntry) {
        let region = &entry.region;
        let (Some(state), Some(lane)) = (region.state(), region.lane()) else {
            return;
        };
        let now = clock::now();
        let callsite = callsite::of(entry.meta);
        let mut t = thread::lock(lane);
        let idle = with_pending(|lines| {
            self.leave_region(&mut t, id.into_u64(), state.info(), now, callsite, lines);
            let empty = t.stack.is_empty() && t.announced;
            if empty && t.os_gone && !t.task {
                self.exit_lane(&mut t, now, callsite, lines);
            }
            self.write_lines(&t, lines);
            empty && t.task
        });
        if idle {
            // Its last region closed: the task lane waits for the next span that needs
            // one (handed back under its lock, so that no span can take it while a line
            // of this one is still being written).
            self.inner.lanes.idle(lane.clone());
        }
    }
}
