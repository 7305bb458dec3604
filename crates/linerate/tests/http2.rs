//! HTTP/2 on a real server. With curl: every demo endpoint that needs no database, and static
//! files (a file of several MiB byte for byte, a range, a revalidation), answer over h2c and
//! over TLS (ALPN h2) with the status, body and content type HTTP/1.1 gets from the plain
//! listener; ALPN offers h2 then http/1.1, or only http/1.1 when HTTP/2 is off; the h2c port
//! never answers HTTP/1.1. With hand-written frames on a raw socket: each strictness rule and
//! each defence answers with its exact frame (RST_STREAM, GOAWAY, a 431), flow control sends
//! exactly the window the client opens, a client that opens none is cut off at the send
//! timeout, a drain names the open stream in its GOAWAY and lets it finish, and a connection
//! that ends in the read that brought its request leaves nothing behind for the next one.
//! A TLS listener with `quic` announces HTTP/3, and sends its datagrams as large as the path
//! and the client take.
//!
//! Request blocks are HPACK literals without indexing and without Huffman (RFC 7541 §6.2.2),
//! so every byte sent is visible here; answers are decoded by a small decoder below that
//! refuses what the server's encoder never sends (Huffman strings).

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use common::curl::{Got, curl_url};
use common::{READ_TIMEOUT, Running, config};
use linerate_server::config::FilesMount;
use linerate_server::{Config, Server, TlsConfig};
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore};

const BIG_LEN: usize = 4 << 20;
const ONE_MIB: usize = 1 << 20;

/// Bytes whose every position is distinguishable, so a reordered or shifted piece shows.
fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i >> 16) as u8)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The server under test: the demo router, static files under /static, and three listeners.

struct Srv {
    run: Running,
    h2c: SocketAddr,
    tls: SocketAddr,
    dir: PathBuf,
    /// The TLS listener's certificate (a client's trust anchor).
    anchor: CertificateDer<'static>,
}

