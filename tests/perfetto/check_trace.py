"""Checks a `stalltop report --perfetto` trace against `stalltop report --json` of the same
recording, reading the trace with Perfetto's own generated protos (not stalltop's encoder).

Usage: check_trace.py TRACE REPORT_JSON

Checked: the trace parses as perfetto.protos.Trace; it starts its sequence with a clock snapshot
whose primary clock is CLOCK_MONOTONIC at the recording's start, beside CLOCK_REALTIME, and every
event is on CLOCK_MONOTONIC; every slice that begins ends on its track; every stall of the report
is exactly one slice, on its CPU's track (or an overlap lane under it), at its start and for its
duration, with its kind, waiter, culprit, syscall, path and stacks as annotations; no other slice
is on a CPU's track; every wait slice ends a flow that a stall slice begins, the stall the wait
names; the counter tracks carry values. Prints a JSON summary on stdout; on any failure lists the
problems on stderr and exits 1.
"""

import json
import sys
from collections import Counter, defaultdict

from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent

CLOCK_REALTIME = 1
CLOCK_MONOTONIC = 3
MAX_PROBLEMS = 20


def annotations(event):
    out = {}
    for a in event.debug_annotations:
        if a.array_values:
            out[a.name] = [v.string_value for v in a.array_values]
        elif a.HasField("uint_value"):
            out[a.name] = a.uint_value
        elif a.HasField("string_value"):
            out[a.name] = a.string_value
        elif a.HasField("int_value"):
            out[a.name] = a.int_value
        elif a.HasField("double_value"):
            out[a.name] = a.double_value
    return out


def read_trace(path, problems):
    trace = Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    tracks = {}
    slices = []
    counters = Counter()
    open_slices = defaultdict(list)
    clock = None
    for index, packet in enumerate(trace.packet):
        if packet.trusted_packet_sequence_id != 1:
            problems.append(f"packet {index} is not on sequence 1")
        if packet.HasField("clock_snapshot"):
            if index != 0 or not packet.sequence_flags & 1:
                problems.append("the clock snapshot is not the sequence's first packet")
            clock = packet.clock_snapshot
        elif packet.HasField("track_descriptor"):
            d = packet.track_descriptor
            tracks[d.uuid] = d
        elif packet.HasField("track_event"):
            e = packet.track_event
            if packet.timestamp_clock_id != CLOCK_MONOTONIC:
                problems.append(f"packet {index} is not on CLOCK_MONOTONIC")
            if e.track_uuid not in tracks:
                problems.append(f"packet {index} is on undescribed track {e.track_uuid}")
            if e.type == TrackEvent.TYPE_SLICE_BEGIN:
                open_slices[e.track_uuid].append((packet.timestamp, e))
            elif e.type == TrackEvent.TYPE_SLICE_END:
                if not open_slices[e.track_uuid]:
                    problems.append(f"packet {index} ends a slice never begun")
                    continue
                begin, b = open_slices[e.track_uuid].pop()
                slices.append(
                    {
                        "track": e.track_uuid,
                        "ts": begin,
                        "dur": packet.timestamp - begin,
                        "name": b.name,
                        "args": annotations(b),
                        "flows": list(b.flow_ids),
                        "ends_flows": list(b.terminating_flow_ids),
                    }
                )
            elif e.type == TrackEvent.TYPE_COUNTER:
                if not e.HasField("double_counter_value"):
                    problems.append(f"counter packet {index} has no value")
                counters[e.track_uuid] += 1
            else:
                problems.append(f"packet {index} has event type {e.type}")
    for uuid, stack in open_slices.items():
        if stack:
            problems.append(f"{len(stack)} slices on track {uuid} never end")
    return tracks, slices, counters, clock


def cpu_of_track(tracks, uuid):
    """The CPU whose stall track (or overlap lane) this is, else None."""
    d = tracks.get(uuid)
    while d is not None:
        parent = tracks.get(d.parent_uuid) if d.HasField("parent_uuid") else None
        if d.name.startswith("CPU ") and parent is not None and parent.name == "Stalls by CPU":
            return int(d.name.split()[1])
        d = parent
    return None


