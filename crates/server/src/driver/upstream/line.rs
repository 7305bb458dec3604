//! The waiting line of an upstream whose servers are all at `max_conns` (one line per
//! upstream, per worker).
//!
//! Owns when a request in the line goes on, and when it stops waiting:
//! - a connection given back idle takes the line's front at once (the relay's release, in
//!   `upstream.rs`);
//! - a connection that closes instead (the upstream answered `Connection: close`, failed or
//!   timed out) leaves room for a new one: the tick that follows sends as many of the line
//!   as there is room for on servers in the rotation;
//! - a request waits its upstream's connect timeout in all, then is answered 503 (HAProxy's
//!   `timeout queue`, which is its connect timeout unless set); one sent on that finds its
//!   server full again goes to the back with the time it had left;
//! - a reload that replaces the upstreams sends their lines again at the next tick, each
//!   request to the new upstream of its old one's name (502 where there is none, as for a
//!   route to none), so that a reload loses none of them.
#![forbid(unsafe_code)]

use super::{Backend, Job, Shared, SiteSet, Upstream, Worker};

/// The answer of a request that waited too long.
const UNAVAILABLE: u16 = 503;

impl<B: Backend> Worker<B> {
    /// Puts `job` at the back of the line of upstream `gi` (`up`).
    pub(super) fn wait_for_conn(&mut self, gi: usize, up: &Upstream, mut job: Box<Job>) {
        if job.waits_until == 0 {
            job.waits_until = self.io.cx.now + up.connect_timeout.as_millis() as u64;
        }
        self.pools.next_check = self.pools.next_check.min(job.waits_until);
        self.pools.groups[gi].waiting.push_back(job);
    }

    /// The lines' turn, on the upstreams' tick: each line's front goes on while the servers
    /// in the rotation have room (connections closed since it came), and what is left past
    /// its time is answered 503. Returns when the next request in a line stops waiting (ms).
    pub(super) fn serve_lines(&mut self, sites: &SiteSet, sh: &Shared) -> u64 {
        for job in std::mem::take(&mut self.pools.stranded) {
            self.dispatch(job, sh);
        }
        let now = self.io.cx.now;
        let mut next = u64::MAX;
        for (gi, up) in sites.upstreams.iter().enumerate() {
            let Some(g) = self.pools.groups.get(gi).filter(|g| !g.waiting.is_empty()) else {
                continue;
            };
            // Each pass is bounded by the room counted before it: a request whose picked
            // server is still full goes to the back again, and is not sent twice.
            let room = match up.max_conns {
                0 => g.waiting.len(),
                max => (g.servers.iter().zip(&g.loads))
                    .filter(|(_, load)| load.down_until <= now)
                    .map(|(s, _)| max.saturating_sub(s.conns))
                    .sum::<usize>()
                    .min(g.waiting.len()),
            };
            for _ in 0..room {
                if let Some(job) = self.pools.groups[gi].waiting.pop_front() {
                    self.dispatch(job, sh);
                }
            }
            // Past their time: wherever they stand (one sent again went to the back).
            let Some(g) = self.pools.groups.get_mut(gi) else {
                continue;
            };
            let mut late = Vec::new();
            for job in std::mem::take(&mut g.waiting) {
                if job.waits_until <= now {
                    late.push(job);
                } else {
                    g.waiting.push_back(job);
                }
            }
            next = (g.waiting.iter()).fold(next, |n, j| n.min(j.waits_until));
            for job in late {
                self.refuse(job, UNAVAILABLE, sh);
            }
        }
        next
    }
}
