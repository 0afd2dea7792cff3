//! The core layer: turns `tracing` callbacks into Trace2 records and hands each record
//! to every enabled target, in the order the targets were added (git's order is
//! normal, perf, event).
//!
//! * Spans are regions. `on_new_span`/`on_record` keep a [`RegionState`] in the span's
//!   extensions; `on_enter` opens the region on the calling thread's stack
//!   (`region_enter`), `on_exit` closes it (`region_leave` with its duration). A span
//!   entered again on a thread where it is already open is counted, not reopened.
//! * Events with the target [`crate::api::TARGET`] are the typed Trace2 events of [`api`].
//! * Other events: ERROR and WARN become `error`. Git's `fmt` is the printf format
//!   string; `tracing` keeps no template once a message is formatted, so `fmt` holds the
//!   message alone and `msg` the message followed by the other fields as `name=value`.
//!   A message-only event becomes `printf`; `key` + `value` (or `key` + `json`) become
//!   one `data` (or `data_json`); every other field becomes one `data` named after the
//!   field (a message next to data fields is written as a `printf` first). `category`
//!   and `repo` fields set the category (default: the event's target) and the
//!   repository column.
//!
//! Every callback takes one clock reading, formats the lines of all targets into a
//! per-thread buffer and only then writes them, one `write` per line, with no lock of
//! `tracing`'s held (the targets and that fan-out live in `targets.rs`). With a
//! deferred writer ([`Trace2LayerBuilder::with_deferred`]) the callback encodes each
//! record once into that buffer instead ([`tracing_trace2_record::codec`]) and queues it; a worker
//! thread formats and writes it through the same fan-out (`background/replay.rs`). A
//! thread-local flag drops events raised while the layer itself is at work (a field's
//! `Debug` impl that logs, or a sink on the worker), so the layer never recurses or
//! deadlocks.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

use tracing_core::span::{Attributes, Id, Record as SpanRecord};
use tracing_core::{Event as TracingEvent, Level, Metadata, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use crate::busy::{self, Busy};
use crate::clock;

use crate::background::BackgroundGuard;
use crate::background::BackgroundOptions;
use crate::fields::EventFields;
use crate::output::{Output, Pending};
use crate::region::{RegionFields, RegionState, SpanRegion};
use crate::session::Session;
use crate::targets::Targets;
use crate::thread::{self, Frame, ThreadState};
use crate::wire::{self, ApiCall, ApiChild, ApiFields, ApiRegion};
use tracing_trace2_record::{Callsite, ChildInfo, Event, Record, RegionInfo, TimerInfo, Timestamp};

pub use crate::targets::Target;

/// Builds a [`Trace2Layer`].
#[derive(Debug)]
pub struct Trace2LayerBuilder {
    targets: Vec<Target>,
    exe: String,
    session: Option<&'static Session>,
    deferred: Option<BackgroundOptions>,
}

impl Default for Trace2LayerBuilder {
    fn default() -> Self {
        Trace2LayerBuilder {
            targets: Vec::new(),
            exe: env!("CARGO_PKG_VERSION").to_owned(),
            session: None,
            deferred: None,
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
        let session = self.session.unwrap_or_else(Session::global);
        let targets = Targets {
            list: self.targets,
            session,
        };
        Trace2Layer {
            inner: Arc::new(Inner {
                output: Output::new(targets, self.deferred.as_ref()),
                exe: self.exe,
                session,
                version: Once::new(),
                closed: AtomicBool::new(false),
            }),
        }
    }
}

/// A `tracing` layer that writes Trace2 lines to its targets. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Trace2Layer {
    inner: Arc<Inner>,
}

struct Inner {
    /// Direct or deferred, chosen once when the layer is built.
    output: Output,
    exe: String,
    session: &'static Session,
    version: Once,
    /// Set once `atexit` is written: git's Trace2 turns itself off there, and so do we.
    closed: AtomicBool,
}

/// Stack marker of a region opened by `api::region_enter` (span ids are never 0 or
/// `u64::MAX`).
const API_REGION: u64 = u64::MAX;
/// Stack marker of the region git writes for `thread_start` on the main thread.
const THREAD_ON_MAIN: u64 = 0;

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("targets", &self.output.targets().list)
            .field("deferred", &self.output.is_deferred())
            .field("exe", &self.exe)
            .finish_non_exhaustive()
    }
}

