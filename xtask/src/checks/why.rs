//! The why lines of a scenario's report: each cgroup's wait for a CPU split by cause, as
//! `stalltop report` prints them, and the checks of a cause's share against the scenario's
//! ground truth.

use super::report::{Report, RunqRow, Why};
use crate::scenario::CpuStatDelta;

/// Cgroups shown in a run's summary, the longest total wait first.
const SHOWN: usize = 3;

/// "/victim 1.20s: 81% other_cgroup hog (/noisy), 15% short_waits, ..." for the cgroups that
/// waited longest.
pub fn summary(report: &Report) -> String {
    let mut rows: Vec<&RunqRow> = report.runq.iter().filter(|r| r.why.is_some()).collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.total_ns));
    rows.iter()
        .take(SHOWN)
        .map(|r| format!("{} {} ms: {}", r.cgroup, r.total_ns / 1_000_000, line(r)))
        .collect::<Vec<_>>()
        .join("; ")
}

fn line(row: &RunqRow) -> String {
    row.why
        .iter()
        .flat_map(|why| &why.causes)
        .map(|c| match &c.comm {
            Some(comm) => format!("{:.0}% {} {comm}", c.percent, c.cause),
            None => format!("{:.0}% {}", c.percent, c.cause),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `row`'s split, or why it has none.
fn of(row: &RunqRow) -> Result<&Why, String> {
    row.why.as_ref().ok_or_else(|| {
        format!(
            "{} has no why: the waits were not split by cause",
            row.cgroup
        )
    })
}

/// The share (percent) of `cause` in `why`, for holders named `comm` only if given.
fn share(why: &Why, cause: &str, comm: Option<&str>) -> f64 {
    why.causes
        .iter()
        .filter(|c| c.cause == cause && comm.is_none_or(|comm| c.comm.as_deref() == Some(comm)))
        .map(|c| c.percent)
        .sum()
}

/// How far (percentage points) a cause's share may be from the scenario's truth.
const POINTS: f64 = 10.0;

/// noisy-neighbour: the victim's wait beyond its quiet baseline's is the hogs' (`comm`), so
/// their share of it is within `POINTS` of 100% less the baseline's part of its total.
pub fn check_noisy(
    report: &Report,
    baseline: &Report,
    victim: &str,
    comm: &str,
) -> Result<(), String> {
    let row = report.runq_row(victim)?;
    let quiet = baseline.runq_row(victim)?;
    let why = of(row)?;
    let truth = 100.0 * row.total_ns.saturating_sub(quiet.total_ns) as f64 / row.total_ns as f64;
    let hogs = share(why, "other_cgroup", Some(comm));
    if (hogs - truth).abs() > POINTS {
        return Err(report.annotate(format!(
            "{victim} waited {} ms ({} ms in the quiet baseline): the {comm} share is {hogs:.1}%, \
             not within {POINTS} points of {truth:.1}%: {}",
            row.total_ns / 1_000_000,
            quiet.total_ns / 1_000_000,
            line(row)
        )));
    }
    Ok(())
}

/// throttle, throttle-parent: the throttled time of the waits of `waiters` is at least the
/// quota's own (`truth`, cpu.stat's throttled time, which sums the time each CPU's share of the
/// group was throttled: at least one of the group's tasks waits meanwhile), less `POINTS`
/// percent. Not that the quota is the largest cause: the requests' threads share one CPU and
/// wait on each other too (their own cgroup took 23-51% of their wait in runs here).
pub fn check_throttle(report: &Report, truth: &CpuStatDelta, waiters: &str) -> Result<(), String> {
    let row = report.runq_row(waiters)?;
    let why = of(row)?;
    let fail = |what: String| Err(report.annotate(format!("{waiters}: {what}: {}", line(row))));
    let throttled: u64 = why
        .causes
        .iter()
        .filter(|c| c.cause == "throttled")
        .map(|c| c.ns)
        .sum();
    let least = truth.throttled_ns as f64 * (1.0 - POINTS / 100.0);
    if (throttled as f64) < least {
        return fail(format!(
            "{} ms throttled, short of the quota's own {} ms (less {POINTS}%)",
            throttled / 1_000_000,
            truth.throttled_ns / 1_000_000
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::checks::fixtures::{assert_fails, report, MS, NOISY, QUIET, THROTTLE};

    const VICTIM: &str = "/stalltop_victim";
    const THROTTLED: &str = "/stalltop_throttled";

    fn cause(cause: &str, comm: Option<&str>, ms: u64, percent: f64) -> Value {
        json!({"cause": cause, "comm": comm, "container": comm.map(|_| "/stalltop_noisy"),
               "ns": ms * MS, "percent": percent})
    }

    fn noisy(total_ms: u64, causes: Vec<Value>) -> Report {
        let mut doc: Value = serde_json::from_str(NOISY).unwrap();
        doc["runq"][0]["total_ns"] = json!(total_ms * MS);
        doc["runq"][0]["why"] = json!({"causes": causes});
        serde_json::from_value(doc).unwrap()
    }

    fn quiet(total_ms: u64) -> Report {
        let mut doc: Value = serde_json::from_str(QUIET).unwrap();
        doc["runq"][0]["total_ns"] = json!(total_ms * MS);
        serde_json::from_value(doc).unwrap()
    }

    /// 1,000 ms waited against a quiet 50 ms: the hogs' truth is 95%.
    #[test]
    fn the_hogs_share_is_the_victims_wait_beyond_its_quiet_one() {
        let near = noisy(
            1_000,
            vec![
                cause("other_cgroup", Some("hog"), 880, 88.0),
                cause("short_waits", None, 120, 12.0),
            ],
        );
        check_noisy(&near, &quiet(50), VICTIM, "hog").unwrap();
        let far = noisy(
            1_000,
            vec![
                cause("other_cgroup", Some("hog"), 600, 60.0),
                cause("kthread", None, 400, 40.0),
            ],
        );
        assert_fails(
            check_noisy(&far, &quiet(50), VICTIM, "hog"),
            "the hog share is 60.0%, not within 10 points of 95.0%",
        );
        assert_fails(
            check_noisy(&report(NOISY), &quiet(50), VICTIM, "hog"),
            "has no why",
        );
    }

    fn throttled(causes: Vec<Value>) -> Report {
        let mut doc: Value = serde_json::from_str(THROTTLE).unwrap();
        doc["runq"] = json!([{"cgroup": THROTTLED, "container": null, "count": 400,
            "p50_ns": 0, "p99_ns": 0, "max_ns": 0, "total_ns": 3_000 * MS,
            "preempted_by": {"same_cgroup": 0, "other_cgroup": 0, "kthread": 0},
            "top_preemptors": [], "why": {"causes": causes}}]);
        serde_json::from_value(doc).unwrap()
    }

    fn quota(throttled_ms: u64) -> CpuStatDelta {
        CpuStatDelta {
            cgroup: THROTTLED.into(),
            quota_us: 15000,
            period_us: 100000,
            nr_periods: 50,
            nr_throttled: 20,
            throttled_ns: throttled_ms * MS,
        }
    }

    #[test]
    fn the_quota_covers_at_least_its_own_throttled_time() {
        let report = throttled(vec![
            cause("throttled", None, 2_200, 73.3),
            cause("same_cgroup", None, 800, 26.7),
        ]);
        check_throttle(&report, &quota(1_000), THROTTLED).unwrap();
        assert_fails(
            check_throttle(&report, &quota(2_500), THROTTLED),
            "2200 ms throttled, short of the quota's own 2500 ms",
        );
        // Its own threads may hold it longer than the quota (CI: 51% against 40%).
        let own_first = throttled(vec![
            cause("same_cgroup", None, 1_530, 51.0),
            cause("throttled", None, 1_200, 40.0),
        ]);
        check_throttle(&own_first, &quota(900), THROTTLED).unwrap();
    }
}
