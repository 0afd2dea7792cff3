//! Programs shaped like the two of issue 21 ("Right on real programs"): a CLI like jj
//! (nested `#[instrument]` methods whose arguments, `self` included, have big `Debug`
//! texts, beside an `EnvFilter` fmt layer) and a client like tokio's mini-redis
//! (`Client::ping(msg: Option<…>)`, async, in a module of its own).
//!
//! The binary has its own `main` (no libtest harness): `tracing`'s global level is
//! computed over every live dispatcher, so the checks must run one at a time.

#[path = "support/runner.rs"]
#[allow(dead_code)]
mod runner;

use std::fmt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;
use tracing::level_filters::LevelFilter;
use tracing_subscriber::prelude::*;
use tracing_subscriber::{EnvFilter, Registry};
use tracing_trace2::core::{MemorySink, Trace2Layer, api};
use tracing_trace2::event::EventFormat;
use tracing_trace2::perf::PerfFormat;
use tracing_trace2::{Settings, Trace2, Warnings, targets};

fn main() -> ExitCode {
    let mut runner = runner::Runner::plain();
    let tests: [runner::Test; 17] = [
        ("jj_messages_are_bounded", jj_messages_are_bounded),
        (
            "jj_fields_of_regions_nobody_writes_are_not_formatted",
            jj_fields_of_regions_nobody_writes_are_not_formatted,
        ),
        (
            "jj_span_fields_can_be_left_out",
            jj_span_fields_can_be_left_out,
        ),
        (
            "binary_target_records_as_deep_as_event",
            binary_target_records_as_deep_as_event,
        ),
        (
            "flight_recorder_records_as_deep_as_the_binary_target",
            flight_recorder_records_as_deep_as_the_binary_target,
        ),
        (
            "level_hint_beside_a_filtered_fmt_layer",
            level_hint_beside_a_filtered_fmt_layer,
        ),
        ("configured_level_and_fields", configured_level_and_fields),
        (
            "level_filter_hides_nothing_from_other_layers",
            level_filter_hides_nothing_from_other_layers,
        ),
        (
            "a_further_filter_narrows_the_layer",
            a_further_filter_narrows_the_layer,
        ),
        (
            "mini_redis_arguments_take_no_role",
            mini_redis_arguments_take_no_role,
        ),
        ("perf_category_reads", perf_category_reads),
        (
            "dependency_warnings_hidden_by_the_program_cost_nothing",
            dependency_warnings_hidden_by_the_program_cost_nothing,
        ),
        (
            "a_warning_is_no_error_unless_asked",
            a_warning_is_no_error_unless_asked,
        ),
        (
            "debug_spans_are_regions_debug_events_are_not",
            debug_spans_are_regions_debug_events_are_not,
        ),
        (
            "the_first_party_setup_keeps_dependencies_out",
            the_first_party_setup_keeps_dependencies_out,
        ),
        (
            "a_disabled_layer_changes_nothing_in_the_program_stack",
            a_disabled_layer_changes_nothing_in_the_program_stack,
        ),
        (
            "the_filtered_layer_sees_and_shows_what_filtered_does",
            the_filtered_layer_sees_and_shows_what_filtered_does,
        ),
    ];
    for (name, test) in tests {
        runner.test(name, test);
    }
    runner.finish()
}

/// How many times a big value's `Debug` ran, and how many pieces it was asked to write.
static DEBUG_CALLS: AtomicUsize = AtomicUsize::new(0);
static DEBUG_PIECES: AtomicUsize = AtomicUsize::new(0);

fn reset_counts() {
    DEBUG_CALLS.store(0, Ordering::SeqCst);
    DEBUG_PIECES.store(0, Ordering::SeqCst);
}

/// A jj-like CLI: a config environment with a 100 KB `Debug` text, loaded through
/// nested instrumented methods that take it as `self`.
mod cli {
    use super::*;

    pub struct ConfigEnv {
        pub layers: usize,
    }

    impl fmt::Debug for ConfigEnv {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            DEBUG_CALLS.fetch_add(1, Ordering::SeqCst);
            f.write_str("ConfigEnv { layers: [")?;
            for i in 0..self.layers {
                DEBUG_PIECES.fetch_add(1, Ordering::SeqCst);
                write!(
                    f,
                    "ConfigLayer {{ path: \"/home/u/.config/jj/{i}.toml\" }}, "
                )?;
            }
            f.write_str("] }")
        }
    }

    impl ConfigEnv {
        /// Nested `depth` levels deep, as jj's config loading is (in jj's library crate:
        /// its target is that crate's module path).
        #[tracing::instrument(target = "jj_lib::config")]
        pub fn reload_workspace_config(&self, depth: u32) -> u32 {
            if depth > 1 {
                self.reload_workspace_config(depth - 1) + 1
            } else {
                1
            }
        }
    }
}

/// A mini-redis-like client, in a module of its own (target `mini_redis::clients::client`,
/// as in the mini-redis crate).
mod client {
    pub struct Client;

