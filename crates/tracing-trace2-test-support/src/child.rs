//! Running one test again in a child copy of the test binary, to see exactly what it
//! writes to fd 2.
//!
//! A destination that fails prints git's `warning: unable to write trace to …` straight
//! to fd 2 (as git does), past libtest's output capture. A test that makes a target
//! fail on purpose runs its scenario in a child, so that the expected warning is
//! asserted rather than printed among the test results as if something went wrong.

use std::process::{Command, Output};

const CHILD_ENV: &str = "TRACE2_TEST_CHILD";

/// In the child, runs `scenario` and exits 0 (a panic fails the child with libtest's
/// report on its stderr); in the parent, runs only this test again in a child process
/// and returns what it did. `test_path` is `concat!(module_path!(), "::<test fn>")`.
pub fn child_or_run(test_path: &str, scenario: impl FnOnce()) -> Output {
    // libtest names tests without the crate name.
    let name = test_path
        .split_once("::")
        .map_or(test_path, |(_, rest)| rest);
    if std::env::var(CHILD_ENV).as_deref() == Ok(name) {
        scenario();
        std::process::exit(0);
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    Command::new(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1", "-q"])
        .env(CHILD_ENV, name)
        .output()
        .expect("run the test binary again")
}

/// Asserts that the child succeeded and that its stderr, less libtest's own lines, is
/// exactly `expected` (the warnings the scenario must print).
pub fn assert_child_stderr(out: &Output, expected: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the child failed: {out:?}\n{stderr}");
    assert_eq!(stderr, expected, "what the scenario printed to fd 2");
}
