//! Builds the Trace2 layer from [`Settings`]: opens the destination of every enabled
//! target and pairs it with its formatter, in git's order (normal, perf, event),
//! optionally through the deferred background writer, and arranges the `def_param` listing that
//! follows the first `cmd_name`.

use tracing_core::{LevelFilter, Subscriber};
use tracing_subscriber::registry::LookupSpan;
use tracing_trace2_core::background::{BackgroundGuard, BackgroundOptions};
use tracing_trace2_core::{
    FilteredLayer, Levels, RegionMode, Session, Target, Trace2Layer, Warnings, api, clock, redact,
};
use tracing_trace2_dst::{self as dst, OpenSettings, Opened};
use tracing_trace2_event::EventFormat;
use tracing_trace2_normal::NormalFormat;
use tracing_trace2_perf::PerfFormat;

use tracing_trace2_binary::flight::FlightRecorder;
use tracing_trace2_binary::{BinaryWriter, TextDefaults};

use crate::config::parse_git_bool;

use crate::OptionalLayer;
use crate::config::Settings;
use crate::params;
use crate::targets;

/// Configures and builds the Trace2 layer of a program.
///
/// ```no_run
/// use tracing_subscriber::prelude::*;
///
/// let layer = tracing_trace2::Trace2::from_env()
///     .with_exe_version(env!("CARGO_PKG_VERSION"))
///     .layer();
/// tracing_subscriber::registry().with(layer).init();
/// ```
#[derive(Clone, Debug)]
pub struct Trace2 {
    settings: Settings,
    exe_version: String,
    background: Option<BackgroundOptions>,
    binary: Option<String>,
    region_mode: RegionMode,
    levels: Levels,
    only_crates: Option<Vec<String>>,
    announce_threads: bool,
    env_export: bool,
    max_task_lanes: usize,
    span_fields: bool,
    message_limit: usize,
}

impl Trace2 {
    /// Settings from the `GIT_TRACE2*` environment and the `trace2.*` keys of the
    /// system and global git config, as git reads them.
    pub fn from_env() -> Trace2 {
        let mut trace2 = Trace2::with_settings(Settings::from_env());
        trace2.binary = std::env::var(tracing_trace2_binary::ENV_NAME).ok();
        trace2
    }

    /// Explicit settings.
    pub fn with_settings(settings: Settings) -> Trace2 {
        Trace2 {
            settings,
            exe_version: "0.0.0".to_owned(),
            background: None,
            binary: None,
            region_mode: RegionMode::default(),
            levels: Levels::default(),
            only_crates: None,
            announce_threads: true,
            env_export: true,
            max_task_lanes: tracing_trace2_core::DEFAULT_MAX_TASK_LANES,
            span_fields: true,
            message_limit: tracing_trace2_core::DEFAULT_MESSAGE_LIMIT,
        }
    }

    /// The version written as `exe` in the `version` line: the program's own version
    /// (pass `env!("CARGO_PKG_VERSION")`).
    pub fn with_exe_version(mut self, version: impl Into<String>) -> Trace2 {
        self.exe_version = version.into();
        self
    }

    /// How spans become regions: [`RegionMode::Span`] (the default) writes one region
    /// per span lifetime, right for `async fn`s; [`RegionMode::Entry`] is git's one
    /// region per entry (see [`tracing_trace2_core::RegionMode`]).
    pub fn with_region_mode(mut self, mode: RegionMode) -> Trace2 {
        self.region_mode = mode;
        self
    }

    /// The most verbose level of the program's spans and events (and its
    /// dependencies') that become Trace2 output, both at once: sets
    /// [`Trace2::with_span_level`] and [`Trace2::with_event_level`]. `trace2.maxLevel` /
    /// `TRACING_TRACE2_MAX_LEVEL`, when set, override it. Lifecycle lines and the [`api`]
    /// calls do not depend on it. For finer choices (per target, per module) filter the
    /// layer further: `trace2.layer().with_filter(EnvFilter::new(..))`.
    pub fn with_max_level(mut self, level: impl Into<LevelFilter>) -> Trace2 {
        let level = level.into();
        self.levels.spans = level;
        self.levels.events = level;
        self
    }

