//! What the running kernel offers the probes, read once before loading:
//! its release, the scheduler accounting and fields they read (from its
//! BTF), and whether BPF maps may allocate inside scheduler hooks. Plain
//! facts; the loader decides from them.

use libbpf_rs::btf::{types, Btf, ReferencesType};

use super::sched_info;

/// A kernel release as `uname -r` starts: major.minor.patch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct KernelRelease(pub u32, pub u32, pub u32);

impl KernelRelease {
    /// "6.1.0-56-amd64" -> 6.1.0; missing parts are 0.
    pub fn parse(release: &str) -> Option<KernelRelease> {
        let mut numbers = release.split(['.', '-', '+', '_']).map(|part| {
            let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<u32>().ok()
        });
        let major = numbers.next()??;
        let minor = numbers.next().flatten().unwrap_or(0);
        let patch = numbers.next().flatten().unwrap_or(0);
        Some(KernelRelease(major, minor, patch))
    }
}

impl std::fmt::Display for KernelRelease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// Hash maps allocate through the BPF memory allocator from this release.
const HASH_MEM_ALLOC: KernelRelease = KernelRelease(6, 1, 0);
/// Task (local) storage does from this release.
const LOCAL_STORAGE_MEM_ALLOC: KernelRelease = KernelRelease(6, 4, 0);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelFeatures {
    pub release: KernelRelease,
    /// The scheduler keeps sched_info, run-queue waits by its own
    /// accounting (CONFIG_SCHED_INFO, which also backs /proc/<pid>/schedstat;
    /// before 5.14 only with schedstats or delay accounting on): seen to
    /// grow for threads of ours made to wait, not taken from the file.
    pub sched_info: bool,
    /// CONFIG_FAIR_GROUP_SCHED: a task's run queue is reachable through
    /// `se.cfs_rq`, which the sched_info path reads the clock from.
    pub rq_from_task: bool,
    /// Inserting into a BPF_F_NO_PREALLOC hash map allocates through the
    /// BPF memory allocator, which never wakes anyone: safe under the
    /// run-queue lock. Before it, such an insert could wake kswapd on the
    /// run queue whose lock sched_switch holds.
    pub hash_alloc_in_hooks: bool,
    /// The same for creating task storage.
    pub task_storage_in_hooks: bool,
    /// A PREEMPT_RT kernel: its hash maps that allocate may take sleeping
    /// locks (before the allocator's raw locks), so nothing allocates in
    /// hooks there.
    pub preempt_rt: bool,
    /// x86 KVM guests: the distance from a CPU's run queue to its KVM steal time (the host's
    /// steal clock for that vCPU), from the kernel's BTF.
    pub steal_time_from_rq: Option<i64>,
    /// How far each CPU's mask of pending softirqs lies from its run queue (both per-CPU data),
    /// so that a sampler tick can see a softirq raised and not yet run. None where the kernel's
    /// BTF does not say, or where a task does not lead to its run queue (no
    /// CONFIG_FAIR_GROUP_SCHED).
    pub softirq_pending_from_rq: Option<i64>,
}

impl KernelFeatures {
    /// The running kernel's. A kernel whose release cannot be read is
    /// treated as the oldest: nothing allocates in hooks.
    pub fn detect() -> KernelFeatures {
        KernelFeatures::detect_with_run_delay(&sched_info::thread_run_delay)
    }

    /// `detect`, with the waits of the sched_info check read by
    /// `read_run_delay` (see `sched_info::kept`).
    pub fn detect_with_run_delay(
        read_run_delay: &(dyn Fn() -> Option<u64> + Sync),
    ) -> KernelFeatures {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .and_then(|r| KernelRelease::parse(r.trim()))
            .unwrap_or(KernelRelease(0, 0, 0));
        let version = std::fs::read_to_string("/proc/sys/kernel/version").unwrap_or_default();
        let preempt_rt = version.contains("PREEMPT_RT")
            || std::fs::read_to_string("/sys/kernel/realtime").is_ok_and(|r| r.trim() == "1");
        let btf = Btf::from_vmlinux().ok();
        KernelFeatures {
            release,
            sched_info: sched_info::kept(read_run_delay),
            rq_from_task: btf
                .as_ref()
                .is_some_and(|btf| struct_has_member(btf, "sched_entity", "cfs_rq")),
            hash_alloc_in_hooks: hash_alloc_in_hooks(release, preempt_rt),
            task_storage_in_hooks: release >= LOCAL_STORAGE_MEM_ALLOC && !preempt_rt,
            preempt_rt,
            steal_time_from_rq: btf.as_ref().and_then(steal_time_from_rq),
            softirq_pending_from_rq: btf.as_ref().and_then(softirq_pending_from_rq),
        }
    }

    /// Whether run-queue waits must be timed from wakeup hooks: without
    /// sched_info, or without the run queue it is read against.
    pub fn runq_from_wakeup(&self) -> bool {
        self.runq_from_wakeup_because().is_some()
    }

