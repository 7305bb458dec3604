//! The result as data (`Report`, serialized for `--json`) and as text. Both are rendered from the
//! same rounded numbers, so the text and the JSON never disagree. Owns no measurement.
//! Latencies are raw microseconds in the data (`*_us` fields) and scaled for people in the text
//! (`units::format_micros`). `verdict` is the report's last line and the run's exit status.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::engine::RunResult;
use crate::stats::{
    ErrorCounts, Interruption, LatencySummary, PERCENTILES, round1, round2, summarize,
};
use crate::units::format_micros;

/// A thread busier than this (percent of its wall time on CPU) is reported as saturated:
/// the generator, not the server, may be what limits the rate.
pub const SATURATED_CPU_PCT: f64 = 95.0;

/// What was asked for.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Setup {
    pub url: String,
    pub threads: usize,
    pub connections: usize,
    pub connections_per_thread: Vec<usize>,
    /// `HTTP/1.1`, `HTTP/2`, `HTTP/3` or `WebSocket`.
    #[serde(default = "http1")]
    pub protocol: String,
    /// WebSocket: each message, e.g. `32-byte text` (`pipeline` of them in flight).
    #[serde(default)]
    pub message: Option<String>,
    pub pipeline: usize,
    /// HTTP/2 and HTTP/3: streams in flight per connection (1 for HTTP/1.1).
    #[serde(default = "one")]
    pub streams: usize,
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
    /// `--grpc`: unary gRPC calls over HTTP/2, each answer checked.
    #[serde(default)]
    pub grpc: bool,
}

/// `--grpc`: the calls as gRPC saw them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GrpcReport {
    /// Whole length-prefixed messages received, over all answers.
    pub messages: u64,
    pub messages_per_s: f64,
    /// Calls that failed gRPC's checks (`errors.grpc`), by the first rule each broke; only
    /// the rules broken.
    pub failed: BTreeMap<String, u64>,
}

/// https: connection setup, apart from request latency.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TlsReport {
    /// The handshakes were QUIC's (`--http3`): quinn-proto does not tell whether one
    /// resumed a session, so `resumed` stays 0 and is not shown.
    #[serde(default)]
    pub quic: bool,
    /// Handshakes completed (full and resumed).
    pub handshakes: u64,
    /// Of those, abbreviated handshakes that resumed an earlier session.
    pub resumed: u64,
    pub handshakes_per_s: f64,
    /// Mean time from `connect()` to handshake done, microseconds.
    pub setup_mean_us: f64,
}

/// One measured run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
    /// Complete responses by status code (`{"200": 99000, "404": 1000}`).
    #[serde(default)]
    pub status_codes: BTreeMap<u16, u64>,
    /// The run ended before its duration passed or its requests resolved (Ctrl-C, or the
    /// target went away); the figures cover what was measured until then.
    #[serde(default)]
    pub interrupted: bool,
    /// Why, when `interrupted`.
    #[serde(default)]
    pub interrupted_by: Option<Interruption>,
    /// `--grpc` only.
    #[serde(default)]
    pub grpc: Option<GrpcReport>,
}

/// Median over `--runs`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
    /// The last run ended early (see its `interrupted_by`); no run was started after it.
    #[serde(default)]
    pub interrupted: bool,
}

/// `Setup::protocol` of an `--http3` run.
pub const HTTP3: &str = "HTTP/3";

/// `Setup::protocol` of a `--ws` run.
pub const WEBSOCKET: &str = "WebSocket";

fn http1() -> String {
    "HTTP/1.1".to_string()
}

fn one() -> usize {
    1
}

pub fn setup(cfg: &Config) -> Setup {
    Setup {
        url: cfg.target.url.clone(),
        threads: cfg.threads,
        connections: cfg.connections,
        connections_per_thread: (0..cfg.threads).map(|t| cfg.connections_of(t)).collect(),
        protocol: match (&cfg.http2, &cfg.http3, &cfg.ws) {
            (Some(_), _, _) => "HTTP/2".to_string(),
            (_, Some(_), _) => HTTP3.to_string(),
            (_, _, Some(_)) => WEBSOCKET.to_string(),
            _ => http1(),
        },
        message: cfg.ws.as_ref().map(|w| {
            let kind = if w.run.binary { "binary" } else { "text" };
            format!("{}-byte {kind}", w.run.message_len)
        }),
        pipeline: cfg.pipeline,
        streams: match (&cfg.http2, &cfg.http3) {
            (Some(h), _) => h.streams,
            (_, Some(h)) => h.streams,
            _ => 1,
        },
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
        grpc: is_grpc(cfg),
    }
}

