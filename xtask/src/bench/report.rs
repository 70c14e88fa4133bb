//! The bench's results and their markdown report. Rendering only: every
//! number comes from the runs, through stats.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::guard_report::{self, GuardResults};
use super::probe_stats::ProgramCost;
use super::stats::{paired_ratios, spread, Spread};
use super::tool::Variant;
use super::workload::{Outcome, Workload};

/// One workload run under one variant.
#[derive(Clone, Debug, Default)]
pub struct Run {
    /// Timed with BPF run-time statistics off.
    pub outcome: Outcome,
    /// Tracepoint -> what the tool's programs there did in a second,
    /// untimed run with statistics on.
    pub programs: BTreeMap<String, ProgramCost>,
    /// The tool's own user+system CPU during the timed run.
    pub tool_cpu_s: f64,
    /// Records the stalltop recording lost (0 for the other tools).
    pub lost_events: u64,
}

/// stalltop record's CPU with nothing else running.
#[derive(Clone, Copy, Debug)]
pub struct IdleCpu {
    pub seconds: f64,
    pub cpu_s: f64,
}

pub struct Results {
    pub rounds: u32,
    /// Where it ran: kernel, CPUs.
    pub machine: String,
    /// The workloads measured, in row order.
    pub workloads: Vec<Workload>,
    /// The variants measured, in column order (`Variant::Nothing` first).
    pub variants: Vec<Variant>,
    /// Per workload and variant, one run per round, in round order.
    pub runs: BTreeMap<(Workload, Variant), Vec<Run>>,
    pub idle: Option<IdleCpu>,
    /// The cost guard section, when it ran.
    pub guard: Option<GuardResults>,
}

impl Results {
    fn runs(&self, workload: Workload, variant: Variant) -> &[Run] {
        self.runs
            .get(&(workload, variant))
            .map_or(&[], Vec::as_slice)
    }

    /// The slowdown of `variant` against nothing attached, paired by round.
    fn slowdown(&self, workload: Workload, variant: Variant) -> Option<Spread> {
        let cost = |v| -> Vec<f64> {
            self.runs(workload, v)
                .iter()
                .map(|r| r.outcome.cost())
                .collect()
        };
        spread(paired_ratios(&cost(variant), &cost(Variant::Nothing)))
    }

    /// ns per invocation of `variant`'s programs on `tracepoint`, per round
    /// (rounds where they did not run are left out).
    fn ns_per_invocation(
        &self,
        workload: Workload,
        variant: Variant,
        tracepoint: &str,
    ) -> Vec<Option<f64>> {
        self.runs(workload, variant)
            .iter()
            .map(|r| {
                r.programs
                    .get(tracepoint)
                    .and_then(|p| p.ns_per_invocation())
            })
            .collect()
    }

    /// stalltop's sched_switch over runqlat's, paired by round.
    fn sched_switch_vs_runqlat(&self, workload: Workload, stalltop: Variant) -> Option<Spread> {
        let ours = self.ns_per_invocation(workload, stalltop, "sched_switch");
        let theirs = self.ns_per_invocation(workload, Variant::Runqlat, "sched_switch");
        spread(
            ours.iter()
                .zip(&theirs)
                .filter_map(|(o, t)| Some((*o)? / (*t)?)),
        )
    }
}

fn ratio_cell(s: Option<Spread>) -> String {
    s.map_or("-".into(), |s| {
        format!("{:.3}x [{:.2}-{:.2}]", s.median, s.min, s.max)
    })
}

fn table_head(out: &mut String, first: &[&str], variants: &[Variant]) {
    let names: Vec<&str> = first
        .iter()
        .copied()
        .chain(variants.iter().map(|v| v.name()))
        .collect();
    let _ = writeln!(out, "| {} |", names.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(names.len()));
}

pub fn render(results: &Results) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## `cargo xtask bench`: {} interleaved rounds on {}\n",
        results.rounds, results.machine
    );
    if !results.workloads.is_empty() {
        render_variants(&mut out, results);
    }
    if let Some(guard) = &results.guard {
        guard_report::render(&mut out, guard);
    }
    out
}

