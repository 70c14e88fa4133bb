//! Whether the kernel keeps sched_info (each task's run-queue wait), proven by making two
//! threads of ours wait for one CPU and seeing their waits grow. Before Linux 5.14 the kernel
//! keeps it only with CONFIG_SCHEDSTATS or delay accounting on (the `nodelayacct` boot option
//! turns that off); then /proc/<pid>/schedstat still exists but reads `0 0 0`, and probes
//! that trusted it would see no wait at all.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};

/// How long the two threads take turns on one CPU: many scheduler slices, so each waits for
/// the other for about half of it.
const CONTEST: Duration = Duration::from_millis(20);

/// Whether sched_info grows: two threads pinned to one CPU spin for `CONTEST` together, and
/// the waits `read_run_delay` gives for each (the calling thread's run_delay in ns, as
/// /proc/thread-self/schedstat says) must grow. False without the file.
pub fn kept(read_run_delay: &(dyn Fn() -> Option<u64> + Sync)) -> bool {
    if read_run_delay().is_none() {
        return false;
    }
    let cpu = sched_getaffinity(None)
        .ok()
        .and_then(|set| (0..CpuSet::MAX_CPU).find(|&cpu| set.is_set(cpu)));
    let start = Barrier::new(2);
    let grew = std::thread::scope(|scope| {
        let contenders: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(|| {
                    if let Some(cpu) = cpu {
                        let mut one = CpuSet::new();
                        one.set(cpu);
                        // Unpinned, the threads may run side by side and wait for nothing: the
                        // answer is then "not kept", and waits are timed from wakeups.
                        let _ = sched_setaffinity(None, &one);
                    }
                    start.wait();
                    let before = read_run_delay();
                    let until = Instant::now() + CONTEST;
                    while Instant::now() < until {
                        std::hint::spin_loop();
                    }
                    let after = read_run_delay();
                    matches!((before, after), (Some(b), Some(a)) if a > b)
                })
            })
            .collect();
        contenders
            .into_iter()
            .map(|c| c.join().unwrap_or(false))
            .collect::<Vec<_>>()
    });
    grew.into_iter().any(|g| g)
}

/// The calling thread's run_delay (ns waited on a run queue); None without the file
/// (no CONFIG_SCHED_INFO).
pub fn thread_run_delay() -> Option<u64> {
    parse_run_delay(&std::fs::read_to_string("/proc/thread-self/schedstat").ok()?)
}

/// The second of schedstat's three numbers: time on the CPU, time waiting, slices.
fn parse_run_delay(schedstat: &str) -> Option<u64> {
    schedstat.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_is_schedstats_second_number() {
        assert_eq!(parse_run_delay("8520461 170733 42\n"), Some(170733));
        assert_eq!(parse_run_delay("0 0 0\n"), Some(0));
        assert_eq!(parse_run_delay("8520461\n"), None);
    }

    /// This host keeps sched_info: two threads on one CPU see their waits grow.
    #[test]
    fn this_kernel_keeps_sched_info() {
        assert!(kept(&thread_run_delay));
    }

    /// What a kernel before 5.14 without schedstats or delay accounting shows: `0 0 0`.
    #[test]
    fn a_wait_that_never_grows_is_not_kept() {
        assert!(!kept(&|| parse_run_delay("0 0 0\n")));
    }

    #[test]
    fn no_file_is_not_kept() {
        assert!(!kept(&|| None));
    }
}
