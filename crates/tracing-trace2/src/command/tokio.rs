//! Child processes of `tokio::process::Command` (feature `tokio`): the same `child_start`
//! and `child_exit` lines, nesting variables and rules as the `std` form in
//! [`command`](super), with `async` waits.
//!
//! ```no_run
//! use tokio::process::Command;
//! use tracing_trace2::command::tokio::Trace2TokioCommandExt;
//!
//! #[tracing::instrument(fields(trace2.category = "sync"))]
//! async fn fetch() -> std::io::Result<()> {
//!     // child_start[0] git fetch … child_exit[0] pid:… code:0, both on this task's lane.
//!     let status = Command::new("git").arg("fetch").trace2_status().await?;
//!
//!     // A child of a class of our own, waited for later.
//!     let mut child = Command::new("sleep").arg("1").trace2_class("helper").spawn()?;
//!     child.wait().await?;
//!     Ok(())
//! }
//! ```
//!
//! `child_start` is written when the command is spawned, `child_exit` when the child is
//! seen to end: when [`TracedChild::wait`], [`TracedChild::wait_with_output`] or
//! [`TracedChild::kill`] completes (or [`Traced::status`]/[`Traced::output`], which spawn
//! and wait), by [`TracedChild::try_wait`] once it reports an exit, or when a
//! [`TracedChild`] is dropped after its process ended. A wait's line names the place
//! where the wait was called (an `async fn` cannot take its caller's location, so the
//! location is taken when the future is made); a drop's names the place where the child
//! was spawned. A future dropped before its child ended (a `select!` that took another
//! branch) writes nothing; the child's [`TracedChild`], if still held, writes its
//! `child_exit` later. Tokio's own rules stay: `kill_on_drop`, and `output` piping
//! stdout and stderr whatever was set.
//!
//! Lines go where any Trace2 call from async code goes: to the lane of the innermost
//! span entered on the polling thread. Inside an `#[instrument] async fn` (or a future
//! `.instrument(span)`), `child_start` and `child_exit` are on that span's Trace2 thread
//! whichever worker polls it; outside any span, on the polling worker's own thread.

use std::future::Future;
use std::io;
use std::panic::Location;
use std::process::{ExitStatus, Output};

use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use super::child::ChildRecord;
use super::{Ready, Traced};

/// [`add_session_env`](super::add_session_env) for a `tokio::process::Command`: sets this
/// process's session variables on `cmd` so that a git child nests under this process
/// after `env_clear()` or with a copy of the environment taken before the lifecycle
/// started. Does nothing while no lifecycle with an enabled target runs.
pub fn add_session_env(cmd: &mut Command) -> &mut Command {
    super::add_session_env(cmd.as_std_mut());
    cmd
}

/// Trace2 for `tokio::process::Command`: the `trace2*` methods start the command and
/// write `child_start`, then `child_exit` when it is seen to end.
pub trait Trace2TokioCommandExt {
    /// Traces this command as an unclassified child (class `?`); set more with the
    /// [`Traced`] methods, then start it.
    fn trace2(&mut self) -> Traced<'_, Command>;

    /// Traces this command with a child class (`pager`, `editor`, `transport/ssh`, …).
    fn trace2_class(&mut self, class: &str) -> Traced<'_, Command>;

    /// Traces this command as the hook `hook_name` (class `hook`).
    fn trace2_hook(&mut self, hook_name: &str) -> Traced<'_, Command>;

    /// [`Command::spawn`], traced as an unclassified child.
    fn trace2_spawn(&mut self) -> io::Result<TracedChild>;

    /// [`Command::status`], traced as an unclassified child.
    fn trace2_status(&mut self) -> impl Future<Output = io::Result<ExitStatus>> + Send + use<Self>;

    /// [`Command::output`], traced as an unclassified child.
    fn trace2_output(&mut self) -> impl Future<Output = io::Result<Output>> + Send + use<Self>;
}

