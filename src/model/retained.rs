//! Rows of removed cgroups: the live source frees their kernel map entries
//! (pod churn would fill the maps otherwise), so a snapshot no longer holds
//! what they did. The analysis keeps their last rows beside the newer
//! snapshot, so a report still says what every cgroup of the recording did.

use std::collections::HashSet;
use std::hash::Hash;

use crate::stream::KernelSnapshot;

/// Rows each table keeps at most: past it, rows of removed cgroups are
/// dropped rather than kept (a node with endless churn).
const MAX_ROWS: usize = 20_000;

/// `new`, plus the rows of `old` it no longer has (cumulative maps only
/// lose rows when their cgroup was removed).
pub fn keep_removed(old: KernelSnapshot, mut new: KernelSnapshot) -> KernelSnapshot {
    keep(old.runq, &mut new.runq, |r| r.cgroup);
    keep(old.preemptors, &mut new.preemptors, |p| {
        (p.victim_cgroup, p.preemptor_cgroup, p.comm.clone())
    });
    keep(old.syscalls, &mut new.syscalls, |s| (s.cgroup, s.nr));
    keep(old.files, &mut new.files, |f| {
        (f.cgroup, f.nr, f.path.clone())
    });
    new
}

fn keep<T, K: Eq + Hash>(old: Vec<T>, new: &mut Vec<T>, key: impl Fn(&T) -> K) {
    let present: HashSet<K> = new.iter().map(&key).collect();
    let room = MAX_ROWS.saturating_sub(new.len());
    new.extend(
        old.into_iter()
            .filter(|row| !present.contains(&key(row)))
            .take(room),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::{CgroupRunq, Preemptor};

    fn runq(cgroup: u64, count: u64) -> CgroupRunq {
        CgroupRunq {
            cgroup,
            count,
            ..CgroupRunq::default()
        }
    }

    fn preemptor(victim: u64, comm: &str, count: u64) -> Preemptor {
        Preemptor {
            victim_cgroup: victim,
            preemptor_cgroup: 1,
            comm: comm.into(),
            count,
            wait_ns: 0,
            kthread: false,
        }
    }

    #[test]
    fn rows_of_removed_cgroups_stay_and_live_rows_are_the_newest() {
        let old = KernelSnapshot {
            runq: vec![runq(10, 5), runq(11, 7)],
            preemptors: vec![preemptor(10, "hog", 3), preemptor(11, "hog", 4)],
            ..KernelSnapshot::default()
        };
        let new = KernelSnapshot {
            ts_ns: 2,
            runq: vec![runq(10, 9)],
            preemptors: vec![preemptor(10, "hog", 6)],
            ..KernelSnapshot::default()
        };
        let merged = keep_removed(old, new);
        assert_eq!(merged.ts_ns, 2);
        assert_eq!(merged.runq, vec![runq(10, 9), runq(11, 7)]);
        assert_eq!(
            merged.preemptors,
            vec![preemptor(10, "hog", 6), preemptor(11, "hog", 4)]
        );
    }

    #[test]
    fn a_full_table_keeps_no_more_removed_rows() {
        let old = KernelSnapshot {
            runq: (0..10).map(|id| runq(id, 1)).collect(),
            ..KernelSnapshot::default()
        };
        let new = KernelSnapshot {
            runq: (100..100 + MAX_ROWS as u64 - 3)
                .map(|id| runq(id, 1))
                .collect(),
            ..KernelSnapshot::default()
        };
        assert_eq!(keep_removed(old, new).runq.len(), MAX_ROWS);
    }
}
