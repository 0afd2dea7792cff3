//! A snapshot: the ring's frames made into an ordinary t2b stream and written to a file.
//!
//! Per stream: its STREAM frame, its CLOCK frames, its `version`/`start` batch, the
//! ring's batches in the order they were written, then (in the newest stream) a marker
//! batch naming the trigger, and an END frame. Each thread's batches are numbered again
//! from 0, so that the batches evicted before the window do not read as lost: the file
//! decodes as a complete stream (`trace2 decode` reports no damage). The marker is a
//! `data` event on thread `main`, category [`MARKER_CATEGORY`], key
//! [`MARKER_KEY`], value the trigger's name; a snapshot taken for a non-zero exit ends
//! with the process's own `exit` and `atexit` instead.
//!
//! The file is written under a temporary name in the directory and renamed when
//! complete, so a reader never sees a torn snapshot.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::encode::BatchEncoder;
use crate::flight::ring::{HeaderFacts, RingCopy, RingFrame, RingView, StreamAside};
use crate::frame;
use crate::header::{BatchHeader, End, StreamHeader};
use crate::record::{Callsite, Record, Timestamp, Trace2Event};
use crate::varint::{self, ByteCursor};
use crate::writer::HELD_MAX;

/// The category of a snapshot's marker `data` event.
pub const MARKER_CATEGORY: &str = "flight";
/// The key of a snapshot's marker `data` event; its value is the trigger's name.
pub const MARKER_KEY: &str = "trigger";

/// Writes the t2b bytes of a snapshot of `copy` to `out`, ending with a marker for
/// `marker` (a trigger name) unless it is `None`. `now_us` is the marker's time (µs
/// since the process start).
pub(crate) fn assemble(
    copy: &RingCopy,
    marker: Option<&str>,
    now_us: u64,
    out: &mut (impl Write + ?Sized),
) -> io::Result<()> {
    let written: Vec<&StreamAside> = copy
        .streams
        .iter()
        .filter(|s| {
            s.header.is_some()
                && (s.first_batch.is_some()
                    || copy.frames.iter().any(|f| f.stream_id == s.stream_id))
        })
        .collect();
    for (i, stream) in written.iter().enumerate() {
        let newest = i + 1 == written.len();
        write_stream(out, stream, &copy.frames, marker.filter(|_| newest), now_us)?;
    }
    Ok(())
}

fn write_stream(
    out: &mut (impl Write + ?Sized),
    stream: &StreamAside,
    frames: &[RingFrame],
    marker: Option<&str>,
    now_us: u64,
) -> io::Result<()> {
    let Some(header_frame) = &stream.header else {
        return Ok(());
    };
    out.write_all(header_frame)?;
    for clock in &stream.clocks {
        out.write_all(clock)?;
    }
    // Per thread: the batches written so far, which numbers the next one.
    let mut counts: BTreeMap<u64, u64> = BTreeMap::new();
    let mine = stream
        .first_batch
        .iter()
        .chain(frames.iter().filter(|f| f.stream_id == stream.stream_id));
    let mut head = Vec::with_capacity(64);
    for batch in mine {
        let seq = counts.entry(batch.thread_index).or_insert(0);
        if let Some((records, crc)) = renumber(&batch.bytes, *seq, &mut head) {
            out.write_all(&head)?;
            out.write_all(records)?;
            out.write_all(&crc)?;
            *seq += 1;
        }
    }
    let mut tail = Vec::new();
    if let Some(trigger) = marker
        && let Some(header) = parse_header(header_frame)
    {
        let thread_index = counts.keys().next_back().map_or(0, |last| last + 1);
        marker_batch(&mut tail, &header, thread_index, trigger, now_us);
        counts.insert(thread_index, 1);
    }
    End {
        stream_id: stream.stream_id,
        threads: counts.into_iter().collect(),
    }
    .write_frame(&mut tail);
    out.write_all(&tail)
}

fn parse_header(frame_bytes: &[u8]) -> Option<StreamHeader> {
    match frame::check(frame_bytes) {
        frame::Check::Frame { len, .. } => {
            StreamHeader::parse(&frame_bytes[frame::HEADER_LEN..][..len])
        }
        _ => None,
    }
}

