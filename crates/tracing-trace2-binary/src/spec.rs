//! The kind table shared by the writer and the decoder (format 1.0).
//!
//! Every record in a batch starts with a head byte: bits 0–5 are the kind, bit 6 says a
//! callsite reference follows, bit 7 that a repository id follows. Kinds `0x01`–`0x1E`
//! are the Trace2 events of [`EVENT_KINDS`], each with its argument signature; kinds
//! `0x39`–`0x3F` are the batch's own control records ([`control`]). The decoder parses
//! every event generically from its signature, so a stream that declares a kind this
//! table does not know (a later minor version) can still be read past. Which field of a
//! kind's catalogue row each argument carries is the kind's [`Layout`] ([`LAYOUTS`],
//! worked out from the rows at compile time), by which the writer writes and the
//! decoder rebuilds every kind but regions and data.
//!
//! Argument type codes:
//!
//! | code | wire | meaning |
//! |---|---|---|
//! | `u` | LEB128 varint | unsigned integer |
//! | `i` | zigzag varint | signed integer |
//! | `s` | varint | string reference into the batch's dictionary; 0 = absent |
//! | `b` | varint length + bytes | text stored inline (messages, values, paths) |
//! | `o` | varint: 0 = absent, n + 1 then n bytes | optional inline text |
//! | `v` | varint count, then count × `b` | an argument list |
//! | `j` | like `b` | compact JSON (the value of `data_json`) |
//! | `f` | varint | bit flags |
//! | `n` | varint `v`: even → the number `v / 2` in decimal, odd → `(v - 1) / 2` bytes follow | text, numbers packed (a datum's value) |
//! | `d` | varint `t`: 0 = absent; else `p = t - 1`, varint `q`, then `b` | optional text as an edit of the batch's previous `d` text: its first `p` bytes, the given bytes, its last `q` bytes (see [`DELTA_MAX`]) |
//! | `r` | zigzag varint | a `t_rel` as its difference from the prediction of [`Origins`] |
//!
//! `n` packs a text only when it is a number written the one way `u64`'s `Display`
//! writes it (no sign, no leading zero, below 2^63), so the text comes back exactly.
//! Besides its arguments, every event carries its time (a tick delta), its thread (from
//! the batch) and, through the head byte, a callsite and a repository id. What a
//! [`Record`](crate::record::Record) holds beyond that comes from the batch: the
//! process's `sid` and depth from the stream header, `open_regions` from the rule in
//! [`predicted_open`] (with an [`control::OPEN`] record where the rule does not give
//! the record's value).

use crate::record::Trace2Event;
use crate::record::catalogue::{CATALOGUE, FieldType, KIND_COUNT, KindSpec as Row, MAX_FIELDS};

/// The format's major version: a decoder refuses other majors.
pub const MAJOR: u8 = 1;
/// The format's minor version: later minors only add kinds or trailing arguments, which
/// they declare in the stream header.
pub const MINOR: u8 = 0;

/// Bits 0–5 of a head byte: the kind.
pub const KIND_MASK: u8 = 0x3F;
/// Head bit 6: a callsite reference follows the time.
pub const HAS_CALLSITE: u8 = 0x40;
/// Head bit 7: a repository id (zigzag) follows the callsite.
pub const HAS_REPO: u8 = 0x80;

/// The most arguments one kind may have (declared kinds included).
pub const MAX_ARGS: usize = 16;

/// The type of one argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgType {
    /// `u`: unsigned varint.
    Uint,
    /// `i`: zigzag varint.
    Int,
    /// `s`: string reference (0 = absent).
    StrRef,
    /// `b`: inline bytes.
    Bytes,
    /// `o`: optional inline bytes.
    OptBytes,
    /// `v`: a list of inline bytes.
    List,
    /// `j`: inline JSON text.
    Json,
    /// `f`: bit flags.
    Flags,
    /// `n`: text with numbers packed.
    NumText,
    /// `d`: optional text as an edit of the previous one.
    Delta,
    /// `r`: a `t_rel` relative to its prediction.
    RelTime,
}

