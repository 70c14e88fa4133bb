//! Pod churn as an operator's node meets it, for the fleet test: containers (v1 cpu cgroups on
//! CPU 1) that live a second each, one after another, then one that keeps running. Each runs
//! the victim's 1 ms waker, so the probes see its tasks wait for a CPU.

use std::thread;
use std::time::Duration;

use anyhow::Result;

use super::cgroup::{CpuCgroup, ScenarioLock};
use super::task::Window;
use super::{victim, CPU};

/// How many containers come and go before the live one starts.
pub const SHORT_LIVED: usize = 10;
const PREFIX: &str = "stalltop_pod";
const LIFE: Duration = Duration::from_secs(1);
/// The live container's waker stops by then whatever happens (a safety net: the caller ends it).
const LIVE_MAX: Duration = Duration::from_secs(300);

/// The containers' labels (their cgroup paths): removed, and still running.
pub struct Churned {
    pub gone: Vec<String>,
    pub live: String,
}

/// Runs the short-lived containers, then `while_live` while the live one runs; returns what
/// `while_live` returned, once the live container is removed too.
pub fn run<T>(while_live: impl FnOnce(&Churned) -> Result<T>) -> Result<T> {
    let _lock = ScenarioLock::acquire()?;
    let mut gone = Vec::new();
    for i in 0..SHORT_LIVED {
        let cgroup = CpuCgroup::create(&format!("{PREFIX}{i}"))?;
        let window = Window::open(CPU, LIFE);
        thread::scope(|scope| {
            window
                .spawn(scope, victim::COMM, &cgroup, || victim::run(&window))?
                .join()
        })?;
        gone.push(cgroup.path().to_owned());
    }
    let cgroup = CpuCgroup::create(&format!("{PREFIX}_live"))?;
    let window = Window::open(CPU, LIVE_MAX);
    thread::scope(|scope| {
        let _cancel = window.cancel_on_drop();
        let waker = window.spawn(scope, victim::COMM, &cgroup, || victim::run(&window))?;
        let result = while_live(&Churned {
            gone,
            live: cgroup.path().to_owned(),
        });
        window.cancel();
        waker.join()?;
        result
    })
}