/// The batch frame `bytes` with its batch number changed to `seq`, in three pieces:
/// the new start of the frame (put in `head`), the unchanged records (borrowed from
/// `bytes`) and the new CRC, made as [`renumber_fixed`] makes them (a snapshot of a
/// full window does not checksum it all again).
fn renumber<'a>(bytes: &'a [u8], seq: u64, head: &mut Vec<u8>) -> Option<(&'a [u8], [u8; 4])> {
    let mut fixed = [0u8; HEAD_MAX];
    let (n, records, crc) = renumber_fixed(bytes, seq, &mut fixed)?;
    head.clear();
    head.extend_from_slice(&fixed[..n]);
    Some((records, crc))
}

/// Appends a batch of one `data` event naming the trigger, on a thread of its own.
fn marker_batch(
    out: &mut Vec<u8>,
    header: &StreamHeader,
    thread_index: u64,
    trigger: &str,
    now_us: u64,
) {
    let mut enc = BatchEncoder::new(0, header.anchor_wall_us);
    enc.rebind(header.stream_id, 0, thread_index);
    let wall_us = tracing_trace2_dst::clock::start()
        .wall_us()
        .saturating_add(i64::try_from(now_us).unwrap_or(i64::MAX));
    let record = marker_record(&header.sid, header.depth, trigger, now_us, wall_us);
    let mut spilled = Vec::new();
    enc.encode(&record, |frame| spilled.extend_from_slice(frame));
    out.extend_from_slice(&spilled);
    if !enc.is_empty() {
        out.extend_from_slice(enc.seal());
    }
}

/// A snapshot's file name: the snapshot's UTC time (so names sort), the process's own
/// session id component, the id of the process writing it (a `fork`ed child keeps its
/// parent's session id: the pid keeps live processes apart), a counter (unique within
/// the process) and the trigger.
pub(crate) fn file_name(wall_us: i64, sid: &str, pid: u32, number: u64, trigger: &str) -> String {
    let when: String = crate::record::text::utc_datetime_text(wall_us)
        .iter()
        .filter(|b| !matches!(b, b'-' | b':'))
        .map(|&b| char::from(b))
        .collect();
    let own = sid.rsplit('/').next().unwrap_or_default();
    let own: String = own
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{when}-{own}-{pid}-{number:03}-{trigger}.t2b")
}

/// Writes `dir/name` with `fill`: under a temporary name first, created exclusively,
/// renamed when complete. The temporary file is removed after a failure only when this
/// call created it: a name taken (`AlreadyExists`) is another writer's file.
pub(crate) fn write_file(
    dir: &Path,
    name: &str,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<PathBuf> {
    let path = dir.join(name);
    let temp = dir.join(format!(".{name}.tmp"));
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)?;
    let mut out = io::BufWriter::with_capacity(256 << 10, file);
    let result = fill(&mut out)
        .and_then(|()| out.flush())
        .and_then(|()| fs::rename(&temp, &path));
    if let Err(err) = result {
        let _ = fs::remove_file(&temp);
        return Err(err);
    }
    Ok(path)
}

/// The session id recorded in the newest stream of `copy`, for the file name.
pub(crate) fn newest_sid(copy: &RingCopy) -> Option<String> {
    copy.streams
        .iter()
        .rev()
        .find_map(|s| parse_header(s.header.as_deref()?))
        .map(|h| h.sid)
}

/// Why a snapshot taken in place stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(unix), allow(dead_code))] // used by the `SIGUSR2` handler (Unix)
pub(crate) enum Stop {
    /// It cannot be taken in place now (something it needs is held, a table is full,
    /// a batch's stream has no header kept yet): a thread must take it.
    Unavailable,
    /// Writing failed with this `errno`.
    Io(i32),
}

/// Where a snapshot taken in place goes: a fixed buffer in front of a file (in a signal
/// handler), or a vector in tests.
#[cfg_attr(not(unix), allow(dead_code))] // used by the `SIGUSR2` handler (Unix)
pub(crate) trait Out {
    /// Called once it is known that there is something to write, before the first
    /// byte (a file is opened then, named after the newest stream's session).
    fn begin(&mut self, _newest: &HeaderFacts) -> Result<(), Stop> {
        Ok(())
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), Stop>;
}

impl Out for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) -> Result<(), Stop> {
        self.extend_from_slice(bytes);
        Ok(())
    }
}

/// The most threads a stream of a snapshot taken in place may number (the
/// renumbering table's room, made with the recorder).
#[cfg_attr(not(unix), allow(dead_code))] // used by the `SIGUSR2` handler (Unix)
pub(crate) const THREADS_MAX: usize = 256;

