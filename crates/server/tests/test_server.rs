//! `TestServer` from outside the crate: a real server on 127.0.0.1 with an OS-chosen port,
//! reached over a real `TcpStream`, that accepts nothing once dropped; and `TestClient`
//! answering as that server does, byte for byte but the Date.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use linerate_server::testing::{TestClient, TestServer};
use linerate_server::{Response, Router};

/// Longest a read from the server may wait (a bound on a hang).
const READ_TIMEOUT: Duration = Duration::from_secs(10);

fn router() -> Router {
    Router::new().get("/users/{id}", |req| {
        Response::text_owned(format!("user {}", req.param("id").unwrap_or("?")))
    })
}

/// Sends `request` on a new connection and reads to the server's close.
fn exchange(addr: std::net::SocketAddr, request: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).expect("read to the close");
    String::from_utf8(got).unwrap()
}

/// The response without its Date line.
fn undated(response: &str) -> String {
    response
        .split("\r\n")
        .filter(|l| !l.to_ascii_lowercase().starts_with("date:"))
        .collect::<Vec<_>>()
        .join("\r\n")
}

#[test]
fn a_test_server_answers_over_tcp_and_accepts_nothing_once_dropped() {
    let server = TestServer::start(router()).expect("start");
    let addr = server.addr();
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{addr}");
    assert_eq!(server.url("/users/1"), format!("http://{addr}/users/1"));
    let request = "GET /users/1 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    let got = exchange(addr, request);
    assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{got}");
    assert!(got.ends_with("\r\n\r\nuser 1"), "{got}");
    drop(server);
    let refused = TcpStream::connect_timeout(&addr, Duration::from_secs(2));
    assert!(refused.is_err(), "{addr} still accepts after the drop");
}

#[test]
fn stop_reports_a_clean_shutdown() {
    let server = TestServer::start_with(TestServer::config(), router()).expect("start");
    let addr = server.addr();
    server.stop().expect("a clean shutdown");
    assert!(TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_err());
}

#[test]
fn the_test_client_gets_what_a_tcp_client_gets() {
    let server = TestServer::start(router()).expect("start");
    let client = TestClient::new(router());
    // (target, status line): a route and the server's own 404.
    let table = [
        ("/users/7", "HTTP/1.1 200 OK"),
        ("/nope", "HTTP/1.1 404 Not Found"),
    ];
    for (target, status_line) in table {
        let request = format!("GET {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        let over_tcp = exchange(server.addr(), &request);
        assert!(over_tcp.starts_with(status_line), "{over_tcp}");
        let res = client
            .get(target)
            .header("Host", "t")
            .header("Connection", "close")
            .send();
        let mut in_process = format!("{status_line}\r\n");
        for (name, value) in res.headers() {
            in_process.push_str(&format!("{name}: {value}\r\n"));
        }
        in_process.push_str("\r\n");
        in_process.push_str(&res.text());
        assert_eq!(undated(&in_process), undated(&over_tcp), "{target}");
    }
}

/// Regression: `Request::peer()` was `None` unless an access log, trusted proxies, an
/// upstream or a per-client limit was configured. With none of them, a handler (sync and
/// deferred) still sees the address the connection came from.
#[test]
fn request_peer_is_known_without_an_access_log() {
    let router = Router::new()
        .get("/peer", |req| {
            Response::text_owned(format!("{:?}", req.peer()))
        })
        .deferred(linerate_server::Method::Get, "/later", |req, res| {
            let peer = req.request().peer();
            std::thread::spawn(move || res.send(Response::text_owned(format!("{peer:?}"))));
        });
    let server = TestServer::start(router).expect("start");
    for target in ["/peer", "/later"] {
        let mut s = TcpStream::connect(server.addr()).expect("connect");
        s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        let me = s.local_addr().unwrap();
        let request = format!("GET {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        s.write_all(request.as_bytes()).unwrap();
        let mut got = String::new();
        s.read_to_string(&mut got).expect("read to the close");
        assert!(
            got.ends_with(&format!("\r\n\r\nSome({me})")),
            "{target}: {got}"
        );
    }
    // The in-process client's peer is the loopback address too.
    let res = TestClient::new(router_with_peer()).get("/peer").send();
    assert_eq!(res.text(), "Some(127.0.0.1:0)");
}

fn router_with_peer() -> Router {
    Router::new().get("/peer", |req| {
        Response::text_owned(format!("{:?}", req.peer()))
    })
}