    /// Why run-queue waits must be timed from wakeup hooks, if they must.
    pub fn runq_from_wakeup_because(&self) -> Option<&'static str> {
        if !self.sched_info {
            Some(
                "the kernel keeps no sched_info (no CONFIG_SCHED_INFO; before 5.14, none without \
                 CONFIG_SCHEDSTATS or delay accounting): waits of threads made to wait did not \
                 grow",
            )
        } else if !self.rq_from_task {
            Some("the kernel lacks CONFIG_FAIR_GROUP_SCHED")
        } else {
            None
        }
    }
}

/// Whether hash maps allocate through the BPF memory allocator on `release`: not on PREEMPT_RT,
/// where its allocations may take sleeping locks.
pub(super) fn hash_alloc_in_hooks(release: KernelRelease, preempt_rt: bool) -> bool {
    release >= HASH_MEM_ALLOC && !preempt_rt
}

/// The distance from `runqueues` to KVM's `steal_time` (x86 guest kernels).
fn steal_time_from_rq(btf: &Btf<'_>) -> Option<i64> {
    distance_from_rq(btf, &[("steal_time", None)])
}

/// The distance from `runqueues` to the mask of pending softirqs: its own
/// variable (recent x86), a field of `pcpu_hot` (x86 from 6.2 until then)
/// or of `irq_stat` (x86 before 6.2, and the generic place elsewhere).
fn softirq_pending_from_rq(btf: &Btf<'_>) -> Option<i64> {
    distance_from_rq(
        btf,
        &[
            ("__softirq_pending", None),
            ("pcpu_hot", Some("softirq_pending")),
            ("irq_stat", Some("__softirq_pending")),
        ],
    )
}

/// The distance from `runqueues` to the first of `places` (a per-CPU
/// variable, or a field of one) this kernel has, by their offsets in the
/// kernel's per-CPU section; None without any, or where a task does not
/// lead to its run queue.
fn distance_from_rq(btf: &Btf<'_>, places: &[(&str, Option<&str>)]) -> Option<i64> {
    let percpu = btf.type_by_name::<types::DataSec<'_>>(".data..percpu")?;
    let variable = |name: &str| {
        percpu.iter().find_map(|v| {
            let var = btf.type_by_id::<types::Var<'_>>(v.ty)?;
            (var.name()? == name).then(|| (i64::from(v.offset), var.referenced_type()))
        })
    };
    if !struct_has_member(btf, "sched_entity", "cfs_rq") {
        return None;
    }
    let place = places.iter().find_map(|&(name, field)| {
        let (offset, ty) = variable(name)?;
        let Some(field) = field else {
            return Some(offset);
        };
        let fields = types::Struct::try_from(ty.skip_mods_and_typedefs()).ok()?;
        Some(offset + field_offset(&fields, field)?)
    })?;
    Some(place - variable("runqueues")?.0)
}

/// The byte offset of `field` in `s`, a plain (not bit) field.
fn field_offset(s: &types::Struct<'_>, field: &str) -> Option<i64> {
    s.iter().find_map(|m| match m.attr {
        types::MemberAttr::Normal { offset } if m.name? == field => Some(i64::from(offset / 8)),
        _ => None,
    })
}

fn struct_has_member(btf: &Btf<'_>, name: &str, member: &str) -> bool {
    btf.type_by_name::<types::Struct<'_>>(name)
        .is_some_and(|s| s.iter().any(|m| m.name.is_some_and(|n| n == member)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_parse_from_distribution_strings() {
        assert_eq!(
            KernelRelease::parse("6.1.0-56-amd64"),
            Some(KernelRelease(6, 1, 0))
        );
        assert_eq!(
            KernelRelease::parse("6.18.44-fc-v782"),
            Some(KernelRelease(6, 18, 44))
        );
        assert_eq!(
            KernelRelease::parse("5.4.0-1103-aws"),
            Some(KernelRelease(5, 4, 0))
        );
        assert_eq!(
            KernelRelease::parse("5.14.0-427.13.1.el9_4.x86_64"),
            Some(KernelRelease(5, 14, 0))
        );
        assert_eq!(KernelRelease::parse("6.8"), Some(KernelRelease(6, 8, 0)));
        assert_eq!(KernelRelease::parse("garbage"), None);
    }

    #[test]
    fn allocation_in_hooks_follows_the_release() {
        assert!(KernelRelease(6, 1, 0) >= HASH_MEM_ALLOC);
        assert!(KernelRelease(5, 15, 200) < HASH_MEM_ALLOC);
        assert!(KernelRelease(6, 1, 0) < LOCAL_STORAGE_MEM_ALLOC);
        assert!(KernelRelease(6, 18, 0) >= LOCAL_STORAGE_MEM_ALLOC);
    }

    /// This host's kernel has every accounting the default path reads.
    #[test]
    fn this_kernel_has_sched_info_and_the_run_queue_through_the_task() {
        let features = KernelFeatures::detect();
        assert!(features.sched_info, "{features:?}");
        assert!(features.rq_from_task, "{features:?}");
        assert!(!features.runq_from_wakeup());
    }
}
