//! The throttle checks: stalltop's throttling row for the cgroup with the quota matches the
//! scenario's own cpu.stat delta, and the long waits of the requests' cgroup (the same one, or
//! with throttle-parent its child) are throttled stalls that blame that quota, not the bystander
//! that ran meanwhile.

use super::pretty;
use super::report::{Report, Stall, StallKind};
use crate::scenario::CpuStatDelta;

/// Absolute slack on the throttled-period count: stalltop and the scenario read the counters
/// at different moments, so a throttle at either edge may fall on either side.
const THROTTLED_COUNT_SLACK: u64 = 2;
/// Relative slack on top. The ~2 s stalltop records beyond the load cannot add throttled
/// periods: the cgroup exists only during the scenario (which keeps it, idle, 1 s after its own
/// final read so that a poller sees the final counters). So this is edge headroom only.
const THROTTLED_COUNT_PERCENT: u64 = 10;
/// Relative tolerance on throttled time.
const THROTTLED_TIME_PERCENT: u64 = 20;
/// A wait of the requests' threads this long is a throttle: unthrottled, a request thread
/// waits for at most its three siblings' and the light bystander's slices of a few ms.
const LONG_WAIT_NS: u64 = 30_000_000;
/// At least one throttled stall per this many throttled periods (a throttle late in a period
/// makes a wait under the stall threshold, and waits of one throttle merge into one stall).
const PERIODS_PER_THROTTLED_STALL: u64 = 3;

/// throttle, throttle-parent: stalltop's throttling row for `truth.cgroup` (the quota's) matches
/// the scenario's own cpu.stat delta, and the waits of `waiters` (the requests' cgroup) blame it.
pub fn check(report: &Report, truth: &CpuStatDelta, waiters: &str) -> Result<(), String> {
    let Some(row) = report
        .throttling
        .iter()
        .find(|row| row.cgroup == truth.cgroup)
    else {
        let seen: Vec<&str> = report
            .throttling
            .iter()
            .map(|row| row.cgroup.as_str())
            .collect();
        return Err(report.annotate(format!(
            "no throttling row for {}; rows: {seen:?}",
            truth.cgroup
        )));
    };
    let fail = |what: String| {
        Err(report.annotate(format!(
            "{what}\nthrottling row:\n{}\nscenario's own cpu.stat delta:\n{}",
            pretty(row),
            pretty(truth)
        )))
    };
    if (row.quota_us, row.period_us) != (truth.quota_us, truth.period_us) {
        return fail(format!(
            "quota/period {}/{} us, the scenario set {}/{} us",
            row.quota_us, row.period_us, truth.quota_us, truth.period_us
        ));
    }
    if row.nr_throttled == 0 {
        return fail("nr_throttled is 0".to_owned());
    }
    let count_slack =
        THROTTLED_COUNT_SLACK + (truth.nr_throttled * THROTTLED_COUNT_PERCENT).div_ceil(100);
    if row.nr_throttled.abs_diff(truth.nr_throttled) > count_slack {
        return fail(format!(
            "nr_throttled {} is not within ±{count_slack} ({THROTTLED_COUNT_SLACK} + \
             {THROTTLED_COUNT_PERCENT}%) of the scenario's {}",
            row.nr_throttled, truth.nr_throttled
        ));
    }
    let time_slack = truth.throttled_ns * THROTTLED_TIME_PERCENT / 100;
    if row.throttled_ns.abs_diff(truth.throttled_ns) > time_slack {
        return fail(format!(
            "throttled_ns {} is not within ±{THROTTLED_TIME_PERCENT}% ({time_slack} ns) of the \
             scenario's {}",
            row.throttled_ns, truth.throttled_ns
        ));
    }
    check_stalls(report, truth, waiters)
}

