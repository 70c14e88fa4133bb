//! Analysis: turns the entry stream (probe records, snapshots, names) into
//! stalls with culprits, takeovers, run-queue, syscall, softirq and
//! throttling state. Pure: no I/O, no clock reads; time comes from the
//! entries. Live and replay share it.

mod culprits;
pub mod diff;
mod pressure;
mod report;
mod retained;
mod stall_waits;
mod stalls;
mod throttle;
mod waits;
mod window;

use std::collections::{BTreeMap, HashMap, VecDeque};

pub use culprits::{path_pattern, CulpritRow};
pub use report::{
    unix_ns, utc, Distribution, Finding, HardirqRow, Holder, Quota, Range, Report, ReportScope,
    RunqEventRow, RunqRow, SlowSyscallRow, StallRow, SyscallRow, TakeoverRow, ThrottleRow,
    TimeSpec, WhyCause, WhyRow,
};
pub use stalls::{Stall, StallKind};
pub use waits::waits_by_design;
pub use window::since as kernel_since;

use crate::cgroup::{container_of, PodNames};
use crate::event::{self, Event, RunqWait, SlowSyscall};
use crate::stream::{Entry, Header, KernelSnapshot};
use pressure::PressureTracker;
use stalls::StallTracker;
use throttle::ThrottleTracker;

/// Events of each list kept for display and reports (oldest dropped).
const MAX_KEPT: usize = 10_000;

pub struct Analysis {
    header: Header,
    names: Names,
    /// Latest time seen in any entry (CLOCK_MONOTONIC ns).
    last_ts: u64,
    /// Latest cumulative kernel aggregates.
    kernel: Option<KernelSnapshot>,
    /// What the report is cut to.
    scope: ReportScope,
    /// With a window: the aggregates at its start.
    baseline: Option<KernelSnapshot>,
    throttle: ThrottleTracker,
    pressure: PressureTracker,
    stalls: StallTracker,
    /// Waits over the threshold with their ids (see `next_id`).
    runq_waits: VecDeque<Numbered<RunqWait>>,
    takeovers: VecDeque<Numbered<RunqWait>>,
    slow_syscalls: VecDeque<Numbered<SlowCall>>,
    /// The id the next wait, takeover or slow call gets: one sequence, so an
    /// id names one record of the analysis.
    next_id: u64,
    undecodable_records: u64,
    /// ksoftirqd waits over the threshold since the start, by CPU (the
    /// `takeovers` list keeps only the latest).
    takeovers_by_cpu: BTreeMap<u32, u64>,
}

/// A record of the analysis with its id (stable for a recording: ids are
/// given in the order the records come).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Numbered<T> {
    pub id: u64,
    pub item: T,
}

/// A slow call and the kernel and user stack the sampler found it in most
/// often (empty when no tick found it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlowCall {
    pub call: SlowSyscall,
    pub samples: usize,
    pub kernel_stack: Vec<u64>,
    pub user_stack: Vec<u64>,
}

/// What names tables said so far.
#[derive(Default)]
struct Names {
    cgroups: HashMap<u64, String>,
    kernel_symbols: HashMap<u64, String>,
    user_symbols: HashMap<(u32, u64), String>,
    pods: PodNames,
}

impl Analysis {
    pub fn new(header: Header) -> Analysis {
        Analysis::keeping(header, stalls::MAX_STALLS)
    }

    /// An analysis that keeps at most `max_stalls` stalls (the oldest go
    /// first): a long-running `serve` keeps few, with their samples.
    pub fn keeping(header: Header, max_stalls: usize) -> Analysis {
        Analysis::with(header, max_stalls, ReportScope::default())
    }

    /// An analysis whose report is cut to `scope`: snapshots past its window
    /// are left out, and the aggregates count from its start.
    pub fn scoped(header: Header, scope: ReportScope) -> Analysis {
        Analysis::with(header, stalls::MAX_STALLS, scope)
    }

