//! The admin listener: `/metrics` read by a real parser of the Prometheus text format
//! (prometheus-parse) and cross-checked against the requests this test sent; `/healthz`;
//! metrics stay off the sites' listeners; the JSON access log parses line by line.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use common::{Client, config};
use linerate_server::Config;
use linerate_server::config::FilesMount;
use prometheus_parse::{Scrape, Value};

fn admin_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(common::READ_TIMEOUT)).unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: admin\r\n\r\n").as_bytes())
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().unwrap();
    let body = out.split_once("\r\n\r\n").unwrap().1.to_string();
    (status, body)
}

/// The value of `metric` with exactly these labels.
fn value(scrape: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    let s = scrape
        .samples
        .iter()
        .find(|s| {
            s.metric == metric
                && labels.len() == s.labels.len()
                && labels.iter().all(|(k, v)| s.labels.get(k) == Some(v))
        })
        .unwrap_or_else(|| panic!("no {metric} {labels:?}"));
    match &s.value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
        other => panic!("{metric}: {other:?}"),
    }
}

#[test]
fn metrics_count_what_was_sent() {
    let root = std::env::temp_dir().join(format!("linerate-metrics-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("a.txt"), "file\n").unwrap();
    let (server, admin) = start_with_admin(&root);

    let mut c = Client::connect(server.addr);
    for _ in 0..5 {
        assert_eq!(c.get("/json").status, 200);
    }
    for _ in 0..2 {
        assert_eq!(c.get("/static/a.txt").status, 200);
    }
    for _ in 0..3 {
        assert_eq!(c.get("/nope").status, 404);
    }
    c.send(b"BREW / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.read_response().status, 501);
    // Refused by the connection itself (not timed: it never reached the application).
    let mut bad = Client::connect(server.addr);
    bad.send(b"GET /%00 HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(bad.read_response().status, 400);

    let (status, body) = admin_get(admin, "/metrics");
    assert_eq!(status, 200);
    let scrape = Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).expect("valid exposition");
    let req = |class: &str, kind: &str| {
        value(
            &scrape,
            "linerate_requests_total",
            &[("class", class), ("kind", kind)],
        )
    };
    assert_eq!(req("2xx", "route"), 5.0);
    assert_eq!(req("2xx", "file"), 2.0);
    assert_eq!(req("4xx", "server"), 3.0 + 1.0);
    assert_eq!(req("5xx", "server"), 1.0);
    assert_eq!(req("4xx", "route"), 0.0);
    assert_eq!(
        value(
            &scrape,
            "linerate_refused_requests_total",
            &[("status", "400")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &scrape,
            "linerate_refused_requests_total",
            &[("status", "408")]
        ),
        0.0
    );
    // The 400 by kind: a pct-encoded NUL in the path; no other kind counted.
    let parse_error = |kind: &str| value(&scrape, "linerate_parse_errors_total", &[("kind", kind)]);
    assert_eq!(parse_error("encoded_control_in_path"), 1.0);
    assert_eq!(parse_error("obs_fold"), 0.0);
    let kinds = scrape
        .samples
        .iter()
        .filter(|s| s.metric == "linerate_parse_errors_total")
        .count();
    assert_eq!(kinds, linerate_http1::ParseError::ALL.len());
    // Bytes: at least what this test wrote and read.
    assert!(value(&scrape, "linerate_received_bytes_total", &[]) >= 11.0 * 28.0);
    assert!(value(&scrape, "linerate_sent_bytes_total", &[]) >= 12.0 * 60.0);
    // Both client connections are open; the first is idle between requests.
    assert_eq!(
        value(&scrape, "linerate_connections", &[("state", "open")]),
        2.0
    );
    assert!(value(&scrape, "linerate_connections", &[("state", "idle")]) >= 1.0);
    assert_eq!(value(&scrape, "linerate_tls_handshakes_total", &[]), 0.0);
    assert_eq!(value(&scrape, "linerate_deferred_outstanding", &[]), 0.0);
    // The histogram holds every request the application answered (11), cumulatively.
    let hist = scrape
        .samples
        .iter()
        .find(|s| s.metric == "linerate_request_duration_seconds")
        .expect("histogram");
    let Value::Histogram(buckets) = &hist.value else {
        panic!("{:?}", hist.value)
    };
    let inf = buckets
        .iter()
        .find(|b| b.less_than.is_infinite())
        .expect("+Inf");
    assert_eq!(inf.count, 11.0);
    assert!(buckets.windows(2).all(|w| w[0].count <= w[1].count));

    assert_eq!(admin_get(admin, "/healthz"), (200, "ok\n".to_string()));
    assert_eq!(admin_get(admin, "/other").0, 404);
    // The sites' listener knows nothing of /metrics.
    assert_eq!(c.get("/metrics").status, 404);
    server.stop();
    let _ = std::fs::remove_dir_all(&root);
}

/// Starts the demo with an admin listener on 127.0.0.1:0; returns it and the admin address.
fn start_with_admin(root: &std::path::Path) -> (common::Running, SocketAddr) {
    let cfg = Config {
        admin: Some("127.0.0.1:0".parse().unwrap()),
        files: Some(FilesMount {
            prefix: "/static".into(),
            root: root.to_path_buf(),
            ..Default::default()
        }),
        ..config()
    };
    let server = linerate_server::Server::bind(cfg, linerate::demo::router()).expect("bind");
    let admin = server.admin_addr().expect("admin address");
    let addr = server.local_addr();
    let handle = server.handle();
    let stats = server.stats();
    let thread = std::thread::spawn(move || server.run());
    (
        common::Running {
            addr,
            handle,
            stats,
            thread: Some(thread),
        },
        admin,
    )
}

#[test]
fn metrics_are_off_without_an_admin_listener() {
    let server = common::start_demo();
    let mut c = Client::connect(server.addr);
    assert_eq!(c.get("/json").status, 200);
    assert_eq!(c.get("/metrics").status, 404);
    server.stop();
}

/// Stops `s` (SIGTERM, its log flushed as it exits) and reads its JSON access log `log`: the
/// text, and each line parsed.
fn stop_and_read_json_log(
    s: &mut common::bin::Served,
    log: &std::path::Path,
) -> (String, Vec<serde_json::Value>) {
    common::bin::signal(&s.child, rustix::process::Signal::TERM);
    assert!(common::bin::wait_exit(&mut s.child, std::time::Duration::from_secs(15)).success());
    let text = std::fs::read_to_string(log).unwrap();
    let lines = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    (text, lines)
}

#[test]
fn json_access_log_lines_parse() {
    let dir = std::env::temp_dir().join(format!("linerate-jsonlog-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("access.json");
    let mut s = common::bin::serve(&[
        "--access-log",
        log.to_str().unwrap(),
        "--access-log-format",
        "json",
    ]);
    let mut c = Client::connect(s.addr);
    c.send(b"GET /json?x=1 HTTP/1.1\r\nHost: t\r\nUser-Agent: test \"quoted\"\r\n\r\n");
    assert_eq!(c.read_response().status, 200);
    assert_eq!(c.get("/nope").status, 404);
    let (text, lines) = stop_and_read_json_log(&mut s, &log);
    assert_eq!(lines.len(), 2, "{text}");
    let first = &lines[0];
    assert_eq!(first["method"], "GET");
    assert_eq!(first["target"], "/json?x=1");
    assert_eq!(first["status"], 200);
    assert_eq!(first["bytes"], 27);
    assert_eq!(first["user_agent"], "test \"quoted\"");
    assert_eq!(first["remote_addr"], "127.0.0.1");
    assert!(first["referer"].is_null());
    assert!(first["request_time_us"].is_u64(), "{first}");
    assert_eq!(lines[1]["status"], 404);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `$request_time` runs to the last byte written, as nginx's does: a client that holds back
/// reading a 32 MiB file (more than loopback's send and receive buffers together) for
/// 400 ms finds at least that in the file's log line, and a small answer's line is written
/// as before.
#[test]
fn request_time_runs_to_the_last_byte() {
    const SIZE: usize = 32 << 20;
    const HOLD: std::time::Duration = std::time::Duration::from_millis(400);
    let dir = std::env::temp_dir().join(format!("linerate-lastbyte-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let root = dir.join("www");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("big.bin"), vec![b'x'; SIZE]).unwrap();
    let log = dir.join("access.json");
    let mut s = common::bin::serve(&[
        "--root",
        root.to_str().unwrap(),
        "--access-log",
        log.to_str().unwrap(),
        "--access-log-format",
        "json",
    ]);
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(common::READ_TIMEOUT)).unwrap();
    c.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut first = [0u8; 1024];
    let mut got = c.read(&mut first).unwrap();
    assert!(first.starts_with(b"HTTP/1.1 200"), "{:?}", &first[..got]);
    let head = first[..got]
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap()
        + 4;
    got -= head;
    std::thread::sleep(HOLD);
    let mut rest = vec![0u8; 1 << 20];
    while got < SIZE {
        let n = c.read(&mut rest).unwrap();
        assert!(n > 0, "closed after {got} bytes");
        got += n;
    }
    assert_eq!(got, SIZE);
    c.write_all(
        b"GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=0-9\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut tail = Vec::new();
    c.read_to_end(&mut tail).unwrap();
    assert!(
        tail.starts_with(b"HTTP/1.1 206"),
        "{}",
        String::from_utf8_lossy(&tail)
    );
    let (text, lines) = stop_and_read_json_log(&mut s, &log);
    assert_eq!(lines.len(), 2, "{text}");
    let (whole, range) = (&lines[0], &lines[1]);
    assert_eq!(
        (whole["status"].as_u64(), whole["bytes"].as_u64()),
        (Some(200), Some(SIZE as u64)),
        "{text}"
    );
    let us = whole["request_time_us"].as_u64().unwrap();
    assert!(
        us >= HOLD.as_micros() as u64,
        "the line stopped before the last byte: {us} µs"
    );
    assert_eq!(
        (range["status"].as_u64(), range["bytes"].as_u64()),
        (Some(206), Some(10)),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The QUIC section: `linerate load --http3`'s connections (the preflight's and the run's),
/// counted as each ends (a client's CONNECTION_CLOSE, then the drain period): handshakes
/// completed, none failed, packets sent; no Retry at this load.
#[test]
fn quic_connections_are_counted_as_they_end() {
    let dir = std::env::temp_dir().join(format!("linerate-metrics-quic-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(dir.join("cert.pem"), ck.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), ck.signing_key.serialize_pem()).unwrap();
    let cfg = Config {
        admin: Some("127.0.0.1:0".parse().unwrap()),
        tls: Some(linerate_server::TlsConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            cert: Some(linerate_server::config::CertPair {
                cert: dir.join("cert.pem"),
                key: dir.join("key.pem"),
            }),
            ktls: false,
            key_update_bytes: linerate_server::tls::TLS_KEY_UPDATE_BYTES,
            http2: true,
            options: Default::default(),
        }),
        quic: true,
        ..config()
    };
    let server = linerate_server::Server::bind(cfg, linerate::demo::router()).expect("bind");
    let admin = server.admin_addr().expect("admin address");
    let udp = server.quic_addrs()[0];
    let (addr, handle, stats) = (server.local_addr(), server.handle(), server.stats());
    let thread = std::thread::spawn(move || server.run());
    let running = common::Running {
        addr,
        handle,
        stats,
        thread: Some(thread),
    };
    let o = linerate_load::LoadOptions {
        url: format!("https://{udp}/plaintext"),
        http3: true,
        insecure: true,
        threads: Some(1),
        connections: 2,
        streams: 4,
        requests: Some(40),
        timeout: std::time::Duration::from_secs(10),
        ..linerate_load::LoadOptions::default()
    };
    let cfg = linerate_load::Config::from_options(&o).expect("valid options");
    let report = linerate_load::measure(&cfg).expect("the run");
    assert_eq!(report.runs[0].responses, 40, "{:?}", report.runs[0]);
    // Each connection is counted once it is gone (after its drain period: bounded here).
    let mut scrape = None;
    let mut last = String::new();
    for _ in 0..200 {
        let (status, body) = admin_get(admin, "/metrics");
        assert_eq!(status, 200);
        let s = Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).unwrap();
        last = body
            .lines()
            .filter(|l| l.contains("quic") || l.contains("connections"))
            .collect::<Vec<_>>()
            .join("\n");
        if value(&s, "linerate_quic_handshakes_total", &[]) >= 3.0 {
            scrape = Some(s);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let scrape =
        scrape.unwrap_or_else(|| panic!("the QUIC connections ended and were counted:\n{last}"));
    assert_eq!(value(&scrape, "linerate_quic_handshakes_total", &[]), 3.0);
    assert_eq!(
        value(&scrape, "linerate_quic_handshake_failures_total", &[]),
        0.0
    );
    assert_eq!(value(&scrape, "linerate_quic_retries_total", &[]), 0.0);
    // Packets went out (loss is the netem stage's to see). At least three a connection: an
    // Initial and a Handshake packet (packet number spaces of their own, so never one packet),
    // and a 1-RTT one (HANDSHAKE_DONE, the answers). How many more depends on the datagram
    // size, which on loopback is large (path_mtu.rs): answers share packets.
    let sent = value(&scrape, "linerate_quic_packets_sent_total", &[]);
    assert!(sent >= 3.0 * 3.0, "{sent} packets sent");
    value(&scrape, "linerate_quic_packets_lost_total", &[]);
    running.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
