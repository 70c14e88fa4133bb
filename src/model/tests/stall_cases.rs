//! Stalls and culprits through the whole analysis: synthetic records shaped
//! like docs/cases.md cases 1, 2 and 5, merges of overlapping signals, and
//! the culprit a merged stall names.

use super::*;
use super::{analyse, MS, NOISY, ROOT, VICTIM};
use crate::abi::KIND_RUNQ;
use crate::abi::KIND_TAKEOVER;
use crate::event::testing::{hardirq_record, sample_record, softirq_record};
use crate::event::testing::{migrated_runq_record, runq_record, task, throttled_runq_record};
use crate::event::testing::{stolen_gap_record, syscall_record};
use crate::histogram::Histogram;
use crate::model::report::MigratedRow;
use crate::modes::SyscallMode;
use crate::stream::NameTable;
use crate::stream::{FileTime, SoftirqStolen, SyscallStats};

const CPU: u32 = 1;
const CADVISOR: u64 = 5001;
const SYS_READ: u32 = 0;
const SYS_FADVISE64: u32 = 221;
const NET_RX: u32 = 3;
/// Kernel frames of the memory.stat read, leaf first.
const MEMCG_STACK: [(u64, &str); 4] = [
    (0xffff_ffff_8120_0000, "mem_cgroup_nr_lru_pages"),
    (0xffff_ffff_8120_1000, "memcg_stat_show"),
    (0xffff_ffff_8130_0000, "seq_read_iter"),
    (0xffff_ffff_8130_1000, "vfs_read"),
];

fn symbols_and_cgroups() -> Entry {
    Entry::Names(NameTable {
        cgroups: vec![(ROOT, "/".into()), (CADVISOR, "/kubepods/besteffort/pod11112222-3333-4444-5555-666677778888/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef".into())],
        kernel_symbols: MEMCG_STACK.iter().map(|&(a, n)| (a, n.to_string())).collect(),
        ..NameTable::default()
    })
}

/// One case-1 episode starting at `t0` (ms): cadvisor reads memory.stat of
/// pod `pod` for 150 ms on-CPU; NET_RX and ksoftirqd/1 wait ~100 ms for it.
fn memory_stat_episode(t0: u64, pod: &str) -> Vec<u8> {
    let cadvisor = || task(700, "cadvisor", CADVISOR);
    let ksoftirqd = || task(15, "ksoftirqd/1", ROOT);
    let frames: Vec<u64> = MEMCG_STACK.iter().map(|&(a, _)| a).collect();
    let mut bytes = Vec::new();
    // The sampler keeps stacks while NET_RX waits (from t0 + 50 ms).
    for i in 50..150 {
        bytes.extend(sample_record(
            CPU,
            (t0 + i) * MS,
            cadvisor(),
            Some(SYS_READ),
            0,
            &frames,
        ));
    }
    // The read ends at t0 + 150 ms ...
    bytes.extend(syscall_record(
        CPU,
        (t0 + 150) * MS,
        cadvisor(),
        SYS_READ,
        150 * MS,
        148 * MS,
        7,
        &format!("/sys/fs/cgroup/memory/kubepods/burstable/{pod}/memory.stat"),
    ));
    // ... then ksoftirqd/1, woken at t0 + 50 ms, finally runs ...
    bytes.extend(runq_record(
        KIND_TAKEOVER,
        CPU,
        (t0 + 151) * MS,
        101 * MS,
        ksoftirqd(),
        cadvisor(),
        Some((SYS_READ as i32, 151 * MS)),
        0,
    ));
    // ... and NET_RX, raised at t0 + 49 ms, starts inside it.
    bytes.extend(softirq_record(
        CPU,
        (t0 + 151) * MS + 10_000,
        102 * MS,
        NET_RX,
        true,
        ksoftirqd(),
    ));
    bytes
}

fn analyse_records(records: Vec<u8>, kernel: Option<KernelSnapshot>) -> Report {
    let mut entries = vec![symbols_and_cgroups(), Entry::Records(records)];
    entries.extend(kernel.map(Entry::Kernel));
    analyse(&entries)
}

