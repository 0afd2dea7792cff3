//! The encoder's steady path: a region or datum that the batch can write as references
//! alone, which is nearly every one after a batch's first few records.
//!
//! The general path (`BatchEncoder::try_encode`) writes through a cursor that checks the
//! room at every byte and may define strings and callsites, cut texts or restate the
//! thread, the time or the open regions; its state lives in memory because its rare
//! branches are calls. Here the record is first checked to need none of that (same
//! thread, time not gone back, the same wall-clock correction, the predicted open
//! regions, its callsite and strings already defined, room for the largest such
//! record); then its bytes are written into a fixed window of the batch with the
//! position in a register (as one 8-byte store when every value takes one byte), and
//! the batch's state is updated as the general path would. The callsite's and the
//! strings' ids come from one lookup of all their addresses (`intern::Shapes`); each
//! kind gets a copy of the path of its own. Anything else returns `false` having
//! changed nothing, and the general path writes the record: the bytes are the same
//! either way (`steady_and_general_paths_write_the_same_bytes`).

use super::BatchEncoder;
use crate::frame;
use crate::intern::{Shape, ShapeKey, holds, one_byte_refs, same_bytes, site_key_parts, text_key};
use crate::record::text::copy_short;
use crate::record::{Record, Trace2Event};
use crate::spec::{self, kind};
use crate::varint;

/// The window the fixed part of a steady record is written into. Its largest fixed
/// part is a datum's: head (1), `dt` (10), callsite (5), repository (10), nesting (5),
/// `t_rel` (10), two string ids (5 each) and the value's number or length (10): 61.
const WINDOW: usize = 64;

/// A writer into the window, which the caller has checked is in the batch: every
/// index is taken modulo the window's size, so no write needs a check (and none could
/// leave the window even if the bound above were wrong).
struct Window<'a> {
    bytes: &'a mut [u8; WINDOW],
    at: usize,
}

impl Window<'_> {
    #[inline(always)]
    fn byte(&mut self, byte: u8) {
        debug_assert!(self.at < WINDOW);
        self.bytes[self.at % WINDOW] = byte;
        self.at += 1;
    }

    /// A LEB128 varint (see `varint::encode`).
    #[inline(always)]
    fn u(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.byte(value as u8 | 0x80);
            value >>= 7;
        }
        self.byte(value as u8);
    }
}

/// Writes the fixed part of a steady record of kind `KIND` value by value, for the
/// records the one-word forms do not take (a repository, a value past one byte, an id
/// past one byte): the head, `dt`, the callsite, the repository, the nesting, the
/// relative time (not for `region_enter`), and the ids (the third for regions only).
#[inline(always)]
fn general_head<const KIND: u8>(
    w: &mut Window<'_>,
    dt: u64,
    callsite: u64,
    repo: Option<i64>,
    level: u64,
    rel: u64,
    ids: [u64; 3],
) {
    let mut head = KIND;
    if callsite != 0 {
        head |= spec::HAS_CALLSITE;
    }
    if repo.is_some() {
        head |= spec::HAS_REPO;
    }
    w.byte(head);
    w.u(dt);
    if callsite != 0 {
        w.u(callsite);
    }
    if let Some(repo) = repo {
        w.u(varint::zigzag(repo));
    }
    w.u(level);
    if KIND != kind::REGION_ENTER {
        w.u(rel);
    }
    w.u(ids[0]);
    w.u(ids[1]);
    if KIND == kind::REGION_ENTER || KIND == kind::REGION_LEAVE {
        w.u(ids[2]);
    }
}

/// Writes a datum's value after its fixed part: a `data_json` text's length, a `data`
/// text as a packed number or as its flagged length. Returns whether the text itself
/// follows (written by the caller, past the window).
#[inline(always)]
fn datum_value<const KIND: u8>(w: &mut Window<'_>, text: &str) -> bool {
    if KIND == kind::DATA_JSON {
        // `b` text: its length, then the text.
        w.u(text.len() as u64);
        true
    } else if KIND == kind::DATA {
        if let Some(n) = spec::packed_number(text) {
            // `n` text that packs: the number, flagged.
            w.u(n << 1);
            false
        } else {
            // `n` text that does not: its length, flagged, then the text.
            w.u((text.len() as u64) << 1 | 1);
            true
        }
    } else {
        false
    }
}

