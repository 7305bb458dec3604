//! firstflight against real servers on 127.0.0.1: linerate-server for Content-Length
//! responses (bodies just under and just over 10 segments of 1460 bytes, an HTML page with
//! its resources, a gzip page), and a canned raw server for chunked, close-delimited and
//! interim responses, which linerate-server never sends. Every wait is bounded.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::thread::JoinHandle;
use std::time::Duration;

use linerate_lab::firstflight::{self, CheckError, FetchError, Options, Report, Timeouts};
use linerate_server::{Body, Config, Response, Router, Server, ShutdownHandle};

/// The MSS the verdicts assume, so they do not depend on loopback's.
const MSS: u32 = 1460;
/// RFC 6928's window in bytes at [`MSS`].
const WINDOW: u64 = 10 * MSS as u64;
/// Longest a test waits for a response.
const TEST_TIMEOUT: Duration = Duration::from_secs(10);

struct Running {
    addr: SocketAddr,
    handle: ShutdownHandle,
    thread: Option<JoinHandle<std::io::Result<()>>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.handle.shutdown();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn start(router: Router) -> Running {
    let config = Config {
        addr: "127.0.0.1:0".parse().unwrap(),
        workers: 1,
        pin: false,
        linger_timeout: Duration::from_millis(200),
        // Bodies go out exactly as the handlers made them, so sizes are known; what the server
        // compresses itself is its own tests' business.
        compression: linerate_server::config::Compression {
            enabled: false,
            ..Default::default()
        },
        ..Config::default()
    };
    let server = Server::bind(config, router).expect("bind");
    let addr = server.local_addr();
    let handle = server.handle();
    let thread = Some(std::thread::spawn(move || server.run()));
    Running {
        addr,
        handle,
        thread,
    }
}

fn options() -> Options {
    Options {
        mss: MSS,
        timeouts: Timeouts {
            connect: TEST_TIMEOUT,
            exchange: TEST_TIMEOUT,
        },
        ..Options::default()
    }
}

fn check(addr: SocketAddr, path: &str) -> Report {
    firstflight::check(&format!("http://{addr}{path}"), &options()).expect("check")
}

/// A self-signed certificate for `localhost` and 127.0.0.1 as PEM files in a fresh directory.
fn certs(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("linerate-ff-tls-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let ck =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    std::fs::write(dir.join("cert.pem"), ck.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), ck.signing_key.serialize_pem()).unwrap();
    dir
}

/// [`start`] with an HTTPS port too; returns the server and its HTTPS address.
fn start_tls(router: Router, certs: &std::path::Path) -> (Running, SocketAddr) {
    let (running, tls_addr, _) = start_https(router, certs, false);
    (running, tls_addr)
}

/// [`start_tls`] serving HTTP/3 too; returns the server and its QUIC (UDP) address.
fn start_quic(router: Router, certs: &std::path::Path) -> (Running, SocketAddr) {
    let (running, _, quic) = start_https(router, certs, true);
    (running, quic.expect("a QUIC address"))
}

/// The server with HTTPS (and with `quic`, HTTP/3): it, its HTTPS and its QUIC address.
fn start_https(
    router: Router,
    certs: &std::path::Path,
    quic: bool,
) -> (Running, SocketAddr, Option<SocketAddr>) {
    let config = Config {
        addr: "127.0.0.1:0".parse().unwrap(),
        workers: 1,
        pin: false,
        linger_timeout: Duration::from_millis(200),
        compression: linerate_server::config::Compression {
            enabled: false,
            ..Default::default()
        },
        tls: Some(linerate_server::TlsConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            cert: Some(linerate_server::config::CertPair {
                cert: certs.join("cert.pem"),
                key: certs.join("key.pem"),
            }),
            ktls: false,
            key_update_bytes: linerate_server::tls::TLS_KEY_UPDATE_BYTES,
            http2: true,
            options: Default::default(),
        }),
        quic,
        ..Config::default()
    };
    let server = Server::bind(config, router).expect("bind");
    let addr = server.local_addr();
    let tls_addr = server.tls_addr().expect("TLS address");
    let quic_addr = server.quic_addrs().first().copied();
    let handle = server.handle();
    let thread = Some(std::thread::spawn(move || server.run()));
    (
        Running {
            addr,
            handle,
            thread,
        },
        tls_addr,
        quic_addr,
    )
}

#[test]
fn https_counts_the_tls_records_after_the_handshake() {
    let dir = certs("records");
    let (_server, tls_addr) = start_tls(sized_router(), &dir);
    let opts = Options {
        verify: linerate_load::tls::Verify::CaFile(dir.join("cert.pem")),
        ..options()
    };
    // (body bytes, at least this many records: rustls puts at most 16 KiB of HTTP in one)
    for (body, min_records) in [(100u64, 1u64), (20_000, 2), (40_000, 3)] {
        let url = format!("https://localhost:{}/sized/{body}", tls_addr.port());
        let report = firstflight::check(&url, &opts).expect("https check");
        let p = &report.page;
        assert_eq!((p.status, p.body_bytes), (200, body));
        let t = p
            .tls
            .as_ref()
            .expect("an https exchange says what TLS carried");
        assert!(t.records >= min_records, "{body}: {t:?}");
        assert_eq!(t.bytes, p.wire_bytes);
        // Every record adds at least its 5-byte header (and a tag) to the HTTP bytes.
        assert!(
            p.wire_bytes >= p.head_bytes + p.body_bytes + 5 * t.records,
            "{body}: {} wire, {} HTTP, {t:?}",
            p.wire_bytes,
            p.head_bytes + p.body_bytes
        );
        assert_eq!(
            report.verdict.bytes, p.wire_bytes,
            "the verdict judges TLS bytes"
        );
        assert!(t.version.starts_with("TLSv1_"), "{t:?}");
        let text = firstflight::report::render(&report);
        assert!(
            text.contains(&format!(
                "https: the {} bytes are what the server sent after the TLS handshake",
                p.wire_bytes
            )),
            "{text}"
        );
        assert!(text.starts_with(&format!("GET {url} → 200")), "{text}");
    }
    // Verified against the webpki roots, the self-signed certificate is refused in one line.
    let url = format!("https://127.0.0.1:{}/sized/1", tls_addr.port());
    let e = firstflight::check(&url, &options())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("TLS: ") && e.contains("certificate") && !e.contains('\n'),
        "{e}"
    );
    // --insecure takes it.
    let insecure = Options {
        verify: linerate_load::tls::Verify::Insecure,
        ..options()
    };
    assert!(
        firstflight::check(&url, &insecure)
            .unwrap()
            .page
            .tls
            .is_some()
    );
    std::fs::remove_dir_all(&dir).ok();
}

