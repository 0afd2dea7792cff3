//! The Trace2 model behind `tracing-trace2`.
//!
//! This crate maps `tracing` spans to Trace2 regions and `tracing` events to Trace2
//! messages, and keeps what Git's Trace2 keeps per process and per thread: the session
//! id, the process clock, thread names and region stacks. It formats nothing itself: the
//! format crates (`tracing-trace2-normal`, `-perf`, `-event`) implement [`Format`], and
//! [`Trace2Layer`] hands each of them one [`Record`] per Trace2 call; [`Sink`]s write
//! the resulting lines.
//!
//! ```
//! use tracing_subscriber::prelude::*;
//! use tracing_trace2_core::{MemorySink, Record, Format, Target, Trace2Layer};
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
//!     let span = tracing::info_span!("read_index", category = "index");
//!     let _entered = span.enter();
//!     tracing::info!(key = "entries", value = 3);
//! });
//! assert_eq!(sink.to_string_lossy(), "version\nregion_enter\ndata\nregion_leave\n");
//! ```

pub mod api;
pub mod clock;
pub mod codec;
mod deferred;
pub mod dst;
mod fields;
pub mod layer;
pub mod record;
pub mod redact;
pub mod region;
pub mod session;
pub mod sink;
mod targets;
pub mod text;
mod thread;
pub mod timers;

pub use layer::{Target, Trace2Layer, Trace2LayerBuilder};
pub use record::{Callsite, ChildInfo, Event, Format, Record, RegionInfo, TimerInfo, Timestamp};
pub use region::RegionState;
pub use session::Session;
pub use sink::{MemorySink, NullSink, Sink};
