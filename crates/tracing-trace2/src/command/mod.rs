//! Child processes: `child_start`, `child_exit`, `child_ready` and `exec` for
//! `std::process::Command`, and the environment that makes a child's trace nest under
//! ours.
//!
//! ```no_run
//! use std::process::Command;
//! use tracing_trace2::command::Trace2CommandExt;
//!
//! # fn main() -> std::io::Result<()> {
//! // child_start[0] git status --short … child_exit[0] pid:… code:0
//! let status = Command::new("git").args(["status", "--short"]).trace2_status()?;
//!
//! // A hook: class "hook", hook name "pre-commit".
//! let mut hook = Command::new(".git/hooks/pre-commit");
//! let status = hook.trace2_hook("pre-commit").status()?;
//!
//! // A child of a class of our own, waited for later.
//! let mut child = Command::new("sleep").arg("1").trace2_class("helper").spawn()?;
//! child.wait()?;
//! # Ok(()) }
//! ```
//!
//! What `child_start` shows is read from the command: the program and its arguments
//! (`argv`, redacted as git redacts), the directory set with `current_dir` (`cd`). A
//! command whose program is named `git` is a git child (its line reads `git <args>`, as
//! git writes its own sub-commands); [`Traced::trace2_git`] says so for a git run under
//! another name, or denies it. [`Traced::trace2_shell`] marks a command that runs
//! through a shell, and [`Traced::trace2_argv`] replaces the argv shown (git shows a
//! shell alias as the alias text and its arguments, not as `sh -c …`).
//!
//! While the process lifecycle runs ([`crate::Lifecycle`]), every traced command gets
//! `GIT_TRACE2_PARENT_SID` and `GIT_TRACE2_PARENT_NAME` from this process's session, so
//! a git (or another traced program) started by it writes its lines under our session
//! id, one level deeper, with our command hierarchy. A value the program set on the
//! command itself is kept, unless its `GIT_TRACE2_PARENT_SID` is the one this process
//! inherited or its own: that comes from a copy of the environment (`env_clear()` then
//! `envs(copy)`), taken before the lifecycle started (the child would be our sibling) or
//! before a later `cmd_name` (its name would be old), and both variables are replaced. A
//! command started without these methods gets the same variables from
//! [`add_session_env`].
//!
//! `child_exit` is written when the child is reaped: by [`TracedChild::wait`],
//! [`TracedChild::try_wait`] once it reports an exit, [`TracedChild::wait_with_output`],
//! or when a [`TracedChild`] is dropped after its process ended (that line names the
//! place where the child was started). The code is the exit status, or 128 + the signal
//! number for a child killed by a signal; a command that cannot be started gets
//! `child_exit` with pid -1 and code -1, as in git. A child dropped while still running
//! gets no `child_exit` (nobody saw it end); one released with [`TracedChild::ready`]
//! gets `child_ready` instead.
//!
//! With the `tokio` feature, `command::tokio` gives `tokio::process::Command` the same
//! traced form, with `async` waits.

mod child;
#[cfg(feature = "tokio")]
pub mod tokio;

use std::io::{self, Read};
use std::panic::Location;
use std::process::{
    Child, ChildStderr, ChildStdin, ChildStdout, Command, ExitStatus, Output, Stdio,
};

#[cfg(unix)]
use tracing_trace2_core::api;

pub use child::exit_code;
#[cfg(unix)]
use child::full_argv;
use child::{ChildRecord, ChildSpec, set_child_env};

/// Sets this process's session variables (`GIT_TRACE2_PARENT_SID`,
/// `GIT_TRACE2_PARENT_NAME`) on `cmd`, so that a git (or another traced program) it
/// starts nests under this process even when the command does not inherit the
/// process's environment: after `env_clear()`, or with a copy of the environment taken
/// before the lifecycle started. Does nothing while no lifecycle with an enabled target
/// runs ([`crate::is_active`]).
///
/// A variable the program set (or removed) on the command itself is kept, unless the
/// command's `GIT_TRACE2_PARENT_SID` is the one this process inherited or its own: that
/// is a copy of the environment, and both variables are replaced with the current ones.
/// The traced forms ([`Trace2CommandExt`]) do this themselves.
///
/// ```no_run
/// use std::process::Command;
///
/// let env: Vec<_> = std::env::vars_os().collect(); // before the lifecycle
/// let _trace2 = tracing_trace2::Trace2::from_env().init();
/// let mut git = Command::new("git");
/// git.arg("status").env_clear().envs(env);
/// tracing_trace2::add_session_env(&mut git).status()?; // git nests under this process
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn add_session_env(cmd: &mut Command) -> &mut Command {
    set_child_env(cmd);
    cmd
}