impl Srv {
    fn stop(self) {
        self.run.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts the demo with a plain HTTP/1.1 listener, an h2c listener and a TLS listener (a
/// certificate made now), static files under `/static`; `tweak` adjusts the config.
fn serve(name: &str, tweak: impl FnOnce(&mut Config)) -> Srv {
    let dir = std::env::temp_dir().join(format!("linerate-h2-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("www")).unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(dir.join("cert.pem"), ck.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), ck.signing_key.serialize_pem()).unwrap();
    std::fs::write(dir.join("www/big.bin"), pattern(BIG_LEN)).unwrap();
    std::fs::write(dir.join("www/one.bin"), pattern(ONE_MIB)).unwrap();
    std::fs::write(dir.join("www/a.txt"), b"hello file\n").unwrap();
    let mut cfg = Config {
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
            ktls: true,
            key_update_bytes: linerate_server::tls::TLS_KEY_UPDATE_BYTES,
            http2: true,
            options: Default::default(),
        }),
        h2c: Some("127.0.0.1:0".parse().unwrap()),
        ..config()
    };
    tweak(&mut cfg);
    let server = Server::bind(cfg, linerate::demo::router()).expect("bind");
    let h2c = server.h2c_addr().expect("h2c address");
    let tls = server.tls_addr().expect("TLS address");
    let addr = server.local_addr();
    let handle = server.handle();
    let stats = server.stats();
    let thread = std::thread::spawn(move || server.run());
    Srv {
        run: Running {
            addr,
            handle,
            stats,
            thread: Some(thread),
        },
        h2c,
        tls,
        dir,
        anchor: ck.cert.der().clone(),
    }
}

// ---------------------------------------------------------------------------------------------
// curl: one request per process, its head and body written to files.

/// How a request reaches the server.
#[derive(Clone, Copy, Debug)]
enum Via {
    /// HTTP/1.1 on the plain listener: the reference.
    H1,
    /// HTTP/2 with prior knowledge on the h2c listener.
    H2c,
    /// HTTPS, offering h2 in ALPN.
    H2Tls,
}

const H2: [Via; 2] = [Via::H2c, Via::H2Tls];

/// `curl ARGS URL` with the version flags of `via`; bounded by `--max-time`.
fn curl(srv: &Srv, via: Via, path: &str, args: &[&str]) -> Got {
    let (url, flags): (String, &[&str]) = match via {
        Via::H1 => (format!("http://{}{path}", srv.run.addr), &["--http1.1"]),
        Via::H2c => (
            format!("http://{}{path}", srv.h2c),
            &["--http2-prior-knowledge"],
        ),
        Via::H2Tls => (format!("https://{}{path}", srv.tls), &["--http2", "-k"]),
    };
    curl_url(&srv.dir, &url, flags, args)
}

/// Asserts `got` (over HTTP/2) is the same answer as `reference` (HTTP/1.1): status, body,
/// content type, and each of `fields`.
fn assert_same(what: &str, via: Via, reference: &Got, got: &Got, fields: &[&str]) {
    assert_eq!(
        reference.version, "1.1",
        "{what}: the reference is HTTP/1.1"
    );
    assert_eq!(got.version, "2", "{what} over {via:?}: HTTP/2 was used");
    assert_eq!(got.status, reference.status, "{what} over {via:?}: status");
    assert!(
        got.body == reference.body,
        "{what} over {via:?}: body differs ({} vs {} bytes)",
        got.body.len(),
        reference.body.len()
    );
    for f in ["content-type"].iter().chain(fields) {
        assert_eq!(
            got.header(f),
            reference.header(f),
            "{what} over {via:?}: {f}"
        );
    }
}

#[test]
fn demo_endpoints_answer_over_http2_as_over_http11() {
    let srv = serve("endpoints", |_| {});
    let upload = srv.dir.join("upload.bin");
    std::fs::write(&upload, pattern(3 << 20)).unwrap();
    let upload_arg = format!("@{}", upload.display());
    let cases: Vec<(&str, &str, Vec<&str>)> = vec![
        ("GET /", "/", vec![]),
        ("POST / echoes", "/", vec!["--data-binary", "hello world"]),
        ("GET /json", "/json", vec![]),
        ("GET /plaintext", "/plaintext", vec![]),
        ("GET /baseline11", "/baseline11?a=13&b=42", vec![]),
        (
            "POST /baseline11",
            "/baseline11?a=13&b=42",
            vec!["--data-binary", "20"],
        ),
        ("GET /baseline2", "/baseline2?a=13&b=42", vec![]),
        ("GET /baseline2 bad", "/baseline2?a=x&b=42", vec![]),
        ("GET /pipeline", "/pipeline", vec![]),
        ("GET /json/{count}", "/json/10?m=2", vec![]),
        ("GET /json/{count} out of range", "/json/51", vec![]),
        // 3 MiB: three stream windows' worth (1 MiB each), so WINDOW_UPDATEs must flow.
        (
            "POST /upload",
            "/upload",
            vec!["--data-binary", &upload_arg],
        ),
        ("GET /cookie", "/cookie", vec!["-b", "a=1; b=2"]),
        ("GET /nope (404)", "/nope", vec![]),
        ("DELETE /json (405)", "/json", vec!["-X", "DELETE"]),
    ];
    for (what, path, args) in &cases {
        let reference = curl(&srv, Via::H1, path, args);
        for via in H2 {
            let got = curl(&srv, via, path, args);
            assert_same(what, via, &reference, &got, &["allow"]);
        }
    }
    let up = curl(&srv, Via::H2Tls, "/upload", &["--data-binary", &upload_arg]);
    assert_eq!(up.body, b"3145728", "the whole upload was counted");
    let sum = curl(&srv, Via::H2c, "/baseline2?a=13&b=42", &[]);
    assert_eq!((sum.status, &sum.body[..]), (200, &b"55"[..]));
    let deleted = curl(&srv, Via::H2c, "/json", &["-X", "DELETE"]);
    assert_eq!(deleted.status, 405);
    assert!(deleted.header("allow").is_some_and(|a| a.contains("GET")));

    // HEAD: the GET's fields (that no DATA follows is pinned with raw frames below).
    for path in ["/json", "/", "/static/a.txt"] {
        let reference = curl(&srv, Via::H1, path, &["-I"]);
        for via in H2 {
            let got = curl(&srv, via, path, &["-I"]);
            assert_same(
                &format!("HEAD {path}"),
                via,
                &reference,
                &got,
                &["content-length"],
            );
        }
    }

    // /echo: the same fields, in the same order; HTTP/2 names arrive in lowercase.
    let lower = |b: &[u8]| -> String {
        String::from_utf8_lossy(b)
            .lines()
            .map(|l| match l.split_once(": ") {
                Some((n, v)) => format!("{}: {v}\n", n.to_ascii_lowercase()),
                None => format!("{l}\n"),
            })
            .collect()
    };
    let args = ["-H", "Host: t", "-H", "X-Custom: one two"];
    let reference = curl(&srv, Via::H1, "/echo", &args);
    assert!(lower(&reference.body).contains("x-custom: one two\n"));
    for via in H2 {
        let got = curl(&srv, via, "/echo", &args);
        assert_eq!(got.version, "2");
        assert_eq!(got.status, reference.status);
        assert_eq!(got.header("content-type"), reference.header("content-type"));
        assert_eq!(
            lower(&got.body),
            lower(&reference.body),
            "/echo over {via:?}"
        );
    }
    srv.stop();
}

#[test]
fn static_files_over_http2_are_byte_exact_with_ranges_and_revalidation() {
    let srv = serve("static", |_| {});
    let big = pattern(BIG_LEN);
    for via in H2 {
        let got = curl(&srv, via, "/static/big.bin", &[]);
        assert_eq!((got.version.as_str(), got.status), ("2", 200), "{via:?}");
        assert_eq!(got.body.len(), BIG_LEN, "{via:?}");
        assert!(got.body == big, "{via:?}: the file's bytes differ");
        assert_eq!(got.header("content-length"), Some(&*BIG_LEN.to_string()));
    }

    let range = ["-H", "Range: bytes=1000000-1000009"];
    let reference = curl(&srv, Via::H1, "/static/big.bin", &range);
    assert_eq!(reference.status, 206);
    for via in H2 {
        let got = curl(&srv, via, "/static/big.bin", &range);
        assert_same("a range", via, &reference, &got, &["content-range"]);
        assert_eq!(got.body, big[1_000_000..1_000_010]);
        assert_eq!(
            got.header("content-range"),
            Some(&*format!("bytes 1000000-1000009/{BIG_LEN}"))
        );
    }

    let full = curl(&srv, Via::H1, "/static/a.txt", &[]);
    let etag = full.header("etag").expect("an ETag").to_string();
    let inm = format!("If-None-Match: {etag}");
    let reference = curl(&srv, Via::H1, "/static/a.txt", &["-H", &inm]);
    assert_eq!(reference.status, 304);
    for via in H2 {
        let got = curl(&srv, via, "/static/a.txt", &["-H", &inm]);
        assert_same("If-None-Match", via, &reference, &got, &["etag"]);
        assert_eq!(got.status, 304);
        assert!(got.body.is_empty(), "a 304 has no body");
    }
    srv.stop();
}

#[test]
fn alpn_offers_h2_then_http11() {
    let srv = serve("alpn", |_| {});
    let h2 = curl(&srv, Via::H2Tls, "/plaintext", &[]);
    assert_eq!(
        (h2.version.as_str(), &h2.body[..]),
        ("2", &b"Hello, World!"[..])
    );
    let url = format!("https://{}/plaintext", srv.tls);
    let h1 = curl_url(&srv.dir, &url, &["--http1.1", "-k"], &[]);
    assert_eq!(
        (h1.version.as_str(), &h1.body[..]),
        ("1.1", &b"Hello, World!"[..])
    );
    srv.stop();
}

#[test]
fn alpn_without_http2_gives_http11_to_a_client_asking_for_h2() {
    let srv = serve("alpn-off", |c| c.tls.as_mut().unwrap().http2 = false);
    let url = format!("https://{}/plaintext", srv.tls);
    let got = curl_url(&srv.dir, &url, &["--http2", "-k"], &[]);
    assert_eq!(got.version, "1.1");
    assert_eq!((got.status, &got.body[..]), (200, &b"Hello, World!"[..]));
    srv.stop();
}

#[test]
fn h2c_listener_does_not_answer_http11() {
    let srv = serve("h2c-h1", |_| {});
    let mut s = TcpStream::connect(srv.h2c).unwrap();
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    s.write_all(b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the connection was not closed: {e}"),
        }
    }
    assert!(
        !got.starts_with(b"HTTP/1.1"),
        "answered in HTTP/1.1: {:?}",
        String::from_utf8_lossy(&got)
    );
    // What came is whole HTTP/2 frames (the server's SETTINGS first), the last a GOAWAY
    // PROTOCOL_ERROR: the bytes were not a client preface (RFC 9113 §3.4).
    let frames = parse_frames(&got);
    assert_eq!(frames.first().map(|f| f.kind), Some(SETTINGS), "{frames:?}");
    assert_eq!(frames.last().map(Frame::goaway), Some((0, PROTOCOL_ERROR)));
    srv.stop();
}

// ---------------------------------------------------------------------------------------------
// Raw frames.

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const CONTINUATION: u8 = 0x9;

const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

const NO_ERROR: u32 = 0x0;
const PROTOCOL_ERROR: u32 = 0x1;
const REFUSED_STREAM: u32 = 0x7;
const CANCEL: u32 = 0x8;
const ENHANCE_YOUR_CALM: u32 = 0xb;

const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;

/// The server's SETTINGS_MAX_FRAME_SIZE (it announces none: the default, RFC 9113 §6.5.2).
const MAX_FRAME: usize = 16_384;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

#[derive(Clone, Debug, PartialEq, Eq)]
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

impl Frame {
    fn u32_at(&self, at: usize) -> u32 {
        u32::from_be_bytes(self.payload[at..at + 4].try_into().unwrap())
    }

    /// A RST_STREAM's (stream, error code).
    fn rst(&self) -> (u32, u32) {
        assert_eq!(self.kind, RST_STREAM, "expected RST_STREAM, got {self:?}");
        assert_eq!(self.payload.len(), 4);
        (self.stream, self.u32_at(0))
    }

    /// A GOAWAY's (last stream id, error code).
    fn goaway(&self) -> (u32, u32) {
        assert_eq!(self.kind, GOAWAY, "expected GOAWAY, got {self:?}");
        assert_eq!(self.stream, 0);
        (self.u32_at(0) & 0x7fff_ffff, self.u32_at(4))
    }

    fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// A frame's bytes: the 9-byte header (RFC 9113 §4.1), then the payload.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = (payload.len() as u32).to_be_bytes();
    let mut out = vec![len[1], len[2], len[3], kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Splits bytes into whole frames; panics on a partial one.
fn parse_frames(mut b: &[u8]) -> Vec<Frame> {
    let mut out = Vec::new();
    while !b.is_empty() {
        assert!(b.len() >= 9, "a partial frame header: {b:?}");
        let len = u32::from_be_bytes([0, b[0], b[1], b[2]]) as usize;
        assert!(b.len() >= 9 + len, "a partial frame");
        out.push(Frame {
            kind: b[3],
            flags: b[4],
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
            payload: b[9..9 + len].to_vec(),
        });
        b = &b[9 + len..];
    }
    out
}

/// An HPACK integer with an `n`-bit prefix whose high bits are `first` (RFC 7541 §5.1).
fn hpack_int(out: &mut Vec<u8>, first: u8, n: u32, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
}

/// A header block of literal fields without indexing, new names, no Huffman (RFC 7541
/// §6.2.2): `0x00`, name length, name, value length, value.
fn block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in fields {
        out.push(0x00);
        hpack_int(&mut out, 0, 7, name.len());
        out.extend_from_slice(name.as_bytes());
        hpack_int(&mut out, 0, 7, value.len());
        out.extend_from_slice(value.as_bytes());
    }
    out
}

/// A request's pseudo-header fields, then `extra`.
fn request<'a>(
    method: &'a str,
    path: &'a str,
    extra: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    let mut f = vec![
        (":method", method),
        (":scheme", "http"),
        (":authority", "t"),
        (":path", path),
    ];
    f.extend_from_slice(extra);
    f
}

/// The static table (RFC 7541 Appendix A), index 1 first.
const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// Decodes a response header block: indexed fields and literals (with or without indexing),
/// raw strings. One connection's dynamic table, newest first.
#[derive(Default)]
struct Decoder {
    table: Vec<(String, String)>,
}

impl Decoder {
    fn decode(&mut self, b: &[u8]) -> Vec<(String, String)> {
        let mut at = 0;
        let mut out = Vec::new();
        while at < b.len() {
            let first = b[at];
            if first & 0x80 != 0 {
                let i = int(b, &mut at, 7);
                out.push(self.entry(i));
            } else if first & 0xe0 == 0x20 {
                int(b, &mut at, 5); // a dynamic table size update
            } else {
                let (prefix, index) = if first & 0x40 != 0 {
                    (6, true)
                } else {
                    (4, false)
                };
                let i = int(b, &mut at, prefix);
                let name = if i == 0 {
                    string(b, &mut at)
                } else {
                    self.entry(i).0
                };
                let value = string(b, &mut at);
                if index {
                    self.table.insert(0, (name.clone(), value.clone()));
                }
                out.push((name, value));
            }
        }
        out
    }

    fn entry(&self, i: usize) -> (String, String) {
        assert!(i > 0, "HPACK index 0");
        if i <= STATIC.len() {
            let (n, v) = STATIC[i - 1];
            return (n.to_string(), v.to_string());
        }
        self.table
            .get(i - STATIC.len() - 1)
            .cloned()
            .expect("a dynamic table index the server never added")
    }
}

fn int(b: &[u8], at: &mut usize, n: u32) -> usize {
    let max = (1usize << n) - 1;
    let mut v = b[*at] as usize & max;
    *at += 1;
    if v < max {
        return v;
    }
    let mut shift = 0;
    loop {
        let c = b[*at];
        *at += 1;
        v += ((c & 0x7f) as usize) << shift;
        shift += 7;
        if c & 0x80 == 0 {
            return v;
        }
    }
}

fn string(b: &[u8], at: &mut usize) -> String {
    assert!(
        b[*at] & 0x80 == 0,
        "a Huffman-coded string: this decoder reads raw strings only"
    );
    let len = int(b, at, 7);
    let s = String::from_utf8(b[*at..*at + len].to_vec()).unwrap();
    *at += len;
    s
}

/// What the next read brought.
#[derive(Debug)]
enum Next {
    Frame(Frame),
    /// A clean EOF at a frame boundary.
    Eof,
    Reset,
}

/// An answer on one stream.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A raw HTTP/2 client connection.
struct H2 {
    s: TcpStream,
    buf: Vec<u8>,
    decoder: Decoder,
}

impl H2 {
    /// Connects, sends the preface and SETTINGS with `settings`, and completes the exchange:
    /// the server's SETTINGS acknowledged, ours acknowledged by it.
    fn open(addr: SocketAddr, settings: &[(u16, u32)]) -> H2 {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        s.set_nodelay(true).unwrap();
        let mut c = H2 {
            s,
            buf: Vec::new(),
            decoder: Decoder::default(),
        };
        let mut hello = PREFACE.to_vec();
        let mut p = Vec::new();
        for (id, v) in settings {
            p.extend_from_slice(&id.to_be_bytes());
            p.extend_from_slice(&v.to_be_bytes());
        }
        hello.extend(frame(SETTINGS, 0, 0, &p));
        c.send(&hello);
        let (mut theirs, mut acked) = (false, false);
        while !(theirs && acked) {
            let f = c.frame();
            match (f.kind, f.has(ACK)) {
                (SETTINGS, false) => {
                    theirs = true;
                    c.send(&frame(SETTINGS, ACK, 0, &[]));
                }
                (SETTINGS, true) => acked = true,
                // The server raises its connection window at the start.
                (WINDOW_UPDATE, _) if f.stream == 0 => {}
                _ => panic!("unexpected frame in the SETTINGS exchange: {f:?}"),
            }
        }
        c
    }

    fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).expect("write");
    }

