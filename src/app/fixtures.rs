//! Test recordings for the view, written with `record::Writer` and read
//! back, so tests go through the same path as `stalltop replay`: synthetic
//! streams shaped like docs/cases.md (an empty one, a busy one with every case),
//! and the real noisy-neighbour recording under tests/fixtures/.

use std::path::Path;

use syscalls::Sysno;

use crate::abi::{KIND_RUNQ, KIND_TAKEOVER};
use crate::event::testing::{
    runq_record, sample_record, softirq_record, syscall_record, task, throttled_runq_record,
};
use crate::histogram::Histogram;
use crate::modes::{
    Attach, CgroupHierarchy, RunqWait, SoftirqTime, StealSource, Step, SyscallMode, Throttle,
};
use crate::record::{self, Recording, Writer};
use crate::stream::{
    CgroupRunq, CgroupThrottle, Counters, Entry, GuardState, Header, HostInfo, KernelSnapshot,
    NameTable, Preemptor, ProgramCost, Settings, SoftirqStats, SyscallStats, ThrottleSnapshot,
    WaitCauses,
};

pub const MS: u64 = 1_000_000;
pub const S: u64 = 1_000 * MS;
/// CLOCK_MONOTONIC when the synthetic sessions started.
pub const START: u64 = 1_000 * S;

const ROOT: u64 = 1;
/// The pod whose api-worker suffers the noisy neighbour (case 4).
const API_POD: u64 = 4001;
const MONITORING: u64 = 4002;
const CADVISOR: u64 = 4003;
const BATCH: u64 = 4004;
/// The 12-CPU pod throttled under its limit (case 3), and glog's (case 5).
const SHOP_POD: u64 = 4005;

/// Kernel frames of the stacks the sampler caught (case 1 and 2).
const MEMCG_STACK: [(u64, &str); 5] = [
    (0xffff_ffff_8130_0010, "mem_cgroup_nr_lru_pages"),
    (0xffff_ffff_8130_0420, "memcg_stat_show"),
    (0xffff_ffff_8124_1000, "seq_read"),
    (0xffff_ffff_8121_0040, "vfs_read"),
    (0xffff_ffff_8100_4000, "do_syscall_64"),
];
const SLAB_STACK: [(u64, &str); 3] = [
    (0xffff_ffff_8128_8000, "get_slabinfo"),
    (0xffff_ffff_8128_9000, "slab_show"),
    (0xffff_ffff_8100_4000, "do_syscall_64"),
];

pub fn header(cpus: u32) -> Header {
    Header {
        host: HostInfo {
            hostname: "node-7".into(),
            kernel: "5.4.0-150-generic".into(),
            cpus,
            online: None,
            machine: None,
        },
        start_ns: START,
        wall_clock_offset_ns: 1_700_000_000 * S as i64,
        settings: Settings {
            runq_threshold_ns: 10 * MS,
            stall_threshold_ns: 10 * MS,
            syscall_wall_threshold_ns: 10 * MS,
            syscall_oncpu_threshold_ns: MS,
            sample_hz: 1000,
            attach: Attach::TpBtf,
            cgroup_hierarchy: CgroupHierarchy::Unified,
            syscalls: SyscallMode::Exact,
            softirq_time: SoftirqTime::Exact,
            softirq_delay_timing: None,
            steal: StealSource::None,
            runq_wait: Some(RunqWait::SchedInfo),
            throttle: Some(Throttle::ThrottleCount),
        },
        warnings: vec![],
        probes: vec![],
        trigger: None,
        recorder_pid: None,
    }
}

/// Writes `entries` as a recording in a temporary directory and reads it
/// back, as `stalltop replay` would.
pub fn recording(header: &Header, entries: &[Entry]) -> Recording {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("fixture.stl");
    let mut writer = Writer::create(&path, header).expect("create the fixture");
    for entry in entries {
        writer.write(entry).expect("write the fixture");
    }
    writer.finish().expect("finish the fixture");
    record::read(&path).expect("read the fixture back")
}

