//! The walk-through of `docs/collector.md`, run for real: a global git config (in a
//! temporary home, so the user's own config is untouched) sends the Event stream of
//! every process to one `af_unix` stream socket, the way the OpenTelemetry
//! trace2receiver is fed. A Rust tool (the quickstart example, which also runs a traced
//! `git version` child) and a real `git status` then each open one connection, and
//! every connection must pass the receiver's rules (`support::receiver`). Brief mode,
//! which the receiver cannot read, is shown to fail those rules, for git and for us.

#[path = "../examples/quickstart.rs"]
mod quickstart;
#[path = "support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use support::process::{self, GIT};
use support::receiver::{self, Listener, Process};

/// Set in this binary's environment when it must act as the quickstart example.
const QUICKSTART_CHILD: &str = "TRACE2_QUICKSTART_CHILD";

fn main() -> ExitCode {
    if std::env::var_os(QUICKSTART_CHILD).is_some() {
        return quickstart::main();
    }
    support::runner::run_tests(&[
        (
            "rust_tool_and_git_one_connection_each",
            rust_tool_and_git_one_connection_each,
        ),
        (
            "brief_mode_breaks_the_receiver",
            brief_mode_breaks_the_receiver,
        ),
        (
            "checker_rejects_what_the_receiver_rejects",
            checker_rejects_what_the_receiver_rejects,
        ),
    ])
}

/// A temporary home with a global git config, set up as docs/collector.md says.
struct Machine {
    dir: tempfile::TempDir,
}

