//! The catalogue: every Trace2 event kind declared once, as data that writers and
//! readers share.
//!
//! One row of [`CATALOGUE`] per kind gives its Trace2 name, its fields in the order the
//! [`Trace2Event`] variant declares them (with each field's Event JSON key and type) and the
//! argument signature of the binary target (see `docs/binary-format.md`). The kind's
//! number ([`Kind`]) is the kind byte of the binary target and the tag of the record
//! [`codec`](crate::codec).
//!
//! What reads or writes events generically goes through this module: [`Trace2Event::kind`]
//! gives a record's row, [`Trace2Event::field_values`] (and [`Trace2Event::visit_fields`]) hand its
//! fields over in catalogue order as [`FieldValue`]s, and [`Trace2Event::from_fields`] builds
//! an event of a kind from such values (the record codec, the binary writer and decoder,
//! the Event JSON reader and the random record generator use them). Those functions and
//! [`Trace2Event::kind`] are the only places that spell out every variant's fields; a test
//! checks them against the table. [`regular_event!`](crate::regular_event) and
//! [`regular_kind!`](crate::regular_kind) name the kinds that the encoders and the
//! binary decoder handle by their row alone (all but regions and data, which they write
//! by hand), so that their matches need no `_` arm and a new kind stops the build until
//! it is listed there. What stays per kind elsewhere is what is irregular: the Normal and Perf payload
//! text, the typed API call and the meaning a reader gives a kind.

use std::fmt;

use crate::record::{ChildInfo, RegionInfo, TimerInfo, Trace2Event};

/// The kinds of Trace2 events. The number of each is its kind byte in the binary target
/// (format 1.0) and its tag in the record codec.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
#[allow(missing_docs)]
pub enum Kind {
    Version = 0x01,
    Start = 0x02,
    Exit = 0x03,
    Atexit = 0x04,
    Signal = 0x05,
    Error = 0x06,
    CmdPath = 0x07,
    CmdAncestry = 0x08,
    CmdName = 0x09,
    CmdMode = 0x0A,
    Alias = 0x0B,
    ChildStart = 0x0C,
    ChildExit = 0x0D,
    ChildReady = 0x0E,
    ThreadStart = 0x0F,
    ThreadExit = 0x10,
    Exec = 0x11,
    ExecResult = 0x12,
    DefParam = 0x13,
    DefRepo = 0x14,
    RegionEnter = 0x15,
    RegionLeave = 0x16,
    Data = 0x17,
    DataJson = 0x18,
    Printf = 0x19,
    Timer = 0x1A,
    ThTimer = 0x1B,
    Counter = 0x1C,
    ThCounter = 0x1D,
    TooManyFiles = 0x1E,
}

/// How many kinds the catalogue holds.
pub const KIND_COUNT: usize = 30;

impl Kind {
    /// The kind numbered `id`, if the catalogue has one.
    pub fn from_id(id: u8) -> Option<Kind> {
        let row = CATALOGUE.get(usize::from(id).checked_sub(1)?)?;
        Some(row.kind)
    }

    /// The kind whose Trace2 name is `name`.
    pub fn from_name(name: &str) -> Option<Kind> {
        CATALOGUE
            .iter()
            .find(|row| row.name == name)
            .map(|row| row.kind)
    }

    /// The kind's number (its binary kind byte and codec tag).
    #[inline]
    pub const fn id(self) -> u8 {
        self as u8
    }

    /// The kind's row of the catalogue.
    #[inline]
    pub const fn spec(self) -> &'static KindSpec {
        &CATALOGUE[self as usize - 1]
    }

    /// The Trace2 name.
    #[inline]
    pub const fn name(self) -> &'static str {
        self.spec().name
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The type of a field: what Rust type it has in [`Trace2Event`], and how the record codec
/// and Event JSON write it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldType {
    /// `&str`; a JSON string.
    Text,
    /// `&str` that Event JSON leaves out when empty (`cmd_name`'s hierarchy).
    TextOmittedWhenEmpty,
    /// `Option<&str>`; a JSON string, or no key.
    OptText,
    /// `&[&str]`; a JSON array of strings.
    TextList,
    /// `&str` holding compact JSON, embedded verbatim (`null` when empty).
    Json,
    /// `u64`; a JSON integer.
    Uint,
    /// `u64` that Event JSON writes through a signed conversion, as git does.
    Count,
    /// `i64`; a JSON integer.
    Int,
    /// `Option<i64>`; a JSON integer, or no key.
    OptInt,
    /// `u32`; a JSON integer.
    Nesting,
    /// `i32`; a JSON integer.
    Code,
    /// `bool`; a JSON boolean.
    Flag,
    /// `u64` microseconds; JSON seconds with six decimals.
    Micros,
    /// `u64` nanoseconds; JSON seconds with six decimals.
    Nanos,
}

