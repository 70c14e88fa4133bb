//! Every query of the Grafana dashboard (deploy/grafana/stalltop.json: each panel's targets and
//! its annotations) and every rule of deploy/prometheus/stalltop-rules.yaml, run against the
//! real Prometheus that scraped `stalltop serve` through the scenarios: each must return data.
//! A query may wait only on a metric listed in `PENDING`, while serve does not export it yet.

use std::collections::BTreeSet;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use super::prometheus::{Prometheus, NODE};

/// Metrics the dashboard and rules use that serve may not export yet, each with the work that
/// brings it: a query on them is reported as pending, not run, until serve exports them; from
/// then on it must return data like any other.
pub const PENDING: [(&str, &str); 0] = [];

/// Grafana's variables as the test sets them: every container, the rate window of a 1 s scrape.
const RATE_INTERVAL: &str = "10s";
const STEP_SECONDS: f64 = 2.0;

/// One query of the dashboard or of a recording rule.
#[derive(Debug, PartialEq)]
pub struct Query {
    /// The panel title and target, the annotation's name, or the recording rule.
    pub what: String,
    pub expr: String,
    /// A table's instant query (over the dashboard's whole range), not a range query.
    pub instant: bool,
    /// The metrics of serve's it depends on (a recording rule's: those its rule reads).
    pub reads: BTreeSet<String>,
}

impl Query {
    fn new(what: String, expr: &str, instant: bool) -> Query {
        Query {
            what,
            reads: metric_names(expr),
            expr: expr.to_owned(),
            instant,
        }
    }
}

/// The queries of every panel (rows hold none) and of every Prometheus annotation.
pub fn queries(dashboard: &Value) -> Vec<Query> {
    let mut found = Vec::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = target["expr"].as_str() {
                let what = format!(
                    "panel {:?} target {}",
                    panel["title"].as_str().unwrap_or("?"),
                    target["refId"].as_str().unwrap_or("?")
                );
                found.push(Query::new(what, expr, target["instant"] == true));
            }
        }
    }
    for annotation in dashboard["annotations"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if let Some(expr) = annotation["expr"].as_str() {
            let what = format!(
                "annotation {:?}",
                annotation["name"].as_str().unwrap_or("?")
            );
            found.push(Query::new(what, expr, false));
        }
    }
    found
}

/// `expr` with Grafana's variables set as the test sets them; `range_seconds` is the whole run.
pub fn substitute(expr: &str, range_seconds: u64) -> Result<String> {
    let set = expr
        .replace("$__rate_interval", RATE_INTERVAL)
        .replace("$__range", &format!("{range_seconds}s"))
        .replace("$node", NODE)
        .replace("$container", ".*");
    if set.contains('$') {
        bail!("a variable the test does not know in {expr}");
    }
    Ok(set)
}

/// The names of stalltop's metrics `expr` reads (not recording rules, `level:stalltop_x:op`).
pub fn metric_names(expr: &str) -> BTreeSet<String> {
    let bytes = expr.as_bytes();
    let name_char = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut names = BTreeSet::new();
    let mut at = 0;
    while let Some(found) = expr[at..].find("stalltop_") {
        let start = at + found;
        let mut end = start;
        while end < bytes.len() && name_char(bytes[end]) {
            end += 1;
        }
        let preceded = start > 0 && (name_char(bytes[start - 1]) || bytes[start - 1] == b':');
        let followed = end < bytes.len() && bytes[end] == b':';
        if !preceded && !followed {
            names.insert(expr[start..end].to_owned());
        }
        at = end;
    }
    names
}

/// What became of one query.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// It returned this many finite values.
    Data(usize),
    /// It waits on pending metrics serve does not export yet.
    Pending(Vec<String>),
}

/// Runs `query` unless it waits on a pending metric; fails when it reads a metric that serve
/// did not export and is not pending, or returns nothing.
fn run(
    prometheus: &Prometheus,
    query: &Query,
    exported: &BTreeSet<String>,
    (start, end): (f64, f64),
) -> Result<Verdict> {
    let missing: Vec<String> = query
        .reads
        .iter()
        .filter(|name| !exported.contains(*name))
        .cloned()
        .collect();
    if !missing.is_empty() {
        if missing.iter().all(|name| is_pending(name)) {
            return Ok(Verdict::Pending(missing));
        }
        bail!(
            "{} reads {missing:?}, which serve did not export during the run",
            query.what
        );
    }
    let expr = substitute(&query.expr, (end - start).ceil() as u64)?;
    let values = if query.instant {
        prometheus
            .vector(&expr, end)?
            .iter()
            .filter(|(_, v)| v.is_finite())
            .count()
    } else {
        prometheus.finite_values(&expr, start, end, STEP_SECONDS)?
    };
    if values == 0 {
        bail!("{} returned no data: {expr}", query.what);
    }
    Ok(Verdict::Data(values))
}