impl ArgType {
    /// The type of a signature character.
    pub const fn from_code(code: u8) -> Option<ArgType> {
        Some(match code {
            b'u' => ArgType::Uint,
            b'i' => ArgType::Int,
            b's' => ArgType::StrRef,
            b'b' => ArgType::Bytes,
            b'o' => ArgType::OptBytes,
            b'v' => ArgType::List,
            b'j' => ArgType::Json,
            b'f' => ArgType::Flags,
            b'n' => ArgType::NumText,
            b'd' => ArgType::Delta,
            b'r' => ArgType::RelTime,
            _ => return None,
        })
    }
}

/// One entry of the kind table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KindSpec {
    /// The kind, as it appears in a head byte.
    pub id: u8,
    /// The Trace2 event name.
    pub name: &'static str,
    /// One type code per argument, in wire order.
    pub signature: &'static str,
}

/// The kinds of Trace2 events: the numbers of the record crate's catalogue
/// ([`Kind`](crate::record::Kind)).
pub mod kind {
    #![allow(missing_docs)]
    use crate::record::Kind;
    pub const VERSION: u8 = Kind::Version.id();
    pub const START: u8 = Kind::Start.id();
    pub const EXIT: u8 = Kind::Exit.id();
    pub const ATEXIT: u8 = Kind::Atexit.id();
    pub const SIGNAL: u8 = Kind::Signal.id();
    pub const ERROR: u8 = Kind::Error.id();
    pub const CMD_PATH: u8 = Kind::CmdPath.id();
    pub const CMD_NAME: u8 = Kind::CmdName.id();
    pub const CMD_MODE: u8 = Kind::CmdMode.id();
    pub const ALIAS: u8 = Kind::Alias.id();
    pub const CHILD_START: u8 = Kind::ChildStart.id();
    pub const CHILD_EXIT: u8 = Kind::ChildExit.id();
    pub const CHILD_READY: u8 = Kind::ChildReady.id();
    pub const THREAD_START: u8 = Kind::ThreadStart.id();
    pub const THREAD_EXIT: u8 = Kind::ThreadExit.id();
    pub const EXEC: u8 = Kind::Exec.id();
    pub const EXEC_RESULT: u8 = Kind::ExecResult.id();
    pub const DEF_PARAM: u8 = Kind::DefParam.id();
    pub const DEF_REPO: u8 = Kind::DefRepo.id();
    pub const REGION_ENTER: u8 = Kind::RegionEnter.id();
    pub const REGION_LEAVE: u8 = Kind::RegionLeave.id();
    pub const DATA: u8 = Kind::Data.id();
    pub const DATA_JSON: u8 = Kind::DataJson.id();
    pub const PRINTF: u8 = Kind::Printf.id();
    pub const TIMER: u8 = Kind::Timer.id();
    pub const TH_TIMER: u8 = Kind::ThTimer.id();
    pub const COUNTER: u8 = Kind::Counter.id();
    pub const TH_COUNTER: u8 = Kind::ThCounter.id();
    pub const TOO_MANY_FILES: u8 = Kind::TooManyFiles.id();
}

/// The batch's own records, which carry no event.
///
/// | kind | record | body |
/// |---|---|---|
/// | `0x3F` | `STR_DEF` | id (= strings defined so far + 1), bytes |
/// | `0x3E` | `CS_DEF` | id (= callsites defined so far + 1), file `s`, line `u` |
/// | `0x3D` | `THREAD` | name bytes: the thread's name from here on |
/// | `0x3C` | `OPEN` | `u`: the next event's `open_regions` |
/// | `0x3B` | `WALL` | `i`: wall time minus (anchor + t_abs), µs, from here on |
/// | `0x3A` | `TICKS` | `u`: absolute ticks that the next event's delta starts from |
/// | `0x39` | `CUT` | none: the next event's texts were cut to fit a frame |
pub mod control {
    #![allow(missing_docs)]
    pub const STR_DEF: u8 = 0x3F;
    pub const CS_DEF: u8 = 0x3E;
    pub const THREAD: u8 = 0x3D;
    pub const OPEN: u8 = 0x3C;
    pub const WALL: u8 = 0x3B;
    pub const TICKS: u8 = 0x3A;
    pub const CUT: u8 = 0x39;
    /// The lowest control kind: event kinds stay below it.
    pub const FIRST: u8 = CUT;
}