/// One field of a kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// The field's name in [`Trace2Event`] (in [`ChildInfo`], [`RegionInfo`] or
    /// [`TimerInfo`] for the kinds that group their fields).
    pub name: &'static str,
    /// The field's key in an Event JSON line; `None` when Event JSON does not write it
    /// (the reader then gives it its default, see [`Field::json_default`]).
    pub key: Option<&'static str>,
    /// The field's type.
    pub ty: FieldType,
}

impl Field {
    /// Whether a reader of Event JSON cannot recover this field from the line alone,
    /// and gives it its default instead: Event JSON has no key for it.
    pub fn json_default(&self) -> bool {
        self.key.is_none()
    }
}

/// One row of the catalogue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KindSpec {
    /// The kind.
    pub kind: Kind,
    /// The Trace2 event name (`"region_enter"`).
    pub name: &'static str,
    /// The fields, in the order the [`Trace2Event`] variant declares them (the record codec's
    /// wire order).
    pub fields: &'static [Field],
    /// The binary target's argument signature (one type code per argument, in wire
    /// order; `docs/binary-format.md`, "Event kinds").
    pub binary: &'static str,
    /// Which field each binary argument carries, by index into [`fields`](Self::fields),
    /// when that is not the fields' own order; empty when it is. (In either case a
    /// field named `repo` travels in the record's head, not as an argument, and the
    /// `Flag` fields travel together as one `f` argument, the first of them as bit 0,
    /// at the place of the first.)
    pub binary_order: &'static [u8],
    /// Whether the event has a `nesting` that the Event target filters by.
    pub nested: bool,
}

const fn f(name: &'static str, key: &'static str, ty: FieldType) -> Field {
    Field {
        name,
        key: Some(key),
        ty,
    }
}

const fn hidden(name: &'static str, ty: FieldType) -> Field {
    Field {
        name,
        key: None,
        ty,
    }
}

const fn row(
    kind: Kind,
    name: &'static str,
    fields: &'static [Field],
    binary: &'static str,
) -> KindSpec {
    KindSpec {
        kind,
        name,
        fields,
        binary,
        binary_order: &[],
        nested: false,
    }
}

/// `spec` with binary arguments in another order than its fields (see
/// [`KindSpec::binary_order`]).
const fn wire(mut spec: KindSpec, order: &'static [u8]) -> KindSpec {
    spec.binary_order = order;
    spec
}

const fn nested(mut spec: KindSpec) -> KindSpec {
    spec.nested = true;
    spec
}

use FieldType::*;

const REGION_FIELDS: [Field; 4] = [
    f("repo", "repo", OptInt),
    f("category", "category", OptText),
    f("label", "label", OptText),
    f("msg", "msg", OptText),
];
const TIMER_FIELDS: &[Field] = &[
    f("category", "category", Text),
    f("name", "name", Text),
    f("intervals", "intervals", Count),
    f("total_ns", "t_total", Nanos),
    f("min_ns", "t_min", Nanos),
    f("max_ns", "t_max", Nanos),
];
const COUNTER_FIELDS: &[Field] = &[
    f("category", "category", Text),
    f("name", "name", Text),
    f("value", "count", Count),
];

