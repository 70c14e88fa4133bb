//! Read the aggregate maps (histograms, preemptions, softirqs, syscalls,
//! counters) and the programs' run statistics into a `KernelSnapshot`.

use std::collections::BTreeMap;
use std::os::fd::AsRawFd;

use libbpf_rs::{libbpf_sys, MapCore, MapFlags};

use super::loader::Loaded;
use super::skel::types::{counter_slot, probe_kind};
use super::skel::{types, StalltopSkel};
use crate::abi::KIND_MAX;
use crate::event::{comm_str, kind_name, FilePath};
use crate::histogram::Histogram;
use crate::modes::SyscallMode;
use crate::stream::{
    CgroupRunq, Counters, FileTime, KernelSnapshot, Preemptor, ProgramCost, SoftirqStats,
    SoftirqStolen, SyscallStats, WaitCauses,
};

/// The `counters` slots of bounded maps that were full, and those maps.
const MAP_FULL_COUNTERS: [(counter_slot, &str); 5] = [
    (counter_slot::COUNTER_TASKS_FULL, "tasks"),
    (counter_slot::COUNTER_RUNQ_CGROUPS_FULL, "runq_by_cgroup"),
    (counter_slot::COUNTER_PREEMPTORS_FULL, "preemptors"),
    (counter_slot::COUNTER_SYSCALLS_FULL, "syscalls"),
    (counter_slot::COUNTER_STOLEN_FULL, "softirq_stolen"),
];

/// Every family shares the maps of the first instance loaded.
pub fn snapshot(loaded: &Loaded<'_>, ts_ns: u64) -> KernelSnapshot {
    let skel = loaded.maps();
    KernelSnapshot {
        ts_ns,
        runq: read_runq(skel),
        preemptors: read_preemptors(skel),
        softirq: read_softirq(skel),
        softirq_stolen: read_stolen(skel),
        syscalls: if loaded.syscalls != SyscallMode::Off {
            read_syscalls(skel)
        } else {
            Vec::new()
        },
        files: if loaded.syscalls == SyscallMode::Sampled {
            read_files(skel)
        } else {
            Vec::new()
        },
        counters: read_counters(skel),
        programs: read_probe_costs(skel),
        // The live source fills these: its pruning pass, its cost guard.
        removed_cgroups: Vec::new(),
        cost_guard: None,
    }
}

/// Deletes the hash map entries of the cgroups `dead` names (removed: no
/// task of theirs can add to them again): run-queue stats, preemptors
/// (as victim or as preemptor), syscall stats and sampled files. Their
/// counts stay in the snapshots already taken; the places are free for new
/// cgroups. Returns the entries deleted. The per-CPU array slots a dead
/// cgroup owns are left alone: rewriting a CPU's slots from here would race
/// the programs updating the live cgroups' slots on that CPU.
pub fn prune_cgroups(loaded: &Loaded<'_>, dead: &dyn Fn(u64) -> bool) -> usize {
    let skel = loaded.maps();
    let runq = |key: &[u8]| read_plain::<u64>(key).is_some_and(dead);
    let preemptor = |key: &[u8]| {
        read_plain::<types::preemptor_key>(key)
            .is_some_and(|k| dead(k.victim_cgroup) || dead(k.preemptor_cgroup))
    };
    let syscall =
        |key: &[u8]| read_plain::<types::syscall_key>(key).is_some_and(|k| dead(k.cgroup));
    let file = |key: &[u8]| read_plain::<types::file_key>(key).is_some_and(|k| dead(k.cgroup));
    let mut deleted = delete_where(&skel.maps.runq_by_cgroup, &runq)
        + delete_where(&skel.maps.preemptors, &preemptor);
    if loaded.syscalls != SyscallMode::Off {
        deleted += delete_where(&skel.maps.syscalls, &syscall);
    }
    if loaded.syscalls == SyscallMode::Sampled || loaded.exact_steps_to_sampled {
        deleted += delete_where(&skel.maps.sampled_files, &file);
    }
    deleted
}

/// Deletes the keys of `map` that `doomed` picks; returns how many went.
fn delete_where(map: &dyn MapCore, doomed: &dyn Fn(&[u8]) -> bool) -> usize {
    let keys: Vec<Vec<u8>> = map.keys().filter(|k| doomed(k)).collect();
    keys.iter().filter(|key| map.delete(key).is_ok()).count()
}

