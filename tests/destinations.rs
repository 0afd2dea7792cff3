//! Every form of destination value (spec 7.1 to 7.5), exercised by real child processes: the
//! `emit` example runs as a child of this binary (with `TRACE2_EMIT_CHILD` set) and
//! real `git version` runs with the same environment. For each value the test checks
//! the warnings against git's, byte for byte (with and without
//! `GIT_TRACE2_DST_DEBUG`), that the program's own output and exit code are
//! unchanged, and that the other target (a Perf file) keeps working.

#[path = "../examples/emit.rs"]
mod emit;
#[path = "support/mod.rs"]
mod support;

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Output};
use std::time::Duration;

use support::process::{self, EMIT_CHILD, GIT, give_fd};
/// What `emit --lines 3` prints, and the exit code the tests ask for.
const STDOUT: &str = "emit: 3 lines from 1 threads\n";
const CODE: i32 = 5;

fn main() -> ExitCode {
    if std::env::var_os(EMIT_CHILD).is_some() {
        return emit::main();
    }
    support::runner::run_tests(&[
        ("stderr_values", stderr_values),
        ("fd_3_from_the_parent", fd_3_from_the_parent),
        (
            "file_appended_by_two_processes",
            file_appended_by_two_processes,
        ),
        (
            "directory_one_file_per_process",
            directory_one_file_per_process,
        ),
        ("max_files_and_sentinel", max_files_and_sentinel),
        ("af_unix_stream", af_unix_stream),
        ("af_unix_dgram", af_unix_dgram),
        ("warnings_match_git", warnings_match_git),
        ("socket_nobody_listens_on", socket_nobody_listens_on),
        ("broken_pipe", broken_pipe),
        (
            "broken_pipe_error_line_like_git",
            broken_pipe_error_line_like_git,
        ),
        ("broken_pipe_background", broken_pipe_background),
    ])
}

/// A command with a clean Trace2 environment: no GIT_* from outside, no host config.
fn clean(program: &Path, env: &[(&str, &str)], cwd: &Path) -> Command {
    let mut cmd = process::clean_command(program);
    process::without_config(&mut cmd)
        .env("LANG", "C")
        .env("LC_ALL", "C")
        .current_dir(cwd)
        .envs(env.iter().copied());
    cmd
}

/// `emit --lines 3 --code 5` plus `args`.
fn emit_cmd(args: &[&str], env: &[(&str, &str)], cwd: &Path) -> Command {
    let mut cmd = clean(&std::env::current_exe().unwrap(), env, cwd);
    cmd.env(EMIT_CHILD, "1")
        .args(["--lines", "3", "--code", "5"])
        .args(args);
    cmd
}

/// `git version` with the same environment.
fn git_cmd(env: &[(&str, &str)], cwd: &Path) -> Command {
    let mut cmd = clean(Path::new(GIT), env, cwd);
    cmd.arg("version");
    cmd
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The program's own output and exit code, whatever the tracing did.
fn assert_program_unchanged(out: &Output) {
    assert_eq!(text(&out.stdout), STDOUT, "{out:?}");
    assert_eq!(out.status.code(), Some(CODE), "{out:?}");
}

/// The event names of a brief Perf file, and the payloads of its `error` lines.
fn perf_events(path: &Path) -> (Vec<String>, Vec<String>) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut names = Vec::new();
    let mut errors = Vec::new();
    for line in text.lines() {
        let cols: Vec<&str> = line.split(" | ").collect();
        let name = cols[2].trim().to_owned();
        if name == "error" {
            errors.push(cols.last().unwrap().to_string());
        } else {
            names.push(name);
        }
    }
    (names, errors)
}

/// The line sequence of one `emit` run in the other target.
fn complete_emit_run() -> Vec<String> {
    [
        "version", "start", "cmd_name", "printf", "printf", "printf", "exit", "atexit",
    ]
    .map(String::from)
    .to_vec()
}

