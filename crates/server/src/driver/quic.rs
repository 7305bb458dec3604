//! HTTP/3 on the worker: QUIC connections (quinn-proto, sans I/O) driven by the worker's own
//! loop, each carrying an `h3::Conn` that serves the same application as TCP.
//!
//! Owns the worker's UDP sockets (one per QUIC listener, a member of that port's
//! SO_REUSEPORT group), the quinn-proto endpoint of each, and the moves between the three
//! layers: datagrams in → the endpoint → a connection's events → the HTTP/3 streams → the
//! application; answers → stream writes → packets out. The socket is quinn-udp's: a batch
//! of datagrams per `recvmmsg`, each buffer a train of one client's datagrams where the
//! kernel has UDP GRO; several datagrams per `sendmsg` with UDP GSO; each datagram's ECN
//! marks, and the local address it came to, which its answers leave from (a server bound to
//! a wildcard address on a host with several). Each connection's path MTU discovery
//! searches up to what the route to its client carries (`path_mtu`), so datagrams on a
//! loopback or jumbo-frame path grow past Ethernet's 1,452 bytes. A QUIC connection lives in
//! a worker slot like a TCP one (`Proto::Boxed(Boxed::H3)`), so deferred answers, streamed
//! bodies, the timer wheel (HTTP/3's deadlines) and shutdown reach it the same way; QUIC's
//! own timers (pacing, ACK delay, loss detection, idle) are filed here, in a wheel of 1 ms
//! ticks.
//!
//! Steering: the connection IDs this worker issues carry its index (their first byte is
//! congruent to it modulo the worker count, the rest random), and a cBPF program on the
//! reuseport group sends each short-header packet to the socket of that index
//! (`sys::quic_steering_program`); handshake packets go by the kernel's 4-tuple hash, which
//! is also where their connection is. A packet that still lands on another worker (no cBPF,
//! and a client whose address changed) is routed: the worker its connection ID names gets
//! it through a [`Relay`] (a Unix datagram socket per worker), and handles it as if it had
//! read it itself. An address change during the handshake is not survived even so:
//! quinn-proto discards a handshaking connection's packets from a new address (RFC 9000 §9
//! lets an endpoint keep the handshake to its first path).
//!
//! Address validation: past [`RETRY_ABOVE`] handshakes in progress on a worker, a new
//! client's Initial gets a Retry (RFC 9000 §8.1.2) and only a client that echoes the token
//! costs a handshake. Stateless resets use one key per server. 0-RTT is not offered.
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::unix::net::UnixDatagram;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use linerate_h3::Code;
use linerate_http1::RequestHead;
use quinn_proto::{
    ConnectionHandle, ConnectionId, ConnectionIdGenerator, DatagramEvent, Dir, EcnCodepoint,
    EndpointConfig, Event, ReadError, Side, StreamEvent, StreamId, VarInt,
};
use quinn_udp::{BATCH_SIZE, RecvMeta, UdpSocketState};

use super::path_mtu::{self, Ceiling};
use super::timer::Wheel;
use crate::app::Pending;
use crate::h1::{Cx, Service, Timer};
use crate::h3;
use crate::pool::Pool;

/// Handshakes in progress on one worker past which new clients must prove their address
/// with a Retry round trip before they cost a handshake (a spoofed-source flood then costs
/// one stateless packet each).
pub const RETRY_ABOVE: usize = 256;
/// Connection ID length, the worker's byte first.
const CID_LEN: usize = 8;
/// Datagrams one `sendmsg` may carry with UDP GSO (the kernel's limit is 64; fewer where
/// the socket refused GSO).
const GSO_SEGMENTS: usize = 16;
/// The bytes one GSO `sendmsg` may carry (its datagrams are cut from one UDP packet, whose
/// length field is 16 bits), with room for the headers.
const GSO_BYTES: usize = 65_000;
/// Ceilings of path MTU discovery a worker makes a configuration for (see `Ep::config_for`).
const CEILINGS: usize = 8;
/// Datagrams read per readiness before the loop turns: reads stop once this many came (the
/// batch in hand is handled whole; the socket stays readable, so the rest come next turn).
pub(crate) const RECV_BUDGET: usize = 256;
/// The largest datagram a client sends (what the endpoints advertise), and so the largest
/// a relay carries, after its head.
const MAX_DATAGRAM: usize = path_mtu::MAX_PAYLOAD as usize;
/// One receive buffer of a batch (a GRO train is one super-datagram of at most 64 KiB).
const RECV_CHUNK: usize = 1 << 16;
/// A connection's receive window per stream and in all (request bodies pace the client,
/// never memory: they go to the application as they come).
const STREAM_WINDOW: u32 = 1 << 20;
const CONN_WINDOW: u32 = 16 << 20;
/// Bytes of answers the transport holds unacknowledged per connection (the rest waits in
/// the streams, read from files only as it goes).
const SEND_WINDOW: u64 = 4 << 20;
/// RFC 9002 §6.1.2's time threshold, as a multiple of the RTT: a packet is declared lost this
/// long after it was sent once a later one is acknowledged. 5/4, not the RFC's 9/8: the
/// reordering window TCP's RACK starts with (RFC 8985 §6.2: min_rtt/4), which Linux uses.
/// With timers to the microsecond, 9/8 declared ~30 % more packets lost than 5/4 on
/// scripts/h3-netem.sh's jittery, reordering link (spurious losses, each a window cut).
const LOSS_TIME_THRESHOLD: f32 = 1.25;
/// RFC 9002 §7.2: the initial window, min(10 × max datagram, max(2 × max datagram, 14,720)).
const INITIAL_WINDOW: u64 = 14_720;

/// What a worker is given for one QUIC listener.
pub(crate) struct QuicSetup {
    pub socket: UdpSocket,
    pub config: QuicConfig,
}

/// A QUIC listener's configuration: quinn-proto's, with the ceiling of path MTU discovery
/// left at its default (1,452 bytes), and what makes the same with another ceiling.
#[derive(Clone)]
pub(crate) struct QuicConfig {
    base: Arc<quinn_proto::ServerConfig>,
    idle: quinn_proto::IdleTimeout,
}

