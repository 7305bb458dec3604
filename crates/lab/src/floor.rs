//! The syscall-floor reference server: the least any HTTP/1.1 server on this kernel can cost.
//!
//! One thread, level-triggered epoll, one `recv` per readable connection, count request ends
//! (`\r\n\r\n`), one `send` of that many canned responses. It parses nothing: it must only be
//! driven by bodiless requests (wrk's GETs). Invariant: responses go out in request order and a
//! request end split across reads is counted exactly once. The Date header is refreshed once a
//! second from the loop (one vDSO clock read per `epoll_wait`).

use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use memchr::memmem;
use rustix::event::{Timespec, epoll};
use rustix::io::Errno;
use rustix::net::{RecvFlags, SendFlags, SocketFlags};
use socket2::{Domain, Protocol, Socket, Type};

/// Which canned response the floor sends for every request end it counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloorResponse {
    Json,
    Plaintext,
}

/// Floor configuration.
#[derive(Clone, Debug)]
pub struct FloorConfig {
    pub addr: SocketAddr,
    pub response: FloorResponse,
    pub cpu: Option<usize>,
}

/// Listen backlog: large enough that a 10k-connection burst is not dropped.
pub const LISTEN_BACKLOG: i32 = 4096;
/// Size of the per-thread receive buffer; a recv that fills it is followed by another.
pub const RECV_BUF_BYTES: usize = 64 * 1024;
/// Responses pre-built back to back, so up to this many pipelined requests cost no copying.
pub const CANNED_BATCH: usize = 64;
/// How long `epoll_wait` sleeps before the stop flag is looked at again.
const POLL_TIMEOUT: Timespec = Timespec {
    tv_sec: 0,
    tv_nsec: 50_000_000,
};
/// Events taken per `epoll_wait`.
const MAX_EVENTS: usize = 1024;
/// The epoll token of the listener; connections use their slab index.
const LISTENER: u64 = u64::MAX;
/// The end of a request head (RFC 9112 §2.1: the empty line after the header fields).
const HEAD_END: &[u8; 4] = b"\r\n\r\n";

/// A bound floor server, not yet serving. `run` is `bind` + `serve_until` a flag never set.
pub struct Floor {
    listener: Socket,
    epoll: OwnedFd,
    local_addr: SocketAddr,
    response: FloorResponse,
    cpu: Option<usize>,
}

impl Floor {
    /// Binds the listener (SO_REUSEADDR, nonblocking, backlog 4096) and registers it with epoll.
    pub fn bind(cfg: &FloorConfig) -> anyhow::Result<Floor> {
        let listener = Socket::new(
            Domain::for_address(cfg.addr),
            Type::STREAM.nonblocking().cloexec(),
            Some(Protocol::TCP),
        )
        .context("socket")?;
        listener.set_reuse_address(true).context("SO_REUSEADDR")?;
        listener
            .bind(&cfg.addr.into())
            .with_context(|| format!("bind {}", cfg.addr))?;
        listener.listen(LISTEN_BACKLOG).context("listen")?;
        let local_addr = listener
            .local_addr()
            .context("getsockname")?
            .as_socket()
            .context("listener has no IP address")?;
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC).context("epoll_create")?;
        epoll::add(
            &epoll,
            &listener,
            epoll::EventData::new_u64(LISTENER),
            epoll::EventFlags::IN,
        )
        .context("epoll_ctl(listener)")?;
        Ok(Floor {
            listener,
            epoll,
            local_addr,
            response: cfg.response,
            cpu: cfg.cpu,
        })
    }

    /// The address actually bound (the OS-chosen port when the config asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Serves on the calling thread (pinned to the configured CPU, if any) until `stop` is set;
    /// the flag is looked at at least every 50 ms. All connections are closed on return.
    pub fn serve_until(self, stop: &AtomicBool) {
        if let Err(e) = self.serve(stop) {
            tracing::error!("floor: {e}");
        }
    }

    /// The event loop; returns only when `stop` is set or `epoll_wait` fails.
    fn serve(self, stop: &AtomicBool) -> anyhow::Result<()> {
        if let Some(cpu) = self.cpu {
            let mut set = rustix::thread::CpuSet::new();
            set.set(cpu);
            rustix::thread::sched_setaffinity(None, &set)
                .with_context(|| format!("pin to CPU {cpu}"))?;
        }
        let mut worker = Worker {
            epoll: self.epoll,
            listener: self.listener,
            conns: Vec::new(),
            free: Vec::new(),
            rbuf: vec![0; RECV_BUF_BYTES],
            out: Vec::new(),
            canned: Canned::new(self.response, unix_secs()),
        };
        let mut events: Vec<epoll::Event> = Vec::with_capacity(MAX_EVENTS);
        while !stop.load(Ordering::Relaxed) {
            events.clear();
            match epoll::wait(
                &worker.epoll,
                rustix::buffer::spare_capacity(&mut events),
                Some(&POLL_TIMEOUT),
            ) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(e) => return Err(e).context("epoll_wait"),
            }
            worker.canned.refresh(unix_secs());
            for ev in &events {
                // Copy out: the event struct is packed on x86_64.
                let (token, flags) = (ev.data.u64(), ev.flags);
                if token == LISTENER {
                    worker.accept_all();
                } else {
                    worker.on_event(token as usize, flags);
                }
            }
        }
        Ok(())
    }
}

