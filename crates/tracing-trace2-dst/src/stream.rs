//! A connected `af_unix` stream socket: every line arrives whole or not at all, and no
//! line holds the host longer than [`SOCKET_TIMEOUT`].
//!
//! A stream has no message boundaries: a blocking `send` of a long line to a collector
//! that stopped reading writes what fits, waits for the timeout and returns a short
//! count, leaving the collector half a line. So each line is sent without blocking:
//!
//! * A line short enough for one socket buffer (the kernel queues such a send whole or
//!   not at all) is sent as it is; when there is no room, the sink waits for room until
//!   the deadline.
//! * A longer line is sent only once the socket has room for all of it (its unread
//!   bytes, `SIOCOUTQ`, against its buffer size), again within the deadline.
//! * If the collector stops reading in the middle of a long line anyway, the rest gets
//!   what is left of the deadline; then the sink ends the stream (`shutdown`), so the
//!   collector sees an unterminated last line followed by the end of the connection,
//!   which trace2receiver drops as incomplete, and never another line glued to it.
//!
//! Any failure is returned, and the caller disables the target (with
//! `GIT_TRACE2_DST_DEBUG`, git's warning). Lines of several threads are sent one at a
//! time, under a lock. A child made by `fork` without `exec` writes nothing: the
//! collector takes one connection for one process.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::sink::Sink;

/// Longest a connect or a single send may block before it fails with `EAGAIN` (the
/// socket module sets it as the send timeout; this module bounds whole lines by it).
pub const SOCKET_TIMEOUT: Duration = Duration::from_secs(2);

/// Room a line takes in the socket's buffer beyond its bytes (buffer bookkeeping),
/// counted generously.
fn overhead(len: usize) -> usize {
    len / 8 + 4096
}

/// How long to sleep between looks at a socket that has not enough room yet.
const ROOM_POLL: Duration = Duration::from_millis(2);

/// A connected stream socket that sends whole lines.
#[derive(Debug)]
pub(crate) struct StreamSink {
    fd: OwnedFd,
    /// The process that connected.
    pid: u32,
    /// The socket's send buffer size, read once.
    sndbuf: usize,
    /// Lines go one at a time; once the stream is given up, the error that ended it
    /// (every later line fails with the same error, so whichever thread reports the
    /// failure first tells the same cause).
    broken: Mutex<Option<i32>>,
}

impl StreamSink {
    /// A sink for a connected stream socket.
    pub(crate) fn new(fd: OwnedFd) -> StreamSink {
        let sndbuf = socket_option(&fd, libc::SO_SNDBUF).unwrap_or(0).max(0) as usize;
        StreamSink {
            fd,
            pid: std::process::id(),
            sndbuf,
            broken: Mutex::new(None),
        }
    }

    /// The longest line the kernel queues whole in one non-blocking send.
    fn whole_send_limit(&self) -> usize {
        (self.sndbuf / 2).saturating_sub(overhead(0) + 64)
    }

    /// Bytes sent and not yet read by the peer.
    fn unread(&self) -> io::Result<usize> {
        let mut queued: libc::c_int = 0;
        // SAFETY: SIOCOUTQ writes one int into `queued`.
        if unsafe { libc::ioctl(self.fd.as_raw_fd(), libc::TIOCOUTQ, &mut queued) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(queued.max(0) as usize)
    }

    /// Waits until the socket has room for `len` more bytes (or is empty, for a line
    /// longer than its whole buffer); `EAGAIN` at the deadline.
    fn wait_for_room(&self, len: usize, deadline: Instant) -> io::Result<()> {
        loop {
            let unread = self.unread()?;
            if unread == 0 || unread + len + overhead(len) <= self.sndbuf {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::from_raw_os_error(libc::EAGAIN));
            }
            std::thread::sleep(left.min(ROOM_POLL));
        }
    }

    /// Sends all of `line` by the deadline; returns how much went out on failure.
    fn send_all(&self, line: &[u8], deadline: Instant) -> Result<(), (usize, io::Error)> {
        let mut sent = 0;
        while sent < line.len() {
            let rest = &line[sent..];
            // SAFETY: `rest` is valid for its length during the call.
            let n = unsafe {
                libc::send(
                    self.fd.as_raw_fd(),
                    rest.as_ptr().cast(),
                    rest.len(),
                    libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
                )
            };
            if n >= 0 {
                sent += n as usize;
                continue;
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => {}
                Some(libc::EAGAIN) => wait_writable(&self.fd, deadline).map_err(|e| (sent, e))?,
                _ => return Err((sent, err)),
            }
        }
        Ok(())
    }
}

