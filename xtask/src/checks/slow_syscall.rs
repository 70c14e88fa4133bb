//! The slow-syscall check: stalltop's syscall table has each long call with its syscall, file,
//! wall and on-CPU time, fadvise64 has its full latency distribution, and a stall names the call
//! that delayed the victim.

use super::report::{Report, Settings, Stall};
use super::{percent_of, pretty};
use crate::scenario::slow_syscall;

/// slow-syscall: a call's wall time as stalltop reports it, within this of the culprit's own
/// measurement (the agreement seen is within 1.5%).
const CALL_WALL_PERCENT: u64 = 10;
/// slow-syscall: stalltop's on-CPU time of a call is at least this much below the culprit's own
/// CPU clock, and at most this much above `wall - runq wait` (the ceiling stolen time included:
/// the culprit's CPU clock excludes what the host stole, stalltop's switch-to-switch time does
/// not).
const CALL_ONCPU_PERCENT: u64 = 10;
/// ... plus this for calls of the same syscall the runtime makes on its own in the culprit's
/// cgroup (thread stacks and large buffers freed by munmap: ~0.2 ms each, a few per run).
const CALL_ONCPU_SLACK_NS: u64 = 1_000_000;
/// slow-syscall: the victim must have been this much later than stalltop's runq threshold for a
/// runq stall to be required (its lateness also holds the timer's own latency).
const VICTIM_MARGIN_NS: u64 = 1_000_000;
/// slow-syscall: fadvise64 p50/p99 within this of the scenario's: the report's quantiles come
/// from log-linear slots (within an eighth), the scenario's from user space (+~1 us a call).
const QUANTILE_PERCENT: u64 = 20;
const QUANTILE_SLACK_NS: u64 = 1_000;

/// slow-syscall with hooked syscalls (exact): stalltop's syscall table has each long call with its syscall, file, wall and
/// on-CPU time; fadvise64 has its full latency distribution; and where the victim was delayed
/// by a call past the runq threshold, the stall names the culprit and its syscall. Every failure
/// is listed, not just the first.
pub fn check(report: &Report, truth: &slow_syscall::Truth) -> Result<(), String> {
    let mut failures = Vec::new();
    for call in &truth.calls {
        if let Err(message) = long_call(report, truth, call) {
            failures.push(message);
        }
    }
    if let Err(message) = fadvise_distribution(report, &truth.fadvise) {
        failures.push(message);
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(report.annotate(failures.join("\n\n")))
    }
}

/// A report path (or pattern with `*` components) names `path`.
pub(super) fn path_matches(pattern: &str, path: &str) -> bool {
    let (p, q): (Vec<&str>, Vec<&str>) = (pattern.split('/').collect(), path.split('/').collect());
    p.len() == q.len() && p.iter().zip(&q).all(|(a, b)| a == b || *a == "*")
}

pub(super) enum Listing {
    Must,
    MustNot,
    Ambiguous,
}

/// Whether stalltop must list a call as slow (its own CPU clock, or its least possible time in
/// the kernel, is twice a threshold: stalltop's on-CPU time leaves out the softirqs the CPU
/// clock holds), must not (wall time under 90% of the wall threshold, and wall minus runnable
/// time, which bounds stalltop's on-CPU time, under 90% of the on-CPU one), or anything
/// between.
pub(super) fn listing(settings: &Settings, timing: &slow_syscall::Timing) -> Listing {
    let in_kernel_at_least = timing.in_kernel_at_least();
    if timing.oncpu_ns >= 2 * settings.syscall_oncpu_threshold_ns
        || in_kernel_at_least >= 2 * settings.syscall_wall_threshold_ns
    {
        Listing::Must
    } else if timing.wall_ns * 10 < settings.syscall_wall_threshold_ns * 9
        && in_kernel_at_least * 10 < settings.syscall_oncpu_threshold_ns * 9
    {
        Listing::MustNot
    } else {
        Listing::Ambiguous
    }
}

pub(super) fn too_close(settings: &Settings, timing: &slow_syscall::Timing) -> String {
    format!(
        "a call took {} ns ({} ns on its CPU clock, {} ns runnable), too close to stalltop's \
         thresholds ({} ns on-CPU, {} ns wall) to say whether it must be listed",
        timing.wall_ns,
        timing.oncpu_ns,
        timing.runq_wait_ns,
        settings.syscall_oncpu_threshold_ns,
        settings.syscall_wall_threshold_ns
    )
}

