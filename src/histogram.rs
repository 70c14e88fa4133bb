//! Latency histograms with four sub-buckets per power of two, the layout the
//! BPF side fills (`hist_slot` in bpf/common.bpf.h); percentile estimates.

use serde::{Deserialize, Serialize};

use crate::abi::types::histogram_layout;

/// Number of slots (`enum histogram_layout` in bpf/stalltop.h).
pub const SLOTS: usize = histogram_layout::HIST_SLOTS.0 as usize;
const SUB_BITS: u32 = histogram_layout::HIST_SUB_BITS.0;

/// Counts per slot; trailing empty slots are not stored.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(transparent)]
pub struct Histogram {
    slots: Vec<u64>,
}

/// The slot a value falls in (mirror of the BPF `hist_slot`; the kernel
/// fills histograms, so only tests need it here).
#[cfg(test)]
pub fn slot_of(value: u64) -> usize {
    if value < 4 {
        return value as usize;
    }
    let msb = 63 - value.leading_zeros();
    let slot = (((msb - 1) << SUB_BITS) | ((value >> (msb - SUB_BITS)) & 3) as u32) as usize;
    slot.min(SLOTS - 1)
}

/// The half-open value range `[low, high)` of a slot.
pub fn slot_range(slot: usize) -> (u64, u64) {
    if slot < 4 {
        return (slot as u64, slot as u64 + 1);
    }
    let msb = (slot >> SUB_BITS) as u32 + 1;
    let sub = (slot & 3) as u64;
    let shift = msb - SUB_BITS;
    ((4 + sub) << shift, (5 + sub) << shift)
}

impl Histogram {
    /// From a kernel slot array (u32 counters), trailing zeros dropped.
    pub fn from_slots<T: Copy + Into<u64>>(slots: &[T]) -> Self {
        debug_assert!(slots.len() <= SLOTS, "more slots than the BPF layout has");
        let mut slots: Vec<u64> = slots.iter().map(|&c| c.into()).collect();
        while slots.last() == Some(&0) {
            slots.pop();
        }
        Histogram { slots }
    }

    #[cfg(test)]
    pub fn record(&mut self, value: u64) {
        let slot = slot_of(value);
        if self.slots.len() <= slot {
            self.slots.resize(slot + 1, 0);
        }
        self.slots[slot] += 1;
    }

    /// Counts per slot, trailing empty slots left out.
    pub fn slots(&self) -> &[u64] {
        &self.slots
    }

    pub fn count(&self) -> u64 {
        self.slots.iter().sum()
    }

    /// Counts in `self` that are not in `earlier` (a previous cumulative
    /// reading of the same counters); saturating, so a reset reads as zero.
    pub fn since(&self, earlier: &Histogram) -> Histogram {
        let slots: Vec<u64> = self
            .slots
            .iter()
            .enumerate()
            .map(|(i, &c)| c.saturating_sub(earlier.slots.get(i).copied().unwrap_or(0)))
            .collect();
        Histogram::from_slots(&slots)
    }

    pub fn merge(&mut self, other: &Histogram) {
        if self.slots.len() < other.slots.len() {
            self.slots.resize(other.slots.len(), 0);
        }
        for (mine, theirs) in self.slots.iter_mut().zip(&other.slots) {
            *mine += theirs;
        }
    }

    /// The value below which `q` (0..=1) of the samples fall, estimated as
    /// the middle of the slot holding that rank; 0 for an empty histogram.
    pub fn quantile(&self, q: f64) -> u64 {
        let total = self.count();
        if total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (slot, &c) in self.slots.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (low, high) = slot_range(slot);
                return low + (high - low) / 2;
            }
        }
        unreachable!("rank {rank} is at most the total {total}")
    }

    /// `quantile(q)`, never above `max`, the largest sample as measured exactly: a slot's
    /// middle can lie above every sample in it.
    pub fn quantile_at_most(&self, q: f64, max: u64) -> u64 {
        self.quantile(q).min(max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_percentile_is_never_above_the_measured_maximum() {
        let mut h = Histogram::default();
        // 4.33 ms lands in a slot whose middle is above it.
        h.record(4_330_000);
        assert!(h.quantile(0.99) > 4_330_000, "{}", h.quantile(0.99));
        assert_eq!(h.quantile_at_most(0.99, 4_330_000), 4_330_000);
        assert_eq!(h.quantile_at_most(0.5, 9_000_000), h.quantile(0.5));
    }

    #[test]
    fn slots_are_contiguous_and_ranges_hold_their_values() {
        let mut previous = 0;
        for v in (0..5000u64).chain([1 << 20, (1 << 20) + 1, 10_000_000, 131_000_000]) {
            let slot = slot_of(v);
            let (low, high) = slot_range(slot);
            assert!(
                low <= v && v < high,
                "{v} not in slot {slot} [{low},{high})"
            );
            if v < 5000 {
                assert!(slot == previous || slot == previous + 1, "gap at {v}");
                previous = slot;
            }
        }
        assert_eq!(slot_of(u64::MAX), SLOTS - 1);
    }

    #[test]
    fn quantiles_are_within_an_eighth() {
        let mut h = Histogram::default();
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        for (q, exact) in [(0.5, 500_000.0), (0.99, 990_000.0)] {
            let est = h.quantile(q) as f64;
            assert!(
                (est - exact).abs() / exact <= 0.125,
                "q{q}: {est} vs {exact}"
            );
        }
        assert_eq!(Histogram::default().quantile(0.99), 0);
    }

    #[test]
    fn since_subtracts_an_earlier_reading() {
        let mut early = Histogram::default();
        early.record(10);
        let mut late = early.clone();
        late.record(10);
        late.record(1_000_000);
        let delta = late.since(&early);
        assert_eq!(delta.count(), 2);
        let (low, high) = slot_range(slot_of(10));
        assert!((low..high).contains(&delta.quantile(0.5)));
        let (low, high) = slot_range(slot_of(1_000_000));
        assert!((low..high).contains(&delta.quantile(1.0)));
    }
}
