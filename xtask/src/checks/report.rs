//! The report JSON contract: the parts of `stalltop report --json` the checks read, as serde
//! types, and the look-ups and failure annotation every check shares.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The parts of the report JSON contract the checks read.
#[derive(Debug, Deserialize, Serialize)]
pub struct Report {
    /// When the recording starts (CLOCK_MONOTONIC ns), and its length.
    #[serde(default)]
    pub start_ns: u64,
    #[serde(default)]
    pub duration_ns: u64,
    pub settings: Settings,
    pub lost_events: BTreeMap<String, u64>,
    /// Updates refused because a bounded kernel map was full, by map.
    #[serde(default)]
    pub map_full: BTreeMap<String, u64>,
    pub runq: Vec<RunqRow>,
    pub runq_events: Vec<RunqEvent>,
    pub throttling: Vec<ThrottlingRow>,
    pub stalls: Vec<Stall>,
    pub takeovers: Vec<Takeover>,
    pub culprits: Vec<CulpritRow>,
    pub syscalls: Vec<SyscallRow>,
    #[serde(default)]
    pub slow_syscalls: Vec<SlowSyscall>,
    pub softirq: Vec<SoftirqRow>,
    pub softirq_stolen: Vec<StolenRow>,
    #[serde(default)]
    pub pressure: Pressure,
}

/// PSI over the recording, and the cgroups where it saw more waiting than stalltop.
#[derive(Debug, Default, Deserialize, Serialize)]
pub struct Pressure {
    pub host_some_ns: Option<u64>,
    pub disagreements: Vec<PressureDisagreement>,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct PressureDisagreement {
    pub cgroup: String,
    pub psi_some_ns: u64,
    pub waited_ns: u64,
}

/// The thresholds stalltop recorded with.
#[derive(Debug, Deserialize, Serialize)]
pub struct Settings {
    pub runq_threshold_ns: u64,
    pub stall_threshold_ns: u64,
    pub syscall_wall_threshold_ns: u64,
    pub syscall_oncpu_threshold_ns: u64,
    pub sample_hz: u32,
    pub syscalls: SyscallMode,
}

/// stalltop's `--syscalls` modes, as `settings.syscalls` names them.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum SyscallMode {
    Sampled,
    Exact,
    Off,
}

impl SyscallMode {
    pub fn name(self) -> &'static str {
        match self {
            SyscallMode::Sampled => "sampled",
            SyscallMode::Exact => "exact",
            SyscallMode::Off => "off",
        }
    }

    /// The mode `name` names, as `name()` spells it.
    pub fn named(name: &str) -> Option<SyscallMode> {
        <SyscallMode as clap::ValueEnum>::from_str(name, false).ok()
    }
}

/// A call stalltop listed as slow.
#[derive(Debug, Deserialize, Serialize)]
pub struct SlowSyscall {
    /// When it returned (sampled: when it left the CPU).
    pub ts_ns: u64,
    pub tid: u32,
    pub syscall: String,
    pub path: Option<String>,
    pub wall_ns: u64,
    pub oncpu_ns: u64,
    /// Softirq time that ran inside its slices (not in `oncpu_ns`).
    #[serde(default)]
    pub softirq_ns: u64,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct Stall {
    pub cpu: u32,
    pub start_ns: u64,
    pub duration_ns: u64,
    pub kind: StallKind,
    /// The waits merged into the stall (its waiter's and any other task's on the CPU).
    pub waits: u64,
    pub waited: Waited,
    pub culprit: Option<Culprit>,
    /// throttled stalls: the cgroup whose CPU quota ran out.
    #[serde(default)]
    pub throttled_cgroup: Option<String>,
    /// irqoff stalls: the longest gap between sampler ticks.
    pub gap: Option<Gap>,
}

/// What kind of waiting made a stall, as the report's JSON names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StallKind {
    Runq,
    Throttled,
    Ksoftirqd,
    Softirq,
    Irqoff,
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize)]
pub struct Gap {
    pub start_ns: u64,
    pub duration_ns: u64,
}