    impl Client {
        #[tracing::instrument(skip(self), target = "mini_redis::clients::client")]
        pub async fn ping(&mut self, msg: Option<&'static str>) -> &'static str {
            msg.unwrap_or("PONG")
        }

        #[tracing::instrument(skip(self), target = "mini_redis::clients::client")]
        pub fn lookup(&self, category: &str, label: &str, repo: i64) -> i64 {
            repo
        }
    }
}

/// The JSON of each Event line in `sink`.
fn events(sink: &MemorySink) -> Vec<Value> {
    event_lines(&sink.to_string_lossy())
}

/// Every line of an Event trace, parsed.
fn event_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).expect("an Event line is JSON"))
        .collect()
}

/// The labels of the regions entered, in order.
fn entered_labels(events: &[Value]) -> Vec<String> {
    regions(events, "region_enter")
        .iter()
        .map(|r| r["label"].as_str().unwrap_or("").to_owned())
        .collect()
}

fn regions(events: &[Value], kind: &str) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["event"] == kind)
        .cloned()
        .collect()
}

/// A fmt layer writing nowhere behind an `EnvFilter`, as jj installs one.
fn fmt_layer<S>(filter: &str) -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    tracing_subscriber::fmt::layer()
        .with_writer(std::io::sink)
        .with_filter(EnvFilter::new(filter))
}

/// Runs the jj-shaped program under an Event target (git's default nesting, 2) built by
/// `build`, beside a fmt layer that shows warnings (so that it formats none of the
/// spans itself); returns the Event lines.
fn run_jj(
    depth: u32,
    build: impl FnOnce(tracing_trace2::core::Trace2LayerBuilder) -> Trace2Layer,
) -> Vec<Value> {
    let sink = MemorySink::new();
    let layer =
        build(Trace2Layer::builder().with_target(targets::event(EventFormat::new(), sink.clone())));
    let subscriber = Registry::default()
        .with(fmt_layer("warn"))
        .with(layer.filtered());
    reset_counts();
    tracing::subscriber::with_default(subscriber, || {
        let env = cli::ConfigEnv { layers: 2_000 };
        assert_eq!(env.reload_workspace_config(depth), depth);
    });
    events(&sink)
}

/// Issue 21 item 3: jj's worst line was 183 KiB; a message now has a bound, and the
/// `Debug` text stops being formatted at it.
fn jj_messages_are_bounded() {
    let lines = run_jj(2, |b| b.build());
    let enters = regions(&lines, "region_enter");
    assert_eq!(enters.len(), 2, "{lines:?}");
    for region in regions(&lines, "region_enter")
        .iter()
        .chain(&regions(&lines, "region_leave"))
    {
        let msg = region["msg"].as_str().expect("a message");
        assert!(
            msg.len() <= tracing_trace2::core::DEFAULT_MESSAGE_LIMIT,
            "{}",
            msg.len()
        );
        assert!(
            msg.starts_with("self=ConfigEnv { layers: [ConfigLayer"),
            "{msg}"
        );
        assert!(msg.ends_with("..."), "{msg}");
        assert_eq!(region["category"], "jj_lib", "{region}");
        assert_eq!(region["label"], "reload_workspace_config", "{region}");
    }
    // Two values formatted, each only as far as the bound: a few pieces, not 4,000.
    assert_eq!(DEBUG_CALLS.load(Ordering::SeqCst), 2);
    let pieces = DEBUG_PIECES.load(Ordering::SeqCst);
    assert!(pieces <= 2 * 8, "{pieces} pieces formatted");
}

/// Issue 21 item 3: regions deeper than the Event target's nesting are not written, so
/// their fields are not formatted either.
fn jj_fields_of_regions_nobody_writes_are_not_formatted() {
    let lines = run_jj(6, |b| b.build());
    assert_eq!(regions(&lines, "region_enter").len(), 2, "{lines:?}");
    assert_eq!(DEBUG_CALLS.load(Ordering::SeqCst), 2);
    // Deeper nesting asked for: formatted as deep as written.
    let sink = MemorySink::new();
    let layer = Trace2Layer::builder()
        .with_target(targets::event(
            EventFormat::new().with_max_nesting(4),
            sink.clone(),
        ))
        .build();
    reset_counts();
    let subscriber = Registry::default().with(layer.filtered());
    tracing::subscriber::with_default(subscriber, || {
        cli::ConfigEnv { layers: 10 }.reload_workspace_config(6);
    });
    assert_eq!(regions(&events(&sink), "region_enter").len(), 4);
    assert_eq!(DEBUG_CALLS.load(Ordering::SeqCst), 4);
}

/// Issue 21 item 3: the switch that leaves span fields out (as tracing-chrome's
/// `include_args`); then nothing is formatted at all.
fn jj_span_fields_can_be_left_out() {
    let lines = run_jj(2, |b| b.with_span_fields(false).build());
    let enters = regions(&lines, "region_enter");
    assert_eq!(enters.len(), 2, "{lines:?}");
    assert!(enters.iter().all(|r| r.get("msg").is_none()), "{enters:?}");
    assert_eq!(DEBUG_CALLS.load(Ordering::SeqCst), 0);
}