/// The events of format 1.0, in kind order: the record crate's catalogue, each row
/// with its binary signature.
pub const EVENT_KINDS: [KindSpec; KIND_COUNT] = {
    let mut kinds = [KindSpec {
        id: 0,
        name: "",
        signature: "",
    }; KIND_COUNT];
    let mut i = 0;
    while i < kinds.len() {
        let row = &CATALOGUE[i];
        kinds[i] = KindSpec {
            id: row.kind.id(),
            name: row.name,
            signature: row.binary,
        };
        i += 1;
    }
    kinds
};

/// Where one field of a kind travels in its record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// As argument `n` of the kind's signature.
    Arg(u8),
    /// As the repository id after the head byte ([`HAS_REPO`]).
    Head,
    /// As bit `bit` of the kind's `f` argument number `arg`.
    Flag {
        /// The `f` argument.
        arg: u8,
        /// The bit, counted from 0.
        bit: u8,
    },
}

/// How the fields of a kind's catalogue row map onto its record: worked out from the
/// row at compile time ([`LAYOUTS`]), so that the writer and the decoder handle every
/// kind but the hot ones (regions and data) by its row alone.
///
/// The rules: a field named `repo` travels in the head; the `Flag` fields travel
/// together as the one `f` argument, the first as bit 0; the other fields are the
/// arguments, in field order or in the row's `binary_order`. Each argument's type code
/// must suit its field's type (a row that breaks a rule does not compile).
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// Per argument in wire order, the index of the field it carries (for the `f`
    /// argument, the first `Flag` field).
    pub fields: [u8; MAX_ARGS],
    /// Per argument, its type.
    pub args: [ArgType; MAX_ARGS],
    /// How many arguments there are.
    pub arg_count: u8,
    /// Per field of the row, where it travels.
    pub places: [Place; MAX_FIELDS],
    /// Whether a field travels in the head (a repository id on any other kind is
    /// damage).
    pub has_repo: bool,
    /// How many `Flag` fields the `f` argument holds.
    pub flag_count: u8,
}

impl Layout {
    /// The arguments' fields and types, in wire order.
    #[inline]
    pub fn args(&self) -> impl Iterator<Item = (usize, ArgType)> + '_ {
        let n = usize::from(self.arg_count);
        self.fields[..n]
            .iter()
            .map(|&f| usize::from(f))
            .zip(self.args[..n].iter().copied())
    }
}

