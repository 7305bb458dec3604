//! HTTP/2 with prior knowledge beside HTTP/1.1 on one cleartext listener (`h2c_preface`),
//! on a real server (`TestServer`, one worker) over raw sockets: the client preface (RFC 9113
//! §3.4), whole or a byte at a time, makes the connection HTTP/2 (the server's SETTINGS, then
//! a request answered, its trailers included); an HTTP/1.1 request on the same port is
//! HTTP/1.1; and a listener without the setting answers the preface as it always did.
#![cfg(feature = "http2")]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use linerate_server::testing::TestServer;
use linerate_server::{Body, Response, Router};

/// Longest any read may wait (a bound on a hang, not a measurement).
const LIMIT: Duration = Duration::from_secs(20);

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const SETTINGS: u8 = 4;
const HEADERS: u8 = 1;
const END_STREAM: u8 = 1;
const END_HEADERS: u8 = 4;

fn router() -> Router {
    Router::new()
        .get("/plaintext", |_| Response::text("Hello, World!"))
        .get("/grpc", |_| {
            Response::new(200)
                .content_type("application/grpc")
                .body(Body::Static(b"\0\0\0\0\0"))
                .trailer("grpc-status", "0")
        })
}

fn start(h2c_preface: bool) -> TestServer {
    let config = linerate_server::Config {
        h2c_preface,
        ..TestServer::config()
    };
    TestServer::start_with(config, router()).unwrap()
}

fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

/// The client's side after its preface: empty SETTINGS, then `GET path` on stream 1.
fn request(path: &str) -> Vec<u8> {
    let mut block = Vec::new();
    for (n, v) in [
        (":method", "GET"),
        (":scheme", "http"),
        (":authority", "a.test"),
        (":path", path),
    ] {
        linerate_hpack::field(&mut block, n.as_bytes(), v.as_bytes());
    }
    let mut out = Vec::new();
    frame(&mut out, SETTINGS, 0, 0, &[]);
    frame(&mut out, HEADERS, END_STREAM | END_HEADERS, 1, &block);
    out
}

/// One frame read off the socket: (type, flags, stream, payload).
fn read_frame(s: &mut TcpStream) -> (u8, u8, u32, Vec<u8>) {
    let mut head = [0u8; 9];
    s.read_exact(&mut head).unwrap();
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload).unwrap();
    (head[3], head[4], stream, payload)
}

/// Reads stream 1's answer: its head's and trailers' fields and its body, up to END_STREAM.
fn answer(s: &mut TcpStream) -> (Vec<(String, String)>, Vec<u8>) {
    let mut decoder = linerate_hpack::Decoder::new();
    let (mut fields, mut body) = (Vec::new(), Vec::new());
    for _ in 0..100 {
        let (kind, flags, stream, payload) = read_frame(s);
        if stream != 1 {
            continue;
        }
        match kind {
            0 => body.extend_from_slice(&payload),
            HEADERS => decoder
                .decode(&payload, |n, v| {
                    fields.push((
                        String::from_utf8_lossy(n).into_owned(),
                        String::from_utf8_lossy(v).into_owned(),
                    ))
                })
                .unwrap(),
            _ => {}
        }
        if flags & END_STREAM != 0 {
            return (fields, body);
        }
    }
    panic!("no end of stream 1");
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// Connects and sends the preface in `pieces` (a write each), then the request; the
/// server's first frame must be its SETTINGS, then the answer follows.
fn over_http2(
    server: &TestServer,
    pieces: &[&[u8]],
    path: &str,
) -> (Vec<(String, String)>, Vec<u8>) {
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(LIMIT)).unwrap();
    s.set_nodelay(true).unwrap();
    for p in pieces {
        s.write_all(p).unwrap();
    }
    let (kind, flags, stream, _) = read_frame(&mut s);
    assert_eq!(
        (kind, flags & 1, stream),
        (SETTINGS, 0, 0),
        "the server's SETTINGS first"
    );
    s.write_all(&request(path)).unwrap();
    answer(&mut s)
}