    /// The most verbose level of spans that become regions; default DEBUG, where
    /// libraries put their request and detail spans (tower-http's `TraceLayer`), so only
    /// `trace_span!`s are left out. `trace2.spanLevel` / `TRACING_TRACE2_SPAN_LEVEL`
    /// (else `trace2.maxLevel`), when set, override it.
    pub fn with_span_level(mut self, level: impl Into<LevelFilter>) -> Trace2 {
        self.levels.spans = level.into();
        self
    }

    /// The most verbose level of events that become `data`, `printf` or `error` lines;
    /// default INFO, so `debug!` and `trace!` are left out. `trace2.eventLevel` /
    /// `TRACING_TRACE2_EVENT_LEVEL` (else `trace2.maxLevel`), when set, override it.
    pub fn with_event_level(mut self, level: impl Into<LevelFilter>) -> Trace2 {
        self.levels.events = level.into();
        self
    }

    /// What a `warn!` event becomes: nothing by default ([`Warnings::Off`]: git traces
    /// its errors, never its warnings, and readers count every `error` line as one),
    /// else a `printf` line or an `error` line as `error!` writes. `trace2.warnings` /
    /// `TRACING_TRACE2_WARNINGS` (`off`, `printf`, `error`), when set, override it.
    pub fn with_warnings(mut self, warnings: Warnings) -> Trace2 {
        self.levels.warnings = warnings;
        self
    }

    /// Whether a span's fields without a Trace2 role (the arguments `#[instrument]`
    /// records) are written into its region's message as `name=value` (default: yes,
    /// within the message's bound). `trace2.spanFields` / `TRACING_TRACE2_SPAN_FIELDS`,
    /// when set, override it. The `trace2.*` fields keep their roles either way.
    pub fn with_span_fields(mut self, include: bool) -> Trace2 {
        self.span_fields = include;
        self
    }

    /// The most bytes of every text formatted from the program's values (default
    /// [`DEFAULT_MESSAGE_LIMIT`](tracing_trace2_core::DEFAULT_MESSAGE_LIMIT), 256): a
    /// region's message, category and label; an event's message (`printf`, `error`'s
    /// `msg` and `fmt`) and each of its field values (data values, keys, categories). A
    /// longer text is cut on a character boundary and ends with `...`, the same in every
    /// target, and a value's `Debug` or `Display` text is formatted no further than the
    /// bound (a huge value costs no more than the bound). A `json` field longer than the
    /// bound cannot be cut and stay JSON: it becomes a `data` line with its text cut.
    /// Numbers and booleans are written whole; the typed [`api`](crate::api) calls
    /// (argv, paths, `data`, `printf`, …) are the program's own Trace2 calls and are not
    /// bounded, as in git; nor are the names the program's source gives (span names,
    /// field names, `tracing` targets).
    pub fn with_message_limit(mut self, bytes: usize) -> Trace2 {
        self.message_limit = bytes;
        self
    }

    /// Records only the spans and events of these crates, none of their dependencies'
    /// (a crate is the first `::` segment of a target): the first-party setup is
    /// `.with_only_crates([env!("CARGO_CRATE_NAME")])`. Applied per call site by the
    /// layer's filter ([`Trace2::layer`], [`crate::Lifecycle::layer`], [`Trace2::init`]),
    /// so a dependency's call sites cost nothing where no other layer wants them. The
    /// lifecycle and the [`api`] calls are not affected.
    pub fn with_only_crates<I, C>(mut self, crates: I) -> Trace2
    where
        I: IntoIterator<Item = C>,
        C: Into<String>,
    {
        self.only_crates = Some(crates.into_iter().map(Into::into).collect());
        self
    }

