//! Builds the report from an analysis: every row type from the analysis's
//! stalls, kernel snapshots, throttling deltas and slow calls, names
//! resolved. Pure.

use std::collections::{BTreeMap, HashMap};

use super::evidence::{culprit_detail, gap_evidence};
use super::*;
use crate::event::{softirq_name, RunqWait, Sample, SlowSyscall, WaitMigrated};
use crate::histogram::Histogram;
use crate::model::culprits::{self, StallCause};
use crate::model::stalls::{self, Culprit, Stall};
use crate::model::Analysis;
use crate::modes::SyscallMode;
use crate::stream::CgroupRunq;
use crate::syscall_table;

/// Preemptors listed per cgroup.
const TOP_PREEMPTORS: usize = 5;
/// Paths listed per syscall row.
const TOP_PATHS: usize = 5;
/// Syscall rows in a report.
const TOP_SYSCALLS: usize = 50;
/// Tasks listed for stolen softirq time.
const TOP_STOLEN: usize = 20;
pub(in crate::model) fn build(a: &Analysis) -> Report {
    let mut runq: Vec<RunqRow> = a
        .kernel
        .iter()
        .flat_map(|k| k.runq.iter())
        .map(|r| runq_row(a, r))
        .collect();
    runq.sort_by(|x, y| {
        y.p99_ns
            .cmp(&x.p99_ns)
            .then_with(|| x.cgroup.cmp(&y.cgroup))
    });
    Report {
        version: env!("CARGO_PKG_VERSION"),
        host: a.header.host.clone(),
        start_ns: a.header.start_ns,
        duration_ns: a.last_ts.saturating_sub(a.header.start_ns),
        settings: a.header.settings.clone(),
        warnings: a.header.warnings.clone(),
        probes: a.header.probes.clone(),
        lost_events: lost_events(a),
        map_full: a
            .kernel
            .iter()
            .flat_map(|k| k.counters.map_full.iter().cloned())
            .collect(),
        rate_limited_events: a
            .kernel
            .iter()
            .flat_map(|k| k.counters.rate_limited.iter().cloned())
            .collect(),
        runq_events: a.runq_waits.iter().map(|w| runq_event_row(a, w)).collect(),
        throttling: throttle_rows(a, &runq),
        runq,
        stalls: a.stalls.stalls().map(|s| stall_row(a, s)).collect(),
        takeovers: a.takeovers.iter().map(|t| takeover_row(a, t)).collect(),
        culprits: culprit_rows(a),
        syscalls: syscall_rows(a),
        slow_syscalls: a
            .slow_syscalls
            .iter()
            .map(|c| slow_syscall_row(a, c))
            .collect(),
        softirq: softirq_rows(a),
        softirq_stolen: stolen_rows(a),
    }
}

pub(in crate::model) fn stall_row(a: &Analysis, s: &Stall) -> StallRow {
    let throttled_cgroup = s.throttled_cgroup.map(|id| a.cgroup_path(id));
    StallRow {
        id: s.id,
        cpu: s.cpu,
        start_ns: s.start_ns,
        duration_ns: s.duration_ns(),
        kind: s.kind,
        signals: s.signals,
        waited: WaitedRow {
            softirq: s.waited.softirq.map(softirq_name),
            pid: s.waited.task.as_ref().map(|t| t.pid),
            comm: s.waited.task.as_ref().map(|t| t.comm.clone()),
            cgroup: s.waited.task.as_ref().map(|t| a.cgroup_path(t.cgroup)),
            wait_ns: s.waited.task.as_ref().map(|_| s.waited.task_wait_ns),
            steal_ns: s.waited.task.as_ref().map(|_| s.waited.task_steal_ns),
            cpu_idle: s.waited.cpu_idle && s.culprit.is_none(),
            migrated: s.waited.migrated.map(migrated_row),
        },
        culprit: s.culprit.as_ref().map(|c| culprit_detail(a, c, &s.samples)),
        quota: throttled_cgroup
            .as_deref()
            .and_then(|path| a.throttle.quota_of(path))
            .map(|(quota_us, period_us)| QuotaRow {
                quota_us,
                period_us,
            }),
        throttled_cgroup,
        evidence: s
            .first_tick
            .as_ref()
            .map(|t| gap_evidence(a, t, s.hardirq_cause())),
        gap: s.first_tick.as_ref().map(|t| GapRow {
            start_ns: t.ts_ns.saturating_sub(t.gap_ns),
            duration_ns: t.gap_ns,
        }),
        hardirq: s.hardirq_cause().map(|h| HardirqRow {
            irq: h.irq,
            handler: h.handler.clone(),
            hrtimer: h.hrtimer.map(|f| a.kernel_symbol(f)),
            run_ns: h.run_ns,
        }),
    }
}

