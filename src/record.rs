//! Recording files: the on-disk format (constants here), the writer and the
//! reader with damage handling. Stores `stream` types; never interprets them.
//!
//! Layout, all integers little-endian:
//! ```text
//! file   = MAGIC  version:u32  header_len:u32  header_crc:u32  header:JSON
//!          chunk*
//! chunk  = CHUNK_MAGIC  compressed_len:u32  uncompressed_len:u32
//!          crc32(compressed):u32  compressed:one zstd frame of entry*
//! entry  = tag:u8  len:u32  payload (raw bytes for Records, JSON otherwise)
//! ```
//! Each chunk is written with one `write_all`, so a crash loses at most the
//! chunk being written and the reader stops cleanly at it.

mod reader;
mod writer;

pub use reader::read;
pub use writer::{ChunkBuilder, Writer};
// The rest of the API; callers name these types only when they need to.
#[allow(unused_imports)]
pub use {
    reader::{Damage, ReadError, Recording},
    writer::WriteError,
};

const MAGIC: &[u8; 8] = b"STALLTOP";
/// Bump on any incompatible change of the layout above or of the JSON types,
/// and on a new entry tag (a reader stops at a tag it does not know). 2: the
/// Pressure entry.
const VERSION: u32 = 2;
/// The oldest version this reader still reads: each bump since added what
/// an older file simply lacks.
const OLDEST_VERSION: u32 = 1;
/// MAGIC, version, header_len, header_crc.
const HEADER_PREFIX_LEN: usize = 8 + 4 + 4 + 4;
const MAX_HEADER_LEN: usize = 1 << 20;

const CHUNK_MAGIC: &[u8; 4] = b"CHNK";
/// CHUNK_MAGIC, compressed_len, uncompressed_len, crc32.
const CHUNK_FRAME_LEN: usize = 4 + 4 + 4 + 4;
/// The reader refuses chunks (either length) above this, so a corrupt
/// length cannot make it allocate gigabytes.
const MAX_CHUNK_LEN: usize = 64 << 20;
/// The writer refuses larger entries; with the flush size this keeps every
/// chunk, even incompressible, well under MAX_CHUNK_LEN.
const MAX_ENTRY_LEN: usize = 16 << 20;
/// The writer flushes a chunk once this many uncompressed bytes are buffered.
const CHUNK_FLUSH_LEN: usize = 1 << 20;
/// tag:u8, len:u32.
const ENTRY_HEADER_LEN: usize = 1 + 4;

