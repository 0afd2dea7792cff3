//! Finds the repository whose config git lists in `def_param`, the way git finds it for
//! its early config: without changing directory and before any command has set up a
//! repository.
//!
//! `GIT_DIR` names the git directory outright. Otherwise each directory from the
//! current one upwards is tried in turn: a `.git` file (`gitdir: <path>`), a `.git`
//! directory, then the directory itself as a bare repository. The walk stops below the
//! deepest `GIT_CEILING_DIRECTORIES` entry above the current directory, and at a mount
//! point unless `GIT_DISCOVERY_ACROSS_FILESYSTEM` is set. A repository found this way
//! counts only if the current user owns it (or `safe.directory` in the system, global
//! or command-line config allows it), if `safe.bareRepository` lets a bare one be found,
//! and if its format version and extensions are ones git 2.47.3 reads; otherwise git
//! reads no repository config, and neither do we. Every rule here was checked against
//! that binary (see `tests/repo_config.rs`).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::parse::parse_config;
use super::{ConfigEntry, ConfigScope, EnvFn, parse_git_bool, parse_git_int};

/// The repository early config reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Repository {
    /// The git directory as git holds it: absolute, or relative to `cwd` (`.git`, `.`,
    /// or a relative `GIT_DIR`).
    pub git_dir: PathBuf,
    /// The directory of the shared files (the main git directory of a linked worktree).
    pub common_dir: PathBuf,
    /// The directory discovery started from.
    pub cwd: PathBuf,
}

impl Repository {
    /// The repository's own config file (scope `local`).
    pub fn config_file(&self) -> PathBuf {
        self.cwd.join(&self.common_dir).join("config")
    }

    /// The git directory in the two spellings `gitdir:` conditions are matched against:
    /// fully resolved, then absolute as git writes it (`$PWD` kept when it names the
    /// same directory, no symbolic link resolved).
    pub fn gitdir_texts(&self, env: EnvFn<'_>) -> GitDirTexts {
        let joined = self.cwd.join(&self.git_dir);
        GitDirTexts {
            real: real_path(&joined).map(|p| lossy(&p)),
            absolute: lossy(&absolute_path(env, &self.cwd, &self.git_dir)),
        }
    }
}

/// What `includeIf "gitdir:…"` conditions are matched against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GitDirTexts {
    /// The git directory with every symbolic link resolved (`None` if that failed).
    pub real: Option<String>,
    /// The git directory made absolute without resolving links.
    pub absolute: String,
}

/// Finds the repository early config would read from `cwd`. `protected` holds the
/// system, global and command-line entries (where `safe.*` settings count). Problems
/// that make git ignore a repository with a warning are added to `warnings`.
pub(crate) fn discover(
    env: EnvFn<'_>,
    cwd: &Path,
    protected: &[ConfigEntry],
    warnings: &mut Vec<String>,
) -> Option<Repository> {
    let git_dir = find_git_dir(env, cwd, protected, warnings)?;
    let common_dir = common_dir(env, &cwd.join(&git_dir)).unwrap_or_else(|| git_dir.clone());
    let config = common_dir.join("config");
    match check_format(&cwd.join(&config), &config) {
        Ok(()) => {}
        Err(FormatProblem::Rejected(why)) => {
            warnings.push(format!(
                "ignoring git dir '{}': {why}",
                git_dir.to_string_lossy()
            ));
            return None;
        }
        // Git dies here; the repository is skipped instead.
        Err(FormatProblem::Unreadable(message)) => {
            warnings.push(message);
            return None;
        }
    }
    Some(Repository {
        git_dir,
        common_dir,
        cwd: cwd.to_path_buf(),
    })
}