impl QuicConfig {
    /// The configuration for one TLS listener: its rustls configuration made QUIC's (TLS 1.3,
    /// ALPN `h3`, no early data), with the transport's limits.
    pub(crate) fn new(tls: &Arc<rustls::ServerConfig>, idle_ms: u64) -> Result<QuicConfig, String> {
        let mut tls = (**tls).clone();
        tls.alpn_protocols = vec![b"h3".to_vec()];
        tls.max_early_data_size = 0;
        let crypto = quinn_proto::crypto::rustls::QuicServerConfig::try_from(tls)
            .map_err(|e| format!("QUIC needs TLS 1.3 with AES-128-GCM: {e}"))?;
        let idle = quinn_proto::IdleTimeout::try_from(Duration::from_millis(idle_ms.max(1)))
            .map_err(|e| e.to_string())?;
        let mut base = quinn_proto::ServerConfig::with_crypto(Arc::new(crypto));
        base.transport_config(Arc::new(transport(idle, None)));
        Ok(QuicConfig {
            base: Arc::new(base),
            idle,
        })
    }

    /// The same configuration (its keys for tokens included) with datagrams up to `ceiling`.
    fn with_ceiling(&self, ceiling: Ceiling) -> Arc<quinn_proto::ServerConfig> {
        let mut c = (*self.base).clone();
        c.transport_config(Arc::new(transport(self.idle, Some(ceiling))));
        Arc::new(c)
    }
}

/// The transport's limits; `ceiling` is how large datagrams may grow (path MTU discovery up to
/// 1,452 bytes, quinn-proto's default, when `None`).
fn transport(
    idle: quinn_proto::IdleTimeout,
    ceiling: Option<Ceiling>,
) -> quinn_proto::TransportConfig {
    let mut t = quinn_proto::TransportConfig::default();
    t.max_concurrent_bidi_streams(VarInt::from_u32(h3::MAX_CONCURRENT_STREAMS as u32))
        .max_concurrent_uni_streams(VarInt::from_u32(h3::MAX_UNI_STREAMS as u32))
        .stream_receive_window(VarInt::from_u32(STREAM_WINDOW))
        .receive_window(VarInt::from_u32(CONN_WINDOW))
        .send_window(SEND_WINDOW)
        .max_idle_timeout(Some(idle));
    t.time_threshold(LOSS_TIME_THRESHOLD);
    let mut cubic = quinn_proto::congestion::CubicConfig::default();
    // quinn-proto sends while in flight + datagram < window; RFC 9002 §7 allows in flight +
    // datagram = window. One byte more makes the two the same: ten 1,472-byte datagrams (or
    // two of 7,360) fill the 14,720 bytes, where quinn-proto alone sends nine (or one).
    cubic.initial_window(INITIAL_WINDOW + 1);
    t.congestion_controller_factory(Arc::new(cubic));
    match ceiling {
        Some(Ceiling { bytes, probe: true }) => {
            let mut mtud = quinn_proto::MtuDiscoveryConfig::default();
            mtud.upper_bound(bytes);
            t.mtu_discovery_config(Some(mtud));
        }
        Some(Ceiling {
            bytes,
            probe: false,
        }) => {
            t.initial_mtu(bytes).mtu_discovery_config(None);
        }
        None => {}
    }
    t
}

/// Issues this worker's connection IDs: the first byte ≡ the worker's index (mod the worker
/// count), so the steering program finds the worker; the rest random.
struct WorkerCids {
    worker: u8,
    workers: u8,
}

impl ConnectionIdGenerator for WorkerCids {
    fn generate_cid(&mut self) -> ConnectionId {
        let mut b = [0u8; CID_LEN];
        let _ = aws_lc_rs::rand::fill(&mut b);
        let n = u32::from(self.workers.max(1));
        // The largest multiple of n that fits a byte, so every worker's values are equally many.
        let spread = (256 / n) * n;
        let r = u32::from(b[0]) % (spread / n);
        b[0] = (r * n + u32::from(self.worker)) as u8;
        ConnectionId::new(&b)
    }

