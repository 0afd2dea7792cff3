//! Reading one batch: a cursor that parses its records one event at a time, checked
//! against the stream's kind table, and turns each event back into a [`Record`].
//!
//! Every step is bounds-checked: a varint past the end, a reference to a string or
//! callsite the batch has not defined, text that is not UTF-8, a value out of its
//! type's range or a kind the stream never declared ends the batch there. The events
//! before that point are kept; nothing after it is guessed at.

use std::fmt;
use std::sync::{Arc, OnceLock};

use crate::header::{BatchHeader, DeclaredKind};
use crate::record::catalogue::FieldError;
use crate::record::{
    Callsite, FieldType, FieldValue, Kind, Record, RegionInfo, Timestamp, Trace2Event,
};
use crate::spec::{self, ArgType, MAX_ARGS, Origins, Place, control, kind};
use crate::varint::ByteCursor;

/// How to parse each kind of one stream: the baseline table plus what the stream
/// declared.
#[derive(Clone, Debug)]
pub(crate) struct KindTable {
    kinds: Vec<Option<KindEntry>>,
}

#[derive(Clone, Debug)]
struct KindEntry {
    args: Vec<ArgType>,
    /// The baseline event this kind is (possibly with extra trailing arguments); `false`
    /// for a kind this decoder cannot show.
    known: bool,
}

impl KindTable {
    /// The table of format 1.0, made once.
    fn baseline() -> &'static Arc<KindTable> {
        static BASELINE: OnceLock<Arc<KindTable>> = OnceLock::new();
        BASELINE.get_or_init(|| {
            let mut kinds: Vec<Option<KindEntry>> = vec![None; usize::from(control::FIRST)];
            for spec in &spec::EVENT_KINDS {
                kinds[usize::from(spec.id)] = Some(KindEntry {
                    args: parse_signature(spec.signature).unwrap_or_default(),
                    known: true,
                });
            }
            Arc::new(KindTable { kinds })
        })
    }

    /// The table of a stream that declared `declared`.
    pub fn new(declared: &[DeclaredKind]) -> Result<Arc<KindTable>, String> {
        if declared.is_empty() {
            return Ok(Arc::clone(Self::baseline()));
        }
        let mut kinds = Self::baseline().kinds.clone();
        for d in declared {
            let Some(slot) = kinds.get_mut(usize::from(d.id)) else {
                return Err(format!("declared kind {:#x} is not an event kind", d.id));
            };
            let args = parse_signature(&d.signature)
                .ok_or_else(|| format!("declared kind {:#x}: bad signature", d.id))?;
            // A baseline kind may grow trailing arguments; anything else is new to us.
            let known = spec::baseline(d.id)
                .is_some_and(|b| d.signature.starts_with(b.signature) && d.name == b.name);
            *slot = Some(KindEntry { args, known });
        }
        Ok(Arc::new(KindTable { kinds }))
    }

    fn get(&self, kind: u8) -> Option<&KindEntry> {
        self.kinds.get(usize::from(kind))?.as_ref()
    }
}

fn parse_signature(signature: &str) -> Option<Vec<ArgType>> {
    if signature.len() > MAX_ARGS {
        return None;
    }
    signature.bytes().map(ArgType::from_code).collect()
}

/// Why the rest of a batch was not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchError {
    /// A record runs past the end of the batch.
    Truncated,
    /// A head byte names a kind the stream does not have.
    UnknownKind(u8),
    /// A definition's id is not the next one.
    BadDefinition,
    /// A reference to a string or callsite not defined before it.
    BadReference,
    /// Text that is not UTF-8.
    NotUtf8,
    /// A value out of the range of its field, or a missing required one.
    BadValue(&'static str),
    /// Time ran past the 64-bit tick range.
    TicksOverflow,
}

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BatchError::Truncated => f.write_str("a record runs past the end of the batch"),
            BatchError::UnknownKind(k) => write!(f, "undeclared record kind {k:#04x}"),
            BatchError::BadDefinition => f.write_str("a definition out of sequence"),
            BatchError::BadReference => f.write_str("a reference to an undefined entry"),
            BatchError::NotUtf8 => f.write_str("text that is not UTF-8"),
            BatchError::BadValue(what) => write!(f, "bad value for {what}"),
            BatchError::TicksOverflow => f.write_str("time beyond the tick range"),
        }
    }
}