fn temp_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("real-programs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Issue 21 item 4: the binary target records regions as deep as the Event target
/// writes them (git's default nesting unless configured), so it formats no more fields.
fn binary_target_records_as_deep_as_event() {
    let path = temp_path("jj.t2b");
    let layer = Trace2::with_settings(Settings::default())
        .with_binary_target(path.display().to_string())
        .unfiltered_layer()
        .expect("the binary target is enabled");
    reset_counts();
    let subscriber = Registry::default().with(layer.clone().filtered());
    tracing::subscriber::with_default(subscriber, || {
        cli::ConfigEnv { layers: 10 }.reload_workspace_config(6);
    });
    layer.flush();
    assert_eq!(DEBUG_CALLS.load(Ordering::SeqCst), 2);
    let mut event = Vec::new();
    tracing_trace2_binary::decode_to_event_json(std::fs::File::open(&path).unwrap(), &mut event)
        .unwrap();
    let text = String::from_utf8(event).unwrap();
    let lines = event_lines(&text);
    let nestings: Vec<i64> = regions(&lines, "region_enter")
        .iter()
        .map(|r| r["nesting"].as_i64().unwrap())
        .collect();
    assert_eq!(nestings, [1, 2], "{text}");
}

/// The flight recorder alone records regions as deep as the binary target does (the
/// Event target's nesting unless configured), so it makes the layer format no more
/// fields than that.
fn flight_recorder_records_as_deep_as_the_binary_target() {
    let dir = temp_path("flight");
    std::fs::create_dir_all(&dir).unwrap();
    for (binary_nesting, formatted) in [(None, 2), (Some(4), 4)] {
        let mut settings = Settings::default();
        settings.binary_nesting = binary_nesting;
        let layer = Trace2::with_settings(settings)
            .with_flight_recorder(dir.display().to_string())
            .unfiltered_layer()
            .expect("the flight recorder is enabled");
        reset_counts();
        let subscriber = Registry::default().with(layer.filtered());
        tracing::subscriber::with_default(subscriber, || {
            cli::ConfigEnv { layers: 10 }.reload_workspace_config(6);
        });
        assert_eq!(
            DEBUG_CALLS.load(Ordering::SeqCst),
            formatted,
            "binary nesting {binary_nesting:?}"
        );
    }
}

/// Issue 21 item 5: beside an `EnvFilter("info")` fmt layer, the facade's layer lets
/// `tracing` keep its level at the layer's (it was TRACE: every `debug`/`trace` callsite
/// was built and dispatched): DEBUG, for DEBUG spans, while a `debug!` event and a
/// `trace_span!` are disabled at their call sites; the lifecycle goes through any filter.
fn level_hint_beside_a_filtered_fmt_layer() {
    let path = temp_path("level.event");
    let mut settings = Settings::default();
    settings.event_destination = Some(path.display().to_string());
    let trace2 = Trace2::with_settings(settings);
    let subscriber = Registry::default()
        .with(fmt_layer("info"))
        .with(trace2.layer());
    reset_counts();
    tracing::subscriber::with_default(subscriber, || {
        assert_eq!(LevelFilter::current(), LevelFilter::DEBUG);
        assert!(!tracing::enabled!(tracing::Level::DEBUG));
        assert!(tracing::enabled!(kind: tracing::metadata::Kind::SPAN, tracing::Level::DEBUG));
        let env = cli::ConfigEnv { layers: 3 };
        tracing::trace_span!("hidden", env = ?env).in_scope(|| {
            tracing::debug!(env = ?env, "not built");
        });
        assert_eq!(DEBUG_CALLS.load(Ordering::SeqCst), 0);
        tracing::info_span!("shown").in_scope(|| {});
    });
    // A global filter that lets nothing through: the lifecycle still gets through.
    let subscriber = Registry::default()
        .with(EnvFilter::new("off"))
        .with(trace2.layer());
    tracing::subscriber::with_default(subscriber, || {
        api::printf("lifecycle survives");
        tracing::info_span!("filtered out").in_scope(|| {});
    });
    let text = std::fs::read_to_string(&path).unwrap();
    let lines = event_lines(&text);
    let labels = entered_labels(&lines);
    assert_eq!(labels, ["shown"], "{text}");
    assert!(
        lines
            .iter()
            .any(|l| l["event"] == "printf" && l["msg"] == "lifecycle survives"),
        "{text}"
    );
}

/// Issue 21 item 5: the level and the fields switch as git-style settings.
fn configured_level_and_fields() {
    let path = temp_path("configured.event");
    let env = |name: &str| match name {
        "GIT_TRACE2_EVENT" => Some(path.display().to_string()),
        "TRACING_TRACE2_MAX_LEVEL" => Some("debug".to_owned()),
        "TRACING_TRACE2_SPAN_FIELDS" => Some("false".to_owned()),
        _ => None,
    };
    let settings = Settings::load(&env);
    assert_eq!(settings.max_level, Some(LevelFilter::DEBUG));
    assert_eq!(settings.span_fields, Some(false));
    let trace2 = Trace2::with_settings(settings).with_max_level(LevelFilter::WARN);
    assert_eq!(trace2.max_level(), LevelFilter::DEBUG, "the setting wins");
    let subscriber = Registry::default()
        .with(fmt_layer("warn"))
        .with(trace2.layer());
    tracing::subscriber::with_default(subscriber, || {
        assert_eq!(LevelFilter::current(), LevelFilter::DEBUG);
        tracing::debug_span!("debug_region", arg = 1).in_scope(|| {});
        tracing::trace_span!("trace_region").in_scope(|| {});
    });
    let text = std::fs::read_to_string(&path).unwrap();
    let lines = event_lines(&text);
    let enters = regions(&lines, "region_enter");
    assert_eq!(enters.len(), 1, "{text}");
    assert_eq!(enters[0]["label"], "debug_region");
    assert!(enters[0].get("msg").is_none(), "fields left out: {text}");
}

/// A writer into a shared buffer, for a fmt layer.
#[derive(Clone, Default)]
struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The level is a per-layer filter: a fmt layer without a filter of its own still gets
/// every `debug!` (a hint on the bare layer would have silenced it).
fn level_filter_hides_nothing_from_other_layers() {
    let sink = MemorySink::new();
    let layer = Trace2Layer::builder()
        .with_target(targets::event(EventFormat::new(), sink.clone()))
        .build();
    let console = Shared::default();
    let writer = console.clone();
    let subscriber = Registry::default()
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(move || writer.clone()),
        )
        .with(layer.filtered());
    tracing::subscriber::with_default(subscriber, || {
        assert_eq!(LevelFilter::current(), LevelFilter::TRACE);
        tracing::debug!("for the console only");
        tracing::info!("for both");
    });
    let console = String::from_utf8(console.0.lock().unwrap().clone()).unwrap();
    assert!(console.contains("for the console only"), "{console}");
    let printfs: Vec<Value> = events(&sink)
        .into_iter()
        .filter(|e| e["event"] == "printf")
        .collect();
    assert_eq!(printfs.len(), 1, "{printfs:?}");
    assert_eq!(printfs[0]["msg"], "for both");
}

