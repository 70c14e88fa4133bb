//! Pure checks of a stalltop report (`stalltop report --json`) against a scenario's ground truth;
//! each returns a message that states the tolerance and quotes the relevant part of the report.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::scenario::{Cgroups, CpuStatDelta};

/// The noisy neighbour must push the victim's runq p99 to at least this multiple of the quiet
/// baseline's (repro.md D: victim lateness p99 3.0 ms with the hogs, 0.24-0.26 ms without).
pub const NOISY_P99_FACTOR: u64 = 3;
/// ... and its worst wait to at least this (repro.md D: 6.9-7.0 ms measured with shares 10240).
pub const NOISY_MIN_MAX_NS: u64 = 3_000_000;
/// The comm of the preemptor the victim must blame first (in the noisy cgroup).
pub const NOISY_COMM: &str = "hog";
/// Absolute slack on the throttled-period count: stalltop and the scenario read the counters
/// at different moments, so a throttle at either edge may fall on either side.
pub const THROTTLED_COUNT_SLACK: u64 = 2;
/// Relative slack on top. The ~2 s stalltop records beyond the load cannot add throttled
/// periods: the cgroup exists only during the scenario (which keeps it, idle, 1 s after its own
/// final read so that a poller sees the final counters). So this is edge headroom only.
pub const THROTTLED_COUNT_PERCENT: u64 = 10;
/// Relative tolerance on throttled time (repro.md C asks ±20%).
pub const THROTTLED_TIME_PERCENT: u64 = 20;
/// Contamination: more foreign forks than this during a run means another workload was active.
pub const MAX_FOREIGN_FORKS: u64 = 100;
/// Contamination: a 1-minute load average above this before the start means a busy VM.
pub const MAX_LOADAVG_BEFORE: f64 = 4.0;

