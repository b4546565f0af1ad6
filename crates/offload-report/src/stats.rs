//! Statistics across runs, for every command that repeats a measurement:
//! mean, standard deviation, the Student-t quantile [`t95`] and intervals,
//! a sample's [`Summary`], and the [`PairedDifference`] of interleaved A/B
//! runs.
//!
//! Pairing matters on small noisy machines: a slow minute slows A and B
//! alike, so the difference of each pair varies far less than either series.

use serde::{Deserialize, Serialize};

/// Φ⁻¹(0.975): the two-sided 95 % quantile of the standard normal
/// distribution, the limit of [`t95`] as the degrees of freedom grow.
pub const Z95: f64 = 1.959_963_984_540_054;

/// Above this many degrees of freedom [`t95`] uses the Cornish-Fisher
/// expansion, whose first omitted term is below 1e-15 there; at or below it,
/// the exact distribution function.
const EXPANSION_FROM_DF: usize = 1000;

/// The two-sided 95 % quantile of Student's t distribution with `df`
/// degrees of freedom: the `t` with P(|T| ≤ t) = 0.95, so that a sample of
/// `n` values has the 95 % interval `mean ± t95(n - 1) · s / √n`.
///
/// Exact to double precision for every `df ≥ 1`: the distribution function
/// of integer degrees of freedom is a finite trigonometric sum
/// (Abramowitz & Stegun 26.7.3 and 26.7.4), solved by bisection; above
/// 1000 degrees of freedom, the Cornish-Fisher expansion around [`Z95`]
/// (A&S 26.7.5) to the fourth order. `t95(0)` is infinite: one value gives
/// no spread, so its interval is unbounded (never NaN).
pub fn t95(df: usize) -> f64 {
    match df {
        0 => f64::INFINITY,
        1..=EXPANSION_FROM_DF => t95_by_bisection(df),
        _ => t95_by_expansion(df),
    }
}

/// P(|T| ≤ t) for Student's t with `df ≥ 1` integer degrees of freedom
/// (A&S 26.7.3 for odd, 26.7.4 for even `df`).
fn two_sided_coverage(t: f64, df: usize) -> f64 {
    let nu = df as f64;
    let theta = (t / nu.sqrt()).atan();
    let (sin, cos) = theta.sin_cos();
    let cos2 = cos * cos;
    if df % 2 == 1 {
        // (2/π)·(θ + sinθ·cosθ·Σ_{k=0}^{(ν-3)/2} c_k), c_0 = 1,
        // c_k = c_{k-1}·(2k)/(2k+1)·cos²θ.
        let mut sum = 0.0;
        if df > 1 {
            let mut term = 1.0;
            sum = 1.0;
            for k in 1..=(df - 3) / 2 {
                term *= (2 * k) as f64 / (2 * k + 1) as f64 * cos2;
                sum += term;
            }
        }
        std::f64::consts::FRAC_2_PI * (theta + sin * cos * sum)
    } else {
        // sinθ·Σ_{k=0}^{(ν-2)/2} c_k, c_0 = 1, c_k = c_{k-1}·(2k-1)/(2k)·cos²θ.
        let mut term = 1.0;
        let mut sum = 1.0;
        for k in 1..=(df - 2) / 2 {
            term *= (2 * k - 1) as f64 / (2 * k) as f64 * cos2;
            sum += term;
        }
        sin * sum
    }
}

/// Solves `two_sided_coverage(t, df) = 0.95` by bisection down to adjacent
/// doubles; the quantile lies between the normal's and df 1's (12.71).
fn t95_by_bisection(df: usize) -> f64 {
    let (mut low, mut high) = (Z95, 13.0);
    loop {
        let mid = 0.5 * (low + high);
        if mid <= low || mid >= high {
            return mid;
        }
        if two_sided_coverage(mid, df) < 0.95 {
            low = mid;
        } else {
            high = mid;
        }
    }
}

