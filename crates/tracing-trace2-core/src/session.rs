//! The session: this process's session id (SID), its depth in the process tree, and the
//! command-name hierarchy it passes on to children.
//!
//! The SID's own component is `<UTC yyyymmddTHHMMSS.ffffffZ>-H<8 hex of SHA-1 of the host
//! name>-P<pid as 8 hex>`. When `GIT_TRACE2_PARENT_SID` is set (a git or another traced
//! program started us), the full SID is `<parent>/<own>` and the depth is one more than
//! the number of `/` in the parent value. Children learn both values from the
//! environment: [`Session::child_env`] lists what to set on a child's command, and
//! [`Session::export_env`] writes them into this process's environment so that children
//! started by any means (shells, hooks, libraries) nest under us. Once exported, every
//! `cmd_name` ([`Session::push_cmd_name`]) updates `GIT_TRACE2_PARENT_NAME` as git's
//! does, so a child started after it sees the whole hierarchy.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use crate::clock;
use tracing_trace2_record::text;

/// Environment variable holding the parent's full SID.
pub const PARENT_SID_ENV: &str = "GIT_TRACE2_PARENT_SID";
/// Environment variable holding the parent's command hierarchy.
pub const PARENT_NAME_ENV: &str = "GIT_TRACE2_PARENT_NAME";

/// This process's place in the Trace2 session tree.
#[derive(Debug)]
pub struct Session {
    /// The session id, made with its first use: the global session is also made by a
    /// `cmd_name` of a process with no target enabled, which needs only the hierarchy
    /// (no clock, `getpid`, `gethostname` or SHA-1 then).
    id: OnceLock<SessionId>,
    /// The hierarchy the next `cmd_name` extends: starts as the inherited parent name.
    hierarchy: Mutex<String>,
    /// Whether [`Session::export_env`] ran: `cmd_name` then keeps the environment's
    /// `GIT_TRACE2_PARENT_NAME` equal to the hierarchy.
    exported: AtomicBool,
}

/// The session id and what it says.
#[derive(Debug)]
struct SessionId {
    sid: String,
    own_start: usize,
    depth: u32,
}

static GLOBAL: OnceLock<Session> = OnceLock::new();

impl Session {
    /// The session of this process, built from the environment on first use (its id on
    /// the first use of the id).
    pub fn global() -> &'static Session {
        GLOBAL.get_or_init(Session::from_env)
    }

    /// A session whose hierarchy starts as the environment's parent name, its id not
    /// made yet.
    fn from_env() -> Session {
        Session {
            id: OnceLock::new(),
            hierarchy: Mutex::new(non_empty_env(PARENT_NAME_ENV).unwrap_or_default()),
            exported: AtomicBool::new(false),
        }
    }

    /// Builds a session from its inputs (for tests and tools that replay traces).
    pub fn new(
        parent_sid: Option<&str>,
        parent_name: Option<&str>,
        wall_us: i64,
        pid: u32,
        hostname: Option<&str>,
    ) -> Session {
        Session {
            id: OnceLock::from(SessionId::new(parent_sid, wall_us, pid, hostname)),
            hierarchy: Mutex::new(parent_name.unwrap_or_default().to_owned()),
            exported: AtomicBool::new(false),
        }
    }

    /// The id, made from the environment, the clock, the pid and the host name the
    /// first time.
    fn id(&self) -> &SessionId {
        if let Some(id) = self.id.get() {
            return id;
        }
        let mut made = false;
        let id = self.id.get_or_init(|| {
            made = true;
            SessionId::new(
                non_empty_env(PARENT_SID_ENV).as_deref(),
                clock::now().wall_us,
                std::process::id(),
                hostname().as_deref(),
            )
        });
        if made && let Some(global) = GLOBAL.get().filter(|g| std::ptr::eq(*g, self)) {
            // The process's own id is never changed nor freed from now on: formats that
            // keep the id of the last line may trust its address (the Event format's
            // line cache).
            tracing_trace2_dst::statics::pin(global.sid());
        }
        id
    }

    /// The full session id.
    pub fn sid(&self) -> &str {
        &self.id().sid
    }

    /// The last component of the SID: this process's own part (names directory files).
    pub fn own_component(&self) -> &str {
        let id = self.id();
        &id.sid[id.own_start..]
    }

    /// The depth in the process tree: 0 without a parent.
    pub fn depth(&self) -> u32 {
        self.id().depth
    }

    /// Records a `cmd_name` and returns its hierarchy: `<current>/<name>`, or `<name>`
    /// when there is no current hierarchy. Repeated calls chain, as in git. After
    /// [`Session::export_env`], the environment's `GIT_TRACE2_PARENT_NAME` is set to the
    /// new hierarchy too (git sets it in `cmd_name`), under the same lock, so that
    /// concurrent calls leave the last hierarchy in both places.
    pub fn push_cmd_name(&self, name: &str) -> String {
        let mut current = self
            .hierarchy
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !current.is_empty() {
            current.push('/');
        }
        current.push_str(name);
        if self.exported.load(Ordering::Acquire) {
            // SAFETY: `export_env`'s caller took on the environment's hazard for the
            // rest of the process (see there). This write replaces the variable that
            // `export_env` added, rather than adding one, and std's environment lock
            // orders it with every Rust read, write and `Command` spawn.
            unsafe { std::env::set_var(PARENT_NAME_ENV, current.as_str()) };
        }
        current.clone()
    }

    /// The hierarchy children inherit (empty when there is none).
    pub fn hierarchy(&self) -> String {
        self.hierarchy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The variables a child process needs to nest under this session.
    pub fn child_env(&self) -> Vec<(&'static str, String)> {
        let mut env = vec![(PARENT_SID_ENV, self.sid().to_owned())];
        let hierarchy = self.hierarchy();
        if !hierarchy.is_empty() {
            env.push((PARENT_NAME_ENV, hierarchy));
        }
        env
    }

    /// Writes [`Session::child_env`] into this process's environment, and makes every
    /// later [`Session::push_cmd_name`] update `GIT_TRACE2_PARENT_NAME`, as git does.
    /// Without a hierarchy yet, `GIT_TRACE2_PARENT_NAME` is set empty (git and this
    /// crate read an empty value as none), so that the first `cmd_name` replaces a
    /// variable instead of adding one.
    ///
    /// # Safety
    /// Changing the environment races with any other thread reading or writing it
    /// (`std::env::set_var` is unsafe for that reason). Rust code is ordered by std's
    /// environment lock; what remains is code outside std (C libraries) reading the
    /// environment on another thread while a variable changes. The caller either calls
    /// this while the program has a single thread, or accepts that hazard, now and for
    /// each later `cmd_name` (the facade's decision and its reasons are in
    /// `docs/decisions.md`).
    pub unsafe fn export_env(&self) {
        let hierarchy = self
            .hierarchy
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // SAFETY: the caller accepted the hazard (see above); the hierarchy lock keeps
        // a concurrent `cmd_name` from writing an older name after this one.
        unsafe {
            std::env::set_var(PARENT_SID_ENV, self.sid());
            std::env::set_var(PARENT_NAME_ENV, hierarchy.as_str());
        }
        self.exported.store(true, Ordering::Release);
    }

    /// Whether [`Session::export_env`] has run in this process.
    pub fn is_exported(&self) -> bool {
        self.exported.load(Ordering::Acquire)
    }
}