/// The calls of a group stalltop must list as slow and the others, which it must not (see
/// `listing`); a call between fails.
fn classify<'t>(
    settings: &Settings,
    call: &'t slow_syscall::Call,
) -> Result<(Vec<&'t slow_syscall::Timing>, Vec<&'t slow_syscall::Timing>), String> {
    let (mut slow, mut fast) = (Vec::new(), Vec::new());
    for timing in &call.calls {
        match listing(settings, timing) {
            Listing::Must => slow.push(timing),
            Listing::MustNot => fast.push(timing),
            Listing::Ambiguous => return Err(too_close(settings, timing)),
        }
    }
    if slow.is_empty() {
        return Err("none of the calls was slow: the scenario did not inject its stall".into());
    }
    Ok((slow, fast))
}

fn long_call(
    report: &Report,
    truth: &slow_syscall::Truth,
    call: &slow_syscall::Call,
) -> Result<(), String> {
    let what = format!(
        "{} ({}) by {} in {}",
        call.syscall,
        call.path.as_deref().unwrap_or("no file"),
        truth.comm,
        call.cgroup
    );
    let Some(row) = report
        .syscalls
        .iter()
        .find(|row| row.syscall == call.syscall && row.container == call.cgroup)
    else {
        let seen: Vec<&str> = report
            .syscalls
            .iter()
            .filter(|row| row.syscall == call.syscall)
            .map(|row| row.container.as_str())
            .collect();
        return Err(format!(
            "{what}: no `{}` row for container {} in the syscall table; containers with one: \
             {seen:?}",
            call.syscall, call.cgroup
        ));
    };
    let fail = |problem: String| {
        Err(format!(
            "{what}: {problem}\nsyscall row:\n{}\nthe culprit's own timing:\n{}",
            pretty(row),
            pretty(call)
        ))
    };
    let (slow, fast) = match classify(&report.settings, call) {
        Ok(split) => split,
        Err(problem) => return fail(problem),
    };
    // What the scenario knows of the slow calls' time in the kernel: at most their wall time, at
    // least that minus the time they were runnable (a preemption on the way out is in the
    // former only; one inside in both). A call never switched out was in the kernel exactly its
    // wall time (less ~10 us of schedstat reads).
    let wall: u64 = slow.iter().map(|t| t.wall_ns).sum();
    let least: u64 = slow.iter().map(|t| t.in_kernel_at_least()).sum();
    let held_on = slow.iter().all(|t| t.switches == 0);
    let (floor, ceiling) = if held_on {
        (
            least - percent_of(least, CALL_WALL_PERCENT),
            least + percent_of(least, CALL_WALL_PERCENT),
        )
    } else {
        (
            least - percent_of(least, CALL_WALL_PERCENT),
            wall + percent_of(wall, CALL_WALL_PERCENT),
        )
    };
    let reported_wall = match &call.path {
        Some(path) => {
            let Some(entry) = row.top_paths.iter().find(|e| path_matches(&e.path, path)) else {
                return fail(format!("{path} is not in top_paths"));
            };
            if entry.count != slow.len() as u64 {
                return fail(format!(
                    "top_paths counts {} slow calls on {}, the culprit made {} (and {} fast ones)",
                    entry.count,
                    entry.path,
                    slow.len(),
                    fast.len()
                ));
            }
            entry.total_ns
        }
        // A single call, the slowest of its syscall in the culprit's cgroup by far.
        None if slow.len() == 1 => row.max_ns,
        None => return fail(format!("{} slow calls without a file", slow.len())),
    };
    if !(floor..=ceiling).contains(&reported_wall) {
        return fail(format!(
            "wall {reported_wall} ns is outside {floor}..={ceiling} ns: ±{CALL_WALL_PERCENT}% \
             around the calls' {} (wall {wall} ns, of which {} ns runnable{})",
            if held_on {
                "time in the kernel".to_owned()
            } else {
                format!("{least}..={wall} ns in the kernel")
            },
            wall - least,
            if held_on { ": never switched out" } else { "" }
        ));
    }
    // On-CPU of the row (every call of the syscall in the cgroup): at least the calls' own CPU
    // clock, at most their wall time, plus a few calls the runtime makes on its own. Not at most
    // "wall minus run_delay": stalltop's on-CPU is the time the task held the guest's CPU, which
    // includes what the hypervisor stole from that vCPU meanwhile; the thread's CPU clock and
    // schedstat put that steal on the runnable side (checked against a sched_switch trace: a
    // 44.4 ms fadvise64 held CPU 1 for 39.2 ms, stalltop said 38.9 ms, its CPU clock 27.6 ms and
    // run_delay 17.0 ms).
    // stalltop's on-CPU leaves out the softirqs that ran inside the calls' slices (their time is
    // the softirq's); the thread's CPU clock counts them: compare the clock with on-CPU plus the
    // softirq time of the calls stalltop listed (a CI run: a 93 ms write over 4,000 zombie memory
    // cgroups held 7.3 ms of softirqs, on-CPU 36.8 ms, CPU clock 41.0 ms).
    let softirq: u64 = report
        .slow_syscalls
        .iter()
        .filter(|c| c.tid == call.tid && c.syscall == call.syscall)
        .map(|c| c.softirq_ns)
        .sum();
    let clock: u64 = call.calls.iter().map(|t| t.oncpu_ns).sum();
    let wall: u64 = call.calls.iter().map(|t| t.wall_ns).sum();
    let floor = clock - percent_of(clock, CALL_ONCPU_PERCENT);
    let ceiling = wall + CALL_ONCPU_SLACK_NS;
    if !(floor..=ceiling).contains(&(row.oncpu_total_ns + softirq)) {
        return fail(format!(
            "on-CPU {} ns (+ {softirq} ns of softirqs inside) is outside {floor}..={ceiling} ns: \
             the {} calls' own CPU clock {clock} ns -{CALL_ONCPU_PERCENT}%, up to their wall \
             time {wall} ns + {CALL_ONCPU_SLACK_NS} ns",
            row.oncpu_total_ns,
            call.calls.len()
        ));
    }
    stalls_name_the_calls(report, truth, call, &slow, true).or_else(fail)
}