impl From<FieldError> for BatchError {
    fn from(e: FieldError) -> Self {
        BatchError::BadValue(e.field)
    }
}

/// A byte range of the payload.
type Span = (usize, usize);

/// One argument as parsed, by position in the payload.
#[derive(Clone, Copy, Debug)]
enum Val {
    U(u64),
    I(i64),
    Str(Option<Span>),
    /// A list: the index of its first item in `BatchReader::items` and the item count.
    List(usize, usize),
    /// A packed number's text, in `BatchReader::number`.
    Number,
    /// A `d` text, in `BatchReader::delta`.
    Delta,
    /// A `t_rel` in its wire form, resolved once the whole event is read.
    RelWire(u64),
}

/// Where the texts of an event are: the payload, and the texts the cursor rebuilt.
#[derive(Clone, Copy)]
struct Texts<'a> {
    payload: &'a [u8],
    number: &'a str,
    delta: &'a [u8],
}

/// The next event of a cursor, parsed and checked.
#[derive(Clone, Debug)]
struct Parsed {
    kind: u8,
    ticks: u64,
    callsite: Option<(Option<Span>, u32)>,
    repo: Option<i64>,
    open: u32,
    wall_offset: i64,
    thread: Span,
    args: [Val; MAX_ARGS],
}

/// Reads one batch, one event at a time.
pub(crate) struct BatchReader {
    payload: Vec<u8>,
    pub header: BatchHeader,
    pos: usize,
    strings: Vec<Span>,
    callsites: Vec<(Option<Span>, u32)>,
    ticks: u64,
    wall_offset: i64,
    open_state: u32,
    open_override: Option<u32>,
    thread: Span,
    cut_next: bool,
    items: Vec<Span>,
    origins: Origins,
    /// The text of the pending event's packed number.
    number: String,
    /// The pending event's `d` text, and the one the next `d` text edits.
    delta: Vec<u8>,
    delta_prev: Vec<u8>,
    next: Option<Parsed>,
    /// Events of kinds this decoder cannot show, read past.
    pub unknown_events: u64,
    /// Events whose texts the writer had to cut.
    pub cut_events: u64,
    /// Why the batch ended early, if it did.
    pub error: Option<BatchError>,
    /// The position of the next event in the batch, for tie-breaking.
    pub position: u64,
}

impl BatchReader {
    /// A cursor before the first event of a batch (whose header is already parsed).
    pub fn new(payload: Vec<u8>, header: BatchHeader, kinds: &KindTable) -> BatchReader {
        let mut cursor = BatchReader {
            pos: header.records,
            strings: Vec::new(),
            callsites: Vec::new(),
            ticks: header.base_ticks,
            wall_offset: 0,
            open_state: header.open_at_start,
            open_override: None,
            thread: header.thread_name,
            cut_next: false,
            items: Vec::new(),
            origins: Origins::default(),
            number: String::new(),
            delta: Vec::new(),
            delta_prev: Vec::new(),
            next: None,
            unknown_events: 0,
            cut_events: 0,
            error: None,
            position: 0,
            payload,
            header,
        };
        cursor.advance(kinds);
        cursor
    }

    /// The payload's size (what the batch holds in memory).
    pub fn size(&self) -> usize {
        self.payload.len()
    }

    /// Ticks of the next event, or `None` when the batch is done.
    pub fn next_ticks(&self) -> Option<u64> {
        self.next.as_ref().map(|p| p.ticks)
    }

    /// Ticks of the last record seen (for ordering checks between batches).
    pub fn last_ticks(&self) -> u64 {
        self.ticks
    }

    fn text(&self, (start, len): Span) -> &str {
        // Checked when parsed; an empty text can only stand for a bug here.
        std::str::from_utf8(&self.payload[start..start + len]).unwrap_or_default()
    }

