//! Git's `warning()` output: the texts the destinations print and how they reach fd 2.
//!
//! Git formats a warning into a 4 KiB buffer (`warning: ` + message, cut to fit), turns
//! control bytes other than TAB and LF into `?`, appends LF and hands the result to fd 2
//! in one write. We do the same, bypassing Rust's `Stderr` so its lock is never involved.

use std::io;

/// Size of git's message buffer; the printed warning (LF included) never exceeds it.
const GIT_MSG_BUF: usize = 4096;

/// The text of an I/O error as C's `strerror` gives it (`Bad file descriptor`), without
/// the ` (os error 9)` that Rust appends. On Windows, a system error code is first
/// turned into the `errno` Git for Windows turns it into, and the C runtime's text for
/// that is used (`The pipe is being closed.` becomes `Broken pipe`, as git prints it);
/// a code git does not map keeps the system's text.
pub fn strerror(err: &io::Error) -> String {
    #[cfg(windows)]
    if let Some(text) = err.raw_os_error().and_then(windows::crt_text) {
        return text;
    }
    let text = err.to_string();
    match err.raw_os_error() {
        Some(code) => match text.strip_suffix(&format!(" (os error {code})")) {
            Some(plain) => plain.to_owned(),
            None => text,
        },
        None => text,
    }
}

/// The C runtime's `strerror` text for a C `errno` value (an `exec` that failed with
/// `EACCES` gives `Permission denied`). Unlike [`strerror`], whose raw codes are the
/// system's (on Windows a system error code, not an `errno`), `errno` is always C's.
pub fn errno_text(errno: i32) -> String {
    #[cfg(windows)]
    {
        // SAFETY: the runtime returns a NUL-terminated string in a per-thread buffer (or
        // a static one), read at once and copied; any `errno` value is accepted.
        let text = unsafe { libc::strerror(errno) };
        if text.is_null() {
            return format!("Unknown error {errno}");
        }
        // SAFETY: non-null and NUL-terminated, as above.
        let text = unsafe { std::ffi::CStr::from_ptr(text) };
        text.to_string_lossy().into_owned()
    }
    #[cfg(not(windows))]
    {
        // On Unix the system's codes are `errno` values.
        strerror(&io::Error::from_raw_os_error(errno))
    }
}

/// The message git reports when a write to a target fails, without the `warning: `
/// prefix (git also records it as an `error` event with format
/// `unable to write trace to '%s': %s`).
pub fn write_failed_message(env_name: &str, err: &io::Error) -> String {
    format!("unable to write trace to '{env_name}': {}", strerror(err))
}

/// Prints the warning git prints when a write to a target fails:
/// `warning: unable to write trace to '<ENV>': <strerror>`.
pub fn warn_write_failed(env_name: &str, err: &io::Error) {
    warning(&write_failed_message(env_name, err));
}

/// Prints `warning: <message>` to fd 2 as git's `warning()` does (one write).
pub fn warning(message: &str) {
    let bytes = format_warning(message);
    // A warning that cannot be written has nowhere else to go.
    let _ = crate::os::write_stderr(&bytes);
}

/// The exact bytes git's `warning()` writes for `message`.
pub fn format_warning(message: &str) -> Vec<u8> {
    const PREFIX: &[u8] = b"warning: ";
    let mut out = Vec::with_capacity(PREFIX.len() + message.len() + 1);
    out.extend_from_slice(PREFIX);
    // C formatting stops at a NUL; the buffer keeps room for its terminator, later the LF.
    let body = message.as_bytes();
    let body = body.split(|&b| b == 0).next().unwrap_or(body);
    let room = GIT_MSG_BUF - 1 - PREFIX.len();
    out.extend(body.iter().take(room).map(|&b| match b {
        b'\t' | b'\n' => b,
        0..=0x1f | 0x7f => b'?',
        _ => b,
    }));
    out.push(b'\n');
    out
}

/// Windows system error codes as Git for Windows reports them.
#[cfg(windows)]
mod windows {
    /// The `errno` git's `err_win_to_posix` gives a Windows system error `code`, for
    /// the codes opening and writing a trace target meet.
    fn errno_for(code: i32) -> Option<libc::c_int> {
        Some(match code {
            // FILE_NOT_FOUND, PATH_NOT_FOUND, INVALID_DRIVE, BAD_NETPATH, BAD_NET_NAME,
            // INVALID_NAME, BAD_PATHNAME
            2 | 3 | 15 | 53 | 67 | 123 | 161 => libc::ENOENT,
            // ACCESS_DENIED, SHARING_VIOLATION, LOCK_VIOLATION
            5 | 32 | 33 => libc::EACCES,
            4 => libc::EMFILE,
            6 => libc::EBADF,
            8 | 14 => libc::ENOMEM,
            19 => libc::EROFS,
            // FILE_EXISTS, ALREADY_EXISTS
            80 | 183 => libc::EEXIST,
            // HANDLE_DISK_FULL, DISK_FULL
            39 | 112 => libc::ENOSPC,
            87 => libc::EINVAL,
            // BROKEN_PIPE, NO_DATA (the reading end is closed)
            109 | 232 => libc::EPIPE,
            // PIPE_BUSY: every instance of the pipe is in use
            231 => libc::EBUSY,
            _ => return None,
        })
    }

