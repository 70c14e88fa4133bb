//! The contamination marker: system-wide forks during a scenario that it did not cause, and the
//! load average before it started (the VM is shared with other workloads).

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
}

/// Host counters taken before a scenario starts.
pub struct Before {
    loadavg: f64,
    forks: u64,
}

impl Before {
    pub fn take() -> Result<Self> {
        Ok(Before {
            loadavg: loadavg_1m()?,
            forks: forks()?,
        })
    }

    pub fn contamination(&self, own_forks: u64) -> Result<Contamination> {
        let forks = forks()?.saturating_sub(self.forks);
        Ok(Contamination {
            loadavg_before: self.loadavg,
            forks,
            own_forks,
            foreign_forks: forks.saturating_sub(own_forks),
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
