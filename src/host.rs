//! Facts about this machine read from /proc, /sys and the clocks: host info
//! for headers, the ksoftirqd threads, CLOCK_MONOTONIC (the BPF clock).

use std::fs;

use rustix::time::{clock_gettime, ClockId, Timespec};

use crate::cpulist::CpuList;
use crate::stream::HostInfo;
use crate::vm::Machine;

pub fn info() -> HostInfo {
    let read = |path: &str| {
        fs::read_to_string(path)
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into())
    };
    // Without sysfs, as many as the process may use, numbered from 0.
    let online = CpuList::online().unwrap_or_else(|_| {
        let count = std::thread::available_parallelism().map_or(1, |n| n.get());
        CpuList::first(u32::try_from(count).unwrap_or(1))
    });
    // A DaemonSet's pod has its own host name; its manifest passes the node's.
    let hostname = std::env::var("NODE_NAME")
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| read("/proc/sys/kernel/hostname"));
    HostInfo {
        hostname,
        kernel: read("/proc/sys/kernel/osrelease"),
        cpus: u32::try_from(online.len()).unwrap_or(u32::MAX).max(1),
        online: Some(online),
        machine: Some(Machine::detect()),
    }
}

/// (cpu, thread id) of every `ksoftirqd/N` kernel thread.
pub fn ksoftirqd_threads() -> Vec<(u32, u32)> {
    let Ok(processes) = procfs::process::all_processes() else {
        return Vec::new();
    };
    let mut threads: Vec<(u32, u32)> = processes
        .flatten()
        .filter_map(|process| {
            let stat = process.stat().ok()?;
            let cpu = stat.comm.strip_prefix("ksoftirqd/")?.parse().ok()?;
            Some((cpu, u32::try_from(process.pid).ok()?))
        })
        .collect();
    threads.sort_unstable();
    threads
}

/// CLOCK_MONOTONIC in ns: the clock of bpf_ktime_get_ns().
pub fn monotonic_ns() -> u64 {
    ns(clock_gettime(ClockId::Monotonic))
}

/// CPU time this process used, all threads, in ns.
pub fn process_cpu_ns() -> u64 {
    ns(clock_gettime(ClockId::ProcessCPUTime))
}

/// Unix time minus CLOCK_MONOTONIC, in ns.
pub fn wall_clock_offset_ns() -> i64 {
    ns(clock_gettime(ClockId::Realtime)) as i64 - monotonic_ns() as i64
}

fn ns(ts: Timespec) -> u64 {
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_online_cpu_has_a_ksoftirqd() {
        let threads = ksoftirqd_threads();
        let cpus: Vec<u32> = threads.iter().map(|&(cpu, _)| cpu).collect();
        let online: Vec<u32> = info().online_cpus().iter().collect();
        assert_eq!(cpus, online, "{threads:?}");
    }

    #[test]
    fn monotonic_clock_advances() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(a > 0 && b >= a);
    }
}
