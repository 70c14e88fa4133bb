//! Stall records: intervals on one CPU during which ready work waited past
//! the threshold (a softirq, ksoftirqd, a runnable task) or the sampler saw
//! no tick (irqs off). Overlapping signals on a CPU merge into one stall;
//! each names its culprit, enriched later by the culprit's slow syscall and
//! the stack samples taken inside the interval.

use std::collections::{HashMap, VecDeque};
use std::fmt;

use serde::Serialize;

use super::stall_waits::{StallWaits, WaitRef};
use crate::event::{
    HardirqRun, RunqWait, Sample, SlowSyscall, SoftirqDelay, TaskRef, WaitMigrated,
};

/// Stalls kept by default (oldest dropped first).
pub const MAX_STALLS: usize = 50_000;
/// Recent stalls per CPU that a new signal may still overlap.
const OPEN_PER_CPU: usize = 64;
/// Samples kept per CPU to attach to stalls that end later.
const RECENT_SAMPLES_PER_CPU: usize = 4_000;
/// Hardirq handler runs kept per CPU to explain gaps reported after them.
const RECENT_HARDIRQS_PER_CPU: usize = 256;
/// Handler runs kept per stall.
const HARDIRQS_PER_STALL: usize = 16;
/// Slow calls kept to enrich stalls that are reported after the call ended.
const RECENT_CALLS: usize = 4_096;
/// Stack samples kept per stall.
const SAMPLES_PER_STALL: usize = 400;
/// The longest a stall grows by merging: on a saturated CPU waits overlap without end, and
/// one "stall" covering minutes would hide when things went wrong. A signal that would
/// stretch a stall past this starts the next one (a single longer signal is one stall).
pub const MAX_MERGED_STALL_NS: u64 = 1_000_000_000;

/// What kind of waiting made the stall. A merged stall takes the greatest of its waits'
/// kinds, and is `Irqoff` only when sampler gaps cover at least half of it (a wait that merely
/// contains a gap keeps its kind). Serialized (and printed) by `name`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StallKind {
    /// A runnable task waited for its CPU.
    Runq,
    /// A runnable task waited because its cgroup's (or an ancestor's) CFS quota was used up.
    Throttled,
    /// ksoftirqd/N waited for its CPU (a takeover).
    Ksoftirqd,
    /// A raised softirq waited to run.
    Softirq,
    /// The sampler saw no tick: interrupts were off (or the vCPU did not run).
    Irqoff,
}

impl StallKind {
    /// As in reports and the JSON: "runq", "throttled", "ksoftirqd", "softirq", "irqoff".
    pub fn name(self) -> &'static str {
        match self {
            StallKind::Runq => "runq",
            StallKind::Throttled => "throttled",
            StallKind::Ksoftirqd => "ksoftirqd",
            StallKind::Softirq => "softirq",
            StallKind::Irqoff => "irqoff",
        }
    }
}

impl fmt::Display for StallKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// What waited during a stall.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Waited {
    /// A softirq vector that waited to run.
    pub softirq: Option<u32>,
    /// The most telling task that waited: ksoftirqd/N, else one kept off
    /// its CPU by another cgroup's task, else the one that waited longest.
    pub task: Option<TaskRef>,
    pub task_wait_ns: u64,
    /// Of `task_wait_ns`, the time the hypervisor took the vCPU (steal).
    pub task_steal_ns: u64,
    /// `task` waited behind a task of another cgroup (a neighbour).
    pub behind_neighbour: bool,
    /// `task`'s CPU was idle for most of its wait: no task held it (forced
    /// idle, or a wakeup that did not get the CPU; a quota is `throttled`).
    pub cpu_idle: bool,
    /// `task`'s wait began on another CPU and moved to the stall's.
    pub migrated: Option<WaitMigrated>,
}

