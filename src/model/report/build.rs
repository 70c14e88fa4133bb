//! Builds the report from an analysis: stalls with their waits, the waits,
//! takeovers and slow calls with ids that join them, culprits, all cut to
//! the analysis's scope (a window, the tasks of a container or a pid: then
//! each stall shows that victim's own wait). `rows` makes the aggregate
//! tables. Pure.

use std::collections::{HashMap, HashSet};

use super::evidence::{culprit_detail, gap_evidence};
use super::findings::findings;
use super::pressure::pressure_report;
use super::rows::{lost_events, runq_rows, softirq_rows, stolen_rows, syscall_rows, throttle_rows};
use super::scope::unix_ns;
use super::*;
use crate::event::{softirq_name, RunqWait, Sample, WaitMigrated};
use crate::model::culprits::{self, StallCause};
use crate::model::stalls::{self, Culprit, Stall};
use crate::model::{Analysis, Numbered, SlowCall};
use crate::syscall_table;

pub(in crate::model) fn build(a: &Analysis) -> Report {
    let header = a.header();
    let scope = a.scope();
    let kernel = a.kernel_in_scope();
    let all_events: Vec<RunqEventRow> = a
        .runq_waits
        .iter()
        .filter(|w| scope.overlaps(w.item.ts_ns.saturating_sub(w.item.wait_ns), w.item.ts_ns))
        .filter(|w| scope.passes(StallKind::Runq, w.item.wait_ns))
        .map(|w| runq_event_row(a, w))
        .collect();
    let mut stalls: Vec<StallRow> = a
        .stalls
        .stalls()
        .filter(|s| scope.overlaps(s.start_ns, s.end_ns))
        .filter(|s| scope.passes(s.kind, s.waits.longest_ns))
        .map(|s| stall_row(a, s))
        .collect();
    let is_recorder = |pid: u32, comm: &str| match header.recorder_pid {
        Some(recorder) => pid == recorder,
        None => comm == "stalltop",
    };
    let mut own_rows_left_out = 0;
    let mut leave_own = |own: bool| {
        own_rows_left_out += u64::from(own);
        !own
    };
    let mut runq_events: Vec<RunqEventRow> = all_events
        .into_iter()
        .filter(|e| leave_own(is_recorder(e.pid, &e.comm)))
        .collect();
    if scope.has_victim() {
        stalls = victims_stalls(stalls, &runq_events, scope);
        runq_events.retain(|e| scope.matches_task(e.pid, &e.cgroup, &e.container));
    }
    let stall_of: HashMap<u64, u64> = stalls
        .iter()
        .flat_map(|s| s.wait_ids.iter().map(move |&w| (w, s.id)))
        .collect();
    for event in &mut runq_events {
        event.stall_id = stall_of.get(&event.id).copied();
    }
    let takeovers: Vec<TakeoverRow> = a
        .takeovers
        .iter()
        .filter(|t| scope.overlaps(t.item.ts_ns.saturating_sub(t.item.wait_ns), t.item.ts_ns))
        .filter(|t| scope.passes(StallKind::Ksoftirqd, t.item.wait_ns))
        .map(|t| takeover_row(a, t, stall_of.get(&t.id).copied()))
        .filter(|t| !scope.has_victim() || t.stall_id.is_some())
        .collect();
    let slow_syscalls: Vec<SlowSyscallRow> = a
        .slow_syscalls
        .iter()
        .filter(|c| {
            scope.overlaps(
                c.item.call.ts_ns.saturating_sub(c.item.call.wall_ns),
                c.item.call.ts_ns,
            )
        })
        .map(|c| slow_syscall_row(a, c))
        .filter(|c| scope.matches_task(c.pid, &c.cgroup, &c.container))
        .filter(|c| leave_own(is_recorder(c.pid, &c.comm)))
        .collect();
    let mut softirq_stolen = stolen_rows(kernel.as_ref(), scope);
    softirq_stolen.retain(|s| leave_own(is_recorder(s.pid, &s.comm)));
    // A pid narrows the cgroup tables to the containers it was seen in.
    let pid_containers: Option<HashSet<&str>> = scope.pid.map(|_| {
        runq_events
            .iter()
            .map(|e| e.container.as_str())
            .chain(slow_syscalls.iter().map(|c| c.container.as_str()))
            .collect()
    });
    let in_scope = |cgroup: &str, container: &str| {
        scope.matches_cgroup(cgroup, container)
            && pid_containers
                .as_ref()
                .is_none_or(|set| set.contains(container))
    };
    let mut runq = runq_rows(a, kernel.as_ref());
    // PSI counts a cgroup's whole subtree: weighed against every row, before the scope cuts
    // a descendant out.
    let mut pressure = pressure_report(a, &runq);
    pressure
        .disagreements
        .retain(|d| in_scope(&d.cgroup, &d.container));
    runq.retain(|r| in_scope(&r.cgroup, &r.container));
    let mut throttling = throttle_rows(a, &runq);
    throttling.retain(|t| in_scope(&t.cgroup, &t.container));
    let mut syscalls = syscall_rows(a, kernel.as_ref());
    syscalls.retain(|s| in_scope(&s.container, &s.container));
    let counters = kernel.as_ref().map(|k| &k.counters);
    let end_ns = scope.to_ns.unwrap_or(u64::MAX).min(a.last_ts);
    let start_ns = header.start_ns;
    let mut report = Report {
        schema_version: SCHEMA_VERSION,
        version: env!("CARGO_PKG_VERSION"),
        host: header.host.clone(),
        start_ns,
        start_unix_ns: unix_ns(header, start_ns),
        duration_ns: end_ns.saturating_sub(start_ns),
        wall_clock_offset_ns: header.wall_clock_offset_ns,
        scope: scope.row(header),
        trigger: header.trigger.map(|t| TriggerRow {
            start_ns: t.start_ns,
            start_unix_ns: unix_ns(header, t.start_ns),
            duration_ns: t.end_ns.saturating_sub(t.start_ns),
            stall_id: (t.end_ns > t.start_ns)
                .then(|| {
                    a.stalls
                        .stalls()
                        .filter(|s| s.start_ns <= t.end_ns && t.start_ns <= s.end_ns)
                        .max_by_key(|s| s.duration_ns())
                        .map(|s| s.id)
                })
                .flatten(),
        }),
        recorder_pid: header.recorder_pid,
        own_rows_left_out,
        settings: header.settings.clone(),
        findings: Vec::new(),
        warnings: header.warnings.clone(),
        probes: header.probes.clone(),
        lost_events: lost_events(a, counters),
        map_full: counters
            .map(|c| c.map_full.iter().cloned().collect())
            .unwrap_or_default(),
        rate_limited_events: counters
            .map(|c| c.rate_limited.iter().cloned().collect())
            .unwrap_or_default(),
        culprits: culprit_rows(a, &stalls),
        runq_events,
        throttling,
        pressure,
        runq,
        stalls,
        takeovers,
        syscalls,
        slow_syscalls,
        softirq: softirq_rows(a, kernel.as_ref()),
        softirq_stolen,
    };
    report.findings = findings(&report);
    report
}