/// Trace2 for `std::process::Command`: the `trace2*` methods start the command and
/// write `child_start`, then `child_exit` when it is reaped.
pub trait Trace2CommandExt {
    /// Traces this command as an unclassified child (class `?`); set more with the
    /// [`Traced`] methods, then start it.
    fn trace2(&mut self) -> Traced<'_>;

    /// Traces this command with a child class (`pager`, `editor`, `transport/ssh`, …).
    fn trace2_class(&mut self, class: &str) -> Traced<'_>;

    /// Traces this command as the hook `hook_name` (class `hook`).
    fn trace2_hook(&mut self, hook_name: &str) -> Traced<'_>;

    /// [`Command::spawn`], traced as an unclassified child.
    fn trace2_spawn(&mut self) -> io::Result<TracedChild>;

    /// [`Command::status`], traced as an unclassified child.
    fn trace2_status(&mut self) -> io::Result<ExitStatus>;

    /// [`Command::output`], traced as an unclassified child (see [`Traced::output`]).
    fn trace2_output(&mut self) -> io::Result<Output>;
}

impl Trace2CommandExt for Command {
    fn trace2(&mut self) -> Traced<'_> {
        Traced::new(self)
    }

    fn trace2_class(&mut self, class: &str) -> Traced<'_> {
        self.trace2().trace2_class(class)
    }

    fn trace2_hook(&mut self, hook_name: &str) -> Traced<'_> {
        self.trace2().trace2_hook(hook_name)
    }

    #[track_caller]
    fn trace2_spawn(&mut self) -> io::Result<TracedChild> {
        self.trace2().spawn()
    }

    #[track_caller]
    fn trace2_status(&mut self) -> io::Result<ExitStatus> {
        self.trace2().status()
    }

    #[track_caller]
    fn trace2_output(&mut self) -> io::Result<Output> {
        self.trace2().output()
    }
}

/// A command with what its `child_start` line says about it; made by
/// [`Trace2CommandExt`] (or, for `tokio::process::Command`, by
/// `tokio::Trace2TokioCommandExt`), started by [`Traced::spawn`], [`Traced::status`],
/// [`Traced::output`] or [`Traced::exec`] (their tokio forms are `async`).
#[derive(Debug)]
#[must_use = "a Traced command does nothing until it is started"]
pub struct Traced<'a, C = Command> {
    cmd: &'a mut C,
    spec: ChildSpec,
}

impl<'a, C> Traced<'a, C> {
    /// An unclassified child (class `?`).
    fn new(cmd: &'a mut C) -> Self {
        Traced {
            cmd,
            spec: ChildSpec::default(),
        }
    }

    /// The child class (`?` unless set).
    pub fn trace2_class(mut self, class: &str) -> Self {
        class.clone_into(&mut self.spec.class);
        self
    }

    /// Marks the child as the hook `hook_name`: class `hook` and a hook name.
    pub fn trace2_hook(mut self, hook_name: &str) -> Self {
        "hook".clone_into(&mut self.spec.class);
        self.spec.hook_name = Some(hook_name.to_owned());
        self
    }

    /// Whether the child is a git sub-command (default: when the program's file name is
    /// `git`). A git child's argv is written as `git <arguments>`.
    pub fn trace2_git(mut self, git: bool) -> Self {
        self.spec.git = Some(git);
        self
    }

    /// Whether the child runs through a shell (`use_shell`; default no).
    pub fn trace2_shell(mut self, use_shell: bool) -> Self {
        self.spec.use_shell = use_shell;
        self
    }

    /// The argv written instead of the command's program and arguments (for a git
    /// child: the arguments after `git`).
    pub fn trace2_argv<I, S>(mut self, argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.spec.argv = Some(argv.into_iter().map(Into::into).collect());
        self
    }
}

