//! The Event formatter: one compact JSON object per Trace2 record.
//!
//! Keys come out in the order git's event target writes them: the common keys
//! (`event`, `sid`, `thread`, `time`, `file`, `line`, `repo`) and then the keys of the
//! event itself. Everything is appended to the caller's buffer through an
//! [`Appender`] and the other shared primitives of [`tracing_trace2_record::text`], so a
//! call allocates nothing beyond growing that buffer.
//!
//! Regions and data make up nearly all of a trace, and their lines take a path on which
//! everything is inlined: the appender's position and room stay in registers, constant
//! keys go out as a few stores, and the sid, thread name and the date and time up to
//! the second come from a per-thread cache in one copy.

use std::cell::RefCell;

use tracing_trace2_record::text::{
    Appender, micros_digits, push_timer_seconds, same_bytes, same_long_bytes, utc_datetime_text,
    utc_second,
};
use tracing_trace2_record::{ChildInfo, Format, Record, RegionInfo, TimerInfo, Trace2Event};

/// `,"<key>":` for a key name written as a literal. Keys are fixed ASCII names that
/// need no escaping; spelling each one out whole makes it one copy.
macro_rules! key {
    ($key:literal) => {
        concat!(",\"", $key, "\":").as_bytes()
    };
}

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
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn push_common(&self, record: &Record<'_>, w: &mut Appender<'_>) {
        // Event names are fixed ASCII words: nothing to escape. The usual lines' whole
        // head is one literal, one copy.
        match hot_event_head(&record.event) {
            Some(head) => w.put(head),
            None => w.put_all([b"{\"event\":\"", record.event.name().as_bytes(), b"\","]),
        }
        // Brief mode still dates the first and the last line of a process, so that a
        // reader can tell when it ran and for how long.
        let keep_time = !self.brief
            || matches!(
                record.event,
                Trace2Event::Version { .. } | Trace2Event::Atexit { .. }
            );
        let wall_us = keep_time.then_some(record.time.wall_us);
        let file = match self.brief {
            false => record.callsite.file.filter(|file| !file.is_empty()),
            true => None,
        };
        let line = record.callsite.line;
        // Both caches are read under one borrow of the thread's storage; whatever they
        // do not hold takes the slow paths, in the order of the keys.
        let done = LINE_CACHE.try_with(|cell| {
            let Ok(cache) = cell.try_borrow() else {
                return Done::Nothing;
            };
            count_borrow();
            if !cache.sid_thread.put(w, record.sid, record.thread, wall_us) {
                return Done::Nothing;
            }
            match file {
                Some(file) if !cache.put_file_line(w, file, line) => Done::SidThread,
                _ => Done::All,
            }
        });
        let done = done.unwrap_or(Done::Nothing);
        if done == Done::Nothing {
            w.with_vec(|out| push_sid_thread_slow(out, record.sid, record.thread, wall_us));
        }
        if done != Done::All
            && let Some(file) = file
        {
            push_file_line(w, file, line);
        }
    }
}