/// Runs the floor until killed (or until the event loop fails).
pub fn run(cfg: &FloorConfig) -> anyhow::Result<()> {
    let floor = Floor::bind(cfg)?;
    tracing::info!("floor: listening on {}", floor.local_addr());
    floor.serve(&AtomicBool::new(false))
}

/// One accepted connection.
struct Conn {
    fd: OwnedFd,
    /// How many bytes of `HEAD_END` the bytes received so far end with (0..=3), not counting
    /// bytes already part of a counted request end.
    partial: u8,
    /// Response bytes a partial send left over. While non-empty the connection is registered
    /// for EPOLLOUT only, so a client that does not read stops being read (backpressure).
    pending: Vec<u8>,
    /// How much of `pending` has been sent.
    sent: usize,
}

/// The loop's state: everything here is owned by the one serving thread.
struct Worker {
    epoll: OwnedFd,
    listener: Socket,
    /// Connection slab, indexed by epoll token.
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    rbuf: Vec<u8>,
    /// Reused for replies longer than `CANNED_BATCH` responses.
    out: Vec<u8>,
    canned: Canned,
}

impl Worker {
    fn accept_all(&mut self) {
        loop {
            let fd = match rustix::net::accept_with(
                &self.listener,
                SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
            ) {
                Ok(fd) => fd,
                Err(Errno::INTR | Errno::CONNABORTED) => continue,
                Err(Errno::AGAIN) => return,
                Err(e) => {
                    // EMFILE and friends: level-triggered epoll will report the listener again.
                    tracing::warn!("floor: accept: {e}");
                    return;
                }
            };
            if let Err(e) = rustix::net::sockopt::set_tcp_nodelay(&fd, true) {
                tracing::warn!("floor: TCP_NODELAY: {e}");
            }
            let idx = self.free.pop().unwrap_or_else(|| {
                self.conns.push(None);
                self.conns.len() - 1
            });
            if let Err(e) = epoll::add(
                &self.epoll,
                &fd,
                epoll::EventData::new_u64(idx as u64),
                epoll::EventFlags::IN,
            ) {
                tracing::warn!("floor: epoll_ctl(add): {e}");
                self.free.push(idx);
                continue;
            }
            self.conns[idx] = Some(Conn {
                fd,
                partial: 0,
                pending: Vec::new(),
                sent: 0,
            });
        }
    }

    fn on_event(&mut self, idx: usize, flags: epoll::EventFlags) {
        let Some(conn) = self.conns.get(idx).and_then(Option::as_ref) else {
            return;
        };
        if !conn.pending.is_empty() {
            // Registered for EPOLLOUT only; HUP/ERR also land here and the send reports them.
            self.on_writable(idx);
        } else if flags.intersects(
            epoll::EventFlags::IN
                | epoll::EventFlags::HUP
                | epoll::EventFlags::ERR
                | epoll::EventFlags::RDHUP,
        ) {
            self.on_readable(idx);
        }
    }

