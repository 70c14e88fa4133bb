//! The text report: the human summary `stalltop report FILE` prints. Layout
//! only; every number comes from the report.

use std::fmt::Write as _;

use crate::model::Report;
use crate::modes::{SoftirqDelay, SyscallMode};

/// The human summary. Layout only: every number comes from the report.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "stalltop {} on {} (kernel {}, {} CPUs), {:.1}s recorded, {} probes, cgroups by {}",
        r.version,
        r.host.hostname,
        r.host.kernel,
        r.host.cpus,
        r.duration_ns as f64 / 1e9,
        r.settings.attach,
        r.settings.cgroup_hierarchy
    );
    for warning in &r.warnings {
        let _ = writeln!(out, "WARNING: {warning}");
    }
    let lost: Vec<String> = r
        .lost_events
        .iter()
        .filter(|(_, &n)| n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    if !lost.is_empty() {
        let _ = writeln!(out, "LOST EVENTS: {}", lost.join(", "));
    }

    stalls_text(&mut out, r);

    let _ = writeln!(out, "\nRun-queue latency by cgroup (waits for a CPU)");
    let _ = writeln!(
        out,
        "  {:<40} {:>8} {:>9} {:>9} {:>9}  preempted by own/other/kthread/quota, top preemptor",
        "cgroup", "waits", "p50", "p99", "max"
    );
    for row in &r.runq {
        let top = row
            .top_preemptors
            .first()
            .map(|p| format!("{} ({}) x{}", p.comm, p.cgroup, p.count))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {:<40} {:>8} {:>9} {:>9} {:>9}  {}/{}/{}/{} {}",
            clip(&row.cgroup, 40),
            row.count,
            ms(row.p50_ns),
            ms(row.p99_ns),
            ms(row.max_ns),
            row.preempted_by.same_cgroup,
            row.preempted_by.other_cgroup,
            row.preempted_by.kthread,
            row.preempted_by.throttled,
            top
        );
    }

    let _ = writeln!(
        out,
        "\nWaits over {} ({} total, newest last)",
        ms(r.settings.runq_threshold_ns),
        r.runq_events.len()
    );
    for e in r.runq_events.iter().rev().take(20).rev() {
        let _ = writeln!(
            out,
            "  cpu {:<3} {:>9}  {} [{}] {} waited; {} [{}] {} had the CPU{}{}",
            e.cpu,
            ms(e.wait_ns),
            e.comm,
            e.pid,
            e.cgroup,
            e.ran_instead.comm,
            e.ran_instead.pid,
            e.ran_instead.cgroup,
            host_share(e.steal_ns),
            e.throttled_cgroup
                .as_ref()
                .map_or(String::new(), |c| format!(", the CPU quota of {c} used up"))
        );
    }

    let _ = writeln!(out, "\nCFS throttling (cgroups with a CPU quota)");
    for t in &r.throttling {
        let _ = writeln!(
            out,
            "  {:<40} quota {}us/{}us cpus {}: throttled {} of {} periods ({}%), {} total, usage {}",
            clip(&t.cgroup, 40),
            t.quota_us,
            t.period_us,
            t.cpus.as_deref().unwrap_or("?"),
            t.nr_throttled,
            t.nr_periods,
            t.throttled_pct,
            ms(t.throttled_ns),
            t.usage_of_quota_pct
                .map_or("?".into(), |p| format!("{p}% of quota")),
        );
    }
    out
}

/// A wait its CPU spent idle: nothing ran that could be blamed.
const IDLE_CPU: &str = "nobody held the CPU: it was idle (forced idle, or unexplained)";

