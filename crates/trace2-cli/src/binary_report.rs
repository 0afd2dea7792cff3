//! What the binary decoder's report means to a reader of the trace: real damage (bytes skipped,
//! batches lost or cut short, events of unknown kinds, streams that could not be read) against
//! streams that simply stop.
//!
//! A stream without its END frame is a process that was killed, or is still running: every event
//! it wrote is there, nothing was lost. It is worth a note naming the process, not exit status 1.
//! So is a frame a kill cut at a page end (the process's last, at the end of the file or with
//! other processes' frames after it): one batch of that process is lost, nothing else.
//! Damage names only the streams it touched.

use tracing_trace2_binary::DecodeReport;
use tracing_trace2_binary::decode::StreamReport;

/// A decode report sorted into what was lost and what only stopped early.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Assessment {
    /// What was lost, in one line, when anything was.
    pub damage: Option<String>,
    /// One line per stream that ended without an END frame.
    pub unfinished: Vec<String>,
}

/// Sorts `report` into damage and unfinished streams.
pub fn assess(report: &DecodeReport) -> Assessment {
    let mut lost = Vec::new();
    if report.skipped_bytes > 0 {
        lost.push(format!(
            "skipped {} bytes in {} damaged place(s)",
            report.skipped_bytes, report.damaged_regions
        ));
    }
    for (what, n) in [
        ("unreadable frames", report.invalid_frames),
        ("batches without their stream header", report.orphan_batches),
        ("batches of undecodable streams", report.undecodable_batches),
    ] {
        if n > 0 {
            lost.push(format!("{n} {what}"));
        }
    }
    let mut unfinished = Vec::new();
    let mut cut_named = 0;
    for stream in &report.streams {
        cut_named += stream.cut_bytes;
        if let Some(why) = stream_damage(stream) {
            lost.push(format!("{}: {why}", stream_name(stream)));
        } else if stream.cut_frames > 0 {
            // Where a killed writer's last `write` stopped: the kernel stops a file write
            // only at a page end, as it cuts a text target's last line.
            let (what, frames) = match (stream.cut_frames, stream.ended) {
                (1, false) => ("was killed while writing", "its last frame".to_owned()),
                // The exit ended a thread that was writing (it ends the other threads as
                // a kill does).
                (1, true) => (
                    "ended while a thread was writing",
                    "that thread's last frame".to_owned(),
                ),
                // Two writers of one stream (a process and a copy of it), each killed.
                (n, _) => ("was killed while writing", format!("{n} frames")),
            };
            let (stop, batches) = if stream.cut_frames == 1 {
                ("stops at a page end", "that batch is lost")
            } else {
                ("stop at page ends", "those batches are lost")
            };
            unfinished.push(format!(
                "{} {what}: {frames} ({} bytes) {stop}; {batches}, its other {} events are all \
                 there",
                stream_name(stream),
                stream.cut_bytes,
                stream.events
            ));
        } else if !stream.ended {
            unfinished.push(format!(
                "{} ended without an END frame (killed, or still running); its {} events are all there",
                stream_name(stream),
                stream.events
            ));
        }
    }
    if report.cut_bytes > cut_named {
        // Cut frames whose stream the input does not name (too few bytes left, or a
        // stream that left nothing else).
        unfinished.push(format!(
            "a frame ({} bytes) stops at a page end, cut where its process was killed; \
             its batch is lost, nothing else",
            report.cut_bytes - cut_named
        ));
    }
    if !lost.is_empty() {
        // Skipped bytes may be the missing END frames: name those streams in the one line.
        for stream in report
            .streams
            .iter()
            .filter(|s| !s.ended && stream_damage(s).is_none())
        {
            lost.push(format!("{}: no END frame", stream_name(stream)));
        }
        unfinished.clear();
    }
    let damage = (!lost.is_empty()).then(|| {
        format!(
            "{} events from {} frames ({} bytes) in {} stream(s) intact; {}",
            report.events,
            report.frames,
            report.bytes,
            report.streams.len(),
            lost.join("; ")
        )
    });
    Assessment { damage, unfinished }
}

/// What was lost in one stream, if anything.
fn stream_damage(stream: &StreamReport) -> Option<String> {
    if let Some(why) = &stream.unsupported {
        return Some(format!("not decodable ({why})"));
    }
    let lost: u64 = stream.threads.iter().map(|t| t.lost_batches).sum();
    let cut: u64 = stream.threads.iter().map(|t| t.abandoned_batches).sum();
    let unknown: u64 = stream.threads.iter().map(|t| t.unknown_events).sum();
    if lost + cut + unknown == 0 {
        return None;
    }
    let mut parts = Vec::new();
    if lost > 0 {
        parts.push(format!("{lost} batch(es) lost"));
    }
    if cut > 0 {
        parts.push(format!("{cut} batch(es) cut short"));
    }
    if unknown > 0 {
        parts.push(format!(
            "{unknown} event(s) of kinds this decoder does not know"
        ));
    }
    if !stream.ended {
        parts.push("no END frame".to_owned());
    }
    Some(parts.join(", "))
}

