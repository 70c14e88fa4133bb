//! Rows the report does not hold as such: culprits recounted over the
//! stalls on screen, and each cgroup's run-queue, throttling and syscall
//! rows joined into one container row.

use std::collections::BTreeMap;

use super::culprit_key;
use crate::model::{path_pattern, waits_by_design, CulpritRow, Report, StallRow};

/// A culprit row counted over the stalls on screen.
#[derive(Clone, Debug)]
pub struct CulpritView {
    pub row: CulpritRow,
    /// Indices into `report.stalls`, oldest first.
    pub stalls: Vec<usize>,
}

/// A cgroup's run-queue, throttling and syscall rows, joined.
#[derive(Clone, Debug)]
pub struct ContainerView {
    pub cgroup: String,
    pub container: String,
    /// Indices into `report.runq`, `report.throttling`, `report.syscalls`.
    pub runq: Option<usize>,
    pub throttle: Option<usize>,
    pub worst_syscall: Option<usize>,
}

/// Culprit rows recounted over the stalls on screen. A stall belongs to
/// the report's row with its comm, container and syscall whose path
/// pattern covers its path, so many cgroups' files stay one row.
pub fn culprit_views(report: &Report, on_screen: &dyn Fn(&StallRow) -> bool) -> Vec<CulpritView> {
    let mut by_row: BTreeMap<usize, CulpritView> = BTreeMap::new();
    let mut unmatched: BTreeMap<String, CulpritView> = BTreeMap::new();
    for (i, stall) in report.stalls.iter().enumerate() {
        let Some(c) = &stall.culprit else {
            continue;
        };
        if !on_screen(stall) {
            continue;
        }
        let found = report.culprits.iter().position(|r| {
            r.comm == c.comm
                && r.container == c.container
                && r.syscall == c.syscall
                && match (&r.path, &c.path) {
                    (Some(pattern), Some(path)) => covers(pattern, path),
                    (None, None) => true,
                    _ => false,
                }
        });
        let view = match found {
            Some(index) => by_row.entry(index).or_insert_with(|| CulpritView {
                row: CulpritRow {
                    count: 0,
                    total_stall_ns: 0,
                    worst_ns: 0,
                    last_seen_ns: 0,
                    last_seen_unix_ns: 0,
                    ..report.culprits[index].clone()
                },
                stalls: Vec::new(),
            }),
            None => {
                let row = CulpritRow {
                    comm: c.comm.clone(),
                    container: c.container.clone(),
                    syscall: c.syscall.clone(),
                    path: c.path.as_deref().map(path_pattern),
                    count: 0,
                    total_stall_ns: 0,
                    worst_ns: 0,
                    worst_stall_id: stall.id,
                    last_seen_ns: 0,
                    last_seen_unix_ns: 0,
                };
                unmatched.entry(culprit_key(&row)).or_insert(CulpritView {
                    row,
                    stalls: Vec::new(),
                })
            }
        };
        view.row.count += 1;
        view.row.total_stall_ns += stall.duration_ns;
        if stall.longest_wait_ns > view.row.worst_ns {
            view.row.worst_ns = stall.longest_wait_ns;
            view.row.worst_stall_id = stall.id;
        }
        let end = stall.start_ns + stall.duration_ns;
        if end > view.row.last_seen_ns {
            view.row.last_seen_ns = end;
            view.row.last_seen_unix_ns = stall.start_unix_ns + stall.duration_ns;
        }
        view.stalls.push(i);
    }
    by_row
        .into_values()
        .chain(unmatched.into_values())
        .collect()
}

/// Does a path pattern (components or `*`) cover a path?
fn covers(pattern: &str, path: &str) -> bool {
    let (p, q): (Vec<&str>, Vec<&str>) = (pattern.split('/').collect(), path.split('/').collect());
    p.len() == q.len() && p.iter().zip(&q).all(|(a, b)| *a == "*" || a == b)
}

/// Run-queue rows, then throttled cgroups with no run-queue row. A
/// container's worst syscall is its slowest that did work (waits by design
/// such as epoll_wait are long because they wait).
pub fn container_views(report: &Report) -> Vec<ContainerView> {
    let worst_syscall = |container: &str| {
        (0..report.syscalls.len())
            .filter(|&i| {
                let row = &report.syscalls[i];
                row.container == container && !waits_by_design(row)
            })
            .max_by_key(|&i| report.syscalls[i].max_ns)
    };
    let throttle_of = |cgroup: &str| report.throttling.iter().position(|t| t.cgroup == cgroup);
    let mut views: Vec<ContainerView> = report
        .runq
        .iter()
        .enumerate()
        .map(|(i, r)| ContainerView {
            cgroup: r.cgroup.clone(),
            container: r.container.clone(),
            runq: Some(i),
            throttle: throttle_of(&r.cgroup),
            worst_syscall: worst_syscall(&r.container),
        })
        .collect();
    for (i, t) in report.throttling.iter().enumerate() {
        if !report.runq.iter().any(|r| r.cgroup == t.cgroup) {
            views.push(ContainerView {
                cgroup: t.cgroup.clone(),
                container: t.container.clone(),
                runq: None,
                throttle: Some(i),
                worst_syscall: worst_syscall(&t.container),
            });
        }
    }
    views
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::fixtures;
    use crate::model::Analysis;

    #[test]
    fn a_wait_by_design_is_never_the_worst_syscall() {
        let recording = fixtures::busy();
        let mut analysis = Analysis::new(recording.header.clone());
        for entry in &recording.entries {
            analysis.apply(entry);
        }
        let mut report = analysis.report();
        let shop = |report: &Report| -> Option<String> {
            container_views(report)
                .iter()
                .find(|v| v.container.starts_with("pod:9a8b7c6d"))
                .and_then(|v| v.worst_syscall)
                .map(|i| report.syscalls[i].syscall.clone())
        };
        assert_eq!(shop(&report).as_deref(), Some("fadvise64"));
        let mut epoll = report.syscalls[0].clone();
        assert!(epoll.container.starts_with("pod:9a8b7c6d"), "{epoll:?}");
        epoll.syscall = "epoll_wait".into();
        epoll.max_ns = 8_540_000_000;
        epoll.total_ns = 9_000_000_000;
        epoll.oncpu_total_ns = 1_000_000;
        report.syscalls.push(epoll);
        assert_eq!(shop(&report).as_deref(), Some("fadvise64"));
    }

    #[test]
    fn patterns_cover_paths_component_by_component() {
        assert!(covers(
            "/sys/fs/cgroup/memory/*/memory.stat",
            "/sys/fs/cgroup/memory/web/memory.stat"
        ));
        assert!(!covers("/proc/*/smaps", "/proc/1/2/smaps"));
        assert!(covers("/proc/slabinfo", "/proc/slabinfo"));
    }
}
