//! Request rate limits per key (nginx's `limit_req` with `burst` and `nodelay`): a leaky
//! bucket per client address or per field value, kept as GCRA's one number per key (the
//! theoretical arrival time). A request is let through while its key's bucket holds no more
//! than `burst` requests beyond the rate, and refused otherwise with the time until it would
//! pass (429 and `Retry-After`, decided by the caller). Nothing is queued or delayed.
//!
//! One table per rule, shared by the workers (a client's connections land on any worker), in
//! 64 shards, each a small lock around a map, taken once per request that a rule covers: a
//! request no rule covers touches nothing here. A key whose bucket has drained is the same as
//! an absent one, so full shards first drop those; a shard still full lets the new key through
//! uncounted (fail open: the table's size, not an attacker's addresses, bounds memory) and the
//! caller counts it.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::Mutex;

/// Shards per table (a power of two).
const SHARDS: usize = 64;
/// Keys one rule's table holds (over all shards); past it, new keys pass uncounted.
pub const MAX_KEYS: usize = 64 * 1024;

/// What a request's bucket is keyed by.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(crate) enum Key {
    /// The client's address (after a PROXY header or trusted proxies).
    Addr(IpAddr),
    /// A field's value (an API key, a user id set by a proxy in front).
    Bytes(Box<[u8]>),
}

/// A rule's verdict on one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Pass,
    /// The table was full: passed without a bucket.
    PassUncounted,
    /// Over the rate: it would pass in this many microseconds.
    Refuse {
        wait_us: u64,
    },
}

/// One rule's buckets.
pub(crate) struct Limiter {
    /// Microseconds between requests at the rate (GCRA's emission interval).
    interval_us: u64,
    /// How far ahead of now a bucket may run: `burst` intervals.
    tolerance_us: u64,
    hasher: std::collections::hash_map::RandomState,
    shards: Box<[Mutex<HashMap<Key, u64>>]>,
}

impl Limiter {
    /// A rate of one request per `interval_us`, and `burst` requests beyond it.
    pub(crate) fn new(interval_us: u64, burst: u32) -> Limiter {
        let interval_us = interval_us.max(1);
        Limiter {
            interval_us,
            tolerance_us: interval_us.saturating_mul(u64::from(burst)),
            hasher: Default::default(),
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
        }
    }

    /// Accounts one request for `key` at `now_us` (a monotonic clock).
    pub(crate) fn check(&self, key: Key, now_us: u64) -> Verdict {
        let shard = &self.shards[self.hasher.hash_one(&key) as usize % SHARDS];
        let mut map = shard.lock().unwrap_or_else(|e| e.into_inner());
        let tat = match map.get(&key) {
            Some(&t) => t.max(now_us),
            None => {
                if map.len() >= MAX_KEYS / SHARDS {
                    map.retain(|_, t| *t > now_us);
                    if map.len() >= MAX_KEYS / SHARDS {
                        return Verdict::PassUncounted;
                    }
                }
                now_us
            }
        };
        if tat - now_us > self.tolerance_us {
            return Verdict::Refuse {
                wait_us: tat - now_us - self.tolerance_us,
            };
        }
        map.insert(key, tat + self.interval_us);
        Verdict::Pass
    }
}

/// `"10r/s"` or `"600r/m"` as the interval between requests in microseconds.
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let bad = || format!("{s:?}: a rate is N r/s or N r/m (e.g. \"10r/s\", \"30r/m\")");
    let (n, unit) = s.trim().split_once("r/").ok_or_else(bad)?;
    let n: u64 = n
        .trim()
        .parse()
        .ok()
        .filter(|&n| n > 0 && n <= 1_000_000)
        .ok_or_else(bad)?;
    let per_us = match unit.trim() {
        "s" => 1_000_000,
        "m" => 60_000_000,
        _ => return Err(bad()),
    };
    Ok(per_us / n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Key {
        Key::Addr(s.parse().unwrap())
    }

    #[test]
    fn a_burst_passes_then_the_rate() {
        // 10 r/s (100 ms apart) with a burst of 2: three at once, then one per 100 ms.
        let l = Limiter::new(parse_rate("10r/s").unwrap(), 2);
        let a = || ip("192.0.2.1");
        for _ in 0..3 {
            assert_eq!(l.check(a(), 0), Verdict::Pass);
        }
        assert_eq!(l.check(a(), 0), Verdict::Refuse { wait_us: 100_000 });
        assert_eq!(l.check(a(), 40_000), Verdict::Refuse { wait_us: 60_000 });
        // Refused requests cost nothing: the bucket is where it was.
        assert_eq!(l.check(a(), 100_000), Verdict::Pass);
        assert_eq!(l.check(a(), 100_000), Verdict::Refuse { wait_us: 100_000 });
        // Another key has its own bucket.
        assert_eq!(l.check(ip("192.0.2.2"), 100_000), Verdict::Pass);
        // A second later the bucket has drained whole: the burst is back.
        for _ in 0..3 {
            assert_eq!(l.check(a(), 1_300_000), Verdict::Pass);
        }
        assert!(matches!(l.check(a(), 1_300_000), Verdict::Refuse { .. }));
    }

    #[test]
    fn no_burst_is_one_per_interval() {
        let l = Limiter::new(parse_rate("60r/m").unwrap(), 0);
        let k = || Key::Bytes(b"token-1".to_vec().into_boxed_slice());
        assert_eq!(l.check(k(), 5), Verdict::Pass);
        assert_eq!(l.check(k(), 6), Verdict::Refuse { wait_us: 999_999 });
        assert_eq!(l.check(k(), 1_000_005), Verdict::Pass);
    }

    #[test]
    fn a_full_table_drops_drained_buckets_then_lets_new_keys_through_uncounted() {
        let l = Limiter::new(1_000, 0);
        let per_shard = MAX_KEYS / SHARDS;
        let mut passed_uncounted = 0;
        for i in 0..(MAX_KEYS as u32 * 2) {
            match l.check(Key::Addr(IpAddr::from(i.to_be_bytes())), 0) {
                Verdict::Pass => {}
                Verdict::PassUncounted => passed_uncounted += 1,
                v => panic!("{v:?}"),
            }
        }
        assert!(passed_uncounted >= MAX_KEYS, "{passed_uncounted}");
        for s in l.shards.iter() {
            assert!(s.lock().unwrap().len() <= per_shard);
        }
        // Later every bucket has drained: new keys are counted again.
        assert_eq!(l.check(ip("2001:db8::1"), 10_000), Verdict::Pass);
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("10r/s"), Ok(100_000));
        assert_eq!(parse_rate("30r/m"), Ok(2_000_000));
        assert_eq!(parse_rate("1r/s"), Ok(1_000_000));
        for bad in ["10", "0r/s", "10r/h", "r/s", "-1r/s", "10 per second"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
    }
}
