//! Real-kernel tests of CFS quota throttles that no switch-out shows where the wait ends: a
//! throttled wait moved to another CPU (an affinity change, as load balancing moves waiting
//! tasks) ends on a CPU where its group was not throttled; and a task that wakes into a
//! group whose quota is spent, on a CPU where the group never ran, is throttled at that
//! enqueue (before 6.18's task-based throttling no task of the group leaves a CPU for it;
//! from 6.18 the throttle takes it off its CPU as it returns to user space). Either wait is
//! the quota's, not the idle CPU's nor a neighbour's.

use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::migration::MS;
use super::*;
use super::{
    cgroup_dir_of, config, reap, runq_waits_of, set_name, sleep_until, thread_cpu_ns, until_clean,
    Contaminated,
};
use crate::event::RunqWait;
use crate::host;

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

/// The enqueue test, timed by the quota itself. Each round makes a new cgroup with the quota
/// (a group's runtime on a CPU starts at nothing, so its first task to wake on a CPU needs the
/// global pool) and moves the sleeper in while it sleeps on CPU 1, blocked on a pipe. A
/// spender then spins in the group on CPU 0 (pinned before it joins: runtime its group took on
/// CPU 1 would stay there) and tells the test when its first throttle ended: a refill of the
/// quota (cpu.stat is no clock for this: its throttle counts move at the refill, as the pool
/// fills again). WAKE_AFTER_NS later the spender has spent the period's quota and is throttled
/// again, and the test wakes the sleeper on CPU 1, where its group never ran. The sleeper says
/// how long it was kept off its CPU, the spender when the throttle the wake fell in ended. No
/// step waits a fixed time for another: a cgroup move waits for an RCU grace period, tens of
/// ms under emulation.
const ROUNDS: usize = 5;
/// The sleeper's work once woken, in CPU time.
const WORK_NS: u64 = 200_000;
/// A jump of the spinning spender's clock this long is a throttle: nothing else of ours runs
/// on CPU 0, and the quota stops it for most of every period.
const THROTTLE_GAP_NS: u64 = 40 * MS;
/// From a refill to the wake: the spender has spent the quota (10 ms, and at most a tick
/// more) and is throttled until the next refill, 100 ms after the last.
const WAKE_AFTER_NS: u64 = 40 * MS;
/// A wake that left less of its throttle than a long wait and this (the test or the spender
/// kept off their CPUs) says nothing.
const WAKE_MARGIN_NS: u64 = 10 * MS;
/// The spender gives up finding a throttle after this long (CPU 0 too busy for the quota to
/// stop it).
const GIVE_UP_NS: u64 = 3_000 * MS;

/// The pipes the children write to (the spender's, new each round, and the sleeper's reports)
/// and the one the sleeper is woken through (read end, and the write end it closes), set
/// before each fork: the children have no other input.
static SPENDER_WRITE: AtomicI32 = AtomicI32::new(-1);
static REPORT_WRITE: AtomicI32 = AtomicI32::new(-1);
static WAKE_READ: AtomicI32 = AtomicI32::new(-1);
static WAKE_WRITE: AtomicI32 = AtomicI32::new(-1);

/// Write `words` to the pipe `fd` (a forked child: no allocation, nothing to unwind).
fn send<const N: usize>(fd: &AtomicI32, words: [u64; N]) {
    // SAFETY: write reads the 8 * N bytes of `words`, alive here.
    unsafe { libc::write(fd.load(Ordering::Relaxed), words.as_ptr().cast(), 8 * N) };
}

/// Spin until a throttle ends (the clock jumps THROTTLE_GAP_NS or more between two reads):
/// [its start, its end], or None at `give_up`.
fn spin_through_a_throttle(give_up: u64) -> Option<[u64; 2]> {
    let mut last = host::monotonic_ns();
    loop {
        let now = host::monotonic_ns();
        if now - last >= THROTTLE_GAP_NS {
            return Some([last, now]);
        }
        if now >= give_up {
            return None;
        }
        last = now;
    }
}

/// In the quota'd group on CPU 0: send when a throttle ended (0: none came in time), then
/// spin through the next and send when it began and ended. Spinning on, the spender keeps the
/// quota spent: one gone early would hand its CPU's unspent runtime back to the pool, for the
/// sleeper's group to take.
fn spend_the_quota() {
    set_name(c"st-spender");
    let give_up = host::monotonic_ns() + GIVE_UP_NS;
    let Some([_, refill]) = spin_through_a_throttle(give_up) else {
        return send(&SPENDER_WRITE, [0]);
    };
    send(&SPENDER_WRITE, [refill]);
    let next = spin_through_a_throttle(give_up + GIVE_UP_NS);
    send(&SPENDER_WRITE, next.unwrap_or_default());
}

