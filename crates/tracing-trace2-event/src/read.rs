//! The Event reader: one Event (JSON) line back into the [`Record`] that the Event
//! formatter would write it from, driven by the record crate's catalogue.
//!
//! [`read_line`] parses a line into an [`EventLine`] that borrows from it (strings that
//! need unescaping are copied); [`EventLine::record`] lends its values out as a
//! [`Record`]. Each field is looked up by the Event JSON key the
//! [catalogue](tracing_trace2_record::catalogue) gives it and read as its [`FieldType`]
//! says, so a new kind needs no code here.
//!
//! A line carries less than a record, and the reader fills the rest the way the
//! formatter would not notice: it writes the same line again from the record it reads
//! (a test checks this for random records). In detail:
//! - `depth` is the number of `/` in the sid, as the layer counts it;
//! - `open_regions` is `nesting - 1` for regions and data (as the layer writes them),
//!   else 0, which Event lines do not show;
//! - `time.wall_us` is 0 when the line has no `time` (brief mode), `time.t_abs_us` is 0
//!   for kinds without a `t_abs`; the callsite is absent without `file`
//!   ([`EventLine::header`] says which of these the line had);
//! - fields the catalogue gives no key (`exec_result`'s `err`) take their default, and
//!   `child_start`'s `is_git` is read from the `"git"` its `argv` then starts with;
//! - nanosecond timer totals come back as a value that Event JSON writes the same
//!   (it shows microseconds), and an empty `data_json` value (written `null`) comes back empty.
//!
//! Readers of files written by other programs get some slack that the formatter's own
//! lines never need: seconds with more or fewer than six decimals, a `time` with more or
//! fewer fractional digits, `null` for an absent key. A key given twice fails the line.
//!
//! A line of a kind the catalogue does not have is an error
//! ([`ReadError::UnknownKind`]), never skipped; [`read_any_line`] instead hands such a
//! line over as an [`UnknownLine`], with the keys every line has, for a tool that passes
//! it along. Keys a line has beyond its catalogue row are listed by
//! [`EventLine::unknown_keys`].

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use tracing_trace2_record::catalogue::{Field, FieldError, FieldType, FieldValue, Kind};
use tracing_trace2_record::text::push_timer_seconds;
use tracing_trace2_record::{Callsite, Record, Timestamp, Trace2Event};

/// Why a line could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadError {
    /// The line is not JSON.
    Json(String),
    /// The line stops before its JSON does: a line cut short.
    CutShort,
    /// The line is JSON, but not an object with unique keys.
    BadObject(String),
    /// The line has no `event` key.
    NoEvent,
    /// The line's `event` is not a kind of the catalogue.
    UnknownKind(String),
    /// A key the event needs is missing.
    Missing {
        /// The event.
        kind: Kind,
        /// The key.
        key: &'static str,
    },
    /// A key's value is not what the catalogue says.
    BadValue {
        /// The event (`None` for a line of an unknown kind).
        kind: Option<Kind>,
        /// The key.
        key: &'static str,
    },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Json(e) => write!(f, "not JSON: {e}"),
            ReadError::CutShort => f.write_str("cut short"),
            ReadError::BadObject(e) => write!(f, "not a JSON object with unique keys: {e}"),
            ReadError::NoEvent => f.write_str("no \"event\" key"),
            ReadError::UnknownKind(name) => write!(f, "unknown event kind {name:?}"),
            ReadError::Missing { kind, key } => write!(f, "{kind}: no \"{key}\""),
            ReadError::BadValue {
                kind: Some(kind),
                key,
            } => write!(f, "{kind}: bad \"{key}\""),
            ReadError::BadValue { kind: None, key } => write!(f, "bad \"{key}\""),
        }
    }
}

impl std::error::Error for ReadError {}

impl From<FieldError> for ReadError {
    fn from(e: FieldError) -> Self {
        ReadError::BadValue {
            kind: Some(e.kind),
            key: e.field,
        }
    }
}

