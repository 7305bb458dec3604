//! The demo app's contracts: TechEmpower (/json, /plaintext) and HttpArena (/baseline11,
//! /pipeline, /json/{count}, /upload), with random inputs from a fixed-seed generator.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;

use common::{Client, Running, start_demo};
use linerate::demo::{DATASET_JSON, Item};
use linerate_server::config::CertPair;
use linerate_server::{Config, Server, TlsConfig};
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
}

#[test]
fn techempower_json_and_plaintext() {
    let server = start_demo();
    let mut c = Client::connect(server.addr);
    let r = c.get("/json");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.body, br#"{"message":"Hello, World!"}"#);
    let r = c.get("/plaintext");
    assert_eq!(
        (r.header("content-type"), r.body.as_slice()),
        (Some("text/plain"), &b"Hello, World!"[..])
    );
    assert!(r.header("date").is_some() && r.header("server").is_some());
    server.stop();
}

#[test]
fn baseline11_get_and_post_with_random_values() {
    let server = start_demo();
    let mut c = Client::connect(server.addr);
    let mut rng = Rng(0x5eed);
    for i in 0..200 {
        let (a, b, body) = (
            rng.int(-100_000, 100_000),
            rng.int(-100_000, 100_000),
            rng.int(-1000, 1000),
        );
        let r = c.get(&format!("/baseline11?a={a}&b={b}"));
        assert_eq!((r.status, r.text()), (200, (a + b).to_string()));
        let body_s = body.to_string();
        let req = if i % 2 == 0 {
            format!(
                "POST /baseline11?a={a}&b={b} HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n{body_s}",
                body_s.len()
            )
        } else {
            // Chunked, split into two chunks when possible.
            let (x, y) = body_s.split_at(body_s.len() / 2);
            let mut s = format!(
                "POST /baseline11?a={a}&b={b} HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            );
            for part in [x, y].into_iter().filter(|p| !p.is_empty()) {
                s.push_str(&format!("{:x}\r\n{part}\r\n", part.len()));
            }
            s + "0\r\n\r\n"
        };
        c.send(req.as_bytes());
        let r = c.read_response();
        assert_eq!(
            (r.status, r.text()),
            (200, (a + b + body).to_string()),
            "{req}"
        );
        assert_eq!(r.header("content-type"), Some("text/plain"));
    }
    // Bad input is a 400, not a crash.
    assert_eq!(c.get("/baseline11?a=x&b=1").status, 400);
    assert_eq!(c.get("/baseline11").status, 400);
    server.stop();
}

#[test]
fn pipeline_endpoint() {
    let server = start_demo();
    let mut c = Client::connect(server.addr);
    c.send(&b"GET /pipeline HTTP/1.1\r\nHost: t\r\n\r\n".repeat(16));
    for _ in 0..16 {
        assert_eq!(c.read_response().text(), "ok");
    }
    server.stop();
}

#[test]
fn json_count_items_with_totals() {
    let dataset: Vec<Item> = serde_json::from_str(DATASET_JSON).unwrap();
    assert_eq!(dataset.len(), 50);
    let server = start_demo();
    let mut c = Client::connect(server.addr);
    let mut rng = Rng(42);
    for _ in 0..60 {
        let count = rng.int(1, 50) as usize;
        let m = rng.int(0, 9);
        let path = if m == 0 {
            format!("/json/{count}")
        } else {
            format!("/json/{count}?m={m}")
        };
        let m = if m == 0 { 1 } else { m };
        let r = c.get(&path);
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("content-type"), Some("application/json"));
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["count"], count);
        let items = v["items"].as_array().unwrap();
        assert_eq!(items.len(), count);
        for (got, want) in items.iter().zip(&dataset) {
            assert_eq!(got["id"], want.id);
            assert_eq!(got["total"], want.price * want.quantity * m, "{path}");
            assert_eq!(got["rating"]["score"], want.rating.score);
        }
    }
    for bad in ["/json/0", "/json/51", "/json/x", "/json/3?m=q"] {
        assert_eq!(c.get(bad).status, 400, "{bad}");
    }
    server.stop();
}

#[test]
fn upload_counts_streamed_bytes_for_20_mb() {
    let server = start_demo();
    let mut c = Client::connect(server.addr);
    let size = 20 * 1024 * 1024 + 7;
    let mut rng = Rng(7);
    let body: Vec<u8> = (0..size).map(|_| rng.next() as u8).collect();
    // Content-Length, sent in pieces.
    c.send(
        format!("POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: {size}\r\n\r\n").as_bytes(),
    );
    for piece in body.chunks(1 << 20) {
        c.send(piece);
    }
    let r = c.read_response();
    assert_eq!((r.status, r.text()), (200, size.to_string()));
    // Chunked, odd chunk sizes.
    c.send(b"POST /upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    for piece in body.chunks(777_777) {
        c.send(format!("{:x}\r\n", piece.len()).as_bytes());
        c.send(piece);
        c.send(b"\r\n");
    }
    c.send(b"0\r\n\r\n");
    let r = c.read_response();
    assert_eq!((r.status, r.text()), (200, size.to_string()));
    // A lying Content-Length (shorter body, then EOF) is never answered with a count.
    server.stop();
}

