//! Writing lines to a file descriptor: one system call per line, and never a SIGPIPE.
//!
//! A library cannot know whether its host ignores SIGPIPE, and a trace reader that went
//! away must not kill the program. Sockets get `send(MSG_NOSIGNAL)`; pipes, FIFOs and
//! descriptors we cannot inspect get a write with SIGPIPE blocked for the calling thread
//! (a SIGPIPE our write raised is then consumed); regular files and terminals, which
//! never raise it, get a plain `write`.
//!
//! A regular file under a file size limit (`RLIMIT_FSIZE`, found when the sink is made)
//! takes a line only if all of it fits below the limit: the kernel would write the part
//! that fits and leave a torn last line; the threads of the process take turns from the
//! size check to the write. A line that does not fit fails with `EFBIG`,
//! and the caller disables the target, as after any failed write.
//!
//! A regular file also takes batches of whole lines ([`Sink::write_lines`], at most
//! [`FILE_BATCH_LIMIT`] bytes per `write`, for background writers): with `O_APPEND` one
//! `write` lands whole at the end of the file whatever other processes append, so whole
//! lines stay whole. A short write (a signal, a full disk) is followed by a write of the
//! rest: a line is never dropped, though one cut by the kernel arrives in two parts.
//! Under a file size limit a batch writes the lines that fit, then fails with `EFBIG`.
//!
//! A kill (SIGKILL, or a fatal signal the process does not handle) can cut a `write` to
//! a file, and only at a page boundary of the file: the kernel copies a buffered write
//! one page (or larger folio) at a time and checks for a fatal signal before each, so a
//! `write` stops only between two pages. What lies before the stop lands whole, the
//! line across it is cut, the rest is never written: at most one cut line, the last the
//! process wrote, ending at a multiple of 4 KiB. Any `write` that holds a line across a
//! page boundary can be cut there, a single line's (git's way, and the direct writers')
//! as well as a batch's, so no file writer rules a cut last line out; readers take it
//! for the end of a killed process's trace (`trace2` reports it and reads the rest).
//! How often it happens is the share of its time the process spends copying the part
//! of a `write` before such a boundary. A batch spends most of its `write` there; writing
//! it in page steps (each `write` opened by the line that crosses the next page
//! boundary, so that a kill can only stop it inside that first line) cut about four
//! times fewer last lines per kill, but each `write` costs a fixed 2-3 µs in the kernel
//! here, so the 16 more per 64 KiB batch took the background writer about 40 % of its
//! lines per second, to reach the rate per byte of one line per `write`, not zero (the
//! figures are in `docs/decisions.md`). Batches keep one `write`. Pipes and sockets
//! take one line per call: a pipe takes up to 4 KiB (`PIPE_BUF`) whole or not at all,
//! and gives up a longer write only while it is full; a Unix stream socket sends a line
//! that fits its buffer whole; so a kill cuts no line there.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::sink::{FILE_BATCH_LIMIT, Sink};

/// How a line reaches the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WriteMode {
    /// `write(2)`: for descriptors that cannot raise SIGPIPE.
    Plain,
    /// `send(2)` with `MSG_NOSIGNAL`: for sockets.
    Send,
    /// `write(2)` with SIGPIPE blocked around it: for pipes and unknown descriptors.
    NoSigpipe,
}

impl WriteMode {
    /// The safe mode for whatever `fd` is now (an fd that is not open gets `NoSigpipe`,
    /// and its first write then fails with `EBADF`, as in git).
    #[cfg(test)]
    pub(crate) fn for_fd(fd: RawFd) -> Self {
        Self::for_type(file_type(fd))
    }

    /// The safe mode for a descriptor of type `kind` (`None`: not open).
    fn for_type(kind: Option<libc::mode_t>) -> Self {
        match kind {
            Some(libc::S_IFSOCK) => Self::Send,
            Some(libc::S_IFREG | libc::S_IFCHR | libc::S_IFBLK) => Self::Plain,
            _ => Self::NoSigpipe,
        }
    }
}

/// The file type bits (`S_IFMT`) of what `fd` names, from one `fstat`; `None` for a
/// descriptor that is not open.
fn file_type(fd: RawFd) -> Option<libc::mode_t> {
    // SAFETY: fstat only fills the buffer we pass; a bad fd just returns -1.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return None;
    }
    Some(st.st_mode & libc::S_IFMT)
}

