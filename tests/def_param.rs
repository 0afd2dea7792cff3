//! The `def_param` listing (spec 8.3) of a whole program against real git: the `emit`
//! example (run as a child of this binary, with `TRACE2_EMIT_CHILD` set) and
//! `git version` get the same `GIT_TRACE2_CONFIG_PARAMS` / `GIT_TRACE2_ENV_VARS`, the
//! same temporary system and global config files and the same command-line config;
//! their `def_param` lines must be the same in all three formats after masking time,
//! file:line and sid, and must follow `cmd_name` directly. Config writes of the program
//! (scope `unknown`) are compared with `git remote add`. Inside a repository, the
//! repository's config (scope `local`) is listed after the global one and before the
//! command line, as `git version` and `git status` list it (git's t0212 `list config`
//! case among them).

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
        (
            "t0212_list_config_local_scope",
            t0212_list_config_local_scope,
        ),
        (
            "every_scope_in_git_order_in_a_subdirectory",
            every_scope_in_git_order_in_a_subdirectory,
        ),
        (
            "linked_worktree_lists_the_common_config",
            linked_worktree_lists_the_common_config,
        ),
        (
            "valueless_key_prints_the_key_alone",
            valueless_key_prints_the_key_alone,
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

type Listing = (Vec<String>, Vec<String>, Vec<String>);

/// Writes `files` into a fresh directory, runs ours and git with `env` (`@/` in a value
/// stands for that directory) and compares their listings; returns ours.
fn compare(files: &[(&str, &str)], env: &[(&str, &str)]) -> Listing {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), files);
    compare_in(
        dir.path(),
        dir.path(),
        &with_root(dir.path(), env),
        &["version"],
    )
}

/// `env` with `@/` in values replaced by `root`.
fn with_root(root: &Path, env: &[(&str, &str)]) -> Vec<(String, String)> {
    let root = format!("{}/", root.display());
    env.iter()
        .map(|(k, v)| (k.to_string(), v.replace("@/", &root)))
        .collect()
}

/// Writes `files` (`@/` in a text stands for `dir`) into `dir`.
fn write_files(dir: &Path, files: &[(&str, &str)]) {
    let root = format!("{}/", dir.display());
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text.replace("@/", &root)).unwrap();
    }
}

/// Runs ours and `git <git_args>` in `cwd` (the traces go to `dir`, named after the
/// git command) and compares the listings of the three formats; returns ours.
fn compare_in(dir: &Path, cwd: &Path, env: &[(String, String)], git_args: &[&str]) -> Listing {
    let tag = git_args.first().copied().unwrap_or("git");
    let mut ours = clean(&std::env::current_exe().unwrap(), env, cwd);
    ours.env(EMIT_CHILD, "1");
    let ours = def_params(&traced(ours, dir, &format!("ours-{tag}")));
    let mut git = clean(Path::new(GIT), env, cwd);
    git.args(git_args);
    let git = def_params(&traced(git, dir, &format!("git-{tag}")));
    assert_eq!(ours.0, git.0, "normal");
    assert_eq!(ours.1, git.1, "perf");
    assert_eq!(ours.2, git.2, "event");
    ours
}

/// The environment of a test with repositories below `dir`: no system config, a global
/// file in `dir` and `dir` as the ceiling (so only repositories inside it are found).
fn repo_env(dir: &Path) -> Vec<(String, String)> {
    let mut env = with_root(
        dir,
        &[
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_CONFIG_GLOBAL", "@/global"),
        ],
    );
    env.push(("GIT_CEILING_DIRECTORIES".into(), dir.display().to_string()));
    env
}