/// The git directory as git's discovery returns it, or `None`.
fn find_git_dir(
    env: EnvFn<'_>,
    cwd: &Path,
    protected: &[ConfigEntry],
    warnings: &mut Vec<String>,
) -> Option<PathBuf> {
    if let Some(dir) = env("GIT_DIR") {
        // Explicit: no search and no ownership check.
        return (!dir.is_empty()).then(|| PathBuf::from(dir));
    }
    if !cwd.is_absolute() {
        return None;
    }
    let ceiling = ceiling_length(env, &os::slashed(cwd));
    let one_filesystem = !env_flag(env, "GIT_DISCOVERY_ACROSS_FILESYSTEM");
    let device = os::device(&std::fs::metadata(cwd).ok()?);
    let mut dir = cwd.to_path_buf();
    loop {
        let dot_git = dir.join(".git");
        let found = match read_gitfile(env, &dot_git) {
            Ok(target) => Some((target, Some(dot_git.clone()))),
            Err(GitfileError::NotAFile) if is_git_directory(env, &dot_git) => {
                Some((PathBuf::from(".git"), None))
            }
            Err(GitfileError::NotAFile | GitfileError::Missing) => None,
            // A `.git` file that is broken ends the search: no repository config.
            Err(GitfileError::Invalid) => return None,
        };
        if let Some((git_dir, gitfile)) = found {
            let candidate = if gitfile.is_some() {
                git_dir.clone()
            } else {
                dot_git.clone()
            };
            if !valid_ownership(
                env,
                protected,
                gitfile.as_deref(),
                Some(&dir),
                &candidate,
                cwd,
                warnings,
            ) {
                return None;
            }
            // Found above the starting directory: git makes a relative result absolute.
            return Some(if dir.as_path() != cwd && git_dir.is_relative() {
                dir.join(git_dir)
            } else {
                git_dir
            });
        }
        if is_git_directory(env, &dir) {
            if bare_repositories_explicit_only(protected, warnings) && !is_implicit_bare(&dir) {
                return None;
            }
            if !valid_ownership(env, protected, None, None, &dir, cwd, warnings) {
                return None;
            }
            return Some(if dir.as_path() == cwd {
                PathBuf::from(".")
            } else {
                dir
            });
        }
        // Up one level, unless that reaches the ceiling or leaves the filesystem.
        let parent = dir.parent()?.to_path_buf();
        let parent_len = match os::slashed(&parent).as_slice() {
            b"/" => 0,
            p => p.len(),
        };
        if parent_len as isize <= ceiling {
            return None;
        }
        if one_filesystem && os::device(&std::fs::metadata(&parent).ok()?) != device {
            return None;
        }
        dir = parent;
    }
}

/// Length of the deepest `GIT_CEILING_DIRECTORIES` entry that is a proper ancestor of
/// `cwd` (with `/` separators, see `os::slashed`), or -1. The entries are separated by
/// the platform's path-list separator (`:`, Windows `;`); they are resolved unless an
/// empty entry came before them; relative and unresolvable ones are dropped.
fn ceiling_length(env: EnvFn<'_>, cwd: &[u8]) -> isize {
    let Some(list) = env("GIT_CEILING_DIRECTORIES") else {
        return -1;
    };
    if cwd == b"/" {
        return -1;
    }
    let mut resolve = true;
    let mut longest = -1;
    for entry in list.split(os::PATH_LIST_SEPARATOR) {
        if entry.is_empty() {
            resolve = false;
            continue;
        }
        if !os::is_absolute_text(entry) {
            continue;
        }
        let ceiling = if resolve {
            match real_path(Path::new(entry)) {
                Some(p) => os::slashed(&p),
                None => continue,
            }
        } else {
            os::slashed(Path::new(entry))
        };
        let mut len = ceiling.len();
        if ceiling.ends_with(b"/") {
            len -= 1;
        }
        let is_ancestor =
            cwd.starts_with(&ceiling[..len]) && cwd.get(len) == Some(&b'/') && cwd.len() > len + 1;
        if is_ancestor && len as isize > longest {
            longest = len as isize;
        }
    }
    longest
}

