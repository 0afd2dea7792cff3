//! Tests of settings resolution: value parsing, precedence, and comparisons with what
//! the real git enables for the same files and environment.

use super::test_git::{Scratch, lookup, stderr_messages};
use super::*;

#[test]
fn git_bool_words_and_numbers() {
    for v in [
        "true", "TRUE", "Yes", "on", "1", "2", "-1", "0x10", "010", "1k", "1M", "1g", " 5", "+3",
    ] {
        assert_eq!(parse_git_bool(v), Some(true), "{v}");
    }
    for v in ["false", "No", "OFF", "", "0", "-0", "0x0", "00", "0k"] {
        assert_eq!(parse_git_bool(v), Some(false), "{v}");
    }
    for v in [
        "maybe",
        "08",
        "0x",
        "1x",
        "1kb",
        "1 ",
        "3000000000",
        "2g",
        "99999999999999999999",
        "-",
        " ",
    ] {
        assert_eq!(parse_git_bool(v), None, "{v}");
    }
}

#[test]
fn atoi_takes_a_numeric_prefix() {
    assert_eq!(atoi("3x"), 3);
    assert_eq!(atoi("  -7"), -7);
    assert_eq!(atoi("+4"), 4);
    assert_eq!(atoi("abc"), 0);
    assert_eq!(atoi(""), 0);
    assert_eq!(atoi("0x10"), 0);
    assert_eq!(atoi("4294967297"), 1);
    assert_eq!(atoi("99999999999999999999"), -1);
}

#[test]
fn lists_are_split_and_trimmed() {
    assert_eq!(split_list(Some("  a.b  , ,c,\td ")), vec!["a.b", "c", "d"]);
    assert_eq!(split_list(Some("")), Vec::<String>::new());
    assert_eq!(split_list(None), Vec::<String>::new());
}

#[test]
fn redact_follows_git_env_bool() {
    assert_eq!(redact_setting(None), Ok(true));
    assert_eq!(redact_setting(Some(String::new())), Ok(false));
    assert_eq!(redact_setting(Some("0".into())), Ok(false));
    assert_eq!(redact_setting(Some("1k".into())), Ok(true));
    assert_eq!(
        redact_setting(Some("maybe".into())),
        Err("bad boolean environment value 'maybe' for 'GIT_TRACE2_REDACT'".to_string())
    );
}

fn env_from(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let owned: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| {
        owned
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }
}

#[test]
fn defaults_without_any_source() {
    let s = Settings::load(&env_from(&[("GIT_CONFIG_NOSYSTEM", "1")]));
    assert_eq!(s, Settings::default());
}

#[test]
fn environment_only_values() {
    let s = Settings::load(&env_from(&[
        ("GIT_CONFIG_NOSYSTEM", "1"),
        ("GIT_TRACE2", "1"),
        ("GIT_TRACE2_EVENT", "/tmp/x"),
        ("GIT_TRACE2_EVENT_NESTING", "3x"),
        ("GIT_TRACE2_MAX_FILES", "-5"),
        ("GIT_TRACE2_DST_DEBUG", "2"),
        ("GIT_TRACE2_CONFIG_PARAMS", "a.*"),
        ("GIT_TRACE2_ENV_VARS", "MY_VAR, UNSET ,EMPTY"),
        ("MY_VAR", "v"),
        ("EMPTY", ""),
        ("GIT_TRACE2_REDACT", "no"),
        ("GIT_TRACE2_PARENT_SID", "sid/x"),
        ("GIT_TRACE2_PARENT_NAME", ""),
    ]));
    assert_eq!(s.normal_destination.as_deref(), Some("1"));
    assert_eq!(s.event_destination.as_deref(), Some("/tmp/x"));
    assert_eq!(s.event_nesting, 3);
    assert_eq!(s.max_files, 0);
    assert!(s.dst_debug);
    assert_eq!(s.config_params, vec!["a.*"]);
    assert_eq!(s.env_vars, vec!["MY_VAR", "UNSET", "EMPTY"]);
    assert_eq!(
        s.env_var_values,
        vec![("MY_VAR".to_string(), "v".to_string())]
    );
    assert_eq!(s.redact, Ok(false));
    for (nesting, want) in [("0", 2), ("-1", 2), ("abc", 2), ("9", 9)] {
        let s = Settings::load(&env_from(&[
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_TRACE2_EVENT_NESTING", nesting),
        ]));
        assert_eq!(s.event_nesting, want, "{nesting}");
    }
}

