//! The demo's conformance endpoints (`GET /`, `POST /`, `/echo`, `/cookie`), the server's
//! answers to OPTIONS, and the request-line rules the public conformance suite probes (an
//! over-long method, pct-encoded NUL/CR/LF in a path, an empty Host), over raw sockets.

mod common;

use common::{Client, start_demo};

#[test]
fn index_page_lists_the_endpoints() {
    let server = start_demo();
    let mut c = Client::connect(server.addr);
    let r = c.get("/");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    for path in [
        "/json",
        "/plaintext",
        "/baseline11",
        "/pipeline",
        "/upload",
        "/delay/",
        "/echo",
        "/cookie",
    ] {
        assert!(r.text().contains(path), "{path} missing from GET /");
    }
    c.send(b"HEAD / HTTP/1.1\r\nHost: t\r\n\r\n");
    let h = c.read_response_opt(true).unwrap();
    assert_eq!(h.status, 200);
    assert_eq!(h.header("content-length"), Some(&*r.body.len().to_string()));
    server.stop();
}

#[test]
fn post_root_echoes_the_body_chunked_or_not() {
    let server = start_demo();
    let mut c = Client::connect(server.addr);
    c.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\nhello world");
    let r = c.read_response();
    assert_eq!((r.status, r.text().as_str()), (200, "hello world"));
    c.send(b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n");
    let r = c.read_response();
    assert_eq!((r.status, r.text().as_str()), (200, "hello world"));
    c.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");
    let r = c.read_response();
    assert_eq!((r.status, r.body.len()), (200, 0));
    server.stop();
}

#[test]
fn echo_returns_the_header_fields_one_per_line() {
    let server = start_demo();
    let mut c = Client::connect(server.addr);
    c.send(
        b"GET /echo HTTP/1.1\r\nHost: t\r\nX-One: 1\r\nx-two:  two words \r\nCookie: a=1\r\n\r\n",
    );
    let r = c.read_response();
    assert_eq!(r.status, 200);
    assert_eq!(
        r.text(),
        "Host: t\nX-One: 1\nx-two: two words\nCookie: a=1\n"
    );
    c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi");
    let r = c.read_response();
    assert_eq!(r.text(), "Host: t\nContent-Length: 2\n");
    server.stop();
}

/// `POST /echo` in cleartext answers once the body is read (it streams in over TLS, for
/// HttpArena's 8gbit): a malformed chunked body is still the connection's 400 and a close,
/// never the fields.
#[test]
fn post_echo_in_cleartext_reads_the_body_first() {
    let server = start_demo();
    let mut c = Client::connect(server.addr);
    c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n");
    c.send(b"0\r\n\r\n");
    let r = c.read_response();
    assert_eq!(r.text(), "Host: t\nTransfer-Encoding: chunked\n");
    c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n");
    let r = c.read_response();
    assert_eq!(r.status, 400);
    c.expect_eof();
    server.stop();
}

#[test]
fn cookie_lists_the_parsed_pairs_of_every_cookie_field() {
    let server = start_demo();
    let mut c = Client::connect(server.addr);
    let cases: &[(&str, &str)] = &[
        ("Cookie: foo=bar\r\n", "foo=bar\n"),
        ("Cookie: a=1; b=2; c=3\r\n", "a=1\nb=2\nc=3\n"),
        ("Cookie: a=hello world; b=x=y\r\n", "a=hello world\nb=x=y\n"),
        ("Cookie: a=1\r\nCookie: b=2\r\n", "a=1\nb=2\n"),
        ("Cookie: ===;;;\r\n", ""),
        ("", ""),
    ];
    for (fields, want) in cases {
        c.send(format!("GET /cookie HTTP/1.1\r\nHost: t\r\n{fields}\r\n").as_bytes());
        let r = c.read_response();
        assert_eq!((r.status, r.text().as_str()), (200, *want), "{fields:?}");
    }
    server.stop();
}

#[test]
fn options_answers_with_allow() {
    let server = start_demo();
    let mut c = Client::connect(server.addr);
    // A path routes serve: 204, its methods and OPTIONS, no Content-Length (RFC 9110 §8.6).
    c.send(b"OPTIONS /json HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_response();
    assert_eq!(r.status, 204);
    assert_eq!(r.header("allow"), Some("GET, HEAD, OPTIONS"));
    assert_eq!(r.header("content-length"), None);
    c.send(b"OPTIONS / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(
        c.read_response().header("allow"),
        Some("GET, HEAD, POST, OPTIONS")
    );
    // The whole server: every method some route takes.
    c.send(b"OPTIONS * HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_response();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("allow"), Some("GET, HEAD, POST, OPTIONS"));
    // Nothing there.
    c.send(b"OPTIONS /nope HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.read_response().status, 404);
    // A body on OPTIONS is read and dropped; the connection goes on.
    c.send(b"OPTIONS /json HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc");
    assert_eq!(c.read_response().status, 204);
    assert_eq!(c.get("/pipeline").text(), "ok");
    server.stop();
}

#[test]
fn request_line_rules_from_the_conformance_suite() {
    let server = start_demo();
    let long_method = format!("{} / HTTP/1.1\r\nHost: t\r\n\r\n", "A".repeat(100_000));
    let cases: &[(&[u8], u16)] = &[
        (long_method.as_bytes(), 501),
        (b"GET /%00 HTTP/1.1\r\nHost: t\r\n\r\n", 400),
        (
            b"GET /json%0d%0aX-Injected:%201 HTTP/1.1\r\nHost: t\r\n\r\n",
            400,
        ),
        (b"GET /a%0A HTTP/1.1\r\nHost: t\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: \r\n\r\n", 400),
    ];
    for (bytes, status) in cases {
        let mut c = Client::connect(server.addr);
        // The long method may be refused before all of it is written.
        let _ = std::io::Write::write_all(&mut c.stream, bytes);
        let r = c.read_response();
        assert_eq!(
            r.status,
            *status,
            "{:?}",
            String::from_utf8_lossy(&bytes[..40.min(bytes.len())])
        );
        assert_eq!(r.header("connection"), Some("close"));
    }
    // Encoded CR/LF in the query is the application's business.
    let mut c = Client::connect(server.addr);
    assert_eq!(c.get("/baseline11?a=1&b=2&c=%0d%0a").text(), "3");
    server.stop();
}

#[test]
fn an_upgrade_the_server_does_not_speak_is_ignored() {
    // RFC 9110 §7.8: a server may ignore Upgrade; the request is answered over HTTP/1.1 on the
    // same connection, which stays usable.
    let server = start_demo();
    let mut c = Client::connect(server.addr);
    for upgrade in [
        "Upgrade: foo/1\r\nConnection: Upgrade",
        "Upgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA",
        "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13",
    ] {
        c.send(format!("GET /plaintext HTTP/1.1\r\nHost: t\r\n{upgrade}\r\n\r\n").as_bytes());
        let r = c.read_response();
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "Hello, World!"),
            "{upgrade}"
        );
        assert_eq!(r.header("upgrade"), None);
    }
    assert_eq!(c.get("/plaintext").status, 200);
    server.stop();
}
