//! The Trace2 Event target of `tracing-trace2`: one JSON object per line.
//!
//! [`EventFormat`] turns each [`Record`](tracing_trace2_record::Record) handed over by the
//! core layer into the line git 2.47's event target (`GIT_TRACE2_EVENT`) would write
//! for the same call: the same keys, in the same order, with the same number formats
//! (`"t_abs":0.000410`, `"evt":"4"`, integers unquoted, `data` values always strings).
//! Brief mode and the region nesting filter behave as git's `GIT_TRACE2_EVENT_BRIEF`
//! and `GIT_TRACE2_EVENT_NESTING` settings do.
//!
//! # Text encoding
//!
//! git escapes JSON strings byte by byte and copies bytes that are not valid UTF-8 into
//! the line unchanged, so a path or an argument holding such bytes yields a line that
//! is not valid UTF-8. Readers of the stream, Git's own `parse_events.perl` among them,
//! then refuse the line (or the whole file). Every string in a record here is a Rust
//! `&str`: where git would have written raw invalid bytes, our caller has already
//! replaced each invalid sequence with U+FFFD, and every line this crate writes is valid
//! UTF-8.
//!
//! # Example
//!
//! ```
//! use tracing_trace2_record::{Callsite, Trace2Event, Format, Record, Timestamp};
//! use tracing_trace2_event::EventFormat;
//!
//! let format = EventFormat::new().with_max_nesting(3);
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
//! format.format(&record, &mut line);
//! assert_eq!(
//!     String::from_utf8(line.clone()).unwrap(),
//!     "{\"event\":\"exit\",\"sid\":\"20261121T232137.816920Z-H0a7c9cdf-P00002a1e\",\
//!      \"thread\":\"main\",\"time\":\"2026-11-21T23:21:37.817165Z\",\
//!      \"file\":\"src/main.rs\",\"line\":42,\"t_abs\":0.000563,\"code\":0}\n"
//! );
//!
//! // And back: the reader gives the record the line was written from.
//! let read = tracing_trace2_event::read_line(std::str::from_utf8(&line).unwrap()).unwrap();
//! let mut list = Vec::new();
//! let again = read.record(&mut list).unwrap();
//! assert_eq!(again.time, record.time);
//! assert_eq!(again.callsite, record.callsite);
//! assert!(matches!(again.event, Trace2Event::Exit { code: 0 }));
//! ```
//!
//! # Reading
//!
//! [`read_line`] turns an Event line back into a `Record` (lent by an [`EventLine`] that borrows the line),
//! driven by the record crate's catalogue; a line of an unknown kind is an error
//! ([`read_any_line`] hands it over as an [`UnknownLine`] instead, for tools that pass
//! such lines along).

#![forbid(unsafe_code)]

mod format;
mod read;

pub use format::EventFormat;
pub use read::{AnyLine, EventLine, LineHeader, ReadError, UnknownLine, read_any_line, read_line};

#[cfg(test)]
mod tests;

/// The README's examples, run as doctests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