#[test]
fn flight_settings_come_from_config_and_the_environment_overrides_them() {
    let env = env_from(&[
        ("TRACING_TRACE2_FLIGHT_MIN_AGE", "30"),
        ("TRACING_TRACE2_FLIGHT_ON_ERROR", "yes"),
        ("TRACING_TRACE2_FLIGHT_SLOW_REGION_MS", "-4"),
    ]);
    let s = Settings::from_entries_with_env(
        vec![
            (
                ConfigScope::Global,
                "trace2.flightTarget",
                Some("/var/flight"),
            ),
            (ConfigScope::Global, "trace2.flightMaxBytes", Some("4m")),
            (ConfigScope::Global, "trace2.flightMinAge", Some("5")),
            (ConfigScope::Local, "trace2.flightOnError", Some("false")),
        ],
        &env,
    );
    assert_eq!(s.flight.directory.as_deref(), Some("/var/flight"));
    assert_eq!(s.flight.max_bytes, Some(4 << 20));
    assert_eq!(s.flight.min_age_secs, Some(30));
    assert!(s.flight.on_error);
    // A negative threshold is no threshold.
    assert_eq!(s.flight.slow_region_ms, None);
    let s = Settings::load(&env_from(&[
        ("GIT_CONFIG_NOSYSTEM", "1"),
        ("TRACING_TRACE2_FLIGHT", "/tmp/f"),
        ("TRACING_TRACE2_FLIGHT_SLOW_REGION_MS", "250"),
    ]));
    assert_eq!(s.flight.directory.as_deref(), Some("/tmp/f"));
    assert_eq!(s.flight.slow_region_ms, Some(250));
    assert_eq!(s.flight.max_bytes, None);
    assert!(!s.flight.on_error);
}

#[test]
fn later_files_override_and_env_overrides_raw_string() {
    let s = Scratch::new();
    let sys = s.write(
        "sys",
        "[trace2]\n\tnormalTarget = a\n\tnormalBrief = true\n\teventNesting = 5\n",
    );
    s.write("home/.config/git/config", "[trace2]\n\tnormalTarget = b\n");
    s.write("home/.gitconfig", "[TRACE2]\n\tNORMALTARGET = c\n");
    let env = s.env(&[
        ("GIT_CONFIG_SYSTEM", &sys),
        ("GIT_TRACE2_EVENT_NESTING", "abc"),
    ]);
    let got = Settings::load(&lookup(&env));
    assert_eq!(got.normal_destination.as_deref(), Some("c"));
    assert!(got.normal_brief);
    // A non-empty env value replaces the config value even when it does not parse.
    assert_eq!(got.event_nesting, 2);
    let env = s.env(&[
        ("GIT_CONFIG_SYSTEM", &sys),
        ("GIT_TRACE2_BRIEF", "maybe"),
        ("GIT_TRACE2", ""),
    ]);
    let got = Settings::load(&lookup(&env));
    assert!(!got.normal_brief);
    assert_eq!(got.normal_destination.as_deref(), Some("c"));
    assert_eq!(got.event_nesting, 5);
    assert!(got.warnings.is_empty(), "{:?}", got.warnings);
}

#[test]
fn broken_files_are_skipped_with_a_warning() {
    let s = Scratch::new();
    let sys = s.write("sys", "[trace2]\n\tnormalTarget = a\n[bad\n");
    let global = s.write("g", "[trace2]\n\tperfTarget = p\n\tnormalBrief\n\tfoo\n");
    let env = s.env(&[("GIT_CONFIG_SYSTEM", &sys), ("GIT_CONFIG_GLOBAL", &global)]);
    let got = Settings::load(&lookup(&env));
    assert_eq!(got.normal_destination, None);
    assert_eq!(got.perf_destination.as_deref(), Some("p"));
    assert_eq!(
        got.warnings,
        vec![
            format!("bad config line 3 in file {sys}"),
            "missing value for 'trace2.normalbrief'".to_string()
        ]
    );
}

