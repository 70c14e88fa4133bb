//! What the bench reads about an attached tool's process: the run counts
//! and run times of the BPF programs it holds (from its fdinfo, while
//! kernel.bpf_stats_enabled is on), their names, and its CPU time.

use std::collections::{BTreeMap, HashMap};
use std::process::Command;

use anyhow::{Context, Result};

/// Invocations and total run time of the programs on one tracepoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgramCost {
    pub invocations: u64,
    pub ns: u64,
}

impl ProgramCost {
    pub fn ns_per_invocation(self) -> Option<f64> {
        (self.invocations > 0).then(|| self.ns as f64 / self.invocations as f64)
    }
}

/// kernel.bpf_stats_enabled=1 while held; restored on drop.
pub struct StatsOn {
    previous: String,
}

const STATS_SYSCTL: &str = "/proc/sys/kernel/bpf_stats_enabled";

impl StatsOn {
    pub fn enable() -> Result<StatsOn> {
        let previous = std::fs::read_to_string(STATS_SYSCTL)?.trim().to_string();
        std::fs::write(STATS_SYSCTL, "1").context("enabling kernel.bpf_stats_enabled")?;
        Ok(StatsOn { previous })
    }
}

impl Drop for StatsOn {
    fn drop(&mut self) {
        let _ = std::fs::write(STATS_SYSCTL, &self.previous);
    }
}

/// prog id -> (run_cnt, run_time_ns) of the BPF programs process `pid`
/// holds, from its fdinfo.
pub fn program_counters(pid: u32) -> Result<HashMap<u32, ProgramCost>> {
    let mut out = HashMap::new();
    for fd in std::fs::read_dir(format!("/proc/{pid}/fdinfo"))?.flatten() {
        let Ok(info) = std::fs::read_to_string(fd.path()) else {
            continue;
        };
        let field = |name: &str| -> Option<u64> {
            info.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse().ok())
        };
        if let (Some(id), Some(invocations), Some(ns)) =
            (field("prog_id:"), field("run_cnt:"), field("run_time_ns:"))
        {
            out.insert(id as u32, ProgramCost { invocations, ns });
        }
    }
    Ok(out)
}

/// What the programs did between two readings of `program_counters`, by
/// tracepoint (`tracepoint_of` their names; programs on one tracepoint,
/// such as a sampler's one per CPU, are summed).
pub fn cost_by_tracepoint(
    before: &HashMap<u32, ProgramCost>,
    after: &HashMap<u32, ProgramCost>,
    names: &HashMap<u32, String>,
) -> BTreeMap<String, ProgramCost> {
    let mut out: BTreeMap<String, ProgramCost> = BTreeMap::new();
    for (id, now) in after {
        let then = before.get(id).copied().unwrap_or_default();
        let name = names.get(id).map_or("unnamed", String::as_str);
        let entry = out.entry(tracepoint_of(name).to_string()).or_default();
        entry.invocations += now.invocations - then.invocations;
        entry.ns += now.ns - then.ns;
    }
    out
}

/// The tracepoint a program is on, from its name: stalltop's `btf_`/`raw_`
/// twins, the bench's `flr_`/`min_` programs and runqlat's raw_tp
/// `handle_` programs name it after their prefix; the bcc tools' tp_btf
/// and tracepoint programs are named after it.
pub fn tracepoint_of(program: &str) -> &str {
    ["btf_", "raw_", "flr_", "min_", "handle_"]
        .iter()
        .find_map(|prefix| program.strip_prefix(prefix))
        .unwrap_or(program)
}

/// prog id -> name, from bpftool (which reads full names from BTF; the
/// kernel keeps only 15 characters).
pub fn program_names() -> Result<HashMap<u32, String>> {
    let out = Command::new("bpftool")
        .args(["prog", "show", "-j"])
        .output()
        .context("running bpftool (install bpftool)")?;
    let progs: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout)?;
    Ok(progs
        .iter()
        .filter_map(|p| Some((p["id"].as_u64()? as u32, p["name"].as_str()?.to_string())))
        .collect())
}

/// utime + stime of a process, in seconds.
pub fn process_cpu_s(pid: u32) -> Result<f64> {
    let stat = procfs::process::Process::new(pid as i32)
        .and_then(|p| p.stat())
        .with_context(|| format!("/proc/{pid}/stat"))?;
    Ok((stat.utime + stat.stime) as f64 / procfs::ticks_per_second() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_of_every_tool_are_keyed_by_their_tracepoint() {
        for (program, tracepoint) in [
            ("btf_sched_switch", "sched_switch"),
            ("raw_sys_exit", "sys_exit"),
            ("flr_sched_wakeup", "sched_wakeup"),
            ("min_sys_enter", "sys_enter"),
            ("handle_sched_switch", "sched_switch"),
            ("sched_switch", "sched_switch"),
            ("cpu_sample", "cpu_sample"),
        ] {
            assert_eq!(tracepoint_of(program), tracepoint, "{program}");
        }
    }

    #[test]
    fn deltas_are_summed_per_tracepoint_and_new_programs_count_from_zero() {
        let cost = |invocations, ns| ProgramCost { invocations, ns };
        let names: HashMap<u32, String> =
            [(1, "cpu_sample"), (2, "cpu_sample"), (3, "btf_sys_exit")]
                .map(|(id, n)| (id, n.to_string()))
                .into();
        let before = HashMap::from([(1, cost(10, 1000)), (2, cost(5, 500))]);
        let after = HashMap::from([(1, cost(20, 2000)), (2, cost(15, 1500)), (3, cost(4, 400))]);
        let by_tp = cost_by_tracepoint(&before, &after, &names);
        assert_eq!(by_tp["cpu_sample"], cost(20, 2000));
        assert_eq!(by_tp["sys_exit"], cost(4, 400));
        assert_eq!(by_tp["sys_exit"].ns_per_invocation(), Some(100.0));
        assert_eq!(cost(0, 0).ns_per_invocation(), None);
    }
}
