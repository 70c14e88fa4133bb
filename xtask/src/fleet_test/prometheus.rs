//! The fleet test's Prometheus: Debian's server scraping `stalltop serve` every second with
//! the project's rules loaded, queried over its HTTP API; and promtool's check of an exposition.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, ensure, Context, Result};
use serde_json::Value;

use super::web::{self, START_TIMEOUT};
use crate::child::Child;
use crate::scenario_tests::pause;

/// The `node` label the scrape config gives serve's series, as the ServiceMonitor does.
pub const NODE: &str = "fleet-test";
/// The scrape job: the name deploy/prometheus/stalltop-rules.yaml's StalltopDown expects.
const JOB: &str = "stalltop";

pub struct Prometheus {
    base: String,
    _server: Child,
}

/// One rule as Prometheus evaluates it.
pub struct RuleState {
    pub name: String,
    /// "recording" or "alerting".
    pub kind: String,
    /// Its PromQL.
    pub query: String,
    pub health: String,
    pub last_error: String,
}

impl Prometheus {
    /// Starts Prometheus on a free port, scraping `target` every second and evaluating `rules`
    /// every second, and waits until it has scraped `target` once.
    pub fn start(workdir: &Path, target: &str, rules: &Path) -> Result<Prometheus> {
        let listen = web::free_address()?;
        let config = workdir.join("prometheus.yml");
        fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 rule_files:\n  - '{}'\n\
                 scrape_configs:\n  - job_name: {JOB}\n    static_configs:\n      \
                 - targets: ['{target}']\n        labels:\n          node: {NODE}\n",
                rules.display()
            ),
        )?;
        let server = Child::spawn(
            Command::new("prometheus")
                .arg(format!("--config.file={}", config.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    workdir.join("tsdb").display()
                ))
                .arg(format!("--web.listen-address={listen}"))
                .arg("--storage.tsdb.retention.time=1h")
                .arg("--log.level=warn"),
            "prometheus",
            &workdir.join("prometheus.log"),
            None,
        )?;
        web::wait_for(&format!("http://{listen}/-/ready"), "Prometheus")?;
        let prometheus = Prometheus {
            base: format!("http://{listen}"),
            _server: server,
        };
        prometheus.wait_until_scraped()?;
        Ok(prometheus)
    }

    /// An instant query's single value at `at` (Unix seconds).
    pub fn scalar(&self, query: &str, at: f64) -> Result<f64> {
        let result = self.query(query, at)?;
        let value = result[0]["value"][1]
            .as_str()
            .with_context(|| format!("no value for {query}: {result}"))?;
        value.parse().with_context(|| format!("value {value}"))
    }

    /// An instant query's samples at `at`: each series' labels and value.
    pub fn vector(&self, query: &str, at: f64) -> Result<Vec<(Value, f64)>> {
        let result = self.query(query, at)?;
        Ok(result
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| {
                let value = s["value"][1].as_str()?.parse().ok()?;
                Some((s["metric"].clone(), value))
            })
            .collect())
    }

    /// How many finite values a range query returns over `[start, end]` (Unix seconds).
    pub fn finite_values(&self, query: &str, start: f64, end: f64, step: f64) -> Result<usize> {
        let body = ureq::get(format!("{}/api/v1/query_range", self.base))
            .query("query", query)
            .query("start", format!("{start:.3}"))
            .query("end", format!("{end:.3}"))
            .query("step", format!("{step}"))
            .call()
            .with_context(|| format!("Prometheus range query {query}"))?
            .body_mut()
            .read_to_string()?;
        let result = data(&body, query)?["result"].clone();
        Ok(result
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|series| series["values"].as_array().cloned().unwrap_or_default())
            .filter_map(|v| v[1].as_str()?.parse::<f64>().ok())
            .filter(|v| v.is_finite())
            .count())
    }

    /// The names of the metrics of stalltop's that Prometheus holds samples of between `start`
    /// and `end`.
    pub fn stalltop_metric_names(&self, start: f64, end: f64) -> Result<BTreeSet<String>> {
        let body = ureq::get(format!("{}/api/v1/label/__name__/values", self.base))
            .query("match[]", "{__name__=~\"stalltop_.+\"}")
            .query("start", format!("{start:.3}"))
            .query("end", format!("{end:.3}"))
            .call()
            .context("Prometheus metric names")?
            .body_mut()
            .read_to_string()?;
        Ok(data(&body, "metric names")?
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| n.as_str().map(str::to_owned))
            .collect())
    }

    /// Every rule Prometheus loaded, with its last evaluation's health.
    pub fn rules(&self) -> Result<Vec<RuleState>> {
        let body = ureq::get(format!("{}/api/v1/rules", self.base))
            .call()
            .context("Prometheus rules")?
            .body_mut()
            .read_to_string()?;
        let groups = data(&body, "rules")?["groups"].clone();
        Ok(groups
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .map(|r| RuleState {
                name: r["name"].as_str().unwrap_or("").to_owned(),
                kind: r["type"].as_str().unwrap_or("").to_owned(),
                query: r["query"].as_str().unwrap_or("").to_owned(),
                health: r["health"].as_str().unwrap_or("").to_owned(),
                last_error: r["lastError"].as_str().unwrap_or("").to_owned(),
            })
            .collect())
    }

    fn query(&self, query: &str, at: f64) -> Result<Value> {
        let body = ureq::get(format!("{}/api/v1/query", self.base))
            .query("query", query)
            .query("time", format!("{at:.3}"))
            .call()
            .with_context(|| format!("Prometheus query {query}"))?
            .body_mut()
            .read_to_string()?;
        Ok(data(&body, query)?["result"].clone())
    }

    /// Waits until Prometheus has scraped serve successfully.
    fn wait_until_scraped(&self) -> Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(up) = self.scalar(&format!("up{{job=\"{JOB}\"}}"), now_unix_seconds()) {
                if up == 1.0 {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                bail!("Prometheus did not scrape stalltop serve within {START_TIMEOUT:?}");
            }
            pause(Duration::from_millis(500))?;
        }
    }
}

/// The `data` of a successful API answer.
fn data(body: &str, what: &str) -> Result<Value> {
    let answer: Value = serde_json::from_str(body).with_context(|| format!("{what}: {body}"))?;
    ensure!(answer["status"] == "success", "{what}: {body}");
    Ok(answer["data"].clone())
}

/// `promtool check metrics` accepts `metrics` (the text format) without a word.
pub fn promtool_check(metrics: &str, workdir: &Path) -> Result<()> {
    let path = workdir.join("metrics.txt");
    fs::write(&path, metrics)?;
    let output = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(fs::File::open(&path)?)
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .output()
        .context("running promtool")?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    ensure!(
        output.status.success() && said.trim().is_empty(),
        "promtool check metrics ({}): {said}",
        output.status
    );
    Ok(())
}

pub fn now_unix_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
