//! Puts this process's session into its own environment (`GIT_TRACE2_PARENT_SID`,
//! `GIT_TRACE2_PARENT_NAME`), as git does, so that children started by any means (a
//! plain `std::process::Command`, a shell, a library) nest under it.
//!
//! The export happens once, as early as the facade can: when [`crate::Trace2::lifecycle`]
//! is about to build the layer (before a background writer starts its thread; so also in
//! [`crate::Trace2::init`]), else at
//! [`crate::Lifecycle::start`]. It happens whether or not other threads run by then: a
//! layer built earlier may have started one (tracing-chrome, tracing-appender's
//! `non_blocking`, OpenTelemetry's batch exporter, a tokio runtime), and skipping the
//! export made every git child of such a program a separate trace. Std orders its own
//! environment reads, writes and `Command` spawns with one lock; the remaining hazard
//! (C code reading the environment on another thread at that moment) is accepted, kept
//! small and documented in `docs/decisions.md`. With `GIT_TRACE2_DST_DEBUG` the facade
//! says once when it exported with other threads running, or did not export because the
//! program turned it off ([`crate::Trace2::with_env_export`]).

use std::sync::Once;

use tracing_trace2_core::Session;
use tracing_trace2_core::session::PARENT_SID_ENV;

static EXPORT: Once = Once::new();

/// Exports the session once per process, or (with `enabled` false) says once on
/// `GIT_TRACE2_DST_DEBUG` that children started outside [`crate::Trace2CommandExt`]
/// will not nest.
pub(crate) fn export_session(enabled: bool, dst_debug: bool) {
    EXPORT.call_once(|| {
        if !enabled {
            if dst_debug {
                tracing_trace2_dst::warning(&format!(
                    "trace2: {PARENT_SID_ENV} not exported (turned off by the program): \
                     only children started through Trace2CommandExt nest under this process"
                ));
            }
            return;
        }
        // Counted only where the warning below may be written (a directory read a
        // short process does not need otherwise).
        let threads = if dst_debug { thread_count() } else { None };
        // SAFETY: std's environment lock orders these writes with every environment
        // access of Rust code, on any thread. With one thread (the common case: the
        // lifecycle built at the top of `main`) nothing else can read the environment.
        // With more, code outside std reading it on another thread during these few
        // writes is the accepted hazard (docs/decisions.md: children that escape the
        // trace are the failure users reported; glibc keeps every value it replaced).
        unsafe { Session::global().export_env() };
        // Said only where the count is known (Linux): elsewhere every export would be
        // reported, whatever the program did.
        if let Some(n) = threads.filter(|&n| dst_debug && n > 1) {
            tracing_trace2_dst::warning(&format!(
                "trace2: exported {PARENT_SID_ENV} while the process had {n} threads; build \
                 the Trace2 lifecycle before other layers or runtimes start threads \
                 (see docs/real-programs.md)"
            ));
        }
    });
}

/// The number of threads of this process, where the platform tells (Linux: the entries
/// of `/proc/self/task`).
fn thread_count() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        std::fs::read_dir("/proc/self/task")
            .ok()
            .map(|tasks| tasks.count())
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn thread_count_sees_a_new_thread() {
        let (stop, wait) = std::sync::mpsc::channel::<()>();
        let helper = std::thread::spawn(move || {
            let _ = wait.recv();
        });
        assert!(thread_count().expect("linux tells") >= 2);
        drop(stop);
        helper.join().unwrap();
    }
}
