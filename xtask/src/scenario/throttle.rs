//! CFS throttling (docs/cases.md, case 3): bursty 4-thread requests in a cgroup whose quota
//! (15 ms per 100 ms) is above their average demand but below one 16 ms burst, so most requests
//! are throttled until the next period (a burst can escape: the kernel notices the exhausted
//! quota only at the next tick or context switch, and the burst is just 1 ms over it). A
//! bystander `hog` of a light cgroup (an eighth of the requests' weight, so the bursts still
//! run into the quota early in a period) fills the CPU while they are throttled: their waits
//! must blame the quota, not it.

use std::thread;
use std::time::Duration;

use anyhow::Result;

use super::burstreq::{self, Requests};
use super::cgroup::CpuCgroup;
use super::task::Window;
use super::{hog, Cgroups, CpuStatDelta, Measured};
use crate::interrupt;

const PERIOD_US: u64 = 100_000;
const QUOTA_US: u64 = 15_000;
const LINGER: Duration = Duration::from_secs(1);
const BYSTANDER_CGROUP: &str = "stalltop_bystander";
const BYSTANDER_SHARES: u64 = 128;

pub fn run(window: &Window) -> Result<Measured> {
    let cgroup = CpuCgroup::create(burstreq::CGROUP)?;
    cgroup.set_bandwidth(PERIOD_US, QUOTA_US)?;
    let bystander = CpuCgroup::create(BYSTANDER_CGROUP)?;
    bystander.set_shares(BYSTANDER_SHARES)?;
    let start = cgroup.cpu_stat()?;
    let requests = thread::scope(|scope| {
        let _cancel = window.cancel_on_drop();
        let hog = window.spawn(scope, hog::COMM, &bystander, || hog::run(window))?;
        let requests = Requests::spawn(scope, window, &cgroup, burstreq::HEAVY_BURN_NS)?.join();
        hog.join()?;
        requests
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
            noisy: Some(bystander.path().to_owned()),
            ..Cgroups::default()
        },
        requests: Some(requests),
        cpu_stat: Some(cpu_stat),
        ..Measured::default()
    })
}
