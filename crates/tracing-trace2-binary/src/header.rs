//! The payloads of the STREAM, CLOCK and END frames, and the header at the start of a
//! BATCH payload.
//!
//! ```text
//! STREAM  major u8, minor u8, stream_id u64 LE, flags u, writer b, sid b, depth u,
//!         pid u, freq u, anchor_wall_us i, utc_offset_s i, event_format_version b,
//!         event_nesting u, brief u (bit 0 Normal, 1 Perf, 2 Event),
//!         declared count u, then {id u8, name b, signature b}
//! CLOCK   stream_id u64 LE, at_ticks u, utc_offset_s i, [wall_us i]
//! END     stream_id u64 LE, threads u, then {thread_index u, batches u}
//! BATCH   stream_id u64 LE, thread_index u, batch_seq u, base_ticks u,
//!         depth_at_start u (open regions + 1), thread_name b, records...
//! ```
//!
//! (`u`: varint, `i`: zigzag varint, `b`: varint length and bytes.) The session depth
//! travels in the header beside the SID rather than being counted from its slashes, so
//! that a record's `depth` always comes back as it was.

use crate::frame;
use crate::varint::{self, ByteCursor};

/// Settings the writer's text targets used, so a default decode writes what they wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TextDefaults {
    /// `GIT_TRACE2_BRIEF` of the Normal target.
    pub normal_brief: bool,
    /// `GIT_TRACE2_PERF_BRIEF` of the Perf target.
    pub perf_brief: bool,
    /// `GIT_TRACE2_EVENT_BRIEF` of the Event target.
    pub event_brief: bool,
    /// `GIT_TRACE2_EVENT_NESTING` of the Event target.
    pub event_nesting: u32,
}

impl Default for TextDefaults {
    /// Git's defaults: nothing brief, Event nesting 2.
    fn default() -> Self {
        TextDefaults {
            normal_brief: false,
            perf_brief: false,
            event_brief: false,
            event_nesting: 2,
        }
    }
}

/// A kind declared by a stream of a later minor version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeclaredKind {
    /// The kind in head bytes.
    pub id: u8,
    /// Its event name.
    pub name: String,
    /// Its argument signature (type codes of [`crate::spec`]).
    pub signature: String,
}

/// Everything a decoder needs to know about one process's stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamHeader {
    /// Format major version.
    pub major: u8,
    /// Format minor version.
    pub minor: u8,
    /// Random id tagging every frame of the stream.
    pub stream_id: u64,
    /// Stream flags; none are defined in 1.0.
    pub flags: u64,
    /// The writing library and its version.
    pub writer: String,
    /// The full session id.
    pub sid: String,
    /// The process depth in the session tree.
    pub depth: u32,
    /// The process id.
    pub pid: u32,
    /// Ticks per second (1 000 000: ticks are `t_abs` microseconds).
    pub freq: u64,
    /// Unix µs at tick 0: a record's wall time is this plus its `t_abs`.
    pub anchor_wall_us: i64,
    /// The local offset east of UTC, in seconds, for Normal and Perf times of day.
    pub utc_offset_s: i32,
    /// The Event format's `evt` version the writer's Event target prints.
    pub event_format_version: String,
    /// The writer's text target settings.
    pub defaults: TextDefaults,
    /// Kinds beyond the baseline of the major version.
    pub declared: Vec<DeclaredKind>,
}

/// The stream-header flags this decoder understands.
pub const KNOWN_FLAGS: u64 = 0;

fn put_u(out: &mut Vec<u8>, value: u64) {
    let mut buf = [0; varint::MAX_LEN];
    let n = varint::encode(&mut buf, value);
    out.extend_from_slice(&buf[..n]);
}

fn put_i(out: &mut Vec<u8>, value: i64) {
    put_u(out, varint::zigzag(value));
}