    /// The most verbose level in force, of spans or events (see [`Trace2::levels`]).
    pub fn max_level(&self) -> LevelFilter {
        self.levels().max()
    }

    /// The levels in force: for each, the configured one, else the program's.
    pub fn levels(&self) -> Levels {
        let s = &self.settings;
        Levels {
            spans: s.span_level.or(s.max_level).unwrap_or(self.levels.spans),
            events: s.event_level.or(s.max_level).unwrap_or(self.levels.events),
            warnings: s.warn_as.unwrap_or(self.levels.warnings),
        }
    }

    /// Whether every thread that writes is announced with `thread_start` and ended with
    /// `thread_exit` (default: yes, which the OpenTelemetry trace2receiver needs);
    /// `false` is git's behaviour, where only threads started through [`crate::thread`]
    /// are announced.
    pub fn with_thread_announcement(mut self, announce: bool) -> Trace2 {
        self.announce_threads = announce;
        self
    }

    /// Whether the lifecycle puts this process's session into its own environment
    /// (`GIT_TRACE2_PARENT_SID`, and `GIT_TRACE2_PARENT_NAME` kept equal to the
    /// `cmd_name` hierarchy), as git does, so that every child nests under it however it
    /// is started (default: yes). The export happens when [`Trace2::lifecycle`] builds
    /// the layer, even if other threads run by then; turn it off when code outside Rust's
    /// std may read the environment on another thread at that moment, and start children
    /// through [`crate::Trace2CommandExt`], which sets both variables on the child's own
    /// command (see `docs/real-programs.md`, "Git children").
    pub fn with_env_export(mut self, export: bool) -> Trace2 {
        self.env_export = export;
        self
    }

    /// Whether the lifecycle exports the session into the environment.
    pub(crate) fn env_export(&self) -> bool {
        self.env_export
    }

    /// The bound of a region's message, also that of a failed `main`'s `error` line.
    pub(crate) fn message_limit(&self) -> usize {
        self.message_limit
    }

    /// The most task lanes: Trace2 threads (`task-lane-NN`) that carry the regions of
    /// spans that cannot go on their OS thread's stack, such as a second connection
    /// polled by a worker while the first one's region is open. Idle lanes are reused;
    /// default [`tracing_trace2_core::DEFAULT_MAX_TASK_LANES`] (see
    /// [`tracing_trace2_core::Trace2LayerBuilder::with_max_task_lanes`]).
    pub fn with_max_task_lanes(mut self, lanes: usize) -> Trace2 {
        self.max_task_lanes = lanes;
        self
    }

    /// Formats and writes every enabled target on a background thread: the traced
    /// thread only encodes each record once and enqueues it; one worker thread decodes
    /// it, formats it for each target in git's order and writes the lines (see
    /// [`tracing_trace2_core::background`] for the guarantees and which exits
    /// are covered). Off unless this is called; no environment variable turns it on.
    pub fn with_background_writer(mut self, options: BackgroundOptions) -> Trace2 {
        self.background = Some(options);
        self
    }

    /// Also records every event into the binary target (t2b) at `value`: an absolute
    /// file (appended), a directory (one `<sid>.t2b` file per process) or an fd number;
    /// `0`, `false` or empty turn it off. [`Trace2::from_env`] takes it from
    /// `TRACING_TRACE2_BINARY`. It works alone or beside the text targets, and sees the
    /// same records; `trace2 decode` (or `tracing_trace2_binary::decode_to_text`) turns
    /// it back into the Normal, Perf and Event text those targets write. It records
    /// regions as deep as the Event target writes them (`GIT_TRACE2_EVENT_NESTING`),
    /// unless `trace2.binaryNesting` / `TRACING_TRACE2_BINARY_NESTING` says otherwise; a
    /// decoded Perf stream then lacks the deeper regions a live Perf target writes.
    pub fn with_binary_target(mut self, value: impl Into<String>) -> Trace2 {
        self.binary = Some(value.into());
        self
    }

