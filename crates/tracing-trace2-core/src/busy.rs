//! The re-entrancy flag: marks a thread that is inside the layer (or inside the deferred
//! writer's worker), so that a `tracing` call raised from there (a field's `Debug` impl
//! that logs, a sink that logs) is dropped instead of recursing or deadlocking.

use std::cell::Cell;

thread_local! {
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

/// Marks this thread as inside the layer until dropped.
pub(crate) struct Busy;

impl Busy {
    /// `None` when the thread already is inside the layer (a re-entrant call).
    pub(crate) fn enter() -> Option<Busy> {
        // `then`, not `then_some`: a `Busy` built for nothing would reset the flag on drop.
        BUSY.try_with(|busy| (!busy.replace(true)).then(|| Busy))
            .ok()
            .flatten()
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let _ = BUSY.try_with(|busy| busy.set(false));
    }
}
