//! The stream every sink consumes, live or replayed: raw probe records,
//! aggregate snapshots of kernel maps and cgroupfs, and name tables. Plain
//! serializable data; no I/O here.

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuList;
use crate::histogram::Histogram;
use crate::modes::{
    Attach, CgroupHierarchy, RunqWait, SoftirqDelay, SoftirqTime, StealSource, Step, SyscallMode,
    Throttle,
};
use crate::vm::Machine;

/// One item of the stream. A recording is a header followed by these.
#[derive(Clone, Debug, PartialEq)]
pub enum Entry {
    /// Ring-buffer records exactly as the BPF side wrote them, back to back;
    /// each starts with `record_header` (see bpf/stalltop.h).
    Records(Vec<u8>),
    Kernel(KernelSnapshot),
    Throttle(ThrottleSnapshot),
    Names(NameTable),
    /// CPU pressure (PSI): recordings before it have none.
    Pressure(PressureSnapshot),
}

/// What a recording (or a live session) was started with.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Header {
    pub host: HostInfo,
    /// CLOCK_MONOTONIC (the BPF clock) when the session started.
    pub start_ns: u64,
    /// Add to a CLOCK_MONOTONIC time to get Unix time in ns.
    pub wall_clock_offset_ns: i64,
    pub settings: Settings,
    /// Optional probes that did not come up.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// What each probe family's load did (recordings before this field
    /// have none).
    #[serde(default)]
    pub probes: Vec<ProbeLoad>,
    /// A flight recording: the stall that made `serve` write it (none in
    /// recordings of `record`, nor in those before this field).
    #[serde(default)]
    pub trigger: Option<FlightTrigger>,
    /// The process that recorded (stalltop itself): reports leave out its
    /// own waits and calls (recordings before this field: none).
    #[serde(default)]
    pub recorder_pid: Option<u32>,
}

/// What made `serve` write a flight recording: a stall from `start_ns` to
/// `end_ns`, or (the two equal) a request at that time (SIGUSR1, POST /dump).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlightTrigger {
    pub start_ns: u64,
    pub end_ns: u64,
}

