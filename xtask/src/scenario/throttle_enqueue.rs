//! Throttles that begin as a task is enqueued: every 250 ms round makes a new cgroup with a
//! 12 ms / 100 ms CFS quota (a group's CPU-local runtime starts at nothing), where a `spender`
//! on CPU 0 spends the quota from the round's start; two `sleeper`s on CPU 1, moved into the
//! new group while they sleep, wake 40 ms into the round to work 5 ms, beside a bystander
//! `hog` of another cgroup. Before 6.18 the quota holds a sleeper as it is enqueued, with no
//! task of the group leaving CPU 1 (6.18's task-based throttling holds it at the next tick
//! instead). Each sleeper says, per round, how long it was kept off its CPU.

use std::sync::atomic::{AtomicI32, Ordering};
use std::thread;

use anyhow::{ensure, Result};
use serde::Serialize;

use super::cgroup::CpuCgroup;
use super::task::{self, Window};
use super::{hog, Cgroups, Injected, Measured};

pub const SLEEPER_COMM: &str = "sleeper";
const SPENDER_COMM: &str = "spender";
/// The parent of the rounds' cgroups (it has no quota).
const CGROUP: &str = "stalltop_enqueue";
const BYSTANDER_CGROUP: &str = "stalltop_bystander";
const SLEEPERS: usize = 2;
const PERIOD_US: u64 = 100_000;
const QUOTA_US: u64 = 12_000;
const MS: u64 = 1_000_000;
pub const ROUND_NS: u64 = 250 * MS;
/// Relative to a round's start (its cgroup made, the spender moved in): the spender spends
/// from SPEND_FROM to SPEND_UNTIL, the sleepers are moved in at JOIN and wake at WAKE.
const SPEND_FROM: u64 = 2 * MS;
const SPEND_UNTIL: u64 = 150 * MS;
const JOIN: u64 = 5 * MS;
const WAKE: u64 = 40 * MS;
const WORK_NS: u64 = 5 * MS;
/// The first round starts this long after the window opens (the threads settle first).
const FIRST_ROUND_AFTER: u64 = 100 * MS;

/// One round as the threads saw it.
#[derive(Clone, Debug, Serialize)]
pub struct Round {
    /// The round's cgroup (with the quota) and when it began (CLOCK_MONOTONIC).
    pub cgroup: String,
    pub start_ns: u64,
    /// Per sleeper: how long it was kept off its CPU this round (late to run after its wakeup
    /// was due, or stopped while it worked).
    pub kept_ns: Vec<u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Truth {
    pub sleeper_tids: Vec<u32>,
    pub rounds: Vec<Round>,
}

pub fn run(window: &Window) -> Result<(Measured, Injected)> {
    let parent = CpuCgroup::create(CGROUP)?;
    let bystander = CpuCgroup::create(BYSTANDER_CGROUP)?;
    let first = window.start_ns() + FIRST_ROUND_AFTER;
    let rounds = window.deadline_ns().saturating_sub(first) / ROUND_NS;
    ensure!(rounds > 0, "the window is too short for one round");
    let start = |round: u64| first + round * ROUND_NS;
    let spender_tid = AtomicI32::new(0);
    let sleeper_tids: [AtomicI32; SLEEPERS] = Default::default();
    let (cgroups, kept) = thread::scope(|scope| {
        let _cancel = window.cancel_on_drop();
        let hog = window.spawn(scope, hog::COMM, &bystander, || hog::run(window))?;
        let spender = window.spawn_pinned(scope, SPENDER_COMM, Some(0), &parent, || {
            spender_tid.store(task::gettid(), Ordering::SeqCst);
            for round in 0..rounds {
                task::sleep_until(window, start(round) + SPEND_FROM)?;
                if window.cancelled() {
                    break;
                }
                task::spin_until(start(round) + SPEND_UNTIL);
            }
            Ok(())
        })?;
        let sleepers = sleeper_tids
            .iter()
            .map(|tid| {
                window.spawn(scope, SLEEPER_COMM, &parent, move || {
                    tid.store(task::gettid(), Ordering::SeqCst);
                    (0..rounds)
                        .map(|round| wake_and_work(window, start(round) + WAKE))
                        .collect::<Result<Vec<u64>>>()
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let made = make_rounds(window, rounds, start, &spender_tid, &sleeper_tids);
        let kept = sleepers
            .into_iter()
            .map(|sleeper| sleeper.join())
            .collect::<Result<Vec<_>>>()?;
        spender.join()?;
        hog.join()?;
        // The last round's cgroup goes only now that its threads are done.
        let (cgroups, _last) = made?;
        anyhow::Ok((cgroups, kept))
    })?;
    let rounds = cgroups
        .into_iter()
        .enumerate()
        .map(|(round, cgroup)| Round {
            cgroup,
            start_ns: start(round as u64),
            kept_ns: kept.iter().map(|k| k[round]).collect(),
        })
        .collect();
    let truth = Truth {
        sleeper_tids: sleeper_tids
            .iter()
            .map(|tid| tid.load(Ordering::SeqCst) as u32)
            .collect(),
        rounds,
    };
    Ok((
        Measured {
            cgroups: Cgroups {
                requests: Some(parent.path().to_owned()),
                noisy: Some(bystander.path().to_owned()),
                ..Cgroups::default()
            },
            ..Measured::default()
        },
        Injected {
            throttle_enqueue: Some(truth),
            ..Injected::default()
        },
    ))
}

/// The coordinator: each round's cgroup, made at the round's start with the spender moved in,
/// the sleepers at JOIN (asleep); the previous round's removed once empty. Their paths, and
/// the last round's cgroup, still in use.
fn make_rounds(
    window: &Window,
    rounds: u64,
    start: impl Fn(u64) -> u64,
    spender: &AtomicI32,
    sleepers: &[AtomicI32],
) -> Result<(Vec<String>, Option<CpuCgroup>)> {
    let mut paths = Vec::new();
    let mut previous: Option<CpuCgroup> = None;
    for round in 0..rounds {
        task::sleep_until(window, start(round))?;
        if window.cancelled() {
            break;
        }
        let cgroup = CpuCgroup::create(&format!("{CGROUP}/round{round}"))?;
        cgroup.set_bandwidth(PERIOD_US, QUOTA_US)?;
        cgroup.adopt_thread(spender.load(Ordering::SeqCst))?;
        task::sleep_until(window, start(round) + JOIN)?;
        for sleeper in sleepers {
            cgroup.adopt_thread(sleeper.load(Ordering::SeqCst))?;
        }
        paths.push(cgroup.path().to_owned());
        previous = Some(cgroup);
    }
    Ok((paths, previous))
}

/// Sleeps until `due`, then works WORK_NS of CPU time; how long it was kept off its CPU.
fn wake_and_work(window: &Window, due: u64) -> Result<u64> {
    task::sleep_until(window, due)?;
    let woke = task::monotonic_ns();
    let cpu_until = task::thread_cpu_ns() + WORK_NS;
    while task::thread_cpu_ns() < cpu_until && !window.cancelled() {
        std::hint::spin_loop();
    }
    let worked = task::monotonic_ns() - woke;
    Ok(woke.saturating_sub(due).max(worked.saturating_sub(WORK_NS)))
}