/// Runs ours and git with `env` plus a brief Perf target in a file of each; checks the
/// warnings are git's, the program unchanged and the Perf target complete. Returns
/// (our Perf errors, git's Perf errors, our stderr).
fn compare(env: &[(&str, &str)], cwd: &Path) -> (Vec<String>, Vec<String>, String) {
    let ours_perf = cwd.join("ours.perf");
    let git_perf = cwd.join("git.perf");
    let _ = std::fs::remove_file(&ours_perf);
    let _ = std::fs::remove_file(&git_perf);
    let with = |perf: &Path| {
        let mut e: Vec<(&str, String)> = env.iter().map(|(k, v)| (*k, v.to_string())).collect();
        e.push(("GIT_TRACE2_PERF", perf.to_str().unwrap().to_owned()));
        e.push(("GIT_TRACE2_PERF_BRIEF", "1".to_owned()));
        e
    };
    let ours_env = with(&ours_perf);
    let ours_env: Vec<(&str, &str)> = ours_env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let ours = emit_cmd(&[], &ours_env, cwd).output().unwrap();
    let git_env = with(&git_perf);
    let git_env: Vec<(&str, &str)> = git_env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let git = git_cmd(&git_env, cwd).output().unwrap();
    assert!(git.status.success(), "{git:?}");
    assert_eq!(text(&ours.stderr), text(&git.stderr), "env {env:?}");
    assert_program_unchanged(&ours);
    let (names, ours_errors) = perf_events(&ours_perf);
    assert_eq!(names, complete_emit_run(), "env {env:?}");
    let (_, git_errors) = perf_events(&git_perf);
    (ours_errors, git_errors, text(&ours.stderr))
}

/// Runs [`compare`] without and with `GIT_TRACE2_DST_DEBUG`; returns both stderrs.
fn compare_both(env: &[(&str, &str)], cwd: &Path) -> [String; 2] {
    let quiet = compare(env, cwd).2;
    let mut debug_env = env.to_vec();
    debug_env.push(("GIT_TRACE2_DST_DEBUG", "1"));
    let loud = compare(&debug_env, cwd).2;
    [quiet, loud]
}

fn stderr_values() {
    let dir = tempfile::tempdir().unwrap();
    for value in ["1", "true", "TRUE"] {
        let env = [("GIT_TRACE2", value), ("GIT_TRACE2_BRIEF", "1")];
        let ours = emit_cmd(&[], &env, dir.path()).output().unwrap();
        assert_program_unchanged(&ours);
        let first: Vec<String> = text(&ours.stderr)
            .lines()
            .map(|l| l.split(' ').next().unwrap().to_owned())
            .collect();
        assert_eq!(
            first,
            [
                "version", "start", "cmd_name", "t0", "t0", "t0", "exit", "atexit"
            ],
            "{value}"
        );
        // Git also takes the value as stderr, not stdout.
        let git = git_cmd(&env, dir.path()).output().unwrap();
        assert_eq!(text(&git.stdout), "git version 2.47.3\n");
        assert!(text(&git.stderr).starts_with("version 2.47.3\n"), "{git:?}");
    }
}

fn event_names(text: &str) -> Vec<String> {
    support::json_lines(text.lines())
        .iter()
        .map(|v| v["event"].as_str().unwrap().to_owned())
        .collect()
}

fn fd_3_from_the_parent() {
    let dir = tempfile::tempdir().unwrap();
    for who in ["ours", "git"] {
        let path = dir.path().join(who);
        let file = std::fs::File::create(&path).unwrap();
        let env = [("GIT_TRACE2_EVENT", "3")];
        let mut cmd = if who == "ours" {
            emit_cmd(&[], &env, dir.path())
        } else {
            git_cmd(&env, dir.path())
        };
        give_fd(&mut cmd, file.as_raw_fd(), 3);
        let out = cmd.output().unwrap();
        assert!(out.stderr.is_empty(), "{out:?}");
        let names = event_names(&std::fs::read_to_string(&path).unwrap());
        if who == "ours" {
            assert_program_unchanged(&out);
            assert_eq!(names, complete_emit_run());
        } else {
            assert_eq!(names.first().map(String::as_str), Some("version"));
            assert_eq!(names.last().map(String::as_str), Some("atexit"));
        }
    }
}

