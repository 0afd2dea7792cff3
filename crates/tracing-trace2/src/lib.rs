//! Git's Trace2 telemetry for Rust programs that use `tracing`.
//!
//! Add one layer to `tracing_subscriber::registry()`, keep your `#[instrument]` functions
//! and `tracing::info!` call sites, and get the Normal, Perf and Event streams that
//! `git` itself writes when `GIT_TRACE2`, `GIT_TRACE2_PERF` or `GIT_TRACE2_EVENT` is
//! set, readable by every tool built for Git's Trace2.
//!
//! ```
//! use tracing_subscriber::prelude::*;
//! use tracing_trace2::{Settings, Trace2};
//!
//! #[tracing::instrument(fields(trace2.category = "index"))]
//! fn read_index(path: &str) {
//!     tracing::info!(key = "entries", value = 1500);
//! }
//!
//! // A program calls `Trace2::from_env()`, which reads GIT_TRACE2* and the trace2.* keys
//! // of git's config as git does (and gives a disabled layer that changes nothing when
//! // no target is enabled). Here the settings are explicit: the Event stream, into a file.
//! let path = std::env::temp_dir().join(format!("trace2-doc-{}.event", std::process::id()));
//! let mut settings = Settings::default();
//! settings.event_destination = Some(path.display().to_string());
//! let trace2 = Trace2::with_settings(settings).with_exe_version("1.0.0");
//!
//! let subscriber = tracing_subscriber::registry().with(trace2.layer());
//! tracing::subscriber::with_default(subscriber, || read_index(".git/index"));
//!
//! let events: Vec<String> = std::fs::read_to_string(&path)?
//!     .lines()
//!     .map(|line| line.split('"').nth(3).unwrap_or_default().to_owned())
//!     .collect();
//! assert_eq!(events, ["version", "region_enter", "data", "region_leave"]);
//! # std::fs::remove_file(&path)?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! What becomes what:
//!
//! | tracing | Trace2 |
//! |---|---|
//! | a span's first entry / its close | `region_enter` / `region_leave` (one region per span lifetime, [`RegionMode`]); label = span name or `trace2.label`, category = `trace2.category` or the crate (first segment of the target), message = `trace2.msg` then the other fields, at most 256 bytes ([`Trace2::with_message_limit`], [`Trace2::with_span_fields`]), repo = `trace2.repo` |
//! | `info!(key = "k", value = v)`, `info!(k = v)` | `data` (one per field), category = `category` field, else the enclosing span's, else the crate |
//! | `info!(key = "k", json = "{…}")` | `data_json` |
//! | `info!("text")` (message only) | `printf` |
//! | `error!` | `error` (`msg` = message and fields, `fmt` = message) |
//! | `warn!` | nothing, unless [`Trace2::with_warnings`] asks for an `error` or a `printf` |
//! | [`api`] functions | every other Trace2 event (`cmd_name`, `child_start`, `exit`, …), straight to the Trace2 layer: no filter drops them, no other layer sees them |
//!
//! Every text formatted from the program's values (a span's message, category and
//! label; an event's message and field values) is at most 256 bytes, cut on a character
//! boundary with `...`, in every target ([`Trace2::with_message_limit`]); a `json` field
//! longer than that becomes a `data` line with its text cut.
//!
//! Only `trace2.*` span fields take a role, so a function's arguments never do. User
//! spans from DEBUG up and events from INFO up become output ([`Trace2::with_span_level`],
//! [`Trace2::with_event_level`], `trace2.spanLevel`, `trace2.eventLevel`);
//! [`Trace2::layer`] puts the layer behind a per-layer filter at those levels, decided
//! per call site, so `tracing` skips at the call site what no layer wants. Every thread that
//! writes is announced with `thread_start` and ended with `thread_exit`.
//!
//! Your own crate's spans and events alone, none of your dependencies' (the README's
//! one-line first-party setup, [`Trace2::with_only_crates`]):
//!
//! ```no_run
//! let trace2 = tracing_trace2::Trace2::from_env().with_only_crates([env!("CARGO_CRATE_NAME")]).init();
//! # drop(trace2);
//! ```
//!
//! A whole program, with git's process lifecycle (`version`, `start`, `cmd_ancestry`,
//! `exit`, `atexit`, also on `std::process::exit` and panics), traced children and
//! threads:
//!
//! ```no_run
//! use std::process::{Command, ExitCode};
//! use tracing_trace2::{Trace2, Trace2CommandExt, api};
//!
//! fn main() -> ExitCode {
//!     let trace2 = Trace2::from_env()
//!         .with_exe_version(env!("CARGO_PKG_VERSION"))
//!         .init();
//!     api::cmd_name("mytool");
//!     let result = Command::new("git").arg("version").trace2_status(); // child_start/exit
//!     trace2.finish(result.map(|_| ()))
//! }
//! ```
//!
//! Crates, lowest first: `tracing-trace2-record` (the record, the `Format` trait, the
//! codec), the formats [`normal`], [`perf`] and [`event`], `tracing-trace2-dst` (where
//! lines are written), [`core`] (the layer, the typed [`api`], background writers); this
//! facade reads git's settings ([`Settings`]), builds the layer ([`Trace2`], [`targets`])
//! and drives the process lifecycle ([`Lifecycle`], [`Trace2CommandExt`], [`thread`]).
//!
//! Cargo features: `tokio` adds `command::tokio`, the traced form of
//! `tokio::process::Command` (`Trace2TokioCommandExt`), with `async` waits.

mod ancestry;
mod builder;
pub mod command;
pub mod config;
mod lifecycle;
mod optional;
mod params;
mod session_env;
pub mod targets;
pub mod thread;

pub use builder::Trace2;
#[cfg(feature = "tokio")]
pub use command::tokio::Trace2TokioCommandExt;
pub use command::{Trace2CommandExt, TracedChild, add_session_env};
pub use config::Settings;
pub use lifecycle::{Lifecycle, Trace2Guard, exit_process, is_active};
pub use optional::OptionalLayer;
pub use tracing_trace2_binary::flight;
pub use tracing_trace2_core as core;
pub use tracing_trace2_core::FilteredLayer;
pub use tracing_trace2_core::background::{BackgroundGuard, BackgroundOptions};
pub use tracing_trace2_core::timers::{Counter, PerThread, Timer};
pub use tracing_trace2_core::{Levels, RegionMode, Trace2Filter, Trace2Layer, Warnings, api};
pub use tracing_trace2_event as event;
pub use tracing_trace2_normal as normal;
pub use tracing_trace2_perf as perf;

/// The Trace2 layer configured from the environment and git config, disabled (a layer
/// that changes nothing, see [`OptionalLayer`]) when no target is enabled. The `version`
/// line names version `0.0.0`; use [`Trace2`] with [`Trace2::with_exe_version`] to name
/// the program's.
pub fn layer<S>() -> OptionalLayer<FilteredLayer<S>, S>
where
    S: tracing_core::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    Trace2::from_env().layer()
}

/// The README's examples, run as doctests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
