//! The aggregate tables of the report, from the kernel's snapshots over the
//! scope's window: run-queue latency per cgroup, syscalls per container,
//! softirq delays per CPU, softirq time taken from tasks, throttling, and
//! the loss counters. Pure.

use std::collections::{BTreeMap, HashMap};

use super::distribution::Distribution;
use super::why;
use super::*;
use crate::event::softirq_name;
use crate::histogram::Histogram;
use crate::model::{Analysis, SlowCall};
use crate::modes::SyscallMode;
use crate::stream::{CgroupRunq, Counters, KernelSnapshot};
use crate::syscall_table;

/// Preemptors listed per cgroup.
const TOP_PREEMPTORS: usize = 5;
/// Paths listed per syscall row.
const TOP_PATHS: usize = 5;
/// Syscall rows in a report.
const TOP_SYSCALLS: usize = 50;
/// Tasks listed for stolen softirq time.
const TOP_STOLEN: usize = 20;

/// Worst p99 first.
pub(in crate::model) fn runq_rows(a: &Analysis, kernel: Option<&KernelSnapshot>) -> Vec<RunqRow> {
    let mut rows: Vec<RunqRow> = kernel
        .iter()
        .flat_map(|k| k.runq.iter().map(move |r| runq_row(a, k, r)))
        .filter(|r| r.count > 0)
        .collect();
    rows.sort_by(|x, y| {
        y.p99_ns
            .cmp(&x.p99_ns)
            .then_with(|| x.cgroup.cmp(&y.cgroup))
    });
    rows
}

fn runq_row(a: &Analysis, k: &KernelSnapshot, r: &CgroupRunq) -> RunqRow {
    let cgroup = a.cgroup_path(r.cgroup);
    let top_preemptors = k
        .preemptors
        .iter()
        .filter(|p| p.victim_cgroup == r.cgroup)
        .take(TOP_PREEMPTORS)
        .map(|p| {
            let cgroup = a.cgroup_path(p.preemptor_cgroup);
            PreemptorRow {
                comm: p.comm.clone(),
                container: a.container_of_path(&cgroup),
                cgroup,
                count: p.count,
            }
        })
        .collect();
    let threshold = a.header().settings.runq_threshold_ns;
    let pressure_some_ns = a.pressure.cgroup(&cgroup).map(|p| p.some_ns);
    RunqRow {
        container: a.container_of_path(&cgroup),
        cgroup,
        count: r.count,
        p50_ns: r.latency.quantile_at_most(0.5, r.max_ns),
        p99_ns: r.latency.quantile_at_most(0.99, r.max_ns),
        max_ns: r.max_ns,
        total_ns: r.total_ns,
        distribution: Distribution::of(&r.latency, r.max_ns, threshold),
        pressure_some_ns,
        preempted_by: PreemptedBy {
            same_cgroup: r.preempted_same_cgroup,
            other_cgroup: r.preempted_other_cgroup,
            kthread: r.preempted_kthread,
            throttled: r.preempted_throttled,
        },
        top_preemptors,
        why: why::why_row(r, &k.preemptors, &|cgroup| a.container(cgroup)),
    }
}

/// By on-CPU time, most first.
pub(super) fn syscall_rows(a: &Analysis, kernel: Option<&KernelSnapshot>) -> Vec<SyscallRow> {
    struct Acc {
        wall: Histogram,
        count: u64,
        max_ns: u64,
        total_ns: u64,
        oncpu_total_ns: u64,
    }
    let settings = &a.header().settings;
    let sampled = settings.syscalls == SyscallMode::Sampled;
    let period_ns = 1_000_000_000 / u64::from(settings.sample_hz.max(1));
    let mut by_key: BTreeMap<(u32, String), Acc> = BTreeMap::new();
    for s in kernel.iter().flat_map(|k| k.syscalls.iter()) {
        let container = a.container(s.cgroup);
        let acc = by_key.entry((s.nr, container)).or_insert(Acc {
            wall: Histogram::default(),
            count: 0,
            max_ns: 0,
            total_ns: 0,
            oncpu_total_ns: 0,
        });
        acc.wall.merge(&s.wall);
        acc.count += s.count;
        acc.max_ns = acc.max_ns.max(s.max_ns);
        acc.total_ns += s.wall_total_ns;
        acc.oncpu_total_ns += s.oncpu_total_ns;
    }
    let timed = |acc: &Acc| !sampled && acc.wall.count() > 0;
    let mut rows: Vec<SyscallRow> = by_key
        .into_iter()
        .map(|((nr, container), acc)| SyscallRow {
            syscall: syscall_table::name(nr),
            top_paths: top_paths(a, kernel, nr, &container),
            container,
            count: acc.count,
            p50_ns: timed(&acc).then(|| acc.wall.quantile_at_most(0.5, acc.max_ns)),
            p99_ns: timed(&acc).then(|| acc.wall.quantile_at_most(0.99, acc.max_ns)),
            max_ns: acc.max_ns,
            resolution_ns: sampled.then_some(period_ns),
            distribution: timed(&acc).then(|| {
                Distribution::of(&acc.wall, acc.max_ns, settings.syscall_wall_threshold_ns)
            }),
            total_ns: acc.total_ns,
            oncpu_total_ns: acc.oncpu_total_ns,
        })
        .collect();
    rows.sort_by(|x, y| {
        y.oncpu_total_ns
            .cmp(&x.oncpu_total_ns)
            .then(y.total_ns.cmp(&x.total_ns))
    });
    rows.truncate(TOP_SYSCALLS);
    rows
}