    /// Moves to the next event (after the one the decoder's `emit` last showed).
    pub fn advance(&mut self, kinds: &KindTable) {
        self.next = None;
        if self.error.is_some() {
            return;
        }
        loop {
            if self.pos >= self.payload.len() {
                return;
            }
            match self.parse_one(kinds) {
                Ok(Some(parsed)) => {
                    self.position += 1;
                    self.next = Some(parsed);
                    return;
                }
                Ok(None) => {}
                Err(err) => {
                    self.error = Some(err);
                    return;
                }
            }
        }
    }

    /// Parses one record at `pos`: `Some` for an event to show, `None` for a control
    /// record or an event of a kind this decoder cannot show.
    fn parse_one(&mut self, kinds: &KindTable) -> Result<Option<Parsed>, BatchError> {
        // Lent out for the parse, which also updates the cursor's tables.
        let payload = std::mem::take(&mut self.payload);
        let result = self.parse_in(&payload, kinds);
        self.payload = payload;
        result
    }

    fn parse_in(
        &mut self,
        payload: &[u8],
        kinds: &KindTable,
    ) -> Result<Option<Parsed>, BatchError> {
        let mut r = ByteCursor::new(payload);
        r.bytes(self.pos).ok_or(BatchError::Truncated)?;
        let head = r.u8().ok_or(BatchError::Truncated)?;
        let k = head & spec::KIND_MASK;
        if k >= control::FIRST {
            if head & !spec::KIND_MASK != 0 {
                return Err(BatchError::BadValue("control record flags"));
            }
            self.control(k, &mut r)?;
            self.pos = r.pos();
            return Ok(None);
        }
        let entry = kinds.get(k).ok_or(BatchError::UnknownKind(k))?;
        let dt = r.uvarint().ok_or(BatchError::Truncated)?;
        let ticks = self
            .ticks
            .checked_add(dt)
            .ok_or(BatchError::TicksOverflow)?;
        let callsite = if head & spec::HAS_CALLSITE != 0 {
            let id = r.uvarint().ok_or(BatchError::Truncated)?;
            let index = usize::try_from(id).ok().and_then(|i| i.checked_sub(1));
            Some(
                *index
                    .and_then(|i| self.callsites.get(i))
                    .ok_or(BatchError::BadReference)?,
            )
        } else {
            None
        };
        let repo = if head & spec::HAS_REPO != 0 {
            Some(r.ivarint().ok_or(BatchError::Truncated)?)
        } else {
            None
        };
        let mut args = [Val::U(0); MAX_ARGS];
        self.items.clear();
        for (slot, &ty) in args.iter_mut().zip(&entry.args) {
            *slot = self.arg(ty, &mut r)?;
        }
        self.pos = r.pos();
        self.ticks = ticks;
        let cut = std::mem::take(&mut self.cut_next);
        let nesting = match (k, args[0]) {
            (kind::REGION_ENTER | kind::REGION_LEAVE | kind::DATA | kind::DATA_JSON, Val::U(n)) => {
                u32::try_from(n).map_err(|_| BatchError::BadValue("nesting"))?
            }
            _ => 0,
        };
        // `t_rel` values, now that the kind, nesting and time are known.
        let mut t_rel = 0;
        for arg in &mut args {
            if let Val::RelWire(wire) = *arg {
                let predicted = self.origins.predict(k, nesting, ticks);
                t_rel = spec::rel_time_from_wire(wire, predicted);
                *arg = Val::U(t_rel);
            }
        }
        self.origins.learn(k, nesting, ticks, t_rel);
        if !entry.known {
            self.unknown_events += 1;
            self.open_override = None;
            return Ok(None);
        }
        let predicted = spec::predicted_open(k, nesting, self.open_state);
        let open = self.open_override.take().unwrap_or(predicted);
        self.open_state = spec::open_after(k, open, self.open_state);
        let parsed = Parsed {
            kind: k,
            ticks,
            callsite,
            repo,
            open,
            wall_offset: self.wall_offset,
            thread: self.thread,
            args,
        };
        // Check now that the event can be built: nothing is shown that cannot be.
        build_event(&parsed, self.texts(payload), &[])?;
        if cut {
            self.cut_events += 1;
        }
        Ok(Some(parsed))
    }

