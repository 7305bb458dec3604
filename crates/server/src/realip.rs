//! The client's address behind trusted proxies (nginx's `real_ip`, caddy's
//! `trusted_proxies`): when a request comes from an address in the trusted ranges, the
//! configured field (`X-Forwarded-For`, `Forwarded`'s `for=`, or `X-Real-IP`) names the
//! client instead.
//!
//! The list is read from the right (the nearest hop first): each trusted address is
//! skipped, and the first address that is not trusted is the client. An entry that is not an
//! address (`unknown`, an obfuscated `_name`, garbage) stops the walk at the last address
//! read, so a client can never put a chosen address past a malformed one. When every entry
//! is trusted, the leftmost is the client. Several fields of the name count as one list in
//! their order (RFC 9110 §5.3).
//!
//! Pure: the caller says whether the connection's own address is trusted and passes the
//! request's fields; nothing here touches a connection.
#![forbid(unsafe_code)]

use std::net::{IpAddr, SocketAddr};

use crate::access::IpRange;

/// The field a trusted proxy names the client in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RealIpField {
    /// `X-Forwarded-For: client, proxy1, proxy2` (the de facto standard).
    #[default]
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=client;proto=https, for="[2001:db8::1]:443"`.
    Forwarded,
    /// `X-Real-IP: client` (one address; the last such field counts).
    XRealIp,
}

impl RealIpField {
    /// `"x-forwarded-for"`, `"forwarded"` or `"x-real-ip"` (any case).
    pub fn parse(s: &str) -> Result<RealIpField, String> {
        match s.to_ascii_lowercase().as_str() {
            "x-forwarded-for" => Ok(RealIpField::XForwardedFor),
            "forwarded" => Ok(RealIpField::Forwarded),
            "x-real-ip" => Ok(RealIpField::XRealIp),
            _ => Err(format!(
                "{s:?}: the client's field is X-Forwarded-For, Forwarded or X-Real-IP"
            )),
        }
    }

    fn name(self) -> &'static [u8] {
        match self {
            RealIpField::XForwardedFor => b"x-forwarded-for",
            RealIpField::Forwarded => b"forwarded",
            RealIpField::XRealIp => b"x-real-ip",
        }
    }
}

/// The proxies in front whose word on the client is taken.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    pub ranges: Vec<IpRange>,
    pub field: RealIpField,
}

impl TrustedProxies {
    /// Whether any proxy is trusted.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Whether `ip` is one of the trusted proxies.
    pub fn trusts(&self, ip: IpAddr) -> bool {
        self.ranges.iter().any(|r| r.contains(ip))
    }

    /// The client of a request whose connection is from `hop`, with these `fields` (name,
    /// value): `hop` itself unless it is trusted and its field names someone else (port 0:
    /// the fields carry no usable port).
    pub fn client<'b>(
        &self,
        hop: SocketAddr,
        fields: impl Iterator<Item = (&'b [u8], &'b [u8])>,
    ) -> SocketAddr {
        if !self.trusts(hop.ip()) {
            return hop;
        }
        let name = self.field.name();
        let values: Vec<&[u8]> = fields
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
            .collect();
        let mut entries: Vec<&[u8]> = Vec::new();
        match self.field {
            RealIpField::XRealIp => entries.extend(values.last()),
            RealIpField::XForwardedFor => {
                for v in &values {
                    entries.extend(v.split(|&b| b == b','));
                }
            }
            RealIpField::Forwarded => {
                for v in &values {
                    entries.extend(split_unquoted(v, b',').into_iter().map(forwarded_for));
                }
            }
        }
        let mut client = hop;
        for entry in entries.iter().rev() {
            let Some(ip) = address(entry) else {
                break;
            };
            client = SocketAddr::new(ip, 0);
            if !self.trusts(ip) {
                break;
            }
        }
        client
    }
}

/// `s` split at `sep` outside double quotes.
fn split_unquoted(s: &[u8], sep: u8) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, &b) in s.iter().enumerate() {
        if escaped {
            escaped = false;
        } else if quoted && b == b'\\' {
            escaped = true;
        } else if b == b'"' {
            quoted = !quoted;
        } else if b == sep && !quoted {
            out.push(&s[start..i]);
            start = i + 1;
        }
    }
    out.push(&s[start..]);
    out
}

/// A `Forwarded` element's `for=` value (empty when it has none: not an address).
fn forwarded_for(element: &[u8]) -> &[u8] {
    split_unquoted(element, b';')
        .into_iter()
        .find_map(|pair| {
            let pair = pair.trim_ascii();
            (pair.len() > 4 && pair[..4].eq_ignore_ascii_case(b"for=")).then(|| &pair[4..])
        })
        .unwrap_or_default()
}

/// One list entry as an address: `192.0.2.1`, `2001:db8::1`, `192.0.2.1:80`,
/// `[2001:db8::1]` or `[2001:db8::1]:80`, optionally quoted; anything else is `None`.
fn address(entry: &[u8]) -> Option<IpAddr> {
    let mut e = entry.trim_ascii();
    if e.len() >= 2 && e[0] == b'"' && e[e.len() - 1] == b'"' {
        e = &e[1..e.len() - 1];
    }
    let e = std::str::from_utf8(e).ok()?;
    if let Some(rest) = e.strip_prefix('[') {
        let (ip, after) = rest.split_once(']')?;
        if !(after.is_empty() || port(after.strip_prefix(':')?)) {
            return None;
        }
        return ip.parse::<std::net::Ipv6Addr>().ok().map(IpAddr::V6);
    }
    if let Ok(ip) = e.parse::<IpAddr>() {
        return Some(ip);
    }
    let (ip, p) = e.split_once(':')?;
    port(p).then_some(())?;
    ip.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

fn port(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 5
        && s.bytes().all(|b| b.is_ascii_digit())
        && s.parse::<u16>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trusted(field: RealIpField) -> TrustedProxies {
        TrustedProxies {
            ranges: ["10.0.0.0/8", "::1"]
                .iter()
                .map(|r| IpRange::parse(r).unwrap())
                .collect(),
            field,
        }
    }

    /// A request's fields, as (name, value).
    type Fields<'a> = &'a [(&'a str, &'a str)];

    fn ip(s: &str) -> String {
        s.to_string()
    }

    /// The client found for a request from `hop` with `fields`, as an IP string.
    fn client(t: &TrustedProxies, hop: &str, fields: &[(&str, &str)]) -> String {
        let hop: SocketAddr = hop.parse().unwrap();
        let fields = fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes()));
        t.client(hop, fields).ip().to_string()
    }

    #[test]
    fn x_forwarded_for_table() {
        let t = trusted(RealIpField::XForwardedFor);
        let xff = "X-Forwarded-For";
        let cases: &[(&str, Fields, &str)] = &[
            // An untrusted hop's field is never read.
            ("192.0.2.9:1", &[(xff, "203.0.113.1")], "192.0.2.9"),
            ("10.0.0.2:1", &[(xff, "203.0.113.1")], "203.0.113.1"),
            ("10.0.0.2:1", &[], "10.0.0.2"),
            // The rightmost untrusted entry: what the client wrote on the left is skipped.
            (
                "10.0.0.2:1",
                &[(xff, "1.1.1.1, 203.0.113.1, 10.0.0.3")],
                "203.0.113.1",
            ),
            // Two fields are one list, in order.
            (
                "10.0.0.2:1",
                &[(xff, "1.1.1.1"), (xff, "203.0.113.1")],
                "203.0.113.1",
            ),
            // Every entry trusted: the leftmost.
            ("10.0.0.2:1", &[(xff, "10.0.0.7, 10.0.0.3")], "10.0.0.7"),
            // A malformed entry stops the walk at the last address read.
            (
                "10.0.0.2:1",
                &[(xff, "1.1.1.1, junk, 10.0.0.3")],
                "10.0.0.3",
            ),
            ("10.0.0.2:1", &[(xff, "1.1.1.1, ")], "10.0.0.2"),
            ("10.0.0.2:1", &[(xff, "203.0.113.1:4711")], "203.0.113.1"),
            ("10.0.0.2:1", &[(xff, "[2001:db8::1]:4711")], "2001:db8::1"),
            ("10.0.0.2:1", &[(xff, "2001:db8::1")], "2001:db8::1"),
            ("10.0.0.2:1", &[(xff, "203.0.113.1:99999")], "10.0.0.2"),
            ("[::1]:5", &[(xff, "203.0.113.1")], "203.0.113.1"),
            // A dual-stack socket's IPv4 hop is matched as IPv4.
            (
                "[::ffff:10.0.0.2]:5",
                &[(xff, "203.0.113.1")],
                "203.0.113.1",
            ),
            // Other fields are not read.
            (
                "10.0.0.2:1",
                &[("Forwarded", "for=203.0.113.1")],
                "10.0.0.2",
            ),
        ];
        for (hop, fields, want) in cases {
            assert_eq!(client(&t, hop, fields), ip(want), "{hop} {fields:?}");
        }
    }

    #[test]
    fn forwarded_table() {
        let t = trusted(RealIpField::Forwarded);
        let f = "Forwarded";
        let cases: &[(Fields, &str)] = &[
            (&[(f, "for=203.0.113.1")], "203.0.113.1"),
            (
                &[(f, "For=\"[2001:db8::1]:4711\";proto=https")],
                "2001:db8::1",
            ),
            (
                &[(f, "for=1.1.1.1, for=203.0.113.1;by=10.0.0.2")],
                "203.0.113.1",
            ),
            (&[(f, "proto=https;for=203.0.113.1")], "203.0.113.1"),
            (&[(f, "for=unknown")], "10.0.0.2"),
            (&[(f, "for=_hidden, for=10.0.0.3")], "10.0.0.3"),
            // A comma inside quotes does not split elements.
            (
                &[(f, "for=1.1.1.1;x=\"a,b\", for=203.0.113.1")],
                "203.0.113.1",
            ),
            (&[(f, "by=10.0.0.9")], "10.0.0.2"),
        ];
        for (fields, want) in cases {
            assert_eq!(client(&t, "10.0.0.2:1", fields), ip(want), "{fields:?}");
        }
    }

    #[test]
    fn x_real_ip_takes_the_last_field() {
        let t = trusted(RealIpField::XRealIp);
        let r = "X-Real-IP";
        assert_eq!(
            client(&t, "10.0.0.2:1", &[(r, "203.0.113.1")]),
            "203.0.113.1"
        );
        assert_eq!(
            client(&t, "10.0.0.2:1", &[(r, "1.1.1.1"), (r, "203.0.113.1")]),
            "203.0.113.1"
        );
        assert_eq!(
            client(&t, "10.0.0.2:1", &[(r, "1.1.1.1, 2.2.2.2")]),
            "10.0.0.2"
        );
        assert_eq!(
            client(&t, "192.0.2.1:1", &[(r, "203.0.113.1")]),
            "192.0.2.1"
        );
    }

    #[test]
    fn field_names() {
        assert_eq!(
            RealIpField::parse("X-Forwarded-For"),
            Ok(RealIpField::XForwardedFor)
        );
        assert_eq!(RealIpField::parse("forwarded"), Ok(RealIpField::Forwarded));
        assert_eq!(RealIpField::parse("X-REAL-IP"), Ok(RealIpField::XRealIp));
        assert!(RealIpField::parse("Client-IP").is_err());
    }
}
