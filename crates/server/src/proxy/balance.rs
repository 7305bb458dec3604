//! Choosing an upstream server for a request: smooth weighted round-robin (nginx's default),
//! least connections per unit of weight, and a consistent hash ring of a request key (client
//! address, a field or a cookie). Pure: the driver keeps the per-worker [`ServerLoad`]s and
//! hands them in.
//!
//! Every method skips a server that passive health took out (`down_until` in the future)
//! and the one a retry just failed on, unless that leaves none: then all are candidates, as
//! nginx does, rather than failing without a try.
#![forbid(unsafe_code)]

use linerate_http1::RequestHead;

use crate::config::{Balance, HashKey, Upstream, UpstreamAddr};

/// Ring points per unit of weight (ketama's 160 spreads keys within a few percent).
const POINTS_PER_WEIGHT: u32 = 160;

/// What a worker knows of one server when it picks.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ServerLoad {
    /// Smooth weighted round-robin's current weight.
    pub current: i64,
    /// Requests in flight to it from this worker.
    pub active: usize,
    /// Passive health: out until then (ms).
    pub down_until: u64,
}

/// A consistent-hash ring: points sorted, each naming its server.
#[derive(Clone, Debug, Default)]
pub(crate) struct Ring(Vec<(u64, u32)>);

impl Ring {
    /// The ring of `up`'s servers (empty unless it balances by hash). A server's points
    /// come from its address, so they stay where they are when others come or go.
    pub(crate) fn build(up: &Upstream) -> Ring {
        if !matches!(up.balance, Balance::Hash(_)) {
            return Ring::default();
        }
        let mut points = Vec::new();
        for (i, s) in up.servers.iter().enumerate() {
            let name = match &s.addr {
                UpstreamAddr::Tcp(a) => a.to_string(),
                UpstreamAddr::Unix(p) => format!("unix:{}", p.display()),
            };
            for n in 0..POINTS_PER_WEIGHT * s.weight.max(1) {
                points.push((fnv1a(format!("{name}-{n}").as_bytes()), i as u32));
            }
        }
        points.sort_unstable();
        Ring(points)
    }
}

/// 64-bit FNV-1a: stable across builds and machines (a ring must not move with the
/// toolchain).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // FNV's low bits mix poorly for short keys; a final avalanche (splitmix64's) spreads
    // them over the ring.
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The hash of the request's key for `key`, or `None` when the request has none (no such
/// field or cookie; no client address on a Unix socket).
pub(crate) fn request_key(
    key: &HashKey,
    head: &RequestHead,
    buf: &[u8],
    peer: Option<std::net::IpAddr>,
) -> Option<u64> {
    match key {
        HashKey::Client => peer.map(|ip| match ip {
            std::net::IpAddr::V4(a) => fnv1a(&a.octets()),
            std::net::IpAddr::V6(a) => fnv1a(&a.octets()),
        }),
        HashKey::Header(name) => head.header(buf, name).map(fnv1a),
        HashKey::Cookie(name) => head
            .headers(buf)
            .filter(|(n, _)| n.eq_ignore_ascii_case(b"cookie"))
            .flat_map(|(_, v)| v.split(|&b| b == b';'))
            .find_map(|pair| {
                let pair = pair.trim_ascii();
                let eq = pair.iter().position(|&b| b == b'=')?;
                (pair[..eq] == *name.as_bytes()).then(|| fnv1a(&pair[eq + 1..]))
            }),
    }
}