    /// HEADERS (with END_HEADERS) carrying `fields` on `stream`.
    fn headers(&mut self, stream: u32, fields: &[(&str, &str)], end_stream: bool) {
        let flags = END_HEADERS | if end_stream { END_STREAM } else { 0 };
        self.send(&frame(HEADERS, flags, stream, &block(fields)));
    }

    fn next(&mut self) -> Next {
        loop {
            if self.buf.len() >= 9 {
                let len = u32::from_be_bytes([0, self.buf[0], self.buf[1], self.buf[2]]) as usize;
                if self.buf.len() >= 9 + len {
                    let f = parse_frames(&self.buf[..9 + len]).remove(0);
                    self.buf.drain(..9 + len);
                    return Next::Frame(f);
                }
            }
            let mut chunk = [0u8; 65536];
            match self.s.read(&mut chunk) {
                Ok(0) => {
                    assert!(self.buf.is_empty(), "EOF inside a frame");
                    return Next::Eof;
                }
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return Next::Reset,
                Err(e) => panic!("read: {e} (nothing within {READ_TIMEOUT:?})"),
            }
        }
    }

    /// The next frame; panics on the end of the connection.
    fn frame(&mut self) -> Frame {
        match self.next() {
            Next::Frame(f) => f,
            end => panic!("expected a frame, the connection ended: {end:?}"),
        }
    }

