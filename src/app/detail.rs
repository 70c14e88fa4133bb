//! The detail popup's text for what Enter was pressed on: the full chain
//! of a stall (its timeline, what waited, the culprit, its syscall, file,
//! on-CPU time, kernel and user stacks), a culprit with its worst stall, a
//! container, a syscall, or a CPU's worst stall in the window. Pure.

use super::format;
use super::pane::Pane;
use super::tables::{
    culprit_chain, hardirq_text, kind_label, kind_tone, throttle_text, waited_text, Rows,
};
use super::view::{Line, Segment, Tone};
use crate::model::{Report, RunqRow, StallKind, StallRow};

/// Slow calls a syscall's popup lists.
const SLOW_CALLS: usize = 10;

/// What the popup is about; looked up again at every refresh.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A table row, by its key.
    Row(Pane, String),
    Cpu(u32),
}

pub struct DetailRequest<'a> {
    pub report: &'a Report,
    pub rows: &'a Rows,
    pub now_ns: u64,
    /// Session (or recording) start, for times "+0:04.512".
    pub start_ns: u64,
    pub window_ns: u64,
    pub runq_threshold_ns: u64,
}

/// Title and lines of the popup.
pub fn detail(target: &Target, req: &DetailRequest<'_>) -> (String, Vec<Line>) {
    let gone = |what: &str| {
        (
            what.to_string(),
            vec![vec![Segment::new(
                "no longer on screen (filtered out, or the counters were reset)",
                Tone::Dim,
            )]],
        )
    };
    let report = req.report;
    match target {
        Target::Cpu(cpu) => {
            let left = req.now_ns.saturating_sub(req.window_ns);
            let worst = req
                .rows
                .feed
                .iter()
                .map(|&i| &report.stalls[i])
                .filter(|s| s.cpu == *cpu && s.start_ns + s.duration_ns >= left)
                .max_by_key(|s| s.duration_ns);
            let title = format!(
                "CPU {cpu}: longest stall in the last {}",
                format::span(req.window_ns)
            );
            match worst {
                Some(stall) => (title, stall_lines(stall, req)),
                None => (
                    title,
                    vec![vec![Segment::new(
                        "no stall on screen in the window",
                        Tone::Dim,
                    )]],
                ),
            }
        }
        Target::Row(pane, key) => {
            let Some(index) = req.rows.keys(*pane).iter().position(|k| k == key) else {
                return gone("Details");
            };
            match pane {
                Pane::Feed if index >= req.rows.feed.len() => {
                    wait_lines(req.rows.waits[index - req.rows.feed.len()], req)
                }
                Pane::Feed => {
                    let stall = &report.stalls[req.rows.feed[index]];
                    (
                        format!("Stall #{} on CPU {}", stall.id, stall.cpu),
                        stall_lines(stall, req),
                    )
                }
                Pane::Culprits => culprit_lines(index, req),
                Pane::Containers => container_lines(index, req),
                Pane::Syscalls => syscall_lines(req.rows.syscalls[index], req),
                Pane::Timeline => gone("Details"),
            }
        }
    }
}

fn field(name: &str, value: impl Into<String>) -> Line {
    vec![
        Segment::new(format!("  {name:<10} "), Tone::Dim),
        Segment::plain(value),
    ]
}

fn heading(text: impl Into<String>) -> Line {
    vec![Segment::new(text, Tone::Strong)]
}

/// "+4.512s 12:03:05.123Z": into the session, and UTC.
fn at(req: &DetailRequest<'_>, ts: u64) -> String {
    format!(
        "{} {}",
        format::offset(ts.saturating_sub(req.start_ns)),
        format::utc_clock(req.report.unix_ns(ts))
    )
}

