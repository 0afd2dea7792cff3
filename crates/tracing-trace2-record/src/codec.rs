//! A compact binary encoding of [`Record`]s, so that a record can be formatted later,
//! on another thread, by the same formatters.
//!
//! [`encode`] appends one record to a byte buffer; [`decode`] reads it back as a
//! [`Record`] that borrows its strings from the buffer (nothing is copied, nothing is
//! allocated beyond the list of `&str` that argument lists need, which the caller
//! passes in). [`Replayer`] keeps that list between records, so that replaying a stream
//! allocates nothing per record once the list has grown. The deferred background writer
//! (`Trace2Layer::builder().with_deferred(..)`) uses it to move formatting off the
//! traced thread.
//!
//! # Layout (version 2)
//!
//! All integers are little-endian. A record is a frame:
//!
//! ```text
//! record  = version:u8 (= 2)  length:u32  body        length = bytes of body
//! body    = tag:u8  wall_us:i64  t_abs_us:u64  depth:u32  open_regions:u32
//!           line:u32  sid:here  thread:str  file:opt_here  fields(tag)
//! str     = len:u32  bytes                             UTF-8, len < 0xFFFF_FFFF
//! opt_str = 0xFFFF_FFFF (None)  |  str
//! here    = str  |  0xFFFF_FFFE  len:u32  address:u64   sid and file only
//! opt_i64 = 0:u8 (None)  |  1:u8 i64
//! bool    = 0:u8  |  1:u8
//! list    = count:u32  str*
//! region  = repo:opt_i64  category:opt_str  label:opt_str  msg:opt_str
//! ```
//!
//! `line` and `file` are the callsite. The tag is the event's [`Kind`] number in the
//! [`catalogue`](crate::catalogue) (so `timer` and `th_timer` are two tags), and its
//! fields follow in catalogue order, each written as its [`FieldType`] says:
//!
//! | field type | written as |
//! |---|---|
//! | `Text`, `TextOmittedWhenEmpty`, `Json` | str |
//! | `OptText` | opt_str |
//! | `TextList` | list |
//! | `Uint`, `Count`, `Micros`, `Nanos` | u64 |
//! | `Int` | i64 |
//! | `OptInt` | opt_i64 |
//! | `Nesting` | u32 |
//! | `Code` | i32 |
//! | `Flag` | bool |
//!
//! Regions and data, a line per region or datum, are encoded and decoded by hand (they
//! run on the traced thread for every such line, where a generic walk cost more); every
//! other kind is written from [`Trace2Event::visit_fields`] and read by [`Trace2Event::from_fields`],
//! its catalogue row, so a new kind needs nothing here (the encoder's match names the hot
//! kinds and [`regular_event!`](crate::regular_event), with no `_` arm; the decoder reads
//! every kind but the hot ones by its row). Tests walk every kind's encoding by the
//! catalogue alone and read every kind, hot ones too, by its row.
//!
//! This encoding and the binary target's (`docs/binary-format.md`) are two on purpose:
//! this one is for records that never leave the process, so it is fixed-width and needs
//! no dictionary, which makes encoding on the traced thread cheap; the binary target
//! compresses for files. `docs/decisions.md` has the figures.
//!
//! `here` is a string that [`encode_in_process`] may send by address instead of copying
//! it: the session id and the callsite's file, the same text on every line, which the
//! deferred writer's traced thread would otherwise copy into every record and its
//! worker read back (and compare, in the Event format's callsite cache). Only the
//! process that encoded a frame can read such a string, with
//! [`Replayer::replay_encoded`]; [`decode`] and [`Replayer::replay`] refuse it
//! ([`DecodeError::Address`]). [`encode`] never writes one.
//!
//! The length after the version byte lets a reader skip records of a version it does
//! not know. A whole frame stays under 4 GiB: a string that would not fit is cut at a
//! character boundary (no real Trace2 line comes near that size).

use std::fmt;

use crate::catalogue::{FieldError, FieldType, FieldValue, Kind};
use crate::record::{Callsite, Record, RegionInfo, Timestamp, Trace2Event};
use crate::text::Appender;

/// The version byte that starts every record of this layout.
pub const VERSION: u8 = 2;

/// Bytes of a frame before its body: the version and the body length.
const FRAME_HEADER: usize = 5;
/// The `len` of an absent optional string.
const NONE_LEN: u32 = u32::MAX;
/// The `len` of a string sent by address (`here` in the layout).
const ADDRESS_LEN: u32 = u32::MAX - 1;

/// Appends `record` to `out` as one frame. `out` only grows: nothing else is allocated.
///
/// Written through an [`Appender`]: the deferred writer encodes on the traced thread,
/// and pieces appended one by one to the vector cost about twice as much.
///
/// Regions and data, a line per region or datum, have their fields written out here;
/// every other kind is written by its catalogue row, out of line. The kind is told
/// apart first, so that each hot kind's frame is written by straight-line code that
/// never hands the appender to another function (a generic walk even out of line,
/// reached from inside one frame writer, cost regions 23 instructions more:
/// `docs/performance.md`).
pub fn encode(record: &Record<'_>, out: &mut Vec<u8>) {
    encode_with(record, out, |_| false);
}