    fn control(&mut self, k: u8, r: &mut ByteCursor<'_>) -> Result<(), BatchError> {
        let t = BatchError::Truncated;
        match k {
            control::STR_DEF => {
                let id = r.uvarint().ok_or(t)?;
                if id != self.strings.len() as u64 + 1 {
                    return Err(BatchError::BadDefinition);
                }
                let span = r.span().ok_or(BatchError::Truncated)?;
                check_utf8(r.buf(), span)?;
                self.strings.push(span);
            }
            control::CS_DEF => {
                let id = r.uvarint().ok_or(t)?;
                if id != self.callsites.len() as u64 + 1 {
                    return Err(BatchError::BadDefinition);
                }
                let file = self.string_ref(r.uvarint().ok_or(BatchError::Truncated)?)?;
                let line = r.u32var().ok_or(BatchError::BadValue("line"))?;
                self.callsites.push((file, line));
            }
            control::THREAD => {
                let span = r.span().ok_or(t)?;
                check_utf8(r.buf(), span)?;
                self.thread = span;
            }
            control::OPEN => {
                self.open_override = Some(r.u32var().ok_or(BatchError::BadValue("open"))?);
            }
            control::WALL => self.wall_offset = r.ivarint().ok_or(t)?,
            control::TICKS => self.ticks = r.uvarint().ok_or(t)?,
            control::CUT => self.cut_next = true,
            other => return Err(BatchError::UnknownKind(other)),
        }
        Ok(())
    }

    fn string_ref(&self, id: u64) -> Result<Option<Span>, BatchError> {
        if id == 0 {
            return Ok(None);
        }
        let index = usize::try_from(id - 1).map_err(|_| BatchError::BadReference)?;
        self.strings
            .get(index)
            .copied()
            .map(Some)
            .ok_or(BatchError::BadReference)
    }

    fn arg(&mut self, ty: ArgType, r: &mut ByteCursor<'_>) -> Result<Val, BatchError> {
        let t = BatchError::Truncated;
        Ok(match ty {
            ArgType::Uint | ArgType::Flags => Val::U(r.uvarint().ok_or(t)?),
            ArgType::Int => Val::I(r.ivarint().ok_or(t)?),
            ArgType::StrRef => Val::Str(self.string_ref(r.uvarint().ok_or(t)?)?),
            ArgType::Bytes | ArgType::Json => {
                let span = r.span().ok_or(t)?;
                check_utf8(r.buf(), span)?;
                Val::Str(Some(span))
            }
            ArgType::OptBytes => match r.uvarint().ok_or(BatchError::Truncated)? {
                0 => Val::Str(None),
                n => {
                    let len = usize::try_from(n - 1).map_err(|_| BatchError::Truncated)?;
                    let start = r.pos();
                    r.bytes(len).ok_or(BatchError::Truncated)?;
                    check_utf8(r.buf(), (start, len))?;
                    Val::Str(Some((start, len)))
                }
            },
            ArgType::NumText => {
                let v = r.uvarint().ok_or(t)?;
                if v & 1 == 0 {
                    use std::fmt::Write;
                    self.number.clear();
                    let _ = write!(self.number, "{}", v >> 1);
                    Val::Number
                } else {
                    let len = usize::try_from(v >> 1).map_err(|_| BatchError::Truncated)?;
                    let start = r.pos();
                    r.bytes(len).ok_or(BatchError::Truncated)?;
                    check_utf8(r.buf(), (start, len))?;
                    Val::Str(Some((start, len)))
                }
            }
            ArgType::Delta => match r.uvarint().ok_or(t)? {
                0 => Val::Str(None),
                tag => {
                    let prefix = usize::try_from(tag - 1).map_err(|_| BatchError::Truncated)?;
                    let suffix = r.uvarint().ok_or(BatchError::Truncated)?;
                    let suffix = usize::try_from(suffix).map_err(|_| BatchError::Truncated)?;
                    let (start, len) = r.span().ok_or(BatchError::Truncated)?;
                    let prev = &self.delta_prev;
                    if prefix.checked_add(suffix).is_none_or(|n| n > prev.len()) {
                        return Err(BatchError::BadValue("text edit"));
                    }
                    self.delta.clear();
                    self.delta.extend_from_slice(&prev[..prefix]);
                    self.delta.extend_from_slice(&r.buf()[start..start + len]);
                    self.delta.extend_from_slice(&prev[prev.len() - suffix..]);
                    if std::str::from_utf8(&self.delta).is_err() {
                        return Err(BatchError::NotUtf8);
                    }
                    self.delta_prev.clear();
                    if self.delta.len() <= spec::DELTA_MAX {
                        self.delta_prev.extend_from_slice(&self.delta);
                    }
                    Val::Delta
                }
            },
            ArgType::RelTime => Val::RelWire(r.uvarint().ok_or(t)?),
            ArgType::List => {
                let count = r.uvarint().ok_or(t)?;
                // Each item takes at least a byte: a larger count is damage.
                if count > r.remaining() as u64 {
                    return Err(BatchError::Truncated);
                }
                let first = self.items.len();
                for _ in 0..count {
                    let span = r.span().ok_or(BatchError::Truncated)?;
                    check_utf8(r.buf(), span)?;
                    self.items.push(span);
                }
                Val::List(first, count as usize)
            }
        })
    }

