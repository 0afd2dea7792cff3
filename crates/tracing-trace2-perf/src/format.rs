//! The Perf line formatter: fixed columns, one line per Trace2 event.
//!
//! Column widths, blank forms and payloads follow the reference (section 3 of
//! `trace2-format.md`) and were checked byte for byte against git 2.47.3 captures.
//!
//! Most of a Perf line is padding, so the formatter never pushes a column and then its
//! spaces. Region and data lines, nearly all of a trace, take a fixed layout when every
//! column has its usual width: a template line (spaces, bars, dots) is appended in one
//! copy and the values are written over it at constant offsets. Any other line grows the
//! buffer once by an upper bound, filled with spaces, and writes the visible bytes at a
//! moving position, padding being a jump forward. Either way, numbers are turned into
//! text two digits at a time in small fixed arrays, short strings are copied with a few
//! fixed-size moves, and the `HH:MM:SS` of the time of day is worked out once a second.

use std::cell::Cell;

use tracing_trace2_record::text::{
    copy_short, digits6, pair, push_i64, push_quoted, push_quoted_list, push_timer_seconds,
    push_u64,
};
use tracing_trace2_record::{ChildInfo, Format, Record, RegionInfo, Trace2Event};

/// Width of the `file:line` column.
const FILE_LINE_WIDTH: usize = 28;
/// Width of the thread-name column (names are at most this long by construction).
const THREAD_WIDTH: usize = 24;
/// Minimum width of the event-name column.
const EVENT_WIDTH: usize = 12;
/// Minimum width of the repository column.
const REPO_WIDTH: usize = 3;
/// Exact width of the category column.
const CATEGORY_WIDTH: usize = 12;
/// Width of the `%9.6f` seconds columns (wider only past 99 seconds).
const SECONDS_WIDTH: usize = 9;
/// Open regions shown as indentation at most: git writes two dots per open region,
/// and a real stack of regions stays far below this; a record claiming more (a damaged
/// or hostile recording being replayed) must not make a line gigabytes long.
const MAX_INDENT_REGIONS: u32 = 100_000;

/// The dots of a record's indentation: two per open region, up to the cap.
#[inline]
fn indent_dots(record: &Record<'_>) -> usize {
    2 * record.open_regions.min(MAX_INDENT_REGIONS) as usize
}

/// Bytes a column separator (` | `) takes.
const SEP_LEN: usize = 3;

/// Room for the fixed columns of any line, beyond the thread name, the event name and
/// the dots (which are added to it): the widest value of every number, each column at
/// its full width and every separator.
const COLUMNS_ROOM: usize = 16 // `HH:MM:SS.ffffff `
    + FILE_LINE_WIDTH + SEP_LEN
    + 1 + 10 + SEP_LEN // `d` and a u32
    + THREAD_WIDTH + SEP_LEN
    + EVENT_WIDTH + SEP_LEN
    + 1 + 20 + 1 + SEP_LEN // `r`, an i64 and a space
    + 2 * (21 + SEP_LEN) // a u64 of microseconds as seconds, twice
    + CATEGORY_WIDTH + SEP_LEN;

#[cfg(test)]
thread_local! {
    /// How many lines the calling thread wrote in the fixed layout (tests only: the
    /// general path writes the same bytes, so only this count shows which path ran).
    static FIXED_LINES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// How many `file:line` columns the calling thread wrote by the uncut short form
    /// (tests only, for the same reason).
    static SHORT_FILE_LINES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Formats records as Trace2 Perf lines (`GIT_TRACE2_PERF`).
///
/// The settings are fixed at construction: the formatter never reads the clock or the
/// environment, so the caller works out the local UTC offset once and passes it in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PerfFormat {
    brief: bool,
    utc_offset: i32,
}

/// The values shown in the optional middle columns of a line.
#[derive(Clone, Copy, Default)]
struct Columns<'a> {
    repo: Option<i64>,
    t_abs: bool,
    t_rel_us: Option<u64>,
    category: Category<'a>,
}

