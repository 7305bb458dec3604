//! A mount's own cache key (nginx's `proxy_cache_key`): which parts of the
//! URL make the key (scheme, host, port, path, query), query parameters dropped by name or
//! sorted, and a cookie's value or a request field's added. [`key_for`] is the one function
//! that both a request's plan and a purge by URL map a URL through.
//!
//! The key is the default one ([`Key::write`]: checked and normalised as RFC 9111 §4 says)
//! rewritten, so every request the default key refuses is refused here too. Its form stays
//! `scheme://authority/path?query` (a `*` for a left-out scheme, no port when the port is
//! left out), then ` NAME=VALUE` per added part, its value percent-encoded: a target holds
//! no space ([`Key::write`] refuses one), so no URL can forge an added part.

use crate::fields::Field;
use crate::key::{Key, NoKey};

/// The parts a key may name, in the order they are written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRules {
    scheme: bool,
    host: bool,
    port: bool,
    query: bool,
    /// Cookies (`cookie:NAME`) and fields (`header:NAME`, lower case), in the order given.
    added: Vec<Added>,
    /// Query parameter names dropped (`*` matches any run of bytes).
    query_drop: Vec<Box<[u8]>>,
    /// The query's parameters sorted (by bytes; equal names keep their order).
    query_sort: bool,
}

/// A part added to the key from the request's fields.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Added {
    Cookie(Box<[u8]>),
    Header(Box<[u8]>),
}

/// The longest list of parts or dropped names a mount may give (a key is built per request).
pub const MAX_RULES: usize = 32;

impl KeyRules {
    /// The rules of `parts` (`scheme`, `host`, `port`, `path`, `query`, `cookie:NAME`,
    /// `header:NAME`; `path` is required), `query_drop` (names, `*` a wildcard) and
    /// `query_sort`. An error names what is wrong.
    pub fn parse(
        parts: &[String],
        query_drop: &[String],
        query_sort: bool,
    ) -> Result<KeyRules, String> {
        if parts.len() > MAX_RULES || query_drop.len() > MAX_RULES {
            return Err(format!(
                "at most {MAX_RULES} key parts and query_drop names"
            ));
        }
        let mut r = KeyRules {
            scheme: false,
            host: false,
            port: false,
            query: false,
            added: Vec::new(),
            query_drop: Vec::new(),
            query_sort,
        };
        let mut path = false;
        for p in parts {
            let flag = match p.as_str() {
                "scheme" => &mut r.scheme,
                "host" => &mut r.host,
                "port" => &mut r.port,
                "path" => &mut path,
                "query" => &mut r.query,
                _ => {
                    let added = match p.split_once(':') {
                        Some(("cookie", n)) if is_token(n) => Added::Cookie(n.as_bytes().into()),
                        Some(("header", n)) if is_token(n) => {
                            Added::Header(n.to_ascii_lowercase().into_bytes().into())
                        }
                        _ => {
                            return Err(format!(
                                "key part {p:?} is none of scheme, host, port, path, query, \
                                 cookie:NAME, header:NAME"
                            ));
                        }
                    };
                    if r.added.contains(&added) {
                        return Err(format!("key part {p:?} is named twice"));
                    }
                    r.added.push(added);
                    continue;
                }
            };
            if *flag {
                return Err(format!("key part {p:?} is named twice"));
            }
            *flag = true;
        }
        if !path {
            return Err("a key must hold \"path\"".to_string());
        }
        if r.port && !r.host {
            return Err("key part \"port\" needs \"host\"".to_string());
        }
        for d in query_drop {
            if d.is_empty()
                || d.bytes()
                    .any(|b| b <= b' ' || b == 0x7f || b"&=#".contains(&b))
            {
                return Err(format!("query_drop {d:?} is not a parameter name"));
            }
            r.query_drop.push(d.as_bytes().into());
        }
        Ok(r)
    }

    /// Whether the key adds a cookie or a field (a URL then has one entry per value).
    pub fn adds(&self) -> bool {
        !self.added.is_empty()
    }