    fn texts<'a>(&'a self, payload: &'a [u8]) -> Texts<'a> {
        Texts {
            payload,
            number: &self.number,
            delta: &self.delta,
        }
    }

    /// The list items of the next event, as text.
    pub fn items(&self) -> Vec<&str> {
        self.items.iter().map(|&span| self.text(span)).collect()
    }

    /// The next event as a record of `stream`; `items` must be [`Self::items`].
    /// `None` when the batch is done.
    pub fn record<'a>(
        &'a self,
        stream: &'a super::StreamInfo,
        items: &'a [&'a str],
    ) -> Option<Record<'a>> {
        let p = self.next.as_ref()?;
        let event = build_event(p, self.texts(&self.payload), items).ok()?;
        let t_abs_us = stream.micros(p.ticks);
        Some(Record {
            event,
            time: Timestamp {
                wall_us: stream
                    .anchor_at(p.ticks)
                    .wrapping_add(t_abs_us as i64)
                    .wrapping_add(p.wall_offset),
                t_abs_us,
            },
            sid: &stream.header.sid,
            depth: stream.header.depth,
            thread: self.text(p.thread),
            callsite: match p.callsite {
                Some((file, line)) => Callsite {
                    file: file.map(|span| self.text(span)),
                    line,
                },
                None => Callsite::default(),
            },
            open_regions: p.open,
        })
    }
}

/// Whether `payload[start..start + len]` (a span a reader returned) is UTF-8.
fn check_utf8(payload: &[u8], (start, len): Span) -> Result<(), BatchError> {
    std::str::from_utf8(&payload[start..start + len])
        .map(|_| ())
        .map_err(|_| BatchError::NotUtf8)
}