    fn cid_len(&self) -> usize {
        CID_LEN
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

/// The routes between workers for datagrams that reached the wrong one: this worker's
/// receiving end, and every worker's sending end (by index). After a handoff, the old
/// process's workers hold copies of the sending ends too (see [`crate::handoff`]): what it
/// reads from the shared sockets for no connection of its own comes here.
pub(crate) struct Relay {
    rx: UnixDatagram,
    tx: Vec<UnixDatagram>,
    /// For a datagram the old process forwarded, this process's listener for each of the
    /// old one's (by the old one's listener order; `None`: this one has no such listener).
    from_old: Arc<[Option<u8>]>,
}

impl Relay {
    /// One relay per worker, each able to send to all: none for a single worker, unless an
    /// old process is to forward to it (`from_old`, after a handoff of QUIC listeners).
    pub(crate) fn for_workers(
        workers: usize,
        from_old: Option<Arc<[Option<u8>]>>,
    ) -> io::Result<Vec<Relay>> {
        if workers < 2 && from_old.is_none() {
            return Ok(Vec::new());
        }
        let from_old = from_old.unwrap_or_else(|| Arc::from([]));
        let mut rxs = Vec::with_capacity(workers);
        let mut txs = Vec::with_capacity(workers);
        for _ in 0..workers {
            let (rx, tx) = UnixDatagram::pair()?;
            rx.set_nonblocking(true)?;
            tx.set_nonblocking(true)?;
            rxs.push(rx);
            txs.push(tx);
        }
        rxs.into_iter()
            .map(|rx| {
                let tx = txs
                    .iter()
                    .map(UnixDatagram::try_clone)
                    .collect::<io::Result<_>>()?;
                Ok(Relay {
                    rx,
                    tx,
                    from_old: from_old.clone(),
                })
            })
            .collect()
    }

    /// Every worker's sending end, by index, to hand the old process in a takeover.
    pub(crate) fn senders(&self) -> io::Result<Vec<std::os::fd::OwnedFd>> {
        self.tx
            .iter()
            .map(|t| t.try_clone().map(std::os::fd::OwnedFd::from))
            .collect()
    }

    /// The receiving end, to watch for readiness.
    pub(crate) fn fd(&self) -> io::Result<std::os::fd::OwnedFd> {
        self.rx.try_clone().map(std::os::fd::OwnedFd::from)
    }
}

/// A relayed datagram's header: the listener's index; the client's address (IPv6 or
/// IPv4-mapped, and the port); flags (its ECN codepoint in the low bits with [`ECN_SET`],
/// [`FROM_V4`], [`LOCAL_V4`], [`FROM_OLD`]); whether the local address it came to is known
/// (1), and that address (as the client's).
const RELAY_HEAD: usize = 1 + 16 + 2 + 1 + 1 + 16;
const ECN_SET: u8 = 0x80;
/// The address was IPv4 (not IPv4-mapped IPv6, which a dual-stack socket reports).
const FROM_V4: u8 = 0x40;
const LOCAL_V4: u8 = 0x20;
/// An old process forwarded it during its drain: the listener index is the old one's.
const FROM_OLD: u8 = 0x10;

/// An address as IPv6 (IPv4-mapped for IPv4).
fn v6(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

/// The worker whose connection ID a packet is addressed to, where the packet names one of
/// ours: a short-header packet always does (RFC 9000 §17.3: the ID right after the first
/// byte), a version 1 Handshake packet too (§17.2.4); a client's Initial and 0-RTT packets
/// carry an ID of its own choosing, so they stay where the kernel put them.
pub(crate) fn owner(packet: &[u8], workers: usize) -> Option<usize> {
    let n = workers.min(255);
    let first = *packet.first()?;
    let id_byte = if first & 0x80 == 0 {
        *packet.get(1)?
    } else {
        let handshake = (first >> 4) & 0x3 == 2;
        if packet.get(1..5)? != [0, 0, 0, 1] || !handshake || *packet.get(5)? as usize != CID_LEN {
            return None;
        }
        *packet.get(6)?
    };
    (n > 1).then(|| usize::from(id_byte) % n)
}

/// One QUIC listener on this worker.
struct Ep {
    socket: UdpSocket,
    /// What the kernel offers the socket (GSO, GRO, ancillary data), learnt once.
    state: UdpSocketState,
    endpoint: quinn_proto::Endpoint,
    /// Worker slot of each connection, by quinn-proto's handle.
    slots: Vec<u32>,
    config: QuicConfig,
    /// The configuration for each ceiling of path MTU discovery met so far (a few: one per
    /// kind of route), made on first use.
    by_ceiling: Vec<(Ceiling, Arc<quinn_proto::ServerConfig>)>,
    /// The configuration of loopback clients, once made.
    loopback: Option<Arc<quinn_proto::ServerConfig>>,
}

impl Ep {
    /// The configuration for a client at `peer`: datagrams up to what the route to it carries.
    /// The listener's own (a 1,452-byte ceiling) when the route is unknown, or once
    /// [`CEILINGS`] others were made. A loopback client's is looked up once.
    fn config_for(&mut self, peer: SocketAddr) -> Option<Arc<quinn_proto::ServerConfig>> {
        let loopback = peer.ip().to_canonical().is_loopback();
        if loopback && let Some(c) = &self.loopback {
            return Some(c.clone());
        }
        let ceiling = path_mtu::ceiling(peer)?;
        let c = match self.by_ceiling.iter().find(|(m, _)| *m == ceiling) {
            Some((_, c)) => c.clone(),
            None if self.by_ceiling.len() >= CEILINGS => return None,
            None => {
                let c = self.config.with_ceiling(ceiling);
                self.by_ceiling.push((ceiling, c.clone()));
                c
            }
        };
        if loopback {
            self.loopback = Some(c.clone());
        }
        Some(c)
    }
}

/// The worker's QUIC side.
pub(crate) struct Quic {
    eps: Vec<Ep>,
    /// Datagrams going out.
    send: Vec<u8>,
    /// One batch's receive buffers ([`BATCH_SIZE`] of [`RECV_CHUNK`] bytes) and what the
    /// kernel said of each; a relay's one datagram.
    recv: Vec<u8>,
    meta: Vec<RecvMeta>,
    relay_buf: Vec<u8>,
    /// Datagrams read and not handed to their endpoint yet (the rest of a batch).
    queued: VecDeque<Datagram>,
    /// Handshakes in progress.
    handshakes: usize,
    /// Connections that datagrams reached this turn (visited once each, after the batch).
    pub(crate) touched: Vec<u32>,
    /// Shutting down: new connections are refused.
    draining: bool,
    /// Shutting down because a new process took the sockets (see [`crate::handoff`]): a new
    /// client's Initial read here is not refused. It goes to the new process through
    /// `forward`, or, where that process gave none, is dropped, so that its resend may reach
    /// the new process, which reads the same sockets.
    handed_over: bool,
    /// After a handoff, the new process's relays, one per its worker: a datagram read here
    /// for no connection of this process (a new client's Initial, a packet of a connection
    /// the new process holds) goes there, not to a stateless reset or the floor.
    forward: Vec<UnixDatagram>,
    /// Retries sent (a metric).
    pub(crate) retries: u64,
    /// This worker's index and the worker count (whose connection IDs are whose).
    worker: usize,
    workers: usize,
    relay: Option<Relay>,
    /// A routed datagram being composed (its header, then its bytes).
    relayed: Vec<u8>,
    /// Datagrams routed to the worker their connection ID names (a metric).
    pub(crate) routed: u64,
    /// QUIC's timers by worker slot, in ms since `epoch` (a timer that moves later keeps its
    /// entry, which fires early and is filed again; see [`Wheel`]).
    timers: Wheel<1>,
    epoch: Instant,
}

/// A datagram read from a listener's socket (or relayed), with what the kernel said of it.
#[derive(Clone)]
struct Datagram {
    ep: usize,
    from: SocketAddr,
    /// The local address it was sent to (answers leave from it).
    local: Option<IpAddr>,
    ecn: Option<EcnCodepoint>,
    data: BytesMut,
}

impl Datagram {
    /// The datagram as a relay carries it: [`RELAY_HEAD`]'s fields, then its bytes;
    /// `from_old`: forwarded by an old process (see [`FROM_OLD`]).
    fn relayed(&self, m: &mut Vec<u8>, from_old: bool) {
        m.clear();
        m.push(self.ep as u8);
        m.extend_from_slice(&v6(self.from.ip()).octets());
        m.extend_from_slice(&self.from.port().to_be_bytes());
        let mut flags = self.ecn.map_or(0, |c| c as u8 | ECN_SET);
        if self.from.is_ipv4() {
            flags |= FROM_V4;
        }
        if self.local.is_some_and(|ip| ip.is_ipv4()) {
            flags |= LOCAL_V4;
        }
        if from_old {
            flags |= FROM_OLD;
        }
        m.push(flags);
        m.push(u8::from(self.local.is_some()));
        m.extend_from_slice(&self.local.map_or(Ipv6Addr::UNSPECIFIED, v6).octets());
        m.extend_from_slice(&self.data);
    }

    /// A datagram a relay carried, and whether an old process forwarded it (`None`: too
    /// short to be one).
    fn from_relay(m: &[u8]) -> Option<(Datagram, bool)> {
        if m.len() <= RELAY_HEAD {
            return None;
        }
        let (head, body) = m.split_at(RELAY_HEAD);
        let flags = head[19];
        // The family it had (a dual-stack socket's IPv4 clients are IPv4-mapped IPv6).
        let addr = |b: &[u8], v4: bool| {
            let ip = Ipv6Addr::from(<[u8; 16]>::try_from(b).unwrap_or_default());
            match ip.to_ipv4_mapped() {
                Some(ip) if v4 => IpAddr::V4(ip),
                _ => IpAddr::V6(ip),
            }
        };
        let from = addr(&head[1..17], flags & FROM_V4 != 0);
        let d = Datagram {
            ep: usize::from(head[0]),
            from: SocketAddr::new(from, u16::from_be_bytes([head[17], head[18]])),
            ecn: (flags & ECN_SET != 0)
                .then(|| EcnCodepoint::from_bits(flags & 0x3))
                .flatten(),
            local: (head[20] == 1).then(|| addr(&head[21..37], flags & LOCAL_V4 != 0)),
            data: BytesMut::from(body),
        };
        Some((d, flags & FROM_OLD != 0))
    }
}

/// What one datagram was.
pub(crate) enum Received {
    /// Nothing for a connection (answered by the endpoint, or dropped).
    Nothing,
    /// For the connection in this slot.
    Event(u32, quinn_proto::ConnectionEvent),
    /// A new client's Initial (see [`Quic::accept`]).
    New(Box<quinn_proto::Incoming>, Instant),
}

/// A live HTTP/3 connection: QUIC's state and HTTP/3's.
pub(crate) struct H3Live {
    pub(crate) quic: quinn_proto::Connection,
    pub(crate) conn: h3::Conn<Pending>,
    ch: ConnectionHandle,
    ep: usize,
    /// Counted out of the handshakes in progress (done, failed or forgotten).
    established: bool,
    /// The handshake completed (a metric at the end).
    connected: bool,
    /// CONNECTION_CLOSE was asked for.
    closing: bool,
    /// QUIC's next timer (loss detection, pacing, acknowledgments, idle): filed in
    /// [`Quic`]'s wheel of 1 ms ticks, not the connections' wheel, whose 8 ms ticks held
    /// pacing to a fraction of the window and ACKs past the max_ack_delay we announce.
    quic_timer: Option<Instant>,
    /// When its entry in that wheel fires (ms on [`Quic`]'s clock; `u64::MAX`: none).
    armed: u64,
    /// Its worker slot (the wheel names connections by it).
    slot: u32,
    /// Already in [`Quic::touched`] this turn.
    touched: bool,
    /// The client's verified certificate (a listener that asks for one), for handlers and
    /// upstreams as over TCP; read once the handshake is done (`cert_read`).
    client_cert: Option<Arc<crate::tls::ClientCert>>,
    cert_read: bool,
}

impl H3Live {
    /// Counts the connection's end in the metrics: whether its handshake completed, and the
    /// packets it sent and declared lost (RFC 9002 §6).
    pub(crate) fn count_close(&self, c: &crate::stats::Counters) {
        let s = self.quic.stats();
        c.quic_closed(self.connected, s.path.sent_packets, s.path.lost_packets);
    }

    /// HTTP/3's deadline, for the connections' wheel (QUIC's timers are in [`Quic`]'s own).
    pub(crate) fn deadline(&self) -> u64 {
        self.conn.deadline()
    }

    /// QUIC's timer has come.
    pub(crate) fn quic_due(&self, now: Instant) -> bool {
        self.quic_timer.is_some_and(|t| t <= now)
    }

    /// The client's verified certificate, once the handshake is done (the requests it sends
    /// come after): the identity handlers and upstreams are given, as over TCP.
    pub(crate) fn client_cert(&mut self) -> Option<Arc<crate::tls::ClientCert>> {
        if !self.cert_read && !self.quic.is_handshaking() {
            self.cert_read = true;
            self.client_cert = client_cert(&self.quic);
        }
        self.client_cert.clone()
    }

    pub(crate) fn timer(&self) -> Timer {
        self.conn.timer()
    }

    pub(crate) fn release(&mut self, pool: &mut Pool) {
        self.conn.release(pool);
    }

    /// Timers that passed: QUIC's (loss detection, acknowledgments, idle) and HTTP/3's
    /// (deferred answers, bodies).
    pub(crate) fn on_timer<S: Service<Pending = Pending>>(&mut self, cx: &mut Cx, svc: &mut S) {
        let now = Instant::now();
        if self.quic_due(now) {
            self.quic.handle_timeout(now);
        }
        self.conn.on_timer(cx, svc);
    }
}

impl Quic {
    pub(crate) fn new(
        setups: Vec<QuicSetup>,
        relay: Option<Relay>,
        worker: usize,
        workers: usize,
    ) -> io::Result<Quic> {
        let reset_key = reset_key();
        let eps = setups
            .into_iter()
            .map(|s| {
                let state = UdpSocketState::new((&s.socket).into())?;
                let mut ec = EndpointConfig::new(reset_key.clone());
                // Clients may send datagrams as large as their path carries: a batch's
                // buffers hold 64 KiB each.
                ec.max_udp_payload_size(path_mtu::MAX_PAYLOAD)
                    .map_err(|e| io::Error::other(e.to_string()))?;
                let (w, n) = (worker as u8, workers.min(255) as u8);
                ec.cid_generator(move || {
                    Box::new(WorkerCids {
                        worker: w,
                        workers: n,
                    })
                });
                let endpoint = quinn_proto::Endpoint::new(
                    Arc::new(ec),
                    Some(s.config.base.clone()),
                    true,
                    None,
                );
                Ok(Ep {
                    socket: s.socket,
                    state,
                    endpoint,
                    slots: Vec::new(),
                    config: s.config,
                    by_ceiling: Vec::new(),
                    loopback: None,
                })
            })
            .collect::<io::Result<_>>()?;
        Ok(Quic {
            eps,
            send: Vec::with_capacity(GSO_SEGMENTS * 1500),
            recv: vec![0; BATCH_SIZE * RECV_CHUNK],
            meta: vec![RecvMeta::default(); BATCH_SIZE],
            relay_buf: vec![0; RELAY_HEAD + MAX_DATAGRAM],
            queued: VecDeque::new(),
            handshakes: 0,
            touched: Vec::new(),
            draining: false,
            handed_over: false,
            forward: Vec::new(),
            retries: 0,
            worker,
            workers,
            relay,
            relayed: Vec::new(),
            routed: 0,
            timers: Wheel::new(0),
            epoch: Instant::now(),
        })
    }

    /// When the next QUIC timer entry fires (perhaps early: see [`Wheel::next_due`]).
    pub(crate) fn next_timer(&self) -> Option<Instant> {
        let ms = self.timers.next_due()?;
        Some(self.epoch + Duration::from_millis(ms))
    }

    /// Whether a QUIC timer entry may fire at `now`.
    pub(crate) fn timer_due(&self, now: Instant) -> bool {
        self.timers.due(self.ms_at(now))
    }

    /// The slots whose QUIC timer entries fire at `now`, into `due` (their entries are gone:
    /// see [`Quic::fired`]).
    pub(crate) fn expire(&mut self, now: Instant, due: &mut Vec<u32>) {
        self.timers.expire(self.ms_at(now), due);
    }

    /// `live`'s entry fired at `now`: a timer that moved later is filed again (one that is
    /// due is filed anew by `drive` once the connection has run it).
    pub(crate) fn fired(&mut self, live: &mut H3Live, now: Instant) {
        live.armed = u64::MAX;
        if !live.quic_due(now) {
            self.arm(live);
        }
    }

    /// Files `live`'s QUIC timer, unless its entry fires at or before it already.
    fn arm(&mut self, live: &mut H3Live) {
        if let Some(at) = live.quic_timer {
            // Rounded up: an entry never fires before its timer.
            let d = at.saturating_duration_since(self.epoch);
            let ms = d.as_millis() as u64 + u64::from(!d.subsec_nanos().is_multiple_of(1_000_000));
            if ms < live.armed {
                live.armed = self.timers.arm(live.slot, ms);
            }
        }
    }

    /// `now` in ms on the QUIC wheel's clock, rounded down.
    fn ms_at(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.epoch).as_millis() as u64
    }

    /// The relay's receiving end, to watch (none with one worker).
    pub(crate) fn relay_fd(&self) -> io::Result<Option<std::os::fd::OwnedFd>> {
        self.relay.as_ref().map(Relay::fd).transpose()
    }

    /// The sockets, to watch for readiness (cloned descriptors).
    pub(crate) fn sockets(&self) -> io::Result<Vec<std::os::fd::OwnedFd>> {
        self.eps
            .iter()
            .map(|e| e.socket.try_clone().map(std::os::fd::OwnedFd::from))
            .collect()
    }

    /// Refuses new connections from now on. When the sockets were `handed_over`, a
    /// datagram for no connection here goes to the new process's relays (`forward`, one per
    /// its worker; the caller gives none otherwise), or is dropped where there are none.
    pub(crate) fn drain(&mut self, handed_over: bool, forward: Vec<UnixDatagram>) {
        self.draining = true;
        self.handed_over = handed_over;
        self.forward = forward;
    }

    /// The next datagram from listener `ep`'s socket, handed to its endpoint, with the
    /// listener it came to: `None` when the socket has none, or `budget` (datagrams still to
    /// read this turn) is spent and the batch in hand is handled. One for a connection
    /// another worker owns goes there (see [`owner`]); answers the endpoint gives itself
    /// (version negotiation, stateless resets) go out here.
    pub(crate) fn receive(&mut self, ep: usize, budget: &mut usize) -> Option<(usize, Received)> {
        loop {
            let Some(d) = self.queued.pop_front() else {
                if *budget == 0 {
                    return None;
                }
                let n = self.read_batch(ep);
                if n == 0 {
                    return None;
                }
                *budget = budget.saturating_sub(n);
                continue;
            };
            if let Some(relay) = &self.relay
                && let Some(w) = owner(&d.data, self.workers)
                && w != self.worker
            {
                d.relayed(&mut self.relayed, false);
                // A full relay drops it, as a full socket buffer would: QUIC sends it again.
                let _ = relay.tx[w].send(&self.relayed);
                self.routed += 1;
                continue;
            }
            return Some((d.ep, self.handle(d)));
        }
    }

    /// Reads one batch from listener `ep`'s socket into [`Quic::queued`], each GRO train cut
    /// into its datagrams: how many came (0: none waits).
    fn read_batch(&mut self, ep: usize) -> usize {
        let e = &self.eps[ep];
        let mut chunks = self.recv.chunks_mut(RECV_CHUNK);
        let mut bufs: [IoSliceMut<'_>; BATCH_SIZE] =
            std::array::from_fn(|_| IoSliceMut::new(chunks.next().unwrap_or(&mut [])));
        let mut errors = 0;
        let msgs = loop {
            match e.state.recv((&e.socket).into(), &mut bufs, &mut self.meta) {
                Ok(n) => break n,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return 0,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                // ICMP errors surface here on some kernels: not this socket's failure, and
                // each is reported once.
                Err(err) => {
                    tracing::debug!(error = %err, "QUIC receive");
                    errors += 1;
                    if errors > 8 {
                        return 0;
                    }
                }
            }
        };
        let mut count = 0;
        for (i, m) in self.meta[..msgs].iter().enumerate() {
            let at = i * RECV_CHUNK;
            let mut data = BytesMut::from(&self.recv[at..at + m.len.min(RECV_CHUNK)]);
            let stride = if m.stride == 0 { data.len() } else { m.stride };
            let ecn = m.ecn.and_then(|c| EcnCodepoint::from_bits(c as u8));
            while !data.is_empty() {
                let one = data.split_to(stride.min(data.len()));
                self.queued.push_back(Datagram {
                    ep,
                    from: m.addr,
                    local: m.dst_ip,
                    ecn,
                    data: one,
                });
                count += 1;
            }
        }
        count
    }

    /// Reads one datagram another worker routed here and hands it to its endpoint: `None`
    /// when there is none, or `budget` is spent.
    pub(crate) fn receive_relayed(&mut self, budget: &mut usize) -> Option<(usize, Received)> {
        let relay = self.relay.as_ref()?;
        loop {
            if *budget == 0 {
                return None;
            }
            let n = match relay.rx.recv(&mut self.relay_buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return None,
            };
            *budget -= 1;
            let Some((mut d, old)) = Datagram::from_relay(&self.relay_buf[..n]) else {
                continue;
            };
            if old {
                match relay.from_old.get(d.ep) {
                    Some(&Some(ep)) => d.ep = usize::from(ep),
                    _ => continue,
                }
            }
            if d.ep >= self.eps.len() {
                continue;
            }
            return Some((d.ep, self.handle(d)));
        }
    }

    /// Hands datagram `d` to its listener's endpoint; after a handoff, one for no
    /// connection here goes to the new process instead ([`Quic::forward_new`]).
    fn handle(&mut self, d: Datagram) -> Received {
        let now = Instant::now();
        self.send.clear();
        // Only while draining after a handoff: the endpoint consumes the bytes.
        let copy = (!self.forward.is_empty()).then(|| d.clone());
        let e = &mut self.eps[d.ep];
        let event = e
            .endpoint
            .handle(now, d.from, d.local, d.ecn, d.data, &mut self.send);
        if let Some(copy) = copy
            && !matches!(event, Some(DatagramEvent::ConnectionEvent(..)))
        {
            if let Some(DatagramEvent::NewConnection(incoming)) = event {
                e.endpoint.ignore(incoming);
            }
            self.forward_new(&copy);
            return Received::Nothing;
        }
        match event {
            None => Received::Nothing,
            Some(DatagramEvent::ConnectionEvent(ch, ev)) => match e.slots.get(ch.0) {
                Some(&slot) if slot != u32::MAX => Received::Event(slot, ev),
                _ => Received::Nothing,
            },
            Some(DatagramEvent::Response(t)) => {
                let buf = std::mem::take(&mut self.send);
                self.transmit(d.ep, &buf, &t);
                self.send = buf;
                Received::Nothing
            }
            Some(DatagramEvent::NewConnection(incoming)) => Received::New(Box::new(incoming), now),
        }
    }

    /// A client's first Initial: refused while draining, sent a Retry past
    /// [`RETRY_ABOVE`] handshakes unless it already proved its address, else accepted (the
    /// caller gives it a slot and names it with [`Quic::bind`]).
    pub(crate) fn accept(
        &mut self,
        ep: usize,
        incoming: quinn_proto::Incoming,
        now: Instant,
    ) -> Option<(H3Live, SocketAddr)> {
        let e = &mut self.eps[ep];
        self.send.clear();
        if self.draining && self.handed_over {
            e.endpoint.ignore(incoming);
            return None;
        }
        if self.draining {
            let t = e.endpoint.refuse(incoming, &mut self.send);
            let buf = std::mem::take(&mut self.send);
            self.transmit(ep, &buf, &t);
            self.send = buf;
            return None;
        }
        if self.handshakes >= RETRY_ABOVE && !incoming.remote_address_validated() {
            match e.endpoint.retry(incoming, &mut self.send) {
                Ok(t) => {
                    self.retries += 1;
                    let buf = std::mem::take(&mut self.send);
                    self.transmit(ep, &buf, &t);
                    self.send = buf;
                }
                Err(err) => e.endpoint.ignore(err.into_incoming()),
            }
            return None;
        }
        let peer = incoming.remote_address();
        let config = e.config_for(peer);
        match e.endpoint.accept(incoming, now, &mut self.send, config) {
            Ok((ch, quic)) => {
                self.handshakes += 1;
                Some((
                    H3Live {
                        quic,
                        conn: h3::Conn::new(),
                        ch,
                        ep,
                        established: false,
                        connected: false,
                        closing: false,
                        quic_timer: None,
                        armed: u64::MAX,
                        slot: u32::MAX,
                        touched: false,
                        client_cert: None,
                        cert_read: false,
                    },
                    peer,
                ))
            }
            Err(err) => {
                if let Some(t) = err.response {
                    let buf = std::mem::take(&mut self.send);
                    self.transmit(ep, &buf, &t);
                    self.send = buf;
                }
                None
            }
        }
    }

    /// Sends `d`, read here for no connection of this process, to the new process that took
    /// the sockets: to the worker its connection ID names, else to the one that reads the
    /// same socket there (the new process takes the group's members in order, one per
    /// worker), else to one by the client's port. A full relay drops it, as a full socket
    /// buffer would: QUIC sends it again.
    fn forward_new(&mut self, d: &Datagram) {
        let n = self.forward.len();
        let w = owner(&d.data, n).unwrap_or(if self.worker < n {
            self.worker
        } else {
            usize::from(d.from.port()) % n
        });
        d.relayed(&mut self.relayed, true);
        let _ = self.forward[w].send(&self.relayed);
    }

    /// Connection `live` lives in worker slot `slot` from now on.
    pub(crate) fn bind(&mut self, live: &mut H3Live, slot: u32) {
        let e = &mut self.eps[live.ep];
        if e.slots.len() <= live.ch.0 {
            e.slots.resize(live.ch.0 + 1, u32::MAX);
        }
        e.slots[live.ch.0] = slot;
        live.slot = slot;
        self.touch(live, slot);
    }

    /// Notes that `live` (in `slot`) has something to move this turn.
    pub(crate) fn touch(&mut self, live: &mut H3Live, slot: u32) {
        if !live.touched {
            live.touched = true;
            self.touched.push(slot);
        }
    }

    /// Moves everything for one connection: its QUIC events into HTTP/3 (and the
    /// application), HTTP/3's output into its streams, the endpoint's bookkeeping, and its
    /// packets out. `false` once the connection is gone (drained).
    pub(crate) fn drive<S: Service<Pending = Pending>>(
        &mut self,
        live: &mut H3Live,
        head: &mut RequestHead,
        cx: &mut Cx,
        svc: &mut S,
    ) -> bool {
        live.touched = false;
        let now = Instant::now();
        while let Some(ev) = live.quic.poll() {
            match ev {
                Event::Connected => {
                    live.connected = true;
                    if !live.established {
                        live.established = true;
                        self.handshakes = self.handshakes.saturating_sub(1);
                    }
                }
                Event::ConnectionLost { reason } => {
                    tracing::debug!(%reason, "QUIC connection lost");
                    if !live.established {
                        live.established = true;
                        self.handshakes = self.handshakes.saturating_sub(1);
                    }
                }
                Event::Stream(StreamEvent::Opened { dir }) => {
                    while let Some(id) = live.quic.streams().accept(dir) {
                        read(live, u64::from(id), head, cx, svc);
                    }
                }
                Event::Stream(StreamEvent::Readable { id }) => {
                    read(live, u64::from(id), head, cx, svc)
                }
                Event::Stream(StreamEvent::Stopped { id, .. }) => {
                    live.conn.stopped(u64::from(id), cx, svc)
                }
                // Writes are retried on every visit; the rest needs nothing.
                Event::Stream(_)
                | Event::HandshakeDataReady
                | Event::DatagramReceived
                | Event::DatagramsUnblocked => {}
            }
        }
        while let Some(id) = live.conn.resumed() {
            read(live, id, head, cx, svc);
        }
        if live.established {
            live.conn.flush(
                cx,
                &mut Wire {
                    quic: &mut live.quic,
                    now,
                },
            );
        }
        if live.conn.is_done() && !live.closing {
            live.closing = true;
            // An error was closed with its code by `flush`; a finished GOAWAY closes cleanly.
            if !live.quic.is_closed() {
                live.quic.close(
                    now,
                    VarInt::from_u32(Code::NoError.value() as u32),
                    Bytes::new(),
                );
            }
        }
        let e = &mut self.eps[live.ep];
        while let Some(ev) = live.quic.poll_endpoint_events() {
            if let Some(back) = e.endpoint.handle_event(live.ch, ev) {
                live.quic.handle_event(back);
            }
        }
        // A GSO batch is one UDP packet to the kernel: at most 64 KiB in all.
        let fit = (GSO_BYTES / usize::from(live.quic.current_mtu())).max(1);
        let segments = self.eps[live.ep]
            .state
            .max_gso_segments()
            .min(GSO_SEGMENTS)
            .min(fit);
        loop {
            self.send.clear();
            let Some(t) = live.quic.poll_transmit(now, segments, &mut self.send) else {
                break;
            };
            let buf = std::mem::take(&mut self.send);
            self.transmit(live.ep, &buf, &t);
            self.send = buf;
        }
        live.quic_timer = live.quic.poll_timeout();
        self.arm(live);
        if live.quic.is_drained() {
            self.forget(live);
            return false;
        }
        true
    }

    /// The connection's slot is freed: the endpoint forgets its handle (and, if it was not
    /// drained yet, its connection IDs).
    pub(crate) fn forget(&mut self, live: &mut H3Live) {
        if live.armed != u64::MAX {
            live.armed = u64::MAX;
            self.timers.cancel(live.slot);
        }
        let e = &mut self.eps[live.ep];
        if let Some(s) = e.slots.get_mut(live.ch.0) {
            if *s == u32::MAX {
                return;
            }
            *s = u32::MAX;
        }
        if !live.established {
            live.established = true;
            self.handshakes = self.handshakes.saturating_sub(1);
        }
        if !live.quic.is_drained() {
            e.endpoint
                .handle_event(live.ch, quinn_proto::EndpointEvent::drained());
        }
    }

    /// Sends one transmit: a datagram, or several of `segment_size` in one `sendmsg` with
    /// UDP GSO, from the local address its connection was reached at. A full socket buffer
    /// drops them, and so does an error: QUIC's loss recovery sends them again. Where GSO was
    /// refused (quinn-udp then sends no more GSO batches), the batch goes out one by one.
    fn transmit(&mut self, ep: usize, buf: &[u8], t: &quinn_proto::Transmit) {
        let e = &self.eps[ep];
        let mut out = quinn_udp::Transmit {
            destination: t.destination,
            ecn: t
                .ecn
                .and_then(|c| quinn_udp::EcnCodepoint::from_bits(c as u8)),
            contents: &buf[..t.size],
            segment_size: t.segment_size,
            src_ip: t.src_ip,
        };
        match e.state.try_send((&e.socket).into(), &out) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
            Err(err) => {
                tracing::debug!(error = %err, "QUIC send");
                if let Some(seg) = t.segment_size.filter(|&s| s < t.size)
                    && e.state.max_gso_segments() == 1
                {
                    out.segment_size = None;
                    for d in buf[..t.size].chunks(seg) {
                        out.contents = d;
                        let _ = e.state.try_send((&e.socket).into(), &out);
                    }
                }
            }
        }
    }
}

/// One key for stateless reset tokens, made per process: every worker's endpoint signs with
/// it, so any of them can reset a connection another issued IDs for.
fn reset_key() -> Arc<dyn quinn_proto::crypto::HmacKey> {
    use std::sync::OnceLock;
    static KEY: OnceLock<Arc<aws_lc_rs::hmac::Key>> = OnceLock::new();
    KEY.get_or_init(|| {
        let mut secret = [0u8; 32];
        let _ = aws_lc_rs::rand::fill(&mut secret);
        Arc::new(aws_lc_rs::hmac::Key::new(
            aws_lc_rs::hmac::HMAC_SHA256,
            &secret,
        ))
    })
    .clone()
}

/// The identity in the certificate the client presented, verified by the listener's
/// client CAs during the handshake (none asked for, or none given: `None`).
fn client_cert(quic: &quinn_proto::Connection) -> Option<Arc<crate::tls::ClientCert>> {
    let chain = quic
        .crypto_session()
        .peer_identity()?
        .downcast::<Vec<rustls::pki_types::CertificateDer<'static>>>()
        .ok()?;
    crate::tls::ClientCert::from_der(chain.first()?).map(Arc::new)
}

/// Reads what stream `id` has (all of it: its flow-control window bounds it) and hands it to
/// HTTP/3, with its end or its reset.
fn read<S: Service<Pending = Pending>>(
    live: &mut H3Live,
    id: u64,
    head: &mut RequestHead,
    cx: &mut Cx,
    svc: &mut S,
) {
    let sid = stream_id(id);
    if !live.conn.reading(id) {
        // Its relayed body waits for room upstream: what came stays in QUIC's buffers (no
        // credit is given back for it), but a reset still ends the request.
        if let Ok(Some(_)) = live.quic.recv_stream(sid).received_reset() {
            live.conn.reset(id, cx, svc);
        }
        return;
    }
    let mut stream = live.quic.recv_stream(sid);
    let Ok(mut chunks) = stream.read(true) else {
        return;
    };
    let mut first: Option<Bytes> = None;
    let mut more: Vec<u8> = Vec::new();
    let mut fin = false;
    let mut reset = false;
    loop {
        match chunks.next(usize::MAX) {
            Ok(Some(c)) => match &first {
                None => first = Some(c.bytes),
                Some(f) => {
                    if more.is_empty() {
                        more.extend_from_slice(f);
                    }
                    more.extend_from_slice(&c.bytes);
                }
            },
            Ok(None) => {
                fin = true;
                break;
            }
            Err(ReadError::Blocked) => break,
            Err(ReadError::Reset(_)) => {
                reset = true;
                break;
            }
        }
    }
    let _ = chunks.finalize();
    let data: &[u8] = if !more.is_empty() {
        &more
    } else {
        first.as_deref().unwrap_or(&[])
    };
    if !data.is_empty() || fin {
        live.conn.recv(id, data, fin, head, cx, svc);
    }
    if reset {
        live.conn.reset(id, cx, svc);
    }
}

/// quinn-proto's name for the stream whose number is `id`.
fn stream_id(id: u64) -> StreamId {
    let side = if id & 1 == 0 {
        Side::Client
    } else {
        Side::Server
    };
    let dir = if id & 2 == 0 { Dir::Bi } else { Dir::Uni };
    StreamId::new(side, dir, id >> 2)
}

/// A connection's streams as HTTP/3 writes to them.
struct Wire<'a> {
    quic: &'a mut quinn_proto::Connection,
    now: Instant,
}

fn code(c: Code) -> VarInt {
    VarInt::from_u32(c.value() as u32)
}

impl h3::Wire for Wire<'_> {
    fn write(&mut self, id: u64, data: &[u8]) -> usize {
        match self.quic.send_stream(stream_id(id)).write(data) {
            Ok(n) => n,
            Err(quinn_proto::WriteError::Blocked) => 0,
            // Stopped by the peer, or gone: what was meant for it is dropped.
            Err(_) => data.len(),
        }
    }

