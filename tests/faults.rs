//! Fault injection: the `host` example (this very binary, run as a child with
//! `TRACE2_HOST_CHILD` set) traces from several threads while something goes wrong
//! around it: a file size limit (EFBIG), a full device (ENOSPC), a closed pipe (EPIPE),
//! a socket peer that stalls or hangs up, a descriptor the host closes and reuses, a
//! trace directory removed, a fork with and without exec, SIGTERM, `exit` from another
//! thread, a lossy writer under pressure, a panic inside a field's `Debug`.
//!
//! Every run checks what the promises of `docs/guarantees.md` say: the host's exit code
//! and stdout are unchanged, it is not held longer than [`LIMIT`], nothing follows
//! `atexit`, and every file target holds whole lines only.

#[path = "../examples/host.rs"]
mod host;
#[path = "support/mod.rs"]
mod support;

use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, ExitCode, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use support::process::{self, give_fd};

/// Set in the environment of this binary when it must act as `examples/host.rs`.
const HOST_CHILD: &str = "TRACE2_HOST_CHILD";

/// The longest a host may take, whatever the fault.
const LIMIT: Duration = Duration::from_secs(3);

/// The exit code the hosts are asked for.
const CODE: i32 = 7;

fn main() -> ExitCode {
    if std::env::var_os(HOST_CHILD).is_some() {
        return host::main();
    }
    support::runner::run_tests(&[
        ("file_size_limit", file_size_limit),
        ("full_device", full_device),
        ("closed_pipe", closed_pipe),
        ("socket_peer_hangs_up", socket_peer_hangs_up),
        ("socket_peer_stalls", socket_peer_stalls),
        ("trace_directory_removed", trace_directory_removed),
        ("fork_and_exec", fork_and_exec),
        ("fork_then_exit_direct", fork_then_exit_direct),
        ("fork_then_exit_background", fork_then_exit_background),
        (
            "lossy_pressure_keeps_lifecycle",
            lossy_pressure_keeps_lifecycle,
        ),
        ("sigterm_while_busy", sigterm_while_busy),
        (
            "kills_cut_lines_only_at_a_page_end",
            kills_cut_lines_only_at_a_page_end,
        ),
        ("exit_from_a_thread", exit_from_a_thread),
        ("fd_target_closed_and_reused", fd_target_closed_and_reused),
        ("panic_in_a_fields_debug", panic_in_a_fields_debug),
        (
            "main_returns_while_threads_trace",
            main_returns_while_threads_trace,
        ),
    ])
}

/// The host with a clean Trace2 environment and `args` after the common ones.
fn host(args: &[&str], env: &[(&str, &str)]) -> Command {
    host_with(args, None, env)
}

/// [`host`], with the background writer in `background` mode (`lossless`, `lossy`)
/// when one is given.
fn host_with(args: &[&str], background: Option<&str>, env: &[(&str, &str)]) -> Command {
    let mut cmd = process::clean_command(std::env::current_exe().unwrap());
    process::without_config(cmd.env(HOST_CHILD, "1"))
        .args(["--code", &CODE.to_string()])
        .args(args)
        .envs(env.iter().copied());
    if let Some(mode) = background {
        cmd.args(["--background", mode]);
    }
    cmd
}

/// What a host run left behind.
struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    took: Duration,
}

/// Runs `cmd`, killing it (and failing) if it takes longer than [`LIMIT`].
fn run(mut cmd: Command) -> Run {
    let started = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let readers = [
        read_all(child.stdout.take().unwrap()),
        read_all(child.stderr.take().unwrap()),
    ];
    let status = wait_bounded(&mut child, started);
    let [stdout, stderr] = readers.map(|r| r.join().unwrap());
    Run {
        status,
        stdout,
        stderr,
        took: started.elapsed(),
    }
}

