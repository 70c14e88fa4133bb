//! What `serve` knows of its node: the entry stream folded into the
//! analysis, the metric totals, the stall watch and the flight window.
//! Pure: the caller supplies the time and does the I/O (writing the dumps
//! this plans, serving what it publishes).

use super::families::{self, Family, FlightCounts, Inputs};
use super::flight::{Chunk, FlightWindow, Plan};
use super::stall_watch::{StallWatch, Trigger};
use super::totals::Totals;
use crate::model::Analysis;
use crate::record::{ChunkBuilder, WriteError};
use crate::stream::{Entry, FlightTrigger, Header};

/// Stalls `/stalls` lists, the latest.
pub const RECENT_STALLS: usize = 100;
/// Stalls the analysis keeps, with their samples: enough for `/stalls`
/// and for every stall to settle before it is dropped, at a bounded cost
/// over months.
const KEPT_STALLS: usize = 2_000;
/// Memory the flight window may take (compressed chunks).
pub const FLIGHT_WINDOW_MAX_BYTES: usize = 128 << 20;

pub struct Node {
    header: Header,
    analysis: Analysis,
    totals: Totals,
    watch: StallWatch,
    flight: Option<Flight>,
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
        }
    }

    pub fn apply(&mut self, entry: &Entry) -> Result<(), WriteError> {
        self.analysis.apply(entry);
        match entry {
            Entry::Kernel(k) => self.totals.apply_kernel(k, &self.analysis),
            Entry::Throttle(t) => self.totals.apply_throttle(t, &self.analysis),
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

    /// The latest stalls as `/stalls` shows them: the report's stall rows.
    pub fn recent_stalls_json(&self) -> String {
        serde_json::to_string(&self.analysis.recent_stall_rows(RECENT_STALLS))
            .expect("stall rows serialize")
    }
}