/// The stalls in which a task of the scope waited, each showing that task's
/// own wait (its longest in the stall) as what waited.
fn victims_stalls(
    stalls: Vec<StallRow>,
    events: &[RunqEventRow],
    scope: &ReportScope,
) -> Vec<StallRow> {
    let by_id: HashMap<u64, &RunqEventRow> = events.iter().map(|e| (e.id, e)).collect();
    stalls
        .into_iter()
        .filter_map(|mut stall| {
            let waited = &stall.waited;
            let shown_matches = match (waited.pid, &waited.cgroup, &waited.container) {
                (Some(pid), Some(cgroup), Some(container)) => {
                    scope.matches_task(pid, cgroup, container)
                }
                _ => false,
            };
            if shown_matches {
                return Some(stall);
            }
            let victim_waits: Vec<&RunqEventRow> = stall
                .wait_ids
                .iter()
                .filter_map(|id| by_id.get(id).copied())
                .filter(|e| scope.matches_task(e.pid, &e.cgroup, &e.container))
                .collect();
            let longest = victim_waits.iter().max_by_key(|e| e.wait_ns)?;
            let waits = victim_waits.iter().filter(|e| e.tid == longest.tid).count();
            stall.waited = WaitedRow {
                softirq: stall.waited.softirq,
                pid: Some(longest.pid),
                tid: Some(longest.tid),
                comm: Some(longest.comm.clone()),
                cgroup: Some(longest.cgroup.clone()),
                container: Some(longest.container.clone()),
                wait_ns: Some(longest.wait_ns),
                waits: Some(waits as u32),
                steal_ns: Some(longest.steal_ns),
                cpu_idle: longest.ran_instead.tid == 0,
                migrated: longest.migrated,
            };
            Some(stall)
        })
        .collect()
}

