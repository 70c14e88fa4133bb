//! How a row of each table reads: one segment per column, in the order of
//! the table's column enum, and the short texts detail popups reuse (what
//! waited, the culprit chain, a kind's name and colour).

use std::fmt::Write as _;

use super::views::{ContainerView, CulpritView};
use crate::app::format;
use crate::app::view::{Segment, Tone};
use crate::model::{HardirqRow, Report, RunqRow, StallKind, StallRow, SyscallRow};

pub fn kind_tone(kind: StallKind) -> Tone {
    match kind {
        // A throttled task waited on the run queue too: same colour, its own label.
        StallKind::Runq | StallKind::Throttled => Tone::Runq,
        StallKind::Ksoftirqd => Tone::Ksoftirqd,
        StallKind::Softirq => Tone::Softirq,
        StallKind::Irqoff => Tone::Irqoff,
    }
}

/// A kind as the screen names it ("irqs-off" where reports say "irqoff").
pub fn kind_label(kind: StallKind) -> &'static str {
    match kind {
        StallKind::Irqoff => "irqs-off",
        kind => kind.name(),
    }
}

/// What waited, short: "NET_RX", "victim[300]", "NET_RX+ksoftirqd/1".
pub fn waited_text(stall: &StallRow) -> String {
    let task = stall
        .waited
        .comm
        .as_ref()
        .map(|comm| match stall.waited.pid {
            Some(pid) if !comm.starts_with("ksoftirqd/") => format!("{comm}[{pid}]"),
            _ => comm.clone(),
        });
    match (stall.waited.softirq, task) {
        (Some(vector), Some(task)) => format!("{vector}+{task}"),
        (Some(vector), None) => vector.to_string(),
        (None, Some(task)) => task,
        (None, None) if stall.kind == StallKind::Irqoff => "(interrupts off)".into(),
        (None, None) => "-".into(),
    }
}

/// What kept a throttled stall's task off: "throttled by its CPU quota (12ms / 100ms)", with
/// the cgroup when the quota is an ancestor's.
pub fn throttle_text(stall: &StallRow) -> Option<String> {
    let cgroup = stall.throttled_cgroup.as_ref()?;
    let quota = stall.quota.map_or(String::new(), |q| {
        format!(
            " ({} / {})",
            format::duration(q.quota_us * 1000),
            format::duration(q.period_us * 1000)
        )
    });
    let whose = if stall.waited.cgroup.as_ref() == Some(cgroup) {
        "its".to_string()
    } else {
        format!("{cgroup}'s")
    };
    Some(format!("throttled by {whose} CPU quota{quota}"))
}

/// A hardirq handler or hrtimer callback that ran most of a gap: "hardirq handler eth0-rx
/// (irq 25) ran 12ms", "hrtimer callback perf_swevent_hrtimer ran 12ms".
pub fn hardirq_text(h: &HardirqRow) -> String {
    match &h.hrtimer {
        Some(callback) => format!(
            "hrtimer callback {callback} ran {}",
            format::duration(h.run_ns)
        ),
        None => format!(
            "hardirq handler {} (irq {}) ran {}",
            h.handler,
            h.irq,
            format::duration(h.run_ns)
        ),
    }
}

/// Who held the CPU, as a chain: task, container, syscall, file, on-CPU.
pub fn culprit_chain(stall: &StallRow) -> String {
    if let Some(throttle) = throttle_text(stall) {
        return throttle;
    }
    if let Some(h) = &stall.hardirq {
        return hardirq_text(h);
    }
    let Some(c) = &stall.culprit else {
        if stall.waited.cpu_idle {
            return "(nobody: the CPU was idle)".into();
        }
        return "(nobody seen holding the CPU)".into();
    };
    let mut chain = format!("{}[{}]", c.comm, c.pid);
    // Most tasks run on the host: say where only when it is elsewhere.
    if c.container != "host" {
        let _ = write!(chain, " {}", c.container);
    }
    if let Some(activity) = &c.activity {
        let _ = write!(chain, " › {activity}");
    }
    if let Some(path) = c.path.as_ref().filter(|p| !p.is_empty()) {
        let _ = write!(chain, " › {path}");
    }
    if let Some(oncpu) = c.oncpu_ns {
        let _ = write!(chain, " › {} on-CPU", format::duration(oncpu));
    }
    chain
}

/// How a table says when: how long ago (live), or where in the recording
/// (replay, to the millisecond).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    Ago { now_ns: u64 },
    Offset { origin_ns: u64 },
}

impl When {
    pub fn text(self, ns: u64) -> String {
        match self {
            When::Ago { now_ns } => format::age(now_ns.saturating_sub(ns)),
            When::Offset { origin_ns } => format::offset(ns.saturating_sub(origin_ns)),
        }
    }
}