/// Writes `buf` with one system call (repeated only when a signal interrupted it before
/// anything was written); returns the count the kernel took. Short writes are not
/// retried, as in git.
///
/// Inlined into the direct writers' `write_line`: the usual call (a line written at
/// once) is the system call and one test; a failure, and a retry after EINTR, are out
/// of line.
#[inline(always)]
pub(crate) fn write_fd(fd: RawFd, buf: &[u8], mode: WriteMode) -> io::Result<usize> {
    match write_once(fd, buf, mode) {
        Ok(written) => Ok(written),
        Err(err) => write_fd_after(fd, buf, mode, err),
    }
}

/// [`write_fd`] after a failed first call: EINTR means nothing was written, so trying
/// again cannot split the line; any other error is the result.
#[cold]
#[inline(never)]
fn write_fd_after(fd: RawFd, buf: &[u8], mode: WriteMode, mut err: io::Error) -> io::Result<usize> {
    while err.kind() == io::ErrorKind::Interrupted {
        match write_once(fd, buf, mode) {
            Ok(written) => return Ok(written),
            Err(again) => err = again,
        }
    }
    Err(err)
}

/// One system call for `buf`.
#[inline(always)]
fn write_once(fd: RawFd, buf: &[u8], mode: WriteMode) -> io::Result<usize> {
    let written = match mode {
        // SAFETY: `buf` is valid for `buf.len()` bytes for the duration of the call.
        WriteMode::Plain => unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) },
        // SAFETY: as above.
        WriteMode::Send => unsafe {
            libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL)
        },
        WriteMode::NoSigpipe => return write_without_sigpipe(fd, buf),
    };
    if written < 0 {
        Err(last_error())
    } else {
        Ok(written as usize)
    }
}

/// The error of the system call that just failed (out of line: `errno` is read at once,
/// nothing runs in between).
#[cold]
#[inline(never)]
fn last_error() -> io::Error {
    io::Error::last_os_error()
}

/// `write(2)` with SIGPIPE blocked for this thread; a SIGPIPE the write itself raised is
/// taken off the pending set before the old mask comes back.
#[inline(never)]
fn write_without_sigpipe(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: plain libc calls on local, initialised signal sets; `buf` is valid for its
    // length. The mask change is undone before returning on every path.
    unsafe {
        let mut pipe_only: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut pipe_only);
        libc::sigaddset(&mut pipe_only, libc::SIGPIPE);
        let mut old: libc::sigset_t = std::mem::zeroed();
        if libc::pthread_sigmask(libc::SIG_BLOCK, &pipe_only, &mut old) != 0 {
            return Err(io::Error::other("cannot block SIGPIPE"));
        }
        let already_pending = sigpipe_pending();
        let written = libc::write(fd, buf.as_ptr().cast(), buf.len());
        let result = if written < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(written as usize)
        };
        let broke = matches!(&result, Err(e) if e.raw_os_error() == Some(libc::EPIPE));
        if broke && !already_pending && sigpipe_pending() {
            let mut signal = 0;
            libc::sigwait(&pipe_only, &mut signal);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        result
    }
}

/// Whether a SIGPIPE is pending for this thread or the process.
fn sigpipe_pending() -> bool {
    // SAFETY: sigpending fills the set we own.
    unsafe {
        let mut pending: libc::sigset_t = std::mem::zeroed();
        libc::sigpending(&mut pending) == 0 && libc::sigismember(&pending, libc::SIGPIPE) == 1
    }
}

/// The file size limit of this process when it is finite: the size no write may take a
/// regular file past.
fn file_size_limit() -> Option<u64> {
    // SAFETY: getrlimit only fills the buffer we pass.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_FSIZE, &mut limit) != 0
            || limit.rlim_cur == libc::RLIM_INFINITY
        {
            return None;
        }
        Some(limit.rlim_cur as u64)
    }
}

/// Fails with `EFBIG` when `line` would take the file at `fd` past `limit`.
fn check_fits(fd: RawFd, line: &[u8], limit: u64) -> io::Result<()> {
    if file_size(fd)? + line.len() as u64 > limit {
        return Err(io::Error::from_raw_os_error(libc::EFBIG));
    }
    Ok(())
}

