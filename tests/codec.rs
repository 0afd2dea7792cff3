//! The binary record encoding round-trips: for every event variant, with arbitrary
//! strings and numbers, a decoded record is field for field the record that was encoded,
//! and the three formats (brief and not) render it to exactly the same bytes. That is
//! what lets the deferred writer format on another thread what the traced thread saw.

use tracing_trace2_core::codec::{self, Decoder};
use tracing_trace2_core::{
    Callsite, ChildInfo, Event, Format, Record, RegionInfo, TimerInfo, Timestamp,
};
use tracing_trace2_event::EventFormat;
use tracing_trace2_normal::NormalFormat;
use tracing_trace2_perf::PerfFormat;

/// A small deterministic generator (xorshift64*), so a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn bool(&mut self) -> bool {
        self.next() & 1 == 1
    }

    /// Numbers with the edges over-represented.
    fn u64(&mut self) -> u64 {
        match self.below(6) {
            0 => 0,
            1 => u64::MAX,
            2 => self.below(10),
            _ => self.next() >> self.below(64),
        }
    }

    fn i64(&mut self) -> i64 {
        match self.below(5) {
            0 => -1,
            1 => i64::MIN,
            2 => i64::MAX,
            _ => self.next() as i64 >> self.below(64),
        }
    }

    /// Small counts: depth, open regions and nesting are drawn as that many dots or
    /// indents by the formats.
    fn small(&mut self) -> u32 {
        self.below(40) as u32
    }

    /// Text with what the formats must escape or quote: quotes, backslashes, control
    /// bytes, spaces, multi-byte characters; sometimes empty.
    fn string(&mut self) -> String {
        const PIECES: &[&str] = &[
            "a", "Z", "0", " ", "\"", "'", "\\", "\n", "\t", "\u{1}", "\u{7f}", "é", "日本", "🦀",
            "/", ":", "=", "{", "}", "%s", "git",
        ];
        let len = self.below(12);
        (0..len)
            .map(|_| PIECES[self.below(PIECES.len() as u64) as usize])
            .collect()
    }

    fn opt_string(&mut self) -> Option<String> {
        self.bool().then(|| self.string())
    }

    fn list(&mut self) -> Vec<String> {
        (0..self.below(5)).map(|_| self.string()).collect()
    }
}

/// The owned inputs of one record; `record` borrows from it.
struct Owned {
    s: Vec<String>,
    o: Vec<Option<String>>,
    list: Vec<String>,
    n: Vec<u64>,
    i: Vec<i64>,
    b: Vec<bool>,
    kind: usize,
    wall_us: i64,
    t_abs_us: u64,
    depth: u32,
    open: u32,
    line: u32,
}

/// How many kinds `event` knows: one per `Event` variant, plus the per-thread forms of
/// `timer` and `counter`.
const KINDS: usize = 30;

impl Owned {
    fn new(rng: &mut Rng, kind: usize) -> Owned {
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
            line: rng.next() as u32,
        }
    }

    fn event<'a>(&'a self, list: &'a [&'a str]) -> Event<'a> {
        let s = |k: usize| self.s[k].as_str();
        let o = |k: usize| self.o[k].as_deref();
        let repo = self.b[0].then_some(self.i[0]);
        let region = RegionInfo {
            repo,
            category: o(0),
            label: o(1),
            msg: o(2),
        };
        let nesting = (self.n[5] % 12) as u32;
        match self.kind {
            0 => Event::Version { exe: s(0) },
            1 => Event::TooManyFiles,
            2 => Event::Start { argv: list },
            3 => Event::CmdAncestry { ancestry: list },
            4 => Event::CmdPath { path: s(0) },
            5 => Event::CmdName {
                name: s(0),
                hierarchy: s(1),
            },
            6 => Event::CmdMode { name: s(0) },
            7 => Event::Alias {
                alias: s(0),
                argv: list,
            },
            8 => Event::DefParam {
                scope: s(0),
                param: s(1),
                value: o(0),
            },
            9 => Event::DefRepo {
                repo: self.i[0],
                worktree: s(0),
            },
            10 => Event::RegionEnter { region, nesting },
            11 => Event::RegionLeave {
                region,
                nesting,
                t_rel_us: self.n[0],
            },
            12 => Event::Data {
                repo,
                category: s(0),
                key: s(1),
                value: s(2),
                nesting,
                t_rel_us: self.n[0],
            },
            13 => Event::DataJson {
                repo,
                category: s(0),
                key: s(1),
                json: s(2),
                nesting,
                t_rel_us: self.n[0],
            },
            14 => Event::Printf { msg: o(0) },
            15 => Event::Error {
                msg: o(0),
                fmt: o(1),
            },
            16 => Event::ChildStart(ChildInfo {
                child_id: self.n[0],
                class: s(0),
                hook_name: o(0),
                cd: o(1),
                use_shell: self.b[1],
                is_git: self.b[2],
                argv: list,
            }),
            17 => Event::ChildExit {
                child_id: self.n[0],
                pid: self.i[1],
                code: self.i[2],
                elapsed_us: self.n[1],
            },
            18 => Event::ChildReady {
                child_id: self.n[0],
                pid: self.i[1],
                ready: s(0),
                elapsed_us: self.n[1],
            },
            19 => Event::Exec {
                exec_id: self.n[0],
                exe: o(0),
                argv: list,
            },
            20 => Event::ExecResult {
                exec_id: self.n[0],
                code: self.i[1],
                err: o(0),
            },
            21 => Event::ThreadStart,
            22 => Event::ThreadExit {
                elapsed_us: self.n[0],
            },
            23 | 24 => Event::Timer {
                per_thread: self.kind == 24,
                timer: TimerInfo {
                    category: s(0),
                    name: s(1),
                    intervals: self.n[0],
                    total_ns: self.n[1],
                    min_ns: self.n[2],
                    max_ns: self.n[3],
                },
            },
            25 | 26 => Event::Counter {
                per_thread: self.kind == 26,
                category: s(0),
                name: s(1),
                value: self.n[0],
            },
            27 => Event::Exit {
                code: self.i[3] as i32,
            },
            28 => Event::Atexit {
                code: self.i[3] as i32,
            },
            29 => Event::Signal {
                signo: self.i[3] as i32,
            },
            other => panic!("no event kind {other}"),
        }
    }

    fn record<'a>(&'a self, list: &'a [&'a str]) -> Record<'a> {
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

