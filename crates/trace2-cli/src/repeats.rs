//! Events of one process read again from another file: the flight recorder's snapshots of one
//! process (a panic writes the panic's window and then the exit's; a service may be asked for
//! several) overlap, and the later holds much of what the earlier held. Counted twice, they
//! would make one panic two errors and list each child twice.
//!
//! A binary stream names its process by a random `stream_id` that every snapshot of the process
//! keeps (a forked child starts a stream of its own). Each snapshot holds, per thread, a run of
//! the thread's events in the order it recorded them, and a thread's clock (`t_abs`) never goes
//! back. So an event of a thread is one already read when an earlier file of the same stream
//! reached at least as far on that thread: its `t_abs` is earlier than the last one read there,
//! or equal to it and among as many events at that very time as were read. Windows that do not
//! overlap are both kept (their union is what is known of the process); the flight marker (the
//! `data` line a snapshot ends with, dated when the snapshot was taken) does not move the mark,
//! since the thread named in it did not record it.

use std::collections::HashMap;

use tracing_trace2_binary::flight::{MARKER_CATEGORY, MARKER_KEY};
use tracing_trace2_record::{Record, Trace2Event};

/// How far the files read so far reached on one thread of one stream.
#[derive(Debug, Default, Clone, Copy)]
struct Reach {
    /// The latest `t_abs` read, µs.
    t_abs_us: u64,
    /// Events read at exactly that time.
    at_last: u64,
}

impl Reach {
    fn advance(&mut self, t_abs_us: u64) {
        if t_abs_us > self.t_abs_us || self.at_last == 0 {
            *self = Reach {
                t_abs_us,
                at_last: 1,
            };
        } else if t_abs_us == self.t_abs_us {
            self.at_last += 1;
        }
    }

    /// The later of the two.
    fn max(self, other: Reach) -> Reach {
        match self.t_abs_us.cmp(&other.t_abs_us) {
            std::cmp::Ordering::Less => other,
            std::cmp::Ordering::Greater => self,
            std::cmp::Ordering::Equal => Reach {
                t_abs_us: self.t_abs_us,
                at_last: self.at_last.max(other.at_last),
            },
        }
    }
}

/// One thread of one stream: where earlier files stopped, and where this one is.
#[derive(Debug, Default)]
struct ThreadReach {
    /// Its name.
    thread: String,
    /// What the files before the current one read.
    earlier: Option<Reach>,
    /// What the current file has read.
    current: Reach,
    /// Events at `earlier`'s last time passed over in the current file.
    tied_repeats: u64,
}

/// Recognises events already read from an earlier file, across the files of one command.
#[derive(Debug, Default)]
pub struct Repeats {
    /// Every thread seen, of every stream.
    threads: Vec<ThreadReach>,
    /// Where each is in `threads`, per stream id and thread name.
    index: HashMap<u64, HashMap<String, usize>>,
    /// The stream ids and threads of the last few records: a record's thread is nearly always
    /// one of them, found without hashing its name.
    recent: [Option<(u64, usize)>; RECENT],
    /// The entry of `recent` to replace next.
    next_recent: usize,
}

/// Threads remembered in [`Repeats::recent`].
const RECENT: usize = 8;

impl Repeats {
    /// No file read yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// True when `record` (of stream `stream_id`) was read from an earlier file; takes it into
    /// account either way. Call for every record of a file in decoding order, then
    /// [`Repeats::end_file`].
    pub fn repeated(&mut self, stream_id: u64, record: &Record<'_>) -> bool {
        let threads = &self.threads;
        let known = self
            .recent
            .iter()
            .flatten()
            .find(|&&(id, at)| id == stream_id && threads[at].thread == record.thread);
        let at = match known {
            Some(&(_, at)) => at,
            None => {
                let at = self.slot(stream_id, record.thread);
                self.recent[self.next_recent] = Some((stream_id, at));
                self.next_recent = (self.next_recent + 1) % RECENT;
                at
            }
        };
        let thread = &mut self.threads[at];
        let t = record.time.t_abs_us;
        let repeated = match thread.earlier {
            None => false,
            Some(earlier) if t < earlier.t_abs_us => true,
            Some(earlier) if t == earlier.t_abs_us && thread.tied_repeats < earlier.at_last => {
                thread.tied_repeats += 1;
                true
            }
            Some(_) => false,
        };
        if !is_marker(record) {
            thread.current.advance(t);
        }
        repeated
    }