/// The parts of the report JSON contract the checks read.
#[derive(Debug, Deserialize, Serialize)]
pub struct Report {
    pub lost_events: BTreeMap<String, u64>,
    pub runq: Vec<RunqRow>,
    pub runq_events: Vec<RunqEvent>,
    pub throttling: Vec<ThrottlingRow>,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct RunqRow {
    pub cgroup: String,
    pub count: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub preempted_by: PreemptedBy,
    pub top_preemptors: Vec<Preemptor>,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct PreemptedBy {
    pub same_cgroup: u64,
    pub other_cgroup: u64,
    pub kthread: u64,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct Preemptor {
    pub comm: String,
    pub cgroup: String,
    pub count: u64,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct RunqEvent {
    pub cpu: u32,
    pub ts_ns: u64,
    pub wait_ns: u64,
    pub pid: u32,
    pub comm: String,
    pub cgroup: String,
    pub ran_instead: Task,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct Task {
    pub pid: u32,
    pub comm: String,
    pub cgroup: String,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct ThrottlingRow {
    pub cgroup: String,
    pub quota_us: i64,
    pub period_us: i64,
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_ns: u64,
}

impl Report {
    pub fn parse(json: &str) -> Result<Self, String> {
        serde_json::from_str(json).map_err(|err| format!("report JSON: {err}"))
    }

    fn runq_row(&self, cgroup: &str) -> Result<&RunqRow, String> {
        self.runq
            .iter()
            .find(|row| row.cgroup == cgroup)
            .ok_or_else(|| {
                let seen: Vec<&str> = self.runq.iter().map(|row| row.cgroup.as_str()).collect();
                self.annotate(format!("no runq row for cgroup {cgroup}; rows: {seen:?}"))
            })
    }

    /// Appends the lost-event counters to a failure message when any is non-zero.
    fn annotate(&self, message: String) -> String {
        let lost: BTreeMap<&String, &u64> =
            self.lost_events.iter().filter(|(_, &n)| n > 0).collect();
        if lost.is_empty() {
            message
        } else {
            format!("{message}\n(stalltop lost events, which may explain it: {lost:?})")
        }
    }
}

/// Why a run cannot be trusted, if it cannot.
pub fn contaminated(foreign_forks: u64, loadavg_before: f64) -> Option<String> {
    if foreign_forks > MAX_FOREIGN_FORKS {
        Some(format!(
            "{foreign_forks} foreign forks during the run (> {MAX_FOREIGN_FORKS})"
        ))
    } else if loadavg_before > MAX_LOADAVG_BEFORE {
        Some(format!(
            "load average {loadavg_before:.2} before the start (> {MAX_LOADAVG_BEFORE})"
        ))
    } else {
        None
    }
}

/// quiet: stalltop saw the scenario's cgroups, and none of their tasks waited over the threshold.
pub fn quiet(report: &Report, cgroups: &Cgroups) -> Result<(), String> {
    let victim = cgroups
        .victim
        .as_deref()
        .ok_or("ground truth names no victim cgroup")?;
    let row = report.runq_row(victim)?;
    if row.count == 0 {
        return Err(report.annotate(format!(
            "stalltop counted no run-queue waits for {victim}, which woke every 1 ms:\n{}",
            pretty(row)
        )));
    }
    let ours: Vec<&RunqEvent> = report
        .runq_events
        .iter()
        .filter(|event| cgroups.all().any(|cgroup| cgroup == event.cgroup))
        .collect();
    if !ours.is_empty() {
        return Err(report.annotate(format!(
            "expected no runq_events from {:?} in the quiet baseline, found {} (first 5):\n{}",
            cgroups.all().collect::<Vec<_>>(),
            ours.len(),
            pretty(&ours[..ours.len().min(5)])
        )));
    }
    Ok(())
}

/// noisy-neighbour: the victim's runq latency rose well above the quiet baseline's, and stalltop
/// blames the hogs of the noisy cgroup.
pub fn noisy_neighbour(
    report: &Report,
    baseline: &Report,
    cgroups: &Cgroups,
) -> Result<(), String> {
    let victim = cgroups
        .victim
        .as_deref()
        .ok_or("ground truth names no victim cgroup")?;
    let noisy = cgroups
        .noisy
        .as_deref()
        .ok_or("ground truth names no noisy cgroup")?;
    let row = report.runq_row(victim)?;
    let quiet = baseline
        .runq_row(victim)
        .map_err(|err| format!("quiet baseline: {err}"))?;
    let fail =
        |what: String| Err(report.annotate(format!("{what}\nvictim runq row:\n{}", pretty(row))));
    if row.p99_ns < NOISY_P99_FACTOR * quiet.p99_ns {
        return fail(format!(
            "victim runq p99 {} ns is not >= {NOISY_P99_FACTOR}x the quiet baseline's {} ns",
            row.p99_ns, quiet.p99_ns
        ));
    }
    if row.max_ns < NOISY_MIN_MAX_NS {
        return fail(format!(
            "victim runq max {} ns is below {NOISY_MIN_MAX_NS} ns",
            row.max_ns
        ));
    }
    match row.top_preemptors.first() {
        Some(top) if top.comm == NOISY_COMM && top.cgroup == noisy => {}
        _ => {
            return fail(format!(
                "the victim's top preemptor is not comm {NOISY_COMM:?} in {noisy}"
            ))
        }
    }
    if row.preempted_by.other_cgroup == 0 {
        return fail("preempted_by.other_cgroup is 0, the hogs are in another cgroup".to_owned());
    }
    Ok(())
}

/// throttle: stalltop's throttling row for the cgroup matches the scenario's own cpu.stat delta.
pub fn throttle(report: &Report, truth: &CpuStatDelta) -> Result<(), String> {
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
    Ok(())
}

fn pretty<T: Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|err| format!("<unprintable: {err}>"))
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    /// A report as `stalltop report --json` prints it for a clean noisy-neighbour run.
    const NOISY: &str = r#"{
      "version": 1,
      "host": {"hostname": "vm", "kernel": "6.18.44-fc", "cpus": 2},
      "duration_ns": 7000000000,
      "lost_events": {"runq": 0},
      "runq": [
        {"cgroup": "/stalltop_victim", "container": null, "count": 4870,
         "p50_ns": 310000, "p99_ns": 4100000, "max_ns": 6950000,
         "preempted_by": {"same_cgroup": 0, "other_cgroup": 1620, "kthread": 12},
         "top_preemptors": [
           {"comm": "hog", "cgroup": "/stalltop_noisy", "count": 1598},
           {"comm": "kworker/1:1", "cgroup": "/", "count": 12}]},
        {"cgroup": "/stalltop_noisy", "container": null, "count": 2100,
         "p50_ns": 3900000, "p99_ns": 8000000, "max_ns": 12000000,
         "preempted_by": {"same_cgroup": 900, "other_cgroup": 1100, "kthread": 3},
         "top_preemptors": [{"comm": "victim", "cgroup": "/stalltop_victim", "count": 1100}]}
      ],
      "runq_events": [
        {"cpu": 1, "ts_ns": 123456789, "wait_ns": 12000000, "pid": 4242, "comm": "hog",
         "cgroup": "/stalltop_noisy",
         "ran_instead": {"pid": 4243, "comm": "hog", "cgroup": "/stalltop_noisy"}}
      ],
      "throttling": []
    }"#;

    /// The quiet baseline of the same invocation.
    const QUIET: &str = r#"{
      "version": 1,
      "host": {"hostname": "vm", "kernel": "6.18.44-fc", "cpus": 2},
      "duration_ns": 7000000000,
      "lost_events": {},
      "runq": [
        {"cgroup": "/stalltop_victim", "container": null, "count": 4990,
         "p50_ns": 4000, "p99_ns": 60000, "max_ns": 1900000,
         "preempted_by": {"same_cgroup": 0, "other_cgroup": 40, "kthread": 5},
         "top_preemptors": [{"comm": "burstreq", "cgroup": "/stalltop_throttled", "count": 40}]},
        {"cgroup": "/stalltop_throttled", "container": null, "count": 420,
         "p50_ns": 2000000, "p99_ns": 8000000, "max_ns": 9100000,
         "preempted_by": {"same_cgroup": 300, "other_cgroup": 60, "kthread": 1},
         "top_preemptors": [{"comm": "burstreq", "cgroup": "/stalltop_throttled", "count": 300}]}
      ],
      "runq_events": [
        {"cpu": 0, "ts_ns": 99, "wait_ns": 15000000, "pid": 77, "comm": "cc1",
         "cgroup": "/",
         "ran_instead": {"pid": 78, "comm": "rustc", "cgroup": "/"}}
      ],
      "throttling": []
    }"#;

    /// A clean throttle run: 20 requests, 19 of them throttled.
    const THROTTLE: &str = r#"{
      "version": 1,
      "host": {"hostname": "vm", "kernel": "6.18.44-fc", "cpus": 2},
      "duration_ns": 7000000000,
      "lost_events": {"runq": 0, "syscall": 0},
      "runq": [],
      "runq_events": [],
      "throttling": [
        {"cgroup": "/stalltop_throttled", "container": null, "quota_us": 15000,
         "period_us": 100000, "cpus": 2, "nr_periods": 51, "nr_throttled": 19,
         "throttled_ns": 1520000000}
      ]
    }"#;

    fn report(json: &str) -> Report {
        Report::parse(json).unwrap()
    }

    /// `json` with the value at JSON pointer `at` replaced.
    fn with(json: &str, at: &str, value: Value) -> Report {
        let mut doc: Value = serde_json::from_str(json).unwrap();
        *doc.pointer_mut(at).unwrap_or_else(|| panic!("no {at}")) = value;
        serde_json::from_value(doc).unwrap()
    }

    fn noisy_cgroups() -> Cgroups {
        Cgroups {
            victim: Some("/stalltop_victim".into()),
            noisy: Some("/stalltop_noisy".into()),
            requests: None,
        }
    }

    fn quiet_cgroups() -> Cgroups {
        Cgroups {
            victim: Some("/stalltop_victim".into()),
            noisy: None,
            requests: Some("/stalltop_throttled".into()),
        }
    }

    fn throttle_truth(nr_throttled: u64, throttled_ns: u64) -> CpuStatDelta {
        CpuStatDelta {
            cgroup: "/stalltop_throttled".into(),
            quota_us: 15000,
            period_us: 100000,
            nr_periods: 50,
            nr_throttled,
            throttled_ns,
        }
    }

    fn assert_fails(result: Result<(), String>, needle: &str) {
        let message = result.expect_err("the check should fail");
        assert!(message.contains(needle), "{needle:?} not in:\n{message}");
    }

    #[test]
    fn quiet_passes_with_foreign_events_only() {
        quiet(&report(QUIET), &quiet_cgroups()).unwrap();
    }

    #[test]
    fn quiet_fails_on_a_long_wait_in_a_scenario_cgroup() {
        let event = json!({"cpu": 1, "ts_ns": 5, "wait_ns": 12500000, "pid": 9, "comm": "burstreq",
            "cgroup": "/stalltop_throttled",
            "ran_instead": {"pid": 10, "comm": "burstreq", "cgroup": "/stalltop_throttled"}});
        let result = quiet(&with(QUIET, "/runq_events/0", event), &quiet_cgroups());
        assert_fails(result, "found 1");
    }

    #[test]
    fn quiet_fails_when_stalltop_never_saw_the_victim() {
        let result = quiet(
            &with(QUIET, "/runq/0/cgroup", json!("/other")),
            &quiet_cgroups(),
        );
        assert_fails(result, "no runq row for cgroup /stalltop_victim");
        let result = quiet(&with(QUIET, "/runq/0/count", json!(0)), &quiet_cgroups());
        assert_fails(result, "no run-queue waits");
    }

    #[test]
    fn noisy_neighbour_passes() {
        noisy_neighbour(&report(NOISY), &report(QUIET), &noisy_cgroups()).unwrap();
    }

    #[test]
    fn noisy_neighbour_fails_when_p99_is_not_3x_the_baseline() {
        let baseline = with(QUIET, "/runq/0/p99_ns", json!(1_400_000));
        let result = noisy_neighbour(&report(NOISY), &baseline, &noisy_cgroups());
        assert_fails(result, "not >= 3x the quiet baseline's 1400000 ns");
    }

    #[test]
    fn noisy_neighbour_fails_when_the_worst_wait_is_short() {
        let noisy = with(NOISY, "/runq/0/max_ns", json!(2_900_000));
        let result = noisy_neighbour(&noisy, &report(QUIET), &noisy_cgroups());
        assert_fails(result, "below 3000000 ns");
    }

    #[test]
    fn noisy_neighbour_fails_when_someone_else_is_blamed() {
        let wrong_comm = with(NOISY, "/runq/0/top_preemptors/0/comm", json!("kworker/1:1"));
        let result = noisy_neighbour(&wrong_comm, &report(QUIET), &noisy_cgroups());
        assert_fails(
            result,
            "top preemptor is not comm \"hog\" in /stalltop_noisy",
        );
        let wrong_cgroup = with(NOISY, "/runq/0/top_preemptors/0/cgroup", json!("/"));
        let result = noisy_neighbour(&wrong_cgroup, &report(QUIET), &noisy_cgroups());
        assert_fails(result, "top preemptor");
        let none = with(NOISY, "/runq/0/top_preemptors", json!([]));
        let result = noisy_neighbour(&none, &report(QUIET), &noisy_cgroups());
        assert_fails(result, "top preemptor");
    }

    #[test]
    fn noisy_neighbour_fails_without_cross_cgroup_preemptions() {
        let noisy = with(NOISY, "/runq/0/preempted_by/other_cgroup", json!(0));
        let result = noisy_neighbour(&noisy, &report(QUIET), &noisy_cgroups());
        assert_fails(result, "other_cgroup is 0");
    }

    #[test]
    fn noisy_neighbour_fails_without_a_baseline_row() {
        let baseline = with(QUIET, "/runq/0/cgroup", json!("/elsewhere"));
        let result = noisy_neighbour(&report(NOISY), &baseline, &noisy_cgroups());
        assert_fails(result, "quiet baseline: no runq row");
    }

    #[test]
    fn throttle_passes_within_tolerance() {
        throttle(&report(THROTTLE), &throttle_truth(19, 1_500_000_000)).unwrap();
        // Truth 15: slack 2 + ceil(1.5) = 4 periods; truth 1.267 s: slack 253 ms. Both edges pass.
        throttle(&report(THROTTLE), &throttle_truth(15, 1_520_000_000)).unwrap();
        throttle(&report(THROTTLE), &throttle_truth(19, 1_266_666_667)).unwrap();
    }

    #[test]
    fn throttle_fails_on_a_count_outside_tolerance() {
        // Truth 14: slack 2 + ceil(1.4) = 4, and 19 - 14 = 5.
        let result = throttle(&report(THROTTLE), &throttle_truth(14, 1_520_000_000));
        assert_fails(result, "nr_throttled 19 is not within ±4");
    }

    #[test]
    fn throttle_fails_on_throttled_time_outside_tolerance() {
        let result = throttle(&report(THROTTLE), &throttle_truth(19, 1_200_000_000));
        assert_fails(result, "throttled_ns 1520000000 is not within ±20%");
    }

    #[test]
    fn throttle_fails_without_throttling() {
        let row = with(THROTTLE, "/throttling/0/nr_throttled", json!(0));
        assert_fails(throttle(&row, &throttle_truth(1, 1)), "nr_throttled is 0");
    }

    #[test]
    fn throttle_fails_on_a_wrong_quota_or_a_missing_row() {
        let quota = with(THROTTLE, "/throttling/0/quota_us", json!(50000));
        let result = throttle(&quota, &throttle_truth(19, 1_520_000_000));
        assert_fails(
            result,
            "quota/period 50000/100000 us, the scenario set 15000/100000 us",
        );
        let missing = with(THROTTLE, "/throttling", json!([]));
        let result = throttle(&missing, &throttle_truth(19, 1_520_000_000));
        assert_fails(result, "no throttling row for /stalltop_throttled");
    }

    #[test]
    fn failures_mention_lost_events() {
        let lossy = with(NOISY, "/lost_events/runq", json!(12));
        let lossy = serde_json::to_string(&lossy).unwrap();
        let result = noisy_neighbour(
            &with(&lossy, "/runq/0/max_ns", json!(1)),
            &report(QUIET),
            &noisy_cgroups(),
        );
        assert_fails(result, "stalltop lost events");
    }

    #[test]
    fn a_report_missing_a_contract_field_is_rejected() {
        let mut doc: Value = serde_json::from_str(THROTTLE).unwrap();
        doc.as_object_mut().unwrap().remove("throttling");
        assert!(Report::parse(&doc.to_string()).is_err());
    }

    #[test]
    fn contamination_markers() {
        assert_eq!(contaminated(100, 4.0), None);
        assert!(contaminated(101, 0.1)
            .unwrap()
            .contains("101 foreign forks"));
        assert!(contaminated(3, 4.5).unwrap().contains("load average 4.50"));
    }
}
