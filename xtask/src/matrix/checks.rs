//! Pure checks of what a guest reported: the probe tests' results, and each mode's report
//! against the load the guest ran. Each failure is one message that states the tolerance and
//! quotes the report.

use std::collections::BTreeMap;
use std::time::Duration;

use super::guest_output::TestResult;
use super::guest_script::LOAD_CGROUP;
use super::modes::Mode;
use super::report::{ProbeFamily, Report};

/// A seventh of the verifier's 1,000,000-instruction limit, so that a program still loads on
/// the next kernel, whose verifier may explore it differently (6.18's explored sched_switch
/// 1.3x as far as 6.1's), and new diagnosis has room. The probe test
/// `every_program_verifies_within_the_budget_in_every_mode` holds the same budget.
pub const VERIFIED_INSNS_BUDGET: u64 = 150_000;
/// The load's two spinners share one CPU: each waits out the other's slice, which CFS keeps
/// under its 24 ms latency target on any CPU count, so they alone wait at least 40 times a
/// second. Half of that. (Seen in 3 s records: 1,370-1,550 waits, the load's other tasks'
/// included.)
pub const MIN_LOAD_WAITS_PER_SEC: u64 = 20;
/// ... and one of them is always waiting while the load runs, so the cgroup's summed wait is
/// at least about the recording's length (seen: 5.8-7.4 s in 3 s records, the other tasks'
/// waits included). The load starts up to half a second after the probes attach: at least this
/// share of the recording.
pub const MIN_LOAD_WAIT_PERCENT: u64 = 40;
/// `ping -i 0.01` on lo asks for 100 echoes a second, each received through NET_RX (seen under
/// emulation: 220-260 NET_RX runs in 3 s records). At least this many a second.
pub const MIN_NET_RX_PER_SEC: u64 = 20;

/// What a mode's report is checked against.
#[derive(Clone, Copy, Debug)]
pub struct Expected {
    pub mode: Mode,
    /// A PREEMPT_RT kernel (softirqs in threads).
    pub preempt_rt: bool,
    /// The `-d` of the recording, the load's length.
    pub record: Duration,
}

/// The probe tests' verdicts: every test ran and passed, and there was at least one.
pub fn probe_tests(status: i32, results: &BTreeMap<String, TestResult>) -> Vec<String> {
    let mut failures = Vec::new();
    if results.is_empty() {
        failures.push(format!("no probe test ran (exit status {status})"));
    }
    for (name, result) in results {
        match result {
            TestResult::Ok => {}
            TestResult::Failed => failures.push(format!("{name}: FAILED")),
            TestResult::Ignored => failures.push(format!("{name}: ignored, so not run")),
            TestResult::Unfinished => failures.push(format!("{name}: did not finish")),
        }
    }
    if status != 0 && failures.is_empty() {
        failures.push(format!(
            "the probe tests exited with status {status} although each test passed"
        ));
    }
    failures
}

/// Every assertion on one mode's report; empty when all hold.
pub fn report(report: &Report, expected: &Expected) -> Vec<String> {
    let mut failures = Vec::new();
    settings(report, expected, &mut failures);
    load_warnings(report, &mut failures);
    runq(report, expected, &mut failures);
    syscalls(report, expected, &mut failures);
    softirqs(report, expected, &mut failures);
    failures.extend(probes(report, expected.mode.attach.reported));
    failures
}

