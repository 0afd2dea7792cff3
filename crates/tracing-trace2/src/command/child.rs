//! What the std and tokio forms of a traced command share: the `child_start` a command
//! gets (class, argv, `cd`, git detection, the session variables of a nested trace), and
//! the bookkeeping of a started child until its `child_exit` or `child_ready`.
//!
//! Both forms read and change the command as a `std::process::Command` (tokio's
//! `Command::as_std_mut` gives it), so there is one implementation of each rule.

use std::ffi::OsStr;
use std::panic::Location;
use std::path::Path;
use std::process::{Command, ExitStatus};

use tracing_trace2_core::Session;
use tracing_trace2_core::api::{self, ChildStart, ChildToken};
use tracing_trace2_core::session::PARENT_SID_ENV;

/// What a command's `child_start` says besides what the command itself tells.
#[derive(Clone, Debug)]
pub(super) struct ChildSpec {
    pub class: String,
    pub hook_name: Option<String>,
    /// `None`: decided from the program's name.
    pub git: Option<bool>,
    pub use_shell: bool,
    /// Written instead of the command's program and arguments.
    pub argv: Option<Vec<String>>,
}

impl Default for ChildSpec {
    fn default() -> Self {
        ChildSpec {
            class: "?".to_owned(),
            hook_name: None,
            git: None,
            use_shell: false,
            argv: None,
        }
    }
}

impl ChildSpec {
    /// Writes `child_start` for `cmd` (at the caller) and sets the session variables on
    /// it; the returned record then waits for the child's end.
    #[track_caller]
    pub fn start(&self, cmd: &mut Command) -> ChildRecord {
        let is_git = self
            .git
            .unwrap_or_else(|| is_git_program(cmd.get_program()));
        let argv = match &self.argv {
            Some(argv) => argv.clone(),
            None if is_git => cmd.get_args().map(lossy).collect(),
            None => full_argv(cmd),
        };
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let cd = cmd
            .get_current_dir()
            .map(|d| d.to_string_lossy().into_owned());
        set_child_env(cmd);
        let mut child = ChildStart::new(&self.class, &argv)
            .with_cd(cd.as_deref())
            .with_shell(self.use_shell)
            .with_git(is_git);
        if let Some(hook_name) = &self.hook_name {
            child = child.with_hook_name(hook_name);
        }
        let token = api::child_start(&child);
        ChildRecord {
            token,
            pid: -1,
            started_at: Location::caller(),
            open: true,
        }
    }
}

/// A started child until its end is written: its token, its process id (known once it
/// runs), where it was started, and whether `child_exit`/`child_ready` is still due.
#[derive(Debug)]
pub(super) struct ChildRecord {
    token: ChildToken,
    pid: i64,
    started_at: &'static Location<'static>,
    open: bool,
}

impl ChildRecord {
    /// The child runs as process `pid`.
    pub fn running(&mut self, pid: u32) {
        self.pid = i64::from(pid);
    }

    /// The child's Trace2 id.
    pub fn child_id(&self) -> u64 {
        self.token.id()
    }

    /// Whether nothing ended the child's trace yet.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// The command could not start: `child_exit` with pid and code -1, as in git.
    #[track_caller]
    pub fn failed(&mut self) {
        if std::mem::take(&mut self.open) {
            api::child_exit(&self.token, -1, -1);
        }
    }

    /// The child ended with `status`, seen at `at`: `child_exit` (once).
    pub fn exited(&mut self, status: ExitStatus, at: &'static Location<'static>) {
        if std::mem::take(&mut self.open) {
            api::child_exit_at(at, &self.token, self.pid, i64::from(exit_code(status)));
        }
    }

    /// The child ended with `status`, seen when its handle was dropped: `child_exit`
    /// (once) at the place where it was started, the one place in the program that
    /// stands for it (the drop itself happens in compiler-made code).
    pub fn exited_on_drop(&mut self, status: ExitStatus) {
        self.exited(status, self.started_at);
    }

    /// The child was released: `child_ready` (once); no `child_exit` follows.
    #[track_caller]
    pub fn ready(&mut self, ready: &str) {
        if std::mem::take(&mut self.open) {
            api::child_ready(&self.token, self.pid, ready);
        }
    }
}

/// The code git reports for a child: its exit status, or 128 + the signal that killed it.
pub fn exit_code(status: ExitStatus) -> i32 {
    if let Some(code) = status.code() {
        return code;
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return 128 + signal;
        }
    }
    -1
}

/// Sets the session variables on a command, unless tracing is off or the program set
/// them on the command itself (see [`session_vars_to_set`]).
pub(super) fn set_child_env(cmd: &mut Command) {
    if !crate::lifecycle::is_active() {
        return;
    }
    let session = Session::global();
    let env = session.child_env();
    for (key, value) in session_vars_to_set(cmd, &env, inherited_sid(session)) {
        cmd.env(key, value);
    }
}

/// The session id this process inherited from its parent (`GIT_TRACE2_PARENT_SID` at
/// start), if any: its own session id without its last component.
fn inherited_sid(session: &Session) -> Option<&str> {
    session
        .sid()
        .strip_suffix(session.own_component())?
        .strip_suffix('/')
}