/// The README's further per-layer filter on the facade's (already filtered) layer.
fn a_further_filter_narrows_the_layer() {
    let path = temp_path("narrowed.event");
    let mut settings = Settings::default();
    settings.event_destination = Some(path.display().to_string());
    let layer = Trace2::with_settings(settings)
        .layer()
        .with_filter(EnvFilter::new("info,mini_redis::clients::client=warn"));
    let subscriber = Registry::default().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        client::Client.lookup("c", "l", 7);
        cli::ConfigEnv { layers: 1 }.reload_workspace_config(1);
        tracing::debug_span!("below the level").in_scope(|| {});
    });
    let text = std::fs::read_to_string(&path).unwrap();
    let lines = event_lines(&text);
    let labels = entered_labels(&lines);
    assert_eq!(labels, ["reload_workspace_config"], "{text}");
}

/// Issue 21 items 8 and 9: `Client::ping(msg: Option<…>)` keeps `msg=` (no role), a
/// parameter named `category`, `label` or `repo` stays a parameter, and the category is
/// the crate's name.
fn mini_redis_arguments_take_no_role() {
    let sink = MemorySink::new();
    let layer = Trace2Layer::builder()
        .with_target(targets::event(EventFormat::new(), sink.clone()))
        .build();
    let subscriber = Registry::default().with(layer.filtered());
    tracing::subscriber::with_default(subscriber, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut client = client::Client;
        assert_eq!(runtime.block_on(client.ping(Some("hello"))), "hello");
        assert_eq!(client.lookup("c", "l", 7), 7);
    });
    let lines = events(&sink);
    let enters = regions(&lines, "region_enter");
    assert_eq!(enters.len(), 2, "{lines:?}");
    assert_eq!(enters[0]["label"], "ping");
    assert_eq!(enters[0]["msg"], "msg=Some(\"hello\")");
    assert_eq!(enters[0]["category"], "mini_redis");
    assert_eq!(enters[1]["label"], "lookup");
    assert_eq!(enters[1]["category"], "mini_redis");
    assert_eq!(enters[1]["msg"], "category=c label=l repo=7");
    assert!(enters[1].get("repo").is_none(), "{}", enters[1]);
}

/// Perf's 12-column category reads: the crate's name whole (the full target showed
/// `mini_redis::`).
fn perf_category_reads() {
    let sink = MemorySink::new();
    let layer = Trace2Layer::builder()
        .with_target(targets::perf(
            PerfFormat::new().with_brief(true),
            sink.clone(),
        ))
        .build();
    let subscriber = Registry::default().with(layer.filtered());
    tracing::subscriber::with_default(subscriber, || {
        client::Client.lookup("c", "l", 7);
    });
    let text = sink.to_string_lossy();
    let enter = text
        .lines()
        .find(|l| l.contains("region_enter"))
        .expect("a region_enter line");
    let columns: Vec<&str> = enter.split('|').map(str::trim).collect();
    assert!(columns.contains(&"mini_redis"), "{enter}");
    assert!(!enter.contains("mini_redis::"), "{enter}");
}