    /// Writes the key of `scheme://authority` + `target` (with the request's `fields`) into
    /// `k` (cleared first): the default key ([`Key::write`]) rewritten under these rules.
    /// Not inlined into a plan: a mount without rules pays nothing for it.
    #[inline(never)]
    pub fn write(
        &self,
        scheme: &[u8],
        authority: &[u8],
        target: &[u8],
        fields: &[Field<'_>],
        k: &mut Vec<u8>,
    ) -> Result<(), NoKey> {
        let mut full = Vec::with_capacity(authority.len() + target.len() + 16);
        Key::write(scheme, authority, target, &mut full)?;
        k.clear();
        let sep = full.windows(3).position(|w| w == b"://").unwrap_or(0);
        let rest = &full[sep + 3..];
        let path_at = rest.iter().position(|&b| b == b'/').unwrap_or(rest.len());
        let (authority, path_query) = rest.split_at(path_at);
        // The port is after the host's last colon, outside an IP literal's brackets.
        let (host, port) = match authority.iter().rposition(|&b| b == b':') {
            Some(i) if !authority[i..].contains(&b']') => (&authority[..i], &authority[i..]),
            _ => (authority, &b""[..]),
        };
        let (path, query) = match path_query.iter().position(|&b| b == b'?') {
            Some(i) => (&path_query[..i], Some(&path_query[i + 1..])),
            None => (path_query, None),
        };
        k.extend_from_slice(if self.scheme { &full[..sep] } else { b"*" });
        k.extend_from_slice(b"://");
        if self.host {
            k.extend_from_slice(host);
        }
        if self.port {
            k.extend_from_slice(port);
        }
        k.extend_from_slice(path);
        if let (true, Some(q)) = (self.query, query) {
            self.write_query(q, k);
        }
        for a in &self.added {
            k.push(b' ');
            match a {
                Added::Cookie(name) => {
                    k.extend_from_slice(b"cookie:");
                    k.extend_from_slice(name);
                    if let Some(v) = cookie(fields, name) {
                        k.push(b'=');
                        escape(v, k);
                    }
                }
                Added::Header(name) => {
                    k.extend_from_slice(b"header:");
                    k.extend_from_slice(name);
                    // Every line of the field, in order, as the origin would read them.
                    for (_, v) in fields.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name)) {
                        k.push(b'=');
                        escape(v, k);
                    }
                }
            }
        }
        Ok(())
    }

    /// `?` and the query's parameters, less those dropped, sorted if asked; nothing when
    /// none is left.
    fn write_query(&self, q: &[u8], k: &mut Vec<u8>) {
        if self.query_drop.is_empty() && !self.query_sort {
            k.push(b'?');
            k.extend_from_slice(q);
            return;
        }
        let mut params: Vec<&[u8]> = q
            .split(|&b| b == b'&')
            .filter(|p| {
                let name = p.split(|&b| b == b'=').next().unwrap_or_default();
                !self.query_drop.iter().any(|g| glob(g, name))
            })
            .collect();
        if self.query_sort {
            params.sort();
        }
        if params.is_empty() {
            return;
        }
        k.push(b'?');
        for (i, p) in params.iter().enumerate() {
            if i > 0 {
                k.push(b'&');
            }
            k.extend_from_slice(p);
        }
    }
}

/// The key of a request under `rules` (the default key when `None`): what a plan looks up
/// and what a purge by URL removes.
pub fn key_for(
    rules: Option<&KeyRules>,
    scheme: &[u8],
    authority: &[u8],
    target: &[u8],
    fields: &[Field<'_>],
) -> Result<Key, NoKey> {
    let mut k = Vec::new();
    match rules {
        None => Key::write(scheme, authority, target, &mut k)?,
        Some(r) => r.write(scheme, authority, target, fields, &mut k)?,
    }
    Ok(Key::from_bytes(&k))
}

/// Whether `s` is an RFC 9110 token (a field or cookie name).
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The value of the first cookie `name` in the request's Cookie fields (RFC 6265 §5.4:
/// `name=value` pairs separated by `;`).
fn cookie<'a>(fields: &[Field<'a>], name: &[u8]) -> Option<&'a [u8]> {
    fields
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(b"cookie"))
        .flat_map(|(_, v)| v.split(|&b| b == b';'))
        .find_map(|pair| {
            let pair = pair.trim_ascii();
            let eq = pair.iter().position(|&b| b == b'=')?;
            (pair[..eq].trim_ascii() == name).then(|| pair[eq + 1..].trim_ascii())
        })
}

/// `v` with `%`, space, controls and bytes past ASCII percent-encoded: an added part never
/// holds the space that starts the next one.
fn escape(v: &[u8], k: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in v {
        if b <= b' ' || b >= 0x7f || b == b'%' || b == b'=' {
            k.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        } else {
            k.push(b);
        }
    }
}