/// Each probe's slot of cpu_state.cost (`enum probe_kind`), and its name.
const PROBES: [(probe_kind, &str); 14] = [
    (probe_kind::PROBE_SCHED_SWITCH, "sched_switch"),
    (probe_kind::PROBE_SCHED_WAKEUP, "sched_wakeup"),
    (probe_kind::PROBE_SCHED_PROCESS_EXIT, "sched_process_exit"),
    (probe_kind::PROBE_SCHED_MIGRATE, "sched_migrate_task"),
    (probe_kind::PROBE_SOFTIRQ_RAISE, "softirq_raise"),
    (probe_kind::PROBE_SOFTIRQ_ENTRY, "softirq_entry"),
    (probe_kind::PROBE_SOFTIRQ_EXIT, "softirq_exit"),
    (probe_kind::PROBE_HARDIRQ_ENTRY, "irq_handler_entry"),
    (probe_kind::PROBE_HARDIRQ_EXIT, "irq_handler_exit"),
    (probe_kind::PROBE_HRTIMER_ENTRY, "hrtimer_expire_entry"),
    (probe_kind::PROBE_HRTIMER_EXIT, "hrtimer_expire_exit"),
    (probe_kind::PROBE_SYS_ENTER, "sys_enter"),
    (probe_kind::PROBE_SYS_EXIT, "sys_exit"),
    (probe_kind::PROBE_CPU_SAMPLE, "cpu_sample"),
];

/// Each probe's invocations on all CPUs and its estimated run time: the
/// probes time one invocation in PROBE_COST_EVERY themselves (no
/// host-wide BPF statistics).
fn read_probe_costs(skel: &StalltopSkel<'_>) -> Vec<ProgramCost> {
    let Some(per_cpu) = skel
        .maps
        .cpus
        .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
        .ok()
        .flatten()
    else {
        return Vec::new();
    };
    let states: Vec<types::cpu_state> = per_cpu.iter().filter_map(|v| read_plain(v)).collect();
    PROBES
        .iter()
        .filter_map(|&(probe, name)| {
            let (runs, timed, timed_ns) = states.iter().fold((0u64, 0u64, 0u64), |acc, s| {
                let c = &s.cost[probe.0 as usize];
                (acc.0 + c.runs, acc.1 + c.timed, acc.2 + c.timed_ns)
            });
            (runs > 0).then(|| ProgramCost {
                name: name.to_string(),
                run_count: runs,
                run_time_ns: if timed > 0 {
                    (u128::from(timed_ns) * u128::from(runs) / u128::from(timed)) as u64
                } else {
                    0
                },
            })
        })
        .collect()
}

/// Every entry of a per-CPU map (hash or array) with its value on each
/// CPU, read in batches of `BATCH`: a key walk costs two syscalls per
/// entry, every second, on every map, and a busy node has thousands.
/// Entries deleted meanwhile are skipped.
fn per_cpu_entries<K, V>(map: &dyn MapCore) -> Vec<(K, Vec<V>)>
where
    K: plain::Plain + Default,
    V: plain::Plain + Default,
{
    const BATCH: usize = 256;
    let key_size = map.key_size() as usize;
    let value_size = map.value_size() as usize;
    let cpus = libbpf_rs::num_possible_cpus().unwrap_or(1);
    // The kernel lays out each CPU's value 8-byte aligned.
    let stride = value_size.div_ceil(8) * 8;
    let mut batch = BATCH;
    let mut keys = vec![0u8; batch * key_size];
    let mut values = vec![0u8; batch * cpus * stride];
    // Where a batch ended, for the next to go on from: a hash's bucket
    // (u32) or an array's key. u64s, for the alignment of either.
    let mut cursor = vec![0u64; key_size.max(4).div_ceil(8)];
    let mut started = false;
    let opts = libbpf_sys::bpf_map_batch_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_map_batch_opts>() as _,
        ..Default::default()
    };
    let mut out = Vec::new();
    loop {
        let mut count = batch as u32;
        let mut next = cursor.clone();
        let in_batch = if started {
            cursor.as_mut_ptr().cast()
        } else {
            std::ptr::null_mut()
        };
        // SAFETY: `keys` holds `count` keys and `values` `count` values of
        // `cpus * stride` bytes each; the cursors hold a bucket or a key;
        // a null in_batch starts at the first entry; all outlive the call.
        let rc = unsafe {
            libbpf_sys::bpf_map_lookup_batch(
                map.as_fd().as_raw_fd(),
                in_batch,
                next.as_mut_ptr().cast(),
                keys.as_mut_ptr().cast(),
                values.as_mut_ptr().cast(),
                &mut count,
                &opts,
            )
        };
        let error = (rc != 0).then(std::io::Error::last_os_error);
        let errno = error.as_ref().and_then(std::io::Error::raw_os_error);
        if errno == Some(libc::ENOSPC) && batch < map.max_entries() as usize {
            // A hash bucket holds more entries than a batch: a bigger one.
            batch *= 2;
            keys.resize(batch * key_size, 0);
            values.resize(batch * cpus * stride, 0);
            continue;
        }
        // ENOENT: the end of the map came within this batch.
        if let Some(error) = error.as_ref().filter(|_| errno != Some(libc::ENOENT)) {
            tracing::debug!("batched lookup of {:?}: {error}", map.name());
            return out;
        }
        let entries = keys
            .chunks_exact(key_size)
            .zip(values.chunks_exact(cpus * stride))
            .take(count as usize);
        for (key, per_cpu) in entries {
            let values: Option<Vec<V>> = per_cpu
                .chunks_exact(stride)
                .map(|v| read_plain::<V>(&v[..value_size]))
                .collect();
            if let (Some(key), Some(values)) = (read_plain::<K>(key), values) {
                out.push((key, values));
            }
        }
        if error.is_some() {
            return out;
        }
        cursor = next;
        started = true;
    }
}

