//! Kernel aggregates over a window: the cumulative snapshot at its end less
//! the one at its start, row by row. A maximum cannot be subtracted: a
//! windowed row's maximum is the smaller of the cumulative one and the top
//! of its highest bucket in the window, an upper bound. Pure.

use std::collections::HashMap;
use std::hash::Hash;

use crate::histogram::{slot_range, Histogram};
use crate::stream::KernelSnapshot;

/// What happened between `baseline` and `latest` (cumulative readings of
/// the same maps; a row absent from `baseline` is new in the window).
pub fn since(latest: &KernelSnapshot, baseline: &KernelSnapshot) -> KernelSnapshot {
    let mut out = latest.clone();
    subtract(
        &mut out.runq,
        &baseline.runq,
        |r| r.cgroup,
        |r, b| {
            r.latency = r.latency.since(&b.latency);
            r.count = r.count.saturating_sub(b.count);
            r.total_ns = r.total_ns.saturating_sub(b.total_ns);
            r.max_ns = bounded_max(r.max_ns, &r.latency);
            r.preempted_same_cgroup = r
                .preempted_same_cgroup
                .saturating_sub(b.preempted_same_cgroup);
            r.preempted_other_cgroup = r
                .preempted_other_cgroup
                .saturating_sub(b.preempted_other_cgroup);
            r.preempted_kthread = r.preempted_kthread.saturating_sub(b.preempted_kthread);
            r.preempted_throttled = r.preempted_throttled.saturating_sub(b.preempted_throttled);
            if let (Some(why), Some(before)) = (r.why.as_mut(), b.why.as_ref()) {
                *why = why.since(before);
            }
        },
    );
    subtract(
        &mut out.preemptors,
        &baseline.preemptors,
        |p| (p.victim_cgroup, p.preemptor_cgroup, p.comm.clone()),
        |p, b| {
            p.count = p.count.saturating_sub(b.count);
            p.wait_ns = p.wait_ns.saturating_sub(b.wait_ns);
        },
    );
    out.preemptors.retain(|p| p.count > 0);
    subtract(
        &mut out.softirq,
        &baseline.softirq,
        |s| (s.cpu, s.vector),
        |s, b| {
            s.delay = s.delay.since(&b.delay);
            s.count = s.count.saturating_sub(b.count);
            s.delay_total_ns = s.delay_total_ns.saturating_sub(b.delay_total_ns);
            s.delay_max_ns = bounded_max(s.delay_max_ns, &s.delay);
            s.run_total_ns = s.run_total_ns.saturating_sub(b.run_total_ns);
            s.runs_in_ksoftirqd = s.runs_in_ksoftirqd.saturating_sub(b.runs_in_ksoftirqd);
            s.run_in_ksoftirqd_ns = s.run_in_ksoftirqd_ns.saturating_sub(b.run_in_ksoftirqd_ns);
        },
    );
    subtract(
        &mut out.softirq_stolen,
        &baseline.softirq_stolen,
        |s| (s.tid, s.pid, s.vector),
        |s, b| {
            s.ns = s.ns.saturating_sub(b.ns);
            s.count = s.count.saturating_sub(b.count);
        },
    );
    out.softirq_stolen.retain(|s| s.count > 0);
    subtract(
        &mut out.syscalls,
        &baseline.syscalls,
        |s| (s.cgroup, s.nr),
        |s, b| {
            s.wall = s.wall.since(&b.wall);
            s.count = s.count.saturating_sub(b.count);
            s.wall_total_ns = s.wall_total_ns.saturating_sub(b.wall_total_ns);
            s.oncpu_total_ns = s.oncpu_total_ns.saturating_sub(b.oncpu_total_ns);
            if s.wall.count() > 0 {
                s.max_ns = bounded_max(s.max_ns, &s.wall);
            }
        },
    );
    out.syscalls.retain(|s| s.count > 0);
    subtract(
        &mut out.files,
        &baseline.files,
        |f| (f.cgroup, f.nr, f.path.clone()),
        |f, b| {
            f.calls = f.calls.saturating_sub(b.calls);
            f.oncpu_ns = f.oncpu_ns.saturating_sub(b.oncpu_ns);
        },
    );
    out.files.retain(|f| f.calls > 0);
    for (counters, earlier) in [
        (&mut out.counters.lost, &baseline.counters.lost),
        (&mut out.counters.map_full, &baseline.counters.map_full),
        (
            &mut out.counters.rate_limited,
            &baseline.counters.rate_limited,
        ),
    ] {
        subtract(
            counters,
            earlier,
            |(name, _)| name.clone(),
            |(_, n), (_, b)| {
                *n = n.saturating_sub(*b);
            },
        );
    }
    out
}

/// Each row of `rows` less its row in `earlier` (by `key`), through `less`.
fn subtract<T, K: Eq + Hash>(
    rows: &mut [T],
    earlier: &[T],
    key: impl Fn(&T) -> K,
    less: impl Fn(&mut T, &T),
) {
    let earlier: HashMap<K, &T> = earlier.iter().map(|row| (key(row), row)).collect();
    for row in rows {
        if let Some(&before) = earlier.get(&key(row)) {
            less(row, before);
        }
    }
}

/// The cumulative maximum, or less: the top of the highest bucket the
/// window counted (0 when it counted nothing).
fn bounded_max(cumulative_max: u64, window: &Histogram) -> u64 {
    match window.slots().len() {
        0 => 0,
        n => cumulative_max.min(slot_range(n - 1).1 - 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::CgroupRunq;

    fn runq(values: &[u64]) -> CgroupRunq {
        let mut latency = Histogram::default();
        values.iter().for_each(|&v| latency.record(v));
        CgroupRunq {
            cgroup: 7,
            count: values.len() as u64,
            total_ns: values.iter().sum(),
            max_ns: values.iter().copied().max().unwrap_or(0),
            latency,
            preempted_other_cgroup: values.len() as u64,
            ..CgroupRunq::default()
        }
    }

    #[test]
    fn a_window_holds_what_the_end_added_to_the_start() {
        let before = KernelSnapshot {
            runq: vec![runq(&[50_000_000, 1_000])],
            ..KernelSnapshot::default()
        };
        let after = KernelSnapshot {
            runq: vec![runq(&[50_000_000, 1_000, 2_000, 3_000_000])],
            ..KernelSnapshot::default()
        };
        let window = since(&after, &before);
        let row = &window.runq[0];
        assert_eq!((row.count, row.total_ns), (2, 3_002_000));
        assert_eq!(row.preempted_other_cgroup, 2);
        // The 50 ms wait was before the window: the maximum is the top of
        // the 3 ms wait's bucket, not 50 ms.
        assert!(
            (3_000_000..3_200_000).contains(&row.max_ns),
            "{}",
            row.max_ns
        );
        assert_eq!(row.latency.count(), 2);
    }

    #[test]
    fn rows_new_in_the_window_are_whole() {
        let after = KernelSnapshot {
            runq: vec![runq(&[4_000])],
            ..KernelSnapshot::default()
        };
        assert_eq!(since(&after, &KernelSnapshot::default()), after);
    }
}
