//! Raw-socket tests of the proxy floor: a real relay on 127.0.0.1 in front of a real upstream
//! (the syscall floor, or an echo server), served on threads and stopped through their flags.
//! Every read has a timeout, so a relay that loses bytes fails instead of hanging.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use linerate_lab::floor::{Floor, FloorConfig, FloorResponse};
use linerate_lab::relay::{Relay, RelayConfig};

const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// A thread serving until its flag is set; stopped and joined on drop.
struct Stoppable {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Stoppable {
    fn spawn(f: impl FnOnce(&AtomicBool) + Send + 'static) -> Stoppable {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        Stoppable {
            stop,
            thread: Some(thread::spawn(move || f(&flag))),
        }
    }
}

impl Drop for Stoppable {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

fn relay_to(upstream: SocketAddr) -> (SocketAddr, Stoppable) {
    let relay = Relay::bind(&RelayConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        upstream,
        cpu: None,
    })
    .expect("bind relay");
    let addr = relay.local_addr();
    (addr, Stoppable::spawn(move |stop| relay.serve_until(stop)))
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, READ_TIMEOUT).expect("connect");
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(READ_TIMEOUT)).unwrap();
    s
}

/// An upstream that echoes every byte of every connection back until the peer ends, then
/// ends its side too.
fn echo_upstream() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            thread::spawn(move || {
                let mut r = s.try_clone().unwrap();
                let _ = std::io::copy(&mut r, &mut s);
                let _ = s.shutdown(Shutdown::Write);
            });
        }
    });
    addr
}

#[test]
fn pipelined_requests_get_the_upstreams_answers_in_order() {
    let floor = Floor::bind(&FloorConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        response: FloorResponse::Plaintext,
        cpu: None,
    })
    .unwrap();
    let upstream = floor.local_addr();
    let _floor = Stoppable::spawn(move |stop| floor.serve_until(stop));
    let (addr, _relay) = relay_to(upstream);
    let mut s = connect(addr);
    let one = b"GET /plaintext HTTP/1.1\r\nHost: a\r\n\r\n";
    for round in [1usize, 10, 100] {
        s.write_all(&one.repeat(round)).unwrap();
        let mut got = 0;
        let mut buf = vec![0; 1 << 16];
        let mut text = Vec::new();
        while got < round {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "relay closed after {got} of {round} answers");
            text.extend_from_slice(&buf[..n]);
            got = text.windows(13).filter(|w| w == b"Hello, World!").count();
        }
        assert_eq!(got, round);
        assert!(text.starts_with(b"HTTP/1.1 200 OK\r\n"));
    }
}

/// Eight MiB each way at once while the client reads nothing for a while: the relay holds at
/// most one read per direction and loses no byte.
#[test]
fn bytes_cross_both_ways_unchanged_under_backpressure() {
    let (addr, _relay) = relay_to(echo_upstream());
    let s = connect(addr);
    let data: Vec<u8> = (0..8u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let sent = data.clone();
    let mut w = s.try_clone().unwrap();
    let writer = thread::spawn(move || {
        w.write_all(&sent).unwrap();
        w.shutdown(Shutdown::Write).unwrap();
    });
    thread::sleep(Duration::from_millis(200));
    let mut back = Vec::new();
    (&s).read_to_end(&mut back).unwrap();
    writer.join().unwrap();
    assert_eq!(back.len(), data.len());
    assert!(back == data, "the echo came back changed");
}

#[test]
fn a_client_end_ends_its_upstream_connection() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let (addr, _relay) = relay_to(l.local_addr().unwrap());
    let c = connect(addr);
    let (mut up, _) = l.accept().unwrap();
    up.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    drop(c);
    let mut buf = [0; 16];
    assert_eq!(up.read(&mut buf).unwrap(), 0, "the upstream saw its end");
}

#[test]
fn a_refused_upstream_closes_the_client() {
    let upstream = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let (addr, _relay) = relay_to(upstream);
    let mut c = connect(addr);
    let _ = c.write_all(b"GET / HTTP/1.1\r\n\r\n");
    let mut buf = [0; 16];
    assert!(matches!(c.read(&mut buf), Ok(0) | Err(_)));
}