const TAG_RECORDS: u8 = 1;
const TAG_KERNEL: u8 = 2;
const TAG_THROTTLE: u8 = 3;
const TAG_NAMES: u8 = 4;
const TAG_PRESSURE: u8 = 5;

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::histogram::Histogram;
    use crate::modes::{
        Attach, CgroupHierarchy, RunqWait, SoftirqTime, StealSource, SyscallMode, Throttle,
    };
    use crate::stream::{
        CgroupPressure, CgroupRunq, CgroupThrottle, Counters, Entry, Header, HostInfo,
        KernelSnapshot, NameTable, Preemptor, Pressure, PressureSnapshot, ProgramCost, Settings,
        SoftirqStats, SoftirqStolen, SyscallStats, ThrottleSnapshot,
    };

    pub(super) fn header() -> Header {
        Header {
            host: HostInfo {
                hostname: "db-7.example".into(),
                kernel: "6.8.0-45-generic".into(),
                cpus: 16,
                online: None,
                machine: None,
            },
            start_ns: 1_234_567_890_123,
            wall_clock_offset_ns: 1_700_000_000_000_000_000,
            settings: Settings {
                runq_threshold_ns: 2_000_000,
                stall_threshold_ns: 5_000_000,
                syscall_wall_threshold_ns: 10_000_000,
                syscall_oncpu_threshold_ns: 1_000_000,
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
            warnings: vec!["CPU X-ray sampler is off: test".into()],
            probes: vec![],
            trigger: None,
            recorder_pid: None,
        }
    }

    /// `count` runq_event-sized (104 bytes) records, back to back, each
    /// starting with a record_header {kind, size, cpu, ts}.
    pub(super) fn records(count: usize, seed: u64) -> Entry {
        let mut bytes = Vec::new();
        for i in 0..count as u64 {
            bytes.extend_from_slice(&1u16.to_le_bytes());
            bytes.extend_from_slice(&104u16.to_le_bytes());
            bytes.extend_from_slice(&((i % 16) as u32).to_le_bytes());
            bytes.extend_from_slice(&(seed * 1_000_000_000 + i * 12_345).to_le_bytes());
            let filler = (seed.wrapping_mul(31) ^ i).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            for j in 0..11u64 {
                bytes.extend_from_slice(&filler.rotate_left(j as u32 * 5).to_le_bytes());
            }
        }
        Entry::Records(bytes)
    }

    pub(super) fn kernel(ts_ns: u64) -> Entry {
        let histogram = |values: &[u64]| {
            let mut histogram = Histogram::default();
            values.iter().for_each(|&v| histogram.record(v));
            histogram
        };
        Entry::Kernel(KernelSnapshot {
            ts_ns,
            runq: vec![CgroupRunq {
                cgroup: 4242,
                latency: histogram(&[800, 3_000, 3_100, 250_000, 9_000_000]),
                count: 5,
                total_ns: 9_256_900,
                max_ns: 9_000_000,
                preempted_same_cgroup: 1,
                preempted_other_cgroup: 3,
                preempted_kthread: 1,
                preempted_throttled: 0,
                why: None,
            }],
            preemptors: vec![Preemptor {
                victim_cgroup: 4242,
                preemptor_cgroup: 1,
                comm: "ksoftirqd/3".into(),
                count: 3,
                wait_ns: 12_000_000,
                kthread: false,
            }],
            softirq: vec![SoftirqStats {
                cpu: 3,
                vector: 3, // NET_RX
                delay: histogram(&[2_000, 40_000, 7_500_000]),
                count: 3,
                delay_total_ns: 0,
                delay_max_ns: 7_500_000,
                run_total_ns: 1_900_000,
                run_max_ns: 1_200_000,
                runs_in_ksoftirqd: 1,
                run_in_ksoftirqd_ns: 1_200_000,
            }],
            softirq_stolen: vec![SoftirqStolen {
                pid: 31337,
                tid: 31338,
                comm: "postgres".into(),
                vector: 3,
                ns: 700_000,
                count: 2,
            }],
            syscalls: vec![SyscallStats {
                cgroup: 4242,
                nr: 202, // futex
                wall: histogram(&[15_000_000, 22_000_000]),
                count: 2,
                wall_total_ns: 37_000_000,
                oncpu_total_ns: 40_000,
                max_ns: 22_000_000,
            }],
            files: Vec::new(),
            counters: Counters {
                lost: vec![("runq".into(), 2), ("takeover".into(), 0)],
                map_full: vec![("tasks".into(), 1)],
                rate_limited: vec![("syscall".into(), 3)],
            },
            programs: vec![ProgramCost {
                name: "handle_sched_switch".into(),
                run_count: 1_204_331,
                run_time_ns: 301_082_750,
            }],
            removed_cgroups: Vec::new(),
            cost_guard: None,
        })
    }

    pub(super) fn throttle(ts_ns: u64) -> Entry {
        Entry::Throttle(ThrottleSnapshot {
            ts_ns,
            cgroups: vec![CgroupThrottle {
                path: "/kubepods.slice/pod-a/ctr-1".into(),
                quota_us: 50_000,
                period_us: 100_000,
                burst_us: None,
                cpus: Some("0-3,8".into()),
                nr_periods: 812,
                nr_throttled: 97,
                throttled_ns: 4_100_000_000,
                usage_ns: Some(41_000_000_000),
            }],
        })
    }

    pub(super) fn names() -> Entry {
        Entry::Names(NameTable {
            cgroups: vec![
                (1, "/".into()),
                (4242, "/kubepods.slice/pod-a/ctr-1".into()),
                (4243, "/system.slice/sshd.service".into()),
            ],
            kernel_symbols: vec![(0xffff_ffff_8112_3450, "net_rx_action".into())],
            user_symbols: vec![(31337, 0x5555_5555_a000, "LWLockAcquire".into())],
            pods: vec![(
                "6b1f3c2e-8d4a-4e5b-9c7d-2a1b0c9d8e7f".into(),
                "shop/cart-7d9f".into(),
            )],
            containers: vec![("3f4a".repeat(16), "redis".into())],
        })
    }

    /// Writes `chunks`, one `flush_chunk` after each; returns the file size
    /// after each chunk (so `ends[i]` is where chunk i+1 starts).
    pub(super) fn write_chunks(path: &Path, chunks: &[Vec<Entry>]) -> Vec<u64> {
        let mut writer = Writer::create(path, &header()).expect("create");
        let mut ends = Vec::new();
        for chunk in chunks {
            for entry in chunk {
                writer.write(entry).expect("write");
            }
            writer.flush_chunk().expect("flush");
            ends.push(std::fs::metadata(path).expect("metadata").len());
        }
        assert_eq!(
            writer.finish().expect("finish"),
            *ends.last().expect("chunks")
        );
        ends
    }

    #[test]
    fn roundtrip_every_entry_kind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.stalltop");
        let entries = vec![
            names(),
            records(40, 1),
            kernel(10),
            throttle(11),
            Entry::Pressure(PressureSnapshot {
                ts_ns: 12,
                host: Some(Pressure {
                    some_us: 2_777_745_282,
                    full_us: Some(0),
                }),
                cgroups: vec![CgroupPressure {
                    path: "/kubepods.slice/pod-a/ctr-1".into(),
                    pressure: Pressure {
                        some_us: 1_500,
                        full_us: None,
                    },
                }],
            }),
            records(1, 2),
        ];
        match &entries[1] {
            Entry::Records(bytes) => assert_eq!(bytes.len(), 4160),
            other => panic!("unexpected {other:?}"),
        }
        let mut writer = Writer::create(&path, &header()).unwrap();
        for entry in &entries {
            writer.write(entry).unwrap();
        }
        let written = writer.finish().unwrap();
        assert_eq!(written, std::fs::metadata(&path).unwrap().len());

        let recording = read(&path).unwrap();
        assert_eq!(recording.header, header());
        assert_eq!(recording.entries, entries);
        assert_eq!(recording.damage, None);
    }

    #[test]
    fn roundtrip_many_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.stalltop");
        let chunks: Vec<Vec<Entry>> = (0..50u64)
            .map(|i| vec![records(5 + i as usize, i), kernel(i), throttle(i)])
            .collect();
        let ends = write_chunks(&path, &chunks);
        assert_eq!(ends.len(), 50);
        assert!(
            ends.windows(2).all(|w| w[0] < w[1]),
            "every chunk adds bytes"
        );

        let recording = read(&path).unwrap();
        assert_eq!(recording.entries, chunks.concat());
        assert_eq!(recording.damage, None);
    }

    #[test]
    fn header_only_file_has_no_entries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.stalltop");
        Writer::create(&path, &header()).unwrap().finish().unwrap();
        let recording = read(&path).unwrap();
        assert_eq!(recording.header, header());
        assert_eq!(recording.entries, vec![]);
        assert_eq!(recording.damage, None);
    }
}