#[test]
fn includes_are_followed_relative_and_with_tilde() {
    let s = Scratch::new();
    let sys = s.write(
        "sys",
        "[include]\n\tpath = sub/one\n[trace2]\n\tperfTarget = sys\n",
    );
    s.write(
        "sub/one",
        "[trace2]\n\tnormalTarget = one\n[include]\n\tpath = two\n\tpath = missing\n",
    );
    s.write(
        "sub/two",
        "[trace2]\n\tnormalBrief = yes\n[include]\n\tpath = ~/three\n",
    );
    s.write("home/three", "[trace2]\n\teventTarget = three\n");
    let env = s.env(&[
        ("GIT_CONFIG_SYSTEM", &sys),
        ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ]);
    let got = Settings::load(&lookup(&env));
    assert_eq!(got.normal_destination.as_deref(), Some("one"));
    assert!(got.normal_brief);
    assert_eq!(got.event_destination.as_deref(), Some("three"));
    assert_eq!(got.perf_destination.as_deref(), Some("sys"));
    assert!(got.warnings.is_empty(), "{:?}", got.warnings);
}

#[test]
fn include_loops_stop_at_the_depth_limit() {
    let s = Scratch::new();
    let sys = s.write(
        "sys",
        "[include]\n\tpath = sys\n[trace2]\n\tnormalTarget = x\n",
    );
    let env = s.env(&[
        ("GIT_CONFIG_SYSTEM", &sys),
        ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ]);
    let got = Settings::load(&lookup(&env));
    assert_eq!(got.normal_destination.as_deref(), Some("x"));
    assert_eq!(got.warnings.len(), 1);
    assert!(
        got.warnings[0].starts_with("exceeded maximum include depth (10)"),
        "{:?}",
        got.warnings
    );
}

#[test]
fn include_errors_are_warnings() {
    let s = Scratch::new();
    let sys = s.write(
        "sys",
        "[include]\n\tpath\n\tpath = ~nobody-such-user/x\n\tpath = bad\n",
    );
    s.write("bad", "[x\n");
    let env = s.env(&[
        ("GIT_CONFIG_SYSTEM", &sys),
        ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ]);
    let got = Settings::load(&lookup(&env));
    assert_eq!(
        got.warnings,
        vec![
            "missing value for 'include.path'".to_string(),
            "failed to expand user dir in: '~nobody-such-user/x'".to_string(),
            format!("bad config line 1 in file {}", s.path("bad")),
        ]
    );
}

// ---- comparisons with the real git ----

/// Whether git wrote each target file, and if so whether in brief form.
#[derive(Debug, PartialEq, Eq)]
struct FilesWritten {
    normal: Option<bool>,
    perf: Option<bool>,
    event: Option<bool>,
}

fn observed(s: &Scratch, env: &std::collections::BTreeMap<String, String>) -> FilesWritten {
    for f in ["n", "p", "e"] {
        let _ = std::fs::remove_file(s.root.join(f));
    }
    let out = s.git(env);
    assert!(
        out.status.success(),
        "git failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    FilesWritten {
        normal: s.read("n").map(|t| t.starts_with("version ")),
        perf: s.read("p").map(|t| t.starts_with("d0 |")),
        event: s.read("e").map(|t| !t.contains("\"file\":")),
    }
}

fn predicted(s: &Scratch, got: &Settings) -> FilesWritten {
    let one = |target: &Option<String>, file: &str, brief: bool| match target.as_deref() {
        None | Some("0") | Some("false") => None,
        Some(t) if t == s.path(file) => Some(brief),
        Some(other) => panic!("unexpected target {other}"),
    };
    FilesWritten {
        normal: one(&got.normal_destination, "n", got.normal_brief),
        perf: one(&got.perf_destination, "p", got.perf_brief),
        event: one(&got.event_destination, "e", got.event_brief),
    }
}

struct Case {
    name: &'static str,
    files: &'static [(&'static str, &'static str)],
    env: &'static [(&'static str, &'static str)],
}

