//! The result as data (`Report`, serialized for `--json`) and as text. Both are rendered from the
//! same rounded numbers, so the text and the JSON never disagree. Owns no measurement.
#![forbid(unsafe_code)]

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::engine::RunResult;
use crate::stats::{ErrorCounts, LatencySummary, PERCENTILES, round1, round2, summarize};

/// A thread busier than this (percent of its wall time on CPU) is reported as saturated:
/// the generator, not the server, may be what limits the rate.
pub const SATURATED_CPU_PCT: f64 = 95.0;

/// What was asked for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Setup {
    pub url: String,
    pub threads: usize,
    pub connections: usize,
    pub connections_per_thread: Vec<usize>,
    pub pipeline: usize,
    /// Total req/s asked with `--rate`; None: closed loop (as fast as answers come).
    pub rate: Option<f64>,
    pub duration_s: Option<f64>,
    pub requests: Option<u64>,
    pub warmup_s: f64,
    pub timeout_s: f64,
    pub reconnect: Option<u64>,
    /// CPUs the threads are pinned to, round-robin; empty: not pinned.
    pub cpus: Vec<usize>,
    pub engine: String,
    /// `--spin` in seconds (0: block as soon as there is nothing to do).
    pub spin_s: f64,
    /// https: how the server's certificate is checked; None for http.
    #[serde(default)]
    pub tls: Option<String>,
}

/// https: connection setup, apart from request latency.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TlsReport {
    /// Handshakes completed (full and resumed).
    pub handshakes: u64,
    /// Of those, abbreviated handshakes that resumed an earlier session.
    pub resumed: u64,
    pub handshakes_per_s: f64,
    /// Mean time from `connect()` to handshake done, microseconds.
    pub setup_mean_us: f64,
}

/// One measured run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// Complete responses, any status.
    pub responses: u64,
    /// Requests that got no response (see `errors`).
    pub failed: u64,
    /// Response bytes received; for https, decrypted bytes (what HTTP saw).
    pub bytes_read: u64,
    pub connects: u64,
    pub elapsed_s: f64,
    pub req_per_s: f64,
    /// Achieved rate as a percentage of `--rate`.
    pub rate_achieved_pct: Option<f64>,
    pub errors: ErrorCounts,
    /// From the intended send time with `--rate`, else from the actual send.
    pub latency: LatencySummary,
    /// With `--rate`: from the actual send time (what wrk reports before its correction).
    pub latency_uncorrected: Option<LatencySummary>,
    /// Generator CPU time (all threads, user + system, less `--spin` empty polls) per
    /// response, microseconds.
    pub cpu_us_per_request: f64,
    /// Seconds the threads spent in `--spin` polls that found nothing.
    pub spin_s: f64,
    pub thread_cpu_pct: Vec<f64>,
    /// Threads busier than `SATURATED_CPU_PCT`.
    pub saturated_threads: Vec<usize>,
    /// https only.
    #[serde(default)]
    pub tls: Option<TlsReport>,
}

/// Median over `--runs`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Median {
    pub runs: usize,
    pub req_per_s: f64,
    pub min_req_per_s: f64,
    pub max_req_per_s: f64,
    pub p99_us: u64,
    pub cpu_us_per_request: f64,
}

/// The whole result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub setup: Setup,
    pub runs: Vec<RunReport>,
    pub median: Median,
}

pub fn setup(cfg: &Config) -> Setup {
    Setup {
        url: cfg.target.url.clone(),
        threads: cfg.threads,
        connections: cfg.connections,
        connections_per_thread: (0..cfg.threads).map(|t| cfg.connections_of(t)).collect(),
        pipeline: cfg.pipeline,
        rate: cfg.rate,
        duration_s: cfg.duration.map(|d| d.as_secs_f64()),
        requests: cfg.requests,
        warmup_s: cfg.warmup.as_secs_f64(),
        timeout_s: cfg.timeout.as_secs_f64(),
        reconnect: cfg.reconnect,
        cpus: cfg.cpus.clone(),
        engine: "epoll".to_string(),
        spin_s: cfg.spin.as_secs_f64(),
        tls: cfg.tls.as_ref().map(|t| t.verify.to_string()),
    }
}

