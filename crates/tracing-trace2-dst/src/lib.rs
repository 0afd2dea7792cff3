//! Destinations of `tracing-trace2`: where a target's lines are written, opened exactly
//! as git opens them.
//!
//! Plain I/O: this crate knows nothing of `tracing`, of records or of formats. It takes
//! bytes and hands them to the kernel. It also keeps the process clock ([`clock`]), the
//! other thing the core and the binary target share below the record's formatting.
//!
//! A destination value (spec 7.1) is parsed by [`parse_destination`] and opened by [`open`], which
//! prints git's warnings (spec 7.5) to fd 2. The result is a [`Sink`] that hands each
//! line to the kernel in one system call and reports errors instead of retrying; the
//! caller disables the target on the first error and may print [`warn_write_failed`].
//! A file also takes several whole lines per system call ([`Sink::write_lines`], up to
//! [`FILE_BATCH_LIMIT`]), which background writers use.
//!
//! | module | job |
//! |---|---|
//! | `destination_value` | parse a value, no I/O |
//! | `fd` | Unix: one-call writes that never raise SIGPIPE; the descriptor sink |
//! | `handle` | Windows: one `WriteFile` per line; the handle sink |
//! | `os` | what a descriptor number, an opened file and fd 2 become on this platform |
//! | `file` | append to a file given by path |
//! | `dir` | one file per process in a directory; the `maxFiles` cap |
//! | `socket` | Unix: `af_unix:` stream and datagram sockets (feature `sockets`, on by default) |
//! | `stream` | Unix: whole lines on a stream socket, within a deadline |
//! | `warn` | git's warning texts and `strerror` |
//! | `sink` | the [`Sink`] trait, [`MemorySink`], [`NullSink`] |
//! | `clock` | the process start, `t_abs` and the local UTC offset |
//! | `statics` | whether text lies in the program's read-only segments (literals) |
//!
//! ```
//! use tracing_trace2_dst::{OpenSettings, Opened, SocketKind, DestinationValue, open, parse_destination};
//!
//! // What git would make of a value, without opening anything.
//! assert_eq!(
//!     parse_destination("af_unix:dgram:/run/collector.sock"),
//!     DestinationValue::UnixSocket { kind: SocketKind::Dgram, path: "/run/collector.sock".into() },
//! );
//!
//! // A file target: opened for appending, one `write` per line.
//! let path = std::env::temp_dir().join(format!("trace2-dst-doc-{}.normal", std::process::id()));
//! let settings = OpenSettings {
//!     env_name: "GIT_TRACE2",
//!     dst_debug: false,
//!     max_files: 0,
//!     sid_component: String::new(),
//! };
//! let Opened::Sink(sink) = open(path.to_str().unwrap(), &settings) else {
//!     panic!("not opened")
//! };
//! sink.write_line(b"version 2.47.3\n")?;
//! sink.write_line(b"atexit elapsed:0.000563 code:0\n")?;
//! assert_eq!(
//!     std::fs::read_to_string(&path)?,
//!     "version 2.47.3\natexit elapsed:0.000563 code:0\n"
//! );
//! # std::fs::remove_file(&path)?;
//! # Ok::<(), std::io::Error>(())
//! ```

pub mod clock;
mod destination_value;
mod dir;
#[cfg(unix)]
mod fd;
mod file;
#[cfg(windows)]
mod handle;
mod os;
mod sink;
#[cfg(all(unix, feature = "sockets"))]
mod socket;
pub mod statics;
#[cfg(all(unix, feature = "sockets"))]
mod stream;
mod warn;

#[cfg(test)]
mod test_support;

pub use destination_value::{
    DestinationValue, SocketKind, is_absolute_on_windows, is_named_pipe_path, parse_destination,
};
pub use dir::DISCARD_SENTINEL;
#[cfg(all(unix, feature = "sockets"))]
pub use socket::SOCKET_TIMEOUT;
pub use warn::{
    errno_text, format_warning, strerror, warn_write_failed, warning, write_failed_message,
};

pub use sink::{FILE_BATCH_LIMIT, MemorySink, NullSink, Sink};
use warn::Reporter;

/// Tells the sinks that every other thread of the process is gone without cleanup
/// (Windows' `ExitProcess` before the exit lines are written): a lock a killed thread
/// held stays held, so from then on a sink does not wait for its own write lock. A no-op
/// where sinks take no lock.
pub fn other_threads_gone() {
    #[cfg(windows)]
    handle::other_threads_gone();
}