/// Why a `.git` path gave no git directory.
#[derive(Debug, PartialEq, Eq)]
enum GitfileError {
    /// Nothing there.
    Missing,
    /// Something other than a regular file (normally a directory).
    NotAFile,
    /// A file that is not a usable `gitdir:` link (git stops looking).
    Invalid,
}

/// Reads a `.git` file: `gitdir: <path>`, relative paths from the file's directory; the
/// target must look like a git directory. Returns the resolved target.
fn read_gitfile(env: EnvFn<'_>, path: &Path) -> Result<PathBuf, GitfileError> {
    const MAX_SIZE: u64 = 1 << 20;
    let meta = std::fs::metadata(path).map_err(|_| GitfileError::Missing)?;
    if !meta.is_file() {
        return Err(GitfileError::NotAFile);
    }
    if meta.len() > MAX_SIZE {
        return Err(GitfileError::Invalid);
    }
    let bytes = std::fs::read(path).map_err(|_| GitfileError::Invalid)?;
    let rest = bytes
        .strip_prefix(b"gitdir: ")
        .ok_or(GitfileError::Invalid)?;
    let mut end = rest.len();
    while end > 0 && matches!(rest[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    if end == 0 {
        return Err(GitfileError::Invalid);
    }
    let target = os::path_from_bytes(&rest[..end]);
    let target = match path.parent() {
        Some(dir) if target.is_relative() => dir.join(&target),
        _ => target,
    };
    if !is_git_directory(env, &target) {
        return Err(GitfileError::Invalid);
    }
    Ok(real_path(&target).unwrap_or(target))
}

/// Git's test for a git directory: a `HEAD` that is a symbolic ref into `refs/` or an
/// object id, and `objects` (or `$GIT_OBJECT_DIRECTORY`) and `refs` directories in the
/// common directory that can be searched.
fn is_git_directory(env: EnvFn<'_>, dir: &Path) -> bool {
    if !valid_head(&dir.join("HEAD")) {
        return false;
    }
    let common = common_dir(env, dir).unwrap_or_else(|| dir.to_path_buf());
    let objects = match env("GIT_OBJECT_DIRECTORY") {
        Some(objects) => PathBuf::from(objects),
        None => common.join("objects"),
    };
    searchable(&objects) && searchable(&common.join("refs"))
}

/// `access(path, X_OK)`.
fn searchable(path: &Path) -> bool {
    os::searchable(path)
}

/// A `HEAD` git accepts while looking for a repository.
fn valid_head(path: &Path) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return false;
    };
    if meta.file_type().is_symlink() {
        return std::fs::read_link(path)
            .is_ok_and(|target| target.as_os_str().as_encoded_bytes().starts_with(b"refs/"));
    }
    let Ok(bytes) = std::fs::read(path) else {
        return false;
    };
    // Git looks at the first 255 bytes only.
    let head = &bytes[..bytes.len().min(255)];
    if let Some(rest) = head.strip_prefix(b"ref:") {
        let start = rest
            .iter()
            .position(|c| !c.is_ascii_whitespace())
            .unwrap_or(rest.len());
        return rest[start..].starts_with(b"refs/");
    }
    // A detached HEAD: a SHA-1 or SHA-256 object id in hex (40 or 64 digits first).
    head.len() >= 40 && head[..40].iter().all(u8::is_ascii_hexdigit)
}