fn is_grpc(cfg: &Config) -> bool {
    cfg.http2.as_ref().is_some_and(|h| h.grpc.is_some())
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
            quic: cfg.http3.is_some(),
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
        status_codes: m.statuses.clone(),
        grpc: is_grpc(cfg).then(|| GrpcReport {
            messages: m.grpc.messages,
            messages_per_s: if secs > 0.0 {
                round2(m.grpc.messages as f64 / secs)
            } else {
                0.0
            },
            failed: crate::h2::grpc::Fault::ALL
                .iter()
                .map(|f| (f.name().to_string(), m.grpc.faults[f.index()]))
                .filter(|(_, n)| *n > 0)
                .collect(),
        }),
        interrupted: m.interrupted.is_some(),
        interrupted_by: m.interrupted.clone(),
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
    let protocol = if s.protocol == "HTTP/2" || s.protocol == HTTP3 {
        format!(
            "{}{}, {} per connection",
            if s.grpc { "gRPC over " } else { "" },
            s.protocol,
            plural(s.streams, "stream")
        )
    } else if let Some(m) = &s.message {
        format!(
            "{}, {m} messages, {} in flight per connection",
            s.protocol, s.pipeline
        )
    } else {
        format!("{}, pipeline {}", s.protocol, s.pipeline)
    };
    let mut out = format!(
        "linerate load {}\n  {}, {} ({per}), {protocol}, {rate}, {pin}\n  {stop}, warm-up {}s, timeout {}s",
        s.url,
        plural(s.threads, "thread"),
        plural(s.connections, "connection"),
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
        "  {label:<28} mean {}  stdev {}  p50 {}  p99 {}  max {}",
        format_micros(l.mean_us),
        format_micros(l.stdev_us),
        format_micros(l.p50_us as f64),
        format_micros(l.p99_us as f64),
        format_micros(l.max_us as f64)
    );
    if table {
        for ((name, _), v) in PERCENTILES.iter().zip(l.percentiles()) {
            let _ = writeln!(out, "    {name:>7} {}", format_micros(v as f64));
        }
    }
}

