//! Where config entries come from: the system and global files (with their includes)
//! and the command-line scope that git passes to child processes through the
//! environment (`GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_<n>`/`GIT_CONFIG_VALUE_<n>`, then
//! `GIT_CONFIG_PARAMETERS`).
//!
//! Git dies on a broken source; a library must not, so every such case here drops the
//! broken piece (a whole file, one include, the rest of the command-line list) and
//! records git's message as a warning instead.

use std::path::{Path, PathBuf};

use super::condition::gitdir_matches;
use super::discover::GitDirTexts;
use super::home::expand_tilde;
use super::parse::{RawEntry, canonical_key, parse_config, split_key};
use super::wildmatch::{WildFlags, wildmatch};
use super::{ConfigEntry, ConfigScope, EnvFn, parse_git_bool};

/// Git's limit on nested includes.
const MAX_INCLUDE_DEPTH: usize = 10;

/// The config files git reads outside a repository, in read order.
pub(crate) fn config_files(
    env: EnvFn<'_>,
    warnings: &mut Vec<String>,
) -> Vec<(PathBuf, ConfigScope)> {
    let mut files = Vec::new();
    let no_system = match env("GIT_CONFIG_NOSYSTEM") {
        None => false,
        Some(v) => parse_git_bool(&v).unwrap_or_else(|| {
            warnings.push(format!(
                "bad boolean environment value '{v}' for 'GIT_CONFIG_NOSYSTEM'"
            ));
            false
        }),
    };
    if !no_system {
        let system = env("GIT_CONFIG_SYSTEM").unwrap_or_else(|| "/etc/gitconfig".to_string());
        files.push((PathBuf::from(system), ConfigScope::System));
    }
    if let Some(global) = env("GIT_CONFIG_GLOBAL") {
        files.push((PathBuf::from(global), ConfigScope::Global));
    } else {
        let home = env("HOME");
        let xdg = env("XDG_CONFIG_HOME").filter(|v| !v.is_empty());
        if let Some(dir) = xdg {
            files.push((Path::new(&dir).join("git/config"), ConfigScope::Global));
        } else if let Some(home) = &home {
            files.push((
                Path::new(home).join(".config/git/config"),
                ConfigScope::Global,
            ));
        }
        if let Some(home) = &home {
            files.push((Path::new(home).join(".gitconfig"), ConfigScope::Global));
        }
    }
    files
}

/// The command-line scope entries, canonicalised, in git's order. Stops at the first
/// malformed item, as git does (git then dies; the error text is returned instead).
pub(crate) fn command_entries(env: EnvFn<'_>) -> (Vec<RawEntry>, Option<String>) {
    let mut out = Vec::new();
    if let Some(count) = env("GIT_CONFIG_COUNT") {
        let count = if count.is_empty() {
            Ok(0)
        } else {
            count.parse::<u64>()
        };
        let Ok(count) = count else {
            return (out, Some("bogus count in GIT_CONFIG_COUNT".to_string()));
        };
        if count > i32::MAX as u64 {
            return (
                out,
                Some("too many entries in GIT_CONFIG_COUNT".to_string()),
            );
        }
        for i in 0..count {
            let Some(key) = env(&format!("GIT_CONFIG_KEY_{i}")) else {
                return (out, Some(format!("missing config key GIT_CONFIG_KEY_{i}")));
            };
            let Some(value) = env(&format!("GIT_CONFIG_VALUE_{i}")) else {
                return (
                    out,
                    Some(format!("missing config value GIT_CONFIG_VALUE_{i}")),
                );
            };
            match canonical_key(&key) {
                Ok(key) => out.push(RawEntry {
                    key,
                    value: Some(value),
                }),
                Err(e) => return (out, Some(e)),
            }
        }
    }
    if let Some(params) = env("GIT_CONFIG_PARAMETERS")
        && let Err(e) = parse_parameters(&params, &mut out)
    {
        return (out, Some(e));
    }
    (out, None)
}

