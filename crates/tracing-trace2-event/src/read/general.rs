//! The general path of the reader: serde_json parses the line into its keys, each with
//! its JSON text (kept as a [`RawValue`]) and, for strings and arrays of strings, its
//! value; the keys then go to their [`Slots`].
//!
//! It reads every line the [fast path](super::scan) leaves to it: lines that are not
//! JSON objects (its errors are serde_json's own), a key given twice, keys with escapes,
//! `event` not first, kinds the catalogue does not have, and the rarer forms of JSON. A
//! line it reads gives what the fast path gives for it, where that one reads it too.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use tracing_trace2_record::catalogue::Kind;

use super::slots::{LineValue, Slots, same_key};
use super::{AnyLine, EventLine, ReadError, UnknownLine};

/// Parses one line (without its LF) with serde_json.
pub(super) fn read(line: &str) -> Result<AnyLine<'_>, ReadError> {
    let Entries(entries) = serde_json::from_str(line)?;
    let name = match entries.iter().find(|entry| entry.key == "event") {
        Some(Entry {
            parsed: LineValue::Text(name),
            ..
        }) => name.clone(),
        _ => return Err(ReadError::NoEvent),
    };
    let kind = Kind::from_name(&name);
    let mut slots = Slots::new();
    let mut keys = Vec::new();
    for Entry { key, raw, parsed } in entries {
        if kind.is_none() {
            keys.push(key.clone());
        }
        // The keys are unique (the parser refused a line with a key given twice).
        let _ = slots.put(kind, key, raw, parsed);
    }
    Ok(match kind {
        Some(kind) => AnyLine::Known(EventLine { kind, slots }),
        None => AnyLine::Unknown(UnknownLine { name, slots, keys }),
    })
}

/// One key of a line with its value, as written and as read.
struct Entry<'a> {
    key: Cow<'a, str>,
    raw: &'a str,
    parsed: LineValue<'a>,
}

/// The keys of a line, in line order, each given once.
struct Entries<'a>(Vec<Entry<'a>>);

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
                    let parsed = match raw.as_bytes().first() {
                        Some(b'"') => LineValue::Text(string_of(raw).map_err(de::Error::custom)?),
                        Some(b'[') => match serde_json::from_str::<LineList<'de>>(raw) {
                            Ok(LineList(items)) => LineValue::List(items),
                            Err(_) => LineValue::Other,
                        },
                        _ => LineValue::Other,
                    };
                    entries.push(Entry { key, raw, parsed });
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(EntriesVisitor)
    }
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
