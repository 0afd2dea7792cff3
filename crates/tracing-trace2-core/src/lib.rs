//! The Trace2 model behind `tracing-trace2`.
//!
//! This crate maps `tracing` spans to Trace2 regions and `tracing` events to Trace2
//! messages, and keeps what Git's Trace2 keeps per process and per thread: the session
//! id, the process clock, thread names and region stacks. It formats nothing itself: the
//! format crates (`tracing-trace2-normal`, `-perf`, `-event`) implement [`Format`], and
//! [`Trace2Layer`] hands each of them one [`Record`] per Trace2 call.

pub mod dst;
pub mod record;
pub mod sink;
pub mod text;

pub use record::{Callsite, ChildInfo, Event, Format, Record, RegionInfo, Timestamp, TimerInfo};
pub use sink::{MemorySink, NullSink, Sink};
