//! Real-kernel test that a sleep is never a wait: a thread works briefly and sleeps 20 ms,
//! beside a busy loop on each CPU, while a sibling flips its affinity between the two CPUs
//! every millisecond. With EEVDF's delayed dequeue (6.12+) a task that goes to sleep owing
//! CPU time stays queued, and moving it stamps its sched_info as if it had begun to wait;
//! none of its waits may be longer than the longest it was kept off its CPU by its own
//! clock. Kernels without delayed dequeue run the same test.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

use super::migration::MS;
use super::*;
use super::{config, pin_to, runq_waits_of, set_name, sleep_until, thread_cpu_ns};
use crate::host;

const RUN_NS: u64 = 2_000 * MS;
const WORK_NS: u64 = 300_000;
const SLEEP_NS: u64 = 20 * MS;
const FLIP_NS: u64 = MS;
/// The clocks of the thread and of the probes, and the moments each reads them, differ.
const TOLERANCE_NS: u64 = MS;

/// What the sleeper measured by its own clocks.
#[derive(Debug, Default)]
struct Kept {
    /// When the sleeper first read its clock: a wait that ended before (the new thread's first
    /// wait for a CPU, behind the busy loops) is none of its measures.
    began_ns: u64,
    /// When it last read its clock: a wait that ended after (the exiting thread preempted by
    /// the test thread its exit wakes, or moved by the flipper) is none of its measures either.
    ended_ns: u64,
    /// The longest from a sleep's due time to running again.
    latest_wakeup_ns: u64,
    /// The longest a stretch of work took beyond its CPU time (preempted, or moved while it
    /// ran and waiting on the other CPU).
    longest_work_gap_ns: u64,
    sleeps: u64,
}

/// Work WORK_NS of CPU time, then sleep SLEEP_NS, until `end`; what the clocks said. Each
/// reading of the clock ends one measure and begins the next, so that a wait while the loop
/// runs falls in a measure (but for the instant between the last reading and the sleep).
fn work_and_sleep(end: u64) -> Kept {
    let mut now = host::monotonic_ns();
    let mut kept = Kept {
        began_ns: now,
        ..Kept::default()
    };
    while now < end {
        let cpu_until = thread_cpu_ns() + WORK_NS;
        while thread_cpu_ns() < cpu_until {
            std::hint::spin_loop();
        }
        let worked_until = host::monotonic_ns();
        let worked = worked_until - now;
        kept.longest_work_gap_ns = kept.longest_work_gap_ns.max(worked.saturating_sub(WORK_NS));
        let due = worked_until + SLEEP_NS;
        sleep_until(due);
        now = host::monotonic_ns();
        kept.latest_wakeup_ns = kept.latest_wakeup_ns.max(now - due);
        kept.sleeps += 1;
    }
    kept.ended_ns = now;
    kept
}

/// Run the busy loops, the sleeper and its flipper; the sleeper's thread id and measures.
fn sleeper_beside_busy_cpus(end: u64) -> (u32, Kept) {
    let sleeper_tid = AtomicI32::new(0);
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for (cpu, name) in [(0, c"st-busy0"), (1, c"st-busy1")] {
            scope.spawn(move || {
                set_name(name);
                pin_to(cpu);
                while host::monotonic_ns() < end {
                    std::hint::spin_loop();
                }
            });
        }
        let sleeper = scope.spawn(|| {
            set_name(c"st-sleeper");
            // SAFETY: gettid has no preconditions.
            sleeper_tid.store(unsafe { libc::gettid() }, Ordering::Relaxed);
            let kept = work_and_sleep(end);
            done.store(true, Ordering::Relaxed);
            kept
        });
        scope.spawn(|| {
            set_name(c"st-flipper");
            let mut next = host::monotonic_ns();
            let mut cpu = 0;
            while !done.load(Ordering::Relaxed) {
                let tid = sleeper_tid.load(Ordering::Relaxed);
                if tid != 0 {
                    // SAFETY: cpu_set_t is plain data set up by CPU_ZERO/CPU_SET.
                    unsafe {
                        let mut set: libc::cpu_set_t = std::mem::zeroed();
                        libc::CPU_SET(cpu, &mut set);
                        libc::sched_setaffinity(tid, std::mem::size_of_val(&set), &set);
                    }
                    cpu = 1 - cpu;
                }
                next += FLIP_NS;
                sleep_until(next);
            }
        });
        let kept = sleeper.join().unwrap();
        (sleeper_tid.load(Ordering::Relaxed) as u32, kept)
    })
}

fn sleeps_are_not_waits(config: ProbeConfig) {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut storage = ObjectStorage::default();
    let mut session = Session::start(&config, &mut storage).expect("probes load");
    let (tid, kept) = sleeper_beside_busy_cpus(host::monotonic_ns() + RUN_NS);
    let records = session.poll(Duration::from_millis(100));
    assert!(
        kept.sleeps >= RUN_NS / (SLEEP_NS + WORK_NS) / 2,
        "the sleeper slept only {} times: {kept:?}",
        kept.sleeps
    );
    let limit = kept.latest_wakeup_ns.max(kept.longest_work_gap_ns) + TOLERANCE_NS;
    let waits: Vec<_> = runq_waits_of(&records, tid)
        .into_iter()
        .filter(|w| (kept.began_ns..=kept.ended_ns).contains(&w.ts_ns))
        .collect();
    let too_long: Vec<_> = waits.iter().filter(|w| w.wait_ns > limit).collect();
    assert!(
        too_long.is_empty(),
        "{} of the sleeper's {} reported waits are longer than it was ever kept off its CPU \
         ({kept:?}, +{TOLERANCE_NS} ns): {too_long:#?}",
        too_long.len(),
        waits.len()
    );
}

#[test]
fn tp_btf_a_sleeper_moved_while_asleep_waits_only_from_its_wakeup() {
    sleeps_are_not_waits(config(AttachMode::TpBtf));
}

#[test]
fn raw_tp_a_sleeper_moved_while_asleep_waits_only_from_its_wakeup() {
    sleeps_are_not_waits(config(AttachMode::RawTp));
}
