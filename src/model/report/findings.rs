//! The report in short: what it found, one finding per line, each naming
//! what waited and why. Softirqs held off behind a task (ksoftirqd and
//! softirq stalls: a busy syscall at irq exit), interrupts kept off by a
//! task, containers that waited for a CPU with their largest cause, and
//! slow calls by caller and file. Built from the report's own rows, so it
//! never says more than the lists under it. Pure.

use std::collections::BTreeMap;

use super::{
    CulpritDetail, Finding, Holder, Quota, Report, RunqRow, SlowSyscallRow, StallRow, ThrottleRow,
    WhyCause,
};
use crate::model::stalls::StallKind;
use crate::model::waits::calls_wait_by_design;
use crate::stream::WaitCause;

/// Findings of each kind kept, the worst first.
const PER_KIND: usize = 3;
/// A container that waited less than this in the whole report is no finding.
const CONTAINER_WAIT_MIN_NS: u64 = 10_000_000;

/// `r`'s findings: each kind's worst first, kinds in the order above.
pub(super) fn findings(r: &Report) -> Vec<Finding> {
    let mut out = stall_findings(&r.stalls, |k| {
        matches!(k, StallKind::Softirq | StallKind::Ksoftirqd)
    });
    out.extend(stall_findings(&r.stalls, |k| k == StallKind::Irqoff));
    out.extend(container_findings(&r.runq, &r.throttling));
    out.extend(slow_call_findings(&r.slow_syscalls));
    out
}

/// Stalls of the kinds `kind` admits that a task held, one finding per CPU
/// and holder (process and container), by their longest single wait.
fn stall_findings(stalls: &[StallRow], kind: impl Fn(StallKind) -> bool) -> Vec<Finding> {
    let mut groups: BTreeMap<(u32, &str, &str), Vec<&StallRow>> = BTreeMap::new();
    for s in stalls.iter().filter(|s| kind(s.kind)) {
        if let Some(c) = &s.culprit {
            groups
                .entry((s.cpu, c.comm.as_str(), c.container.as_str()))
                .or_default()
                .push(s);
        }
    }
    let mut found: Vec<Finding> = groups
        .into_values()
        .map(|group| {
            let worst = group
                .iter()
                .copied()
                .max_by_key(|s| (s.longest_wait_ns, std::cmp::Reverse(s.id)))
                .expect("a group has a stall");
            let culprit = worst.culprit.as_ref().expect("grouped by culprit");
            let holder = holder(culprit);
            let stalls = group.len() as u32;
            if worst.kind == StallKind::Irqoff {
                Finding::InterruptsOff {
                    cpu: worst.cpu,
                    stalls,
                    longest_ns: worst.longest_wait_ns,
                    stall_id: worst.id,
                    holder,
                }
            } else {
                Finding::SoftirqsHeldOff {
                    cpu: worst.cpu,
                    vector: most_often(group.iter().filter_map(|s| s.waited.softirq)),
                    ksoftirqd: group.iter().any(|s| ksoftirqd_waited(s)),
                    stalls,
                    longest_ns: worst.longest_wait_ns,
                    stall_id: worst.id,
                    holder,
                }
            }
        })
        .collect();
    found.sort_by_key(|f| std::cmp::Reverse(f.magnitude_ns()));
    found.truncate(PER_KIND);
    found
}

/// Whether ksoftirqd waited in stall `s` (a takeover, alone or merged).
fn ksoftirqd_waited(s: &StallRow) -> bool {
    s.kind == StallKind::Ksoftirqd
        || s.waited
            .comm
            .as_deref()
            .is_some_and(|c| c.starts_with("ksoftirqd/"))
}

fn holder(c: &CulpritDetail) -> Holder {
    Holder {
        pid: c.pid,
        comm: c.comm.clone(),
        container: c.container.clone(),
        activity: c.activity.clone(),
        path: known(&c.path),
        call_oncpu_ns: c.oncpu_ns,
    }
}