/// Who held the CPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Culprit {
    pub task: TaskRef,
    /// The syscall it was inside, if any.
    pub syscall: Option<u32>,
    /// When that syscall started (ns), if known.
    pub syscall_start_ns: Option<u64>,
    /// From its slow-call record, once the call has ended.
    pub call: Option<SlowSyscall>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stall {
    pub id: u64,
    pub cpu: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub kind: StallKind,
    pub waited: Waited,
    pub culprit: Option<Culprit>,
    /// `Throttled` stalls: the cgroup whose CPU quota ran out (the waiter's or an ancestor).
    pub throttled_cgroup: Option<u64>,
    /// The greatest kind of the waits merged in (None: only sampler gaps).
    wait_kind: Option<StallKind>,
    /// The time the merged sampler gaps cover.
    gap_ns: u64,
    /// How sure the culprit is (see `Strength`).
    strength: Strength,
    /// Among signals of that strength: ns of waiting each holder (tid)
    /// accounts for; the culprit is the one with the most.
    culprit_weights: Vec<(u32, u64)>,
    /// Signals merged into this stall.
    pub signals: u32,
    /// The task waits merged in, and the longest single signal.
    pub waits: StallWaits,
    /// Stack samples taken on this CPU inside the interval.
    pub samples: Vec<Sample>,
    /// For irqs-off gaps: the first sampler tick after the gap, the only
    /// evidence of what the CPU was doing (or that the host did not run it).
    pub first_tick: Option<Sample>,
    /// Long hardirq handler runs inside the interval.
    pub hardirqs: Vec<HardirqRun>,
}

impl Stall {
    pub fn duration_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }

    /// The longest handler run, when hardirq handlers ran at least half of the stall's gaps
    /// (the stall is irqs-off for their sake, not the interrupted task's).
    pub fn hardirq_cause(&self) -> Option<&HardirqRun> {
        // Runs nest (a handler that dispatches other irqs): count the time they cover once.
        let mut spans: Vec<(u64, u64)> = self
            .hardirqs
            .iter()
            .map(|h| (h.ts_ns.saturating_sub(h.run_ns), h.ts_ns))
            .collect();
        spans.sort_unstable();
        let (mut ran, mut reached) = (0, 0);
        for (start, end) in spans {
            let start = start.max(reached);
            if end > start {
                ran += end - start;
                reached = end;
            }
        }
        (self.kind == StallKind::Irqoff && ran > 0 && ran * 2 >= self.gap_ns)
            .then(|| self.hardirqs.iter().max_by_key(|h| h.run_ns))
            .flatten()
    }
}

/// How directly a signal names the task that held the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Strength {
    None,
    /// The task a softirq ran inline in after its delay.
    Inline,
    /// The task that ran while a runnable task waited.
    Ran,
    /// The task that held the CPU while ksoftirqd waited, or the first
    /// tick after an irqs-off gap.
    Held,
    /// Hardirq handlers ran most of the stall's gaps: no task held the CPU.
    Hardirq,
}

/// One signal, normalized.
struct Signal {
    cpu: u32,
    start_ns: u64,
    end_ns: u64,
    waited: Waited,
    culprit: Option<Culprit>,
    throttled_cgroup: Option<u64>,
    /// As in `Stall`: the kind of the waits in it, and the time of its sampler gaps.
    wait_kind: Option<StallKind>,
    gap_ns: u64,
    strength: Strength,
    sample: Option<Sample>,
    waits: StallWaits,
}

pub struct StallTracker {
    /// At most this many stalls are kept (oldest dropped first).
    max_stalls: usize,
    stalls: VecDeque<Stall>,
    next_id: u64,
    /// cpu -> ids of its most recent stalls
    open: HashMap<u32, VecDeque<u64>>,
    recent_samples: HashMap<u32, VecDeque<Sample>>,
    recent_hardirqs: HashMap<u32, VecDeque<HardirqRun>>,
    recent_calls: VecDeque<SlowSyscall>,
}

