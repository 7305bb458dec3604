//! The proxy cache's second-tier questions asked on the worker's own connection: for a
//! Redis tier (`SharedTier::link`), a turn's `GET`s go out as one `MGET` on a socket in the
//! worker's own epoll set, and the answer wakes the worker as any upstream's bytes do. Asked
//! on the tier's thread instead, each turn cost a wake of that thread, its own epoll wait,
//! and a wake back (an eventfd write): ~1.3 µs of the edge's CPU a tier hit.
//!
//! One connection per worker and mount, made on the first ask and again after a failure;
//! the asks on it answered in order. An ask past the tier's timeout fails the connection and
//! everything it holds (misses, counted and reported as the tier's own calls are); so do
//! bytes that are not RESP, the server's end and a broken socket. A tier that is down is
//! asked nothing (`SharedTier::admit`): its asks are misses at once. An idle connection is
//! closed after [`IDLE_MS`], and one whose mount a reload replaced is dropped once idle.
//!
//! This file moves bytes and parked requests; the framing is linerate-kv's (`Link`), the
//! health and counters the tier's.
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::sync::Arc;

use super::backend::{Backend, Completion, Submitted, Token, UpAddr};
use super::{Shared, Worker};
use crate::proxy::cache::MountCache;
use crate::proxy::tier::{Broken, Link};

/// How long a connection with nothing to ask stays open (ms).
const IDLE_MS: u64 = 60_000;

/// A worker's connections to its mounts' Redis tiers.
#[derive(Default)]
pub(super) struct TierLinks(Vec<TierConn>);

