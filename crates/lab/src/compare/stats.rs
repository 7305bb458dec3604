//! The samples a comparison collects, and how they become one row per server: medians, min–max
//! and ratios to the baseline.
//!
//! Pure functions over plain data, so the arithmetic is tested on synthetic inputs. Ratios are
//! taken between medians measured in the same interleaved run, never across runs.

use linerate_load::stats::{LatencySummary, PERCENTILES};
use serde::{Deserialize, Serialize};

/// One (round, workload, server) measurement.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Sample {
    pub server: String,
    pub workload: String,
    pub round: usize,
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// A sample either measured or failed (server did not start, crashed, load failed).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum Outcome {
    Ok(Box<Measured>),
    Failed { error: String },
}

/// What a measured sample saw.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Measured {
    pub generator: String,
    pub requests: u64,
    pub req_per_s: f64,
    pub errors: u64,
    pub elapsed_s: f64,
    /// Busy seconds of the server's CPUs during the measured run (incl. irq, softirq).
    pub cpu_busy_s: f64,
    /// Busy fraction of the server's CPUs during the run.
    pub cpu_busy_frac: f64,
    /// Fraction of the server CPUs' time stolen by the hypervisor (host noise; not counted).
    #[serde(default)]
    pub steal_frac: f64,
    /// utime+stime of the server's processes during the run.
    pub proc_cpu_s: f64,
    /// Server-CPU busy µs per request: the comparison's cost figure.
    pub cost_us: f64,
    /// The server processes' own µs per request.
    pub proc_cost_us: f64,
    /// Resident memory of the server's processes after the run.
    pub rss_bytes: u64,
    /// Latency at `latency_rate` (corrected for coordinated omission), when measured.
    pub latency: Option<LatencySummary>,
    pub latency_rate: Option<f64>,
    /// TLS workloads on a host with `/proc/net/tls_stat`: sessions the kernel keyed during the
    /// measured run (`TlsTxSw`, `TlsRxSw` deltas), i.e. connections that ran on kTLS.
    #[serde(default)]
    pub ktls_sessions: Option<(u64, u64)>,
}

impl Measured {
    /// Fills the derived figures from the raw ones.
    pub fn derive(mut self) -> Measured {
        let per_req = |secs: f64| {
            if self.requests > 0 {
                secs * 1e6 / self.requests as f64
            } else {
                f64::NAN
            }
        };
        self.cost_us = per_req(self.cpu_busy_s);
        self.proc_cost_us = per_req(self.proc_cpu_s);
        self
    }

    /// The server processes' share of their CPUs' busy time (near 1 on a quiet machine). Not
    /// capped: the two come from different kernel clocks and the ratio can pass 1 (the report
    /// marks that and says why; see `report::share_cell`).
    pub fn share(&self) -> f64 {
        if self.cpu_busy_s > 0.0 {
            self.proc_cpu_s / self.cpu_busy_s
        } else {
            f64::NAN
        }
    }
}

/// Median and range of a figure over rounds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// `None` for no finite values; the median of an even count is the mean of the middle two.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Spread> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[n - 1],
        })
    }
}

/// One server's row for one workload.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Row {
    pub server: String,
    pub samples: usize,
    pub failures: Vec<String>,
    pub req_per_s: Option<Spread>,
    pub cost_us: Option<Spread>,
    pub proc_cost_us: Option<Spread>,
    pub share: Option<Spread>,
    #[serde(default)]
    pub steal: Option<Spread>,
    pub rss_bytes: Option<Spread>,
    pub errors: u64,
    /// Median of each latency percentile (µs) over the samples, in `PERCENTILES` order,
    /// then the median max.
    pub latency_us: Option<Vec<f64>>,
    pub latency_rate: Option<f64>,
    /// req/s median ÷ the baseline's.
    pub req_ratio: Option<f64>,
    /// Cost median ÷ the baseline's.
    pub cost_ratio: Option<f64>,
    /// Cost ÷ the baseline's cost in the same round, over the rounds where both measured:
    /// each pair ran back to back, so slow drift of the host cancels within a pair.
    #[serde(default)]
    pub cost_ratio_paired: Option<Spread>,
    /// kTLS sessions (TX, RX) summed over the samples, where the host reports them.
    #[serde(default)]
    pub ktls_sessions: Option<(u64, u64)>,
}