/// Writes a steady record of kind `KIND` whose `dt` takes two bytes (128 to 16383) and
/// every other value one (the callsite and ids as [`one_byte_refs`] packs them) into
/// `window` by one 16-byte store; returns its length.
#[inline(never)]
fn two_byte_dt<const KIND: u8>(
    window: &mut [u8; WINDOW],
    dt: u64,
    level: u64,
    rel: u64,
    one_byte: u64,
) -> usize {
    debug_assert!((0x80..0x4000).contains(&dt) && (level | rel) < 0x80);
    let head = u128::from(KIND | spec::HAS_CALLSITE);
    let dt = u128::from(dt & 0x7f | 0x80) | u128::from(dt >> 7) << 8;
    let one_byte = u128::from(one_byte);
    let mut word = head | dt << 8 | (one_byte & 0xff) << 24 | u128::from(level) << 32;
    let mut n = 5;
    if KIND != kind::REGION_ENTER {
        word |= u128::from(rel) << 40;
        n = 6;
    }
    word |= (one_byte >> 8) << (8 * n);
    let region = KIND == kind::REGION_ENTER || KIND == kind::REGION_LEAVE;
    n += if region { 3 } else { 2 };
    if let Some(first) = window.first_chunk_mut::<16>() {
        *first = word.to_le_bytes();
    }
    n
}

/// The strings a steady record refers to: a region's category, label and message, a
/// datum's category and key (none for other kinds).
#[inline(always)]
fn texts_of<'r>(event: &Trace2Event<'r>) -> [Option<&'r str>; 3] {
    match *event {
        Trace2Event::RegionEnter { region, .. } | Trace2Event::RegionLeave { region, .. } => {
            [region.category, region.label, region.msg]
        }
        Trace2Event::Data { category, key, .. } | Trace2Event::DataJson { category, key, .. } => {
            [Some(category), Some(key), None]
        }
        _ => [None; 3],
    }
}

/// Whether the parts of `record`'s remembered shape that are not fixed (the file name,
/// then the strings) still hold the text the batch holds for them. Out of line: only
/// records with text the layer copied come here.
#[inline(never)]
fn confirms(shape: &Shape, batch: &[u8], record: &Record<'_>) -> bool {
    let [t0, t1, t2] = texts_of(&record.event);
    let parts = [record.callsite.file, t0, t1, t2];
    parts.iter().enumerate().all(|(i, part)| {
        shape.unfixed & (1 << i) == 0
            || part.is_some_and(|text| holds(batch, shape.offsets[i], text.as_bytes()))
    })
}

/// [`confirms`] of parts 1 and 2 alone (a datum's category and key), out of line.
#[inline(never)]
fn confirms_pair(shape: &Shape, batch: &[u8], first: &str, second: &str) -> bool {
    holds(batch, shape.offsets[1], first.as_bytes())
        && holds(batch, shape.offsets[2], second.as_bytes())
}

/// What the steady path needs of a region or datum, taken apart once.
struct Hot<'r> {
    nesting: u32,
    repo: Option<i64>,
    /// See [`texts_of`].
    texts: [Option<&'r str>; 3],
    /// A datum's value or JSON (empty for a region).
    text: &'r str,
    /// The record's `t_rel` (0 for a `region_enter`).
    t_rel: u64,
}

impl BatchEncoder {
    /// The callsite id and string ids of a record whose shape is not remembered: each
    /// looked up by its address, at its home slot or along the probe (`None` if one is
    /// not in the batch, or its text changed), and the shape remembered for next time.
    /// Not the home slot alone: a string whose home another took would then miss here
    /// at every record, and its record go the general way.
    #[inline(never)]
    fn steady_refs(&mut self, record: &Record<'_>, key: ShapeKey) -> Option<(u32, [u32; 3])> {
        let texts = texts_of(&record.event);
        let batch = &self.buf[..self.len];
        let site = record.callsite;
        let mut unfixed = 0;
        let mut offsets = [0; 4];
        let callsite = if site.file.is_none() && site.line == 0 {
            0
        } else {
            let (id, offset, fixed) = self.callsites.entry(site.file, site.line)?;
            if !fixed {
                if !site
                    .file
                    .is_some_and(|f| holds(batch, offset, f.as_bytes()))
                {
                    return None;
                }
                unfixed |= 1;
                offsets[0] = offset;
            }
            id
        };
        let mut ids = [0; 3];
        for (i, text) in texts.iter().enumerate() {
            if let Some(text) = text {
                let (id, offset, fixed) = self.strings.entry(text)?;
                if !fixed {
                    if !holds(batch, offset, text.as_bytes()) {
                        return None;
                    }
                    unfixed |= 2 << i;
                    offsets[i + 1] = offset;
                }
                ids[i] = id;
            }
        }
        self.shapes.insert(key, callsite, ids, offsets, unfixed);
        Some((callsite, ids))
    }

