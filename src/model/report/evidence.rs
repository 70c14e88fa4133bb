//! What the samples say about a stall: the culprit's most frequent stack,
//! its call and file, and for an irqs-off gap what the first tick after it
//! found. Pure.

use std::collections::HashMap;

use super::{CulpritDetail, StackOwner};
use crate::event::{HardirqRun, Sample};
use crate::model::stalls::Culprit;
use crate::model::Analysis;
use crate::modes::{StealSource, SyscallMode};
use crate::syscall_table;

pub(super) fn gap_evidence(a: &Analysis, tick: &Sample, hardirq: Option<&HardirqRun>) -> String {
    let gap_ms = tick.gap_ns as f64 / 1e6;
    let steal = if tick.gap_steal_ns > 0 {
        format!(
            " (the hypervisor took {:.1} ms of it)",
            tick.gap_steal_ns as f64 / 1e6
        )
    } else if unaccounted_vm(a) {
        " (unconfirmed on a VM without steal accounting: the host may have taken the vCPU)".into()
    } else {
        String::new()
    };
    if let Some(h) = hardirq {
        return format!(
            "no sampler tick for {gap_ms:.1} ms{steal}: {} ran {:.1} ms of it, interrupts off, \
             over {} [{}]",
            irq_run_name(a, h),
            h.run_ns as f64 / 1e6,
            h.ctx.comm,
            h.ctx.tid
        );
    }
    if tick.task.tid == 0 {
        return format!(
            "no sampler tick for {gap_ms:.1} ms{steal} and the CPU was idle after it: no guest-side cause, likely the hypervisor"
        );
    }
    let place = match (tick.kernel_stack.first(), tick.syscall) {
        (Some(&frame), Some(nr)) => format!(
            "in the kernel at {} inside {}",
            a.kernel_symbol(frame),
            syscall_table::name(nr)
        ),
        (Some(&frame), None) => format!("in the kernel at {}", a.kernel_symbol(frame)),
        (None, _) => "in user mode (no guest-side cause: likely the hypervisor)".into(),
    };
    format!(
        "no sampler tick for {gap_ms:.1} ms{steal}; the first one found {} [{}] {place}",
        tick.task.comm, tick.task.tid
    )
}

/// Whether the recording was made on a VM (or a machine that may be one) whose gaps had no
/// steal taken out: the hypervisor's share of a gap is not known there.
fn unaccounted_vm(a: &Analysis) -> bool {
    let header = &a.header;
    header.settings.steal == StealSource::None
        && header.host.machine.as_ref().is_some_and(|m| m.may_be_vm())
}

/// What ran in hard interrupt context: "the hardirq handler virtio0 (irq 24)" or "the
/// hrtimer callback tick_nohz_handler".
pub(super) fn irq_run_name(a: &Analysis, h: &HardirqRun) -> String {
    match h.hrtimer {
        Some(function) => format!("the hrtimer callback {}", a.kernel_symbol(function)),
        None => format!("the hardirq handler {} (irq {})", h.handler, h.irq),
    }
}

/// Report form of a culprit: names resolved, call details, what it was
/// doing, the stack it was seen in most often (its own samples, else any on
/// the CPU, named as another task's).
pub(super) fn culprit_detail(a: &Analysis, c: &Culprit, samples: &[Sample]) -> CulpritDetail {
    let own: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.task.tid == c.task.tid)
        .collect();
    let activity = activity_of(&own, a.header().settings.syscalls != SyscallMode::Off)
        .or(c.syscall.map(Activity::Syscall));
    let pool: Vec<&Sample> = if own.is_empty() {
        samples.iter().collect()
    } else {
        own
    };
    let top = most_frequent_stack(&pool);
    let cgroup = a.cgroup_path(c.task.cgroup);
    let syscall = match activity {
        Some(Activity::Syscall(nr)) => Some(nr),
        _ => None,
    };
    // The call's details only where it is what the culprit was doing.
    let call = c.call.as_ref().filter(|call| syscall == Some(call.nr));
    CulpritDetail {
        pid: c.task.pid,
        tid: c.task.tid,
        comm: c.task.comm.clone(),
        container: a.container_of_path(&cgroup),
        cgroup,
        syscall: syscall.map(syscall_table::name),
        activity: activity.map(|what| what.name()),
        path: call.and_then(|call| call.path.text()),
        oncpu_ns: call.map(|call| call.oncpu_ns),
        wall_ns: call.map(|call| call.wall_ns),
        softirq_ns: call.map(|call| call.softirq_ns),
        stack: top
            .map(|s| s.kernel_stack.iter().map(|&f| a.kernel_symbol(f)).collect())
            .unwrap_or_default(),
        user_stack: top
            .map(|s| {
                s.user_stack
                    .iter()
                    .map(|&f| a.user_symbol(s.task.pid, f))
                    .collect()
            })
            .unwrap_or_default(),
        stack_of: top.map(|s| StackOwner {
            tid: s.task.tid,
            comm: s.task.comm.clone(),
        }),
        samples: samples.len(),
    }
}

/// What a task was doing on its CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Activity {
    /// Inside this syscall.
    Syscall(u32),
    /// In the kernel outside any syscall (a kernel thread, a page fault, an interrupt).
    Kernel,
    /// In the kernel, where syscalls are not watched (`--syscalls off`).
    KernelUnwatched,
    /// Running its own code.
    User,
}

impl Activity {
    fn of(s: &Sample, syscalls_watched: bool) -> Activity {
        match (s.syscall, s.kernel_stack.is_empty()) {
            (Some(nr), _) => Activity::Syscall(nr),
            (None, true) => Activity::User,
            (None, false) if syscalls_watched => Activity::Kernel,
            (None, false) => Activity::KernelUnwatched,
        }
    }

    fn name(self) -> String {
        match self {
            Activity::Syscall(nr) => syscall_table::name(nr),
            Activity::Kernel => "kernel (no syscall)".into(),
            Activity::KernelUnwatched => "kernel".into(),
            Activity::User => "user code".into(),
        }
    }
}

/// What the task's own samples found it doing most often (on a tie, the earliest);
/// None without samples.
fn activity_of(own: &[&Sample], syscalls_watched: bool) -> Option<Activity> {
    let mut counts: HashMap<Activity, (usize, u64)> = HashMap::new();
    for s in own {
        let entry = counts
            .entry(Activity::of(s, syscalls_watched))
            .or_insert((0, s.ts_ns));
        entry.0 += 1;
        entry.1 = entry.1.min(s.ts_ns);
    }
    counts
        .into_iter()
        .max_by_key(|(_, (n, first))| (*n, std::cmp::Reverse(*first)))
        .map(|(what, _)| what)
}

/// The sample whose kernel stack came up most often (on a tie, the earliest).
pub(in crate::model) fn most_frequent_stack<'s>(samples: &[&'s Sample]) -> Option<&'s Sample> {
    let mut counts: HashMap<&[u64], (usize, &'s Sample)> = HashMap::new();
    for s in samples {
        counts.entry(&s.kernel_stack).or_insert((0, s)).0 += 1;
    }
    counts
        .into_values()
        .max_by_key(|(n, s)| (*n, std::cmp::Reverse(s.ts_ns)))
        .map(|(_, s)| s)
}
