//! Damaged input never makes the decoder panic or invent an event: whatever is cut,
//! flipped, lost, shuffled, repeated or mixed with other processes' frames, it yields
//! every intact event and only those, and says what it skipped.

mod support;

use std::cell::Cell;
use std::collections::BTreeMap;

use support::{Decoded, KINDS, Owned, Rng, builder, decode_all, decode_with, frames, is_subset};
use tracing_trace2_binary::decode::FrameScanner;
use tracing_trace2_binary::{
    BinaryWriter, DecodeOptions, Decoder, MIN_BATCH_SIZE, TextFormat, TextOptions, decode_to_text,
};
use tracing_trace2_core::{MemorySink, Record, Trace2Event};
use tracing_trace2_record::catalogue::{CATALOGUE, Kind};

const SID: &str = "20260101T000000.000000Z-H0123abcd-P00001234";

/// Records as the core makes them (times increasing, wall = anchor + t_abs), spread
/// over three threads by name.
fn live_records(seed: u64, count: usize) -> Vec<Owned> {
    let mut rng = Rng(seed);
    let mut t = 0;
    (0..count)
        .map(|i| {
            // `atexit` and `signal` end the stream (with an END frame): not here.
            let kind = match CATALOGUE[i % KINDS].kind {
                Kind::Atexit | Kind::Signal => Kind::Printf.id() as usize - 1,
                _ => i % KINDS,
            };
            let mut o = Owned::new(&mut rng, kind);
            t += 1 + rng.below(50);
            o.t_abs_us = t;
            o.wall_us = 1_700_000_000_000_000 + t as i64;
            o.thread = ["main", "th01:a", "th02:b"][i % 3].to_owned();
            o
        })
        .collect()
}

/// Writes the records from three real threads (one per thread name), `batch` bytes per
/// batch.
fn written_by_threads(owned: &[Owned], batch: usize) -> Vec<u8> {
    let sink = MemorySink::new();
    let writer = builder()
        .with_batch_size(batch)
        .with_anchor_wall_us(1_700_000_000_000_000)
        .build(sink.clone());
    std::thread::scope(|scope| {
        for name in ["main", "th01:a", "th02:b"] {
            let writer = writer.clone();
            scope.spawn(move || {
                for o in owned.iter().filter(|o| o.thread == name) {
                    let list = o.list_refs();
                    writer.record(&o.record_in(&list, SID, 0));
                }
            });
        }
    });
    writer.finish();
    drop(writer);
    sink.contents()
}

/// Per thread name, the decoded records in order.
fn by_thread(decoded: &[Decoded]) -> BTreeMap<String, Vec<String>> {
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (_, text) in decoded {
        let thread = text
            .split("thread: ")
            .nth(1)
            .and_then(|rest| rest.split(", callsite").next())
            .unwrap_or_default()
            .to_owned();
        map.entry(thread).or_default().push(text.clone());
    }
    map
}

#[test]
fn truncation_at_every_offset_keeps_a_subset_and_says_so() {
    let owned = live_records(1, 60);
    let bytes = written_by_threads(&owned, MIN_BATCH_SIZE);
    let (whole, report) = decode_all(&bytes);
    assert!(report.is_complete(), "{report}");
    assert_eq!(whole.len(), 60);
    let whole_threads = by_thread(&whole);
    // (An empty input is complete: there is nothing in it.)
    for cut in 1..bytes.len() {
        let (part, report) = decode_all(&bytes[..cut]);
        assert!(is_subset(&part, &whole), "cut at {cut}");
        assert!(!report.is_complete(), "cut at {cut}: {report}");
        // Each thread keeps a prefix of its records (its batches in order).
        for (thread, records) in by_thread(&part) {
            let all = &whole_threads[&thread];
            assert!(
                all.starts_with(&records) || records.is_empty(),
                "cut at {cut}"
            );
        }
    }
}

#[test]
fn bit_flips_are_caught_and_only_the_hit_frame_is_lost() {
    let owned = live_records(2, 3000);
    let bytes = written_by_threads(&owned, MIN_BATCH_SIZE);
    let frames = frames(&bytes);
    assert!(frames.len() > 20, "{}", frames.len());
    let (whole, report) = decode_all(&bytes);
    assert!(report.is_complete());
    let mut rng = Rng(99);
    for _ in 0..300 {
        let mut damaged = bytes.clone();
        let flips = 1 + rng.below(3);
        for _ in 0..flips {
            let at = rng.below(damaged.len() as u64) as usize;
            damaged[at] ^= 1 << rng.below(8);
        }
        let (part, report) = decode_all(&damaged);
        assert!(is_subset(&part, &whole));
        assert!(report.skipped_bytes > 0 || report.lost_batches() > 0);
        assert!(!report.is_complete());
        // A few flips hit at most a few frames: nearly everything survives.
        assert!(
            part.len() * 10 > whole.len() * 8,
            "{} of {}",
            part.len(),
            whole.len()
        );
    }
}

