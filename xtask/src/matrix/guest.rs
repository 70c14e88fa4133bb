//! Judges what one guest reported: the kernel it booted, its probe tests, and each mode's
//! record and report. Pure: the output comes in as text.

use super::checks::{self, Expected};
use super::docs::{ModeOutcome, ModeRun};
use super::guest_output::{self, GuestOutput, Section, TestResult};
use super::guest_script::Plan;
use super::report::{Methods, Report};

/// Exit status of a step busybox `timeout -s KILL` stopped at its limit.
const KILLED: i32 = 128 + 9;
/// Lines of a failed step's stderr or a failed test's message quoted in its failure.
const QUOTED_LINES: usize = 6;
/// Lines of a failed guest's kernel console shown.
const CONSOLE_LINES: usize = 60;

/// The kernel a guest was to boot.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    pub release: &'a str,
    pub preempt_rt: bool,
}

/// A guest's failed checks (each a message) and what each mode gave, for the docs.
#[derive(Debug)]
pub struct Judged {
    pub failures: Vec<String>,
    pub modes: Vec<ModeRun>,
}

pub fn judge(output: &GuestOutput, target: Target, plan: &Plan) -> Judged {
    let mut failures = Vec::new();
    match output.section("kernel") {
        Some(section) if section.text == target.release => {}
        Some(section) => failures.push(format!(
            "the guest booted {:?}, not {}",
            section.text, target.release
        )),
        None => failures.push("the guest reported no kernel: it did not get to run".into()),
    }
    failures.extend(probe_tests(output, plan));
    let mut modes = Vec::new();
    for &mode in &plan.modes {
        let tag = mode.tag();
        let expected = Expected {
            mode,
            preempt_rt: target.preempt_rt,
            record: plan.record,
        };
        let outcome = match record_and_report(output, &tag, plan) {
            Err(why) => {
                failures.push(format!("{tag}: {why}"));
                ModeOutcome::Failed(why)
            }
            Ok(report) => {
                failures.extend(
                    checks::report(&report, &expected)
                        .into_iter()
                        .map(|failure| format!("{tag}: {failure}")),
                );
                ModeOutcome::Recorded {
                    methods: Methods::of(&report.settings),
                    probes: report.probes,
                }
            }
        };
        modes.push(ModeRun { mode, outcome });
    }
    if !output.done {
        failures.push(match &output.unfinished {
            Some(step) => format!("the guest stopped inside `{step}`"),
            None => "the guest did not reach the end of its script".into(),
        });
    }
    Judged { failures, modes }
}

fn probe_tests(output: &GuestOutput, plan: &Plan) -> Vec<String> {
    let Some(section) = output.section("probe-tests") else {
        return vec!["probe tests: no result".into()];
    };
    let results = guest_output::test_results(&section.text);
    let mut failures: Vec<String> = checks::probe_tests(section.status, &results)
        .into_iter()
        .map(|failure| format!("probe tests: {failure}"))
        .collect();
    for (name, result) in &results {
        if *result == TestResult::Failed {
            if let Some(message) = guest_output::failure_output(&section.text, name) {
                failures.push(format!("probe tests: {name}: {}", quote(&message, true)));
            }
        }
    }
    if section.status == KILLED {
        failures.push(format!(
            "probe tests: killed at their limit of {:?}{}",
            plan.probe_tests_limit,
            stderr_tail(output.section("probe-tests-stderr"))
        ));
    }
    failures
}

/// The mode's report, or why there is none.
fn record_and_report(output: &GuestOutput, tag: &str, plan: &Plan) -> Result<Report, String> {
    let record = output
        .section(&format!("record:{tag}"))
        .ok_or("no record result")?;
    if record.status != 0 {
        let how = match record.status {
            KILLED => format!("was killed at its limit of {:?}", plan.record_limit),
            status => format!("exited {status}"),
        };
        return Err(format!("record {how}{}", stderr_tail(Some(record))));
    }
    let report = output
        .section(&format!("report:{tag}"))
        .ok_or("no report result")?;
    if report.status != 0 {
        return Err(format!(
            "report exited {}{}",
            report.status,
            stderr_tail(Some(report))
        ));
    }
    Report::parse(&report.text)
}

/// The last lines of `text`, joined with ` / `.
pub fn last_lines(text: &str) -> String {
    quote(text, false)
}

