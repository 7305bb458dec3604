//! What the cache needs from a request and a response head, read once: directives, dates,
//! Age, validators, Vary, Set-Cookie, Authorization, conditionals. The rules that read them
//! (storable, freshness, reuse, validation) live in their own modules; this one only reads.

use crate::Time;
use crate::cache_control::{MAX_DELTA, RequestDirectives, ResponseDirectives};
use crate::fields::{Field, elements, parse_date, trim, values};
use crate::key::Vary;

/// A request's method, as the cache sorts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    /// OPTIONS and TRACE (RFC 9110 §9.2.1): never cached, invalidate nothing.
    OtherSafe,
    /// Everything else (POST, PUT, DELETE, PATCH, unknown): invalidates on success (§4.4).
    Unsafe,
}

impl Method {
    pub fn of(method: &[u8]) -> Method {
        // Methods are case-sensitive (RFC 9110 §9.1).
        match method {
            b"GET" => Method::Get,
            b"HEAD" => Method::Head,
            b"OPTIONS" | b"TRACE" => Method::OtherSafe,
            _ => Method::Unsafe,
        }
    }
}

/// A request head as the caller hands it in.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    pub method: &'a [u8],
    /// `http` or `https`: how the client reached us.
    pub scheme: &'a [u8],
    /// Host, or HTTP/2 and HTTP/3's `:authority`.
    pub authority: &'a [u8],
    /// The request target as received: origin-form or absolute-form.
    pub target: &'a [u8],
    pub fields: &'a [Field<'a>],
    /// The request carries content: a Content-Length over 0 or a Transfer-Encoding on
    /// HTTP/1.1, DATA on HTTP/2 and HTTP/3. The caller says, since it knows the framing (an
    /// HTTP/2 body without content-length shows in no field). A GET or HEAD with content is
    /// neither answered from the cache nor stored: content "has no generally defined
    /// semantics" there (RFC 9110 §9.3.1), yet an origin that reads it may answer something
    /// else under the same URL, which a cache would then hand to every later visitor.
    pub body: bool,
}

/// A response head as the caller hands it in.
#[derive(Clone, Copy, Debug)]
pub struct Response<'a> {
    pub status: u16,
    pub fields: &'a [Field<'a>],
}

/// What the cache reads from a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestFacts {
    pub method: Method,
    pub cc: RequestDirectives,
    pub authorization: bool,
    /// If-None-Match or If-Modified-Since: the cache can answer these itself (RFC 9110 §13).
    pub validates: bool,
    /// If-Match, If-Unmodified-Since or If-Range: passed upstream (the origin judges them).
    pub other_preconditions: bool,
    /// The request carries content ([`Request::body`]).
    pub body: bool,
}

impl RequestFacts {
    pub fn of(req: &Request<'_>) -> RequestFacts {
        let f = req.fields;
        // One pass over the fields, names told apart by length first (seven passes cost ~150
        // instructions a request, callgrind); the directives parsed only when a
        // Cache-Control or Pragma is there.
        let (mut cc, mut authorization, mut validates, mut other) = (false, false, false, false);
        for (n, _) in f {
            let is = |lit: &[u8]| n.eq_ignore_ascii_case(lit);
            match n.len() {
                6 => cc |= is(b"pragma"),
                8 => other |= is(b"if-match") || is(b"if-range"),
                13 => {
                    cc |= is(b"cache-control");
                    authorization |= is(b"authorization");
                    validates |= is(b"if-none-match");
                }
                17 => validates |= is(b"if-modified-since"),
                19 => other |= is(b"if-unmodified-since"),
                _ => {}
            }
        }
        RequestFacts {
            method: Method::of(req.method),
            cc: if cc {
                RequestDirectives::parse(f)
            } else {
                RequestDirectives::default()
            },
            authorization,
            validates,
            other_preconditions: other,
            body: req.body,
        }
    }
}

/// The Expires field as read (RFC 9111 §5.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expires {
    Absent,
    At(Time),
    /// Invalid ("0" and the like) or given twice: already expired (§5.3, §4.2.1).
    Past,
}

/// What the cache reads from a response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResponseFacts {
    pub status: u16,
    pub cc: ResponseDirectives,
    /// The first valid Date, if any.
    pub date: Option<Time>,
    pub expires: Expires,
    /// The Age field's first member when it is delta-seconds (§5.1), else 0; at most 2^31.
    pub age: u64,
    pub last_modified: Option<Time>,
    pub etag: bool,
    pub vary: Vary,
    pub set_cookie: bool,
    /// Cache-Control's `no-transform` (RFC 9111 §5.2.2.6), read from Cache-Control itself even
    /// where CDN-Cache-Control replaces it for this cache's freshness: it binds every
    /// intermediary.
    pub no_transform: bool,
    /// The content has a Content-Encoding of its own (RFC 9110 §8.4).
    pub encoded: bool,
}

