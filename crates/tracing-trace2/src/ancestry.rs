//! The names of this process's ancestors, for the `cmd_ancestry` line.
//!
//! On Linux git reads `/proc/<pid>/stat` of its parent, takes the command name (`comm`,
//! the kernel's short name of at most 15 bytes) and the parent's parent pid from it, and
//! repeats until the kernel reports parent pid 0. The names are listed nearest parent
//! first; when nothing can be read the line is left out.
//!
//! On Windows the names are the executables' file names from one process snapshot
//! (`bash.exe`), walked as Git for Windows walks them (see `walk_windows`): git writes
//! them as `data_json` `windows/ancestry` (category `process`, a JSON array of the
//! names, only when there is at least one) and, right after it since git 2.54, as
//! `cmd_ancestry`; we write both, in that order (see [`windows_ancestry_json`]). On macOS (since git 2.54) the names are the kernel's
//! short process names, parent first, at most 10 (see `walk_macos`); macOS is
//! type-checked here, never run. Other platforms have no ancestry.

#[cfg(target_os = "linux")]
use std::path::Path;

/// The ancestry of the current process, nearest parent first (empty when unknown).
pub fn ancestry() -> Vec<String> {
    #[cfg(target_os = "linux")]
    {
        ancestry_from(Path::new("/proc"), std::os::unix::process::parent_id())
    }
    #[cfg(windows)]
    {
        windows::ancestry()
    }
    #[cfg(target_os = "macos")]
    {
        walk_macos(std::os::unix::process::parent_id(), macos::process_info)
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
    {
        Vec::new()
    }
}

/// The most ancestors git lists on macOS.
#[cfg(any(target_os = "macos", test))]
const MACOS_LIMIT: usize = 10;

/// Git's walk on macOS: from the parent up, each process's short name while the pid
/// is positive, its details can be read (`lookup`) and fewer than [`MACOS_LIMIT`] names
/// are listed; a parent pid of 0, or one equal to the process's own, ends it.
#[cfg(any(target_os = "macos", test))]
fn walk_macos(parent: u32, lookup: impl Fn(u32) -> Option<(String, u32)>) -> Vec<String> {
    let mut names = Vec::new();
    let mut pid = parent;
    while pid > 0 && names.len() < MACOS_LIMIT {
        let Some((name, next)) = lookup(pid) else {
            break;
        };
        names.push(name);
        if next == pid {
            break;
        }
        pid = next;
    }
    names
}

/// A process's short name and parent pid, from the kernel.
#[cfg(target_os = "macos")]
mod macos {
    /// The short name (the kernel's `p_comm`, at most 16 bytes) and parent pid of `pid`,
    /// from `proc_pidinfo(PROC_PIDTBSDINFO)`, which reports the same fields as the
    /// `sysctl(KERN_PROC_PID)` git reads.
    pub(super) fn process_info(pid: u32) -> Option<(String, u32)> {
        let pid = libc::c_int::try_from(pid).ok()?;
        // SAFETY: `proc_bsdinfo` is plain data; all zeros is a valid value for it.
        let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::proc_bsdinfo>() as libc::c_int;
        // SAFETY: the buffer is `info`, valid for `size` bytes.
        let got = unsafe {
            libc::proc_pidinfo(pid, libc::PROC_PIDTBSDINFO, 0, (&raw mut info).cast(), size)
        };
        if got != size {
            return None;
        }
        let comm: Vec<u8> = info
            .pbi_comm
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        Some((String::from_utf8_lossy(&comm).into_owned(), info.pbi_ppid))
    }
}

/// The most processes Git for Windows looks at, this one included.
#[cfg(any(windows, test))]
const WINDOWS_LIMIT: usize = 10;

/// Git for Windows' walk up the parent links from `start` (this process): `lookup`
/// gives a process's executable name and parent pid, or `None` when the process is not
/// in the snapshot (it exited), which ends the walk. This process's own name is left
/// out. A pid seen before (pids are reused, so a parent link can loop) adds `(cycle)`
/// and ends it; a walk that reached [`WINDOWS_LIMIT`] processes adds `(truncated)`.
#[cfg(any(windows, test))]
fn walk_windows(start: u32, lookup: impl Fn(u32) -> Option<(String, u32)>) -> Vec<String> {
    let mut names = Vec::new();
    let mut seen: Vec<u32> = Vec::with_capacity(WINDOWS_LIMIT);
    let mut pid = start;
    while let Some((name, parent)) = lookup(pid) {
        if !seen.is_empty() {
            names.push(name);
        }
        if seen.contains(&pid) {
            names.push("(cycle)".to_owned());
            break;
        }
        if seen.len() == WINDOWS_LIMIT {
            names.push("(truncated)".to_owned());
            break;
        }
        seen.push(pid);
        pid = parent;
    }
    names
}

/// The process snapshot of Windows' Tool Help functions.
#[cfg(windows)]
mod windows {
    use std::ffi::c_void;

    /// `TH32CS_SNAPPROCESS`.
    const SNAP_PROCESS: u32 = 0x2;
    /// `MAX_PATH`.
    const MAX_PATH: usize = 260;

    /// `PROCESSENTRY32W`.
    #[repr(C)]
    struct ProcessEntry {
        size: u32,
        usage: u32,
        process_id: u32,
        default_heap_id: usize,
        module_id: u32,
        threads: u32,
        parent_process_id: u32,
        priority_base: i32,
        flags: u32,
        exe_file: [u16; MAX_PATH],
    }

    #[link(name = "kernel32")]
    unsafe extern "system" {
        fn CreateToolhelp32Snapshot(flags: u32, process_id: u32) -> *mut c_void;
        fn Process32FirstW(snapshot: *mut c_void, entry: *mut ProcessEntry) -> i32;
        fn Process32NextW(snapshot: *mut c_void, entry: *mut ProcessEntry) -> i32;
        fn CloseHandle(handle: *mut c_void) -> i32;
    }

    /// The executable names of this process's ancestors, nearest parent first.
    pub(super) fn ancestry() -> Vec<String> {
        // SAFETY: a snapshot of all processes; checked for failure (-1) below.
        let snapshot = unsafe { CreateToolhelp32Snapshot(SNAP_PROCESS, 0) };
        if snapshot as isize == -1 || snapshot.is_null() {
            return Vec::new();
        }
        // Every process of the snapshot, read once.
        let mut processes = Vec::new();
        // SAFETY: `ProcessEntry` is plain data; all zeros is a valid value for it.
        let mut entry: ProcessEntry = unsafe { std::mem::zeroed() };
        entry.size = std::mem::size_of::<ProcessEntry>() as u32;
        // SAFETY: `snapshot` is open and `entry` is a `PROCESSENTRY32W` whose size field
        // is set, as the functions require; the snapshot is closed once, after the loop.
        unsafe {
            let mut more = Process32FirstW(snapshot, &mut entry) != 0;
            while more {
                let len = entry
                    .exe_file
                    .iter()
                    .position(|&c| c == 0)
                    .unwrap_or(MAX_PATH);
                let name = String::from_utf16_lossy(&entry.exe_file[..len]);
                processes.push((entry.process_id, name, entry.parent_process_id));
                more = Process32NextW(snapshot, &mut entry) != 0;
            }
            CloseHandle(snapshot);
        }
        super::walk_windows(std::process::id(), |pid| {
            processes
                .iter()
                .find(|(id, _, _)| *id == pid)
                .map(|(_, name, parent)| (name.clone(), *parent))
        })
    }
}

/// The value of Git for Windows' `data_json` `windows/ancestry` line (category
/// `process`): the ancestors' names as a JSON array of strings, nearest parent first,
/// the same names as `cmd_ancestry`'s.
#[cfg(any(windows, test))]
pub(crate) fn windows_ancestry_json<S: AsRef<str>>(names: &[S]) -> serde_json::Value {
    serde_json::Value::Array(
        names
            .iter()
            .map(|name| serde_json::Value::String(name.as_ref().to_owned()))
            .collect(),
    )
}

/// The longest chain followed: a guard against a loop in a damaged or fake `/proc`.
#[cfg(target_os = "linux")]
const MAX_ANCESTORS: usize = 4096;

/// Walks up from `pid` through `<proc>/<pid>/stat` files.
#[cfg(target_os = "linux")]
pub(crate) fn ancestry_from(proc_root: &Path, pid: u32) -> Vec<String> {
    let mut names = Vec::new();
    let mut pid = pid;
    // One buffer for every file: each costs an `open` and one `read` of the whole line
    // (`std::fs::read` adds a `statx` and reads a procfs file, whose size shows as 0, in
    // five growing pieces).
    let mut stat = Vec::with_capacity(1024);
    // Buffers for the path too (`Path::join` makes two each time).
    let mut path = std::path::PathBuf::new();
    let mut tail = String::new();
    while pid != 0 && names.len() < MAX_ANCESTORS {
        use std::fmt::Write as _;
        tail.clear();
        let _ = write!(tail, "/{pid}/stat");
        let text = path.as_mut_os_string();
        text.clear();
        text.push(proc_root.as_os_str());
        text.push(&tail);
        if read_line(&path, &mut stat).is_err() {
            break;
        }
        let Some((name, parent)) = parse_stat(&stat) else {
            break;
        };
        names.push(name);
        pid = parent;
    }
    names
}

/// Reads the one-line file at `path` into `buf` (emptied first) with plain `read` calls,
/// until its end or the end of its line. A procfs `stat` file is made whole by its first
/// `read`, which hands over all of it that fits: a short read ending in a newline is the
/// whole line, and the `read` that would find the end of the file is spared.
#[cfg(target_os = "linux")]
fn read_line(path: &Path, buf: &mut Vec<u8>) -> std::io::Result<()> {
    use std::io::Read as _;
    let mut file = std::fs::File::open(path)?;
    buf.clear();
    let mut chunk = [0u8; 1024];
    loop {
        match file.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if n < chunk.len() && chunk[n - 1] == b'\n' {
                    return Ok(());
                }
            }
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
}

/// The command name and parent pid of one `stat` line: `<pid> (<comm>) <state> <ppid> …`.
/// The name may itself hold spaces and parentheses, so it runs from the first `(` to
/// the last `)`.
#[cfg(any(target_os = "linux", test))]
fn parse_stat(stat: &[u8]) -> Option<(String, u32)> {
    let open = stat.iter().position(|&b| b == b'(')?;
    // The line's `)` is near its start, and about 300 bytes of numbers follow: `rfind`
    // searches a word at a time, where `rposition` takes a byte per step.
    let close = match std::str::from_utf8(stat) {
        Ok(text) => text.rfind(')')?,
        Err(_) => stat.iter().rposition(|&b| b == b')')?,
    };
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

    /// A process table: pid -> (name, parent pid).
    fn table<'a>(entries: &'a [(u32, &'a str, u32)]) -> impl Fn(u32) -> Option<(String, u32)> + 'a {
        move |pid| {
            entries
                .iter()
                .find(|e| e.0 == pid)
                .map(|e| (e.1.to_owned(), e.2))
        }
    }

    #[test]
    fn windows_walk_lists_parents_until_one_is_gone() {
        let processes = [
            (30, "git.exe", 20),
            (20, "bash.exe", 10),
            (10, "mintty.exe", 4),
        ];
        assert_eq!(
            walk_windows(30, table(&processes)),
            ["bash.exe", "mintty.exe"]
        );
        assert!(walk_windows(99, table(&processes)).is_empty());
    }

    #[test]
    fn windows_walk_marks_a_cycle_and_truncates_at_ten() {
        // A parent link back to an earlier pid (pids are reused).
        let looped = [(30, "git.exe", 20), (20, "a.exe", 10), (10, "b.exe", 20)];
        assert_eq!(
            walk_windows(30, table(&looped)),
            ["a.exe", "b.exe", "a.exe", "(cycle)"]
        );
        let chain: Vec<(u32, String, u32)> = (1..=20)
            .map(|pid| (pid, format!("p{pid}.exe"), pid + 1))
            .collect();
        let lookup = |pid: u32| {
            chain
                .iter()
                .find(|e| e.0 == pid)
                .map(|e| (e.1.clone(), e.2))
        };
        let names = walk_windows(1, lookup);
        assert_eq!(names.len(), WINDOWS_LIMIT + 1);
        assert_eq!(names[0], "p2.exe");
        assert_eq!(names[WINDOWS_LIMIT - 1], "p11.exe");
        assert_eq!(names[WINDOWS_LIMIT], "(truncated)");
    }

    #[test]
    fn windows_ancestry_json_is_the_walked_names_as_an_array() {
        let processes = [
            (30, "git.exe", 20),
            (20, "bash \"x\".exe", 10),
            (10, "mintty.exe", 4),
        ];
        let names = walk_windows(30, table(&processes));
        let json = windows_ancestry_json(&names);
        // Compact, as git's json-writer writes it: no spaces, the quote escaped.
        assert_eq!(json.to_string(), r#"["bash \"x\".exe","mintty.exe"]"#);
        assert_eq!(windows_ancestry_json::<&str>(&[]).to_string(), "[]");
    }

    #[test]
    fn macos_walk_starts_at_the_parent_and_stops_at_ten() {
        let processes = [(20, "zsh", 10), (10, "Terminal", 1), (1, "launchd", 0)];
        assert_eq!(
            walk_macos(20, table(&processes)),
            ["zsh", "Terminal", "launchd"]
        );
        assert!(walk_macos(0, table(&processes)).is_empty());
        // A process that is its own parent ends the walk after its name.
        let own = [(5, "odd", 5)];
        assert_eq!(walk_macos(5, table(&own)), ["odd"]);
        let chain: Vec<(u32, String, u32)> = (1..=20)
            .map(|pid| (pid, format!("p{pid}"), pid + 1))
            .collect();
        let names = walk_macos(1, |pid| {
            chain
                .iter()
                .find(|e| e.0 == pid)
                .map(|e| (e.1.clone(), e.2))
        });
        assert_eq!(names.len(), MACOS_LIMIT);
        assert_eq!(names[0], "p1");
    }

    #[test]
    fn parses_names_with_spaces_quotes_and_parentheses() {
        // The renamed parent of samples/ancestry-quoting.*: `my proc (x)'q`.
        let stat = b"4242 (my proc (x)'q) S 4100 4242 4100 0 -1 4194560 120 0 0 0\n";
        assert_eq!(parse_stat(stat), Some(("my proc (x)'q".to_owned(), 4100)));
        // A name that is not UTF-8 (a process may set any bytes): found all the same,
        // the bad byte replaced.
        let stat = b"4242 (a)\xff) S 4100 4242 4100 0 -1 4194560 120 0 0 0\n";
        assert_eq!(parse_stat(stat), Some(("a)\u{fffd}".to_owned(), 4100)));
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
