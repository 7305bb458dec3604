//! The PROXY protocol header (HAProxy's, versions 1 and 2): the preamble an L4 balancer
//! (HAProxy `send-proxy`/`send-proxy-v2`, an AWS NLB, Envoy, Traefik) writes before the
//! client's first byte, naming the client's address. Not HTTP, but a wire parser of the same
//! kind as the rest of this crate: bytes in, a verdict out, no I/O, fuzzed.
//!
//! Strict, because whoever can send this header chooses the address that logs, access rules
//! and rate limits believe: a listener that expects it refuses a connection whose first bytes
//! are anything else, and every field is checked (v1: exact single spaces, addresses of the
//! named family, ports in decimal without leading zeros, the CRLF within 107 bytes; v2: the
//! version, command, family and transport, the address block's length, and TLVs that tile
//! the rest exactly).
//!
//! ```
//! use linerate_http1::proxy_protocol::{parse, Source};
//!
//! let buf = b"PROXY TCP4 192.0.2.7 10.0.0.1 56324 443\r\nGET / HTTP/1.1\r\n";
//! let (source, n) = parse(buf).unwrap().unwrap();
//! assert_eq!(source, Source::Addr("192.0.2.7:56324".parse().unwrap()));
//! assert!(buf[n..].starts_with(b"GET"));
//! assert!(parse(b"PROXY TCP4 192.0.2.7").unwrap().is_none()); // more bytes needed
//! assert!(parse(b"GET / HTTP/1.1\r\n").is_err());
//! ```
#![forbid(unsafe_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The longest version 1 header, CRLF included (the specification's bound).
pub const V1_MAX_LEN: usize = 107;
/// The longest version 2 header we take, its 16 fixed bytes included. The specification
/// allows 64 KiB of TLVs; balancers send tens of bytes (HAProxy's SSL TLVs a few hundred).
pub const V2_MAX_LEN: usize = 4096;

/// The 12 bytes a version 2 header starts with.
const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";
const V1_PREFIX: &[u8; 6] = b"PROXY ";

/// Whose address the connection is from, per the header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The client's address and port.
    Addr(SocketAddr),
    /// Keep the connection's own address: v2 `LOCAL` (the balancer's health check), v1
    /// `UNKNOWN`, or v2 `UNSPEC`.
    Connection,
    /// A client on a Unix socket on the balancer's side: no IP address to give.
    Unix,
}

/// Why a header is refused; every one closes the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProxyError {
    /// The first bytes are not a PROXY header (a client that came around the balancer).
    Missing,
    /// A PROXY header that breaks the specification: the reason.
    Malformed(&'static str),
    /// Longer than [`V1_MAX_LEN`] or [`V2_MAX_LEN`].
    TooLong,
}

impl std::fmt::Display for ProxyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProxyError::Missing => f.write_str("no PROXY protocol header"),
            ProxyError::Malformed(why) => write!(f, "malformed PROXY protocol header: {why}"),
            ProxyError::TooLong => f.write_str("PROXY protocol header too long"),
        }
    }
}

impl std::error::Error for ProxyError {}

/// Reads a header at the start of `buf`: `Ok(None)` while more bytes are needed (every byte
/// so far fits a header), `Ok(Some((source, len)))` once complete, `len` being the header's
/// length (the connection's own bytes follow).
pub fn parse(buf: &[u8]) -> Result<Option<(Source, usize)>, ProxyError> {
    let n = buf.len().min(V2_SIGNATURE.len());
    if buf[..n] == V2_SIGNATURE[..n] {
        return if n < V2_SIGNATURE.len() {
            Ok(None)
        } else {
            v2(buf)
        };
    }
    let n = buf.len().min(V1_PREFIX.len());
    if buf[..n] == V1_PREFIX[..n] {
        return if n < V1_PREFIX.len() {
            Ok(None)
        } else {
            v1(buf)
        };
    }
    Err(ProxyError::Missing)
}