pub fn empty() -> Recording {
    recording(&header(2), &[])
}

/// The real `stalltop record --runq-threshold 2ms` of `cargo xtask
/// scenario noisy-neighbour` on a 2-CPU VM.
pub fn noisy_neighbour() -> Recording {
    committed("noisy-neighbour")
}

/// The real recording of `cargo xtask scenario slow-syscall` (sampled
/// syscalls): an madvise, fsync, smaps reads, linkat and munmap that hold
/// the CPU in the kernel.
pub fn slow_syscall() -> Recording {
    committed("slow-syscall")
}

/// The real recording of `cargo xtask scenario throttle`: request threads
/// in a cgroup whose 15 ms / 100 ms quota runs out, beside a hog.
pub fn throttle_scenario() -> Recording {
    committed("throttle")
}

/// The real recording of `cargo xtask scenario ksoftirqd`: NET_RX saturating
/// CPU 1 while a hog's bursts keep ksoftirqd/1 waiting.
pub fn ksoftirqd_scenario() -> Recording {
    committed("ksoftirqd")
}

fn committed(name: &str) -> Recording {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("{name}.stl"));
    record::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every case of docs/cases.md on a 4-CPU node, ten seconds long.
pub fn busy() -> Recording {
    recording(&header(4), &busy_entries())
}

pub fn busy_entries() -> Vec<Entry> {
    let mut records = Vec::new();
    // Case 4: api-worker waits behind the batch hog on CPU 1 (and the hypervisor takes the
    // vCPU for part of the second wait).
    for (at, wait, steal) in [(2 * S, 131 * MS, 0), (6 * S, 45 * MS, 6 * MS)] {
        records.push((
            at,
            runq_record(
                KIND_RUNQ,
                1,
                START + at,
                wait,
                task(300, "api-worker", API_POD),
                task(400, "hog", BATCH),
                None,
                steal,
            ),
        ));
    }
    // Case 3: shop-api waits out its pod's CPU quota on CPU 0 while node-exporter fills the
    // CPU: the throttle covered 60 ms of the 62 ms wait.
    records.push((
        3 * S + 500 * MS,
        throttled_runq_record(
            0,
            START + 3 * S + 500 * MS,
            62 * MS,
            task(5151, "shop-api", SHOP_POD),
            task(820, "node-exporter", MONITORING),
            SHOP_POD,
            60 * MS,
        ),
    ));
    // Case 1: cadvisor reads memory.stat of three cgroups on CPU 3; NET_RX
    // waits, ksoftirqd/3 is woken and cannot run until the read ends.
    for (i, (at, cgroup)) in [(3 * S, "web"), (5 * S, "db"), (7 * S, "cache")]
        .into_iter()
        .enumerate()
    {
        let cadvisor = || task(2101, "cadvisor", CADVISOR);
        let stall_end = at + 145 * MS;
        for tick in [60, 80, 100, 120] {
            let frames: Vec<u64> = MEMCG_STACK.iter().map(|&(a, _)| a).collect();
            records.push((
                at + tick * MS,
                sample_record(
                    3,
                    START + at + tick * MS,
                    cadvisor(),
                    Some(read()),
                    0,
                    &frames,
                ),
            ));
        }
        records.push((
            stall_end,
            softirq_record(
                3,
                START + stall_end,
                105 * MS,
                3,
                true,
                task(30, "ksoftirqd/3", ROOT),
            ),
        ));
        records.push((
            stall_end,
            runq_record(
                KIND_TAKEOVER,
                3,
                START + stall_end,
                95 * MS + i as u64 * MS,
                task(30, "ksoftirqd/3", ROOT),
                cadvisor(),
                Some((read() as i32, 140 * MS)),
                0,
            ),
        ));
        records.push((
            at + 150 * MS,
            syscall_record(
                3,
                START + at + 150 * MS,
                cadvisor(),
                read(),
                150 * MS,
                148 * MS,
                7,
                &format!("/sys/fs/cgroup/memory/kubepods/{cgroup}/memory.stat"),
            ),
        ));
    }
    // Case 2: ss reads /proc/slabinfo with interrupts off on CPU 2.
    let at = 4 * S;
    let frames: Vec<u64> = SLAB_STACK.iter().map(|&(a, _)| a).collect();
    records.push((
        at + 40 * MS,
        sample_record(
            2,
            START + at + 40 * MS,
            task(3300, "ss", MONITORING),
            Some(read()),
            38 * MS,
            &frames,
        ),
    ));
    records.push((
        at + 45 * MS,
        syscall_record(
            2,
            START + at + 45 * MS,
            task(3300, "ss", MONITORING),
            read(),
            45 * MS,
            44 * MS,
            3,
            "/proc/slabinfo",
        ),
    ));
    // Case 5: glog's fadvise64 crawls in the shop pod.
    for at in [S + 500 * MS, 8 * S] {
        records.push((
            at,
            syscall_record(
                0,
                START + at,
                task(5150, "shop-api", SHOP_POD),
                fadvise64(),
                1_200 * MS,
                900 * MS,
                4,
                "/var/log/shop/shop.INFO",
            ),
        ));
    }
    // As the probe thread sends them: a batch of records per 100 ms poll,
    // snapshots in between.
    records.sort_by_key(|(at, _)| *at);
    let mut timed: Vec<(u64, Entry)> = Vec::new();
    for (at, record) in records {
        match timed.last_mut() {
            Some((batch, Entry::Records(bytes))) if *batch == at / (100 * MS) => {
                bytes.extend(record)
            }
            _ => timed.push((at / (100 * MS), Entry::Records(record))),
        }
    }
    for (at, entry) in [
        (S, throttle(S, 1_000, 100, 2 * S)),
        (5 * S, kernel(5 * S, 1)),
        (9 * S, kernel(9 * S, 2)),
        (10 * S, throttle(10 * S, 1_090, 136, 3_200 * MS)),
    ] {
        timed.push((at / (100 * MS), entry));
    }
    timed.sort_by_key(|(batch, _)| *batch);
    std::iter::once(names())
        .chain(timed.into_iter().map(|(_, entry)| entry))
        .collect()
}

