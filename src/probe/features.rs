//! What the running kernel offers the probes, read once before loading:
//! its release, the scheduler accounting and fields they read (from its
//! BTF), and whether BPF maps may allocate inside scheduler hooks. Plain
//! facts; the loader decides from them.

use libbpf_rs::btf::{types, Btf, BtfType, ReferencesType};

use super::sched_info;
use crate::modes::{RunqWait, Throttle};

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
    /// The first of those per-CPU values whose BTF type is not what the
    /// probes read (its distance is None).
    pub btf_mismatch: Option<BtfMismatch>,
    /// CONFIG_CFS_BANDWIDTH: each cfs_rq counts the throttled groups above
    /// it (`throttle_count`), so the scheduler probes see a throttle at the
    /// switch it causes.
    pub throttle_count: bool,
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
        let places = btf.as_ref().map(PerCpuPlaces::of).unwrap_or_default();
        KernelFeatures {
            release,
            sched_info: sched_info::kept(read_run_delay),
            rq_from_task: btf
                .as_ref()
                .is_some_and(|btf| struct_has_member(btf, "sched_entity", "cfs_rq")),
            hash_alloc_in_hooks: hash_alloc_in_hooks(release, preempt_rt),
            task_storage_in_hooks: release >= LOCAL_STORAGE_MEM_ALLOC && !preempt_rt,
            preempt_rt,
            steal_time_from_rq: places.steal_time_from_rq,
            softirq_pending_from_rq: places.softirq_pending_from_rq,
            btf_mismatch: places.btf_mismatch,
            throttle_count: btf
                .as_ref()
                .is_some_and(|btf| struct_has_member(btf, "cfs_rq", "throttle_count")),
        }
    }

    /// Whether run-queue waits must be timed from wakeup hooks: without
    /// sched_info, or without the run queue it is read against.
    pub fn runq_from_wakeup(&self) -> bool {
        self.runq_from_wakeup_because().is_some()
    }

    /// How the scheduler probes time run-queue waits on this kernel.
    pub fn runq_wait(&self) -> RunqWait {
        if self.runq_from_wakeup() {
            RunqWait::Wakeup
        } else {
            RunqWait::SchedInfo
        }
    }

    /// Where the scheduler probes see CFS throttles on this kernel: in the kernel where a
    /// task's cfs_rq counts the throttled groups above it, else only from cpu.stat.
    pub fn throttle(&self) -> Throttle {
        if self.throttle_count && self.rq_from_task {
            Throttle::ThrottleCount
        } else {
            Throttle::CpuStat
        }
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

/// Where the per-CPU values the probes read by address lie from the run
/// queue, by the kernel's BTF.
#[derive(Debug, Default, PartialEq, Eq)]
struct PerCpuPlaces {
    steal_time_from_rq: Option<i64>,
    softirq_pending_from_rq: Option<i64>,
    btf_mismatch: Option<BtfMismatch>,
}

impl PerCpuPlaces {
    fn of(btf: &Btf<'_>) -> PerCpuPlaces {
        let mut btf_mismatch = None;
        let mut distance = |values| {
            distance_from_rq(btf, values).unwrap_or_else(|mismatch| {
                btf_mismatch.get_or_insert(mismatch);
                None
            })
        };
        PerCpuPlaces {
            steal_time_from_rq: distance(STEAL_TIME),
            softirq_pending_from_rq: distance(SOFTIRQ_PENDING),
            btf_mismatch,
        }
    }
}

/// A per-CPU value the probes read at a distance from the run queue: a
/// variable, or a field of one, and the sizes in bytes of the integer the
/// probes may read there.
struct PerCpuValue {
    value: PerCpu,
    variable: &'static str,
    field: Option<&'static str>,
    sizes: &'static [u32],
}

/// KVM's steal time (x86 guest kernels): its first field, the vCPU's steal
/// clock in ns, read as a u64.
const STEAL_TIME: &[PerCpuValue] = &[PerCpuValue {
    value: PerCpu::StealTime,
    variable: "steal_time",
    field: Some("steal"),
    sizes: &[8],
}];

/// The mask of pending softirqs: its own variable (x86 from 6.15), a field
/// of `pcpu_hot` (x86 6.2-6.14) or of `irq_stat` (x86 before 6.2, and the
/// generic place elsewhere). The probes read its low 16 bits: a u16, or the
/// low half of a little-endian u32.
const SOFTIRQ_PENDING: &[PerCpuValue] = &[
    PerCpuValue {
        value: PerCpu::SoftirqPending,
        variable: "__softirq_pending",
        field: None,
        sizes: &[2, 4],
    },
    PerCpuValue {
        value: PerCpu::SoftirqPending,
        variable: "pcpu_hot",
        field: Some("softirq_pending"),
        sizes: &[2, 4],
    },
    PerCpuValue {
        value: PerCpu::SoftirqPending,
        variable: "irq_stat",
        field: Some("__softirq_pending"),
        sizes: &[2, 4],
    },
];

/// The per-CPU values the probes read by address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PerCpu {
    SoftirqPending,
    StealTime,
}

