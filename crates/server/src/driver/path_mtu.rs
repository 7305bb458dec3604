//! The ceiling of a QUIC connection's path MTU discovery: the largest UDP payload the
//! kernel's route to the client carries (the route's MTU, or what the kernel learnt of the
//! path since, less the IP and UDP headers).
//!
//! quinn-proto searches between 1,200 bytes and this ceiling with padded probes (RFC 8899's
//! DPLPMTUD, RFC 9000 §14.3), and never above the client's `max_udp_payload_size`. A
//! ceiling fixed at Ethernet's 1,452 bytes (quinn-proto's default) leaves a loopback or
//! jumbo-frame path cutting a 64 KiB answer into ~46 datagrams where 9 would do, each
//! with its own packet protection, acknowledgment and socket work; and a fixed ceiling above
//! a tunnel's MTU wastes a probe on every connection. The route knows: a UDP socket
//! connected to the client (connect sends nothing) reads it with IP_MTU or IPV6_MTU. Probes
//! still decide, since a router beyond the first hop may carry less, except for a client on
//! a loopback address, whose whole path is the loopback interface. The ceiling stops at
//! [`MAX_CEILING`], 7,360 bytes: the first flight stays RFC 9002's 14,720 bytes, and probing
//! higher costs more than it saves.
#![forbid(unsafe_code)]

use std::net::{IpAddr, SocketAddr};

use rustix::net::{AddressFamily, SocketFlags, SocketType, sockopt};

/// The smallest datagram every QUIC path carries (RFC 9000 §14).
pub(crate) const MIN_PAYLOAD: u16 = 1200;
/// The largest UDP payload QUIC allows (RFC 9000 §18.2's `max_udp_payload_size` limit): what
/// the server accepts from clients.
pub(crate) const MAX_PAYLOAD: u16 = 65_527;
/// The highest ceiling: half of RFC 9002's initial window (14,720 bytes), so that window still
/// holds two whole datagrams and the first flight stays 14,720 bytes at any datagram size (the
/// window becomes twice the datagram when that is more). Higher would also cost every
/// connection more probing (quinn-proto searches from 1,200 bytes up with padded datagrams of
/// the sizes tried): on loopback a 65,507-byte ceiling made a one-request connection cost
/// CPU 0 ~1.3× what it cost with 1,452, and a 64 KiB answer no less than ~9,000 did
/// (docs/benchmarks.md, HTTP/3's "datagrams as large as the path carries").
pub(crate) const MAX_CEILING: u16 = 7_360;

/// How large a connection's datagrams may grow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ceiling {
    /// The largest UDP payload, between [`MIN_PAYLOAD`] and [`MAX_CEILING`].
    pub bytes: u16,
    /// The path may carry less than its first hop: probe up to `bytes`. False for a client on
    /// a loopback address, whose path is this host's loopback interface: it carries what the
    /// route says, so datagrams start at that size and nothing is probed.
    pub probe: bool,
}

/// The largest UDP payload the route to `peer` carries; `None` when there is no route or the
/// socket calls fail. An IPv4-mapped IPv6 peer (a dual-stack listener's IPv4 client) is
/// looked up as the IPv4 address it is.
pub(crate) fn ceiling(peer: SocketAddr) -> Option<Ceiling> {
    let peer = SocketAddr::new(peer.ip().to_canonical(), peer.port());
    let (family, headers) = match peer.ip() {
        IpAddr::V4(_) => (AddressFamily::INET, 20 + 8),
        IpAddr::V6(_) => (AddressFamily::INET6, 40 + 8),
    };
    let fd =
        rustix::net::socket_with(family, SocketType::DGRAM, SocketFlags::CLOEXEC, None).ok()?;
    rustix::net::connect(&fd, &peer).ok()?;
    let mtu = match peer {
        SocketAddr::V4(_) => sockopt::ip_mtu(&fd),
        SocketAddr::V6(_) => sockopt::ipv6_mtu(&fd),
    }
    .ok()?;
    // An IPv4 packet's total length is 16 bits, the header included.
    let packet = mtu.min(u32::from(u16::MAX));
    let payload = packet.saturating_sub(headers);
    Some(Ceiling {
        bytes: payload.clamp(u32::from(MIN_PAYLOAD), u32::from(MAX_CEILING)) as u16,
        probe: !peer.ip().is_loopback(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The loopback interface's MTU, as the kernel lists it.
    fn lo_mtu() -> u32 {
        std::fs::read_to_string("/sys/class/net/lo/mtu")
            .expect("/sys/class/net/lo/mtu")
            .trim()
            .parse()
            .unwrap()
    }

    #[test]
    fn loopback_routes_carry_the_loopback_mtu_less_the_headers_up_to_the_cap() {
        let lo = lo_mtu();
        let known = |bytes: u32| {
            Some(Ceiling {
                bytes: bytes.clamp(1200, 7_360) as u16,
                probe: false,
            })
        };
        let v4 = known(lo.min(65_535) - 28);
        assert_eq!(ceiling("127.0.0.1:443".parse().unwrap()), v4);
        assert_eq!(ceiling("127.1.2.3:443".parse().unwrap()), v4);
        // A dual-stack socket's IPv4 client is an IPv4 route.
        assert_eq!(ceiling("[::ffff:127.0.0.1]:443".parse().unwrap()), v4);
        if std::net::UdpSocket::bind("[::1]:0").is_ok() {
            assert_eq!(
                ceiling("[::1]:443".parse().unwrap()),
                known(lo.min(65_535) - 48)
            );
        }
    }
}
