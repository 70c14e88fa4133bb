//! The report of an analysis: one serializable value (`report --json`
//! prints it as is; the text report and the UI read it). This file holds
//! its types, the JSON contract that docs/report.schema.json states: every
//! key is always there (a value that is unknown or does not apply is null,
//! an empty list is []), every `*_ns` time is CLOCK_MONOTONIC with a
//! `*_unix_ns` twin beside it, syscalls are named, records have ids that
//! join them. `build` makes one from an analysis, `evidence` says what the
//! samples show (stacks, irqs-off gaps), `distribution` reads histograms.

mod build;
mod distribution;
mod evidence;
mod findings;
mod pressure;
mod rows;
mod scope;
mod why;

use std::collections::BTreeMap;

use serde::Serialize;

use super::culprits::CulpritRow;
use super::stalls::StallKind;
use crate::stream::{HostInfo, ProbeLoad, Settings, WaitCause};

pub(super) use build::{build, stall_row};
pub(super) use evidence::most_frequent_stack;
pub(super) use rows::runq_rows;

pub use distribution::{Distribution, Range};
pub use scope::{unix_ns, utc, ReportScope, TimeSpec};

/// One finding of a report: what waited, how long, and why.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Finding {
    /// Softirqs (`vector` most often, and ksoftirqd when `ksoftirqd`)
    /// waited on `cpu` while `holder` ran: cases 1 and 2 of docs/cases.md.
    SoftirqsHeldOff {
        cpu: u32,
        vector: Option<&'static str>,
        ksoftirqd: bool,
        /// Stalls with this holder on this CPU.
        stalls: u32,
        /// The longest single wait among them, and its stall.
        longest_ns: u64,
        stall_id: u64,
        holder: Holder,
    },
    /// `cpu` ran with interrupts off (no sampler tick) while `holder` ran.
    InterruptsOff {
        cpu: u32,
        stalls: u32,
        longest_ns: u64,
        stall_id: u64,
        holder: Holder,
    },
    /// A container's tasks waited `waited_ns` for a CPU in all, `largest`
    /// the cause of most of it (with the quota when that was its own).
    ContainerWaited {
        container: String,
        waited_ns: u64,
        waits: u64,
        largest: WhyCause,
        quota: Option<Quota>,
    },
    /// Calls over the slow-call threshold by one process, container,
    /// syscall and file.
    SlowCalls {
        comm: String,
        container: String,
        syscall: String,
        path: Option<String>,
        calls: u32,
        longest_wall_ns: u64,
        longest_oncpu_ns: u64,
    },
}

/// The task that held a CPU, and what it did there.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    pub comm: String,
    pub container: String,
    /// Its syscall, "user code" or "kernel (no syscall)" (as a culprit's
    /// `activity`); null when nothing tells.
    pub activity: Option<String>,
    pub path: Option<String>,
    /// The on-CPU time of its syscall, when in one.
    pub call_oncpu_ns: Option<u64>,
}

/// A container's CPU quota, and how it was throttled.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Quota {
    pub quota_us: u64,
    pub period_us: u64,
    pub throttled_pct: f64,
    pub usage_of_quota_pct: Option<f64>,
}