impl StallTracker {
    pub fn new(max_stalls: usize) -> Self {
        StallTracker {
            max_stalls: max_stalls.max(1),
            stalls: VecDeque::new(),
            next_id: 0,
            open: HashMap::new(),
            recent_samples: HashMap::new(),
            recent_hardirqs: HashMap::new(),
            recent_calls: VecDeque::new(),
        }
    }

    pub fn stalls(&self) -> impl DoubleEndedIterator<Item = &Stall> + ExactSizeIterator {
        self.stalls.iter()
    }

    /// A task's wait (`kind` Runq) or ksoftirqd's (Ksoftirqd); `wait_id` is its id in the
    /// analysis.
    pub fn runq(&mut self, w: &RunqWait, kind: StallKind, wait_id: u64) {
        let waits = StallWaits::wait(WaitRef {
            id: wait_id,
            tid: w.waiter.tid,
            wait_ns: w.wait_ns,
        });
        if let Some(throttle) = w.throttle {
            return self.throttled(w, throttle.cgroup, waits);
        }
        let strength = if w.ran.tid == 0 || w.ran.comm.starts_with("ksoftirqd/") {
            Strength::None
        } else if kind == StallKind::Ksoftirqd {
            Strength::Held
        } else {
            Strength::Ran
        };
        self.add(Signal {
            cpu: w.cpu,
            start_ns: w.ts_ns.saturating_sub(w.wait_ns),
            end_ns: w.ts_ns,
            waited: Waited {
                softirq: None,
                task: Some(w.waiter.clone()),
                task_wait_ns: w.wait_ns,
                task_steal_ns: w.steal_ns,
                behind_neighbour: w.ran.tid != 0 && w.ran.cgroup != w.waiter.cgroup,
                cpu_idle: w.ran.tid == 0,
                migrated: w.migrated,
            },
            culprit: culprit_of(&w.ran, w.ran_syscall.map(|(nr, ns)| (nr, w.ts_ns - ns))),
            throttled_cgroup: None,
            wait_kind: Some(kind),
            gap_ns: 0,
            strength,
            sample: None,
            waits,
        });
    }

    /// A wait that a CPU quota explains: whoever ran meanwhile only filled the CPU, so there
    /// is no culprit.
    fn throttled(&mut self, w: &RunqWait, cgroup: u64, waits: StallWaits) {
        self.add(Signal {
            cpu: w.cpu,
            start_ns: w.ts_ns.saturating_sub(w.wait_ns),
            end_ns: w.ts_ns,
            waited: Waited {
                task: Some(w.waiter.clone()),
                task_wait_ns: w.wait_ns,
                task_steal_ns: w.steal_ns,
                migrated: w.migrated,
                ..Waited::default()
            },
            culprit: None,
            throttled_cgroup: Some(cgroup),
            wait_kind: Some(StallKind::Throttled),
            gap_ns: 0,
            strength: Strength::None,
            sample: None,
            waits,
        });
    }

    pub fn softirq(&mut self, s: &SoftirqDelay) {
        let inline = !s.in_ksoftirqd && s.ctx.tid != 0;
        self.add(Signal {
            cpu: s.cpu,
            start_ns: s.ts_ns.saturating_sub(s.delay_ns),
            end_ns: s.ts_ns,
            waited: Waited {
                softirq: Some(s.vector),
                ..Waited::default()
            },
            culprit: if inline {
                culprit_of(&s.ctx, s.ctx_syscall.map(|nr| (nr, 0)))
            } else {
                None
            },
            throttled_cgroup: None,
            wait_kind: Some(StallKind::Softirq),
            gap_ns: 0,
            strength: if inline {
                Strength::Inline
            } else {
                Strength::None
            },
            sample: None,
            waits: StallWaits::signal(s.delay_ns),
        });
    }