#[test]
fn shuffled_frames_decode_exactly_as_in_order() {
    let owned = live_records(3, 2000);
    let bytes = written_by_threads(&owned, MIN_BATCH_SIZE);
    let (whole, _) = decode_all(&bytes);
    let mut frames = frames(&bytes);
    let mut rng = Rng(5);
    for round in 0..5 {
        for i in (1..frames.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            frames.swap(i, j);
        }
        let shuffled: Vec<u8> = frames.concat();
        let (got, report) = decode_all(&shuffled);
        assert!(report.is_complete(), "round {round}: {report}");
        assert_eq!(got, whole, "round {round}");
    }
}

#[test]
fn missing_batches_are_reported_per_thread() {
    let owned = live_records(4, 2000);
    let bytes = written_by_threads(&owned, MIN_BATCH_SIZE);
    let (whole, _) = decode_all(&bytes);
    let frames = frames(&bytes);
    // Drop the third frame (frame 0 is the STREAM header) and the last batch.
    let is_batch = |f: &Vec<u8>| f[3] == tracing_trace2_binary::frame::kind::BATCH;
    assert!(is_batch(&frames[3]));
    let last = frames.iter().rposition(is_batch).unwrap();
    let dropped = [3, last];
    let kept: Vec<u8> = frames
        .iter()
        .enumerate()
        .filter(|(i, _)| !dropped.contains(i))
        .flat_map(|(_, f)| f.clone())
        .collect();
    let (part, report) = decode_all(&kept);
    assert!(is_subset(&part, &whole));
    assert!(part.len() < whole.len());
    assert_eq!(report.lost_batches(), 2, "{report}");
    assert!(report.streams[0].ended);
    assert!(!report.is_complete());
    // The lost batch does not disturb the order of what is left.
    for (thread, records) in by_thread(&part) {
        let all = &by_thread(&whole)[&thread];
        let mut at = 0;
        for r in &records {
            at += all[at..].iter().position(|a| a == r).unwrap() + 1;
        }
    }
}

/// The END frame counts the batches of the thread that finishes the stream, as it
/// counts the others': that thread's last batch, lost, is reported.
#[test]
fn the_finishing_threads_lost_batch_is_reported() {
    let owned = live_records(13, 2000);
    let lists: Vec<Vec<&str>> = owned.iter().map(Owned::list_refs).collect();
    let mut records: Vec<Record<'_>> = owned
        .iter()
        .zip(&lists)
        .map(|(o, l)| o.record_in(l, SID, 0))
        .collect();
    // Recorded on this one thread, which `atexit` makes finish the stream.
    let last = *records.last().unwrap();
    records.push(Record {
        event: Trace2Event::Atexit { code: 0 },
        ..last
    });
    let bytes = write_alone(&records);
    let (whole, report) = decode_all(&bytes);
    assert!(report.is_complete(), "{report}");
    let frames = frames(&bytes);
    let is_batch = |f: &Vec<u8>| f[3] == tracing_trace2_binary::frame::kind::BATCH;
    assert!(frames.iter().filter(|f| is_batch(f)).count() > 1);
    let last = frames.iter().rposition(is_batch).unwrap();
    let kept: Vec<u8> = frames
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != last)
        .flat_map(|(_, f)| f.clone())
        .collect();
    let (part, report) = decode_all(&kept);
    assert!(report.streams[0].ended);
    assert_eq!(report.lost_batches(), 1, "{report}");
    assert!(!report.is_complete());
    assert!(is_subset(&part, &whole) && part.len() < whole.len());
}

#[test]
fn two_processes_appending_to_one_file_decode_apart() {
    let a = live_records(5, 500);
    let b = live_records(6, 500);
    let sink = MemorySink::new();
    let wa = builder()
        .with_batch_size(MIN_BATCH_SIZE)
        .build(sink.clone());
    let wb = builder()
        .with_batch_size(MIN_BATCH_SIZE)
        .build(sink.clone());
    let sid_b = "20260101T000000.000000Z-H0123abcd-P00009999";
    for (x, y) in a.iter().zip(&b) {
        let (lx, ly) = (x.list_refs(), y.list_refs());
        wa.record(&x.record_in(&lx, SID, 0));
        wb.record(&y.record_in(&ly, sid_b, 0));
    }
    wa.finish();
    wb.finish();
    let (decoded, report) = decode_all(&sink.contents());
    assert!(report.is_complete(), "{report}");
    assert_eq!(report.streams.len(), 2);
    let sids: Vec<_> = report.streams.iter().map(|s| s.sid.clone()).collect();
    let index_of = |sid: &str| sids.iter().position(|s| s.as_deref() == Some(sid)).unwrap();
    for (owned, sid) in [(&a, SID), (&b, sid_b)] {
        let s = index_of(sid);
        let got: Vec<&String> = decoded.iter().filter(|d| d.0 == s).map(|d| &d.1).collect();
        let want: Vec<String> = owned
            .iter()
            .map(|o| format!("{:?}", o.record_in(&o.list_refs(), sid, 0)))
            .collect();
        assert_eq!(got.len(), want.len());
        assert!(got.iter().zip(&want).all(|(g, w)| *g == w));
    }
}

