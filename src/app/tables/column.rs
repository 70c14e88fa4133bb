//! Table columns as enums: each column knows its title, width, alignment,
//! when a narrow screen drops it, and the order it sorts rows in (none for
//! the columns that do not sort). `fit` picks the columns that fit a width.

use std::cmp::{Ordering, Reverse};

use super::views::{ContainerView, CulpritView};
use crate::model::{Report, RunqRow, StallRow, SyscallRow, ThrottleRow};

/// How a column looks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spec {
    pub title: &'static str,
    pub width: u16,
    pub right: bool,
    /// Takes the width left over.
    pub grow: bool,
    /// Narrow screens drop the highest first; 0 never.
    pub drop: u8,
}

const fn col(title: &'static str, width: u16, right: bool, drop: u8) -> Spec {
    Spec {
        title,
        width,
        right,
        grow: false,
        drop,
    }
}

const fn grow(title: &'static str, width: u16) -> Spec {
    Spec {
        title,
        width,
        right: false,
        grow: true,
        drop: 0,
    }
}

/// The columns of one table.
pub trait Column: Copy + PartialEq + 'static {
    /// In screen order.
    const ALL: &'static [Self];
    fn spec(self) -> Spec;
    fn sortable(self) -> bool;

    /// The next sortable column after this one (`delta` < 0: before it),
    /// cycling.
    fn step(self, delta: isize) -> Self {
        let all = Self::ALL;
        let n = all.len() as isize;
        let mut i = all.iter().position(|&c| c == self).unwrap_or(0) as isize;
        for _ in 0..n {
            i = (i + delta.signum()).rem_euclid(n);
            if all[i as usize].sortable() {
                return all[i as usize];
            }
        }
        self
    }

    /// Where this column is among `ALL`.
    fn position(self) -> usize {
        Self::ALL.iter().position(|&c| c == self).unwrap_or(0)
    }
}

/// Compares two rows of a table, in the order a column sorts them.
pub type Order<T> = fn(&Report, &T, &T) -> Ordering;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeedColumn {
    Age,
    Cpu,
    /// The stall's span: its merged waits from the first start to the last end.
    Duration,
    /// The longest single wait merged into it.
    LongestWait,
    Kind,
    Waited,
    Chain,
}

impl FeedColumn {
    /// Newest first, CPU then newest, longest first (span or single wait).
    pub fn order(self) -> Option<Order<StallRow>> {
        fn end(s: &StallRow) -> u64 {
            s.start_ns + s.duration_ns
        }
        match self {
            FeedColumn::Age => {
                Some(|_, a, b| Reverse((end(a), a.id)).cmp(&Reverse((end(b), b.id))))
            }
            FeedColumn::Cpu => {
                Some(|_, a, b| (a.cpu, Reverse(end(a))).cmp(&(b.cpu, Reverse(end(b)))))
            }
            FeedColumn::Duration => Some(|_, a, b| {
                Reverse((a.duration_ns, end(a))).cmp(&Reverse((b.duration_ns, end(b))))
            }),
            FeedColumn::LongestWait => Some(|_, a, b| {
                Reverse((a.longest_wait_ns, end(a))).cmp(&Reverse((b.longest_wait_ns, end(b))))
            }),
            FeedColumn::Kind | FeedColumn::Waited | FeedColumn::Chain => None,
        }
    }
}

