//! The core layer: turns `tracing` callbacks into Trace2 records and hands each record
//! to every enabled target, in the order the targets were added (git's order is
//! normal, perf, event).
//!
//! This file holds the layer's types ([`Trace2Layer`], its shared state, [`RegionMode`]),
//! its public methods, and the trait impls through which work comes in: `tracing`'s
//! `Layer` (each callback checks its level and the layer's state, then hands on) and the
//! lanes' `LaneOwner` (an OS thread's end). The work itself lives in one submodule per
//! job, each an `impl Trace2Layer` block of its own (a call between them is the same
//! call it was in one file):
//!
//! | module | its job |
//! |---|---|
//! | `builder` | [`Trace2LayerBuilder`]: the layer's settings |
//! | `filtered` | [`FilteredLayer`]: the layer behind its per-layer filter |
//! | `spans` | spans into regions, on lanes (`on_new_span`'s parent, `on_enter`, `on_exit`, `on_close`) |
//! | `events` | user events into `printf`, `data` and `error` lines |
//! | `api_calls` | the typed calls of [`crate::api`] |
//! | `thread_end` | the ends of lanes: an OS thread's, `end_threads`' and `atexit`'s |
//! | `emit` | what every line goes through: the record, the lane's announcement, `version`, formatting for every target, the write; a region's enter and leave on a lane's stack |
//!
//! They form floors, as the crate's modules do, each using only those below it: `emit`
//! at the bottom; `thread_end` on it; `spans`, `events` and `api_calls` on those two
//! (none of the three uses another); this file's callbacks on top, and `filtered`, which
//! calls them, above. Every submodule uses
//! this file's types and its gate (`busy`, `key`, `close`, `flush`): the layer's state is
//! theirs, and a module's use of its parent is how Rust modules nest, not a floor. A
//! method another file calls is `pub(super)`; the rest stays private to its file.
//!
//! User spans above the layer's span level ([`Trace2LayerBuilder::with_span_level`],
//! DEBUG by default) and events above its event level
//! ([`Trace2LayerBuilder::with_event_level`], INFO by default) are left out, and so
//! are WARN events unless [`Trace2LayerBuilder::with_warnings`] says what they become
//! (`filter.rs`); a per-layer filter (`.with_filter(..)`) narrows further.
//!
//! Every callback takes one clock reading, formats the lines of all targets into a
//! per-thread buffer and writes them, one `write` per line, with no lock of `tracing`'s
//! held where it can be helped (the targets and that fan-out live in `targets.rs`); a
//! lane stays locked while its lines are written, so its lines reach the file in the
//! order of its stack. With a deferred writer ([`Trace2LayerBuilder::with_deferred`])
//! the callback encodes each record once into that buffer instead
//! ([`tracing_trace2_record::codec`]) and queues it; a worker thread formats and writes
//! it through the same fan-out (`background/replay.rs`). A thread-local flag drops
//! events raised while the layer itself is at work (a field's `Debug` impl that logs, or
//! a sink on the worker), so the layer never recurses or deadlocks.

mod api_calls;
mod builder;
mod emit;
mod events;
mod filtered;
mod spans;
mod thread_end;

pub(crate) use api_calls::send;
pub use builder::Trace2LayerBuilder;
pub use filtered::FilteredLayer;

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::Once;

use crate::filter::{Levels, Trace2Filter};
use tracing_core::span::{Attributes, Id, Record as SpanRecord};
use tracing_core::{Event as TracingEvent, LevelFilter, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use crate::busy::{self, Busy, Gate};

use crate::background::BackgroundGuard;
use crate::lanes::LaneBook;
use crate::output::Output;
use crate::region::{FieldPolicy, RegionFields, RegionState, SpanRegion};
use crate::session::Session;
use crate::span_store::{SpanEntry, SpanStore};
use crate::thread::{self, Lane, LaneOwner, ThreadState};

pub use crate::targets::Target;

/// How spans become regions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegionMode {
    /// One region per span lifetime: `region_enter` at the span's first entry,
    /// `region_leave` when it closes. Right for `async fn`s (entered once per poll) and
    /// spans kept and entered many times; regions that would break a thread's strict
    /// stack go on a Trace2 thread of their own, a task lane (the facade's README, *Async
    /// programs and tokio*, tells the whole model).
    #[default]
    Span,
    /// Git's behaviour: one region per entry, on the entering thread. An `async fn`
    /// then writes one region per poll.
    Entry,
}

