//! Which rows the text report prints: each list sorted (the longest single
//! wait first, or the newest), cut to the limit with the rest counted, and
//! the waits and stalls of a cgroup's tasks on each other (self-contention)
//! folded into one line per cgroup, so they cannot bury a victim. Pure; the
//! text only lays out what this chose.

use std::collections::BTreeMap;

use crate::cli::ListOrder;
use crate::model::{Report, RunqEventRow, RunqRow, SlowSyscallRow, StallRow, TakeoverRow};

/// What the text shows of one list.
pub struct Shown<'r, T> {
    pub rows: Vec<&'r T>,
    /// Rows left out past the limit.
    pub more: usize,
}

/// Waits (or stalls) within one cgroup, folded into one line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Folded {
    pub cgroup: String,
    /// Stalls (or waits) folded.
    pub count: usize,
    /// Task waits in them.
    pub waits: u64,
    /// The longest single wait.
    pub worst_ns: u64,
    pub worst_id: u64,
    /// Their spans (stalls) or waits, summed.
    pub total_ns: u64,
    /// The latest end.
    pub last_ns: u64,
}

pub struct Selection<'r> {
    /// Cgroups that waited, split by cause, the longest total wait first.
    pub why: Shown<'r, RunqRow>,
    /// Cgroups that waited with no split (a recording made before it).
    pub why_unsplit: usize,
    pub stalls: Shown<'r, StallRow>,
    /// Stalls whose waiter and culprit were of one cgroup, per cgroup.
    pub own_stalls: Vec<Folded>,
    pub waits: Shown<'r, RunqEventRow>,
    pub own_waits: Vec<Folded>,
    pub takeovers: Shown<'r, TakeoverRow>,
    pub slow_calls: Shown<'r, SlowSyscallRow>,
    /// Rows of the tables (culprits, syscalls, ...) to print.
    pub limit: usize,
    pub newest_first: bool,
}

pub fn select(r: &Report, order: ListOrder, limit: Option<usize>) -> Selection<'_> {
    let limit = limit.unwrap_or(usize::MAX);
    let (own, others): (Vec<&StallRow>, Vec<&StallRow>) =
        r.stalls.iter().partition(|s| own_stall(s));
    let (own_wait_rows, other_waits): (Vec<&RunqEventRow>, Vec<&RunqEventRow>) = r
        .runq_events
        .iter()
        .partition(|e| e.ran_instead.tid != 0 && e.cgroup == e.ran_instead.cgroup);
    // Narrowed to a victim, stalls go by the victim's own wait.
    let victim = r.scope.container.is_some() || r.scope.pid.is_some();
    let (split, unsplit): (Vec<&RunqRow>, Vec<&RunqRow>) = r
        .runq
        .iter()
        .filter(|row| row.total_ns > 0)
        .partition(|row| row.why.is_some());
    Selection {
        why: shown(split, limit, ListOrder::Worst, |row| (row.total_ns, 0)),
        why_unsplit: unsplit.len(),
        stalls: shown(others, limit, order, |s| {
            let wait = match s.waited.wait_ns {
                Some(own) if victim => own,
                _ => s.longest_wait_ns,
            };
            (wait, s.start_ns + s.duration_ns)
        }),
        own_stalls: fold(own.iter().map(|s| {
            (
                s.waited.cgroup.clone().unwrap_or_default(),
                s.id,
                u64::from(s.waits),
                s.longest_wait_ns,
                s.duration_ns,
                s.start_ns + s.duration_ns,
            )
        })),
        waits: shown(other_waits, limit, order, |e| (e.wait_ns, e.ts_ns)),
        own_waits: fold(
            own_wait_rows
                .iter()
                .map(|e| (e.cgroup.clone(), e.id, 1, e.wait_ns, e.wait_ns, e.ts_ns)),
        ),
        takeovers: shown(r.takeovers.iter().collect(), limit, order, |t| {
            (t.wait_ns, t.ts_ns)
        }),
        slow_calls: shown(r.slow_syscalls.iter().collect(), limit, order, |c| {
            (c.wall_ns.max(c.oncpu_ns), c.ts_ns)
        }),
        limit,
        newest_first: order == ListOrder::Newest,
    }
}

/// A run-queue stall whose waiter and culprit were tasks of one cgroup.
fn own_stall(s: &StallRow) -> bool {
    match (&s.waited.cgroup, &s.culprit) {
        (Some(cgroup), Some(culprit)) => {
            s.waited.softirq.is_none()
                && !s.waited.comm.as_deref().is_some_and(ksoftirqd)
                && *cgroup == culprit.cgroup
        }
        _ => false,
    }
}

fn ksoftirqd(comm: &str) -> bool {
    comm.starts_with("ksoftirqd/")
}

/// `rows` in `order` (by `key`: its wait, then its end), cut to `limit`.
fn shown<'r, T>(
    mut rows: Vec<&'r T>,
    limit: usize,
    order: ListOrder,
    key: impl Fn(&T) -> (u64, u64),
) -> Shown<'r, T> {
    match order {
        ListOrder::Worst => rows.sort_by_key(|row| std::cmp::Reverse(key(row))),
        ListOrder::Newest => rows.sort_by_key(|row| std::cmp::Reverse(key(row).1)),
    }
    let more = rows.len().saturating_sub(limit);
    rows.truncate(limit);
    Shown { rows, more }
}

/// (cgroup, id, waits, longest wait, span or wait, end) per row, folded by
/// cgroup, the most rows first.
fn fold(rows: impl Iterator<Item = (String, u64, u64, u64, u64, u64)>) -> Vec<Folded> {
    let mut by_cgroup: BTreeMap<String, Folded> = BTreeMap::new();
    for (cgroup, id, waits, longest, total, end) in rows {
        let f = by_cgroup.entry(cgroup.clone()).or_insert(Folded {
            cgroup,
            ..Folded::default()
        });
        f.count += 1;
        f.waits += waits;
        if longest > f.worst_ns {
            f.worst_ns = longest;
            f.worst_id = id;
        }
        f.total_ns += total;
        f.last_ns = f.last_ns.max(end);
    }
    let mut folded: Vec<Folded> = by_cgroup.into_values().collect();
    folded.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.cgroup.cmp(&b.cgroup)));
    folded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cgroups_own_waits_fold_into_one_line() {
        let folded = fold(
            [
                ("/burners".to_string(), 1, 1, 8, 8, 100),
                ("/burners".to_string(), 2, 1, 9, 9, 90),
                ("/other".to_string(), 3, 1, 3, 3, 50),
            ]
            .into_iter(),
        );
        assert_eq!(folded.len(), 2);
        assert_eq!(
            (
                folded[0].cgroup.as_str(),
                folded[0].count,
                folded[0].worst_ns
            ),
            ("/burners", 2, 9)
        );
        assert_eq!(
            (folded[0].worst_id, folded[0].total_ns, folded[0].last_ns),
            (2, 17, 100)
        );
    }

    #[test]
    fn lists_are_sorted_and_cut_with_the_rest_counted() {
        let rows: Vec<(u64, u64)> = vec![(3, 10), (9, 5), (5, 30)];
        let worst = shown(rows.iter().collect(), 2, ListOrder::Worst, |r| *r);
        assert_eq!((worst.rows, worst.more), (vec![&(9, 5), &(5, 30)], 1));
        let newest = shown(rows.iter().collect(), 10, ListOrder::Newest, |r| *r);
        assert_eq!(newest.rows, vec![&(5, 30), &(3, 10), &(9, 5)]);
        assert_eq!(newest.more, 0);
    }
}
