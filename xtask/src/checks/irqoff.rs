//! Irqs-off gaps: the ones stalltop reported on the victim's CPU, sorted by what the victim (a
//! 1 ms waker there) allows, and the check that none the victim disproves was reported.

use super::pretty;
use super::report::{Gap, Report, Stall, StallKind};

/// An irqs-off gap on the victim's CPU is contradicted by the victim when it is longer than this
/// many times the victim's worst stall, plus `IRQOFF_SLACK_NS`: interrupts off (or a stopped
/// vCPU) for G ms delay every wake-up due inside the gap, the first by nearly G ms, or, when they
/// catch the victim working, stop its clock reads for G ms (it then skips periods, late to none).
const IRQOFF_VICTIM_FACTOR: u64 = 2;
const IRQOFF_SLACK_NS: u64 = 2_000_000;

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
pub fn sort_by_victim(
    report: &Report,
    cpu: u32,
    start_ns: u64,
    end_ns: u64,
    victim_worst_stall_ns: u64,
) -> IrqoffGaps<'_> {
    let mut gaps = IrqoffGaps::default();
    let ceiling = IRQOFF_VICTIM_FACTOR * victim_worst_stall_ns + IRQOFF_SLACK_NS;
    for stall in report.stalls.iter().filter(|s| s.kind == StallKind::Irqoff) {
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
pub fn check(report: &Report, gaps: &IrqoffGaps, victim_worst_stall_ns: u64) -> Result<(), String> {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::checks::fixtures::{assert_fails, stall, with, QUIET};

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
        let gaps = sort_by_victim(&report, 1, window.0, window.1, 1_000_000);
        assert_eq!(
            (gaps.all, gaps.contradicted.len(), gaps.possible.len()),
            (5, 2, 0)
        );
        assert_eq!(gaps.edge, 1);
        assert_fails(
            check(&report, &gaps, 1_000_000),
            "2 irqs-off gaps on the victim's CPU that did not happen",
        );
        let gaps = sort_by_victim(&report, 1, window.0, window.1, 15_000_000);
        assert_eq!((gaps.contradicted.len(), gaps.possible.len()), (1, 1));
        let gaps = sort_by_victim(&report, 1, window.0, window.1, 150_000_000);
        assert_eq!((gaps.contradicted.len(), gaps.possible.len()), (0, 2));
        check(&report, &gaps, 150_000_000).unwrap();
    }

    #[test]
    fn an_irqoff_stall_is_judged_by_its_gap_not_the_waits_merged_into_it() {
        // Seen on this VM: a 13 ms gap merged with run-queue waits the host stretched into a
        // 30 ms stall, beside a victim stopped for at most 12.5 ms.
        let mut merged = stall(1, 2_000_000_000, 30_000_000, "irqoff");
        merged["gap"] = json!({"start_ns": 2_017_000_000u64, "duration_ns": 13_000_000});
        let report = with(QUIET, "/stalls", json!([merged]));
        let gaps = sort_by_victim(&report, 1, 1_000_000_000, 6_000_000_000, 12_500_000);
        assert_eq!((gaps.contradicted.len(), gaps.possible.len()), (0, 1));
        let gaps = sort_by_victim(&report, 1, 1_000_000_000, 6_000_000_000, 5_000_000);
        assert_eq!((gaps.contradicted.len(), gaps.possible.len()), (1, 0));
    }
}
