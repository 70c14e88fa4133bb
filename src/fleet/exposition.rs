//! The families in Prometheus's text format 0.0.4 (what `promtool check
//! metrics` reads) or in OpenMetrics 1.0 (for scrapers that ask for it),
//! both written by the `prometheus-client` crate's encoder. The two differ,
//! for these families, in two places only: a counter's `# HELP` and
//! `# TYPE` lines name it with `_total` in the text format and without in
//! OpenMetrics (its samples carry `_total` in both), and only OpenMetrics
//! ends with `# EOF`.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::families::{Family, Kind, Value};

pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    OpenMetrics,
}

impl Format {
    /// OpenMetrics when the client's `Accept` header lists it, the text
    /// format otherwise (as Prometheus's own clients negotiate).
    pub fn negotiate(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Text,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => TEXT_CONTENT_TYPE,
            Format::OpenMetrics => OPENMETRICS_CONTENT_TYPE,
        }
    }
}

pub fn encode(families: &[Family], format: Format) -> String {
    let mut out = String::new();
    for family in families.iter().filter(|f| !f.series.is_empty()) {
        let openmetrics = openmetrics(family);
        match (format, family.kind) {
            (Format::Text, Kind::Counter) => {
                out.push_str(&text_counter_descriptor(&openmetrics, family.name));
            }
            _ => out.push_str(&openmetrics),
        }
    }
    if format == Format::OpenMetrics {
        out.push_str("# EOF\n");
    }
    out
}

/// One family in OpenMetrics, without the `# EOF` that ends a whole
/// exposition.
fn openmetrics(family: &Family) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Families(vec![family.clone()])));
    let mut out = String::new();
    prometheus_client::encoding::text::encode_registry(&mut out, &registry)
        .expect("writing to a String does not fail");
    out
}

/// A counter family's OpenMetrics encoding with its `# HELP` and `# TYPE`
/// lines (its first two) naming it as the text format does, `NAME_total`.
fn text_counter_descriptor(openmetrics: &str, name: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len() + 12);
    for (i, line) in openmetrics.split_inclusive('\n').enumerate() {
        let renamed = match i {
            0 => line
                .strip_prefix(&format!("# HELP {name} "))
                .map(|help| format!("# HELP {name}_total {help}")),
            1 => line
                .strip_prefix(&format!("# TYPE {name} "))
                .map(|kind| format!("# TYPE {name}_total {kind}")),
            _ => None,
        };
        match renamed {
            Some(line) => out.push_str(&line),
            None => out.push_str(line),
        }
    }
    out
}

/// The families as a prometheus-client collector.
#[derive(Debug)]
struct Families(Vec<Family>);

impl Collector for Families {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for f in self.0.iter().filter(|f| !f.series.is_empty()) {
            let kind = match f.kind {
                Kind::Counter => MetricType::Counter,
                Kind::Gauge => MetricType::Gauge,
                Kind::Histogram => MetricType::Histogram,
            };
            let mut metric = encoder.encode_descriptor(f.name, f.help, None, kind)?;
            for s in &f.series {
                let labels: Vec<(&str, &str)> =
                    s.labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
                let series = SeriesValue {
                    kind: f.kind,
                    value: &s.value,
                };
                series.encode(metric.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

#[derive(Debug)]
struct SeriesValue<'a> {
    kind: Kind,
    value: &'a Value,
}

impl EncodeMetric for SeriesValue<'_> {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::MetricEncoder,
    ) -> Result<(), std::fmt::Error> {
        match (self.value, self.kind) {
            (Value::Number(v), Kind::Counter) => {
                encoder.encode_counter::<prometheus_client::encoding::NoLabelSet, _, f64>(v, None)
            }
            (Value::Number(v), _) => encoder.encode_gauge(v),
            (
                Value::Histogram {
                    buckets,
                    count,
                    sum,
                },
                _,
            ) => {
                // prometheus-client takes each bucket's own count, +Inf last.
                let mut below = 0;
                let mut own: Vec<(f64, u64)> = buckets
                    .iter()
                    .map(|&(le, cumulative)| {
                        let n = cumulative - below;
                        below = cumulative;
                        (le, n)
                    })
                    .collect();
                own.push((f64::INFINITY, count - below));
                encoder.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                    *sum, *count, &own, None,
                )
            }
        }
    }