/// What the category column shows.
#[derive(Clone, Copy, Default)]
enum Category<'a> {
    #[default]
    Blank,
    Text(&'a str),
    /// `def_param` shows `scope:<scope>`, cut to the column like any category.
    Scope(&'a str),
}

impl PerfFormat {
    /// A formatter for full lines (time and `file:line` shown) in UTC.
    pub fn new() -> Self {
        Self::default()
    }

    /// Brief mode (`GIT_TRACE2_PERF_BRIEF`) drops the time and `file:line` columns.
    pub fn with_brief(self, brief: bool) -> Self {
        Self { brief, ..self }
    }

    /// Sets the offset, in seconds east of UTC, used for the time-of-day column.
    pub fn with_utc_offset(self, seconds_east: i32) -> Self {
        Self {
            utc_offset: seconds_east,
            ..self
        }
    }

    /// Whether brief mode is on.
    pub fn is_brief(&self) -> bool {
        self.brief
    }

    /// The offset, in seconds east of UTC, used for the time of day.
    pub fn utc_offset(&self) -> i32 {
        self.utc_offset
    }

    /// Writes the whole line of a region or data event when every column has its usual
    /// width and the line fits in [`TEMPLATE`], as on nearly every line. Returns
    /// `false`, having written nothing, otherwise.
    ///
    /// Each column then starts at a known offset: the template, with its spaces, bars
    /// and dots, is appended in one copy and only the values are written over it.
    #[inline(always)]
    fn push_fixed_line(
        &self,
        record: &Record<'_>,
        cols: &Columns<'_>,
        plain: &Plain<'_>,
        out: &mut Vec<u8>,
    ) -> bool {
        let narrow = |micros: u64| micros < NARROW_SECONDS;
        let payload = plain.payload.len();
        let room = TEMPLATE.len() - AT_DOTS - 1;
        let dots = indent_dots(record);
        let fits = record.depth < 10
            && record.thread.len() <= THREAD_WIDTH
            && cols.repo.is_none_or(|repo| (0..10).contains(&repo))
            && (!cols.t_abs || narrow(record.time.t_abs_us))
            && cols.t_rel_us.is_none_or(narrow)
            && dots <= room
            && payload <= room - dots;
        if !fits {
            return false;
        }
        if self.brief {
            self.fixed_line::<AT_D>(record, cols, plain, dots, out);
        } else {
            self.fixed_line::<0>(record, cols, plain, dots, out);
        }
        #[cfg(test)]
        FIXED_LINES.with(|lines| lines.set(lines.get() + 1));
        true
    }

    /// The body of [`Self::push_fixed_line`], once it is known to apply. `FIRST` is where
    /// the line starts in the template: 0 for a full line, [`AT_D`] in brief mode (which
    /// drops the columns before it), so that every offset below is a constant.
    #[inline(always)]
    fn fixed_line<const FIRST: usize>(
        &self,
        record: &Record<'_>,
        cols: &Columns<'_>,
        plain: &Plain<'_>,
        dots: usize,
        out: &mut Vec<u8>,
    ) {
        let start = out.len();
        let payload = plain.payload.len();
        // Template bytes past the dots are placeholders for the payload and the LF.
        out.extend_from_slice(&TEMPLATE[FIRST..AT_DOTS + dots + payload + 1]);
        let (head, tail) = out[start..].split_at_mut(AT_DOTS - FIRST);
        let at = |offset: usize| offset - FIRST;

        if FIRST == 0 {
            put_time_of_day(
                (&mut head[..16]).try_into().unwrap(),
                record.time.wall_us,
                self.utc_offset,
            );
            let column = (&mut head[16..16 + FILE_LINE_WIDTH]).try_into().unwrap();
            put_file_line(column, record.callsite.file, record.callsite.line);
        }
        head[at(AT_DEPTH)] = b'0' + record.depth as u8;
        copy_short(&mut head[at(AT_THREAD)..], record.thread.as_bytes());
        head[at(AT_EVENT)..at(AT_EVENT) + EVENT_WIDTH].copy_from_slice(plain.name);
        if let Some(repo) = cols.repo {
            head[at(AT_REPO)] = b'r';
            head[at(AT_REPO) + 1] = b'0' + repo as u8;
        }
        if cols.t_abs {
            let column = &mut head[at(AT_T_ABS)..at(AT_T_ABS) + SECONDS_WIDTH];
            put_narrow_seconds(column.try_into().unwrap(), record.time.t_abs_us);
        }
        if let Some(t_rel) = cols.t_rel_us {
            let column = &mut head[at(AT_T_REL)..at(AT_T_REL) + SECONDS_WIDTH];
            put_narrow_seconds(column.try_into().unwrap(), t_rel);
        }
        let category = &mut head[at(AT_CATEGORY)..at(AT_CATEGORY) + CATEGORY_WIDTH];
        match cols.category {
            Category::Blank => {}
            Category::Text(text) => copy_short(category, cut(text.as_bytes(), CATEGORY_WIDTH)),
            // Only `def_param` has a scope, and it is neither a region nor a data line.
            Category::Scope(_) => unreachable!("a fixed line with a scope column"),
        }

        // The dots are in the template already.
        let mut end = dots + plain.payload.write(&mut tail[dots..]);
        // Like git, a payload that already ends the line gets no second LF (the byte
        // before the payload, a space or a dot, is never one).
        let last = if end > 0 { tail[end - 1] } else { b' ' };
        if last != b'\n' {
            tail[end] = b'\n';
            end += 1;
        }
        out.truncate(start + AT_DOTS - FIRST + end);
    }

    /// Writes everything up to the dots: the prefix and the nine fixed columns, for any
    /// widths, one column after the other at a moving position.
    fn push_columns(&self, record: &Record<'_>, cols: &Columns<'_>, name: &str, out: &mut Vec<u8>) {
        let dots = indent_dots(record);
        let start = out.len();
        let room = COLUMNS_ROOM + record.thread.len() + name.len() + dots;
        out.resize(start + room, b' ');
        let mut c = Cursor {
            buf: &mut out[start..],
            pos: 0,
        };

        if !self.brief {
            c.put(&time_of_day(record.time.wall_us, self.utc_offset));
            c.put(&file_line_column(
                record.callsite.file,
                record.callsite.line,
            ));
            c.bar();
        }
        c.byte(b'd');
        if record.depth < 10 {
            c.byte(b'0' + record.depth as u8);
        } else {
            c.put_u64(u64::from(record.depth));
        }
        c.bar();
        c.column(record.thread.as_bytes(), THREAD_WIDTH);
        c.bar();
        c.column(name.as_bytes(), EVENT_WIDTH);
        c.bar();

        let column = c.pos;
        if let Some(repo) = cols.repo {
            c.byte(b'r');
            match u8::try_from(repo) {
                Ok(digit @ 0..=9) => c.byte(b'0' + digit),
                _ if repo >= 0 => c.put_u64(repo as u64),
                _ => {
                    c.byte(b'-');
                    c.put_u64(repo.unsigned_abs());
                }
            }
            c.pos += 1;
        }
        c.pad_to(column + REPO_WIDTH);
        c.bar();

        put_optional_seconds(&mut c, cols.t_abs.then_some(record.time.t_abs_us));
        c.bar();
        put_optional_seconds(&mut c, cols.t_rel_us);
        c.bar();

        let column = c.pos;
        match cols.category {
            Category::Blank => {}
            Category::Text(category) => c.put_cut(category.as_bytes(), CATEGORY_WIDTH),
            Category::Scope(scope) => {
                c.put(b"scope:");
                c.put_cut(scope.as_bytes(), CATEGORY_WIDTH - b"scope:".len());
            }
        }
        c.pos = column + CATEGORY_WIDTH;
        c.bar();

        let end = c.pos + dots;
        c.buf[c.pos..end].fill(b'.');
        out.truncate(start + end);
    }
}

/// Times below this many microseconds fit a `%9.6f` column with two digits of seconds.
const NARROW_SECONDS: u64 = 100_000_000;
/// Offsets of the columns in a full line when every column has its usual width: `AT_D`
/// is that of the `d` before the depth, where brief lines start.
const AT_D: usize = 16 + FILE_LINE_WIDTH + SEP_LEN;
const AT_DEPTH: usize = AT_D + 1;
const AT_THREAD: usize = AT_DEPTH + 1 + SEP_LEN;
const AT_EVENT: usize = AT_THREAD + THREAD_WIDTH + SEP_LEN;
const AT_REPO: usize = AT_EVENT + EVENT_WIDTH + SEP_LEN;
const AT_T_ABS: usize = AT_REPO + REPO_WIDTH + SEP_LEN;
const AT_T_REL: usize = AT_T_ABS + SECONDS_WIDTH + SEP_LEN;
const AT_CATEGORY: usize = AT_T_REL + SECONDS_WIDTH + SEP_LEN;
const AT_DOTS: usize = AT_CATEGORY + CATEGORY_WIDTH + SEP_LEN;
/// Length of [`TEMPLATE`]: lines longer than this take the general path.
const TEMPLATE_LEN: usize = 320;

/// A full line with every value blank: spaces, the bars and the `d` of the depth, then
/// dots to the end, for regions and as placeholders for the payload.
const TEMPLATE: [u8; TEMPLATE_LEN] = {
    let mut line = [b' '; TEMPLATE_LEN];
    let bars = [
        AT_DEPTH - 3,
        AT_THREAD - 2,
        AT_EVENT - 2,
        AT_REPO - 2,
        AT_T_ABS - 2,
        AT_T_REL - 2,
        AT_CATEGORY - 2,
        AT_DOTS - 2,
    ];
    let mut i = 0;
    while i < bars.len() {
        line[bars[i]] = b'|';
        i += 1;
    }
    line[AT_D] = b'd';
    let mut i = AT_DOTS;
    while i < line.len() {
        line[i] = b'.';
        i += 1;
    }
    line
};

/// The first `width` bytes of `bytes` (`%-.Ns` cuts byte-wise, as git does).
#[inline(always)]
fn cut(bytes: &[u8], width: usize) -> &[u8] {
    &bytes[..bytes.len().min(width)]
}

/// A write position in a stretch of the output already filled with spaces and known to
/// be long enough: each write is a plain copy (a bounds check away from a panic, never
/// from writing out of place), and skipping bytes leaves spaces behind.
struct Cursor<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl Cursor<'_> {
    #[inline(always)]
    fn put(&mut self, bytes: &[u8]) {
        let end = self.pos + bytes.len();
        self.buf[self.pos..end].copy_from_slice(bytes);
        self.pos = end;
    }

    #[inline(always)]
    fn byte(&mut self, byte: u8) {
        self.buf[self.pos] = byte;
        self.pos += 1;
    }

    /// Writes at most `width` bytes of `bytes` (`%-.Ns`: the cut is byte-wise, as git's).
    #[inline(always)]
    fn put_cut(&mut self, bytes: &[u8], width: usize) {
        self.put(&bytes[..bytes.len().min(width)]);
    }

    /// Moves on to `pos` unless already past it: the bytes skipped stay spaces.
    #[inline(always)]
    fn pad_to(&mut self, pos: usize) {
        self.pos = self.pos.max(pos);
    }

    /// Writes `bytes` left-justified in at least `width` bytes (`%-Ns`).
    #[inline(always)]
    fn column(&mut self, bytes: &[u8], width: usize) {
        let column = self.pos;
        self.put(bytes);
        self.pad_to(column + width);
    }

    /// The separator ` | `: only the bar needs writing, the spaces are there.
    #[inline(always)]
    fn bar(&mut self) {
        self.buf[self.pos + 1] = b'|';
        self.pos += SEP_LEN;
    }

    #[inline(always)]
    fn put_u64(&mut self, value: u64) {
        let mut digits = [0; 20];
        let from = decimal(value, &mut digits);
        self.put(&digits[from..]);
    }
}