    pub fn irqoff(&mut self, s: &Sample) {
        self.add(Signal {
            cpu: s.cpu,
            start_ns: s.ts_ns.saturating_sub(s.gap_ns),
            end_ns: s.ts_ns,
            waited: Waited::default(),
            culprit: culprit_of(&s.task, s.syscall.map(|nr| (nr, 0))),
            throttled_cgroup: None,
            wait_kind: None,
            // Only the time the guest lost: the host's steal had interrupts on.
            gap_ns: s.gap_ns.saturating_sub(s.gap_steal_ns),
            strength: if s.task.tid == 0 {
                Strength::None
            } else {
                Strength::Held
            },
            sample: Some(s.clone()),
            waits: StallWaits::signal(s.gap_ns),
        });
    }

    /// A stack sample: kept for stalls reported later, attached to any
    /// known stall it falls in.
    pub fn sample(&mut self, s: &Sample) {
        let recent = self.recent_samples.entry(s.cpu).or_default();
        push_in_order(recent, s.clone(), |s| s.ts_ns, RECENT_SAMPLES_PER_CPU);
        let ids = self.open.get(&s.cpu).cloned().unwrap_or_default();
        for id in ids {
            if let Some(stall) = self.get_mut(id) {
                if (stall.start_ns..=stall.end_ns).contains(&s.ts_ns)
                    && stall.samples.len() < SAMPLES_PER_STALL
                {
                    stall.samples.push(s.clone());
                }
            }
        }
    }

    /// The recent samples of thread `tid` (on any CPU) from `start_ns` to `end_ns`.
    pub fn samples_of_task(&self, tid: u32, start_ns: u64, end_ns: u64) -> Vec<&Sample> {
        self.recent_samples
            .values()
            .flat_map(|recent| between(recent, |s| s.ts_ns, start_ns, end_ns))
            .filter(|s| s.task.tid == tid)
            .collect()
    }

    /// A long hardirq handler run: kept to explain the gaps it falls in, and given to the
    /// known stalls it overlaps.
    pub fn hardirq(&mut self, h: &HardirqRun) {
        let recent = self.recent_hardirqs.entry(h.cpu).or_default();
        if recent.len() == RECENT_HARDIRQS_PER_CPU {
            recent.pop_front();
        }
        recent.push_back(h.clone());
        let start = h.ts_ns.saturating_sub(h.run_ns);
        let ids = self.open.get(&h.cpu).cloned().unwrap_or_default();
        for id in ids {
            if self
                .get(id)
                .is_some_and(|s| start <= s.end_ns && s.start_ns <= h.ts_ns)
            {
                self.complete(id);
            }
        }
    }

    /// A slow call: completes the culprit of stalls it was running in.
    pub fn syscall(&mut self, call: &SlowSyscall) {
        push_in_order(
            &mut self.recent_calls,
            call.clone(),
            |c| c.ts_ns,
            RECENT_CALLS,
        );
        for stall in self.stalls.iter_mut().rev().take(OPEN_PER_CPU * 8) {
            if let Some(culprit) = &mut stall.culprit {
                if culprit.call.is_none()
                    && call_matches(culprit, call, stall.start_ns, stall.end_ns)
                {
                    attach_call(culprit, call);
                }
            }
        }
    }

    /// Fold the signal into the stalls of its CPU it overlaps, as long as the result spans at
    /// most MAX_MERGED_STALL_NS. A throttle is a diagnosis of its own: it merges only with
    /// waits of the same throttle, and they with it.
    fn add(&mut self, signal: Signal) {
        let open_ids = self.open.get(&signal.cpu).cloned().unwrap_or_default();
        let mut span = (signal.start_ns, signal.end_ns);
        let mut overlapping: Vec<u64> = Vec::new();
        for &id in &open_ids {
            let Some(s) = self.get(id) else {
                continue;
            };
            let merged = (span.0.min(s.start_ns), span.1.max(s.end_ns));
            if signal.start_ns <= s.end_ns
                && s.start_ns <= signal.end_ns
                && s.throttled_cgroup == signal.throttled_cgroup
                && merged.1 - merged.0 <= MAX_MERGED_STALL_NS
            {
                span = merged;
                overlapping.push(id);
            }
        }
        let id = match overlapping.split_first() {
            None => self.create(&signal),
            Some((&first, rest)) => {
                // The new signal may bridge several stalls: fold them in.
                for &other in rest {
                    if let Some(absorbed) = self.remove(other) {
                        self.merge(first, absorbed.into_signal());
                    }
                }
                first
            }
        };
        self.merge(id, signal);
        self.complete(id);
    }

