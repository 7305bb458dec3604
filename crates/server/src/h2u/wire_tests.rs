//! The upstream HTTP/2 connection driven over a real TCP socket by a small harness loop (not
//! the driver): against linerate's own h2c listener on 127.0.0.1 (many concurrent streams,
//! bodies larger than the windows both ways), and against grpc-go's interop server when it is
//! built (one EmptyCall: head, message, `grpc-status: 0` trailers).
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::conn::*;
use super::fields::{Fields, Request};
use crate::h1c::Transmit;
use crate::response::Body;
use crate::testing::TestServer;
use crate::{Config, Response, Router};

/// The most one test's loop runs before it gives up (a safety stop, never an assertion about
/// time).
const LOOP_LIMIT: Duration = Duration::from_secs(120);

/// One stream's response as the harness collected it.
#[derive(Default, Debug)]
struct Got {
    heads: Vec<u16>,
    body: Vec<u8>,
    trailers: Vec<(String, String)>,
    ended: bool,
    failed: Option<StreamError>,
}

/// The harness's events: everything by stream id, bytes to report consumed, streams to wake.
#[derive(Default)]
struct Harness {
    streams: HashMap<u32, Got>,
    consume: Vec<(u32, usize)>,
    writable: Vec<u32>,
    /// Most bytes held unconsumed at once (the caller's side of flow control).
    held_max: usize,
    held: usize,
}

impl Events for Harness {
    fn head(&mut self, id: u32, status: u16, _: &Fields) {
        self.streams.entry(id).or_default().heads.push(status);
    }
    fn data(&mut self, id: u32, data: &[u8]) {
        self.streams
            .entry(id)
            .or_default()
            .body
            .extend_from_slice(data);
        self.consume.push((id, data.len()));
        self.held += data.len();
        self.held_max = self.held_max.max(self.held);
    }
    fn trailers(&mut self, id: u32, fields: &Fields) {
        let t = fields
            .iter()
            .map(|(n, v)| {
                let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                (s(n), s(v))
            })
            .collect();
        self.streams.entry(id).or_default().trailers = t;
    }
    fn end(&mut self, id: u32) {
        self.streams.entry(id).or_default().ended = true;
    }
    fn failed(&mut self, id: u32, error: StreamError) {
        self.streams.entry(id).or_default().failed = Some(error);
    }
    fn writable(&mut self, id: u32) {
        self.writable.push(id);
    }
    fn pong(&mut self) {}
    fn goaway(&mut self) {}
}

/// A request body still going up: its bytes and how many are sent.
struct Upload {
    body: Vec<u8>,
    sent: usize,
}

/// The harness: one socket, the state machine, the events; [`Wire::turn`] moves bytes both
/// ways once.
struct Wire {
    sock: TcpStream,
    conn: Conn,
    ev: Harness,
    /// Output taken and not yet written.
    pending: Vec<u8>,
    written: usize,
    uploads: HashMap<u32, Upload>,
    started: Instant,
}

impl Wire {
    fn connect(addr: SocketAddr, settings: Settings) -> Wire {
        let sock = TcpStream::connect(addr).expect("connect");
        sock.set_nonblocking(true).unwrap();
        sock.set_nodelay(true).unwrap();
        Wire {
            sock,
            conn: Conn::new(0, settings),
            ev: Harness::default(),
            pending: Vec::new(),
            written: 0,
            uploads: HashMap::new(),
            started: Instant::now(),
        }
    }

    /// Opens a stream with `body` to send (none: END_STREAM on the HEADERS).
    fn request(&mut self, req: &Request<'_>, body: Option<Vec<u8>>) -> Result<u32, OpenError> {
        let id = self.conn.open(req, body.is_none())?;
        if let Some(body) = body {
            self.uploads.insert(id, Upload { body, sent: 0 });
            self.ev.writable.push(id);
        }
        Ok(id)
    }

