//! Counters since `serve` started, by bounded label, from the cumulative
//! kernel and cgroupfs snapshots. Each snapshot adds what grew since the
//! previous one, per kernel key (cgroup, CPU and vector, cgroup path), to
//! the series its container has now: series only grow, even when a key
//! leaves a kernel map or a container moves into `other`.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::labels::{ContainerLabels, OTHER};
use crate::histogram::Histogram;
use crate::model::Analysis;
use crate::stream::{KernelSnapshot, PressureSnapshot, ThrottleSnapshot, WaitCauses};

/// Why a runnable task of a container waited for its CPU (in waits of at least 1 ms, split
/// where each ended: `stream::WaitCauses`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cause {
    /// The hypervisor ran another vCPU.
    Steal,
    /// Its cgroup's (or an ancestor's) CPU quota ran out.
    Throttled,
    /// Softirqs ran on its CPU.
    Softirq,
    /// Nobody held its CPU: wake-up or migration latency.
    Idle,
    /// A kernel thread held its CPU.
    Kthread,
    /// A task of its own cgroup.
    Own,
    /// A task of another cgroup.
    Other,
}

impl Cause {
    /// In the order of `WaitCauses::parts`.
    pub const ALL: [Cause; 7] = [
        Cause::Steal,
        Cause::Throttled,
        Cause::Softirq,
        Cause::Idle,
        Cause::Kthread,
        Cause::Own,
        Cause::Other,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Cause::Steal => "steal",
            Cause::Throttled => "throttled",
            Cause::Softirq => "softirq",
            Cause::Idle => "idle",
            Cause::Kthread => "kthread",
            Cause::Own => "own",
            Cause::Other => "other",
        }
    }

    /// The wait time of each cause in `why` (none: recorded before the split was kept).
    fn split(why: Option<&WaitCauses>) -> [u64; 7] {
        why.map_or([0; 7], |w| w.parts().map(|(_, ns)| ns))
    }
}

/// A latency histogram's growth: counts per in-kernel slot, their number
/// and sum.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hist {
    pub slots: Vec<u64>,
    pub count: u64,
    pub sum_ns: u64,
}

impl Hist {
    fn of(histogram: &Histogram, sum_ns: u64) -> Hist {
        let slots = histogram.slots().to_vec();
        Hist {
            count: slots.iter().sum(),
            slots,
            sum_ns,
        }
    }

    /// What grew from `before` to `self`; all of `self` when anything
    /// shrank (the key was dropped and started again).
    fn since(&self, before: Option<&Hist>) -> Hist {
        let Some(before) = before else {
            return self.clone();
        };
        let slot = |i: usize| before.slots.get(i).copied().unwrap_or(0);
        let shrank = before.count > self.count
            || before.sum_ns > self.sum_ns
            || (0..before.slots.len()).any(|i| self.slots.get(i).copied().unwrap_or(0) < slot(i));
        if shrank {
            return self.clone();
        }
        Hist {
            slots: (0..self.slots.len())
                .map(|i| self.slots[i] - slot(i))
                .collect(),
            count: self.count - before.count,
            sum_ns: self.sum_ns - before.sum_ns,
        }
    }

    fn add(&mut self, delta: &Hist) {
        if self.slots.len() < delta.slots.len() {
            self.slots.resize(delta.slots.len(), 0);
        }
        for (total, d) in self.slots.iter_mut().zip(&delta.slots) {
            *total += d;
        }
        self.count += delta.count;
        self.sum_ns += delta.sum_ns;
    }
}

/// Growth of a cumulative counter; all of `now` after a reset.
fn grew(now: u64, before: Option<u64>) -> u64 {
    match before {
        Some(b) if now >= b => now - b,
        _ => now,
    }
}

#[derive(Clone, Default)]
struct RunqSeen {
    latency: Hist,
    /// Wait time by cause, ns.
    causes: [u64; 7],
}