/// The last lines of a guest's kernel console, indented under a failure: enough for the
/// call traces of a panic (soft lockup, RCU stall).
pub fn console_tail(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| !line.trim().is_empty() && !line.contains(guest_output::ALIVE))
        .collect();
    lines[lines.len().saturating_sub(CONSOLE_LINES)..]
        .iter()
        .map(|line| format!("      {line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `: LAST LINES` of a step's stderr, or nothing.
fn stderr_tail(section: Option<&Section>) -> String {
    match section.map(|s| last_lines(&s.text)) {
        Some(text) if !text.is_empty() => format!(": {text}"),
        _ => String::new(),
    }
}

/// The first (`head`) or last lines of `text`, joined with ` / `.
fn quote(text: &str, head: bool) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let picked = if head {
        &lines[..lines.len().min(QUOTED_LINES)]
    } else {
        &lines[lines.len().saturating_sub(QUOTED_LINES)..]
    };
    picked.join(" / ")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::matrix::guest_output::{BEGIN, DONE, END};
    use crate::matrix::modes::{Mode, SAMPLED, TP_BTF};

    const FIXTURE: &str = include_str!("fixtures/report.json");

    fn plan() -> Plan {
        Plan {
            // tp-btf/exact and tp-btf/off.
            modes: Mode::all()
                .into_iter()
                .filter(|m| m.attach == TP_BTF && m.syscalls != SAMPLED)
                .collect(),
            record: Duration::from_secs(3),
            probe_tests_limit: Duration::from_secs(420),
            record_limit: Duration::from_secs(150),
            report_limit: Duration::from_secs(30),
        }
    }

    fn section(tag: &str, status: i32, text: &str) -> String {
        format!("{BEGIN} {tag}\n{text}\n{END} {tag} {status}\n")
    }

    const TARGET: Target = Target {
        release: "6.1.0-56-amd64",
        preempt_rt: false,
    };

    fn off_report() -> String {
        let mut report: serde_json::Value = serde_json::from_str(FIXTURE).unwrap();
        report["settings"]["syscalls"] = "off".into();
        report["settings"]["softirq_delay"] = "sampled".into();
        report["syscalls"] = serde_json::json!([]);
        report.to_string()
    }

    #[test]
    fn a_guest_whose_steps_all_passed_has_no_failure() {
        let output = [
            section("kernel", 0, "6.1.0-56-amd64"),
            section("probe-tests", 0, "test probe::tests::a ... ok"),
            section("probe-tests-stderr", 0, ""),
            section("record:tp-btf/exact", 0, "stalltop: recording"),
            section("report:tp-btf/exact", 0, FIXTURE),
            section("record:tp-btf/off", 0, "stalltop: recording"),
            section("report:tp-btf/off", 0, &off_report()),
            format!("{DONE}\n"),
        ]
        .concat();
        let judged = judge(&GuestOutput::parse(&output), TARGET, &plan());
        assert_eq!(judged.failures, Vec::<String>::new());
        assert_eq!(judged.modes.len(), 2);
        assert!(matches!(
            &judged.modes[0].outcome,
            ModeOutcome::Recorded { probes: Some(families), .. } if families.len() == 3
        ));
    }

    #[test]
    fn a_failed_record_a_failed_test_and_a_killed_guest_are_each_reported() {
        let output = [
            section("kernel", 0, "6.1.0-56-amd64"),
            section(
                "probe-tests",
                101,
                "test probe::tests::a ... FAILED\n\nfailures:\n\n---- probe::tests::a stdout \
                 ----\nprobes load: E2BIG\n\nfailures:\n    probe::tests::a\n",
            ),
            section("probe-tests-stderr", 101, "libbpf: E2BIG"),
            section(
                "record:tp-btf/exact",
                6,
                "stalltop: loading the BPF programs failed (tp_btf): Argument list too long",
            ),
            format!("{BEGIN} record:tp-btf/off\n"),
        ]
        .concat();
        let judged = judge(&GuestOutput::parse(&output), TARGET, &plan());
        assert_eq!(
            judged.failures,
            [
                "probe tests: probe::tests::a: FAILED",
                "probe tests: probe::tests::a: probes load: E2BIG",
                "tp-btf/exact: record exited 6: stalltop: loading the BPF programs failed \
                 (tp_btf): Argument list too long",
                "tp-btf/off: no record result",
                "the guest stopped inside `record:tp-btf/off`",
            ]
        );
        assert!(matches!(
            &judged.modes[0].outcome,
            ModeOutcome::Failed(why) if why.starts_with("record exited 6")
        ));
    }

    #[test]
    fn another_kernel_and_killed_steps_are_failures() {
        let output = [
            section("kernel", 0, "6.18.0"),
            section("probe-tests", KILLED, "test probe::tests::a ... "),
            section("probe-tests-stderr", KILLED, "verifier log\nlast line"),
            section("record:tp-btf/exact", KILLED, ""),
        ]
        .concat();
        let judged = judge(&GuestOutput::parse(&output), TARGET, &plan());
        assert_eq!(
            judged.failures[..4],
            [
                "the guest booted \"6.18.0\", not 6.1.0-56-amd64",
                "probe tests: probe::tests::a: did not finish",
                "probe tests: killed at their limit of 420s: verifier log / last line",
                "tp-btf/exact: record was killed at its limit of 150s",
            ]
        );
    }
}
