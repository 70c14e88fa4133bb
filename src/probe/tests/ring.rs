//! The ring buffer's wakeups: the BPF side wakes a reader asleep in `poll` only once much is
//! queued, and each CPU forces that wakeup once per read of the reader's (bpf/common.bpf.h,
//! record_wakeup). A wakeup that never came would leave every record to the reader's timeout.

use super::*;

/// What the BPF side lets queue before it wakes the reader (RINGBUF_WAKEUP_BYTES).
const WAKEUP_BYTES: usize = 256 * 1024;

/// Far longer than a burst takes: a poll that returns before it was woken.
const ASLEEP: Duration = Duration::from_secs(30);

/// Reads of /dev/urandom, 64 KiB each: every one a slow call by its time on a CPU (~170 us
/// of generating bytes here, where a read of /dev/zero that stays in cache can pass under the
/// threshold).
fn slow_reads(calls: usize) {
    let mut random = std::fs::File::open("/dev/urandom").unwrap();
    let mut buf = vec![0u8; 64 << 10];
    for _ in 0..calls {
        use std::io::Read;
        random.read_exact(&mut buf).unwrap();
    }
}

/// Twice, a reader asleep in `poll` (its timeout 30 s) is woken by a burst of records that
/// passes RINGBUF_WAKEUP_BYTES: the second time after the first wakeup was spent, so the CPUs
/// that forced it must force another after the read.
#[test]
fn tp_btf_a_sleeping_reader_is_woken_by_a_burst_again_after_each_read() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // Only slow syscalls make records: every call over 20 us on a CPU, unlimited in rate; no
    // sampler, no run-queue or softirq records.
    let config = ProbeConfig {
        syscall_oncpu_threshold_ns: 20_000,
        record_rate: 1_000_000,
        sample_hz: 0,
        runq_threshold_ns: 60_000_000_000,
        stall_threshold_ns: 60_000_000_000,
        ..config(AttachMode::TpBtf)
    };
    let mut storage = ObjectStorage::default();
    let mut session = Session::start(&config, &mut storage).expect("probes load");
    for burst in 1..=2 {
        // Whatever other tasks' slow calls queued: the reader starts from an empty ring (a
        // steady stream of them would keep it awake, and the burst's wakeup untested, never
        // failed).
        for _ in 0..100 {
            if session.poll(Duration::from_millis(20)).is_empty() {
                break;
            }
        }
        let writer = std::thread::spawn(|| {
            std::thread::sleep(Duration::from_millis(200));
            slow_reads(1_000);
        });
        let started = Instant::now();
        let mut queued = 0;
        while queued < WAKEUP_BYTES {
            queued += session.poll(ASLEEP).len();
            assert!(
                started.elapsed() < ASLEEP,
                "burst {burst}: the reader slept until its timeout with {queued} bytes read"
            );
        }
        writer.join().unwrap();
        let woken_after = started.elapsed();
        assert!(
            woken_after < ASLEEP / 3,
            "burst {burst}: {queued} bytes read only after {woken_after:?}"
        );
    }
}