fn sized_router() -> Router {
    Router::new().get("/sized/{n}", |req| {
        let n: usize = req.param("n").and_then(|n| n.parse().ok()).unwrap_or(0);
        Response::new(200)
            .content_type("text/plain")
            .body(Body::Owned(vec![b'x'; n]))
    })
}

#[test]
fn bodies_just_under_and_just_over_ten_segments() {
    let server = start(sized_router());
    // The head's size does not depend on the body but for Content-Length's digits: probe
    // with a body of as many digits as the ones below.
    let probe = check(server.addr, "/sized/10000");
    assert_eq!(probe.page.body_bytes, 10000);
    let head = probe.page.head_bytes;

    // (wire bytes relative to 10 × 1460, fits, segments at MSS 1460)
    let rows: &[(i64, bool, u64)] = &[
        (-10, true, 10),
        (-1, true, 10),
        (0, true, 10),
        (1, false, 11),
        (10, false, 11),
    ];
    for &(delta, fits, segments) in rows {
        let wire = (WINDOW as i64 + delta) as u64;
        let report = check(server.addr, &format!("/sized/{}", wire - head));
        let v = &report.verdict;
        assert_eq!(report.page.status, 200);
        assert_eq!(report.page.wire_bytes, wire, "delta {delta}");
        assert_eq!(report.page.head_bytes, head);
        assert_eq!(report.page.encoding, "identity");
        assert_eq!((v.mss, v.initcwnd, v.window_bytes), (MSS, 10, WINDOW));
        assert_eq!((v.fits, v.segments), (fits, segments), "delta {delta}");
        assert_eq!(v.over_bytes, wire.saturating_sub(WINDOW), "delta {delta}");
        assert_eq!(v.spare_bytes, WINDOW.saturating_sub(wire), "delta {delta}");
        assert_eq!(report.fits(), fits);
        assert!(report.first_view.is_none(), "text/plain is not scanned");
        // Loopback's MSS is far larger: the same bytes are one or two segments there.
        let mss = report.connection_mss.expect("TCP_MAXSEG on loopback");
        assert!(mss > MSS, "loopback MSS {mss}");
        let cv = report.connection_verdict.expect("connection verdict");
        assert!(cv.fits && cv.segments == wire.div_ceil(u64::from(mss)));
    }
}