    /// Asserts the server closes the connection (FIN or reset) with no frame before.
    fn expect_closed(&mut self) {
        match self.next() {
            Next::Eof | Next::Reset => {}
            Next::Frame(f) => panic!("expected the connection to close, got {f:?}"),
        }
    }

    /// Sends a PING and returns the frames that arrive before its ACK: the server handles
    /// frames in order, so these are all it wrote for what was sent before the PING.
    fn barrier(&mut self, id: u64) -> Vec<Frame> {
        self.send(&frame(PING, 0, 0, &id.to_be_bytes()));
        let mut before = Vec::new();
        loop {
            let f = self.frame();
            if f.kind == PING && f.has(ACK) && f.payload == id.to_be_bytes() {
                return before;
            }
            before.push(f);
        }
    }

    /// The answer on `stream`: HEADERS, then DATA until END_STREAM; nothing else may come
    /// in between.
    fn answer(&mut self, stream: u32) -> Answer {
        let f = self.frame();
        assert_eq!(
            (f.kind, f.stream),
            (HEADERS, stream),
            "expected HEADERS on stream {stream}, got {f:?}"
        );
        assert!(f.has(END_HEADERS), "the answers here fit one frame");
        let headers = self.decoder.decode(&f.payload);
        let status = headers
            .iter()
            .find(|(n, _)| n == ":status")
            .expect(":status")
            .1
            .parse()
            .unwrap();
        let mut body = Vec::new();
        let mut end = f.has(END_STREAM);
        while !end {
            let d = self.frame();
            assert_eq!(
                (d.kind, d.stream),
                (DATA, stream),
                "expected DATA on stream {stream}, got {d:?}"
            );
            body.extend_from_slice(&d.payload);
            end = d.has(END_STREAM);
        }
        Answer {
            status,
            headers,
            body,
        }
    }

    /// GET `path` on `stream` and its answer.
    fn get(&mut self, stream: u32, path: &str) -> Answer {
        self.headers(stream, &request("GET", path, &[]), true);
        self.answer(stream)
    }
}

/// A request that reads a body: the demo's `POST /baseline11` (a + b + the body's integer).
fn body_request() -> Vec<(&'static str, &'static str)> {
    request("POST", "/baseline11?a=1&b=2", &[])
}

/// Checks that the connection still serves: a GET on `stream` answered 200.
fn still_serves(c: &mut H2, stream: u32) {
    let a = c.get(stream, "/plaintext");
    assert_eq!((a.status, &a.body[..]), (200, &b"Hello, World!"[..]));
}

