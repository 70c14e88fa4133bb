//! Analysis: turns the entry stream (probe records, snapshots, names) into
//! stalls with culprits, takeovers, run-queue, syscall, softirq and
//! throttling state. Pure: no I/O, no clock reads; time comes from the
//! entries. Live and replay share it.

mod culprits;
mod report;
mod stalls;
mod throttle;
mod waits;

use std::collections::{HashMap, VecDeque};

pub use culprits::{path_pattern, CulpritRow};
pub use report::{Report, RunqRow, StallRow, SyscallRow, ThrottleRow};
pub use stalls::{Stall, StallKind};
pub use waits::waits_by_design;

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
}

/// What names tables said so far.
#[derive(Default)]
struct Names {
    cgroups: HashMap<u64, String>,
    kernel_symbols: HashMap<u64, String>,
    user_symbols: HashMap<(u32, u64), String>,
}

impl Analysis {
    pub fn new(header: Header) -> Analysis {
        Analysis {
            last_ts: header.start_ns,
            header,
            names: Names::default(),
            kernel: None,
            throttle: ThrottleTracker::default(),
            stalls: StallTracker::default(),
            runq_waits: VecDeque::new(),
            takeovers: VecDeque::new(),
            slow_syscalls: VecDeque::new(),
            undecodable_records: 0,
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
                self.kernel = Some(k.clone());
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
}

fn push_bounded<T>(queue: &mut VecDeque<T>, item: T) {
    if queue.len() == MAX_KEPT {
        queue.pop_front();
    }
    queue.push_back(item);
}

#[cfg(test)]
mod stall_tests;
#[cfg(test)]
mod tests;