fn read_softirq(skel: &StalltopSkel<'_>) -> Vec<SoftirqStats> {
    let mut out = Vec::new();
    let vectors = per_cpu_entries::<u32, types::softirq_stats>(&skel.maps.softirq_by_vector);
    for (vector, per_cpu) in vectors {
        for (cpu, s) in per_cpu.iter().enumerate() {
            if s.count == 0 && s.run_total_ns == 0 {
                continue;
            }
            out.push(SoftirqStats {
                cpu: cpu as u32,
                vector,
                delay: Histogram::from_slots(&s.delay_slots),
                count: s.count,
                delay_total_ns: s.delay_total_ns,
                delay_max_ns: s.delay_max_ns,
                run_total_ns: s.run_total_ns,
                run_max_ns: s.run_max_ns,
                runs_in_ksoftirqd: s.runs_in_ksoftirqd,
                run_in_ksoftirqd_ns: s.run_in_ksoftirqd_ns,
            });
        }
    }
    out
}

fn read_stolen(skel: &StalltopSkel<'_>) -> Vec<SoftirqStolen> {
    let mut out: Vec<SoftirqStolen> =
        per_cpu_entries::<types::stolen_key, types::stolen_stats>(&skel.maps.softirq_stolen)
            .into_iter()
            .map(|(k, per_cpu)| SoftirqStolen {
                pid: per_cpu.iter().map(|v| v.pid).max().unwrap_or(0),
                tid: k.tid,
                // CPUs that never saw it hold an empty comm.
                comm: per_cpu
                    .iter()
                    .map(|v| comm_str(&v.comm))
                    .find(|c| !c.is_empty())
                    .unwrap_or_default(),
                vector: k.vector,
                ns: per_cpu.iter().map(|v| v.ns).sum(),
                count: per_cpu.iter().map(|v| v.count).sum(),
            })
            .collect();
    out.sort_by_key(|s| std::cmp::Reverse(s.ns));
    out
}

/// Syscall stats per (cgroup, nr): each CPU's array slot of nr (owned by
/// the first cgroup to make that call there) plus the hash of the rest.
pub(super) fn read_syscalls(skel: &StalltopSkel<'_>) -> Vec<SyscallStats> {
    let mut rows: BTreeMap<(u64, u32), SyscallStats> = BTreeMap::new();
    let mut add = |cgroup: u64, nr: u32, v: &types::syscall_stats| {
        if v.count == 0 {
            return;
        }
        let row = rows.entry((cgroup, nr)).or_insert_with(|| SyscallStats {
            cgroup,
            nr,
            ..SyscallStats::default()
        });
        row.wall.merge(&Histogram::from_slots(&v.slots));
        row.count += v.count;
        row.wall_total_ns += v.wall_total_ns;
        row.oncpu_total_ns += v.oncpu_total_ns;
        row.max_ns = row.max_ns.max(v.max_ns);
    };
    for (nr, per_cpu) in per_cpu_entries::<u32, types::syscall_slot>(&skel.maps.syscalls_by_nr) {
        per_cpu
            .iter()
            .for_each(|slot| add(slot.cgroup, nr, &slot.stats));
    }
    for (k, per_cpu) in
        per_cpu_entries::<types::syscall_key, types::syscall_stats>(&skel.maps.syscalls)
    {
        per_cpu.iter().for_each(|v| add(k.cgroup, k.nr, v));
    }
    rows.into_values().collect()
}

