//! [`Trace2LayerBuilder`]: the layer's settings, and the layer built from them.
//!
//! Uses no sibling: only the layer's own types.

use std::sync::Arc;
use std::sync::Once;

use crate::filter::{Levels, Warnings};
use tracing_core::LevelFilter;

use crate::background::BackgroundOptions;
use crate::busy::Gate;
use crate::lanes::{DEFAULT_MAX_TASK_LANES, LaneBook};
use crate::output::Output;
use crate::region::FieldPolicy;
use crate::session::Session;
use crate::span_store::SpanStore;
use crate::targets::Targets;

use super::{LayerState, RegionMode, Target, Trace2Layer};

/// Builds a [`Trace2Layer`].
#[derive(Debug)]
pub struct Trace2LayerBuilder {
    targets: Vec<Target>,
    exe: String,
    session: Option<&'static Session>,
    deferred: Option<BackgroundOptions>,
    mode: RegionMode,
    levels: Levels,
    crates: Option<Arc<[String]>>,
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
            levels: Levels::default(),
            crates: None,
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

    /// The most verbose level of both user spans and events that become Trace2 output:
    /// sets [`Self::with_span_level`] and [`Self::with_event_level`] at once. The typed
    /// [`crate::api`] calls are not affected. A per-layer filter
    /// (`layer.with_filter(..)`) narrows this further.
    pub fn with_max_level(mut self, level: impl Into<LevelFilter>) -> Self {
        let level = level.into();
        self.levels.spans = level;
        self.levels.events = level;
        self
    }

    /// The most verbose level of user spans that become regions (default: DEBUG, where
    /// libraries such as tower-http put their request spans; `trace_span!`s are left
    /// out).
    pub fn with_span_level(mut self, level: impl Into<LevelFilter>) -> Self {
        self.levels.spans = level.into();
        self
    }

    /// The most verbose level of user events that become `data`, `printf` or `error`
    /// lines (default: INFO, so `debug!`/`trace!` events are left out).
    pub fn with_event_level(mut self, level: impl Into<LevelFilter>) -> Self {
        self.levels.events = level.into();
        self
    }

    /// What a `warn!` event becomes (default: [`Warnings::Off`], nothing;
    /// [`Warnings::Error`] is an `error` line as `error!` writes).
    pub fn with_warnings(mut self, warnings: Warnings) -> Self {
        self.levels.warnings = warnings;
        self
    }

    /// Records only the spans and events of these crates (the first `::` segment of
    /// their targets; `env!("CARGO_CRATE_NAME")` names the program's own), none of its
    /// dependencies'. Their per-layer filter ([`Trace2Layer::filtered`]) applies it, per
    /// call site, so a left-out crate's call sites cost nothing where no other layer
    /// wants them; the bare layer does not.
    pub fn with_only_crates<I, C>(mut self, crates: I) -> Self
    where
        I: IntoIterator<Item = C>,
        C: Into<String>,
    {
        self.crates = Some(crates.into_iter().map(Into::into).collect());
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

    /// The most bytes of every text formatted from the program's values (default:
    /// [`DEFAULT_MESSAGE_LIMIT`](crate::DEFAULT_MESSAGE_LIMIT)): a region's message,
    /// category and label, an event's message and each of its field values. A longer
    /// one is cut on a character boundary and ends with `...`, the same for every
    /// target; a value's `Debug` or `Display` text is formatted only up to the bound. A
    /// `json` field longer than the bound becomes a `data` line with its text cut (cut
    /// JSON is no JSON). Numbers and booleans are written whole; the typed
    /// [`api`](crate::api) calls are not bounded (the program's own Trace2 calls, as in
    /// git).
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
    /// carry the regions of spans that could not go on their OS thread's lane (the
    /// facade's README, *Async programs and tokio*, tells the whole model). An idle one is reused before a new one is made; past the
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
        crate::background::set_failure_report(super::api_calls::report_sink_failure);
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
                levels: self.levels,
                crates: self.crates,
                announce: self.announce,
                fields: self.fields,
                spans: SpanStore::new(),
            }),
        }
    }
}