/// Reads one shell single-quoted word at the start of `s`. Returns the word and what
/// follows it (`None` at the end of input); inside, `'\''` and `'\!'` stand for `'`
/// and `!`, the only escapes git writes.
fn sq_word(s: &str) -> Option<(String, Option<&str>)> {
    let mut rest = s.strip_prefix('\'')?;
    let mut word = String::new();
    loop {
        let close = rest.find('\'')?;
        word.push_str(&rest[..close]);
        rest = &rest[close + 1..];
        if rest.is_empty() {
            return Some((word, None));
        }
        let b = rest.as_bytes();
        if b.len() >= 3 && b[0] == b'\\' && (b[1] == b'\'' || b[1] == b'!') && b[2] == b'\'' {
            word.push(b[1] as char);
            rest = &rest[3..];
            continue;
        }
        return Some((word, Some(rest)));
    }
}

fn starts_with_space(s: &str) -> bool {
    s.as_bytes()
        .first()
        .is_some_and(|&c| c.is_ascii_whitespace())
}

/// Parses `GIT_CONFIG_PARAMETERS`: blank-separated items, each either `'key=value'`
/// (older writers; no `=` means a valueless key) or `'key'='value'` / `'key'=`
/// (the latter valueless).
fn parse_parameters(params: &str, out: &mut Vec<RawEntry>) -> Result<(), String> {
    let bogus = || "bogus format in GIT_CONFIG_PARAMETERS".to_string();
    let mut cur = Some(params);
    while let Some(s) = cur.filter(|s| !s.is_empty()) {
        let (word, rest) = sq_word(s).ok_or_else(bogus)?;
        let rest = match rest {
            None => {
                push_old_style(&word, out)?;
                None
            }
            Some(r) if starts_with_space(r) => {
                push_old_style(&word, out)?;
                Some(r)
            }
            Some(r) => {
                let after_eq = r.strip_prefix('=').ok_or_else(bogus)?;
                let (value, rest) = if after_eq.starts_with('\'') {
                    let (value, rest) = sq_word(after_eq).ok_or_else(bogus)?;
                    if rest.is_some_and(|r| !starts_with_space(r)) {
                        return Err(bogus());
                    }
                    (Some(value), rest)
                } else if after_eq.is_empty() || starts_with_space(after_eq) {
                    (None, Some(after_eq))
                } else {
                    return Err(bogus());
                };
                out.push(RawEntry {
                    key: canonical_key(&word)?,
                    value,
                });
                rest
            }
        };
        cur = rest.map(|r| r.trim_start_matches(|c: char| c.is_ascii_whitespace()));
    }
    Ok(())
}

fn push_old_style(item: &str, out: &mut Vec<RawEntry>) -> Result<(), String> {
    let (key, value) = match item.split_once('=') {
        Some((k, v)) => (k, Some(v.to_string())),
        None => (item, None),
    };
    if key.is_empty() {
        return Err(format!("bogus config parameter: {item}"));
    }
    out.push(RawEntry {
        key: canonical_key(key)?,
        value,
    });
    Ok(())
}

/// How `includeIf "hasconfig:remote.*.url:…"` is decided during one read.
#[derive(Clone, Copy)]
pub(crate) enum RemoteUrls<'a> {
    /// Gathering the URLs themselves: git then follows such includes unconditionally.
    Collecting,
    /// Deciding with these URLs.
    Known(&'a [String]),
}

/// Reads config sources, expanding includes, and collects warnings on the way.
pub(crate) struct SourceReader<'a> {
    /// Environment lookup, for `~` in include paths.
    pub env: EnvFn<'a>,
    /// How `hasconfig:` includes are decided.
    pub urls: RemoteUrls<'a>,
    /// The repository's git directory, which `gitdir:` includes are matched against;
    /// `None` outside a repository (they never hold then).
    pub git_dir: Option<&'a GitDirTexts>,
    /// Git's message for each broken piece that was skipped.
    pub warnings: Vec<String>,
    /// Whether a `hasconfig:` include was met: only then can a read deciding them with
    /// known URLs differ from a read that gathers the URLs.
    pub by_url_seen: bool,
}