thread_local! {
    static PENDING: RefCell<Pending> = RefCell::new(Pending::default());
    static EVENT_FIELDS: RefCell<EventFields> = RefCell::new(EventFields::default());
    static RECORD_FIELDS: RefCell<RegionFields> = RefCell::new(RegionFields::default());
}

fn with_pending<R>(f: impl FnOnce(&mut Pending) -> R) -> R {
    let mut f = Some(f);
    let result = PENDING.try_with(|cell| {
        cell.try_borrow_mut().ok().map(|mut lines| {
            lines.clear();
            (f.take().expect("called once"))(&mut lines)
        })
    });
    match result {
        Ok(Some(r)) => r,
        // The thread is shutting down or the buffer is in use: use a fresh one.
        _ => (f.take().expect("called once"))(&mut Pending::default()),
    }
}

fn callsite_of(meta: &'static Metadata<'static>) -> Callsite<'static> {
    Callsite {
        file: meta.file(),
        line: meta.line().unwrap_or(0),
    }
}

impl Trace2Layer {
    /// A builder with no targets.
    pub fn builder() -> Trace2LayerBuilder {
        Trace2LayerBuilder::default()
    }

    /// Marks the thread as inside the layer, unless it already is or the layer is closed.
    #[inline]
    fn busy(&self) -> Option<Busy> {
        if self.inner.closed.load(Ordering::Relaxed) {
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
        busy::close(self.key(), &self.inner.closed);
    }

    /// The targets, in the order they are visited.
    pub fn targets(&self) -> &[Target] {
        &self.inner.output.targets().list
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

    fn record<'a>(
        &'a self,
        thread: &'a ThreadState,
        event: Event<'a>,
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

    /// Formats `record` for every enabled target, after the `version` line if this is
    /// the first record of the process.
    fn format_all(&self, record: &Record<'_>, lines: &mut Pending) {
        self.ensure_version(record, None);
        self.format_into(record, lines);
    }

    /// Takes `record` into `pending` (formatted, or encoded for the deferred writer).
    fn format_into(&self, record: &Record<'_>, pending: &mut Pending) {
        self.inner.output.take(record, pending);
    }

    /// Writes `version` (and `too_many_files` where asked) once per layer, before any
    /// other line. `exe` overrides the configured version (an explicit `version` call).
    fn ensure_version(&self, context: &Record<'_>, exe: Option<&str>) {
        if self.inner.version.is_completed() {
            return;
        }
        self.inner.version.call_once(|| {
            let mut lines = Pending::default();
            let version = Record {
                event: Event::Version {
                    exe: exe.unwrap_or(&self.inner.exe),
                },
                ..*context
            };
            self.format_into(&version, &mut lines);
            let too_many = Record {
                event: Event::TooManyFiles,
                ..version
            };
            self.format_into(&too_many, &mut lines);
            self.write_lines_from(&lines, Some(&version));
        });
    }

    /// Writes each formatted line with one call to its target's sink.
    fn write_lines(&self, pending: &Pending) {
        self.write_lines_from(pending, None);
    }

    /// [`Self::write_lines`] while the calling thread's state is borrowed: `context` then
    /// names the thread for an `error` line about a failed write.
    fn write_lines_from(&self, pending: &Pending, context: Option<&Record<'_>>) {
        self.inner.output.write(pending, context);
    }

    /// Runs `f` with the calling thread's state and the region of span `id`, then writes
    /// what it formatted (after the span's extensions are unlocked).
    fn with_span_region<S>(
        &self,
        id: &Id,
        ctx: &Context<'_, S>,
        f: impl FnOnce(&mut ThreadState, RegionInfo<'_>, Timestamp, Callsite<'static>, &mut Pending),
    ) where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let Some(span) = ctx.span(id) else { return };
        let now = clock::now();
        let callsite = callsite_of(span.metadata());
        with_pending(|lines| {
            {
                let extensions = span.extensions();
                let Some(state) = extensions.get::<SpanRegion>().and_then(SpanRegion::state) else {
                    return;
                };
                thread::with_state(now.t_abs_us, |t| f(t, state.info(), now, callsite, lines));
            }
            self.write_lines(lines);
        });
    }

    /// Formats `region_enter` and opens the region on the thread's stack under `marker`
    /// (a span id, or one of the markers of regions that are not spans).
    fn enter_region(
        &self,
        t: &mut ThreadState,
        marker: u64,
        region: RegionInfo<'_>,
        now: Timestamp,
        callsite: Callsite<'_>,
        lines: &mut Pending,
    ) {
        let open = t.depth();
        let event = Event::RegionEnter {
            region,
            nesting: open + 1,
        };
        let record = self.record(t, event, now, callsite, open);
        self.format_all(&record, lines);
        t.stack.push(Frame {
            span: marker,
            start_us: now.t_abs_us,
            repeats: 0,
        });
    }

    /// Closes the innermost region opened under `marker`, wherever it stands in the
    /// stack, and formats its `region_leave` at its own depth.
    fn leave_region(
        &self,
        t: &mut ThreadState,
        marker: u64,
        region: RegionInfo<'_>,
        now: Timestamp,
        callsite: Callsite<'_>,
        lines: &mut Pending,
    ) {
        let Some(pos) = t.stack.iter().rposition(|f| f.span == marker) else {
            return;
        };
        let frame = t.stack.remove(pos);
        let event = Event::RegionLeave {
            region,
            nesting: pos as u32 + 1,
            t_rel_us: now.t_abs_us.saturating_sub(frame.start_us),
        };
        let record = self.record(t, event, now, callsite, pos as u32);
        self.format_all(&record, lines);
    }

    fn on_user_event(&self, event: &TracingEvent<'_>) {
        let meta = event.metadata();
        let now = clock::now();
        let callsite = callsite_of(meta);
        let _ = EVENT_FIELDS.try_with(|cell| {
            let Ok(mut fields) = cell.try_borrow_mut() else {
                return;
            };
            fields.clear();
            busy::visiting(|| event.record(&mut *fields));
            with_pending(|lines| {
                thread::with_state(now.t_abs_us, |t| {
                    self.user_event_records(t, &fields, meta, now, callsite, lines);
                });
                self.write_lines(lines);
            });
        });
    }

    fn user_event_records(
        &self,
        t: &ThreadState,
        fields: &EventFields,
        meta: &'static Metadata<'static>,
        now: Timestamp,
        callsite: Callsite<'_>,
        lines: &mut Pending,
    ) {
        let open = t.depth();
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
            let record = self.record(
                t,
                Event::Error {
                    msg: msg.as_deref(),
                    fmt: fmt.as_deref(),
                },
                now,
                callsite,
                open,
            );
            self.format_all(&record, lines);
            return;
        }
        let category = fields.category.get().unwrap_or(meta.target());
        let nesting = open + 1;
        let t_rel_us = t.since_innermost(now.t_abs_us);
        let mut wrote = false;
        if let Some(msg) = message {
            let record = self.record(t, Event::Printf { msg: Some(msg) }, now, callsite, open);
            self.format_all(&record, lines);
            wrote = true;
        }
        let mut datum = |key: &str, value: &str, json: bool| {
            let event = if json {
                Event::DataJson {
                    repo: fields.repo,
                    category,
                    key,
                    json: value,
                    nesting,
                    t_rel_us,
                }
            } else {
                Event::Data {
                    repo: fields.repo,
                    category,
                    key,
                    value,
                    nesting,
                    t_rel_us,
                }
            };
            let record = self.record(t, event, now, callsite, open);
            self.format_all(&record, lines);
        };
        if let Some(key) = fields.key.get() {
            if let Some(json) = fields.json.get() {
                match tracing_trace2_record::text::compact_json(json) {
                    Some(compact) => datum(key, &compact, true),
                    None => datum(key, json, false),
                }
                wrote = true;
            } else if let Some(value) = fields.value.get() {
                datum(key, value, false);
                wrote = true;
            } else {
                datum("key", key, false);
                wrote = true;
            }
        } else {
            for (name, slot) in [("value", &fields.value), ("json", &fields.json)] {
                if let Some(value) = slot.get() {
                    datum(name, value, false);
                    wrote = true;
                }
            }
        }
        for (name, value) in fields.data() {
            datum(name, value, false);
            wrote = true;
        }
        if !wrote {
            let record = self.record(t, Event::Printf { msg: None }, now, callsite, open);
            self.format_all(&record, lines);
        }
    }