/// Sampled kernel time by (cgroup, syscall, file), read in batches.
fn read_files(skel: &StalltopSkel<'_>) -> Vec<FileTime> {
    let Ok(batches) = skel
        .maps
        .sampled_files
        .lookup_batch(256, MapFlags::ANY, MapFlags::ANY)
    else {
        return Vec::new();
    };
    batches
        .filter_map(|(key, value)| {
            let k = read_plain::<types::file_key>(&key)?;
            let v = read_plain::<types::file_time>(&value)?;
            let used = &v.path[..(v.path_len as usize).min(v.path.len())];
            let path = FilePath::from_kernel(
                v.path_kind,
                used,
                v.path_truncated != 0,
                v.inode_mode,
                k.inode,
            );
            Some(FileTime {
                cgroup: k.cgroup,
                nr: u32::try_from(k.nr).ok()?,
                path: path.text()?,
                calls: v.calls,
                oncpu_ns: v.oncpu_ns,
            })
        })
        .collect()
}

/// Run-queue stats per cgroup: each CPU's array slots (owned by the first
/// cgroup hashed there) plus the hash of the rest.
fn read_runq(skel: &StalltopSkel<'_>) -> Vec<CgroupRunq> {
    let mut rows: BTreeMap<u64, CgroupRunq> = BTreeMap::new();
    let mut add = |cgroup: u64, s: &types::runq_stats| {
        if s.count == 0 {
            return;
        }
        let row = rows.entry(cgroup).or_insert_with(|| CgroupRunq {
            cgroup,
            ..CgroupRunq::default()
        });
        row.latency.merge(&Histogram::from_slots(&s.slots));
        row.count += s.count;
        row.total_ns += s.total_ns;
        row.max_ns = row.max_ns.max(s.max_ns);
        row.preempted_same_cgroup += s.preempted_same_cgroup;
        row.preempted_other_cgroup += s.preempted_other_cgroup;
        row.preempted_kthread += s.preempted_kthread;
        row.preempted_throttled += s.preempted_throttled;
        row.why
            .get_or_insert_with(WaitCauses::default)
            .add(&wait_causes(&s.why_ns));
    };
    for (_, per_cpu) in per_cpu_entries::<u32, types::runq_slot>(&skel.maps.runq_slots) {
        per_cpu
            .iter()
            .for_each(|slot| add(slot.cgroup, &slot.stats));
    }
    for (cgroup, per_cpu) in per_cpu_entries::<u64, types::runq_stats>(&skel.maps.runq_by_cgroup) {
        per_cpu.iter().for_each(|s| add(cgroup, s));
    }
    rows.into_values().collect()
}

/// A runq_stats' `why_ns`, by the indexes of `enum why_cause`.
fn wait_causes(why_ns: &[u64]) -> WaitCauses {
    use types::why_cause as why;
    let ns = |cause: why| why_ns[cause.0 as usize];
    WaitCauses {
        steal_ns: ns(why::WHY_STEAL),
        throttled_ns: ns(why::WHY_THROTTLED),
        softirq_ns: ns(why::WHY_SOFTIRQ),
        idle_ns: ns(why::WHY_IDLE),
        kthread_ns: ns(why::WHY_KTHREAD),
        same_cgroup_ns: ns(why::WHY_SAME_CGROUP),
        other_cgroup_ns: ns(why::WHY_OTHER_CGROUP),
    }
}

/// The preemptor counts of every CPU: those in its array slots (a slot
/// holds a key once its count is not 0) and those in the hash.
fn read_preemptors(skel: &StalltopSkel<'_>) -> Vec<Preemptor> {
    let slots = per_cpu_entries::<u32, types::preemptor_slot>(&skel.maps.preemptor_slots)
        .into_iter()
        .flat_map(|(_, per_cpu)| per_cpu.into_iter().map(|slot| (slot.key, slot.stats)));
    let hashed =
        per_cpu_entries::<types::preemptor_key, types::preemptor_stats>(&skel.maps.preemptors)
            .into_iter()
            .flat_map(|(key, per_cpu)| per_cpu.into_iter().map(move |stats| (key, stats)));
    preemptors_by_key(slots.chain(hashed))
}

