//! The Trace2 Perf target of `tracing-trace2`.
//!
//! Git's Perf stream (`GIT_TRACE2_PERF`) writes every Trace2 event as one line of fixed,
//! `|`-separated columns: local time, `file:line`, process depth, thread, event name,
//! repository, absolute and relative elapsed seconds, category, then the payload
//! indented by two dots per open region. [`PerfFormat`] renders a
//! [`tracing_trace2_record::Record`] into exactly those bytes, as git 2.47.3 writes them.
//!
//! The formatter is pure: it reads no clock and no environment. Time, thread, depth and
//! region depth all come with the record, and the UTC offset of the time column is given
//! once when the formatter is built.
//!
//! ```
//! use tracing_trace2_record::{Callsite, Trace2Event, Format, Record, Timestamp};
//! use tracing_trace2_perf::PerfFormat;
//!
//! let record = Record {
//!     event: Trace2Event::Start { argv: &["git", "version"] },
//!     time: Timestamp { wall_us: 0, t_abs_us: 363 },
//!     sid: "20261121T232137.816920Z-H0a7c9cdf-P00002a1e",
//!     depth: 0,
//!     thread: "main",
//!     callsite: Callsite { file: Some("common-main.c"), line: 58 },
//!     open_regions: 0,
//! };
//! let mut line = Vec::new();
//! // The expected line is the `start` line of git's own capture `version-brief.perf`.
//! PerfFormat::new().with_brief(true).format(&record, &mut line);
//! assert_eq!(
//!     line,
//!     b"d0 | main                     | start        |     |  0.000363 |           |              | git version\n"
//! );
//! ```

#![forbid(unsafe_code)]

mod format;

pub use format::PerfFormat;

/// The README's examples, run as doctests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
