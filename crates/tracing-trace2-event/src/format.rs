//! The Event formatter: one compact JSON object per Trace2 record.
//!
//! Keys come out in the order git's event target writes them: the common keys
//! (`event`, `sid`, `thread`, `time`, `file`, `line`, `repo`) and then the keys of the
//! event itself. Everything is appended to the caller's buffer with the shared
//! primitives of [`tracing_trace2_core::text`], so a call allocates nothing beyond
//! growing that buffer.

use std::cell::RefCell;

use tracing_trace2_core::text::{
    push_i64, push_json_str, push_seconds, push_timer_seconds, push_u64, push_utc_datetime,
};
use tracing_trace2_core::{ChildInfo, Event, Format, Record, RegionInfo, TimerInfo};

/// The nesting limit git uses when none (or a non-positive one) is configured.
const DEFAULT_MAX_NESTING: u32 = 2;

/// The `evt` value of the `version` event: the revision of the format git 2.47 writes.
const EVT_VERSION: &str = "4";

/// Renders records as Trace2 Event (JSON) lines.
///
/// Built once from the target's settings and then shared: formatting only reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventFormat {
    brief: bool,
    max_nesting: u32,
}

impl Default for EventFormat {
    fn default() -> Self {
        Self::new()
    }
}

impl EventFormat {
    /// A formatter with git's defaults: full lines (not brief) and region nesting up to 2.
    pub fn new() -> Self {
        EventFormat {
            brief: false,
            max_nesting: DEFAULT_MAX_NESTING,
        }
    }

    /// Sets brief mode (`GIT_TRACE2_EVENT_BRIEF`): `file` and `line` are dropped from
    /// every line and `time` from all but `version` and `atexit`.
    pub fn with_brief(mut self, brief: bool) -> Self {
        self.brief = brief;
        self
    }

    /// Sets the deepest region nesting still written (`GIT_TRACE2_EVENT_NESTING`).
    ///
    /// `0` selects the default of 2, as git does for any value that is not positive.
    pub fn with_max_nesting(mut self, max_nesting: u32) -> Self {
        self.max_nesting = if max_nesting == 0 {
            DEFAULT_MAX_NESTING
        } else {
            max_nesting
        };
        self
    }

    /// Whether brief mode is on.
    pub fn brief(&self) -> bool {
        self.brief
    }

    /// The deepest region nesting that is written (never 0).
    pub fn max_nesting(&self) -> u32 {
        self.max_nesting
    }

    /// Writes `{"event":…` up to and including `line`, but not `repo`.
    fn push_common(&self, record: &Record<'_>, out: &mut Vec<u8>) {
        // Event names are fixed ASCII words: nothing to escape.
        out.extend_from_slice(b"{\"event\":\"");
        out.extend_from_slice(record.event.name().as_bytes());
        out.extend_from_slice(b"\",");
        push_sid_thread(out, record.sid, record.thread);
        // Brief mode still dates the first and the last line of a process, so that a
        // reader can tell when it ran and for how long.
        let keep_time =
            !self.brief || matches!(record.event, Event::Version { .. } | Event::Atexit { .. });
        if keep_time {
            push_key(out, "time");
            out.push(b'"');
            push_utc_datetime(out, record.time.wall_us);
            out.push(b'"');
        }
        if !self.brief
            && let Some(file) = record.callsite.file.filter(|file| !file.is_empty())
        {
            push_key(out, "file");
            push_json_str(out, file);
            push_key(out, "line");
            push_u64(out, u64::from(record.callsite.line));
        }
    }
}