/// Case 1: the stall, what waited, the culprit with syscall, path, on-CPU
/// time and stack; repeated episodes make one culprit row.
#[test]
fn cadvisor_memory_stat_read_stalls_net_rx() {
    let mut records = Vec::new();
    for (i, pod) in ["pod-aaaa1111", "pod-bbbb2222", "pod-cccc3333"]
        .iter()
        .enumerate()
    {
        records.extend(memory_stat_episode(2_000 + i as u64 * 1_000, pod));
    }
    let r = analyse_records(records, None);

    assert_eq!(r.stalls.len(), 3, "{:#?}", r.stalls);
    let stall = &r.stalls[0];
    assert_eq!((stall.cpu, stall.kind), (CPU, StallKind::Softirq));
    assert_eq!(
        stall.signals, 2,
        "takeover and softirq delay merge into one stall"
    );
    let duration_ms = stall.duration_ns / MS;
    assert!((101..=103).contains(&duration_ms), "{duration_ms} ms");
    assert_eq!(stall.waited.softirq, Some("NET_RX"));
    assert_eq!(stall.waited.comm.as_deref(), Some("ksoftirqd/1"));
    let culprit = stall.culprit.as_ref().expect("a culprit");
    assert_eq!((culprit.comm.as_str(), culprit.pid), ("cadvisor", 700));
    assert_eq!(culprit.container, "pod:11112222/0123456789ab");
    assert_eq!(culprit.syscall.as_deref(), Some("read"));
    assert_eq!(
        culprit.path.as_deref(),
        Some("/sys/fs/cgroup/memory/kubepods/burstable/pod-aaaa1111/memory.stat")
    );
    assert_eq!(culprit.oncpu_ns, Some(148 * MS));
    assert_eq!(
        culprit.stack[..2],
        ["mem_cgroup_nr_lru_pages", "memcg_stat_show"]
    );
    assert!(culprit.samples >= 95, "{} samples", culprit.samples);

    assert_eq!(r.takeovers.len(), 3);
    let takeover = &r.takeovers[0];
    assert_eq!((takeover.cpu, takeover.wait_ns), (CPU, 101 * MS));
    assert_eq!(takeover.culprit.as_ref().unwrap().oncpu_ns, Some(148 * MS));

    assert_eq!(r.culprits.len(), 1, "{:#?}", r.culprits);
    let row = &r.culprits[0];
    assert_eq!(
        (row.comm.as_str(), row.syscall.as_deref()),
        ("cadvisor", Some("read"))
    );
    assert_eq!(
        row.path.as_deref(),
        Some("/sys/fs/cgroup/memory/kubepods/burstable/*/memory.stat")
    );
    assert_eq!(row.count, 3);
    assert!(row.worst_ns >= 101 * MS && row.total_stall_ns >= 3 * 101 * MS);

    // In short: NET_RX and ksoftirqd waited behind cadvisor's read.
    let Finding::SoftirqsHeldOff {
        cpu,
        vector,
        ksoftirqd,
        stalls,
        longest_ns,
        stall_id,
        holder,
    } = &r.findings[0]
    else {
        panic!("{:#?}", r.findings);
    };
    assert_eq!(
        (*cpu, *vector, *ksoftirqd, *stalls, *stall_id),
        (CPU, Some("NET_RX"), true, 3, stall.id)
    );
    assert_eq!(*longest_ns, stall.longest_wait_ns);
    assert_eq!(
        (holder.comm.as_str(), holder.activity.as_deref()),
        ("cadvisor", Some("read"))
    );
    assert_eq!(holder.path, culprit.path);
    assert_eq!(holder.call_oncpu_ns, Some(148 * MS));
}

/// `ss` [900] reads /proc/slabinfo for 190 ms, 189 of them on the CPU.
fn slabinfo_read() -> Vec<u8> {
    syscall_record(
        CPU,
        5_190 * MS,
        task(900, "ss", ROOT),
        SYS_READ,
        190 * MS,
        189 * MS,
        3,
        "/proc/slabinfo",
    )
}

/// The sampler's tick after ss's read: 189 ms since the last one.
fn slabinfo_gap() -> Vec<u8> {
    sample_record(
        CPU,
        5_189 * MS,
        task(900, "ss", ROOT),
        Some(SYS_READ),
        189 * MS,
        &[0xffff_ffff_8140_0000],
    )
}

