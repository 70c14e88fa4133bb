//! Real-kernel tests of waits that move between CPUs: a waiter wakes on CPU 0 behind a
//! real-time hog, is moved to CPU 1 by an affinity change while it waits, and runs only when
//! CPU 1's own real-time hog stops. Its whole wait must be counted (the scheduler restarts its
//! wait stamp on the move), and the hog of CPU 0, which held it longer, named. The hogs spin
//! at most 40 ms per 100 ms round, pinned, in a cgroup with a real-time budget.

use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use super::*;
use super::{
    config, pin_to, runq_waits_of, set_name, sleep_until, spin_until, until_clean,
    without_sched_info, Contaminated,
};
use crate::event::RunqWait;
use crate::host;

const ROUNDS: u64 = 5;
const PERIOD_NS: u64 = 100_000_000;
pub(super) const MS: u64 = 1_000_000;
/// Relative to each round's wakeup time: the hog of CPU 0 spins over the wakeup until
/// HOG0_END; the hog of CPU 1 spins from HOG1_START, moves the waiter at MOVE and stops at
/// HOG1_END. So the waiter waits MOVE on CPU 0, then HOG1_END - MOVE on CPU 1.
const HOG0_START_BEFORE: u64 = 5 * MS;
const HOG0_END: u64 = 35 * MS;
const HOG1_START: u64 = 10 * MS;
const MOVE: u64 = 25 * MS;
const HOG1_END: u64 = 40 * MS;
/// How far stalltop's wait may be from the waiter's own lateness (timer slack, the moments
/// each side reads its clock).
const WAIT_TOLERANCE_NS: u64 = 2 * MS;
/// Rounds that must come out right in a clean attempt (one may lose its move to timing).
const ROUNDS_RIGHT: usize = ROUNDS as usize - 1;

/// Where a round's waiter woke up and ran.
#[derive(Debug)]
struct Round {
    wake_ns: u64,
    ran_ns: u64,
}

/// Pin thread `tid` (0: the caller) to `cpu`; false if the kernel refused.
fn move_to(tid: i32, cpu: usize) -> bool {
    // SAFETY: cpu_set_t is plain data set up by CPU_ZERO/CPU_SET.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(tid, std::mem::size_of_val(&set), &set) == 0
    }
}

/// The hogs' real-time budget per second: a v1 cpu cgroup of its own where the host has RT
/// group scheduling, else the host's own limit (kernel.sched_rt_runtime_us).
const RT_RUNTIME_US: u64 = 500_000;

/// A v1 cpu cgroup limited to RT_RUNTIME_US of real-time CPU per second, removed on drop
/// (its threads have exited by then).
pub(super) struct RtBudget {
    dir: Option<std::path::PathBuf>,
}

impl RtBudget {
    pub(super) fn create() -> Self {
        let hierarchy = crate::cgroup::Hierarchy::detect().unwrap();
        let root = hierarchy.root();
        if !hierarchy.uses_v1_cpu() || !root.join("cpu.rt_runtime_us").exists() {
            return RtBudget { dir: None };
        }
        let dir = root.join(format!("stalltop-probe-rt-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("cpu.rt_runtime_us"), RT_RUNTIME_US.to_string()).unwrap();
        RtBudget { dir: Some(dir) }
    }

    /// Move the calling thread into the budget and make it SCHED_FIFO at `priority`.
    pub(super) fn join_as_real_time(&self, priority: i32) {
        if let Some(dir) = &self.dir {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() };
            std::fs::write(dir.join("tasks"), tid.to_string()).unwrap();
        }
        let param = libc::sched_param {
            sched_priority: priority,
        };
        // SAFETY: sched_setscheduler reads `param`, alive for the call.
        let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
        assert_eq!(rc, 0, "SCHED_FIFO: {}", std::io::Error::last_os_error());
    }
}

impl Drop for RtBudget {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Run the rounds from `start_ns`; returns the waiter's thread id and rounds.
fn waits_moved_between_cpus(start_ns: u64) -> (u32, Vec<Round>) {
    let waiter_tid = AtomicI32::new(0);
    let wake = |round: u64| start_ns + round * PERIOD_NS;
    let budget = RtBudget::create();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            set_name(c"st-hog0");
            pin_to(0);
            budget.join_as_real_time(10);
            for round in 0..ROUNDS {
                sleep_until(wake(round) - HOG0_START_BEFORE);
                spin_until(wake(round) + HOG0_END);
            }
        });
        scope.spawn(|| {
            set_name(c"st-hog1");
            pin_to(1);
            budget.join_as_real_time(10);
            for round in 0..ROUNDS {
                sleep_until(wake(round) + HOG1_START);
                spin_until(wake(round) + MOVE);
                let waiter = waiter_tid.load(Ordering::Relaxed);
                assert!(
                    waiter != 0 && move_to(waiter, 1),
                    "could not move the waiter {waiter}: {}",
                    std::io::Error::last_os_error()
                );
                spin_until(wake(round) + HOG1_END);
            }
        });
        let waiter = scope.spawn(|| {
            set_name(c"st-waiter");
            // SAFETY: gettid has no preconditions.
            waiter_tid.store(unsafe { libc::gettid() }, Ordering::Relaxed);
            (0..ROUNDS)
                .map(|round| {
                    assert!(move_to(0, 0));
                    sleep_until(wake(round));
                    Round {
                        wake_ns: wake(round),
                        ran_ns: host::monotonic_ns(),
                    }
                })
                .collect::<Vec<_>>()
        });
        let rounds = waiter.join().unwrap();
        (waiter_tid.load(Ordering::Relaxed) as u32, rounds)
    })
}

