//! Parsing of a destination value (`GIT_TRACE2*` or `trace2.*Target`) into what it asks for.
//!
//! The parse is pure: whether an absolute path names a directory, and whether a socket
//! path is usable, are decided later by [`open`](super::open), exactly where git decides
//! them.

use std::path::PathBuf;

/// The socket type requested by an `af_unix:` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SocketKind {
    /// `af_unix:stream:<path>`: a `SOCK_STREAM` connection.
    Stream,
    /// `af_unix:dgram:<path>`: a `SOCK_DGRAM` socket, one datagram per line.
    Dgram,
    /// `af_unix:<path>`: stream first, datagram only if stream fails with `EPROTOTYPE`.
    Auto,
}

/// What a destination value asks for (spec 7.1).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DestinationValue {
    /// Unset-like values: empty, `0`, `false` (any case).
    Disabled,
    /// An already open file descriptor: `1`/`true` mean 2 (stderr), a single digit 2–9
    /// means that descriptor.
    Fd(i32),
    /// An absolute path: a directory (one new file per process) or a file to append to.
    Path(PathBuf),
    /// An `af_unix:` value. The path is kept as written, possibly empty or relative:
    /// [`open`](super::open) rejects those with git's messages.
    UnixSocket {
        /// Which socket type(s) to try.
        kind: SocketKind,
        /// The text after the prefix.
        path: PathBuf,
    },
    /// Anything else (`yes`, `on`, `10`, a relative path, ...): the target stays off and
    /// git always warns.
    Unknown(String),
}

/// Parses a destination value the way git does, in git's order of checks.
pub fn parse_destination(value: &str) -> DestinationValue {
    if value.is_empty() || value == "0" || value.eq_ignore_ascii_case("false") {
        return DestinationValue::Disabled;
    }
    if value == "1" || value.eq_ignore_ascii_case("true") {
        return DestinationValue::Fd(2);
    }
    if let [digit @ b'0'..=b'9'] = value.as_bytes() {
        return DestinationValue::Fd(i32::from(digit - b'0'));
    }
    if is_absolute_here(value) {
        return DestinationValue::Path(PathBuf::from(value));
    }
    // The longer prefixes must be tried first: `af_unix:` alone would swallow them.
    let socket = |kind, path: &str| DestinationValue::UnixSocket {
        kind,
        path: PathBuf::from(path),
    };
    if let Some(path) = value.strip_prefix("af_unix:stream:") {
        return socket(SocketKind::Stream, path);
    }
    if let Some(path) = value.strip_prefix("af_unix:dgram:") {
        return socket(SocketKind::Dgram, path);
    }
    if let Some(path) = value.strip_prefix("af_unix:") {
        return socket(SocketKind::Auto, path);
    }
    DestinationValue::Unknown(value.to_owned())
}

/// Whether git on this platform takes `value` for an absolute path.
fn is_absolute_here(value: &str) -> bool {
    if cfg!(windows) {
        is_absolute_on_windows(value)
    } else {
        value.starts_with('/')
    }
}

/// Whether Git for Windows takes `value` for an absolute path (its `is_absolute_path`):
/// a leading `/` or `\` (so `\\.\pipe\name`, `//./pipe/name` and `\\server\share`
/// too), or a drive letter and a colon, even without a separator after it (`C:x`).
pub fn is_absolute_on_windows(value: &str) -> bool {
    match value.as_bytes() {
        [b'/' | b'\\', ..] => true,
        [drive, b':', ..] => drive.is_ascii_alphabetic(),
        _ => false,
    }
}

