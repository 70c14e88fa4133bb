//! The text report: the human summary `stalltop report FILE` prints. Layout
//! only: the report has the numbers, `selection` chose the rows. Every line
//! about an event carries its time as +offset into the recording and UTC;
//! every list says what it left out; every section says "none" when empty.

mod findings;
mod lists;
mod tables;

use std::fmt::Write as _;

use super::selection::Selection;
use crate::app::format;
use crate::model::{utc, Report};

/// The human summary.
pub fn render(r: &Report, chosen: &Selection<'_>) -> String {
    let mut out = String::new();
    head(&mut out, r);
    findings::findings(&mut out, r);
    tables::why(&mut out, chosen);
    lists::victim(&mut out, r, chosen);
    lists::stalls(&mut out, r, chosen);
    lists::culprits(&mut out, r, chosen);
    lists::takeovers(&mut out, r, chosen);
    lists::slow_calls(&mut out, r, chosen);
    tables::syscalls(&mut out, r, chosen);
    tables::softirqs(&mut out, r, chosen);
    tables::runq(&mut out, r, chosen);
    lists::waits(&mut out, r, chosen);
    tables::throttling(&mut out, r);
    out
}

/// The host, the recording's times, the scope, the trigger, the warnings.
fn head(out: &mut String, r: &Report) {
    let _ = writeln!(
        out,
        "stalltop {} on {} (kernel {}, {} CPUs), {} probes, cgroups by {}",
        r.version,
        r.host.hostname,
        r.host.kernel,
        r.host.cpus,
        r.settings.attach,
        r.settings.cgroup_hierarchy
    );
    let _ = writeln!(
        out,
        "Recorded from {} for {}; times below are +offset into the recording and UTC",
        utc(r.start_unix_ns),
        format::duration(r.duration_ns)
    );
    let scope = &r.scope;
    if scope.from_ns.is_some() || scope.to_ns.is_some() {
        let edge = |ns: Option<u64>, none: &str| ns.map_or(none.to_string(), |ns| at(r, ns));
        let _ = writeln!(
            out,
            "Window: {} to {} (stalls and waits that overlap it; tables count what happened in it)",
            edge(scope.from_ns, "the start"),
            edge(scope.to_ns, "the end")
        );
    }
    if let Some(container) = &scope.container {
        let _ = writeln!(out, "Only what hurt the containers matching `{container}`");
    }
    if let Some(pid) = scope.pid {
        let _ = writeln!(out, "Only what hurt process {pid}");
    }
    if let Some(t) = &r.trigger {
        let _ = match (t.duration_ns, t.stall_id) {
            (0, _) => writeln!(
                out,
                "Flight recording written on request at {}",
                at(r, t.start_ns)
            ),
            (d, Some(id)) => writeln!(
                out,
                "Flight recording triggered by stall #{id} at {}, {} long",
                at(r, t.start_ns),
                format::duration(d)
            ),
            (d, None) => writeln!(
                out,
                "Flight recording triggered by a {} stall at {} (not in this report)",
                format::duration(d),
                at(r, t.start_ns)
            ),
        };
    }
    for warning in &r.warnings {
        let _ = writeln!(out, "WARNING: {warning}");
    }
    for (what, counts, effect) in [
        (
            "records lost",
            &r.lost_events,
            "the lists below miss them and the tables may too",
        ),
        (
            "records rate-limited (over --record-rate)",
            &r.rate_limited_events,
            "the lists below miss them; the tables count them",
        ),
        (
            "kernel map updates refused (map full)",
            &r.map_full,
            "the tables miss them",
        ),
    ] {
        let nonzero: Vec<String> = counts
            .iter()
            .filter(|(_, &n)| n > 0)
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        if !nonzero.is_empty() {
            let total: u64 = counts.values().sum();
            let _ = writeln!(
                out,
                "WARNING: {total} {what} ({}): {effect}",
                nonzero.join(", ")
            );
        }
    }
    if r.own_rows_left_out > 0 {
        let _ = writeln!(
            out,
            "({} rows of stalltop's own waits and calls left out)",
            r.own_rows_left_out
        );
    }
}

/// "+3.041s 12:03:05.123Z": a time as every line gives it.
pub fn at(r: &Report, ns: u64) -> String {
    format!(
        "{} {}",
        format::offset(ns.saturating_sub(r.start_ns)),
        format::utc_clock(r.unix_ns(ns))
    )
}

/// A section's title line.
pub fn title(out: &mut String, text: std::fmt::Arguments<'_>) {
    let _ = writeln!(out, "\n{text}");
}

/// "  none" under an empty section.
pub fn none(out: &mut String, rows: usize) {
    if rows == 0 {
        let _ = writeln!(out, "  none");
    }
}

/// "  ... 460 more (--limit N, --all)" under a cut list.
pub fn more(out: &mut String, more: usize) {
    if more > 0 {
        let _ = writeln!(out, "  ... {more} more (--limit N or --all shows them)");
    }
}

/// A path cut to `width` from the left (the file name is the telling end).
pub fn clip(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_string()
    } else {
        let tail: Vec<char> = s.chars().rev().take(width - 1).collect();
        format!("…{}", tail.into_iter().rev().collect::<String>())
    }
}