    /// Where `thread` of `stream_id` is in `threads`, added when new.
    fn slot(&mut self, stream_id: u64, thread: &str) -> usize {
        let by_name = self.index.entry(stream_id).or_default();
        if let Some(&at) = by_name.get(thread) {
            return at;
        }
        let at = self.threads.len();
        by_name.insert(thread.to_owned(), at);
        self.threads.push(ThreadReach {
            thread: thread.to_owned(),
            ..ThreadReach::default()
        });
        at
    }

    /// The current file is read: what it reached counts as read for the next files.
    pub fn end_file(&mut self) {
        for thread in &mut self.threads {
            if thread.current.at_last > 0 {
                let current = std::mem::take(&mut thread.current);
                thread.earlier = Some(thread.earlier.map_or(current, |e| e.max(current)));
            }
            thread.tied_repeats = 0;
        }
    }
}

/// The `data` line that ends a flight snapshot.
fn is_marker(record: &Record<'_>) -> bool {
    matches!(record.event, Trace2Event::Data { category, key, .. }
        if category == MARKER_CATEGORY && key == MARKER_KEY)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_trace2_record::{Callsite, Timestamp};

    fn record(thread: &'static str, t_abs_us: u64, event: Trace2Event<'static>) -> Record<'static> {
        Record {
            event,
            time: Timestamp {
                wall_us: 1_000_000 + t_abs_us as i64,
                t_abs_us,
            },
            sid: "sid",
            depth: 0,
            thread,
            callsite: Callsite::default(),
            open_regions: 0,
        }
    }

    fn error(thread: &'static str, t: u64) -> Record<'static> {
        record(
            thread,
            t,
            Trace2Event::Error {
                msg: Some("e"),
                fmt: Some("e"),
            },
        )
    }

    fn marker(t: u64) -> Record<'static> {
        record(
            "main",
            t,
            Trace2Event::Data {
                repo: None,
                category: MARKER_CATEGORY,
                key: MARKER_KEY,
                value: "panic",
                nesting: 1,
                t_rel_us: t,
            },
        )
    }

    /// Which records of each file are new, file by file.
    fn new_ones(files: &[(u64, Vec<Record<'static>>)]) -> Vec<Vec<bool>> {
        let mut repeats = Repeats::new();
        files
            .iter()
            .map(|(stream, records)| {
                let new = records
                    .iter()
                    .map(|r| !repeats.repeated(*stream, r))
                    .collect();
                repeats.end_file();
                new
            })
            .collect()
    }

    #[test]
    fn an_overlapping_later_snapshot_adds_only_what_is_new() {
        let first = vec![
            error("main", 10),
            error("th01:w", 10),
            error("main", 20),
            error("main", 20),
            marker(25),
        ];
        let second = vec![
            error("main", 10),
            error("th01:w", 10),
            error("main", 20),
            error("main", 20),
            // A third event at the same microsecond the first file did not have.
            error("main", 20),
            error("th01:w", 22),
            // Recorded before the first marker's time, after its copy.
            error("main", 24),
            error("main", 30),
        ];
        assert_eq!(
            new_ones(&[(7, first), (7, second)]),
            [
                vec![true; 5],
                vec![false, false, false, false, true, true, true, true]
            ]
        );
    }

    #[test]
    fn other_streams_and_disjoint_windows_are_kept() {
        let a = vec![error("main", 10), error("main", 20)];
        let b = vec![error("main", 10), error("main", 20)];
        let later = vec![error("main", 30)];
        assert_eq!(
            new_ones(&[(1, a.clone()), (2, b), (1, later), (1, a)]),
            [
                vec![true, true],
                vec![true, true],
                vec![true],
                vec![false, false]
            ]
        );
    }
}
