//! The core layer: turns `tracing` callbacks into Trace2 records and hands each record
//! to every enabled target, in the order the targets were added (git's order is
//! normal, perf, event).
//!
//! * Spans are regions. `on_new_span`/`on_record` keep a [`RegionState`] in the span's
//!   extensions; `on_enter` opens the region on the calling thread's stack
//!   (`region_enter`), `on_exit` closes it (`region_leave` with its duration). A span
//!   entered again on a thread where it is already open is counted, not reopened.
//! * Events with the target [`api::TARGET`] are the typed Trace2 events of [`api`].
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
//! record once into that buffer instead ([`crate::codec`]) and queues it; a worker
//! thread formats and writes it through the same fan-out (`deferred.rs`). A
//! thread-local flag drops events raised while the layer itself is at work (a field's
//! `Debug` impl that logs, or a sink on the worker), so the layer never recurses or
//! deadlocks.

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

use tracing_core::span::{Attributes, Id, Record as SpanRecord};
use tracing_core::{Event as TracingEvent, Level, Metadata, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use crate::api;
use crate::clock;
use crate::codec;
use crate::deferred::Replay;
use crate::dst::BackgroundGuard;
use crate::dst::background::BackgroundOptions;
use crate::dst::queue::Queue;
use crate::fields::{ApiFields, EventFields};
use crate::record::{Callsite, ChildInfo, Event, Record, RegionInfo, TimerInfo, Timestamp};
use crate::region::{RegionFields, RegionState, SpanRegion};
use crate::session::Session;
use crate::targets::{Lines, Targets};
use crate::thread::{self, Frame, ThreadState};

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
    /// once ([`crate::codec`]) and queues it; the worker formats it for every target and
    /// writes the lines (see [`crate::dst::background`] for the guarantees). The worker
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
        let targets = Arc::new(Targets {
            list: self.targets,
            session,
        });
        let deferred = self
            .deferred
            .map(|options| Queue::start(Arc::new(Replay::new(Arc::clone(&targets))), &options));
        Trace2Layer {
            inner: Arc::new(Inner {
                targets,
                deferred,
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
    targets: Arc<Targets>,
    /// The deferred writer's queue: records are encoded and sent there instead of
    /// being formatted and written on the traced thread.
    deferred: Option<Arc<Queue>>,
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
            .field("targets", &self.targets.list)
            .field("deferred", &self.deferred.is_some())
            .field("exe", &self.exe)
            .finish_non_exhaustive()
    }
}

thread_local! {
    static BUSY: Cell<bool> = const { Cell::new(false) };
    static LINES: RefCell<Lines> = RefCell::new(Lines::default());
    static EVENT_FIELDS: RefCell<EventFields> = RefCell::new(EventFields::default());
    static RECORD_FIELDS: RefCell<RegionFields> = RefCell::new(RegionFields::default());
}

/// Marks this thread as inside the layer; `None` when it already is (re-entrant call).
pub(crate) struct Busy;

impl Busy {
    pub(crate) fn enter() -> Option<Busy> {
        // `then`, not `then_some`: a `Busy` built for nothing would reset the flag on drop.
        BUSY.try_with(|busy| (!busy.replace(true)).then(|| Busy))
            .ok()
            .flatten()
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let _ = BUSY.try_with(|busy| busy.set(false));
    }
}

fn with_lines<R>(f: impl FnOnce(&mut Lines) -> R) -> R {
    let mut f = Some(f);
    let result = LINES.try_with(|cell| {
        cell.try_borrow_mut().ok().map(|mut lines| {
            lines.clear();
            (f.take().expect("called once"))(&mut lines)
        })
    });
    match result {
        Ok(Some(r)) => r,
        // The thread is shutting down or the buffer is in use: use a fresh one.
        _ => (f.take().expect("called once"))(&mut Lines::default()),
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
        Busy::enter()
    }

    /// Stops all output: nothing is written after this (the lifecycle calls it after
    /// `atexit`; the layer also closes itself when it writes `atexit`).
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::Relaxed);
    }

    /// The targets, in the order they are visited.
    pub fn targets(&self) -> &[Target] {
        &self.inner.targets.list
    }

    /// Flushes every target's sink. With a deferred writer, waits until the worker has
    /// written every record sent before the call (and reported dropped ones).
    pub fn flush(&self) {
        let _ = match &self.inner.deferred {
            Some(queue) => queue.flush(true),
            None => self.inner.targets.flush(),
        };
    }

    /// A guard that shuts the deferred writer down (flush, drop report, join) when
    /// dropped; an empty guard when the layer writes directly. Records traced after
    /// that are formatted and written on the traced thread.
    pub fn background_guard(&self) -> BackgroundGuard {
        match &self.inner.deferred {
            Some(queue) => BackgroundGuard::of(Arc::clone(queue)),
            None => BackgroundGuard::new(),
        }
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
    fn format_all(&self, record: &Record<'_>, lines: &mut Lines) {
        self.ensure_version(record, None);
        self.format_into(record, lines);
    }

    /// Formats `record` into `lines`, or with a deferred writer encodes it once for all
    /// targets (the worker formats it).
    fn format_into(&self, record: &Record<'_>, lines: &mut Lines) {
        match self.inner.deferred {
            // A record no target shows is not worth encoding and queueing.
            Some(_) if !self.inner.targets.any_writes(record) => {}
            Some(_) => {
                codec::encode(record, &mut lines.buf);
                lines.ends.push((0, lines.buf.len()));
            }
            None => self.inner.targets.format(record, lines),
        }
    }

    /// Writes `version` (and `too_many_files` where asked) once per layer, before any
    /// other line. `exe` overrides the configured version (an explicit `version` call).
    fn ensure_version(&self, context: &Record<'_>, exe: Option<&str>) {
        if self.inner.version.is_completed() {
            return;
        }
        self.inner.version.call_once(|| {
            let mut lines = Lines::default();
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
    fn write_lines(&self, lines: &Lines) {
        self.write_lines_from(lines, None);
    }

    /// [`Self::write_lines`] while the calling thread's state is borrowed: `context` then
    /// names the thread for an `error` line about a failed write. With a deferred
    /// writer, queues the encoded records as one message instead.
    fn write_lines_from(&self, lines: &Lines, context: Option<&Record<'_>>) {
        match &self.inner.deferred {
            Some(queue) => {
                if !lines.ends.is_empty() {
                    // The worker (or, after shutdown, this thread) handles failed writes.
                    let _ = queue.send(&lines.buf, lines.ends.len() as u64);
                }
            }
            None => self.inner.targets.write(lines, context),
        }
    }

    /// Runs `f` with the calling thread's state and the region of span `id`, then writes
    /// what it formatted (after the span's extensions are unlocked).
    fn with_span_region<S>(
        &self,
        id: &Id,
        ctx: &Context<'_, S>,
        f: impl FnOnce(&mut ThreadState, RegionInfo<'_>, Timestamp, Callsite<'static>, &mut Lines),
    ) where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let Some(span) = ctx.span(id) else { return };
        let now = clock::now();
        let callsite = callsite_of(span.metadata());
        with_lines(|lines| {
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
        lines: &mut Lines,
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
        lines: &mut Lines,
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
            event.record(&mut *fields);
            with_lines(|lines| {
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
        lines: &mut Lines,
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
                match crate::text::compact_json(json) {
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
        let meta = event.metadata();
        let file = fields.str("file").filter(|f| !f.is_empty());
        let callsite = match file {
            Some(file) => Callsite {
                file: Some(file),
                line: fields.int("line").unwrap_or(0) as u32,
            },
            None if fields.str("file").is_some() => Callsite::default(),
            None => callsite_of(meta),
        };
        let kind = fields.str("event").unwrap_or("");
        if kind == "atexit" {
            // `atexit` is the last line: flush first, so that a background writer's
            // report of dropped lines (written by its worker thread) comes before it.
            self.flush();
        }
        let base = (kind == "thread_start").then(|| fields.str("name").unwrap_or(""));
        with_lines(|lines| {
            thread::with_state_as(base, now.t_abs_us, |t| {
                self.api_records(t, kind, &fields, now, callsite, lines);
            });
            self.write_lines(lines);
        });
        match kind {
            "thread_exit" => thread::reset(),
            "atexit" => self.close(),
            _ => {}
        }
    }

    fn api_records(
        &self,
        t: &mut ThreadState,
        kind: &str,
        f: &ApiFields,
        now: Timestamp,
        callsite: Callsite<'_>,
        lines: &mut Lines,
    ) {
        let text = |name: &str| f.str(name).unwrap_or("");
        let open = t.depth();
        match kind {
            "version" => {
                let record = self.record(t, Event::Printf { msg: None }, now, callsite, open);
                self.ensure_version(&record, Some(text("exe")));
            }
            "region_enter" | "region_leave" => {
                let region = RegionInfo {
                    repo: f.bool("has_repo").then(|| f.int("repo").unwrap_or(0)),
                    category: f.str("category").filter(|s| !s.is_empty()),
                    label: f.str("label").filter(|s| !s.is_empty()),
                    msg: f.bool("has_msg").then(|| text("msg")),
                };
                if kind == "region_enter" {
                    self.enter_region(t, API_REGION, region, now, callsite, lines);
                } else {
                    // As in git, a leave closes the innermost region opened this way.
                    self.leave_region(t, API_REGION, region, now, callsite, lines);
                }
            }
            "thread_start" if t.is_main => {
                // Git turns a thread_start on the main thread into a region.
                let msg = format!("thread-proc on main: {}", text("name"));
                let region = RegionInfo {
                    msg: Some(&msg),
                    ..RegionInfo::default()
                };
                self.enter_region(t, THREAD_ON_MAIN, region, now, callsite, lines);
            }
            "thread_start" => {
                t.register(text("name"), now.t_abs_us);
                let record = self.record(t, Event::ThreadStart, now, callsite, 0);
                self.format_all(&record, lines);
            }
            "thread_exit" if t.is_main => {
                let region = RegionInfo {
                    msg: Some("thread-proc on main"),
                    ..RegionInfo::default()
                };
                self.leave_region(t, THREAD_ON_MAIN, region, now, callsite, lines);
            }
            "thread_exit" => {
                t.stack.clear();
                let event = Event::ThreadExit {
                    elapsed_us: now.t_abs_us.saturating_sub(t.start_us),
                };
                let record = self.record(t, event, now, callsite, 0);
                self.format_all(&record, lines);
            }
            "atexit" => {
                t.stack.clear();
                let code = f.int("code").unwrap_or(0) as i32;
                let record = self.record(t, Event::Atexit { code }, now, callsite, 0);
                self.format_all(&record, lines);
            }
            _ => {
                let owned = OwnedLists::decode(kind, f);
                let refs = owned.refs();
                let Some(event) = api_event(kind, f, &refs, t, now) else {
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

/// The string lists of a typed event, decoded from their JSON field.
struct OwnedLists {
    list: Vec<String>,
}

impl OwnedLists {
    fn decode(kind: &str, f: &ApiFields) -> OwnedLists {
        let field = match kind {
            "start" | "alias" | "child_start" | "exec" => "argv",
            "cmd_ancestry" => "ancestry",
            _ => return OwnedLists { list: Vec::new() },
        };
        OwnedLists {
            list: f.list(field),
        }
    }

    fn refs(&self) -> Vec<&str> {
        self.list.iter().map(String::as_str).collect()
    }
}

/// The record event of a typed Trace2 event that needs no special handling.
fn api_event<'a>(
    kind: &str,
    f: &'a ApiFields,
    list: &'a [&'a str],
    t: &ThreadState,
    now: Timestamp,
) -> Option<Event<'a>> {
    let text = |name: &str| f.str(name).unwrap_or("");
    let optional = |name: &str| f.str(name).filter(|s| !s.is_empty());
    let int = |name: &str| f.int(name).unwrap_or(0);
    let repo = || f.bool("has_repo").then(|| int("repo"));
    Some(match kind {
        "start" => Event::Start { argv: list },
        "cmd_ancestry" => Event::CmdAncestry { ancestry: list },
        "cmd_path" => Event::CmdPath { path: text("path") },
        "cmd_name" => Event::CmdName {
            name: text("name"),
            hierarchy: text("hierarchy"),
        },
        "cmd_mode" => Event::CmdMode { name: text("name") },
        "alias" => Event::Alias {
            alias: text("alias"),
            argv: list,
        },
        "def_param" => Event::DefParam {
            scope: text("scope"),
            param: text("param"),
            value: f.bool("has_value").then(|| text("value")),
        },
        "def_repo" => Event::DefRepo {
            repo: int("repo"),
            worktree: text("worktree"),
        },
        "printf" => Event::Printf {
            msg: optional("msg"),
        },
        "error" => Event::Error {
            msg: optional("fmt").map(|_| text("msg")),
            fmt: optional("fmt"),
        },
        "data" | "data_json" => {
            let nesting = t.depth() + 1;
            let t_rel_us = t.since_innermost(now.t_abs_us);
            if kind == "data" {
                Event::Data {
                    repo: repo(),
                    category: text("category"),
                    key: text("key"),
                    value: text("value"),
                    nesting,
                    t_rel_us,
                }
            } else {
                Event::DataJson {
                    repo: repo(),
                    category: text("category"),
                    key: text("key"),
                    json: text("json"),
                    nesting,
                    t_rel_us,
                }
            }
        }
        "child_start" => Event::ChildStart(ChildInfo {
            child_id: int("child_id") as u64,
            class: text("class"),
            hook_name: optional("hook_name"),
            cd: optional("cd"),
            use_shell: f.bool("use_shell"),
            is_git: f.bool("is_git"),
            argv: list,
        }),
        "child_exit" => Event::ChildExit {
            child_id: int("child_id") as u64,
            pid: int("pid"),
            code: int("code"),
            elapsed_us: int("elapsed_us") as u64,
        },
        "child_ready" => Event::ChildReady {
            child_id: int("child_id") as u64,
            pid: int("pid"),
            ready: text("ready"),
            elapsed_us: int("elapsed_us") as u64,
        },
        "exec" => Event::Exec {
            exec_id: int("exec_id") as u64,
            exe: f.bool("has_exe").then(|| text("exe")),
            argv: list,
        },
        "exec_result" => Event::ExecResult {
            exec_id: int("exec_id") as u64,
            code: int("code"),
            err: optional("err"),
        },
        "timer" => Event::Timer {
            per_thread: f.bool("per_thread"),
            timer: TimerInfo {
                category: text("category"),
                name: text("name"),
                intervals: int("intervals") as u64,
                total_ns: int("total_ns") as u64,
                min_ns: int("min_ns") as u64,
                max_ns: int("max_ns") as u64,
            },
        },
        "counter" => Event::Counter {
            per_thread: f.bool("per_thread"),
            category: text("category"),
            name: text("name"),
            value: int("value") as u64,
        },
        "exit" => Event::Exit {
            code: int("code") as i32,
        },
        "signal" => Event::Signal {
            signo: int("signo") as i32,
        },
        _ => return None,
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
        attrs.record(state.fields_mut());
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
            values.record(&mut *fields);
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
        if event.metadata().target() == api::TARGET {
            self.on_api_event(event);
        } else {
            self.on_user_event(event);
        }
    }
}
