//! The migration check: each wait the waiter timed (woken on CPU 0 behind `hog0`, moved to
//! CPU 1 behind `hog1`) is a run-queue event of its whole length that began on CPU 0, and its
//! culprit is `hog0`, which held it longest; so is the waiter's stall.

use super::report::{Report, RunqEvent};
use crate::scenario::migration::{Round, Truth, FIRST_CPU, FIRST_HOG_COMM, MOVE, SECOND_HOG_END};
use crate::scenario::CPU;

/// How far stalltop's wait may be from the waiter's own timing (the timer's wakeup and the
/// moments each side reads the clock differ by microseconds; the host can add a little).
const WAIT_TOLERANCE_NS: u64 = 2_000_000;
/// Rounds whose wait is judged: the waiter ran on CPU 1 after the move (a round the host
/// delayed past the second hog's end still is one).
const MIN_JUDGED_WAIT_NS: u64 = MOVE + 2_000_000;
/// Judged rounds that must come out right (the host may stall a vCPU in one).
const RIGHT_PERCENT: u64 = 90;
/// Rounds needed for the percentage to mean something.
const MIN_JUDGED: usize = 10;

/// Where stalltop's answer for one round went wrong.
#[derive(Debug, PartialEq, Eq)]
enum Miss {
    NoEvent,
    Length { reported_ns: u64 },
    NotMoved,
    Culprit { comm: String },
}

pub fn check(report: &Report, truth: &Truth) -> Result<(), String> {
    let judged: Vec<&Round> = truth
        .rounds
        .iter()
        .filter(|r| r.ran_cpu == CPU && r.wait_ns() >= MIN_JUDGED_WAIT_NS)
        .collect();
    if judged.len() < MIN_JUDGED {
        return Err(format!(
            "only {} of {} rounds ended on CPU {CPU} after the move (need {MIN_JUDGED}): {:?}",
            judged.len(),
            truth.rounds.len(),
            truth.rounds
        ));
    }
    let misses: Vec<(&Round, Miss)> = judged
        .iter()
        .filter_map(|&round| {
            judge(report, truth.waiter_tid, round)
                .err()
                .map(|m| (round, m))
        })
        .collect();
    let right = judged.len() - misses.len();
    if (right as u64) * 100 < RIGHT_PERCENT * judged.len() as u64 {
        return Err(report.annotate(format!(
            "{right} of {} moved waits came out whole (±{} ms), from CPU {FIRST_CPU} and blamed \
             on {FIRST_HOG_COMM} (need {RIGHT_PERCENT}%); misses: {misses:#?}",
            judged.len(),
            WAIT_TOLERANCE_NS / 1_000_000
        )));
    }
    check_stall(report)
}

/// The run-queue event of `round`'s wait, judged against the waiter's own timing.
fn judge(report: &Report, waiter_tid: u32, round: &Round) -> Result<(), Miss> {
    let event = event_of(report, waiter_tid, round).ok_or(Miss::NoEvent)?;
    if event.wait_ns.abs_diff(round.wait_ns()) > WAIT_TOLERANCE_NS {
        return Err(Miss::Length {
            reported_ns: event.wait_ns,
        });
    }
    let from_first_cpu = event
        .migrated
        .as_ref()
        .is_some_and(|m| m.from_cpu == FIRST_CPU as u32);
    if !from_first_cpu {
        return Err(Miss::NotMoved);
    }
    if event.ran_instead.comm != FIRST_HOG_COMM {
        return Err(Miss::Culprit {
            comm: event.ran_instead.comm.clone(),
        });
    }
    Ok(())
}

/// The waiter's wait that ended between its wakeup and its run (as it read the clock).
fn event_of<'a>(report: &'a Report, waiter_tid: u32, round: &Round) -> Option<&'a RunqEvent> {
    report.runq_events.iter().find(|e| {
        e.tid == waiter_tid
            && e.cpu == CPU as u32
            && e.ts_ns >= round.wake_ns
            && e.ts_ns <= round.ran_ns
    })
}

