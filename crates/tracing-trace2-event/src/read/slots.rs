//! Where the values of a line go: one place per key every line may have and one per
//! field of the kind's catalogue row, filled as the line is parsed, so that reading a
//! field is an index rather than a search by key name.
//!
//! Both parsers (the [fast one](super::scan) and the [general one](super::general)) fill
//! [`Slots`] the same way through [`Slots::put`], which also refuses a key given twice.

use std::borrow::Cow;

use tracing_trace2_record::catalogue::{CATALOGUE, Field, FieldType, KIND_COUNT, Kind, MAX_FIELDS};

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

/// One value of a line as a parser reads it, borrowed from the line where it needs no
/// unescaping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum LineValue<'a> {
    /// A JSON string, unescaped.
    Text(Cow<'a, str>),
    /// An array of strings.
    List(Vec<Cow<'a, str>>),
    /// Anything else (numbers, booleans, objects, `null`, other arrays).
    Other,
}

/// What a [`Slot`]'s value is; what it holds beyond its JSON text is in its [`Slots`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Value {
    /// A JSON string without escapes: its text is the JSON text without the quotes.
    Text,
    /// A JSON string with escapes: its text is [`Slots::texts`]`[i]`.
    Escaped(u8),
    /// An array of strings, for the row's list field: its items are [`Slots::list`].
    List,
    /// Anything else (numbers, booleans, objects, `null`, other arrays, and an array of
    /// strings in another place).
    Other,
}

/// One key's value: its JSON text as written and what it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Slot<'a> {
    /// The value's JSON text (a string with its quotes).
    pub raw: &'a str,
    /// The value.
    pub value: Value,
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
    /// The strings with escapes, unescaped, of the header keys and fields.
    pub texts: Vec<String>,
    /// The items of the row's list field.
    pub list: Vec<Cow<'a, str>>,
}

/// Where a key of a line goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum KeyPlace {
    /// A key every line may have: its place in [`HEADER_KEYS`].
    Header(usize),
    /// A field of the kind's row: its index in the row.
    Field(usize),
    /// Neither.
    Other,
}

/// The place of a key among the keys every line may have. Matched on the bytes so that
/// the compiler tests the length first and compares the few bytes inline.
#[inline(always)]
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

/// Where `key` goes in a line of `kind` (`None`: a kind the catalogue does not have).
#[inline(always)]
pub(super) fn place(kind: Option<Kind>, key: &str) -> KeyPlace {
    let Some(kind) = kind else {
        return header_place(key).map_or(KeyPlace::Other, KeyPlace::Header);
    };
    let code = PLACES[usize::from(kind.id() - 1)][bucket(key.as_bytes())];
    let fields = kind.spec().fields;
    let (place, known) = match code {
        NO_PLACE => return KeyPlace::Other,
        at if usize::from(at) < HEADER_KEYS.len() => (
            KeyPlace::Header(usize::from(at)),
            HEADER_KEYS[usize::from(at)],
        ),
        at => {
            let at = usize::from(at) - HEADER_KEYS.len();
            (KeyPlace::Field(at), fields[at].key.unwrap_or_default())
        }
    };
    if same_key(known, key) {
        place
    } else {
        // Another key in the bucket: an unknown key, or a key whose bucket another of its
        // line's keys took.
        searched_place(fields, key)
    }
}

/// [`place`] by search rather than by bucket.
fn searched_place(fields: &[Field], key: &str) -> KeyPlace {
    if let Some(at) = header_place(key) {
        return KeyPlace::Header(at);
    }
    match fields
        .iter()
        .position(|field| field.key.is_some_and(|known| same_key(known, key)))
    {
        Some(at) => KeyPlace::Field(at),
        None => KeyPlace::Other,
    }
}

/// The hash tables: a key (or kind name) is found by its bucket, then compared with the
/// one key of the table in that bucket. Built at compile time from the catalogue; a
/// test checks that no two keys of a kind (header keys included) and no two kind names
/// share a bucket, and names a multiplier that works if a new row makes two collide
/// (lookups stay right then, only slower: a collision falls back to a search).
const BUCKETS: usize = 128;
const BUCKET_BITS: u32 = BUCKETS.trailing_zeros();
const MULTIPLIER: u32 = 0x95F0_52D7;
/// An empty bucket.
const NO_PLACE: u8 = u8::MAX;

/// The bucket of a key: its length and first, middle and last bytes, mixed by a
/// multiplication.
#[inline(always)]
const fn bucket(key: &[u8]) -> usize {
    bucket_with(key, MULTIPLIER)
}

#[inline(always)]
const fn bucket_with(key: &[u8], multiplier: u32) -> usize {
    let len = key.len();
    if len == 0 {
        return 0;
    }
    let word = (len as u32 & 0xFF)
        | (key[0] as u32) << 8
        | (key[len / 2] as u32) << 16
        | (key[len - 1] as u32) << 24;
    (word.wrapping_mul(multiplier) >> (32 - BUCKET_BITS)) as usize
}