/// A `tracing` layer that writes Trace2 lines to its targets. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Trace2Layer {
    inner: Arc<LayerState>,
}

struct LayerState {
    /// Direct or deferred, chosen once when the layer is built.
    output: Output,
    exe: String,
    session: &'static Session,
    version: Once,
    /// Closed once `atexit` is written (git's Trace2 turns itself off there, and so do
    /// we), and to all but the exiting thread from [`crate::api::end_threads`] on.
    closed: Gate,
    /// Lanes announced and not ended; task lanes.
    lanes: LaneBook,
    mode: RegionMode,
    levels: Levels,
    /// The only crates recorded (through the per-layer filter), if any.
    crates: Option<Arc<[String]>>,
    /// Announce every thread that writes (see `with_thread_announcement`).
    announce: bool,
    /// Which span fields become messages, and their bound.
    fields: FieldPolicy,
    /// The state of every span the layer records, by id.
    spans: SpanStore,
}

impl std::fmt::Debug for LayerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("targets", &self.output.targets().list)
            .field("deferred", &self.output.is_deferred())
            .field("exe", &self.exe)
            .field("mode", &self.mode)
            .field("levels", &self.levels)
            .finish_non_exhaustive()
    }
}

impl LaneOwner for LayerState {
    fn end_os_thread(self: Arc<Self>, lane: &Lane, state: &mut ThreadState) {
        Trace2Layer { inner: self }.end_os_thread(lane, state);
    }
}

thread_local! {
    static RECORD_FIELDS: RefCell<RegionFields> = RefCell::new(RegionFields::default());
}

impl Trace2Layer {
    /// A builder with no targets.
    pub fn builder() -> Trace2LayerBuilder {
        Trace2LayerBuilder::default()
    }

    /// Marks the thread as inside the layer, unless it already is or the layer is closed.
    #[inline]
    fn busy(&self) -> Option<Busy> {
        if !self.inner.closed.admits_caller() {
            return None;
        }
        Busy::enter_layer(self.key(), &self.inner.closed)
    }

    /// What identifies this layer to closing (its shared state's address).
    fn key(&self) -> usize {
        Arc::as_ptr(&self.inner) as usize
    }

    /// Stops all output: nothing is written after this returns. Threads inside the layer
    /// at the time are waited for (at most 2 s), so none of their lines comes later. The
    /// layer closes itself this way before it writes `atexit`.
    pub fn close(&self) {
        busy::close(self.key(), &self.inner.closed, false);
    }

    /// The targets, in the order they are visited.
    pub fn targets(&self) -> &[Target] {
        &self.inner.output.targets().list
    }

    /// How spans become regions.
    pub fn region_mode(&self) -> RegionMode {
        self.inner.mode
    }

    /// The most verbose level of user spans or events this layer records.
    pub fn max_level(&self) -> LevelFilter {
        self.inner.levels.max()
    }

    /// The levels of user spans and events this layer records, and what WARN becomes.
    pub fn levels(&self) -> Levels {
        self.inner.levels
    }

    /// The per-layer filter of this layer's levels (and crates, if it has a list).
    pub fn filter(&self) -> Trace2Filter {
        Trace2Filter::new(self.inner.levels).with_only_crates(self.inner.crates.clone())
    }

    /// This layer behind a per-layer filter at its own levels ([`Self::filter`]).
    ///
    /// A layer without a filter of its own tells `tracing` nothing, so beside a filtered
    /// layer (an `EnvFilter` fmt layer) `tracing` would build and dispatch every span and
    /// event of the program. Filtered, the layer's wishes join the other layers' in
    /// `tracing`'s level hint and callsite interest: what no layer wants is skipped at
    /// the call site, and this layer filters nothing for the others. The typed
    /// [`crate::api`] calls never pass through `tracing`, so no filter drops them.
    ///
    /// The filter is tracing-subscriber's `Filtered`, but for the span callbacks that
    /// only look a span up in the layer's store (enter, exit, close, record), which skip
    /// its look-up of the span in the Registry ([`FilteredLayer`]).
    pub fn filtered<S>(self) -> FilteredLayer<S>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let filter = self.filter();
        FilteredLayer::new(self, filter)
    }

    /// Flushes every target's sink. With a deferred writer, waits until the worker has
    /// written every record sent before the call (and reported dropped ones).
    pub fn flush(&self) {
        self.inner.output.flush();
    }

    /// A guard that shuts the deferred writer down (flush, drop report, join) when
    /// dropped; an empty guard when the layer writes directly. Records traced after
    /// that are formatted and written on the traced thread.
    pub fn background_guard(&self) -> BackgroundGuard {
        self.inner.output.guard()
    }
}

