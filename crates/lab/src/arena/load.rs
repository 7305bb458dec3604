//! The arena's load: each validated profile driven by linerate's load engine in process
//! (`LoadOptions`, as `lab compare` does) in HttpArena's shape — its connections, pipeline
//! depth, h2 streams, WebSocket messages in flight, requests per connection, the paced rate
//! of the latency profiles — scaled from the CPUs HttpArena gives the profile (64, or 8) to this machine's; and the
//! server's CPU per request from /proc (utime + stime of its process, or of every process of a
//! peer's group: nginx's master and workers) over the measured run.
//!
//! Measures one server on one profile at a time; scoring across servers is [`super::score`].

use std::time::Duration;

use serde::Serialize;

use super::checks::sum_request;
use super::profiles::{Family, Profile, Wire};
use super::target::{STATIC_FILES, Target};
use crate::compare::procfs;

/// Fewest connections a scaled profile keeps.
pub const MIN_CONNECTIONS: usize = 8;
/// HTTP/2 and gRPC streams per connection (h2load's `-m`, as HttpArena's h2 shapes).
pub const H2_STREAMS: usize = 100;
/// production-stack's reads: h2 streams per connection (HttpArena's reads h2load, `-m 16`).
pub const STACK_READ_STREAMS: usize = 16;
/// production-stack's writes: h2 streams per connection (its writes h2load, `-m 8`).
pub const STACK_WRITE_STREAMS: usize = 8;
/// production-stack's writes run on this share of the reads' connections (`-c conns/8`).
pub const STACK_WRITE_SHARE: usize = 8;
/// HttpArena's production-stack-write-body.json.
pub const STACK_WRITE_BODY: &str = r#"{"name":"bench-updated","price":250,"quantity":10}"#;
/// `upload`'s body (HttpArena's upload profile sends megabytes; one MiB keeps the run short).
pub const UPLOAD_BYTES: usize = 1024 * 1024;

/// How the load is sized.
#[derive(Clone, Debug)]
pub struct Sizing {
    /// This machine's CPUs (HttpArena's counts and rates are scaled by cpus over the profile's).
    pub cpus: usize,
    /// The CPUs the load runs on, a thread each (at most [`LOAD_THREADS`]): those the servers
    /// are not pinned to, so a server never shares its CPU with the load (MEASURING.md: the
    /// server on CPU 0, the load on CPU 1). Empty: not pinned, a thread per CPU.
    pub load_cpus: Vec<usize>,
    pub duration: Duration,
    pub warmup: Duration,
    /// Every profile at this many connections instead.
    pub connections: Option<usize>,
    /// Interleaved rounds of each server per profile (the figures are their medians).
    pub rounds: usize,
}

/// One server's measurement of one profile: one round's, or (from [`summarise`]) the median
/// of its rounds, with their spread.
#[derive(Clone, Debug, Serialize)]
pub struct Measured {
    pub profile: &'static str,
    pub server: String,
    pub connections: usize,
    pub depth: usize,
    pub offered_rps: Option<f64>,
    pub rps: f64,
    pub responses: u64,
    pub failed: u64,
    /// Server CPU (user + system, all its threads) per response, µs.
    pub cpu_us_per_request: Option<f64>,
    pub mean_us: f64,
    /// Median latency, µs.
    pub p50_us: f64,
    pub p99_us: f64,
    /// Where the CPU figure was read: its own cgroup (exact) or /proc's clock ticks
    /// ([`super::target::Target::cpu_source`]).
    pub cpu_source: &'static str,
    /// Which processes the CPU figure counts where it is more than the server's own
    /// (production-stack: the edge and its cache sidecar).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_of: Option<&'static str>,
    /// Rounds measured (the figures above are their medians; `responses` and `failed` their
    /// sums).
    pub rounds: usize,
    /// req/s of the slowest and the fastest round.
    pub rps_min_max: [f64; 2],
    /// CPU µs per request of the cheapest and the dearest round.
    pub cpu_us_min_max: Option<[f64; 2]>,
    /// Rounds that failed, and the first one's why (their figures are left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub round_errors: Option<(usize, String)>,
}

/// Most load threads.
pub const LOAD_THREADS: usize = 4;

impl Sizing {
    /// The load's threads, and the CPUs they are pinned to.
    fn threads(&self) -> (usize, Vec<usize>) {
        if self.load_cpus.is_empty() {
            (self.cpus.clamp(1, LOAD_THREADS), Vec::new())
        } else {
            let cpus: Vec<usize> = self.load_cpus.iter().copied().take(LOAD_THREADS).collect();
            (cpus.len(), cpus)
        }
    }
}