/// How many times the dependency's warning call site evaluated its fields: only when
/// some layer of the subscriber enabled it.
static DEPENDENCY_WARNINGS_BUILT: AtomicUsize = AtomicUsize::new(0);

/// A graph library that warns of its slow path, as the one that wrote 94 `error` lines
/// per command did (target `noisy_dep::graph`, as the crate's module path would be).
fn noisy_dependency() {
    for i in 0..94 {
        tracing::warn!(
            target: "noisy_dep::graph",
            node = {
                DEPENDENCY_WARNINGS_BUILT.fetch_add(1, Ordering::SeqCst);
                i
            },
            "slow path"
        );
    }
}

/// The Event lines named `kind` in the file at `path`.
fn count_events(path: &std::path::Path, kind: &str) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    event_lines(&text)
        .iter()
        .filter(|e| e["event"] == kind)
        .count()
}

/// A dependency's warnings that the program's own fmt filter hides
/// (`EnvFilter("info,noisy_dep=off")`) cost nothing beside the Trace2 layer at its
/// defaults: the call site is disabled for the whole subscriber (its fields are never
/// evaluated, no layer is called) and nothing is written. With warnings asked to be
/// errors (what the layer used to do) the layer alone enables them: 94 `error` lines.
fn dependency_warnings_hidden_by_the_program_cost_nothing() {
    for (warnings, built) in [(None, 0), (Some(Warnings::Error), 94)] {
        let path = temp_path(&format!("dependency-{built}.event"));
        let mut settings = Settings::default();
        settings.event_destination = Some(path.display().to_string());
        let mut trace2 = Trace2::with_settings(settings);
        if let Some(warnings) = warnings {
            trace2 = trace2.with_warnings(warnings);
        }
        let subscriber = Registry::default()
            .with(fmt_layer("info,noisy_dep=off"))
            .with(trace2.layer());
        DEPENDENCY_WARNINGS_BUILT.store(0, Ordering::SeqCst);
        tracing::subscriber::with_default(subscriber, || {
            assert_eq!(
                tracing::enabled!(target: "noisy_dep::graph", tracing::Level::WARN),
                built > 0,
                "{warnings:?}"
            );
            tracing::info_span!("command").in_scope(noisy_dependency);
        });
        assert_eq!(
            DEPENDENCY_WARNINGS_BUILT.load(Ordering::SeqCst),
            built,
            "{warnings:?}"
        );
        assert_eq!(count_events(&path, "error"), built, "{warnings:?}");
        assert_eq!(count_events(&path, "region_enter"), 1, "{warnings:?}");
    }
}

/// The program's own `warn!` goes to its console and writes no `error` line (the
/// process exits 0: a reader counting `error` lines must find none); `error!` does.
/// `Warnings::Error`, or `trace2.warnings = error`, turns warnings into errors again;
/// `Warnings::Printf` writes them as `printf` lines (counted here in the Perf stream).
fn a_warning_is_no_error_unless_asked() {
    let runs = AtomicUsize::new(0);
    let run = |configure: &dyn Fn(Trace2) -> Trace2, env: Option<&str>| {
        let n = runs.fetch_add(1, Ordering::SeqCst);
        let path = temp_path(&format!("warning-{n}.event"));
        let perf = temp_path(&format!("warning-{n}.perf"));
        let lookup = |name: &str| match name {
            "GIT_TRACE2_EVENT" => Some(path.display().to_string()),
            "GIT_TRACE2_PERF" => Some(perf.display().to_string()),
            "TRACING_TRACE2_WARNINGS" => env.map(str::to_owned),
            _ => None,
        };
        let console = Shared::default();
        let writer = console.clone();
        let subscriber = Registry::default()
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(false)
                    .with_writer(move || writer.clone())
                    .with_filter(EnvFilter::new("warn")),
            )
            .with(configure(Trace2::with_settings(Settings::load(&lookup))).layer());
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(path = "/repo", "slow path taken");
            api::exit(0);
        });
        let console = String::from_utf8(console.0.lock().unwrap().clone()).unwrap();
        assert!(console.contains("slow path taken"), "{console}");
        let printfs = std::fs::read_to_string(&perf)
            .unwrap()
            .lines()
            .filter(|l| l.contains("| printf ") && l.contains("slow path taken"))
            .count();
        (count_events(&path, "error"), printfs)
    };
    assert_eq!(run(&|t| t, None), (0, 0), "by default");
    assert_eq!(run(&|t| t.with_warnings(Warnings::Error), None), (1, 0));
    assert_eq!(run(&|t| t.with_warnings(Warnings::Printf), None), (0, 1));
    assert_eq!(run(&|t| t, Some("error")), (1, 0), "the setting");
    // An error stays an error.
    let path = temp_path("error.event");
    let mut settings = Settings::default();
    settings.event_destination = Some(path.display().to_string());
    let subscriber = Registry::default().with(Trace2::with_settings(settings).layer());
    tracing::subscriber::with_default(subscriber, || tracing::error!("cannot read"));
    assert_eq!(count_events(&path, "error"), 1);
}