impl From<serde_json::Error> for ReadError {
    fn from(e: serde_json::Error) -> Self {
        if e.is_eof() {
            ReadError::CutShort
        } else if e.is_data() {
            ReadError::BadObject(e.to_string())
        } else {
            ReadError::Json(e.to_string())
        }
    }
}

/// The keys every line may have, whatever its kind.
const HEADER_KEYS: [&str; 7] = ["event", "sid", "thread", "time", "file", "line", "t_abs"];

/// One value of a line, borrowed from it where it needs no unescaping.
#[derive(Clone, Debug)]
enum Value<'a> {
    /// A JSON string, unescaped.
    Text(Cow<'a, str>),
    /// An array of strings.
    List(Vec<Cow<'a, str>>),
    /// Anything else (numbers, booleans, objects, `null`, other arrays).
    Other,
}

/// One key of a line: its name, its JSON text as written and its value.
#[derive(Clone, Debug)]
struct Entry<'a> {
    key: Cow<'a, str>,
    raw: &'a str,
    value: Value<'a>,
}

/// The keys of a line, in line order.
#[derive(Clone, Debug)]
struct Entries<'a>(Vec<Entry<'a>>);

/// The keys every line has, read from a line of any kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineHeader<'a> {
    /// Session id.
    pub sid: &'a str,
    /// Trace2 thread name.
    pub thread: &'a str,
    /// Unix microseconds of `time`; `None` when the line has none (brief mode).
    pub wall_us: Option<i64>,
    /// Microseconds of `t_abs`, when the line has one.
    pub t_abs_us: Option<u64>,
    /// `file`, when given.
    pub file: Option<&'a str>,
    /// `line`, when given.
    pub line: Option<u32>,
}

/// One Event line, parsed: its kind and its values, borrowed from the line.
#[derive(Clone, Debug)]
pub struct EventLine<'a> {
    kind: Kind,
    entries: Entries<'a>,
}

/// A line whose `event` the catalogue does not know, parsed.
#[derive(Clone, Debug)]
pub struct UnknownLine<'a> {
    name: Cow<'a, str>,
    entries: Entries<'a>,
}

/// A line of a known kind or not ([`read_any_line`]).
#[derive(Clone, Debug)]
pub enum AnyLine<'a> {
    /// A kind of the catalogue.
    Known(EventLine<'a>),
    /// A kind the catalogue does not have (a newer git's, another program's).
    Unknown(UnknownLine<'a>),
}

/// Parses one Event line (with or without its LF); a kind the catalogue does not have is
/// [`ReadError::UnknownKind`].
pub fn read_line(line: &str) -> Result<EventLine<'_>, ReadError> {
    match read_any_line(line)? {
        AnyLine::Known(line) => Ok(line),
        AnyLine::Unknown(line) => Err(ReadError::UnknownKind(line.name.into_owned())),
    }
}

/// Parses one Event line (with or without its LF), of a known kind or not.
pub fn read_any_line(line: &str) -> Result<AnyLine<'_>, ReadError> {
    let line = line.strip_suffix('\n').unwrap_or(line);
    let entries: Entries<'_> = serde_json::from_str(line)?;
    let name = match entries.get("event") {
        Some(Entry {
            value: Value::Text(name),
            ..
        }) => name.clone(),
        _ => return Err(ReadError::NoEvent),
    };
    Ok(match Kind::from_name(&name) {
        Some(kind) => AnyLine::Known(EventLine { kind, entries }),
        None => AnyLine::Unknown(UnknownLine { name, entries }),
    })
}

