//! The `gitdir:` and `gitdir/i:` conditions of `includeIf`, decided as git decides them
//! for its early config: the pattern is matched against the repository's git directory,
//! first with every link resolved, then as an absolute path without resolving links.
//!
//! Pattern rules (checked against git 2.47.3): a leading `~` becomes the home directory
//! (`$HOME`, resolved); a leading `./` becomes the directory of the config file holding
//! the condition (that part compared literally); any other relative pattern gets `**/`
//! in front; a trailing `/` gets `**` after it. Matching is git's wildmatch with path
//! semantics, folding case for `gitdir/i:`.

use std::path::Path;

use super::EnvFn;
use super::discover::{GitDirTexts, real_path};
use super::home::home_of_user;
use super::wildmatch::{WildFlags, wildmatch_bytes};

/// Whether the git directory `texts` describes matches a `gitdir:` pattern.
/// `including_file` is the config file that holds the condition (`None` for
/// command-line config). `Err` holds git's message for a pattern it rejects (the
/// include is then skipped, as git does).
pub(crate) fn gitdir_matches(
    pattern: &str,
    icase: bool,
    texts: &GitDirTexts,
    including_file: Option<&Path>,
    env: EnvFn<'_>,
) -> Result<bool, String> {
    let mut pattern = expand_home(pattern, env).unwrap_or_else(|| pattern.as_bytes().to_vec());
    let mut literal_prefix = 0;
    if pattern.starts_with(b"./") {
        let Some(file) = including_file else {
            return Err("relative config include conditionals must come from files".to_string());
        };
        let file = real_path(file).unwrap_or_else(|| file.to_path_buf());
        let file = file.as_os_str().as_encoded_bytes();
        let dir_len = file.iter().rposition(|&c| c == b'/').unwrap_or(0);
        let mut joined = file[..dir_len].to_vec();
        joined.extend_from_slice(&pattern[1..]);
        pattern = joined;
        literal_prefix = dir_len + 1;
    } else if !pattern.starts_with(b"/") {
        pattern.splice(0..0, b"**/".iter().copied());
    }
    if pattern.ends_with(b"/") {
        pattern.extend_from_slice(b"**");
    }
    let flags = WildFlags {
        casefold: icase,
        pathname: true,
    };
    let candidates = texts.real.iter().chain(std::iter::once(&texts.absolute));
    for text in candidates {
        let text = text.as_bytes();
        if literal_prefix > 0 {
            if text.len() < literal_prefix {
                continue;
            }
            let (p, t) = (&pattern[..literal_prefix], &text[..literal_prefix]);
            let same = if icase {
                p.eq_ignore_ascii_case(t)
            } else {
                p == t
            };
            if !same {
                continue;
            }
        }
        if wildmatch_bytes(&pattern[literal_prefix..], &text[literal_prefix..], flags) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `~/…` with the resolved `$HOME`, `~user/…` with that user's home; `None` when the
/// pattern has no `~` or it cannot be expanded (git then keeps the pattern as written).
fn expand_home(pattern: &str, env: EnvFn<'_>) -> Option<Vec<u8>> {
    let rest = pattern.strip_prefix('~')?;
    let (user, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let home = if user.is_empty() {
        let home = env("HOME")?;
        real_path(Path::new(&home))
            .map(|p| p.as_os_str().as_encoded_bytes().to_vec())
            .unwrap_or_else(|| home.into_bytes())
    } else {
        home_of_user(user)?.into_bytes()
    };
    let mut out = home;
    out.extend_from_slice(tail.as_bytes());
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(real: &str, absolute: &str) -> GitDirTexts {
        GitDirTexts {
            real: Some(real.to_string()),
            absolute: absolute.to_string(),
        }
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn matches(pattern: &str, icase: bool, t: &GitDirTexts) -> bool {
        gitdir_matches(pattern, icase, t, Some(Path::new("/nowhere/cfg")), &no_env).unwrap()
    }

    #[test]
    fn absolute_relative_and_directory_patterns() {
        let t = texts("/work/repo/.git", "/work/repo/.git");
        assert!(matches("/work/repo/", false, &t));
        assert!(matches("/work/repo/.git", false, &t));
        assert!(!matches("/work/repo", false, &t));
        assert!(matches("repo/.git", false, &t));
        assert!(matches("repo/", false, &t));
        assert!(!matches("rep/", false, &t));
        assert!(matches("/work/*/.git", false, &t));
        assert!(!matches("/*/.git", false, &t));
        assert!(matches("/**/.git", false, &t));
        assert!(!matches("/WORK/repo/", false, &t));
        assert!(matches("/WORK/repo/", true, &t));
    }

    #[test]
    fn the_unresolved_spelling_is_tried_second() {
        let t = texts("/real/repo/.git", "/link/repo/.git");
        assert!(matches("/real/", false, &t));
        assert!(matches("/link/", false, &t));
        let t = GitDirTexts {
            real: None,
            absolute: "/link/repo/.git".to_string(),
        };
        assert!(matches("/link/", false, &t));
    }

    #[test]
    #[cfg_attr(
        windows,
        ignore = "gitdir: conditions follow Unix path rules; Windows paths are not matched yet"
    )]
    fn dot_slash_is_the_including_files_directory_taken_literally() {
        let scratch = crate::config::test_git::Scratch::new();
        let root = real_path(&scratch.root).unwrap();
        let weird = root.join("a*b");
        std::fs::create_dir_all(&weird).unwrap();
        let cfg = weird.join("cfg");
        std::fs::write(&cfg, "").unwrap();
        let inside = format!("{}/repo/.git", weird.display());
        let t = texts(&inside, &inside);
        assert!(gitdir_matches("./repo/", false, &t, Some(&cfg), &no_env).unwrap());
        // `*` in the file's directory is not a wildcard.
        let other = format!("{}/aXb/repo/.git", root.display());
        let t = texts(&other, &other);
        assert!(!gitdir_matches("./repo/", false, &t, Some(&cfg), &no_env).unwrap());
        assert_eq!(
            gitdir_matches("./repo/", false, &t, None, &no_env),
            Err("relative config include conditionals must come from files".to_string())
        );
    }

    #[test]
    #[cfg_attr(
        windows,
        ignore = "gitdir: conditions follow Unix path rules; Windows paths are not matched yet"
    )]
    fn tilde_is_the_resolved_home() {
        let scratch = crate::config::test_git::Scratch::new();
        let home = real_path(&scratch.root.join("home")).unwrap();
        let home_text = home.display().to_string();
        let env = |name: &str| (name == "HOME").then(|| home_text.clone());
        let inside = format!("{home_text}/src/r/.git");
        let t = texts(&inside, &inside);
        assert!(gitdir_matches("~/src/", false, &t, None, &env).unwrap());
        assert!(!gitdir_matches("~/other/", false, &t, None, &env).unwrap());
        // Without a home the pattern stays as written (and is then relative).
        assert!(!gitdir_matches("~/src/", false, &t, None, &no_env).unwrap());
    }
}