/// The waiter's longest stall of its wait alone says where its wait began and blames hog0. A
/// stall that merged other tasks' waits weighs their holders too: in one CI run kdamond and a
/// kworker waited 21 and 23 ms behind hog1 on CPU 1 within the waiter's 39 ms wait, and that
/// stall rightly named hog1.
fn check_stall(report: &Report) -> Result<(), String> {
    let longest = report
        .stalls
        .iter()
        .filter(|s| s.waited.comm.as_deref() == Some(crate::scenario::migration::WAITER_COMM))
        .filter(|s| s.waits == 1)
        .max_by_key(|s| s.waited.wait_ns)
        .ok_or_else(|| report.annotate("no stall of the waiter's wait alone".into()))?;
    let moved = longest
        .waited
        .migrated
        .as_ref()
        .is_some_and(|m| m.from_cpu == FIRST_CPU as u32);
    let blamed = longest.culprit.as_ref().map(|c| c.comm.as_str());
    if !moved || blamed != Some(FIRST_HOG_COMM) {
        return Err(report.annotate(format!(
            "the waiter's longest stall ({:?} ns, at most {} ms expected) says moved from CPU \
             {FIRST_CPU}: {moved}, culprit {blamed:?} (expected {FIRST_HOG_COMM})",
            longest.waited.wait_ns,
            SECOND_HOG_END / 1_000_000
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::checks::fixtures::{assert_fails, culprit, stall, with, MS, QUIET};

    const TID: u32 = 4321;

    fn rounds(n: u64) -> Vec<Round> {
        (0..n)
            .map(|i| Round {
                wake_ns: 1_000 * MS + i * 200 * MS,
                ran_ns: 1_000 * MS + i * 200 * MS + 37 * MS,
                ran_cpu: CPU,
            })
            .collect()
    }

    fn event(round: &Round, wait_ns: u64, from_cpu: Option<u32>, ran: &str) -> Value {
        json!({"cpu": 1, "ts_ns": round.ran_ns - 10_000, "wait_ns": wait_ns, "steal_ns": 0,
            "pid": TID, "tid": TID, "comm": "waiter", "cgroup": "/stalltop_victim",
            "ran_instead": {"pid": 7, "comm": ran, "cgroup": "/stalltop_rt_hogs"},
            "migrated": from_cpu.map(|cpu| json!({"from_cpu": cpu, "migrations": 1}))})
    }

    fn waiter_stall(from_cpu: Option<u32>, blamed: &str) -> Value {
        let mut s = stall(1, 1_000 * MS, 37 * MS, "runq");
        s["waited"] = json!({"pid": TID, "comm": "waiter", "cgroup": "/stalltop_victim",
            "wait_ns": 37 * MS,
            "migrated": from_cpu.map(|cpu| json!({"from_cpu": cpu, "migrations": 1}))});
        s["culprit"] = culprit(7, blamed, "/stalltop_rt_hogs", None);
        s
    }

    /// A report with one event per round made by `event_for`, and the waiter's stall.
    fn report_of(
        rounds: &[Round],
        event_for: impl Fn(usize, &Round) -> Value,
        stall: Value,
    ) -> Report {
        let events: Vec<Value> = rounds
            .iter()
            .enumerate()
            .map(|(i, r)| event_for(i, r))
            .collect();
        let report = with(QUIET, "/runq_events", Value::Array(events));
        let mut doc = serde_json::to_value(&report).unwrap();
        doc["stalls"] = json!([stall]);
        serde_json::from_value(doc).unwrap()
    }

    fn truth(rounds: Vec<Round>) -> Truth {
        Truth {
            waiter_tid: TID,
            rounds,
        }
    }

    fn whole(_: usize, r: &Round) -> Value {
        event(r, r.wait_ns() - 100_000, Some(0), "hog0")
    }

    #[test]
    fn whole_moved_waits_blamed_on_the_first_hog_pass() {
        let rounds = rounds(20);
        let report = report_of(&rounds, whole, waiter_stall(Some(0), "hog0"));
        check(&report, &truth(rounds)).unwrap();
    }

    #[test]
    fn the_stretch_on_the_second_cpu_alone_fails() {
        let rounds = rounds(20);
        let report = report_of(
            &rounds,
            |_, r| event(r, 12 * MS, None, "hog1"),
            waiter_stall(None, "hog1"),
        );
        assert_fails(check(&report, &truth(rounds)), "Length");
    }

    #[test]
    fn a_whole_wait_blamed_on_the_second_hog_fails() {
        let rounds = rounds(20);
        let report = report_of(
            &rounds,
            |_, r| event(r, r.wait_ns(), Some(0), "hog1"),
            waiter_stall(Some(0), "hog0"),
        );
        assert_fails(check(&report, &truth(rounds)), "hog1");
    }

    #[test]
    fn one_round_in_twenty_may_miss() {
        let rounds = rounds(20);
        let one_off = |i: usize, r: &Round| {
            if i == 3 {
                event(r, r.wait_ns(), None, "hog0")
            } else {
                whole(i, r)
            }
        };
        let report = report_of(&rounds, one_off, waiter_stall(Some(0), "hog0"));
        check(&report, &truth(rounds.clone())).unwrap();
        let three_off = |i: usize, r: &Round| {
            if i < 3 {
                event(r, r.wait_ns(), None, "hog0")
            } else {
                whole(i, r)
            }
        };
        let report = report_of(&rounds, three_off, waiter_stall(Some(0), "hog0"));
        assert_fails(check(&report, &truth(rounds)), "NotMoved");
    }

    #[test]
    fn the_stall_must_say_it_moved_and_blame_the_first_hog() {
        let rounds = rounds(20);
        let report = report_of(&rounds, whole, waiter_stall(None, "hog0"));
        assert_fails(
            check(&report, &truth(rounds.clone())),
            "moved from CPU 0: false",
        );
        let report = report_of(&rounds, whole, waiter_stall(Some(0), "hog1"));
        assert_fails(check(&report, &truth(rounds)), "culprit Some(\"hog1\")");
    }

    #[test]
    fn a_stall_that_merged_other_waits_is_not_the_waiters_alone() {
        let rounds = rounds(20);
        let mut merged = waiter_stall(Some(0), "hog1");
        merged["waits"] = json!(3);
        let report = report_of(&rounds, whole, merged);
        assert_fails(
            check(&report, &truth(rounds)),
            "no stall of the waiter's wait alone",
        );
    }

    #[test]
    fn too_few_rounds_that_moved_cannot_be_judged() {
        let mut rounds = rounds(20);
        for r in &mut rounds[5..] {
            r.ran_cpu = FIRST_CPU;
        }
        let report = report_of(&rounds, whole, waiter_stall(Some(0), "hog0"));
        assert_fails(check(&report, &truth(rounds)), "only 5 of 20 rounds");
    }
}
