//! Integration tests against servers started in the test on 127.0.0.1: exact counting, framing of
//! dribbled responses, error classes, output formats and bad input. Every run is bounded by
//! `--requests` or a short `--duration`, and every server by `SERVER_LIFETIME`.
#![forbid(unsafe_code)]

mod load_common;
use load_common as common;

use common::{Behavior, Server, args, assert_exact, measure};
use linerate_load::units::format_micros;

const N: u64 = 10_007;

#[test]
fn requests_counted_exactly_closed_loop() {
    let s = Server::start(Behavior::Ok);
    let n = N.to_string();
    let r = measure(&["-t", "2", "-c", "7", "-n", &n, &s.url()]);
    assert_exact(&r, N);
    assert_eq!(s.requests(), N, "server saw exactly N requests");
}

#[test]
fn requests_counted_exactly_pipelined() {
    let s = Server::start(Behavior::Ok);
    let n = N.to_string();
    let r = measure(&["-t", "2", "-c", "5", "--pipeline", "16", "-n", &n, &s.url()]);
    assert_exact(&r, N);
    assert_eq!(s.requests(), N);
}

#[test]
fn requests_counted_exactly_with_reconnect() {
    let s = Server::start(Behavior::Ok);
    let r = measure(&[
        "-t",
        "2",
        "-c",
        "4",
        "--reconnect",
        "7",
        "-n",
        "1001",
        &s.url(),
    ]);
    assert_exact(&r, 1001);
    assert_eq!(s.requests(), 1001);
    // 1001 requests, at most 7 per connection.
    assert!(
        s.connections() >= 1001 / 7,
        "only {} connections",
        s.connections()
    );
    assert!(r.runs[0].connects >= 143);
}

#[test]
fn requests_counted_exactly_with_reconnect_pipelined() {
    let s = Server::start(Behavior::Ok);
    let r = measure(&[
        "-t",
        "1",
        "-c",
        "3",
        "--reconnect",
        "10",
        "-p",
        "4",
        "-n",
        "997",
        &s.url(),
    ]);
    assert_exact(&r, 997);
    assert_eq!(s.requests(), 997);
    assert!(s.connections() >= 100);
}

#[test]
fn server_connection_close_hands_pipelined_requests_back() {
    // The server closes after every 5th response; what was pipelined behind it is resent elsewhere.
    let s = Server::start(Behavior::CloseEvery(5));
    let r = measure(&["-t", "1", "-c", "3", "-p", "4", "-n", "503", &s.url()]);
    assert_exact(&r, 503);
}

#[test]
fn chunked_responses_dribbled_are_framed() {
    for step in [1, 3, 7] {
        let s = Server::start(Behavior::ChunkedDribble(step));
        let r = measure(&["-t", "1", "-c", "2", "-n", "60", &s.url()]);
        assert_exact(&r, 60);
        assert_eq!(r.runs[0].bytes_read, 60 * common::CHUNKED.len() as u64);
    }
}

#[test]
fn content_length_responses_dribbled_are_framed() {
    let s = Server::start(Behavior::OkDribble);
    let r = measure(&["-t", "1", "-c", "2", "-p", "3", "-n", "90", &s.url()]);
    assert_exact(&r, 90);
    assert_eq!(r.runs[0].bytes_read, 90 * common::OK.len() as u64);
}

#[test]
fn status_500_counted_as_status_errors() {
    let s = Server::start(Behavior::Status500);
    let r = measure(&["-t", "1", "-c", "2", "-n", "100", &s.url()]);
    let run = &r.runs[0];
    assert_eq!(
        (run.responses, run.failed, run.errors.status),
        (100, 0, 100)
    );
    assert_eq!(run.errors.total(), 100);
}

#[test]
fn close_mid_response_is_a_read_error() {
    let s = Server::start(Behavior::CloseMidResponse);
    let r = measure(&["-t", "1", "-c", "2", "-n", "20", &s.url()]);
    let run = &r.runs[0];
    assert_eq!((run.responses, run.failed, run.errors.read), (0, 20, 20));
    assert_eq!(run.errors.total(), 20);
}

#[test]
fn stalled_server_times_out() {
    let s = Server::start(Behavior::Stall);
    let r = measure(&[
        "-t",
        "1",
        "-c",
        "2",
        "-p",
        "2",
        "--timeout",
        "200ms",
        "-n",
        "8",
        &s.url(),
    ]);
    let run = &r.runs[0];
    assert_eq!((run.responses, run.failed, run.errors.timeout), (0, 8, 8));
}