/// What a snapshot taken in place works in, made beforehand: it allocates nothing.
#[cfg_attr(not(unix), allow(dead_code))] // used by the `SIGUSR2` handler (Unix)
pub(crate) struct InPlaceTables {
    /// Per thread of the stream being written: (thread index, batches so far), sorted.
    counts: Vec<(u64, u64)>,
    /// The marker's batch.
    marker: BatchEncoder,
}

impl InPlaceTables {
    #[cfg_attr(not(unix), allow(dead_code))] // used by the `SIGUSR2` handler (Unix)
    pub fn new() -> InPlaceTables {
        InPlaceTables {
            counts: Vec::with_capacity(THREADS_MAX),
            marker: BatchEncoder::new(0, 0),
        }
    }
}

/// The role a thread's unwritten batch takes in a snapshot taken in place: the ring
/// would have kept it aside as its stream's first batch, or queued it.
#[derive(Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(unix), allow(dead_code))] // used by the `SIGUSR2` handler (Unix)
enum BatchRole {
    Frame,
    First,
}

/// What [`assemble_in_place`] found to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(unix), allow(dead_code))] // used by the `SIGUSR2` handler (Unix)
pub(crate) enum Assembled {
    Written,
    /// Nothing of this process's own: no file.
    Nothing,
}

/// The snapshot [`FlightRecorder::snapshot`](super::FlightRecorder::snapshot) writes,
/// taken in place: the ring as `view` shows it, with `batches` (the threads' unwritten
/// batches, sealed, in the order a flush would hand them to the ring) as if they had
/// been handed over. Byte for byte what the copy-based path ([`assemble`] after the
/// writer's `flush_all`) writes for the same state, as long as the handed-over batches
/// would not have pushed older frames out of the ring (its cap). Allocates nothing.
#[cfg_attr(not(unix), allow(dead_code))] // used by the `SIGUSR2` handler (Unix)
pub(crate) fn assemble_in_place(
    view: &RingView<'_>,
    batches: &[&[u8]],
    marker: Option<&str>,
    (now_us, wall_us): (u64, i64),
    scratch: &mut InPlaceTables,
    out: &mut dyn Out,
) -> Result<Assembled, Stop> {
    let streams = view.streams;
    let queued = || view.frames.iter().skip(view.skip);
    // Each batch's stream, and its role, as the ring's `keep` would decide them.
    let mut roles = [(usize::MAX, BatchRole::Frame); HELD_MAX];
    let mut start_noted = view.start_noted;
    for (i, bytes) in batches.iter().enumerate() {
        let header = batch_header(bytes).ok_or(Stop::Unavailable)?;
        // A batch of a stream whose STREAM frame the ring has not kept: the writer
        // would write that first (a stream started but not yet in the ring).
        let at = streams
            .iter()
            .position(|s| s.stream_id == header.stream_id && s.header.is_some())
            .ok_or(Stop::Unavailable)?;
        let first = header.thread_index == 0 && header.batch_seq == 0;
        let noted = first && std::mem::take(&mut start_noted);
        let taken = roles[..i]
            .iter()
            .any(|&(s, r)| s == at && r == BatchRole::First);
        let role =
            if first && streams[at].first_batch.is_none() && !taken && (!view.forked || noted) {
                BatchRole::First
            } else {
                BatchRole::Frame
            };
        *roles.get_mut(i).ok_or(Stop::Unavailable)? = (at, role);
    }
    let roles = &roles[..batches.len()];
    // A forked child that recorded nothing has nothing of its own to show.
    let own_first = |at: usize| {
        let s = &streams[at];
        (s.first_batch.is_some() && !s.inherited) || roles.contains(&(at, BatchRole::First))
    };
    if queued().next().is_none()
        && !roles.iter().any(|&(_, r)| r == BatchRole::Frame)
        && !(0..streams.len()).any(own_first)
    {
        return Ok(Assembled::Nothing);
    }
    let facts = streams
        .iter()
        .rev()
        .find_map(|s| s.parsed.as_deref())
        .ok_or(Stop::Unavailable)?;
    let written = |at: usize| {
        let s = &streams[at];
        s.header.is_some()
            && (s.first_batch.is_some()
                || roles.iter().any(|&(b, _)| b == at)
                || queued().any(|f| f.stream_id == s.stream_id))
    };
    let newest = (0..streams.len()).rev().find(|&at| written(at));
    out.begin(facts)?;
    for at in (0..streams.len()).filter(|&at| written(at)) {
        let stream = &streams[at];
        let Some(header_frame) = &stream.header else {
            continue;
        };
        out.put(header_frame)?;
        for clock in &stream.clocks {
            out.put(clock)?;
        }
        let counts = &mut scratch.counts;
        counts.clear();
        let first = stream
            .first_batch
            .as_ref()
            .map(|f| f.bytes.as_slice())
            .or_else(|| {
                roles
                    .iter()
                    .position(|&r| r == (at, BatchRole::First))
                    .map(|i| batches[i])
            });
        let mine = first
            .into_iter()
            .chain(
                queued()
                    .filter(|f| f.stream_id == stream.stream_id)
                    .map(|f| f.bytes.as_slice()),
            )
            .chain(
                batches
                    .iter()
                    .zip(roles)
                    .filter(|&(_, &r)| r == (at, BatchRole::Frame))
                    .map(|(b, _)| *b),
            );
        let mut head = [0u8; HEAD_MAX];
        for bytes in mine {
            let thread = batch_header(bytes).map_or(u64::MAX, |h| h.thread_index);
            let seq = count_entry(counts, thread)?;
            if let Some((n, records, crc)) = renumber_fixed(bytes, *seq, &mut head) {
                out.put(&head[..n])?;
                out.put(records)?;
                out.put(&crc)?;
                *seq += 1;
            }
        }
        if let Some(trigger) = marker.filter(|_| Some(at) == newest)
            && let Some(facts) = stream.parsed.as_deref()
        {
            let thread_index = counts.last().map_or(0, |&(last, _)| last + 1);
            let enc = &mut scratch.marker;
            enc.restart(facts.anchor_wall_us);
            enc.rebind(stream.stream_id, 0, thread_index);
            let record = marker_record(&facts.sid, facts.depth, trigger, now_us, wall_us);
            let mut spilled = false;
            enc.encode(&record, |_| spilled = true);
            if spilled {
                return Err(Stop::Unavailable);
            }
            if !enc.is_empty() {
                out.put(enc.seal())?;
            }
            *count_entry(counts, thread_index)? = 1;
        }
        put_end(out, stream.stream_id, counts)?;
    }
    Ok(Assembled::Written)
}

