//! The core layer: turns `tracing` callbacks into Trace2 records and hands each record
//! to every enabled target, in the order the targets were added (git's order is
//! normal, perf, event).
//!
//! * Spans are regions. `on_new_span`/`on_record` keep a [`RegionState`] in the layer's
//!   span store (`span_store.rs`, by span id, beside the Registry). In the default
//!   [`RegionMode::Span`] a span's region opens when the span is first entered
//!   (`region_enter`) and closes when the span closes (`region_leave`,
//!   `t_rel` the wall time between): one region per `#[instrument] async fn` call however
//!   often it is polled. Each region goes on a *lane* (a Trace2 thread, `thread.rs`): the
//!   lane the entering OS thread is on when the span's parent region is on top of it (or
//!   it is empty), else an idle *task lane* (`task-lane-NN`, at most
//!   [`Trace2LayerBuilder::with_max_task_lanes`] of them, reused once their stack is
//!   empty, ended before `atexit`; past the bound the region is left out). So every
//!   lane's enters and leaves form a strict stack, however tasks interleave and move
//!   between threads. A span entered once, on top of its parent, writes what git's
//!   per-entry mode writes.
//!   [`RegionMode::Entry`] is git's own behaviour: a region per entry, on the entering
//!   thread (a span entered again where it is already open is counted, not reopened).
//! * The typed Trace2 calls of [`crate::api`] come straight from the api functions
//!   (as `wire.rs` values), not through `tracing`: no filter drops them and no other layer sees
//!   them.
//! * User spans and events above the layer's level ([`Trace2LayerBuilder::with_max_level`],
//!   INFO by default) are left out; a per-layer filter (`.with_filter(..)`) narrows
//!   further.
//! * Other events: ERROR and WARN become `error`. Git's `fmt` is the printf format
//!   string; `tracing` keeps no template once a message is formatted, so `fmt` holds the
//!   message alone and `msg` the message followed by the other fields as `name=value`.
//!   A message-only event becomes `printf`; `key` + `value` (or `key` + `json`) become
//!   one `data` (or `data_json`); every other field becomes one `data` named after the
//!   field (a message next to data fields is written as a `printf` first). A `category`
//!   field names the datum's category (default: the enclosing span's region category,
//!   else the event's target); `repo` gives the repository column.
//! * Every lane writes `thread_start` before its first line; an OS thread's lane writes
//!   its per-thread timers and `thread_exit` when the thread ends. Lanes still announced
//!   when the process ends ([`crate::api::end_threads`], else `atexit`) are ended by the
//!   exiting thread, which alone writes from then on.
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
//!
//! The small steps every line goes through (the in-flight mark, building a record,
//! handing it to the targets) are forced inline in optimized builds only, as the
//! Event format's helpers are: each call boundary cost more than the step
//! (docs/performance.md, "Round 3, third step"), and unoptimized, forced inlining only
//! grows the callers' stack frames.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::Once;

use tracing_core::span::{Attributes, Id, Record as SpanRecord};
use tracing_core::{Event as TracingEvent, Level, LevelFilter, Metadata, Subscriber};
use tracing_subscriber::filter::Filtered;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use crate::busy::{self, Busy, Gate};
use crate::callsite;
use crate::clock;

use crate::background::BackgroundGuard;
use crate::background::BackgroundOptions;
use crate::fields::EventFields;
use crate::lanes::{DEFAULT_MAX_TASK_LANES, LaneBook};
use crate::output::{CallbackOutput, Output};
use crate::region::{FieldPolicy, RegionFields, RegionState, SpanRegion, default_category};
use crate::session::Session;
use crate::span_store::{SpanEntry, SpanStore};
use crate::targets::Targets;
use crate::text_slot::TextSlot;
use crate::thread::{self, Frame, Lane, LaneOwner, ThreadState};
use crate::timer_table::{self, TotalLine};
use crate::wire::{ApiCall, ApiRegion, Origin};
use tracing_trace2_record::{
    Callsite, ChildInfo, Record, RegionInfo, TimerInfo, Timestamp, Trace2Event,
};

pub use crate::targets::Target;