/// Per kind, per bucket: the place of the header key (0..7) or row field (7 + index)
/// whose key falls in that bucket, or [`NO_PLACE`].
static PLACES: [[u8; BUCKETS]; KIND_COUNT] = places_table(MULTIPLIER);

const fn places_table(multiplier: u32) -> [[u8; BUCKETS]; KIND_COUNT] {
    let mut table = [[NO_PLACE; BUCKETS]; KIND_COUNT];
    let mut row = 0;
    while row < KIND_COUNT {
        let mut at = 0;
        while at < HEADER_KEYS.len() {
            let bucket = bucket_with(HEADER_KEYS[at].as_bytes(), multiplier);
            if table[row][bucket] == NO_PLACE {
                table[row][bucket] = at as u8;
            }
            at += 1;
        }
        let fields = CATALOGUE[row].fields;
        let mut at = 0;
        while at < fields.len() {
            if let Some(key) = fields[at].key {
                let bucket = bucket_with(key.as_bytes(), multiplier);
                if table[row][bucket] == NO_PLACE {
                    table[row][bucket] = (HEADER_KEYS.len() + at) as u8;
                }
            }
            at += 1;
        }
        row += 1;
    }
    table
}

/// Per bucket: the row of the kind whose name falls in it, or [`NO_PLACE`].
static KINDS: [u8; BUCKETS] = kinds_table(MULTIPLIER);

const fn kinds_table(multiplier: u32) -> [u8; BUCKETS] {
    let mut table = [NO_PLACE; BUCKETS];
    let mut row = 0;
    while row < KIND_COUNT {
        let bucket = bucket_with(CATALOGUE[row].name.as_bytes(), multiplier);
        if table[bucket] == NO_PLACE {
            table[bucket] = row as u8;
        }
        row += 1;
    }
    table
}