/// `200: 99000, 404: 1000`; `none` when no response was complete.
pub fn status_codes_text(codes: &BTreeMap<u16, u64>) -> String {
    if codes.is_empty() {
        return "none".into();
    }
    codes
        .iter()
        .map(|(c, n)| format!("{c}: {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a run's text calls its answers: HTTP's responses to requests, or WebSocket's echoes
/// of messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nouns {
    /// `responses` or `echoes`.
    pub answers: &'static str,
    /// `request` or `message`.
    pub ask: &'static str,
    /// `Requests/sec` or `Messages/sec`.
    pub per_sec: &'static str,
    /// `req/s` or `msg/s`.
    pub unit: &'static str,
}

impl Nouns {
    pub fn of(s: &Setup) -> Nouns {
        if s.protocol == WEBSOCKET {
            Nouns {
                answers: "echoes",
                ask: "message",
                per_sec: "Messages/sec",
                unit: "msg/s",
            }
        } else {
            Nouns {
                answers: "responses",
                ask: "request",
                per_sec: "Requests/sec",
                unit: "req/s",
            }
        }
    }
}

pub fn run_text(r: &RunReport, index: usize, total: usize, table: bool, n: Nouns) -> String {
    let mut out = String::new();
    if total > 1 {
        let _ = writeln!(out, "run {}/{total}:", index + 1);
    }
    if let Some(why) = &r.interrupted_by {
        let _ = writeln!(
            out,
            "  Interrupted after {}s: {why}; what was measured until then follows",
            r.elapsed_s
        );
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
        "  {} {} in {}s ({} not 2xx/3xx), {} {}s unanswered, {} bytes read, {} connections opened",
        r.responses,
        n.answers,
        r.elapsed_s,
        r.errors.status,
        r.failed,
        n.ask,
        r.bytes_read,
        r.connects
    );
    let _ = writeln!(
        out,
        "  Status codes: {}",
        status_codes_text(&r.status_codes)
    );
    let _ = writeln!(out, "  {}: {}", n.per_sec, r.req_per_s);
    if let Some(g) = &r.grpc {
        let failed = if g.failed.is_empty() {
            "every 2xx/3xx answer passed gRPC's checks".to_string()
        } else {
            let by: Vec<String> = g.failed.iter().map(|(k, n)| format!("{k}: {n}")).collect();
            format!(
                "{} calls failed gRPC's checks ({})",
                r.errors.grpc,
                by.join(", ")
            )
        };
        let _ = writeln!(
            out,
            "  gRPC: {} messages received ({}/s); {failed}",
            g.messages, g.messages_per_s
        );
    }
    if let Some(t) = r.tls.as_ref().filter(|t| t.quic) {
        let _ = writeln!(
            out,
            "  TLS: {} QUIC handshakes, {} handshakes/s, setup mean {} (first datagram + handshake)",
            t.handshakes,
            t.handshakes_per_s,
            format_micros(t.setup_mean_us)
        );
    } else if let Some(t) = &r.tls {
        let _ = writeln!(
            out,
            "  TLS: {} handshakes ({} resumed), {} handshakes/s, setup mean {} (connect + handshake)",
            t.handshakes,
            t.resumed,
            t.handshakes_per_s,
            format_micros(t.setup_mean_us)
        );
    }
    if let Some(p) = r.rate_achieved_pct {
        let _ = writeln!(out, "  Achieved {p}% of the asked rate");
    }
    let e = &r.errors;
    if e.total() == 0 && !r.interrupted {
        let _ = writeln!(out, "  Errors: none");
    } else {
        // An interrupted run always shows its socket errors, zeros included, as wrk does.
        let shown_if = |n: u64, name: &str| {
            if n > 0 {
                format!(", {name} {n}")
            } else {
                String::new()
            }
        };
        let _ = writeln!(
            out,
            "  Errors: connect {}, read {}, write {}, timeout {}, status {}, malformed {}{}{}{}",
            e.connect,
            e.read,
            e.write,
            e.timeout,
            e.status,
            e.malformed,
            shown_if(e.tls, "tls"),
            shown_if(e.reset, "reset"),
            shown_if(e.grpc, "grpc")
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
        "  Generator CPU: {}µs/{}; threads busy {}{spun}",
        r.cpu_us_per_request,
        n.ask,
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

pub fn median_text(m: &Median, n: Nouns) -> String {
    format!(
        "median of {} runs: {} {} (min {}, max {}), p99 {}, {}µs CPU/{}\n",
        m.runs,
        m.req_per_s,
        n.unit,
        m.min_req_per_s,
        m.max_req_per_s,
        format_micros(m.p99_us as f64),
        m.cpu_us_per_request,
        n.ask
    )
}

/// How a run ends: the report's last line and the exit status it earns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// `Result: ...`, one line.
    pub line: String,
    /// 0: measured in full, every response 2xx/3xx (or accepted); 1: not all answered well, no
    /// answer at all, or the target went away; 130 (128 + SIGINT): stopped by Ctrl-C alone.
    pub exit: u8,
}

/// The verdict on `r`: responses other than 2xx/3xx, and `--grpc` calls that failed gRPC's
/// checks, fail the run unless `allow_status_errors`; so do a run with no response at all and a target that went away; a Ctrl-C is reported as
/// such (exit 130), the figures still printed.
pub fn verdict(r: &Report, allow_status_errors: bool) -> Verdict {
    let responses: u64 = r.runs.iter().map(|x| x.responses).sum();
    let bad: u64 = r.runs.iter().map(|x| x.errors.status).sum();
    let bad_grpc: u64 = r.runs.iter().map(|x| x.errors.grpc).sum();
    let socket: u64 = r
        .runs
        .iter()
        .map(|x| x.errors.total() - x.errors.answers())
        .sum();
    let mut codes: BTreeMap<u16, u64> = BTreeMap::new();
    for run in &r.runs {
        for (c, n) in &run.status_codes {
            *codes.entry(*c).or_default() += n;
        }
    }
    codes.retain(|c, _| !(200..400).contains(c));
    let why = r.runs.last().and_then(|x| x.interrupted_by.as_ref());
    let bad_status = responses > 0 && bad + bad_grpc > 0 && !allow_status_errors;
    let exit = if responses == 0 || bad_status || matches!(why, Some(Interruption::TargetLost(_))) {
        1
    } else if why.is_some() {
        130
    } else {
        0
    };
    let mut problems = Vec::new();
    if let Some(why) = why {
        // Alone, a Ctrl-C is the headline (INTERRUPTED); beside a failure it is one reason.
        let lead = if exit == 130 { "" } else { "interrupted, " };
        problems.push(format!(
            "{lead}{why}; the figures above cover what was measured until then"
        ));
    }
    if responses == 0 {
        problems.push("no request was answered".into());
    }
    if bad_status && bad > 0 {
        problems.push(format!(
            "{bad} of {responses} responses were not 2xx/3xx ({}); --allow-status-errors accepts them",
            status_codes_text(&codes)
        ));
    }
    if bad_status && bad_grpc > 0 {
        problems.push(format!(
            "{bad_grpc} of {responses} gRPC calls failed gRPC's checks ({}); \
             --allow-status-errors accepts them",
            grpc_failed_text(&r.runs)
        ));
    }
    let socket_note = if socket > 0 {
        format!("; {socket} socket errors (see Errors)")
    } else {
        String::new()
    };
    let line = if problems.is_empty() {
        let accepted = if bad > 0 || bad_grpc > 0 {
            let mut parts = Vec::new();
            if bad > 0 {
                parts.push(format!(
                    "{bad} of {responses} responses not 2xx/3xx ({})",
                    status_codes_text(&codes)
                ));
            }
            if bad_grpc > 0 {
                parts.push(format!(
                    "{bad_grpc} of {responses} gRPC calls failed gRPC's checks ({})",
                    grpc_failed_text(&r.runs)
                ));
            }
            format!("{}, accepted by --allow-status-errors", parts.join(", "))
        } else {
            if r.setup.grpc {
                format!("all {responses} gRPC calls OK (HTTP 200, grpc-status 0)")
            } else if r.setup.protocol == WEBSOCKET {
                format!("all {responses} messages echoed")
            } else {
                format!("all {responses} responses 2xx/3xx")
            }
        };
        format!("Result: ok: {accepted}{socket_note}")
    } else {
        let word = if exit == 130 { "INTERRUPTED" } else { "FAILED" };
        format!(
            "Result: {word}: {}{socket_note} (exit {exit})",
            problems.join("; ")
        )
    };
    Verdict { line, exit }
}

/// The rules `--grpc` calls broke, over all runs: `grpc-status not 0: 100, …`.
fn grpc_failed_text(runs: &[RunReport]) -> String {
    let mut by: BTreeMap<&str, u64> = BTreeMap::new();
    for g in runs.iter().filter_map(|r| r.grpc.as_ref()) {
        for (k, n) in &g.failed {
            *by.entry(k).or_default() += n;
        }
    }
    let parts: Vec<String> = by.iter().map(|(k, n)| format!("{k}: {n}")).collect();
    parts.join(", ")
}

/// The full text form of a report.
pub fn text(r: &Report, table: bool) -> String {
    let mut out = header_text(&r.setup);
    for (i, run) in r.runs.iter().enumerate() {
        out.push_str(&run_text(run, i, r.runs.len(), table, Nouns::of(&r.setup)));
    }
    if r.runs.len() > 1 {
        out.push_str(&median_text(&r.median, Nouns::of(&r.setup)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(codes: &[(u16, u64)], failed: u64, why: Option<Interruption>) -> RunReport {
        let status_codes: BTreeMap<u16, u64> = codes.iter().copied().collect();
        RunReport {
            responses: status_codes.values().sum(),
            failed,
            errors: ErrorCounts {
                status: status_codes
                    .iter()
                    .filter(|(c, _)| !(200..400).contains(*c))
                    .map(|(_, n)| n)
                    .sum(),
                read: failed,
                ..ErrorCounts::default()
            },
            status_codes,
            interrupted: why.is_some(),
            interrupted_by: why,
            ..RunReport::default()
        }
    }

    fn report(runs: Vec<RunReport>) -> Report {
        Report {
            setup: Setup::default(),
            median: median(&runs),
            interrupted: runs.last().is_some_and(|r| r.interrupted),
            runs,
        }
    }

    #[test]
    fn verdict_exit_status_and_line() {
        let lost = || Some(Interruption::TargetLost("cannot connect".into()));
        let stopped = || Some(Interruption::Stopped);
        #[rustfmt::skip]
        let cases: Vec<(&str, RunReport, bool, u8, &str)> = vec![
            ("all 2xx", run(&[(200, 100)], 0, None), false, 0, "Result: ok: all 100 responses 2xx/3xx"),
            ("3xx is fine", run(&[(200, 5), (304, 5)], 0, None), false, 0, "Result: ok: all 10"),
            ("all 404", run(&[(404, 100)], 0, None), false, 1,
             "Result: FAILED: 100 of 100 responses were not 2xx/3xx (404: 100); --allow-status-errors accepts them (exit 1)"),
            ("some 404", run(&[(200, 90), (404, 10)], 0, None), false, 1, "10 of 100 responses were not 2xx/3xx (404: 10)"),
            ("404 allowed", run(&[(404, 100)], 0, None), true, 0,
             "Result: ok: 100 of 100 responses not 2xx/3xx (404: 100), accepted by --allow-status-errors"),
            ("no answer", run(&[], 20, None), false, 1, "Result: FAILED: no request was answered; 20 socket errors"),
            ("target lost", run(&[(200, 50)], 3, lost()), false, 1,
             "Result: FAILED: interrupted, the target went away: cannot connect; the figures above cover what was measured until then; 3 socket errors (see Errors) (exit 1)"),
            ("ctrl-c", run(&[(200, 50)], 0, stopped()), false, 130, "Result: INTERRUPTED: stopped by Ctrl-C (SIGINT); the figures above cover what was measured until then (exit 130)"),
            ("ctrl-c and 500s", run(&[(500, 50)], 0, stopped()), false, 1, "Result: FAILED: interrupted"),
            ("ctrl-c and 500s allowed", run(&[(500, 50)], 0, stopped()), true, 130, "Result: INTERRUPTED"),
        ];
        for (name, r, allow, exit, line) in cases {
            let v = verdict(&report(vec![r]), allow);
            assert_eq!(v.exit, exit, "{name}: {}", v.line);
            assert!(
                v.line.starts_with(line) || v.line.contains(line),
                "{name}: {}",
                v.line
            );
            assert!(!v.line.contains('\n'), "{name}: one line");
        }
    }

    #[test]
    fn the_header_names_the_protocol() {
        let mut s = Setup {
            threads: 1,
            connections: 4,
            connections_per_thread: vec![4],
            protocol: "HTTP/1.1".into(),
            pipeline: 16,
            streams: 1,
            ..Setup::default()
        };
        let h1 = header_text(&s);
        assert!(
            h1.contains("4 connections (4 per thread), HTTP/1.1, pipeline 16, rate"),
            "{h1}"
        );
        (s.protocol, s.pipeline, s.streams) = ("HTTP/2".into(), 1, 16);
        let h2 = header_text(&s);
        assert!(
            h2.contains("(4 per thread), HTTP/2, 16 streams per connection, rate"),
            "{h2}"
        );
    }

    #[test]
    fn reset_streams_show_in_the_errors_line() {
        let mut r = run(&[(200, 10)], 3, None);
        r.errors.read = 0;
        r.errors.reset = 3;
        let text = run_text(&r, 0, 1, false, Nouns::of(&Setup::default()));
        assert!(text.contains("malformed 0, reset 3\n"), "{text}");
        let v = verdict(&report(vec![r]), false);
        assert!(
            v.line.ends_with("; 3 socket errors (see Errors)"),
            "{}",
            v.line
        );
    }

    #[test]
    fn run_text_scales_units_and_shows_status_codes_and_interruption() {
        let mut r = run(
            &[(200, 99_000), (404, 1000)],
            7,
            Some(Interruption::Stopped),
        );
        r.elapsed_s = 1.5;
        r.latency = LatencySummary {
            count: 100_000,
            mean_us: 812.4,
            stdev_us: 40.0,
            p50_us: 790,
            p99_us: 1500,
            max_us: 2_340_000,
            ..LatencySummary::default()
        };
        let text = run_text(&r, 0, 1, false, Nouns::of(&Setup::default()));
        for needle in [
            "Interrupted after 1.5s: stopped by Ctrl-C (SIGINT)",
            "mean 812.4µs  stdev 40µs  p50 790µs  p99 1.50ms  max 2.34s",
            "Status codes: 200: 99000, 404: 1000",
            "100000 responses in 1.5s (1000 not 2xx/3xx), 7 requests unanswered",
            "Errors: connect 0, read 7,",
        ] {
            assert!(text.contains(needle), "lacks {needle:?}:\n{text}");
        }
    }
}