/// Every Trace2 event kind, in kind order (row `i` is kind `i + 1`).
///
/// Binary signatures (type codes in `docs/binary-format.md`): the repository id of
/// `def_repo`, regions and data travels in the head byte, `child_start`'s two flags are
/// one `f` argument, and the order of arguments is the wire's, which for some kinds
/// differs from the field order ([`KindSpec::binary_order`] says how).
pub const CATALOGUE: [KindSpec; KIND_COUNT] = [
    row(Kind::Version, "version", &[f("exe", "exe", Text)], "s"),
    row(Kind::Start, "start", &[f("argv", "argv", TextList)], "v"),
    row(Kind::Exit, "exit", &[f("code", "code", Code)], "i"),
    row(Kind::Atexit, "atexit", &[f("code", "code", Code)], "i"),
    row(Kind::Signal, "signal", &[f("signo", "signo", Code)], "i"),
    // Binary: fmt, then msg.
    wire(
        row(
            Kind::Error,
            "error",
            &[f("msg", "msg", OptText), f("fmt", "fmt", OptText)],
            "oo",
        ),
        &[1, 0],
    ),
    row(Kind::CmdPath, "cmd_path", &[f("path", "path", Text)], "b"),
    row(
        Kind::CmdAncestry,
        "cmd_ancestry",
        &[f("ancestry", "ancestry", TextList)],
        "v",
    ),
    row(
        Kind::CmdName,
        "cmd_name",
        &[
            f("name", "name", Text),
            f("hierarchy", "hierarchy", TextOmittedWhenEmpty),
        ],
        "ss",
    ),
    row(Kind::CmdMode, "cmd_mode", &[f("name", "name", Text)], "s"),
    row(
        Kind::Alias,
        "alias",
        &[f("alias", "alias", Text), f("argv", "argv", TextList)],
        "bv",
    ),
    // Binary: child_id, flags (bit 0 use_shell, bit 1 is_git), class, hook_name, cd,
    // argv. Event JSON shows `is_git` as a `"git"` before the arguments.
    wire(
        row(
            Kind::ChildStart,
            "child_start",
            &[
                f("child_id", "child_id", Uint),
                f("class", "child_class", Text),
                f("hook_name", "hook_name", OptText),
                f("cd", "cd", OptText),
                f("use_shell", "use_shell", Flag),
                hidden("is_git", Flag),
                f("argv", "argv", TextList),
            ],
            "ufssov",
        ),
        &[0, 4, 1, 2, 3, 6],
    ),
    row(
        Kind::ChildExit,
        "child_exit",
        &[
            f("child_id", "child_id", Uint),
            f("pid", "pid", Int),
            f("code", "code", Int),
            f("elapsed_us", "t_rel", Micros),
        ],
        "uiiu",
    ),
    row(
        Kind::ChildReady,
        "child_ready",
        &[
            f("child_id", "child_id", Uint),
            f("pid", "pid", Int),
            f("ready", "ready", Text),
            f("elapsed_us", "t_rel", Micros),
        ],
        "uisu",
    ),
    row(Kind::ThreadStart, "thread_start", &[], ""),
    row(
        Kind::ThreadExit,
        "thread_exit",
        &[f("elapsed_us", "t_rel", Micros)],
        "u",
    ),
    row(
        Kind::Exec,
        "exec",
        &[
            f("exec_id", "exec_id", Uint),
            f("exe", "exe", OptText),
            f("argv", "argv", TextList),
        ],
        "uov",
    ),
    // git's Event target leaves the errno text to the other targets.
    row(
        Kind::ExecResult,
        "exec_result",
        &[
            f("exec_id", "exec_id", Uint),
            f("code", "code", Int),
            hidden("err", OptText),
        ],
        "uio",
    ),
    row(
        Kind::DefParam,
        "def_param",
        &[
            f("scope", "scope", Text),
            f("param", "param", Text),
            f("value", "value", OptText),
        ],
        "sso",
    ),
    // Binary: the repository id is in the head byte (always present).
    row(
        Kind::DefRepo,
        "def_repo",
        &[f("repo", "repo", Int), f("worktree", "worktree", Text)],
        "b",
    ),
    // Binary: nesting, category, label, msg.
    nested(wire(
        row(
            Kind::RegionEnter,
            "region_enter",
            &[
                REGION_FIELDS[0],
                REGION_FIELDS[1],
                REGION_FIELDS[2],
                REGION_FIELDS[3],
                f("nesting", "nesting", Nesting),
            ],
            "usss",
        ),
        &[4, 1, 2, 3],
    )),
    // Binary: nesting, t_rel, category, label, msg.
    nested(wire(
        row(
            Kind::RegionLeave,
            "region_leave",
            &[
                REGION_FIELDS[0],
                REGION_FIELDS[1],
                REGION_FIELDS[2],
                REGION_FIELDS[3],
                f("nesting", "nesting", Nesting),
                f("t_rel_us", "t_rel", Micros),
            ],
            "ursss",
        ),
        &[4, 5, 1, 2, 3],
    )),
    // Binary: nesting, t_rel, category, key, value.
    nested(wire(
        row(
            Kind::Data,
            "data",
            &[
                f("repo", "repo", OptInt),
                f("category", "category", Text),
                f("key", "key", Text),
                f("value", "value", Text),
                f("nesting", "nesting", Nesting),
                f("t_rel_us", "t_rel", Micros),
            ],
            "urssn",
        ),
        &[4, 5, 1, 2, 3],
    )),
    nested(wire(
        row(
            Kind::DataJson,
            "data_json",
            &[
                f("repo", "repo", OptInt),
                f("category", "category", Text),
                f("key", "key", Text),
                f("json", "value", Json),
                f("nesting", "nesting", Nesting),
                f("t_rel_us", "t_rel", Micros),
            ],
            "urssj",
        ),
        &[4, 5, 1, 2, 3],
    )),
    row(Kind::Printf, "printf", &[f("msg", "msg", OptText)], "d"),
    row(Kind::Timer, "timer", TIMER_FIELDS, "ssuuuu"),
    row(Kind::ThTimer, "th_timer", TIMER_FIELDS, "ssuuuu"),
    row(Kind::Counter, "counter", COUNTER_FIELDS, "ssu"),
    row(Kind::ThCounter, "th_counter", COUNTER_FIELDS, "ssu"),
    row(Kind::TooManyFiles, "too_many_files", &[], ""),
];

