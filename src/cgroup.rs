//! cgroup attribution: which hierarchy the BPF cgroup ids refer to, id ->
//! path, path -> container, CFS bandwidth state and CPU pressure (PSI)
//! read from cgroupfs.
//! Reads cgroupfs and /proc only; never writes to either, never loads BPF.

mod bandwidth;
mod container;
mod hierarchy;
mod pressure;
mod resolve;
#[cfg(test)]
mod testing;
mod throttle;
mod walk;

pub use container::{container_of, pod_ids, PodNames};
pub use hierarchy::Hierarchy;
pub use pressure::{pressure_warnings, read_pressure};
pub use resolve::Resolver;
pub use throttle::read_throttling;

use std::collections::HashSet;
use std::io;

/// Why the cgroup side cannot start; each message names the fix.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("cannot read /proc/self/mountinfo: {0}: mount procfs at /proc")]
    Mountinfo(io::Error),
    #[error(
        "no cgroup filesystem mounted (looked in /proc/self/mountinfo): mount cgroup2 at \
         /sys/fs/cgroup (mount -t cgroup2 none /sys/fs/cgroup), or the v1 cpu controller \
         (mount -t cgroup -o cpu,cpuacct cgroup /sys/fs/cgroup/cpu,cpuacct)"
    )]
    NotMounted,
}

/// The ids of every cgroup of `h` now (empty if its root cannot be read).
pub fn live_cgroups(h: &Hierarchy) -> HashSet<u64> {
    walk::cgroups(h.root())
        .into_iter()
        .map(|d| d.inode)
        .collect()
}