impl SourceReader<'_> {
    /// Appends the entries of the file at `path` (and of the files it includes).
    /// A missing file is silently skipped, as git does.
    pub(crate) fn read_file(
        &mut self,
        path: &Path,
        scope: ConfigScope,
        depth: usize,
        out: &mut Vec<ConfigEntry>,
    ) {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) => {
                let quiet = matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) || (depth == 0 && e.kind() == std::io::ErrorKind::PermissionDenied)
                    || path.as_os_str().is_empty();
                if !quiet {
                    self.warnings.push(format!(
                        "unable to read config file '{}': {e}",
                        path.display()
                    ));
                }
                return;
            }
        };
        match parse_config(&bytes) {
            Ok(raw) => {
                self.push_entries(raw, scope, Some(path), depth, out);
            }
            Err(e) => self.warnings.push(format!(
                "bad config line {} in file {}",
                e.line,
                path.display()
            )),
        }
    }

    /// Appends `raw` entries with `scope`, following includes; `file` is the config
    /// file they come from (`None` for the command line), where relative include paths
    /// start.
    pub(crate) fn push_entries(
        &mut self,
        raw: Vec<RawEntry>,
        scope: ConfigScope,
        file: Option<&Path>,
        depth: usize,
        out: &mut Vec<ConfigEntry>,
    ) {
        let base = file.map(|f| f.parent().map(Path::to_path_buf).unwrap_or_default());
        for RawEntry { key, value } in raw {
            let include = match split_key(&key) {
                Some(("include", None, "path")) => Some(None),
                Some(("includeif", Some(cond), "path")) => Some(Some(cond.to_string())),
                _ => None,
            };
            out.push(ConfigEntry {
                scope,
                key: key.clone(),
                value: value.clone(),
            });
            let Some(condition) = include else { continue };
            let Some(value) = value else {
                self.warnings.push(format!("missing value for '{key}'"));
                continue;
            };
            let by_url = condition
                .as_deref()
                .is_some_and(|c| c.starts_with("hasconfig:"));
            self.by_url_seen |= by_url;
            if let Some(cond) = &condition
                && !self.condition_holds(cond, file)
            {
                continue;
            }
            let Some(path) = self.include_path(&value, base.as_deref()) else {
                continue;
            };
            if depth >= MAX_INCLUDE_DEPTH {
                self.warnings.push(format!(
                    "exceeded maximum include depth ({MAX_INCLUDE_DEPTH}) while including {value} from {key}"
                ));
                continue;
            }
            let mut included = Vec::new();
            self.read_file(&path, scope, depth + 1, &mut included);
            if by_url
                && matches!(self.urls, RemoteUrls::Known(_))
                && included.iter().any(|e| is_remote_url(&e.key))
            {
                self.warnings.push(
                    "remote URLs cannot be configured in file directly or indirectly included by \
                     includeIf.hasconfig:remote.*.url"
                        .to_string(),
                );
                continue;
            }
            out.extend(included);
        }
    }

    /// Decides an `includeIf` condition as git's early config does: `gitdir:` and
    /// `gitdir/i:` against the repository found (never outside one), `onbranch:` never
    /// (early config has no branch), `hasconfig:` against the remote URLs. `file` holds
    /// the condition (`None` on the command line).
    fn condition_holds(&mut self, cond: &str, file: Option<&Path>) -> bool {
        let gitdir = match cond.strip_prefix("gitdir:") {
            Some(pattern) => Some((pattern, false)),
            None => cond.strip_prefix("gitdir/i:").map(|p| (p, true)),
        };
        if let Some((pattern, icase)) = gitdir {
            let Some(texts) = self.git_dir else {
                return false;
            };
            return match gitdir_matches(pattern, icase, texts, file, self.env) {
                Ok(holds) => holds,
                Err(message) => {
                    if !self.warnings.contains(&message) {
                        self.warnings.push(message);
                    }
                    false
                }
            };
        }
        let Some(glob) = cond.strip_prefix("hasconfig:remote.*.url:") else {
            return false;
        };
        match self.urls {
            RemoteUrls::Collecting => true,
            RemoteUrls::Known(urls) => {
                let flags = WildFlags {
                    casefold: false,
                    pathname: true,
                };
                urls.iter().any(|u| wildmatch(glob, u, flags))
            }
        }
    }

    /// Resolves an include path: `~` expansion, then relative to `base`.
    fn include_path(&mut self, value: &str, base: Option<&Path>) -> Option<PathBuf> {
        let expanded = if value.starts_with('~') {
            match expand_tilde(value, self.env) {
                Some(p) => p,
                None => {
                    self.warnings
                        .push(format!("failed to expand user dir in: '{value}'"));
                    return None;
                }
            }
        } else {
            PathBuf::from(value)
        };
        if expanded.is_absolute() {
            return Some(expanded);
        }
        match base {
            Some(dir) => Some(dir.join(expanded)),
            None => {
                self.warnings
                    .push("relative config includes must come from files".to_string());
                None
            }
        }
    }
}

