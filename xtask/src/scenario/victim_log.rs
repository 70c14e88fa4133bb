//! The victim of victim.rs (comm `victim`, a 1 ms absolute-deadline waker doing 200 us of work),
//! that also keeps each wake-up later than `LOG_AFTER_NS` with its time, so a check can tell
//! which of a culprit's calls delayed it.

use anyhow::Result;
use serde::Serialize;

use super::stats::Percentiles;
use super::task::{self, Window};
use super::victim::VictimStats;

/// The period and the work of victim.rs.
const PERIOD_NS: u64 = 1_000_000;
const WORK_NS: u64 = 200_000;
/// Wake-ups at least this late are logged.
const LOG_AFTER_NS: u64 = 1_000_000;
/// Bounds the log if the victim is starved for the whole window.
const MAX_LOGGED: usize = 10_000;

/// One late wake-up: when the victim asked to wake, and how late it was.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Late {
    pub due_ns: u64,
    pub late_ns: u64,
}

#[derive(Debug, Serialize)]
pub struct VictimLog {
    #[serde(flatten)]
    pub stats: VictimStats,
    /// Wake-ups at least 1 ms late, oldest first.
    pub late: Vec<Late>,
}

impl VictimLog {
    /// The worst lateness of the wake-ups due between `from_ns` and `to_ns`; 0 when all of them
    /// were less than 1 ms late.
    pub fn worst_due_between(&self, from_ns: u64, to_ns: u64) -> u64 {
        self.late
            .iter()
            .filter(|late| (from_ns..=to_ns).contains(&late.due_ns))
            .map(|late| late.late_ns)
            .max()
            .unwrap_or(0)
    }
}

/// Runs on the calling (already pinned) thread until the window closes.
pub fn run(window: &Window) -> Result<VictimLog> {
    task::set_min_timer_slack()?;
    let expected = (window.deadline_ns() - task::monotonic_ns()) / PERIOD_NS;
    let mut lateness = Vec::with_capacity(expected as usize + 1);
    let mut late = Vec::new();
    let mut missed_periods = 0;
    let mut longest_work_gap_ns = 0;
    let mut due = task::monotonic_ns() + PERIOD_NS;
    while due < window.deadline_ns() && !window.cancelled() {
        task::sleep_until(window, due)?;
        if window.cancelled() {
            break;
        }
        let woke = task::monotonic_ns();
        let late_ns = woke.saturating_sub(due);
        lateness.push(late_ns);
        if late_ns >= LOG_AFTER_NS && late.len() < MAX_LOGGED {
            late.push(Late {
                due_ns: due,
                late_ns,
            });
        }
        longest_work_gap_ns = longest_work_gap_ns.max(task::spin_until(woke + WORK_NS));
        due += PERIOD_NS;
        let now = task::monotonic_ns();
        while due <= now {
            due += PERIOD_NS;
            missed_periods += 1;
        }
    }
    Ok(VictimLog {
        stats: VictimStats {
            lateness: Percentiles::of(lateness),
            missed_periods,
            longest_work_gap_ns,
        },
        late,
    })
}