/// A per-CPU value whose BTF type is not the integer the probes read:
/// they leave it alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BtfMismatch {
    pub value: PerCpu,
    pub variable: &'static str,
    pub field: Option<&'static str>,
    /// The size the kernel's BTF gives it; 0 when it is no integer.
    pub bytes: u32,
}

impl std::fmt::Display for BtfMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.variable)?;
        if let Some(field) = self.field {
            write!(f, ".{field}")?;
        }
        match self.bytes {
            0 => write!(f, " is not an integer in the kernel's BTF"),
            n => write!(f, " is a {n}-byte integer in the kernel's BTF"),
        }
    }
}

/// The distance from `runqueues` to the first of `places` this kernel has,
/// by their offsets in the kernel's per-CPU section: Ok(None) without any,
/// or where a task does not lead to its run queue; Err where its type is
/// not what the probes read.
fn distance_from_rq(btf: &Btf<'_>, places: &[PerCpuValue]) -> Result<Option<i64>, BtfMismatch> {
    let Some(percpu) = btf.type_by_name::<types::DataSec<'_>>(".data..percpu") else {
        return Ok(None);
    };
    let variable = |name: &str| {
        percpu.iter().find_map(|v| {
            let var = btf.type_by_id::<types::Var<'_>>(v.ty)?;
            (var.name()? == name).then(|| (i64::from(v.offset), var.referenced_type()))
        })
    };
    if !struct_has_member(btf, "sched_entity", "cfs_rq") {
        return Ok(None);
    }
    let Some(rq) = variable("runqueues") else {
        return Ok(None);
    };
    for place in places {
        let Some((offset, ty)) = variable(place.variable) else {
            continue;
        };
        let (offset, ty) = match place.field {
            None => (offset, ty),
            Some(field) => {
                let Some((in_variable, ty)) = member_place(btf, ty, field) else {
                    continue;
                };
                (offset + in_variable, ty)
            }
        };
        let bytes = integer_bytes(ty);
        if !place.sizes.contains(&bytes) {
            return Err(BtfMismatch {
                value: place.value,
                variable: place.variable,
                field: place.field,
                bytes,
            });
        }
        return Ok(Some(offset - rq.0));
    }
    Ok(None)
}

/// The byte offset and type of the plain (not bit) field `field` of the
/// struct or union `ty`, looked for in its anonymous struct and union
/// members too.
fn member_place<'btf>(
    btf: &'btf Btf<'btf>,
    ty: BtfType<'btf>,
    field: &str,
) -> Option<(i64, BtfType<'btf>)> {
    let composite = types::Composite::try_from(ty.skip_mods_and_typedefs()).ok()?;
    let found = composite.iter().find_map(|member| {
        let types::MemberAttr::Normal { offset } = member.attr else {
            return None;
        };
        let offset = i64::from(offset / 8);
        let member_type = btf.type_by_id::<BtfType<'_>>(member.ty)?;
        match member.name.filter(|name| !name.is_empty()) {
            Some(name) => (name == field).then_some((offset, member_type)),
            None => {
                member_place(btf, member_type, field).map(|(inner, found)| (offset + inner, found))
            }
        }
    });
    found
}

