//! Real-kernel tests of CFS quota throttles that no switch-out shows where the wait ends: a
//! throttled wait moved to another CPU (an affinity change, as load balancing moves waiting
//! tasks) ends on a CPU where its group was not throttled; and a task that wakes into a
//! group whose quota is spent, on a CPU where the group never ran, is throttled at that
//! enqueue (before 6.18's task-based throttling no task of the group leaves a CPU for it).
//! Either wait is the quota's, not the idle CPU's nor a neighbour's.

use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::time::Duration;

use super::migration::MS;
use super::*;
use super::{
    config, reap, runq_waits_of, set_name, sleep_until, thread_cpu_ns, until_clean, Contaminated,
};
use crate::event::RunqWait;
use crate::host;
use crate::probe::features::KernelRelease;

const QUOTA_US: u64 = 10_000;
const PERIOD_US: u64 = 100_000;
/// A wait at least this long of a quota'd task here is a throttle: nothing else of ours
/// runs on its CPU, and the quota stops it for 90 ms of every 100.
const LONG_WAIT_NS: u64 = 30 * MS;

/// The moved test: the quota'd spinner's CPU alternates this often, out of step with the
/// period, so the moves fall at every point of a throttle.
const FLIP_NS: u64 = 130 * MS;
const FLIPS: u64 = 10;
/// The first flips only let the spinner run on both CPUs (a CPU where the group never ran
/// throttles it at the move's enqueue, which this test is not about); waits ending after
/// them are judged.
const PRIMING_FLIPS: u64 = 2;
/// Moved long waits a clean attempt must have, to say anything.
const MIN_MOVED: usize = 3;

/// When the forked spinner stops (set before the fork: the child has no other input).
static SPIN_UNTIL: AtomicU64 = AtomicU64::new(0);

fn spin_until_deadline() {
    set_name(c"st-quota-moved");
    let end = SPIN_UNTIL.load(Ordering::Relaxed);
    while host::monotonic_ns() < end {
        std::hint::spin_loop();
    }
}

/// Pin process `pid` to `cpu`.
fn pin_process(pid: libc::pid_t, cpu: usize) {
    // SAFETY: cpu_set_t is plain data set up by CPU_ZERO/CPU_SET.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(pid, std::mem::size_of_val(&set), &set)
    };
    assert_eq!(
        rc,
        0,
        "pin {pid} to CPU {cpu}: {}",
        std::io::Error::last_os_error()
    );
}

/// The long waits of `tid` that ended after `judged_from`; Contaminated if one of them that
/// no throttle explains was spent behind a task not ours.
fn long_waits_after(
    records: &[u8],
    tid: u32,
    judged_from: u64,
) -> Result<Vec<RunqWait>, Contaminated> {
    let waits: Vec<RunqWait> = runq_waits_of(records, tid)
        .into_iter()
        .filter(|w| w.wait_ns >= LONG_WAIT_NS && w.ts_ns >= judged_from)
        .collect();
    let ours = std::process::id();
    if let Some(w) = waits.iter().find(|w| {
        w.throttle.is_none()
            && w.ran.tid != 0
            && w.ran.pid != ours
            && !w.ran.comm.starts_with("st-")
    }) {
        return Err(Contaminated(format!("waited behind {}", w.ran.comm)));
    }
    Ok(waits)
}

/// Each wait in `waits` is a throttle of the cgroup `quota`.
fn assert_all_throttled_by(waits: &[RunqWait], quota: u64, what: &str) {
    let wrong: Vec<&RunqWait> = waits
        .iter()
        .filter(|w| w.throttle.is_none_or(|t| t.cgroup != quota))
        .collect();
    assert!(
        wrong.is_empty(),
        "{} of {} long waits of {what} are not throttles of cgroup {quota}: {wrong:#?}",
        wrong.len(),
        waits.len()
    );
}