const SYS_GLOBAL: [(&str, &str); 2] = [
    ("GIT_CONFIG_SYSTEM", "@/sys"),
    ("GIT_CONFIG_GLOBAL", "@/global"),
];

const CASES: &[Case] = &[
    Case {
        name: "system only",
        files: &[("sys", "[trace2]\n\tnormalTarget = @/n\n")],
        env: &SYS_GLOBAL,
    },
    Case {
        name: "global overrides system",
        files: &[
            (
                "sys",
                "[trace2]\n\tnormalTarget = @/n\n\tnormalBrief = true\n\tperfTarget = @/p\n",
            ),
            (
                "global",
                "[trace2]\n\tnormalBrief = false\n\tperfBrief = 1\n",
            ),
        ],
        env: &SYS_GLOBAL,
    },
    Case {
        name: "unparsable env brief replaces config true",
        files: &[(
            "sys",
            "[trace2]\n\tnormalTarget = @/n\n\tnormalBrief = true\n\teventTarget = @/e\n\teventBrief = on\n",
        )],
        env: &[
            ("GIT_CONFIG_SYSTEM", "@/sys"),
            ("GIT_CONFIG_GLOBAL", "@/global"),
            ("GIT_TRACE2_BRIEF", "maybe"),
            ("GIT_TRACE2_EVENT_BRIEF", ""),
        ],
    },
    Case {
        name: "empty env target keeps config target",
        files: &[("sys", "[trace2]\n\tnormalTarget = @/n\n")],
        env: &[
            ("GIT_CONFIG_SYSTEM", "@/sys"),
            ("GIT_CONFIG_GLOBAL", "@/global"),
            ("GIT_TRACE2", ""),
        ],
    },
    Case {
        name: "env target 0 disables config target",
        files: &[(
            "sys",
            "[trace2]\n\tnormalTarget = @/n\n\tperfTarget = @/p\n",
        )],
        env: &[
            ("GIT_CONFIG_SYSTEM", "@/sys"),
            ("GIT_CONFIG_GLOBAL", "@/global"),
            ("GIT_TRACE2", "0"),
        ],
    },
    Case {
        name: "env target wins",
        files: &[("sys", "[trace2]\n\tnormalTarget = @/elsewhere\n")],
        env: &[
            ("GIT_CONFIG_SYSTEM", "@/sys"),
            ("GIT_CONFIG_GLOBAL", "@/global"),
            ("GIT_TRACE2", "@/n"),
        ],
    },
    Case {
        name: "empty config value disables",
        files: &[
            ("sys", "[trace2]\n\tnormalTarget = @/n\n"),
            ("global", "[trace2]\n\tnormalTarget =\n"),
        ],
        env: &SYS_GLOBAL,
    },
    Case {
        name: "key names are case-insensitive, legacy and odd syntax",
        files: &[(
            "sys",
            "; comment\n[TRACE2] NormalTarget = \"@/n\" # trailing\n[Trace2]\n  PERFtarget=@/p\\\n\n\tperfbrief = 0x10\n",
        )],
        env: &SYS_GLOBAL,
    },
    Case {
        name: "numeric and suffixed booleans",
        files: &[(
            "sys",
            "[trace2]\n\tnormalTarget = @/n\n\tnormalBrief = 1k\n\tperfTarget = @/p\n\tperfBrief = 08\n\teventTarget = @/e\n\teventBrief = -0\n",
        )],
        env: &SYS_GLOBAL,
    },
    Case {
        name: "GIT_CONFIG_NOSYSTEM skips the system file",
        files: &[
            ("sys", "[trace2]\n\tnormalTarget = @/n\n"),
            ("global", "[trace2]\n\tperfTarget = @/p\n"),
        ],
        env: &[
            ("GIT_CONFIG_SYSTEM", "@/sys"),
            ("GIT_CONFIG_GLOBAL", "@/global"),
            ("GIT_CONFIG_NOSYSTEM", "yes"),
        ],
    },
    Case {
        name: "empty GIT_CONFIG_NOSYSTEM is false",
        files: &[("sys", "[trace2]\n\tnormalTarget = @/n\n")],
        env: &[
            ("GIT_CONFIG_SYSTEM", "@/sys"),
            ("GIT_CONFIG_GLOBAL", "@/global"),
            ("GIT_CONFIG_NOSYSTEM", ""),
        ],
    },
    Case {
        name: "XDG file then ~/.gitconfig",
        files: &[
            (
                "home/.config/git/config",
                "[trace2]\n\tnormalTarget = @/elsewhere\n\tperfTarget = @/p\n",
            ),
            ("home/.gitconfig", "[trace2]\n\tnormalTarget = @/n\n"),
        ],
        env: &[("GIT_CONFIG_SYSTEM", "@/sys")],
    },
    Case {
        name: "XDG_CONFIG_HOME",
        files: &[
            ("xdg/git/config", "[trace2]\n\teventTarget = @/e\n"),
            ("home/.config/git/config", "[trace2]\n\tperfTarget = @/p\n"),
        ],
        env: &[("GIT_CONFIG_SYSTEM", "@/sys"), ("XDG_CONFIG_HOME", "@/xdg")],
    },
    Case {
        name: "GIT_CONFIG_GLOBAL replaces the home files",
        files: &[
            ("home/.gitconfig", "[trace2]\n\tnormalTarget = @/n\n"),
            ("global", "[trace2]\n\tperfTarget = @/p\n"),
        ],
        env: &[
            ("GIT_CONFIG_SYSTEM", "@/sys"),
            ("GIT_CONFIG_GLOBAL", "@/global"),
        ],
    },
    Case {
        name: "repository and command-line config are ignored for settings",
        files: &[],
        env: &[
            ("GIT_CONFIG_SYSTEM", "@/sys"),
            ("GIT_CONFIG_GLOBAL", "@/global"),
            ("GIT_CONFIG_PARAMETERS", "'trace2.normalTarget'='@/n'"),
            ("GIT_CONFIG_COUNT", "1"),
            ("GIT_CONFIG_KEY_0", "trace2.perfTarget"),
            ("GIT_CONFIG_VALUE_0", "@/p"),
        ],
    },
    Case {
        name: "include and includeIf",
        files: &[
            (
                "sys",
                "[include]\n\tpath = inc/a\n[includeIf \"gitdir:/\"]\n\tpath = @/inc/never\n\
                 [includeIf \"onbranch:*\"]\n\tpath = @/inc/never\n[remote \"o\"]\n\turl = https://x.example/y\n",
            ),
            (
                "inc/a",
                "[trace2]\n\tnormalTarget = @/n\n[include]\n\tpath = ~/b\n",
            ),
            ("home/b", "[trace2]\n\tnormalBrief = yes\n"),
            ("inc/never", "[trace2]\n\tperfTarget = @/p\n"),
            (
                "global",
                "[includeIf \"hasconfig:remote.*.url:https://x.example/*\"]\n\tpath = @/inc/url\n\
                 [includeIf \"hasconfig:remote.*.url:https://x.example\"]\n\tpath = @/inc/never\n",
            ),
            ("inc/url", "[trace2]\n\teventTarget = @/e\n"),
        ],
        env: &SYS_GLOBAL,
    },
    Case {
        name: "hasconfig uses path semantics",
        files: &[
            (
                "sys",
                "[includeIf \"hasconfig:remote.*.url:https://x.example/*\"]\n\tpath = @/inc/url\n",
            ),
            ("global", "[remote \"o\"]\n\turl = https://x.example/y/z\n"),
            ("inc/url", "[trace2]\n\teventTarget = @/e\n"),
        ],
        env: &SYS_GLOBAL,
    },
];