/// Labels of `Row::latency_us`.
pub fn latency_labels() -> Vec<&'static str> {
    PERCENTILES.iter().map(|(l, _)| *l).chain(["max"]).collect()
}

/// Rows for one workload, in `servers` order, with ratios to `baseline` when it measured.
pub fn summarize(
    samples: &[Sample],
    workload: &str,
    servers: &[String],
    baseline: Option<&str>,
) -> Vec<Row> {
    let mut rows: Vec<Row> = servers
        .iter()
        .filter_map(|name| {
            let mine: Vec<&Sample> = samples
                .iter()
                .filter(|s| s.workload == workload && &s.server == name)
                .collect();
            if mine.is_empty() {
                return None;
            }
            let ok: Vec<&Measured> = mine
                .iter()
                .filter_map(|s| match &s.outcome {
                    Outcome::Ok(m) => Some(&**m),
                    Outcome::Failed { .. } => None,
                })
                .collect();
            let failures = mine
                .iter()
                .filter_map(|s| match &s.outcome {
                    Outcome::Failed { error } => Some(format!("round {}: {error}", s.round)),
                    Outcome::Ok(_) => None,
                })
                .collect();
            let lat: Vec<&LatencySummary> = ok.iter().filter_map(|m| m.latency.as_ref()).collect();
            let latency_us = (!lat.is_empty()).then(|| {
                let mut cols: Vec<f64> = (0..PERCENTILES.len())
                    .map(|i| {
                        Spread::of(lat.iter().map(|l| l.percentiles()[i] as f64))
                            .map_or(f64::NAN, |s| s.median)
                    })
                    .collect();
                cols.push(
                    Spread::of(lat.iter().map(|l| l.max_us as f64)).map_or(f64::NAN, |s| s.median),
                );
                cols
            });
            Some(Row {
                server: name.clone(),
                samples: ok.len(),
                failures,
                req_per_s: Spread::of(ok.iter().map(|m| m.req_per_s)),
                cost_us: Spread::of(ok.iter().map(|m| m.cost_us)),
                proc_cost_us: Spread::of(ok.iter().map(|m| m.proc_cost_us)),
                share: Spread::of(ok.iter().map(|m| m.share())),
                steal: Spread::of(ok.iter().map(|m| m.steal_frac)),
                rss_bytes: Spread::of(ok.iter().map(|m| m.rss_bytes as f64)),
                errors: ok.iter().map(|m| m.errors).sum(),
                latency_us,
                latency_rate: ok.iter().find_map(|m| m.latency_rate),
                req_ratio: None,
                cost_ratio: None,
                cost_ratio_paired: None,
                ktls_sessions: ok
                    .iter()
                    .filter_map(|m| m.ktls_sessions)
                    .reduce(|a, b| (a.0 + b.0, a.1 + b.1)),
            })
        })
        .collect();
    let base = baseline
        .and_then(|b| rows.iter().find(|r| r.server == b))
        .map(|r| (r.req_per_s, r.cost_us));
    if let Some((base_rps, base_cost)) = base {
        for r in &mut rows {
            r.req_ratio = ratio(r.req_per_s, base_rps);
            r.cost_ratio = ratio(r.cost_us, base_cost);
        }
    }
    if let Some(b) = baseline {
        let cost = |server: &str, round: usize| {
            samples.iter().find_map(|s| match &s.outcome {
                Outcome::Ok(m)
                    if s.workload == workload && s.server == server && s.round == round =>
                {
                    Some(m.cost_us)
                }
                _ => None,
            })
        };
        for r in &mut rows {
            let pairs = samples
                .iter()
                .filter(|s| s.workload == workload && s.server == r.server)
                .filter_map(|s| Some(cost(&r.server, s.round)? / cost(b, s.round)?));
            r.cost_ratio_paired = Spread::of(pairs);
        }
    }
    rows
}

