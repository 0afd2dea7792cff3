//! The repository part of the `def_param` listing against real git: for each layout
//! (worktrees, `.git` files, `GIT_DIR`, ceilings, bare repositories, ownership, format
//! versions, `includeIf` conditions), `git version` is run in the scratch directory and
//! its `def_param` lines and warnings are compared with what [`Settings::load_in`]
//! lists for the same directory and environment.

use std::collections::BTreeMap;
use std::path::Path;

use super::Settings;
use super::test_git::{Scratch, lookup, stderr_messages};
use crate::params::def_params;

type Env = BTreeMap<String, String>;

/// One layout: `setup` builds it (running git with the base environment), then git and
/// ours list from `cwd` with the base environment plus `env` (`@` = scratch root).
struct Case {
    name: &'static str,
    /// Whether git lists `local` lines here (so a listing that went empty is noticed).
    local: bool,
    setup: fn(&Scratch, &Env),
    cwd: &'static str,
    env: &'static [(&'static str, &'static str)],
}

/// The environment every run starts from: no system config, a global file in the
/// scratch directory, `t.*` and `include*` keys listed.
fn base_env(s: &Scratch, extra: &[(&str, &str)]) -> Env {
    let mut pairs = vec![
        ("GIT_CONFIG_NOSYSTEM", "1"),
        ("GIT_CONFIG_GLOBAL", "@/global"),
        ("GIT_TRACE2_CONFIG_PARAMS", "t.*,include*"),
    ];
    pairs.extend_from_slice(extra);
    s.env(&pairs)
}

/// `git init` of `rel` with `t.<rel-as-key>` set, plus a subdirectory `sub/deep`.
fn repo(s: &Scratch, env: &Env, rel: &str, key: &str) {
    s.git_ok("", &["init", "-q", rel], env);
    s.git_ok(rel, &["config", &format!("t.{key}"), "1"], env);
    s.git_ok(rel, &["config", "t.spaced", "hello world"], env);
    std::fs::create_dir_all(s.root.join(rel).join("sub/deep")).unwrap();
}

fn commit(s: &Scratch, env: &Env, rel: &str) {
    s.git_ok(
        rel,
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
        env,
    );
}