fn read() -> u32 {
    Sysno::read.id() as u32
}

fn fadvise64() -> u32 {
    Sysno::fadvise64.id() as u32
}

fn names() -> Entry {
    Entry::Names(NameTable {
        cgroups: vec![
            (ROOT, "/".into()),
            (
                API_POD,
                "/kubepods/burstable/pod0f1e2d3c-aaaa-bbbb-cccc-000000000001/4c5f7e9a1b2c3d4e5f60718293a4b5c6d7e8f9012345678901234567890abcd".into(),
            ),
            (MONITORING, "/system.slice/node-exporter.service".into()),
            (CADVISOR, "/system.slice/cadvisor.service".into()),
            (BATCH, "/system.slice/batch.service".into()),
            (
                SHOP_POD,
                "/kubepods/burstable/pod9a8b7c6d-1111-2222-3333-444455556666/77aa88bb99cc00dd11ee22ff33aa44bb55cc66dd77ee88ff99aa00bb11cc22dd".into(),
            ),
        ],
        kernel_symbols: MEMCG_STACK
            .iter()
            .chain(SLAB_STACK.iter())
            .map(|&(a, name)| (a, name.to_string()))
            .collect(),
        ..NameTable::default()
    })
}

fn histogram(values: &[(u64, u64)]) -> Histogram {
    let mut h = Histogram::default();
    for &(value, times) in values {
        for _ in 0..times {
            h.record(value);
        }
    }
    h
}

fn kernel(at: u64, step: u64) -> Entry {
    Entry::Kernel(kernel_snapshot(at, step))
}