    fn write_owned(&mut self, id: u64, data: &mut Bytes) {
        // quinn-proto keeps what it takes by reference (a partial take leaves the rest).
        match self
            .quic
            .send_stream(stream_id(id))
            .write_chunks(std::slice::from_mut(data))
        {
            Ok(_) | Err(quinn_proto::WriteError::Blocked) => {}
            Err(_) => data.clear(),
        }
    }

    fn finish(&mut self, id: u64) {
        let _ = self.quic.send_stream(stream_id(id)).finish();
    }

    fn reset(&mut self, id: u64, c: Code) {
        let _ = self.quic.send_stream(stream_id(id)).reset(code(c));
    }

    fn stop(&mut self, id: u64, c: Code) {
        let _ = self.quic.recv_stream(stream_id(id)).stop(code(c));
    }

    fn open_uni(&mut self) -> Option<u64> {
        self.quic.streams().open(Dir::Uni).map(u64::from)
    }

    fn close(&mut self, c: Code) {
        self.quic.close(self.now, code(c), Bytes::new());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packets as (bytes, workers, owner): short headers name the worker in their
    /// connection ID's first byte; of long headers only a version 1 Handshake packet with
    /// one of our IDs does; an Initial, 0-RTT, another version or a foreign ID length never
    /// moves; one worker routes nothing; truncated packets are not read past their end.
    #[test]
    fn owner_reads_the_worker_from_our_connection_ids_only() {
        let id = [7u8, 1, 2, 3, 4, 5, 6, 8];
        let short = [&[0x40u8][..], &id, b"payload"].concat();
        let long = |first: u8, version: [u8; 4], len: u8| {
            [&[first][..], &version, &[len], &id, &[8], &[9u8; 8], b"x"].concat()
        };
        #[rustfmt::skip]
        let rows: &[(Vec<u8>, usize, Option<usize>)] = &[
            (short.clone(), 2, Some(1)),
            (short.clone(), 4, Some(3)),
            (short.clone(), 7, Some(0)),
            (short.clone(), 1, None),
            (long(0xe0, [0, 0, 0, 1], 8), 2, Some(1)), // Handshake
            (long(0xc0, [0, 0, 0, 1], 8), 2, None),    // Initial: the client's own ID
            (long(0xd0, [0, 0, 0, 1], 8), 2, None),    // 0-RTT
            (long(0xf0, [0, 0, 0, 1], 8), 2, None),    // Retry (never from a client)
            (long(0xe0, [0x6b, 0x33, 0x43, 0xcf], 8), 2, None), // QUIC v2
            (long(0xe0, [0, 0, 0, 1], 20), 2, None),   // not an ID of ours
            (vec![0x40], 2, None),
            (vec![0xe0, 0, 0, 1], 2, None),
            (vec![], 2, None),
        ];
        for (packet, workers, want) in rows {
            assert_eq!(owner(packet, *workers), *want, "{packet:02x?} of {workers}");
        }
    }

    /// A relayed datagram arrives as it was read: listener, client address (IPv4 and IPv6),
    /// ECN marks, the local address (or none) and the bytes; a relay message too short to
    /// carry a datagram is none.
    #[test]
    fn relayed_datagrams_keep_what_the_kernel_said() {
        let addr = |s: &str| s.parse::<SocketAddr>().unwrap();
        #[rustfmt::skip]
        let rows = [
            (0, addr("192.0.2.7:4433"), None, Some("127.0.0.1"), &b"\x40abc"[..]),
            (3, addr("[2001:db8::1]:61000"), Some(EcnCodepoint::Ce), Some("::1"), b"x"),
            (1, addr("127.0.0.1:1"), Some(EcnCodepoint::Ect0), None, b"short"),
            (2, addr("[::1]:443"), Some(EcnCodepoint::Ect1), Some("10.0.0.1"), b"pp"),
            // A dual-stack socket's IPv4 client stays IPv4-mapped.
            (0, addr("[::ffff:192.0.2.9]:5"), None, Some("::ffff:127.0.0.1"), b"m"),
        ];
        let mut m = Vec::new();
        for ((ep, from, ecn, local, data), old) in
            rows.into_iter().zip([false, true].into_iter().cycle())
        {
            let local = local.map(|l| l.parse::<IpAddr>().unwrap());
            let d = Datagram {
                ep,
                from,
                local,
                ecn,
                data: BytesMut::from(data),
            };
            d.relayed(&mut m, old);
            let (back, back_old) = Datagram::from_relay(&m).unwrap();
            assert_eq!(
                (
                    back.ep,
                    back.from,
                    back.local,
                    back.ecn,
                    &back.data[..],
                    back_old
                ),
                (ep, from, local, ecn, data, old)
            );
        }
        assert!(Datagram::from_relay(&m[..RELAY_HEAD]).is_none());
        assert!(Datagram::from_relay(&[]).is_none());
    }

    /// Every ID a worker issues names that worker, for any worker count.
    #[test]
    fn issued_ids_name_their_worker() {
        for workers in [2u8, 3, 16, 255] {
            for worker in [0, 1, workers - 1] {
                let mut g = WorkerCids { worker, workers };
                for _ in 0..64 {
                    let cid = g.generate_cid();
                    let packet = [&[0x41u8][..], &cid[..], b"pp"].concat();
                    assert_eq!(
                        owner(&packet, usize::from(workers)),
                        Some(usize::from(worker))
                    );
                }
            }
        }
    }

    /// A relay carries a datagram and its client's address (IPv4 and IPv6) to the worker
    /// it is sent to, and to no other.
    #[test]
    fn relays_reach_the_named_worker() {
        let relays = Relay::for_workers(3, None).unwrap();
        assert!(Relay::for_workers(1, None).unwrap().is_empty());
        // One worker has a relay when an old process is to forward to it.
        assert_eq!(
            Relay::for_workers(1, Some(Arc::from([Some(0)])))
                .unwrap()
                .len(),
            1
        );
        relays[0].tx[2].send(b"to two").unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(relays[2].rx.recv(&mut buf).unwrap(), 6);
        assert_eq!(&buf[..6], b"to two");
        for r in &relays {
            assert_eq!(
                r.rx.recv(&mut buf).map_err(|e| e.kind()),
                Err(io::ErrorKind::WouldBlock)
            );
        }
    }
}
