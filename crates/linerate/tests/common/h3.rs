//! An HTTP/3 client for the tests: requests (GETs, or any method with fields and a body), one
//! after another, on one QUIC connection (the load generator's client, driven by a blocking
//! UDP socket), with what came back and the largest datagram the server sent. Bounded: 10 s in
//! all.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use linerate_load::h3::{Client, Event, Quic, Request};

/// What a run of GETs saw.
#[derive(Debug)]
pub struct Got {
    /// Each answer's status and body length, in the order asked.
    pub answers: Vec<(u16, u64)>,
    /// Each answer's `grpc-status` (trailers, or a trailers-only head), in the same order.
    pub grpc: Vec<Option<u32>>,
    /// The largest UDP payload that came from the server.
    pub largest_datagram: usize,
    /// Packets the client's QUIC declared lost (and sent again): a datagram the server
    /// dropped, or one of the handshake's read by a process that was not its server.
    pub lost_packets: u64,
}

/// The load generator's QUIC client over `tls` (ALPN set to `h3` here), for `localhost`.
pub fn quic(mut tls: rustls::ClientConfig) -> Quic {
    tls.alpn_protocols = vec![b"h3".to_vec()];
    Quic::new(Arc::new(tls), "localhost").unwrap()
}

/// One request: method, path, fields, body.
pub type Ask<'a> = (&'a str, &'a str, &'a [(String, String)], &'a [u8]);

/// GETs `paths` one after another on one connection to `addr`'s UDP port.
pub fn get(quic: &Quic, addr: SocketAddr, paths: &[&str]) -> Got {
    let asks: Vec<Ask<'_>> = paths
        .iter()
        .map(|p| ("GET", *p, &[][..], &b""[..]))
        .collect();
    send(quic, addr, &asks)
}

/// Sends `asks` one after another on one connection to `addr`'s UDP port.
pub fn send(quic: &Quic, addr: SocketAddr, asks: &[Ask<'_>]) -> Got {
    let sock = UdpSocket::bind(if addr.is_ipv4() {
        "127.0.0.1:0"
    } else {
        "[::1]:0"
    })
    .unwrap();
    sock.connect(addr).unwrap();
    let host = format!("localhost:{}", addr.port());
    let make = |i: usize| {
        let (method, path, fields, body) = asks[i];
        Request::new(method, &host, path, fields, body)
    };
    let mut c: Client<usize> = Client::connect(quic, Instant::now(), addr, 1).unwrap();
    let (mut tx, mut rx, mut scratch, mut events) =
        (Vec::new(), vec![0; 65_535], Vec::new(), Vec::new());
    let mut got = Got {
        answers: Vec::new(),
        grpc: Vec::new(),
        largest_datagram: 0,
        lost_packets: 0,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut opened = 0;
    while got.answers.len() < asks.len() {
        assert!(
            Instant::now() < deadline,
            "no HTTP/3 answers in 10 s: {got:?}"
        );
        let now = Instant::now();
        c.poll(now, &make(got.answers.len()), &mut events)
            .expect("HTTP/3 connection");
        for e in events.drain(..) {
            match e {
                Event::Response {
                    status,
                    body,
                    grpc_status,
                    ..
                } => {
                    got.answers.push((status, body));
                    got.grpc.push(grpc_status);
                }
                other => panic!("{other:?}"),
            }
        }
        if opened == got.answers.len()
            && opened < asks.len()
            && c.room() > 0
            && c.open(&make(opened), opened)
        {
            opened += 1;
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
    got.lost_packets = c.lost_packets();
    got
}
