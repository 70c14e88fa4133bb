//! Latency summaries (nearest-rank percentiles) of the samples a workload measured.

use serde::Serialize;

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Percentiles {
    pub count: usize,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

impl Percentiles {
    pub fn of(mut samples: Vec<u64>) -> Self {
        samples.sort_unstable();
        let Some(&max_ns) = samples.last() else {
            return Percentiles::default();
        };
        Percentiles {
            count: samples.len(),
            p50_ns: nearest_rank(&samples, 50),
            p99_ns: nearest_rank(&samples, 99),
            max_ns,
        }
    }
}

/// The smallest sample with at least `percent`% of the samples at or below it.
fn nearest_rank(sorted: &[u64], percent: usize) -> u64 {
    let rank = (sorted.len() * percent).div_ceil(100).max(1);
    sorted[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let p = Percentiles::of((1..=200).rev().collect());
        assert_eq!(
            p,
            Percentiles {
                count: 200,
                p50_ns: 100,
                p99_ns: 198,
                max_ns: 200
            }
        );
        assert_eq!(Percentiles::of(vec![7]).p99_ns, 7);
        assert_eq!(Percentiles::of(Vec::new()), Percentiles::default());
    }
}