fn moved_throttles_once(config: &ProbeConfig) -> Result<(), Contaminated> {
    let quota = ScratchCgroup::create();
    quota.set_quota(QUOTA_US, PERIOD_US);
    let mut storage = ObjectStorage::default();
    let mut session = Session::start(config, &mut storage).expect("probes load");
    let start = host::monotonic_ns();
    SPIN_UNTIL.store(start + FLIPS * FLIP_NS, Ordering::Relaxed);
    let child = quota
        .fork_child_on_cpu(1, spin_until_deadline)
        .expect("fork the quota'd spinner");
    let mut records = Vec::new();
    for flip in 1..FLIPS {
        sleep_until(start + flip * FLIP_NS);
        pin_process(child, (flip as usize + 1) % 2);
        records.extend(session.poll(Duration::ZERO));
    }
    assert!(reap(child), "the quota'd spinner failed");
    records.extend(session.poll(Duration::from_millis(100)));

    let waits = long_waits_after(&records, child as u32, start + PRIMING_FLIPS * FLIP_NS)?;
    let moved = waits.iter().filter(|w| w.migrated.is_some()).count();
    assert!(
        moved >= MIN_MOVED,
        "{moved} long waits of the quota'd spinner moved between CPUs in {FLIPS} flips of \
         {FLIP_NS} ns under {QUOTA_US}/{PERIOD_US} us: {waits:#?}"
    );
    assert_all_throttled_by(&waits, quota.id(), "the moved quota'd spinner");
    Ok(())
}

fn moved_throttled_waits_are_throttles(config: ProbeConfig) {
    until_clean(|| moved_throttles_once(&config));
}

#[test]
fn tp_btf_a_throttled_wait_moved_to_another_cpu_is_a_throttle() {
    moved_throttled_waits_are_throttles(config(AttachMode::TpBtf));
}

#[test]
fn raw_tp_a_throttled_wait_moved_to_another_cpu_is_a_throttle() {
    moved_throttled_waits_are_throttles(config(AttachMode::RawTp));
}

/// The enqueue test: each round makes a new cgroup with the quota (a group's CPU-local
/// runtime starts at nothing, so its first task to wake on a CPU needs the spent global
/// pool); the sleeper on CPU 1 is moved into it while it sleeps, at JOIN; a spender then
/// spends the quota on CPU 0; the sleeper wakes at WAKE to work WORK and says how long it
/// was kept off its CPU.
const ROUND_NS: u64 = 250 * MS;
const ROUNDS: u64 = 5;
const JOIN: u64 = 5 * MS;
/// Late enough for a spender whose fork took tens of ms (under emulation) to have spent the
/// quota, early enough that the period's refill (100 ms after it began spending) is still due.
const WAKE: u64 = 60 * MS;
const WORK: u64 = 200_000;
/// The spender spins this long each round: past the throttle the sleeper waits out.
const SPEND: u64 = 150 * MS;
/// Rounds in which the quota must hold the sleeper, where the kernel throttles at enqueue.
const MIN_HELD: usize = 3;
/// From 6.18 (task-based throttling) a task woken into a spent quota runs until it returns
/// to user space, and one that works a moment and sleeps again is never held (another test,
/// `quota_throttles_the_waiter`, covers a throttle there).
const TASK_BASED_THROTTLING: KernelRelease = KernelRelease(6, 18, 0);

/// The first round's start, and the pipe the sleeper writes how long it was kept off its CPU to (set before the
/// forks: the children have no other input).
static FIRST_ROUND: AtomicU64 = AtomicU64::new(0);
static KEPT_PIPE: AtomicI32 = AtomicI32::new(-1);

fn spend_the_quota() {
    set_name(c"st-spender");
    let end = host::monotonic_ns() + SPEND;
    while host::monotonic_ns() < end {
        std::hint::spin_loop();
    }
}

fn sleep_and_wake_each_round() {
    set_name(c"st-sleeper");
    let first = FIRST_ROUND.load(Ordering::Relaxed);
    let pipe = KEPT_PIPE.load(Ordering::Relaxed);
    for round in 0..ROUNDS {
        let due = first + round * ROUND_NS + WAKE;
        sleep_until(due);
        let woke = host::monotonic_ns();
        let cpu_until = thread_cpu_ns() + WORK;
        while thread_cpu_ns() < cpu_until {
            std::hint::spin_loop();
        }
        let worked = host::monotonic_ns() - woke;
        let kept = (woke - due).max(worked.saturating_sub(WORK));
        // SAFETY: write reads the 8 bytes of `kept`, alive here.
        unsafe { libc::write(pipe, (&raw const kept).cast(), 8) };
    }
}

/// A pipe: (read end, write end).
fn pipe() -> (std::fs::File, std::os::fd::OwnedFd) {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0; 2];
    // SAFETY: pipe writes two new descriptors, which we then own.
    unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0, "pipe");
        (
            std::fs::File::from_raw_fd(fds[0]),
            OwnedFd::from_raw_fd(fds[1]),
        )
    }
}

