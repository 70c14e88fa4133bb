//! The text report's tables of aggregates: syscalls, softirq delays,
//! run-queue latency per cgroup with PSI beside it, CFS throttling.
//! Percentiles read as the range of their histogram bucket, tails as
//! counts over the threshold, sampled values marked `~` (known to about
//! one sampler tick).

use std::fmt::Write as _;

use super::{clip, more, none, title};
use crate::app::format::{self, duration, range};
use crate::cmd::report::selection::Selection;
use crate::model::{Distribution, Range, Report};
use crate::modes::{SoftirqDelay, SyscallMode};

/// "1.8-2.1ms", "-" when nothing was counted.
fn pct(p: Option<Range>) -> String {
    p.map_or("-".into(), |p| range(p.low_ns, p.high_ns))
}

/// "p50 .. p99 .. p99.9 .. ≥10ms 12" of a distribution.
fn spread(d: &Distribution) -> String {
    let t = &d.over_threshold;
    let over = if t.at_least == t.at_most {
        t.at_least.to_string()
    } else {
        format!("{}-{}", t.at_least, t.at_most)
    };
    format!(
        "p50 {:>10} p99 {:>10} p99.9 {:>10} {:>6}+ {over:<5}",
        pct(d.p50),
        pct(d.p99),
        pct(d.p999),
        duration(t.threshold_ns)
    )
}

pub fn syscalls(out: &mut String, r: &Report, chosen: &Selection<'_>) {
    let sampled = r.settings.syscalls == SyscallMode::Sampled;
    let how = if sampled {
        let tick = r.syscalls.iter().find_map(|s| s.resolution_ns).unwrap_or(0);
        format!(
            ", sampled: ~ is to about one sampler tick ({}); per-call latency needs --syscalls exact",
            duration(tick)
        )
    } else {
        String::new()
    };
    title(out, format_args!("Syscalls by kernel (on-CPU) time{how}"));
    none(out, r.syscalls.len());
    for c in r.syscalls.iter().take(chosen.limit) {
        let top = c
            .top_paths
            .first()
            .map_or(String::new(), |p| format!(" {}", p.path));
        let numbers = match (&c.distribution, c.resolution_ns) {
            (Some(d), _) => format!("{} max {:>8}", spread(d), duration(c.max_ns)),
            (None, Some(tick)) if c.max_ns <= tick => {
                format!("max {:>9}", "about one tick")
            }
            (None, _) => format!("max {:>9}", format!("~{}", duration(c.max_ns))),
        };
        let approx = if sampled { "~" } else { "" };
        let _ = writeln!(
            out,
            "  {:<16} {:<24} x{:<8} {numbers} on-CPU {approx}{}{top}",
            c.syscall,
            clip(&c.container, 24),
            c.count,
            duration(c.oncpu_total_ns)
        );
    }
    more(out, r.syscalls.len().saturating_sub(chosen.limit));
}

pub fn softirqs(out: &mut String, r: &Report, chosen: &Selection<'_>) {
    let sampled = r.settings.softirq_delay() == SoftirqDelay::Sampled;
    title(
        out,
        format_args!(
            "Softirq delay (raise to run) by CPU and vector{}",
            if sampled {
                " (sampled: delays a tick found pending, timed from that tick; every run counted)"
            } else {
                ""
            }
        ),
    );
    let rows: Vec<_> = r.softirq.iter().filter(|s| s.count > 0).collect();
    none(out, rows.len());
    for s in rows.iter().take(chosen.limit) {
        let delays = if s.timed == 0 {
            format!("{:<60}", "no delay timed")
        } else {
            format!("{} max {:>8}", spread(&s.distribution), duration(s.max_ns))
        };
        let _ = writeln!(
            out,
            "  cpu {:<2} {:<8} x{:<8} {delays}  {} runs in ksoftirqd",
            s.cpu, s.vector, s.count, s.in_ksoftirqd
        );
    }
    more(out, rows.len().saturating_sub(chosen.limit));
    // Sampled: each count is a sampler tick that found the softirq running.
    let counted = if sampled { "ticks, sampled" } else { "times" };
    for s in r.softirq_stolen.iter().take(5) {
        let _ = writeln!(
            out,
            "  {} ran {} inside {}[{}/{}]'s time slices ({} {counted})",
            s.vector,
            duration(s.ns),
            s.comm,
            s.pid,
            s.tid,
            s.count
        );
    }
}