/// Whether `path` names a local named pipe as Git for Windows recognises one:
/// `\\.\pipe\<name>` with either separator in each place (trace2receiver's documented
/// form is `//./pipe/<name>`), `pipe` in any case, and a name of at least one byte.
/// Git opens such a path for writing without `FILE_APPEND_DATA`, which a pipe does not
/// take (the bit means "create a pipe instance" there).
pub fn is_named_pipe_path(path: &str) -> bool {
    let sep = |b: &u8| *b == b'/' || *b == b'\\';
    match path.as_bytes() {
        [a, b, b'.', c, p0, p1, p2, p3, d, _name, ..] => {
            sep(a)
                && sep(b)
                && sep(c)
                && sep(d)
                && [p0, p1, p2, p3].map(u8::to_ascii_lowercase) == *b"pipe"
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_absolute_paths() {
        for v in [
            "/tmp/x",
            "\\x",
            "C:\\trace",
            "c:/trace",
            "C:",
            "Z:rel",
            "\\\\.\\pipe\\tr2",
            "//./pipe/tr2",
            "\\\\server\\share\\t",
        ] {
            assert!(is_absolute_on_windows(v), "{v:?}");
        }
        for v in ["rel\\x", "1:x", ":x", "CC:/x", "af_unix:/x", ".\\x", ""] {
            assert!(!is_absolute_on_windows(v), "{v:?}");
        }
    }

    #[test]
    fn named_pipe_paths() {
        for v in [
            "\\\\.\\pipe\\tr2",
            "//./pipe/tr2",
            "/\\./PIPE/x",
            "\\/.\\Pipe\\a\\b",
        ] {
            assert!(is_named_pipe_path(v), "{v:?}");
        }
        for v in [
            "\\\\.\\pipe\\",
            "//./pipe",
            "//?/pipe/x",
            "//./pipes/x",
            "\\\\server\\pipe\\x",
            "C:\\pipe\\x",
        ] {
            assert!(!is_named_pipe_path(v), "{v:?}");
        }
    }

    /// On Windows the separators and drive forms are absolute paths; `af_unix:` is
    /// still parsed (and refused when opened, as Git for Windows has no Unix sockets).
    #[cfg(windows)]
    #[test]
    fn windows_values() {
        for v in ["C:\\t\\ev.json", "\\\\.\\pipe\\tr2", "//./pipe/tr2"] {
            assert_eq!(
                parse_destination(v),
                DestinationValue::Path(PathBuf::from(v))
            );
        }
    }

    fn sock(kind: SocketKind, path: &str) -> DestinationValue {
        DestinationValue::UnixSocket {
            kind,
            path: PathBuf::from(path),
        }
    }

    #[test]
    fn disabled_forms() {
        for v in ["", "0", "false", "False", "FALSE", "fAlSe"] {
            assert_eq!(parse_destination(v), DestinationValue::Disabled, "{v:?}");
        }
    }

    #[test]
    fn stderr_forms() {
        for v in ["1", "true", "TRUE", "True"] {
            assert_eq!(parse_destination(v), DestinationValue::Fd(2), "{v:?}");
        }
    }

    #[test]
    fn single_digit_fds() {
        for d in 2..=9 {
            assert_eq!(parse_destination(&d.to_string()), DestinationValue::Fd(d));
        }
    }

    #[test]
    fn absolute_paths() {
        for v in ["/tmp/x", "/tmp/dir/", "/", "/af_unix:/x"] {
            assert_eq!(
                parse_destination(v),
                DestinationValue::Path(PathBuf::from(v))
            );
        }
    }

    #[test]
    fn socket_forms() {
        assert_eq!(
            parse_destination("af_unix:/s"),
            sock(SocketKind::Auto, "/s")
        );
        assert_eq!(
            parse_destination("af_unix:stream:/s"),
            sock(SocketKind::Stream, "/s")
        );
        assert_eq!(
            parse_destination("af_unix:dgram:/s"),
            sock(SocketKind::Dgram, "/s")
        );
        // git reads an unknown type word as part of a (then relative) path.
        assert_eq!(
            parse_destination("af_unix:foo:/p"),
            sock(SocketKind::Auto, "foo:/p")
        );
        assert_eq!(parse_destination("af_unix:"), sock(SocketKind::Auto, ""));
        assert_eq!(
            parse_destination("af_unix:stream:"),
            sock(SocketKind::Stream, "")
        );
        assert_eq!(
            parse_destination("af_unix:dgram:rel"),
            sock(SocketKind::Dgram, "rel")
        );
    }

    #[test]
    fn unknown_forms() {
        // Each of these makes real git print "unknown value" (checked with git 2.47.3).
        for v in [
            "yes",
            "on",
            "10",
            "02",
            "-1",
            " 1",
            "1 ",
            "rel/path",
            "./x",
            "AF_UNIX:/x",
            "af_unix",
        ] {
            assert_eq!(
                parse_destination(v),
                DestinationValue::Unknown(v.to_owned()),
                "{v:?}"
            );
        }
    }
}