/// The server for a request (`key`: its hash key's hash, for [`Balance::Hash`]); `avoid`:
/// the server a try just failed on.
pub(crate) fn pick(
    up: &Upstream,
    ring: &Ring,
    servers: &mut [ServerLoad],
    now: u64,
    avoid: Option<usize>,
    key: Option<u64>,
) -> usize {
    if servers.len() <= 1 {
        return 0;
    }
    let usable = |i: usize, s: &ServerLoad| s.down_until <= now && Some(i) != avoid;
    let any = servers.iter().enumerate().any(|(i, s)| usable(i, s));
    let ok = |i: usize, s: &ServerLoad| !any || usable(i, s);
    match (&up.balance, key) {
        (Balance::Hash(_), Some(k)) if !ring.0.is_empty() => {
            let start = ring.0.partition_point(|&(p, _)| p < k);
            let n = ring.0.len();
            (0..n)
                .map(|j| ring.0[(start + j) % n].1 as usize)
                .find(|&i| ok(i, &servers[i]))
                .unwrap_or(ring.0[start % n].1 as usize)
        }
        (Balance::LeastConn, _) => {
            // The fewest in flight per unit of weight: a/wa < b/wb as a*wb < b*wa.
            let weight = |i: usize| u64::from(up.servers[i].weight.max(1));
            let mut best: Option<usize> = None;
            for (i, s) in servers.iter().enumerate() {
                if !ok(i, s) {
                    continue;
                }
                best = match best {
                    Some(b)
                        if (servers[b].active as u64) * weight(i)
                            <= (s.active as u64) * weight(b) =>
                    {
                        Some(b)
                    }
                    _ => Some(i),
                };
            }
            let b = best.unwrap_or(0);
            let least = servers[b].active as u64;
            // Ties go round-robin among the tied.
            let tied = |i: usize, s: &ServerLoad| {
                ok(i, s) && (s.active as u64) * weight(b) == least * weight(i)
            };
            round_robin(up, servers, tied)
        }
        _ => round_robin(up, servers, ok),
    }
}