/// How spans become regions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegionMode {
    /// One region per span lifetime: `region_enter` at the span's first entry,
    /// `region_leave` when it closes. Right for `async fn`s (entered once per poll) and
    /// spans kept and entered many times; regions that would break a thread's strict
    /// stack go on a Trace2 thread of their own (see the module documentation).
    #[default]
    Span,
    /// Git's behaviour: one region per entry, on the entering thread. An `async fn`
    /// then writes one region per poll.
    Entry,
}

/// Builds a [`Trace2Layer`].
#[derive(Debug)]
pub struct Trace2LayerBuilder {
    targets: Vec<Target>,
    exe: String,
    session: Option<&'static Session>,
    deferred: Option<BackgroundOptions>,
    mode: RegionMode,
    max_level: LevelFilter,
    announce: bool,
    max_task_lanes: usize,
    fields: FieldPolicy,
}

impl Default for Trace2LayerBuilder {
    fn default() -> Self {
        Trace2LayerBuilder {
            targets: Vec::new(),
            exe: env!("CARGO_PKG_VERSION").to_owned(),
            session: None,
            deferred: None,
            mode: RegionMode::default(),
            max_level: LevelFilter::INFO,
            announce: true,
            max_task_lanes: DEFAULT_MAX_TASK_LANES,
            fields: FieldPolicy::default(),
        }
    }
}

impl Trace2LayerBuilder {
    /// Adds a target; targets are visited in the order they were added.
    pub fn with_target(mut self, target: Target) -> Self {
        self.targets.push(target);
        self
    }

    /// The version written in the `version` line (`exe`): the program's own version.
    /// Defaults to this crate's version.
    pub fn with_exe_version(mut self, exe: impl Into<String>) -> Self {
        self.exe = exe.into();
        self
    }

    /// Uses `session` instead of the process's global session (for replaying traces).
    pub fn with_session(mut self, session: &'static Session) -> Self {
        self.session = Some(session);
        self
    }

    /// How spans become regions (default: [`RegionMode::Span`], one region per span
    /// lifetime).
    pub fn with_region_mode(mut self, mode: RegionMode) -> Self {
        self.mode = mode;
        self
    }

    /// The most verbose level of user spans and events that become Trace2 output
    /// (default: INFO, so `debug!`/`trace!` events and spans of the program and its
    /// dependencies are left out). The typed [`crate::api`] calls are not affected. A
    /// per-layer filter (`layer.with_filter(..)`) narrows this further.
    pub fn with_max_level(mut self, level: impl Into<LevelFilter>) -> Self {
        self.max_level = level.into();
        self
    }

    /// Whether a span's fields without a Trace2 role (a function's arguments under
    /// `#[instrument]`) are written into its region's message as `name=value` (default:
    /// yes). Either way the `trace2.*` fields keep their roles, and no field is formatted
    /// for a region that no target writes (one nested deeper than every target's limit).
    pub fn with_span_fields(mut self, include: bool) -> Self {
        self.fields.others = include;
        self
    }

    /// The most bytes of a region's message (default:
    /// [`DEFAULT_MESSAGE_LIMIT`](crate::DEFAULT_MESSAGE_LIMIT)); a longer one is cut on
    /// a character boundary and ends with `...`. A field's `Debug` text is formatted
    /// only up to the bound.
    pub fn with_message_limit(mut self, bytes: usize) -> Self {
        self.fields.limit = bytes;
        self
    }

    /// Whether every thread that writes is announced (default: yes): `thread_start`
    /// before its first line and, when the OS thread ends, its per-thread timers and
    /// `thread_exit`. The OpenTelemetry trace2receiver ignores every line of a thread it
    /// was not told about. `false` is git's behaviour, where only threads that call
    /// `thread_start` themselves are announced (the lanes of async tasks are announced
    /// in any case).
    pub fn with_thread_announcement(mut self, announce: bool) -> Self {
        self.announce = announce;
        self
    }

