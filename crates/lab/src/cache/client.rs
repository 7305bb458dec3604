//! The lab's cache load client: one thread per load CPU, each an epoll loop over its own
//! connections (the same I/O style as `linerate load`'s worker), each connection keeping up to
//! `pipeline` requests in flight, encoded by `resp` or `meta` straight into its send buffer and
//! its replies framed in place by the same codec.
//!
//! A load generator is where this project writes protocol code by hand: a client crate (redis-rs,
//! a memcached crate) would bring its own runtime, allocate per reply and copy every value,
//! and its cost would be on the load CPU that limits what the lab can offer. Here a request is a
//! few appends to a reused buffer and a reply is a span checked in place.
//!
//! Closed loop by default (each connection refills as replies come back; latency timed from
//! each request's send), or a fixed rate (`rate`: wrk2's schedule, latency timed from each
//! request's intended send, so a stalled server shows instead of slowing the load). A reply
//! the codec refuses ends its connection and is counted; nothing here panics on input.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use linerate_load::schedule::Schedule;
use linerate_load::stats::{new_histogram, ns_to_us};
use rustix::event::epoll;
use rustix::time::{TimerfdClockId, TimerfdFlags, timerfd_create};

use super::codec::{Decoded, Op, ProtoError, Reply};
use super::keys::{Keys, Rng, key};
use super::{meta, resp};

/// Bytes read per `read` call.
const READ_CHUNK: usize = 64 * 1024;
/// Readiness events taken per `epoll_wait`.
const EVENTS_PER_WAIT: usize = 256;
/// The longest wait between looks at the clock (deadlines, the end of a drain).
const TICK: Duration = Duration::from_millis(10);
/// How long the replies still in flight at the end of a run are waited for; later ones are
/// counted as lost.
pub const DRAIN: Duration = Duration::from_secs(2);
/// Epoll token of the rate timer (connection tokens are indices).
const TIMER_TOKEN: u64 = u64::MAX;

/// The wire protocol of a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// RESP2: Redis.
    Resp,
    /// The meta protocol: memcached.
    Meta,
}

impl Protocol {
    pub fn encode(self, out: &mut Vec<u8>, op: Op, key: &[u8], value: &[u8]) {
        match self {
            Protocol::Resp => resp::encode(out, op, key, value),
            Protocol::Meta => meta::encode(out, op, key, value),
        }
    }

    pub fn decode(self, buf: &[u8]) -> Result<Decoded, ProtoError> {
        match self {
            Protocol::Resp => resp::decode(buf),
            Protocol::Meta => meta::decode(buf),
        }
    }
}

/// What each request is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mix {
    Get,
    Set,
    /// A GET; on a miss, a SET of that key on the same connection (cache-aside).
    GetOrSet,
}

/// When a run ends.
#[derive(Clone, Copy, Debug)]
pub enum Until {
    /// After this long (replies in flight then are waited for, up to [`DRAIN`]).
    Elapsed(Duration),
    /// After this many requests have been sent and answered, or `limit` has passed.
    Count { requests: u64, limit: Duration },
}

/// One run.
#[derive(Clone, Debug)]
pub struct Job {
    pub addr: SocketAddr,
    pub protocol: Protocol,
    pub connections: usize,
    pub pipeline: usize,
    pub mix: Mix,
    /// Each thread takes a copy; a `Sequential` one is split among the threads.
    pub keys: Keys,
    pub value: Arc<[u8]>,
    pub until: Until,
    /// Requests per second over all connections (none: closed loop).
    pub rate: Option<f64>,
    /// Load threads, one pinned to each CPU.
    pub cpus: Vec<usize>,
    pub seed: u64,
}

