//! The bench's cost guard section, pure: the steps stalltop logged, its
//! cost over windows from the samples of its own /metrics, when it got
//! under its budget, the verdict against the reaction time the guard
//! states (src/cost_guard.rs), and the section's markdown. Every number
//! comes from the sustained runs; nothing here reads a clock or a file.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::stats::{spread, Spread};

/// The guard's window (`OVER_NS`, src/cost_guard.rs): over the budget for
/// this long, it takes one step down, and after a step it measures this
/// long before the next.
pub const GUARD_WINDOW_S: f64 = 5.0;
/// How late the bench may see what the guard did: the guard decides at
/// stalltop's snapshots, one a second, and its metric holds the programs'
/// run time of the latest snapshot.
pub const SAMPLING_S: f64 = 2.0;
/// The metric that holds what the guard weighs.
pub const COST_METRIC: &str = "stalltop_probe_cpu_seconds_total";

/// How a sustained run of the workload was held.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Arm {
    Nothing,
    /// `stalltop serve --syscalls exact --max-cpu off`.
    Unguarded,
    /// `stalltop serve --syscalls exact --max-cpu P%`.
    Guarded,
}

pub const ARMS: [Arm; 3] = [Arm::Nothing, Arm::Unguarded, Arm::Guarded];

impl Arm {
    pub fn name(self) -> &'static str {
        match self {
            Arm::Nothing => "nothing attached",
            Arm::Unguarded => "exact, --max-cpu off",
            Arm::Guarded => "exact, with the guard",
        }
    }
}

/// stalltop's cost so far, read `at_s` seconds after it attached.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub at_s: f64,
    /// `COST_METRIC`: its process's CPU time plus its programs' run time
    /// by their own timing, what the guard weighs.
    pub cost_s: f64,
    /// Its process's user+system time, from /proc.
    pub process_s: f64,
}

/// A step the guard logged on stderr, `at_s` seconds after attaching.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub at_s: f64,
    pub down: bool,
    /// What the step does, as logged ("exact syscalls sampled").
    pub what: String,
}

/// One run of the workload inside a sustained run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WorkloadRun {
    /// When it began, seconds after stalltop attached.
    pub start_s: f64,
    pub wall_s: f64,
}

/// The workload run back to back under one arm.
#[derive(Clone, Debug, Default)]
pub struct Sustained {
    pub runs: Vec<WorkloadRun>,
    /// Empty with nothing attached.
    pub samples: Vec<Sample>,
    pub steps: Vec<Step>,
}

/// The section's measurements.
pub struct GuardResults {
    /// How long each arm ran the workload.
    pub seconds: u64,
    /// `--max-cpu`, in percent of the node.
    pub max_cpu_percent: f64,
    pub cpus: usize,
    pub workload: String,
    /// One map of the arms per round.
    pub rounds: Vec<BTreeMap<Arm, Sustained>>,
}

impl GuardResults {
    /// The budget in CPUs.
    pub fn budget_cpus(&self) -> f64 {
        self.max_cpu_percent / 100.0 * self.cpus as f64
    }

    /// CPUs as a share of the node, in percent.
    fn percent(&self, cpus: f64) -> f64 {
        100.0 * cpus / self.cpus as f64
    }
}

/// A step in one of serve's stderr lines ("stalltop: stalltop's cost 0.386
/// CPUs against a budget of 0.040 (--max-cpu): stepping down: exact
/// syscalls sampled", src/cmd/serve.rs): down or up, and what it does.
pub fn parse_step(line: &str) -> Option<(bool, String)> {
    [("stepping down: ", true), ("stepping back up: ", false)]
        .into_iter()
        .find_map(|(marker, down)| {
            let (_, what) = line.split_once(marker)?;
            Some((down, what.trim().to_string()))
        })
}

/// The value of an unlabelled sample `name` in a Prometheus exposition
/// (written `name value` or, as serve writes it, `name{} value`).
pub fn metric_value(exposition: &str, name: &str) -> Option<f64> {
    exposition.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?;
        let value = rest.strip_prefix("{}").unwrap_or(rest).strip_prefix(' ')?;
        value.split_whitespace().next()?.parse().ok()
    })
}

/// What `part` of the samples grew by per second, from the first sample at
/// or after `from_s` to the last.
fn rate(samples: &[Sample], from_s: f64, part: impl Fn(&Sample) -> f64) -> Option<f64> {
    let first = samples.iter().find(|s| s.at_s >= from_s)?;
    let last = samples.last()?;
    let span = last.at_s - first.at_s;
    (span > 0.0).then(|| (part(last) - part(first)) / span)
}