    /// An empty stall where `signal` is; `merge` gives it the signal.
    fn create(&mut self, signal: &Signal) -> u64 {
        let (cpu, start_ns, end_ns) = (signal.cpu, signal.start_ns, signal.end_ns);
        let id = self.next_id;
        self.next_id += 1;
        if self.stalls.len() >= self.max_stalls {
            if let Some(old) = self.stalls.pop_front() {
                if let Some(ids) = self.open.get_mut(&old.cpu) {
                    ids.retain(|&i| i != old.id);
                }
            }
        }
        self.stalls.push_back(Stall {
            id,
            cpu,
            start_ns,
            end_ns,
            kind: StallKind::Runq,
            waited: Waited::default(),
            culprit: None,
            throttled_cgroup: signal.throttled_cgroup,
            wait_kind: None,
            gap_ns: 0,
            strength: Strength::None,
            culprit_weights: Vec::new(),
            signals: 0,
            waits: StallWaits::default(),
            samples: Vec::new(),
            first_tick: None,
            hardirqs: Vec::new(),
        });
        let ids = self.open.entry(cpu).or_default();
        if ids.len() == OPEN_PER_CPU {
            ids.pop_front();
        }
        ids.push_back(id);
        id
    }

    fn merge(&mut self, id: u64, signal: Signal) {
        let Some(stall) = self.get_mut(id) else {
            return;
        };
        stall.start_ns = stall.start_ns.min(signal.start_ns);
        stall.end_ns = stall.end_ns.max(signal.end_ns);
        stall.wait_kind = stall.wait_kind.max(signal.wait_kind);
        stall.gap_ns += signal.gap_ns;
        stall.kind = stall_kind(stall.wait_kind, stall.gap_ns, stall.end_ns - stall.start_ns);
        stall.signals += 1;
        stall.waits.absorb(signal.waits);
        if stall.waited.softirq.is_none() {
            stall.waited.softirq = signal.waited.softirq;
        }
        // ksoftirqd is the most telling waiter; then a task kept waiting by
        // a neighbour (not by its own cgroup); then the longest wait.
        if let Some(task) = signal.waited.task {
            let rank = |t: &TaskRef, behind_neighbour: bool, wait: u64| {
                (t.comm.starts_with("ksoftirqd/"), behind_neighbour, wait)
            };
            let new = rank(
                &task,
                signal.waited.behind_neighbour,
                signal.waited.task_wait_ns,
            );
            let replace = stall.waited.task.as_ref().is_none_or(|old| {
                new > rank(
                    old,
                    stall.waited.behind_neighbour,
                    stall.waited.task_wait_ns,
                )
            });
            if replace {
                stall.waited.task = Some(task);
                stall.waited.task_wait_ns = signal.waited.task_wait_ns;
                stall.waited.task_steal_ns = signal.waited.task_steal_ns;
                stall.waited.behind_neighbour = signal.waited.behind_neighbour;
                stall.waited.cpu_idle = signal.waited.cpu_idle;
                stall.waited.migrated = signal.waited.migrated;
            }
        }
        if let Some(culprit) = signal.culprit.filter(|_| signal.strength > Strength::None) {
            let tid = culprit.task.tid;
            let weight = signal.end_ns - signal.start_ns;
            if signal.strength > stall.strength {
                stall.culprit = Some(culprit);
                stall.strength = signal.strength;
                stall.culprit_weights = vec![(tid, weight)];
            } else if signal.strength == stall.strength {
                let weight_of = |weights: &[(u32, u64)], tid: u32| {
                    weights.iter().find(|w| w.0 == tid).map_or(0, |w| w.1)
                };
                match stall.culprit_weights.iter_mut().find(|w| w.0 == tid) {
                    Some(w) => w.1 += weight,
                    None => stall.culprit_weights.push((tid, weight)),
                }
                let current = stall
                    .culprit
                    .as_ref()
                    .map_or(0, |c| weight_of(&stall.culprit_weights, c.task.tid));
                if weight_of(&stall.culprit_weights, tid) > current {
                    stall.culprit = Some(culprit);
                }
            }
        }
        if let Some(sample) = signal.sample {
            if stall
                .first_tick
                .as_ref()
                .is_none_or(|t| sample.gap_ns > t.gap_ns)
            {
                stall.first_tick = Some(sample.clone());
            }
            if stall.samples.len() < SAMPLES_PER_STALL {
                stall.samples.push(sample);
            }
        }
    }