/// `{"event":"<name>",` for the events that make up nearly every line.
#[cfg_attr(not(debug_assertions), inline(always))]
fn hot_event_head(event: &Trace2Event<'_>) -> Option<&'static [u8]> {
    Some(match event {
        Trace2Event::RegionEnter { .. } => b"{\"event\":\"region_enter\",",
        Trace2Event::RegionLeave { .. } => b"{\"event\":\"region_leave\",",
        Trace2Event::Data { .. } => b"{\"event\":\"data\",",
        Trace2Event::DataJson { .. } => b"{\"event\":\"data_json\",",
        _ => return None,
    })
}

impl Format for EventFormat {
    /// Everything but regions and data nested deeper than the limit.
    fn writes(&self, record: &Record<'_>) -> bool {
        record
            .event
            .nesting()
            .is_none_or(|nesting| nesting <= self.max_nesting)
    }

    fn format(&self, record: &Record<'_>, out: &mut Vec<u8>) {
        if !self.writes(record) {
            return;
        }
        let w = &mut Appender::new(out);
        // The common keys are written from this one place, so that everything they
        // take (the per-thread caches included) is inlined once.
        self.push_common(record, w);
        let t_abs_us = record.time.t_abs_us;
        // Regions and data make up nearly every line of a trace: they are written
        // here with helpers that are all inlined. Every other event goes through a
        // function of its own on a second appender, so that no pointer to `w` ever
        // leaves this function and its fields can live in registers.
        // Matched in place (`&record.event`): bound by value, the fields were copied to
        // the stack before use.
        match &record.event {
            Trace2Event::RegionEnter { region, nesting } => {
                push_region(w, region, None, *nesting);
            }
            Trace2Event::RegionLeave {
                region,
                nesting,
                t_rel_us,
            } => {
                push_region(w, region, Some(*t_rel_us), *nesting);
            }
            Trace2Event::Data {
                repo,
                category,
                key,
                value,
                nesting,
                t_rel_us,
            } => {
                push_data_numbers(w, *repo, t_abs_us, *t_rel_us, *nesting);
                // The end of the line goes with the value.
                w.put_json_field(key!("category"), category);
                w.put_json_field(key!("key"), key);
                w.put_json_field_then(key!("value"), value, b"}\n");
                return;
            }
            Trace2Event::DataJson {
                repo,
                category,
                key,
                json,
                nesting,
                t_rel_us,
            } => {
                push_data_head(w, *repo, t_abs_us, *t_rel_us, *nesting, category, key);
                // The text is already JSON; an empty one would leave `"value":}` and
                // make the whole line unreadable, so it stands for a null value.
                let json: &[u8] = if json.is_empty() {
                    b"null"
                } else {
                    json.as_bytes()
                };
                w.put_all([key!("value"), json]);
            }
            _ => w.with_vec(|out| push_other_keys(&mut Appender::new(out), record)),
        }
        w.put(b"}\n");
    }
}

/// The keys of every event but regions and data.
fn push_other_keys(w: &mut Appender<'_>, record: &Record<'_>) {
    let t_abs_us = record.time.t_abs_us;
    match record.event {
        Trace2Event::Version { exe } => {
            w.put_json_field(key!("evt"), EVT_VERSION);
            w.put_json_field(key!("exe"), exe);
        }
        Trace2Event::TooManyFiles | Trace2Event::ThreadStart => {}
        Trace2Event::Start { argv } => {
            push_seconds_key(w, key!("t_abs"), t_abs_us);
            push_array_key(w, key!("argv"), false, argv);
        }
        Trace2Event::CmdAncestry { ancestry } => {
            push_array_key(w, key!("ancestry"), false, ancestry)
        }
        Trace2Event::CmdPath { path } => w.put_json_field(key!("path"), path),
        Trace2Event::CmdName { name, hierarchy } => {
            w.put_json_field(key!("name"), name);
            if !hierarchy.is_empty() {
                w.put_json_field(key!("hierarchy"), hierarchy);
            }
        }
        Trace2Event::CmdMode { name } => w.put_json_field(key!("name"), name),
        Trace2Event::Alias { alias, argv } => {
            w.put_json_field(key!("alias"), alias);
            push_array_key(w, key!("argv"), false, argv);
        }
        Trace2Event::DefParam {
            scope,
            param,
            value,
        } => {
            w.put_json_field(key!("scope"), scope);
            w.put_json_field(key!("param"), param);
            if let Some(value) = value {
                w.put_json_field(key!("value"), value);
            }
        }
        Trace2Event::DefRepo { repo, worktree } => {
            push_int_key(w, key!("repo"), repo);
            w.put_json_field(key!("worktree"), worktree);
        }
        Trace2Event::Printf { msg } => {
            push_seconds_key(w, key!("t_abs"), t_abs_us);
            if let Some(msg) = msg {
                w.put_json_field(key!("msg"), msg);
            }
        }
        Trace2Event::Error { msg, fmt } => {
            if let Some(msg) = msg {
                w.put_json_field(key!("msg"), msg);
            }
            if let Some(fmt) = fmt {
                w.put_json_field(key!("fmt"), fmt);
            }
        }
        Trace2Event::ChildStart(child) => push_child_start(w, &child),
        Trace2Event::ChildExit {
            child_id,
            pid,
            code,
            elapsed_us,
        } => {
            push_uint_key(w, key!("child_id"), child_id);
            push_int_key(w, key!("pid"), pid);
            push_int_key(w, key!("code"), code);
            push_seconds_key(w, key!("t_rel"), elapsed_us);
        }
        Trace2Event::ChildReady {
            child_id,
            pid,
            ready,
            elapsed_us,
        } => {
            push_uint_key(w, key!("child_id"), child_id);
            push_int_key(w, key!("pid"), pid);
            w.put_json_field(key!("ready"), ready);
            push_seconds_key(w, key!("t_rel"), elapsed_us);
        }
        Trace2Event::Exec { exec_id, exe, argv } => {
            push_uint_key(w, key!("exec_id"), exec_id);
            if let Some(exe) = exe {
                w.put_json_field(key!("exe"), exe);
            }
            push_array_key(w, key!("argv"), false, argv);
        }
        // git's event target leaves the errno text to the other targets.
        Trace2Event::ExecResult { exec_id, code, .. } => {
            push_uint_key(w, key!("exec_id"), exec_id);
            push_int_key(w, key!("code"), code);
        }
        Trace2Event::ThreadExit { elapsed_us } => push_seconds_key(w, key!("t_rel"), elapsed_us),
        Trace2Event::Timer { timer, .. } => push_timer(w, &timer),
        Trace2Event::Counter {
            category,
            name,
            value,
            ..
        } => {
            w.put_json_field(key!("category"), category);
            w.put_json_field(key!("name"), name);
            // git prints the unsigned total through a signed conversion; mirror it
            // so that huge counts read the same in both streams.
            push_int_key(w, key!("count"), value as i64);
        }
        Trace2Event::Exit { code } | Trace2Event::Atexit { code } => {
            push_seconds_key(w, key!("t_abs"), t_abs_us);
            push_int_key(w, key!("code"), i64::from(code));
        }
        Trace2Event::Signal { signo } => {
            push_seconds_key(w, key!("t_abs"), t_abs_us);
            push_int_key(w, key!("signo"), i64::from(signo));
        }
        Trace2Event::RegionEnter { .. }
        | Trace2Event::RegionLeave { .. }
        | Trace2Event::Data { .. }
        | Trace2Event::DataJson { .. } => {}
    }
}

/// Longest sid and thread name whose escaped text is kept per thread.
const CACHED_SID: usize = 160;
const CACHED_THREAD: usize = 32;
/// Room for `"sid":"<sid>","thread":"<thread>"` once escaped.
const CACHED_TEXT: usize = 320;
/// `,"time":"` and the date and time up to the second, `YYYY-MM-DDTHH:MM:SS.`.
const TIME_PREFIX: usize = 9 + 20;

/// `"sid":"…","thread":"…"`, escaped, for the sid and thread it was made for: a thread
/// writes the same two values on every line, so they are escaped once per thread (and
/// again only when either changes). Fixed-size, so that it never allocates; longer
/// values are escaped every time.
///
/// Right after that text comes `,"time":"` and the date and time of the second the
/// last line fell in: lines come many per second, and the whole run up to the
/// microseconds of `time` is then a single copy.
struct SidThread {
    sid: [u8; CACHED_SID],
    sid_len: usize,
    thread: [u8; CACHED_THREAD],
    thread_len: usize,
    text: [u8; CACHED_TEXT + TIME_PREFIX],
    text_len: usize,
    /// Where `,"thread":` starts in `text`: the sid's text before it is kept when only
    /// the thread changes.
    sid_text_len: usize,
    /// The first microsecond of the second whose text follows `text_len`, when there is
    /// one.
    second: Option<i64>,
    /// Where the `sid` the text was made for lies, when that text cannot change (the
    /// process's own session id, pinned by the session; 0 otherwise): the same address
    /// and length are then the same sid, and a hit needs no comparison of its 40-odd
    /// bytes.
    sid_fixed_addr: usize,
}

impl SidThread {
    const EMPTY: SidThread = SidThread {
        sid: [0; CACHED_SID],
        sid_len: usize::MAX,
        thread: [0; CACHED_THREAD],
        thread_len: usize::MAX,
        text: [0; CACHED_TEXT + TIME_PREFIX],
        text_len: 0,
        sid_text_len: 0,
        second: None,
        sid_fixed_addr: 0,
    };

    /// The text up to the microseconds of `time` and those microseconds, when
    /// `wall_us` falls in the second kept; `None` otherwise.
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn with_second(&self, wall_us: i64) -> Option<(&[u8], u64)> {
        let micros = wall_us.wrapping_sub(self.second?) as u64;
        if micros >= 1_000_000 {
            return None;
        }
        Some((self.text.get(..self.text_len + TIME_PREFIX)?, micros))
    }

    /// Keeps the second `wall_us` falls in after the text (when it can be kept).
    fn store_second(&mut self, wall_us: i64) {
        self.second = None;
        let Some((start, date)) = utc_second(wall_us) else {
            return;
        };
        let Some(slot) = self
            .text
            .get_mut(self.text_len..self.text_len + TIME_PREFIX)
        else {
            return;
        };
        slot[..9].copy_from_slice(b",\"time\":\"");
        slot[9..].copy_from_slice(&date);
        self.second = Some(start);
    }

    #[cfg_attr(not(debug_assertions), inline(always))]
    fn holds(&self, sid: &str, thread: &str) -> bool {
        let (sid, thread) = (sid.as_bytes(), thread.as_bytes());
        sid.len() == self.sid_len
            && thread.len() == self.thread_len
            && (self.sid_fixed_addr == sid.as_ptr() as usize
                || self
                    .sid
                    .get(..sid.len())
                    .is_some_and(|cached| same_long_bytes(cached, sid)))
            && self
                .thread
                .get(..thread.len())
                .is_some_and(|cached| same_bytes(cached, thread))
    }

    /// Whether the text kept starts with `sid`'s (the thread's may differ).
    fn holds_sid(&self, sid: &str) -> bool {
        let sid = sid.as_bytes();
        sid.len() == self.sid_len
            && (self.sid_fixed_addr == sid.as_ptr() as usize
                || self
                    .sid
                    .get(..sid.len())
                    .is_some_and(|cached| same_long_bytes(cached, sid)))
    }

    /// Brings the kept text up to date for `sid`, `thread` and `wall_us`; `false` when
    /// they cannot be kept (too long). What did not change is not made again: a new
    /// thread name under the same sid (task lanes taking turns on a thread) escapes the
    /// name alone, and the date and time of a second already kept move after the new
    /// text. `scratch` is the line's buffer, used past its end and left as it was.
    fn refresh(
        &mut self,
        scratch: &mut Vec<u8>,
        sid: &str,
        thread: &str,
        wall_us: Option<i64>,
    ) -> bool {
        if !self.holds(sid, thread) && !self.store(scratch, sid, thread) {
            return false;
        }
        if let Some(wall_us) = wall_us
            && self.with_second(wall_us).is_none()
        {
            self.store_second(wall_us);
        }
        true
    }

    /// Keeps the text of `sid` and `thread` (the sid's as it is when it is the one
    /// kept), and the second kept after it; `false` (nothing kept) when it does not fit.
    fn store(&mut self, scratch: &mut Vec<u8>, sid: &str, thread: &str) -> bool {
        let (sid_bytes, thread_bytes) = (sid.as_bytes(), thread.as_bytes());
        if sid_bytes.len() > CACHED_SID || thread_bytes.len() > CACHED_THREAD {
            self.forget();
            return false;
        }
        let start = scratch.len();
        let same_sid = self.holds_sid(sid);
        if !same_sid {
            Appender::new(scratch).put_json_field(b"\"sid\":", sid);
        }
        let sid_text_len = match same_sid {
            true => self.sid_text_len,
            false => scratch.len() - start,
        };
        let thread_start = scratch.len();
        Appender::new(scratch).put_json_field(key!("thread"), thread);
        let text_len = sid_text_len + (scratch.len() - thread_start);
        if text_len > CACHED_TEXT {
            scratch.truncate(start);
            self.forget();
            return false;
        }
        // The date and time of the second kept, to follow the new text.
        let mut time = [0; TIME_PREFIX];
        let second = self.second.take();
        if second.is_some() {
            time.copy_from_slice(&self.text[self.text_len..self.text_len + TIME_PREFIX]);
        }
        if !same_sid {
            self.text[..sid_text_len].copy_from_slice(&scratch[start..thread_start]);
            self.sid[..sid_bytes.len()].copy_from_slice(sid_bytes);
            self.sid_len = sid_bytes.len();
            let addr = sid_bytes.as_ptr() as usize;
            self.sid_fixed_addr =
                match tracing_trace2_dst::statics::is_immutable(addr, sid_bytes.len()) {
                    true => addr,
                    false => 0,
                };
            self.sid_text_len = sid_text_len;
        }
        self.text[sid_text_len..text_len].copy_from_slice(&scratch[thread_start..]);
        scratch.truncate(start);
        self.text_len = text_len;
        self.thread[..thread_bytes.len()].copy_from_slice(thread_bytes);
        self.thread_len = thread_bytes.len();
        if second.is_some() {
            self.text[text_len..text_len + TIME_PREFIX].copy_from_slice(&time);
            self.second = second;
        }
        true
    }

    /// Holds nothing any more.
    fn forget(&mut self) {
        self.sid_len = usize::MAX;
        self.thread_len = usize::MAX;
        self.sid_fixed_addr = 0;
        self.second = None;
    }
}

impl SidThread {
    /// Appends the kept `"sid":…,"thread":…` and `,"time":"…"` when they are the
    /// line's; `false` (nothing written) otherwise.
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn put(&self, w: &mut Appender<'_>, sid: &str, thread: &str, wall_us: Option<i64>) -> bool {
        if !self.holds(sid, thread) || !self.put_kept(w, wall_us) {
            return false;
        }
        #[cfg(test)]
        CACHE_HITS.with(|hits| hits.set((hits.get().0 + 1, hits.get().1)));
        true
    }

    /// Appends the kept text, and the time when `wall_us` falls in the second kept;
    /// `false` (nothing written) when it does not.
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn put_kept(&self, w: &mut Appender<'_>, wall_us: Option<i64>) -> bool {
        match wall_us {
            None => w.put_long(&self.text[..self.text_len]),
            Some(wall_us) => {
                let Some((text, micros)) = self.with_second(wall_us) else {
                    return false;
                };
                w.put_long(text);
                // The digits and the end of the value in one 8-byte store.
                let [a, b, c, d, e, f] = micros_digits(micros);
                w.put_array([a, b, c, d, e, f, b'Z', b'"']);
            }
        }
        true
    }
}

/// What the caches of a thread wrote of a line's common keys.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Done {
    Nothing,
    SidThread,
    All,
}