const fn same_text(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Whether an argument of type `arg` can carry a field of type `field`.
const fn suits(arg: ArgType, field: FieldType) -> bool {
    use FieldType as F;
    match arg {
        ArgType::Uint => matches!(
            field,
            F::Uint | F::Count | F::Micros | F::Nanos | F::Nesting
        ),
        ArgType::Int => matches!(field, F::Int | F::Code),
        ArgType::StrRef => matches!(field, F::Text | F::TextOmittedWhenEmpty | F::OptText),
        ArgType::Bytes => matches!(field, F::Text | F::TextOmittedWhenEmpty),
        ArgType::OptBytes | ArgType::Delta => matches!(field, F::OptText),
        ArgType::List => matches!(field, F::TextList),
        ArgType::Json => matches!(field, F::Json),
        ArgType::Flags => matches!(field, F::Flag),
        ArgType::NumText => matches!(field, F::Text),
        ArgType::RelTime => matches!(field, F::Micros),
    }
}

/// The layout of one catalogue row (see [`Layout`] for the rules).
const fn layout_of(row: &Row) -> Layout {
    let fields = row.fields;
    let mut layout = Layout {
        fields: [0; MAX_ARGS],
        args: [ArgType::Uint; MAX_ARGS],
        arg_count: 0,
        places: [Place::Head; MAX_FIELDS],
        has_repo: false,
        flag_count: 0,
    };
    // The head and the flags.
    let mut first_flag = usize::MAX;
    let mut i = 0;
    while i < fields.len() {
        if same_text(fields[i].name, "repo") {
            assert!(matches!(fields[i].ty, FieldType::Int | FieldType::OptInt));
            layout.places[i] = Place::Head;
            layout.has_repo = true;
        } else if matches!(fields[i].ty, FieldType::Flag) {
            if first_flag == usize::MAX {
                first_flag = i;
            }
            layout.places[i] = Place::Flag {
                arg: 0,
                bit: layout.flag_count,
            };
            layout.flag_count += 1;
        }
        i += 1;
    }
    // The arguments, in their order.
    let mut n = 0;
    if row.binary_order.is_empty() {
        let mut i = 0;
        while i < fields.len() {
            let flag = matches!(layout.places[i], Place::Flag { .. });
            let head = same_text(fields[i].name, "repo");
            if !head && (!flag || i == first_flag) {
                layout.fields[n] = i as u8;
                n += 1;
            }
            i += 1;
        }
    } else {
        while n < row.binary_order.len() {
            layout.fields[n] = row.binary_order[n];
            n += 1;
        }
    }
    let signature = row.binary.as_bytes();
    assert!(
        n == signature.len(),
        "a signature has one code per argument"
    );
    layout.arg_count = n as u8;
    let mut flags_placed = false;
    let mut a = 0;
    while a < n {
        let field = layout.fields[a] as usize;
        let ty = match ArgType::from_code(signature[a]) {
            Some(ty) => ty,
            None => panic!("an unknown type code"),
        };
        assert!(
            suits(ty, fields[field].ty),
            "an argument's type suits its field"
        );
        layout.args[a] = ty;
        if matches!(ty, ArgType::Flags) {
            assert!(!flags_placed, "one f argument holds every flag");
            flags_placed = true;
            let mut i = 0;
            while i < fields.len() {
                if let Place::Flag { bit, .. } = layout.places[i] {
                    layout.places[i] = Place::Flag { arg: a as u8, bit };
                }
                i += 1;
            }
        } else {
            let unplaced = matches!(layout.places[field], Place::Head);
            assert!(
                unplaced && !same_text(fields[field].name, "repo"),
                "a field is one argument"
            );
            layout.places[field] = Place::Arg(a as u8);
        }
        a += 1;
    }
    // Every field has its place: the flags their argument, the others theirs.
    assert!(
        flags_placed || layout.flag_count == 0,
        "the flags have an f argument"
    );
    let mut i = 0;
    while i < fields.len() {
        let head = same_text(fields[i].name, "repo");
        assert!(
            head || !matches!(layout.places[i], Place::Head),
            "every field travels"
        );
        i += 1;
    }
    layout
}

/// The layout of every kind of format 1.0, in kind order.
pub const LAYOUTS: [Layout; KIND_COUNT] = {
    let mut layouts = [layout_of(&CATALOGUE[0]); KIND_COUNT];
    let mut i = 1;
    while i < KIND_COUNT {
        layouts[i] = layout_of(&CATALOGUE[i]);
        i += 1;
    }
    layouts
};

/// The layout of a kind.
#[inline]
pub fn layout(kind: crate::record::Kind) -> &'static Layout {
    &LAYOUTS[usize::from(kind.id()) - 1]
}

/// The table entry of an event kind of format 1.0.
pub fn baseline(id: u8) -> Option<&'static KindSpec> {
    let index = usize::from(id).checked_sub(1)?;
    EVENT_KINDS.get(index).filter(|spec| spec.id == id)
}

/// The kind an event is written as: its number in the catalogue.
#[inline]
pub fn kind_of(event: &Trace2Event<'_>) -> u8 {
    event.kind().id()
}

