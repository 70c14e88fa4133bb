//! CFS throttling (docs/cases.md, case 3): bursty 4-thread requests in a cgroup whose quota
//! (15 ms per 100 ms) is above their average demand but below one 16 ms burst, so most requests
//! are throttled until the next period (a burst can escape: the kernel notices the exhausted
//! quota only at the next tick or context switch, and the burst is just 1 ms over it).

use std::thread;
use std::time::Duration;

use anyhow::Result;

use super::burstreq::{self, Requests};
use super::cgroup::CpuCgroup;
use super::task::Window;
use super::{Cgroups, CpuStatDelta, Measured};
use crate::interrupt;

const PERIOD_US: u64 = 100_000;
const QUOTA_US: u64 = 15_000;
const LINGER: Duration = Duration::from_secs(1);

pub fn run(window: &Window) -> Result<Measured> {
    let cgroup = CpuCgroup::create(burstreq::CGROUP)?;
    cgroup.set_bandwidth(PERIOD_US, QUOTA_US)?;
    let start = cgroup.cpu_stat()?;
    let requests = thread::scope(|scope| {
        let _cancel = window.cancel_on_drop();
        Requests::spawn(scope, window, &cgroup, burstreq::HEAVY_BURN_NS)?.join()
    })?;
    let cpu_stat = CpuStatDelta::since(&cgroup, start)?;
    // A recorder that polls cpu.stat must get one more look at the final counters before the
    // cgroup disappears; the cgroup is idle now, so lingering changes nothing else.
    if !interrupt::requested() {
        thread::sleep(LINGER);
    }
    Ok(Measured {
        cgroups: Cgroups {
            requests: Some(cgroup.path().to_owned()),
            ..Cgroups::default()
        },
        requests: Some(requests),
        cpu_stat: Some(cpu_stat),
        ..Measured::default()
    })
}