/// Slow calls reach user space from each CPU's buffer, not in the order
/// they ended: ss's read of /proc/slabinfo, reported before calls of other
/// threads that ended over a second earlier, still names the irqs-off gap
/// reported after it all.
#[test]
fn a_call_reported_out_of_order_still_names_the_stall() {
    let mut records = slabinfo_read();
    for tid in [901, 902, 903] {
        records.extend(syscall_record(
            0,
            4_000 * MS,
            task(tid, "reader", ROOT),
            SYS_READ,
            50 * MS,
            MS,
            4,
            "/var/log/app.log",
        ));
    }
    records.extend(slabinfo_gap());
    let r = analyse_records(records, None);
    let [stall] = r.stalls.as_slice() else {
        panic!("{:#?}", r.stalls);
    };
    let culprit = stall.culprit.as_ref().expect("a culprit");
    assert_eq!(culprit.comm, "ss");
    assert_eq!(culprit.path.as_deref(), Some("/proc/slabinfo"));
}

/// Case 2: `ss` reading /proc/slabinfo with interrupts off: an irqs-off
/// gap, not a run-queue wait, with the call and file named.
#[test]
fn slabinfo_read_is_an_irqs_off_stall() {
    let mut records = slabinfo_gap();
    records.extend(slabinfo_read());
    let r = analyse_records(records, None);
    assert_eq!(r.stalls.len(), 1);
    let stall = &r.stalls[0];
    assert_eq!(
        (stall.kind, stall.duration_ns),
        (StallKind::Irqoff, 189 * MS)
    );
    let culprit = stall.culprit.as_ref().unwrap();
    assert_eq!(culprit.comm, "ss");
    assert_eq!(culprit.path.as_deref(), Some("/proc/slabinfo"));
    assert_eq!(culprit.oncpu_ns, Some(189 * MS));
    assert_eq!(
        culprit.stack,
        ["0xffffffff81400000"],
        "unnamed frames show as addresses"
    );
    let evidence = stall.evidence.as_deref().unwrap();
    assert!(
        evidence.contains("189.0 ms")
            && evidence.contains("ss [900] in the kernel at 0xffffffff81400000 inside read"),
        "{evidence}"
    );
    // In short: interrupts off while ss read /proc/slabinfo.
    let Finding::InterruptsOff {
        cpu,
        stalls,
        longest_ns,
        holder,
        ..
    } = &r.findings[0]
    else {
        panic!("{:#?}", r.findings);
    };
    assert_eq!((*cpu, *stalls, *longest_ns), (CPU, 1, 189 * MS));
    assert_eq!(
        (
            holder.comm.as_str(),
            holder.activity.as_deref(),
            holder.path.as_deref()
        ),
        ("ss", Some("read"), Some("/proc/slabinfo"))
    );
}

/// A run-queue wait that merely contains a sampler gap stays a run-queue stall; gaps that
/// cover most of a stall make it irqs-off.
#[test]
fn a_gap_inside_a_longer_wait_does_not_make_it_irqs_off() {
    let wait = || {
        runq_record(
            KIND_RUNQ,
            CPU,
            1_100 * MS,
            100 * MS,
            task(300, "api", ROOT),
            task(400, "hog", ROOT),
            None,
            0,
        )
    };
    let gap = |end_ms: u64, gap_ms: u64| {
        sample_record(
            CPU,
            end_ms * MS,
            task(400, "hog", ROOT),
            None,
            gap_ms * MS,
            &[],
        )
    };
    let r = analyse_records([wait(), gap(1_050, 12)].concat(), None);
    assert_eq!(r.stalls.len(), 1, "{:#?}", r.stalls);
    assert_eq!(
        (r.stalls[0].kind, r.stalls[0].duration_ns),
        (StallKind::Runq, 100 * MS)
    );
    let r = analyse_records([wait(), gap(1_090, 60)].concat(), None);
    assert_eq!(
        (r.stalls[0].kind, r.stalls[0].signals),
        (StallKind::Irqoff, 2)
    );
}

