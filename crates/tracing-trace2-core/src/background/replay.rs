//! The worker side of the deferred writer: it decodes the records the traced threads
//! encoded ([`tracing_trace2_record::codec`]) and runs them through the layer's targets, exactly as the
//! layer does for a direct writer (format for every enabled target in order, disable a
//! target whose write fails), except that lines for files are formatted straight into
//! batches (`Targets::format_batched`): one `write` of whole lines per batch, written
//! when a batch is full and whenever the worker has handled all it took from the queue.
//!
//! The data flow of a deferred layer is therefore
//! `record → encode → queue → worker: decode → format → sink`.

use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use crate::background::queue::Drain;
use crate::background::{DROP_REPORT_FMT, drop_report_message};
use crate::busy::Busy;
use crate::targets::{Batches, Targets};
use tracing_trace2_dst::statics;
use tracing_trace2_record::Record;
use tracing_trace2_record::codec::{self, Replayer};

/// Encodes `record` for the deferred writer's worker, at the end of `out`: the session's
/// id and a callsite file in the program's read-only data go by address
/// ([`codec::encode_in_process`]), since the worker reads them in this process while
/// they are still there (`'static` text), and the Event format's callsite cache then
/// knows the file by its address.
#[inline]
pub(crate) fn encode(record: &Record<'_>, targets: &Targets, out: &mut Vec<u8>) {
    let sid = targets.session.sid();
    codec::encode_in_process(record, out, |text| {
        std::ptr::eq(text, sid) || statics::is_immutable(text.as_ptr() as usize, text.len())
    });
}

/// Replays batches of encoded records into the targets.
pub(crate) struct Replay {
    targets: Arc<Targets>,
    /// Reused for every batch. Only the worker uses it, or a sender after shutdown
    /// (one at a time, under the queue's closing lock), so it is never contended.
    scratch: Mutex<Scratch>,
}

#[derive(Default)]
struct Scratch {
    /// A line for a target that takes one line per call.
    line: Vec<u8>,
    replayer: Replayer,
    /// Lines for files, waiting to be written together.
    batches: Batches,
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
    /// Formats the records of `batch` and writes (or gathers) their lines.
    fn replay(&self, batch: &[u8], scratch: &mut Scratch) {
        let Scratch {
            line,
            replayer,
            batches,
        } = scratch;
        // The bytes were encoded by this process's layer: an error would be a bug in the
        // codec, and there is no better place to report it than the trace it broke.
        // SAFETY: the deferred writer's queue holds `Output::write`'s copies of the
        // records `encode` above wrote in this process, unchanged and back to back (the
        // drain frames its own messages: no length prefix between them), so a batch
        // of it, or one message, is whole encoded records back to back.
        // What `encode` sent by address lasts as long as the process: the text of a
        // `&'static Session` (never freed, never written after it is built) and text in
        // a read-only segment of the program (never unloaded, never written).
        let _ = unsafe {
            replayer.replay_encoded(batch, |record| {
                self.targets.format_batched(record, line, batches);
            })
        };
    }