/// What a run counted.
#[derive(Clone)]
pub struct Outcome {
    /// Replies read (every kind).
    pub replies: u64,
    pub hits: u64,
    pub misses: u64,
    pub stored: u64,
    pub not_stored: u64,
    /// The servers' error replies (framed: the connection went on).
    pub error_replies: u64,
    /// Replies the codec refused (each closed its connection).
    pub proto_errors: u64,
    /// Connections lost to a socket error or the server's close.
    pub io_errors: u64,
    /// Requests sent and never answered (lost with a connection, or past the drain).
    pub unanswered: u64,
    /// The first refusal or socket error seen, for the report.
    pub first_error: Option<String>,
    /// µs, from the send (closed loop) or the intended send (fixed rate).
    pub latency: Histogram<u64>,
    /// From the start to the last reply counted.
    pub elapsed: Duration,
}

impl std::fmt::Debug for Outcome {
    /// The counts, and the latency histogram by its count and percentiles only (its buckets
    /// are thousands of numbers).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outcome")
            .field("replies", &self.replies)
            .field("hits", &self.hits)
            .field("misses", &self.misses)
            .field("stored", &self.stored)
            .field("not_stored", &self.not_stored)
            .field("error_replies", &self.error_replies)
            .field("proto_errors", &self.proto_errors)
            .field("io_errors", &self.io_errors)
            .field("unanswered", &self.unanswered)
            .field("first_error", &self.first_error)
            .field("latency", &linerate_load::stats::summarize(&self.latency))
            .field("elapsed", &self.elapsed)
            .finish()
    }
}

impl Outcome {
    fn new() -> Outcome {
        Outcome {
            replies: 0,
            hits: 0,
            misses: 0,
            stored: 0,
            not_stored: 0,
            error_replies: 0,
            proto_errors: 0,
            io_errors: 0,
            unanswered: 0,
            first_error: None,
            latency: new_histogram(),
            elapsed: Duration::ZERO,
        }
    }

    fn add(&mut self, o: Outcome) {
        self.replies += o.replies;
        self.hits += o.hits;
        self.misses += o.misses;
        self.stored += o.stored;
        self.not_stored += o.not_stored;
        self.error_replies += o.error_replies;
        self.proto_errors += o.proto_errors;
        self.io_errors += o.io_errors;
        self.unanswered += o.unanswered;
        self.first_error = self.first_error.take().or(o.first_error);
        let _ = self.latency.add(&o.latency);
        self.elapsed = self.elapsed.max(o.elapsed);
    }

    /// Every failure: error replies, refused replies, lost connections, unanswered requests.
    pub fn errors(&self) -> u64 {
        self.error_replies + self.proto_errors + self.io_errors + self.unanswered
    }

    /// Hits ÷ (hits + misses), where any GET was answered.
    pub fn hit_ratio(&self) -> Option<f64> {
        let gets = self.hits + self.misses;
        (gets > 0).then(|| self.hits as f64 / gets as f64)
    }

    pub fn per_second(&self) -> f64 {
        self.replies as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Runs `job`: connects every connection first (a refused connection fails the run), then
/// loads. Blocks until done.
pub fn run(job: &Job) -> anyhow::Result<Outcome> {
    let threads = job.cpus.len().max(1);
    if job.connections < threads {
        anyhow::bail!(
            "{} connections cannot be shared by {threads} load threads",
            job.connections
        );
    }
    let mut all = Outcome::new();
    let results: Vec<anyhow::Result<Outcome>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let job = job.clone();
                s.spawn(move || thread(&job, t, threads))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a load thread panicked")))
            })
            .collect()
    });
    for r in results {
        all.add(r?);
    }
    Ok(all)
}

/// This thread's share of `total` when split `threads` ways.
fn share(total: u64, t: usize, threads: usize) -> u64 {
    total / threads as u64 + u64::from((t as u64) < total % threads as u64)
}

/// A request sent (or queued) and not yet answered.
#[derive(Clone, Copy, Debug)]
struct InFlight {
    op: Op,
    key: u64,
    intended_ns: u64,
    sent_ns: u64,
}

struct Conn {
    stream: TcpStream,
    /// Encoded and not yet written; `written` bytes of it are.
    out: Vec<u8>,
    written: usize,
    want_out: bool,
    input: Vec<u8>,
    in_flight: VecDeque<InFlight>,
    /// Cache-aside SETs owed for misses, sent before new requests.
    owed: VecDeque<(u64, u64)>,
    open: bool,
}

