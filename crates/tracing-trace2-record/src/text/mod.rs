//! Formatting primitives shared by the Normal, Perf and Event formatters.
//!
//! Every function appends to a `Vec<u8>` and allocates nothing beyond growing it. Small
//! numbers are written from a table of digit pairs, larger ones with `itoa`; elapsed
//! times are whole microseconds, printed as seconds with six decimals straight from the
//! integer (no floating point involved).
//!
//! The `push_*` functions each take the vector; [`Appender`] writes the same texts for
//! a formatter that puts many small pieces on one line, at a fraction of the cost per
//! piece.
//!
//! The hot helpers are inlined by force only in optimized builds
//! (`cfg_attr(not(debug_assertions), inline(always))`): an unoptimized build gives every
//! inlined copy's temporaries stack slots of their own, which made a formatter's frame
//! hundreds of KiB and overflowed threads with small stacks.

mod appender;
mod json;
mod numbers;
mod quote;
mod same;
mod time;

pub use appender::{Appender, copy_short};
pub use json::{compact_json, push_json_str};
pub use numbers::{
    digits6, pair, push_i64, push_seconds, push_seconds_9, push_timer_seconds, push_u64,
};
pub use quote::{pad_to, push_cut_padded, push_padded, push_quoted, push_quoted_list};
pub use same::{same_bytes, same_long_bytes};
pub use time::{
    DateTime, micros_digits, push_sid_datetime, push_time_of_day, push_utc_datetime,
    utc_datetime_text, utc_second,
};

/// The `N` bytes of `src` from `at` (the caller knows they are there).
#[cfg_attr(not(debug_assertions), inline(always))]
fn chunk<const N: usize>(src: &[u8], at: usize) -> [u8; N] {
    let mut bytes = [0; N];
    bytes.copy_from_slice(&src[at..at + N]);
    bytes
}

#[cfg(test)]
mod tests;