/// The header of a batch frame.
#[cfg_attr(not(unix), allow(dead_code))] // used by the `SIGUSR2` handler (Unix)
fn batch_header(bytes: &[u8]) -> Option<BatchHeader> {
    match frame::check(bytes) {
        frame::Check::Frame { len, .. } => BatchHeader::parse(&bytes[frame::HEADER_LEN..][..len]),
        _ => None,
    }
}

/// The (sorted) entry of `thread` in `counts`, made with 0 batches if new.
#[cfg_attr(not(unix), allow(dead_code))] // used by the `SIGUSR2` handler (Unix)
fn count_entry(counts: &mut Vec<(u64, u64)>, thread: u64) -> Result<&mut u64, Stop> {
    let at = match counts.binary_search_by_key(&thread, |&(t, _)| t) {
        Ok(at) => at,
        Err(at) => {
            // Within the room made beforehand: no allocation.
            if counts.len() == counts.capacity() {
                return Err(Stop::Unavailable);
            }
            counts.insert(at, (thread, 0));
            at
        }
    };
    Ok(&mut counts[at].1)
}

/// An END frame for `stream_id` with `threads`, written piece by piece (its CRC as it
/// goes): the bytes [`End::write_frame`] makes.
#[cfg_attr(not(unix), allow(dead_code))] // used by the `SIGUSR2` handler (Unix)
fn put_end(out: &mut dyn Out, stream_id: u64, threads: &[(u64, u64)]) -> Result<(), Stop> {
    let mut digits = [0; varint::MAX_LEN];
    let count = threads.len() as u64;
    let len = 8
        + varint::encoded_len(count)
        + threads
            .iter()
            .map(|&(t, b)| varint::encoded_len(t) + varint::encoded_len(b))
            .sum::<usize>();
    let len = u32::try_from(len).map_err(|_| Stop::Unavailable)?;
    let mut head = [0u8; frame::HEADER_LEN + 8];
    head[..3].copy_from_slice(&frame::MARKER);
    head[3] = frame::kind::END;
    head[4..8].copy_from_slice(&len.to_le_bytes());
    head[8..].copy_from_slice(&stream_id.to_le_bytes());
    out.put(&head)?;
    let mut crc = frame::crc(&head[3..]);
    let mut put_u = |out: &mut dyn Out, crc: &mut u32, value: u64| {
        let n = varint::encode(&mut digits, value);
        *crc = crc32c::crc32c_append(*crc, &digits[..n]);
        out.put(&digits[..n])
    };
    put_u(out, &mut crc, count)?;
    for &(thread, batches) in threads {
        put_u(out, &mut crc, thread)?;
        put_u(out, &mut crc, batches)?;
    }
    out.put(&crc.to_le_bytes())
}