/// Kinds whose records the core writes with `open_regions` 0 whatever the stack holds
/// (they come after it is unwound, or describe the thread or process as a whole).
fn written_at_zero(kind: u8) -> bool {
    use kind::*;
    matches!(
        kind,
        ATEXIT | TIMER | TH_TIMER | COUNTER | TH_COUNTER | THREAD_START | THREAD_EXIT
    )
}

/// The `open_regions` a record of `kind` gets unless an `OPEN` record says otherwise.
///
/// `state` is the thread's open-region count as the batch tracks it (it starts at the
/// batch header's `depth_at_start - 1`); `nesting` is the event's `nesting` argument,
/// for the kinds that have one. Region and data records are written with
/// `open_regions = nesting - 1` by the core; `atexit`, totals, `thread_start` and `thread_exit` with 0;
/// the others with the thread's current count.
pub fn predicted_open(kind: u8, nesting: u32, state: u32) -> u32 {
    use kind::*;
    match kind {
        REGION_ENTER | REGION_LEAVE | DATA | DATA_JSON => nesting.saturating_sub(1),
        k if written_at_zero(k) => 0,
        _ => state,
    }
}

/// The tracked open-region count after a record of `kind` with `open_regions = open`.
pub fn open_after(kind: u8, open: u32, state: u32) -> u32 {
    match kind {
        kind::REGION_ENTER => open.saturating_add(1),
        k if written_at_zero(k) => state,
        _ => open,
    }
}

/// A `d` text longer than this is not kept as the previous text: the next `d` text of
/// the batch is an edit of the empty text. (It keeps the writer's copy bounded.)
pub const DELTA_MAX: usize = 4096;

/// The number a `n` text packs, if it packs one: decimal digits as `u64`'s `Display`
/// writes them, below 2^63.
#[inline]
pub fn packed_number(text: &str) -> Option<u64> {
    let bytes = text.as_bytes();
    if bytes.is_empty() || bytes.len() > 19 || (bytes[0] == b'0' && bytes.len() > 1) {
        return None;
    }
    // Four digits at a time while four are left (19 digits stay below 2^64), then
    // one at a time.
    let mut n: u64 = 0;
    let mut chunks = bytes.chunks_exact(4);
    for chunk in &mut chunks {
        let four = chunk.first_chunk::<4>()?;
        n = n * 10_000 + u64::from(four_digits(u32::from_le_bytes(*four))?);
    }
    for &b in chunks.remainder() {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(b - b'0');
    }
    (n < 1 << 63).then_some(n)
}

/// The number four ASCII digits spell (the first in the low byte), if all four are
/// digits: a few word operations instead of a loop.
#[inline(always)]
fn four_digits(word: u32) -> Option<u32> {
    // Each byte is 0x30..=0x3f, and adding 6 keeps it below 0x40: 0x30..=0x39.
    if word & 0xf0f0_f0f0 != 0x3030_3030
        || word.wrapping_add(0x0606_0606) & 0xf0f0_f0f0 != 0x3030_3030
    {
        return None;
    }
    let digits = word - 0x3030_3030;
    // Bytes 0 and 2 become the pairs' values (at most 99: no carry between bytes).
    let pairs = digits * 10 + (digits >> 8);
    Some((pairs & 0xff) * 100 + (pairs >> 16 & 0xff))
}

/// How many nesting levels [`Origins`] follows.
const ORIGIN_LEVELS: usize = 64;

/// Where the `t_rel` of the next `region_leave`, `data` or `data_json` is predicted to
/// count from, per nesting level, as the batch so far tells: the ticks of the region's
/// `region_enter`, or the origin the last datum at that level implied. Both writer and
/// decoder keep one per batch (all zero at its start) and update it after each record.
#[derive(Clone, Debug)]
pub struct Origins {
    at: [u64; ORIGIN_LEVELS],
}

impl Default for Origins {
    fn default() -> Self {
        Origins {
            at: [0; ORIGIN_LEVELS],
        }
    }
}