/// The kind named `name`, if the catalogue has one.
#[inline]
pub(super) fn kind_named(name: &str) -> Option<Kind> {
    let found = Kind::from_id(KINDS[bucket(name.as_bytes())].wrapping_add(1));
    match found {
        Some(kind) if same_key(kind.name(), name) => Some(kind),
        _ => Kind::from_name(name),
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
            texts: Vec::new(),
            list: Vec::new(),
        }
    }

    /// Puts the value of `key` (`raw` as written, `parsed` as read) in its place for a
    /// line of `kind`.
    #[inline(always)]
    pub fn put(
        &mut self,
        kind: Option<Kind>,
        key: Cow<'a, str>,
        raw: &'a str,
        parsed: LineValue<'a>,
    ) -> Result<(), Repeated> {
        let place = place(kind, &key);
        let taken = match place {
            KeyPlace::Header(at) => self.header[at].is_some(),
            KeyPlace::Field(at) => self.fields[at].is_some(),
            KeyPlace::Other => {
                if self.others.iter().any(|(other, _)| same_key(other, &key)) {
                    return Err(Repeated);
                }
                self.others.push((key, raw));
                return Ok(());
            }
        };
        if taken {
            return Err(Repeated);
        }
        let value = match parsed {
            LineValue::Text(Cow::Borrowed(_)) => Value::Text,
            LineValue::Text(Cow::Owned(text)) => {
                self.texts.push(text);
                Value::Escaped((self.texts.len() - 1) as u8)
            }
            LineValue::List(items) => match (kind, place) {
                (Some(kind), KeyPlace::Field(at))
                    if kind.spec().fields[at].ty == FieldType::TextList =>
                {
                    self.list = items;
                    Value::List
                }
                _ => Value::Other,
            },
            LineValue::Other => Value::Other,
        };
        let slot = Some(Slot { raw, value });
        match place {
            KeyPlace::Header(at) => self.header[at] = slot,
            KeyPlace::Field(at) => self.fields[at] = slot,
            KeyPlace::Other => {}
        }
        Ok(())
    }

    /// The JSON text of `key`'s value in a line of `kind`, if the line has the key.
    #[inline]
    pub fn raw(&self, kind: Kind, key: &str) -> Option<&'a str> {
        // The keys every line has are asked for most: matched without the table.
        if let Some(at) = header_place(key) {
            return self.header[at].as_ref().map(|slot| slot.raw);
        }
        match place(Some(kind), key) {
            KeyPlace::Header(at) => self.header[at].as_ref().map(|slot| slot.raw),
            KeyPlace::Field(at) => self.fields[at].as_ref().map(|slot| slot.raw),
            KeyPlace::Other => self
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
        let text = |at: usize| self.text(header[at].as_ref(), HEADER_KEYS[at], kind);
        let required = |at: usize| {
            let key = HEADER_KEYS[at];
            text(at)?.ok_or(match kind {
                Some(kind) => ReadError::Missing { kind, key },
                None => ReadError::BadValue { kind, key },
            })
        };
        let wall_us = match text(TIME)? {
            Some(time) => Some(wall_us(time).ok_or(ReadError::BadValue { kind, key: "time" })?),
            None => None,
        };
        Ok(LineHeader {
            sid: required(SID)?,
            thread: required(THREAD)?,
            wall_us,
            t_abs_us: number(header[T_ABS].as_ref(), "t_abs", kind, micros)?,
            file: text(FILE)?,
            line: number(header[LINE].as_ref(), "line", kind, |t| {
                t.parse::<u32>().ok()
            })?,
        })
    }

    /// The string value of a key; `None` when absent or `null`.
    #[inline]
    pub fn text(
        &self,
        slot: Option<&Slot<'a>>,
        key: &'static str,
        kind: Option<Kind>,
    ) -> Result<Option<&str>, ReadError> {
        let bad = ReadError::BadValue { kind, key };
        match slot {
            None => Ok(None),
            Some(Slot {
                raw,
                value: Value::Text,
            }) => raw.get(1..raw.len() - 1).map(Some).ok_or(bad),
            Some(Slot {
                value: Value::Escaped(at),
                ..
            }) => self
                .texts
                .get(usize::from(*at))
                .map(|text| Some(text.as_str()))
                .ok_or(bad),
            Some(slot) if slot.is_null() => Ok(None),
            Some(_) => Err(bad),
        }
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

    /// Whether, with `multiplier`, every kind name and every key of a kind's lines has a
    /// bucket of its own.
    fn no_collisions(multiplier: u32) -> bool {
        let mut names: Vec<usize> = CATALOGUE
            .iter()
            .map(|row| bucket_with(row.name.as_bytes(), multiplier))
            .collect();
        names.sort_unstable();
        names.dedup();
        names.len() == KIND_COUNT
            && CATALOGUE.iter().all(|row| {
                let keys = HEADER_KEYS
                    .iter()
                    .copied()
                    .chain(row.fields.iter().filter_map(|field| field.key));
                let mut buckets: Vec<usize> = keys
                    .map(|key| bucket_with(key.as_bytes(), multiplier))
                    .collect();
                let all = buckets.len();
                buckets.sort_unstable();
                buckets.dedup();
                buckets.len() == all
            })
    }

    /// Lookups are right whatever the buckets, but a collision costs a search: a new row
    /// that makes two keys collide needs another multiplier, which this test names.
    #[test]
    fn every_key_and_kind_name_has_a_bucket_of_its_own() {
        if !no_collisions(MULTIPLIER) {
            let mut candidate = 0x9E37_79B9u32;
            let better = (0..1_000_000).find_map(|_| {
                candidate = candidate
                    .wrapping_mul(0x2C1B_3C6D)
                    .wrapping_add(0x297A_2D39)
                    | 1;
                no_collisions(candidate).then_some(candidate)
            });
            panic!("keys share buckets; MULTIPLIER = {better:#X?} would not");
        }
    }

    /// The tables themselves hold every kind name and key at its bucket: a lookup that
    /// misses the table still finds the right answer by a search, so only the tables
    /// show that the search is not what finds them.
    #[test]
    fn the_tables_hold_every_name_and_key_at_its_bucket() {
        for (row, spec) in CATALOGUE.iter().enumerate() {
            assert_eq!(usize::from(KINDS[bucket(spec.name.as_bytes())]), row);
            let places = &PLACES[row];
            for (at, key) in HEADER_KEYS.iter().enumerate() {
                assert_eq!(usize::from(places[bucket(key.as_bytes())]), at, "{key}");
            }
            for (at, field) in spec.fields.iter().enumerate() {
                if let Some(key) = field.key {
                    let place = usize::from(places[bucket(key.as_bytes())]);
                    assert_eq!(place, HEADER_KEYS.len() + at, "{}: {key}", spec.name);
                }
            }
        }
    }

    #[test]
    fn every_key_and_kind_is_found_where_it_is_and_others_are_not() {
        for row in &CATALOGUE {
            assert_eq!(kind_named(row.name), Some(row.kind));
            for (at, key) in HEADER_KEYS.iter().enumerate() {
                assert_eq!(place(Some(row.kind), key), KeyPlace::Header(at));
                assert_eq!(place(None, key), KeyPlace::Header(at));
            }
            for (at, field) in row.fields.iter().enumerate() {
                if let Some(key) = field.key {
                    assert_eq!(place(Some(row.kind), key), KeyPlace::Field(at), "{key}");
                    assert_eq!(place(None, key), KeyPlace::Other);
                }
            }
            for other in ["", "evt", "x", "sidx", "t_ab", "newer_key"] {
                assert_eq!(place(Some(row.kind), other), KeyPlace::Other);
            }
        }
        assert_eq!(kind_named("future"), None);
        assert_eq!(kind_named(""), None);
        // A collision falls back to a search.
        assert_eq!(
            searched_place(Kind::Exit.spec().fields, "code"),
            KeyPlace::Field(0)
        );
    }

    #[test]
    fn a_key_put_twice_is_refused_wherever_it_goes() {
        let kind = Kind::Exit;
        for key in ["sid", "code", "newer"] {
            let mut slots = Slots::new();
            let put =
                |slots: &mut Slots<'_>, key| slots.put(Some(kind), key, "0", LineValue::Other);
            assert!(put(&mut slots, Cow::Borrowed(key)).is_ok());
            assert!(put(&mut slots, Cow::Owned(key.to_owned())).is_err());
            assert_eq!(slots.raw(kind, key), Some("0"));
        }
    }
}
