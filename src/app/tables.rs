//! The four tables (stalls & takeovers feed, culprits, containers,
//! syscalls) and the timeline's CPU rows: which report rows pass the
//! filters, in what order, with a stable key each. `column` says how each
//! column looks and sorts, `cells` how a row reads, `views` joins the rows
//! the report does not hold as such, `table_view` lays a pane out. Pure
//! functions of the shown report and the view settings.

mod cells;
mod column;
mod table_view;
mod views;

use std::collections::BTreeMap;

use super::filter::{CpuSet, RowText, TextFilter};
use super::pane::Pane;
use crate::cpulist::CpuList;
use crate::model::{CulpritRow, Report, RunqRow, StallRow, SyscallRow};
pub use cells::When;
pub use cells::{culprit_chain, hardirq_text, kind_label, kind_tone, throttle_text, waited_text};
pub use column::{Column, Sorts};
pub use table_view::{table_view, TableRequest};
use views::{container_views, culprit_views};
pub use views::{ContainerView, CulpritView};

pub struct Settings<'a> {
    pub filter: &'a TextFilter,
    pub cpus: &'a CpuSet,
    pub threshold_ns: u64,
    pub sorts: Sorts,
    /// The timeline's rows: the host's online CPUs.
    pub online: &'a CpuList,
}

/// Rows of every pane after filters and sorts.
#[derive(Clone, Debug, Default)]
pub struct Rows {
    /// Indices into `report.stalls`.
    pub feed: Vec<usize>,
    /// While no stall crossed a threshold: the feed shows these instead,
    /// indices into `report.runq`, worst wait first.
    pub waits: Vec<usize>,
    pub culprits: Vec<CulpritView>,
    pub containers: Vec<ContainerView>,
    /// Indices into `report.syscalls`.
    pub syscalls: Vec<usize>,
    /// The timeline's CPUs.
    pub cpus: Vec<u32>,
    /// Indices into `report.takeovers` that pass the filters.
    pub takeovers: Vec<usize>,
    /// Per pane (in `PANES` order): a stable key per row, to follow the
    /// selection when rows move.
    keys: [Vec<String>; 5],
}

impl Rows {
    pub fn derive(report: &Report, s: &Settings<'_>) -> Rows {
        let on_screen = |stall: &StallRow| {
            s.cpus.contains(stall.cpu)
                && stall.duration_ns >= s.threshold_ns
                && s.filter.matches(&RowText {
                    cpu: Some(stall.cpu),
                    ..RowText::default()
                })
        };
        let mut feed: Vec<usize> = (0..report.stalls.len())
            .filter(|&i| {
                let stall = &report.stalls[i];
                on_screen(stall) && s.filter.matches(&stall_text(stall))
            })
            .collect();
        if let Some(order) = s.sorts.feed.order() {
            feed.sort_by(|&a, &b| order(report, &report.stalls[a], &report.stalls[b]));
        }
        let waits = if report.stalls.is_empty() {
            worst_waits(report, s)
        } else {
            Vec::new()
        };

        // Culprits recounted over the stalls the filter keeps: `container:X`
        // (a stall's waiter or culprit) lists who held the CPU while X waited,
        // victims first, not only the culprits inside X.
        let in_feed = |stall: &StallRow| on_screen(stall) && s.filter.matches(&stall_text(stall));
        let mut culprits: Vec<CulpritView> = culprit_views(report, &in_feed);
        if let Some(order) = s.sorts.culprits.order() {
            culprits.sort_by(|a, b| order(report, a, b));
        }

        let mut containers: Vec<ContainerView> = container_views(report)
            .into_iter()
            .filter(|c| {
                s.filter.matches(&RowText {
                    container: Some(vec![&c.container, &c.cgroup]),
                    ..RowText::default()
                })
            })
            .collect();
        if let Some(order) = s.sorts.containers.order() {
            containers.sort_by(|a, b| order(report, a, b));
        }

        let mut syscalls: Vec<usize> = (0..report.syscalls.len())
            .filter(|&i| s.filter.matches(&syscall_text(&report.syscalls[i])))
            .collect();
        if let Some(order) = s.sorts.syscalls.order() {
            syscalls.sort_by(|&a, &b| order(report, &report.syscalls[a], &report.syscalls[b]));
        }

        let cpus: Vec<u32> = s
            .online
            .iter()
            .filter(|&cpu| {
                s.cpus.contains(cpu)
                    && s.filter.matches(&RowText {
                        cpu: Some(cpu),
                        ..RowText::default()
                    })
            })
            .collect();
        let takeovers = (0..report.takeovers.len())
            .filter(|&i| {
                let t = &report.takeovers[i];
                s.cpus.contains(t.cpu)
                    && t.wait_ns >= s.threshold_ns
                    && s.filter.matches(&RowText {
                        comm: Some(t.culprit.iter().map(|c| c.comm.as_str()).collect()),
                        container: Some(t.culprit.iter().map(|c| c.container.as_str()).collect()),
                        cpu: Some(t.cpu),
                        ..RowText::default()
                    })
            })
            .collect();

        let keys = [
            cpus.iter().map(u32::to_string).collect(),
            feed.iter()
                .map(|&i| report.stalls[i].id.to_string())
                .chain(unique_keys(
                    waits.iter().map(|&i| wait_key(&report.runq[i])),
                ))
                .collect(),
            culprits.iter().map(|c| culprit_key(&c.row)).collect(),
            unique_keys(containers.iter().map(|c| c.cgroup.clone())),
            syscalls
                .iter()
                .map(|&i| {
                    let r = &report.syscalls[i];
                    format!("{} {}", r.syscall, r.container)
                })
                .collect(),
        ];
        Rows {
            feed,
            waits,
            culprits,
            containers,
            syscalls,
            cpus,
            takeovers,
            keys,
        }
    }