fn is_pending(name: &str) -> bool {
    PENDING.iter().any(|(p, _)| *p == name)
}

/// Every dashboard query, and every rule Prometheus loaded, over the run `[start, end]` (Unix
/// seconds): rules evaluate without error, recording rules and dashboard queries return data.
pub fn check(prometheus: &Prometheus, dashboard: &Value, window: (f64, f64)) -> Result<()> {
    let exported = prometheus.stalltop_metric_names(window.0, window.1)?;
    let mut queries = queries(dashboard);
    for rule in prometheus.rules()? {
        if rule.health != "ok" {
            bail!(
                "rule {} is {:?} in the real Prometheus: {}",
                rule.name,
                rule.health,
                rule.last_error
            );
        }
        if rule.kind == "recording" {
            // Its own series holds its data; it waits on what its rule reads.
            queries.push(Query {
                what: format!("recording rule {}", rule.name),
                expr: rule.name,
                instant: false,
                reads: metric_names(&rule.query),
            });
        }
    }
    let read: BTreeSet<&String> = queries.iter().flat_map(|q| &q.reads).collect();
    for (name, _) in PENDING {
        if !read.iter().any(|r| *r == name) {
            bail!("PENDING lists {name}, which neither the dashboard nor a rule reads");
        }
    }
    let mut pending = 0;
    for query in &queries {
        match run(prometheus, query, &exported, window)? {
            Verdict::Data(n) => eprintln!("fleet: {}: {n} values", query.what),
            Verdict::Pending(names) => {
                pending += 1;
                let why: Vec<&str> = PENDING
                    .iter()
                    .filter(|(p, _)| names.iter().any(|n| n == p))
                    .map(|(_, why)| *why)
                    .collect();
                eprintln!(
                    "fleet: PENDING {}: waits for {names:?} ({}), not exported yet",
                    query.what,
                    why.join(", ")
                );
            }
        }
    }
    eprintln!(
        "fleet: {} queries of the dashboard and the rules returned data, {pending} pending",
        queries.len() - pending
    );
    Ok(())
}

/// deploy/grafana/stalltop.json.
pub fn load() -> Result<Value> {
    let path = crate::workspace::workspace_root().join("deploy/grafana/stalltop.json");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parse {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_names_leave_out_recording_rules_and_labels() {
        let expr = "sum by (node) (rate(stalltop_stall_seconds_total{kind=\"x\"}[5m])) \
                    / on (node) node:stalltop_cpu:rate5m + stalltop_cfs_quota_cpus";
        assert_eq!(
            metric_names(expr),
            BTreeSet::from([
                "stalltop_cfs_quota_cpus".to_string(),
                "stalltop_stall_seconds_total".to_string()
            ])
        );
    }

    #[test]
    fn variables_are_set_and_unknown_ones_refused() {
        assert_eq!(
            substitute(
                "rate(x{node=~\"$node\", container=~\"$container\"}[$__rate_interval]) [$__range]",
                90
            )
            .unwrap(),
            format!("rate(x{{node=~\"{NODE}\", container=~\".*\"}}[10s]) [90s]")
        );
        assert!(substitute("rate(x[$__interval])", 1).is_err());
    }

    #[test]
    fn the_dashboard_has_a_query_for_each_panel_and_its_annotation() {
        let dashboard = load().unwrap();
        let queries = queries(&dashboard);
        let panels = dashboard["panels"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["type"] != "row")
            .count();
        assert!(queries.len() > panels, "{} queries", queries.len());
        assert!(queries.iter().any(|q| q.what.starts_with("annotation")));
        assert!(queries.iter().any(|q| q.instant));
        for q in &queries {
            substitute(&q.expr, 60).unwrap();
            assert!(!metric_names(&q.expr).is_empty(), "{q:?}");
        }
    }
}
