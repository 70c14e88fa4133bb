//! Stalls as counters and triggers: each stall of the analysis is counted
//! once it has settled (no signal can still merge into it), and triggers
//! the flight recorder once, as soon as it is long enough.

use std::collections::{BTreeMap, HashSet};

use crate::model::{Analysis, StallKind};

/// A stall ending this long before the latest entry takes no more merges:
/// waits are reported when they end, so one that ends later may still
/// reach back into it for about its own length.
pub const SETTLE_NS: u64 = 5_000_000_000;
/// Distinct culprits whose stall time is kept (the least dropped first).
const MAX_CULPRITS: usize = 1_000;

/// What the settled stalls add up to since the start.
#[derive(Default)]
pub struct StallTotals {
    /// (kind, cpu) -> (stalls, ns).
    pub by_kind_cpu: BTreeMap<(StallKind, u32), (u64, u64)>,
    /// (comm, container) -> ns of stalls it was the culprit of.
    pub by_culprit: BTreeMap<(String, String), u64>,
}

/// A stall long enough to dump the flight window around it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trigger {
    pub start_ns: u64,
    pub end_ns: u64,
}

pub struct StallWatch {
    trigger_ns: u64,
    counted: HashSet<u64>,
    triggered: HashSet<u64>,
    pub totals: StallTotals,
}

impl StallWatch {
    pub fn new(trigger_ns: u64) -> StallWatch {
        StallWatch {
            trigger_ns,
            counted: HashSet::new(),
            triggered: HashSet::new(),
            totals: StallTotals::default(),
        }
    }

    /// Count what settled since the last call; return the stalls that
    /// became long enough to trigger.
    pub fn update(&mut self, analysis: &Analysis) -> Vec<Trigger> {
        let now = analysis.now_ns();
        let mut present = HashSet::new();
        let mut triggers = Vec::new();
        for stall in analysis.stalls() {
            present.insert(stall.id);
            if stall.duration_ns() >= self.trigger_ns && self.triggered.insert(stall.id) {
                triggers.push(Trigger {
                    start_ns: stall.start_ns,
                    end_ns: stall.end_ns,
                });
            }
            if stall.end_ns + SETTLE_NS > now || !self.counted.insert(stall.id) {
                continue;
            }
            let (count, ns) = self
                .totals
                .by_kind_cpu
                .entry((stall.kind, stall.cpu))
                .or_default();
            *count += 1;
            *ns += stall.duration_ns();
            if let Some(culprit) = &stall.culprit {
                let key = (
                    culprit.task.comm.clone(),
                    analysis.container(culprit.task.cgroup),
                );
                *self.totals.by_culprit.entry(key).or_default() += stall.duration_ns();
            }
        }
        // Forget the ids of stalls the analysis dropped or merged away.
        self.counted.retain(|id| present.contains(id));
        self.triggered.retain(|id| present.contains(id));
        self.bound_culprits();
        triggers
    }

    fn bound_culprits(&mut self) {
        while self.totals.by_culprit.len() > MAX_CULPRITS {
            let least = self
                .totals
                .by_culprit
                .iter()
                .min_by_key(|(_, ns)| **ns)
                .map(|(key, _)| key.clone());
            match least {
                Some(key) => self.totals.by_culprit.remove(&key),
                None => break,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::KIND_RUNQ;
    use crate::event::testing::{runq_record, task};
    use crate::model::tests::{header, names, MS, NOISY, VICTIM};
    use crate::stream::{Entry, KernelSnapshot};

    /// The victim waited `wait_ns` on `cpu` behind the noisy cgroup's hog, until 2 s.
    fn analysis_with_wait(cpu: u32, wait_ns: u64) -> Analysis {
        let mut analysis = Analysis::new(header());
        analysis.apply(&names());
        let waited = runq_record(
            KIND_RUNQ,
            cpu,
            2_000 * MS,
            wait_ns,
            task(300, "api-worker", VICTIM),
            task(400, "hog", NOISY),
            None,
            0,
        );
        analysis.apply(&Entry::Records(waited));
        analysis
    }

    fn later(ts_ns: u64) -> Entry {
        Entry::Kernel(KernelSnapshot {
            ts_ns,
            ..KernelSnapshot::default()
        })
    }

    #[test]
    fn a_stall_triggers_at_once_and_counts_once_after_it_settled() {
        let mut analysis = analysis_with_wait(1, 131 * MS);
        let mut watch = StallWatch::new(50 * MS);

        let triggers = watch.update(&analysis);
        assert_eq!(
            triggers,
            vec![Trigger {
                start_ns: 1_869 * MS,
                end_ns: 2_000 * MS
            }]
        );
        assert!(watch.totals.by_kind_cpu.is_empty(), "not settled yet");

        analysis.apply(&later(2_000 * MS + SETTLE_NS));
        assert!(watch.update(&analysis).is_empty(), "triggers once");
        analysis.apply(&later(2_000 * MS + 2 * SETTLE_NS));
        assert!(watch.update(&analysis).is_empty());
        assert_eq!(
            watch.totals.by_kind_cpu,
            BTreeMap::from([((StallKind::Runq, 1), (1, 131 * MS))])
        );
        assert_eq!(
            watch.totals.by_culprit,
            BTreeMap::from([(("hog".to_string(), "/noisy".to_string()), 131 * MS)])
        );
    }

    #[test]
    fn a_short_stall_counts_without_triggering() {
        let mut analysis = analysis_with_wait(0, 20 * MS);
        analysis.apply(&later(10_000 * MS));
        let mut watch = StallWatch::new(50 * MS);
        assert!(watch.update(&analysis).is_empty());
        assert_eq!(
            watch.totals.by_kind_cpu,
            BTreeMap::from([((StallKind::Runq, 0), (1, 20 * MS))])
        );
    }
}