/// Cumulative aggregates; `step` scales the counts (1 at +5s, 2 at +9s).
fn kernel_snapshot(at: u64, step: u64) -> KernelSnapshot {
    KernelSnapshot {
        ts_ns: START + at,
        runq: vec![
            CgroupRunq {
                cgroup: API_POD,
                latency: histogram(&[
                    (85_000, 985 * step),
                    (100 * MS, 14 * step),
                    (131 * MS, step),
                ]),
                count: 1_000 * step,
                total_ns: 1_000 * step * 1_600_000,
                max_ns: 131 * MS,
                preempted_same_cgroup: 4 * step,
                preempted_other_cgroup: 340 * step,
                preempted_kthread: 12 * step,
                preempted_throttled: 0,
                why: Some(WaitCauses {
                    steal_ns: 6 * MS,
                    softirq_ns: 30 * MS * step,
                    idle_ns: 20 * MS * step,
                    kthread_ns: 40 * MS * step,
                    same_cgroup_ns: 10 * MS * step,
                    other_cgroup_ns: 1_200 * MS * step,
                    ..WaitCauses::default()
                }),
            },
            CgroupRunq {
                cgroup: SHOP_POD,
                latency: histogram(&[(40_000, 500 * step), (30 * MS, 20 * step)]),
                count: 520 * step,
                total_ns: 520 * step * 2_000_000,
                max_ns: 38 * MS,
                preempted_same_cgroup: 60 * step,
                preempted_other_cgroup: 5 * step,
                preempted_kthread: step,
                preempted_throttled: 0,
                why: Some(WaitCauses {
                    kthread_ns: 10 * MS * step,
                    same_cgroup_ns: 600 * MS * step,
                    other_cgroup_ns: 50 * MS * step,
                    ..WaitCauses::default()
                }),
            },
            CgroupRunq {
                cgroup: ROOT,
                latency: histogram(&[(12_000, 4_000 * step)]),
                count: 4_000 * step,
                total_ns: 4_000 * step * 12_000,
                max_ns: 900_000,
                preempted_same_cgroup: 200 * step,
                preempted_other_cgroup: 0,
                preempted_kthread: 40 * step,
                preempted_throttled: 0,
                why: Some(WaitCauses::default()),
            },
        ],
        preemptors: vec![
            Preemptor {
                victim_cgroup: API_POD,
                preemptor_cgroup: BATCH,
                comm: "hog".into(),
                count: 330 * step,
                wait_ns: 4 * S * step,
                kthread: false,
            },
            Preemptor {
                victim_cgroup: API_POD,
                preemptor_cgroup: ROOT,
                comm: "kworker/1:1".into(),
                count: 12 * step,
                wait_ns: 40 * MS * step,
                kthread: true,
            },
            Preemptor {
                victim_cgroup: SHOP_POD,
                preemptor_cgroup: SHOP_POD,
                comm: "shop-api".into(),
                count: 60 * step,
                wait_ns: 0,
                kthread: false,
            },
        ],
        softirq: vec![SoftirqStats {
            cpu: 3,
            vector: 3,
            delay: histogram(&[(20_000, 5_000 * step), (105 * MS, 3)]),
            count: 5_000 * step + 3,
            delay_total_ns: 0,
            delay_max_ns: 105 * MS,
            run_total_ns: 900 * MS * step,
            run_max_ns: 2 * MS,
            runs_in_ksoftirqd: 3,
            run_in_ksoftirqd_ns: 6 * MS,
        }],
        softirq_stolen: Vec::new(),
        syscalls: vec![
            SyscallStats {
                cgroup: SHOP_POD,
                nr: fadvise64(),
                wall: histogram(&[(1_200 * MS, step), (8 * MS, 200 * step)]),
                count: 201 * step,
                wall_total_ns: (1_200 * MS + 1_600 * MS) * step,
                oncpu_total_ns: 2_100 * MS * step,
                max_ns: 1_200 * MS,
            },
            SyscallStats {
                cgroup: CADVISOR,
                nr: read(),
                wall: histogram(&[(150 * MS, 3), (20_000, 900 * step)]),
                count: 900 * step + 3,
                wall_total_ns: 450 * MS + 18 * MS * step,
                oncpu_total_ns: 444 * MS + 15 * MS * step,
                max_ns: 150 * MS,
            },
            SyscallStats {
                cgroup: MONITORING,
                nr: read(),
                wall: histogram(&[(45 * MS, 1), (5_000, 300 * step)]),
                count: 300 * step + 1,
                wall_total_ns: 45 * MS + 1_500_000 * step,
                oncpu_total_ns: 44 * MS + 1_400_000 * step,
                max_ns: 45 * MS,
            },
        ],
        files: Vec::new(),
        counters: Counters {
            lost: vec![("runq".into(), 0), ("sample".into(), 0)],
            map_full: vec![("tasks".into(), 0)],
            rate_limited: vec![("runq".into(), 0)],
        },
        programs: vec![
            ProgramCost {
                name: "btf_sched_switch".into(),
                run_count: 150_000 * step,
                run_time_ns: 45 * MS * step,
            },
            ProgramCost {
                name: "btf_sys_exit".into(),
                run_count: 50_000 * step,
                run_time_ns: 15 * MS * step,
            },
        ],
        removed_cgroups: Vec::new(),
        cost_guard: None,
    }
}

