//! A target naming a file: opened for appending, created if missing.
//!
//! `O_APPEND` makes each one-call line land whole at the end even when many threads or
//! processes share the file.

use std::fs::OpenOptions;
use std::path::Path;

use super::warn::{Reporter, strerror};
use super::{OpenSettings, Opened};

/// Opens `path` with `O_WRONLY|O_APPEND|O_CREAT` (mode 0666 before umask). On Windows a
/// named pipe path is opened for plain writing, as Git for Windows opens it (appending
/// is a different access right on a pipe, one a client does not get), and only if the
/// pipe exists: `OPEN_EXISTING`, the disposition Windows documents for pipe clients
/// (git's `O_CREAT` asks for `OPEN_ALWAYS`, which Windows takes for a pipe and wine
/// does not).
///
/// On Unix `path` may name a directory (the caller did not look, to spare every process
/// a `stat`): the open then fails with `EISDIR` and the directory target opens a file
/// in it, as git does after its `stat`. `EISDIR` also comes for a path that ends in a
/// slash and names nothing; that is no directory, and fails as in git.
pub(crate) fn open_file(path: &Path, settings: &OpenSettings, report: &mut Reporter<'_>) -> Opened {
    let mut options = OpenOptions::new();
    if cfg!(windows) && path.to_str().is_some_and(crate::is_named_pipe_path) {
        options.write(true);
    } else {
        options.append(true).create(true);
    }
    match options.open(path) {
        Ok(file) => Opened::Sink(crate::os::opened_file(file)),
        #[cfg(unix)]
        Err(err) if err.raw_os_error() == Some(libc::EISDIR) && path.is_dir() => {
            super::dir::open_in_dir(path, settings, report)
        }
        Err(err) => {
            report.debug(&format!(
                "trace2: could not open '{}' for '{}' tracing: {}",
                path.display(),
                settings.env_name,
                strerror(&err)
            ));
            Opened::Disabled
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_collect(path: &Path, debug: bool) -> (Opened, Vec<String>) {
        let mut seen = Vec::new();
        let mut emit = |m: &str| seen.push(m.to_owned());
        let settings = OpenSettings {
            env_name: "GIT_TRACE2_EVENT",
            dst_debug: debug,
            max_files: 0,
            sid_component: "20240101T000000.000000Z-Habc-P1".into(),
        };
        let opened = open_file(path, &settings, &mut Reporter::new(debug, &mut emit));
        (opened, seen)
    }

    fn sink(opened: Opened) -> Box<dyn crate::Sink> {
        match opened {
            Opened::Sink(s) => s,
            _ => panic!("not a plain sink"),
        }
    }

    #[test]
    fn two_writers_append() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.txt");
        std::fs::write(&path, "old\n").unwrap();
        let a = sink(open_collect(&path, true).0);
        let b = sink(open_collect(&path, true).0);
        a.write_line(b"a1\n").unwrap();
        b.write_line(b"b1\n").unwrap();
        a.write_line(b"a2\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\na1\nb1\na2\n");
    }

    #[cfg(unix)]
    #[test]
    fn unopenable_path_warns_like_git() {
        for bad in ["/dev/null/x", "/proc/x"] {
            let (opened, seen) = open_collect(Path::new(bad), true);
            assert!(matches!(opened, Opened::Disabled));
            if !warns_like_git(bad, &seen) {
                return;
            }
        }
    }

    /// Whether git is here to compare with; if so, asserts that `seen`, as printed, is
    /// what git prints for `dest` as `GIT_TRACE2_EVENT` with destination debugging.
    #[cfg(unix)]
    fn warns_like_git(dest: &str, seen: &[String]) -> bool {
        let Some(git) = crate::test_support::git_stderr(&[
            ("GIT_TRACE2_EVENT", dest),
            ("GIT_TRACE2_DST_DEBUG", "1"),
        ]) else {
            return false;
        };
        let ours: Vec<u8> = seen
            .iter()
            .flat_map(|m| crate::warn::format_warning(m))
            .collect();
        assert_eq!(
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&git)
        );
        true
    }

    /// A directory is found by the failed open (`EISDIR`), not by a look before it: the
    /// file is made inside, named by the session id, as git names it.
    #[cfg(unix)]
    #[test]
    fn a_directory_gets_a_file_inside() {
        let dir = tempfile::tempdir().unwrap();
        let (opened, seen) = open_collect(dir.path(), true);
        sink(opened).write_line(b"x\n").unwrap();
        assert!(seen.is_empty(), "{seen:?}");
        let inside = dir.path().join("20240101T000000.000000Z-Habc-P1");
        assert_eq!(std::fs::read_to_string(inside).unwrap(), "x\n");
    }

    /// A path that ends in a slash and names nothing also fails with `EISDIR`: it is no
    /// directory, and fails with git's warning.
    #[cfg(unix)]
    #[test]
    fn a_missing_path_with_a_slash_fails_like_git() {
        let dir = tempfile::tempdir().unwrap();
        let missing = format!("{}/missing/", dir.path().display());
        let (opened, seen) = open_collect(Path::new(&missing), true);
        assert!(matches!(opened, Opened::Disabled));
        assert!(!Path::new(&missing).exists());
        if !warns_like_git(&missing, &seen) {
            assert_eq!(seen.len(), 1, "{seen:?}");
        }
    }

    #[test]
    fn silent_without_dst_debug() {
        let missing = tempfile::tempdir().unwrap().path().join("gone/x");
        let (opened, seen) = open_collect(&missing, false);
        assert!(matches!(opened, Opened::Disabled));
        assert!(seen.is_empty());
    }
}
