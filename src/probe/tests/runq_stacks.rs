//! Real-kernel test of the holder's stacks (root, as in CI): while a task
//! waits on a CPU's run queue behind another, the sampler's ticks on that
//! CPU keep the running task's stacks, a few per wait; a run-queue stall
//! behind a real-time task busy in the kernel comes with that culprit's
//! kernel stack, taken during the wait.

use std::io::Read;
use std::time::{Duration, Instant};

use super::migration::{RtBudget, MS};
use super::*;
use super::{
    config, pin_to, runq_waits_of, set_name, sleep_until, until_clean, Contaminated, ScratchCgroup,
    CPU, ONE_AT_A_TIME,
};
use crate::abi::KIND_SAMPLE;
use crate::event;
use crate::host;

/// How long the two tasks take turns on the CPU.
const TURNS: Duration = Duration::from_millis(500);

/// The sampler's why bit for a tick that found a task waiting behind the running one.
const SAMPLE_WHY_RUNQ: u32 = 2;
/// Stacks one holder's stretch keeps at most while tasks wait (bpf/sampler.bpf.h).
const RUNQ_SAMPLES_MAX: usize = 4;

/// The sample records in `records` (raw ring-buffer bytes).
fn samples_in(mut records: &[u8]) -> Vec<skel::types::sample_event> {
    let mut out = Vec::new();
    while records.len() >= std::mem::size_of::<skel::types::record_header>() {
        let mut header = skel::types::record_header::default();
        plain::copy_from_bytes(&mut header, records).expect("a record header");
        let size = usize::from(header.size).min(records.len());
        if header.kind == KIND_SAMPLE {
            let mut sample = skel::types::sample_event::default();
            plain::copy_from_bytes(&mut sample, &records[..size]).expect("a sample record");
            out.push(sample);
        }
        records = &records[size.max(1)..];
    }
    out
}

fn spin_for_turns() {
    let end = Instant::now() + TURNS;
    while Instant::now() < end {
        std::hint::spin_loop();
    }
}

/// Two busy tasks of a cgroup of ours pinned to one CPU: each waits out the
/// other's slices, and the ticks meanwhile keep the holder's stacks, with
/// the run-queue why bit: each of the two, however short their turns.
fn holders_stacks_are_kept(attach: AttachMode) {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = config(attach);
    let cgroup = ScratchCgroup::create();
    let mut storage = ObjectStorage::default();
    let mut session = Session::start(&config, &mut storage).expect("probes load");

    let mut records = Vec::new();
    let done = std::thread::scope(|scope| {
        // Named before the fork: the child has the name from its first tick in the cgroup.
        let tasks = [(); 2].map(|_| {
            scope.spawn(|| {
                set_name(c"st-turns");
                cgroup.run_child_on_cpu(CPU, spin_for_turns)
            })
        });
        let deadline = Instant::now() + TURNS + Duration::from_millis(300);
        while Instant::now() < deadline {
            records.extend(session.poll(Duration::from_millis(50)));
        }
        tasks.map(|t| t.join().unwrap())
    });
    records.extend(session.poll(Duration::from_millis(10)));
    drop(session);
    assert_eq!(
        done,
        [true, true],
        "a child in {} failed",
        cgroup.dir.display()
    );

    let ours: Vec<_> = samples_in(&records)
        .into_iter()
        .filter(|s| s.task.cgroup == cgroup.id() && s.why & SAMPLE_WHY_RUNQ != 0)
        .collect();
    // 500 ms of turns of a tick or a few: a stack at the first tick of each.
    assert!(ours.len() >= 20, "{} holder samples", ours.len());
    let mut holders: Vec<u32> = ours.iter().map(|s| s.task.tid).collect();
    holders.sort_unstable();
    holders.dedup();
    assert_eq!(
        holders.len(),
        2,
        "both turn-takers hold the CPU while the other waits, yet stacks were kept of {holders:?}"
    );
    for s in &ours {
        assert_eq!(s.hdr.cpu, CPU as u32);
        assert_eq!(event::comm_str(&s.task.comm), "st-turns");
        // Busy in user code: the user stack has at least the interrupted address.
        assert!(s.ustack_len >= 8 || s.kstack_len >= 8, "no stack: {s:?}");
    }
    assert!(ours.iter().any(|s| s.ustack_len >= 8), "no user stack");
}

#[test]
fn tp_btf_ticks_keep_the_holders_stacks_while_a_task_waits() {
    holders_stacks_are_kept(AttachMode::TpBtf);
}

#[test]
fn raw_tp_ticks_keep_the_holders_stacks_while_a_task_waits() {
    holders_stacks_are_kept(AttachMode::RawTp);
}

