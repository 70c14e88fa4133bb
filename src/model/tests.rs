//! Model tests, one file per subject under src/model/tests/, and the synthetic inputs they
//! (and the fleet's tests) share: a recording header, name tables, a noisy-neighbour stream
//! shaped like docs/cases.md case 4, and the whole analysis over records.

mod cases;
mod holder_stacks;
mod stall_cases;

use super::*;
use crate::abi::KIND_RUNQ;
use crate::event::testing::{runq_record, task};
use crate::histogram::Histogram;
use crate::modes::{Attach, CgroupHierarchy, SoftirqTime, StealSource, SyscallMode};
use crate::stream::{
    CgroupRunq, Counters, HostInfo, NameTable, Preemptor, Settings, WaitCause, WaitCauses,
};
pub(crate) const MS: u64 = 1_000_000;
pub(crate) const VICTIM: u64 = 4001;
pub(crate) const NOISY: u64 = 4002;
pub(crate) const ROOT: u64 = 1;

pub(crate) fn header() -> Header {
    Header {
        host: HostInfo {
            hostname: "node-7".into(),
            kernel: "6.18.0".into(),
            cpus: 2,
            online: None,
            machine: None,
        },
        start_ns: 1_000 * MS,
        wall_clock_offset_ns: 0,
        settings: Settings {
            runq_threshold_ns: 10 * MS,
            stall_threshold_ns: 10 * MS,
            syscall_wall_threshold_ns: 10 * MS,
            syscall_oncpu_threshold_ns: MS,
            sample_hz: 1000,
            attach: Attach::TpBtf,
            cgroup_hierarchy: CgroupHierarchy::V1Cpu,
            syscalls: SyscallMode::Exact,
            softirq_time: SoftirqTime::Exact,
            softirq_delay_timing: None,
            steal: StealSource::None,
            runq_wait: None,
            throttle: None,
        },
        warnings: vec![],
        probes: vec![],
        trigger: None,
        recorder_pid: None,
    }
}

pub(crate) fn names() -> Entry {
    Entry::Names(NameTable {
        cgroups: vec![
            (ROOT, "/".into()),
            (
                VICTIM,
                "/kubepods/burstable/pod0f1e2d3c-aaaa-bbbb-cccc-000000000001/4c5f7e9a1b2c3d4e5f60718293a4b5c6d7e8f9012345678901234567890abcd".into(),
            ),
            (NOISY, "/noisy".into()),
        ],
        ..NameTable::default()
    })
}

/// Netflix's neighbour: the victim waits up to 131 ms behind `hog`.
fn noisy_neighbour_stream() -> Vec<Entry> {
    let mut latency = Histogram::default();
    for i in 0..985 {
        latency.record(80_000 + i * 10); // ~85 us alone
    }
    for i in 0..15 {
        latency.record(100 * MS + i * 2 * MS); // the neighbour's spikes
    }
    let mut records = Vec::new();
    for (i, wait) in [131 * MS, 45 * MS].into_iter().enumerate() {
        records.extend(runq_record(
            KIND_RUNQ,
            1,
            2_000 * MS + i as u64 * MS,
            wait,
            task(300, "api-worker", VICTIM),
            task(400, "hog", NOISY),
            None,
            0,
        ));
    }
    vec![
        names(),
        Entry::Records(records),
        Entry::Kernel(KernelSnapshot {
            ts_ns: 6_000 * MS,
            runq: vec![
                CgroupRunq {
                    cgroup: VICTIM,
                    count: latency.count(),
                    latency,
                    total_ns: 1_000 * MS,
                    max_ns: 131 * MS,
                    preempted_same_cgroup: 3,
                    preempted_other_cgroup: 250,
                    preempted_kthread: 7,
                    preempted_throttled: 0,
                    why: Some(WaitCauses {
                        kthread_ns: 9 * MS,
                        same_cgroup_ns: 20 * MS,
                        other_cgroup_ns: 900 * MS,
                        ..WaitCauses::default()
                    }),
                },
                CgroupRunq {
                    cgroup: NOISY,
                    count: 10,
                    latency: Histogram::from_slots(&[0u32, 0, 0, 0, 10]),
                    ..Default::default()
                },
            ],
            preemptors: vec![
                Preemptor {
                    victim_cgroup: VICTIM,
                    preemptor_cgroup: NOISY,
                    comm: "hog".into(),
                    count: 250,
                    wait_ns: 3_500 * MS,
                    kthread: false,
                },
                Preemptor {
                    victim_cgroup: VICTIM,
                    preemptor_cgroup: ROOT,
                    comm: "kworker/1:1".into(),
                    count: 7,
                    wait_ns: 9 * MS,
                    kthread: true,
                },
            ],
            counters: Counters {
                lost: vec![("runq".into(), 2), ("takeover".into(), 0)],
                map_full: vec![("tasks".into(), 0)],
                rate_limited: vec![("runq".into(), 40)],
            },
            ..KernelSnapshot::default()
        }),
    ]
}

pub(super) fn analyse(entries: &[Entry]) -> Report {
    let mut a = Analysis::new(header());
    for e in entries {
        a.apply(e);
    }
    a.report()
}
