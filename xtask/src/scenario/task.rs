//! Workload threads: the run window (deadline, cancellation), spawning named threads pinned to the
//! damage CPU inside a cgroup, and the clocks they measure with.

use std::ffi::CString;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::{self, Scope, ScopedJoinHandle};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

use super::cgroup::CpuCgroup;
use crate::interrupt;

/// The time box every workload loop obeys: it ends at the deadline, on cancellation (a failed or
/// panicked thread, an early return) or on SIGINT/SIGTERM.
pub struct Window {
    cpu: usize,
    start_ns: u64,
    deadline_ns: u64,
    cancelled: AtomicBool,
    spawned: AtomicU64,
}

/// Cancels the window when dropped; held by the code that spawns and joins the threads, so an
/// early return or a panic there stops every thread before the scope joins them.
pub struct CancelOnDrop<'a>(&'a Window);

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Cancels the window if its thread unwinds.
struct CancelOnPanic<'a>(&'a Window);

impl Drop for CancelOnPanic<'_> {
    fn drop(&mut self) {
        if thread::panicking() {
            self.0.cancel();
        }
    }
}

/// A spawned workload thread and its comm, for error messages.
pub struct Worker<'scope, T> {
    comm: &'static str,
    handle: ScopedJoinHandle<'scope, Result<T>>,
}

impl<T> Worker<'_, T> {
    pub fn join(self) -> Result<T> {
        self.handle
            .join()
            .map_err(|_| anyhow!("a `{}` thread panicked", self.comm))?
            .with_context(|| format!("a `{}` thread failed", self.comm))
    }
}

impl Window {
    /// Opens a window of `duration` starting now, for threads pinned to `cpu`.
    pub fn open(cpu: usize, duration: Duration) -> Self {
        let start_ns = monotonic_ns();
        Window {
            cpu,
            start_ns,
            deadline_ns: start_ns + duration.as_nanos() as u64,
            cancelled: AtomicBool::new(false),
            spawned: AtomicU64::new(0),
        }
    }

    pub fn start_ns(&self) -> u64 {
        self.start_ns
    }

    pub fn deadline_ns(&self) -> u64 {
        self.deadline_ns
    }

    pub fn cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst) || interrupt::requested()
    }

    /// True once the deadline has passed or the window was cancelled.
    pub fn over(&self) -> bool {
        self.cancelled() || monotonic_ns() >= self.deadline_ns
    }

    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
    }

    pub fn cancel_on_drop(&self) -> CancelOnDrop<'_> {
        CancelOnDrop(self)
    }

    /// Threads spawned so far: the forks this scenario itself caused.
    pub fn spawned(&self) -> u64 {
        self.spawned.load(Ordering::SeqCst)
    }

    /// Spawns `body` on a thread that first names itself `comm`, pins itself to the window's CPU
    /// and joins `cgroup`. A failure or panic in the thread cancels the window.
    pub fn spawn<'scope, 'env, T, F>(
        &'env self,
        scope: &'scope Scope<'scope, 'env>,
        comm: &'static str,
        cgroup: &'env CpuCgroup,
        body: F,
    ) -> Result<Worker<'scope, T>>
    where
        T: Send + 'scope,
        F: FnOnce() -> Result<T> + Send + 'scope,
    {
        self.spawn_pinned(scope, comm, Some(self.cpu), cgroup, body)
    }

    /// As `spawn`, pinned to `cpu` (None: free to run on any CPU).
    pub fn spawn_pinned<'scope, 'env, T, F>(
        &'env self,
        scope: &'scope Scope<'scope, 'env>,
        comm: &'static str,
        cpu: Option<usize>,
        cgroup: &'env CpuCgroup,
        body: F,
    ) -> Result<Worker<'scope, T>>
    where
        T: Send + 'scope,
        F: FnOnce() -> Result<T> + Send + 'scope,
    {
        let handle = thread::Builder::new()
            .spawn_scoped(scope, move || {
                let _cancel = CancelOnPanic(self);
                // Pin before joining the cgroup: the wait to migrate onto the busy CPU is then
                // not charged to the scenario's cgroup.
                let result = set_comm(comm)
                    .and_then(|()| cpu.map_or(Ok(()), pin_to_cpu))
                    .and_then(|()| cgroup.join_current_thread())
                    .and_then(|()| body());
                if result.is_err() {
                    self.cancel();
                }
                result
            })
            .with_context(|| format!("spawn a `{comm}` thread"))?;
        self.spawned.fetch_add(1, Ordering::SeqCst);
        Ok(Worker { comm, handle })
    }
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; both clocks used here always exist on Linux.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime({clock}) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC in nanoseconds (the clock of bpf_ktime_get_ns).
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time consumed by the calling thread.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Sleeps until CLOCK_MONOTONIC reaches `target_ns`, or returns early once the window is
/// cancelled (a signal interrupts the sleep).
pub fn sleep_until(window: &Window, target_ns: u64) -> Result<()> {
    let target = libc::timespec {
        tv_sec: (target_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (target_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: `target` is a valid timespec; no remaining time is requested (absolute sleep).
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &target,
                std::ptr::null_mut(),
            )
        };
        match rc {
            0 => return Ok(()),
            libc::EINTR if window.cancelled() => return Ok(()),
            libc::EINTR => continue,
            err => bail!("clock_nanosleep: {}", io::Error::from_raw_os_error(err)),
        }
    }
}

