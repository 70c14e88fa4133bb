//! Fixture work outside the measured window (populating memory, making zombie cgroups): done on
//! a named thread pinned to the damage CPU, so CPU 0 stays free and the vCPU stalls the host
//! causes on first touch of memory happen on CPU 1, before stalltop records.

use std::thread;

use anyhow::{anyhow, Context, Result};

use super::task;

/// Runs `work` on a new thread named `comm` pinned to `cpu`, and waits for it.
pub fn on_cpu<T, F>(cpu: usize, comm: &str, work: F) -> Result<T>
where
    T: Send,
    F: FnOnce() -> Result<T> + Send,
{
    thread::scope(|scope| {
        thread::Builder::new()
            .spawn_scoped(scope, || {
                task::set_comm(comm)?;
                task::pin_to_cpu(cpu)?;
                work()
            })
            .with_context(|| format!("spawn a `{comm}` thread"))?
            .join()
            .map_err(|_| anyhow!("the `{comm}` setup thread panicked"))?
    })
}

/// The calling thread's id.
pub fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u32 }
}