    fn on_readable(&mut self, idx: usize) {
        let Some(conn) = self.conns[idx].as_mut() else {
            return;
        };
        let mut count = 0usize;
        let mut eof = false;
        loop {
            match rustix::net::recv(&conn.fd, &mut self.rbuf[..], RecvFlags::empty()) {
                Ok((_, 0)) => {
                    eof = true;
                    break;
                }
                Ok((_, n)) => {
                    count += count_head_ends(&mut conn.partial, &self.rbuf[..n]);
                    if n < self.rbuf.len() {
                        break;
                    }
                }
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => break,
                Err(_) => {
                    self.close(idx);
                    return;
                }
            }
        }
        // A client that half-closes after its last request still gets its answers (best effort:
        // whatever one send takes).
        if count > 0 && !self.respond(idx, count) {
            return;
        }
        if eof {
            self.close(idx);
        }
    }

    /// Sends `count` canned responses in one send. Returns false if the connection was closed.
    fn respond(&mut self, idx: usize, count: usize) -> bool {
        let Some(conn) = self.conns[idx].as_mut() else {
            return false;
        };
        let one = self.canned.one_len;
        let bytes: &[u8] = if count <= CANNED_BATCH {
            &self.canned.batch[..count * one]
        } else {
            self.out.clear();
            for _ in 0..count / CANNED_BATCH {
                self.out.extend_from_slice(&self.canned.batch);
            }
            self.out
                .extend_from_slice(&self.canned.batch[..(count % CANNED_BATCH) * one]);
            &self.out
        };
        let sent = loop {
            match rustix::net::send(&conn.fd, bytes, SendFlags::NOSIGNAL) {
                Ok(n) => break n,
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => break 0,
                Err(_) => {
                    self.close(idx);
                    return false;
                }
            }
        };
        if sent == bytes.len() {
            return true;
        }
        conn.pending.extend_from_slice(&bytes[sent..]);
        conn.sent = 0;
        if epoll::modify(
            &self.epoll,
            &conn.fd,
            epoll::EventData::new_u64(idx as u64),
            epoll::EventFlags::OUT,
        )
        .is_err()
        {
            self.close(idx);
            return false;
        }
        true
    }

    fn on_writable(&mut self, idx: usize) {
        let Some(conn) = self.conns[idx].as_mut() else {
            return;
        };
        while conn.sent < conn.pending.len() {
            match rustix::net::send(&conn.fd, &conn.pending[conn.sent..], SendFlags::NOSIGNAL) {
                Ok(n) => conn.sent += n,
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => return,
                Err(_) => {
                    self.close(idx);
                    return;
                }
            }
        }
        conn.pending.clear();
        conn.sent = 0;
        if epoll::modify(
            &self.epoll,
            &conn.fd,
            epoll::EventData::new_u64(idx as u64),
            epoll::EventFlags::IN,
        )
        .is_err()
        {
            self.close(idx);
        }
    }

    fn close(&mut self, idx: usize) {
        // Dropping the fd closes it, which also removes it from the epoll set.
        if self.conns[idx].take().is_some() {
            self.free.push(idx);
        }
    }
}

/// Counts request ends in `data`, continuing a match that `partial` says the previous read
/// ended in. Matches do not overlap (after `\r\n\r\n` the search restarts), as in a request
/// stream where each head is followed by the next request line.
fn count_head_ends(partial: &mut u8, data: &[u8]) -> usize {
    let mut count = 0;
    let mut state = usize::from(*partial);
    let mut i = 0;
    // Finish (or abandon) a match split across reads, one byte at a time (at most a few bytes).
    while state != 0 && i < data.len() {
        state = match (state, data[i]) {
            (3, b'\n') => {
                count += 1;
                0
            }
            (1, b'\n') => 2,
            (2, b'\r') => 3,
            (_, b'\r') => 1,
            _ => 0,
        };
        i += 1;
    }
    if state != 0 {
        *partial = state as u8;
        return count;
    }
    let rest = &data[i..];
    let mut after_last = 0;
    for pos in memmem::find_iter(rest, HEAD_END) {
        count += 1;
        after_last = pos + HEAD_END.len();
    }
    let tail = &rest[after_last..];
    *partial = if tail.ends_with(b"\r\n\r") {
        3
    } else if tail.ends_with(b"\r\n") {
        2
    } else if tail.ends_with(b"\r") {
        1
    } else {
        0
    };
    count
}

