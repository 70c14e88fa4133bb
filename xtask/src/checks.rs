//! Pure checks of a stalltop report (`stalltop report --json`) against a scenario's ground truth;
//! each returns a message that states the tolerance and quotes the relevant part of the report.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::scenario::{ksoftirqd, slow_syscall, Cgroups, CpuStatDelta};

/// The noisy neighbour must push the victim's runq p99 to at least this multiple of the quiet
/// baseline's (repro.md D: victim lateness p99 3.0 ms with the hogs, 0.24-0.26 ms without).
pub const NOISY_P99_FACTOR: u64 = 3;
/// ... and its worst wait to at least this (repro.md D: 6.9-7.0 ms measured with shares 10240).
pub const NOISY_MIN_MAX_NS: u64 = 3_000_000;
/// The comm of the preemptor the victim must blame first (in the noisy cgroup).
pub const NOISY_COMM: &str = "hog";
/// Absolute slack on the throttled-period count: stalltop and the scenario read the counters
/// at different moments, so a throttle at either edge may fall on either side.
pub const THROTTLED_COUNT_SLACK: u64 = 2;
/// Relative slack on top. The ~2 s stalltop records beyond the load cannot add throttled
/// periods: the cgroup exists only during the scenario (which keeps it, idle, 1 s after its own
/// final read so that a poller sees the final counters). So this is edge headroom only.
pub const THROTTLED_COUNT_PERCENT: u64 = 10;
/// Relative tolerance on throttled time (repro.md C asks ±20%).
pub const THROTTLED_TIME_PERCENT: u64 = 20;
/// Contamination: more foreign forks than this during a run means another workload was active.
pub const MAX_FOREIGN_FORKS: u64 = 100;
/// Contamination: a 1-minute load average above this before the start means a busy VM.
pub const MAX_LOADAVG_BEFORE: f64 = 4.0;
/// Contamination of the quiet baseline: the host took more than this share (percent) of the
/// scenario's CPU over its window. Host steal in small pieces shows as no gap, but it piles up the
/// periodic requests that then queue behind each other with little steal inside their own waits
/// (seen: 1.1 and 1.5 s of 5 s taken, waits of 20 ms on the guest's account; passing runs had
/// 10-580 ms, and at 10% three attempts in a row were discarded for 520-800 ms).
pub const MAX_QUIET_STEAL_PERCENT: u64 = 20;
/// The stall kinds a scenario's own tasks can cause; "irqoff" gaps are the VM's or the sampler's.
pub const CAUSED_KINDS: [&str; 3] = ["softirq", "ksoftirqd", "runq"];
/// An irqs-off gap on the victim's CPU is contradicted by the victim when it is longer than this
/// many times the victim's worst stall, plus `IRQOFF_SLACK_NS`: interrupts off (or a stopped
/// vCPU) for G ms delay every wake-up due inside the gap, the first by nearly G ms, or, when they
/// catch the victim working, stop its clock reads for G ms (it then skips periods, late to none).
pub const IRQOFF_VICTIM_FACTOR: u64 = 2;
pub const IRQOFF_SLACK_NS: u64 = 2_000_000;
/// slow-syscall: a call's wall time as stalltop reports it, within this of the culprit's own
/// measurement (the brief's ±10%; agreement seen is within 1.5%).
pub const CALL_WALL_PERCENT: u64 = 10;
/// slow-syscall: stalltop's on-CPU time of a call is at least this much below the culprit's own
/// CPU clock, and at most this much above `wall - runq wait` (the ceiling stolen time included:
/// the culprit's CPU clock excludes what the host stole, stalltop's switch-to-switch time does
/// not).
pub const CALL_ONCPU_PERCENT: u64 = 10;
/// ... plus this for calls of the same syscall the runtime makes on its own in the culprit's
/// cgroup (thread stacks and large buffers freed by munmap: ~0.2 ms each, a few per run).
pub const CALL_ONCPU_SLACK_NS: u64 = 1_000_000;
/// slow-syscall: the victim must have been this much later than stalltop's runq threshold for a
/// runq stall to be required (its lateness also holds the timer's own latency).
pub const VICTIM_MARGIN_NS: u64 = 1_000_000;
/// slow-syscall: fadvise64 p50/p99 within this of the scenario's: the report's quantiles come
/// from log-linear slots (within an eighth), the scenario's from user space (+~1 us a call).
pub const QUANTILE_PERCENT: u64 = 20;
pub const QUANTILE_SLACK_NS: u64 = 1_000;
/// ksoftirqd: a takeover ends within this of the window in which a watcher on CPU 0 saw
/// ksoftirqd/1's first switch-in after a burst (~1 us, longer when the watcher was preempted
/// between two reads); and when that
/// switch-in came within this of the burst's end, the hog held the CPU for the whole wait and
/// must be named (repro.md A: ±2 ms; measured: the takeover ends 3-7 us before the watcher sees
/// the switch, 15-40 us after the burst).
pub const TAKEOVER_END_SLACK_NS: u64 = 2_000_000;
/// ksoftirqd: at least this share of the judged bursts (no vCPU stall, watched in time) must
/// have such a takeover. Not 100%, for what the scenario cannot see: a burst that ends with no
/// NET_RX deferred to ksoftirqd, or a wake-up of ksoftirqd/1 the watcher mistakes for the
/// switch-in. Not lower: the hog is the task that held the CPU through every judged wait, and
/// a task that ran for 40-120 us between the hog and ksoftirqd/1 (a kworker, stalltop's own
/// reader) is no culprit.
pub const TAKEOVER_MIN_PERCENT: usize = 90;
/// ksoftirqd: fewer bursts free of vCPU stalls than this make the run contaminated.
pub const MIN_CLEAN_BURSTS: usize = 10;
/// ksoftirqd: NET_RX time stalltop charges to the hog, within this of the time the hog itself
/// lost to interruptions (which also holds hard irqs and the other softirqs, ~1-2%, while
/// stalltop's also holds NET_RX that ran before the hog's first clock read of a burst).
pub const STOLEN_PERCENT: u64 = 10;
/// ksoftirqd: NET_RX's run time inside ksoftirqd/1 is at least this share of ksoftirqd/1's own
/// CPU time (under saturation NET_RX is nearly all it does). No upper bound: stalltop's sum of
/// NET_RX entry-to-exit times came out 0-10% above ksoftirqd/1's schedstat CPU time in about
/// one run in three, with /proc/stat showing no steal; the cause is not understood (see
/// docs/design-notes.md), so the check claims only what holds.
pub const KSOFTIRQD_NET_RX_MIN_PERCENT: u64 = 80;

/// The parts of the report JSON contract the checks read.
#[derive(Debug, Deserialize, Serialize)]
pub struct Report {
    pub settings: Settings,
    pub lost_events: BTreeMap<String, u64>,
    pub runq: Vec<RunqRow>,
    pub runq_events: Vec<RunqEvent>,
    pub throttling: Vec<ThrottlingRow>,
    pub stalls: Vec<Stall>,
    pub takeovers: Vec<Takeover>,
    pub culprits: Vec<CulpritRow>,
    pub syscalls: Vec<SyscallRow>,
    pub softirq: Vec<SoftirqRow>,
    pub softirq_stolen: Vec<StolenRow>,
}

/// The thresholds stalltop recorded with.
#[derive(Debug, Deserialize, Serialize)]
pub struct Settings {
    pub runq_threshold_ns: u64,
    pub stall_threshold_ns: u64,
    pub syscall_wall_threshold_ns: u64,
    pub syscall_oncpu_threshold_ns: u64,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct Stall {
    pub cpu: u32,
    pub start_ns: u64,
    pub duration_ns: u64,
    pub kind: String,
    pub waited: Waited,
    pub culprit: Option<Culprit>,
    /// irqoff stalls: the longest gap between sampler ticks.
    pub gap: Option<Gap>,
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize)]
pub struct Gap {
    pub start_ns: u64,
    pub duration_ns: u64,
}

