//! The `def_param` listing (spec 8.3) of a whole program against real git: the `emit`
//! example (run as a child of this binary, with `TRACE2_EMIT_CHILD` set) and
//! `git version` get the same `GIT_TRACE2_CONFIG_PARAMS` / `GIT_TRACE2_ENV_VARS`, the
//! same temporary system and global config files and the same command-line config;
//! their `def_param` lines must be the same in all three formats after masking time,
//! file:line and sid, and must follow `cmd_name` directly. Config writes of the program
//! (scope `unknown`) are compared with `git remote add`.

#[path = "../examples/emit.rs"]
mod emit;
#[path = "support/mod.rs"]
mod support;

use std::path::Path;
use std::process::{Command, ExitCode};

use support::process::{self, EMIT_CHILD, GIT};

fn main() -> ExitCode {
    if std::env::var_os(EMIT_CHILD).is_some() {
        return emit::main();
    }
    support::runner::run_tests(&[
        ("all_scopes_and_env_vars", all_scopes_and_env_vars),
        ("patterns_from_env_unredacted", patterns_from_env_unredacted),
        ("no_listing_without_patterns", no_listing_without_patterns),
        (
            "config_writes_are_scope_unknown",
            config_writes_are_scope_unknown,
        ),
    ])
}

/// `program` in `cwd` with only the given environment for git (no GIT_* from outside,
/// no repository above `cwd`).
fn clean(program: &Path, env: &[(String, String)], cwd: &Path) -> Command {
    let mut cmd = process::clean_command(program);
    cmd.env("LANG", "C")
        .env("LC_ALL", "C")
        .env("GIT_CEILING_DIRECTORIES", cwd.parent().unwrap())
        .current_dir(cwd)
        .envs(env.iter().map(|(k, v)| (k, v)));
    cmd
}

/// The three streams of one run.
struct Streams {
    normal: String,
    perf: String,
    event: String,
}

/// Runs `command` with the three targets pointed at files named after `who`.
fn traced(mut command: Command, dir: &Path, who: &str) -> Streams {
    let out = process::trace_to(&mut command, dir, who).output().unwrap();
    assert!(out.status.success(), "{who}: {out:?}");
    assert!(out.stderr.is_empty(), "{who}: {out:?}");
    let read = |ext: &str| std::fs::read_to_string(process::trace_file(dir, who, ext)).unwrap();
    Streams {
        normal: read("normal"),
        perf: read("perf"),
        event: read("event"),
    }
}

/// The masked `def_param` lines of each stream, and whether they follow `cmd_name`
/// directly in the Event stream.
fn def_params(s: &Streams) -> (Vec<String>, Vec<String>, Vec<String>) {
    let normal = support::records(&s.normal, support::starts_with_time)
        .iter()
        .map(|l| support::mask_normal(l, false))
        .filter(|l| l.starts_with("def_param "))
        .collect();
    let perf = support::records(&s.perf, support::starts_with_time)
        .iter()
        .filter(|l| l.split(" | ").nth(3).map(str::trim) == Some("def_param"))
        .map(|l| support::mask_perf(l, false))
        .collect();
    let names: Vec<String> = support::json_lines(s.event.lines())
        .iter()
        .map(|v| v["event"].as_str().unwrap().to_owned())
        .collect();
    let event: Vec<String> = s
        .event
        .lines()
        .filter(|l| l.contains("\"event\":\"def_param\""))
        .map(support::mask_event)
        .collect();
    if !event.is_empty() {
        let first = names.iter().position(|n| n == "def_param").unwrap();
        assert_eq!(names[first - 1], "cmd_name", "{names:?}");
        assert!(
            names[first..first + event.len()]
                .iter()
                .all(|n| n == "def_param"),
            "{names:?}"
        );
    }
    (normal, perf, event)
}

/// Writes `files` into a fresh directory, runs ours and git with `env` (`@/` in a value
/// stands for that directory) and compares their listings; returns ours.
fn compare(
    files: &[(&str, &str)],
    env: &[(&str, &str)],
) -> (Vec<String>, Vec<String>, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    for (name, text) in files {
        std::fs::write(
            dir.path().join(name),
            text.replace("@/", &format!("{root}/")),
        )
        .unwrap();
    }
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.replace("@/", &format!("{root}/"))))
        .collect();
    let mut ours = clean(&std::env::current_exe().unwrap(), &env, dir.path());
    ours.env(EMIT_CHILD, "1");
    let ours = def_params(&traced(ours, dir.path(), "ours"));
    let mut git = clean(Path::new(GIT), &env, dir.path());
    git.arg("version");
    let git = def_params(&traced(git, dir.path(), "git"));
    assert_eq!(ours.0, git.0, "normal");
    assert_eq!(ours.1, git.1, "perf");
    assert_eq!(ours.2, git.2, "event");
    ours
}

