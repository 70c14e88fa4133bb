//! Whether the values read at the kernel's places are what those places should hold: the
//! pending softirq mask's range, and the steal clock against the kernel's own account of steal
//! (/proc/stat). Pure.

use std::collections::BTreeMap;

/// Softirq vectors the kernel has (NR_SOFTIRQS, the same since 4.1): no bit of the pending
/// mask lies at or above it.
const NR_SOFTIRQS: u32 = 10;
/// /proc/stat counts steal at the scheduler tick, in USER_HZ units, and a CPU's steal since its
/// last tick is not in it yet: it may differ from the steal clock by this much (the probe test
/// of the sampler's steal clock holds it to the same).
pub const STEAL_TOLERANCE_NS: u64 = 40_000_000;

/// The place holds a mask of pending softirqs: no bit at or above NR_SOFTIRQS, on any CPU.
pub fn softirq_pending(masks: &[(u32, u16)]) -> Result<(), String> {
    match masks
        .iter()
        .find(|(_, mask)| u32::from(*mask) >> NR_SOFTIRQS != 0)
    {
        Some((cpu, mask)) => Err(format!(
            "it had bits at or above NR_SOFTIRQS ({NR_SOFTIRQS}): {mask:#06x} on CPU {cpu}"
        )),
        None => Ok(()),
    }
}

/// The place holds the vCPU's steal clock: on every CPU read, it is what /proc/stat's steal
/// says (the kernel accounts the same clock there from 0 at boot), within
/// `STEAL_TOLERANCE_NS`.
pub fn steal_clock(
    clock_ns: &BTreeMap<u32, u64>,
    proc_stat_ns: &BTreeMap<u32, u64>,
) -> Result<(), String> {
    let mut compared = 0;
    for (cpu, &clock) in clock_ns {
        let Some(&stat) = proc_stat_ns.get(cpu) else {
            continue;
        };
        compared += 1;
        if clock.abs_diff(stat) > STEAL_TOLERANCE_NS {
            return Err(format!(
                "it read {} on CPU {cpu}, where /proc/stat's steal is {} (±{})",
                ms(clock),
                ms(stat),
                ms(STEAL_TOLERANCE_NS)
            ));
        }
    }
    if compared == 0 {
        return Err("no CPU was read that /proc/stat has".into());
    }
    Ok(())
}

/// Each CPU's steal in ns from /proc/stat (its `cpuN` lines; steal is the 8th value, in
/// `ticks_per_s` units).
pub fn proc_stat_steal_ns(proc_stat: &str, ticks_per_s: u64) -> BTreeMap<u32, u64> {
    proc_stat
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let cpu = fields.next()?.strip_prefix("cpu")?.parse::<u32>().ok()?;
            let steal: u64 = fields.nth(7)?.parse().ok()?;
            Some((cpu, steal * 1_000_000_000 / ticks_per_s.max(1)))
        })
        .collect()
}

fn ms(ns: u64) -> String {
    format!("{} ms", ns / 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_mask_has_no_bit_at_or_above_nr_softirqs() {
        assert_eq!(softirq_pending(&[(0, 0), (1, 0x3ff), (2, 0x008)]), Ok(()));
        assert_eq!(
            softirq_pending(&[(0, 0x2), (1, 0x400)]),
            Err("it had bits at or above NR_SOFTIRQS (10): 0x0400 on CPU 1".into())
        );
    }

    fn ms_map(pairs: &[(u32, u64)]) -> BTreeMap<u32, u64> {
        pairs.iter().map(|&(c, ms)| (c, ms * 1_000_000)).collect()
    }

    #[test]
    fn a_steal_clock_reads_what_proc_stat_accounted() {
        // /proc/stat behind by its USER_HZ rounding and a tick.
        assert_eq!(
            steal_clock(
                &ms_map(&[(0, 5_013), (1, 7_000)]),
                &ms_map(&[(0, 5_000), (1, 6_990), (2, 100)])
            ),
            Ok(())
        );
        // No steal at all (an emulator, or a host that never took the vCPU): nothing to
        // correct, nothing wrong.
        assert_eq!(steal_clock(&ms_map(&[(0, 0)]), &ms_map(&[(0, 0)])), Ok(()));
    }

    #[test]
    fn another_value_at_the_place_is_refused() {
        // rq->clock: the time since boot, where /proc/stat saw 2 s of steal.
        assert_eq!(
            steal_clock(
                &ms_map(&[(0, 2_000), (1, 86_400_000)]),
                &ms_map(&[(0, 2_000), (1, 2_000)])
            ),
            Err(
                "it read 86400000 ms on CPU 1, where /proc/stat's steal is 2000 ms (±40 ms)".into()
            )
        );
        // Zeros where the kernel accounted steal.
        assert!(steal_clock(&ms_map(&[(0, 0)]), &ms_map(&[(0, 300)])).is_err());
        assert_eq!(
            steal_clock(&ms_map(&[(5, 0)]), &ms_map(&[(0, 0)])),
            Err("no CPU was read that /proc/stat has".into())
        );
    }

    #[test]
    fn proc_stat_gives_each_cpu_s_steal_in_ns() {
        let stat = "cpu  10 0 20 300 0 0 1 5 0 0\n\
                    cpu0 5 0 10 150 0 0 1 3 0 0\n\
                    cpu1 5 0 10 150 0 0 0 2 0 0\n\
                    intr 12345\n";
        assert_eq!(
            proc_stat_steal_ns(stat, 100),
            BTreeMap::from([(0, 30_000_000), (1, 20_000_000)])
        );
    }
}
