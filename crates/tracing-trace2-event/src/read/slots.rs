//! Where the values of a line go: one place per key every line may have and one per
//! field of the kind's catalogue row, filled as the line is parsed, so that reading a
//! field is an index rather than a search by key name.
//!
//! Both parsers (the [fast one](super::scan) and the [general one](super::general)) fill
//! [`Slots`] the same way through [`Slots::put`], which also refuses a key given twice.

use std::borrow::Cow;

use tracing_trace2_record::catalogue::{Field, Kind, MAX_FIELDS};

use super::numbers::{micros, wall_us};
use super::{LineHeader, ReadError};

/// The keys every line may have, whatever its kind, in the order of their places.
const HEADER_KEYS: [&str; 7] = ["event", "sid", "thread", "time", "file", "line", "t_abs"];

/// Place of `event` among the header keys.
pub(super) const EVENT: usize = 0;
const SID: usize = 1;
const THREAD: usize = 2;
const TIME: usize = 3;
const FILE: usize = 4;
const LINE: usize = 5;
const T_ABS: usize = 6;

/// One value of a line, borrowed from it where it needs no unescaping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Value<'a> {
    /// A JSON string, unescaped.
    Text(Cow<'a, str>),
    /// An array of strings.
    List(Vec<Cow<'a, str>>),
    /// Anything else (numbers, booleans, objects, `null`, other arrays).
    Other,
}

/// One key's value: its JSON text as written and what it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Slot<'a> {
    /// The value's JSON text (a string with its quotes).
    pub raw: &'a str,
    /// The value.
    pub value: Value<'a>,
}

impl Slot<'_> {
    /// Whether the value is `null`, which the reader takes for an absent key.
    pub fn is_null(&self) -> bool {
        self.raw == "null"
    }
}

/// The values of one line by place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Slots<'a> {
    /// The keys every line may have, by their place in [`HEADER_KEYS`].
    pub header: [Option<Slot<'a>>; HEADER_KEYS.len()],
    /// The fields of the kind's row, by their index in the row.
    pub fields: [Option<Slot<'a>>; MAX_FIELDS],
    /// The other keys, in line order, with their JSON text.
    pub others: Vec<(Cow<'a, str>, &'a str)>,
}

/// Where a key of a line goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Place {
    /// A key every line may have: its place in [`HEADER_KEYS`].
    Header(usize),
    /// A field of the kind's row: its index in the row.
    Field(usize),
    /// Neither.
    Other,
}

/// The place of a key among the keys every line may have. Matched on the bytes so that
/// the compiler tests the length first and compares the few bytes inline.
#[inline]
fn header_place(key: &str) -> Option<usize> {
    Some(match key.as_bytes() {
        b"event" => EVENT,
        b"sid" => SID,
        b"thread" => THREAD,
        b"time" => TIME,
        b"file" => FILE,
        b"line" => LINE,
        b"t_abs" => T_ABS,
        _ => return None,
    })
}

/// Where `key` goes in a line whose row has `fields`.
#[inline]
pub(super) fn place(fields: &[Field], key: &str) -> Place {
    if let Some(at) = header_place(key) {
        return Place::Header(at);
    }
    match fields
        .iter()
        .position(|field| field.key.is_some_and(|known| same_key(known, key)))
    {
        Some(at) => Place::Field(at),
        None => Place::Other,
    }
}

/// Whether two keys are the same. Keys are a few bytes long and mostly differ in their
/// length or first byte: compared inline rather than through `memcmp`.
#[inline]
pub(super) fn same_key(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).all(|(x, y)| x == y)
}

/// A key given twice: which of its values would count is anyone's guess, so neither does.
#[derive(Debug)]
pub(super) struct Repeated;

impl<'a> Slots<'a> {
    pub fn new() -> Self {
        Slots {
            header: [const { None }; HEADER_KEYS.len()],
            fields: [const { None }; MAX_FIELDS],
            others: Vec::new(),
        }
    }

    /// Puts the value of `key` in its place for a row of `fields`.
    #[inline]
    pub fn put(
        &mut self,
        fields: &[Field],
        key: Cow<'a, str>,
        slot: Slot<'a>,
    ) -> Result<(), Repeated> {
        let place = match place(fields, &key) {
            Place::Header(at) => &mut self.header[at],
            Place::Field(at) => &mut self.fields[at],
            Place::Other => {
                if self.others.iter().any(|(other, _)| same_key(other, &key)) {
                    return Err(Repeated);
                }
                self.others.push((key, slot.raw));
                return Ok(());
            }
        };
        if place.is_some() {
            return Err(Repeated);
        }
        *place = Some(slot);
        Ok(())
    }

