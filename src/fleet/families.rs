//! The metrics `serve` exports, as format-neutral families: names, help,
//! labels and values. Names and labels are a contract (docs/fleet.md):
//! change them only with a note there. Counter names leave out `_total`;
//! each encoder adds it as its format wants.

use super::stall_watch::StallTotals;
use super::totals::{Hist, Totals};
use crate::event::softirq_name;
use crate::histogram::{slot_range, SLOTS};

/// Culprits exported by stall time (the rest are left out, never folded:
/// a comm is not a bounded label).
pub const TOP_CULPRITS: usize = 20;

/// Bucket bounds, in ns: two per power of two (the in-kernel histogram has
/// four), over the range each latency lives in.
const RUNQ_BOUNDS: (u64, u64) = (1 << 14, 1 << 33); // 16 us .. 8.6 s
const SOFTIRQ_BOUNDS: (u64, u64) = (1 << 10, 1 << 30); // 1 us .. 1.07 s

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Number(f64),
    /// Cumulative counts at each upper bound (seconds, ascending; `+Inf`
    /// is the count), the count and the sum (seconds).
    Histogram {
        buckets: Vec<(f64, u64)>,
        count: u64,
        sum: f64,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub labels: Vec<(&'static str, String)>,
    pub value: Value,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    pub series: Vec<Series>,
}

/// What the families are made of, besides the totals.
pub struct Inputs<'a> {
    pub totals: &'a Totals,
    pub stalls: &'a StallTotals,
    /// ksoftirqd waits over the threshold, by CPU.
    pub takeovers: &'a std::collections::BTreeMap<u32, u64>,
    /// CPU time of stalltop itself and of its BPF programs, in seconds.
    pub probe_cpu_seconds: f64,
    pub flight: FlightCounts,
}

/// What the flight recorder did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlightCounts {
    pub dumps: u64,
    /// Triggers that fell inside a dump already planned.
    pub coalesced: u64,
    /// Recordings deleted to stay within the flight directory's size.
    pub deleted: u64,
    pub failed: u64,
    /// Chunks (about a second each) dropped from the window to stay within
    /// its memory bound.
    pub window_dropped: u64,
}

pub fn families(i: &Inputs<'_>) -> Vec<Family> {
    let t = i.totals;
    vec![
        Family {
            name: "stalltop_runq_wait_seconds",
            help: "Time runnable tasks waited for a CPU, by container.",
            kind: Kind::Histogram,
            series: t
                .runq
                .iter()
                .map(|(container, h)| Series {
                    labels: vec![("container", container.clone())],
                    value: histogram(h, RUNQ_BOUNDS),
                })
                .collect(),
        },
        Family {
            name: "stalltop_preemptions",
            help: "Waits for a CPU of a container's tasks by cause: a task of its own cgroup, \
                   of another, a kernel thread, or its CPU quota (throttled).",
            kind: Kind::Counter,
            series: t
                .preemptions
                .iter()
                .map(|((container, cause), n)| Series {
                    labels: vec![
                        ("container", container.clone()),
                        ("cause", cause.name().to_owned()),
                    ],
                    value: Value::Number(*n as f64),
                })
                .collect(),
        },
        Family {
            name: "stalltop_stalls",
            help: "Stalls: a CPU on which ready work waited past the threshold, by kind.",
            kind: Kind::Counter,
            series: stall_series(i.stalls, |(count, _)| count as f64),
        },
        Family {
            name: "stalltop_stall_seconds",
            help: "Time CPUs spent in stalls, by kind.",
            kind: Kind::Counter,
            series: stall_series(i.stalls, |(_, ns)| seconds(ns)),
        },
        Family {
            name: "stalltop_softirq_delay_seconds",
            help: "Time from a softirq's raise to its run, by vector. In --syscalls \
                   sampled or off, where the CPU sampler runs: only the delays a sampler \
                   tick saw, each timed from that tick; otherwise every delay, from its \
                   raise.",
            kind: Kind::Histogram,
            series: t
                .softirq
                .iter()
                .map(|(vector, h)| Series {
                    labels: vec![("vector", softirq_name(*vector).to_owned())],
                    value: histogram(h, SOFTIRQ_BOUNDS),
                })
                .collect(),
        },
        Family {
            name: "stalltop_ksoftirqd_takeovers",
            help: "Times ksoftirqd waited for its CPU past the threshold, by CPU.",
            kind: Kind::Counter,
            series: i
                .takeovers
                .iter()
                .map(|(cpu, n)| Series {
                    labels: vec![("cpu", cpu.to_string())],
                    value: Value::Number(*n as f64),
                })
                .collect(),
        },
        Family {
            name: "stalltop_cfs_throttled_periods",
            help: "CFS periods in which a container's CPU quota ran out.",
            kind: Kind::Counter,
            series: t
                .throttled
                .iter()
                .map(|(container, th)| by_container(container, th.periods as f64))
                .collect(),
        },
        Family {
            name: "stalltop_cfs_throttled_seconds",
            help: "Time a container's tasks were held back by its CPU quota.",
            kind: Kind::Counter,
            series: t
                .throttled
                .iter()
                .map(|(container, th)| by_container(container, seconds(th.ns)))
                .collect(),
        },
        Family {
            name: "stalltop_cfs_quota_cpus",
            help: "A container's CPU quota, in CPUs (quota / period).",
            kind: Kind::Gauge,
            series: t
                .quota_cpus
                .iter()
                .map(|(container, cpus)| by_container(container, *cpus))
                .collect(),
        },
        Family {
            name: "stalltop_culprit_stall_seconds",
            help: "Stall time of the tasks that most held stalled CPUs, by comm and container \
                   (top culprits only).",
            kind: Kind::Counter,
            series: top_culprits(i.stalls),
        },
        Family {
            name: "stalltop_lost_events",
            help: "Probe records lost (ring buffer full, or undecodable), by kind.",
            kind: Kind::Counter,
            series: t
                .lost
                .iter()
                .map(|(kind, n)| Series {
                    labels: vec![("kind", kind.clone())],
                    value: Value::Number(*n as f64),
                })
                .collect(),
        },
        Family {
            name: "stalltop_probe_cpu_seconds",
            help: "CPU time stalltop used: its process, plus its BPF programs while the kernel \
                   counts their run time (kernel.bpf_stats_enabled).",
            kind: Kind::Counter,
            series: vec![Series {
                labels: vec![],
                value: Value::Number(i.probe_cpu_seconds),
            }],
        },
        Family {
            name: "stalltop_flight_recordings",
            help: "Flight recordings written, by outcome: written, coalesced (a trigger inside \
                   one already planned), deleted (to stay within --flight-max), failed.",
            kind: Kind::Counter,
            series: [
                ("written", i.flight.dumps),
                ("coalesced", i.flight.coalesced),
                ("deleted", i.flight.deleted),
                ("failed", i.flight.failed),
            ]
            .into_iter()
            .map(|(outcome, n)| Series {
                labels: vec![("outcome", outcome.to_owned())],
                value: Value::Number(n as f64),
            })
            .collect(),
        },
        Family {
            name: "stalltop_flight_window_dropped_chunks",
            help: "Chunks of the flight window (about a second each) dropped before their time \
                   to stay within its memory bound.",
            kind: Kind::Counter,
            series: vec![Series {
                labels: vec![],
                value: Value::Number(i.flight.window_dropped as f64),
            }],
        },
    ]
}

