//! Pure checks of a stalltop report (`stalltop report --json`) against a scenario's ground truth;
//! each returns a message that states the tolerance and quotes the relevant part of the report.
//! `report` is the JSON contract, `contamination` decides which runs can be judged at all, and
//! each other module is one scenario's check (`irqoff`: the gaps a quiet run must not have;
//! `stacks`: every scenario's stalls' culprits have their stacks).

pub mod churn;
pub mod contamination;
pub mod fleet;
pub mod irqoff;
pub mod ksoftirqd;
pub mod migration;
pub mod moved_sleeper;
pub mod noisy_neighbour;
pub mod pressure;
pub mod quiet;
pub mod report;
pub mod slow_syscall;
pub mod slow_syscall_sampled;
pub mod stacks;
pub mod throttle;
pub mod throttle_edges;
pub mod why;

#[cfg(test)]
mod fixtures;

use serde::Serialize;

use crate::scenario;
use report::{Report, SyscallMode};

/// slow-syscall: the check of the mode the report was recorded in.
pub fn slow_syscall(report: &Report, truth: &scenario::slow_syscall::Truth) -> Result<(), String> {
    match report.settings.syscalls {
        SyscallMode::Exact => slow_syscall::check(report, truth),
        SyscallMode::Sampled => slow_syscall_sampled::check(report, truth),
        SyscallMode::Off => slow_syscall_sampled::check_off(report, truth),
    }
}

/// `part` of `whole` percent, rounded up.
fn percent_of(whole: u64, part: u64) -> u64 {
    (whole * part).div_ceil(100)
}

fn pretty<T: Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|err| format!("<unprintable: {err}>"))
}
