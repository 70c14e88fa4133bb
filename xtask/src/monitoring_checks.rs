//! Checks of what an operator installs beside the DaemonSet: the alert and recording rules
//! (deploy/prometheus/), their unit tests and runbook (docs/runbook.md), the Grafana dashboard
//! (deploy/grafana/stalltop.json) and the kustomization that applies them (deploy/). Tests only:
//! they read the files. promtool runs the rules' unit tests (`cargo xtask test`), and the fleet
//! test runs the rules and the dashboard's queries against a real Prometheus.

use std::collections::BTreeSet;
use std::fs;

use serde_json::Value;

use crate::manifest_checks::rules_file;
use crate::workspace::workspace_root;

fn yaml(relative: &str) -> Value {
    let path = workspace_root().join(relative);
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn list(value: &Value) -> &[Value] {
    value.as_array().map_or(&[], Vec::as_slice)
}

/// Every alert of the rules file, with its annotations.
fn alerts(rules: &Value) -> Vec<&Value> {
    list(&rules["groups"])
        .iter()
        .flat_map(|g| list(&g["rules"]))
        .filter(|r| r["alert"].is_string())
        .collect()
}

/// The labels of a promtool input series, `name{a="b",c="d"}`.
fn series_labels(series: &str) -> BTreeSet<(String, String)> {
    let Some((_, rest)) = series.split_once('{') else {
        return BTreeSet::new();
    };
    rest.trim_end_matches('}')
        .split(',')
        .filter_map(|pair| {
            let (key, value) = pair.split_once('=')?;
            Some((
                key.trim().to_owned(),
                value.trim().trim_matches('"').to_owned(),
            ))
        })
        .collect()
}

/// What identifies the thing an alert is about: its node, container, CPU or scrape target.
const SUBJECT: [&str; 4] = ["node", "container", "cpu", "instance"];

fn subject(labels: &BTreeSet<(String, String)>) -> BTreeSet<(String, String)> {
    labels
        .iter()
        .filter(|(k, _)| SUBJECT.contains(&k.as_str()))
        .cloned()
        .collect()
}

/// For one alert: whether a test fires it, and whether a test feeds series about another
/// subject (node, container, CPU, target) that it must stay silent on.
fn tested(tests: &Value, alert: &str) -> (bool, bool) {
    let (mut fires, mut silent) = (false, false);
    for case in list(&tests["tests"]) {
        let evals: Vec<&Value> = list(&case["alert_rule_test"])
            .iter()
            .filter(|t| t["alertname"] == alert)
            .collect();
        let expected: Vec<BTreeSet<(String, String)>> = evals
            .iter()
            .flat_map(|t| list(&t["exp_alerts"]))
            .map(|a| {
                let labels = a["exp_labels"].as_object().into_iter().flatten();
                subject(
                    &labels
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_owned()))
                        .collect(),
                )
            })
            .collect();
        if expected.is_empty() {
            continue;
        }
        fires = true;
        silent |= list(&case["input_series"]).iter().any(|s| {
            let about = subject(&series_labels(s["series"].as_str().unwrap_or("")));
            !about.is_empty() && !expected.iter().any(|e| e.is_subset(&about))
        });
    }
    (fires, silent)
}

/// The GitHub anchor of a Markdown heading: lower case, spaces to dashes, other punctuation out.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The runbook's sections: each `## ` heading's anchor and the text up to the next one.
fn runbook_sections() -> Vec<(String, String)> {
    let text = fs::read_to_string(workspace_root().join("docs/runbook.md")).unwrap();
    let mut sections = Vec::new();
    for part in text.split("\n## ").skip(1) {
        let (heading, body) = part.split_once('\n').unwrap_or((part, ""));
        sections.push((anchor(heading), body.to_owned()));
    }
    sections
}

#[test]
fn every_alert_has_a_test_that_fires_it_and_series_it_stays_silent_on() {
    let tests = yaml("deploy/prometheus/stalltop-rules.test.yaml");
    let rules = rules_file();
    let alerts = alerts(&rules);
    assert!(alerts.len() >= 7, "{} alerts", alerts.len());
    for alert in alerts {
        let name = alert["alert"].as_str().unwrap();
        assert_eq!(
            tested(&tests, name),
            (true, true),
            "{name}: (fires, silent)"
        );
    }
}

