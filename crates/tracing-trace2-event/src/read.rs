//! The Event reader: one Event (JSON) line back into the [`Record`] that the Event
//! formatter would write it from, driven by the record crate's catalogue.
//!
//! [`read_line`] parses a line into an [`EventLine`] that borrows from it (strings that
//! need unescaping are copied); [`EventLine::record`] lends its values out as a
//! [`Record`]. As the line is parsed, each value goes to its place: one per key every
//! line may have and one per field of the kind's [catalogue](tracing_trace2_record::catalogue)
//! row, found by the Event JSON key the row gives the field; the record then reads each
//! field from its place as its [`FieldType`] says, so a new kind needs no code here.
//!
//! Two parsers fill those places: a [fast one](scan) for lines in the form git writes
//! them (one pass, `event` first), and a [general one](general) built on serde_json for
//! every other line, whose errors are serde_json's. They agree on every line the fast
//! one takes.
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

use tracing_trace2_record::catalogue::{Field, FieldError, FieldType, FieldValue, Kind};
use tracing_trace2_record::{Callsite, Record, Timestamp, Trace2Event};

use numbers::{micros, nanos};
use slots::{Slot, Slots, Value};

mod general;
mod numbers;
mod scan;
mod slots;

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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventLine<'a> {
    kind: Kind,
    slots: Slots<'a>,
}

/// A line whose `event` the catalogue does not know, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownLine<'a> {
    name: Cow<'a, str>,
    /// The keys every line has in their places, the others among `others`.
    slots: Slots<'a>,
    /// Every key, in line order.
    keys: Vec<Cow<'a, str>>,
}

/// A line of a known kind or not ([`read_any_line`]).
#[derive(Clone, Debug, PartialEq, Eq)]
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
    // The fast path fills the line where it is returned from (it is a few hundred bytes
    // to move) and sets its kind; `Version` only holds the place.
    let mut read = Ok(AnyLine::Known(EventLine {
        kind: Kind::Version,
        slots: Slots::new(),
    }));
    if let Ok(AnyLine::Known(known)) = &mut read
        && scan::scan(line, known).is_some()
    {
        return read;
    }
    general::read(line)
}

impl UnknownLine<'_> {
    /// The line's `event`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The keys every line has.
    pub fn header(&self) -> Result<LineHeader<'_>, ReadError> {
        self.slots.header(None)
    }

    /// Every key of the line, in line order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|key| key.as_ref())
    }
}