impl ResponseFacts {
    pub fn of<N: AsRef<[u8]>, V: AsRef<[u8]>>(status: u16, fields: &[(N, V)]) -> ResponseFacts {
        // One pass over the fields, names told apart by length first; a field's own reader
        // runs only when the field is there (ten passes, one per fact, cost ~1,000
        // instructions an entry read back from a second tier, callgrind).
        let mut seen = Seen::default();
        for (n, v) in fields {
            let (n, v) = (n.as_ref(), v.as_ref());
            let is = |lit: &[u8]| n.eq_ignore_ascii_case(lit);
            match n.len() {
                3 if is(b"age") => seen.age = true,
                4 if is(b"date") => seen.date = seen.date.or(Some(v)),
                4 if is(b"etag") => seen.etag = true,
                4 if is(b"vary") => seen.vary = true,
                7 if is(b"expires") => {
                    seen.expires_twice = seen.expires.is_some();
                    seen.expires = seen.expires.or(Some(v));
                }
                10 if is(b"set-cookie") => seen.set_cookie = true,
                13 if is(b"cache-control") => seen.cache_control = true,
                13 if is(b"last-modified") => {
                    seen.last_modified = seen.last_modified.or(Some(v));
                }
                16 if is(b"content-encoding") => seen.encoded = true,
                17 if is(b"cdn-cache-control") => seen.cdn = true,
                _ => {}
            }
        }
        let expires = match (seen.expires, seen.expires_twice) {
            (None, _) => Expires::Absent,
            (Some(v), false) => parse_date(v).map_or(Expires::Past, Expires::At),
            (Some(_), true) => Expires::Past,
        };
        let directives = || {
            if seen.cache_control {
                ResponseDirectives::parse(fields)
            } else {
                ResponseDirectives::default()
            }
        };
        // A valid CDN-Cache-Control replaces Cache-Control and Expires for this cache (RFC
        // 9213 §2.1); they still go on to the client.
        let cdn = seen
            .cdn
            .then(|| crate::targeted::cdn_directives(fields))
            .flatten();
        let expires = if cdn.is_some() {
            Expires::Absent
        } else {
            expires
        };
        let (cc, no_transform) = match cdn {
            // Either field's `no-transform` holds: the stricter reading.
            Some(cdn) => (cdn, cdn.no_transform || directives().no_transform),
            None => {
                let cc = directives();
                (cc, cc.no_transform)
            }
        };
        ResponseFacts {
            status,
            cc,
            no_transform,
            encoded: seen.encoded,
            date: seen.date.and_then(parse_date),
            expires,
            age: if seen.age { age(fields) } else { 0 },
            last_modified: seen.last_modified.and_then(parse_date),
            etag: seen.etag,
            vary: if seen.vary {
                Vary::parse(fields)
            } else {
                Vary::None
            },
            // Not Set-Cookie2: obsolete (RFC 6265 §9.4), and no browser keeps it.
            set_cookie: seen.set_cookie,
        }
    }

    /// Whether the response carries a validator (RFC 9110 §8.8) the cache can send back.
    pub fn has_validator(&self) -> bool {
        self.etag || self.last_modified.is_some()
    }
}

/// What [`ResponseFacts::of`]'s pass over the fields found: the first line of each field
/// read by its first value, and whether the others are there.
#[derive(Default)]
struct Seen<'a> {
    age: bool,
    date: Option<&'a [u8]>,
    expires: Option<&'a [u8]>,
    expires_twice: bool,
    last_modified: Option<&'a [u8]>,
    etag: bool,
    vary: bool,
    set_cookie: bool,
    cache_control: bool,
    encoded: bool,
    cdn: bool,
}