/// Writes all of `bytes` with `write_once` (one system call each): after a short write
/// the rest goes next, so nothing is lost; the first error ends it.
fn write_all_with(
    mut bytes: &[u8],
    mut write_once: impl FnMut(&[u8]) -> io::Result<usize>,
) -> io::Result<()> {
    while !bytes.is_empty() {
        match write_once(bytes)? {
            0 => return Err(io::Error::from(io::ErrorKind::WriteZero)),
            n => bytes = &bytes[n.min(bytes.len())..],
        }
    }
    Ok(())
}

/// The whole lines at the start of `lines` that fit in `room` bytes.
fn whole_lines_within(lines: &[u8], room: usize) -> &[u8] {
    let head = &lines[..room.min(lines.len())];
    match head.iter().rposition(|&b| b == b'\n') {
        Some(last) => &head[..=last],
        None => &[],
    }
}

/// The lowest number a pinned descriptor gets: above the numbers hosts use and reuse.
const PINNED_FD_FLOOR: RawFd = 256;

/// A sink writing to a file descriptor; it closes the descriptor only if it owns it.
#[derive(Debug)]
pub(crate) struct FdSink {
    fd: RawFd,
    mode: WriteMode,
    /// The file size limit, for a regular file under one.
    size_limit: Option<u64>,
    /// Held from the size check to the end of the write under a file size limit, so
    /// that two threads cannot both find room for their line and together pass the
    /// limit (the kernel would then tear the second line). Taken only under a limit.
    limit_turn: std::sync::Mutex<()>,
    /// [`FILE_BATCH_LIMIT`] for a regular file written with plain `write`s, else 0.
    batch_limit: usize,
    /// Keeps an opened file or socket alive (and closes it on drop); `None` for the
    /// host's own descriptors (2..9), which are never closed.
    _owner: Option<OwnedFd>,
}

impl FdSink {
    /// Writes to one of the host's descriptors, leaving it open forever.
    pub(crate) fn borrowed(fd: RawFd) -> Self {
        let kind = file_type(fd);
        Self::new(fd, WriteMode::for_type(kind), kind, None)
    }

    /// Writes to a private duplicate of one of the host's descriptors (close-on-exec,
    /// numbered at or above [`PINNED_FD_FLOOR`] where the limit allows): what `fd`
    /// names now, whatever the host later does with the number `fd`. A descriptor that
    /// is not open is used as it is (its first write fails, as in git).
    pub(crate) fn pinned(fd: RawFd) -> Self {
        // The soft descriptor limit may be lower than the floor: then any number will do.
        for floor in [PINNED_FD_FLOOR, 3] {
            // SAFETY: F_DUPFD_CLOEXEC makes a new descriptor or fails; nothing else changes.
            let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, floor) };
            if copy >= 0 {
                // SAFETY: `copy` is a fresh descriptor nobody else owns.
                let owned = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(copy) };
                return Self::opened(owned);
            }
            if io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
                break;
            }
        }
        Self::borrowed(fd)
    }

    /// Writes to a descriptor we opened (a file or FIFO by path, a pinned duplicate),
    /// whatever it names, closing it when the sink is dropped.
    pub(crate) fn opened(fd: OwnedFd) -> Self {
        let kind = file_type(fd.as_raw_fd());
        Self::new(fd.as_raw_fd(), WriteMode::for_type(kind), kind, Some(fd))
    }

    /// Writes to a descriptor we opened, in `mode`, closing it when the sink is dropped
    /// (sockets, and the tests' pipes and files).
    #[cfg(any(test, feature = "sockets"))]
    pub(crate) fn owned(fd: OwnedFd, mode: WriteMode) -> Self {
        // Only a `Plain` descriptor can be a regular file: no `fstat` for a socket.
        let kind = match mode {
            WriteMode::Plain => file_type(fd.as_raw_fd()),
            WriteMode::Send | WriteMode::NoSigpipe => None,
        };
        Self::new(fd.as_raw_fd(), mode, kind, Some(fd))
    }

    /// The sink for `fd` of type `kind`, found by the caller with one `fstat`;
    /// `getrlimit` only for a regular file.
    fn new(fd: RawFd, mode: WriteMode, kind: Option<libc::mode_t>, owner: Option<OwnedFd>) -> Self {
        let regular = kind == Some(libc::S_IFREG);
        Self {
            fd,
            mode,
            size_limit: if regular { file_size_limit() } else { None },
            limit_turn: std::sync::Mutex::new(()),
            // Batches only for regular files written with plain `write`s: a pipe keeps
            // writes whole only up to `PIPE_BUF`, a socket is one datagram or stream
            // message per line, a terminal is read by people.
            batch_limit: if regular && mode == WriteMode::Plain {
                FILE_BATCH_LIMIT
            } else {
                0
            },
            _owner: owner,
        }
    }
}