/// stalltop's cost in CPUs from `from_s` to the end of the run.
pub fn cost_cpus(samples: &[Sample], from_s: f64) -> Option<f64> {
    rate(samples, from_s, |s| s.cost_s)
}

/// stalltop's cost over a window of `GUARD_WINDOW_S` (less the samples'
/// jitter) from each sample that has one: (its start, CPUs).
pub fn windows(samples: &[Sample]) -> Vec<(f64, f64)> {
    samples
        .iter()
        .enumerate()
        .filter_map(|(i, from)| {
            let to = samples[i..]
                .iter()
                .find(|s| s.at_s - from.at_s >= 0.9 * GUARD_WINDOW_S)?;
            Some((from.at_s, (to.cost_s - from.cost_s) / (to.at_s - from.at_s)))
        })
        .collect()
}

/// When the cost got within `budget` for good: the start of the first
/// window from which on every window is within it. None when the last
/// window is over it (or there is none).
pub fn under_budget_from(windows: &[(f64, f64)], budget: f64) -> Option<f64> {
    let first_within = match windows.iter().rposition(|&(_, cpus)| cpus > budget) {
        Some(over) => over + 1,
        None => 0,
    };
    windows.get(first_within).map(|&(start, _)| start)
}

/// A guarded run against its budget.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Verdict {
    pub steps_down: usize,
    /// By when the guard says it is within the budget: `GUARD_WINDOW_S`
    /// over it before each step down it took, plus `SAMPLING_S`.
    pub allowed_s: f64,
    pub under_from_s: Option<f64>,
    /// Within the budget in every window from `allowed_s` on to the end
    /// of a run that went on at least a window past it.
    pub held: bool,
}

pub fn verdict(run: &Sustained, budget_cpus: f64) -> Verdict {
    let steps_down = run.steps.iter().filter(|s| s.down).count();
    let allowed_s = GUARD_WINDOW_S * steps_down as f64 + SAMPLING_S;
    let windows = windows(&run.samples);
    let after: Vec<f64> = windows
        .iter()
        .filter(|&&(start, _)| start >= allowed_s)
        .map(|&(_, cpus)| cpus)
        .collect();
    Verdict {
        steps_down,
        allowed_s,
        under_from_s: under_budget_from(&windows, budget_cpus),
        held: !after.is_empty() && after.iter().all(|&cpus| cpus <= budget_cpus),
    }
}

impl Sustained {
    /// The workload's mean run time over the runs that began at or after
    /// `from_s`.
    pub fn mean_wall_s(&self, from_s: f64) -> Option<f64> {
        let walls: Vec<f64> = self
            .runs
            .iter()
            .filter(|r| r.start_s >= from_s)
            .map(|r| r.wall_s)
            .collect();
        (!walls.is_empty()).then(|| walls.iter().sum::<f64>() / walls.len() as f64)
    }
}

/// What one round measured, for its row and the medians.
struct Row {
    unguarded: Option<f64>,
    unguarded_process: Option<f64>,
    guarded: Option<f64>,
    guarded_after: Option<f64>,
    guarded_after_process: Option<f64>,
    verdict: Verdict,
    steps: String,
    slowdown_unguarded: Option<f64>,
    slowdown_guarded: Option<f64>,
    slowdown_guarded_after: Option<f64>,
}

fn row(results: &GuardResults, round: &BTreeMap<Arm, Sustained>) -> Row {
    let empty = Sustained::default();
    let arm = |a| round.get(&a).unwrap_or(&empty);
    let (unguarded, guarded) = (arm(Arm::Unguarded), arm(Arm::Guarded));
    let verdict = verdict(guarded, results.budget_cpus());
    let baseline = arm(Arm::Nothing).mean_wall_s(0.0);
    let slowdown = |run: &Sustained, from_s| Some(run.mean_wall_s(from_s)? / baseline?);
    let steps: Vec<String> = guarded
        .steps
        .iter()
        .map(|s| {
            let way = if s.down { "down" } else { "up" };
            format!("{:.1} s {way}: {}", s.at_s, s.what)
        })
        .collect();
    Row {
        unguarded: cost_cpus(&unguarded.samples, 0.0),
        unguarded_process: rate(&unguarded.samples, 0.0, |s| s.process_s),
        guarded: cost_cpus(&guarded.samples, 0.0),
        guarded_after: cost_cpus(&guarded.samples, verdict.allowed_s),
        guarded_after_process: rate(&guarded.samples, verdict.allowed_s, |s| s.process_s),
        verdict,
        steps: if steps.is_empty() {
            "none".into()
        } else {
            steps.join("; ")
        },
        slowdown_unguarded: slowdown(unguarded, 0.0),
        slowdown_guarded: slowdown(guarded, 0.0),
        slowdown_guarded_after: slowdown(guarded, verdict.allowed_s),
    }
}