/// The wait stalltop reported for `round`, if any.
fn wait_of<'a>(waits: &'a [RunqWait], round: &Round) -> Option<&'a RunqWait> {
    waits
        .iter()
        .find(|w| w.ts_ns >= round.wake_ns && w.ts_ns <= round.ran_ns)
}

/// Whether `wait` is the round's whole wait, moved from CPU 0 and blamed on CPU 0's hog.
fn is_whole_and_blames_hog0(wait: &RunqWait, round: &Round) -> bool {
    let lateness = round.ran_ns - round.wake_ns;
    wait.wait_ns.abs_diff(lateness) <= WAIT_TOLERANCE_NS
        && wait.cpu == 1
        && wait.migrated.is_some_and(|m| m.from_cpu == 0)
        && wait.ran.comm == "st-hog0"
}

fn moved_wait_once(config: &ProbeConfig) -> Result<(), Contaminated> {
    let mut storage = ObjectStorage::default();
    let mut session = Session::start(config, &mut storage).expect("probes load");
    let start_ns = host::monotonic_ns() + 50 * MS;
    let (tid, rounds) = waits_moved_between_cpus(start_ns);
    let records = session.poll(Duration::from_millis(100));
    let waits = runq_waits_of(&records, tid);
    let found: Vec<_> = rounds.iter().map(|r| (r, wait_of(&waits, r))).collect();
    let right = found
        .iter()
        .filter(|(round, wait)| wait.is_some_and(|w| is_whole_and_blames_hog0(w, round)))
        .count();
    if right >= ROUNDS_RIGHT {
        return Ok(());
    }
    let ours = ["st-hog0", "st-hog1", "st-waiter"];
    let foreign: Vec<&str> = waits
        .iter()
        .map(|w| w.ran.comm.as_str())
        .filter(|c| !ours.contains(c))
        .collect();
    if !foreign.is_empty() {
        return Err(Contaminated(format!(
            "the waiter waited behind {foreign:?}"
        )));
    }
    panic!("{right} of {ROUNDS} rounds came out whole and blamed st-hog0: {found:#?}");
}

fn a_moved_wait_is_whole(config: ProbeConfig) {
    until_clean(|| moved_wait_once(&config));
}

#[test]
fn tp_btf_a_wait_moved_to_another_cpu_is_counted_whole_and_blames_the_first_cpus_hog() {
    a_moved_wait_is_whole(config(AttachMode::TpBtf));
}

#[test]
fn raw_tp_a_wait_moved_to_another_cpu_is_counted_whole_and_blames_the_first_cpus_hog() {
    a_moved_wait_is_whole(config(AttachMode::RawTp));
}

/// Without sched_info the wait is timed from the wakeup, which a move leaves alone; the
/// holder of the first CPU must still be found there.
#[test]
fn tp_btf_timing_waits_from_wakeups_a_moved_wait_blames_the_first_cpus_hog() {
    a_moved_wait_is_whole(without_sched_info(config(AttachMode::TpBtf)));
}

#[test]
fn raw_tp_timing_waits_from_wakeups_a_moved_wait_blames_the_first_cpus_hog() {
    a_moved_wait_is_whole(without_sched_info(config(AttachMode::RawTp)));
}

/// How long the carried-wait test's real-time hog keeps CPU 1 from the sleeper it wakes.
const HELD_OFF_NS: u64 = 15 * MS;
/// The carried wait set up for it: it left CPU 0 this long before the sleeper wakes.
const CARRIED_UNTIL_BEFORE: u64 = 40 * MS;
const CARRIED_SPAN: u64 = 5 * MS;

/// Thread `tid`'s switch-ins so far (sched_info.pcount): the third field of its schedstat.
fn runs_of(tid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).unwrap();
    stat.split_whitespace().nth(2).unwrap().parse().unwrap()
}

