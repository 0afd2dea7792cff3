"""Checks a `trace2 export --format perfetto` file against Perfetto's own schema.

Parses the file with the `perfetto_trace_pb2` module that the `perfetto` PyPI package ships
(the compiled protos only: nothing is downloaded, no trace processor is started), then checks
what a viewer relies on:

- every packet parses, is on one sequence, and every track event names a described track;
- interning: each iid a track event uses (event name, categories, debug annotation names) was
  defined on the sequence since its incremental state was last cleared, the first event packet
  clears it, and every event packet says it needs it;
- tracks: process tracks with a pid and a name, thread tracks with pid and tid, counter tracks
  holding only counter events and counter events only on them;
- nesting: on every track, slice begins and ends come in time order and pair up, so slices nest;
- flows: each flow id starts once (on the parent's thread track) and ends once (at a child's
  process slice), later or at the same time.

Prints one JSON object with what it counted; exits 1 with the first problem on stderr.

Usage: python3 check.py [--break WHAT] TRACE.pftrace

`--break interning|nesting|flow` first damages the parsed trace (drops the first interned data,
the last slice end, or a flow's end) to show that the check catches it.
"""

import json
import sys

try:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
except ImportError as error:  # pragma: no cover - reported to the Rust test
    print(f"the perfetto package is missing: {error}", file=sys.stderr)
    sys.exit(3)

CLEARED = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
NEEDS = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
TE = pb.TrackEvent


def fail(message):
    print(f"check.py: {message}", file=sys.stderr)
    sys.exit(1)


def damage(trace, what):
    """Breaks `trace` in the way `what` names."""
    packets = trace.packet
    if what == "interning":
        first = next(p for p in packets if p.HasField("interned_data"))
        first.ClearField("interned_data")
    elif what == "nesting":
        last = max(i for i, p in enumerate(packets)
                   if p.HasField("track_event") and p.track_event.type == TE.TYPE_SLICE_END)
        del packets[last]
    elif what == "flow":
        end = next(p for p in packets
                   if p.HasField("track_event") and p.track_event.terminating_flow_ids)
        end.track_event.ClearField("terminating_flow_ids")
    else:
        fail(f"unknown damage {what!r}")