/// Writes `value` in decimal at the end of `digits`, two digits at a time, and returns
/// where the text begins.
#[inline(always)]
fn decimal(mut value: u64, digits: &mut [u8; 20]) -> usize {
    let mut from = digits.len();
    while value >= 100 {
        from -= 2;
        digits[from..from + 2].copy_from_slice(&pair((value % 100) as usize));
        value /= 100;
    }
    if value >= 10 {
        from -= 2;
        digits[from..from + 2].copy_from_slice(&pair(value as usize));
    } else {
        from -= 1;
        digits[from] = b'0' + value as u8;
    }
    from
}

/// `HH:MM:SS.ffffff ` (the space included) of `wall_us` seen `offset_secs` east of UTC.
#[inline(always)]
fn time_of_day(wall_us: i64, offset_secs: i32) -> [u8; 16] {
    let mut text = [b' '; 16];
    put_time_of_day(&mut text, wall_us, offset_secs);
    text
}

/// Writes `HH:MM:SS.ffffff` over the first 15 of 16 bytes that end with a space.
#[inline(always)]
fn put_time_of_day(dst: &mut [u8; 16], wall_us: i64, offset_secs: i32) {
    // Wrapping: a wall time near the ends of `i64` (a damaged record) must not panic.
    let local_us = wall_us.wrapping_add(i64::from(offset_secs) * 1_000_000);
    let secs = local_us.div_euclid(1_000_000);
    let micros = local_us.rem_euclid(1_000_000) as u32;
    dst[..8].copy_from_slice(&cached_second_text(secs));
    dst[8] = b'.';
    dst[9..15].copy_from_slice(&digits6(micros));
}