    /// Pull in the samples, hardirq runs and the finished call that the (possibly grown)
    /// interval now covers; handlers that ran most of its gaps take the blame from the task
    /// they interrupted.
    fn complete(&mut self, id: u64) {
        let Some(stall) = self.get(id) else {
            return;
        };
        let (cpu, start, end) = (stall.cpu, stall.start_ns, stall.end_ns);
        let hardirqs: Vec<HardirqRun> = self
            .recent_hardirqs
            .get(&cpu)
            .into_iter()
            .flatten()
            .filter(|h| h.ts_ns.saturating_sub(h.run_ns) <= end && start <= h.ts_ns)
            .take(HARDIRQS_PER_STALL)
            .cloned()
            .collect();
        let mut have: Vec<u64> = stall.samples.iter().map(|s| s.ts_ns).collect();
        have.sort_unstable();
        let mut samples: Vec<&Sample> = self
            .recent_samples
            .get(&cpu)
            .into_iter()
            .flat_map(|recent| between(recent, |s| s.ts_ns, start, end))
            .collect();
        // A waiter moved here from another CPU was held there: its culprit's ticks on that
        // CPU show what it did meanwhile.
        if let (Some(moved), Some(culprit)) = (stall.waited.migrated, &stall.culprit) {
            samples.extend(
                self.samples_of_task(culprit.task.tid, start, end)
                    .into_iter()
                    .filter(|s| s.cpu == moved.from_cpu && moved.from_cpu != cpu),
            );
        }
        let samples: Vec<Sample> = samples
            .into_iter()
            .filter(|s| have.binary_search(&s.ts_ns).is_err())
            .cloned()
            .collect();
        // A call that ended before the interval began does not overlap it.
        let call = stall.culprit.as_ref().and_then(|c| {
            between(&self.recent_calls, |call| call.ts_ns, start, u64::MAX)
                .rev()
                .find(|call| call_matches(c, call, start, end))
                .cloned()
        });
        let Some(stall) = self.get_mut(id) else {
            return;
        };
        for s in samples {
            if stall.samples.len() < SAMPLES_PER_STALL {
                stall.samples.push(s);
            }
        }
        stall.samples.sort_by_key(|s| s.ts_ns);
        stall.hardirqs = hardirqs;
        if stall.hardirq_cause().is_some() {
            stall.culprit = None;
            stall.strength = Strength::Hardirq;
            stall.culprit_weights.clear();
        } else if stall.strength == Strength::Hardirq {
            // Waits merged in since made it another kind: their holders may name it again.
            stall.strength = Strength::None;
        }
        if let (Some(culprit), Some(call)) = (&mut stall.culprit, call) {
            if culprit.call.is_none() {
                attach_call(culprit, &call);
            }
        }
    }

    fn get(&self, id: u64) -> Option<&Stall> {
        self.index(id).map(|i| &self.stalls[i])
    }