/// What [`open`] needs besides the value.
#[derive(Clone, Debug)]
pub struct OpenSettings {
    /// The environment variable naming this target (`GIT_TRACE2`, `GIT_TRACE2_PERF`,
    /// `GIT_TRACE2_EVENT`); git uses it in every message, even for config values.
    pub env_name: &'static str,
    /// `GIT_TRACE2_DST_DEBUG` / `trace2.destinationDebug`: print the open warnings.
    pub dst_debug: bool,
    /// `GIT_TRACE2_MAX_FILES` / `trace2.maxFiles` for directory targets; 0 = no limit.
    pub max_files: u32,
    /// The last component of the session id; names the file in a directory target.
    pub sid_component: String,
}

/// The outcome of [`open`].
pub enum Opened {
    /// Ready to write.
    Sink(Box<dyn Sink>),
    /// Writing into the `git-trace2-discard` sentinel of a full directory: the Event
    /// target must add `too_many_files` after `version`.
    Sentinel(Box<dyn Sink>),
    /// Nothing to write to (value off, invalid, or the open failed).
    Disabled,
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Opened::Sink(_) => "Sink",
            Opened::Sentinel(_) => "Sentinel",
            Opened::Disabled => "Disabled",
        })
    }
}

/// Opens a destination exactly as git does, printing git's warnings (spec 7.5) to fd 2:
/// the unknown-value warning always, the others only when `settings.dst_debug`.
pub fn open(value: &str, settings: &OpenSettings) -> Opened {
    let mut to_stderr = |message: &str| warning(message);
    open_reporting(
        value,
        settings,
        &mut Reporter::new(settings.dst_debug, &mut to_stderr),
    )
}

/// [`open`] for a writer that writes lines later than they are traced (a background
/// writer): a numeric descriptor target is pinned to the file it names now, through a
/// private duplicate (close-on-exec, numbered high), so that a host that closes the
/// descriptor and opens something else under the same number does not receive trace
/// lines, not even those traced before it did. Git writes on the traced thread, where a
/// line goes to what the number names at that moment; a background writer cannot know
/// that moment, and keeps the first. Other values open as with [`open`].
pub fn open_deferred(value: &str, settings: &OpenSettings) -> Opened {
    let mut to_stderr = |message: &str| warning(message);
    let mut report = Reporter::new(settings.dst_debug, &mut to_stderr);
    match parse_destination(value) {
        DestinationValue::Fd(fd) => Opened::Sink(os::pinned_descriptor(fd)),
        _ => open_reporting(value, settings, &mut report),
    }
}

/// [`open`] with the warnings going to `report`.
fn open_reporting(value: &str, settings: &OpenSettings, report: &mut Reporter<'_>) -> Opened {
    match parse_destination(value) {
        DestinationValue::Disabled => Opened::Disabled,
        // Not checked now: an fd that is not open fails on the first write, as in git.
        DestinationValue::Fd(fd) => Opened::Sink(os::descriptor(fd)),
        // On Unix the path is opened as a file first, and looked at only when the kernel
        // says it names a directory: no `stat` before the open of every process.
        #[cfg(unix)]
        DestinationValue::Path(path) => file::open_file(&path, settings, report),
        #[cfg(not(unix))]
        DestinationValue::Path(path) if !names_a_pipe(&path) && path.is_dir() => {
            dir::open_in_dir(&path, settings, report)
        }
        #[cfg(not(unix))]
        DestinationValue::Path(path) => file::open_file(&path, settings, report),
        #[cfg(all(unix, feature = "sockets"))]
        DestinationValue::UnixSocket { kind, path } => {
            socket::open_socket(value, kind, &path, settings.env_name, report)
        }
        #[cfg(all(unix, not(feature = "sockets")))]
        DestinationValue::UnixSocket { .. } => {
            report.always(&format!(
                "trace2: '{}' cannot write to sockets in this build: '{value}'",
                settings.env_name
            ));
            Opened::Disabled
        }
        // Git for Windows is built without Unix sockets (`NO_UNIX_SOCKETS`): the value
        // is as unknown to it as any other.
        #[cfg(not(unix))]
        DestinationValue::UnixSocket { .. } => unknown_value(value, settings, report),
        DestinationValue::Unknown(text) => unknown_value(&text, settings, report),
    }
}

