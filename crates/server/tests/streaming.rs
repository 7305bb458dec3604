//! Streamed response bodies on a real server (`TestServer`, one worker): over HTTP/1.1 on a
//! raw socket (chunked pieces as the writer sends them, the connection kept for the next
//! request, a 1.0 client's body ended by the close, HEAD), over HTTP/2 with curl on an h2c
//! listener, and through the in-process `TestClient` over both framings.
//!
//! Behaviour, not timing: a reader that reads nothing makes the writer see `Full` long before
//! its body is written; a client that leaves makes the writer see `Gone`; an aborted body
//! never ends the way a whole one does (no last chunk on HTTP/1.1, a reset stream on HTTP/2).
//! Waits are bounded (`LIMIT`) only so that a broken server fails instead of hanging.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use linerate_server::streaming::{BodyWriter, STREAM_ROOM, WriteError};
use linerate_server::testing::{Protocol, TestClient, TestServer};
use linerate_server::{Response, Router};

mod common;
use common::curl;

/// Longest any wait in these tests may take (a bound on a hang, not a measurement).
const LIMIT: Duration = Duration::from_secs(20);

/// How long a writer is watched while nobody reads. An unbounded server lets the writer
/// finish in a fraction of this; a bounded one never does, however slow the machine, so
/// this wait cannot fail a correct server.
const WATCH: Duration = Duration::from_secs(2);

/// Checks that, while nobody reads, the writer of a `total`-byte body is held back: it does
/// not finish within [`WATCH`], and what it got taken stays under `bound`.
fn held_back(f: &Fixture, total: usize, bound: usize) {
    match f.seen.recv_timeout(WATCH) {
        Err(mpsc::RecvTimeoutError::Timeout) => {}
        other => panic!("the writer went on while nobody read: {other:?}"),
    }
    let taken = f.taken.load(Ordering::SeqCst);
    assert!(
        taken < bound,
        "{taken} of {total} bytes taken while nobody read"
    );
}

/// What the writer threads report.
#[derive(Debug, PartialEq)]
enum Seen {
    /// The first `Full`, after this many bytes were taken.
    FirstFull(usize),
    /// Every byte was taken and the body ended.
    Done(usize),
    /// The writer learned the client is gone.
    Gone,
}

/// Bytes whose every position is distinguishable.
fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i >> 16) as u8)
        .collect()
}

/// Writes `total` pattern bytes in 16 KiB pieces, waiting for room when full; reports the
/// first `Full` and the end (or that the client left), and keeps `taken` current.
fn produce(w: BodyWriter, total: usize, tx: mpsc::Sender<Seen>, taken: &AtomicUsize) {
    let data = pattern(total);
    let mut sent = 0;
    let mut reported = false;
    while sent < total {
        let piece = &data[sent..(sent + 16 * 1024).min(total)];
        match w.write(piece) {
            Ok(()) => {
                sent += piece.len();
                taken.store(sent, Ordering::SeqCst);
            }
            Err(WriteError::Full) => {
                if !reported {
                    reported = true;
                    let _ = tx.send(Seen::FirstFull(sent));
                }
                if w.wait_room().is_err() {
                    let _ = tx.send(Seen::Gone);
                    return;
                }
            }
            Err(WriteError::Gone) => {
                let _ = tx.send(Seen::Gone);
                return;
            }
        }
    }
    w.end();
    let _ = tx.send(Seen::Done(sent));
}

/// A server whose routes stream: `/ticks` (three pieces from a thread, then the end), `/big`
/// (`total` bytes through [`produce`]), `/cut` ("partial", then an abort), `/forever` (a
/// piece at a time until the client is gone), and `/plain`.
struct Fixture {
    server: TestServer,
    seen: mpsc::Receiver<Seen>,
    /// Bytes `/big`'s writer got taken so far.
    taken: Arc<AtomicUsize>,
}

fn fixture(total: usize) -> Fixture {
    let (tx, seen) = mpsc::channel();
    let tx = Arc::new(Mutex::new(tx));
    let (t1, t2) = (tx.clone(), tx.clone());
    let taken = Arc::new(AtomicUsize::new(0));
    let counter = taken.clone();
    let router = Router::new()
        .get("/plain", |_| Response::text("plain"))
        .get("/ticks", |_| {
            let (resp, w) = Response::new(200).content_type("text/plain").stream();
            std::thread::spawn(move || {
                for i in 0..3 {
                    w.write(format!("tick {i}\n")).unwrap();
                }
                w.end();
            });
            resp
        })
        .get("/big", move |_| {
            let (resp, w) = Response::new(200).stream();
            let tx = t1.lock().unwrap().clone();
            let taken = counter.clone();
            std::thread::spawn(move || produce(w, total, tx, &taken));
            resp
        })
        .get("/cut", |_| {
            let (resp, w) = Response::new(200).stream();
            std::thread::spawn(move || {
                w.write("partial").unwrap();
                w.abort();
            });
            resp
        })
        .get("/forever", move |_| {
            let (resp, w) = Response::new(200).stream();
            let tx = t2.lock().unwrap().clone();
            std::thread::spawn(move || {
                loop {
                    match w.write("more\n") {
                        Ok(()) => std::thread::sleep(Duration::from_millis(5)),
                        Err(WriteError::Full) => {
                            if w.wait_room().is_err() {
                                break;
                            }
                        }
                        Err(WriteError::Gone) => break,
                    }
                }
                let _ = tx.send(Seen::Gone);
            });
            resp
        });
    let config = linerate_server::Config {
        h2c: Some("127.0.0.1:0".parse().unwrap()),
        ..TestServer::config()
    };
    Fixture {
        server: TestServer::start_with(config, router).expect("server starts"),
        seen,
        taken,
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(LIMIT)).unwrap();
    s
}