/// The common directory of `git_dir`: `$GIT_COMMON_DIR`, or the path in its
/// `commondir` file (relative to `git_dir`, then resolved); `None` when neither is set.
fn common_dir(env: EnvFn<'_>, git_dir: &Path) -> Option<PathBuf> {
    if let Some(dir) = env("GIT_COMMON_DIR") {
        return Some(PathBuf::from(dir));
    }
    let bytes = std::fs::read(git_dir.join("commondir")).ok()?;
    let mut end = bytes.len();
    while end > 0 && matches!(bytes[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    let named = os::path_from_bytes(&bytes[..end]);
    let joined = if named.is_absolute() {
        named.to_path_buf()
    } else {
        git_dir.join(named)
    };
    Some(real_path(&joined).unwrap_or(joined))
}

/// Why a repository's config rules it out.
#[derive(Debug, PartialEq, Eq)]
enum FormatProblem {
    /// A version or extension git does not read: git ignores the repository with a
    /// warning giving this reason.
    Rejected(String),
    /// A config git cannot parse: git stops with this message.
    Unreadable(String),
}

/// Checks the repository's format version and extensions as git 2.47.3 does before it
/// reads the repository's config.
/// `shown` is the path as git names it in messages.
fn check_format(config: &Path, shown: &Path) -> Result<(), FormatProblem> {
    const V0_EXTENSIONS: [&str; 4] = ["noop", "preciousobjects", "partialclone", "worktreeconfig"];
    const V1_EXTENSIONS: [&str; 4] = [
        "noop-v1",
        "objectformat",
        "compatobjectformat",
        "refstorage",
    ];
    let Ok(bytes) = std::fs::read(config) else {
        return Ok(());
    };
    let entries = parse_config(&bytes).map_err(|e| {
        FormatProblem::Unreadable(format!(
            "bad config line {} in file {}",
            e.line,
            shown.display()
        ))
    })?;
    let mut version: Option<i64> = None;
    let mut unknown = Vec::new();
    let mut v1_only = Vec::new();
    for entry in &entries {
        if entry.key == "core.repositoryformatversion" {
            let value = entry.value.as_deref().unwrap_or("");
            version = Some(parse_git_int(value).ok_or_else(|| {
                let digits = value.trim_start_matches(['-', '+']);
                let reason = if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                    "out of range"
                } else {
                    "invalid unit"
                };
                FormatProblem::Unreadable(format!(
                    "bad numeric config value '{value}' for 'core.repositoryformatversion' in file {}: {reason}",
                    shown.display()
                ))
            })?);
        } else if let Some(ext) = entry.key.strip_prefix("extensions.") {
            if V0_EXTENSIONS.contains(&ext) {
                continue;
            }
            if V1_EXTENSIONS.contains(&ext) {
                v1_only.push(ext.to_string());
            } else {
                unknown.push(ext.to_string());
            }
        }
    }
    // Without a version key git forgets everything it read (a format-0 repository).
    let Some(version) = version else {
        return Ok(());
    };
    let list = |what: &str, names: &[String]| {
        let plural = if names.len() == 1 {
            format!("{what} found:")
        } else {
            format!("{}s found:", what)
        };
        names
            .iter()
            .fold(plural, |text, name| format!("{text}\n\t{name}"))
    };
    if version > 1 {
        return Err(FormatProblem::Rejected(format!(
            "Expected git repo version <= 1, found {version}"
        )));
    }
    if version >= 1 && !unknown.is_empty() {
        return Err(FormatProblem::Rejected(list(
            "unknown repository extension",
            &unknown,
        )));
    }
    if version == 0 && !v1_only.is_empty() {
        return Err(FormatProblem::Rejected(list(
            "repo version is 0, but v1-only extension",
            &v1_only,
        )));
    }
    Ok(())
}

/// Git's ownership rule: the `.git` file, the worktree and the git directory must all
/// belong to the current user, or `safe.directory` must name the repository.
fn valid_ownership(
    env: EnvFn<'_>,
    protected: &[ConfigEntry],
    gitfile: Option<&Path>,
    worktree: Option<&Path>,
    git_dir: &Path,
    cwd: &Path,
    warnings: &mut Vec<String>,
) -> bool {
    let assume_other = env_flag(env, "GIT_TEST_ASSUME_DIFFERENT_OWNER");
    if !assume_other
        && gitfile.is_none_or(|p| owned_by_current_user(env, p))
        && worktree.is_none_or(|p| owned_by_current_user(env, p))
        && owned_by_current_user(env, git_dir)
    {
        return true;
    }
    let Some(path) = real_path(worktree.unwrap_or(git_dir)) else {
        return false;
    };
    let path = path.as_os_str().as_encoded_bytes();
    let mut safe = false;
    for entry in protected.iter().filter(|e| e.key == "safe.directory") {
        let value = entry.value.as_deref().unwrap_or("");
        if value.is_empty() {
            safe = false;
            continue;
        }
        if value == "*" {
            safe = true;
            continue;
        }
        let Some(allowed) = super::home::expand_path(value, env) else {
            let warning = format!("failed to expand user dir in: '{value}'");
            if !warnings.contains(&warning) {
                warnings.push(warning);
            }
            continue;
        };
        if allowed.is_relative() && allowed.as_os_str() != "." {
            let warning = format!("safe.directory '{}' not absolute", allowed.display());
            if !warnings.contains(&warning) {
                warnings.push(warning);
            }
            continue;
        }
        let Some(allowed) = real_path(&cwd.join(allowed)) else {
            continue;
        };
        let allowed = allowed.as_os_str().as_encoded_bytes();
        if let Some(prefix) = allowed.strip_suffix(b"*").filter(|p| p.ends_with(b"/")) {
            if path.starts_with(prefix) {
                safe = true;
            }
        } else if path == allowed {
            safe = true;
        }
    }
    safe
}

/// Whether the path itself (not what a link points to) belongs to the effective user;
/// for root, a path of root's or of the user `sudo` ran as (`SUDO_UID`).
fn owned_by_current_user(env: EnvFn<'_>, path: &Path) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return false;
    };
    os::owned_by_effective_user(env, &meta)
}