/// The variants' tables: slowdowns, the tools' own CPU, lost events, idle
/// CPU, and each workload's programs.
fn render_variants(out: &mut String, results: &Results) {
    let attached: Vec<Variant> = results
        .variants
        .iter()
        .copied()
        .filter(|v| *v != Variant::Nothing)
        .collect();
    if !results.variants.iter().any(|v| v.is_reference()) {
        let _ = writeln!(
            out,
            "The bcc libbpf-tools references (runqlat, syscount, syscount -L) were not measured: \
             they need `--references DIR` with their binaries.\n"
        );
    }

    let _ = writeln!(
        out,
        "### Slowdown\n\nEach cell: the workload's cost with the tool attached over its cost with \
         nothing attached in the same round (wall time; for redis, time per request), median of \
         rounds [min-max]. The first column is the baseline (median).\n"
    );
    table_head(out, &["workload", "nothing attached"], &attached);
    for &workload in &results.workloads {
        let baseline = spread(
            results
                .runs(workload, Variant::Nothing)
                .iter()
                .map(|r| r.outcome.requests_per_s.unwrap_or(r.outcome.wall_s)),
        );
        let baseline = baseline.map_or("-".into(), |b| match workload {
            Workload::Redis => format!("{:.0} req/s", b.median),
            _ => format!("{:.3} s", b.median),
        });
        let cells: Vec<String> = attached
            .iter()
            .map(|v| ratio_cell(results.slowdown(workload, *v)))
            .collect();
        let _ = writeln!(
            out,
            "| {} | {baseline} | {} |",
            workload.name(),
            cells.join(" | ")
        );
    }

    let tools: Vec<Variant> = attached
        .iter()
        .copied()
        .filter(|v| v.is_stalltop() || v.is_reference())
        .collect();
    let _ = writeln!(
        out,
        "\n### The tools' own CPU\n\nuser+system CPU of the tool's process during the timed run, \
         % of one CPU, median of rounds [min-max].\n"
    );
    table_head(out, &["workload"], &tools);
    for &workload in &results.workloads {
        let cells: Vec<String> = tools
            .iter()
            .map(|v| {
                spread(
                    results
                        .runs(workload, *v)
                        .iter()
                        .map(|r| 100.0 * r.tool_cpu_s / r.outcome.wall_s),
                )
                .map_or("-".into(), |s| {
                    format!("{:.2}% [{:.2}-{:.2}]", s.median, s.min, s.max)
                })
            })
            .collect();
        let _ = writeln!(out, "| {} | {} |", workload.name(), cells.join(" | "));
    }
    let stalltop: Vec<Variant> = tools.iter().copied().filter(|v| v.is_stalltop()).collect();
    let _ = writeln!(out, "\nstalltop's lost events, summed over all rounds:\n");
    table_head(out, &["workload"], &stalltop);
    for &workload in &results.workloads {
        let cells: Vec<String> = stalltop
            .iter()
            .map(|v| {
                let lost: u64 = results
                    .runs(workload, *v)
                    .iter()
                    .map(|r| r.lost_events)
                    .sum();
                lost.to_string()
            })
            .collect();
        let _ = writeln!(out, "| {} | {} |", workload.name(), cells.join(" | "));
    }
    if let Some(idle) = results.idle {
        let _ = writeln!(
            out,
            "\n`stalltop record` with no workload running: {:.2}% of one CPU (user+system) over {:.0} s.",
            100.0 * idle.cpu_s / idle.seconds,
            idle.seconds
        );
    }

    for &workload in &results.workloads {
        render_programs(out, results, workload, &attached);
    }
}