/// A container's CFS bandwidth counters (cgroupfs `cpu.stat`, cgroups
/// with a quota).
#[derive(Clone, Copy, Default, Debug, PartialEq)]
pub struct Throttled {
    /// Periods in which it had runnable tasks.
    pub periods: u64,
    /// ... and in which its quota ran out.
    pub throttled_periods: u64,
    pub throttled_ns: u64,
    /// CPU time its tasks used.
    pub usage_ns: u64,
}

/// cpu.stat's cumulative counters of one cgroup, as last read.
#[derive(Clone, Copy, Default)]
struct CpuStat {
    periods: u64,
    throttled_periods: u64,
    throttled_ns: u64,
    usage_ns: u64,
}

pub struct Totals {
    labels: ContainerLabels,
    runq_seen: HashMap<u64, RunqSeen>,
    softirq_seen: HashMap<(u32, u32), Hist>,
    throttle_seen: HashMap<String, CpuStat>,
    pressure_seen: HashMap<String, u64>,
    lost_seen: HashMap<String, u64>,
    /// Cgroups in the run-queue map that were not found removed, and the
    /// container each belongs to; how many each container has.
    live_cgroups: HashMap<u64, String>,
    live_per_container: HashMap<String, usize>,
    /// Cgroups found removed that the map still lists (a per-CPU slot
    /// keeps them until it is reused).
    removed_cgroups: HashSet<u64>,
    /// By container label.
    pub runq: BTreeMap<String, Hist>,
    /// Wait time (ns) by container label and cause.
    pub wait_causes: BTreeMap<(String, Cause), u64>,
    /// By softirq vector number.
    pub softirq: BTreeMap<u32, Hist>,
    pub throttled: BTreeMap<String, Throttled>,
    /// PSI's `some` time (ns) of each container's cgroup, from its first
    /// reading, by container label.
    pub pressure_some: BTreeMap<String, u64>,
    /// CPUs the quota allows, by container label (not for `other`).
    pub quota_cpus: BTreeMap<String, f64>,
    /// Records lost, by kind.
    pub lost: BTreeMap<String, u64>,
}

impl Totals {
    pub fn new(max_containers: usize) -> Totals {
        Totals {
            labels: ContainerLabels::new(max_containers),
            runq_seen: HashMap::new(),
            softirq_seen: HashMap::new(),
            throttle_seen: HashMap::new(),
            pressure_seen: HashMap::new(),
            lost_seen: HashMap::new(),
            live_cgroups: HashMap::new(),
            live_per_container: HashMap::new(),
            removed_cgroups: HashSet::new(),
            runq: BTreeMap::new(),
            wait_causes: BTreeMap::new(),
            softirq: BTreeMap::new(),
            throttled: BTreeMap::new(),
            pressure_some: BTreeMap::new(),
            quota_cpus: BTreeMap::new(),
            lost: BTreeMap::new(),
        }
    }

    /// Add what the kernel's maps grew by; `analysis` names the cgroups.
    pub fn apply_kernel(&mut self, k: &KernelSnapshot, analysis: &Analysis) {
        // Keys gone from the maps (removed cgroups) never come back.
        let present: HashSet<u64> = k.runq.iter().map(|r| r.cgroup).collect();
        self.runq_seen.retain(|cgroup, _| present.contains(cgroup));
        self.follow_removals(k, &present, analysis);
        for r in &k.runq {
            let now = RunqSeen {
                latency: Hist::of(&r.latency, r.total_ns),
                causes: Cause::split(r.why.as_ref()),
            };
            let before = self.runq_seen.insert(r.cgroup, now.clone());
            let latency = now.latency.since(before.as_ref().map(|b| &b.latency));
            let causes: Vec<u64> = (0..Cause::ALL.len())
                .map(|i| grew(now.causes[i], before.as_ref().map(|b| b.causes[i])))
                .collect();
            if latency.count == 0 && causes.iter().all(|&c| c == 0) {
                continue;
            }
            let label = self.label(&analysis.container(r.cgroup), k.ts_ns);
            self.runq.entry(label.clone()).or_default().add(&latency);
            for (cause, n) in Cause::ALL.into_iter().zip(causes) {
                // Only causes that happened get a series (the budget).
                if n > 0 {
                    *self.wait_causes.entry((label.clone(), cause)).or_default() += n;
                }
            }
        }
        for s in &k.softirq {
            let now = Hist::of(&s.delay, s.delay_total_ns);
            let before = self.softirq_seen.insert((s.cpu, s.vector), now.clone());
            let delta = now.since(before.as_ref());
            self.softirq.entry(s.vector).or_default().add(&delta);
        }
        let undecodable = ("undecodable".to_string(), analysis.undecodable_records());
        for (kind, n) in k.counters.lost.iter().cloned().chain([undecodable]) {
            let before = self.lost_seen.insert(kind.clone(), n);
            *self.lost.entry(kind).or_default() += grew(n, before);
        }
        for gone in self.labels.expire(k.ts_ns) {
            self.drop_series(&gone);
        }
    }

