//! Proxied answers compressed by the site's rules: a text answer from the
//! application gzip'd or br'd for a client that asks (decoded byte for byte here), left as it
//! is where the rules say so (no Accept-Encoding, `Cache-Control: no-transform`, already
//! encoded, not a 200, a site that does not compress), and a streamed answer (server-sent
//! events) compressed piece by piece: each event decodes at the client before the upstream
//! sends the next one, so nothing is held back. No timing is asserted: the upstream waits for
//! the test's word, and every read has a timeout.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;

use common::READ_TIMEOUT;
use common::bin::{Served, serve};

/// The application's answer: about 58 KB of text, as in the compression benchmark.
fn text_body() -> Vec<u8> {
    (0..1200)
        .map(|i| format!("line {i:05}: the quick brown fox jumps over the lazy dog\n"))
        .collect::<String>()
        .into_bytes()
}

/// An upstream on 127.0.0.1 that reads each request's head and answers it with `answer`'s
/// bytes for the request's target; one thread per connection, stops with the test process.
fn upstream(answer: impl Fn(&str) -> Vec<u8> + Send + Sync + 'static) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let answer = std::sync::Arc::new(answer);
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let answer = answer.clone();
            std::thread::spawn(move || {
                while let Some(target) = read_head(&mut s) {
                    if s.write_all(&answer(&target)).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// The target of the next request head on `s` (requests here have no body).
fn read_head(s: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut b).ok()? == 0 {
            return None;
        }
        head.push(b[0]);
    }
    let line = String::from_utf8_lossy(&head).into_owned();
    line.split(' ').nth(1).map(str::to_string)
}

fn proxy(up: SocketAddr, extra: &[&str]) -> Served {
    let mount = format!("/=http://{up}");
    let mut args = vec!["--app", "none", "--proxy", &mount];
    args.extend_from_slice(extra);
    serve(&args)
}

/// An answer's head fields and its body, de-chunked.
struct Answer {
    status: u16,
    fields: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads one answer's head from `s` (bytes past it are left in `buf`).
fn read_answer_head(s: &mut TcpStream, buf: &mut Vec<u8>) -> (u16, Vec<(String, String)>) {
    let end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let mut chunk = [0u8; 8192];
        let n = s.read(&mut chunk).expect("the answer's head");
        assert!(n > 0, "closed before the head");
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    buf.drain(..end + 4);
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap()[9..12].parse().unwrap();
    let fields = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.to_string(), v.trim().to_string()))
        .collect();
    (status, fields)
}

/// The next chunk's data from a chunked body (`None` at the last chunk).
fn read_chunk(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    let fill = |s: &mut TcpStream, buf: &mut Vec<u8>| {
        let mut chunk = [0u8; 8192];
        let n = s.read(&mut chunk).expect("a chunk");
        assert!(n > 0, "closed mid-body");
        buf.extend_from_slice(&chunk[..n]);
    };
    let line_end = loop {
        if let Some(at) = buf.windows(2).position(|w| w == b"\r\n") {
            break at;
        }
        fill(s, buf);
    };
    let size_text = String::from_utf8_lossy(&buf[..line_end]).into_owned();
    let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap();
    while buf.len() < line_end + 2 + size + 2 {
        fill(s, buf);
    }
    let data = buf[line_end + 2..line_end + 2 + size].to_vec();
    buf.drain(..line_end + 2 + size + 2);
    (size > 0).then_some(data)
}

/// GET `target` with `accept` as Accept-Encoding; the whole answer.
fn get(addr: SocketAddr, target: &str, accept: Option<&str>) -> Answer {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let ae = accept.map_or(String::new(), |a| format!("Accept-Encoding: {a}\r\n"));
    write!(
        s,
        "GET {target} HTTP/1.1\r\nHost: x\r\n{ae}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut buf = Vec::new();
    let (status, fields) = read_answer_head(&mut s, &mut buf);
    let chunked = fields
        .iter()
        .any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        let mut body = Vec::new();
        while let Some(d) = read_chunk(&mut s, &mut buf) {
            body.extend_from_slice(&d);
        }
        body
    } else {
        s.read_to_end(&mut buf).unwrap();
        buf
    };
    Answer {
        status,
        fields,
        body,
    }
}

fn gunzip(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(data)
        .read_to_end(&mut out)
        .expect("a whole gzip member");
    out
}

fn unbrotli(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    brotli::Decompressor::new(data, 4096)
        .read_to_end(&mut out)
        .expect("a whole brotli stream");
    out
}

/// The application's answers, by target.
fn app(target: &str) -> Vec<u8> {
    let body = text_body();
    let (ctype, extra, status) = match target {
        "/text" => (
            "text/plain; charset=utf-8",
            "ETag: \"v1\"\r\nAccept-Ranges: bytes\r\n",
            200,
        ),
        "/no-transform" => ("text/plain", "Cache-Control: public, no-transform\r\n", 200),
        "/encoded" => ("text/plain", "Content-Encoding: x-custom\r\n", 200),
        "/png" => ("image/png", "", 200),
        "/missing" => ("text/plain", "", 404),
        "/varies" => ("text/plain", "Vary: Accept-Encoding, Origin\r\n", 200),
        _ => ("text/plain", "", 200),
    };
    let mut out = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\n{extra}Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    out
}

#[test]
fn a_proxied_text_answer_is_compressed_by_the_sites_rules() {
    let up = upstream(app);
    let px = proxy(up, &[]);
    let body = text_body();
    assert!(body.len() > 57_000, "{}", body.len());

    for (accept, coding) in [("gzip", "gzip"), ("gzip, deflate, br", "br")] {
        let a = get(px.addr, "/text", Some(accept));
        assert_eq!(a.status, 200, "{accept}");
        assert_eq!(a.field("content-encoding"), Some(coding), "{accept}");
        assert_eq!(a.field("vary"), Some("Accept-Encoding"), "{accept}");
        // RFC 9110 §8.8.1: other bytes, so the ETag is weak; no ranges of these bytes.
        assert_eq!(a.field("etag"), Some("W/\"v1\""), "{accept}");
        assert_eq!(a.field("accept-ranges"), None, "{accept}");
        assert_eq!(a.field("content-length"), None, "{accept}");
        assert!(
            a.body.len() < body.len() / 4,
            "{accept}: {} bytes",
            a.body.len()
        );
        let plain = match coding {
            "gzip" => gunzip(&a.body),
            _ => unbrotli(&a.body),
        };
        assert!(
            plain == body,
            "{accept}: the body decodes to the application's"
        );
    }

    // Left as they are, byte for byte: (target, Accept-Encoding, Vary sent).
    for (target, accept, vary) in [
        // RFC 9110 §12.5.3: no Accept-Encoding, no coding assumed; still varies on it.
        ("/text", None, Some("Accept-Encoding")),
        ("/text", Some("br;q=0, gzip;q=0"), Some("Accept-Encoding")),
        ("/no-transform", Some("gzip"), None),
        ("/encoded", Some("gzip"), None),
        ("/png", Some("gzip"), None),
        ("/missing", Some("gzip"), None),
    ] {
        let a = get(px.addr, target, accept);
        let want_ce = (target == "/encoded").then_some("x-custom");
        assert_eq!(a.field("content-encoding"), want_ce, "{target} {accept:?}");
        assert_eq!(a.field("vary"), vary, "{target} {accept:?}");
        assert!(
            a.body == body,
            "{target} {accept:?}: the body as the application sent it"
        );
    }
    // The application's Vary already names Accept-Encoding: not repeated.
    let a = get(px.addr, "/varies", Some("gzip"));
    assert_eq!(a.field("content-encoding"), Some("gzip"));
    let varies: Vec<&str> = a
        .fields
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("vary"))
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(varies, ["Accept-Encoding, Origin"]);
    drop(px);

    // A server (so every site) that does not compress: as sent, no Vary.
    let px = proxy(up, &["--no-compression"]);
    let a = get(px.addr, "/text", Some("gzip, br"));
    assert_eq!(a.field("content-encoding"), None);
    assert_eq!(a.field("vary"), None);
    assert!(a.body == body);
}