    pub fn keys(&self, pane: Pane) -> &[String] {
        &self.keys[pane.index()]
    }
}

/// Waits shorter than this are the scheduler's usual latency, not worth a
/// row among the worst waits (the kernel names holders from 1 ms too).
const WORST_WAIT_FLOOR_NS: u64 = 1_000_000;

/// Each cgroup's longest run-queue wait so far, worst first: what the feed
/// shows before any wait crossed the threshold.
fn worst_waits(report: &Report, s: &Settings<'_>) -> Vec<usize> {
    let mut waits: Vec<usize> = (0..report.runq.len())
        .filter(|&i| {
            let r = &report.runq[i];
            r.max_ns >= WORST_WAIT_FLOOR_NS.max(s.threshold_ns)
                && s.filter.matches(&RowText {
                    comm: Some(r.top_preemptors.iter().map(|p| p.comm.as_str()).collect()),
                    container: Some(vec![&r.container, &r.cgroup]),
                    ..RowText::default()
                })
        })
        .collect();
    let runq = &report.runq;
    waits.sort_by(|&a, &b| {
        runq[b]
            .max_ns
            .cmp(&runq[a].max_ns)
            .then_with(|| runq[a].cgroup.cmp(&runq[b].cgroup))
    });
    waits
}

/// A worst-wait row's key; never a stall id.
pub fn wait_key(row: &RunqRow) -> String {
    format!("wait {}", row.cgroup)
}

/// Keys made unique by numbering repeats (a cgroup re-created under the
/// same path has two rows).
fn unique_keys(keys: impl Iterator<Item = String>) -> Vec<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    keys.map(|key| {
        let n = seen.entry(key.clone()).or_default();
        *n += 1;
        if *n == 1 {
            key
        } else {
            format!("{key}#{n}")
        }
    })
    .collect()
}

pub fn culprit_key(row: &CulpritRow) -> String {
    format!(
        "{}\u{1f}{}\u{1f}{}\u{1f}{}",
        row.comm,
        row.container,
        row.syscall.as_deref().unwrap_or(""),
        row.path.as_deref().unwrap_or("")
    )
}

fn stall_text(stall: &StallRow) -> RowText<'_> {
    let culprit = stall.culprit.as_ref();
    RowText {
        comm: Some(
            stall
                .waited
                .comm
                .as_deref()
                .into_iter()
                .chain(culprit.map(|c| c.comm.as_str()))
                .collect(),
        ),
        container: Some(
            stall
                .waited
                .cgroup
                .as_deref()
                .into_iter()
                .chain(culprit.map(|c| c.container.as_str()))
                .chain(culprit.map(|c| c.cgroup.as_str()))
                .collect(),
        ),
        path: Some(
            culprit
                .and_then(|c| c.path.as_deref())
                .into_iter()
                .collect(),
        ),
        cpu: Some(stall.cpu),
        other: [Some(stall.kind.name()), stall.waited.softirq]
            .into_iter()
            .flatten()
            .chain(culprit.and_then(|c| c.syscall.as_deref()))
            .collect(),
    }
}

fn syscall_text(row: &SyscallRow) -> RowText<'_> {
    RowText {
        container: Some(vec![&row.container]),
        path: Some(row.top_paths.iter().map(|p| p.path.as_str()).collect()),
        other: vec![&row.syscall],
        ..RowText::default()
    }
}