fn settings(report: &Report, expected: &Expected, failures: &mut Vec<String>) {
    let settings = &report.settings;
    if settings.attach != expected.mode.attach.reported {
        failures.push(format!(
            "settings.attach is {:?}, not {:?}",
            settings.attach, expected.mode.attach.reported
        ));
    }
    match &settings.syscalls {
        Some(mode) if mode == expected.mode.syscalls.name => {}
        Some(mode) => failures.push(format!(
            "settings.syscalls is {mode:?}, not {:?}",
            expected.mode.syscalls.name
        )),
        None => failures.push("the report has no settings.syscalls".into()),
    }
    // Softirq runs are timed from entry to exit in every mode. The cheap modes start their
    // delays at sampler ticks wherever the kernel's BTF places the pending mask (every kernel
    // of the matrix), except on PREEMPT_RT.
    if settings.softirq_time != "exact" {
        failures.push(format!(
            "settings.softirq_time is {:?}, not \"exact\"",
            settings.softirq_time
        ));
    }
    let softirq_delay = if expected.mode.syscalls.softirq_delay_by_ticks && !expected.preempt_rt {
        "sampled"
    } else {
        "exact"
    };
    match &settings.softirq_delay {
        Some(delay) if delay == softirq_delay => {}
        Some(delay) => failures.push(format!(
            "settings.softirq_delay is {delay:?}, not {softirq_delay:?}"
        )),
        None => failures.push("the report has no settings.softirq_delay".into()),
    }
    // Every kernel of the matrix has CONFIG_SCHED_INFO, CONFIG_FAIR_GROUP_SCHED and
    // CONFIG_CFS_BANDWIDTH.
    for (name, said, wanted) in [
        ("runq_wait", &settings.runq_wait, "sched_info"),
        ("throttle", &settings.throttle, "throttle_count"),
    ] {
        match said {
            Some(method) if method == wanted => {}
            Some(method) => failures.push(format!("settings.{name} is {method:?}, not {wanted:?}")),
            None => failures.push(format!("the report has no settings.{name}")),
        }
    }
    if settings.steal.is_none() {
        failures.push("the report has no settings.steal".into());
    }
    // The guest mounts cgroup2 alone: stalltop must attribute by the unified hierarchy.
    if settings.cgroup_hierarchy != "unified" {
        failures.push(format!(
            "settings.cgroup_hierarchy is {:?} on a pure cgroup v2 guest",
            settings.cgroup_hierarchy
        ));
    }
}

fn load_warnings(report: &Report, failures: &mut Vec<String>) {
    if !report.warnings.is_empty() {
        failures.push(format!("warnings: {:?}", report.warnings));
    }
    let lost: BTreeMap<&String, &u64> = report
        .lost_events
        .iter()
        .filter(|(_, &count)| count > 0)
        .collect();
    if !lost.is_empty() {
        failures.push(format!("lost events: {lost:?}"));
    }
}

fn runq(report: &Report, expected: &Expected, failures: &mut Vec<String>) {
    let Some(row) = report.runq.iter().find(|row| row.cgroup == LOAD_CGROUP) else {
        let cgroups: Vec<&str> = report.runq.iter().map(|row| row.cgroup.as_str()).collect();
        failures.push(format!(
            "no run-queue row for the load's cgroup {LOAD_CGROUP}; rows: {cgroups:?}"
        ));
        return;
    };
    let secs = expected.record.as_secs();
    let min_count = MIN_LOAD_WAITS_PER_SEC * secs;
    if row.count < min_count {
        failures.push(format!(
            "{LOAD_CGROUP}: {} run-queue waits, under the {min_count} two spinners on one CPU \
             make in {secs} s ({MIN_LOAD_WAITS_PER_SEC}/s)",
            row.count
        ));
    }
    let min_total_ns = expected.record.as_nanos() as u64 * MIN_LOAD_WAIT_PERCENT / 100;
    if row.total_ns < min_total_ns {
        failures.push(format!(
            "{LOAD_CGROUP}: {} ms waited in all, under {MIN_LOAD_WAIT_PERCENT}% of the {secs} s \
             in which one of two spinners on one CPU always waits (max wait {} ms)",
            row.total_ns / 1_000_000,
            row.max_ns / 1_000_000
        ));
    }
}

fn syscalls(report: &Report, expected: &Expected, failures: &mut Vec<String>) {
    let mode = expected.mode.syscalls;
    if !mode.watches_syscalls {
        if !report.syscalls.is_empty() {
            failures.push(format!(
                "{} syscall rows with syscalls {}: {:?}",
                report.syscalls.len(),
                mode.name,
                report.syscalls.iter().take(3).collect::<Vec<_>>()
            ));
        }
        return;
    }
    // The load's file loop reads its 4 MiB file with dd, 64 KiB a read (busybox cat would
    // use sendfile), long enough for sampler ticks to
    // find it in the kernel).
    let read = report
        .syscalls
        .iter()
        .find(|row| row.container == LOAD_CGROUP && row.syscall == "read" && row.count > 0);
    if let Some(row) = read {
        if row.p50_ns.is_some() != mode.percentiles {
            failures.push(format!(
                "the read row {} percentiles with syscalls {}: {row:?}",
                if mode.percentiles { "lacks" } else { "has" },
                mode.name
            ));
        }
    } else {
        let rows: Vec<String> = report
            .syscalls
            .iter()
            .take(10)
            .map(|row| format!("{} {} x{}", row.container, row.syscall, row.count))
            .collect();
        failures.push(format!(
            "no `read` row for {LOAD_CGROUP} with syscalls {}; rows: {rows:?}",
            mode.name
        ));
    }
}