    /// Writes `record` if it is a region or datum the batch can write as references
    /// alone (see the module docs); `false`, with nothing changed, otherwise. Each kind
    /// gets a copy of the path of its own, where every test of the kind folds away.
    #[inline(always)]
    pub(crate) fn try_encode_steady(&mut self, record: &Record<'_>) -> bool {
        match record.event {
            Trace2Event::RegionEnter { region, nesting } => self.steady::<{ kind::REGION_ENTER }>(
                record,
                Hot {
                    nesting,
                    repo: region.repo,
                    texts: [region.category, region.label, region.msg],
                    text: "",
                    t_rel: 0,
                },
            ),
            Trace2Event::RegionLeave {
                region,
                nesting,
                t_rel_us,
            } => self.steady::<{ kind::REGION_LEAVE }>(
                record,
                Hot {
                    nesting,
                    repo: region.repo,
                    texts: [region.category, region.label, region.msg],
                    text: "",
                    t_rel: t_rel_us,
                },
            ),
            Trace2Event::Data {
                repo,
                category,
                key,
                value,
                nesting,
                t_rel_us,
            } => self.steady::<{ kind::DATA }>(
                record,
                Hot {
                    nesting,
                    repo,
                    texts: [Some(category), Some(key), None],
                    text: value,
                    t_rel: t_rel_us,
                },
            ),
            // Out of line: three kinds in the dispatch compare, four would jump
            // through a table.
            _ => self.try_encode_steady_json(record),
        }
    }

    /// [`Self::try_encode_steady`] of a `data_json` record (`false` for another kind).
    #[inline(never)]
    fn try_encode_steady_json(&mut self, record: &Record<'_>) -> bool {
        match record.event {
            Trace2Event::DataJson {
                repo,
                category,
                key,
                json,
                nesting,
                t_rel_us,
            } => self.steady::<{ kind::DATA_JSON }>(
                record,
                Hot {
                    nesting,
                    repo,
                    texts: [Some(category), Some(key), None],
                    text: json,
                    t_rel: t_rel_us,
                },
            ),
            _ => false,
        }
    }

    /// The callsite and string ids of a steady record of kind `KIND` whose texts are
    /// `texts`, and their one-byte packing ([`one_byte_refs`]): from the shape seen
    /// before (confirmed against the batch when some of its strings are not fixed), or
    /// looked up; `None` when the record must take the general path.
    #[inline(always)]
    fn steady_shape<const KIND: u8>(
        &mut self,
        record: &Record<'_>,
        texts: [Option<&str>; 3],
    ) -> Option<(u32, [u32; 3], u64)> {
        let site = record.callsite;
        let [file, line] = site_key_parts(site.file, site.line);
        let [t0, l0] = text_key(texts[0]);
        let [t1, l1] = text_key(texts[1]);
        let [t2, l2] = text_key(texts[2]);
        let key = [file, line, t0, l0, t1, l1, t2, l2];
        match self.shapes.find(&key) {
            Some(shape) if shape.unfixed == 0 => Some((shape.callsite, shape.ids, shape.one_byte)),
            Some(shape) => {
                let batch = &self.buf[..self.len];
                let confirmed = match (KIND, texts) {
                    // A datum's category and key, copied by the layer: the usual case.
                    (kind::DATA | kind::DATA_JSON, [Some(category), Some(key), _])
                        if shape.unfixed == 0b110 =>
                    {
                        confirms_pair(shape, batch, category, key)
                    }
                    _ => confirms(shape, batch, record),
                };
                confirmed.then_some((shape.callsite, shape.ids, shape.one_byte))
            }
            None => self
                .steady_refs(record, key)
                .map(|(callsite, ids)| (callsite, ids, one_byte_refs(callsite, ids))),
        }
    }