impl SessionId {
    fn new(parent_sid: Option<&str>, wall_us: i64, pid: u32, hostname: Option<&str>) -> Self {
        let mut sid = Vec::with_capacity(96);
        let mut depth = 0;
        if let Some(parent) = parent_sid.filter(|p| !p.is_empty()) {
            sid.extend_from_slice(parent.as_bytes());
            sid.push(b'/');
            depth = parent.bytes().filter(|&b| b == b'/').count() as u32 + 1;
        }
        let own_start = sid.len();
        text::push_sid_datetime(&mut sid, wall_us);
        // The hex digits by hand: `format!` and the digest's `Display` would run (and
        // page in) the formatting machinery once per process for 16 characters.
        match hostname {
            Some(host) => {
                let digest = sha1_smol::Sha1::from(host.as_bytes()).digest().bytes();
                sid.extend_from_slice(b"-H");
                push_hex(&mut sid, &digest[..4]);
            }
            None => sid.extend_from_slice(b"-Localhost"),
        }
        sid.extend_from_slice(b"-P");
        push_hex(&mut sid, &pid.to_be_bytes());
        SessionId {
            sid: String::from_utf8_lossy(&sid).into_owned(),
            own_start,
            depth,
        }
    }
}

/// Appends `bytes` as lowercase hex, two digits a byte.
fn push_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for &b in bytes {
        out.push(DIGITS[usize::from(b >> 4)]);
        out.push(DIGITS[usize::from(b & 0xf)]);
    }
}

fn non_empty_env(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.is_empty())
}

/// The host name as `gethostname` reports it, or `None` when it cannot be read.
///
/// On Windows, the DNS host name (`GetComputerNameExW`), the name Winsock's
/// `gethostname`, which Git for Windows calls, reports.
#[cfg(windows)]
pub fn hostname() -> Option<String> {
    /// `COMPUTER_NAME_FORMAT::ComputerNameDnsHostname`.
    const DNS_HOSTNAME: i32 = 1;
    #[link(name = "kernel32")]
    unsafe extern "system" {
        fn GetComputerNameExW(name_type: i32, buffer: *mut u16, size: *mut u32) -> i32;
    }
    let mut buf = [0u16; 256];
    let mut len = buf.len() as u32;
    // SAFETY: `buf` is valid for `len` UTF-16 units; the call writes at most that many
    // and stores the count it wrote (without the NUL) in `len`.
    let ok = unsafe { GetComputerNameExW(DNS_HOSTNAME, buf.as_mut_ptr(), &mut len) };
    if ok == 0 {
        return None;
    }
    Some(String::from_utf16_lossy(
        &buf[..(len as usize).min(buf.len())],
    ))
}