    /// One round: bodies sent where there is room, output written, input read and handed to
    /// the state machine, consumed bytes reported. Returns whether anything moved.
    fn turn(&mut self) -> bool {
        assert!(self.started.elapsed() < LOOP_LIMIT, "the exchange stalled");
        let mut moved = false;
        for id in std::mem::take(&mut self.ev.writable) {
            let Some(u) = self.uploads.get_mut(&id) else {
                continue;
            };
            let n = self.conn.send(id, &u.body[u.sent..], true);
            u.sent += n;
            moved |= n > 0;
            if u.sent == u.body.len() {
                self.uploads.remove(&id);
            }
        }
        if self.pending.is_empty() && self.conn.poll_transmit() == Transmit::Bytes {
            self.pending = self.conn.take_output();
            self.written = 0;
        }
        while self.written < self.pending.len() {
            match self.sock.write(&self.pending[self.written..]) {
                Ok(n) => {
                    self.written += n;
                    moved = true;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("write: {e}"),
            }
        }
        if !self.pending.is_empty() && self.written == self.pending.len() {
            self.pending.clear();
            self.conn.sent(&mut self.ev);
        }
        let mut buf = [0u8; 32 * 1024];
        if self.conn.wants_input() {
            match self.sock.read(&mut buf) {
                Ok(0) => {
                    self.conn.eof(&mut self.ev);
                    moved = true;
                }
                Ok(n) => {
                    self.conn.recv(&buf[..n], 0, &mut self.ev);
                    moved = true;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => panic!("read: {e}"),
            }
        }
        for (id, n) in std::mem::take(&mut self.ev.consume) {
            self.ev.held -= n;
            self.conn.consumed(id, n);
        }
        if !moved {
            std::thread::sleep(Duration::from_millis(1));
        }
        moved
    }

    /// Turns until `done` holds.
    fn until(&mut self, mut done: impl FnMut(&Wire) -> bool) {
        while !done(self) {
            self.turn();
        }
    }

    fn finished(&self, id: u32) -> bool {
        self.ev
            .streams
            .get(&id)
            .is_some_and(|g| g.ended || g.failed.is_some())
    }
}

/// The bytes of a request body: a pattern that tells streams and offsets apart.
fn pattern(seed: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(31).wrapping_add(seed) as u8)
        .collect()
}

const ECHO_BODY: usize = 1_200_000;

#[test]
fn many_streams_against_linerates_h2c_listener() {
    // Bodies of 1.2 MB both ways: over the server's 1 MiB stream window going up, and over
    // our 65,535-byte windows (stream and connection) coming back; two waves of eight
    // (the server's MAX_BODY_STREAMS) add up to more than its 16 MiB connection window.
    // Forty GETs run beside them.
    let router = Router::new()
        .get("/small", |_| Response::text("small"))
        .post("/echo", |req| {
            Response::new(200).body(Body::Owned(req.body().to_vec()))
        })
        .body_limit(4 << 20);
    let config = Config {
        h2c: Some("127.0.0.1:0".parse().unwrap()),
        max_body_bytes: 4 << 20,
        ..TestServer::config()
    };
    let server = TestServer::start_with(config, router).expect("server starts");
    let settings = Settings {
        stream_window: 65_535,
        conn_window: 65_535,
        ..Settings::default()
    };
    let mut w = Wire::connect(server.h2c_addr().unwrap(), settings);
    // The server's SETTINGS say how many streams it takes (one before them).
    w.until(|w| w.conn.settled());
    let get = Request {
        method: b"GET",
        scheme: b"http",
        authority: b"localhost",
        path: b"/small",
        fields: &[],
    };
    let len = ECHO_BODY.to_string();
    let post_fields: &[(&[u8], &[u8])] = &[(b"content-length", len.as_bytes())];
    let post = Request {
        method: b"POST",
        scheme: b"http",
        authority: b"localhost",
        path: b"/echo",
        fields: post_fields,
    };
    let mut gets = Vec::new();
    let mut posts = Vec::new();
    for wave in 0..2 {
        let mut this = Vec::new();
        for i in 0..8 {
            let seed = wave * 8 + i;
            let id = w
                .request(&post, Some(pattern(seed, ECHO_BODY)))
                .expect("room");
            this.push((id, seed));
        }
        for _ in 0..20 {
            gets.push(w.request(&get, None).expect("room"));
        }
        w.until(|w| this.iter().all(|(id, _)| w.finished(*id)));
        posts.extend(this);
    }
    w.until(|w| gets.iter().all(|id| w.finished(*id)));
    for (id, seed) in &posts {
        let got = &w.ev.streams[id];
        assert_eq!(got.failed, None, "stream {id}");
        assert_eq!(got.heads, [200], "stream {id}");
        assert!(got.body == pattern(*seed, ECHO_BODY), "stream {id}'s echo");
    }
    for id in &gets {
        let got = &w.ev.streams[id];
        assert_eq!((&got.heads[..], &got.body[..]), (&[200][..], &b"small"[..]));
    }
    assert!(
        w.ev.held_max <= 65_535,
        "never more than the connection window held unconsumed: {}",
        w.ev.held_max
    );
    // A graceful close: our GOAWAY, then the connection closes.
    w.conn.goaway();
    w.until(|w| w.pending.is_empty() && w.conn.poll_transmit() == Transmit::Close);
    assert!(!w.conn.can_open());
    server.stop().expect("the server stops");
}

/// grpc-go's interop server (v1.85.0 here), built by the session at this path; CI builds it
/// later.
const GRPC_GO_SERVER: &str = "/tmp/gobin/server";

/// Stops the child process when dropped (by its id), so a failed assertion leaves no server.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn one_grpc_empty_call_against_grpc_go() {
    if !std::path::Path::new(GRPC_GO_SERVER).exists() {
        println!("NOT RUN: {GRPC_GO_SERVER} is not built");
        return;
    }
    // A port the OS picks, then handed to the server (it takes no port 0).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _server = Child(
        std::process::Command::new(GRPC_GO_SERVER)
            .args([format!("--port={port}"), "--use_tls=false".into()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("grpc-go's server starts"),
    );
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let started = Instant::now();
    while TcpStream::connect(addr).is_err() {
        assert!(
            started.elapsed() < LOOP_LIMIT,
            "grpc-go's server never listened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut w = Wire::connect(addr, Settings::default());
    let fields: &[(&[u8], &[u8])] = &[(b"content-type", b"application/grpc"), (b"te", b"trailers")];
    let call = Request {
        method: b"POST",
        scheme: b"http",
        authority: b"localhost",
        path: b"/grpc.testing.TestService/EmptyCall",
        fields,
    };
    // One uncompressed message of length 0: an empty `grpc.testing.Empty`.
    let id = w.request(&call, Some(vec![0, 0, 0, 0, 0])).unwrap();
    w.until(|w| w.finished(id));
    let got = &w.ev.streams[&id];
    assert_eq!(got.failed, None);
    assert_eq!(got.heads, [200]);
    assert_eq!(got.body, [0, 0, 0, 0, 0], "one empty message");
    assert!(
        got.trailers
            .iter()
            .any(|(n, v)| n == "grpc-status" && v == "0"),
        "{:?}",
        got.trailers
    );
    // Its PING is answered, ours too.
    assert!(w.conn.ping(0));
    w.until(|w| w.conn.deadline() == u64::MAX);
}
