//! PSI beside stalltop's waits: the scenario's cgroups have PSI twins in the unified hierarchy
//! (xtask/src/scenario/cgroup.rs), so the report must carry each one's `some` time beside its
//! waits, over zero where its tasks waited, and at most stalltop's summed waits plus stalltop's
//! own stated margin (the report names a cgroup whose PSI exceeds that: waits stalltop missed).

use super::report::Report;

/// Each of `cgroups` has a PSI `some` time in the report, over zero, and no disagreement.
pub fn check(report: &Report, cgroups: &[&str]) -> Result<(), String> {
    for &cgroup in cgroups {
        let row = report.runq_row(cgroup)?;
        let Some(psi) = row.pressure_some_ns else {
            return Err(report.annotate(format!(
                "{cgroup}: no PSI (cpu.pressure of its unified twin) beside its waits"
            )));
        };
        if psi == 0 {
            return Err(report.annotate(format!(
                "{cgroup}: PSI some is 0 though its tasks waited {} ns",
                row.total_ns
            )));
        }
        if let Some(d) = report
            .pressure
            .disagreements
            .iter()
            .find(|d| d.cgroup == cgroup)
        {
            return Err(report.annotate(format!(
                "{cgroup}: PSI some {} ns exceeds stalltop's waits {} ns by more than the margin",
                d.psi_some_ns, d.waited_ns
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::checks::fixtures::{assert_fails, report, with, NOISY};

    #[test]
    fn psi_beside_the_waits_passes_and_its_absence_or_excess_fails() {
        // Every key present, as the report prints them.
        let base = serde_json::to_string(&report(NOISY)).unwrap();
        let read = with(&base, "/runq/0/pressure_some_ns", json!(2_100_000_000u64));
        check(&read, &["/stalltop_victim"]).unwrap();
        assert_fails(check(&report(&base), &["/stalltop_victim"]), "no PSI");
        let zero = with(&base, "/runq/0/pressure_some_ns", json!(0));
        assert_fails(check(&zero, &["/stalltop_victim"]), "PSI some is 0");
        let text = serde_json::to_string(&read).unwrap();
        let over = with(
            &text,
            "/pressure/disagreements",
            json!([{"cgroup": "/stalltop_victim", "psi_some_ns": 9, "waited_ns": 1}]),
        );
        assert_fails(
            check(&over, &["/stalltop_victim"]),
            "exceeds stalltop's waits",
        );
    }
}