/// Runs git in `cwd` with `env` and no trace target, for setting up a repository.
fn git_setup(cwd: &Path, env: &[(String, String)], args: &[&str]) {
    let out = clean(Path::new(GIT), env, cwd).args(args).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
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

/// Git's t0212 `list config` case: two keys set with `git config --local`, listed with
/// `GIT_TRACE2_CONFIG_PARAMS=t0212.*`, in file order, scope `local`, in all three
/// formats (git's case reads the Event stream through `parse_events.perl`, which keeps
/// the `param`/`value` pairs in order).
fn t0212_list_config_local_scope() {
    let dir = tempfile::tempdir().unwrap();
    let env = repo_env(dir.path());
    git_setup(dir.path(), &env, &["init", "-q", "repo"]);
    let repo = dir.path().join("repo");
    git_setup(&repo, &env, &["config", "--local", "t0212.abc", "1"]);
    git_setup(
        &repo,
        &env,
        &["config", "--local", "t0212.def", "hello world"],
    );
    let mut env = env;
    env.push(("GIT_TRACE2_CONFIG_PARAMS".into(), "t0212.*".into()));
    let (normal, perf, event) = compare_in(dir.path(), &repo, &env, &["version"]);
    assert_eq!(
        normal,
        [
            "def_param scope:local t0212.abc=1",
            "def_param scope:local t0212.def=hello world"
        ]
    );
    assert_eq!(perf.len(), 2);
    assert_eq!(event.len(), 2);
    let raw =
        std::fs::read_to_string(process::trace_file(dir.path(), "ours-version", "event")).unwrap();
    let pairs: Vec<(String, String, String)> = support::json_lines(raw.lines())
        .iter()
        .filter(|v| v["event"] == "def_param")
        .map(|v| {
            let field = |k: &str| v[k].as_str().unwrap().to_owned();
            (field("scope"), field("param"), field("value"))
        })
        .collect();
    assert_eq!(
        pairs,
        [
            ("local".into(), "t0212.abc".into(), "1".into()),
            ("local".into(), "t0212.def".into(), "hello world".into())
        ]
    );
    // A builtin that sets up the repository first lists the same lines.
    assert_eq!(
        compare_in(dir.path(), &repo, &env, &["status", "--porcelain"]),
        (normal, perf, event)
    );
}

/// System, global, local (with a `gitdir:` include), command line, then environment
/// variables, from a subdirectory of the work tree.
fn every_scope_in_git_order_in_a_subdirectory() {
    let dir = tempfile::tempdir().unwrap();
    write_files(
        dir.path(),
        &[
            ("sys", "[color]\n\tui = never\n"),
            (
                "global",
                "[color]\n\tui = always\n[includeIf \"gitdir:repo/\"]\n\tpath = @/inc\n",
            ),
            ("inc", "[color]\n\tui = included\n"),
        ],
    );
    let mut env = repo_env(dir.path());
    env.retain(|(k, _)| k != "GIT_CONFIG_NOSYSTEM");
    env.extend(with_root(dir.path(), &[("GIT_CONFIG_SYSTEM", "@/sys")]));
    git_setup(dir.path(), &env, &["init", "-q", "repo"]);
    let repo = dir.path().join("repo");
    git_setup(&repo, &env, &["config", "color.ui", "auto"]);
    git_setup(
        &repo,
        &env,
        &["remote", "add", "origin", "https://u:pw@example.org/r"],
    );
    let sub = repo.join("src/deep");
    std::fs::create_dir_all(&sub).unwrap();
    env.extend(with_root(
        dir.path(),
        &[
            ("GIT_TRACE2_CONFIG_PARAMS", "color.ui,remote.*.url"),
            ("GIT_TRACE2_ENV_VARS", "MY_VAR"),
            ("MY_VAR", "v"),
            ("GIT_CONFIG_PARAMETERS", "'color.ui'='false'"),
        ],
    ));
    let (normal, _, _) = compare_in(dir.path(), &sub, &env, &["version"]);
    let scopes: Vec<&str> = normal
        .iter()
        .map(|l| l.split_whitespace().nth(1).unwrap())
        .collect();
    assert_eq!(
        scopes,
        [
            "scope:system",
            "scope:global",
            "scope:global",
            "scope:local",
            "scope:local",
            "scope:command",
            "scope:command"
        ],
        "{normal:#?}"
    );
    assert!(normal[4].ends_with("remote.origin.url=https://u:<REDACTED>@example.org/r"));
}

/// In a linked worktree the listing reads the common `config`; git 2.47.3 lists no
/// `scope:worktree` line even with `extensions.worktreeConfig` and a `config.worktree`.
fn linked_worktree_lists_the_common_config() {
    let dir = tempfile::tempdir().unwrap();
    let env = repo_env(dir.path());
    git_setup(dir.path(), &env, &["init", "-q", "repo"]);
    let repo = dir.path().join("repo");
    git_setup(
        &repo,
        &env,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
    );
    git_setup(
        &repo,
        &env,
        &["config", "extensions.worktreeConfig", "true"],
    );
    git_setup(&repo, &env, &["config", "core.shared", "main"]);
    git_setup(&repo, &env, &["worktree", "add", "-q", "../wt"]);
    let wt = dir.path().join("wt");
    git_setup(&wt, &env, &["config", "--worktree", "core.only-here", "wt"]);
    let mut env = env;
    env.push((
        "GIT_TRACE2_CONFIG_PARAMS".into(),
        "core.shared,core.only-here".into(),
    ));
    let (normal, _, _) = compare_in(dir.path(), &wt, &env, &["version"]);
    assert_eq!(normal, ["def_param scope:local core.shared=main"]);
    let (status, _, _) = compare_in(dir.path(), &wt, &env, &["status", "--porcelain"]);
    assert_eq!(status, normal);
}

/// `git -c foo.bar cmd` sets the key without a value. Git 2.47.3 crashes when it lists
/// such a key; since 2.49 each format writes the key alone (Normal without `=value`,
/// Perf without `:value`, Event without the `value` field), which we follow. An empty
/// value (`-c foo.baz=`) is a value and keeps its separator. Ours only: the git here
/// is older.
fn valueless_key_prints_the_key_alone() {
    let dir = tempfile::tempdir().unwrap();
    let env = with_root(
        dir.path(),
        &[
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_CONFIG_GLOBAL", "@/global"),
            ("GIT_TRACE2_CONFIG_PARAMS", "foo.*"),
            (
                "GIT_CONFIG_PARAMETERS",
                "'foo.bar' 'foo.baz'='' 'foo.qux'='1'",
            ),
        ],
    );
    let mut ours = clean(&std::env::current_exe().unwrap(), &env, dir.path());
    ours.env(EMIT_CHILD, "1");
    let streams = traced(ours, dir.path(), "ours");
    let (normal, perf, _) = def_params(&streams);
    assert_eq!(
        normal,
        [
            "def_param scope:command foo.bar",
            "def_param scope:command foo.baz=",
            "def_param scope:command foo.qux=1"
        ],
    );
    let payloads: Vec<&str> = perf
        .iter()
        .map(|l| l.rsplit(" | ").next().unwrap())
        .collect();
    assert_eq!(payloads, ["foo.bar", "foo.baz:", "foo.qux:1"], "{perf:#?}");
    // The scope in git's 12-wide category column.
    assert!(
        perf.iter().all(|l| l.contains("| scope:comman |")),
        "{perf:#?}"
    );
    let event = support::json_lines(streams.event.lines());
    let values: Vec<_> = event
        .iter()
        .filter(|v| v["event"] == "def_param")
        .map(|v| (v["param"].clone(), v.get("value").cloned()))
        .collect();
    assert_eq!(
        values,
        [
            ("foo.bar".into(), None),
            ("foo.baz".into(), Some("".into())),
            ("foo.qux".into(), Some("1".into()))
        ],
        "{event:#?}"
    );
}
