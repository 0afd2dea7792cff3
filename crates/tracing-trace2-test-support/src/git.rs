//! The real git the tests compare with: `/usr/local/bin/git` (2.47.3 on the project's
//! machines), else the `git` on the `PATH`. git is on every machine this project runs on,
//! so a missing git fails the test that needs it instead of skipping it.

use std::path::PathBuf;
use std::process::Command;

/// The reference git binary. Panics when there is none.
pub fn reference_git() -> PathBuf {
    let fixed = PathBuf::from("/usr/local/bin/git");
    if fixed.exists() {
        return fixed;
    }
    let works = Command::new("git")
        .arg("version")
        .output()
        .is_ok_and(|out| out.status.success());
    assert!(
        works,
        "real git not found: the comparison with git cannot run"
    );
    PathBuf::from("git")
}

/// A command running the reference git with an empty environment but for a `PATH`,
/// `HOME` (given) and `GIT_CONFIG_NOSYSTEM=1`: nothing from the developer's own
/// environment or config (a `GIT_TRACE2`, say) changes what git writes.
pub fn clean_git(home: &std::path::Path) -> Command {
    let mut cmd = Command::new(reference_git());
    cmd.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1");
    cmd
}