/// Whether `safe.bareRepository` is `explicit` (the last valid value wins).
fn bare_repositories_explicit_only(protected: &[ConfigEntry], warnings: &mut Vec<String>) -> bool {
    let mut explicit = false;
    for entry in protected.iter().filter(|e| e.key == "safe.barerepository") {
        match entry.value.as_deref() {
            Some("explicit") => explicit = true,
            Some("all") => explicit = false,
            _ => {
                let source = match entry.scope {
                    ConfigScope::Command => "command-line config".to_string(),
                    scope => format!("{} config", scope.as_str()),
                };
                let warning = format!("unable to parse 'safe.barerepository' from {source}");
                if !warnings.contains(&warning) {
                    warnings.push(warning);
                }
            }
        }
    }
    explicit
}

/// A bare repository git still finds under `safe.bareRepository=explicit`: a `.git`
/// directory itself, or the git directory of a linked worktree or of a submodule.
fn is_implicit_bare(dir: &Path) -> bool {
    let text = dir.as_os_str().as_encoded_bytes();
    dir.file_name() == Some(OsStr::new(".git"))
        || contains(text, b"/.git/worktrees/")
        || contains(text, b"/.git/modules/")
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// A boolean environment variable; a value that is not a boolean counts as false.
fn env_flag(env: EnvFn<'_>, name: &str) -> bool {
    env(name).and_then(|v| parse_git_bool(&v)).unwrap_or(false)
}

/// Git's `realpath`: every link resolved; the last component may be missing.
pub(crate) fn real_path(path: &Path) -> Option<PathBuf> {
    let canonical = |p: &Path| std::fs::canonicalize(p).map(os::without_verbatim_prefix);
    match canonical(path) {
        Ok(p) => Some(p),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let name = path.file_name()?;
            let parent = path.parent()?;
            let parent = if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            };
            Some(canonical(parent).ok()?.join(name))
        }
        Err(_) => None,
    }
}