    /// The JSON text of `key`'s value in a line whose row has `fields`, if the line has
    /// the key.
    pub fn raw(&self, fields: &[Field], key: &str) -> Option<&'a str> {
        match place(fields, key) {
            Place::Header(at) => self.header[at].as_ref().map(|slot| slot.raw),
            Place::Field(at) => self.fields[at].as_ref().map(|slot| slot.raw),
            Place::Other => self
                .others
                .iter()
                .find(|(other, _)| same_key(other, key))
                .map(|(_, raw)| *raw),
        }
    }

    /// The keys every line has, read for a line of `kind` (`None`: a kind the catalogue
    /// does not have).
    pub fn header(&self, kind: Option<Kind>) -> Result<LineHeader<'_>, ReadError> {
        let header = &self.header;
        let required = |at: usize| {
            let key = HEADER_KEYS[at];
            text(header[at].as_ref(), key, kind)?.ok_or(match kind {
                Some(kind) => ReadError::Missing { kind, key },
                None => ReadError::BadValue { kind, key },
            })
        };
        let wall_us = match text(header[TIME].as_ref(), "time", kind)? {
            Some(time) => Some(wall_us(time).ok_or(ReadError::BadValue { kind, key: "time" })?),
            None => None,
        };
        Ok(LineHeader {
            sid: required(SID)?,
            thread: required(THREAD)?,
            wall_us,
            t_abs_us: number(header[T_ABS].as_ref(), "t_abs", kind, micros)?,
            file: text(header[FILE].as_ref(), "file", kind)?,
            line: number(header[LINE].as_ref(), "line", kind, |t| {
                t.parse::<u32>().ok()
            })?,
        })
    }
}

/// The string value of a key; `None` when absent or `null`.
pub(super) fn text<'s>(
    slot: Option<&'s Slot<'_>>,
    key: &'static str,
    kind: Option<Kind>,
) -> Result<Option<&'s str>, ReadError> {
    match slot {
        Some(Slot {
            value: Value::Text(text),
            ..
        }) => Ok(Some(text)),
        None => Ok(None),
        Some(slot) if slot.is_null() => Ok(None),
        Some(_) => Err(ReadError::BadValue { kind, key }),
    }
}

/// The non-string value of a key parsed by `parse`; `None` when absent or `null`.
pub(super) fn number<T>(
    slot: Option<&Slot<'_>>,
    key: &'static str,
    kind: Option<Kind>,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Option<T>, ReadError> {
    match slot {
        None => Ok(None),
        Some(slot) if slot.is_null() => Ok(None),
        Some(Slot {
            value: Value::Other,
            raw,
        }) => parse(raw)
            .map(Some)
            .ok_or(ReadError::BadValue { kind, key }),
        Some(_) => Err(ReadError::BadValue { kind, key }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_trace2_record::catalogue::CATALOGUE;

    #[test]
    fn header_places_follow_the_header_keys() {
        for (at, key) in HEADER_KEYS.iter().enumerate() {
            assert_eq!(header_place(key), Some(at));
        }
        assert_eq!(header_place("evt"), None);
    }

    /// A field keyed like a header key would never get its value.
    #[test]
    fn no_row_has_a_field_keyed_like_a_header_key_or_two_fields_with_one_key() {
        for row in &CATALOGUE {
            let keys: Vec<&str> = row.fields.iter().filter_map(|field| field.key).collect();
            for (at, key) in keys.iter().enumerate() {
                assert!(!HEADER_KEYS.contains(key), "{}: {key}", row.name);
                assert!(!keys[..at].contains(key), "{}: {key} twice", row.name);
            }
        }
    }

    #[test]
    fn a_key_put_twice_is_refused_wherever_it_goes() {
        let fields = tracing_trace2_record::catalogue::Kind::Exit.spec().fields;
        let slot = || Slot {
            raw: "0",
            value: Value::Other,
        };
        for key in ["sid", "code", "newer"] {
            let mut slots = Slots::new();
            assert!(slots.put(fields, Cow::Borrowed(key), slot()).is_ok());
            assert!(
                slots
                    .put(fields, Cow::Owned(key.to_owned()), slot())
                    .is_err()
            );
            assert_eq!(slots.raw(fields, key), Some("0"));
        }
    }
}
