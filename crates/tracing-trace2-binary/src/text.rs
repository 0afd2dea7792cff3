//! Decoding straight to Trace2 text: every record goes through the same Normal, Perf or
//! Event formatter the live text targets use, so the lines are the ones they wrote.
//!
//! The settings default to the writer's (recorded in each stream's header): the brief
//! flag of the chosen format, the Event nesting limit, and the local UTC offset of the
//! Normal and Perf times of day. [`TextOptions`] overrides them.

use std::io::{self, BufWriter, Read, Write};

use tracing_trace2_event::EventFormat;
use tracing_trace2_normal::NormalFormat;
use tracing_trace2_perf::PerfFormat;

use crate::decode::{self, DecodeOptions, DecodeReport, StreamInfo};
use crate::record::{Format, Record};

/// The text format to decode to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextFormat {
    /// `GIT_TRACE2`: the terse stream.
    Normal,
    /// `GIT_TRACE2_PERF`: the column table.
    Perf,
    /// `GIT_TRACE2_EVENT`: JSON lines.
    Event,
}

/// How to decode to text.
#[derive(Clone, Debug)]
pub struct TextOptions {
    format: TextFormat,
    brief: Option<bool>,
    event_nesting: Option<u32>,
    utc_offset: Option<i32>,
    decode: DecodeOptions,
}

impl TextOptions {
    /// `format`, with every setting the writer's.
    pub fn new(format: TextFormat) -> Self {
        TextOptions {
            format,
            brief: None,
            event_nesting: None,
            utc_offset: None,
            decode: DecodeOptions::default(),
        }
    }

    /// Brief lines (or not), whatever the writer's text target did.
    pub fn with_brief(mut self, brief: bool) -> Self {
        self.brief = Some(brief);
        self
    }

    /// The Event nesting limit (`GIT_TRACE2_EVENT_NESTING`; 0 means git's default, 2).
    pub fn with_event_nesting(mut self, nesting: u32) -> Self {
        self.event_nesting = Some(nesting);
        self
    }

    /// Normal and Perf times of day at this offset (seconds east of UTC) rather than the
    /// writer's.
    pub fn with_utc_offset(mut self, seconds_east: i32) -> Self {
        self.utc_offset = Some(seconds_east);
        self
    }

    /// The decoder's own options (its merge window).
    pub fn with_decode_options(mut self, options: DecodeOptions) -> Self {
        self.decode = options;
        self
    }

    /// The formatter for `stream` at UTC offset `offset`.
    fn formatter(&self, stream: &StreamInfo, offset: i32) -> Box<dyn Format> {
        let d = stream.header.defaults;
        let offset = self.utc_offset.unwrap_or(offset);
        match self.format {
            TextFormat::Normal => Box::new(
                NormalFormat::new()
                    .with_brief(self.brief.unwrap_or(d.normal_brief))
                    .with_utc_offset(offset),
            ),
            TextFormat::Perf => Box::new(
                PerfFormat::new()
                    .with_brief(self.brief.unwrap_or(d.perf_brief))
                    .with_utc_offset(offset),
            ),
            TextFormat::Event => Box::new(
                EventFormat::new()
                    .with_brief(self.brief.unwrap_or(d.event_brief))
                    .with_max_nesting(self.event_nesting.unwrap_or(d.event_nesting)),
            ),
        }
    }
}

/// Decodes `input` to the text `options` asks for and writes it to `output`.
///
/// Returns the report of what was decoded; an error is a failed read or write only
/// (damaged input is skipped and reported).
pub fn decode_to_text(
    input: impl Read,
    output: impl Write,
    options: &TextOptions,
) -> io::Result<DecodeReport> {
    let mut out = BufWriter::with_capacity(64 << 10, output);
    // One formatter per stream, rebuilt when its UTC offset changes.
    let mut formatters: Vec<Option<(i32, Box<dyn Format>)>> = Vec::new();
    let mut line = Vec::with_capacity(512);
    let mut failed: Option<io::Error> = None;
    let report = decode::decode(input, &options.decode, |stream, record: &Record<'_>| {
        if failed.is_some() {
            return;
        }
        if formatters.len() <= stream.index {
            formatters.resize_with(stream.index + 1, || None);
        }
        let offset = stream.utc_offset_at(record.time.t_abs_us);
        let slot = &mut formatters[stream.index];
        if slot.as_ref().is_none_or(|(o, _)| *o != offset) {
            *slot = Some((offset, options.formatter(stream, offset)));
        }
        if let Some((_, format)) = slot {
            line.clear();
            format.format(record, &mut line);
            if let Err(err) = out.write_all(&line) {
                failed = Some(err);
            }
        }
    })?;
    if let Some(err) = failed {
        return Err(err);
    }
    out.flush()?;
    Ok(report)
}

/// Decodes `input` to Event JSON lines with every region and datum (no nesting limit)
/// and no brief mode: the form trace2receiver and other Event consumers take.
pub fn decode_to_event_json(input: impl Read, output: impl Write) -> io::Result<DecodeReport> {
    let options = TextOptions::new(TextFormat::Event)
        .with_brief(false)
        .with_event_nesting(u32::MAX);
    decode_to_text(input, output, &options)
}
