//! Per-thread counters and latency histograms, and their merge at the end of a run.
//! Each worker owns one `ThreadStats` outright (no sharing, no atomics on the request path);
//! the engine merges them once the threads have joined.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use crate::h2::grpc::Fault;
use serde::Serialize;

/// Lowest latency tracked, in microseconds.
pub const LATENCY_LOW_US: u64 = 1;
/// Highest latency tracked, in microseconds (60 s); longer ones are clamped to it.
pub const LATENCY_HIGH_US: u64 = 60_000_000;
/// Significant decimal digits kept by the histograms.
pub const LATENCY_SIGFIG: u8 = 3;

/// Errors by class. A request that fails is counted once, in the class of what failed it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ErrorCounts {
    /// Connection attempts refused, reset or timed out.
    pub connect: u64,
    /// Reads that failed, or a connection closed with requests unanswered or mid-response.
    pub read: u64,
    /// Sends that failed.
    pub write: u64,
    /// Requests unanswered after `--timeout`.
    pub timeout: u64,
    /// Complete responses whose status was not 2xx or 3xx (they still count as responses).
    pub status: u64,
    /// Responses that could not be framed.
    pub malformed: u64,
    /// https: handshakes that failed (certificate refused, no common version, peer closed or
    /// too slow) and TLS records refused after the handshake.
    #[serde(default)]
    pub tls: u64,
    /// HTTP/2: requests whose stream the server reset (RST_STREAM) before the response was
    /// complete, or left unprocessed (above the last stream id of its GOAWAY).
    #[serde(default)]
    pub reset: u64,
    /// `--grpc`: complete 2xx/3xx answers that failed gRPC's checks (not HTTP 200, not
    /// application/grpc, no `grpc-status: 0`, a message cut short, or not the expected bytes);
    /// like `status`, they still count as responses.
    #[serde(default)]
    pub grpc: u64,
}

impl ErrorCounts {
    pub fn total(&self) -> u64 {
        self.connect
            + self.read
            + self.write
            + self.timeout
            + self.status
            + self.malformed
            + self.tls
            + self.reset
            + self.grpc
    }

    /// Complete responses that were not good answers: `status` and `grpc`.
    pub fn answers(&self) -> u64 {
        self.status + self.grpc
    }

    fn add(&mut self, o: &ErrorCounts) {
        self.connect += o.connect;
        self.read += o.read;
        self.write += o.write;
        self.timeout += o.timeout;
        self.status += o.status;
        self.malformed += o.malformed;
        self.tls += o.tls;
        self.reset += o.reset;
        self.grpc += o.grpc;
    }
}

/// Status codes counted one by one: a response's status is three digits (RFC 9110 §15).
pub const STATUS_SLOTS: usize = 1000;

/// Why a phase ended before its duration passed or its requests resolved. What was measured
/// until then is still reported, marked interrupted.
/// In JSON: `"stopped"`, or `{"target_lost": "cannot connect to …"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Interruption {
    /// The caller's stop flag (Ctrl-C), or another thread of the same run stopped it.
    Stopped,
    /// The target stopped accepting connections (the reason, as one line).
    TargetLost(String),
}

impl Interruption {
    /// Of two threads' reasons, the one that explains the run: a lost target over a stop.
    fn worse(a: Option<Interruption>, b: Option<Interruption>) -> Option<Interruption> {
        match (a, b) {
            (Some(t @ Interruption::TargetLost(_)), _)
            | (_, Some(t @ Interruption::TargetLost(_))) => Some(t),
            (a, b) => a.or(b),
        }
    }
}

impl std::fmt::Display for Interruption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Interruption::Stopped => f.write_str("stopped by Ctrl-C (SIGINT)"),
            Interruption::TargetLost(why) => write!(f, "the target went away: {why}"),
        }
    }
}

/// https: what connection setup cost. Counted per connection, never per request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TlsCounts {
    /// Handshakes completed.
    pub handshakes: u64,
    /// Of those, abbreviated ones that resumed an earlier session.
    pub resumed: u64,
    /// Sum over completed handshakes of the time from `connect()` to handshake done.
    pub setup_ns: u64,
}

impl TlsCounts {
    fn add(&mut self, o: &TlsCounts) {
        self.handshakes += o.handshakes;
        self.resumed += o.resumed;
        self.setup_ns += o.setup_ns;
    }
}