/// `HH:MM:SS` of a time in whole seconds (Unix time shifted to the local zone).
fn second_text(secs: i64) -> [u8; 8] {
    let secs_of_day = secs.rem_euclid(86_400) as u32;
    let mut text = *b"00:00:00";
    text[0..2].copy_from_slice(&pair((secs_of_day / 3600) as usize));
    text[3..5].copy_from_slice(&pair((secs_of_day / 60 % 60) as usize));
    text[6..8].copy_from_slice(&pair((secs_of_day % 60) as usize));
    text
}

thread_local! {
    /// The last second [`cached_second_text`] was asked for on this thread, and its text.
    static LAST_SECOND: Cell<(i64, [u8; 8])> = const { Cell::new((i64::MIN, [0; 8])) };
}

/// [`second_text`], worked out once per second and thread: lines come many a second.
#[inline(always)]
fn cached_second_text(secs: i64) -> [u8; 8] {
    LAST_SECOND
        .try_with(|last| {
            let (second, text) = last.get();
            if second == secs {
                return text;
            }
            let text = second_text(secs);
            last.set((secs, text));
            text
        })
        // While the thread's storage is torn down: no cache.
        .unwrap_or_else(|_| second_text(secs))
}

/// The 28-byte `file:line` column: long locations keep `...` and their last 25 bytes.
#[inline(always)]
fn file_line_column(file: Option<&str>, line: u32) -> [u8; FILE_LINE_WIDTH] {
    let mut column = [b' '; FILE_LINE_WIDTH];
    put_file_line(&mut column, file, line);
    column
}

