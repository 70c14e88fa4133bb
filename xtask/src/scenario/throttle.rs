//! CFS throttling (docs/cases.md, case 3): bursty 4-thread requests in a cgroup whose quota
//! (15 ms per 100 ms) is above their average demand but below one 16 ms burst, so most requests
//! are throttled until the next period (a burst can escape: the kernel notices the exhausted
//! quota only at the next tick or context switch, and the burst is just 1 ms over it). A
//! bystander `hog` of a light cgroup (an eighth of the requests' weight, so the bursts still
//! run into the quota early in a period) fills the CPU while they are throttled: their waits
//! must blame the quota, not it. `throttle-parent` sets the quota on a parent instead, with the
//! requests in a child that has none of its own: their waits must blame the parent's quota.

use std::thread;

use anyhow::{ensure, Result};

use super::burstreq::{self, Requests};
use super::cgroup::CpuCgroup;
use super::task::Window;
use super::{hog, Cgroups, CpuStatDelta, Measured};
use crate::interrupt;

const PERIOD_US: u64 = 100_000;
const QUOTA_US: u64 = 15_000;
const BYSTANDER_CGROUP: &str = "stalltop_bystander";
const BYSTANDER_SHARES: u64 = 128;
/// throttle-parent: the cgroup with the quota; the requests' cgroup is its child.
const PARENT_CGROUP: &str = "stalltop_quota_parent";

/// The quota on the requests' own cgroup.
pub fn run(window: &Window) -> Result<Measured> {
    let cgroup = CpuCgroup::create(burstreq::CGROUP)?;
    cgroup.set_bandwidth(PERIOD_US, QUOTA_US)?;
    run_throttled(window, &cgroup, &cgroup)
}

/// The quota on a parent of the requests' cgroup, which has no quota of its own.
pub fn run_under_parent(window: &Window) -> Result<Measured> {
    let parent = CpuCgroup::create(PARENT_CGROUP)?;
    parent.set_bandwidth(PERIOD_US, QUOTA_US)?;
    // Declared after the parent, so dropped (rmdir) first: a cgroup with children cannot go.
    let child = CpuCgroup::create(&format!("{PARENT_CGROUP}/{}", burstreq::CGROUP))?;
    let child_quota = child.quota_us()?;
    ensure!(
        child_quota == -1,
        "{} has a quota of its own ({child_quota} us): only its parent's may throttle it",
        child.path()
    );
    run_throttled(window, &parent, &child)
}

/// Runs the requests in `requests` beside the bystander; the ground truth is the cpu.stat delta
/// of `quota`, the cgroup whose quota throttles them (`requests` itself or an ancestor).
fn run_throttled(window: &Window, quota: &CpuCgroup, requests: &CpuCgroup) -> Result<Measured> {
    let bystander = CpuCgroup::create(BYSTANDER_CGROUP)?;
    bystander.set_shares(BYSTANDER_SHARES)?;
    let start = quota.cpu_stat()?;
    let request_stats = thread::scope(|scope| {
        let _cancel = window.cancel_on_drop();
        let hog = window.spawn(scope, hog::COMM, &bystander, || hog::run(window))?;
        let stats = Requests::spawn(scope, window, requests, burstreq::HEAVY_BURN_NS)?.join();
        hog.join()?;
        stats
    })?;
    let cpu_stat = CpuStatDelta::since(quota, start)?;
    // A recorder that polls cpu.stat must get one more look at the final counters before the
    // cgroup disappears; the cgroup is idle now, so lingering changes nothing else.
    if !interrupt::requested() {
        thread::sleep(super::LINGER);
    }
    Ok(Measured {
        cgroups: Cgroups {
            requests: Some(requests.path().to_owned()),
            noisy: Some(bystander.path().to_owned()),
            ..Cgroups::default()
        },
        requests: Some(request_stats),
        cpu_stat: Some(cpu_stat),
        ..Measured::default()
    })
}