pub(in crate::model) fn stall_row(a: &Analysis, s: &Stall) -> StallRow {
    let header = a.header();
    let throttled_cgroup = s.throttled_cgroup.map(|id| a.cgroup_path(id));
    let task = s.waited.task.as_ref();
    let (own_longest, own_waits) = task.map_or((0, 0), |t| s.waits.of_task(t.tid));
    let cgroup = task.map(|t| a.cgroup_path(t.cgroup));
    StallRow {
        id: s.id,
        cpu: s.cpu,
        start_ns: s.start_ns,
        start_unix_ns: unix_ns(header, s.start_ns),
        duration_ns: s.duration_ns(),
        kind: s.kind,
        signals: s.signals,
        longest_wait_ns: s.waits.longest_ns,
        wait_ids: s.waits.waits.iter().map(|w| w.id).collect(),
        waits: s.waits.count,
        waited: WaitedRow {
            softirq: s.waited.softirq.map(softirq_name),
            pid: task.map(|t| t.pid),
            tid: task.map(|t| t.tid),
            comm: task.map(|t| t.comm.clone()),
            container: cgroup.as_deref().map(|c| a.container_of_path(c)),
            cgroup,
            wait_ns: task.map(|_| own_longest.max(s.waited.task_wait_ns)),
            waits: task.map(|_| own_waits.max(1)),
            steal_ns: task.map(|_| s.waited.task_steal_ns),
            cpu_idle: s.waited.cpu_idle && s.culprit.is_none(),
            migrated: s.waited.migrated.map(migrated_row),
        },
        culprit: s.culprit.as_ref().map(|c| culprit_detail(a, c, &s.samples)),
        quota: throttled_cgroup
            .as_deref()
            .and_then(|path| a.throttle.quota_of(path))
            .map(|(quota_us, period_us)| QuotaRow {
                quota_us,
                period_us,
            }),
        throttled_cgroup,
        evidence: s
            .first_tick
            .as_ref()
            .map(|t| gap_evidence(a, t, s.hardirq_cause())),
        gap: s.first_tick.as_ref().map(|t| {
            let start_ns = t.ts_ns.saturating_sub(t.gap_ns);
            GapRow {
                start_ns,
                start_unix_ns: unix_ns(header, start_ns),
                duration_ns: t.gap_ns,
            }
        }),
        hardirq: s.hardirq_cause().map(|h| HardirqRow {
            irq: h.irq,
            handler: h.handler.clone(),
            hrtimer: h.hrtimer.map(|f| a.kernel_symbol(f)),
            run_ns: h.run_ns,
        }),
    }
}

fn takeover_row(a: &Analysis, t: &Numbered<RunqWait>, stall_id: Option<u64>) -> TakeoverRow {
    let (id, t) = (t.id, &t.item);
    let culprit = (t.ran.tid != 0).then(|| {
        let mut culprit = Culprit {
            task: t.ran.clone(),
            syscall: t.ran_syscall.map(|(nr, _)| nr),
            syscall_start_ns: None,
            call: None,
        };
        let start = t.ts_ns.saturating_sub(t.wait_ns);
        if let Some(call) = a
            .slow_syscalls
            .iter()
            .map(|c| &c.item.call)
            .find(|call| stalls::call_matches(&culprit, call, start, t.ts_ns))
        {
            culprit.syscall = Some(call.nr);
            culprit.call = Some(call.clone());
        }
        culprit
    });
    let samples: Vec<Sample> = a
        .stalls
        .stalls()
        .filter(|s| s.cpu == t.cpu && s.start_ns <= t.ts_ns && t.ts_ns <= s.end_ns)
        .flat_map(|s| s.samples.iter().cloned())
        .collect();
    TakeoverRow {
        id,
        stall_id,
        cpu: t.cpu,
        ts_ns: t.ts_ns,
        ts_unix_ns: unix_ns(a.header(), t.ts_ns),
        wait_ns: t.wait_ns,
        steal_ns: t.steal_ns,
        culprit: culprit.map(|c| culprit_detail(a, &c, &samples)),
    }
}