/// Per tracepoint, each tool's ns per invocation in the statistics run.
fn render_programs(out: &mut String, results: &Results, workload: Workload, attached: &[Variant]) {
    let _ = writeln!(
        out,
        "\n### ns per program invocation: {}\n\nRun-time statistics on, in a second, untimed run \
         of each round; median of rounds.\n",
        workload.name()
    );
    let tracepoints: BTreeSet<&String> = attached
        .iter()
        .flat_map(|v| results.runs(workload, *v))
        .flat_map(|r| {
            r.programs
                .iter()
                .filter(|(_, p)| p.invocations > 0)
                .map(|(name, _)| name)
        })
        .collect();
    table_head(out, &["program on", "invocations/run"], attached);
    for tracepoint in tracepoints {
        let invocations = attached
            .iter()
            .filter_map(|v| {
                spread(
                    results
                        .runs(workload, *v)
                        .iter()
                        .filter_map(|r| r.programs.get(tracepoint))
                        .map(|p| p.invocations as f64),
                )
            })
            .map(|s| s.median)
            .fold(0.0, f64::max);
        let cells: Vec<String> = attached
            .iter()
            .map(|v| {
                spread(
                    results
                        .ns_per_invocation(workload, *v, tracepoint)
                        .into_iter()
                        .flatten(),
                )
                .map_or("-".into(), |s| format!("{:.0}", s.median))
            })
            .collect();
        let _ = writeln!(
            out,
            "| {tracepoint} | {invocations:.0} | {} |",
            cells.join(" | ")
        );
    }
    if results.variants.contains(&Variant::Runqlat) {
        let modes: Vec<String> = [
            Variant::Stalltop,
            Variant::StalltopExact,
            Variant::StalltopOff,
        ]
        .into_iter()
        .filter(|v| results.variants.contains(v))
        .map(|v| {
            format!(
                "{} {}",
                v.name(),
                ratio_cell(results.sched_switch_vs_runqlat(workload, v))
            )
        })
        .collect();
        let _ = writeln!(
            out,
            "\nstalltop's sched_switch / runqlat's sched_switch, ns per invocation paired by round: {}.",
            modes.join("; ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::workload::WORKLOADS;

    fn run(wall_s: f64, rps: Option<f64>, programs: &[(&str, u64)]) -> Run {
        Run {
            outcome: Outcome {
                wall_s,
                requests_per_s: rps,
            },
            // Every program ran 1000 times for `ns` each.
            programs: programs
                .iter()
                .map(|(tp, ns)| {
                    (
                        tp.to_string(),
                        ProgramCost {
                            invocations: 1000,
                            ns: 1000 * ns,
                        },
                    )
                })
                .collect(),
            tool_cpu_s: wall_s / 100.0,
            lost_events: 0,
        }
    }

    /// Two rounds, the second on a machine twice as slow.
    fn results(variants: Vec<Variant>) -> Results {
        let mut runs = BTreeMap::new();
        for workload in WORKLOADS {
            let rps = (workload == Workload::Redis).then_some(40_000.0);
            for variant in &variants {
                let (factor, programs): (f64, &[(&str, u64)]) = match variant {
                    Variant::Nothing => (1.0, &[]),
                    Variant::Stalltop => (1.04, &[("sched_switch", 300), ("cpu_sample", 500)]),
                    Variant::Runqlat => (1.10, &[("sched_switch", 600), ("sched_wakeup", 200)]),
                    _ => (1.5, &[("sched_switch", 50)]),
                };
                let mut rounds = [1.0, 2.0]
                    .map(|slow| run(slow * factor, rps.map(|r| r / (slow * factor)), programs))
                    .to_vec();
                if workload == Workload::Messaging && *variant == Variant::Stalltop {
                    rounds[0].lost_events = 3;
                    rounds[1].lost_events = 4;
                }
                runs.insert((workload, *variant), rounds);
            }
        }
        Results {
            rounds: 2,
            machine: "a test".into(),
            workloads: WORKLOADS.to_vec(),
            variants,
            runs,
            idle: Some(IdleCpu {
                seconds: 60.0,
                cpu_s: 0.12,
            }),
            guard: None,
        }
    }

    fn results_with_a_reference() -> Results {
        results(vec![
            Variant::Nothing,
            Variant::EmptyPrograms,
            Variant::Stalltop,
            Variant::Runqlat,
        ])
    }

    #[test]
    fn the_report_shows_paired_slowdowns_per_workload_and_mode_with_the_references_beside_them() {
        let report = render(&results_with_a_reference());
        assert!(
            report.contains(
                "| workload | nothing attached | empty programs | stalltop record | runqlat |"
            ),
            "{report}"
        );
        assert!(
            report.contains("| getpid() x 2M | 1.500 s | 1.500x [1.50-1.50] | 1.040x [1.04-1.04] | 1.100x [1.10-1.10] |"),
            "{report}"
        );
        // The server's baseline is its request rate, its slowdown the rate
        // without over the rate with.
        assert!(
            report.contains("(loopback) | 30000 req/s | 1.500x"),
            "{report}"
        );
        assert!(!report.contains("were not measured"), "{report}");
    }

    #[test]
    fn the_program_table_puts_each_tools_programs_on_one_tracepoint_in_one_row() {
        let report = render(&results_with_a_reference());
        assert!(
            report.contains(
                "| program on | invocations/run | empty programs | stalltop record | runqlat |"
            ),
            "{report}"
        );
        assert!(
            report.contains("| sched_switch | 1000 | 50 | 300 | 600 |"),
            "{report}"
        );
        assert!(
            report.contains("| cpu_sample | 1000 | - | 500 | - |"),
            "{report}"
        );
        assert!(
            report.contains("| sched_wakeup | 1000 | - | - | 200 |"),
            "{report}"
        );
        assert!(
            report.contains("runqlat's sched_switch, ns per invocation paired by round: stalltop record 0.500x [0.50-0.50]."),
            "{report}"
        );
    }

    #[test]
    fn without_references_their_columns_are_left_out_and_the_report_says_so() {
        let report = render(&results(vec![Variant::Nothing, Variant::Stalltop]));
        assert!(
            report.contains("| workload | nothing attached | stalltop record |\n"),
            "{report}"
        );
        assert!(report.contains("were not measured"), "{report}");
        assert!(!report.contains("runqlat's sched_switch"), "{report}");
    }

    #[test]
    fn a_bench_of_some_workloads_reports_only_those() {
        let mut results = results(vec![Variant::Nothing, Variant::Stalltop]);
        results.workloads = vec![Workload::Redis];
        let report = render(&results);
        assert!(report.contains("| redis-benchmark"), "{report}");
        assert!(!report.contains("getpid() x 2M"), "{report}");
        assert!(!report.contains("perf bench sched"), "{report}");
    }

    #[test]
    fn the_tools_cpu_lost_events_and_idle_cpu_are_reported() {
        let report = render(&results(vec![
            Variant::Nothing,
            Variant::Stalltop,
            Variant::Runqlat,
        ]));
        assert!(
            report.contains("| getpid() x 2M | 1.00% [1.00-1.00] | 1.00% [1.00-1.00] |"),
            "{report}"
        );
        assert!(
            report.contains("summed over all rounds:\n\n| workload | stalltop record |\n|---|---|\n| perf bench sched messaging -g 5 -l 1000 | 7 |"),
            "{report}"
        );
        assert!(
            report.contains("0.20% of one CPU (user+system) over 60 s"),
            "{report}"
        );
    }
}
