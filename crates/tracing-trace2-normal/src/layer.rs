//! Ready-made layer and target constructors for the Normal format.

use tracing_trace2_core::clock;
use tracing_trace2_core::{Sink, Target, Trace2Layer};

use crate::NormalFormat;

/// The environment variable that enables this target in git; used in messages.
pub const ENV_NAME: &str = "GIT_TRACE2";

/// A target writing `format`'s lines to `sink`, to add to a
/// [`Trace2Layer`] builder next to other targets.
pub fn target(format: NormalFormat, sink: impl Sink) -> Target {
    Target::new(ENV_NAME, format, sink)
}

/// A layer that writes the Normal stream to `sink` with the default settings and the
/// local time zone captured at process start.
pub fn layer(sink: impl Sink) -> Trace2Layer {
    Trace2Layer::builder()
        .with_target(target(
            NormalFormat::new().with_utc_offset(clock::local_offset_secs()),
            sink,
        ))
        .build()
}