fn file_appended_by_two_processes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.event");
    let env = [("GIT_TRACE2_EVENT", path.to_str().unwrap())];
    let args = ["--threads", "2", "--lines", "5000"];
    let children: Vec<_> = (0..2)
        .map(|_| {
            emit_cmd(&args, &env, dir.path())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert_eq!(child.wait().unwrap().code(), Some(CODE));
    }
    let text = std::fs::read_to_string(&path).unwrap();
    // Per process (sid) and thread: every printf line, whole and in order.
    let mut next: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut per_sid: HashMap<String, u64> = HashMap::new();
    for line in text.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let sid = v["sid"].as_str().unwrap().to_owned();
        *per_sid.entry(sid.clone()).or_insert(0) += 1;
        if v["event"] == "printf" {
            let (t, i) = v["msg"].as_str().unwrap().split_once(' ').unwrap();
            let slot = next.entry((sid, t.to_owned())).or_insert(0);
            assert_eq!(i.parse::<u64>().unwrap(), *slot, "{line}");
            *slot += 1;
        }
    }
    assert_eq!(per_sid.len(), 2);
    // + the worker thread's thread_start and thread_exit.
    assert!(per_sid.values().all(|&n| n == 10_005 + 2), "{per_sid:?}");
    assert_eq!(next.len(), 4);
    assert!(next.values().all(|&n| n == 5000));
}

/// The files of a directory target: name -> the SID of its first line.
fn dir_files(dir: &Path) -> BTreeMap<String, String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(e.path()).unwrap();
            let first: serde_json::Value =
                serde_json::from_str(text.lines().next().unwrap_or("{}")).unwrap();
            (name, first["sid"].as_str().unwrap_or("").to_owned())
        })
        .collect()
}

fn directory_one_file_per_process() {
    let root = tempfile::tempdir().unwrap();
    for who in ["ours", "git"] {
        let dir = root.path().join(who);
        std::fs::create_dir(&dir).unwrap();
        for value in [
            dir.to_str().unwrap().to_owned(),
            format!("{}/", dir.display()),
        ] {
            let env = [("GIT_TRACE2_EVENT", value.as_str())];
            let out = if who == "ours" {
                emit_cmd(&[], &env, root.path()).output().unwrap()
            } else {
                git_cmd(&env, root.path()).output().unwrap()
            };
            assert!(out.stderr.is_empty(), "{out:?}");
            if who == "ours" {
                assert_program_unchanged(&out);
            }
        }
        let files = dir_files(&dir);
        assert_eq!(files.len(), 2, "{who}: {files:?}");
        for (name, sid) in &files {
            // Named after the last SID component (spec 7.3).
            assert_eq!(sid.rsplit('/').next(), Some(name.as_str()), "{who}");
        }
        if who == "ours" {
            for name in files.keys() {
                let text = std::fs::read_to_string(dir.join(name)).unwrap();
                assert_eq!(event_names(&text), complete_emit_run());
            }
        }
    }
    // Name collisions (`.1` … `.9`, then a warning) need a SID known in advance; the
    // core crate's `dst::dir` tests cover them against git.
}