fn ratio(a: Option<Spread>, b: Option<Spread>) -> Option<f64> {
    let (a, b) = (a?.median, b?.median);
    (b > 0.0).then(|| a / b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(server: &str, round: usize, rps: f64, busy_s: f64, requests: u64) -> Sample {
        Sample {
            server: server.into(),
            workload: "w".into(),
            round,
            outcome: Outcome::Ok(Box::new(
                Measured {
                    requests,
                    req_per_s: rps,
                    cpu_busy_s: busy_s,
                    proc_cpu_s: busy_s / 2.0,
                    ..Default::default()
                }
                .derive(),
            )),
        }
    }

    #[test]
    fn spreads() {
        assert_eq!(
            Spread::of([3.0, 1.0, 2.0]),
            Some(Spread {
                median: 2.0,
                min: 1.0,
                max: 3.0
            })
        );
        assert_eq!(Spread::of([4.0, 1.0, 2.0, 3.0]).unwrap().median, 2.5);
        assert_eq!(Spread::of([f64::NAN, 5.0]).unwrap().median, 5.0);
        assert_eq!(Spread::of([]), None);
    }

    #[test]
    fn cost_is_busy_time_per_request() {
        let Outcome::Ok(m) = ok("a", 0, 1.0, 2.0, 1_000_000).outcome else {
            unreachable!()
        };
        assert_eq!(m.cost_us, 2.0);
        assert_eq!(m.proc_cost_us, 1.0);
        assert_eq!(m.share(), 0.5);
        let zero = Measured::default().derive();
        assert!(zero.cost_us.is_nan(), "no requests: no cost, not infinity");
    }

    #[test]
    fn ratios_are_between_medians() {
        let samples = vec![
            ok("floor", 0, 100.0, 1.0, 1_000_000),
            ok("floor", 1, 120.0, 1.2, 1_000_000),
            ok("floor", 2, 110.0, 1.1, 1_000_000),
            ok("x", 0, 50.0, 3.0, 1_000_000),
            ok("x", 1, 55.0, 3.3, 1_000_000),
            ok("x", 2, 60.0, 2.0, 1_000_000),
            Sample {
                server: "x".into(),
                workload: "w".into(),
                round: 3,
                outcome: Outcome::Failed {
                    error: "crashed".into(),
                },
            },
        ];
        let servers = vec!["floor".to_string(), "x".to_string(), "absent".to_string()];
        let rows = summarize(&samples, "w", &servers, Some("floor"));
        assert_eq!(rows.len(), 2, "a server without samples has no row");
        let (f, x) = (&rows[0], &rows[1]);
        assert_eq!(f.req_ratio, Some(1.0));
        assert_eq!(x.req_per_s.unwrap().median, 55.0);
        assert_eq!(x.req_ratio, Some(55.0 / 110.0));
        // cost medians: floor 1.1 µs, x 3.0 µs
        let c = x.cost_ratio.unwrap();
        assert!((c - 3.0 / 1.1).abs() < 1e-12, "{c}");
        assert_eq!(x.samples, 3);
        assert_eq!(x.failures, vec!["round 3: crashed".to_string()]);
        // Per round: 3.0/1.0, 3.3/1.2, 2.0/1.1; the failed round 3 has no pair.
        let p = x.cost_ratio_paired.unwrap();
        assert!((p.median - 3.3 / 1.2).abs() < 1e-12, "{p:?}");
        assert!(
            (p.min - 2.0 / 1.1).abs() < 1e-12 && (p.max - 3.0).abs() < 1e-12,
            "{p:?}"
        );
        assert_eq!(f.cost_ratio_paired.unwrap().median, 1.0);
    }

    #[test]
    fn no_baseline_no_ratios() {
        let rows = summarize(
            &[ok("a", 0, 1.0, 1.0, 1)],
            "w",
            &["a".into()],
            Some("floor"),
        );
        assert_eq!((rows[0].req_ratio, rows[0].cost_ratio), (None, None));
    }
}
