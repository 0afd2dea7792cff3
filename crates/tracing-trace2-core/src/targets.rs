//! The targets of one layer and the one way a record reaches them: format the record for
//! every enabled target, then write each line with one call to its target's sink, and
//! disable a target whose write fails, as git does.
//!
//! The layer runs this on the traced thread (direct writing) or hands encoded records to
//! the deferred writer, whose worker runs the very same code after decoding them
//! (`background/replay.rs`), so both paths write the same bytes and fail the same way.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::clock;
use crate::session::Session;
use crate::thread;
use tracing_trace2_dst::Sink;
use tracing_trace2_record::{Callsite, Event, Format, Record};

/// One output of the layer: a formatter, the sink its lines go to, and its state.
pub struct Target {
    name: &'static str,
    format: Box<dyn Format>,
    sink: Box<dyn Sink>,
    enabled: AtomicBool,
    dst_debug: bool,
    too_many_files: bool,
}

impl Target {
    /// A target named `name` (the environment variable that enables it, e.g.
    /// `GIT_TRACE2_EVENT`, used in messages) writing `format`'s lines to `sink`.
    pub fn new(name: &'static str, format: impl Format, sink: impl Sink) -> Target {
        Target {
            name,
            format: Box::new(format),
            sink: Box::new(sink),
            enabled: AtomicBool::new(true),
            dst_debug: false,
            too_many_files: false,
        }
    }

    /// Print a warning when a write fails and the target is disabled
    /// (`GIT_TRACE2_DST_DEBUG`); the other targets then record it as an `error`.
    pub fn with_dst_debug(mut self, dst_debug: bool) -> Target {
        self.dst_debug = dst_debug;
        self
    }

    /// Write a `too_many_files` line right after `version` (the Event target, when its
    /// destination is the `git-trace2-discard` sentinel).
    pub fn with_too_many_files(mut self, too_many_files: bool) -> Target {
        self.too_many_files = too_many_files;
        self
    }

    /// The name used in messages.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether the target still writes (it is disabled after a failed write).
    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("name", &self.name)
            .field("enabled", &self.is_enabled())
            .finish_non_exhaustive()
    }
}

/// Formatted lines waiting to be written: `(target index, end offset)` per line.
#[derive(Default)]
pub(crate) struct Lines {
    pub buf: Vec<u8>,
    pub ends: Vec<(usize, usize)>,
}

impl Lines {
    pub fn clear(&mut self) {
        self.buf.clear();
        self.ends.clear();
    }
}

/// The targets of a layer, in the order they are visited (git's: normal, perf, event).
#[derive(Debug)]
pub(crate) struct Targets {
    pub list: Vec<Target>,
    /// Names the calling thread's session in the `error` line about a failed write.
    pub session: &'static Session,
}

impl Targets {
    /// Whether `target` takes `record` at all: it is enabled, and `too_many_files` goes
    /// only to the targets that asked for it.
    fn takes(target: &Target, record: &Record<'_>) -> bool {
        target.is_enabled()
            && (target.too_many_files || !matches!(record.event, Event::TooManyFiles))
    }

    /// Whether any target may write a line for `record` (see [`Format::writes`]).
    pub fn any_writes(&self, record: &Record<'_>) -> bool {
        self.list
            .iter()
            .any(|target| Self::takes(target, record) && target.format.writes(record))
    }

    /// Appends the line of every enabled target for `record` (`too_many_files` only for
    /// the targets that asked for it).
    pub fn format(&self, record: &Record<'_>, lines: &mut Lines) {
        for (index, target) in self.list.iter().enumerate() {
            if !Self::takes(target, record) {
                continue;
            }
            let start = lines.buf.len();
            target.format.format(record, &mut lines.buf);
            if lines.buf.len() > start {
                lines.ends.push((index, lines.buf.len()));
            }
        }
    }

    /// Writes each formatted line with one call to its target's sink. `context` is the
    /// record the lines belong to when the caller has it (it names the thread in the
    /// `error` line about a failed write); without it the calling thread's state is read.
    pub fn write(&self, lines: &Lines, context: Option<&Record<'_>>) {
        let mut start = 0;
        for &(index, end) in &lines.ends {
            let target = &self.list[index];
            if target.is_enabled()
                && let Err(err) = target.sink.write_line(&lines.buf[start..end])
            {
                self.disable(index, &err, context);
            }
            start = end;
        }
    }

    /// Disables a target whose write failed, as git does: for good, with a warning
    /// and an `error` line in the other targets when destination debugging is on. The
    /// error line is written at once, so when the very first write fails it precedes
    /// the other targets' `version` line, as in git (`dst-badfd.*`).
    fn disable(&self, index: usize, err: &io::Error, context: Option<&Record<'_>>) {
        let target = &self.list[index];
        if !target.enabled.swap(false, Ordering::Relaxed) || !target.dst_debug {
            return;
        }
        let message = tracing_trace2_dst::write_failed_message(target.name, err);
        tracing_trace2_dst::warning(&message);
        self.write_error(&message, "unable to write trace to '%s': %s", context);
    }

    /// Writes an `error` line of our own (a failed write, dropped lines) to every
    /// enabled target, in the context of `context` or else of the calling thread.
    pub fn write_error(&self, msg: &str, fmt: &str, context: Option<&Record<'_>>) {
        let error = Event::Error {
            msg: Some(msg),
            fmt: Some(fmt),
        };
        let now = clock::now();
        let mut lines = Lines::default();
        match context {
            Some(context) => {
                let record = Record {
                    event: error,
                    time: now,
                    callsite: Callsite::default(),
                    ..*context
                };
                self.format(&record, &mut lines);
            }
            None => {
                // Never blocks: a lane this thread holds is named by `context` instead.
                let lane = thread::base_lane(None, now.t_abs_us);
                if let Some(t) = lane.as_ref().and_then(|l| l.try_lock().ok()) {
                    let record = Record {
                        event: error,
                        time: now,
                        sid: self.session.sid(),
                        depth: self.session.depth(),
                        thread: &t.name,
                        callsite: Callsite::default(),
                        open_regions: t.depth(),
                    };
                    self.format(&record, &mut lines);
                }
            }
        }
        self.write(&lines, context);
    }

    /// Flushes every sink; returns the first error.
    pub fn flush(&self) -> io::Result<()> {
        let mut result = Ok(());
        for target in &self.list {
            let flushed = target.sink.flush();
            if result.is_ok() {
                result = flushed;
            }
        }
        result
    }
}