fn takeover_row(a: &Analysis, t: &RunqWait) -> TakeoverRow {
    let culprit = (t.ran.tid != 0).then(|| {
        let mut culprit = Culprit {
            task: t.ran.clone(),
            syscall: t.ran_syscall.map(|(nr, _)| nr),
            syscall_start_ns: None,
            call: None,
        };
        let start = t.ts_ns.saturating_sub(t.wait_ns);
        if let Some(call) = a
            .slow_syscalls
            .iter()
            .find(|call| stalls::call_matches(&culprit, call, start, t.ts_ns))
        {
            culprit.syscall = Some(call.nr);
            culprit.call = Some(call.clone());
        }
        culprit
    });
    let samples: Vec<Sample> = a
        .stalls
        .stalls()
        .filter(|s| s.cpu == t.cpu && s.start_ns <= t.ts_ns && t.ts_ns <= s.end_ns)
        .flat_map(|s| s.samples.iter().cloned())
        .collect();
    TakeoverRow {
        cpu: t.cpu,
        ts_ns: t.ts_ns,
        wait_ns: t.wait_ns,
        steal_ns: t.steal_ns,
        culprit: culprit.map(|c| culprit_detail(a, &c, &samples)),
    }
}

fn culprit_rows(a: &Analysis) -> Vec<CulpritRow> {
    let causes: Vec<StallCause> = a
        .stalls
        .stalls()
        .filter_map(|s| {
            let c = s.culprit.as_ref()?;
            Some(StallCause {
                comm: c.task.comm.clone(),
                container: a.container(c.task.cgroup),
                syscall: c.syscall.map(syscall_table::name),
                path: c.call.as_ref().and_then(|call| call.path.text()),
                duration_ns: s.duration_ns(),
                end_ns: s.end_ns,
            })
        })
        .collect();
    culprits::aggregate(&causes)
}

fn slow_syscall_row(a: &Analysis, c: &SlowSyscall) -> SlowSyscallRow {
    let cgroup = a.cgroup_path(c.task.cgroup);
    SlowSyscallRow {
        ts_ns: c.ts_ns,
        cpu: c.cpu,
        pid: c.task.pid,
        tid: c.task.tid,
        comm: c.task.comm.clone(),
        container: a.container_of_path(&cgroup),
        cgroup,
        syscall: syscall_table::name(c.nr),
        path: c.path.text(),
        wall_ns: c.wall_ns,
        oncpu_ns: c.oncpu_ns,
        softirq_ns: c.softirq_ns,
    }
}

