//! A wait moved between CPUs (case 4's tail: load balancing moves exactly the tasks that wait).
//! Every ROUND_NS a `waiter` wakes on CPU 0 behind `hog0`, a real-time busy loop there; while it
//! waits, `hog1`, a real-time busy loop on CPU 1, moves it to CPU 1 with an affinity change (the
//! same dequeue and enqueue as a load balancer's pull), and it runs when `hog1` stops. The waiter
//! times each wait from its wakeup to its run. The scheduler restarts a moved task's wait stamp,
//! so only the stretch on CPU 1 (`hog1`'s) shows without care; stalltop must count the whole
//! wait and blame `hog0`, which held it longest. The hogs spin at most 35 ms per 200 ms round,
//! pinned, in a cgroup with a real-time budget.

use std::sync::atomic::{AtomicI32, Ordering};
use std::thread;

use anyhow::{ensure, Result};
use serde::Serialize;

use super::cgroup::CpuCgroup;
use super::task::{self, Window};
use super::{victim, Cgroups, Injected, Measured, CPU};

pub const WAITER_COMM: &str = "waiter";
pub const FIRST_HOG_COMM: &str = "hog0";
const SECOND_HOG_COMM: &str = "hog1";
/// The CPU the waiter wakes on; it is moved to `CPU` (the scenarios' CPU).
pub const FIRST_CPU: usize = 0;
const HOG_CGROUP: &str = "stalltop_rt_hogs";
/// Real-time time the hogs may use per second on each CPU: above their 175 ms, far below the
/// whole second.
const HOG_RT_RUNTIME_US: u64 = 300_000;
const HOG_PRIORITY: i32 = 10;
const MS: u64 = 1_000_000;
const ROUND_NS: u64 = 200 * MS;
/// Relative to each round's wakeup: hog0 spins from before it to FIRST_HOG_END; hog1 spins
/// from SECOND_HOG_START, moves the waiter at MOVE and stops at SECOND_HOG_END. So the waiter
/// waits MOVE behind hog0, then SECOND_HOG_END - MOVE behind hog1.
const FIRST_HOG_START_BEFORE: u64 = 5 * MS;
const FIRST_HOG_END: u64 = 30 * MS;
const SECOND_HOG_START: u64 = 10 * MS;
pub const MOVE: u64 = 25 * MS;
pub const SECOND_HOG_END: u64 = 37 * MS;
/// The first round starts this long after the window opens (the threads settle first).
const FIRST_ROUND_AFTER: u64 = 100 * MS;

/// One round as the threads saw it.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Round {
    /// When the waiter's timer was due, and when it ran after it (CLOCK_MONOTONIC).
    pub wake_ns: u64,
    pub ran_ns: u64,
    /// The CPU it ran on.
    pub ran_cpu: usize,
}

impl Round {
    pub fn wait_ns(&self) -> u64 {
        self.ran_ns - self.wake_ns
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Truth {
    pub waiter_tid: u32,
    pub rounds: Vec<Round>,
}

pub fn run(window: &Window) -> Result<(Measured, Injected)> {
    let waiter_cgroup = CpuCgroup::create(victim::CGROUP)?;
    let hogs = CpuCgroup::create(HOG_CGROUP)?;
    hogs.set_rt_runtime(HOG_RT_RUNTIME_US)?;
    let first_round = window.start_ns() + FIRST_ROUND_AFTER;
    let rounds = (window
        .deadline_ns()
        .saturating_sub(first_round + SECOND_HOG_END))
        / ROUND_NS;
    ensure!(rounds > 0, "the window is too short for one round");
    let wake = |round: u64| first_round + round * ROUND_NS;
    let waiter_tid = AtomicI32::new(0);
    let rounds = thread::scope(|scope| {
        let _cancel = window.cancel_on_drop();
        let waiter = window.spawn(scope, WAITER_COMM, &waiter_cgroup, || {
            waiter_tid.store(task::gettid(), Ordering::SeqCst);
            task::set_min_timer_slack()?;
            (0..rounds)
                .map(|round| wait(window, wake(round)))
                .collect::<Result<Vec<_>>>()
        })?;
        let first = window.spawn(scope, FIRST_HOG_COMM, &hogs, || {
            task::pin_to_cpu(FIRST_CPU)?;
            task::become_real_time(HOG_PRIORITY)?;
            for round in 0..rounds {
                task::sleep_until(window, wake(round) - FIRST_HOG_START_BEFORE)?;
                if window.cancelled() {
                    break;
                }
                task::spin_until(wake(round) + FIRST_HOG_END);
            }
            Ok(())
        })?;
        let second = window.spawn(scope, SECOND_HOG_COMM, &hogs, || {
            task::become_real_time(HOG_PRIORITY)?;
            for round in 0..rounds {
                task::sleep_until(window, wake(round) + SECOND_HOG_START)?;
                if window.cancelled() {
                    break;
                }
                task::spin_until(wake(round) + MOVE);
                task::pin_thread_to_cpu(waiter_tid.load(Ordering::SeqCst), CPU)?;
                task::spin_until(wake(round) + SECOND_HOG_END);
            }
            Ok(())
        })?;
        let rounds = waiter.join()?;
        first.join()?;
        second.join()?;
        anyhow::Ok(rounds)
    })?;
    Ok((
        Measured {
            cgroups: Cgroups {
                victim: Some(waiter_cgroup.path().to_owned()),
                noisy: Some(hogs.path().to_owned()),
                requests: None,
            },
            ..Measured::default()
        },
        Injected {
            migration: Some(Truth {
                waiter_tid: waiter_tid.load(Ordering::SeqCst) as u32,
                rounds,
            }),
            ..Injected::default()
        },
    ))
}

/// One round of the waiter: back on FIRST_CPU, asleep until `wake_ns`, then timed to its run.
fn wait(window: &Window, wake_ns: u64) -> Result<Round> {
    task::pin_to_cpu(FIRST_CPU)?;
    task::sleep_until(window, wake_ns)?;
    let ran_ns = task::monotonic_ns();
    Ok(Round {
        wake_ns,
        ran_ns: ran_ns.max(wake_ns),
        ran_cpu: task::current_cpu()?,
    })
}
