//! `report --perfetto`: a recording as a trace in Perfetto's native format
//! (protobuf TracePackets of track descriptors and track events), for
//! ui.perfetto.dev and its trace processor. A track per CPU with each
//! stall as a slice annotated with what waited and who held the CPU; a
//! track per waiting task under its container, with each wait over the
//! threshold; a flow from each stall to the waits it holds; counters of
//! each CPU's softirq time and of the tasks waiting on it. Timestamps are
//! the recording's CLOCK_MONOTONIC, tied to wall-clock time by a clock
//! snapshot. Pure: entries in, bytes out.

mod annotations;
mod proto;
mod tracks;

use std::collections::{BTreeMap, HashMap};

use prost::Message;

use crate::event::{self, Event, RunqWait};
use crate::model::{Analysis, StallRow};
use crate::stream::{Entry, Header, KernelSnapshot};
use proto::{
    Clock, ClockSnapshot, PacketData, Trace, TracePacket, TrackEvent, CLOCK_MONOTONIC,
    CLOCK_REALTIME, SEQ_INCREMENTAL_STATE_CLEARED, TYPE_COUNTER, TYPE_SLICE_BEGIN, TYPE_SLICE_END,
};
use tracks::{lanes, Track, TrackKey, Tracks};

/// Every packet is on this one sequence.
const SEQUENCE: u32 = 1;
/// `Trace.packet`'s field number: packets are appended to a trace as it.
const TRACE_PACKET_FIELD: u32 = 1;
/// A stall and the waits inside it are searched this far back among the
/// CPU's stalls (by start): stalls of one CPU rarely overlap.
const STALLS_SEARCHED_BACK: usize = 64;

/// A trace and what it holds.
pub struct Exported {
    pub trace: Vec<u8>,
    pub stalls: usize,
    pub waits: usize,
}

/// The trace of a recording: its header and its entries, in order.
pub fn export(header: &Header, entries: &[Entry]) -> Exported {
    // Every stall, not the newest MAX_STALLS: an export is of the whole file.
    let mut analysis = Analysis::keeping(header.clone(), usize::MAX);
    let mut waits: Vec<RunqWait> = Vec::new();
    let mut softirq = SoftirqSeries::default();
    for entry in entries {
        analysis.apply(entry);
        match entry {
            Entry::Records(bytes) => {
                waits.extend(event::decode(bytes).into_iter().filter_map(|e| match e {
                    Ok(Event::Runq(w) | Event::Takeover(w)) => Some(w),
                    _ => None,
                }))
            }
            Entry::Kernel(k) => softirq.add(k),
            Entry::Throttle(_) | Entry::Names(_) | Entry::Pressure(_) => {}
        }
    }
    let stalls = analysis.recent_stall_rows(usize::MAX);
    let mut builder = Builder::default();
    let flows = builder.stalls(&stalls, &waits);
    builder.waits(&analysis, &waits, &flows);
    builder.softirq_counters(&softirq);
    builder.waiting_counters(&waits, header.settings.runq_threshold_ns);
    Exported {
        trace: builder.encode(header),
        stalls: stalls.len(),
        waits: waits.len(),
    }
}

/// A track event's packet at a time, encoded at once (a packet's bytes
/// take far less memory than its message), sorted by time at the end.
struct Timed {
    ts: u64,
    /// At one time: slice ends first (a lane's next slice may begin
    /// where its last ended), then counters, then slice begins.
    order: u8,
    /// The packet as a `Trace.packet` field: key, length, message.
    packet: Vec<u8>,
}

const ORDER_END: u8 = 0;
const ORDER_COUNTER: u8 = 1;
const ORDER_BEGIN: u8 = 2;

#[derive(Default)]
struct Builder {
    tracks: Tracks,
    events: Vec<Timed>,
}