impl Trace2TokioCommandExt for Command {
    fn trace2(&mut self) -> Traced<'_, Command> {
        Traced::new(self)
    }

    fn trace2_class(&mut self, class: &str) -> Traced<'_, Command> {
        self.trace2().trace2_class(class)
    }

    fn trace2_hook(&mut self, hook_name: &str) -> Traced<'_, Command> {
        self.trace2().trace2_hook(hook_name)
    }

    #[track_caller]
    fn trace2_spawn(&mut self) -> io::Result<TracedChild> {
        self.trace2().spawn()
    }

    #[track_caller]
    fn trace2_status(&mut self) -> impl Future<Output = io::Result<ExitStatus>> + Send + use<> {
        self.trace2().status()
    }

    #[track_caller]
    fn trace2_output(&mut self) -> impl Future<Output = io::Result<Output>> + Send + use<> {
        self.trace2().output()
    }
}

impl Traced<'_, Command> {
    /// Starts the command ([`Command::spawn`]) after `child_start`; a failure to start is
    /// traced as `child_exit` with pid and code -1. Must be called within a tokio
    /// runtime, as [`Command::spawn`].
    #[track_caller]
    pub fn spawn(self) -> io::Result<TracedChild> {
        let mut record = self.spec.start(self.cmd.as_std_mut());
        match self.cmd.spawn() {
            Ok(child) => {
                if let Some(pid) = child.id() {
                    record.running(pid);
                }
                Ok(TracedChild {
                    child: Some(child),
                    record,
                })
            }
            Err(err) => {
                record.failed();
                Err(err)
            }
        }
    }

    /// Runs the command to its end ([`Command::status`]): spawned now, `child_exit` when
    /// the future completes. As tokio does, piped stdio handles are closed at once.
    #[track_caller]
    pub fn status(self) -> impl Future<Output = io::Result<ExitStatus>> + Send + use<> {
        let at = Location::caller();
        let child = self.spawn();
        async move {
            let mut child = child?;
            drop(child.stdin().take());
            drop(child.stdout().take());
            drop(child.stderr().take());
            child.wait_at(at).await
        }
    }

    /// Runs the command and collects its output ([`Command::output`]: stdout and stderr
    /// are piped whatever was set); spawned now, `child_exit` when the future completes.
    #[track_caller]
    pub fn output(self) -> impl Future<Output = io::Result<Output>> + Send + use<> {
        let at = Location::caller();
        self.cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let child = self.spawn();
        async move { child?.wait_with_output_at(at).await }
    }
}

/// A running tokio child whose `child_exit` is written when it is seen to end.
#[derive(Debug)]
pub struct TracedChild {
    /// Always there, but for the moment [`TracedChild::ready`] or
    /// [`TracedChild::wait_with_output`] (which consume the handle) take it out.
    child: Option<Child>,
    record: ChildRecord,
}

impl TracedChild {
    /// The child's process id while it runs ([`Child::id`]: `None` once it was reaped).
    pub fn id(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// The child's Trace2 id (0, 1, 2, … in this process).
    pub fn child_id(&self) -> u64 {
        self.record.child_id()
    }

    /// The child's stdin, when it was piped ([`Child::stdin`]).
    pub fn stdin(&mut self) -> &mut Option<ChildStdin> {
        &mut self.child().stdin
    }

    /// The child's stdout, when it was piped ([`Child::stdout`]).
    pub fn stdout(&mut self) -> &mut Option<ChildStdout> {
        &mut self.child().stdout
    }

    /// The child's stderr, when it was piped ([`Child::stderr`]).
    pub fn stderr(&mut self) -> &mut Option<ChildStderr> {
        &mut self.child().stderr
    }

    /// Sends the child a kill signal without waiting ([`Child::start_kill`]); its
    /// `child_exit` comes when it is seen to end.
    pub fn start_kill(&mut self) -> io::Result<()> {
        self.child().start_kill()
    }

    /// Kills the child and waits for it ([`Child::kill`]), then writes `child_exit`
    /// (code 128 + 9 on Unix).
    #[track_caller]
    pub fn kill(&mut self) -> impl Future<Output = io::Result<()>> + Send + '_ {
        let at = Location::caller();
        async move {
            self.child().start_kill()?;
            self.wait_at(at).await.map(drop)
        }
    }

