//! `cargo xtask fleet-test`: `stalltop serve` as a node of a fleet runs it, checked with the
//! tools a fleet has. A real Prometheus (Debian's) scrapes it every second with the project's
//! rules loaded (deploy/prometheus/stalltop-rules.yaml) through real scenarios: PromQL over its
//! histogram must give the noisy neighbour's victim its p99, and its wait by cause must put it
//! behind the other cgroup; `promtool check metrics` must accept what it serves; the throttle scenario's
//! real throttles must make the flight recorder write a readable recording with the seconds
//! before the stall, and so must `POST /dump`; the ksoftirqd scenario fills the softirq
//! panels; the churn scenario's thousands of cgroups must keep its series within budget. Then
//! every query of the Grafana dashboard (deploy/grafana/stalltop.json) and every recording rule
//! must return data and every rule evaluate without error. SIGTERM must end it with exit 0 and
//! nothing left attached. Last, under `--max-series-containers 5`, pods that came and went must
//! leave /metrics to the one still running.

mod dashboard;
mod prometheus;
mod series;
pub mod web;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{self, Command};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use serde_json::Value;

use crate::checks::contamination;
use crate::checks::fleet;
use crate::checks::report::Report;
use crate::child::Child;
use crate::interrupt;
use crate::scenario::{self, Name, Outcome};
use crate::scenario_tests::{pause, stalltop_binary, wait_for_load_to_settle};
use prometheus::{now_unix_seconds, Prometheus};

const NOISY_DURATION: Duration = Duration::from_secs(10);
const THROTTLE_DURATION: Duration = Duration::from_secs(5);
const KSOFTIRQD_DURATION: Duration = Duration::from_secs(5);
/// serve's flight settings: `--keep` and `--trigger`. The throttle scenario's waits average
/// about 40 ms (a 15 ms / 100 ms quota; 45 ms in a CI run that had none of 50 ms, so a 50 ms
/// trigger made no recording there): 20 ms catches each of its runs.
const KEEP: &str = "15s";
const TRIGGER_NS: u64 = 20_000_000;
const DUMP_TIMEOUT: Duration = Duration::from_secs(20);
const EXIT_TIMEOUT: Duration = Duration::from_secs(20);
/// A contaminated noisy-neighbour run is retried up to this many times.
const RETRIES: u32 = 3;

pub fn main() -> Result<()> {
    interrupt::install()?;
    let stalltop = stalltop_binary()?;
    let workdir = std::env::temp_dir().join(format!("stalltop-fleet-{}", process::id()));
    fs::create_dir_all(&workdir).with_context(|| format!("mkdir {}", workdir.display()))?;
    run(&stalltop, &workdir).with_context(|| format!("logs kept in {}", workdir.display()))?;
    series::check_pod_churn(&stalltop, &workdir)
        .with_context(|| format!("logs kept in {}", workdir.display()))?;
    eprintln!("fleet: pods that came and went left /metrics to the live one: PASS");
    ensure_nothing_attached()?;
    fs::remove_dir_all(&workdir).with_context(|| format!("rm -r {}", workdir.display()))?;
    println!("fleet test: PASS");
    Ok(())
}

fn run(stalltop: &Path, workdir: &Path) -> Result<()> {
    let serve_addr = web::free_address()?;
    let flight_dir = workdir.join("flight");
    let serve = Child::spawn(
        Command::new(stalltop).args([
            "serve",
            "--listen",
            &serve_addr,
            "--flight-dir",
            flight_dir.to_str().context("non-UTF-8 temp dir")?,
            "--keep",
            KEEP,
            "--trigger",
            &format!("{}ms", TRIGGER_NS / 1_000_000),
        ]),
        "stalltop serve",
        &workdir.join("serve.log"),
        None,
    )?;
    web::wait_for(&format!("http://{serve_addr}/healthz"), "stalltop serve")?;
    let rules = crate::workspace::workspace_root().join("deploy/prometheus/stalltop-rules.yaml");
    let prom = Prometheus::start(workdir, &serve_addr, &rules)?;
    let start = now_unix_seconds();

    check_noisy_neighbour(&prom, &serve_addr)?;
    eprintln!("fleet: Prometheus p99 and wait by cause, /why: PASS");

    let metrics = web::get(&format!("http://{serve_addr}/metrics"))?;
    prometheus::promtool_check(&metrics, workdir)?;
    eprintln!("fleet: promtool check metrics: PASS");

    check_flight_recorder(&flight_dir, &serve_addr, stalltop, workdir)?;
    eprintln!("fleet: flight recordings: PASS");

    wait_for_load_to_settle()?;
    scenario::run(Name::Ksoftirqd, KSOFTIRQD_DURATION, || Ok(()))?;

    let peak = series::peak_under_churn(&serve_addr)?;
    let cpus = online_cpus()?;
    fleet::series_budget(peak, fleet::DEFAULT_MAX_CONTAINERS, cpus).map_err(anyhow::Error::msg)?;
    eprintln!("fleet: {peak} series at most under churn, within the budget for {cpus} CPUs: PASS");

    // Two scrapes and a rule evaluation after the last scenario.
    pause(Duration::from_secs(3))?;
    let end = now_unix_seconds();
    dashboard::check(&prom, &dashboard::load()?, (start, end))?;
    eprintln!("fleet: the dashboard's queries and the rules on real data: PASS");

    let status = fs::read_to_string(format!("/proc/{}/status", serve.id()))?;
    let peak = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .unwrap_or("VmHWM: ?");
    eprintln!(
        "fleet: stalltop serve's peak resident memory: {}",
        peak.trim_start_matches("VmHWM:").trim()
    );
    serve.stop(EXIT_TIMEOUT)?;
    ensure_nothing_attached()?;
    eprintln!("fleet: SIGTERM, exit 0, nothing attached: PASS");
    Ok(())
}

