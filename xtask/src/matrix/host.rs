//! The host kernel's line of docs/kernels.md: `stalltop record` + `report --json` in every mode
//! on this machine, without QEMU, for how each probe family loads here. The host's recordings
//! themselves are checked by the scenario tests.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};

use super::checks;
use super::docs::{ModeOutcome, ModeRun};
use super::modes::Mode;
use super::report::{Methods, Report};
use crate::scenario::command;

/// Records in every mode on the host: what each gave and each probe family check that failed.
pub fn run(
    stalltop: &Path,
    modes: &[Mode],
    record: Duration,
    workdir: &Path,
) -> Result<(Vec<ModeRun>, Vec<String>)> {
    fs::create_dir_all(workdir).with_context(|| format!("mkdir -p {}", workdir.display()))?;
    let stalltop = stalltop.to_str().context("the stalltop path in UTF-8")?;
    let mut runs = Vec::new();
    let mut failures = Vec::new();
    for &mode in modes {
        let tag = mode.tag();
        eprintln!("kernel-matrix: host: {tag}");
        let outcome = match record_and_report(stalltop, mode, record, workdir) {
            Ok(report) => {
                failures.extend(
                    checks::probes(&report, mode.attach.reported)
                        .into_iter()
                        .map(|failure| format!("host {tag}: {failure}")),
                );
                ModeOutcome::Recorded {
                    methods: Methods::of(&report.settings),
                    probes: report.probes,
                }
            }
            Err(err) => {
                failures.push(format!("host {tag}: {err:#}"));
                ModeOutcome::Failed(format!("{err:#}"))
            }
        };
        runs.push(ModeRun { mode, outcome });
    }
    Ok((runs, failures))
}

fn record_and_report(
    stalltop: &str,
    mode: Mode,
    record: Duration,
    workdir: &Path,
) -> Result<Report> {
    let recording = workdir.join(format!("{}.stl", mode.tag().replace('/', "-")));
    let recording = recording.to_str().context("a UTF-8 path")?;
    let duration = format!("{}s", record.as_secs());
    let mut args = vec!["record", "-o", recording, "-d", &duration];
    args.extend(mode.stalltop_args());
    // Within command::TIMEOUT: loading takes a second or two on the host.
    command::run(stalltop, &args)?;
    // The report is larger than a pipe holds: read it whole, no time limit needed for a file
    // this small.
    let output = Command::new(stalltop)
        .args(["report", recording, "--json"])
        .output()
        .context("running stalltop report")?;
    if !output.status.success() {
        anyhow::bail!(
            "stalltop report failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Report::parse(&String::from_utf8_lossy(&output.stdout)).map_err(anyhow::Error::msg)
}
