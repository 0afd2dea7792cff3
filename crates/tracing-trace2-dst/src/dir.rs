//! A target naming a directory: one new file per process, named by the SID, and the
//! optional cap on the number of files (`GIT_TRACE2_MAX_FILES`) with its sentinel.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use super::warn::{Reporter, strerror};
use super::{OpenSettings, Opened};

/// The file whose presence tells every later process that the directory is full.
pub const DISCARD_SENTINEL: &str = "git-trace2-discard";

/// How many names git tries: the SID itself, then `.1` to `.9`.
const NAME_ATTEMPTS: u32 = 10;

/// Opens a new trace file in `dir` (spec 7.3, 7.4).
pub(crate) fn open_in_dir(
    dir: &Path,
    settings: &OpenSettings,
    report: &mut Reporter<'_>,
) -> Opened {
    let env_name = settings.env_name;
    let with_slash = |name: &str| -> PathBuf {
        let mut joined = OsString::from(dir.as_os_str());
        if !dir
            .as_os_str()
            .as_encoded_bytes()
            .last()
            .is_some_and(|&last| is_dir_separator(last))
        {
            joined.push("/");
        }
        joined.push(name);
        PathBuf::from(joined)
    };
    let sid = settings
        .sid_component
        .rsplit('/')
        .next()
        .unwrap_or_default();
    let base = with_slash(sid);
    let could_not_open = |report: &mut Reporter<'_>, err: &io::Error| {
        report.debug(&format!(
            "trace2: could not open '{}' for '{env_name}' tracing: {}",
            base.display(),
            strerror(err)
        ));
    };

    if settings.max_files > 0 {
        let sentinel = with_slash(DISCARD_SENTINEL);
        if std::fs::metadata(&sentinel).is_ok() {
            report.debug(&format!(
                "trace2: not opening {env_name} trace file due to too many files in target directory {}",
                dir.display()
            ));
            return Opened::Disabled;
        }
        if count_entries(&with_slash(""), settings.max_files) >= settings.max_files {
            return match create_new(&sentinel) {
                Ok(file) => Opened::Sentinel(crate::os::opened_file(file)),
                Err(err) => {
                    could_not_open(report, &err);
                    Opened::Disabled
                }
            };
        }
    }

    let mut last_err = io::Error::from(io::ErrorKind::AlreadyExists);
    for attempt in 0..NAME_ATTEMPTS {
        let path = if attempt == 0 {
            base.clone()
        } else {
            let mut name = OsString::from(base.as_os_str());
            name.push(format!(".{attempt}"));
            PathBuf::from(name)
        };
        match create_new(&path) {
            Ok(file) => return Opened::Sink(crate::os::opened_file(file)),
            Err(err) => last_err = err,
        }
    }
    could_not_open(report, &last_err);
    Opened::Disabled
}

/// `O_WRONLY|O_CREAT|O_EXCL`, mode 0666 before umask.
fn create_new(path: &Path) -> io::Result<File> {
    OpenOptions::new().write(true).create_new(true).open(path)
}

/// Whether git takes `byte` for a directory separator here (`\\` too on Windows).
fn is_dir_separator(byte: u8) -> bool {
    byte == b'/' || (cfg!(windows) && byte == b'\\')
}

/// Counts the entries of `dir` as git's `readdir` sees them, `.` and `..` included,
/// stopping at `limit`. A directory that cannot be read counts as empty. On Windows
/// std's listing leaves out `.` and `..`, which Git for Windows' `readdir` returns.
#[cfg(not(unix))]
fn count_entries(dir: &Path, limit: u32) -> u32 {
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            let listed = entries.take(limit as usize).count() as u32;
            (listed + 2).min(limit)
        }
        Err(_) => 0,
    }
}

