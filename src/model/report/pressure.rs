//! The report's PSI side: the host's CPU pressure over the recording, each
//! cgroup's beside its wait total, and the cgroups where PSI saw more
//! waiting than stalltop measured (see `model::pressure::psi_exceeds`).

use super::{PressureDisagreement, PressureReport, RunqRow};
use crate::model::pressure::{psi_exceeds, PRESSURE_MARGIN_PERCENT, PRESSURE_SLACK_NS};
use crate::model::Analysis;

pub(super) fn pressure_report(a: &Analysis, runq: &[RunqRow]) -> PressureReport {
    let host = a.pressure.host();
    let disagreements = a
        .pressure
        .cgroups()
        .filter_map(|(path, psi)| {
            let waited_ns = subtree_waits(runq, path);
            psi_exceeds(psi.some_ns, waited_ns).then(|| PressureDisagreement {
                cgroup: path.to_owned(),
                container: a.container_of_path(path),
                psi_some_ns: psi.some_ns,
                waited_ns,
            })
        })
        .collect();
    PressureReport {
        host_some_ns: host.map(|h| h.some_ns),
        host_full_ns: host.and_then(|h| h.full_ns),
        margin_percent: PRESSURE_MARGIN_PERCENT,
        slack_ns: PRESSURE_SLACK_NS,
        disagreements,
    }
}

/// The waits of the cgroup at `path` and of its descendants: PSI counts a
/// cgroup's subtree.
fn subtree_waits(runq: &[RunqRow], path: &str) -> u64 {
    let prefix = format!("{}/", path.trim_end_matches('/'));
    runq.iter()
        .filter(|r| r.cgroup == path || r.cgroup.starts_with(&prefix))
        .map(|r| r.total_ns)
        .sum()
}
