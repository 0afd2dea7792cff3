//! The `def_param` listing: config entries and environment variables a user asked
//! Trace2 to report (`GIT_TRACE2_CONFIG_PARAMS`, `GIT_TRACE2_ENV_VARS`).
//!
//! Git lists every config entry it can see, in read order, and reports each one whose
//! key matches one of the patterns (git's `wildmatch`, case-insensitive, `*` crossing
//! `.` and `/`); then each listed environment variable that is set and non-empty, with
//! scope `command`. The config entries are those git's early config reads: system,
//! global, the config of the repository around the current directory (`local`), then
//! the command line (see [`crate::config`]), or the entries a program handed over with
//! [`Settings::from_entries`]. Values are returned raw: redaction is applied by the
//! writer.

use crate::config::wildmatch::{WildFlags, wildmatch};
use crate::config::{ConfigScope, Settings};

/// One `def_param` event to emit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DefParam {
    /// Scope name as git prints it (`system`, `global`, `local`, `command`, `unknown`, …).
    pub scope: &'static str,
    /// The config key (normalised as git does) or the environment variable name.
    pub param: String,
    /// The raw value; `None` for a valueless config key (git 2.49+ then writes the
    /// event without a value; 2.47.3 crashes).
    pub value: Option<String>,
}

/// The flags git uses for `trace2.configParams` patterns.
const PARAM_FLAGS: WildFlags = WildFlags {
    casefold: true,
    pathname: false,
};

/// True if `key` (as git normalises it) matches one of the configured patterns.
fn key_matches(settings: &Settings, key: &str) -> bool {
    settings
        .config_params
        .iter()
        .any(|p| wildmatch(p, key, PARAM_FLAGS))
}

// The listing is a method of `Settings` written here, so that `config` (which
// `params` reads) does not import `params` back.
impl Settings {
    /// The `def_param` lines the process will write after its first `cmd_name`, as
    /// `(scope, key, value)`: the config entries matching `trace2.configParams`, then the
    /// environment variables named by `trace2.envVars` (scope `command`, as git lists them).
    pub fn def_param_listing(&self) -> Vec<(&'static str, String, Option<String>)> {
        def_params(self)
            .into_iter()
            .map(|p| (p.scope, p.param, p.value))
            .collect()
    }
}

/// The `def_param` events git emits once per process after the first `cmd_name`:
/// matching config entries (system, global, local, then command line), then the set and
/// non-empty environment variables of [`Settings::env_vars`], in list order.
pub fn def_params(settings: &Settings) -> Vec<DefParam> {
    let mut out = Vec::new();
    if !settings.config_params.is_empty() {
        for entry in &settings.config_entries {
            if key_matches(settings, &entry.key) {
                out.push(DefParam {
                    scope: entry.scope.as_str(),
                    param: entry.key.clone(),
                    value: entry.value.clone(),
                });
            }
        }
    }
    for (name, value) in &settings.env_var_values {
        out.push(DefParam {
            scope: ConfigScope::Command.as_str(),
            param: name.clone(),
            value: Some(value.clone()),
        });
    }
    out
}

/// True if a config `key` the program itself sets should be reported, as git reports
/// its own config writes. The key is normalised first (section and name lower-case)
/// when it is a valid key; otherwise it is matched as given.
#[cfg(test)]
pub fn matches_config_params(settings: &Settings, key: &str) -> bool {
    let normalised = crate::config::normalise_key(key);
    key_matches(settings, normalised.as_deref().unwrap_or(key))
}

