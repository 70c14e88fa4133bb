//! The metrics `serve` exports, as format-neutral families: names, help,
//! labels and values. Names and labels are a contract (docs/fleet.md):
//! change them only with a note there. Counter names leave out `_total`;
//! each encoder adds it as its format wants.

use super::stall_watch::StallTotals;
use super::totals::{Hist, Throttled, Totals};
use crate::event::softirq_name;
use crate::histogram::{slot_range, SLOTS};
use crate::stream::GuardState;

/// Culprits exported by stall time (the rest are left out, never folded:
/// a comm is not a bounded label).
pub const TOP_CULPRITS: usize = 20;

/// Histogram bucket bounds (ns): one per factor of four (the series budget,
/// docs/fleet.md), each a power of two, so each is the end of an in-kernel
/// slot and counts exactly.
#[derive(Clone, Copy)]
struct Buckets {
    /// The first bound is 2^first_shift ns.
    first_shift: u32,
    count: u32,
}

impl Buckets {
    fn bounds(self) -> impl Iterator<Item = u64> {
        (0..self.count).map(move |i| 1u64 << (self.first_shift + 2 * i))
    }
}

/// Run-queue waits: 65.5 us .. 268 ms, what a healthy container waits up to
/// the neighbour stalls of docs/cases.md.
const RUNQ_BUCKETS: Buckets = Buckets {
    first_shift: 16,
    count: 7,
};
/// Softirq delays: 16 us .. 268 ms.
const SOFTIRQ_BUCKETS: Buckets = Buckets {
    first_shift: 14,
    count: 8,
};

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
    /// The cost guard's latest state (serve runs one unless `--max-cpu off`).
    pub guard: Option<&'a GuardState>,
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
                    value: histogram(h, RUNQ_BUCKETS),
                })
                .collect(),
        },
        Family {
            name: "stalltop_runq_wait_cause_seconds",
            help: "Time runnable tasks of a container waited for a CPU, in waits of 1 ms and \
                   more, by cause: steal (the hypervisor), throttled (its CPU quota), softirq, \
                   idle (nobody held the CPU: wake-up or migration latency), kthread, own (a \
                   task of its own cgroup), other (another cgroup's).",
            kind: Kind::Counter,
            series: t
                .wait_causes
                .iter()
                .map(|((container, cause), ns)| Series {
                    labels: vec![
                        ("container", container.clone()),
                        ("cause", cause.name().to_owned()),
                    ],
                    value: Value::Number(seconds(*ns)),
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
                    value: histogram(h, SOFTIRQ_BUCKETS),
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
            name: "stalltop_cfs_periods",
            help: "CFS periods in which a container with a CPU quota had runnable tasks.",
            kind: Kind::Counter,
            series: throttle_series(t, |th| th.periods as f64),
        },
        Family {
            name: "stalltop_cfs_throttled_periods",
            help: "CFS periods in which a container's CPU quota ran out.",
            kind: Kind::Counter,
            series: throttle_series(t, |th| th.throttled_periods as f64),
        },
        Family {
            name: "stalltop_cfs_throttled_seconds",
            help: "Time a container's tasks were held back by its CPU quota.",
            kind: Kind::Counter,
            series: throttle_series(t, |th| seconds(th.throttled_ns)),
        },
        Family {
            name: "stalltop_cfs_usage_seconds",
            help: "CPU time used by a container with a CPU quota (cgroupfs).",
            kind: Kind::Counter,
            series: throttle_series(t, |th| seconds(th.usage_ns)),
        },
        Family {
            name: "stalltop_cpu_pressure_seconds",
            help: "The kernel's CPU pressure (PSI) of a container's cgroup: time in which some \
                   (at least one) of its tasks waited for a CPU, averaged over the CPUs it ran \
                   on, from cpu.pressure of the unified hierarchy.",
            kind: Kind::Counter,
            series: t
                .pressure_some
                .iter()
                .map(|(container, ns)| Series {
                    labels: vec![
                        ("container", container.clone()),
                        ("kind", "some".to_owned()),
                    ],
                    value: Value::Number(seconds(*ns)),
                })
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
            help: "CPU time stalltop used: its process, plus its BPF programs' run time (each \
                   program times one invocation in 64 itself).",
            kind: Kind::Counter,
            series: vec![Series {
                labels: vec![],
                value: Value::Number(i.probe_cpu_seconds),
            }],
        },
        Family {
            name: "stalltop_cpu_budget_cpus",
            help: "The CPU stalltop may use (--max-cpu), in CPUs: its cost guard steps down \
                   when stalltop_probe_cpu_seconds_total grows faster.",
            kind: Kind::Gauge,
            series: i
                .guard
                .map(|g| Series {
                    labels: vec![],
                    value: Value::Number(g.budget_cpus),
                })
                .into_iter()
                .collect(),
        },
        Family {
            name: "stalltop_degraded",
            help: "1 while the cost guard has a step down to stay within --max-cpu: syscalls \
                   (exact syscalls sampled), sampler (at half rate), stacks (off); 0 otherwise.",
            kind: Kind::Gauge,
            series: i.guard.map_or_else(Vec::new, |g| {
                g.steps
                    .iter()
                    .map(|step| Series {
                        labels: vec![("step", step.name().to_owned())],
                        value: Value::Number(if g.down.contains(step) { 1.0 } else { 0.0 }),
                    })
                    .collect()
            }),
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

fn throttle_series(t: &Totals, value: impl Fn(&Throttled) -> f64) -> Vec<Series> {
    t.throttled
        .iter()
        .map(|(container, th)| by_container(container, value(th)))
        .collect()
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

/// Cumulative buckets at `buckets`' bounds. A slot's values are below its
/// end, so each bucket counts exactly the waits shorter than its bound
/// (Prometheus's `le` also takes a wait of exactly the bound).
fn histogram(h: &Hist, buckets: Buckets) -> Value {
    let mut counts = Vec::new();
    let mut below = 0;
    let mut next = buckets.bounds().peekable();
    for slot in 0..SLOTS {
        let Some(&bound) = next.peek() else {
            break;
        };
        below += h.slots.get(slot).copied().unwrap_or(0);
        if slot_range(slot).1 == bound {
            counts.push((seconds(bound), below));
            next.next();
        }
    }
    debug_assert!(next.peek().is_none(), "a bound that is no slot's end");
    Value::Histogram {
        buckets: counts,
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
    fn histogram_buckets_are_cumulative_at_each_factor_of_four() {
        let ms = 1_000_000;
        let Value::Histogram {
            buckets,
            count,
            sum,
        } = histogram(
            &hist(&[100_000, 3 * ms, 3 * ms, 5 * ms, 20 * 1_000 * ms]),
            RUNQ_BUCKETS,
        )
        else {
            panic!("not a histogram");
        };
        assert_eq!(count, 5);
        assert!((sum - 20.011_1).abs() < 1e-9, "sum {sum}");
        let bounds: Vec<f64> = buckets.iter().map(|b| b.0).collect();
        assert_eq!(
            bounds,
            [
                65_536e-9,
                262_144e-9,
                1_048_576e-9,
                4_194_304e-9,
                16_777_216e-9,
                67_108_864e-9,
                268_435_456e-9
            ]
        );
        let counts: Vec<u64> = buckets.iter().map(|b| b.1).collect();
        assert_eq!(counts, [0, 1, 1, 3, 4, 4, 4], "20 s is past the last bound");
    }

    #[test]
    fn every_bucket_bound_ends_a_kernel_slot() {
        let ends: Vec<u64> = (0..SLOTS).map(|s| slot_range(s).1).collect();
        for bound in RUNQ_BUCKETS.bounds().chain(SOFTIRQ_BUCKETS.bounds()) {
            assert!(ends.contains(&bound), "{bound}");
        }
        let Value::Histogram { buckets, .. } = histogram(&hist(&[1]), SOFTIRQ_BUCKETS) else {
            panic!("not a histogram");
        };
        assert_eq!(buckets.len(), 8);
    }

    /// The series budget of docs/fleet.md: at most this many series per
    /// container with series of its own (and `other`), per CPU, and for the
    /// node besides.
    const SERIES_PER_CONTAINER: usize = 23;
    const SERIES_PER_CPU: usize = 11;
    const SERIES_PER_NODE: usize = 160;

    fn series(families: &[Family], matching: impl Fn(&Series) -> bool) -> usize {
        let per_series = |f: &Family, s: &Series| match &s.value {
            // Each bucket, +Inf, _sum and _count.
            Value::Histogram { buckets, .. } if f.kind == Kind::Histogram => buckets.len() + 3,
            _ => 1,
        };
        families
            .iter()
            .flat_map(|f| f.series.iter().map(move |s| (f, s)))
            .filter(|(_, s)| matching(s))
            .map(|(f, s)| per_series(f, s))
            .sum()
    }

    #[test]
    fn the_worst_case_fits_the_series_budget() {
        use crate::fleet::totals::{Cause, Throttled};
        use crate::model::StallKind;
        use crate::modes::Step;
        let containers = ["ns/a/app", "other"];
        let cpus = 4u32;
        let mut totals = Totals::new(1);
        let full = hist(&[1, 100_000, 1_000_000, 10_000_000, 2_000_000_000]);
        for c in containers {
            totals.runq.insert(c.into(), full.clone());
            for cause in Cause::ALL {
                totals.wait_causes.insert((c.into(), cause), 1);
            }
            totals.throttled.insert(c.into(), Throttled::default());
            totals.pressure_some.insert(c.into(), 1);
        }
        totals.quota_cpus.insert(containers[0].into(), 0.5);
        for vector in 0..10 {
            totals.softirq.insert(vector, full.clone());
        }
        for kind in [
            "runq", "takeover", "softirq", "syscall", "sample", "irqoff", "hardirq",
        ] {
            totals.lost.insert(kind.into(), 0);
        }
        totals.lost.insert("undecodable".into(), 0);
        let kinds = [
            StallKind::Runq,
            StallKind::Throttled,
            StallKind::Ksoftirqd,
            StallKind::Softirq,
            StallKind::Irqoff,
        ];
        let mut stalls = StallTotals::default();
        for cpu in 0..cpus {
            for kind in kinds {
                stalls.by_kind_cpu.insert((kind, cpu), (1, 1));
            }
        }
        for i in 0..100 {
            stalls
                .by_culprit
                .insert((format!("task{i}"), "ns/a/app".into()), 1);
        }
        let takeovers = (0..cpus).map(|cpu| (cpu, 1)).collect();
        let families = families(&Inputs {
            totals: &totals,
            stalls: &stalls,
            takeovers: &takeovers,
            probe_cpu_seconds: 1.0,
            guard: Some(&GuardState {
                budget_cpus: 0.04,
                cost_cpus: 0.05,
                steps: Step::ALL.to_vec(),
                down: vec![Step::Syscalls],
            }),
            flight: FlightCounts::default(),
        });
        let of = |container: &str| {
            series(&families, |s| {
                s.labels.len() <= 2
                    && s.labels
                        .iter()
                        .any(|(k, v)| *k == "container" && v == container)
                    && !s.labels.iter().any(|(k, _)| *k == "comm")
            })
        };
        assert_eq!(of("ns/a/app"), SERIES_PER_CONTAINER);
        assert!(of("other") <= SERIES_PER_CONTAINER);
        let per_cpu = series(&families, |s| s.labels.iter().any(|(k, _)| *k == "cpu"));
        assert_eq!(per_cpu, SERIES_PER_CPU * cpus as usize);
        let node = series(&families, |_| true) - of("ns/a/app") - of("other") - per_cpu;
        assert!(node <= SERIES_PER_NODE, "{node} series for the node");
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