/// On a VM: a gap the hypervisor took most of is not the guest's irqs-off time. A wait that
/// contains such a gap keeps its kind even when the gap covers most of it; the gap's
/// evidence says how much the host took.
#[test]
fn a_gap_the_hypervisor_took_does_not_make_a_wait_irqs_off() {
    let wait = runq_record(
        KIND_RUNQ,
        CPU,
        1_100 * MS,
        100 * MS,
        task(300, "api", ROOT),
        task(400, "hog", ROOT),
        None,
        0,
    );
    let stolen = stolen_gap_record(CPU, 1_090 * MS, task(400, "hog", ROOT), 60 * MS, 48 * MS);
    let r = analyse_records([wait, stolen.clone()].concat(), None);
    assert_eq!(
        (r.stalls[0].kind, r.stalls[0].signals),
        (StallKind::Runq, 2),
        "{:#?}",
        r.stalls
    );
    let r = analyse_records(stolen, None);
    let evidence = r.stalls[0].evidence.as_deref().unwrap_or_default();
    assert!(
        evidence.contains("no sampler tick for 60.0 ms (the hypervisor took 48.0 ms of it)"),
        "{evidence}"
    );
}

/// A gap that a long hardirq handler ran most of is the handler's, not the task it
/// interrupted, whether the handler's record comes before the gap's or after; a handler that
/// ran a small part of a gap leaves the task its culprit.
#[test]
fn a_gap_a_hardirq_handler_ran_names_the_handler_not_the_interrupted_task() {
    let gap = || sample_record(CPU, 1_020 * MS, task(400, "api", ROOT), None, 20 * MS, &[]);
    let handler = |run_ms: u64| {
        hardirq_record(
            CPU,
            1_019 * MS,
            run_ms * MS,
            25,
            "eth0-rx-0",
            task(400, "api", ROOT),
        )
    };
    for records in [[handler(15), gap()].concat(), [gap(), handler(15)].concat()] {
        let r = analyse_records(records, None);
        let s = &r.stalls[0];
        assert_eq!(s.kind, StallKind::Irqoff);
        assert_eq!(s.culprit, None, "{s:#?}");
        let h = s.hardirq.as_ref().expect("the handler is named");
        assert_eq!(
            (h.irq, h.handler.as_str(), h.run_ns),
            (25, "eth0-rx-0", 15 * MS)
        );
        let evidence = s.evidence.as_deref().unwrap_or_default();
        assert!(
            evidence.contains("the hardirq handler eth0-rx-0 (irq 25) ran 15.0 ms of it"),
            "{evidence}"
        );
    }
    let r = analyse_records([handler(2), gap()].concat(), None);
    let s = &r.stalls[0];
    assert_eq!(s.hardirq, None);
    assert_eq!(s.culprit.as_ref().map(|c| c.comm.as_str()), Some("api"));
}

/// Case 5: fadvise64 is the top syscall by kernel time, with its file and
/// its tail against its normal cost.
#[test]
fn fadvise_storm_tops_the_syscall_table() {
    let glog = || task(1200, "app", CADVISOR);
    let mut fadvise = Histogram::default();
    for i in 0..1_000u64 {
        fadvise.record(if i < 900 { 20_000 } else { 1_500 * MS });
    }
    let mut read = Histogram::default();
    for _ in 0..50_000 {
        read.record(5_000);
    }
    let kernel = KernelSnapshot {
        ts_ns: 9_000 * MS,
        syscalls: vec![
            SyscallStats {
                cgroup: CADVISOR,
                nr: SYS_FADVISE64,
                count: fadvise.count(),
                wall: fadvise,
                wall_total_ns: 150_000 * MS,
                oncpu_total_ns: 140_000 * MS,
                max_ns: 2_000 * MS,
            },
            SyscallStats {
                cgroup: ROOT,
                nr: SYS_READ,
                count: read.count(),
                wall: read,
                wall_total_ns: 250 * MS,
                oncpu_total_ns: 240 * MS,
                max_ns: MS,
            },
        ],
        softirq_stolen: vec![SoftirqStolen {
            pid: 1200,
            tid: 1201,
            comm: "app".into(),
            vector: NET_RX,
            ns: 517 * MS,
            count: 10_000,
        }],
        ..KernelSnapshot::default()
    };
    let mut records = Vec::new();
    for i in 0..3 {
        records.extend(syscall_record(
            CPU,
            (6_000 + i * 10) * MS,
            glog(),
            SYS_FADVISE64,
            1_500 * MS,
            1_400 * MS,
            4,
            "/var/log/app/app.INFO",
        ));
    }
    let r = analyse_records(records, Some(kernel));
    let top = &r.syscalls[0];
    assert_eq!((top.syscall.as_str(), top.count), ("fadvise64", 1_000));
    assert_eq!(top.container, "pod:11112222/0123456789ab");
    let (p50, p99) = (top.p50_ns.unwrap(), top.p99_ns.unwrap());
    assert!(p50 < 30_000 && p99 > 1_000 * MS, "p50 {p50} p99 {p99}");
    assert_eq!(top.oncpu_total_ns, 140_000 * MS);
    assert_eq!(top.top_paths[0].path, "/var/log/app/app.INFO");
    assert_eq!(top.top_paths[0].count, 3);
    assert_eq!(r.syscalls[1].syscall, "read");
    assert_eq!(r.softirq_stolen[0].vector, "NET_RX");
    assert_eq!(r.softirq_stolen[0].ns, 517 * MS);
    // In short: the app's slow fadvise64 calls on its log.
    assert_eq!(
        r.findings,
        [Finding::SlowCalls {
            comm: "app".into(),
            container: "pod:11112222/0123456789ab".into(),
            syscall: "fadvise64".into(),
            path: Some("/var/log/app/app.INFO".into()),
            calls: 3,
            longest_wall_ns: 1_500 * MS,
            longest_oncpu_ns: 1_400 * MS,
        }]
    );
}

