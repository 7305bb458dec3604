//! Raw-socket tests of the floor server: a real floor on 127.0.0.1 with an OS-chosen port,
//! served on a thread and stopped through its flag. Every read has a timeout, so a floor that
//! answers too little fails the test instead of hanging it.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use linerate_lab::floor::{Floor, FloorConfig, FloorResponse};

const REQUEST: &[u8] = b"GET /plaintext HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the test waits to make sure no extra response arrives.
const QUIET: Duration = Duration::from_millis(200);

/// A floor serving on a thread; stopped and joined on drop.
struct Running {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Running {
    fn start(response: FloorResponse) -> Running {
        let floor = Floor::bind(&FloorConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            response,
            cpu: None,
        })
        .expect("bind floor");
        let addr = floor.local_addr();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = thread::spawn(move || floor.serve_until(&flag));
        Running {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    fn connect(&self) -> TcpStream {
        let s = TcpStream::connect_timeout(&self.addr, READ_TIMEOUT).expect("connect");
        s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        s.set_write_timeout(Some(READ_TIMEOUT)).unwrap();
        s.set_nodelay(true).unwrap();
        s
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

/// The length of one plaintext response (the Date header has a fixed width).
fn plaintext_len() -> usize {
    "HTTP/1.1 200 OK\r\nServer: linerate\r\nDate: Fri, 20 Nov 2026 12:00:00 GMT\r\n\
     Content-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!"
        .len()
}

/// Reads exactly `n` plaintext responses and checks each one's shape.
fn read_responses(s: &mut TcpStream, n: usize) {
    let one = plaintext_len();
    let mut buf = vec![0; n * one];
    s.read_exact(&mut buf).expect("read responses");
    for r in buf.chunks_exact(one) {
        assert!(r.starts_with(b"HTTP/1.1 200 OK\r\nServer: linerate\r\nDate: "));
        assert!(r.ends_with(b"Content-Length: 13\r\n\r\nHello, World!"));
    }
}

/// Asserts the server sends nothing more for a while.
fn assert_quiet(s: &mut TcpStream) {
    s.set_read_timeout(Some(QUIET)).unwrap();
    let mut byte = [0u8; 1];
    match s.read(&mut byte) {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
        other => panic!("expected silence, got {other:?}"),
    }
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
}

#[test]
fn one_request_one_response() {
    let floor = Running::start(FloorResponse::Plaintext);
    let mut s = floor.connect();
    s.write_all(REQUEST).unwrap();
    read_responses(&mut s, 1);
    assert_quiet(&mut s);
    // Keep-alive: the same connection serves again.
    s.write_all(REQUEST).unwrap();
    read_responses(&mut s, 1);
}

#[test]
fn json_response_is_the_canned_json() {
    let floor = Running::start(FloorResponse::Json);
    let mut s = floor.connect();
    s.write_all(b"GET /json HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let want_len = "HTTP/1.1 200 OK\r\nServer: linerate\r\nDate: Fri, 20 Nov 2026 12:00:00 GMT\r\n\
                    Content-Type: application/json\r\nContent-Length: 27\r\n\r\n\
                    {\"message\":\"Hello, World!\"}"
        .len();
    let mut buf = vec![0; want_len];
    s.read_exact(&mut buf).unwrap();
    assert!(buf.ends_with(
        b"Content-Type: application/json\r\nContent-Length: 27\r\n\r\n{\"message\":\"Hello, World!\"}"
    ));
    assert_quiet(&mut s);
}

#[test]
fn sixteen_pipelined_requests_in_one_write() {
    let floor = Running::start(FloorResponse::Plaintext);
    let mut s = floor.connect();
    s.write_all(&REQUEST.repeat(16)).unwrap();
    read_responses(&mut s, 16);
    assert_quiet(&mut s);
}

#[test]
fn request_split_at_the_blank_line_is_answered_once() {
    let floor = Running::start(FloorResponse::Plaintext);
    let mut s = floor.connect();
    let cut = REQUEST.len() - 2; // "...\r\n" | "\r\n"
    s.write_all(&REQUEST[..cut]).unwrap();
    assert_quiet(&mut s);
    s.write_all(&REQUEST[cut..]).unwrap();
    read_responses(&mut s, 1);
    assert_quiet(&mut s);
}

#[test]
fn request_one_byte_at_a_time() {
    let floor = Running::start(FloorResponse::Plaintext);
    let mut s = floor.connect();
    for b in REQUEST.repeat(2) {
        s.write_all(&[b]).unwrap();
        thread::sleep(Duration::from_millis(1));
    }
    read_responses(&mut s, 2);
    assert_quiet(&mut s);
}

#[test]
fn more_than_a_batch_in_one_write() {
    let floor = Running::start(FloorResponse::Plaintext);
    let mut s = floor.connect();
    s.write_all(&REQUEST.repeat(200)).unwrap();
    read_responses(&mut s, 200);
    assert_quiet(&mut s);
}

/// A client that writes far more than the socket buffers hold before reading forces partial
/// sends: the floor must park the rest, stop reading, and finish on EPOLLOUT, in order.
#[test]
fn slow_reader_gets_every_response() {
    const N: usize = 50_000;
    let floor = Running::start(FloorResponse::Plaintext);
    // A small receive window makes the floor's sends come up short many times over.
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    sock.connect_timeout(&floor.addr.into(), READ_TIMEOUT)
        .unwrap();
    let mut s: TcpStream = sock.into();
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(READ_TIMEOUT)).unwrap();
    let mut w = s.try_clone().unwrap();
    let writer = thread::spawn(move || {
        let many = REQUEST.repeat(1000);
        for _ in 0..N / 1000 {
            w.write_all(&many).unwrap();
        }
    });
    // Let the floor fill the socket buffers before anything is read, then read in small bites.
    thread::sleep(Duration::from_millis(300));
    let one = plaintext_len();
    let mut buf = vec![0; N * one];
    for chunk in buf.chunks_mut(1500) {
        s.read_exact(chunk).expect("read responses");
    }
    for r in buf.chunks_exact(one) {
        assert!(r.starts_with(b"HTTP/1.1 200 OK\r\n"));
        assert!(r.ends_with(b"\r\n\r\nHello, World!"));
    }
    writer.join().unwrap();
    assert_quiet(&mut s);
}

#[test]
fn many_connections_and_closes() {
    let floor = Running::start(FloorResponse::Plaintext);
    let mut conns: Vec<TcpStream> = (0..100).map(|_| floor.connect()).collect();
    for c in &mut conns {
        c.write_all(REQUEST).unwrap();
    }
    for c in &mut conns {
        read_responses(c, 1);
    }
    // Close half, then the rest must still be served (slots are reused).
    conns.truncate(50);
    for _ in 0..50 {
        conns.push(floor.connect());
    }
    for c in &mut conns {
        c.write_all(REQUEST).unwrap();
        read_responses(c, 1);
    }
}

#[test]
fn half_closed_client_still_gets_its_response() {
    let floor = Running::start(FloorResponse::Plaintext);
    let mut s = floor.connect();
    s.write_all(REQUEST).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    read_responses(&mut s, 1);
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "floor closes after EOF");
}
