//! The families in Prometheus's text format (what `promtool check metrics`
//! reads; the `prometheus` crate's encoder) or in OpenMetrics (for scrapers
//! that ask for it; the `prometheus-client` crate's encoder).

use prometheus::proto;
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
    match format {
        Format::Text => text(families),
        Format::OpenMetrics => openmetrics(families),
    }
}

fn text(families: &[Family]) -> String {
    let protos: Vec<proto::MetricFamily> = families
        .iter()
        .filter(|f| !f.series.is_empty())
        .map(to_proto)
        .collect();
    let mut out = String::new();
    prometheus::TextEncoder::new()
        .encode_utf8(&protos, &mut out)
        .expect("families are valid: fixed names, escaped label values");
    out
}

fn to_proto(f: &Family) -> proto::MetricFamily {
    let mut family = proto::MetricFamily::default();
    let (name, kind) = match f.kind {
        Kind::Counter => (format!("{}_total", f.name), proto::MetricType::COUNTER),
        Kind::Gauge => (f.name.to_owned(), proto::MetricType::GAUGE),
        Kind::Histogram => (f.name.to_owned(), proto::MetricType::HISTOGRAM),
    };
    family.set_name(name);
    family.set_help(f.help.to_owned());
    family.set_field_type(kind);
    for s in &f.series {
        let labels = s
            .labels
            .iter()
            .map(|(k, v)| {
                let mut pair = proto::LabelPair::default();
                pair.set_name((*k).to_owned());
                pair.set_value(v.clone());
                pair
            })
            .collect();
        let mut metric = proto::Metric::from_label(labels);
        match (&s.value, f.kind) {
            (Value::Number(v), Kind::Counter) => {
                let mut c = proto::Counter::default();
                c.set_value(*v);
                metric.set_counter(c);
            }
            (Value::Number(v), _) => {
                let mut g = proto::Gauge::default();
                g.set_value(*v);
                metric.set_gauge(g);
            }
            (
                Value::Histogram {
                    buckets,
                    count,
                    sum,
                },
                _,
            ) => {
                let mut h = proto::Histogram::default();
                h.set_sample_count(*count);
                h.set_sample_sum(*sum);
                h.set_bucket(
                    buckets
                        .iter()
                        .map(|(le, n)| {
                            let mut b = proto::Bucket::default();
                            b.set_upper_bound(*le);
                            b.set_cumulative_count(*n);
                            b
                        })
                        .collect(),
                );
                metric.set_histogram(h);
            }
        }
        family.mut_metric().push(metric);
    }
    family
}

fn openmetrics(families: &[Family]) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Families(families.to_vec())));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry)
        .expect("writing to a String does not fail");
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
                name: "stalltop_preemptions",
                help: "Waits by cause.",
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
        assert!(out.contains("# TYPE stalltop_preemptions_total counter\n"));
        assert!(out.contains(
            "stalltop_preemptions_total{container=\"pod:\\\"x\\\"/a\\\\b\",cause=\"other\"} 3\n"
        ));
        assert!(
            out.contains("stalltop_runq_wait_seconds_bucket{container=\"host\",le=\"0.002\"} 5\n")
        );
        assert!(
            out.contains("stalltop_runq_wait_seconds_bucket{container=\"host\",le=\"+Inf\"} 6\n")
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
        assert!(out.contains("# TYPE stalltop_preemptions counter\n"));
        assert!(out.contains(
            "stalltop_preemptions_total{container=\"pod:\\\"x\\\"/a\\\\b\",cause=\"other\"} 3"
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
