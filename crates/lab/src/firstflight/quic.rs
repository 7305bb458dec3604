//! `--http3`: the first flight of one HTTP/3 response over QUIC, measured on the wire rather
//! than computed. A quinn-proto client (`linerate_load::h3::Client`, the load generator's)
//! completes the handshake and lets it settle, sends one GET, then sends nothing — no ACK —
//! and counts the datagrams the server sends until a quiet gap: what its congestion window
//! lets out before it needs an acknowledgement. Then it acknowledges again to take the rest.
//!
//! Phases, each bounded by the timeouts: (1) handshake, then drive the connection until no
//! datagram came for [`SETTLE_GAP`] (HANDSHAKE_DONE, session tickets, the control and QPACK
//! streams and MTU probes are all acknowledged, so the server has nothing in flight); (2) the
//! request goes out and transmits stop: every datagram from the server is read and decrypted
//! but never acknowledged, and the burst ends at the first [`BURST_GAP`] of quiet after the
//! response began (quinn's probe timeout is at least the client's 25 ms max_ack_delay, so a
//! probe cannot join the burst); (3) normal driving until the response ends, then a close.
//! Why the burst may exceed the initial window: Cubic's slow start adds every acknowledged
//! byte to the window (unless the sender was application-limited), so the handshake's bytes,
//! acknowledged in phase 1, may have grown it; they are reported beside the burst. (Against
//! `linerate serve --quic` on loopback the burst stops within 14,720 bytes: quinn does not
//! grow the window on acknowledgements while the sender is application-limited, as a server
//! is during its handshake.) Another server may simply start larger: quic-go, caddy's QUIC,
//! starts with 32 datagrams.

use std::fmt;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::time::{Duration, Instant};

use linerate_load::h3::{self, Client, Event, Request};
use linerate_load::tls::{TlsChoice, TlsClient, Verify};
use serde::Serialize;
use socket2::SockRef;

use super::fetch::{FetchError, Timeouts};
use super::url::HttpUrl;

/// The server's initial congestion window in bytes (RFC 9002 §7.2 with 1,472-byte
/// datagrams: 10 of them; what `linerate serve --quic` configures).
pub const QUIC_INITIAL_WINDOW: u64 = 14_720;
/// Quiet that ends the first burst: far above the gaps between datagrams of one burst on
/// loopback (microseconds), below the server's probe timeout (at least 25 ms).
pub const BURST_GAP: Duration = Duration::from_millis(10);
/// Quiet after the handshake before the request goes: longer than the client's ACK delay
/// (25 ms), so the server's last handshake-time packets are acknowledged.
pub const SETTLE_GAP: Duration = Duration::from_millis(100);
/// The largest datagram read (QUIC datagrams are at most 65,527 bytes of UDP payload).
const MAX_DATAGRAM: usize = 65_535;
/// Receive buffer asked for: a burst of a grown window must not be dropped by the kernel.
const RECV_BUFFER: usize = 4 << 20;

/// Datagrams from the server, counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Datagrams {
    pub datagrams: u64,
    /// UDP payload bytes: what QUIC's congestion window counts.
    pub bytes: u64,
    /// The largest one.
    pub largest: u64,
}

impl Datagrams {
    fn add(&mut self, len: usize) {
        self.datagrams += 1;
        self.bytes += len as u64;
        self.largest = self.largest.max(len as u64);
    }
}

/// What one HTTP/3 exchange looked like on the wire.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct QuicFlight {
    pub url: String,
    /// The response's final status.
    pub status: u16,
    /// Its body (DATA payload) in all.
    pub body_bytes: u64,
    /// Its request stream's bytes in all: HEADERS and DATA frames.
    pub stream_bytes: u64,
    /// What the server sent before the request (handshake, HANDSHAKE_DONE, tickets, its
    /// control and QPACK streams, MTU probes), all acknowledged before the request went.
    pub before_request: Datagrams,
    /// What the server sent after the request until the first quiet gap, unacknowledged.
    pub burst: Datagrams,
    /// The response's stream bytes those datagrams carried (HEADERS and DATA frames).
    pub burst_stream_bytes: u64,
    /// Of them, body bytes.
    pub burst_body_bytes: u64,
    /// The whole response (its stream's end) came in the burst.
    pub complete_in_burst: bool,
    /// Everything the server sent from the request to the response's end, the burst included.
    pub response: Datagrams,
    /// The gap that ended the burst, in ms.
    pub gap_ms: u64,
    /// Quiet required before the request, in ms.
    pub settle_ms: u64,
}

/// A failure of the QUIC exchange, as a fetch error.
fn quic_err(url: &str, why: impl fmt::Display) -> FetchError {
    FetchError::Quic {
        url: url.to_string(),
        why: why.to_string(),
    }
}

