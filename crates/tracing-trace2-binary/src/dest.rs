//! Where the frames go: the `TRACING_TRACE2_BINARY` value forms, opened with the core's
//! destinations.
//!
//! | value | destination |
//! |---|---|
//! | empty, `0`, `false` | none: the target is off |
//! | an absolute path to a directory | a new file `<last SID component>.t2b` in it (`.1` … `.9` added if it exists; `GIT_TRACE2_MAX_FILES`' sentinel honoured) |
//! | another absolute path | that file, created if missing and appended to (`O_APPEND`), so several processes can share it |
//! | a digit `2`–`9` (`1`/`true` mean 2) | that open file descriptor |
//!
//! `af_unix:` sockets are refused, and so is a descriptor that is a terminal: binary
//! frames belong in files and pipes. Each frame reaches the kernel whole in one `write`
//! call (the core's [`Sink::write_line`] contract; to a regular file a few frames may
//! share one, [`Sink::write_lines`]), so frames of several processes appending to one
//! file never interleave.

use tracing_trace2_dst::{self as dst, DestinationValue, OpenSettings, Opened};

pub use tracing_trace2_dst::{MemorySink, NullSink, Sink};

/// The environment variable that enables the binary target.
pub const ENV_NAME: &str = "TRACING_TRACE2_BINARY";

/// What [`open`] needs besides the value.
#[derive(Clone, Debug, Default)]
pub struct DestSettings {
    /// Print why a destination could not be opened (`GIT_TRACE2_DST_DEBUG`).
    pub dst_debug: bool,
    /// `GIT_TRACE2_MAX_FILES` for directory values; 0 = no limit.
    pub max_files: u32,
    /// The full session id: its last component names the file in a directory.
    pub sid: String,
}

/// An opened destination.
pub struct Destination {
    /// Where frames are written.
    pub sink: Box<dyn Sink>,
    /// The directory holds too many files: this is its sentinel, and the stream should
    /// record `too_many_files` after `version` (as the Event target does).
    pub too_many_files: bool,
}

impl std::fmt::Debug for Destination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Destination")
            .field("too_many_files", &self.too_many_files)
            .finish_non_exhaustive()
    }
}

/// Opens the destination `value` names, or `None` when it is off or cannot be opened
/// (with git's warnings on fd 2: always for a value that is not understood, otherwise
/// only with `dst_debug`).
pub fn open(value: &str, settings: &DestSettings) -> Option<Destination> {
    match dst::parse_destination(value) {
        DestinationValue::Disabled => return None,
        DestinationValue::UnixSocket { .. } => {
            dst::warning(&format!(
                "trace2: '{ENV_NAME}' does not write to sockets: '{value}'"
            ));
            return None;
        }
        DestinationValue::Fd(fd) if is_terminal(fd) => {
            dst::warning(&format!(
                "trace2: '{ENV_NAME}' does not write binary frames to terminal fd {fd}"
            ));
            return None;
        }
        _ => {}
    }
    let last = settings.sid.rsplit('/').next().unwrap_or_default();
    let open_settings = OpenSettings {
        env_name: ENV_NAME,
        dst_debug: settings.dst_debug,
        max_files: settings.max_files,
        sid_component: format!("{last}.t2b"),
    };
    match dst::open(value, &open_settings) {
        Opened::Sink(sink) => Some(Destination {
            sink,
            too_many_files: false,
        }),
        Opened::Sentinel(sink) => Some(Destination {
            sink,
            too_many_files: true,
        }),
        Opened::Disabled => None,
    }
}

/// Opens the destination named by `TRACING_TRACE2_BINARY`, if it is set.
pub fn open_from_env(settings: &DestSettings) -> Option<Destination> {
    let value = std::env::var(ENV_NAME).ok()?;
    open(&value, settings)
}

fn is_terminal(fd: i32) -> bool {
    // SAFETY: isatty only inspects the descriptor; a closed one just returns 0 (the C
    // runtime's `_isatty` on Windows: nonzero for a character device).
    unsafe { libc::isatty(fd) != 0 }
}

/// Prints git's warning about a failed write, as the text targets do with
/// `GIT_TRACE2_DST_DEBUG`.
pub(crate) fn warn_write_failed(err: &std::io::Error) {
    dst::warn_write_failed(ENV_NAME, err);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(sid: &str) -> DestSettings {
        DestSettings {
            dst_debug: false,
            max_files: 0,
            sid: sid.to_owned(),
        }
    }

    #[test]
    fn off_values_and_sockets_open_nothing() {
        for value in ["", "0", "false", "af_unix:/tmp/x", "af_unix:dgram:/tmp/y"] {
            assert!(open(value, &settings("s")).is_none(), "{value}");
        }
    }

    #[test]
    fn a_directory_gets_one_file_per_process() {
        let dir = tempfile::tempdir().unwrap();
        let value = dir.path().to_str().unwrap();
        let sid = "20260101T000000.000000Z-H0-P1/20260101T000001.000000Z-H0-P2";
        let a = open(value, &settings(sid)).unwrap();
        a.sink.write_line(b"frame").unwrap();
        let b = open(value, &settings(sid)).unwrap();
        b.sink.write_line(b"other").unwrap();
        let first = dir.path().join("20260101T000001.000000Z-H0-P2.t2b");
        assert_eq!(std::fs::read(&first).unwrap(), b"frame");
        assert_eq!(
            std::fs::read(first.with_extension("t2b.1")).unwrap(),
            b"other"
        );
    }

    #[test]
    fn a_file_is_appended_to() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.t2b");
        std::fs::write(&path, b"old").unwrap();
        for frame in [&b"one"[..], b"two"] {
            let d = open(path.to_str().unwrap(), &settings("s")).unwrap();
            assert!(!d.too_many_files);
            d.sink.write_line(frame).unwrap();
        }
        assert_eq!(std::fs::read(&path).unwrap(), b"oldonetwo");
    }

    #[test]
    fn a_full_directory_gives_its_sentinel() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("other"), b"").unwrap();
        let mut s = settings("s");
        s.max_files = 1;
        let d = open(dir.path().to_str().unwrap(), &s).unwrap();
        assert!(d.too_many_files);
        assert!(dir.path().join(dst::DISCARD_SENTINEL).exists());
    }
}
