//! A mount's bypass and no-store rules: which requests are not answered from
//! the store (`bypass`, nginx's `proxy_cache_bypass`; their answers are still stored) and
//! whose answers are not stored (`no_store`, nginx's `proxy_no_cache`; they may still be
//! answered from the store). Both together are Varnish's `pass`. A rule reads the request
//! alone: a cookie's or a field's presence or value, a path prefix, a method.

use crate::facts::Request;
use crate::fields::Field;

/// One rule: what a request must have for it to apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rule {
    /// The cookie `NAME` is sent (any value, empty included).
    Cookie(Box<[u8]>),
    /// A Cookie field is sent at all.
    AnyCookie,
    /// The field `NAME` (lower case) is sent; with a value, one of its lines is that value
    /// (its surrounding whitespace trimmed).
    Header(Box<[u8]>, Option<Box<[u8]>>),
    /// The target's path starts with this (bytes as sent, never decoded).
    Path(Box<[u8]>),
    /// The method is this one (methods are case-sensitive, RFC 9110 §9.1).
    Method(Box<[u8]>),
}

impl Rule {
    /// Whether `req` has what the rule names.
    pub fn matches(&self, req: &Request<'_>) -> bool {
        match self {
            Rule::Cookie(name) => has_cookie(req.fields, name),
            Rule::AnyCookie => req
                .fields
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case(b"cookie")),
            Rule::Header(name, value) => req.fields.iter().any(|(n, v)| {
                n.eq_ignore_ascii_case(name) && value.as_deref().is_none_or(|x| v.trim_ascii() == x)
            }),
            Rule::Path(prefix) => path(req.target).starts_with(prefix),
            Rule::Method(m) => req.method == &m[..],
        }
    }
}

/// A mount's two lists of rules.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestRules {
    /// A request any of these match is not answered from the store, nor collapsed.
    pub bypass: Vec<Rule>,
    /// The answer to a request any of these match is not stored.
    pub no_store: Vec<Rule>,
}

impl RequestRules {
    /// Whether `req` bypasses the store (not inlined into a plan: a mount without rules
    /// pays nothing for it).
    #[inline(never)]
    pub fn bypass(&self, req: &Request<'_>) -> bool {
        self.bypass.iter().any(|r| r.matches(req))
    }

    /// Whether `req`'s answer must not be stored.
    pub fn no_store(&self, req: &Request<'_>) -> bool {
        self.no_store.iter().any(|r| r.matches(req))
    }
}

/// The path of an origin-form or absolute-form target (the query left out).
fn path(target: &[u8]) -> &[u8] {
    let t = match target.windows(3).position(|w| w == b"://") {
        Some(i) if target.first() != Some(&b'/') => {
            let rest = &target[i + 3..];
            &rest[rest.iter().position(|&b| b == b'/').unwrap_or(rest.len())..]
        }
        _ => target,
    };
    &t[..t.iter().position(|&b| b == b'?').unwrap_or(t.len())]
}

/// Whether a Cookie field names the cookie `name` (RFC 6265 §5.4 pairs split on `;`).
fn has_cookie(fields: &[Field<'_>], name: &[u8]) -> bool {
    fields
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(b"cookie"))
        .flat_map(|(_, v)| v.split(|&b| b == b';'))
        .any(|pair| {
            let pair = pair.trim_ascii();
            let n = pair.split(|&b| b == b'=').next().unwrap_or_default();
            n.trim_ascii() == name
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(method: &'a [u8], target: &'a [u8], fields: &'a [Field<'a>]) -> Request<'a> {
        Request {
            method,
            scheme: b"http",
            authority: b"t",
            target,
            fields,
            body: false,
        }
    }

    #[test]
    fn rules_match_what_they_name_and_nothing_else() {
        let sid = Rule::Cookie(b"sessionid"[..].into());
        let f: &[Field<'_>] = &[(b"Cookie", b"a=1; sessionid=x"), (b"X-Debug", b" 1 ")];
        assert!(sid.matches(&req(b"GET", b"/", f)));
        assert!(!sid.matches(&req(
            b"GET",
            b"/",
            &[(b"Cookie", b"sessionidx=1; b=sessionid")]
        )));
        assert!(Rule::AnyCookie.matches(&req(b"GET", b"/", f)));
        assert!(!Rule::AnyCookie.matches(&req(b"GET", b"/", &[])));
        let debug = Rule::Header(b"x-debug"[..].into(), Some(b"1"[..].into()));
        assert!(debug.matches(&req(b"GET", b"/", f)));
        assert!(!debug.matches(&req(b"GET", b"/", &[(b"x-debug", b"0")])));
        let present = Rule::Header(b"authorization"[..].into(), None);
        assert!(present.matches(&req(b"GET", b"/", &[(b"Authorization", b"")])));
        assert!(!present.matches(&req(b"GET", b"/", f)));
        let admin = Rule::Path(b"/admin/"[..].into());
        assert!(admin.matches(&req(b"GET", b"/admin/x?y", &[])));
        assert!(admin.matches(&req(b"GET", b"http://t/admin/x", &[])));
        assert!(!admin.matches(&req(b"GET", b"/x?/admin/", &[])));
        assert!(!admin.matches(&req(b"GET", b"/Admin/", &[])));
        let head = Rule::Method(b"HEAD"[..].into());
        assert!(head.matches(&req(b"HEAD", b"/", &[])) && !head.matches(&req(b"GET", b"/", &[])));
    }
}