fn throttle(at: u64, periods: u64, throttled: u64, throttled_ns: u64) -> Entry {
    Entry::Throttle(ThrottleSnapshot {
        ts_ns: START + at,
        cgroups: vec![CgroupThrottle {
            path: "/kubepods/burstable/pod9a8b7c6d-1111-2222-3333-444455556666/77aa88bb99cc00dd11ee22ff33aa44bb55cc66dd77ee88ff99aa00bb11cc22dd".into(),
            quota_us: 800_000,
            period_us: 100_000,
            burst_us: None,
            cpus: Some("0-11".into()),
            nr_periods: periods,
            nr_throttled: throttled,
            throttled_ns,
            usage_ns: Some(periods * 450 * MS),
        }],
    })
}

/// A live session's losses and a sampler that did not come up.
pub fn lossy_kernel(at: u64) -> Entry {
    let mut k = kernel_snapshot(at, 3);
    k.counters.lost = vec![("runq".into(), 17), ("sample".into(), 3)];
    k.counters.map_full = vec![("tasks".into(), 2)];
    Entry::Kernel(k)
}

/// The busy node's last snapshot, its cost guard over a 2% budget with
/// exact syscalls sampled and stacks off.
pub fn over_budget_kernel(at: u64) -> Entry {
    let mut k = kernel_snapshot(at, 3);
    k.cost_guard = Some(Box::new(GuardState {
        budget_cpus: 0.08,
        cost_cpus: 0.1,
        steps: Step::ALL.to_vec(),
        down: vec![Step::Syscalls, Step::Stacks],
    }));
    Entry::Kernel(k)
}

/// The root, the victim's and the hog's cgroups, by name.
fn victim_and_hog_cgroups() -> Vec<(u64, String)> {
    vec![
        (ROOT, "/".into()),
        (VICTIM, "/stalltop_victim".into()),
        (NOISY, "/stalltop_noisy".into()),
    ]
}

/// redis-server waits 16 ms behind openssl on CPU 0, and the one tick
/// during the wait found a kworker on the CPU, not openssl: the stall's
/// only stack is the kworker's.
pub fn stack_of_another_task() -> Recording {
    let names = Entry::Names(NameTable {
        cgroups: victim_and_hog_cgroups(),
        kernel_symbols: SLAB_STACK.iter().map(|&(a, n)| (a, n.into())).collect(),
        ..NameTable::default()
    });
    let start = START + 2 * S;
    let frames: Vec<u64> = SLAB_STACK.iter().map(|&(a, _)| a).collect();
    let mut records = sample_record(
        0,
        start + 5 * MS,
        task(77, "kworker/0:1", ROOT),
        None,
        0,
        &frames,
    );
    records.extend(runq_record(
        KIND_RUNQ,
        0,
        start + 16 * MS,
        16 * MS,
        task(300, "redis-server", VICTIM),
        task(900, "openssl", NOISY),
        None,
        0,
    ));
    recording(&header(2), &[names, Entry::Records(records)])
}