    /// The most task lanes (default [`DEFAULT_MAX_TASK_LANES`]): Trace2 threads that
    /// carry the regions of spans that could not go on their OS thread's lane (see the
    /// module documentation). An idle one is reused before a new one is made; past the
    /// bound a region that needs one is left out of the trace, and the number left out
    /// is written as a `data` line (`trace2`/`task_regions_dropped`) at the process end.
    /// At least 1.
    pub fn with_max_task_lanes(mut self, lanes: usize) -> Self {
        self.max_task_lanes = lanes.max(1);
        self
    }

    /// Formats and writes on a worker thread: the traced thread encodes each record
    /// once ([`tracing_trace2_record::codec`]) and queues it; the worker formats it for every target and
    /// writes the lines (see [`crate::background`] for the guarantees). The worker
    /// starts when the layer is built and is shut down by the exit handler, by
    /// [`Trace2Layer::background_guard`]'s guard, or when the last clone of the layer
    /// is dropped.
    pub fn with_deferred(mut self, options: BackgroundOptions) -> Self {
        self.deferred = Some(options);
        self
    }

    /// The layer.
    pub fn build(self) -> Trace2Layer {
        crate::background::set_failure_report(report_sink_failure);
        let session = self.session.unwrap_or_else(Session::global);
        let targets = Targets {
            list: self.targets,
            session,
        };
        Trace2Layer {
            inner: Arc::new(LayerState {
                output: Output::new(targets, self.deferred.as_ref()),
                exe: self.exe,
                session,
                version: Once::new(),
                closed: Gate::new(),
                lanes: LaneBook::new(self.max_task_lanes),
                mode: self.mode,
                max_level: self.max_level,
                announce: self.announce,
                fields: self.fields,
                spans: SpanStore::new(),
            }),
        }
    }
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
    max_level: LevelFilter,
    /// Announce every thread that writes (see `with_thread_announcement`).
    announce: bool,
    /// Which span fields become messages, and their bound.
    fields: FieldPolicy,
    /// The state of every span the layer records, by id.
    spans: SpanStore,
}

/// A span's nearest ancestor with a region had it left out (no task lane was free).
struct LeftOut;

/// Stack marker of a region opened by `api::region_enter` (span ids are never 0 or
/// `u64::MAX`).
const API_REGION: u64 = u64::MAX;
/// Stack marker of the region git writes for `thread_start` on the main thread.
const THREAD_ON_MAIN: u64 = 0;

impl std::fmt::Debug for LayerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("targets", &self.output.targets().list)
            .field("deferred", &self.output.is_deferred())
            .field("exe", &self.exe)
            .field("mode", &self.mode)
            .field("max_level", &self.max_level)
            .finish_non_exhaustive()
    }
}

impl LaneOwner for LayerState {
    fn end_os_thread(self: Arc<Self>, lane: &mut ThreadState) {
        Trace2Layer { inner: self }.end_os_thread(lane);
    }
}

thread_local! {
    static PENDING: RefCell<CallbackOutput> = RefCell::new(CallbackOutput::default());
    static EVENT_FIELDS: RefCell<EventFields> = RefCell::new(EventFields::default());
    static RECORD_FIELDS: RefCell<RegionFields> = RefCell::new(RegionFields::default());
}

