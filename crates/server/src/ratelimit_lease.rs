//! A fleet-wide rate limit's node side: the tokens this node holds per key in
//! small leases taken from the fleet's count in Redis, so that most requests pass on a leased
//! token without a trip. Sans I/O: [`Leases::check`] says pass or refuse and, when a key needs
//! its next lease, hands back the [`Ask`] to send; [`Leases::answered`] and [`Leases::failed`]
//! apply what came back. No sockets, no clock of its own, no logging.
//!
//! The invariant: every request this node lets through in fleet mode is counted in Redis. A
//! lease's tokens are counted when Redis grants them; a request let through by the node's
//! local share while its key has no lease (the first request of a key, or the first after a
//! lease ran out) is a debt, charged in Redis with the key's next ask and taken off the lease
//! that answers it. So a lease can only under-admit (tokens left unused when it expires).
#![forbid(unsafe_code)]
// Without the `kv` feature no link answers (a fleet rule is refused at start).
#![cfg_attr(not(feature = "kv"), allow(dead_code))]

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Mutex;

use crate::ratelimit::{Key, Limiter, MAX_KEYS, Verdict};

/// The most tokens one lease takes.
pub const LEASE_MAX: u32 = 64;
/// How long a lease's tokens stay usable (µs): past it the unused ones are dropped (they were
/// counted in Redis when granted, so dropping them only under-admits; a short life keeps a
/// node from sitting on tokens another node's clients could use).
pub const LEASE_TTL_US: u64 = 1_000_000;
/// How long an ask may stay unanswered before the key's next request asks again (the link
/// normally fails it long before: see `ratelimit_redis::TIMEOUT`).
const ASK_STALE_US: u64 = 2_000_000;
/// Shards of a rule's lease table (a power of two), as `ratelimit`'s.
const SHARDS: usize = 64;

/// The tokens one lease asks for, for a rule of one request per `interval_us` and `burst`
/// beyond, in a fleet of `nodes`.
///
/// - At most the node's share of the burst, `(burst + 1) / nodes`: GCRA grants at most
///   `burst + 1` at once, so a burst of requests spread over the nodes finds one lease on each
///   (`5r/s`, burst 5, 3 nodes: 2 per node, 6 in all, as one node would let through).
/// - At most 1 + 10 % of what the rule lets through in 10 s, over the nodes: a lease leaves at
///   most `size - 1` tokens unused (the request that asked takes one), so the fleet's tokens
///   lost to expired leases stay within 10 % of the limit over 10 s.
/// - At least 1 and at most [`LEASE_MAX`].
pub fn lease_size(interval_us: u64, burst: u32, nodes: u32) -> u32 {
    let nodes = u64::from(nodes.max(1));
    let per_10s = 10_000_000 / interval_us.max(1) + u64::from(burst);
    let by_error = 1 + per_10s / (10 * nodes);
    let by_burst = (u64::from(burst) + 1) / nodes;
    by_error.min(by_burst).clamp(1, u64::from(LEASE_MAX)) as u32
}

/// What a key asks Redis for: `want` tokens, after charging `debt` requests let through
/// by the local share (the request that asks among them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Ask {
    pub key: Key,
    pub want: u32,
    pub debt: u32,
}

/// One key's lease.
#[derive(Clone, Copy, Debug, Default)]
struct Lease {
    /// Tokens left, usable until `expires_us`.
    tokens: u32,
    expires_us: u64,
    /// Redis said no token is free before this (µs): refused here without a trip.
    refused_until_us: u64,
    /// When the ask in flight was sent; 0: none.
    asked_us: u64,
    /// Requests let through by the local share and not yet charged in Redis.
    debt: u32,
}

impl Lease {
    /// Whether it still holds anything (else it is the same as an absent one).
    fn live(&self, now_us: u64) -> bool {
        (self.tokens > 0 && now_us < self.expires_us)
            || now_us < self.refused_until_us
            || self.asked_us != 0
            || self.debt > 0
    }
}

/// One fleet rule's leases on this node, shared by the workers.
pub(crate) struct Leases {
    size: u32,
    hasher: std::collections::hash_map::RandomState,
    shards: Box<[Mutex<HashMap<Key, Lease>>]>,
}

impl Leases {
    /// Leases of `size` tokens (see [`lease_size`]).
    pub(crate) fn new(size: u32) -> Leases {
        Leases {
            size: size.clamp(1, LEASE_MAX),
            hasher: Default::default(),
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
        }
    }