/// One probe family's load: whether the kernel took it, how long it took,
/// and each program's verifier work.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ProbeLoad {
    /// "syscall", "sched", "softirq" or "sampler".
    pub family: String,
    /// "tp_btf" or "raw_tp".
    pub attach: String,
    pub loaded: bool,
    /// Open, verify, load and attach.
    pub load_ms: u64,
    /// Why the kernel refused it, in plain words.
    pub error: Option<String>,
    pub programs: Vec<ProgramLoad>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ProgramLoad {
    pub name: String,
    /// Instructions the verifier processed (None before Linux 5.16).
    pub verified_insns: Option<u32>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct HostInfo {
    pub hostname: String,
    pub kernel: String,
    /// How many CPUs were online.
    pub cpus: u32,
    /// Which CPUs were online (recordings before this field have none:
    /// then the first `cpus`).
    #[serde(default)]
    pub online: Option<CpuList>,
    /// Whether it is a VM (recordings before this field: not known).
    #[serde(default)]
    pub machine: Option<Machine>,
}

impl HostInfo {
    /// The online CPUs, the one list every per-CPU view uses.
    pub fn online_cpus(&self) -> CpuList {
        self.online
            .clone()
            .unwrap_or_else(|| CpuList::first(self.cpus))
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    pub runq_threshold_ns: u64,
    /// Softirq delay, ksoftirqd wait or irqs-off gap that makes a stall.
    pub stall_threshold_ns: u64,
    pub syscall_wall_threshold_ns: u64,
    pub syscall_oncpu_threshold_ns: u64,
    pub sample_hz: u32,
    pub attach: Attach,
    /// Which hierarchy cgroup ids refer to.
    pub cgroup_hierarchy: CgroupHierarchy,
    /// How syscalls were watched (recordings before this field hooked them
    /// unless told not to: exact).
    #[serde(default = "exact_syscalls")]
    pub syscalls: SyscallMode,
    /// How softirq run time, and the time softirqs took from the tasks
    /// they interrupted, was measured (recordings before this field: exact).
    #[serde(default = "exact_softirq_time")]
    pub softirq_time: SoftirqTime,
    /// Where softirq delays were timed from; see `Settings::softirq_delay`.
    #[serde(default, rename = "softirq_delay")]
    pub softirq_delay_timing: Option<SoftirqDelay>,
    /// Where the sampler and the interrupt probes read the hypervisor's steal (recordings
    /// before this field: none).
    #[serde(default = "no_steal")]
    pub steal: StealSource,
    /// How run-queue waits were timed (recordings before this field: not said).
    #[serde(default)]
    pub runq_wait: Option<RunqWait>,
    /// Where CFS throttles were seen (recordings before this field: not said).
    #[serde(default)]
    pub throttle: Option<Throttle>,
}

impl Settings {
    /// Where softirq delays were timed from. Recordings before the field timed them the way
    /// they timed run time.
    pub fn softirq_delay(&self) -> SoftirqDelay {
        self.softirq_delay_timing
            .unwrap_or(match self.softirq_time {
                SoftirqTime::Exact => SoftirqDelay::Exact,
                SoftirqTime::Sampled => SoftirqDelay::Sampled,
                SoftirqTime::Off => SoftirqDelay::Off,
            })
    }
}

fn exact_syscalls() -> SyscallMode {
    SyscallMode::Exact
}

fn exact_softirq_time() -> SoftirqTime {
    SoftirqTime::Exact
}

fn no_steal() -> StealSource {
    StealSource::None
}

/// Aggregate kernel state at `ts_ns`, cumulative since the probes loaded.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct KernelSnapshot {
    pub ts_ns: u64,
    pub runq: Vec<CgroupRunq>,
    pub preemptors: Vec<Preemptor>,
    pub softirq: Vec<SoftirqStats>,
    pub softirq_stolen: Vec<SoftirqStolen>,
    pub syscalls: Vec<SyscallStats>,
    /// Sampled syscalls: kernel time by file (recordings before it or in
    /// other modes have none).
    #[serde(default)]
    pub files: Vec<FileTime>,
    pub counters: Counters,
    /// Cost of each probe: its invocations, and its run time estimated
    /// from the one in PROBE_COST_EVERY (bpf/stalltop.h) it times itself.
    pub programs: Vec<ProgramCost>,
    /// Cgroups found removed since the previous snapshot (the live
    /// source's pruning pass: in the maps then, gone from cgroupfs now);
    /// their counts above are their last. Recordings before this field
    /// have none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed_cgroups: Vec<u64>,
    /// The cost guard's budget, measure and steps, when one runs
    /// (`--max-cpu`; recordings before this field have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Boxed: most snapshots have none, and `Entry` stays small.
    pub cost_guard: Option<Box<GuardState>>,
}

/// What the cost guard (`--max-cpu`) knows and did, at a snapshot.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct GuardState {
    /// The budget, in CPUs (the share of the node times its CPUs).
    pub budget_cpus: f64,
    /// What stalltop spent over the last few seconds, in CPUs.
    pub cost_cpus: f64,
    /// The steps this session can take, in the order they go down.
    pub steps: Vec<Step>,
    /// The steps down now, the latest last.
    pub down: Vec<Step>,
}

/// Sampled syscalls: the calls of syscall `nr` by tasks of `cgroup` on one
/// file, and the time they held a CPU.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct FileTime {
    pub cgroup: u64,
    pub nr: u32,
    pub path: String,
    pub calls: u64,
    pub oncpu_ns: u64,
}

/// Softirq delay (raise -> entry) and run time of one vector on one CPU.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct SoftirqStats {
    pub cpu: u32,
    pub vector: u32,
    pub delay: Histogram,
    pub count: u64,
    /// Sum of the delays (recordings made before it was kept read 0).
    #[serde(default)]
    pub delay_total_ns: u64,
    pub delay_max_ns: u64,
    pub run_total_ns: u64,
    pub run_max_ns: u64,
    pub runs_in_ksoftirqd: u64,
    pub run_in_ksoftirqd_ns: u64,
}

/// Softirq time that ran inside the time slices of thread `tid` (of
/// process `pid`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct SoftirqStolen {
    pub pid: u32,
    #[serde(default)]
    pub tid: u32,
    pub comm: String,
    pub vector: u32,
    pub ns: u64,
    pub count: u64,
}

/// Latency of one syscall in one cgroup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct SyscallStats {
    pub cgroup: u64,
    pub nr: u32,
    pub wall: Histogram,
    pub count: u64,
    pub wall_total_ns: u64,
    pub oncpu_total_ns: u64,
    pub max_ns: u64,
}

