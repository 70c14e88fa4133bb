//! A histogram as the report states it: its buckets, each percentile as the
//! range of the bucket that holds it (a midpoint alone would claim a
//! precision the kernel's buckets do not have), and the tail over a
//! threshold as a count between two bounds. Pure.

use serde::Serialize;

use crate::histogram::{slot_range, Histogram};

/// Values in `[low_ns, high_ns)`.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    pub low_ns: u64,
    pub high_ns: u64,
    pub count: u64,
}

/// A value known to lie in `[low_ns, high_ns]`.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub low_ns: u64,
    pub high_ns: u64,
}

/// How many values were at or over `threshold_ns`: at least `at_least`, at
/// most `at_most` (equal when the threshold falls on a bucket edge).
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tail {
    pub threshold_ns: u64,
    pub at_least: u64,
    pub at_most: u64,
}

#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct Distribution {
    /// Non-empty buckets, lowest first.
    pub buckets: Vec<Bucket>,
    /// Null when nothing was counted.
    pub p50: Option<Range>,
    pub p99: Option<Range>,
    pub p999: Option<Range>,
    pub over_threshold: Tail,
}

impl Distribution {
    /// `max_ns`: the largest value, measured exactly (ranges never go above
    /// it); `threshold_ns`: where the tail starts.
    pub fn of(histogram: &Histogram, max_ns: u64, threshold_ns: u64) -> Distribution {
        let buckets: Vec<Bucket> = histogram
            .slots()
            .iter()
            .enumerate()
            .filter(|(_, &count)| count > 0)
            .map(|(slot, &count)| {
                let (low_ns, high_ns) = slot_range(slot);
                Bucket {
                    low_ns,
                    high_ns,
                    count,
                }
            })
            .collect();
        let at_least = buckets
            .iter()
            .filter(|b| b.low_ns >= threshold_ns)
            .map(|b| b.count)
            .sum();
        let at_most = buckets
            .iter()
            .filter(|b| b.high_ns > threshold_ns)
            .map(|b| b.count)
            .sum();
        let range = |q: f64| percentile(&buckets, q, max_ns);
        Distribution {
            p50: range(0.5),
            p99: range(0.99),
            p999: range(0.999),
            over_threshold: Tail {
                threshold_ns,
                at_least,
                // The largest value is exact: nothing is over the threshold above it.
                at_most: if max_ns < threshold_ns && max_ns > 0 {
                    0
                } else {
                    at_most
                },
            },
            buckets,
        }
    }
}

/// The bucket holding rank `q`, its top cut at the measured maximum (its
/// bottom too when the maximum lies under it: counts can be newer than it).
fn percentile(buckets: &[Bucket], q: f64, max_ns: u64) -> Option<Range> {
    let total: u64 = buckets.iter().map(|b| b.count).sum();
    if total == 0 {
        return None;
    }
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
    let mut seen = 0;
    let bucket = buckets.iter().find(|b| {
        seen += b.count;
        seen >= rank
    })?;
    let high_ns = if max_ns > 0 {
        (bucket.high_ns - 1).min(max_ns)
    } else {
        bucket.high_ns - 1
    };
    Some(Range {
        low_ns: bucket.low_ns.min(high_ns),
        high_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(values: &[u64]) -> Histogram {
        let mut h = Histogram::default();
        values.iter().for_each(|&v| h.record(v));
        h
    }

    /// The issue's `/victim 4947 waits p50 0.00ms`: sub-microsecond waits
    /// read as a range under 1 us, not as 0.
    #[test]
    fn tiny_values_are_ranges_not_zero() {
        let mut values = vec![300; 4900];
        values.extend([3_580_000; 47]);
        let d = Distribution::of(&histogram(&values), 3_580_000, 2_000_000);
        let p50 = d.p50.unwrap();
        assert!(p50.low_ns <= 300 && 300 <= p50.high_ns && p50.high_ns < 1_000);
        let p999 = d.p999.unwrap();
        assert!(
            p999.low_ns <= 3_580_000 && p999.high_ns == 3_580_000,
            "{p999:?}"
        );
        assert_eq!(
            (d.over_threshold.at_least, d.over_threshold.at_most),
            (47, 47)
        );
        assert_eq!(d.buckets.iter().map(|b| b.count).sum::<u64>(), 4947);
    }

    #[test]
    fn a_threshold_inside_a_bucket_bounds_the_tail() {
        // 9.5 ms and 10.2 ms share the bucket [8.39, 10.49) ms.
        let d = Distribution::of(
            &histogram(&[9_500_000, 10_200_000, 30_000_000]),
            30_000_000,
            10_000_000,
        );
        assert_eq!(
            (d.over_threshold.at_least, d.over_threshold.at_most),
            (1, 3)
        );
    }

    #[test]
    fn nothing_counted_has_no_percentiles() {
        let d = Distribution::of(&Histogram::default(), 0, 1);
        assert_eq!((d.p50, d.p99, d.buckets.len()), (None, None, 0));
    }
}
