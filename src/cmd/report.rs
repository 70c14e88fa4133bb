//! `stalltop report FILE [--json | --perfetto OUT]`: read a recording (up
//! to any damage), analyse it within the scope the options give (a window,
//! a container or a pid, display thresholds), print the report or write
//! its Perfetto trace.

mod selection;
mod text;

use std::path::Path;
use std::time::Duration;

use crate::cli::ReportArgs;
use crate::failure::Failure;
use crate::model::{Analysis, Report, ReportScope};
use crate::perfetto;
use crate::record::{self, Recording};
use crate::stream::Header;

pub fn run(args: &ReportArgs) -> Result<(), Failure> {
    let recording = read(&args.file)?;
    if let Some(out) = &args.perfetto {
        return write_perfetto(&recording, out);
    }
    let scope = scope_of(args, &recording.header)?;
    let report = report_of(&recording, scope);
    if args.json {
        super::print_out(&format!("{}\n", json(&report)))
    } else {
        let limit = (!args.all).then_some(args.limit);
        let chosen = selection::select(&report, args.sort, limit);
        super::print_out(&text::render(&report, &chosen))
    }
}

/// A recording, read up to any damage (said on stderr); an error when not
/// even its header reads, or nothing after it does.
pub fn read(path: &Path) -> Result<Recording, Failure> {
    let recording =
        record::read(path).map_err(|e| Failure::Recording(format!("{}: {e}", path.display())))?;
    if let Some(damage) = &recording.damage {
        eprintln!(
            "stalltop: {}: {damage}; the report covers what came before it",
            path.display()
        );
        if recording.entries.is_empty() {
            return Err(Failure::Recording(format!(
                "{}: nothing readable after the header",
                path.display()
            )));
        }
    }
    Ok(recording)
}

/// `--perfetto OUT`: the trace, and one line saying what it holds.
fn write_perfetto(recording: &Recording, out: &Path) -> Result<(), Failure> {
    let exported = perfetto::export(&recording.header, &recording.entries);
    std::fs::write(out, &exported.trace)
        .map_err(|e| Failure::Output(format!("{}: {e}", out.display())))?;
    eprintln!(
        "stalltop: {}: {} stalls and {} waits over the threshold on {} CPUs (open it in \
         ui.perfetto.dev)",
        out.display(),
        exported.stalls,
        exported.waits,
        recording.header.host.cpus
    );
    Ok(())
}

/// The scope the options ask for, checked against the recording.
fn scope_of(args: &ReportArgs, header: &Header) -> Result<ReportScope, Failure> {
    let from_ns = args.from.map(|t| t.resolve(header));
    let to_ns = args.to.map(|t| t.resolve(header));
    if let (Some(from), Some(to)) = (from_ns, to_ns) {
        if from >= to {
            return Err(Failure::Other(
                "--from must come before --to in the recording".into(),
            ));
        }
    }
    if to_ns.is_some_and(|to| to < header.start_ns) {
        return Err(Failure::Other(format!(
            "--to is before the recording starts ({})",
            crate::model::utc(crate::model::unix_ns(header, header.start_ns))
        )));
    }
    let raise = |given: Option<Duration>, recorded: u64, flag: &str| match given {
        None => Ok(None),
        Some(d) if (d.as_nanos() as u64) < recorded => Err(Failure::Other(format!(
            "{flag} {} is below the recording's {}: the probes reported nothing shorter",
            humantime::format_duration(d),
            humantime::format_duration(Duration::from_nanos(recorded))
        ))),
        Some(d) => Ok(Some(d.as_nanos() as u64)),
    };
    let settings = &header.settings;
    Ok(ReportScope {
        from_ns,
        to_ns,
        container: args.container.clone(),
        pid: args.pid,
        runq_threshold_ns: raise(
            args.thresholds.runq,
            settings.runq_threshold_ns,
            "--runq-threshold",
        )?,
        stall_threshold_ns: raise(
            args.thresholds.stall,
            settings.stall_threshold_ns,
            "--stall-threshold",
        )?,
    })
}

/// The analysis of everything readable in a recording, cut to `scope`.
pub fn report_of(recording: &Recording, scope: ReportScope) -> Report {
    let mut analysis = Analysis::scoped(recording.header.clone(), scope);
    for entry in &recording.entries {
        analysis.apply(entry);
    }
    analysis.report()
}

/// `--json`: the report as one pretty-printed object.
pub fn json(report: &Report) -> String {
    serde_json::to_string_pretty(report).expect("a report always serializes")
}

#[cfg(test)]
pub(crate) mod tests;
