//! serve's series under churn: the most it exports while the churn scenario's thousands of
//! short-lived cgroups come and go, against its budget; and, under `--max-series-containers 5`,
//! ten pods that come and go and one that stays: the live one is named at once and the gone ones
//! leave after their linger.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::web;
use crate::checks::fleet;
use crate::child::Child;
use crate::scenario::{self, pods, Name};
use crate::scenario_tests::{pause, wait_for_load_to_settle};

/// The small cap of the pod churn check.
const PODS_MAX_CONTAINERS: usize = 5;
/// How soon the live pod must be named: a snapshot a second, a pruning pass every 2 s that finds
/// the gone pods, and scrapes.
const NAMED_WITHIN: Duration = Duration::from_secs(10);
/// How long after the last pod went its series may stay: serve's linger (a minute from when its
/// removal was found), the pruning pass that finds it (2 s) and a snapshot.
const GONE_AFTER: Duration = Duration::from_secs(65);
const EXIT_TIMEOUT: Duration = Duration::from_secs(20);

/// Runs the churn scenario while polling `/metrics` every second; returns the most series seen.
pub fn peak_under_churn(serve_addr: &str) -> Result<usize> {
    wait_for_load_to_settle()?;
    let stop = AtomicBool::new(false);
    let url = format!("http://{serve_addr}/metrics");
    thread::scope(|scope| {
        let poller = scope.spawn(|| {
            let mut peak = 0;
            while !stop.load(Ordering::Relaxed) {
                if let Ok(metrics) = web::get(&url) {
                    peak = peak.max(fleet::series_count(&metrics));
                }
                thread::sleep(Duration::from_secs(1));
            }
            peak
        });
        let outcome = scenario::run(Name::Churn, Name::Churn.test_duration(), || Ok(()));
        // Removals are found by a pruning pass 2 s later: keep looking past the end.
        let after = pause(Duration::from_secs(5));
        stop.store(true, Ordering::Relaxed);
        let peak = poller.join().expect("the poller does not panic");
        let outcome = outcome?;
        after?;
        let made = outcome.injected.churn.map_or(0, |c| c.cgroups);
        eprintln!("fleet: churn made {made} cgroups; serve exported at most {peak} series");
        Ok(peak)
    })
}

/// Ten pods one after another, then a live one, under a `serve --max-series-containers 5` of its
/// own: the live pod is named within `NAMED_WITHIN`, and `GONE_AFTER` later no gone pod is.
pub fn check_pod_churn(stalltop: &Path, workdir: &Path) -> Result<()> {
    let addr = web::free_address()?;
    let serve = Child::spawn(
        Command::new(stalltop).args([
            "serve",
            "--listen",
            &addr,
            "--max-series-containers",
            &PODS_MAX_CONTAINERS.to_string(),
        ]),
        "stalltop serve (5 containers)",
        &workdir.join("serve-pods.log"),
        None,
    )?;
    web::wait_for(&format!("http://{addr}/healthz"), "stalltop serve")?;
    let url = format!("http://{addr}/metrics");
    pods::run(|churned| {
        let started = Instant::now();
        loop {
            let metrics = web::get(&url)?;
            if metrics.contains(&format!("container=\"{}\"", churned.live)) {
                eprintln!(
                    "fleet: the live pod is named {:.1} s after it started, {} pods before it",
                    started.elapsed().as_secs_f64(),
                    churned.gone.len()
                );
                break;
            }
            if started.elapsed() > NAMED_WITHIN {
                bail!(
                    "the live pod {} is not named {NAMED_WITHIN:?} after it started: the \
                     places still go to gone pods",
                    churned.live
                );
            }
            pause(Duration::from_millis(500))?;
        }
        pause(GONE_AFTER.saturating_sub(started.elapsed()))?;
        let metrics = web::get(&url)?;
        std::fs::write(workdir.join("metrics-pods.txt"), &metrics)?;
        fleet::churned_labels(&metrics, &churned.live, &churned.gone).map_err(anyhow::Error::msg)
    })
    .context("pod churn under --max-series-containers 5")?;
    serve.stop(EXIT_TIMEOUT)
}