fn read_all(mut from: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = from.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Waits for `child`; kills it and fails if it runs past [`LIMIT`] from `started`.
fn wait_bounded(child: &mut std::process::Child, started: Instant) -> ExitStatus {
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the host was held longer than {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The host's exit code and stdout are what it would have been without tracing.
fn assert_host_unchanged(run: &Run, lines: u64, threads: u64) {
    assert_eq!(run.status.code(), Some(CODE), "stderr: {}", run.stderr);
    assert_eq!(
        run.stdout,
        format!("host: {lines} lines from {threads} threads\n")
    );
    assert!(run.took < LIMIT, "took {:?}", run.took);
}

/// Every line of an Event file, each checked whole (the file ends with a newline and
/// each line is one JSON object); nothing after `atexit`, which comes at most once.
fn event_file(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read(path).unwrap_or_default();
    event_text(&text, &path.display().to_string())
}

fn event_text(bytes: &[u8], what: &str) -> Vec<serde_json::Value> {
    let text = String::from_utf8_lossy(bytes);
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "partial last line in {what}: {:?}",
        &text[text.len().saturating_sub(80)..]
    );
    let events = support::json_lines(text.lines());
    assert_nothing_after_atexit(&events, what);
    events
}

fn assert_nothing_after_atexit(events: &[serde_json::Value], what: &str) {
    let names = names(events);
    if let Some(at) = names.iter().position(|n| n == "atexit") {
        assert_eq!(
            at + 1,
            names.len(),
            "{} lines after atexit in {what}: {:?}",
            names.len() - at - 1,
            &names[at..names.len().min(at + 4)]
        );
    }
}

fn names(events: &[serde_json::Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["event"].as_str().unwrap_or("?").to_owned())
        .collect()
}

fn count(events: &[serde_json::Value], name: &str) -> usize {
    events.iter().filter(|e| e["event"] == name).count()
}

/// The `printf` messages of `events` whose text starts with `prefix`.
fn printf_with(events: &[serde_json::Value], prefix: &str) -> usize {
    events
        .iter()
        .filter(|e| e["event"] == "printf" && e["msg"].as_str().unwrap().starts_with(prefix))
        .count()
}

/// A brief Perf file: each line whole; the event names.
fn perf_file(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(
        text.ends_with('\n'),
        "partial last line in {}",
        path.display()
    );
    text.lines()
        .map(|l| l.split(" | ").nth(2).unwrap().trim().to_owned())
        .collect()
}

fn assert_perf_complete(path: &Path) {
    let names = perf_file(path);
    assert_eq!(names.first().map(String::as_str), Some("version"));
    assert_eq!(names.last().map(String::as_str), Some("atexit"));
    assert_eq!(names.iter().filter(|n| *n == "exit").count(), 1);
}

/// A second, healthy target beside the faulty one: a brief Perf file.
fn perf_beside(dir: &Path) -> (String, [(&'static str, String); 2]) {
    let perf = dir.join("trace.perf").display().to_string();
    (
        perf.clone(),
        [
            ("GIT_TRACE2_PERF", perf),
            ("GIT_TRACE2_PERF_BRIEF", "1".to_owned()),
        ],
    )
}

fn env_refs<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// A file size limit (`RLIMIT_FSIZE`, SIGXFSZ ignored): writes past it fail with
/// EFBIG. The file keeps whole lines only, the binary trace whole frames only (frames
/// written together are taken whole or refused, never cut at a newline byte inside
/// one), the host goes on.
fn file_size_limit() {
    const LIMIT_BYTES: u64 = 20_000;
    let dir = tempfile::tempdir().unwrap();
    let event = dir.path().join("trace.event");
    let binary = dir.path().join("trace.t2b");
    for background in [None, Some("lossless")] {
        let _ = std::fs::remove_file(&event);
        let _ = std::fs::remove_file(&binary);
        let args = ["--lines", "400", "--threads", "2"];
        let mut cmd = host_with(
            &args,
            background,
            &[
                ("GIT_TRACE2_EVENT", event.to_str().unwrap()),
                ("TRACING_TRACE2_BINARY", binary.to_str().unwrap()),
            ],
        );
        with_file_size_limit(&mut cmd, LIMIT_BYTES);
        let run = run(cmd);
        assert_host_unchanged(&run, 400, 2);
        let size = std::fs::metadata(&event).unwrap().len();
        assert!(size <= LIMIT_BYTES && size > LIMIT_BYTES / 2, "{size}");
        let events = event_file(&event);
        assert_eq!(names(&events)[..2], ["version", "start"]);
        assert_whole_frames(&binary, LIMIT_BYTES);
    }
    // Limits the binary trace meets in a `write` of several frames (the STREAM frame
    // with the first batch; at exit the last batch, a header copy and END), at many
    // offsets: such a write is taken whole or refused, never cut after a byte that
    // happens to be a newline inside a frame.
    for limit in (1..64u64).map(|k| k * 37) {
        let _ = std::fs::remove_file(&binary);
        let mut cmd = host(
            &["--lines", "3"],
            &[("TRACING_TRACE2_BINARY", binary.to_str().unwrap())],
        );
        with_file_size_limit(&mut cmd, limit);
        assert_host_unchanged(&run(cmd), 3, 1);
        assert_whole_frames(&binary, limit);
    }
}

/// Sets `limit` as the child's file size limit, SIGXFSZ ignored.
fn with_file_size_limit(cmd: &mut Command, limit: u64) {
    // SAFETY: setrlimit and signal are async-signal-safe; they touch only the child.
    unsafe {
        cmd.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            libc::setrlimit(libc::RLIMIT_FSIZE, &limit);
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
}

/// The binary trace at `path` is at most `limit` bytes of whole frames, nothing torn.
fn assert_whole_frames(path: &Path, limit: u64) {
    let bytes = std::fs::read(path).unwrap_or_default();
    assert!(bytes.len() as u64 <= limit, "{} > {limit}", bytes.len());
    let options = tracing_trace2_binary::decode::DecodeOptions::default();
    let report = tracing_trace2_binary::decode::decode(&bytes[..], &options, |_, _| {}).unwrap();
    assert_eq!(report.skipped_bytes, 0, "binary trace damaged\n{report}");
    assert_eq!(report.cut_frames, 0, "binary trace cut\n{report}");
}

/// `/dev/full` (ENOSPC on every write): the target is disabled, git's warning with
/// destination debugging, the other target complete with an `error` line.
fn full_device() {
    let dir = tempfile::tempdir().unwrap();
    let (perf, env) = perf_beside(dir.path());
    let mut env = env_refs(&env);
    env.extend([
        ("GIT_TRACE2_EVENT", "/dev/full"),
        ("GIT_TRACE2_DST_DEBUG", "1"),
    ]);
    let run = run(host(&["--lines", "50", "--threads", "2"], &env));
    assert_host_unchanged(&run, 50, 2);
    assert_eq!(
        run.stderr,
        "warning: unable to write trace to 'GIT_TRACE2_EVENT': No space left on device\n"
    );
    assert_perf_complete(Path::new(&perf));
    assert!(perf_file(Path::new(&perf)).contains(&"error".to_owned()));
}

/// A pipe whose reader is gone (EPIPE, and no SIGPIPE kills the host), direct and
/// through the background writer.
fn closed_pipe() {
    for background in [None, Some("lossless"), Some("lossy")] {
        let dir = tempfile::tempdir().unwrap();
        let (perf, env) = perf_beside(dir.path());
        let mut env = env_refs(&env);
        env.push(("GIT_TRACE2_EVENT", "3"));
        let args = ["--lines", "200", "--threads", "2"];
        let mut cmd = host_with(&args, background, &env);
        let (read, write) = process::pipe();
        drop(read);
        give_fd(&mut cmd, write.as_raw_fd(), 3);
        let run = run(cmd);
        drop(write);
        assert_host_unchanged(&run, 200, 2);
        assert!(run.stderr.is_empty(), "{}", run.stderr);
        assert_perf_complete(Path::new(&perf));
    }
}

/// An `af_unix` collector that accepts and hangs up at once (EPIPE on the next send).
fn socket_peer_hangs_up() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("collector.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let hang_up = std::thread::spawn(move || drop(listener.accept()));
    let (perf, env) = perf_beside(dir.path());
    let mut env = env_refs(&env);
    let value = format!("af_unix:stream:{}", socket.display());
    env.push(("GIT_TRACE2_EVENT", &value));
    let run = run(host(&["--lines", "300", "--threads", "2"], &env));
    hang_up.join().unwrap();
    assert_host_unchanged(&run, 300, 2);
    assert_perf_complete(Path::new(&perf));
}

/// An `af_unix` collector that accepts and stops reading, with 200 KB lines: the host
/// is held at most about 2 s in all, the target is disabled (and says so with
/// destination debugging), and the collector reads whole lines only.
fn socket_peer_stalls() {
    for background in [None, Some("lossless")] {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("collector.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        // Accepts, then reads nothing until the host has ended.
        let (done_tx, done) = std::sync::mpsc::channel::<()>();
        let collector = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let _ = done.recv();
            let mut got = Vec::new();
            conn.read_to_end(&mut got).unwrap();
            got
        });
        let (perf, env) = perf_beside(dir.path());
        let mut env = env_refs(&env);
        let value = format!("af_unix:stream:{}", socket.display());
        env.extend([
            ("GIT_TRACE2_EVENT", value.as_str()),
            ("GIT_TRACE2_DST_DEBUG", "1"),
        ]);
        let args = ["--lines", "10", "--threads", "2", "--line-bytes", "200000"];
        let run = run(host_with(&args, background, &env));
        done_tx.send(()).unwrap();
        let got = collector.join().unwrap();
        assert_host_unchanged(&run, 10, 2);
        assert_eq!(
            run.stderr,
            "warning: unable to write trace to 'GIT_TRACE2_EVENT': Resource temporarily unavailable\n"
        );
        let events = event_text(&got, "the collector's connection");
        assert_eq!(names(&events)[..2], ["version", "start"]);
        assert_perf_complete(Path::new(&perf));
    }
}

/// The host removes the trace directory while tracing into a file in it.
fn trace_directory_removed() {
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces");
    std::fs::create_dir(&traces).unwrap();
    let (perf, env) = perf_beside(dir.path());
    let mut env = env_refs(&env);
    env.push(("GIT_TRACE2_EVENT", traces.to_str().unwrap()));
    let args = ["--lines", "100", "--remove-dir", traces.to_str().unwrap()];
    let run = run(host(&args, &env));
    assert_host_unchanged(&run, 100, 1);
    assert!(!traces.exists());
    assert_perf_complete(Path::new(&perf));
}

/// A fork whose child execs at once: the parent's trace is complete, the child adds
/// nothing.
fn fork_and_exec() {
    for background in [None, Some("lossless")] {
        let dir = tempfile::tempdir().unwrap();
        let event = dir.path().join("trace.event");
        let args = ["--lines", "100", "--threads", "2", "--fork", "exec"];
        let run = run(host_with(
            &args,
            background,
            &[("GIT_TRACE2_EVENT", event.to_str().unwrap())],
        ));
        assert_host_unchanged(&run, 100, 2);
        let events = event_file(&event);
        assert_eq!(count(&events, "exit"), 1);
        assert_eq!(count(&events, "atexit"), 1);
        assert_eq!(printf_with(&events, "t"), 200);
        assert_eq!(printf_with(&events, "after fork"), 1);
    }
}

/// SIGTERM while every thread traces: the host dies of it at once, as it would
/// untraced, and the files hold whole lines (no `exit`: a fatal signal is not traced).
fn sigterm_while_busy() {
    for background in [None, Some("lossless")] {
        let dir = tempfile::tempdir().unwrap();
        let event = dir.path().join("trace.event");
        let args = ["--lines", "10", "--threads", "3", "--end", "forever"];
        let mut cmd = host_with(
            &args,
            background,
            &[("GIT_TRACE2_EVENT", event.to_str().unwrap())],
        );
        let started = Instant::now();
        let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
        let mut line = [0u8; 32];
        let n = child.stdout.as_mut().unwrap().read(&mut line).unwrap();
        assert_eq!(&line[..n], b"host: 10 lines from 3 threads\n");
        // Kill once the first lines are out (a fixed sleep was too short for a
        // background writer on a loaded machine), while the threads still trace.
        let t0_written = || {
            let text = std::fs::read(&event).unwrap_or_default();
            String::from_utf8_lossy(&text)
                .matches("\"msg\":\"t0")
                .count()
                >= 10
        };
        while !t0_written() && started.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(5));
        }
        // SAFETY: signals our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let status = wait_bounded(&mut child, started);
        assert_eq!(status.signal(), Some(libc::SIGTERM));
        // The kill may cut the one line being written (docs/guarantees.md: at most the
        // last line); every line before it is whole.
        let mut text = std::fs::read(&event).unwrap();
        text.truncate(text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1));
        let events = event_text(&text, "the killed host's trace");
        assert_eq!(count(&events, "atexit"), 0);
        assert!(printf_with(&events, "t0") >= 10);
    }
}

/// A host tracing from two threads, killed (SIGKILL, or a SIGTERM it does not handle) a
/// few milliseconds after it started, 1,000 times, direct and background: its Normal
/// and Event targets are files, its Perf target a pipe or a Unix stream socket that the
/// test reads meanwhile.
///
/// What a kill can cut is what the kernel stops in the middle. It stops a buffered
/// `write` to a file only between two pages of the file, so every file holds whole
/// lines, except at most its last line, cut exactly where a page of the file ends: a
/// line, or a background writer's batch, whose `write` crossed a page boundary. No file
/// writer rules that out (git's one `write` per line cannot either); how often it
/// happens depends on how much of its time the process spends in such writes (in these
/// runs, a few in a hundred kills, more with a background writer, which writes more
/// lines per second), and `trace2` takes such a last line for the end of the trace. A
/// pipe takes a line of up to 4 KiB whole or not at all, and a stream socket a line
/// that fits its buffer: on those no line is ever cut. The counts are printed.
fn kills_cut_lines_only_at_a_page_end() {
    let dir = tempfile::tempdir().unwrap();
    let files = ["normal", "event"].map(|name| dir.path().join(name));
    let socket = dir.path().join("perf.sock");
    let binary = dir.path().join("trace.t2b");
    // Binary traces whose last frame a kill cut at a page end, and those written.
    let (mut binary_cut, mut binary_written) = (0u32, 0u32);
    // Cut last lines of files, direct and background; and file targets that got lines.
    let (mut cut, mut targets, mut written) = ([0u32; 2], [0u32; 2], 0);
    let mut streamed = 0;
    for n in 0..1_000u64 {
        let background = (n % 2 == 1).then_some("lossless");
        let signal = if n / 2 % 2 == 0 {
            libc::SIGKILL
        } else {
            libc::SIGTERM
        };
        let on_socket = n / 4 % 2 == 1;
        for file in &files {
            let _ = std::fs::remove_file(file);
        }
        let _ = std::fs::remove_file(&socket);
        let _ = std::fs::remove_file(&binary);
        let perf = if on_socket {
            format!("af_unix:stream:{}", socket.display())
        } else {
            "9".to_owned()
        };
        let env = [
            ("GIT_TRACE2", files[0].to_str().unwrap()),
            ("GIT_TRACE2_EVENT", files[1].to_str().unwrap()),
            ("GIT_TRACE2_PERF", perf.as_str()),
            ("TRACING_TRACE2_BINARY", binary.to_str().unwrap()),
        ];
        let args = ["--lines", "10", "--threads", "2", "--end", "forever"];
        let mut cmd = host_with(&args, background, &env);
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        // The Perf target's reader: all the host sent, to its end.
        let (mut child, reader) = if on_socket {
            let listener = UnixListener::bind(&socket).unwrap();
            let reader = std::thread::spawn(move || {
                // The host's connection, or the test's own once the host is dead.
                let (mut conn, _) = listener.accept().unwrap();
                let mut got = Vec::new();
                conn.read_to_end(&mut got).unwrap();
                got
            });
            (cmd.spawn().unwrap(), reader)
        } else {
            let (read, write) = process::pipe();
            give_fd(&mut cmd, write.as_raw_fd(), 9);
            let reader = std::thread::spawn(move || {
                let mut got = Vec::new();
                std::fs::File::from(read).read_to_end(&mut got).unwrap();
                got
            });
            let child = cmd.spawn().unwrap();
            // The child's copy is the only one left: the reader sees its end.
            drop(write);
            (child, reader)
        };
        std::thread::sleep(Duration::from_micros(1_000 + (n * 617) % 4_000));
        // SAFETY: signals our own child, which cannot outlive either signal.
        unsafe { libc::kill(child.id() as i32, signal) };
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(signal), "run {n}");
        if on_socket {
            // Wakes the reader if the host died before it connected.
            drop(std::os::unix::net::UnixStream::connect(&socket));
        }
        let what = format!("run {n} ({background:?})");
        let got = reader.join().unwrap();
        streamed += got.len();
        let kind = if on_socket { "socket" } else { "pipe" };
        assert!(
            got.is_empty() || got.ends_with(b"\n"),
            "{what}: a line cut on a {kind}"
        );
        for file in &files {
            let text = std::fs::read(file).unwrap_or_default();
            written += text.len();
            let Some(&last) = text.last() else { continue };
            targets[usize::from(background.is_some())] += 1;
            if last == b'\n' {
                continue;
            }
            cut[usize::from(background.is_some())] += 1;
            // Cut where a page of the file ends, never inside one.
            assert_eq!(
                text.len() % 4096,
                0,
                "{what}, {}: cut inside a page",
                file.display()
            );
        }
        // The binary trace: intact frames, at most the last one cut at a page end, which
        // the decoder reports as the kill it is, not as damage.
        if let Ok(bytes) = std::fs::read(&binary)
            && !bytes.is_empty()
        {
            binary_written += 1;
            let options = tracing_trace2_binary::decode::DecodeOptions::default();
            let report =
                tracing_trace2_binary::decode::decode(&bytes[..], &options, |_, _| {}).unwrap();
            assert_eq!(
                report.skipped_bytes, 0,
                "{what}: binary trace damaged\n{report}"
            );
            if report.cut_frames > 0 {
                binary_cut += 1;
                assert_eq!(
                    bytes.len() % 4096,
                    0,
                    "{what}: binary frame cut inside a page"
                );
            }
        }
    }
    eprintln!(
        "1,000 kills: {written} bytes in files, {streamed} on pipes and sockets (no line cut); \
         last lines cut at a page end: {} of {} direct file targets, {} of {} background; \
         binary traces with their last frame cut at a page end: {binary_cut} of {binary_written}",
        cut[0], targets[0], cut[1], targets[1]
    );
    assert!(
        binary_written > 0,
        "no binary trace was written before the kills"
    );
    assert!(written > 0, "nothing was written before the kills");
    assert!(streamed > 0, "nothing was sent before the kills");
}