/// One connection being driven: the socket, the client and the request.
struct Driver {
    sock: UdpSocket,
    addr: SocketAddr,
    client: Client<()>,
    req: Request,
    tx: Vec<u8>,
    rx: Vec<u8>,
    scratch: Vec<u8>,
    events: Vec<Event<()>>,
    /// Status and body once the response ended.
    done: Option<(u16, u64)>,
    stream_bytes: u64,
}

impl Driver {
    /// Sends everything the client has to send now.
    fn flush(&mut self, now: Instant) -> io::Result<()> {
        while let Some(t) = self.client.transmit(now, &mut self.tx) {
            let seg = t.segment_size.unwrap_or(t.size).max(1);
            for d in self.tx[..t.size].chunks(seg) {
                match self.sock.send(d) {
                    // Dropped like a datagram lost on the wire; QUIC recovers it.
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    /// Waits until `until` for one datagram and feeds it to the client; its length, or None
    /// when none came.
    fn recv(&mut self, until: Instant) -> io::Result<Option<usize>> {
        let left = until.saturating_duration_since(Instant::now());
        // A zero timeout means "block forever" to the socket.
        self.sock
            .set_read_timeout(Some(left.max(Duration::from_micros(1))))?;
        let n = match self.sock.recv(&mut self.rx) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(None);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(None),
            Err(e) => return Err(e),
        };
        let now = Instant::now();
        self.client
            .recv(now, self.addr, &self.rx[..n], &mut self.scratch);
        Ok(Some(n))
    }

    /// Takes the client's events: the response's end, a reset, a lost connection.
    fn poll(&mut self, now: Instant) -> Result<(), String> {
        let polled = self.client.poll(now, &self.req, &mut self.events);
        self.stream_bytes += self.client.take_bytes_read();
        for ev in self.events.drain(..) {
            match ev {
                Event::Response { status, body, .. } => self.done = Some((status, body)),
                Event::Reset { code, .. } => {
                    return Err(format!(
                        "the server reset the request stream (code {code:#x})"
                    ));
                }
                Event::Refused { .. } => {
                    return Err("the server refused the request (GOAWAY)".into());
                }
            }
        }
        polled.map_err(|e| e.to_string())
    }

    /// Runs the client's timer if it is due.
    fn timers(&mut self, now: Instant) {
        if self.client.poll_timeout().is_some_and(|t| t <= now) {
            self.client.timeout(now);
        }
    }

    /// When to stop waiting for a datagram: the client's timer or `until`, the earlier.
    fn wake(&mut self, until: Instant) -> Instant {
        self.client.poll_timeout().map_or(until, |t| t.min(until))
    }

    /// One turn of ordinary driving until `until`: timers, events, transmits, one datagram
    /// (whose length is returned).
    fn turn(&mut self, url: &str, until: Instant) -> Result<Option<usize>, FetchError> {
        let now = Instant::now();
        self.timers(now);
        self.poll(now).map_err(|why| quic_err(url, why))?;
        self.flush(now).map_err(|e| io_err(url, self.addr, e))?;
        let wake = self.wake(until);
        let got = self.recv(wake).map_err(|e| io_err(url, self.addr, e))?;
        self.poll(Instant::now())
            .map_err(|why| quic_err(url, why))?;
        Ok(got)
    }
}

/// A socket error: ICMP's refusal reads as a refused connection.
fn io_err(url: &str, addr: SocketAddr, source: io::Error) -> FetchError {
    if source.kind() == io::ErrorKind::ConnectionRefused {
        FetchError::Connect { addr, source }
    } else {
        FetchError::Io {
            url: url.to_string(),
            source,
        }
    }
}

/// GETs `url` over HTTP/3 on a new QUIC connection and measures the response's first flight
/// (see the module docs). The certificate is checked as `verify` says.
pub fn get(
    url: &HttpUrl,
    accept_encoding: Option<&str>,
    timeouts: Timeouts,
    verify: &Verify,
) -> Result<QuicFlight, FetchError> {
    let shown = url.to_string();
    if !url.tls {
        return Err(quic_err(
            &shown,
            "HTTP/3 runs over QUIC, which is always TLS: use an https:// URL",
        ));
    }
    let host = url.host_for_lookup();
    // UDP cannot tell a listening address from another before the handshake: the first
    // address the name resolves to is the one tried.
    let addr = (host, url.port)
        .to_socket_addrs()
        .map_err(|source| FetchError::Resolve {
            host: host.to_string(),
            source,
        })?
        .next()
        .ok_or_else(|| FetchError::Resolve {
            host: host.to_string(),
            source: io::Error::new(io::ErrorKind::NotFound, "no addresses"),
        })?;
    let local: SocketAddr = if addr.is_ipv4() {
        "0.0.0.0:0".parse().expect("an address")
    } else {
        "[::]:0".parse().expect("an address")
    };
    let sock = UdpSocket::bind(local)
        .and_then(|s| s.connect(addr).map(|()| s))
        .map_err(|source| FetchError::Connect { addr, source })?;
    // Best effort: a smaller buffer could only drop datagrams of a large burst.
    let _ = SockRef::from(&sock).set_recv_buffer_size(RECV_BUFFER);
    let tls = TlsClient::new(
        host,
        verify.clone(),
        TlsChoice {
            http3: true,
            ..TlsChoice::default()
        },
    )
    .map_err(|e| quic_err(&shown, format!("TLS: {e}")))?;
    let quic = h3::Quic::new(tls.config.clone(), host).map_err(|e| quic_err(&shown, e))?;
    let client = Client::connect(&quic, Instant::now(), addr, 1)
        .map_err(|e| quic_err(&shown, h3::H3Error::Connect(e)))?;
    let mut headers = vec![
        (
            "user-agent".to_string(),
            super::fetch::USER_AGENT.to_string(),
        ),
        ("accept".to_string(), "*/*".to_string()),
    ];
    if let Some(ae) = accept_encoding {
        headers.push(("accept-encoding".to_string(), ae.to_string()));
    }
    let mut d = Driver {
        sock,
        addr,
        client,
        req: Request::new("GET", &url.authority(), &url.target, &headers, b""),
        tx: Vec::new(),
        rx: vec![0; MAX_DATAGRAM],
        scratch: Vec::new(),
        events: Vec::new(),
        done: None,
        stream_bytes: 0,
    };
    let timeout = |after: Duration| FetchError::Timeout {
        url: shown.clone(),
        after,
    };

    // 1: the handshake, then quiet.
    let mut before = Datagrams::default();
    let connect_by = Instant::now() + timeouts.connect;
    let mut last = Instant::now();
    loop {
        let connected = d.client.is_connected();
        let until = if connected {
            last + SETTLE_GAP
        } else {
            connect_by
        };
        if Instant::now() >= until {
            if connected {
                break;
            }
            return Err(timeout(timeouts.connect));
        }
        if let Some(n) = d.turn(&shown, until)? {
            before.add(n);
            last = Instant::now();
        }
    }

    // 2: the request, then no transmit at all: what comes is what the window lets out.
    let exchange_by = Instant::now() + timeouts.exchange;
    if !d.client.open(&d.req, ()) {
        return Err(quic_err(&shown, "the server allows no request stream"));
    }
    d.flush(Instant::now())
        .map_err(|e| io_err(&shown, addr, e))?;
    d.stream_bytes = 0;
    let mut burst = Datagrams::default();
    let mut last = None;
    loop {
        // Until the response begins, wait as long as the exchange may take (the first
        // datagram may be an ACK alone, the answer still being made).
        let until = match last {
            Some(t) if d.stream_bytes > 0 => t + BURST_GAP,
            _ => exchange_by,
        };
        if Instant::now() >= until {
            break;
        }
        match d.recv(until).map_err(|e| io_err(&shown, addr, e))? {
            Some(n) => {
                burst.add(n);
                last = Some(Instant::now());
                d.poll(Instant::now())
                    .map_err(|why| quic_err(&shown, why))?;
            }
            None if d.stream_bytes == 0 && Instant::now() >= exchange_by => {
                return Err(timeout(timeouts.exchange));
            }
            None => {}
        }
        if d.done.is_some() {
            // The stream ended: nothing of the response is left to come.
            break;
        }
    }
    let burst_stream_bytes = d.stream_bytes;
    let (complete_in_burst, burst_body_bytes) = match (d.done, d.client.progress()) {
        (Some((_, body)), _) => (true, body),
        (None, Some((_, body))) => (false, body),
        (None, None) => (false, 0),
    };

    // 3: acknowledge again and take the rest.
    let mut response = burst;
    while d.done.is_none() {
        if Instant::now() >= exchange_by {
            return Err(timeout(timeouts.exchange));
        }
        if let Some(n) = d.turn(&shown, exchange_by)? {
            response.add(n);
        }
    }
    let (status, body_bytes) = d.done.expect("the loop ends on it");
    let now = Instant::now();
    d.client.close(now);
    let _ = d.flush(now);
    Ok(QuicFlight {
        url: shown,
        status,
        body_bytes,
        stream_bytes: d.stream_bytes,
        before_request: before,
        burst,
        burst_stream_bytes,
        burst_body_bytes,
        complete_in_burst,
        response,
        gap_ms: BURST_GAP.as_millis() as u64,
        settle_ms: SETTLE_GAP.as_millis() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_count_and_keep_the_largest() {
        let mut d = Datagrams::default();
        for n in [1200, 1452, 40] {
            d.add(n);
        }
        assert_eq!(
            d,
            Datagrams {
                datagrams: 3,
                bytes: 2692,
                largest: 1452
            }
        );
    }

    #[test]
    fn http_urls_are_refused_before_any_packet() {
        let url = HttpUrl::parse("http://127.0.0.1:9/").unwrap();
        let t = Timeouts {
            connect: Duration::from_millis(100),
            exchange: Duration::from_millis(100),
        };
        let e = get(&url, None, t, &Verify::Insecure).unwrap_err();
        assert!(e.to_string().contains("https://"), "{e}");
    }
}