/// Raises this process's soft RLIMIT_NOFILE to its hard limit; returns the soft limit now.
fn raise_nofile() -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut lim = getrlimit(Resource::Nofile);
    if lim.current < lim.maximum {
        lim.current = lim.maximum;
        // Refused (a hard limit of "unlimited" the kernel caps lower): keep what was there.
        let _ = setrlimit(Resource::Nofile, lim);
    }
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// One `/delay` exchange in flight on a non-blocking socket.
struct Waiting {
    sock: std::net::TcpStream,
    ms: u64,
    sent: std::time::Instant,
    got: Vec<u8>,
}

/// The body of a complete `Content-Length` response in `got`, if it is all there.
fn whole_response(got: &[u8]) -> Option<(u16, String)> {
    let end = got.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = std::str::from_utf8(&got[..end]).unwrap();
    let status = head[9..12].parse().unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().unwrap())
        })
        .expect("content-length");
    (got.len() >= end + len).then(|| {
        (
            status,
            String::from_utf8(got[end..end + len].to_vec()).unwrap(),
        )
    })
}

/// HttpArena's async profile: thousands of connections, each waiting on its own delay on one
/// worker at once; every answer is its own number and arrives no earlier than its delay
/// (the client reads after the answer came, so a read before the deadline is an early answer).
#[test]
fn delay_answers_each_of_thousands_of_connections_no_earlier_than_its_delay() {
    use std::io::ErrorKind;
    use std::time::{Duration, Instant};
    // Each connection costs two descriptors here (client and server in one process), and a
    // few hundred stay for the test harness.
    let conns = ((raise_nofile().saturating_sub(512)) / 2).min(8000) as usize;
    assert!(conns >= 500, "RLIMIT_NOFILE too low for the test: {conns}");
    let server = start_demo();
    let mut rng = Rng(0xde1a7);
    let mut waiting: Vec<Waiting> = (0..conns)
        .map(|_| {
            let sock = std::net::TcpStream::connect(server.addr).unwrap();
            sock.set_nodelay(true).unwrap();
            Waiting {
                sock,
                ms: rng.int(50, 400) as u64,
                sent: Instant::now(),
                got: Vec::new(),
            }
        })
        .collect();
    for w in &mut waiting {
        w.sent = Instant::now();
        w.sock
            .write_all(format!("GET /delay/{} HTTP/1.1\r\nHost: t\r\n\r\n", w.ms).as_bytes())
            .unwrap();
        w.sock.set_nonblocking(true).unwrap();
    }
    // Bounded: every answer is due within 400 ms; a minute covers a loaded machine.
    let give_up = Instant::now() + Duration::from_secs(60);
    let mut buf = [0u8; 512];
    let mut done = 0;
    while done < conns {
        assert!(Instant::now() < give_up, "{} answers missing", conns - done);
        for w in waiting.iter_mut().filter(|w| w.ms != u64::MAX) {
            match w.sock.read(&mut buf) {
                Ok(0) => panic!("closed before answering /delay/{}", w.ms),
                Ok(n) => w.got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                Err(e) => panic!("{e}"),
            }
            let waited = w.sent.elapsed();
            if let Some((status, body)) = whole_response(&w.got) {
                assert_eq!((status, body), (200, w.ms.to_string()));
                assert!(
                    waited >= Duration::from_millis(w.ms),
                    "/delay/{} answered after {waited:?}",
                    w.ms
                );
                w.ms = u64::MAX;
                done += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // Zero is a delay of zero, answered; a delay that is not a whole number, or past the
    // limit, is a 400.
    let mut c = Client::connect(server.addr);
    let r = c.get("/delay/0");
    assert_eq!((r.status, r.text()), (200, "0".to_string()));
    assert_eq!(r.header("content-type"), Some("text/plain"));
    let limit = linerate::demo::MAX_DELAY_MS;
    for bad in [
        "/delay/-1",
        "/delay/1.5",
        "/delay/x",
        &format!("/delay/{}", limit + 1),
    ] {
        assert_eq!(c.get(bad).status, 400, "{bad}");
    }
    server.stop();
}

/// The demo with HTTPS as HttpArena mounts it: an RSA-2048 certificate and key read from PEM
/// files (`/certs/server.crt`, `/certs/server.key` there), HTTP/1.1 only in ALPN (its 8081)
/// unless `tweak` says otherwise; `tweak` gets the test's own directory too.
struct Arena {
    run: Running,
    tls: SocketAddr,
    anchor: CertificateDer<'static>,
    dir: std::path::PathBuf,
}

impl Arena {
    fn stop(self) {
        self.run.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn start_demo_tls(name: &str, tweak: impl FnOnce(&mut Config, &std::path::Path)) -> Arena {
    let dir = std::env::temp_dir().join(format!("linerate-arena-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let anchor = rsa_pair(&dir);
    let mut cfg = Config {
        tls: Some(TlsConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            cert: Some(CertPair {
                cert: dir.join("server.crt"),
                key: dir.join("server.key"),
            }),
            ktls: false,
            key_update_bytes: linerate_server::tls::TLS_KEY_UPDATE_BYTES,
            // HttpArena's 8081: HTTP/1.1 only.
            http2: false,
            options: Default::default(),
        }),
        ..common::config()
    };
    tweak(&mut cfg, &dir);
    let server = Server::bind(cfg, linerate::demo::router()).expect("bind");
    let tls = server.tls_addr().expect("TLS address");
    let (addr, handle, stats) = (server.local_addr(), server.handle(), server.stats());
    let thread = Some(std::thread::spawn(move || server.run()));
    let run = Running {
        addr,
        handle,
        stats,
        thread,
    };
    Arena {
        run,
        tls,
        anchor,
        dir,
    }
}

/// A self-signed RSA-2048 certificate for `localhost` written as `server.crt` and
/// `server.key` in `dir`, HttpArena's names; returns the certificate.
fn rsa_pair(dir: &std::path::Path) -> CertificateDer<'static> {
    let key = rcgen::KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, rcgen::RsaKeySize::_2048)
        .unwrap();
    let params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    let cert = params.self_signed(&key).unwrap();
    std::fs::write(dir.join("server.crt"), cert.pem()).unwrap();
    std::fs::write(dir.join("server.key"), key.serialize_pem()).unwrap();
    cert.der().clone()
}

fn tls_client(
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
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Arc::new(cfg)
}

type Tls = StreamOwned<ClientConnection, TcpStream>;

fn tls_connect(addr: SocketAddr, cfg: Arc<ClientConfig>) -> Tls {
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(common::READ_TIMEOUT)).unwrap();
    tcp.set_write_timeout(Some(common::READ_TIMEOUT)).unwrap();
    let conn = ClientConnection::new(cfg, ServerName::try_from("localhost").unwrap()).unwrap();
    let mut s = StreamOwned::new(conn, tcp);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock).unwrap();
    }
    s
}

/// One response: status, head (lowercase field names), body (Content-Length or chunked).
fn read_any(s: &mut impl Read, pending: &mut Vec<u8>) -> (u16, String, Vec<u8>) {
    fn fill(s: &mut impl Read, pending: &mut Vec<u8>, want: usize) {
        let mut chunk = [0u8; 65536];
        while pending.len() < want {
            let n = s.read(&mut chunk).expect("read");
            assert!(n > 0, "EOF inside a response");
            pending.extend_from_slice(&chunk[..n]);
        }
    }
    fn line(s: &mut impl Read, pending: &mut Vec<u8>) -> String {
        loop {
            if let Some(p) = pending.windows(2).position(|w| w == b"\r\n") {
                let l = String::from_utf8(pending.drain(..p + 2).collect()).unwrap();
                return l.trim_end().to_string();
            }
            let n = pending.len() + 1;
            fill(s, pending, n);
        }
    }
    let mut head = String::new();
    loop {
        let l = line(s, pending);
        if l.is_empty() {
            break;
        }
        head.push_str(&l.to_ascii_lowercase());
        head.push('\n');
    }
    let status = head[9..12].parse().unwrap();
    let field = |name: &str| {
        head.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':').map(str::trim))
    };
    let mut body = Vec::new();
    if field("transfer-encoding") == Some("chunked") {
        loop {
            let size = usize::from_str_radix(&line(s, pending), 16).unwrap();
            fill(s, pending, size + 2);
            body.extend(pending.drain(..size));
            pending.drain(..2);
            if size == 0 {
                break;
            }
        }
    } else {
        let len: usize = field("content-length").map_or(0, |v| v.parse().unwrap());
        fill(s, pending, len);
        body.extend(pending.drain(..len));
    }
    (status, head, body)
}

