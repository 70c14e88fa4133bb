//! Two reports compared, for before/after checks: each container's waits
//! for a CPU and what kept it waiting, stalls by kind, culprits. Rates are
//! per second of each recording, so recordings of different lengths
//! compare. Pure; `stalltop diff` prints it, `--fail-if` asks it questions.

use std::collections::BTreeMap;

use serde::Serialize;

use super::report::{Report, RunqRow};
use super::stalls::StallKind;

const KINDS: [StallKind; 5] = [
    StallKind::Runq,
    StallKind::Throttled,
    StallKind::Ksoftirqd,
    StallKind::Softirq,
    StallKind::Irqoff,
];

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Diff {
    pub schema_version: u32,
    pub before: Side,
    pub after: Side,
    /// Every cgroup that waited in either, the largest change of wait per
    /// second first.
    pub containers: Vec<ContainerDiff>,
    pub stalls_by_kind: Vec<KindDiff>,
    /// Culprits of either, the most stall time in B first.
    pub culprits: Vec<CulpritDiff>,
}

/// One recording as the diff names it.
#[derive(Serialize, Debug, Clone, Default, PartialEq)]
pub struct Side {
    pub hostname: String,
    pub start_unix_ns: u64,
    pub duration_ns: u64,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct ContainerDiff {
    pub cgroup: String,
    pub container: String,
    /// Null: the cgroup did not wait in that recording.
    pub before: Option<Waits>,
    pub after: Option<Waits>,
    /// Change of the wait per second of recording, in percent of before
    /// (null when it did not wait before).
    pub wait_change_pct: Option<f64>,
}

/// A cgroup's waits for a CPU in one recording.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Waits {
    pub count: u64,
    pub total_ns: u64,
    /// Wait per second of recording (ns/s).
    pub ns_per_s: f64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// Waits it was kept off by its own cgroup, another one, a kernel
    /// thread, its CPU quota.
    pub same_cgroup: u64,
    pub other_cgroup: u64,
    pub kthread: u64,
    pub throttled: u64,
    /// Who held the CPU most often: "comm (cgroup)".
    pub top_neighbour: Option<String>,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct KindDiff {
    pub kind: StallKind,
    pub before: StallCount,
    pub after: StallCount,
}

#[derive(Serialize, Debug, Clone, Copy, Default, PartialEq)]
pub struct StallCount {
    pub count: u64,
    /// Their spans, summed.
    pub total_ns: u64,
    pub longest_wait_ns: u64,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct CulpritDiff {
    pub comm: String,
    pub container: String,
    pub before: Option<StallCount>,
    pub after: Option<StallCount>,
}

pub fn diff(a: &Report, b: &Report) -> Diff {
    Diff {
        schema_version: super::report::SCHEMA_VERSION,
        before: side(a),
        after: side(b),
        containers: containers(a, b),
        stalls_by_kind: KINDS
            .iter()
            .map(|&kind| KindDiff {
                kind,
                before: stalls_of(a, kind),
                after: stalls_of(b, kind),
            })
            .collect(),
        culprits: culprits(a, b),
    }
}

fn side(r: &Report) -> Side {
    Side {
        hostname: r.host.hostname.clone(),
        start_unix_ns: r.start_unix_ns,
        duration_ns: r.duration_ns,
    }
}

fn per_second(ns: u64, duration_ns: u64) -> f64 {
    ns as f64 / (duration_ns.max(1) as f64 / 1e9)
}

fn waits(row: &RunqRow, duration_ns: u64) -> Waits {
    let p = &row.preempted_by;
    Waits {
        count: row.count,
        total_ns: row.total_ns,
        ns_per_s: per_second(row.total_ns, duration_ns),
        p99_ns: row.p99_ns,
        max_ns: row.max_ns,
        same_cgroup: p.same_cgroup,
        other_cgroup: p.other_cgroup,
        kthread: p.kthread,
        throttled: p.throttled,
        top_neighbour: row
            .top_preemptors
            .first()
            .map(|n| format!("{} ({})", n.comm, n.cgroup)),
    }
}

fn containers(a: &Report, b: &Report) -> Vec<ContainerDiff> {
    let mut by_cgroup: BTreeMap<String, ContainerDiff> = BTreeMap::new();
    for (report, after) in [(a, false), (b, true)] {
        for row in &report.runq {
            let entry = by_cgroup
                .entry(row.cgroup.clone())
                .or_insert_with(|| ContainerDiff {
                    cgroup: row.cgroup.clone(),
                    container: row.container.clone(),
                    before: None,
                    after: None,
                    wait_change_pct: None,
                });
            let w = Some(waits(row, report.duration_ns));
            if after {
                entry.after = w;
            } else {
                entry.before = w;
            }
        }
    }
    let mut rows: Vec<ContainerDiff> = by_cgroup
        .into_values()
        .map(|mut c| {
            let rate = |w: &Option<Waits>| w.as_ref().map_or(0.0, |w| w.ns_per_s);
            let (before, after) = (rate(&c.before), rate(&c.after));
            c.wait_change_pct = (before > 0.0).then(|| round1((after - before) / before * 100.0));
            c
        })
        .collect();
    let change = |c: &ContainerDiff| {
        let rate = |w: &Option<Waits>| w.as_ref().map_or(0.0, |w| w.ns_per_s);
        (rate(&c.after) - rate(&c.before)).abs()
    };
    rows.sort_by(|x, y| change(y).total_cmp(&change(x)));
    rows
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn stalls_of(r: &Report, kind: StallKind) -> StallCount {
    r.stalls
        .iter()
        .filter(|s| s.kind == kind)
        .fold(StallCount::default(), |acc, s| StallCount {
            count: acc.count + 1,
            total_ns: acc.total_ns + s.duration_ns,
            longest_wait_ns: acc.longest_wait_ns.max(s.longest_wait_ns),
        })
}

fn culprits(a: &Report, b: &Report) -> Vec<CulpritDiff> {
    let mut by_key: BTreeMap<(String, String), CulpritDiff> = BTreeMap::new();
    for (report, after) in [(a, false), (b, true)] {
        for c in &report.culprits {
            let entry = by_key
                .entry((c.comm.clone(), c.container.clone()))
                .or_insert_with(|| CulpritDiff {
                    comm: c.comm.clone(),
                    container: c.container.clone(),
                    before: None,
                    after: None,
                });
            let side = if after {
                &mut entry.after
            } else {
                &mut entry.before
            };
            let count = side.get_or_insert_with(StallCount::default);
            count.count += c.count;
            count.total_ns += c.total_stall_ns;
            count.longest_wait_ns = count.longest_wait_ns.max(c.worst_ns);
        }
    }
    let mut rows: Vec<CulpritDiff> = by_key.into_values().collect();
    let after_ns = |c: &CulpritDiff| c.after.map_or(0, |s| s.total_ns);
    rows.sort_by_key(|c| std::cmp::Reverse(after_ns(c)));
    rows
}

impl Diff {
    /// Two empty recordings compared (what `--fail-if` is checked on).
    pub fn empty() -> Diff {
        Diff {
            schema_version: super::report::SCHEMA_VERSION,
            before: Side::default(),
            after: Side::default(),
            containers: Vec::new(),
            stalls_by_kind: Vec::new(),
            culprits: Vec::new(),
        }
    }

    /// The containers whose cgroup or label holds `name` (case-insensitive).
    pub fn containers_named<'d>(&'d self, name: &str) -> impl Iterator<Item = &'d ContainerDiff> {
        let name = name.to_lowercase();
        self.containers.iter().filter(move |c| {
            c.cgroup.to_lowercase().contains(&name) || c.container.to_lowercase().contains(&name)
        })
    }

    /// Stalls of kind `kind` ("" for all) in B (or A).
    pub fn stalls(&self, kind: &str, after: bool) -> u64 {
        self.stalls_by_kind
            .iter()
            .filter(|k| kind.is_empty() || k.kind.name() == kind)
            .map(|k| if after { k.after.count } else { k.before.count })
            .sum()
    }

    /// Is `kind` a stall kind ("" is all)?
    pub fn is_kind(kind: &str) -> bool {
        kind.is_empty() || KINDS.iter().any(|k| k.name() == kind)
    }

    /// Stall time (ns) the culprits whose name holds `name` held the CPU in.
    pub fn culprit_ns(&self, name: &str, after: bool) -> u64 {
        let name = name.to_lowercase();
        self.culprits
            .iter()
            .filter(|c| c.comm.to_lowercase().contains(&name))
            .map(|c| if after { c.after } else { c.before })
            .map(|s| s.map_or(0, |s| s.total_ns))
            .sum()
    }

    /// Culprits in B that were not in A.
    pub fn new_culprits(&self) -> u64 {
        self.culprits
            .iter()
            .filter(|c| c.before.is_none() && c.after.is_some())
            .count() as u64
    }
}

#[cfg(test)]
mod tests;
