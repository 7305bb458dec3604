//! The worker's HTTP/3 driver: the sockets and timers of `--http3` connections, each fed to
//! its `h3::Client` (quinn-proto underneath) from the worker's own epoll loop; no runtime,
//! no other thread. Each connection has its own connected UDP socket: its epoll token is the
//! connection's index as for TCP, the kernel picks its datagrams out by address (so its
//! endpoint routes nothing), an ICMP refusal reads as ECONNREFUSED as a TCP reset would, and
//! a server spreading connections over workers by address sees one per connection.
//! Invariant: after anything goes into a client (datagrams, a timer, new streams) its events
//! are taken and its datagrams sent (`drive`), and its next deadline is in `quic_timers`
//! (`arm`), whose stale entries are skipped and which is rebuilt when they pile up.
//! A datagram the socket does not take (EAGAIN) is dropped like one lost on the wire: QUIC's
//! loss recovery sends its frames again. Datagrams are read with quinn-udp, with UDP GRO where
//! the kernel has it: a burst of the server's datagrams (a GSO batch) comes up as one train,
//! cut here by its segment size, rather than segmented again in the kernel for this socket.
#![forbid(unsafe_code)]

use std::cmp::Reverse;
use std::io::IoSliceMut;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use rustix::event::epoll;
use rustix::io::Errno;
use rustix::net::{self, AddressFamily, SendFlags, SocketFlags, SocketType};

use super::{Class, Phase, Sent, Worker};
use crate::config::Http3;
use crate::h3::{self, H3Error};
use crate::tls::SetupFailure;

/// Reads (a datagram, or a GRO train of them) per readiness event before the loop moves on
/// (level-triggered epoll comes back for the rest).
pub const DATAGRAMS_PER_READ: usize = 64;
/// The receive buffer asked for each socket (the kernel caps it at `net.core.rmem_max`):
/// a connection's responses arrive in bursts of up to a congestion window.
pub const SOCKET_RECV_BUFFER: usize = 1 << 20;

/// One `--http3` connection's protocol state, and its deadline as `quic_timers` has it.
#[derive(Debug)]
pub(super) struct QuicConn {
    pub(super) client: h3::Client<Sent>,
    /// The deadline (ns after `base`) last pushed to `quic_timers` for this connection.
    armed: Option<u64>,
    /// What the kernel offers the socket (GRO), learnt when it opened.
    udp: quinn_udp::UdpSocketState,
}