fn with_pending<R>(mut f: impl FnMut(&mut CallbackOutput) -> R) -> R {
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

/// The depth of the innermost region a line written now belongs to: in the
/// region-per-span mode a lane may hold regions of suspended spans above the one the
/// thread is in, so the depth is that of the innermost span entered on this thread (or
/// of a region opened by the API, which belongs to the thread), not the stack's length.
fn active_depth(t: &ThreadState, innermost: Option<u64>) -> u32 {
    t.stack
        .iter()
        .rposition(|f| {
            Some(f.span) == innermost || f.span == API_REGION || f.span == THREAD_ON_MAIN
        })
        .map_or(0, |pos| pos as u32 + 1)
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

    /// The most verbose level of user spans and events this layer records.
    pub fn max_level(&self) -> LevelFilter {
        self.inner.max_level
    }

    /// This layer behind a per-layer filter at its own level ([`Self::max_level`]).
    ///
    /// A layer without a filter of its own tells `tracing` nothing, so beside a filtered
    /// layer (an `EnvFilter` fmt layer) `tracing` would build and dispatch every `debug`
    /// and `trace` span and event of the program. Filtered, the layer's level joins the
    /// other layers' in `tracing`'s level hint and callsite interest: what no layer wants
    /// is skipped at the call site, and this layer filters nothing for the others. The
    /// typed [`crate::api`] calls never pass through `tracing`, so no filter drops them.
    pub fn filtered<S>(self) -> Filtered<Trace2Layer, LevelFilter, S>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let level = self.max_level();
        tracing_subscriber::Layer::with_filter(self, level)
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

    /// Whether user spans and events at `level` become output.
    #[inline]
    fn wants(&self, level: &Level) -> bool {
        *level <= self.inner.max_level
    }

    #[inline]
    fn record<'a>(
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
    fn emit(
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
    fn emit_inline(
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
    fn format_all(&self, record: &Record<'_>, lines: &mut CallbackOutput) {
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
    fn ensure_version(&self, context: &Record<'_>, exe: Option<&str>) {
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
    fn write_lines(&self, t: &ThreadState, pending: &CallbackOutput) {
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
    fn enter_region(
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
    fn leave_region(
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

    /// Formats `thread_exit` for lane `t` and forgets that it was announced.
    fn exit_lane(
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
    fn end_lane_silently(&self, t: &mut ThreadState) {
        t.announced = false;
        drop(t.take_owner());
        self.inner.lanes.ended(&t.me);
    }

    /// The end of an OS thread whose lane was announced (its thread-local destructor):
    /// the thread's `th_timer`/`th_counter` lines, then `thread_exit`. Nothing in the
    /// program called for them: they name the call site of the thread's `thread_start`
    /// (where the thread first traced, or announced itself).
    fn end_os_thread(&self, t: &mut ThreadState) {
        if !self.inner.announce {
            return;
        }
        let Some(_busy) = self.busy() else { return };
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
    fn end_other_lanes(&self, caller: &Lane, last: bool, now: Timestamp, callsite: Callsite<'_>) {
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

    /// Region-per-entry mode: runs `f` with the calling thread's lane and the region of
    /// span `id`, then writes what it formatted.
    fn with_span_region(
        &self,
        id: &Id,
        mut f: impl FnMut(
            &mut ThreadState,
            RegionInfo<'_>,
            Timestamp,
            Callsite<'static>,
            &mut CallbackOutput,
        ),
    ) {
        let key = id.into_u64();
        // Held while the lines are formatted (shard, then lane), released before they
        // are written.
        let mut shard = self.inner.spans.lock(key);
        let Some(meta) = shard.get_mut(key).map(|entry| entry.meta) else {
            return;
        };
        let now = clock::now();
        let callsite = callsite::of(meta);
        let Some(lane) = thread::base_lane(None, now.t_abs_us) else {
            return;
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
    fn span_enter(&self, id: &Id, busy: &mut Busy) {
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
    fn span_close(&self, id: &Id, entry: &SpanEntry) {
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

    fn on_user_event<S>(&self, event: &TracingEvent<'_>, ctx: &Context<'_, S>)
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let meta = event.metadata();
        let now = clock::now();
        let callsite = callsite::of(meta);
        let _ = EVENT_FIELDS.try_with(|cell| {
            let Ok(mut fields) = cell.try_borrow_mut() else {
                return;
            };
            fields.clear();
            busy::visiting(|| event.record(&mut *fields));
            // The enclosing span's region, for its category (copied: a literal by
            // reference, else into the event's own slot, which keeps its room).
            if fields.category.get().is_none() {
                self.inherit_category(event, ctx, &mut fields.category);
            }
            thread::with_current_lane(now.t_abs_us, |lane, innermost| {
                with_pending(|lines| {
                    let mut t = thread::lock(lane);
                    let depth = match self.inner.mode {
                        RegionMode::Span => active_depth(&t, innermost),
                        RegionMode::Entry => t.depth(),
                    };
                    let category = fields
                        .category
                        .get()
                        .unwrap_or_else(|| default_category(meta.target()));
                    self.user_event_records(
                        &mut t, &fields, meta, category, depth, now, callsite, lines,
                    );
                    self.write_lines(&t, lines);
                });
            });
        });
    }

    /// The nearest ancestor of a new span with a region state, and the nesting it
    /// opens (or will open) at. The usual case takes the parent as the Registry records
    /// it (the explicit one, else the Registry's current span) and finds it in the store:
    /// a span this layer recorded, so one its filter lets through, which is what the
    /// filtered walk up the parents would find first. Else (a parent the layer never saw:
    /// filtered out by level or by a per-layer filter) the Registry's parents are walked.
    fn nearest_region<S>(
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

    /// Gives an event without a category of its own that of the region enclosing it:
    /// that of the nearest span in the event's span's scope that the layer records (as
    /// `tracing`'s `event_span` and `scope` find it), if it has one. The usual case, an
    /// event inside a span the layer records, takes the Registry's current span (or the
    /// explicit parent) and one store lookup; else the Registry's scope is walked.
    #[inline(never)]
    fn inherit_category<S>(
        &self,
        event: &TracingEvent<'_>,
        ctx: &Context<'_, S>,
        category: &mut TextSlot,
    ) where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let span = if event.is_root() {
            return;
        } else if event.is_contextual() {
            // Unfiltered: the Registry's own current span.
            match ctx.current_span().id() {
                Some(id) => id.into_u64(),
                None => return,
            }
        } else {
            match event.parent() {
                Some(id) => id.into_u64(),
                None => return,
            }
        };
        // In the store: a span this layer saw (so one its filter lets through, which is
        // the one `event_span` finds), with a region state.
        let mut copied = |entry: &mut SpanEntry| {
            entry.region.state()?.copy_category_into(category);
            Some(())
        };
        if self.inner.spans.with(span, &mut copied).flatten().is_some() {
            return;
        }
        let Some(enclosing) = ctx.event_span(event) else {
            return;
        };
        for span in enclosing.scope() {
            if self
                .inner
                .spans
                .with(span.id().into_u64(), &mut copied)
                .flatten()
                .is_some()
            {
                return;
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn user_event_records(
        &self,
        t: &mut ThreadState,
        fields: &EventFields,
        meta: &'static Metadata<'static>,
        category: &str,
        open: u32,
        now: Timestamp,
        callsite: Callsite<'_>,
        lines: &mut CallbackOutput,
    ) {
        let message = fields.message.get();
        if *meta.level() <= Level::WARN {
            // Errors carry the other fields after the message; `fmt` is the message alone,
            // which is what stands closest to git's format string.
            let mut msg = String::from(message.unwrap_or(""));
            for (name, value) in fields.data() {
                if !msg.is_empty() {
                    msg.push(' ');
                }
                msg.push_str(name);
                msg.push('=');
                msg.push_str(value);
            }
            let present = |s: &str| (!s.is_empty()).then(|| s.to_owned());
            let (msg, fmt) = (present(&msg), message.and_then(present).or(present(&msg)));
            let event = Trace2Event::Error {
                msg: msg.as_deref(),
                fmt: fmt.as_deref(),
            };
            self.emit(t, event, now, callsite, open, lines);
            return;
        }
        let nesting = open + 1;
        let t_rel_us = t.since_region(open, now.t_abs_us);
        let mut wrote = false;
        if let Some(msg) = message {
            self.emit(
                t,
                Trace2Event::Printf { msg: Some(msg) },
                now,
                callsite,
                open,
                lines,
            );
            wrote = true;
        }
        let datum = |t: &mut ThreadState,
                     lines: &mut CallbackOutput,
                     key: &str,
                     value: &str,
                     json: bool| {
            let event = if json {
                Trace2Event::DataJson {
                    repo: fields.repo,
                    category,
                    key,
                    json: value,
                    nesting,
                    t_rel_us,
                }
            } else {
                Trace2Event::Data {
                    repo: fields.repo,
                    category,
                    key,
                    value,
                    nesting,
                    t_rel_us,
                }
            };
            self.emit(t, event, now, callsite, open, lines);
        };
        if let Some(key) = fields.key.get() {
            if let Some(json) = fields.json.get() {
                match tracing_trace2_record::text::compact_json(json) {
                    Some(compact) => datum(t, lines, key, &compact, true),
                    None => datum(t, lines, key, json, false),
                }
            } else if let Some(value) = fields.value.get() {
                // The usual datum (`key` and `value`): its line emitted inline.
                let event = Trace2Event::Data {
                    repo: fields.repo,
                    category,
                    key,
                    value,
                    nesting,
                    t_rel_us,
                };
                self.emit_inline(t, event, now, callsite, open, lines);
            } else {
                datum(t, lines, "key", key, false);
            }
            wrote = true;
        } else {
            for (name, slot) in [("value", &fields.value), ("json", &fields.json)] {
                if let Some(value) = slot.get() {
                    datum(t, lines, name, value, false);
                    wrote = true;
                }
            }
        }
        for (name, value) in fields.data() {
            datum(t, lines, name, value, false);
            wrote = true;
        }
        if !wrote {
            self.emit(
                t,
                Trace2Event::Printf { msg: None },
                now,
                callsite,
                open,
                lines,
            );
        }
    }

    /// A typed call of [`crate::api`], handed over by `api` as a `wire::ApiCall` value.
    pub(crate) fn on_api_call(&self, call: &ApiCall<'_>, callsite: Callsite<'_>) {
        let Some(_busy) = self.busy() else { return };
        let now = clock::now();
        if matches!(call, ApiCall::EndThreads) {
            // From here on only this thread writes: the other threads' lanes end now,
            // and nothing may come on them before `atexit`.
            busy::close(self.key(), &self.inner.closed, true);
            if let Some((lane, _)) = thread::current_lane(now.t_abs_us) {
                self.end_other_lanes(&lane, false, now, callsite);
            }
            return;
        }
        if matches!(call, ApiCall::Atexit { .. }) {
            // `atexit` is the last line: no other thread may write after it, so close
            // first (waiting for threads still inside), end the lanes still announced
            // (when `end_threads` did not); then flush, so that a background writer's
            // report of dropped lines (written by its worker) comes before it.
            self.close();
            if let Some((lane, _)) = thread::current_lane(now.t_abs_us) {
                self.end_other_lanes(&lane, true, now, callsite);
            }
            self.flush();
        }
        let lane = match *call {
            ApiCall::ThreadStart { name } => {
                thread::base_lane(Some(name), now.t_abs_us).map(|lane| (lane, None))
            }
            ApiCall::ThreadExit => thread::base_lane(None, now.t_abs_us).map(|lane| (lane, None)),
            _ => thread::current_lane(now.t_abs_us),
        };
        let Some((lane, innermost)) = lane else {
            return;
        };
        let mut reset = false;
        with_pending(|lines| {
            let mut t = thread::lock(&lane);
            let depth = match self.inner.mode {
                RegionMode::Span => active_depth(&t, innermost),
                RegionMode::Entry => t.depth(),
            };
            reset = matches!(call, ApiCall::ThreadExit) && !t.is_main;
            self.api_records(&mut t, call, depth, now, callsite, lines);
            self.write_lines(&t, lines);
        });
        if reset {
            thread::reset();
        }
    }

    fn api_records(
        &self,
        t: &mut ThreadState,
        call: &ApiCall<'_>,
        open: u32,
        now: Timestamp,
        callsite: Callsite<'_>,
        lines: &mut CallbackOutput,
    ) {
        match *call {
            ApiCall::Version { exe } => {
                let record = self.record(t, Trace2Event::Printf { msg: None }, now, callsite, open);
                self.ensure_version(&record, Some(exe));
            }
            ApiCall::RegionEnter(ref region) => {
                self.enter_region(t, API_REGION, region_info(region), now, callsite, lines);
            }
            ApiCall::RegionLeave(ref region) => {
                // As in git, a leave closes the innermost region opened this way.
                self.leave_region(t, API_REGION, region_info(region), now, callsite, lines);
            }
            ApiCall::ThreadStart { name } if t.is_main => {
                // Git turns a thread_start on the main thread into a region.
                let msg = format!("thread-proc on main: {name}");
                let region = RegionInfo {
                    msg: Some(&msg),
                    ..RegionInfo::default()
                };
                self.enter_region(t, THREAD_ON_MAIN, region, now, callsite, lines);
            }
            ApiCall::ThreadStart { name } => {
                // A thread that wrote lines before naming itself ends under its old name.
                if t.announced && self.inner.announce {
                    self.exit_lane(t, now, callsite, lines);
                }
                t.register(name, now.t_abs_us);
                t.announced = true;
                self.inner.lanes.announced(&t.me);
                t.set_start_site(callsite.file, callsite.line);
                let record = self.record(t, Trace2Event::ThreadStart, now, callsite, 0);
                self.format_all(&record, lines);
                if self.inner.announce {
                    t.set_owner(&self.inner);
                }
            }
            ApiCall::ThreadExit if t.is_main => {
                let region = RegionInfo {
                    msg: Some("thread-proc on main"),
                    ..RegionInfo::default()
                };
                self.leave_region(t, THREAD_ON_MAIN, region, now, callsite, lines);
            }
            // A thread that wrote nothing (an idle pool worker whose start hook ran before
            // the subscriber was installed) was never seen: nothing to end.
            ApiCall::ThreadExit if !t.announced && self.inner.announce => {}
            ApiCall::ThreadExit => self.exit_lane(t, now, callsite, lines),
            ApiCall::Atexit { code } => {
                t.stack.clear();
                self.emit(t, Trace2Event::Atexit { code }, now, callsite, 0, lines);
                if !t.is_main {
                    // As in git, `atexit` is the last line of the thread that writes it:
                    // no `thread_exit` for it. Its lane is ended without a line, so
                    // that its OS thread's end writes nothing more and a later layer on
                    // this thread announces it again.
                    self.end_lane_silently(t);
                }
            }
            _ => {
                let Some(event) = plain_event(call, t, open, now) else {
                    return;
                };
                let open = match event {
                    Trace2Event::Timer { .. } | Trace2Event::Counter { .. } => 0,
                    _ => open,
                };
                self.emit(t, event, now, callsite, open, lines);
            }
        }
    }
}

/// Hands an API call to the Trace2 layer of the calling thread's current dispatcher
/// (nothing happens when it has none): what `api`'s calls do, and how the background
/// sinks report their failures ([`crate::background::report_failure`], set at `build`).
pub(crate) fn send(call: &ApiCall<'_>, from: Origin<'_>) {
    tracing::dispatcher::get_default(|dispatch| {
        if let Some(layer) = dispatch.downcast_ref::<Trace2Layer>() {
            layer.on_api_call(call, from.callsite());
        }
    });
}

/// A background sink's failure report: an `error` call from where the sink reports it.
fn report_sink_failure(msg: &str, fmt: &str, at: &'static std::panic::Location<'static>) {
    send(&ApiCall::Error { msg, fmt }, Origin::Caller(at));
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

/// The region of an API region call: empty strings are left out of the lines.
fn region_info<'a>(region: &ApiRegion<'a>) -> RegionInfo<'a> {
    RegionInfo {
        repo: region.repo,
        category: Some(region.category).filter(|s| !s.is_empty()),
        label: Some(region.label).filter(|s| !s.is_empty()),
        msg: region.msg,
    }
}

/// The record event of a typed Trace2 call that needs no special handling; `open` is
/// the depth data belongs to.
fn plain_event<'a>(
    call: &ApiCall<'a>,
    t: &ThreadState,
    open: u32,
    now: Timestamp,
) -> Option<Trace2Event<'a>> {
    let optional = |s: &'a str| Some(s).filter(|s| !s.is_empty());
    Some(match *call {
        ApiCall::Start { argv } => Trace2Event::Start { argv },
        ApiCall::CmdName { name, hierarchy } => Trace2Event::CmdName { name, hierarchy },
        ApiCall::DefParam {
            scope,
            param,
            value,
        } => Trace2Event::DefParam {
            scope,
            param,
            value,
        },
        ApiCall::Printf { msg } => Trace2Event::Printf { msg: optional(msg) },
        ApiCall::Error { msg, fmt } => Trace2Event::Error {
            msg: optional(fmt).map(|_| msg),
            fmt: optional(fmt),
        },
        ApiCall::Data {
            category,
            key,
            value,
            repo,
        } => Trace2Event::Data {
            repo,
            category,
            key,
            value,
            nesting: open + 1,
            t_rel_us: t.since_region(open, now.t_abs_us),
        },
        ApiCall::DataJson {
            category,
            key,
            json,
            repo,
        } => Trace2Event::DataJson {
            repo,
            category,
            key,
            json,
            nesting: open + 1,
            t_rel_us: t.since_region(open, now.t_abs_us),
        },
        ApiCall::ChildStart(ref c) => Trace2Event::ChildStart(ChildInfo {
            child_id: c.child_id,
            class: c.class,
            hook_name: optional(c.hook_name),
            cd: optional(c.cd),
            use_shell: c.use_shell,
            is_git: c.is_git,
            argv: c.argv,
        }),
        ApiCall::ChildExit {
            child_id,
            pid,
            code,
            elapsed_us,
        } => Trace2Event::ChildExit {
            child_id,
            pid,
            code,
            elapsed_us,
        },
        ApiCall::ChildReady {
            child_id,
            pid,
            ready,
            elapsed_us,
        } => Trace2Event::ChildReady {
            child_id,
            pid,
            ready,
            elapsed_us,
        },
        ApiCall::Exec { exec_id, exe, argv } => Trace2Event::Exec { exec_id, exe, argv },
        ApiCall::ExecResult { exec_id, code, err } => Trace2Event::ExecResult {
            exec_id,
            code,
            err: optional(err),
        },
        ApiCall::Timer(ref timer) => Trace2Event::Timer {
            per_thread: timer.per_thread,
            timer: TimerInfo {
                category: timer.category,
                name: timer.name,
                intervals: timer.intervals,
                total_ns: timer.total_ns,
                min_ns: timer.min_ns,
                max_ns: timer.max_ns,
            },
        },
        ApiCall::Counter {
            per_thread,
            category,
            name,
            value,
        } => Trace2Event::Counter {
            per_thread,
            category,
            name,
            value,
        },
        ApiCall::Exit { code } => Trace2Event::Exit { code },
        ApiCall::Signal { signo } => Trace2Event::Signal { signo },
        ApiCall::Plain(event) => event,
        ApiCall::Version { .. }
        | ApiCall::RegionEnter(_)
        | ApiCall::RegionLeave(_)
        | ApiCall::ThreadStart { .. }
        | ApiCall::ThreadExit
        | ApiCall::EndThreads
        | ApiCall::Atexit { .. } => return None,
    })
}

impl<S> tracing_subscriber::Layer<S> for Trace2Layer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let meta = attrs.metadata();
        if !self.wants(meta.level()) {
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

    fn on_exit(&self, id: &Id, _ctx: Context<'_, S>) {
        let key = id.into_u64();
        if self.inner.mode == RegionMode::Span {
            // Writes nothing, so a closing layer need not wait for it (no in-flight
            // mark); a re-entrant exit is dropped as its enter was.
            let Some(_busy) = Busy::enter() else { return };
            thread::pop_entered(key);
            return;
        }
        let Some(_busy) = self.busy() else { return };
        self.with_span_region(id, |t, region, now, callsite, lines| {
            if let Some(frame) = t.stack.iter_mut().rev().find(|f| f.span == key)
                && frame.repeats > 0
            {
                frame.repeats -= 1;
                return;
            }
            // A span exited on a thread where it was never entered (an async task that
            // moved) has no region here; one exited out of order is closed where it is.
            self.leave_region(t, key, region, now, callsite, lines);
        });
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
        if self.inner.mode == RegionMode::Span
            && self.inner.closed.admits_caller()
            && busy.mark_layer(self.key(), &self.inner.closed)
        {
            self.span_close(&id, &entry);
        }
        // The state goes back to this thread's pool.
        drop(entry);
    }

    fn on_event(&self, event: &TracingEvent<'_>, ctx: Context<'_, S>) {
        if !self.wants(event.metadata().level()) {
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
}