/// The long waits of `waiters` are stalls that blame the quota of `truth.cgroup`, and there are
/// enough such stalls for its throttled periods.
fn check_stalls(report: &Report, truth: &CpuStatDelta, waiters: &str) -> Result<(), String> {
    let quota = truth.cgroup.as_str();
    let theirs = |s: &&Stall| s.waited.cgroup.as_deref() == Some(waiters);
    let blamed: Vec<&Stall> = report
        .stalls
        .iter()
        .filter(theirs)
        .filter(|s| s.duration_ns >= LONG_WAIT_NS)
        .filter(|s| !blames_quota(s, quota))
        .collect();
    if !blamed.is_empty() {
        return Err(report.annotate(format!(
            "waits of {waiters} of {} ms or more are not throttled stalls of {quota}'s quota:\n{}",
            LONG_WAIT_NS / 1_000_000,
            pretty(&blamed)
        )));
    }
    let throttled = report
        .stalls
        .iter()
        .filter(theirs)
        .filter(|s| blames_quota(s, quota))
        .count() as u64;
    let wanted = truth.nr_throttled.div_ceil(PERIODS_PER_THROTTLED_STALL);
    if throttled < wanted {
        return Err(report.annotate(format!(
            "{throttled} throttled stalls of {waiters} by {quota}'s quota, want at least \
             {wanted} for its {} throttled periods (one per {PERIODS_PER_THROTTLED_STALL})",
            truth.nr_throttled
        )));
    }
    Ok(())
}