/// Who held the CPU in the report's stalls, worst single wait per culprit.
fn culprit_rows(a: &Analysis, stalls: &[StallRow]) -> Vec<CulpritRow> {
    let causes: Vec<StallCause> = stalls
        .iter()
        .filter_map(|s| {
            let c = s.culprit.as_ref()?;
            Some(StallCause {
                comm: c.comm.clone(),
                container: c.container.clone(),
                syscall: c.syscall.clone(),
                path: c.path.clone(),
                stall_id: s.id,
                duration_ns: s.duration_ns,
                longest_wait_ns: s.longest_wait_ns,
                end_ns: s.start_ns + s.duration_ns,
            })
        })
        .collect();
    let mut rows = culprits::aggregate(&causes);
    for row in &mut rows {
        row.last_seen_unix_ns = unix_ns(a.header(), row.last_seen_ns);
    }
    rows
}

fn slow_syscall_row(a: &Analysis, c: &Numbered<SlowCall>) -> SlowSyscallRow {
    let (id, slow) = (c.id, &c.item);
    let c = &slow.call;
    let cgroup = a.cgroup_path(c.task.cgroup);
    SlowSyscallRow {
        id,
        ts_ns: c.ts_ns,
        ts_unix_ns: unix_ns(a.header(), c.ts_ns),
        cpu: c.cpu,
        pid: c.task.pid,
        tid: c.task.tid,
        comm: c.task.comm.clone(),
        container: a.container_of_path(&cgroup),
        cgroup,
        syscall: syscall_table::name(c.nr),
        path: c.path.text(),
        wall_ns: c.wall_ns,
        oncpu_ns: c.oncpu_ns,
        softirq_ns: c.softirq_ns,
        samples: slow.samples,
        stack: slow
            .kernel_stack
            .iter()
            .map(|&f| a.kernel_symbol(f))
            .collect(),
        user_stack: slow
            .user_stack
            .iter()
            .map(|&f| a.user_symbol(c.task.pid, f))
            .collect(),
    }
}

fn runq_event_row(a: &Analysis, w: &Numbered<RunqWait>) -> RunqEventRow {
    let (id, w) = (w.id, &w.item);
    let cgroup = a.cgroup_path(w.waiter.cgroup);
    let ran_cgroup = a.cgroup_path(w.ran.cgroup);
    RunqEventRow {
        id,
        stall_id: None,
        cpu: w.cpu,
        ts_ns: w.ts_ns,
        ts_unix_ns: unix_ns(a.header(), w.ts_ns),
        wait_ns: w.wait_ns,
        pid: w.waiter.pid,
        tid: w.waiter.tid,
        comm: w.waiter.comm.clone(),
        container: a.container_of_path(&cgroup),
        cgroup,
        steal_ns: w.steal_ns,
        ran_instead: RanInstead {
            pid: w.ran.pid,
            tid: w.ran.tid,
            comm: w.ran.comm.clone(),
            container: a.container_of_path(&ran_cgroup),
            cgroup: ran_cgroup,
            syscall: w.ran_syscall.map(|(nr, _)| syscall_table::name(nr)),
        },
        throttled_cgroup: w.throttle.map(|t| a.cgroup_path(t.cgroup)),
        migrated: w.migrated.map(migrated_row),
    }
}

fn migrated_row(m: WaitMigrated) -> MigratedRow {
    MigratedRow {
        from_cpu: m.from_cpu,
        migrations: m.migrations,
    }
}
