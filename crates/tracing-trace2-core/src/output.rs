//! Where a layer's records go: formatted and written on the traced thread, or encoded
//! for the deferred writer's worker. The choice is made once, when the layer is built;
//! the layer then asks its [`Output`] to take each record and to write what it took.

use std::sync::Arc;

use tracing_trace2_record::{Record, Trace2Event};

use crate::background::queue::{Delivery, Queue};
use crate::background::replay::Replay;
use crate::background::{BackgroundGuard, BackgroundOptions};
use crate::targets::{Lines, Targets};

/// What one `tracing` callback produced, before it is written: formatted lines (direct
/// output) or encoded records (deferred output). Each thread keeps one and reuses it.
#[derive(Default)]
pub(crate) struct CallbackOutput {
    lines: Lines,
    encoded: EncodedRecords,
}

/// Records encoded for the deferred writer, back to back.
#[derive(Default)]
struct EncodedRecords {
    buf: Vec<u8>,
    records: u64,
    /// One of them is a lifecycle line, which a lossy writer never drops.
    keep: bool,
}

impl CallbackOutput {
    /// Nothing was taken since the last [`CallbackOutput::clear`].
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.lines.ends.is_empty() && self.encoded.records == 0
    }

    pub fn clear(&mut self) {
        self.lines.clear();
        self.encoded.buf.clear();
        self.encoded.records = 0;
        self.encoded.keep = false;
    }
}

/// Whether `event` is one of the lines that describe the process rather than its work
/// (`version`, `start`, the command and its parameters, `exec`, the timer and counter
/// totals, `exit`, `signal`, `atexit`): a lossy
/// background writer never drops these.
fn is_lifecycle(event: &Trace2Event<'_>) -> bool {
    !matches!(
        event,
        Trace2Event::RegionEnter { .. }
            | Trace2Event::RegionLeave { .. }
            | Trace2Event::Data { .. }
            | Trace2Event::DataJson { .. }
            | Trace2Event::Printf { .. }
            | Trace2Event::Error { .. }
            | Trace2Event::ChildStart(_)
            | Trace2Event::ChildExit { .. }
            | Trace2Event::ChildReady { .. }
            | Trace2Event::ThreadStart
            | Trace2Event::ThreadExit { .. }
    )
}

/// The output of a layer.
pub(crate) enum Output {
    /// Format every record for every target and write the lines on the traced thread.
    Direct(Arc<Targets>),
    /// Encode every record once; the queue's worker decodes, formats and writes.
    Deferred {
        targets: Arc<Targets>,
        queue: Arc<Queue>,
    },
}

impl Output {
    /// Direct output, or deferred output through a worker started now.
    pub fn new(targets: Targets, deferred: Option<&BackgroundOptions>) -> Output {
        let targets = Arc::new(targets);
        match deferred {
            None => Output::Direct(targets),
            Some(options) => {
                let replay = Arc::new(Replay::new(Arc::clone(&targets)));
                Output::Deferred {
                    queue: Queue::start(replay, options),
                    targets,
                }
            }
        }
    }

    pub fn targets(&self) -> &Targets {
        match self {
            Output::Direct(targets) | Output::Deferred { targets, .. } => targets,
        }
    }

    pub fn is_deferred(&self) -> bool {
        matches!(self, Output::Deferred { .. })
    }

    /// Takes `record` into `pending`: its lines, or its encoding.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn take(&self, record: &Record<'_>, pending: &mut CallbackOutput) {
        match self {
            Output::Direct(targets) => targets.format(record, &mut pending.lines),
            // A record no target shows is not worth encoding and queueing.
            Output::Deferred { targets, .. } if !targets.any_writes(record) => {}
            Output::Deferred { targets, .. } => {
                crate::background::replay::encode(record, targets, &mut pending.encoded.buf);
                pending.encoded.records += 1;
                pending.encoded.keep |= is_lifecycle(&record.event);
            }
        }
    }

    /// Writes what `pending` holds: each line with one call to its target's sink, or the
    /// encoded records as one message to the worker. `context` names the thread in an
    /// `error` line about a failed direct write while the thread's state is borrowed.
    #[inline]
    pub fn write(&self, pending: &CallbackOutput, context: Option<&Record<'_>>) {
        self.write_with(pending, || context.copied());
    }

    /// [`Self::write`] with the context made only if a direct write fails.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn write_with<'r>(
        &self,
        pending: &CallbackOutput,
        context: impl Fn() -> Option<Record<'r>>,
    ) {
        match self {
            Output::Direct(targets) => targets.write_with(&pending.lines, context),
            Output::Deferred { queue, .. } => Self::send(queue, &pending.encoded),
        }
    }

    /// Sends the encoded records to the deferred writer's worker as one message.
    #[inline(never)]
    fn send(queue: &Queue, encoded: &EncodedRecords) {
        if encoded.records > 0 {
            // The worker (or, after shutdown, this thread) handles failed writes.
            let delivery = if encoded.keep {
                Delivery::Keep
            } else {
                Delivery::MayDrop
            };
            let _ = queue.send(&encoded.buf, encoded.records, delivery);
        }
    }

    /// Flushes every sink; with a deferred writer, first waits until the worker has
    /// written every record sent before the call (and reported dropped ones).
    pub fn flush(&self) {
        let _ = match self {
            Output::Direct(targets) => targets.flush(),
            Output::Deferred { queue, .. } => queue.flush(true),
        };
    }

    /// A guard that shuts the deferred writer down; an empty one for direct output.
    pub fn guard(&self) -> BackgroundGuard {
        match self {
            Output::Direct(_) => BackgroundGuard::new(),
            Output::Deferred { queue, .. } => BackgroundGuard::of(Arc::clone(queue)),
        }
    }
}
