//! The parts of `stalltop report --json` the matrix reads: what was recorded, and how each
//! probe family loaded.

use std::collections::BTreeMap;

use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Report {
    pub settings: Settings,
    pub warnings: Vec<String>,
    pub lost_events: BTreeMap<String, u64>,
    pub runq: Vec<RunqRow>,
    pub syscalls: Vec<SyscallRow>,
    pub softirq: Vec<SoftirqRow>,
    pub softirq_stolen: Vec<StolenRow>,
    /// Each probe family stalltop tried to load; absent from reports of a stalltop that does
    /// not say.
    pub probes: Option<Vec<ProbeFamily>>,
}

impl Report {
    pub fn parse(json: &str) -> Result<Self, String> {
        serde_json::from_str(json).map_err(|e| format!("the report JSON does not parse: {e}"))
    }
}

#[derive(Debug, Deserialize)]
pub struct Settings {
    /// `tp_btf` or `raw_tp`.
    pub attach: String,
    /// `unified` or `v1 cpu`.
    pub cgroup_hierarchy: String,
    /// The syscall mode; absent from reports of a stalltop without `--syscalls`.
    pub syscalls: Option<String>,
    /// `exact` (entry to exit), `off` (no softirq probes), or `sampled` (ticks; stalltop
    /// before softirq runs were timed in the cheap modes).
    pub softirq_time: String,
    /// `sampled` (sampler ticks start softirq delays) or `exact` (from the raise); absent from
    /// reports of a stalltop that timed them as it timed run time.
    pub softirq_delay: Option<String>,
    /// Where steal is read: `kvm`, `run queue` or `none`; absent from a stalltop that does not
    /// say.
    #[serde(default)]
    pub steal: Option<String>,
    /// `sched_info` or `wakeup`; absent from a stalltop that does not say.
    #[serde(default)]
    pub runq_wait: Option<String>,
    /// Where throttles are seen: `throttle_count` or `cpu.stat`; absent if not said.
    #[serde(default)]
    pub throttle: Option<String>,
}

/// How one recording measured each signal, from its settings ("" where it does not say).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Methods {
    pub softirq_time: String,
    pub softirq_delay: String,
    pub steal: String,
    pub runq_wait: String,
    pub throttle: String,
}

impl Methods {
    pub fn of(settings: &Settings) -> Methods {
        let said = |value: &Option<String>| value.clone().unwrap_or_default();
        Methods {
            softirq_time: settings.softirq_time.clone(),
            softirq_delay: said(&settings.softirq_delay),
            steal: said(&settings.steal),
            runq_wait: said(&settings.runq_wait),
            throttle: said(&settings.throttle),
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct RunqRow {
    pub cgroup: String,
    pub count: u64,
    pub max_ns: u64,
    pub total_ns: u64,
}

#[derive(Debug, Deserialize)]
pub struct SyscallRow {
    pub syscall: String,
    pub container: String,
    pub count: u64,
    /// Null when sampled.
    pub p50_ns: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub struct SoftirqRow {
    pub cpu: u32,
    pub vector: String,
    pub count: u64,
}

#[derive(Debug, Deserialize)]
pub struct StolenRow {
    pub comm: String,
    pub vector: String,
    pub count: u64,
}

/// One family of programs (sched, softirq, syscall, sampler) as stalltop loaded it.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct ProbeFamily {
    pub family: String,
    /// `tp_btf` or `raw_tp`.
    pub attach: String,
    pub loaded: bool,
    pub load_ms: Option<u64>,
    pub error: Option<String>,
    pub programs: Vec<Program>,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Program {
    pub name: String,
    /// Instructions the verifier processed; null where the kernel does not say (before 5.16).
    pub verified_insns: Option<u64>,
}