/// HttpArena's 8gbit: `POST /echo` over TLS answers the random body byte for byte, in the
/// validation's sizes, with `Content-Length` framing each way, and a chunked body chunked.
/// A request that closes its connection (`Connection: close`, as HttpArena's validator sends)
/// still gets its whole body back: the answer streams while the body arrives, and the
/// connection reads that body to its end before it closes (it was cut at the answer's
/// start: 16–64 KiB came back of 100 KB).
#[test]
fn echo_over_tls_with_connection_close_returns_the_whole_body() {
    let srv = start_demo_tls("echo-close", |_, _| {});
    let mut rng = Rng(0xc105e);
    for (size, chunked) in [(102_400usize, false), (102_400, true), (1_000_003, false)] {
        let mut s = tls_connect(srv.tls, tls_client(&srv.anchor, &[&rustls::version::TLS13]));
        let body: Vec<u8> = (0..size).map(|_| rng.next() as u8).collect();
        let mut req = b"POST /echo HTTP/1.1\r\nHost: t\r\nConnection: close\r\n".to_vec();
        if chunked {
            req.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
            req.extend_from_slice(format!("{size:x}\r\n").as_bytes());
            req.extend_from_slice(&body);
            req.extend_from_slice(b"\r\n0\r\n\r\n");
        } else {
            req.extend_from_slice(format!("Content-Length: {size}\r\n\r\n").as_bytes());
            req.extend_from_slice(&body);
        }
        s.write_all(&req).unwrap();
        let mut pending = Vec::new();
        let (status, _, got) = read_any(&mut s, &mut pending);
        assert_eq!(status, 200, "{size} chunked={chunked}");
        assert!(
            got == body,
            "{size} chunked={chunked}: {} bytes came back",
            got.len()
        );
    }
    srv.stop();
}