/// True for `remote.<name>.url` keys.
pub(crate) fn is_remote_url(key: &str) -> bool {
    matches!(split_key(key), Some(("remote", Some(_), "url")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::home::home_of_user;

    fn params(s: &str) -> (Vec<(String, Option<String>)>, Option<String>) {
        let mut out = Vec::new();
        let r = parse_parameters(s, &mut out);
        (out.into_iter().map(|e| (e.key, e.value)).collect(), r.err())
    }

    fn kv(k: &str, v: Option<&str>) -> (String, Option<String>) {
        (k.to_string(), v.map(str::to_string))
    }

    // Shapes checked with git 2.47.3 (`def_param` output or its error message).
    #[test]
    fn parameters_old_and_new_style() {
        assert_eq!(
            params("'A.X=1' 'b.Sub.Y'='2' 'a.z'= 'a.old'"),
            (
                vec![
                    kv("a.x", Some("1")),
                    kv("b.Sub.y", Some("2")),
                    kv("a.z", None),
                    kv("a.old", None)
                ],
                None
            )
        );
        assert_eq!(params("'a.x=1=2'"), (vec![kv("a.x", Some("1=2"))], None));
        assert_eq!(
            params("'a.q'='it'\\''s'"),
            (vec![kv("a.q", Some("it's"))], None)
        );
        assert_eq!(
            params("'a.x'='1'\\!'2'"),
            (vec![kv("a.x", Some("1!2"))], None)
        );
        assert_eq!(params("'a.x=1' "), (vec![kv("a.x", Some("1"))], None));
        assert_eq!(params("'a.x=1'  'a.y'='2'").0.len(), 2);
        assert_eq!(params(""), (vec![], None));
    }

    #[test]
    fn parameters_errors() {
        let bogus = Some("bogus format in GIT_CONFIG_PARAMETERS".to_string());
        assert_eq!(params(" 'a.x=1'").1, bogus);
        assert_eq!(params("bogus").1, bogus);
        assert_eq!(params("'a.x'=x").1, bogus);
        assert_eq!(params("'a.x'='1''2'").1, bogus);
        assert_eq!(params("'a.x'='1'x").1, bogus);
        assert_eq!(params("'a.x").1, bogus);
        assert_eq!(params("'a.1x=1'").1, Some("invalid key: a.1x".to_string()));
        assert_eq!(
            params("'ab=1'").1,
            Some("key does not contain a section: ab".to_string())
        );
        // Entries before the error are kept.
        assert_eq!(params("'a.b=1' 'x'").0, vec![kv("a.b", Some("1"))]);
        assert_eq!(
            params("'=1'").1,
            Some("bogus config parameter: =1".to_string())
        );
    }

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn count_entries_come_first() {
        let env = env_of(&[
            ("GIT_CONFIG_PARAMETERS", "'a.p=1'"),
            ("GIT_CONFIG_COUNT", "2"),
            ("GIT_CONFIG_KEY_0", "B.C.D"),
            ("GIT_CONFIG_VALUE_0", "v 0"),
            ("GIT_CONFIG_KEY_1", "a.e"),
            ("GIT_CONFIG_VALUE_1", ""),
        ]);
        let (entries, err) = command_entries(&env);
        assert_eq!(err, None);
        let got: Vec<_> = entries.into_iter().map(|e| (e.key, e.value)).collect();
        assert_eq!(
            got,
            vec![
                kv("b.C.d", Some("v 0")),
                kv("a.e", Some("")),
                kv("a.p", Some("1"))
            ]
        );
    }

    #[test]
    fn count_errors() {
        let (e, err) = command_entries(&env_of(&[("GIT_CONFIG_COUNT", "1x")]));
        assert!(e.is_empty());
        assert_eq!(err.as_deref(), Some("bogus count in GIT_CONFIG_COUNT"));
        let (e, err) = command_entries(&env_of(&[
            ("GIT_CONFIG_COUNT", "2"),
            ("GIT_CONFIG_KEY_0", "a.b"),
            ("GIT_CONFIG_VALUE_0", "1"),
        ]));
        assert_eq!(e.len(), 1);
        assert_eq!(err.as_deref(), Some("missing config key GIT_CONFIG_KEY_1"));
        let (_, err) = command_entries(&env_of(&[
            ("GIT_CONFIG_COUNT", "1"),
            ("GIT_CONFIG_KEY_0", "a.b"),
        ]));
        assert_eq!(
            err.as_deref(),
            Some("missing config value GIT_CONFIG_VALUE_0")
        );
        let (_, err) = command_entries(&env_of(&[("GIT_CONFIG_COUNT", "4294967296")]));
        assert_eq!(err.as_deref(), Some("too many entries in GIT_CONFIG_COUNT"));
        let (e, err) = command_entries(&env_of(&[("GIT_CONFIG_COUNT", "")]));
        assert!(e.is_empty() && err.is_none());
    }

    #[test]
    fn file_locations() {
        let mut w = Vec::new();
        let files = config_files(&env_of(&[("HOME", "/h")]), &mut w);
        let want: Vec<(PathBuf, ConfigScope)> = vec![
            ("/etc/gitconfig".into(), ConfigScope::System),
            ("/h/.config/git/config".into(), ConfigScope::Global),
            ("/h/.gitconfig".into(), ConfigScope::Global),
        ];
        assert_eq!(files, want);
        let files = config_files(
            &env_of(&[
                ("HOME", "/h"),
                ("XDG_CONFIG_HOME", "/x"),
                ("GIT_CONFIG_NOSYSTEM", "1"),
            ]),
            &mut w,
        );
        assert_eq!(files[0].0, PathBuf::from("/x/git/config"));
        assert_eq!(files.len(), 2);
        let files = config_files(
            &env_of(&[
                ("HOME", "/h"),
                ("GIT_CONFIG_GLOBAL", "/g"),
                ("GIT_CONFIG_SYSTEM", "/s"),
            ]),
            &mut w,
        );
        assert_eq!(
            files,
            vec![
                ("/s".into(), ConfigScope::System),
                ("/g".into(), ConfigScope::Global)
            ]
        );
        assert!(w.is_empty());
        let files = config_files(&env_of(&[("GIT_CONFIG_NOSYSTEM", "maybe")]), &mut w);
        assert_eq!(files.len(), 1);
        assert_eq!(
            w,
            vec!["bad boolean environment value 'maybe' for 'GIT_CONFIG_NOSYSTEM'".to_string()]
        );
    }

    #[test]
    fn tilde_expansion() {
        let env = env_of(&[("HOME", "/home/me")]);
        assert_eq!(expand_tilde("~/x", &env), Some(PathBuf::from("/home/me/x")));
        assert_eq!(expand_tilde("~", &env), Some(PathBuf::from("/home/me")));
        assert_eq!(expand_tilde("~/x", &env_of(&[])), None);
        assert_eq!(
            expand_tilde("~root/x", &env),
            home_of_user("root").map(|h| PathBuf::from(format!("{h}/x")))
        );
        assert_eq!(expand_tilde("~no-such-user-here/x", &env), None);
    }
}