    /// Add what cgroupfs's CFS bandwidth counters grew by; `analysis`
    /// names the containers.
    pub fn apply_throttle(&mut self, t: &ThrottleSnapshot, analysis: &Analysis) {
        let present: HashSet<&str> = t.cgroups.iter().map(|c| c.path.as_str()).collect();
        self.throttle_seen
            .retain(|path, _| present.contains(path.as_str()));
        for c in &t.cgroups {
            let now = CpuStat {
                periods: c.nr_periods,
                throttled_periods: c.nr_throttled,
                throttled_ns: c.throttled_ns,
                usage_ns: c.usage_ns.unwrap_or(0),
            };
            let before = self.throttle_seen.insert(c.path.clone(), now);
            let growth = Throttled {
                periods: grew(now.periods, before.map(|b| b.periods)),
                throttled_periods: grew(now.throttled_periods, before.map(|b| b.throttled_periods)),
                throttled_ns: grew(now.throttled_ns, before.map(|b| b.throttled_ns)),
                usage_ns: grew(now.usage_ns, before.map(|b| b.usage_ns)),
            };
            if growth == Throttled::default() {
                continue;
            }
            let label = self.label(&analysis.container_of_path(&c.path), t.ts_ns);
            let total = self.throttled.entry(label.clone()).or_default();
            total.periods += growth.periods;
            total.throttled_periods += growth.throttled_periods;
            total.throttled_ns += growth.throttled_ns;
            total.usage_ns += growth.usage_ns;
            if c.period_us > 0 && label != OTHER {
                self.quota_cpus
                    .insert(label, c.quota_us as f64 / c.period_us as f64);
            }
        }
    }

    /// Tells the labels which containers are gone: those whose every cgroup
    /// in the run-queue map was found removed.
    fn follow_removals(&mut self, k: &KernelSnapshot, present: &HashSet<u64>, analysis: &Analysis) {
        for id in &k.removed_cgroups {
            self.removed_cgroups.insert(*id);
            let Some(container) = self.live_cgroups.remove(id) else {
                continue;
            };
            let left = self
                .live_per_container
                .entry(container.clone())
                .or_default();
            *left = left.saturating_sub(1);
            if *left == 0 {
                self.live_per_container.remove(&container);
                self.labels.gone(&container, k.ts_ns);
            }
        }
        self.removed_cgroups.retain(|id| present.contains(id));
        for &id in present {
            if self.removed_cgroups.contains(&id) || self.live_cgroups.contains_key(&id) {
                continue;
            }
            let container = analysis.container(id);
            *self
                .live_per_container
                .entry(container.clone())
                .or_default() += 1;
            self.live_cgroups.insert(id, container);
        }
    }

