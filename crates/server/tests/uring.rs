//! The io_uring backend (`Io::Uring`, `serve --io uring`) under what stresses its
//! completions: a ring is really in use (not epoll after a refusal), Debian's curl reuses a
//! connection and uploads a body many receives long, an answer too big for the socket
//! buffer goes out in several sends, a pipelined burst is answered in order, and
//! `Connection: close` or a client's half-close ends with every byte sent. The whole
//! integration suite also runs on it with `LINERATE_TEST_IO=uring` (scripts/test-all.sh).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use linerate_server::testing::TestServer;
use linerate_server::{Io, Response, Router};

mod common;
use common::curl;

/// Longest a read from the server may wait (a bound on a hang).
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// An answer several times a loopback socket's send buffer.
const BIG: usize = 8 << 20;

fn router() -> Router {
    Router::new()
        .get("/hello", |_| Response::text("hello"))
        .get("/big", |_| Response::text_owned("x".repeat(BIG)))
        .post("/len", |req| {
            Response::text_owned(req.body().len().to_string())
        })
}

/// The io_uring instances this process has open.
fn rings() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    std::fs::read_link(e.path())
                        .is_ok_and(|l| l.to_string_lossy().contains("io_uring"))
                })
                .count()
        })
        .unwrap_or(0)
}

/// A server on io_uring; `None` (NOT RUN, said) where this kernel refuses a ring.
fn start() -> Option<TestServer> {
    if io_uring::IoUring::new(8).is_err() {
        println!("NOT RUN: this kernel refuses io_uring");
        return None;
    }
    let config = linerate_server::Config {
        io: Io::Uring,
        ..TestServer::config()
    };
    Some(TestServer::start_with(config, router()).expect("start"))
}

#[test]
fn a_worker_asked_for_io_uring_runs_on_a_ring() {
    let before = rings();
    let Some(server) = start() else { return };
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    s.write_all(b"GET /hello HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut got = String::new();
    s.read_to_string(&mut got).unwrap();
    assert!(got.ends_with("\r\n\r\nhello"), "{got}");
    assert!(rings() > before, "no io_uring instance was opened");
}

#[test]
fn curl_reuses_a_connection_and_uploads_a_body_of_many_receives() {
    let Some(server) = start() else { return };
    let Some(curl) = curl() else { return };
    let dir = std::env::temp_dir().join(format!("linerate-uring-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let body = dir.join("body");
    // 900 KiB (under the default body limit): some sixty of the backend's 16 KiB receives.
    std::fs::write(&body, vec![b'b'; 900 << 10]).unwrap();
    let each = ["-sS", "--max-time", "20", "-w", " %{num_connects}\n"];
    let out = Command::new(curl)
        .args(each)
        .arg(server.url("/hello"))
        .arg(server.url("/hello"))
        .arg("--next")
        .args(each)
        .args(["--data-binary", &format!("@{}", body.display())])
        .arg(server.url("/len"))
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    // Each URL's answer and the connections it opened: one for all three.
    assert_eq!(text, "hello 1\nhello 0\n921600 0\n", "{text}");
}

#[test]
fn an_answer_bigger_than_the_socket_buffer_arrives_whole() {
    let Some(server) = start() else { return };
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    s.write_all(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\nGET /hello HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    // Read slowly at first, so that the server's sends come back short.
    std::thread::sleep(Duration::from_millis(200));
    let mut got = Vec::new();
    s.read_to_end(&mut got).expect("read to the close");
    let text = String::from_utf8_lossy(&got);
    let head_end = text.find("\r\n\r\n").expect("a head") + 4;
    assert!(
        text[..head_end].contains(&format!("content-length: {BIG}\r\n"))
            || text[..head_end].contains(&format!("Content-Length: {BIG}\r\n")),
        "{}",
        &text[..head_end]
    );
    let body = &got[head_end..head_end + BIG];
    assert!(body.iter().all(|&b| b == b'x'));
    assert!(
        text.ends_with("\r\n\r\nhello"),
        "the second answer is missing"
    );
}

#[test]
fn a_pipelined_burst_is_answered_in_order_and_close_sends_everything() {
    let Some(server) = start() else { return };
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let mut burst = String::new();
    for i in 0..100 {
        burst.push_str(&format!(
            "POST /len HTTP/1.1\r\nHost: t\r\nContent-Length: {i}\r\n\r\n{}",
            "a".repeat(i)
        ));
    }
    burst.push_str("GET /hello HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    s.write_all(burst.as_bytes()).unwrap();
    let mut got = String::new();
    s.read_to_string(&mut got).expect("read to the close");
    let bodies: Vec<&str> = got
        .split("HTTP/1.1 200 OK\r\n")
        .skip(1)
        .map(|a| a.split("\r\n\r\n").nth(1).unwrap_or(""))
        .collect();
    let want: Vec<String> = (0..100)
        .map(|i| i.to_string())
        .chain(["hello".to_string()])
        .collect();
    assert_eq!(bodies, want);
}

/// A client that sends its requests and then shuts its side (EOF while answers are still
/// going out in short sends) gets every answer before the close: what is owed is not
/// cancelled with the connection.
#[test]
fn a_half_closed_client_gets_every_answer_before_the_close() {
    let Some(server) = start() else { return };
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    s.write_all(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\nGET /hello HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    // Read slowly at first, so that the EOF is seen while the big answer is still going out.
    std::thread::sleep(Duration::from_millis(200));
    let mut got = Vec::new();
    s.read_to_end(&mut got).expect("read to the close");
    let text = String::from_utf8_lossy(&got);
    assert_eq!(
        text.matches("HTTP/1.1 200 OK\r\n").count(),
        2,
        "two answers"
    );
    let head_end = text.find("\r\n\r\n").expect("a head") + 4;
    let body = &got[head_end..(head_end + BIG).min(got.len())];
    assert!(
        body.len() == BIG && body.iter().all(|&b| b == b'x'),
        "the big answer is cut"
    );
    assert!(
        text.ends_with("\r\n\r\nhello"),
        "the second answer is missing"
    );
}