/// Which of the session variables `env` to set on `cmd`. A variable the program set or
/// removed on the command is its own and kept, with one exception: a
/// `GIT_TRACE2_PARENT_SID` equal to the one this process inherited, or to its own, is
/// not a choice but a copy of the environment (`env_clear()` then `envs(copy)`). Taken
/// before the lifecycle exported ours, it would make the child our sibling; taken after,
/// its `GIT_TRACE2_PARENT_NAME` may predate a later `cmd_name`. Both variables are then
/// replaced.
fn session_vars_to_set<'e>(
    cmd: &Command,
    env: &'e [(&'static str, String)],
    inherited_sid: Option<&str>,
) -> Vec<&'e (&'static str, String)> {
    let on_command = |key: &str| {
        cmd.get_envs()
            .find(|(k, _)| *k == OsStr::new(key))
            .map(|(_, v)| v)
    };
    let own_sid = env
        .iter()
        .find(|(key, _)| *key == PARENT_SID_ENV)
        .map(|(_, sid)| sid.as_str());
    let copied = on_command(PARENT_SID_ENV)
        .flatten()
        .and_then(OsStr::to_str)
        .is_some_and(|v| [inherited_sid, own_sid].contains(&Some(v)));
    env.iter()
        .filter(|(key, _)| copied || on_command(key).is_none())
        .collect()
}

fn is_git_program(program: &OsStr) -> bool {
    Path::new(program)
        .file_name()
        .is_some_and(|name| name == "git" || name == "git.exe")
}

/// The program and its arguments.
pub(super) fn full_argv(cmd: &Command) -> Vec<String> {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(lossy)
        .collect()
}

pub(super) fn lossy(s: &OsStr) -> String {
    s.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_children_are_detected_by_program_name() {
        assert!(is_git_program(OsStr::new("git")));
        assert!(is_git_program(OsStr::new("/usr/local/bin/git")));
        assert!(!is_git_program(OsStr::new("git-lfs")));
        assert!(!is_git_program(OsStr::new("/usr/bin/digit")));
    }

    #[cfg(unix)]
    #[test]
    fn exit_codes_follow_git() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        // Killed by SIGTERM (15): 128 + 15.
        assert_eq!(exit_code(ExitStatus::from_raw(15)), 143);
    }

    /// The names of the variables [`session_vars_to_set`] sets on `cmd`.
    fn set_on(cmd: &Command, inherited: Option<&str>) -> Vec<&'static str> {
        let env = [
            (PARENT_SID_ENV, "PARENT/OURS".to_owned()),
            ("GIT_TRACE2_PARENT_NAME", "ours".to_owned()),
        ];
        session_vars_to_set(cmd, &env, inherited)
            .into_iter()
            .map(|(k, _)| *k)
            .collect()
    }

    #[test]
    fn a_cleared_or_copied_environment_gets_the_session() {
        let both = [PARENT_SID_ENV, "GIT_TRACE2_PARENT_NAME"];
        let mut cleared = Command::new("git");
        cleared.env_clear().env("PATH", "/bin");
        assert_eq!(set_on(&cleared, None), both);
        assert_eq!(set_on(&cleared, Some("PARENT")), both);
        // A copy of the environment taken before the lifecycle exported ours carries
        // the parent's session: both variables are replaced, or the child would be our
        // sibling.
        let mut copied = Command::new("git");
        copied
            .env_clear()
            .env(PARENT_SID_ENV, "PARENT")
            .env("GIT_TRACE2_PARENT_NAME", "parent");
        assert_eq!(set_on(&copied, Some("PARENT")), both);
        // A copy taken after the export, before a later `cmd_name`: the name is renewed.
        let mut later = Command::new("git");
        later
            .env_clear()
            .env(PARENT_SID_ENV, "PARENT/OURS")
            .env("GIT_TRACE2_PARENT_NAME", "");
        assert_eq!(set_on(&later, Some("PARENT")), both);
        assert_eq!(set_on(&later, None), both);
    }

    #[test]
    fn variables_the_program_set_on_the_command_are_kept() {
        let mut explicit = Command::new("git");
        explicit.env(PARENT_SID_ENV, "ELSEWHERE");
        assert_eq!(
            set_on(&explicit, Some("PARENT")),
            ["GIT_TRACE2_PARENT_NAME"]
        );
        assert_eq!(set_on(&explicit, None), ["GIT_TRACE2_PARENT_NAME"]);
        let mut removed = Command::new("git");
        removed
            .env_remove(PARENT_SID_ENV)
            .env_remove("GIT_TRACE2_PARENT_NAME");
        assert!(set_on(&removed, Some("PARENT")).is_empty());
        // Without a parent, a session id on the command is the program's own choice.
        let mut own = Command::new("git");
        own.env(PARENT_SID_ENV, "PARENT");
        assert_eq!(set_on(&own, None), ["GIT_TRACE2_PARENT_NAME"]);
    }

    #[test]
    fn the_inherited_session_is_the_sid_without_its_own_component() {
        let nested = Session::new(Some("A/B"), None, 0, 7, None);
        assert_eq!(inherited_sid(&nested), Some("A/B"));
        let root = Session::new(None, None, 0, 7, None);
        assert_eq!(inherited_sid(&root), None);
    }

    #[test]
    fn session_variables_are_left_alone_while_tracing_is_off() {
        let mut cmd = Command::new("true");
        set_child_env(&mut cmd);
        assert_eq!(cmd.get_envs().count(), 0);
    }
}