/// Reads one chunked answer (head and body) from `r`: the head, the body, and whether the
/// last chunk came (`false`: the connection ended first).
fn read_chunked(r: &mut BufReader<TcpStream>) -> (String, Vec<u8>, bool) {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap() == 0 {
            return (head, Vec::new(), false);
        }
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        if r.read_line(&mut size).unwrap_or(0) == 0 {
            return (head, body, false);
        }
        let n = usize::from_str_radix(size.trim_end(), 16).expect("a chunk size");
        if n == 0 {
            let mut end = String::new();
            r.read_line(&mut end).unwrap();
            assert_eq!(end, "\r\n");
            return (head, body, true);
        }
        let mut chunk = vec![0; n + 2];
        if r.read_exact(&mut chunk).is_err() {
            return (head, body, false);
        }
        assert_eq!(&chunk[n..], b"\r\n");
        body.extend_from_slice(&chunk[..n]);
    }
}

#[test]
fn h1_pieces_from_a_thread_arrive_chunked_and_the_connection_serves_again() {
    let f = fixture(0);
    let mut s = connect(f.server.addr());
    s.write_all(b"GET /ticks HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let (head, body, whole) = read_chunked(&mut r);
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(head.contains("Transfer-Encoding: chunked\r\n"), "{head}");
    assert!(head.contains("Content-Type: text/plain\r\n"), "{head}");
    assert!(whole);
    assert_eq!(body, b"tick 0\ntick 1\ntick 2\n");
    // Kept alive: the next request on the same connection is answered.
    s.write_all(b"GET /plain HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut rest = String::new();
    r.read_to_string(&mut rest).unwrap();
    assert!(rest.starts_with("HTTP/1.1 200 OK\r\n"), "{rest}");
    assert!(rest.ends_with("plain"), "{rest}");
}

#[test]
fn h1_a_pipelined_request_behind_a_streamed_answer_waits_for_its_end() {
    let f = fixture(0);
    let mut s = connect(f.server.addr());
    s.write_all(b"GET /ticks HTTP/1.1\r\nHost: t\r\n\r\nGET /plain HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut r = BufReader::new(s);
    let (_, body, whole) = read_chunked(&mut r);
    assert!(whole);
    assert_eq!(body, b"tick 0\ntick 1\ntick 2\n");
    let mut rest = String::new();
    r.read_to_string(&mut rest).unwrap();
    assert!(rest.ends_with("plain"), "{rest}");
}

#[test]
fn h1_a_reader_that_reads_nothing_holds_the_writer_back_then_gets_every_byte() {
    const TOTAL: usize = 64 << 20;
    let f = fixture(TOTAL);
    let mut s = connect(f.server.addr());
    s.write_all(b"GET /big HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    // Nothing is read until the writer was told the body is full.
    let first = f.seen.recv_timeout(LIMIT).expect("the writer reports");
    let Seen::FirstFull(taken) = first else {
        panic!("the writer should see Full first, saw {first:?}");
    };
    // What was taken is bounded by the socket buffers and two rooms (the channel's and the
    // connection's), far below the body.
    assert!(taken >= STREAM_ROOM, "taken {taken}");
    // Held at the socket buffers plus two rooms (the channel's and the connection's).
    held_back(&f, TOTAL, 16 << 20);
    let mut r = BufReader::new(s);
    let (_, body, whole) = read_chunked(&mut r);
    assert!(whole);
    assert_eq!(body.len(), TOTAL);
    assert!(body == pattern(TOTAL), "the body arrives byte for byte");
    assert_eq!(f.seen.recv_timeout(LIMIT).unwrap(), Seen::Done(TOTAL));
}

#[test]
fn h1_a_client_that_leaves_is_seen_by_the_writer() {
    let f = fixture(0);
    let mut s = connect(f.server.addr());
    s.write_all(b"GET /forever HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut first = [0u8; 64];
    let n = s.read(&mut first).unwrap();
    assert!(n > 0 && first.starts_with(b"HTTP/1.1 200"));
    drop(s);
    assert_eq!(
        f.seen.recv_timeout(LIMIT).expect("the writer learns"),
        Seen::Gone
    );
}

#[test]
fn h1_an_aborted_body_ends_the_connection_without_the_last_chunk() {
    let f = fixture(0);
    let mut s = connect(f.server.addr());
    s.write_all(b"GET /cut HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut r = BufReader::new(s);
    let (head, body, whole) = read_chunked(&mut r);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(!whole, "an aborted body must not end with the last chunk");
    assert_eq!(body, b"partial");
}

#[test]
fn h1_head_gets_the_head_only_and_a_1_0_client_gets_the_body_to_the_close() {
    let f = fixture(0);
    let mut s = connect(f.server.addr());
    s.write_all(b"HEAD /ticks HTTP/1.1\r\nHost: t\r\n\r\nGET /plain HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    let (first, second) = all.split_once("\r\n\r\n").unwrap();
    assert!(first.starts_with("HTTP/1.1 200"), "{all}");
    assert!(
        second.starts_with("HTTP/1.1 200") && second.ends_with("plain"),
        "{all}"
    );

    let mut s = connect(f.server.addr());
    s.write_all(b"GET /ticks HTTP/1.0\r\n\r\n").unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    assert!(!all.contains("chunked"), "{all}");
    assert!(all.contains("Connection: close\r\n"), "{all}");
    assert!(all.ends_with("\r\n\r\ntick 0\ntick 1\ntick 2\n"), "{all}");
}

#[test]
fn h2_a_streamed_body_arrives_whole_and_an_aborted_one_is_a_stream_error() {
    let Some(curl) = curl() else { return };
    let f = fixture(0);
    let h2c = f.server.h2c_addr().unwrap();
    let out = Command::new(curl)
        .args(["-sS", "--http2-prior-knowledge", "-D", "-"])
        .arg(format!("http://{h2c}/ticks"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("HTTP/2 200"), "{text}");
    assert!(text.ends_with("tick 0\ntick 1\ntick 2\n"), "{text}");
    // RST_STREAM(INTERNAL_ERROR) after the piece: curl reports a stream error.
    let out = Command::new(curl)
        .args(["-sS", "--http2-prior-knowledge"])
        .arg(format!("http://{h2c}/cut"))
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "an aborted body must not look whole: {out:?}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("INTERNAL_ERROR"), "{err}");
    // curl 7.88 drops what it held of a stream that failed; it never shows more.
    assert!(b"partial".starts_with(&out.stdout), "{out:?}");
}

#[test]
fn h2_a_reader_that_reads_nothing_holds_the_writer_back_and_one_that_leaves_is_seen() {
    let Some(curl) = curl() else { return };
    const TOTAL: usize = 256 << 20;
    let f = fixture(TOTAL);
    let h2c = f.server.h2c_addr().unwrap();
    // curl writes to a pipe nobody reads: once the pipe is full it reads no more, its
    // windows close, and the writer must be held back.
    let mut child = Command::new(curl)
        .args(["-sS", "--http2-prior-knowledge"])
        .arg(format!("http://{h2c}/big"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let first = f.seen.recv_timeout(LIMIT).expect("the writer reports");
    let Seen::FirstFull(taken) = first else {
        panic!("the writer should see Full first, saw {first:?}");
    };
    assert!(taken < TOTAL / 2, "taken {taken} before the first Full");
    // curl's windows and buffers are larger than a socket's: held under half the body.
    held_back(&f, TOTAL, TOTAL / 2);
    // The client goes away: the waiting writer learns it.
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        f.seen.recv_timeout(LIMIT).expect("the writer learns"),
        Seen::Gone
    );
}

#[test]
fn the_test_client_reads_a_streamed_answer_over_both_framings() {
    let router = Router::new().get("/ticks", |_| {
        let (resp, w) = Response::new(200).content_type("text/plain").stream();
        std::thread::spawn(move || {
            for i in 0..3 {
                w.write(format!("tick {i}\n")).unwrap();
            }
            w.end();
        });
        resp
    });
    let client = TestClient::new(router);
    for protocol in [Protocol::Http1, Protocol::Http2] {
        let resp = client.get("/ticks").protocol(protocol).send();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.text(), "tick 0\ntick 1\ntick 2\n", "{protocol:?}");
    }
}

/// A layer's `after` hook that turns an answer into a streamed body gets a 500, never an
/// empty answer that looks complete, and the body's writer learns the answer is gone.
#[test]
fn a_layer_that_answers_with_a_stream_after_the_handler_gets_a_500() {
    use linerate_server::{Extensions, Layer, Request};
    struct Restream(Arc<Mutex<Option<BodyWriter>>>);
    impl Layer for Restream {
        fn before(&self, _: &Request<'_>, _: &mut Extensions) -> Option<Response> {
            None
        }
        fn after(&self, _: &Extensions, resp: &mut Response) {
            let (streamed, writer) = Response::new(200).stream();
            *resp = streamed;
            *self.0.lock().unwrap() = Some(writer);
        }
    }
    let kept = Arc::new(Mutex::new(None));
    let router = Router::new()
        .get("/plain", |_| Response::text("plain"))
        .layer(Restream(kept.clone()));
    let client = TestClient::new(router);
    for protocol in [Protocol::Http1, Protocol::Http2] {
        let resp = client.get("/plain").protocol(protocol).send();
        assert_eq!(resp.status(), 500, "{protocol:?}");
        let writer = kept.lock().unwrap().take().expect("the layer ran");
        assert_eq!(writer.write("late"), Err(WriteError::Gone), "{protocol:?}");
    }
}