    /// [`Self::try_encode_steady`] of a record of kind `KIND`, taken apart as `hot`.
    #[inline(always)]
    fn steady<const KIND: u8>(&mut self, record: &Record<'_>, hot: Hot<'_>) -> bool {
        let ticks = record.time.t_abs_us;
        // The batch's first record writes the batch header; time gone back a `TICKS`.
        if self.len == 0 || ticks < self.last_ticks {
            return false;
        }
        let Hot {
            nesting,
            repo,
            texts,
            text,
            t_rel,
        } = hot;
        // No control record: the predicted open regions, the same wall-clock
        // correction, the same thread.
        // (The correction is the wall clock less the anchor and the ticks.)
        if record.open_regions != nesting.saturating_sub(1)
            || record.time.wall_us.wrapping_sub(ticks as i64) != self.wall_base
            || !same_bytes(record.thread.as_bytes(), self.thread_name.as_bytes())
        {
            return false;
        }
        let Some((callsite, ids, one_byte)) = self.steady_shape::<KIND>(record, texts) else {
            return false;
        };
        let callsite = u64::from(callsite);
        let ids = ids.map(u64::from);
        // The room: the window, and a datum's text after it.
        let limit = self.buf.len() - frame::TRAILER_LEN;
        let Some(room) = self.buf[..limit].get_mut(self.len..) else {
            return false;
        };
        if room.len() < WINDOW + text.len() {
            return false;
        }
        let Some(window) = room.first_chunk_mut::<WINDOW>() else {
            return false;
        };
        let mut w = Window {
            bytes: window,
            at: 0,
        };
        let dt = ticks - self.last_ticks;
        let level = u64::from(nesting);
        let rel = if KIND == kind::REGION_ENTER {
            0
        } else {
            let predicted = self.origins.predict(KIND, nesting, ticks);
            spec::rel_time_to_wire(t_rel, predicted)
        };
        let region = KIND == kind::REGION_ENTER || KIND == kind::REGION_LEAVE;
        let last_id = if region { ids[2] } else { 0 };
        if one_byte != 0 && repo.is_none() && (dt | level | rel) < 0x80 {
            // The usual case: a callsite, no repository, every value one byte (the ids'
            // bytes packed with the shape). The head, the values and the ids, in their
            // order, in one word; a datum's third id byte is 0 and is not counted.
            let head = u64::from(KIND | spec::HAS_CALLSITE);
            let mut word = head | dt << 8 | (one_byte & 0xff) << 16 | level << 24;
            let mut n = 4;
            if KIND != kind::REGION_ENTER {
                word |= rel << 32;
                n = 5;
            }
            word |= (one_byte >> 8) << (8 * n);
            n += if region { 3 } else { 2 };
            if let Some(first) = w.bytes.first_chunk_mut::<8>() {
                *first = word.to_le_bytes();
            }
            w.at = n;
        } else if one_byte != 0 && repo.is_none() && (level | rel) < 0x80 && dt < 0x4000 {
            // The same a record 128 µs to 16 ms after the last (a region's leave after
            // real work): `dt` in two bytes. Out of line: the usual case's code stays
            // as small.
            w.at = two_byte_dt::<KIND>(w.bytes, dt, level, rel, one_byte);
        } else {
            general_head::<KIND>(
                &mut w,
                dt,
                callsite,
                repo,
                level,
                rel,
                [ids[0], ids[1], last_id],
            );
        }
        let inline_text = datum_value::<KIND>(&mut w, text);
        let mut written = w.at;
        if inline_text {
            // Right after the fixed part (the room holds the window and the text).
            let Some(slot) = room.get_mut(written..written + text.len()) else {
                return false;
            };
            copy_short(slot, text.as_bytes());
            written += text.len();
        }
        self.origins.learn(KIND, nesting, ticks, t_rel);
        self.len += written;
        self.last_ticks = ticks;
        self.open_state = spec::open_after(KIND, record.open_regions, self.open_state);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::DEFAULT_BATCH_SIZE;
    use crate::encode::tests::{ANCHOR, at};
    use crate::record::RegionInfo;

    /// Records of every hot kind and shape, repeated so that most are steady: regions
    /// with and without strings and a repository, data with packed numbers, text and
    /// JSON, strings on the heap, a callsite-less record, large times.
    fn records(heap: &str) -> Vec<Record<'_>> {
        let region = RegionInfo {
            repo: None,
            category: Some("index"),
            label: Some("do_read_index"),
            msg: Some(heap),
        };
        let bare = RegionInfo {
            repo: Some(-7),
            category: None,
            label: Some("x"),
            msg: None,
        };
        let mut out = Vec::new();
        for round in 0..4u64 {
            let t = round * 1_000_000;
            out.push(at(
                Trace2Event::RegionEnter { region, nesting: 1 },
                t,
                0,
                10,
            ));
            out.push(at(
                Trace2Event::RegionEnter {
                    region: bare,
                    nesting: 2,
                },
                t + 5,
                1,
                0,
            ));
            for (i, value) in ["123456", "", "12x", "007", "18446744073709551615"]
                .into_iter()
                .enumerate()
            {
                out.push(at(
                    Trace2Event::Data {
                        repo: (i == 1).then_some(3),
                        category: "index",
                        key: heap,
                        value,
                        nesting: 3,
                        t_rel_us: 40 + i as u64,
                    },
                    t + 50 + i as u64,
                    2,
                    20,
                ));
            }
            out.push(at(
                Trace2Event::DataJson {
                    repo: None,
                    category: "c",
                    key: "k",
                    json: "{\"a\":[1,2]}",
                    nesting: 3,
                    t_rel_us: 300,
                },
                t + 400,
                2,
                21,
            ));
            out.push(at(
                Trace2Event::RegionLeave {
                    region: bare,
                    nesting: 2,
                    t_rel_us: 200_000,
                },
                t + 200_005,
                1,
                0,
            ));
            out.push(at(
                Trace2Event::RegionLeave {
                    region,
                    nesting: 1,
                    t_rel_us: 200_010,
                },
                t + 200_010,
                0,
                10,
            ));
        }
        out
    }

