//! The slow-syscall check without syscall hooks. Sampled (`--syscalls sampled`): each call that
//! held the CPU well past the on-CPU threshold is listed once, with its file, its time on the
//! CPU and its wall time each within a tenth for calls of 20 ms and more (within a tenth and a
//! sampler period below), the syscall table has its kernel time, and the stall names the call.
//! Off: no syscall is listed, and the stall still names the culprit thread.

use super::report::{Report, SlowSyscall};
use super::slow_syscall::{path_matches, stalls_name_the_calls};
use super::{percent_of, pretty};
use crate::scenario::slow_syscall;

/// A listed call's time on the CPU, within this of the culprit's own measurement.
const WALL_PERCENT: u64 = 10;
/// From this long on, a call's time is within WALL_PERCENT alone; below it a sampler period
/// more is allowed (the start and end of a call are each known to half a period).
const LONG_CALL_NS: u64 = 20_000_000;
/// The syscall table's kernel time of the culprit's calls: at least their CPU clock less this,
/// less a period per call, at most their wall time plus a period per call and this slack for
/// calls the runtime makes on its own (munmap of thread stacks).
const ONCPU_PERCENT: u64 = 10;
const ONCPU_SLACK_NS: u64 = 1_000_000;

pub fn check(report: &Report, truth: &slow_syscall::Truth) -> Result<(), String> {
    let period = 1_000_000_000 / u64::from(report.settings.sample_hz.max(1));
    let mut failures: Vec<String> = truth
        .calls
        .iter()
        .filter_map(|call| sampled_call(report, truth, call, period).err())
        .collect();
    if let Err(message) = fadvise_on_top(report, &truth.fadvise) {
        failures.push(message);
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(report.annotate(failures.join("\n\n")))
    }
}

/// Calls a sampler with this period must list: on a CPU (by the thread's own clock) past the
/// threshold by two periods. Calls it cannot list: shorter than a period (two consecutive ticks
/// are needed). Others may be listed or not.
fn must_list(timing: &slow_syscall::Timing, threshold_ns: u64, period: u64) -> bool {
    timing.oncpu_ns >= threshold_ns + 2 * period
}

fn cannot_list(timing: &slow_syscall::Timing, period: u64) -> bool {
    timing.wall_ns < period
}

/// Whether listed call `s`, less `margin` at each end, and the culprit's call `timing` overlap
/// in time.
fn overlaps(s: &SlowSyscall, timing: &slow_syscall::Timing, margin: u64) -> bool {
    let start = s.ts_ns.saturating_sub(s.wall_ns) + margin;
    let end = s.ts_ns.saturating_sub(margin);
    start < timing.end_ns && end > timing.start_ns
}

/// The calls stalltop listed for `call`'s thread and syscall that overlap `timing`, less
/// `margin` at each end.
fn listed_during<'r>(
    report: &'r Report,
    call: &slow_syscall::Call,
    timing: &slow_syscall::Timing,
    margin: u64,
) -> Vec<&'r SlowSyscall> {
    report
        .slow_syscalls
        .iter()
        .filter(|s| s.tid == call.tid && s.syscall == call.syscall && overlaps(s, timing, margin))
        .collect()
}

