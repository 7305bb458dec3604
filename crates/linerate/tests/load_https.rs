//! `linerate load https://` against a small blocking rustls server started in the test: a CA and a
//! leaf certificate (SAN 127.0.0.1, localhost) made by rcgen at test time, one thread per
//! connection, `ok` for every request, keep-alive. Exact counts with --insecure and --cacert, a
//! refused certificate as one clear line (and counted, not hung, inside a run), pipelining, a
//! TLS 1.2-only server, reconnects, and the wrong protocol either way round. Every run is bounded.
#![forbid(unsafe_code)]

mod load_common;
use load_common as common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{SERVER_LIFETIME, args, assert_exact, measure};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ServerConfig, ServerConnection, SupportedProtocolVersion};

/// The answer to every request.
const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
/// How often blocked server threads look at the stop flag.
const POLL: Duration = Duration::from_millis(20);

/// A CA, and a server certificate it signed for 127.0.0.1 and localhost.
struct Pki {
    ca_pem: String,
    chain: Vec<CertificateDer<'static>>,
    key: Vec<u8>,
}

fn pki() -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "linerate test CA");
    let ca_cert = ca_params.self_signed(&ca_key).expect("CA cert");
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate().expect("leaf key");
    let leaf_params =
        CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .expect("leaf params");
    let leaf = leaf_params
        .signed_by(&leaf_key, &issuer)
        .expect("leaf cert");
    Pki {
        ca_pem: ca_cert.pem(),
        chain: vec![leaf.der().clone(), ca_cert.der().clone()],
        key: leaf_key.serialize_der(),
    }
}

struct TlsServer {
    addr: SocketAddr,
    requests: Arc<AtomicU64>,
    connections: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    ca_pem: String,
}

impl TlsServer {
    fn start(versions: &[&'static SupportedProtocolVersion]) -> TlsServer {
        TlsServer::answering(versions, OK.to_vec())
    }

    /// A server that answers every request with `response`.
    fn answering(versions: &[&'static SupportedProtocolVersion], response: Vec<u8>) -> TlsServer {
        let response: Arc<[u8]> = response.into();
        let pki = pki();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(versions)
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(
                pki.chain,
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pki.key)),
            )
            .expect("server cert");
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr");
        let requests = Arc::new(AtomicU64::new(0));
        let connections = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (r, c, s) = (requests.clone(), connections.clone(), stop.clone());
        std::thread::spawn(move || {
            let born = Instant::now();
            while !s.load(Ordering::SeqCst) && born.elapsed() < SERVER_LIFETIME {
                match listener.accept() {
                    Ok((sock, _)) => {
                        c.fetch_add(1, Ordering::SeqCst);
                        let (cfg, r, s) = (config.clone(), r.clone(), s.clone());
                        let answer = response.clone();
                        std::thread::spawn(move || serve(sock, cfg, &answer, r, s, born));
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(1))
                    }
                    Err(_) => return,
                }
            }
        });
        TlsServer {
            addr,
            requests,
            connections,
            stop,
            ca_pem: pki.ca_pem,
        }
    }

    fn url(&self) -> String {
        format!("https://{}/", self.addr)
    }

    fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// One connection: TLS records in, `answer` out for each request head, until the peer goes.
fn serve(
    mut sock: TcpStream,
    config: Arc<ServerConfig>,
    answer: &[u8],
    requests: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    born: Instant,
) {
    let _ = sock.set_nonblocking(false);
    let _ = sock.set_nodelay(true);
    let _ = sock.set_read_timeout(Some(POLL));
    let Ok(mut tls) = ServerConnection::new(config) else {
        return;
    };
    let mut pending = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        while tls.wants_write() {
            if tls.write_tls(&mut sock).is_err() {
                return;
            }
        }
        if stop.load(Ordering::SeqCst) || born.elapsed() > SERVER_LIFETIME {
            return;
        }
        match tls.read_tls(&mut sock) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(_) => return,
        }
        if tls.process_new_packets().is_err() {
            // Send the alert rustls queued, then hang up.
            let _ = tls.write_tls(&mut sock);
            return;
        }
        loop {
            match tls.reader().read(&mut buf) {
                Ok(0) => return,
                Ok(n) => pending.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => return,
            }
        }
        while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            pending.drain(..end + 4);
            requests.fetch_add(1, Ordering::SeqCst);
            // Large answers go out as they fit rustls's buffer.
            let mut left = answer;
            while !left.is_empty() {
                match tls.writer().write(left) {
                    Ok(n) => left = &left[n..],
                    Err(_) => return,
                }
                while tls.wants_write() {
                    if tls.write_tls(&mut sock).is_err() {
                        return;
                    }
                }
            }
        }
    }
}

