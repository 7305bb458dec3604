//! The command line of `linerate load`, wrk-compatible where wrk has the option.
//! Owns only the clap definition and the value parsers (durations, CPU lists); checking that the
//! options make sense together is `config`'s job.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::time::Duration;

/// Generate HTTP/1.1 load and report throughput and latency (wrk-style options).
#[derive(clap::Args, Clone, Debug)]
pub struct LoadArgs {
    /// Target URL, http:// or https:// (TLS 1.2/1.3, ALPN http/1.1).
    pub url: String,

    /// Worker threads, each with its own event loop and connections [default: one per CPU,
    /// or one per CPU in --cpus].
    #[arg(short = 't', long)]
    pub threads: Option<usize>,

    /// Total connections, spread evenly over the threads (the remainder is not dropped).
    #[arg(short = 'c', long, default_value_t = 64)]
    pub connections: usize,

    /// Run length, e.g. 10s, 500ms, 2m [default: 10s, or until --requests are answered].
    #[arg(short = 'd', long, value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Extra request header, `Name: value` (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,

    /// A request unanswered for this long counts as a timeout error and its connection is reopened.
    #[arg(long, value_parser = parse_duration, default_value = "2s")]
    pub timeout: Duration,

    /// Print the full latency percentile table.
    #[arg(short = 'L', long)]
    pub latency: bool,

    /// Requests in flight per connection (HTTP/1.1 pipelining; no script needed).
    #[arg(short = 'p', long, default_value_t = 1)]
    pub pipeline: usize,

    /// Request method [default: GET, or POST with --body/--body-file].
    #[arg(short = 'm', long)]
    pub method: Option<String>,

    /// Request body.
    #[arg(short = 'b', long, conflicts_with = "body_file")]
    pub body: Option<String>,

    /// Request body read from a file.
    #[arg(long)]
    pub body_file: Option<PathBuf>,

    /// Files of exact request bytes, assigned round-robin to connections (replaces
    /// --method/--header/--body).
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["method", "headers", "body", "body_file"])]
    pub raw: Vec<PathBuf>,

    /// Open a new connection after this many requests on one (short-lived connection tests).
    #[arg(long)]
    pub reconnect: Option<u64>,

    /// Stop after exactly this many requests have been answered or failed.
    #[arg(short = 'n', long)]
    pub requests: Option<u64>,

    /// Constant total request rate (req/s); latency is then measured from each request's
    /// intended send time.
    #[arg(short = 'R', long)]
    pub rate: Option<f64>,

    /// Load the server this long before measuring (not counted).
    #[arg(short = 'w', long, value_parser = parse_duration, default_value = "0s")]
    pub warmup: Duration,

    /// Repeat the measurement this many times; each run and the median are reported.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,

    /// Pin threads to these CPUs, round-robin, e.g. `1` or `0,2-3`.
    #[arg(long, value_parser = parse_cpus)]
    pub cpus: Option<CpuList>,

    /// After events, poll this long without sleeping before blocking (e.g. 1ms). Keeps the
    /// thread awake so the server does not pay to wake it per response; the empty polls are
    /// reported apart and left out of CPU per request and busy %. 0 = off.
    #[arg(long, value_parser = parse_duration, default_value = "0s")]
    pub spin: Duration,

    /// https: do not verify the server's certificate (self-signed test servers), like curl -k.
    #[arg(short = 'k', long, conflicts_with = "cacert")]
    pub insecure: bool,

    /// https: trust only the CA certificates in this PEM file [default: the webpki roots].
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,

    /// Print the result as JSON on stdout (and nothing else there).
    #[arg(long)]
    pub json: bool,
}

/// A parsed `--cpus` list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

/// Highest CPU index accepted by `--cpus` (the kernel's CPU_SETSIZE).
pub const MAX_CPU: usize = 1023;

/// Parses `1`, `0,2`, `0-3`, `0-1,4`.
pub fn parse_cpus(s: &str) -> Result<CpuList, String> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let bad = || format!("invalid CPU list {s:?} (expected e.g. 1 or 0,2-3)");
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (
                a.trim().parse::<usize>().map_err(|_| bad())?,
                b.trim().parse::<usize>().map_err(|_| bad())?,
            ),
            None => {
                let a = part.trim().parse::<usize>().map_err(|_| bad())?;
                (a, a)
            }
        };
        if a > b || b > MAX_CPU {
            return Err(bad());
        }
        out.extend(a..=b);
    }
    Ok(CpuList(out))
}

/// Parses `10s`, `250ms`, `2m`, `1h`, `1.5s`, `100us`; a bare number means seconds (as in wrk).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("invalid duration {s:?} (expected e.g. 10s, 500ms, 2m)");
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| bad())?;
    let scale = match unit {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return Err(bad()),
    };
    Duration::try_from_secs_f64(n * scale).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("5d").is_err());
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpus("1"), Ok(CpuList(vec![1])));
        assert_eq!(parse_cpus("0-2,5"), Ok(CpuList(vec![0, 1, 2, 5])));
        assert!(parse_cpus("2-1").is_err());
        assert!(parse_cpus("x").is_err());
    }
}