pub fn feed_cells(stall: &StallRow, when: When) -> Vec<Segment> {
    let end = stall.start_ns + stall.duration_ns;
    let at = match when {
        When::Ago { .. } => end,
        When::Offset { .. } => stall.start_ns,
    };
    vec![
        Segment::new(when.text(at), Tone::Dim),
        Segment::plain(stall.cpu.to_string()),
        Segment::plain(format::duration(stall.duration_ns)),
        Segment::new(format::duration(stall.longest_wait_ns), Tone::Strong),
        Segment::new(kind_label(stall.kind), kind_tone(stall.kind)),
        Segment::plain(waited_text(stall)),
        Segment::plain(culprit_chain(stall)),
    ]
}

/// A cgroup's worst wait while no stall crossed the threshold (a single
/// wait: its span is its length): marked as under it, with the task that
/// most often held the CPU during its waits.
pub fn wait_cells(row: &RunqRow, runq_threshold_ns: u64) -> Vec<Segment> {
    vec![
        Segment::new("-", Tone::Dim),
        Segment::new("-", Tone::Dim),
        Segment::plain(format::duration(row.max_ns)),
        Segment::new(format::duration(row.max_ns), Tone::Strong),
        Segment::new(
            format!("runq<{}", format::duration(runq_threshold_ns)),
            Tone::Dim,
        ),
        Segment::plain(&row.container),
        Segment::plain(holder_text(row)),
    ]
}

/// "hog /stalltop_noisy ×82 held the CPU most", or why there is no name.
fn holder_text(row: &RunqRow) -> String {
    match row.top_preemptors.first() {
        Some(p) => format!("{} {} ×{} held the CPU most", p.comm, p.container, p.count),
        None => "(no task seen holding the CPU 1ms or more)".into(),
    }
}

pub fn culprit_cells(view: &CulpritView, when: When) -> Vec<Segment> {
    let row = &view.row;
    vec![
        Segment::new(&row.comm, Tone::Strong),
        Segment::plain(&row.container),
        Segment::plain(call_text(row.syscall.as_deref(), row.path.as_deref())),
        Segment::plain(row.count.to_string()),
        Segment::new(format::duration(row.total_stall_ns), Tone::Strong),
        Segment::plain(format::duration(row.worst_ns)),
        Segment::new(when.text(row.last_seen_ns), Tone::Dim),
    ]
}

/// "read › /proc/slabinfo", "read", "-".
fn call_text(syscall: Option<&str>, path: Option<&str>) -> String {
    match (syscall, path.filter(|p| !p.is_empty())) {
        (Some(syscall), Some(path)) => format!("{syscall} › {path}"),
        (Some(syscall), None) => syscall.to_string(),
        (None, Some(path)) => path.to_string(),
        (None, None) => "-".into(),
    }
}

pub fn container_cells(c: &ContainerView, report: &Report) -> Vec<Segment> {
    let runq = c.runq.map(|i| &report.runq[i]);
    let throttle = c.throttle.map(|i| &report.throttling[i]);
    let ns = |v: Option<u64>| v.map_or("-".to_string(), format::duration);
    // The count first: a narrow column clips the name, never the number.
    let neighbour = runq
        .and_then(|r| r.top_preemptors.first())
        .map_or("-".to_string(), |p| format!("×{} {}", p.count, p.comm));
    let throttled_tone = match throttle {
        Some(t) if t.nr_throttled > 0 => Tone::Warn,
        _ => Tone::Normal,
    };
    vec![
        Segment::new(&c.container, Tone::Strong),
        Segment::plain(ns(runq.map(|r| r.p50_ns))),
        Segment::new(ns(runq.map(|r| r.p99_ns)), Tone::Strong),
        Segment::plain(ns(runq.map(|r| r.max_ns))),
        Segment::plain(
            runq.and_then(|r| r.why.as_ref())
                .map_or("-".into(), format::why_largest),
        ),
        Segment::plain(neighbour),
        Segment::new(
            throttle.map_or("-".into(), |t| format!("{:.1}", t.throttled_pct)),
            throttled_tone,
        ),
        Segment::new(ns(throttle.map(|t| t.throttled_ns)), throttled_tone),
        Segment::plain(c.worst_syscall.map_or("-".into(), |i| {
            let s = &report.syscalls[i];
            format!("{} {}", s.syscall, format::duration(s.max_ns))
        })),
    ]
}

pub fn syscall_cells(row: &SyscallRow) -> Vec<Segment> {
    vec![
        Segment::new(&row.syscall, Tone::Strong),
        Segment::plain(&row.container),
        Segment::plain(row.count.to_string()),
        Segment::new(format::duration(row.oncpu_total_ns), Tone::Strong),
        Segment::plain(format::duration(row.total_ns)),
        Segment::plain(row.p99_ns.map_or("-".into(), format::duration)),
        Segment::plain(format::duration(row.max_ns)),
        Segment::plain(row.top_paths.first().map_or("-", |p| p.path.as_str())),
    ]
}