/// The full chain of one stall.
fn stall_lines(stall: &StallRow, req: &DetailRequest<'_>) -> Vec<Line> {
    let end = stall.start_ns + stall.duration_ns;
    let mut lines = vec![
        vec![
            Segment::new(
                format!("{} ", kind_label(stall.kind)),
                kind_tone(stall.kind),
            ),
            Segment::new(format::duration(stall.duration_ns), Tone::Strong),
            Segment::plain(format!(
                " on CPU {}, {} signal{} merged, ended {} ago",
                stall.cpu,
                stall.signals,
                if stall.signals == 1 { "" } else { "s" },
                format::age(req.now_ns.saturating_sub(end))
            )),
        ],
        Vec::new(),
        heading("Timeline"),
    ];
    let waited = waited_text(stall);
    let took = format::duration(stall.duration_ns);
    let (began, ended) = match stall.kind {
        _ if stall.signals > 1 => (
            format!(
                "the first of {} overlapping waits began ({waited} waited most)",
                stall.signals
            ),
            format!("the last of them ended, {took} later"),
        ),
        StallKind::Softirq => (format!("{waited} raised"), format!("it ran, {took} later")),
        StallKind::Ksoftirqd => (format!("{waited} woken"), format!("it ran, {took} later")),
        StallKind::Irqoff => (
            "last timer tick, then interrupts went off".to_string(),
            format!("next timer tick, {took} later"),
        ),
        StallKind::Runq => (
            format!("{waited} became runnable"),
            format!("it got the CPU, {took} later"),
        ),
        StallKind::Throttled => (
            format!("{waited} became runnable, its cgroup out of CPU quota"),
            format!("quota again: it got the CPU, {took} later"),
        ),
    };
    lines.push(field(&at(req, stall.start_ns), began));
    if let Some(c) = &stall.culprit {
        let held = match stall.waited.migrated {
            Some(_) => "a CPU it waited on".to_owned(),
            None => format!("CPU {}", stall.cpu),
        };
        lines.push(field(
            "",
            format!("meanwhile {}[{}] held {held}", c.comm, c.pid),
        ));
    }
    lines.push(field(&at(req, end), ended));
    lines.push(Vec::new());
    lines.push(heading("What waited"));
    if let Some(vector) = stall.waited.softirq {
        lines.push(field("softirq", vector));
    }
    if let Some(comm) = &stall.waited.comm {
        let pid = stall
            .waited
            .pid
            .map_or(String::new(), |p| format!(" pid {p}"));
        lines.push(field("task", format!("{comm}{pid}")));
    }
    if let Some(cgroup) = &stall.waited.cgroup {
        lines.push(field("cgroup", cgroup.clone()));
    }
    if let Some(wait) = stall.waited.wait_ns {
        lines.push(field("waited", format::duration(wait)));
    }
    if let Some(m) = stall.waited.migrated {
        lines.push(field(
            "moved",
            format!(
                "began on CPU {}, moved {} time(s) before it ran on CPU {}",
                m.from_cpu, m.migrations, stall.cpu
            ),
        ));
    }
    if let Some(steal) = stall.waited.steal_ns.filter(|&ns| ns > 0) {
        lines.push(field(
            "host took",
            format!("{} of it (hypervisor steal)", format::duration(steal)),
        ));
    }
    if stall.waited.softirq.is_none() && stall.waited.comm.is_none() {
        lines.push(field("", waited));
    }
    lines.push(Vec::new());
    if let (Some(throttle), Some(cgroup)) = (throttle_text(stall), &stall.throttled_cgroup) {
        lines.push(heading("Cause"));
        lines.push(field("", throttle));
        lines.push(field("cgroup", cgroup.clone()));
        return lines;
    }
    lines.push(heading("Culprit"));
    if let Some(h) = &stall.hardirq {
        lines.push(field("", hardirq_text(h)));
        lines.push(field("", "with interrupts off: no task held the CPU"));
        return lines;
    }
    let Some(c) = &stall.culprit else {
        lines.push(field(
            "",
            if stall.waited.cpu_idle {
                "nobody: the CPU was idle while it waited (forced idle, or unexplained)"
            } else {
                "nobody was seen holding the CPU"
            },
        ));
        return lines;
    };
    lines.push(vec![
        Segment::new(format!("  {:<10} ", "task"), Tone::Dim),
        Segment::new(format!("{} pid {} tid {}", c.comm, c.pid, c.tid), Tone::Bad),
    ]);
    lines.push(field("container", c.container.clone()));
    lines.push(field("cgroup", c.cgroup.clone()));
    lines.push(field(
        "doing",
        c.activity.clone().unwrap_or_else(|| "-".into()),
    ));
    lines.push(field("path", c.path.clone().unwrap_or_else(|| "-".into())));
    if let (Some(oncpu), Some(wall)) = (c.oncpu_ns, c.wall_ns) {
        let softirq = c.softirq_ns.filter(|&n| n > 0).map_or(String::new(), |n| {
            format!(", {} of softirqs inside it", format::duration(n))
        });
        lines.push(field(
            "on-CPU",
            format!(
                "{} of the call's {} wall{softirq}",
                format::duration(oncpu),
                format::duration(wall)
            ),
        ));
    }
    lines.push(field(
        "samples",
        match &stall.waited.migrated {
            Some(m) if m.from_cpu != stall.cpu => format!(
                "{} taken during the stall, on CPU {} and the culprit's on CPU {} (where the \
                 waiter waited first)",
                c.samples, stall.cpu, m.from_cpu
            ),
            _ => format!("{} taken on CPU {} during the stall", c.samples, stall.cpu),
        },
    ));
    if let Some(owner) = c.borrowed_stack() {
        lines.push(field(
            "stacks of",
            format!(
                "{} (tid {}), on CPU {} then: the culprit has no sample of its own in the stall",
                owner.comm, owner.tid, stall.cpu
            ),
        ));
    }
    lines.push(Vec::new());
    lines.push(heading(
        "Kernel stack (most frequent sample, innermost first)",
    ));
    push_stack(&mut lines, &c.stack);
    lines.push(heading("User stack"));
    push_stack(&mut lines, &c.user_stack);
    lines
}

