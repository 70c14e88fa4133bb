//! A sleep is never a wait: a `sleeper` thread works 300 us of CPU and sleeps 20 ms, while a
//! `flipper` sibling flips its affinity between the two CPUs every 3 ms, beside a busy `hog` on
//! each CPU. With EEVDF's delayed dequeue (6.12+) a task that goes to sleep owing CPU time
//! stays queued and is moved anyway, and the kernel's sched_info then counts its sleep as
//! waiting. The sleeper measures by its own clocks the latest it ran after a sleep was due,
//! and the longest it was stopped while it worked (moved, or preempted): no wait of its may be
//! longer. The hogs spin at normal priority for the window, one pinned to each CPU.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::thread;

use anyhow::Result;
use serde::Serialize;

use super::cgroup::CpuCgroup;
use super::task::{self, Window};
use super::{hog, victim, Cgroups, Injected, Measured, CPU};

pub const SLEEPER_COMM: &str = "sleeper";
const FLIPPER_COMM: &str = "flipper";
const HOG_CGROUP: &str = "stalltop_busy";
const WORK_NS: u64 = 300_000;
const SLEEP_NS: u64 = 20_000_000;
const FLIP_NS: u64 = 3_000_000;
const CPUS: [usize; 2] = [0, CPU];

/// What the sleeper measured.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Truth {
    pub sleeper_tid: u32,
    pub sleeps: u64,
    /// The longest from a sleep's due time to running again.
    pub latest_wakeup_ns: u64,
    /// The longest a stretch of work took beyond its CPU time.
    pub longest_work_gap_ns: u64,
}

impl Truth {
    /// The longest the sleeper was kept from running, by its own clocks.
    pub fn longest_kept_ns(&self) -> u64 {
        self.latest_wakeup_ns.max(self.longest_work_gap_ns)
    }
}

pub fn run(window: &Window) -> Result<(Measured, Injected)> {
    let sleeper_cgroup = CpuCgroup::create(victim::CGROUP)?;
    let hogs = CpuCgroup::create(HOG_CGROUP)?;
    let sleeper_tid = AtomicI32::new(0);
    let done = AtomicBool::new(false);
    let truth = thread::scope(|scope| {
        let _cancel = window.cancel_on_drop();
        let busy = CPUS
            .iter()
            .map(|&cpu| {
                window.spawn_pinned(scope, hog::COMM, Some(cpu), &hogs, || hog::run(window))
            })
            .collect::<Result<Vec<_>>>()?;
        let sleeper = window.spawn_pinned(scope, SLEEPER_COMM, None, &sleeper_cgroup, || {
            sleeper_tid.store(task::gettid(), Ordering::SeqCst);
            let truth = work_and_sleep(window);
            done.store(true, Ordering::SeqCst);
            truth
        })?;
        let flipper = window.spawn_pinned(scope, FLIPPER_COMM, None, &sleeper_cgroup, || {
            flip(window, &sleeper_tid, &done)
        })?;
        let truth = sleeper.join()?;
        flipper.join()?;
        busy.into_iter().try_for_each(|hog| hog.join())?;
        anyhow::Ok(truth)
    })?;
    Ok((
        Measured {
            cgroups: Cgroups {
                victim: Some(sleeper_cgroup.path().to_owned()),
                noisy: Some(hogs.path().to_owned()),
                ..Cgroups::default()
            },
            ..Measured::default()
        },
        Injected {
            moved_sleeper: Some(Truth {
                sleeper_tid: sleeper_tid.load(Ordering::SeqCst) as u32,
                ..truth
            }),
            ..Injected::default()
        },
    ))
}

/// Works WORK_NS of CPU time and sleeps SLEEP_NS until the window closes.
fn work_and_sleep(window: &Window) -> Result<Truth> {
    task::set_min_timer_slack()?;
    let mut truth = Truth::default();
    while !window.over() {
        let began = task::monotonic_ns();
        let cpu_until = task::thread_cpu_ns() + WORK_NS;
        while task::thread_cpu_ns() < cpu_until && !window.cancelled() {
            std::hint::spin_loop();
        }
        let worked = task::monotonic_ns() - began;
        truth.longest_work_gap_ns = truth
            .longest_work_gap_ns
            .max(worked.saturating_sub(WORK_NS));
        let due = task::monotonic_ns() + SLEEP_NS;
        task::sleep_until(window, due)?;
        truth.latest_wakeup_ns = truth
            .latest_wakeup_ns
            .max(task::monotonic_ns().saturating_sub(due));
        truth.sleeps += 1;
    }
    Ok(truth)
}

/// Flips the sleeper between the CPUs every FLIP_NS until it is done.
fn flip(window: &Window, sleeper: &AtomicI32, done: &AtomicBool) -> Result<()> {
    let mut next = task::monotonic_ns();
    let mut turn = 0;
    while !done.load(Ordering::SeqCst) && !window.cancelled() {
        let tid = sleeper.load(Ordering::SeqCst);
        if tid != 0 {
            let pinned = task::pin_thread_to_cpu(tid, CPUS[turn % CPUS.len()]);
            // The sleeper may have ended since `done` was read.
            if pinned.is_err() && done.load(Ordering::SeqCst) {
                break;
            }
            pinned?;
            turn += 1;
        }
        next += FLIP_NS;
        task::sleep_until(window, next)?;
    }
    Ok(())
}