    /// Waits for the child to end ([`Child::wait`]) and writes `child_exit` (once).
    #[track_caller]
    pub fn wait(&mut self) -> impl Future<Output = io::Result<ExitStatus>> + Send + '_ {
        self.wait_at(Location::caller())
    }

    /// Checks whether the child has ended ([`Child::try_wait`]); writes `child_exit`
    /// (once) when it has.
    #[track_caller]
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        let status = self.child().try_wait()?;
        if let Some(status) = status {
            self.record.exited(status, Location::caller());
        }
        Ok(status)
    }

    /// Collects the child's piped stdout and stderr and waits for it
    /// ([`Child::wait_with_output`]), then writes `child_exit`.
    #[track_caller]
    pub fn wait_with_output(self) -> impl Future<Output = io::Result<Output>> + Send {
        self.wait_with_output_at(Location::caller())
    }

    /// Releases a background child: writes `child_ready` and hands back the process,
    /// which is not traced any further (no `child_exit`, as in git).
    #[track_caller]
    pub fn ready(mut self, ready: Ready) -> Child {
        self.record.ready(ready.as_str());
        self.take_child()
    }

    /// The child, there for as long as the handle is.
    fn child(&mut self) -> &mut Child {
        self.child
            .as_mut()
            .expect("the child is only taken by methods that consume the handle")
    }

    /// The child, out of a handle being consumed.
    fn take_child(&mut self) -> Child {
        self.child
            .take()
            .expect("the child is only taken by methods that consume the handle")
    }

    async fn wait_at(&mut self, at: &'static Location<'static>) -> io::Result<ExitStatus> {
        let status = self.child().wait().await?;
        self.record.exited(status, at);
        Ok(status)
    }

    async fn wait_with_output_at(mut self, at: &'static Location<'static>) -> io::Result<Output> {
        // The child moves into tokio's own collection of the pipes. A future dropped
        // before that returns drops the child as tokio does, unseen: no `child_exit`.
        let output = self.take_child().wait_with_output().await?;
        self.record.exited(output.status, at);
        Ok(output)
    }
}

