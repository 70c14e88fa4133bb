//! Cgroup churn: the 1 ms victim runs on CPU 1 in its cgroup for the whole window while a
//! `churner` thread beside it creates short-lived cgroups one after another, runs in each for a
//! moment (so the probes add run-queue and syscall entries for it) and removes it: more cgroups
//! in the window than the kernel's hash maps hold, so only freeing the removed cgroups' entries
//! keeps room for the live ones.

use std::thread;
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;

use super::cgroup::CpuCgroup;
use super::task::{self, Window};
use super::{victim, Cgroups, Injected, Measured};

/// The parent of the short-lived cgroups (removed with them).
const PARENT: &str = "stalltop_churn";
const COMM: &str = "churner";
/// One cgroup per this much time: 250 a second, 5,000 in the 20 s the test runs, above the
/// 4,096 entries of the run-queue hash map (and the per-CPU array slots beside it).
const PACE_NS: u64 = 4_000_000;
/// How long the churner runs inside each cgroup before it leaves and removes it.
const STAY: Duration = Duration::from_micros(100);

#[derive(Clone, Copy, Debug, Serialize)]
pub struct Truth {
    /// Short-lived cgroups created, run in and removed.
    pub cgroups: u64,
}

pub fn run(window: &Window) -> Result<(Measured, Injected)> {
    let victim_cgroup = CpuCgroup::create(victim::CGROUP)?;
    victim_cgroup.set_shares(victim::SHARES)?;
    let parent = CpuCgroup::create(PARENT)?;
    let (victim, cgroups) = thread::scope(|scope| {
        let _cancel = window.cancel_on_drop();
        let victim = window.spawn(scope, victim::COMM, &victim_cgroup, || victim::run(window))?;
        let churner = window.spawn(scope, COMM, &parent, || churn(window, &parent))?;
        anyhow::Ok((victim.join()?, churner.join()?))
    })?;
    Ok((
        Measured {
            cgroups: Cgroups {
                victim: Some(victim_cgroup.path().to_owned()),
                noisy: None,
                requests: None,
            },
            victim: Some(victim),
            ..Measured::default()
        },
        Injected {
            churn: Some(Truth { cgroups }),
            ..Injected::default()
        },
    ))
}

/// Runs on the churner thread (in `parent`) until the window closes; returns the cgroups made.
fn churn(window: &Window, parent: &CpuCgroup) -> Result<u64> {
    let mut made = 0;
    let mut next = task::monotonic_ns();
    while !window.over() {
        let child = CpuCgroup::create(&format!("{PARENT}/c{made}"))?;
        child.join_current_thread()?;
        thread::sleep(STAY);
        parent.join_current_thread()?;
        drop(child); // rmdir
        made += 1;
        next += PACE_NS;
        task::sleep_until(window, next)?;
    }
    Ok(made)
}
