//! The API wire: what a typed Trace2 call of [`crate::api`] carries to the Trace2 layer.
//!
//! A call is an [`ApiCall`] value that `api` hands straight to the
//! [`crate::Trace2Layer`] of the thread's current `tracing` dispatcher (found with `Dispatch::downcast_ref`, which
//! sees through `Layered`, `Filtered`, `Option` and boxed layers). It is never a
//! `tracing` event: no filter of the program (a global `EnvFilter("warn")`, a
//! per-layer filter) can drop the process lifecycle, and no other layer (`fmt`, an
//! OpenTelemetry exporter) sees it. Events of other crates that happen to use the
//! target `trace2` are ordinary events.
//!
//! The wire holds values only and imports no layer: the layer reads these types, and
//! `api` (above the layer) does the sending.

use std::panic::Location;

use tracing_trace2_record::{Callsite, Trace2Event};

/// One typed Trace2 call.
#[derive(Debug)]
pub(crate) enum ApiCall<'a> {
    Version {
        exe: &'a str,
    },
    Start {
        argv: &'a [&'a str],
    },
    CmdName {
        name: &'a str,
        hierarchy: &'a str,
    },
    DefParam {
        scope: &'a str,
        param: &'a str,
        value: Option<&'a str>,
    },
    RegionEnter(ApiRegion<'a>),
    RegionLeave(ApiRegion<'a>),
    Printf {
        msg: &'a str,
    },
    Error {
        msg: &'a str,
        fmt: &'a str,
    },
    Data {
        category: &'a str,
        key: &'a str,
        value: &'a str,
        repo: Option<i64>,
    },
    DataJson {
        category: &'a str,
        key: &'a str,
        json: &'a str,
        repo: Option<i64>,
    },
    ChildStart(ApiChild<'a>),
    ChildExit {
        child_id: u64,
        pid: i64,
        code: i64,
        elapsed_us: u64,
    },
    ChildReady {
        child_id: u64,
        pid: i64,
        ready: &'a str,
        elapsed_us: u64,
    },
    Exec {
        exec_id: u64,
        exe: Option<&'a str>,
        argv: &'a [&'a str],
    },
    ExecResult {
        exec_id: u64,
        code: i64,
        err: &'a str,
    },
    ThreadStart {
        name: &'a str,
    },
    ThreadExit,
    /// Every other lane ends; only the calling thread writes from then on.
    EndThreads,
    Timer(ApiTimer<'a>),
    Counter {
        per_thread: bool,
        category: &'a str,
        name: &'a str,
        value: u64,
    },
    Exit {
        code: i32,
    },
    Atexit {
        code: i32,
    },
    Signal {
        signo: i32,
    },
    /// A call the layer writes as its record's event, unchanged: every kind that needs
    /// no handling of its own (a new one is a catalogue row and an API function).
    Plain(Trace2Event<'a>),
}

/// A region opened or closed without a span ([`crate::api::region_enter`]).
#[derive(Debug)]
pub(crate) struct ApiRegion<'a> {
    pub category: &'a str,
    pub label: &'a str,
    pub msg: Option<&'a str>,
    pub repo: Option<i64>,
}

/// A `child_start`; `argv` is already redacted.
#[derive(Debug)]
pub(crate) struct ApiChild<'a> {
    pub child_id: u64,
    pub class: &'a str,
    pub hook_name: &'a str,
    pub cd: &'a str,
    pub use_shell: bool,
    pub is_git: bool,
    pub argv: &'a [&'a str],
}

/// A `timer` or `th_timer`.
#[derive(Debug)]
pub(crate) struct ApiTimer<'a> {
    pub per_thread: bool,
    pub category: &'a str,
    pub name: &'a str,
    pub intervals: u64,
    pub total_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
}

/// Where a call reports itself from: the caller's location, or an explicit one (`None`:
/// no file:line at all).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Origin<'a> {
    Caller(&'static Location<'static>),
    At(Option<&'a str>, u32),
}

impl<'a> Origin<'a> {
    /// The file:line the call's line names (a caller's path made relative, as every
    /// call site is).
    pub(crate) fn callsite(&self) -> Callsite<'a> {
        match *self {
            Origin::Caller(loc) => Callsite {
                file: Some(crate::callsite::relative_path(loc.file())),
                line: loc.line(),
            },
            Origin::At(file, line) => Callsite {
                file: file.map(crate::callsite::relative_path),
                line,
            },
        }
    }
}
