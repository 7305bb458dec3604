//! HTTPS on a real server with a rustls client: GET/HEAD, keep-alive, pipelining, a file body
//! byte-exact over user-space TLS (pread) and over kTLS where the kernel has it, TLS 1.2 and
//! 1.3, and failure modes (plain HTTP on the TLS port, answered in plain text; no shared suite
//! or version, wrong SNI) that must end in a closed connection, never a hang. Certificates are made at test time.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;

use common::{Client, READ_TIMEOUT, Running, config};
use linerate_server::config::FilesMount;
use linerate_server::{Config, Server, TlsConfig};
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

const FILE_LEN: usize = 3 << 20;

/// A self-signed certificate for `localhost` written as PEM files in a fresh directory;
/// returns the directory and the certificate (the client's trust anchor).
fn certs(name: &str) -> (PathBuf, CertificateDer<'static>) {
    let dir = std::env::temp_dir().join(format!("linerate-tls-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("www")).unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(dir.join("cert.pem"), ck.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), ck.signing_key.serialize_pem()).unwrap();
    std::fs::write(dir.join("www/big.bin"), pattern(FILE_LEN)).unwrap();
    (dir, ck.cert.der().clone())
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i >> 16) as u8)
        .collect()
}

struct Tls {
    run: Running,
    tls_addr: SocketAddr,
    ktls: bool,
    anchor: CertificateDer<'static>,
}

/// Starts the demo app with HTTPS (and static files under /static).
fn serve(name: &str, ktls: bool) -> Tls {
    serve_with(name, ktls, linerate_server::tls::TLS_KEY_UPDATE_BYTES)
}

/// [`serve`], with the server updating its TLS 1.3 sending key every `key_update_bytes`.
fn serve_with(name: &str, ktls: bool, key_update_bytes: u64) -> Tls {
    let (dir, anchor) = certs(name);
    let cfg = Config {
        files: Some(FilesMount {
            prefix: "/static".into(),
            root: dir.join("www"),
            ..Default::default()
        }),
        tls: Some(TlsConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            cert: Some(linerate_server::config::CertPair {
                cert: dir.join("cert.pem"),
                key: dir.join("key.pem"),
            }),
            ktls,
            key_update_bytes,
            http2: true,
            options: Default::default(),
        }),
        ..config()
    };
    let server = Server::bind(cfg, linerate::demo::router()).expect("bind");
    let tls_addr = server.tls_addr().expect("TLS address");
    let ktls = server.ktls();
    let addr = server.local_addr();
    let handle = server.handle();
    let stats = server.stats();
    let thread = std::thread::spawn(move || server.run());
    Tls {
        run: Running {
            addr,
            handle,
            stats,
            thread: Some(thread),
        },
        tls_addr,
        ktls,
        anchor,
    }
}

fn client_config(
    anchor: &CertificateDer<'static>,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(anchor.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut cfg = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(cfg)
}

type TlsStream = StreamOwned<ClientConnection, TcpStream>;

fn connect(
    addr: SocketAddr,
    anchor: &CertificateDer<'static>,
    versions: &[&'static rustls::SupportedProtocolVersion],
    sni: &str,
) -> TlsStream {
    connect_with(addr, client_config(anchor, versions), sni)
}

fn connect_with(addr: SocketAddr, cfg: Arc<ClientConfig>, sni: &str) -> TlsStream {
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    tcp.set_write_timeout(Some(READ_TIMEOUT)).unwrap();
    let name = ServerName::try_from(sni.to_string()).unwrap();
    let conn = ClientConnection::new(cfg, name).unwrap();
    StreamOwned::new(conn, tcp)
}

fn tls13() -> Vec<&'static rustls::SupportedProtocolVersion> {
    vec![&rustls::version::TLS13]
}

fn tls12() -> Vec<&'static rustls::SupportedProtocolVersion> {
    vec![&rustls::version::TLS12]
}