impl FdSink {
    /// [`Sink::write_line`] under a file size limit: the size check and the write are
    /// one turn. Out of line: most files have no limit.
    #[inline(never)]
    fn write_line_within(&self, line: &[u8], limit: u64) -> io::Result<()> {
        let _turn = self.limit_turn.lock().unwrap_or_else(|e| e.into_inner());
        check_fits(self.fd, line, limit)?;
        write_fd(self.fd, line, self.mode).map(|_| ())
    }
}

impl Sink for FdSink {
    fn write_line(&self, line: &[u8]) -> io::Result<()> {
        if let Some(limit) = self.size_limit {
            return self.write_line_within(line, limit);
        }
        write_fd(self.fd, line, self.mode).map(|_| ())
    }

    fn batch_limit(&self) -> usize {
        self.batch_limit
    }

    fn write_lines(&self, lines: &[u8]) -> io::Result<()> {
        if self.batch_limit == 0 {
            for line in lines.split_inclusive(|&b| b == b'\n') {
                self.write_line(line)?;
            }
            return Ok(());
        }
        let write_all = |lines: &[u8]| write_all_with(lines, |b| write_fd(self.fd, b, self.mode));
        let Some(limit) = self.size_limit else {
            // One `write` for the batch (see the module doc on what a kill can cut).
            return write_all(lines);
        };
        // The size check and the write are one turn, as for a single line.
        let _turn = self.limit_turn.lock().unwrap_or_else(|e| e.into_inner());
        let room = limit.saturating_sub(file_size(self.fd)?);
        if lines.len() as u64 > room {
            // The lines that fit go in, as they would one by one; the first that does
            // not fails.
            write_all(whole_lines_within(lines, room as usize))?;
            return Err(io::Error::from_raw_os_error(libc::EFBIG));
        }
        write_all(lines)
    }
}

