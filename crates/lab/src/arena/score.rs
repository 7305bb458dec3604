//! HttpArena's scores, as plain arithmetic on measured rows: for the paced profiles
//! (latency-*, 8gbit) its composite (scripts/latency_score.py):
//!
//! ```text
//! rateFactor = min(1, achieved / (0.95 × offered))
//! score      = 100 × rateFactor × (0.50 cpuScore + 0.25 p99Score + 0.25 meanScore)
//! cpuScore   = bestCpu / cpu                      (linear)
//! p99Score   = 1 − log10(p99 / bestP99) / 3       (0..1)
//! meanScore  = 1 − log10(mean / bestMean)         (0..1)
//! ```
//!
//! with the bests taken over the rows scored together (the servers of one run), and for the
//! others each figure as a ratio to the best server in the run. No I/O, no clocks.

/// A paced run gets full credit at this share of the offered rate (a clean run reaches about
/// 99.8%).
pub const FULL_RATE_SHARE: f64 = 0.95;
/// The weights of CPU, p99 and mean in the composite.
pub const WEIGHTS: (f64, f64, f64) = (0.50, 0.25, 0.25);
/// Decades above the best p99 that take its whole term; the mean's.
pub const P99_DECADES: f64 = 3.0;
pub const MEAN_DECADES: f64 = 1.0;

/// What one server measured on one paced profile.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Paced {
    pub offered_rps: f64,
    pub achieved_rps: f64,
    /// Server CPU per request, µs (None: not measured, scored as nothing, never as free).
    pub cpu_us: Option<f64>,
    pub mean_us: f64,
    pub p99_us: f64,
}

/// The composite and its parts.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Composite {
    pub rate_factor: f64,
    pub cpu_score: f64,
    pub p99_score: f64,
    pub mean_score: f64,
    pub score: f64,
}

fn clamp01(v: f64) -> f64 {
    v.clamp(0.0, 1.0)
}

fn decade_score(value: f64, best: f64, decades: f64) -> f64 {
    if value <= 0.0 || best <= 0.0 {
        return 0.0;
    }
    clamp01(1.0 - (value.max(best) / best).log10() / decades)
}

fn linear_score(value: Option<f64>, best: Option<f64>) -> f64 {
    match (value, best) {
        (Some(v), Some(b)) if v > 0.0 && b > 0.0 => clamp01(b / v),
        _ => 0.0,
    }
}

fn best(values: impl Iterator<Item = f64>) -> Option<f64> {
    values.filter(|v| *v > 0.0).reduce(f64::min)
}

/// Scores `rows` (one profile, the servers of one run) against each other.
pub fn composite(rows: &[Paced]) -> Vec<Composite> {
    let b_cpu = best(rows.iter().filter_map(|r| r.cpu_us));
    let b_p99 = best(rows.iter().map(|r| r.p99_us)).unwrap_or(0.0);
    let b_mean = best(rows.iter().map(|r| r.mean_us)).unwrap_or(0.0);
    rows.iter()
        .map(|r| {
            let rate_factor = clamp01(r.achieved_rps / (FULL_RATE_SHARE * r.offered_rps));
            let cpu_score = linear_score(r.cpu_us, b_cpu);
            let p99_score = decade_score(r.p99_us, b_p99, P99_DECADES);
            let mean_score = decade_score(r.mean_us, b_mean, MEAN_DECADES);
            let (wc, wp, wm) = WEIGHTS;
            Composite {
                rate_factor,
                cpu_score,
                p99_score,
                mean_score,
                score: 100.0 * rate_factor * (wc * cpu_score + wp * p99_score + wm * mean_score),
            }
        })
        .collect()
}

/// Each value over the best (largest when `higher_is_better`, else smallest) of the run.
pub fn ratios(values: &[f64], higher_is_better: bool) -> Vec<f64> {
    let pos = values.iter().copied().filter(|v| *v > 0.0);
    let best = if higher_is_better {
        pos.reduce(f64::max)
    } else {
        pos.reduce(f64::min)
    };
    values
        .iter()
        .map(|v| match best {
            Some(b) if *v > 0.0 => {
                if higher_is_better {
                    v / b
                } else {
                    b / v
                }
            }
            _ => 0.0,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(achieved: f64, cpu: f64, mean: f64, p99: f64) -> Paced {
        Paced {
            offered_rps: 10_000.0,
            achieved_rps: achieved,
            cpu_us: Some(cpu),
            mean_us: mean,
            p99_us: p99,
        }
    }

    /// latency_score.py's shapes: the best of everything at full rate scores 100; twice the
    /// best CPU halves that term; ten times the best p99 costs a third of its term; ten
    /// times the best mean costs all of it; under 95% of the rate scales the whole.
    #[test]
    fn composite_follows_latency_score_py() {
        let s = composite(&[
            row(9_980.0, 10.0, 100.0, 1000.0),
            row(9_980.0, 20.0, 1000.0, 10_000.0),
            row(4_750.0, 10.0, 100.0, 1000.0),
        ]);
        assert!((s[0].score - 100.0).abs() < 1e-9);
        assert!((s[1].cpu_score - 0.5).abs() < 1e-9);
        assert!((s[1].p99_score - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(s[1].mean_score, 0.0);
        assert!((s[1].score - 100.0 * (0.5 * 0.5 + 0.25 * 2.0 / 3.0)).abs() < 1e-9);
        assert!((s[2].rate_factor - 0.5).abs() < 1e-9);
        assert!((s[2].score - 50.0).abs() < 1e-9);
    }

    #[test]
    fn unmeasured_cpu_scores_nothing() {
        let mut r = row(9_500.0, 10.0, 100.0, 1000.0);
        r.cpu_us = None;
        let s = composite(&[r, row(9_500.0, 10.0, 100.0, 1000.0)]);
        assert_eq!(s[0].cpu_score, 0.0);
        assert_eq!(s[1].cpu_score, 1.0);
    }

    #[test]
    fn ratios_to_the_best() {
        assert_eq!(ratios(&[100.0, 50.0, 0.0], true), [1.0, 0.5, 0.0]);
        assert_eq!(ratios(&[2.0, 4.0], false), [1.0, 0.5]);
    }
}
