//! The statistics of `trace2 compare`, small enough to read whole: percentiles, the
//! Mann–Whitney U test (normal approximation with the tie and continuity corrections), the
//! Hodges–Lehmann shift with its distribution-free confidence interval (Moses), and Holm's
//! step-down correction across the groups of one comparison.
//!
//! Samples are integers (µs, or a counter's value), so the k-th smallest of the m·n pairwise
//! differences is found by a binary search over integer values, each step counting the
//! differences at or below a value in O(m + n) on the sorted samples: no m·n array, even
//! for 5,000 runs a side.

/// Value at quantile `q` (0..=1) of sorted `sorted`, interpolated between the two nearest
/// ranks (the definition spreadsheets and numpy use by default). `None` when empty.
pub fn quantile(sorted: &[i64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let at = q.clamp(0.0, 1.0) * last as f64;
    let low = at.floor() as usize;
    let high = at.ceil() as usize;
    let weight = at - low as f64;
    Some(sorted[low] as f64 * (1.0 - weight) + sorted[high] as f64 * weight)
}

/// Result of comparing `new` with `base`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shift {
    /// Hodges–Lehmann estimate: the median of all differences new − base.
    pub estimate: f64,
    /// Lower end of the confidence interval of the shift.
    pub low: f64,
    /// Upper end.
    pub high: f64,
    /// Two-sided p-value of the Mann–Whitney U test.
    pub p_value: f64,
}

/// Compares two sorted samples: the Mann–Whitney test and the Hodges–Lehmann shift of `new`
/// against `base`, with its confidence interval at `level` (0.95 for 95 %). Both samples
/// must be non-empty.
pub fn compare(base: &[i64], new: &[i64], level: f64) -> Shift {
    debug_assert!(base.is_sorted() && new.is_sorted());
    let (m, n) = (base.len() as f64, new.len() as f64);
    let p_value = mann_whitney_p(base, new);
    let pairs = base.len() as u128 * new.len() as u128;
    let estimate = if pairs % 2 == 1 {
        kth_difference(base, new, pairs / 2 + 1) as f64
    } else {
        (kth_difference(base, new, pairs / 2) as f64
            + kth_difference(base, new, pairs / 2 + 1) as f64)
            / 2.0
    };
    // Moses' interval: the k-th smallest and k-th largest difference, k from the normal
    // approximation of U's distribution.
    let z = normal_quantile(1.0 - (1.0 - level) / 2.0);
    let k = (m * n / 2.0 - z * (m * n * (m + n + 1.0) / 12.0).sqrt()).floor();
    let (low, high) = if k < 1.0 {
        // Too few runs for an interval at this level: every difference is possible.
        (
            (new[0] - base[base.len() - 1]) as f64,
            (new[new.len() - 1] - base[0]) as f64,
        )
    } else {
        let k = k as u128;
        (
            kth_difference(base, new, k) as f64,
            kth_difference(base, new, pairs + 1 - k) as f64,
        )
    };
    Shift {
        estimate,
        low,
        high,
        p_value,
    }
}

/// How many differences `new[j] − base[i]` are `<= value`.
fn count_at_most(base: &[i64], new: &[i64], value: i64) -> u128 {
    // For each new[j] (ascending), the base values >= new[j] − value; the cut only moves right.
    let mut cut = 0usize;
    let mut count = 0u128;
    for &y in new {
        let threshold = y.saturating_sub(value);
        while cut < base.len() && base[cut] < threshold {
            cut += 1;
        }
        count += (base.len() - cut) as u128;
    }
    count
}

/// The k-th smallest (1-based) of the differences `new[j] − base[i]`.
fn kth_difference(base: &[i64], new: &[i64], k: u128) -> i64 {
    let mut low = new[0].saturating_sub(base[base.len() - 1]);
    let mut high = new[new.len() - 1].saturating_sub(base[0]);
    while low < high {
        let mid = low + (high - low) / 2;
        if count_at_most(base, new, mid) >= k {
            high = mid;
        } else {
            low = mid + 1;
        }
    }
    low
}

/// Two-sided p-value of the Mann–Whitney U test, normal approximation with the tie correction
/// of the variance and a continuity correction of ½.
pub fn mann_whitney_p(base: &[i64], new: &[i64]) -> f64 {
    let (m, n) = (base.len() as f64, new.len() as f64);
    // Ranks of the merged samples (ties get their mean rank); U of `new` from its rank sum.
    let mut rank_sum_new = 0.0;
    let mut tie_term = 0.0;
    let (mut i, mut j) = (0usize, 0usize);
    let mut next_rank = 1.0;
    while i < base.len() || j < new.len() {
        let value = match (base.get(i), new.get(j)) {
            (Some(&a), Some(&b)) => a.min(b),
            (Some(&a), None) => a,
            (None, Some(&b)) => b,
            (None, None) => unreachable!(),
        };
        let (mut in_base, mut in_new) = (0usize, 0usize);
        while base.get(i) == Some(&value) {
            in_base += 1;
            i += 1;
        }
        while new.get(j) == Some(&value) {
            in_new += 1;
            j += 1;
        }
        let t = (in_base + in_new) as f64;
        let mean_rank = next_rank + (t - 1.0) / 2.0;
        rank_sum_new += mean_rank * in_new as f64;
        tie_term += t * t * t - t;
        next_rank += t;
    }
    let u = rank_sum_new - n * (n + 1.0) / 2.0;
    let mean = m * n / 2.0;
    let total = m + n;
    let variance = m * n / 12.0 * ((total + 1.0) - tie_term / (total * (total - 1.0)));
    if variance <= 0.0 {
        // Every value equal: nothing tells the samples apart.
        return 1.0;
    }
    let z = ((u - mean).abs() - 0.5).max(0.0) / variance.sqrt();
    (2.0 * normal_upper_tail(z)).min(1.0)
}