/// The byte offset of `field` in this kernel's `struct rq`: tests point
/// the per-CPU reads at it to force a wrong place.
#[cfg(test)]
pub(super) fn rq_field_offset(field: &str) -> Option<i64> {
    let btf = Btf::from_vmlinux().ok()?;
    let rq = btf.type_by_name::<types::Struct<'_>>("rq")?;
    member_place(&btf, *rq, field).map(|(offset, _)| offset)
}

/// The size in bytes of `ty` if it is an integer (through typedefs and
/// qualifiers), else 0.
fn integer_bytes(ty: BtfType<'_>) -> u32 {
    types::Int::try_from(ty.skip_mods_and_typedefs()).map_or(0, |int| u32::from(int.bits) / 8)
}

fn struct_has_member(btf: &Btf<'_>, name: &str, member: &str) -> bool {
    btf.type_by_name::<types::Struct<'_>>(name)
        .is_some_and(|s| s.iter().any(|m| m.name.is_some_and(|n| n == member)))
}

#[cfg(test)]
mod btf_dump;

#[cfg(test)]
mod tests {
    use super::*;

    /// Debian's 6.12.117 (x86 6.2-6.14): the pending mask lives in an
    /// anonymous struct inside an anonymous union of `pcpu_hot`; `irq_stat`
    /// has no mask any more.
    const DEBIAN_6_12: &str = include_str!("features/btf-6.12.117-amd64.txt");

    #[test]
    fn on_6_12_the_per_cpu_places_are_found_inside_pcpu_hot_s_anonymous_members() {
        let btf = btf_dump::parse(DEBIAN_6_12);
        // runqueues at 221248 in .data..percpu; pcpu_hot at 217536, its
        // softirq_pending 40 bytes in; steal_time at 229504.
        assert_eq!(
            PerCpuPlaces::of(&btf),
            PerCpuPlaces {
                steal_time_from_rq: Some(229_504 - 221_248),
                softirq_pending_from_rq: Some(217_576 - 221_248),
                btf_mismatch: None,
            }
        );
    }

    #[test]
    fn a_per_cpu_value_of_another_type_than_the_probes_read_is_left_alone() {
        // softirq_pending made a u64.
        let dump = DEBIAN_6_12.replace(
            "'softirq_pending' type_id=32 ",
            "'softirq_pending' type_id=1 ",
        );
        let places = PerCpuPlaces::of(&btf_dump::parse(&dump));
        assert_eq!(places.softirq_pending_from_rq, None);
        assert_eq!(places.steal_time_from_rq, Some(229_504 - 221_248));
        let mismatch = places.btf_mismatch.expect("a mismatch");
        assert_eq!(
            mismatch.to_string(),
            "pcpu_hot.softirq_pending is a 8-byte integer in the kernel's BTF"
        );
    }

    #[test]
    fn a_kernel_without_the_run_queue_through_the_task_places_nothing() {
        let dump = DEBIAN_6_12.replace("'cfs_rq' type_id=522", "'not_cfs_rq' type_id=522");
        assert_eq!(
            PerCpuPlaces::of(&btf_dump::parse(&dump)),
            PerCpuPlaces::default()
        );
    }

    /// The host's kernel: every value the probes read by address is placed
    /// (the matrix's guests run this test on 6.1 and 6.12).
    #[test]
    fn this_kernel_places_the_pending_mask() {
        let features = KernelFeatures::detect();
        assert_eq!(features.btf_mismatch, None, "{features:?}");
        assert!(features.softirq_pending_from_rq.is_some(), "{features:?}");
    }

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
