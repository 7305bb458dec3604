//! Trailer fields on a real server (`TestServer`, one worker) over raw HTTP/1.1 sockets: an
//! HTTP/1.1 client reads them after the last chunk (RFC 9112 §7.1.2), an HTTP/1.0 client gets
//! the body without them, and a handler's trailer that may not be one (RFC 9110 §6.5.1) is
//! the server's 500, never bytes on the wire. HTTP/2's trailing HEADERS is checked through
//! the same state machine by the crate's `TestClient` tests and `h2/tests.rs`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use linerate_server::testing::TestServer;
use linerate_server::{Body, Response, Router};

/// Longest any read may wait (a bound on a hang, not a measurement).
const LIMIT: Duration = Duration::from_secs(20);

fn router() -> Router {
    Router::new()
        .get("/grpc", |_| {
            Response::new(200)
                .content_type("application/grpc")
                .body(Body::Static(b"hello"))
                .trailer("grpc-status", "0")
                .trailer("grpc-message", "ok")
        })
        .get("/bad", |_| {
            Response::text("x").trailer("Transfer-Encoding", "gzip")
        })
}

/// Sends `req` and reads until the server closes (every request here asks it to).
fn exchange(server: &TestServer, req: &str) -> String {
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(LIMIT)).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    String::from_utf8(got).unwrap()
}

/// The answer without its Date line.
fn undated(answer: &str) -> String {
    answer
        .split("\r\n")
        .filter(|l| !l.starts_with("Date: "))
        .collect::<Vec<_>>()
        .join("\r\n")
}

#[test]
fn an_http11_client_reads_trailers_after_the_last_chunk() {
    let server = TestServer::start(router()).unwrap();
    let got = exchange(
        &server,
        "GET /grpc HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(
        undated(&got),
        "HTTP/1.1 200 OK\r\nServer: linerate\r\nContent-Type: application/grpc\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
         5\r\nhello\r\n0\r\ngrpc-status: 0\r\ngrpc-message: ok\r\n\r\n"
    );
    server.stop().unwrap();
}

#[test]
fn an_http10_client_gets_the_body_without_trailers() {
    let server = TestServer::start(router()).unwrap();
    let got = exchange(&server, "GET /grpc HTTP/1.0\r\n\r\n");
    assert_eq!(
        undated(&got),
        "HTTP/1.1 200 OK\r\nServer: linerate\r\nContent-Type: application/grpc\r\n\
         Content-Length: 5\r\nConnection: close\r\n\r\nhello"
    );
    server.stop().unwrap();
}

#[test]
fn a_field_that_may_not_be_a_trailer_is_the_servers_500() {
    let server = TestServer::start(router()).unwrap();
    let got = exchange(&server, "GET /bad HTTP/1.1\r\nHost: a\r\n\r\n");
    assert!(got.starts_with("HTTP/1.1 500 "), "{got}");
    assert!(!got.contains("gzip"), "{got}");
    assert!(!got.contains("chunked"), "{got}");
    server.stop().unwrap();
}