/// Whether `path` is a Windows named pipe, which must not be looked at before it is
/// opened: std's `metadata` opens the path, which takes the pipe's listening instance
/// (the collector sees an empty connection, and the real open then finds the pipe busy).
#[cfg(not(unix))]
fn names_a_pipe(path: &std::path::Path) -> bool {
    cfg!(windows) && path.to_str().is_some_and(is_named_pipe_path)
}

/// Git's warning for a value it cannot use, printed whatever the dst-debug setting.
fn unknown_value(value: &str, settings: &OpenSettings, report: &mut Reporter<'_>) -> Opened {
    report.always(&format!(
        "trace2: unknown value for '{}': '{value}'",
        settings.env_name
    ));
    Opened::Disabled
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{child_or_run, git_stderr, open_collect, settings};

    #[test]
    fn off_values_open_nothing_silently() {
        for v in ["", "0", "false", "FALSE"] {
            let (opened, seen) = open_collect(v, &settings(true, 0));
            assert!(matches!(opened, Opened::Disabled), "{v:?}");
            assert!(seen.is_empty());
        }
    }

    #[test]
    fn unknown_value_always_warns_like_git() {
        for v in ["yes", "on", "10", "rel/path"] {
            for debug in [false, true] {
                let (opened, ours) = open_collect(v, &settings(debug, 0));
                assert!(matches!(opened, Opened::Disabled));
                let Some(git) = git_stderr(&[("GIT_TRACE2_EVENT", v)]) else {
                    return;
                };
                assert_eq!(
                    String::from_utf8_lossy(&ours),
                    String::from_utf8_lossy(&git)
                );
            }
        }
    }

    #[test]
    fn open_prints_to_fd2() {
        let out = child_or_run(concat!(module_path!(), "::open_prints_to_fd2"), &[], || {
            let opened = open("on", &settings(false, 0));
            assert!(matches!(opened, Opened::Disabled));
        });
        assert!(out.status.success(), "{out:?}");
        let Some(git) = git_stderr(&[("GIT_TRACE2_EVENT", "on")]) else {
            return;
        };
        assert_eq!(out.stderr, git);
    }

    #[test]
    fn true_means_stderr() {
        let out = child_or_run(concat!(module_path!(), "::true_means_stderr"), &[], || {
            let Opened::Sink(sink) = open("TRUE", &settings(true, 0)) else {
                panic!("no sink")
            };
            sink.write_line(b"to fd 2\n").unwrap();
        });
        assert!(out.status.success(), "{out:?}");
        assert_eq!(out.stderr, b"to fd 2\n");
    }

    /// `GIT_TRACE2=5` with fd 5 closed: the open succeeds, the first write fails with
    /// EBADF, and the warning is the one real git prints in that situation.
    #[test]
    fn closed_fd_fails_on_first_write_like_git() {
        let out = child_or_run(
            concat!(module_path!(), "::closed_fd_fails_on_first_write_like_git"),
            &[],
            || {
                // SAFETY: the child only needs fd 5 to be closed; nothing of ours uses it.
                unsafe { libc::close(5) };
                let mut s = settings(true, 0);
                s.env_name = "GIT_TRACE2";
                let Opened::Sink(sink) = open("5", &s) else {
                    panic!("fd target not opened")
                };
                let err = sink.write_line(b"x\n").unwrap_err();
                // EBADF; on Windows ERROR_INVALID_HANDLE, which git reads as EBADF.
                assert_eq!(strerror(&err), "Bad file descriptor");
                warn_write_failed(s.env_name, &err);
            },
        );
        assert!(out.status.success(), "{out:?}");
        let Some(git) = git_stderr(&[("GIT_TRACE2", "5"), ("GIT_TRACE2_DST_DEBUG", "1")]) else {
            return;
        };
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&git)
        );
    }

    #[test]
    fn path_value_picks_file_or_directory() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap();
        let mut s = settings(true, 0);
        s.sid_component = "sid-x".into();
        let Opened::Sink(in_dir) = open_collect(d, &s).0 else {
            panic!("dir")
        };
        in_dir.write_line(b"d\n").unwrap();
        let file = format!("{d}/plain");
        let Opened::Sink(plain) = open_collect(&file, &s).0 else {
            panic!("file")
        };
        plain.write_line(b"f\n").unwrap();
        assert_eq!(std::fs::read(dir.path().join("sid-x")).unwrap(), b"d\n");
        assert_eq!(std::fs::read(&file).unwrap(), b"f\n");
    }
}

/// The README's examples, run as doctests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