    #[test]
    fn steady_and_general_paths_write_the_same_bytes() {
        let heap = String::from("on the heap");
        let records = records(&heap);
        let mut both = BatchEncoder::new(DEFAULT_BATCH_SIZE, ANCHOR);
        let mut general = BatchEncoder::new(DEFAULT_BATCH_SIZE, ANCHOR);
        let mut steady = 0;
        for r in &records {
            let before = both.len;
            if both.try_encode_steady(r) {
                steady += 1;
            } else {
                assert_eq!(both.len, before, "a refusal changes nothing");
                assert!(both.try_encode(r, false));
            }
            assert!(general.try_encode(r, false));
            assert_eq!(both.buf[..both.len], general.buf[..general.len]);
        }
        // Every record after the first round is written by the steady path.
        assert!(
            steady >= records.len() * 3 / 4,
            "{steady} of {}",
            records.len()
        );
    }

    #[test]
    fn records_that_need_more_than_references_are_refused() {
        let mut enc = BatchEncoder::new(DEFAULT_BATCH_SIZE, ANCHOR);
        let region = RegionInfo {
            repo: None,
            category: Some("index"),
            label: Some("read"),
            msg: None,
        };
        let enter = |t, thread| Record {
            thread,
            ..at(Trace2Event::RegionEnter { region, nesting: 1 }, t, 0, 10)
        };
        // The batch's first record.
        assert!(!enc.try_encode_steady(&enter(10, "main")));
        assert!(enc.try_encode(&enter(10, "main"), false));
        assert!(enc.try_encode_steady(&enter(20, "main")));
        // Another thread, time gone back, other open regions, a new string.
        assert!(!enc.try_encode_steady(&enter(30, "other")));
        assert!(!enc.try_encode_steady(&enter(5, "main")));
        let mut open = enter(30, "main");
        open.open_regions = 4;
        assert!(!enc.try_encode_steady(&open));
        let new_label = RegionInfo {
            label: Some("write"),
            ..region
        };
        let new = at(
            Trace2Event::RegionEnter {
                region: new_label,
                nesting: 1,
            },
            30,
            0,
            10,
        );
        assert!(!enc.try_encode_steady(&new));
        // Not a hot kind.
        assert!(!enc.try_encode_steady(&at(Trace2Event::Printf { msg: None }, 30, 0, 10)));
    }