/// Writes `file:line` into `column`, which holds spaces. The line number is turned into
/// text once, and only the part shown is copied.
#[inline(always)]
fn put_file_line(column: &mut [u8; FILE_LINE_WIDTH], file: Option<&str>, line: u32) {
    let Some(file) = file.filter(|f| !f.is_empty()) else {
        return;
    };
    let file = file.as_bytes();
    let len = file.len();
    if line < 10_000 && (3..FILE_LINE_WIDTH - 4).contains(&len) {
        // The usual case, with no cut: the line's four digits, leading zeros included,
        // are written so that they end where the number ends; then the file name and
        // the `:` cover the zeros that are not part of the number.
        let digits =
            1 + usize::from(line >= 10) + usize::from(line >= 100) + usize::from(line >= 1000);
        let [a, b] = pair((line / 100) as usize);
        let [c, d] = pair((line % 100) as usize);
        let end = len + 1 + digits;
        column[end - 4..end].copy_from_slice(&[a, b, c, d]);
        copy_short(column, file);
        column[len] = b':';
        #[cfg(test)]
        SHORT_FILE_LINES.with(|short| short.set(short.get() + 1));
        return;
    }
    let mut digits = [0; 20];
    let from = decimal(u64::from(line), &mut digits);
    let line = &digits[from..];
    let (at, shown) = if len + 1 + line.len() <= FILE_LINE_WIDTH {
        (0, file)
    } else {
        // The tail always holds part of the file name: the line has at most 10 digits.
        column[..3].copy_from_slice(b"...");
        (3, &file[len - (FILE_LINE_WIDTH - 3 - 1 - line.len())..])
    };
    copy_short(&mut column[at..], shown);
    column[at + shown.len()] = b':';
    copy_short(&mut column[at + shown.len() + 1..], line);
}

/// Writes a `%9.6f` column for `micros` below [`NARROW_SECONDS`] over nine spaces.
#[inline(always)]
fn put_narrow_seconds(dst: &mut [u8; SECONDS_WIDTH], micros: u64) {
    let whole = (micros / 1_000_000) as u32;
    if whole >= 10 {
        dst[0..2].copy_from_slice(&pair((whole % 100) as usize));
    } else {
        dst[1] = b'0' + whole as u8;
    }
    dst[2] = b'.';
    dst[3..].copy_from_slice(&digits6((micros % 1_000_000) as u32));
}

/// Writes a `%9.6f` seconds column, or leaves its nine spaces when there is no value.
#[inline]
fn put_optional_seconds(c: &mut Cursor<'_>, micros: Option<u64>) {
    let Some(micros) = micros else {
        c.pos += SECONDS_WIDTH;
        return;
    };
    if micros < NARROW_SECONDS {
        let mut text = [b' '; SECONDS_WIDTH];
        put_narrow_seconds(&mut text, micros);
        c.put(&text);
    } else {
        c.put_u64(micros / 1_000_000);
        c.byte(b'.');
        c.put(&digits6((micros % 1_000_000) as u32));
    }
}
/// What the fixed layout needs beyond the columns, for the events that come by the
/// thousand (regions and data): the event-name column, already padded, and the payload.
struct Plain<'a> {
    name: &'static [u8; EVENT_WIDTH],
    payload: Payload<'a>,
}

