//! What each exported slice says about itself: its debug annotations (the
//! arguments Perfetto shows beside a selected slice) and its name, for a
//! stall and for a task's wait. The annotation names are the ones
//! tests/perfetto/check_trace.py reads.

use super::proto::{AnnotationValue, DebugAnnotation};
use crate::event::RunqWait;
use crate::model::{Analysis, StallRow};
use crate::syscall_table;

pub fn uint(name: &str, value: u64) -> DebugAnnotation {
    annotation(name, AnnotationValue::Uint(value))
}

pub fn text(name: &str, value: impl Into<String>) -> DebugAnnotation {
    annotation(name, AnnotationValue::String(value.into()))
}

fn annotation(name: &str, value: AnnotationValue) -> DebugAnnotation {
    DebugAnnotation {
        name: Some(name.into()),
        value: Some(value),
        array_values: Vec::new(),
    }
}

/// A list of strings (stack frames, leaf first).
fn list(name: &str, items: &[String]) -> DebugAnnotation {
    DebugAnnotation {
        name: Some(name.into()),
        value: None,
        array_values: items
            .iter()
            .map(|item| DebugAnnotation {
                name: None,
                value: Some(AnnotationValue::String(item.clone())),
                array_values: Vec::new(),
            })
            .collect(),
    }
}

/// A stall slice's name: its kind and what the stall is blamed on.
pub fn stall_name(s: &StallRow) -> String {
    let blamed = if let Some(c) = &s.culprit {
        match &c.syscall {
            Some(call) => format!("{} in {call}", c.comm),
            None => c.comm.clone(),
        }
    } else if let Some(cgroup) = &s.throttled_cgroup {
        format!("quota of {cgroup}")
    } else if let Some(h) = &s.hardirq {
        format!("hardirq {}", h.handler)
    } else if s.waited.cpu_idle {
        "idle CPU".into()
    } else {
        "no culprit".into()
    };
    format!("{} {blamed}", s.kind)
}

pub fn stall_annotations(s: &StallRow) -> Vec<DebugAnnotation> {
    let mut out = vec![
        uint("stall_id", s.id),
        text("kind", s.kind.name()),
        uint("cpu", u64::from(s.cpu)),
        uint("duration_ns", s.duration_ns),
        uint("signals", u64::from(s.signals)),
    ];
    let w = &s.waited;
    if let Some(vector) = w.softirq {
        out.push(text("softirq", vector));
    }
    if let (Some(pid), Some(comm)) = (w.pid, &w.comm) {
        let cgroup = w.cgroup.as_deref().unwrap_or("?");
        out.push(text("waiter", format!("{comm} [{pid}] {cgroup}")));
        out.push(uint("waiter_pid", u64::from(pid)));
    }
    if let Some(wait) = w.wait_ns {
        out.push(uint("waiter_wait_ns", wait));
    }
    if let Some(steal) = w.steal_ns.filter(|&ns| ns > 0) {
        out.push(uint("steal_ns", steal));
    }
    if let Some(c) = &s.culprit {
        out.push(text(
            "culprit",
            format!("{} [{}/{}] {}", c.comm, c.pid, c.tid, c.container),
        ));
        out.push(uint("culprit_pid", u64::from(c.pid)));
        out.push(uint("culprit_tid", u64::from(c.tid)));
        out.push(text("culprit_container", c.container.clone()));
        if let Some(call) = &c.syscall {
            out.push(text("syscall", call.clone()));
        }
        if let Some(activity) = &c.activity {
            out.push(text("activity", activity.clone()));
        }
        if let Some(path) = &c.path {
            out.push(text("path", path.clone()));
        }
        if let Some(oncpu) = c.oncpu_ns {
            out.push(uint("oncpu_ns", oncpu));
        }
        out.push(uint("samples", c.samples as u64));
        if let Some(owner) = c.borrowed_stack() {
            out.push(text(
                "stacks_of",
                format!("{} (tid {})", owner.comm, owner.tid),
            ));
        }
        if !c.stack.is_empty() {
            out.push(list("kernel_stack", &c.stack));
        }
        if !c.user_stack.is_empty() {
            out.push(list("user_stack", &c.user_stack));
        }
    }
    if let Some(cgroup) = &s.throttled_cgroup {
        out.push(text("throttled_cgroup", cgroup.clone()));
    }
    if let Some(q) = s.quota {
        out.push(text(
            "quota",
            format!("{}us / {}us", q.quota_us, q.period_us),
        ));
    }
    if let Some(h) = &s.hardirq {
        out.push(text("hardirq", format!("{} (irq {})", h.handler, h.irq)));
    }
    if let Some(evidence) = &s.evidence {
        out.push(text("evidence", evidence.clone()));
    }
    out
}

/// A wait slice's name: what kept the task off its CPU.
pub fn wait_name(w: &RunqWait) -> String {
    if w.throttle.is_some() {
        "CPU quota".into()
    } else if w.ran.tid == 0 {
        "idle CPU".into()
    } else {
        format!("behind {}", w.ran.comm)
    }
}

pub fn wait_annotations(a: &Analysis, w: &RunqWait, stall: Option<u64>) -> Vec<DebugAnnotation> {
    let mut out = vec![
        uint("cpu", u64::from(w.cpu)),
        uint("wait_ns", w.wait_ns),
        uint("pid", u64::from(w.waiter.pid)),
        uint("tid", u64::from(w.waiter.tid)),
        text("container", a.container(w.waiter.cgroup)),
    ];
    if w.ran.tid != 0 {
        out.push(text(
            "held_by",
            format!(
                "{} [{}/{}] {}",
                w.ran.comm,
                w.ran.pid,
                w.ran.tid,
                a.container(w.ran.cgroup)
            ),
        ));
    }
    if let Some((nr, _)) = w.ran_syscall {
        out.push(text("held_by_syscall", syscall_table::name(nr)));
    }
    if let Some(t) = w.throttle {
        out.push(text("throttled_cgroup", a.cgroup_path(t.cgroup)));
    }
    if w.steal_ns > 0 {
        out.push(uint("steal_ns", w.steal_ns));
    }
    if let Some(m) = w.migrated {
        out.push(uint("from_cpu", u64::from(m.from_cpu)));
        out.push(uint("migrations", u64::from(m.migrations)));
    }
    if let Some(id) = stall {
        out.push(uint("stall_id", id));
    }
    out
}
