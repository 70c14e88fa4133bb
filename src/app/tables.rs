//! The four tables (stalls & takeovers feed, culprits, containers,
//! syscalls) and the timeline's CPU rows: which report rows pass the
//! filters, in what order, and how a row reads in the columns that fit.
//! Pure functions of the shown report and the view settings.

use std::collections::BTreeMap;

use super::filter::{CpuSet, RowText, TextFilter};
use super::format;
use super::view::{ColumnView, RowView, Segment, TableView, Tone};
use super::Pane;
use crate::model::{path_pattern, CulpritRow, Report};
use crate::model::{StallKind, StallRow, SyscallRow};

/// Default sort column per table: newest stall, most stall time, worst
/// p99, most kernel time.
pub const DEFAULT_SORT: [usize; 4] = [0, 4, 2, 3];

pub struct Settings<'a> {
    pub filter: &'a TextFilter,
    pub cpus: &'a CpuSet,
    pub threshold_ns: u64,
    pub sort: [usize; 4],
    pub cpu_count: u32,
}

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

/// Rows of every pane after filters and sorts.
#[derive(Clone, Debug, Default)]
pub struct Rows {
    /// Indices into `report.stalls`.
    pub feed: Vec<usize>,
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

struct Column {
    title: &'static str,
    width: u16,
    right: bool,
    /// Takes the width left over.
    grow: bool,
    /// Narrow screens drop the highest first; 0 never.
    drop: u8,
    sortable: bool,
}

const fn col(title: &'static str, width: u16, right: bool, drop: u8, sortable: bool) -> Column {
    Column {
        title,
        width,
        right,
        grow: false,
        drop,
        sortable,
    }
}

const fn grow(title: &'static str, width: u16) -> Column {
    Column {
        title,
        width,
        right: false,
        grow: true,
        drop: 0,
        sortable: false,
    }
}

const FEED: &[Column] = &[
    col("AGE", 5, true, 2, true),
    col("CPU", 3, true, 0, true),
    col("DUR", 7, true, 0, true),
    col("KIND", 9, false, 1, false),
    col("WAITED", 18, false, 0, false),
    grow("CULPRIT CHAIN", 20),
];
const CULPRITS: &[Column] = &[
    col("COMM", 15, false, 0, true),
    grow("CONTAINER", 12),
    grow("SYSCALL › PATH", 16),
    col("COUNT", 5, true, 0, true),
    col("TOTAL", 7, true, 0, true),
    col("WORST", 7, true, 1, true),
    col("LAST", 5, true, 2, true),
];
const CONTAINERS: &[Column] = &[
    // Fits a pod and container: pod:0f1e2d3c/4c5f7e9a1b2c.
    grow("CONTAINER", 24),
    col("P50", 7, true, 3, true),
    col("P99", 7, true, 0, true),
    col("MAX", 7, true, 0, true),
    col("OWN/OTH/KTH", 11, true, 0, true),
    col("NEIGHBOUR", 13, false, 0, false),
    col("THR%", 5, true, 0, true),
    col("THROTTLED", 9, true, 1, true),
    col("WORST SYSCALL", 16, false, 2, false),
];
const SYSCALLS: &[Column] = &[
    col("SYSCALL", 10, false, 0, true),
    grow("CONTAINER", 14),
    col("COUNT", 7, true, 0, true),
    col("ON-CPU", 8, true, 0, true),
    col("WALL", 8, true, 0, true),
    col("P99", 7, true, 3, true),
    col("MAX", 7, true, 2, true),
    grow("TOP PATH", 12),
];
const TABLES: [(Pane, &str, &[Column]); 4] = [
    (Pane::Feed, "Stalls & takeovers", FEED),
    (Pane::Culprits, "Culprits", CULPRITS),
    (Pane::Containers, "Containers", CONTAINERS),
    (Pane::Syscalls, "Syscalls", SYSCALLS),
];

/// Which of the four tables a pane is.
pub fn table_index(pane: Pane) -> Option<usize> {
    TABLES.iter().position(|(p, _, _)| *p == pane)
}

/// The next sortable column after `current`, cycling.
pub fn next_sort(table: usize, current: usize, delta: isize) -> usize {
    let columns = TABLES[table].2;
    let n = columns.len() as isize;
    let mut i = current as isize;
    for _ in 0..n {
        i = (i + delta.signum()).rem_euclid(n);
        if columns[i as usize].sortable {
            return i as usize;
        }
    }
    current
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
        sort_feed(&mut feed, report, s.sort[0]);

        let mut culprits: Vec<CulpritView> = culprit_views(report, &on_screen)
            .into_iter()
            .filter(|c| s.filter.matches(&culprit_text(&c.row)))
            .collect();
        sort_culprits(&mut culprits, s.sort[1]);

        let mut containers: Vec<ContainerView> = container_views(report)
            .into_iter()
            .filter(|c| {
                s.filter.matches(&RowText {
                    container: Some(vec![&c.container, &c.cgroup]),
                    ..RowText::default()
                })
            })
            .collect();
        sort_containers(&mut containers, report, s.sort[2]);

        let mut syscalls: Vec<usize> = (0..report.syscalls.len())
            .filter(|&i| s.filter.matches(&syscall_text(&report.syscalls[i])))
            .collect();
        sort_syscalls(&mut syscalls, report, s.sort[3]);

        let cpus: Vec<u32> = (0..s.cpu_count)
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

    /// The feed key of the most recently started stall on screen.
    pub fn newest_stall_key(&self, report: &Report) -> Option<String> {
        self.feed
            .iter()
            .max_by_key(|&&i| report.stalls[i].id)
            .map(|&i| report.stalls[i].id.to_string())
    }
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

fn culprit_text(row: &CulpritRow) -> RowText<'_> {
    RowText {
        comm: Some(vec![&row.comm]),
        container: Some(vec![&row.container]),
        path: Some(row.path.as_deref().into_iter().collect()),
        cpu: None,
        other: row.syscall.as_deref().into_iter().collect(),
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

/// Culprit rows recounted over the stalls on screen. A stall belongs to
/// the report's row with its comm, container and syscall whose path
/// pattern covers its path, so many cgroups' files stay one row.
fn culprit_views(report: &Report, on_screen: &dyn Fn(&StallRow) -> bool) -> Vec<CulpritView> {
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
                    last_seen_ns: 0,
                };
                unmatched.entry(culprit_key(&row)).or_insert(CulpritView {
                    row,
                    stalls: Vec::new(),
                })
            }
        };
        view.row.count += 1;
        view.row.total_stall_ns += stall.duration_ns;
        view.row.worst_ns = view.row.worst_ns.max(stall.duration_ns);
        view.row.last_seen_ns = view
            .row
            .last_seen_ns
            .max(stall.start_ns + stall.duration_ns);
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

/// Run-queue rows, then throttled cgroups with no run-queue row.
fn container_views(report: &Report) -> Vec<ContainerView> {
    let worst_syscall = |container: &str| {
        (0..report.syscalls.len())
            .filter(|&i| report.syscalls[i].container == container)
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

fn sort_feed(rows: &mut [usize], report: &Report, column: usize) {
    let s = &report.stalls;
    let end = |i: usize| s[i].start_ns + s[i].duration_ns;
    match FEED[column].title {
        "CPU" => rows.sort_by_key(|&i| (s[i].cpu, std::cmp::Reverse(end(i)))),
        "DUR" => rows.sort_by_key(|&i| std::cmp::Reverse((s[i].duration_ns, end(i)))),
        _ => rows.sort_by_key(|&i| std::cmp::Reverse((end(i), s[i].id))),
    }
}

fn sort_culprits(rows: &mut [CulpritView], column: usize) {
    use std::cmp::Reverse;
    match CULPRITS[column].title {
        "COMM" => rows.sort_by(|a, b| a.row.comm.cmp(&b.row.comm)),
        "COUNT" => rows.sort_by_key(|c| Reverse((c.row.count, c.row.total_stall_ns))),
        "WORST" => rows.sort_by_key(|c| Reverse(c.row.worst_ns)),
        "LAST" => rows.sort_by_key(|c| Reverse(c.row.last_seen_ns)),
        _ => rows.sort_by_key(|c| Reverse((c.row.total_stall_ns, c.row.count))),
    }
}

fn sort_containers(rows: &mut [ContainerView], report: &Report, column: usize) {
    use std::cmp::Reverse;
    let runq = |c: &ContainerView| c.runq.map(|i| &report.runq[i]);
    let throttle = |c: &ContainerView| c.throttle.map(|i| &report.throttling[i]);
    let key = |c: &ContainerView| -> u64 {
        match CONTAINERS[column].title {
            "P50" => runq(c).map_or(0, |r| r.p50_ns),
            "MAX" => runq(c).map_or(0, |r| r.max_ns),
            "OWN/OTH/KTH" => runq(c).map_or(0, |r| r.preempted_by.other_cgroup),
            "THR%" => throttle(c).map_or(0, |t| (t.throttled_pct * 10.0) as u64),
            "THROTTLED" => throttle(c).map_or(0, |t| t.throttled_ns),
            _ => runq(c).map_or(0, |r| r.p99_ns),
        }
    };
    rows.sort_by(|a, b| {
        Reverse(key(a))
            .cmp(&Reverse(key(b)))
            .then_with(|| a.cgroup.cmp(&b.cgroup))
    });
}

fn sort_syscalls(rows: &mut [usize], report: &Report, column: usize) {
    use std::cmp::Reverse;
    let s = &report.syscalls;
    match SYSCALLS[column].title {
        "SYSCALL" => rows.sort_by(|&a, &b| s[a].syscall.cmp(&s[b].syscall)),
        "COUNT" => rows.sort_by_key(|&i| Reverse(s[i].count)),
        "WALL" => rows.sort_by_key(|&i| Reverse(s[i].total_ns)),
        "P99" => rows.sort_by_key(|&i| Reverse(s[i].p99_ns)),
        "MAX" => rows.sort_by_key(|&i| Reverse(s[i].max_ns)),
        _ => rows.sort_by_key(|&i| Reverse((s[i].oncpu_total_ns, s[i].total_ns))),
    }
}

/// How a table pane looks: the columns that fit `inner_width`, the rows
/// `first..first + count`, the marks of the sort and the selection.
pub struct TableRequest<'a> {
    pub pane: Pane,
    pub report: &'a Report,
    pub rows: &'a Rows,
    pub now_ns: u64,
    pub inner_width: u16,
    pub first: usize,
    pub count: usize,
    pub selected: usize,
    pub focused: bool,
    pub sort: usize,
    /// Narrow screens: the other tables as tabs in the title.
    pub tabs: bool,
    pub empty: String,
}

pub fn table_view(req: &TableRequest<'_>) -> TableView {
    let table = table_index(req.pane).expect("a table pane");
    let (_, name, columns) = TABLES[table];
    let shown = fit(columns, req.inner_width);
    let total = req.rows.keys(req.pane).len();
    let cells = |i: usize| -> Vec<Segment> {
        match req.pane {
            Pane::Feed => feed_cells(&req.report.stalls[req.rows.feed[i]], req.now_ns),
            Pane::Culprits => culprit_cells(&req.rows.culprits[i].row, req.now_ns),
            Pane::Containers => container_cells(&req.rows.containers[i], req.report),
            _ => syscall_cells(&req.report.syscalls[req.rows.syscalls[i]]),
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
    let title = if req.tabs {
        let mut title = Vec::new();
        for (i, (pane, tab, _)) in TABLES.iter().enumerate() {
            if i > 0 {
                title.push(Segment::new("│", Tone::Dim));
            }
            title.push(if *pane == req.pane {
                Segment::new(format!("[{tab}]"), Tone::Strong)
            } else {
                Segment::new(format!(" {tab} "), Tone::Dim)
            });
        }
        title.push(Segment::new(position, Tone::Dim));
        title
    } else {
        vec![
            Segment::new(format!(" {name} "), Tone::Strong),
            Segment::new(position, Tone::Dim),
        ]
    };
    TableView {
        title,
        columns: shown
            .iter()
            .map(|&(c, width)| ColumnView {
                title: if c == req.sort {
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

/// The columns that fit, with their widths: drop the most droppable until
/// the rest fit, then share what is left among the growing columns.
fn fit(columns: &[Column], inner_width: u16) -> Vec<(usize, u16)> {
    // One space between columns; the sort mark takes one more.
    let need = |shown: &[usize]| -> u16 {
        shown.iter().map(|&c| columns[c].width + 1).sum::<u16>()
            + shown.len().saturating_sub(1) as u16
    };
    let mut shown: Vec<usize> = (0..columns.len()).collect();
    while need(&shown) > inner_width {
        let Some(pos) = shown
            .iter()
            .enumerate()
            .filter(|(_, &c)| columns[c].drop > 0)
            .max_by_key(|(_, &c)| columns[c].drop)
            .map(|(pos, _)| pos)
        else {
            break;
        };
        shown.remove(pos);
    }
    // In proportion to their widths; the last takes the remainder.
    let spare = inner_width.saturating_sub(need(&shown));
    let growing: Vec<usize> = shown.iter().copied().filter(|&c| columns[c].grow).collect();
    let grow_width: u16 = growing.iter().map(|&c| columns[c].width).sum();
    let mut left = spare;
    shown
        .iter()
        .map(|&c| {
            let width = columns[c].width + 1;
            if !columns[c].grow {
                return (c, width);
            }
            let share = if growing.last() == Some(&c) {
                left
            } else {
                (u32::from(spare) * u32::from(columns[c].width) / u32::from(grow_width.max(1)))
                    as u16
            };
            left -= share;
            (c, width + share)
        })
        .collect()
}

pub fn kind_tone(kind: StallKind) -> Tone {
    match kind {
        StallKind::Runq => Tone::Runq,
        StallKind::Ksoftirqd => Tone::Ksoftirqd,
        StallKind::Softirq => Tone::Softirq,
        StallKind::Irqoff => Tone::Irqoff,
    }
}

/// A kind as the screen names it ("irqs-off" where reports say "irqoff").
pub fn kind_label(kind: StallKind) -> &'static str {
    match kind {
        StallKind::Irqoff => "irqs-off",
        kind => kind.name(),
    }
}

/// What waited, short: "NET_RX", "victim[300]", "NET_RX+ksoftirqd/1".
pub fn waited_text(stall: &StallRow) -> String {
    let task = stall
        .waited
        .comm
        .as_ref()
        .map(|comm| match stall.waited.pid {
            Some(pid) if !comm.starts_with("ksoftirqd/") => format!("{comm}[{pid}]"),
            _ => comm.clone(),
        });
    match (stall.waited.softirq, task) {
        (Some(vector), Some(task)) => format!("{vector}+{task}"),
        (Some(vector), None) => vector.to_string(),
        (None, Some(task)) => task,
        (None, None) if stall.kind == StallKind::Irqoff => "(interrupts off)".into(),
        (None, None) => "-".into(),
    }
}

/// Who held the CPU, as a chain: task, container, syscall, file, on-CPU.
pub fn culprit_chain(stall: &StallRow) -> String {
    let Some(c) = &stall.culprit else {
        return "(nobody seen holding the CPU)".into();
    };
    let mut chain = format!("{}[{}]", c.comm, c.pid);
    // Most tasks run on the host: say where only when it is elsewhere.
    if c.container != "host" {
        chain.push_str(&format!(" {}", c.container));
    }
    if let Some(syscall) = &c.syscall {
        chain.push_str(&format!(" › {syscall}"));
    }
    if let Some(path) = c.path.as_ref().filter(|p| !p.is_empty()) {
        chain.push_str(&format!(" › {path}"));
    }
    if let Some(oncpu) = c.oncpu_ns {
        chain.push_str(&format!(" › {} on-CPU", format::duration(oncpu)));
    }
    chain
}

fn feed_cells(stall: &StallRow, now_ns: u64) -> Vec<Segment> {
    let end = stall.start_ns + stall.duration_ns;
    vec![
        Segment::new(format::age(now_ns.saturating_sub(end)), Tone::Dim),
        Segment::plain(stall.cpu.to_string()),
        Segment::new(format::duration(stall.duration_ns), Tone::Strong),
        Segment::new(kind_label(stall.kind), kind_tone(stall.kind)),
        Segment::plain(waited_text(stall)),
        Segment::plain(culprit_chain(stall)),
    ]
}

fn culprit_cells(row: &CulpritRow, now_ns: u64) -> Vec<Segment> {
    vec![
        Segment::new(&row.comm, Tone::Strong),
        Segment::plain(&row.container),
        Segment::plain(call_text(row.syscall.as_deref(), row.path.as_deref())),
        Segment::plain(row.count.to_string()),
        Segment::new(format::duration(row.total_stall_ns), Tone::Strong),
        Segment::plain(format::duration(row.worst_ns)),
        Segment::new(
            format::age(now_ns.saturating_sub(row.last_seen_ns)),
            Tone::Dim,
        ),
    ]
}

/// "read › /proc/slabinfo", "read", "-".
fn call_text(syscall: Option<&str>, path: Option<&str>) -> String {
    match (syscall, path.filter(|p| !p.is_empty())) {
        (Some(syscall), Some(path)) => format!("{syscall} › {path}"),
        (Some(syscall), None) => syscall.to_string(),
        (None, Some(path)) => path.to_string(),
        (None, None) => "-".into(),
    }
}

fn container_cells(c: &ContainerView, report: &Report) -> Vec<Segment> {
    let runq = c.runq.map(|i| &report.runq[i]);
    let throttle = c.throttle.map(|i| &report.throttling[i]);
    let ns = |v: Option<u64>| v.map_or("-".to_string(), format::duration);
    let neighbour = runq
        .and_then(|r| r.top_preemptors.first())
        .map_or("-".to_string(), |p| format!("{} ×{}", p.comm, p.count));
    let throttled_tone = match throttle {
        Some(t) if t.nr_throttled > 0 => Tone::Warn,
        _ => Tone::Normal,
    };
    vec![
        Segment::new(&c.container, Tone::Strong),
        Segment::plain(ns(runq.map(|r| r.p50_ns))),
        Segment::new(ns(runq.map(|r| r.p99_ns)), Tone::Strong),
        Segment::plain(ns(runq.map(|r| r.max_ns))),
        Segment::plain(runq.map_or("-".into(), |r| {
            let p = &r.preempted_by;
            format!("{}/{}/{}", p.same_cgroup, p.other_cgroup, p.kthread)
        })),
        Segment::plain(neighbour),
        Segment::new(
            throttle.map_or("-".into(), |t| format!("{:.1}", t.throttled_pct)),
            throttled_tone,
        ),
        Segment::new(ns(throttle.map(|t| t.throttled_ns)), throttled_tone),
        Segment::plain(c.worst_syscall.map_or("-".into(), |i| {
            let s = &report.syscalls[i];
            format!("{} {}", s.syscall, format::duration(s.max_ns))
        })),
    ]
}

fn syscall_cells(row: &SyscallRow) -> Vec<Segment> {
    vec![
        Segment::new(&row.syscall, Tone::Strong),
        Segment::plain(&row.container),
        Segment::plain(row.count.to_string()),
        Segment::new(format::duration(row.oncpu_total_ns), Tone::Strong),
        Segment::plain(format::duration(row.total_ns)),
        Segment::plain(format::duration(row.p99_ns)),
        Segment::plain(format::duration(row.max_ns)),
        Segment::plain(row.top_paths.first().map_or("-", |p| p.path.as_str())),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_cover_paths_component_by_component() {
        assert!(covers(
            "/sys/fs/cgroup/memory/*/memory.stat",
            "/sys/fs/cgroup/memory/web/memory.stat"
        ));
        assert!(!covers("/proc/*/smaps", "/proc/1/2/smaps"));
        assert!(covers("/proc/slabinfo", "/proc/slabinfo"));
    }

    #[test]
    fn narrow_tables_drop_columns_in_order() {
        let at = |width| -> Vec<&str> {
            fit(CONTAINERS, width)
                .iter()
                .map(|&(c, _)| CONTAINERS[c].title)
                .collect()
        };
        assert_eq!(at(200).len(), CONTAINERS.len());
        let narrow = at(78);
        assert!(
            !narrow.contains(&"P50") && narrow.contains(&"NEIGHBOUR"),
            "{narrow:?}"
        );
        let widths: u16 = fit(CULPRITS, 78).iter().map(|&(_, w)| w).sum::<u16>();
        assert!(widths <= 78);
    }

    #[test]
    fn sort_cycles_over_sortable_columns() {
        assert_eq!(next_sort(0, 0, 1), 1);
        assert_eq!(next_sort(0, 2, 1), 0);
        assert_eq!(next_sort(0, 0, -1), 2);
    }
}
