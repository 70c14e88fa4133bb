//! The export decoded by Perfetto's own protos (tests/perfetto/decode, an
//! independent decoder) against the report of the same recording.

use std::path::Path;
use std::process::Command;

use super::*;
use crate::app::fixtures;
use crate::record::Recording;

/// What tests/perfetto/check_trace.py found in the trace of `recording`;
/// fails the test with the checker's problems if it found any.
fn decoded(recording: &Recording) -> serde_json::Value {
    let exported = export(&recording.header, &recording.entries);
    let mut analysis = Analysis::keeping(recording.header.clone(), usize::MAX);
    for entry in &recording.entries {
        analysis.apply(entry);
    }
    let report = analysis.report();
    assert_eq!(exported.stalls, report.stalls.len());
    let dir = tempfile::tempdir().expect("a temporary directory");
    let trace = dir.path().join("trace.pftrace");
    let json = dir.path().join("report.json");
    std::fs::write(&trace, &exported.trace).expect("write the trace");
    std::fs::write(&json, serde_json::to_vec(&report).expect("the report")).expect("write");
    let decode = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/perfetto/decode");
    let out = Command::new(&decode)
        .arg(&trace)
        .arg(&json)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", decode.display()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the decoded trace is wrong:\n{stderr}"
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"))
}

#[test]
fn every_stall_of_every_case_is_on_its_cpus_track_with_its_fields() {
    let recording = fixtures::busy();
    let summary = decoded(&recording);
    assert!(summary["stalls"].as_u64().unwrap() > 5, "{summary}");
    assert_eq!(summary["stall_slices"], summary["stalls"], "{summary}");
    assert!(summary["flows"].as_u64().unwrap() > 0, "{summary}");
    assert!(summary["stacks"].as_u64().unwrap() > 0, "{summary}");
    let counters = summary["counter_tracks"].to_string();
    assert!(counters.contains("softirq %"), "{summary}");
    assert!(counters.contains("waits ≥10ms"), "{summary}");
}

#[test]
fn a_real_recording_decodes_with_a_flow_to_every_wait_in_a_stall() {
    let summary = decoded(&fixtures::noisy_neighbour());
    let stalls = summary["stalls"].as_u64().unwrap();
    assert!(stalls > 0, "{summary}");
    assert_eq!(summary["stall_slices"].as_u64(), Some(stalls));
    // Every wait over the threshold is a signal of some stall.
    assert_eq!(summary["flows"], summary["wait_slices"], "{summary}");
}

#[test]
fn overlapping_stalls_of_one_cpu_go_on_lanes_under_it() {
    let recording = fixtures::busy();
    let exported = export(&recording.header, &recording.entries);
    let trace = proto::Trace::decode(exported.trace.as_slice()).expect("decodes");
    let names: Vec<String> = trace
        .packet
        .iter()
        .filter_map(|p| match &p.data {
            Some(PacketData::TrackDescriptor(d)) => d.name.clone(),
            _ => None,
        })
        .collect();
    assert!(names.iter().any(|n| n == "Stalls by CPU"), "{names:?}");
    assert!(names.iter().any(|n| n == "Waits by container"), "{names:?}");
    // The clock snapshot opens the sequence.
    assert!(matches!(
        trace.packet[0].data,
        Some(PacketData::ClockSnapshot(_))
    ));
}

mod hour;