/// The payload of a region or data line.
enum Payload<'a> {
    /// `label:<label>` then ` <message>`: the space comes with the message, label or not.
    Region {
        label: Option<&'a [u8]>,
        msg: Option<&'a [u8]>,
    },
    /// `<key>:<value>`.
    Data { key: &'a [u8], value: &'a [u8] },
}

impl Payload<'_> {
    #[inline(always)]
    fn len(&self) -> usize {
        match *self {
            Payload::Region { label, msg } => {
                label.map_or(0, |label| 6 + label.len()) + msg.map_or(0, |msg| 1 + msg.len())
            }
            Payload::Data { key, value } => key.len() + 1 + value.len(),
        }
    }

    /// Writes the payload at the start of `dst` and returns its length.
    #[inline(always)]
    fn write(&self, dst: &mut [u8]) -> usize {
        match *self {
            Payload::Region { label, msg } => {
                let mut end = 0;
                if let Some(label) = label {
                    dst[..6].copy_from_slice(b"label:");
                    copy_short(&mut dst[6..], label);
                    end = 6 + label.len();
                }
                if let Some(msg) = msg {
                    dst[end] = b' ';
                    copy_short(&mut dst[end + 1..], msg);
                    end += 1 + msg.len();
                }
                end
            }
            Payload::Data { key, value } => {
                copy_short(dst, key);
                dst[key.len()] = b':';
                copy_short(&mut dst[key.len() + 1..], value);
                key.len() + 1 + value.len()
            }
        }
    }

    fn push(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.resize(start + self.len(), 0);
        self.write(&mut out[start..]);
    }
}

/// The columns and payload of a region line.
#[inline(always)]
fn region_line<'a>(
    region: &RegionInfo<'a>,
    t_rel_us: Option<u64>,
    name: &'static [u8; EVENT_WIDTH],
) -> (Columns<'a>, Plain<'a>) {
    let payload = Payload::Region {
        label: region.label.map(str::as_bytes),
        msg: region.msg.map(str::as_bytes),
    };
    (region_columns(region, t_rel_us), Plain { name, payload })
}

/// The columns and payload of a `data` or `data_json` line: `<key>:<value>`.
#[inline(always)]
fn data_line<'a>(
    repo: Option<i64>,
    category: &'a str,
    t_rel_us: u64,
    key: &'a str,
    value: &'a str,
    name: &'static [u8; EVENT_WIDTH],
) -> (Columns<'a>, Plain<'a>) {
    let cols = Columns {
        repo,
        t_abs: true,
        t_rel_us: Some(t_rel_us),
        category: Category::Text(category),
    };
    let payload = Payload::Data {
        key: key.as_bytes(),
        value: value.as_bytes(),
    };
    (cols, Plain { name, payload })
}

fn push_child_start_payload(out: &mut Vec<u8>, child: &ChildInfo<'_>) {
    out.extend_from_slice(b"[ch");
    push_u64(out, child.child_id);
    out.extend_from_slice(b"] class:");
    match child.hook_name {
        Some(hook) => {
            out.extend_from_slice(b"hook hook:");
            out.extend_from_slice(hook.as_bytes());
        }
        None => out.extend_from_slice(child.class.as_bytes()),
    }
    if let Some(dir) = child.cd {
        out.extend_from_slice(b" cd:");
        push_quoted(out, dir);
    }
    out.extend_from_slice(b" argv:[");
    if child.is_git {
        out.extend_from_slice(b"git");
        if !child.argv.is_empty() {
            out.push(b' ');
        }
    }
    push_quoted_list(out, child.argv);
    out.push(b']');
}

fn push_child_id(out: &mut Vec<u8>, child_id: u64, pid: i64) {
    out.extend_from_slice(b"[ch");
    push_u64(out, child_id);
    out.extend_from_slice(b"] pid:");
    push_i64(out, pid);
}

fn region_columns<'a>(region: &RegionInfo<'a>, t_rel_us: Option<u64>) -> Columns<'a> {
    Columns {
        repo: region.repo,
        t_abs: true,
        t_rel_us,
        category: region.category.map_or(Category::Blank, Category::Text),
    }
}

