//! `stalltop report FILE [--json]`: read a recording (up to any damage),
//! analyse it, print the report.

mod text;

use crate::cli::ReportArgs;
use crate::failure::Failure;
use crate::model::{Analysis, Report};
use crate::record::{self, Recording};

pub fn run(args: &ReportArgs) -> Result<(), Failure> {
    let recording = record::read(&args.file)
        .map_err(|e| Failure::Recording(format!("{}: {e}", args.file.display())))?;
    if let Some(damage) = &recording.damage {
        eprintln!(
            "stalltop: {}: {damage}; the report covers what came before it",
            args.file.display()
        );
        if recording.entries.is_empty() {
            return Err(Failure::Recording(format!(
                "{}: nothing readable after the header",
                args.file.display()
            )));
        }
    }
    let report = report_of(&recording);
    if args.json {
        println!("{}", json(&report));
    } else {
        print!("{}", text::render(&report));
    }
    Ok(())
}

/// The analysis of everything readable in a recording.
fn report_of(recording: &Recording) -> Report {
    let mut analysis = Analysis::new(recording.header.clone());
    for entry in &recording.entries {
        analysis.apply(entry);
    }
    analysis.report()
}

/// `--json`: the report as one pretty-printed object.
fn json(report: &Report) -> String {
    serde_json::to_string_pretty(report).expect("a report always serializes")
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::app::fixtures;
    use crate::modes::SoftirqDelay;

    /// The text and the JSON report of every committed recording
    /// (tests/fixtures/*.stl), as `stalltop report` prints them.
    #[test]
    fn reports_of_the_committed_recordings() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let mut recordings: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.expect("a directory entry").path())
            .filter(|path| path.extension().is_some_and(|e| e == "stl"))
            .collect();
        recordings.sort();
        assert!(!recordings.is_empty(), "no recording in {}", dir.display());
        for path in recordings {
            let recording =
                record::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let report = report_of(&recording);
            assert!(!report.stalls.is_empty(), "{}: no stall", path.display());
            let name = path.file_stem().expect("a file name").to_string_lossy();
            insta::with_settings!({ snapshot_suffix => name.as_ref() }, {
                insta::assert_snapshot!("text", text::render(&report));
                insta::assert_snapshot!("json", json(&report));
            });
        }
    }

    /// The synthetic recording with every case: irqs-off evidence, takeovers,
    /// throttling, a wait the hypervisor stretched.
    #[test]
    fn report_of_every_case() {
        let report = report_of(&fixtures::busy());
        let text = text::render(&report);
        for expected in [
            "cadvisor [2101] (cadvisor.service) in read",
            "no sampler tick for 38.0 ms",
            "ksoftirqd waited",
            "(the host took 6.00ms of it)",
            "throttled 36 of 90 periods",
        ] {
            assert!(text.contains(expected), "`{expected}` is missing:\n{text}");
        }
        insta::assert_snapshot!("busy_text", text);
        insta::assert_snapshot!("busy_json", json(&report));
    }

    /// Sampled softirqs: the delay table says how its delays were timed, and
    /// a vector none of whose delays a tick saw shows no percentiles.
    #[test]
    fn sampled_softirq_delays_say_so() {
        let mut report = report_of(&fixtures::busy());
        report.settings.softirq_delay_timing = Some(SoftirqDelay::Sampled);
        let mut untimed = report.softirq[0].clone();
        untimed.vector = "TIMER";
        untimed.timed = 0;
        report.softirq.push(untimed);
        let text = text::render(&report);
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
}