/// `path` made absolute the way git does it without resolving links: a relative path
/// is joined to `$PWD` when that names the same directory as `cwd`, else to `cwd`.
fn absolute_path(env: EnvFn<'_>, cwd: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        return path.to_path_buf();
    }
    let base = env("PWD")
        .filter(|pwd| Path::new(pwd) != cwd)
        .filter(
            |pwd| match (std::fs::metadata(pwd), std::fs::metadata(cwd)) {
                (Ok(a), Ok(b)) => os::same_file(&a, &b),
                _ => false,
            },
        )
        .map(PathBuf::from)
        .unwrap_or_else(|| cwd.to_path_buf());
    // Joined as text: git keeps a trailing `.` (`/repo.git/.`).
    let mut joined = base.into_os_string().into_encoded_bytes();
    if joined.last() != Some(&b'/') {
        joined.push(b'/');
    }
    joined.extend_from_slice(path.as_os_str().as_encoded_bytes());
    os::path_from_bytes(&joined)
}

/// What repository discovery asks of the operating system.
#[cfg(unix)]
mod os {
    use std::ffi::{CString, OsStr};
    use std::fs::Metadata;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    use std::path::{Path, PathBuf};

    use super::EnvFn;

    /// What separates the entries of `GIT_CEILING_DIRECTORIES`.
    pub(super) const PATH_LIST_SEPARATOR: char = ':';

    /// Whether git takes a path as absolute: it starts at the root.
    pub(super) fn is_absolute_text(path: &str) -> bool {
        path.starts_with('/')
    }

    /// A resolved path as git holds it (Unix: as it is).
    pub(super) fn without_verbatim_prefix(path: PathBuf) -> PathBuf {
        path
    }

    /// The path's bytes as git compares them (Unix: as they are).
    pub(super) fn slashed(path: &Path) -> Vec<u8> {
        path.as_os_str().as_bytes().to_vec()
    }

    /// A path from the bytes of a file (`gitdir:`, `commondir`) or of a joined path.
    pub(super) fn path_from_bytes(bytes: &[u8]) -> PathBuf {
        PathBuf::from(OsStr::from_bytes(bytes))
    }

    /// The device a file is on (discovery stops where it changes).
    pub(super) fn device(meta: &Metadata) -> u64 {
        meta.dev()
    }

    /// Whether two `stat` results are of the same file (device and inode).
    pub(super) fn same_file(a: &Metadata, b: &Metadata) -> bool {
        a.dev() == b.dev() && a.ino() == b.ino()
    }

    /// `access(path, X_OK)`.
    pub(super) fn searchable(path: &Path) -> bool {
        let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
            return false;
        };
        // SAFETY: `c` is a NUL-terminated path that lives across the call.
        unsafe { libc::access(c.as_ptr(), libc::X_OK) == 0 }
    }

    /// Whether `meta` belongs to the effective user; for root, to root or to the user
    /// `sudo` ran as (`SUDO_UID`).
    pub(super) fn owned_by_effective_user(env: EnvFn<'_>, meta: &Metadata) -> bool {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let mut euid = unsafe { libc::geteuid() };
        if euid == 0 {
            if meta.uid() == 0 {
                return true;
            }
            if let Some(id) = env("SUDO_UID")
                .filter(|v| !v.is_empty())
                .and_then(|v| v.parse::<u32>().ok())
            {
                euid = id;
            }
        }
        meta.uid() == euid
    }
}

/// What repository discovery asks of the operating system, as Git for Windows'
/// `compat/mingw.c` answers it.
#[cfg(windows)]
mod os {
    use std::fs::Metadata;
    use std::path::{Path, PathBuf};

    use super::EnvFn;

    /// What separates the entries of `GIT_CEILING_DIRECTORIES` (Git for Windows' `PATH_SEP`).
    pub(super) const PATH_LIST_SEPARATOR: char = ';';

    /// Whether Git for Windows takes a path as absolute: a drive letter and a separator
    /// (`C:/x`, `C:\x`), or a leading separator (`/x`, `\\server\share`).
    pub(super) fn is_absolute_text(path: &str) -> bool {
        let b = path.as_bytes();
        let is_sep = |c: u8| c == b'/' || c == b'\\';
        b.first().is_some_and(|&c| is_sep(c))
            || (b.len() > 2 && b[0].is_ascii_alphabetic() && b[1] == b':' && is_sep(b[2]))
    }