/// Signals on different CPUs, or apart in time, stay separate stalls; a
/// signal bridging two stalls joins them; nothing is counted twice.
#[test]
fn overlapping_signals_merge_and_nothing_counts_twice() {
    let a = || task(1, "a", ROOT);
    let b = || task(2, "b", ROOT);
    let mut records = Vec::new();
    records.extend(runq_record(
        KIND_RUNQ,
        0,
        1_020 * MS,
        20 * MS,
        a(),
        b(),
        None,
        0,
    )); // cpu0 [1000,1020]
    records.extend(runq_record(
        KIND_RUNQ,
        0,
        1_060 * MS,
        20 * MS,
        a(),
        b(),
        None,
        0,
    )); // cpu0 [1040,1060]
    records.extend(runq_record(
        KIND_RUNQ,
        1,
        1_020 * MS,
        20 * MS,
        a(),
        b(),
        None,
        0,
    )); // cpu1
    let r = analyse_records(records.clone(), None);
    assert_eq!(r.stalls.len(), 3);
    // A wait over [1010, 1050] on cpu0 bridges the first two.
    records.extend(runq_record(
        KIND_RUNQ,
        0,
        1_050 * MS,
        40 * MS,
        b(),
        a(),
        None,
        0,
    ));
    let r = analyse_records(records, None);
    assert_eq!(r.stalls.len(), 2, "{:#?}", r.stalls);
    let cpu0 = r.stalls.iter().find(|s| s.cpu == 0).unwrap();
    assert_eq!(
        (cpu0.start_ns, cpu0.duration_ns, cpu0.signals),
        (1_000 * MS, 60 * MS, 3)
    );
    let total: u64 = r.culprits.iter().map(|c| c.total_stall_ns).sum();
    assert_eq!(
        total,
        80 * MS,
        "each stall counted once: 60 ms on cpu0 + 20 ms on cpu1"
    );
}

/// A saturated CPU: 30 waits of 100 ms, each overlapping the next, are not one stall of 3 s
/// but consecutive stalls of at most a second, each counted once.
#[test]
fn waits_overlapping_without_end_make_stalls_of_at_most_a_second() {
    let mut records = Vec::new();
    for i in 0..30u64 {
        records.extend(runq_record(
            KIND_RUNQ,
            0,
            (1_100 + i * 90) * MS,
            100 * MS,
            task(1, "a", ROOT),
            task(2, "b", ROOT),
            None,
            0,
        ));
    }
    let r = analyse_records(records, None);
    assert!(r.stalls.len() >= 3, "{:#?}", r.stalls);
    for s in &r.stalls {
        assert!(s.duration_ns <= stalls::MAX_MERGED_STALL_NS, "{s:#?}");
    }
    let signals: u32 = r.stalls.iter().map(|s| s.signals).sum();
    assert_eq!(signals, 30, "every wait in exactly one stall");
    let first = &r.stalls[0];
    assert_eq!(
        (first.start_ns, first.duration_ns),
        (1_000 * MS, 1_000 * MS),
        "eleven waits, up to the one that would pass a second"
    );
}

