//! Drives the load for one sample: `linerate load` in-process, or wrk as a pinned child.
//!
//! Either way the result is the same [`LoadResult`]: answered requests, the generator's own
//! req/s, errors, and (for `linerate load` at a fixed rate) latency corrected for coordinated
//! omission. wrk is run with a deadline and killed past it, so a stuck peer cannot hang the lab.

use std::io::Read as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use linerate_load::LoadOptions;
use linerate_load::stats::LatencySummary;
use serde::Serialize;

use super::server::on_cpus;
use super::suite::Workload;

/// Slack past a wrk run's duration before it is killed and the sample failed.
const WRK_DEADLINE_SLACK: Duration = Duration::from_secs(30);
/// The classic TechEmpower pipelining script, written next to each wrk run that needs it.
const PIPELINE_LUA: &str = include_str!("../../../../bench/pipeline.lua");

/// What one load run saw.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LoadResult {
    pub requests: u64,
    pub req_per_s: f64,
    pub errors: u64,
    pub elapsed_s: f64,
    pub latency: Option<LatencySummary>,
}

/// Which generator runs a sample (after `auto` is decided).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Generator {
    Wrk,
    Linerate,
}

/// One run: `duration` of load (or at `rate` req/s when given) on `addr`.
pub struct Run<'a> {
    pub generator: Generator,
    pub addr: SocketAddr,
    pub workload: &'a Workload,
    pub connections: usize,
    pub cpus: &'a [usize],
    pub duration: Duration,
    pub rate: Option<f64>,
    /// Stop after this many answers instead of after `duration`.
    pub requests: Option<u64>,
    /// How long a request (or a TLS handshake) may take before it counts as a timeout
    /// (linerate load only; `None`: its default).
    pub timeout: Option<Duration>,
}