#[derive(Debug, Default, Deserialize, Serialize)]
pub struct Waited {
    pub softirq: Option<String>,
    pub pid: Option<u32>,
    pub comm: Option<String>,
    pub cgroup: Option<String>,
    pub wait_ns: Option<u64>,
    pub steal_ns: Option<u64>,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct Culprit {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub cgroup: String,
    pub container: String,
    pub syscall: Option<String>,
    pub path: Option<String>,
    pub oncpu_ns: Option<u64>,
    pub wall_ns: Option<u64>,
    pub stack: Vec<String>,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct Takeover {
    pub cpu: u32,
    pub ts_ns: u64,
    pub wait_ns: u64,
    pub culprit: Option<Culprit>,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct CulpritRow {
    pub comm: String,
    pub container: String,
    pub syscall: Option<String>,
    pub path: Option<String>,
    pub count: u64,
    pub total_stall_ns: u64,
    pub worst_ns: u64,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct SyscallRow {
    pub syscall: String,
    pub container: String,
    pub count: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub total_ns: u64,
    pub oncpu_total_ns: u64,
    pub top_paths: Vec<PathRow>,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct PathRow {
    pub path: String,
    pub count: u64,
    pub total_ns: u64,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct SoftirqRow {
    pub cpu: u32,
    pub vector: String,
    pub count: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub in_ksoftirqd: u64,
    /// Beyond the issue's contract; checked when present.
    #[serde(default)]
    pub run_in_ksoftirqd_ns: Option<u64>,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct StolenRow {
    pub pid: u32,
    pub comm: String,
    pub vector: String,
    pub ns: u64,
    pub count: u64,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct RunqRow {
    pub cgroup: String,
    pub count: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub preempted_by: PreemptedBy,
    pub top_preemptors: Vec<Preemptor>,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct PreemptedBy {
    pub same_cgroup: u64,
    pub other_cgroup: u64,
    pub kthread: u64,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct Preemptor {
    pub comm: String,
    pub cgroup: String,
    pub count: u64,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct RunqEvent {
    pub cpu: u32,
    pub ts_ns: u64,
    pub wait_ns: u64,
    /// Of the wait, the time the hypervisor took the vCPU.
    pub steal_ns: u64,
    pub pid: u32,
    pub comm: String,
    pub cgroup: String,
    pub ran_instead: Task,
}

impl RunqEvent {
    /// The part of the wait the guest caused (the hypervisor's steal taken out).
    fn guest_wait_ns(&self) -> u64 {
        self.wait_ns.saturating_sub(self.steal_ns)
    }
}

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

#[derive(Debug, Deserialize, Serialize)]
pub struct Task {
    pub pid: u32,
    pub comm: String,
    pub cgroup: String,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct ThrottlingRow {
    pub cgroup: String,
    pub quota_us: i64,
    pub period_us: i64,
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_ns: u64,
}

impl Report {
    pub fn parse(json: &str) -> Result<Self, String> {
        serde_json::from_str(json).map_err(|err| format!("report JSON: {err}"))
    }

    fn runq_row(&self, cgroup: &str) -> Result<&RunqRow, String> {
        self.runq
            .iter()
            .find(|row| row.cgroup == cgroup)
            .ok_or_else(|| {
                let seen: Vec<&str> = self.runq.iter().map(|row| row.cgroup.as_str()).collect();
                self.annotate(format!("no runq row for cgroup {cgroup}; rows: {seen:?}"))
            })
    }

    /// Appends the lost-event counters to a failure message when any is non-zero.
    fn annotate(&self, message: String) -> String {
        let lost: BTreeMap<&String, &u64> =
            self.lost_events.iter().filter(|(_, &n)| n > 0).collect();
        if lost.is_empty() {
            message
        } else {
            format!("{message}\n(stalltop lost events, which may explain it: {lost:?})")
        }
    }
}

/// Why a quiet run is the host's to answer for: it took too much of the scenario's CPU.
pub fn quiet_steal_contaminated(steal_ns: u64, window_ns: u64) -> Option<String> {
    (steal_ns * 100 > window_ns * MAX_QUIET_STEAL_PERCENT).then(|| {
        format!(
            "the host took {} ms of the scenario CPU's {} ms (> {MAX_QUIET_STEAL_PERCENT}%)",
            steal_ns / 1_000_000,
            window_ns / 1_000_000
        )
    })
}

/// Why a run cannot be trusted, if it cannot.
pub fn contaminated(foreign_forks: u64, loadavg_before: f64) -> Option<String> {
    if foreign_forks > MAX_FOREIGN_FORKS {
        Some(format!(
            "{foreign_forks} foreign forks during the run (> {MAX_FOREIGN_FORKS})"
        ))
    } else if loadavg_before > MAX_LOADAVG_BEFORE {
        Some(format!(
            "load average {loadavg_before:.2} before the start (> {MAX_LOADAVG_BEFORE})"
        ))
    } else {
        None
    }
}

/// quiet: stalltop saw the scenario's cgroups, and none of their tasks waited over the threshold
/// on the guest's account. A wait the hypervisor stretched over it (with the steal stalltop
/// reports inside it taken out, it is under the threshold) is excused, and the steal stalltop
/// reports must fit in the CPU's steal in /proc/stat. Returns how many waits were excused.
pub fn quiet(report: &Report, cgroups: &Cgroups, host: &HostSteal) -> Result<usize, String> {
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
        stall.kind == "runq"
            && stall.waited.wait_ns.is_some_and(|wait| {
                wait.saturating_sub(stall.waited.steal_ns.unwrap_or(0)) < threshold
            })
    };
    let stalls: Vec<&Stall> = report
        .stalls
        .iter()
        .filter(|stall| CAUSED_KINDS.contains(&stall.kind.as_str()))
        .filter(|stall| {
            // A foreign task kept waiting behind ours is not judged: how long it should wait
            // depends on its weight, cgroup and affinity, which the scenario does not know (seen:
            // a sandbox daemon waiting 49 ms on CPU 1 behind the 20%-busy victim).
            let caused =
                stall.kind != "runq" && is_ours(stall.culprit.as_ref().map(|c| c.cgroup.as_str()));
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

/// The irqs-off gaps stalltop reported on the victim's CPU inside a window, split by what the
/// victim (a 1 ms waker on that CPU) saw.
#[derive(Debug, Default)]
pub struct IrqoffGaps<'r> {
    /// Gaps on any CPU, anywhere in the recording (printed).
    pub all: usize,
    /// Gaps the victim's worst stall allows, at least a stall threshold of them inside the window:
    /// the VM's (a stopped vCPU) or real irqs-off time.
    pub possible: Vec<&'r Stall>,
    /// Gaps the victim contradicts: it ran on time every millisecond through them.
    pub contradicted: Vec<&'r Stall>,
    /// Gaps with less than a stall threshold inside the window that the victim allows (e.g. one
    /// that ends just after the window opened): too short there to make a stall of their own.
    pub edge: usize,
}

impl IrqoffGaps<'_> {
    pub fn summary(&self) -> String {
        let longest = |gaps: &[&Stall]| gaps.iter().map(|s| s.duration_ns).max().unwrap_or(0);
        format!(
            "{} irqs-off/hypervisor gaps in the recording; on the victim's CPU in the window: {} \
             possible (longest {} ms), {} contradicted by the victim (longest {} ms), {} at the \
             edge",
            self.all,
            self.possible.len(),
            longest(&self.possible) / 1_000_000,
            self.contradicted.len(),
            longest(&self.contradicted) / 1_000_000,
            self.edge
        )
    }
}

/// Sorts the irqoff stalls on `cpu` that overlap `start_ns..end_ns` (while the victim ran) by
/// whether a victim that was never kept from its CPU longer than `victim_worst_stall_ns` (late
/// to wake, or stopped while it worked) allows them.
pub fn irqoff_gaps(
    report: &Report,
    cpu: u32,
    start_ns: u64,
    end_ns: u64,
    victim_worst_stall_ns: u64,
) -> IrqoffGaps<'_> {
    let mut gaps = IrqoffGaps::default();
    let ceiling = IRQOFF_VICTIM_FACTOR * victim_worst_stall_ns + IRQOFF_SLACK_NS;
    for stall in report.stalls.iter().filter(|s| s.kind == "irqoff") {
        gaps.all += 1;
        // The gap itself: run-queue waits merged into its stall can make the stall longer.
        let gap = stall.gap.unwrap_or(Gap {
            start_ns: stall.start_ns,
            duration_ns: stall.duration_ns,
        });
        let overlap = (gap.start_ns + gap.duration_ns)
            .min(end_ns)
            .saturating_sub(gap.start_ns.max(start_ns));
        if stall.cpu != cpu || overlap == 0 {
            continue;
        }
        // Only the part inside the window is covered by the victim.
        if overlap > ceiling {
            gaps.contradicted.push(stall);
        } else if overlap >= report.settings.stall_threshold_ns {
            gaps.possible.push(stall);
        } else {
            gaps.edge += 1;
        }
    }
    gaps
}

/// quiet: stalltop must not report irqs-off gaps the victim disproves.
pub fn quiet_gaps(
    report: &Report,
    gaps: &IrqoffGaps,
    victim_worst_stall_ns: u64,
) -> Result<(), String> {
    if gaps.contradicted.is_empty() {
        return Ok(());
    }
    Err(report.annotate(format!(
        "stalltop reported {} irqs-off gaps on the victim's CPU that did not happen: the victim \
         woke there every 1 ms and was never kept from it more than {} us (late to wake, or \
         stopped while it worked), yet the gaps last up to {} ms (a gap longer than \
         {IRQOFF_VICTIM_FACTOR}x that + {} ms is impossible; first 5):\n{}",
        gaps.contradicted.len(),
        victim_worst_stall_ns / 1000,
        gaps.contradicted
            .iter()
            .map(|s| s.duration_ns)
            .max()
            .unwrap_or(0)
            / 1_000_000,
        IRQOFF_SLACK_NS / 1_000_000,
        pretty(&gaps.contradicted[..gaps.contradicted.len().min(5)])
    )))
}

/// noisy-neighbour: the victim's runq latency rose well above the quiet baseline's, and stalltop
/// blames the hogs of the noisy cgroup.
pub fn noisy_neighbour(
    report: &Report,
    baseline: &Report,
    cgroups: &Cgroups,
) -> Result<(), String> {
    let victim = cgroups
        .victim
        .as_deref()
        .ok_or("ground truth names no victim cgroup")?;
    let noisy = cgroups
        .noisy
        .as_deref()
        .ok_or("ground truth names no noisy cgroup")?;
    let row = report.runq_row(victim)?;
    let quiet = baseline
        .runq_row(victim)
        .map_err(|err| format!("quiet baseline: {err}"))?;
    let fail =
        |what: String| Err(report.annotate(format!("{what}\nvictim runq row:\n{}", pretty(row))));
    if row.p99_ns < NOISY_P99_FACTOR * quiet.p99_ns {
        return fail(format!(
            "victim runq p99 {} ns is not >= {NOISY_P99_FACTOR}x the quiet baseline's {} ns",
            row.p99_ns, quiet.p99_ns
        ));
    }
    if row.max_ns < NOISY_MIN_MAX_NS {
        return fail(format!(
            "victim runq max {} ns is below {NOISY_MIN_MAX_NS} ns",
            row.max_ns
        ));
    }
    match row.top_preemptors.first() {
        Some(top) if top.comm == NOISY_COMM && top.cgroup == noisy => {}
        _ => {
            return fail(format!(
                "the victim's top preemptor is not comm {NOISY_COMM:?} in {noisy}"
            ))
        }
    }
    if row.preempted_by.other_cgroup == 0 {
        return fail("preempted_by.other_cgroup is 0, the hogs are in another cgroup".to_owned());
    }
    Ok(())
}

/// throttle: stalltop's throttling row for the cgroup matches the scenario's own cpu.stat delta.
pub fn throttle(report: &Report, truth: &CpuStatDelta) -> Result<(), String> {
    let Some(row) = report
        .throttling
        .iter()
        .find(|row| row.cgroup == truth.cgroup)
    else {
        let seen: Vec<&str> = report
            .throttling
            .iter()
            .map(|row| row.cgroup.as_str())
            .collect();
        return Err(report.annotate(format!(
            "no throttling row for {}; rows: {seen:?}",
            truth.cgroup
        )));
    };
    let fail = |what: String| {
        Err(report.annotate(format!(
            "{what}\nthrottling row:\n{}\nscenario's own cpu.stat delta:\n{}",
            pretty(row),
            pretty(truth)
        )))
    };
    if (row.quota_us, row.period_us) != (truth.quota_us, truth.period_us) {
        return fail(format!(
            "quota/period {}/{} us, the scenario set {}/{} us",
            row.quota_us, row.period_us, truth.quota_us, truth.period_us
        ));
    }
    if row.nr_throttled == 0 {
        return fail("nr_throttled is 0".to_owned());
    }
    let count_slack =
        THROTTLED_COUNT_SLACK + (truth.nr_throttled * THROTTLED_COUNT_PERCENT).div_ceil(100);
    if row.nr_throttled.abs_diff(truth.nr_throttled) > count_slack {
        return fail(format!(
            "nr_throttled {} is not within ±{count_slack} ({THROTTLED_COUNT_SLACK} + \
             {THROTTLED_COUNT_PERCENT}%) of the scenario's {}",
            row.nr_throttled, truth.nr_throttled
        ));
    }
    let time_slack = truth.throttled_ns * THROTTLED_TIME_PERCENT / 100;
    if row.throttled_ns.abs_diff(truth.throttled_ns) > time_slack {
        return fail(format!(
            "throttled_ns {} is not within ±{THROTTLED_TIME_PERCENT}% ({time_slack} ns) of the \
             scenario's {}",
            row.throttled_ns, truth.throttled_ns
        ));
    }
    Ok(())
}

/// slow-syscall: stalltop's syscall table has each long call with its syscall, file, wall and
/// on-CPU time; fadvise64 has its full latency distribution; and where the victim was delayed
/// by a call past the runq threshold, the stall names the culprit and its syscall. Every failure
/// is listed, not just the first.
pub fn slow_syscall(report: &Report, truth: &slow_syscall::Truth) -> Result<(), String> {
    let mut failures = Vec::new();
    for call in &truth.calls {
        if let Err(message) = long_call(report, truth, call) {
            failures.push(message);
        }
    }
    if let Err(message) = fadvise_distribution(report, &truth.fadvise) {
        failures.push(message);
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(report.annotate(failures.join("\n\n")))
    }
}

/// `part` of `whole` percent, rounded up.
fn percent_of(whole: u64, part: u64) -> u64 {
    (whole * part).div_ceil(100)
}

/// A report path (or pattern with `*` components) names `path`.
fn path_matches(pattern: &str, path: &str) -> bool {
    let (p, q): (Vec<&str>, Vec<&str>) = (pattern.split('/').collect(), path.split('/').collect());
    p.len() == q.len() && p.iter().zip(&q).all(|(a, b)| a == b || *a == "*")
}

enum Listing {
    Must,
    MustNot,
    Ambiguous,
}

/// Whether stalltop must list a call as slow (its own CPU clock, or its least possible time in
/// the kernel, is twice a threshold: stalltop's on-CPU time leaves out the softirqs the CPU
/// clock holds), must not (wall time under 90% of the wall threshold, and wall minus runnable
/// time, which bounds stalltop's on-CPU time, under 90% of the on-CPU one), or anything
/// between.
fn listing(settings: &Settings, timing: &slow_syscall::Timing) -> Listing {
    let in_kernel_at_least = timing.in_kernel_at_least();
    if timing.oncpu_ns >= 2 * settings.syscall_oncpu_threshold_ns
        || in_kernel_at_least >= 2 * settings.syscall_wall_threshold_ns
    {
        Listing::Must
    } else if timing.wall_ns * 10 < settings.syscall_wall_threshold_ns * 9
        && in_kernel_at_least * 10 < settings.syscall_oncpu_threshold_ns * 9
    {
        Listing::MustNot
    } else {
        Listing::Ambiguous
    }
}

fn too_close(settings: &Settings, timing: &slow_syscall::Timing) -> String {
    format!(
        "a call took {} ns ({} ns on its CPU clock, {} ns runnable), too close to stalltop's \
         thresholds ({} ns on-CPU, {} ns wall) to say whether it must be listed",
        timing.wall_ns,
        timing.oncpu_ns,
        timing.runq_wait_ns,
        settings.syscall_oncpu_threshold_ns,
        settings.syscall_wall_threshold_ns
    )
}

/// slow-syscall runs whose own calls came out too close to stalltop's thresholds to judge (a
/// short call the host stretched by taking its vCPU): the run is the VM's, not stalltop's.
pub fn slow_syscall_undecidable(
    settings: &Settings,
    truth: &slow_syscall::Truth,
) -> Option<String> {
    truth.calls.iter().find_map(|call| {
        call.calls
            .iter()
            .find(|timing| matches!(listing(settings, timing), Listing::Ambiguous))
            .map(|timing| format!("{}: {}", call.syscall, too_close(settings, timing)))
    })
}

/// The calls of a group stalltop must list as slow and the others, which it must not (see
/// `listing`); a call between fails.
fn classify<'t>(
    settings: &Settings,
    call: &'t slow_syscall::Call,
) -> Result<(Vec<&'t slow_syscall::Timing>, Vec<&'t slow_syscall::Timing>), String> {
    let (mut slow, mut fast) = (Vec::new(), Vec::new());
    for timing in &call.calls {
        match listing(settings, timing) {
            Listing::Must => slow.push(timing),
            Listing::MustNot => fast.push(timing),
            Listing::Ambiguous => return Err(too_close(settings, timing)),
        }
    }
    if slow.is_empty() {
        return Err("none of the calls was slow: the scenario did not inject its stall".into());
    }
    Ok((slow, fast))
}

fn long_call(
    report: &Report,
    truth: &slow_syscall::Truth,
    call: &slow_syscall::Call,
) -> Result<(), String> {
    let what = format!(
        "{} ({}) by {} in {}",
        call.syscall,
        call.path.as_deref().unwrap_or("no file"),
        truth.comm,
        call.cgroup
    );
    let Some(row) = report
        .syscalls
        .iter()
        .find(|row| row.syscall == call.syscall && row.container == call.cgroup)
    else {
        let seen: Vec<&str> = report
            .syscalls
            .iter()
            .filter(|row| row.syscall == call.syscall)
            .map(|row| row.container.as_str())
            .collect();
        return Err(format!(
            "{what}: no `{}` row for container {} in the syscall table; containers with one: \
             {seen:?}",
            call.syscall, call.cgroup
        ));
    };
    let fail = |problem: String| {
        Err(format!(
            "{what}: {problem}\nsyscall row:\n{}\nthe culprit's own timing:\n{}",
            pretty(row),
            pretty(call)
        ))
    };
    let (slow, fast) = match classify(&report.settings, call) {
        Ok(split) => split,
        Err(problem) => return fail(problem),
    };
    // What the scenario knows of the slow calls' time in the kernel: at most their wall time, at
    // least that minus the time they were runnable (a preemption on the way out is in the
    // former only; one inside in both). A call never switched out was in the kernel exactly its
    // wall time (less ~10 us of schedstat reads).
    let wall: u64 = slow.iter().map(|t| t.wall_ns).sum();
    let least: u64 = slow.iter().map(|t| t.in_kernel_at_least()).sum();
    let held_on = slow.iter().all(|t| t.switches == 0);
    let (floor, ceiling) = if held_on {
        (
            least - percent_of(least, CALL_WALL_PERCENT),
            least + percent_of(least, CALL_WALL_PERCENT),
        )
    } else {
        (
            least - percent_of(least, CALL_WALL_PERCENT),
            wall + percent_of(wall, CALL_WALL_PERCENT),
        )
    };
    let reported_wall = match &call.path {
        Some(path) => {
            let Some(entry) = row.top_paths.iter().find(|e| path_matches(&e.path, path)) else {
                return fail(format!("{path} is not in top_paths"));
            };
            if entry.count != slow.len() as u64 {
                return fail(format!(
                    "top_paths counts {} slow calls on {}, the culprit made {} (and {} fast ones)",
                    entry.count,
                    entry.path,
                    slow.len(),
                    fast.len()
                ));
            }
            entry.total_ns
        }
        // A single call, the slowest of its syscall in the culprit's cgroup by far.
        None if slow.len() == 1 => row.max_ns,
        None => return fail(format!("{} slow calls without a file", slow.len())),
    };
    if !(floor..=ceiling).contains(&reported_wall) {
        return fail(format!(
            "wall {reported_wall} ns is outside {floor}..={ceiling} ns: ±{CALL_WALL_PERCENT}% \
             around the calls' {} (wall {wall} ns, of which {} ns runnable{})",
            if held_on {
                "time in the kernel".to_owned()
            } else {
                format!("{least}..={wall} ns in the kernel")
            },
            wall - least,
            if held_on { ": never switched out" } else { "" }
        ));
    }
    // On-CPU of the row (every call of the syscall in the cgroup): at least the calls' own CPU
    // clock, at most their wall time, plus a few calls the runtime makes on its own. Not at most
    // "wall minus run_delay": stalltop's on-CPU is the time the task held the guest's CPU, which
    // includes what the hypervisor stole from that vCPU meanwhile; the thread's CPU clock and
    // schedstat put that steal on the runnable side (checked against a sched_switch trace: a
    // 44.4 ms fadvise64 held CPU 1 for 39.2 ms, stalltop said 38.9 ms, its CPU clock 27.6 ms and
    // run_delay 17.0 ms).
    let clock: u64 = call.calls.iter().map(|t| t.oncpu_ns).sum();
    let wall: u64 = call.calls.iter().map(|t| t.wall_ns).sum();
    let floor = clock - percent_of(clock, CALL_ONCPU_PERCENT);
    let ceiling = wall + CALL_ONCPU_SLACK_NS;
    if !(floor..=ceiling).contains(&row.oncpu_total_ns) {
        return fail(format!(
            "on-CPU {} ns is outside {floor}..={ceiling} ns: the {} calls' own CPU clock \
             {clock} ns -{CALL_ONCPU_PERCENT}%, up to their wall time {wall} ns + \
             {CALL_ONCPU_SLACK_NS} ns",
            row.oncpu_total_ns,
            call.calls.len()
        ));
    }
    for timing in &slow {
        let overlapping = |stall: &&Stall| {
            stall.start_ns < timing.end_ns && stall.start_ns + stall.duration_ns > timing.start_ns
        };
        // Stalls that name this call must get its file right.
        for stall in report.stalls.iter().filter(overlapping) {
            let Some(culprit) = &stall.culprit else {
                continue;
            };
            if culprit.tid != call.tid || culprit.syscall.as_deref() != Some(call.syscall) {
                continue;
            }
            if let (Some(reported), Some(path)) = (&culprit.path, &call.path) {
                if !path_matches(reported, path) {
                    return fail(format!(
                        "a stall names the call's file {reported}:\n{}",
                        pretty(stall)
                    ));
                }
            }
        }
        // A call that held the CPU throughout delayed the victim: the stall must name it.
        let required_late = report.settings.runq_threshold_ns + VICTIM_MARGIN_NS;
        if timing.switches <= 1 && timing.victim_late_ns >= required_late {
            let named = report.stalls.iter().filter(overlapping).any(|stall| {
                stall.waited.comm.as_deref() == Some(truth.victim_comm)
                    && stall.culprit.as_ref().is_some_and(|c| {
                        c.tid == call.tid && c.syscall.as_deref() == Some(call.syscall)
                    })
            });
            if !named {
                let candidates: Vec<&Stall> = report.stalls.iter().filter(overlapping).collect();
                return fail(format!(
                    "the call held CPU {} for {} ns without yielding and the victim woke {} ns \
                     late meanwhile (>= runq threshold {} + {} ns), but no stall in which the \
                     victim waited names {} (tid {}) in `{}`; stalls overlapping the call:\n{}",
                    truth.cpu,
                    timing.wall_ns - timing.runq_wait_ns,
                    timing.victim_late_ns,
                    report.settings.runq_threshold_ns,
                    VICTIM_MARGIN_NS,
                    truth.comm,
                    call.tid,
                    call.syscall,
                    pretty(&candidates)
                ));
            }
        }
    }
    Ok(())
}

/// Case 5's table: every fadvise64 call counted, its file listed (`long_call` checks the
/// slow one), its distribution between the scenario's least-in-kernel and wall percentiles.
fn fadvise_distribution(report: &Report, truth: &slow_syscall::Fadvise) -> Result<(), String> {
    let Some(row) = report
        .syscalls
        .iter()
        .find(|row| row.syscall == "fadvise64" && row.container == truth.cgroup)
    else {
        return Err(format!(
            "fadvise64: no row for container {} in the syscall table",
            truth.cgroup
        ));
    };
    let fail = |problem: String| {
        Err(format!(
            "fadvise64: {problem}\nsyscall row:\n{}\nthe scenario's own timing:\n{}",
            pretty(row),
            pretty(truth)
        ))
    };
    let (least, wall) = (truth.in_kernel_at_least, truth.wall);
    if row.count != wall.count as u64 {
        return fail(format!(
            "count {} is not the {} calls the scenario made (its cgroup holds only them)",
            row.count, wall.count
        ));
    }
    for (name, reported, low, high) in [
        ("p50", row.p50_ns, least.p50_ns, wall.p50_ns),
        ("p99", row.p99_ns, least.p99_ns, wall.p99_ns),
        ("max", row.max_ns, least.max_ns, wall.max_ns),
    ] {
        let floor = (low - percent_of(low, QUANTILE_PERCENT)).saturating_sub(QUANTILE_SLACK_NS);
        let ceiling = high + percent_of(high, QUANTILE_PERCENT) + QUANTILE_SLACK_NS;
        if !(floor..=ceiling).contains(&reported) {
            return fail(format!(
                "{name} {reported} ns is outside {floor}..={ceiling} ns: the scenario's {name} \
                 of least time in the kernel {low} ns and of wall time {high} ns, \
                 ±{QUANTILE_PERCENT}% + {QUANTILE_SLACK_NS} ns"
            ));
        }
    }
    Ok(())
}

/// ksoftirqd: too few bursts free of vCPU stalls (as the hog itself timed them) and watched in
/// time (the watcher on CPU 0 ran before the burst ended) to judge.
pub fn ksoftirqd_contaminated(truth: &ksoftirqd::Truth) -> Option<String> {
    let stalled = truth.bursts.iter().filter(|b| b.vcpu_stall_ns > 0).count();
    let late = truth
        .bursts
        .iter()
        .filter(|b| matches!(b.ksoftirqd, ksoftirqd::Switch::WatcherLate { .. }))
        .count();
    let clean = truth
        .bursts
        .iter()
        .filter(|b| b.vcpu_stall_ns == 0)
        .filter(|b| !matches!(b.ksoftirqd, ksoftirqd::Switch::WatcherLate { .. }))
        .count();
    (clean < MIN_CLEAN_BURSTS).then(|| {
        format!(
            "only {clean} of {} hog bursts can be judged: {stalled} had a vCPU stall, {late} were \
             watched late (< {MIN_CLEAN_BURSTS})",
            truth.bursts.len()
        )
    })
}

/// ksoftirqd: per burst a takeover on the CPU that ends with the burst and names the hog; NET_RX
/// on the CPU run partly in ksoftirqd; NET_RX time stolen from the hog; a stall naming the hog.
pub fn ksoftirqd(report: &Report, truth: &ksoftirqd::Truth, cpu: u32) -> Result<(), String> {
    let mut failures = Vec::new();
    let is_hog = |c: &Culprit| c.comm == truth.hog_comm && c.tid == truth.hog_tid;
    // Takeovers: one per burst, ending when ksoftirqd/N was seen switched in (polled from
    // another CPU); when that was right after the burst, the hog held the CPU all along.
    let clean: Vec<&ksoftirqd::Burst> = truth
        .bursts
        .iter()
        .filter(|b| b.vcpu_stall_ns == 0)
        .filter(|b| !matches!(b.ksoftirqd, ksoftirqd::Switch::WatcherLate { .. }))
        .collect();
    let takeovers: Vec<&Takeover> = report.takeovers.iter().filter(|t| t.cpu == cpu).collect();
    let mut missed = Vec::new();
    for burst in &clean {
        let ksoftirqd::Switch::In {
            at_ns: ran,
            within_ns,
        } = burst.ksoftirqd
        else {
            missed.push((
                burst,
                "ksoftirqd was not seen running within 60 ms".to_owned(),
            ));
            continue;
        };
        // The switch-in came between `ran - within_ns` and `ran`.
        let earliest = ran.saturating_sub(within_ns + TAKEOVER_END_SLACK_NS);
        let latest = ran + TAKEOVER_END_SLACK_NS;
        let hog_to_the_end = ran.saturating_sub(burst.end_ns) <= TAKEOVER_END_SLACK_NS;
        let ending: Vec<&&Takeover> = takeovers
            .iter()
            .filter(|t| {
                (earliest..=latest).contains(&t.ts_ns) && t.ts_ns - t.wait_ns <= burst.end_ns
            })
            .collect();
        let good = ending
            .iter()
            .any(|t| !hog_to_the_end || t.culprit.as_ref().is_some_and(is_hog));
        if !good {
            let seen: Vec<String> = takeovers
                .iter()
                .filter(|t| t.ts_ns > burst.start_ns && t.ts_ns < ran + 100_000_000)
                .map(|t| {
                    let who = t
                        .culprit
                        .as_ref()
                        .map_or("nobody".into(), |c| format!("{} (tid {})", c.comm, c.tid));
                    format!(
                        "takeover ending {:+} us after it, waited {} us, culprit {who}",
                        (t.ts_ns as i64 - ran as i64) / 1000,
                        t.wait_ns / 1000
                    )
                })
                .collect();
            missed.push((
                burst,
                format!(
                    "ksoftirqd ran {} us after the burst{}; {}",
                    (ran as i64 - burst.end_ns as i64) / 1000,
                    if hog_to_the_end {
                        " (the hog held the CPU until then)"
                    } else {
                        ""
                    },
                    if seen.is_empty() {
                        "no takeover ended near that".to_owned()
                    } else {
                        seen.join("; ")
                    }
                ),
            ));
        }
    }
    let matched = clean.len() - missed.len();
    if matched * 100 < clean.len() * TAKEOVER_MIN_PERCENT {
        let detail: Vec<String> = missed
            .iter()
            .take(8)
            .map(|(burst, why)| format!("  burst {}..{} ns: {why}", burst.start_ns, burst.end_ns))
            .collect();
        failures.push(format!(
            "takeovers: only {matched} of {} bursts (free of vCPU stalls, watched in time) have a CPU {cpu} \
             takeover that ends within {} ms of the window in which ksoftirqd/{cpu} was \
             seen switching in after the burst, and names the hog ({} tid {}) when that switch-in came \
             within {} ms of the burst's end; at least {TAKEOVER_MIN_PERCENT}% are required. \
             Missed (first 8):\n{}",
            clean.len(),
            TAKEOVER_END_SLACK_NS / 1_000_000,
            truth.hog_comm,
            truth.hog_tid,
            TAKEOVER_END_SLACK_NS / 1_000_000,
            detail.join("\n")
        ));
    }
    // NET_RX on the CPU, partly in ksoftirqd.
    match report
        .softirq
        .iter()
        .find(|row| row.cpu == cpu && row.vector == "NET_RX")
    {
        None => failures.push(format!("softirq: no NET_RX row for CPU {cpu}")),
        Some(row) if row.in_ksoftirqd == 0 => failures.push(format!(
            "softirq: NET_RX on CPU {cpu} never ran in ksoftirqd:\n{}",
            pretty(row)
        )),
        Some(row) => {
            if let Some(in_ksoftirqd) = row.run_in_ksoftirqd_ns {
                let own = truth.ksoftirqd_oncpu_ns;
                let floor = own - percent_of(own, 100 - KSOFTIRQD_NET_RX_MIN_PERCENT);
                if in_ksoftirqd < floor {
                    failures.push(format!(
                        "softirq: NET_RX ran {in_ksoftirqd} ns in ksoftirqd/{cpu}, under \
                         {floor} ns: {KSOFTIRQD_NET_RX_MIN_PERCENT}% of its own CPU time {own} \
                         ns\n{}",
                        pretty(row)
                    ));
                }
            }
        }
    }
    // NET_RX time stolen from the hog.
    let interrupted: u64 = truth.bursts.iter().map(|b| b.interrupted_ns).sum();
    let stalled: u64 = truth.bursts.iter().map(|b| b.vcpu_stall_ns).sum();
    match report.softirq_stolen.iter().find(|row| {
        row.vector == "NET_RX"
            && row.comm == truth.hog_comm
            && (row.pid == truth.hog_tid || row.pid == truth.hog_pid)
    }) {
        None => {
            let net_rx: Vec<&StolenRow> = report
                .softirq_stolen
                .iter()
                .filter(|row| row.vector == "NET_RX")
                .collect();
            failures.push(format!(
                "softirq_stolen: no NET_RX row for the hog ({} pid {} tid {}), which lost {} ns \
                 to interruptions in its bursts; NET_RX rows:\n{}",
                truth.hog_comm,
                truth.hog_pid,
                truth.hog_tid,
                interrupted,
                pretty(&net_rx)
            ));
        }
        Some(row) => {
            let slack = percent_of(interrupted, STOLEN_PERCENT);
            if row.ns + slack < interrupted || row.ns > interrupted + slack + stalled {
                failures.push(format!(
                    "softirq_stolen: NET_RX {} ns charged to the hog is not within \
                     ±{STOLEN_PERCENT}% of the {interrupted} ns it lost to interruptions \
                     (+{stalled} ns of vCPU stalls):\n{}",
                    row.ns,
                    pretty(row)
                ));
            }
        }
    }
    // A stall naming the hog.
    let in_burst = |stall: &&Stall| {
        truth
            .bursts
            .iter()
            .any(|b| stall.start_ns < b.end_ns && stall.start_ns + stall.duration_ns > b.start_ns)
    };
    let named = report
        .stalls
        .iter()
        .filter(|s| s.cpu == cpu && (s.kind == "ksoftirqd" || s.kind == "softirq"))
        .filter(in_burst)
        .filter(|s| s.culprit.as_ref().is_some_and(is_hog))
        .count();
    if named == 0 {
        failures.push(format!(
            "stalls: none of kind ksoftirqd or softirq on CPU {cpu} during a burst names the hog"
        ));
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(report.annotate(failures.join("\n\n")))
    }
}

fn pretty<T: Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|err| format!("<unprintable: {err}>"))
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::scenario::slow_syscall::{Call, Timing};

    /// A report as `stalltop report --json` prints it for a clean noisy-neighbour run.
    const NOISY: &str = r#"{
      "version": 1,
      "host": {"hostname": "vm", "kernel": "6.18.44-fc", "cpus": 2},
      "duration_ns": 7000000000,
      "settings": {"runq_threshold_ns": 10000000, "stall_threshold_ns": 10000000,
                   "syscall_wall_threshold_ns": 10000000, "syscall_oncpu_threshold_ns": 1000000,
                   "sample_hz": 1000, "attach": "tp_btf"},
      "stalls": [], "takeovers": [], "culprits": [], "syscalls": [], "softirq": [],
      "softirq_stolen": [],
      "lost_events": {"runq": 0},
      "runq": [
        {"cgroup": "/stalltop_victim", "container": null, "count": 4870,
         "p50_ns": 310000, "p99_ns": 4100000, "max_ns": 6950000,
         "preempted_by": {"same_cgroup": 0, "other_cgroup": 1620, "kthread": 12},
         "top_preemptors": [
           {"comm": "hog", "cgroup": "/stalltop_noisy", "count": 1598},
           {"comm": "kworker/1:1", "cgroup": "/", "count": 12}]},
        {"cgroup": "/stalltop_noisy", "container": null, "count": 2100,
         "p50_ns": 3900000, "p99_ns": 8000000, "max_ns": 12000000,
         "preempted_by": {"same_cgroup": 900, "other_cgroup": 1100, "kthread": 3},
         "top_preemptors": [{"comm": "victim", "cgroup": "/stalltop_victim", "count": 1100}]}
      ],
      "runq_events": [
        {"cpu": 1, "ts_ns": 123456789, "wait_ns": 12000000, "steal_ns": 0, "pid": 4242,
         "comm": "hog",
         "cgroup": "/stalltop_noisy",
         "ran_instead": {"pid": 4243, "comm": "hog", "cgroup": "/stalltop_noisy"}}
      ],
      "throttling": []
    }"#;

    /// The quiet baseline of the same invocation.
    const QUIET: &str = r#"{
      "version": 1,
      "host": {"hostname": "vm", "kernel": "6.18.44-fc", "cpus": 2},
      "duration_ns": 7000000000,
      "settings": {"runq_threshold_ns": 10000000, "stall_threshold_ns": 10000000,
                   "syscall_wall_threshold_ns": 10000000, "syscall_oncpu_threshold_ns": 1000000,
                   "sample_hz": 1000, "attach": "tp_btf"},
      "stalls": [
        {"id": 0, "cpu": 0, "start_ns": 84, "duration_ns": 15000000, "kind": "runq",
         "signals": 1, "waited": {"pid": 77, "comm": "cc1", "cgroup": "/", "wait_ns": 15000000},
         "culprit": {"pid": 78, "tid": 78, "comm": "rustc", "cgroup": "/", "container": "host",
                     "stack": [], "user_stack": [], "samples": 0}},
        {"id": 1, "cpu": 0, "start_ns": 500, "duration_ns": 40000000, "kind": "irqoff",
         "signals": 1, "waited": {},
         "culprit": {"pid": 78, "tid": 78, "comm": "rustc", "cgroup": "/", "container": "host",
                     "stack": ["do_idle"], "user_stack": [], "samples": 1}}
      ],
      "takeovers": [
        {"cpu": 0, "ts_ns": 900, "wait_ns": 12000000,
         "culprit": {"pid": 78, "tid": 78, "comm": "rustc", "cgroup": "/", "container": "host",
                     "stack": [], "user_stack": [], "samples": 0}}
      ],
      "culprits": [], "syscalls": [], "softirq": [], "softirq_stolen": [],
      "lost_events": {},
      "runq": [
        {"cgroup": "/stalltop_victim", "container": null, "count": 4990,
         "p50_ns": 4000, "p99_ns": 60000, "max_ns": 1900000,
         "preempted_by": {"same_cgroup": 0, "other_cgroup": 40, "kthread": 5},
         "top_preemptors": [{"comm": "burstreq", "cgroup": "/stalltop_throttled", "count": 40}]},
        {"cgroup": "/stalltop_throttled", "container": null, "count": 420,
         "p50_ns": 2000000, "p99_ns": 8000000, "max_ns": 9100000,
         "preempted_by": {"same_cgroup": 300, "other_cgroup": 60, "kthread": 1},
         "top_preemptors": [{"comm": "burstreq", "cgroup": "/stalltop_throttled", "count": 300}]}
      ],
      "runq_events": [
        {"cpu": 0, "ts_ns": 99, "wait_ns": 15000000, "steal_ns": 0, "pid": 77, "comm": "cc1",
         "cgroup": "/",
         "ran_instead": {"pid": 78, "comm": "rustc", "cgroup": "/"}}
      ],
      "throttling": []
    }"#;

    /// A clean throttle run: 20 requests, 19 of them throttled.
    const THROTTLE: &str = r#"{
      "version": 1,
      "host": {"hostname": "vm", "kernel": "6.18.44-fc", "cpus": 2},
      "duration_ns": 7000000000,
      "settings": {"runq_threshold_ns": 10000000, "stall_threshold_ns": 10000000,
                   "syscall_wall_threshold_ns": 10000000, "syscall_oncpu_threshold_ns": 1000000,
                   "sample_hz": 1000, "attach": "tp_btf"},
      "stalls": [], "takeovers": [], "culprits": [], "syscalls": [], "softirq": [],
      "softirq_stolen": [],
      "lost_events": {"runq": 0, "syscall": 0},
      "runq": [],
      "runq_events": [],
      "throttling": [
        {"cgroup": "/stalltop_throttled", "container": null, "quota_us": 15000,
         "period_us": 100000, "cpus": 2, "nr_periods": 51, "nr_throttled": 19,
         "throttled_ns": 1520000000}
      ]
    }"#;

    fn report(json: &str) -> Report {
        Report::parse(json).unwrap()
    }

    /// `json` with the value at JSON pointer `at` replaced.
    fn with(json: &str, at: &str, value: Value) -> Report {
        let mut doc: Value = serde_json::from_str(json).unwrap();
        *doc.pointer_mut(at).unwrap_or_else(|| panic!("no {at}")) = value;
        serde_json::from_value(doc).unwrap()
    }

    fn noisy_cgroups() -> Cgroups {
        Cgroups {
            victim: Some("/stalltop_victim".into()),
            noisy: Some("/stalltop_noisy".into()),
            requests: None,
        }
    }

    fn quiet_cgroups() -> Cgroups {
        Cgroups {
            victim: Some("/stalltop_victim".into()),
            noisy: None,
            requests: Some("/stalltop_throttled".into()),
        }
    }

    fn throttle_truth(nr_throttled: u64, throttled_ns: u64) -> CpuStatDelta {
        CpuStatDelta {
            cgroup: "/stalltop_throttled".into(),
            quota_us: 15000,
            period_us: 100000,
            nr_periods: 50,
            nr_throttled,
            throttled_ns,
        }
    }

    fn assert_fails(result: Result<(), String>, needle: &str) {
        let message = result.expect_err("the check should fail");
        assert!(message.contains(needle), "{needle:?} not in:\n{message}");
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
        json!({"cpu": 1, "ts_ns": ts_ns, "wait_ns": wait_ns, "steal_ns": steal_ns, "pid": 9,
            "comm": "burstreq", "cgroup": "/stalltop_throttled",
            "ran_instead": {"pid": 10, "comm": "burstreq", "cgroup": "/stalltop_throttled"}})
    }

    fn quiet_unwrap(report: &Report) -> usize {
        quiet(report, &quiet_cgroups(), &host_steal()).unwrap()
    }

    fn quiet_fails(report: &Report, needle: &str) {
        assert_fails(
            quiet(report, &quiet_cgroups(), &host_steal()).map(|_| ()),
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
    fn noisy_neighbour_passes() {
        noisy_neighbour(&report(NOISY), &report(QUIET), &noisy_cgroups()).unwrap();
    }

    #[test]
    fn noisy_neighbour_fails_when_p99_is_not_3x_the_baseline() {
        let baseline = with(QUIET, "/runq/0/p99_ns", json!(1_400_000));
        let result = noisy_neighbour(&report(NOISY), &baseline, &noisy_cgroups());
        assert_fails(result, "not >= 3x the quiet baseline's 1400000 ns");
    }

    #[test]
    fn noisy_neighbour_fails_when_the_worst_wait_is_short() {
        let noisy = with(NOISY, "/runq/0/max_ns", json!(2_900_000));
        let result = noisy_neighbour(&noisy, &report(QUIET), &noisy_cgroups());
        assert_fails(result, "below 3000000 ns");
    }

    #[test]
    fn noisy_neighbour_fails_when_someone_else_is_blamed() {
        let wrong_comm = with(NOISY, "/runq/0/top_preemptors/0/comm", json!("kworker/1:1"));
        let result = noisy_neighbour(&wrong_comm, &report(QUIET), &noisy_cgroups());
        assert_fails(
            result,
            "top preemptor is not comm \"hog\" in /stalltop_noisy",
        );
        let wrong_cgroup = with(NOISY, "/runq/0/top_preemptors/0/cgroup", json!("/"));
        let result = noisy_neighbour(&wrong_cgroup, &report(QUIET), &noisy_cgroups());
        assert_fails(result, "top preemptor");
        let none = with(NOISY, "/runq/0/top_preemptors", json!([]));
        let result = noisy_neighbour(&none, &report(QUIET), &noisy_cgroups());
        assert_fails(result, "top preemptor");
    }

    #[test]
    fn noisy_neighbour_fails_without_cross_cgroup_preemptions() {
        let noisy = with(NOISY, "/runq/0/preempted_by/other_cgroup", json!(0));
        let result = noisy_neighbour(&noisy, &report(QUIET), &noisy_cgroups());
        assert_fails(result, "other_cgroup is 0");
    }

    #[test]
    fn noisy_neighbour_fails_without_a_baseline_row() {
        let baseline = with(QUIET, "/runq/0/cgroup", json!("/elsewhere"));
        let result = noisy_neighbour(&report(NOISY), &baseline, &noisy_cgroups());
        assert_fails(result, "quiet baseline: no runq row");
    }

    #[test]
    fn throttle_passes_within_tolerance() {
        throttle(&report(THROTTLE), &throttle_truth(19, 1_500_000_000)).unwrap();
        // Truth 15: slack 2 + ceil(1.5) = 4 periods; truth 1.267 s: slack 253 ms. Both edges pass.
        throttle(&report(THROTTLE), &throttle_truth(15, 1_520_000_000)).unwrap();
        throttle(&report(THROTTLE), &throttle_truth(19, 1_266_666_667)).unwrap();
    }

    #[test]
    fn throttle_fails_on_a_count_outside_tolerance() {
        // Truth 14: slack 2 + ceil(1.4) = 4, and 19 - 14 = 5.
        let result = throttle(&report(THROTTLE), &throttle_truth(14, 1_520_000_000));
        assert_fails(result, "nr_throttled 19 is not within ±4");
    }

    #[test]
    fn throttle_fails_on_throttled_time_outside_tolerance() {
        let result = throttle(&report(THROTTLE), &throttle_truth(19, 1_200_000_000));
        assert_fails(result, "throttled_ns 1520000000 is not within ±20%");
    }

    #[test]
    fn throttle_fails_without_throttling() {
        let row = with(THROTTLE, "/throttling/0/nr_throttled", json!(0));
        assert_fails(throttle(&row, &throttle_truth(1, 1)), "nr_throttled is 0");
    }

    #[test]
    fn throttle_fails_on_a_wrong_quota_or_a_missing_row() {
        let quota = with(THROTTLE, "/throttling/0/quota_us", json!(50000));
        let result = throttle(&quota, &throttle_truth(19, 1_520_000_000));
        assert_fails(
            result,
            "quota/period 50000/100000 us, the scenario set 15000/100000 us",
        );
        let missing = with(THROTTLE, "/throttling", json!([]));
        let result = throttle(&missing, &throttle_truth(19, 1_520_000_000));
        assert_fails(result, "no throttling row for /stalltop_throttled");
    }

    #[test]
    fn failures_mention_lost_events() {
        let lossy = with(NOISY, "/lost_events/runq", json!(12));
        let lossy = serde_json::to_string(&lossy).unwrap();
        let result = noisy_neighbour(
            &with(&lossy, "/runq/0/max_ns", json!(1)),
            &report(QUIET),
            &noisy_cgroups(),
        );
        assert_fails(result, "stalltop lost events");
    }

    #[test]
    fn a_report_missing_a_contract_field_is_rejected() {
        let mut doc: Value = serde_json::from_str(THROTTLE).unwrap();
        doc.as_object_mut().unwrap().remove("throttling");
        assert!(Report::parse(&doc.to_string()).is_err());
    }

    // ---- quiet: stalls and irqs-off gaps ----

    fn stall(cpu: u32, start_ns: u64, duration_ns: u64, kind: &str) -> Value {
        json!({"id": 9, "cpu": cpu, "start_ns": start_ns, "duration_ns": duration_ns,
               "kind": kind, "signals": 1, "waited": {}, "culprit": null})
    }

    fn culprit(tid: u32, comm: &str, cgroup: &str, syscall: Option<&str>) -> Value {
        json!({"pid": 4000, "tid": tid, "comm": comm, "cgroup": cgroup, "container": cgroup,
               "syscall": syscall, "path": null, "stack": [], "user_stack": [], "samples": 0})
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

    #[test]
    fn irqoff_gaps_are_judged_by_the_victim() {
        let window = (1_000_000_000, 6_000_000_000);
        let report = with(
            QUIET,
            "/stalls",
            json!([
                // 200 ms inside the window: a victim never over 1 ms late contradicts it.
                stall(1, 2_000_000_000, 200_000_000, "irqoff"),
                // 20 ms: allowed if the victim was once 15 ms late.
                stall(1, 3_000_000_000, 20_000_000, "irqoff"),
                // Ends 3 ms into the window: at the edge.
                stall(1, 900_000_000, 103_000_000, "irqoff"),
                // Another CPU, after the window: only counted.
                stall(0, 2_000_000_000, 500_000_000, "irqoff"),
                stall(1, 7_000_000_000, 500_000_000, "irqoff"),
                stall(1, 2_500_000_000, 50_000_000, "runq"),
            ]),
        );
        let gaps = irqoff_gaps(&report, 1, window.0, window.1, 1_000_000);
        assert_eq!(
            (gaps.all, gaps.contradicted.len(), gaps.possible.len()),
            (5, 2, 0)
        );
        assert_eq!(gaps.edge, 1);
        assert_fails(
            quiet_gaps(&report, &gaps, 1_000_000),
            "2 irqs-off gaps on the victim's CPU that did not happen",
        );
        let gaps = irqoff_gaps(&report, 1, window.0, window.1, 15_000_000);
        assert_eq!((gaps.contradicted.len(), gaps.possible.len()), (1, 1));
        let gaps = irqoff_gaps(&report, 1, window.0, window.1, 150_000_000);
        assert_eq!((gaps.contradicted.len(), gaps.possible.len()), (0, 2));
        quiet_gaps(&report, &gaps, 150_000_000).unwrap();
    }

    #[test]
    fn an_irqoff_stall_is_judged_by_its_gap_not_the_waits_merged_into_it() {
        // Seen on this VM: a 13 ms gap merged with run-queue waits the host stretched into a
        // 30 ms stall, beside a victim stopped for at most 12.5 ms.
        let mut merged = stall(1, 2_000_000_000, 30_000_000, "irqoff");
        merged["gap"] = json!({"start_ns": 2_017_000_000u64, "duration_ns": 13_000_000});
        let report = with(QUIET, "/stalls", json!([merged]));
        let gaps = irqoff_gaps(&report, 1, 1_000_000_000, 6_000_000_000, 12_500_000);
        assert_eq!((gaps.contradicted.len(), gaps.possible.len()), (0, 1));
        let gaps = irqoff_gaps(&report, 1, 1_000_000_000, 6_000_000_000, 5_000_000);
        assert_eq!((gaps.contradicted.len(), gaps.possible.len()), (1, 0));
    }

    // ---- slow-syscall ----

    const MS: u64 = 1_000_000;

    /// One call at `start` ms: wall, CPU clock and runnable time in ms, switches, victim lateness.
    fn timing(start: u64, wall: f64, cpu: f64, runq: f64, switches: u64, late: f64) -> Timing {
        let ns = |ms: f64| (ms * MS as f64) as u64;
        Timing {
            start_ns: start * MS,
            end_ns: start * MS + ns(wall),
            wall_ns: ns(wall),
            oncpu_ns: ns(cpu),
            runq_wait_ns: ns(runq),
            switches,
            victim_late_ns: ns(late),
        }
    }

    fn call(syscall: &'static str, cgroup: &str, path: Option<&str>, calls: Vec<Timing>) -> Call {
        Call {
            syscall,
            tid: if cgroup == "/stalltop_glog" { 12 } else { 11 },
            cgroup: cgroup.into(),
            path: path.map(str::to_owned),
            calls,
        }
    }

    fn percentiles(count: usize, p50: u64, p99: u64, max: u64) -> crate::scenario::Percentiles {
        crate::scenario::Percentiles {
            count,
            p50_ns: p50,
            p99_ns: p99,
            max_ns: max,
        }
    }

    const SMAPS: &str = "/proc/4000/smaps";
    const DIR: &str = "/dev/shm/stalltop-getdents";
    const FORCE_EMPTY: &str = "/sys/fs/cgroup/memory/stalltop_zombies/memory.force_empty";
    const LOG: &str = "/tmp/stalltop-slow-syscall/app.log";

    /// A clean run's ground truth: every number as the scenario measures it.
    fn slow_truth() -> slow_syscall::Truth {
        let culprit = "/stalltop_culprit";
        let mut reads = vec![timing(300, 22.0, 17.0, 5.0, 9, 1.5)];
        reads.extend((0..10).map(|i| timing(301 + i, 0.04, 0.04, 0.0, 0, 0.0)));
        let mut fadvise = vec![timing(1900, 50.0, 30.0, 20.0, 25, 4.0)];
        fadvise.extend((0..3).map(|i| timing(2000 + i, 0.02, 0.02, 0.0, 0, 0.0)));
        slow_syscall::Truth {
            comm: "culprit",
            pid: 4000,
            cpu: 1,
            calls: vec![
                call("read", culprit, Some(SMAPS), reads),
                call(
                    "munmap",
                    culprit,
                    None,
                    vec![timing(700, 130.0, 100.0, 30.0, 120, 3.7)],
                ),
                call(
                    "getdents64",
                    culprit,
                    Some(DIR),
                    vec![
                        timing(1100, 30.0, 20.0, 10.0, 1, 19.5),
                        timing(1131, 0.005, 0.005, 0.0, 0, 0.0),
                    ],
                ),
                call(
                    "write",
                    culprit,
                    Some(FORCE_EMPTY),
                    vec![timing(1500, 100.0, 60.0, 40.0, 300, 6.0)],
                ),
                call("fadvise64", "/stalltop_glog", Some(LOG), fadvise),
            ],
            fadvise: slow_syscall::Fadvise {
                tid: 12,
                cgroup: "/stalltop_glog".into(),
                path: LOG.into(),
                wall: percentiles(4, 20_000, 50 * MS, 50 * MS),
                in_kernel_at_least: percentiles(4, 20_000, 30 * MS, 30 * MS),
                cached_bytes: 1 << 30,
            },
            zombies: slow_syscall::ZombieCount {
                made: 4000,
                memory_cgroups_before: 59,
                memory_cgroups_with_zombies: 4060,
                memory_cgroups_after: 60,
            },
            victim_comm: "victim",
            victim_late: Vec::new(),
        }
    }

    fn row(
        syscall: &str,
        container: &str,
        count: u64,
        max: u64,
        oncpu: u64,
        paths: Value,
    ) -> Value {
        json!({"syscall": syscall, "container": container, "count": count, "p50_ns": 20000,
               "p99_ns": max, "max_ns": max, "total_ns": max, "oncpu_total_ns": oncpu,
               "top_paths": paths})
    }

    /// What stalltop reports for that run when it gets everything right.
    fn slow_report() -> String {
        let culprit = "/stalltop_culprit";
        let mut doc: Value = serde_json::from_str(QUIET).unwrap();
        doc["syscalls"] = json!([
            row(
                "read",
                culprit,
                11,
                17 * MS,
                17_400_000,
                json!([{"path": "/proc/*/smaps", "count": 1, "total_ns": 17 * MS}])
            ),
            row("munmap", culprit, 3, 130 * MS, 100_500_000, json!([])),
            row(
                "getdents64",
                culprit,
                2,
                20 * MS,
                20 * MS,
                json!([{"path": DIR, "count": 1, "total_ns": 20 * MS}])
            ),
            row(
                "write",
                culprit,
                1,
                100 * MS,
                61 * MS,
                json!([{"path": FORCE_EMPTY, "count": 1, "total_ns": 100 * MS}])
            ),
            row(
                "fadvise64",
                "/stalltop_glog",
                4,
                50 * MS,
                30_060_000,
                json!([{"path": LOG, "count": 1, "total_ns": 50 * MS}])
            ),
        ]);
        let mut waited = stall(1, 1_100_300_000, 19 * MS, "runq");
        waited["waited"] = json!({"pid": 4001, "comm": "victim", "cgroup": "/stalltop_victim"});
        waited["culprit"] = culprit_json(11, "getdents64");
        doc["stalls"] = json!([waited]);
        doc.to_string()
    }

    fn culprit_json(tid: u32, syscall: &str) -> Value {
        culprit(tid, "culprit", "/stalltop_culprit", Some(syscall))
    }

    #[test]
    fn slow_syscall_passes_when_the_report_matches() {
        slow_syscall(&report(&slow_report()), &slow_truth()).unwrap();
    }

    #[test]
    fn slow_syscall_fails_on_a_wrong_wall_time_or_count_or_file() {
        // smaps: 17 ms of a call the culprit saw take 17..22 ms; 25 ms is over 22 + 10%.
        let too_long = with(
            &slow_report(),
            "/syscalls/0/top_paths/0/total_ns",
            json!(25 * MS),
        );
        assert_fails(
            slow_syscall(&too_long, &slow_truth()),
            "wall 25000000 ns is outside",
        );
        // getdents64 never switched out... but once: 20 ms of 20..30 ms is fine, 15 is not.
        let short = with(
            &slow_report(),
            "/syscalls/2/top_paths/0/total_ns",
            json!(15 * MS),
        );
        assert_fails(
            slow_syscall(&short, &slow_truth()),
            "wall 15000000 ns is outside",
        );
        let twice = with(&slow_report(), "/syscalls/3/top_paths/0/count", json!(2));
        assert_fails(
            slow_syscall(&twice, &slow_truth()),
            "top_paths counts 2 slow calls",
        );
        let elsewhere = with(
            &slow_report(),
            "/syscalls/3/top_paths/0/path",
            json!("/other"),
        );
        assert_fails(
            slow_syscall(&elsewhere, &slow_truth()),
            &format!("{FORCE_EMPTY} is not in top_paths"),
        );
        // munmap: 130 ms of wall, 30 of them runnable, so 90..143 ms in the kernel.
        let munmap = with(&slow_report(), "/syscalls/1/max_ns", json!(85 * MS));
        assert_fails(slow_syscall(&munmap, &slow_truth()), "munmap (no file)");
    }

    #[test]
    fn slow_syscall_fails_on_on_cpu_time_the_call_cannot_have_had() {
        // More on-CPU time than the calls lasted (50.06 ms of wall in all).
        let inflated = with(&slow_report(), "/syscalls/4/oncpu_total_ns", json!(52 * MS));
        assert_fails(
            slow_syscall(&inflated, &slow_truth()),
            "fadvise64 (/tmp/stalltop-slow-syscall/app.log) by culprit in /stalltop_glog: on-CPU",
        );
        let under = with(&slow_report(), "/syscalls/1/oncpu_total_ns", json!(80 * MS));
        assert_fails(
            slow_syscall(&under, &slow_truth()),
            "on-CPU 80000000 ns is outside",
        );
    }

    #[test]
    fn slow_syscall_fails_when_the_victim_stall_does_not_name_the_call() {
        // Seen on this VM: the victim waited out getdents64, and the stall names the culprit
        // but not its syscall (the culprit was switched out on its way back to user space).
        let mut doc: Value = serde_json::from_str(&slow_report()).unwrap();
        doc["stalls"][0]["culprit"]["syscall"] = Value::Null;
        let result = slow_syscall(&serde_json::from_value(doc).unwrap(), &slow_truth());
        assert_fails(
            result,
            "no stall in which the victim waited names culprit (tid 11)",
        );
        let none = with(&slow_report(), "/stalls", json!([]));
        assert_fails(slow_syscall(&none, &slow_truth()), "in `getdents64`");
    }

    #[test]
    fn slow_syscall_refuses_calls_too_close_to_the_thresholds() {
        let mut truth = slow_truth();
        truth.calls[0].calls[3] = timing(303, 0.95, 0.95, 0.0, 0, 0.0);
        assert_fails(
            slow_syscall(&report(&slow_report()), &truth),
            "too close to stalltop's thresholds",
        );
    }

    #[test]
    fn a_slow_syscall_run_is_undecidable_only_with_a_call_too_close_to_the_thresholds() {
        let report = report(&slow_report());
        assert_eq!(
            slow_syscall_undecidable(&report.settings, &slow_truth()),
            None
        );
        let mut truth = slow_truth();
        truth.calls[0].calls[3] = timing(303, 0.95, 0.95, 0.0, 0, 0.0);
        let why = slow_syscall_undecidable(&report.settings, &truth).expect("undecidable");
        assert!(why.contains("too close to stalltop's thresholds"), "{why}");
    }

    #[test]
    fn fadvise_needs_every_call_and_its_distribution() {
        let missing = with(&slow_report(), "/syscalls/4/count", json!(3));
        assert_fails(
            slow_syscall(&missing, &slow_truth()),
            "count 3 is not the 4 calls",
        );
        let slow_p50 = with(&slow_report(), "/syscalls/4/p50_ns", json!(60_000));
        assert_fails(
            slow_syscall(&slow_p50, &slow_truth()),
            "p50 60000 ns is outside",
        );
    }

    // ---- ksoftirqd ----

    const HOG_TID: u32 = 21;

    fn burst(i: u64, ran_after_us: u64) -> ksoftirqd::Burst {
        let start_ns = 1_000 * MS + i * 200 * MS;
        let end_ns = start_ns + 50 * MS;
        ksoftirqd::Burst {
            start_ns,
            end_ns,
            interrupted_ns: 45 * MS,
            longest_gap_ns: 4 * MS,
            vcpu_stall_ns: 0,
            ksoftirqd: ksoftirqd::Switch::In {
                at_ns: end_ns + ran_after_us * 1000,
                within_ns: 1000,
            },
        }
    }

    fn ksoftirqd_truth() -> ksoftirqd::Truth {
        ksoftirqd::Truth {
            hog_comm: "hog",
            hog_pid: 20,
            hog_tid: HOG_TID,
            hog_cgroup: "/stalltop_hog".into(),
            hog_shares: 262_144,
            bursts: (0..10).map(|i| burst(i, 20)).collect(),
            flood: ksoftirqd::Flood::default(),
            softnet: ksoftirqd::Softnet::default(),
            ksoftirqd_pid: 22,
            ksoftirqd_oncpu_ns: 550 * MS,
            steal_ns: 30 * MS,
            steal_tick_ns: 10 * MS,
        }
    }

    /// A report naming the hog for every burst's takeover.
    fn ksoftirqd_report() -> String {
        let truth = ksoftirqd_truth();
        let mut doc: Value = serde_json::from_str(QUIET).unwrap();
        let hog = culprit(HOG_TID, "hog", "/stalltop_hog", None);
        doc["takeovers"] = truth
            .bursts
            .iter()
            .map(|b| {
                json!({"cpu": 1, "ts_ns": b.end_ns + 15_000, "wait_ns": 50 * MS + 30_000,
                       "culprit": hog})
            })
            .collect();
        let mut named = stall(1, truth.bursts[0].start_ns, 50 * MS, "ksoftirqd");
        named["waited"] = json!({"pid": 22, "comm": "ksoftirqd/1", "cgroup": "/"});
        named["culprit"] = hog;
        doc["stalls"] = json!([named]);
        doc["softirq"] = json!([{"cpu": 1, "vector": "NET_RX", "count": 500, "p50_ns": 180000,
            "p99_ns": 980000, "max_ns": 990000, "in_ksoftirqd": 170,
            "run_total_ns": 1_900 * MS, "run_in_ksoftirqd_ns": 600 * MS}]);
        doc["softirq_stolen"] = json!([{"pid": 20, "comm": "hog", "vector": "NET_RX",
            "ns": 455 * MS, "count": 300}]);
        doc.to_string()
    }

    #[test]
    fn ksoftirqd_passes_when_the_report_matches() {
        ksoftirqd(&report(&ksoftirqd_report()), &ksoftirqd_truth(), 1).unwrap();
        assert_eq!(ksoftirqd_contaminated(&ksoftirqd_truth()), None);
    }

    #[test]
    fn ksoftirqd_fails_when_the_task_that_ran_last_is_blamed() {
        // Seen on this VM: a kworker that ran 40 us between the hog and ksoftirqd/1 is named.
        let mut doc: Value = serde_json::from_str(&ksoftirqd_report()).unwrap();
        doc["takeovers"][3]["culprit"] = culprit(30, "kworker/1:1", "/", None);
        ksoftirqd(
            &serde_json::from_value(doc.clone()).unwrap(),
            &ksoftirqd_truth(),
            1,
        )
        .unwrap();
        doc["takeovers"][5]["culprit"] = culprit(31, "stalltop", "/", None);
        let report: Report = serde_json::from_value(doc).unwrap();
        assert_fails(
            ksoftirqd(&report, &ksoftirqd_truth(), 1),
            "only 8 of 10 bursts",
        );
        // When ksoftirqd/1 ran 5 ms after the burst, someone else had the CPU meanwhile: only the
        // takeover's end is checked.
        let mut truth = ksoftirqd_truth();
        truth.bursts[3] = burst(3, 5_000);
        let mut doc: Value = serde_json::from_str(&ksoftirqd_report()).unwrap();
        doc["takeovers"][3]["ts_ns"] = json!(truth.bursts[3].end_ns + 4_990_000);
        doc["takeovers"][3]["culprit"] = culprit(30, "kworker/1:1", "/", None);
        ksoftirqd(&serde_json::from_value(doc).unwrap(), &truth, 1).unwrap();
    }

    #[test]
    fn ksoftirqd_fails_when_a_takeover_ends_away_from_the_switch_in() {
        let late = with(
            &ksoftirqd_report(),
            "/takeovers/0/ts_ns",
            json!(1_050 * MS + 3 * MS),
        );
        let mut report = late;
        report.takeovers.truncate(10);
        report.takeovers[1].ts_ns += 3 * MS;
        assert_fails(
            ksoftirqd(&report, &ksoftirqd_truth(), 1),
            "only 8 of 10 bursts",
        );
    }

    #[test]
    fn ksoftirqd_takeovers_match_anywhere_in_a_preempted_watchers_window() {
        // Seen on this VM: the watcher was preempted for 3.7 ms between a read that still
        // showed the old count and the next one; the switch-in came right after the burst.
        let mut truth = ksoftirqd_truth();
        truth.bursts[2].ksoftirqd = ksoftirqd::Switch::In {
            at_ns: truth.bursts[2].end_ns + 3_717_000,
            within_ns: 3_720_000,
        };
        ksoftirqd(&report(&ksoftirqd_report()), &truth, 1).unwrap();
        // A takeover that ended 2 ms before the window began does not match.
        let mut truth = ksoftirqd_truth();
        for b in truth.bursts.iter_mut().take(2) {
            b.ksoftirqd = ksoftirqd::Switch::In {
                at_ns: b.end_ns + 6_000_000,
                within_ns: 3_900_000,
            };
        }
        assert_fails(
            ksoftirqd(&report(&ksoftirqd_report()), &truth, 1),
            "only 8 of 10 bursts",
        );
    }

    #[test]
    fn ksoftirqd_fails_when_net_rx_time_stolen_from_the_hog_is_not_his() {
        // Seen on this VM: the hog's NET_RX time is listed under its process with another
        // thread's comm ("flood", which runs on CPU 0 and never had NET_RX run inside it).
        let relabelled = with(
            &ksoftirqd_report(),
            "/softirq_stolen/0/comm",
            json!("flood"),
        );
        assert_fails(
            ksoftirqd(&relabelled, &ksoftirqd_truth(), 1),
            "softirq_stolen: no NET_RX row for the hog",
        );
        let short = with(&ksoftirqd_report(), "/softirq_stolen/0/ns", json!(300 * MS));
        assert_fails(
            ksoftirqd(&short, &ksoftirqd_truth(), 1),
            "charged to the hog is not within ±10% of the 450000000 ns",
        );
    }

    #[test]
    fn ksoftirqd_fails_without_net_rx_in_ksoftirqd_or_a_stall_naming_the_hog() {
        let inline = with(&ksoftirqd_report(), "/softirq/0/in_ksoftirqd", json!(0));
        assert_fails(
            ksoftirqd(&inline, &ksoftirqd_truth(), 1),
            "never ran in ksoftirqd",
        );
        let too_little = with(
            &ksoftirqd_report(),
            "/softirq/0/run_in_ksoftirqd_ns",
            json!(300 * MS),
        );
        assert_fails(
            ksoftirqd(&too_little, &ksoftirqd_truth(), 1),
            "NET_RX ran 300000000 ns",
        );
        let no_stall = with(&ksoftirqd_report(), "/stalls", json!([]));
        assert_fails(ksoftirqd(&no_stall, &ksoftirqd_truth(), 1), "names the hog");
    }

    #[test]
    fn ksoftirqd_runs_with_few_judgeable_bursts_are_contaminated() {
        let mut truth = ksoftirqd_truth();
        truth.bursts[0].vcpu_stall_ns = 120 * MS;
        truth.bursts[1].ksoftirqd = ksoftirqd::Switch::WatcherLate { by_ns: 3 * MS };
        assert!(ksoftirqd_contaminated(&truth).unwrap().contains(
            "only 8 of 10 hog bursts can be judged: 1 had a vCPU stall, 1 were watched late"
        ));
    }

    #[test]
    fn contamination_markers() {
        assert_eq!(contaminated(100, 4.0), None);
        assert!(contaminated(101, 0.1)
            .unwrap()
            .contains("101 foreign forks"));
        assert!(contaminated(3, 4.5).unwrap().contains("load average 4.50"));
    }

    #[test]
    fn a_quiet_run_is_contaminated_when_the_host_took_over_a_fifth_of_its_cpu() {
        let window = 5_000 * MS;
        assert_eq!(quiet_steal_contaminated(1_000 * MS, window), None);
        assert!(quiet_steal_contaminated(1_110 * MS, window)
            .unwrap()
            .contains("the host took 1110 ms of the scenario CPU's 5000 ms (> 20%)"));
    }
}