    fn shard(&self, key: &Key) -> std::sync::MutexGuard<'_, HashMap<Key, Lease>> {
        self.shards[self.hasher.hash_one(key) as usize % SHARDS]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Accounts one request for `key` at `now_us` (the monotonic clock): a leased token when
    /// the key holds one; a refusal while Redis said none is free; otherwise `local` (the
    /// node's share of the limit) decides, what it lets through is a debt, and the key's next
    /// lease is asked (unless an ask is already on its way).
    pub(crate) fn check(&self, key: Key, now_us: u64, local: &Limiter) -> (Verdict, Option<Ask>) {
        let mut map = self.shard(&key);
        if !map.contains_key(&key) && map.len() >= MAX_KEYS / SHARDS {
            map.retain(|_, l| l.live(now_us));
            if map.len() >= MAX_KEYS / SHARDS {
                // A full table: the local share alone, as while Redis is down.
                drop(map);
                return (local.check(key, now_us), None);
            }
        }
        let lease = map.entry(key.clone()).or_default();
        if lease.tokens > 0 && now_us < lease.expires_us {
            lease.tokens -= 1;
            return (Verdict::Pass, None);
        }
        lease.tokens = 0;
        if now_us < lease.refused_until_us {
            return (
                Verdict::Refuse {
                    wait_us: lease.refused_until_us - now_us,
                },
                None,
            );
        }
        let verdict = local.check(key.clone(), now_us);
        if !matches!(verdict, Verdict::Refuse { .. }) {
            lease.debt = lease.debt.saturating_add(1);
        }
        let pending = lease.asked_us != 0 && now_us.saturating_sub(lease.asked_us) < ASK_STALE_US;
        if pending {
            return (verdict, None);
        }
        lease.asked_us = now_us.max(1);
        let debt = std::mem::take(&mut lease.debt);
        // The requests already let through are the lease's first tokens: a key takes `size`
        // a trip (a debt past that is charged whole, with one more token asked).
        let ask = Ask {
            key,
            want: self.size.saturating_sub(debt).max(1),
            debt,
        };
        (verdict, Some(ask))
    }

    /// Redis granted `granted` tokens of `key`'s ask, and no further one is free for
    /// `wait_us` (0: one is free now): once the lease is spent, the key is refused here until
    /// then. What the local share let through while the ask
    /// was on its way is taken off the lease (and, past it, charged with the next ask).
    pub(crate) fn answered(&self, key: &Key, granted: u32, wait_us: u64, now_us: u64) {
        let mut map = self.shard(key);
        let lease = match map.get_mut(key) {
            Some(l) => l,
            None => map.entry(key.clone()).or_default(),
        };
        lease.asked_us = 0;
        let late = std::mem::take(&mut lease.debt);
        lease.tokens = granted.saturating_sub(late);
        lease.debt = late.saturating_sub(granted);
        lease.expires_us = now_us + LEASE_TTL_US;
        lease.refused_until_us = if wait_us > 0 { now_us + wait_us } else { 0 };
    }