#[test]
#[cfg_attr(
    windows,
    ignore = "needs the real git, which Windows runs here do not have"
)]
fn targets_and_brief_match_git() {
    for case in CASES {
        let s = Scratch::new();
        for (rel, text) in case.files {
            s.write(rel, text);
        }
        let env = s.env(case.env);
        let got = Settings::load(&lookup(&env));
        assert!(got.warnings.is_empty(), "{}: {:?}", case.name, got.warnings);
        assert_eq!(predicted(&s, &got), observed(&s, &env), "{}", case.name);
    }
}

#[test]
#[cfg_attr(
    windows,
    ignore = "needs the real git, which Windows runs here do not have"
)]
fn destination_debug_matches_git() {
    for (value, env_value) in [
        ("1", None),
        ("0", None),
        ("1", Some("0")),
        ("0", Some("3x")),
        ("yes", None),
    ] {
        let s = Scratch::new();
        let sys = s.write(
            "sys",
            &format!("[trace2]\n\tnormalTarget = @/nodir/x\n\tdestinationDebug = {value}\n"),
        );
        let mut extra = vec![
            ("GIT_CONFIG_SYSTEM", sys.as_str()),
            ("GIT_CONFIG_GLOBAL", "/dev/null"),
        ];
        if let Some(v) = env_value {
            extra.push(("GIT_TRACE2_DST_DEBUG", v));
        }
        let env = s.env(&extra);
        let got = Settings::load(&lookup(&env));
        let out = s.git(&env);
        let warned = String::from_utf8_lossy(&out.stderr).contains("trace2: could not open");
        assert_eq!(got.dst_debug, warned, "{value} {env_value:?}");
    }
}

