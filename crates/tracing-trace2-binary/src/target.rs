//! The binary writer as one more target of the core layer, with no change to the core:
//! a [`Format`] that records instead of formatting, and a [`Sink`] whose `flush` writes
//! every batch out. The facade pairs them into a core `Target`
//! (`tracing_trace2::targets::binary`); this crate does not depend on the core.
//!
//! The layer hands every record to each target's format in turn, so this target sees
//! the very records (and clock readings) the text targets see. It writes no line of its
//! own: the layer never calls its sink's `write_line`. This stretches the `Format`
//! contract (formatting is pure), so once the layer knows binary targets it should
//! call [`BinaryWriter::record`] and the flush hooks directly.

use std::io;

use crate::dest::Sink;
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