/// [`encode`] for a decoder in this same process ([`Replayer::replay_encoded`]): the
/// record's session id and callsite file go by address when `lasts` says that their
/// text stays where it is, unchanged, for as long as the frame may be decoded (a
/// `'static` session's id, a string literal); other text is copied as [`encode`]
/// copies it. The frame cannot be read by [`decode`] or [`Replayer::replay`], nor in
/// another process.
///
/// Called, not inlined, as [`encode`] is: inlined into the layer's callback, the encoder
/// cost the traced thread more (about 30 instructions a region line) than the call.
#[inline(never)]
pub fn encode_in_process(record: &Record<'_>, out: &mut Vec<u8>, lasts: impl Fn(&str) -> bool) {
    encode_with(record, out, lasts);
}

#[cfg_attr(not(debug_assertions), inline(always))]
fn encode_with(record: &Record<'_>, out: &mut Vec<u8>, lasts: impl Fn(&str) -> bool) {
    let lasts = &lasts;
    // The region arms name their kind, so that its tag is a constant; the event is
    // matched in place, not copied out first.
    match &record.event {
        Trace2Event::RegionEnter { region, nesting } => {
            encode_frame(record, Kind::RegionEnter, out, lasts, |w| {
                w.region(region);
                w.u32(*nesting);
            });
        }
        Trace2Event::RegionLeave {
            region,
            nesting,
            t_rel_us,
        } => encode_frame(record, Kind::RegionLeave, out, lasts, |w| {
            w.region(region);
            w.u32(*nesting);
            w.u64(*t_rel_us);
        }),
        Trace2Event::Data {
            repo,
            category,
            key,
            value: text,
            nesting,
            t_rel_us,
        }
        | Trace2Event::DataJson {
            repo,
            category,
            key,
            json: text,
            nesting,
            t_rel_us,
        } => encode_frame(record, record.event.kind(), out, lasts, |w| {
            w.opt_i64(*repo);
            w.str(category);
            w.str(key);
            w.str(text);
            w.u32(*nesting);
            w.u64(*t_rel_us);
        }),
        // A new kind not in `regular_event!` stops the build here: list it there, or
        // give it an arm of its own.
        crate::regular_event!() => encode_by_catalogue(record, out, lasts),
    }
}

/// [`encode`] of a kind that is not hot: its fields as its catalogue row says.
#[inline(never)]
fn encode_by_catalogue(record: &Record<'_>, out: &mut Vec<u8>, lasts: &dyn Fn(&str) -> bool) {
    encode_frame(record, record.event.kind(), out, &lasts, |w| {
        w.by_catalogue(&record.event);
    });
}

/// One frame: the fixed fields (`kind` is the record's), then the event's fields as
/// `fields` writes them.
#[cfg_attr(not(debug_assertions), inline(always))]
fn encode_frame(
    record: &Record<'_>,
    kind: Kind,
    out: &mut Vec<u8>,
    lasts: &impl Fn(&str) -> bool,
    fields: impl FnOnce(&mut FrameWriter<'_>),
) {
    let start = out.len();
    {
        let mut w = FrameWriter {
            out: Appender::new(out),
            budget: STRING_BUDGET,
        };
        w.out.put_array([VERSION, 0, 0, 0, 0]);
        w.head(record, kind, lasts);
        fields(&mut w);
    }
    let body = out.len() - start - FRAME_HEADER;
    let body = u32::try_from(body).unwrap_or(u32::MAX);
    out[start + 1..start + FRAME_HEADER].copy_from_slice(&body.to_le_bytes());
}

/// Bytes all strings of one frame may take together, so that the frame's length fits
/// its `u32` (the fixed fields come on top).
const STRING_BUDGET: usize = u32::MAX as usize - 64;

/// The longest prefix of `s` within `budget` bytes that ends on a character boundary.
#[cold]
fn cut_len(s: &str, budget: usize) -> usize {
    let mut len = budget.min(s.len());
    while !s.is_char_boundary(len) {
        len -= 1;
    }
    len
}

struct FrameWriter<'o> {
    out: Appender<'o>,
    budget: usize,
}

