//! Throttled waits that move (the quota case of docs/design-notes.md's list of unknowns): a
//! request loop of 3 `reqloop` threads in a cgroup with a 12 ms / 100 ms CFS quota, each
//! working 2 ms of CPU per request with 3 ms between requests, far over the quota. The quota
//! stops them for most of every period. A `flipper` outside the quota moves each thread to the
//! other CPU every 20 ms, so most throttled waits end on another CPU than they began: left to
//! the scheduler, a CI run saw 0 of 300 long waits move. Every long wait of the threads is the
//! quota's, wherever it began and ended.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::thread;

use anyhow::Result;

use super::cgroup::CpuCgroup;
use super::task::{self, Window};
use super::{Cgroups, CpuStatDelta, Measured};
use crate::interrupt;

pub const COMM: &str = "reqloop";
pub const CGROUP: &str = "stalltop_throttled_moved";
const FLIPPER_COMM: &str = "flipper";
const FLIPPER_CGROUP: &str = "stalltop_flipper";
const THREADS: usize = 3;
const PERIOD_US: u64 = 100_000;
const QUOTA_US: u64 = 12_000;
const WORK_NS: u64 = 2_000_000;
const THINK_NS: u64 = 3_000_000;
/// How often the flipper moves each thread.
const FLIP_NS: u64 = 20_000_000;
/// The CPUs the threads are moved between.
const CPUS: [usize; 2] = [0, super::CPU];

pub fn run(window: &Window) -> Result<Measured> {
    let cgroup = CpuCgroup::create(CGROUP)?;
    cgroup.set_bandwidth(PERIOD_US, QUOTA_US)?;
    let flipper_cgroup = CpuCgroup::create(FLIPPER_CGROUP)?;
    let tids: [AtomicI32; THREADS] = Default::default();
    let done = AtomicBool::new(false);
    let start = cgroup.cpu_stat()?;
    thread::scope(|scope| {
        let _cancel = window.cancel_on_drop();
        let workers = tids
            .iter()
            .map(|tid| {
                window.spawn_pinned(scope, COMM, None, &cgroup, || {
                    tid.store(task::gettid(), Ordering::SeqCst);
                    request_loop(window)
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let flipper = window.spawn_pinned(scope, FLIPPER_COMM, None, &flipper_cgroup, || {
            flip(window, &tids, &done)
        })?;
        let joined = workers.into_iter().try_for_each(|worker| worker.join());
        done.store(true, Ordering::SeqCst);
        flipper.join()?;
        joined
    })?;
    let cpu_stat = CpuStatDelta::since(&cgroup, start)?;
    // A recorder that polls cpu.stat gets one more look before the cgroup goes.
    if !interrupt::requested() {
        thread::sleep(super::LINGER);
    }
    Ok(Measured {
        cgroups: Cgroups {
            requests: Some(cgroup.path().to_owned()),
            ..Cgroups::default()
        },
        cpu_stat: Some(cpu_stat),
        ..Measured::default()
    })
}

fn request_loop(window: &Window) -> Result<()> {
    while !window.over() {
        let until = task::thread_cpu_ns() + WORK_NS;
        while task::thread_cpu_ns() < until && !window.over() {
            std::hint::spin_loop();
        }
        task::sleep_until(window, task::monotonic_ns() + THINK_NS)?;
    }
    Ok(())
}

/// Every FLIP_NS, pins each thread to the CPU it was not pinned to, the threads on alternate
/// CPUs, until they are done.
fn flip(window: &Window, tids: &[AtomicI32], done: &AtomicBool) -> Result<()> {
    let mut next = task::monotonic_ns();
    let mut turn = 0;
    while !done.load(Ordering::SeqCst) && !window.cancelled() {
        for (i, tid) in tids.iter().enumerate() {
            let tid = tid.load(Ordering::SeqCst);
            if tid == 0 {
                continue;
            }
            let pinned = task::pin_thread_to_cpu(tid, CPUS[(turn + i) % CPUS.len()]);
            // The thread may have ended as the window closed.
            if pinned.is_err() && (window.over() || done.load(Ordering::SeqCst)) {
                return Ok(());
            }
            pinned?;
        }
        turn += 1;
        next += FLIP_NS;
        task::sleep_until(window, next)?;
    }
    Ok(())
}