/// A `throttled` stall naming `quota` as the throttled cgroup and no task as its culprit.
fn blames_quota(stall: &Stall, quota: &str) -> bool {
    stall.kind == StallKind::Throttled
        && stall.culprit.is_none()
        && stall.throttled_cgroup.as_deref() == Some(quota)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::checks::fixtures::{
        assert_fails, culprit, report, throttle_parent, with, QUOTA_PARENT, REQUESTS_CHILD,
        THROTTLE,
    };

    const THROTTLED: &str = "/stalltop_throttled";

    fn truth(cgroup: &str, nr_throttled: u64, throttled_ns: u64) -> CpuStatDelta {
        CpuStatDelta {
            cgroup: cgroup.into(),
            quota_us: 15000,
            period_us: 100000,
            nr_periods: 50,
            nr_throttled,
            throttled_ns,
        }
    }

    fn throttle_truth(nr_throttled: u64, throttled_ns: u64) -> CpuStatDelta {
        truth(THROTTLED, nr_throttled, throttled_ns)
    }

    /// The throttle scenario's check: the requests wait in the quota's own cgroup.
    fn check_own(report: &Report, truth: &CpuStatDelta) -> Result<(), String> {
        check(report, truth, &truth.cgroup)
    }

    /// The parent's cpu.stat delta of the clean throttle-parent fixture.
    fn parent_truth() -> CpuStatDelta {
        truth(QUOTA_PARENT, 19, 1_520_000_000)
    }

    #[test]
    fn throttle_passes_within_tolerance() {
        check_own(&report(THROTTLE), &throttle_truth(19, 1_500_000_000)).unwrap();
        // Truth 15: slack 2 + ceil(1.5) = 4 periods; truth 1.267 s: slack 253 ms. Both edges pass.
        check_own(&report(THROTTLE), &throttle_truth(15, 1_520_000_000)).unwrap();
        check_own(&report(THROTTLE), &throttle_truth(19, 1_266_666_667)).unwrap();
    }

    #[test]
    fn throttle_fails_on_a_count_outside_tolerance() {
        // Truth 14: slack 2 + ceil(1.4) = 4, and 19 - 14 = 5.
        let result = check_own(&report(THROTTLE), &throttle_truth(14, 1_520_000_000));
        assert_fails(result, "nr_throttled 19 is not within ±4");
    }

    #[test]
    fn throttle_fails_on_throttled_time_outside_tolerance() {
        let result = check_own(&report(THROTTLE), &throttle_truth(19, 1_200_000_000));
        assert_fails(result, "throttled_ns 1520000000 is not within ±20%");
    }

    #[test]
    fn throttle_fails_without_throttling() {
        let row = with(THROTTLE, "/throttling/0/nr_throttled", json!(0));
        assert_fails(check_own(&row, &throttle_truth(1, 1)), "nr_throttled is 0");
    }

    #[test]
    fn throttle_fails_when_a_long_wait_blames_the_bystander() {
        let runq = with(THROTTLE, "/stalls/2/kind", json!("runq"));
        let result = check_own(&runq, &throttle_truth(19, 1_520_000_000));
        assert_fails(
            result,
            "are not throttled stalls of /stalltop_throttled's quota",
        );
        let blamed = with(
            THROTTLE,
            "/stalls/3/culprit",
            culprit(900, "hog", "/stalltop_bystander", None),
        );
        let result = check_own(&blamed, &throttle_truth(19, 1_520_000_000));
        assert_fails(
            result,
            "are not throttled stalls of /stalltop_throttled's quota",
        );
    }

    #[test]
    fn throttle_fails_with_too_few_throttled_stalls() {
        // 19 throttled periods want ceil(19 / 3) = 7 stalls; one is of another cgroup.
        let other = with(
            THROTTLE,
            "/stalls/0/waited/cgroup",
            json!("/stalltop_bystander"),
        );
        let result = check_own(&other, &throttle_truth(19, 1_520_000_000));
        assert_fails(
            result,
            "6 throttled stalls of /stalltop_throttled by /stalltop_throttled's quota, want at \
             least 7",
        );
    }

    #[test]
    fn throttle_fails_on_a_wrong_quota_or_a_missing_row() {
        let quota = with(THROTTLE, "/throttling/0/quota_us", json!(50000));
        let result = check_own(&quota, &throttle_truth(19, 1_520_000_000));
        assert_fails(
            result,
            "quota/period 50000/100000 us, the scenario set 15000/100000 us",
        );
        let missing = with(THROTTLE, "/throttling", json!([]));
        let result = check_own(&missing, &throttle_truth(19, 1_520_000_000));
        assert_fails(result, "no throttling row for /stalltop_throttled");
    }

    #[test]
    fn throttle_parent_passes_when_the_childs_waits_blame_the_parents_quota() {
        let clean = report(&throttle_parent());
        check(&clean, &parent_truth(), REQUESTS_CHILD).unwrap();
    }

    #[test]
    fn throttle_parent_fails_when_the_stalls_name_the_child() {
        let one = with(
            &throttle_parent(),
            "/stalls/4/throttled_cgroup",
            json!(REQUESTS_CHILD),
        );
        let result = check(&one, &parent_truth(), REQUESTS_CHILD);
        assert_fails(
            result,
            "waits of /stalltop_quota_parent/stalltop_throttled of 30 ms or more are not \
             throttled stalls of /stalltop_quota_parent's quota",
        );
        // Every stall naming the child (which has no quota), beside the parent's row.
        let all = with(
            &THROTTLE.replace(THROTTLED, REQUESTS_CHILD),
            "/throttling/0/cgroup",
            json!(QUOTA_PARENT),
        );
        let result = check(&all, &parent_truth(), REQUESTS_CHILD);
        assert_fails(
            result,
            "are not throttled stalls of /stalltop_quota_parent's quota",
        );
    }

    #[test]
    fn throttle_parent_fails_when_a_long_wait_blames_the_bystander() {
        let blamed = with(
            &throttle_parent(),
            "/stalls/3/culprit",
            culprit(900, "hog", "/stalltop_bystander", None),
        );
        let result = check(&blamed, &parent_truth(), REQUESTS_CHILD);
        assert_fails(
            result,
            "are not throttled stalls of /stalltop_quota_parent's quota",
        );
        let runq = with(&throttle_parent(), "/stalls/2/kind", json!("runq"));
        let result = check(&runq, &parent_truth(), REQUESTS_CHILD);
        assert_fails(
            result,
            "are not throttled stalls of /stalltop_quota_parent's quota",
        );
    }

    #[test]
    fn throttle_parent_wants_the_parents_row_and_the_childs_waits() {
        let childs_row = with(
            &throttle_parent(),
            "/throttling/0/cgroup",
            json!(REQUESTS_CHILD),
        );
        let result = check(&childs_row, &parent_truth(), REQUESTS_CHILD);
        assert_fails(result, "no throttling row for /stalltop_quota_parent");
        // Checked as the parent's own waits, the child's stalls do not count.
        let result = check(&report(&throttle_parent()), &parent_truth(), QUOTA_PARENT);
        assert_fails(
            result,
            "0 throttled stalls of /stalltop_quota_parent by /stalltop_quota_parent's quota, \
             want at least 7",
        );
    }

    #[test]
    fn throttle_parent_counts_only_stalls_that_name_the_parents_quota() {
        // A short (under 30 ms) stall naming the child is not a long wait, but not one of the
        // parent's quota either: 6 left of the 7 that 19 periods want.
        let short = with(
            &throttle_parent(),
            "/stalls/0/duration_ns",
            json!(20_000_000),
        );
        let short = serde_json::to_string(&short).unwrap();
        let child = with(&short, "/stalls/0/throttled_cgroup", json!(REQUESTS_CHILD));
        let result = check(&child, &parent_truth(), REQUESTS_CHILD);
        assert_fails(result, "6 throttled stalls of");
    }
}