/// Stalls, culprits, takeovers, syscalls and softirqs.
fn stalls_text(out: &mut String, r: &Report) {
    let _ = writeln!(
        out,
        "\nStalls: {} (over {}), newest last",
        r.stalls.len(),
        ms(r.settings.stall_threshold_ns)
    );
    for s in r.stalls.iter().rev().take(15).rev() {
        let waited = match (&s.waited.softirq, &s.waited.comm) {
            (Some(v), Some(c)) => format!("{v} softirq and {c}"),
            (Some(v), None) => format!("{v} softirq"),
            (None, Some(c)) => c.clone(),
            (None, None) => "interrupts".into(),
        };
        let culprit = s.culprit.as_ref().map_or("unknown".to_string(), |c| {
            let mut text = format!("{} [{}] ({})", c.comm, c.pid, c.container);
            if let Some(call) = &c.syscall {
                let _ = write!(text, " in {call}");
            }
            if let Some(path) = &c.path {
                let _ = write!(text, " {path}");
            }
            if let Some(oncpu) = c.oncpu_ns {
                let _ = write!(text, ", {} on-CPU", ms(oncpu));
            }
            if let Some(frame) = c.stack.first() {
                let _ = write!(text, ", at {frame}");
            }
            text
        });
        let waited = format!("{waited}{}", host_share(s.waited.steal_ns.unwrap_or(0)));
        let cause = match &s.throttled_cgroup {
            Some(cgroup) => format!(
                "the CPU quota of {cgroup}{} ran out",
                s.quota.map_or(String::new(), |q| format!(
                    " ({}us per {}us)",
                    q.quota_us, q.period_us
                ))
            ),
            None if s.waited.cpu_idle => IDLE_CPU.to_string(),
            None => format!("held by {culprit}"),
        };
        let _ = writeln!(
            out,
            "  cpu {:<3} {:>9} {:<9} {waited} waited; {cause}",
            s.cpu,
            ms(s.duration_ns),
            s.kind
        );
        if let Some(evidence) = &s.evidence {
            let _ = writeln!(out, "                          {evidence}");
        }
    }

    let _ = writeln!(out, "\nCulprits (by total stall time)");
    for c in r.culprits.iter().take(10) {
        let _ = writeln!(
            out,
            "  {:<16} {:<24} {:<12} {:<40} x{:<5} total {:>9} worst {:>9}",
            c.comm,
            clip(&c.container, 24),
            c.syscall.as_deref().unwrap_or("-"),
            clip(c.path.as_deref().unwrap_or("-"), 40),
            c.count,
            ms(c.total_stall_ns),
            ms(c.worst_ns)
        );
    }

    let _ = writeln!(out, "\nksoftirqd takeovers: {}", r.takeovers.len());
    for t in r.takeovers.iter().rev().take(10).rev() {
        let holder = t.culprit.as_ref().map_or("unknown".into(), |c| {
            format!(
                "{} [{}] {}",
                c.comm,
                c.pid,
                c.syscall.as_deref().unwrap_or("")
            )
        });
        let _ = writeln!(
            out,
            "  cpu {:<3} ksoftirqd waited {:>9} behind {holder}{}",
            t.cpu,
            ms(t.wait_ns),
            host_share(t.steal_ns)
        );
    }

    let sampled = if r.settings.syscalls == SyscallMode::Sampled {
        ", sampled (per-call latency needs --syscalls exact)"
    } else {
        ""
    };
    let _ = writeln!(out, "\nSyscalls by kernel (on-CPU) time{sampled}");
    for c in r.syscalls.iter().take(10) {
        let top = c
            .top_paths
            .first()
            .map_or(String::new(), |p| format!(" {}", p.path));
        let _ = writeln!(
            out,
            "  {:<18} {:<24} x{:<9} p50 {:>9} p99 {:>9} max {:>9} on-CPU {:>10}{top}",
            c.syscall,
            clip(&c.container, 24),
            c.count,
            c.p50_ns.map_or("-".into(), ms),
            c.p99_ns.map_or("-".into(), ms),
            ms(c.max_ns),
            ms(c.oncpu_total_ns)
        );
    }

    let sampled = r.settings.softirq_delay() == SoftirqDelay::Sampled;
    let _ = writeln!(
        out,
        "\nSoftirq delay (raise to run) by CPU and vector{}",
        if sampled {
            " (sampled: delays a tick found pending, timed from that tick; every run counted)"
        } else {
            ""
        }
    );
    for s in r.softirq.iter().filter(|s| s.count > 0) {
        let delays = if s.timed == 0 {
            format!("{:<41}", "no delay timed")
        } else {
            format!(
                "p50 {:>9} p99 {:>9} max {:>9}",
                ms(s.p50_ns),
                ms(s.p99_ns),
                ms(s.max_ns)
            )
        };
        let _ = writeln!(
            out,
            "  cpu {:<3} {:<8} x{:<8} {delays}  {} runs in ksoftirqd",
            s.cpu, s.vector, s.count, s.in_ksoftirqd
        );
    }
    // Sampled: each count is a sampler tick that found the softirq running.
    let counted = if sampled { "ticks, sampled" } else { "times" };
    for s in r.softirq_stolen.iter().take(5) {
        let _ = writeln!(
            out,
            "  {} ran {} inside {} [{}]'s time slices ({} {counted})",
            s.vector,
            ms(s.ns),
            s.comm,
            s.pid,
            s.count
        );
    }
}

/// " (the host took 3.20ms of it)" when the hypervisor took part of a wait (steal time).
fn host_share(steal_ns: u64) -> String {
    if steal_ns == 0 {
        String::new()
    } else {
        format!(" (the host took {} of it)", ms(steal_ns))
    }
}

fn ms(ns: u64) -> String {
    format!("{:.2}ms", ns as f64 / 1e6)
}

fn clip(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_string()
    } else {
        let tail: String = s
            .chars()
            .rev()
            .take(width - 1)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("…{tail}")
    }
}