    /// `key`'s ask got no answer (Redis down, slow or refusing): its next request may ask
    /// again; its debt stays to be charged then.
    pub(crate) fn failed(&self, key: &Key, debt: u32) {
        let mut map = self.shard(key);
        if let Some(lease) = map.get_mut(key) {
            lease.asked_us = 0;
            lease.debt = lease.debt.saturating_add(debt);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip() -> Key {
        Key::Addr("192.0.2.7".parse().unwrap())
    }

    /// The local share of `5r/s`, burst 5, over 3 nodes: one per 600 ms, 2 at once.
    fn local() -> Limiter {
        Limiter::new(600_000, 1)
    }

    #[test]
    fn lease_sizes_split_the_burst_and_bound_the_unused_tokens() {
        // 5r/s, burst 5, 3 nodes: 2 each (6 = burst + 1 in all).
        assert_eq!(lease_size(200_000, 5, 3), 2);
        // A lone node with a big burst: bounded by 10 % of 10 s (1 + 55 / 10).
        assert_eq!(lease_size(200_000, 50, 1), 1 + 100 / 10);
        // Burst 0: one at a time whatever the rate.
        assert_eq!(lease_size(1_000, 0, 3), 1);
        // A high rate: capped.
        assert_eq!(lease_size(10, 100_000, 3), LEASE_MAX);
        assert_eq!(lease_size(200_000, 5, 0), 6);
    }

    #[test]
    fn a_new_key_is_judged_by_the_local_share_and_asks_once() {
        let leases = Leases::new(2);
        let local = local();
        let (v, ask) = leases.check(ip(), 10, &local);
        assert_eq!(v, Verdict::Pass);
        // The request let through is the lease's first token: one more is asked.
        assert_eq!(
            ask,
            Some(Ask {
                key: ip(),
                want: 1,
                debt: 1
            })
        );
        // While it is on its way: the local share again (2 at once), no second ask.
        assert_eq!(leases.check(ip(), 20, &local), (Verdict::Pass, None));
        assert!(matches!(
            leases.check(ip(), 30, &local),
            (Verdict::Refuse { .. }, None)
        ));
        // Redis grants 1 (after charging the first request): the second request, let through
        // meanwhile, took it. A node takes 2 tokens a lease, however they came.
        leases.answered(&ip(), 1, 0, 40);
        // The lease is spent: the next request asks again (the local share is spent too).
        let (v, ask) = leases.check(ip(), 60, &local);
        assert!(matches!(v, Verdict::Refuse { .. }), "{v:?}");
        assert_eq!(ask.map(|a| (a.want, a.debt)), Some((2, 0)));
    }

    #[test]
    fn a_lease_passes_requests_without_asking_until_it_is_spent_or_expires() {
        let leases = Leases::new(3);
        let local = Limiter::new(1_000_000_000, 0);
        let (_, ask) = leases.check(ip(), 1, &local);
        assert_eq!(ask.map(|a| (a.want, a.debt)), Some((2, 1)));
        leases.answered(&ip(), 2, 0, 2);
        for t in 3..5 {
            assert_eq!(leases.check(ip(), t, &local), (Verdict::Pass, None));
        }
        // Spent: the local share (spent by the first request) refuses; the next lease is asked.
        let (v, ask) = leases.check(ip(), 7, &local);
        assert!(matches!(v, Verdict::Refuse { .. }));
        assert!(ask.is_some());
        leases.answered(&ip(), 3, 0, 10);
        // Past its life its tokens are gone.
        let (_, ask) = leases.check(ip(), 10 + LEASE_TTL_US, &local);
        assert!(ask.is_some());
    }

    #[test]
    fn redis_saying_none_is_free_refuses_here_until_then() {
        let leases = Leases::new(2);
        let local = Limiter::new(1_000_000_000, 0);
        let _ = leases.check(ip(), 1, &local);
        leases.answered(&ip(), 0, 150_000, 100);
        assert_eq!(
            leases.check(ip(), 50_100, &local),
            (Verdict::Refuse { wait_us: 100_000 }, None)
        );
        // Then it asks again.
        assert!(leases.check(ip(), 150_100, &local).1.is_some());
    }

    #[test]
    fn local_passes_beyond_the_grant_are_charged_with_the_next_ask() {
        let leases = Leases::new(1);
        let local = Limiter::new(1, 10);
        let _ = leases.check(ip(), 1, &local);
        // Three more pass on the local share while the ask is out; Redis grants 1.
        for t in 2..5 {
            assert_eq!(leases.check(ip(), t, &local).0, Verdict::Pass);
        }
        leases.answered(&ip(), 1, 200, 5);
        // No token left: the 2 not covered are charged with the next ask (and this request).
        let (_, ask) = leases.check(ip(), 300, &local);
        assert_eq!(ask.map(|a| a.debt), Some(3));
    }

    #[test]
    fn a_failed_ask_lets_the_next_request_ask_again_with_its_debt() {
        let leases = Leases::new(2);
        let local = Limiter::new(1, 10);
        let (_, ask) = leases.check(ip(), 1, &local);
        let ask = ask.unwrap();
        assert!(leases.check(ip(), 2, &local).1.is_none());
        leases.failed(&ask.key, ask.debt);
        let (_, again) = leases.check(ip(), 3, &local);
        assert_eq!(again.map(|a| a.debt), Some(3));
    }

    /// The under-admission a lease allows (the fleet test's lower bound): a node's local share
    /// lets a request through and asks; its other requests, refused by the local share while
    /// the ask is out, are gone when the grant comes, which stays unused. 3 passed, 4 counted.
    #[test]
    fn a_grant_that_comes_after_the_last_request_is_left_unused() {
        let leases = Leases::new(2);
        let local = local();
        let (v, ask) = leases.check(ip(), 10, &local);
        assert_eq!(
            (v, ask.map(|a| (a.want, a.debt))),
            (Verdict::Pass, Some((1, 1)))
        );
        leases.answered(&ip(), 1, 0, 20);
        assert_eq!(leases.check(ip(), 30, &local), (Verdict::Pass, None));
        // The lease is spent: the local share's second token, and the next ask.
        let (v, ask) = leases.check(ip(), 40, &local);
        assert_eq!(
            (v, ask.map(|a| (a.want, a.debt))),
            (Verdict::Pass, Some((1, 1)))
        );
        // The local share is spent too, and the ask still out: refused.
        assert!(matches!(
            leases.check(ip(), 50, &local),
            (Verdict::Refuse { .. }, None)
        ));
        // Its grant: a token no request of this burst is left to take.
        leases.answered(&ip(), 1, 0, 60);
        assert_eq!(leases.check(ip(), 70, &local), (Verdict::Pass, None));
    }
}