/// Smooth weighted round-robin over the servers `eligible` admits: every one gains its
/// weight, the highest is picked and pays the total, so weights 5:1:1 go a a b a c a a, not
/// a a a a a b c.
fn round_robin(
    up: &Upstream,
    servers: &mut [ServerLoad],
    eligible: impl Fn(usize, &ServerLoad) -> bool,
) -> usize {
    let (mut total, mut best, mut max) = (0i64, 0, i64::MIN);
    for (i, (s, conf)) in servers.iter_mut().zip(&up.servers).enumerate() {
        if !eligible(i, s) {
            continue;
        }
        let w = i64::from(conf.weight.max(1));
        s.current += w;
        total += w;
        if s.current > max {
            max = s.current;
            best = i;
        }
    }
    servers[best].current -= total;
    best
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::config::UpstreamServer;

    /// An upstream of servers 127.0.0.1:9000… with these weights.
    pub(crate) fn upstream(weights: &[u32], balance: Balance) -> Upstream {
        let servers = weights
            .iter()
            .enumerate()
            .map(|(i, &weight)| UpstreamServer {
                addr: UpstreamAddr::Tcp(([127, 0, 0, 1], 9000 + i as u16).into()),
                weight,
            })
            .collect();
        let mut up = Upstream::new("u", servers);
        up.balance = balance;
        up
    }

    fn loads(n: usize) -> Vec<ServerLoad> {
        vec![ServerLoad::default(); n]
    }

    #[test]
    fn weighted_round_robin_is_smooth_and_exact() {
        let up = upstream(&[5, 1, 1], Balance::RoundRobin);
        let mut s = loads(3);
        let ring = Ring::build(&up);
        let order: Vec<usize> = (0..7)
            .map(|_| pick(&up, &ring, &mut s, 0, None, None))
            .collect();
        assert_eq!(order, [0, 0, 1, 0, 2, 0, 0], "nginx's sequence for 5:1:1");
    }

    #[test]
    fn down_and_avoided_servers_are_skipped_unless_all_are() {
        let up = upstream(&[1, 1], Balance::RoundRobin);
        let ring = Ring::default();
        let mut s = loads(2);
        s[0].down_until = 2_000;
        let order: Vec<usize> = (0..4)
            .map(|_| pick(&up, &ring, &mut s, 1_500, None, None))
            .collect();
        assert_eq!(order, [1, 1, 1, 1]);
        assert!(
            (0..4).any(|_| pick(&up, &ring, &mut s, 2_000, None, None) == 0),
            "back"
        );
        s[1].down_until = 9_000;
        s[0].down_until = 9_000;
        let all: Vec<usize> = (0..2)
            .map(|_| pick(&up, &ring, &mut s, 3_000, None, None))
            .collect();
        assert_eq!(all.len(), 2, "every server down: one is still tried");
        let mut s = loads(2);
        assert_eq!(pick(&up, &ring, &mut s, 0, Some(0), None), 1);
        assert_eq!(pick(&up, &ring, &mut s, 0, Some(0), None), 1);
    }

    #[test]
    fn least_conn_takes_the_least_busy_per_weight_and_rotates_ties() {
        let up = upstream(&[1, 1, 2], Balance::LeastConn);
        let ring = Ring::default();
        let mut s = loads(3);
        s[0].active = 3;
        s[1].active = 1;
        s[2].active = 4; // 4/2 = 2 per weight
        assert_eq!(pick(&up, &ring, &mut s, 0, None, None), 1);
        s[1].active = 2; // 2/1 = 4/2: a tie, taken in turn
        let order: Vec<usize> = (0..3)
            .map(|_| pick(&up, &ring, &mut s, 0, None, None))
            .collect();
        assert!(
            order.contains(&1) && order.contains(&2) && !order.contains(&0),
            "{order:?}"
        );
        // A down server is left out however idle it is.
        s[0].active = 0;
        s[0].down_until = 10;
        assert_ne!(pick(&up, &ring, &mut s, 5, None, None), 0);
    }

    #[test]
    fn a_hash_sends_a_key_to_one_server_and_moves_few_keys_when_a_server_goes() {
        let three = upstream(&[1, 1, 1], Balance::Hash(HashKey::Client));
        let ring3 = Ring::build(&three);
        let mut s = loads(3);
        let keys: Vec<u64> = (0..3000u32).map(|k| fnv1a(&k.to_be_bytes())).collect();
        let first: Vec<usize> = keys
            .iter()
            .map(|&k| pick(&three, &ring3, &mut s, 0, None, Some(k)))
            .collect();
        let again: Vec<usize> = keys
            .iter()
            .map(|&k| pick(&three, &ring3, &mut s, 0, None, Some(k)))
            .collect();
        assert_eq!(first, again, "the same key, the same server");
        for server in 0..3 {
            let share = first.iter().filter(|&&i| i == server).count();
            assert!(
                (700..1300).contains(&share),
                "server {server} got {share} of 3000"
            );
        }
        // Server 2 down: only its keys move, the others stay.
        s[2].down_until = 100;
        let moved = keys
            .iter()
            .zip(&first)
            .filter(|&(&k, &was)| pick(&three, &ring3, &mut s, 50, None, Some(k)) != was)
            .count();
        let owned_by_2 = first.iter().filter(|&&i| i == 2).count();
        assert_eq!(moved, owned_by_2);
        // A request without the key goes round-robin.
        let mut s = loads(3);
        let order: Vec<usize> = (0..3)
            .map(|_| pick(&three, &ring3, &mut s, 0, None, None))
            .collect();
        assert_eq!(order, [0, 1, 2]);
    }

    #[test]
    fn request_keys_come_from_the_address_a_field_or_a_cookie() {
        let mut head = RequestHead::new();
        let buf = b"GET / HTTP/1.1\r\nHost: a\r\nX-User: 42\r\nCookie: a=1; sid=xyz; b=2\r\n\r\n";
        head.parse(buf, &Default::default()).unwrap();
        let peer = Some(std::net::IpAddr::from([10, 0, 0, 1]));
        assert_eq!(
            request_key(&HashKey::Client, &head, buf, peer),
            Some(fnv1a(&[10, 0, 0, 1]))
        );
        assert_eq!(request_key(&HashKey::Client, &head, buf, None), None);
        assert_eq!(
            request_key(&HashKey::Header("x-user".into()), &head, buf, peer),
            Some(fnv1a(b"42"))
        );
        assert_eq!(
            request_key(&HashKey::Cookie("sid".into()), &head, buf, peer),
            Some(fnv1a(b"xyz"))
        );
        assert_eq!(
            request_key(&HashKey::Cookie("none".into()), &head, buf, peer),
            None
        );
    }
}