#[test]
#[cfg_attr(
    windows,
    ignore = "needs the real git, which Windows runs here do not have"
)]
fn max_files_matches_git() {
    for (value, env_value) in [
        ("1", None),
        ("0", None),
        ("5", None),
        ("5", Some("1x")),
        ("1", Some("-3")),
    ] {
        let s = Scratch::new();
        s.write("dir/existing", "");
        let sys = s.write(
            "sys",
            &format!("[trace2]\n\tnormalTarget = @/dir\n\tmaxFiles = {value}\n"),
        );
        let mut extra = vec![
            ("GIT_CONFIG_SYSTEM", sys.as_str()),
            ("GIT_CONFIG_GLOBAL", "/dev/null"),
        ];
        if let Some(v) = env_value {
            extra.push(("GIT_TRACE2_MAX_FILES", v));
        }
        let env = s.env(&extra);
        let got = Settings::load(&lookup(&env));
        s.git(&env);
        let discarded = s.root.join("dir/git-trace2-discard").exists();
        // One file is already there, so any limit of 1 discards and 0 means no limit.
        assert_eq!(
            got.max_files == 1,
            discarded,
            "{value} {env_value:?}: {}",
            got.max_files
        );
    }
}

#[test]
#[cfg_attr(
    windows,
    ignore = "needs the real git, which Windows runs here do not have"
)]
fn warnings_carry_git_fatal_messages() {
    let bad_files: &[&str] = &[
        "[trace2]\n\tnormalBrief\n",
        "[a]\nname # c\n",
        "[a\nk=v\n",
        "[a",
        "[a]\nk = \"open\n",
        "[a]\n\n\nk = \"x",
        "[a]\nk = bad\\q\n",
        "[]\n",
        "[a \"x\"\n",
        "[a]\n1x = 2\n",
        "[include]\n\tpath\n",
    ];
    for text in bad_files {
        let s = Scratch::new();
        let sys = s.write("sys", text);
        let env = s.env(&[
            ("GIT_CONFIG_SYSTEM", &sys),
            ("GIT_CONFIG_GLOBAL", "/dev/null"),
        ]);
        let got = Settings::load(&lookup(&env));
        let out = s.git(&env);
        assert_eq!(out.status.code(), Some(128), "{text:?}");
        let git_msgs = stderr_messages(&out);
        // Git names the offending key (if any) and then the line; we keep the first
        // message that applies: the key for valueless keys, else the line.
        let want = git_msgs
            .iter()
            .find(|m| m.starts_with("missing value"))
            .unwrap_or(&git_msgs[0]);
        assert_eq!(got.warnings, vec![want.clone()], "{text:?}");
    }
}

#[test]
#[cfg_attr(
    windows,
    ignore = "needs the real git, which Windows runs here do not have"
)]
fn bad_nosystem_value_matches_git_message() {
    let s = Scratch::new();
    let env = s.env(&[
        ("GIT_CONFIG_NOSYSTEM", "maybe"),
        ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ]);
    let got = Settings::load(&lookup(&env));
    let out = s.git(&env);
    assert_eq!(got.warnings, stderr_messages(&out));
}

