//! Test helpers: running a scenario in a child copy of the test binary (to see exactly
//! what reaches fd 2, or to survive a signal) and running the real git for comparison.

use std::path::PathBuf;

use super::warn::{Reporter, format_warning};
use super::{OpenSettings, Opened, open_reporting};
use std::process::{Command, Output};

const CHILD_ENV: &str = "TRACE2_DST_TEST_CHILD";

/// In the child, runs `scenario` and exits 0; in the parent, reruns only this test in a
/// child process with `env` and returns what it did. `test_path` is
/// `concat!(module_path!(), "::<test fn>")`.
pub(crate) fn child_or_run(
    test_path: &str,
    env: &[(&str, &str)],
    scenario: impl FnOnce(),
) -> Output {
    // libtest names tests without the crate name.
    let name = test_path
        .split_once("::")
        .map_or(test_path, |(_, rest)| rest);
    if std::env::var(CHILD_ENV).as_deref() == Ok(name) {
        scenario();
        std::process::exit(0);
    }
    let exe = std::env::current_exe().unwrap();
    Command::new(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1", "-q"])
        .env(CHILD_ENV, name)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// The real git used as the reference (a missing git fails the test). On Windows there
/// is none to compare with (Git for Windows is not under wine): the comparison is
/// skipped, with a message.
pub(crate) fn real_git() -> Option<PathBuf> {
    if cfg!(windows) {
        eprintln!("skipped: the comparison with real git (no git for Windows here)");
        return None;
    }
    Some(tracing_trace2_test_support::git::reference_git())
}

/// Runs `git version` with only the given Trace2 variables set; returns its stderr.
pub(crate) fn git_stderr(env: &[(&str, &str)]) -> Option<Vec<u8>> {
    Some(git_version(env)?.stderr)
}

/// Runs `git version` with only the given Trace2 variables set.
pub(crate) fn git_version(env: &[(&str, &str)]) -> Option<Output> {
    let git = real_git()?;
    let mut cmd = Command::new(git);
    cmd.arg("version");
    for (key, _) in std::env::vars() {
        if key.starts_with("GIT_") {
            cmd.env_remove(key);
        }
    }
    cmd.env("LANG", "C").env("LC_ALL", "C");
    cmd.envs(env.iter().copied());
    Some(cmd.output().unwrap())
}

/// Settings for the Event target with a fixed SID component.
pub(crate) fn settings(dst_debug: bool, max_files: u32) -> OpenSettings {
    OpenSettings {
        env_name: "GIT_TRACE2_EVENT",
        dst_debug,
        max_files,
        sid_component: "20261121T232339.171924Z-H0a7c9cdf-P00003adb".to_owned(),
    }
}

/// Opens `value`, collecting the bytes the warnings would put on fd 2.
pub(crate) fn open_collect(value: &str, settings: &OpenSettings) -> (Opened, Vec<u8>) {
    let mut seen = Vec::new();
    let mut emit = |m: &str| seen.extend(format_warning(m));
    let opened = open_reporting(
        value,
        settings,
        &mut Reporter::new(settings.dst_debug, &mut emit),
    );
    (opened, seen)
}