impl<'a> Entries<'a> {
    /// The first entry named `key`.
    fn get(&self, key: &str) -> Option<&Entry<'a>> {
        self.0.iter().find(|entry| same_key(&entry.key, key))
    }

    /// The string value of `key`; `None` when absent or `null`.
    fn text(&self, key: &'static str, kind: Option<Kind>) -> Result<Option<&str>, ReadError> {
        match self.get(key) {
            Some(Entry {
                value: Value::Text(text),
                ..
            }) => Ok(Some(text)),
            None | Some(Entry { raw: "null", .. }) => Ok(None),
            Some(_) => Err(ReadError::BadValue { kind, key }),
        }
    }

    /// The non-string value of `key` parsed by `parse`; `None` when absent or `null`.
    fn number<T>(
        &self,
        key: &'static str,
        kind: Option<Kind>,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<Option<T>, ReadError> {
        match self.get(key) {
            None | Some(Entry { raw: "null", .. }) => Ok(None),
            Some(Entry {
                value: Value::Other,
                raw,
                ..
            }) => parse(raw)
                .map(Some)
                .ok_or(ReadError::BadValue { kind, key }),
            Some(_) => Err(ReadError::BadValue { kind, key }),
        }
    }

    fn header(&self, kind: Option<Kind>) -> Result<LineHeader<'_>, ReadError> {
        let required = |key: &'static str| {
            self.text(key, kind)?.ok_or(match kind {
                Some(kind) => ReadError::Missing { kind, key },
                None => ReadError::BadValue { kind, key },
            })
        };
        let wall_us = match self.text("time", kind)? {
            Some(time) => Some(wall_us(time).ok_or(ReadError::BadValue { kind, key: "time" })?),
            None => None,
        };
        Ok(LineHeader {
            sid: required("sid")?,
            thread: required("thread")?,
            wall_us,
            t_abs_us: self.number("t_abs", kind, micros)?,
            file: self.text("file", kind)?,
            line: self.number("line", kind, |t| t.parse::<u32>().ok())?,
        })
    }
}

impl UnknownLine<'_> {
    /// The line's `event`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The keys every line has.
    pub fn header(&self) -> Result<LineHeader<'_>, ReadError> {
        self.entries.header(None)
    }

    /// Every key of the line, in line order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.0.iter().map(|entry| entry.key.as_ref())
    }
}

