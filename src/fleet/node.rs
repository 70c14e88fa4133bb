//! What `serve` knows of its node: the entry stream folded into the
//! analysis, the metric totals, the stall watch and the flight window.
//! Pure: the caller supplies the time and does the I/O (writing the dumps
//! this plans, serving what it publishes).

use std::collections::VecDeque;

use super::families::{self, Family, FlightCounts, Inputs};
use super::flight::{Chunk, FlightWindow, Plan};
use super::stall_watch::{StallWatch, Trigger};
use super::totals::Totals;
use crate::model::{kernel_since, Analysis};
use crate::record::{ChunkBuilder, WriteError};
use crate::stream::{Entry, FlightTrigger, Header, KernelSnapshot};

/// Stalls `/stalls` lists, the latest.
pub const RECENT_STALLS: usize = 100;
/// Stalls the analysis keeps, with their samples: enough for `/stalls`
/// and for every stall to settle before it is dropped, at a bounded cost
/// over months.
const KEPT_STALLS: usize = 2_000;
/// `/why` covers about the last minute: it keeps a kernel snapshot every
/// `WHY_STEP_NS` as a baseline, and answers from the oldest of the last
/// `WHY_BASELINES`.
const WHY_STEP_NS: u64 = 10_000_000_000;
const WHY_BASELINES: usize = 7;
/// Memory the flight window may take (compressed chunks).
pub const FLIGHT_WINDOW_MAX_BYTES: usize = 128 << 20;

pub struct Node {
    header: Header,
    analysis: Analysis,
    totals: Totals,
    watch: StallWatch,
    flight: Option<Flight>,
    /// Baselines of `/why`'s window, oldest first.
    why_baselines: VecDeque<KernelSnapshot>,
}

struct Flight {
    window: FlightWindow,
    chunk: ChunkBuilder,
    chunk_start_ns: u64,
}

pub struct Settings {
    pub max_containers: usize,
    pub trigger_ns: u64,
    /// `None`: no flight recorder.
    pub keep_ns: Option<u64>,
}

impl Node {
    pub fn new(header: Header, settings: &Settings, now_ns: u64) -> Node {
        Node {
            analysis: Analysis::keeping(header.clone(), KEPT_STALLS),
            header,
            totals: Totals::new(settings.max_containers),
            watch: StallWatch::new(settings.trigger_ns),
            flight: settings.keep_ns.map(|keep_ns| Flight {
                window: FlightWindow::new(keep_ns, FLIGHT_WINDOW_MAX_BYTES),
                chunk: ChunkBuilder::default(),
                chunk_start_ns: now_ns,
            }),
            why_baselines: VecDeque::new(),
        }
    }

    pub fn apply(&mut self, entry: &Entry) -> Result<(), WriteError> {
        self.analysis.apply(entry);
        match entry {
            Entry::Kernel(k) => {
                self.totals.apply_kernel(k, &self.analysis);
                self.keep_why_baseline(k);
            }
            Entry::Throttle(t) => self.totals.apply_throttle(t, &self.analysis),
            Entry::Pressure(p) => self.totals.apply_pressure(p, &self.analysis),
            Entry::Records(_) | Entry::Names(_) => {}
        }
        if let Some(flight) = &mut self.flight {
            if let Entry::Names(_) = entry {
                let mut names = ChunkBuilder::default();
                names.push(entry)?;
                flight.window.push_names(names.finish()?);
            }
            flight.chunk.push(entry)?;
        }
        Ok(())
    }

    fn keep_why_baseline(&mut self, k: &KernelSnapshot) {
        let due = self
            .why_baselines
            .back()
            .is_none_or(|last| k.ts_ns >= last.ts_ns + WHY_STEP_NS);
        if due {
            self.why_baselines.push_back(k.clone());
            if self.why_baselines.len() > WHY_BASELINES {
                self.why_baselines.pop_front();
            }
        }
    }

    /// Once a second: close the flight chunk, count settled stalls, plan
    /// dumps around new long ones; returns the dumps now due.
    pub fn tick(&mut self, now_ns: u64) -> Result<Vec<Plan>, WriteError> {
        let triggers = self.watch.update(&self.analysis);
        let Some(flight) = &mut self.flight else {
            return Ok(Vec::new());
        };
        if !flight.chunk.is_empty() {
            flight.window.push(Chunk {
                start_ns: flight.chunk_start_ns,
                end_ns: now_ns,
                bytes: flight.chunk.finish()?,
            });
            flight.chunk_start_ns = now_ns;
        }
        for t in triggers {
            flight.window.trigger(t);
        }
        Ok(std::iter::from_fn(|| flight.window.due(now_ns)).collect())
    }

    /// A dump asked for by hand (SIGUSR1, `POST /dump`): the window up to
    /// now and the seconds after.
    pub fn trigger_now(&mut self, now_ns: u64) -> bool {
        match &mut self.flight {
            Some(flight) => {
                flight.window.trigger(Trigger {
                    start_ns: now_ns,
                    end_ns: now_ns,
                });
                true
            }
            None => false,
        }
    }

    /// The header and chunks of a planned dump.
    pub fn dump(&self, plan: &Plan) -> Option<(Header, impl Iterator<Item = &[u8]>)> {
        let flight = self.flight.as_ref()?;
        let header = Header {
            start_ns: flight.window.start_ns(plan),
            trigger: Some(FlightTrigger {
                start_ns: plan.trigger_ns,
                end_ns: plan.trigger_end_ns,
            }),
            ..self.header.clone()
        };
        Some((header, flight.window.contents(*plan)))
    }

