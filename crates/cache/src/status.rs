//! The Cache-Status field (RFC 9211): one member naming this cache, with `hit` or
//! `fwd=<why>`, and the parameters that say more (`fwd-status`, `ttl`, `stored`, `collapsed`,
//! `detail`). Formats a value; whether the field is sent is the server's option.

/// Why the request went forward (RFC 9211 §2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fwd {
    /// The cache was configured not to handle this request, or it could not be keyed.
    Bypass,
    /// The method is not cacheable.
    Method,
    /// No stored response for the URI.
    UriMiss,
    /// Stored responses for the URI, none for these Vary values.
    VaryMiss,
    /// A stored response that was unusable for another reason (e.g. a 304 mismatch).
    Miss,
    /// The request's directives asked for it (no-cache, max-age, min-fresh).
    Request,
    /// The stored response was stale and had to be validated.
    Stale,
}

impl Fwd {
    pub fn as_str(self) -> &'static str {
        match self {
            Fwd::Bypass => "bypass",
            Fwd::Method => "method",
            Fwd::UriMiss => "uri-miss",
            Fwd::VaryMiss => "vary-miss",
            Fwd::Miss => "miss",
            Fwd::Request => "request",
            Fwd::Stale => "stale",
        }
    }
}

/// One Cache-Status member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheStatus<'a> {
    /// The cache's name (an sf-token or it is quoted): the server's name for itself.
    pub name: &'a str,
    /// `None`: a hit (the answer came from the cache without going forward).
    pub fwd: Option<Fwd>,
    /// The status the next hop answered the forwarded request with.
    pub fwd_status: Option<u16>,
    /// Freshness left, in seconds; negative when served stale.
    pub ttl: Option<i64>,
    /// The forwarded answer was stored.
    pub stored: bool,
    /// The request waited on another's forwarded request (collapsed).
    pub collapsed: bool,
    /// Free text for people: why it was not stored, say (an sf-token or quoted).
    pub detail: Option<&'a str>,
}

impl<'a> CacheStatus<'a> {
    pub fn hit(name: &'a str, ttl: i64) -> Self {
        CacheStatus {
            name,
            fwd: None,
            fwd_status: None,
            ttl: Some(ttl),
            stored: false,
            collapsed: false,
            detail: None,
        }
    }

    pub fn forward(name: &'a str, why: Fwd) -> Self {
        CacheStatus {
            name,
            fwd: Some(why),
            fwd_status: None,
            ttl: None,
            stored: false,
            collapsed: false,
            detail: None,
        }
    }

    /// The start of every hit's value for cache `name` (`name; hit; ttl=`): a server keeps
    /// it and appends each hit's TTL ([`CacheStatus::hit`]'s value, without formatting
    /// the name again).
    pub fn hit_prefix(name: &str) -> Vec<u8> {
        let mut v = Vec::with_capacity(name.len() + 16);
        item(&mut v, name);
        v.extend_from_slice(b"; hit; ttl=");
        v
    }

    /// The field value, as RFC 9211 §2 and RFC 8941 (structured fields) write it.
    pub fn value(&self) -> String {
        String::from_utf8(self.bytes()).expect("only printable ASCII is written")
    }

    /// The field value as bytes (what a server sends; [`CacheStatus::value`] as a `String`).
    pub fn bytes(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(48);
        item(&mut v, self.name);
        match self.fwd {
            None => v.extend_from_slice(b"; hit"),
            Some(f) => {
                v.extend_from_slice(b"; fwd=");
                v.extend_from_slice(f.as_str().as_bytes());
            }
        }
        if let Some(s) = self.fwd_status {
            v.extend_from_slice(b"; fwd-status=");
            v.extend_from_slice(crate::fields::decimal(u64::from(s), &mut [0; 20]));
        }
        if let Some(t) = self.ttl {
            v.extend_from_slice(b"; ttl=");
            if t < 0 {
                v.push(b'-');
            }
            v.extend_from_slice(crate::fields::decimal(t.unsigned_abs(), &mut [0; 20]));
        }
        if self.stored {
            v.extend_from_slice(b"; stored");
        }
        if self.collapsed {
            v.extend_from_slice(b"; collapsed");
        }
        if let Some(d) = self.detail {
            v.extend_from_slice(b"; detail=");
            item(&mut v, d);
        }
        v
    }
}

/// The bytes of an sf-token after its first (RFC 8941 §3.3.4: tchar, `:` and `/`), as a
/// table: one load per byte.
const TOKEN_BYTES: [bool; 128] = {
    let mut t = [false; 128];
    let mut b = 0;
    while b < 128 {
        t[b] = (b as u8).is_ascii_alphanumeric();
        b += 1;
    }
    let extra = b"!#$%&'*+-.^_`|~:/";
    let mut i = 0;
    while i < extra.len() {
        t[extra[i] as usize] = true;
        i += 1;
    }
    t
};

/// An sf-token when `s` is one (RFC 8941 §3.3.4), else an sf-string with `"` and `\` escaped
/// and anything outside printable ASCII left out.
fn item(out: &mut Vec<u8>, s: &str) {
    let b = s.as_bytes();
    let token = b
        .first()
        .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'*')
        && b.iter().all(|&c| c < 128 && TOKEN_BYTES[c as usize]);
    if token {
        out.extend_from_slice(b);
        return;
    }
    out.push(b'"');
    for &c in b.iter().filter(|c| (b' '..=b'~').contains(*c)) {
        if c == b'"' || c == b'\\' {
            out.push(b'\\');
        }
        out.push(c);
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_status_values() {
        // RFC 9211 §2 and its examples.
        assert_eq!(
            CacheStatus::hit("linerate", 376).value(),
            "linerate; hit; ttl=376"
        );
        let miss = CacheStatus {
            fwd_status: Some(200),
            stored: true,
            ..CacheStatus::forward("linerate", Fwd::UriMiss)
        };
        assert_eq!(
            miss.value(),
            "linerate; fwd=uri-miss; fwd-status=200; stored"
        );
        let stale = CacheStatus {
            ttl: Some(-5),
            collapsed: true,
            ..CacheStatus::forward("linerate", Fwd::Stale)
        };
        assert_eq!(stale.value(), "linerate; fwd=stale; ttl=-5; collapsed");
        let detail = CacheStatus {
            detail: Some("set-cookie"),
            ..CacheStatus::forward("edge 1", Fwd::Bypass)
        };
        assert_eq!(detail.value(), "\"edge 1\"; fwd=bypass; detail=set-cookie");
        let quoted = CacheStatus {
            detail: Some("a \"b\"\n"),
            ..CacheStatus::forward("x", Fwd::Method)
        };
        assert_eq!(quoted.value(), "x; fwd=method; detail=\"a \\\"b\\\"\"");
        // A hit's value is its prefix and its TTL.
        for (name, ttl) in [("linerate", 376), ("edge 1", -5)] {
            let mut v = CacheStatus::hit_prefix(name);
            v.extend_from_slice(ttl.to_string().as_bytes());
            assert_eq!(v, CacheStatus::hit(name, ttl).bytes());
        }
    }
}
