//! `stalltop diff A B [--json] [--fail-if EXPR]`: two recordings' reports
//! compared (before and after a change), as text or JSON; with --fail-if,
//! exit 10 when the condition holds, for CI and change reviews.

mod condition;

use std::fmt::Write as _;

use crate::app::format::duration;
use crate::cli::DiffArgs;
use crate::cmd::report;
use crate::failure::Failure;
use crate::model::diff::{self, ContainerDiff, Diff, StallCount, Waits};
use crate::model::{utc, ReportScope};
pub use condition::{parse_condition, Condition};

/// Rows of each list in the text.
const ROWS: usize = 10;

pub fn run(args: &DiffArgs) -> Result<(), Failure> {
    let before = report::report_of(&report::read(&args.before)?, ReportScope::default());
    let after = report::report_of(&report::read(&args.after)?, ReportScope::default());
    let compared = diff::diff(&before, &after);
    if args.json {
        let json = serde_json::to_string_pretty(&compared).expect("a diff always serializes");
        super::print_out(&format!("{json}\n"))?;
    } else {
        super::print_out(&text(&compared, args))?;
    }
    match &args.fail_if {
        Some(condition) if condition.holds(&compared).map_err(Failure::Other)? => {
            Err(Failure::Check(format!(
                "--fail-if `{}` holds for {} against {}",
                condition.text(),
                args.after.display(),
                args.before.display()
            )))
        }
        _ => Ok(()),
    }
}

fn text(d: &Diff, args: &DiffArgs) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "A: {} ({}, from {} for {})\nB: {} ({}, from {} for {})",
        args.before.display(),
        d.before.hostname,
        utc(d.before.start_unix_ns),
        duration(d.before.duration_ns),
        args.after.display(),
        d.after.hostname,
        utc(d.after.start_unix_ns),
        duration(d.after.duration_ns)
    );
    let _ = writeln!(
        out,
        "\nWaits for a CPU by cgroup, A -> B (per second of recording), the largest change first"
    );
    if d.containers.is_empty() {
        let _ = writeln!(out, "  none");
    }
    for c in d.containers.iter().take(ROWS) {
        container_line(&mut out, c);
    }
    let _ = writeln!(
        out,
        "\nStalls by kind, A -> B (count, spans summed, longest single wait)"
    );
    for k in &d.stalls_by_kind {
        if k.before.count + k.after.count > 0 {
            let _ = writeln!(
                out,
                "  {:<10} {} -> {}",
                k.kind.name(),
                count(&k.before),
                count(&k.after)
            );
        }
    }
    if d.stalls_by_kind
        .iter()
        .all(|k| k.before.count + k.after.count == 0)
    {
        let _ = writeln!(out, "  none");
    }
    let _ = writeln!(
        out,
        "\nCulprits, A -> B (who held the CPU in stalls), the most in B first"
    );
    if d.culprits.is_empty() {
        let _ = writeln!(out, "  none");
    }
    for c in d.culprits.iter().take(ROWS) {
        let side = |s: &Option<StallCount>| s.as_ref().map_or("none".into(), count);
        let new = if c.before.is_none() { "  NEW" } else { "" };
        let _ = writeln!(
            out,
            "  {} ({}): {} -> {}{new}",
            c.comm,
            c.container,
            side(&c.before),
            side(&c.after)
        );
    }
    out
}

fn count(s: &StallCount) -> String {
    format!(
        "{} ({}, longest wait {})",
        s.count,
        duration(s.total_ns),
        duration(s.longest_wait_ns)
    )
}

fn container_line(out: &mut String, c: &ContainerDiff) {
    let rate = |w: &Option<Waits>| {
        w.as_ref().map_or("none".to_string(), |w| {
            format!("{}/s", duration(w.ns_per_s as u64))
        })
    };
    let change = c
        .wait_change_pct
        .map_or("new in B".to_string(), |p| format!("{p:+}%"));
    let _ = writeln!(
        out,
        "  {:<32} wait {} -> {} ({change})",
        c.cgroup,
        rate(&c.before),
        rate(&c.after)
    );
    let detail = |w: &Waits| {
        format!(
            "p99 {}, max {}, kept off by own/other/kthread/quota {}/{}/{}/{}{}",
            duration(w.p99_ns),
            duration(w.max_ns),
            w.same_cgroup,
            w.other_cgroup,
            w.kthread,
            w.throttled,
            w.top_neighbour
                .as_ref()
                .map_or(String::new(), |n| format!(", most by {n}"))
        )
    };
    if let Some(w) = &c.before {
        let _ = writeln!(out, "      A: {}", detail(w));
    }
    if let Some(w) = &c.after {
        let _ = writeln!(out, "      B: {}", detail(w));
    }
}