def check_stall(stall, found, tracks, problems):
    sid = stall["id"]
    cpu = cpu_of_track(tracks, found["track"])
    if cpu != stall["cpu"]:
        problems.append(f"stall {sid} of CPU {stall['cpu']} is on the track of CPU {cpu}")
    if found["ts"] != stall["start_ns"] or found["dur"] != max(stall["duration_ns"], 1):
        problems.append(
            f"stall {sid}: slice {found['ts']}+{found['dur']} is not "
            f"{stall['start_ns']}+{stall['duration_ns']}"
        )
    args = found["args"]
    expected = {"kind": stall["kind"], "cpu": stall["cpu"], "duration_ns": stall["duration_ns"]}
    waited = stall.get("waited") or {}
    if waited.get("pid") is not None:
        expected["waiter_pid"] = waited["pid"]
    if waited.get("softirq"):
        expected["softirq"] = waited["softirq"]
    culprit = stall.get("culprit")
    if culprit:
        expected["culprit_pid"] = culprit["pid"]
        expected["culprit_tid"] = culprit["tid"]
        expected["culprit_container"] = culprit["container"]
        for key in ("syscall", "path"):
            if culprit.get(key) is not None:
                expected[key] = culprit[key]
        if culprit.get("stack"):
            expected["kernel_stack"] = culprit["stack"]
        if culprit.get("user_stack"):
            expected["user_stack"] = culprit["user_stack"]
    if stall.get("throttled_cgroup"):
        expected["throttled_cgroup"] = stall["throttled_cgroup"]
    for key, value in expected.items():
        if args.get(key) != value:
            problems.append(f"stall {sid}: annotation {key} is {args.get(key)!r}, not {value!r}")
    if culprit is None and "culprit_pid" in args:
        problems.append(f"stall {sid}: has a culprit in the trace but none in the report")


def main(trace_path, report_path):
    problems = []
    with open(report_path) as f:
        report = json.load(f)
    tracks, slices, counters, clock = read_trace(trace_path, problems)

    if clock is None:
        problems.append("no clock snapshot")
    else:
        clocks = {c.clock_id: c.timestamp for c in clock.clocks}
        if clock.primary_trace_clock != CLOCK_MONOTONIC:
            problems.append(f"primary trace clock is {clock.primary_trace_clock}")
        if clocks.get(CLOCK_MONOTONIC) != report["start_ns"]:
            problems.append(f"CLOCK_MONOTONIC at {clocks.get(CLOCK_MONOTONIC)}, not the start")
        if CLOCK_REALTIME not in clocks:
            problems.append("the clock snapshot has no CLOCK_REALTIME")

    stall_slices = {}
    on_cpu_tracks = 0
    for s in slices:
        if cpu_of_track(tracks, s["track"]) is not None:
            on_cpu_tracks += 1
            sid = s["args"].get("stall_id")
            if sid is None or sid in stall_slices:
                problems.append(f"slice {s['name']!r} on a CPU track: no or a repeated stall id")
            stall_slices[sid] = s
    stalls = report["stalls"]
    for stall in stalls:
        found = stall_slices.get(stall["id"])
        if found is None:
            problems.append(f"stall {stall['id']} (CPU {stall['cpu']}) has no slice")
        else:
            check_stall(stall, found, tracks, problems)
    if on_cpu_tracks != len(stalls):
        problems.append(f"{on_cpu_tracks} slices on CPU tracks for {len(stalls)} stalls")

    flow_stall = {}
    for s in stall_slices.values():
        for flow in s["flows"]:
            flow_stall[flow] = s["args"].get("stall_id")
    waits = [s for s in slices if cpu_of_track(tracks, s["track"]) is None]
    flows = 0
    for w in waits:
        for flow in w["ends_flows"]:
            flows += 1
            if flow_stall.get(flow) != w["args"].get("stall_id"):
                problems.append(f"wait {w['name']!r}: flow {flow} does not come from its stall")
    begun = sum(len(s["flows"]) for s in stall_slices.values())
    if begun != flows:
        problems.append(f"{begun} flows begin at stalls, {flows} end at waits")

    summary = {
        "stalls": len(stalls),
        "stall_slices": len(stall_slices),
        "wait_slices": len(waits),
        "flows": flows,
        "counter_tracks": sorted(tracks[u].name for u in counters),
        "counter_values": sum(counters.values()),
        "stacks": sum(1 for s in stall_slices.values() if "kernel_stack" in s["args"]),
    }
    print(json.dumps(summary))
    if problems:
        for p in problems[:MAX_PROBLEMS]:
            print(p, file=sys.stderr)
        if len(problems) > MAX_PROBLEMS:
            print(f"... and {len(problems) - MAX_PROBLEMS} more", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