impl<'l> EventLine<'l> {
    /// The line's kind.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The keys every line has, and which of them this one had (see [`LineHeader`]).
    pub fn header(&self) -> Result<LineHeader<'_>, ReadError> {
        self.entries.header(Some(self.kind))
    }

    /// Whether the line has `key` (its value may be `null`).
    pub fn has_key(&self, key: &str) -> bool {
        self.entries.get(key).is_some()
    }

    /// Whether the line has `key` with a value other than `null` (which the reader takes
    /// for an absent key, except as the JSON of a `data_json` value).
    pub fn has_value(&self, key: &str) -> bool {
        self.entries
            .get(key)
            .is_some_and(|entry| entry.raw != "null")
    }

    /// The keys of the line that neither every line nor its kind's catalogue row has
    /// (a newer git's additions, another program's), in line order.
    pub fn unknown_keys(&self) -> impl Iterator<Item = &str> {
        let fields = self.kind.spec().fields;
        self.entries
            .0
            .iter()
            .map(|entry| entry.key.as_ref())
            .filter(move |key| {
                let known = HEADER_KEYS.iter().any(|known| same_key(known, key))
                    // The format version, constant, that `version` lines carry.
                    || (self.kind == Kind::Version && *key == "evt")
                    || fields
                        .iter()
                        .any(|field| field.key.is_some_and(|known| same_key(known, key)));
                !known
            })
    }

    /// The record the line was written from (see the module docs for what a line does
    /// not carry). Its argument list, if the kind has one, is put in `list`.
    pub fn record<'a>(&'a self, list: &'a mut Vec<&'a str>) -> Result<Record<'a>, ReadError> {
        self.record_as(list, Missing::Refused)
    }

    /// Like [`record`](Self::record), for lines written by hand or by other programs:
    /// a field whose key the line lacks takes its type's default (`""`, 0, `false`)
    /// instead of failing the line. A caller that needs a key asks
    /// [`has_key`](Self::has_key). A key present with a bad value still fails, and so do
    /// a missing `sid` or `thread`.
    pub fn record_filling_missing<'a>(
        &'a self,
        list: &'a mut Vec<&'a str>,
    ) -> Result<Record<'a>, ReadError> {
        self.record_as(list, Missing::Filled)
    }

    fn record_as<'a>(
        &'a self,
        list: &'a mut Vec<&'a str>,
        missing: Missing,
    ) -> Result<Record<'a>, ReadError> {
        let kind = self.kind;
        let header = self.header()?;

        // `child_start` shows a git child as a "git" before its arguments.
        let items: &[Cow<'a, str>] = match kind
            .spec()
            .fields
            .iter()
            .find(|f| f.ty == FieldType::TextList)
        {
            Some(field) => {
                let key = field.key.unwrap_or_default();
                match self.entries.get(key).map(|entry| &entry.value) {
                    Some(Value::List(items)) => items.as_slice(),
                    None => &[],
                    Some(_) => {
                        return Err(ReadError::BadValue {
                            kind: Some(kind),
                            key,
                        });
                    }
                }
            }
            None => &[],
        };
        let is_git = kind == Kind::ChildStart && items.first().is_some_and(|a| a == "git");
        let items = if is_git { &items[1..] } else { items };
        list.clear();
        list.extend(items.iter().map(|item| item.as_ref()));
        let list: &'a [&'a str] = list;

        let event = Trace2Event::from_fields(kind, |field| {
            match (self.field(kind, field, list, is_git), missing) {
                (Err(ReadError::Missing { .. }), Missing::Filled) => Ok(default_of(field.ty)),
                (value, _) => value,
            }
        })?;
        let open_regions = event.nesting().map_or(0, |n| n.saturating_sub(1));
        let sid = header.sid;
        Ok(Record {
            event,
            time: Timestamp {
                wall_us: header.wall_us.unwrap_or(0),
                t_abs_us: header.t_abs_us.unwrap_or(0),
            },
            sid,
            depth: sid.bytes().filter(|&b| b == b'/').count() as u32,
            thread: header.thread,
            callsite: Callsite {
                file: header.file,
                line: header.file.and(header.line).unwrap_or(0),
            },
            open_regions,
        })
    }

    /// The value of one field, read by its catalogue entry.
    fn field<'a>(
        &'a self,
        kind: Kind,
        field: &'static Field,
        list: &'a [&'a str],
        is_git: bool,
    ) -> Result<FieldValue<'a>, ReadError> {
        use FieldType as T;
        let Some(key) = field.key else {
            // Not in Event JSON: what the formatter's output would not show.
            return Ok(match field.ty {
                T::Flag if field.name == "is_git" => FieldValue::Flag(is_git),
                T::OptText => FieldValue::OptText(None),
                _ => {
                    return Err(ReadError::BadValue {
                        kind: Some(kind),
                        key: field.name,
                    });
                }
            });
        };
        let missing = || ReadError::Missing { kind, key };
        let text = || self.entries.text(key, Some(kind));
        let number = |parse: fn(&str) -> Option<FieldValue<'a>>| {
            self.entries
                .number(key, Some(kind), parse)?
                .ok_or_else(missing)
        };
        Ok(match field.ty {
            T::Text => FieldValue::Text(text()?.ok_or_else(missing)?),
            T::TextOmittedWhenEmpty => FieldValue::Text(text()?.unwrap_or("")),
            T::OptText => FieldValue::OptText(text()?),
            T::TextList => FieldValue::TextList(list),
            // Kept as written; the formatter writes an empty JSON text as `null`.
            T::Json => match self.entries.get(key).map(|entry| entry.raw) {
                Some("null") => FieldValue::Text(""),
                Some(raw) => FieldValue::Text(raw),
                None => return Err(missing()),
            },
            T::Uint => number(|t| t.parse().ok().map(FieldValue::Uint))?,
            T::Count => number(|t| t.parse::<i64>().ok().map(|v| FieldValue::Uint(v as u64)))?,
            T::Int => number(|t| t.parse().ok().map(FieldValue::Int))?,
            T::OptInt => FieldValue::OptInt(
                self.entries
                    .number(key, Some(kind), |t| t.parse::<i64>().ok())?,
            ),
            T::Nesting => number(|t| t.parse().ok().map(FieldValue::Nesting))?,
            T::Code => number(|t| t.parse().ok().map(FieldValue::Code))?,
            T::Flag => number(|t| t.parse().ok().map(FieldValue::Flag))?,
            T::Micros => number(|t| micros(t).map(FieldValue::Uint))?,
            T::Nanos => number(|t| nanos(t).map(FieldValue::Uint))?,
        })
    }
}