/// A fork whose child traces and calls `exit`: the child's lines are written (under
/// the session it shares with its parent), but the lifecycle's `exit` and `atexit`
/// belong to the parent only, once, last.
fn fork_then_exit(background: Option<&str>) {
    let dir = tempfile::tempdir().unwrap();
    let event = dir.path().join("trace.event");
    let args = ["--lines", "100", "--threads", "2", "--fork", "exit"];
    let run = run(host_with(
        &args,
        background,
        &[("GIT_TRACE2_EVENT", event.to_str().unwrap())],
    ));
    assert_host_unchanged(&run, 100, 2);
    let events = event_file(&event);
    assert_eq!(count(&events, "exit"), 1, "{:?}", names(&events));
    assert_eq!(count(&events, "atexit"), 1);
    assert_eq!(printf_with(&events, "t"), 200);
    assert_eq!(printf_with(&events, "c "), 100, "the child's lines");
    assert_eq!(printf_with(&events, "after fork"), 1);
    let exit = &events[events.len() - 2];
    assert_eq!(exit["event"], "exit");
    assert_eq!(exit["code"], CODE);
}

fn fork_then_exit_direct() {
    fork_then_exit(None);
}

/// The same with the background writer, whose worker thread does not exist in the
/// child: the child writes its own lines and does not wait for a worker.
fn fork_then_exit_background() {
    fork_then_exit(Some("lossless"));
    fork_then_exit(Some("lossy"));
}