fn median_cell(
    values: impl IntoIterator<Item = Option<f64>>,
    cell: impl Fn(Spread) -> String,
) -> String {
    spread(values.into_iter().flatten()).map_or("-".into(), cell)
}

/// The section, after the bench's other tables.
pub fn render(out: &mut String, results: &GuardResults) {
    let budget = results.budget_cpus();
    let pct =
        |cpus: Option<f64>| cpus.map_or("-".into(), |c| format!("{:.2}%", results.percent(c)));
    let ratio = |r: Option<f64>| r.map_or("-".into(), |r| format!("{r:.3}x"));
    let _ = writeln!(
        out,
        "\n### The cost guard\n\n`stalltop serve --syscalls exact` under `{}` run back to back for \
         {} s, without a budget (`--max-cpu off`) and with `--max-cpu {}%` ({budget:.3} CPUs on \
         {} CPUs), beside nothing attached, in a rotating order each round. stalltop's cost is \
         what the guard weighs, read from its /metrics every {GUARD_WINDOW_S:.0} s: `{COST_METRIC}` (its \
         process's CPU time plus its programs' run time by their own timing), in % of the \
         node; its process's share, from /proc, in brackets. The budget is held when every \
         {GUARD_WINDOW_S:.0} s window of that cost is within it from the guard's stated \
         reaction time on ({GUARD_WINDOW_S:.0} s over the budget before each step down it took, \
         plus {SAMPLING_S:.0} s for the snapshot and the scrape) to the end of the run. \
         Slowdowns are the workload's mean run time over that of nothing attached in the same \
         round.\n",
        results.workload,
        results.seconds,
        results.max_cpu_percent,
        results.cpus
    );
    let _ = writeln!(
        out,
        "| round | cost, --max-cpu off | with the guard | from its reaction time | steps (s after \
         attach) | under the budget from | allowed | slowdown, --max-cpu off | with the guard \
         | from its reaction time | budget held |"
    );
    let _ = writeln!(out, "|{}", "---|".repeat(11));
    let rows: Vec<Row> = results.rounds.iter().map(|r| row(results, r)).collect();
    for (i, row) in rows.iter().enumerate() {
        let _ = writeln!(
            out,
            "| {} | {} [{}] | {} | {} [{}] | {} | {} | {:.0} s | {} | {} | {} | {} |",
            i + 1,
            pct(row.unguarded),
            pct(row.unguarded_process),
            pct(row.guarded),
            pct(row.guarded_after),
            pct(row.guarded_after_process),
            row.steps,
            row.verdict
                .under_from_s
                .map_or("never".into(), |t| format!("{t:.1} s")),
            row.verdict.allowed_s,
            ratio(row.slowdown_unguarded),
            ratio(row.slowdown_guarded),
            ratio(row.slowdown_guarded_after),
            if row.verdict.held { "yes" } else { "**no**" },
        );
    }
    let percent = |s: Spread| {
        format!(
            "{:.2}% [{:.2}-{:.2}]",
            results.percent(s.median),
            results.percent(s.min),
            results.percent(s.max)
        )
    };
    let times = |s: Spread| format!("{:.3}x [{:.2}-{:.2}]", s.median, s.min, s.max);
    let held = rows.iter().filter(|r| r.verdict.held).count();
    let _ = writeln!(
        out,
        "\nMedians of {} rounds [min-max]: cost {} with `--max-cpu off`, {} with the guard over \
         the whole run and {} from its reaction time on, against a budget of {:.2}%; under the \
         budget from {} after attaching; slowdown {} with `--max-cpu off`, {} with the guard, {} \
         from its reaction time on.\n",
        rows.len(),
        median_cell(rows.iter().map(|r| r.unguarded), percent),
        median_cell(rows.iter().map(|r| r.guarded), percent),
        median_cell(rows.iter().map(|r| r.guarded_after), percent),
        results.max_cpu_percent,
        median_cell(rows.iter().map(|r| r.verdict.under_from_s), |s| format!(
            "{:.1} s [{:.1}-{:.1}]",
            s.median, s.min, s.max
        )),
        median_cell(rows.iter().map(|r| r.slowdown_unguarded), times),
        median_cell(rows.iter().map(|r| r.slowdown_guarded), times),
        median_cell(rows.iter().map(|r| r.slowdown_guarded_after), times),
    );
    let _ = writeln!(
        out,
        "Verdict: {} ({held} of {} rounds held the budget after the guard's reaction time).",
        if !rows.is_empty() && held == rows.len() {
            "**pass**"
        } else {
            "**fail**"
        },
        rows.len()
    );
}

