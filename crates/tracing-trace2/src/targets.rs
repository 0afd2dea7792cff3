//! The three text targets as git names them, the binary target and the flight recorder: each pairs its format with a sink under
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

use tracing_trace2_binary::flight::{FlightFormat, FlightRecorder, NestedFlightFormat};
use tracing_trace2_binary::{BinaryWriter, FlushingSink, NestedRecordingFormat, RecordingFormat};
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

/// The binary target (t2b): `writer` records every record the layer hands it, and
/// writes its batches out when the layer flushes. Named after `TRACING_TRACE2_BINARY`;
/// `too_many_files` is the destination's flag
/// ([`Destination::too_many_files`](tracing_trace2_binary::Destination::too_many_files)).
pub fn binary(writer: &BinaryWriter, too_many_files: bool) -> Target {
    Target::new(
        tracing_trace2_binary::ENV_NAME,
        RecordingFormat(writer.clone()),
        FlushingSink(writer.clone()),
    )
    .with_too_many_files(too_many_files)
}

/// [`binary`] recording regions (and the data inside them) no deeper than `max_nesting`,
/// as the Event target does with `GIT_TRACE2_EVENT_NESTING`: the fields of deeper regions
/// are then never formatted.
pub fn binary_with_max_nesting(
    writer: &BinaryWriter,
    too_many_files: bool,
    max_nesting: u32,
) -> Target {
    let format = NestedRecordingFormat {
        writer: writer.clone(),
        max_nesting: max_nesting.max(1),
    };
    Target::new(
        tracing_trace2_binary::ENV_NAME,
        format,
        FlushingSink(writer.clone()),
    )
    .with_too_many_files(too_many_files)
}

/// The flight recorder as a target: `recorder` keeps every record the layer hands it in
/// its ring and fires its triggers; the layer's flushes hand the threads' batches to
/// the ring. Named after `TRACING_TRACE2_FLIGHT`.
pub fn flight(recorder: &FlightRecorder) -> Target {
    Target::new(
        tracing_trace2_binary::flight::ENV_NAME,
        FlightFormat(recorder.clone()),
        FlushingSink(recorder.writer().clone()),
    )
}

/// [`flight`] recording regions (and the data inside them) no deeper than `max_nesting`,
/// as [`binary_with_max_nesting`] does: the flight recorder alone then never makes the
/// layer format the fields of deeper regions, and fires no trigger for them.
pub fn flight_with_max_nesting(recorder: &FlightRecorder, max_nesting: u32) -> Target {
    let format = NestedFlightFormat {
        recorder: recorder.clone(),
        max_nesting: max_nesting.max(1),
    };
    Target::new(
        tracing_trace2_binary::flight::ENV_NAME,
        format,
        FlushingSink(recorder.writer().clone()),
    )
}