/// A lossy writer under pressure (a pipe nobody reads until the host has printed its
/// output, a queue of 4, four processes at once) drops `printf` lines, never
/// `version`, `start`, `cmd_name`, `exit` or `atexit`.
fn lossy_pressure_keeps_lifecycle() {
    let children: Vec<_> = (0..4)
        .map(|_| {
            let mut cmd = host(
                &[
                    "--lines",
                    "3000",
                    "--threads",
                    "3",
                    "--background",
                    "lossy",
                    "--capacity",
                    "4",
                ],
                &[("GIT_TRACE2_EVENT", "3")],
            );
            let (read, write) = process::pipe();
            give_fd(&mut cmd, write.as_raw_fd(), 3);
            let started = Instant::now();
            let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
            drop(write);
            (child.stdout.take().unwrap(), read, child, started)
        })
        .collect();
    for (mut stdout, read, mut child, started) in children {
        let mut said = [0u8; 64];
        let n = stdout.read(&mut said).unwrap();
        assert_eq!(&said[..n], b"host: 3000 lines from 3 threads\n");
        let mut trace = Vec::new();
        std::fs::File::from(read).read_to_end(&mut trace).unwrap();
        let status = wait_bounded(&mut child, started);
        assert_eq!(status.code(), Some(CODE));
        let events = event_text(&trace, "the pipe");
        for kind in ["version", "start", "cmd_name", "exit", "atexit"] {
            assert_eq!(count(&events, kind), 1, "{kind}");
        }
    }
}