/// Report when it settled; then sleep on the pipe until the test writes when it wakes us, work
/// WORK_NS, and report [that, when we ran again, when the work was done]; until the pipe ends.
fn sleep_until_woken_each_round() {
    set_name(c"st-sleeper");
    // SAFETY: closes this child's copy of the write end, so the pipe ends with the test's.
    unsafe { libc::close(WAKE_WRITE.load(Ordering::Relaxed)) };
    // In its first cgroup and on its CPU: the test may move it now.
    send(&REPORT_WRITE, [host::monotonic_ns()]);
    loop {
        let mut woken = 0u64;
        // SAFETY: read writes at most the 8 bytes of `woken`, alive here.
        let read = unsafe {
            libc::read(
                WAKE_READ.load(Ordering::Relaxed),
                (&raw mut woken).cast(),
                8,
            )
        };
        if read != 8 {
            return;
        }
        let woke = host::monotonic_ns();
        let cpu_until = thread_cpu_ns() + WORK_NS;
        while thread_cpu_ns() < cpu_until {
            std::hint::spin_loop();
        }
        send(&REPORT_WRITE, [woken, woke, host::monotonic_ns()]);
    }
}

/// One round as the clocks of the test, the spender and the sleeper saw it.
#[derive(Debug)]
struct Round {
    cgroup: u64,
    /// When the spender's first throttle ended, and when the test woke the sleeper.
    refill_ns: u64,
    woken_ns: u64,
    /// The spender's next throttle.
    throttled_ns: [u64; 2],
    /// When the sleeper ran again, and when its work was done.
    woke_ns: u64,
    done_ns: u64,
}

impl Round {
    /// How long the sleeper was kept off its CPU: from the wake until it ran, or beyond its
    /// CPU time while it worked.
    fn kept_ns(&self) -> u64 {
        (self.woke_ns - self.woken_ns).max((self.done_ns - self.woke_ns).saturating_sub(WORK_NS))
    }

    /// How much of the spender's throttle was left at the wake (0: the wake was outside it).
    fn throttle_left_ns(&self) -> u64 {
        let [start, end] = self.throttled_ns;
        if (start..end).contains(&self.woken_ns) {
            end - self.woken_ns
        } else {
            0
        }
    }
}

/// A forked child, killed and reaped if the test leaves before it is reaped.
struct Child(libc::pid_t);

impl Child {
    /// Wait for it; whether it exited 0.
    fn reap(self) -> bool {
        let ok = reap(self.0);
        std::mem::forget(self);
        ok
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // SAFETY: kill signals our own child, not yet reaped.
        unsafe { libc::kill(self.0, libc::SIGKILL) };
        reap(self.0);
    }
}

/// A pipe: (read end, write end).
fn pipe() -> (std::fs::File, std::fs::File) {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: pipe writes two new descriptors, which we then own.
    unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0, "pipe");
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    }
}

/// Read N words from `pipe`; None at its end.
fn receive<const N: usize>(pipe: &mut std::fs::File) -> Option<[u64; N]> {
    use std::io::Read;
    let mut words = [0u64; N];
    let mut bytes = vec![0u8; 8 * N];
    pipe.read_exact(&mut bytes).ok()?;
    for (word, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
        *word = u64::from_ne_bytes(chunk.try_into().unwrap());
    }
    Some(words)
}

