//! The Event reader: one Event (JSON) line back into the [`Record`] that the Event
//! formatter would write it from, driven by the record crate's catalogue.
//!
//! [`read_line`] parses a line and keeps its values, owned, in an [`EventLine`];
//! [`EventLine::record`] lends them out as a [`Record`]. Each field is looked up by the
//! Event JSON key the [catalogue](tracing_trace2_record::catalogue) gives it and read
//! as its [`FieldType`] says, so a new kind needs no code here.
//!
//! A line carries less than a record, and the reader fills the rest the way the
//! formatter would not notice: it writes the same line again from the record it reads
//! (a test checks this for random records). In detail:
//! - `depth` is the number of `/` in the sid, as the layer counts it;
//! - `open_regions` is `nesting - 1` for regions and data (as the layer writes them),
//!   else 0, which Event lines do not show;
//! - `time.wall_us` is 0 when the line has no `time` (brief mode), `time.t_abs_us` is 0
//!   for kinds without a `t_abs`; the callsite is absent without `file`;
//! - fields the catalogue gives no key (`exec_result`'s `err`) take their default, and
//!   `child_start`'s `is_git` is read from the `"git"` its `argv` then starts with;
//! - nanosecond timer totals come back as a value that Event JSON writes the same
//!   (it shows microseconds), and an empty `data_json` value (written `null`) comes back empty.
//!
//! A line of a kind the catalogue does not have is an error
//! ([`ReadError::UnknownKind`]), never skipped.

use std::collections::HashMap;
use std::fmt;

use serde_json::value::RawValue;
use tracing_trace2_record::catalogue::{Field, FieldError, FieldType, FieldValue, Kind};
use tracing_trace2_record::text::push_timer_seconds;
use tracing_trace2_record::{Callsite, Event, Record, Timestamp};

/// Why a line could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadError {
    /// The line is not a JSON object.
    Json(String),
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
        /// The event.
        kind: Option<Kind>,
        /// The key.
        key: &'static str,
    },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Json(e) => write!(f, "not a JSON object: {e}"),
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

/// One value of a line, owned.
#[derive(Clone, Debug)]
enum Value {
    /// A JSON string, unescaped.
    Text(String),
    /// An array of strings.
    List(Vec<String>),
    /// Anything else, as its JSON text (numbers, booleans, objects, `null`).
    Raw(String),
}

/// One Event line, parsed: its kind and its values, owned.
#[derive(Clone, Debug)]
pub struct EventLine {
    kind: Kind,
    values: HashMap<String, Value>,
    /// The JSON text of `value`, as written (a `data_json` value is kept verbatim).
    raw_value: Option<String>,
}

/// Parses one Event line (with or without its LF).
pub fn read_line(line: &str) -> Result<EventLine, ReadError> {
    let raw: HashMap<String, Box<RawValue>> = serde_json::from_str(line.trim_end_matches('\n'))
        .map_err(|e| ReadError::Json(e.to_string()))?;
    let mut values = HashMap::with_capacity(raw.len());
    let mut raw_value = None;
    for (key, value) in raw {
        let text = value.get();
        if key == "value" {
            raw_value = Some(text.to_owned());
        }
        let value = match text.as_bytes().first() {
            Some(b'"') => {
                Value::Text(serde_json::from_str(text).map_err(|e| ReadError::Json(e.to_string()))?)
            }
            Some(b'[') => match serde_json::from_str::<Vec<String>>(text) {
                Ok(items) => Value::List(items),
                Err(_) => Value::Raw(text.to_owned()),
            },
            _ => Value::Raw(text.to_owned()),
        };
        values.insert(key, value);
    }
    let Some(Value::Text(name)) = values.get("event") else {
        return Err(ReadError::NoEvent);
    };
    let kind = Kind::from_name(name).ok_or_else(|| ReadError::UnknownKind(name.clone()))?;
    Ok(EventLine {
        kind,
        values,
        raw_value,
    })
}

