//! Paths as git expands them in config values: `~/…` from `$HOME`, `~user/…` from the
//! password file. Below the modules that read config (`condition`, `discover`,
//! `sources`), which all need it.

use std::path::PathBuf;

use super::EnvFn;

/// A path value as git expands it (`~` forms); `None` when `~` cannot be expanded.
pub(crate) fn expand_path(value: &str, env: EnvFn<'_>) -> Option<PathBuf> {
    if value.starts_with('~') {
        expand_tilde(value, env)
    } else {
        Some(PathBuf::from(value))
    }
}

/// Expands `~/…` with `$HOME` and `~user/…` with that user's home from the password
/// file; `None` when that is impossible (git then dies).
pub(crate) fn expand_tilde(value: &str, env: EnvFn<'_>) -> Option<PathBuf> {
    let rest = &value[1..];
    let (user, tail) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let home = if user.is_empty() {
        env("HOME")?
    } else {
        home_of_user(user)?
    };
    Some(PathBuf::from(format!("{home}{tail}")))
}

/// Looks `user` up in /etc/passwd (name:password:uid:gid:gecos:home:shell).
pub(crate) fn home_of_user(user: &str) -> Option<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.len() >= 6 && fields[0] == user).then(|| fields[5].to_string())
    })
}