impl Drop for TracedChild {
    fn drop(&mut self) {
        if self.record.is_open()
            && let Some(child) = &mut self.child
            && let Ok(Some(status)) = child.try_wait()
        {
            self.record.exited_on_drop(status);
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::future::Future;

    use tracing::Instrument;
    use tracing_subscriber::prelude::*;
    use tracing_trace2_core::{Format, MemorySink, Record, Target, Trace2Event, Trace2Layer};

    use super::*;
    use crate::command::exit_code;

    #[test]
    fn add_session_env_leaves_a_command_alone_while_tracing_is_off() {
        let mut cmd = Command::new("git");
        cmd.env_clear();
        let same: *const Command = add_session_env(&mut cmd);
        assert!(std::ptr::eq(same, &cmd));
        assert_eq!(cmd.as_std().get_envs().count(), 0);
    }

    /// Renders child records as `<thread> <event> <child id> [<pid known> <code>]
    /// <line>`, region enters as `<thread> enter <label>`; leaves out the rest.
    struct Children;
    impl Format for Children {
        fn format(&self, record: &Record<'_>, out: &mut Vec<u8>) {
            let what = match &record.event {
                Trace2Event::ChildStart(child) => format!("child_start {}", child.child_id),
                Trace2Event::ChildExit {
                    child_id,
                    pid,
                    code,
                    ..
                } => format!("child_exit {child_id} {} {code}", *pid > 0),
                Trace2Event::ChildReady {
                    child_id, ready, ..
                } => format!("child_ready {child_id} {ready}"),
                Trace2Event::RegionEnter { region, .. } => {
                    out.extend_from_slice(
                        format!("{} enter {}\n", record.thread, region.label.unwrap_or("-"))
                            .as_bytes(),
                    );
                    return;
                }
                _ => return,
            };
            let line = format!("{} {what} {}\n", record.thread, record.callsite.line);
            out.extend_from_slice(line.as_bytes());
        }
    }

    /// Runs `f` to its end on a current-thread runtime under a layer writing
    /// [`Children`] lines; returns its result and the lines.
    fn traced<F: Future>(f: impl FnOnce() -> F) -> (F::Output, Vec<String>) {
        let sink = MemorySink::new();
        let layer = Trace2Layer::builder()
            .with_target(Target::new("GIT_TRACE2_EVENT", Children, sink.clone()))
            .build();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .unwrap();
        let subscriber = tracing_subscriber::registry().with(layer);
        let out = tracing::subscriber::with_default(subscriber, || rt.block_on(f()));
        let lines = sink.to_string_lossy().lines().map(str::to_owned).collect();
        (out, lines)
    }

    /// The words of each line after the thread name.
    fn words(lines: &[String]) -> Vec<Vec<String>> {
        lines
            .iter()
            .map(|l| l.split(' ').skip(1).map(str::to_owned).collect())
            .collect()
    }

    #[test]
    fn status_and_output_write_start_and_exit_at_their_call() {
        let ((status, out, status_line, output_line), lines) = traced(|| async {
            let mut cmd = Command::new("sh");
            cmd.args(["-c", "exit 3"]);
            let (status, status_line) = (cmd.trace2_status(), line!());
            let status = status.await.unwrap();
            let mut cmd = Command::new("sh");
            cmd.args(["-c", "echo out; echo err >&2"]);
            let (out, output_line) = (cmd.trace2_output(), line!());
            (status, out.await.unwrap(), status_line, output_line)
        });
        assert_eq!(status.code(), Some(3));
        assert_eq!(
            (&out.stdout[..], &out.stderr[..]),
            (&b"out\n"[..], &b"err\n"[..])
        );
        let w = words(&lines);
        assert_eq!(w.len(), 4, "{lines:?}");
        let id = |i: usize| w[i][1].clone();
        assert_eq!(w[0][0], "child_start");
        assert_eq!(w[1][..4], ["child_exit", &id(0), "true", "3"]);
        assert_eq!(w[2][0], "child_start");
        assert_eq!(w[3][..4], ["child_exit", &id(2), "true", "0"]);
        // Both lines of a child name the call, not this module's code.
        for (i, line) in [
            (0, status_line),
            (1, status_line),
            (2, output_line),
            (3, output_line),
        ] {
            assert_eq!(w[i].last().unwrap(), &line.to_string(), "{lines:?}");
        }
    }

    #[test]
    fn spawned_children_end_once_however_they_are_seen() {
        let (lines_at, lines) = traced(|| async {
            // Killed: 128 + SIGKILL.
            let mut sleeper = Command::new("sleep").arg("5").trace2_spawn().unwrap();
            assert_eq!(sleeper.try_wait().unwrap(), None);
            let (kill, kill_line) = (sleeper.kill(), line!());
            kill.await.unwrap();
            // A second wait sees the same end and writes nothing more.
            assert_eq!(exit_code(sleeper.wait().await.unwrap()), 128 + 9);
            drop(sleeper);

            // Reaped by try_wait, then dropped: one child_exit.
            let mut done = Command::new("true").trace2_spawn().unwrap();
            let mut try_line = 0;
            while try_line == 0 {
                let (status, line) = (done.try_wait(), line!());
                if status.unwrap().is_some() {
                    try_line = line;
                }
                tokio::task::yield_now().await;
            }
            drop(done);

            // Ended, never waited for: its drop writes the end, at the spawn.
            let mut cmd = Command::new("true");
            let (dropped, spawn_line) = (cmd.trace2_spawn().unwrap(), line!());
            let pid = dropped.id().unwrap();
            wait_until_ended(pid).await;
            drop(dropped);

            // Released: child_ready and no child_exit.
            let released = Command::new("true").trace2_spawn().unwrap();
            let mut child = released.ready(Ready::Ready);
            assert!(child.wait().await.unwrap().success());

            // Collected with wait_with_output.
            let mut cmd = Command::new("sh");
            cmd.args(["-c", "cat; exit 4"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped());
            let piped = cmd.trace2_spawn().unwrap();
            let out = piped.wait_with_output().await.unwrap();
            assert_eq!(out.status.code(), Some(4));

            // Could not start: pid and code -1.
            let err = Command::new("/nonexistent/trace2-no-such-program")
                .trace2_spawn()
                .unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::NotFound);
            (kill_line, try_line, spawn_line)
        });
        let (kill_line, try_line, spawn_line) = lines_at;
        let w = words(&lines);
        let kinds: Vec<&str> = w.iter().map(|l| l[0].as_str()).collect();
        assert_eq!(
            kinds,
            [
                "child_start",
                "child_exit",
                "child_start",
                "child_exit",
                "child_start",
                "child_exit",
                "child_start",
                "child_ready",
                "child_start",
                "child_exit",
                "child_start",
                "child_exit",
            ],
            "{lines:?}"
        );
        for pair in w.chunks(2) {
            assert_eq!(pair[0][1], pair[1][1], "one id per child: {lines:?}");
        }
        let line = |i: usize| w[i].last().unwrap().parse::<u32>().unwrap();
        assert_eq!(w[1][2..4], ["true", "137"]);
        assert_eq!(line(1), kill_line);
        assert_eq!(w[3][2..4], ["true", "0"]);
        assert_eq!(line(3), try_line);
        assert_eq!(line(4), spawn_line);
        assert_eq!(line(5), spawn_line, "a drop names the spawn");
        assert_eq!(w[7][2], "ready");
        assert_eq!(w[9][2..4], ["true", "4"]);
        assert_eq!(w[11][2..4], ["false", "-1"]);
    }

    /// Waits until process `pid` has ended (a zombie waiting to be reaped), without
    /// reaping it.
    async fn wait_until_ended(pid: u32) {
        let stat = format!("/proc/{pid}/stat");
        loop {
            let ended = std::fs::read_to_string(&stat).map_or(true, |s| {
                s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            });
            if ended {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    }

    /// Two tasks that wait for their children at the same time: each child's lines are
    /// on the Trace2 thread of the task's span, whatever else runs meanwhile.
    #[test]
    fn lines_go_to_the_lane_of_the_waiting_task() {
        let ((), lines) = traced(|| async {
            let slow = tokio::spawn(
                async {
                    Command::new("sleep")
                        .arg("0.2")
                        .trace2_status()
                        .await
                        .unwrap();
                }
                .instrument(tracing::info_span!("slow")),
            );
            let quick = tokio::spawn(
                async {
                    tokio::task::yield_now().await;
                    Command::new("true").trace2_status().await.unwrap();
                }
                .instrument(tracing::info_span!("quick")),
            );
            quick.await.unwrap();
            slow.await.unwrap();
        });
        let thread_of = |label: &str| {
            lines
                .iter()
                .find(|l| l.ends_with(&format!(" enter {label}")))
                .map(|l| l.split(' ').next().unwrap().to_owned())
                .unwrap()
        };
        let (slow, quick) = (thread_of("slow"), thread_of("quick"));
        assert_ne!(slow, quick, "{lines:?}");
        let children: Vec<&String> = lines.iter().filter(|l| l.contains(" child_")).collect();
        assert_eq!(children.len(), 4, "{lines:?}");
        let on = |i: usize| children[i].split(' ').next().unwrap();
        // slow starts first, quick starts and ends while slow waits, then slow ends.
        assert_eq!(
            [on(0), on(1), on(2), on(3)],
            [slow.as_str(), &quick, &quick, &slow],
            "{lines:?}"
        );
    }
}