/// The files of syscall `nr` in `container`: the calls a tick found on
/// each (sampled), or the slow calls (hooked).
fn top_paths(
    a: &Analysis,
    kernel: Option<&KernelSnapshot>,
    nr: u32,
    container: &str,
) -> Vec<PathRow> {
    let mut by_path: HashMap<String, PathRow> = HashMap::new();
    let mut add = |path: &str, count: u64, ns: u64| {
        let pattern = crate::model::path_pattern(path);
        let row = by_path.entry(pattern.clone()).or_insert(PathRow {
            path: pattern,
            count: 0,
            total_ns: 0,
        });
        row.count += count;
        row.total_ns += ns;
    };
    if a.header().settings.syscalls == SyscallMode::Sampled {
        let files = kernel
            .iter()
            .flat_map(|k| k.files.iter())
            .filter(|f| f.nr == nr && a.container(f.cgroup) == container);
        for f in files {
            add(&f.path, f.calls, f.oncpu_ns);
        }
    } else {
        let calls = a
            .slow_syscalls
            .iter()
            .map(|c| &c.item)
            .filter(|c: &&SlowCall| {
                c.call.nr == nr
                    && a.container(c.call.task.cgroup) == container
                    && a.scope().contains(c.call.ts_ns)
            });
        for slow in calls {
            if let Some(path) = slow.call.path.text() {
                add(&path, 1, slow.call.wall_ns);
            }
        }
    }
    let mut rows: Vec<PathRow> = by_path.into_values().collect();
    rows.sort_by(|x, y| {
        y.total_ns
            .cmp(&x.total_ns)
            .then_with(|| x.path.cmp(&y.path))
    });
    rows.truncate(TOP_PATHS);
    rows
}

pub(super) fn softirq_rows(a: &Analysis, kernel: Option<&KernelSnapshot>) -> Vec<SoftirqRow> {
    let threshold = a.header().settings.stall_threshold_ns;
    kernel
        .iter()
        .flat_map(|k| k.softirq.iter())
        .map(|s| SoftirqRow {
            cpu: s.cpu,
            vector: softirq_name(s.vector),
            count: s.count,
            timed: s.delay.count(),
            p50_ns: s.delay.quantile_at_most(0.5, s.delay_max_ns),
            p99_ns: s.delay.quantile_at_most(0.99, s.delay_max_ns),
            max_ns: s.delay_max_ns,
            distribution: Distribution::of(&s.delay, s.delay_max_ns, threshold),
            in_ksoftirqd: s.runs_in_ksoftirqd,
            run_total_ns: s.run_total_ns,
            run_in_ksoftirqd_ns: s.run_in_ksoftirqd_ns,
        })
        .collect()
}

/// Softirq time taken from tasks, the most first; with a pid, its own.
pub(super) fn stolen_rows(kernel: Option<&KernelSnapshot>, scope: &ReportScope) -> Vec<StolenRow> {
    let mut rows: Vec<StolenRow> = kernel
        .iter()
        .flat_map(|k| k.softirq_stolen.iter())
        .filter(|s| scope.pid.is_none_or(|pid| pid == s.pid))
        .map(|s| StolenRow {
            pid: s.pid,
            tid: s.tid,
            comm: s.comm.clone(),
            vector: softirq_name(s.vector),
            ns: s.ns,
            count: s.count,
        })
        .collect();
    rows.sort_by_key(|s| std::cmp::Reverse(s.ns));
    rows.truncate(TOP_STOLEN);
    rows
}

pub(super) fn lost_events(a: &Analysis, counters: Option<&Counters>) -> BTreeMap<String, u64> {
    let mut lost: BTreeMap<String, u64> = counters
        .map(|c| c.lost.iter().cloned().collect())
        .unwrap_or_default();
    lost.insert("undecodable".into(), a.undecodable_records);
    lost
}

pub(super) fn throttle_rows(a: &Analysis, runq: &[RunqRow]) -> Vec<ThrottleRow> {
    a.throttle
        .deltas()
        .into_iter()
        .map(|d| {
            let quota_ns = d.nr_periods as f64 * d.latest.quota_us as f64 * 1000.0;
            ThrottleRow {
                container: a.container_of_path(&d.latest.path),
                cgroup: d.latest.path.clone(),
                quota_us: d.latest.quota_us,
                period_us: d.latest.period_us,
                burst_us: d.latest.burst_us,
                cpus: d.latest.cpus.clone(),
                nr_periods: d.nr_periods,
                nr_throttled: d.nr_throttled,
                throttled_pct: percent(d.nr_throttled as f64, d.nr_periods as f64),
                throttled_ns: d.throttled_ns,
                usage_ns: d.usage_ns,
                usage_of_quota_pct: d
                    .usage_ns
                    .filter(|_| quota_ns > 0.0)
                    .map(|u| percent(u as f64, quota_ns)),
                runq_p99_ns: runq
                    .iter()
                    .find(|r| r.cgroup == d.latest.path)
                    .map(|r| r.p99_ns),
            }
        })
        .collect()
}

fn percent(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        (part / whole * 1000.0).round() / 10.0
    } else {
        0.0
    }
}