    #[test]
    fn a_label_whose_home_slot_another_took_is_still_steady() {
        let mut enc = BatchEncoder::new(DEFAULT_BATCH_SIZE, ANCHOR);
        // Labels cut from one text, two of them hashing to one slot of the strings.
        let text = "abcdefghijklmnopqrstuvwxyz".repeat(2000);
        let label = |at: usize| &text[at..at + 6];
        let first = label(0);
        let second = (1..text.len() - 6)
            .map(label)
            .find(|l| enc.strings.home_slot(l) == enc.strings.home_slot(first))
            .expect("two labels of one slot");
        let enter = |label, t| {
            let region = RegionInfo {
                repo: None,
                category: None,
                label: Some(label),
                msg: None,
            };
            at(Trace2Event::RegionEnter { region, nesting: 1 }, t, 0, 10)
        };
        let mut general = BatchEncoder::new(DEFAULT_BATCH_SIZE, ANCHOR);
        for (t, label) in [first, second].into_iter().enumerate() {
            assert!(enc.try_encode(&enter(label, t as u64), false));
            assert!(general.try_encode(&enter(label, t as u64), false));
        }
        for t in 2..6 {
            let record = enter(if t % 2 == 0 { first } else { second }, t);
            assert!(enc.try_encode_steady(&record), "record at {t}");
            assert!(general.try_encode(&record, false));
        }
        assert_eq!(enc.buf[..enc.len], general.buf[..general.len]);
    }

    #[test]
    fn a_new_wall_clock_correction_is_refused_then_steady_again() {
        let region = RegionInfo {
            repo: None,
            category: Some("index"),
            label: Some("read"),
            msg: None,
        };
        // The wall clock steps 5 s ahead of the ticks at 30, and back at 50.
        let enter = |t: u64, step: i64| {
            let mut r = at(Trace2Event::RegionEnter { region, nesting: 1 }, t, 0, 10);
            r.time.wall_us += step;
            r
        };
        let mut enc = BatchEncoder::new(DEFAULT_BATCH_SIZE, ANCHOR);
        let mut general = BatchEncoder::new(DEFAULT_BATCH_SIZE, ANCHOR);
        for (t, step, steady) in [
            (10, 0, false),
            (20, 0, true),
            (30, 5_000_000, false),
            (40, 5_000_000, true),
            (50, 0, false),
            (60, 0, true),
        ] {
            let r = enter(t, step);
            assert_eq!(enc.try_encode_steady(&r), steady, "at {t}");
            if !steady {
                assert!(enc.try_encode(&r, false));
            }
            assert!(general.try_encode(&r, false));
        }
        assert_eq!(enc.buf[..enc.len], general.buf[..general.len]);
    }

    #[test]
    fn a_data_json_record_takes_the_steady_path_too() {
        let json = |t| {
            at(
                Trace2Event::DataJson {
                    repo: None,
                    category: "c",
                    key: "k",
                    json: "{\"a\":1}",
                    nesting: 1,
                    t_rel_us: 0,
                },
                t,
                0,
                10,
            )
        };
        let mut enc = BatchEncoder::new(DEFAULT_BATCH_SIZE, ANCHOR);
        let mut general = BatchEncoder::new(DEFAULT_BATCH_SIZE, ANCHOR);
        assert!(!enc.try_encode_steady(&json(1)));
        assert!(enc.try_encode(&json(1), false));
        assert!(enc.try_encode_steady(&json(2)));
        for t in [1, 2] {
            assert!(general.try_encode(&json(t), false));
        }
        assert_eq!(enc.buf[..enc.len], general.buf[..general.len]);
    }

    #[test]
    fn time_deltas_of_one_two_and_three_bytes_are_written_alike_on_both_paths() {
        let region = RegionInfo {
            repo: None,
            category: Some("index"),
            label: Some("read"),
            msg: None,
        };
        let mut enc = BatchEncoder::new(DEFAULT_BATCH_SIZE, ANCHOR);
        let mut general = BatchEncoder::new(DEFAULT_BATCH_SIZE, ANCHOR);
        let mut t = 0;
        let mut steady = 0;
        for (i, dt) in [0, 1, 0x7f, 0x80, 0x81, 0x3fff, 0x4000, 0x1_0000, 300, 5]
            .into_iter()
            .enumerate()
        {
            t += dt;
            // An enter, a datum in it and its leave, each `dt` after the one before.
            let enter = at(Trace2Event::RegionEnter { region, nesting: 1 }, t, 0, 10);
            let datum = at(
                Trace2Event::Data {
                    repo: None,
                    category: "index",
                    key: "entries",
                    value: "12",
                    nesting: 2,
                    t_rel_us: dt,
                },
                t + dt,
                1,
                11,
            );
            let leave = at(
                Trace2Event::RegionLeave {
                    region,
                    nesting: 1,
                    t_rel_us: 2 * dt,
                },
                t + 2 * dt,
                0,
                10,
            );
            t += 2 * dt;
            for r in [enter, datum, leave] {
                if enc.try_encode_steady(&r) {
                    steady += 1;
                } else {
                    assert!(i == 0, "record {i} refused");
                    assert!(enc.try_encode(&r, false));
                }
                assert!(general.try_encode(&r, false));
                assert_eq!(enc.buf[..enc.len], general.buf[..general.len], "record {i}");
            }
        }
        assert_eq!(steady, 28);
    }

