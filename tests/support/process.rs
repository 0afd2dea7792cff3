//! Running a program (this test binary in a role, or real git) as a child process: a
//! Git environment that nothing from the test's own environment leaks into, scratch
//! directories, trace files, and file descriptors handed down to the child.

use std::ffi::OsStr;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The git binary the tests compare with.
pub const GIT: &str = "/usr/local/bin/git";

/// Set in the environment of this test binary when it must act as `examples/emit.rs`.
pub const EMIT_CHILD: &str = "TRACE2_EMIT_CHILD";

/// A command for `program` that inherits no `GIT_*` variable from the test's
/// environment (a developer's `GIT_TRACE2` would otherwise change what is written).
pub fn clean_command(program: impl AsRef<OsStr>) -> Command {
    let mut cmd = Command::new(program);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GIT_") {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// No system config and an empty global one, so that the host's config is not read.
pub fn without_config(cmd: &mut Command) -> &mut Command {
    cmd.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
}

/// `dir` as the home directory, no system config and a global config file that does
/// not exist.
pub fn home_in<'a>(cmd: &'a mut Command, dir: &Path) -> &'a mut Command {
    cmd.env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", dir.join("no-gitconfig"))
}

/// `<dir>/<stem>.<ext>`: where [`trace_to`] points the target `ext` (`normal`, `perf`
/// or `event`).
pub fn trace_file(dir: &Path, stem: &str, ext: &str) -> PathBuf {
    dir.join(format!("{stem}.{ext}"))
}

/// Points the Normal, Perf and Event targets at `<dir>/<stem>.normal`, `.perf` and
/// `.event`.
pub fn trace_to<'a>(cmd: &'a mut Command, dir: &Path, stem: &str) -> &'a mut Command {
    cmd.env("GIT_TRACE2", trace_file(dir, stem, "normal"))
        .env("GIT_TRACE2_PERF", trace_file(dir, stem, "perf"))
        .env("GIT_TRACE2_EVENT", trace_file(dir, stem, "event"))
}

/// Runs `cmd` to its end, its output collected; panics if it cannot be started.
pub fn run(mut cmd: Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// A fresh, empty `trace2-<name>-<pid>` in the temporary directory (emptied first if an
/// earlier run of the same pid left it).
pub fn fresh_dir(name: &str) -> std::io::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("trace2-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// A pipe whose two ends are closed on exec: (read end, write end).
pub fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// Makes `fd` the child's descriptor `target`, without close-on-exec.
pub fn give_fd(cmd: &mut Command, fd: RawFd, target: RawFd) {
    // SAFETY: dup2 and fcntl are async-signal-safe and touch only the child's table.
    unsafe {
        cmd.pre_exec(move || {
            // dup2 onto itself keeps close-on-exec: clear it instead.
            let ok = if fd == target {
                libc::fcntl(fd, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, target)
            };
            if ok < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The port of a server's first stdout line, `listening on 127.0.0.1:<port>`.
pub fn read_port(server: &mut std::process::Child) -> Result<u16, String> {
    use std::io::{BufRead, BufReader};
    let stdout = server.stdout.take().ok_or("no stdout")?;
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    line.trim_end()
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse().ok())
        .ok_or_else(|| format!("no port in {line:?}"))
}

/// Waits for a server to end, at most `wait` (then kills it).
pub fn wait_bounded(
    server: &mut std::process::Child,
    wait: std::time::Duration,
) -> Result<std::process::ExitStatus, String> {
    let deadline = std::time::Instant::now() + wait;
    while std::time::Instant::now() < deadline {
        if let Some(status) = server.try_wait().map_err(|e| e.to_string())? {
            return Ok(status);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = server.kill();
    let _ = server.wait();
    Err("the server did not end".into())
}