/// The Cornish-Fisher expansion of the t quantile in powers of 1/df.
fn t95_by_expansion(df: usize) -> f64 {
    let z = Z95;
    let nu = df as f64;
    let (z3, z5, z7, z9) = (z.powi(3), z.powi(5), z.powi(7), z.powi(9));
    let g1 = (z3 + z) / 4.0;
    let g2 = (5.0 * z5 + 16.0 * z3 + 3.0 * z) / 96.0;
    let g3 = (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / 384.0;
    let g4 = (79.0 * z9 + 776.0 * z7 + 1482.0 * z5 - 1920.0 * z3 - 945.0 * z) / 92160.0;
    z + g1 / nu + g2 / nu.powi(2) + g3 / nu.powi(3) + g4 / nu.powi(4)
}

/// Arithmetic mean; None when empty.
pub fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// Sample standard deviation (divisor `n - 1`); None for fewer than two
/// values.
pub fn stddev(values: &[f64]) -> Option<f64> {
    let n = values.len();
    let m = mean(values)?;
    (n >= 2).then(|| (values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt())
}

/// The 95 % Student-t interval `mean ± t95(n - 1) · stddev / √n` of a
/// mean over `n` values; unbounded for fewer than two values.
pub fn t_interval95(mean: f64, stddev: f64, n: usize) -> (f64, f64) {
    if n < 2 {
        return (f64::NEG_INFINITY, f64::INFINITY);
    }
    let half = t95(n - 1) * stddev / (n as f64).sqrt();
    (mean - half, mean + half)
}

/// The plain 95 % t interval of the mean of `values` (see [`t_interval95`]);
/// None when empty.
pub fn mean_ci95(values: &[f64]) -> Option<(f64, f64)> {
    let m = mean(values)?;
    Some(t_interval95(m, stddev(values).unwrap_or(0.0), values.len()))
}

/// Summary of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of values.
    pub n: usize,
    /// Median.
    pub median: f64,
    /// Mean.
    pub mean: f64,
    /// Sample standard deviation (0 for one value).
    pub stddev: f64,
    /// Lower bound of the 95% confidence interval: of the geometric mean
    /// when every value is positive (log-normal model), else of the mean;
    /// minus infinity for a single value.
    pub ci95_low: f64,
    /// Upper bound of that interval; infinity for a single value.
    pub ci95_high: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

/// Summarises `values`; None when empty or when a value is not finite.
pub fn summarize(values: &[f64]) -> Option<Summary> {
    if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let n = values.len();
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    let mean = values.iter().sum::<f64>() / n as f64;
    let stddev = stddev(values).unwrap_or(0.0);
    // Rates and costs are positive and their noise is multiplicative: the
    // interval is taken on their logarithms (a log-normal model), so that a
    // noisy pair of runs gives a wide interval that stays above zero rather
    // than one reaching into negative transactions per second. Samples
    // holding zero or negative values (differences) use the plain t
    // interval of the mean.
    let (ci95_low, ci95_high) = if n >= 2 && values.iter().all(|&v| v > 0.0) {
        let logs: Vec<f64> = values.iter().map(|v| v.ln()).collect();
        let lm = logs.iter().sum::<f64>() / n as f64;
        let (low, high) = t_interval95(lm, self::stddev(&logs).unwrap_or(0.0), n);
        (low.exp(), high.exp())
    } else {
        t_interval95(mean, stddev, n)
    };
    Some(Summary {
        n,
        median,
        mean,
        stddev,
        ci95_low,
        ci95_high,
        min: sorted[0],
        max: sorted[n - 1],
    })
}

/// The paired difference B - A of interleaved runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PairedDifference {
    /// Summary of A.
    pub a: Summary,
    /// Summary of B.
    pub b: Summary,
    /// Summary of the per-pair differences B - A.
    pub difference: Summary,
    /// Mean difference relative to A's mean, in percent.
    pub relative_percent: f64,
    /// The confidence interval of the relative difference, in percent.
    pub relative_ci95_percent: (f64, f64),
    /// Whether the 95% interval of the difference excludes zero.
    pub significant: bool,
}

/// Paired difference of equally long series `a` and `b` (pair i = `a[i]`, `b[i]`).
pub fn paired_difference(a: &[f64], b: &[f64]) -> Option<PairedDifference> {
    if a.len() != b.len() {
        return None;
    }
    let diffs: Vec<f64> = a.iter().zip(b).map(|(x, y)| y - x).collect();
    let (sa, sb, sd) = (summarize(a)?, summarize(b)?, summarize(&diffs)?);
    // Relative difference from the per-pair ratios B/A (their log mean and t
    // interval), so that it cannot fall below -100% and a pair's drift
    // cancels out; where a value is not positive, from the differences.
    let positive = a.iter().chain(b).all(|&v| v > 0.0);
    let (relative_percent, relative_ci95_percent, significant) = if positive && a.len() > 1 {
        let logs: Vec<f64> = a.iter().zip(b).map(|(x, y)| (y / x).ln()).collect();
        let m = mean(&logs).unwrap_or(0.0);
        let (low, high) = t_interval95(m, stddev(&logs).unwrap_or(0.0), logs.len());
        let pct = |v: f64| 100.0 * (v.exp() - 1.0);
        ((pct(m)), (pct(low), pct(high)), low > 0.0 || high < 0.0)
    } else {
        let rel = |v: f64| {
            if sa.mean != 0.0 {
                100.0 * v / sa.mean
            } else {
                f64::NAN
            }
        };
        (
            rel(sd.mean),
            (rel(sd.ci95_low), rel(sd.ci95_high)),
            sd.ci95_low > 0.0 || sd.ci95_high < 0.0,
        )
    };
    Some(PairedDifference {
        a: sa,
        b: sb,
        difference: sd,
        relative_percent,
        relative_ci95_percent,
        significant,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Published two-sided 95 % quantiles (R's `qt(0.975, df)`, 15 digits).
    const PUBLISHED: [(usize, f64); 9] = [
        (1, 12.706_204_736_174_7),
        (2, 4.302_652_729_749_46),
        (3, 3.182_446_305_284_26),
        (4, 2.776_445_105_197_8),
        (5, 2.570_581_835_636_31),
        (10, 2.228_138_851_986_27),
        (20, 2.085_963_447_265_86),
        (30, 2.042_272_456_301_24),
        (100, 1.983_971_518_523_55),
    ];

    #[test]
    fn t95_matches_published_quantiles_and_closed_forms() {
        for (df, t) in PUBLISHED {
            assert!((t95(df) - t).abs() < 1e-12, "df {df}: {} vs {t}", t95(df));
        }
        // df 1 is the Cauchy distribution: tan(π·(0.975 - 0.5)).
        let cauchy = (std::f64::consts::PI * 0.475).tan();
        assert!((t95(1) - cauchy).abs() < 1e-12 * cauchy);
        // df 2: P(|T| ≤ t) = t / √(2 + t²), so t² = 2·0.95² / (1 - 0.95²).
        let two = (2.0 * 0.9025f64 / 0.0975).sqrt();
        assert!((t95(2) - two).abs() < 1e-13);
        assert_eq!(t95(0), f64::INFINITY);
    }

    /// The density of Student's t with `df` degrees of freedom, its
    /// normalising Γ((ν+1)/2) / Γ(ν/2) from Γ(1)/Γ(1/2) = 1/√π and
    /// Γ(x+1) = x·Γ(x).
    fn density(t: f64, df: usize) -> f64 {
        let mut ratio = 1.0 / std::f64::consts::PI.sqrt();
        for nu in 1..df {
            ratio = (nu as f64 / 2.0) / ratio;
        }
        let nu = df as f64;
        ratio / (nu * std::f64::consts::PI).sqrt() * (1.0 + t * t / nu).powf(-(nu + 1.0) / 2.0)
    }

    #[test]
    fn t95_bounds_95_percent_of_the_density() {
        // Independent of the series t95 solves: Simpson's rule on the
        // density from 0 to t95 gives half of 0.95.
        for df in (1..=60).chain([99, 250, 999]) {
            let t = t95(df);
            let steps = 20_000;
            let h = t / steps as f64;
            let mut area = density(0.0, df) + density(t, df);
            for i in 1..steps {
                area += density(i as f64 * h, df) * if i % 2 == 1 { 4.0 } else { 2.0 };
            }
            area *= h / 3.0;
            assert!((area - 0.475).abs() < 1e-10, "df {df}: area {area}");
        }
    }

    #[test]
    fn t95_is_continuous_where_the_expansion_takes_over_and_decreases() {
        for df in [EXPANSION_FROM_DF, EXPANSION_FROM_DF + 1, 2000, 5000] {
            let exact = t95_by_bisection(df);
            let expanded = t95_by_expansion(df);
            assert!(
                (exact - expanded).abs() < 1e-13,
                "df {df}: {exact} vs {expanded}"
            );
        }
        let mut last = f64::INFINITY;
        for df in (1..3000).chain([10_000, 1_000_000]) {
            let t = t95(df);
            assert!(t < last && t > Z95, "df {df}: {t}");
            last = t;
        }
        assert!((t95(usize::MAX) - Z95).abs() < 1e-15);
    }

    #[test]
    fn mean_stddev_and_intervals() {
        assert_eq!(mean(&[]), None);
        assert_eq!(mean(&[1.0, 2.0, 6.0]), Some(3.0));
        assert_eq!(stddev(&[4.0]), None);
        assert!((stddev(&[1.0, 2.0, 3.0, 4.0]).unwrap() - 1.290_994_448_735_805_6).abs() < 1e-15);
        let (low, high) = mean_ci95(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        let half = t95(3) * 1.290_994_448_735_805_6 / 2.0;
        assert!((low - (2.5 - half)).abs() < 1e-12 && (high - (2.5 + half)).abs() < 1e-12);
        assert_eq!(mean_ci95(&[7.0]), Some((f64::NEG_INFINITY, f64::INFINITY)));
        assert_eq!(mean_ci95(&[]), None);
    }

    #[test]
    fn summary_of_known_values() {
        let s = summarize(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(s.median, 2.5);
        assert_eq!(s.mean, 2.5);
        assert!((s.stddev - 1.290_994).abs() < 1e-5);
        // Log-normal interval: around the geometric mean, above zero.
        let logs: Vec<f64> = [1.0f64, 2.0, 3.0, 4.0].iter().map(|v| v.ln()).collect();
        let lm = logs.iter().sum::<f64>() / 4.0;
        let lsd = (logs.iter().map(|v| (v - lm).powi(2)).sum::<f64>() / 3.0).sqrt();
        assert!((s.ci95_high - (lm + t95(3) * lsd / 2.0).exp()).abs() < 1e-9);
        assert!(s.ci95_low > 0.0 && s.ci95_low < lm.exp() && s.ci95_high > lm.exp());
        // With a zero or a negative value: the plain t interval of the mean.
        let d = summarize(&[-1.0, 0.0, 1.0, 2.0]).unwrap();
        assert!((d.ci95_high - (0.5 + t95(3) * 1.290_994_448_735_805_6 / 2.0)).abs() < 1e-12);
        assert!(summarize(&[]).is_none());
        assert!(summarize(&[f64::NAN]).is_none());
        let one = summarize(&[5.0]).unwrap();
        assert!(one.ci95_high.is_infinite());
    }

    #[test]
    fn three_noisy_runs_keep_a_positive_interval() {
        // Three runs far apart once gave a plain t interval of [-14887, 68688].
        let s = summarize(&[8_000.0, 30_000.0, 43_000.0]).unwrap();
        assert!(s.ci95_low > 0.0, "{s:?}");
        assert!(s.ci95_low < s.median && s.median < s.ci95_high);
    }

    #[test]
    fn equal_arms_are_not_significant_and_ratios_stay_above_minus_100() {
        let a = [100.0, 140.0, 90.0];
        let b = [101.0, 138.0, 91.0];
        let d = paired_difference(&a, &b).unwrap();
        assert!(!d.significant, "{d:?}");
        assert!(d.relative_ci95_percent.0 < 0.0 && d.relative_ci95_percent.1 > 0.0);
        let d = paired_difference(&[100.0, 100.0], &[1.0, 50.0]).unwrap();
        assert!(d.relative_ci95_percent.0 > -100.0, "{d:?}");
    }

    #[test]
    fn pairing_finds_a_small_shift_hidden_in_noise() {
        // A drifts a lot between pairs; B is always A + 5%.
        let a = [100.0, 140.0, 90.0, 160.0, 120.0, 80.0];
        let b: Vec<f64> = a.iter().map(|x| x * 1.05).collect();
        let d = paired_difference(&a, &b).unwrap();
        assert!(d.significant);
        assert!((d.relative_percent - 5.0).abs() < 1e-9);
        // Unpaired intervals overlap completely.
        assert!(d.b.ci95_low < d.a.ci95_high);
        assert!(d.relative_ci95_percent.0 > 4.9 && d.relative_ci95_percent.1 < 5.1);
        assert!(paired_difference(&a, &b[..2]).is_none());
    }
}