/// Sets, for thread `tid`, the state a move while it waited leaves: its run mark says a wait
/// is carried, as of `runs` switch-ins, and the carried wait left CPU 0 at `until` after
/// CARRIED_SPAN there.
fn carry_a_wait(session: &Session<'_>, tid: u32, until: u64, runs: u64) {
    use libbpf_rs::{MapCore, MapFlags};
    let maps = &session.maps().maps;
    let mark = skel::types::run_mark {
        tid,
        carried: runs as u32 + 1,
        ..Default::default()
    };
    let marks = maps.run_marks.max_entries();
    // SAFETY: run_mark and carried_wait are Plain (generated from bpf/stalltop.h).
    let mark = unsafe { plain::as_bytes(&mark) };
    maps.run_marks
        .update(&(tid % marks).to_ne_bytes(), mark, MapFlags::ANY)
        .unwrap();
    let wait = skel::types::carried_wait {
        since: until - CARRIED_SPAN,
        until,
        migrations: 1,
        ..Default::default()
    };
    // SAFETY: as above.
    let wait = unsafe { plain::as_bytes(&wait) };
    maps.carried_waits
        .update(&tid.to_ne_bytes(), wait, MapFlags::ANY)
        .unwrap();
}

/// A sleeper on CPU 1 wakes behind a real-time hog there, with a wait carried from CPU 0 set
/// up while it sleeps, as of `runs_since_move` switch-ins ago; returns the wait stalltop
/// reported for it and how long the hog held it off by its own clock.
fn wake_with_a_carried_wait(
    config: &ProbeConfig,
    runs_since_move: u64,
) -> Result<(RunqWait, u64), Contaminated> {
    let mut storage = ObjectStorage::default();
    let mut session = Session::start(config, &mut storage).expect("probes load");
    let wake_ns = host::monotonic_ns() + 50 * MS;
    let sleeper_tid = AtomicI32::new(0);
    let budget = RtBudget::create();
    let ran_ns = std::thread::scope(|scope| {
        scope.spawn(|| {
            set_name(c"st-hog1");
            pin_to(1);
            budget.join_as_real_time(10);
            sleep_until(wake_ns - MS);
            spin_until(wake_ns + HELD_OFF_NS);
        });
        let sleeper = scope.spawn(|| {
            set_name(c"st-sleeper");
            pin_to(1);
            // SAFETY: gettid has no preconditions.
            sleeper_tid.store(unsafe { libc::gettid() }, Ordering::SeqCst);
            sleep_until(wake_ns);
            host::monotonic_ns()
        });
        // The sleeper is asleep from well before this until wake_ns.
        sleep_until(wake_ns - 30 * MS);
        let tid = sleeper_tid.load(Ordering::SeqCst) as u32;
        let runs = runs_of(tid) - runs_since_move;
        carry_a_wait(&session, tid, wake_ns - CARRIED_UNTIL_BEFORE, runs);
        sleeper.join().unwrap()
    });
    let tid = sleeper_tid.load(Ordering::SeqCst) as u32;
    let records = session.poll(Duration::from_millis(100));
    let waits = runq_waits_of(&records, tid);
    let Some(wait) = waits
        .iter()
        .find(|w| w.ts_ns >= wake_ns && w.ts_ns <= ran_ns)
    else {
        return Err(Contaminated(format!(
            "no wait of the sleeper was reported: {waits:#?}"
        )));
    };
    if wait.ran.comm != "st-hog1" {
        return Err(Contaminated(format!(
            "the sleeper waited behind {}",
            wait.ran.comm
        )));
    }
    Ok((wait.clone(), ran_ns - wake_ns))
}

/// A wait carried from another CPU is the one that ends at the thread's next switch-in only
/// if the thread has not run since it moved. A switch the probes do not see (CI's exact-mode
/// moved-sleeper run on this VM's kernel reported a 20 ms sleep as a wait moved from CPU 0)
/// leaves the carried wait in place: the next switch-in seen, after a sleep, must not take it
/// for its own. Both sides: the same state, as of no run since the move, is taken whole.
fn a_carried_wait_the_thread_ran_after_is_not_its_next_wait(config: ProbeConfig) {
    let mut stale = None;
    until_clean(|| wake_with_a_carried_wait(&config, 1).map(|w| stale = Some(w)));
    let (wait, held_off) = stale.unwrap();
    assert!(
        wait.wait_ns.abs_diff(held_off) <= WAIT_TOLERANCE_NS && wait.migrated.is_none(),
        "held off {held_off} ns, after a run the move did not see: {wait:#?}"
    );
    let mut carried = None;
    until_clean(|| wake_with_a_carried_wait(&config, 0).map(|w| carried = Some(w)));
    let (wait, held_off) = carried.unwrap();
    let whole = held_off + CARRIED_UNTIL_BEFORE + CARRIED_SPAN;
    assert!(
        wait.wait_ns.abs_diff(whole) <= WAIT_TOLERANCE_NS
            && wait.migrated.is_some_and(|m| m.from_cpu == 0),
        "held off {held_off} ns after a wait carried from CPU 0 ({whole} ns in all): {wait:#?}"
    );
}

#[test]
fn tp_btf_a_carried_wait_the_thread_ran_after_is_not_its_next_wait() {
    a_carried_wait_the_thread_ran_after_is_not_its_next_wait(config(AttachMode::TpBtf));
}

#[test]
fn raw_tp_a_carried_wait_the_thread_ran_after_is_not_its_next_wait() {
    a_carried_wait_the_thread_ran_after_is_not_its_next_wait(config(AttachMode::RawTp));
}
