//! The checks of throttles that no switch-out shows where the wait ends: throttle-moved (a
//! quota'd loop whose waits the scheduler moves between the CPUs) and throttle-enqueue (sleepers
//! held by a spent quota as they are enqueued). At least 95% of the quota'd threads' long waits
//! are throttles of the quota's cgroup, as run-queue events and as stalls; the rest may only be
//! the hypervisor's (its steal covers at least half of the wait); none may say the CPU was idle
//! or name a task.

use super::report::{Report, RunqEvent, Stall, StallKind};
use super::{percent_of, pretty};
use crate::scenario::throttle_enqueue::{self, ROUND_NS};
use crate::scenario::CpuStatDelta;

/// A wait of the quota'd threads this long is a throttle: unthrottled, they wait for their
/// siblings' slices of a few ms at most.
pub const LONG_WAIT_NS: u64 = 30_000_000;
/// At least this share of the long waits must be throttles (the rest the hypervisor's).
const THROTTLED_PERCENT: u64 = 95;
/// throttle-moved: long waits that moved between CPUs needed for the run to say anything (the
/// flipper moves each thread every 20 ms, so nearly every wait of 30 ms or more spans a move).
const MIN_MOVED: usize = 3;
/// throttle-enqueue: wakeups the quota held needed for the run to say anything.
const MIN_HELD: usize = 5;
/// throttle-enqueue: how far stalltop's wait and a sleeper's own measure may differ (the
/// moments each reads its clock) before a long wait must, or must not, be reported.
const MEASURE_SLACK_NS: u64 = 2_000_000;

/// What a long wait of the quota'd threads was called.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Throttled,
    /// Not a throttle, but the hypervisor took at least half of it.
    Steal,
    /// Not a throttle: the CPU was idle.
    Idle,
    /// Not a throttle: a task was blamed.
    Task(String),
}

fn event_verdict(event: &RunqEvent, quota: &str) -> Verdict {
    if event.throttled_cgroup.as_deref() == Some(quota) {
        Verdict::Throttled
    } else if event.steal_ns * 2 >= event.wait_ns {
        Verdict::Steal
    } else if event.ran_instead.pid == 0 {
        Verdict::Idle
    } else {
        Verdict::Task(event.ran_instead.comm.clone())
    }
}

fn stall_verdict(stall: &Stall, quota: &str) -> Verdict {
    let wait = stall.waited.wait_ns.unwrap_or(stall.duration_ns);
    if stall.kind == StallKind::Throttled && stall.throttled_cgroup.as_deref() == Some(quota) {
        Verdict::Throttled
    } else if stall.waited.steal_ns.unwrap_or(0) * 2 >= wait {
        Verdict::Steal
    } else if let Some(culprit) = &stall.culprit {
        Verdict::Task(culprit.comm.clone())
    } else if stall.waited.cpu_idle {
        Verdict::Idle
    } else {
        Verdict::Task(format!("nobody named in a {:?} stall", stall.kind))
    }
}

/// The verdicts on `what` (long waits, each with its quota's cgroup) pass: at least
/// THROTTLED_PERCENT throttles, no idle CPU and no task.
fn judge<T: serde::Serialize>(
    report: &Report,
    what: &str,
    judged: &[(&T, Verdict)],
) -> Result<(), String> {
    let throttled = judged
        .iter()
        .filter(|(_, v)| *v == Verdict::Throttled)
        .count() as u64;
    let wrong: Vec<(&T, &Verdict)> = judged
        .iter()
        .filter(|(_, v)| matches!(v, Verdict::Idle | Verdict::Task(_)))
        .map(|(item, v)| (*item, v))
        .collect();
    let needed = percent_of(judged.len() as u64, THROTTLED_PERCENT);
    if throttled < needed || !wrong.is_empty() {
        let shown: Vec<String> = wrong
            .iter()
            .map(|(item, v)| format!("{v:?}: {}", pretty(item)))
            .collect();
        return Err(report.annotate(format!(
            "{throttled} of {} long {what} (30 ms or more) are throttles of their quota (need \
             {THROTTLED_PERCENT}%: {needed}); {} say the CPU was idle or name a task:\n{}",
            judged.len(),
            wrong.len(),
            shown.join("\n")
        )));
    }
    Ok(())
}