/// The CPUs of `allowed` that are not `servers'`: where the load runs (empty when the servers
/// have them all).
pub fn load_cpus(allowed: &[usize], servers: &[usize]) -> Vec<usize> {
    allowed
        .iter()
        .copied()
        .filter(|c| !servers.contains(c))
        .collect()
}

/// `n` of HttpArena's connections, sized for `theirs` CPUs, on `ours`.
pub fn scale(n: usize, ours: usize, theirs: usize) -> usize {
    (n * ours / theirs).max(MIN_CONNECTIONS)
}

/// The load options of `p` against `t` (None: the server has no listener for it).
pub fn options(p: &Profile, t: &Target, s: &Sizing) -> Option<linerate_load::LoadOptions> {
    let mut o = linerate_load::LoadOptions {
        connections: s
            .connections
            .unwrap_or_else(|| scale(p.connections[0], s.cpus, p.cpus)),
        duration: Some(s.duration),
        threads: Some(s.threads().0),
        cpus: s.threads().1,
        allow_status_errors: true,
        ..linerate_load::LoadOptions::default()
    };
    o.connections = o.connections.max(o.threads.unwrap_or(1));
    if p.per_conn > 0 {
        o.reconnect = Some(p.per_conn as u64);
    }
    o.rate = p.rate.map(|r| r * s.cpus as f64 / p.cpus as f64);
    let h1 = t.h1;
    o.url = match p.wire {
        Wire::Http1 => format!("http://{h1}{}", p.path),
        Wire::Http1Tls => format!("https://{}{}", t.tls?, p.path),
        Wire::H2Tls => format!("https://{}{}", t.tls?, p.path),
        Wire::H2c => format!("http://{}{}", t.h2c?, p.path),
        Wire::H3 => format!("https://{}{}", t.tls?, p.path),
        Wire::Grpc => format!("http://{h1}{}", p.path),
        Wire::GrpcTls => format!("https://{}{}", t.tls?, p.path),
        Wire::Ws => format!("ws://{h1}{}", p.path),
    };
    o.insecure = o.url.starts_with("https://");
    match p.wire {
        Wire::Http1 | Wire::Http1Tls => o.pipeline = p.depth,
        Wire::H2Tls | Wire::H2c => {
            o.http2 = true;
            o.streams = H2_STREAMS;
        }
        Wire::H3 => {
            o.http3 = true;
            o.streams = H2_STREAMS;
        }
        Wire::Grpc | Wire::GrpcTls => {
            o.grpc = true;
            o.streams = H2_STREAMS;
            o.body = Some(String::from_utf8(sum_request(13, 42)).expect("ASCII bytes"));
            // SumReply{result: 55}.
            o.expect_body = Some("00 00000002 0837".into());
        }
        Wire::Ws => {
            o.ws = true;
            o.pipeline = p.depth;
        }
    }
    if p.name == "upload" {
        o.body = Some("a".repeat(UPLOAD_BYTES));
        o.headers
            .push("Content-Type: application/octet-stream".into());
    }
    Some(o)
}

/// Runs `p` against `t`: a warm-up (not counted), then the measured run with the server's
/// CPU read before and after.
pub fn measure(p: &'static Profile, t: &Target, s: &Sizing) -> Result<Measured, String> {
    if p.family == Family::ProductionStack {
        return measure_stack(p, t, s);
    }
    let Some(mut o) = options(p, t, s) else {
        return Err("the server has no listener for this profile".into());
    };
    // static and static-tls rotate over HttpArena's 20 files, as its request lists do: one
    // raw request per file, dealt round-robin to the connections.
    let raw_dir = std::env::temp_dir().join(format!(
        "linerate-arena-raw-{}-{}",
        std::process::id(),
        p.name
    ));
    if matches!(p.family, Family::Static | Family::StaticTls) {
        std::fs::create_dir_all(&raw_dir).map_err(|e| format!("{}: {e}", raw_dir.display()))?;
        for f in STATIC_FILES {
            let path = raw_dir.join(format!("{}.http", f.name));
            let req = format!("GET /static/{} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", f.name);
            std::fs::write(&path, req).map_err(|e| format!("{}: {e}", path.display()))?;
            o.raw.push(path);
        }
    }
    let result = measure_with(p, t, s, &o);
    let _ = std::fs::remove_dir_all(&raw_dir);
    result
}