/// The version of the JSON contract (docs/report.schema.json): bumped when a
/// key changes meaning or goes away; new keys do not bump it.
pub const SCHEMA_VERSION: u32 = 2;

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Report {
    pub schema_version: u32,
    /// stalltop's version.
    pub version: &'static str,
    pub host: HostInfo,
    /// When the recording starts (CLOCK_MONOTONIC ns, as every `*_ns` time),
    /// and how long it is (up to the scope's end).
    pub start_ns: u64,
    pub start_unix_ns: u64,
    pub duration_ns: u64,
    /// Add to a `*_ns` time to get Unix time in ns (what every `*_unix_ns` is).
    pub wall_clock_offset_ns: i64,
    /// What the report was cut to (`--from/--to`, `--container`, `--pid`).
    pub scope: ScopeRow,
    /// A flight recording: the stall that made `serve` write it (null: not a
    /// flight recording, or written on request).
    pub trigger: Option<TriggerRow>,
    /// stalltop's own process: its waits, slow calls and stolen softirq time
    /// are left out of the lists (null in recordings before it was kept: then
    /// tasks named stalltop are).
    pub recorder_pid: Option<u32>,
    /// Rows left out for being stalltop's own.
    pub own_rows_left_out: u64,
    pub settings: Settings,
    /// What the report found, one finding per line of its text, each
    /// kind's worst first: softirqs held off, interrupts kept off, containers
    /// that waited, slow calls.
    pub findings: Vec<Finding>,
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
    /// CPU pressure as the kernel's PSI accounts it, beside stalltop's waits.
    pub pressure: PressureReport,
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

impl Report {
    /// The Unix time (ns) of one of the report's `*_ns` times.
    pub fn unix_ns(&self, ns: u64) -> u64 {
        (ns as i128 + self.wall_clock_offset_ns as i128).max(0) as u64
    }
}

/// The window and the filter a report was cut to; nulls for none.
#[derive(Serialize, Debug, Clone, Default, PartialEq, Eq)]
pub struct ScopeRow {
    pub from_ns: Option<u64>,
    pub from_unix_ns: Option<u64>,
    pub to_ns: Option<u64>,
    pub to_unix_ns: Option<u64>,
    /// Only what the containers (or cgroups) matching this waited for, and
    /// what their tasks did.
    pub container: Option<String>,
    pub pid: Option<u32>,
    /// Display thresholds over the recording's (`settings`), or null.
    pub runq_threshold_ns: Option<u64>,
    pub stall_threshold_ns: Option<u64>,
}

/// The stall that triggered a flight recording.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct TriggerRow {
    pub start_ns: u64,
    pub start_unix_ns: u64,
    pub duration_ns: u64,
    /// The trigger's stall in `stalls` (null when the report does not hold it).
    pub stall_id: Option<u64>,
}

#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct StallRow {
    pub id: u64,
    pub cpu: u32,
    pub start_ns: u64,
    pub start_unix_ns: u64,
    /// The span: from the first merged wait's start to the last one's end. No
    /// single task waited this long unless `signals` is 1.
    pub duration_ns: u64,
    pub kind: StallKind,
    /// Probe signals merged into this stall.
    pub signals: u32,
    /// The longest single signal merged in: a task's wait, a softirq's delay
    /// or a sampler gap. `report --sort worst` and the thresholds go by it.
    pub longest_wait_ns: u64,
    /// Task waits merged in (`runq_events` and `takeovers` with these ids;
    /// the oldest may have left those lists, and a stall keeps at most 1,000).
    pub wait_ids: Vec<u64>,
    /// How many task waits were merged in (also those past `wait_ids`).
    pub waits: u32,
    pub waited: WaitedRow,
    pub culprit: Option<CulpritDetail>,
    /// `throttled` stalls: the cgroup whose CPU quota ran out (the waiter's or an ancestor),
    /// by path. Such a stall has no culprit.
    pub throttled_cgroup: Option<String>,
    /// That cgroup's quota, as last read from cgroupfs.
    pub quota: Option<QuotaRow>,
    /// irqoff stalls: what the first tick after the gap found. A gap with
    /// no guest-side cause (idle CPU, user mode) points at the hypervisor.
    pub evidence: Option<String>,
    /// irqoff stalls: the longest gap between sampler ticks (overlapping
    /// waits merged into the stall can make it longer than the gap).
    pub gap: Option<GapRow>,
    /// irqoff stalls that hardirq handlers ran most of: the longest handler run (no task
    /// culprit then).
    pub hardirq: Option<HardirqRow>,
}