    fn on_api_event(&self, event: &TracingEvent<'_>) {
        let mut fields = ApiFields::default();
        event.record(&mut fields);
        let now = clock::now();
        let callsite = match wire::location(&fields) {
            Some(Some((file, line))) => Callsite {
                file: Some(file),
                line,
            },
            Some(None) => Callsite::default(),
            None => callsite_of(event.metadata()),
        };
        let Some(call) = ApiCall::receive(&fields) else {
            return;
        };
        if matches!(call, ApiCall::Atexit { .. }) {
            // `atexit` is the last line: no other thread may write after it, so close
            // first (waiting for threads still inside); then flush, so that a background
            // writer's report of dropped lines (written by its worker) comes before it.
            self.close();
            self.flush();
        }
        let base = match call {
            ApiCall::ThreadStart { name } => Some(name),
            _ => None,
        };
        with_pending(|lines| {
            thread::with_state_as(base, now.t_abs_us, |t| {
                self.api_records(t, &call, now, callsite, lines);
            });
            self.write_lines(lines);
        });
        if matches!(call, ApiCall::ThreadExit) {
            thread::reset();
        }
    }

    fn api_records(
        &self,
        t: &mut ThreadState,
        call: &ApiCall<'_>,
        now: Timestamp,
        callsite: Callsite<'_>,
        lines: &mut Pending,
    ) {
        let open = t.depth();
        match *call {
            ApiCall::Version { exe } => {
                let record = self.record(t, Event::Printf { msg: None }, now, callsite, open);
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
                t.register(name, now.t_abs_us);
                let record = self.record(t, Event::ThreadStart, now, callsite, 0);
                self.format_all(&record, lines);
            }
            ApiCall::ThreadExit if t.is_main => {
                let region = RegionInfo {
                    msg: Some("thread-proc on main"),
                    ..RegionInfo::default()
                };
                self.leave_region(t, THREAD_ON_MAIN, region, now, callsite, lines);
            }
            ApiCall::ThreadExit => {
                t.stack.clear();
                let event = Event::ThreadExit {
                    elapsed_us: now.t_abs_us.saturating_sub(t.start_us),
                };
                let record = self.record(t, event, now, callsite, 0);
                self.format_all(&record, lines);
            }
            ApiCall::Atexit { code } => {
                t.stack.clear();
                let record = self.record(t, Event::Atexit { code }, now, callsite, 0);
                self.format_all(&record, lines);
            }
            _ => {
                let list = call_list(call);
                let list: Vec<&str> = list.iter().map(String::as_str).collect();
                let Some(event) = plain_event(call, &list, t, now) else {
                    return;
                };
                let open = match event {
                    Event::Timer { .. } | Event::Counter { .. } => 0,
                    _ => open,
                };
                let record = self.record(t, event, now, callsite, open);
                self.format_all(&record, lines);
            }
        }
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

/// The string list a call carries (`argv`, `ancestry`), read back from the wire.
fn call_list(call: &ApiCall<'_>) -> Vec<String> {
    match *call {
        ApiCall::Start { argv }
        | ApiCall::Alias { argv, .. }
        | ApiCall::ChildStart(ApiChild { argv, .. })
        | ApiCall::Exec { argv, .. } => wire::decode_list(argv),
        ApiCall::CmdAncestry { ancestry } => wire::decode_list(ancestry),
        _ => Vec::new(),
    }
}

/// The record event of a typed Trace2 call that needs no special handling.
fn plain_event<'a>(
    call: &ApiCall<'a>,
    list: &'a [&'a str],
    t: &ThreadState,
    now: Timestamp,
) -> Option<Event<'a>> {
    let optional = |s: &'a str| Some(s).filter(|s| !s.is_empty());
    Some(match *call {
        ApiCall::Start { .. } => Event::Start { argv: list },
        ApiCall::CmdAncestry { .. } => Event::CmdAncestry { ancestry: list },
        ApiCall::CmdPath { path } => Event::CmdPath { path },
        ApiCall::CmdName { name, hierarchy } => Event::CmdName { name, hierarchy },
        ApiCall::CmdMode { name } => Event::CmdMode { name },
        ApiCall::Alias { alias, .. } => Event::Alias { alias, argv: list },
        ApiCall::DefParam {
            scope,
            param,
            value,
        } => Event::DefParam {
            scope,
            param,
            value,
        },
        ApiCall::DefRepo { repo, worktree } => Event::DefRepo { repo, worktree },
        ApiCall::Printf { msg } => Event::Printf { msg: optional(msg) },
        ApiCall::Error { msg, fmt } => Event::Error {
            msg: optional(fmt).map(|_| msg),
            fmt: optional(fmt),
        },
        ApiCall::Data {
            category,
            key,
            value,
            repo,
        } => Event::Data {
            repo,
            category,
            key,
            value,
            nesting: t.depth() + 1,
            t_rel_us: t.since_innermost(now.t_abs_us),
        },
        ApiCall::DataJson {
            category,
            key,
            json,
            repo,
        } => Event::DataJson {
            repo,
            category,
            key,
            json,
            nesting: t.depth() + 1,
            t_rel_us: t.since_innermost(now.t_abs_us),
        },
        ApiCall::ChildStart(ref c) => Event::ChildStart(ChildInfo {
            child_id: c.child_id,
            class: c.class,
            hook_name: optional(c.hook_name),
            cd: optional(c.cd),
            use_shell: c.use_shell,
            is_git: c.is_git,
            argv: list,
        }),
        ApiCall::ChildExit {
            child_id,
            pid,
            code,
            elapsed_us,
        } => Event::ChildExit {
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
        } => Event::ChildReady {
            child_id,
            pid,
            ready,
            elapsed_us,
        },
        ApiCall::Exec { exec_id, exe, .. } => Event::Exec {
            exec_id,
            exe,
            argv: list,
        },
        ApiCall::ExecResult { exec_id, code, err } => Event::ExecResult {
            exec_id,
            code,
            err: optional(err),
        },
        ApiCall::Timer(ref timer) => Event::Timer {
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
        } => Event::Counter {
            per_thread,
            category,
            name,
            value,
        },
        ApiCall::Exit { code } => Event::Exit { code },
        ApiCall::Signal { signo } => Event::Signal { signo },
        ApiCall::Version { .. }
        | ApiCall::RegionEnter(_)
        | ApiCall::RegionLeave(_)
        | ApiCall::ThreadStart { .. }
        | ApiCall::ThreadExit
        | ApiCall::Atexit { .. } => return None,
    })
}

