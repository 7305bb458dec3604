//! The reverse proxy to HTTP/2 upstreams over TLS (`--proxy /=h2://…`, `protocol = "h2"`),
//! against real servers on 127.0.0.1: linerate's own HTTPS listener (the demo's gRPC
//! services: unary, server- and client-streaming calls), a TLS server that chooses only
//! HTTP/1.1 by ALPN (no HTTP/2 byte may reach it), and an upstream whose certificate is not
//! trusted. The client side is hyperium's `h2` over the proxy's h2c listener.

mod common;

use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use bytes::Bytes;
use common::bin::{Served, serve};

/// How long a test waits for something that must happen (never a measured duration).
const WAIT: Duration = Duration::from_secs(20);

/// HttpArena's prebuilt GetSum call (a = 1, b = 2) and its answer's message (result = 3).
const GET_SUM: &[u8] = &[0, 0, 0, 0, 4, 0x08, 1, 0x10, 2];
const GET_SUM_ANSWER: &[u8] = &[0, 0, 0, 0, 2, 0x08, 3];

/// A fresh directory with a self-signed certificate for `localhost` (cert.pem, key.pem).
fn certs(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("linerate-h2tls-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(dir.join("cert.pem"), ck.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), ck.signing_key.serialize_pem()).unwrap();
    dir
}

/// The port on a banner's line after `marker`.
fn port_after(s: &Served, marker: &str) -> u16 {
    s.banner
        .iter()
        .find_map(|l| l.split(marker).nth(1))
        .unwrap_or_else(|| panic!("the banner has {marker:?}: {:?}", s.banner))
        .split(|c: char| !c.is_ascii_digit())
        .find(|p| !p.is_empty())
        .unwrap()
        .parse()
        .unwrap()
}

/// The demo over HTTPS (ALPN h2) with the certificate in `dir`: the upstream; its TLS port.
fn demo_upstream(dir: &Path) -> (Served, u16) {
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    let up = serve(&[
        "--tls-port",
        "0",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    let port = port_after(&up, "HTTPS on https://127.0.0.1:");
    (up, port)
}

/// A proxy (no app) sending everything to `target`, with its own h2c listener for the
/// clients; its h2c address.
fn proxy_to(target: &str, extra: &[&str]) -> (Served, SocketAddr) {
    let target = format!("/={target}");
    let mut args = vec!["--app", "none", "--h2c-port", "0", "--proxy", &target];
    args.extend_from_slice(extra);
    let proxy = serve(&args);
    let port = port_after(&proxy, "(h2c, prior knowledge) on http://127.0.0.1:");
    (proxy, SocketAddr::from(([127, 0, 0, 1], port)))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// An answer as the client saw it.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: http::HeaderMap,
    body: Vec<u8>,
    trailers: Option<http::HeaderMap>,
}

/// A gRPC call `path` with `body` (its framed messages) on a new h2 connection to `addr`.
fn grpc_call(addr: SocketAddr, path: &str, body: &[u8]) -> Answer {
    let path = path.to_string();
    let body = Bytes::copy_from_slice(body);
    runtime().block_on(async move {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (client, conn) = h2::client::handshake(tcp).await.unwrap();
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let req = http::Request::builder()
            .method("POST")
            .uri(format!("http://proxied{path}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .unwrap();
        let mut client = client.ready().await.unwrap();
        let (answer, mut send) = client.send_request(req, false).unwrap();
        send.send_data(body, true).unwrap();
        let (head, mut recv) = tokio::time::timeout(WAIT, answer)
            .await
            .expect("an answer in time")
            .unwrap()
            .into_parts();
        let mut body = Vec::new();
        while let Some(piece) = recv.data().await {
            let piece = piece.unwrap();
            let _ = recv.flow_control().release_capacity(piece.len());
            body.extend_from_slice(&piece);
        }
        let trailers = recv.trailers().await.unwrap();
        Answer {
            status: head.status.as_u16(),
            headers: head.headers,
            body,
            trailers,
        }
    })
}

/// A gRPC message frame (uncompressed) around `msg`.
fn frame(msg: &[u8]) -> Vec<u8> {
    let mut f = vec![0];
    f.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    f.extend_from_slice(msg);
    f
}

/// The messages of a gRPC body, each checked uncompressed and whole.
fn messages(mut body: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while !body.is_empty() {
        assert!(
            body.len() >= 5 && body[0] == 0,
            "a frame's prefix: {body:?}"
        );
        let len = u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize;
        out.push(body[5..5 + len].to_vec());
        body = &body[5 + len..];
    }
    out
}

/// The `grpc-status` of an answer: its trailers', or its head's (Trailers-Only).
fn grpc_status(a: &Answer) -> String {
    a.trailers
        .as_ref()
        .and_then(|t| t.get("grpc-status"))
        .or_else(|| a.headers.get("grpc-status"))
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default()
}

#[test]
fn grpc_calls_go_through_the_proxy_to_an_h2_upstream_over_tls() {
    let dir = certs("calls");
    let (_up, port) = demo_upstream(&dir);
    let ca = dir.join("cert.pem");
    // Verified as "localhost" (the host as written), against the certificate given as CA.
    let target = format!("h2://localhost:{port}");
    let (_proxy, addr) = proxy_to(&target, &["--proxy-tls-ca", ca.to_str().unwrap()]);

    // Unary.
    let a = grpc_call(addr, "/benchmark.BenchmarkService/GetSum", GET_SUM);
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(a.headers["content-type"], "application/grpc");
    assert_eq!(a.body, GET_SUM_ANSWER, "{a:?}");
    assert_eq!(grpc_status(&a), "0", "trailers relayed: {a:?}");

    // Server streaming: StreamingOutputCallRequest { response_parameters: [{size: 10},
    // {size: 20}, {size: 30}] } answers three messages, each a payload of that size.
    let mut req = Vec::new();
    for size in [10u8, 20, 30] {
        req.extend_from_slice(&[0x12, 2, 0x08, size]);
    }
    let a = grpc_call(
        addr,
        "/grpc.testing.TestService/StreamingOutputCall",
        &frame(&req),
    );
    assert_eq!((a.status, grpc_status(&a).as_str()), (200, "0"), "{a:?}");
    let sizes: Vec<usize> = messages(&a.body).iter().map(Vec::len).collect();
    // StreamingOutputCallResponse { payload: Payload { body: N bytes } }: N + 4 bytes.
    assert_eq!(sizes, [14, 24, 34], "three messages in order: {a:?}");

    // Client streaming: four StreamingInputCallRequest { payload: { body } } messages, the
    // answer their aggregated size (250 + 300 + 7 + 3 = 560).
    let mut body = Vec::new();
    for n in [250usize, 300, 7, 3] {
        let mut payload = vec![0x12];
        put_varint(&mut payload, n);
        payload.extend(std::iter::repeat_n(0xab, n));
        let mut msg = vec![0x0a];
        put_varint(&mut msg, payload.len());
        msg.extend_from_slice(&payload);
        body.extend_from_slice(&frame(&msg));
    }
    let a = grpc_call(addr, "/grpc.testing.TestService/StreamingInputCall", &body);
    assert_eq!((a.status, grpc_status(&a).as_str()), (200, "0"), "{a:?}");
    let mut want = vec![0x08];
    put_varint(&mut want, 560);
    assert_eq!(messages(&a.body), [want], "{a:?}");

    // An unknown method: the upstream's Trailers-Only UNIMPLEMENTED reaches the client.
    let a = grpc_call(addr, "/benchmark.BenchmarkService/NoSuchMethod", GET_SUM);
    assert_eq!((a.status, grpc_status(&a).as_str()), (200, "12"), "{a:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn put_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// What one connection to the HTTP/1.1 server brought: the protocol ALPN chose, and every
/// plaintext byte that came after the handshake.
type Seen = (Option<Vec<u8>>, Vec<u8>);

/// An HTTP/1.1 server's TLS, with these ALPN protocols (none: it ignores the client's
/// ALPN, as servers configured without it do, and the handshake completes with none), that
/// reports what each connection brought.
fn http11_tls_server(dir: &Path, alpn: &[&[u8]]) -> (SocketAddr, mpsc::Receiver<Seen>) {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = vec![CertificateDer::from_pem_file(dir.join("cert.pem")).unwrap()];
    let key = PrivateKeyDer::from_pem_file(dir.join("key.pem")).unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        // The proxy's tries (a failed handshake is tried again): a few connections.
        for _ in 0..4 {
            let Ok((tcp, _)) = listener.accept() else {
                return;
            };
            tcp.set_read_timeout(Some(WAIT)).unwrap();
            let conn = rustls::ServerConnection::new(config.clone()).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, tcp);
            // Read to the proxy's close (or an error): what came is what it sent after the
            // handshake (the handshake itself is rustls's).
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                match tls.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            let alpn = tls.conn.alpn_protocol().map(<[u8]>::to_vec);
            if tx.send((alpn, got)).is_err() {
                return;
            }
        }
    });
    (addr, rx)
}

#[test]
fn an_upstream_that_does_not_choose_h2_by_alpn_is_502_and_never_spoken_http2_to() {
    // Without ALPN the handshake completes with no protocol chosen (the proxy must see that
    // and stop); with `http/1.1` only, a server refuses the handshake (RFC 7301 §3.2's
    // no_application_protocol). Either way no HTTP/2 byte may reach it.
    for (name, alpn) in [("none", &[][..]), ("http11", &[&b"http/1.1"[..]][..])] {
        let dir = certs(&format!("alpn-{name}"));
        let (up, got) = http11_tls_server(&dir, alpn);
        let ca = dir.join("cert.pem");
        let target = format!("h2://localhost:{}", up.port());
        let (_proxy, addr) = proxy_to(&target, &["--proxy-tls-ca", ca.to_str().unwrap()]);
        let a = grpc_call(addr, "/benchmark.BenchmarkService/GetSum", GET_SUM);
        assert_eq!(a.status, 502, "ALPN {name}: {a:?}");
        let mut seen = vec![
            got.recv_timeout(WAIT)
                .expect("the server saw the proxy close"),
        ];
        seen.extend(got.try_iter());
        for (chosen, plain) in &seen {
            assert_eq!(chosen, &None, "ALPN {name}: nothing chosen");
            assert!(
                plain.is_empty(),
                "ALPN {name}: no HTTP/2 byte (no preface) went to an HTTP/1.1 server: {:?}",
                String::from_utf8_lossy(plain)
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn an_upstream_whose_certificate_is_not_trusted_is_502() {
    // The system's roots do not lead to a self-signed certificate: verification fails.
    let dir = certs("untrusted");
    let (_up, port) = demo_upstream(&dir);
    let target = format!("h2://localhost:{port}");
    let (_proxy, addr) = proxy_to(&target, &[]);
    let a = grpc_call(addr, "/benchmark.BenchmarkService/GetSum", GET_SUM);
    assert_eq!(a.status, 502, "{a:?}");
    // And with the certificate trusted but the wrong name: 502 as well.
    let ca = dir.join("cert.pem");
    let wrong = format!("h2://127.0.0.1:{port}");
    let (_proxy, addr) = proxy_to(&wrong, &["--proxy-tls-ca", ca.to_str().unwrap()]);
    let a = grpc_call(addr, "/benchmark.BenchmarkService/GetSum", GET_SUM);
    assert_eq!(
        a.status, 502,
        "verified as 127.0.0.1, which the certificate does not name: {a:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_configured_h2_upstream_over_tls_takes_its_name_and_ca_from_the_file() {
    let dir = certs("file");
    let (_up, port) = demo_upstream(&dir);
    let file = dir.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            r#"[[listen]]
addr = "127.0.0.1:0"
h2c = true

[[upstream]]
name = "grpc"
servers = ["127.0.0.1:{port}"]
protocol = "h2"
tls_server_name = "localhost"
tls_ca = "cert.pem"

[[site]]
default = true

[[site.proxy]]
prefix = "/"
upstream = "grpc"
"#
        ),
    )
    .unwrap();
    let proxy = common::bin::serve_as(&["--config", file.to_str().unwrap()]);
    let port = port_after(&proxy, "127.0.0.1:");
    let a = grpc_call(
        SocketAddr::from(([127, 0, 0, 1], port)),
        "/benchmark.BenchmarkService/GetSum",
        GET_SUM,
    );
    assert_eq!(a.body, GET_SUM_ANSWER, "{a:?}");
    assert_eq!(grpc_status(&a), "0", "{a:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn h2_proxy_urls_are_checked_in_one_line() {
    for (args, says) in [
        (
            vec!["--proxy", "/=https://127.0.0.1:1"],
            "over TLS upstreams speak HTTP/2 (h2://HOST:PORT)",
        ),
        (
            vec![
                "--proxy",
                "/=h2://127.0.0.1:1",
                "--proxy-tls-ca",
                "/nonexistent/ca.pem",
            ],
            "--proxy h2://127.0.0.1:1: /nonexistent/ca.pem:",
        ),
        (
            vec![
                "--proxy",
                "/=h2c://127.0.0.1:1",
                "--proxy-tls-ca",
                "/nonexistent/ca.pem",
            ],
            "--proxy-tls-ca is for upstreams over TLS: it needs an h2:// --proxy",
        ),
    ] {
        let mut all = vec!["serve", "--app", "none"];
        all.extend_from_slice(&args);
        let (code, err) = common::bin::run_err(&all);
        assert_ne!(code, 0, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    }
}

#[test]
fn an_h2_upstream_over_tls_passes_its_grpc_health_check_and_a_dead_server_is_taken_out() {
    let dir = certs("health");
    let log = dir.join("upstream-access.log");
    let up = serve(&[
        "--tls-port",
        "0",
        "--tls-cert",
        dir.join("cert.pem").to_str().unwrap(),
        "--tls-key",
        dir.join("key.pem").to_str().unwrap(),
        "--access-log",
        log.to_str().unwrap(),
    ]);
    let port = port_after(&up, "HTTPS on https://127.0.0.1:");
    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let file = dir.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            r#"workers = 1
[[listen]]
addr = "127.0.0.1:0"
h2c = true

[[upstream]]
name = "grpc"
servers = ["127.0.0.1:{port}", "{dead}"]
protocol = "h2"
tls_server_name = "localhost"
tls_ca = "cert.pem"
tries = 1
max_fails = 0
health_check = {{ interval = "50ms", timeout = "2s" }}

[[site]]
default = true

[[site.proxy]]
prefix = "/"
upstream = "grpc"
"#
        ),
    )
    .unwrap();
    let proxy = common::bin::serve_as(&["--config", file.to_str().unwrap()]);
    let proxy_port = port_after(&proxy, "127.0.0.1:");
    // A check starts only once the one before it has its verdict: a second Check call at
    // the upstream means the first one's verdict is in.
    common::eventually("two checks reach the upstream over TLS", || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .matches("/grpc.health.v1.Health/Check")
            .count()
            >= 2
    });
    // Both servers out (the TLS check failing too) would send every other call to the dead
    // one: only the TLS upstream answers now.
    common::eventually("every call goes to the healthy server", || {
        (0..6).all(|_| {
            let a = grpc_call(
                SocketAddr::from(([127, 0, 0, 1], proxy_port)),
                "/benchmark.BenchmarkService/GetSum",
                GET_SUM,
            );
            a.body == GET_SUM_ANSWER && grpc_status(&a) == "0"
        })
    });
    let _ = std::fs::remove_dir_all(&dir);
}