/// A hardirq handler's run: `handler` (its irqaction's name) of irq `irq`, `run_ns` long.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct HardirqRow {
    pub irq: u32,
    pub handler: String,
    /// An hrtimer callback's name (then `irq` is 0 and `handler` empty).
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
    pub start_unix_ns: u64,
    pub duration_ns: u64,
}

/// What waited: a softirq vector, and the most telling task (ksoftirqd, else
/// one kept off by a neighbour, else the one that waited longest).
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct WaitedRow {
    pub softirq: Option<&'static str>,
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub comm: Option<String>,
    pub cgroup: Option<String>,
    pub container: Option<String>,
    /// The task's own longest single wait in the stall.
    pub wait_ns: Option<u64>,
    /// How many times the task waited in the stall.
    pub waits: Option<u32>,
    /// Of `wait_ns`, the time the hypervisor took the vCPU (steal).
    pub steal_ns: Option<u64>,
    /// The task's CPU was idle for most of its wait: nobody held it.
    pub cpu_idle: bool,
    /// The task's wait began on another CPU (`cpu` is where it ended).
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
    /// The syscall it held the CPU inside during the stall (by its samples there, else by
    /// the probes); null when it ran outside any.
    pub syscall: Option<String>,
    /// What it was doing: its syscall, "user code", "kernel (no syscall)" (or "kernel" where
    /// syscalls are not watched), by its own samples in the stall, most often first; else its
    /// syscall; null when nothing tells.
    pub activity: Option<String>,
    pub path: Option<String>,
    /// On-CPU time of the whole syscall, softirqs excluded.
    pub oncpu_ns: Option<u64>,
    pub wall_ns: Option<u64>,
    /// Softirq time that ran inside the call's slices.
    pub softirq_ns: Option<u64>,
    /// Most frequent kernel stack among the culprit's own samples in the stall (leaf first);
    /// where it has none, among the other tasks' samples on the CPU then.
    pub stack: Vec<String>,
    pub user_stack: Vec<String>,
    /// The thread the stacks are of: the culprit's `tid`, or another task's when the culprit
    /// had no sample in the stall; null without a sample.
    pub stack_of: Option<StackOwner>,
    /// Samples taken on the CPU during the stall.
    pub samples: usize,
}

/// The task a culprit's stacks were sampled in.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct StackOwner {
    pub tid: u32,
    pub comm: String,
}

impl CulpritDetail {
    /// The other task whose stacks stand in for the culprit's (it had no sample in the
    /// stall); None when the stacks are its own, or there are none.
    pub fn borrowed_stack(&self) -> Option<&StackOwner> {
        self.stack_of.as_ref().filter(|owner| owner.tid != self.tid)
    }
}

#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct TakeoverRow {
    pub id: u64,
    /// The stall this wait was merged into (null: it left the stall list).
    pub stall_id: Option<u64>,
    pub cpu: u32,
    pub ts_ns: u64,
    pub ts_unix_ns: u64,
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
    /// Sampled: `max_ns` and the counts are known to about one sampler tick,
    /// this long; null when every call was timed (exact).
    pub resolution_ns: Option<u64>,
    /// Per-call wall times (exact; null when sampled).
    pub distribution: Option<Distribution>,
    pub total_ns: u64,
    pub oncpu_total_ns: u64,
    /// Files, most time first: of the calls over the threshold (hooked
    /// syscalls), or of every call the sampler found (sampled).
    pub top_paths: Vec<PathRow>,
}