impl<S> tracing_subscriber::Layer<S> for Trace2Layer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let meta = attrs.metadata();
        if !self.inner.levels.wants_span(meta.level()) {
            return;
        }
        // Writes nothing (the fields are kept for the region's lines), so a closing layer
        // need not wait for it: the re-entrancy flag alone, no in-flight mark.
        let Some(_busy) = Busy::enter() else { return };
        // The nesting the region will open at, counted along the parents' regions: the
        // fields are formatted only if some target writes a region that deep.
        let nearest = self.nearest_region(attrs, id, &ctx);
        let nesting = nearest.map_or(0, |(_, n)| n).saturating_add(1);
        let mut policy = self.inner.fields;
        policy.others &= self.inner.output.targets().any_writes_region(nesting);
        // A recycled state: its strings keep their room, so this allocates nothing.
        let mut state = RegionState::pooled(meta.name(), meta.target());
        state.nesting = nesting;
        state.fields_mut().set_policy(policy);
        busy::visiting(|| attrs.record(state.fields_mut()));
        state.build_msg();
        let entry = SpanEntry {
            region: SpanRegion::new(state, nearest.map(|(id, _)| id)),
            meta,
        };
        // An entry already there (a span whose close the layer did not see) is recycled
        // when dropped, after its shard is released.
        drop(self.inner.spans.insert(id.into_u64(), entry));
    }

    fn on_record(&self, id: &Id, values: &SpanRecord<'_>, _ctx: Context<'_, S>) {
        // Writes nothing: the re-entrancy flag alone, as in `on_new_span`.
        let Some(_busy) = Busy::enter() else { return };
        let key = id.into_u64();
        // The span's own policy: fields left out at creation stay out.
        let Some(policy) = self
            .inner
            .spans
            .with(key, |entry| entry.region.state().map(RegionState::policy))
            .flatten()
        else {
            return;
        };
        let _ = RECORD_FIELDS.try_with(|cell| {
            let Ok(mut fields) = cell.try_borrow_mut() else {
                return;
            };
            fields.clear();
            fields.set_policy(policy);
            busy::visiting(|| values.record(&mut *fields));
            self.inner.spans.with(key, |entry| {
                if let Some(state) = entry.region.state_mut() {
                    state.record(&fields);
                }
            });
        });
    }

    fn on_enter(&self, id: &Id, _ctx: Context<'_, S>) {
        if self.inner.mode == RegionMode::Span {
            // Entering a span whose region is open writes nothing: the flag alone, and
            // the in-flight mark only for a first entry (`span_enter`).
            let Some(mut busy) = Busy::enter() else {
                return;
            };
            self.span_enter(id, &mut busy);
            return;
        }
        let Some(_busy) = self.busy() else { return };
        let key = id.into_u64();
        self.with_span_region(id, |t, region, now, callsite, lines| {
            // A span entered again where it is already open is counted, not reopened.
            if let Some(frame) = t.stack.iter_mut().rev().find(|f| f.span == key) {
                frame.repeats += 1;
                return;
            }
            self.enter_region(t, key, region, now, callsite, lines);
        });
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        let key = id.into_u64();
        if self.inner.mode == RegionMode::Span {
            // Writes nothing, so a closing layer need not wait for it (no in-flight
            // mark); a re-entrant exit is dropped as its enter was.
            let Some(_busy) = Busy::enter() else { return };
            thread::pop_entered(key);
            return;
        }
        let Some(_busy) = self.busy() else { return };
        if !self.with_span_region(id, |t, region, now, callsite, lines| {
            if let Some(frame) = t.stack.iter_mut().rev().find(|f| f.span == key)
                && frame.repeats > 0
            {
                frame.repeats -= 1;
                return;
            }
            // A span exited on a thread where it was never entered (an async task that
            // moved) has no region here; one exited out of order is closed where it is.
            self.leave_region(t, key, region, now, callsite, lines);
        }) && ctx.metadata(id).is_none()
        {
            // Neither in the store nor in the Registry: a span closed on another thread
            // while this one had it entered (not one the layer left out). Its region here
            // lost its texts with the span, so it is dropped without a line and the
            // regions after it open where they belong.
            self.drop_closed_entry(key);
        }
    }

    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        // The entry goes whatever the layer does now (re-entrant, closed, or per entry),
        // or a reused id would find it.
        let key = id.into_u64();
        let Some(mut busy) = Busy::enter() else {
            // Closed from inside the layer's own work (a sink that drops a span), perhaps
            // with a lane or a shard held: removed without waiting for a shard.
            self.inner.spans.remove_reentrant(key);
            return;
        };
        let Some(entry) = self.inner.spans.remove(key) else {
            return;
        };
        if self.inner.closed.admits_caller() && busy.mark_layer(self.key(), &self.inner.closed) {
            match self.inner.mode {
                RegionMode::Span => self.span_close(&id, &entry),
                // Usually exited before: then this finds nothing to leave.
                RegionMode::Entry => self.entry_close(&id, &entry),
            }
        }
        // The state goes back to this thread's pool.
        drop(entry);
    }

    fn on_event(&self, event: &TracingEvent<'_>, ctx: Context<'_, S>) {
        if !self.inner.levels.wants_event(event.metadata().level()) {
            return;
        }
        let Some(_busy) = self.busy() else { return };
        self.on_user_event(event, &ctx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::span_store::shard_of;
    use std::sync::Mutex;
    use tracing::{Span, info_span};
    use tracing_subscriber::prelude::*;
    use tracing_trace2_record::{Record, Trace2Event};

    /// Writes each record's event name: a line per record, so the sink is called.
    struct Names;

    impl crate::Format for Names {
        fn format(&self, record: &Record<'_>, out: &mut Vec<u8>) {
            out.extend_from_slice(record.event.name().as_bytes());
            out.push(b'\n');
        }
    }

    fn layer(mode: RegionMode, sink: impl crate::Sink) -> Trace2Layer {
        Trace2Layer::builder()
            .with_region_mode(mode)
            .with_target(Target::new("GIT_TRACE2_EVENT", Names, sink))
            .build()
    }

    /// Every span's entry leaves the store when the span closes: in both region modes,
    /// and when the layer is closed and writes nothing for it.
    #[test]
    fn every_closed_span_leaves_the_store() {
        for mode in [RegionMode::Span, RegionMode::Entry] {
            let layer = layer(mode, crate::MemorySink::new());
            let probe = layer.clone();
            tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
                let outer = info_span!("outer");
                let inner = info_span!(parent: &outer, "inner");
                {
                    let _outer = outer.enter();
                    let _inner = inner.enter();
                }
                assert_eq!(probe.inner.spans.len(), 2, "{mode:?}");
                drop(inner);
                assert_eq!(probe.inner.spans.len(), 1, "{mode:?}");
                probe.close();
                drop(outer);
                assert_eq!(probe.inner.spans.len(), 0, "{mode:?}: closed layer");
            });
        }
    }

    /// Threads that create, enter and close spans at once, some of them shared (a
    /// parent entered on every thread, children closed on other threads than their
    /// own): nothing deadlocks, and every entry leaves the store.
    #[test]
    fn spans_shared_between_threads_all_leave_the_store() {
        let layer = layer(RegionMode::Span, crate::MemorySink::new());
        let probe = layer.clone();
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
        let shared = tracing::dispatcher::with_default(&dispatch, || info_span!("shared"));
        let (send, receive) = std::sync::mpsc::channel::<Span>();
        std::thread::scope(|scope| {
            for _ in 0..3 {
                let (dispatch, shared, send) = (&dispatch, &shared, send.clone());
                scope.spawn(move || {
                    tracing::dispatcher::with_default(dispatch, || {
                        for i in 0..300 {
                            let _shared = shared.enter();
                            let child = info_span!("child", i);
                            let _child = child.enter();
                            let grandchild = info_span!("grandchild");
                            grandchild.in_scope(|| {});
                            drop(_child);
                            // Every other child is closed by another thread.
                            if i % 2 == 0 {
                                let _ = send.send(child);
                            }
                        }
                    });
                });
            }
            drop(send);
            let dispatch = &dispatch;
            scope.spawn(move || {
                tracing::dispatcher::with_default(dispatch, || {
                    for child in receive {
                        drop(child);
                    }
                });
            });
        });
        assert_eq!(probe.inner.spans.len(), 1, "the shared span alone");
        // (Under the dispatcher: the Registry releases a closed span's parent through
        // the thread's default dispatcher.)
        tracing::dispatcher::with_default(&dispatch, || drop(shared));
        assert_eq!(probe.inner.spans.len(), 0);
    }

    /// Spans a sink closes while it writes the first line (`version`, written while the
    /// entered span's shard is held): those of that same shard are removed by the next
    /// lock of it, without locking it again (which would deadlock), the others at once.
    #[test]
    fn a_span_closed_while_its_shard_is_held_leaves_the_store() {
        static TO_CLOSE: Mutex<Vec<Span>> = Mutex::new(Vec::new());
        struct Closing;
        impl crate::Sink for Closing {
            fn write_line(&self, _line: &[u8]) -> std::io::Result<()> {
                let spans = std::mem::take(&mut *TO_CLOSE.lock().unwrap());
                drop(spans);
                Ok(())
            }
        }
        let layer = layer(RegionMode::Span, Closing);
        let probe = layer.clone();
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            let first = info_span!("first");
            let shard = shard_of(first.id().unwrap().into_u64());
            let mut same = 0;
            let mut others = 0;
            while same < 3 || others < 3 {
                let span = info_span!("closed_by_the_sink");
                if shard_of(span.id().unwrap().into_u64()) == shard {
                    same += 1;
                } else if others < 3 {
                    others += 1;
                } else {
                    continue;
                }
                TO_CLOSE.lock().unwrap().push(span);
            }
            assert_eq!(probe.inner.spans.len(), 7);
            // Its region opens: the process's first line is written under its shard.
            let _entered = first.enter();
            assert!(TO_CLOSE.lock().unwrap().is_empty(), "the sink closed them");
            assert_eq!(probe.inner.spans.len(), 1);
        });
    }
    /// Writes region lines as `THREAD enter|leave NESTING NAME` and other records as
    /// their event name: enough to check that each thread's regions nest.
    struct Regions;

    impl crate::Format for Regions {
        fn format(&self, record: &Record<'_>, out: &mut Vec<u8>) {
            let line = match record.event {
                Trace2Event::RegionEnter { region, nesting } => format!(
                    "{} enter {nesting} {}",
                    record.thread,
                    region.label.unwrap_or("")
                ),
                Trace2Event::RegionLeave {
                    region, nesting, ..
                } => format!(
                    "{} leave {nesting} {}",
                    record.thread,
                    region.label.unwrap_or("")
                ),
                other => other.name().to_owned(),
            };
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
        }
    }

    /// Checks that each thread's `lines` (of [`Regions`]) open and close regions as a
    /// stack: an enter one deeper than what is open, a leave at the nesting its region
    /// holds (a region closed out of order is removed where it stands). Returns the
    /// labels still open.
    fn open_after(lines: &str) -> Vec<String> {
        let mut threads: std::collections::HashMap<&str, Vec<String>> = Default::default();
        for line in lines.lines() {
            let mut words = line.split(' ');
            let (thread, what, nesting, label) =
                (words.next(), words.next(), words.next(), words.next());
            let (Some(thread), Some(nesting), Some(label)) = (thread, nesting, label) else {
                continue;
            };
            let open = threads.entry(thread).or_default();
            let nesting: usize = nesting.parse().unwrap();
            match what {
                Some("enter") => {
                    assert_eq!(nesting, open.len() + 1, "{line}\n{lines}");
                    open.push(label.to_owned());
                }
                Some("leave") => {
                    assert_eq!(
                        open.get(nesting - 1).map(String::as_str),
                        Some(label),
                        "{line}\n{lines}"
                    );
                    open.remove(nesting - 1);
                }
                _ => {}
            }
        }
        threads.into_values().flatten().collect()
    }

    /// A span closed while it is entered (its last handle dropped: the Registry holds
    /// no reference for an entry): its region is left at the close, later regions open
    /// at the top, its exit (if any) writes nothing more, and the store is empty.
    #[test]
    fn a_span_closed_while_entered_leaves_its_region_and_the_store() {
        for mode in [RegionMode::Span, RegionMode::Entry] {
            let sink = crate::MemorySink::new();
            let layer = Trace2Layer::builder()
                .with_region_mode(mode)
                .with_target(Target::new("GIT_TRACE2_EVENT", Regions, sink.clone()))
                .build();
            let probe = layer.clone();
            let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
            tracing::dispatcher::with_default(&dispatch, || {
                // Dropped between an enter and its exit.
                let span = info_span!("a", trace2.label = "dropped");
                let id = span.id().unwrap();
                dispatch.enter(&id);
                drop(span);
                dispatch.exit(&id);
                info_span!("b", trace2.label = "after-1").in_scope(|| {});
                // A forgotten guard.
                let span = info_span!("c", trace2.label = "forgotten");
                std::mem::forget(span.enter());
                drop(span);
                info_span!("d", trace2.label = "after-2").in_scope(|| {});
                // The outer of two dropped first, the inner still entered.
                let outer = info_span!("e", trace2.label = "outer");
                let inner = info_span!(parent: &outer, "f", trace2.label = "inner");
                let outer_guard = outer.enter();
                let inner_guard = inner.enter();
                drop(outer_guard);
                drop(outer);
                drop(inner_guard);
                drop(inner);
                info_span!("g", trace2.label = "after-3").in_scope(|| {});
            });
            // Entered on a thread, closed on another while still entered there.
            let span = tracing::dispatcher::with_default(&dispatch, || {
                info_span!("h", trace2.label = "on-a-worker")
            });
            let id = span.id().unwrap();
            let (entered, closed) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
            std::thread::scope(|scope| {
                let worker = scope.spawn(|| {
                    tracing::dispatcher::with_default(&dispatch, || {
                        dispatch.enter(&id);
                        entered.wait();
                        closed.wait();
                        info_span!("i", trace2.label = "worker-after").in_scope(|| {});
                        dispatch.exit(&id);
                        info_span!("j", trace2.label = "worker-after-exit").in_scope(|| {});
                    });
                });
                entered.wait();
                tracing::dispatcher::with_default(&dispatch, || drop(span));
                closed.wait();
                worker.join().unwrap();
            });
            let text = sink.to_string_lossy();
            // The test thread's name (its number depends on the threads before it).
            let first = text.lines().find(|l| l.ends_with(" enter 1 dropped"));
            let own = first.and_then(|l| l.split(' ').next()).unwrap().to_owned() + " ";
            let (main, worker): (Vec<&str>, Vec<&str>) = text
                .lines()
                .filter(|l| l.contains(" enter ") || l.contains(" leave "))
                .partition(|l| l.starts_with(&own));
            let main = main.join("\n");
            assert_eq!(open_after(&main), Vec::<String>::new(), "{mode:?}\n{text}");
            for after in ["after-1", "after-2", "after-3"] {
                assert!(
                    main.contains(&format!(" enter 1 {after}")),
                    "{mode:?}: {after}\n{text}"
                );
            }
            let worker: Vec<&str> = worker
                .iter()
                .map(|l| l.split_once(' ').unwrap().1)
                .collect();
            let want: &[&str] = match mode {
                // The region leaves at the close, on the worker's lane.
                RegionMode::Span => &[
                    "enter 1 on-a-worker",
                    "leave 1 on-a-worker",
                    "enter 1 worker-after",
                    "leave 1 worker-after",
                    "enter 1 worker-after-exit",
                    "leave 1 worker-after-exit",
                ],
                // The worker's region stays open to its exit, where it goes without a
                // line (its texts went with the span).
                RegionMode::Entry => &[
                    "enter 1 on-a-worker",
                    "enter 2 worker-after",
                    "leave 2 worker-after",
                    "enter 1 worker-after-exit",
                    "leave 1 worker-after-exit",
                ],
            };
            assert_eq!(worker, want, "{mode:?}\n{text}");
            assert_eq!(probe.inner.spans.len(), 0, "{mode:?}");
        }
    }
}