    /// Add what each cgroup's PSI `some` total grew by since its first
    /// reading (not since the cgroup was made, before stalltop watched it).
    /// PSI counts a cgroup's subtree: a cgroup under another of the same
    /// container (a unit's sub-cgroups) is in that one's time already.
    pub fn apply_pressure(&mut self, p: &PressureSnapshot, analysis: &Analysis) {
        let containers: HashMap<&str, String> = p
            .cgroups
            .iter()
            .map(|c| (c.path.as_str(), analysis.container_of_path(&c.path)))
            .collect();
        self.pressure_seen
            .retain(|path, _| containers.contains_key(path.as_str()));
        for c in &p.cgroups {
            let now = c.pressure.some_us * 1000;
            let Some(before) = self.pressure_seen.insert(c.path.clone(), now) else {
                continue;
            };
            let container = &containers[c.path.as_str()];
            let inside_its_own = ancestors(&c.path)
                .any(|a| containers.get(a).is_some_and(|other| other == container));
            let ns = grew(now, Some(before));
            if ns > 0 && !inside_its_own {
                let label = self.label(container, p.ts_ns);
                *self.pressure_some.entry(label).or_default() += ns;
            }
        }
    }

    /// The label `container`'s activity counts under; a container whose
    /// place was taken loses its series.
    fn label(&mut self, container: &str, now_ns: u64) -> String {
        let assigned = self.labels.assign(container, now_ns);
        if let Some(gone) = assigned.evicted {
            self.drop_series(&gone);
        }
        assigned.label
    }

    fn drop_series(&mut self, container: &str) {
        self.runq.remove(container);
        self.wait_causes.retain(|(label, _), _| label != container);
        self.throttled.remove(container);
        self.pressure_some.remove(container);
        self.quota_cpus.remove(container);
    }
}