/// tower-http's `TraceLayer` puts its request span and its events at DEBUG (as do
/// gitoxide's detail spans): by default the span is a region (the structure of the
/// trace) and its events are not (the chatter), beside a fmt layer showing INFO.
fn debug_spans_are_regions_debug_events_are_not() {
    let path = temp_path("tower.event");
    let mut settings = Settings::default();
    settings.event_destination = Some(path.display().to_string());
    let subscriber = Registry::default()
        .with(fmt_layer("info"))
        .with(Trace2::with_settings(settings).layer());
    tracing::subscriber::with_default(subscriber, || {
        for _ in 0..3 {
            let span = tracing::debug_span!(
                target: "tower_http::trace::make_span",
                "request",
                method = "GET",
                uri = "/"
            );
            span.in_scope(|| {
                tracing::debug!(target: "tower_http::trace::on_request", "started processing request");
                tracing::debug!(target: "tower_http::trace::on_response", latency = 1, status = 200, "finished processing request");
            });
        }
        tracing::trace_span!("poll").in_scope(|| {});
    });
    let text = std::fs::read_to_string(&path).unwrap();
    let lines = event_lines(&text);
    let enters = regions(&lines, "region_enter");
    assert_eq!(enters.len(), 3, "{text}");
    for enter in &enters {
        assert_eq!(enter["label"], "request", "{enter}");
        assert_eq!(enter["category"], "tower_http", "{enter}");
        assert_eq!(enter["msg"], "method=GET uri=/", "{enter}");
    }
    assert_eq!(regions(&lines, "region_leave").len(), 3, "{text}");
    assert!(
        lines
            .iter()
            .all(|e| e["event"] != "data" && e["event"] != "printf"),
        "{text}"
    );
}

/// The README's one-line first-party setup: the program's own regions and data, none of a
/// dependency's spans and events (their call sites disabled, their fields never built),
/// and the layer's own levels still hold within the crate (an own `debug!` is not built
/// either, as it was with a `Targets` filter around the layer's).
fn the_first_party_setup_keeps_dependencies_out() {
    static BUILT: AtomicUsize = AtomicUsize::new(0);
    let built = || BUILT.fetch_add(1, Ordering::SeqCst);
    let path = temp_path("first-party.event");
    let mut settings = Settings::default();
    settings.event_destination = Some(path.display().to_string());
    let trace2 = Trace2::with_settings(settings).with_only_crates([env!("CARGO_CRATE_NAME")]);
    let subscriber = Registry::default()
        .with(fmt_layer("warn"))
        .with(trace2.layer());
    tracing::subscriber::with_default(subscriber, || {
        tracing::info_span!("own").in_scope(|| {
            tracing::info!(key = "own", value = 1);
            tracing::debug!(n = built(), "own debug event: below the event level");
            tracing::info_span!(target: "noisy_dep::graph", "dependency", n = built()).in_scope(
                || tracing::info!(target: "noisy_dep::graph", n = built(), "dependency event"),
            );
        });
    });
    assert_eq!(BUILT.load(Ordering::SeqCst), 0);
    let text = std::fs::read_to_string(&path).unwrap();
    let lines = event_lines(&text);
    assert_eq!(entered_labels(&lines), ["own"], "{text}");
    let data: Vec<&Value> = lines.iter().filter(|e| e["event"] == "data").collect();
    assert_eq!(data.len(), 1, "{text}");
    assert_eq!(data[0]["key"], "own");
    assert_eq!(data[0]["category"], "real_programs");
}

/// Calls `tracing` makes to the program's own filter when a call site is called (a call
/// site whose interest is cached as `never` or `always` makes none).
static PROGRAM_FILTER_CALLS: AtomicUsize = AtomicUsize::new(0);

/// The program's `EnvFilter`, counting its per-call `enabled` questions, as a per-layer
/// filter or as a global filter layer.
struct CountedFilter(EnvFilter);

impl<S> tracing_subscriber::layer::Filter<S> for CountedFilter
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn enabled(
        &self,
        meta: &tracing::Metadata<'_>,
        cx: &tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        PROGRAM_FILTER_CALLS.fetch_add(1, Ordering::SeqCst);
        tracing_subscriber::layer::Filter::enabled(&self.0, meta, cx)
    }

    fn callsite_enabled(
        &self,
        meta: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        tracing_subscriber::layer::Filter::<S>::callsite_enabled(&self.0, meta)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        tracing_subscriber::layer::Filter::<S>::max_level_hint(&self.0)
    }
}

impl<S> tracing_subscriber::Layer<S> for CountedFilter
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn register_callsite(
        &self,
        meta: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        tracing_subscriber::Layer::<S>::register_callsite(&self.0, meta)
    }

    fn enabled(
        &self,
        meta: &tracing::Metadata<'_>,
        cx: tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        PROGRAM_FILTER_CALLS.fetch_add(1, Ordering::SeqCst);
        tracing_subscriber::Layer::enabled(&self.0, meta, cx)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        tracing_subscriber::Layer::<S>::max_level_hint(&self.0)
    }
}