/// One line per cgroup that waited: its total wait and each cause's share.
pub fn why(out: &mut String, chosen: &Selection<'_>) {
    title(
        out,
        format_args!("Why containers waited (their time waiting for a CPU, by cause)"),
    );
    none(out, chosen.why.rows.len() + chosen.why_unsplit);
    for row in &chosen.why.rows {
        let _ = writeln!(
            out,
            "  {:<24} waited {:>8} in {} waits: {}",
            clip(&row.container, 24),
            duration(row.total_ns),
            row.count,
            row.why.as_ref().map(format::why).unwrap_or_default()
        );
    }
    more(out, chosen.why.more);
    if chosen.why_unsplit > 0 {
        let _ = writeln!(
            out,
            "  Not split by cause for {} of the cgroups: recorded before stalltop split waits",
            chosen.why_unsplit
        );
    }
}

pub fn runq(out: &mut String, r: &Report, chosen: &Selection<'_>) {
    title(
        out,
        format_args!("Run-queue latency by cgroup (every wait for a CPU, short or long)"),
    );
    none(out, r.runq.len());
    for row in r.runq.iter().take(chosen.limit) {
        let top = row
            .top_preemptors
            .first()
            .map(|p| format!(" {} ({}) x{}", p.comm, p.container, p.count))
            .unwrap_or_default();
        let p = &row.preempted_by;
        let _ = writeln!(
            out,
            "  {:<32} {:>7} waits {} max {:>8} waited {:>8} PSI {:>8}  kept off by own/other/kthread/quota {}/{}/{}/{}{top}",
            clip(&row.container, 32),
            row.count,
            spread(&row.distribution),
            duration(row.max_ns),
            duration(row.total_ns),
            row.pressure_some_ns.map_or("-".into(), duration),
            p.same_cgroup,
            p.other_cgroup,
            p.kthread,
            p.throttled
        );
    }
    more(out, r.runq.len().saturating_sub(chosen.limit));
    pressure(out, r);
}

/// What PSI says beside the waits: the host's pressure, what was not read
/// (said, never shown as zero), and the cgroups where PSI saw more waiting
/// than stalltop measured.
fn pressure(out: &mut String, r: &Report) {
    let p = &r.pressure;
    match p.host_some_ns {
        Some(some) => {
            let full = p
                .host_full_ns
                .map_or(String::new(), |full| format!(", full {}", duration(full)));
            let _ = writeln!(
                out,
                "  host CPU pressure (PSI): some {}{full} in the report's time",
                duration(some)
            );
        }
        None => {
            let _ = writeln!(
                out,
                "  host CPU pressure (PSI): not read (no /proc/pressure/cpu, or a recording made before stalltop read it)"
            );
        }
    }
    if r.runq.iter().any(|row| row.pressure_some_ns.is_none()) {
        let _ = writeln!(
            out,
            "  PSI -: the cgroup's cpu.pressure was not read (no PSI, or on a hybrid host no cgroup of its path in the unified hierarchy)"
        );
    }
    for d in &p.disagreements {
        let _ = writeln!(
            out,
            "  PSI DISAGREES: {} had tasks waiting {} by PSI but stalltop measured {} of waits in it and below (more than {}% + {} apart): waits went unseen",
            d.cgroup,
            duration(d.psi_some_ns),
            duration(d.waited_ns),
            p.margin_percent,
            duration(p.slack_ns)
        );
    }
}

pub fn throttling(out: &mut String, r: &Report) {
    title(
        out,
        format_args!("CFS throttling (cgroups with a CPU quota)"),
    );
    none(out, r.throttling.len());
    for t in &r.throttling {
        let _ = writeln!(
            out,
            "  {:<32} quota {}us/{}us cpus {}: throttled {} of {} periods ({}%), {} total, usage {}",
            clip(&t.container, 32),
            t.quota_us,
            t.period_us,
            t.cpus.as_deref().unwrap_or("?"),
            t.nr_throttled,
            t.nr_periods,
            t.throttled_pct,
            duration(t.throttled_ns),
            t.usage_of_quota_pct
                .map_or("?".into(), |p| format!("{p}% of quota")),
        );
    }
}
