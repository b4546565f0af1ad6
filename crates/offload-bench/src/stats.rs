//! Statistics across runs: median, mean and a Student-t confidence interval
//! for repeated runs, and the paired difference for interleaved A/B runs.
//!
//! Pairing matters on small noisy machines: a slow minute slows A and B
//! alike, so the difference of each pair varies far less than either series.

use serde::{Deserialize, Serialize};

/// Two-sided 95% Student-t quantiles for 1..=30 degrees of freedom.
const T95: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// The 95% two-sided t quantile for `df` degrees of freedom.
pub fn t95(df: usize) -> f64 {
    match df {
        0 => f64::INFINITY,
        1..=30 => T95[df - 1],
        31..=60 => 2.00,
        61..=120 => 1.98,
        _ => 1.96,
    }
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
    let stddev = if n > 1 {
        (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    } else {
        0.0
    };
    // Rates and costs are positive and their noise is multiplicative: the
    // interval is taken on their logarithms (a log-normal model), so that a
    // noisy pair of runs gives a wide interval that stays above zero rather
    // than one reaching into negative transactions per second. Samples
    // holding zero or negative values (differences) use the plain t
    // interval of the mean.
    let (ci95_low, ci95_high) = if n < 2 {
        (f64::NEG_INFINITY, f64::INFINITY)
    } else if values.iter().all(|&v| v > 0.0) {
        let logs: Vec<f64> = values.iter().map(|v| v.ln()).collect();
        let lm = logs.iter().sum::<f64>() / n as f64;
        let lsd = (logs.iter().map(|v| (v - lm).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
        let half = t95(n - 1) * lsd / (n as f64).sqrt();
        ((lm - half).exp(), (lm + half).exp())
    } else {
        let half = t95(n - 1) * stddev / (n as f64).sqrt();
        (mean - half, mean + half)
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
        let n = logs.len();
        let m = logs.iter().sum::<f64>() / n as f64;
        let sd_log = (logs.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
        let half = t95(n - 1) * sd_log / (n as f64).sqrt();
        let pct = |v: f64| 100.0 * (v.exp() - 1.0);
        (
            pct(m),
            (pct(m - half), pct(m + half)),
            m - half > 0.0 || m + half < 0.0,
        )
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
        assert!((s.ci95_high - (lm + 3.182 * lsd / 2.0).exp()).abs() < 1e-3);
        assert!(s.ci95_low > 0.0 && s.ci95_low < lm.exp() && s.ci95_high > lm.exp());
        // With a zero or a negative value: the plain t interval of the mean.
        let d = summarize(&[-1.0, 0.0, 1.0, 2.0]).unwrap();
        assert!((d.ci95_high - (0.5 + 3.182 * 1.290_994 / 2.0)).abs() < 1e-4);
        assert!(summarize(&[]).is_none());
        assert!(summarize(&[f64::NAN]).is_none());
        let one = summarize(&[5.0]).unwrap();
        assert!(one.ci95_high.is_infinite());
    }

    #[test]
    fn three_noisy_runs_keep_a_positive_interval() {
        // The case: three runs far apart gave [-14887, 68688].
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
