//! The contamination markers: system-wide forks during a scenario that it did not cause, the
//! CPU time other processes used meanwhile, the load average before it started, and the time the
//! host took from the scenario's vCPU (the VM is shared with other workloads, and its host with
//! other VMs).

use std::collections::HashMap;
use std::fs;
use std::path::PathBuf;

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
    /// CPU time (user and system, /proc/<pid>/stat, with that of reaped children) of the
    /// user-space processes that are not this one or its descendants, during the run: one busy
    /// process forks little but can hold the scenario's CPU for milliseconds at a time (seen: a
    /// compiler, 11 ms, in a run with 94 forks).
    pub foreign_cpu_ns: u64,
    /// How long the run took, from these counters' first read to their last.
    pub window_ns: u64,
    /// Steal time of the scenario's CPU during the run (/proc/stat, in USER_HZ ticks).
    pub steal_ns: u64,
}

/// Host counters taken before a scenario starts.
pub struct Before {
    taken: std::time::Instant,
    loadavg: f64,
    forks: u64,
    processes: HashMap<u32, Process>,
    cpu: usize,
    steal_ns: u64,
}

impl Before {
    pub fn take(cpu: usize) -> Result<Self> {
        Ok(Before {
            taken: std::time::Instant::now(),
            loadavg: loadavg_1m()?,
            forks: forks()?,
            processes: processes()?,
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
            foreign_cpu_ns: foreign_cpu_ns(&self.processes, &processes()?),
            window_ns: self.taken.elapsed().as_nanos() as u64,
            steal_ns: steal_ns(self.cpu)?.saturating_sub(self.steal_ns),
        })
    }
}

/// A user-space process as /proc/<pid>/stat shows it.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Process {
    ppid: u32,
    /// utime + stime + cutime + cstime, in /proc/stat ticks (USER_HZ): its own time and that of
    /// the children it reaped, so a compiler that came and went during the run counts in the
    /// build tool that waited for it.
    cpu_ticks: u64,
}

/// Every process's pid and its /proc directory.
pub fn proc_pids() -> Result<Vec<(u32, PathBuf)>> {
    let mut pids = Vec::new();
    for entry in fs::read_dir("/proc").context("read /proc")? {
        let entry = entry.context("read /proc")?;
        if let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) {
            pids.push((pid, entry.path()));
        }
    }
    Ok(pids)
}

/// Every user-space process now (kernel threads are the kernel's own work, judged by the
/// scenarios' other markers).
fn processes() -> Result<HashMap<u32, Process>> {
    const PF_KTHREAD: u64 = 0x0020_0000;
    let mut processes = HashMap::new();
    for (pid, dir) in proc_pids()? {
        // A process may exit between the listing and the read.
        let Ok(stat) = fs::read_to_string(dir.join("stat")) else {
            continue;
        };
        // Fields after the comm, which may hold spaces and parentheses: state is field 3.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
        let (Some(ppid), Some(flags), Some(utime), Some(stime), Some(cutime), Some(cstime)) = (
            field(4),
            field(9),
            field(14),
            field(15),
            field(16),
            field(17),
        ) else {
            continue;
        };
        if flags & PF_KTHREAD == 0 {
            let cpu_ticks = utime + stime + cutime + cstime;
            processes.insert(
                pid,
                Process {
                    ppid: ppid as u32,
                    cpu_ticks,
                },
            );
        }
    }
    Ok(processes)
}

/// The CPU time processes other than this one and its descendants used between the two
/// listings. A process new in `after` counts whole; one gone since `before` was reaped, its time
/// moved into its parent's: what it had before is taken out again.
fn foreign_cpu_ns(before: &HashMap<u32, Process>, after: &HashMap<u32, Process>) -> u64 {
    foreign_cpu_ticks(before, after, std::process::id()) * tick_ns()
}

fn foreign_cpu_ticks(
    before: &HashMap<u32, Process>,
    after: &HashMap<u32, Process>,
    own_pid: u32,
) -> u64 {
    let used: u64 = after
        .iter()
        .filter(|(&pid, _)| !descends_from(after, pid, own_pid))
        .map(|(pid, process)| {
            let earlier = before.get(pid).map_or(0, |p| p.cpu_ticks);
            process.cpu_ticks.saturating_sub(earlier)
        })
        .sum();
    let gone: u64 = before
        .iter()
        .filter(|(pid, _)| !after.contains_key(pid))
        .filter(|(&pid, _)| !descends_from(before, pid, own_pid))
        .map(|(_, process)| process.cpu_ticks)
        .sum();
    used.saturating_sub(gone)
}

/// Whether `pid` is `ancestor` or one of its descendants in `processes`.
fn descends_from(processes: &HashMap<u32, Process>, mut pid: u32, ancestor: u32) -> bool {
    // Bounded: a pid's parent chain ends at 0 or at a process not listed.
    for _ in 0..64 {
        if pid == ancestor {
            return true;
        }
        match processes.get(&pid) {
            Some(process) if process.ppid != 0 => pid = process.ppid,
            _ => return false,
        }
    }
    false
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

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(processes: &[(u32, u32, u64)]) -> HashMap<u32, Process> {
        processes
            .iter()
            .map(|&(pid, ppid, cpu_ticks)| (pid, Process { ppid, cpu_ticks }))
            .collect()
    }

    #[test]
    fn foreign_cpu_is_what_other_processes_used_meanwhile() {
        // 100 is this process; 101 its child (stalltop), 102 a grandchild, 103 a child that
        // exits; 1 init; 50 a busy editor; 60 starts during the run; 70 a build tool whose
        // compiler 71 (3 ticks so far) exits and is reaped, 72 comes and goes.
        let before = listing(&[
            (1, 0, 7),
            (50, 1, 1000),
            (70, 1, 2),
            (71, 70, 3),
            (100, 1, 5),
            (101, 100, 3),
            (103, 100, 9),
        ]);
        let after = listing(&[
            (1, 0, 8),
            (50, 1, 1012),
            (60, 1, 4),
            (70, 1, 2 + 3 + 40 + 25),
            (100, 1, 400),
            (101, 100, 90),
            (102, 101, 30),
        ]);
        assert_eq!(
            foreign_cpu_ticks(&before, &after, 100),
            1 + 12 + 4 + (40 + 25)
        );
    }

    #[test]
    fn this_machine_lists_this_process_and_not_kernel_threads() {
        let now = processes().unwrap();
        assert!(now.contains_key(&std::process::id()));
        // kthreadd (pid 2) is a kernel thread.
        assert!(!now.contains_key(&2));
    }
}