fn sampled_call(
    report: &Report,
    truth: &slow_syscall::Truth,
    call: &slow_syscall::Call,
    period: u64,
) -> Result<(), String> {
    let what = format!(
        "{} ({}) by {} in {} (sampled)",
        call.syscall,
        call.path.as_deref().unwrap_or("no file"),
        truth.comm,
        call.cgroup
    );
    let fail = |problem: String| {
        Err(format!(
            "{what}: {problem}\nthe culprit's own timing:\n{}",
            pretty(call)
        ))
    };
    let threshold = report.settings.syscall_oncpu_threshold_ns;
    let must: Vec<&slow_syscall::Timing> = call
        .calls
        .iter()
        .filter(|t| must_list(t, threshold, period))
        .collect();
    if must.is_empty() {
        return fail(
            "no call held the CPU long enough: the scenario did not inject its stall".into(),
        );
    }
    // A listed call's start and end are estimates, each up to half a period outside the call
    // (it begins and ends between ticks): the listing of one of two back-to-back calls can
    // reach into the other by that much, so a period less at each end must overlap the call.
    for timing in &must {
        let listed = listed_during(report, call, timing, period);
        let [one] = listed.as_slice() else {
            return fail(format!(
                "a call that ran {} ns on a CPU is listed {} times, not once: {}",
                timing.oncpu_ns,
                listed.len(),
                pretty(&listed)
            ));
        };
        if let (Some(path), reported) = (&call.path, &one.path) {
            if !reported.as_deref().is_some_and(|r| path_matches(r, path)) {
                return fail(format!("listed with file {reported:?}: {}", pretty(one)));
            }
        }
        // Its time on a CPU: at least its CPU clock, at most its time in the kernel (which
        // holds what the host stole from the vCPU); its wall time: its time in the kernel,
        // between wall minus time runnable and wall. The thread's clock holds the softirqs that
        // ran on top of it, which stalltop counts apart (as in the hooked check, slow_syscall):
        // compared with on-CPU plus them (a CI run: a write over zombie memory cgroups, 37.4 ms
        // on the CPU and 6.9 ms of softirqs inside against a clock of 41.9 ms).
        let (clock, least, wall) = (timing.oncpu_ns, timing.in_kernel_at_least(), timing.wall_ns);
        for (what, reported, low, high) in [
            (
                "on the CPU (with the softirqs inside)",
                one.oncpu_ns + one.softirq_ns,
                clock,
                wall,
            ),
            ("of wall time", one.wall_ns, least, wall),
        ] {
            let slack = if low >= LONG_CALL_NS { 0 } else { period };
            let floor = (low - percent_of(low, WALL_PERCENT)).saturating_sub(slack);
            let ceiling = high + percent_of(high, WALL_PERCENT) + slack;
            if !(floor..=ceiling).contains(&reported) {
                return fail(format!(
                    "listed with {reported} ns {what}, outside {floor}..={ceiling} ns \
                     ({low}..={high} ns ±{WALL_PERCENT}%{}): {}",
                    if slack > 0 {
                        " and a sampler period"
                    } else {
                        ""
                    },
                    pretty(one)
                ));
            }
        }
    }
    // A listing that covers only calls shorter than a period (none of the longer ones) is
    // wrong: it takes two ticks a period apart in one call to list it.
    let longer: Vec<&slow_syscall::Timing> = call
        .calls
        .iter()
        .filter(|t| !cannot_list(t, period))
        .collect();
    for timing in call.calls.iter().filter(|t| cannot_list(t, period)) {
        let wrong: Vec<&SlowSyscall> = listed_during(report, call, timing, 0)
            .into_iter()
            .filter(|s| !longer.iter().any(|t| overlaps(s, t, 0)))
            .collect();
        if !wrong.is_empty() {
            return fail(format!(
                "a call of {} ns, shorter than a sampler period, is listed: {}",
                timing.wall_ns,
                pretty(&wrong)
            ));
        }
    }
    let Some(row) = report
        .syscalls
        .iter()
        .find(|row| row.syscall == call.syscall && row.container == call.cgroup)
    else {
        return fail(format!(
            "no `{}` row for {} in the syscall table",
            call.syscall, call.cgroup
        ));
    };
    if row.p50_ns.is_some() || row.p99_ns.is_some() {
        return fail(format!(
            "sampled, yet the row has per-call percentiles: {}",
            pretty(row)
        ));
    }
    let n = call.calls.len() as u64;
    let clock: u64 = call.calls.iter().map(|t| t.oncpu_ns).sum();
    let wall: u64 = call.calls.iter().map(|t| t.wall_ns).sum();
    let floor = (clock - percent_of(clock, ONCPU_PERCENT)).saturating_sub(n * period);
    let ceiling = wall + n * period + ONCPU_SLACK_NS;
    if !(floor..=ceiling).contains(&row.oncpu_total_ns) {
        return fail(format!(
            "the table's kernel time {} ns is outside {floor}..={ceiling} ns: the {n} calls' CPU \
             clock {clock} ns -{ONCPU_PERCENT}% - a period each, up to their wall time {wall} ns \
             + a period each + {ONCPU_SLACK_NS} ns\nsyscall row:\n{}",
            row.oncpu_total_ns,
            pretty(row)
        ));
    }
    stalls_name_the_calls(report, truth, call, &must, true).or_else(fail)
}

