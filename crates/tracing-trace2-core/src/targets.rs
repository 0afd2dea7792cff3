//! The targets of one layer and the one way a record reaches them: format the record for
//! every enabled target, then write each line with one call to its target's sink, and
//! disable a target whose write fails, as git does.
//!
//! The layer runs this on the traced thread (direct writing) or hands encoded records to
//! the deferred writer, whose worker runs the very same code after decoding them
//! (`background/replay.rs`), so both paths write the same bytes and fail the same way.
//!
//! The worker gathers the lines of targets whose sink takes batches (files, see
//! [`Sink::batch_limit`]) into [`Batches`] and writes each target's lines with one
//! `write` per batch: when a batch would outgrow the sink's limit, and when the worker has
//! handled what it took from the queue. Targets that take one line per call (sockets,
//! pipes) are written line by line as they come. A failed batch disables its target as a
//! failed line does; its `error` line names the thread of the batch's first record.

use std::any::Any;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::clock;
use crate::session::Session;
use crate::thread;
use tracing_trace2_dst::Sink;
use tracing_trace2_record::{Callsite, Format, Record, RegionInfo, Timestamp, Trace2Event};

/// One output of the layer: a formatter, the sink its lines go to, and its state.
pub struct Target {
    name: &'static str,
    format: Box<dyn Format>,
    sink: Box<dyn Sink>,
    enabled: AtomicBool,
    dst_debug: bool,
    too_many_files: bool,
    /// The sink's [`Sink::batch_limit`], read once.
    batch_limit: usize,
    /// Bit `n - 1` set: the format writes a region that opens at nesting `n` (1 to 64),
    /// asked once ([`Format`] is pure: its answer depends on the record alone).
    writes_regions: u64,
}

/// `sink` as the layer keeps it. A sink that already is a `Box<dyn Sink>` (what
/// `tracing_trace2_dst::open` hands out, so every target the facade builds from git's
/// settings) is kept as it is: boxed again, each line would go through two dynamic calls
/// to reach the file (about 10 instructions per line).
fn boxed_sink<S: Sink>(sink: S) -> Box<dyn Sink> {
    let any: Box<dyn Any + Send + Sync> = Box::new(sink);
    match any.downcast::<Box<dyn Sink>>() {
        Ok(boxed) => *boxed,
        // The same allocation, as the sink's own type.
        Err(any) => match any.downcast::<S>() {
            Ok(sink) => sink,
            Err(_) => unreachable!("a box made from an `S` holds an `S`"),
        },
    }
}

/// The deepest nesting [`Target::writes_regions`] answers for.
const REGION_NESTINGS: u32 = u64::BITS;