impl TierLinks {
    /// Whether `token` is one of these connections', and which.
    pub(super) fn of(&self, token: Token) -> Option<usize> {
        self.0.iter().position(|c| c.token == Some(token))
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

struct TierConn {
    /// The mount whose tier this connection reaches (compared by address).
    mount: Arc<MountCache>,
    addr: UpAddr,
    /// The link's state for the connection open now, or for the next one.
    link: Link,
    /// The connection's token while one is open (its slot is held, not free).
    token: Option<Token>,
    connected: bool,
    /// A send is in flight (at most one).
    sending: bool,
    /// The asks sent or queued, oldest first, each with its parked requests and deadline.
    asks: VecDeque<Ask>,
    next_ticket: u64,
    /// When the connection last had nothing to ask (ms).
    idle_since: u64,
    /// The buffer of the last send, for the next.
    spare: Vec<u8>,
}

struct Ask {
    ticket: u64,
    parks: Vec<u64>,
    /// When it fails unanswered (ms, the worker's clock).
    deadline: u64,
}

impl<B: Backend> Worker<B> {
    /// This worker's connection to `mount`'s tier (made here, not yet opened, on first
    /// use); `None` when the tier is not one a worker asks itself.
    pub(super) fn link_to(&mut self, mount: &Arc<MountCache>) -> Option<usize> {
        let links = &mut self.pools.links.0;
        if let Some(i) = links.iter().position(|c| Arc::ptr_eq(&c.mount, mount)) {
            return Some(i);
        }
        let (addr, link) = mount.tier.as_ref()?.link()?;
        links.push(TierConn {
            mount: Arc::clone(mount),
            addr: UpAddr::Tcp(addr),
            link,
            token: None,
            connected: false,
            sending: false,
            asks: VecDeque::new(),
            next_ticket: 0,
            idle_since: 0,
            spare: Vec::new(),
        });
        Some(links.len() - 1)
    }

    /// Asks `keys` for the requests parked as `parks` on connection `i` (from
    /// [`Worker::link_to`]).
    pub(super) fn link_ask(&mut self, i: usize, parks: Vec<u64>, keys: Vec<String>) {
        let mount = Arc::clone(&self.pools.links.0[i].mount);
        let tier = mount.tier.as_ref().expect("a link's mount has a tier");
        if !tier.admit(keys.len()) {
            // The tier is down: misses without I/O (counted as skipped).
            self.io
                .app
                .inbox
                .push_tiered_many(parks.into_iter().map(|p| (p, None)));
            return;
        }
        if self.pools.links.0[i].token.is_none() && !self.link_open(i) {
            let values = tier.settle(Err(Broken("connect failed".into())), false, keys.len());
            self.io
                .app
                .inbox
                .push_tiered_many(parks.into_iter().zip(values));
            return;
        }
        let deadline = self.io.cx.now + tier.timeout_ms();
        let c = &mut self.pools.links.0[i];
        let ticket = c.next_ticket;
        c.next_ticket += 1;
        c.link.ask(ticket, &keys);
        c.asks.push_back(Ask {
            ticket,
            parks,
            deadline,
        });
        self.pools.next_check = self.pools.next_check.min(deadline);
        self.link_send(i);
    }

    /// Opens connection `i`'s socket; `false` when it cannot even start.
    fn link_open(&mut self, i: usize) -> bool {
        let (idx, token) = self.alloc_slot(true);
        let c = &mut self.pools.links.0[i];
        match self.backend.connect(&c.addr, token) {
            Submitted::Failed => {
                self.backend.detach(token);
                self.free.push(idx);
                false
            }
            done => {
                c.token = Some(token);
                c.connected = done == Submitted::Done(());
                if c.connected {
                    self.backend.set_recv(token, true);
                }
                true
            }
        }
    }

    /// Sends what connection `i`'s link holds, when it is connected and no send is out.
    fn link_send(&mut self, i: usize) {
        let c = &mut self.pools.links.0[i];
        let Some(token) = c.token else {
            return;
        };
        if !c.connected || c.sending || !c.link.has_output() {
            return;
        }
        let out = c.link.take_output(std::mem::take(&mut c.spare));
        match self.backend.send(token, out, false) {
            Submitted::Done(buf) => c.spare = buf,
            Submitted::Pending => c.sending = true,
            Submitted::Failed => self.link_fail(i, false),
        }
    }

    /// A completion for connection `i`.
    pub(super) fn link_event(&mut self, i: usize, c: Completion, sh: &Shared) {
        match c {
            Completion::Connected { token } => {
                self.pools.links.0[i].connected = true;
                self.backend.set_recv(token, true);
                self.link_send(i);
            }
            Completion::Received { buf, .. } => {
                let mut answers = Vec::new();
                let read = self.pools.links.0[i].link.received(&buf, &mut answers);
                self.backend.recycle(buf);
                for (ticket, outcome) in answers {
                    self.link_answered(i, ticket, outcome, sh);
                }
                if read.is_err() {
                    self.link_fail(i, false);
                }
            }
            Completion::Sent { buf, .. } => {
                let c = &mut self.pools.links.0[i];
                c.sending = false;
                c.spare = buf;
                self.link_send(i);
            }
            _ => self.link_fail(i, false),
        }
        // A connection that failed here told its requests through the inbox: they are
        // answered now rather than at the next wake.
        if self.pools.links.0[i].token.is_none() {
            self.cache_landed(sh);
        }
    }

    /// The answer to connection `i`'s oldest ask, `ticket`: its values to its requests.
    fn link_answered(
        &mut self,
        i: usize,
        ticket: u64,
        outcome: Result<Vec<Option<Vec<u8>>>, Broken>,
        sh: &Shared,
    ) {
        let c = &mut self.pools.links.0[i];
        let Some(ask) = c.asks.pop_front() else {
            return;
        };
        debug_assert_eq!(ask.ticket, ticket, "answers come in order");
        if c.asks.is_empty() {
            c.idle_since = self.io.cx.now;
        }
        let tier = c.mount.tier.as_ref().expect("a link's mount has a tier");
        let values = tier.settle(outcome, false, ask.parks.len());
        for (park, stored) in ask.parks.into_iter().zip(values) {
            self.tier_answered(park, stored, sh);
        }
    }

    /// Closes connection `i` (broken, or `timed_out`): each of its asks fails, its requests
    /// told so through the inbox (at the loop's next look); the next ask connects anew.
    fn link_fail(&mut self, i: usize, timed_out: bool) {
        let now = self.io.cx.now;
        let c = &mut self.pools.links.0[i];
        if let Some(token) = c.token.take() {
            self.backend.detach(token);
            self.free.push((token & 0xffff_ffff) as u32);
        }
        c.connected = false;
        c.sending = false;
        c.idle_since = now;
        c.link.abandon().for_each(drop);
        if let Some((_, fresh)) = c.mount.tier.as_ref().and_then(|t| t.link()) {
            c.link = fresh;
        }
        let tier = c.mount.tier.as_ref().expect("a link's mount has a tier");
        let why = if timed_out {
            "no answer in time"
        } else {
            "the connection to the server broke"
        };
        for ask in c.asks.drain(..) {
            let values = tier.settle(Err(Broken(why.into())), timed_out, ask.parks.len());
            self.io
                .app
                .inbox
                .push_tiered_many(ask.parks.into_iter().zip(values));
        }
    }

    /// Fails the connections whose oldest ask is past its deadline and closes those idle
    /// for [`IDLE_MS`]; when to look again (ms; `u64::MAX`: nothing to look for).
    pub(super) fn link_deadlines(&mut self, sh: &Shared) -> u64 {
        let now = self.io.cx.now;
        let mut next = u64::MAX;
        let mut failed = false;
        for i in 0..self.pools.links.0.len() {
            let c = &self.pools.links.0[i];
            match c.asks.front() {
                Some(ask) if ask.deadline <= now => {
                    self.link_fail(i, true);
                    failed = true;
                }
                Some(ask) => next = next.min(ask.deadline),
                None if c.token.is_some() && now >= c.idle_since + IDLE_MS => {
                    self.link_fail(i, false);
                }
                None if c.token.is_some() => next = next.min(c.idle_since + IDLE_MS),
                None => {}
            }
        }
        if failed {
            self.cache_landed(sh);
        }
        // A mount a reload replaced: its connection (closed above once idle, or now) goes,
        // and the old store it held with it.
        let backend = &mut self.backend;
        let free = &mut self.free;
        self.pools.links.0.retain_mut(|c| {
            let orphan = Arc::strong_count(&c.mount) == 1 && c.asks.is_empty();
            if orphan && let Some(token) = c.token.take() {
                backend.detach(token);
                free.push((token & 0xffff_ffff) as u32);
            }
            !orphan
        });
        next
    }
}
