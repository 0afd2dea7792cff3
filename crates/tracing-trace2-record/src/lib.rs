//! The Trace2 record: what one Trace2 call is, before it becomes bytes.
//!
//! This is the lowest floor of `tracing-trace2`. It knows nothing of `tracing` and does no
//! I/O: a [`Record`] holds one [`Trace2Event`] of the Trace2 [`catalogue`] (every kind declared
//! once, with its fields, Event JSON keys and wire types) with its clock reading,
//! session, thread and callsite; a [`Format`] turns a record into the bytes of one line
//! (the Normal, Perf and Event crates implement it); [`codec`] encodes records compactly
//! and replays them, which is how the background writer and the binary target hand records
//! across threads and files to the very same formatters; [`text`] holds the primitives
//! those formatters share (numbers, times, quoting, JSON, and the append cursor, the main
//! `unsafe` code of the crate; the other is the codec's replay of records it encoded
//! itself without the UTF-8 check, `codec::Replayer::replay_encoded`).
//!
//! ```
//! use tracing_trace2_record::{Callsite, Trace2Event, Format, Record, Timestamp};
//!
//! /// A toy format: the event name and `t_abs`.
//! struct Names;
//! impl Format for Names {
//!     fn format(&self, record: &Record<'_>, out: &mut Vec<u8>) {
//!         out.extend_from_slice(record.event.name().as_bytes());
//!         out.push(b' ');
//!         tracing_trace2_record::text::push_seconds(out, record.time.t_abs_us);
//!         out.push(b'\n');
//!     }
//! }
//!
//! let record = Record {
//!     event: Trace2Event::Exit { code: 0 },
//!     time: Timestamp { wall_us: 1_795_303_297_817_165, t_abs_us: 563 },
//!     sid: "20261121T232137.816920Z-H0a7c9cdf-P00002a1e",
//!     depth: 0,
//!     thread: "main",
//!     callsite: Callsite { file: Some("src/main.rs"), line: 42 },
//!     open_regions: 0,
//! };
//! let mut line = Vec::new();
//! Names.format(&record, &mut line);
//! assert_eq!(line, b"exit 0.000563\n");
//!
//! // The same record, encoded and replayed.
//! let mut encoded = Vec::new();
//! tracing_trace2_record::codec::encode(&record, &mut encoded);
//! let mut replayer = tracing_trace2_record::codec::Replayer::default();
//! let mut again = Vec::new();
//! replayer.replay(&encoded, |r| Names.format(r, &mut again)).unwrap();
//! assert_eq!(again, line);
//! ```

#![deny(unsafe_code)]

pub mod catalogue;
pub mod codec;
mod record;
pub mod text;

pub use catalogue::{CATALOGUE, Field, FieldType, FieldValue, Kind, KindSpec};
pub use record::{
    Callsite, ChildInfo, Format, Record, RegionInfo, TimerInfo, Timestamp, Trace2Event,
};

/// The README's examples, run as doctests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
