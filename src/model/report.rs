//! The report of an analysis: one serializable value (`report --json`
//! prints it as is; the text report and the UI read it). This file holds
//! its types; `build` makes one from an analysis, `evidence` says what the
//! samples show (stacks, irqs-off gaps).

mod build;
mod evidence;

use std::collections::BTreeMap;

use serde::Serialize;

use super::culprits::CulpritRow;
use super::stalls::StallKind;
use crate::stream::{HostInfo, ProbeLoad, Settings};

pub(super) use build::{build, stall_row};

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Report {
    pub version: &'static str,
    pub host: HostInfo,
    /// When the recording starts (CLOCK_MONOTONIC ns, as every `*_ns` time).
    pub start_ns: u64,
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
    pub kind: StallKind,
    /// Probe signals merged into this stall.
    pub signals: u32,
    pub waited: WaitedRow,
    pub culprit: Option<CulpritDetail>,
    /// `throttled` stalls: the cgroup whose CPU quota ran out (the waiter's or an ancestor),
    /// by path. Such a stall has no culprit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throttled_cgroup: Option<String>,
    /// That cgroup's quota, as last read from cgroupfs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota: Option<QuotaRow>,
    /// irqoff stalls: what the first tick after the gap found. A gap with
    /// no guest-side cause (idle CPU, user mode) points at the hypervisor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    /// irqoff stalls: the longest gap between sampler ticks (overlapping
    /// waits merged into the stall can make it longer than the gap).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap: Option<GapRow>,
    /// irqoff stalls that hardirq handlers ran most of: the longest handler run (no task
    /// culprit then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hardirq: Option<HardirqRow>,
}

/// A hardirq handler's run: `handler` (its irqaction's name) of irq `irq`, `run_ns` long.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct HardirqRow {
    pub irq: u32,
    pub handler: String,
    /// An hrtimer callback's name (then `irq` is 0 and `handler` empty).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hrtimer: Option<String>,
    pub run_ns: u64,
}

#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaRow {
    pub quota_us: u64,
    pub period_us: u64,
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
    /// The task's CPU was idle for most of its wait: nobody held it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cpu_idle: bool,
    /// The task's wait began on another CPU (`cpu` is where it ended).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migrated: Option<MigratedRow>,
}

/// A wait that began on CPU `from_cpu` and was moved `migrations` times (load balancing,
/// affinity) before its task ran; its culprit held one of the CPUs it waited on.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigratedRow {
    pub from_cpu: u32,
    pub migrations: u32,
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
    /// Sampled: the longest wall time of a call a tick found.
    pub max_ns: u64,
    pub total_ns: u64,
    pub oncpu_total_ns: u64,
    /// Files, most time first: of the calls over the threshold (hooked
    /// syscalls), or of every call the sampler found (sampled).
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
    /// Slow calls on it (hooked), or calls a tick found on it (sampled).
    pub count: u64,
    /// Their wall time (hooked), or their time on a CPU (sampled).
    pub total_ns: u64,
}

#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct SoftirqRow {
    pub cpu: u32,
    pub vector: &'static str,
    pub count: u64,
    /// Runs whose delay was timed: every run in exact mode, those a
    /// sampler tick found pending in the sampled modes.
    pub timed: u64,
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
    /// Waits its CPU quota (or an ancestor's) explains, counted in none of the above.
    pub throttled: u64,
}

#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct PreemptorRow {
    pub comm: String,
    pub cgroup: String,
    pub container: String,
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
    /// The cgroup whose exhausted CPU quota explains the wait; `ran_instead` only filled the
    /// CPU meanwhile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throttled_cgroup: Option<String>,
    /// The wait began on another CPU (`cpu` is where it ended).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migrated: Option<MigratedRow>,
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