/// Runs one process of each into its own directory with `maxFiles`: the warnings must
/// be git's (directory name replaced), the files git's in number and kind.
fn max_files_and_sentinel() {
    let root = tempfile::tempdir().unwrap();
    let ours_dir = root.path().join("ours");
    let git_dir = root.path().join("git");
    std::fs::create_dir(&ours_dir).unwrap();
    std::fs::create_dir(&git_dir).unwrap();
    for round in 0..6 {
        let debug = if round == 5 { "0" } else { "1" };
        let perf = root.path().join("ours.perf");
        let _ = std::fs::remove_file(&perf);
        let ours = emit_cmd(
            &[],
            &[
                ("GIT_TRACE2_EVENT", ours_dir.to_str().unwrap()),
                ("GIT_TRACE2_MAX_FILES", "5"),
                ("GIT_TRACE2_DST_DEBUG", debug),
                ("GIT_TRACE2_PERF", perf.to_str().unwrap()),
                ("GIT_TRACE2_PERF_BRIEF", "1"),
            ],
            root.path(),
        )
        .output()
        .unwrap();
        let git = git_cmd(
            &[
                ("GIT_TRACE2_EVENT", git_dir.to_str().unwrap()),
                ("GIT_TRACE2_MAX_FILES", "5"),
                ("GIT_TRACE2_DST_DEBUG", debug),
            ],
            root.path(),
        )
        .output()
        .unwrap();
        assert_program_unchanged(&ours);
        assert_eq!(perf_events(&perf).0, complete_emit_run(), "round {round}");
        let git_stderr = text(&git.stderr).replace(git_dir.to_str().unwrap(), "<dir>");
        let ours_stderr = text(&ours.stderr).replace(ours_dir.to_str().unwrap(), "<dir>");
        assert_eq!(ours_stderr, git_stderr, "round {round}");
        if round == 4 {
            assert_eq!(
                ours_stderr,
                "warning: trace2: not opening GIT_TRACE2_EVENT trace file due to too many files in target directory <dir>\n"
            );
        }
    }
    let sentinel = tracing_trace2_dst::DISCARD_SENTINEL;
    let shape = |dir: &Path| {
        let files = dir_files(dir);
        (files.len(), files.contains_key(sentinel))
    };
    assert_eq!(shape(&ours_dir), shape(&git_dir));
    assert_eq!(shape(&ours_dir), (4, true));
    let ours = event_names(&std::fs::read_to_string(ours_dir.join(sentinel)).unwrap());
    let git = event_names(&std::fs::read_to_string(git_dir.join(sentinel)).unwrap());
    assert_eq!(ours[..2], git[..2]);
    assert_eq!(ours[..2], ["version", "too_many_files"]);
    assert_eq!(ours[2..], complete_emit_run()[1..]);
}

fn socket_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

fn af_unix_stream() {
    let dir = tempfile::tempdir().unwrap();
    let path = socket_path(dir.path(), "st.sock");
    let listener = UnixListener::bind(&path).unwrap();
    for value in [
        format!("af_unix:{}", path.display()),
        format!("af_unix:stream:{}", path.display()),
    ] {
        let reader = {
            let listener = listener.try_clone().unwrap();
            std::thread::spawn(move || {
                let (mut conn, _) = listener.accept().unwrap();
                let mut text = String::new();
                conn.read_to_string(&mut text).unwrap();
                text
            })
        };
        let (ours_errors, _, _) = compare(&[("GIT_TRACE2_EVENT", value.as_str())], dir.path());
        assert!(ours_errors.is_empty());
        let got = reader.join().unwrap();
        // compare() ran ours first, then git, both connecting: the first connection
        // is ours. Git's connection is accepted below and drained.
        assert_eq!(event_names(&got), complete_emit_run(), "{value}");
        let (mut git_conn, _) = listener.accept().unwrap();
        let mut git_text = String::new();
        git_conn.read_to_string(&mut git_text).unwrap();
        assert!(git_text.starts_with("{\"event\":\"version\""));
    }
}