/// Busy-waits (on the CPU, no syscall) until CLOCK_MONOTONIC reaches `target_ns`.
/// Returns the longest jump between two consecutive clock reads: how long the CPU was taken
/// away meanwhile (an interrupt, a softirq, another task, or the host stopping the vCPU).
pub fn spin_until(target_ns: u64) -> u64 {
    let mut longest_jump = 0;
    let mut last = monotonic_ns();
    while last < target_ns {
        std::hint::spin_loop();
        let now = monotonic_ns();
        longest_jump = longest_jump.max(now - last);
        last = now;
    }
    longest_jump
}

/// Fails unless the calling process may run on `cpu`.
pub fn ensure_cpu_allowed(cpu: usize) -> Result<()> {
    // SAFETY: a zeroed cpu_set_t is empty; sched_getaffinity writes at most its size.
    let allowed = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(io::Error::last_os_error()).context("sched_getaffinity");
        }
        libc::CPU_ISSET(cpu, &set)
    };
    if !allowed {
        bail!("the scenarios inject their load on CPU {cpu}, which this process may not use (needs at least 2 CPUs)");
    }
    Ok(())
}

/// Pins the calling thread to `cpu` (which `ensure_cpu_allowed` has checked).
pub fn pin_to_cpu(cpu: usize) -> Result<()> {
    pin_thread_to_cpu(0, cpu)
}

/// Pins thread `tid` (0: the calling one) to `cpu`; a thread waiting for its CPU moves there.
pub fn pin_thread_to_cpu(tid: libc::pid_t, cpu: usize) -> Result<()> {
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET stays in bounds for cpu < CPU_SETSIZE (checked
    // by ensure_cpu_allowed before any thread starts).
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error())
            .with_context(|| format!("pin thread {tid} to CPU {cpu}"));
    }
    Ok(())
}

/// The calling thread's id.
pub fn gettid() -> libc::pid_t {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// The CPU the calling thread runs on.
pub fn current_cpu() -> Result<usize> {
    // SAFETY: sched_getcpu has no preconditions.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).map_err(|_| anyhow!("sched_getcpu: {}", io::Error::last_os_error()))
}

/// Makes the calling thread SCHED_FIFO at `priority` (its cgroup must have a real-time budget).
pub fn become_real_time(priority: i32) -> Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: sched_setscheduler reads `param`, alive for the call; pid 0 is the calling thread.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc != 0 {
        return Err(io::Error::last_os_error()).context("SCHED_FIFO");
    }
    Ok(())
}

/// Sets the calling thread's comm (what the kernel, and so stalltop, calls it).
pub fn set_comm(comm: &str) -> Result<()> {
    let name = CString::new(comm).context("comm with a NUL byte")?;
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes (longer is cut).
    let rc = unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr(), 0, 0, 0) };
    if rc != 0 {
        return Err(io::Error::last_os_error()).with_context(|| format!("name thread {comm}"));
    }
    Ok(())
}

/// Lets the calling thread's timers fire on time instead of up to 50 us late (default slack).
pub fn set_min_timer_slack() -> Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer; 1 ns is the minimum.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    if rc != 0 {
        return Err(io::Error::last_os_error()).context("PR_SET_TIMERSLACK");
    }
    Ok(())
}
