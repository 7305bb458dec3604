//! `linerate load --http2` against linerate's own server, started in-process with an h2c
//! listener (prior knowledge) and a TLS listener offering ALPN h2 (a self-signed certificate
//! made at test time, so `-k`): exact counts over both with several streams per connection,
//! the rate schedule, reconnects and request bodies; non-2xx answers failing the verdict; an
//! HTTP/1.1-only TLS listener refusing the run in one line; the `--pipeline` and
//! `--max-concurrent-streams` refusals through the binary. Every run is bounded by
//! `--requests`.
#![forbid(unsafe_code)]

mod common;
mod load_common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use common::Running;
use linerate_load::report::{self, Report};
use linerate_server::config::FilesMount;
use linerate_server::{Config, Server, TlsConfig};
use load_common::{args, measure};

/// `linerate load FLAGS URL` in-process: the flags as typed, split at spaces.
fn run(flags: &str, url: &str) -> Report {
    let mut line: Vec<&str> = flags.split_whitespace().collect();
    line.push(url);
    measure(&line)
}

/// The server under load and its three listeners' addresses.
struct Served {
    run: Running,
    h2c: SocketAddr,
    tls: SocketAddr,
    dir: PathBuf,
}

impl Served {
    fn stop(self) {
        let dir = self.dir.clone();
        self.run.stop();
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Bytes of the static file `/static/big.bin`: more than half the client's windows, so the
/// server waits on its WINDOW_UPDATEs.
const BIG: usize = 12 << 20;

/// The demo app with an h2c listener, a TLS listener (`tls_h2`: ALPN h2 offered) and
/// `/static/big.bin`.
fn serve(name: &str, tls_h2: bool) -> Served {
    let dir = std::env::temp_dir().join(format!("linerate-load-h2-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("www")).unwrap();
    std::fs::write(dir.join("www/big.bin"), vec![b'b'; BIG]).unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(dir.join("cert.pem"), ck.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), ck.signing_key.serialize_pem()).unwrap();
    let cfg = Config {
        files: Some(FilesMount {
            prefix: "/static".into(),
            root: dir.join("www"),
            ..Default::default()
        }),
        h2c: Some("127.0.0.1:0".parse().unwrap()),
        // `addr` is the HTTP/1.1-only port here (h2c has its own): the library's default
        // takes HTTP/2 with prior knowledge there too.
        h2c_preface: false,
        tls: Some(TlsConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            cert: Some(linerate_server::config::CertPair {
                cert: dir.join("cert.pem"),
                key: dir.join("key.pem"),
            }),
            ktls: false,
            key_update_bytes: linerate_server::tls::TLS_KEY_UPDATE_BYTES,
            http2: tls_h2,
            options: Default::default(),
        }),
        ..common::config()
    };
    let server = Server::bind(cfg, linerate::demo::router()).expect("bind");
    let h2c = server.h2c_addr().expect("h2c address");
    let tls = server.tls_addr().expect("TLS address");
    let addr = server.local_addr();
    let handle = server.handle();
    let stats = server.stats();
    let thread = std::thread::spawn(move || server.run());
    Served {
        run: Running {
            addr,
            handle,
            stats,
            thread: Some(thread),
        },
        h2c,
        tls,
        dir,
    }
}

/// Every one of `n` requests answered 200, nothing failed, one latency sample each.
fn assert_all_200(r: &Report, n: u64) {
    let run = &r.runs[0];
    assert_eq!(run.responses, n, "responses");
    assert_eq!(run.failed, 0, "failed");
    assert_eq!(run.errors.total(), 0, "errors {:?}", run.errors);
    assert_eq!(run.latency.count, n, "latency samples");
    assert_eq!(
        run.status_codes,
        [(200, n)].into_iter().collect(),
        "status codes"
    );
    assert!(run.bytes_read > 0);
    assert_eq!(report::verdict(r, false).exit, 0);
}

#[test]
fn h2c_and_tls_answer_every_request_with_eight_streams() {
    let s = serve("exact", true);
    let bases = [
        (format!("http://{}", s.h2c), ""),
        (format!("https://{}", s.tls), "-k"),
    ];
    for (base, extra) in &bases {
        for path in ["/baseline2?a=1&b=2", "/json"] {
            let url = format!("{base}{path}");
            let flags = format!("--http2 --max-concurrent-streams 8 -t 1 -c 4 -n 2000 {extra}");
            let r = run(&flags, &url);
            assert_all_200(&r, 2000);
            assert_eq!(r.setup.protocol, "HTTP/2", "{url}");
            assert_eq!(r.setup.streams, 8);
            // Streams share connections: none was reopened.
            assert_eq!(r.runs[0].connects, 4, "{url}");
            assert!(
                report::header_text(&r.setup).contains("HTTP/2, 8 streams per connection"),
                "{}",
                report::header_text(&r.setup)
            );
        }
    }
    s.stop();
}

#[test]
fn the_binary_runs_h2c_and_reports_the_protocol() {
    let s = serve("binary", true);
    let url = format!("http://{}/baseline2?a=1&b=2", s.h2c);
    let out = Command::new(common::bin::BIN)
        .args([
            "load",
            "--http2",
            "--max-concurrent-streams",
            "4",
            "-t",
            "1",
        ])
        .args(["-c", "2", "-n", "500", &url])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    for needle in [
        "HTTP/2, 4 streams per connection",
        "Status codes: 200: 500",
        "Result: ok: all 500 responses 2xx/3xx",
    ] {
        assert!(text.contains(needle), "lacks {needle:?}:\n{text}");
    }
    s.stop();
}

#[test]
fn rate_reconnects_and_bodies_keep_counts_exact() {
    let s = serve("modes", true);
    let h2c = format!("http://{}", s.h2c);
    // The rate schedule over streams.
    let url = format!("{h2c}/json");
    let r = run(
        "--http2 --max-concurrent-streams 4 -t 1 -c 2 --rate 4000 -n 400",
        &url,
    );
    assert_all_200(&r, 400);
    assert!(r.runs[0].latency_uncorrected.is_some());
    // A new connection every 25 requests.
    let r = run(
        "--http2 --max-concurrent-streams 8 -t 1 -c 2 --reconnect 25 -n 300",
        &url,
    );
    assert_all_200(&r, 300);
    assert!(r.runs[0].connects >= 12, "connects {}", r.runs[0].connects);
    // Small bodies, then bodies larger than the 65,535-byte windows a connection starts with.
    let url = format!("{h2c}/baseline11?a=1&b=2");
    let r = run(
        "--http2 --max-concurrent-streams 8 -t 1 -c 2 -b 3 -n 400",
        &url,
    );
    assert_all_200(&r, 400);
    let big = s.dir.join("big.bin");
    std::fs::write(&big, vec![b'z'; 200_000]).unwrap();
    let url = format!("https://{}/upload", s.tls);
    let file = big.to_str().unwrap();
    let r = run(
        &format!("--http2 -k --max-concurrent-streams 4 -t 1 -c 2 --body-file {file} -n 40"),
        &url,
    );
    assert_all_200(&r, 40);
    s.stop();
}

#[test]
fn large_bodies_are_read_as_the_windows_are_given_back() {
    // Two 12 MiB bodies at once pass the connection's 16 MiB window and each stream's half:
    // without the client's WINDOW_UPDATEs the server would stall and the run time out.
    let s = serve("big", true);
    for (url, extra) in [
        (format!("http://{}/static/big.bin", s.h2c), ""),
        (format!("https://{}/static/big.bin", s.tls), "-k"),
    ] {
        let flags =
            format!("--http2 --max-concurrent-streams 2 -t 1 -c 1 -n 6 --timeout 10s {extra}");
        let r = run(&flags, &url);
        assert_all_200(&r, 6);
        assert!(
            r.runs[0].bytes_read >= 6 * BIG as u64,
            "{}",
            r.runs[0].bytes_read
        );
    }
    s.stop();
}

#[test]
fn an_answer_before_the_body_ends_the_stream_cleanly() {
    // A 2 MiB body to a GET-only route: the server answers 405 first, then resets
    // the stream with NO_ERROR (RFC 9113 §8.1) so the client stops sending; the response
    // counts, the reset does not.
    let s = serve("early", true);
    let body = s.dir.join("two-mib.bin");
    std::fs::write(&body, vec![b'q'; 2 << 20]).unwrap();
    let url = format!("http://{}/json", s.h2c);
    let flags = format!(
        "--http2 --max-concurrent-streams 4 -t 1 -c 1 -n 20 --timeout 5s --body-file {}",
        body.display()
    );
    let r = run(&flags, &url);
    let run = &r.runs[0];
    assert_eq!((run.responses, run.failed, run.errors.reset), (20, 0, 0));
    assert_eq!(run.status_codes, [(405, 20)].into_iter().collect());
    assert_eq!(
        run.connects, 1,
        "the connection survived every early answer"
    );
    s.stop();
}

/// A mix (several requests in `Http2::requests`, as `lab arena`'s production-stack sets):
/// each stream opens the next in turn, so a connection's 300 requests are 100 of each.
#[test]
fn a_mix_of_requests_takes_each_in_turn() {
    let s = serve("mix", true);
    let url = format!("http://{}/baseline2?a=1&b=2", s.h2c);
    let mut cfg = linerate_load::Config::from_options(&args(&[
        "--http2",
        "--max-concurrent-streams",
        "8",
        "-t",
        "1",
        "-c",
        "1",
        "-n",
        "300",
        &url,
    ]))
    .unwrap();
    let h2 = cfg.http2.as_mut().unwrap();
    let authority = s.h2c.to_string();
    h2.requests = ["/baseline2?a=1&b=2", "/no/such/path", "/json"]
        .iter()
        .map(|p| linerate_load::h2::Request::new("GET", "http", &authority, p, &[], b""))
        .collect();
    let r = linerate_load::measure(&cfg).unwrap();
    let run = &r.runs[0];
    assert_eq!((run.responses, run.failed), (300, 0));
    assert_eq!(
        run.status_codes,
        [(200, 200), (404, 100)].into_iter().collect()
    );
    s.stop();
}

#[test]
fn not_found_answers_fail_the_verdict() {
    let s = serve("404", true);
    let url = format!("http://{}/no/such/path", s.h2c);
    let r = run("--http2 --max-concurrent-streams 8 -t 1 -c 2 -n 300", &url);
    let run = &r.runs[0];
    assert_eq!((run.responses, run.failed), (300, 0));
    assert_eq!(run.status_codes, [(404, 300)].into_iter().collect());
    assert_eq!(run.errors.status, 300);
    let v = report::verdict(&r, false);
    assert_eq!(v.exit, 1, "{}", v.line);
    assert!(
        v.line
            .contains("300 of 300 responses were not 2xx/3xx (404: 300)"),
        "{}",
        v.line
    );
    assert_eq!(report::verdict(&r, true).exit, 0);
    s.stop();
}

#[test]
fn an_http1_only_tls_listener_fails_the_run_in_one_line() {
    let s = serve("h1only", false);
    let url = format!("https://{}/json", s.tls);
    let (code, stderr) = common::bin::run_err(&["load", "--http2", "-k", "-n", "10", &url]);
    assert_eq!(code, 1, "{stderr}");
    let line = stderr.trim_end();
    assert!(!line.contains('\n'), "one line: {line:?}");
    assert!(
        line.starts_with("linerate: cannot connect to 127.0.0.1:")
            && line.contains("does not speak HTTP/2 over TLS")
            && line.contains("ALPN h2"),
        "{line}"
    );
    // The same listener serves an HTTP/1.1 run as before.
    let r = run("-k -t 1 -c 2 -n 100", &url);
    assert_all_200(&r, 100);
    assert_eq!(r.setup.protocol, "HTTP/1.1");
    s.stop();
}

#[test]
fn h2c_to_an_http1_port_is_errors_not_a_hang() {
    let s = serve("wrongport", true);
    let url = format!("http://{}/json", s.run.addr);
    let r = run("--http2 -t 1 -c 2 --timeout 1s -n 20", &url);
    let run = &r.runs[0];
    assert_eq!(run.responses, 0);
    assert!(run.errors.total() >= 20, "errors {:?}", run.errors);
    s.stop();
}

#[test]
fn streams_and_pipelining_belong_to_their_protocols() {
    for (line, want) in [
        (
            vec!["load", "--http2", "-p", "4", "http://127.0.0.1:1/"],
            "linerate: --pipeline is HTTP/1.1 pipelining; with --http2 use --max-concurrent-streams",
        ),
        (
            vec![
                "load",
                "--max-concurrent-streams",
                "4",
                "http://127.0.0.1:1/",
            ],
            "linerate: --max-concurrent-streams applies to HTTP/2 and HTTP/3 only; add --http2",
        ),
        (
            vec!["load", "--streams", "4", "http://127.0.0.1:1/"],
            "linerate: --max-concurrent-streams applies to HTTP/2 and HTTP/3 only",
        ),
        (
            vec![
                "load",
                "--http2",
                "-H",
                "Connection: close",
                "http://127.0.0.1:1/",
            ],
            "linerate: header \"Connection\" is connection-specific",
        ),
        (
            vec![
                "load",
                "--http2",
                "--max-concurrent-streams",
                "0",
                "http://127.0.0.1:1/",
            ],
            "linerate: --max-concurrent-streams must be at least 1",
        ),
    ] {
        let (code, stderr) = common::bin::run_err(&line);
        assert_eq!(code, 1, "{line:?}: {stderr}");
        assert!(stderr.starts_with(want), "{line:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{line:?}: {stderr}");
    }
    // The library refuses the same, for callers that are not the command line.
    let e =
        linerate_load::Config::from_options(&args(&["--http2", "-p", "2", "http://127.0.0.1:1/"]))
            .expect_err("refused");
    assert!(matches!(e, linerate_load::ConfigError::PipelineWithHttp2));
    // `-m` stays --method.
    let o = args(&["-m", "HEAD", "http://127.0.0.1:1/"]);
    assert_eq!((o.method.as_deref(), o.streams), (Some("HEAD"), 1));
}