    /// A resolved path as Git for Windows' `real_path` gives it: without the `\\?\`
    /// prefix `std::fs::canonicalize` puts before every path (`\\?\UNC\` becomes `\\`).
    pub(super) fn without_verbatim_prefix(path: PathBuf) -> PathBuf {
        let text = path.to_string_lossy();
        if let Some(share) = text.strip_prefix(r"\\?\UNC\") {
            return PathBuf::from(format!(r"\\{share}"));
        }
        match text.strip_prefix(r"\\?\") {
            Some(local) => PathBuf::from(local),
            None => path,
        }
    }

    /// The path as Git for Windows holds it (its `getcwd` and `real_path` turn every
    /// backslash into `/`), for comparing paths by prefix.
    pub(super) fn slashed(path: &Path) -> Vec<u8> {
        path.to_string_lossy().replace('\\', "/").into_bytes()
    }

    /// A path from the bytes of a file (`gitdir:`, `commondir`): git writes them as
    /// UTF-8 on Windows.
    pub(super) fn path_from_bytes(bytes: &[u8]) -> PathBuf {
        PathBuf::from(String::from_utf8_lossy(bytes).into_owned())
    }

    /// Git for Windows' `stat` reports device 0 for every file: discovery never stops
    /// at a filesystem boundary there.
    pub(super) fn device(_meta: &Metadata) -> u64 {
        0
    }

    /// Git for Windows' `stat` has no device or inode numbers (both 0), and git then
    /// never takes `$PWD` for the current directory.
    pub(super) fn same_file(_a: &Metadata, _b: &Metadata) -> bool {
        false
    }

    /// Git for Windows' `access` ignores `X_OK`: the path must exist.
    pub(super) fn searchable(path: &Path) -> bool {
        std::fs::metadata(path).is_ok()
    }

    /// Git for Windows compares the owner's security identifier with the user's; that
    /// check is not made here: every repository counts as the user's own.
    pub(super) fn owned_by_effective_user(_env: EnvFn<'_>, _meta: &Metadata) -> bool {
        true
    }
}