impl Target {
    /// A target named `name` (the environment variable that enables it, e.g.
    /// `GIT_TRACE2_EVENT`, used in messages) writing `format`'s lines to `sink`.
    pub fn new(name: &'static str, format: impl Format, sink: impl Sink) -> Target {
        let batch_limit = sink.batch_limit();
        let writes_regions = (1..=REGION_NESTINGS)
            .filter(|&nesting| format.writes(&region_probe(nesting)))
            .fold(0, |bits, nesting| bits | 1 << (nesting - 1));
        Target {
            name,
            format: Box::new(format),
            sink: boxed_sink(sink),
            enabled: AtomicBool::new(true),
            dst_debug: false,
            too_many_files: false,
            batch_limit,
            writes_regions,
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

/// The record a target is asked about to learn whether it writes a region that opens
/// at `nesting` (its fields are formatted only then).
fn region_probe(nesting: u32) -> Record<'static> {
    Record {
        event: Trace2Event::RegionEnter {
            region: RegionInfo::default(),
            nesting,
        },
        time: Timestamp::default(),
        sid: "",
        depth: 0,
        thread: "",
        callsite: Callsite::default(),
        open_regions: nesting.saturating_sub(1),
    }
}

/// Formatted lines waiting to be written: `(target index, end offset)` per line.
#[derive(Default)]
pub(crate) struct Lines {
    pub buf: Vec<u8>,
    pub ends: Vec<(usize, usize)>,
}

/// The room a thread's line buffer takes with its first line: a few lines of every
/// target (an Event line is about 200 bytes). Grown from nothing, the first lines of a
/// short process went through about eight reallocations.
const FIRST_LINES_ROOM: usize = 1024;

impl Lines {
    pub fn clear(&mut self) {
        self.buf.clear();
        self.ends.clear();
    }

    /// Gives an empty buffer the room of its first lines at once.
    #[cold]
    #[inline(never)]
    fn reserve_first(&mut self) {
        self.buf.reserve(FIRST_LINES_ROOM);
        self.ends.reserve(8);
    }
}

/// Lines waiting to be written in batches, per target (the deferred writer's worker).
#[derive(Default)]
pub(crate) struct Batches {
    /// Indexed like the targets; empty for targets that are not batched.
    lines: Vec<Vec<u8>>,
    /// Whether any batch holds a line.
    pending: bool,
    /// The record of the first line waiting: the context of an `error` line about a
    /// failed batch.
    first: BatchContext,
}

/// What an `error` line takes from the record it follows, owned.
#[derive(Default)]
struct BatchContext {
    sid: String,
    depth: u32,
    thread: String,
    open_regions: u32,
}

impl BatchContext {
    fn set(&mut self, record: &Record<'_>) {
        self.sid.clear();
        self.sid.push_str(record.sid);
        self.thread.clear();
        self.thread.push_str(record.thread);
        self.depth = record.depth;
        self.open_regions = record.open_regions;
    }

    fn record(&self) -> Record<'_> {
        Record {
            event: Trace2Event::ThreadStart,
            time: Default::default(),
            sid: &self.sid,
            depth: self.depth,
            thread: &self.thread,
            callsite: Callsite::default(),
            open_regions: self.open_regions,
        }
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
            && (target.too_many_files || !matches!(record.event, Trace2Event::TooManyFiles))
    }

    /// Whether any target may write a line for `record` (see [`Format::writes`]).
    pub fn any_writes(&self, record: &Record<'_>) -> bool {
        self.list
            .iter()
            .any(|target| Self::takes(target, record) && target.format.writes(record))
    }

    /// Whether any target writes a region that opens at `nesting` (a span's fields
    /// are formatted only then): each enabled target's answer, asked when it was made
    /// (up to [`REGION_NESTINGS`]; deeper, asked now).
    pub fn any_writes_region(&self, nesting: u32) -> bool {
        match nesting.checked_sub(1) {
            Some(bit) if bit < REGION_NESTINGS => self
                .list
                .iter()
                .any(|target| target.is_enabled() && target.writes_regions & 1 << bit != 0),
            _ => self.any_writes(&region_probe(nesting)),
        }
    }

    /// Appends the line of every enabled target for `record` (`too_many_files` only for
    /// the targets that asked for it).
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn format(&self, record: &Record<'_>, lines: &mut Lines) {
        if lines.buf.capacity() == 0 {
            lines.reserve_first();
        }
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
        self.write_with(lines, || context.copied());
    }

    /// [`Self::write`] with the context made only when a write fails (building it for
    /// every line cost more than the rest of the call).
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn write_with<'r>(&self, lines: &Lines, context: impl Fn() -> Option<Record<'r>>) {
        // The usual case: one target, one line.
        if let [(index, end)] = *lines.ends {
            let target = &self.list[index];
            if target.is_enabled()
                && let Err(err) = target.sink.write_line(&lines.buf[..end])
            {
                self.write_failed(index, err, &context);
            }
            return;
        }
        self.write_each(lines, &context);
    }

