//! The victim: a 1 ms periodic waker (absolute-deadline sleep, then 200 us of work) named
//! `victim`; its wake-up lateness is the ground truth for run-queue delay.

use anyhow::Result;
use serde::Serialize;

use super::stats::Percentiles;
use super::task::{self, Window};

pub const COMM: &str = "victim";
/// v1 cpu cgroup of the victim, with the default weight.
pub const CGROUP: &str = "stalltop_victim";
pub const SHARES: u64 = 1024;

const PERIOD_NS: u64 = 1_000_000;
const WORK_NS: u64 = 200_000;

#[derive(Clone, Copy, Debug, Serialize)]
pub struct VictimStats {
    /// Wake-up minus the absolute time it asked for, one sample per period.
    pub lateness: Percentiles,
    /// Periods skipped because the previous one overran (woken or worked too late).
    pub missed_periods: u64,
    /// The longest the CPU was taken from the victim while it worked (a jump between two clock
    /// reads): a stall then makes no wake-up late, it skips periods.
    pub longest_work_gap_ns: u64,
}

impl VictimStats {
    /// The longest the victim was kept from running on its CPU, late to wake or stopped while it
    /// worked.
    pub fn worst_stall_ns(&self) -> u64 {
        self.lateness.max_ns.max(self.longest_work_gap_ns)
    }
}

/// Runs on the calling (already pinned) thread until the window closes.
pub fn run(window: &Window) -> Result<VictimStats> {
    task::set_min_timer_slack()?;
    let expected = (window.deadline_ns() - task::monotonic_ns()) / PERIOD_NS;
    let mut lateness = Vec::with_capacity(expected as usize + 1);
    let mut missed_periods = 0;
    let mut longest_work_gap_ns = 0;
    let mut target = task::monotonic_ns() + PERIOD_NS;
    while target < window.deadline_ns() && !window.cancelled() {
        task::sleep_until(window, target)?;
        if window.cancelled() {
            break;
        }
        let woke = task::monotonic_ns();
        lateness.push(woke.saturating_sub(target));
        longest_work_gap_ns = longest_work_gap_ns.max(task::spin_until(woke + WORK_NS));
        target += PERIOD_NS;
        let now = task::monotonic_ns();
        while target <= now {
            target += PERIOD_NS;
            missed_periods += 1;
        }
    }
    Ok(VictimStats {
        lateness: Percentiles::of(lateness),
        missed_periods,
        longest_work_gap_ns,
    })
}