#[test]
fn the_preface_in_one_piece_makes_the_connection_http2() {
    let server = start(true);
    let (fields, body) = over_http2(&server, &[PREFACE], "/plaintext");
    assert_eq!(field(&fields, ":status"), Some("200"));
    assert_eq!(body, b"Hello, World!");
    // gRPC's shape: trailers after the body.
    let (fields, body) = over_http2(&server, &[PREFACE], "/grpc");
    assert_eq!(body, b"\0\0\0\0\0");
    assert_eq!(field(&fields, "grpc-status"), Some("0"));
    server.stop().unwrap();
}

#[test]
fn the_preface_a_byte_at_a_time_makes_the_connection_http2() {
    let server = start(true);
    let pieces: Vec<&[u8]> = PREFACE.chunks(1).collect();
    let (fields, body) = over_http2(&server, &pieces, "/plaintext");
    assert_eq!(field(&fields, ":status"), Some("200"));
    assert_eq!(body, b"Hello, World!");
    server.stop().unwrap();
}

/// Sends `req` and reads until the server closes (every request here asks it to, or is
/// refused with a close).
fn exchange(server: &TestServer, req: &[u8]) -> String {
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(LIMIT)).unwrap();
    s.write_all(req).unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    String::from_utf8_lossy(&got).into_owned()
}

#[test]
fn http11_on_the_same_listener_is_http11() {
    let server = start(true);
    for req in [
        &b"GET /plaintext HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"[..],
        // A method that starts as the preface does, then differs.
        b"POST /plaintext HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    ] {
        let got = exchange(&server, req);
        assert!(got.starts_with("HTTP/1.1 "), "{got}");
    }
    let got = exchange(
        &server,
        b"GET /plaintext HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    assert!(got.ends_with("\r\n\r\nHello, World!"), "{got}");
    server.stop().unwrap();
}

/// Http11Probe's MAL-H2-PREFACE expects 400, 505 or a close from an HTTP/1.1 server: a
/// listener without the setting keeps answering so.
#[test]
fn the_preface_on_a_listener_without_the_setting_is_refused_as_http11() {
    let server = start(false);
    let got = exchange(&server, PREFACE);
    // RFC 9112 §2.3: a major version it does not speak.
    assert!(got.starts_with("HTTP/1.1 505 "), "{got:?}");
    assert!(got.contains("Connection: close\r\n"), "{got:?}");
    server.stop().unwrap();
}

/// Sends `req`, ends the sending side, and reads until the server closes.
fn half_closed(server: &TestServer, req: &[u8]) -> String {
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(LIMIT)).unwrap();
    s.write_all(req).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    String::from_utf8_lossy(&got)
        .split("\r\n")
        .filter(|l| !l.starts_with("Date: "))
        .collect::<Vec<_>>()
        .join("\r\n")
}

/// Input that ends while it is still the preface's start is HTTP/1.1's to judge, exactly as
/// on a listener without the setting.
#[test]
fn input_ending_inside_the_preface_is_judged_as_http11() {
    let (on, off) = (start(true), start(false));
    for req in [&b"PRI * HT"[..], b"P", b"PRI * HTTP/2.0\r\n\r\n"] {
        assert_eq!(half_closed(&on, req), half_closed(&off, req), "{req:?}");
    }
    on.stop().unwrap();
    off.stop().unwrap();
}

/// After a PROXY protocol header, the first bytes of the connection's own decide.
#[test]
fn after_a_proxy_header_the_preface_still_makes_http2() {
    let config = linerate_server::Config {
        h2c_preface: true,
        proxy_protocol: true,
        ..TestServer::config()
    };
    let server = TestServer::start_with(config, router()).unwrap();
    let proxy = b"PROXY TCP4 192.0.2.1 192.0.2.2 1000 80\r\n";
    let (fields, body) = over_http2(&server, &[proxy, PREFACE], "/plaintext");
    assert_eq!(field(&fields, ":status"), Some("200"));
    assert_eq!(body, b"Hello, World!");
    let joined = [&proxy[..], PREFACE].concat();
    let pieces: Vec<&[u8]> = joined.chunks(1).collect();
    let (_, body) = over_http2(&server, &pieces, "/plaintext");
    assert_eq!(body, b"Hello, World!");
    let got = exchange(
        &server,
        &[
            &proxy[..],
            b"GET /plaintext HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        ]
        .concat(),
    );
    assert!(got.ends_with("\r\n\r\nHello, World!"), "{got}");
    server.stop().unwrap();
}