/// Gives `rel` and everything below it to uid 1234 (root only).
fn chown_tree(path: &Path) {
    std::os::unix::fs::lchown(path, Some(1234), None).unwrap();
    if path.is_dir() && !path.is_symlink() {
        for entry in std::fs::read_dir(path).unwrap() {
            chown_tree(&entry.unwrap().path());
        }
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Git's `def_param` lines and warnings, then ours, for one case.
fn run(case: &Case) {
    let s = Scratch::new();
    let setup_env = base_env(&s, &[]);
    (case.setup)(&s, &setup_env);
    let mut env = base_env(&s, case.env);
    env.insert("GIT_TRACE2".into(), s.path("trace"));
    env.insert("GIT_TRACE2_BRIEF".into(), "1".into());
    env.insert("GIT_TRACE2_REDACT".into(), "0".into());
    let out = s.git_in(case.cwd, &["version"], &env);
    assert!(
        out.status.success(),
        "{}: {}",
        case.name,
        String::from_utf8_lossy(&out.stderr)
    );
    let git: Vec<String> = s
        .read("trace")
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("def_param "))
        .map(str::to_string)
        .collect();
    let git_warnings = stderr_messages(&out);
    assert_eq!(
        git.iter().any(|l| l.starts_with("scope:local ")),
        case.local,
        "{}: git listed {git:#?}",
        case.name
    );

    let cwd = std::fs::canonicalize(s.root.join(case.cwd)).unwrap();
    let settings = Settings::load_in(&lookup(&env), &cwd);
    let ours: Vec<String> = def_params(&settings)
        .into_iter()
        .map(|p| {
            format!(
                "scope:{} {}={}",
                p.scope,
                p.param,
                p.value.unwrap_or_else(|| "(null)".into())
            )
        })
        .collect();
    assert_eq!(ours, git, "{}", case.name);
    // Git prints a multi-line warning over several lines.
    assert_eq!(
        settings.warnings.join("\n"),
        git_warnings.join("\n"),
        "{}",
        case.name
    );
}

const CASES: &[Case] = &[
    Case {
        name: "top of a work tree: local after global, before command",
        local: true,
        setup: |s, env| {
            repo(s, env, "r", "a");
            s.write("global", "[t]\n\tg = 1\n");
        },
        cwd: "r",
        env: &[("GIT_CONFIG_PARAMETERS", "'t.c'='3'")],
    },
    Case {
        name: "subdirectory",
        local: true,
        setup: |s, env| repo(s, env, "r", "a"),
        cwd: "r/sub/deep",
        env: &[],
    },
    Case {
        name: "inside the git directory",
        local: true,
        setup: |s, env| repo(s, env, "r", "a"),
        cwd: "r/.git/refs",
        env: &[],
    },
    Case {
        name: "linked worktree: the common config, never config.worktree",
        local: true,
        setup: |s, env| {
            repo(s, env, "r", "a");
            commit(s, env, "r");
            s.git_ok("r", &["config", "extensions.worktreeConfig", "true"], env);
            s.git_ok("r", &["config", "--worktree", "t.main-wt", "1"], env);
            s.git_ok("r", &["worktree", "add", "-q", "../wt"], env);
            s.git_ok("wt", &["config", "--worktree", "t.linked-wt", "1"], env);
            std::fs::create_dir_all(s.root.join("wt/sub")).unwrap();
        },
        cwd: "wt/sub",
        env: &[("GIT_TRACE2_CONFIG_PARAMS", "t.*,extensions.*")],
    },
    Case {
        name: "main worktree with worktree config",
        local: true,
        setup: |s, env| {
            repo(s, env, "r", "a");
            s.git_ok("r", &["config", "extensions.worktreeConfig", "true"], env);
            s.git_ok("r", &["config", "--worktree", "t.main-wt", "1"], env);
        },
        cwd: "r",
        env: &[],
    },
    Case {
        name: ".git file with a relative path",
        local: true,
        setup: |s, env| {
            repo(s, env, "r", "a");
            s.write("g/.git", "gitdir: ../r/.git\n");
            std::fs::create_dir_all(s.root.join("g/sub")).unwrap();
        },
        cwd: "g/sub",
        env: &[],
    },
    Case {
        name: ".git file with an absolute path and CRLF",
        local: true,
        setup: |s, env| {
            repo(s, env, "r", "a");
            s.write("g/.git", "gitdir: @/r/.git\r\n");
        },
        cwd: "g",
        env: &[],
    },
    Case {
        name: "broken .git file stops the search",
        local: false,
        setup: |s, env| {
            repo(s, env, "r", "a");
            s.write("r/sub/.git", "not a gitfile\n");
        },
        cwd: "r/sub/deep",
        env: &[],
    },
    Case {
        name: ".git file naming no repository stops the search",
        local: false,
        setup: |s, env| {
            repo(s, env, "r", "a");
            s.write("r/sub/.git", "gitdir: @/nowhere\n");
        },
        cwd: "r/sub",
        env: &[],
    },
    Case {
        name: ".git directory that is no repository is passed over",
        local: true,
        setup: |s, env| {
            repo(s, env, "r", "a");
            std::fs::create_dir_all(s.root.join("r/sub/.git/objects")).unwrap();
        },
        cwd: "r/sub/deep",
        env: &[],
    },
    Case {
        name: "GIT_DIR relative to the current directory",
        local: true,
        setup: |s, env| {
            repo(s, env, "r", "a");
            std::fs::create_dir_all(s.root.join("elsewhere")).unwrap();
        },
        cwd: "elsewhere",
        env: &[("GIT_DIR", "../r/.git")],
    },
    Case {
        name: "GIT_DIR wins over the repository around",
        local: true,
        setup: |s, env| {
            repo(s, env, "r", "a");
            repo(s, env, "other", "other");
        },
        cwd: "r/sub",
        env: &[("GIT_DIR", "@/other/.git")],
    },
    Case {
        name: "GIT_DIR naming nothing",
        local: false,
        setup: |s, env| repo(s, env, "r", "a"),
        cwd: "r",
        env: &[("GIT_DIR", "@/nowhere")],
    },
    Case {
        name: "GIT_WORK_TREE alone finds nothing",
        local: false,
        setup: |s, env| {
            repo(s, env, "r", "a");
            std::fs::create_dir_all(s.root.join("elsewhere")).unwrap();
        },
        cwd: "elsewhere",
        env: &[("GIT_WORK_TREE", "@/r")],
    },
    Case {
        name: "ceiling above the repository's top hides nothing",
        local: true,
        setup: |s, env| repo(s, env, "r", "a"),
        cwd: "r/sub/deep",
        env: &[("GIT_CEILING_DIRECTORIES", "/nonexistent-ceiling:@")],
    },
    Case {
        name: "ceiling at the repository's top hides it from below",
        local: false,
        setup: |s, env| repo(s, env, "r", "a"),
        cwd: "r/sub/deep",
        env: &[("GIT_CEILING_DIRECTORIES", "@/r/")],
    },
    Case {
        name: "ceiling equal to the current directory is no ceiling",
        local: true,
        setup: |s, env| repo(s, env, "r", "a"),
        cwd: "r",
        env: &[("GIT_CEILING_DIRECTORIES", "@/r")],
    },
    Case {
        name: "relative ceilings are dropped",
        local: true,
        setup: |s, env| repo(s, env, "r", "a"),
        cwd: "r/sub",
        env: &[("GIT_CEILING_DIRECTORIES", "r:sub")],
    },
    Case {
        name: "ceilings are resolved before an empty entry",
        local: false,
        setup: |s, env| {
            repo(s, env, "r", "a");
            std::os::unix::fs::symlink(s.root.join("r"), s.root.join("link")).unwrap();
        },
        cwd: "r/sub",
        env: &[("GIT_CEILING_DIRECTORIES", "@/link")],
    },
    Case {
        name: "ceilings after an empty entry are taken as written",
        local: true,
        setup: |s, env| {
            repo(s, env, "r", "a");
            std::os::unix::fs::symlink(s.root.join("r"), s.root.join("link")).unwrap();
        },
        cwd: "r/sub",
        env: &[("GIT_CEILING_DIRECTORIES", ":@/link")],
    },
    Case {
        name: "bare repository, from inside",
        local: true,
        setup: |s, env| {
            s.git_ok("", &["init", "-q", "--bare", "b.git"], env);
            s.git_ok("b.git", &["config", "t.bare", "1"], env);
        },
        cwd: "b.git/refs",
        env: &[],
    },
    Case {
        name: "safe.bareRepository=explicit refuses a found bare repository",
        local: false,
        setup: |s, env| {
            s.git_ok("", &["init", "-q", "--bare", "b.git"], env);
            s.git_ok("b.git", &["config", "t.bare", "1"], env);
            s.write("global", "[safe]\n\tbareRepository = explicit\n");
        },
        cwd: "b.git",
        env: &[],
    },
    Case {
        name: "safe.bareRepository=explicit still allows a .git directory",
        local: true,
        setup: |s, env| repo(s, env, "r", "a"),
        cwd: "r/.git",
        env: &[("GIT_CONFIG_PARAMETERS", "'safe.bareRepository'='explicit'")],
    },
    Case {
        name: "another owner: nothing",
        local: false,
        setup: |s, env| repo(s, env, "r", "a"),
        cwd: "r/sub",
        env: &[("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1")],
    },
    Case {
        name: "another owner, safe.directory *",
        local: true,
        setup: |s, env| {
            repo(s, env, "r", "a");
            s.write("global", "[safe]\n\tdirectory = *\n");
        },
        cwd: "r/sub",
        env: &[("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1")],
    },
    Case {
        name: "another owner, safe.directory naming the work tree",
        local: true,
        setup: |s, env| {
            repo(s, env, "r", "a");
            s.write(
                "global",
                "[safe]\n\tdirectory = @/elsewhere\n\tdirectory = @/r/\n",
            );
        },
        cwd: "r/sub",
        env: &[("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1")],
    },
    Case {
        name: "another owner, safe.directory prefix with /*",
        local: true,
        setup: |s, env| repo(s, env, "r", "a"),
        cwd: "r",
        env: &[
            ("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1"),
            ("GIT_CONFIG_PARAMETERS", "'safe.directory'='@/*'"),
        ],
    },
    Case {
        name: "another owner, safe.directory . at the top",
        local: true,
        setup: |s, env| repo(s, env, "r", "a"),
        cwd: "r",
        env: &[
            ("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1"),
            ("GIT_CONFIG_PARAMETERS", "'safe.directory'='.'"),
        ],
    },
    Case {
        name: "another owner, safe.directory . below the top",
        local: false,
        setup: |s, env| repo(s, env, "r", "a"),
        cwd: "r/sub",
        env: &[
            ("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1"),
            ("GIT_CONFIG_PARAMETERS", "'safe.directory'='.'"),
        ],
    },
    Case {
        name: "another owner, an empty safe.directory resets the list",
        local: false,
        setup: |s, env| {
            repo(s, env, "r", "a");
            s.write("global", "[safe]\n\tdirectory = *\n\tdirectory =\n");
        },
        cwd: "r",
        env: &[("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1")],
    },
    Case {
        name: "another owner, a relative safe.directory warns",
        local: false,
        setup: |s, env| {
            repo(s, env, "r", "a");
            s.write("global", "[safe]\n\tdirectory = r\n");
        },
        cwd: "r",
        env: &[("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1")],
    },
    Case {
        name: "another owner, safe.directory in the repository itself does not count",
        local: false,
        setup: |s, env| {
            repo(s, env, "r", "a");
            s.git_ok("r", &["config", "safe.directory", "*"], env);
        },
        cwd: "r",
        env: &[("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1")],
    },
    Case {
        name: "another owner, GIT_DIR is not checked",
        local: true,
        setup: |s, env| repo(s, env, "r", "a"),
        cwd: "r",
        env: &[
            ("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1"),
            ("GIT_DIR", "@/r/.git"),
        ],
    },
    Case {
        name: "format version 2 is ignored with git's warning",
        local: false,
        setup: |s, env| {
            repo(s, env, "r", "a");
            s.git_ok("r", &["config", "core.repositoryformatversion", "2"], env);
        },
        cwd: "r",
        env: &[],
    },
    Case {
        name: "unknown extensions in format 1 are refused",
        local: false,
        setup: |s, env| {
            repo(s, env, "r", "a");
            s.git_ok("r", &["config", "core.repositoryformatversion", "1"], env);
            s.git_ok(
                "r",
                &["config", "-f", ".git/config", "extensions.foo", "x"],
                env,
            );
            s.git_ok(
                "r",
                &["config", "-f", ".git/config", "extensions.bar", "y"],
                env,
            );
        },
        cwd: "r/sub",
        env: &[],
    },
    Case {
        name: "v1-only extension in format 0 is refused",
        local: false,
        setup: |s, env| {
            repo(s, env, "r", "a");
            s.git_ok("r", &["config", "extensions.refStorage", "files"], env);
        },
        cwd: "r",
        env: &[],
    },
    Case {
        name: "unknown extension in format 0 is fine",
        local: true,
        setup: |s, env| {
            repo(s, env, "r", "a");
            s.git_ok("r", &["config", "extensions.foo", "x"], env);
        },
        cwd: "r",
        env: &[],
    },
    Case {
        name: "includeIf gitdir conditions in global and local config",
        local: true,
        setup: |s, env| {
            repo(s, env, "r", "a");
            for n in 1..=8 {
                s.write(&format!("inc{n}"), &format!("[t]\n\tinc{n} = yes\n"));
            }
            s.write(
                "global",
                "[includeIf \"gitdir:@/r/\"]\n\tpath = @/inc1\n\
                 [includeIf \"gitdir:r/.git\"]\n\tpath = @/inc2\n\
                 [includeIf \"gitdir/i:@/R/\"]\n\tpath = @/inc3\n\
                 [includeIf \"gitdir:@/R/\"]\n\tpath = @/inc4\n\
                 [includeIf \"gitdir:./r/\"]\n\tpath = inc5\n\
                 [includeIf \"gitdir:~/../r/.git\"]\n\tpath = @/inc6\n\
                 [includeIf \"onbranch:master\"]\n\tpath = @/inc7\n\
                 [includeIf \"gitdir:@/r\"]\n\tpath = @/inc8\n",
            );
            let local = s.root.join("r/.git/config");
            let mut text = std::fs::read_to_string(&local).unwrap();
            text.push_str(
                "[include]\n\tpath = ../../inc1\n[includeIf \"gitdir:./\"]\n\tpath = ../../inc2\n",
            );
            std::fs::write(local, text).unwrap();
        },
        cwd: "r/sub",
        env: &[],
    },
    Case {
        name: "includeIf gitdir on the command line",
        local: true,
        setup: |s, env| {
            repo(s, env, "r", "a");
            s.write("inc1", "[t]\n\tinc1 = yes\n");
        },
        cwd: "r",
        env: &[(
            "GIT_CONFIG_PARAMETERS",
            "'includeIf.gitdir:**/r/**.path'='@/inc1' 'includeIf.gitdir:./r/.path'='@/inc1'",
        )],
    },
    Case {
        name: "hasconfig sees the repository's remote URLs",
        local: true,
        setup: |s, env| {
            repo(s, env, "r", "a");
            s.git_ok(
                "r",
                &["remote", "add", "origin", "https://example.org/x/y"],
                env,
            );
            s.write("inc1", "[t]\n\tinc1 = yes\n");
            s.write(
                "global",
                "[includeIf \"hasconfig:remote.*.url:https://example.org/**\"]\n\tpath = @/inc1\n",
            );
        },
        cwd: "r",
        env: &[],
    },
    Case {
        name: "entered through a link: $PWD spells the git directory at the top",
        local: true,
        setup: |s, env| {
            repo(s, env, "r", "a");
            std::os::unix::fs::symlink(s.root.join("r"), s.root.join("link")).unwrap();
            s.write("inc1", "[t]\n\tinc1 = yes\n");
            s.write(
                "global",
                "[includeIf \"gitdir:@/link/\"]\n\tpath = @/inc1\n",
            );
        },
        cwd: "link",
        env: &[("PWD", "@/link")],
    },
    Case {
        name: "bare repository at the current directory: gitdir text ends in /.",
        local: false,
        setup: |s, env| {
            s.git_ok("", &["init", "-q", "--bare", "b.git"], env);
            s.write("inc1", "[t]\n\tinc1 = yes\n");
            s.write(
                "global",
                "[includeIf \"gitdir:@/b.git/\"]\n\tpath = @/inc1\n",
            );
        },
        cwd: "b.git",
        env: &[],
    },
];

#[test]
fn repository_config_is_listed_as_git_lists_it() {
    for case in CASES {
        run(case);
    }
}

#[test]
fn repositories_of_other_users_are_ignored_unless_safe() {
    if !is_root() {
        eprintln!("skipped: changing owners needs root");
        return;
    }
    let cases: &[Case] = &[
        Case {
            name: "owned by uid 1234",
            local: false,
            setup: |s, env| {
                repo(s, env, "r", "a");
                chown_tree(&s.root.join("r"));
            },
            cwd: "r/sub",
            env: &[],
        },
        Case {
            name: "owned by uid 1234, safe.directory",
            local: true,
            setup: |s, env| {
                repo(s, env, "r", "a");
                chown_tree(&s.root.join("r"));
            },
            cwd: "r/sub",
            env: &[("GIT_CONFIG_PARAMETERS", "'safe.directory'='@/r'")],
        },
        Case {
            name: "owned by uid 1234 and run through sudo by it",
            local: true,
            setup: |s, env| {
                repo(s, env, "r", "a");
                chown_tree(&s.root.join("r"));
            },
            cwd: "r",
            env: &[("SUDO_UID", "1234")],
        },
        Case {
            name: "only the .git directory owned by another",
            local: false,
            setup: |s, env| {
                repo(s, env, "r", "a");
                chown_tree(&s.root.join("r/.git"));
            },
            cwd: "r",
            env: &[],
        },
        Case {
            name: "only the .git file owned by another",
            local: false,
            setup: |s, env| {
                repo(s, env, "r", "a");
                s.write("g/.git", "gitdir: @/r/.git\n");
                chown_tree(&s.root.join("g/.git"));
            },
            cwd: "g",
            env: &[],
        },
    ];
    for case in cases {
        run(case);
    }
}