    /// [`Self::write_with`] for several lines (or none), out of line.
    #[inline(never)]
    fn write_each<'r>(&self, lines: &Lines, context: &impl Fn() -> Option<Record<'r>>) {
        let mut start = 0;
        for &(index, end) in &lines.ends {
            let target = &self.list[index];
            if target.is_enabled()
                && let Err(err) = target.sink.write_line(&lines.buf[start..end])
            {
                self.write_failed(index, err, context);
            }
            start = end;
        }
    }

    /// A failed write of [`Self::write_with`], out of line: the context and the error's
    /// drop stay off the path of every line that is written.
    #[cold]
    #[inline(never)]
    fn write_failed<'r>(
        &self,
        index: usize,
        err: io::Error,
        context: &impl Fn() -> Option<Record<'r>>,
    ) {
        self.disable(index, &err, context().as_ref());
    }

    /// [`format`](Self::format) and [`write`](Self::write) for the worker: a batching
    /// target's line is formatted straight into its batch (not copied there from a line
    /// buffer), and every batch is written first when the line takes its own past the
    /// sink's limit; other targets' lines are formatted into `line` and written at
    /// once. Targets are visited in order, each formatted after the lines before it were
    /// written or batched, as `format` then `write` would. Before a failure is
    /// reported the batches are written, so that the `error` line follows every line
    /// traced before it.
    pub fn format_batched(&self, record: &Record<'_>, line: &mut Vec<u8>, batches: &mut Batches) {
        if batches.lines.len() < self.list.len() {
            batches.lines.resize_with(self.list.len(), Vec::new);
        }
        for (index, target) in self.list.iter().enumerate() {
            if !Self::takes(target, record) {
                continue;
            }
            let limit = target.batch_limit;
            if limit == 0 {
                line.clear();
                target.format.format(record, line);
                if !line.is_empty()
                    && let Err(err) = target.sink.write_line(line)
                {
                    self.write_batches(batches);
                    self.disable(index, &err, Some(record));
                }
                continue;
            }
            let start = batches.lines[index].len();
            target.format.format(record, &mut batches.lines[index]);
            let end = batches.lines[index].len();
            if end == start {
                continue;
            }
            if end > limit && start > 0 {
                // The line opens the next batch: the batches go out without it. Once
                // per batch, so the copy aside costs nothing per line.
                line.clear();
                line.extend_from_slice(&batches.lines[index][start..]);
                batches.lines[index].truncate(start);
                self.write_batches(batches);
                // A line longer than the limit goes alone, whole.
                batches.lines[index].extend_from_slice(line);
            }
            if !batches.pending {
                batches.first.set(record);
                batches.pending = true;
            }
        }
    }

    /// Writes every waiting batch, one `write_lines` call per target, in the targets'
    /// order; then disables the targets whose batch failed.
    pub fn write_batches(&self, batches: &mut Batches) {
        if !std::mem::take(&mut batches.pending) {
            return;
        }
        // Allocates only when a batch fails.
        let mut failed = Vec::new();
        for (index, batch) in batches.lines.iter_mut().enumerate() {
            if batch.is_empty() {
                continue;
            }
            let target = &self.list[index];
            if target.is_enabled()
                && let Err(err) = target.sink.write_lines(batch)
            {
                failed.push((index, err));
            }
            batch.clear();
        }
        // Reported once every batch is out, so that an `error` line follows them.
        for (index, err) in failed {
            self.disable(index, &err, Some(&batches.first.record()));
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
        let error = Trace2Event::Error {
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

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_trace2_dst::NullSink;

    /// Writes regions up to `max` deep, and everything else.
    struct UpTo(u32);

    impl Format for UpTo {
        fn format(&self, _record: &Record<'_>, _out: &mut Vec<u8>) {}

        fn writes(&self, record: &Record<'_>) -> bool {
            record.event.nesting().is_none_or(|n| n <= self.0)
        }
    }

    fn targets(list: Vec<Target>) -> Targets {
        Targets {
            list,
            session: Session::global(),
        }
    }

    /// The answers asked once when a target is made are those the target gives when
    /// asked each time, at every nesting, for enabled targets only.
    #[test]
    fn region_nestings_are_answered_as_the_formats_answer() {
        let targets = targets(vec![
            Target::new("SHALLOW", UpTo(2), NullSink),
            Target::new("DEEP", UpTo(70), NullSink),
        ]);
        let asked = |targets: &Targets, nesting| targets.any_writes(&region_probe(nesting));
        for nesting in 0..=80 {
            assert_eq!(
                targets.any_writes_region(nesting),
                asked(&targets, nesting),
                "nesting {nesting}"
            );
        }
        assert!(targets.any_writes_region(64) && targets.any_writes_region(70));
        assert!(!targets.any_writes_region(71));
        // The deep target disabled (a failed write): only the shallow one answers.
        targets.list[1].enabled.store(false, Ordering::Relaxed);
        for nesting in 0..=80 {
            assert_eq!(
                targets.any_writes_region(nesting),
                asked(&targets, nesting),
                "nesting {nesting}"
            );
        }
        assert!(targets.any_writes_region(2) && !targets.any_writes_region(3));
    }
}
