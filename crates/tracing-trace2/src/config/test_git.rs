//! Test support: scratch directories and runs of the real git in a controlled
//! environment, so settings and `def_param` listings can be compared with git's.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A scratch directory removed on drop; `work` inside it is a cwd outside any repo.
pub(crate) struct Scratch {
    pub root: PathBuf,
}

impl Scratch {
    pub fn new() -> Scratch {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let root = std::env::temp_dir().join(format!("tt2-config-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("work")).unwrap();
        std::fs::create_dir_all(root.join("home")).unwrap();
        Scratch { root }
    }

    /// Path of `rel` inside the scratch directory, as a string.
    pub fn path(&self, rel: &str) -> String {
        self.root.join(rel).to_string_lossy().into_owned()
    }

    /// Writes `text` to `rel`, creating parent directories; `@` in `text` stands for the
    /// scratch root so configs can name files inside it.
    pub fn write(&self, rel: &str, text: &str) -> String {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text.replace('@', &self.root.to_string_lossy())).unwrap();
        path.to_string_lossy().into_owned()
    }

    /// The base environment: HOME inside, a ceiling so no repository is found.
    pub fn env(&self, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        env.insert("HOME".to_string(), self.path("home"));
        env.insert(
            "GIT_CEILING_DIRECTORIES".to_string(),
            self.root.to_string_lossy().into_owned(),
        );
        env.insert(
            "PATH".to_string(),
            "/usr/local/bin:/usr/bin:/bin".to_string(),
        );
        for (k, v) in extra {
            env.insert(k.to_string(), v.replace('@', &self.root.to_string_lossy()));
        }
        env
    }

    /// Runs `git version` in `work` with exactly `env`.
    pub fn git(&self, env: &BTreeMap<String, String>) -> Output {
        self.git_in("work", &["version"], env)
    }

    /// Runs git with `args` in `rel` (inside the scratch directory) with exactly `env`.
    pub fn git_in(&self, rel: &str, args: &[&str], env: &BTreeMap<String, String>) -> Output {
        Command::new(git_binary())
            .args(args)
            .current_dir(self.root.join(rel))
            .env_clear()
            .envs(env)
            .output()
            .unwrap()
    }

    /// Runs git with `args` in `rel` and panics unless it succeeds.
    #[cfg(unix)]
    pub fn git_ok(&self, rel: &str, args: &[&str], env: &BTreeMap<String, String>) {
        let out = self.git_in(rel, args, env);
        assert!(
            out.status.success(),
            "git {args:?} in {rel}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Reads `rel` if it exists.
    pub fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.root.join(rel)).ok()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// The reference git: /usr/local/bin/git (2.47.3 on the project machines), else `git`.
pub(crate) fn git_binary() -> PathBuf {
    tracing_trace2_test_support::git::reference_git()
}

/// An environment lookup over `env`, for `Settings::load`.
pub(crate) fn lookup(env: &BTreeMap<String, String>) -> impl Fn(&str) -> Option<String> + '_ {
    move |name| env.get(name).cloned()
}

/// git's stderr lines without the `error: ` / `fatal: ` / `warning: ` prefix.
pub(crate) fn stderr_messages(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(|l| {
            ["error: ", "fatal: ", "warning: "]
                .iter()
                .find_map(|p| l.strip_prefix(p))
                .unwrap_or(l)
                .to_string()
        })
        .collect()
}