impl Format for EventFormat {
    fn format(&self, record: &Record<'_>, out: &mut Vec<u8>) {
        if let Some(nesting) = record.event.nesting()
            && nesting > self.max_nesting
        {
            return;
        }
        self.push_common(record, out);
        let t_abs_us = record.time.t_abs_us;
        match record.event {
            Event::Version { exe } => {
                push_str_key(out, "evt", EVT_VERSION);
                push_str_key(out, "exe", exe);
            }
            Event::TooManyFiles | Event::ThreadStart => {}
            Event::Start { argv } => {
                push_seconds_key(out, "t_abs", t_abs_us);
                push_array_key(out, "argv", false, argv);
            }
            Event::CmdAncestry { ancestry } => push_array_key(out, "ancestry", false, ancestry),
            Event::CmdPath { path } => push_str_key(out, "path", path),
            Event::CmdName { name, hierarchy } => {
                push_str_key(out, "name", name);
                if !hierarchy.is_empty() {
                    push_str_key(out, "hierarchy", hierarchy);
                }
            }
            Event::CmdMode { name } => push_str_key(out, "name", name),
            Event::Alias { alias, argv } => {
                push_str_key(out, "alias", alias);
                push_array_key(out, "argv", false, argv);
            }
            Event::DefParam {
                scope,
                param,
                value,
            } => {
                push_str_key(out, "scope", scope);
                push_str_key(out, "param", param);
                if let Some(value) = value {
                    push_str_key(out, "value", value);
                }
            }
            Event::DefRepo { repo, worktree } => {
                push_int_key(out, "repo", repo);
                push_str_key(out, "worktree", worktree);
            }
            Event::RegionEnter { region, nesting } => {
                push_region(out, &region, None, nesting);
            }
            Event::RegionLeave {
                region,
                nesting,
                t_rel_us,
            } => {
                push_region(out, &region, Some(t_rel_us), nesting);
            }
            Event::Data {
                repo,
                category,
                key,
                value,
                nesting,
                t_rel_us,
            } => {
                push_data_head(out, repo, t_abs_us, t_rel_us, nesting, category, key);
                push_str_key(out, "value", value);
            }
            Event::DataJson {
                repo,
                category,
                key,
                json,
                nesting,
                t_rel_us,
            } => {
                push_data_head(out, repo, t_abs_us, t_rel_us, nesting, category, key);
                push_key(out, "value");
                // The text is already JSON; an empty one would leave `"value":}` and
                // make the whole line unreadable, so it stands for a null value.
                if json.is_empty() {
                    out.extend_from_slice(b"null");
                } else {
                    out.extend_from_slice(json.as_bytes());
                }
            }
            Event::Printf { msg } => {
                push_seconds_key(out, "t_abs", t_abs_us);
                if let Some(msg) = msg {
                    push_str_key(out, "msg", msg);
                }
            }
            Event::Error { msg, fmt } => {
                if let Some(msg) = msg {
                    push_str_key(out, "msg", msg);
                }
                if let Some(fmt) = fmt {
                    push_str_key(out, "fmt", fmt);
                }
            }
            Event::ChildStart(child) => push_child_start(out, &child),
            Event::ChildExit {
                child_id,
                pid,
                code,
                elapsed_us,
            } => {
                push_uint_key(out, "child_id", child_id);
                push_int_key(out, "pid", pid);
                push_int_key(out, "code", code);
                push_seconds_key(out, "t_rel", elapsed_us);
            }
            Event::ChildReady {
                child_id,
                pid,
                ready,
                elapsed_us,
            } => {
                push_uint_key(out, "child_id", child_id);
                push_int_key(out, "pid", pid);
                push_str_key(out, "ready", ready);
                push_seconds_key(out, "t_rel", elapsed_us);
            }
            Event::Exec { exec_id, exe, argv } => {
                push_uint_key(out, "exec_id", exec_id);
                if let Some(exe) = exe {
                    push_str_key(out, "exe", exe);
                }
                push_array_key(out, "argv", false, argv);
            }
            // git's event target leaves the errno text to the other targets.
            Event::ExecResult { exec_id, code, .. } => {
                push_uint_key(out, "exec_id", exec_id);
                push_int_key(out, "code", code);
            }
            Event::ThreadExit { elapsed_us } => push_seconds_key(out, "t_rel", elapsed_us),
            Event::Timer { timer, .. } => push_timer(out, &timer),
            Event::Counter {
                category,
                name,
                value,
                ..
            } => {
                push_str_key(out, "category", category);
                push_str_key(out, "name", name);
                push_key(out, "count");
                // git prints the unsigned total through a signed conversion; mirror it
                // so that huge counts read the same in both streams.
                push_i64(out, value as i64);
            }
            Event::Exit { code } | Event::Atexit { code } => {
                push_seconds_key(out, "t_abs", t_abs_us);
                push_int_key(out, "code", i64::from(code));
            }
            Event::Signal { signo } => {
                push_seconds_key(out, "t_abs", t_abs_us);
                push_int_key(out, "signo", i64::from(signo));
            }
        }
        out.extend_from_slice(b"}\n");
    }
}