/// throttle-moved: the long waits of the quota'd cgroup (`truth.cgroup`, which has the quota)
/// are its throttles, enough of them moved between CPUs.
pub fn check_moved(report: &Report, truth: &CpuStatDelta) -> Result<(), String> {
    let quota = truth.cgroup.as_str();
    if truth.nr_throttled == 0 {
        return Err(format!(
            "the quota of {quota} never throttled: {}",
            pretty(truth)
        ));
    }
    let waits: Vec<&RunqEvent> = report
        .runq_events
        .iter()
        .filter(|e| e.cgroup == quota && e.wait_ns >= LONG_WAIT_NS)
        .collect();
    let moved = waits.iter().filter(|e| e.migrated.is_some()).count();
    if moved < MIN_MOVED {
        return Err(report.annotate(format!(
            "{moved} of {} long waits of {quota} moved between CPUs (need {MIN_MOVED})",
            waits.len()
        )));
    }
    let judged: Vec<_> = waits
        .iter()
        .map(|e| (*e, event_verdict(e, quota)))
        .collect();
    judge(report, "waits", &judged)?;
    let stalls: Vec<_> = report
        .stalls
        .iter()
        .filter(|s| s.waited.cgroup.as_deref() == Some(quota) && s.duration_ns >= LONG_WAIT_NS)
        .map(|s| (s, stall_verdict(s, quota)))
        .collect();
    judge(report, "stalls", &stalls)
}

