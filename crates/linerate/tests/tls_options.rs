//! TLS options per listener, through `linerate serve --config`, checked with real clients:
//! curl and `openssl s_client` (versions, suites, ALPN, OCSP stapling and its refresh on
//! SIGHUP, client certificates required and optional, the verified client named to the
//! upstream in `X-Forwarded-Client-Cert`), and a rustls client (session resumption by ticket
//! or cache, and a handler reading the client certificate through the library).
//! Certificates and CAs are made at test time (rcgen); OCSP responses by `openssl ocsp`.
//! Servers bind 127.0.0.1 on chosen ports and are stopped when the test ends.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use common::bin::serve_as as serve;
use common::{eventually, free_port};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("linerate-tlsopt-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A CA named `cn`, written as `d/NAME.pem` and `d/NAME.key`.
fn ca(d: &Path, name: &str, cn: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    p.distinguished_name.push(DnType::CommonName, cn);
    let key = KeyPair::generate().unwrap();
    std::fs::write(d.join(format!("{name}.key")), key.serialize_pem()).unwrap();
    let ca = CertifiedIssuer::self_signed(p, key).unwrap();
    std::fs::write(d.join(format!("{name}.pem")), ca.pem()).unwrap();
    ca
}

/// A leaf signed by `ca`, written as `d/NAME.pem` and `d/NAME.key`: a server's for
/// `localhost` (serial 0x1C2D), or a client's with `cn` and a URI name.
fn leaf(d: &Path, name: &str, ca: &CertifiedIssuer<'static, KeyPair>, client: Option<&str>) {
    let mut p = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    match client {
        Some(cn) => {
            p = CertificateParams::new(Vec::<String>::new()).unwrap();
            p.distinguished_name.push(DnType::CommonName, cn);
            p.subject_alt_names.push(SanType::URI(
                format!("spiffe://test/{cn}").try_into().unwrap(),
            ));
            p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        }
        None => {
            p.distinguished_name.push(DnType::CommonName, "localhost");
            p.serial_number = Some(SerialNumber::from(vec![0x1c, 0x2d]));
            p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        }
    }
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, ca).unwrap();
    std::fs::write(d.join(format!("{name}.pem")), cert.pem()).unwrap();
    std::fs::write(d.join(format!("{name}.key")), key.serialize_pem()).unwrap();
}

