//! The traced program's own subscriber layer, shared by the benches shaped like real programs
//! (kept apart from `mod.rs`, which the binary crate's examples include without the fmt and
//! env-filter features of tracing-subscriber).

use tracing_subscriber::{EnvFilter, Layer};

/// The program's own fmt layer: an `EnvFilter` showing warnings, writing nowhere.
pub fn program_layer<S>() -> impl Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    tracing_subscriber::fmt::layer()
        .with_writer(std::io::sink)
        .with_filter(EnvFilter::new("warn"))
}