impl EventLine {
    /// The line's kind.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The record the line was written from (see the module docs for what a line does
    /// not carry). Its argument list, if the kind has one, is put in `list`.
    pub fn record<'a>(&'a self, list: &'a mut Vec<&'a str>) -> Result<Record<'a>, ReadError> {
        let kind = self.kind;
        let text = |key: &'static str| match self.values.get(key) {
            Some(Value::Text(s)) => Ok(Some(s.as_str())),
            None => Ok(None),
            Some(_) => Err(ReadError::BadValue {
                kind: Some(kind),
                key,
            }),
        };
        let required = |key: &'static str| text(key)?.ok_or(ReadError::Missing { kind, key });
        let sid = required("sid")?;
        let thread = required("thread")?;
        let wall_us = text("time")?
            .map(|time| {
                wall_us(time).ok_or(ReadError::BadValue {
                    kind: Some(kind),
                    key: "time",
                })
            })
            .transpose()?
            .unwrap_or(0);
        let t_abs_us = self.number("t_abs", kind, micros)?.unwrap_or(0);
        let file = text("file")?;
        let line = match file {
            Some(_) => self
                .number("line", kind, |t| t.parse::<u32>().ok())?
                .unwrap_or(0),
            None => 0,
        };

        // `child_start` shows a git child as a "git" before its arguments.
        let items = match kind
            .spec()
            .fields
            .iter()
            .find(|f| f.ty == FieldType::TextList)
        {
            Some(field) => match self.values.get(field.key.unwrap_or_default()) {
                Some(Value::List(items)) => items.as_slice(),
                None => &[],
                Some(_) => {
                    return Err(ReadError::BadValue {
                        kind: Some(kind),
                        key: field.key.unwrap_or_default(),
                    });
                }
            },
            None => &[],
        };
        let is_git = kind == Kind::ChildStart && items.first().is_some_and(|a| a == "git");
        let items = if is_git { &items[1..] } else { items };
        list.clear();
        list.extend(items.iter().map(String::as_str));
        let list: &'a [&'a str] = list;

        let event = Event::from_fields(kind, |field| self.field(kind, field, list, is_git))?;
        let open_regions = event.nesting().map_or(0, |n| n.saturating_sub(1));
        Ok(Record {
            event,
            time: Timestamp { wall_us, t_abs_us },
            sid,
            depth: sid.bytes().filter(|&b| b == b'/').count() as u32,
            thread,
            callsite: Callsite { file, line },
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
        let bad = || ReadError::BadValue {
            kind: Some(kind),
            key,
        };
        let missing = || ReadError::Missing { kind, key };
        let value = self.values.get(key);
        let text = || match value {
            Some(Value::Text(s)) => Ok(Some(s.as_str())),
            None => Ok(None),
            Some(_) => Err(bad()),
        };
        let number = |parse: fn(&str) -> Option<FieldValue<'a>>| {
            self.number(key, kind, parse)?.ok_or_else(missing)
        };
        Ok(match field.ty {
            T::Text => FieldValue::Text(text()?.ok_or_else(missing)?),
            T::TextOmittedWhenEmpty => FieldValue::Text(text()?.unwrap_or("")),
            T::OptText => FieldValue::OptText(text()?),
            T::TextList => FieldValue::TextList(list),
            // The formatter writes an empty JSON text as `null`.
            T::Json => match self.raw_value.as_deref() {
                Some("null") => FieldValue::Text(""),
                Some(raw) => FieldValue::Text(raw),
                None => return Err(missing()),
            },
            T::Uint => number(|t| t.parse().ok().map(FieldValue::Uint))?,
            T::Count => number(|t| t.parse::<i64>().ok().map(|v| FieldValue::Uint(v as u64)))?,
            T::Int => number(|t| t.parse().ok().map(FieldValue::Int))?,
            T::OptInt => FieldValue::OptInt(self.number(key, kind, |t| t.parse::<i64>().ok())?),
            T::Nesting => number(|t| t.parse().ok().map(FieldValue::Nesting))?,
            T::Code => number(|t| t.parse().ok().map(FieldValue::Code))?,
            T::Flag => number(|t| t.parse().ok().map(FieldValue::Flag))?,
            T::Micros => number(|t| micros(t).map(FieldValue::Uint))?,
            T::Nanos => number(|t| nanos(t).map(FieldValue::Uint))?,
        })
    }

    /// The raw (non-string) value of `key` parsed by `parse`; `None` when absent.
    fn number<T>(
        &self,
        key: &'static str,
        kind: Kind,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<Option<T>, ReadError> {
        match self.values.get(key) {
            None => Ok(None),
            Some(Value::Raw(raw)) => parse(raw).map(Some).ok_or(ReadError::BadValue {
                kind: Some(kind),
                key,
            }),
            Some(_) => Err(ReadError::BadValue {
                kind: Some(kind),
                key,
            }),
        }
    }
}

/// Whole microseconds of a seconds value written with six decimals (`12.345678`),
/// exactly (no float on the way).
fn micros(text: &str) -> Option<u64> {
    let (whole, fraction) = text.split_once('.')?;
    if fraction.len() != 6 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole: u64 = whole.parse().ok()?;
    let fraction: u64 = fraction.parse().ok()?;
    Some(whole.saturating_mul(1_000_000).saturating_add(fraction))
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

/// Microseconds since the epoch of a `YYYY-MM-DDTHH:MM:SS.ffffffZ` time.
fn wall_us(time: &str) -> Option<i64> {
    let b = time.as_bytes();
    if b.len() != 27
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'.'
        || b[26] != b'Z'
    {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = time.get(range)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    // Days from 1970-01-01 of a proleptic Gregorian date (March-based year).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + num(11..13)? * 3600 + num(14..16)? * 60 + num(17..19)?;
    Some(secs * 1_000_000 + num(20..26)?)
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
        assert_eq!(micros("1.5"), None);
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
        assert!(matches!(read_line("{").unwrap_err(), ReadError::Json(_)));
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
}