/// The marker's `data` record.
fn marker_record<'a>(
    sid: &'a str,
    depth: u32,
    trigger: &'a str,
    now_us: u64,
    wall_us: i64,
) -> Record<'a> {
    Record {
        event: Trace2Event::Data {
            repo: None,
            category: MARKER_CATEGORY,
            key: MARKER_KEY,
            value: trigger,
            nesting: 1,
            t_rel_us: now_us,
        },
        time: Timestamp {
            wall_us,
            t_abs_us: now_us,
        },
        sid,
        depth,
        thread: "main",
        callsite: Callsite::default(),
        open_regions: 0,
    }
}

/// The longest new start of a renumbered batch frame: frame header, stream id, two
/// numbers.
const HEAD_MAX: usize = frame::HEADER_LEN + 8 + 2 * varint::MAX_LEN;

/// [`renumber`] into a fixed buffer (what the signal handler uses: no allocation): the
/// new start's length in `head`, the records and the new CRC. The records are not read
/// again: CRC32C is linear, so the CRC of the unchanged records is the old CRC with the
/// old start's share taken out, and the new CRC that with the new start's share put in.
fn renumber_fixed<'a>(
    bytes: &'a [u8],
    seq: u64,
    head: &mut [u8; HEAD_MAX],
) -> Option<(usize, &'a [u8], [u8; 4])> {
    let frame::Check::Frame { kind, len } = frame::check(bytes) else {
        return None;
    };
    let payload = &bytes[frame::HEADER_LEN..][..len];
    let mut r = ByteCursor::new(payload);
    r.u64_le()?;
    r.uvarint()?;
    let thread_end = r.pos();
    r.uvarint()?;
    let seq_end = r.pos();
    let records = &payload[seq_end..];
    let mut digits = [0; varint::MAX_LEN];
    let n = varint::encode(&mut digits, seq);
    let head_len = frame::HEADER_LEN + thread_end + n;
    head[..3].copy_from_slice(&frame::MARKER);
    head[3] = kind;
    head[frame::HEADER_LEN..][..thread_end].copy_from_slice(&payload[..thread_end]);
    head[frame::HEADER_LEN + thread_end..head_len].copy_from_slice(&digits[..n]);
    let new_len = head_len - frame::HEADER_LEN + records.len();
    head[4..frame::HEADER_LEN].copy_from_slice(&u32::try_from(new_len).ok()?.to_le_bytes());
    // The CRC covers kind, length and payload: old start + records before, new start
    // + records now.
    let old_crc = u32::from_le_bytes(bytes[frame::HEADER_LEN + len..][..4].try_into().ok()?);
    let old_start_crc = frame::crc(&bytes[3..frame::HEADER_LEN + seq_end]);
    let records_crc = old_crc ^ crc32c::crc32c_combine(old_start_crc, 0, records.len());
    let new_start_crc = frame::crc(&head[3..head_len]);
    let new_crc = crc32c::crc32c_combine(new_start_crc, records_crc, records.len());
    Some((head_len, records, new_crc.to_le_bytes()))
}

/// A snapshot's file name ([`file_name`]) written into `out` without allocating; its
/// length, or `None` if it does not fit.
#[cfg_attr(not(unix), allow(dead_code))] // used by the `SIGUSR2` handler (Unix)
pub(crate) fn file_name_into(
    out: &mut [u8],
    wall_us: i64,
    name_part: &str,
    pid: u32,
    number: u64,
    trigger: &str,
) -> Option<usize> {
    let mut w = FixedText { out, len: 0 };
    // `utc_datetime_text` without its per-thread cache (a signal handler may not reach
    // thread-local storage safely): the second's text, then the microseconds.
    let (start, second) = crate::record::text::utc_second(wall_us)?;
    let micros = crate::record::text::micros_digits((wall_us - start) as u64);
    for &b in second.iter().chain(&micros).chain(b"Z") {
        if !matches!(b, b'-' | b':') {
            w.put(&[b])?;
        }
    }
    w.put(b"-")?;
    w.put(name_part.as_bytes())?;
    w.put(b"-")?;
    w.number(u64::from(pid), 1)?;
    w.put(b"-")?;
    w.number(number, 3)?;
    w.put(b"-")?;
    w.put(trigger.as_bytes())?;
    w.put(b".t2b")?;
    Some(w.len)
}