#[derive(Debug, Default, Deserialize, Serialize)]
pub struct Waited {
    pub softirq: Option<String>,
    pub pid: Option<u32>,
    pub comm: Option<String>,
    pub cgroup: Option<String>,
    pub wait_ns: Option<u64>,
    pub steal_ns: Option<u64>,
    /// The waiter's CPU was idle for most of its wait: nobody held it.
    #[serde(default)]
    pub cpu_idle: bool,
    #[serde(default)]
    pub migrated: Option<Migrated>,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct Culprit {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub cgroup: String,
    pub container: String,
    pub syscall: Option<String>,
    pub path: Option<String>,
    pub oncpu_ns: Option<u64>,
    pub wall_ns: Option<u64>,
    pub stack: Vec<String>,
    pub user_stack: Vec<String>,
    /// The sampler's ticks that caught it during the stall.
    pub samples: u64,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct Takeover {
    pub cpu: u32,
    pub ts_ns: u64,
    pub wait_ns: u64,
    pub culprit: Option<Culprit>,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct CulpritRow {
    pub comm: String,
    pub container: String,
    pub syscall: Option<String>,
    pub path: Option<String>,
    pub count: u64,
    pub total_stall_ns: u64,
    pub worst_ns: u64,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct SyscallRow {
    pub syscall: String,
    pub container: String,
    pub count: u64,
    /// None when sampled.
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    pub max_ns: u64,
    pub total_ns: u64,
    pub oncpu_total_ns: u64,
    pub top_paths: Vec<PathRow>,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct PathRow {
    pub path: String,
    pub count: u64,
    pub total_ns: u64,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct SoftirqRow {
    pub cpu: u32,
    pub vector: String,
    pub count: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub in_ksoftirqd: u64,
    /// Absent from older reports; checked when present.
    #[serde(default)]
    pub run_in_ksoftirqd_ns: Option<u64>,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct StolenRow {
    pub pid: u32,
    pub comm: String,
    pub vector: String,
    pub ns: u64,
    pub count: u64,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct RunqRow {
    pub cgroup: String,
    pub count: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// PSI's `some` time of the cgroup over the recording (null: not read).
    #[serde(default)]
    pub pressure_some_ns: Option<u64>,
    pub preempted_by: PreemptedBy,
    pub top_preemptors: Vec<Preemptor>,
    #[serde(default)]
    pub total_ns: u64,
    /// Its wait by cause (null: not split).
    #[serde(default)]
    pub why: Option<Why>,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct Why {
    pub causes: Vec<WhyCause>,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct WhyCause {
    pub cause: WaitCause,
    pub comm: Option<String>,
    pub container: Option<String>,
    pub ns: u64,
    pub percent: f64,
}

/// What kept a cgroup's task waiting, as the report's JSON names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitCause {
    Steal,
    Throttled,
    Softirq,
    Idle,
    Kthread,
    SameCgroup,
    OtherCgroup,
    ShortWaits,
}

impl WaitCause {
    pub fn name(self) -> &'static str {
        match self {
            WaitCause::Steal => "steal",
            WaitCause::Throttled => "throttled",
            WaitCause::Softirq => "softirq",
            WaitCause::Idle => "idle",
            WaitCause::Kthread => "kthread",
            WaitCause::SameCgroup => "same_cgroup",
            WaitCause::OtherCgroup => "other_cgroup",
            WaitCause::ShortWaits => "short_waits",
        }
    }
}

#[derive(Debug, Deserialize, Serialize)]
pub struct PreemptedBy {
    pub same_cgroup: u64,
    pub other_cgroup: u64,
    pub kthread: u64,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct Preemptor {
    pub comm: String,
    pub cgroup: String,
    pub count: u64,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct RunqEvent {
    pub cpu: u32,
    pub ts_ns: u64,
    pub wait_ns: u64,
    /// Of the wait, the time the hypervisor took the vCPU.
    pub steal_ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub cgroup: String,
    pub ran_instead: Task,
    /// The cgroup whose exhausted CPU quota explains the wait (`ran_instead` only filled the CPU).
    #[serde(default)]
    pub throttled_cgroup: Option<String>,
    /// The wait began on another CPU (`cpu` is where it ended).
    #[serde(default)]
    pub migrated: Option<Migrated>,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct Migrated {
    pub from_cpu: u32,
    pub migrations: u32,
}

impl RunqEvent {
    /// The part of the wait the guest caused (the hypervisor's steal taken out).
    pub(super) fn guest_wait_ns(&self) -> u64 {
        self.wait_ns.saturating_sub(self.steal_ns)
    }
}

#[derive(Debug, Deserialize, Serialize)]
pub struct Task {
    pub pid: u32,
    pub comm: String,
    pub cgroup: String,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct ThrottlingRow {
    pub cgroup: String,
    pub quota_us: i64,
    pub period_us: i64,
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_ns: u64,
}

impl Report {
    pub fn parse(json: &str) -> Result<Self, String> {
        serde_json::from_str(json).map_err(|err| format!("report JSON: {err}"))
    }

    pub(super) fn runq_row(&self, cgroup: &str) -> Result<&RunqRow, String> {
        self.runq
            .iter()
            .find(|row| row.cgroup == cgroup)
            .ok_or_else(|| {
                let seen: Vec<&str> = self.runq.iter().map(|row| row.cgroup.as_str()).collect();
                self.annotate(format!("no runq row for cgroup {cgroup}; rows: {seen:?}"))
            })
    }

    /// Appends the lost-event counters to a failure message when any is non-zero.
    pub(super) fn annotate(&self, message: String) -> String {
        let lost: BTreeMap<&String, &u64> =
            self.lost_events.iter().filter(|(_, &n)| n > 0).collect();
        if lost.is_empty() {
            message
        } else {
            format!("{message}\n(stalltop lost events, which may explain it: {lost:?})")
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::checks::fixtures::THROTTLE;

    #[test]
    fn a_report_missing_a_contract_field_is_rejected() {
        let mut doc: Value = serde_json::from_str(THROTTLE).unwrap();
        doc.as_object_mut().unwrap().remove("throttling");
        assert!(Report::parse(&doc.to_string()).is_err());
    }
}