impl Builder {
    /// Each CPU's stalls as slices, on lanes where they overlap. Returns
    /// each wait's stall (its id) and flow, by wait index.
    fn stalls(&mut self, stalls: &[StallRow], waits: &[RunqWait]) -> Vec<Option<(u64, u64)>> {
        let mut by_cpu: BTreeMap<u32, Vec<&StallRow>> = BTreeMap::new();
        for s in stalls {
            by_cpu.entry(s.cpu).or_default().push(s);
        }
        for list in by_cpu.values_mut() {
            list.sort_by_key(|s| (s.start_ns, s.id));
        }
        let mut flows_of: HashMap<u64, Vec<u64>> = HashMap::new();
        let wait_flows: Vec<Option<(u64, u64)>> = waits
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let stall = stall_of(by_cpu.get(&w.cpu)?, w)?;
                let flow = i as u64 + 1;
                flows_of.entry(stall).or_default().push(flow);
                Some((stall, flow))
            })
            .collect();
        for (&cpu, list) in &by_cpu {
            let spans: Vec<(u64, u64)> = list
                .iter()
                .map(|s| slice_span(s.start_ns, s.duration_ns))
                .collect();
            for ((s, lane), (start, end)) in list.iter().zip(lanes(&spans)).zip(spans) {
                let track = self.cpu_stall_track(cpu, lane);
                let mut begin = slice_event(
                    track,
                    TYPE_SLICE_BEGIN,
                    Some(annotations::stall_name(s)),
                    annotations::stall_annotations(s),
                );
                begin.flow_ids = flows_of.remove(&s.id).unwrap_or_default();
                self.push(start, ORDER_BEGIN, begin);
                self.push(
                    end,
                    ORDER_END,
                    slice_event(track, TYPE_SLICE_END, None, Vec::new()),
                );
            }
        }
        wait_flows
    }

    /// Each waiting task's waits as slices, under its container's track,
    /// each ending the flow from its stall.
    fn waits(&mut self, a: &Analysis, waits: &[RunqWait], flows: &[Option<(u64, u64)>]) {
        let mut by_task: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, w) in waits.iter().enumerate() {
            by_task.entry(w.waiter.tid).or_default().push(i);
        }
        for (tid, mut list) in by_task {
            list.sort_by_key(|&i| (waits[i].ts_ns - waits[i].wait_ns.min(waits[i].ts_ns), i));
            let spans: Vec<(u64, u64)> = list
                .iter()
                .map(|&i| {
                    slice_span(
                        waits[i].ts_ns.saturating_sub(waits[i].wait_ns),
                        waits[i].wait_ns,
                    )
                })
                .collect();
            for ((&i, lane), (start, end)) in list.iter().zip(lanes(&spans)).zip(spans) {
                let w = &waits[i];
                let track = self.task_track(a, w, tid, lane);
                let stall = flows[i].map(|(stall, _)| stall);
                let mut begin = slice_event(
                    track,
                    TYPE_SLICE_BEGIN,
                    Some(annotations::wait_name(w)),
                    annotations::wait_annotations(a, w, stall),
                );
                begin.terminating_flow_ids = flows[i].map(|(_, flow)| flow).into_iter().collect();
                self.push(start, ORDER_BEGIN, begin);
                self.push(
                    end,
                    ORDER_END,
                    slice_event(track, TYPE_SLICE_END, None, Vec::new()),
                );
            }
        }
    }

    /// Each CPU's softirq time as a share of the CPU over each interval
    /// between kernel snapshots, held from the interval's start.
    fn softirq_counters(&mut self, series: &SoftirqSeries) {
        for (start, end) in series.points.iter().zip(series.points.iter().skip(1)) {
            let elapsed = end.0.saturating_sub(start.0);
            if elapsed == 0 {
                continue;
            }
            for (&cpu, &ns) in &end.1 {
                let ran = ns.saturating_sub(start.1.get(&cpu).copied().unwrap_or(0));
                let track = self.tracks.uuid(TrackKey::CpuSoftirq { cpu }, |t| {
                    let parent = cpu_track(t, cpu);
                    Track {
                        counter_unit: Some(Some("%".into())),
                        description: Some(
                            "share of the CPU that ran softirqs, per kernel snapshot interval"
                                .into(),
                        ),
                        ..Track::slices(format!("CPU {cpu} softirq %"), Some(parent), 1)
                    }
                });
                let value = ran as f64 * 100.0 / elapsed as f64;
                self.push(start.0, ORDER_COUNTER, counter_event(track, value));
            }
        }
    }

    /// How many tasks wait on each CPU's run queue, counting the waits
    /// that reached the threshold (only those have records), from their
    /// start.
    fn waiting_counters(&mut self, waits: &[RunqWait], threshold_ns: u64) {
        let mut steps: BTreeMap<u32, Vec<(u64, i64)>> = BTreeMap::new();
        for w in waits {
            let (start, end) = slice_span(w.ts_ns.saturating_sub(w.wait_ns), w.wait_ns);
            let cpu = steps.entry(w.cpu).or_default();
            cpu.push((start, 1));
            cpu.push((end, -1));
        }
        let threshold_ms = threshold_ns as f64 / 1e6;
        for (cpu, mut list) in steps {
            // Ends before starts at one time: back to back is not two at once.
            list.sort();
            let track = self.tracks.uuid(TrackKey::CpuWaiting { cpu }, |t| {
                let parent = cpu_track(t, cpu);
                Track {
                    counter_unit: Some(None),
                    description: Some(format!(
                        "tasks waiting for this CPU whose wait reached {threshold_ms} ms \
                         (counted from the start of their wait)"
                    )),
                    ..Track::slices(
                        format!("CPU {cpu} waits ≥{threshold_ms}ms"),
                        Some(parent),
                        2,
                    )
                }
            });
            let mut waiting = 0i64;
            let mut i = 0;
            while i < list.len() {
                let ts = list[i].0;
                while i < list.len() && list[i].0 == ts {
                    waiting += list[i].1;
                    i += 1;
                }
                self.push(ts, ORDER_COUNTER, counter_event(track, waiting as f64));
            }
        }
    }

    fn cpu_stall_track(&mut self, cpu: u32, lane: usize) -> u64 {
        if lane == 0 {
            return cpu_track(&mut self.tracks, cpu);
        }
        self.tracks.uuid(TrackKey::CpuStalls { cpu, lane }, |t| {
            let parent = cpu_track(t, cpu);
            Track::slices(
                format!("CPU {cpu} stalls, overlap {lane}"),
                Some(parent),
                2 + lane as i32,
            )
        })
    }

    fn task_track(&mut self, a: &Analysis, w: &RunqWait, tid: u32, lane: usize) -> u64 {
        let label = a.container(w.waiter.cgroup);
        let name = format!("{} [{tid}]", w.waiter.comm);
        self.tracks.uuid(TrackKey::Task { tid, lane }, |t| {
            let containers = t.uuid(TrackKey::Containers, |_| {
                Track::slices("Waits by container".into(), None, 1)
            });
            let container = t.uuid(
                TrackKey::Container {
                    label: label.clone(),
                },
                |_| Track::slices(label, Some(containers), 0),
            );
            let parent = if lane == 0 {
                container
            } else {
                t.uuid(TrackKey::Task { tid, lane: 0 }, |_| {
                    Track::slices(name.clone(), Some(container), 0)
                })
            };
            let name = if lane == 0 {
                name
            } else {
                format!("{name} overlap {lane}")
            };
            Track::slices(name, Some(parent), lane as i32)
        })
    }

    fn push(&mut self, ts: u64, order: u8, event: TrackEvent) {
        let packet = TracePacket {
            timestamp: Some(ts),
            timestamp_clock_id: Some(CLOCK_MONOTONIC),
            ..packet_of(PacketData::TrackEvent(event))
        };
        let mut bytes = Vec::new();
        prost::encoding::message::encode(TRACE_PACKET_FIELD, &packet, &mut bytes);
        self.events.push(Timed {
            ts,
            order,
            packet: bytes,
        });
    }

    /// The packets in order: the clock snapshot (first on the sequence),
    /// every track's descriptor, then the events by time.
    fn encode(mut self, header: &Header) -> Vec<u8> {
        self.events.sort_by_key(|t| (t.ts, t.order));
        let mut packet = vec![TracePacket {
            sequence_flags: Some(SEQ_INCREMENTAL_STATE_CLEARED),
            ..packet_of(clock_snapshot(header))
        }];
        packet.extend(
            self.tracks
                .into_descriptors()
                .into_iter()
                .map(|d| packet_of(PacketData::TrackDescriptor(d))),
        );
        let mut trace = Trace { packet }.encode_to_vec();
        trace.reserve(self.events.iter().map(|t| t.packet.len()).sum());
        for t in self.events {
            trace.extend_from_slice(&t.packet);
        }
        trace
    }
}

