//! The waiting line of an upstream whose servers are all at `max_conns` (one line per
//! upstream, per worker).
//!
//! Owns when a request in the line goes on, and when it stops waiting:
//! - a connection given back idle takes the line's front at once (the relay's release, in
//!   `upstream.rs`);
//! - a connection that closes instead (the upstream answered `Connection: close`, failed or
//!   timed out) leaves room for a new one: the tick that follows sends as many of the line
//!   as there is room for;
//! - a request waits at most its upstream's connect timeout, then is answered 503 (HAProxy's
//!   `timeout queue`, which is its connect timeout unless set);
//! - a reload that replaces the upstreams sends their lines again at the next tick, each
//!   request to the new upstream of its old one's name (502 where there is none, as for a
//!   route to none), so that a reload loses none of them.
#![forbid(unsafe_code)]

use super::{Backend, Job, Shared, SiteSet, Upstream, Worker};

/// A request in the line, and when it stops waiting (the wheel's ms).
pub(in crate::driver) struct Waiting {
    pub(super) until: u64,
    pub(super) job: Box<Job>,
}

/// The answer of a request that waited too long.
const UNAVAILABLE: u16 = 503;

impl<B: Backend> Worker<B> {
    /// Puts `job` at the back of the line of upstream `gi` (`up`).
    pub(super) fn wait_for_conn(&mut self, gi: usize, up: &Upstream, job: Box<Job>) {
        let until = self.io.cx.now + up.connect_timeout.as_millis() as u64;
        self.pools.groups[gi]
            .waiting
            .push_back(Waiting { until, job });
        self.pools.next_check = self.pools.next_check.min(until);
    }

    /// The lines' turn, on the upstreams' tick: each line's front goes on while its servers
    /// have room (connections closed since it came), and what is left past its time is
    /// answered 503. Returns when the next request in a line stops waiting (ms).
    pub(super) fn serve_lines(&mut self, sites: &SiteSet, sh: &Shared) -> u64 {
        for job in std::mem::take(&mut self.pools.stranded) {
            self.dispatch(job, sh);
        }
        let mut next = u64::MAX;
        for (gi, up) in sites.upstreams.iter().enumerate() {
            let Some(g) = self.pools.groups.get(gi).filter(|g| !g.waiting.is_empty()) else {
                continue;
            };
            // Each pass is bounded by the room counted before it: a request whose picked
            // server is still full goes to the back again, and is not sent twice.
            let room = match up.max_conns {
                0 => g.waiting.len(),
                max => (g.servers.iter())
                    .map(|s| max.saturating_sub(s.conns))
                    .sum::<usize>()
                    .min(g.waiting.len()),
            };
            for _ in 0..room {
                if let Some(w) = self.pools.groups[gi].waiting.pop_front() {
                    self.dispatch(w.job, sh);
                }
            }
            let now = self.io.cx.now;
            while let Some(w) = (self.pools.groups.get_mut(gi))
                .and_then(|g| g.waiting.pop_front_if(|w| w.until <= now))
            {
                self.refuse(w.job, UNAVAILABLE, sh);
            }
            if let Some(w) = self.pools.groups.get(gi).and_then(|g| g.waiting.front()) {
                next = next.min(w.until);
            }
        }
        next
    }
}