/// A new latency histogram with the crate's bounds.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(LATENCY_LOW_US, LATENCY_HIGH_US, LATENCY_SIGFIG)
        .expect("constant histogram bounds are valid")
}

/// Nanoseconds to whole microseconds, rounded to nearest, at least 1.
pub fn ns_to_us(ns: u64) -> u64 {
    ns.saturating_add(500).div_euclid(1000).max(LATENCY_LOW_US)
}

/// What one worker thread measured.
#[derive(Debug)]
pub struct ThreadStats {
    /// Complete responses (any status).
    pub responses: u64,
    /// Requests that got no response (their errors are in `errors`).
    pub failed: u64,
    /// Response bytes received; for https, decrypted bytes (what HTTP saw).
    pub bytes_read: u64,
    pub errors: ErrorCounts,
    /// Connections opened.
    pub connects: u64,
    pub tls: TlsCounts,
    /// Latency from the intended send time (`--rate`), else from the actual send.
    pub latency: Histogram<u64>,
    /// With `--rate`: latency from the actual send (the coordinated-omission-prone figure).
    pub latency_uncorrected: Option<Histogram<u64>>,
    /// CPU time this thread used, less `spin_ns`.
    pub cpu_ns: u64,
    /// Time spent in `--spin` polls that found nothing.
    pub spin_ns: u64,
    /// Wall time this thread ran.
    pub wall_ns: u64,
    /// From the phase start to the last response (or the deadline).
    pub elapsed_ns: u64,
    /// Complete responses by status code (index: the status).
    pub statuses: Box<[u64; STATUS_SLOTS]>,
    /// `--grpc`: what each call's messages and failures were.
    pub grpc: GrpcCounts,
    /// Set when the phase ended early.
    pub interrupted: Option<Interruption>,
}

/// `--grpc`: whole messages received, and failed calls by the rule they broke
/// (`h2::grpc::Fault::index`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GrpcCounts {
    pub messages: u64,
    pub faults: [u64; Fault::ALL.len()],
}

impl GrpcCounts {
    fn add(&mut self, o: &GrpcCounts) {
        self.messages += o.messages;
        for (a, b) in self.faults.iter_mut().zip(o.faults) {
            *a += b;
        }
    }
}

impl ThreadStats {
    pub fn new(corrected: bool) -> ThreadStats {
        ThreadStats {
            responses: 0,
            failed: 0,
            bytes_read: 0,
            errors: ErrorCounts::default(),
            connects: 0,
            tls: TlsCounts::default(),
            latency: new_histogram(),
            latency_uncorrected: corrected.then(new_histogram),
            cpu_ns: 0,
            spin_ns: 0,
            wall_ns: 0,
            elapsed_ns: 0,
            statuses: Box::new([0; STATUS_SLOTS]),
            grpc: GrpcCounts::default(),
            interrupted: None,
        }
    }

    /// Counts one complete response's status.
    pub fn count_status(&mut self, status: u16) {
        if let Some(n) = self.statuses.get_mut(usize::from(status)) {
            *n += 1;
        }
    }
}

/// All threads of one run, merged.
#[derive(Debug)]
pub struct Merged {
    pub responses: u64,
    pub failed: u64,
    pub bytes_read: u64,
    pub errors: ErrorCounts,
    pub connects: u64,
    pub tls: TlsCounts,
    pub latency: Histogram<u64>,
    pub latency_uncorrected: Option<Histogram<u64>>,
    pub elapsed_ns: u64,
    /// All threads' `spin_ns`.
    pub spin_ns: u64,
    /// Per thread: (cpu_ns, wall_ns).
    pub threads: Vec<(u64, u64)>,
    /// Complete responses by status code, only the codes seen.
    pub statuses: BTreeMap<u16, u64>,
    pub grpc: GrpcCounts,
    /// Set when any thread's phase ended early (a lost target over a stop).
    pub interrupted: Option<Interruption>,
}