/// Preempt=none: a long non-yielding call is only switched out on its way
/// back to user space, after its syscall ended; the stall still names it.
#[test]
fn a_culprit_seen_just_after_its_call_still_gets_the_call() {
    // getdents64 ran for `call_ns` up to 1020 ms; it returns, then the victim, which waited
    // [1001, 1020] ms, runs.
    let analyse_call = |call_ns: u64| {
        let culprit = || task(77, "culprit", ROOT);
        let mut records = syscall_record(
            CPU,
            1_020 * MS,
            culprit(),
            217,
            call_ns,
            call_ns,
            5,
            "/dev/shm/big",
        );
        records.extend(runq_record(
            KIND_RUNQ,
            CPU,
            1_020 * MS + 5_000,
            19 * MS,
            task(78, "victim", ROOT),
            culprit(),
            None,
            0,
        ));
        analyse_records(records, None)
    };
    let r = analyse_call(20 * MS);
    let c = r.stalls[0].culprit.as_ref().unwrap();
    assert_eq!(c.syscall.as_deref(), Some("getdents64"));
    assert_eq!(c.path.as_deref(), Some("/dev/shm/big"));
    // A call that covered little of the wait is not blamed.
    let r = analyse_call(2 * MS);
    assert_eq!(r.stalls[0].culprit.as_ref().unwrap().syscall, None);
}

/// In a merged stall the culprit is the holder that kept tasks waiting
/// longest, not whoever came first.
#[test]
fn the_culprit_of_merged_waits_is_the_longest_holder() {
    let a = || task(1, "short", ROOT);
    let hog = || task(2, "hog", ROOT);
    let v = || task(3, "victim", ROOT);
    let mut records = Vec::new();
    records.extend(runq_record(
        KIND_RUNQ,
        0,
        1_012 * MS,
        12 * MS,
        v(),
        a(),
        None,
        0,
    )); // [1000,1012] behind short
    records.extend(runq_record(
        KIND_RUNQ,
        0,
        1_050 * MS,
        45 * MS,
        task(4, "w", ROOT),
        hog(),
        None,
        0,
    )); // [1005,1050] behind hog
    let r = analyse_records(records, None);
    assert_eq!(r.stalls.len(), 1);
    assert_eq!(r.stalls[0].culprit.as_ref().unwrap().comm, "hog");
}

/// Case 4 merged: a hog waiting behind its sibling hides nothing; the
/// victim waiting behind the neighbour's hog is what waited.
#[test]
fn the_waiter_shown_is_the_one_kept_off_by_a_neighbour() {
    let hog_a = || task(10, "hog", NOISY);
    let hog_b = || task(11, "hog", NOISY);
    let victim = || task(12, "victim", VICTIM);
    let mut records = Vec::new();
    records.extend(runq_record(
        KIND_RUNQ,
        1,
        1_008 * MS,
        8 * MS,
        hog_a(),
        hog_b(),
        None,
        0,
    )); // [1000,1008]
    records.extend(runq_record(
        KIND_RUNQ,
        1,
        1_005 * MS,
        3 * MS,
        victim(),
        hog_b(),
        None,
        0,
    )); // [1002,1005]
    let r = analyse_records(records, None);
    assert_eq!(r.stalls.len(), 1);
    let s = &r.stalls[0];
    assert_eq!(s.waited.comm.as_deref(), Some("victim"));
    assert_eq!(s.waited.wait_ns, Some(3 * MS));
    assert_eq!(s.culprit.as_ref().unwrap().comm, "hog");
}