#[test]
fn a_test_without_series_beside_the_firing_one_is_not_a_silent_case() {
    let tests: Value = serde_yaml_ng::from_str(
        "tests:\n  - input_series:\n      - series: 'x{node=\"n1\"}'\n    alert_rule_test:\n      \
         - alertname: A\n        exp_alerts:\n          - exp_labels: {node: n1}\n",
    )
    .unwrap();
    assert_eq!(tested(&tests, "A"), (true, false));
    assert_eq!(tested(&tests, "B"), (false, false));
}

#[test]
fn every_alert_links_to_its_runbook_section_which_says_what_to_open() {
    let sections = runbook_sections();
    for alert in alerts(&rules_file()) {
        let name = alert["alert"].as_str().unwrap();
        let url = alert["annotations"]["runbook_url"].as_str().unwrap_or("");
        let (_, wanted) = url
            .split_once("docs/runbook.md#")
            .unwrap_or_else(|| panic!("{name}: runbook_url {url:?} is not docs/runbook.md#..."));
        assert_eq!(wanted, anchor(name), "{name}: runbook_url anchor");
        let (_, body) = sections
            .iter()
            .find(|(a, _)| a == wanted)
            .unwrap_or_else(|| panic!("docs/runbook.md has no section {name}"));
        for needed in ["```promql", "/stalls", "stalltop report", "stalltop replay"] {
            assert!(
                body.contains(needed),
                "docs/runbook.md, {name}: no {needed}"
            );
        }
    }
}

#[test]
fn the_dashboard_asks_for_its_data_source_node_and_container() {
    let path = workspace_root().join("deploy/grafana/stalltop.json");
    let dashboard: Value = serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap();
    assert!(dashboard["schemaVersion"].as_u64().unwrap() >= 39);
    let variables = list(&dashboard["templating"]["list"]);
    let variable = |name: &str| variables.iter().find(|v| v["name"] == name);
    let source = variable("datasource").expect("a datasource variable");
    assert_eq!(
        (&source["type"], &source["query"]),
        (&"datasource".into(), &"prometheus".into())
    );
    for name in ["node", "container"] {
        let v = variable(name).unwrap_or_else(|| panic!("no ${name} variable"));
        assert_eq!(v["type"], "query", "{name}");
        assert_eq!(v["includeAll"], true, "{name}");
        assert_eq!(v["allValue"], ".*", "{name}");
    }
    let ours = |v: &Value| v["datasource"]["uid"] == "${datasource}";
    let mut ids = BTreeSet::new();
    for panel in list(&dashboard["panels"]) {
        let title = panel["title"].as_str().unwrap_or("?");
        assert!(
            ids.insert(panel["id"].as_u64().unwrap()),
            "{title}: id reused"
        );
        if panel["type"] == "row" {
            continue;
        }
        assert!(ours(panel), "{title}: not on $datasource");
        assert!(panel["description"].is_string(), "{title}: no description");
        let targets = list(&panel["targets"]);
        assert!(!targets.is_empty(), "{title}: no query");
        for target in targets {
            assert!(ours(target), "{title}: a target not on $datasource");
            let expr = target["expr"].as_str().unwrap();
            assert!(expr.contains("node=~\"$node\""), "{title}: not for $node");
        }
    }
    for annotation in list(&dashboard["annotations"]["list"]) {
        if annotation["expr"].is_string() {
            assert!(ours(annotation), "an annotation not on $datasource");
        }
    }
}

#[test]
fn the_kustomization_applies_the_monitoring_half() {
    let kustomization = yaml("deploy/kustomization.yaml");
    let resources: Vec<&str> = list(&kustomization["resources"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        resources,
        [
            "kubernetes/servicemonitor.yaml",
            "kubernetes/prometheusrule.yaml"
        ]
    );
    for file in &resources {
        assert!(
            workspace_root().join("deploy").join(file).is_file(),
            "{file}"
        );
    }
    // stalltop.yaml's first document is its Namespace.
    let text =
        fs::read_to_string(workspace_root().join("deploy/kubernetes/stalltop.yaml")).unwrap();
    let namespace = serde_yaml_ng::Deserializer::from_str(&text)
        .next()
        .map(|doc| <Value as serde::Deserialize>::deserialize(doc).unwrap())
        .unwrap();
    assert_eq!(namespace["kind"], "Namespace");
    assert_eq!(kustomization["namespace"], namespace["metadata"]["name"]);
    let generated = &kustomization["configMapGenerator"][0];
    assert_eq!(generated["files"][0], "grafana/stalltop.json");
    assert_eq!(
        kustomization["generatorOptions"]["labels"]["grafana_dashboard"],
        "1"
    );
    assert_eq!(
        kustomization["generatorOptions"]["disableNameSuffixHash"],
        true
    );
}
