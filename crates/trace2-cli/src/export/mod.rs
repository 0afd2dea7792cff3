//! `trace2 export`: traces for a trace viewer. One process model (module `model`: processes,
//! threads, nested slices, children, flows) feeds one [`ExportSink`] per output format:
//!
//! - `chrome`: Chrome trace event JSON (the Perfetto UI, chrome://tracing, speedscope);
//! - `perfetto`: Perfetto's own protobuf trace (`TracePacket`s with `TrackEvent`s).
//!
//! Another format is one module beside these two: an [`ExportSink`] that encodes what the model hands
//! it. Both stream: memory follows the number of processes and live threads, not of lines.

mod chrome;
mod model;
mod perfetto;
pub mod sink;
mod track;

pub use chrome::{ChromeExporter, ChromeSink};
pub use model::{ExportStats, Exporter};
pub use perfetto::{PerfettoExporter, PerfettoSink};
pub use sink::ExportSink;

#[cfg(test)]
mod tests;
