//! A field whose `Debug` impl itself uses `tracing`, under a *global* default subscriber
//! (where tracing-core has no re-entrancy guard): the layer neither deadlocks nor
//! recurses, and the outer event is still written whole.

#[path = "support/mod.rs"]
mod support;

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};

use tracing::info;
use tracing_subscriber::prelude::*;
use tracing_trace2::{Settings, Trace2};

static DEBUG_CALLS: AtomicUsize = AtomicUsize::new(0);

/// Logs from inside its own formatting.
struct Noisy;

impl fmt::Debug for Noisy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        DEBUG_CALLS.fetch_add(1, Ordering::SeqCst);
        info!(category = "inner", key = "from_debug", value = 1);
        let span = tracing::info_span!("inner_span", trace2.category = "inner");
        span.in_scope(|| info!("inside the inner span"));
        f.write_str("noisy")
    }
}

#[test]
fn debug_impls_that_trace_do_not_deadlock_or_recurse() {
    let dir = support::process::fresh_dir("reentrancy").unwrap();
    let event = dir.join("t.event");
    let mut settings = Settings::default();
    settings.event_destination = Some(event.display().to_string());
    settings.perf_destination = Some(dir.join("t.perf").display().to_string());
    settings.event_nesting = 9;
    tracing_subscriber::registry()
        .with(Trace2::with_settings(settings).layer())
        .init();

    info!(category = "outer", key = "k", value = ?Noisy);
    let span = tracing::info_span!("outer_span", trace2.category = "outer", field = ?Noisy);
    span.in_scope(|| info!(noisy = ?Noisy, "message"));
    span.record("field", tracing::field::debug(Noisy));
    // The region lasts as long as the span (the default region mode).
    drop(span);

    let text = std::fs::read_to_string(&event).unwrap();
    let lines = support::json_lines(text.lines());
    let names: Vec<String> = lines
        .iter()
        .map(|v| {
            format!(
                "{}:{}",
                v["event"].as_str().unwrap(),
                v["category"].as_str().unwrap_or("")
            )
        })
        .collect();
    // Nothing raised from inside a Debug impl while the layer is at work is written.
    assert!(
        !text.contains("from_debug") && !text.contains("inner"),
        "{names:?}"
    );
    assert_eq!(
        names,
        [
            "version:",
            // The test's thread is not `main`: it is announced.
            "thread_start:",
            "data:outer",
            "region_enter:outer",
            "printf:",
            // Inside the span, the datum takes the span's category.
            "data:outer",
            "region_leave:outer"
        ]
    );
    assert_eq!(lines[2]["value"], "noisy");
    assert!(DEBUG_CALLS.load(Ordering::SeqCst) >= 4);
    // Outside the layer the same code traces normally.
    let before = text.lines().count();
    let _ = format!("{:?}", Noisy);
    let after = std::fs::read_to_string(&event).unwrap().lines().count();
    assert_eq!(
        after,
        before + 4,
        "data + region pair + printf from a plain format!"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
