//! Noisy neighbour (docs/cases.md, case 4): the 1 ms victim shares CPU 1 with two `hog`
//! busy loops whose cgroup weighs 10x more (cpu.shares 10240 against 1024), so the victim waits
//! behind the hogs for milliseconds at a time.

use std::thread;

use anyhow::Result;

use super::cgroup::CpuCgroup;
use super::task::Window;
use super::{hog, victim, Cgroups, Measured};

const NOISY_CGROUP: &str = "stalltop_noisy";
const NOISY_SHARES: u64 = 10240;
const HOGS: usize = 2;

pub fn run(window: &Window) -> Result<Measured> {
    let victim_cgroup = CpuCgroup::create(victim::CGROUP)?;
    victim_cgroup.set_shares(victim::SHARES)?;
    let noisy_cgroup = CpuCgroup::create(NOISY_CGROUP)?;
    noisy_cgroup.set_shares(NOISY_SHARES)?;
    let victim = thread::scope(|scope| {
        let _cancel = window.cancel_on_drop();
        let victim = window.spawn(scope, victim::COMM, &victim_cgroup, || victim::run(window))?;
        let hogs = (0..HOGS)
            .map(|_| window.spawn(scope, hog::COMM, &noisy_cgroup, || hog::run(window)))
            .collect::<Result<Vec<_>>>()?;
        let stats = victim.join()?;
        for hog in hogs {
            hog.join()?;
        }
        anyhow::Ok(stats)
    })?;
    Ok(Measured {
        cgroups: Cgroups {
            victim: Some(victim_cgroup.path().to_owned()),
            noisy: Some(noisy_cgroup.path().to_owned()),
            requests: None,
        },
        victim: Some(victim),
        ..Measured::default()
    })
}