/// The CA certificate in a file of its own for `--cacert`, removed on drop.
struct TempPem(PathBuf);

impl TempPem {
    fn new(name: &str, pem: &str) -> TempPem {
        let path =
            std::env::temp_dir().join(format!("linerate-https-{}-{name}.pem", std::process::id()));
        std::fs::write(&path, pem).expect("write PEM");
        TempPem(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("UTF-8 temp path")
    }
}

impl Drop for TempPem {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn all_versions() -> Vec<&'static SupportedProtocolVersion> {
    vec![&rustls::version::TLS13, &rustls::version::TLS12]
}

#[test]
fn insecure_answers_every_request() {
    let s = TlsServer::start(&all_versions());
    let r = measure(&["-k", "-t", "2", "-c", "4", "-n", "1000", &s.url()]);
    assert_exact(&r, 1000);
    assert_eq!(s.requests(), 1000);
    let tls = r.runs[0].tls.as_ref().expect("https run reports TLS");
    assert_eq!(tls.handshakes, 4, "one handshake per connection");
    assert_eq!(
        r.setup.tls.as_deref(),
        Some("certificate not verified (--insecure)")
    );
    let text = linerate_load::report::text(&r, false);
    assert!(text.contains("4 handshakes"), "{text}");
    assert!(text.contains("handshakes/s"), "{text}");
}

#[test]
fn cacert_trusts_the_generated_ca() {
    let s = TlsServer::start(&all_versions());
    let ca = TempPem::new("ca", &s.ca_pem);
    let r = measure(&["--cacert", ca.path(), "-c", "2", "-n", "500", &s.url()]);
    assert_exact(&r, 500);
    assert_eq!(s.requests(), 500);
}

#[test]
fn unknown_issuer_is_one_clear_line() {
    let s = TlsServer::start(&all_versions());
    let cfg = linerate_load::Config::from_options(&args(&["-n", "10", &s.url()])).expect("config");
    let err = linerate_load::measure(&cfg)
        .expect_err("the webpki roots do not know the test CA")
        .to_string();
    assert!(!err.contains('\n'), "one line: {err}");
    assert!(err.contains("invalid peer certificate"), "{err}");
    assert!(err.contains("UnknownIssuer"), "{err}");
    assert!(err.contains("--insecure"), "{err}");
    assert_eq!(s.requests(), 0);
}

#[test]
fn refused_handshakes_inside_a_run_are_counted_and_closed() {
    // Past the pre-flight check (as when a certificate changes mid-run): each handshake the
    // client refuses ends its connection, counts as a tls error, and the run still ends on time.
    let s = TlsServer::start(&all_versions());
    let cfg = linerate_load::Config::from_options(&args(&[
        "-t",
        "1",
        "-c",
        "2",
        "-d",
        "300ms",
        &s.url(),
    ]))
    .expect("config");
    let never = AtomicBool::new(false);
    let results = linerate_load::engine::execute(&cfg, &never, |_, _| {}).expect("run ends");
    let m = &results[0].merged;
    assert_eq!(m.responses, 0);
    assert_eq!(m.failed, 0, "no request was sent");
    assert!(m.errors.tls >= 2, "errors {:?}", m.errors);
    assert_eq!(m.errors.tls, m.errors.total(), "errors {:?}", m.errors);
    assert_eq!(m.tls.handshakes, 0);
    assert_eq!(s.requests(), 0);

    // Enough connections to fail MAX_CONNECT_FAILURES_IN_ROW times quickly: the worker gives up,
    // and the run is returned marked interrupted, the certificate error its one line.
    let cfg = linerate_load::Config::from_options(&args(&[
        "-t",
        "1",
        "-c",
        "100",
        "-d",
        "20s",
        &s.url(),
    ]))
    .expect("config");
    let results =
        linerate_load::engine::execute(&cfg, &never, |_, _| {}).expect("what ran is returned");
    let Some(linerate_load::stats::Interruption::TargetLost(err)) = &results[0].merged.interrupted
    else {
        panic!("every handshake is refused: the run ends as the target lost");
    };
    assert!(!err.contains('\n'), "one line: {err}");
    assert!(err.contains("UnknownIssuer"), "{err}");
}

#[test]
fn pipelined_over_tls() {
    let s = TlsServer::start(&all_versions());
    let r = measure(&[
        "-k",
        "-t",
        "1",
        "-c",
        "3",
        "-p",
        "4",
        "-n",
        "1000",
        &s.url(),
    ]);
    assert_exact(&r, 1000);
    assert_eq!(s.requests(), 1000);
}

#[test]
fn large_bodies_span_many_records() {
    // 200 000 bytes: 13 TLS records each, read 4 KiB at a time; pipelined so that one read can
    // end in the middle of a record and the next response follows in the same records.
    const BODY: usize = 200_000;
    let mut answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {BODY}\r\n\r\n").into_bytes();
    answer.resize(answer.len() + BODY, b'x');
    let per_response = answer.len() as u64;
    let s = TlsServer::answering(&all_versions(), answer);
    let r = measure(&["-k", "-t", "1", "-c", "2", "-p", "3", "-n", "60", &s.url()]);
    assert_exact(&r, 60);
    assert_eq!(r.runs[0].bytes_read, 60 * per_response);
}

#[test]
fn tls12_only_server() {
    let s = TlsServer::start(&[&rustls::version::TLS12]);
    let r = measure(&["-k", "-c", "2", "-p", "2", "-n", "600", &s.url()]);
    assert_exact(&r, 600);
    let ca = TempPem::new("ca12", &s.ca_pem);
    let r = measure(&["--cacert", ca.path(), "-c", "2", "-n", "100", &s.url()]);
    assert_exact(&r, 100);
}

#[test]
fn reconnects_handshake_again_and_resume() {
    for versions in [all_versions(), vec![&rustls::version::TLS12]] {
        let s = TlsServer::start(&versions);
        let r = measure(&[
            "-k",
            "-t",
            "1",
            "-c",
            "2",
            "--reconnect",
            "5",
            "-n",
            "500",
            &s.url(),
        ]);
        assert_exact(&r, 500);
        let tls = r.runs[0].tls.as_ref().expect("TLS report");
        assert!(tls.handshakes >= 100, "{tls:?}");
        assert!(tls.resumed > 0, "session resumption on reconnect: {tls:?}");
        assert!(s.connections.load(Ordering::SeqCst) >= 100);
    }
}

#[test]
fn no_resume_makes_every_handshake_a_full_one() {
    for versions in [all_versions(), vec![&rustls::version::TLS12]] {
        let s = TlsServer::start(&versions);
        let r = measure(&[
            "-k",
            "-t",
            "1",
            "-c",
            "2",
            "--reconnect",
            "5",
            "--tls-no-resume",
            "-n",
            "500",
            &s.url(),
        ]);
        assert_exact(&r, 500);
        let tls = r.runs[0].tls.as_ref().expect("TLS report");
        assert!(tls.handshakes >= 100, "{tls:?}");
        assert_eq!(tls.resumed, 0, "{tls:?}");
    }
}

#[test]
fn plain_http_to_a_tls_port_is_errors_not_a_hang() {
    let s = TlsServer::start(&all_versions());
    let url = format!("http://{}/", s.addr);
    let r = measure(&["-t", "1", "-c", "2", "-d", "1s", "--timeout", "500ms", &url]);
    let run = &r.runs[0];
    assert_eq!(run.responses, 0);
    assert!(run.errors.total() > 0, "errors {:?}", run.errors);
    assert!(run.tls.is_none());
}

#[test]
fn https_to_a_plain_server_fails_cleanly() {
    // The plain server waits for a request head that a ClientHello never completes.
    let s = common::Server::start(common::Behavior::Ok);
    let url = format!("https://{}/", s.addr);
    let cfg =
        linerate_load::Config::from_options(&args(&["-k", "--timeout", "300ms", "-n", "5", &url]))
            .expect("config");
    let err = linerate_load::measure(&cfg)
        .expect_err("no TLS there")
        .to_string();
    assert!(err.contains("TLS handshake"), "{err}");
    assert!(!err.contains('\n'), "{err}");
}

#[test]
fn tls_options_are_checked() {
    let err = |line: &[&str]| {
        linerate_load::Config::from_options(&args(line))
            .expect_err("refused")
            .to_string()
    };
    assert!(err(&["-k", "http://127.0.0.1:1/"]).contains("https:// URLs only"));
    assert!(err(&["--cacert", "x.pem", "http://127.0.0.1:1/"]).contains("https:// URLs only"));
    assert!(
        err(&["--cacert", "/nonexistent/ca.pem", "https://127.0.0.1:1/"]).contains("cannot read")
    );
    let empty = TempPem::new("empty", "no certificate here\n");
    assert!(err(&["--cacert", empty.path(), "https://127.0.0.1:1/"]).contains("no CERTIFICATE"));
}