/// Longest sid and thread name whose escaped text is kept per thread.
const CACHED_SID: usize = 160;
const CACHED_THREAD: usize = 32;
/// Room for `"sid":"<sid>","thread":"<thread>"` once escaped.
const CACHED_TEXT: usize = 320;

/// `"sid":"…","thread":"…"`, escaped, for the sid and thread it was made for: a thread
/// writes the same two values on every line, so they are escaped once per thread (and
/// again only when either changes). Fixed-size, so that it never allocates; longer
/// values are escaped every time.
struct SidThread {
    sid: [u8; CACHED_SID],
    sid_len: usize,
    thread: [u8; CACHED_THREAD],
    thread_len: usize,
    text: [u8; CACHED_TEXT],
    text_len: usize,
}

impl SidThread {
    const EMPTY: SidThread = SidThread {
        sid: [0; CACHED_SID],
        sid_len: usize::MAX,
        thread: [0; CACHED_THREAD],
        thread_len: usize::MAX,
        text: [0; CACHED_TEXT],
        text_len: 0,
    };

    fn holds(&self, sid: &str, thread: &str) -> bool {
        self.sid.get(..self.sid_len) == Some(sid.as_bytes())
            && self.thread.get(..self.thread_len) == Some(thread.as_bytes())
    }

    /// Keeps `text` for `sid` and `thread`, if everything fits.
    fn store(&mut self, sid: &str, thread: &str, text: &[u8]) {
        let (sid, thread) = (sid.as_bytes(), thread.as_bytes());
        if sid.len() > CACHED_SID || thread.len() > CACHED_THREAD || text.len() > CACHED_TEXT {
            self.sid_len = usize::MAX;
            return;
        }
        self.sid[..sid.len()].copy_from_slice(sid);
        self.sid_len = sid.len();
        self.thread[..thread.len()].copy_from_slice(thread);
        self.thread_len = thread.len();
        self.text[..text.len()].copy_from_slice(text);
        self.text_len = text.len();
    }
}

thread_local! {
    static SID_THREAD: RefCell<SidThread> = const { RefCell::new(SidThread::EMPTY) };
}

/// Appends `"sid":"<sid>","thread":"<thread>"`.
fn push_sid_thread(out: &mut Vec<u8>, sid: &str, thread: &str) {
    let done = SID_THREAD.try_with(|cell| {
        let Ok(mut cached) = cell.try_borrow_mut() else {
            return false;
        };
        if !cached.holds(sid, thread) {
            let start = out.len();
            render_sid_thread(out, sid, thread);
            cached.store(sid, thread, &out[start..]);
            return true;
        }
        out.extend_from_slice(&cached.text[..cached.text_len]);
        true
    });
    // While the thread's storage is torn down (or in a nested call): no cache.
    if done != Ok(true) {
        render_sid_thread(out, sid, thread);
    }
}

fn render_sid_thread(out: &mut Vec<u8>, sid: &str, thread: &str) {
    out.extend_from_slice(b"\"sid\":");
    push_json_str(out, sid);
    push_key(out, "thread");
    push_json_str(out, thread);
}

/// Appends `,"<key>":`. Keys are fixed ASCII names that need no escaping.
#[inline]
fn push_key(out: &mut Vec<u8>, key: &str) {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":");
}

#[inline]
fn push_str_key(out: &mut Vec<u8>, key: &str, value: &str) {
    push_key(out, key);
    push_json_str(out, value);
}

#[inline]
fn push_int_key(out: &mut Vec<u8>, key: &str, value: i64) {
    push_key(out, key);
    push_i64(out, value);
}

#[inline]
fn push_uint_key(out: &mut Vec<u8>, key: &str, value: u64) {
    push_key(out, key);
    push_u64(out, value);
}