    fn with(header: Header, max_stalls: usize, scope: ReportScope) -> Analysis {
        Analysis {
            scope,
            baseline: None,
            last_ts: header.start_ns,
            header,
            names: Names::default(),
            kernel: None,
            throttle: ThrottleTracker::default(),
            pressure: PressureTracker::default(),
            stalls: StallTracker::new(max_stalls),
            runq_waits: VecDeque::new(),
            takeovers: VecDeque::new(),
            slow_syscalls: VecDeque::new(),
            next_id: 0,
            undecodable_records: 0,
            takeovers_by_cpu: BTreeMap::new(),
        }
    }

    pub fn apply(&mut self, entry: &Entry) {
        match entry {
            Entry::Records(bytes) => {
                for decoded in event::decode(bytes) {
                    match decoded {
                        Ok(e) => self.apply_event(e),
                        Err(_) => self.undecodable_records += 1,
                    }
                }
            }
            Entry::Kernel(k) if self.scope.after_window(k.ts_ns) => {}
            Entry::Kernel(k) => {
                self.last_ts = self.last_ts.max(k.ts_ns);
                self.kernel = Some(match self.kernel.take() {
                    Some(old) => retained::keep_removed(old, k.clone()),
                    None => k.clone(),
                });
                if self.scope.before_window(k.ts_ns) {
                    self.baseline = self.kernel.clone();
                }
            }
            Entry::Throttle(t) if self.scope.after_window(t.ts_ns) => {}
            Entry::Throttle(t) => {
                self.last_ts = self.last_ts.max(t.ts_ns);
                if self.scope.before_window(t.ts_ns) {
                    self.throttle = ThrottleTracker::default();
                }
                self.throttle.apply(t);
            }
            Entry::Pressure(p) if self.scope.after_window(p.ts_ns) => {}
            Entry::Pressure(p) => {
                self.last_ts = self.last_ts.max(p.ts_ns);
                if self.scope.before_window(p.ts_ns) {
                    self.pressure = PressureTracker::default();
                }
                self.pressure.apply(p);
            }
            Entry::Names(n) => {
                self.names.cgroups.extend(n.cgroups.iter().cloned());
                self.names
                    .kernel_symbols
                    .extend(n.kernel_symbols.iter().cloned());
                self.names.user_symbols.extend(
                    n.user_symbols
                        .iter()
                        .map(|(pid, addr, name)| ((*pid, *addr), name.clone())),
                );
                self.names.pods.pods.extend(n.pods.iter().cloned());
                self.names
                    .pods
                    .containers
                    .extend(n.containers.iter().cloned());
            }
        }
    }

    fn apply_event(&mut self, e: Event) {
        match e {
            Event::Runq(w) => {
                self.last_ts = self.last_ts.max(w.ts_ns);
                let id = self.take_id();
                self.stalls.runq(&w, StallKind::Runq, id);
                push_bounded(&mut self.runq_waits, Numbered { id, item: w });
            }
            Event::Takeover(w) => {
                self.last_ts = self.last_ts.max(w.ts_ns);
                let id = self.take_id();
                self.stalls.runq(&w, StallKind::Ksoftirqd, id);
                *self.takeovers_by_cpu.entry(w.cpu).or_default() += 1;
                push_bounded(&mut self.takeovers, Numbered { id, item: w });
            }
            Event::Softirq(s) => {
                self.last_ts = self.last_ts.max(s.ts_ns);
                self.stalls.softirq(&s);
            }
            Event::Syscall(call) => {
                self.last_ts = self.last_ts.max(call.ts_ns);
                self.stalls.syscall(&call);
                let id = self.take_id();
                let item = self.with_stack(call);
                push_bounded(&mut self.slow_syscalls, Numbered { id, item });
            }
            Event::Sample(s) => {
                self.last_ts = self.last_ts.max(s.ts_ns);
                self.stalls.sample(&s);
            }
            Event::Irqoff(s) => {
                self.last_ts = self.last_ts.max(s.ts_ns);
                self.stalls.irqoff(&s);
            }
            Event::Hardirq(h) => {
                self.last_ts = self.last_ts.max(h.ts_ns);
                self.stalls.hardirq(&h);
            }
        }
    }