def main(path, broken=None):
    trace = pb.Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    if broken:
        damage(trace, broken)

    tracks = {}  # uuid -> descriptor
    interned = None  # per-table dicts, None before the first clear
    seen_event = False
    events_by_track = {}  # uuid -> [(ts, order, type, name, flows, terminating)]
    counts = {"packets": len(trace.packet), "events": 0, "interned": 0, "clears": 0}

    for order, packet in enumerate(trace.packet):
        if packet.trusted_packet_sequence_id != 1:
            fail(f"packet {order} is on sequence {packet.trusted_packet_sequence_id}")
        if packet.HasField("track_descriptor"):
            d = packet.track_descriptor
            old = tracks.get(d.uuid)
            if old is not None and (old.HasField("process") != d.HasField("process")
                                    or old.HasField("thread") != d.HasField("thread")
                                    or old.parent_uuid != d.parent_uuid):
                fail(f"track {d.uuid:#x} described twice differently")
            if old is None or d.HasField("process") and d.process.process_name:
                tracks[d.uuid] = d
            continue
        if not packet.HasField("track_event"):
            fail(f"packet {order} is neither a track descriptor nor a track event")
        flags = packet.sequence_flags
        if not flags & NEEDS:
            fail(f"event packet {order} does not say it needs incremental state")
        if flags & CLEARED:
            interned = {"names": {}, "categories": {}, "annotations": {}}
            counts["clears"] += 1
        elif not seen_event:
            fail(f"the first event packet ({order}) does not clear incremental state")
        seen_event = True
        if packet.HasField("interned_data"):
            data = packet.interned_data
            for table, entries in (("names", data.event_names),
                                   ("categories", data.event_categories),
                                   ("annotations", data.debug_annotation_names)):
                for entry in entries:
                    if entry.iid in interned[table]:
                        fail(f"packet {order}: {table} iid {entry.iid} defined twice")
                    interned[table][entry.iid] = entry.name
                    counts["interned"] += 1
        event = packet.track_event
        counts["events"] += 1

        def lookup(table, iid):
            if iid not in interned[table]:
                fail(f"packet {order}: {table} iid {iid} used before it was defined")
            return interned[table][iid]

        name = lookup("names", event.name_iid) if event.HasField("name_iid") else event.name
        for iid in event.category_iids:
            lookup("categories", iid)

        def annotations(items, top):
            for a in items:
                if top and not a.HasField("name_iid"):
                    fail(f"packet {order}: a debug annotation without an interned name")
                if a.HasField("name_iid"):
                    lookup("annotations", a.name_iid)
                annotations(a.dict_entries, False)
                annotations(a.array_values, False)

        annotations(event.debug_annotations, True)
        if event.type == TE.TYPE_UNSPECIFIED:
            fail(f"packet {order}: an event without a type")
        if event.type in (TE.TYPE_SLICE_BEGIN, TE.TYPE_INSTANT) and not name:
            fail(f"packet {order}: a {TE.Type.Name(event.type)} without a name")
        events_by_track.setdefault(event.track_uuid, []).append(
            (packet.timestamp, order, event.type, name,
             list(event.flow_ids), list(event.terminating_flow_ids)))

    processes = {u: d for u, d in tracks.items() if d.HasField("process")}
    threads = {u: d for u, d in tracks.items() if d.HasField("thread")}
    counters = {u for u, d in tracks.items() if d.HasField("counter")}
    pids = {d.process.pid for d in processes.values()}
    for uuid, d in processes.items():
        if not d.process.process_name:
            fail(f"process track {uuid:#x} (pid {d.process.pid}) has no name")
    for uuid, d in threads.items():
        if not d.thread.HasField("pid") or not d.thread.HasField("tid"):
            fail(f"thread track {uuid:#x} lacks its pid or tid")
        if d.thread.pid not in pids:
            fail(f"thread track {uuid:#x} belongs to pid {d.thread.pid}, which has no process track")
    for uuid, d in tracks.items():
        if d.parent_uuid and d.parent_uuid not in tracks:
            fail(f"track {uuid:#x} has an undescribed parent {d.parent_uuid:#x}")

    flow_starts, flow_ends = {}, {}
    slices = 0
    max_depth = 0
    for uuid, events in events_by_track.items():
        if uuid not in tracks:
            fail(f"events on track {uuid:#x}, which has no descriptor")
        is_counter = uuid in counters
        stack = []
        last_ts = None
        for ts, order, kind, name, flows, terminating in events:
            if (kind == TE.TYPE_COUNTER) != is_counter:
                fail(f"packet {order}: a {TE.Type.Name(kind)} on track {uuid:#x}")
            for flow in flows:
                if flow in flow_starts:
                    fail(f"flow {flow} starts twice")
                flow_starts[flow] = (ts, uuid)
            for flow in terminating:
                if flow in flow_ends:
                    fail(f"flow {flow} ends twice")
                flow_ends[flow] = (ts, uuid)
            if kind not in (TE.TYPE_SLICE_BEGIN, TE.TYPE_SLICE_END):
                continue
            # Slices nest when their begins and ends, in file order, never go back in time:
            # then sorting by time (as a reader does) keeps the file's pairing.
            if last_ts is not None and ts < last_ts:
                fail(f"packet {order}: track {uuid:#x} goes back in time ({ts} < {last_ts})")
            last_ts = ts
            if kind == TE.TYPE_SLICE_BEGIN:
                stack.append((ts, name))
                max_depth = max(max_depth, len(stack))
            else:
                if not stack:
                    fail(f"packet {order}: a slice end on track {uuid:#x} with no slice open")
                stack.pop()
                slices += 1
        if stack:
            fail(f"track {uuid:#x} ends with {len(stack)} slice(s) open: {stack[-1][1]!r}")

    if set(flow_starts) != set(flow_ends):
        fail(f"flows that start and never end or the reverse: "
             f"{sorted(set(flow_starts) ^ set(flow_ends))[:5]}")
    process_of_thread = {u: d.thread.pid for u, d in threads.items()}
    for flow, (ts, uuid) in flow_ends.items():
        start_ts, start_uuid = flow_starts[flow]
        if start_ts > ts:
            fail(f"flow {flow} ends before it starts")
        if uuid not in processes:
            fail(f"flow {flow} does not end at a process slice")
        if start_uuid not in threads:
            fail(f"flow {flow} does not start on a thread track")
        if process_of_thread[start_uuid] == processes[uuid].process.pid:
            fail(f"flow {flow} stays in its process")

    counts.update({
        "processes": len(processes),
        "threads": len(threads),
        "counter_tracks": len(counters),
        "counter_events": sum(len(events_by_track.get(u, [])) for u in counters),
        "slices": slices,
        "max_depth": max_depth,
        "flows": len(flow_starts),
        "process_names": sorted(d.process.process_name for d in processes.values()),
        "thread_names": sorted(d.thread.thread_name for d in threads.values()),
        "slice_names": sorted({e[3] for evs in events_by_track.values() for e in evs
                               if e[2] == TE.TYPE_SLICE_BEGIN}),
    })
    print(json.dumps(counts))


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) == 3 and args[0] == "--break":
        main(args[2], args[1])
    elif len(args) == 1:
        main(args[0])
    else:
        fail("usage: check.py [--break WHAT] TRACE")