/// On a VM: the hypervisor's share of a wait (steal) stays with the wait, in the event and in
/// the stall it makes.
#[test]
fn the_hypervisors_share_of_a_wait_is_kept() {
    let records = runq_record(
        KIND_RUNQ,
        1,
        2_000 * MS,
        14 * MS,
        task(12, "victim", VICTIM),
        task(11, "hog", NOISY),
        None,
        9_500_000,
    );
    let r = analyse_records(records, None);
    assert_eq!(r.runq_events[0].wait_ns, 14 * MS);
    assert_eq!(r.runq_events[0].steal_ns, 9_500_000);
    let s = &r.stalls[0];
    assert_eq!(
        (s.waited.wait_ns, s.waited.steal_ns),
        (Some(14 * MS), Some(9_500_000))
    );
}

/// Case 4's tail: a wait moved by load balancing keeps its whole length and says where it
/// began, in the event and in the stall it makes.
#[test]
fn a_wait_moved_between_cpus_keeps_its_length_and_where_it_began() {
    let records = migrated_runq_record(
        1,
        2_000 * MS,
        37 * MS,
        task(12, "victim", VICTIM),
        task(11, "hog", NOISY),
        0,
        1,
    );
    let r = analyse_records(records, None);
    let moved = Some(MigratedRow {
        from_cpu: 0,
        migrations: 1,
    });
    assert_eq!(
        (r.runq_events[0].wait_ns, r.runq_events[0].migrated),
        (37 * MS, moved)
    );
    let s = &r.stalls[0];
    assert_eq!(
        (s.cpu, s.duration_ns, s.waited.wait_ns, s.waited.migrated),
        (1, 37 * MS, Some(37 * MS), moved)
    );
    assert_eq!(s.culprit.as_ref().unwrap().comm, "hog");
}

/// Case 5 with sampled syscalls: many fadvise64 calls, each too short to
/// be listed as slow, still put fadvise64 on top with its file, by the
/// kernel time the sampler found on it; the rows have no percentiles.
#[test]
fn sampled_fadvise_storm_tops_the_syscall_table_with_its_file() {
    let mut header = super::header();
    header.settings.syscalls = SyscallMode::Sampled;
    header.settings.sample_hz = 1000;
    let kernel = KernelSnapshot {
        ts_ns: 9_000 * MS,
        syscalls: vec![
            SyscallStats {
                cgroup: CADVISOR,
                nr: SYS_FADVISE64,
                count: 900,
                wall: Histogram::default(),
                wall_total_ns: 1_300 * MS,
                oncpu_total_ns: 1_200 * MS,
                max_ns: 3 * MS,
            },
            SyscallStats {
                cgroup: CADVISOR,
                nr: SYS_READ,
                count: 40,
                wall: Histogram::default(),
                wall_total_ns: 50 * MS,
                oncpu_total_ns: 40 * MS,
                max_ns: MS,
            },
        ],
        files: vec![
            FileTime {
                cgroup: CADVISOR,
                nr: SYS_FADVISE64,
                path: "/var/log/app/app.INFO".into(),
                calls: 880,
                oncpu_ns: 1_150 * MS,
            },
            FileTime {
                cgroup: CADVISOR,
                nr: SYS_FADVISE64,
                path: "/var/log/app/app.WARNING".into(),
                calls: 20,
                oncpu_ns: 50 * MS,
            },
        ],
        ..KernelSnapshot::default()
    };
    let mut a = Analysis::new(header);
    a.apply(&symbols_and_cgroups());
    a.apply(&Entry::Kernel(kernel));
    let r = a.report();
    let top = &r.syscalls[0];
    assert_eq!((top.syscall.as_str(), top.count), ("fadvise64", 900));
    assert_eq!((top.p50_ns, top.p99_ns), (None, None));
    assert_eq!(top.oncpu_total_ns, 1_200 * MS);
    assert_eq!(
        top.top_paths
            .iter()
            .map(|p| (p.path.as_str(), p.count, p.total_ns))
            .collect::<Vec<_>>(),
        [
            ("/var/log/app/app.INFO", 880, 1_150 * MS),
            ("/var/log/app/app.WARNING", 20, 50 * MS)
        ]
    );
    assert!(r.slow_syscalls.is_empty());
}