/// The pattern of every [`Trace2Event`] that is written and read by its catalogue row alone:
/// all kinds but the hot ones (regions and data, a line per region or datum), which the
/// encoders and decoders write out by hand because a walk of the row cost them
/// measurably more (`docs/performance.md`).
///
/// The record codec's encoder and the binary writer and decoder match
/// `Trace2Event::RegionEnter { .. }`, ..., and this pattern, with no `_` arm: a new variant of
/// [`Trace2Event`] not listed here makes each of those matches fail to compile, so that the
/// kind is either added here (regular, nothing else to do) or given its own arm
/// everywhere. [`regular_kind!`](crate::regular_kind) is the same list as [`Kind`]s.
/// (The record codec's decoder reads any kind but the hot ones by its row, which is
/// all it needs, so it lists none.)
#[macro_export]
macro_rules! regular_event {
    () => {
        $crate::Trace2Event::Version { .. }
            | $crate::Trace2Event::TooManyFiles
            | $crate::Trace2Event::Start { .. }
            | $crate::Trace2Event::CmdAncestry { .. }
            | $crate::Trace2Event::CmdPath { .. }
            | $crate::Trace2Event::CmdName { .. }
            | $crate::Trace2Event::CmdMode { .. }
            | $crate::Trace2Event::Alias { .. }
            | $crate::Trace2Event::DefParam { .. }
            | $crate::Trace2Event::DefRepo { .. }
            | $crate::Trace2Event::Printf { .. }
            | $crate::Trace2Event::Error { .. }
            | $crate::Trace2Event::ChildStart(_)
            | $crate::Trace2Event::ChildExit { .. }
            | $crate::Trace2Event::ChildReady { .. }
            | $crate::Trace2Event::Exec { .. }
            | $crate::Trace2Event::ExecResult { .. }
            | $crate::Trace2Event::ThreadStart
            | $crate::Trace2Event::ThreadExit { .. }
            | $crate::Trace2Event::Timer { .. }
            | $crate::Trace2Event::Counter { .. }
            | $crate::Trace2Event::Exit { .. }
            | $crate::Trace2Event::Atexit { .. }
            | $crate::Trace2Event::Signal { .. }
    };
}

/// The pattern of every [`Kind`] that [`regular_event!`] matches: all but
/// `RegionEnter`, `RegionLeave`, `Data` and `DataJson`.
#[macro_export]
macro_rules! regular_kind {
    () => {
        $crate::Kind::Version
            | $crate::Kind::Start
            | $crate::Kind::Exit
            | $crate::Kind::Atexit
            | $crate::Kind::Signal
            | $crate::Kind::Error
            | $crate::Kind::CmdPath
            | $crate::Kind::CmdAncestry
            | $crate::Kind::CmdName
            | $crate::Kind::CmdMode
            | $crate::Kind::Alias
            | $crate::Kind::ChildStart
            | $crate::Kind::ChildExit
            | $crate::Kind::ChildReady
            | $crate::Kind::ThreadStart
            | $crate::Kind::ThreadExit
            | $crate::Kind::Exec
            | $crate::Kind::ExecResult
            | $crate::Kind::DefParam
            | $crate::Kind::DefRepo
            | $crate::Kind::Printf
            | $crate::Kind::Timer
            | $crate::Kind::ThTimer
            | $crate::Kind::Counter
            | $crate::Kind::ThCounter
            | $crate::Kind::TooManyFiles
    };
}

/// The value of one field, as [`Trace2Event::visit_fields`] hands it over and
/// [`Trace2Event::from_fields`] takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldValue<'a> {
    /// [`FieldType::Text`], [`FieldType::TextOmittedWhenEmpty`], [`FieldType::Json`].
    Text(&'a str),
    /// [`FieldType::OptText`].
    OptText(Option<&'a str>),
    /// [`FieldType::TextList`].
    TextList(&'a [&'a str]),
    /// [`FieldType::Uint`], [`FieldType::Count`], [`FieldType::Micros`],
    /// [`FieldType::Nanos`].
    Uint(u64),
    /// [`FieldType::Int`].
    Int(i64),
    /// [`FieldType::OptInt`].
    OptInt(Option<i64>),
    /// [`FieldType::Nesting`].
    Nesting(u32),
    /// [`FieldType::Code`].
    Code(i32),
    /// [`FieldType::Flag`].
    Flag(bool),
}

impl FieldValue<'_> {
    /// Whether this value has the Rust type that `ty` declares.
    pub fn fits(&self, ty: FieldType) -> bool {
        matches!(
            (self, ty),
            (FieldValue::Text(_), Text | TextOmittedWhenEmpty | Json)
                | (FieldValue::OptText(_), OptText)
                | (FieldValue::TextList(_), TextList)
                | (FieldValue::Uint(_), Uint | Count | Micros | Nanos)
                | (FieldValue::Int(_), Int)
                | (FieldValue::OptInt(_), OptInt)
                | (FieldValue::Nesting(_), Nesting)
                | (FieldValue::Code(_), Code)
                | (FieldValue::Flag(_), Flag)
        )
    }
}

/// Why [`Trace2Event::from_fields`] could not build an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The kind being built.
    pub kind: Kind,
    /// The field whose value did not fit.
    pub field: &'static str,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: field {} has a value of the wrong type",
            self.kind, self.field
        )
    }
}

impl std::error::Error for FieldError {}

/// The most fields a kind has.
pub const MAX_FIELDS: usize = 7;