impl Worker<'_> {
    fn instant(&self, ns: u64) -> Instant {
        self.base + Duration::from_nanos(ns)
    }

    fn http3(&self) -> &Http3 {
        self.cfg.http3.as_ref().expect("an HTTP/3 run")
    }

    /// Starts conn `i`'s QUIC handshake on a new socket: its first datagrams go now.
    pub(super) fn open_quic(&mut self, i: usize, now: u64) {
        let addr = self.cfg.target.addr;
        let family = if addr.is_ipv4() {
            AddressFamily::INET
        } else {
            AddressFamily::INET6
        };
        self.stats.connects += 1;
        let attempt = net::socket_with(
            family,
            SocketType::DGRAM,
            SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
            None,
        )
        .and_then(|fd| {
            // Best effort: a smaller buffer only drops more under bursts.
            let _ = net::sockopt::set_socket_recv_buffer_size(&fd, SOCKET_RECV_BUFFER);
            net::connect(&fd, &addr)?;
            let udp = quinn_udp::UdpSocketState::new((&fd).into())
                .map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::INVAL))?;
            epoll::add(
                &self.epoll,
                &fd,
                epoll::EventData::new_u64(i as u64),
                epoll::EventFlags::IN,
            )?;
            Ok((fd, udp))
        });
        let (fd, udp) = match attempt {
            Ok(fd) => fd,
            Err(e) => return self.connect_failed(i, e),
        };
        let h = self.http3();
        let client = match h3::Client::connect(&h.quic, self.instant(now), addr, h.streams) {
            Ok(c) => c,
            Err(e) => return self.setup_failed(i, SetupFailure::Http3(H3Error::Connect(e))),
        };
        let c = &mut self.conns[i];
        c.sock = Some(fd);
        c.h3 = Some(Box::new(QuicConn {
            client,
            armed: None,
            udp,
        }));
        c.phase = Phase::Handshaking { since_ns: now };
        self.flush_quic(i, now);
    }

    /// Closes conn `i`'s QUIC connection, if any, telling the server (H3_NO_ERROR) so it
    /// frees its state at once; best effort, before the socket goes.
    pub(super) fn close_quic(&mut self, i: usize) {
        if self.conns[i].h3.is_none() {
            return;
        }
        let inst = self.instant(self.now());
        let c = &mut self.conns[i];
        let Some(mut q) = c.h3.take() else {
            return;
        };
        let Some(fd) = c.sock.as_ref() else {
            return;
        };
        q.client.close(inst);
        // The close is one datagram; the bound only guards against a surprise.
        for _ in 0..4 {
            let Some(t) = q.client.transmit(inst, &mut self.tx) else {
                break;
            };
            let seg = t.segment_size.unwrap_or(t.size);
            for d in self.tx[..t.size].chunks(seg) {
                let _ = net::send(fd, d, SendFlags::empty());
            }
        }
    }

    /// Readiness on conn `i`'s socket: every datagram there into its client, then `drive`.
    pub(super) fn on_event_quic(&mut self, i: usize, _flags: epoll::EventFlags) {
        let inst = self.instant(self.now());
        let from = self.cfg.target.addr;
        let c = &mut self.conns[i];
        let (Some(fd), Some(q)) = (c.sock.as_ref(), c.h3.as_deref_mut()) else {
            return;
        };
        let mut failed = None;
        let mut meta = [quinn_udp::RecvMeta::default()];
        for _ in 0..DATAGRAMS_PER_READ {
            let mut bufs = [IoSliceMut::new(&mut self.buf[..])];
            match q.udp.recv(fd.into(), &mut bufs, &mut meta) {
                Ok(_) => {
                    let m = &meta[0];
                    let train = &self.buf[..m.len.min(self.buf.len())];
                    let stride = if m.stride == 0 { train.len() } else { m.stride };
                    for d in train.chunks(stride.max(1)) {
                        q.client.recv(inst, from, d, &mut self.scratch);
                    }
                }
                Err(e) => match Errno::from_io_error(&e) {
                    Some(Errno::AGAIN) => break,
                    Some(Errno::INTR) => {}
                    e => {
                        failed = Some(e.unwrap_or(Errno::IO));
                        break;
                    }
                },
            }
        }
        // Responses are timed from when their datagrams were read.
        let now = self.now();
        if let Some(e) = failed {
            return self.quic_io_failed(i, e, now);
        }
        self.drive(i, now);
    }

    /// Takes conn `i`'s events (responses, the handshake's end, a lost connection), tops its
    /// streams up, and sends what it has to send.
    fn drive(&mut self, i: usize, now: u64) {
        let inst = self.instant(now);
        let cfg = self.cfg;
        let req = &cfg.http3.as_ref().expect("an HTTP/3 run").requests[self.conns[i].template];
        let mut events = std::mem::take(&mut self.h3_events);
        let Some(q) = self.conns[i].h3.as_deref_mut() else {
            return;
        };
        let polled = q.client.poll(inst, req, &mut events);
        self.stats.bytes_read += q.client.take_bytes_read();
        let connected = q.client.is_connected();
        for ev in events.drain(..) {
            match ev {
                h3::Event::Response { tag, status, .. } => self.record(status, tag, now),
                // A reset or refused stream is lost like a request on a lost connection:
                // counted, and the closed loop sends another.
                h3::Event::Reset { .. } | h3::Event::Refused { .. } => {
                    self.stats.errors.reset += 1;
                    self.stats.failed += 1;
                    self.resolved += 1;
                }
            }
        }
        self.h3_events = events;
        if let Err(e) = polled {
            // Send the CONNECTION_CLOSE the client wrote, if any, then give up on it.
            if self.flush_quic(i, now) {
                self.quic_failed(i, e, now);
            }
            return;
        }
        if let Phase::Handshaking { since_ns } = self.conns[i].phase
            && connected
        {
            self.conns[i].phase = Phase::Open;
            self.failures_in_row = 0;
            let t = &mut self.stats.tls;
            t.handshakes += 1;
            t.setup_ns += now.saturating_sub(since_ns);
        }
        self.progressed_quic(i, now);
    }

    /// After responses arrived or the connection opened: reconnect (when `--reconnect` is
    /// due or a GOAWAY came, once idle), top the streams up or queue for the rate; then send.
    pub(super) fn progressed_quic(&mut self, i: usize, now: u64) {
        if self.conns[i].phase == Phase::Open {
            self.after_progress_quic(i, now);
        }
        self.flush_quic(i, now);
    }

    fn after_progress_quic(&mut self, i: usize, now: u64) {
        let budget = self.budget_left();
        let c = &mut self.conns[i];
        let Some(q) = c.h3.as_deref() else {
            return;
        };
        let reconnect_due = self.cfg.reconnect.is_some_and(|n| c.sent_here >= n);
        if reconnect_due || q.client.spent() {
            if q.client.is_idle() {
                self.reopen(i, now);
            }
            return;
        }
        let room = q.client.room();
        if self.schedule.is_some() {
            if !c.queued && room > 0 {
                c.queued = true;
                self.ready.push_back(i);
            }
            return;
        }
        let mut k = room as u64;
        if let Some(n) = self.cfg.reconnect {
            k = k.min(n - c.sent_here);
        }
        self.open_quic_streams(i, k.min(budget) as usize, now, now);
    }

    /// Opens up to `k` request streams on conn `i` (not sent until `flush_quic`). Returns
    /// how many opened: fewer when the server's stream limit is reached.
    pub(super) fn open_quic_streams(
        &mut self,
        i: usize,
        k: usize,
        intended_ns: u64,
        now: u64,
    ) -> usize {
        let cfg = self.cfg;
        let c = &mut self.conns[i];
        let req = &cfg.http3.as_ref().expect("an HTTP/3 run").requests[c.template];
        let Some(q) = c.h3.as_deref_mut() else {
            return 0;
        };
        let sent = Sent {
            sent_ns: now,
            intended_ns,
        };
        let mut n = 0;
        while n < k && q.client.open(req, sent) {
            n += 1;
        }
        c.sent_here += n as u64;
        self.issued += n as u64;
        n
    }

    /// Sends what conn `i`'s client has to send, then arms its timer. Returns false if the
    /// connection failed (or has no socket).
    pub(super) fn flush_quic(&mut self, i: usize, now: u64) -> bool {
        let inst = self.instant(now);
        let c = &mut self.conns[i];
        let (Some(fd), Some(q)) = (c.sock.as_ref(), c.h3.as_deref_mut()) else {
            return false;
        };
        let mut failed = None;
        'out: while let Some(t) = q.client.transmit(inst, &mut self.tx) {
            let seg = t.segment_size.unwrap_or(t.size);
            for d in self.tx[..t.size].chunks(seg) {
                match net::send(fd, d, SendFlags::empty()) {
                    // Dropped like a datagram lost on the wire; QUIC recovers it.
                    Ok(_) | Err(Errno::AGAIN | Errno::INTR | Errno::NOBUFS) => {}
                    Err(e) => {
                        failed = Some(e);
                        break 'out;
                    }
                }
            }
        }
        if let Some(e) = failed {
            self.quic_io_failed(i, e, now);
            return false;
        }
        self.arm(i);
        true
    }

    /// A socket call failed (an ICMP refusal shows here as ECONNREFUSED).
    fn quic_io_failed(&mut self, i: usize, e: Errno, now: u64) {
        match self.conns[i].phase {
            Phase::Open => self.fail(i, Class::Read, now),
            _ => self.connect_failed(i, e),
        }
    }

    /// The connection ended: during the handshake a failed setup; after it, like a closed
    /// TCP connection (reopened at once if nothing was in flight and the close was clean).
    fn quic_failed(&mut self, i: usize, e: H3Error, now: u64) {
        if self.conns[i].phase != Phase::Open {
            return self.setup_failed(i, SetupFailure::Http3(e));
        }
        if e.is_graceful() && self.conns[i].in_flight() == 0 {
            return self.reopen(i, now);
        }
        let class = match e {
            H3Error::Protocol(_) => Class::Malformed,
            H3Error::Lost(quinn_proto::ConnectionError::TimedOut) => Class::Timeout,
            _ => Class::Read,
        };
        self.fail(i, class, now);
    }

    /// Puts conn `i`'s next deadline in `quic_timers` if it moved.
    fn arm(&mut self, i: usize) {
        let base = self.base;
        let Some(q) = self.conns[i].h3.as_deref_mut() else {
            return;
        };
        let at = q
            .client
            .poll_timeout()
            .map(|t| t.saturating_duration_since(base).as_nanos() as u64);
        if at == q.armed {
            return;
        }
        q.armed = at;
        if let Some(at) = at {
            self.quic_timers.push(Reverse((at, i)));
        }
        // Each re-arm leaves a stale entry behind: rebuild before they outnumber the live.
        if self.quic_timers.len() > 2 * self.conns.len() + 64 {
            self.quic_timers = self
                .conns
                .iter()
                .enumerate()
                .filter_map(|(i, c)| Some(Reverse((c.h3.as_deref()?.armed?, i))))
                .collect();
        }
    }

    /// The earliest live QUIC deadline (stale entries are dropped on the way).
    pub(super) fn next_quic_timer(&mut self) -> Option<u64> {
        while let Some(&Reverse((at, i))) = self.quic_timers.peek() {
            if self.conns[i].h3.as_deref().and_then(|q| q.armed) == Some(at) {
                return Some(at);
            }
            self.quic_timers.pop();
        }
        None
    }

    /// Fires every QUIC timer due by `now`.
    pub(super) fn fire_quic_timers(&mut self, now: u64) {
        let mut due = std::mem::take(&mut self.quic_due);
        while let Some(at) = self.next_quic_timer() {
            if at > now {
                break;
            }
            let Reverse((_, i)) = self.quic_timers.pop().expect("peeked");
            due.push(i);
        }
        let inst = self.instant(now);
        for &i in &due {
            let Some(q) = self.conns[i].h3.as_deref_mut() else {
                continue;
            };
            q.armed = None;
            q.client.timeout(inst);
            self.drive(i, now);
        }
        due.clear();
        self.quic_due = due;
    }
}