impl FrameWriter<'_> {
    /// The fixed fields of the body, before the event's own.
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn head(&mut self, record: &Record<'_>, kind: Kind, lasts: &impl Fn(&str) -> bool) {
        // The fixed fields, as one store.
        let mut fixed = [0u8; 29];
        fixed[0] = kind.id();
        fixed[1..9].copy_from_slice(&record.time.wall_us.to_le_bytes());
        fixed[9..17].copy_from_slice(&record.time.t_abs_us.to_le_bytes());
        fixed[17..21].copy_from_slice(&record.depth.to_le_bytes());
        fixed[21..25].copy_from_slice(&record.open_regions.to_le_bytes());
        fixed[25..29].copy_from_slice(&record.callsite.line.to_le_bytes());
        self.out.put_array(fixed);
        self.here(record.sid, lasts);
        self.str(record.thread);
        match record.callsite.file {
            Some(file) => self.here(file, lasts),
            None => self.u32(NONE_LEN),
        }
    }

    /// `s` by address if it lasts (see [`encode_in_process`]), else copied.
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn here(&mut self, s: &str, lasts: &impl Fn(&str) -> bool) {
        match u32::try_from(s.len()) {
            Ok(len) if lasts(s) => {
                let mut at = [0u8; 16];
                at[..4].copy_from_slice(&ADDRESS_LEN.to_le_bytes());
                at[4..8].copy_from_slice(&len.to_le_bytes());
                at[8..].copy_from_slice(&(s.as_ptr() as u64).to_le_bytes());
                self.out.put_array(at);
            }
            _ => self.str(s),
        }
    }

    #[cfg_attr(not(debug_assertions), inline(always))]
    fn u8(&mut self, v: u8) {
        self.out.put_array([v]);
    }
    fn bool(&mut self, v: bool) {
        self.u8(u8::from(v));
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn u32(&mut self, v: u32) {
        self.out.put_array(v.to_le_bytes());
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn u64(&mut self, v: u64) {
        self.out.put_array(v.to_le_bytes());
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn i64(&mut self, v: i64) {
        self.out.put_array(v.to_le_bytes());
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn i32(&mut self, v: i32) {
        self.out.put_array(v.to_le_bytes());
    }

    #[cfg_attr(not(debug_assertions), inline(always))]
    fn str(&mut self, s: &str) {
        let len = if s.len() <= self.budget {
            s.len()
        } else {
            cut_len(s, self.budget)
        };
        self.budget -= len;
        // `len` is below the budget, itself below `u32::MAX`.
        self.out
            .put_array_then((len as u32).to_le_bytes(), &s.as_bytes()[..len]);
    }

    #[cfg_attr(not(debug_assertions), inline(always))]
    fn opt_str(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.str(s),
            None => self.u32(NONE_LEN),
        }
    }

    #[cfg_attr(not(debug_assertions), inline(always))]
    fn opt_i64(&mut self, v: Option<i64>) {
        match v {
            Some(v) => {
                let mut flagged = [1u8; 9];
                flagged[1..].copy_from_slice(&v.to_le_bytes());
                self.out.put_array(flagged);
            }
            None => self.u8(0),
        }
    }

    fn list(&mut self, items: &[&str]) {
        self.u32(u32::try_from(items.len()).unwrap_or(u32::MAX));
        for item in items.iter().take(u32::MAX as usize) {
            self.str(item);
        }
    }

    #[cfg_attr(not(debug_assertions), inline(always))]
    fn region(&mut self, r: &RegionInfo<'_>) {
        self.opt_i64(r.repo);
        self.opt_str(r.category);
        self.opt_str(r.label);
        self.opt_str(r.msg);
    }

    /// The event's fields in catalogue order, each as its type says (the table in the
    /// module documentation).
    fn by_catalogue(&mut self, event: &Trace2Event<'_>) {
        event.visit_fields(|_, value| match value {
            FieldValue::Text(text) => self.str(text),
            FieldValue::OptText(text) => self.opt_str(text),
            FieldValue::TextList(items) => self.list(items),
            FieldValue::Uint(v) => self.u64(v),
            FieldValue::Int(v) => self.i64(v),
            FieldValue::OptInt(v) => self.opt_i64(v),
            FieldValue::Nesting(v) => self.u32(v),
            FieldValue::Code(v) => self.i32(v),
            FieldValue::Flag(v) => self.bool(v),
        });
    }
}

/// Why bytes could not be decoded as a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The bytes end inside a record.
    Truncated,
    /// The record starts with a version byte this decoder does not know.
    Version(u8),
    /// The record's event tag is unknown.
    Tag(u8),
    /// A string is not UTF-8.
    Utf8,
    /// A boolean or presence byte is neither 0 nor 1.
    Flag(u8),
    /// The body is longer than its fields.
    TrailingBytes,
    /// A field did not have its catalogue type (a bug: the reader follows the table).
    Field(FieldError),
    /// A string sent by address ([`encode_in_process`]), which only the process that
    /// encoded it can read.
    Address,
}

impl From<FieldError> for DecodeError {
    fn from(e: FieldError) -> Self {
        DecodeError::Field(e)
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated => f.write_str("trace2 record: truncated"),
            DecodeError::Version(v) => write!(f, "trace2 record: unknown version {v}"),
            DecodeError::Tag(t) => write!(f, "trace2 record: unknown event tag {t}"),
            DecodeError::Utf8 => f.write_str("trace2 record: string is not UTF-8"),
            DecodeError::Flag(b) => write!(f, "trace2 record: flag byte {b} is not 0 or 1"),
            DecodeError::TrailingBytes => f.write_str("trace2 record: bytes after the fields"),
            DecodeError::Field(e) => write!(f, "trace2 record: {e}"),
            DecodeError::Address => {
                f.write_str("trace2 record: a string sent by address, readable only in its process")
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// Decodes the record at the start of `buf`; returns it and the bytes after it.
///
/// The record borrows its strings from `buf`; the argument list of the events that have
/// one (`start`, `cmd_ancestry`, `alias`, `child_start`, `exec`) is collected in `list`,
/// which is cleared first. See [`Replayer`] to reuse one list across buffers.
pub fn decode<'b, 'l>(
    buf: &'b [u8],
    list: &'l mut Vec<&'b str>,
) -> Result<(Record<'l>, &'b [u8]), DecodeError> {
    decode_checked(buf, list, Utf8::Check, |record| record)
}

/// Whether the strings of a buffer are checked to be UTF-8.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Utf8 {
    /// Bytes from anywhere: each string is checked.
    Check,
    /// Bytes that [`encode`] or [`encode_in_process`] wrote from `&str`s in this
    /// process, unchanged, with their text sent by address still in place: the check is
    /// left out and addresses are read.
    Encoded,
}

/// Decodes the record at the start of `buf` and hands it to `then`, in place: a replay
/// formats the record where it was built instead of moving it out first (a `Record` is
/// about 150 bytes; the move cost a fifth of decoding one).
#[cfg_attr(not(debug_assertions), inline(always))]
fn decode_checked<'b, 'l, R>(
    buf: &'b [u8],
    list: &'l mut Vec<&'b str>,
    utf8: Utf8,
    then: impl FnOnce(Record<'l>) -> R,
) -> Result<(R, &'b [u8]), DecodeError> {
    let (&version, rest) = buf.split_first().ok_or(DecodeError::Truncated)?;
    if version != VERSION {
        return Err(DecodeError::Version(version));
    }
    let mut r = FrameReader { buf: rest, utf8 };
    let len = r.u32()? as usize;
    if r.buf.len() < len {
        return Err(DecodeError::Truncated);
    }
    let (body, after) = r.buf.split_at(len);
    let mut r = FrameReader { buf: body, utf8 };
    let tag = r.u8()?;
    let time = Timestamp {
        wall_us: r.i64()?,
        t_abs_us: r.u64()?,
    };
    let depth = r.u32()?;
    let open_regions = r.u32()?;
    let line = r.u32()?;
    let sid = r.here()?;
    let thread = r.str()?;
    let file = match r.u32()? {
        NONE_LEN => None,
        len => Some(r.here_after(len)?),
    };
    list.clear();
    let event = r.fields(tag, list)?;
    if !r.buf.is_empty() {
        return Err(DecodeError::TrailingBytes);
    }
    let record = Record {
        event,
        time,
        sid,
        depth,
        thread,
        callsite: Callsite { file, line },
        open_regions,
    };
    Ok((then(record), after))
}

struct FrameReader<'b> {
    buf: &'b [u8],
    utf8: Utf8,
}

impl<'b> FrameReader<'b> {
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn take<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let (head, rest) = self
            .buf
            .split_first_chunk::<N>()
            .ok_or(DecodeError::Truncated)?;
        self.buf = rest;
        Ok(*head)
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take::<1>()?[0])
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(DecodeError::Flag(other)),
        }
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn u32(&mut self) -> Result<u32, DecodeError> {
        self.take().map(u32::from_le_bytes)
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn i32(&mut self) -> Result<i32, DecodeError> {
        self.take().map(i32::from_le_bytes)
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn u64(&mut self) -> Result<u64, DecodeError> {
        self.take().map(u64::from_le_bytes)
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn i64(&mut self) -> Result<i64, DecodeError> {
        self.take().map(i64::from_le_bytes)
    }

    #[cfg_attr(not(debug_assertions), inline(always))]
    fn bytes(&mut self, len: usize) -> Result<&'b str, DecodeError> {
        if self.buf.len() < len {
            return Err(DecodeError::Truncated);
        }
        let (text, rest) = self.buf.split_at(len);
        self.buf = rest;
        if self.utf8 == Utf8::Encoded {
            #[allow(unsafe_code)]
            // SAFETY: `Utf8::Encoded` comes only from `Replayer::replay_encoded`, whose
            // caller promises that the buffer holds whole records as `encode` wrote them,
            // back to back: the framing read so far matches the encoder's, so `text` is
            // the bytes of one `&str` that `encode` copied.
            return Ok(unsafe { std::str::from_utf8_unchecked(text) });
        }
        std::str::from_utf8(text).map_err(|_| DecodeError::Utf8)
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn str(&mut self) -> Result<&'b str, DecodeError> {
        let len = self.u32()?;
        self.bytes(len as usize)
    }
    /// A `here` string: copied, or by address in a frame of this process.
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn here(&mut self) -> Result<&'b str, DecodeError> {
        let len = self.u32()?;
        self.here_after(len)
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn here_after(&mut self, len: u32) -> Result<&'b str, DecodeError> {
        if len != ADDRESS_LEN {
            return self.bytes(len as usize);
        }
        let at = self.take::<12>()?;
        if self.utf8 != Utf8::Encoded {
            return Err(DecodeError::Address);
        }
        let (len, address) = at.split_at(4);
        let len = u32::from_le_bytes(len.try_into().unwrap_or_default()) as usize;
        let address = u64::from_le_bytes(address.try_into().unwrap_or_default()) as usize;
        #[allow(unsafe_code)]
        // SAFETY: `Utf8::Encoded` comes only from `Replayer::replay_encoded`, whose
        // caller promises that the buffer holds records as `encode_in_process` wrote
        // them in this process, and that text it sent by address is still there,
        // unchanged: these are the address and length of a `&str` it was given.
        Ok(unsafe {
            std::str::from_utf8_unchecked(std::slice::from_raw_parts(address as *const u8, len))
        })
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn opt_str(&mut self) -> Result<Option<&'b str>, DecodeError> {
        match self.u32()? {
            NONE_LEN => Ok(None),
            len => self.bytes(len as usize).map(Some),
        }
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn opt_i64(&mut self) -> Result<Option<i64>, DecodeError> {
        Ok(if self.bool()? {
            Some(self.i64()?)
        } else {
            None
        })
    }

    /// Reads a list into `list` and lends it out for as long as the record lives.
    fn list<'l>(&mut self, list: &'l mut Vec<&'b str>) -> Result<&'l [&'b str], DecodeError> {
        let count = self.u32()?;
        for _ in 0..count {
            list.push(self.str()?);
        }
        Ok(list)
    }

    #[cfg_attr(not(debug_assertions), inline(always))]
    fn region(&mut self) -> Result<RegionInfo<'b>, DecodeError> {
        Ok(RegionInfo {
            repo: self.opt_i64()?,
            category: self.opt_str()?,
            label: self.opt_str()?,
            msg: self.opt_str()?,
        })
    }

    /// The event's fields: regions and data by hand, as the encoder writes them, every
    /// other kind by its catalogue row.
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn fields<'l>(
        &mut self,
        tag: u8,
        list: &'l mut Vec<&'b str>,
    ) -> Result<Trace2Event<'l>, DecodeError> {
        let Some(kind) = Kind::from_id(tag) else {
            return Err(DecodeError::Tag(tag));
        };
        Ok(match kind {
            Kind::RegionEnter => Trace2Event::RegionEnter {
                region: self.region()?,
                nesting: self.u32()?,
            },
            Kind::RegionLeave => Trace2Event::RegionLeave {
                region: self.region()?,
                nesting: self.u32()?,
                t_rel_us: self.u64()?,
            },
            Kind::Data => Trace2Event::Data {
                repo: self.opt_i64()?,
                category: self.str()?,
                key: self.str()?,
                value: self.str()?,
                nesting: self.u32()?,
                t_rel_us: self.u64()?,
            },
            Kind::DataJson => Trace2Event::DataJson {
                repo: self.opt_i64()?,
                category: self.str()?,
                key: self.str()?,
                json: self.str()?,
                nesting: self.u32()?,
                t_rel_us: self.u64()?,
            },
            // Every kind, a new one too, decodes by its row here (the row is all this
            // decoder needs: `by_catalogue_reads_every_kind` checks the hot kinds too),
            // so this arm hides none. Listing the kinds (`regular_kind!`) instead cost
            // the deferred writer's worker 2.5 instructions per region record
            // (callgrind, `record_cost event_deferred-regions`).
            _ => self.by_catalogue(kind, list)?,
        })
    }

    /// Every field of a `kind` event in catalogue order, as its type says.
    #[inline(never)]
    fn by_catalogue<'l>(
        &mut self,
        kind: Kind,
        list: &'l mut Vec<&'b str>,
    ) -> Result<Trace2Event<'l>, DecodeError> {
        // A kind has at most one list.
        let mut list = Some(list);
        Trace2Event::from_fields(kind, |field| {
            Ok(match field.ty {
                FieldType::Text | FieldType::TextOmittedWhenEmpty | FieldType::Json => {
                    FieldValue::Text(self.str()?)
                }
                FieldType::OptText => FieldValue::OptText(self.opt_str()?),
                FieldType::TextList => {
                    let list = list.take().ok_or(DecodeError::Tag(kind.id()))?;
                    FieldValue::TextList(self.list(list)?)
                }
                FieldType::Uint | FieldType::Count | FieldType::Micros | FieldType::Nanos => {
                    FieldValue::Uint(self.u64()?)
                }
                FieldType::Int => FieldValue::Int(self.i64()?),
                FieldType::OptInt => FieldValue::OptInt(self.opt_i64()?),
                FieldType::Nesting => FieldValue::Nesting(self.u32()?),
                FieldType::Code => FieldValue::Code(self.i32()?),
                FieldType::Flag => FieldValue::Flag(self.bool()?),
            })
        })
    }
}

