//! A table pane as render draws it: the columns that fit, the visible rows'
//! cells, the sort mark, the selection, and a title that on narrow screens
//! lists the other tables as tabs.

use super::cells::{container_cells, culprit_cells, feed_cells, syscall_cells, wait_cells, When};
use super::column::{fit, specs, Sorts};
use super::Rows;
use crate::app::format;
use crate::app::pane::Pane;
use crate::app::view::{ColumnView, RowView, Segment, TableView, Tone};
use crate::model::Report;
use crate::modes::SyscallMode;

/// How a table pane looks: the columns that fit `inner_width`, the rows
/// `first..first + count`, the marks of the sort and the selection.
pub struct TableRequest<'a> {
    pub pane: Pane,
    pub report: &'a Report,
    pub rows: &'a Rows,
    pub when: When,
    pub inner_width: u16,
    pub first: usize,
    pub count: usize,
    pub selected: usize,
    pub focused: bool,
    pub sorts: Sorts,
    /// The tables to list as tabs in the title (narrow screens), or none.
    pub tabs: &'a [Pane],
    pub empty: String,
    /// The probes' run-queue threshold, which the worst waits are under.
    pub runq_threshold_ns: u64,
}

pub fn table_view(req: &TableRequest<'_>) -> TableView {
    let (columns, sorted) = match req.pane {
        Pane::Feed => specs(req.sorts.feed),
        Pane::Culprits => specs(req.sorts.culprits),
        Pane::Containers => specs(req.sorts.containers),
        Pane::Syscalls | Pane::Timeline => specs(req.sorts.syscalls),
    };
    let shown = fit(&columns, req.inner_width);
    let total = req.rows.keys(req.pane).len();
    let cells = |i: usize| -> Vec<Segment> {
        match req.pane {
            Pane::Feed if !req.rows.waits.is_empty() => {
                wait_cells(&req.report.runq[req.rows.waits[i]], req.runq_threshold_ns)
            }
            Pane::Feed => feed_cells(&req.report.stalls[req.rows.feed[i]], req.when),
            Pane::Culprits => culprit_cells(&req.rows.culprits[i], req.when),
            Pane::Containers => container_cells(&req.rows.containers[i], req.report),
            Pane::Syscalls | Pane::Timeline => {
                syscall_cells(&req.report.syscalls[req.rows.syscalls[i]])
            }
        }
    };
    let rows = (req.first..total.min(req.first + req.count))
        .map(|i| {
            let all = cells(i);
            RowView {
                cells: shown.iter().map(|&(c, _)| all[c].clone()).collect(),
            }
        })
        .collect::<Vec<_>>();
    let position = if total == 0 {
        String::new()
    } else {
        format!(" {}/{total}", req.selected + 1)
    };
    let mut title = if !req.tabs.is_empty() {
        let mut title = Vec::new();
        for (i, pane) in req.tabs.iter().enumerate() {
            if i > 0 {
                title.push(Segment::new("│", Tone::Dim));
            }
            title.push(if *pane == req.pane {
                Segment::new(format!("[{}]", pane.title()), Tone::Strong)
            } else {
                Segment::new(format!(" {} ", pane.title()), Tone::Dim)
            });
        }
        title.push(Segment::new(position, Tone::Dim));
        title
    } else {
        vec![
            Segment::new(format!(" {} ", req.pane.title()), Tone::Strong),
            Segment::new(position, Tone::Dim),
        ]
    };
    if req.pane == Pane::Feed && !req.rows.waits.is_empty() {
        // Before the position, which ends the title.
        let mark = format!(
            "· none over {} yet: the worst waits so far ",
            format::duration(req.runq_threshold_ns)
        );
        title.insert(title.len() - 1, Segment::new(mark, Tone::Warn));
    }
    if req.pane == Pane::Syscalls && req.report.settings.syscalls == SyscallMode::Sampled {
        // Sampled figures say so: calls are those ticks found, no latencies.
        let mark = "· sampled: calls ticks found, no latencies ";
        title.insert(title.len() - 1, Segment::new(mark, Tone::Dim));
    }
    TableView {
        title,
        columns: shown
            .iter()
            .map(|&(c, width)| ColumnView {
                title: if c == sorted {
                    format!("{}▼", columns[c].title)
                } else {
                    columns[c].title.to_string()
                },
                width,
                right: columns[c].right,
            })
            .collect(),
        selected: (req.selected >= req.first && req.selected < req.first + rows.len())
            .then(|| req.selected - req.first),
        rows,
        focused: req.focused,
        empty: req.empty.clone(),
    }
}