impl Origins {
    /// Forgets everything (a new batch).
    pub fn reset(&mut self) {
        self.at = [0; ORIGIN_LEVELS];
    }

    /// The level whose origin a `t_rel` of `kind` at `nesting` counts from: the region
    /// itself for a leave, the innermost open region (one level out) for a datum.
    fn level(kind: u8, nesting: u32) -> Option<usize> {
        let level = match kind {
            kind::REGION_ENTER | kind::REGION_LEAVE => nesting,
            kind::DATA | kind::DATA_JSON => nesting.checked_sub(1)?,
            _ => return None,
        };
        let level = usize::try_from(level).ok()?;
        (level < ORIGIN_LEVELS).then_some(level)
    }

    /// The predicted `t_rel` of a record of `kind` at `nesting` and `ticks`.
    pub fn predict(&self, kind: u8, nesting: u32, ticks: u64) -> u64 {
        Self::level(kind, nesting).map_or(0, |l| ticks.wrapping_sub(self.at[l]))
    }

    /// Learns from a record (`t_rel` is 0 for a `region_enter`).
    pub fn learn(&mut self, kind: u8, nesting: u32, ticks: u64, t_rel: u64) {
        if let Some(l) = Self::level(kind, nesting) {
            self.at[l] = ticks.wrapping_sub(t_rel);
        }
    }
}

/// The wire form of a `t_rel`: its difference from the prediction, zigzagged.
#[inline]
pub fn rel_time_to_wire(t_rel: u64, predicted: u64) -> u64 {
    crate::varint::zigzag(t_rel.wrapping_sub(predicted) as i64)
}

