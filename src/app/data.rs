//! The entry stream as the view consumes it: the analysis, the rates shown
//! in the header (events/s, records/s, stalltop's own probe cost), and
//! `r`'s reset, which restarts the analysis and subtracts the cumulative
//! kernel counters read at the reset. Pure; never reads a clock.

use crate::event;
use crate::model::{kernel_since, Analysis};
use crate::stream::{Entry, GuardState, Header, KernelSnapshot, NameTable};

/// Rates between the last two kernel snapshots (CLOCK_MONOTONIC apart, so
/// replay shows what the live run saw).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rates {
    /// Probe program runs per second (every tracepoint hit handled).
    pub events_per_s: Option<f64>,
    /// Records that reached user space per second.
    pub records_per_s: Option<f64>,
    /// Average run time of a probe program (needs kernel BPF stats).
    pub ns_per_event: Option<f64>,
    /// Probe run time as a percentage of one CPU.
    pub cpu_percent: Option<f64>,
    /// The cost guard's latest state, when one runs (`--max-cpu`).
    pub guard: Option<GuardState>,
}

pub struct Data {
    header: Header,
    pub analysis: Analysis,
    /// Every name seen, to give a restarted analysis.
    names: NameTable,
    /// The cumulative kernel counters at the last reset.
    baseline: Option<KernelSnapshot>,
    /// The last kernel snapshot as the probes sent it (cumulative).
    last_kernel: Option<KernelSnapshot>,
    records_since_kernel: u64,
    pub rates: Rates,
}

impl Data {
    pub fn new(header: Header) -> Data {
        Data {
            analysis: Analysis::new(header.clone()),
            header,
            names: NameTable::default(),
            baseline: None,
            last_kernel: None,
            records_since_kernel: 0,
            rates: Rates::default(),
        }
    }

    pub fn apply(&mut self, entry: &Entry) {
        match entry {
            Entry::Kernel(kernel) => {
                if let Some(previous) = &self.last_kernel {
                    self.rates = rates(previous, kernel, self.records_since_kernel);
                }
                self.records_since_kernel = 0;
                match &self.baseline {
                    Some(baseline) => {
                        self.analysis
                            .apply(&Entry::Kernel(kernel_since(kernel, baseline)));
                    }
                    None => self.analysis.apply(entry),
                }
                self.last_kernel = Some(kernel.clone());
            }
            Entry::Records(bytes) => {
                self.records_since_kernel += event::decode(bytes).len() as u64;
                self.analysis.apply(entry);
            }
            Entry::Names(names) => {
                self.names.cgroups.extend(names.cgroups.iter().cloned());
                self.names
                    .kernel_symbols
                    .extend(names.kernel_symbols.iter().cloned());
                self.names
                    .user_symbols
                    .extend(names.user_symbols.iter().cloned());
                self.names.pods.extend(names.pods.iter().cloned());
                self.names
                    .containers
                    .extend(names.containers.iter().cloned());
                self.analysis.apply(entry);
            }
            Entry::Throttle(_) | Entry::Pressure(_) => self.analysis.apply(entry),
        }
    }

    /// Start counting again at `at_ns`: stalls, culprits and tables empty,
    /// kernel aggregates from their current values. Names are kept.
    pub fn reset(&mut self, at_ns: u64) {
        let header = Header {
            start_ns: at_ns,
            ..self.header.clone()
        };
        self.analysis = Analysis::new(header);
        self.analysis.apply(&Entry::Names(self.names.clone()));
        self.baseline = self.last_kernel.clone();
    }

    /// The id of the newest stall, to notice new ones cheaply.
    pub fn newest_stall(&self) -> Option<u64> {
        self.analysis.stalls().next_back().map(|s| s.id)
    }

    /// When the first of the stalls newer than stall `seen` ended.
    pub fn first_end_after(&self, seen: Option<u64>) -> Option<u64> {
        self.analysis
            .stalls()
            .rev()
            .take_while(|s| seen.is_none_or(|seen| s.id > seen))
            .map(|s| s.end_ns)
            .min()
    }
}

