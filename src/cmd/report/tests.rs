//! The report of the committed recordings (tests/fixtures/*.stl) and of the
//! synthetic every-case one, as `stalltop report` prints them: text
//! snapshots, a bounded projection of the JSON, every JSON checked against
//! docs/report.schema.json, and what each option does to them.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::selection::select;
use super::*;
use crate::app::fixtures;
use crate::cli::ListOrder;
use crate::model::HardirqRow;
use crate::modes::{RunqWait, SoftirqDelay, Throttle};
use crate::vm::Machine;

/// Rows each list of the JSON projection keeps.
const PROJECTED_ROWS: usize = 3;

pub(crate) fn recordings() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut recordings: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "stl"))
        .collect();
    recordings.sort();
    assert!(!recordings.is_empty(), "no recording in {}", dir.display());
    recordings
}

pub(crate) fn fixture(name: &str) -> Recording {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("{name}.stl"));
    record::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn text_of(report: &Report, order: ListOrder, limit: Option<usize>) -> String {
    text::render(report, &select(report, order, limit))
}

/// Fails with every violation when `json` breaks the contract.
pub(crate) fn assert_matches_schema(json: &str, what: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/report.schema.json");
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .expect("the schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("the schema is a valid JSON Schema");
    let instance: Value = serde_json::from_str(json).expect("the report is JSON");
    let errors: Vec<String> = validator
        .iter_errors(&instance)
        .take(20)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "{what} breaks docs/report.schema.json:\n{}",
        errors.join("\n")
    );
}

/// The JSON with every list cut to its first rows and its length: small
/// enough to review when it changes.
fn projection(value: &Value) -> Value {
    match value {
        Value::Array(rows) if rows.len() > PROJECTED_ROWS => serde_json::json!({
            "rows": rows.len(),
            "first": rows.iter().take(PROJECTED_ROWS).map(projection).collect::<Vec<_>>(),
        }),
        Value::Array(rows) => Value::Array(rows.iter().map(projection).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), projection(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).expect("JSON")
}

/// The text and the JSON report of every committed recording, as
/// `stalltop report` prints them.
#[test]
fn reports_of_the_committed_recordings() {
    for path in recordings() {
        let recording = record::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let report = report_of(&recording, ReportScope::default());
        assert!(!report.stalls.is_empty(), "{}: no stall", path.display());
        let json = json(&report);
        assert_matches_schema(&json, &path.display().to_string());
        let name = path.file_stem().expect("a file name").to_string_lossy();
        let value: Value = serde_json::from_str(&json).expect("JSON");
        insta::with_settings!({ snapshot_suffix => name.as_ref() }, {
            insta::assert_snapshot!("text", text_of(&report, ListOrder::Worst, Some(15)));
            insta::assert_snapshot!("json_projection", pretty(&projection(&value)));
        });
    }
}

/// The synthetic recording with every case: irqs-off evidence, takeovers,
/// throttling, a wait the hypervisor stretched.
#[test]
fn report_of_every_case() {
    let report = report_of(&fixtures::busy(), ReportScope::default());
    let text = text_of(&report, ListOrder::Worst, Some(15));
    for expected in [
        "cadvisor[2101] (cadvisor.service) in read",
        "no sampler tick for 38.0 ms",
        "ksoftirqd waited",
        "(the host took 6ms of it)",
        "throttled 36 of 90 periods",
    ] {
        assert!(text.contains(expected), "`{expected}` is missing:\n{text}");
    }
    let json = json(&report);
    assert_matches_schema(&json, "the every-case report");
    insta::assert_snapshot!("busy_text", text);
    insta::assert_snapshot!(
        "busy_json_projection",
        pretty(&projection(&serde_json::from_str(&json).expect("JSON")))
    );
}

/// A stall that an hrtimer callback ran most of names it under `hardirq`, and
/// one of an irq handler says it had none: both within the contract.
#[test]
fn hardirq_rows_of_handlers_and_hrtimers_keep_the_contract() {
    let mut report = report_of(&fixtures::busy(), ReportScope::default());
    let row = |irq, handler: &str, hrtimer: Option<&str>| HardirqRow {
        irq,
        handler: handler.into(),
        hrtimer: hrtimer.map(Into::into),
        run_ns: 12_000_000,
    };
    report.stalls[0].hardirq = Some(row(0, "", Some("tick_nohz_handler")));
    report.stalls[1].hardirq = Some(row(24, "virtio0-input.0", None));
    let json = json(&report);
    assert_matches_schema(&json, "a report with hardirq rows");
    let value: Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(
        value["stalls"][0]["hardirq"]["hrtimer"],
        "tick_nohz_handler"
    );
    assert_eq!(value["stalls"][1]["hardirq"]["hrtimer"], Value::Null);
}

/// Sampled softirqs: the delay table says how its delays were timed, and
/// a vector none of whose delays a tick saw shows no percentiles.
#[test]
fn sampled_softirq_delays_say_so() {
    let mut report = report_of(&fixtures::busy(), ReportScope::default());
    report.settings.softirq_delay_timing = Some(SoftirqDelay::Sampled);
    let mut untimed = report.softirq[0].clone();
    untimed.vector = "TIMER";
    untimed.timed = 0;
    report.softirq.push(untimed);
    let text = text_of(&report, ListOrder::Worst, None);
    assert!(
        text.contains("(sampled: delays a tick found pending, timed from that tick"),
        "{text}"
    );
    let row = |vector: &str| {
        text.lines()
            .find(|l| l.contains(vector) && l.ends_with("runs in ksoftirqd"))
            .unwrap_or_else(|| panic!("no {vector} row:\n{text}"))
    };
    let timer = row(" TIMER ");
    assert!(
        timer.contains("no delay timed") && !timer.contains("p50"),
        "{timer}"
    );
    let net_rx = row(" NET_RX ");
    assert!(net_rx.contains("p50"), "{net_rx}");
}

/// One rule for missing values: a host or setting the recording did not
/// keep is null, never an absent key; one it kept (a VM and its steal
/// clock, every timing method) keeps the contract too.
#[test]
fn host_and_settings_keys_are_null_when_unknown_and_valid_when_known() {
    let mut report = report_of(&fixtures::busy(), ReportScope::default());
    report.settings.runq_wait = None;
    report.settings.throttle = None;
    let value: Value = serde_json::from_str(&json(&report)).expect("JSON");
    for (section, key) in [
        ("host", "machine"),
        ("settings", "softirq_delay"),
        ("settings", "runq_wait"),
        ("settings", "throttle"),
    ] {
        assert_eq!(
            value[section].get(key),
            Some(&Value::Null),
            "{section}.{key} is not null"
        );
    }
    assert_matches_schema(&json(&report), "a report with unknown settings");

    report.host.machine = Some(Machine::Vm {
        hypervisor: "KVMKVMKVM".into(),
        kvm_steal_time: true,
    });
    report.settings.softirq_delay_timing = Some(SoftirqDelay::Sampled);
    report.settings.runq_wait = Some(RunqWait::Wakeup);
    report.settings.throttle = Some(Throttle::CpuStat);
    let json_vm = json(&report);
    assert_matches_schema(&json_vm, "a report of a KVM guest");
    let value: Value = serde_json::from_str(&json_vm).expect("JSON");
    assert_eq!(value["host"]["machine"]["kind"], "vm");
    report.host.machine = Some(Machine::BareMetal);
    assert_matches_schema(&json(&report), "a report of bare metal");
}

mod options;
mod reading;