/// The cgroups of a hog that keeps a periodic task waiting under the
/// threshold.
const VICTIM: u64 = 5001;
const NOISY: u64 = 5002;

/// A hog of equal weight keeps a 1 ms periodic task waiting 4-6 ms on a
/// 2-CPU node for ten seconds: no wait crosses the 10 ms threshold, so no
/// stall is recorded. The victim's event loop also sits in epoll_pwait for
/// seconds at a time, by design.
pub fn hog_under_threshold() -> Recording {
    let names = Entry::Names(NameTable {
        cgroups: victim_and_hog_cgroups(),
        ..NameTable::default()
    });
    let snapshots = [5 * S, 10 * S]
        .into_iter()
        .enumerate()
        .map(|(i, at)| Entry::Kernel(under_threshold_snapshot(at, i as u64 + 1)));
    let entries: Vec<Entry> = std::iter::once(names).chain(snapshots).collect();
    recording(&header(2), &entries)
}

/// Cumulative aggregates at `at`; `step` scales the counts.
fn under_threshold_snapshot(at: u64, step: u64) -> KernelSnapshot {
    KernelSnapshot {
        ts_ns: START + at,
        runq: vec![
            CgroupRunq {
                cgroup: VICTIM,
                latency: histogram(&[
                    (30_000, 4_000 * step),
                    (4 * MS, 50 * step),
                    (6 * MS, 32 * step),
                ]),
                count: 4_082 * step,
                total_ns: (120 * MS + 50 * 4 * MS + 32 * 6 * MS) * step,
                max_ns: 6_200_000,
                preempted_same_cgroup: 0,
                preempted_other_cgroup: 82 * step,
                preempted_kthread: step,
                preempted_throttled: 0,
                why: Some(WaitCauses {
                    kthread_ns: 5 * MS * step,
                    other_cgroup_ns: (50 * 4 * MS + 32 * 6 * MS) * step,
                    ..WaitCauses::default()
                }),
            },
            CgroupRunq {
                cgroup: NOISY,
                latency: histogram(&[(20_000, 500 * step)]),
                count: 500 * step,
                total_ns: 500 * step * 20_000,
                max_ns: 900_000,
                preempted_same_cgroup: 0,
                preempted_other_cgroup: 40 * step,
                preempted_kthread: 0,
                preempted_throttled: 0,
                why: Some(WaitCauses::default()),
            },
        ],
        preemptors: vec![Preemptor {
            victim_cgroup: VICTIM,
            preemptor_cgroup: NOISY,
            comm: "hog".into(),
            count: 41 * step,
            wait_ns: 41 * step * 5 * MS,
            kthread: false,
        }],
        syscalls: vec![
            SyscallStats {
                cgroup: VICTIM,
                nr: Sysno::epoll_pwait.id() as u32,
                wall: histogram(&[(MS, 4_000 * step), (4_270 * MS, step)]),
                count: 4_001 * step,
                wall_total_ns: (4_000 * MS + 4_270 * MS) * step,
                oncpu_total_ns: 8 * MS * step,
                max_ns: 8_540 * MS,
            },
            SyscallStats {
                cgroup: VICTIM,
                nr: read(),
                wall: histogram(&[(20_000, 2_000 * step)]),
                count: 2_000 * step,
                wall_total_ns: 40 * MS * step,
                oncpu_total_ns: 30 * MS * step,
                max_ns: 2 * MS,
            },
        ],
        counters: Counters {
            lost: vec![("runq".into(), 0)],
            map_full: vec![],
            rate_limited: vec![],
        },
        programs: vec![ProgramCost {
            name: "btf_sched_switch".into(),
            run_count: 80_000 * step,
            run_time_ns: 24 * MS * step,
        }],
        ..KernelSnapshot::default()
    }
}