/// Wait until task `pid` is blocked and off its run queue. A sleeper moved while still queued,
/// after its report and before it blocks again, would be enqueued in its new group, which then
/// takes a slice of the quota to CPU 1 and keeps a millisecond of it there when the sleeper
/// blocks: enough for its wake to run at once.
fn wait_until_off_its_queue(pid: libc::pid_t) {
    let wchan = format!("/proc/{pid}/wchan");
    let deadline = Instant::now() + Duration::from_secs(5);
    // The kernel names where a task sleeps only once it is off its run queue (from 5.16).
    loop {
        let at = std::fs::read_to_string(&wchan).unwrap_or_else(|e| panic!("read {wchan}: {e}"));
        if !matches!(at.trim(), "" | "0") {
            return;
        }
        assert!(Instant::now() < deadline, "task {pid} did not block in 5 s");
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// One round: the sleeper moved into a new quota'd group, a spender that spends its quota on
/// CPU 0, the wake in the spender's throttle.
fn enqueue_round(
    config: &ProbeConfig,
    sleeper: libc::pid_t,
    wake: &mut std::fs::File,
    reports: &mut std::fs::File,
) -> (ScratchCgroup, Round) {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let group = ScratchCgroup::create();
    group.set_quota(QUOTA_US, PERIOD_US);
    wait_until_off_its_queue(sleeper);
    group.adopt(sleeper);
    assert_eq!(
        cgroup_dir_of(&sleeper.to_string(), config),
        group.dir,
        "the sleeper's cgroup"
    );
    let (mut from_spender, spender_write) = pipe();
    SPENDER_WRITE.store(spender_write.as_raw_fd(), Ordering::Relaxed);
    let spender = Child(
        group
            .fork_child_on_cpu(0, spend_the_quota)
            .expect("fork the spender"),
    );
    drop(spender_write);
    let [refill_ns] = receive(&mut from_spender).expect("the spender's refill");
    let mut woken_ns = 0;
    if refill_ns != 0 {
        sleep_until(refill_ns + WAKE_AFTER_NS);
        woken_ns = host::monotonic_ns();
        wake.write_all(&woken_ns.to_ne_bytes())
            .expect("wake the sleeper");
    }
    let throttled_ns = receive(&mut from_spender).unwrap_or_default();
    assert!(spender.reap(), "the spender failed");
    let [woken, woke_ns, done_ns] = if refill_ns != 0 {
        receive(reports).expect("the sleeper's report")
    } else {
        [0; 3]
    };
    assert_eq!(woken, woken_ns, "the sleeper's report is of this round");
    let round = Round {
        cgroup: group.id(),
        refill_ns,
        woken_ns,
        throttled_ns,
        woke_ns,
        done_ns,
    };
    (group, round)
}

fn enqueue_throttles_once(config: &ProbeConfig) -> Result<(), Contaminated> {
    use std::os::fd::AsRawFd;
    let own = ScratchCgroup::create();
    let mut storage = ObjectStorage::default();
    let mut session = Session::start(config, &mut storage).expect("probes load");
    let (wake_read, mut wake) = pipe();
    let (mut reports, report_write) = pipe();
    WAKE_READ.store(wake_read.as_raw_fd(), Ordering::Relaxed);
    WAKE_WRITE.store(wake.as_raw_fd(), Ordering::Relaxed);
    REPORT_WRITE.store(report_write.as_raw_fd(), Ordering::Relaxed);
    // Before the sleeper: dropped (removed) after it is gone.
    let mut groups = Vec::new();
    let sleeper = Child(
        own.fork_child_on_cpu(1, sleep_until_woken_each_round)
            .expect("fork the sleeper"),
    );
    drop((wake_read, report_write));
    let [began] = receive(&mut reports).expect("the sleeper settled");
    let mut rounds = Vec::new();
    let mut records = Vec::new();
    for _ in 0..ROUNDS {
        let (group, round) = enqueue_round(config, sleeper.0, &mut wake, &mut reports);
        records.extend(session.poll(Duration::ZERO));
        groups.push(group);
        let (found, left) = (round.refill_ns != 0, round.throttle_left_ns());
        rounds.push(round);
        if !found || left < LONG_WAIT_NS + WAKE_MARGIN_NS {
            return Err(Contaminated(format!(
                "the spender found no throttle in {} ms, or the wake left less of it than a \
                 long wait and {} ms: {rounds:#?}",
                GIVE_UP_NS / MS,
                WAKE_MARGIN_NS / MS
            )));
        }
    }
    drop(wake);
    let sleeper_tid = sleeper.0 as u32;
    assert!(sleeper.reap(), "the sleeper failed");
    records.extend(session.poll(Duration::from_millis(100)));
    eprintln!(
        "enqueue throttles: the sleeper woken with {:?} ms of the quota's throttle left, kept \
         off its CPU {:?} ms",
        rounds
            .iter()
            .map(|r| r.throttle_left_ns() / MS)
            .collect::<Vec<_>>(),
        rounds.iter().map(|r| r.kept_ns() / MS).collect::<Vec<_>>()
    );

    // Every round is judged the same on every kernel: the quota holds the woken sleeper
    // until the refill, at its enqueue before 6.18 and at its return to user space from.
    let waits = long_waits_after(&records, sleeper_tid, began)?;
    for (n, round) in rounds.iter().enumerate() {
        let kept = round.kept_ns();
        assert!(
            kept >= LONG_WAIT_NS,
            "round {n}: woken into a group whose quota was spent for {} ms more, on a CPU \
             where the group never ran, the sleeper was kept off its CPU {} ms only: \
             {rounds:#?}",
            round.throttle_left_ns() / MS,
            kept / MS
        );
        let in_round: Vec<RunqWait> = waits
            .iter()
            .filter(|w| w.ts_ns >= round.woken_ns && w.ts_ns <= round.done_ns)
            .cloned()
            .collect();
        assert!(
            !in_round.is_empty(),
            "round {n}: the sleeper was kept off its CPU {} ms and no long wait says so",
            kept / MS
        );
        assert_all_throttled_by(&in_round, round.cgroup, "the sleeper");
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
