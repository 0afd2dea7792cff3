//! Test helpers shared by the tests of the `tracing-trace2` crates (published only so that
//! those crates' packages build their own tests; no stability promise beyond that).
//!
//! * [`alloc`]: a global allocator that counts the calling thread's allocations, for
//!   the "allocates nothing in steady state" tests.
//! * [`random`]: a deterministic generator and random [`Record`]s of every event kind,
//!   with the texts and numbers the formats must escape, quote, pad or cut.
//! * [`git`]: the real `git` binary the interop tests compare against.
//! * [`child`]: one test run again in a child process, to assert what it writes to fd 2.
//! * `fork` (Unix): a child forked while another thread holds a lock, for the tests of
//!   the `fork` handlers.
//!
//! [`Record`]: tracing_trace2_record::Record

// Test helpers: the generator's methods and the record inputs speak for themselves.
#![allow(missing_docs)]

pub mod alloc;
pub mod child;
#[cfg(unix)]
pub mod fork;
pub mod git;
pub mod random;