#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct SlowSyscallRow {
    pub id: u64,
    /// When it returned (sampled: when it last left the CPU).
    pub ts_ns: u64,
    pub ts_unix_ns: u64,
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
    /// Sampler ticks that found the call on a CPU, and the kernel and user
    /// stack they found most often (leaf first; empty when none did).
    pub samples: usize,
    pub stack: Vec<String>,
    pub user_stack: Vec<String>,
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
    /// The timed delays.
    pub distribution: Distribution,
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
    /// Every wait for a CPU of the cgroup's tasks, long or short.
    pub count: u64,
    /// Estimates: the middle of the histogram bucket, never above `max_ns`
    /// (`distribution` has the buckets' ranges).
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub total_ns: u64,
    pub distribution: Distribution,
    /// The growth of PSI's `some` time of this cgroup (its unified
    /// hierarchy's cpu.pressure) over the recording; null where it was not
    /// read (no PSI, no unified twin, a recording made before it).
    pub pressure_some_ns: Option<u64>,
    pub preempted_by: PreemptedBy,
    pub top_preemptors: Vec<PreemptorRow>,
    /// Its wait time by cause, summing to `total_ns` (null: recorded before
    /// stalltop split waits by cause).
    pub why: Option<WhyRow>,
}

/// Why a cgroup waited: its wait time by cause, largest first.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct WhyRow {
    pub causes: Vec<WhyCause>,
}

impl WhyRow {
    /// The cause that took most of the wait, with its share (%): the
    /// holders of other cgroups summed as one cause. None: nothing split.
    pub fn largest_cause(&self) -> Option<(WaitCause, f64)> {
        let mut by_cause: BTreeMap<WaitCause, (u64, f64)> = BTreeMap::new();
        for c in &self.causes {
            let (ns, percent) = by_cause.entry(c.cause).or_default();
            *ns += c.ns;
            *percent += c.percent;
        }
        by_cause
            .into_iter()
            .max_by(|(a, (a_ns, _)), (b, (b_ns, _))| a_ns.cmp(b_ns).then_with(|| b.cmp(a)))
            .map(|(cause, (_, percent))| (cause, percent))
    }
}

/// One cause of a cgroup's wait: in waits of at least 1 ms, the hypervisor
/// (`steal`), its CPU quota (`throttled`), softirqs on its CPU, an idle CPU
/// (wake-up or migration latency), a kernel thread, a task of its own
/// cgroup (`same_cgroup`) or of another (`other_cgroup`, named by `comm`
/// and `container` for the top three, null for the rest together); and
/// `short_waits`, its waits under 1 ms, split by nothing.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct WhyCause {
    pub cause: WaitCause,
    pub comm: Option<String>,
    pub container: Option<String>,
    pub ns: u64,
    /// Of the cgroup's total wait, to 0.1.
    pub percent: f64,
}

/// PSI over the recording: the host's (/proc/pressure/cpu) and where a
/// cgroup's `some` time exceeded the waits stalltop measured in it and
/// its descendants by more than `margin_percent` of them plus `slack_ns`
/// (stalltop sums every task's waits, so its total is PSI's or more when
/// nothing went unseen).
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct PressureReport {
    pub host_some_ns: Option<u64>,
    pub host_full_ns: Option<u64>,
    pub margin_percent: u64,
    pub slack_ns: u64,
    pub disagreements: Vec<PressureDisagreement>,
}

#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct PressureDisagreement {
    pub cgroup: String,
    pub container: String,
    pub psi_some_ns: u64,
    /// stalltop's waits of the cgroup and its descendants.
    pub waited_ns: u64,
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
    pub id: u64,
    /// The stall this wait was merged into (null: it left the stall list).
    pub stall_id: Option<u64>,
    pub cpu: u32,
    /// When the task got the CPU (the wait began `wait_ns` before).
    pub ts_ns: u64,
    pub ts_unix_ns: u64,
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
    pub throttled_cgroup: Option<String>,
    /// The wait began on another CPU (`cpu` is where it ended).
    pub migrated: Option<MigratedRow>,
}

/// The task that held the CPU while the wait lasted (pid and tid 0: the CPU
/// was idle).
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct RanInstead {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub cgroup: String,
    pub container: String,
    /// The syscall it was inside, if any.
    pub syscall: Option<String>,
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