/// Stalls during the slow calls `slow` of `call` that name it get its file right, and a call
/// that held the CPU throughout while the victim woke late is named by a stall the victim waited
/// in (with its syscall when `with_syscall`: stalltop knew which call the culprit was in).
pub(super) fn stalls_name_the_calls(
    report: &Report,
    truth: &slow_syscall::Truth,
    call: &slow_syscall::Call,
    slow: &[&slow_syscall::Timing],
    with_syscall: bool,
) -> Result<(), String> {
    let names_call = |c: &super::report::Culprit| {
        c.tid == call.tid && (!with_syscall || c.syscall.as_deref() == Some(call.syscall))
    };
    for timing in slow {
        let overlapping = |stall: &&Stall| {
            stall.start_ns < timing.end_ns && stall.start_ns + stall.duration_ns > timing.start_ns
        };
        // Stalls that name this call must get its file right.
        for stall in report.stalls.iter().filter(overlapping) {
            let Some(culprit) = &stall.culprit else {
                continue;
            };
            if culprit.tid != call.tid || culprit.syscall.as_deref() != Some(call.syscall) {
                continue;
            }
            if let (Some(reported), Some(path)) = (&culprit.path, &call.path) {
                if !path_matches(reported, path) {
                    return Err(format!(
                        "a stall names the call's file {reported}:\n{}",
                        pretty(stall)
                    ));
                }
            }
        }
        // A call that held the CPU throughout delayed the victim: the stall must name it. The
        // victim waited in the stall when it is the waiter the stall shows, or when its wait
        // (a run-queue record) lies in the stall: a stall shows one waiter, the longest one
        // kept off by a neighbour (seen: a kworker that waited 23.7 ms beside the victim).
        let required_late = report.settings.runq_threshold_ns + VICTIM_MARGIN_NS;
        if timing.switches <= 1 && timing.victim_late_ns >= required_late {
            let victim_waited_in = |stall: &Stall| {
                stall.waited.comm.as_deref() == Some(truth.victim_comm)
                    || report.runq_events.iter().any(|event| {
                        event.cpu == stall.cpu
                            && event.comm == truth.victim_comm
                            && event.ts_ns.saturating_sub(event.wait_ns) >= stall.start_ns
                            && event.ts_ns <= stall.start_ns + stall.duration_ns
                    })
            };
            let named = report.stalls.iter().filter(overlapping).any(|stall| {
                victim_waited_in(stall) && stall.culprit.as_ref().is_some_and(names_call)
            });
            if !named {
                let candidates: Vec<&Stall> = report.stalls.iter().filter(overlapping).collect();
                return Err(format!(
                    "the call held CPU {} for {} ns without yielding and the victim woke {} ns \
                     late meanwhile (>= runq threshold {} + {} ns), but no stall in which the \
                     victim waited names {} (tid {}){}; stalls overlapping the call:\n{}",
                    truth.cpu,
                    timing.wall_ns - timing.runq_wait_ns,
                    timing.victim_late_ns,
                    report.settings.runq_threshold_ns,
                    VICTIM_MARGIN_NS,
                    truth.comm,
                    call.tid,
                    if with_syscall {
                        format!(" in `{}`", call.syscall)
                    } else {
                        String::new()
                    },
                    pretty(&candidates)
                ));
            }
        }
    }
    Ok(())
}

