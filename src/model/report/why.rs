//! Why a cgroup waited for a CPU: its wait time split by cause, summing to
//! its total. The kernel side splits each wait of at least 1 ms (an
//! episode) by cause; the time held by other cgroups goes to the tasks the
//! `preemptors` table names, in proportion to the episodes each held; the
//! rest of the total is waits under 1 ms, split by nothing. Pure.

use std::collections::BTreeMap;

use super::{WhyCause, WhyRow};
use crate::stream::{CgroupRunq, Preemptor, WaitCause, WaitCauses};

/// Holders of another cgroup named per cgroup; the rest are one cause.
const TOP_OTHERS: usize = 3;

/// `r`'s wait by cause, largest first (None: a recording made before the
/// kernel side split waits), naming the holders of other cgroups from
/// `preemptors` with `container_of` (a cgroup id to its container).
pub(super) fn why_row(
    r: &CgroupRunq,
    preemptors: &[Preemptor],
    container_of: &dyn Fn(u64) -> String,
) -> Option<WhyRow> {
    let split = r.why.as_ref()?;
    let percent = |ns: u64| {
        if r.total_ns == 0 {
            0.0
        } else {
            (ns as f64 * 1000.0 / r.total_ns as f64).round() / 10.0
        }
    };
    let mut causes: Vec<WhyCause> = Vec::new();
    let mut add = |cause: WaitCause, comm: Option<String>, container: Option<String>, ns| {
        if ns > 0 {
            causes.push(WhyCause {
                cause,
                comm,
                container,
                ns,
                percent: percent(ns),
            });
        }
    };
    for (cause, ns) in split.parts() {
        if cause != WaitCause::OtherCgroup {
            add(cause, None, None, ns);
        }
    }
    for (holder, ns) in others(r.cgroup, split, preemptors, container_of) {
        let (comm, container) = holder.unzip();
        add(WaitCause::OtherCgroup, comm, container, ns);
    }
    add(
        WaitCause::ShortWaits,
        None,
        None,
        r.total_ns.saturating_sub(split.total_ns()),
    );
    causes.sort_by(|x, y| y.ns.cmp(&x.ns).then_with(|| x.cause.cmp(&y.cause)));
    Some(WhyRow { causes })
}

/// `split`'s time held by other cgroups, over the top holders (comm and
/// container) by their episodes' wait in `preemptors` (kernel threads have
/// a cause of their own), the rest as None.
fn others(
    cgroup: u64,
    split: &WaitCauses,
    preemptors: &[Preemptor],
    container_of: &dyn Fn(u64) -> String,
) -> Vec<(Option<(String, String)>, u64)> {
    let mut weights: BTreeMap<(String, String), u64> = BTreeMap::new();
    for p in preemptors
        .iter()
        .filter(|p| p.victim_cgroup == cgroup && p.preemptor_cgroup != cgroup && !p.kthread)
    {
        *weights
            .entry((p.comm.clone(), container_of(p.preemptor_cgroup)))
            .or_default() += p.wait_ns;
    }
    let all: u64 = weights.values().sum();
    let mut ranked: Vec<_> = weights.into_iter().filter(|(_, w)| *w > 0).collect();
    ranked.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
    let holders = ranked.len();
    let mut left = split.other_cgroup_ns;
    let mut out = Vec::new();
    for (i, (holder, weight)) in ranked.into_iter().take(TOP_OTHERS).enumerate() {
        // When every holder is named, the last takes what rounding left.
        let ns = if i + 1 == holders {
            left
        } else {
            let share = u128::from(split.other_cgroup_ns) * u128::from(weight) / u128::from(all);
            (share as u64).min(left)
        };
        left -= ns;
        out.push((Some(holder), ns));
    }
    out.push((None, left));
    out
}

#[cfg(test)]
mod tests;
