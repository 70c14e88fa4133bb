//! The quiet baseline's check: no task of the scenario waited over the threshold on the guest's
//! account, caused a stall or a ksoftirqd takeover, and the steal stalltop reports fits the host's.

use super::pretty;
use super::report::{Report, RunqEvent, Stall, StallKind, Takeover};
use crate::scenario::Cgroups;

/// The stall kinds a scenario's own tasks can cause; irqoff gaps are the VM's or the sampler's.
const CAUSED_KINDS: [StallKind; 3] = [StallKind::Softirq, StallKind::Ksoftirqd, StallKind::Runq];

/// The hypervisor's steal on the scenario's CPU over the scenario, from /proc/stat.
pub struct HostSteal {
    pub cpu: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub steal_ns: u64,
    /// /proc/stat's unit (USER_HZ): each of the two reads rounds down by up to one.
    pub tick_ns: u64,
}

/// The kernel adds steal to /proc/stat at the next scheduler tick (HZ=250 here).
const STEAL_ACCOUNTING_LAG_NS: u64 = 4_000_000;
/// stalltop interpolates the steal clock inside the slice a wait began in, so its share can be
/// off by some of that slice's steal.
const STEAL_PERCENT_SLACK: u64 = 10;

/// quiet: stalltop saw the scenario's cgroups, and none of their tasks waited over the threshold
/// on the guest's account. A wait the hypervisor stretched over it (with the steal stalltop
/// reports inside it taken out, it is under the threshold) is excused, and the steal stalltop
/// reports must fit in the CPU's steal in /proc/stat. Returns how many waits were excused.
pub fn check(report: &Report, cgroups: &Cgroups, host: &HostSteal) -> Result<usize, String> {
    let victim = cgroups
        .victim
        .as_deref()
        .ok_or("ground truth names no victim cgroup")?;
    let row = report.runq_row(victim)?;
    if row.count == 0 {
        return Err(report.annotate(format!(
            "stalltop counted no run-queue waits for {victim}, which woke every 1 ms:\n{}",
            pretty(row)
        )));
    }
    steal_fits(report, host)?;
    let threshold = report.settings.runq_threshold_ns;
    let ours: Vec<&RunqEvent> = report
        .runq_events
        .iter()
        .filter(|event| cgroups.all().any(|cgroup| cgroup == event.cgroup))
        .collect();
    let guest: Vec<&&RunqEvent> = ours
        .iter()
        .filter(|event| event.guest_wait_ns() >= threshold)
        .collect();
    if !guest.is_empty() {
        return Err(report.annotate(format!(
            "expected no runq_events from {:?} in the quiet baseline that are over the \
             threshold without the hypervisor's steal, found {} (first 5):\n{}",
            cgroups.all().collect::<Vec<_>>(),
            guest.len(),
            pretty(&guest[..guest.len().min(5)])
        )));
    }
    let excused = ours.len();
    let is_ours = |cgroup: Option<&str>| cgroup.is_some_and(|c| cgroups.all().any(|o| o == c));
    // A run-queue stall whose waiter waited under the threshold without the steal.
    let host_stretched = |stall: &Stall| {
        stall.kind == StallKind::Runq
            && stall.waited.wait_ns.is_some_and(|wait| {
                wait.saturating_sub(stall.waited.steal_ns.unwrap_or(0)) < threshold
            })
    };
    let stalls: Vec<&Stall> = report
        .stalls
        .iter()
        .filter(|stall| CAUSED_KINDS.contains(&stall.kind))
        .filter(|stall| {
            // A foreign task kept waiting behind ours is not judged: how long it should wait
            // depends on its weight, cgroup and affinity, which the scenario does not know (seen:
            // a sandbox daemon waiting 49 ms on CPU 1 behind the 20%-busy victim).
            let caused = stall.kind != StallKind::Runq
                && is_ours(stall.culprit.as_ref().map(|c| c.cgroup.as_str()));
            is_ours(stall.waited.cgroup.as_deref()) || caused
        })
        .filter(|stall| !host_stretched(stall))
        .collect();
    if !stalls.is_empty() {
        return Err(report.annotate(format!(
            "expected no softirq/ksoftirqd/runq stall that a task of {:?} waited in, nor a \
             softirq/ksoftirqd stall one caused, \
             found {} (first 5):\n{}",
            cgroups.all().collect::<Vec<_>>(),
            stalls.len(),
            pretty(&stalls[..stalls.len().min(5)])
        )));
    }
    let takeovers: Vec<&Takeover> = report
        .takeovers
        .iter()
        .filter(|t| is_ours(t.culprit.as_ref().map(|c| c.cgroup.as_str())))
        .collect();
    if !takeovers.is_empty() {
        return Err(report.annotate(format!(
            "expected no ksoftirqd takeover caused by a task of {:?}, found {}:\n{}",
            cgroups.all().collect::<Vec<_>>(),
            takeovers.len(),
            pretty(&takeovers[..takeovers.len().min(5)])
        )));
    }
    Ok(excused)
}