fn v1(buf: &[u8]) -> Result<Option<(Source, usize)>, ProxyError> {
    let window = &buf[..buf.len().min(V1_MAX_LEN)];
    let Some(cr) = window.iter().position(|&b| b == b'\r' || b == b'\n') else {
        return if buf.len() >= V1_MAX_LEN {
            Err(ProxyError::TooLong)
        } else {
            Ok(None)
        };
    };
    if window[cr] == b'\n' {
        return Err(ProxyError::Malformed("a bare LF ends the line"));
    }
    match window.get(cr + 1) {
        None if buf.len() < V1_MAX_LEN => return Ok(None),
        None => return Err(ProxyError::TooLong),
        Some(b'\n') => {}
        _ => return Err(ProxyError::Malformed("a CR without LF")),
    }
    let line = &buf[V1_PREFIX.len()..cr];
    let len = cr + 2;
    let mut parts = line.split(|&b| b == b' ');
    let family = parts.next().unwrap_or_default();
    if family == b"UNKNOWN" {
        // The specification: whatever follows up to the CRLF is ignored.
        return Ok(Some((Source::Connection, len)));
    }
    let v6 = match family {
        b"TCP4" => false,
        b"TCP6" => true,
        _ => {
            return Err(ProxyError::Malformed(
                "the family is not TCP4, TCP6 or UNKNOWN",
            ));
        }
    };
    let fields: Vec<&[u8]> = parts.collect();
    let [src, dst, sport, dport] = fields[..] else {
        return Err(ProxyError::Malformed(
            "not four fields after the family, one space apart",
        ));
    };
    let src = v1_ip(src, v6)?;
    v1_ip(dst, v6)?;
    let sport = v1_port(sport)?;
    v1_port(dport)?;
    Ok(Some((Source::Addr(SocketAddr::new(src, sport)), len)))
}

fn v1_ip(s: &[u8], v6: bool) -> Result<IpAddr, ProxyError> {
    let s = std::str::from_utf8(s).map_err(|_| ProxyError::Malformed("an address is not text"))?;
    let ip = if v6 {
        s.parse::<Ipv6Addr>().map(IpAddr::V6)
    } else {
        // Rust refuses leading zeros ("010.0.0.1"), which some parsers read as octal.
        s.parse::<Ipv4Addr>().map(IpAddr::V4)
    };
    ip.map_err(|_| ProxyError::Malformed("an address is not one of the named family"))
}

fn v1_port(s: &[u8]) -> Result<u16, ProxyError> {
    let bad = ProxyError::Malformed("a port is not 0 to 65535 in decimal, without leading zeros");
    if s.is_empty()
        || s.len() > 5
        || !s.iter().all(u8::is_ascii_digit)
        || (s.len() > 1 && s[0] == b'0')
    {
        return Err(bad);
    }
    s.iter()
        .try_fold(0u32, |n, d| Some(n * 10 + u32::from(d - b'0')))
        .and_then(|n| u16::try_from(n).ok())
        .ok_or(bad)
}

fn v2(buf: &[u8]) -> Result<Option<(Source, usize)>, ProxyError> {
    if buf.len() < 16 {
        // Check what is there already: a wrong version fails at its 13th byte.
        if let Some(&vc) = buf.get(12) {
            v2_command(vc)?;
        }
        return Ok(None);
    }
    let local = v2_command(buf[12])?;
    let family = buf[13];
    let len = 16 + usize::from(u16::from_be_bytes([buf[14], buf[15]]));
    if len > V2_MAX_LEN {
        return Err(ProxyError::TooLong);
    }
    if buf.len() < len {
        return Ok(None);
    }
    let block = &buf[16..len];
    if local {
        // The balancer's own connection (a health check): the block is discarded whole.
        return Ok(Some((Source::Connection, len)));
    }
    let (source, used) = match (family >> 4, family & 0x0f) {
        (0, _) => (Source::Connection, 0),
        (1..=3, 1) => match family >> 4 {
            1 => {
                let a = block
                    .get(..12)
                    .ok_or(ProxyError::Malformed("an IPv4 block shorter than 12 bytes"))?;
                let ip = Ipv4Addr::new(a[0], a[1], a[2], a[3]);
                let port = u16::from_be_bytes([a[8], a[9]]);
                (Source::Addr(SocketAddr::new(ip.into(), port)), 12)
            }
            2 => {
                let a = block
                    .get(..36)
                    .ok_or(ProxyError::Malformed("an IPv6 block shorter than 36 bytes"))?;
                let mut ip = [0u8; 16];
                ip.copy_from_slice(&a[..16]);
                let port = u16::from_be_bytes([a[32], a[33]]);
                (
                    Source::Addr(SocketAddr::new(Ipv6Addr::from(ip).into(), port)),
                    36,
                )
            }
            _ => {
                if block.len() < 216 {
                    return Err(ProxyError::Malformed("a Unix block shorter than 216 bytes"));
                }
                (Source::Unix, 216)
            }
        },
        (1..=3, _) => {
            return Err(ProxyError::Malformed(
                "the transport is not STREAM (this is a TCP listener)",
            ));
        }
        _ => return Err(ProxyError::Malformed("an unknown address family")),
    };
    if source != Source::Connection {
        tlvs(&block[used..])?;
    }
    Ok(Some((source, len)))
}