    fn scratch(&self) -> std::sync::MutexGuard<'_, Scratch> {
        self.scratch.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drain for Replay {
    fn handle(&self, batch: &[u8]) {
        // Marks the worker as inside the layer: a sink or formatter that logs through
        // `tracing` is then ignored, as on a traced thread, instead of queueing more.
        let _busy = Busy::enter();
        self.replay(batch, &mut self.scratch());
    }

    fn handle_all(&self, batch: &[u8]) {
        // One mark, one lock and one replay for all the messages the worker took at
        // once, not one per message (about 50 instructions a line when each `tracing`
        // call is one, and 25 more for the replay's own setup).
        let _busy = Busy::enter();
        self.replay(batch, &mut self.scratch());
    }

    fn frames_itself(&self) -> bool {
        // Each encoded record says its own length.
        true
    }

    fn end_batch(&self) {
        let _busy = Busy::enter();
        let mut scratch = self.scratch();
        self.targets.write_batches(&mut scratch.batches);
    }

    fn handle_in_fork(&self, batch: &[u8]) -> io::Result<()> {
        // The shared scratch's lock may have been held by the parent's worker when the
        // process forked: a child uses buffers of its own (a fork is rare).
        let _busy = Busy::enter();
        let mut scratch = Scratch::default();
        self.replay(batch, &mut scratch);
        self.targets.write_batches(&mut scratch.batches);
        Ok(())
    }

    fn handle_here(&self, batch: &[u8]) -> io::Result<()> {
        // On the sending thread nothing waits for more lines: written before returning.
        // Failures are handled by disabling the target, as on the worker.
        let _busy = Busy::enter();
        let mut scratch = self.scratch();
        self.replay(batch, &mut scratch);
        self.targets.write_batches(&mut scratch.batches);
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
    use tracing_trace2_record::{Format, Record, Trace2Event};

    /// What a record says besides the clock and elapsed times (which differ from run to
    /// run): equal for a direct and a deferred run.
    struct Plain;

    impl Format for Plain {
        fn format(&self, r: &Record<'_>, out: &mut Vec<u8>) {
            // Test threads are not `main`: each announces itself first and says
            // `thread_exit` when it ends, which these tests do not count.
            if matches!(
                r.event,
                Trace2Event::ThreadStart | Trace2Event::ThreadExit { .. }
            ) {
                return;
            }
            let msg = match r.event {
                Trace2Event::Printf { msg } | Trace2Event::Error { msg, .. } => msg,
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
        let span = tracing::info_span!("outer", trace2.category = "test");
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
            if let Trace2Event::Error { msg: Some(msg), .. } = r.event {
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

    /// The deferred writer's encoding sends the layer's session id by address (a frame
    /// only this process can read) and copies other text: what the worker replays is
    /// the record the traced thread encoded.
    #[test]
    fn the_session_id_goes_by_address_and_other_text_is_copied() {
        use tracing_trace2_record::codec::{self, DecodeError, Replayer};
        use tracing_trace2_record::{Callsite, Timestamp};
        let targets = crate::targets::Targets {
            list: Vec::new(),
            session: crate::session::Session::global(),
        };
        let own_text = String::from("th07:not-static");
        let mut record = Record {
            event: Trace2Event::Printf { msg: Some("hello") },
            time: Timestamp::default(),
            sid: targets.session.sid(),
            depth: 0,
            thread: &own_text,
            callsite: Callsite::default(),
            open_regions: 0,
        };
        let mut frame = Vec::new();
        super::encode(&record, &targets, &mut frame);
        let mut list = Vec::new();
        assert_eq!(
            codec::decode(&frame, &mut list).unwrap_err(),
            DecodeError::Address
        );
        let mut sids = Vec::new();
        // SAFETY: encoded by `encode` in this process; the session is `'static`.
        unsafe {
            Replayer::new().replay_encoded(&frame, |back| {
                assert_eq!(format!("{back:?}"), format!("{record:?}"));
                sids.push(back.sid.as_ptr());
                assert_ne!(back.thread.as_ptr(), own_text.as_ptr());
            })
        }
        .unwrap();
        assert_eq!(sids, [targets.session.sid().as_ptr()]);
        // Another session's id (here a copy) is copied, and any decoder reads it.
        let other_sid = targets.session.sid().to_owned();
        record.sid = &other_sid;
        let mut copied = Vec::new();
        super::encode(&record, &targets, &mut copied);
        let mut other_list = Vec::new();
        let (back, _) = codec::decode(&copied, &mut other_list).unwrap();
        assert_eq!(back.sid, other_sid);
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

    /// A sink that takes batches of up to `limit` bytes and keeps each call it gets;
    /// its first call waits for a go-ahead (so that the queue fills behind it), and the
    /// call numbered `fail_at` fails.
    struct Batching {
        limit: usize,
        calls: std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
        started: std::sync::Mutex<mpsc::Sender<()>>,
        go: std::sync::Mutex<mpsc::Receiver<()>>,
        fail_at: Option<usize>,
    }

    impl Batching {
        fn call(&self, bytes: &[u8]) -> std::io::Result<()> {
            let mut calls = self.calls.lock().unwrap();
            if calls.is_empty() {
                let _ = self.started.lock().unwrap().send(());
                let _ = self
                    .go
                    .lock()
                    .unwrap()
                    .recv_timeout(Duration::from_secs(10));
            }
            if self.fail_at == Some(calls.len()) {
                calls.push(Vec::new());
                return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
            }
            calls.push(bytes.to_vec());
            Ok(())
        }
    }

    impl Sink for Batching {
        fn write_line(&self, line: &[u8]) -> std::io::Result<()> {
            self.call(line)
        }
        fn batch_limit(&self) -> usize {
            self.limit
        }
        fn write_lines(&self, lines: &[u8]) -> std::io::Result<()> {
            self.call(lines)
        }
    }

    type Calls = std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>;

    /// A deferred layer with a batching target (held at its first write) and a plain
    /// memory target; returns the layer, the batching sink's calls, the other sink, and
    /// the channels that hold and release the first write.
    fn batching_layer(
        limit: usize,
        fail_at: Option<usize>,
    ) -> (
        Trace2Layer,
        Calls,
        MemorySink,
        mpsc::Receiver<()>,
        mpsc::Sender<()>,
    ) {
        let (started_tx, started) = mpsc::channel();
        let (go, go_rx) = mpsc::channel();
        let calls = Calls::default();
        let sink = Batching {
            limit,
            calls: calls.clone(),
            started: std::sync::Mutex::new(started_tx),
            go: std::sync::Mutex::new(go_rx),
            fail_at,
        };
        let other = MemorySink::new();
        let layer = Trace2Layer::builder()
            .with_target(Target::new("BATCHED", Plain, sink).with_dst_debug(true))
            .with_target(Target::new("OTHER", Plain, other.clone()))
            .with_deferred(BackgroundOptions::new().with_flush_on_panic(false))
            .build();
        (layer, calls, other, started, go)
    }

    /// Lines queued while the worker is busy reach a file-like sink in few calls, each
    /// made of whole lines and within the sink's limit, in order and all of them.
    #[test]
    fn the_worker_writes_whole_lines_in_batches_within_the_limit() {
        const LIMIT: usize = 1000;
        let (layer, calls, other, started, go) = batching_layer(LIMIT, None);
        dispatcher::with_default(&dispatch(&layer), || {
            tracing::info!("first");
            // The worker is held in its first write (`version`): the rest queues up.
            started.recv().unwrap();
            for i in 0..300 {
                tracing::info!("line {i}");
            }
            go.send(()).unwrap();
        });
        layer.flush();
        let calls = calls.lock().unwrap();
        let written: Vec<u8> = calls.concat();
        assert_eq!(written, other.contents(), "every line, in order");
        assert_eq!(written.split(|&b| b == b'\n').count() - 1, 1 + 301);
        for call in calls.iter() {
            assert!(call.len() <= LIMIT, "{} bytes in one write", call.len());
            assert!(call.ends_with(b"\n"), "a torn batch");
        }
        // About 60 bytes a line: 16 lines per write, 302 lines in about 20 writes.
        assert!(calls.len() < 40, "{} writes for 302 lines", calls.len());
    }

    /// Under light load nothing waits for more lines: each line is written before a
    /// flush returns, and a lone line is not held back for company.
    #[test]
    fn a_lone_line_is_written_without_waiting_for_more() {
        let (layer, calls, _other, started, go) = batching_layer(1 << 16, None);
        go.send(()).unwrap();
        dispatcher::with_default(&dispatch(&layer), || tracing::info!("alone"));
        started.recv().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        // No flush: the worker writes what it has once the queue is empty.
        while !String::from_utf8_lossy(&calls.lock().unwrap().concat()).contains("msg=alone") {
            assert!(std::time::Instant::now() < deadline, "the lone line waits");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A batch that fails disables its target, with one `error` line in the other target
    /// after every line written before it, naming the traced thread; nothing more goes to
    /// the failed target.
    #[test]
    fn a_failed_batch_disables_the_target_once() {
        // The failure is on purpose: its warning goes to fd 2, so the scenario runs in a
        // child whose stderr is asserted (nothing alarming reaches the test output).
        let out = tracing_trace2_test_support::child::child_or_run(
            concat!(module_path!(), "::a_failed_batch_disables_the_target_once"),
            || {
                let (layer, calls, other, started, go) = batching_layer(1000, Some(1));
                dispatcher::with_default(&dispatch(&layer), || {
                    tracing::info!("first");
                    started.recv().unwrap();
                    for i in 0..100 {
                        tracing::info!("line {i}");
                    }
                    go.send(()).unwrap();
                });
                layer.flush();
                dispatcher::with_default(&dispatch(&layer), || tracing::info!("later"));
                layer.flush();
                assert!(!layer.targets()[0].is_enabled());
                // `version` went through; the second call failed; nothing after it.
                assert_eq!(calls.lock().unwrap().len(), 2);
                let text = other.to_string_lossy();
                let errors: Vec<&str> = text.lines().filter(|l| l.starts_with("error ")).collect();
                assert_eq!(errors.len(), 1, "{text}");
                let thread = text.lines().nth(1).unwrap().split(' ').nth(1).unwrap();
                assert_eq!(errors[0].split(' ').nth(1), Some(thread));
                assert!(
                    errors[0].contains("unable to write trace to 'BATCHED'"),
                    "{}",
                    errors[0]
                );
                // The error line follows the lines of the failed batch in the other target (the
                // batch was written when it was full, after its last line) and precedes `later`.
                let lines: Vec<&str> = text.lines().collect();
                assert_eq!(lines.len(), 1 + 101 + 1 + 1);
                let at = lines.iter().position(|l| l.starts_with("error ")).unwrap();
                let failed = String::from_utf8_lossy(&calls.lock().unwrap()[0])
                    .lines()
                    .count();
                assert!(at > failed + 1, "error line at {at}: {text}");
                assert!(lines[103].contains("msg=later"));
            },
        );
        // git's text for the error: "No space left on device" on Unix; on Windows the code
        // is read as a system error code, with the system's text.
        let err = std::io::Error::from_raw_os_error(libc::ENOSPC);
        let expected = tracing_trace2_dst::format_warning(
            &tracing_trace2_dst::write_failed_message("BATCHED", &err),
        );
        #[cfg(unix)]
        assert_eq!(
            expected,
            b"warning: unable to write trace to 'BATCHED': No space left on device\n"
        );
        tracing_trace2_test_support::child::assert_child_stderr(
            &out,
            &String::from_utf8_lossy(&expected),
        );
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