    /// Keeps every event in a bounded ring in memory (the binary target's batches) and
    /// writes the window as a t2b file into the absolute directory `dir` only when a
    /// trigger fires: a non-zero exit, a panic, `SIGUSR2`, or
    /// [`flight::snapshot_all`](crate::flight::snapshot_all); see
    /// `docs/flight-recorder.md`. [`Trace2::from_env`] takes it from
    /// `TRACING_TRACE2_FLIGHT` (or `trace2.flightTarget`), with the cap, the minimum
    /// age and the opt-in triggers from [`FlightSettings`](crate::config::FlightSettings).
    pub fn with_flight_recorder(mut self, dir: impl Into<String>) -> Trace2 {
        self.settings.flight.directory = Some(dir.into());
        self
    }

    /// All the flight recorder's settings at once (see [`Trace2::with_flight_recorder`]).
    pub fn with_flight_settings(mut self, flight: crate::config::FlightSettings) -> Trace2 {
        self.settings.flight = flight;
        self
    }

    /// The background writer options, when one is asked for.
    pub fn background_writer(&self) -> Option<&BackgroundOptions> {
        self.background.as_ref()
    }

    /// Reports a config value the program itself sets, as git reports its own config
    /// writes: a `def_param` with scope `unknown` when `key` matches one of the
    /// `GIT_TRACE2_CONFIG_PARAMS` / `trace2.configParams` patterns (every time, not
    /// once). The value is redacted. Returns whether an event was emitted.
    #[track_caller]
    pub fn report_config_write(&self, key: &str, value: Option<&str>) -> bool {
        match params::config_write_param(&self.settings, key, value) {
            Some(p) => {
                api::def_param(p.scope, &p.param, p.value.as_deref());
                true
            }
            None => false,
        }
    }

    /// The settings in use.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The version written as `exe`.
    pub fn exe_version(&self) -> &str {
        &self.exe_version
    }