/// Version 2 and a known command: whether it is `LOCAL`.
fn v2_command(vc: u8) -> Result<bool, ProxyError> {
    match vc {
        0x20 => Ok(true),
        0x21 => Ok(false),
        _ if vc >> 4 != 2 => Err(ProxyError::Malformed("the version is not 2")),
        _ => Err(ProxyError::Malformed("the command is not LOCAL or PROXY")),
    }
}

/// The type-length-value records after the addresses must tile the rest exactly (their
/// contents are not used).
fn tlvs(mut rest: &[u8]) -> Result<(), ProxyError> {
    while !rest.is_empty() {
        let [_, hi, lo, ..] = rest[..] else {
            return Err(ProxyError::Malformed("a TLV cut short"));
        };
        let end = 3 + usize::from(u16::from_be_bytes([hi, lo]));
        rest = rest
            .get(end..)
            .ok_or(ProxyError::Malformed("a TLV longer than the header"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2_header(cmd: u8, fam: u8, block: &[u8]) -> Vec<u8> {
        let mut h = V2_SIGNATURE.to_vec();
        h.push(cmd);
        h.push(fam);
        h.extend_from_slice(&(block.len() as u16).to_be_bytes());
        h.extend_from_slice(block);
        h
    }

    fn inet4_block() -> Vec<u8> {
        let mut b = vec![192, 0, 2, 7, 10, 0, 0, 1];
        b.extend_from_slice(&56324u16.to_be_bytes());
        b.extend_from_slice(&443u16.to_be_bytes());
        b
    }

    fn addr(s: &str) -> Source {
        Source::Addr(s.parse().unwrap())
    }

    /// What [`parse`] says.
    type Verdict = Result<Option<(Source, usize)>, ProxyError>;

    #[test]
    fn v1_table() {
        let malformed = |s: &'static str| Err(ProxyError::Malformed(s));
        let four = "not four fields after the family, one space apart";
        let port = "a port is not 0 to 65535 in decimal, without leading zeros";
        let family = "an address is not one of the named family";
        let cases: &[(&[u8], Verdict)] = &[
            (
                b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n",
                Ok(Some((addr("1.2.3.4:1"), 32))),
            ),
            (
                b"PROXY TCP6 2001:db8::1 ::1 65535 0\r\nGET",
                Ok(Some((addr("[2001:db8::1]:65535"), 36))),
            ),
            (b"PROXY UNKNOWN\r\n", Ok(Some((Source::Connection, 15)))),
            (
                b"PROXY UNKNOWN ff::1 what ever\r\n",
                Ok(Some((Source::Connection, 31))),
            ),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r", Ok(None)),
            (b"PROXY TCP4 1.2.3.4", Ok(None)),
            (b"PROX", Ok(None)),
            (b"", Ok(None)),
            (b"GET / HTTP/1.1\r\n", Err(ProxyError::Missing)),
            (b"proxy TCP4", Err(ProxyError::Missing)),
            (
                b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n",
                malformed("a bare LF ends the line"),
            ),
            (
                b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rX",
                malformed("a CR without LF"),
            ),
            (b"PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n", malformed(four)),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n", malformed(four)),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", malformed(four)),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n", malformed(port)),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n", malformed(port)),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 +1 2\r\n", malformed(port)),
            (b"PROXY TCP4 ::1 5.6.7.8 1 2\r\n", malformed(family)),
            (b"PROXY TCP6 1.2.3.4 ::1 1 2\r\n", malformed(family)),
            (b"PROXY TCP4 01.2.3.4 5.6.7.8 1 2\r\n", malformed(family)),
            (
                b"PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n",
                malformed("the family is not TCP4, TCP6 or UNKNOWN"),
            ),
        ];
        for (input, want) in cases {
            assert_eq!(&parse(input), want, "{:?}", String::from_utf8_lossy(input));
        }
        let mut long = b"PROXY UNKNOWN ".to_vec();
        long.resize(V1_MAX_LEN - 2, b'x');
        long.extend_from_slice(b"\r\n");
        assert_eq!(parse(&long), Ok(Some((Source::Connection, V1_MAX_LEN))));
        long.insert(20, b'x');
        assert_eq!(parse(&long), Err(ProxyError::TooLong));
    }

    #[test]
    fn v2_table() {
        let inet = inet4_block();
        let mut inet6 = vec![0u8; 36];
        inet6[0] = 0x20;
        inet6[1] = 0x01;
        inet6[15] = 9;
        inet6[32..34].copy_from_slice(&8080u16.to_be_bytes());
        let mut tlv = inet.clone();
        tlv.extend_from_slice(&[0x04, 0, 2, 0, 0]); // NOOP, two bytes
        let mut bad_tlv = inet.clone();
        bad_tlv.extend_from_slice(&[0x04, 0, 3, 0]);
        let cases = [
            (
                v2_header(0x21, 0x11, &inet),
                Ok(Some((addr("192.0.2.7:56324"), 28))),
            ),
            (
                v2_header(0x21, 0x21, &inet6),
                Ok(Some((addr("[2001::9]:8080"), 52))),
            ),
            (
                v2_header(0x21, 0x11, &tlv),
                Ok(Some((addr("192.0.2.7:56324"), 33))),
            ),
            (
                v2_header(0x21, 0x31, &[0; 216]),
                Ok(Some((Source::Unix, 232))),
            ),
            (
                v2_header(0x20, 0x00, &[]),
                Ok(Some((Source::Connection, 16))),
            ),
            // LOCAL discards whatever block it carries.
            (
                v2_header(0x20, 0x11, &[1, 2, 3]),
                Ok(Some((Source::Connection, 19))),
            ),
            (
                v2_header(0x21, 0x00, &[]),
                Ok(Some((Source::Connection, 16))),
            ),
            (
                v2_header(0x21, 0x11, &bad_tlv),
                Err(ProxyError::Malformed("a TLV longer than the header")),
            ),
            (
                v2_header(0x21, 0x11, &inet[..11]),
                Err(ProxyError::Malformed("an IPv4 block shorter than 12 bytes")),
            ),
            (
                v2_header(0x21, 0x12, &inet),
                Err(ProxyError::Malformed(
                    "the transport is not STREAM (this is a TCP listener)",
                )),
            ),
            (
                v2_header(0x21, 0x41, &inet),
                Err(ProxyError::Malformed("an unknown address family")),
            ),
            (
                v2_header(0x11, 0x11, &inet),
                Err(ProxyError::Malformed("the version is not 2")),
            ),
            (
                v2_header(0x22, 0x11, &inet),
                Err(ProxyError::Malformed("the command is not LOCAL or PROXY")),
            ),
        ];
        for (input, want) in cases {
            assert_eq!(parse(&input), want, "{input:?}");
        }
        // A wrong version is seen at its byte, before the length.
        assert_eq!(
            parse(&v2_header(0x31, 0x11, &inet)[..13]),
            Err(ProxyError::Malformed("the version is not 2"))
        );
        let mut huge = v2_header(0x21, 0x11, &inet);
        huge[14..16].copy_from_slice(&(V2_MAX_LEN as u16).to_be_bytes());
        assert_eq!(parse(&huge[..16]), Err(ProxyError::TooLong));
    }

    #[test]
    fn every_prefix_of_a_header_asks_for_more() {
        let headers = [
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n".to_vec(),
            v2_header(0x21, 0x11, &inet4_block()),
        ];
        for h in headers {
            for end in 0..h.len() {
                assert_eq!(parse(&h[..end]), Ok(None), "{end} of {h:?}");
            }
            let mut more = h.clone();
            more.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
            assert_eq!(parse(&more).unwrap().unwrap().1, h.len());
        }
    }
}