/// Run count and time of one BPF program since it loaded.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ProgramCost {
    pub name: String,
    pub run_count: u64,
    pub run_time_ns: u64,
}

/// Run-queue latency and preemption causes of the tasks of one cgroup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct CgroupRunq {
    pub cgroup: u64,
    pub latency: Histogram,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    pub preempted_same_cgroup: u64,
    pub preempted_other_cgroup: u64,
    pub preempted_kthread: u64,
    /// Waits its CPU quota (or an ancestor's) explains: not counted above.
    #[serde(default)]
    pub preempted_throttled: u64,
    /// The wait time of those episodes (waits of at least 1 ms), by cause (None: recorded
    /// before stalltop split it).
    #[serde(default)]
    pub why: Option<WaitCauses>,
}

/// A cgroup's wait time in episodes (waits of at least 1 ms), split by cause, in ns, in the
/// order the kernel side takes each off a wait (`enum why_cause` in bpf/stalltop.h). The
/// rest of its total wait is waits under 1 ms, split by nothing.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitCauses {
    /// The hypervisor ran another vCPU (only in waits over the report threshold).
    pub steal_ns: u64,
    /// Its CPU quota, or an ancestor's.
    pub throttled_ns: u64,
    /// Softirqs run on its CPU.
    pub softirq_ns: u64,
    /// Nobody held its CPU: wake-up or migration latency.
    pub idle_ns: u64,
    /// A kernel thread held its CPU.
    pub kthread_ns: u64,
    /// A task of its own cgroup held its CPU.
    pub same_cgroup_ns: u64,
    /// A task of another cgroup held its CPU.
    pub other_cgroup_ns: u64,
}

impl WaitCauses {
    pub fn total_ns(&self) -> u64 {
        self.parts().iter().map(|(_, ns)| ns).sum()
    }

    /// Each cause with its time, in the kernel's order.
    pub fn parts(&self) -> [(WaitCause, u64); 7] {
        [
            (WaitCause::Steal, self.steal_ns),
            (WaitCause::Throttled, self.throttled_ns),
            (WaitCause::Softirq, self.softirq_ns),
            (WaitCause::Idle, self.idle_ns),
            (WaitCause::Kthread, self.kthread_ns),
            (WaitCause::SameCgroup, self.same_cgroup_ns),
            (WaitCause::OtherCgroup, self.other_cgroup_ns),
        ]
    }

    pub fn add(&mut self, other: &WaitCauses) {
        self.combine(other, u64::saturating_add);
    }

    /// What was added since `baseline` (an earlier reading of the same counters).
    pub fn since(&self, baseline: &WaitCauses) -> WaitCauses {
        let mut out = *self;
        out.combine(baseline, u64::saturating_sub);
        out
    }

    fn combine(&mut self, other: &WaitCauses, op: fn(u64, u64) -> u64) {
        self.steal_ns = op(self.steal_ns, other.steal_ns);
        self.throttled_ns = op(self.throttled_ns, other.throttled_ns);
        self.softirq_ns = op(self.softirq_ns, other.softirq_ns);
        self.idle_ns = op(self.idle_ns, other.idle_ns);
        self.kthread_ns = op(self.kthread_ns, other.kthread_ns);
        self.same_cgroup_ns = op(self.same_cgroup_ns, other.same_cgroup_ns);
        self.other_cgroup_ns = op(self.other_cgroup_ns, other.other_cgroup_ns);
    }
}

/// One cause of `WaitCauses`, or the waits under 1 ms that it does not split.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum WaitCause {
    Steal,
    Throttled,
    Softirq,
    Idle,
    Kthread,
    SameCgroup,
    OtherCgroup,
    ShortWaits,
}

/// How often `comm` of `preemptor_cgroup` kept a runnable task of
/// `victim_cgroup` off its CPU: took it from it, or held it while it waited
/// at least 1 ms after a wakeup.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Preemptor {
    pub victim_cgroup: u64,
    pub preemptor_cgroup: u64,
    pub comm: String,
    pub count: u64,
    /// Total wait of those episodes.
    #[serde(default)]
    pub wait_ns: u64,
    /// `comm` is a kernel thread (false in recordings before it was kept).
    #[serde(default)]
    pub kthread: bool,
}

