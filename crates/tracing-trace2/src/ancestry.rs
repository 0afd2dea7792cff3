//! The names of this process's ancestors, for the `cmd_ancestry` line.
//!
//! On Linux git reads `/proc/<pid>/stat` of its parent, takes the command name (`comm`,
//! the kernel's short name of at most 15 bytes) and the parent's parent pid from it, and
//! repeats until the kernel reports parent pid 0. The names are listed nearest parent
//! first; when nothing can be read the line is left out. Other platforms have no
//! ancestry here, as in git 2.47.3 outside Linux and Windows.

#[cfg(target_os = "linux")]
use std::path::Path;

/// The ancestry of the current process, nearest parent first (empty when unknown).
pub fn ancestry() -> Vec<String> {
    #[cfg(target_os = "linux")]
    {
        ancestry_from(Path::new("/proc"), std::os::unix::process::parent_id())
    }
    #[cfg(not(target_os = "linux"))]
    {
        Vec::new()
    }
}

/// The longest chain followed: a guard against a loop in a damaged or fake `/proc`.
#[cfg(target_os = "linux")]
const MAX_ANCESTORS: usize = 4096;

/// Walks up from `pid` through `<proc>/<pid>/stat` files.
#[cfg(target_os = "linux")]
pub(crate) fn ancestry_from(proc_root: &Path, pid: u32) -> Vec<String> {
    let mut names = Vec::new();
    let mut pid = pid;
    while pid != 0 && names.len() < MAX_ANCESTORS {
        let Ok(stat) = std::fs::read(proc_root.join(pid.to_string()).join("stat")) else {
            break;
        };
        let Some((name, parent)) = parse_stat(&stat) else {
            break;
        };
        names.push(name);
        pid = parent;
    }
    names
}

/// The command name and parent pid of one `stat` line: `<pid> (<comm>) <state> <ppid> …`.
/// The name may itself hold spaces and parentheses, so it runs from the first `(` to
/// the last `)`.
#[cfg(any(target_os = "linux", test))]
fn parse_stat(stat: &[u8]) -> Option<(String, u32)> {
    let open = stat.iter().position(|&b| b == b'(')?;
    let close = stat.iter().rposition(|&b| b == b')')?;
    if close < open {
        return None;
    }
    let name = String::from_utf8_lossy(&stat[open + 1..close]).into_owned();
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let _state = fields.next()?;
    let ppid = fields.next()?.parse::<i64>().ok()?;
    // A negative parent cannot be walked: stop after this name.
    Some((name, u32::try_from(ppid).unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_with_spaces_quotes_and_parentheses() {
        // The renamed parent of samples/ancestry-quoting.*: `my proc (x)'q`.
        let stat = b"4242 (my proc (x)'q) S 4100 4242 4100 0 -1 4194560 120 0 0 0\n";
        assert_eq!(parse_stat(stat), Some(("my proc (x)'q".to_owned(), 4100)));
    }

    #[test]
    fn rejects_damaged_lines() {
        assert_eq!(parse_stat(b""), None);
        assert_eq!(parse_stat(b"12 no-parens S 1"), None);
        assert_eq!(parse_stat(b"12 )odd( S 1"), None);
        assert_eq!(parse_stat(b"12 (cut)"), None);
        assert_eq!(parse_stat(b"12 (x) S notanumber"), None);
        assert_eq!(parse_stat(b"12 (x) S -1"), Some(("x".to_owned(), 0)));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn walks_a_fake_proc_tree_until_pid_zero() {
        let root = std::env::temp_dir().join(format!("t2-ancestry-{}", std::process::id()));
        let write = |pid: u32, line: &str| {
            let dir = root.join(pid.to_string());
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("stat"), line).unwrap();
        };
        write(30, "30 (cap.sh) S 20 0 0");
        write(20, "20 (bash) S 1 0 0");
        write(1, "1 (process_api) S 0 0 0");
        assert_eq!(ancestry_from(&root, 30), ["cap.sh", "bash", "process_api"]);
        // A missing link ends the walk with what was read so far.
        write(40, "40 (orphan) S 99 0 0");
        assert_eq!(ancestry_from(&root, 40), ["orphan"]);
        assert!(ancestry_from(&root, 0).is_empty());
        // A loop stops at the guard instead of running forever.
        write(50, "50 (loop) S 50 0 0");
        assert_eq!(ancestry_from(&root, 50).len(), MAX_ANCESTORS);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn real_ancestry_names_our_parent() {
        let names = ancestry();
        assert!(!names.is_empty());
        let ppid = std::os::unix::process::parent_id();
        let stat = std::fs::read(format!("/proc/{ppid}/stat")).unwrap();
        assert_eq!(names[0], parse_stat(&stat).unwrap().0);
    }
}
