//! The Normal target of `tracing-trace2`: git's terse, human-oriented Trace2 stream.
//!
//! [`NormalFormat`] turns a [`Record`](tracing_trace2_record::Record) into the bytes git
//! 2.47.3 writes to `GIT_TRACE2`: the local time of day, the `file:line` of the call,
//! padding to byte 50, then a short payload such as `cmd_name status (status)` or
//! `exit elapsed:0.000563 code:0`. Brief mode keeps only the payload. Regions, data and
//! thread lifecycle events are not part of this stream and produce no bytes.
//!
//! The formatter is pure: it reads neither clocks nor the environment, and it allocates
//! nothing beyond growing the output buffer.
//!
//! ```
//! use tracing_trace2_record::{Callsite, Trace2Event, Format, Record, Timestamp};
//! use tracing_trace2_normal::NormalFormat;
//!
//! let record = Record {
//!     event: Trace2Event::CmdName { name: "version", hierarchy: "version" },
//!     // 2026-11-21T23:21:37.817135Z, process running for 0.5 ms.
//!     time: Timestamp { wall_us: 1_795_303_297_817_135, t_abs_us: 500 },
//!     sid: "20261121T232137.816920Z-H1c4a9a2f-P00002b68",
//!     depth: 0,
//!     thread: "main",
//!     callsite: Callsite { file: Some("git.c"), line: 480 },
//!     open_regions: 0,
//! };
//!
//! let mut line = Vec::new();
//! NormalFormat::new().format(&record, &mut line);
//! assert_eq!(
//!     line,
//!     b"23:21:37.817135 git.c:480                         cmd_name version (version)\n"
//! );
//!
//! let mut brief = Vec::new();
//! NormalFormat::new().with_brief(true).format(&record, &mut brief);
//! assert_eq!(brief, b"cmd_name version (version)\n");
//! ```

#![forbid(unsafe_code)]

mod format;

pub use format::NormalFormat;

/// The README's examples, run as doctests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