impl Machine {
    fn new() -> Machine {
        let machine = Machine {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(machine.home()).unwrap();
        machine
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("trace2.sock")
    }

    /// A command whose git environment is this machine's: its home, its global config,
    /// no system config, nothing from the test's own `GIT_*` variables.
    fn command(&self, program: impl AsRef<std::ffi::OsStr>, cwd: &Path) -> Command {
        let mut cmd = process::clean_command(program);
        cmd.env("HOME", self.home())
            .env("GIT_CONFIG_GLOBAL", self.home().join(".gitconfig"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CEILING_DIRECTORIES", self.dir.path())
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .current_dir(cwd);
        cmd
    }

    /// `git <args>` in `cwd`, which must succeed.
    fn git(&self, cwd: &Path, args: &[&str]) {
        let out = self.command(GIT, cwd).args(args).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }

    /// The lines of docs/collector.md's step 1.
    fn configure(&self, brief: bool) {
        let target = format!("af_unix:stream:{}", self.socket().display());
        let home = self.home();
        self.git(
            &home,
            &["config", "--global", "trace2.eventTarget", &target],
        );
        self.git(
            &home,
            &[
                "config",
                "--global",
                "trace2.eventBrief",
                if brief { "true" } else { "false" },
            ],
        );
        self.git(&home, &["config", "--global", "trace2.eventNesting", "5"]);
        self.git(
            &home,
            &["config", "--global", "trace2.configParams", "otel.trace2.*"],
        );
        self.git(
            &home,
            &[
                "config",
                "--global",
                "otel.trace2.nickname",
                "collector-walkthrough",
            ],
        );
    }
}

/// Checks every connection, panicking with the receiver's complaints.
fn checked(connections: &[Vec<u8>]) -> Vec<Process> {
    connections
        .iter()
        .map(|bytes| {
            receiver::check_connection(bytes).unwrap_or_else(|problems| {
                panic!(
                    "rejected:\n  {}\n{}",
                    problems.join("\n  "),
                    String::from_utf8_lossy(bytes)
                )
            })
        })
        .collect()
}

fn rust_tool_and_git_one_connection_each() {
    let machine = Machine::new();
    // Configured before the socket exists: these git runs find no listener and write
    // nothing anywhere (git says nothing unless trace2.destinationDebug is set).
    machine.configure(false);
    let repo = machine.dir.path().join("repo");
    machine.git(machine.dir.path(), &["init", "-q", "repo"]);
    std::fs::write(repo.join("file"), "x\n").unwrap();

    let listener = Listener::bind(&machine.socket()).unwrap();
    let mut tool = machine.command(std::env::current_exe().unwrap(), &repo);
    tool.env(QUICKSTART_CHILD, "1");
    let out = tool.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = machine
        .command(GIT, &repo)
        .args(["status", "--short"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let processes = checked(&listener.finish());

    // The tool, its `git version` child, and `git status`: one connection each.
    assert_eq!(processes.len(), 3, "{:#?}", summary(&processes));
    let by_name = |name: &str| {
        processes
            .iter()
            .find(|p| p.cmd_name.as_ref().is_some_and(|(n, _)| n == name))
            .unwrap_or_else(|| panic!("no {name}: {:#?}", summary(&processes)))
    };
    let tool = by_name("quickstart");
    let child = by_name("version");
    let status = by_name("status");
    assert_eq!(tool.exe, env!("CARGO_PKG_VERSION"));
    assert_eq!(
        (child.exe.as_str(), status.exe.as_str()),
        ("2.47.3", "2.47.3")
    );
    // The child's process span nests under the tool's: its sid extends the tool's.
    assert!(
        child.sid.starts_with(&format!("{}/", tool.sid)),
        "{} / {}",
        tool.sid,
        child.sid
    );
    assert_eq!(child.cmd_name.as_ref().unwrap().1, "quickstart/version");
    assert!(!status.sid.contains('/'));
    // Every process reports the nickname the receiver picks its detail level with.
    for p in [tool, child, status] {
        assert_eq!(
            p.params,
            [(
                "otel.trace2.nickname".to_owned(),
                "collector-walkthrough".to_owned()
            )],
            "{}",
            p.sid
        );
    }
    // The tool's worker thread went through the same connection.
    assert!(
        tool.events
            .iter()
            .any(|e| e["event"] == "thread_start" && e["thread"] == "th01:preload")
    );
}

fn brief_mode_breaks_the_receiver() {
    let machine = Machine::new();
    machine.configure(true);
    let listener = Listener::bind(&machine.socket()).unwrap();
    let home = machine.home();
    let out = machine.command(GIT, &home).arg("version").output().unwrap();
    assert!(out.status.success());
    let mut tool = machine.command(std::env::current_exe().unwrap(), &home);
    tool.env(QUICKSTART_CHILD, "1");
    assert!(tool.output().unwrap().status.success());
    let connections = listener.finish();
    assert_eq!(connections.len(), 3);
    for bytes in &connections {
        let problems = receiver::check_connection(bytes).unwrap_err();
        assert!(
            problems.iter().any(|p| p.contains("no 'time'")),
            "{problems:#?}"
        );
    }
}

fn summary(processes: &[Process]) -> Vec<(String, Option<(String, String)>)> {
    processes
        .iter()
        .map(|p| (p.sid.clone(), p.cmd_name.clone()))
        .collect()
}

/// The checker itself: a clean stream passes, and each broken rule is reported.
fn checker_rejects_what_the_receiver_rejects() {
    const SID: &str = "20260101T000000.000000Z-H00000000-P00000001";
    let line = |event: &str, thread: &str, extra: &str| {
        format!(
            "{{\"event\":\"{event}\",\"sid\":\"{SID}\",\"thread\":\"{thread}\",\"time\":\"2026-01-01T00:00:00.000001Z\"{extra}}}\n"
        )
    };
    let good = [
        line("version", "main", ",\"evt\":\"4\",\"exe\":\"1.0\""),
        line("start", "main", ",\"argv\":[\"tool\"]"),
        line(
            "cmd_name",
            "main",
            ",\"name\":\"tool\",\"hierarchy\":\"tool\"",
        ),
        line(
            "def_param",
            "main",
            ",\"scope\":\"global\",\"param\":\"a.b\",\"value\":\"1\"",
        ),
        line(
            "def_param",
            "main",
            ",\"scope\":\"command\",\"param\":\"a.b\",\"value\":\"2\"",
        ),
        line(
            "def_param",
            "main",
            ",\"scope\":\"global\",\"param\":\"a.b\",\"value\":\"3\"",
        ),
        line(
            "region_enter",
            "main",
            ",\"nesting\":1,\"category\":\"c\",\"label\":\"l\"",
        ),
        line(
            "data",
            "main",
            ",\"nesting\":2,\"category\":\"c\",\"key\":\"k\",\"value\":\"v\"",
        ),
        line("region_leave", "main", ",\"nesting\":1"),
        line("thread_start", "th01:w", ""),
        line("region_enter", "th01:w", ",\"nesting\":1"),
        line("region_leave", "th01:w", ",\"nesting\":1"),
        line("thread_exit", "th01:w", ""),
        line(
            "child_start",
            "main",
            ",\"child_id\":0,\"child_class\":\"?\",\"use_shell\":false,\"argv\":[\"git\"]",
        ),
        line("child_exit", "main", ",\"child_id\":0,\"pid\":9,\"code\":0"),
        line("exit", "main", ",\"code\":0"),
        line("atexit", "main", ",\"code\":0"),
    ];
    let good_text = good.concat();
    let p = receiver::check_connection(good_text.as_bytes()).unwrap();
    // Command scope outranks global; among equals the first stays.
    assert_eq!(p.params, [("a.b".to_owned(), "2".to_owned())]);

    let broken = |edit: &dyn Fn(&mut Vec<String>), why: &str| {
        let mut lines = good.to_vec();
        edit(&mut lines);
        let problems = receiver::check_connection(lines.concat().as_bytes()).unwrap_err();
        assert!(
            problems.iter().any(|p| p.contains(why)),
            "{why}: {problems:#?}"
        );
    };
    broken(
        &|l| {
            let last = l.last_mut().unwrap();
            last.pop();
        },
        "no newline",
    );
    broken(&|l| l.insert(3, "\n".into()), "blank line");
    broken(
        &|l| l[2] = line("cmd_name", "main", ",\"name\":\"tool\""),
        "'hierarchy' missing",
    );
    broken(
        &|l| {
            l[3] = line(
                "def_param",
                "main",
                ",\"scope\":\"global\",\"param\":\"a.b\"",
            )
        },
        "'value' missing",
    );
    broken(
        &|l| l[1] = line("start", "main", ",\"argv\":[]"),
        "empty argv",
    );
    broken(
        &|l| l[1] = line("start", "main", ",\"argv\":[1]"),
        "'argv' is not",
    );
    broken(
        &|l| l[15] = line("exit", "main", ",\"code\":\"0\""),
        "'code' is not",
    );
    broken(
        &|l| l[6] = line("region_enter", "main", ",\"nesting\":2"),
        "region_enter nesting 2",
    );
    broken(
        &|l| {
            l[7] = line(
                "data",
                "main",
                ",\"nesting\":3,\"category\":\"c\",\"key\":\"k\",\"value\":1",
            )
        },
        "no region to attach",
    );
    broken(
        &|l| {
            l.remove(9);
        },
        "has no thread_start",
    );
    broken(
        &|l| {
            l.remove(14);
        },
        "never ended",
    );
    broken(&|l| l[4] = l[4].replace(SID, "other"), "another session id");
    broken(&|l| l.insert(5, l[0].clone()), "a second 'version'");
    broken(
        &|l| {
            l[5] = l[5].replace(
                "\"time\":\"2026-01-01T00:00:00.000001Z\"",
                "\"time\":\"2026-01-01 00:00:00Z\"",
            )
        },
        "bad time",
    );
    broken(
        &|l| l[5] = l[5].replace(",\"time\":\"2026-01-01T00:00:00.000001Z\"", ""),
        "no 'time'",
    );
    broken(
        &|l| {
            l.pop();
        },
        "last event is not 'atexit'",
    );
    broken(&|l| l[8] = "{\"event\":".into(), "bad JSON");
    assert!(receiver::check_connection(b"\xff\n").is_err());
    assert!(receiver::check_connection(b"").is_err());
}