/// What [`EventLine::record_as`] does with a field whose key is missing.
#[derive(Clone, Copy)]
enum Missing {
    Refused,
    Filled,
}

/// The value a missing field takes when missing fields are filled.
fn default_of(ty: FieldType) -> FieldValue<'static> {
    use FieldType as T;
    match ty {
        T::Text | T::TextOmittedWhenEmpty | T::Json => FieldValue::Text(""),
        T::OptText => FieldValue::OptText(None),
        T::TextList => FieldValue::TextList(&[]),
        T::Uint | T::Count | T::Micros | T::Nanos => FieldValue::Uint(0),
        T::Int => FieldValue::Int(0),
        T::OptInt => FieldValue::OptInt(None),
        T::Nesting => FieldValue::Nesting(0),
        T::Code => FieldValue::Code(0),
        T::Flag => FieldValue::Flag(false),
    }
}

// ---------------------------------------------------------------------------------------
// Parsing: one pass of serde_json over the line, keeping each value's JSON text.

/// A string that borrows from the line when it has no escapes.
struct LineStr<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for LineStr<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StrVisitor;
        impl<'de> Visitor<'de> for StrVisitor {
            type Value = LineStr<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(LineStr(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(LineStr(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(LineStr(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(StrVisitor)
    }
}

/// An array of strings, each borrowed where it can be.
struct LineList<'a>(Vec<Cow<'a, str>>);

impl<'de> Deserialize<'de> for LineList<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ListVisitor;
        impl<'de> Visitor<'de> for ListVisitor {
            type Value = LineList<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of strings")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(4));
                while let Some(LineStr(item)) = seq.next_element()? {
                    items.push(item);
                }
                Ok(LineList(items))
            }
        }
        deserializer.deserialize_seq(ListVisitor)
    }
}

impl<'de> Deserialize<'de> for Entries<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor;
        impl<'de> Visitor<'de> for EntriesVisitor {
            type Value = Entries<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::with_capacity(16);
                while let Some(LineStr(key)) = map.next_key()? {
                    // Which of two values would count is anyone's guess: neither.
                    if entries
                        .iter()
                        .any(|entry: &Entry<'_>| same_key(&entry.key, &key))
                    {
                        return Err(de::Error::custom(format_args!("duplicate key `{key}`")));
                    }
                    let raw: &'de RawValue = map.next_value()?;
                    let raw = raw.get();
                    let value = match raw.as_bytes().first() {
                        Some(b'"') => Value::Text(string_of(raw).map_err(de::Error::custom)?),
                        Some(b'[') => match serde_json::from_str::<LineList<'de>>(raw) {
                            Ok(LineList(items)) => Value::List(items),
                            Err(_) => Value::Other,
                        },
                        _ => Value::Other,
                    };
                    entries.push(Entry { key, raw, value });
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(EntriesVisitor)
    }
}

/// Whether two keys are the same. Keys are a few bytes long and mostly differ in their
/// length or first byte: compared inline rather than through `memcmp`, which the key
/// lookups of every line would otherwise call dozens of times.
#[inline]
fn same_key(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).all(|(x, y)| x == y)
}

/// The text of a JSON string, borrowed when it has no escapes.
fn string_of(raw: &str) -> Result<Cow<'_, str>, serde_json::Error> {
    let inner = &raw[1..raw.len() - 1];
    if !inner.as_bytes().contains(&b'\\') {
        // serde_json checked the string: no escapes means its text is the value.
        return Ok(Cow::Borrowed(inner));
    }
    serde_json::from_str::<String>(raw).map(Cow::Owned)
}

