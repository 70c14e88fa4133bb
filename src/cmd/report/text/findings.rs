//! The text report's first section: its findings, one line each, saying
//! what waited, how long, and who or what made it wait.

use std::fmt::Write as _;

use super::{none, title};
use crate::app::format::{duration, why_cause};
use crate::model::{Finding, Holder, Quota, Report};

pub fn findings(out: &mut String, r: &Report) {
    title(
        out,
        format_args!("In short (what waited and why; the lists below have the detail)"),
    );
    none(out, r.findings.len());
    for f in &r.findings {
        let _ = writeln!(out, "  {}", line(f));
    }
}

fn line(f: &Finding) -> String {
    match f {
        Finding::SoftirqsHeldOff {
            cpu,
            vector,
            ksoftirqd,
            stalls,
            longest_ns,
            stall_id,
            holder,
        } => format!(
            "cpu {cpu}: {} waited up to {} ({} stall{}, the longest #{stall_id}) while {}",
            match (vector, ksoftirqd) {
                (Some(v), true) => format!("{v} softirq and ksoftirqd"),
                (Some(v), false) => format!("{v} softirq"),
                (None, true) => "ksoftirqd".to_string(),
                (None, false) => "softirqs".to_string(),
            },
            duration(*longest_ns),
            stalls,
            plural(*stalls),
            ran(holder)
        ),
        Finding::InterruptsOff {
            cpu,
            stalls,
            longest_ns,
            stall_id,
            holder,
        } => format!(
            "cpu {cpu}: interrupts off for up to {} ({} stall{}, the longest #{stall_id}) while {}",
            duration(*longest_ns),
            stalls,
            plural(*stalls),
            ran(holder)
        ),
        Finding::ContainerWaited {
            container,
            waited_ns,
            waits,
            largest,
            quota,
        } => format!(
            "{container} waited {} for a CPU in {waits} waits, most of it: {}{}",
            duration(*waited_ns),
            why_cause(largest),
            quota.as_ref().map(quota_text).unwrap_or_default()
        ),
        Finding::SlowCalls {
            comm,
            container,
            syscall,
            path,
            calls,
            longest_wall_ns,
            longest_oncpu_ns,
        } => {
            format!(
            "{comm} ({container}): {calls} slow {syscall} call{}{}, the longest {} ({} on a CPU)",
            plural(*calls),
            path.as_ref().map(|p| format!(" on {p}")).unwrap_or_default(),
            duration(*longest_wall_ns),
            duration(*longest_oncpu_ns)
        )
        }
    }
}

/// "hog[123] (/batch) ran in read /proc/slabinfo (150ms of it on a CPU)".
fn ran(h: &Holder) -> String {
    let doing = match h.activity.as_deref() {
        None => String::new(),
        Some("user code") => " in user code".into(),
        Some("kernel (no syscall)") => " in the kernel, in no syscall".into(),
        Some(other) => format!(
            " in {other}{}{}",
            h.path.as_ref().map(|p| format!(" {p}")).unwrap_or_default(),
            h.call_oncpu_ns
                .map(|ns| format!(" ({} of the call on a CPU)", duration(ns)))
                .unwrap_or_default()
        ),
    };
    format!("{}[{}] ({}) ran{doing}", h.comm, h.pid, h.container)
}

/// " (quota 40ms per 100ms; throttled in 48.3% of periods, at 61% of it)".
fn quota_text(q: &Quota) -> String {
    format!(
        " (quota {} per {}; throttled in {}% of periods{})",
        duration(q.quota_us * 1000),
        duration(q.period_us * 1000),
        q.throttled_pct,
        q.usage_of_quota_pct
            .map(|u| format!(", using {u}% of it"))
            .unwrap_or_default()
    )
}

fn plural(n: u32) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::WhyCause;
    use crate::stream::WaitCause;

    const MS: u64 = 1_000_000;

    fn holder(comm: &str, activity: &str, path: &str, oncpu_ms: u64) -> Holder {
        Holder {
            pid: 700,
            comm: comm.into(),
            container: "pod:11112222/0123456789ab".into(),
            activity: Some(activity.into()),
            path: Some(path.into()),
            call_oncpu_ns: Some(oncpu_ms * MS),
        }
    }

    /// The five incidents of docs/cases.md, each as one line of why.
    #[test]
    fn each_incident_reads_as_one_line() {
        let findings = [
            Finding::SoftirqsHeldOff {
                cpu: 11,
                vector: Some("NET_RX"),
                ksoftirqd: true,
                stalls: 3,
                longest_ns: 101 * MS,
                stall_id: 4,
                holder: holder("cadvisor", "read", "/sys/fs/cgroup/memory/memory.stat", 148),
            },
            Finding::InterruptsOff {
                cpu: 3,
                stalls: 1,
                longest_ns: 189 * MS,
                stall_id: 9,
                holder: holder("ss", "read", "/proc/slabinfo", 189),
            },
            Finding::ContainerWaited {
                container: "/shop".into(),
                waited_ns: 800 * MS,
                waits: 400,
                largest: WhyCause {
                    cause: WaitCause::Throttled,
                    comm: None,
                    container: None,
                    ns: 600 * MS,
                    percent: 75.0,
                },
                quota: Some(Quota {
                    quota_us: 15_000,
                    period_us: 100_000,
                    throttled_pct: 46.7,
                    usage_of_quota_pct: Some(53.3),
                }),
            },
            Finding::ContainerWaited {
                container: "/victim".into(),
                waited_ns: 1_000 * MS,
                waits: 1_000,
                largest: WhyCause {
                    cause: WaitCause::OtherCgroup,
                    comm: Some("hog".into()),
                    container: Some("/noisy".into()),
                    ns: 900 * MS,
                    percent: 90.0,
                },
                quota: None,
            },
            Finding::SlowCalls {
                comm: "app".into(),
                container: "pod:11112222/0123456789ab".into(),
                syscall: "fadvise64".into(),
                path: Some("/var/log/app/app.INFO".into()),
                calls: 3,
                longest_wall_ns: 1_500 * MS,
                longest_oncpu_ns: 1_400 * MS,
            },
        ];
        let lines: Vec<String> = findings.iter().map(line).collect();
        assert_eq!(
            lines,
            [
                "cpu 11: NET_RX softirq and ksoftirqd waited up to 101ms (3 stalls, the longest #4) \
                 while cadvisor[700] (pod:11112222/0123456789ab) ran in read \
                 /sys/fs/cgroup/memory/memory.stat (148ms of the call on a CPU)",
                "cpu 3: interrupts off for up to 189ms (1 stall, the longest #9) while ss[700] \
                 (pod:11112222/0123456789ab) ran in read /proc/slabinfo (189ms of the call on a CPU)",
                "/shop waited 800ms for a CPU in 400 waits, most of it: 75% its CPU quota \
                 (quota 15ms per 100ms; throttled in 46.7% of periods, using 53.3% of it)",
                "/victim waited 1s for a CPU in 1000 waits, most of it: 90% hog (/noisy)",
                "app (pod:11112222/0123456789ab): 3 slow fadvise64 calls on /var/log/app/app.INFO, \
                 the longest 1.50s (1.40s on a CPU)",
            ]
        );
    }
}