fn push_stack(lines: &mut Vec<Line>, frames: &[String]) {
    if frames.is_empty() {
        lines.push(field("", "(none sampled)"));
    }
    for frame in frames {
        lines.push(vec![Segment::plain(format!("    {frame}"))]);
    }
}

fn culprit_lines(index: usize, req: &DetailRequest<'_>) -> (String, Vec<Line>) {
    let view = &req.rows.culprits[index];
    let row = &view.row;
    let mut lines = vec![
        field("comm", row.comm.clone()),
        field("container", row.container.clone()),
        field("syscall", row.syscall.clone().unwrap_or_else(|| "-".into())),
        field("path", row.path.clone().unwrap_or_else(|| "-".into())),
        field(
            "stalls",
            format!(
                "{} caused, {} in total, worst {}, last {} ago",
                row.count,
                format::duration(row.total_stall_ns),
                format::duration(row.worst_ns),
                format::age(req.now_ns.saturating_sub(row.last_seen_ns))
            ),
        ),
    ];
    let stalls: Vec<&StallRow> = view.stalls.iter().map(|&i| &req.report.stalls[i]).collect();
    if let Some(worst) = stalls.iter().max_by_key(|s| s.duration_ns) {
        lines.push(Vec::new());
        lines.push(heading(format!(
            "Worst stall: #{} on CPU {}",
            worst.id, worst.cpu
        )));
        lines.extend(stall_lines(worst, req));
    }
    lines.push(Vec::new());
    lines.push(heading("Latest stalls"));
    for stall in stalls.iter().rev().take(10) {
        lines.push(field(
            &at(req, stall.start_ns),
            format!(
                "cpu {} {} {} waited: {}",
                stall.cpu,
                format::duration(stall.duration_ns),
                kind_label(stall.kind),
                waited_text(stall)
            ),
        ));
    }
    (format!("Culprit {}", row.comm), lines)
}

/// A cgroup's run-queue waits and the neighbours that kept it waiting.
fn runq_lines(lines: &mut Vec<Line>, r: &RunqRow) {
    lines.push(heading("Run-queue wait (time runnable but not running)"));
    lines.push(field(
        "waits",
        format!(
            "{}: p50 {}, p99 {}, max {}, total {}",
            r.count,
            format::duration(r.p50_ns),
            format::duration(r.p99_ns),
            format::duration(r.max_ns),
            format::duration(r.total_ns)
        ),
    ));
    if let Some(why) = &r.why {
        lines.push(field("why", format::why(why)));
    }
    let p = &r.preempted_by;
    lines.push(field(
        "kept off",
        format!(
            "by its own cgroup {}, another cgroup {}, a kernel thread {}, its CPU quota {}",
            p.same_cgroup, p.other_cgroup, p.kthread, p.throttled
        ),
    ));
    lines.push(heading("Neighbours that kept it off the CPU"));
    if r.top_preemptors.is_empty() {
        lines.push(field("", "none seen"));
    }
    for n in &r.top_preemptors {
        lines.push(field(
            &format!("×{}", n.count),
            format!("{} in {}", n.comm, n.cgroup),
        ));
    }
}

/// A worst wait shown while no stall crossed the threshold.
fn wait_lines(index: usize, req: &DetailRequest<'_>) -> (String, Vec<Line>) {
    let r = &req.report.runq[index];
    let mut lines = vec![
        field("cgroup", r.cgroup.clone()),
        field(
            "worst wait",
            format!(
                "{}, under the {} threshold (so no stall was recorded)",
                format::duration(r.max_ns),
                format::duration(req.runq_threshold_ns)
            ),
        ),
        Vec::new(),
    ];
    runq_lines(&mut lines, r);
    (format!("Worst wait of {}", r.container), lines)
}

