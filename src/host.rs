//! Facts about this machine read from /proc and the clocks: host info for
//! headers, the ksoftirqd threads, CLOCK_MONOTONIC (the BPF clock).

use std::fs;

use crate::stream::HostInfo;

pub fn info() -> HostInfo {
    let read = |path: &str| {
        fs::read_to_string(path)
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into())
    };
    HostInfo {
        hostname: read("/proc/sys/kernel/hostname"),
        kernel: read("/proc/sys/kernel/osrelease"),
        cpus: online_cpus(),
    }
}

fn online_cpus() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u32::try_from(n).unwrap_or(1).max(1)
}

/// (cpu, thread id) of every `ksoftirqd/N` kernel thread.
pub fn ksoftirqd_threads() -> Vec<(u32, u32)> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut threads: Vec<(u32, u32)> = dir
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let tid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let comm = fs::read_to_string(entry.path().join("comm")).ok()?;
            let cpu = comm.trim().strip_prefix("ksoftirqd/")?.parse().ok()?;
            Some((cpu, tid))
        })
        .collect();
    threads.sort_unstable();
    threads
}

/// CLOCK_MONOTONIC in ns: the clock of bpf_ktime_get_ns().
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Unix time minus CLOCK_MONOTONIC, in ns.
pub fn wall_clock_offset_ns() -> i64 {
    clock_ns(libc::CLOCK_REALTIME) as i64 - monotonic_ns() as i64
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; both clocks always exist.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cpu_has_a_ksoftirqd() {
        let threads = ksoftirqd_threads();
        let cpus: Vec<u32> = threads.iter().map(|&(cpu, _)| cpu).collect();
        assert_eq!(cpus, (0..info().cpus).collect::<Vec<_>>(), "{threads:?}");
    }

    #[test]
    fn monotonic_clock_advances() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(a > 0 && b >= a);
    }
}