/// The noisy-neighbour scenario under the scrapes; retried when another workload contaminated
/// it.
fn check_noisy_neighbour(prom: &Prometheus, serve_addr: &str) -> Result<()> {
    let mut why = String::new();
    for attempt in 1..=RETRIES + 1 {
        wait_for_load_to_settle()?;
        let outcome = scenario::run(Name::NoisyNeighbour, NOISY_DURATION, || Ok(()))?;
        let contamination = &outcome.contamination;
        if let Some(reason) = contamination::other_workload(contamination) {
            eprintln!("fleet: noisy-neighbour attempt {attempt} contaminated ({reason})");
            why = reason;
            pause(Duration::from_secs(5))?;
            continue;
        }
        // Two scrapes after the end, so the window's last counts are in.
        pause(Duration::from_secs(3))?;
        check_victim_in_prometheus(prom, &outcome)?;
        return check_victim_in_why(serve_addr, &outcome);
    }
    bail!(
        "all {} noisy-neighbour runs were contaminated, the last by {why}",
        RETRIES + 1
    )
}

/// The noisy-neighbour scenario's victim cgroup.
fn victim_cgroup(outcome: &Outcome) -> Result<&str> {
    outcome
        .measured
        .cgroups
        .victim
        .as_deref()
        .context("no victim cgroup")
}

fn check_victim_in_prometheus(prom: &Prometheus, outcome: &Outcome) -> Result<()> {
    let victim = victim_cgroup(outcome)?;
    let truth = outcome.measured.victim.context("no victim stats")?;
    let at = unix_seconds(outcome.end_ns) + 2.0;
    let range = format!(
        "{}s",
        (outcome.end_ns - outcome.start_ns).div_ceil(1_000_000_000) + 2
    );
    let p99 = prom.scalar(
        &format!(
            "histogram_quantile(0.99, sum by (le) \
             (increase(stalltop_runq_wait_seconds_bucket{{container=\"{victim}\"}}[{range}])))"
        ),
        at,
    )?;
    let total = prom.scalar(
        &format!(
            "sum(increase(stalltop_runq_wait_seconds_sum{{container=\"{victim}\"}}[{range}]))"
        ),
        at,
    )?;
    let other = prom.scalar(
        &format!(
            "sum(increase(stalltop_runq_wait_cause_seconds_total{{container=\"{victim}\",\
             cause=\"other\"}}[{range}]))"
        ),
        at,
    )?;
    eprintln!(
        "fleet: Prometheus: victim p99 {:.3} ms (lateness p99 {:.3} ms), waited {total:.3} s, \
         {other:.3} s of it behind another cgroup",
        p99 * 1e3,
        truth.lateness.p99_ns as f64 / 1e6
    );
    fleet::victim_p99(p99, truth.lateness.p99_ns)
        .and_then(|()| fleet::other_share(other, total))
        .map_err(|e| anyhow::anyhow!("Prometheus: {e}"))
}

/// serve's `/why` (the last minute, the scenario in it) puts the victim's wait behind the other
/// cgroup, as Prometheus does.
fn check_victim_in_why(serve_addr: &str, outcome: &Outcome) -> Result<()> {
    let victim = victim_cgroup(outcome)?;
    let why: Value = serde_json::from_str(&web::get(&format!("http://{serve_addr}/why"))?)?;
    let rows: Vec<&Value> = why["runq"]
        .as_array()
        .context("/why has no runq rows")?
        .iter()
        .filter(|row| row["cgroup"] == victim)
        .collect();
    ensure!(!rows.is_empty(), "/why has no row of {victim}: {why}");
    let ns = |v: &Value| v.as_u64().unwrap_or(0) as f64;
    let total: f64 = rows.iter().map(|row| ns(&row["total_ns"])).sum();
    let other: f64 = rows
        .iter()
        .flat_map(|row| row["why"]["causes"].as_array().into_iter().flatten())
        .filter(|cause| cause["cause"] == "other_cgroup")
        .map(|cause| ns(&cause["ns"]))
        .sum();
    eprintln!(
        "fleet: /why: {victim} waited {:.3} s, {:.3} s of it behind another cgroup",
        total / 1e9,
        other / 1e9
    );
    fleet::other_share(other / 1e9, total / 1e9).map_err(|e| anyhow::anyhow!("/why: {e}"))
}

