//! The Trace2 layer behind `tracing-trace2`.
//!
//! This crate maps `tracing` spans to Trace2 regions and `tracing` events to Trace2
//! messages, and keeps what Git's Trace2 keeps per process and per thread: the session
//! id, the process clock, thread names and region stacks. It formats nothing itself and
//! opens nothing: the format crates (`tracing-trace2-normal`, `-perf`, `-event`)
//! implement [`Format`] over the records of `tracing-trace2-record`, and
//! `tracing-trace2-dst` provides the [`Sink`]s; [`Trace2Layer`] hands every enabled
//! [`Target`] (a format and a sink) one [`Record`] per Trace2 call, on the traced thread
//! or through a background writer ([`background`]).
//!
//! | module | job |
//! |---|---|
//! | `layer` | the `tracing` layer: callbacks → records; direct or deferred output |
//! | `filter` | which user spans and events become output: levels, warnings, the per-layer filter |
//! | `targets` | the fan-out: format for every target, one `write` per line, disable on failure |
//! | `background` | the background writers: options, guard, queue, deferred replay, single-sink writer |
//! | `region`, `span_store`, `fields` | span state and the layer's store of it by span id; the visitors of user fields |
//! | `thread`, `lanes` | per-thread names and region stacks; the layer's announced and task lanes |
//! | `api`, `wire` | typed Trace2 events handed to the layer; the values they carry |
//! | `clock`, `session` | the process clock; the session id and depth |
//! | `timers`, `timer_table`, `redact` | stopwatch timers and counters (writing; values); URL redaction |
//! | `busy` | the re-entrancy flag |
//! | `callsite` | call sites as relative paths |
//!
//! ```
//! use tracing_subscriber::prelude::*;
//! use tracing_trace2_core::{Format, MemorySink, Record, Target, Trace2Layer};
//!
//! /// A toy format: the event name alone.
//! struct Names;
//! impl Format for Names {
//!     fn format(&self, record: &Record<'_>, out: &mut Vec<u8>) {
//!         out.extend_from_slice(record.event.name().as_bytes());
//!         out.push(b'\n');
//!     }
//! }
//!
//! let sink = MemorySink::new();
//! let layer = Trace2Layer::builder()
//!     .with_target(Target::new("GIT_TRACE2_EVENT", Names, sink.clone()))
//!     .build();
//! let subscriber = tracing_subscriber::registry().with(layer);
//! tracing::subscriber::with_default(subscriber, || {
//!     let span = tracing::info_span!("read_index", trace2.category = "index");
//!     let _entered = span.enter();
//!     tracing::info!(key = "entries", value = 3);
//! });
//! assert_eq!(sink.to_string_lossy(), "version\nregion_enter\ndata\nregion_leave\n");
//! ```

// First: its macro is used by the modules declared after it.
#[macro_use]
mod fork_lock;
pub mod api;
pub mod background;
mod bound;
pub use bound::write_bounded;
mod busy;
pub mod callsite;
pub mod clock;
mod fields;
mod filter;
mod lanes;
mod layer;
mod output;
pub mod process_info;
pub mod redact;
mod region;
pub mod session;
mod span_store;
mod targets;
mod text_slot;
mod thread;
mod timer_table;
pub mod timers;
mod wire;

pub use busy::in_panic_hook;
pub use filter::{Levels, Trace2Filter, Warnings};
pub use lanes::DEFAULT_MAX_TASK_LANES;
pub use layer::{FilteredLayer, RegionMode, Trace2Layer, Trace2LayerBuilder};
pub use region::{
    DEFAULT_MESSAGE_LIMIT, SPAN_CATEGORY_FIELD, SPAN_LABEL_FIELD, SPAN_MSG_FIELD, SPAN_REPO_FIELD,
    default_category,
};
pub use session::Session;
pub use targets::Target;
pub use tracing_trace2_dst::{MemorySink, NullSink, Sink};
pub use tracing_trace2_record::{
    Callsite, ChildInfo, Format, Record, RegionInfo, TimerInfo, Timestamp, Trace2Event,
};