/// The program's console: shows its own INFO events, hides the noisy dependency.
const PROGRAM_FILTER: &str = "info,noisy_dep=off";

type BoxedLayer = Box<dyn tracing_subscriber::Layer<Registry> + Send + Sync>;

/// The program's subscriber in one of the shapes users build, with `trace2`'s layer
/// added where they add it (or left out).
fn program_stack(shape: &str, trace2: Option<&Trace2>) -> tracing::Dispatch {
    fn fmt<S>() -> impl tracing_subscriber::Layer<S>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        tracing_subscriber::fmt::layer().with_writer(std::io::sink)
    }
    fn filtered<S>() -> impl tracing_subscriber::Layer<S>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        fmt().with_filter(CountedFilter(EnvFilter::new(PROGRAM_FILTER)))
    }
    match (shape, trace2) {
        ("filtered fmt", None) => Registry::default().with(filtered()).into(),
        ("filtered fmt", Some(t)) => Registry::default().with(filtered()).with(t.layer()).into(),
        ("global EnvFilter", None) => Registry::default()
            .with(CountedFilter(EnvFilter::new(PROGRAM_FILTER)))
            .with(fmt())
            .into(),
        ("global EnvFilter", Some(t)) => Registry::default()
            .with(CountedFilter(EnvFilter::new(PROGRAM_FILTER)))
            .with(fmt())
            .with(t.layer())
            .into(),
        // A filter the program can reload (a reloaded per-layer-filtered layer is
        // never `never` in tracing-subscriber, with or without Trace2).
        ("reload slot", None) => Registry::default()
            .with(
                tracing_subscriber::reload::Layer::new(CountedFilter(EnvFilter::new(
                    PROGRAM_FILTER,
                )))
                .0,
            )
            .with(fmt())
            .into(),
        ("reload slot", Some(t)) => Registry::default()
            .with(
                tracing_subscriber::reload::Layer::new(CountedFilter(EnvFilter::new(
                    PROGRAM_FILTER,
                )))
                .0,
            )
            .with(fmt())
            .with(t.layer())
            .into(),
        ("boxed in a Vec", t) => {
            let mut layers: Vec<BoxedLayer> = vec![filtered().boxed()];
            layers.extend(t.map(|t| t.layer().boxed()));
            Registry::default().with(layers).into()
        }
        ("further filter", None) => Registry::default().with(filtered()).into(),
        ("further filter", Some(t)) => Registry::default()
            .with(filtered())
            .with(t.layer().with_filter(EnvFilter::new("info,hyper=warn")))
            .into(),
        ("trace2 first", None) => Registry::default().with(filtered()).into(),
        ("trace2 first", Some(t)) => Registry::default().with(t.layer()).with(filtered()).into(),
        (other, _) => panic!("no shape {other}"),
    }
}

/// What the program's call sites cost under `dispatch`: the filter calls, the hidden
/// warnings' fields built, `tracing`'s global level, and whether the call sites are
/// enabled (hidden warning, own event).
fn program_cost(dispatch: tracing::Dispatch) -> (usize, usize, LevelFilter, bool, bool) {
    tracing::dispatcher::with_default(&dispatch, || {
        PROGRAM_FILTER_CALLS.store(0, Ordering::SeqCst);
        DEPENDENCY_WARNINGS_BUILT.store(0, Ordering::SeqCst);
        for _ in 0..3 {
            noisy_dependency();
            tracing::info!(category = "cmd", key = "nodes", value = 94);
        }
        (
            PROGRAM_FILTER_CALLS.load(Ordering::SeqCst),
            DEPENDENCY_WARNINGS_BUILT.load(Ordering::SeqCst),
            LevelFilter::current(),
            tracing::enabled!(target: "noisy_dep::graph", tracing::Level::WARN),
            tracing::enabled!(tracing::Level::INFO),
        )
    })
}

/// With no target enabled, the layer a program adds beside its own changes nothing in
/// its subscriber, whatever its shape: the same call sites are enabled, `tracing`'s global
/// level is the same, the program's filter is asked no more often (a dependency's
/// warnings its console hides stay disabled call sites: their fields are never built),
/// and the disabled layer holds no Trace2 layer for the `api` calls to find. (An
/// `Option` layer's `None` made each hidden warning `sometimes`: 282 filter calls and
/// 282 events built and dispatched to nobody here.)
fn a_disabled_layer_changes_nothing_in_the_program_stack() {
    let trace2 = Trace2::with_settings(Settings::default());
    let layer = trace2.layer::<Registry>();
    assert!(!layer.is_enabled());
    assert!(layer.as_inner().is_none());
    let lifecycle = trace2.lifecycle();
    assert!(!lifecycle.layer::<Registry>().is_enabled());
    for shape in [
        "filtered fmt",
        "global EnvFilter",
        "reload slot",
        "boxed in a Vec",
        "further filter",
        "trace2 first",
    ] {
        let alone = program_cost(program_stack(shape, None));
        // The measure measures: the hidden warnings cost nothing without the layer.
        assert_eq!(
            alone,
            (0, 0, LevelFilter::INFO, false, true),
            "{shape}: the program's stack alone"
        );
        let dispatch = program_stack(shape, Some(&trace2));
        assert!(dispatch.downcast_ref::<Trace2Layer>().is_none(), "{shape}");
        assert_eq!(
            program_cost(dispatch),
            alone,
            "{shape}: with the disabled layer"
        );
    }
}