impl Format for PerfFormat {
    fn format(&self, record: &Record<'_>, out: &mut Vec<u8>) {
        // Regions and data, nearly every line of a trace, first try the fixed layout.
        let hot = match record.event {
            Trace2Event::RegionEnter { region, .. } => {
                Some(region_line(&region, None, b"region_enter"))
            }
            Trace2Event::RegionLeave {
                region, t_rel_us, ..
            } => Some(region_line(&region, Some(t_rel_us), b"region_leave")),
            Trace2Event::Data {
                repo,
                category,
                t_rel_us,
                key,
                value,
                ..
            } => Some(data_line(
                repo,
                category,
                t_rel_us,
                key,
                value,
                b"data        ",
            )),
            Trace2Event::DataJson {
                repo,
                category,
                t_rel_us,
                key,
                json,
                ..
            } => Some(data_line(
                repo,
                category,
                t_rel_us,
                key,
                json,
                b"data_json   ",
            )),
            _ => None,
        };
        if let Some((cols, plain)) = &hot
            && self.push_fixed_line(record, cols, plain, out)
        {
            return;
        }
        self.format_any(record, out);
    }
}

impl PerfFormat {
    /// Writes any line, one column after the other.
    #[inline(never)]
    fn format_any(&self, record: &Record<'_>, out: &mut Vec<u8>) {
        let (cols, plain) = match record.event {
            Trace2Event::TooManyFiles => return,
            Trace2Event::RegionEnter { region, .. } => {
                let (cols, plain) = region_line(&region, None, b"region_enter");
                (cols, Some(plain))
            }
            Trace2Event::RegionLeave {
                region, t_rel_us, ..
            } => {
                let (cols, plain) = region_line(&region, Some(t_rel_us), b"region_leave");
                (cols, Some(plain))
            }
            Trace2Event::Data {
                repo,
                category,
                t_rel_us,
                key,
                value,
                ..
            } => {
                let (cols, plain) =
                    data_line(repo, category, t_rel_us, key, value, b"data        ");
                (cols, Some(plain))
            }
            Trace2Event::DataJson {
                repo,
                category,
                t_rel_us,
                key,
                json,
                ..
            } => {
                let (cols, plain) = data_line(repo, category, t_rel_us, key, json, b"data_json   ");
                (cols, Some(plain))
            }
            _ => (other_columns(&record.event), None),
        };
        self.push_columns(record, &cols, record.event.name(), out);
        if let Some(plain) = &plain {
            plain.payload.push(out);
        }

        push_other_payload(out, record);

        // Like git, a payload that already ends the line gets no second LF.
        if out.last() != Some(&b'\n') {
            out.push(b'\n');
        }
    }
}

/// The optional columns of every event but regions and data (theirs come with their
/// [`Plain`] layout).
fn other_columns<'a>(event: &Trace2Event<'a>) -> Columns<'a> {
    let t_abs = Columns {
        t_abs: true,
        ..Columns::default()
    };
    match *event {
        Trace2Event::DefParam { scope, .. } => Columns {
            category: Category::Scope(scope),
            ..Columns::default()
        },
        Trace2Event::DefRepo { repo, .. } => Columns {
            repo: Some(repo),
            ..Columns::default()
        },
        Trace2Event::Start { .. }
        | Trace2Event::Printf { .. }
        | Trace2Event::ChildStart(_)
        | Trace2Event::Exec { .. }
        | Trace2Event::ExecResult { .. }
        | Trace2Event::ThreadStart
        | Trace2Event::Exit { .. }
        | Trace2Event::Atexit { .. }
        | Trace2Event::Signal { .. } => t_abs,
        Trace2Event::ChildExit { elapsed_us, .. }
        | Trace2Event::ChildReady { elapsed_us, .. }
        | Trace2Event::ThreadExit { elapsed_us } => Columns {
            t_rel_us: Some(elapsed_us),
            ..t_abs
        },
        Trace2Event::Timer { timer, .. } => Columns {
            category: Category::Text(timer.category),
            ..Columns::default()
        },
        Trace2Event::Counter { category, .. } => Columns {
            category: Category::Text(category),
            ..Columns::default()
        },
        // Version, the command events, alias and error show none; regions and data
        // never come here.
        _ => Columns::default(),
    }
}

