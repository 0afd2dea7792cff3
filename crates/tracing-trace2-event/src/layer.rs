//! Ready-made layer and target constructors for the Event format.

use tracing_trace2_core::{Sink, Target, Trace2Layer};

use crate::EventFormat;

/// The environment variable that enables this target in git; used in messages.
pub const ENV_NAME: &str = "GIT_TRACE2_EVENT";

/// A target writing `format`'s lines to `sink`, to add to a
/// [`Trace2Layer`] builder next to other targets.
pub fn target(format: EventFormat, sink: impl Sink) -> Target {
    Target::new(ENV_NAME, format, sink)
}

/// A layer that writes the Event stream to `sink` with the default settings.
pub fn layer(sink: impl Sink) -> Trace2Layer {
    Trace2Layer::builder()
        .with_target(target(EventFormat::new(), sink))
        .build()
}