    fn get_mut(&mut self, id: u64) -> Option<&mut Stall> {
        self.index(id).map(move |i| &mut self.stalls[i])
    }

    fn remove(&mut self, id: u64) -> Option<Stall> {
        let stall = self.stalls.remove(self.index(id)?)?;
        if let Some(ids) = self.open.get_mut(&stall.cpu) {
            ids.retain(|&i| i != id);
        }
        Some(stall)
    }

    /// Ids are increasing, so the deque is sorted by id.
    fn index(&self, id: u64) -> Option<usize> {
        self.stalls.binary_search_by_key(&id, |s| s.id).ok()
    }
}

impl Stall {
    /// A stall folded into another is re-applied as one signal.
    fn into_signal(self) -> Signal {
        Signal {
            cpu: self.cpu,
            start_ns: self.start_ns,
            end_ns: self.end_ns,
            waited: self.waited,
            culprit: self.culprit,
            throttled_cgroup: self.throttled_cgroup,
            wait_kind: self.wait_kind,
            gap_ns: self.gap_ns,
            strength: self.strength,
            sample: self.first_tick,
            waits: self.waits,
        }
    }
}

/// Sampler gaps make a stall irqs-off only when they cover at least half of it.
fn stall_kind(wait_kind: Option<StallKind>, gap_ns: u64, duration_ns: u64) -> StallKind {
    match wait_kind {
        Some(kind) if gap_ns.saturating_mul(2) < duration_ns => kind,
        _ => StallKind::Irqoff,
    }
}

fn culprit_of(task: &TaskRef, syscall: Option<(u32, u64)>) -> Option<Culprit> {
    (task.tid != 0).then(|| Culprit {
        task: task.clone(),
        syscall: syscall.map(|(nr, _)| nr),
        syscall_start_ns: syscall.map(|(_, start)| start).filter(|&s| s > 0),
        call: None,
    })
}

/// Adds `item` to `queue`, kept in order of `ts` (items arrive nearly in
/// order: from several CPUs' buffers), dropping the oldest beyond `cap`.
fn push_in_order<T>(queue: &mut VecDeque<T>, item: T, ts: impl Fn(&T) -> u64, cap: usize) {
    if queue.len() == cap {
        queue.pop_front();
    }
    let at = queue.partition_point(|x| ts(x) <= ts(&item));
    queue.insert(at, item);
}

/// The items of `queue` (in order of `ts`) from `start_ns` to `end_ns`: a
/// stall looks back over thousands of them, many times a second.
fn between<T>(
    queue: &VecDeque<T>,
    ts: impl Fn(&T) -> u64,
    start_ns: u64,
    end_ns: u64,
) -> std::collections::vec_deque::Iter<'_, T> {
    let from = queue.partition_point(|x| ts(x) < start_ns);
    let to = queue.partition_point(|x| ts(x) <= end_ns);
    queue.range(from..to.max(from))
}

/// Is `call` the syscall the culprit was inside during [start, end]? With
/// the syscall known, any overlap will do; without (the culprit was seen
/// just after the call returned, on its way back to user space), the call
/// must cover at least half of the interval.
pub(super) fn call_matches(culprit: &Culprit, call: &SlowSyscall, start: u64, end: u64) -> bool {
    let call_start = call.ts_ns.saturating_sub(call.wall_ns);
    if culprit.task.tid != call.task.tid {
        return false;
    }
    match culprit.syscall {
        Some(nr) => nr == call.nr && call_start <= end && call.ts_ns >= start,
        None => {
            let overlap = call.ts_ns.min(end).saturating_sub(call_start.max(start));
            overlap * 2 >= end - start
        }
    }
}

/// Give the culprit its call (and the call's number, if it had none).
fn attach_call(culprit: &mut Culprit, call: &SlowSyscall) {
    culprit.syscall = Some(call.nr);
    culprit.call = Some(call.clone());
}