    /// The C runtime's `strerror` text for the `errno` of `code`.
    pub(super) fn crt_text(code: i32) -> Option<String> {
        let errno = errno_for(code)?;
        // SAFETY: the runtime returns a NUL-terminated string in a per-thread buffer (or
        // a static one), read at once and copied.
        let text = unsafe { libc::strerror(errno) };
        if text.is_null() {
            return None;
        }
        // SAFETY: non-null and NUL-terminated, as above.
        let text = unsafe { std::ffi::CStr::from_ptr(text) };
        Some(text.to_string_lossy().into_owned())
    }
}

/// Where the destination code sends its warnings: fd 2 in production, a buffer in tests.
pub(crate) struct Reporter<'a> {
    dst_debug: bool,
    emit: &'a mut dyn FnMut(&str),
}

impl<'a> Reporter<'a> {
    /// A reporter that prints the dst-debug warnings only when `dst_debug`.
    pub(crate) fn new(dst_debug: bool, emit: &'a mut dyn FnMut(&str)) -> Self {
        Self { dst_debug, emit }
    }

    /// A warning git prints whatever the dst-debug setting.
    pub(crate) fn always(&mut self, message: &str) {
        (self.emit)(message);
    }

    /// A warning git prints only with `GIT_TRACE2_DST_DEBUG`.
    pub(crate) fn debug(&mut self, message: &str) {
        if self.dst_debug {
            (self.emit)(message);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{child_or_run, git_stderr};

    #[test]
    fn errno_values_read_as_c_errno_on_every_platform() {
        // On Windows these numbers are also system error codes with other meanings
        // (8: not enough memory, 13: invalid data); an errno must not be read as one.
        assert_eq!(errno_text(libc::ENOEXEC), "Exec format error");
        assert_eq!(errno_text(libc::EACCES), "Permission denied");
        assert_eq!(errno_text(libc::ENOENT), "No such file or directory");
    }

    #[cfg(windows)]
    #[test]
    fn windows_codes_read_as_git_prints_them() {
        for (code, text) in [
            (109, "Broken pipe"),
            (232, "Broken pipe"),
            (5, "Permission denied"),
        ] {
            assert_eq!(strerror(&io::Error::from_raw_os_error(code)), text);
        }
        // A code git does not map keeps the system's text, without Rust's suffix.
        let odd = strerror(&io::Error::from_raw_os_error(1453));
        assert!(!odd.contains("os error"), "{odd}");
    }

    #[cfg(unix)]
    #[test]
    fn strerror_drops_rust_suffix() {
        let e = io::Error::from_raw_os_error(libc::EBADF);
        assert_eq!(strerror(&e), "Bad file descriptor");
        let e = io::Error::from_raw_os_error(libc::EPIPE);
        assert_eq!(strerror(&e), "Broken pipe");
        let e = io::Error::other("custom");
        assert_eq!(strerror(&e), "custom");
    }

    #[cfg(unix)]
    #[test]
    fn write_failed_text() {
        let e = io::Error::from_raw_os_error(libc::EBADF);
        assert_eq!(
            format_warning(&write_failed_message("GIT_TRACE2", &e)),
            b"warning: unable to write trace to 'GIT_TRACE2': Bad file descriptor\n"
        );
    }

    #[test]
    fn control_bytes_and_length_match_git() {
        // Same value real git is given below; its stderr must equal our bytes.
        let odd = "a\u{1}b\tc\nd\u{7f}e\u{e9}";
        let ours = format_warning(&format!(
            "trace2: unknown value for 'GIT_TRACE2_EVENT': '{odd}'"
        ));
        let Some(git) = git_stderr(&[("GIT_TRACE2_EVENT", odd)]) else {
            return;
        };
        assert_eq!(ours, git);

        let long = "x".repeat(5000);
        let ours = format_warning(&format!(
            "trace2: unknown value for 'GIT_TRACE2_EVENT': '{long}'"
        ));
        assert_eq!(ours.len(), GIT_MSG_BUF);
        let Some(git) = git_stderr(&[("GIT_TRACE2_EVENT", long.as_str())]) else {
            return;
        };
        assert_eq!(ours, git);
    }

    /// The "broken pipe" error of this platform (`EPIPE`, Windows' `ERROR_NO_DATA`).
    fn broken_pipe() -> io::Error {
        #[cfg(unix)]
        return io::Error::from_raw_os_error(libc::EPIPE);
        #[cfg(windows)]
        return io::Error::from_raw_os_error(232);
    }

    #[test]
    fn warning_goes_to_fd2_in_one_piece() {
        let out = child_or_run(
            concat!(module_path!(), "::warning_goes_to_fd2_in_one_piece"),
            &[],
            || {
                warn_write_failed("GIT_TRACE2_PERF", &broken_pipe());
            },
        );
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            out.stderr,
            b"warning: unable to write trace to 'GIT_TRACE2_PERF': Broken pipe\n"
        );
    }
}
