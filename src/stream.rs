//! The stream every sink consumes, live or replayed: raw probe records,
//! aggregate snapshots of kernel maps and cgroupfs, and name tables. Plain
//! serializable data; no I/O here.

use serde::{Deserialize, Serialize};

use crate::histogram::Histogram;

/// One item of the stream. A recording is a header followed by these.
#[derive(Clone, Debug, PartialEq)]
pub enum Entry {
    /// Ring-buffer records exactly as the BPF side wrote them, back to back;
    /// each starts with `record_header` (see bpf/stalltop.h).
    Records(Vec<u8>),
    Kernel(KernelSnapshot),
    Throttle(ThrottleSnapshot),
    Names(NameTable),
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
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct HostInfo {
    pub hostname: String,
    pub kernel: String,
    pub cpus: u32,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    pub runq_threshold_ns: u64,
    pub takeover_threshold_ns: u64,
    /// "tp_btf" or "raw_tp".
    pub attach: String,
    /// Which hierarchy cgroup ids refer to: "v1 cpu" or "unified".
    pub cgroup_hierarchy: String,
}

/// Aggregate kernel state at `ts_ns`, cumulative since the probes loaded.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct KernelSnapshot {
    pub ts_ns: u64,
    pub runq: Vec<CgroupRunq>,
    pub preemptors: Vec<Preemptor>,
    pub counters: Counters,
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
}

/// How often a task of `victim_cgroup` lost the CPU to `comm` of
/// `preemptor_cgroup` while still runnable.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Preemptor {
    pub victim_cgroup: u64,
    pub preemptor_cgroup: u64,
    pub comm: String,
    pub count: u64,
}

/// Loss and overflow counters kept by the BPF side and the reader.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Records dropped, by record kind name ("runq", "takeover", ...):
    /// ring buffer full in the kernel or channel full in user space.
    pub lost: Vec<(String, u64)>,
    /// Updates refused because a bounded map was full, by map name.
    pub map_full: Vec<(String, u64)>,
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

/// cgroup id (kernfs inode) -> path relative to its hierarchy root.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct NameTable {
    pub cgroups: Vec<(u64, String)>,
}