fn enqueue_throttles_once(config: &ProbeConfig) -> Result<(), Contaminated> {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    let own = ScratchCgroup::create();
    let mut storage = ObjectStorage::default();
    let mut session = Session::start(config, &mut storage).expect("probes load");
    let first = host::monotonic_ns() + 50 * MS;
    let (mut kept_reader, write_end) = pipe();
    FIRST_ROUND.store(first, Ordering::Relaxed);
    KEPT_PIPE.store(write_end.as_raw_fd(), Ordering::Relaxed);
    let sleeper = own
        .fork_child_on_cpu(1, sleep_and_wake_each_round)
        .expect("fork the sleeper");
    drop(write_end);
    let mut groups = Vec::new();
    let mut records = Vec::new();
    let mut joined_in_time = Vec::new();
    for round in 0..ROUNDS {
        let start = first + round * ROUND_NS;
        sleep_until(start);
        let group = ScratchCgroup::create();
        group.set_quota(QUOTA_US, PERIOD_US);
        sleep_until(start + JOIN);
        group.adopt(sleeper);
        // Under emulation a step here can take tens of ms: a sleeper that joined its group
        // only after it woke waited in its last round's group, so its round is not judged.
        if host::monotonic_ns() < start + WAKE {
            joined_in_time.push(round);
        }
        let spender = group
            .fork_child_on_cpu(0, spend_the_quota)
            .expect("fork the spender");
        records.extend(session.poll(Duration::ZERO));
        assert!(reap(spender), "the spender failed");
        groups.push(group);
    }
    assert!(reap(sleeper), "the sleeper failed");
    records.extend(session.poll(Duration::from_millis(100)));
    let mut bytes = Vec::new();
    kept_reader
        .read_to_end(&mut bytes)
        .expect("the sleeper's measures");
    let kept: Vec<u64> = bytes
        .chunks_exact(8)
        .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(
        kept.len(),
        ROUNDS as usize,
        "the sleeper's time off its CPU per round"
    );

    let waits = long_waits_after(&records, sleeper as u32, first)?;
    let held: Vec<u64> = joined_in_time
        .iter()
        .copied()
        .filter(|&r| kept[r as usize] >= LONG_WAIT_NS)
        .collect();
    for &round in &joined_in_time {
        let start = first + round * ROUND_NS;
        let in_round: Vec<RunqWait> = waits
            .iter()
            .filter(|w| w.ts_ns >= start && w.ts_ns < start + ROUND_NS)
            .cloned()
            .collect();
        if held.contains(&round) {
            assert!(
                !in_round.is_empty(),
                "round {round}: the sleeper was kept off its CPU {} ms and no long wait says \
                 so",
                kept[round as usize] / MS
            );
            let group = groups[round as usize].id();
            assert_all_throttled_by(&in_round, group, "the sleeper");
        } else {
            assert!(
                in_round.is_empty(),
                "round {round}: the sleeper was kept off its CPU {} ms, yet long waits are \
                 reported: {in_round:#?}",
                kept[round as usize] / MS
            );
        }
    }
    // Every round set up in time was judged; too few held ones say nothing of enqueue
    // throttles. Where the kernel throttles at enqueue, that is a spender that started
    // spending late (a slow fork: under emulation, tens of ms), so the attempt is retried.
    if held.len() < MIN_HELD && config.features.release < TASK_BASED_THROTTLING {
        return Err(Contaminated(format!(
            "of the rounds whose sleeper joined its group in time, {joined_in_time:?}, the \
             quota held it in {held:?} only (kept off its CPU {kept:?} ns): it wakes {} ms into \
             each round, after the spender spent the new group's quota",
            WAKE / MS
        )));
    }
    Ok(())
}

fn throttles_at_enqueue_are_throttles(config: ProbeConfig) {
    until_clean(|| enqueue_throttles_once(&config));
}

#[test]
fn tp_btf_a_task_woken_into_a_spent_quota_waits_for_the_quota() {
    throttles_at_enqueue_are_throttles(config(AttachMode::TpBtf));
}

#[test]
fn raw_tp_a_task_woken_into_a_spent_quota_waits_for_the_quota() {
    throttles_at_enqueue_are_throttles(config(AttachMode::RawTp));
}