fn put_b(out: &mut Vec<u8>, bytes: &[u8]) {
    put_u(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

impl StreamHeader {
    /// Appends this header as a whole STREAM frame.
    pub fn write_frame(&self, out: &mut Vec<u8>) {
        // The fixed fields and the three texts' bytes, in one allocation where `out`
        // is new (it would otherwise grow four times).
        let texts = self.writer.len() + self.sid.len() + self.event_format_version.len();
        out.reserve(frame::OVERHEAD + 64 + texts + 32 * self.declared.len());
        let start = frame::begin(out, frame::kind::STREAM);
        out.push(self.major);
        out.push(self.minor);
        out.extend_from_slice(&self.stream_id.to_le_bytes());
        put_u(out, self.flags);
        put_b(out, self.writer.as_bytes());
        put_b(out, self.sid.as_bytes());
        put_u(out, u64::from(self.depth));
        put_u(out, u64::from(self.pid));
        put_u(out, self.freq);
        put_i(out, self.anchor_wall_us);
        put_i(out, i64::from(self.utc_offset_s));
        put_b(out, self.event_format_version.as_bytes());
        put_u(out, u64::from(self.defaults.event_nesting));
        let d = &self.defaults;
        let brief = u64::from(d.normal_brief) | u64::from(d.perf_brief) << 1;
        put_u(out, brief | u64::from(d.event_brief) << 2);
        put_u(out, self.declared.len() as u64);
        for kind in &self.declared {
            out.push(kind.id);
            put_b(out, kind.name.as_bytes());
            put_b(out, kind.signature.as_bytes());
        }
        frame::seal(out, start);
    }

    /// Reads a STREAM payload. Fields a later minor version appends are ignored.
    pub fn parse(payload: &[u8]) -> Option<StreamHeader> {
        let mut r = ByteCursor::new(payload);
        let major = r.u8()?;
        let minor = r.u8()?;
        let stream_id = r.u64_le()?;
        let flags = r.uvarint()?;
        let writer = r.str()?.to_owned();
        let sid = r.str()?.to_owned();
        let depth = r.u32var()?;
        let pid = r.u32var()?;
        let freq = r.uvarint()?;
        let anchor_wall_us = r.ivarint()?;
        let utc_offset_s = i32::try_from(r.ivarint()?).ok()?;
        let event_format_version = r.str()?.to_owned();
        let event_nesting = r.u32var()?;
        let brief = r.uvarint()?;
        let count = r.uvarint()?;
        let mut declared = Vec::new();
        for _ in 0..count {
            declared.push(DeclaredKind {
                id: r.u8()?,
                name: r.str()?.to_owned(),
                signature: r.str()?.to_owned(),
            });
        }
        Some(StreamHeader {
            major,
            minor,
            stream_id,
            flags,
            writer,
            sid,
            depth,
            pid,
            freq,
            anchor_wall_us,
            utc_offset_s,
            event_format_version,
            defaults: TextDefaults {
                normal_brief: brief & 1 != 0,
                perf_brief: brief & 2 != 0,
                event_brief: brief & 4 != 0,
                event_nesting,
            },
            declared,
        })
    }
}

/// A CLOCK frame: from `at_ticks` on, this UTC offset (and wall anchor) applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockChange {
    /// The stream it belongs to.
    pub stream_id: u64,
    /// The first tick it applies to.
    pub at_ticks: u64,
    /// The local offset east of UTC, in seconds.
    pub utc_offset_s: i32,
    /// The wall time at `at_ticks`, when the wall clock was re-anchored.
    pub wall_us: Option<i64>,
}

impl ClockChange {
    /// Appends this change as a whole CLOCK frame.
    pub fn write_frame(&self, out: &mut Vec<u8>) {
        let start = frame::begin(out, frame::kind::CLOCK);
        out.extend_from_slice(&self.stream_id.to_le_bytes());
        put_u(out, self.at_ticks);
        put_i(out, i64::from(self.utc_offset_s));
        if let Some(wall) = self.wall_us {
            put_i(out, wall);
        }
        frame::seal(out, start);
    }

    /// Reads a CLOCK payload.
    pub fn parse(payload: &[u8]) -> Option<ClockChange> {
        let mut r = ByteCursor::new(payload);
        let stream_id = r.u64_le()?;
        let at_ticks = r.uvarint()?;
        let utc_offset_s = i32::try_from(r.ivarint()?).ok()?;
        let wall_us = if r.is_empty() {
            None
        } else {
            Some(r.ivarint()?)
        };
        Some(ClockChange {
            stream_id,
            at_ticks,
            utc_offset_s,
            wall_us,
        })
    }
}

/// An END frame: the stream ended cleanly, and each listed thread wrote this many
/// batches (sequence numbers `0..batches`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct End {
    /// The stream it belongs to.
    pub stream_id: u64,
    /// `(thread_index, batches written)` per thread.
    pub threads: Vec<(u64, u64)>,
}

impl End {
    /// Appends this end as a whole END frame.
    pub fn write_frame(&self, out: &mut Vec<u8>) {
        // At most two 10-byte varints a thread: one allocation where `out` is new.
        out.reserve(frame::OVERHEAD + 8 + varint::MAX_LEN * (1 + 2 * self.threads.len()));
        let start = frame::begin(out, frame::kind::END);
        out.extend_from_slice(&self.stream_id.to_le_bytes());
        put_u(out, self.threads.len() as u64);
        for &(thread, batches) in &self.threads {
            put_u(out, thread);
            put_u(out, batches);
        }
        frame::seal(out, start);
    }

