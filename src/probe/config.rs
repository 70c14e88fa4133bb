//! What the probes are told before they load: the user's choices (attach
//! and syscall modes, thresholds, rates) and what the kernel offers.

use super::features::KernelFeatures;
use crate::modes::{AttachMode, StealSource, SyscallMode};
use crate::vm::Machine;

/// The CPU sampler's default rate. Its period (1.383 ms) is out of step
/// with the 1 ms, 4 ms and 10 ms timers periodic tasks and kernels run on
/// (0.383 of 1 ms, near the golden section, so successive ticks spread over
/// such a task's cycle): at 1000 Hz a task waking every millisecond can be
/// in step with the ticks, which then find it, and never whoever runs in
/// between.
pub const DEFAULT_SAMPLE_HZ: u32 = 723;
/// A hardirq handler this long keeps its CPU's interrupts off long enough to matter: a
/// healthy one takes microseconds.
pub const HARDIRQ_THRESHOLD_NS: u64 = 1_000_000;

/// The finest source `machine` offers with this kernel: KVM's own clock where the host
/// keeps one and the kernel's BTF places it; else the run queue's where the kernel has
/// accounted steal (`accounted`: /proc/stat); else none.
pub fn choose_steal_source(
    machine: &Machine,
    features: &KernelFeatures,
    accounted: bool,
) -> StealSource {
    match machine {
        Machine::Vm {
            kvm_steal_time: true,
            ..
        } if features.steal_time_from_rq.is_some() => StealSource::Kvm,
        Machine::BareMetal => StealSource::None,
        _ if accounted => StealSource::RunQueue,
        _ => StealSource::None,
    }
}

/// What the probes are told before they load.
#[derive(Clone, Debug)]
pub struct ProbeConfig {
    pub attach: AttachMode,
    pub runq_threshold_ns: u64,
    /// Softirq delay, ksoftirqd wait and irqs-off gap that make a stall.
    pub stall_threshold_ns: u64,
    pub syscall_wall_threshold_ns: u64,
    pub syscall_oncpu_threshold_ns: u64,
    /// A hardirq handler that runs this long is reported.
    pub hardirq_threshold_ns: u64,
    /// CPU X-ray sampling rate; 0 turns the sampler off.
    pub sample_hz: u32,
    /// Records per second per CPU and kind before the kernel side samples.
    pub record_rate: u32,
    pub syscalls: SyscallMode,
    /// Attribute tasks by their v1 cpu cgroup (hybrid and v1 hosts).
    pub cgroup_v1_cpu: bool,
    /// (cpu, thread id) of every ksoftirqd/N thread.
    pub ksoftirqd: Vec<(u32, u32)>,
    /// What the kernel offers; tests change it to force fallbacks.
    pub features: KernelFeatures,
    /// Where steal is read (choose_steal_source; tests force the run queue's on a KVM guest).
    pub steal: StealSource,
    /// The share of the node stalltop may use (`--max-cpu`), when a cost
    /// guard runs: it may step the session down while it runs, so an exact
    /// session also loads the sampled-call code, off until the guard takes
    /// the syscall hooks off.
    pub cost_guard: Option<f64>,
}

impl ProbeConfig {
    /// Whether the sampler's ticks may start softirq delays, so that no
    /// program runs on each raise: in the cheap modes (sampled and off),
    /// with the sampler on, where the kernel's BTF places the mask of
    /// pending softirqs, and not on PREEMPT_RT (softirqs run in threads
    /// there). A tick that finds a vector pending starts its delay; the
    /// vector's entry ends it. Whether they do is decided once the sampler
    /// has attached (src/probe/loader.rs). `--syscalls exact` times every
    /// delay from its raise. Run time is timed from entry to exit in every
    /// mode.
    pub fn softirq_delay_ticks(&self) -> bool {
        self.syscalls != SyscallMode::Exact
            && self.sample_hz > 0
            && self.features.softirq_pending_from_rq.is_some()
            && !self.features.preempt_rt
    }

    /// Whether the sampled-call code loads: in sampled mode, and in exact
    /// mode under a cost guard, which may step the hooks down to it. Both
    /// need the sampler.
    pub fn sampled_calls_loaded(&self) -> bool {
        self.sample_hz > 0
            && match self.syscalls {
                SyscallMode::Sampled => true,
                SyscallMode::Exact => self.cost_guard.is_some(),
                SyscallMode::Off => false,
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::features::KernelRelease;

    fn config(syscalls: SyscallMode, sample_hz: u32, features: KernelFeatures) -> ProbeConfig {
        ProbeConfig {
            attach: AttachMode::Auto,
            runq_threshold_ns: 1_000_000,
            stall_threshold_ns: 10_000_000,
            syscall_wall_threshold_ns: 10_000_000,
            syscall_oncpu_threshold_ns: 1_000_000,
            hardirq_threshold_ns: HARDIRQ_THRESHOLD_NS,
            sample_hz,
            record_rate: 1000,
            syscalls,
            cgroup_v1_cpu: false,
            ksoftirqd: Vec::new(),
            cost_guard: None,
            features,
            steal: StealSource::None,
        }
    }

    #[test]
    fn softirq_delays_start_at_ticks_only_in_the_cheap_modes_where_ticks_can_tell() {
        let placed = KernelFeatures {
            release: KernelRelease(6, 1, 0),
            sched_info: true,
            rq_from_task: true,
            hash_alloc_in_hooks: true,
            task_storage_in_hooks: false,
            preempt_rt: false,
            steal_time_from_rq: None,
            softirq_pending_from_rq: Some(-89_136),
            btf_mismatch: None,
            throttle_count: true,
        };
        let maskless = KernelFeatures {
            softirq_pending_from_rq: None,
            ..placed
        };
        let rt = KernelFeatures {
            preempt_rt: true,
            ..placed
        };
        for (mode, hz, features, ticks) in [
            (SyscallMode::Sampled, 723, placed, true),
            (SyscallMode::Off, 723, placed, true),
            (SyscallMode::Exact, 723, placed, false), // every delay from its raise
            (SyscallMode::Sampled, 0, placed, false), // no ticks
            (SyscallMode::Sampled, 723, rt, false),   // softirqs in threads
            (SyscallMode::Sampled, 723, maskless, false), // no pending mask
        ] {
            assert_eq!(
                config(mode, hz, features).softirq_delay_ticks(),
                ticks,
                "{mode:?} at {hz} Hz on {features:?}"
            );
        }
    }
}