/// Loss and overflow counters kept by the BPF side and the reader.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Records dropped, by record kind name ("runq", "takeover", ...):
    /// ring buffer full in the kernel or channel full in user space.
    pub lost: Vec<(String, u64)>,
    /// Updates refused because a bounded map was full, by map name.
    pub map_full: Vec<(String, u64)>,
    /// Records not sent, by kind, because that kind went over the per-CPU
    /// record rate (the aggregates still count them).
    #[serde(default)]
    pub rate_limited: Vec<(String, u64)>,
}

/// CFS bandwidth state of every cgroup with a CPU quota, read from cgroupfs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ThrottleSnapshot {
    pub ts_ns: u64,
    pub cgroups: Vec<CgroupThrottle>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct CgroupThrottle {
    /// Path relative to the hierarchy root, "/" for the root.
    pub path: String,
    pub quota_us: u64,
    pub period_us: u64,
    pub burst_us: Option<u64>,
    /// cpuset CPUs allowed, as the kernel prints them ("0-3,8").
    pub cpus: Option<String>,
    /// Cumulative counters from cpu.stat.
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_ns: u64,
    /// Cumulative CPU usage (cpuacct.usage or cpu.stat usage_usec).
    pub usage_ns: Option<u64>,
}

/// CPU pressure as the kernel's PSI accounts it, at `ts_ns`: the host's
/// and each watched cgroup's (its unified hierarchy's cpu.pressure, where
/// there is one), cumulative since boot or since the cgroup was made.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct PressureSnapshot {
    pub ts_ns: u64,
    pub host: Option<Pressure>,
    pub cgroups: Vec<CgroupPressure>,
}

/// A PSI file's totals: time in which some (at least one) runnable task
/// waited for a CPU, and in which all non-idle tasks did (kernels before
/// 5.13 have no `full` for cpu), in microseconds.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pressure {
    pub some_us: u64,
    pub full_us: Option<u64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct CgroupPressure {
    /// As the other snapshots name cgroups: relative to the hierarchy
    /// stalltop attributes by.
    pub path: String,
    pub pressure: Pressure,
}

/// Names for ids and addresses that the probe records carry: cgroup id
/// (kernfs inode) -> path relative to its hierarchy root; code address ->
/// symbol, for kernel stacks and, per process, user stacks; and the
/// Kubernetes names of the pods and containers those paths hold (see
/// src/kubelet.rs; recordings before these fields have none).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct NameTable {
    pub cgroups: Vec<(u64, String)>,
    #[serde(default)]
    pub kernel_symbols: Vec<(u64, String)>,
    #[serde(default)]
    pub user_symbols: Vec<(u32, u64, String)>,
    /// Pod uid (`-` separated) -> `namespace/pod`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<(String, String)>,
    /// Container id (64 hex digits) -> container name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub containers: Vec<(String, String)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubernetes_names() -> NameTable {
        NameTable {
            cgroups: vec![(7, "/kubepods/podabc".into())],
            pods: vec![("6b1f3c2e-8d4a".into(), "shop/cart".into())],
            containers: vec![("3f4a".repeat(16), "redis".into())],
            ..NameTable::default()
        }
    }

    #[test]
    fn name_tables_with_kubernetes_names_round_trip() {
        let json = serde_json::to_string(&kubernetes_names()).unwrap();
        assert!(
            json.contains(r#""pods":[["6b1f3c2e-8d4a","shop/cart"]]"#),
            "{json}"
        );
        let read: NameTable = serde_json::from_str(&json).unwrap();
        assert_eq!(read, kubernetes_names());
    }

    #[test]
    fn name_tables_without_kubernetes_names_read_and_write_as_before() {
        // A names entry as recordings made before the Kubernetes fields hold.
        let old = r#"{"cgroups":[[7,"/kubepods/podabc"]],"kernel_symbols":[],"user_symbols":[]}"#;
        let read: NameTable = serde_json::from_str(old).unwrap();
        assert_eq!(
            read,
            NameTable {
                cgroups: vec![(7, "/kubepods/podabc".into())],
                ..NameTable::default()
            }
        );
        assert!(read.pods.is_empty() && read.containers.is_empty());
        assert_eq!(serde_json::to_string(&read).unwrap(), old);
    }
}