struct Loop<'a> {
    job: &'a Job,
    epoll: rustix::fd::OwnedFd,
    conns: Vec<Conn>,
    keys: Keys,
    rng: Rng,
    start: Instant,
    /// Requests this thread may still start (count mode).
    budget: u64,
    sending: bool,
    out: Outcome,
    scratch: Vec<u8>,
}

fn thread(job: &Job, t: usize, threads: usize) -> anyhow::Result<Outcome> {
    if let Some(&cpu) = job.cpus.get(t) {
        let mut set = rustix::thread::CpuSet::new();
        set.set(cpu);
        rustix::thread::sched_setaffinity(None, &set)?;
    }
    let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
    let n = share(job.connections as u64, t, threads) as usize;
    let mut conns = Vec::with_capacity(n);
    for i in 0..n {
        let stream = TcpStream::connect_timeout(&job.addr, Duration::from_secs(5))
            .map_err(|e| anyhow::anyhow!("cannot connect to {}: {e}", job.addr))?;
        stream.set_nodelay(true)?;
        stream.set_nonblocking(true)?;
        epoll::add(
            &epoll,
            &stream,
            epoll::EventData::new_u64(i as u64),
            epoll::EventFlags::IN,
        )?;
        conns.push(Conn {
            stream,
            out: Vec::new(),
            written: 0,
            want_out: false,
            input: Vec::with_capacity(READ_CHUNK),
            in_flight: VecDeque::new(),
            owed: VecDeque::new(),
            open: true,
        });
    }
    let keys = match &job.keys {
        Keys::Sequential { next, stride } => Keys::Sequential {
            next: next + t as u64 * stride,
            stride: stride * threads as u64,
        },
        k => k.clone(),
    };
    let budget = match job.until {
        Until::Count { requests, .. } => share(requests, t, threads),
        Until::Elapsed(_) => u64::MAX,
    };
    let mut l = Loop {
        job,
        epoll,
        conns,
        keys,
        rng: Rng::new(job.seed.wrapping_add(t as u64)),
        start: Instant::now(),
        budget,
        sending: true,
        out: Outcome::new(),
        scratch: vec![0; READ_CHUNK],
    };
    l.run(t, threads)?;
    Ok(l.out)
}