pub fn run_report(cfg: &Config, r: &RunResult) -> RunReport {
    let m = &r.merged;
    let secs = m.elapsed_ns as f64 / 1e9;
    let req_per_s = if secs > 0.0 {
        round2(m.responses as f64 / secs)
    } else {
        0.0
    };
    let cpu_ns: u64 = m.threads.iter().map(|t| t.0).sum();
    let thread_cpu_pct: Vec<f64> = m
        .threads
        .iter()
        .map(|&(cpu, wall)| {
            if wall > 0 {
                round1(cpu as f64 * 100.0 / wall as f64)
            } else {
                0.0
            }
        })
        .collect();
    RunReport {
        responses: m.responses,
        failed: m.failed,
        bytes_read: m.bytes_read,
        connects: m.connects,
        elapsed_s: (secs * 1000.0).round() / 1000.0,
        req_per_s,
        rate_achieved_pct: cfg.rate.map(|asked| round2(req_per_s * 100.0 / asked)),
        errors: m.errors,
        latency: summarize(&m.latency),
        latency_uncorrected: m.latency_uncorrected.as_ref().map(summarize),
        cpu_us_per_request: if m.responses > 0 {
            (cpu_ns as f64 / m.responses as f64).round() / 1000.0
        } else {
            0.0
        },
        spin_s: (m.spin_ns as f64 / 1e6).round() / 1000.0,
        saturated_threads: thread_cpu_pct
            .iter()
            .enumerate()
            .filter(|(_, p)| **p > SATURATED_CPU_PCT)
            .map(|(i, _)| i)
            .collect(),
        thread_cpu_pct,
        tls: cfg.tls.is_some().then(|| TlsReport {
            handshakes: m.tls.handshakes,
            resumed: m.tls.resumed,
            handshakes_per_s: if secs > 0.0 {
                round2(m.tls.handshakes as f64 / secs)
            } else {
                0.0
            },
            setup_mean_us: if m.tls.handshakes > 0 {
                round1(m.tls.setup_ns as f64 / m.tls.handshakes as f64 / 1000.0)
            } else {
                0.0
            },
        }),
    }
}