/// "/a/b/c" -> "/a/b", "/a", "/".
fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    let mut rest = path;
    std::iter::from_fn(move || {
        if rest == "/" || rest.is_empty() {
            return None;
        }
        rest = match rest.rfind('/') {
            Some(0) | None => "/",
            Some(i) => &rest[..i],
        };
        Some(rest)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::labels::LINGER_NS;
    use crate::model::tests::{header, names, MS, NOISY, VICTIM};
    use crate::stream::{CgroupRunq, CgroupThrottle, Entry};

    const S: u64 = 1_000_000_000;

    /// A cgroup's run-queue row: `waits`, and `other` ns of them behind another cgroup.
    fn runq(cgroup: u64, waits: &[u64], other: u64) -> CgroupRunq {
        let mut latency = Histogram::default();
        for &w in waits {
            latency.record(w);
        }
        CgroupRunq {
            cgroup,
            latency,
            count: waits.len() as u64,
            total_ns: waits.iter().sum(),
            max_ns: waits.iter().copied().max().unwrap_or(0),
            why: Some(WaitCauses {
                other_cgroup_ns: other,
                ..WaitCauses::default()
            }),
            ..CgroupRunq::default()
        }
    }

    fn snapshot(ts_ns: u64, runq: Vec<CgroupRunq>) -> KernelSnapshot {
        KernelSnapshot {
            ts_ns,
            runq,
            ..KernelSnapshot::default()
        }
    }

    fn analysis() -> Analysis {
        let mut a = Analysis::new(header());
        a.apply(&names());
        a
    }

    #[test]
    fn runq_series_add_what_grew_and_survive_a_key_leaving_the_map() {
        let a = analysis();
        let mut totals = Totals::new(10);
        totals.apply_kernel(&snapshot(1, vec![runq(NOISY, &[MS, 2 * MS], 1)]), &a);
        totals.apply_kernel(
            &snapshot(2, vec![runq(NOISY, &[MS, 2 * MS, 4 * MS], 3)]),
            &a,
        );
        let noisy = &totals.runq["/noisy"];
        assert_eq!((noisy.count, noisy.sum_ns), (3, 7 * MS));
        assert_eq!(totals.wait_causes[&("/noisy".into(), Cause::Other)], 3);
        // The cgroup left the kernel's map and came back with new counts: they add up.
        totals.apply_kernel(&snapshot(3, vec![]), &a);
        totals.apply_kernel(&snapshot(4, vec![runq(NOISY, &[8 * MS], 1)]), &a);
        let noisy = &totals.runq["/noisy"];
        assert_eq!((noisy.count, noisy.sum_ns), (4, 15 * MS));
        assert_eq!(noisy.slots.iter().sum::<u64>(), 4);
        assert_eq!(totals.wait_causes[&("/noisy".into(), Cause::Other)], 4);
    }

    #[test]
    fn wait_time_goes_to_each_cause_as_it_grew() {
        let a = analysis();
        let mut totals = Totals::new(10);
        let split = |n: u64| WaitCauses {
            steal_ns: n,
            throttled_ns: 2 * n,
            softirq_ns: 3 * n,
            idle_ns: 4 * n,
            kthread_ns: 5 * n,
            same_cgroup_ns: 6 * n,
            other_cgroup_ns: 7 * n,
        };
        let row = |n| CgroupRunq {
            why: Some(split(n)),
            ..runq(VICTIM, &[MS], 0)
        };
        totals.apply_kernel(&snapshot(1, vec![row(MS)]), &a);
        totals.apply_kernel(&snapshot(2, vec![row(3 * MS)]), &a);
        let victim = a.container(VICTIM);
        let got: Vec<(&str, u64)> = Cause::ALL
            .iter()
            .map(|&c| (c.name(), totals.wait_causes[&(victim.clone(), c)]))
            .collect();
        assert_eq!(
            got,
            [
                ("steal", 3 * MS),
                ("throttled", 6 * MS),
                ("softirq", 9 * MS),
                ("idle", 12 * MS),
                ("kthread", 15 * MS),
                ("own", 18 * MS),
                ("other", 21 * MS),
            ]
        );
        // A recording made before the split was kept adds to no cause.
        let unsplit = CgroupRunq {
            why: None,
            ..runq(NOISY, &[MS], 0)
        };
        totals.apply_kernel(&snapshot(3, vec![unsplit]), &a);
        assert!(!totals.wait_causes.keys().any(|(c, _)| c == "/noisy"));
    }

    #[test]
    fn containers_past_the_limit_count_under_other() {
        let a = analysis();
        let mut totals = Totals::new(1);
        let both = vec![runq(NOISY, &[MS], 0), runq(VICTIM, &[MS, MS], 2)];
        totals.apply_kernel(&snapshot(1, both), &a);
        assert_eq!(totals.runq["/noisy"].count, 1);
        assert_eq!(totals.runq[OTHER].count, 2);
        assert_eq!(totals.wait_causes[&(OTHER.into(), Cause::Other)], 2);
        assert_eq!(totals.runq.len(), 2);
    }

    #[test]
    fn throttling_adds_periods_usage_and_time_by_container() {
        let mut a = analysis();
        a.apply(&Entry::Kernel(snapshot(1, vec![])));
        let mut totals = Totals::new(10);
        totals.apply_kernel(&snapshot(1, vec![runq(NOISY, &[MS], 0)]), &a);
        let throttle = |periods, throttled, ns, usage| ThrottleSnapshot {
            ts_ns: 1,
            cgroups: vec![CgroupThrottle {
                path: "/noisy".into(),
                quota_us: 12_000,
                period_us: 100_000,
                nr_periods: periods,
                nr_throttled: throttled,
                throttled_ns: ns,
                usage_ns: Some(usage),
                ..CgroupThrottle::default()
            }],
        };
        totals.apply_throttle(&throttle(100, 5, 40 * MS, 900 * MS), &a);
        totals.apply_throttle(&throttle(110, 7, 90 * MS, 1_000 * MS), &a);
        assert_eq!(
            totals.throttled["/noisy"],
            Throttled {
                periods: 110,
                throttled_periods: 7,
                throttled_ns: 90 * MS,
                usage_ns: 1_000 * MS,
            }
        );
        assert_eq!(totals.quota_cpus["/noisy"], 0.12);
    }

    #[test]
    fn a_removed_container_gives_its_place_and_its_series_end_after_the_linger() {
        let a = analysis();
        let mut totals = Totals::new(1);
        totals.apply_kernel(&snapshot(S, vec![runq(NOISY, &[MS], 1)]), &a);
        // The victim waits while the noisy container holds the only place.
        let both = vec![runq(NOISY, &[MS], 1), runq(VICTIM, &[MS], 0)];
        totals.apply_kernel(&snapshot(2 * S, both.clone()), &a);
        assert_eq!(totals.runq[OTHER].count, 1);
        // The noisy cgroup is removed (its per-CPU slot still lists it).
        let removed = KernelSnapshot {
            removed_cgroups: vec![NOISY],
            ..snapshot(3 * S, both.clone())
        };
        totals.apply_kernel(&removed, &a);
        assert!(totals.runq.contains_key("/noisy"), "lingers");
        let mut more = both;
        more[1] = runq(VICTIM, &[MS, 2 * MS], 0);
        totals.apply_kernel(&snapshot(4 * S, more.clone()), &a);
        assert!(!totals.runq.contains_key("/noisy"), "gave its place");
        let victim = a.container(VICTIM);
        assert_eq!(
            totals.runq[&victim].count, 1,
            "counts from its own series' start"
        );
        // Still listed by the map, it is not taken for alive again.
        more[1] = runq(VICTIM, &[MS, 2 * MS], 0);
        totals.apply_kernel(&snapshot(4 * S + LINGER_NS, more), &a);
        let labels: Vec<&String> = totals.runq.keys().collect();
        assert_eq!(labels, [OTHER, &victim]);
    }

    #[test]
    fn a_removed_container_alone_leaves_after_the_linger() {
        let a = analysis();
        let mut totals = Totals::new(5);
        totals.apply_kernel(&snapshot(S, vec![runq(NOISY, &[MS], 1)]), &a);
        let removed = KernelSnapshot {
            removed_cgroups: vec![NOISY],
            ..snapshot(2 * S, vec![])
        };
        totals.apply_kernel(&removed, &a);
        totals.apply_kernel(&snapshot(2 * S + LINGER_NS - 1, vec![]), &a);
        assert!(totals.runq.contains_key("/noisy"));
        totals.apply_kernel(&snapshot(2 * S + LINGER_NS, vec![]), &a);
        assert!(totals.runq.is_empty() && totals.wait_causes.is_empty());
    }

    #[test]
    fn pressure_adds_what_psi_grew_by_once_per_container() {
        use crate::stream::{CgroupPressure, Pressure};
        let a = analysis();
        let mut totals = Totals::new(10);
        let psi = |ts_ns, noisy_us, inner_us| PressureSnapshot {
            ts_ns,
            host: None,
            cgroups: [
                ("/system.slice/db.service", noisy_us),
                ("/system.slice/db.service/worker", inner_us),
                ("/noisy", inner_us),
            ]
            .into_iter()
            .map(|(path, some_us)| CgroupPressure {
                path: path.into(),
                pressure: Pressure {
                    some_us,
                    full_us: None,
                },
            })
            .collect(),
        };
        // The first reading is the baseline: PSI from before stalltop watched is not counted.
        totals.apply_pressure(&psi(1, 5_000, 4_000), &a);
        assert!(totals.pressure_some.is_empty());
        totals.apply_pressure(&psi(2, 7_000, 5_500), &a);
        // db.service's sub-cgroup is inside the unit's own time: counted once.
        assert_eq!(totals.pressure_some["db.service"], 2 * MS);
        assert_eq!(totals.pressure_some["/noisy"], 1_500_000);
        assert_eq!(totals.pressure_some.len(), 2);
        assert_eq!(ancestors("/a/b/c").collect::<Vec<_>>(), ["/a/b", "/a", "/"]);
        assert_eq!(ancestors("/").count(), 0);
    }
}
