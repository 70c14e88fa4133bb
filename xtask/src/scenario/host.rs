//! The contamination markers: system-wide forks during a scenario that it did not cause, the
//! load average before it started, and the time the host took from the scenario's vCPU (the VM
//! is shared with other workloads, and its host with other VMs).

use std::fs;

use anyhow::{Context, Result};
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Contamination {
    /// 1-minute load average just before the scenario started.
    pub loadavg_before: f64,
    /// Delta of /proc/stat `processes` (every fork and thread creation on the host).
    pub forks: u64,
    /// Threads the scenario itself created.
    pub own_forks: u64,
    /// `forks - own_forks`: somebody else's activity during the run.
    pub foreign_forks: u64,
    /// Steal time of the scenario's CPU during the run (/proc/stat, in USER_HZ ticks).
    pub steal_ns: u64,
}

/// Host counters taken before a scenario starts.
pub struct Before {
    loadavg: f64,
    forks: u64,
    cpu: usize,
    steal_ns: u64,
}

impl Before {
    pub fn take(cpu: usize) -> Result<Self> {
        Ok(Before {
            loadavg: loadavg_1m()?,
            forks: forks()?,
            cpu,
            steal_ns: steal_ns(cpu)?,
        })
    }

    pub fn contamination(&self, own_forks: u64) -> Result<Contamination> {
        let forks = forks()?.saturating_sub(self.forks);
        Ok(Contamination {
            loadavg_before: self.loadavg,
            forks,
            own_forks,
            foreign_forks: forks.saturating_sub(own_forks),
            steal_ns: steal_ns(self.cpu)?.saturating_sub(self.steal_ns),
        })
    }
}

fn forks() -> Result<u64> {
    let stat = fs::read_to_string("/proc/stat").context("read /proc/stat")?;
    stat.lines()
        .find_map(|line| line.strip_prefix("processes "))
        .context("/proc/stat has no `processes` line")?
        .trim()
        .parse()
        .context("/proc/stat `processes`")
}

pub fn loadavg_1m() -> Result<f64> {
    let text = fs::read_to_string("/proc/loadavg").context("read /proc/loadavg")?;
    text.split_whitespace()
        .next()
        .context("empty /proc/loadavg")?
        .parse()
        .context("/proc/loadavg")
}

/// The length of a /proc/stat tick (USER_HZ).
pub fn tick_ns() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    1_000_000_000 / hz.max(1) as u64
}

/// Time the host took from `cpu`'s vCPU (/proc/stat steal column), in ns.
pub fn steal_ns(cpu: usize) -> Result<u64> {
    let text = fs::read_to_string("/proc/stat").context("read /proc/stat")?;
    let name = format!("cpu{cpu}");
    let line = text
        .lines()
        .find(|line| line.split_whitespace().next() == Some(name.as_str()))
        .with_context(|| format!("/proc/stat has no {name} line"))?;
    let ticks: u64 = line
        .split_whitespace()
        .nth(8)
        .and_then(|field| field.parse().ok())
        .with_context(|| format!("/proc/stat: {line:?}"))?;
    Ok(ticks * tick_ns())
}
