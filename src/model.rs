//! Analysis: turns the entry stream (probe records, snapshots, names) into
//! stalls with culprits, takeovers, run-queue, syscall, softirq and
//! throttling state. Pure: no I/O, no clock reads; time comes from the
//! entries. Live and replay share it.

mod culprits;
mod report;
mod retained;
mod stalls;
mod throttle;
mod waits;

use std::collections::{BTreeMap, HashMap, VecDeque};

pub use culprits::{path_pattern, CulpritRow};
pub use report::{HardirqRow, Report, RunqRow, StallRow, SyscallRow, ThrottleRow};
pub use stalls::{Stall, StallKind};
pub use waits::waits_by_design;

use crate::cgroup::{container_of, PodNames};
use crate::event::{self, Event, RunqWait, SlowSyscall};
use crate::stream::{Entry, Header, KernelSnapshot};
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
    throttle: ThrottleTracker,
    stalls: StallTracker,
    runq_waits: VecDeque<RunqWait>,
    takeovers: VecDeque<RunqWait>,
    slow_syscalls: VecDeque<SlowSyscall>,
    undecodable_records: u64,
    /// ksoftirqd waits over the threshold since the start, by CPU (the
    /// `takeovers` list keeps only the latest).
    takeovers_by_cpu: BTreeMap<u32, u64>,
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
        Analysis {
            last_ts: header.start_ns,
            header,
            names: Names::default(),
            kernel: None,
            throttle: ThrottleTracker::default(),
            stalls: StallTracker::new(max_stalls),
            runq_waits: VecDeque::new(),
            takeovers: VecDeque::new(),
            slow_syscalls: VecDeque::new(),
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
            Entry::Kernel(k) => {
                self.last_ts = self.last_ts.max(k.ts_ns);
                self.kernel = Some(match self.kernel.take() {
                    Some(old) => retained::keep_removed(old, k.clone()),
                    None => k.clone(),
                });
            }
            Entry::Throttle(t) => {
                self.last_ts = self.last_ts.max(t.ts_ns);
                self.throttle.apply(t);
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
                self.stalls.runq(&w, StallKind::Runq);
                push_bounded(&mut self.runq_waits, w);
            }
            Event::Takeover(w) => {
                self.last_ts = self.last_ts.max(w.ts_ns);
                self.stalls.runq(&w, StallKind::Ksoftirqd);
                *self.takeovers_by_cpu.entry(w.cpu).or_default() += 1;
                push_bounded(&mut self.takeovers, w);
            }
            Event::Softirq(s) => {
                self.last_ts = self.last_ts.max(s.ts_ns);
                self.stalls.softirq(&s);
            }
            Event::Syscall(call) => {
                self.last_ts = self.last_ts.max(call.ts_ns);
                self.stalls.syscall(&call);
                push_bounded(&mut self.slow_syscalls, call);
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

    /// Latest time any entry carried (CLOCK_MONOTONIC ns).
    pub fn now_ns(&self) -> u64 {
        self.last_ts
    }

    /// The latest cumulative kernel aggregates, once a snapshot came.
    pub fn kernel(&self) -> Option<&KernelSnapshot> {
        self.kernel.as_ref()
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
