//! Bursty multi-threaded requests named `burstreq`: every 250 ms a barrier fans a request out to
//! 4 worker threads that each burn a fixed amount of their own CPU time, and the request ends
//! when all 4 are done.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::Scope;
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;

use super::cgroup::CpuCgroup;
use super::stats::Percentiles;
use super::task::{self, Window, Worker};

pub const COMM: &str = "burstreq";
/// v1 cpu cgroup of the requests (a CFS quota is set on it by the throttle scenario only).
pub const CGROUP: &str = "stalltop_throttled";

const INTERVAL_NS: u64 = 250_000_000;
const WORKERS: usize = 4;
/// Each burst needs 16 ms of CPU (average demand 0.064 CPU): more than a 15 ms quota allows.
pub const HEAVY_BURN_NS: u64 = 4_000_000;
/// Each burst needs 6 ms: on one CPU no worker can queue 10 ms behind its siblings, as it can
/// with the heavy load (3 x 4 ms), so a quiet run has no run-queue wait over the default
/// threshold.
pub const LIGHT_BURN_NS: u64 = 1_500_000;
/// A burst still running this long after the deadline gives up (it is starved or throttled).
const GRACE_NS: u64 = 1_000_000_000;
/// How often a thread waiting at a barrier checks for cancellation.
const CANCEL_POLL: Duration = Duration::from_millis(50);

#[derive(Clone, Copy, Debug, Serialize)]
pub struct RequestStats {
    /// Fan-out to the last worker's fan-in.
    pub latency: Percentiles,
    /// Request slots skipped because the previous request was still running.
    pub missed_intervals: u64,
}

/// The coordinator and workers of one run.
pub struct Requests<'scope> {
    coordinator: Worker<'scope, RequestStats>,
    workers: Vec<Worker<'scope, ()>>,
}

/// A reusable barrier whose waiters give up when the window is cancelled, so a worker that
/// failed before arriving cannot leave the others blocked forever.
struct Barrier {
    parties: usize,
    state: Mutex<(usize, u64)>,
    released: Condvar,
}

/// What coordinator and workers share.
struct Shared {
    fan_out: Barrier,
    fan_in: Barrier,
    quit: AtomicBool,
}

impl Barrier {
    fn new(parties: usize) -> Self {
        Barrier {
            parties,
            state: Mutex::new((0, 0)),
            released: Condvar::new(),
        }
    }

    /// Returns false if the window was cancelled before every party arrived.
    fn wait(&self, window: &Window) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let generation = state.1;
        state.0 += 1;
        if state.0 == self.parties {
            *state = (0, generation + 1);
            self.released.notify_all();
            return true;
        }
        while state.1 == generation {
            if window.cancelled() {
                return false;
            }
            state = self
                .released
                .wait_timeout(state, CANCEL_POLL)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }
}

impl<'scope> Requests<'scope> {
    /// Starts the coordinator and the workers, all in `cgroup`; each worker burns `burn_ns` of
    /// CPU time per request.
    pub fn spawn<'env>(
        scope: &'scope Scope<'scope, 'env>,
        window: &'env Window,
        cgroup: &'env CpuCgroup,
        burn_ns: u64,
    ) -> Result<Self> {
        let shared = Arc::new(Shared {
            fan_out: Barrier::new(WORKERS + 1),
            fan_in: Barrier::new(WORKERS + 1),
            quit: AtomicBool::new(false),
        });
        let mut workers = Vec::with_capacity(WORKERS);
        for _ in 0..WORKERS {
            let shared = Arc::clone(&shared);
            workers.push(window.spawn(scope, COMM, cgroup, move || {
                work(window, &shared, burn_ns);
                Ok(())
            })?);
        }
        let coordinator = window.spawn(scope, COMM, cgroup, move || coordinate(window, &shared))?;
        Ok(Requests {
            coordinator,
            workers,
        })
    }

    pub fn join(self) -> Result<RequestStats> {
        let stats = self.coordinator.join();
        for worker in self.workers {
            worker.join()?;
        }
        stats
    }
}

fn coordinate(window: &Window, shared: &Shared) -> Result<RequestStats> {
    let mut latencies = Vec::new();
    let mut missed_intervals = 0;
    let mut next = task::monotonic_ns();
    while next < window.deadline_ns() {
        task::sleep_until(window, next)?;
        if window.cancelled() {
            break;
        }
        let start = task::monotonic_ns();
        if !shared.fan_out.wait(window) || !shared.fan_in.wait(window) {
            break;
        }
        let end = task::monotonic_ns();
        latencies.push(end - start);
        next += INTERVAL_NS;
        while next <= end {
            next += INTERVAL_NS;
            missed_intervals += 1;
        }
    }
    shared.quit.store(true, Ordering::SeqCst);
    shared.fan_out.wait(window);
    Ok(RequestStats {
        latency: Percentiles::of(latencies),
        missed_intervals,
    })
}

fn work(window: &Window, shared: &Shared, burn_ns: u64) {
    let give_up = window.deadline_ns() + GRACE_NS;
    while shared.fan_out.wait(window) && !shared.quit.load(Ordering::SeqCst) {
        let until = task::thread_cpu_ns() + burn_ns;
        while task::thread_cpu_ns() < until && !window.cancelled() && task::monotonic_ns() < give_up
        {
            std::hint::spin_loop();
        }
        if !shared.fan_in.wait(window) {
            break;
        }
    }
}