/// The `def_param` (scope `unknown`) for a config value the program writes, or `None`
/// when the key matches no pattern; git emits one for every such write.
pub fn config_write_param(settings: &Settings, key: &str, value: Option<&str>) -> Option<DefParam> {
    let param = crate::config::normalise_key(key).unwrap_or_else(|| key.to_string());
    key_matches(settings, &param).then(|| DefParam {
        scope: ConfigScope::Unknown.as_str(),
        param,
        value: value.map(str::to_string),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_git::{Scratch, lookup};
    use std::collections::BTreeMap;

    /// Runs git with `env` plus a brief normal target and raw values; returns its
    /// `def_param` lines as (scope, key, value).
    fn git_def_params(
        s: &Scratch,
        env: &BTreeMap<String, String>,
    ) -> Vec<(String, String, String)> {
        let mut env = env.clone();
        env.insert("GIT_TRACE2".into(), s.path("trace"));
        env.insert("GIT_TRACE2_BRIEF".into(), "1".into());
        env.insert("GIT_TRACE2_REDACT".into(), "0".into());
        let _ = std::fs::remove_file(s.root.join("trace"));
        let out = s.git(&env);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let trace = s.read("trace").unwrap();
        trace
            .lines()
            .filter_map(|l| l.strip_prefix("def_param scope:"))
            .map(|l| {
                let (scope, kv) = l.split_once(' ').unwrap();
                let (k, v) = kv.split_once('=').unwrap();
                (scope.to_string(), k.to_string(), v.to_string())
            })
            .collect()
    }

    fn ours(s: &Scratch, env: &BTreeMap<String, String>) -> Vec<(String, String, String)> {
        let settings = Settings::load_in(&lookup(env), &s.root.join("work"));
        assert!(settings.warnings.is_empty(), "{:?}", settings.warnings);
        def_params(&settings)
            .into_iter()
            .map(|p| {
                (
                    p.scope.to_string(),
                    p.param,
                    p.value.unwrap_or_else(|| "(null)".into()),
                )
            })
            .collect()
    }

    struct Case {
        name: &'static str,
        files: &'static [(&'static str, &'static str)],
        env: &'static [(&'static str, &'static str)],
    }

    const CASES: &[Case] = &[
        Case {
            name: "all scopes and env vars",
            files: &[
                (
                    "sys",
                    "[color]\n\tui = never\n[trace2]\n\tconfigParams = color.ui,remote.*.url\n",
                ),
                (
                    "global",
                    "[color]\n\tui = always\n[Remote \"Origin\"]\n\tURL = https://a:b@h/x\n\turl = second\n",
                ),
            ],
            env: &[
                ("GIT_CONFIG_SYSTEM", "@/sys"),
                ("GIT_CONFIG_GLOBAL", "@/global"),
                (
                    "GIT_TRACE2_ENV_VARS",
                    "GIT_HTTP_USER_AGENT, MY_VAR ,UNSET_VAR,EMPTY_VAR",
                ),
                ("GIT_HTTP_USER_AGENT", "agent/1.0"),
                ("MY_VAR", "https://bob:pw@host/x"),
                ("EMPTY_VAR", ""),
                (
                    "GIT_CONFIG_PARAMETERS",
                    "'color.ui'='false' 'remote.origin.url=https://carol:pw2@example.org/r'",
                ),
                ("GIT_CONFIG_COUNT", "2"),
                ("GIT_CONFIG_KEY_0", "COLOR.UI"),
                ("GIT_CONFIG_VALUE_0", "auto"),
                ("GIT_CONFIG_KEY_1", "remote.Up.url"),
                ("GIT_CONFIG_VALUE_1", ""),
            ],
        },
        Case {
            name: "pattern order and case folding",
            files: &[(
                "global",
                "[url \"https://a/b/\"]\n\tinsteadOf = x\n[Remote \"A/B\"]\n\tURL = u1\n[remote.Leg]\n\turl = u2\n",
            )],
            env: &[
                ("GIT_CONFIG_NOSYSTEM", "1"),
                ("GIT_CONFIG_GLOBAL", "@/global"),
                (
                    "GIT_TRACE2_CONFIG_PARAMS",
                    " REMOTE.a/b.url , url**of,[R]emote.*, [Q-S]emote.leg.*",
                ),
            ],
        },
        Case {
            name: "includes keep the including scope and follow the include entry",
            files: &[
                ("sys", "[include]\n\tpath = inc\n[a]\n\tafter = 2\n"),
                ("inc", "[a]\n\tinc = 1\n"),
                (
                    "global",
                    "[includeIf \"hasconfig:remote.*.url:https://q/*\"]\n\tpath = @/inc2\n[a]\n\tg = 3\n",
                ),
                ("inc2", "[a]\n\tinc2 = 4\n"),
            ],
            env: &[
                ("GIT_CONFIG_SYSTEM", "@/sys"),
                ("GIT_CONFIG_GLOBAL", "@/global"),
                ("GIT_TRACE2_CONFIG_PARAMS", "a.*,include*"),
                // Only command-line config holds the URL: it counts for the listing.
                (
                    "GIT_CONFIG_PARAMETERS",
                    "'remote.o.url'='https://q/r' 'include.path'='@/inc' 'a.z'='5'",
                ),
            ],
        },
        Case {
            name: "patterns from config, env list from config",
            files: &[(
                "global",
                "[trace2]\n\tconfigParams = trace2.*\n\tenvVars = HOME\n",
            )],
            env: &[
                ("GIT_CONFIG_NOSYSTEM", "1"),
                ("GIT_CONFIG_GLOBAL", "@/global"),
            ],
        },
        Case {
            name: "no patterns, no config listing",
            files: &[("global", "[a]\n\tb = 1\n")],
            env: &[
                ("GIT_CONFIG_NOSYSTEM", "1"),
                ("GIT_CONFIG_GLOBAL", "@/global"),
                ("GIT_TRACE2_ENV_VARS", "HOME"),
            ],
        },
    ];

    #[test]
    #[cfg_attr(
        windows,
        ignore = "needs the real git, which Windows runs here do not have"
    )]
    fn listing_matches_git() {
        for case in CASES {
            let s = Scratch::new();
            for (rel, text) in case.files {
                s.write(rel, text);
            }
            let env = s.env(case.env);
            let want = git_def_params(&s, &env);
            assert!(!want.is_empty(), "{}: git listed nothing", case.name);
            assert_eq!(ours(&s, &env), want, "{}", case.name);
        }
    }

    #[test]
    fn valueless_entries_have_no_value() {
        let settings = Settings {
            config_params: vec!["foo.*".into()],
            config_entries: vec![crate::config::ConfigEntry {
                scope: ConfigScope::Command,
                key: "foo.bar".into(),
                value: None,
            }],
            ..Settings::default()
        };
        assert_eq!(
            def_params(&settings),
            vec![DefParam {
                scope: "command",
                param: "foo.bar".into(),
                value: None
            }]
        );
    }

    #[test]
    fn config_writes_report_scope_unknown() {
        let settings = Settings {
            config_params: vec!["remote.*".into()],
            ..Settings::default()
        };
        assert!(matches_config_params(&settings, "Remote.Other.URL"));
        assert!(!matches_config_params(&settings, "core.bare"));
        assert_eq!(
            config_write_param(&settings, "remote.Other.URL", Some("https://x")),
            Some(DefParam {
                scope: "unknown",
                param: "remote.Other.url".into(),
                value: Some("https://x".into())
            })
        );
        assert_eq!(config_write_param(&settings, "core.bare", Some("x")), None);
        let none = Settings::default();
        assert!(!matches_config_params(&none, "remote.x.url"));
        // An invalid key is matched as given.
        assert!(matches_config_params(&settings, "remote.x_y"));
    }
}