impl Column for FeedColumn {
    const ALL: &'static [FeedColumn] = &[
        FeedColumn::Age,
        FeedColumn::Cpu,
        FeedColumn::Duration,
        FeedColumn::LongestWait,
        FeedColumn::Kind,
        FeedColumn::Waited,
        FeedColumn::Chain,
    ];

    fn spec(self) -> Spec {
        match self {
            FeedColumn::Age => col("WHEN", 8, true, 2),
            FeedColumn::Cpu => col("CPU", 3, true, 0),
            FeedColumn::Duration => col("SPAN", 7, true, 0),
            FeedColumn::LongestWait => col("WAIT", 7, true, 0),
            FeedColumn::Kind => col("KIND", 9, false, 1),
            FeedColumn::Waited => col("WAITED", 18, false, 0),
            FeedColumn::Chain => grow("CULPRIT CHAIN", 20),
        }
    }

    fn sortable(self) -> bool {
        self.order().is_some()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CulpritColumn {
    Comm,
    Container,
    Call,
    Count,
    Total,
    Worst,
    Last,
}

impl CulpritColumn {
    /// By name; the rest most first.
    pub fn order(self) -> Option<Order<CulpritView>> {
        match self {
            CulpritColumn::Comm => Some(|_, a, b| a.row.comm.cmp(&b.row.comm)),
            CulpritColumn::Count => Some(|_, a, b| {
                Reverse((a.row.count, a.row.total_stall_ns))
                    .cmp(&Reverse((b.row.count, b.row.total_stall_ns)))
            }),
            CulpritColumn::Total => Some(|_, a, b| {
                Reverse((a.row.total_stall_ns, a.row.count))
                    .cmp(&Reverse((b.row.total_stall_ns, b.row.count)))
            }),
            CulpritColumn::Worst => Some(|_, a, b| b.row.worst_ns.cmp(&a.row.worst_ns)),
            CulpritColumn::Last => Some(|_, a, b| b.row.last_seen_ns.cmp(&a.row.last_seen_ns)),
            CulpritColumn::Container | CulpritColumn::Call => None,
        }
    }
}

impl Column for CulpritColumn {
    const ALL: &'static [CulpritColumn] = &[
        CulpritColumn::Comm,
        CulpritColumn::Container,
        CulpritColumn::Call,
        CulpritColumn::Count,
        CulpritColumn::Total,
        CulpritColumn::Worst,
        CulpritColumn::Last,
    ];

    fn spec(self) -> Spec {
        match self {
            CulpritColumn::Comm => col("COMM", 15, false, 0),
            CulpritColumn::Container => grow("CONTAINER", 12),
            CulpritColumn::Call => grow("SYSCALL › PATH", 16),
            CulpritColumn::Count => col("COUNT", 5, true, 0),
            CulpritColumn::Total => col("TOTAL", 7, true, 0),
            CulpritColumn::Worst => col("WORST", 7, true, 1),
            CulpritColumn::Last => col("LAST", 8, true, 2),
        }
    }

    fn sortable(self) -> bool {
        self.order().is_some()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContainerColumn {
    Container,
    P50,
    P99,
    Max,
    /// The largest cause of its wait; sorts by its total wait.
    Why,
    Neighbour,
    ThrottledPercent,
    Throttled,
    WorstSyscall,
}

impl ContainerColumn {
    /// Highest first, ties by cgroup path.
    pub fn order(self) -> Option<Order<ContainerView>> {
        match self {
            ContainerColumn::P50 => Some(|r, a, b| {
                highest_first(
                    runq_value(r, a, |q| q.p50_ns),
                    runq_value(r, b, |q| q.p50_ns),
                    a,
                    b,
                )
            }),
            ContainerColumn::P99 => Some(|r, a, b| {
                highest_first(
                    runq_value(r, a, |q| q.p99_ns),
                    runq_value(r, b, |q| q.p99_ns),
                    a,
                    b,
                )
            }),
            ContainerColumn::Max => Some(|r, a, b| {
                highest_first(
                    runq_value(r, a, |q| q.max_ns),
                    runq_value(r, b, |q| q.max_ns),
                    a,
                    b,
                )
            }),
            ContainerColumn::Why => Some(|r, a, b| {
                let waited = |q: &RunqRow| q.total_ns;
                highest_first(runq_value(r, a, waited), runq_value(r, b, waited), a, b)
            }),
            ContainerColumn::ThrottledPercent => Some(|r, a, b| {
                let tenths = |t: &ThrottleRow| (t.throttled_pct * 10.0) as u64;
                highest_first(
                    throttle_value(r, a, tenths),
                    throttle_value(r, b, tenths),
                    a,
                    b,
                )
            }),
            ContainerColumn::Throttled => Some(|r, a, b| {
                let ns = |t: &ThrottleRow| t.throttled_ns;
                highest_first(throttle_value(r, a, ns), throttle_value(r, b, ns), a, b)
            }),
            ContainerColumn::Container
            | ContainerColumn::Neighbour
            | ContainerColumn::WorstSyscall => None,
        }
    }
}

fn runq_value(r: &Report, c: &ContainerView, value: fn(&RunqRow) -> u64) -> u64 {
    c.runq.map_or(0, |i| value(&r.runq[i]))
}

fn throttle_value(r: &Report, c: &ContainerView, value: fn(&ThrottleRow) -> u64) -> u64 {
    c.throttle.map_or(0, |i| value(&r.throttling[i]))
}

fn highest_first(a_value: u64, b_value: u64, a: &ContainerView, b: &ContainerView) -> Ordering {
    b_value.cmp(&a_value).then_with(|| a.cgroup.cmp(&b.cgroup))
}

impl Column for ContainerColumn {
    const ALL: &'static [ContainerColumn] = &[
        ContainerColumn::Container,
        ContainerColumn::P50,
        ContainerColumn::P99,
        ContainerColumn::Max,
        ContainerColumn::Why,
        ContainerColumn::Neighbour,
        ContainerColumn::ThrottledPercent,
        ContainerColumn::Throttled,
        ContainerColumn::WorstSyscall,
    ];

    fn spec(self) -> Spec {
        match self {
            // Fits a pod and container: pod:0f1e2d3c/4c5f7e9a1b2c.
            ContainerColumn::Container => grow("CONTAINER", 24),
            ContainerColumn::P50 => col("P50", 7, true, 3),
            ContainerColumn::P99 => col("P99", 7, true, 0),
            ContainerColumn::Max => col("MAX", 7, true, 0),
            ContainerColumn::Why => col("WHY", 12, false, 0),
            ContainerColumn::Neighbour => col("NEIGHBOUR", 13, false, 0),
            ContainerColumn::ThrottledPercent => col("THR%", 5, true, 0),
            ContainerColumn::Throttled => col("THROTTLED", 9, true, 1),
            ContainerColumn::WorstSyscall => col("WORST SYSCALL", 16, false, 2),
        }
    }

    fn sortable(self) -> bool {
        self.order().is_some()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyscallColumn {
    Syscall,
    Container,
    Count,
    OnCpu,
    Wall,
    P99,
    Max,
    TopPath,
}

impl SyscallColumn {
    /// By name; the rest most first.
    pub fn order(self) -> Option<Order<SyscallRow>> {
        match self {
            SyscallColumn::Syscall => Some(|_, a, b| a.syscall.cmp(&b.syscall)),
            SyscallColumn::Count => Some(|_, a, b| b.count.cmp(&a.count)),
            SyscallColumn::OnCpu => {
                Some(|_, a, b| (b.oncpu_total_ns, b.total_ns).cmp(&(a.oncpu_total_ns, a.total_ns)))
            }
            SyscallColumn::Wall => Some(|_, a, b| b.total_ns.cmp(&a.total_ns)),
            SyscallColumn::P99 => Some(|_, a, b| b.p99_ns.cmp(&a.p99_ns)),
            SyscallColumn::Max => Some(|_, a, b| b.max_ns.cmp(&a.max_ns)),
            SyscallColumn::Container | SyscallColumn::TopPath => None,
        }
    }
}

impl Column for SyscallColumn {
    const ALL: &'static [SyscallColumn] = &[
        SyscallColumn::Syscall,
        SyscallColumn::Container,
        SyscallColumn::Count,
        SyscallColumn::OnCpu,
        SyscallColumn::Wall,
        SyscallColumn::P99,
        SyscallColumn::Max,
        SyscallColumn::TopPath,
    ];

    fn spec(self) -> Spec {
        match self {
            SyscallColumn::Syscall => col("SYSCALL", 10, false, 0),
            SyscallColumn::Container => grow("CONTAINER", 14),
            SyscallColumn::Count => col("COUNT", 7, true, 0),
            SyscallColumn::OnCpu => col("ON-CPU", 8, true, 0),
            SyscallColumn::Wall => col("WALL", 8, true, 0),
            SyscallColumn::P99 => col("P99", 7, true, 3),
            SyscallColumn::Max => col("MAX", 7, true, 2),
            SyscallColumn::TopPath => grow("TOP PATH", 12),
        }
    }

    fn sortable(self) -> bool {
        self.order().is_some()
    }
}

/// The column each table sorts by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sorts {
    pub feed: FeedColumn,
    pub culprits: CulpritColumn,
    pub containers: ContainerColumn,
    pub syscalls: SyscallColumn,
}

impl Default for Sorts {
    /// Newest stall, most stall time, worst p99, most kernel time.
    fn default() -> Sorts {
        Sorts {
            feed: FeedColumn::Age,
            culprits: CulpritColumn::Total,
            containers: ContainerColumn::P99,
            syscalls: SyscallColumn::OnCpu,
        }
    }
}

/// The specs of a table's columns, and the position of `sorted` among them.
pub fn specs<C: Column>(sorted: C) -> (Vec<Spec>, usize) {
    (C::ALL.iter().map(|c| c.spec()).collect(), sorted.position())
}

/// The columns that fit, with their widths: drop the most droppable until
/// the rest fit, then share what is left among the growing columns.
pub fn fit(columns: &[Spec], inner_width: u16) -> Vec<(usize, u16)> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_tables_drop_columns_in_order() {
        let (containers, _) = specs(ContainerColumn::P99);
        let at = |width| -> Vec<&str> {
            fit(&containers, width)
                .iter()
                .map(|&(c, _)| containers[c].title)
                .collect()
        };
        assert_eq!(at(200).len(), ContainerColumn::ALL.len());
        let narrow = at(78);
        assert!(
            !narrow.contains(&"P50") && narrow.contains(&"NEIGHBOUR"),
            "{narrow:?}"
        );
        let (culprits, _) = specs(CulpritColumn::Total);
        let widths: u16 = fit(&culprits, 78).iter().map(|&(_, w)| w).sum::<u16>();
        assert!(widths <= 78);
    }

    #[test]
    fn sort_cycles_over_sortable_columns() {
        assert_eq!(FeedColumn::Age.step(1), FeedColumn::Cpu);
        assert_eq!(FeedColumn::Duration.step(1), FeedColumn::LongestWait);
        assert_eq!(FeedColumn::LongestWait.step(1), FeedColumn::Age);
        assert_eq!(FeedColumn::Age.step(-1), FeedColumn::LongestWait);
        assert_eq!(CulpritColumn::Comm.step(1), CulpritColumn::Count);
    }
}
