//! Quiet baseline: the victim and light bursty requests on CPU 1 in their own cgroups, with no
//! hogs and no quota; neither should wait 10 ms or more for the CPU on the guest's account
//! (the hypervisor can stretch a wait: stalltop reports its steal inside each).

use std::thread;

use anyhow::Result;

use super::burstreq::{self, Requests};
use super::cgroup::CpuCgroup;
use super::task::Window;
use super::{victim, Cgroups, CpuStatDelta, Measured};

pub fn run(window: &Window) -> Result<Measured> {
    let victim_cgroup = CpuCgroup::create(victim::CGROUP)?;
    victim_cgroup.set_shares(victim::SHARES)?;
    let requests_cgroup = CpuCgroup::create(burstreq::CGROUP)?;
    let start = requests_cgroup.cpu_stat()?;
    let (victim, requests) = thread::scope(|scope| {
        let _cancel = window.cancel_on_drop();
        let victim = window.spawn(scope, victim::COMM, &victim_cgroup, || victim::run(window))?;
        let requests = Requests::spawn(scope, window, &requests_cgroup, burstreq::LIGHT_BURN_NS)?;
        anyhow::Ok((victim.join()?, requests.join()?))
    })?;
    let cpu_stat = CpuStatDelta::since(&requests_cgroup, start)?;
    Ok(Measured {
        cgroups: Cgroups {
            victim: Some(victim_cgroup.path().to_owned()),
            noisy: None,
            requests: Some(requests_cgroup.path().to_owned()),
        },
        victim: Some(victim),
        requests: Some(requests),
        cpu_stat: Some(cpu_stat),
    })
}
