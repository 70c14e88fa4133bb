//! CFS bandwidth throttling per cgroup: deltas of the cumulative cpu.stat
//! counters between the first and the latest reading.

use std::collections::BTreeMap;

use crate::stream::{CgroupThrottle, ThrottleSnapshot};

#[derive(Default)]
pub struct ThrottleTracker {
    started: bool,
    /// path -> (baseline, latest)
    cgroups: BTreeMap<String, (CgroupThrottle, CgroupThrottle)>,
}

/// Throttling of one cgroup over the tracked interval.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThrottleDelta {
    /// Settings and CPUs as last read.
    pub latest: CgroupThrottle,
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_ns: u64,
    pub usage_ns: Option<u64>,
}

impl ThrottleTracker {
    pub fn apply(&mut self, snapshot: &ThrottleSnapshot) {
        for cg in &snapshot.cgroups {
            match self.cgroups.get_mut(&cg.path) {
                // Counters went backwards: the cgroup was re-created; its
                // counters started from zero again.
                Some((baseline, latest)) if cg.nr_periods < latest.nr_periods => {
                    *baseline = zeroed(cg);
                    *latest = cg.clone();
                }
                Some((_, latest)) => *latest = cg.clone(),
                None => {
                    // Present at the start: count from here. Appeared later:
                    // it was created during the interval, so from zero.
                    let baseline = if self.started { zeroed(cg) } else { cg.clone() };
                    self.cgroups.insert(cg.path.clone(), (baseline, cg.clone()));
                }
            }
        }
        self.started = true;
    }

    /// The quota of the cgroup at `path` as last read: (quota_us, period_us).
    pub fn quota_of(&self, path: &str) -> Option<(u64, u64)> {
        self.cgroups
            .get(path)
            .map(|(_, latest)| (latest.quota_us, latest.period_us))
    }

    pub fn deltas(&self) -> Vec<ThrottleDelta> {
        self.cgroups
            .values()
            .map(|(baseline, latest)| ThrottleDelta {
                latest: latest.clone(),
                nr_periods: latest.nr_periods.saturating_sub(baseline.nr_periods),
                nr_throttled: latest.nr_throttled.saturating_sub(baseline.nr_throttled),
                throttled_ns: latest.throttled_ns.saturating_sub(baseline.throttled_ns),
                usage_ns: latest
                    .usage_ns
                    .map(|u| u.saturating_sub(baseline.usage_ns.unwrap_or(0))),
            })
            .collect()
    }
}

fn zeroed(cg: &CgroupThrottle) -> CgroupThrottle {
    CgroupThrottle {
        nr_periods: 0,
        nr_throttled: 0,
        throttled_ns: 0,
        usage_ns: cg.usage_ns.map(|_| 0),
        ..cg.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cg(path: &str, periods: u64, throttled: u64, throttled_ns: u64) -> CgroupThrottle {
        CgroupThrottle {
            path: path.into(),
            quota_us: 15_000,
            period_us: 100_000,
            nr_periods: periods,
            nr_throttled: throttled,
            throttled_ns,
            usage_ns: Some(periods * 1_000_000),
            ..Default::default()
        }
    }

    fn snap(cgroups: Vec<CgroupThrottle>) -> ThrottleSnapshot {
        ThrottleSnapshot { ts_ns: 0, cgroups }
    }

    #[test]
    fn deltas_count_from_the_first_reading() {
        let mut t = ThrottleTracker::default();
        t.apply(&snap(vec![cg("/web", 100, 10, 5_000_000)]));
        t.apply(&snap(vec![cg("/web", 150, 40, 1_300_000_000)]));
        let d = &t.deltas()[0];
        assert_eq!(
            (d.nr_periods, d.nr_throttled, d.throttled_ns),
            (50, 30, 1_295_000_000)
        );
        assert_eq!(d.usage_ns, Some(50_000_000));
    }

    #[test]
    fn the_quota_of_a_cgroup_is_its_latest_setting() {
        let mut t = ThrottleTracker::default();
        t.apply(&snap(vec![cg("/web", 100, 10, 5_000_000)]));
        assert_eq!(t.quota_of("/web"), Some((15_000, 100_000)));
        assert_eq!(t.quota_of("/batch"), None);
    }

    #[test]
    fn a_cgroup_created_later_counts_from_zero() {
        let mut t = ThrottleTracker::default();
        t.apply(&snap(vec![]));
        t.apply(&snap(vec![cg("/batch", 7, 3, 90_000_000)]));
        assert_eq!(t.deltas()[0].nr_throttled, 3);
    }

    #[test]
    fn a_recreated_cgroup_restarts_its_counters() {
        let mut t = ThrottleTracker::default();
        t.apply(&snap(vec![cg("/job", 500, 100, 9)]));
        t.apply(&snap(vec![cg("/job", 20, 4, 8)]));
        let d = &t.deltas()[0];
        assert_eq!((d.nr_periods, d.nr_throttled), (20, 4));
    }
}