/// The throttle scenario's stalls, then `POST /dump`: each makes a recording `report` reads.
fn check_flight_recorder(
    flight_dir: &Path,
    serve_addr: &str,
    stalltop: &Path,
    workdir: &Path,
) -> Result<()> {
    let before = recordings(flight_dir)?;
    wait_for_load_to_settle()?;
    scenario::run(Name::Throttle, THROTTLE_DURATION, || Ok(()))?;
    let triggered = wait_for_new_recording(flight_dir, &before)?;
    let triggered = report(stalltop, &triggered, workdir)?;
    fleet::flight_recording(&triggered, TRIGGER_NS).map_err(anyhow::Error::msg)?;

    let before = recordings(flight_dir)?;
    let answer = web::post(&format!("http://{serve_addr}/dump"))?;
    ensure!(answer.contains("dump planned"), "POST /dump: {answer}");
    let asked = wait_for_new_recording(flight_dir, &before)?;
    report(stalltop, &asked, workdir)?;
    Ok(())
}

fn recordings(dir: &Path) -> Result<Vec<PathBuf>> {
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let mut files: Vec<PathBuf> = fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "stl"))
        .collect();
    files.sort();
    Ok(files)
}

fn wait_for_new_recording(dir: &Path, before: &[PathBuf]) -> Result<PathBuf> {
    let deadline = Instant::now() + DUMP_TIMEOUT;
    loop {
        if let Some(new) = recordings(dir)?.into_iter().find(|p| !before.contains(p)) {
            // Written in one go once due; a second more lets the writer finish.
            pause(Duration::from_secs(1))?;
            return Ok(new);
        }
        if Instant::now() > deadline {
            bail!(
                "no new flight recording in {} after {DUMP_TIMEOUT:?}",
                dir.display()
            );
        }
        pause(Duration::from_millis(500))?;
    }
}

fn report(stalltop: &Path, recording: &Path, workdir: &Path) -> Result<Report> {
    let name = recording.file_name().context("recording name")?;
    let json = workdir.join(name).with_extension("report.json");
    Child::spawn(
        Command::new(stalltop)
            .arg("report")
            .arg(recording)
            .arg("--json"),
        "stalltop report",
        &workdir.join("report.log"),
        Some(&json),
    )?
    .wait_for_exit(Duration::from_secs(60))?;
    let text = fs::read_to_string(&json)?;
    Report::parse(&text).map_err(anyhow::Error::msg)
}

/// How long the kernel may take to free an exited serve's programs: their
/// links go after an RCU grace period (tasks-trace RCU for tracepoints), so
/// they can still be listed just after the process is reaped.
const PROGRAMS_FREED_WITHIN: Duration = Duration::from_secs(5);

/// No program of stalltop's is loaded once serve exited (and the kernel
/// had PROGRAMS_FREED_WITHIN to free them).
fn ensure_nothing_attached() -> Result<()> {
    let deadline = Instant::now() + PROGRAMS_FREED_WITHIN;
    loop {
        let ours = our_programs()?;
        if ours.is_empty() {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "BPF programs left {} s after serve exited: {ours:?}",
            PROGRAMS_FREED_WITHIN.as_secs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The names of stalltop's programs loaded now.
fn our_programs() -> Result<Vec<String>> {
    let output = Command::new("bpftool")
        .args(["prog", "show", "--json"])
        .output()
        .context("running bpftool")?;
    let programs: Value = serde_json::from_slice(&output.stdout)?;
    Ok(programs
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["name"].as_str())
        .filter(|name| name.starts_with("btf_") || name.starts_with("raw_"))
        .map(str::to_string)
        .collect())
}

/// CPUs online now (the per-CPU part of the series budget).
fn online_cpus() -> Result<usize> {
    let text = fs::read_to_string("/sys/devices/system/cpu/online")?;
    let mut cpus = 0;
    for range in text.trim().split(',') {
        let (first, last) = range.split_once('-').unwrap_or((range, range));
        cpus += last.parse::<usize>()? - first.parse::<usize>()? + 1;
    }
    Ok(cpus)
}

/// Unix time of a CLOCK_MONOTONIC time.
fn unix_seconds(monotonic_ns: u64) -> f64 {
    let now_mono = scenario::monotonic_ns() as f64 / 1e9;
    now_unix_seconds() - now_mono + monotonic_ns as f64 / 1e9
}