impl Run<'_> {
    fn url(&self) -> String {
        let scheme = if self.workload.tls { "https" } else { "http" };
        format!("{scheme}://{}{}", self.addr, self.workload.path)
    }

    /// wrk cannot send bodies or other methods without a script, nor speak HTTP/2 or
    /// WebSocket; those use linerate load.
    fn generator(&self) -> Generator {
        let w = self.workload;
        // wrk sends one request to one path over kept-alive connections, nothing else.
        let plain_get = w.body.is_none()
            && w.body_file.is_none()
            && !w.grpc
            && !w.http2
            && !w.http3
            && !w.websocket
            && w.paths.is_empty()
            && w.reconnect.is_none()
            && !w.tls_no_resume
            && w.method
                .as_deref()
                .is_none_or(|m| m.eq_ignore_ascii_case("GET"));
        if self.generator == Generator::Wrk
            && plain_get
            && self.rate.is_none()
            && self.requests.is_none()
        {
            Generator::Wrk
        } else {
            Generator::Linerate
        }
    }

    pub fn execute(&self) -> anyhow::Result<LoadResult> {
        match self.generator() {
            Generator::Wrk => self.wrk(),
            Generator::Linerate => self.linerate(),
        }
    }

    /// The options `linerate load` would get for this run (no command line in between).
    fn load_options(&self, raw: Vec<PathBuf>) -> LoadOptions {
        let w = self.workload;
        let (method, headers) = if raw.is_empty() {
            (w.method.clone(), w.headers.clone())
        } else {
            (None, Vec::new())
        };
        LoadOptions {
            url: self.url(),
            connections: self.connections,
            threads: Some(self.cpus.len().max(1)),
            cpus: self.cpus.to_vec(),
            pipeline: w.pipeline,
            http2: w.http2 || w.grpc,
            http3: w.http3,
            streams: w.streams,
            ws: w.websocket,
            message_size: w
                .message_size
                .unwrap_or(linerate_load::options::DEFAULT_MESSAGE_SIZE),
            binary: w.binary,
            insecure: w.tls,
            timeout: self
                .timeout
                .unwrap_or(linerate_load::options::DEFAULT_TIMEOUT),
            reconnect: w.reconnect,
            tls_no_resume: w.tls_no_resume,
            requests: self.requests,
            duration: self.requests.is_none().then_some(self.duration),
            raw,
            method,
            headers,
            body: w.body.clone(),
            body_file: w.body_file.as_ref().map(PathBuf::from),
            grpc: w.grpc,
            expect_body_file: w.expect_body_file.as_ref().map(PathBuf::from),
            rate: self.rate,
            ..LoadOptions::default()
        }
    }

    fn linerate(&self) -> anyhow::Result<LoadResult> {
        let raw_dir = (!self.workload.paths.is_empty()).then(|| {
            std::env::temp_dir().join(format!(
                "linerate-lab-{}-raw-{}",
                std::process::id(),
                self.addr.port()
            ))
        });
        let mut raw = Vec::new();
        if let Some(dir) = &raw_dir {
            // One file of request bytes per path; linerate load deals them to connections.
            std::fs::create_dir_all(dir)?;
            let fields: String = self
                .workload
                .headers
                .iter()
                .map(|h| format!("{h}\r\n"))
                .collect();
            for (i, p) in self.workload.paths.iter().enumerate() {
                let f = dir.join(format!("{i}.http"));
                std::fs::write(
                    &f,
                    format!("GET {p} HTTP/1.1\r\nHost: {}\r\n{fields}\r\n", self.addr),
                )?;
                raw.push(f);
            }
        }
        let options = self.load_options(raw);
        let report = linerate_load::Config::from_options(&options)
            .map_err(anyhow::Error::from)
            .and_then(|cfg| Ok(linerate_load::measure(&cfg)?));
        if let Some(dir) = raw_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
        let report = report?;
        let run = report
            .runs
            .first()
            .context("linerate load returned no run")?;
        if let Some(why) = &run.interrupted_by {
            anyhow::bail!("the load run was interrupted: {why}");
        }
        Ok(LoadResult {
            requests: run.responses,
            req_per_s: run.req_per_s,
            // As wrk's figure: requests without an answer plus answers other than 2xx/3xx
            // (and with `grpc`, calls that failed gRPC's checks).
            errors: run.failed + run.errors.answers(),
            elapsed_s: run.elapsed_s,
            latency: self.rate.map(|_| run.latency.clone()),
        })
    }

    fn wrk(&self) -> anyhow::Result<LoadResult> {
        let mut argv = vec![
            "wrk".to_string(),
            format!("-t{}", self.cpus.len().max(1)),
            format!("-c{}", self.connections),
            // wrk takes whole seconds only.
            format!("-d{}s", self.duration.as_secs_f64().ceil().max(1.0)),
        ];
        let script = if self.workload.pipeline > 1 {
            let p = std::env::temp_dir()
                .join(format!("linerate-lab-{}-pipeline.lua", std::process::id()));
            std::fs::write(&p, PIPELINE_LUA)?;
            argv.extend(["-s".into(), p.display().to_string()]);
            Some(p)
        } else {
            None
        };
        for h in &self.workload.headers {
            argv.extend(["-H".into(), h.clone()]);
        }
        argv.push(self.url());
        if script.is_some() {
            argv.extend(["--".into(), self.workload.pipeline.to_string()]);
        }
        let mut child = on_cpus(self.cpus, || {
            Command::new(&argv[0])
                .args(&argv[1..])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .context("cannot run wrk")
        })?;
        let deadline = Instant::now() + self.duration + WRK_DEADLINE_SLACK;
        let status = loop {
            if let Some(s) = child.try_wait()? {
                break s;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "wrk did not finish within {:?} of its duration",
                    WRK_DEADLINE_SLACK
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut out = String::new();
        let mut err = String::new();
        if let Some(mut o) = child.stdout.take() {
            o.read_to_string(&mut out)?;
        }
        if let Some(mut e) = child.stderr.take() {
            e.read_to_string(&mut err)?;
        }
        if !status.success() {
            bail!("wrk failed ({status}): {}", (err + &out).trim());
        }
        parse_wrk(&out)
    }
}

/// The figures we use from wrk's text report.
pub fn parse_wrk(out: &str) -> anyhow::Result<LoadResult> {
    let after = |key: &str| {
        out.lines()
            .find_map(|l| l.trim_start().strip_prefix(key).map(str::trim))
    };
    let rps: f64 = after("Requests/sec:")
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("cannot read wrk's Requests/sec in:\n{out}"))?;
    // "  1234567 requests in 5.00s, 150.00MB read"
    let (requests, elapsed_s) = out
        .lines()
        .find_map(|l| {
            let (n, rest) = l.trim().split_once(" requests in ")?;
            let secs = rest.split(',').next()?;
            Some((n.parse::<u64>().ok()?, wrk_seconds(secs)?))
        })
        .with_context(|| format!("cannot read wrk's request count in:\n{out}"))?;
    let non_2xx: u64 = after("Non-2xx or 3xx responses:")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // "Socket errors: connect 0, read 1, write 0, timeout 2"
    let socket: u64 = after("Socket errors:").map_or(0, |v| {
        v.split(',')
            .filter_map(|p| p.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum()
    });
    Ok(LoadResult {
        requests,
        req_per_s: rps,
        errors: non_2xx + socket,
        elapsed_s,
        latency: None,
    })
}

/// wrk's durations: `5.00s`, `1.00m`, `500.00ms`.
fn wrk_seconds(s: &str) -> Option<f64> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let n: f64 = s[..split].parse().ok()?;
    Some(match &s[split..] {
        "us" => n / 1e6,
        "ms" => n / 1e3,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRK: &str = "Running 5s test @ http://127.0.0.1:1/json
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   410.00us  100.00us   3.00ms   90.00%
    Req/Sec   155.00k     2.00k  160.00k    70.00%
  771234 requests in 5.00s, 110.00MB read
  Socket errors: connect 0, read 2, write 0, timeout 3
  Non-2xx or 3xx responses: 7
Requests/sec: 154246.80
Transfer/sec:     22.00MB
";

    #[test]
    fn wrk_report_is_read() {
        let r = parse_wrk(WRK).unwrap();
        assert_eq!(r.requests, 771234);
        assert_eq!(r.req_per_s, 154246.80);
        assert_eq!(r.elapsed_s, 5.0);
        assert_eq!(r.errors, 2 + 3 + 7);
    }

    #[test]
    fn unreadable_wrk_output_is_an_error() {
        assert!(parse_wrk("unable to connect to 127.0.0.1:1 Connection refused").is_err());
    }

    #[test]
    fn wrk_only_for_what_it_can_send() {
        let base: Workload =
            toml::from_str("name = 'w'\npath = '/'").expect("a minimal workload parses");
        let run = |w: &Workload, rate: Option<f64>| {
            Run {
                generator: Generator::Wrk,
                addr: "127.0.0.1:1".parse().unwrap(),
                workload: w,
                connections: 1,
                cpus: &[0],
                duration: Duration::from_secs(1),
                rate,
                requests: None,
                timeout: None,
            }
            .generator()
        };
        assert_eq!(run(&base, None), Generator::Wrk);
        assert_eq!(run(&base, Some(10.0)), Generator::Linerate, "rate");
        for (w, why) in [
            (
                Workload {
                    paths: vec!["/a".into(), "/b".into()],
                    ..base.clone()
                },
                "paths",
            ),
            (
                Workload {
                    grpc: true,
                    body_file: Some("sum.bin".into()),
                    ..base.clone()
                },
                "grpc",
            ),
            (
                Workload {
                    body_file: Some("body.bin".into()),
                    ..base.clone()
                },
                "body_file",
            ),
            (
                Workload {
                    reconnect: Some(1),
                    ..base.clone()
                },
                "reconnect",
            ),
            (
                Workload {
                    tls: true,
                    tls_no_resume: true,
                    ..base.clone()
                },
                "tls_no_resume",
            ),
            (
                Workload {
                    body: Some("x".into()),
                    ..base.clone()
                },
                "body",
            ),
            (
                Workload {
                    method: Some("POST".into()),
                    ..base.clone()
                },
                "method",
            ),
            (
                Workload {
                    http2: true,
                    ..base.clone()
                },
                "http2",
            ),
            (
                Workload {
                    http3: true,
                    tls: true,
                    ..base.clone()
                },
                "http3",
            ),
            (
                Workload {
                    websocket: true,
                    ..base.clone()
                },
                "websocket",
            ),
        ] {
            assert_eq!(run(&w, None), Generator::Linerate, "{why}");
        }
    }

    #[test]
    fn load_options_are_what_the_run_asks_for() {
        let w: Workload = toml::from_str(
            "name = 'w'\npath = '/json'\ntls = true\npipeline = 16\nheaders = ['X-A: 1']",
        )
        .expect("a workload parses");
        let run = |requests: Option<u64>, rate: Option<f64>| Run {
            generator: Generator::Linerate,
            addr: "127.0.0.1:1".parse().unwrap(),
            workload: &w,
            connections: 4,
            cpus: &[1, 3],
            duration: Duration::from_millis(2500),
            rate,
            requests,
            timeout: None,
        };
        let o = run(None, Some(100.0)).load_options(Vec::new());
        assert_eq!(o.url, "https://127.0.0.1:1/json");
        assert_eq!((o.connections, o.threads, o.pipeline), (4, Some(2), 16));
        assert_eq!(o.cpus, vec![1, 3]);
        assert!(o.insecure);
        assert_eq!(o.headers, vec!["X-A: 1".to_string()]);
        assert_eq!(o.duration, Some(Duration::from_millis(2500)));
        assert_eq!((o.requests, o.rate), (None, Some(100.0)));
        assert_eq!(o.timeout, linerate_load::options::DEFAULT_TIMEOUT);
        let cfg = linerate_load::Config::from_options(&o).expect("the options are valid");
        assert_eq!((cfg.threads, cfg.pipeline), (2, 16));

        let ws: Workload = toml::from_str(
            "name = 'w'\npath = '/ws'\nwebsocket = true\nmessage_size = 4096\nbinary = true",
        )
        .expect("a workload parses");
        let o = Run {
            workload: &ws,
            ..run(None, None)
        }
        .load_options(Vec::new());
        assert!(o.ws && o.binary);
        assert_eq!(
            (o.message_size, o.url.as_str()),
            (4096, "http://127.0.0.1:1/ws")
        );
        linerate_load::Config::from_options(&o).expect("the options are valid");

        let h3: Workload =
            toml::from_str("name = 'w'\npath = '/f64k.bin'\ntls = true\nhttp3 = true\nstreams = 8")
                .expect("a workload parses");
        let o = Run {
            workload: &h3,
            ..run(None, None)
        }
        .load_options(Vec::new());
        assert!(o.http3 && o.insecure && !o.http2);
        assert_eq!(
            (o.streams, o.url.as_str()),
            (8, "https://127.0.0.1:1/f64k.bin")
        );
        let cfg = linerate_load::Config::from_options(&o).expect("the options are valid");
        assert!(cfg.http3.is_some());

        // A gRPC workload: HTTP/2 implied, the frame and the expected answer from files.
        let dir = std::env::temp_dir().join(format!("linerate-lab-grpc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("sum.bin"), [0, 0, 0, 0, 4, 8, 1, 16, 2]).unwrap();
        std::fs::write(dir.join("sum.expect"), [0, 0, 0, 0, 2, 8, 3]).unwrap();
        let grpc: Workload = toml::from_str(&format!(
            "name = 'w'\npath = '/benchmark.BenchmarkService/GetSum'\ngrpc = true\nstreams = 100\n\
             body_file = '{0}/sum.bin'\nexpect_body_file = '{0}/sum.expect'",
            dir.display()
        ))
        .expect("a workload parses");
        let o = Run {
            workload: &grpc,
            ..run(None, None)
        }
        .load_options(Vec::new());
        assert!(o.grpc && o.http2 && o.expect_body_file.is_some());
        assert_eq!(o.streams, 100);
        let cfg = linerate_load::Config::from_options(&o).expect("the options are valid");
        assert!(cfg.http2.as_ref().is_some_and(|h| h.grpc.is_some()));
        let _ = std::fs::remove_dir_all(dir);

        let o = run(Some(500), None).load_options(vec![PathBuf::from("/tmp/0.http")]);
        assert_eq!((o.requests, o.duration), (Some(500), None));
        assert!(
            o.headers.is_empty() && o.method.is_none(),
            "raw requests carry their fields"
        );
    }

    #[test]
    fn wrk_durations() {
        assert_eq!(wrk_seconds("1.00m"), Some(60.0));
        assert_eq!(wrk_seconds("500.00ms"), Some(0.5));
        assert_eq!(wrk_seconds("x"), None);
    }
}