fn softirqs(report: &Report, expected: &Expected, failures: &mut Vec<String>) {
    let count = |vector: &str| -> u64 {
        report
            .softirq
            .iter()
            .filter(|row| row.vector == vector)
            .map(|row| row.count)
            .sum()
    };
    if count("TIMER") == 0 {
        failures.push(format!(
            "no TIMER softirq; vectors: {:?}",
            report
                .softirq
                .iter()
                .map(|row| (row.cpu, row.vector.as_str(), row.count))
                .collect::<Vec<_>>()
        ));
    }
    // On every flavour, PREEMPT_RT included, loopback NET_RX is raised and run as a softirq
    // (on RT in the thread that raised it, at its local_bh_enable): the tracepoints fire.
    let secs = expected.record.as_secs();
    let min_net_rx = MIN_NET_RX_PER_SEC * secs;
    if count("NET_RX") < min_net_rx {
        failures.push(format!(
            "{} NET_RX softirqs, under the {min_net_rx} of `ping -i 0.01` on lo for {secs} s",
            count("NET_RX")
        ));
    }
    // PREEMPT_RT runs the timer softirqs in the per-CPU ktimers/N threads: stalltop must charge
    // TIMER time to them, where a non-RT kernel charges it to whatever ran at irq exit.
    if expected.preempt_rt
        && !report
            .softirq_stolen
            .iter()
            .any(|row| row.vector == "TIMER" && row.comm.starts_with("ktimers/") && row.count > 0)
    {
        failures.push(format!(
            "PREEMPT_RT: no TIMER time charged to a ktimers/N thread; stolen: {:?}",
            report
                .softirq_stolen
                .iter()
                .take(10)
                .map(|row| (row.comm.as_str(), row.vector.as_str(), row.count))
                .collect::<Vec<_>>()
        ));
    }
}

/// The family of the start-up check: its program is run, never attached, a raw_tp program in
/// every attach mode.
const SELFCHECK: &str = "selfcheck";

/// Every probe family loaded in `attach`, and every program within the verifier budget.
pub fn probes(report: &Report, attach: &str) -> Vec<String> {
    let Some(families) = &report.probes else {
        return vec!["the report has no `probes`: how each family loaded is unknown".into()];
    };
    if families.is_empty() {
        return vec!["the report lists no probe family".into()];
    }
    families
        .iter()
        .flat_map(|family| family_failures(family, attach))
        .collect()
}

