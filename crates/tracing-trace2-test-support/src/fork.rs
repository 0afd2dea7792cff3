//! A child forked while another thread of the test holds a lock: the check that a
//! process-wide lock does not stay locked in a child for good (the binary crate's and the
//! core's `fork` handlers).

use std::time::Duration;

/// Runs `child` in a child forked while another thread of this process holds what `hold`
/// returns (taken before the `fork` starts, dropped 200 ms later), and fails the test
/// unless the child returns `true`. The child gets ten seconds: one that hangs on a lock
/// its parent's thread held is ended by `SIGALRM`, and the test fails. `child` must take
/// only locks whose `fork` handlers are installed, and must not rely on other threads.
pub fn forked_while_held<G>(hold: impl FnOnce() -> G + Send, child: impl FnOnce() -> bool) {
    let (held_tx, held) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let _guard = hold();
            held_tx.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(200));
        });
        held.recv().unwrap();
        // SAFETY: the child runs `child`, which takes only locks with `fork` handlers,
        // and leaves with `_exit` (never back into the scope, whose thread it does not
        // have).
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: `alarm` sets a timer and touches no memory.
            unsafe { libc::alarm(10) };
            let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child));
            // SAFETY: leaves without the parent's exit handlers or the scope.
            unsafe { libc::_exit(if matches!(ok, Ok(true)) { 0 } else { 1 }) };
        }
        assert!(pid > 0, "fork: {}", std::io::Error::last_os_error());
        let mut status = 0;
        // SAFETY: waits for the child just forked.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the child failed or hung (status {status:#x}; signal {} is SIGALRM)",
            libc::SIGALRM
        );
    });
}