    /// Opens the enabled targets and returns the layer writing to them, or, when no
    /// target is enabled, a disabled [`OptionalLayer`] that writes nothing and leaves
    /// every call site's interest and `tracing`'s global level as the program's other
    /// layers make them (tracing costs nothing extra; an `Option` layer's `None`, which
    /// this returned before, did not: see [`OptionalLayer`]).
    ///
    /// Warnings about destination values and destinations go to stderr as git prints them.
    /// Config problems that would stop git (an unreadable file, a valueless `trace2.*`
    /// key) and a `GIT_TRACE2_REDACT` value that is not a boolean are reported as
    /// warnings instead, and redaction then stays on.
    ///
    /// With a background writer, the writers run until the process exits (they are
    /// flushed and joined by the exit handler); use [`Trace2::layer_with_guard`] to
    /// stop them earlier.
    ///
    /// The layer comes behind a per-layer filter at its level ([`FilteredLayer`]); use
    /// [`Trace2::unfiltered_layer`] for the bare layer.
    pub fn layer<S>(&self) -> OptionalLayer<FilteredLayer<S>, S>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        OptionalLayer::from_option(self.unfiltered_layer().map(Trace2Layer::filtered))
    }

    /// [`Trace2::layer`] without its level filter: it then sees every span and event
    /// other layers enable (it still records only those at its level), and `tracing`
    /// learns no level from it.
    ///
    /// With no target enabled this is `None`, and a `None` added as a layer as it is
    /// costs the program's hidden call sites their `never` interest (see
    /// [`OptionalLayer`]): wrap it in [`OptionalLayer::from_option`] (after your own
    /// filter, if any) rather than adding the `Option` itself.
    pub fn unfiltered_layer(&self) -> Option<Trace2Layer> {
        let (layer, guard) = self.unfiltered_layer_with_guard();
        // The writers must outlive this call: the exit handler shuts them down.
        std::mem::forget(guard);
        layer
    }

    /// [`Trace2::layer`], with a guard that flushes and joins the background writers
    /// when dropped (an empty guard without a background writer). Lines traced after
    /// the guard is dropped are written synchronously.
    pub fn layer_with_guard<S>(&self) -> (OptionalLayer<FilteredLayer<S>, S>, BackgroundGuard)
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let (layer, guard) = self.unfiltered_layer_with_guard();
        let layer = OptionalLayer::from_option(layer.map(Trace2Layer::filtered));
        (layer, guard)
    }

    /// [`Trace2::layer_with_guard`] without the level filter.
    pub fn unfiltered_layer_with_guard(&self) -> (Option<Trace2Layer>, BackgroundGuard) {
        let mut guard = BackgroundGuard::new();
        let layer = self.build(&mut guard);
        (layer, guard)
    }

    /// Whether the settings name at least one target (whose destination may still fail
    /// to open).
    pub(crate) fn names_a_target(&self) -> bool {
        let s = &self.settings;
        s.normal_destination.is_some()
            || s.perf_destination.is_some()
            || s.event_destination.is_some()
            || self.binary.as_deref().is_some_and(|v| !v.is_empty())
            || s.flight.directory.is_some()
    }

    fn build(&self, guard: &mut BackgroundGuard) -> Option<Trace2Layer> {
        let s = &self.settings;
        let binary = self.binary.as_deref().filter(|v| !v.is_empty());
        if !self.names_a_target() {
            return None;
        }
        for warning in &s.warnings {
            dst::warning(warning);
        }
        match &s.redact {
            Ok(on) => redact::set_enabled(*on),
            Err(message) => {
                dst::warning(&format!("{message}; URL redaction stays on"));
                redact::set_enabled(true);
            }
        }
        let session = Session::global();
        let offset = clock::local_offset_secs();
        let open = |env_name: &'static str, value: &Option<String>| {
            let value = value.as_deref()?;
            let settings = OpenSettings {
                env_name,
                dst_debug: s.dst_debug,
                max_files: s.max_files,
                sid_component: session.own_component().to_owned(),
            };
            // A background writer writes later than the host traced: pin fd targets.
            let opened = if self.background.is_some() {
                dst::open_deferred(value, &settings)
            } else {
                dst::open(value, &settings)
            };
            match opened {
                Opened::Sink(sink) => Some((sink, false)),
                Opened::Sentinel(sink) => Some((sink, true)),
                Opened::Disabled => None,
            }
        };
        let levels = self.levels();
        let mut builder = Trace2Layer::builder()
            .with_exe_version(&self.exe_version)
            .with_region_mode(self.region_mode)
            .with_span_level(levels.spans)
            .with_event_level(levels.events)
            .with_warnings(levels.warnings)
            .with_span_fields(s.span_fields.unwrap_or(self.span_fields))
            .with_message_limit(self.message_limit)
            .with_thread_announcement(self.announce_threads)
            .with_max_task_lanes(self.max_task_lanes);
        let mut any = false;
        if let Some((sink, _)) = open(targets::NORMAL_ENV, &s.normal_destination) {
            let format = NormalFormat::new()
                .with_brief(s.normal_brief)
                .with_utc_offset(offset);
            builder = builder.with_target(self.target(targets::normal(format, sink)));
            any = true;
        }
        if let Some((sink, _)) = open(targets::PERF_ENV, &s.perf_destination) {
            let format = PerfFormat::new()
                .with_brief(s.perf_brief)
                .with_utc_offset(offset);
            builder = builder.with_target(self.target(targets::perf(format, sink)));
            any = true;
        }
        if let Some((sink, sentinel)) = open(targets::EVENT_ENV, &s.event_destination) {
            let format = EventFormat::new()
                .with_brief(s.event_brief)
                .with_max_nesting(s.event_nesting);
            let target = targets::event(format, sink).with_too_many_files(sentinel);
            builder = builder.with_target(self.target(target));
            any = true;
        }
        if let Some(value) = binary {
            let dest = tracing_trace2_binary::DestSettings {
                dst_debug: s.dst_debug,
                max_files: s.max_files,
                sid: session.sid().to_owned(),
            };
            if let Some(opened) = tracing_trace2_binary::dest::open(value, &dest) {
                // Decoded with no options, the stream reads as this process's text
                // targets would write it.
                let writer = BinaryWriter::builder()
                    .with_text_defaults(TextDefaults {
                        normal_brief: s.normal_brief,
                        perf_brief: s.perf_brief,
                        event_brief: s.event_brief,
                        event_nesting: s.event_nesting,
                    })
                    .with_dst_debug(s.dst_debug)
                    // No flusher thread for a process that records a few lines.
                    .with_lazy_flusher(true)
                    .build(opened.sink);
                // Regions as deep as the Event target writes them, unless asked: the
                // fields of deeper ones are then never formatted at all.
                let nesting = s.binary_nesting.unwrap_or(s.event_nesting);
                builder = builder.with_target(targets::binary_with_max_nesting(
                    &writer,
                    opened.too_many_files,
                    nesting,
                ));
                any = true;
            }
        }
        if let Some(recorder) = self.flight_recorder() {
            // The binary target's nesting: a recorder alone formats no fields of regions
            // no other target writes.
            let nesting = s.binary_nesting.unwrap_or(s.event_nesting);
            builder = builder.with_target(targets::flight_with_max_nesting(&recorder, nesting));
            any = true;
        }
        if !any {
            return None;
        }
        if let Some(options) = &self.background {
            builder = builder.with_deferred(options.clone());
        }
        if let Some(crates) = &self.only_crates {
            builder = builder.with_only_crates(crates.iter().cloned());
        }
        self.set_def_param_hook();
        let layer = builder.build();
        guard.merge(layer.background_guard());
        Some(layer)
    }

    /// Arranges the `def_param` listing (spec 8.3) to follow the first `cmd_name` of
    /// the process: matching config entries, then the set environment variables.
    fn set_def_param_hook(&self) {
        let listing = params::def_params(&self.settings);
        if listing.is_empty() {
            return;
        }
        // Only the first layer built in a process sets the listing, as git reads its
        // settings once.
        api::set_after_first_cmd_name(move || {
            for p in &listing {
                api::def_param(p.scope, &p.param, p.value.as_deref());
            }
        });
    }

    /// The flight recorder the settings ask for, if its directory is usable.
    fn flight_recorder(&self) -> Option<FlightRecorder> {
        let s = &self.settings;
        let flight = &s.flight;
        let dir = flight.directory.as_deref()?;
        if parse_git_bool(dir) == Some(false) {
            return None;
        }
        if !std::path::Path::new(dir).is_absolute() {
            // As git says of a destination value it does not understand.
            dst::warning(&format!(
                "trace2: unknown value for '{}': '{dir}'",
                tracing_trace2_binary::flight::ENV_NAME
            ));
            return None;
        }
        let writer = BinaryWriter::builder().with_text_defaults(TextDefaults {
            normal_brief: s.normal_brief,
            perf_brief: s.perf_brief,
            event_brief: s.event_brief,
            event_nesting: s.event_nesting,
        });
        let mut recorder = FlightRecorder::builder(dir)
            .with_writer(writer)
            .with_dst_debug(s.dst_debug)
            .with_error_trigger(flight.on_error)
            .with_slow_region(flight.slow_region_ms.map(std::time::Duration::from_millis));
        if let Some(bytes) = flight.max_bytes {
            recorder = recorder.with_max_bytes(usize::try_from(bytes).unwrap_or(usize::MAX));
        }
        if let Some(secs) = flight.min_age_secs {
            recorder = recorder.with_min_age(std::time::Duration::from_secs(secs));
        }
        recorder.build()
    }

    fn target(&self, target: Target) -> Target {
        target.with_dst_debug(self.settings.dst_debug)
    }
}