/// `curl -sS` with `args` against 127.0.0.1 (trusting `d/ca.pem` for `localhost`):
/// (exit code, stdout, stderr).
fn curl(d: &Path, port: u16, args: &[&str], path: &str) -> (i32, String, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", "--cacert"])
        .arg(d.join("ca.pem"))
        .args(["--resolve", &format!("localhost:{port}:127.0.0.1")])
        .args(args)
        .arg(format!("https://localhost:{port}{path}"))
        .output()
        .expect("curl is needed by this test (apt-get install curl)");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn path(d: &Path, f: &str) -> String {
    d.join(f).to_str().unwrap().to_string()
}

#[test]
fn versions_suites_and_alpn_follow_each_listener() {
    let d = dir("versions");
    let root = ca(&d, "ca", "Test Server CA");
    leaf(&d, "server", &root, None);
    let (p13, psuites) = (free_port("127.0.0.1"), free_port("127.0.0.1"));
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "[tls]\nalpn = [\"http/1.1\"]\n\
             [[listen]]\naddr = \"127.0.0.1:0\"\n\
             [[listen]]\naddr = \"127.0.0.1:{p13}\"\n\
             tls = {{ cert = \"server.pem\", key = \"server.key\", min_version = \"1.3\" }}\n\
             [[listen]]\naddr = \"127.0.0.1:{psuites}\"\n\
             tls = {{ cert = \"server.pem\", key = \"server.key\", alpn = [\"h2\", \"http/1.1\"], \
             ciphers = [\"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256\", \"TLS_AES_256_GCM_SHA384\"] }}\n\
             [[site]]\ndefault = true\napp = \"demo\"\n"
        ),
    )
    .unwrap();
    let _s = serve(&["--config", file.to_str().unwrap()]);

    // TLS 1.3 only: a client capped at 1.2 is refused in the handshake.
    let (code, body, _) = curl(&d, p13, &["--tlsv1.3"], "/json");
    assert_eq!((code, body.as_str()), (0, r#"{"message":"Hello, World!"}"#));
    let (code, _, err) = curl(&d, p13, &["--tlsv1.2", "--tls-max", "1.2"], "/json");
    assert_eq!(code, 35, "TLS 1.2 against a 1.3-only listener: {err}");
    let (code, _, err) = curl(&d, psuites, &["--tlsv1.2", "--tls-max", "1.2"], "/json");
    assert_eq!(code, 0, "{err}");

    // ALPN: `[tls]` offers only http/1.1; the listener that names h2 offers it.
    let version = |port| {
        let (code, out, err) = curl(
            &d,
            port,
            &["--http2", "-o", "/dev/null", "-w", "%{http_version}"],
            "/json",
        );
        assert_eq!(code, 0, "{err}");
        out
    };
    assert_eq!(version(p13), "1.1");
    assert_eq!(version(psuites), "2");

    // The suites named, and only those: the server's order when the client offers both.
    let negotiated = |args: &[&str]| {
        let mut a = vec!["-v", "-o", "/dev/null"];
        a.extend_from_slice(args);
        let (code, _, err) = curl(&d, psuites, &a, "/json");
        (code, err)
    };
    let (code, err) = negotiated(&["--tls-max", "1.2"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("ECDHE-ECDSA-CHACHA20-POLY1305"),
        "TLS 1.2 suite: {err}"
    );
    let (code, err) = negotiated(&["--tlsv1.3"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("TLS_AES_256_GCM_SHA384"),
        "TLS 1.3 suite: {err}"
    );
    let (code, err) = negotiated(&["--tlsv1.3", "--tls13-ciphers", "TLS_AES_128_GCM_SHA256"]);
    assert_eq!(code, 35, "a suite not named is refused: {err}");
    let (code, err) = negotiated(&[
        "--tls-max",
        "1.2",
        "--ciphers",
        "ECDHE-ECDSA-AES128-GCM-SHA256",
    ]);
    assert_eq!(code, 35, "a TLS 1.2 suite not named is refused: {err}");
    let _ = std::fs::remove_dir_all(&d);
}

/// An OCSP response for `d/server.pem` from `openssl ocsp`, acting as the CA's responder
/// over an index that says the certificate is good (`V`) or revoked (`R`).
fn ocsp_response(d: &Path, status: char, out: &str) {
    let index = d.join("index.txt");
    let revoked = if status == 'R' { "260101000000Z" } else { "" };
    std::fs::write(
        &index,
        format!("{status}\t351231235959Z\t{revoked}\t1C2D\tunknown\t/CN=localhost\n"),
    )
    .unwrap();
    std::fs::write(d.join("index.txt.attr"), "unique_subject = no\n").unwrap();
    let run = |args: &[&str]| {
        let o = Command::new("openssl")
            .args(args)
            .current_dir(d)
            .output()
            .expect("openssl is needed by this test");
        assert!(
            o.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    run(&[
        "ocsp",
        "-issuer",
        "ca.pem",
        "-cert",
        "server.pem",
        "-no_nonce",
        "-reqout",
        "req.der",
    ]);
    run(&[
        "ocsp",
        "-index",
        "index.txt",
        "-rsigner",
        "ca.pem",
        "-rkey",
        "ca.key",
        "-CA",
        "ca.pem",
        "-reqin",
        "req.der",
        "-respout",
        out,
        "-ndays",
        "1",
    ]);
}

/// What `openssl s_client -status` prints about the stapled response.
fn stapled(d: &Path, port: u16) -> String {
    let mut child = Command::new("openssl")
        .args(["s_client", "-connect", &format!("127.0.0.1:{port}")])
        .args(["-servername", "localhost", "-status", "-CAfile"])
        .arg(d.join("ca.pem"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("openssl is needed by this test");
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn an_ocsp_response_is_stapled_and_refreshed_on_reload() {
    let d = dir("ocsp");
    let root = ca(&d, "ca", "Test OCSP CA");
    leaf(&d, "server", &root, None);
    ocsp_response(&d, 'V', "server.ocsp");
    let port = free_port("127.0.0.1");
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "[[listen]]\naddr = \"127.0.0.1:0\"\n\
             [[listen]]\naddr = \"127.0.0.1:{port}\"\n\
             tls = {{ cert = \"server.pem\", key = \"server.key\", ocsp = \"server.ocsp\" }}\n\
             [[site]]\ndefault = true\napp = \"demo\"\n"
        ),
    )
    .unwrap();
    let s = serve(&["--config", file.to_str().unwrap()]);
    let out = stapled(&d, port);
    assert!(
        out.contains("OCSP Response Status: successful"),
        "no response stapled: {out}"
    );
    assert!(out.contains("Cert Status: good"), "{out}");
    assert!(out.contains("Verify return code: 0 (ok)"), "{out}");

    // The responder now says revoked: a SIGHUP staples the new response.
    ocsp_response(&d, 'R', "server.ocsp");
    common::bin::signal(&s.child, rustix::process::Signal::HUP);
    eventually("the refreshed OCSP response is never stapled", || {
        stapled(&d, port).contains("Cert Status: revoked")
    });
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn client_certificates_are_required_checked_and_named_to_the_upstream() {
    let d = dir("mtls");
    let root = ca(&d, "ca", "Test Server CA");
    leaf(&d, "server", &root, None);
    let clients = ca(&d, "clients", "Test Client CA");
    leaf(&d, "alice", &clients, Some("alice"));
    let other = ca(&d, "other", "Someone Else's CA");
    leaf(&d, "mallory", &other, Some("mallory"));
    let (up, heads) = common::recording_upstream();
    let (required, optional) = (free_port("127.0.0.1"), free_port("127.0.0.1"));
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "[[listen]]\naddr = \"127.0.0.1:0\"\n\
             [[listen]]\naddr = \"127.0.0.1:{required}\"\n\
             tls = {{ cert = \"server.pem\", key = \"server.key\", client_ca = \"clients.pem\" }}\n\
             [[listen]]\naddr = \"127.0.0.1:{optional}\"\n\
             tls = {{ cert = \"server.pem\", key = \"server.key\", client_ca = \"clients.pem\", client_auth = \"optional\" }}\n\
             [[upstream]]\nname = \"app\"\nservers = [\"{up}\"]\n\
             [[site]]\ndefault = true\napp = \"demo\"\n\
             [[site.proxy]]\nprefix = \"/api\"\nupstream = \"app\"\n"
        ),
    )
    .unwrap();
    let _s = serve(&["--config", file.to_str().unwrap()]);
    let alice = [
        "--cert",
        &path(&d, "alice.pem"),
        "--key",
        &path(&d, "alice.key"),
    ];
    let mallory = [
        "--cert",
        &path(&d, "mallory.pem"),
        "--key",
        &path(&d, "mallory.key"),
    ];
    let spoof = ["-H", "X-Forwarded-Client-Cert: Hash=00;Subject=\"CN=root\""];
    let xfcc = |head: &str| -> Vec<String> {
        head.lines()
            .filter_map(|l| l.strip_prefix("X-Forwarded-Client-Cert: "))
            .map(str::to_string)
            .collect()
    };
    // The fingerprint as openssl computes it, for the field's Hash.
    let fp = Command::new("openssl")
        .args(["x509", "-noout", "-fingerprint", "-sha256", "-in"])
        .arg(d.join("alice.pem"))
        .output()
        .unwrap();
    let fp = String::from_utf8_lossy(&fp.stdout);
    let hash: String = fp
        .trim()
        .rsplit('=')
        .next()
        .unwrap()
        .replace(':', "")
        .to_lowercase();
    assert_eq!(hash.len(), 64, "{fp}");

    for port in [required, optional] {
        // Alice's certificate leads to the client CA: answered, and named upstream (the
        // field the client wrote is dropped).
        let mut args = alice.to_vec();
        args.extend_from_slice(&spoof);
        let (code, body, err) = curl(&d, port, &args, "/api/who");
        assert_eq!((code, body.as_str()), (0, "ok"), "{err}");
        let head = heads.recv_timeout(common::READ_TIMEOUT).unwrap();
        assert_eq!(
            xfcc(&head),
            [format!(
                "Hash={hash};Subject=\"CN=alice\";URI=spiffe://test/alice"
            )],
            "{head}"
        );
        // Mallory's comes from another CA: refused in the handshake on either listener.
        let (code, body, err) = curl(&d, port, &mallory, "/json");
        assert_ne!(code, 0, "a certificate from another CA was let in: {body}");
        assert!(body.is_empty(), "{body} {err}");
    }
    // Without a certificate: refused where one is required...
    let (code, body, err) = curl(&d, required, &[], "/json");
    assert_ne!(code, 0, "no certificate, and still answered: {body}");
    assert!(body.is_empty(), "{body} {err}");
    // ...let in where it is optional, with no identity (and no field a client can fake).
    let (code, body, err) = curl(&d, optional, &spoof, "/api/anon");
    assert_eq!((code, body.as_str()), (0, "ok"), "{err}");
    let head = heads.recv_timeout(common::READ_TIMEOUT).unwrap();
    assert!(head.starts_with("GET /api/anon"), "{head}");
    assert!(xfcc(&head).is_empty(), "{head}");
    let _ = std::fs::remove_dir_all(&d);
}

/// A rustls client trusting `ca`, optionally presenting `d/NAME.pem` and `d/NAME.key`, with
/// one session store shared by its connections.
fn rustls_client(d: &Path, client: Option<&str>) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(d.join("ca.pem")).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let b = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let mut cfg = match client {
        Some(name) => {
            let chain = CertificateDer::pem_file_iter(d.join(format!("{name}.pem")))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            let key = PrivateKeyDer::from_pem_file(d.join(format!("{name}.key"))).unwrap();
            b.with_client_auth_cert(chain, key).unwrap()
        }
        None => b.with_no_client_auth(),
    };
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(cfg)
}

/// One GET over HTTP/3 on a fresh QUIC connection to `addr`'s UDP port, with the client
/// certificate `client` (or none): the answer's status.
fn h3_status(addr: SocketAddr, d: &Path, client: Option<&str>, path: &str) -> u16 {
    let quic = common::h3::quic((*rustls_client(d, client)).clone());
    common::h3::get(&quic, addr, &[path]).answers[0].0
}

/// One GET over a fresh TLS connection: (how the handshake went, the answer's body).
fn get(
    addr: SocketAddr,
    cfg: &Arc<rustls::ClientConfig>,
    path: &str,
) -> (Option<rustls::HandshakeKind>, String) {
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(common::READ_TIMEOUT)).unwrap();
    let conn = rustls::ClientConnection::new(cfg.clone(), "localhost".try_into().unwrap()).unwrap();
    let mut s = rustls::StreamOwned::new(conn, tcp);
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (s.conn.handshake_kind(), body)
}

#[test]
fn sessions_resume_by_ticket_or_cache_and_not_when_both_are_off() {
    let d = dir("resume");
    let root = ca(&d, "ca", "Test Server CA");
    leaf(&d, "server", &root, None);
    let ports = [
        free_port("127.0.0.1"),
        free_port("127.0.0.1"),
        free_port("127.0.0.1"),
    ];
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "[[listen]]\naddr = \"127.0.0.1:0\"\n\
             [[listen]]\naddr = \"127.0.0.1:{}\"\n\
             tls = {{ cert = \"server.pem\", key = \"server.key\", session_tickets = true, session_cache = 0, session_lifetime = \"1h\" }}\n\
             [[listen]]\naddr = \"127.0.0.1:{}\"\n\
             tls = {{ cert = \"server.pem\", key = \"server.key\" }}\n\
             [[listen]]\naddr = \"127.0.0.1:{}\"\n\
             tls = {{ cert = \"server.pem\", key = \"server.key\", session_cache = 0 }}\n\
             [[site]]\ndefault = true\napp = \"demo\"\n",
            ports[0], ports[1], ports[2]
        ),
    )
    .unwrap();
    let _s = serve(&["--config", file.to_str().unwrap()]);
    for (port, resumes) in [(ports[0], true), (ports[1], true), (ports[2], false)] {
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let cfg = rustls_client(&d, None);
        let (first, body) = get(addr, &cfg, "/json");
        assert_eq!(first, Some(rustls::HandshakeKind::Full));
        assert_eq!(body, r#"{"message":"Hello, World!"}"#);
        let (second, body) = get(addr, &cfg, "/json");
        let want = if resumes {
            rustls::HandshakeKind::Resumed
        } else {
            rustls::HandshakeKind::Full
        };
        assert_eq!(second, Some(want), "port {port}");
        assert_eq!(body, r#"{"message":"Hello, World!"}"#);
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_handler_reads_the_verified_client_certificate() {
    use linerate_server::config::{ClientAuth, TlsOptions};
    use linerate_server::{Config, Response, Router, Server, TlsConfig};
    let d = dir("handler");
    let root = ca(&d, "ca", "Test Server CA");
    leaf(&d, "server", &root, None);
    let clients = ca(&d, "clients", "Test Client CA");
    leaf(&d, "alice", &clients, Some("alice"));
    let router = Router::new()
        .get("/whoami", |req| {
            let who = match req.client_cert() {
                Some(c) => format!("{} {}", c.subject, c.uris.join(",")),
                None => "anonymous".to_string(),
            };
            Response::text_owned(who)
        })
        // The same identity as a status, for the HTTP/3 client (which counts body bytes).
        .get("/alice", |req| match req.client_cert() {
            Some(c) if c.subject == "CN=alice" && c.uris == ["spiffe://test/alice"] => {
                Response::text("alice")
            }
            _ => Response::text("who?").status(403),
        });
    let cfg = Config {
        tls: Some(TlsConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            cert: Some(linerate_server::config::CertPair {
                cert: d.join("server.pem"),
                key: d.join("server.key"),
            }),
            ktls: true,
            key_update_bytes: linerate_server::tls::TLS_KEY_UPDATE_BYTES,
            http2: true,
            options: TlsOptions {
                client_auth: Some(ClientAuth {
                    ca: d.join("clients.pem"),
                    required: false,
                }),
                ..TlsOptions::default()
            },
        }),
        quic: true,
        ..common::config()
    };
    let server = Server::bind(cfg, router).expect("bind");
    let addr = server.tls_addr().unwrap();
    let handle = server.handle();
    let thread = std::thread::spawn(move || server.run());
    let (_, body) = get(addr, &rustls_client(&d, Some("alice")), "/whoami");
    assert_eq!(body, "CN=alice spiffe://test/alice");
    let (_, body) = get(addr, &rustls_client(&d, None), "/whoami");
    assert_eq!(body, "anonymous");
    let (_, body) = get(addr, &rustls_client(&d, Some("alice")), "/alice");
    assert_eq!(body, "alice");
    // HTTP/3 on the same port: the QUIC handshake asks for the certificate as TCP's does,
    // and the handler reads the same identity (it read none before this was carried).
    assert_eq!(h3_status(addr, &d, Some("alice"), "/alice"), 200);
    assert_eq!(h3_status(addr, &d, None, "/alice"), 403);
    handle.shutdown();
    thread.join().unwrap().unwrap();
    let _ = std::fs::remove_dir_all(&d);
}