/// The `t_rel` back from its wire form.
#[inline]
pub fn rel_time_from_wire(wire: u64, predicted: u64) -> u64 {
    predicted.wrapping_add(crate::varint::unzigzag(wire) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_in_kind_order_and_well_formed() {
        for (index, spec) in EVENT_KINDS.iter().enumerate() {
            assert_eq!(usize::from(spec.id), index + 1, "{spec:?}");
            assert!(spec.id < control::FIRST);
            assert!(spec.signature.len() <= MAX_ARGS);
            assert!(
                spec.signature
                    .bytes()
                    .all(|c| ArgType::from_code(c).is_some()),
                "{spec:?}"
            );
            assert_eq!(baseline(spec.id), Some(spec));
        }
        assert_eq!(baseline(0), None);
        assert_eq!(baseline(KIND_COUNT as u8 + 1), None);
        assert_eq!(baseline(control::STR_DEF), None);
    }

    /// The rows' layouts, for the kinds whose fields do not simply follow each other.
    #[test]
    fn layouts_place_every_field() {
        use crate::record::Kind;
        let child = layout(Kind::ChildStart);
        // child_id, flags, class, hook_name, cd, argv.
        assert_eq!(&child.fields[..6], &[0, 4, 1, 2, 3, 6]);
        assert_eq!(child.places[4], Place::Flag { arg: 1, bit: 0 });
        assert_eq!(child.places[5], Place::Flag { arg: 1, bit: 1 });
        assert_eq!(child.places[6], Place::Arg(5));
        assert_eq!(child.flag_count, 2);
        let repo = layout(Kind::DefRepo);
        assert!(repo.has_repo);
        assert_eq!(&repo.places[..2], &[Place::Head, Place::Arg(0)]);
        let error = layout(Kind::Error);
        assert_eq!(&error.places[..2], &[Place::Arg(1), Place::Arg(0)]);
        for (spec, layout) in CATALOGUE.iter().zip(&LAYOUTS) {
            assert_eq!(
                usize::from(layout.arg_count),
                spec.binary.len(),
                "{}",
                spec.name
            );
            let in_head = spec.fields.iter().any(|f| f.name == "repo");
            assert_eq!(layout.has_repo, in_head, "{}", spec.name);
            for (arg, (field, ty)) in layout.args().enumerate() {
                assert_eq!(Some(ty), ArgType::from_code(spec.binary.as_bytes()[arg]));
                if ty != ArgType::Flags {
                    assert_eq!(layout.places[field], Place::Arg(arg as u8), "{}", spec.name);
                }
            }
        }
    }

    #[test]
    fn kinds_name_their_events() {
        let events = [
            Trace2Event::TooManyFiles,
            Trace2Event::ThreadStart,
            Trace2Event::Exit { code: 0 },
            Trace2Event::Timer {
                per_thread: true,
                timer: Default::default(),
            },
            Trace2Event::Counter {
                per_thread: false,
                category: "",
                name: "",
                value: 0,
            },
        ];
        for event in events {
            let spec = baseline(kind_of(&event)).unwrap();
            assert_eq!(spec.name, event.name());
        }
    }

    #[test]
    fn open_rule_follows_the_core() {
        // A region opened and closed in order: the prediction is always right.
        let mut state = 0;
        for (kind, nesting, open) in [
            (kind::REGION_ENTER, 1, 0),
            (kind::PRINTF, 0, 1),
            (kind::REGION_ENTER, 2, 1),
            (kind::DATA, 3, 2),
            (kind::REGION_LEAVE, 2, 1),
            (kind::REGION_LEAVE, 1, 0),
            (kind::ATEXIT, 0, 0),
        ] {
            assert_eq!(predicted_open(kind, nesting, state), open);
            state = open_after(kind, open, state);
        }
        assert_eq!(state, 0);
        // Totals at exit keep the tracked count.
        assert_eq!(open_after(kind::TIMER, 0, 3), 3);
    }

    #[test]
    fn numbers_pack_only_in_their_one_spelling() {
        for (text, packed) in [
            ("0", Some(0)),
            ("42", Some(42)),
            ("9223372036854775807", Some(i64::MAX as u64)),
            ("9223372036854775808", None),
            ("042", None),
            ("", None),
            ("-1", None),
            ("1.5", None),
            ("٣", None),
            ("1234", Some(1234)),
            ("12345678", Some(12_345_678)),
            ("9090", Some(9090)),
            ("123:", None),
            ("12/4", None),
            ("1?34", None),
            ("1234567x", None),
            ("10000000000000000000", None),
        ] {
            assert_eq!(packed_number(text), packed, "{text:?}");
            if let Some(n) = packed {
                assert_eq!(n.to_string(), text);
            }
        }
    }

    #[test]
    fn numbers_pack_as_the_standard_parser_reads_them() {
        // Every length, and every byte at every place of a four-digit group.
        let mut texts: Vec<String> = (0..20).map(|n| "7".repeat(n)).collect();
        for place in 0..8 {
            for byte in 0..=255u8 {
                let mut text = *b"19283746";
                text[place] = byte;
                texts.extend(String::from_utf8(text.to_vec()));
            }
        }
        texts.extend(["18446744073709551615", "9223372036854775807"].map(String::from));
        for text in &texts {
            let standard = text
                .parse::<u64>()
                .ok()
                .filter(|n| *n < 1 << 63 && n.to_string() == *text);
            assert_eq!(packed_number(text), standard, "{text:?}");
        }
    }

    #[test]
    fn origins_predict_leaves_and_data_in_a_region() {
        let mut o = Origins::default();
        o.learn(kind::REGION_ENTER, 1, 100, 0);
        assert_eq!(o.predict(kind::DATA, 2, 130), 30);
        o.learn(kind::DATA, 2, 130, 30);
        assert_eq!(o.predict(kind::REGION_LEAVE, 1, 150), 50);
        for (t_rel, predicted) in [(0, u64::MAX), (u64::MAX, 0), (7, 7), (3, 9)] {
            let wire = rel_time_to_wire(t_rel, predicted);
            assert_eq!(rel_time_from_wire(wire, predicted), t_rel);
        }
        assert_eq!(rel_time_to_wire(50, 50), 0);
        // Levels past those followed predict nothing.
        assert_eq!(o.predict(kind::DATA, 0, 9), 0);
        assert_eq!(o.predict(kind::REGION_LEAVE, 500, 9), 0);
    }
}
