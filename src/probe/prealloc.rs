//! Which hash maps must be preallocated on this kernel, and how big they may then be. Pure
//! sizing; the loader applies it to the open maps.
//!
//! Before the BPF memory allocator (Linux 6.1) an insert into a `BPF_F_NO_PREALLOC` hash map
//! allocates with the kernel's allocators, and the verifier judges every hash map a program
//! references by the program's type (kernel/bpf/verifier.c, check_map_prog_compatibility, from
//! "bpf: Tighten the requirements for preallocated hash maps" in 5.7 until "bpf: Remove tracing
//! program restriction on map types" in 6.1): a perf_event program (the sampler) is refused
//! ("perf_event programs can only use preallocated hash map"), and a raw_tp or tracepoint program
//! loads after a `WARN_ONCE("trace type BPF program uses run-time allocation")`, which panics a
//! host booted with panic_on_warn (refused outright on PREEMPT_RT). tp_btf programs (type
//! TRACING) are not judged there, but sched_switch inserts under the run-queue lock, where an
//! allocation could wake kswapd on that same run queue. So on such kernels every hash map is
//! preallocated, whatever the program type. LRU maps always are; task storage cannot be and is
//! left out there (`KernelFeatures::task_storage_in_hooks`).

use super::features::KernelFeatures;

/// Most memory one preallocated hash map may take. A preallocated per-CPU map holds a value for
/// every possible CPU in every entry, so a map that holds 8,192 entries where it allocates on
/// demand would take 8,192 x value x CPUs up front: on a 96-CPU host with ~780-byte histograms
/// and their causes that is over 500 MiB. Within this budget, on a 96-CPU host,
/// `runq_by_cgroup` keeps 445 cgroups (32 MiB), `preemptors` all its 8,192 entries (12 MiB) and `syscalls` 496 (cgroup,
/// syscall) pairs (32 MiB): 76 MiB in all; updates beyond are counted as "map full". On 2 CPUs
/// every map keeps its declared size.
pub const BUDGET_BYTES: u64 = 32 << 20;

/// Never fewer entries than this (a host with thousands of CPUs goes over the budget rather
/// than count nothing).
const MIN_ENTRIES: u32 = 64;

/// Whether hash maps must be preallocated on a kernel with `features`.
pub fn hashes_preallocated(features: &KernelFeatures) -> bool {
    !features.hash_alloc_in_hooks
}

/// A hash map's shape, as declared.
#[derive(Clone, Copy, Debug)]
pub struct HashShape {
    pub per_cpu: bool,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
}

impl HashShape {
    /// Bytes one entry takes preallocated on a host with `cpus` possible CPUs: the key, and the
    /// value once or (per-CPU) once per CPU, each rounded up to 8 bytes as the kernel stores them.
    pub fn entry_bytes(&self, cpus: u32) -> u64 {
        let round = |n: u32| u64::from(n.div_ceil(8) * 8);
        let values = if self.per_cpu { u64::from(cpus) } else { 1 };
        round(self.key_size) + round(self.value_size) * values
    }

    /// The entries it keeps preallocated on a host with `cpus` possible CPUs: as declared, or as
    /// many as fit `BUDGET_BYTES`.
    pub fn preallocated_entries(&self, cpus: u32) -> u32 {
        let fit = BUDGET_BYTES / self.entry_bytes(cpus).max(1);
        u32::try_from(fit)
            .unwrap_or(u32::MAX)
            .clamp(MIN_ENTRIES, self.max_entries.max(MIN_ENTRIES))
            .min(self.max_entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::skel::types;
    use crate::probe::features::{hash_alloc_in_hooks, KernelRelease};

    fn features(release: KernelRelease, preempt_rt: bool) -> KernelFeatures {
        KernelFeatures {
            release,
            sched_info: true,
            rq_from_task: true,
            hash_alloc_in_hooks: hash_alloc_in_hooks(release, preempt_rt),
            task_storage_in_hooks: false,
            preempt_rt,
            steal_time_from_rq: None,
            softirq_pending_from_rq: None,
            btf_mismatch: None,
            throttle_count: true,
        }
    }

    #[test]
    fn hashes_are_preallocated_before_6_1_and_on_preempt_rt() {
        for (release, rt, preallocated) in [
            (KernelRelease(5, 12, 0), false, true),
            (KernelRelease(5, 14, 0), false, true), // RHEL 9
            (KernelRelease(5, 15, 0), false, true), // Ubuntu 22.04
            (KernelRelease(6, 0, 19), false, true),
            (KernelRelease(6, 1, 0), false, false),
            (KernelRelease(6, 1, 0), true, true), // Debian 12's -rt
            (KernelRelease(6, 6, 0), false, false),
            (KernelRelease(6, 8, 0), false, false),
            (KernelRelease(6, 12, 0), false, false),
            (KernelRelease(6, 12, 0), true, true),
        ] {
            assert_eq!(
                hashes_preallocated(&features(release, rt)),
                preallocated,
                "{release} rt {rt}"
            );
        }
    }

    fn shape<K, V>(per_cpu: bool, max_entries: u32) -> HashShape {
        HashShape {
            per_cpu,
            key_size: std::mem::size_of::<K>() as u32,
            value_size: std::mem::size_of::<V>() as u32,
            max_entries,
        }
    }

    /// The maps declared `BPF_F_NO_PREALLOC` (bpf/sched.bpf.h, bpf/syscall.bpf.h), preallocated
    /// on a 96-CPU host: each within the budget, and still room for hundreds of cgroups.
    #[test]
    fn the_maps_fit_a_96_cpu_host() {
        let maps = [
            (
                "runq_by_cgroup",
                shape::<u64, types::runq_stats>(true, 4096),
                440,
            ),
            (
                "preemptors",
                shape::<types::preemptor_key, types::preemptor_stats>(true, 8192),
                8192,
            ),
            (
                "syscalls",
                shape::<types::syscall_key, types::syscall_stats>(true, 8192),
                496,
            ),
        ];
        let mut total = 0;
        for (name, shape, at_least) in maps {
            let entries = shape.preallocated_entries(96);
            let bytes = u64::from(entries) * shape.entry_bytes(96);
            assert!(
                bytes <= BUDGET_BYTES,
                "{name}: {entries} entries, {bytes} bytes"
            );
            assert!(
                entries >= at_least,
                "{name}: {entries} entries of {shape:?}"
            );
            total += bytes;
        }
        assert!(total <= 3 * BUDGET_BYTES);
    }

    #[test]
    fn few_cpus_keep_the_declared_size_and_many_keep_a_floor() {
        let small = HashShape {
            per_cpu: true,
            key_size: 8,
            value_size: 100,
            max_entries: 4096,
        };
        assert_eq!(small.entry_bytes(2), 8 + 2 * 104);
        assert_eq!(small.preallocated_entries(2), 4096);
        assert_eq!(small.preallocated_entries(1 << 20), MIN_ENTRIES);
        let plain = HashShape {
            per_cpu: false,
            ..small
        };
        assert_eq!(plain.entry_bytes(96), 8 + 104);
        assert_eq!(plain.preallocated_entries(96), 4096);
    }
}
