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
use crate::flight::ring::{RingCopy, RingFrame, StreamAside};
use crate::frame;
use crate::header::{End, StreamHeader};
use crate::record::{Callsite, Record, Timestamp, Trace2Event};
use crate::varint::{self, ByteCursor};

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
/// `bytes`) and the new CRC. The records are not read again: CRC32C is linear, so the
/// CRC of the unchanged records is the old CRC with the old start's share taken out,
/// and the new CRC that with the new start's share put in; a snapshot of a full window
/// does not checksum it all again.
fn renumber<'a>(bytes: &'a [u8], seq: u64, head: &mut Vec<u8>) -> Option<(&'a [u8], [u8; 4])> {
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
    head.clear();
    frame::begin(head, kind);
    head.extend_from_slice(&payload[..thread_end]);
    head.extend_from_slice(&digits[..n]);
    let new_len = head.len() - frame::HEADER_LEN + records.len();
    head[4..frame::HEADER_LEN].copy_from_slice(&u32::try_from(new_len).ok()?.to_le_bytes());
    // The CRC covers kind, length and payload: old start + records before, new start
    // + records now.
    let old_crc = u32::from_le_bytes(bytes[frame::HEADER_LEN + len..][..4].try_into().ok()?);
    let old_start_crc = frame::crc(&bytes[3..frame::HEADER_LEN + seq_end]);
    let records_crc = old_crc ^ crc32c::crc32c_combine(old_start_crc, 0, records.len());
    let new_start_crc = frame::crc(&head[3..]);
    let new_crc = crc32c::crc32c_combine(new_start_crc, records_crc, records.len());
    Some((records, new_crc.to_le_bytes()))
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
    let record = Record {
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
        sid: &header.sid,
        depth: header.depth,
        thread: "main",
        callsite: Callsite::default(),
        open_regions: 0,
    };
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