/// Case 5: fadvise64 has the most kernel time of the glog cgroup's syscalls, marked sampled,
/// with its file.
fn fadvise_on_top(report: &Report, truth: &slow_syscall::Fadvise) -> Result<(), String> {
    let rows: Vec<_> = report
        .syscalls
        .iter()
        .filter(|row| row.container == truth.cgroup)
        .collect();
    let top = rows.iter().max_by_key(|row| row.oncpu_total_ns);
    match top {
        Some(row)
            if row.syscall == "fadvise64"
                && row.p50_ns.is_none()
                && row
                    .top_paths
                    .iter()
                    .any(|p| path_matches(&p.path, &truth.path)) =>
        {
            Ok(())
        }
        _ => Err(format!(
            "fadvise64 is not the sampled syscall with the most kernel time in {}, with its file \
             {}: {}",
            truth.cgroup,
            truth.path,
            pretty(&rows)
        )),
    }
}

/// No syscall watched: nothing in the syscall tables, and the stalls still name the thread that
/// held the CPU.
pub fn check_off(report: &Report, truth: &slow_syscall::Truth) -> Result<(), String> {
    if !report.syscalls.is_empty() || !report.slow_syscalls.is_empty() {
        return Err(report.annotate(format!(
            "--syscalls off, yet {} syscall rows and {} slow calls",
            report.syscalls.len(),
            report.slow_syscalls.len()
        )));
    }
    let threshold = report.settings.syscall_oncpu_threshold_ns;
    for call in &truth.calls {
        let held: Vec<&slow_syscall::Timing> = call
            .calls
            .iter()
            .filter(|t| must_list(t, threshold, 0))
            .collect();
        stalls_name_the_calls(report, truth, call, &held, false).map_err(|problem| {
            report.annotate(format!("{} by {}: {problem}", call.syscall, truth.comm))
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::checks::fixtures::{
        assert_fails, report, sampled_slow_report, slow_truth, with, MS,
    };

    #[test]
    fn sampled_passes_when_each_long_call_is_listed_once_with_its_file_and_times() {
        assert_eq!(
            check(&report(&sampled_slow_report()), &slow_truth()),
            Ok(())
        );
    }

    #[test]
    fn sampled_fails_when_a_long_call_is_not_listed_or_listed_twice() {
        let mut doc: Value = serde_json::from_str(&sampled_slow_report()).unwrap();
        doc["slow_syscalls"].as_array_mut().unwrap().remove(1);
        let missing = serde_json::from_value(doc).unwrap();
        assert_fails(check(&missing, &slow_truth()), "munmap (no file) by culprit in /stalltop_culprit (sampled): a call that ran 100000000 ns on a CPU is listed 0 times");
        let mut doc: Value = serde_json::from_str(&sampled_slow_report()).unwrap();
        let twice = doc["slow_syscalls"][1].clone();
        doc["slow_syscalls"].as_array_mut().unwrap().push(twice);
        assert_fails(
            check(&serde_json::from_value(doc).unwrap(), &slow_truth()),
            "listed 2 times",
        );
    }

    /// Two long reads back to back (smaps read to the end): each listed once, though the
    /// second's estimated start reaches into the first by less than half a period.
    #[test]
    fn sampled_passes_when_back_to_back_calls_are_each_listed_once() {
        let mut truth = slow_truth();
        let reads = &mut truth.calls[0].calls;
        let mut second = reads[0];
        second.start_ns = reads[0].end_ns + 20_000;
        second.end_ns = second.start_ns + second.wall_ns;
        reads.insert(1, second);
        let mut doc: Value = serde_json::from_str(&sampled_slow_report()).unwrap();
        let mut listed = doc["slow_syscalls"][0].clone();
        listed["ts_ns"] = json!(second.end_ns - 500_000);
        listed["wall_ns"] = json!(second.wall_ns - 500_000 + 400_000);
        doc["slow_syscalls"]
            .as_array_mut()
            .unwrap()
            .insert(1, listed);
        // The table counts the second read's time too.
        for row in doc["syscalls"].as_array_mut().unwrap() {
            if row["syscall"] == "read" {
                let total = row["oncpu_total_ns"].as_u64().unwrap() + second.oncpu_ns;
                row["oncpu_total_ns"] = json!(total);
            }
        }
        assert_eq!(check(&serde_json::from_value(doc).unwrap(), &truth), Ok(()));
    }

    #[test]
    fn sampled_on_cpu_time_counts_the_softirqs_inside_toward_the_threads_clock() {
        // getdents64's 20 ms of CPU clock: 15 ms on the CPU and 5 ms of softirqs on top of it.
        let short = with(
            &sampled_slow_report(),
            "/slow_syscalls/2/oncpu_ns",
            json!(15 * MS),
        );
        let mut doc = serde_json::to_value(&short).unwrap();
        doc["slow_syscalls"][2]["softirq_ns"] = json!(5 * MS);
        assert_eq!(
            check(&serde_json::from_value(doc).unwrap(), &slow_truth()),
            Ok(())
        );
    }

    #[test]
    fn sampled_fails_on_times_or_files_the_call_did_not_have() {
        // getdents64: 30 ms of wall, 10 of them runnable, 20 ms of CPU clock.
        let short = with(
            &sampled_slow_report(),
            "/slow_syscalls/2/oncpu_ns",
            json!(15 * MS),
        );
        assert_fails(
            check(&short, &slow_truth()),
            "listed with 15000000 ns on the CPU (with the softirqs inside)",
        );
        let long = with(
            &sampled_slow_report(),
            "/slow_syscalls/1/wall_ns",
            json!(160 * MS),
        );
        assert_fails(
            check(&long, &slow_truth()),
            "listed with 160000000 ns of wall time",
        );
        let wrong = with(
            &sampled_slow_report(),
            "/slow_syscalls/0/path",
            json!("/proc/1/smaps"),
        );
        assert_fails(
            check(&wrong, &slow_truth()),
            "listed with file Some(\"/proc/1/smaps\")",
        );
    }

    #[test]
    fn sampled_fails_when_a_call_shorter_than_a_period_is_listed() {
        let mut doc: Value = serde_json::from_str(&sampled_slow_report()).unwrap();
        // The 5 us getdents64 at 1131 ms.
        doc["slow_syscalls"]
            .as_array_mut()
            .unwrap()
            .push(json!({"ts_ns": 1131 * MS + 4000,
            "tid": 11, "syscall": "getdents64", "path": null, "wall_ns": MS,
            "oncpu_ns": MS}));
        assert_fails(
            check(&serde_json::from_value(doc).unwrap(), &slow_truth()),
            "shorter than a sampler period, is listed",
        );
    }

    #[test]
    fn sampled_rows_have_no_percentiles_and_fadvise_on_top() {
        let with_p99 = with(&sampled_slow_report(), "/syscalls/2/p99_ns", json!(20 * MS));
        assert_fails(check(&with_p99, &slow_truth()), "per-call percentiles");
        let under = with(
            &sampled_slow_report(),
            "/syscalls/1/oncpu_total_ns",
            json!(50 * MS),
        );
        assert_fails(
            check(&under, &slow_truth()),
            "the table's kernel time 50000000 ns",
        );
    }

    #[test]
    fn off_passes_without_syscall_tables_when_the_stall_names_the_thread() {
        let mut doc: Value = serde_json::from_str(&sampled_slow_report()).unwrap();
        doc["settings"]["syscalls"] = json!("off");
        doc["syscalls"] = json!([]);
        doc["slow_syscalls"] = json!([]);
        doc["stalls"][0]["culprit"]["syscall"] = Value::Null;
        let clean: Report = serde_json::from_value(doc.clone()).unwrap();
        assert_eq!(check_off(&clean, &slow_truth()), Ok(()));
        doc["stalls"] = json!([]);
        assert_fails(
            check_off(&serde_json::from_value(doc).unwrap(), &slow_truth()),
            "names culprit (tid 11);",
        );
        assert_fails(
            check_off(&report(&sampled_slow_report()), &slow_truth()),
            "--syscalls off, yet 5 syscall rows",
        );
    }
}