fn rates(previous: &KernelSnapshot, latest: &KernelSnapshot, records: u64) -> Rates {
    let seconds = latest.ts_ns.saturating_sub(previous.ts_ns) as f64 / 1e9;
    if seconds <= 0.0 {
        return Rates::default();
    }
    let total = |k: &KernelSnapshot| {
        k.programs.iter().fold((0u64, 0u64), |(count, ns), p| {
            (count + p.run_count, ns + p.run_time_ns)
        })
    };
    let (count_before, ns_before) = total(previous);
    let (count_after, ns_after) = total(latest);
    let runs = count_after.saturating_sub(count_before) as f64;
    let run_ns = ns_after.saturating_sub(ns_before) as f64;
    // Run times stay 0 in recordings made before the probes timed
    // themselves.
    let has_cost = ns_after > 0;
    Rates {
        events_per_s: (count_after > 0).then(|| runs / seconds),
        records_per_s: Some(records as f64 / seconds),
        ns_per_event: (has_cost && runs > 0.0).then(|| run_ns / runs),
        cpu_percent: has_cost.then(|| run_ns / (seconds * 1e9) * 100.0),
        guard: latest.cost_guard.as_deref().cloned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::Histogram;
    use crate::modes::{Attach, CgroupHierarchy, SoftirqTime, StealSource, SyscallMode};
    use crate::stream::{CgroupRunq, Counters, HostInfo, ProgramCost, Settings};

    const MS: u64 = 1_000_000;

    fn header() -> Header {
        Header {
            host: HostInfo {
                hostname: "h".into(),
                kernel: "k".into(),
                cpus: 2,
                online: None,
                machine: None,
            },
            start_ns: 0,
            wall_clock_offset_ns: 0,
            settings: Settings {
                runq_threshold_ns: 10 * MS,
                stall_threshold_ns: 10 * MS,
                syscall_wall_threshold_ns: 10 * MS,
                syscall_oncpu_threshold_ns: MS,
                sample_hz: 0,
                attach: Attach::TpBtf,
                cgroup_hierarchy: CgroupHierarchy::Unified,
                syscalls: SyscallMode::Exact,
                softirq_time: SoftirqTime::Exact,
                softirq_delay_timing: None,
                steal: StealSource::None,
                runq_wait: None,
                throttle: None,
            },
            warnings: vec![],
            probes: vec![],
            trigger: None,
            recorder_pid: None,
        }
    }

    fn kernel(ts_s: u64, waits: &[u64], runs: u64, run_ns: u64, lost: u64) -> Entry {
        let mut latency = Histogram::default();
        waits.iter().for_each(|&w| latency.record(w));
        Entry::Kernel(KernelSnapshot {
            ts_ns: ts_s * 1_000 * MS,
            runq: vec![CgroupRunq {
                cgroup: 1,
                latency,
                count: waits.len() as u64,
                total_ns: waits.iter().sum(),
                max_ns: waits.iter().copied().max().unwrap_or(0),
                ..CgroupRunq::default()
            }],
            counters: Counters {
                lost: vec![("runq".into(), lost)],
                map_full: vec![],
                rate_limited: vec![],
            },
            programs: vec![ProgramCost {
                name: "btf_sched_switch".into(),
                run_count: runs,
                run_time_ns: run_ns,
            }],
            ..KernelSnapshot::default()
        })
    }

    #[test]
    fn rates_come_from_consecutive_snapshots() {
        let mut data = Data::new(header());
        data.apply(&kernel(1, &[MS], 1_000, 300_000, 0));
        assert_eq!(data.rates, Rates::default());
        data.apply(&kernel(3, &[MS], 21_000, 6_300_000, 0));
        let r = &data.rates;
        assert_eq!(r.events_per_s, Some(10_000.0));
        assert_eq!(r.ns_per_event, Some(300.0));
        assert_eq!(r.records_per_s, Some(0.0));
        assert!((r.cpu_percent.unwrap() - 0.3).abs() < 1e-9);
    }

    #[test]
    fn reset_counts_from_the_reset() {
        let mut data = Data::new(header());
        data.apply(&kernel(1, &[50 * MS, 60 * MS], 10, 10, 3));
        data.reset(1_500 * MS);
        data.apply(&kernel(2, &[50 * MS, 60 * MS, 2 * MS], 20, 20, 5));
        let report = data.analysis.report();
        let row = &report.runq[0];
        assert_eq!(row.count, 1);
        assert!(row.max_ns < 3 * MS, "max after reset {}", row.max_ns);
        assert_eq!(report.lost_events.get("runq"), Some(&2));
        assert_eq!(report.duration_ns, 500 * MS);
    }
}