/// Case 3 as the issue saw it: three threads under a 12 ms / 100 ms quota wait ~88 ms each
/// period while kdamond.0 and a kworker fill the CPU. The throttle is the diagnosis: no
/// bystander is a culprit, and a neighbour's wait behind a real hog on the same CPU stays a
/// run-queue stall of its own.
#[test]
fn waits_a_cpu_quota_explains_are_throttled_stalls_with_no_culprit() {
    const THROTTLED: u64 = 4003;
    let names = Entry::Names(NameTable {
        cgroups: vec![
            (ROOT, "/".into()),
            (THROTTLED, "/quota".into()),
            (VICTIM, "/quota/api".into()),
            (NOISY, "/batch".into()),
        ],
        ..NameTable::default()
    });
    let throttle = Entry::Throttle(crate::stream::ThrottleSnapshot {
        ts_ns: 0,
        cgroups: vec![crate::stream::CgroupThrottle {
            path: "/quota".into(),
            quota_us: 12_000,
            period_us: 100_000,
            ..Default::default()
        }],
    });
    let mut records = Vec::new();
    for period in 0..3u64 {
        let end = (1_000 + period * 100 + 99) * MS;
        for (tid, holder) in [(301, "kdamond.0"), (302, "kworker/0:1")] {
            records.extend(throttled_runq_record(
                0,
                end + u64::from(tid) * 10_000,
                88 * MS,
                task(tid, "api", VICTIM),
                task(40, holder, ROOT),
                THROTTLED,
                87 * MS,
            ));
        }
    }
    // Later, on the same CPU, a task of /batch waits 30 ms behind a hog of the host.
    records.extend(runq_record(
        KIND_RUNQ,
        0,
        1_700 * MS,
        30 * MS,
        task(500, "batch", NOISY),
        task(600, "hog", ROOT),
        None,
        0,
    ));
    let r = analyse(&[names, throttle, Entry::Records(records)]);

    let throttled: Vec<_> = r
        .stalls
        .iter()
        .filter(|s| s.kind == StallKind::Throttled)
        .collect();
    assert_eq!(throttled.len(), 3, "one per period: {:#?}", r.stalls);
    for s in &throttled {
        assert_eq!(s.throttled_cgroup.as_deref(), Some("/quota"));
        assert_eq!(
            s.quota,
            Some(report::QuotaRow {
                quota_us: 12_000,
                period_us: 100_000
            })
        );
        assert!(s.culprit.is_none(), "a bystander was blamed: {s:#?}");
        assert_eq!(s.waited.cgroup.as_deref(), Some("/quota/api"));
    }
    assert!(r
        .culprits
        .iter()
        .all(|c| c.comm != "kdamond.0" && c.comm != "kworker/0:1"));
    let hog = r
        .stalls
        .iter()
        .find(|s| s.kind == StallKind::Runq)
        .expect("the hog's stall");
    assert_eq!(hog.culprit.as_ref().map(|c| c.comm.as_str()), Some("hog"));
    assert_eq!(hog.throttled_cgroup, None);
    let event = r
        .runq_events
        .iter()
        .find(|e| e.comm == "api")
        .expect("the throttled waits are listed");
    assert_eq!(event.throttled_cgroup.as_deref(), Some("/quota"));
}

/// A throttled wait and a neighbour's wait that overlap on one CPU are two diagnoses, not one
/// merged stall: the throttle does not take the neighbour's culprit, nor the neighbour the
/// throttle's kind.
#[test]
fn a_throttled_wait_does_not_merge_with_an_overlapping_run_queue_wait() {
    const THROTTLED: u64 = 4003;
    let records = [
        throttled_runq_record(
            0,
            1_090 * MS,
            80 * MS,
            task(301, "api", THROTTLED),
            task(600, "hog", NOISY),
            THROTTLED,
            78 * MS,
        ),
        runq_record(
            KIND_RUNQ,
            0,
            1_080 * MS,
            40 * MS,
            task(500, "batch", VICTIM),
            task(600, "hog", NOISY),
            None,
            0,
        ),
    ]
    .concat();
    let r = analyse(&[Entry::Records(records)]);
    let kinds: Vec<_> = r
        .stalls
        .iter()
        .map(|s| (s.kind, s.culprit.as_ref().map(|c| c.comm.clone())))
        .collect();
    assert_eq!(
        kinds,
        [
            (StallKind::Throttled, None),
            (StallKind::Runq, Some("hog".to_string()))
        ]
    );
}