/// A path, unless it is empty (a call on no file).
fn known(path: &Option<String>) -> Option<String> {
    path.clone().filter(|p| !p.is_empty())
}

/// The value met most often (the first of equals), if any.
fn most_often(values: impl Iterator<Item = &'static str>) -> Option<&'static str> {
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    for v in values {
        *counts.entry(v).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by(|(a, x), (b, y)| x.cmp(y).then_with(|| b.cmp(a)))
        .map(|(v, _)| v)
}

/// Containers that waited at least CONTAINER_WAIT_MIN_NS, with the cause
/// that took most of it, unless that was their waits under 1 ms (nothing
/// held them off long); the longest total wait first.
fn container_findings(runq: &[RunqRow], throttling: &[ThrottleRow]) -> Vec<Finding> {
    let mut found: Vec<Finding> = runq
        .iter()
        .filter(|r| r.total_ns >= CONTAINER_WAIT_MIN_NS)
        .filter_map(|r| {
            let largest = r.why.as_ref()?.causes.first()?;
            if largest.cause == WaitCause::ShortWaits {
                return None;
            }
            let quota = (largest.cause == WaitCause::Throttled)
                .then(|| throttling.iter().find(|t| t.cgroup == r.cgroup))
                .flatten()
                .map(|t| Quota {
                    quota_us: t.quota_us,
                    period_us: t.period_us,
                    throttled_pct: t.throttled_pct,
                    usage_of_quota_pct: t.usage_of_quota_pct,
                });
            Some(Finding::ContainerWaited {
                container: r.container.clone(),
                waited_ns: r.total_ns,
                waits: r.count,
                largest: WhyCause::clone(largest),
                quota,
            })
        })
        .collect();
    found.sort_by_key(|f| std::cmp::Reverse(f.magnitude_ns()));
    found.truncate(PER_KIND);
    found
}

/// Slow calls, one finding per process, container, syscall and file, by
/// the longest call's wall time; not calls that wait by design (a read of
/// a pipe that sat waiting for data).
fn slow_call_findings(calls: &[SlowSyscallRow]) -> Vec<Finding> {
    type Key<'a> = (&'a str, &'a str, &'a str, Option<&'a str>);
    let mut groups: BTreeMap<Key<'_>, Vec<&SlowSyscallRow>> = BTreeMap::new();
    for c in calls {
        groups
            .entry((
                &c.comm,
                &c.container,
                &c.syscall,
                c.path.as_deref().filter(|p| !p.is_empty()),
            ))
            .or_default()
            .push(c);
    }
    let mut found: Vec<Finding> = groups
        .into_iter()
        .filter(|((_, _, syscall, _), group)| {
            let oncpu = group.iter().map(|c| c.oncpu_ns).sum();
            let wall = group.iter().map(|c| c.wall_ns).sum();
            !calls_wait_by_design(syscall, oncpu, wall)
        })
        .map(
            |((comm, container, syscall, path), group)| Finding::SlowCalls {
                comm: comm.to_string(),
                container: container.to_string(),
                syscall: syscall.to_string(),
                path: path.map(str::to_string),
                calls: group.len() as u32,
                longest_wall_ns: group.iter().map(|c| c.wall_ns).max().unwrap_or(0),
                longest_oncpu_ns: group.iter().map(|c| c.oncpu_ns).max().unwrap_or(0),
            },
        )
        .collect();
    found.sort_by_key(|f| std::cmp::Reverse(f.magnitude_ns()));
    found.truncate(PER_KIND);
    found
}

impl Finding {
    /// What ranks findings of one kind: the longest wait, the total wait,
    /// the longest call.
    fn magnitude_ns(&self) -> u64 {
        match self {
            Finding::SoftirqsHeldOff { longest_ns, .. }
            | Finding::InterruptsOff { longest_ns, .. } => *longest_ns,
            Finding::ContainerWaited { waited_ns, .. } => *waited_ns,
            Finding::SlowCalls {
                longest_wall_ns, ..
            } => *longest_wall_ns,
        }
    }
}