#[test]
fn a_streamed_proxied_answer_is_compressed_event_by_event() {
    // The upstream sends one event, then waits for the test's word before the next.
    let (next_tx, next_rx) = mpsc::channel::<()>();
    let next_rx = std::sync::Mutex::new(next_rx);
    let events: Vec<String> = (0..4)
        .map(|i| format!("id: {i}\ndata: {}\n\n", "tick ".repeat(20 + i)))
        .collect();
    let sent = events.clone();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let up = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        read_head(&mut s).unwrap();
        s.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
              Transfer-Encoding: chunked\r\n\r\n",
        )
        .unwrap();
        for (i, e) in sent.iter().enumerate() {
            if i > 0 {
                // The client decoded the event before: now the next.
                next_rx.lock().unwrap().recv().unwrap();
            }
            write!(s, "{:x}\r\n{e}\r\n", e.len()).unwrap();
        }
        s.write_all(b"0\r\n\r\n").unwrap();
    });
    let px = proxy(up, &[]);
    let mut s = TcpStream::connect(px.addr).unwrap();
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    s.write_all(b"GET /events HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    let (status, fields) = read_answer_head(&mut s, &mut buf);
    assert_eq!(status, 200);
    let ce = fields
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-encoding"))
        .map(|(_, v)| v.as_str());
    assert_eq!(ce, Some("gzip"));

    let mut compressed = Vec::new();
    let mut plain = String::new();
    for (i, e) in events.iter().enumerate() {
        plain.push_str(e);
        // Chunks until everything sent so far decodes; a read timeout (an event held back by
        // the compressor) fails the test.
        loop {
            let d = read_chunk(&mut s, &mut buf).expect("the stream goes on");
            compressed.extend_from_slice(&d);
            if decode_so_far(&compressed) == plain.as_bytes() {
                break;
            }
        }
        if i + 1 < events.len() {
            next_tx.send(()).unwrap();
        }
    }
    // The end: the gzip trailer, then the last chunk.
    while let Some(d) = read_chunk(&mut s, &mut buf) {
        compressed.extend_from_slice(&d);
    }
    assert_eq!(gunzip(&compressed), plain.as_bytes());
}