/// Ends the host with `end` while other threads keep tracing, six times each way
/// (direct, lossless and lossy background): `atexit` is always the last line.
fn ends_while_tracing(end: &str) {
    for background in [None, Some("lossless"), Some("lossy")] {
        for _ in 0..6 {
            let dir = tempfile::tempdir().unwrap();
            let event = dir.path().join("trace.event");
            let args = ["--lines", "20", "--threads", "4", "--end", end];
            let run = run(host_with(
                &args,
                background,
                &[("GIT_TRACE2_EVENT", event.to_str().unwrap())],
            ));
            assert_host_unchanged(&run, 20, 4);
            let events = event_file(&event);
            assert_eq!(count(&events, "exit"), 1);
            assert_eq!(names(&events).last().map(String::as_str), Some("atexit"));
        }
    }
}

fn exit_from_a_thread() {
    ends_while_tracing("exit-from-thread");
}

fn main_returns_while_threads_trace() {
    ends_while_tracing("return-while-tracing");
}

/// A field whose `Debug` panics while the layer reads it: the panic is the host's (it
/// catches it here), and the trace has its `error` line, like any other panic.
fn panic_in_a_fields_debug() {
    for background in [None, Some("lossless")] {
        let dir = tempfile::tempdir().unwrap();
        let event = dir.path().join("trace.event");
        let args = ["--lines", "4", "--field-panic"];
        let run = run(host_with(
            &args,
            background,
            &[("GIT_TRACE2_EVENT", event.to_str().unwrap())],
        ));
        assert_host_unchanged(&run, 4, 1);
        assert!(
            run.stderr.contains("a field's Debug panicked"),
            "{}",
            run.stderr
        );
        let events = event_file(&event);
        let errors: Vec<_> = events.iter().filter(|e| e["event"] == "error").collect();
        assert_eq!(errors.len(), 1, "{:?}", names(&events));
        assert_eq!(errors[0]["msg"], "a field's Debug panicked");
        assert_eq!(names(&events).last().map(String::as_str), Some("atexit"));
        // The thread is usable afterwards: its later lines are all there.
        assert_eq!(printf_with(&events, "t0"), 4);
    }
}