#[test]
fn garbage_is_malformed() {
    let s = Server::start(Behavior::Garbage);
    let r = measure(&["-t", "1", "-c", "1", "-n", "5", &s.url()]);
    let run = &r.runs[0];
    assert_eq!((run.responses, run.failed, run.errors.malformed), (0, 5, 5));
}

#[test]
fn raw_templates_round_robin_per_connection() {
    let dir = std::env::temp_dir().join(format!("linerate-load-raw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a.http"), dir.join("b.http"));
    std::fs::write(&a, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    std::fs::write(&b, "GET /b HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let s = Server::start(Behavior::Ok);
    let raw = format!("{},{}", a.display(), b.display());
    let r = measure(&["-t", "1", "-c", "2", "--raw", &raw, "-n", "100", &s.url()]);
    assert_exact(&r, 100);
    let paths = s.counters.paths.lock().unwrap().clone();
    let on_a = paths.iter().filter(|p| p.starts_with("GET /a ")).count();
    let on_b = paths.iter().filter(|p| p.starts_with("GET /b ")).count();
    assert_eq!(on_a + on_b, 100);
    assert!(on_a > 0 && on_b > 0, "a {on_a}, b {on_b}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn method_headers_and_body_are_sent() {
    let s = Server::start(Behavior::Ok);
    let r = measure(&[
        "-t",
        "1",
        "-c",
        "1",
        "-H",
        "X-Test: 1",
        "--body",
        "hello",
        "-n",
        "3",
        &s.url(),
    ]);
    assert_exact(&r, 3);
    let paths = s.counters.paths.lock().unwrap().clone();
    // The test server does not frame bodies: a body shows up in front of the next request line.
    assert!(
        paths[0] == "POST / HTTP/1.1" && paths.iter().all(|p| p.ends_with("POST / HTTP/1.1")),
        "{paths:?}"
    );
}

#[test]
fn duration_run_stops_and_counts() {
    let s = Server::start(Behavior::Ok);
    let r = measure(&["-t", "2", "-c", "4", "-d", "300ms", "--runs", "3", &s.url()]);
    assert_eq!(r.runs.len(), 3);
    for run in &r.runs {
        assert!(run.responses > 0);
        assert_eq!(run.errors.total(), 0);
        assert!(
            (run.elapsed_s - 0.3).abs() < 0.05,
            "elapsed {}",
            run.elapsed_s
        );
    }
    let mut rps: Vec<f64> = r.runs.iter().map(|x| x.req_per_s).collect();
    rps.sort_by(f64::total_cmp);
    assert_eq!(r.median.req_per_s, rps[1]);
    // Responses cannot exceed what the server answered (in-flight ones at the deadline are dropped).
    let total: u64 = r.runs.iter().map(|x| x.responses).sum();
    assert!(total <= s.requests());
}

#[test]
fn spin_keeps_counts_exact_and_is_reported_apart() {
    let s = Server::start(Behavior::Ok);
    let r = measure(&[
        "-t",
        "1",
        "-c",
        "4",
        "--spin",
        "2ms",
        "-n",
        "2000",
        &s.url(),
    ]);
    assert_exact(&r, 2000);
    assert_eq!(s.requests(), 2000);
    assert_eq!(r.setup.spin_s, 0.002);
    assert!(r.runs[0].spin_s >= 0.0);
}

#[test]
fn warmup_is_not_counted() {
    let s = Server::start(Behavior::Ok);
    let r = measure(&[
        "-t",
        "1",
        "-c",
        "2",
        "--warmup",
        "200ms",
        "-n",
        "300",
        &s.url(),
    ]);
    assert_exact(&r, 300);
    assert!(
        s.requests() > 300,
        "warm-up requests reached the server too"
    );
}

#[test]
fn rate_mode_with_requests_is_exact() {
    let s = Server::start(Behavior::Ok);
    let r = measure(&[
        "-t",
        "2",
        "-c",
        "4",
        "--rate",
        "5000",
        "-n",
        "501",
        &s.url(),
    ]);
    assert_exact(&r, 501);
    assert_eq!(s.requests(), 501);
    assert!(
        r.runs[0]
            .latency_uncorrected
            .as_ref()
            .is_some_and(|u| u.count == 501)
    );
}

#[test]
fn json_parses_and_matches_text() {
    let s = Server::start(Behavior::Ok);
    let r = measure(&["-t", "1", "-c", "4", "-n", "500", "--latency", &s.url()]);
    let json = serde_json::to_string(&r).unwrap();
    let back: linerate_load::Report = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
    let text = linerate_load::report::text(&r, true);
    let run = &r.runs[0];
    for needle in [
        format!("{} responses", run.responses),
        format!("Requests/sec: {}", run.req_per_s),
        format!("p99 {}", format_micros(run.latency.p99_us as f64)),
        format!("mean {}", format_micros(run.latency.mean_us)),
        format!("99.99% {}", format_micros(run.latency.p99_99_us as f64)),
        format!("{} bytes read", run.bytes_read),
        format!("{}µs/request", run.cpu_us_per_request),
    ] {
        assert!(text.contains(&needle), "text lacks {needle:?}:\n{text}");
    }
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["runs"][0]["responses"], 500);
    assert_eq!(v["setup"]["connections"], 4);
}

#[test]
fn connections_spread_exactly() {
    let cfg =
        linerate_load::Config::from_options(&args(&["-t", "3", "-c", "10", "http://127.0.0.1:1/"]))
            .unwrap();
    let per: Vec<usize> = (0..3).map(|t| cfg.connections_of(t)).collect();
    assert_eq!(per, [4, 3, 3]);
    assert_eq!(cfg.first_connection_of(2), 7);
}

fn config_error(line: &[&str]) -> String {
    let e = linerate_load::Config::from_options(&args(line)).expect_err("must be refused");
    let msg = e.to_string();
    assert!(!msg.contains('\n'), "one line: {msg:?}");
    msg
}

#[test]
fn bad_input_is_one_clear_line() {
    assert!(config_error(&["ftp://127.0.0.1/"]).contains("http://, https://, ws:// or wss://"));
    assert!(config_error(&["127.0.0.1:80"]).contains("http://"));
    assert!(config_error(&["http://127.0.0.1:70000/"]).contains("port"));
    assert!(
        config_error(&["--body-file", "/nonexistent/x", "http://127.0.0.1/"])
            .contains("/nonexistent/x")
    );
    assert!(
        config_error(&["--raw", "/nonexistent/r", "http://127.0.0.1/"]).contains("/nonexistent/r")
    );
    assert!(config_error(&["-H", "NoColon", "http://127.0.0.1/"]).contains("header"));
    assert!(config_error(&["-t", "4", "-c", "2", "http://127.0.0.1/"]).contains("connections"));
    assert!(config_error(&["--rate", "0", "http://127.0.0.1/"]).contains("rate"));
    assert!(config_error(&["-p", "0", "http://127.0.0.1/"]).contains("pipeline"));
    assert!(config_error(&["--spin", "5s", "http://127.0.0.1/"]).contains("--spin"));
}

#[test]
fn unreachable_host_is_one_clear_line() {
    // Bind then drop a listener: its port is very likely closed now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/");
    let err = linerate::cli::load::run(&args(&["-n", "1", &url])).expect_err("refused");
    let msg = format!("{err:#}");
    assert!(msg.starts_with("cannot connect to 127.0.0.1:"), "{msg}");
    assert!(!msg.contains('\n'));
}

#[test]
fn unknown_flag_is_refused() {
    let parse = |line: &[&str]| linerate::cli::load::options_from(line.iter().copied());
    assert!(parse(&["--frobnicate", "http://127.0.0.1/"]).is_err());
    assert!(parse(&["-d", "ten", "http://127.0.0.1/"]).is_err());
}

#[test]
fn grpc_flags_parse_and_need_grpc() {
    let parse = |line: &[&str]| linerate::cli::load::options_from(line.iter().copied());
    let o = parse(&[
        "--grpc",
        "--body-file",
        "sum.bin",
        "--max-concurrent-streams",
        "100",
        "--expect-body",
        "00 00 00 00 02 08 03",
        "http://127.0.0.1/benchmark.BenchmarkService/GetSum",
    ])
    .expect("valid");
    assert!(
        o.grpc && !o.http2,
        "--grpc implies --http2 when checked, not in the flags"
    );
    assert_eq!(o.streams, 100);
    assert_eq!(o.expect_body.as_deref(), Some("00 00 00 00 02 08 03"));
    // The expected bytes mean nothing without --grpc; --grpc goes with neither --ws nor
    // --http3.
    assert!(parse(&["--expect-body", "00", "http://127.0.0.1/"]).is_err());
    assert!(parse(&["--expect-body-file", "x", "http://127.0.0.1/"]).is_err());
    assert!(parse(&["--grpc", "--http3", "-b", "x", "https://127.0.0.1/"]).is_err());
    assert!(parse(&["--grpc", "--ws", "ws://127.0.0.1/"]).is_err());
}
