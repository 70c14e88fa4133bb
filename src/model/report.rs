//! The report of an analysis: one serializable value (`report --json`
//! prints it as is; the text report and the UI read it).

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::culprits::{self, CulpritRow, StallCause};
use super::stalls::{self, Culprit, Stall};
use super::Analysis;
use crate::cgroup::container_of;
use crate::event::{softirq_name, FilePath, RunqWait, Sample, SlowSyscall};
use crate::histogram::Histogram;
use crate::stream::{CgroupRunq, HostInfo, ProbeLoad, Settings};
use crate::syscall_table;

/// Preemptors listed per cgroup.
const TOP_PREEMPTORS: usize = 5;
/// Paths listed per syscall row.
const TOP_PATHS: usize = 5;
/// Syscall rows in a report.
const TOP_SYSCALLS: usize = 50;
/// Tasks listed for stolen softirq time.
const TOP_STOLEN: usize = 20;

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Report {
    pub version: &'static str,
    pub host: HostInfo,
    pub duration_ns: u64,
    pub settings: Settings,
    /// Optional probes that did not come up during the recording.
    pub warnings: Vec<String>,
    /// What each probe family's load did: loaded or refused (and why),
    /// load time, each program's verifier work.
    pub probes: Vec<ProbeLoad>,
    /// Records lost, by kind (ring buffer full, or undecodable).
    pub lost_events: BTreeMap<String, u64>,
    /// Updates refused because a bounded kernel map was full, by map.
    pub map_full: BTreeMap<String, u64>,
    /// Records the kernel side did not send, by kind, because the kind went
    /// over its per-CPU rate (histograms and tables still count them).
    pub rate_limited_events: BTreeMap<String, u64>,
    pub runq: Vec<RunqRow>,
    pub runq_events: Vec<RunqEventRow>,
    pub throttling: Vec<ThrottleRow>,
    /// Stalls, oldest first.
    pub stalls: Vec<StallRow>,
    /// ksoftirqd waits over the threshold, oldest first.
    pub takeovers: Vec<TakeoverRow>,
    pub culprits: Vec<CulpritRow>,
    /// By on-CPU (kernel) time, highest first.
    pub syscalls: Vec<SyscallRow>,
    /// Calls over the wall or on-CPU threshold, oldest first.
    pub slow_syscalls: Vec<SlowSyscallRow>,
    pub softirq: Vec<SoftirqRow>,
    /// Softirq time charged to the tasks it interrupted, highest first.
    pub softirq_stolen: Vec<StolenRow>,
}

#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct StallRow {
    pub id: u64,
    pub cpu: u32,
    pub start_ns: u64,
    pub duration_ns: u64,
    pub kind: &'static str,
    /// Probe signals merged into this stall.
    pub signals: u32,
    pub waited: WaitedRow,
    pub culprit: Option<CulpritDetail>,
    /// irqoff stalls: what the first tick after the gap found. A gap with
    /// no guest-side cause (idle CPU, user mode) points at the hypervisor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    /// irqoff stalls: the longest gap between sampler ticks (overlapping
    /// waits merged into the stall can make it longer than the gap).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap: Option<GapRow>,
}

#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct GapRow {
    pub start_ns: u64,
    pub duration_ns: u64,
}

#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct WaitedRow {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub softirq: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comm: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_ns: Option<u64>,
    /// Of `wait_ns`, the time the hypervisor took the vCPU (steal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steal_ns: Option<u64>,
}

/// The task that held the CPU, with its syscall and stacks.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct CulpritDetail {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub cgroup: String,
    pub container: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syscall: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// On-CPU time of the whole syscall, softirqs excluded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oncpu_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall_ns: Option<u64>,
    /// Softirq time that ran inside the call's slices.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub softirq_ns: Option<u64>,
    /// Most frequent kernel stack among the samples (leaf first).
    pub stack: Vec<String>,
    pub user_stack: Vec<String>,
    /// Samples taken on the CPU during the stall.
    pub samples: usize,
}

#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct TakeoverRow {
    pub cpu: u32,
    pub ts_ns: u64,
    pub wait_ns: u64,
    /// Of the wait, the time the hypervisor took this vCPU for something else.
    pub steal_ns: u64,
    pub culprit: Option<CulpritDetail>,
}

#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct SyscallRow {
    pub syscall: String,
    pub container: String,
    /// Calls: every one with hooked syscalls; with sampled ones, those a
    /// sampler tick found in progress.
    pub count: u64,
    /// Per-call wall-time percentiles: only with hooked syscalls
    /// (`--syscalls exact`); null when sampled.
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    /// Sampled: the longest time one call held a CPU.
    pub max_ns: u64,
    pub total_ns: u64,
    pub oncpu_total_ns: u64,
    /// Files of the calls over the threshold.
    pub top_paths: Vec<PathRow>,
}