fn lossy(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_git::Scratch;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[cfg(unix)]
    #[test]
    fn ceiling_is_the_deepest_proper_ancestor() {
        let env = env_of(&[("GIT_CEILING_DIRECTORIES", ":/a:/a/b/:rel:/a/b/c:/x")]);
        assert_eq!(ceiling_length(&env, b"/a/b/c"), 4);
        assert_eq!(ceiling_length(&env, b"/a/b/c/d"), 6);
        assert_eq!(ceiling_length(&env, b"/a/bc"), 2);
        assert_eq!(ceiling_length(&env, b"/"), -1);
        assert_eq!(ceiling_length(&env_of(&[]), b"/a"), -1);
        // "/" as a ceiling: every directory below the root is searched, the root is not.
        assert_eq!(
            ceiling_length(&env_of(&[("GIT_CEILING_DIRECTORIES", ":/")]), b"/a"),
            0
        );
    }

    /// Git for Windows: `;` between the entries, drive-letter paths, compared with `/`.
    #[cfg(windows)]
    #[test]
    fn ceiling_is_the_deepest_proper_ancestor() {
        let env = env_of(&[(
            "GIT_CEILING_DIRECTORIES",
            ";C:/a;C:\\a\\b\\;rel;C:/a/b/c;C:/x",
        )]);
        assert_eq!(ceiling_length(&env, b"C:/a/b/c"), 6);
        assert_eq!(ceiling_length(&env, b"C:/a/b/c/d"), 8);
        assert_eq!(ceiling_length(&env, b"C:/a/bc"), 4);
        assert_eq!(ceiling_length(&env_of(&[]), b"C:/a"), -1);
        // A `:` is part of a drive letter here, not a separator.
        let colon = env_of(&[("GIT_CEILING_DIRECTORIES", ":C:/a")]);
        assert_eq!(ceiling_length(&colon, b"C:/a/b"), -1);
    }

    #[cfg(windows)]
    #[test]
    fn resolved_paths_lose_the_verbatim_prefix() {
        let plain = |p: &str| os::without_verbatim_prefix(PathBuf::from(p));
        assert_eq!(plain(r"\\?\C:\a\b"), PathBuf::from(r"C:\a\b"));
        assert_eq!(
            plain(r"\\?\UNC\server\share\x"),
            PathBuf::from(r"\\server\share\x")
        );
        assert_eq!(plain(r"C:\a"), PathBuf::from(r"C:\a"));
        let s = Scratch::new();
        let real = real_path(&s.root).expect("the scratch directory resolves");
        assert!(!real.to_string_lossy().starts_with(r"\\?\"), "{real:?}");
    }

    #[test]
    fn heads_git_accepts() {
        let s = Scratch::new();
        let head = |text: &[u8]| {
            let path = s.root.join("HEAD");
            let _ = std::fs::remove_file(&path);
            std::fs::write(&path, text).unwrap();
            valid_head(&path)
        };
        assert!(head(b"ref: refs/heads/main\n"));
        assert!(head(b"ref:\t refs/x"));
        assert!(!head(b"ref: heads/main\n"));
        assert!(head(&[b'a'; 40]));
        assert!(!head(&[b'a'; 39]));
        assert!(!head(b""));
        #[cfg(unix)]
        {
            let link = s.root.join("LINK");
            std::os::unix::fs::symlink("refs/heads/main", &link).unwrap();
            assert!(valid_head(&link));
        }
        assert!(!valid_head(&s.root.join("missing")));
    }

    #[test]
    fn format_checks() {
        let s = Scratch::new();
        let check = |text: &str| {
            let path = s.root.join("config");
            std::fs::write(&path, text).unwrap();
            check_format(&path, Path::new(".git/config"))
        };
        assert_eq!(
            check("[core]\n\trepositoryformatversion = 1\n[extensions]\n\tobjectFormat = sha256\n"),
            Ok(())
        );
        assert_eq!(check("[extensions]\n\tweird = 1\n"), Ok(()));
        assert_eq!(
            check("[core]\nrepositoryformatversion = 0\n[extensions]\n\tworktreeConfig\n"),
            Ok(())
        );
        assert_eq!(
            check("[core]\nrepositoryformatversion = 1\n[extensions]\n\tweird = 1\n"),
            Err(FormatProblem::Rejected(
                "unknown repository extension found:\n\tweird".into()
            ))
        );
        assert_eq!(
            check("[core]\nrepositoryformatversion = 1x\n"),
            Err(FormatProblem::Unreadable(
                "bad numeric config value '1x' for 'core.repositoryformatversion' in file .git/config: invalid unit".into()
            ))
        );
        assert_eq!(
            check("[core\n"),
            Err(FormatProblem::Unreadable(
                "bad config line 1 in file .git/config".into()
            ))
        );
        assert_eq!(check_format(&s.root.join("none"), Path::new("x")), Ok(()));
    }

    #[test]
    fn implicit_bare_directories() {
        assert!(is_implicit_bare(Path::new("/r/.git")));
        assert!(is_implicit_bare(Path::new("/r/.git/worktrees/wt")));
        assert!(is_implicit_bare(Path::new("/r/.git/modules/m")));
        assert!(!is_implicit_bare(Path::new("/r/b.git")));
    }

    #[test]
    fn real_path_allows_one_missing_component() {
        let s = Scratch::new();
        let root = os::without_verbatim_prefix(std::fs::canonicalize(&s.root).unwrap());
        assert_eq!(real_path(&s.root.join("new")), Some(root.join("new")));
        assert_eq!(real_path(&s.root.join("new/deeper")), None);
    }
}
