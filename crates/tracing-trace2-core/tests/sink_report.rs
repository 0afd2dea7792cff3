//! A background sink's failure reports reach the layer as `error` calls: its worker
//! thread reports through the function the layer sets when it is built (the sink sits
//! below the layer and cannot call it), to the process's global dispatcher. A test
//! binary of its own, since it installs the global subscriber.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use tracing_subscriber::prelude::*;
use tracing_trace2_core::background::{BackgroundOptions, BackgroundSink, flush_all};
use tracing_trace2_core::{Format, MemorySink, Record, Sink, Target, Trace2Layer};

/// The event of each record, as `Debug` text, one per line.
struct Events;
impl Format for Events {
    fn format(&self, record: &Record<'_>, out: &mut Vec<u8>) {
        out.extend_from_slice(format!("{:?}\n", record.event).as_bytes());
    }
}

/// A sink whose first write waits until the test lets it go.
struct Held(Mutex<Option<mpsc::Receiver<()>>>, mpsc::Sender<()>);
impl Sink for Held {
    fn write_line(&self, _line: &[u8]) -> std::io::Result<()> {
        if let Some(go) = self.0.lock().unwrap().take() {
            self.1.send(()).unwrap();
            go.recv().unwrap();
        }
        Ok(())
    }
}

#[test]
fn lossy_sink_drops_are_reported_as_an_error_on_the_other_targets() {
    let (go_tx, go_rx) = mpsc::channel();
    let (started_tx, started) = mpsc::channel();
    let held = Arc::new(BackgroundSink::new(
        Held(Mutex::new(Some(go_rx)), started_tx),
        "HELD",
        &BackgroundOptions::new().with_capacity(1).with_lossy(true),
    ));
    let seen = MemorySink::new();
    let layer = Trace2Layer::builder()
        .with_target(Target::new("SEEN", Events, seen.clone()))
        .with_target(Target::new("HELD", Events, held.clone()))
        .build();
    tracing_subscriber::registry().with(layer).init();
    tracing::info!("first");
    started.recv().unwrap();
    for i in 0..5 {
        tracing::info!("queued {i}");
    }
    assert!(held.dropped_lines() > 0);
    go_tx.send(()).unwrap();
    flush_all();
    let text = seen.to_string_lossy();
    let reported = format!(
        "trace2: background writer for 'HELD' dropped {} lines",
        held.dropped_lines()
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("Error") && l.contains(&reported)),
        "{text}"
    );
}
