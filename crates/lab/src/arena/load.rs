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
/// HTTP/2 and gRPC streams per connection (h2load's `-m`, as the shape).
pub const H2_STREAMS: usize = 100;
/// `upload`'s body (HttpArena's upload profile sends megabytes; one MiB keeps the run short).
pub const UPLOAD_BYTES: usize = 1024 * 1024;

/// How the load is sized.
#[derive(Clone, Copy, Debug)]
pub struct Sizing {
    /// This machine's CPUs (HttpArena's counts and rates are scaled by cpus over the profile's).
    pub cpus: usize,
    pub duration: Duration,
    pub warmup: Duration,
    /// Every profile at this many connections instead.
    pub connections: Option<usize>,
}

/// One server's measurement of one profile.
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
    pub p99_us: f64,
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
        threads: Some(s.cpus.clamp(1, 4)),
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
    let before = t.cpu_ticks();
    let report = run(o)?;
    let after = t.cpu_ticks();
    let r = report.runs.first().ok_or("the load made no run")?;
    let cpu_us_per_request = match (before, after) {
        (Some(b), Some(a)) if r.responses > 0 => {
            Some((a - b) as f64 / procfs::clock_ticks() * 1e6 / r.responses as f64)
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
        p99_us: r.latency.p99_us as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