    /// Unix time (ns) of a CLOCK_MONOTONIC time of this session.
    pub fn wall_clock_ns(&self, monotonic_ns: u64) -> i64 {
        monotonic_ns as i64 + self.header.wall_clock_offset_ns
    }

    pub fn families(&self, probe_cpu_seconds: f64, mut flight: FlightCounts) -> Vec<Family> {
        if let Some(f) = &self.flight {
            flight.coalesced = f.window.coalesced;
            flight.window_dropped = f.window.dropped_chunks;
        }
        families::families(&Inputs {
            totals: &self.totals,
            stalls: &self.watch.totals,
            takeovers: self.analysis.takeovers_by_cpu(),
            probe_cpu_seconds,
            guard: self.analysis.kernel().and_then(|k| k.cost_guard.as_deref()),
            flight,
        })
    }

    /// BPF programs' run time so far, by their own timing.
    pub fn bpf_run_time_ns(&self) -> u64 {
        self.analysis
            .kernel()
            .map_or(0, |k| k.programs.iter().map(|p| p.run_time_ns).sum())
    }

    /// `/why`: the report's run-queue rows over about the last minute (since
    /// the oldest baseline; all of serve's run in its first seconds), each
    /// with its wait by cause, the longest total wait first.
    pub fn why_json(&self) -> String {
        #[derive(serde::Serialize)]
        struct Why<'a> {
            /// The window, CLOCK_MONOTONIC ns.
            start_ns: u64,
            end_ns: u64,
            runq: &'a [crate::model::RunqRow],
        }
        let Some(latest) = self.analysis.kernel() else {
            return "null".into();
        };
        let (start_ns, window) = match self.why_baselines.front() {
            Some(base) if base.ts_ns < latest.ts_ns => (base.ts_ns, kernel_since(latest, base)),
            _ => (self.header.start_ns, latest.clone()),
        };
        let rows = self.analysis.why_rows(&window);
        serde_json::to_string(&Why {
            start_ns,
            end_ns: latest.ts_ns,
            runq: &rows,
        })
        .expect("why rows serialize")
    }

    /// The latest stalls as `/stalls` shows them: the report's stall rows.
    pub fn recent_stalls_json(&self) -> String {
        serde_json::to_string(&self.analysis.recent_stall_rows(RECENT_STALLS))
            .expect("stall rows serialize")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::Histogram;
    use crate::model::tests::{header, names, MS, NOISY};
    use crate::stream::{CgroupRunq, WaitCauses};

    const S: u64 = 1_000_000_000;

    /// The noisy cgroup's cumulative row at `t` seconds: one 5 ms wait a second, 4 ms of it
    /// behind another cgroup, 1 ms throttled.
    fn at(t: u64) -> Entry {
        let mut latency = Histogram::default();
        for _ in 0..t {
            latency.record(5 * MS);
        }
        Entry::Kernel(KernelSnapshot {
            ts_ns: header().start_ns + t * S,
            runq: vec![CgroupRunq {
                cgroup: NOISY,
                latency,
                count: t,
                total_ns: t * 5 * MS,
                max_ns: 5 * MS,
                why: Some(WaitCauses {
                    other_cgroup_ns: t * 4 * MS,
                    throttled_ns: t * MS,
                    ..WaitCauses::default()
                }),
                ..CgroupRunq::default()
            }],
            ..KernelSnapshot::default()
        })
    }

    fn why_after(seconds: u64) -> serde_json::Value {
        let settings = Settings {
            max_containers: 10,
            trigger_ns: 50 * MS,
            keep_ns: None,
        };
        let mut node = Node::new(header(), &settings, header().start_ns);
        node.apply(&names()).unwrap();
        for t in 1..=seconds {
            node.apply(&at(t)).unwrap();
        }
        serde_json::from_str(&node.why_json()).unwrap()
    }

    fn causes(row: &serde_json::Value) -> Vec<(String, u64)> {
        row["why"]["causes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["cause"].as_str().unwrap().to_owned(),
                    c["ns"].as_u64().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn why_covers_about_the_last_minute() {
        // Baselines at 1, 11, ... 81 s; the oldest of the last seven is at 21 s.
        let why = why_after(85);
        assert_eq!(why["start_ns"], header().start_ns + 21 * S);
        assert_eq!(why["end_ns"], header().start_ns + 85 * S);
        let [row] = why["runq"].as_array().unwrap().as_slice() else {
            panic!("{why}");
        };
        assert_eq!(row["cgroup"], "/noisy");
        assert_eq!(row["total_ns"], 64 * 5 * MS);
        assert_eq!(
            causes(row),
            [
                ("other_cgroup".to_owned(), 64 * 4 * MS),
                ("throttled".to_owned(), 64 * MS)
            ]
        );
    }

    #[test]
    fn in_its_first_seconds_why_covers_the_whole_run() {
        let why = why_after(1);
        assert_eq!(why["start_ns"], header().start_ns);
        assert_eq!(why["runq"][0]["total_ns"], 5 * MS);
        let why = why_after(5);
        assert_eq!(why["start_ns"], header().start_ns + S);
        assert_eq!(why["runq"][0]["total_ns"], 4 * 5 * MS);
    }

    #[test]
    fn before_any_snapshot_why_is_null() {
        assert_eq!(why_after(0), serde_json::Value::Null);
    }
}
