//! The worker side of the deferred writer: it decodes the records the traced threads
//! encoded ([`tracing_trace2_record::codec`]) and runs them through the layer's targets, exactly as the
//! layer does for a direct writer (format for every enabled target in order, one
//! `write` per line, disable a target whose write fails).
//!
//! The data flow of a deferred layer is therefore
//! `record → encode → queue → worker: decode → format → sink`.

use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use crate::background::queue::Drain;
use crate::background::{DROP_REPORT_FMT, drop_report_message};
use crate::busy::Busy;
use crate::targets::{Lines, Targets};
use tracing_trace2_record::codec::Decoder;

/// Replays batches of encoded records into the targets.
pub(crate) struct Replay {
    targets: Arc<Targets>,
    /// Reused for every batch. Only the worker uses it, or a sender after shutdown
    /// (one at a time, under the queue's closing lock), so it is never contended.
    scratch: Mutex<Scratch>,
}

#[derive(Default)]
struct Scratch {
    lines: Lines,
    decoder: Decoder,
}

impl Replay {
    pub fn new(targets: Arc<Targets>) -> Replay {
        Replay {
            targets,
            scratch: Mutex::new(Scratch::default()),
        }
    }
}

impl Replay {
    fn replay(&self, batch: &[u8], scratch: &mut Scratch) {
        let Scratch { lines, decoder } = scratch;
        // The bytes were encoded by this process's layer: an error would be a bug in the
        // codec, and there is no better place to report it than the trace it broke.
        let _ = decoder.replay(batch, |record| {
            lines.clear();
            self.targets.format(record, lines);
            self.targets.write(lines, Some(record));
        });
    }
}

impl Drain for Replay {
    fn handle(&self, batch: &[u8]) {
        // Marks the worker as inside the layer: a sink or formatter that logs through
        // `tracing` is then ignored, as on a traced thread, instead of queueing more.
        let _busy = Busy::enter();
        let mut scratch = self.scratch.lock().unwrap_or_else(PoisonError::into_inner);
        self.replay(batch, &mut scratch);
    }

    fn handle_in_fork(&self, batch: &[u8]) -> io::Result<()> {
        // The shared scratch's lock may have been held by the parent's worker when the
        // process forked: a child uses buffers of its own (a fork is rare).
        let _busy = Busy::enter();
        self.replay(batch, &mut Scratch::default());
        Ok(())
    }

    fn handle_here(&self, batch: &[u8]) -> io::Result<()> {
        // Failures are handled by disabling the target, as on the worker.
        self.handle(batch);
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        self.targets.flush()
    }

