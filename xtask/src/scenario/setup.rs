//! Fixture work outside the measured window (populating memory, making zombie cgroups): done on
//! a named thread pinned to the damage CPU, so CPU 0 stays free and the vCPU stalls the host
//! causes on first touch of memory happen on CPU 1, before stalltop records.

use std::ffi::CString;
use std::io;
use std::thread;

use anyhow::{anyhow, Context, Result};

/// Runs `work` on a new thread named `comm` pinned to `cpu`, and waits for it.
pub fn on_cpu<T, F>(cpu: usize, comm: &str, work: F) -> Result<T>
where
    T: Send,
    F: FnOnce() -> Result<T> + Send,
{
    thread::scope(|scope| {
        thread::Builder::new()
            .spawn_scoped(scope, || {
                set_comm(comm)?;
                pin_current_thread(cpu)?;
                work()
            })
            .with_context(|| format!("spawn a `{comm}` thread"))?
            .join()
            .map_err(|_| anyhow!("the `{comm}` setup thread panicked"))?
    })
}

/// Pins the calling thread to `cpu` (which `task::ensure_cpu_allowed` has checked).
pub fn pin_current_thread(cpu: usize) -> Result<()> {
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET stays in bounds for the small CPU numbers the
    // scenarios use; pid 0 is the calling thread.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error()).with_context(|| format!("pin to CPU {cpu}"));
    }
    Ok(())
}

fn set_comm(comm: &str) -> Result<()> {
    let name = CString::new(comm).context("comm with a NUL byte")?;
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes (longer is cut).
    let rc = unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr(), 0, 0, 0) };
    if rc != 0 {
        return Err(io::Error::last_os_error()).with_context(|| format!("name thread {comm}"));
    }
    Ok(())
}

/// The calling thread's id.
pub fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u32 }
}