#[test]
fn echo_over_tls_returns_the_same_bytes_for_every_size_and_framing() {
    let srv = start_demo_tls("echo", |_, _| {});
    let mut s = tls_connect(srv.tls, tls_client(&srv.anchor, &[&rustls::version::TLS13]));
    assert_eq!(s.conn.alpn_protocol(), Some(&b"http/1.1"[..]));
    let mut rng = Rng(0xec40);
    let mut pending = Vec::new();
    for size in [0, 1, 1024, 10_240, 102_400, 1_000_003] {
        let body: Vec<u8> = (0..size).map(|_| rng.next() as u8).collect();
        s.write_all(
            format!(
                "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Type: application/octet-stream\r\nContent-Length: {size}\r\n\r\n"
            )
            .as_bytes(),
        )
        .unwrap();
        s.write_all(&body).unwrap();
        let (status, head, got) = read_any(&mut s, &mut pending);
        assert_eq!(status, 200, "{size}");
        assert!(
            head.contains("content-type: application/octet-stream\n"),
            "{head}"
        );
        assert!(
            head.contains(&format!("content-length: {size}\n")),
            "{head}"
        );
        assert!(
            got == body,
            "{size} bytes came back changed ({} bytes)",
            got.len()
        );
    }
    // Chunked, in odd pieces: read from the framing, answered chunked.
    for size in [10_240usize, 102_400] {
        let body: Vec<u8> = (0..size).map(|_| rng.next() as u8).collect();
        s.write_all(b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
            .unwrap();
        for piece in body.chunks(7777) {
            s.write_all(format!("{:x}\r\n", piece.len()).as_bytes())
                .unwrap();
            s.write_all(piece).unwrap();
            s.write_all(b"\r\n").unwrap();
        }
        s.write_all(b"0\r\n\r\n").unwrap();
        let (status, _, got) = read_any(&mut s, &mut pending);
        assert_eq!(status, 200);
        assert!(got == body, "chunked {size} came back changed");
    }
    srv.stop();
}

/// The echo is streamed, not held whole: the first bytes come back while most of the body is
/// still to be sent (a handler that waited for the whole body would answer nothing here).
#[test]
fn echo_over_tls_answers_before_the_body_has_all_come() {
    let srv = start_demo_tls("stream", |_, _| {});
    let mut s = tls_connect(srv.tls, tls_client(&srv.anchor, &[&rustls::version::TLS13]));
    let size = 4 << 20;
    let body: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
    s.write_all(
        format!("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: {size}\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let first = 256 * 1024;
    s.write_all(&body[..first]).unwrap();
    // The head and some of the body arrive before the rest is sent (bounded by the read
    // timeout: a server that holds the body whole fails here).
    let mut got = Vec::new();
    let mut chunk = [0u8; 65536];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") || got.len() < 1024 {
        let n = s
            .read(&mut chunk)
            .expect("the echo's first bytes before the body's end");
        assert!(n > 0);
        got.extend_from_slice(&chunk[..n]);
    }
    let end = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert!(got.starts_with(b"HTTP/1.1 200"));
    // Send the rest while reading what comes back, so neither side's buffers fill.
    let mut echoed = got[end..].to_vec();
    for piece in body[first..].chunks(64 * 1024) {
        s.write_all(piece).unwrap();
        s.sock.set_nonblocking(true).unwrap();
        loop {
            match s.read(&mut chunk) {
                Ok(0) => panic!("EOF inside the echo"),
                Ok(n) => echoed.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        s.sock.set_nonblocking(false).unwrap();
    }
    while echoed.len() < size {
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "EOF inside the echo");
        echoed.extend_from_slice(&chunk[..n]);
    }
    assert!(echoed == body, "the streamed echo differs");
    srv.stop();
}

/// Random bytes from a fixed seed.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = Rng(seed);
    (0..len).map(|_| rng.next() as u8).collect()
}

/// gzip without compression: its length depends only on the input's, so a same-length swap
/// of the original has a same-length `.gz`.
fn gz_stored(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::none());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

fn br(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
    w.write_all(b).unwrap();
    drop(w);
    out
}

/// Rewrites `path` in place (same inode) with `bytes`, then puts its mtime back, as `cp -p`
/// or `rsync -t --inplace` leave it: only the ctime says it changed.
fn rewrite_keeping_mtime(path: &std::path::Path, bytes: &[u8]) {
    let mtime = std::fs::metadata(path).unwrap().modified().unwrap();
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
    f.set_len(bytes.len() as u64).unwrap();
    f.set_modified(mtime).unwrap();
}

/// Replaces `path` by renaming a new file over it (a new inode), as deploy tools do.
fn replace_by_rename(path: &std::path::Path, bytes: &[u8]) {
    let tmp = path.with_extension("swap-tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// HttpArena's static freshness: files swapped on disk while the server runs, with the same
/// length, their `.gz` and `.br` siblings too, are served new to every request sent one
/// revalidation interval (1 s, `files::cache::DEFAULT_REVALIDATE_AFTER`) after the swap, over
/// HTTP/1.1 and HTTP/2 (bytes compared) and HTTP/3 (lengths: the test's HTTP/3 client counts
/// bodies, so its file changes length), and the strong ETag changes with the size and mtime.
#[test]
fn static_files_swapped_on_disk_are_served_fresh_with_their_siblings() {
    use linerate_server::config::FilesMount;
    use std::time::{Duration, Instant};
    let (old, new) = (noise(1, 4096), noise(2, 4096));
    let (js_old, js_new) = (noise(3, 3000), noise(4, 3500));
    assert_eq!(
        br(&old).len(),
        br(&new).len(),
        "the .br swap must keep its length"
    );
    let srv = start_demo_tls("fresh", |cfg, dir| {
        let www = dir.join("www");
        std::fs::create_dir_all(&www).unwrap();
        for (name, bytes) in [("reset.css", &old), ("app.js", &js_old)] {
            std::fs::write(www.join(name), bytes).unwrap();
            std::fs::write(www.join(format!("{name}.gz")), gz_stored(bytes)).unwrap();
            std::fs::write(www.join(format!("{name}.br")), br(bytes)).unwrap();
        }
        cfg.files = Some(FilesMount {
            prefix: "/static".into(),
            root: www,
            ..Default::default()
        });
        let tls = cfg.tls.as_mut().unwrap();
        tls.http2 = true;
        cfg.quic = true;
    });
    let www = srv.dir.join("www");
    let codings = [
        ("identity", None),
        ("gzip", Some("gzip")),
        ("br", Some("br")),
    ];
    let decode = |coding: Option<&str>, body: &[u8]| match coding {
        None => body.to_vec(),
        Some("gzip") => common::gunzip(body),
        Some(_) => common::unbrotli(body),
    };
    // Every coding of reset.css over HTTP/1.1 and HTTP/2: (protocol, coding, bytes, ETag).
    let fetch_all = || {
        let mut out = Vec::new();
        let mut c = Client::connect(srv.run.addr);
        for (ae, coding) in codings {
            c.send(
                format!(
                    "GET /static/reset.css HTTP/1.1\r\nHost: t\r\nAccept-Encoding: {ae}\r\n\r\n"
                )
                .as_bytes(),
            );
            let r = c.read_response();
            assert_eq!(r.status, 200);
            assert_eq!(r.header("content-encoding"), coding, "HTTP/1.1 {ae}");
            let etag = r.header("etag").unwrap().to_string();
            out.push(("HTTP/1.1", ae, decode(coding, &r.body), etag));
            let url = format!("https://localhost:{}/static/reset.css", srv.tls.port());
            let resolve = format!("localhost:{}:127.0.0.1", srv.tls.port());
            let h2 = common::curl::curl_url(
                &srv.dir,
                &url,
                &["--http2", "-k", "--resolve", &resolve],
                &["-H", &format!("Accept-Encoding: {ae}")],
            );
            assert_eq!((h2.version.as_str(), h2.status), ("2", 200));
            assert_eq!(h2.header("content-encoding"), coding, "HTTP/2 {ae}");
            let etag = h2.header("etag").unwrap().to_string();
            out.push(("HTTP/2", ae, decode(coding, &h2.body), etag));
        }
        out
    };
    // app.js's lengths over HTTP/3, identity, gzip and br.
    let quic = common::h3::quic((*tls_client(&srv.anchor, &[&rustls::version::TLS13])).clone());
    let h3_lengths = || {
        let fields: Vec<Vec<(String, String)>> = codings
            .iter()
            .map(|(ae, _)| vec![("accept-encoding".to_string(), ae.to_string())])
            .collect();
        let asks: Vec<common::h3::Ask<'_>> = fields
            .iter()
            .map(|f| ("GET", "/static/app.js", &f[..], &b""[..]))
            .collect();
        common::h3::send(&quic, srv.tls, &asks).answers
    };
    let js_lengths = |b: &[u8]| {
        vec![
            (200, b.len() as u64),
            (200, gz_stored(b).len() as u64),
            (200, br(b).len() as u64),
        ]
    };

    // Primed: every coding read (and cached) with the old bytes.
    let before = fetch_all();
    for (proto, ae, body, _) in &before {
        assert!(*body == old, "{proto} {ae} before the swap");
    }
    assert_eq!(h3_lengths(), js_lengths(&js_old));

    // The swap: reset.css and its .br rewritten in place with their mtimes put back, its .gz
    // renamed over; app.js and its siblings renamed over with a new length.
    let swapped = Instant::now();
    rewrite_keeping_mtime(&www.join("reset.css"), &new);
    replace_by_rename(&www.join("reset.css.gz"), &gz_stored(&new));
    rewrite_keeping_mtime(&www.join("reset.css.br"), &br(&new));
    replace_by_rename(&www.join("app.js"), &js_new);
    replace_by_rename(&www.join("app.js.gz"), &gz_stored(&js_new));
    replace_by_rename(&www.join("app.js.br"), &br(&js_new));

    // Requests sent before a revalidation interval has passed may see either; every one sent
    // after it sees the new bytes (with a margin for the worker's cached clock).
    while swapped.elapsed() < Duration::from_millis(1200) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let after = fetch_all();
    for ((proto, ae, body, etag), (_, _, _, old_etag)) in after.iter().zip(&before) {
        assert!(*body == new, "{proto} {ae}: still the old bytes");
        // The ETag is the file's size and mtime (as nginx's, so that every
        // node of a fleet gives the same): it changed for the .gz renamed over (a new mtime),
        // not for reset.css and its .br rewritten in place with their mtimes put back, whose
        // bytes are served new all the same (the open-file cache follows the ctime).
        let renamed = *ae == "gzip";
        assert_eq!(
            etag != old_etag,
            renamed,
            "{proto} {ae}: the ETag follows the size and mtime ({old_etag} -> {etag})"
        );
    }
    assert_eq!(
        h3_lengths(),
        js_lengths(&js_new),
        "HTTP/3: app.js not fresh"
    );
    srv.stop();
}

/// A TLS ClientHello record with `version`, `suites` and the extensions a TLS 1.2 ECDHE
/// handshake needs (groups x25519 and P-256, RSA signatures, uncompressed points).
fn client_hello(version: [u8; 2], suites: &[[u8; 2]]) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&version);
    body.extend_from_slice(&[7u8; 32]); // random
    body.push(0); // session id
    body.extend_from_slice(&((suites.len() * 2) as u16).to_be_bytes());
    for s in suites {
        body.extend_from_slice(s);
    }
    body.extend_from_slice(&[1, 0]); // compression: null
    let ext: &[u8] = &[
        0x00, 0x0a, 0x00, 0x06, 0x00, 0x04, 0x00, 0x1d, 0x00, 0x17, // supported_groups
        0x00, 0x0d, 0x00, 0x06, 0x00, 0x04, 0x08, 0x04, 0x04, 0x01, // signature_algorithms
        0x00, 0x0b, 0x00, 0x02, 0x01, 0x00, // ec_point_formats: uncompressed
    ];
    body.extend_from_slice(&(ext.len() as u16).to_be_bytes());
    body.extend_from_slice(ext);
    let mut hs = vec![1u8, 0, (body.len() >> 8) as u8, body.len() as u8];
    hs.extend_from_slice(&body);
    let mut rec = vec![0x16, 3, 1, (hs.len() >> 8) as u8, hs.len() as u8];
    rec.extend_from_slice(&hs);
    rec
}

/// The first record the server answers `hello` with: 0x16 (a handshake: ServerHello) or
/// 0x15 (an alert).
fn first_record(addr: SocketAddr, hello: &[u8]) -> Option<u8> {
    let mut tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(common::READ_TIMEOUT)).unwrap();
    tcp.write_all(hello).unwrap();
    let mut b = [0u8; 1];
    match tcp.read(&mut b) {
        Ok(1) => Some(b[0]),
        _ => None,
    }
}

/// HttpArena's TLS posture: the mounted RSA-2048 certificate is the one served; TLS 1.3 and
/// 1.2 negotiate AEAD suites only; TLS 1.1 and 1.0, and TLS 1.2 offering only CBC, RC4 or
/// 3DES suites, are refused with an alert (the same hello with an AEAD suite is answered).
#[test]
fn tls_serves_the_mounted_rsa_certificate_with_aead_only_and_refuses_tls_1_1() {
    let srv = start_demo_tls("posture", |_, _| {});
    for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
        let mut s = tls_connect(srv.tls, tls_client(&srv.anchor, &[version]));
        assert_eq!(s.conn.peer_certificates().unwrap()[0], srv.anchor);
        let suite = format!("{:?}", s.conn.negotiated_cipher_suite().unwrap().suite());
        assert!(
            suite.contains("_GCM_") || suite.contains("CHACHA20_POLY1305"),
            "{suite} is not AEAD"
        );
        s.write_all(b"GET /json HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        assert_eq!(read_any(&mut s, &mut Vec::new()).0, 200);
    }
    const GCM: [u8; 2] = [0xc0, 0x2f]; // ECDHE_RSA_WITH_AES_128_GCM_SHA256
    let weak: &[[u8; 2]] = &[
        [0xc0, 0x13], // ECDHE_RSA_WITH_AES_128_CBC_SHA
        [0xc0, 0x27], // ECDHE_RSA_WITH_AES_128_CBC_SHA256
        [0x00, 0x2f], // RSA_WITH_AES_128_CBC_SHA
        [0x00, 0x05], // RSA_WITH_RC4_128_SHA
        [0x00, 0x0a], // RSA_WITH_3DES_EDE_CBC_SHA
    ];
    // The control: a TLS 1.2 hello with an AEAD suite gets a ServerHello.
    assert_eq!(
        first_record(srv.tls, &client_hello([3, 3], &[GCM])),
        Some(0x16)
    );
    for (what, hello) in [
        ("TLS 1.1", client_hello([3, 2], &[GCM, weak[0]])),
        ("TLS 1.0", client_hello([3, 1], &[GCM, weak[0]])),
        ("TLS 1.2, weak suites only", client_hello([3, 3], weak)),
    ] {
        assert_eq!(
            first_record(srv.tls, &hello),
            Some(0x15),
            "{what}: no alert"
        );
    }
    srv.stop();
}

/// bench/httparena.toml, HttpArena's layout, with its mounts (`/certs`, `/data/static`) and
/// ports moved to the test's own: every port answers as the profiles expect. 8080 plain
/// HTTP/1.1; 8081 HTTPS with the mounted RSA certificate, HTTP/1.1 even to a client offering
/// h2, the 8gbit echo and static files; 8082 h2c; 8443 h2 over TLS and HTTP/3.
#[test]
fn the_httparena_layout_serves_each_port_from_the_mounted_files() {
    let dir = std::env::temp_dir().join(format!("linerate-arena-{}-layout", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("certs")).unwrap();
    std::fs::create_dir_all(dir.join("data/static")).unwrap();
    std::fs::write(dir.join("data/static/reset.css"), "a { color: red }\n").unwrap();
    let anchor = rsa_pair(&dir.join("certs"));
    let ports: Vec<u16> = (0..4).map(|_| common::free_port("127.0.0.1")).collect();
    let mut text = include_str!("../../../bench/httparena.toml")
        .replace("/certs/", &format!("{}/certs/", dir.display()))
        .replace("/data/static", &format!("{}/data/static", dir.display()));
    for (port, ours) in [8080, 8081, 8082, 8443].iter().zip(&ports) {
        text = text.replace(&format!("0.0.0.0:{port}"), &format!("127.0.0.1:{ours}"));
    }
    let conf = dir.join("httparena.toml");
    std::fs::write(&conf, text).unwrap();
    let served = common::bin::serve_as(&["--config", conf.to_str().unwrap()]);
    let at = |i: usize| SocketAddr::from(([127, 0, 0, 1], ports[i]));

    let mut c = Client::connect(at(0));
    assert_eq!(c.get("/baseline11?a=1&b=2").text(), "3");

    let mut s = tls_connect(at(1), tls_client(&anchor, &[&rustls::version::TLS13]));
    assert_eq!(s.conn.alpn_protocol(), Some(&b"http/1.1"[..]));
    assert_eq!(s.conn.peer_certificates().unwrap()[0], anchor);
    s.write_all(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello")
        .unwrap();
    let mut pending = Vec::new();
    assert_eq!(read_any(&mut s, &mut pending).2, b"hello");
    s.write_all(b"GET /static/reset.css HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let (status, head, body) = read_any(&mut s, &mut pending);
    assert_eq!((status, body.as_slice()), (200, &b"a { color: red }\n"[..]));
    assert!(head.contains("content-type: text/css"), "{head}");

    let h2c = common::curl::curl_url(
        &dir,
        &format!("http://{}/baseline2?a=1&b=2", at(2)),
        &["--http2-prior-knowledge"],
        &[],
    );
    assert_eq!((h2c.version.as_str(), h2c.text()), ("2", "3".to_string()));

    let s = tls_connect(at(3), tls_client(&anchor, &[&rustls::version::TLS13]));
    assert_eq!(s.conn.alpn_protocol(), Some(&b"h2"[..]));
    let quic = common::h3::quic((*tls_client(&anchor, &[&rustls::version::TLS13])).clone());
    let got = common::h3::get(&quic, at(3), &["/baseline2?a=1&b=2"]);
    assert_eq!(got.answers, vec![(200, 1)]);

    drop(served);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A WebSocket upgrade of `/ws` on a new connection with a fresh random key; asserts the 101
/// and that its `Sec-WebSocket-Accept` is computed from this key (RFC 6455 §4.2.2).
fn ws_open(addr: SocketAddr, rng: &mut Rng) -> TcpStream {
    use base64::Engine as _;
    let key_bytes: Vec<u8> = (0..16).map(|_| rng.next() as u8).collect();
    let key = base64::engine::general_purpose::STANDARD.encode(key_bytes);
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(common::READ_TIMEOUT)).unwrap();
    s.set_nodelay(true).unwrap();
    s.write_all(
        format!(
            "GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        .as_bytes(),
    )
    .unwrap();
    // Byte by byte up to the head's end, so no frame byte is taken with it.
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut b = [0u8; 1];
        assert_eq!(s.read(&mut b).unwrap(), 1, "EOF in the 101");
        head.push(b[0]);
    }
    let head = String::from_utf8(head).unwrap().to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 101"), "{head}");
    let accept = linerate_ws::accept::accept(key.as_bytes()).to_ascii_lowercase();
    assert!(
        head.contains(&format!("sec-websocket-accept: {accept}\r\n")),
        "{head}"
    );
    s
}

/// A masked client frame: `opcode`, `payload` (under 126 bytes).
fn ws_frame(opcode: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
    let mut f = vec![0x80 | opcode, 0x80 | payload.len() as u8];
    f.extend_from_slice(&mask);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    f
}

/// Reads one unmasked server frame (payload under 126 bytes): (first byte, payload).
fn ws_read(s: &mut TcpStream) -> (u8, Vec<u8>) {
    let mut h = [0u8; 2];
    s.read_exact(&mut h).unwrap();
    assert!(h[1] < 126, "a short frame, unmasked: {h:?}");
    let mut payload = vec![0u8; h[1] as usize];
    s.read_exact(&mut payload).unwrap();
    (h[0], payload)
}

/// Closes with 1000 and expects the close echoed, then the end of the connection.
fn ws_close(mut s: TcpStream) {
    s.write_all(&ws_frame(0x8, &1000u16.to_be_bytes(), [1, 2, 3, 4]))
        .unwrap();
    assert_eq!(ws_read(&mut s), (0x88, 1000u16.to_be_bytes().to_vec()));
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "bytes after the close: {rest:?}");
}

/// HttpArena's echo-ws-pipeline: 16 text messages sent back to back on each of many open
/// connections before any echo is read; every batch comes back whole, in order, unchanged.
#[test]
fn ws_echo_answers_sixteen_messages_in_flight_per_connection() {
    let server = start_demo();
    let mut rng = Rng(0x5e7);
    let mut conns: Vec<TcpStream> = (0..32).map(|_| ws_open(server.addr, &mut rng)).collect();
    for round in 0..4 {
        for (c, s) in conns.iter_mut().enumerate() {
            let mut batch = Vec::new();
            for i in 0..16 {
                let msg = format!("hello {round}.{c}.{i}");
                batch.extend(ws_frame(
                    0x1,
                    msg.as_bytes(),
                    (rng.next() as u32).to_be_bytes(),
                ));
            }
            s.write_all(&batch).unwrap();
        }
        for (c, s) in conns.iter_mut().enumerate() {
            for i in 0..16 {
                let want = format!("hello {round}.{c}.{i}");
                assert_eq!(ws_read(s), (0x81, want.into_bytes()));
            }
        }
    }
    for s in conns {
        ws_close(s);
    }
    server.stop();
}

/// HttpArena's echo-ws-limited: a connection retired after 10 messages and replaced, again
/// and again; every one gets its own handshake (the accept of its own key), its 10 echoes and
/// a clean close.
#[test]
fn ws_echo_serves_connections_retired_every_ten_messages() {
    let server = start_demo();
    let mut rng = Rng(0x11);
    for conn in 0..40 {
        let mut s = ws_open(server.addr, &mut rng);
        for i in 0..10 {
            let msg = format!("hello {conn}.{i}");
            s.write_all(&ws_frame(
                0x1,
                msg.as_bytes(),
                (rng.next() as u32).to_be_bytes(),
            ))
            .unwrap();
            assert_eq!(ws_read(&mut s), (0x81, msg.into_bytes()));
        }
        ws_close(s);
    }
    // The server is still there for more.
    assert_eq!(Client::connect(server.addr).get("/plaintext").status, 200);
    server.stop();
}
