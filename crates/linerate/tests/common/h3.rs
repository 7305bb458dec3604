//! An HTTP/3 client for the tests: GETs, one after another, on one QUIC connection (the load
//! generator's client, driven by a blocking UDP socket), with what came back and the largest
//! datagram the server sent. Bounded: 10 s in all.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use linerate_load::h3::{Client, Event, Quic, Request};

/// What a run of GETs saw.
#[derive(Debug)]
pub struct Got {
    /// Each answer's status and body length, in the order asked.
    pub answers: Vec<(u16, u64)>,
    /// The largest UDP payload that came from the server.
    pub largest_datagram: usize,
}

/// The load generator's QUIC client over `tls` (ALPN set to `h3` here), for `localhost`.
pub fn quic(mut tls: rustls::ClientConfig) -> Quic {
    tls.alpn_protocols = vec![b"h3".to_vec()];
    Quic::new(Arc::new(tls), "localhost").unwrap()
}

/// GETs `paths` one after another on one connection to `addr`'s UDP port.
pub fn get(quic: &Quic, addr: SocketAddr, paths: &[&str]) -> Got {
    let sock = UdpSocket::bind(if addr.is_ipv4() {
        "127.0.0.1:0"
    } else {
        "[::1]:0"
    })
    .unwrap();
    sock.connect(addr).unwrap();
    let host = format!("localhost:{}", addr.port());
    let mut c: Client<usize> = Client::connect(quic, Instant::now(), addr, 1).unwrap();
    let (mut tx, mut rx, mut scratch, mut events) =
        (Vec::new(), vec![0; 65_535], Vec::new(), Vec::new());
    let mut got = Got {
        answers: Vec::new(),
        largest_datagram: 0,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut opened = 0;
    while got.answers.len() < paths.len() {
        assert!(
            Instant::now() < deadline,
            "no HTTP/3 answers in 10 s: {got:?}"
        );
        let now = Instant::now();
        let req = Request::new("GET", &host, paths[got.answers.len()], &[], b"");
        c.poll(now, &req, &mut events).expect("HTTP/3 connection");
        for e in events.drain(..) {
            match e {
                Event::Response { status, body, .. } => got.answers.push((status, body)),
                other => panic!("{paths:?}: {other:?}"),
            }
        }
        if opened == got.answers.len() && opened < paths.len() && c.room() > 0 {
            let req = Request::new("GET", &host, paths[opened], &[], b"");
            if c.open(&req, opened) {
                opened += 1;
            }
        }
        while let Some(t) = c.transmit(now, &mut tx) {
            let seg = t.segment_size.unwrap_or(t.size);
            for one in tx[..t.size].chunks(seg) {
                sock.send(one).unwrap();
            }
        }
        let wait = c
            .poll_timeout()
            .map_or(Duration::from_millis(50), |at| {
                at.saturating_duration_since(now)
            })
            .clamp(Duration::from_millis(1), Duration::from_millis(50));
        sock.set_read_timeout(Some(wait)).unwrap();
        match sock.recv(&mut rx) {
            Ok(n) => {
                got.largest_datagram = got.largest_datagram.max(n);
                c.recv(Instant::now(), addr, &rx[..n], &mut scratch);
            }
            Err(_) => c.timeout(Instant::now()),
        }
    }
    got
}
