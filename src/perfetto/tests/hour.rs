//! An hour of a busy two-CPU node, synthetic: every wait and stall of it
//! reaches the trace. `STALLTOP_HOUR_RECORDING=FILE` also keeps the
//! recording, to time `stalltop report FILE --perfetto` on it
//! (docs/performance.md).

use super::*;
use crate::abi::{KIND_RUNQ, KIND_TAKEOVER};
use crate::app::fixtures::{header, MS, S, START};
use crate::event::testing::{runq_record, sample_record, softirq_record, task};
use crate::stream::{NameTable, SoftirqStats};

const SECONDS: u64 = 3_600;
/// Waits over the threshold per CPU per second: one every 100 ms.
const WAITS_PER_SECOND: u64 = 10;
const CGROUPS: [(u64, &str); 4] = [
    (1, "/"),
    (7001, "/kubepods/burstable/pod-api/api"),
    (7002, "/kubepods/besteffort/pod-batch/batch"),
    (7003, "/system.slice/cadvisor.service"),
];
const STACK: [u64; 8] = [
    0xffff_ffff_8100_1000,
    0xffff_ffff_8100_2000,
    0xffff_ffff_8100_3000,
    0xffff_ffff_8100_4000,
    0xffff_ffff_8100_5000,
    0xffff_ffff_8100_6000,
    0xffff_ffff_8100_7000,
    0xffff_ffff_8100_8000,
];

/// One second of records: on each CPU a wait every 100 ms (12 ms behind one
/// of two hogs, every fourth one 40 ms), two stack samples inside each, a
/// ksoftirqd wait and a NET_RX delay at its end.
fn second(s: u64) -> Vec<u8> {
    let mut bytes = Vec::new();
    for cpu in 0..2u32 {
        for k in 0..WAITS_PER_SECOND {
            let end = START + s * S + k * 100 * MS + 20 * MS;
            let wait = if k % 4 == 0 { 40 * MS } else { 12 * MS };
            let waiter = 100 + (k % 8) as u32;
            let cgroup = CGROUPS[1 + (k % 3) as usize].0;
            let hog = task(900 + cpu * 2 + (k % 2) as u32, "hog", CGROUPS[2].0);
            bytes.extend(runq_record(
                KIND_RUNQ,
                cpu,
                end,
                wait,
                task(waiter, "worker", cgroup),
                hog,
                None,
                0,
            ));
            for tick in [2, 6] {
                bytes.extend(sample_record(cpu, end - tick * MS, hog, None, 0, &STACK));
            }
        }
        let end = START + s * S + 990 * MS;
        bytes.extend(runq_record(
            KIND_TAKEOVER,
            cpu,
            end,
            15 * MS,
            task(10 + cpu, &format!("ksoftirqd/{cpu}"), CGROUPS[0].0),
            task(800, "cadvisor", CGROUPS[3].0),
            Some((0, 30 * MS)),
            0,
        ));
        bytes.extend(softirq_record(
            cpu,
            end,
            14 * MS,
            3,
            true,
            task(10 + cpu, "ksoftirqd", 1),
        ));
    }
    bytes
}

fn kernel(s: u64) -> Entry {
    Entry::Kernel(KernelSnapshot {
        ts_ns: START + s * S,
        softirq: (0..2)
            .map(|cpu| SoftirqStats {
                cpu,
                vector: 3,
                count: s * 2_000,
                run_total_ns: s * (30 + u64::from(cpu) * 10) * MS,
                ..SoftirqStats::default()
            })
            .collect(),
        ..KernelSnapshot::default()
    })
}

fn entries() -> Vec<Entry> {
    let mut entries = vec![Entry::Names(NameTable {
        cgroups: CGROUPS
            .iter()
            .map(|&(id, path)| (id, path.into()))
            .collect(),
        kernel_symbols: STACK
            .iter()
            .enumerate()
            .map(|(i, &addr)| (addr, format!("kernel_function_{i}")))
            .collect(),
        ..NameTable::default()
    })];
    for s in 0..SECONDS {
        entries.push(Entry::Records(second(s)));
        entries.push(kernel(s + 1));
    }
    entries
}

#[test]
fn an_hour_of_a_busy_node_reaches_the_trace_whole() {
    let header = header(2);
    let entries = entries();
    if let Some(path) = std::env::var_os("STALLTOP_HOUR_RECORDING") {
        let mut writer = crate::record::Writer::create(Path::new(&path), &header).unwrap();
        entries.iter().for_each(|e| writer.write(e).unwrap());
        writer.finish().unwrap();
    }
    let exported = export(&header, &entries);
    let waits = (SECONDS * 2 * (WAITS_PER_SECOND + 1)) as usize;
    assert_eq!(exported.waits, waits);
    // Every wait is a stall of its own, but for each second's ksoftirqd
    // wait and NET_RX delay: the next second's first wait (40 ms) began
    // 20 ms before that second and merges with them (the last second's
    // have no next).
    let stalls = (SECONDS * 2 * WAITS_PER_SECOND + 2) as usize;
    assert_eq!(exported.stalls, stalls);
    // More than an analysis keeps by default (MAX_STALLS, src/model/stalls.rs).
    assert!(stalls > 50_000);

    let trace = proto::Trace::decode(exported.trace.as_slice()).expect("decodes");
    let mut begins = 0;
    let mut flows = 0;
    for p in &trace.packet {
        if let Some(PacketData::TrackEvent(e)) = &p.data {
            if e.r#type == Some(TYPE_SLICE_BEGIN) {
                begins += 1;
                flows += e.flow_ids.len();
            }
        }
    }
    assert_eq!(begins, stalls + waits);
    assert_eq!(flows, waits, "a flow from its stall to every wait");
}