#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct SlowSyscallRow {
    /// When it returned (CLOCK_MONOTONIC ns).
    pub ts_ns: u64,
    pub cpu: u32,
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub cgroup: String,
    pub container: String,
    pub syscall: String,
    pub path: Option<String>,
    pub wall_ns: u64,
    pub oncpu_ns: u64,
    pub softirq_ns: u64,
}

#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct PathRow {
    pub path: String,
    pub count: u64,
    pub total_ns: u64,
}

#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct SoftirqRow {
    pub cpu: u32,
    pub vector: &'static str,
    pub count: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// Runs that happened in ksoftirqd rather than at irq exit.
    pub in_ksoftirqd: u64,
    pub run_total_ns: u64,
    pub run_in_ksoftirqd_ns: u64,
}

#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct StolenRow {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub vector: &'static str,
    pub ns: u64,
    pub count: u64,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct RunqRow {
    pub cgroup: String,
    pub container: String,
    pub count: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub total_ns: u64,
    pub preempted_by: PreemptedBy,
    pub top_preemptors: Vec<PreemptorRow>,
}

#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct PreemptedBy {
    pub same_cgroup: u64,
    pub other_cgroup: u64,
    pub kthread: u64,
}

#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct PreemptorRow {
    pub comm: String,
    pub cgroup: String,
    pub count: u64,
}

#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct RunqEventRow {
    pub cpu: u32,
    pub ts_ns: u64,
    pub wait_ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub cgroup: String,
    pub container: String,
    /// Of the wait, the time the hypervisor took this vCPU for something else.
    pub steal_ns: u64,
    pub ran_instead: RanInstead,
}

#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct RanInstead {
    pub pid: u32,
    pub comm: String,
    pub cgroup: String,
    /// The syscall it was inside, by number, if any.
    pub syscall_nr: Option<u32>,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct ThrottleRow {
    pub cgroup: String,
    pub container: String,
    pub quota_us: u64,
    pub period_us: u64,
    pub burst_us: Option<u64>,
    pub cpus: Option<String>,
    pub nr_periods: u64,
    pub nr_throttled: u64,
    /// nr_throttled / nr_periods, in percent.
    pub throttled_pct: f64,
    pub throttled_ns: u64,
    pub usage_ns: Option<u64>,
    /// CPU used over what the quota allowed in the periods that ran, in
    /// percent: throttled while well under 100% is case 3's signature.
    pub usage_of_quota_pct: Option<f64>,
    /// Run-queue latency of the cgroup's tasks (includes throttled waits).
    pub runq_p99_ns: Option<u64>,
}

pub(super) fn build(a: &Analysis) -> Report {
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

fn stall_row(a: &Analysis, s: &Stall) -> StallRow {
    StallRow {
        id: s.id,
        cpu: s.cpu,
        start_ns: s.start_ns,
        duration_ns: s.duration_ns(),
        kind: s.kind.name(),
        signals: s.signals,
        waited: WaitedRow {
            softirq: s.waited.softirq.map(softirq_name),
            pid: s.waited.task.as_ref().map(|t| t.pid),
            comm: s.waited.task.as_ref().map(|t| t.comm.clone()),
            cgroup: s.waited.task.as_ref().map(|t| a.cgroup_path(t.cgroup)),
            wait_ns: s.waited.task.as_ref().map(|_| s.waited.task_wait_ns),
            steal_ns: s.waited.task.as_ref().map(|_| s.waited.task_steal_ns),
        },
        culprit: s.culprit.as_ref().map(|c| culprit_detail(a, c, &s.samples)),
        evidence: s.first_tick.as_ref().map(|t| gap_evidence(a, t)),
        gap: s.first_tick.as_ref().map(|t| GapRow {
            start_ns: t.ts_ns.saturating_sub(t.gap_ns),
            duration_ns: t.gap_ns,
        }),
    }
}

fn gap_evidence(a: &Analysis, tick: &Sample) -> String {
    let gap_ms = tick.gap_ns as f64 / 1e6;
    if tick.task.tid == 0 {
        return format!(
            "no sampler tick for {gap_ms:.1} ms and the CPU was idle after it: no guest-side cause, likely the hypervisor"
        );
    }
    let place = match (tick.kernel_stack.first(), tick.syscall) {
        (Some(&frame), Some(nr)) => format!(
            "in the kernel at {} inside {}",
            a.kernel_symbol(frame),
            syscall_table::name(nr)
        ),
        (Some(&frame), None) => format!("in the kernel at {}", a.kernel_symbol(frame)),
        (None, _) => "in user mode (no guest-side cause: likely the hypervisor)".into(),
    };
    format!(
        "no sampler tick for {gap_ms:.1} ms; the first one found {} [{}] {place}",
        tick.task.comm, tick.task.tid
    )
}

/// Report form of a culprit: names resolved, call details, the stack it
/// was seen in most often (its own samples, else any on the CPU).
pub(super) fn culprit_detail(a: &Analysis, c: &Culprit, samples: &[Sample]) -> CulpritDetail {
    let own: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.task.tid == c.task.tid)
        .collect();
    let pool: Vec<&Sample> = if own.is_empty() {
        samples.iter().collect()
    } else {
        own
    };
    let top = most_frequent_stack(&pool);
    let cgroup = a.cgroup_path(c.task.cgroup);
    CulpritDetail {
        pid: c.task.pid,
        tid: c.task.tid,
        comm: c.task.comm.clone(),
        container: container_of(&cgroup),
        cgroup,
        syscall: c.syscall.map(syscall_table::name),
        path: c.call.as_ref().and_then(|call| path_text(&call.path)),
        oncpu_ns: c.call.as_ref().map(|call| call.oncpu_ns),
        wall_ns: c.call.as_ref().map(|call| call.wall_ns),
        softirq_ns: c.call.as_ref().map(|call| call.softirq_ns),
        stack: top
            .map(|s| s.kernel_stack.iter().map(|&f| a.kernel_symbol(f)).collect())
            .unwrap_or_default(),
        user_stack: top
            .map(|s| {
                s.user_stack
                    .iter()
                    .map(|&f| a.user_symbol(s.task.pid, f))
                    .collect()
            })
            .unwrap_or_default(),
        samples: samples.len(),
    }
}