/// Whether every round held the budget (and there was one).
pub fn passed(results: &GuardResults) -> bool {
    !results.rounds.is_empty()
        && results.rounds.iter().all(|round| {
            round
                .get(&Arm::Guarded)
                .is_some_and(|run| verdict(run, results.budget_cpus()).held)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples a second apart for `seconds`, stalltop spending `cpus(t)`
    /// CPUs in second t (a tenth of it in its process).
    fn samples(seconds: u32, cpus: impl Fn(f64) -> f64) -> Vec<Sample> {
        let mut cost_s = 0.0;
        (0..=seconds)
            .map(|t| {
                let t = f64::from(t);
                if t > 0.0 {
                    cost_s += cpus(t - 1.0);
                }
                Sample {
                    at_s: t,
                    cost_s,
                    process_s: cost_s / 10.0,
                }
            })
            .collect()
    }

    fn down(at_s: f64, what: &str) -> Step {
        Step {
            at_s,
            down: true,
            what: what.into(),
        }
    }

    /// 0.30 CPUs (exact syscalls in the overload) until `end`, 0.02 after.
    fn over_until(end: f64) -> impl Fn(f64) -> f64 {
        move |t| if t < end { 0.30 } else { 0.02 }
    }

    /// A guarded run whose one step, at 5 s, brought it under the budget
    /// (and the workload to speed) at `over_s`.
    fn one_step(over_s: f64) -> Sustained {
        guarded(
            vec![down(5.0, "exact syscalls sampled")],
            over_s,
            over_until(over_s),
        )
    }

    /// A guarded run of 40 s with `steps`, the workload taking 3 s a run
    /// while over `slow_until`, 2.5 s after.
    fn guarded(steps: Vec<Step>, slow_until: f64, cpus: impl Fn(f64) -> f64) -> Sustained {
        Sustained {
            runs: (0..14)
                .map(|i| {
                    let start_s = f64::from(i) * 3.0;
                    WorkloadRun {
                        start_s,
                        wall_s: if start_s < slow_until { 3.0 } else { 2.5 },
                    }
                })
                .collect(),
            samples: samples(40, cpus),
            steps,
        }
    }

    #[test]
    fn steps_are_read_from_serves_stderr_lines() {
        let line = "stalltop: stalltop's cost 0.386 CPUs against a budget of 0.040 (--max-cpu): \
                    stepping down: exact syscalls sampled";
        assert_eq!(
            parse_step(line),
            Some((true, "exact syscalls sampled".to_string()))
        );
        let up = "stalltop: stalltop's cost 0.010 CPUs against a budget of 0.040 (--max-cpu): \
                  stepping back up: stacks on";
        assert_eq!(parse_step(up), Some((false, "stacks on".to_string())));
        assert_eq!(
            parse_step("stalltop: serving http://127.0.0.1:9750/metrics (tp_btf probes)"),
            None
        );
    }

    #[test]
    fn the_cost_is_the_unlabelled_sample_of_its_metric() {
        let exposition = "# HELP stalltop_probe_cpu_seconds CPU time.\n\
                          # TYPE stalltop_probe_cpu_seconds counter\n\
                          stalltop_probe_cpu_seconds_total_other 9\n\
                          stalltop_probe_cpu_seconds_total{} 12.5\n\
                          stalltop_degraded{step=\"syscalls\"} 1\n";
        assert_eq!(metric_value(exposition, COST_METRIC), Some(12.5));
        assert_eq!(
            metric_value("stalltop_probe_cpu_seconds_total 0.5\n", COST_METRIC),
            Some(0.5)
        );
        assert_eq!(metric_value(exposition, "stalltop_missing_total"), None);
    }

    #[test]
    fn a_guard_that_steps_down_once_and_stays_under_holds_its_budget() {
        // 0.30 CPUs until the step at 5 s, 0.02 after, against 0.04.
        let run = one_step(5.0);
        let v = verdict(&run, 0.04);
        assert_eq!(v.steps_down, 1);
        assert_eq!(v.allowed_s, 7.0);
        assert_eq!(v.under_from_s, Some(5.0));
        assert!(v.held);
        // After the allowance, only the cheap seconds count.
        assert!((cost_cpus(&run.samples, 7.0).unwrap() - 0.02).abs() < 1e-9);
        assert!((run.mean_wall_s(7.0).unwrap() - 2.5).abs() < 1e-9);
    }

    #[test]
    fn a_guard_still_over_after_its_last_step_fails() {
        let steps = vec![
            down(5.0, "exact syscalls sampled"),
            down(10.0, "sampler at half rate"),
            down(15.0, "stacks off"),
        ];
        let run = guarded(steps, 40.0, |_| 0.05);
        let v = verdict(&run, 0.04);
        assert_eq!(v.allowed_s, 17.0);
        assert_eq!(v.under_from_s, None);
        assert!(!v.held);
    }

    #[test]
    fn a_guard_that_gets_under_later_than_it_says_fails() {
        // One step at 5 s, but the cost stays over until 12 s.
        let run = one_step(12.0);
        let v = verdict(&run, 0.04);
        assert_eq!(v.under_from_s, Some(12.0));
        assert!(!v.held);
        // A window over it near the end fails it too, however briefly.
        let run = guarded(vec![down(5.0, "exact syscalls sampled")], 5.0, |t| {
            if t < 5.0 || t == 30.0 {
                0.30
            } else {
                0.02
            }
        });
        assert_eq!(verdict(&run, 0.04).under_from_s, Some(31.0));
        assert!(!verdict(&run, 0.04).held);
    }

    #[test]
    fn a_run_too_short_to_see_a_window_after_the_reaction_time_is_not_a_pass() {
        let mut run = guarded(vec![down(5.0, "exact syscalls sampled")], 5.0, |_| 0.02);
        // The reaction time ends at 7 s: a window from 7 s needs 12 s.
        run.samples = samples(12, |_| 0.02);
        assert!(verdict(&run, 0.04).held);
        run.samples = samples(11, |_| 0.02);
        assert!(!verdict(&run, 0.04).held);
    }

    fn results(guarded_run: Sustained) -> GuardResults {
        let nothing = Sustained {
            runs: vec![WorkloadRun {
                start_s: 0.0,
                wall_s: 2.0,
            }],
            ..Sustained::default()
        };
        let unguarded = Sustained {
            runs: vec![WorkloadRun {
                start_s: 0.0,
                wall_s: 3.0,
            }],
            samples: samples(40, |_| 0.30),
            steps: Vec::new(),
        };
        GuardResults {
            seconds: 40,
            max_cpu_percent: 2.0,
            cpus: 2,
            workload: "perf bench sched messaging -g 5 -l 1000".into(),
            rounds: vec![BTreeMap::from([
                (Arm::Nothing, nothing),
                (Arm::Unguarded, unguarded),
                (Arm::Guarded, guarded_run),
            ])],
        }
    }

    #[test]
    fn the_section_shows_each_rounds_costs_steps_slowdowns_and_the_verdict() {
        let run = one_step(5.0);
        let results = results(run);
        assert!(passed(&results));
        let mut out = String::new();
        render(&mut out, &results);
        // 0.30 CPUs of 2 is 15% of the node, its process a tenth of it.
        assert!(
            out.contains("`--max-cpu 2%` (0.040 CPUs on 2 CPUs)"),
            "{out}"
        );
        assert!(
            out.contains(
                "| 1 | 15.00% [1.50%] | 2.75% | 1.00% [0.10%] | 5.0 s down: exact syscalls sampled \
                 | 5.0 s | 7 s | 1.500x | 1.286x | 1.250x | yes |"
            ),
            "{out}"
        );
        assert!(out.contains("Verdict: **pass** (1 of 1 rounds"), "{out}");
    }

    #[test]
    fn a_round_that_did_not_hold_fails_the_section() {
        let run = guarded(vec![down(5.0, "exact syscalls sampled")], 40.0, |_| 0.05);
        let results = results(run);
        assert!(!passed(&results));
        let mut out = String::new();
        render(&mut out, &results);
        assert!(out.contains("| never | 7 s |"), "{out}");
        assert!(out.contains("| **no** |"), "{out}");
        assert!(out.contains("Verdict: **fail** (0 of 1 rounds"), "{out}");
    }
}