fn measure_with(
    p: &'static Profile,
    t: &Target,
    s: &Sizing,
    o: &linerate_load::LoadOptions,
) -> Result<Measured, String> {
    let run = |o: &linerate_load::LoadOptions| -> Result<linerate_load::Report, String> {
        let cfg = linerate_load::Config::from_options(o).map_err(|e| e.to_string())?;
        linerate_load::measure(&cfg).map_err(|e| e.to_string())
    };
    if !s.warmup.is_zero() {
        run(&linerate_load::LoadOptions {
            duration: Some(s.warmup),
            ..o.clone()
        })?;
    }
    let before = t.cpu_ns();
    let report = run(o)?;
    let after = t.cpu_ns();
    let r = report.runs.first().ok_or("the load made no run")?;
    let cpu_us_per_request = match (before, after) {
        (Some(b), Some(a)) if r.responses > 0 => {
            Some(a.saturating_sub(b) as f64 / 1e3 / r.responses as f64)
        }
        _ => None,
    };
    Ok(Measured {
        profile: p.name,
        server: t.name.clone(),
        connections: o.connections,
        depth: if o.http2 || o.http3 || o.grpc {
            o.streams
        } else {
            o.pipeline
        },
        offered_rps: o.rate,
        rps: r.req_per_s,
        responses: r.responses,
        failed: r.failed,
        cpu_us_per_request,
        mean_us: r.latency.mean_us,
        p50_us: r.latency.p50_us as f64,
        p99_us: r.latency.p99_us as f64,
        cpu_source: t.cpu_source(),
        cpu_of: None,
        rounds: 1,
        rps_min_max: [r.req_per_s; 2],
        cpu_us_min_max: cpu_us_per_request.map(|c| [c; 2]),
        round_errors: None,
    })
}

/// One row from a server's rounds on a profile: the median of each figure over the rounds
/// that measured, their req/s and CPU spread, responses and failures summed; the rounds that
/// failed counted with the first one's why. `Err` only when no round measured.
pub fn summarise(rounds: Vec<Result<Measured, String>>) -> Result<Measured, String> {
    let mut ok = Vec::new();
    let mut errors = Vec::new();
    for r in rounds {
        match r {
            Ok(m) => ok.push(m),
            Err(e) => errors.push(e),
        }
    }
    let Some(first) = ok.first() else {
        return Err(errors
            .into_iter()
            .next()
            .unwrap_or_else(|| "no round ran".into()));
    };
    let median = |f: &dyn Fn(&Measured) -> f64| -> f64 {
        let mut v: Vec<f64> = ok.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    };
    let spread = |v: Vec<f64>| -> Option<[f64; 2]> {
        let lo = v.iter().copied().reduce(f64::min)?;
        let hi = v.iter().copied().reduce(f64::max)?;
        Some([lo, hi])
    };
    let cpus: Vec<f64> = ok.iter().filter_map(|m| m.cpu_us_per_request).collect();
    // A CPU figure only where every round had one (a median of some rounds is not one).
    let cpu_all = cpus.len() == ok.len();
    Ok(Measured {
        rps: median(&|m| m.rps),
        cpu_us_per_request: cpu_all.then(|| median(&|m| m.cpu_us_per_request.unwrap_or(0.0))),
        mean_us: median(&|m| m.mean_us),
        p50_us: median(&|m| m.p50_us),
        p99_us: median(&|m| m.p99_us),
        responses: ok.iter().map(|m| m.responses).sum(),
        failed: ok.iter().map(|m| m.failed).sum(),
        rounds: ok.len(),
        rps_min_max: spread(ok.iter().map(|m| m.rps).collect()).unwrap_or([0.0; 2]),
        cpu_us_min_max: if cpu_all { spread(cpus) } else { None },
        round_errors: errors.first().map(|e| (errors.len(), e.clone())),
        ..first.clone()
    })
}

/// HttpArena's production-stack reads (requests/production-stack-reads.txt, 20,000 paths
/// in blocks of 20): 6 static files, 2 `/public/baseline` (three queries in turn), items
/// 10k+1..10k+10 of block k (ids 1-10,000), and 2 `/api/me`: 30/10/50/10%.
pub fn stack_reads() -> Vec<String> {
    const STATIC: [&str; 6] = [
        "reset.css",
        "components.css",
        "app.js",
        "vendor.js",
        "header.html",
        "hero.webp",
    ];
    const BASELINE: [&str; 3] = ["a=1&b=1", "a=13&b=42", "a=100&b=7"];
    let mut out = Vec::with_capacity(20_000);
    for k in 0..1000 {
        out.extend(STATIC.iter().map(|f| format!("/static/{f}")));
        for j in 0..2 {
            out.push(format!("/public/baseline?{}", BASELINE[(2 * k + j) % 3]));
        }
        out.extend((1..=10).map(|i| format!("/api/items/{}", 10 * k + i)));
        out.extend(["/api/me".to_string(), "/api/me".to_string()]);
    }
    out
}