/// A CPU's (lane 0) stall track, under the CPUs' parent, by CPU number.
fn cpu_track(tracks: &mut Tracks, cpu: u32) -> u64 {
    tracks.uuid(TrackKey::CpuStalls { cpu, lane: 0 }, |t| {
        let cpus = t.uuid(TrackKey::Cpus, |_| {
            Track::slices("Stalls by CPU".into(), None, 0)
        });
        Track::slices(format!("CPU {cpu}"), Some(cpus), cpu as i32)
    })
}

/// The stall on its CPU whose span holds the wait (the stall its signal
/// was merged into).
fn stall_of(cpu_stalls: &[&StallRow], w: &RunqWait) -> Option<u64> {
    let start = w.ts_ns.saturating_sub(w.wait_ns);
    let after = cpu_stalls.partition_point(|s| s.start_ns <= start);
    cpu_stalls[..after]
        .iter()
        .rev()
        .take(STALLS_SEARCHED_BACK)
        .find(|s| s.start_ns + s.duration_ns >= w.ts_ns)
        .map(|s| s.id)
}

/// A slice from `start` lasting `duration` (at least 1 ns: a slice's end
/// must follow its begin).
fn slice_span(start: u64, duration: u64) -> (u64, u64) {
    (start, start + duration.max(1))
}