/// What a gzip decoder gives for a member not yet finished.
fn decode_so_far(data: &[u8]) -> Vec<u8> {
    let mut d = flate2::read::GzDecoder::new(data);
    let mut out = Vec::new();
    let mut b = [0u8; 4096];
    while let Ok(n) = d.read(&mut b) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&b[..n]);
    }
    out
}

/// A cached answer is compressed for each client as a miss is: one stored entry,
/// the upstream's bytes, served gzip'd, br'd or as it is by each hit's Accept-Encoding, with
/// `Vary: Accept-Encoding` and the ETag made weak where the bytes change; the upstream is asked
/// once.
#[test]
fn a_cached_answer_is_compressed_on_every_hit_for_the_clients_coding() {
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = asked.clone();
    let up = upstream(move |_| {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let body = text_body();
        let mut out = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nCache-Control: public, max-age=3600\r\n\
ETag: \"v1\"\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        out.extend_from_slice(&body);
        out
    });
    let px = proxy(up, &["--proxy-cache", "16MiB"]);
    let body = text_body();
    // The miss, then hits in every coding.
    for (accept, coding) in [
        (Some("gzip"), Some("gzip")),
        (Some("gzip"), Some("gzip")),
        (Some("br"), Some("br")),
        (None, None),
        (Some("gzip, br"), Some("br")),
    ] {
        let a = get(px.addr, "/cached", accept);
        assert_eq!(a.status, 200, "{accept:?}");
        assert_eq!(a.field("content-encoding"), coding, "{accept:?}");
        assert_eq!(a.field("vary"), Some("Accept-Encoding"), "{accept:?}");
        let etag = if coding.is_some() {
            "W/\"v1\""
        } else {
            "\"v1\""
        };
        assert_eq!(a.field("etag"), Some(etag), "{accept:?}");
        let plain = match coding {
            Some("gzip") => gunzip(&a.body),
            Some(_) => unbrotli(&a.body),
            None => a.body.clone(),
        };
        assert!(
            plain == body,
            "{accept:?}: the body decodes to the upstream's"
        );
    }
    assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 1);
}