impl<'l> EventLine<'l> {
    /// The line's kind.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The keys every line has, and which of them this one had (see [`LineHeader`]).
    pub fn header(&self) -> Result<LineHeader<'_>, ReadError> {
        self.slots.header(Some(self.kind))
    }

    /// Whether the line has `key` (its value may be `null`).
    #[inline]
    pub fn has_key(&self, key: &str) -> bool {
        self.slots.raw(self.kind, key).is_some()
    }

    /// Whether the line has `key` with a value other than `null` (which the reader takes
    /// for an absent key, except as the JSON of a `data_json` value).
    #[inline]
    pub fn has_value(&self, key: &str) -> bool {
        self.slots
            .raw(self.kind, key)
            .is_some_and(|raw| raw != "null")
    }

    /// The keys of the line that neither every line nor its kind's catalogue row has
    /// (a newer git's additions, another program's), in line order.
    pub fn unknown_keys(&self) -> impl Iterator<Item = &str> {
        // The format version, constant, that `version` lines carry.
        let version = self.kind == Kind::Version;
        self.slots
            .others
            .iter()
            .map(|(key, _)| key.as_ref())
            .filter(move |key| !(version && *key == "evt"))
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
        let fields = kind.spec().fields;

        // `child_start` shows a git child as a "git" before its arguments.
        let items: &[Cow<'a, str>] = match fields.iter().position(|f| f.ty == FieldType::TextList) {
            Some(at) => match &self.slots.fields[at] {
                Some(Slot {
                    value: Value::List, ..
                }) => self.slots.list.as_slice(),
                None => &[],
                Some(_) => {
                    return Err(ReadError::BadValue {
                        kind: Some(kind),
                        key: fields[at].key.unwrap_or_default(),
                    });
                }
            },
            None => &[],
        };
        let is_git = kind == Kind::ChildStart && items.first().is_some_and(|a| a == "git");
        let items = if is_git { &items[1..] } else { items };
        list.clear();
        list.extend(items.iter().map(|item| item.as_ref()));
        let list: &'a [&'a str] = list;

        // `from_fields` asks for the row's fields in order: the n-th call is field n.
        let mut at = 0;
        let event = Trace2Event::from_fields(kind, |field| {
            let slot = self.slots.fields.get(at).and_then(Option::as_ref);
            at += 1;
            match (self.field(kind, field, slot, list, is_git), missing) {
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
            depth: sid.bytes().map(|b| u32::from(b == b'/')).sum(),
            thread: header.thread,
            callsite: Callsite {
                file: header.file,
                line: header.file.and(header.line).unwrap_or(0),
            },
            open_regions,
        })
    }

    /// The value of one field, read by its catalogue entry from its slot.
    fn field<'a>(
        &'a self,
        kind: Kind,
        field: &'static Field,
        slot: Option<&'a Slot<'l>>,
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
        let text = || self.slots.text(slot, key, Some(kind));
        let number = |parse: fn(&str) -> Option<FieldValue<'a>>| {
            slots::number(slot, key, Some(kind), parse)?.ok_or_else(missing)
        };
        Ok(match field.ty {
            T::Text => FieldValue::Text(text()?.ok_or_else(missing)?),
            T::TextOmittedWhenEmpty => FieldValue::Text(text()?.unwrap_or("")),
            T::OptText => FieldValue::OptText(text()?),
            T::TextList => FieldValue::TextList(list),
            // Kept as written; the formatter writes an empty JSON text as `null`.
            T::Json => match slot {
                Some(slot) if slot.is_null() => FieldValue::Text(""),
                Some(slot) => FieldValue::Text(slot.raw),
                None => return Err(missing()),
            },
            T::Uint => number(|t| t.parse().ok().map(FieldValue::Uint))?,
            T::Count => number(|t| t.parse::<i64>().ok().map(|v| FieldValue::Uint(v as u64)))?,
            T::Int => number(|t| t.parse().ok().map(FieldValue::Int))?,
            T::OptInt => FieldValue::OptInt(slots::number(slot, key, Some(kind), |t| {
                t.parse::<i64>().ok()
            })?),
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

#[cfg(test)]
mod tests {
    use super::*;

    use tracing_trace2_test_support::random::{KINDS, Owned, Rng};

    /// Lines as git and the formatter write them: every git sample of the crate and
    /// random records of every kind, in full and brief form.
    fn written_lines() -> Vec<String> {
        let mut lines = Vec::new();
        let testdata = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
        for entry in std::fs::read_dir(testdata).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "event") {
                let bytes = std::fs::read(&path).unwrap();
                let text = String::from_utf8_lossy(&bytes);
                lines.extend(text.lines().map(str::to_owned));
            }
        }
        let mut rng = Rng(0x5CA7_7E2E_AD0F);
        let full = crate::EventFormat::new().with_max_nesting(100);
        let brief = crate::EventFormat::new()
            .with_max_nesting(100)
            .with_brief(true);
        for _ in 0..20 {
            for kind in 0..KINDS {
                let mut owned = Owned::new(&mut rng, kind);
                owned.s[2] = serde_json::to_string(&owned.s[2..4]).unwrap();
                let list = owned.list_refs();
                let record = owned.record(&list);
                for format in [&full, &brief] {
                    let mut line = Vec::new();
                    tracing_trace2_record::Format::format(format, &record, &mut line);
                    lines.push(String::from_utf8(line).unwrap().trim_end().to_owned());
                }
            }
        }
        lines
    }

    /// Damaged, reordered and unusual forms of `line`: cut short, a byte replaced by
    /// one that means something to JSON, whitespace between tokens, escapes, a key
    /// given twice, `event` not first, nested values.
    fn variants(line: &str, rng: &mut Rng) -> Vec<String> {
        const BYTES: &[&str] = &[
            "\"",
            "\\",
            "{",
            "}",
            "[",
            "]",
            ",",
            ":",
            "0",
            "-",
            "e",
            ".",
            " ",
            "n",
            "\u{1}",
            "\\u00e9",
            "\\ud83e\\udd80",
            "\\ud800",
            "\\udc00x",
            "\\/",
            "\\x",
            "1e999",
            "é",
        ];
        let mut out = Vec::new();
        let boundaries: Vec<usize> = (0..=line.len())
            .filter(|&at| line.is_char_boundary(at))
            .collect();
        for _ in 0..6 {
            let at = rng.pick(&boundaries);
            out.push(line[..at].to_owned());
            let mut changed = line.to_owned();
            changed.insert_str(at, rng.pick(BYTES));
            out.push(changed);
            let end = boundaries
                .iter()
                .copied()
                .find(|&end| end > at)
                .unwrap_or(at);
            let mut replaced = line.to_owned();
            replaced.replace_range(at..end, rng.pick(BYTES));
            out.push(replaced);
        }
        out.push(line.replace(',', " ,\t").replace(':', "\r\n: "));
        // Numbers and literals JSON has and has not.
        for (from, to) in [
            (":0", ":00"),
            (":1", ":01"),
            (":0", ":-0"),
            (":0", ":-"),
            (":0.", ":0.e"),
            (":0.", ":0"),
            (":1", ":1E+"),
            (":1", ":1e-2"),
            (":1", ":.1"),
            (":1", ":+1"),
            ("true", "tru"),
            ("false", "falsey"),
            (
                ",\"sid\"",
                ",\"n\":null,\"t\":true,\"f\":false,\"x\":nul,\"sid\"",
            ),
        ] {
            out.push(line.replacen(from, to, 1));
        }
        out.push(format!(" \n{line} \r"));
        out.push(line.replacen("\"sid\"", "\"s\\u0069d\"", 1));
        out.push(line.replacen(",\"thread\"", ",\"thread\":\"x\",\"thread\"", 1));
        out.push(line.replacen(",\"sid\"", ",\"newer\":1,\"newer\":2,\"sid\"", 1));
        out.push(line.replacen(",\"sid\"", ",\"event\":\"exit\",\"sid\"", 1));
        out.push(line.replacen(
            ",\"sid\"",
            ",\"newer\":{\"a\":[1,{\"b\":null},\"\\ud800\"],\"c\":-0.5e+3},\"sid\"",
            1,
        ));
        out.push(line.replacen(",\"sid\"", ",\"newer\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],\"sid\"", 1));
        if let Some(rest) = line.strip_prefix('{')
            && let Some((event, rest)) = rest.split_once(',')
        {
            out.push(format!("{{{rest}"));
            out.push(format!("{{{},{event}}}", rest.trim_end_matches('}')));
        }
        out
    }

    /// The line as the fast path reads it, if it does.
    fn fast_read(line: &str) -> Option<EventLine<'_>> {
        let mut read = EventLine {
            kind: Kind::Version,
            slots: Slots::new(),
        };
        scan::scan(line, &mut read).map(|()| read)
    }

    /// Where the fast path reads a line it reads what the general path does, and it
    /// reads every line as git and the formatter write them.
    #[test]
    fn the_fast_path_reads_what_the_general_path_reads() {
        let mut rng = Rng(0xFA57_0A7E);
        let mut taken = 0;
        let mut left = 0;
        for line in written_lines() {
            let fast = fast_read(&line);
            let Some(fast) = fast else {
                panic!("left to the general path: {line}");
            };
            assert_eq!(general::read(&line), Ok(AnyLine::Known(fast)), "{line}");
            for variant in variants(&line, &mut rng) {
                match fast_read(&variant) {
                    Some(fast) => {
                        taken += 1;
                        assert_eq!(
                            general::read(&variant),
                            Ok(AnyLine::Known(fast)),
                            "{variant}"
                        );
                    }
                    None => left += 1,
                }
            }
        }
        // Both kinds of variants were tried.
        assert!(taken > 1000 && left > 1000, "{taken} {left}");
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
        // A `data_json` value of `null` is the empty JSON text the formatter writes so.
        let text = r#"{"event":"data_json","sid":"s","thread":"main","t_abs":0.5,"t_rel":0.5,"nesting":1,"category":"c","key":"k","value":null}"#;
        let line = read_line(text).unwrap();
        let mut list = Vec::new();
        match line.record(&mut list).unwrap().event {
            Trace2Event::DataJson { json, .. } => assert_eq!(json, ""),
            other => panic!("{other:?}"),
        }
        let text = r#"{"event":"start","sid":"s","thread":"main","argv":["git"],"argv":["x"]}"#;
        assert!(matches!(
            read_line(text).unwrap_err(),
            ReadError::BadObject(e) if e.contains("duplicate key `argv`")
        ));
    }
}
