//! The tracks of an exported trace: a uuid per track, its descriptor, and
//! lanes for slices that overlap (Perfetto nests the slices of one track,
//! so a slice that overlaps without nesting goes on a lane of its own: a
//! child track of the first).

use std::collections::HashMap;

use super::proto::{CounterDescriptor, TrackDescriptor, CHILD_ORDERING_EXPLICIT, UNIT_COUNT};

/// What a track shows.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TrackKey {
    /// The parent of the CPU tracks.
    Cpus,
    /// A CPU's stalls, on lane 0 and, where they overlap, further lanes.
    CpuStalls {
        cpu: u32,
        lane: usize,
    },
    /// The share of a CPU that ran softirqs, per kernel snapshot interval.
    CpuSoftirq {
        cpu: u32,
    },
    /// Tasks of a CPU waiting on its run queue past the threshold.
    CpuWaiting {
        cpu: u32,
    },
    /// The parent of the waiting containers.
    Containers,
    Container {
        label: String,
    },
    /// A waiting task's waits (by thread id), on lanes as above.
    Task {
        tid: u32,
        lane: usize,
    },
}

#[derive(Default)]
pub struct Tracks {
    uuids: HashMap<TrackKey, u64>,
    descriptors: Vec<TrackDescriptor>,
}

impl Tracks {
    /// The uuid of the track `key`; `describe` makes its descriptor the
    /// first time (its parent's uuid, name, rank among its siblings, and
    /// whether it counts).
    pub fn uuid(&mut self, key: TrackKey, describe: impl FnOnce(&mut Tracks) -> Track) -> u64 {
        if let Some(&uuid) = self.uuids.get(&key) {
            return uuid;
        }
        let track = describe(self);
        let uuid = self.descriptors.len() as u64 + 1;
        self.uuids.insert(key, uuid);
        self.descriptors.push(TrackDescriptor {
            uuid: Some(uuid),
            name: Some(track.name),
            parent_uuid: track.parent,
            counter: track.counter_unit.map(|unit_name| CounterDescriptor {
                unit: unit_name.is_none().then_some(UNIT_COUNT),
                unit_name,
            }),
            child_ordering: Some(CHILD_ORDERING_EXPLICIT),
            sibling_order_rank: Some(track.rank),
            description: track.description,
        });
        uuid
    }

    pub fn into_descriptors(self) -> Vec<TrackDescriptor> {
        self.descriptors
    }
}

/// A track's descriptor, as `Tracks::uuid` is told it.
pub struct Track {
    pub name: String,
    pub parent: Option<u64>,
    pub rank: i32,
    pub description: Option<String>,
    /// Counter tracks: Some(None) counts, Some(Some(unit)) names its unit.
    pub counter_unit: Option<Option<String>>,
}

impl Track {
    pub fn slices(name: String, parent: Option<u64>, rank: i32) -> Track {
        Track {
            name,
            parent,
            rank,
            description: None,
            counter_unit: None,
        }
    }
}

/// The lane of each span (sorted by start): the first whose last span
/// ended by its start, or a new one.
pub fn lanes(spans: &[(u64, u64)]) -> Vec<usize> {
    let mut lane_ends: Vec<u64> = Vec::new();
    spans
        .iter()
        .map(
            |&(start, end)| match lane_ends.iter().position(|&e| e <= start) {
                Some(lane) => {
                    lane_ends[lane] = end;
                    lane
                }
                None => {
                    lane_ends.push(end);
                    lane_ends.len() - 1
                }
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_spans_take_further_lanes_and_free_ones_are_reused() {
        let spans = [(0, 10), (5, 8), (8, 20), (10, 12), (30, 40)];
        assert_eq!(lanes(&spans), [0, 1, 1, 0, 0]);
    }

    #[test]
    fn a_track_is_described_once() {
        let mut tracks = Tracks::default();
        let cpus = tracks.uuid(TrackKey::Cpus, |_| Track::slices("CPUs".into(), None, 0));
        let again = tracks.uuid(TrackKey::Cpus, |_| panic!("described twice"));
        assert_eq!(cpus, again);
        let cpu = tracks.uuid(TrackKey::CpuStalls { cpu: 1, lane: 0 }, |_| {
            Track::slices("CPU 1".into(), Some(cpus), 1)
        });
        let descriptors = tracks.into_descriptors();
        assert_eq!(descriptors.len(), 2);
        assert_eq!(descriptors[1].uuid, Some(cpu));
        assert_eq!(descriptors[1].parent_uuid, Some(cpus));
    }
}