/// A thread's caches of the common keys: [`SidThread`] and the [`FileLine`] slots,
/// behind one borrow.
struct LineCache {
    sid_thread: SidThread,
    file_line: [FileLine; FILE_SLOTS],
}

impl LineCache {
    /// Appends the kept `,"file":…,"line":…` when it was made for `file` and `line`;
    /// `false` (nothing written) otherwise.
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn put_file_line(&self, w: &mut Appender<'_>, file: &str, line: u32) -> bool {
        match self.file_line[file_slot(line)].text_for(file, line) {
            Some(text) => {
                w.put_long(text);
                #[cfg(test)]
                CACHE_HITS.with(|hits| hits.set((hits.get().0, hits.get().1 + 1)));
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
thread_local! {
    /// How many times the calling thread's caches wrote a line's sid and thread and a
    /// line's file and line (tests only: a miss writes the same bytes by the slow path,
    /// so only these counts show that the caches are used).
    static CACHE_HITS: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
    /// How many times the calling thread borrowed its caches to write a line's common
    /// keys (tests only: a line whose keys are all kept takes one borrow).
    static CACHE_BORROWS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The calling thread's cache hits so far: sid and thread, file and line.
#[cfg(test)]
fn cache_hits() -> (u64, u64) {
    CACHE_HITS.with(std::cell::Cell::get)
}

/// Counts a borrow of the calling thread's caches (tests only).
#[cfg_attr(not(debug_assertions), inline(always))]
fn count_borrow() {
    #[cfg(test)]
    CACHE_BORROWS.with(|borrows| borrows.set(borrows.get() + 1));
}

thread_local! {
    static LINE_CACHE: RefCell<LineCache> = const {
        RefCell::new(LineCache {
            sid_thread: SidThread::EMPTY,
            file_line: [FileLine::EMPTY; FILE_SLOTS],
        })
    };
}

/// Appends `"sid":"<sid>","thread":"<thread>"` and, given the wall-clock time of the
/// line, `,"time":"<date and time>"`: what [`EventFormat::push_common`] does for
/// them, alone (its tests' entry).
#[cfg(test)]
fn push_sid_thread(w: &mut Appender<'_>, sid: &str, thread: &str, wall_us: Option<i64>) {
    // Only the usual case is handled inline: the thread's sid and name as cached, and
    // the line in the second cached (or no time at all). Anything else takes the slow
    // path, which also brings the cache up to date.
    let done = LINE_CACHE.try_with(|cell| {
        let Ok(cache) = cell.try_borrow() else {
            return false;
        };
        cache.sid_thread.put(w, sid, thread, wall_us)
    });
    if done != Ok(true) {
        w.with_vec(|out| push_sid_thread_slow(out, sid, thread, wall_us));
    }
}

/// [`push_sid_thread`] when the cache does not have the line's sid, thread name or
/// second: write them out and keep them for the next line.
#[cold]
#[inline(never)]
fn push_sid_thread_slow(out: &mut Vec<u8>, sid: &str, thread: &str, wall_us: Option<i64>) {
    let done = LINE_CACHE.try_with(|cell| {
        // In a nested call (or while the thread's storage is torn down): no cache.
        let Ok(mut cache) = cell.try_borrow_mut() else {
            return false;
        };
        let cached = &mut cache.sid_thread;
        cached.refresh(out, sid, thread, wall_us)
            && cached.put_kept(&mut Appender::new(out), wall_us)
    });
    if done != Ok(true) {
        render_sid_thread(out, sid, thread);
        if let Some(wall_us) = wall_us {
            push_time(&mut Appender::new(out), wall_us);
        }
    }
}

/// Appends `,"time":"<date and time>"`.
#[cfg_attr(not(debug_assertions), inline(always))]
fn push_time(w: &mut Appender<'_>, wall_us: i64) {
    let time = utc_datetime_text(wall_us);
    w.put_all([key!("time"), b"\"", &time, b"\""]);
}

fn render_sid_thread(out: &mut Vec<u8>, sid: &str, thread: &str) {
    let w = &mut Appender::new(out);
    w.put_json_field(b"\"sid\":", sid);
    w.put_json_field(key!("thread"), thread);
}

/// Longest callsite file name whose `file` and `line` text is kept per thread.
const CACHED_FILE: usize = 128;
/// Room for `,"file":"<file>","line":<line>` once escaped.
const CACHED_FILE_TEXT: usize = 192;
/// Callsites kept per thread, picked by a hash of the line number.
const FILE_SLOTS: usize = 8;

/// The slot of the callsites on `line`. Lines near each other (the usual neighbours in a
/// trace) land in different slots.
#[cfg_attr(not(debug_assertions), inline(always))]
fn file_slot(line: u32) -> usize {
    (line.wrapping_mul(0x9e37_79b1) >> (32 - FILE_SLOTS.trailing_zeros())) as usize
}

/// `,"file":"…","line":…` for the callsite it was made for: the lines of a thread come
/// from a handful of callsites, each writing the same two keys every time. Kept like
/// [`SidThread`], in a few slots per thread chosen by line number.
struct FileLine {
    file: [u8; CACHED_FILE],
    file_len: usize,
    line: u32,
    text: [u8; CACHED_FILE_TEXT],
    text_len: usize,
    /// Where the `file` the text was made for lies, and whether that is a read-only
    /// segment of the program (`tracing`'s metadata, nearly always): the same address
    /// there is the same text, and a hit needs no comparison (a `memcmp` call for a path
    /// longer than 16 bytes).
    file_addr: usize,
    fixed: bool,
}

impl FileLine {
    const EMPTY: FileLine = FileLine {
        file: [0; CACHED_FILE],
        file_len: usize::MAX,
        line: 0,
        text: [0; CACHED_FILE_TEXT],
        text_len: 0,
        file_addr: 0,
        fixed: false,
    };

    /// The text kept, when it was made for `file` and `line`.
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn text_for(&self, file: &str, line: u32) -> Option<&[u8]> {
        let file = file.as_bytes();
        if self.line != line || self.file_len != file.len() {
            return None;
        }
        let unchanged = self.fixed && self.file_addr == file.as_ptr() as usize;
        if !unchanged && !same_bytes(self.file.get(..file.len())?, file) {
            return None;
        }
        self.text.get(..self.text_len)
    }

    /// Keeps `text` for `file` and `line`, if everything fits.
    fn store(&mut self, file: &str, line: u32, text: &[u8]) {
        let file = file.as_bytes();
        if file.len() > CACHED_FILE || text.len() > CACHED_FILE_TEXT {
            self.file_len = usize::MAX;
            return;
        }
        self.file[..file.len()].copy_from_slice(file);
        self.file_len = file.len();
        self.file_addr = file.as_ptr() as usize;
        self.fixed = tracing_trace2_dst::statics::is_immutable(self.file_addr, file.len());
        self.line = line;
        self.text[..text.len()].copy_from_slice(text);
        self.text_len = text.len();
    }
}

/// Appends `,"file":"<file>","line":<line>`.
#[cfg_attr(not(debug_assertions), inline(always))]
fn push_file_line(w: &mut Appender<'_>, file: &str, line: u32) {
    let done = LINE_CACHE.try_with(|cell| {
        let Ok(cache) = cell.try_borrow() else {
            return false;
        };
        count_borrow();
        cache.put_file_line(w, file, line)
    });
    if done != Ok(true) {
        w.with_vec(|out| push_file_line_slow(out, file, line));
    }
}

/// [`push_file_line`] for a callsite not in the cache: write the keys out and keep
/// them for the next line.
#[cold]
#[inline(never)]
fn push_file_line_slow(out: &mut Vec<u8>, file: &str, line: u32) {
    let start = out.len();
    render_file_line(out, file, line);
    let _ = LINE_CACHE.try_with(|cell| {
        // In a nested call (or while the thread's storage is torn down): no cache.
        if let Ok(mut cache) = cell.try_borrow_mut() {
            cache.file_line[file_slot(line)].store(file, line, &out[start..]);
        }
    });
}

fn render_file_line(out: &mut Vec<u8>, file: &str, line: u32) {
    let w = &mut Appender::new(out);
    w.put_json_field(key!("file"), file);
    w.put_u64_after(key!("line"), u64::from(line));
}

#[cfg_attr(not(debug_assertions), inline(always))]
fn push_int_key(w: &mut Appender<'_>, key: &[u8], value: i64) {
    w.put_i64_after(key, value);
}

#[cfg_attr(not(debug_assertions), inline(always))]
fn push_uint_key(w: &mut Appender<'_>, key: &[u8], value: u64) {
    w.put_u64_after(key, value);
}

#[cfg_attr(not(debug_assertions), inline(always))]
fn push_seconds_key(w: &mut Appender<'_>, key: &[u8], micros: u64) {
    w.put_seconds_after(key, micros);
}

/// Appends a string array; `git_first` puts `"git"` before the elements, the way git
/// shows a child that is a git sub-command.
fn push_array_key(w: &mut Appender<'_>, key: &[u8], git_first: bool, items: &[&str]) {
    w.put_all([key, b"["]);
    if git_first {
        w.put_json_str("git");
    }
    for (i, item) in items.iter().enumerate() {
        let comma: &[u8] = if git_first || i > 0 { b"," } else { b"" };
        w.put_json_field(comma, item);
    }
    w.put(b"]");
}

/// The keys of `region_enter` (`t_rel_us` is `None`) and `region_leave`.
#[cfg_attr(not(debug_assertions), inline(always))]
fn push_region(w: &mut Appender<'_>, region: &RegionInfo<'_>, t_rel_us: Option<u64>, nesting: u32) {
    if let Some(repo) = region.repo {
        push_int_key(w, key!("repo"), repo);
    }
    if let Some(t_rel_us) = t_rel_us {
        push_seconds_key(w, key!("t_rel"), t_rel_us);
    }
    push_uint_key(w, key!("nesting"), u64::from(nesting));
    if let Some(category) = region.category {
        w.put_json_field(key!("category"), category);
    }
    if let Some(label) = region.label {
        w.put_json_field(key!("label"), label);
    }
    if let Some(msg) = region.msg {
        w.put_json_field(key!("msg"), msg);
    }
}

/// The keys `data` and `data_json` share, everything up to `value`.
#[cfg_attr(not(debug_assertions), inline(always))]
fn push_data_head(
    w: &mut Appender<'_>,
    repo: Option<i64>,
    t_abs_us: u64,
    t_rel_us: u64,
    nesting: u32,
    category: &str,
    key: &str,
) {
    push_data_numbers(w, repo, t_abs_us, t_rel_us, nesting);
    w.put_json_field(key!("category"), category);
    w.put_json_field(key!("key"), key);
}

/// The keys `data` and `data_json` share before their texts.
#[cfg_attr(not(debug_assertions), inline(always))]
fn push_data_numbers(
    w: &mut Appender<'_>,
    repo: Option<i64>,
    t_abs_us: u64,
    t_rel_us: u64,
    nesting: u32,
) {
    if let Some(repo) = repo {
        push_int_key(w, key!("repo"), repo);
    }
    push_seconds_key(w, key!("t_abs"), t_abs_us);
    push_seconds_key(w, key!("t_rel"), t_rel_us);
    push_uint_key(w, key!("nesting"), u64::from(nesting));
}

fn push_child_start(w: &mut Appender<'_>, child: &ChildInfo<'_>) {
    push_uint_key(w, key!("child_id"), child.child_id);
    w.put_json_field(key!("child_class"), child.class);
    if let Some(hook_name) = child.hook_name {
        w.put_json_field(key!("hook_name"), hook_name);
    }
    if let Some(cd) = child.cd {
        w.put_json_field(key!("cd"), cd);
    }
    w.put(key!("use_shell"));
    w.put(if child.use_shell { b"true" } else { b"false" });
    push_array_key(w, key!("argv"), child.is_git, child.argv);
}

fn push_timer(w: &mut Appender<'_>, timer: &TimerInfo<'_>) {
    w.put_json_field(key!("category"), timer.category);
    w.put_json_field(key!("name"), timer.name);
    // Same signed conversion as the counter total (see there).
    push_int_key(w, key!("intervals"), timer.intervals as i64);
    for (key, nanos) in [
        (key!("t_total"), timer.total_ns),
        (key!("t_min"), timer.min_ns),
        (key!("t_max"), timer.max_ns),
    ] {
        w.put(key);
        w.with_vec(|out| push_timer_seconds(out, nanos));
    }
}

#[cfg(test)]
mod sid_thread_tests {
    use super::*;
    use tracing_trace2_record::text::{push_json_str, push_utc_datetime};

    /// `push_sid_thread`'s text (through the cache) is the keys' uncached text.
    fn assert_cached_is_direct(sid: &str, thread: &str, wall_us: Option<i64>) {
        let mut cached = b"x".to_vec();
        push_sid_thread(&mut Appender::new(&mut cached), sid, thread, wall_us);
        let mut direct = b"x\"sid\":".to_vec();
        push_json_str(&mut direct, sid);
        direct.extend_from_slice(b",\"thread\":");
        push_json_str(&mut direct, thread);
        if let Some(wall_us) = wall_us {
            direct.extend_from_slice(b",\"time\":\"");
            push_utc_datetime(&mut direct, wall_us);
            direct.push(b'"');
        }
        assert_eq!(
            String::from_utf8_lossy(&cached),
            String::from_utf8_lossy(&direct),
            "{sid} {thread} {wall_us:?}"
        );
    }

    /// The common keys of whole lines, both caches read under one borrow: the sid and
    /// thread kept with the file missed, the other way round, both missed, brief mode
    /// (no time) and no file; each line is what the keys' uncached text gives.
    #[test]
    fn common_keys_follow_every_change_of_either_cache() {
        use tracing_trace2_record::{Callsite, Timestamp};
        let sids = ["20261121T232137.816920Z-H0a7c9cdf-P00002a1e", "q\"x"];
        let threads = ["main", "th01:worker"];
        let files = [
            Some("benches/support/mod.rs"),
            Some("src/a.rs"),
            None,
            Some(""),
        ];
        let times = [
            1_795_303_297_816_991,
            1_795_303_297_999_999,
            1_795_303_298_000_000,
        ];
        for format in [EventFormat::new(), EventFormat::new().with_brief(true)] {
            for round in 0..2 {
                for sid in sids {
                    for thread in threads {
                        for file in files {
                            for (i, wall_us) in times.into_iter().enumerate() {
                                let line = 30 + (i as u32 + round) % 2;
                                let record = Record {
                                    event: Trace2Event::RegionEnter {
                                        region: RegionInfo::default(),
                                        nesting: 1,
                                    },
                                    time: Timestamp {
                                        wall_us,
                                        t_abs_us: 0,
                                    },
                                    sid,
                                    depth: 0,
                                    thread,
                                    callsite: Callsite { file, line },
                                    open_regions: 0,
                                };
                                let mut cached = b"x".to_vec();
                                format.format(&record, &mut cached);
                                let mut direct = b"x{\"event\":\"region_enter\",\"sid\":".to_vec();
                                push_json_str(&mut direct, sid);
                                direct.extend_from_slice(b",\"thread\":");
                                push_json_str(&mut direct, thread);
                                if !format.brief() {
                                    direct.extend_from_slice(b",\"time\":\"");
                                    push_utc_datetime(&mut direct, wall_us);
                                    direct.push(b'"');
                                    if let Some(file) = file.filter(|file| !file.is_empty()) {
                                        direct.extend_from_slice(b",\"file\":");
                                        push_json_str(&mut direct, file);
                                        direct.extend_from_slice(
                                            format!(",\"line\":{line}").as_bytes(),
                                        );
                                    }
                                }
                                direct.extend_from_slice(b",\"nesting\":1}\n");
                                assert_eq!(
                                    String::from_utf8_lossy(&cached),
                                    String::from_utf8_lossy(&direct),
                                    "{sid} {thread} {file:?} {wall_us}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    /// A thread's second line from the same callsite takes its sid, thread, file and
    /// line from the caches, in full and brief mode (which has no file).
    #[test]
    fn whole_lines_use_both_caches() {
        use tracing_trace2_record::{Callsite, Timestamp};
        for format in [EventFormat::new(), EventFormat::new().with_brief(true)] {
            let record = Record {
                event: Trace2Event::RegionEnter {
                    region: RegionInfo::default(),
                    nesting: 1,
                },
                time: Timestamp {
                    wall_us: 1_795_303_297_816_991,
                    t_abs_us: 0,
                },
                sid: "20261121T232137.816920Z-H0a7c9cdf-P00002a1e",
                depth: 0,
                thread: "main",
                callsite: Callsite {
                    file: Some("src/whole_lines.rs"),
                    line: 12,
                },
                open_regions: 0,
            };
            let mut first = Vec::new();
            format.format(&record, &mut first);
            let (sid_thread, file_line) = cache_hits();
            let borrows = CACHE_BORROWS.with(std::cell::Cell::get);
            let mut second = Vec::new();
            format.format(&record, &mut second);
            assert_eq!(first, second);
            let file_hits = u64::from(!format.brief());
            assert_eq!(cache_hits(), (sid_thread + 1, file_line + file_hits));
            // Both from one borrow of the thread's caches.
            assert_eq!(CACHE_BORROWS.with(std::cell::Cell::get), borrows + 1);
        }
    }

    /// A region's category, label and message, each there or not, plain or to be
    /// escaped, are each written as their own JSON string.
    #[test]
    fn region_strings_are_each_their_own_json() {
        let texts = [
            None,
            Some(""),
            Some("index"),
            Some("q\"uote"),
            Some("a\nlonger_label_text"),
        ];
        for category in texts {
            for label in texts {
                for msg in texts {
                    let region = RegionInfo {
                        repo: None,
                        category,
                        label,
                        msg,
                    };
                    let mut line = Vec::new();
                    push_region(&mut Appender::new(&mut line), &region, None, 1);
                    let mut direct = b",\"nesting\":1".to_vec();
                    for (key, text) in [("category", category), ("label", label), ("msg", msg)] {
                        if let Some(text) = text {
                            direct.extend_from_slice(format!(",\"{key}\":").as_bytes());
                            push_json_str(&mut direct, text);
                        }
                    }
                    assert_eq!(
                        String::from_utf8_lossy(&line),
                        String::from_utf8_lossy(&direct)
                    );
                }
            }
        }
    }

    /// A datum's category, key and value, plain or to be escaped, are each written as
    /// their own JSON string, and the line ends after the value.
    #[test]
    fn data_strings_are_each_their_own_json() {
        let texts = ["", "index", "q\"uote", "a\nlonger_text_than_sixteen"];
        for category in texts {
            for key in texts {
                for value in texts {
                    let record = Record {
                        event: Trace2Event::Data {
                            repo: None,
                            category,
                            key,
                            value,
                            nesting: 1,
                            t_rel_us: 0,
                        },
                        time: Default::default(),
                        sid: "s",
                        depth: 0,
                        thread: "main",
                        callsite: Default::default(),
                        open_regions: 0,
                    };
                    let mut line = Vec::new();
                    EventFormat::new().format(&record, &mut line);
                    let line = String::from_utf8(line).unwrap();
                    let tail = &line[line.find(",\"nesting\":1").unwrap()..];
                    let mut direct = b",\"nesting\":1".to_vec();
                    for (name, text) in [("category", category), ("key", key), ("value", value)] {
                        direct.extend_from_slice(format!(",\"{name}\":").as_bytes());
                        push_json_str(&mut direct, text);
                    }
                    direct.extend_from_slice(b"}\n");
                    assert_eq!(tail, String::from_utf8_lossy(&direct));
                }
            }
        }
    }

    /// The literal heads of the usual lines spell what the general path writes.
    #[test]
    fn hot_event_heads_are_the_event_names() {
        let region = RegionInfo::default();
        let events = [
            Trace2Event::RegionEnter { region, nesting: 1 },
            Trace2Event::RegionLeave {
                region,
                nesting: 1,
                t_rel_us: 0,
            },
            Trace2Event::Data {
                repo: None,
                category: "c",
                key: "k",
                value: "v",
                nesting: 1,
                t_rel_us: 0,
            },
            Trace2Event::DataJson {
                repo: None,
                category: "c",
                key: "k",
                json: "{}",
                nesting: 1,
                t_rel_us: 0,
            },
        ];
        for event in events {
            let head = hot_event_head(&event).unwrap();
            assert_eq!(
                head,
                format!("{{\"event\":\"{}\",", event.name()).as_bytes()
            );
        }
        assert!(hot_event_head(&Trace2Event::ThreadStart).is_none());
    }

    /// The per-thread callsite cache never hands out the text of another callsite:
    /// files and lines alternate, share slots, grow past what is kept, need escaping.
    #[test]
    fn cached_file_line_follows_every_change() {
        let long = "d/".repeat(CACHED_FILE);
        let files = [
            "benches/peers.rs",
            "src/main.rs",
            "benches/peers.rs",
            "q\"uote\\d.rs",
            &long,
            "benches/peers.rt",
            "",
        ];
        let lines = [151, 155, 151, 0, 4, 8, 156, 164, 163, 164, u32::MAX];
        for _ in 0..3 {
            for file in files {
                for line in lines {
                    let mut cached = b"x".to_vec();
                    push_file_line(&mut Appender::new(&mut cached), file, line);
                    let mut direct = b"x,\"file\":".to_vec();
                    push_json_str(&mut direct, file);
                    direct.extend_from_slice(format!(",\"line\":{line}").as_bytes());
                    assert_eq!(
                        String::from_utf8_lossy(&cached),
                        String::from_utf8_lossy(&direct),
                        "{file} {line}"
                    );
                }
            }
        }
    }

    /// Lines from the callsites a thread uses take the cached text: neighbouring lines
    /// keep their slots apart, and a file name as long as the cache keeps is kept (the
    /// text is the same either way, so the count of hits is what shows it).
    #[test]
    fn callsites_come_from_the_cache() {
        let lines: Vec<u32> = (1..100).fold(Vec::new(), |mut lines, line| {
            if lines.len() < FILE_SLOTS && lines.iter().all(|&l| file_slot(l) != file_slot(line)) {
                lines.push(line);
            }
            lines
        });
        assert_eq!(lines.len(), FILE_SLOTS, "neighbouring lines share slots");
        assert!(
            lines.iter().all(|&line| line < 2 * FILE_SLOTS as u32),
            "{lines:?}"
        );
        let longest = "f".repeat(CACHED_FILE);
        let too_long = "f".repeat(CACHED_FILE + 1);
        // At line 7, `,"file":"…","line":7` is 19 bytes around the escaped name: these
        // names' texts are as long as the cache keeps, and one byte longer.
        let longest_text = format!("{}{}", "\"".repeat(45), "f".repeat(83));
        let too_long_text = format!("{}{}", "\"".repeat(46), "f".repeat(82));
        for (file, kept) in [(&longest_text, true), (&too_long_text, false)] {
            push_file_line(&mut Appender::new(&mut Vec::new()), file, 7);
            let before = cache_hits().1;
            let mut out = Vec::new();
            push_file_line(&mut Appender::new(&mut out), file, 7);
            assert_eq!(out.len(), CACHED_FILE_TEXT + usize::from(!kept));
            assert_eq!(cache_hits().1 - before, u64::from(kept), "{}", out.len());
        }
        for (file, kept) in [("src/a.rs", true), (&longest, true), (&too_long, false)] {
            for &line in &lines {
                push_file_line(&mut Appender::new(&mut Vec::new()), file, line);
            }
            let before = cache_hits().1;
            for &line in &lines {
                push_file_line(&mut Appender::new(&mut Vec::new()), file, line);
            }
            let expected = if kept { lines.len() as u64 } else { 0 };
            assert_eq!(cache_hits().1 - before, expected, "{} bytes", file.len());
        }
    }

    /// The sid and thread of a thread's lines come from the cache while they stay the
    /// same, up to a text as long as the cache keeps.
    #[test]
    fn sid_and_thread_come_from_the_cache() {
        let thread = "t".repeat(CACHED_THREAD);
        // `"sid":"…","thread":"…"`: 20 bytes around the escaped values.
        let fits = "\"".repeat((CACHED_TEXT - 20 - CACHED_THREAD) / 2);
        let over = "\"".repeat((CACHED_TEXT - 20 - CACHED_THREAD) / 2 + 1);
        for (sid, kept) in [("s", true), (fits.as_str(), true), (over.as_str(), false)] {
            for wall_us in [None, Some(1_795_303_297_816_991)] {
                push_sid_thread(&mut Appender::new(&mut Vec::new()), sid, &thread, wall_us);
                let before = cache_hits().0;
                let mut out = Vec::new();
                push_sid_thread(&mut Appender::new(&mut out), sid, &thread, wall_us);
                assert_eq!(cache_hits().0 - before, u64::from(kept), "{}", sid.len());
                let mut direct = b"\"sid\":".to_vec();
                push_json_str(&mut direct, sid);
                assert!(out.starts_with(&direct));
            }
        }
    }

    /// Task lanes taking turns on one thread under one sid: each line is the text of
    /// its own lane and second, the sid's kept text and the second's date carried over
    /// when only the thread name changes, and a lane's next line comes from the cache.
    #[test]
    fn lanes_taking_turns_keep_sid_and_second() {
        let sid = "20261121T232137.816920Z-H0a7c9cdf-P00002a1e";
        let lanes = [
            "task-lane-01",
            "task-lane-02",
            "th01:tokio-rt-worker",
            "q\"lane",
            "main",
        ];
        let times = [
            Some(1_795_303_297_816_991),
            Some(1_795_303_297_999_999),
            None,
            Some(1_795_303_298_000_000),
            Some(1_795_303_297_000_000),
        ];
        for wall_us in times {
            for lane in lanes {
                for repeat in 0..2 {
                    let before = cache_hits().0;
                    assert_cached_is_direct(sid, lane, wall_us);
                    assert_eq!(cache_hits().0 - before, repeat, "{lane} {wall_us:?}");
                }
            }
        }
    }

    /// A file found at the address the cached text was made for is taken without a
    /// comparison only when that address is read-only: a buffer rewritten in place
    /// (a decoded record's, on the deferred writer's worker) gets its new text.
    #[test]
    fn cached_file_line_confirms_text_that_can_change() {
        let literal = "src/a_literal_path_longer_than_16.rs";
        let mut buffer = literal.as_bytes().to_vec();
        for round in 0..3u8 {
            let file = std::str::from_utf8(&buffer).unwrap().to_owned();
            for text in [literal, file.as_str()] {
                let mut cached = Vec::new();
                push_file_line(&mut Appender::new(&mut cached), text, 42);
                push_file_line(&mut Appender::new(&mut cached), text, 42);
                let mut direct = b",\"file\":".to_vec();
                push_json_str(&mut direct, text);
                direct.extend_from_slice(b",\"line\":42");
                assert_eq!(cached, [direct.clone(), direct].concat(), "round {round}");
            }
            // The same length at a heap address, with other text.
            buffer[4] = b'b' + round;
            let mut in_place = String::from_utf8(buffer.clone()).unwrap();
            let addr = in_place.as_ptr();
            let mut first = Vec::new();
            push_file_line(&mut Appender::new(&mut first), &in_place, 7);
            in_place.replace_range(4..5, "Z");
            assert_eq!(in_place.as_ptr(), addr);
            let mut second = Vec::new();
            push_file_line(&mut Appender::new(&mut second), &in_place, 7);
            assert!(String::from_utf8(second).unwrap().contains("src/Z"));
            assert!(
                String::from_utf8(first)
                    .unwrap()
                    .contains(&format!("src/{}", (b'b' + round) as char))
            );
        }
    }

    /// A sid found at the address the cached text was made for is taken without a
    /// comparison only when that text is pinned (the process's session id): a sid of the
    /// same length rewritten in place at a heap address gets its new text.
    #[test]
    fn cached_sid_confirms_text_that_can_change() {
        let pinned: &'static str = String::from("20261128T221500.000000Z-H0-Ppinned").leak();
        tracing_trace2_dst::statics::pin(pinned);
        let mut in_place = String::from("20261128T221500.000000Z-H0-Pbuffer");
        let addr = in_place.as_ptr();
        for round in 0..3 {
            for sid in [pinned, in_place.as_str(), pinned] {
                let mut twice = Vec::new();
                push_sid_thread(&mut Appender::new(&mut twice), sid, "main", None);
                push_sid_thread(&mut Appender::new(&mut twice), sid, "main", None);
                let mut once = Vec::new();
                render_sid_thread(&mut once, sid, "main");
                assert_eq!(twice, [once.clone(), once].concat(), "round {round}");
            }
            let before = cache_hits().0;
            push_sid_thread(&mut Appender::new(&mut Vec::new()), pinned, "main", None);
            assert_eq!(cache_hits().0 - before, 1);
            // Kept for the heap sid, which then changes in place.
            push_sid_thread(&mut Appender::new(&mut Vec::new()), &in_place, "main", None);
            in_place.replace_range(28..29, &round.to_string());
            assert_eq!(in_place.as_ptr(), addr);
            let mut out = Vec::new();
            push_sid_thread(&mut Appender::new(&mut out), &in_place, "main", None);
            assert!(String::from_utf8(out).unwrap().contains(&in_place));
        }
    }

    /// The per-thread cache never hands out the text of another sid, thread or second:
    /// values alternate, grow past what is cached, and need escaping.
    #[test]
    fn cached_prefix_follows_every_change() {
        let long_sid = "p".repeat(CACHED_SID + 1);
        let long_thread = "t".repeat(CACHED_THREAD + 1);
        // Short enough to keep, but six times as long once escaped: too long a text.
        let escaped_sid = "\u{1}".repeat(CACHED_SID);
        let sids = [
            "20261121T232137.816920Z-H0a7c9cdf-P00002a1e",
            "a/b",
            "q\"x",
            &long_sid,
            &escaped_sid,
        ];
        let threads = ["main", "th01:worker", "th02:work\ter", &long_thread, "main"];
        // Seconds alternate, repeat, and sit at the ends of the range.
        let times = [
            Some(1_795_303_297_816_991),
            Some(1_795_303_297_999_999),
            None,
            Some(1_795_303_298_000_000),
            Some(1_795_303_297_000_000),
            Some(-1),
            Some(0),
            Some(i64::MAX),
            Some(i64::MIN),
            Some(i64::MAX),
            Some(1_795_303_298_000_001),
            None,
            Some(1_795_303_298_000_002),
        ];
        for _ in 0..2 {
            for sid in sids {
                for thread in threads {
                    for wall_us in times {
                        assert_cached_is_direct(sid, thread, wall_us);
                    }
                }
            }
        }
    }
}