fn all_scopes_and_env_vars() {
    let (normal, _, _) = compare(
        &[
            (
                "sys",
                "[color]\n\tui = never\n[trace2]\n\tconfigParams = color.ui,remote.*.url\n",
            ),
            (
                "global",
                "[color]\n\tui = always\n[Remote \"Origin\"]\n\tURL = https://a:b@h/x\n",
            ),
        ],
        &[
            ("GIT_CONFIG_SYSTEM", "@/sys"),
            ("GIT_CONFIG_GLOBAL", "@/global"),
            (
                "GIT_TRACE2_ENV_VARS",
                "GIT_HTTP_USER_AGENT, MY_VAR ,UNSET_VAR,EMPTY_VAR",
            ),
            ("GIT_HTTP_USER_AGENT", "agent/1.0"),
            ("MY_VAR", "https://bob:pw@host/x"),
            ("EMPTY_VAR", ""),
            ("GIT_CONFIG_PARAMETERS", "'color.ui'='false'"),
            ("GIT_CONFIG_COUNT", "1"),
            ("GIT_CONFIG_KEY_0", "COLOR.UI"),
            ("GIT_CONFIG_VALUE_0", "auto"),
        ],
    );
    // Every scope and both kinds are there (the comparison above is with git).
    assert_eq!(normal.len(), 7, "{normal:#?}");
    let has = |text: &str| normal.iter().any(|l| l.ends_with(text));
    assert!(
        has("global remote.Origin.url=https://a:<REDACTED>@h/x"),
        "{normal:#?}"
    );
    assert!(has("command color.ui=auto"), "{normal:#?}");
    assert!(normal[6].ends_with("MY_VAR=https://bob:<REDACTED>@host/x"));
}

fn patterns_from_env_unredacted() {
    let (normal, _, _) = compare(
        &[(
            "global",
            "[remote \"up\"]\n\turl = https://u:p@x/y\n[color]\n\tUI = auto\n",
        )],
        &[
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_CONFIG_GLOBAL", "@/global"),
            ("GIT_TRACE2_CONFIG_PARAMS", " REMOTE.*, [Cc]olor.ui "),
            ("GIT_TRACE2_ENV_VARS", "HOME"),
            ("GIT_TRACE2_REDACT", "0"),
        ],
    );
    assert_eq!(normal.len(), 3, "{normal:#?}");
    assert!(normal[0].ends_with("remote.up.url=https://u:p@x/y"));
}

fn no_listing_without_patterns() {
    let (normal, perf, event) = compare(
        &[("global", "[a]\n\tb = 1\n")],
        &[
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_CONFIG_GLOBAL", "@/global"),
        ],
    );
    assert!(normal.is_empty() && perf.is_empty() && event.is_empty());
}

/// `git remote add` reports its config write as `def_param scope:unknown`; the
/// program's own write reported through `Trace2::report_config_write` must read the same.
fn config_writes_are_scope_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let url = "https://dan:pw@example.net/x.git";
    let env: Vec<(String, String)> = [
        ("GIT_CONFIG_NOSYSTEM", "1"),
        ("GIT_CONFIG_GLOBAL", "/dev/null"),
        ("GIT_TRACE2_CONFIG_PARAMS", "remote.*"),
        ("GIT_TRACE2_BRIEF", "1"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let init = clean(Path::new(GIT), &env, dir.path())
        .args(["init", "-q", "repo"])
        .output()
        .unwrap();
    assert!(init.status.success(), "{init:?}");
    let unknown = |normal: &str| -> Vec<String> {
        normal
            .lines()
            .filter(|l| l.starts_with("def_param scope:unknown "))
            .map(str::to_owned)
            .collect()
    };
    let mut git = clean(Path::new(GIT), &env, &repo);
    git.args(["remote", "add", "Other", url]);
    let git = unknown(&traced(git, dir.path(), "git").normal);
    let mut ours = clean(&std::env::current_exe().unwrap(), &env, &repo);
    ours.env(EMIT_CHILD, "1")
        .args(["--config-write", &format!("Remote.Other.URL={url}")])
        .args(["--config-write", "core.bare=false"]);
    let ours = unknown(&traced(ours, dir.path(), "ours").normal);
    assert_eq!(ours, git);
    assert_eq!(
        ours,
        ["def_param scope:unknown remote.Other.url=https://dan:<REDACTED>@example.net/x.git"]
    );
}
