//! How stalltop watches, from the command line to the recording: the attach and syscall modes a
//! user picks, the attach mode the probes resolved, how softirq time was measured, which
//! cgroup hierarchy ids refer to, and the steps the cost guard takes down to stay within its
//! budget. Each is an enum everywhere; recordings and JSON keep the strings they always carried
//! (serde names below), so old recordings read the same.

use serde::{Deserialize, Serialize};

/// Which twin of every program to load (`--attach`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AttachMode {
    /// tp_btf where the kernel has BTF tracepoints, else raw_tp.
    Auto,
    /// BTF tracepoints only (fastest: direct field access).
    TpBtf,
    /// Raw tracepoints with CO-RE reads (for kernels without tp_btf).
    RawTp,
}

/// The twin of every program that loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Attach {
    #[serde(rename = "tp_btf")]
    TpBtf,
    #[serde(rename = "raw_tp")]
    RawTp,
}

impl Attach {
    pub fn name(self) -> &'static str {
        match self {
            Attach::TpBtf => "tp_btf",
            Attach::RawTp => "raw_tp",
        }
    }
}

/// How syscalls are watched (`--syscalls`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyscallMode {
    /// No syscall hooks: the CPU sampler finds the calls that hold a CPU
    /// (syscall, file, time in the kernel to about a sampler period).
    Sampled,
    /// Hook every syscall's entry and exit: per-call latency and on-CPU
    /// histograms, every slow call with its file.
    Exact,
    /// No syscall hooks: culprits lose their syscall, file and on-CPU time.
    Off,
}

impl SyscallMode {
    pub fn name(self) -> &'static str {
        match self {
            SyscallMode::Sampled => "sampled",
            SyscallMode::Exact => "exact",
            SyscallMode::Off => "off",
        }
    }
}

/// How softirq run time, and the time softirqs took from the tasks they interrupted, was
/// measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SoftirqTime {
    /// Timed from each softirq's entry to its exit.
    Exact,
    /// Counted by the sampler's ticks (recordings of versions that did so in the cheap modes;
    /// it read low, see docs/design-notes.md).
    Sampled,
    /// Not measured: the softirq probes did not load.
    Off,
}

impl SoftirqTime {
    pub fn name(self) -> &'static str {
        match self {
            SoftirqTime::Exact => "exact",
            SoftirqTime::Sampled => "sampled",
            SoftirqTime::Off => "off",
        }
    }
}

/// Where a softirq's delay (raise to run) was timed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SoftirqDelay {
    /// From the raise (a program on every raise).
    Exact,
    /// From the first sampler tick that found the vector pending: short of the true delay by
    /// under a period, and only the delays a tick saw are in the histogram.
    Sampled,
    /// Not timed: the softirq probes did not load.
    Off,
}

/// How run-queue waits were timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RunqWait {
    /// The scheduler's own accounting (sched_info), read at each switch.
    #[serde(rename = "sched_info")]
    SchedInfo,
    /// Programs on every wakeup (kernels without sched_info, or without the run queue
    /// reachable from a task).
    #[serde(rename = "wakeup")]
    Wakeup,
}

impl RunqWait {
    pub fn name(self) -> &'static str {
        match self {
            RunqWait::SchedInfo => "sched_info",
            RunqWait::Wakeup => "wakeup",
        }
    }
}

/// Where CFS throttles were seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Throttle {
    /// In the kernel, at the switch a throttle causes: the waiting task's cfs_rq counts the
    /// throttled groups above it (CONFIG_CFS_BANDWIDTH).
    #[serde(rename = "throttle_count")]
    ThrottleCount,
    /// Only from each cgroup's cpu.stat.
    #[serde(rename = "cpu.stat")]
    CpuStat,
}

impl Throttle {
    pub fn name(self) -> &'static str {
        match self {
            Throttle::ThrottleCount => "throttle_count",
            Throttle::CpuStat => "cpu.stat",
        }
    }
}

/// Which cgroup hierarchy the cgroup ids of a run refer to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CgroupHierarchy {
    /// The v1 cpu controller's (v1 and hybrid hosts).
    #[serde(rename = "v1 cpu")]
    V1Cpu,
    /// cgroup2's.
    #[serde(rename = "unified")]
    Unified,
}

impl CgroupHierarchy {
    pub fn name(self) -> &'static str {
        match self {
            CgroupHierarchy::V1Cpu => "v1 cpu",
            CgroupHierarchy::Unified => "unified",
        }
    }
}

macro_rules! display_by_name {
    ($($t:ty),*) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    )*};
}

display_by_name!(
    Attach,
    SyscallMode,
    SoftirqTime,
    CgroupHierarchy,
    RunqWait,
    Throttle,
    StealSource
);