/// The payload of every event but regions and data (theirs comes from [`Plain`]).
fn push_other_payload(out: &mut Vec<u8>, record: &Record<'_>) {
    match record.event {
        Trace2Event::Version { exe } => out.extend_from_slice(exe.as_bytes()),
        Trace2Event::TooManyFiles | Trace2Event::ThreadStart | Trace2Event::ThreadExit { .. } => {}
        Trace2Event::Start { argv } => push_quoted_list(out, argv),
        Trace2Event::CmdAncestry { ancestry } => {
            out.extend_from_slice(b"ancestry:[");
            push_quoted_list(out, ancestry);
            out.push(b']');
        }
        Trace2Event::CmdPath { path } => out.extend_from_slice(path.as_bytes()),
        Trace2Event::CmdName { name, hierarchy } => {
            out.extend_from_slice(name.as_bytes());
            if !hierarchy.is_empty() {
                out.extend_from_slice(b" (");
                out.extend_from_slice(hierarchy.as_bytes());
                out.push(b')');
            }
        }
        Trace2Event::CmdMode { name } => out.extend_from_slice(name.as_bytes()),
        Trace2Event::Alias { alias, argv } => {
            out.extend_from_slice(b"alias:");
            out.extend_from_slice(alias.as_bytes());
            out.extend_from_slice(b" argv:[");
            push_quoted_list(out, argv);
            out.push(b']');
        }
        Trace2Event::DefParam { param, value, .. } => {
            out.extend_from_slice(param.as_bytes());
            if let Some(value) = value {
                out.push(b':');
                out.extend_from_slice(value.as_bytes());
            }
        }
        Trace2Event::DefRepo { worktree, .. } => {
            out.extend_from_slice(b"worktree:");
            push_quoted(out, worktree);
        }
        // Written above, from their `Plain` payload.
        Trace2Event::RegionEnter { .. }
        | Trace2Event::RegionLeave { .. }
        | Trace2Event::Data { .. }
        | Trace2Event::DataJson { .. } => {}
        Trace2Event::Printf { msg } | Trace2Event::Error { msg, .. } => {
            if let Some(msg) = msg {
                out.extend_from_slice(msg.as_bytes());
            }
        }
        Trace2Event::ChildStart(child) => push_child_start_payload(out, &child),
        Trace2Event::ChildExit {
            child_id,
            pid,
            code,
            ..
        } => {
            push_child_id(out, child_id, pid);
            out.extend_from_slice(b" code:");
            push_i64(out, code);
        }
        Trace2Event::ChildReady {
            child_id,
            pid,
            ready,
            ..
        } => {
            push_child_id(out, child_id, pid);
            out.extend_from_slice(b" ready:");
            out.extend_from_slice(ready.as_bytes());
        }
        Trace2Event::Exec { exec_id, exe, argv } => {
            out.extend_from_slice(b"id:");
            push_u64(out, exec_id);
            out.extend_from_slice(b" argv:[");
            if let Some(exe) = exe {
                out.extend_from_slice(exe.as_bytes());
                if !argv.is_empty() {
                    out.push(b' ');
                }
            }
            push_quoted_list(out, argv);
            out.push(b']');
        }
        Trace2Event::ExecResult { exec_id, code, err } => {
            out.extend_from_slice(b"id:");
            push_u64(out, exec_id);
            out.extend_from_slice(b" code:");
            push_i64(out, code);
            if let Some(err) = err.filter(|_| code > 0) {
                out.extend_from_slice(b" err:");
                out.extend_from_slice(err.as_bytes());
            }
        }
        Trace2Event::Timer { timer, .. } => {
            out.extend_from_slice(b"name:");
            out.extend_from_slice(timer.name.as_bytes());
            out.extend_from_slice(b" intervals:");
            push_u64(out, timer.intervals);
            out.extend_from_slice(b" total:");
            push_timer_seconds(out, timer.total_ns);
            out.extend_from_slice(b" min:");
            push_timer_seconds(out, timer.min_ns);
            out.extend_from_slice(b" max:");
            push_timer_seconds(out, timer.max_ns);
        }
        Trace2Event::Counter { name, value, .. } => {
            out.extend_from_slice(b"name:");
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b" value:");
            push_u64(out, value);
        }
        Trace2Event::Exit { code } | Trace2Event::Atexit { code } => {
            out.extend_from_slice(b"code:");
            push_i64(out, i64::from(code));
        }
        Trace2Event::Signal { signo } => {
            out.extend_from_slice(b"signo:");
            push_i64(out, i64::from(signo));
        }
    }
}

#[cfg(test)]
mod tests;