    fn report(&self, dropped: u64) {
        if dropped == 0 {
            return;
        }
        let _busy = Busy::enter();
        for target in self.targets.list.iter().filter(|t| t.is_enabled()) {
            let message = drop_report_message(target.name(), dropped);
            self.targets.write_error(&message, DROP_REPORT_FMT, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use tracing::dispatcher::{self, Dispatch};
    use tracing_subscriber::layer::SubscriberExt;

    use super::Replay;
    use crate::background::BackgroundOptions;
    use crate::background::queue::Drain;
    use crate::layer::{Target, Trace2Layer};
    use tracing_trace2_dst::{MemorySink, Sink};
    use tracing_trace2_record::{Event, Format, Record};

    /// What a record says besides the clock and elapsed times (which differ from run to
    /// run): equal for a direct and a deferred run.
    struct Plain;

    impl Format for Plain {
        fn format(&self, r: &Record<'_>, out: &mut Vec<u8>) {
            // Test threads are not `main`: each announces itself first and says
            // `thread_exit` when it ends, which these tests do not count.
            if matches!(r.event, Event::ThreadStart | Event::ThreadExit { .. }) {
                return;
            }
            let msg = match r.event {
                Event::Printf { msg } => msg,
                _ => None,
            };
            let line = format!(
                "{} {} {} open={} nesting={:?} at={:?} msg={}\n",
                r.event.name(),
                r.thread,
                r.sid,
                r.open_regions,
                r.event.nesting(),
                r.callsite.line,
                msg.unwrap_or(""),
            );
            out.extend_from_slice(line.as_bytes());
        }
    }

    fn layer(sinks: [MemorySink; 2], deferred: Option<BackgroundOptions>) -> Trace2Layer {
        let [a, b] = sinks;
        let mut builder = Trace2Layer::builder()
            .with_target(Target::new("A", Plain, a))
            .with_target(Target::new("B", Plain, b));
        if let Some(options) = deferred {
            builder = builder.with_deferred(options);
        }
        builder.build()
    }

    fn dispatch(layer: &Trace2Layer) -> Dispatch {
        Dispatch::new(tracing_subscriber::registry().with(layer.clone()))
    }

    fn workload(lines: u64) {
        let span = tracing::info_span!("outer", category = "test");
        let _entered = span.enter();
        for i in 0..lines {
            tracing::info!(category = "test", key = "i", value = i);
            let inner = tracing::info_span!("inner");
            let _inner = inner.enter();
            tracing::info!("message {i}");
        }
    }

    #[test]
    fn deferred_writes_what_direct_writes() {
        let direct = [MemorySink::new(), MemorySink::new()];
        let deferred = [MemorySink::new(), MemorySink::new()];
        let direct_layer = layer(direct.clone(), None);
        dispatcher::with_default(&dispatch(&direct_layer), || workload(50));
        let deferred_layer = layer(deferred.clone(), Some(BackgroundOptions::new()));
        dispatcher::with_default(&dispatch(&deferred_layer), || workload(50));
        deferred_layer.flush();
        let want = direct[1].to_string_lossy();
        assert_eq!(want.lines().count(), 1 + 2 + 50 * 4);
        assert_eq!(deferred[0].to_string_lossy(), direct[0].to_string_lossy());
        assert_eq!(deferred[1].to_string_lossy(), want);
    }

    #[test]
    fn each_thread_keeps_its_order_and_flush_waits_for_all() {
        let sinks = [MemorySink::new(), MemorySink::new()];
        let layer = layer(
            sinks.clone(),
            Some(BackgroundOptions::new().with_capacity(4)),
        );
        let dispatch = dispatch(&layer);
        std::thread::scope(|scope| {
            for t in 0..3 {
                let dispatch = dispatch.clone();
                scope.spawn(move || {
                    dispatcher::with_default(&dispatch, || {
                        for i in 0..2000 {
                            tracing::info!("{t} {i}");
                        }
                    })
                });
            }
        });
        layer.flush();
        let text = sinks[0].to_string_lossy();
        let mut next = [0u32; 3];
        for line in text.lines().filter(|l| l.starts_with("printf")) {
            let (_, msg) = line.split_once(" msg=").unwrap();
            let (t, i) = msg.split_once(' ').unwrap();
            let t: usize = t.parse().unwrap();
            assert_eq!(i.parse::<u32>().unwrap(), next[t], "{line}");
            next[t] += 1;
        }
        assert_eq!(next, [2000; 3]);
        assert!(text.starts_with("version "));
        assert_eq!(sinks[1].to_string_lossy(), text);
    }

    /// A sink whose writes wait for a go-ahead, to fill the queue on purpose.
    struct Gate {
        started: std::sync::Mutex<mpsc::Sender<()>>,
        go: std::sync::Mutex<mpsc::Receiver<()>>,
        out: MemorySink,
    }

    impl Sink for Gate {
        fn write_line(&self, line: &[u8]) -> std::io::Result<()> {
            let _ = self.started.lock().unwrap().send(());
            let _ = self
                .go
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(10));
            self.out.write_line(line)
        }
    }

    #[test]
    fn lossy_reports_dropped_records_in_every_target() {
        let (started_tx, started) = mpsc::channel();
        let (go, go_rx) = mpsc::channel();
        let gated = MemorySink::new();
        let other = MemorySink::new();
        let gate = Gate {
            started: std::sync::Mutex::new(started_tx),
            go: std::sync::Mutex::new(go_rx),
            out: gated.clone(),
        };
        let layer = Trace2Layer::builder()
            .with_target(Target::new("GATED", Plain, gate))
            .with_target(Target::new("OTHER", Plain, other.clone()))
            .with_deferred(BackgroundOptions::new().with_capacity(2).with_lossy(true))
            .build();
        dispatcher::with_default(&dispatch(&layer), || {
            tracing::info!("first");
            // The worker is stuck in the first write (`version`).
            started.recv().unwrap();
            for i in 0..10 {
                tracing::info!("more {i}");
            }
        });
        let guard = layer.background_guard();
        assert_eq!(guard.len(), 1);
        let dropped = guard.dropped_lines();
        for _ in 0..100 {
            let _ = go.send(());
        }
        layer.flush();
        // The worker took `version` alone or with `first`; two more messages fit.
        assert!(dropped == 8 || dropped == 9, "{dropped}");
        for sink in [&gated, &other] {
            let text = sink.to_string_lossy();
            let names: Vec<&str> = text.lines().map(|l| l.split(' ').next().unwrap()).collect();
            let printf = 11 - dropped as usize;
            let mut want = vec!["version"];
            want.extend(std::iter::repeat_n("printf", printf));
            want.extend(["error", "error"]);
            assert_eq!(names, want);
        }
        // A second flush reports nothing new.
        let lines = other.to_string_lossy().lines().count();
        layer.flush();
        assert_eq!(other.to_string_lossy().lines().count(), lines);
        drop(guard);
    }

    /// The message of `error` lines.
    struct Messages;

    impl Format for Messages {
        fn format(&self, r: &Record<'_>, out: &mut Vec<u8>) {
            if let Event::Error { msg: Some(msg), .. } = r.event {
                out.extend_from_slice(msg.as_bytes());
                out.push(b'\n');
            }
        }
    }

    #[test]
    fn drop_report_names_each_target() {
        let memory = MemorySink::new();
        let targets = std::sync::Arc::new(crate::targets::Targets {
            list: vec![Target::new("GIT_TRACE2", Messages, memory.clone())],
            session: crate::session::Session::global(),
        });
        let replay = Replay::new(targets);
        replay.report(0);
        assert!(memory.contents().is_empty());
        replay.report(5);
        assert_eq!(
            memory.to_string_lossy(),
            "trace2: background writer for 'GIT_TRACE2' dropped 5 lines\n"
        );
    }

    struct Failing;

    impl Sink for Failing {
        fn write_line(&self, _line: &[u8]) -> std::io::Result<()> {
            Err(std::io::Error::from_raw_os_error(libc::EPIPE))
        }
    }

    #[test]
    fn a_failing_target_is_disabled_by_the_worker() {
        let other = MemorySink::new();
        let layer = Trace2Layer::builder()
            .with_target(Target::new("FAILING", Plain, Failing))
            .with_target(Target::new("OTHER", Plain, other.clone()))
            .with_deferred(BackgroundOptions::new())
            .build();
        dispatcher::with_default(&dispatch(&layer), || tracing::info!("one"));
        layer.flush();
        assert!(!layer.targets()[0].is_enabled());
        assert!(layer.targets()[1].is_enabled());
        // Without destination debugging, no `error` line: as in git.
        assert_eq!(other.to_string_lossy().lines().count(), 2);
    }

    #[test]
    fn after_the_guard_lines_are_written_on_the_traced_thread() {
        let sinks = [MemorySink::new(), MemorySink::new()];
        let layer = layer(sinks.clone(), Some(BackgroundOptions::new()));
        let dispatch = dispatch(&layer);
        dispatcher::with_default(&dispatch, || tracing::info!("queued"));
        drop(layer.background_guard());
        assert_eq!(sinks[0].to_string_lossy().lines().count(), 2);
        dispatcher::with_default(&dispatch, || tracing::info!("direct"));
        // No flush: written before the call returned.
        assert_eq!(sinks[0].to_string_lossy().lines().count(), 3);
        assert_eq!(sinks[1].to_string_lossy().lines().count(), 3);
    }
}
