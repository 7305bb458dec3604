//! Open connections per client address, across every worker (nginx's `limit_conn` keyed by
//! `$binary_remote_addr`, HAProxy's `conn_cur` in a stick table): a client at its limit has
//! its next connection closed before a byte is read.
//!
//! Shared by the workers, so a client's connections count wherever SO_REUSEPORT sends them.
//! The table is split into shards by address, each a small lock around a map, taken once
//! when a connection is counted (after accept, or after its PROXY header) and once when it
//! closes: never per request. An address with no open connection leaves the map, so the
//! memory follows the clients connected now.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

/// Shards of the table (a power of two): workers counting different clients rarely meet.
const SHARDS: usize = 64;

/// How many connections each client address has open.
pub(crate) struct ClientConns {
    /// Most connections one address may have open.
    max: u32,
    /// Loopback addresses count too (else they are not counted at all).
    loopback: bool,
    shards: Box<[Mutex<HashMap<IpAddr, u32>>]>,
}

impl ClientConns {
    pub(crate) fn new(max: u32, loopback: bool) -> ClientConns {
        ClientConns {
            max,
            loopback,
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
        }
    }

    fn shard(&self, ip: IpAddr) -> &Mutex<HashMap<IpAddr, u32>> {
        let folded = match ip {
            IpAddr::V4(a) => u32::from(a) as u64,
            IpAddr::V6(a) => {
                let v = u128::from(a);
                (v as u64) ^ ((v >> 64) as u64)
            }
        };
        let mixed = folded.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32;
        &self.shards[mixed as usize % SHARDS]
    }

    /// Whether connections from `ip` are counted: every address, or every one but loopback.
    pub(crate) fn counts(&self, ip: IpAddr) -> bool {
        self.loopback || !ip.to_canonical().is_loopback()
    }

    /// Counts a new connection from `ip`; `false` (nothing counted) when the address already
    /// has `max` open. An IPv4-mapped IPv6 address counts as the IPv4 one.
    pub(crate) fn open(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        let mut map = self.shard(ip).lock().unwrap_or_else(|e| e.into_inner());
        let n = map.entry(ip).or_insert(0);
        if *n >= self.max {
            if *n == 0 {
                map.remove(&ip);
            }
            return false;
        }
        *n += 1;
        true
    }

    /// A connection counted by [`ClientConns::open`] closed.
    pub(crate) fn close(&self, ip: IpAddr) {
        let ip = ip.to_canonical();
        let mut map = self.shard(ip).lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = map.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                map.remove(&ip);
            }
        }
    }

    /// Addresses with a connection open now (for tests).
    #[cfg(test)]
    fn clients(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_at_its_limit_is_refused_until_one_closes() {
        let c = ClientConns::new(2, true);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "2001:db8::1".parse().unwrap();
        assert!(c.open(a));
        assert!(c.open(a));
        assert!(!c.open(a));
        // The same client on a dual-stack socket.
        assert!(!c.open("::ffff:192.0.2.1".parse().unwrap()));
        assert!(c.open(b));
        c.close(a);
        assert!(c.open(a));
        c.close(a);
        c.close(a);
        c.close(b);
        assert_eq!(c.clients(), 0, "closed clients leave the table");
    }

    #[test]
    fn a_limit_of_zero_refuses_without_keeping_the_address() {
        let c = ClientConns::new(0, true);
        assert!(!c.open("192.0.2.1".parse().unwrap()));
        assert_eq!(c.clients(), 0);
    }

    /// The default limit leaves loopback clients out (an edge default); one set
    /// explicitly counts them, IPv4-mapped ones included.
    #[test]
    fn loopback_counts_only_when_asked() {
        let lo: [IpAddr; 3] = [
            "127.0.0.1".parse().unwrap(),
            "::1".parse().unwrap(),
            "::ffff:127.0.0.2".parse().unwrap(),
        ];
        let remote: IpAddr = "192.0.2.1".parse().unwrap();
        let default = ClientConns::new(2, false);
        assert!(lo.iter().all(|&ip| !default.counts(ip)));
        assert!(default.counts(remote));
        let explicit = ClientConns::new(2, true);
        assert!(lo.iter().all(|&ip| explicit.counts(ip)));
    }
}