fn formats() -> Vec<(&'static str, Box<dyn Format>)> {
    vec![
        (
            "normal",
            Box::new(NormalFormat::new().with_utc_offset(3600)),
        ),
        (
            "normal-brief",
            Box::new(NormalFormat::new().with_brief(true).with_utc_offset(-19800)),
        ),
        ("perf", Box::new(PerfFormat::new().with_utc_offset(-7200))),
        (
            "perf-brief",
            Box::new(PerfFormat::new().with_brief(true).with_utc_offset(0)),
        ),
        ("event", Box::new(EventFormat::new().with_max_nesting(100))),
        (
            "event-brief",
            Box::new(EventFormat::new().with_brief(true).with_max_nesting(2)),
        ),
    ]
}

fn render(format: &dyn Format, record: &Record<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    format.format(record, &mut out);
    out
}

#[test]
fn every_variant_round_trips_through_all_formats() {
    let formats = formats();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut names = std::collections::BTreeSet::new();
    let mut lines = 0;
    let mut not_written = std::collections::BTreeMap::new();
    let mut decoder = Decoder::new();
    for kind in 0..KINDS {
        for _ in 0..300 {
            let owned = Owned::new(&mut rng, kind);
            let list: Vec<&str> = owned.list.iter().map(String::as_str).collect();
            let record = owned.record(&list);
            names.insert(record.event.name());
            // Behind other bytes, as records follow each other in a queue message.
            let mut buf = b"prefix".to_vec();
            codec::encode(&record, &mut buf);
            let mut decoded_list = Vec::new();
            let (back, rest) = codec::decode(&buf[6..], &mut decoded_list).unwrap();
            assert!(rest.is_empty());
            // Every field, not only those some format prints.
            assert_eq!(format!("{back:?}"), format!("{record:?}"));
            for (name, format) in &formats {
                let want = render(format.as_ref(), &record);
                lines += usize::from(!want.is_empty());
                // The deferred writer skips what a format says it does not write: that
                // must never be a line.
                if !format.writes(&record) {
                    assert!(want.is_empty(), "{name} writes {record:?}");
                    *not_written.entry(*name).or_insert(0) += 1;
                }
                assert_eq!(
                    String::from_utf8_lossy(&render(format.as_ref(), &back)),
                    String::from_utf8_lossy(&want),
                    "{name}: {record:?}"
                );
            }
            // The same through the reusable decoder.
            let mut seen = 0;
            decoder
                .replay(&buf[6..], |r| {
                    seen += 1;
                    assert_eq!(format!("{r:?}"), format!("{record:?}"));
                })
                .unwrap();
            assert_eq!(seen, 1);
        }
    }
    // Every variant (and the per-thread timer and counter) was generated ...
    assert_eq!(names.len(), KINDS, "{names:?}");
    // ... and most records render to a line in most formats.
    assert!(lines > KINDS * 300 * 3, "{lines}");
    // Normal skips regions, data and thread lines; Event skips deep nesting.
    for name in ["normal", "normal-brief", "event-brief"] {
        assert!(
            not_written.get(name).is_some_and(|&n| n > 300),
            "{not_written:?}"
        );
    }
}