#[test]
fn head_is_answered_with_the_get_fields_and_no_data() {
    let srv = serve("head", |_| {});
    let mut c = H2::open(srv.h2c, &[]);
    let get = c.get(1, "/static/a.txt");
    c.headers(3, &request("HEAD", "/static/a.txt", &[]), true);
    let f = c.frame();
    assert_eq!((f.kind, f.stream), (HEADERS, 3), "{f:?}");
    assert!(f.has(END_STREAM), "HEADERS ends the stream: no DATA");
    let head = c.decoder.decode(&f.payload);
    for name in [":status", "content-type", "content-length", "etag"] {
        let field = |fields: &[(String, String)]| {
            fields
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(field(&head), field(&get.headers), "{name}");
    }
    assert_eq!(get.header("content-length"), Some("11"));
    still_serves(&mut c, 5);
    srv.stop();
}

#[test]
fn uppercase_field_name_is_reset_with_protocol_error() {
    // RFC 9113 §8.2.1: a field name with uppercase characters is malformed.
    let srv = serve("upper", |_| {});
    let mut c = H2::open(srv.h2c, &[]);
    c.headers(1, &request("GET", "/json", &[("X-Upper", "1")]), true);
    assert_eq!(c.frame().rst(), (1, PROTOCOL_ERROR));
    still_serves(&mut c, 3);
    srv.stop();
}

#[test]
fn connection_specific_field_is_reset_with_protocol_error() {
    // RFC 9113 §8.2.2: connection-specific fields are malformed in HTTP/2.
    let srv = serve("connection", |_| {});
    let mut c = H2::open(srv.h2c, &[]);
    c.headers(
        1,
        &request("GET", "/json", &[("connection", "keep-alive")]),
        true,
    );
    assert_eq!(c.frame().rst(), (1, PROTOCOL_ERROR));
    still_serves(&mut c, 3);
    srv.stop();
}

#[test]
fn te_other_than_trailers_is_reset_with_protocol_error() {
    // RFC 9113 §8.2.2: TE may only be "trailers".
    let srv = serve("te-gzip", |_| {});
    let mut c = H2::open(srv.h2c, &[]);
    c.headers(1, &request("GET", "/json", &[("te", "gzip")]), true);
    assert_eq!(c.frame().rst(), (1, PROTOCOL_ERROR));
    still_serves(&mut c, 3);
    srv.stop();
}

#[test]
fn te_trailers_is_accepted() {
    let srv = serve("te-trailers", |_| {});
    let mut c = H2::open(srv.h2c, &[]);
    c.headers(1, &request("GET", "/json", &[("te", "trailers")]), true);
    let a = c.answer(1);
    assert_eq!(a.status, 200);
    assert_eq!(a.header("content-type"), Some("application/json"));
    assert_eq!(a.body, br#"{"message":"Hello, World!"}"#);
    srv.stop();
}

#[test]
fn content_length_longer_than_the_data_is_reset_with_protocol_error() {
    // RFC 9113 §8.1.1: a Content-Length that is not the sum of the DATA is malformed.
    let srv = serve("short-body", |_| {});
    let mut c = H2::open(srv.h2c, &[]);
    let mut fields = body_request();
    fields.push(("content-length", "10"));
    c.headers(1, &fields, false);
    c.send(&frame(DATA, END_STREAM, 1, b"12345"));
    assert_eq!(c.frame().rst(), (1, PROTOCOL_ERROR));
    still_serves(&mut c, 3);
    srv.stop();
}

#[test]
fn the_101st_concurrent_stream_is_refused() {
    // SETTINGS_MAX_CONCURRENT_STREAMS is 100 (MAX_CONCURRENT_STREAMS in the server's h2
    // stream.rs). With the client's window at 0, 100 GETs of a 1 MiB file stay open (their
    // HEADERS go out, their DATA waits); then one more.
    let srv = serve("concurrent", |_| {});
    let mut c = H2::open(srv.h2c, &[(SETTINGS_INITIAL_WINDOW_SIZE, 0)]);
    let fields = block(&request("GET", "/static/one.bin", &[]));
    let mut burst = Vec::new();
    for i in 0..101u32 {
        burst.extend(frame(HEADERS, END_HEADERS | END_STREAM, 2 * i + 1, &fields));
    }
    c.send(&burst);
    let mut heads = 0;
    let rst = loop {
        let f = c.frame();
        if f.kind == RST_STREAM {
            break f.rst();
        }
        assert_eq!(f.kind, HEADERS, "{f:?}");
        heads += 1;
    };
    assert_eq!(rst, (201, REFUSED_STREAM));
    assert_eq!(heads, 100, "the 100 open streams were answered");
    srv.stop();
}

#[test]
fn the_ninth_stream_sending_a_large_body_is_refused() {
    // MAX_BODY_STREAMS is 8: bodies over SMALL_BODY one connection may be sending at once
    // (each may be buffered up to the body limit); one more is refused, retryable — at its
    // HEADERS when it declares its length, else when its DATA takes it past SMALL_BODY — and
    // the others are still served.
    let srv = serve("bodies", |_| {});
    let mut c = H2::open(srv.h2c, &[]);
    let large = (linerate_server::http2::SMALL_BODY + 1).to_string();
    let fields = block(&request(
        "POST",
        "/baseline11?a=1&b=2",
        &[("content-length", large.as_str())],
    ));
    let mut burst = Vec::new();
    for i in 0..9u32 {
        burst.extend(frame(HEADERS, END_HEADERS, 2 * i + 1, &fields));
    }
    c.send(&burst);
    assert_eq!(c.frame().rst(), (17, REFUSED_STREAM));
    // Undeclared: refused once its DATA outgrows SMALL_BODY.
    c.headers(19, &body_request(), false);
    let small = vec![b'1'; linerate_server::http2::SMALL_BODY as usize];
    c.send(&frame(DATA, 0, 19, &small));
    c.send(&frame(DATA, 0, 19, b"1"));
    assert_eq!(c.frame().rst(), (19, REFUSED_STREAM));
    still_serves(&mut c, 21);
    srv.stop();
}

#[test]
fn a_hundred_grpc_calls_sending_every_headers_first_are_all_answered() {
    // HttpArena's unary-grpc as h2load -m 100 sends it: 100 streams' HEADERS, then their DATA
    // (nghttp2 writes HEADERS before DATA). Small bodies do not count among MAX_BODY_STREAMS.
    let srv = serve("grpc-m100", |_| {});
    let mut c = H2::open(srv.h2c, &[]);
    let fields = block(&grpc_call("/benchmark.BenchmarkService/GetSum"));
    let mut burst = Vec::new();
    for i in 0..100u32 {
        burst.extend(frame(HEADERS, END_HEADERS, 2 * i + 1, &fields));
    }
    for i in 0..100u32 {
        burst.extend(frame(
            DATA,
            END_STREAM,
            2 * i + 1,
            &[0, 0, 0, 0, 4, 8, 1, 16, 2],
        ));
    }
    c.send(&burst);
    let mut answered = 0;
    let mut ended = 0;
    for f in c.barrier(7) {
        assert_ne!(f.kind, RST_STREAM, "{f:?}");
        if f.kind == DATA {
            assert_eq!(f.payload, [0, 0, 0, 0, 2, 8, 3]);
            answered += 1;
        }
        if f.kind == HEADERS && f.has(END_STREAM) {
            ended += 1;
        }
    }
    assert_eq!((answered, ended), (100, 100));
    srv.stop();
}

#[test]
fn header_list_over_max_head_bytes_is_answered_431_and_the_connection_goes_on() {
    // The server announces SETTINGS_MAX_HEADER_LIST_SIZE = max_head_bytes (MAX_HEAD_BYTES by
    // default); a larger list gets 431 on its stream (RFC 9113 §10.5.1), not a connection
    // error. The block is larger than a frame, so it goes as HEADERS + CONTINUATION.
    let srv = serve("431", |_| {});
    let mut c = H2::open(srv.h2c, &[]);
    let big = "a".repeat(linerate_http1::MAX_HEAD_BYTES);
    let b = block(&request("GET", "/json", &[("x-big", big.as_str())]));
    assert!(b.len() > MAX_FRAME);
    let mut out = frame(HEADERS, END_STREAM, 1, &b[..MAX_FRAME]);
    out.extend(frame(CONTINUATION, END_HEADERS, 1, &b[MAX_FRAME..]));
    c.send(&out);
    assert_eq!(c.answer(1).status, 431);
    still_serves(&mut c, 3);
    srv.stop();
}

#[test]
fn continuation_flood_ends_the_connection_with_enhance_your_calm() {
    // CVE-2024-27316: endless CONTINUATION frames of one header block. The server allows 16
    // (MAX_CONTINUATIONS); the 17th ends the connection.
    let srv = serve("continuation", |_| {});
    let mut c = H2::open(srv.h2c, &[]);
    let b = block(&request("GET", "/json", &[]));
    let mut out = frame(HEADERS, END_STREAM, 1, &b);
    for _ in 0..17 {
        out.extend(frame(CONTINUATION, 0, 1, &[]));
    }
    c.send(&out);
    // No request was opened: the block never ended.
    assert_eq!(c.frame().goaway(), (0, ENHANCE_YOUR_CALM));
    c.expect_closed();
    srv.stop();
}

#[test]
fn rapid_reset_ends_the_connection_with_enhance_your_calm() {
    // CVE-2023-44487: streams opened and reset at once. The server allows 200 client resets
    // of open streams a second (MAX_RESETS_PER_SEC); the 201st (stream 401) ends the
    // connection. All 300 go in one write, so they arrive well within one second.
    let srv = serve("rapid-reset", |_| {});
    let mut c = H2::open(srv.h2c, &[]);
    let fields = block(&body_request());
    let mut out = Vec::new();
    for i in 0..300u32 {
        let id = 2 * i + 1;
        out.extend(frame(HEADERS, END_HEADERS, id, &fields));
        out.extend(frame(RST_STREAM, 0, id, &CANCEL.to_be_bytes()));
    }
    c.send(&out);
    assert_eq!(c.frame().goaway(), (401, ENHANCE_YOUR_CALM));
    c.expect_closed();
    srv.stop();
}

/// Sends 1,500 copies of a control frame (made by `make` from its index) in one write and
/// asserts the server answers some with `ack`s, then GOAWAY ENHANCE_YOUR_CALM, then closes.
fn control_flood(name: &str, make: impl Fn(u64) -> Vec<u8>, ack: impl Fn(u64) -> Frame) {
    let srv = serve(name, |_| {});
    let mut c = H2::open(srv.h2c, &[]);
    let flood: Vec<u8> = (0..1500).flat_map(&make).collect();
    c.send(&flood);
    let mut acked = 0u64;
    let goaway = loop {
        let f = c.frame();
        if f.kind == GOAWAY {
            break f;
        }
        assert_eq!(f, ack(acked), "answers come in order");
        acked += 1;
    };
    assert_eq!(goaway.goaway(), (0, ENHANCE_YOUR_CALM));
    // MAX_CONTROL_PER_SEC is 1000 a second, the client's first SETTINGS counted among them
    // unless a second passed between the two writes.
    assert!(
        (999..=1000).contains(&acked),
        "{acked} answered before GOAWAY"
    );
    c.expect_closed();
    srv.stop();
}

#[test]
fn ping_flood_ends_the_connection_with_enhance_your_calm() {
    control_flood(
        "ping-flood",
        |i| frame(PING, 0, 0, &i.to_be_bytes()),
        |i| Frame {
            kind: PING,
            flags: ACK,
            stream: 0,
            payload: i.to_be_bytes().to_vec(),
        },
    );
}

#[test]
fn settings_flood_ends_the_connection_with_enhance_your_calm() {
    control_flood(
        "settings-flood",
        |_| frame(SETTINGS, 0, 0, &[]),
        |_| Frame {
            kind: SETTINGS,
            flags: ACK,
            stream: 0,
            payload: Vec::new(),
        },
    );
}

#[test]
fn a_zero_window_client_gets_headers_and_exactly_the_window_it_opens() {
    let srv = serve("zero-window", |_| {});
    let mut c = H2::open(srv.h2c, &[(SETTINGS_INITIAL_WINDOW_SIZE, 0)]);
    c.headers(1, &request("GET", "/static/one.bin", &[]), true);
    let before = c.barrier(1);
    assert_eq!(before.len(), 1, "HEADERS and no DATA: {before:?}");
    let h = &before[0];
    assert_eq!((h.kind, h.stream), (HEADERS, 1));
    assert!(!h.has(END_STREAM), "the body is still to come");
    let fields = c.decoder.decode(&h.payload);
    assert!(fields.contains(&(":status".into(), "200".into())));
    assert!(fields.contains(&("content-length".into(), ONE_MIB.to_string())));

    // 20,000 bytes: one full frame and part of another.
    let n = 20_000u32;
    let mut open = frame(WINDOW_UPDATE, 0, 1, &n.to_be_bytes());
    open.extend(frame(WINDOW_UPDATE, 0, 0, &n.to_be_bytes()));
    c.send(&open);
    let data = c.barrier(2);
    let mut got = Vec::new();
    for d in &data {
        assert_eq!((d.kind, d.stream), (DATA, 1), "{d:?}");
        assert!(!d.has(END_STREAM));
        got.extend_from_slice(&d.payload);
    }
    assert_eq!(got.len(), n as usize, "exactly the window opened");
    assert!(
        got == pattern(ONE_MIB)[..n as usize],
        "the file's first bytes"
    );
    srv.stop();
}

#[test]
fn a_zero_window_client_that_never_opens_it_is_disconnected_at_the_send_timeout() {
    let srv = serve("stalled", |c| c.send_timeout = Duration::from_millis(300));
    let mut c = H2::open(srv.h2c, &[(SETTINGS_INITIAL_WINDOW_SIZE, 0)]);
    c.headers(1, &request("GET", "/static/one.bin", &[]), true);
    let h = c.frame();
    assert_eq!((h.kind, h.stream), (HEADERS, 1));
    // Nothing more, then the connection is dropped (the read times out after READ_TIMEOUT,
    // far above the send timeout, if it never is).
    c.expect_closed();
    srv.stop();
}

/// RFC 9113 §6.8's graceful shutdown against the real server: a first GOAWAY with the highest
/// id and a PING; a request already on its way is served; the PING's ACK brings the final
/// GOAWAY naming the last stream; the open stream finishes; the connection closes.
#[test]
fn drain_sends_goaway_naming_the_open_stream_and_lets_it_finish() {
    let mut srv = serve("drain", |_| {});
    let mut c = H2::open(srv.h2c, &[]);
    c.headers(1, &body_request(), false);
    assert!(c.barrier(1).is_empty(), "the stream waits for its body");
    srv.run.handle.shutdown();
    assert_eq!(c.frame().goaway(), (0x7fff_ffff, NO_ERROR));
    let ping = c.frame();
    assert!(
        ping.kind == PING && !ping.has(ACK),
        "expected the drain's PING, got {ping:?}"
    );
    // Sent as if before this client saw the GOAWAY: served, not refused.
    still_serves(&mut c, 3);
    c.send(&frame(PING, ACK, 0, &ping.payload));
    assert_eq!(c.frame().goaway(), (3, NO_ERROR));
    c.send(&frame(DATA, END_STREAM, 1, b"3"));
    let a = c.answer(1);
    assert_eq!((a.status, &a.body[..]), (200, &b"6"[..]));
    c.expect_closed();
    // The server exits on its own once the connection is done.
    let run = srv
        .run
        .thread
        .take()
        .unwrap()
        .join()
        .expect("server thread");
    run.expect("server run");
    srv.stop();
}

/// A rustls client that trusts `srv`'s certificate.
fn trusting(srv: &Srv) -> ClientConfig {
    let mut roots = RootCertStore::empty();
    roots.add(srv.anchor.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// A TLS connection to `srv` that negotiated `h2`, its handshake done.
fn tls_h2(srv: &Srv) -> (ClientConnection, TcpStream) {
    let mut cfg = trusting(srv);
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    let name = ServerName::try_from("localhost").unwrap();
    let mut tls = ClientConnection::new(Arc::new(cfg), name).unwrap();
    let mut tcp = TcpStream::connect(srv.tls).unwrap();
    tcp.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    while tls.is_handshaking() {
        tls.complete_io(&mut tcp).expect("TLS handshake");
    }
    assert_eq!(tls.alpn_protocol(), Some(&b"h2"[..]));
    (tls, tcp)
}

#[test]
fn a_request_and_close_notify_in_one_read_leak_no_bytes_to_the_next_connection() {
    // The request, then close_notify, in one TLS write: the server reads both at once, stages
    // its answer, sees the end of input and closes the connection. What it had staged must
    // go with it. Found by h2spec over TLS: after `generic/1/1` (whose client sends SETTINGS
    // and close_notify together) the next connection was closed before its handshake ended.
    let srv = serve("leak", |c| c.tls.as_mut().unwrap().ktls = false);
    let (mut a, mut tcp) = tls_h2(&srv);
    let mut req = PREFACE.to_vec();
    req.extend(frame(SETTINGS, 0, 0, &[]));
    req.extend(frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        1,
        &block(&request("GET", "/plaintext", &[])),
    ));
    a.writer().write_all(&req).unwrap();
    a.send_close_notify();
    let mut wire = Vec::new();
    while a.wants_write() {
        a.write_tls(&mut wire).unwrap();
    }
    tcp.write_all(&wire).unwrap();
    // The server closes A (whatever it sent first).
    let mut sink = [0u8; 65536];
    loop {
        match tcp.read(&mut sink) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
            Err(e) => panic!("connection A was not closed: {e}"),
        }
    }
    // B, plain HTTP/1.1 on the same (only) worker: its first bytes are its own response.
    let mut b = TcpStream::connect(srv.run.addr).unwrap();
    b.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    b.write_all(b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    while got.len() < 12 {
        let n = b.read(&mut sink).expect("B's response");
        assert!(n > 0, "B closed after {got:?}");
        got.extend_from_slice(&sink[..n]);
    }
    assert!(
        got.starts_with(b"HTTP/1.1 200"),
        "B got bytes that are not its response: {:?}",
        String::from_utf8_lossy(&got[..got.len().min(64)])
    );
    srv.stop();
}

#[test]
fn a_request_and_fin_in_one_read_leak_no_bytes_to_the_next_connection() {
    // The h2c twin of the test above: the request, then the client's FIN (which the server
    // reads as a separate event, so its answer goes out before it sees the end).
    let srv = serve("leak-h2c", |_| {});
    let mut a = TcpStream::connect(srv.h2c).unwrap();
    a.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let mut req = PREFACE.to_vec();
    req.extend(frame(SETTINGS, 0, 0, &[]));
    req.extend(frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        1,
        &block(&request("GET", "/plaintext", &[])),
    ));
    a.write_all(&req).unwrap();
    a.shutdown(std::net::Shutdown::Write).unwrap();
    let mut sink = [0u8; 65536];
    loop {
        match a.read(&mut sink) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
            Err(e) => panic!("connection A was not closed: {e}"),
        }
    }
    let mut b = TcpStream::connect(srv.run.addr).unwrap();
    b.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    b.write_all(b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    while got.len() < 12 {
        let n = b.read(&mut sink).expect("B's response");
        assert!(n > 0, "B closed after {got:?}");
        got.extend_from_slice(&sink[..n]);
    }
    assert!(
        got.starts_with(b"HTTP/1.1 200"),
        "B got bytes that are not its response: {:?}",
        String::from_utf8_lossy(&got[..got.len().min(64)])
    );
    srv.stop();
}

/// Regression: URLs a browser sends got `400 invalid request-target`. Chromium leaves
/// `|`, `^`, `{`, `}`, backquote, `\` (in a query) and a stray `%` unencoded (WHATWG URL's
/// percent-encode sets), and nginx, h2o and caddy serve them. Each one is answered, over
/// HTTP/1.1 on the plain listener and over HTTP/2 on the h2c listener (HTTP/2's `:path` is
/// checked by the same parser), by a route reading the query and by a static file whose name
/// holds the bytes. What browsers never send raw stays refused.
#[test]
fn browser_urls_with_bars_carets_braces_and_stray_percents_are_served() {
    let srv = serve("browser-urls", |_| {});
    std::fs::write(srv.dir.join("www/a|b^c{d}`e.txt"), b"odd name\n").unwrap();
    let served: [(&str, &[u8]); 9] = [
        ("/baseline11?a=1&b=2&filter=a|b", b"3"),
        ("/baseline11?a=1&b=2&q=a^b", b"3"),
        ("/baseline11?a=1&b=2&q={x}", b"3"),
        ("/baseline11?a=1&b=2&q=`x`", b"3"),
        ("/baseline11?a=1&b=2&d=100%", b"3"),
        ("/baseline11?a=1&b=2&p=c:\\tmp", b"3"),
        ("/baseline11?a=1&b=2&z=%zz%", b"3"),
        ("/static/a.txt?filter=a|b", b"hello file\n"),
        ("/static/a|b^c{d}`e.txt", b"odd name\n"),
    ];
    let refused = ["/a\\b", "/100%", "/?q=\"x\"", "/?q=<x>", "/a#b"];
    let mut c = H2::open(srv.h2c, &[]);
    let mut stream = 1;
    for (path, body) in served {
        let mut h1 = common::Client::connect(srv.run.addr);
        let r = h1.get(path);
        assert_eq!((r.status, &r.body[..]), (200, body), "HTTP/1.1 {path}");
        let a = c.get(stream, path);
        assert_eq!((a.status, &a.body[..]), (200, body), "HTTP/2 {path}");
        stream += 2;
    }
    for path in refused {
        let mut h1 = common::Client::connect(srv.run.addr);
        assert_eq!(h1.get(path).status, 400, "HTTP/1.1 {path}");
        assert_eq!(c.get(stream, path).status, 400, "HTTP/2 {path}");
        stream += 2;
    }
    srv.stop();
}

/// `quic` on the TLS listener: its answers over TCP (HTTP/1.1 and HTTP/2, a route, a file and
/// a 404) announce HTTP/3 on the same UDP port with `Alt-Svc` (RFC 7838, RFC 9114 §3.1.1);
/// the cleartext listeners, and a TLS listener without `quic`, announce nothing.
#[test]
fn a_tls_listener_with_quic_announces_http3_in_alt_svc() {
    let srv = serve("alt-svc", |c| c.quic = true);
    let want = format!("h3=\":{}\"; ma=86400", srv.tls.port());
    for path in ["/plaintext", "/static/a.txt", "/nowhere"] {
        let url = format!("https://{}{path}", srv.tls);
        let h1 = curl_url(&srv.dir, &url, &["--http1.1", "-k"], &[]);
        let h2 = curl(&srv, Via::H2Tls, path, &[]);
        for got in [&h1, &h2] {
            assert_eq!(got.header("alt-svc"), Some(want.as_str()), "{path} {got:?}");
        }
        for via in [Via::H1, Via::H2c] {
            let got = curl(&srv, via, path, &[]);
            assert_eq!(got.header("alt-svc"), None, "{path} over {via:?}");
        }
    }
    srv.stop();
    let srv = serve("no-alt-svc", |_| {});
    let got = curl(&srv, Via::H2Tls, "/plaintext", &[]);
    assert_eq!((got.status, got.header("alt-svc")), (200, None));
    srv.stop();
}

/// HTTP/3 on loopback: path MTU discovery searches up to what the route carries (the
/// loopback interface's MTU, not Ethernet's 1,500), so a client that accepts large
/// datagrams gets a 1 MiB file in datagrams larger than Ethernet's; a client whose
/// `max_udp_payload_size` is 1,472 bytes (quinn-proto's default) never
/// gets one larger. Both get every byte.
#[test]
fn http3_datagrams_grow_to_what_the_path_and_the_client_take() {
    let lo: usize = std::fs::read_to_string("/sys/class/net/lo/mtu")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let srv = serve("h3-mtu", |c| c.quic = true);
    let paths = ["/static/a.txt", "/static/one.bin", "/static/one.bin"];
    let want = vec![(200, 11), (200, ONE_MIB as u64), (200, ONE_MIB as u64)];
    let large = common::h3::get(&common::h3::quic(trusting(&srv)), srv.tls, &paths);
    assert_eq!(large.answers, want);
    if lo > 1500 {
        assert!(
            large.largest_datagram > 1500 - 28,
            "largest datagram {} on a loopback of MTU {lo}",
            large.largest_datagram
        );
    }
    assert!(
        large.largest_datagram <= lo - 28,
        "{}",
        large.largest_datagram
    );
    let mut small = common::h3::quic(trusting(&srv));
    let mut endpoint = quinn_proto::EndpointConfig::default();
    endpoint.max_udp_payload_size(1472).unwrap();
    small.endpoint = Arc::new(endpoint);
    let got = common::h3::get(&small, srv.tls, &paths);
    assert_eq!(got.answers, want);
    assert!(got.largest_datagram <= 1472, "{}", got.largest_datagram);
    srv.stop();
}

/// gRPC HEADERS for a bidirectional call left open (its body to come).
fn grpc_call(path: &str) -> Vec<(&str, &str)> {
    request(
        "POST",
        path,
        &[("content-type", "application/grpc"), ("te", "trailers")],
    )
}

#[test]
fn ten_thousand_grpc_calls_opened_and_reset_leave_nothing_behind() {
    // gRPC under abuse: 10,000 streaming calls (the demo's interop FullDuplexCall, each
    // a future on the worker's runtime) opened and reset at once, 200 a connection over 50
    // connections (the most MAX_RESETS_PER_SEC lets one connection reset in a second). Each
    // connection goes on (its PING answered, no GOAWAY), every call's future ends (nothing
    // outstanding), and a new client's call is answered.
    let srv = serve("grpc-resets", |_| {});
    let fields = block(&grpc_call("/grpc.testing.TestService/FullDuplexCall"));
    let mut burst = Vec::new();
    for i in 0..200u32 {
        let id = 2 * i + 1;
        burst.extend(frame(HEADERS, END_HEADERS, id, &fields));
        burst.extend(frame(RST_STREAM, 0, id, &CANCEL.to_be_bytes()));
    }
    let mut conns: Vec<H2> = (0..50).map(|_| H2::open(srv.h2c, &[])).collect();
    for c in &mut conns {
        c.send(&burst);
    }
    for (n, c) in conns.iter_mut().enumerate() {
        let before = c.barrier(n as u64);
        assert!(
            before.iter().all(|f| f.kind != GOAWAY),
            "connection {n}: {before:?}"
        );
    }
    for _ in 0..2_000 {
        if srv.run.stats.snapshot().deferred_outstanding == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        srv.run.stats.snapshot().deferred_outstanding,
        0,
        "calls left running"
    );
    // Another client, and one of the 50, are served: HttpArena's GetSum frame, its answer.
    let get_sum = [0u8, 0, 0, 0, 4, 8, 1, 16, 2];
    for c in [&mut H2::open(srv.h2c, &[]), &mut conns[0]] {
        let id = 1001;
        c.headers(id, &grpc_call("/benchmark.BenchmarkService/GetSum"), false);
        c.send(&frame(DATA, END_STREAM, id, &get_sum));
        let head = c.frame();
        assert_eq!((head.kind, head.stream), (HEADERS, id), "{head:?}");
        let data = c.frame();
        assert_eq!(
            (data.kind, data.payload.as_slice()),
            (DATA, &[0u8, 0, 0, 0, 2, 8, 3][..])
        );
        let trailers = c.frame();
        assert_eq!(trailers.kind, HEADERS);
        assert!(trailers.has(END_STREAM));
        let fields = c.decoder.decode(&trailers.payload);
        assert!(
            fields.contains(&("grpc-status".into(), "0".into())),
            "{fields:?}"
        );
    }
    srv.stop();
}

/// gRPC over HTTP/3 (the demo's services on the TLS listener's QUIC port): a unary call
/// (HttpArena's GetSum, a + b) and a server-streaming one (the interop TestService's
/// StreamingOutputCall, two messages) each get their messages and, at the end, the
/// `grpc-status` trailer (RFC 9114 §4.1: trailers in a HEADERS frame after the DATA); an
/// unknown method gets a trailers-only UNIMPLEMENTED.
#[test]
fn grpc_calls_over_http3_get_their_messages_and_their_trailers() {
    let srv = serve("grpc-h3", |c| c.quic = true);
    let fields: Vec<(String, String)> = [("content-type", "application/grpc"), ("te", "trailers")]
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    // GetSum(a = 1, b = 2): its answer is one frame, result = 3 (7 bytes).
    let get_sum: &[u8] = &[0, 0, 0, 0, 4, 0x08, 1, 0x10, 2];
    // StreamingOutputCallRequest { response_parameters: [{ size: 10 }, { size: 20 }] }.
    let streaming: &[u8] = &[0, 0, 0, 0, 8, 0x12, 2, 0x08, 10, 0x12, 2, 0x08, 20];
    let got = common::h3::send(
        &common::h3::quic(trusting(&srv)),
        srv.tls,
        &[
            (
                "POST",
                "/benchmark.BenchmarkService/GetSum",
                &fields,
                get_sum,
            ),
            (
                "POST",
                "/grpc.testing.TestService/StreamingOutputCall",
                &fields,
                streaming,
            ),
            (
                "POST",
                "/benchmark.BenchmarkService/Nothing",
                &fields,
                get_sum,
            ),
        ],
    );
    // Each answer of the stream is a frame (5 bytes) around StreamingOutputCallResponse
    // { payload: { body: SIZE zero bytes } }: 2 + 2 + SIZE bytes.
    let frames = (5 + 2 + 2 + 10) + (5 + 2 + 2 + 20);
    assert_eq!(got.answers, [(200, 7), (200, frames), (200, 0)], "{got:?}");
    assert_eq!(got.grpc, [Some(0), Some(0), Some(12)], "{got:?}");
    srv.stop();
}