fn af_unix_dgram() {
    let dir = tempfile::tempdir().unwrap();
    let path = socket_path(dir.path(), "dg.sock");
    let socket = UnixDatagram::bind(&path).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    for value in [
        format!("af_unix:{}", path.display()),
        format!("af_unix:dgram:{}", path.display()),
    ] {
        let env = [("GIT_TRACE2_EVENT", value.as_str())];
        let ours = emit_cmd(&[], &env, dir.path()).output().unwrap();
        assert_program_unchanged(&ours);
        assert!(ours.stderr.is_empty(), "{ours:?}");
        let mut names = Vec::new();
        let mut buf = vec![0u8; 65536];
        while let Ok(n) = socket.recv(&mut buf) {
            let datagram = std::str::from_utf8(&buf[..n]).unwrap();
            // One datagram per line, each ending in its LF.
            assert_eq!(datagram.matches('\n').count(), 1, "{datagram:?}");
            assert!(datagram.ends_with('\n'));
            names.extend(event_names(datagram));
        }
        assert_eq!(names, complete_emit_run(), "{value}");
    }
}

/// Values that open nothing: the warnings must be git's in both debug modes, and the
/// other target must keep working.
fn warnings_match_git() {
    let dir = tempfile::tempdir().unwrap();
    // A directory nobody may create files in: read-only for a normal user; root
    // ignores modes, but not /sys.
    let read_only = dir.path().join("read-only");
    std::fs::create_dir(&read_only).unwrap();
    std::fs::set_permissions(
        &read_only,
        std::os::unix::fs::PermissionsExt::from_mode(0o555),
    )
    .unwrap();
    let unwritable = if unsafe { libc::geteuid() } == 0 {
        "/sys/trace2-test".to_owned()
    } else {
        format!("{}/trace", read_only.display())
    };
    let unwritable_warning = format!(
        "warning: trace2: could not open '{unwritable}' for 'GIT_TRACE2' tracing: Permission denied\n"
    );
    let long = format!("af_unix:/tmp/{}", "a".repeat(120));
    let long_stream = format!("af_unix:stream:/tmp/{}", "b".repeat(110));
    let cases: Vec<(&str, &str, [&str; 2])> = vec![
        (
            "GIT_TRACE2_EVENT",
            "yes",
            [
                "warning: trace2: unknown value for 'GIT_TRACE2_EVENT': 'yes'\n",
                "warning: trace2: unknown value for 'GIT_TRACE2_EVENT': 'yes'\n",
            ],
        ),
        (
            "GIT_TRACE2",
            "rel/trace",
            [
                "warning: trace2: unknown value for 'GIT_TRACE2': 'rel/trace'\n",
                "warning: trace2: unknown value for 'GIT_TRACE2': 'rel/trace'\n",
            ],
        ),
        (
            "GIT_TRACE2_EVENT",
            "/dev/null/x",
            [
                "",
                "warning: trace2: could not open '/dev/null/x' for 'GIT_TRACE2_EVENT' tracing: Not a directory\n",
            ],
        ),
        ("GIT_TRACE2", &unwritable, ["", &unwritable_warning]),
        ("GIT_TRACE2_EVENT", &long, ["", ""]),
        ("GIT_TRACE2_EVENT", &long_stream, ["", ""]),
        (
            "GIT_TRACE2_EVENT",
            "af_unix:",
            [
                "",
                "warning: trace2: invalid AF_UNIX value 'af_unix:' for 'GIT_TRACE2_EVENT' tracing\n",
            ],
        ),
    ];
    for (name, value, expected) in cases {
        let got = compare_both(&[(name, value)], dir.path());
        // The exact texts were checked against git inside compare(); the socket-path
        // cases carry the path, so only their shape is spelled out here.
        if value.starts_with("af_unix:/") || value.starts_with("af_unix:stream:") {
            assert_eq!(got[0], "");
            let path = value
                .trim_start_matches("af_unix:")
                .trim_start_matches("stream:");
            assert_eq!(
                got[1],
                format!("warning: trace2: invalid AF_UNIX path '{path}' for '{name}' tracing\n")
            );
        } else {
            assert_eq!(got, expected.map(String::from), "{value}");
        }
    }
}