#[test]
fn text_report_states_both_mss() {
    let server = start(sized_router());
    let report = check(server.addr, "/sized/26");
    let text = firstflight::report::render(&report);
    let want = format!(
        "GET http://{}/sized/26 → 200, {} bytes on the wire (headers {} + body 26, identity); connection MSS {}",
        server.addr,
        report.page.wire_bytes,
        report.page.head_bytes,
        report.connection_mss.unwrap()
    );
    assert!(text.starts_with(&want), "{text}");
    assert!(
        text.contains("at MSS 1460: 1 of 10 segments — fits the initial window"),
        "{text}"
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["verdict"]["mss"], 1460);
    assert_eq!(json["page"]["wire_bytes"], report.page.wire_bytes);
}

const PAGE: &str = r#"<!DOCTYPE html>
<html><head>
<link rel="stylesheet" href="/a.css">
<script src="/b.js"></script>
<script src="https://cdn.example/x.js"></script>
<script src="http://other.example:8080/y.js"></script>
<link rel="icon" href="data:,">
</head><body>
<!-- <img src="/commented-out.png"> -->
<img src="c.png" alt="relative to /site/">
<img src="/a.css">
<script src="/missing.js"></script>
</body></html>
"#;
const CSS: &[u8] = &[b'c'; 3000];
const JS: &[u8] = &[b'j'; 5000];
const PNG: &[u8] = &[b'p'; 7000];