#[test]
fn repeated_frames_and_foreign_bytes_are_skipped() {
    let owned = live_records(7, 300);
    let bytes = written_by_threads(&owned, MIN_BATCH_SIZE);
    let (whole, _) = decode_all(&bytes);
    let mut doubled = b"some text before\n".to_vec();
    doubled.extend_from_slice(&bytes);
    doubled.extend_from_slice(b"\x89T2\x10garbage");
    doubled.extend_from_slice(&bytes);
    let (got, report) = decode_all(&doubled);
    assert_eq!(got, whole);
    assert!(report.duplicate_batches > 0);
    assert!(report.skipped_bytes > 0);
}

#[test]
fn batches_before_their_stream_header_wait_for_it_and_orphans_are_reported() {
    let owned = live_records(8, 300);
    let bytes = written_by_threads(&owned, MIN_BATCH_SIZE);
    let (whole, _) = decode_all(&bytes);
    let is_header = |f: &Vec<u8>| f[3] == tracing_trace2_binary::frame::kind::STREAM;
    let (headers, mut frames): (Vec<_>, Vec<_>) = frames(&bytes).into_iter().partition(is_header);
    // The writer repeats its header; every copy goes last here.
    assert!(headers.len() >= 2);
    frames.extend(headers);
    let (got, report) = decode_all(&frames.concat());
    assert_eq!(got, whole);
    assert!(report.is_complete());
    // Without any.
    frames.retain(|f| !is_header(f));
    let (got, report) = decode_all(&frames.concat());
    assert!(got.is_empty());
    assert!(report.orphan_batches > 0, "{report}");
    assert!(!report.is_complete());
}

#[test]
fn a_small_window_keeps_every_event_and_each_threads_order() {
    let owned = live_records(9, 50_000);
    let bytes = written_by_threads(&owned, MIN_BATCH_SIZE);
    assert!(bytes.len() > 2 << 20, "{}", bytes.len());
    let (whole, _) = decode_all(&bytes);
    let (windowed, report) = decode_with(&bytes, &DecodeOptions::new().with_window_bytes(1));
    assert!(report.is_complete(), "{report}");
    assert!(is_subset(&windowed, &whole) && windowed.len() == whole.len());
    assert_eq!(by_thread(&windowed), by_thread(&whole));
}

/// The merge holds as many bytes as its window before it hands out the oldest events
/// (a window kept fuller merges better), then hands them out as it goes rather than
/// all at the end.
#[test]
fn the_window_fills_before_events_go_out() {
    assert_eq!(DecodeOptions::new().window_bytes(), 64 << 20);
    assert_eq!(
        DecodeOptions::new()
            .with_window_bytes(3 << 20)
            .window_bytes(),
        3 << 20
    );
    let options = DecodeOptions::new().with_window_bytes(1);
    assert_eq!(options.window_bytes(), 1 << 20);
    let owned = live_records(9, 50_000);
    let bytes = written_by_threads(&owned, MIN_BATCH_SIZE);
    let mut decoder = Decoder::new(options);
    let mut scanner = FrameScanner::new(&bytes[..]);
    let ingested = Cell::new(0usize);
    let first_out = Cell::new(None);
    let mut out = 0usize;
    while let Some(frame) = scanner.next_frame().unwrap() {
        ingested.set(ingested.get() + frame.payload.len());
        decoder.ingest(frame, &mut |_, _| {
            out += 1;
            first_out.set(first_out.get().or(Some(ingested.get())));
        });
    }
    let before_finish = out;
    let report = decoder.finish(&mut |_, _| out += 1);
    assert!(report.is_complete(), "{report}");
    assert_eq!(out, owned.len());
    // Nothing goes out before the window holds more than its size.
    let first = first_out.get().expect("every event waited for the end");
    assert!(first > 1 << 20, "first event out after {first} bytes");
    // The input is several windows long: most of it went out on the way.
    assert!(ingested.get() > 2 << 20, "{}", ingested.get());
    assert!(before_finish > out / 2, "{before_finish} of {out}");
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(11);
    let owned = live_records(10, 200);
    let valid = written_by_threads(&owned, MIN_BATCH_SIZE);
    for _ in 0..200 {
        let len = rng.below(4000) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        // Sometimes splice in pieces of a valid stream, with markers and headers.
        if rng.bool() && !valid.is_empty() {
            let at = rng.below(valid.len() as u64) as usize;
            let n = (rng.below(2000) as usize).min(valid.len() - at);
            let into = rng.below(bytes.len() as u64 + 1) as usize;
            bytes.splice(into..into, valid[at..at + n].iter().copied());
        }
        let _ = decode_all(&bytes);
        let mut out = Vec::new();
        let _ = decode_to_text(&bytes[..], &mut out, &TextOptions::new(TextFormat::Perf));
    }
}

