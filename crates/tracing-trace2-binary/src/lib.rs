//! The binary Trace2 target of `tracing-trace2` ("t2b"): every Trace2 event recorded in
//! about ten bytes and a few tens of nanoseconds, and a decoder that turns the frames
//! back into Normal, Perf and Event text through the same formatters: each thread's lines
//! byte for byte, the lines of different threads merged by time (the text targets have
//! them in the order the threads wrote, which the format does not record).
//!
//! ```
//! use tracing_trace2_binary::{BinaryWriter, TextFormat, TextOptions, decode_to_text};
//! use tracing_trace2_dst::MemorySink;
//! use tracing_trace2_record::{Callsite, Trace2Event, Record, Timestamp};
//!
//! let sink = MemorySink::new();
//! let writer = BinaryWriter::builder()
//!     // Tick 0 of this process: a record's wall time is the anchor plus its t_abs.
//!     .with_anchor_wall_us(1_795_303_297_816_635)
//!     .with_utc_offset(0)
//!     .with_exit_handler(false)
//!     .build(sink.clone());
//! let record = Record {
//!     event: Trace2Event::CmdName { name: "version", hierarchy: "version" },
//!     time: Timestamp { wall_us: 1_795_303_297_817_135, t_abs_us: 500 },
//!     sid: "20261121T232137.816920Z-H1c4a9a2f-P00002b68",
//!     depth: 0,
//!     thread: "main",
//!     callsite: Callsite { file: Some("git.c"), line: 480 },
//!     open_regions: 0,
//! };
//! writer.record(&record); // into the thread's batch: no write yet
//! writer.finish(); // every batch, then the END frame
//!
//! let mut text = Vec::new();
//! let options = TextOptions::new(TextFormat::Normal);
//! let report = decode_to_text(&sink.contents()[..], &mut text, &options)?;
//! assert_eq!(
//!     text,
//!     b"23:21:37.817135 git.c:480                         cmd_name version (version)\n"
//! );
//! assert!(report.is_complete());
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Writing
//!
//! [`BinaryWriter::record`] takes the same [`Record`](tracing_trace2_record::Record) the
//! text targets get (one clock reading for all of them) and encodes it into the
//! calling thread's batch: no system call, no lock, no allocation per event. Batches
//! are written whole, one `write` per frame (to a regular file the stream's header goes
//! with its first batch, and the END frame with the last batch), when full, after the
//! flush interval (a thread that stopped recording has its batch written by the
//! writer's idle flusher), at lifecycle events (`exit`, `atexit`, `signal`, `error`,
//! `child_start`, `exec`, `thread_exit`), when the thread ends and at process exit; see
//! [`writer`].
//! [`dest::open`] opens a `TRACING_TRACE2_BINARY` value; [`RecordingFormat`] and
//! [`FlushingSink`] make the writer a target of the core layer (the facade's
//! `targets::binary` pairs them). The crate stands on the record crate, the formats and
//! the destinations, not on the core: the `trace2` tool reads traces without compiling
//! `tracing`.
//!
//! # Flight recorder
//!
//! [`flight::FlightRecorder`] keeps the batches in a bounded ring in memory instead of
//! writing them, and writes the window as an ordinary t2b file when a trigger fires (a
//! non-zero exit, a panic, `SIGUSR2`, a call; opt-in an `error` or a slow region); see
//! [`flight`] and the repository's `docs/flight-recorder.md`.
//!
//! # Reading
//!
//! [`decode()`] scans frames (checking each one's CRC and finding the next after
//! damage), puts each thread's batches back in order, merges the threads in time order
//! and hands every event to a callback as a `Record`; [`decode_to_text`] and
//! [`decode_to_event_json`] pass them to the formatters. Damaged input (cut short, bits
//! flipped, batches lost or shuffled, several processes' frames in one file) yields
//! every intact event and no invented one, and the [`DecodeReport`] says what was
//! skipped. A frame a kill cut (it stops at a page end of the file, where the kernel
//! stops a killed process's `write`, with the end of the input, an intact frame or
//! another process's cut frame after it) is that process's kill, counted apart
//! ([`DecodeReport::cut_frames`], per stream and per thread), not damage.
//!
//! # Format
//!
//! Frames ([`frame`]) hold a stream header, batches of records, clock changes and an
//! end marker ([`header`]); the records of a batch follow the kind table of [`spec`].
//! The format is specified in the repository's `docs/binary-format.md` (for readers in
//! other languages too); `docs/architecture.md` gives the design and where it departs
//! from its first draft, and why.

// The record model; the clock the writer anchors to is the destinations crate's.
pub(crate) use tracing_trace2_record as record;

pub mod decode;
pub mod dest;
mod encode;
pub mod flight;
pub mod frame;
pub mod header;
mod intern;
mod slots;
pub mod spec;
mod target;
mod text;
pub mod varint;
pub mod writer;

pub use decode::{DecodeOptions, DecodeReport, Decoder, StreamInfo, decode};
pub use dest::{DestSettings, Destination, ENV_NAME};
pub use encode::{DEFAULT_BATCH_SIZE, MAX_BATCH_SIZE, MIN_BATCH_SIZE};
pub use flight::{
    FlightFormat, FlightRecorder, FlightRecorderBuilder, FlightStats, NestedFlightFormat, Trigger,
};
pub use header::TextDefaults;
pub use target::{FlushingSink, NestedRecordingFormat, RecordingFormat};
pub use text::{TextFormat, TextOptions, decode_to_event_json, decode_to_text};
pub use writer::{BinaryWriter, BinaryWriterBuilder, DEFAULT_FLUSH_INTERVAL, WriterStats};

/// The README's example, run as a doctest so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