    fn take_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id - 1
    }

    /// A slow call with the stack the sampler's ticks on its thread, while
    /// it ran, found most often.
    fn with_stack(&self, call: SlowSyscall) -> SlowCall {
        let start = call.ts_ns.saturating_sub(call.wall_ns);
        let samples = self
            .stalls
            .samples_of_task(call.task.tid, start, call.ts_ns);
        let top = report::most_frequent_stack(&samples);
        SlowCall {
            samples: samples.len(),
            kernel_stack: top.map(|s| s.kernel_stack.clone()).unwrap_or_default(),
            user_stack: top.map(|s| s.user_stack.clone()).unwrap_or_default(),
            call,
        }
    }

    /// The cgroup path of an id, or `cgroup#<id>` when it never resolved
    /// (removed before it was seen).
    pub fn cgroup_path(&self, id: u64) -> String {
        self.names
            .cgroups
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("cgroup#{id}"))
    }

    /// The container label of a cgroup path (see `cgroup::container_of`),
    /// with the pod and container names the stream gave.
    pub fn container_of_path(&self, cgroup_path: &str) -> String {
        container_of(cgroup_path, &self.names.pods)
    }

    /// A kernel frame's name, or its address.
    pub fn kernel_symbol(&self, addr: u64) -> String {
        self.names
            .kernel_symbols
            .get(&addr)
            .cloned()
            .unwrap_or_else(|| format!("{addr:#x}"))
    }

    /// A user frame's name in process `pid`, or its address.
    pub fn user_symbol(&self, pid: u32, addr: u64) -> String {
        self.names
            .user_symbols
            .get(&(pid, addr))
            .cloned()
            .unwrap_or_else(|| format!("{addr:#x}"))
    }

    pub fn stalls(&self) -> impl DoubleEndedIterator<Item = &Stall> + ExactSizeIterator {
        self.stalls.stalls()
    }

    pub fn report(&self) -> Report {
        report::build(self)
    }

    /// The latest `n` stalls as the report shows them, oldest first.
    pub fn recent_stall_rows(&self, n: usize) -> Vec<StallRow> {
        let stalls = self.stalls.stalls();
        let skip = stalls.len().saturating_sub(n);
        stalls
            .skip(skip)
            .map(|s| report::stall_row(self, s))
            .collect()
    }

    /// The run-queue rows of the report (each with its wait by cause) over
    /// `window` (kernel aggregates of a window: `kernel_since`), the longest
    /// total wait first.
    pub fn why_rows(&self, window: &KernelSnapshot) -> Vec<RunqRow> {
        let mut rows = report::runq_rows(self, Some(window));
        rows.sort_by(|x, y| {
            y.total_ns
                .cmp(&x.total_ns)
                .then_with(|| x.cgroup.cmp(&y.cgroup))
        });
        rows
    }

    /// Latest time any entry carried (CLOCK_MONOTONIC ns).
    pub fn now_ns(&self) -> u64 {
        self.last_ts
    }

    /// The latest cumulative kernel aggregates, once a snapshot came.
    pub fn kernel(&self) -> Option<&KernelSnapshot> {
        self.kernel.as_ref()
    }

    /// The kernel aggregates over the scope's window (all of them without one).
    pub fn kernel_in_scope(&self) -> Option<KernelSnapshot> {
        let latest = self.kernel.as_ref()?;
        Some(match &self.baseline {
            Some(baseline) => window::since(latest, baseline),
            None => latest.clone(),
        })
    }

    pub fn scope(&self) -> &ReportScope {
        &self.scope
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// ksoftirqd waits over the threshold since the start, by CPU.
    pub fn takeovers_by_cpu(&self) -> &BTreeMap<u32, u64> {
        &self.takeovers_by_cpu
    }

    /// Records that could not be decoded since the start.
    pub fn undecodable_records(&self) -> u64 {
        self.undecodable_records
    }

    /// The container label of a cgroup id (see `cgroup::container_of`).
    pub fn container(&self, cgroup: u64) -> String {
        self.container_of_path(&self.cgroup_path(cgroup))
    }
}

fn push_bounded<T>(queue: &mut VecDeque<T>, item: T) {
    if queue.len() == MAX_KEPT {
        queue.pop_front();
    }
    queue.push_back(item);
}

#[cfg(test)]
pub(crate) mod tests;