/// Whether `name` matches `pattern`, where `*` matches any run of bytes.
fn glob(pattern: &[u8], name: &[u8]) -> bool {
    match pattern.iter().position(|&b| b == b'*') {
        None => pattern == name,
        Some(star) => {
            let (head, tail) = (&pattern[..star], &pattern[star + 1..]);
            name.starts_with(head)
                && (0..=name.len() - head.len()).any(|i| glob(tail, &name[head.len() + i..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(
        parts: &[&str],
        drop: &[&str],
        sort: bool,
        target: &str,
        fields: &[Field<'_>],
    ) -> String {
        let parts: Vec<String> = parts.iter().map(|s| s.to_string()).collect();
        let drop: Vec<String> = drop.iter().map(|s| s.to_string()).collect();
        let r = KeyRules::parse(&parts, &drop, sort).unwrap();
        let k = key_for(
            Some(&r),
            b"https",
            b"Example.COM:8443",
            target.as_bytes(),
            fields,
        )
        .unwrap();
        String::from_utf8(k.as_bytes().to_vec()).unwrap()
    }

    #[test]
    fn the_default_key_is_unchanged() {
        let k = key_for(None, b"https", b"Example.COM:443", b"/a?b", &[]).unwrap();
        assert_eq!(k.as_bytes(), b"https://example.com/a?b");
    }

    #[test]
    fn parts_left_out_fold_urls_together() {
        let hpq = &["host", "path", "query"];
        assert_eq!(key(hpq, &[], false, "/a?x", &[]), "*://example.com/a?x");
        let all = &["scheme", "host", "port", "path", "query"];
        assert_eq!(
            key(all, &[], false, "/a?x", &[]),
            "https://example.com:8443/a?x"
        );
        assert_eq!(
            key(&["host", "path"], &[], false, "/a?x", &[]),
            "*://example.com/a"
        );
        assert_eq!(key(&["path"], &[], false, "/a", &[]), "*:///a");
        // An IP literal's colons are not a port's.
        let r = KeyRules::parse(&["host".into(), "path".into()], &[], false).unwrap();
        let k = key_for(Some(&r), b"http", b"[::1]:8080", b"/", &[]).unwrap();
        assert_eq!(k.as_bytes(), b"*://[::1]/");
        let k = key_for(Some(&r), b"http", b"[::1]", b"/", &[]).unwrap();
        assert_eq!(k.as_bytes(), b"*://[::1]/");
    }

    #[test]
    fn query_parameters_dropped_and_sorted() {
        let hpq = &["host", "path", "query"];
        let drop = &["utm_*", "fbclid"];
        assert_eq!(
            key(
                hpq,
                drop,
                false,
                "/a?utm_source=x&b=2&fbclid=1&a=1&utm_=3",
                &[]
            ),
            "*://example.com/a?b=2&a=1"
        );
        assert_eq!(
            key(hpq, drop, false, "/a?utm_source=x", &[]),
            "*://example.com/a"
        );
        assert_eq!(
            key(hpq, drop, true, "/a?b=2&a=1&a=0", &[]),
            "*://example.com/a?a=0&a=1&b=2"
        );
        // A name that only starts like a dropped one stays.
        assert_eq!(
            key(hpq, drop, false, "/a?fbclidx=1", &[]),
            "*://example.com/a?fbclidx=1"
        );
        assert!(glob(b"*_id", b"user_id") && glob(b"a*b*c", b"aXbYc") && !glob(b"a*b", b"ac"));
    }

    #[test]
    fn a_cookie_or_field_is_added_and_cannot_be_forged() {
        let parts = &["host", "path", "cookie:lang", "header:X-Tenant"];
        let f: &[Field<'_>] = &[(b"Cookie", b"a=1; lang=fr"), (b"x-tenant", b"t 1=x")];
        assert_eq!(
            key(parts, &[], false, "/a", f),
            "*://example.com/a cookie:lang=fr header:x-tenant=t%201%3Dx"
        );
        assert_eq!(
            key(parts, &[], false, "/a", &[]),
            "*://example.com/a cookie:lang header:x-tenant"
        );
        // The empty value and no cookie are two keys.
        let empty: &[Field<'_>] = &[(b"Cookie", b"lang=")];
        assert_eq!(
            key(parts, &[], false, "/a", empty),
            "*://example.com/a cookie:lang= header:x-tenant"
        );
        // A target with a space has no key at all.
        let r = KeyRules::parse(&["path".into()], &[], false).unwrap();
        assert_eq!(
            key_for(Some(&r), b"http", b"h", b"/a cookie:lang=fr", &[]),
            Err(NoKey::Target)
        );
    }

    #[test]
    fn malformed_rules_are_refused() {
        let p = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(KeyRules::parse(&p(&["host"]), &[], false).is_err());
        assert!(KeyRules::parse(&p(&["path", "path"]), &[], false).is_err());
        assert!(KeyRules::parse(&p(&["path", "cookie:"]), &[], false).is_err());
        assert!(KeyRules::parse(&p(&["path", "cookies:a"]), &[], false).is_err());
        assert!(KeyRules::parse(&p(&["path", "port"]), &[], false).is_err());
        assert!(KeyRules::parse(&p(&["path"]), &p(&["a=b"]), false).is_err());
        assert!(KeyRules::parse(&p(&["path", "header:X-A"]), &p(&["utm_*"]), true).is_ok());
    }
}