#[test]
#[cfg_attr(
    windows,
    ignore = "needs the real git, which Windows runs here do not have"
)]
fn bad_redact_value_matches_git_message() {
    let s = Scratch::new();
    let env = s.env(&[
        ("GIT_CONFIG_NOSYSTEM", "1"),
        ("GIT_TRACE2_REDACT", "maybe"),
        ("GIT_CONFIG_GLOBAL", "/dev/null"),
        // Git checks the value only when a target is enabled.
        ("GIT_TRACE2", "@/n"),
    ]);
    let got = Settings::load(&lookup(&env));
    let out = s.git(&env);
    assert_eq!(
        got.redact.err().map(|e| vec![e]),
        Some(stderr_messages(&out))
    );
}

#[test]
fn handed_over_entries_settings_from_system_and_global_only() {
    let env = env_from(&[("GIT_TRACE2_PERF", "/env/perf"), ("MY_VAR", "v")]);
    let s = Settings::from_entries_with_env(
        vec![
            (
                ConfigScope::System,
                "trace2.normalTarget",
                Some("/sys/normal"),
            ),
            (
                ConfigScope::Global,
                "TRACE2.NormalTarget",
                Some("/global/normal"),
            ),
            (
                ConfigScope::Global,
                "trace2.perfTarget",
                Some("/global/perf"),
            ),
            (ConfigScope::Global, "trace2.envVars", Some("MY_VAR")),
            (
                ConfigScope::Global,
                "trace2.configParams",
                Some("trace2.*,x.*"),
            ),
            (ConfigScope::Global, "trace2.eventBrief", None),
            (
                ConfigScope::Local,
                "trace2.eventTarget",
                Some("/local/event"),
            ),
            (ConfigScope::Worktree, "x.Sub.Y", Some("w")),
            (ConfigScope::Command, "not a key", Some("v")),
        ],
        &env,
    );
    assert_eq!(s.normal_destination.as_deref(), Some("/global/normal"));
    assert_eq!(s.perf_destination.as_deref(), Some("/env/perf"));
    assert_eq!(s.event_destination, None);
    assert_eq!(s.env_var_values, vec![("MY_VAR".into(), "v".into())]);
    assert_eq!(
        s.warnings,
        vec![
            "key does not contain a section: not a key".to_string(),
            "missing value for 'trace2.eventbrief'".to_string()
        ]
    );
    let listed: Vec<(ConfigScope, String)> = s
        .config_entries
        .iter()
        .map(|e| (e.scope, e.key.clone()))
        .collect();
    assert_eq!(listed.len(), 8);
    assert_eq!(
        listed[1],
        (ConfigScope::Global, "trace2.normaltarget".into())
    );
    assert_eq!(listed[7], (ConfigScope::Worktree, "x.Sub.y".into()));
    // Nothing from files: no patterns, no listing.
    let s = Settings::from_entries_with_env(
        [(ConfigScope::Local, "a.b", Some("1"))],
        &env_from(&[("GIT_CONFIG_PARAMETERS", "'a.c'='2'")]),
    );
    assert!(s.config_entries.is_empty());
    assert_eq!(s, Settings::default());
}