/// `counts` summed by key (one key can count on one CPU in a slot and on
/// another in the hash), empty ones left out; the most episodes first.
fn preemptors_by_key(
    counts: impl Iterator<Item = (types::preemptor_key, types::preemptor_stats)>,
) -> Vec<Preemptor> {
    let mut rows: BTreeMap<(u64, u64, [u8; 16], u32), Preemptor> = BTreeMap::new();
    for (k, stats) in counts.filter(|(_, stats)| stats.count > 0) {
        let row = rows
            .entry((k.victim_cgroup, k.preemptor_cgroup, k.comm, k.kthread))
            .or_insert_with(|| Preemptor {
                victim_cgroup: k.victim_cgroup,
                preemptor_cgroup: k.preemptor_cgroup,
                comm: comm_str(&k.comm),
                count: 0,
                wait_ns: 0,
                kthread: k.kthread != 0,
            });
        row.count += stats.count;
        row.wait_ns += stats.wait_ns;
    }
    let mut out: Vec<Preemptor> = rows.into_values().collect();
    out.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.comm.cmp(&b.comm)));
    out
}

fn read_counters(skel: &StalltopSkel<'_>) -> Counters {
    let slots: BTreeMap<u32, u64> = per_cpu_entries::<u32, u64>(&skel.maps.counters)
        .into_iter()
        .map(|(slot, per_cpu)| (slot, per_cpu.iter().sum()))
        .collect();
    let read = |slot: u32| slots.get(&slot).copied().unwrap_or(0);
    Counters {
        lost: (1..KIND_MAX)
            .map(|kind| {
                let slot = counter_slot::COUNTER_LOST_BASE.0 + u32::from(kind);
                (kind_name(kind).to_string(), read(slot))
            })
            .collect(),
        map_full: MAP_FULL_COUNTERS
            .iter()
            .map(|&(slot, name)| (name.to_string(), read(slot.0)))
            .collect(),
        rate_limited: (1..KIND_MAX)
            .map(|kind| {
                let slot = counter_slot::COUNTER_RATE_LIMITED_BASE.0 + u32::from(kind);
                (kind_name(kind).to_string(), read(slot))
            })
            .collect(),
    }
}

fn read_plain<T: plain::Plain + Default>(bytes: &[u8]) -> Option<T> {
    let mut value = T::default();
    plain::copy_from_bytes(&mut value, bytes).ok()?;
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PROBES names every slot of cpu_state.cost once.
    #[test]
    fn every_probe_slot_has_a_name() {
        let mut slots: Vec<u32> = PROBES.iter().map(|(probe, _)| probe.0).collect();
        slots.sort_unstable();
        let all: Vec<u32> = (0..probe_kind::PROBE_MAX.0).collect();
        assert_eq!(slots, all);
        assert_eq!(
            types::cpu_state::default().cost.len(),
            probe_kind::PROBE_MAX.0 as usize
        );
    }

    fn key(victim: u64, preemptor: u64, comm: &str, kthread: bool) -> types::preemptor_key {
        let mut key = types::preemptor_key {
            victim_cgroup: victim,
            preemptor_cgroup: preemptor,
            kthread: kthread.into(),
            ..Default::default()
        };
        key.comm[..comm.len()].copy_from_slice(comm.as_bytes());
        key
    }

    fn stats(count: u64, wait_ns: u64) -> types::preemptor_stats {
        types::preemptor_stats { count, wait_ns }
    }

    /// A hog of another cgroup kept a victim waiting on two CPUs: counted
    /// in CPU 0's array slot and CPU 1's hash entry, it is one preemptor;
    /// a slot nobody counted in is none, and a kernel thread of the same
    /// name is another.
    #[test]
    fn preemptors_counted_in_slots_and_hash_are_summed_by_key() {
        let hog = key(10, 20, "hog", false);
        let rows = preemptors_by_key(
            [
                (hog, stats(3, 30_000_000)),
                (types::preemptor_key::default(), stats(0, 0)),
                (key(10, 20, "hog", true), stats(1, 2_000_000)),
                (hog, stats(4, 50_000_000)),
            ]
            .into_iter(),
        );
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(
            (
                rows[0].comm.as_str(),
                rows[0].kthread,
                rows[0].count,
                rows[0].wait_ns
            ),
            ("hog", false, 7, 80_000_000)
        );
        assert_eq!((rows[1].kthread, rows[1].count), (true, 1));
    }
}