/// Whole microseconds of a seconds value: exact for the six decimals the formatter
/// writes (`12.345678`, no float on the way); other decimal forms (`0.5`,
/// `0.0000005`, `1e-3`) are rounded to the nearest microsecond. Negative values are
/// refused.
fn micros(text: &str) -> Option<u64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) || text.ends_with('.') {
        return float_micros(text);
    }
    let whole: u64 = whole.parse().unwrap_or(u64::MAX);
    let fraction = fraction.as_bytes();
    let mut us = (0..6).fold(0u64, |acc, i| {
        acc * 10 + fraction.get(i).map_or(0, |c| u64::from(c - b'0'))
    });
    if fraction.get(6).is_some_and(|&c| c >= b'5') {
        us += 1;
    }
    Some(whole.saturating_mul(1_000_000).saturating_add(us))
}

/// [`micros`] of a number in a form other than plain decimals.
fn float_micros(text: &str) -> Option<u64> {
    let seconds: f64 = text.parse().ok()?;
    // NaN and negative values are refused.
    if seconds.is_nan() || seconds < 0.0 {
        return None;
    }
    let us = (seconds * 1e6).round();
    // `as` saturates at u64::MAX.
    Some(us as u64)
}

/// Nanoseconds that the formatter writes as `text` (seconds through a float, six
/// decimals): the whole microseconds the text shows, or a neighbour where the float's
/// rounding of a large value moved the last digit.
fn nanos(text: &str) -> Option<u64> {
    let ns = micros(text)?.saturating_mul(1000);
    let mut out = Vec::new();
    [0i64, -1000, 1000, -2000, 2000, -500, 500]
        .into_iter()
        .filter_map(|delta| ns.checked_add_signed(delta))
        .find(|&candidate| {
            out.clear();
            push_timer_seconds(&mut out, candidate);
            out == text.as_bytes()
        })
        .or(Some(ns))
}