fn family_failures(family: &ProbeFamily, attach: &str) -> Vec<String> {
    let name = &family.family;
    let mut failures = Vec::new();
    if !family.loaded {
        failures.push(format!(
            "family {name} did not load: {}",
            family.error.as_deref().unwrap_or("(no error given)")
        ));
    } else if let Some(error) = &family.error {
        failures.push(format!("family {name} loaded with an error: {error}"));
    }
    let attach = if name == SELFCHECK { "raw_tp" } else { attach };
    if family.attach != attach {
        failures.push(format!(
            "family {name} attached as {}, not {attach}",
            family.attach
        ));
    }
    if family.loaded && family.programs.is_empty() {
        failures.push(format!("family {name} loaded no program"));
    }
    for program in &family.programs {
        match program.verified_insns {
            // Every kernel of the matrix is 5.16 or later, where the kernel reports the count.
            None => failures.push(format!(
                "{name}/{}: verified_insns unknown on a kernel that reports it",
                program.name
            )),
            Some(insns) if insns > VERIFIED_INSNS_BUDGET => failures.push(format!(
                "{name}/{}: {insns} verified instructions, over the budget of \
                 {VERIFIED_INSNS_BUDGET}",
                program.name
            )),
            Some(_) => {}
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::modes::{ATTACH_MODES, SYSCALL_MODES};

    const FIXTURE: &str = include_str!("fixtures/report.json");

    /// The fixture, recorded in tp-btf with syscalls exact on a non-RT kernel, edited by `edit`.
    fn fixture(edit: impl FnOnce(&mut serde_json::Value)) -> Report {
        let mut value: serde_json::Value = serde_json::from_str(FIXTURE).unwrap();
        edit(&mut value);
        Report::parse(&value.to_string()).unwrap()
    }

    fn expected(attach: &str, syscalls: &str, preempt_rt: bool) -> Expected {
        Expected {
            mode: Mode {
                attach: *ATTACH_MODES.iter().find(|m| m.flag == attach).unwrap(),
                syscalls: *SYSCALL_MODES.iter().find(|m| m.name == syscalls).unwrap(),
            },
            preempt_rt,
            record: Duration::from_secs(3),
        }
    }

    fn exact() -> Expected {
        expected("tp-btf", "exact", false)
    }

    #[test]
    fn the_fixture_passes_every_check() {
        assert_eq!(report(&fixture(|_| {}), &exact()), Vec::<String>::new());
    }

    #[test]
    fn softirq_delays_must_start_at_ticks_in_the_cheap_modes_except_on_preempt_rt() {
        let hooked = fixture(|_| {});
        let failures = report(&hooked, &expected("tp-btf", "off", false));
        assert!(
            failures.contains(&"settings.softirq_delay is \"exact\", not \"sampled\"".to_string()),
            "{failures:?}"
        );
        let sampled = fixture(|r| {
            r["settings"]["syscalls"] = "off".into();
            r["settings"]["softirq_delay"] = "sampled".into();
        });
        let failures = report(&sampled, &expected("tp-btf", "off", false));
        assert!(
            !failures.iter().any(|f| f.contains("softirq_")),
            "{failures:?}"
        );
        let failures = report(&sampled, &expected("tp-btf", "off", true));
        assert!(
            failures.iter().any(|f| f.contains("softirq_delay")),
            "{failures:?}"
        );
        // Run time counted by ticks, or a report without the delay's method, fails anywhere.
        let ticked = fixture(|r| r["settings"]["softirq_time"] = "sampled".into());
        let failures = report(&ticked, &exact());
        assert!(
            failures.contains(&"settings.softirq_time is \"sampled\", not \"exact\"".to_string()),
            "{failures:?}"
        );
        let old = fixture(|r| {
            r["settings"]
                .as_object_mut()
                .unwrap()
                .remove("softirq_delay");
        });
        let failures = report(&old, &exact());
        assert!(
            failures.contains(&"the report has no settings.softirq_delay".to_string()),
            "{failures:?}"
        );
    }

    #[test]
    fn a_report_of_another_mode_fails_on_its_settings() {
        let failures = report(&fixture(|_| {}), &expected("raw-tp", "exact", false));
        assert!(failures.iter().any(|f| f.contains("settings.attach")));
        assert!(failures
            .iter()
            .any(|f| f.contains("family sched attached as tp_btf, not raw_tp")));
        let failures = report(&fixture(|_| {}), &expected("tp-btf", "off", false));
        assert!(failures
            .iter()
            .any(|f| f == "settings.syscalls is \"exact\", not \"off\""));
        assert!(failures
            .iter()
            .any(|f| f.starts_with("2 syscall rows with syscalls off")));
    }

    #[test]
    fn the_load_cgroup_must_have_a_plausible_runq_row() {
        let few = fixture(|r| r["runq"][0]["count"] = 12.into());
        let failures = report(&few, &exact());
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(failures[0].contains("12 run-queue waits, under the 60"));

        let short = fixture(|r| r["runq"][0]["total_ns"] = 900_000_000u64.into());
        let failures = report(&short, &exact());
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(failures[0].contains("900 ms waited in all"));

        let elsewhere = fixture(|r| r["runq"][0]["cgroup"] = "/".into());
        let failures = report(&elsewhere, &exact());
        assert!(failures[0].starts_with("no run-queue row for the load's cgroup"));
    }

    #[test]
    fn warnings_lost_events_and_a_v1_hierarchy_fail() {
        let bad = fixture(|r| {
            r["warnings"] = serde_json::json!(["syscall probes did not load"]);
            r["lost_events"]["runq"] = 3.into();
            r["settings"]["cgroup_hierarchy"] = "v1 cpu".into();
        });
        let failures = report(&bad, &exact());
        assert_eq!(failures.len(), 3, "{failures:?}");
        assert!(failures.contains(&"lost events: {\"runq\": 3}".to_string()));
    }

    #[test]
    fn syscall_rows_are_required_in_exact_mode() {
        let none = fixture(|r| r["syscalls"] = serde_json::json!([]));
        let failures = report(&none, &exact());
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(failures[0].starts_with("no `read` row for /kernel-matrix-load"));
    }

    #[test]
    fn softirqs_need_timer_and_net_rx_and_rt_needs_ktimers() {
        let no_net_rx = fixture(|r| {
            r["softirq"]
                .as_array_mut()
                .unwrap()
                .retain(|row| row["vector"] != "NET_RX")
        });
        let failures = report(&no_net_rx, &exact());
        assert_eq!(
            failures,
            ["0 NET_RX softirqs, under the 60 of `ping -i 0.01` on lo for 3 s"]
        );

        let failures = report(&fixture(|_| {}), &expected("tp-btf", "exact", true));
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(failures[0].starts_with("PREEMPT_RT: no TIMER time charged to a ktimers/N"));
        let rt = fixture(|r| {
            r["softirq_stolen"].as_array_mut().unwrap().push(serde_json::json!(
                {"pid": 15, "tid": 15, "comm": "ktimers/0", "vector": "TIMER", "ns": 918980, "count": 19}
            ))
        });
        assert!(report(&rt, &expected("tp-btf", "exact", true)).is_empty());
    }

    #[test]
    fn a_family_that_did_not_load_or_a_program_over_budget_fails() {
        let bad = fixture(|r| {
            r["probes"][1]["loaded"] = false.into();
            r["probes"][1]["load_ms"] = serde_json::Value::Null;
            r["probes"][1]["error"] = "the 6.1 verifier finds btf_sys_exit too complex".into();
            r["probes"][0]["programs"][0]["verified_insns"] = 150_001.into();
            r["probes"][0]["programs"][1]["verified_insns"] = serde_json::Value::Null;
        });
        let failures = probes(&bad, "tp_btf");
        assert_eq!(
            failures,
            [
                "sched/btf_sched_switch: 150001 verified instructions, over the budget of 150000",
                "sched/btf_sched_wakeup: verified_insns unknown on a kernel that reports it",
                "family syscall did not load: the 6.1 verifier finds btf_sys_exit too complex",
            ]
        );
        let missing = fixture(|r| {
            r.as_object_mut()
                .unwrap()
                .remove("probes")
                .map(drop)
                .unwrap()
        });
        assert_eq!(
            probes(&missing, "tp_btf"),
            ["the report has no `probes`: how each family loaded is unknown"]
        );
    }

    #[test]
    fn runq_waits_must_come_from_sched_info_and_throttles_from_the_kernel() {
        let wakeups = fixture(|r| r["settings"]["runq_wait"] = "wakeup".into());
        assert_eq!(
            report(&wakeups, &exact()),
            ["settings.runq_wait is \"wakeup\", not \"sched_info\""]
        );
        let cpu_stat = fixture(|r| r["settings"]["throttle"] = "cpu.stat".into());
        assert_eq!(
            report(&cpu_stat, &exact()),
            ["settings.throttle is \"cpu.stat\", not \"throttle_count\""]
        );
        let unsaid = fixture(|r| {
            let settings = r["settings"].as_object_mut().unwrap();
            settings.remove("throttle");
            settings.remove("steal");
        });
        assert_eq!(
            report(&unsaid, &exact()),
            [
                "the report has no settings.throttle",
                "the report has no settings.steal"
            ]
        );
    }

    #[test]
    fn the_start_up_check_is_a_raw_tp_program_in_every_attach_mode() {
        let checked = |attach: &str| {
            fixture(|r| {
                r["probes"].as_array_mut().unwrap().push(serde_json::json!({
                    "family": "selfcheck", "attach": attach, "loaded": true, "load_ms": 95,
                    "error": null,
                    "programs": [{"name": "read_kernel_values", "verified_insns": 63}]
                }))
            })
        };
        assert_eq!(probes(&checked("raw_tp"), "tp_btf"), Vec::<String>::new());
        assert_eq!(
            probes(&checked("tp_btf"), "tp_btf"),
            ["family selfcheck attached as tp_btf, not raw_tp"]
        );
    }

    #[test]
    fn probe_tests_must_all_run_and_pass() {
        let results = |pairs: &[(&str, TestResult)]| -> BTreeMap<String, TestResult> {
            pairs.iter().map(|(n, r)| (n.to_string(), *r)).collect()
        };
        let passed = results(&[("a", TestResult::Ok), ("b", TestResult::Ok)]);
        assert!(probe_tests(0, &passed).is_empty());
        assert_eq!(
            probe_tests(
                101,
                &results(&[("a", TestResult::Ok), ("b", TestResult::Failed)])
            ),
            ["b: FAILED"]
        );
        assert_eq!(
            probe_tests(0, &results(&[("a", TestResult::Ignored)])),
            ["a: ignored, so not run"]
        );
        assert_eq!(
            probe_tests(137, &results(&[("a", TestResult::Unfinished)])),
            ["a: did not finish"]
        );
        assert_eq!(
            probe_tests(137, &BTreeMap::new()),
            ["no probe test ran (exit status 137)"]
        );
        assert_eq!(
            probe_tests(137, &passed),
            ["the probe tests exited with status 137 although each test passed"]
        );
    }
}
