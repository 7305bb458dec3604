//! IP access rules (nginx's `allow`/`deny`): per site and path prefix, an ordered list of
//! `allow` and `deny` rules over address ranges (CIDR, IPv4 and IPv6) or `all`; the first rule
//! that matches the client's address decides, and an address no rule matches is allowed. The
//! longest prefix with rules applies to a path. A client whose address is not known (a Unix
//! socket) matches only `all`. An IPv4-mapped IPv6 address (`::ffff:10.0.0.1`, from a
//! dual-stack socket) is matched as the IPv4 address it is.
//!
//! Pure data and matching: parsed once from the configuration, read per request.
#![forbid(unsafe_code)]

use std::fmt;
use std::net::IpAddr;

/// An address range: an address and how many of its leading bits must match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpRange {
    addr: IpAddr,
    bits: u8,
}

impl IpRange {
    /// `10.0.0.0/8`, `2001:db8::/32`, or an address alone (all its bits). The address must
    /// have no bit set past the prefix (`10.0.0.1/8` is refused: it reads as a typo for a
    /// single address or for the network).
    pub fn parse(s: &str) -> Result<IpRange, String> {
        let (addr, bits) = match s.split_once('/') {
            Some((a, b)) => (a, Some(b)),
            None => (s, None),
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("{s:?} is not an IP address or CIDR range"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let bits = match bits {
            None => max,
            Some(b) => b
                .parse::<u8>()
                .ok()
                .filter(|&n| n <= max && !b.starts_with('+'))
                .ok_or_else(|| format!("{s:?}: the prefix length must be 0 to {max}"))?,
        };
        let range = IpRange { addr, bits };
        if range.masked(addr) != addr {
            return Err(format!(
                "{s:?} has bits set past /{bits} (the network is {}/{bits})",
                range.masked(addr)
            ));
        }
        Ok(range)
    }

    /// `addr` with the bits past this range's prefix cleared.
    fn masked(&self, addr: IpAddr) -> IpAddr {
        match addr {
            IpAddr::V4(a) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.bits)).unwrap_or(0);
                IpAddr::V4((u32::from(a) & mask).into())
            }
            IpAddr::V6(a) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.bits))
                    .unwrap_or(0);
                IpAddr::V6((u128::from(a) & mask).into())
            }
        }
    }

    /// Whether `addr` is in the range (an IPv4-mapped IPv6 address counts as IPv4).
    pub fn contains(&self, addr: IpAddr) -> bool {
        let addr = addr.to_canonical();
        addr.is_ipv4() == self.addr.is_ipv4() && self.masked(addr) == self.addr
    }
}

impl fmt::Display for IpRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.bits)
    }
}

/// Who a rule is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    All,
    Range(IpRange),
}

/// One rule: `allow` or `deny`, and who.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    pub allow: bool,
    pub who: Who,
}

impl Rule {
    /// `allow 10.0.0.0/8`, `deny all`, `allow ::1` (one space or more between the two).
    pub fn parse(s: &str) -> Result<Rule, String> {
        let mut words = s.split_ascii_whitespace();
        let allow = match words.next() {
            Some("allow") => true,
            Some("deny") => false,
            _ => {
                return Err(format!(
                    "{s:?}: a rule is \"allow WHO\" or \"deny WHO\" (WHO: all, an address or a CIDR range)"
                ));
            }
        };
        let who = match (words.next(), words.next()) {
            (Some("all"), None) => Who::All,
            (Some(range), None) => Who::Range(IpRange::parse(range)?),
            _ => return Err(format!("{s:?}: one address, range or `all` after the verb")),
        };
        Ok(Rule { allow, who })
    }
}

/// The rules of one path prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Access {
    /// Where they apply: paths starting with it (`/` or empty: the whole site).
    pub prefix: String,
    pub rules: Vec<Rule>,
}

impl Access {
    /// Whether a client at `peer` (`None`: no IP address) may go on: the first matching
    /// rule decides; none matching allows.
    pub fn allows(&self, peer: Option<IpAddr>) -> bool {
        for r in &self.rules {
            let hit = match (r.who, peer) {
                (Who::All, _) => true,
                (Who::Range(range), Some(ip)) => range.contains(ip),
                (Who::Range(_), None) => false,
            };
            if hit {
                return r.allow;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn ranges_parse_and_contain() {
        // (range, address, contained)
        #[rustfmt::skip]
        let rows = [
            ("10.0.0.0/8", "10.255.1.2", true),
            ("10.0.0.0/8", "11.0.0.0", false),
            ("10.0.0.0/8", "::ffff:10.1.2.3", true),
            ("10.0.0.0/8", "::a00:1", false),
            ("0.0.0.0/0", "203.0.113.9", true),
            ("0.0.0.0/0", "::1", false),
            ("127.0.0.1", "127.0.0.1", true),
            ("127.0.0.1", "127.0.0.2", false),
            ("192.168.1.128/25", "192.168.1.200", true),
            ("192.168.1.128/25", "192.168.1.127", false),
            ("2001:db8::/32", "2001:db8:ffff::1", true),
            ("2001:db8::/32", "2001:db9::1", false),
            ("::1", "::1", true),
            ("::/0", "2001:db8::1", true),
            ("::/0", "10.0.0.1", false),
            ("fe80::/10", "febf::1", true),
            ("fe80::/10", "fec0::1", false),
        ];
        for (range, addr, want) in rows {
            let r = IpRange::parse(range).unwrap();
            assert_eq!(r.contains(ip(addr)), want, "{range} contains {addr}");
        }
    }

    #[test]
    fn malformed_ranges_and_rules_are_refused() {
        for bad in [
            "10.0.0.1/8",
            "10.0.0.0/33",
            "10.0.0.0/",
            "10.0.0.0/+8",
            "::1/129",
            "10.0.0",
            "example.com",
            "",
        ] {
            assert!(IpRange::parse(bad).is_err(), "{bad:?}");
        }
        for bad in [
            "permit all",
            "allow",
            "deny 10.0.0.0/8 extra",
            "ALLOW all",
            "allow 1.2.3",
        ] {
            assert!(Rule::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            Rule::parse("deny   all").unwrap(),
            Rule {
                allow: false,
                who: Who::All
            }
        );
    }

    #[test]
    fn the_first_matching_rule_decides_and_none_allows() {
        let access = Access {
            prefix: "/admin".into(),
            rules: [
                "allow 127.0.0.1",
                "deny 10.0.0.0/8",
                "allow 10.1.0.0/16",
                "allow ::1",
                "deny all",
            ]
            .iter()
            .map(|r| Rule::parse(r).unwrap())
            .collect(),
        };
        assert!(access.allows(Some(ip("127.0.0.1"))));
        assert!(access.allows(Some(ip("::ffff:127.0.0.1"))));
        assert!(access.allows(Some(ip("::1"))));
        // 10.1.x.x is denied by the earlier, wider rule.
        assert!(!access.allows(Some(ip("10.1.2.3"))));
        assert!(!access.allows(Some(ip("192.0.2.1"))));
        // No address (a Unix socket): only `all` matches it.
        assert!(!access.allows(None));
        let open = Access {
            prefix: "/".into(),
            rules: vec![Rule::parse("deny 192.0.2.0/24").unwrap()],
        };
        assert!(open.allows(Some(ip("198.51.100.1"))));
        assert!(open.allows(None));
        assert!(!open.allows(Some(ip("192.0.2.77"))));
    }
}