#[inline]
fn push_seconds_key(out: &mut Vec<u8>, key: &str, micros: u64) {
    push_key(out, key);
    push_seconds(out, micros);
}

/// Appends a string array; `git_first` puts `"git"` before the elements, the way git
/// shows a child that is a git sub-command.
fn push_array_key(out: &mut Vec<u8>, key: &str, git_first: bool, items: &[&str]) {
    push_key(out, key);
    out.push(b'[');
    if git_first {
        push_json_str(out, "git");
    }
    for (i, item) in items.iter().enumerate() {
        if git_first || i > 0 {
            out.push(b',');
        }
        push_json_str(out, item);
    }
    out.push(b']');
}

/// The keys of `region_enter` (`t_rel_us` is `None`) and `region_leave`.
fn push_region(out: &mut Vec<u8>, region: &RegionInfo<'_>, t_rel_us: Option<u64>, nesting: u32) {
    if let Some(repo) = region.repo {
        push_int_key(out, "repo", repo);
    }
    if let Some(t_rel_us) = t_rel_us {
        push_seconds_key(out, "t_rel", t_rel_us);
    }
    push_uint_key(out, "nesting", u64::from(nesting));
    if let Some(category) = region.category {
        push_str_key(out, "category", category);
    }
    if let Some(label) = region.label {
        push_str_key(out, "label", label);
    }
    if let Some(msg) = region.msg {
        push_str_key(out, "msg", msg);
    }
}

/// The keys `data` and `data_json` share, everything up to `value`.
fn push_data_head(
    out: &mut Vec<u8>,
    repo: Option<i64>,
    t_abs_us: u64,
    t_rel_us: u64,
    nesting: u32,
    category: &str,
    key: &str,
) {
    if let Some(repo) = repo {
        push_int_key(out, "repo", repo);
    }
    push_seconds_key(out, "t_abs", t_abs_us);
    push_seconds_key(out, "t_rel", t_rel_us);
    push_uint_key(out, "nesting", u64::from(nesting));
    push_str_key(out, "category", category);
    push_str_key(out, "key", key);
}

fn push_child_start(out: &mut Vec<u8>, child: &ChildInfo<'_>) {
    push_uint_key(out, "child_id", child.child_id);
    push_str_key(out, "child_class", child.class);
    if let Some(hook_name) = child.hook_name {
        push_str_key(out, "hook_name", hook_name);
    }
    if let Some(cd) = child.cd {
        push_str_key(out, "cd", cd);
    }
    push_key(out, "use_shell");
    out.extend_from_slice(if child.use_shell { b"true" } else { b"false" });
    push_array_key(out, "argv", child.is_git, child.argv);
}

fn push_timer(out: &mut Vec<u8>, timer: &TimerInfo<'_>) {
    push_str_key(out, "category", timer.category);
    push_str_key(out, "name", timer.name);
    push_key(out, "intervals");
    // Same signed conversion as the counter total (see there).
    push_i64(out, timer.intervals as i64);
    push_key(out, "t_total");
    push_timer_seconds(out, timer.total_ns);
    push_key(out, "t_min");
    push_timer_seconds(out, timer.min_ns);
    push_key(out, "t_max");
    push_timer_seconds(out, timer.max_ns);
}

#[cfg(test)]
mod sid_thread_tests {
    use super::*;

    /// The per-thread cache never hands out the text of another sid or thread: values
    /// alternate, grow past what is cached, and need escaping.
    #[test]
    fn cached_prefix_follows_every_change() {
        let long_sid = "p".repeat(CACHED_SID + 1);
        let long_thread = "t".repeat(CACHED_THREAD + 1);
        let sids = [
            "20261121T232137.816920Z-H0a7c9cdf-P00002a1e",
            "a/b",
            "q\"x",
            &long_sid,
        ];
        let threads = ["main", "th01:worker", "th02:work\ter", &long_thread, "main"];
        for _ in 0..2 {
            for sid in sids {
                for thread in threads {
                    let mut cached = Vec::new();
                    push_sid_thread(&mut cached, sid, thread);
                    let mut direct = Vec::new();
                    render_sid_thread(&mut direct, sid, thread);
                    assert_eq!(cached, direct, "{sid} {thread}");
                }
            }
        }
    }
}