/// Waits until `fd` is writable; `EAGAIN` at the deadline.
fn wait_writable(fd: &OwnedFd, deadline: Instant) -> io::Result<()> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::from_raw_os_error(libc::EAGAIN));
        }
        let mut poll = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        };
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
        // SAFETY: one valid pollfd.
        match unsafe { libc::poll(&mut poll, 1, ms) } {
            n if n > 0 => return Ok(()),
            0 => {}
            _ => {
                let err = io::Error::last_os_error();
                if err.raw_os_error() != Some(libc::EINTR) {
                    return Err(err);
                }
            }
        }
    }
}

fn socket_option(fd: &OwnedFd, option: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the option is an int and `len` says so.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            option,
            (&raw mut value).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(value)
}

/// Whether `fd` is a stream socket.
pub(crate) fn is_stream(fd: &OwnedFd) -> bool {
    socket_option(fd, libc::SO_TYPE).is_ok_and(|ty| ty == libc::SOCK_STREAM)
}

impl Sink for StreamSink {
    fn write_line(&self, line: &[u8]) -> io::Result<()> {
        if std::process::id() != self.pid {
            // A forked child: the connection is its parent's (and the lock may have
            // been held by a parent's thread at the fork).
            return Ok(());
        }
        let mut broken = self.broken.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(code) = *broken {
            return Err(io::Error::from_raw_os_error(code));
        }
        let deadline = Instant::now() + SOCKET_TIMEOUT;
        let outcome = if line.len() > self.whole_send_limit() {
            self.wait_for_room(line.len(), deadline)
                .map_err(|e| (0, e))
                .and_then(|()| self.send_all(line, deadline))
        } else {
            self.send_all(line, deadline)
        };
        let Err((sent, err)) = outcome else {
            return Ok(());
        };
        *broken = Some(err.raw_os_error().unwrap_or(libc::EPIPE));
        if sent > 0 {
            // Half a line is out: end the stream so that nothing is glued to it.
            // SAFETY: shutdown on a socket we own.
            unsafe { libc::shutdown(self.fd.as_raw_fd(), libc::SHUT_WR) };
        }
        Err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::net::{UnixListener, UnixStream};

    /// A line of `len` bytes (dots, then a newline) starting with `tag`.
    fn line(tag: &str, len: usize) -> Vec<u8> {
        let mut bytes = tag.as_bytes().to_vec();
        bytes.resize(len - 1, b'.');
        bytes.push(b'\n');
        bytes
    }

    fn connected() -> (StreamSink, UnixStream, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let client = UnixStream::connect(&path).unwrap();
        let (server, _) = listener.accept().unwrap();
        let sink = StreamSink::new(OwnedFd::from(client));
        (sink, server, dir)
    }

    /// The collector stops reading: long lines are refused whole within the deadline,
    /// and what it finally reads is whole lines only.
    #[test]
    fn stalled_peer_gets_whole_lines_and_the_host_is_not_held() {
        let (sink, mut server, _dir) = connected();
        let started = Instant::now();
        let mut sent = 0;
        let err = loop {
            match sink.write_line(&line(&format!("{sent}"), 200_000)) {
                Ok(()) => sent += 1,
                Err(err) => break err,
            }
            assert!(sent < 100, "the socket never filled");
        };
        let held = started.elapsed();
        assert_eq!(err.raw_os_error(), Some(libc::EAGAIN));
        assert!(
            held < SOCKET_TIMEOUT + Duration::from_millis(500),
            "{held:?}"
        );
        // Given up: the next line fails at once, with the same error.
        let again = Instant::now();
        let err = sink.write_line(b"short\n").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EAGAIN));
        assert!(again.elapsed() < Duration::from_millis(100));
        drop(sink);
        let mut got = Vec::new();
        server.read_to_end(&mut got).unwrap();
        assert_eq!(got.len(), sent * 200_000, "only whole lines");
        assert!(got.ends_with(b"\n"));
    }

    /// Short lines from several threads arrive whole and in each thread's order.
    #[test]
    fn threads_send_whole_lines() {
        let (sink, mut server, _dir) = connected();
        let reader = std::thread::spawn(move || {
            let mut got = String::new();
            server.read_to_string(&mut got).unwrap();
            got
        });
        std::thread::scope(|scope| {
            for t in 0..4 {
                let sink = &sink;
                scope.spawn(move || {
                    for i in 0..500 {
                        let len = 50 + (i * 977) % 150_000;
                        sink.write_line(&line(&format!("{t} {i} "), len)).unwrap();
                    }
                });
            }
        });
        drop(sink);
        let got = reader.join().unwrap();
        let mut next = [0; 4];
        for l in got.lines() {
            let mut words = l.split(' ');
            let t: usize = words.next().unwrap().parse().unwrap();
            let i: usize = words.next().unwrap().parse().unwrap();
            assert_eq!(i, next[t]);
            assert_eq!(l.len() + 1, 50 + (i * 977) % 150_000);
            next[t] += 1;
        }
        assert_eq!(next, [500; 4]);
    }
}