/// A program of spans and events at every level, in the program's crate (`app`) and a
/// dependency's (`dep`): nested, entered again, given values later, with explicit parents
/// and events inside them.
fn mixed_program() {
    for round in 0..3u64 {
        let request = tracing::debug_span!(target: "app::http", "request", method = "GET", uri = %format!("/item/{round}"), status = tracing::field::Empty);
        let hidden = tracing::trace_span!(target: "app::db", "query", round);
        let dep = tracing::info_span!(target: "dep::pool", "checkout", round);
        for poll in 0..3 {
            let _request = request.enter();
            tracing::trace!(target: "app::http", poll, "polled");
            let _hidden = hidden.enter();
            tracing::debug!(target: "app::db", "query step");
            dep.in_scope(|| {
                tracing::info!(target: "dep::pool", "checked out");
                tracing::warn!(target: "dep::pool", "slow pool");
                let inner = tracing::debug_span!(target: "app::render", "render", poll);
                inner.in_scope(|| tracing::info!(target: "app::render", bytes = 42, "rendered"));
            });
            let child =
                tracing::info_span!(target: "app::http", parent: &request, "handler", id = round);
            child.in_scope(|| tracing::error!(target: "app::http", "failed once"));
            let _again = request.enter();
        }
        request.record("status", 200);
        tracing::info!(target: "app::http", "finished");
    }
}

/// The facade's `FilteredLayer` sends the span callbacks to the layer without
/// `Filtered`'s look-up: the other layers (an fmt layer behind an `EnvFilter`, or with
/// none) print the same text as beside tracing-subscriber's `Filtered` with the same
/// filter, `tracing`'s level hint is the same, and the Trace2 lines are the same (a
/// first-party setup, and one with a further filter on the layer).
fn the_filtered_layer_sees_and_shows_what_filtered_does() {
    /// Event lines without their times.
    fn timeless(sink: &MemorySink) -> Vec<Value> {
        events(sink)
            .into_iter()
            .map(|mut e| {
                if let Some(o) = e.as_object_mut() {
                    for key in ["time", "t_abs", "t_rel"] {
                        o.remove(key);
                    }
                }
                e
            })
            .collect()
    }
    for fmt_filter in [
        Some("warn,app=trace"),
        Some("info"),
        Some("app::db=trace"),
        None,
    ] {
        for only_app in [false, true] {
            for further in [None, Some("info,app::render=off")] {
                let mut seen = Vec::new();
                for gate in [false, true] {
                    let sink = MemorySink::new();
                    let mut builder = Trace2Layer::builder()
                        .with_target(targets::event(EventFormat::new(), sink.clone()));
                    if only_app {
                        builder = builder.with_only_crates(["app"]);
                    }
                    let layer = builder.build();
                    let console = Shared::default();
                    let writer = console.clone();
                    let fmt = tracing_subscriber::fmt::layer()
                        .with_ansi(false)
                        .without_time()
                        .with_writer(move || writer.clone())
                        .with_filter(fmt_filter.map(EnvFilter::new));
                    let ours = if gate {
                        layer.clone().filtered().boxed()
                    } else {
                        let filter = layer.filter();
                        tracing_subscriber::Layer::with_filter(layer.clone(), filter).boxed()
                    };
                    let ours = match further {
                        Some(f) => ours.with_filter(EnvFilter::new(f)).boxed(),
                        None => ours,
                    };
                    let subscriber = Registry::default().with(fmt).with(ours);
                    let hint = tracing::subscriber::with_default(subscriber, || {
                        mixed_program();
                        LevelFilter::current()
                    });
                    let console = String::from_utf8(console.0.lock().unwrap().clone()).unwrap();
                    seen.push((hint, console, timeless(&sink)));
                }
                let case = format!("fmt {fmt_filter:?}, only app {only_app}, further {further:?}");
                let (a, b) = (&seen[0], &seen[1]);
                assert_eq!(a.0, b.0, "{case}: the level hint");
                assert_eq!(a.1, b.1, "{case}: the fmt layer's text");
                assert_eq!(a.2, b.2, "{case}: the Trace2 lines");
                assert!(
                    a.2.iter().any(|e| e["event"] == "region_enter"),
                    "{case}: {:?}",
                    a.2
                );
                if fmt_filter.is_some() {
                    assert!(!a.1.is_empty(), "{case}: the fmt layer printed nothing");
                }
            }
        }
    }
}
