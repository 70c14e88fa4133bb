//! The churn check: thousands of short-lived cgroups came and went, more than the kernel maps
//! hold, and no update of any map was refused (stalltop freed the removed cgroups' entries), so
//! the live victim's waits were all counted.

use super::report::Report;
use crate::scenario::churn::Truth;
use crate::scenario::Cgroups;

/// The churn must outnumber the run-queue hash map (4,096) for the check to mean anything.
const MIN_CGROUPS: u64 = 4_200;
/// The victim's cgroup must count a wait for at least this share of its periods (each period
/// ends in a wakeup and a switch-in, so nearly every one).
const MIN_VICTIM_WAITS_PERCENT: u64 = 90;

pub fn check(
    report: &Report,
    truth: &Truth,
    cgroups: &Cgroups,
    victim_periods: usize,
) -> Result<(), String> {
    if truth.cgroups < MIN_CGROUPS {
        return Err(format!(
            "the scenario made only {} cgroups (under {MIN_CGROUPS}): the maps were not filled",
            truth.cgroups
        ));
    }
    let refused: Vec<(&String, &u64)> = report.map_full.iter().filter(|(_, &n)| n > 0).collect();
    if !refused.is_empty() {
        return Err(report.annotate(format!(
            "after {} short-lived cgroups, maps refused updates: {refused:?}",
            truth.cgroups
        )));
    }
    let victim_cgroup = cgroups.victim.as_deref().ok_or("no victim cgroup")?;
    let row = report.runq_row(victim_cgroup)?;
    if row.count * 100 < MIN_VICTIM_WAITS_PERCENT * victim_periods as u64 {
        return Err(report.annotate(format!(
            "the victim's cgroup counts {} waits for {victim_periods} periods (under \
             {MIN_VICTIM_WAITS_PERCENT}%)",
            row.count
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::fixtures::{report, QUIET};

    fn cgroups() -> Cgroups {
        Cgroups {
            victim: Some("/stalltop_victim".into()),
            noisy: None,
            requests: None,
        }
    }

    fn periods(report: &Report) -> usize {
        report.runq_row("/stalltop_victim").unwrap().count as usize
    }

    #[test]
    fn churn_passes_when_nothing_was_refused_and_the_victim_counted() {
        let quiet = report(QUIET);
        check(
            &quiet,
            &Truth { cgroups: 5_000 },
            &cgroups(),
            periods(&quiet),
        )
        .unwrap();
    }

    #[test]
    fn churn_fails_on_a_full_map_too_little_churn_or_missing_victim_waits() {
        let quiet = report(QUIET);
        let n = periods(&quiet);
        let mut full = report(QUIET);
        full.map_full.insert("runq_by_cgroup".into(), 12);
        let err = check(&full, &Truth { cgroups: 5_000 }, &cgroups(), n).unwrap_err();
        assert!(err.contains("runq_by_cgroup"), "{err}");
        check(&quiet, &Truth { cgroups: 900 }, &cgroups(), n).unwrap_err();
        check(&quiet, &Truth { cgroups: 5_000 }, &cgroups(), n * 2).unwrap_err();
    }
}
