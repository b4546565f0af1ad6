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
    /// Lower bound of the 95% confidence interval of the mean.
    pub ci95_low: f64,
    /// Upper bound of the 95% confidence interval of the mean.
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
    let half = if n > 1 {
        t95(n - 1) * stddev / (n as f64).sqrt()
    } else {
        f64::INFINITY
    };
    Some(Summary {
        n,
        median,
        mean,
        stddev,
        ci95_low: mean - half,
        ci95_high: mean + half,
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
    let rel = |v: f64| {
        if sa.mean != 0.0 {
            100.0 * v / sa.mean
        } else {
            f64::NAN
        }
    };
    Some(PairedDifference {
        a: sa,
        b: sb,
        difference: sd,
        relative_percent: rel(sd.mean),
        relative_ci95_percent: (rel(sd.ci95_low), rel(sd.ci95_high)),
        significant: sd.ci95_low > 0.0 || sd.ci95_high < 0.0,
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
        // t(3) = 3.182; half-width = 3.182 * 1.291 / 2
        assert!((s.ci95_high - (2.5 + 3.182 * 1.290_994 / 2.0)).abs() < 1e-4);
        assert!(summarize(&[]).is_none());
        assert!(summarize(&[f64::NAN]).is_none());
        let one = summarize(&[5.0]).unwrap();
        assert!(one.ci95_high.is_infinite());
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
        assert!(paired_difference(&a, &b[..2]).is_none());
    }
}