/// `CANNED_BATCH` copies of the response, back to back, with the Date of `secs`.
struct Canned {
    batch: Vec<u8>,
    one_len: usize,
    date_at: usize,
    secs: u64,
}

impl Canned {
    fn new(response: FloorResponse, secs: u64) -> Canned {
        let (content_type, body) = match response {
            FloorResponse::Json => ("application/json", r#"{"message":"Hello, World!"}"#),
            FloorResponse::Plaintext => ("text/plain", "Hello, World!"),
        };
        let head = "HTTP/1.1 200 OK\r\nServer: linerate\r\nDate: ";
        let one = format!(
            "{head}{}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{body}",
            String::from_utf8_lossy(&linerate_http1::fmt_http_date(secs)),
            body.len()
        );
        Canned {
            batch: one.as_bytes().repeat(CANNED_BATCH),
            one_len: one.len(),
            date_at: head.len(),
            secs,
        }
    }

    /// Rewrites the Date in every copy when the second has changed (an HTTP-date has a fixed
    /// length, so nothing moves).
    fn refresh(&mut self, secs: u64) {
        if secs == self.secs {
            return;
        }
        self.secs = secs;
        let date = linerate_http1::fmt_http_date(secs);
        for one in self.batch.chunks_exact_mut(self.one_len) {
            one[self.date_at..self.date_at + date.len()].copy_from_slice(&date);
        }
    }
}

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canned_bytes_are_exactly_the_documented_ones() {
        let json = Canned::new(FloorResponse::Json, 1_795_176_000);
        assert_eq!(
            &json.batch[..json.one_len],
            b"HTTP/1.1 200 OK\r\nServer: linerate\r\nDate: Fri, 20 Nov 2026 12:00:00 GMT\r\n\
              Content-Type: application/json\r\nContent-Length: 27\r\n\r\n\
              {\"message\":\"Hello, World!\"}"
        );
        let plain = Canned::new(FloorResponse::Plaintext, 1_795_176_000);
        assert_eq!(
            &plain.batch[..plain.one_len],
            b"HTTP/1.1 200 OK\r\nServer: linerate\r\nDate: Fri, 20 Nov 2026 12:00:00 GMT\r\n\
              Content-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!"
        );
        assert_eq!(plain.batch.len(), plain.one_len * CANNED_BATCH);
    }

    #[test]
    fn canned_refresh_rewrites_every_date() {
        let mut c = Canned::new(FloorResponse::Plaintext, 1_795_176_000);
        c.refresh(0);
        let fresh = Canned::new(FloorResponse::Plaintext, 0);
        assert_eq!(c.batch, fresh.batch);
    }

    /// Counts over every way of cutting `stream` into two or three reads.
    fn count_split(stream: &[u8]) -> Vec<usize> {
        let mut out = Vec::new();
        for a in 0..=stream.len() {
            for b in a..=stream.len() {
                let mut partial = 0;
                let n = count_head_ends(&mut partial, &stream[..a])
                    + count_head_ends(&mut partial, &stream[a..b])
                    + count_head_ends(&mut partial, &stream[b..]);
                out.push(n);
            }
        }
        out
    }

    #[test]
    fn head_end_split_anywhere_is_counted_once() {
        let two = b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";
        assert!(count_split(two).iter().all(|&n| n == 2));
        assert!(count_split(b"\r\n\r\n").iter().all(|&n| n == 1));
        // Non-overlapping: six bytes hold one end, eight hold two.
        assert!(count_split(b"\r\n\r\n\r\n").iter().all(|&n| n == 1));
        assert!(count_split(b"\r\n\r\n\r\n\r\n").iter().all(|&n| n == 2));
        assert!(count_split(b"\r\n\rx\n\r\n").iter().all(|&n| n == 0));
        assert!(count_split(b"\r\r\n\r\r\n\r\n").iter().all(|&n| n == 1));
    }

    #[test]
    fn head_end_one_byte_at_a_time() {
        let stream = b"GET / HTTP/1.1\r\n\r\nGET /x HTTP/1.1\r\nA: b\r\n\r\n\r";
        let mut partial = 0;
        let n: usize = stream
            .iter()
            .map(|b| count_head_ends(&mut partial, std::slice::from_ref(b)))
            .sum();
        assert_eq!(n, 2);
        assert_eq!(partial, 1);
    }
}