/// The smallest two-sided p-value the exact Mann–Whitney test can give for samples of `m`
/// and `n` runs (every new run beyond every base run): 2 / C(m + n, m).
pub fn smallest_p(m: usize, n: usize) -> f64 {
    let (small, total) = (m.min(n), m + n);
    let mut ways = 1.0f64;
    for i in 0..small {
        ways = ways * (total - i) as f64 / (i + 1) as f64;
    }
    (2.0 / ways).min(1.0)
}

/// Holm's step-down procedure: for each p-value, whether it is rejected with the
/// family-wise error rate held at `alpha`.
pub fn holm(p_values: &[f64], alpha: f64) -> Vec<bool> {
    let mut order: Vec<usize> = (0..p_values.len()).collect();
    order.sort_by(|&a, &b| p_values[a].total_cmp(&p_values[b]));
    let mut rejected = vec![false; p_values.len()];
    let k = p_values.len();
    for (step, &index) in order.iter().enumerate() {
        if p_values[index] > alpha / (k - step) as f64 {
            break;
        }
        rejected[index] = true;
    }
    rejected
}

/// P(Z > z) for a standard normal Z (complementary error function, W. J. Cody's rational
/// approximation via `erfc`, accurate to about 1e-7 relative).
pub fn normal_upper_tail(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// erfc(x), Numerical Recipes' Chebyshev fit (`erfcc`), fractional error below 1.2e-7.
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

/// The z with P(Z <= z) = `p`, by bisection on [`normal_upper_tail`] (called a few times per
/// comparison, so plain and exact enough beats fast).
pub fn normal_quantile(p: f64) -> f64 {
    let (mut low, mut high) = (-40.0f64, 40.0f64);
    for _ in 0..200 {
        let mid = (low + high) / 2.0;
        if 1.0 - normal_upper_tail(mid) < p {
            low = mid;
        } else {
            high = mid;
        }
    }
    (low + high) / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pairwise difference, sorted: what [`kth_difference`] must agree with.
    fn all_differences(base: &[i64], new: &[i64]) -> Vec<i64> {
        let mut all: Vec<i64> = new
            .iter()
            .flat_map(|y| base.iter().map(move |x| y - x))
            .collect();
        all.sort_unstable();
        all
    }

    #[test]
    fn quantiles_interpolate() {
        let sorted = [10, 20, 30, 40];
        assert_eq!(quantile(&sorted, 0.5), Some(25.0));
        assert_eq!(quantile(&sorted, 0.0), Some(10.0));
        assert_eq!(quantile(&sorted, 1.0), Some(40.0));
        assert_eq!(quantile(&[7], 0.9), Some(7.0));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn kth_difference_matches_the_full_list() {
        let base = [3, 5, 5, 9, 20];
        let new = [-4, 1, 5, 6, 6, 30, 31];
        let all = all_differences(&base, &new);
        for k in 1..=all.len() {
            assert_eq!(kth_difference(&base, &new, k as u128), all[k - 1], "k {k}");
        }
    }

    #[test]
    fn hodges_lehmann_of_a_pure_shift_is_the_shift() {
        let base: Vec<i64> = (0..30).map(|i| 1000 + i * 7 % 23).collect();
        let mut base = base;
        base.sort_unstable();
        let new: Vec<i64> = base.iter().map(|x| x + 50).collect();
        let shift = compare(&base, &new, 0.95);
        assert_eq!(shift.estimate, 50.0);
        assert!(shift.low <= 50.0 && shift.high >= 50.0, "{shift:?}");
        assert!(shift.p_value < 1e-6, "{shift:?}");
    }

    #[test]
    fn p_values_agree_with_published_values() {
        // Two fully separated samples of 10: z = (50 - 0.5) / sqrt(175) = 3.742, p = 1.83e-4.
        let base: Vec<i64> = (0..10).collect();
        let new: Vec<i64> = (10..20).collect();
        let p = mann_whitney_p(&base, &new);
        assert!((p - 1.83e-4).abs() < 0.02e-4, "{p}");
        // The same samples: p = 1.
        assert_eq!(mann_whitney_p(&base, &base), 1.0);
        // All equal: nothing to tell apart.
        assert_eq!(mann_whitney_p(&[5, 5], &[5, 5, 5]), 1.0);
    }

    #[test]
    fn normal_tail_and_quantile() {
        assert!((normal_upper_tail(1.959_964) - 0.025).abs() < 1e-6);
        assert!((normal_quantile(0.975) - 1.959_964).abs() < 1e-5);
        assert!((normal_upper_tail(0.0) - 0.5).abs() < 1e-7);
    }

    #[test]
    fn smallest_p_and_holm() {
        assert!((smallest_p(3, 3) - 0.1).abs() < 1e-12);
        assert!((smallest_p(4, 4) - 2.0 / 70.0).abs() < 1e-12);
        // Holm: 0.01 <= 0.05/3, 0.02 <= 0.05/2, 0.04 <= 0.05/1: all three.
        assert_eq!(holm(&[0.04, 0.01, 0.02], 0.05), [true, true, true]);
        // 0.03 > 0.05/2 stops the procedure before 0.04.
        assert_eq!(holm(&[0.04, 0.01, 0.03], 0.05), [false, true, false]);
        assert_eq!(holm(&[], 0.05), Vec::<bool>::new());
    }
}
