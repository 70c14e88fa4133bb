//! The moved-sleeper check: a sleep is never a wait. No run-queue event and no stall of the
//! sleeper may be longer than it was ever kept off its CPU by its own clocks (the latest it
//! ran after a sleep was due, the longest it was stopped while it worked), give or take the
//! moments each side reads its clock.

use super::pretty;
use super::report::{Report, RunqEvent, Stall};
use crate::scenario::moved_sleeper::{Truth, SLEEPER_COMM};

/// The clocks of the sleeper and of stalltop, and the moments each reads them, differ.
const TOLERANCE_NS: u64 = 1_000_000;
/// Sleeps (of about 20 ms) the sleeper must have had for the run to say anything.
const MIN_SLEEPS: u64 = 100;

pub fn check(report: &Report, truth: &Truth) -> Result<(), String> {
    if truth.sleeps < MIN_SLEEPS {
        return Err(format!(
            "the sleeper slept only {} times (need {MIN_SLEEPS}): {}",
            truth.sleeps,
            pretty(truth)
        ));
    }
    let limit = truth.longest_kept_ns() + TOLERANCE_NS;
    let events: Vec<&RunqEvent> = report
        .runq_events
        .iter()
        .filter(|e| e.tid == truth.sleeper_tid && e.wait_ns > limit)
        .collect();
    let stalls: Vec<&Stall> = report
        .stalls
        .iter()
        .filter(|s| {
            s.waited.comm.as_deref() == Some(SLEEPER_COMM)
                && s.waited.wait_ns.is_some_and(|wait| wait > limit)
        })
        .collect();
    if !events.is_empty() || !stalls.is_empty() {
        return Err(report.annotate(format!(
            "the sleeper was kept off its CPU at most {} us by its own clocks ({}), yet \
             stalltop reports longer waits:\n{}\n{}",
            truth.longest_kept_ns() / 1000,
            pretty(truth),
            pretty(&events),
            pretty(&stalls)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::checks::fixtures::{assert_fails, culprit, stall, with, MS, QUIET};

    const TID: u32 = 777;

    fn truth() -> Truth {
        Truth {
            sleeper_tid: TID,
            sleeps: 390,
            latest_wakeup_ns: 3 * MS,
            longest_work_gap_ns: 2 * MS,
        }
    }

    fn event(wait_ns: u64) -> Value {
        json!({"cpu": 1, "ts_ns": 5 * MS, "wait_ns": wait_ns, "steal_ns": 0, "pid": TID,
            "tid": TID, "comm": "sleeper", "cgroup": "/stalltop_victim",
            "ran_instead": {"pid": 50, "comm": "hog", "cgroup": "/stalltop_busy"},
            "migrated": {"from_cpu": 0, "migrations": 1}})
    }

    fn report_of(waits: &[u64], stall_wait: Option<u64>) -> Report {
        let events = waits.iter().map(|&w| event(w)).collect();
        let report = with(QUIET, "/runq_events", Value::Array(events));
        let mut doc = serde_json::to_value(&report).unwrap();
        if let Some(wait) = stall_wait {
            let mut s = stall(1, 0, wait, "runq");
            s["waited"] = json!({"pid": TID, "comm": "sleeper", "cgroup": "/stalltop_victim",
                "wait_ns": wait});
            s["culprit"] = culprit(50, "hog", "/stalltop_busy", None);
            doc["stalls"] = json!([s]);
        }
        serde_json::from_value(doc).unwrap()
    }

    #[test]
    fn waits_within_what_the_sleeper_measured_pass() {
        check(
            &report_of(&[1_200_000, 3_900_000], Some(3_900_000)),
            &truth(),
        )
        .unwrap();
    }

    #[test]
    fn a_sleep_reported_as_a_wait_fails() {
        assert_fails(
            check(&report_of(&[1_200_000, 20_100_000], None), &truth()),
            "\"wait_ns\": 20100000",
        );
        assert_fails(
            check(&report_of(&[1_200_000], Some(20_100_000)), &truth()),
            "stalltop reports longer waits",
        );
    }

    #[test]
    fn a_run_with_few_sleeps_says_nothing() {
        let truth = Truth {
            sleeps: 40,
            ..truth()
        };
        assert_fails(check(&report_of(&[], None), &truth), "slept only 40 times");
    }
}
