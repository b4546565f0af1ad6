//! Paired comparisons of two arms: per metric, the mean of the per-pair
//! differences B - A and its 95% Student t interval, computed from the
//! runs the report keeps (so anyone can recompute it from the JSON).
//!
//! A plain t interval of the mean difference is used on purpose: an
//! interval on log ratios suits rates but not differences that happen to
//! share a sign, and a reader checking the report should get the same
//! numbers with a pocket calculator.

use std::collections::BTreeMap;

use offload_report::stats;
use serde::Serialize;

use super::{Arm, METRICS};

/// The paired difference of one metric.
#[derive(Debug, Clone, Serialize)]
pub struct PairedStat {
    /// Pairs that measured the metric in both arms.
    pub pairs: usize,
    /// Mean of A over those pairs.
    pub a_mean: f64,
    /// Mean of B over those pairs.
    pub b_mean: f64,
    /// Mean of the differences B - A.
    pub mean: f64,
    /// 95% t interval of that mean: mean -/+ t95(n-1) * sd / sqrt(n).
    pub ci95: [f64; 2],
    /// `mean` relative to `a_mean`, percent.
    pub relative_percent: f64,
    /// `ci95` relative to `a_mean`, percent.
    pub relative_ci95_percent: [f64; 2],
    /// Whether the interval excludes zero.
    pub significant: bool,
}

impl PairedStat {
    /// The paired difference of `b - a` (pair i = `a[i]`, `b[i]`); None
    /// with fewer than two pairs (no interval exists).
    pub fn of(a: &[f64], b: &[f64]) -> Option<Self> {
        let n = a.len().min(b.len());
        if n < 2 {
            return None;
        }
        let d: Vec<f64> = a.iter().zip(b).map(|(x, y)| y - x).collect();
        let mean = stats::mean(&d)?;
        let (low, high) = stats::t_interval95(mean, stats::stddev(&d)?, n);
        let a_mean = a[..n].iter().sum::<f64>() / n as f64;
        let b_mean = b[..n].iter().sum::<f64>() / n as f64;
        let rel = |v: f64| {
            if a_mean != 0.0 {
                100.0 * v / a_mean
            } else {
                f64::NAN
            }
        };
        Some(PairedStat {
            pairs: n,
            a_mean,
            b_mean,
            mean,
            ci95: [low, high],
            relative_percent: rel(mean),
            relative_ci95_percent: [rel(low), rel(high)],
            significant: low > 0.0 || high < 0.0,
        })
    }

    /// "lower" / "higher" when the interval excludes zero, else None.
    pub fn direction(&self) -> Option<&'static str> {
        if !self.significant {
            None
        } else if self.mean < 0.0 {
            Some("lower")
        } else {
            Some("higher")
        }
    }
}

/// Arm `b` against arm `a` on every metric both measured in two pairs or
/// more.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// Baseline arm.
    pub a: String,
    /// Compared arm.
    pub b: String,
    /// Completed pairs compared: those where neither run is left out.
    pub pairs: usize,
    /// Pairs left out (indices into the arms' runs): a run of the pair
    /// completed no transaction ([`super::LEFT_OUT`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub left_out_pairs: Vec<usize>,
    /// Per metric.
    pub difference_b_minus_a: BTreeMap<String, PairedStat>,
}

impl Comparison {
    /// The comparison of `b` against `a`; None when no metric has two
    /// pairs (an interrupted or one-run experiment). A pair with a run
    /// left out ([`super::LEFT_OUT`]) is left out of every metric.
    pub fn of(a: &Arm, b: &Arm) -> Option<Self> {
        let mut metrics = BTreeMap::new();
        let mut left_out_pairs = Vec::new();
        let mut kept = Vec::new();
        for (i, (x, y)) in a.runs.iter().zip(&b.runs).enumerate() {
            if x.left_out() || y.left_out() {
                left_out_pairs.push(i);
            } else {
                kept.push((x, y));
            }
        }
        for m in METRICS {
            let (xa, xb): (Vec<f64>, Vec<f64>) = kept
                .iter()
                .filter_map(|(x, y)| Some((x.get(m.key)?, y.get(m.key)?)))
                .unzip();
            if let Some(s) = PairedStat::of(&xa, &xb) {
                metrics.insert(m.key.to_string(), s);
            }
        }
        (!metrics.is_empty()).then(|| Comparison {
            a: a.name.clone(),
            b: b.name.clone(),
            pairs: kept.len(),
            left_out_pairs,
            difference_b_minus_a: metrics,
        })
    }

    /// The stat of `metric`, if compared.
    pub fn get(&self, metric: &str) -> Option<&PairedStat> {
        self.difference_b_minus_a.get(metric)
    }
}

/// The comparisons of `pairs` (indices into `arms`), skipping those
/// without two completed pairs.
pub fn compare_all(arms: &[Arm], pairs: &[(usize, usize)]) -> Vec<Comparison> {
    pairs
        .iter()
        .filter_map(|&(a, b)| Comparison::of(&arms[a], &arms[b]))
        .collect()
}

/// "B's p50 is 12.3 us lower than A's (95% CI [-20.1, -4.5])" when the
/// interval excludes zero, else "no difference shown (95% CI [...])".
pub fn describe(stat: &PairedStat, unit: &str) -> String {
    let ci = format!(
        "95% CI [{}, {}]{unit}",
        super::report::num(stat.ci95[0]),
        super::report::num(stat.ci95[1])
    );
    match stat.direction() {
        Some(dir) => format!(
            "{}{unit} {dir}{} ({ci}, {} pairs)",
            super::report::num(stat.mean.abs()),
            if stat.relative_percent.is_finite() {
                format!(", {:+.1}%", stat.relative_percent)
            } else {
                String::new()
            },
            stat.pairs
        ),
        None => format!(
            "no difference shown: {}{unit} ({ci} includes 0, {} pairs)",
            super::report::num(stat.mean),
            stat.pairs
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_recomputes_by_hand() {
        // Differences 2, 3, 4: mean 3, sd 1, t95(2) = 4.3027.
        let s = PairedStat::of(&[10.0, 10.0, 10.0], &[12.0, 13.0, 14.0]).unwrap();
        assert_eq!(s.mean, 3.0);
        let half = 4.302_652_730 / 3f64.sqrt();
        assert!((s.ci95[0] - (3.0 - half)).abs() < 1e-8);
        assert!((s.ci95[1] - (3.0 + half)).abs() < 1e-8);
        assert!(s.significant);
        assert_eq!(s.direction(), Some("higher"));
        // One pair: no interval at all.
        assert!(PairedStat::of(&[1.0], &[2.0]).is_none());
        // An interval across zero says so.
        let s = PairedStat::of(&[10.0, 10.0], &[9.0, 12.0]).unwrap();
        assert!(!s.significant);
        assert!(describe(&s, " us").starts_with("no difference shown"));
    }
}