/// `stream <sid> (pid N)`, or the stream id when its header was never read.
fn stream_name(stream: &StreamReport) -> String {
    match (&stream.sid, stream.pid) {
        (Some(sid), Some(pid)) => format!("stream {sid} (pid {pid})"),
        (Some(sid), None) => format!("stream {sid}"),
        _ => format!("stream {:016x} (no stream header)", stream.stream_id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_trace2_binary::decode::ThreadReport;

    fn stream(id: u64, ended: bool, lost: u64) -> StreamReport {
        StreamReport {
            stream_id: id,
            sid: Some(format!("sid-{id}")),
            pid: Some(id as u32),
            ended,
            events: 10,
            threads: vec![ThreadReport {
                lost_batches: lost,
                ..ThreadReport::default()
            }],
            ..StreamReport::default()
        }
    }

    #[test]
    fn a_stream_without_end_is_not_damage() {
        let report = DecodeReport {
            events: 30,
            streams: vec![stream(1, true, 0), stream(2, false, 0), stream(3, true, 0)],
            ..DecodeReport::default()
        };
        let assessment = assess(&report);
        assert_eq!(assessment.damage, None);
        assert_eq!(assessment.unfinished.len(), 1);
        assert!(
            assessment.unfinished[0].starts_with("stream sid-2 (pid 2) ended without an END frame"),
            "{:?}",
            assessment.unfinished
        );
    }

    #[test]
    fn a_last_frame_cut_at_a_page_end_is_a_kill_not_damage() {
        let mut killed = stream(2, false, 0);
        killed.cut_frames = 1;
        killed.cut_bytes = 300;
        let report = DecodeReport {
            cut_frames: 2,
            cut_bytes: 340,
            streams: vec![stream(1, false, 0), killed, stream(3, true, 0)],
            ..DecodeReport::default()
        };
        let assessment = assess(&report);
        assert_eq!(assessment.damage, None);
        let notes = &assessment.unfinished;
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(
            notes[0].starts_with("stream sid-1 (pid 1) ended without an END frame"),
            "{notes:?}"
        );
        assert!(
            notes[1].starts_with(
                "stream sid-2 (pid 2) was killed while writing: its last frame (300 bytes) \
                 stops at a page end"
            ),
            "{notes:?}"
        );
        // A cut frame whose stream the input does not name.
        assert!(
            notes[2].starts_with("a frame (40 bytes) stops at a page end"),
            "{notes:?}"
        );
    }

    #[test]
    fn two_cut_frames_and_a_cut_after_the_end_are_not_damage() {
        let mut twice = stream(1, false, 0);
        twice.cut_frames = 2;
        twice.cut_bytes = 9000;
        let mut exited = stream(2, true, 0);
        exited.cut_frames = 1;
        exited.cut_bytes = 4000;
        let report = DecodeReport {
            cut_frames: 3,
            cut_bytes: 13000,
            streams: vec![twice, exited],
            ..DecodeReport::default()
        };
        let assessment = assess(&report);
        assert_eq!(assessment.damage, None);
        assert_eq!(
            assessment.unfinished,
            [
                "stream sid-1 (pid 1) was killed while writing: 2 frames (9000 bytes) stop at \
                 page ends; those batches are lost, its other 10 events are all there",
                "stream sid-2 (pid 2) ended while a thread was writing: that thread's last frame \
                 (4000 bytes) stops at a page end; that batch is lost, its other 10 events are \
                 all there",
            ]
        );
    }

    #[test]
    fn damage_names_only_the_streams_it_touched() {
        let report = DecodeReport {
            skipped_bytes: 40,
            damaged_regions: 1,
            streams: vec![stream(1, true, 0), stream(2, false, 2), stream(3, false, 0)],
            ..DecodeReport::default()
        };
        let assessment = assess(&report);
        let damage = assessment.damage.unwrap();
        assert!(damage.contains("skipped 40 bytes"), "{damage}");
        assert!(
            damage.contains("stream sid-2 (pid 2): 2 batch(es) lost, no END frame"),
            "{damage}"
        );
        assert!(
            damage.contains("stream sid-3 (pid 3): no END frame"),
            "{damage}"
        );
        assert!(!damage.contains("sid-1"), "{damage}");
        assert!(assessment.unfinished.is_empty());
    }

    #[test]
    fn events_of_unknown_kinds_are_damage() {
        let mut unknown = stream(1, true, 0);
        unknown.threads[0].unknown_events = 3;
        let report = DecodeReport {
            streams: vec![unknown],
            ..DecodeReport::default()
        };
        let damage = assess(&report).damage.unwrap();
        assert!(
            damage.contains("3 event(s) of kinds this decoder does not know"),
            "{damage}"
        );
    }
}