/// The middle value; the mean of the two middle values for an even count.
fn median_f64(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub fn median(runs: &[RunReport]) -> Median {
    let rps: Vec<f64> = runs.iter().map(|r| r.req_per_s).collect();
    Median {
        runs: runs.len(),
        req_per_s: round2(median_f64(rps.clone())),
        min_req_per_s: rps.iter().copied().fold(f64::INFINITY, f64::min),
        max_req_per_s: rps.iter().copied().fold(0.0, f64::max),
        p99_us: median_f64(runs.iter().map(|r| r.latency.p99_us as f64).collect()).round() as u64,
        cpu_us_per_request: (median_f64(runs.iter().map(|r| r.cpu_us_per_request).collect())
            * 1000.0)
            .round()
            / 1000.0,
    }
}

pub fn header_text(s: &Setup) -> String {
    let plural = |n: usize, w: &str| {
        if n == 1 {
            format!("{n} {w}")
        } else {
            format!("{n} {w}s")
        }
    };
    let per = if s
        .connections_per_thread
        .iter()
        .all(|c| *c == s.connections_per_thread[0])
    {
        format!("{} per thread", s.connections_per_thread[0])
    } else {
        format!(
            "{} per thread",
            s.connections_per_thread
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join("/")
        )
    };
    let rate = match s.rate {
        Some(r) => format!("rate {r} req/s (latency from intended send)"),
        None => "rate unlimited (closed loop)".to_string(),
    };
    let pin = if s.cpus.is_empty() {
        "not pinned".to_string()
    } else {
        format!(
            "pinned to CPU {}",
            s.cpus
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    let stop = match (s.duration_s, s.requests) {
        (Some(d), Some(n)) => format!("{d}s or {n} requests"),
        (Some(d), None) => format!("{d}s"),
        (None, Some(n)) => format!("{n} requests"),
        (None, None) => "until stopped".to_string(),
    };
    let mut out = format!(
        "linerate load {}\n  {}, {} ({per}), pipeline {}, {rate}, {pin}\n  {stop}, warm-up {}s, timeout {}s",
        s.url,
        plural(s.threads, "thread"),
        plural(s.connections, "connection"),
        s.pipeline,
        s.warmup_s,
        s.timeout_s
    );
    if let Some(n) = s.reconnect {
        let _ = write!(out, ", reconnect every {n} requests");
    }
    if s.spin_s > 0.0 {
        let _ = write!(out, ", spin {}s", s.spin_s);
    }
    if let Some(t) = &s.tls {
        let _ = write!(out, ", https: {t}");
    }
    let _ = writeln!(out, ", engine {}", s.engine);
    out
}

fn latency_line(out: &mut String, label: &str, l: &LatencySummary, table: bool) {
    let _ = writeln!(
        out,
        "  {label:<28} mean {}us  stdev {}us  p50 {}us  p99 {}us  max {}us",
        l.mean_us, l.stdev_us, l.p50_us, l.p99_us, l.max_us
    );
    if table {
        for ((name, _), v) in PERCENTILES.iter().zip(l.percentiles()) {
            let _ = writeln!(out, "    {name:>7} {v}us");
        }
    }
}

pub fn run_text(r: &RunReport, index: usize, total: usize, table: bool) -> String {
    let mut out = String::new();
    if total > 1 {
        let _ = writeln!(out, "run {}/{total}:", index + 1);
    }
    match &r.latency_uncorrected {
        Some(u) => {
            latency_line(&mut out, "Latency (from intended send)", &r.latency, table);
            latency_line(&mut out, "Latency (uncorrected)", u, table);
        }
        None => latency_line(&mut out, "Latency", &r.latency, table),
    }
    let _ = writeln!(
        out,
        "  {} responses in {}s, {} failed, {} bytes read, {} connections opened",
        r.responses, r.elapsed_s, r.failed, r.bytes_read, r.connects
    );
    let _ = writeln!(out, "  Requests/sec: {}", r.req_per_s);
    if let Some(t) = &r.tls {
        let _ = writeln!(
            out,
            "  TLS: {} handshakes ({} resumed), {} handshakes/s, setup mean {}us (connect + handshake)",
            t.handshakes, t.resumed, t.handshakes_per_s, t.setup_mean_us
        );
    }
    if let Some(p) = r.rate_achieved_pct {
        let _ = writeln!(out, "  Achieved {p}% of the asked rate");
    }
    let e = &r.errors;
    if e.total() == 0 {
        let _ = writeln!(out, "  Errors: none");
    } else {
        let _ = writeln!(
            out,
            "  Errors: connect {}, read {}, write {}, timeout {}, status {}, malformed {}{}",
            e.connect,
            e.read,
            e.write,
            e.timeout,
            e.status,
            e.malformed,
            if e.tls > 0 {
                format!(", tls {}", e.tls)
            } else {
                String::new()
            }
        );
    }
    let busy: Vec<String> = r.thread_cpu_pct.iter().map(|p| format!("{p}%")).collect();
    let spun = if r.spin_s > 0.0 {
        format!(" (plus {}s of empty --spin polls, left out)", r.spin_s)
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "  Generator CPU: {}us/request; threads busy {}{spun}",
        r.cpu_us_per_request,
        busy.join(" ")
    );
    for t in &r.saturated_threads {
        let _ = writeln!(
            out,
            "  Warning: thread {t} was {}% busy: the generator itself may be the bottleneck",
            r.thread_cpu_pct[*t]
        );
    }
    out
}

pub fn median_text(m: &Median) -> String {
    format!(
        "median of {} runs: {} req/s (min {}, max {}), p99 {}us, {}us CPU/request\n",
        m.runs, m.req_per_s, m.min_req_per_s, m.max_req_per_s, m.p99_us, m.cpu_us_per_request
    )
}

/// The full text form of a report.
pub fn text(r: &Report, table: bool) -> String {
    let mut out = header_text(&r.setup);
    for (i, run) in r.runs.iter().enumerate() {
        out.push_str(&run_text(run, i, r.runs.len(), table));
    }
    if r.runs.len() > 1 {
        out.push_str(&median_text(&r.median));
    }
    out
}