fn site_router() -> Router {
    Router::new()
        .get("/site/index.html", |_| {
            Response::new(200)
                .content_type("text/html; charset=utf-8")
                .body(Body::Static(PAGE.as_bytes()))
        })
        .get("/site/gz.html", |_| {
            let gz = gzip(PAGE.as_bytes());
            Response::new(200)
                .content_type("text/html")
                .header("content-encoding", "gzip")
                .body(Body::Owned(gz))
        })
        .get("/a.css", |_| {
            Response::new(200)
                .content_type("text/css")
                .body(Body::Static(CSS))
        })
        .get("/b.js", |_| {
            Response::new(200)
                .content_type("text/javascript")
                .body(Body::Static(JS))
        })
        .get("/site/c.png", |_| {
            Response::new(200)
                .content_type("image/png")
                .body(Body::Static(PNG))
        })
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

#[test]
fn html_first_view_is_page_plus_same_origin_resources() {
    let server = start(site_router());
    for (path, encoding, body_len) in [
        ("/site/index.html", "identity", PAGE.len() as u64),
        ("/site/gz.html", "gzip", gzip(PAGE.as_bytes()).len() as u64),
    ] {
        let report = check(server.addr, path);
        assert_eq!(report.page.encoding, encoding);
        assert_eq!(
            report.page.body_bytes, body_len,
            "{path}: body counted as sent"
        );
        let view = report
            .first_view
            .as_ref()
            .expect("an HTML page gets a first view");
        assert_eq!(view.scan_error, None);
        let origin = format!("http://{}", server.addr);
        // (url, kind, status, body bytes)
        let want: &[(&str, &str, u16, Option<u64>)] = &[
            ("/a.css", "stylesheet", 200, Some(CSS.len() as u64)),
            ("/b.js", "script", 200, Some(JS.len() as u64)),
            ("/site/c.png", "image", 200, Some(PNG.len() as u64)),
            // Reported, not a crash: a 404 still crossed the wire.
            ("/missing.js", "script", 404, None),
        ];
        let got: Vec<_> = view
            .resources
            .iter()
            .map(|r| {
                let e = r
                    .exchange
                    .as_ref()
                    .unwrap_or_else(|| panic!("{}: {:?}", r.url, r.error));
                assert_eq!(e.wire_bytes, e.head_bytes + e.body_bytes);
                (r.url.clone(), r.kind, e.status, e.body_bytes)
            })
            .collect();
        assert_eq!(got.len(), want.len(), "{got:?}");
        for ((url, kind, status, body), (wurl, wkind, wstatus, wbody)) in got.iter().zip(want) {
            assert_eq!(
                (url.as_str(), *kind, *status),
                (format!("{origin}{wurl}").as_str(), *wkind, *wstatus)
            );
            if let Some(wbody) = wbody {
                assert_eq!(body, wbody, "{url}");
            }
        }
        let sum: u64 = view
            .resources
            .iter()
            .map(|r| r.exchange.as_ref().unwrap().wire_bytes)
            .sum();
        assert_eq!(view.total_bytes, report.page.wire_bytes + sum);
        // 15 kB of resources alone exceed 10 × 1460.
        assert!(!view.verdict.fits && view.verdict.over_bytes == view.total_bytes - WINDOW);
        assert!(
            !report.fits(),
            "the exit status follows the whole first view"
        );

        let skipped: Vec<(&str, &str)> = view
            .skipped
            .iter()
            .map(|s| (s.url.as_str(), s.reason.as_str()))
            .collect();
        let a_css = format!("{origin}/a.css");
        assert_eq!(
            skipped,
            [
                ("https://cdn.example/x.js", "other origin (https)"),
                ("http://other.example:8080/y.js", "other origin"),
                ("data:,", "not fetched (data: URL)"),
                (a_css.as_str(), "duplicate"),
            ],
            "{path}"
        );
        let text = firstflight::report::render(&report);
        assert!(
            text.contains("skipped https://cdn.example/x.js (other origin (https))"),
            "{text}"
        );
        assert!(
            text.contains(&format!("total {} bytes on the wire", view.total_bytes)),
            "{text}"
        );
    }
}

#[test]
fn no_resources_checks_only_the_page() {
    let server = start(site_router());
    let opts = Options {
        resources: false,
        ..options()
    };
    let report =
        firstflight::check(&format!("http://{}/site/index.html", server.addr), &opts).unwrap();
    assert!(report.first_view.is_none());
    assert!(report.fits());
}

/// A raw server that answers each connection's request with the canned bytes for its path
/// (an empty answer: close without one), then closes.
fn canned(routes: Vec<(&'static str, Vec<u8>)>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            stream.set_read_timeout(Some(TEST_TIMEOUT)).unwrap();
            let mut req = Vec::new();
            let mut buf = [0u8; 1024];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => req.extend_from_slice(&buf[..n]),
                }
            }
            let line = String::from_utf8_lossy(&req)
                .lines()
                .next()
                .unwrap_or_default()
                .to_string();
            let path = line.split(' ').nth(1).unwrap_or_default().to_string();
            if let Some((_, answer)) = routes.iter().find(|(p, _)| *p == path) {
                let _ = stream.write_all(answer);
            }
            let _ = stream.shutdown(std::net::Shutdown::Write);
            // Drain so closing does not reset what was sent.
            let _ = stream.read(&mut buf);
        }
    });
    addr
}