fn by_container(container: &str, value: f64) -> Series {
    Series {
        labels: vec![("container", container.to_owned())],
        value: Value::Number(value),
    }
}

fn stall_series(stalls: &StallTotals, value: impl Fn((u64, u64)) -> f64) -> Vec<Series> {
    stalls
        .by_kind_cpu
        .iter()
        .map(|((kind, cpu), totals)| Series {
            labels: vec![("kind", kind.name().to_owned()), ("cpu", cpu.to_string())],
            value: Value::Number(value(*totals)),
        })
        .collect()
}

fn top_culprits(stalls: &StallTotals) -> Vec<Series> {
    let mut culprits: Vec<_> = stalls.by_culprit.iter().collect();
    culprits.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    culprits
        .into_iter()
        .take(TOP_CULPRITS)
        .map(|((comm, container), ns)| Series {
            labels: vec![("comm", comm.clone()), ("container", container.clone())],
            value: Value::Number(seconds(*ns)),
        })
        .collect()
}

/// Cumulative buckets at two bounds per power of two within `range`: the
/// upper ends of the kernel's second and fourth sub-slots. A slot's values
/// are below its end, so each bucket counts exactly the waits shorter than
/// its bound (Prometheus's `le` also takes a wait of exactly the bound).
fn histogram(h: &Hist, range: (u64, u64)) -> Value {
    let mut buckets = Vec::new();
    let mut below = 0;
    for slot in 0..SLOTS {
        below += h.slots.get(slot).copied().unwrap_or(0);
        let (_, end) = slot_range(slot);
        let half_octave = slot >= 4 && slot % 2 == 1;
        if half_octave && end >= range.0 && end <= range.1 {
            buckets.push((seconds(end), below));
        }
    }
    Value::Histogram {
        buckets,
        count: h.count,
        sum: seconds(h.sum_ns),
    }
}

fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::Histogram;

    fn hist(values: &[u64]) -> Hist {
        let mut h = Histogram::default();
        for &v in values {
            h.record(v);
        }
        Hist {
            slots: h.slots().to_vec(),
            count: values.len() as u64,
            sum_ns: values.iter().sum(),
        }
    }

    #[test]
    fn histogram_buckets_are_cumulative_at_two_bounds_per_power_of_two() {
        let ms = 1_000_000;
        let Value::Histogram {
            buckets,
            count,
            sum,
        } = histogram(
            &hist(&[100_000, 3 * ms, 3 * ms, 5 * ms, 20 * 1_000 * ms]),
            RUNQ_BOUNDS,
        )
        else {
            panic!("not a histogram");
        };
        assert_eq!(count, 5);
        assert!((sum - 20.011_1).abs() < 1e-9, "sum {sum}");
        // From 16.384 us to 8.59 s: 20 powers of two, two bounds each, minus the first's lower.
        assert_eq!(buckets.first().unwrap().0, 16_384e-9);
        assert_eq!(buckets.last().unwrap().0, 8_589_934_592e-9);
        assert_eq!(buckets.len(), 39);
        let below = |s: f64| buckets.iter().find(|b| b.0 >= s).unwrap().1;
        assert_eq!(below(150e-6), 1, "100 us is below 196 us");
        assert_eq!(below(3.2e-3), 3, "3 ms twice, below 3.15 ms");
        assert_eq!(below(6.3e-3), 4);
        assert_eq!(buckets.last().unwrap().1, 4, "20 s is past the last bound");
        assert!(buckets
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
    }

    #[test]
    fn only_the_top_culprits_are_exported() {
        let mut stalls = StallTotals::default();
        for i in 0..(TOP_CULPRITS as u64 + 5) {
            stalls
                .by_culprit
                .insert((format!("task{i}"), "host".into()), i * 1_000_000);
        }
        let series = top_culprits(&stalls);
        assert_eq!(series.len(), TOP_CULPRITS);
        assert_eq!(series[0].labels[0].1, format!("task{}", TOP_CULPRITS + 4));
        assert_eq!(series[0].value, Value::Number(0.024));
    }
}
