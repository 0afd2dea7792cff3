//! The test runner of the integration tests that have no libtest harness (their binary
//! doubles as the program under test, so it needs its own `main`). It prints libtest-like
//! `test <name> ... ok` lines, honours name filters given on the command line, ends with
//! a `N passed, N failed` summary (which CI reads) and fails the process if a test did.

use std::process::ExitCode;

/// A named check: `Err` holds why it failed.
pub type Check = (&'static str, fn() -> Result<(), String>);

/// A named test that fails by panicking.
pub type Test = (&'static str, fn());

/// Runs tests one by one, printing a line for each, and counts the results.
pub struct Runner {
    /// `Some`: names read `<suite>::<name>` and the summary is `<suite>: N passed, N
    /// failed`; `None`: bare names and `result: N passed, N failed`.
    suite: Option<&'static str>,
    /// Name fragments from the command line; a test runs if its name contains one.
    filters: Vec<String>,
    passed: usize,
    failed: usize,
}

impl Runner {
    /// A runner whose lines name the tests `<suite>::<name>` and whose summary is
    /// `<suite>: N passed, N failed`, after a blank line.
    pub fn suite(suite: &'static str) -> Runner {
        Runner::new(Some(suite))
    }

    /// A runner whose lines name the tests as they are and whose summary is
    /// `result: N passed, N failed`.
    pub fn plain() -> Runner {
        Runner::new(None)
    }

    fn new(suite: Option<&'static str>) -> Runner {
        let filters = std::env::args()
            .skip(1)
            .filter(|a| !a.starts_with('-'))
            .collect();
        Runner {
            suite,
            filters,
            passed: 0,
            failed: 0,
        }
    }

    /// Whether the command line's filters (if any) select `name`.
    pub fn selected(&self, name: &str) -> bool {
        self.filters.is_empty() || self.filters.iter().any(|f| name.contains(f.as_str()))
    }

    /// Runs `check` if `name` is selected, and records its result.
    pub fn check(&mut self, name: &str, check: impl FnOnce() -> Result<(), String>) {
        if self.selected(name) {
            let result = check();
            self.record(name, result);
        }
    }

    /// Runs `test` if `name` is selected; it fails if it panics (the panic hook has
    /// already printed why).
    pub fn test(&mut self, name: &str, test: fn()) {
        if self.selected(name) {
            let ok = std::panic::catch_unwind(test).is_ok();
            self.tally(name, ok, None);
        }
    }

    /// Records the result of a test that ran whatever the filters say.
    pub fn record(&mut self, name: &str, result: Result<(), String>) {
        match result {
            Ok(()) => self.tally(name, true, None),
            Err(why) => self.tally(name, false, Some(&why)),
        }
    }

    fn tally(&mut self, name: &str, ok: bool, why: Option<&str>) {
        let prefix = self.suite.map(|s| format!("{s}::")).unwrap_or_default();
        let verdict = if ok { "ok" } else { "FAILED" };
        println!("test {prefix}{name} ... {verdict}");
        if let Some(why) = why {
            println!("{why}");
        }
        if ok {
            self.passed += 1;
        } else {
            self.failed += 1;
        }
    }

    /// Prints the summary line; the exit code fails the process if a test failed.
    pub fn finish(self) -> ExitCode {
        let (passed, failed) = (self.passed, self.failed);
        match self.suite {
            Some(suite) => println!("\n{suite}: {passed} passed, {failed} failed"),
            None => println!("result: {passed} passed, {failed} failed"),
        }
        if failed == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    }
}

/// Runs each selected check with a [`Runner::suite`] runner.
pub fn run_checks(suite: &'static str, checks: &[Check]) -> ExitCode {
    let mut runner = Runner::suite(suite);
    for (name, check) in checks {
        runner.check(name, check);
    }
    runner.finish()
}

/// Runs each selected test with a [`Runner::plain`] runner.
pub fn run_tests(tests: &[Test]) -> ExitCode {
    let mut runner = Runner::plain();
    for (name, test) in tests {
        runner.test(name, *test);
    }
    runner.finish()
}
