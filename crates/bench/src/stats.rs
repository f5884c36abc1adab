//! Sample statistics, computed exactly like the anchor's `graphs.stats` so both sides are
//! summarised the same way (median = mean of the two middle values for even counts;
//! p10/p90/p99 = the sample at index `round(q * (n - 1))` of the sorted list, with Python's
//! round-half-to-even).

use std::future::Future;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::sys;

/// Summary of wall-clock samples, in milliseconds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Stats {
    /// Number of samples.
    pub n: usize,
    /// 10th percentile.
    pub p10_ms: f64,
    /// Median.
    pub median_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Mean.
    pub mean_ms: f64,
    /// Fastest.
    pub min_ms: f64,
    /// Slowest.
    pub max_ms: f64,
    /// Process CPU time (all threads) per iteration, when measured.
    pub cpu_mean_ms: Option<f64>,
}

impl Stats {
    /// Summarises `samples` (seconds).
    pub fn of(samples: &[f64], cpu_per_iter_s: Option<f64>) -> Self {
        let mut xs = samples.to_vec();
        xs.sort_by(f64::total_cmp);
        let n = xs.len();
        if n == 0 {
            return Self::default();
        }
        let at = |q: f64| xs[((q * (n - 1) as f64).round_ties_even() as usize).min(n - 1)] * 1e3;
        let median = if n % 2 == 1 {
            xs[n / 2]
        } else {
            (xs[n / 2 - 1] + xs[n / 2]) / 2.0
        };
        Self {
            n,
            p10_ms: at(0.1),
            median_ms: median * 1e3,
            p90_ms: at(0.9),
            p99_ms: at(0.99),
            mean_ms: xs.iter().sum::<f64>() / n as f64 * 1e3,
            min_ms: xs[0] * 1e3,
            max_ms: xs[n - 1] * 1e3,
            cpu_mean_ms: cpu_per_iter_s.map(|c| c * 1e3),
        }
    }
}

/// The anchor's `reps(n)`: `max(3, int(n * scale))`.
pub fn reps(n: usize, scale: f64) -> usize {
    ((n as f64 * scale) as usize).max(3)
}

/// Runs `warmup` untimed iterations, then `n` timed ones, like the anchor's `timed_loop`:
/// each sample is the wall time of one `iteration()` (which builds its input, starts a fresh
/// run and awaits its outcome); `check` validates every outcome outside the timed region.
/// Also returns the process CPU time per timed iteration.
pub async fn timed_loop<T, F, Fut>(
    n: usize,
    warmup: usize,
    mut iteration: F,
    mut check: impl FnMut(&T) -> anyhow::Result<()>,
) -> anyhow::Result<Stats>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    for _ in 0..warmup {
        check(&iteration().await?)?;
    }
    let mut samples = Vec::with_capacity(n);
    let c0 = sys::cpu_seconds();
    for _ in 0..n {
        let t0 = Instant::now();
        let out = iteration().await?;
        samples.push(t0.elapsed().as_secs_f64());
        check(&out)?;
    }
    let cpu = (sys::cpu_seconds() - c0) / n.max(1) as f64;
    Ok(Stats::of(&samples, Some(cpu)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_anchor_definition() {
        let xs: Vec<f64> = (1..=10).map(|i| f64::from(i) / 1000.0).collect();
        let s = Stats::of(&xs, None);
        assert_eq!(s.n, 10);
        assert!((s.median_ms - 5.5).abs() < 1e-9);
        // round(0.9 * 9) = round(8.1) = 8 -> the 9th value
        assert!((s.p90_ms - 9.0).abs() < 1e-9);
        assert!((s.p10_ms - 2.0).abs() < 1e-9);
        assert!((s.min_ms - 1.0).abs() < 1e-9 && (s.max_ms - 10.0).abs() < 1e-9);
    }

    #[test]
    fn reps_has_a_floor() {
        assert_eq!(reps(1000, 0.3), 300);
        assert_eq!(reps(20, 0.01), 3);
    }
}