/// Decodes buffers of records one after the other, keeping the room that argument
/// lists need between buffers (so that, once grown, it allocates nothing).
#[derive(Debug, Default)]
pub struct Replayer {
    /// Always empty between calls; only its capacity is kept.
    spare: Vec<&'static str>,
}

impl Replayer {
    /// A replayer with no room yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes every record of `buf` in order and hands each to `f`; returns how many
    /// there were. Stops at the first record that cannot be decoded.
    pub fn replay(&mut self, buf: &[u8], f: impl FnMut(&Record<'_>)) -> Result<usize, DecodeError> {
        self.replay_with(buf, Utf8::Check, f)
    }

    /// [`replay`](Self::replay) without checking that strings are UTF-8 (a quarter of
    /// the decoding work), for records that this process encoded itself; it also reads
    /// the strings [`encode_in_process`] sent by address.
    ///
    /// # Safety
    ///
    /// `buf` must be whole records written by [`encode`] or [`encode_in_process`] in
    /// this process, back to back and unchanged (as the deferred writer's queue holds
    /// them), and every text `encode_in_process` sent by address must still be where it
    /// was, unchanged, until `f` has returned for the last record: a string that is
    /// not UTF-8, or text that is gone, would be undefined behaviour.
    #[allow(unsafe_code)]
    pub unsafe fn replay_encoded(
        &mut self,
        buf: &[u8],
        f: impl FnMut(&Record<'_>),
    ) -> Result<usize, DecodeError> {
        self.replay_with(buf, Utf8::Encoded, f)
    }

    fn replay_with(
        &mut self,
        buf: &[u8],
        utf8: Utf8,
        mut f: impl FnMut(&Record<'_>),
    ) -> Result<usize, DecodeError> {
        let mut list = relabel(std::mem::take(&mut self.spare));
        let mut rest = buf;
        let mut count = 0;
        let result = loop {
            if rest.is_empty() {
                break Ok(count);
            }
            match decode_checked(rest, &mut list, utf8, |record| f(&record)) {
                Ok(((), after)) => {
                    rest = after;
                    count += 1;
                }
                Err(err) => break Err(err),
            }
        };
        self.spare = relabel(list);
        result
    }
}

/// Gives an emptied list of borrowed strings a new lifetime, keeping its allocation:
/// collecting a `Vec`'s own `into_iter` reuses its buffer, and an empty list holds no
/// borrow that could outlive its source.
fn relabel<'a, 'b>(mut list: Vec<&'a str>) -> Vec<&'b str> {
    list.clear();
    list.into_iter().map(|_| -> &'b str { "" }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::ChildInfo;

    fn record(event: Trace2Event<'_>) -> Record<'_> {
        Record {
            event,
            time: Timestamp {
                wall_us: -5,
                t_abs_us: u64::MAX,
            },
            sid: "20250101T000000.000000Z-H0-P1/child",
            depth: 7,
            thread: "th01:worker",
            callsite: Callsite {
                file: Some("src/main.rs"),
                line: 42,
            },
            open_regions: 3,
        }
    }

    fn round_trip(r: &Record<'_>) {
        let mut buf = vec![0xAA];
        encode(r, &mut buf);
        let mut list = Vec::new();
        let (back, rest) = decode(&buf[1..], &mut list).unwrap();
        assert!(rest.is_empty());
        assert_eq!(format!("{back:?}"), format!("{r:?}"));
    }

    #[test]
    fn round_trips_keep_every_field() {
        let argv = ["git", "", "a b", "é\"\n"];
        let region = RegionInfo {
            repo: Some(-1),
            category: None,
            label: Some(""),
            msg: Some("m"),
        };
        for event in [
            Trace2Event::Start { argv: &argv },
            Trace2Event::Start { argv: &[] },
            Trace2Event::RegionEnter { region, nesting: 0 },
            Trace2Event::RegionLeave {
                region: RegionInfo::default(),
                nesting: u32::MAX,
                t_rel_us: 1,
            },
            Trace2Event::Printf { msg: None },
            Trace2Event::Printf { msg: Some("") },
            Trace2Event::ChildStart(ChildInfo {
                child_id: 9,
                class: "hook",
                hook_name: Some("pre-commit"),
                cd: None,
                use_shell: true,
                is_git: false,
                argv: &argv,
            }),
            Trace2Event::Signal { signo: -3 },
        ] {
            round_trip(&record(event));
        }
        let mut r = record(Trace2Event::ThreadStart);
        r.callsite = Callsite::default();
        round_trip(&r);
    }

    /// The list every made-up `TextList` field holds.
    static LIST: [&str; 2] = ["x", "yz"];

    /// An event of `spec`'s kind with a made-up value in every field: each field's value
    /// differs from the others', and optional ones alternate between absent and present.
    fn made_up_event(spec: &crate::catalogue::KindSpec) -> Trace2Event<'static> {
        use crate::catalogue::{FieldError, FieldType as T, FieldValue as V};
        let mut n = 0u64;
        Trace2Event::from_fields(spec.kind, |field| {
            n += 1;
            Ok::<_, FieldError>(match field.ty {
                T::Text | T::TextOmittedWhenEmpty | T::Json => V::Text(field.name),
                T::OptText => V::OptText(n.is_multiple_of(2).then_some(field.name)),
                T::TextList => V::TextList(&LIST),
                T::Uint | T::Count | T::Micros | T::Nanos => V::Uint(n << 40),
                T::Int => V::Int(-(n as i64)),
                T::OptInt => V::OptInt(Some(n as i64)),
                T::Nesting => V::Nesting(n as u32),
                T::Code => V::Code(-(n as i32)),
                T::Flag => V::Flag(!n.is_multiple_of(2)),
            })
        })
        .unwrap()
    }

    /// Every kind's encoding, walked by the catalogue's field types alone, holds the
    /// fields the record has, in catalogue order, and nothing else: the hand-written
    /// encoder and decoder agree with the table.
    #[test]
    fn encoding_follows_the_catalogue() {
        use crate::catalogue::{CATALOGUE, FieldType as T, FieldValue as V};
        for spec in &CATALOGUE {
            let event = made_up_event(spec);
            let r = record(event);
            let mut buf = Vec::new();
            encode(&r, &mut buf);
            let mut reader = FrameReader {
                buf: &buf[FRAME_HEADER..],
                utf8: Utf8::Check,
            };
            assert_eq!(reader.u8().unwrap(), spec.kind.id(), "{}", spec.name);
            reader.take::<28>().unwrap();
            reader.str().unwrap();
            reader.str().unwrap();
            reader.opt_str().unwrap();
            let mut walked = Vec::new();
            let mut items = Vec::new();
            for field in spec.fields {
                let value = match field.ty {
                    T::Text | T::TextOmittedWhenEmpty | T::Json => V::Text(reader.str().unwrap()),
                    T::OptText => V::OptText(reader.opt_str().unwrap()),
                    T::TextList => {
                        items.clear();
                        reader.list(&mut items).unwrap();
                        V::TextList(&[])
                    }
                    T::Uint | T::Count | T::Micros | T::Nanos => V::Uint(reader.u64().unwrap()),
                    T::Int => V::Int(reader.i64().unwrap()),
                    T::OptInt => V::OptInt(reader.opt_i64().unwrap()),
                    T::Nesting => V::Nesting(reader.u32().unwrap()),
                    T::Code => V::Code(reader.i32().unwrap()),
                    T::Flag => V::Flag(reader.bool().unwrap()),
                };
                walked.push(value);
            }
            assert!(reader.buf.is_empty(), "{}: bytes left", spec.name);
            let mut expected = Vec::new();
            event.visit_fields(|_, value| {
                expected.push(match value {
                    V::TextList(l) => {
                        assert_eq!(l, LIST);
                        V::TextList(&[])
                    }
                    other => other,
                })
            });
            assert_eq!(walked, expected, "{}", spec.name);
            round_trip(&r);
        }
    }

    /// The catalogue walk reads every kind, the hot ones too, as the hand-written
    /// arms do: the decoder's `_` arm is right for any kind the catalogue has.
    #[test]
    fn by_catalogue_reads_every_kind() {
        use crate::catalogue::CATALOGUE;
        for spec in &CATALOGUE {
            let event = made_up_event(spec);
            let mut buf = Vec::new();
            encode(&record(event), &mut buf);
            // The fields start after the fixed fields and the three strings.
            let mut reader = FrameReader {
                buf: &buf[FRAME_HEADER..],
                utf8: Utf8::Check,
            };
            reader.take::<29>().unwrap();
            reader.str().unwrap();
            reader.str().unwrap();
            reader.opt_str().unwrap();
            let mut items = Vec::new();
            let read = reader.by_catalogue(spec.kind, &mut items).unwrap();
            assert!(reader.buf.is_empty(), "{}", spec.name);
            assert_eq!(format!("{read:?}"), format!("{event:?}"), "{}", spec.name);
        }
    }

    #[test]
    fn records_follow_each_other() {
        let mut buf = Vec::new();
        encode(&record(Trace2Event::Exit { code: 3 }), &mut buf);
        encode(&record(Trace2Event::Atexit { code: 3 }), &mut buf);
        let mut names = Vec::new();
        let mut replayer = Replayer::new();
        let n = replayer
            .replay(&buf, |r| names.push(r.event.name()))
            .unwrap();
        assert_eq!(n, 2);
        assert_eq!(names, ["exit", "atexit"]);
    }

    /// Replaying records this process encoded, without the UTF-8 check, gives the very
    /// same records as the checked replay.
    #[test]
    #[allow(unsafe_code)]
    fn encoded_replay_matches_checked_replay() {
        let argv = ["git", "status", "ünïcödé", ""];
        let mut buf = Vec::new();
        encode(&record(Trace2Event::Start { argv: &argv }), &mut buf);
        encode(
            &record(Trace2Event::Printf {
                msg: Some("ünï 🎉"),
            }),
            &mut buf,
        );
        encode(&record(Trace2Event::Atexit { code: 0 }), &mut buf);
        let mut checked = Vec::new();
        Replayer::new()
            .replay(&buf, |r| checked.push(format!("{r:?}")))
            .unwrap();
        let mut unchecked = Vec::new();
        // SAFETY: `buf` is what `encode` wrote, unchanged.
        let n =
            unsafe { Replayer::new().replay_encoded(&buf, |r| unchecked.push(format!("{r:?}"))) }
                .unwrap();
        assert_eq!(n, 3);
        assert_eq!(unchecked, checked);
    }

    /// `encode_in_process` sends the text it is told lasts by address, and only the
    /// session id and the file: the replay of this process reads the very same text
    /// (same address), the frame is shorter, and the checked decoder refuses it.
    #[test]
    #[allow(unsafe_code)]
    fn in_process_frames_send_lasting_text_by_address() {
        static SID: &str = "20250101T000000.000000Z-H0-P1/a-long-enough-session-id";
        static FILE: &str = "src/some/module/of/the/program.rs";
        let region = RegionInfo {
            repo: None,
            category: Some(SID),
            label: Some(FILE),
            msg: None,
        };
        let mut r = record(Trace2Event::RegionEnter { region, nesting: 1 });
        r.sid = SID;
        r.callsite.file = Some(FILE);
        let lasting = |text: &str| std::ptr::eq(text, SID) || std::ptr::eq(text, FILE);
        let mut copied = Vec::new();
        encode(&r, &mut copied);
        let mut here = Vec::new();
        encode_in_process(&r, &mut here, lasting);
        assert_eq!(here.len() + SID.len() + FILE.len() - 2 * 12, copied.len());
        let mut seen = Vec::new();
        // SAFETY: encoded here, by this process; SID and FILE are `'static`.
        let n = unsafe {
            Replayer::new().replay_encoded(&here, |back| {
                assert_eq!(format!("{back:?}"), format!("{r:?}"));
                seen.push((back.sid.as_ptr(), back.callsite.file.map(str::as_ptr)));
                let Trace2Event::RegionEnter { region, .. } = back.event else {
                    panic!("{back:?}");
                };
                // Copied: only the head's two strings go by address.
                assert_ne!(region.category.map(str::as_ptr), Some(SID.as_ptr()));
            })
        }
        .unwrap();
        assert_eq!(n, 1);
        assert_eq!(seen, [(SID.as_ptr(), Some(FILE.as_ptr()))]);
        let mut list = Vec::new();
        assert_eq!(decode(&here, &mut list).unwrap_err(), DecodeError::Address);
        assert_eq!(
            Replayer::new().replay(&here, |_| {}).unwrap_err(),
            DecodeError::Address
        );
        // Text that does not last is copied, as `encode` copies it.
        let mut none_lasts = Vec::new();
        encode_in_process(&r, &mut none_lasts, |_| false);
        assert_eq!(none_lasts, copied);
        // A record without a file has none, by address or not.
        r.callsite.file = None;
        let mut without = Vec::new();
        encode_in_process(&r, &mut without, lasting);
        // SAFETY: as above.
        unsafe {
            Replayer::new().replay_encoded(&without, |back| assert_eq!(back.callsite.file, None))
        }
        .unwrap();
    }

    #[test]
    fn decoder_keeps_its_list_room() {
        let argv = ["a"; 40];
        let mut buf = Vec::new();
        encode(&record(Trace2Event::Start { argv: &argv }), &mut buf);
        let mut replayer = Replayer::new();
        replayer.replay(&buf, |_| {}).unwrap();
        let room = replayer.spare.capacity();
        assert!(room >= 40);
        replayer.replay(&buf, |_| {}).unwrap();
        assert_eq!(replayer.spare.capacity(), room);
        assert!(replayer.spare.is_empty());
    }

    #[test]
    fn bad_input_is_an_error() {
        let mut buf = Vec::new();
        encode(&record(Trace2Event::CmdPath { path: "/bin/x" }), &mut buf);
        let mut list = Vec::new();
        assert_eq!(decode(&[], &mut list).unwrap_err(), DecodeError::Truncated);
        for cut in 1..buf.len() {
            assert_eq!(
                decode(&buf[..cut], &mut list).unwrap_err(),
                DecodeError::Truncated,
                "{cut}"
            );
        }
        let mut wrong = buf.clone();
        wrong[0] = 1;
        assert_eq!(
            decode(&wrong, &mut list).unwrap_err(),
            DecodeError::Version(1)
        );
        let mut wrong = buf.clone();
        // A kind the catalogue does not have is reported, not skipped.
        let past = crate::catalogue::KIND_COUNT as u8 + 1;
        for tag in [0, past, 200] {
            wrong[FRAME_HEADER] = tag;
            assert_eq!(
                decode(&wrong, &mut Vec::new()).unwrap_err(),
                DecodeError::Tag(tag)
            );
        }
        let mut wrong = buf.clone();
        let last = wrong.len() - 1;
        wrong[last] = 0xFF;
        assert_eq!(decode(&wrong, &mut list).unwrap_err(), DecodeError::Utf8);
        // A longer body than its fields.
        let mut wrong = buf.clone();
        wrong.push(0);
        let body = (wrong.len() - FRAME_HEADER) as u32;
        wrong[1..FRAME_HEADER].copy_from_slice(&body.to_le_bytes());
        assert_eq!(
            decode(&wrong, &mut list).unwrap_err(),
            DecodeError::TrailingBytes
        );
        // A presence byte that is neither 0 nor 1.
        let mut data = Vec::new();
        encode(
            &record(Trace2Event::Data {
                repo: None,
                category: "",
                key: "",
                value: "",
                nesting: 1,
                t_rel_us: 0,
            }),
            &mut data,
        );
        // The repo flag, before three empty strings, the nesting and t_rel.
        let flag = data.len() - (1 + 3 * 4 + 4 + 8);
        data[flag] = 7;
        assert_eq!(decode(&data, &mut list).unwrap_err(), DecodeError::Flag(7));
        let mut replayer = Replayer::new();
        assert_eq!(
            replayer.replay(&data, |_| {}).unwrap_err(),
            DecodeError::Flag(7)
        );
        assert!(DecodeError::Flag(7).to_string().contains("flag byte 7"));
    }

    #[test]
    fn long_strings_are_cut_at_a_character_boundary() {
        let mut buf = Vec::new();
        let mut w = FrameWriter {
            out: Appender::new(&mut buf),
            budget: 4,
        };
        w.str("aéé");
        assert_eq!(w.budget, 1);
        drop(w);
        // 'a' + 'é' fit in 3 bytes; the second 'é' would cross the budget.
        assert_eq!(&buf[..], b"\x03\0\0\0a\xc3\xa9");
    }

    /// The budget is shared by the strings of a frame: each takes what it wrote from
    /// it, a string that fits exactly is whole, and once it is spent strings are empty.
    #[test]
    fn the_string_budget_is_spent_across_a_frame() {
        let mut buf = Vec::new();
        let mut w = FrameWriter {
            out: Appender::new(&mut buf),
            budget: 9,
        };
        w.str("aéé"); // 5 bytes, whole
        assert_eq!(w.budget, 4);
        w.str("bcd"); // 3 bytes, whole
        assert_eq!(w.budget, 1);
        w.str("e"); // exactly what is left
        assert_eq!(w.budget, 0);
        w.str("fg");
        w.opt_str(Some("h"));
        assert_eq!(w.budget, 0);
        drop(w);
        assert_eq!(
            &buf[..],
            b"\x05\0\0\0a\xc3\xa9\xc3\xa9\x03\0\0\0bcd\x01\0\0\0e\0\0\0\0\0\0\0\0"
        );
    }
}