impl<S> tracing_subscriber::Layer<S> for Trace2Layer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(_busy) = self.busy() else { return };
        let meta = attrs.metadata();
        // A recycled state: its strings keep their room, so this allocates nothing but
        // the box the span's extensions put every value in.
        let mut state = RegionState::pooled(meta.name(), meta.target());
        busy::visiting(|| attrs.record(state.fields_mut()));
        state.build_msg();
        if let Some(span) = ctx.span(id) {
            // A state already there (never, short of a layer misuse) is recycled
            // when dropped.
            drop(span.extensions_mut().replace(SpanRegion::new(state)));
        }
    }

    fn on_record(&self, id: &Id, values: &SpanRecord<'_>, ctx: Context<'_, S>) {
        let Some(_busy) = self.busy() else { return };
        let _ = RECORD_FIELDS.try_with(|cell| {
            let Ok(mut fields) = cell.try_borrow_mut() else {
                return;
            };
            fields.clear();
            busy::visiting(|| values.record(&mut *fields));
            if let Some(span) = ctx.span(id)
                && let Some(state) = span
                    .extensions_mut()
                    .get_mut::<SpanRegion>()
                    .and_then(SpanRegion::state_mut)
            {
                state.record(&fields);
            }
        });
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        let Some(_busy) = self.busy() else { return };
        let key = id.into_u64();
        self.with_span_region(id, &ctx, |t, region, now, callsite, lines| {
            // A span entered again where it is already open is counted, not reopened.
            if let Some(frame) = t.stack.iter_mut().rev().find(|f| f.span == key) {
                frame.repeats += 1;
                return;
            }
            self.enter_region(t, key, region, now, callsite, lines);
        });
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        let Some(_busy) = self.busy() else { return };
        let key = id.into_u64();
        self.with_span_region(id, &ctx, |t, region, now, callsite, lines| {
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

    fn on_event(&self, event: &TracingEvent<'_>, _ctx: Context<'_, S>) {
        let Some(_busy) = self.busy() else { return };
        if event.metadata().target() == wire::TARGET {
            self.on_api_event(event);
        } else {
            self.on_user_event(event);
        }
    }
}