/// Microseconds since the epoch of a `YYYY-MM-DDTHH:MM:SS.ffffffZ` time. Git writes
/// six fractional digits; fewer, more (dropped past the sixth) or none are accepted.
fn wall_us(time: &str) -> Option<i64> {
    let b = time.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = &b[range];
        part.iter().try_fold(0i64, |acc, &c| {
            c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
        })
    };
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let (fraction, zone) = match &b[19..] {
        [b'.', after @ ..] => {
            let len = after.iter().take_while(|c| c.is_ascii_digit()).count();
            if len == 0 {
                return None;
            }
            after.split_at(len)
        }
        rest => (&rest[..0], rest),
    };
    if zone != b"Z" {
        return None;
    }
    let fraction = (0..6).fold(0i64, |acc, i| {
        acc * 10 + fraction.get(i).map_or(0, |c| i64::from(c - b'0'))
    });
    // Days from 1970-01-01 of a proleptic Gregorian date (March-based year).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second;
    Some(secs * 1_000_000 + fraction)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_seconds_read_exactly() {
        assert_eq!(wall_us("1970-01-01T00:00:00.000001Z"), Some(1));
        assert_eq!(
            wall_us("2026-11-21T23:21:37.817135Z"),
            Some(1_795_303_297_817_135)
        );
        assert_eq!(wall_us("2026-13-21T23:21:37.817135Z"), None);
        assert_eq!(wall_us("2026-11-21 23:21:37.817135Z"), None);
        assert_eq!(micros("0.000563"), Some(563));
        assert_eq!(micros("18446744073709.551615"), Some(u64::MAX));
        assert_eq!(micros("-1.000000"), None);
    }

    #[test]
    fn an_unknown_kind_is_an_error_not_a_skip() {
        let line = r#"{"event":"future","sid":"s","thread":"main","title":"t","count":3}"#;
        assert_eq!(
            read_line(line).unwrap_err(),
            ReadError::UnknownKind("future".into())
        );
        assert_eq!(read_line(r#"{"sid":"s"}"#).unwrap_err(), ReadError::NoEvent);
        assert_eq!(read_line("{").unwrap_err(), ReadError::CutShort);
        assert!(matches!(read_line("{]").unwrap_err(), ReadError::Json(_)));
        assert!(matches!(
            read_line("[1]").unwrap_err(),
            ReadError::BadObject(_)
        ));
    }

    #[test]
    fn missing_and_bad_values_name_their_key() {
        let line = r#"{"event":"exit","sid":"s","thread":"main","t_abs":"x","code":0}"#;
        let mut list = Vec::new();
        assert_eq!(
            read_line(line).unwrap().record(&mut list).unwrap_err(),
            ReadError::BadValue {
                kind: Some(Kind::Exit),
                key: "t_abs"
            }
        );
        let line = r#"{"event":"cmd_path","sid":"s","thread":"main"}"#;
        let mut list = Vec::new();
        let err = read_line(line).unwrap().record(&mut list).unwrap_err();
        assert_eq!(
            err,
            ReadError::Missing {
                kind: Kind::CmdPath,
                key: "path"
            }
        );
        assert_eq!(err.to_string(), "cmd_path: no \"path\"");
    }

    #[test]
    fn seconds_and_times_of_other_writers_are_read() {
        assert_eq!(micros("1.5"), Some(1_500_000));
        assert_eq!(micros("2"), Some(2_000_000));
        assert_eq!(micros("0.0000005"), Some(1));
        assert_eq!(micros("0.0000004"), Some(0));
        assert_eq!(micros("1e-3"), Some(1000));
        assert_eq!(micros("-0.5"), None);
        assert_eq!(micros("\"1\""), None);
        assert_eq!(wall_us("2026-11-21T23:21:37Z"), Some(1_795_303_297_000_000));
        assert_eq!(
            wall_us("2026-11-21T23:21:37.8171359Z"),
            Some(1_795_303_297_817_135)
        );
        assert_eq!(
            wall_us("2026-11-21T23:21:37.8Z"),
            Some(1_795_303_297_800_000)
        );
        assert_eq!(wall_us("2026-02-30T00:00:00.000000Z"), None);
        assert_eq!(
            wall_us("2024-02-29T00:00:00.000000Z"),
            Some(1_709_164_800_000_000)
        );
        assert_eq!(wall_us("2026-11-21T24:00:00.000000Z"), None);
        assert_eq!(wall_us("2026-11-21T23:21:37.Z"), None);
        for bad in [
            "",
            "2026-11-21 23:22:00.038534Z",
            "2026-11-21T23:22:00.038534",
            "2026-11-21T23:22:00.038534+01:00",
            "2026-13-21T23:22:00.038534Z",
            "2026-11-21T23:60:00.038534Z",
            "2026-11-21T23:22:00.03x534Z",
            "yyyy-11-21T23:22:00.038534Z",
            "2026-11-21T23:22:00.0385340000000000000000000000Zx",
        ] {
            assert_eq!(wall_us(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_header_says_what_the_line_had() {
        let line = read_line(r#"{"event":"thread_start","sid":"s","thread":"th01:x"}"#).unwrap();
        assert_eq!(
            line.header().unwrap(),
            LineHeader {
                sid: "s",
                thread: "th01:x",
                wall_us: None,
                t_abs_us: None,
                file: None,
                line: None,
            }
        );
        let line = read_line(
            r#"{"event":"exit","sid":"s","thread":"main","time":"1970-01-01T00:00:00.000001Z","file":"a.c","line":7,"t_abs":0.000002,"code":0}"#,
        )
        .unwrap();
        let header = line.header().unwrap();
        assert_eq!(
            (header.wall_us, header.t_abs_us, header.file, header.line),
            (Some(1), Some(2), Some("a.c"), Some(7))
        );
        assert!(line.has_key("code") && !line.has_key("signo"));
    }

    #[test]
    fn strings_borrow_from_the_line_unless_escaped() {
        let text = r#"{"event":"start","sid":"s","thread":"main","argv":["git","a\"b"]}"#;
        let line = read_line(text).unwrap();
        let mut list = Vec::new();
        let record = line.record(&mut list).unwrap();
        let within = |s: &str| text.as_bytes().as_ptr_range().contains(&s.as_ptr());
        assert!(within(record.sid));
        match record.event {
            Trace2Event::Start { argv } => {
                assert_eq!(argv, ["git", "a\"b"]);
                assert!(within(argv[0]) && !within(argv[1]));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unknown_keys_are_listed_not_lost() {
        let line = read_line(
            r#"{"event":"version","sid":"s","thread":"main","evt":"4","exe":"2.55.0","build":"x"}"#,
        )
        .unwrap();
        assert_eq!(line.unknown_keys().collect::<Vec<_>>(), ["build"]);
        let line = read_line(
            r#"{"event":"region_enter","sid":"s","thread":"main","nesting":1,"repo":1,"label":"l","evt":"4"}"#,
        )
        .unwrap();
        assert_eq!(line.unknown_keys().collect::<Vec<_>>(), ["evt"]);
    }

    #[test]
    fn a_line_of_an_unknown_kind_keeps_its_header() {
        let text = r#"{"event":"progress","sid":"s","thread":"main","time":"1970-01-01T00:00:00.000003Z","title":"t","count":3}"#;
        let AnyLine::Unknown(line) = read_any_line(text).unwrap() else {
            panic!("progress is not in the catalogue");
        };
        assert_eq!(line.name(), "progress");
        assert_eq!(line.header().unwrap().wall_us, Some(3));
        assert_eq!(
            line.keys().collect::<Vec<_>>(),
            ["event", "sid", "thread", "time", "title", "count"]
        );
        assert!(matches!(
            read_any_line(r#"{"event":"exit","sid":"s","thread":"main","code":0}"#),
            Ok(AnyLine::Known(line)) if line.kind() == Kind::Exit
        ));
        let AnyLine::Unknown(line) = read_any_line(r#"{"event":"x","thread":"main"}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(
            line.header().unwrap_err(),
            ReadError::BadValue {
                kind: None,
                key: "sid"
            }
        );
    }

    #[test]
    fn missing_fields_can_be_filled_with_defaults() {
        let text = r#"{"event":"data_json","sid":"s","thread":"main","nesting":2,"category":"c","key":"k","value":[1]}"#;
        let line = read_line(text).unwrap();
        let mut list = Vec::new();
        assert_eq!(
            line.record(&mut list).unwrap_err(),
            ReadError::Missing {
                kind: Kind::DataJson,
                key: "t_rel"
            }
        );
        let mut list = Vec::new();
        let record = line.record_filling_missing(&mut list).unwrap();
        assert!(matches!(
            record.event,
            Trace2Event::DataJson {
                json: "[1]",
                t_rel_us: 0,
                nesting: 2,
                ..
            }
        ));
        assert!(!line.has_key("t_rel"));
        let line = read_line(r#"{"event":"exit","sid":"s","thread":"main","time":null,"code":0}"#)
            .unwrap();
        assert!(line.has_key("time") && !line.has_value("time") && line.has_value("code"));
        // A bad value is not a missing one.
        let text = r#"{"event":"exit","sid":"s","thread":"main","code":"0"}"#;
        let line = read_line(text).unwrap();
        let mut list = Vec::new();
        assert!(matches!(
            line.record_filling_missing(&mut list),
            Err(ReadError::BadValue { .. })
        ));
        let line = read_line(r#"{"event":"exit","thread":"main","code":0}"#).unwrap();
        let mut list = Vec::new();
        assert_eq!(
            line.record_filling_missing(&mut list).unwrap_err(),
            ReadError::Missing {
                kind: Kind::Exit,
                key: "sid"
            }
        );
    }

    #[test]
    fn null_is_absent_and_a_repeated_key_fails_the_line() {
        let text = r#"{"event":"region_leave","sid":"s","thread":"main","nesting":1,"t_rel":0.5,"category":null,"label":null,"repo":null}"#;
        let line = read_line(text).unwrap();
        let mut list = Vec::new();
        match line.record(&mut list).unwrap().event {
            Trace2Event::RegionLeave { region, .. } => {
                assert_eq!(
                    (region.category, region.label, region.repo),
                    (None, None, None)
                )
            }
            other => panic!("{other:?}"),
        }
        let text = r#"{"event":"start","sid":"s","thread":"main","argv":["git"],"argv":["x"]}"#;
        assert!(matches!(
            read_line(text).unwrap_err(),
            ReadError::BadObject(e) if e.contains("duplicate key `argv`")
        ));
    }
}