/// The Age field (RFC 9111 §5.1): the first member of the first line, when it is
/// delta-seconds; anything else (negative, fractional, words, parameters) is ignored, as
/// cache-tests' age-parse rows expect. Saturates at 2^31 (§1.2.2).
fn age<N: AsRef<[u8]>, V: AsRef<[u8]>>(fields: &[(N, V)]) -> u64 {
    let Some(member) = values(fields, b"age").flat_map(elements).next() else {
        return 0;
    };
    let member = trim(member);
    if member.is_empty() || !member.iter().all(u8::is_ascii_digit) {
        return 0;
    }
    member.iter().fold(0u64, |n, d| {
        (n * 10 + u64::from(d - b'0')).min(u64::from(MAX_DELTA))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What an intermediary may do to the content: `no-transform` (RFC 9111 §5.2.2.6) binds
    /// it whatever CDN-Cache-Control says of freshness (RFC 9213 §2.1 replaces only the
    /// cache's own directives), and a Content-Encoding (RFC 9110 §8.4) is the origin's.
    #[test]
    fn transform_facts_table() {
        /// (fields, no_transform, encoded).
        type Row = (&'static [(&'static str, &'static str)], bool, bool);
        let rows: &[Row] = &[
            (&[("Cache-Control", "max-age=60")], false, false),
            (&[("Cache-Control", "public, No-Transform")], true, false),
            (
                &[
                    ("CDN-Cache-Control", "max-age=60"),
                    ("Cache-Control", "no-transform"),
                ],
                true,
                false,
            ),
            (&[("CDN-Cache-Control", "no-transform")], true, false),
            (&[("Content-Encoding", "gzip")], false, true),
        ];
        for (fields, no_transform, encoded) in rows {
            let f: Vec<(&[u8], &[u8])> = fields
                .iter()
                .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
                .collect();
            let facts = ResponseFacts::of(200, &f);
            assert_eq!(
                (facts.no_transform, facts.encoded),
                (*no_transform, *encoded),
                "{fields:?}"
            );
        }
    }

    #[test]
    fn age_table() {
        // RFC 9111 §5.1 and cache-tests' age-parse.
        let rows: &[(&[&str], u64)] = &[
            (&["7200"], 7200),
            (&["abc"], 0),
            (&["-7200"], 0),
            (&["7200.0"], 0),
            (&["2147483647"], 2_147_483_647),
            (&["2147483649"], 1 << 31),
            (&["99999999999999999999999"], 1 << 31),
            (&["7200, 0"], 7200),
            (&["0, 7200"], 0),
            (&["7200", "0"], 7200),
            (&["0", "7200"], 0),
            (&["7200;foo=bar"], 0),
            (&[], 0),
        ];
        for (lines, want) in rows {
            let fields: Vec<Field> = lines.iter().map(|v| (&b"Age"[..], v.as_bytes())).collect();
            assert_eq!(age(&fields), *want, "{lines:?}");
        }
    }

    #[test]
    fn expires_table() {
        // RFC 9111 §5.3: invalid dates, "0" included, are in the past; §4.2.1: two are stale.
        let rows: &[(&[&str], Expires)] = &[
            (
                &["Sun, 06 Nov 1994 08:49:37 GMT"],
                Expires::At(Time(784_111_777)),
            ),
            (&["0"], Expires::Past),
            (&["-1"], Expires::Past),
            (
                &[
                    "Sun, 06 Nov 1994 08:49:37 GMT",
                    "Sun, 06 Nov 1994 08:49:37 GMT",
                ],
                Expires::Past,
            ),
            (&[], Expires::Absent),
        ];
        for (lines, want) in rows {
            let fields: Vec<Field> = lines
                .iter()
                .map(|v| (&b"Expires"[..], v.as_bytes()))
                .collect();
            assert_eq!(ResponseFacts::of(200, &fields).expires, *want, "{lines:?}");
        }
    }

    #[test]
    fn methods() {
        assert_eq!(Method::of(b"GET"), Method::Get);
        assert_eq!(
            Method::of(b"get"),
            Method::Unsafe,
            "RFC 9110 §9.1: case-sensitive"
        );
        assert_eq!(Method::of(b"OPTIONS"), Method::OtherSafe);
        assert_eq!(Method::of(b"PURGE"), Method::Unsafe);
    }

    #[test]
    fn request_facts_table() {
        // RFC 9111 §5.2.1 (Cache-Control), §5.4 (Pragma only without Cache-Control), §3.5
        // (Authorization), RFC 9110 §13.1 (conditionals), names in any case.
        type Row<'a> = (&'a [Field<'a>], bool, bool, bool, RequestDirectives);
        let no_cache = RequestDirectives {
            no_cache: true,
            ..RequestDirectives::default()
        };
        let max_age = RequestDirectives {
            max_age: Some(0),
            ..RequestDirectives::default()
        };
        let none = RequestDirectives::default();
        let rows: &[Row] = &[
            (&[(b"host", b"a")], false, false, false, none),
            (&[(b"Authorization", b"x")], true, false, false, none),
            (&[(b"If-None-Match", b"\"a\"")], false, true, false, none),
            (&[(b"IF-MODIFIED-SINCE", b"x")], false, true, false, none),
            (&[(b"if-match", b"*")], false, false, true, none),
            (&[(b"If-Range", b"x")], false, false, true, none),
            (&[(b"If-Unmodified-Since", b"x")], false, false, true, none),
            (&[(b"Pragma", b"no-cache")], false, false, false, no_cache),
            (
                &[(b"Cache-Control", b"max-age=0")],
                false,
                false,
                false,
                max_age,
            ),
            (
                &[(b"Cache-Control", b"max-age=0"), (b"Pragma", b"no-cache")],
                false,
                false,
                false,
                max_age,
            ),
            (
                &[(b"x-pragma", b"no-cache"), (b"if-matches", b"x")],
                false,
                false,
                false,
                none,
            ),
        ];
        for (fields, authorization, validates, other, cc) in rows {
            let req = Request {
                method: b"GET",
                scheme: b"https",
                authority: b"a",
                target: b"/",
                fields,
                body: false,
            };
            let f = RequestFacts::of(&req);
            assert_eq!(
                (f.authorization, f.validates, f.other_preconditions, f.cc),
                (*authorization, *validates, *other, *cc),
                "{fields:?}"
            );
        }
    }
}
