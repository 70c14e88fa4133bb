//! The bench's cost guard section, measured: the heaviest workload run
//! back to back for a fixed time under nothing attached, `stalltop serve
//! --syscalls exact --max-cpu off` and the same with a budget; stalltop's
//! cost read from its own /metrics every 5 s, its steps from its stderr.
//! The arithmetic, the verdict and the markdown are guard_report.rs's.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::guard_report::{
    metric_value, parse_step, Arm, GuardResults, Sample, Step, Sustained, WorkloadRun, ARMS,
    COST_METRIC,
};
use super::probe_stats::process_cpu_s;
use super::tool::{self, Attached};
use super::workload::Workload;
use crate::fleet_test::web;
use crate::interrupt;

/// The heaviest of the bench's workloads for stalltop in exact mode: about
/// 4M syscalls and 70k switches a run (docs/performance.md).
const WORKLOAD: Workload = Workload::Messaging;
/// How often stalltop's /metrics is read: once per window of the guard's.
/// A scrape costs serve about 9 ms of CPU here; once a second that would
/// be a quarter of a 2% budget on 2 CPUs.
const SCRAPE_EVERY: Duration = Duration::from_secs(5);

/// The section: `rounds` rounds of the three arms in a rotating order,
/// each holding the workload for `seconds`, the guard's budget
/// `max_cpu_percent` of the node.
pub fn measure(
    stalltop: &Path,
    rounds: u32,
    seconds: u64,
    max_cpu_percent: f64,
    cpus: usize,
) -> Result<GuardResults> {
    let mut results = GuardResults {
        seconds,
        max_cpu_percent,
        cpus,
        workload: WORKLOAD.name(),
        rounds: Vec::new(),
    };
    for round in 0..rounds {
        let mut arms = BTreeMap::new();
        for i in 0..ARMS.len() {
            let arm = ARMS[(i + round as usize) % ARMS.len()];
            let max_cpu = match arm {
                Arm::Nothing => None,
                Arm::Unguarded => Some("off".to_string()),
                Arm::Guarded => Some(format!("{max_cpu_percent}%")),
            };
            let run = sustain(stalltop, max_cpu.as_deref(), seconds)
                .with_context(|| format!("the cost guard section, {}", arm.name()))?;
            let cost = super::guard_report::cost_cpus(&run.samples, 0.0);
            eprintln!(
                "guard round {}/{rounds}: {:<22} {} runs, mean {:.3}s{}{}",
                round + 1,
                arm.name(),
                run.runs.len(),
                run.mean_wall_s(0.0).unwrap_or(f64::NAN),
                cost.map_or(String::new(), |c| format!(", stalltop {c:.3} CPUs")),
                run.steps
                    .iter()
                    .map(|s| format!("; {:.1} s: {}", s.at_s, s.what))
                    .collect::<String>()
            );
            arms.insert(arm, run);
        }
        results.rounds.push(arms);
    }
    Ok(results)
}

/// The workload back to back for `seconds`, under `stalltop serve` with
/// `--max-cpu max_cpu` (or nothing attached when None).
fn sustain(stalltop: &Path, max_cpu: Option<&str>, seconds: u64) -> Result<Sustained> {
    let listen = web::free_address()?;
    let tool = max_cpu
        .map(|budget| tool::serve(stalltop, &listen, budget))
        .transpose()?;
    let start = Instant::now();
    let scraper = tool
        .as_ref()
        .map(|t| Scraper::start(format!("http://{listen}/metrics"), t.pid(), start));
    let runs = hold(start, Duration::from_secs(seconds));
    let samples = scraper.map(Scraper::finish).unwrap_or_default();
    let said = tool.map(Attached::stop).transpose();
    let runs = runs?;
    let steps = said?
        .unwrap_or_default()
        .into_iter()
        .filter_map(|said| {
            let (down, what) = parse_step(&said.text)?;
            Some(Step {
                at_s: said.at.saturating_duration_since(start).as_secs_f64(),
                down,
                what,
            })
        })
        .collect();
    if max_cpu.is_some() && samples.len() < 2 {
        bail!("stalltop's {COST_METRIC} could not be read from its /metrics");
    }
    Ok(Sustained {
        runs,
        samples,
        steps,
    })
}

/// Runs of the workload, one after the other, until `length` has passed
/// since `start`.
fn hold(start: Instant, length: Duration) -> Result<Vec<WorkloadRun>> {
    let mut runs = Vec::new();
    while start.elapsed() < length {
        if interrupt::requested() {
            bail!("interrupted");
        }
        let start_s = start.elapsed().as_secs_f64();
        let outcome = WORKLOAD.wall_time()?;
        runs.push(WorkloadRun {
            start_s,
            wall_s: outcome.wall_s,
        });
    }
    Ok(runs)
}

/// Reads stalltop's cost every `SCRAPE_EVERY` on a thread of its own, until told
/// to finish.
struct Scraper {
    finish: Arc<AtomicBool>,
    thread: thread::JoinHandle<Vec<Sample>>,
}

impl Scraper {
    fn start(url: String, pid: u32, start: Instant) -> Scraper {
        let finish = Arc::new(AtomicBool::new(false));
        let told = Arc::clone(&finish);
        let thread = thread::spawn(move || {
            let mut samples = Vec::new();
            let mut next = start;
            loop {
                let got = sample(&url, pid, start);
                // serve publishes its first metrics just after it says it
                // serves: the first sample is taken as soon as they are.
                let first_missing = got.is_none() && samples.is_empty();
                samples.extend(got);
                if told.load(Ordering::Relaxed) {
                    return samples;
                }
                if first_missing {
                    thread::sleep(Duration::from_millis(50));
                    continue;
                }
                next += SCRAPE_EVERY;
                while Instant::now() < next && !told.load(Ordering::Relaxed) {
                    thread::sleep(Duration::from_millis(20));
                }
            }
        });
        Scraper { finish, thread }
    }

    /// The samples, with a last one taken now.
    fn finish(self) -> Vec<Sample> {
        self.finish.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

/// stalltop's cost now: None while its /metrics does not have it yet.
fn sample(url: &str, pid: u32, start: Instant) -> Option<Sample> {
    let at_s = start.elapsed().as_secs_f64();
    let exposition = web::get(url).ok()?;
    Some(Sample {
        at_s,
        cost_s: metric_value(&exposition, COST_METRIC)?,
        process_s: process_cpu_s(pid).ok()?,
    })
}