fn syscall_rows(a: &Analysis) -> Vec<SyscallRow> {
    struct Acc {
        wall: Histogram,
        count: u64,
        max_ns: u64,
        total_ns: u64,
        oncpu_total_ns: u64,
    }
    let mut by_key: BTreeMap<(u32, String), Acc> = BTreeMap::new();
    for s in a.kernel.iter().flat_map(|k| k.syscalls.iter()) {
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
    let mut rows: Vec<SyscallRow> = by_key
        .into_iter()
        .map(|((nr, container), acc)| SyscallRow {
            syscall: syscall_table::name(nr),
            top_paths: top_paths(a, nr, &container),
            container,
            count: acc.count,
            p50_ns: (acc.wall.count() > 0).then(|| acc.wall.quantile_at_most(0.5, acc.max_ns)),
            p99_ns: (acc.wall.count() > 0).then(|| acc.wall.quantile_at_most(0.99, acc.max_ns)),
            max_ns: acc.max_ns,
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

/// The files of the slow calls of syscall `nr` in `container`.
fn top_paths(a: &Analysis, nr: u32, container: &str) -> Vec<PathRow> {
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
    let settings = &a.header.settings;
    if settings.syscalls == SyscallMode::Sampled {
        let files = a
            .kernel
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
            .filter(|c: &&SlowSyscall| c.nr == nr && a.container(c.task.cgroup) == container);
        for call in calls {
            if let Some(path) = call.path.text() {
                add(&path, 1, call.wall_ns);
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

fn softirq_rows(a: &Analysis) -> Vec<SoftirqRow> {
    a.kernel
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
            in_ksoftirqd: s.runs_in_ksoftirqd,
            run_total_ns: s.run_total_ns,
            run_in_ksoftirqd_ns: s.run_in_ksoftirqd_ns,
        })
        .collect()
}

fn stolen_rows(a: &Analysis) -> Vec<StolenRow> {
    a.kernel
        .iter()
        .flat_map(|k| k.softirq_stolen.iter())
        .take(TOP_STOLEN)
        .map(|s| StolenRow {
            pid: s.pid,
            tid: s.tid,
            comm: s.comm.clone(),
            vector: softirq_name(s.vector),
            ns: s.ns,
            count: s.count,
        })
        .collect()
}

fn lost_events(a: &Analysis) -> BTreeMap<String, u64> {
    let mut lost: BTreeMap<String, u64> = a
        .kernel
        .iter()
        .flat_map(|k| k.counters.lost.iter().cloned())
        .collect();
    lost.insert("undecodable".into(), a.undecodable_records);
    lost
}

fn runq_row(a: &Analysis, r: &CgroupRunq) -> RunqRow {
    let cgroup = a.cgroup_path(r.cgroup);
    let top_preemptors = a
        .kernel
        .iter()
        .flat_map(|k| k.preemptors.iter())
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
    RunqRow {
        container: a.container_of_path(&cgroup),
        cgroup,
        count: r.count,
        p50_ns: r.latency.quantile_at_most(0.5, r.max_ns),
        p99_ns: r.latency.quantile_at_most(0.99, r.max_ns),
        max_ns: r.max_ns,
        total_ns: r.total_ns,
        preempted_by: PreemptedBy {
            same_cgroup: r.preempted_same_cgroup,
            other_cgroup: r.preempted_other_cgroup,
            kthread: r.preempted_kthread,
            throttled: r.preempted_throttled,
        },
        top_preemptors,
    }
}

fn runq_event_row(a: &Analysis, w: &RunqWait) -> RunqEventRow {
    let cgroup = a.cgroup_path(w.waiter.cgroup);
    RunqEventRow {
        cpu: w.cpu,
        ts_ns: w.ts_ns,
        wait_ns: w.wait_ns,
        pid: w.waiter.pid,
        tid: w.waiter.tid,
        comm: w.waiter.comm.clone(),
        container: a.container_of_path(&cgroup),
        cgroup,
        steal_ns: w.steal_ns,
        ran_instead: RanInstead {
            pid: w.ran.pid,
            comm: w.ran.comm.clone(),
            cgroup: a.cgroup_path(w.ran.cgroup),
            syscall_nr: w.ran_syscall.map(|(nr, _)| nr),
        },
        throttled_cgroup: w.throttle.map(|t| a.cgroup_path(t.cgroup)),
        migrated: w.migrated.map(migrated_row),
    }
}

fn migrated_row(m: WaitMigrated) -> MigratedRow {
    MigratedRow {
        from_cpu: m.from_cpu,
        migrations: m.migrations,
    }
}

fn throttle_rows(a: &Analysis, runq: &[RunqRow]) -> Vec<ThrottleRow> {
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