/// One response framed by Content-Length: (status, body). `head_only` for HEAD.
fn read_response(s: &mut impl Read, pending: &mut Vec<u8>, head_only: bool) -> (u16, Vec<u8>) {
    let mut chunk = [0u8; 65536];
    let head_end = loop {
        if let Some(p) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        let n = s.read(&mut chunk).expect("read head");
        assert!(n > 0, "EOF before a response head");
        pending.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&pending[..head_end]).into_owned();
    let status: u16 = head[9..12].parse().unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().unwrap())
        })
        .unwrap_or(0);
    let len = if head_only { 0 } else { len };
    pending.drain(..head_end);
    while pending.len() < len {
        let n = s.read(&mut chunk).expect("read body");
        assert!(n > 0, "EOF inside a body");
        pending.extend_from_slice(&chunk[..n]);
    }
    let body = pending.drain(..len).collect();
    (status, body)
}

const JSON: &[u8] = br#"{"message":"Hello, World!"}"#;

fn get_json_keep_alive_pipelined_and_head(
    srv: &Tls,
    versions: &[&'static rustls::SupportedProtocolVersion],
) {
    let mut s = connect(srv.tls_addr, &srv.anchor, versions, "localhost");
    let mut pending = Vec::new();
    for _ in 0..3 {
        s.write_all(b"GET /json HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .unwrap();
        let (status, body) = read_response(&mut s, &mut pending, false);
        assert_eq!(status, 200);
        assert_eq!(body, JSON);
    }
    assert_eq!(s.conn.alpn_protocol(), Some(&b"http/1.1"[..]));
    assert_eq!(s.conn.protocol_version(), Some(versions[0].version));
    s.write_all(
        b"GET /json HTTP/1.1\r\nHost: x\r\n\r\n\
GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n\
HEAD /json HTTP/1.1\r\nHost: x\r\n\r\n\
GET /json HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .unwrap();
    assert_eq!(
        read_response(&mut s, &mut pending, false),
        (200, JSON.to_vec())
    );
    assert_eq!(
        read_response(&mut s, &mut pending, false),
        (200, b"Hello, World!".to_vec())
    );
    assert_eq!(read_response(&mut s, &mut pending, true), (200, Vec::new()));
    assert_eq!(
        read_response(&mut s, &mut pending, false),
        (200, JSON.to_vec())
    );
    assert!(pending.is_empty());
}

#[test]
fn https_get_keep_alive_pipelining_and_head_over_tls13() {
    let srv = serve("get13", false);
    get_json_keep_alive_pipelined_and_head(&srv, &tls13());
    srv.run.stop();
}

#[test]
fn https_get_keep_alive_pipelining_and_head_over_tls12() {
    let srv = serve("get12", false);
    get_json_keep_alive_pipelined_and_head(&srv, &tls12());
    srv.run.stop();
}

/// TLS 1.3 KeyUpdate from the client (user-space TLS: rustls updates its keys, and answers a
/// requested update with its own) leaves the connection working.
#[test]
fn tls13_key_update_keeps_the_connection_working() {
    let srv = serve("keyupdate", false);
    let mut s = connect(srv.tls_addr, &srv.anchor, &tls13(), "localhost");
    let mut pending = Vec::new();
    for _ in 0..3 {
        s.write_all(b"GET /json HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        assert_eq!(
            read_response(&mut s, &mut pending, false),
            (200, JSON.to_vec())
        );
        s.conn.refresh_traffic_keys().unwrap();
    }
    srv.run.stop();
}

/// The server updates its TLS 1.3 sending key every 64 KiB (`key_update_bytes`): a 3 MiB
/// file still arrives byte-exact, and the client's receive sequence number, which restarts
/// at 0 with each new key, ends far below the ~190 records the body took.
#[test]
fn server_key_updates_every_64k_keep_a_file_byte_exact() {
    let srv = serve_with("srvkeyupdate", false, 64 << 10);
    let mut cfg = (*client_config(&srv.anchor, &tls13())).clone();
    cfg.enable_secret_extraction = true;
    let mut s = connect_with(srv.tls_addr, Arc::new(cfg), "localhost");
    let mut pending = Vec::new();
    s.write_all(b"GET /static/big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let (status, body) = read_response(&mut s, &mut pending, false);
    assert_eq!(status, 200);
    assert!(body == pattern(FILE_LEN), "file body differs");
    s.write_all(b"GET /json HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert_eq!(
        read_response(&mut s, &mut pending, false),
        (200, JSON.to_vec())
    );
    let StreamOwned { conn, .. } = s;
    let secrets = conn.dangerous_extract_secrets().unwrap();
    let records = (FILE_LEN / (16 << 10)) as u64;
    assert!(
        secrets.rx.0 < 16,
        "receive sequence {} after {records}+ records: the server never updated its key",
        secrets.rx.0
    );
    srv.run.stop();
}

/// Resumption uses rustls's server defaults: a stateful session cache, reached by TLS 1.3
/// tickets and TLS 1.2 session IDs.
#[test]
fn sessions_resume_over_tls13_and_tls12() {
    let srv = serve("resume", false);
    for versions in [tls13(), tls12()] {
        let cfg = client_config(&srv.anchor, &versions);
        for round in 0..2 {
            let mut s = connect_with(srv.tls_addr, cfg.clone(), "localhost");
            let mut pending = Vec::new();
            s.write_all(b"GET /json HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap();
            assert_eq!(
                read_response(&mut s, &mut pending, false),
                (200, JSON.to_vec())
            );
            let kind = s.conn.handshake_kind();
            let want = if round == 0 {
                rustls::HandshakeKind::Full
            } else {
                rustls::HandshakeKind::Resumed
            };
            assert_eq!(kind, Some(want), "{:?} round {round}", versions[0].version);
        }
    }
    srv.run.stop();
}

/// A file body and a request pipelined behind it; then the connection is still usable.
fn fetch_file(srv: &Tls, versions: &[&'static rustls::SupportedProtocolVersion]) {
    let mut s = connect(srv.tls_addr, &srv.anchor, versions, "localhost");
    let mut pending = Vec::new();
    s.write_all(
        b"GET /static/big.bin HTTP/1.1\r\nHost: x\r\n\r\n\
GET /json HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .unwrap();
    let (status, body) = read_response(&mut s, &mut pending, false);
    assert_eq!(status, 200);
    assert_eq!(body.len(), FILE_LEN);
    assert!(body == pattern(FILE_LEN), "file body differs");
    assert_eq!(
        read_response(&mut s, &mut pending, false),
        (200, JSON.to_vec())
    );
    s.write_all(b"GET /static/big.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=100-109\r\n\r\n")
        .unwrap();
    let (status, body) = read_response(&mut s, &mut pending, false);
    assert_eq!(status, 206);
    assert_eq!(body, pattern(110)[100..]);
}

#[test]
fn file_body_over_user_space_tls_is_byte_exact() {
    let srv = serve("file", false);
    assert!(!srv.ktls);
    fetch_file(&srv, &tls13());
    fetch_file(&srv, &tls12());
    srv.run.stop();
}

#[test]
fn file_body_over_ktls_is_byte_exact() {
    if !linerate_server::tls::ktls_available() {
        eprintln!("skipping: kernel has no kTLS (tcp_available_ulp lacks tls)");
        return;
    }
    let srv = serve("ktls", true);
    assert!(srv.ktls, "kTLS detected but not enabled");
    fetch_file(&srv, &tls13());
    fetch_file(&srv, &tls12());
    get_json_keep_alive_pipelined_and_head(&srv, &tls13());
    srv.run.stop();
}

#[test]
fn plain_http_port_still_works_alongside() {
    let srv = serve("plain", false);
    let mut c = Client::connect(srv.run.addr);
    c.send(b"GET /json HTTP/1.1\r\nHost: x\r\n\r\n");
    let r = c.read_response();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, JSON);
    srv.run.stop();
}

#[test]
fn a_redirecting_listener_sends_every_request_to_https_where_the_site_answers() {
    let (dir, anchor) = certs("to-https");
    let cfg = Config {
        tls: Some(TlsConfig {
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
        redirect_to_https: true,
        ..config()
    };
    let server = Server::bind(cfg, linerate::demo::router()).expect("bind");
    let tls_addr = server.tls_addr().unwrap();
    let (addr, handle, stats) = (server.local_addr(), server.handle(), server.stats());
    let thread = std::thread::spawn(move || server.run());
    let run = Running {
        addr,
        handle,
        stats,
        thread: Some(thread),
    };
    let port = tls_addr.port();
    // (request, Location): the host lowercased and without its port, then the HTTPS port
    // the TLS listener got; the path and query kept; any method (308 repeats it).
    #[rustfmt::skip]
    let rows: &[(&[u8], String)] = &[
        (b"GET /json?a=1&b=2 HTTP/1.1\r\nHost: Example.COM:8080\r\n\r\n", format!("https://example.com:{port}/json?a=1&b=2")),
        (b"POST /form HTTP/1.1\r\nHost: a.test\r\nContent-Length: 3\r\n\r\nabc", format!("https://a.test:{port}/form")),
        (b"GET http://b.test/p?q HTTP/1.1\r\nHost: b.test\r\n\r\n", format!("https://b.test:{port}/p?q")),
        (b"OPTIONS * HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", format!("https://[::1]:{port}/")),
    ];
    let mut c = Client::connect(run.addr);
    for (req, location) in rows {
        c.send(req);
        let r = c.read_response();
        assert_eq!(r.status, 308, "{}", String::from_utf8_lossy(req));
        assert_eq!(r.header("location"), Some(location.as_str()));
    }
    // HTTP/1.0 without Host, and a site with no name of its own: nowhere to send it.
    let mut c = Client::connect(run.addr);
    c.send(b"GET / HTTP/1.0\r\n\r\n");
    assert_eq!(c.read_response().status, 400);
    // Over HTTPS the site itself answers: no redirect, no loop.
    let mut s = connect(tls_addr, &anchor, &tls13(), "localhost");
    s.write_all(b"GET /json HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut pending = Vec::new();
    assert_eq!(
        read_response(&mut s, &mut pending, false),
        (200, JSON.to_vec())
    );
    run.stop();
}

/// Reads until EOF (or a reset); panics on a timeout. Returns what arrived.
fn read_to_close(tcp: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match tcp.read(&mut chunk) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return got,
            Err(e) => panic!("connection not closed: {e}"),
        }
    }
}

fn raw(addr: SocketAddr) -> TcpStream {
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    tcp
}

/// Regression: plain HTTP to a TLS port got a raw TLS alert, which curl and
/// browsers show as an opaque error; it gets nginx's plain 400 instead, then the close. A
/// TLS client on the same listener is served as before.
#[test]
fn plain_http_on_the_tls_port_is_told_so_in_plain_http_and_closed() {
    let srv = serve("plainontls", false);
    let mut tcp = raw(srv.tls_addr);
    tcp.write_all(b"GET /json HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let got = String::from_utf8(read_to_close(&mut tcp)).expect("plain text");
    assert!(got.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{got}");
    assert!(got.contains("\r\nConnection: close\r\n"), "{got}");
    assert!(
        got.ends_with("\r\n\r\nThe plain HTTP request was sent to HTTPS port\n"),
        "{got}"
    );
    let mut s = connect(srv.tls_addr, &srv.anchor, &tls13(), "localhost");
    s.write_all(b"GET /json HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut s, &mut Vec::new(), false).0, 200);
    srv.run.stop();
}

/// A TLS ClientHello record offering `version` and only `suite`, with no extensions.
fn client_hello(version: [u8; 2], suite: [u8; 2]) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&version);
    body.extend_from_slice(&[7u8; 32]); // random
    body.push(0); // session id
    body.extend_from_slice(&[0, 2, suite[0], suite[1]]);
    body.extend_from_slice(&[1, 0]); // compression: null
    body.extend_from_slice(&[0, 0]); // no extensions
    let mut hs = vec![1u8, 0, (body.len() >> 8) as u8, body.len() as u8];
    hs.extend_from_slice(&body);
    let mut rec = vec![0x16, 3, 1, (hs.len() >> 8) as u8, hs.len() as u8];
    rec.extend_from_slice(&hs);
    rec
}

#[test]
fn no_shared_suite_or_version_ends_the_handshake_and_closes() {
    let srv = serve("noshared", false);
    for hello in [
        // TLS 1.2 offering only TLS_RSA_WITH_AES_128_CBC_SHA (not AEAD; not offered).
        client_hello([3, 3], [0x00, 0x2f]),
        // TLS 1.0 only.
        client_hello([3, 1], [0xc0, 0x2f]),
    ] {
        let mut tcp = raw(srv.tls_addr);
        tcp.write_all(&hello).unwrap();
        let got = read_to_close(&mut tcp);
        assert_eq!(got.first(), Some(&0x15), "expected an alert, got {got:?}");
    }
    // A rustls client limited to a suite the server does not negotiate for its version:
    // TLS 1.2 with only a TLS 1.3 suite offers nothing usable.
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    provider
        .cipher_suites
        .retain(|s| s.version() == &rustls::version::TLS13);
    let cfg = ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS12])
        .map(|b| {
            let mut roots = RootCertStore::empty();
            roots.add(srv.anchor.clone()).unwrap();
            b.with_root_certificates(roots).with_no_client_auth()
        });
    // rustls refuses to build such a client itself; either way no connection is made.
    assert!(cfg.is_err());
    srv.run.stop();
}

/// The server has one certificate and serves it whatever the SNI says; a client asking for
/// another name rejects it, and the connection closes cleanly.
#[test]
fn wrong_sni_fails_verification_and_closes() {
    let srv = serve("sni", false);
    let mut s = connect(srv.tls_addr, &srv.anchor, &tls13(), "other.example");
    let err = s
        .write_all(b"GET /json HTTP/1.1\r\nHost: x\r\n\r\n")
        .and_then(|()| s.flush())
        .and_then(|()| s.read(&mut [0u8; 64]).map(|_| ()))
        .expect_err("the certificate is not valid for other.example");
    assert!(
        err.to_string().contains("NotValidForName") || err.to_string().contains("not valid"),
        "{err}"
    );
    let got = read_to_close(&mut s.sock);
    assert!(!got.starts_with(b"HTTP/"));
    // The server is unharmed.
    get_json_keep_alive_pipelined_and_head(&srv, &tls13());
    srv.run.stop();
}

#[test]
fn a_silent_tls_client_is_closed_after_the_header_timeout() {
    let (dir, _) = certs("silent");
    let cfg = Config {
        header_timeout: std::time::Duration::from_millis(300),
        tls: Some(TlsConfig {
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
        ..config()
    };
    let server = Server::bind(cfg, linerate::demo::router()).unwrap();
    let tls_addr = server.tls_addr().unwrap();
    let handle = server.handle();
    let t = std::thread::spawn(move || server.run());
    let mut tcp = raw(tls_addr);
    // Half a ClientHello, then nothing.
    tcp.write_all(&client_hello([3, 3], [0x13, 0x01])[..20])
        .unwrap();
    // `read_to_close` fails the test if the server leaves the connection open.
    let got = read_to_close(&mut tcp);
    assert!(got.is_empty() || got[0] == 0x15);
    handle.shutdown();
    t.join().unwrap().unwrap();
}

#[test]
fn bad_key_files_are_refused_at_bind() {
    let (dir, _) = certs("badkey");
    let other = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(dir.join("other.pem"), other.signing_key.serialize_pem()).unwrap();
    let tls = |key: &str| TlsConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        cert: Some(linerate_server::config::CertPair {
            cert: dir.join("cert.pem"),
            key: dir.join(key),
        }),
        ktls: false,
        key_update_bytes: linerate_server::tls::TLS_KEY_UPDATE_BYTES,
        http2: true,
        options: Default::default(),
    };
    match linerate_server::tls::server_config(&tls("other.pem")) {
        Err(linerate_server::tls::TlsError::KeyMismatch { .. }) => {}
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a mismatched key was accepted"),
    }
    match linerate_server::tls::server_config(&tls("missing.pem")) {
        Err(e @ linerate_server::tls::TlsError::Key { .. }) => {
            assert!(e.to_string().contains("missing.pem"), "{e}")
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a missing key was accepted"),
    }
}