fn most_frequent_stack<'s>(samples: &[&'s Sample]) -> Option<&'s Sample> {
    let mut counts: HashMap<&[u64], (usize, &'s Sample)> = HashMap::new();
    for s in samples {
        counts.entry(&s.kernel_stack).or_insert((0, s)).0 += 1;
    }
    counts
        .into_values()
        .max_by_key(|(n, s)| (*n, std::cmp::Reverse(s.ts_ns)))
        .map(|(_, s)| s)
}

pub(super) fn path_text(path: &FilePath) -> Option<String> {
    match path {
        FilePath::None => None,
        FilePath::Resolved { path, .. } => Some(path.clone()),
        FilePath::Given(path) => Some(path.clone()),
        FilePath::Special { kind, inode } => Some(format!("{kind}:[{inode}]")),
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
                container: container_of(&a.cgroup_path(c.task.cgroup)),
                syscall: c.syscall.map(syscall_table::name),
                path: c.call.as_ref().and_then(|call| path_text(&call.path)),
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
        container: container_of(&cgroup),
        cgroup,
        syscall: syscall_table::name(c.nr),
        path: path_text(&c.path),
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
        let container = container_of(&a.cgroup_path(s.cgroup));
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
            p50_ns: (acc.wall.count() > 0).then(|| acc.wall.quantile(0.5)),
            p99_ns: (acc.wall.count() > 0).then(|| acc.wall.quantile(0.99)),
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
    let calls = a.slow_syscalls.iter().filter(|c: &&SlowSyscall| {
        c.nr == nr && container_of(&a.cgroup_path(c.task.cgroup)) == container
    });
    for call in calls {
        let Some(path) = path_text(&call.path) else {
            continue;
        };
        let pattern = super::path_pattern(&path);
        let row = by_path.entry(pattern.clone()).or_insert(PathRow {
            path: pattern,
            count: 0,
            total_ns: 0,
        });
        row.count += 1;
        row.total_ns += call.wall_ns;
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
            p50_ns: s.delay.quantile(0.5),
            p99_ns: s.delay.quantile(0.99),
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
        .map(|p| PreemptorRow {
            comm: p.comm.clone(),
            cgroup: a.cgroup_path(p.preemptor_cgroup),
            count: p.count,
        })
        .collect();
    RunqRow {
        container: container_of(&cgroup),
        cgroup,
        count: r.count,
        p50_ns: r.latency.quantile(0.5),
        p99_ns: r.latency.quantile(0.99),
        max_ns: r.max_ns,
        total_ns: r.total_ns,
        preempted_by: PreemptedBy {
            same_cgroup: r.preempted_same_cgroup,
            other_cgroup: r.preempted_other_cgroup,
            kthread: r.preempted_kthread,
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
        container: container_of(&cgroup),
        cgroup,
        steal_ns: w.steal_ns,
        ran_instead: RanInstead {
            pid: w.ran.pid,
            comm: w.ran.comm.clone(),
            cgroup: a.cgroup_path(w.ran.cgroup),
            syscall_nr: w.ran_syscall.map(|(nr, _)| nr),
        },
    }
}

fn throttle_rows(a: &Analysis, runq: &[RunqRow]) -> Vec<ThrottleRow> {
    a.throttle
        .deltas()
        .into_iter()
        .map(|d| {
            let quota_ns = d.nr_periods as f64 * d.latest.quota_us as f64 * 1000.0;
            ThrottleRow {
                container: container_of(&d.latest.path),
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