/// The host name as `gethostname` reports it, or `None` when it cannot be read.
#[cfg(unix)]
pub fn hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its whole length; gethostname writes at most that.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Some(String::from_utf8_lossy(&buf[..len]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `cmd_name` without a target needs the hierarchy only: the id (clock, pid,
    /// host name, SHA-1) is made by its first use.
    #[test]
    fn the_id_is_made_by_its_first_use() {
        let s = Session::from_env();
        s.push_cmd_name("status");
        assert!(s.id.get().is_none(), "made by cmd_name");
        let own = s.own_component().to_owned();
        assert!(s.id.get().is_some());
        assert!(
            own.ends_with(&format!("-P{:08x}", std::process::id())),
            "{own}"
        );
        assert_eq!(s.sid(), s.sid(), "made once");
    }

    #[test]
    fn sid_matches_git_shape() {
        // From samples/version.event: host "vm", pid 0x2a1e, 2026-11-21T23:21:37.816920Z.
        let s = Session::new(None, None, 1_795_303_297_816_920, 0x2a1e, Some("vm"));
        assert_eq!(s.sid(), "20261121T232137.816920Z-H0a7c9cdf-P00002a1e");
        assert_eq!(s.sid().len(), 43);
        assert_eq!(s.depth(), 0);
        assert_eq!(s.own_component(), s.sid());
        // Every digit of the pid, lowercase, and no host name.
        let s = Session::new(None, None, 1_795_303_297_816_920, 0xdead_b0ef, None);
        assert_eq!(s.sid(), "20261121T232137.816920Z-Localhost-Pdeadb0ef");
    }

    #[test]
    fn parent_sid_and_depth() {
        let s = Session::new(
            Some("external-tool-123/step-2"),
            Some("mytool/sub"),
            0,
            1,
            None,
        );
        assert!(
            s.sid().starts_with(
                "external-tool-123/step-2/19700101T000000.000000Z-Localhost-P00000001"
            )
        );
        assert_eq!(s.depth(), 2);
        assert_eq!(
            s.own_component(),
            "19700101T000000.000000Z-Localhost-P00000001"
        );
        assert_eq!(s.push_cmd_name("version"), "mytool/sub/version");
    }

    #[test]
    fn cmd_names_chain() {
        let s = Session::new(None, None, 0, 1, Some("vm"));
        assert_eq!(s.push_cmd_name("_run_dashed_"), "_run_dashed_");
        assert_eq!(
            s.push_cmd_name("_run_git_alias_"),
            "_run_dashed_/_run_git_alias_"
        );
        let env = s.child_env();
        assert_eq!(
            env[1],
            (PARENT_NAME_ENV, "_run_dashed_/_run_git_alias_".to_owned())
        );
        assert_eq!(env[0].1, s.sid());
    }

    /// Set in a child copy of the test binary that runs one environment scenario: the
    /// environment is the process's, and the other tests must not see it change.
    const CHILD_ENV: &str = "TRACE2_SESSION_TEST_CHILD";

    #[test]
    fn an_exported_session_keeps_the_name_current() {
        let name = "session::tests::an_exported_session_keeps_the_name_current";
        if std::env::var(CHILD_ENV).as_deref() == Ok(name) {
            let var = |key| std::env::var(key).ok();
            let quiet = Session::new(None, None, 0, 7, None);
            quiet.push_cmd_name("not-exported");
            assert_eq!(var(PARENT_NAME_ENV), None, "no export, no change");

            let s = Session::new(Some("top"), None, 0, 8, None);
            // SAFETY: this child process runs one test on one thread.
            unsafe { s.export_env() };
            assert_eq!(var(PARENT_SID_ENV).as_deref(), Some(s.sid()));
            // Present but empty: git reads it as no hierarchy.
            assert_eq!(var(PARENT_NAME_ENV).as_deref(), Some(""));
            assert!(s.is_exported());
            s.push_cmd_name("git fetch");
            assert_eq!(var(PARENT_NAME_ENV).as_deref(), Some("git fetch"));
            s.push_cmd_name("sub");
            assert_eq!(var(PARENT_NAME_ENV).as_deref(), Some("git fetch/sub"));
            std::process::exit(0);
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([name, "--exact", "--nocapture", "--test-threads=1", "-q"])
            .env(CHILD_ENV, name)
            .env_remove(PARENT_SID_ENV)
            .env_remove(PARENT_NAME_ENV)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The scenario ends the child before libtest's summary: no summary, it ran.
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            !stdout.contains("test result"),
            "the scenario did not run: {stdout}"
        );
    }

    #[test]
    fn real_hostname_is_readable() {
        assert!(hostname().is_some());
    }
}