/// Merges per-thread results.
pub fn merge(all: Vec<ThreadStats>) -> Merged {
    let corrected = all.iter().any(|t| t.latency_uncorrected.is_some());
    let mut m = Merged {
        responses: 0,
        failed: 0,
        bytes_read: 0,
        errors: ErrorCounts::default(),
        connects: 0,
        tls: TlsCounts::default(),
        latency: new_histogram(),
        latency_uncorrected: corrected.then(new_histogram),
        elapsed_ns: 0,
        spin_ns: 0,
        threads: Vec::with_capacity(all.len()),
        statuses: BTreeMap::new(),
        grpc: GrpcCounts::default(),
        interrupted: None,
    };
    for t in all {
        m.responses += t.responses;
        m.failed += t.failed;
        m.bytes_read += t.bytes_read;
        m.errors.add(&t.errors);
        m.connects += t.connects;
        m.tls.add(&t.tls);
        m.latency.add(&t.latency).expect("same bounds");
        if let (Some(into), Some(from)) = (
            m.latency_uncorrected.as_mut(),
            t.latency_uncorrected.as_ref(),
        ) {
            into.add(from).expect("same bounds");
        }
        m.elapsed_ns = m.elapsed_ns.max(t.elapsed_ns);
        m.spin_ns += t.spin_ns;
        m.threads.push((t.cpu_ns, t.wall_ns));
        for (code, n) in t.statuses.iter().enumerate().filter(|(_, n)| **n > 0) {
            *m.statuses.entry(code as u16).or_default() += n;
        }
        m.grpc.add(&t.grpc);
        m.interrupted = Interruption::worse(m.interrupted.take(), t.interrupted);
    }
    m
}

/// Latency summary in microseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_us: f64,
    pub stdev_us: f64,
    pub p50_us: u64,
    pub p75_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p99_9_us: u64,
    pub p99_99_us: u64,
    pub max_us: u64,
}

/// Percentiles reported, with their labels.
pub const PERCENTILES: [(&str, f64); 6] = [
    ("50%", 50.0),
    ("75%", 75.0),
    ("90%", 90.0),
    ("99%", 99.0),
    ("99.9%", 99.9),
    ("99.99%", 99.99),
];

pub fn summarize(h: &Histogram<u64>) -> LatencySummary {
    if h.is_empty() {
        return LatencySummary::default();
    }
    let q = |p: f64| h.value_at_percentile(p);
    LatencySummary {
        count: h.len(),
        mean_us: round1(h.mean()),
        stdev_us: round1(h.stdev()),
        p50_us: q(50.0),
        p75_us: q(75.0),
        p90_us: q(90.0),
        p99_us: q(99.0),
        p99_9_us: q(99.9),
        p99_99_us: q(99.99),
        max_us: h.max(),
    }
}

impl LatencySummary {
    /// The percentile values in the order of `PERCENTILES`.
    pub fn percentiles(&self) -> [u64; 6] {
        [
            self.p50_us,
            self.p75_us,
            self.p90_us,
            self.p99_us,
            self.p99_9_us,
            self.p99_99_us,
        ]
    }
}

/// One decimal, so text and JSON show the same number.
pub fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Two decimals, so text and JSON show the same number.
pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_adds_up() {
        let mut a = ThreadStats::new(false);
        let mut b = ThreadStats::new(false);
        a.responses = 3;
        b.responses = 4;
        a.errors.read = 1;
        b.errors.status = 2;
        a.latency.record(10).unwrap();
        b.latency.record(1000).unwrap();
        a.count_status(200);
        b.count_status(200);
        b.count_status(404);
        b.interrupted = Some(Interruption::Stopped);
        let m = merge(vec![a, b]);
        assert_eq!((m.responses, m.errors.total(), m.latency.len()), (7, 3, 2));
        assert_eq!(summarize(&m.latency).max_us, 1000);
        assert_eq!(m.statuses, BTreeMap::from([(200, 2), (404, 1)]));
        assert_eq!(m.interrupted, Some(Interruption::Stopped));
    }

    #[test]
    fn a_lost_target_explains_a_run_better_than_a_stop() {
        let lost = || Some(Interruption::TargetLost("refused".into()));
        for (a, b, want) in [
            (None, None, None),
            (
                Some(Interruption::Stopped),
                None,
                Some(Interruption::Stopped),
            ),
            (Some(Interruption::Stopped), lost(), lost()),
            (lost(), Some(Interruption::Stopped), lost()),
        ] {
            assert_eq!(
                Interruption::worse(a.clone(), b.clone()),
                want,
                "{a:?} {b:?}"
            );
        }
    }

    #[test]
    fn rounding_to_microseconds() {
        assert_eq!(ns_to_us(0), 1);
        assert_eq!(ns_to_us(1499), 1);
        assert_eq!(ns_to_us(1500), 2);
    }
}