/// Counts what `readdir` returns, `.` and `..` included (as git does), stopping at
/// `limit`. A directory that cannot be read counts as empty.
#[cfg(unix)]
fn count_entries(dir: &Path, limit: u32) -> u32 {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    let Ok(c_dir) = CString::new(dir.as_os_str().as_bytes()) else {
        return 0;
    };
    // SAFETY: `c_dir` is a valid C string; the stream is read only while open and
    // closed exactly once.
    unsafe {
        let stream = libc::opendir(c_dir.as_ptr());
        if stream.is_null() {
            return 0;
        }
        let mut count = 0;
        while count < limit && !libc::readdir(stream).is_null() {
            count += 1;
        }
        libc::closedir(stream);
        count
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::git_version;
    use crate::warn::format_warning;

    fn settings(sid: &str, max_files: u32) -> OpenSettings {
        OpenSettings {
            env_name: "GIT_TRACE2_EVENT",
            dst_debug: true,
            max_files,
            sid_component: sid.to_owned(),
        }
    }

    fn open_collect(dir: &Path, settings: &OpenSettings) -> (Opened, Vec<u8>) {
        let mut seen = Vec::new();
        let mut emit = |m: &str| seen.extend(format_warning(m));
        let opened = open_in_dir(
            dir,
            settings,
            &mut Reporter::new(settings.dst_debug, &mut emit),
        );
        (opened, seen)
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    const SID: &str = "20261121T232339.171924Z-H0a7c9cdf-P00003adb";

    #[test]
    fn file_named_by_last_sid_component() {
        let dir = tempfile::tempdir().unwrap();
        let (opened, seen) = open_collect(dir.path(), &settings(&format!("parent/{SID}"), 0));
        let Opened::Sink(sink) = opened else {
            panic!("no sink")
        };
        sink.write_line(b"line\n").unwrap();
        assert!(seen.is_empty());
        assert_eq!(names(dir.path()), [SID]);
        assert_eq!(std::fs::read(dir.path().join(SID)).unwrap(), b"line\n");
    }

    #[test]
    fn collisions_use_suffixes_then_give_up() {
        let dir = tempfile::tempdir().unwrap();
        // A trailing slash must not double up.
        let with_slash = PathBuf::from(format!("{}/", dir.path().display()));
        for expected in 0..NAME_ATTEMPTS {
            let (opened, _) = open_collect(&with_slash, &settings(SID, 0));
            assert!(matches!(opened, Opened::Sink(_)));
            let name = if expected == 0 {
                SID.to_owned()
            } else {
                format!("{SID}.{expected}")
            };
            assert!(dir.path().join(name).exists());
        }
        let (opened, seen) = open_collect(&with_slash, &settings(SID, 0));
        assert!(matches!(opened, Opened::Disabled));
        assert_eq!(
            String::from_utf8(seen).unwrap(),
            format!(
                "warning: trace2: could not open '{}/{SID}' for 'GIT_TRACE2_EVENT' tracing: File exists\n",
                dir.path().display()
            )
        );
        assert_eq!(names(dir.path()).len(), NAME_ATTEMPTS as usize);
    }

    #[cfg(unix)]
    #[test]
    fn uncreatable_file_warns_like_git() {
        // /proc/self is a directory in which nothing can be created, even by root.
        for (dir, max_files) in [("/proc/self", "0"), ("/proc/self/", "5")] {
            let mut s = settings("SID", max_files.parse().unwrap());
            let (opened, ours) = open_collect(Path::new(dir), &s);
            assert!(matches!(opened, Opened::Disabled));
            s.dst_debug = false;
            assert!(open_collect(Path::new(dir), &s).1.is_empty());
            let env = [
                ("GIT_TRACE2_EVENT", dir),
                ("GIT_TRACE2_MAX_FILES", max_files),
                ("GIT_TRACE2_DST_DEBUG", "1"),
            ];
            let Some(git) = git_version(&env) else { return };
            // Mask git's SID, the only part that must differ.
            let git = String::from_utf8(git.stderr).unwrap();
            let start = git.find("/proc/self/").unwrap() + "/proc/self/".len();
            let end = start + git[start..].find('\'').unwrap();
            let masked = format!("{}SID{}", &git[..start], &git[end..]);
            assert_eq!(String::from_utf8(ours).unwrap(), masked);
        }
    }

    /// Four processes into an empty directory with a cap of 5, then a fifth: what our
    /// open does must match what real git does in a directory of its own.
    #[test]
    fn max_files_matches_git() {
        let ours_dir = tempfile::tempdir().unwrap();
        let git_dir = tempfile::tempdir().unwrap();
        let mut kinds = Vec::new();
        for run in 0..5 {
            let sid = format!("{SID}{run}");
            let (opened, ours_err) = open_collect(ours_dir.path(), &settings(&sid, 5));
            let kind = match &opened {
                Opened::Sink(_) => "file",
                Opened::Sentinel(_) => "sentinel",
                Opened::Disabled => "disabled",
            };
            if let Opened::Sink(s) | Opened::Sentinel(s) = &opened {
                s.write_line(b"x\n").unwrap();
            }
            kinds.push(kind);
            let env = [
                ("GIT_TRACE2_EVENT", git_dir.path().to_str().unwrap()),
                ("GIT_TRACE2_MAX_FILES", "5"),
                ("GIT_TRACE2_DST_DEBUG", "1"),
            ];
            // Where there is no git to run, our side is still checked below.
            let Some(git) = git_version(&env) else {
                continue;
            };
            let git_err = String::from_utf8(git.stderr).unwrap();
            let ours_err = String::from_utf8(ours_err).unwrap().replace(
                ours_dir.path().to_str().unwrap(),
                git_dir.path().to_str().unwrap(),
            );
            assert_eq!(ours_err, git_err, "run {run}");
            assert_eq!(
                names(ours_dir.path()).len(),
                names(git_dir.path()).len(),
                "run {run}"
            );
            if run == 4 {
                assert!(names(git_dir.path()).contains(&DISCARD_SENTINEL.to_owned()));
            }
        }
        assert_eq!(kinds, ["file", "file", "file", "sentinel", "disabled"]);
        assert_eq!(
            std::fs::read(ours_dir.path().join(DISCARD_SENTINEL)).unwrap(),
            b"x\n"
        );
    }

    #[test]
    fn sentinel_variant_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        // An empty directory already has `.` and `..`: a cap of 2 is reached at once.
        let (opened, seen) = open_collect(dir.path(), &settings(SID, 2));
        assert!(matches!(opened, Opened::Sentinel(_)));
        assert!(seen.is_empty());
        assert_eq!(names(dir.path()), [DISCARD_SENTINEL]);
    }
}