/// Rounds of the stall test, ROUND_NS apart: the hog holds the CPU for HOLD_NS from each
/// round's start, reading /dev/zero (in the kernel, clearing the buffer), and the waiter wakes
/// WAKE_AFTER_NS in and waits the rest, at least STALL_NS.
const ROUNDS: u64 = 3;
const ROUND_NS: u64 = 200 * MS;
const HOLD_NS: u64 = 24 * MS;
const WAKE_AFTER_NS: u64 = 2 * MS;
const STALL_NS: u64 = 16 * MS;

/// Runs the rounds from `first`; returns the hog's and the waiter's thread ids.
fn stall_behind_a_kernel_hog(first: u64) -> (u32, u32) {
    let budget = RtBudget::create();
    std::thread::scope(|scope| {
        let hog = scope.spawn(|| {
            set_name(c"st-kernel-hog");
            pin_to(CPU);
            budget.join_as_real_time(10);
            let mut zero = std::fs::File::open("/dev/zero").unwrap();
            let mut buf = vec![0u8; 1 << 20];
            for round in 0..ROUNDS {
                let start = first + round * ROUND_NS;
                sleep_until(start);
                while host::monotonic_ns() < start + HOLD_NS {
                    zero.read_exact(&mut buf).unwrap();
                }
            }
            // SAFETY: gettid has no preconditions.
            unsafe { libc::gettid() as u32 }
        });
        let waiter = scope.spawn(|| {
            set_name(c"st-waiter");
            pin_to(CPU);
            for round in 0..ROUNDS {
                sleep_until(first + round * ROUND_NS + WAKE_AFTER_NS);
            }
            // SAFETY: gettid has no preconditions.
            unsafe { libc::gettid() as u32 }
        });
        (hog.join().unwrap(), waiter.join().unwrap())
    })
}

fn stall_comes_with_its_culprits_stack(config: &ProbeConfig) -> Result<(), Contaminated> {
    let mut storage = ObjectStorage::default();
    let mut session = Session::start(config, &mut storage).expect("probes load");
    let (hog, waiter) = stall_behind_a_kernel_hog(host::monotonic_ns() + 50 * MS);
    let records = session.poll(Duration::from_millis(100));
    drop(session);

    let stalls: Vec<_> = runq_waits_of(&records, waiter)
        .into_iter()
        .filter(|w| w.wait_ns >= STALL_NS)
        .collect();
    if stalls.len() < ROUNDS as usize || stalls.iter().any(|w| w.ran.tid != hog) {
        return Err(Contaminated(format!(
            "expected {ROUNDS} stalls of the waiter behind st-kernel-hog: {stalls:#?}"
        )));
    }
    let holder_samples: Vec<_> = samples_in(&records)
        .into_iter()
        .filter(|s| s.task.tid == hog && s.why & SAMPLE_WHY_RUNQ != 0)
        .collect();
    for stall in &stalls {
        let during = stall.ts_ns - stall.wait_ns..=stall.ts_ns;
        let in_stall = holder_samples
            .iter()
            .filter(|s| during.contains(&s.hdr.ts))
            .count();
        // Bounded: one stretch of the hog, at least 16 ms (a dozen ticks).
        assert!(
            in_stall <= RUNQ_SAMPLES_MAX,
            "{in_stall} stacks of st-kernel-hog kept in one {:.1} ms stall",
            stall.wait_ns as f64 / 1e6
        );
        let kernel_stacks = holder_samples
            .iter()
            .filter(|s| during.contains(&s.hdr.ts) && s.kstack_len >= 8)
            .count();
        assert!(
            kernel_stacks >= 1,
            "a {:.1} ms stall behind st-kernel-hog without its kernel stack; \
             the hog's run-queue samples (ts, kstack bytes): {:?}",
            stall.wait_ns as f64 / 1e6,
            holder_samples
                .iter()
                .map(|s| (s.hdr.ts, s.kstack_len))
                .collect::<Vec<_>>()
        );
    }
    Ok(())
}

fn a_stalls_culprit_comes_with_its_kernel_stack(config: ProbeConfig) {
    until_clean(|| stall_comes_with_its_culprits_stack(&config));
}

#[test]
fn tp_btf_a_runq_stalls_culprit_comes_with_its_kernel_stack() {
    a_stalls_culprit_comes_with_its_kernel_stack(config(AttachMode::TpBtf));
}

#[test]
fn raw_tp_a_runq_stalls_culprit_comes_with_its_kernel_stack() {
    a_stalls_culprit_comes_with_its_kernel_stack(config(AttachMode::RawTp));
}

#[test]
fn sampled_calls_a_runq_stalls_culprit_comes_with_its_kernel_stack() {
    a_stalls_culprit_comes_with_its_kernel_stack(ProbeConfig {
        syscalls: SyscallMode::Sampled,
        ..config(AttachMode::TpBtf)
    });
}