fn socket_nobody_listens_on() {
    let dir = tempfile::tempdir().unwrap();
    let missing = socket_path(dir.path(), "missing.sock");
    let dead = socket_path(dir.path(), "dead.sock");
    drop(UnixListener::bind(&dead).unwrap());
    for (path, err) in [
        (&missing, "No such file or directory"),
        (&dead, "Connection refused"),
    ] {
        let value = format!("af_unix:{}", path.display());
        let got = compare_both(&[("GIT_TRACE2_EVENT", value.as_str())], dir.path());
        assert_eq!(got[0], "");
        assert_eq!(
            got[1],
            format!(
                "warning: trace2: could not connect to socket '{}' for 'GIT_TRACE2_EVENT' tracing: {err}\n",
                path.display()
            )
        );
    }
}

/// A pipe whose reader has gone, as the child's fd 3; returns our copy of the write end.
fn broken_pipe_fd() -> OwnedFd {
    let (read, write) = process::pipe();
    drop(read);
    write
}

/// Runs ours (with `args`) and git with GIT_TRACE2 on a broken pipe and a Perf file.
fn broken_pipe_run(args: &[&str], debug: bool) -> (Output, Vec<String>, Output, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let mut outs = Vec::new();
    for who in ["ours", "git"] {
        let perf = dir.path().join(format!("{who}.perf"));
        let env = [
            ("GIT_TRACE2", "3"),
            ("GIT_TRACE2_DST_DEBUG", if debug { "1" } else { "0" }),
            ("GIT_TRACE2_PERF", perf.to_str().unwrap()),
            ("GIT_TRACE2_PERF_BRIEF", "1"),
        ];
        let mut cmd = if who == "ours" {
            emit_cmd(args, &env, dir.path())
        } else {
            git_cmd(&env, dir.path())
        };
        let write = broken_pipe_fd();
        give_fd(&mut cmd, write.as_raw_fd(), 3);
        let out = cmd.output().unwrap();
        let (names, errors) = perf_events(&perf);
        if who == "ours" {
            assert_eq!(names, complete_emit_run());
        }
        outs.push((out, errors));
    }
    let (git, git_errors) = outs.pop().unwrap();
    let (ours, ours_errors) = outs.pop().unwrap();
    (ours, ours_errors, git, git_errors)
}

const EPIPE_WARNING: &str = "warning: unable to write trace to 'GIT_TRACE2': Broken pipe\n";

/// The host survives, the target is disabled, the warning is git's.
fn broken_pipe() {
    for debug in [false, true] {
        let (ours, _, git, _) = broken_pipe_run(&[], debug);
        assert_program_unchanged(&ours);
        assert_eq!(text(&ours.stderr), text(&git.stderr));
        if debug {
            assert_eq!(text(&ours.stderr), EPIPE_WARNING);
        } else {
            assert!(ours.stderr.is_empty());
        }
    }
}

/// With dst-debug, the other target records the failure as an `error` line, as git's
/// does (`dst-badfd.*`); here the failing write is the very first one (`version`).
fn broken_pipe_error_line_like_git() {
    for debug in [false, true] {
        let (_, ours_errors, _, git_errors) = broken_pipe_run(&[], debug);
        assert_eq!(ours_errors, git_errors, "dst-debug {debug}");
        if debug {
            assert_eq!(
                ours_errors,
                ["unable to write trace to 'GIT_TRACE2': Broken pipe"]
            );
        }
    }
}

/// Through the background writer the failure surfaces one line later, with the same
/// warning and the same `error` line in the other target.
fn broken_pipe_background() {
    for debug in [false, true] {
        let (ours, ours_errors, git, git_errors) =
            broken_pipe_run(&["--background", "lossless"], debug);
        assert_program_unchanged(&ours);
        assert_eq!(text(&ours.stderr), text(&git.stderr));
        assert_eq!(ours_errors, git_errors);
    }
}