/// The event of `p`, its texts read from `payload` and its list from `items`: regions and
/// data by hand, every other kind by its catalogue row and [`spec::Layout`].
fn build_event<'a>(
    p: &Parsed,
    texts: Texts<'a>,
    items: &'a [&'a str],
) -> Result<Trace2Event<'a>, BatchError> {
    let utf8 = |bytes: &'a [u8]| std::str::from_utf8(bytes).map_err(|_| BatchError::NotUtf8);
    let opt = |i: usize| -> Result<Option<&'a str>, BatchError> {
        match p.args[i] {
            Val::Str(span) => span
                .map(|(start, len)| utf8(&texts.payload[start..start + len]))
                .transpose(),
            Val::Number => Ok(Some(texts.number)),
            Val::Delta => utf8(texts.delta).map(Some),
            _ => Err(BatchError::BadValue("text")),
        }
    };
    let req = |i: usize, what: &'static str| opt(i)?.ok_or(BatchError::BadValue(what));
    let u = |i: usize| match p.args[i] {
        Val::U(v) => Ok(v),
        _ => Err(BatchError::BadValue("unsigned")),
    };
    let int = |i: usize| match p.args[i] {
        Val::I(v) => Ok(v),
        _ => Err(BatchError::BadValue("signed")),
    };
    let i32_at = |i: usize, what| i32::try_from(int(i)?).map_err(|_| BatchError::BadValue(what));
    let u32_at = |i: usize, what| u32::try_from(u(i)?).map_err(|_| BatchError::BadValue(what));
    let list = |i: usize| match p.args[i] {
        // `items` is empty while parsing (only the shape is checked then).
        Val::List(first, count) => Ok(items.get(first..first + count).unwrap_or(&[])),
        _ => Err(BatchError::BadValue("list")),
    };
    let kind = Kind::from_id(p.kind).ok_or(BatchError::UnknownKind(p.kind))?;
    let layout = spec::layout(kind);
    if p.repo.is_some() && !layout.has_repo {
        return Err(BatchError::BadValue("repo on an event without one"));
    }
    let event = match kind {
        Kind::RegionEnter => Trace2Event::RegionEnter {
            region: RegionInfo {
                repo: p.repo,
                category: opt(1)?,
                label: opt(2)?,
                msg: opt(3)?,
            },
            nesting: u32_at(0, "nesting")?,
        },
        Kind::RegionLeave => Trace2Event::RegionLeave {
            region: RegionInfo {
                repo: p.repo,
                category: opt(2)?,
                label: opt(3)?,
                msg: opt(4)?,
            },
            nesting: u32_at(0, "nesting")?,
            t_rel_us: u(1)?,
        },
        Kind::Data => Trace2Event::Data {
            repo: p.repo,
            nesting: u32_at(0, "nesting")?,
            t_rel_us: u(1)?,
            category: req(2, "category")?,
            key: req(3, "key")?,
            value: req(4, "value")?,
        },
        Kind::DataJson => Trace2Event::DataJson {
            repo: p.repo,
            nesting: u32_at(0, "nesting")?,
            t_rel_us: u(1)?,
            category: req(2, "category")?,
            key: req(3, "key")?,
            json: req(4, "json")?,
        },
        // A new kind not in `regular_kind!` stops the build here: list it there (its
        // row then says everything), or give it an arm of its own.
        tracing_trace2_record::regular_kind!() => {
            // Every field from where the kind's layout puts it, in catalogue order.
            let mut places = layout.places.iter();
            Trace2Event::from_fields(kind, |field| {
                let place = places.next().copied().unwrap_or(Place::Head);
                Ok(match place {
                    Place::Head => match field.ty {
                        FieldType::OptInt => FieldValue::OptInt(p.repo),
                        _ => FieldValue::Int(p.repo.ok_or(BatchError::BadValue(field.name))?),
                    },
                    Place::Flag { arg, bit } => {
                        let flags = u(usize::from(arg))?;
                        if flags >> layout.flag_count != 0 {
                            return Err(BatchError::BadValue("flags"));
                        }
                        FieldValue::Flag(flags >> bit & 1 != 0)
                    }
                    Place::Arg(arg) => {
                        let i = usize::from(arg);
                        match field.ty {
                            FieldType::Text | FieldType::TextOmittedWhenEmpty | FieldType::Json => {
                                FieldValue::Text(req(i, field.name)?)
                            }
                            FieldType::OptText => FieldValue::OptText(opt(i)?),
                            FieldType::TextList => FieldValue::TextList(list(i)?),
                            FieldType::Uint
                            | FieldType::Count
                            | FieldType::Micros
                            | FieldType::Nanos => FieldValue::Uint(u(i)?),
                            FieldType::Int => FieldValue::Int(int(i)?),
                            FieldType::Nesting => FieldValue::Nesting(u32_at(i, field.name)?),
                            FieldType::Code => FieldValue::Code(i32_at(i, field.name)?),
                            // The layout puts these in the head and the flags.
                            FieldType::OptInt | FieldType::Flag => {
                                return Err(BatchError::BadValue(field.name));
                            }
                        }
                    }
                })
            })?
        }
    };
    Ok(event)
}