impl Traced<'_> {
    /// Starts the command ([`Command::spawn`]) after `child_start`; a failure to start is
    /// traced as `child_exit` with pid and code -1.
    #[track_caller]
    pub fn spawn(self) -> io::Result<TracedChild> {
        let mut record = self.spec.start(self.cmd);
        match self.cmd.spawn() {
            Ok(child) => {
                record.running(child.id());
                Ok(TracedChild { child, record })
            }
            Err(err) => {
                record.failed();
                Err(err)
            }
        }
    }

    /// Runs the command to its end ([`Command::status`]).
    #[track_caller]
    pub fn status(self) -> io::Result<ExitStatus> {
        self.spawn()?.wait()
    }

    /// Runs the command and collects its output. Unlike [`Command::output`], which keeps
    /// stdio settings made on the command, this always reads stdout and stderr and gives
    /// the child an empty stdin (the defaults of `output`): to collect the output of a
    /// command with other stdio, use [`Traced::spawn`] and
    /// [`TracedChild::wait_with_output`].
    #[track_caller]
    pub fn output(self) -> io::Result<Output> {
        self.cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        self.spawn()?.wait_with_output()
    }

    /// Replaces this process with the command ([`std::os::unix::process::CommandExt::exec`])
    /// after an `exec` line (exe = the program, argv = program and arguments). Returns
    /// only if the exec failed, after an `exec_result` line with the error number.
    ///
    /// The layer's sinks are flushed first. The new image sees this session as its
    /// parent (its session id gets two components, with the same pid).
    #[cfg(unix)]
    #[track_caller]
    pub fn exec(self) -> io::Error {
        use std::os::unix::process::CommandExt;

        let exe = self.cmd.get_program().to_string_lossy().into_owned();
        let argv = match &self.spec.argv {
            Some(argv) => argv.clone(),
            None => full_argv(self.cmd),
        };
        set_child_env(self.cmd);
        let exec_id = api::exec(Some(&exe), &argv);
        crate::lifecycle::flush();
        let err = self.cmd.exec();
        api::exec_result(exec_id, err.raw_os_error().map_or(-1, i64::from));
        err
    }
}

/// How a background child was released ([`TracedChild::ready`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ready {
    /// The child said it is ready.
    Ready,
    /// The parent gave up waiting.
    Timeout,
    /// The child failed to get ready.
    Error,
}

impl Ready {
    /// The word written in `child_ready`.
    pub fn as_str(self) -> &'static str {
        match self {
            Ready::Ready => "ready",
            Ready::Timeout => "timeout",
            Ready::Error => "error",
        }
    }
}

/// A running child whose `child_exit` is written when it is reaped.
#[derive(Debug)]
pub struct TracedChild {
    child: Child,
    record: ChildRecord,
}

impl TracedChild {
    /// The child's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The child's Trace2 id (0, 1, 2, … in this process).
    pub fn child_id(&self) -> u64 {
        self.record.child_id()
    }

    /// The child's stdin, when it was piped ([`Child::stdin`]).
    pub fn stdin(&mut self) -> &mut Option<ChildStdin> {
        &mut self.child.stdin
    }

    /// The child's stdout, when it was piped ([`Child::stdout`]).
    pub fn stdout(&mut self) -> &mut Option<ChildStdout> {
        &mut self.child.stdout
    }

    /// The child's stderr, when it was piped ([`Child::stderr`]).
    pub fn stderr(&mut self) -> &mut Option<ChildStderr> {
        &mut self.child.stderr
    }

    /// Kills the child ([`Child::kill`]); its `child_exit` comes when it is reaped.
    pub fn kill(&mut self) -> io::Result<()> {
        self.child.kill()
    }

    /// Waits for the child to end ([`Child::wait`]) and writes `child_exit` (once).
    #[track_caller]
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        let status = self.child.wait()?;
        self.record.exited(status, Location::caller());
        Ok(status)
    }

    /// Checks whether the child has ended ([`Child::try_wait`]); writes `child_exit`
    /// (once) when it has.
    #[track_caller]
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        let status = self.child.try_wait()?;
        if let Some(status) = status {
            self.record.exited(status, Location::caller());
        }
        Ok(status)
    }

    /// Collects the child's piped stdout and stderr and waits for it
    /// ([`Child::wait_with_output`]), then writes `child_exit`.
    #[track_caller]
    pub fn wait_with_output(mut self) -> io::Result<Output> {
        // As std does: close stdin first so a child reading it can finish.
        drop(self.child.stdin.take());
        let stderr = self.child.stderr.take();
        let stderr_reader = stderr.map(|mut pipe| {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                pipe.read_to_end(&mut buf).map(|_| buf)
            })
        });
        let mut stdout = Vec::new();
        let read_out = match self.child.stdout.take() {
            Some(mut pipe) => pipe.read_to_end(&mut stdout).map(|_| ()),
            None => Ok(()),
        };
        let stderr = match stderr_reader {
            Some(reader) => reader
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("the stderr reader panicked"))),
            None => Ok(Vec::new()),
        };
        let status = self.wait()?;
        read_out?;
        Ok(Output {
            status,
            stdout,
            stderr: stderr?,
        })
    }

    /// Releases a background child: writes `child_ready` and hands back the process,
    /// which is not traced any further (no `child_exit`, as in git).
    #[track_caller]
    pub fn ready(mut self, ready: Ready) -> Child {
        self.record.ready(ready.as_str());
        // The child moves out of a type with a destructor: the rest needs no dropping.
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again; the child is read out once.
        unsafe { std::ptr::read(&this.child) }
    }
}

