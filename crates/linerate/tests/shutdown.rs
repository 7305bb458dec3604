//! Graceful shutdown under load: every request the server answered arrives whole, no client
//! sees a reset, idle connections are closed cleanly, and the server exits on its own.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{config, start};
use linerate_server::{Response, Router};

/// Client loop duration bound.
const MAX_RUN: Duration = Duration::from_secs(10);

#[derive(Default, Debug)]
struct Tally {
    ok: u64,
    /// Clean EOF before any byte of a response: the request was not taken in.
    refused: u64,
    resets: u64,
    partial: u64,
}

/// Sends requests one after another on one connection until the server closes it.
fn client(addr: std::net::SocketAddr) -> Tally {
    let mut t = Tally::default();
    let started = Instant::now();
    let Ok(mut s) = TcpStream::connect(addr) else {
        t.refused += 1;
        return t;
    };
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let req = b"GET /count HTTP/1.1\r\nHost: t\r\n\r\n";
    let mut buf = Vec::new();
    while started.elapsed() < MAX_RUN {
        if s.write_all(req).is_err() {
            t.refused += 1; // write after the server's FIN/close: not taken in
            return t;
        }
        buf.clear();
        let mut chunk = [0u8; 4096];
        loop {
            match s.read(&mut chunk) {
                Ok(0) if buf.is_empty() => {
                    t.refused += 1;
                    return t;
                }
                Ok(0) => {
                    t.partial += 1;
                    return t;
                }
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::ConnectionReset => {
                    t.resets += 1;
                    return t;
                }
                Err(e) => panic!("client read: {e}"),
            }
            // Every response here is 2 bytes of body ("ok") after the head.
            if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n")
                && buf.len() >= p + 4 + 2
            {
                break;
            }
        }
        t.ok += 1;
        let head = String::from_utf8_lossy(&buf);
        if head.contains("Connection: close") {
            return t;
        }
    }
    t
}

#[test]
fn shutdown_under_load_loses_nothing() {
    let served = Arc::new(AtomicU64::new(0));
    let counter = served.clone();
    let router = Router::new().get("/count", move |_| {
        counter.fetch_add(1, Ordering::Relaxed);
        Response::text("ok")
    });
    let server = start(config(), router);
    let addr = server.addr;
    let clients: Vec<_> = (0..16)
        .map(|_| std::thread::spawn(move || client(addr)))
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    // Graceful: returns when the worker has exited. A drain cut short by its timeout would
    // show below as a truncated or reset connection in a client's tally.
    server.stop();
    let mut total = Tally::default();
    for c in clients {
        let t = c.join().unwrap();
        total.ok += t.ok;
        total.refused += t.refused;
        total.resets += t.resets;
        total.partial += t.partial;
    }
    assert_eq!(total.resets, 0, "{total:?}");
    assert_eq!(total.partial, 0, "{total:?}");
    assert!(total.ok > 100, "load really ran: {total:?}");
    // Every request the server answered reached its client whole.
    assert_eq!(served.load(Ordering::Relaxed), total.ok, "{total:?}");
}

#[test]
fn shutdown_closes_idle_connections_cleanly() {
    let server = start(config(), linerate::demo::router());
    let mut idle = common::Client::connect(server.addr);
    assert_eq!(idle.get("/pipeline").text(), "ok");
    server.stop();
    idle.expect_eof();
    // And the port no longer accepts.
    assert!(TcpStream::connect(idle.stream.peer_addr().unwrap()).is_err());
}