/// A step the cost guard (`--max-cpu`) takes down, in this order, when
/// stalltop costs more than its budget, and back up, last first, when
/// there is room: each lowers its cost on a running session and sees less.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Step {
    /// `--syscalls exact` watches syscalls as `sampled` does: the hooks on
    /// every syscall's entry and exit come off.
    Syscalls,
    /// The CPU sampler ticks at half its rate.
    Sampler,
    /// The sampler's records carry no stacks.
    Stacks,
}

impl Step {
    pub const ALL: [Step; 3] = [Step::Syscalls, Step::Sampler, Step::Stacks];

    /// As in metrics (`stalltop_degraded{step}`), logs and the header.
    pub fn name(self) -> &'static str {
        match self {
            Step::Syscalls => "syscalls",
            Step::Sampler => "sampler",
            Step::Stacks => "stacks",
        }
    }

    /// What stepping down does, in a few words.
    pub fn down(self) -> &'static str {
        match self {
            Step::Syscalls => "exact syscalls sampled",
            Step::Sampler => "sampler at half rate",
            Step::Stacks => "stacks off",
        }
    }

    /// What stepping back up does.
    pub fn up(self) -> &'static str {
        match self {
            Step::Syscalls => "syscalls exact again",
            Step::Sampler => "sampler at full rate",
            Step::Stacks => "stacks on",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(value: impl Serialize) -> String {
        serde_json::to_string(&value).unwrap()
    }

    /// Recordings carry these strings; changing one breaks every recording made before.
    #[test]
    fn recordings_keep_the_strings_they_always_carried() {
        assert_eq!(json(Attach::TpBtf), "\"tp_btf\"");
        assert_eq!(json(Attach::RawTp), "\"raw_tp\"");
        assert_eq!(json(SyscallMode::Sampled), "\"sampled\"");
        assert_eq!(json(SyscallMode::Exact), "\"exact\"");
        assert_eq!(json(SyscallMode::Off), "\"off\"");
        assert_eq!(json(SoftirqTime::Exact), "\"exact\"");
        assert_eq!(json(SoftirqTime::Sampled), "\"sampled\"");
        assert_eq!(json(CgroupHierarchy::V1Cpu), "\"v1 cpu\"");
        assert_eq!(json(CgroupHierarchy::Unified), "\"unified\"");
        assert_eq!(json(RunqWait::SchedInfo), "\"sched_info\"");
        assert_eq!(json(RunqWait::Wakeup), "\"wakeup\"");
        assert_eq!(json(Throttle::ThrottleCount), "\"throttle_count\"");
        assert_eq!(json(Throttle::CpuStat), "\"cpu.stat\"");
        let back: CgroupHierarchy = serde_json::from_str("\"v1 cpu\"").unwrap();
        assert_eq!(back, CgroupHierarchy::V1Cpu);
    }

    #[test]
    fn names_are_the_serialized_strings() {
        for m in [SyscallMode::Sampled, SyscallMode::Exact, SyscallMode::Off] {
            assert_eq!(json(m), format!("\"{m}\""));
        }
        for a in [Attach::TpBtf, Attach::RawTp] {
            assert_eq!(json(a), format!("\"{a}\""));
        }
        for r in [RunqWait::SchedInfo, RunqWait::Wakeup] {
            assert_eq!(json(r), format!("\"{r}\""));
        }
        for t in [Throttle::ThrottleCount, Throttle::CpuStat] {
            assert_eq!(json(t), format!("\"{t}\""));
        }
        for s in [StealSource::None, StealSource::Kvm, StealSource::RunQueue] {
            assert_eq!(json(s), format!("\"{s}\""));
        }
    }
}

/// Where the sampler and the interrupt probes read the time the hypervisor took the vCPU
/// (`enum steal_source` of bpf/stalltop.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StealSource {
    /// Bare metal, or a VM whose kernel is told no steal: none is taken out.
    #[serde(rename = "none")]
    None,
    /// x86 KVM guests: KVM's per-vCPU steal time, current at any moment.
    #[serde(rename = "kvm")]
    Kvm,
    /// The run queue's copies of the paravirt steal clock (any hypervisor the kernel reads
    /// steal from), brought up to date at the CPU's scheduler ticks: gaps and interrupt runs
    /// are judged a tick after they end.
    #[serde(rename = "run queue")]
    RunQueue,
}

impl StealSource {
    pub fn name(self) -> &'static str {
        match self {
            StealSource::None => "none",
            StealSource::Kvm => "kvm",
            StealSource::RunQueue => "run queue",
        }
    }
}
