//! The bench's arithmetic, pure: medians with their spread, and slowdowns
//! paired by round.

/// The median of some values, with the lowest and highest of them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

/// The spread of `values`; None when there are none. An even count takes
/// the mean of the two middle values.
pub fn spread(values: impl IntoIterator<Item = f64>) -> Option<Spread> {
    let mut values: Vec<f64> = values.into_iter().collect();
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    let median = if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    };
    Some(Spread {
        median,
        min: values[0],
        max: values[values.len() - 1],
    })
}

/// Round by round, what a run cost with a tool attached over what the run
/// with nothing attached cost in the same round (1.05 = 5% slower). Pairing
/// by round cancels the drift of a shared machine that a ratio of two
/// medians would keep.
pub fn paired_ratios(with: &[f64], without: &[f64]) -> Vec<f64> {
    assert_eq!(with.len(), without.len(), "one run of each per round");
    with.iter().zip(without).map(|(w, wo)| w / wo).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_an_odd_count_is_the_middle_value_and_of_an_even_count_the_mean_of_the_two() {
        assert_eq!(
            spread([3.0, 1.0, 2.0]),
            Some(Spread {
                median: 2.0,
                min: 1.0,
                max: 3.0
            })
        );
        assert_eq!(
            spread([4.0, 1.0, 3.0, 2.0]),
            Some(Spread {
                median: 2.5,
                min: 1.0,
                max: 4.0
            })
        );
        assert_eq!(spread([]), None);
    }

    #[test]
    fn ratios_pair_each_round_with_the_baseline_of_the_same_round() {
        // The machine was twice as slow in round two: paired, the tool costs
        // 10% in both rounds.
        let ratios = paired_ratios(&[1.1, 2.2], &[1.0, 2.0]);
        assert!((ratios[0] - 1.1).abs() < 1e-12 && (ratios[1] - 1.1).abs() < 1e-12);
        // A ratio of medians would have said 1.65 / 1.5 = 1.1 here too, but not
        // when the rounds' noise differs: 1.0 vs 1.3 with, 1.2 vs 1.0 without.
        let ratios = paired_ratios(&[1.0, 1.3], &[1.2, 1.0]);
        let median = spread(ratios).unwrap().median;
        assert!((median - (1.0 / 1.2 + 1.3) / 2.0).abs() < 1e-12);
    }
}