/// `values` in a fixed array, with how many there are (no allocation).
#[inline(always)]
fn pad<'a, const N: usize>(values: [FieldValue<'a>; N]) -> ([FieldValue<'a>; MAX_FIELDS], usize) {
    let mut all = [FieldValue::Flag(false); MAX_FIELDS];
    all[..N].copy_from_slice(&values);
    (all, N)
}

/// `$value` with `$k` bound to the kind of `$event`: the one list of which variant is
/// which kind, for [`Trace2Event::kind`] and [`Trace2Event::name`] (each arm's value is a constant
/// the compiler folds, so `name` is one table lookup).
macro_rules! per_kind {
    ($event:expr, $k:ident => $value:expr) => {
        match $event {
            Trace2Event::Version { .. } => {
                let $k = Kind::Version;
                $value
            }
            Trace2Event::TooManyFiles => {
                let $k = Kind::TooManyFiles;
                $value
            }
            Trace2Event::Start { .. } => {
                let $k = Kind::Start;
                $value
            }
            Trace2Event::CmdAncestry { .. } => {
                let $k = Kind::CmdAncestry;
                $value
            }
            Trace2Event::CmdPath { .. } => {
                let $k = Kind::CmdPath;
                $value
            }
            Trace2Event::CmdName { .. } => {
                let $k = Kind::CmdName;
                $value
            }
            Trace2Event::CmdMode { .. } => {
                let $k = Kind::CmdMode;
                $value
            }
            Trace2Event::Alias { .. } => {
                let $k = Kind::Alias;
                $value
            }
            Trace2Event::DefParam { .. } => {
                let $k = Kind::DefParam;
                $value
            }
            Trace2Event::DefRepo { .. } => {
                let $k = Kind::DefRepo;
                $value
            }
            Trace2Event::RegionEnter { .. } => {
                let $k = Kind::RegionEnter;
                $value
            }
            Trace2Event::RegionLeave { .. } => {
                let $k = Kind::RegionLeave;
                $value
            }
            Trace2Event::Data { .. } => {
                let $k = Kind::Data;
                $value
            }
            Trace2Event::DataJson { .. } => {
                let $k = Kind::DataJson;
                $value
            }
            Trace2Event::Printf { .. } => {
                let $k = Kind::Printf;
                $value
            }
            Trace2Event::Error { .. } => {
                let $k = Kind::Error;
                $value
            }
            Trace2Event::ChildStart(_) => {
                let $k = Kind::ChildStart;
                $value
            }
            Trace2Event::ChildExit { .. } => {
                let $k = Kind::ChildExit;
                $value
            }
            Trace2Event::ChildReady { .. } => {
                let $k = Kind::ChildReady;
                $value
            }
            Trace2Event::Exec { .. } => {
                let $k = Kind::Exec;
                $value
            }
            Trace2Event::ExecResult { .. } => {
                let $k = Kind::ExecResult;
                $value
            }
            Trace2Event::ThreadStart => {
                let $k = Kind::ThreadStart;
                $value
            }
            Trace2Event::ThreadExit { .. } => {
                let $k = Kind::ThreadExit;
                $value
            }
            Trace2Event::Timer {
                per_thread: true, ..
            } => {
                let $k = Kind::ThTimer;
                $value
            }
            Trace2Event::Timer { .. } => {
                let $k = Kind::Timer;
                $value
            }
            Trace2Event::Counter {
                per_thread: true, ..
            } => {
                let $k = Kind::ThCounter;
                $value
            }
            Trace2Event::Counter { .. } => {
                let $k = Kind::Counter;
                $value
            }
            Trace2Event::Exit { .. } => {
                let $k = Kind::Exit;
                $value
            }
            Trace2Event::Atexit { .. } => {
                let $k = Kind::Atexit;
                $value
            }
            Trace2Event::Signal { .. } => {
                let $k = Kind::Signal;
                $value
            }
        }
    };
}

impl<'a> Trace2Event<'a> {
    /// The event's kind: its row of the [`CATALOGUE`].
    #[inline]
    pub fn kind(&self) -> Kind {
        per_kind!(self, k => k)
    }

    /// The event name as Trace2 writes it (its row's name).
    #[inline]
    pub fn name(&self) -> &'static str {
        per_kind!(self, k => k.name())
    }

    /// Hands every field to `visit` with its catalogue entry, in catalogue order.
    pub fn visit_fields(&self, mut visit: impl FnMut(&'static Field, FieldValue<'a>)) {
        let (values, count) = self.field_values();
        for (field, value) in self.kind().spec().fields.iter().zip(&values[..count]) {
            visit(field, *value);
        }
    }

    /// The values of every field in catalogue order, in a fixed array, and how many
    /// there are (what [`visit_fields`](Self::visit_fields) hands over, for a caller
    /// that indexes them).
    #[inline]
    pub fn field_values(&self) -> ([FieldValue<'a>; MAX_FIELDS], usize) {
        use FieldValue as V;
        match *self {
            Trace2Event::Version { exe } => pad([V::Text(exe)]),
            Trace2Event::TooManyFiles | Trace2Event::ThreadStart => pad([]),
            Trace2Event::Start { argv } => pad([V::TextList(argv)]),
            Trace2Event::CmdAncestry { ancestry } => pad([V::TextList(ancestry)]),
            Trace2Event::CmdPath { path } => pad([V::Text(path)]),
            Trace2Event::CmdName { name, hierarchy } => pad([V::Text(name), V::Text(hierarchy)]),
            Trace2Event::CmdMode { name } => pad([V::Text(name)]),
            Trace2Event::Alias { alias, argv } => pad([V::Text(alias), V::TextList(argv)]),
            Trace2Event::DefParam {
                scope,
                param,
                value,
            } => pad([V::Text(scope), V::Text(param), V::OptText(value)]),
            Trace2Event::DefRepo { repo, worktree } => pad([V::Int(repo), V::Text(worktree)]),
            Trace2Event::RegionEnter { region, nesting } => pad([
                V::OptInt(region.repo),
                V::OptText(region.category),
                V::OptText(region.label),
                V::OptText(region.msg),
                V::Nesting(nesting),
            ]),
            Trace2Event::RegionLeave {
                region,
                nesting,
                t_rel_us,
            } => pad([
                V::OptInt(region.repo),
                V::OptText(region.category),
                V::OptText(region.label),
                V::OptText(region.msg),
                V::Nesting(nesting),
                V::Uint(t_rel_us),
            ]),
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
            } => pad([
                V::OptInt(repo),
                V::Text(category),
                V::Text(key),
                V::Text(text),
                V::Nesting(nesting),
                V::Uint(t_rel_us),
            ]),
            Trace2Event::Printf { msg } => pad([V::OptText(msg)]),
            Trace2Event::Error { msg, fmt } => pad([V::OptText(msg), V::OptText(fmt)]),
            Trace2Event::ChildStart(c) => pad([
                V::Uint(c.child_id),
                V::Text(c.class),
                V::OptText(c.hook_name),
                V::OptText(c.cd),
                V::Flag(c.use_shell),
                V::Flag(c.is_git),
                V::TextList(c.argv),
            ]),
            Trace2Event::ChildExit {
                child_id,
                pid,
                code,
                elapsed_us,
            } => pad([
                V::Uint(child_id),
                V::Int(pid),
                V::Int(code),
                V::Uint(elapsed_us),
            ]),
            Trace2Event::ChildReady {
                child_id,
                pid,
                ready,
                elapsed_us,
            } => pad([
                V::Uint(child_id),
                V::Int(pid),
                V::Text(ready),
                V::Uint(elapsed_us),
            ]),
            Trace2Event::Exec { exec_id, exe, argv } => {
                pad([V::Uint(exec_id), V::OptText(exe), V::TextList(argv)])
            }
            Trace2Event::ExecResult { exec_id, code, err } => {
                pad([V::Uint(exec_id), V::Int(code), V::OptText(err)])
            }
            Trace2Event::ThreadExit { elapsed_us } => pad([V::Uint(elapsed_us)]),
            Trace2Event::Timer { timer: t, .. } => pad([
                V::Text(t.category),
                V::Text(t.name),
                V::Uint(t.intervals),
                V::Uint(t.total_ns),
                V::Uint(t.min_ns),
                V::Uint(t.max_ns),
            ]),
            Trace2Event::Counter {
                category,
                name,
                value,
                ..
            } => pad([V::Text(category), V::Text(name), V::Uint(value)]),
            Trace2Event::Exit { code } | Trace2Event::Atexit { code } => pad([V::Code(code)]),
            Trace2Event::Signal { signo } => pad([V::Code(signo)]),
        }
    }

    /// Builds an event of `kind`, asking `value` for each field of its row in catalogue
    /// order. A value of the wrong type is an error; `value`'s own errors pass through.
    pub fn from_fields<E: From<FieldError>>(
        kind: Kind,
        value: impl FnMut(&'static Field) -> Result<FieldValue<'a>, E>,
    ) -> Result<Trace2Event<'a>, E> {
        let mut fields = FieldReader {
            kind,
            fields: kind.spec().fields.iter(),
            value,
        };
        // Each getter takes the next field; `fits` has checked its type already, so the
        // `unreachable!` arm is never taken.
        macro_rules! take {
            ($variant:ident) => {
                fields.take(|v| match v {
                    FieldValue::$variant(v) => v,
                    _ => unreachable!("checked by FieldValue::fits"),
                })?
            };
        }
        Ok(match kind {
            Kind::Version => Trace2Event::Version { exe: take!(Text) },
            Kind::TooManyFiles => Trace2Event::TooManyFiles,
            Kind::Start => Trace2Event::Start {
                argv: take!(TextList),
            },
            Kind::CmdAncestry => Trace2Event::CmdAncestry {
                ancestry: take!(TextList),
            },
            Kind::CmdPath => Trace2Event::CmdPath { path: take!(Text) },
            Kind::CmdName => Trace2Event::CmdName {
                name: take!(Text),
                hierarchy: take!(Text),
            },
            Kind::CmdMode => Trace2Event::CmdMode { name: take!(Text) },
            Kind::Alias => Trace2Event::Alias {
                alias: take!(Text),
                argv: take!(TextList),
            },
            Kind::DefParam => Trace2Event::DefParam {
                scope: take!(Text),
                param: take!(Text),
                value: take!(OptText),
            },
            Kind::DefRepo => Trace2Event::DefRepo {
                repo: take!(Int),
                worktree: take!(Text),
            },
            Kind::RegionEnter => Trace2Event::RegionEnter {
                region: fields.region()?,
                nesting: take!(Nesting),
            },
            Kind::RegionLeave => Trace2Event::RegionLeave {
                region: fields.region()?,
                nesting: take!(Nesting),
                t_rel_us: take!(Uint),
            },
            Kind::Data => Trace2Event::Data {
                repo: take!(OptInt),
                category: take!(Text),
                key: take!(Text),
                value: take!(Text),
                nesting: take!(Nesting),
                t_rel_us: take!(Uint),
            },
            Kind::DataJson => Trace2Event::DataJson {
                repo: take!(OptInt),
                category: take!(Text),
                key: take!(Text),
                json: take!(Text),
                nesting: take!(Nesting),
                t_rel_us: take!(Uint),
            },
            Kind::Printf => Trace2Event::Printf {
                msg: take!(OptText),
            },
            Kind::Error => Trace2Event::Error {
                msg: take!(OptText),
                fmt: take!(OptText),
            },
            Kind::ChildStart => Trace2Event::ChildStart(ChildInfo {
                child_id: take!(Uint),
                class: take!(Text),
                hook_name: take!(OptText),
                cd: take!(OptText),
                use_shell: take!(Flag),
                is_git: take!(Flag),
                argv: take!(TextList),
            }),
            Kind::ChildExit => Trace2Event::ChildExit {
                child_id: take!(Uint),
                pid: take!(Int),
                code: take!(Int),
                elapsed_us: take!(Uint),
            },
            Kind::ChildReady => Trace2Event::ChildReady {
                child_id: take!(Uint),
                pid: take!(Int),
                ready: take!(Text),
                elapsed_us: take!(Uint),
            },
            Kind::Exec => Trace2Event::Exec {
                exec_id: take!(Uint),
                exe: take!(OptText),
                argv: take!(TextList),
            },
            Kind::ExecResult => Trace2Event::ExecResult {
                exec_id: take!(Uint),
                code: take!(Int),
                err: take!(OptText),
            },
            Kind::ThreadStart => Trace2Event::ThreadStart,
            Kind::ThreadExit => Trace2Event::ThreadExit {
                elapsed_us: take!(Uint),
            },
            Kind::Timer => fields.timer(false)?,
            Kind::ThTimer => fields.timer(true)?,
            Kind::Counter | Kind::ThCounter => Trace2Event::Counter {
                per_thread: kind == Kind::ThCounter,
                category: take!(Text),
                name: take!(Text),
                value: take!(Uint),
            },
            Kind::Exit => Trace2Event::Exit { code: take!(Code) },
            Kind::Atexit => Trace2Event::Atexit { code: take!(Code) },
            Kind::Signal => Trace2Event::Signal { signo: take!(Code) },
        })
    }
}

