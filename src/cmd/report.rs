//! `stalltop report FILE [--json]`: read a recording (up to any damage),
//! analyse it, print the report.

use std::fmt::Write as _;

use crate::cli::ReportArgs;
use crate::model::{Analysis, Report};
use crate::record;
use crate::Failure;

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
    let mut analysis = Analysis::new(recording.header);
    for entry in &recording.entries {
        analysis.apply(entry);
    }
    let report = analysis.report();
    if args.json {
        let json = serde_json::to_string_pretty(&report).expect("a report always serializes");
        println!("{json}");
    } else {
        print!("{}", text(&report));
    }
    Ok(())
}

/// The human summary. Layout only: every number comes from the report.
fn text(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "stalltop {} on {} (kernel {}, {} CPUs), {:.1}s recorded, {} probes, cgroups by {}",
        r.version,
        r.host.hostname,
        r.host.kernel,
        r.host.cpus,
        r.duration_ns as f64 / 1e9,
        r.settings.attach,
        r.settings.cgroup_hierarchy
    );
    let lost: Vec<String> = r
        .lost_events
        .iter()
        .filter(|(_, &n)| n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    if !lost.is_empty() {
        let _ = writeln!(out, "LOST EVENTS: {}", lost.join(", "));
    }

    let _ = writeln!(out, "\nRun-queue latency by cgroup (waits for a CPU)");
    let _ = writeln!(
        out,
        "  {:<40} {:>8} {:>9} {:>9} {:>9}  preempted by own/other/kthread, top preemptor",
        "cgroup", "waits", "p50", "p99", "max"
    );
    for row in &r.runq {
        let top = row
            .top_preemptors
            .first()
            .map(|p| format!("{} ({}) x{}", p.comm, p.cgroup, p.count))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {:<40} {:>8} {:>9} {:>9} {:>9}  {}/{}/{} {}",
            clip(&row.cgroup, 40),
            row.count,
            ms(row.p50_ns),
            ms(row.p99_ns),
            ms(row.max_ns),
            row.preempted_by.same_cgroup,
            row.preempted_by.other_cgroup,
            row.preempted_by.kthread,
            top
        );
    }

    let _ = writeln!(
        out,
        "\nWaits over {} ({} total, newest last)",
        ms(r.settings.runq_threshold_ns),
        r.runq_events.len()
    );
    for e in r.runq_events.iter().rev().take(20).rev() {
        let _ = writeln!(
            out,
            "  cpu {:<3} {:>9}  {} [{}] {} waited; {} [{}] {} had the CPU",
            e.cpu,
            ms(e.wait_ns),
            e.comm,
            e.pid,
            e.cgroup,
            e.ran_instead.comm,
            e.ran_instead.pid,
            e.ran_instead.cgroup
        );
    }

    let _ = writeln!(out, "\nCFS throttling (cgroups with a CPU quota)");
    for t in &r.throttling {
        let _ = writeln!(
            out,
            "  {:<40} quota {}us/{}us cpus {}: throttled {} of {} periods ({}%), {} total, usage {}",
            clip(&t.cgroup, 40),
            t.quota_us,
            t.period_us,
            t.cpus.as_deref().unwrap_or("?"),
            t.nr_throttled,
            t.nr_periods,
            t.throttled_pct,
            ms(t.throttled_ns),
            t.usage_of_quota_pct
                .map_or("?".into(), |p| format!("{p}% of quota")),
        );
    }
    out
}

fn ms(ns: u64) -> String {
    format!("{:.2}ms", ns as f64 / 1e6)
}

fn clip(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_string()
    } else {
        let tail: String = s
            .chars()
            .rev()
            .take(width - 1)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("…{tail}")
    }
}
