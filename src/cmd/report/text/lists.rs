//! The text report's lists of events: what hurt the victim, stalls (and a
//! cgroup's stalls on itself, folded), culprits, ksoftirqd takeovers, slow
//! calls and waits. One line per row, each with its time.

use std::fmt::Write as _;

use super::{at, clip, more, none, title};
use crate::app::format::{self, duration};
use crate::cmd::report::selection::{Folded, Selection};
use crate::model::{Report, StallRow};

/// Kernel frames shown under a slow call.
const FRAMES: usize = 4;

/// With --container or --pid: the victim's waits and who kept it waiting.
pub fn victim(out: &mut String, r: &Report, _chosen: &Selection<'_>) {
    let who = match (&r.scope.container, r.scope.pid) {
        (Some(c), _) => format!("`{c}`"),
        (None, Some(pid)) => format!("process {pid}"),
        (None, None) => return,
    };
    title(
        out,
        format_args!("What hurt {who} (its waits for a CPU, and who held the CPU)"),
    );
    none(out, r.runq.len());
    for row in &r.runq {
        let p = &row.preempted_by;
        let _ = writeln!(
            out,
            "  {}: {} waits, {} in all, max {}; kept off by another cgroup {}, its own {}, a kernel thread {}, its CPU quota {}",
            row.cgroup,
            row.count,
            duration(row.total_ns),
            duration(row.max_ns),
            p.other_cgroup,
            p.same_cgroup,
            p.kthread,
            p.throttled
        );
        for n in row.top_preemptors.iter().take(3) {
            let _ = writeln!(out, "    by {} ({}) x{}", n.comm, n.container, n.count);
        }
    }
    let held: u64 = r.culprits.iter().map(|c| c.count).sum();
    if let Some(top) = r.culprits.first() {
        let _ = writeln!(
            out,
            "  In {} stalls it waited in, {} ({}) held the CPU in {} ({} of stall spans); others in {}",
            r.stalls.len(),
            top.comm,
            top.container,
            top.count,
            duration(top.total_stall_ns),
            held - top.count
        );
    }
}

pub fn stalls(out: &mut String, r: &Report, chosen: &Selection<'_>) {
    let runq = r
        .scope
        .runq_threshold_ns
        .unwrap_or(r.settings.runq_threshold_ns);
    let other = r
        .scope
        .stall_threshold_ns
        .unwrap_or(r.settings.stall_threshold_ns);
    let shown = &chosen.stalls;
    let own: usize = chosen.own_stalls.iter().map(|f| f.count).sum();
    title(
        out,
        format_args!(
            "Stalls: {} (a single wait of {}+ for a CPU, {}+ for softirq, ksoftirqd, irqs-off), {}",
            r.stalls.len(),
            duration(runq),
            duration(other),
            order_name(chosen)
        ),
    );
    let _ = writeln!(
        out,
        "  span: first wait's start to last wait's end (merged waits); then what waited and its own longest wait"
    );
    none(out, shown.rows.len() + own);
    for s in &shown.rows {
        stall_line(out, r, s);
    }
    more(out, shown.more);
    if !chosen.own_stalls.is_empty() {
        let _ = writeln!(
            out,
            "  Stalls within one cgroup (its tasks kept each other waiting), one line per cgroup:"
        );
        for f in &chosen.own_stalls {
            folded_line(out, r, f, "stalls");
        }
    }
}