/// The fields of one event, read in catalogue order from a caller's `value`, each
/// checked against its row's type ([`Trace2Event::from_fields`]).
struct FieldReader<V> {
    kind: Kind,
    fields: std::slice::Iter<'static, Field>,
    value: V,
}

impl<V> FieldReader<V> {
    /// The next field's value, through `pick` (which the type check has made sure
    /// finds its variant).
    fn take<'a, E, T>(&mut self, pick: impl FnOnce(FieldValue<'a>) -> T) -> Result<T, E>
    where
        V: FnMut(&'static Field) -> Result<FieldValue<'a>, E>,
        E: From<FieldError>,
    {
        let field = self
            .fields
            .next()
            .expect("the catalogue row has as many fields as the variant");
        let got = (self.value)(field)?;
        if got.fits(field.ty) {
            Ok(pick(got))
        } else {
            Err(FieldError {
                kind: self.kind,
                field: field.name,
            }
            .into())
        }
    }

    /// A region's fields (`repo`, `category`, `label`, `msg`).
    fn region<'a, E>(&mut self) -> Result<RegionInfo<'a>, E>
    where
        V: FnMut(&'static Field) -> Result<FieldValue<'a>, E>,
        E: From<FieldError>,
    {
        let opt_text = |v| match v {
            FieldValue::OptText(v) => v,
            _ => unreachable!("checked by FieldValue::fits"),
        };
        Ok(RegionInfo {
            repo: self.take(|v| match v {
                FieldValue::OptInt(v) => v,
                _ => unreachable!("checked by FieldValue::fits"),
            })?,
            category: self.take(opt_text)?,
            label: self.take(opt_text)?,
            msg: self.take(opt_text)?,
        })
    }

    /// A `timer` or `th_timer` event's fields.
    fn timer<'a, E>(&mut self, per_thread: bool) -> Result<Trace2Event<'a>, E>
    where
        V: FnMut(&'static Field) -> Result<FieldValue<'a>, E>,
        E: From<FieldError>,
    {
        let text = |v| match v {
            FieldValue::Text(v) => v,
            _ => unreachable!("checked by FieldValue::fits"),
        };
        let uint = |v| match v {
            FieldValue::Uint(v) => v,
            _ => unreachable!("checked by FieldValue::fits"),
        };
        Ok(Trace2Event::Timer {
            per_thread,
            timer: TimerInfo {
                category: self.take(text)?,
                name: self.take(text)?,
                intervals: self.take(uint)?,
                total_ns: self.take(uint)?,
                min_ns: self.take(uint)?,
                max_ns: self.take(uint)?,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_in_kind_order_with_unique_names() {
        for (index, spec) in CATALOGUE.iter().enumerate() {
            assert_eq!(usize::from(spec.kind.id()), index + 1, "{spec:?}");
            assert_eq!(Kind::from_id(spec.kind.id()), Some(spec.kind));
            assert_eq!(Kind::from_name(spec.name), Some(spec.kind));
            assert_eq!(spec.kind.spec(), spec);
        }
        assert_eq!(Kind::from_id(0), None);
        assert_eq!(Kind::from_id(KIND_COUNT as u8 + 1), None);
        assert_eq!(Kind::from_name("future"), None);
    }

    /// The fields Event JSON does not carry are the keyless ones, and each has a type
    /// with a default for the reader to give (an absent text or a flag); every other
    /// field has a key.
    #[test]
    fn json_default_fields_are_the_keyless_ones() {
        let mut defaults = Vec::new();
        for spec in CATALOGUE {
            for field in spec.fields {
                assert_eq!(field.json_default(), field.key.is_none(), "{field:?}");
                if field.json_default() {
                    assert!(matches!(field.ty, OptText | Flag), "{field:?}");
                    defaults.push((spec.name, field.name));
                }
            }
        }
        assert!(
            defaults.contains(&("exec_result", "err"))
                && defaults.contains(&("child_start", "is_git")),
            "{defaults:?}"
        );
        assert!(defaults.len() < CATALOGUE.len(), "{defaults:?}");
    }

    /// A sample event of every kind, built from the catalogue alone.
    fn sample(kind: Kind) -> Trace2Event<'static> {
        Trace2Event::from_fields(kind, |field| {
            Ok::<_, FieldError>(match field.ty {
                Text | TextOmittedWhenEmpty | Json => FieldValue::Text(field.name),
                OptText => FieldValue::OptText(Some(field.name)),
                TextList => FieldValue::TextList(&["a", "b"]),
                Uint | Count | Micros | Nanos => FieldValue::Uint(field.name.len() as u64),
                Int => FieldValue::Int(-(field.name.len() as i64)),
                OptInt => FieldValue::OptInt(Some(7)),
                Nesting => FieldValue::Nesting(3),
                Code => FieldValue::Code(-2),
                Flag => FieldValue::Flag(true),
            })
        })
        .unwrap()
    }

    /// `from_fields` and `visit_fields` agree with the table and with each other: every
    /// kind's fields come back in order, with their types and the values put in.
    #[test]
    fn fields_round_trip_through_the_table() {
        for spec in &CATALOGUE {
            let event = sample(spec.kind);
            assert_eq!(event.kind(), spec.kind);
            assert_eq!(event.name(), spec.name);
            assert_eq!(event.nesting().is_some(), spec.nested, "{}", spec.name);
            let mut seen = Vec::new();
            event.visit_fields(|field, value| {
                assert!(value.fits(field.ty), "{}.{}", spec.name, field.name);
                seen.push((field.name, value));
            });
            let names: Vec<_> = spec.fields.iter().map(|f| f.name).collect();
            assert_eq!(seen.iter().map(|s| s.0).collect::<Vec<_>>(), names);
            let mut values = seen.iter().map(|s| s.1);
            let again = Trace2Event::from_fields(spec.kind, |_| {
                Ok::<_, FieldError>(values.next().unwrap())
            })
            .unwrap();
            assert_eq!(format!("{again:?}"), format!("{event:?}"));
        }
    }

    /// `regular_event!` and `regular_kind!` name the same kinds: every kind but
    /// regions and data.
    #[test]
    fn regular_patterns_agree() {
        for spec in &CATALOGUE {
            let hot = matches!(
                spec.kind,
                Kind::RegionEnter | Kind::RegionLeave | Kind::Data | Kind::DataJson
            );
            assert_eq!(matches!(spec.kind, regular_kind!()), !hot, "{}", spec.name);
            assert_eq!(
                matches!(sample(spec.kind), regular_event!()),
                !hot,
                "{}",
                spec.name
            );
        }
    }

    #[test]
    fn a_value_of_the_wrong_type_is_an_error() {
        let err = Trace2Event::from_fields(Kind::Exit, |_| Ok::<_, FieldError>(FieldValue::Int(1)))
            .unwrap_err();
        assert_eq!(
            err,
            FieldError {
                kind: Kind::Exit,
                field: "code"
            }
        );
        assert!(err.to_string().contains("exit: field code"));
    }
}