/// throttle-enqueue: each wakeup a sleeper measured as held at least LONG_WAIT_NS (with some
/// slack) has long waits in its round, judged against that round's quota; a wakeup it measured
/// as held clearly less has none; enough wakeups were held.
pub fn check_enqueue(report: &Report, truth: &throttle_enqueue::Truth) -> Result<(), String> {
    let mut judged = Vec::new();
    let mut held = 0;
    for round in &truth.rounds {
        for (&tid, &kept) in truth.sleeper_tids.iter().zip(&round.kept_ns) {
            let waits: Vec<&RunqEvent> = report
                .runq_events
                .iter()
                .filter(|e| {
                    e.tid == tid
                        && e.wait_ns >= LONG_WAIT_NS
                        && (round.start_ns..round.start_ns + ROUND_NS).contains(&e.ts_ns)
                })
                .collect();
            if kept >= LONG_WAIT_NS + MEASURE_SLACK_NS {
                held += 1;
                if waits.is_empty() {
                    return Err(report.annotate(format!(
                        "sleeper {tid} was kept off its CPU {} ms in the round of {}, and no \
                         long wait of it is reported",
                        kept / 1_000_000,
                        round.cgroup
                    )));
                }
            } else if kept + MEASURE_SLACK_NS < LONG_WAIT_NS && !waits.is_empty() {
                return Err(report.annotate(format!(
                    "sleeper {tid} was kept off its CPU only {} ms in the round of {}, yet long \
                     waits of it are reported:\n{}",
                    kept / 1_000_000,
                    round.cgroup,
                    pretty(&waits)
                )));
            }
            judged.extend(
                waits
                    .into_iter()
                    .map(|e| (e, event_verdict(e, &round.cgroup))),
            );
        }
    }
    if held < MIN_HELD {
        return Err(format!(
            "the quota held only {held} wakeups {} ms or more (need {MIN_HELD}): {}",
            LONG_WAIT_NS / 1_000_000,
            pretty(truth)
        ));
    }
    judge(report, "waits of the sleepers", &judged)
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::checks::fixtures::{assert_fails, culprit, stall, with, MS, QUIET};
    use crate::scenario::throttle_enqueue::{Round, Truth};

    const QUOTA: &str = "/stalltop_throttled_moved";

    fn event(tid: u32, ts_ns: u64, wait_ns: u64, moved: bool, throttled: Option<&str>) -> Value {
        json!({"cpu": 1, "ts_ns": ts_ns, "wait_ns": wait_ns, "steal_ns": 0, "pid": tid,
            "tid": tid, "comm": "reqloop", "cgroup": QUOTA,
            "ran_instead": {"pid": 0, "comm": "swapper/1", "cgroup": "/"},
            "throttled_cgroup": throttled,
            "migrated": moved.then(|| json!({"from_cpu": 0, "migrations": 1}))})
    }

    fn throttled_stall(i: u64) -> Value {
        let mut s = stall(1, i * 100 * MS, 88 * MS, "throttled");
        s["waited"] = json!({"pid": 10, "comm": "reqloop", "cgroup": QUOTA, "wait_ns": 88 * MS});
        s["throttled_cgroup"] = json!(QUOTA);
        s
    }

    /// A report with `events` and a throttled stall per event.
    fn report_of(events: Vec<Value>) -> Report {
        let stalls: Vec<Value> = (0..events.len() as u64).map(throttled_stall).collect();
        let report = with(QUIET, "/runq_events", Value::Array(events));
        let mut doc = serde_json::to_value(&report).unwrap();
        doc["stalls"] = Value::Array(stalls);
        serde_json::from_value(doc).unwrap()
    }

    fn moved_truth() -> CpuStatDelta {
        CpuStatDelta {
            cgroup: QUOTA.into(),
            quota_us: 12000,
            period_us: 100000,
            nr_periods: 100,
            nr_throttled: 95,
            throttled_ns: 8_000_000_000,
        }
    }

    /// 40 throttled long waits, every fourth moved.
    fn moved_events() -> Vec<Value> {
        (0..40)
            .map(|i| {
                event(
                    10 + i % 3,
                    i as u64 * 100 * MS,
                    88 * MS,
                    i % 4 == 0,
                    Some(QUOTA),
                )
            })
            .collect()
    }

    #[test]
    fn throttled_moved_waits_pass() {
        check_moved(&report_of(moved_events()), &moved_truth()).unwrap();
    }

    #[test]
    fn a_moved_wait_that_says_the_cpu_was_idle_fails() {
        let mut events = moved_events();
        events[4] = event(11, 400 * MS, 88 * MS, true, None);
        assert_fails(
            check_moved(&report_of(events), &moved_truth()),
            "39 of 40 long waits (30 ms or more) are throttles of their quota (need 95%: 38); \
             1 say the CPU was idle or name a task",
        );
    }

    #[test]
    fn a_stall_that_blames_a_task_fails() {
        let mut doc = serde_json::to_value(report_of(moved_events())).unwrap();
        doc["stalls"][3]["kind"] = json!("runq");
        doc["stalls"][3]["culprit"] = culprit(7, "kworker/1:1", "/", None);
        let report: Report = serde_json::from_value(doc).unwrap();
        assert_fails(
            check_moved(&report, &moved_truth()),
            "Task(\"kworker/1:1\")",
        );
    }

    #[test]
    fn waits_the_hypervisor_took_are_excused_up_to_five_percent() {
        let mut events = moved_events();
        events[1]["throttled_cgroup"] = json!(null);
        events[1]["steal_ns"] = json!(50 * MS);
        check_moved(&report_of(events.clone()), &moved_truth()).unwrap();
        for i in [2, 3, 5] {
            events[i]["throttled_cgroup"] = json!(null);
            events[i]["steal_ns"] = json!(50 * MS);
        }
        assert_fails(
            check_moved(&report_of(events), &moved_truth()),
            "36 of 40 long waits",
        );
    }

    #[test]
    fn a_run_with_too_few_moved_waits_says_nothing() {
        let events: Vec<Value> = (0..40)
            .map(|i| event(10, i * 100 * MS, 88 * MS, i < 2, Some(QUOTA)))
            .collect();
        assert_fails(
            check_moved(&report_of(events), &moved_truth()),
            "2 of 40 long waits of /stalltop_throttled_moved moved",
        );
    }

    const FIRST: u64 = 1_000 * MS;

    fn round_cgroup(r: u64) -> String {
        format!("/stalltop_enqueue/round{r}")
    }

    /// 10 rounds of two sleepers (tids 20 and 21); the first held 60 ms each round, the
    /// second 3 ms.
    fn enqueue_truth() -> Truth {
        Truth {
            sleeper_tids: vec![20, 21],
            rounds: (0..10)
                .map(|r| Round {
                    cgroup: round_cgroup(r),
                    start_ns: FIRST + r * ROUND_NS,
                    kept_ns: vec![60 * MS, 3 * MS],
                })
                .collect(),
        }
    }

    fn held_wait(r: u64, throttled: Option<String>) -> Value {
        let mut e = event(20, FIRST + r * ROUND_NS + 100 * MS, 59 * MS, false, None);
        e["comm"] = json!("sleeper");
        e["cgroup"] = json!(round_cgroup(r));
        e["throttled_cgroup"] = json!(throttled);
        e
    }

    fn enqueue_report(events: Vec<Value>) -> Report {
        with(QUIET, "/runq_events", Value::Array(events))
    }

    #[test]
    fn held_wakeups_that_are_their_rounds_throttles_pass() {
        let events = (0..10)
            .map(|r| held_wait(r, Some(round_cgroup(r))))
            .collect();
        check_enqueue(&enqueue_report(events), &enqueue_truth()).unwrap();
    }

    #[test]
    fn a_held_wakeup_blamed_on_the_hog_or_named_after_another_round_fails() {
        let mut events: Vec<Value> = (0..10)
            .map(|r| held_wait(r, Some(round_cgroup(r))))
            .collect();
        events[2] = held_wait(2, None);
        events[2]["ran_instead"] =
            json!({"pid": 90, "comm": "hog", "cgroup": "/stalltop_bystander"});
        assert_fails(
            check_enqueue(&enqueue_report(events.clone()), &enqueue_truth()),
            "Task(\"hog\")",
        );
        events[2] = held_wait(2, Some(round_cgroup(1)));
        assert_fails(
            check_enqueue(&enqueue_report(events), &enqueue_truth()),
            "9 of 10 long waits of the sleepers",
        );
    }

    #[test]
    fn a_held_wakeup_without_a_long_wait_fails() {
        let events = (1..10)
            .map(|r| held_wait(r, Some(round_cgroup(r))))
            .collect();
        assert_fails(
            check_enqueue(&enqueue_report(events), &enqueue_truth()),
            "sleeper 20 was kept off its CPU 60 ms in the round of /stalltop_enqueue/round0",
        );
    }

    #[test]
    fn a_long_wait_of_a_sleeper_that_was_not_held_fails() {
        let mut events: Vec<Value> = (0..10)
            .map(|r| held_wait(r, Some(round_cgroup(r))))
            .collect();
        let mut other = held_wait(4, Some(round_cgroup(4)));
        other["tid"] = json!(21);
        events.push(other);
        assert_fails(
            check_enqueue(&enqueue_report(events), &enqueue_truth()),
            "sleeper 21 was kept off its CPU only 3 ms",
        );
    }

    #[test]
    fn too_few_held_wakeups_say_nothing() {
        let mut truth = enqueue_truth();
        for round in &mut truth.rounds[4..] {
            round.kept_ns[0] = 2 * MS;
        }
        let events = (0..4)
            .map(|r| held_wait(r, Some(round_cgroup(r))))
            .collect();
        assert_fails(
            check_enqueue(&enqueue_report(events), &truth),
            "the quota held only 4 wakeups",
        );
    }
}