#[test]
fn framing_is_counted_byte_for_byte() {
    // (path, canned response, content length after de-chunking, framing)
    let rows: Vec<(&'static str, Vec<u8>, u64, &str)> = vec![
        ("/cl", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".to_vec(), 5, "content-length"),
        (
            "/chunked",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=y\r\n world\r\n0\r\nT: 1\r\n\r\n".to_vec(),
            11,
            "chunked",
        ),
        ("/close", b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the server closes".to_vec(), 23, "close"),
        ("/early", b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n".to_vec(), 0, "none"),
    ];
    let addr = canned(rows.iter().map(|(p, r, _, _)| (*p, r.clone())).collect());
    for (path, wire, content, framing) in &rows {
        let report = check(addr, path);
        let p = &report.page;
        assert_eq!(
            p.wire_bytes,
            wire.len() as u64,
            "{path}: every byte counted"
        );
        assert_eq!(p.framing, *framing, "{path}");
        if *framing != "chunked" {
            assert_eq!(p.body_bytes, *content, "{path}");
            assert_eq!(
                p.head_bytes as usize,
                wire.len() - *content as usize,
                "{path}"
            );
        } else {
            let first_head = wire.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
            assert_eq!(p.head_bytes as usize, first_head);
            assert_eq!(
                p.body_bytes as usize,
                wire.len() - first_head,
                "{path}: framing counted"
            );
            assert!(p.body_bytes > *content);
        }
    }
}

#[test]
fn chunked_html_and_a_resource_without_response() {
    let page = b"<img src=/gone.png><img src=/ok.png>";
    let mut chunked = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n",
        page.len()
    )
    .into_bytes();
    chunked.extend_from_slice(page);
    chunked.extend_from_slice(b"\r\n0\r\n\r\n");
    let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec();
    let addr = canned(vec![
        ("/", chunked.clone()),
        ("/gone.png", Vec::new()),
        ("/ok.png", ok.clone()),
    ]);
    let report = check(addr, "/");
    assert_eq!(report.page.wire_bytes, chunked.len() as u64);
    let view = report.first_view.expect("first view");
    assert_eq!(view.resources.len(), 2);
    let gone = &view.resources[0];
    assert!(gone.exchange.is_none());
    assert!(
        gone.error
            .as_deref()
            .unwrap()
            .contains("closed before the end"),
        "{:?}",
        gone.error
    );
    assert_eq!(
        view.resources[1].exchange.as_ref().unwrap().wire_bytes,
        ok.len() as u64
    );
    assert_eq!(view.total_bytes, (chunked.len() + ok.len()) as u64);
}

#[test]
fn errors_are_one_clear_line() {
    // A port nobody listens on: bind one, note it, free it.
    let free = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    // A listener that never accepts: the handshake completes in the backlog, no answer comes.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let quick = Options {
        timeouts: Timeouts {
            connect: TEST_TIMEOUT,
            exchange: Duration::from_millis(300),
        },
        ..options()
    };
    let rows: Vec<(String, &str)> = vec![
        (format!("http://{free}/"), "connection refused by"),
        (
            format!("http://{}/", silent.local_addr().unwrap()),
            "no complete response within 0.3 s",
        ),
        ("ftp://example.com/".to_string(), "unsupported scheme"),
        ("127.0.0.1:80".to_string(), "expected http://"),
    ];
    for (url, msg) in rows {
        let e = firstflight::check(&url, &quick).unwrap_err();
        let text = e.to_string();
        assert!(text.contains(msg) && !text.contains('\n'), "{url}: {text}");
        if msg.starts_with("connection refused") {
            assert!(matches!(e, CheckError::Fetch(FetchError::Connect { .. })));
        }
    }
    drop(silent);
}

/// `--http3`: the server's first flight of datagrams after the request, nothing acknowledged.
/// A 1 kB page comes whole in it; a 200 kB one cannot (the window is 14,720 bytes, grown at
/// most by the handshake's acknowledged bytes), and its burst stays within a bound. No
/// timing is asserted: the quiet gap only ends the count.
#[test]
fn http3_first_flight_small_page_fits_large_page_does_not() {
    let dir = certs("quic");
    let (_server, quic_addr) = start_quic(sized_router(), &dir);
    let opts = Options {
        verify: linerate_load::tls::Verify::CaFile(dir.join("cert.pem")),
        ..options()
    };
    let window = firstflight::QUIC_INITIAL_WINDOW;
    let url = |n: u64| format!("https://127.0.0.1:{}/sized/{n}", quic_addr.port());

    let small = firstflight::check_quic(&url(1000), &opts, window).expect("HTTP/3 check");
    let f = &small.flight;
    assert_eq!((f.status, f.body_bytes), (200, 1000));
    assert!(small.fits && f.complete_in_burst, "{f:?}");
    assert_eq!(f.burst_body_bytes, 1000);
    assert_eq!(
        f.burst_stream_bytes, f.stream_bytes,
        "all of the stream came"
    );
    assert!(f.burst.bytes > 1000 && f.burst.bytes < window, "{f:?}");
    assert_eq!(f.response, f.burst, "nothing came after the first flight");
    assert!(f.before_request.datagrams > 0, "the handshake was counted");
    let text = firstflight::report::render_quic(&small);
    assert!(
        text.starts_with(&format!(
            "GET {} over HTTP/3 → 200, body 1000 bytes",
            url(1000)
        )),
        "{text}"
    );
    assert!(text.contains("verdict: the whole response came"), "{text}");

    let big = firstflight::check_quic(&url(200_000), &opts, window).expect("HTTP/3 check");
    let f = &big.flight;
    assert_eq!((f.status, f.body_bytes), (200, 200_000));
    assert!(!big.fits && !f.complete_in_burst, "{f:?}");
    assert!(
        f.burst.datagrams > 0 && f.burst_body_bytes < 200_000,
        "{f:?}"
    );
    // The window the burst may use: the initial one plus every byte acknowledged before the
    // request; a probe or two of new data on a stalled machine fits the slack.
    assert!(
        f.burst.bytes <= big.grown_window_bound + 4 * f.burst.largest,
        "{f:?}"
    );
    assert!(f.burst.bytes <= 64 * 1024, "{f:?}");
    assert_ne!(big.window, firstflight::WindowReading::NotReached);
    assert_eq!(small.window, firstflight::WindowReading::NotReached);
    assert!(f.response.bytes > 200_000 && f.response.datagrams > f.burst.datagrams);
    assert!(f.stream_bytes > 200_000 && f.burst_stream_bytes < f.stream_bytes);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn http3_errors_are_one_clear_line() {
    let dir = certs("quic-errors");
    let (_server, quic_addr) = start_quic(sized_router(), &dir);
    let window = firstflight::QUIC_INITIAL_WINDOW;
    // A UDP port nobody listens on: ICMP says so, read as a refusal.
    let free = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let rows: Vec<(String, &str)> = vec![
        (
            format!("http://127.0.0.1:{}/", quic_addr.port()),
            "use an https:// URL",
        ),
        (format!("https://{free}/"), "connection refused by"),
        // Verified against the webpki roots, the self-signed certificate is refused.
        (
            format!("https://127.0.0.1:{}/sized/1", quic_addr.port()),
            "certificate",
        ),
    ];
    for (url, msg) in rows {
        let e = firstflight::check_quic(&url, &options(), window).unwrap_err();
        let text = e.to_string();
        assert!(text.contains(msg) && !text.contains('\n'), "{url}: {text}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