/// This library's own settings in git's style: `trace2.maxLevel`, `trace2.spanFields`,
/// `trace2.binaryNesting` in the config, overridden by their variables; values that do
/// not parse are reported and ignored.
#[test]
fn level_fields_and_binary_nesting_settings() {
    let s = Scratch::new();
    let sys = s.write(
        "sys",
        "[trace2]\n\tmaxLevel = DEBUG\n\tspanFields = off\n\tbinaryNesting = 7\n",
    );
    let env = s.env(&[("GIT_CONFIG_SYSTEM", &sys)]);
    let got = Settings::load(&lookup(&env));
    assert_eq!(got.max_level, Some(LevelFilter::DEBUG));
    assert_eq!(got.span_fields, Some(false));
    assert_eq!(got.binary_nesting, Some(7));
    assert!(got.warnings.is_empty(), "{:?}", got.warnings);
    let env = s.env(&[
        ("GIT_CONFIG_SYSTEM", &sys),
        ("TRACING_TRACE2_MAX_LEVEL", "trace"),
        ("TRACING_TRACE2_SPAN_FIELDS", "yes"),
        ("TRACING_TRACE2_BINARY_NESTING", "0"),
    ]);
    let got = Settings::load(&lookup(&env));
    assert_eq!(got.max_level, Some(LevelFilter::TRACE));
    assert_eq!(got.span_fields, Some(true));
    assert_eq!(got.binary_nesting, None);
    let got = Settings::load(&env_from(&[
        ("GIT_CONFIG_NOSYSTEM", "1"),
        ("TRACING_TRACE2_MAX_LEVEL", "loud"),
        ("TRACING_TRACE2_SPAN_FIELDS", "maybe"),
    ]));
    assert_eq!(got.max_level, None);
    assert_eq!(got.span_fields, None);
    assert_eq!(got.warnings.len(), 2, "{:?}", got.warnings);
    assert!(
        got.warnings[0].contains("trace2.maxLevel"),
        "{:?}",
        got.warnings
    );
}

/// The span and event levels and what a warning becomes: `trace2.spanLevel`,
/// `trace2.eventLevel`, `trace2.warnings`, overridden by their variables; each level
/// over `trace2.maxLevel` in the builder's levels; bad values reported and ignored.
#[test]
fn span_event_levels_and_warnings_settings() {
    use tracing_trace2_core::Warnings;
    let s = Scratch::new();
    let sys = s.write(
        "sys",
        "[trace2]\n\tmaxLevel = warn\n\tspanLevel = trace\n\twarnings = printf\n",
    );
    let env = s.env(&[("GIT_CONFIG_SYSTEM", &sys)]);
    let got = Settings::load(&lookup(&env));
    assert_eq!(got.span_level, Some(LevelFilter::TRACE));
    assert_eq!(got.event_level, None);
    assert_eq!(got.warn_as, Some(Warnings::Printf));
    assert!(got.warnings.is_empty(), "{:?}", got.warnings);
    // In the builder: spanLevel over maxLevel, maxLevel for events, both over the program.
    let levels = crate::Trace2::with_settings(got)
        .with_event_level(LevelFilter::DEBUG)
        .with_warnings(Warnings::Error)
        .levels();
    assert_eq!(levels.spans, LevelFilter::TRACE);
    assert_eq!(levels.events, LevelFilter::WARN);
    assert_eq!(levels.warnings, Warnings::Printf);
    let env = s.env(&[
        ("GIT_CONFIG_SYSTEM", &sys),
        ("TRACING_TRACE2_SPAN_LEVEL", "info"),
        ("TRACING_TRACE2_EVENT_LEVEL", "error"),
        ("TRACING_TRACE2_WARNINGS", "error"),
    ]);
    let got = Settings::load(&lookup(&env));
    assert_eq!(got.span_level, Some(LevelFilter::INFO));
    assert_eq!(got.event_level, Some(LevelFilter::ERROR));
    assert_eq!(got.warn_as, Some(Warnings::Error));
    let got = Settings::load(&env_from(&[
        ("GIT_CONFIG_NOSYSTEM", "1"),
        ("TRACING_TRACE2_SPAN_LEVEL", "loud"),
        ("TRACING_TRACE2_WARNINGS", "shout"),
    ]));
    assert_eq!((got.span_level, got.warn_as), (None, None));
    assert_eq!(got.warnings.len(), 2, "{:?}", got.warnings);
    assert!(
        got.warnings[0].contains("trace2.spanLevel"),
        "{:?}",
        got.warnings
    );
    assert!(
        got.warnings[1].contains("trace2.warnings"),
        "{:?}",
        got.warnings
    );
    // Nothing set: the defaults, spans from DEBUG, events from INFO, warnings nothing.
    let levels = crate::Trace2::with_settings(Settings::default()).levels();
    assert_eq!(levels, tracing_trace2_core::Levels::default());
    assert_eq!(levels.spans, LevelFilter::DEBUG);
    assert_eq!(levels.events, LevelFilter::INFO);
    assert_eq!(levels.warnings, Warnings::Off);
}