impl Drop for TracedChild {
    fn drop(&mut self) {
        if self.record.is_open()
            && let Ok(Some(status)) = self.child.try_wait()
        {
            self.record.exited_on_drop(status);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_that_cannot_start_reports_the_error() {
        let err = Command::new("/nonexistent/trace2-no-such-program")
            .trace2_spawn()
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[cfg(unix)]
    #[test]
    fn output_status_and_ready_pass_through() {
        let out = Command::new("sh")
            .args(["-c", "echo out; echo err >&2; exit 3"])
            .trace2_output()
            .unwrap();
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
        assert_eq!(out.status.code(), Some(3));
        let status = Command::new("true").trace2_status().unwrap();
        assert!(status.success());
        let mut child = Command::new("sleep").arg("5").trace2_spawn().unwrap();
        assert_eq!(child.try_wait().unwrap(), None);
        child.kill().unwrap();
        assert_eq!(exit_code(child.wait().unwrap()), 128 + 9);
        let mut released = Command::new("true")
            .trace2_spawn()
            .unwrap()
            .ready(Ready::Ready);
        assert!(released.wait().unwrap().success());
    }

    /// `child_start`/`child_exit` lines as `<event> <child id> <code> <line>`.
    #[cfg(unix)]
    struct ChildLines;
    #[cfg(unix)]
    impl tracing_trace2_core::Format for ChildLines {
        fn format(&self, record: &tracing_trace2_core::Record<'_>, out: &mut Vec<u8>) {
            use tracing_trace2_core::Trace2Event;
            let what = match &record.event {
                Trace2Event::ChildStart(child) => format!("child_start {} -", child.child_id),
                Trace2Event::ChildExit { child_id, code, .. } => {
                    format!("child_exit {child_id} {code}")
                }
                _ => return,
            };
            out.extend_from_slice(format!("{what} {}\n", record.callsite.line).as_bytes());
        }
    }

    /// A wait's `child_exit` names the wait; a drop's names the spawn.
    #[cfg(unix)]
    #[test]
    fn child_exit_names_the_wait_or_else_the_spawn() {
        use tracing_subscriber::prelude::*;
        let sink = tracing_trace2_core::MemorySink::new();
        let layer = tracing_trace2_core::Trace2Layer::builder()
            .with_target(tracing_trace2_core::Target::new(
                "GIT_TRACE2_EVENT",
                ChildLines,
                sink.clone(),
            ))
            .build();
        let subscriber = tracing_subscriber::registry().with(layer);
        let (waited_at, spawned_at) = tracing::subscriber::with_default(subscriber, || {
            let mut waited = Command::new("true").trace2_spawn().unwrap();
            let (_, waited_at) = (waited.wait().unwrap(), line!());
            let mut cmd = Command::new("true");
            let (dropped, spawned_at) = (cmd.trace2_spawn().unwrap(), line!());
            // Let the child end without reaping it (a zombie), so that the drop sees it.
            let pid = dropped.id();
            while !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            }) {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            drop(dropped);
            (waited_at, spawned_at)
        });
        let text = sink.to_string_lossy();
        let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split(' ').collect()).collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert_eq!(lines[1][0], "child_exit");
        assert_eq!(lines[1][3], waited_at.to_string(), "{text}");
        assert_eq!(lines[3][0], "child_exit");
        assert_eq!(lines[3][1], lines[2][1]);
        assert_eq!(lines[3][3], spawned_at.to_string(), "{text}");
    }
}