/// The size of the file at `fd`.
fn file_size(fd: RawFd) -> io::Result<u64> {
    // SAFETY: fstat only fills the buffer we pass.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.st_size as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::child_or_run;
    use std::os::fd::FromRawFd;

    fn pipe() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    #[test]
    fn modes_by_descriptor_kind() {
        let (r, w) = pipe();
        assert_eq!(WriteMode::for_fd(w.as_raw_fd()), WriteMode::NoSigpipe);
        drop(r);
        let file = std::fs::File::open("/dev/null").unwrap();
        assert_eq!(WriteMode::for_fd(file.as_raw_fd()), WriteMode::Plain);
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(WriteMode::for_fd(a.as_raw_fd()), WriteMode::Send);
        assert_eq!(WriteMode::for_fd(-1), WriteMode::NoSigpipe);
    }

    #[test]
    fn pipe_line_arrives_whole() {
        let (r, w) = pipe();
        let sink = FdSink::owned(w, WriteMode::NoSigpipe);
        sink.write_line(b"one line\n").unwrap();
        drop(sink);
        let text = std::io::read_to_string(std::fs::File::from(r)).unwrap();
        assert_eq!(text, "one line\n");
    }

    #[test]
    fn write_error_is_returned() {
        let sink = FdSink::borrowed(-1);
        let err = sink.write_line(b"x\n").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EBADF));
    }

    /// A pinned descriptor keeps writing to what the host's number named at first,
    /// after the host closed the number and opened something else under it. In a child
    /// process: reusing a number races with the other tests' descriptors.
    #[test]
    fn pinned_descriptor_survives_the_hosts_reuse() {
        let out = child_or_run(
            concat!(
                module_path!(),
                "::pinned_descriptor_survives_the_hosts_reuse"
            ),
            &[],
            || {
                let (r, w) = pipe();
                let raw = w.as_raw_fd();
                let sink = FdSink::pinned(raw);
                assert!(sink.fd >= PINNED_FD_FLOOR, "{}", sink.fd);
                let flags = unsafe { libc::fcntl(sink.fd, libc::F_GETFD) };
                assert_ne!(flags & libc::FD_CLOEXEC, 0);
                sink.write_line(b"before\n").unwrap();
                let (r2, w2) = pipe();
                drop(w);
                // The host's new pipe gets the old number.
                assert_eq!(unsafe { libc::dup2(w2.as_raw_fd(), raw) }, raw);
                drop(w2);
                let w2 = unsafe { OwnedFd::from_raw_fd(raw) };
                sink.write_line(b"after\n").unwrap();
                drop(sink);
                drop(w2);
                let first = std::io::read_to_string(std::fs::File::from(r)).unwrap();
                assert_eq!(first, "before\nafter\n");
                let second = std::io::read_to_string(std::fs::File::from(r2)).unwrap();
                assert_eq!(second, "");
                // A descriptor that is not open fails on the first write, as before.
                let err = FdSink::pinned(-1).write_line(b"x\n").unwrap_err();
                assert_eq!(err.raw_os_error(), Some(libc::EBADF));
            },
        );
        assert!(out.status.success(), "{out:?}");
    }

    #[test]
    fn host_descriptor_is_not_closed() {
        let (_r, w) = pipe();
        let raw = w.as_raw_fd();
        drop(FdSink::borrowed(raw));
        assert_ne!(unsafe { libc::fcntl(raw, libc::F_GETFD) }, -1);
    }

    /// Runs `scenario` in a child process whose file size limit is 100 bytes (SIGXFSZ
    /// ignored, so writes past it fail with EFBIG), on a sink appending to a fresh
    /// regular file; returns the file's final length.
    fn under_a_100_byte_limit(test_path: &str, scenario: impl FnOnce(FdSink)) -> usize {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("limited");
        let path_text = path.display().to_string();
        let out = child_or_run(test_path, &[("DST_TEST_FILE", path_text.as_str())], || {
            let limit = libc::rlimit {
                rlim_cur: 100,
                rlim_max: 100,
            };
            // SAFETY: only this child process's signal disposition and limit change.
            unsafe {
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
            }
            let path = std::env::var("DST_TEST_FILE").unwrap();
            let file = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(path)
                .unwrap();
            scenario(FdSink::owned(OwnedFd::from(file), WriteMode::Plain));
        });
        assert!(out.status.success(), "{out:?}");
        std::fs::read(&path).unwrap().len()
    }

    /// Under a file size limit a line that does not fit fails whole (EFBIG) instead of
    /// leaving its first part at the end of the file.
    #[test]
    fn file_size_limit_never_tears_a_line() {
        let written = under_a_100_byte_limit(
            concat!(module_path!(), "::file_size_limit_never_tears_a_line"),
            |sink| {
                let line = [b'x'; 39];
                sink.write_line(&[&line[..], b"\n"].concat()).unwrap();
                sink.write_line(&[&line[..], b"\n"].concat()).unwrap();
                let err = sink.write_line(&[&line[..], b"\n"].concat()).unwrap_err();
                assert_eq!(err.raw_os_error(), Some(libc::EFBIG));
            },
        );
        assert_eq!(written, 80);
    }

    /// Regular files take batches; pipes, sockets and character devices do not.
    #[test]
    fn only_regular_files_batch() {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::File::create(dir.path().join("f")).unwrap();
        assert_eq!(
            FdSink::owned(OwnedFd::from(file), WriteMode::Plain).batch_limit(),
            FILE_BATCH_LIMIT
        );
        let (_r, w) = pipe();
        assert_eq!(FdSink::borrowed(w.as_raw_fd()).batch_limit(), 0);
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(FdSink::borrowed(a.as_raw_fd()).batch_limit(), 0);
        let null = std::fs::File::open("/dev/null").unwrap();
        assert_eq!(FdSink::borrowed(null.as_raw_fd()).batch_limit(), 0);
    }

    #[test]
    fn a_batch_lands_whole_and_a_pipe_gets_lines_one_by_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("batch");
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
            .unwrap();
        let sink = FdSink::owned(OwnedFd::from(file), WriteMode::Plain);
        let lines: Vec<u8> = (0..500)
            .flat_map(|i| format!("line {i}\n").into_bytes())
            .collect();
        sink.write_lines(&lines).unwrap();
        sink.write_line(b"after\n").unwrap();
        assert_eq!(
            std::fs::read(&path).unwrap(),
            [&lines[..], b"after\n"].concat()
        );

        let (r, w) = pipe();
        let sink = FdSink::owned(w, WriteMode::NoSigpipe);
        sink.write_lines(b"a\nb\n").unwrap();
        drop(sink);
        let text = std::io::read_to_string(std::fs::File::from(r)).unwrap();
        assert_eq!(text, "a\nb\n");
    }

    /// A short write is followed by the rest: every byte arrives, in order.
    #[test]
    fn short_writes_are_completed() {
        let lines: Vec<u8> = (0..50)
            .flat_map(|i| format!("l{i}\n").into_bytes())
            .collect();
        let mut out = Vec::new();
        let mut calls = 0;
        write_all_with(&lines, |bytes| {
            calls += 1;
            let n = bytes.len().min(7);
            out.extend_from_slice(&bytes[..n]);
            Ok(n)
        })
        .unwrap();
        assert_eq!(out, lines);
        assert_eq!(calls, lines.len().div_ceil(7));
        // A write that takes nothing is an error, not a loop.
        let err = write_all_with(b"x\n", |_| Ok(0)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WriteZero);
    }

    /// An error in the middle of a batch is returned at once; nothing is written after.
    #[test]
    fn an_error_mid_batch_stops_the_batch() {
        let mut out = Vec::new();
        let mut calls = 0;
        let err = write_all_with(b"one\ntwo\nthree\n", |bytes| {
            calls += 1;
            if calls == 2 {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            out.extend_from_slice(&bytes[..4]);
            Ok(4)
        })
        .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(out, b"one\n");
        assert_eq!(calls, 2);
    }

    #[test]
    fn whole_lines_within_room() {
        assert_eq!(whole_lines_within(b"ab\ncd\nef\n", 7), b"ab\ncd\n");
        assert_eq!(whole_lines_within(b"ab\ncd\nef\n", 6), b"ab\ncd\n");
        assert_eq!(whole_lines_within(b"ab\ncd\n", 2), b"");
        assert_eq!(whole_lines_within(b"ab\n", 100), b"ab\n");
    }

    /// Under a file size limit a batch writes the whole lines that fit and fails with
    /// EFBIG: the same file as lines written one by one.
    #[test]
    fn file_size_limit_cuts_a_batch_at_a_line() {
        let written = under_a_100_byte_limit(
            concat!(module_path!(), "::file_size_limit_cuts_a_batch_at_a_line"),
            |sink| {
                let line = [&[b'x'; 39][..], b"\n"].concat();
                let err = sink.write_lines(&line.repeat(3)).unwrap_err();
                assert_eq!(err.raw_os_error(), Some(libc::EFBIG));
                let err = sink.write_lines(&line).unwrap_err();
                assert_eq!(err.raw_os_error(), Some(libc::EFBIG));
            },
        );
        assert_eq!(written, 80);
    }

    #[test]
    fn broken_pipe_does_not_kill() {
        // The child restores the default SIGPIPE action (Rust programs start with it
        // ignored) so that a stray signal would kill it.
        let out = child_or_run(
            concat!(module_path!(), "::broken_pipe_does_not_kill"),
            &[],
            || {
                unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
                let (r, w) = pipe();
                drop(r);
                let sink = FdSink::borrowed(w.as_raw_fd());
                let err = sink.write_line(b"lost\n").unwrap_err();
                assert_eq!(err.raw_os_error(), Some(libc::EPIPE));
                // Unblocked again, and nothing left pending to kill us now.
                assert!(!sigpipe_pending());
                eprint!("alive");
            },
        );
        assert!(out.status.success(), "{out:?}");
        assert_eq!(out.stderr, b"alive");
    }
}