/// Case 5's table: every fadvise64 call counted, its file listed (`long_call` checks the
/// slow one), its distribution between the scenario's least-in-kernel and wall percentiles.
fn fadvise_distribution(report: &Report, truth: &slow_syscall::Fadvise) -> Result<(), String> {
    let Some(row) = report
        .syscalls
        .iter()
        .find(|row| row.syscall == "fadvise64" && row.container == truth.cgroup)
    else {
        return Err(format!(
            "fadvise64: no row for container {} in the syscall table",
            truth.cgroup
        ));
    };
    let fail = |problem: String| {
        Err(format!(
            "fadvise64: {problem}\nsyscall row:\n{}\nthe scenario's own timing:\n{}",
            pretty(row),
            pretty(truth)
        ))
    };
    let (least, wall) = (truth.in_kernel_at_least, truth.wall);
    if row.count != wall.count as u64 {
        return fail(format!(
            "count {} is not the {} calls the scenario made (its cgroup holds only them)",
            row.count, wall.count
        ));
    }
    for (name, reported, low, high) in [
        ("p50", row.p50_ns.unwrap_or(0), least.p50_ns, wall.p50_ns),
        ("p99", row.p99_ns.unwrap_or(0), least.p99_ns, wall.p99_ns),
        ("max", row.max_ns, least.max_ns, wall.max_ns),
    ] {
        let floor = (low - percent_of(low, QUANTILE_PERCENT)).saturating_sub(QUANTILE_SLACK_NS);
        let ceiling = high + percent_of(high, QUANTILE_PERCENT) + QUANTILE_SLACK_NS;
        if !(floor..=ceiling).contains(&reported) {
            return fail(format!(
                "{name} {reported} ns is outside {floor}..={ceiling} ns: the scenario's {name} \
                 of least time in the kernel {low} ns and of wall time {high} ns, \
                 ±{QUANTILE_PERCENT}% + {QUANTILE_SLACK_NS} ns"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::checks::fixtures::{
        assert_fails, listed, report, slow_report, slow_truth, timing, with, FORCE_EMPTY, MS,
    };

    #[test]
    fn slow_syscall_passes_when_the_report_matches() {
        check(&report(&slow_report()), &slow_truth()).unwrap();
    }

    #[test]
    fn slow_syscall_fails_on_a_wrong_wall_time_or_count_or_file() {
        // smaps: 17 ms of a call the culprit saw take 17..22 ms; 25 ms is over 22 + 10%.
        let too_long = with(
            &slow_report(),
            "/syscalls/0/top_paths/0/total_ns",
            json!(25 * MS),
        );
        assert_fails(
            check(&too_long, &slow_truth()),
            "wall 25000000 ns is outside",
        );
        // getdents64 never switched out... but once: 20 ms of 20..30 ms is fine, 15 is not.
        let short = with(
            &slow_report(),
            "/syscalls/2/top_paths/0/total_ns",
            json!(15 * MS),
        );
        assert_fails(check(&short, &slow_truth()), "wall 15000000 ns is outside");
        let twice = with(&slow_report(), "/syscalls/3/top_paths/0/count", json!(2));
        assert_fails(
            check(&twice, &slow_truth()),
            "top_paths counts 2 slow calls",
        );
        let elsewhere = with(
            &slow_report(),
            "/syscalls/3/top_paths/0/path",
            json!("/other"),
        );
        assert_fails(
            check(&elsewhere, &slow_truth()),
            &format!("{FORCE_EMPTY} is not in top_paths"),
        );
        // munmap: 130 ms of wall, 30 of them runnable, so 90..143 ms in the kernel.
        let munmap = with(&slow_report(), "/syscalls/1/max_ns", json!(85 * MS));
        assert_fails(check(&munmap, &slow_truth()), "munmap (no file)");
    }

    #[test]
    fn slow_syscall_fails_on_on_cpu_time_the_call_cannot_have_had() {
        // More on-CPU time than the calls lasted (50.06 ms of wall in all).
        let inflated = with(&slow_report(), "/syscalls/4/oncpu_total_ns", json!(52 * MS));
        assert_fails(
            check(&inflated, &slow_truth()),
            "fadvise64 (/var/tmp/stalltop-slow-syscall/app.log) by culprit in /stalltop_glog: on-CPU",
        );
        let under = with(&slow_report(), "/syscalls/1/oncpu_total_ns", json!(80 * MS));
        assert_fails(
            check(&under, &slow_truth()),
            "on-CPU 80000000 ns (+ 0 ns of softirqs inside) is outside",
        );
    }

    #[test]
    fn softirq_time_inside_the_calls_counts_toward_their_cpu_clock() {
        // The munmap's own CPU clock is 100 ms; stalltop's on-CPU of 85 ms leaves out 10 ms of
        // softirqs that ran inside it.
        let mut doc: Value = serde_json::from_str(&slow_report()).unwrap();
        doc["syscalls"][1]["oncpu_total_ns"] = json!(85 * MS);
        let without: Report = serde_json::from_value(doc.clone()).unwrap();
        assert_fails(check(&without, &slow_truth()), "on-CPU 85000000 ns");
        let mut munmap = listed(11, "munmap", None, 829.5, 129.0, 85.0);
        munmap["softirq_ns"] = json!(10 * MS);
        doc["slow_syscalls"] = json!([munmap]);
        check(&serde_json::from_value(doc).unwrap(), &slow_truth()).unwrap();
    }

    #[test]
    fn the_victim_waited_in_a_stall_that_shows_a_longer_waiter_when_its_wait_lies_inside() {
        // Seen in CI: a kworker waited 23.7 ms beside the victim behind getdents64, and the
        // stall shows the kworker (the longer wait behind a neighbour).
        let mut doc: Value = serde_json::from_str(&slow_report()).unwrap();
        doc["stalls"][0]["waited"] = json!({"pid": 2812, "comm": "kworker/1:3", "cgroup": "/"});
        let victim_wait = |cpu: u32| {
            json!([{"cpu": cpu, "ts_ns": 1_100_300_000 + 18 * MS, "wait_ns": 15 * MS,
                    "steal_ns": 0, "pid": 4001, "tid": 4001, "comm": "victim",
                    "cgroup": "/stalltop_victim",
                    "ran_instead": {"pid": 11, "comm": "culprit", "cgroup": "/stalltop_culprit"}}])
        };
        doc["runq_events"] = victim_wait(1);
        check(&serde_json::from_value(doc.clone()).unwrap(), &slow_truth()).unwrap();
        // Its wait on another CPU is not in this stall.
        doc["runq_events"] = victim_wait(0);
        assert_fails(
            check(&serde_json::from_value(doc).unwrap(), &slow_truth()),
            "no stall in which the victim waited names culprit (tid 11)",
        );
    }

    #[test]
    fn slow_syscall_fails_when_the_victim_stall_does_not_name_the_call() {
        // Seen on this VM: the victim waited out getdents64, and the stall names the culprit
        // but not its syscall (the culprit was switched out on its way back to user space).
        let mut doc: Value = serde_json::from_str(&slow_report()).unwrap();
        doc["stalls"][0]["culprit"]["syscall"] = Value::Null;
        let result = check(&serde_json::from_value(doc).unwrap(), &slow_truth());
        assert_fails(
            result,
            "no stall in which the victim waited names culprit (tid 11)",
        );
        let none = with(&slow_report(), "/stalls", json!([]));
        assert_fails(check(&none, &slow_truth()), "in `getdents64`");
    }

    #[test]
    fn slow_syscall_refuses_calls_too_close_to_the_thresholds() {
        let mut truth = slow_truth();
        truth.calls[0].calls[3] = timing(303, 0.95, 0.95, 0.0, 0, 0.0);
        assert_fails(
            check(&report(&slow_report()), &truth),
            "too close to stalltop's thresholds",
        );
    }

    #[test]
    fn fadvise_needs_every_call_and_its_distribution() {
        let missing = with(&slow_report(), "/syscalls/4/count", json!(3));
        assert_fails(check(&missing, &slow_truth()), "count 3 is not the 4 calls");
        let slow_p50 = with(&slow_report(), "/syscalls/4/p50_ns", json!(60_000));
        assert_fails(check(&slow_p50, &slow_truth()), "p50 60000 ns is outside");
    }
}
