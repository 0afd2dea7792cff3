//! `af_unix:` targets: a Unix domain socket connected once, at open time.
//!
//! A trace collector treats one stream connection as one process, so the socket is
//! connected once and never reconnected. Lines go out with `send(MSG_NOSIGNAL)` (the
//! descriptor sink in `fd.rs`); on a datagram socket each line is one datagram. A send
//! timeout bounds both the connect (a listener whose backlog is full) and each send (a
//! collector that stopped reading): the call then fails and the caller disables the
//! target instead of hanging the host.
//!
//! The socket itself comes from `socket2`: std's Unix sockets cannot take a timeout
//! before connecting, and socket2 gives the same system calls without `unsafe` here.

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

use socket2::{Domain, SockAddr, Socket, Type};

use super::Opened;
use super::destination_value::SocketKind;
use super::fd::{FdSink, WriteMode};
pub use super::stream::SOCKET_TIMEOUT;
use super::stream::{StreamSink, is_stream};
use super::warn::{Reporter, strerror};

/// Capacity of `sockaddr_un.sun_path` (108 on Linux); the path and its NUL must fit.
#[cfg(test)]
fn sun_path_capacity() -> usize {
    std::mem::size_of::<libc::sockaddr_un>() - std::mem::offset_of!(libc::sockaddr_un, sun_path)
}

/// Validates the socket path as git does, then connects (spec 7.1).
pub(crate) fn open_socket(
    value: &str,
    kind: SocketKind,
    path: &Path,
    env_name: &str,
    report: &mut Reporter<'_>,
) -> Opened {
    let bytes = path.as_os_str().as_bytes();
    if bytes.is_empty() {
        report.debug(&format!(
            "trace2: invalid AF_UNIX value '{value}' for '{env_name}' tracing"
        ));
        return Opened::Disabled;
    }
    // socket2 refuses a path that, with its NUL, does not fit `sun_path`.
    let address = match SockAddr::unix(path) {
        Ok(address) if bytes.starts_with(b"/") && !bytes.contains(&0) => address,
        _ => {
            report.debug(&format!(
                "trace2: invalid AF_UNIX path '{}' for '{env_name}' tracing",
                path.display()
            ));
            return Opened::Disabled;
        }
    };
    let connected = match kind {
        SocketKind::Stream => connect(&address, Type::STREAM),
        SocketKind::Dgram => connect(&address, Type::DGRAM),
        // Only a "wrong type" answer means a datagram socket may be listening there.
        SocketKind::Auto => match connect(&address, Type::STREAM) {
            Err(err) if err.raw_os_error() == Some(libc::EPROTOTYPE) => {
                connect(&address, Type::DGRAM)
            }
            other => other,
        },
    };
    match connected {
        Ok(fd) if is_stream(&fd) => Opened::Sink(Box::new(StreamSink::new(fd))),
        Ok(fd) => Opened::Sink(Box::new(FdSink::owned(fd, WriteMode::Send))),
        Err(err) => {
            report.debug(&format!(
                "trace2: could not connect to socket '{}' for '{env_name}' tracing: {}",
                path.display(),
                strerror(&err)
            ));
            Opened::Disabled
        }
    }
}

/// Creates a close-on-exec socket of type `ty` and connects it to `address`.
fn connect(address: &SockAddr, ty: Type) -> io::Result<OwnedFd> {
    let socket = Socket::new(Domain::UNIX, ty, None)?;
    set_send_timeout(&socket, SOCKET_TIMEOUT)?;
    // A signal (with or without SA_RESTART, since a timeout is set) ends a blocked
    // connect with EINTR; try again for what is left of the time allowed.
    let deadline = Instant::now() + SOCKET_TIMEOUT;
    while let Err(err) = socket.connect(address) {
        let left = deadline.saturating_duration_since(Instant::now());
        match err.raw_os_error() {
            // Where an interrupted connect carries on in the background.
            Some(libc::EISCONN) => break,
            Some(libc::EINTR) if !left.is_zero() => set_send_timeout(&socket, left)?,
            _ => return Err(err),
        }
    }
    set_send_timeout(&socket, SOCKET_TIMEOUT)?;
    // Writes go through the descriptor sink, which sends with MSG_NOSIGNAL (socket2's
    // own `send` does not).
    Ok(OwnedFd::from(socket))
}

