//! A program that owns its subscriber but installs it late, and only for some commands
//! (a git implementation that shows its spans on stderr only when a command asks for
//! it): the Trace2 lifecycle starts first thing in `main`, with an empty slot for the
//! program's own layers, and a command that wants them fills the slot later.
//!
//! ```sh
//! GIT_TRACE2_EVENT=/tmp/late.event cargo run -q --example late_subscriber -- log
//! ```
//!
//! The command is the first argument: `log` installs a fmt layer on stderr before it
//! runs, any other (`status`) runs with Trace2 alone. Either way the trace has
//! `version`, `start`, the command's region and data, `exit` and `atexit`.

use std::process::ExitCode;

use tracing_subscriber::{Layer, Registry, prelude::*, reload};

/// The program's own layers, installed once it knows the command.
type Slot = Option<Box<dyn Layer<Registry> + Send + Sync>>;

pub(crate) fn main() -> ExitCode {
    // First thing: the lifecycle and a subscriber holding the Trace2 layer beside an empty
    // slot. A global subscriber can be installed once, and the lifecycle's first lines
    // need it, so the program's layers go into the slot instead of a subscriber of their
    // own. The Trace2 layer stays outside the slot: a `reload::Layer` hides what it holds
    // from the lookups that find the Trace2 layer.
    let lifecycle = tracing_trace2::Trace2::from_env()
        .with_exe_version(env!("CARGO_PKG_VERSION"))
        .lifecycle();
    let (slot, slot_handle) = reload::Layer::new(Slot::None);
    tracing_subscriber::registry()
        .with(slot)
        .with(lifecycle.layer())
        .init();
    let trace2 = lifecycle.start();

    let command = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "status".to_owned());
    tracing_trace2::api::cmd_name(&command);
    if command == "log" {
        // Only this command shows its spans and events: install the layer now. (A layer
        // put in the slot cannot carry a per-layer filter of its own; see
        // docs/real-programs.md.)
        let fmt = tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .without_time();
        let _ = slot_handle.reload(Some(fmt.boxed()));
    }
    trace2.finish(run(&command))
}

#[tracing::instrument(fields(trace2.category = "cli"))]
fn run(command: &str) -> Result<(), String> {
    tracing::info!(key = "command", value = command);
    Ok(())
}