/// Does one blocking QUIC handshake with the target, so that a refused certificate, a
/// server that does not speak `h3` or one not listening is one clear error before the run
/// starts. Gives up after `timeout`.
pub fn preflight(h: &Http3, addr: SocketAddr, timeout: Duration) -> Result<(), SetupFailure> {
    let io = |e: std::io::Error| SetupFailure::Io(Errno::from_io_error(&e).unwrap_or(Errno::IO));
    let local: SocketAddr = if addr.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let sock = UdpSocket::bind(local).map_err(io)?;
    sock.connect(addr).map_err(io)?;
    let start = Instant::now();
    let deadline = start + timeout;
    let mut client = h3::Client::<()>::connect(&h.quic, start, addr, 1)
        .map_err(|e| SetupFailure::Http3(H3Error::Connect(e)))?;
    let req = &h.requests[0];
    let (mut events, mut tx, mut scratch) = (Vec::new(), Vec::new(), Vec::new());
    let mut buf = vec![0u8; super::RECV_BUFFER];
    let send = |client: &mut h3::Client<()>, tx: &mut Vec<u8>, now| {
        while let Some(t) = client.transmit(now, tx) {
            let seg = t.segment_size.unwrap_or(t.size);
            for d in tx[..t.size].chunks(seg) {
                sock.send(d).map_err(io)?;
            }
        }
        Ok(())
    };
    loop {
        let now = Instant::now();
        client
            .poll(now, req, &mut events)
            .map_err(SetupFailure::Http3)?;
        if client.is_connected() {
            // The client's Finished first (the server's handshake completes with it), then
            // the close, a courtesy: the server frees the connection now, not at its idle
            // timeout.
            send(&mut client, &mut tx, now)?;
            client.close(now);
            let _ = send(&mut client, &mut tx, now);
            return Ok(());
        }
        send(&mut client, &mut tx, now)?;
        if now >= deadline {
            return Err(SetupFailure::HandshakeTimeout);
        }
        let until = client.poll_timeout().map_or(deadline, |t| t.min(deadline));
        let wait = until
            .saturating_duration_since(now)
            .max(Duration::from_millis(1));
        sock.set_read_timeout(Some(wait)).map_err(io)?;
        match sock.recv(&mut buf) {
            Ok(n) => client.recv(Instant::now(), addr, &buf[..n], &mut scratch),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(io(e)),
        }
        let now = Instant::now();
        if client.poll_timeout().is_some_and(|t| t <= now) {
            client.timeout(now);
        }
    }
}
