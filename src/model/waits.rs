//! Syscalls that wait by design: a call whose job is to wait (for events,
//! a lock, a timer, a child, a signal, a message) or a read that sat off
//! the CPU waiting for data is not work that held a CPU, however long it
//! took, and is never a container's "worst syscall".

use super::SyscallRow;

/// Calls whose job is to wait, by their names in the syscall table.
const WAITING: &[&str] = &[
    "accept",
    "accept4",
    "clock_nanosleep",
    "connect",
    "epoll_pwait",
    "epoll_pwait2",
    "epoll_wait",
    "flock",
    "futex",
    "futex_wait",
    "futex_waitv",
    "io_getevents",
    "io_pgetevents",
    "io_uring_enter",
    "msgrcv",
    "mq_timedreceive",
    "nanosleep",
    "pause",
    "poll",
    "ppoll",
    "pselect6",
    "restart_syscall",
    "rt_sigsuspend",
    "rt_sigtimedwait",
    "select",
    "semop",
    "semtimedop",
    "vfork",
    "wait4",
    "waitid",
];

/// Reads that block until the other end of a socket, pipe or terminal
/// (or a disk) has data.
const READS: &[&str] = &["read", "readv", "recvfrom", "recvmmsg", "recvmsg"];

/// Does this row's time mostly measure waiting rather than work?
pub fn waits_by_design(row: &SyscallRow) -> bool {
    calls_wait_by_design(&row.syscall, row.oncpu_total_ns, row.total_ns)
}

/// The same for calls of `syscall` that held a CPU `oncpu_ns` of their
/// `wall_ns`: a read waited when under half of it ran on a CPU.
pub fn calls_wait_by_design(syscall: &str, oncpu_ns: u64, wall_ns: u64) -> bool {
    WAITING.contains(&syscall) || (READS.contains(&syscall) && oncpu_ns.saturating_mul(2) < wall_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(syscall: &str, total_ns: u64, oncpu_total_ns: u64) -> SyscallRow {
        SyscallRow {
            syscall: syscall.into(),
            container: "host".into(),
            count: 10,
            p50_ns: None,
            p99_ns: None,
            max_ns: total_ns,
            resolution_ns: None,
            distribution: None,
            total_ns,
            oncpu_total_ns,
            top_paths: Vec::new(),
        }
    }

    #[test]
    fn waiting_calls_and_blocked_reads_wait_by_design() {
        assert!(waits_by_design(&row("epoll_wait", 8_540_000_000, 1_000)));
        assert!(waits_by_design(&row("futex", 1_000, 900)));
        assert!(waits_by_design(&row("read", 2_000_000_000, 3_000_000)));
        // A read that spent its time in the kernel on a CPU (memory.stat,
        // /proc/slabinfo) is work.
        assert!(!waits_by_design(&row("read", 150_000_000, 148_000_000)));
        assert!(!waits_by_design(&row(
            "fadvise64",
            1_200_000_000,
            900_000_000
        )));
    }
}