fn order_name(chosen: &Selection<'_>) -> &'static str {
    if chosen.newest_first {
        "newest first"
    } else {
        "the longest single wait first"
    }
}

fn stall_line(out: &mut String, r: &Report, s: &StallRow) {
    let what = match (&s.waited.softirq, &s.waited.comm) {
        (Some(v), Some(c)) => format!("{v} softirq and {c}"),
        (Some(v), None) => format!("{v} softirq"),
        (None, Some(c)) if c.starts_with("ksoftirqd/") => c.clone(),
        (None, Some(c)) => format!("{c}{}", task_id(s.waited.pid, s.waited.tid)),
        (None, None) => "interrupts".into(),
    };
    let waited = match (s.waited.wait_ns, s.waited.waits) {
        (Some(own), Some(n)) if n > 1 => format!("{what} waited {} x{n}", duration(own)),
        (Some(own), _) => format!("{what} waited {}", duration(own)),
        (None, _) => format!("{what} waited"),
    };
    let steal = host_share(s.waited.steal_ns.unwrap_or(0));
    let merged = if s.signals == s.waits {
        format!("{} waits", s.waits)
    } else {
        format!("{} signals, {} of them task waits", s.signals, s.waits)
    };
    let span = if s.signals > 1 {
        format!(
            "{} span ({merged}), longest single wait {}",
            duration(s.duration_ns),
            duration(s.longest_wait_ns)
        )
    } else {
        duration(s.duration_ns)
    };
    let cause = match &s.throttled_cgroup {
        Some(cgroup) => format!(
            "the CPU quota of {cgroup}{} ran out",
            s.quota.map_or(String::new(), |q| format!(
                " ({} per {})",
                duration(q.quota_us * 1000),
                duration(q.period_us * 1000)
            ))
        ),
        None if s.waited.cpu_idle => {
            "nobody held the CPU: it was idle (forced idle, or unexplained)".into()
        }
        None => format!("held by {}", culprit_text(s)),
    };
    let _ = writeln!(
        out,
        "  #{} cpu {:<2} {} {:<9} {span}: {waited}{steal}; {cause}",
        s.id,
        s.cpu,
        at(r, s.start_ns),
        s.kind
    );
    if let Some(evidence) = &s.evidence {
        let _ = writeln!(out, "      {evidence}");
    }
}

fn culprit_text(s: &StallRow) -> String {
    let Some(c) = &s.culprit else {
        return "unknown".into();
    };
    let mut text = format!(
        "{}{} ({})",
        c.comm,
        task_id(Some(c.pid), Some(c.tid)),
        c.container
    );
    if let Some(activity) = &c.activity {
        let _ = write!(text, " in {activity}");
    }
    if let Some(path) = &c.path {
        let _ = write!(text, " {path}");
    }
    if let Some(oncpu) = c.oncpu_ns {
        let _ = write!(text, ", {} on-CPU", duration(oncpu));
    }
    if let Some(frame) = c.stack.first() {
        let _ = write!(text, ", at {frame}");
    }
    if let Some(owner) = c.borrowed_stack() {
        let _ = write!(
            text,
            " (no sample of its own: the stack of {} (tid {}) on its CPU then)",
            owner.comm, owner.tid
        );
    }
    text
}

/// A cgroup's waits (or stalls) on itself, as one line.
fn folded_line(out: &mut String, r: &Report, f: &Folded, what: &str) {
    let waits = if what == "waits" {
        String::new()
    } else {
        format!(" ({} waits)", f.waits)
    };
    let _ = writeln!(
        out,
        "  {:<32} {} {what}{waits}, longest single wait {} (#{}), {} in all, last {}",
        clip(&f.cgroup, 32),
        f.count,
        duration(f.worst_ns),
        f.worst_id,
        duration(f.total_ns),
        at(r, f.last_ns)
    );
}

pub fn culprits(out: &mut String, r: &Report, chosen: &Selection<'_>) {
    title(
        out,
        format_args!(
            "Culprits: {} (who held the CPU; stalls, their spans summed, and the longest single wait in them)",
            r.culprits.len()
        ),
    );
    none(out, r.culprits.len());
    for c in r.culprits.iter().take(chosen.limit) {
        let _ = writeln!(
            out,
            "  {:<16} {:<24} {:<12} {:<40} x{:<5} spans {:>8} longest wait {:>8} (#{}), last {}",
            c.comm,
            clip(&c.container, 24),
            c.syscall.as_deref().unwrap_or("-"),
            clip(c.path.as_deref().unwrap_or("-"), 40),
            c.count,
            duration(c.total_stall_ns),
            duration(c.worst_ns),
            c.worst_stall_id,
            at(r, c.last_seen_ns)
        );
    }
    more(out, r.culprits.len().saturating_sub(chosen.limit));
}

pub fn takeovers(out: &mut String, r: &Report, chosen: &Selection<'_>) {
    let shown = &chosen.takeovers;
    title(
        out,
        format_args!("ksoftirqd takeovers: {}", r.takeovers.len()),
    );
    none(out, shown.rows.len());
    for t in &shown.rows {
        let holder = t.culprit.as_ref().map_or("unknown".into(), |c| {
            let call = c
                .syscall
                .as_deref()
                .map_or(String::new(), |s| format!(" in {s}"));
            format!("{}[{}] ({}){call}", c.comm, c.pid, c.container)
        });
        let _ = writeln!(
            out,
            "  cpu {:<2} {} ksoftirqd waited {} behind {holder}{}",
            t.cpu,
            at(r, t.ts_ns.saturating_sub(t.wait_ns)),
            duration(t.wait_ns),
            host_share(t.steal_ns)
        );
    }
    more(out, shown.more);
}

pub fn slow_calls(out: &mut String, r: &Report, chosen: &Selection<'_>) {
    let shown = &chosen.slow_calls;
    title(
        out,
        format_args!(
            "Slow calls: {} (over {} wall or {} on a CPU), {}",
            r.slow_syscalls.len(),
            duration(r.settings.syscall_wall_threshold_ns),
            duration(r.settings.syscall_oncpu_threshold_ns),
            if chosen.newest_first {
                "newest first"
            } else {
                "longest first"
            }
        ),
    );
    none(out, shown.rows.len());
    for c in &shown.rows {
        let softirq = if c.softirq_ns > 0 {
            format!(" (+{} of softirqs)", duration(c.softirq_ns))
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  {} {:<12} {}[{}/{}] ({}) wall {}, on-CPU {}{softirq} {}",
            at(r, c.ts_ns.saturating_sub(c.wall_ns)),
            c.syscall,
            c.comm,
            c.pid,
            c.tid,
            c.container,
            duration(c.wall_ns),
            duration(c.oncpu_ns),
            c.path.as_deref().unwrap_or("(no file)")
        );
        if !c.stack.is_empty() {
            let frames: Vec<&str> = c.stack.iter().take(FRAMES).map(String::as_str).collect();
            let _ = writeln!(out, "      at {} ({} ticks)", frames.join(" < "), c.samples);
        }
    }
    more(out, shown.more);
}

pub fn waits(out: &mut String, r: &Report, chosen: &Selection<'_>) {
    let shown = &chosen.waits;
    let threshold = r
        .scope
        .runq_threshold_ns
        .unwrap_or(r.settings.runq_threshold_ns);
    title(
        out,
        format_args!(
            "Waits for a CPU of {}+: {}, {}",
            duration(threshold),
            r.runq_events.len(),
            order_name(chosen)
        ),
    );
    none(out, shown.rows.len() + chosen.own_waits.len());
    for e in &shown.rows {
        let call = e
            .ran_instead
            .syscall
            .as_deref()
            .map_or(String::new(), |s| format!(" in {s}"));
        let holder = if e.ran_instead.tid == 0 {
            "the CPU was idle".to_string()
        } else {
            format!(
                "{}[{}] ({}) had the CPU{call}",
                e.ran_instead.comm, e.ran_instead.pid, e.ran_instead.container
            )
        };
        let _ = writeln!(
            out,
            "  cpu {:<2} {} {:>8}  {}[{}/{}] ({}) waited; {holder}{}{}",
            e.cpu,
            at(r, e.ts_ns.saturating_sub(e.wait_ns)),
            duration(e.wait_ns),
            e.comm,
            e.pid,
            e.tid,
            e.container,
            host_share(e.steal_ns),
            e.throttled_cgroup
                .as_ref()
                .map_or(String::new(), |c| format!(", the CPU quota of {c} used up"))
        );
    }
    more(out, shown.more);
    if !chosen.own_waits.is_empty() {
        let _ = writeln!(
            out,
            "  Waits behind a task of the same cgroup, one line per cgroup:"
        );
        for f in &chosen.own_waits {
            folded_line(out, r, f, "waits");
        }
    }
}

/// "[pid]", or "[pid/tid]" for a thread that is not its process's first.
fn task_id(pid: Option<u32>, tid: Option<u32>) -> String {
    match (pid, tid) {
        (Some(pid), Some(tid)) if tid != pid => format!("[{pid}/{tid}]"),
        (Some(pid), _) => format!("[{pid}]"),
        _ => String::new(),
    }
}

/// " (the host took 3.2ms of it)" when the hypervisor took part of a wait.
pub fn host_share(steal_ns: u64) -> String {
    if steal_ns == 0 {
        String::new()
    } else {
        format!(" (the host took {} of it)", format::duration(steal_ns))
    }
}