    #[test]
    fn ids_past_one_byte_are_written_alike_on_both_paths() {
        // 300 labels, each defined by the general path and then repeated on the steady
        // path: their ids cross 0x7f, where the one-word form gives way to varints.
        let labels: Vec<String> = (0..300).map(|i| format!("label{i}")).collect();
        let mut enc = BatchEncoder::new(DEFAULT_BATCH_SIZE, ANCHOR);
        let mut general = BatchEncoder::new(DEFAULT_BATCH_SIZE, ANCHOR);
        // `try_encode` does not grow the buffer (`encode_general` does): the whole
        // batch's room from the start.
        enc.resize(DEFAULT_BATCH_SIZE);
        general.resize(DEFAULT_BATCH_SIZE);
        let mut steady = 0;
        for (i, label) in labels.iter().enumerate() {
            let region = RegionInfo {
                repo: None,
                category: Some("index"),
                label: Some(label),
                msg: None,
            };
            for round in 0..2 {
                let t = 2 * i as u64 + round;
                let r = at(Trace2Event::RegionEnter { region, nesting: 1 }, t, 0, 10);
                if enc.try_encode_steady(&r) {
                    steady += 1;
                } else {
                    assert!(enc.try_encode(&r, false));
                }
                assert!(general.try_encode(&r, false));
            }
        }
        assert_eq!(enc.buf[..enc.len], general.buf[..general.len]);
        assert!(steady >= 299, "{steady} steady");
    }

    /// A datum `category`/`key` = 1 at `t`, with a call site: the shape the steady path
    /// remembers by its texts' addresses.
    fn datum<'a>(category: &'a str, key: &'a str, t: u64) -> Record<'a> {
        at(
            Trace2Event::Data {
                repo: None,
                category,
                key,
                value: "1",
                nesting: 1,
                t_rel_us: 0,
            },
            t,
            0,
            10,
        )
    }

    #[test]
    fn a_changed_text_at_a_remembered_address_is_not_taken_for_the_old() {
        let mut enc = BatchEncoder::new(DEFAULT_BATCH_SIZE, ANCHOR);
        let mut buf = *b"alpha";
        {
            let key = std::str::from_utf8(&buf).unwrap();
            assert!(enc.try_encode(&datum("c", key, 1), false));
            assert!(enc.try_encode_steady(&datum("c", key, 2)));
            assert!(enc.try_encode_steady(&datum("c", key, 3)));
        }
        // Same address and length, other text.
        buf.copy_from_slice(b"omega");
        let key = std::str::from_utf8(&buf).unwrap();
        assert!(!enc.try_encode_steady(&datum("c", key, 4)));
    }

    #[test]
    fn a_datum_whose_copied_category_changed_is_not_taken_for_the_old() {
        let mut enc = BatchEncoder::new(DEFAULT_BATCH_SIZE, ANCHOR);
        let mut general = BatchEncoder::new(DEFAULT_BATCH_SIZE, ANCHOR);
        // Both on the stack, as the layer's copies are in its buffer.
        let mut category = *b"index";
        let key = *b"cache_nr";
        let key = std::str::from_utf8(&key).unwrap();
        {
            let category = std::str::from_utf8(&category).unwrap();
            for t in 1..4 {
                let r = datum(category, key, t);
                assert_eq!(enc.try_encode_steady(&r), t > 1, "at {t}");
                if t == 1 {
                    assert!(enc.try_encode(&r, false));
                }
                assert!(general.try_encode(&r, false));
            }
        }
        category.copy_from_slice(b"other");
        let category = std::str::from_utf8(&category).unwrap();
        let r = datum(category, key, 4);
        assert!(!enc.try_encode_steady(&r));
        assert!(enc.try_encode(&r, false));
        assert!(general.try_encode(&r, false));
        assert_eq!(enc.buf[..enc.len], general.buf[..general.len]);
    }
}