#[test]
fn a_writer_cut_off_mid_stream_loses_only_its_unwritten_batch() {
    // What the file holds when the process dies without flushing: every frame written
    // so far, no END. Records of kinds that flush at once (exit, error, child_start…)
    // are left out, so that the tail stays in the batch.
    let owned: Vec<Owned> = live_records(12, 8000)
        .into_iter()
        .filter(|o| matches!(o.kind, 2..=14 | 17 | 18 | 20..=26))
        .collect();
    let lists: Vec<Vec<&str>> = owned.iter().map(Owned::list_refs).collect();
    let records: Vec<Record<'_>> = owned
        .iter()
        .zip(&lists)
        .map(|(o, l)| o.record_in(l, SID, 0))
        .collect();
    let sink = MemorySink::new();
    let writer: BinaryWriter = builder()
        .with_batch_size(MIN_BATCH_SIZE)
        .with_anchor_wall_us(1_700_000_000_000_000)
        .build(sink.clone());
    for r in &records {
        writer.record(r);
    }
    let cut = sink.contents();
    let (got, report) = decode_all(&cut);
    assert!(!report.is_complete() && !report.streams[0].ended);
    assert_eq!(report.skipped_bytes, 0);
    let want: Vec<String> = records.iter().map(|r| format!("{r:?}")).collect();
    let got: Vec<String> = got.into_iter().map(|d| d.1).collect();
    assert!(!got.is_empty() && got.len() < want.len());
    assert!(want.starts_with(&got));
    // What is missing fits one batch: written alone it makes a single batch frame.
    let tail = write_alone(&records[got.len()..]);
    let batches = frames(&tail)
        .iter()
        .filter(|f| f[3] == tracing_trace2_binary::frame::kind::BATCH)
        .count();
    assert_eq!(batches, 1);
    drop(writer);
}