/// Bounds how long connect and send may block (`SO_SNDTIMEO`).
fn set_send_timeout(socket: &Socket, limit: Duration) -> io::Result<()> {
    // A zero timeout would mean "no limit".
    socket.set_write_timeout(Some(limit.max(Duration::from_micros(1))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{child_or_run, git_stderr, open_collect, settings};
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::{UnixDatagram, UnixListener};

    const LINES: [&[u8]; 3] = [b"version 2.47.3\n", b"start git version\n", b"atexit\n"];

    fn sink_for(value: &str) -> Box<dyn crate::Sink> {
        match open_collect(value, &settings(true, 0)) {
            (Opened::Sink(s), seen) if seen.is_empty() => s,
            other => panic!("{value}: {other:?}"),
        }
    }

    /// Our warning for `value` next to real git's, both with dst-debug on.
    fn assert_warns_like_git(value: &str) {
        let (opened, ours) = open_collect(value, &settings(true, 0));
        assert!(matches!(opened, Opened::Disabled), "{value}");
        assert!(open_collect(value, &settings(false, 0)).1.is_empty());
        let env = [("GIT_TRACE2_EVENT", value), ("GIT_TRACE2_DST_DEBUG", "1")];
        let Some(git) = git_stderr(&env) else { return };
        assert_eq!(
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&git)
        );
    }

    #[test]
    fn stream_gets_every_line_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("st.sock");
        let listener = UnixListener::bind(&path).unwrap();
        for prefix in ["af_unix:", "af_unix:stream:"] {
            let sink = sink_for(&format!("{prefix}{}", path.display()));
            for line in LINES {
                sink.write_line(line).unwrap();
            }
            drop(sink);
            let mut got = Vec::new();
            listener.accept().unwrap().0.read_to_end(&mut got).unwrap();
            assert_eq!(got, LINES.concat());
        }
    }

    #[test]
    fn dgram_sends_one_datagram_per_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dg.sock");
        let receiver = UnixDatagram::bind(&path).unwrap();
        receiver
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        // `af_unix:` falls back to datagrams on EPROTOTYPE.
        for prefix in ["af_unix:", "af_unix:dgram:"] {
            let sink = sink_for(&format!("{prefix}{}", path.display()));
            for line in LINES {
                sink.write_line(line).unwrap();
            }
            for line in LINES {
                let mut buf = [0; 256];
                let n = receiver.recv(&mut buf).unwrap();
                assert_eq!(&buf[..n], line);
            }
        }
    }

    #[test]
    fn wrong_socket_type_warns_like_git() {
        let dir = tempfile::tempdir().unwrap();
        let dg = dir.path().join("dg.sock");
        let _dg = UnixDatagram::bind(&dg).unwrap();
        let st = dir.path().join("st.sock");
        let _st = UnixListener::bind(&st).unwrap();
        assert_warns_like_git(&format!("af_unix:stream:{}", dg.display()));
        assert_warns_like_git(&format!("af_unix:dgram:{}", st.display()));
    }

    #[test]
    fn nobody_listening_fails_fast_like_git() {
        let dir = tempfile::tempdir().unwrap();
        let dead = dir.path().join("dead.sock");
        drop(UnixListener::bind(&dead).unwrap());
        let started = Instant::now();
        for prefix in ["af_unix:", "af_unix:stream:", "af_unix:dgram:"] {
            assert_warns_like_git(&format!("{prefix}{}", dead.display()));
            assert_warns_like_git(&format!("{prefix}{}/missing", dir.path().display()));
        }
        assert!(started.elapsed() < SOCKET_TIMEOUT);
    }

    #[test]
    fn invalid_values_and_paths_warn_like_git() {
        let fits = format!("/{}", "a".repeat(sun_path_capacity() - 2));
        let too_long = format!("/{}", "a".repeat(sun_path_capacity() - 1));
        for value in [
            "af_unix:".to_owned(),
            "af_unix:stream:".to_owned(),
            "af_unix:dgram:".to_owned(),
            "af_unix:foo:/p".to_owned(),
            "af_unix:rel".to_owned(),
            "af_unix:dgram:rel".to_owned(),
            format!("af_unix:{too_long}"),
            // One byte shorter is accepted and then fails to connect.
            format!("af_unix:{fits}"),
        ] {
            assert_warns_like_git(&value);
        }
    }

    #[test]
    fn full_backlog_times_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("busy.sock");
        // A listener that never accepts, with the smallest backlog.
        let listener = UnixListener::bind(&path).unwrap();
        assert_eq!(unsafe { libc::listen(listener.as_raw_fd(), 0) }, 0);
        let value = format!("af_unix:stream:{}", path.display());
        let mut kept = Vec::new();
        let started = Instant::now();
        let ours = loop {
            match open_collect(&value, &settings(true, 0)) {
                (Opened::Sink(s), _) if kept.len() < 8 => kept.push(s),
                (Opened::Disabled, seen) => break seen,
                other => panic!("backlog never filled: {other:?}"),
            }
        };
        assert!(started.elapsed() < SOCKET_TIMEOUT * 2);
        assert_eq!(
            String::from_utf8(ours).unwrap(),
            format!(
                "warning: trace2: could not connect to socket '{}' for 'GIT_TRACE2_EVENT' tracing: Resource temporarily unavailable\n",
                path.display()
            )
        );
    }

    #[test]
    fn dead_peer_gives_epipe_not_a_signal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("st.sock");
        let path_text = path.display().to_string();
        let listener = UnixListener::bind(&path).unwrap();
        // Accepts the child's connection and hangs up at once.
        let hang_up = std::thread::spawn(move || drop(listener.accept()));
        let out = child_or_run(
            concat!(module_path!(), "::dead_peer_gives_epipe_not_a_signal"),
            &[("DST_TEST_SOCKET", path_text.as_str())],
            || {
                unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
                let path = std::env::var("DST_TEST_SOCKET").unwrap();
                let sink = sink_for(&format!("af_unix:{path}"));
                // Wait until the parent has accepted and closed our connection.
                let mut err = None;
                for _ in 0..500 {
                    if let Err(e) = sink.write_line(b"line\n") {
                        err = Some(e);
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                let err = err.expect("write never failed");
                assert_eq!(err.raw_os_error(), Some(libc::EPIPE));
                eprint!("alive");
            },
        );
        hang_up.join().unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(out.stderr, b"alive");
    }
}