fn slice_event(
    track: u64,
    kind: i32,
    name: Option<String>,
    debug_annotations: Vec<proto::DebugAnnotation>,
) -> TrackEvent {
    TrackEvent {
        debug_annotations,
        r#type: Some(kind),
        track_uuid: Some(track),
        name,
        ..TrackEvent::default()
    }
}

fn counter_event(track: u64, value: f64) -> TrackEvent {
    TrackEvent {
        r#type: Some(TYPE_COUNTER),
        track_uuid: Some(track),
        double_counter_value: Some(value),
        ..TrackEvent::default()
    }
}

fn packet_of(data: PacketData) -> TracePacket {
    TracePacket {
        trusted_packet_sequence_id: Some(SEQUENCE),
        data: Some(data),
        ..TracePacket::default()
    }
}

/// The recording's start on CLOCK_MONOTONIC (the trace's clock) and on
/// CLOCK_REALTIME (the recording's wall-clock offset), so the trace shows
/// wall-clock times and lines up with traces on other clocks.
fn clock_snapshot(header: &Header) -> PacketData {
    let at = header.start_ns;
    let wall = (at as i64)
        .saturating_add(header.wall_clock_offset_ns)
        .max(0) as u64;
    PacketData::ClockSnapshot(ClockSnapshot {
        clocks: vec![
            Clock {
                clock_id: Some(CLOCK_MONOTONIC),
                timestamp: Some(at),
            },
            Clock {
                clock_id: Some(CLOCK_REALTIME),
                timestamp: Some(wall),
            },
        ],
        primary_trace_clock: Some(CLOCK_MONOTONIC as i32),
    })
}

/// Each kernel snapshot's time and, by CPU, the softirq run time so far.
#[derive(Default)]
struct SoftirqSeries {
    points: Vec<(u64, BTreeMap<u32, u64>)>,
}

impl SoftirqSeries {
    fn add(&mut self, k: &KernelSnapshot) {
        let mut by_cpu: BTreeMap<u32, u64> = BTreeMap::new();
        for s in &k.softirq {
            *by_cpu.entry(s.cpu).or_default() += s.run_total_ns;
        }
        self.points.push((k.ts_ns, by_cpu));
    }
}

#[cfg(test)]
mod tests;