    fn metric_type(&self) -> MetricType {
        match self.kind {
            Kind::Counter => MetricType::Counter,
            Kind::Gauge => MetricType::Gauge,
            Kind::Histogram => MetricType::Histogram,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::families::Series;

    fn sample() -> Vec<Family> {
        vec![
            Family {
                name: "stalltop_runq_wait_cause_seconds",
                help: "Wait time by cause.",
                kind: Kind::Counter,
                series: vec![Series {
                    labels: vec![
                        ("container", "pod:\"x\"/a\\b".into()),
                        ("cause", "other".into()),
                    ],
                    value: Value::Number(3.0),
                }],
            },
            Family {
                name: "stalltop_runq_wait_seconds",
                help: "Waits.",
                kind: Kind::Histogram,
                series: vec![Series {
                    labels: vec![("container", "host".into())],
                    value: Value::Histogram {
                        buckets: vec![(0.001, 2), (0.002, 5)],
                        count: 6,
                        sum: 0.0125,
                    },
                }],
            },
            Family {
                name: "stalltop_cfs_quota_cpus",
                help: "Quota.",
                kind: Kind::Gauge,
                series: vec![],
            },
        ]
    }

    #[test]
    fn text_format_names_counters_with_total_and_escapes_labels() {
        let out = encode(&sample(), Format::Text);
        assert!(out.starts_with(
            "# HELP stalltop_runq_wait_cause_seconds_total Wait time by cause.\n\
             # TYPE stalltop_runq_wait_cause_seconds_total counter\n"
        ));
        assert!(out.contains(
            "stalltop_runq_wait_cause_seconds_total{container=\"pod:\\\"x\\\"/a\\\\b\",cause=\"other\"} 3"
        ));
        assert!(out.contains("# TYPE stalltop_runq_wait_seconds histogram\n"));
        assert!(
            out.contains("stalltop_runq_wait_seconds_bucket{le=\"0.002\",container=\"host\"} 5\n")
        );
        assert!(
            out.contains("stalltop_runq_wait_seconds_bucket{le=\"+Inf\",container=\"host\"} 6\n")
        );
        assert!(out.contains("stalltop_runq_wait_seconds_count{container=\"host\"} 6\n"));
        assert!(
            !out.contains("quota"),
            "families without series are left out"
        );
        assert!(!out.contains("# EOF"));
    }

    #[test]
    fn openmetrics_has_the_same_values_and_ends_with_eof() {
        let out = encode(&sample(), Format::OpenMetrics);
        assert!(out.contains("# TYPE stalltop_runq_wait_cause_seconds counter\n"));
        assert!(out.contains(
            "stalltop_runq_wait_cause_seconds_total{container=\"pod:\\\"x\\\"/a\\\\b\",cause=\"other\"} 3"
        ));
        // prometheus-client puts `le` first.
        assert!(
            out.contains("stalltop_runq_wait_seconds_bucket{le=\"0.002\",container=\"host\"} 5\n")
        );
        assert!(
            out.contains("stalltop_runq_wait_seconds_bucket{le=\"+Inf\",container=\"host\"} 6\n")
        );
        assert!(out.ends_with("# EOF\n"));
    }

    #[test]
    fn openmetrics_only_when_asked() {
        let prometheus_accept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(
            Format::negotiate(Some(prometheus_accept)),
            Format::OpenMetrics
        );
        assert_eq!(Format::negotiate(Some("text/plain")), Format::Text);
        assert_eq!(Format::negotiate(None), Format::Text);
    }
}