/// `GIT_TRACE2_EVENT=9` with the background writer; halfway, the host closes fd 9 and
/// opens a file of its own, which gets number 9. No trace line reaches the host's
/// file, not even one traced before the close; the trace file is complete.
fn fd_target_closed_and_reused() {
    for mode in ["lossless", "lossy"] {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("trace.event");
        let hosts = dir.path().join("host.txt");
        let reuse = format!("9:{}", hosts.display());
        let args = [
            "--lines",
            "300",
            "--threads",
            "3",
            "--background",
            mode,
            "--reuse-fd",
            &reuse,
        ];
        let mut cmd = host(&args, &[("GIT_TRACE2_EVENT", "9")]);
        let file = std::fs::File::create(&trace).unwrap();
        give_fd(&mut cmd, file.as_raw_fd(), 9);
        let run = run(cmd);
        drop(file);
        assert_host_unchanged(&run, 300, 3);
        assert_eq!(
            std::fs::read_to_string(&hosts).unwrap(),
            "host's own line\n"
        );
        let events = event_file(&trace);
        assert_eq!(names(&events).first().map(String::as_str), Some("version"));
        assert_eq!(names(&events).last().map(String::as_str), Some("atexit"));
        if mode == "lossless" {
            assert_eq!(printf_with(&events, "t"), 900);
        }
    }
}
