//! Random records: a deterministic generator (a failure can be replayed from its seed)
//! and records of every event kind of the catalogue (built from its rows, so a new kind
//! is generated without code here) with edge values: empty and absent texts, quotes,
//! backslashes, control bytes, multi-byte characters, 0 and the integer limits.

use tracing_trace2_record::catalogue::{
    CATALOGUE, FieldError, FieldType, FieldValue, KIND_COUNT, Kind,
};
use tracing_trace2_record::{Callsite, Record, Timestamp, Trace2Event};

/// A small deterministic generator (xorshift64*), so a failure can be replayed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Picks one of `items`.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    pub fn bool(&mut self) -> bool {
        self.next_u64() & 1 == 1
    }

    /// Numbers with the edges over-represented.
    pub fn u64(&mut self) -> u64 {
        match self.below(6) {
            0 => 0,
            1 => u64::MAX,
            2 => self.below(10),
            _ => self.next_u64() >> self.below(64),
        }
    }

    pub fn i64(&mut self) -> i64 {
        match self.below(5) {
            0 => -1,
            1 => i64::MIN,
            2 => i64::MAX,
            _ => self.next_u64() as i64 >> self.below(64),
        }
    }

    /// Small counts: depth, open regions and nesting are drawn as that many dots or
    /// indents by the formats.
    pub fn small(&mut self) -> u32 {
        self.below(40) as u32
    }

    /// Text with what the formats must escape or quote: quotes, backslashes, control
    /// bytes, spaces, multi-byte characters; sometimes empty.
    pub fn string(&mut self) -> String {
        const PIECES: &[&str] = &[
            "a", "Z", "0", " ", "\"", "'", "\\", "\n", "\t", "\u{1}", "\u{7f}", "é", "日本", "🦀",
            "/", ":", "=", "{", "}", "%s", "git",
        ];
        let len = self.below(12);
        (0..len)
            .map(|_| PIECES[self.below(PIECES.len() as u64) as usize])
            .collect()
    }

    pub fn opt_string(&mut self) -> Option<String> {
        self.bool().then(|| self.string())
    }

    pub fn list(&mut self) -> Vec<String> {
        (0..self.below(5)).map(|_| self.string()).collect()
    }
}

/// The owned inputs of one random record; [`Owned::record`] borrows from it. Its
/// `list` is the argument list: borrow it as `&[&str]` and pass that in.
#[derive(Clone, Debug)]
pub struct Owned {
    pub s: Vec<String>,
    pub o: Vec<Option<String>>,
    pub list: Vec<String>,
    pub n: Vec<u64>,
    pub i: Vec<i64>,
    pub b: Vec<bool>,
    pub kind: usize,
    pub wall_us: i64,
    pub t_abs_us: u64,
    pub depth: u32,
    pub open: u32,
    pub line: u32,
    /// A thread name: `main` three times in four, else arbitrary text (for
    /// [`Owned::record_in`]).
    pub thread: String,
}

/// How many kinds `event` knows: the rows of the catalogue.
pub const KINDS: usize = KIND_COUNT;

impl Owned {
    pub fn new(rng: &mut Rng, kind: usize) -> Owned {
        Owned {
            s: (0..8).map(|_| rng.string()).collect(),
            o: (0..6).map(|_| rng.opt_string()).collect(),
            list: rng.list(),
            n: (0..6).map(|_| rng.u64()).collect(),
            i: (0..4).map(|_| rng.i64()).collect(),
            b: (0..4).map(|_| rng.bool()).collect(),
            kind,
            // Any time between 1970 and 2100: the formats print a calendar date.
            wall_us: rng.below(4_102_444_800_000_000) as i64,
            t_abs_us: rng.u64() >> 8,
            depth: rng.small(),
            open: rng.small(),
            line: rng.next_u64() as u32,
            thread: if rng.below(4) == 0 {
                rng.string()
            } else {
                "main".to_owned()
            },
        }
    }

    /// The kind of this record: row `kind` of the catalogue.
    pub fn catalogue_kind(&self) -> Kind {
        CATALOGUE[self.kind].kind
    }

    /// The event, built from the catalogue's row: each field takes the next unused
    /// value of its type from the pools (`nesting` is kept small, as the formats draw
    /// it; a `repo` is present when `b[0]` says so).
    pub fn event<'a>(&'a self, list: &'a [&'a str]) -> Trace2Event<'a> {
        let (mut text, mut opt, mut uint, mut int, mut flag) = (0, 0, 0, 1, 1);
        let next = |i: &mut usize| {
            *i += 1;
            *i - 1
        };
        Trace2Event::from_fields(self.catalogue_kind(), |field| {
            Ok::<_, FieldError>(match field.ty {
                FieldType::Text | FieldType::TextOmittedWhenEmpty | FieldType::Json => {
                    FieldValue::Text(&self.s[next(&mut text)])
                }
                FieldType::OptText => FieldValue::OptText(self.o[next(&mut opt)].as_deref()),
                FieldType::TextList => FieldValue::TextList(list),
                FieldType::Uint | FieldType::Count | FieldType::Micros | FieldType::Nanos => {
                    FieldValue::Uint(self.n[next(&mut uint)])
                }
                FieldType::Int => FieldValue::Int(self.i[next(&mut int) % 3]),
                FieldType::OptInt => FieldValue::OptInt(self.b[0].then_some(self.i[0])),
                FieldType::Nesting => FieldValue::Nesting((self.n[5] % 12) as u32),
                FieldType::Code => FieldValue::Code(self.i[3] as i32),
                FieldType::Flag => FieldValue::Flag(self.b[next(&mut flag)]),
            })
        })
        .expect("the pools hold a value of every type")
    }

    /// The argument list, to borrow for [`Owned::record`] and [`Owned::record_in`].
    pub fn list_refs(&self) -> Vec<&str> {
        self.list.iter().map(String::as_str).collect()
    }

    /// The record in the session `sid` at `depth`, on [`Owned::thread`] (for streams that
    /// keep one session, as a process does).
    pub fn record_in<'a>(&'a self, list: &'a [&'a str], sid: &'a str, depth: u32) -> Record<'a> {
        Record {
            sid,
            depth,
            thread: &self.thread,
            ..self.record(list)
        }
    }

    pub fn record<'a>(&'a self, list: &'a [&'a str]) -> Record<'a> {
        Record {
            event: self.event(list),
            time: Timestamp {
                wall_us: self.wall_us,
                t_abs_us: self.t_abs_us,
            },
            sid: &self.s[6],
            depth: self.depth,
            thread: &self.s[7],
            callsite: Callsite {
                file: self.o[5].as_deref(),
                line: self.line,
            },
            open_regions: self.open,
        }
    }
}