/// production-stack through its edge, as HttpArena drives it: two loads at once over h2 and
/// TLS, every request with the edge's bearer token — the reads mix ([`stack_reads`], `-m 16`,
/// `Accept-Encoding: br, gzip`) on the profile's connections, and POST /api/items/1..20 with
/// HttpArena's JSON body on an eighth of them (`-m 8`). req/s counts both loads' 2xx answers
/// over the reads' run (HttpArena's sum); latency is the reads'; CPU is the whole stack's
/// ([`super::stack::Stack::cpu_ticks`]) per 2xx answer; anything else is `failed`.
fn measure_stack(p: &'static Profile, t: &Target, s: &Sizing) -> Result<Measured, String> {
    let stack = t
        .stack
        .as_ref()
        .ok_or("production-stack's edge was not started (it needs --database-url)")?;
    let connections = s
        .connections
        .unwrap_or_else(|| scale(p.connections[0], s.cpus, p.cpus));
    let auth = format!("authorization: Bearer {}", stack.token);
    let base = linerate_load::LoadOptions {
        url: format!("https://{}/api/me", stack.tls),
        http2: true,
        insecure: true,
        duration: Some(s.duration),
        cpus: s.threads().1,
        allow_status_errors: true,
        ..linerate_load::LoadOptions::default()
    };
    let reads = linerate_load::LoadOptions {
        connections,
        threads: Some(s.threads().0.min(connections)),
        streams: STACK_READ_STREAMS,
        headers: vec!["accept-encoding: br;q=1, gzip;q=0.8".into(), auth.clone()],
        ..base.clone()
    };
    let writes = linerate_load::LoadOptions {
        connections: (connections / STACK_WRITE_SHARE).max(1),
        threads: Some(1),
        streams: STACK_WRITE_STREAMS,
        headers: vec!["content-type: application/json".into(), auth],
        body: Some(STACK_WRITE_BODY.into()),
        ..base
    };
    let authority = stack.tls.to_string();
    let config = |o: &linerate_load::LoadOptions,
                  method: &str,
                  paths: &[String]|
     -> Result<linerate_load::Config, String> {
        let mut cfg = linerate_load::Config::from_options(o).map_err(|e| e.to_string())?;
        let headers: Vec<(String, String)> = o
            .headers
            .iter()
            .filter_map(|h| h.split_once(": "))
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        let body = o.body.as_deref().unwrap_or("").as_bytes();
        let h2 = cfg.http2.as_mut().ok_or("an HTTP/2 run")?;
        h2.requests = paths
            .iter()
            .map(|path| {
                linerate_load::h2::Request::new(method, "https", &authority, path, &headers, body)
            })
            .collect();
        Ok(cfg)
    };
    let write_paths: Vec<String> = (1..=20).map(|i| format!("/api/items/{i}")).collect();
    let reads_cfg = config(&reads, "GET", &stack_reads())?;
    let writes_cfg = config(&writes, "POST", &write_paths)?;
    let both = |r: &linerate_load::Config, w: &linerate_load::Config| {
        std::thread::scope(|sc| {
            let w = sc.spawn(|| linerate_load::measure(w).map_err(|e| e.to_string()));
            let r = linerate_load::measure(r).map_err(|e| e.to_string());
            let w = w
                .join()
                .map_err(|_| "the writes' load panicked".to_string());
            Ok::<_, String>((r?, w??))
        })
    };
    if !s.warmup.is_zero() {
        let mut rw = reads_cfg.clone();
        let mut ww = writes_cfg.clone();
        rw.duration = Some(s.warmup);
        ww.duration = Some(s.warmup);
        both(&rw, &ww)?;
    }
    let before = stack.cpu_ticks();
    let (r, w) = both(&reads_cfg, &writes_cfg)?;
    let after = stack.cpu_ticks();
    let r = r.runs.first().ok_or("the reads' load made no run")?;
    let w = w.runs.first().ok_or("the writes' load made no run")?;
    let ok = |run: &linerate_load::report::RunReport| -> u64 {
        run.status_codes
            .iter()
            .filter(|(c, _)| (200..300).contains(*c))
            .map(|(_, n)| n)
            .sum()
    };
    let answered = ok(r) + ok(w);
    let all = r.responses + w.responses + r.failed + w.failed;
    let rps = if r.elapsed_s > 0.0 {
        answered as f64 / r.elapsed_s
    } else {
        0.0
    };
    let cpu_us_per_request = match (before, after) {
        (Some(b), Some(a)) if answered > 0 => {
            Some((a - b) as f64 / procfs::clock_ticks() * 1e6 / answered as f64)
        }
        _ => None,
    };
    Ok(Measured {
        profile: p.name,
        server: t.name.clone(),
        connections,
        depth: STACK_READ_STREAMS,
        offered_rps: None,
        rps,
        responses: answered,
        failed: all - answered,
        cpu_us_per_request,
        mean_us: r.latency.mean_us,
        p50_us: r.latency.p50_us as f64,
        p99_us: r.latency.p99_us as f64,
        cpu_source: super::target::CPU_TICKS,
        cpu_of: Some(stack.counted()),
        rounds: 1,
        rps_min_max: [rps; 2],
        cpu_us_min_max: cpu_us_per_request.map(|c| [c; 2]),
        round_errors: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(rps: f64, cpu: Option<f64>, p99: f64) -> Measured {
        Measured {
            profile: "baseline",
            server: "linerate".into(),
            connections: 8,
            depth: 1,
            offered_rps: None,
            rps,
            responses: 10,
            failed: 1,
            cpu_us_per_request: cpu,
            mean_us: p99 / 2.0,
            p50_us: p99 / 4.0,
            p99_us: p99,
            cpu_source: "cgroup",
            cpu_of: None,
            rounds: 1,
            rps_min_max: [rps; 2],
            cpu_us_min_max: cpu.map(|c| [c; 2]),
            round_errors: None,
        }
    }

    /// Rounds become one row: each figure's median, req/s and CPU min-max, counts summed; a
    /// failed round is counted and said, not averaged in; no round measured is an error.
    #[test]
    fn rounds_summarise_to_medians_and_spread() {
        let m = summarise(vec![
            Ok(round(300.0, Some(3.0), 900.0)),
            Err("connection refused".into()),
            Ok(round(100.0, Some(5.0), 100.0)),
            Ok(round(200.0, Some(4.0), 500.0)),
        ])
        .unwrap();
        assert_eq!(
            (m.rps, m.cpu_us_per_request, m.p99_us),
            (200.0, Some(4.0), 500.0)
        );
        assert_eq!((m.mean_us, m.p50_us), (250.0, 125.0));
        assert_eq!(m.rps_min_max, [100.0, 300.0]);
        assert_eq!(m.cpu_us_min_max, Some([3.0, 5.0]));
        assert_eq!((m.rounds, m.responses, m.failed), (3, 30, 3));
        assert_eq!(m.round_errors, Some((1, "connection refused".to_string())));
        // Two rounds: the middle of the two; a round without CPU leaves none.
        let m = summarise(vec![
            Ok(round(100.0, Some(2.0), 1.0)),
            Ok(round(200.0, None, 1.0)),
        ])
        .unwrap();
        assert_eq!(
            (m.rps, m.cpu_us_per_request, m.cpu_us_min_max),
            (150.0, None, None)
        );
        assert_eq!(
            summarise(vec![Err("a".into()), Err("b".into())]).unwrap_err(),
            "a"
        );
    }

    /// HttpArena's reads file: 20,000 paths, 30% static, 10% baseline, 50% items over ids
    /// 1-10,000 (each once), 10% /api/me, in its order.
    #[test]
    fn stack_reads_follow_httparena() {
        let r = stack_reads();
        assert_eq!(r.len(), 20_000);
        let n = |pre: &str| r.iter().filter(|p| p.starts_with(pre)).count();
        assert_eq!(n("/static/"), 6000);
        assert_eq!(n("/public/baseline?"), 2000);
        assert_eq!(n("/api/items/"), 10_000);
        assert_eq!(n("/api/me"), 2000);
        assert_eq!(r[0], "/static/reset.css");
        assert_eq!(
            r[6..9],
            [
                "/public/baseline?a=1&b=1",
                "/public/baseline?a=13&b=42",
                "/api/items/1"
            ]
        );
        assert_eq!(r[20 + 6], "/public/baseline?a=100&b=7");
        assert_eq!(r.last().unwrap(), "/api/me");
        assert!(r.contains(&"/api/items/10000".to_string()));
    }

    #[test]
    fn connections_scale_from_64_cpus() {
        assert_eq!(scale(4096, 64, 64), 4096);
        assert_eq!(scale(4096, 2, 64), 128);
        assert_eq!(scale(256, 2, 64), MIN_CONNECTIONS);
        assert_eq!(scale(16384, 128, 64), 32768);
        // latency-500k-8cpu: sized for 8 CPUs.
        assert_eq!(scale(1024, 2, 8), 256);
    }
}
