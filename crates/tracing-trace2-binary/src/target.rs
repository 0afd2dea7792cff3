//! An interim way to run the binary writer as one more target of today's core layer,
//! with no change to the core: a [`Format`] that records instead of formatting, and a
//! [`Sink`] whose `flush` writes every batch out.
//!
//! The layer hands every record to each target's format in turn, so this target sees
//! the very records (and clock readings) the text targets see. It writes no line of its
//! own: the layer never calls its sink's `write_line`. This stretches the `Format`
//! contract (formatting is pure), so once the layer knows binary targets it should
//! call [`BinaryWriter::record`] and the flush hooks directly.

use std::io;

use tracing_trace2_core::Target;

use crate::dest::{ENV_NAME, Sink};
use crate::record::{Format, Record};
use crate::writer::BinaryWriter;

/// Records each record it is asked to format, and writes nothing.
#[derive(Clone, Debug)]
pub struct RecordingFormat(pub BinaryWriter);

impl Format for RecordingFormat {
    fn format(&self, record: &Record<'_>, _out: &mut Vec<u8>) {
        self.0.record(record);
    }
}

/// Records each record whose region nesting is at most `max_nesting` (the Event
/// target's rule: regions, and data inside them, nested deeper are left out), and
/// writes nothing. The layer asks [`Format::writes`] before it formats a span's fields,
/// so the fields of regions left out are never formatted.
#[derive(Clone, Debug)]
pub struct NestedRecordingFormat {
    /// The writer records go to.
    pub writer: BinaryWriter,
    /// The deepest region nesting recorded (`u32::MAX`: every one).
    pub max_nesting: u32,
}

impl Format for NestedRecordingFormat {
    fn format(&self, record: &Record<'_>, _out: &mut Vec<u8>) {
        if self.writes(record) {
            self.writer.record(record);
        }
    }

    fn writes(&self, record: &Record<'_>) -> bool {
        record
            .event
            .nesting()
            .is_none_or(|nesting| nesting <= self.max_nesting)
    }
}

/// Writes every batch out when the layer flushes its sinks (before `atexit`, and on
/// `Trace2Layer::flush`).
#[derive(Clone, Debug)]
pub struct FlushingSink(pub BinaryWriter);

impl Sink for FlushingSink {
    fn write_line(&self, _line: &[u8]) -> io::Result<()> {
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        self.0.flush_all();
        Ok(())
    }
}

impl BinaryWriter {
    /// This writer as a target of the core layer (`Trace2Layer::builder().with_target`),
    /// named after `TRACING_TRACE2_BINARY`. `too_many_files` is the destination's flag
    /// ([`crate::Destination::too_many_files`]).
    pub fn target(&self, too_many_files: bool) -> Target {
        Target::new(
            ENV_NAME,
            RecordingFormat(self.clone()),
            FlushingSink(self.clone()),
        )
        .with_too_many_files(too_many_files)
    }

    /// [`BinaryWriter::target`] recording regions (and the data inside them) no deeper
    /// than `max_nesting`, as the Event target does with `GIT_TRACE2_EVENT_NESTING`.
    pub fn target_with_max_nesting(&self, too_many_files: bool, max_nesting: u32) -> Target {
        let format = NestedRecordingFormat {
            writer: self.clone(),
            max_nesting: max_nesting.max(1),
        };
        Target::new(ENV_NAME, format, FlushingSink(self.clone()))
            .with_too_many_files(too_many_files)
    }
}