/// The steal stalltop reports inside waits on the CPU during the scenario, summed over waits that
/// do not overlap, is no more than /proc/stat's steal for the CPU (with its rounding and lag).
fn steal_fits(report: &Report, host: &HostSteal) -> Result<(), String> {
    let mut waits: Vec<&RunqEvent> = report
        .runq_events
        .iter()
        .filter(|e| e.cpu == host.cpu && e.steal_ns > 0)
        .filter(|e| e.ts_ns.saturating_sub(e.wait_ns) >= host.start_ns && e.ts_ns <= host.end_ns)
        .collect();
    waits.sort_by_key(|e| e.ts_ns);
    let mut reported = 0;
    let mut free_from = 0;
    for wait in waits {
        if wait.ts_ns - wait.wait_ns >= free_from {
            reported += wait.steal_ns;
            free_from = wait.ts_ns;
        }
    }
    let allowed = host.steal_ns
        + 2 * host.tick_ns
        + STEAL_ACCOUNTING_LAG_NS
        + host.steal_ns * STEAL_PERCENT_SLACK / 100;
    if reported > allowed {
        return Err(report.annotate(format!(
            "stalltop reports {} us of hypervisor steal inside non-overlapping waits on CPU {}, \
             more than the {} us /proc/stat shows for the run (+ rounding, lag and \
             {STEAL_PERCENT_SLACK}%: {} us)",
            reported / 1000,
            host.cpu,
            host.steal_ns / 1000,
            allowed / 1000
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::checks::fixtures::{assert_fails, culprit, report, stall, with, MS, QUIET};

    fn quiet_cgroups() -> Cgroups {
        Cgroups {
            victim: Some("/stalltop_victim".into()),
            noisy: None,
            requests: Some("/stalltop_throttled".into()),
        }
    }

    /// /proc/stat saw 30 ms of steal on CPU 1 between 1 s and 6 s.
    fn host_steal() -> HostSteal {
        HostSteal {
            cpu: 1,
            start_ns: 1_000 * MS,
            end_ns: 6_000 * MS,
            steal_ns: 30 * MS,
            tick_ns: 10 * MS,
        }
    }

    fn burstreq_wait(ts_ns: u64, wait_ns: u64, steal_ns: u64) -> Value {
        json!({"cpu": 1, "ts_ns": ts_ns, "wait_ns": wait_ns, "steal_ns": steal_ns, "pid": 9, "tid": 9,
            "comm": "burstreq", "cgroup": "/stalltop_throttled",
            "ran_instead": {"pid": 10, "comm": "burstreq", "cgroup": "/stalltop_throttled"}})
    }

    fn quiet_unwrap(report: &Report) -> usize {
        check(report, &quiet_cgroups(), &host_steal()).unwrap()
    }

    fn quiet_fails(report: &Report, needle: &str) {
        assert_fails(
            check(report, &quiet_cgroups(), &host_steal()).map(|_| ()),
            needle,
        );
    }

    #[test]
    fn quiet_passes_with_foreign_events_only() {
        assert_eq!(quiet_unwrap(&report(QUIET)), 0);
    }

    #[test]
    fn quiet_fails_on_a_long_wait_in_a_scenario_cgroup() {
        let event = burstreq_wait(2_000 * MS, 12_500_000, 0);
        quiet_fails(&with(QUIET, "/runq_events/0", event), "found 1");
        // 3 ms of steal leaves 9.5 ms on the guest's account: under the threshold.
        let stretched = burstreq_wait(2_000 * MS, 12_500_000, 3 * MS);
        assert_eq!(quiet_unwrap(&with(QUIET, "/runq_events/0", stretched)), 1);
        let not_enough = burstreq_wait(2_000 * MS, 12_500_000, 2 * MS);
        quiet_fails(&with(QUIET, "/runq_events/0", not_enough), "found 1");
    }

    #[test]
    fn quiet_fails_when_stalltop_reports_more_steal_than_the_host_took() {
        // 30 ms of steal (+ 2 ticks of rounding, 4 ms of lag, 10%): up to 57 ms fits.
        let mut doc: Value = serde_json::from_str(QUIET).unwrap();
        doc["runq_events"] = json!([
            burstreq_wait(2_000 * MS, 12 * MS, 9 * MS),
            burstreq_wait(2_005 * MS, 12 * MS, 9 * MS), // overlaps the first: not summed
            burstreq_wait(3_000 * MS, 50 * MS, 45 * MS),
        ]);
        assert_eq!(
            quiet_unwrap(&serde_json::from_value(doc.clone()).unwrap()),
            3
        );
        doc["runq_events"][2]["steal_ns"] = json!(49 * MS);
        quiet_fails(
            &serde_json::from_value(doc.clone()).unwrap(),
            "stalltop reports 58000 us of hypervisor steal",
        );
        // Steal outside the scenario is not compared.
        doc["runq_events"][2]["ts_ns"] = json!(7_000 * MS);
        assert_eq!(quiet_unwrap(&serde_json::from_value(doc).unwrap()), 3);
    }

    #[test]
    fn quiet_fails_when_stalltop_never_saw_the_victim() {
        quiet_fails(
            &with(QUIET, "/runq/0/cgroup", json!("/other")),
            "no runq row for cgroup /stalltop_victim",
        );
        quiet_fails(
            &with(QUIET, "/runq/0/count", json!(0)),
            "no run-queue waits",
        );
    }

    #[test]
    fn quiet_fails_on_a_stall_or_takeover_of_a_scenario_task() {
        let mut ours = stall(1, 10, 12_000_000, "runq");
        ours["waited"] = json!({"pid": 5, "comm": "victim", "cgroup": "/stalltop_victim",
            "wait_ns": 12_000_000, "steal_ns": 1_000_000});
        quiet_fails(
            &with(QUIET, "/stalls/0", ours.clone()),
            "stall that a task of",
        );
        // The hypervisor took enough of the wait to leave it under the threshold.
        ours["waited"]["steal_ns"] = json!(2_500_000);
        assert_eq!(quiet_unwrap(&with(QUIET, "/stalls/0", ours)), 0);
        let mut caused = stall(1, 10, 12_000_000, "softirq");
        caused["culprit"] = culprit(7, "burstreq", "/stalltop_throttled", None);
        quiet_fails(&with(QUIET, "/stalls/0", caused), "found 1");
        // A foreign task kept waiting behind the victim is not judged.
        let mut foreign = stall(1, 10, 49_000_000, "runq");
        foreign["waited"] = json!({"pid": 8, "comm": "daemon", "cgroup": "/",
            "wait_ns": 49_000_000, "steal_ns": 0});
        foreign["culprit"] = culprit(5, "victim", "/stalltop_victim", None);
        assert_eq!(quiet_unwrap(&with(QUIET, "/stalls/0", foreign)), 0);
        let takeover = json!({"cpu": 1, "ts_ns": 5, "wait_ns": 20_000_000, "steal_ns": 0,
            "culprit": culprit(7, "burstreq", "/stalltop_throttled", None)});
        quiet_fails(
            &with(QUIET, "/takeovers/0", takeover),
            "ksoftirqd takeover caused by",
        );
    }
}