fn container_lines(index: usize, req: &DetailRequest<'_>) -> (String, Vec<Line>) {
    let report = req.report;
    let view = &req.rows.containers[index];
    let mut lines = vec![field("cgroup", view.cgroup.clone())];
    if let Some(r) = view.runq.map(|i| &report.runq[i]) {
        lines.push(Vec::new());
        runq_lines(&mut lines, r);
    }
    if let Some(t) = view.throttle.map(|i| &report.throttling[i]) {
        lines.push(Vec::new());
        lines.push(heading("CFS bandwidth"));
        lines.push(field(
            "quota",
            format!(
                "{}us per {}us{}{}",
                t.quota_us,
                t.period_us,
                t.burst_us
                    .map_or(String::new(), |b| format!(", burst {b}us")),
                t.cpus
                    .as_ref()
                    .map_or(String::new(), |c| format!(", CPUs {c}"))
            ),
        ));
        lines.push(field(
            "throttled",
            format!(
                "{} of {} periods ({:.1}%), {} in total",
                t.nr_throttled,
                t.nr_periods,
                t.throttled_pct,
                format::duration(t.throttled_ns)
            ),
        ));
        if let Some(usage) = t.usage_of_quota_pct {
            lines.push(field(
                "usage",
                format!(
                    "{usage:.1}% of the quota (throttled while well under 100%: stranded quota)"
                ),
            ));
        }
    }
    let syscalls: Vec<_> = report
        .syscalls
        .iter()
        .filter(|s| s.container == view.container)
        .collect();
    if !syscalls.is_empty() {
        lines.push(Vec::new());
        lines.push(heading("Syscalls (by kernel time)"));
        for s in syscalls.iter().take(10) {
            lines.push(field(
                &s.syscall,
                format!(
                    "{} calls, on-CPU {}, wall {}, max {}",
                    s.count,
                    format::duration(s.oncpu_total_ns),
                    format::duration(s.total_ns),
                    format::duration(s.max_ns)
                ),
            ));
        }
    }
    (format!("Container {}", view.container), lines)
}

fn syscall_lines(index: usize, req: &DetailRequest<'_>) -> (String, Vec<Line>) {
    let s = &req.report.syscalls[index];
    let mut lines = vec![
        field("container", s.container.clone()),
        field(
            "calls",
            match (s.p50_ns, s.p99_ns) {
                (Some(p50), Some(p99)) => format!(
                    "{}: p50 {}, p99 {}, max {}",
                    s.count,
                    format::duration(p50),
                    format::duration(p99),
                    format::duration(s.max_ns)
                ),
                _ => format!(
                    "{} sampled: the longest held a CPU {} (per-call latency needs --syscalls exact)",
                    s.count,
                    format::duration(s.max_ns)
                ),
            },
        ),
        field(
            "time",
            format!(
                "{} in the kernel on a CPU, {} wall",
                format::duration(s.oncpu_total_ns),
                format::duration(s.total_ns)
            ),
        ),
    ];
    // The slow calls the row counts, each with its caller, file and stack.
    let slow: Vec<_> = req
        .report
        .slow_syscalls
        .iter()
        .filter(|c| c.syscall == s.syscall && c.container == s.container)
        .collect();
    lines.push(Vec::new());
    lines.push(heading(format!(
        "Slow calls: {} of the {} (over the wall or on-CPU threshold), longest first",
        slow.len(),
        s.count
    )));
    if slow.is_empty() {
        lines.push(field("", "none over the threshold"));
    }
    let mut longest = slow.clone();
    longest.sort_by_key(|c| std::cmp::Reverse(c.wall_ns.max(c.oncpu_ns)));
    for c in longest.iter().take(SLOW_CALLS) {
        lines.push(field(
            &at(req, c.ts_ns.saturating_sub(c.wall_ns)),
            format!(
                "{}[{}/{}] wall {}, on-CPU {} {}",
                c.comm,
                c.pid,
                c.tid,
                format::duration(c.wall_ns),
                format::duration(c.oncpu_ns),
                c.path.as_deref().unwrap_or("(no file)")
            ),
        ));
        if !c.stack.is_empty() {
            let frames: Vec<&str> = c.stack.iter().take(4).map(String::as_str).collect();
            lines.push(field("", format!("  at {}", frames.join(" < "))));
        }
    }
    if longest.len() > SLOW_CALLS {
        lines.push(field(
            "",
            format!("... {} more", longest.len() - SLOW_CALLS),
        ));
    }
    if !s.top_paths.is_empty() {
        lines.push(Vec::new());
        lines.push(heading(
            "Files (of the slow calls; sampled: of every call a tick found)",
        ));
    }
    for p in &s.top_paths {
        lines.push(field(
            &format!("×{}", p.count),
            format!("{} ({})", p.path, format::duration(p.total_ns)),
        ));
    }
    let chains: Vec<&StallRow> = req
        .report
        .stalls
        .iter()
        .filter(|st| {
            st.culprit.as_ref().is_some_and(|c| {
                c.syscall.as_deref() == Some(s.syscall.as_str()) && c.container == s.container
            })
        })
        .collect();
    if !chains.is_empty() {
        lines.push(Vec::new());
        lines.push(heading(format!("Stalls it caused: {}", chains.len())));
        for st in chains.iter().rev().take(10) {
            lines.push(field(
                &at(req, st.start_ns),
                format!(
                    "cpu {} {} {}",
                    st.cpu,
                    format::duration(st.duration_ns),
                    culprit_chain(st)
                ),
            ));
        }
    }
    (format!("Syscall {}", s.syscall), lines)
}
