//! The three text targets as git names them: each pairs its format with a sink under
//! the environment variable that enables it in git (the name appears in git's messages
//! about the target). [`crate::Trace2`] builds them from git's settings; these
//! constructors are for programs that assemble a [`Trace2Layer`] themselves.
//!
//! ```
//! use tracing_trace2::core::{MemorySink, Trace2Layer};
//! use tracing_trace2::event::EventFormat;
//!
//! let sink = MemorySink::new();
//! let layer = Trace2Layer::builder()
//!     .with_target(tracing_trace2::targets::event(EventFormat::new(), sink.clone()))
//!     .build();
//! # drop(layer);
//! ```

#[cfg(doc)]
use tracing_trace2_core::Trace2Layer;
use tracing_trace2_core::{Sink, Target};
use tracing_trace2_event::EventFormat;
use tracing_trace2_normal::NormalFormat;
use tracing_trace2_perf::PerfFormat;

/// The variable that enables the Normal target in git.
pub const NORMAL_ENV: &str = "GIT_TRACE2";
/// The variable that enables the Perf target in git.
pub const PERF_ENV: &str = "GIT_TRACE2_PERF";
/// The variable that enables the Event target in git.
pub const EVENT_ENV: &str = "GIT_TRACE2_EVENT";

/// A Normal target writing `format`'s lines to `sink`.
pub fn normal(format: NormalFormat, sink: impl Sink) -> Target {
    Target::new(NORMAL_ENV, format, sink)
}

/// A Perf target writing `format`'s lines to `sink`.
pub fn perf(format: PerfFormat, sink: impl Sink) -> Target {
    Target::new(PERF_ENV, format, sink)
}

/// An Event target writing `format`'s lines to `sink`.
pub fn event(format: EventFormat, sink: impl Sink) -> Target {
    Target::new(EVENT_ENV, format, sink)
}