impl Loop<'_> {
    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    fn in_flight(&self) -> usize {
        self.conns
            .iter()
            .filter(|c| c.open)
            .map(|c| c.in_flight.len() + c.owed.len())
            .sum()
    }

    fn run(&mut self, t: usize, threads: usize) -> anyhow::Result<()> {
        let (limit, count_mode) = match self.job.until {
            Until::Elapsed(d) => (d, false),
            Until::Count { limit, .. } => (limit, true),
        };
        let limit_ns = limit.as_nanos() as u64;
        let mut schedule = self.job.rate.map(|r| {
            let per_thread = r * share(self.job.connections as u64, t, threads) as f64
                / self.job.connections as f64;
            Schedule::new(0, per_thread.max(1e-3))
        });
        let timer = match schedule {
            Some(_) => {
                let fd = timerfd_create(
                    TimerfdClockId::Monotonic,
                    TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
                )?;
                epoll::add(
                    &self.epoll,
                    &fd,
                    epoll::EventData::new_u64(TIMER_TOKEN),
                    epoll::EventFlags::IN,
                )?;
                Some(fd)
            }
            None => None,
        };
        let mut events: Vec<epoll::Event> = Vec::with_capacity(EVENTS_PER_WAIT);
        let mut drain_until = None;
        let mut cursor = 0;
        if schedule.is_none() {
            for i in 0..self.conns.len() {
                self.top_up(i, 0, true);
            }
        }
        loop {
            let now = self.now();
            if self.sending && (now >= limit_ns || (count_mode && self.budget == 0)) {
                self.sending = false;
            }
            if !self.sending {
                let until = *drain_until.get_or_insert(now + DRAIN.as_nanos() as u64);
                if self.in_flight() == 0 || now >= until || !self.conns.iter().any(|c| c.open) {
                    break;
                }
            }
            if !self.conns.iter().any(|c| c.open) {
                break;
            }
            let mut wake = now + TICK.as_nanos() as u64;
            if let Some(s) = schedule.as_mut().filter(|_| self.sending) {
                // Every request now due goes out on the next connection with room; when none
                // has room it waits, keeping its intended time (so the wait is in its latency).
                let n = self.conns.len();
                let mut full = false;
                'due: while s.next_due() <= now && self.budget > 0 {
                    for k in 0..n {
                        let i = (cursor + k) % n;
                        if self.conns[i].open && self.room(i) {
                            cursor = i + 1;
                            self.start_request(i, s.next_due(), now);
                            s.advance();
                            self.flush(i);
                            continue 'due;
                        }
                    }
                    full = true;
                    break;
                }
                // Every pipeline full: a reply frees room (epoll wakes us), not the clock.
                if !full {
                    wake = wake.min(s.next_due().max(now + 1));
                }
            }
            let wait = Duration::from_nanos(wake.saturating_sub(now));
            linerate_load::worker::wait_precisely(&self.epoll, timer.as_ref(), &mut events, wait)?;
            for ev in &events {
                let token = ev.data.u64();
                if token == TIMER_TOKEN {
                    if let Some(fd) = &timer {
                        let _ = rustix::io::read(fd, &mut [0u8; 8]);
                    }
                    continue;
                }
                let (i, flags) = (token as usize, ev.flags);
                if flags.contains(epoll::EventFlags::OUT) {
                    self.flush(i);
                }
                if flags.intersects(
                    epoll::EventFlags::IN | epoll::EventFlags::HUP | epoll::EventFlags::ERR,
                ) {
                    self.read(i);
                }
                // Closed loop: refill. Fixed rate: only the cache-aside SETs owed for misses,
                // which answer a request already scheduled.
                let now = self.now();
                self.top_up(i, now, schedule.is_none());
            }
        }
        for c in &self.conns {
            if c.open {
                self.out.unanswered += (c.in_flight.len() + c.owed.len()) as u64;
            }
        }
        Ok(())
    }

    fn room(&self, i: usize) -> bool {
        let c = &self.conns[i];
        c.in_flight.len() < self.job.pipeline
    }

    /// Fills connection `i`'s pipeline, with new requests too when `new` (closed loop), and
    /// writes.
    fn top_up(&mut self, i: usize, now: u64, new: bool) {
        if !self.conns[i].open {
            return;
        }
        while self.room(i) {
            let owed = !self.conns[i].owed.is_empty();
            let fresh = new && self.sending && self.budget > 0;
            if !(owed || fresh) {
                break;
            }
            self.start_request(i, now, now);
        }
        self.flush(i);
    }

    /// Encodes connection `i`'s next request: an owed cache-aside SET, else a new one.
    fn start_request(&mut self, i: usize, intended_ns: u64, now: u64) {
        let (op, key_i, intended_ns) = match self.conns[i].owed.pop_front() {
            Some((k, intended)) => (Op::Set, k, intended),
            None => {
                self.budget -= 1;
                let op = match self.job.mix {
                    Mix::Get | Mix::GetOrSet => Op::Get,
                    Mix::Set => Op::Set,
                };
                (op, self.keys.next(&mut self.rng), intended_ns)
            }
        };
        let c = &mut self.conns[i];
        self.job
            .protocol
            .encode(&mut c.out, op, &key(key_i), &self.job.value);
        c.in_flight.push_back(InFlight {
            op,
            key: key_i,
            intended_ns,
            sent_ns: now,
        });
    }

    fn flush(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if !c.open {
            return;
        }
        while c.written < c.out.len() {
            match c.stream.write(&c.out[c.written..]) {
                Ok(0) => return self.lost(i, "the server closed the connection".into(), false),
                Ok(n) => c.written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return self.lost(i, format!("write: {e}"), false),
            }
        }
        let c = &mut self.conns[i];
        if c.written == c.out.len() {
            c.out.clear();
            c.written = 0;
        }
        let want = c.written < c.out.len();
        if want != c.want_out {
            let flags = if want {
                epoll::EventFlags::IN | epoll::EventFlags::OUT
            } else {
                epoll::EventFlags::IN
            };
            let _ = epoll::modify(
                &self.epoll,
                &c.stream,
                epoll::EventData::new_u64(i as u64),
                flags,
            );
            c.want_out = want;
        }
    }

    fn read(&mut self, i: usize) {
        loop {
            let c = &mut self.conns[i];
            if !c.open {
                return;
            }
            match c.stream.read(&mut self.scratch) {
                Ok(0) => return self.lost(i, "the server closed the connection".into(), false),
                Ok(n) => {
                    c.input.extend_from_slice(&self.scratch[..n]);
                    if let Err(e) = self.replies(i) {
                        return self.lost(i, format!("unreadable reply: {e}"), true);
                    }
                    if n < self.scratch.len() {
                        return;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return self.lost(i, format!("read: {e}"), false),
            }
        }
    }

    /// Frames and counts every whole reply in connection `i`'s input.
    fn replies(&mut self, i: usize) -> Result<(), ProtoError> {
        let now = self.now();
        let corrected = self.job.rate.is_some();
        let c = &mut self.conns[i];
        let mut at = 0;
        while at < c.input.len() {
            let (reply, n) = match self.job.protocol.decode(&c.input[at..])? {
                Decoded::Reply(r, n) => (r, n),
                Decoded::Incomplete => break,
            };
            let Some(req) = c.in_flight.pop_front() else {
                return Err(ProtoError::Unexpected);
            };
            at += n;
            let o = &mut self.out;
            match (req.op, reply) {
                (Op::Get, Reply::Value(_)) => o.hits += 1,
                (Op::Get, Reply::Miss) => {
                    o.misses += 1;
                    if self.job.mix == Mix::GetOrSet {
                        c.owed.push_back((req.key, req.intended_ns));
                    }
                }
                (Op::Set, Reply::Stored) => o.stored += 1,
                (Op::Set, Reply::NotStored) => o.not_stored += 1,
                (_, Reply::Error(span)) => {
                    o.error_replies += 1;
                    if o.first_error.is_none() {
                        let text = &c.input[at - n..][span];
                        o.first_error = Some(format!(
                            "the server answered: {}",
                            String::from_utf8_lossy(text)
                        ));
                    }
                }
                // A GET answered as a SET is, or the reverse: the stream is out of step.
                _ => return Err(ProtoError::Unexpected),
            }
            o.replies += 1;
            let from = if corrected {
                req.intended_ns
            } else {
                req.sent_ns
            };
            let _ = o.latency.record(ns_to_us(now.saturating_sub(from)));
            o.elapsed = Duration::from_nanos(now);
        }
        c.input.drain(..at);
        Ok(())
    }

    /// Ends connection `i` (its requests unanswered): a reply the codec refused (`proto`), or
    /// a socket error or close.
    fn lost(&mut self, i: usize, why: String, proto: bool) {
        let c = &mut self.conns[i];
        if !c.open {
            return;
        }
        c.open = false;
        let _ = epoll::delete(&self.epoll, &c.stream);
        self.out.unanswered += (c.in_flight.len() + c.owed.len()) as u64;
        c.in_flight.clear();
        c.owed.clear();
        if proto {
            self.out.proto_errors += 1;
        } else {
            self.out.io_errors += 1;
        }
        self.out.first_error.get_or_insert(why);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up() {
        for (total, threads) in [(10, 3), (1, 2), (0, 4), (1_000_000, 7)] {
            let sum: u64 = (0..threads).map(|t| share(total, t, threads)).sum();
            assert_eq!(sum, total);
        }
    }
}