/// Text written into a fixed buffer.
#[cfg_attr(not(unix), allow(dead_code))] // used by the `SIGUSR2` handler (Unix)
struct FixedText<'a> {
    out: &'a mut [u8],
    len: usize,
}

#[cfg_attr(not(unix), allow(dead_code))] // used by the `SIGUSR2` handler (Unix)
impl FixedText<'_> {
    fn put(&mut self, bytes: &[u8]) -> Option<()> {
        self.out
            .get_mut(self.len..self.len + bytes.len())?
            .copy_from_slice(bytes);
        self.len += bytes.len();
        Some(())
    }

    /// `value` in decimal, with leading zeros to `width` digits.
    fn number(&mut self, value: u64, width: usize) -> Option<()> {
        let mut digits = [b'0'; 20];
        let mut n = 0;
        let mut v = value;
        while v > 0 || n < width.max(1) {
            digits[19 - n] = b'0' + (v % 10) as u8;
            v /= 10;
            n += 1;
        }
        self.put(&digits[20 - n..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_by_time_and_keep_the_process_apart() {
        let sid = "20260101T000000.000000Z-H0a-P00000001/20260101T000001.000000Z-H0a-P00000002";
        let a = file_name(1_795_303_297_816_635, sid, 2, 1, "exit");
        assert_eq!(
            a,
            "20261121T232137.816635Z-20260101T000001.000000Z-H0a-P00000002-2-001-exit.t2b"
        );
        let b = file_name(1_795_303_297_816_636, sid, 2, 0, "request");
        assert!(a < b);
        assert_eq!(
            file_name(0, "a/b c", 7, 2, "panic"),
            "19700101T000000.000000Z-b_c-7-002-panic.t2b"
        );
        // A forked child, with its parent's session id and counter at the same time:
        // another name.
        assert_ne!(file_name(1_795_303_297_816_635, sid, 3, 1, "exit"), a);
    }

    #[test]
    fn renumbering_changes_only_the_batch_number() {
        let mut original = Vec::new();
        let start = frame::begin(&mut original, frame::kind::BATCH);
        original.extend_from_slice(&9u64.to_le_bytes());
        original.extend_from_slice(&[3, 0x80, 0x01, 5, 1, 0, 0xAA]);
        frame::seal(&mut original, start);
        let mut out = Vec::new();
        let (records, crc) = renumber(&original, 2, &mut out).unwrap();
        out.extend_from_slice(records);
        out.extend_from_slice(&crc);
        // The CRC worked out from the old one is the frame's CRC.
        let frame::Check::Frame { len, .. } = frame::check(&out) else {
            panic!("not a frame: {out:?}");
        };
        let payload = &out[frame::HEADER_LEN..][..len];
        assert_eq!(&payload[8..], &[3, 2, 5, 1, 0, 0xAA]);
        assert!(renumber(&out[..out.len() - 1], 0, &mut Vec::new()).is_none());
        // And back: a longer number, then the first one again.
        let mut again = Vec::new();
        let (records, crc) = renumber(&out, 1 << 20, &mut again).unwrap();
        again.extend_from_slice(records);
        again.extend_from_slice(&crc);
        let mut back = Vec::new();
        let (records, crc) = renumber(&again, 0x80, &mut back).unwrap();
        back.extend_from_slice(records);
        back.extend_from_slice(&crc);
        assert_eq!(back, original);
    }

    #[test]
    fn the_temporary_file_is_gone_after_a_write_and_after_a_failure() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_file(dir.path(), "a.t2b", |out| out.write_all(b"frames")).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"frames");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        assert!(write_file(&dir.path().join("missing"), "b.t2b", |_| Ok(())).is_err());
        // A failure while filling leaves no file at all.
        assert!(write_file(dir.path(), "c.t2b", |_| Err(io::Error::other("full"))).is_err());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_temporary_file_of_another_writer_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let theirs = dir.path().join(".d.t2b.tmp");
        fs::write(&theirs, b"being written").unwrap();
        let err = write_file(dir.path(), "d.t2b", |out| out.write_all(b"mine")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read(&theirs).unwrap(), b"being written");
        assert!(!dir.path().join("d.t2b").exists());
    }
}