fn write_alone(records: &[Record<'_>]) -> Vec<u8> {
    support::write_all(
        builder()
            .with_batch_size(MIN_BATCH_SIZE)
            .with_anchor_wall_us(1_700_000_000_000_000),
        records,
    )
}

/// Records of kinds that do not flush their batch at once, in one thread, so that a
/// writer's batches end only where the test flushes them.
fn unflushed_records(seed: u64, count: usize) -> Vec<Owned> {
    let mut owned: Vec<Owned> = live_records(seed, count)
        .into_iter()
        .filter(|o| {
            !matches!(
                CATALOGUE[o.kind].kind,
                Kind::Exit
                    | Kind::Atexit
                    | Kind::Signal
                    | Kind::Error
                    | Kind::ChildStart
                    | Kind::Exec
                    | Kind::ThreadExit
            )
        })
        .collect();
    for o in &mut owned {
        o.thread = "main".to_owned();
    }
    owned
}

/// Process A's frames as a kill leaves them: a first batch, then a second one flushed
/// and never ended (no END frame). Also the records of the first batch.
fn killed_process_a() -> (Vec<u8>, Vec<Owned>) {
    let owned = unflushed_records(21, 500);
    let (first, second) = owned.split_at(40);
    let sink = MemorySink::new();
    let writer = builder()
        .with_anchor_wall_us(1_700_000_000_000_000)
        .build(sink.clone());
    for part in [first, second] {
        for o in part {
            writer.record(&o.record_in(&o.list_refs(), SID, 0));
        }
        writer.flush_all();
    }
    let bytes = sink.contents();
    drop(writer);
    (bytes, first.to_vec())
}

/// Process B's whole stream (another session), and its records.
fn complete_process_b() -> (Vec<u8>, Vec<Owned>, &'static str) {
    let sid = "20260101T000000.000000Z-H0123abcd-P00009999";
    let owned = unflushed_records(22, 120);
    let lists: Vec<Vec<&str>> = owned.iter().map(Owned::list_refs).collect();
    let records: Vec<Record<'_>> = owned
        .iter()
        .zip(&lists)
        .map(|(o, l)| o.record_in(l, sid, 0))
        .collect();
    let bytes = support::write_all(
        builder()
            .with_batch_size(MIN_BATCH_SIZE)
            .with_anchor_wall_us(1_700_000_000_000_500),
        &records,
    );
    (bytes, owned, sid)
}

/// Per stream (by session id), each record decoded from `bytes` in every format of the
/// tests; and the report.
fn lines_by_sid(
    bytes: &[u8],
) -> (
    BTreeMap<String, Vec<u8>>,
    tracing_trace2_binary::DecodeReport,
) {
    let formats = support::formats();
    let mut out: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let report = tracing_trace2_binary::decode(bytes, &DecodeOptions::default(), |_, record| {
        let text = out.entry(record.sid.to_owned()).or_default();
        for (_, format) in &formats {
            text.extend_from_slice(&support::render(format.as_ref(), record));
        }
    })
    .unwrap();
    (out, report)
}

/// The lines `owned` make in every format of the tests.
fn lines_of(owned: &[Owned], sid: &str) -> Vec<u8> {
    let formats = support::formats();
    let mut text = Vec::new();
    for o in owned {
        let list = o.list_refs();
        let record = o.record_in(&list, sid, 0);
        for (_, format) in &formats {
            text.extend_from_slice(&support::render(format.as_ref(), &record));
        }
    }
    text
}

/// Decodes `bytes` to each text format.
fn texts(bytes: &[u8]) -> Vec<Vec<u8>> {
    [TextFormat::Normal, TextFormat::Perf, TextFormat::Event]
        .into_iter()
        .map(|format| {
            let mut out = Vec::new();
            decode_to_text(bytes, &mut out, &TextOptions::new(format)).unwrap();
            out
        })
        .collect()
}

#[test]
fn a_frame_a_kill_cut_with_another_process_after_it_is_that_process_kill_not_damage() {
    const PAGE: usize = tracing_trace2_binary::decode::scan::PAGE as usize;
    let (a, a_first) = killed_process_a();
    let (b, b_owned, sid_b) = complete_process_b();
    let a_frames = frames(&a);
    let last = a_frames.last().unwrap();
    assert_eq!(last[3], tracing_trace2_binary::frame::kind::BATCH);
    let at = a.len() - last.len();
    assert!(
        last.len() > 3 * PAGE,
        "A's last frame: {} bytes",
        last.len()
    );
    let want_a = lines_of(&a_first, SID);
    let want_b = lines_of(&b_owned, sid_b);
    // The file without the cut frame at all: what the cut file must read as.
    let mut without = a[..at].to_vec();
    without.extend_from_slice(&b);
    let want_texts = texts(&without);
    // A's last `write` stops at each page end inside its last frame (past its header),
    // and B appends its whole stream there.
    let mut offsets = Vec::new();
    let mut page = (at + 8).next_multiple_of(PAGE);
    while page < a.len() {
        let cut = page - at;
        offsets.push(cut);
        let mut file = a[..page].to_vec();
        file.extend_from_slice(&b);
        let (lines, report) = lines_by_sid(&file);
        let what = format!("A's last frame cut {cut} bytes in\n{report}");
        assert_eq!(report.skipped_bytes, 0, "{what}");
        assert_eq!(report.damaged_regions, 0, "{what}");
        assert_eq!(
            (report.cut_frames, report.cut_bytes),
            (1, cut as u64),
            "{what}"
        );
        assert!(!report.is_complete(), "{what}");
        // B: every event, byte for byte as its text formats write them.
        assert!(lines[sid_b] == want_b, "{what}");
        // A: its frames before the cut one, and the kill on its stream.
        assert!(lines[SID] == want_a, "{what}");
        let stream_a = report
            .streams
            .iter()
            .find(|s| s.sid.as_deref() == Some(SID));
        let stream_a = stream_a.unwrap();
        assert!(!stream_a.ended, "{what}");
        assert_eq!((stream_a.cut_frames, stream_a.cut_bytes), (1, cut as u64));
        assert!(
            stream_a.threads.iter().all(|t| t.lost_batches == 0),
            "{what}"
        );
        let stream_b = report
            .streams
            .iter()
            .find(|s| s.sid.as_deref() == Some(sid_b));
        let stream_b = stream_b.unwrap();
        assert!(stream_b.ended && stream_b.cut_frames == 0, "{what}");
        assert!(
            report
                .to_string()
                .contains("cut where the writer was killed")
        );
        // Decoded to text, it is the file without the cut frame.
        assert!(texts(&file) == want_texts, "{what}");
        // B killed too: a later page end inside one of B's frames ends the file.
        let mut start = page;
        let b_frames: Vec<(usize, usize)> = frames(&b)
            .iter()
            .map(|f| {
                start += f.len();
                (start - f.len(), f.len())
            })
            .collect();
        let end = (page + 1..file.len())
            .filter(|e| e % PAGE == 0)
            .find(|&e| b_frames.iter().any(|&(s, len)| e >= s + 18 && e < s + len));
        let end = end.expect("a page end inside one of B's frames");
        let (got, report) = decode_all(&file[..end]);
        let what = format!(
            "{what}
and B's cut at {end}
{report}"
        );
        assert_eq!(report.skipped_bytes, 0, "{what}");
        assert_eq!(report.cut_frames, 2, "{what}");
        assert!(report.streams.iter().all(|s| s.cut_frames == 1), "{what}");
        let (b_whole, _) = decode_all(&b);
        let b_index = report
            .streams
            .iter()
            .position(|s| s.sid.as_deref() == Some(sid_b));
        let b_got: Vec<String> = got
            .into_iter()
            .filter(|d| Some(d.0) == b_index)
            .map(|d| d.1)
            .collect();
        let b_whole: Vec<String> = b_whole.into_iter().map(|d| d.1).collect();
        assert!(b_whole.starts_with(&b_got), "{what}");
        page += PAGE;
    }
    assert!(offsets.len() >= 3, "{offsets:?}");
}

#[test]
fn damage_next_to_another_process_stays_damage() {
    const PAGE: usize = tracing_trace2_binary::decode::scan::PAGE as usize;
    let (a, _) = killed_process_a();
    let (b, b_owned, sid_b) = complete_process_b();
    let want_b = lines_of(&b_owned, sid_b);
    let last = frames(&a).last().unwrap().len();
    let at = a.len() - last;
    let page = (at + 8).next_multiple_of(PAGE);
    // A cut that does not stop at a page end, then B.
    for cut in [page - 1, page + 1, page + 100] {
        let mut file = a[..cut].to_vec();
        file.extend_from_slice(&b);
        let (lines, report) = lines_by_sid(&file);
        assert_eq!(report.cut_frames, 0, "{cut}\n{report}");
        assert_eq!(report.damaged_regions, 1, "{cut}\n{report}");
        assert_eq!(report.skipped_bytes as usize, cut - at, "{cut}\n{report}");
        assert!(lines[sid_b] == want_b, "{cut}");
    }
    // A cut at a page end with foreign bytes after it, then B.
    let mut file = a[..page].to_vec();
    file.extend_from_slice(b"not a frame");
    file.extend_from_slice(&b);
    let (lines, report) = lines_by_sid(&file);
    assert_eq!(report.cut_frames, 0, "{report}");
    assert_eq!(report.skipped_bytes as usize, page - at + 11, "{report}");
    assert!(lines[sid_b] == want_b);
    // Random bytes in the middle of intact frames: damage, whoever's frames follow.
    let mut rng = Rng(23);
    let mut whole = a.clone();
    whole.extend_from_slice(&b);
    for _ in 0..50 {
        let mut file = whole.clone();
        let from = rng.below(file.len() as u64 - 64) as usize;
        for byte in &mut file[from..from + 64] {
            *byte = rng.next_u64() as u8;
        }
        let (_, report) = decode_all(&file);
        assert!(report.skipped_bytes > 0, "{from}\n{report}");
        assert_eq!(report.cut_frames, 0, "{from}\n{report}");
    }
}

/// A process's frames as a kill in its `write` leaves them: a first batch, then a
/// second one longer than two pages, flushed and never ended (the write the kill cut);
/// with `first_write`, the long batch alone, in the stream's first `write` (after its
/// STREAM frame). The bytes, where the long batch's frame starts, and the records of
/// the first batch.
fn killed_process(
    seed: u64,
    sid: &str,
    anchor: i64,
    first_write: bool,
) -> (Vec<u8>, usize, Vec<Owned>) {
    let owned = unflushed_records(seed, 500);
    let split = if first_write { 0 } else { 40 };
    let (first, second) = owned.split_at(split);
    let sink = MemorySink::new();
    let writer = builder().with_anchor_wall_us(anchor).build(sink.clone());
    for part in [first, second] {
        for o in part {
            writer.record(&o.record_in(&o.list_refs(), sid, 0));
        }
        writer.flush_all();
    }
    let bytes = sink.contents();
    drop(writer);
    let last = frames(&bytes).last().unwrap().len();
    assert!(last > 2 * 4096, "{last}");
    // In the first write, the long batch follows the STREAM frame.
    let long_at = if first_write {
        frames(&bytes)[0].len()
    } else {
        bytes.len() - last
    };
    (bytes, long_at, first.to_vec())
}

#[test]
fn processes_killed_one_after_the_other_are_each_a_kill_not_damage() {
    // `pkill`, an OOM killer, a supervisor stopping processes one by one: A is killed in
    // its `write`, which stops at a page end; B, which was waiting to append, writes from
    // there and is killed in turn; then C appends its whole stream (or nothing more).
    const PAGE: usize = tracing_trace2_binary::decode::scan::PAGE as usize;
    let (a, a_long, a_first) = killed_process(31, SID, 1_700_000_000_000_000, false);
    let sid_b = "20260101T000000.000000Z-H0123abcd-P0000bbbb";
    let (c, c_owned, sid_c) = complete_process_b();
    let want_a = lines_of(&a_first, SID);
    let want_c = lines_of(&c_owned, sid_c);
    let mut cases = 0;
    for b_first_write in [false, true] {
        let (b, b_long, b_first) = killed_process(32, sid_b, 1_700_000_000_000_200, b_first_write);
        let want_b = lines_of(&b_first, sid_b);
        // B's frames before its long batch, then A's before its own.
        let mut head = b[..b_long].to_vec();
        if b_first_write {
            head.clear();
        }
        head.extend_from_slice(&a[..a_long]);
        let a_at = head.len();
        // Every page end inside A's long frame past its header, and every one inside B's.
        let a_ends = ((a_at + 8).next_multiple_of(PAGE)..a_at + a.len() - a_long).step_by(PAGE);
        for a_end in a_ends {
            let mut file = head.clone();
            file.extend_from_slice(&a[a_long..a_long + a_end - a_at]);
            // B's `write`: its STREAM frame first when it is its first one.
            let b_write = if b_first_write { &b[..] } else { &b[b_long..] };
            let b_frame_at = a_end + if b_first_write { b_long } else { 0 };
            let b_ends =
                ((b_frame_at + 8).next_multiple_of(PAGE)..a_end + b_write.len()).step_by(PAGE);
            for b_end in b_ends {
                // B's `write` stops only at a page end: a byte before or after it, B's
                // frame is damage, and so is A's, which then has no cut after it (unless
                // B's intact STREAM frame follows it); C stays whole.
                for off_page in [b_end - 1, b_end + 1] {
                    let mut file = file.clone();
                    file.extend_from_slice(&b_write[..off_page - a_end]);
                    file.extend_from_slice(&c);
                    let (lines, report) = lines_by_sid(&file);
                    let what = format!("A cut at {a_end}, B at {off_page}\n{report}");
                    let (cuts, skipped) = if b_first_write {
                        (1, off_page - b_frame_at)
                    } else {
                        (0, off_page - a_at)
                    };
                    assert_eq!(report.cut_frames, cuts, "{what}");
                    assert_eq!(report.skipped_bytes as usize, skipped, "{what}");
                    assert!(lines[sid_c] == want_c, "{what}");
                }
                let mut cut = file.clone();
                cut.extend_from_slice(&b_write[..b_end - a_end]);
                // The file as it would be without the cut frames.
                let mut without = head.clone();
                if b_first_write {
                    without.extend_from_slice(&b[..b_long]);
                }
                for tail in [&c[..], &[][..]] {
                    let mut file = cut.clone();
                    file.extend_from_slice(tail);
                    let mut want_file = without.clone();
                    want_file.extend_from_slice(tail);
                    let (lines, report) = lines_by_sid(&file);
                    let what = format!(
                        "B's first write {b_first_write}, A cut at {a_end}, B at {b_end}, C {}\n{report}",
                        tail.len()
                    );
                    assert_eq!(
                        (report.skipped_bytes, report.damaged_regions),
                        (0, 0),
                        "{what}"
                    );
                    assert_eq!(report.cut_frames, 2, "{what}");
                    assert_eq!(
                        report.cut_bytes as usize,
                        (a_end - a_at) + (b_end - b_frame_at),
                        "{what}"
                    );
                    for s in &report.streams {
                        let killed = s.sid.as_deref() != Some(sid_c);
                        assert_eq!(s.cut_frames, u64::from(killed), "{what}");
                        assert!(s.threads.iter().all(|t| t.lost_batches == 0), "{what}");
                    }
                    // Every stream's lines, byte for byte as its text formats write them.
                    assert!(lines[SID] == want_a, "{what}");
                    assert!(
                        lines.get(sid_b).cloned().unwrap_or_default() == want_b,
                        "{what}"
                    );
                    if !tail.is_empty() {
                        assert!(lines[sid_c] == want_c, "{what}");
                    }
                    assert!(texts(&file) == texts(&want_file), "{what}");
                    cases += 1;
                }
            }
        }
    }
    assert!(cases >= 16, "{cases}");
}

#[test]
fn two_cut_frames_of_one_stream_are_its_writers_kills_and_a_torn_frame_stays_damage() {
    // One stream written by two writers, each killed in a `write` that another process's
    // frames follow: the shape a process and a copy of it that kept its stream (a child
    // made without the `fork` handlers: a raw `clone`) leave when both are killed. Each
    // cut frame names its thread and batch: those two batches are the kills', no batch
    // is missing.
    const PAGE: usize = tracing_trace2_binary::decode::scan::PAGE as usize;
    let owned = unflushed_records(33, 500);
    let (small, long) = owned.split_at(40);
    let sink = MemorySink::new();
    let writer = builder()
        .with_anchor_wall_us(1_700_000_000_000_000)
        .build(sink.clone());
    let write_two_batches = || {
        for part in [small, long] {
            for o in part {
                writer.record(&o.record_in(&o.list_refs(), SID, 0));
            }
            writer.flush_all();
        }
    };
    std::thread::scope(|scope| {
        scope.spawn(write_two_batches);
    });
    write_two_batches();
    let bytes = sink.contents();
    drop(writer);
    let all = frames(&bytes);
    let (long_frames, rest): (Vec<&Vec<u8>>, Vec<&Vec<u8>>) =
        all.iter().partition(|f| f.len() > 2 * PAGE);
    assert_eq!(long_frames.len(), 2);
    let (c, c_owned, sid_c) = complete_process_b();
    let c_frames = frames(&c);
    let (c1, c2) = c_frames.split_at(c_frames.len() / 2);
    // Each thread's first batch, as its text formats write it.
    let mut want_a = lines_of(small, SID);
    want_a.extend_from_slice(&lines_of(small, SID));
    let want_c = lines_of(&c_owned, sid_c);
    let head: Vec<u8> = rest.iter().flat_map(|f| f.iter().copied()).collect();
    let cut_of = |file: &[u8], frame: &[u8], pages: usize| {
        let end = (file.len() + 8).next_multiple_of(PAGE) + pages * PAGE;
        frame[..end - file.len()].to_vec()
    };
    // C's frames between the two cuts, or none: the second writer was waiting to
    // append and was killed in its own `write`, which began where the first one's
    // stopped (`pkill` signals one process after the other).
    for (pages, between) in [(0, c1), (1, c1), (0, &[][..]), (1, &[][..])] {
        let mut file = head.clone();
        let cut1 = cut_of(&file, long_frames[0], pages);
        file.extend_from_slice(&cut1);
        file.extend_from_slice(&between.concat());
        let cut2 = cut_of(&file, long_frames[1], 1 - pages);
        file.extend_from_slice(&cut2);
        let after = if between.is_empty() {
            &c_frames[..]
        } else {
            c2
        };
        file.extend_from_slice(&after.concat());
        let (lines, report) = lines_by_sid(&file);
        let what = format!("{pages} {}\n{report}", between.len());
        assert_eq!((report.skipped_bytes, report.cut_frames), (0, 2), "{what}");
        let a = report
            .streams
            .iter()
            .find(|s| s.sid.as_deref() == Some(SID));
        let a = a.unwrap();
        assert_eq!(
            (a.cut_frames, a.cut_bytes as usize),
            (2, cut1.len() + cut2.len()),
            "{what}"
        );
        assert_eq!(a.threads.len(), 2, "{what}");
        for t in &a.threads {
            assert_eq!(
                (t.batches, t.lost_batches, t.cut_batches),
                (1, 0, 1),
                "{what}"
            );
        }
        // Both threads' first batches (the merge interleaves them by time: compare as
        // sorted lines) and C whole.
        let sorted = |text: &[u8]| {
            let mut lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
            lines.sort_unstable();
            lines.concat()
        };
        assert!(sorted(&lines[SID]) == sorted(&want_a), "{what}");
        assert!(lines[sid_c] == want_c, "{what}");
        // The text is the file's without the cut frames.
        let mut without = head.clone();
        without.extend_from_slice(&c1.concat());
        without.extend_from_slice(&c2.concat());
        assert!(texts(&file) == texts(&without), "{what}");
        // A frame torn by a short `write` that was not a kill (its writer wrote the rest
        // later, after C's frames): its head reads as a cut, its rest is damage, and C
        // stays whole.
        let mut torn = head.clone();
        torn.extend_from_slice(&cut1);
        torn.extend_from_slice(&c1.concat());
        let rest_of_1 = &long_frames[0][cut1.len()..];
        torn.extend_from_slice(rest_of_1);
        torn.extend_from_slice(&c2.concat());
        let (lines, report) = lines_by_sid(&torn);
        assert_eq!(
            report.skipped_bytes as usize,
            rest_of_1.len(),
            "{pages}\n{report}"
        );
        assert_eq!(report.damaged_regions, 1, "{pages}\n{report}");
        assert!(lines[sid_c] == want_c, "{pages}");
    }
}

#[test]
fn a_thread_cut_as_its_process_exits_is_not_damage() {
    // `exit` ends the other threads as a kill does: a thread in the middle of a `write`
    // after the exiting thread wrote the END frame leaves its frame cut at a page end,
    // after the END frame. Its batch is not one the END frame counts.
    const PAGE: usize = tracing_trace2_binary::decode::scan::PAGE as usize;
    let owned = unflushed_records(34, 500);
    let (small, long) = owned.split_at(40);
    let sink = MemorySink::new();
    let writer = builder()
        .with_anchor_wall_us(1_700_000_000_000_000)
        .build(sink.clone());
    let record = |part: &[Owned]| {
        for o in part {
            writer.record(&o.record_in(&o.list_refs(), SID, 0));
        }
    };
    record(small);
    writer.finish();
    let ended = sink.contents().len();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            record(long);
            writer.flush_all();
        });
    });
    let bytes = sink.contents();
    drop(writer);
    let last = frames(&bytes[ended..]).last().unwrap().len();
    assert!(last > 2 * PAGE);
    let at = bytes.len() - last;
    let (c, c_owned, sid_c) = complete_process_b();
    let end = (at + 8).next_multiple_of(PAGE);
    for tail in [&c[..], &[][..]] {
        let mut file = bytes[..end].to_vec();
        file.extend_from_slice(tail);
        let (lines, report) = lines_by_sid(&file);
        assert_eq!(
            (report.skipped_bytes, report.cut_frames),
            (0, 1),
            "{report}"
        );
        let a = report
            .streams
            .iter()
            .find(|s| s.sid.as_deref() == Some(SID));
        let a = a.unwrap();
        assert!(a.ended && a.cut_frames == 1, "{report}");
        assert!(a.threads.iter().all(|t| t.lost_batches == 0), "{report}");
        assert!(lines[SID] == lines_of(small, SID), "{report}");
        if !tail.is_empty() {
            assert!(lines[sid_c] == lines_of(&c_owned, sid_c));
        }
    }
}