    /// Reads an END payload.
    pub fn parse(payload: &[u8]) -> Option<End> {
        let mut r = ByteCursor::new(payload);
        let stream_id = r.u64_le()?;
        let count = r.uvarint()?;
        // Each entry takes at least two bytes: a count beyond that is damage.
        if count > r.remaining() as u64 / 2 {
            return None;
        }
        let mut threads = Vec::with_capacity(count as usize);
        for _ in 0..count {
            threads.push((r.uvarint()?, r.uvarint()?));
        }
        Some(End { stream_id, threads })
    }
}

/// The fixed part of a BATCH payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    /// The stream it belongs to.
    pub stream_id: u64,
    /// The writing thread, numbered in the order threads first wrote to the stream.
    pub thread_index: u64,
    /// The batch's number on its thread, from 0.
    pub batch_seq: u64,
    /// Ticks of the batch's first event.
    pub base_ticks: u64,
    /// The thread's open regions when the batch began.
    pub open_at_start: u32,
    /// Where the thread name starts in the payload, and its length.
    pub thread_name: (usize, usize),
    /// Where the records start in the payload.
    pub records: usize,
}

impl BatchHeader {
    /// Reads the header at the start of a BATCH payload.
    pub fn parse(payload: &[u8]) -> Option<BatchHeader> {
        let mut r = ByteCursor::new(payload);
        let stream_id = r.u64_le()?;
        let thread_index = r.uvarint()?;
        let batch_seq = r.uvarint()?;
        let base_ticks = r.uvarint()?;
        let depth = r.uvarint()?;
        let open_at_start = u32::try_from(depth.checked_sub(1)?).ok()?;
        let thread_name = r.span()?;
        std::str::from_utf8(&payload[thread_name.0..thread_name.0 + thread_name.1]).ok()?;
        Some(BatchHeader {
            stream_id,
            thread_index,
            batch_seq,
            base_ticks,
            open_at_start,
            thread_name,
            records: r.pos(),
        })
    }
}

/// The stream id at the start of a CLOCK, END or BATCH payload.
pub fn stream_id_of(payload: &[u8]) -> Option<u64> {
    ByteCursor::new(payload).u64_le()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(frame_bytes: &[u8]) -> &[u8] {
        match frame::check(frame_bytes) {
            frame::Check::Frame { len, .. } => &frame_bytes[frame::HEADER_LEN..][..len],
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn stream_header_round_trips() {
        let header = StreamHeader {
            major: 1,
            minor: 3,
            stream_id: u64::MAX - 7,
            flags: 0,
            writer: "tracing-trace2/0.1.0".into(),
            sid: "20260101T000000.000000Z-H01234567-P0000abcd/x".into(),
            depth: 1,
            pid: 43981,
            freq: 1_000_000,
            anchor_wall_us: -12,
            utc_offset_s: -19800,
            event_format_version: "4".into(),
            defaults: TextDefaults {
                normal_brief: true,
                perf_brief: false,
                event_brief: true,
                event_nesting: 100,
            },
            declared: vec![DeclaredKind {
                id: 0x20,
                name: "future".into(),
                signature: "usb".into(),
            }],
        };
        let mut out = Vec::new();
        header.write_frame(&mut out);
        assert_eq!(StreamHeader::parse(payload(&out)), Some(header.clone()));
        // Every cut of the payload is refused, not misread.
        let p = payload(&out);
        for cut in 0..p.len() {
            assert_eq!(StreamHeader::parse(&p[..cut]), None, "{cut}");
        }
    }

    #[test]
    fn clock_and_end_round_trip() {
        for change in [
            ClockChange {
                stream_id: 9,
                at_ticks: 5_000_000,
                utc_offset_s: 3600,
                wall_us: None,
            },
            ClockChange {
                stream_id: 9,
                at_ticks: 1,
                utc_offset_s: 0,
                wall_us: Some(-1),
            },
        ] {
            let mut out = Vec::new();
            change.write_frame(&mut out);
            assert_eq!(ClockChange::parse(payload(&out)), Some(change));
        }
        let end = End {
            stream_id: 3,
            threads: vec![(0, 12), (1, 0), (7, u64::MAX)],
        };
        let mut out = Vec::new();
        end.write_frame(&mut out);
        assert_eq!(End::parse(payload(&out)), Some(end));
        // A thread count far beyond the bytes left is refused before any allocation.
        assert_eq!(
            End::parse(&[0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0x7F]),
            None
        );
    }
}
