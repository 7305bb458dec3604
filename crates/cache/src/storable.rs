//! Whether a shared cache may store a response (RFC 9111 §3, §3.5, §5.2), with the reason
//! when not (for Cache-Status and the bypass counter). Decides only; the store's size limits
//! are the store's. Set-Cookie: see [`NotStored::SetCookie`].

use crate::cache_control::Delta;
use crate::facts::{Method, RequestFacts, ResponseFacts};
use crate::freshness::lifetime;
use crate::key::Vary;
use crate::{Options, SetCookie, Time};

/// Why a response is not stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotStored {
    /// Only GET answers are stored (§3: "the request method is understood by the cache").
    Method,
    /// The GET carried content ([`crate::Request::body`]): its answer may depend on it, so
    /// it is not the URL's answer for other requests.
    Body,
    /// The request said `no-store` (§5.2.1.5).
    RequestNoStore,
    /// Not final, a 206 (ranges are served from a stored whole, not stored in parts) or a
    /// 304 (§3).
    Status,
    /// `must-understand` with a status this cache does not know (§5.2.2.3).
    MustUnderstand,
    /// `no-store` (§5.2.2.5).
    NoStore,
    /// `private`, qualified or not (§5.2.2.7): a shared cache never stores it.
    Private,
    /// The request had Authorization and the answer has none of `public`, `s-maxage`,
    /// `must-revalidate` (§3.5).
    Authorization,
    /// The answer sets a cookie, and [`Options::set_cookie`] is [`SetCookie::Never`] (the
    /// default), or it is [`SetCookie::Explicit`] and the answer has neither explicit
    /// freshness nor `public`. RFC 9111 does not forbid storing it, but a Set-Cookie marks
    /// an answer made for one client: replayed from the cache it hands that client's session
    /// to the next visitor, and a copy stored without the cookie may still be the first
    /// visitor's page (their name, their CSRF token; web cache deception, `/account/x.css`).
    /// `public` or `s-maxage` is no consent to either: they say a shared cache may keep the
    /// page, not that one visitor's cookie is everyone's.
    SetCookie,
    /// `Vary: *` never matches a later request (§4.1), or a Vary too long to key on.
    Vary,
    /// Neither explicit freshness, nor a heuristically cacheable status with heuristics on or
    /// a validator, nor `public` (§3's last condition); or nothing that could ever make it
    /// usable (no freshness, no validator, no stale grant).
    NotExplicit,
    /// A `no_store` rule of the mount matched the request.
    Rule,
}

impl NotStored {
    /// The reason as Cache-Status's `detail` says it (RFC 9211 §2.8).
    pub fn as_str(self) -> &'static str {
        match self {
            NotStored::Method => "method",
            NotStored::Body => "request-body",
            NotStored::RequestNoStore => "request-no-store",
            NotStored::Status => "status",
            NotStored::MustUnderstand => "must-understand",
            NotStored::NoStore => "no-store",
            NotStored::Private => "private",
            NotStored::Authorization => "authorization",
            NotStored::SetCookie => "set-cookie",
            NotStored::Vary => "vary",
            NotStored::NotExplicit => "not-explicit",
            NotStored::Rule => "no-store-rule",
        }
    }
}

/// Final status codes whose meaning RFC 9110 defines (for `must-understand`, §5.2.2.3).
pub fn understood(status: u16) -> bool {
    matches!(status, 200..=205 | 300..=303 | 305 | 307 | 308 | 400..=417 | 421 | 422 | 426 | 500..=505)
}

/// Status codes cacheable by default (RFC 9110 §15.1): they may be stored without explicit
/// freshness, and get heuristic freshness where that is on.
pub fn heuristically_cacheable(status: u16) -> bool {
    matches!(
        status,
        200 | 203 | 204 | 206 | 300 | 301 | 308 | 404 | 405 | 410 | 414 | 501
    )
}

/// Whether `resp` states its freshness: `max-age`, `s-maxage` or `Expires` (§4.2.1).
fn explicit_freshness(resp: &ResponseFacts) -> bool {
    let cc = &resp.cc;
    cc.max_age != Delta::Absent
        || cc.s_maxage != Delta::Absent
        || resp.expires != crate::facts::Expires::Absent
}

/// Whether `resp` sets no cookie, or may be kept with its Set-Cookie under `opts` (only
/// [`SetCookie::Explicit`], with explicit freshness or `public`): the Set-Cookie rule of
/// [`storable`], for an entry read back from a second tier that another edge (or another
/// version) wrote: one this edge would not keep is not served from there either.
pub fn cookie_allowed(resp: &ResponseFacts, opts: &Options) -> bool {
    !resp.set_cookie
        || match opts.set_cookie {
            SetCookie::Never => false,
            SetCookie::Explicit => explicit_freshness(resp) || resp.cc.public,
        }
}

/// Whether a shared cache may store `resp`, the answer to `req` received at `response_time`
/// (§3).
pub fn storable(
    req: &RequestFacts,
    resp: &ResponseFacts,
    response_time: Time,
    opts: &Options,
) -> Result<(), NotStored> {
    let resp = &*crate::origin_rules::governed(resp, opts);
    let cc = &resp.cc;
    if req.method != Method::Get {
        return Err(NotStored::Method);
    }
    if req.body {
        return Err(NotStored::Body);
    }
    if req.cc.no_store {
        return Err(NotStored::RequestNoStore);
    }
    if resp.status < 200 || resp.status == 206 || resp.status == 304 {
        return Err(NotStored::Status);
    }
    if cc.must_understand {
        // §5.2.2.3: a known status overrides no-store; an unknown one is never stored.
        if !understood(resp.status) {
            return Err(NotStored::MustUnderstand);
        }
    } else if cc.no_store {
        return Err(NotStored::NoStore);
    }
    if cc.private {
        return Err(NotStored::Private);
    }
    let shared_grant = cc.public || cc.s_maxage != Delta::Absent;
    if req.authorization && !(shared_grant || cc.must_revalidate) {
        return Err(NotStored::Authorization);
    }
    let explicit = explicit_freshness(resp);
    if !cookie_allowed(resp, opts) {
        return Err(NotStored::SetCookie);
    }
    if matches!(resp.vary, Vary::Star | Vary::TooMany) {
        return Err(NotStored::Vary);
    }
    let by_default = (heuristically_cacheable(resp.status)
        && (opts.heuristic.is_some() || resp.has_validator()))
        || (!explicit
            && opts
                .valid
                .as_ref()
                .is_some_and(|v| v.lifetime(resp.status).is_some()));
    if !(explicit || by_default || cc.public) {
        return Err(NotStored::NotExplicit);
    }
    // An entry no request could ever use is not worth its memory.
    let usable = lifetime(resp, response_time, opts) > 0
        || resp.has_validator()
        || matches!(cc.stale_while_revalidate, Delta::Secs(s) if s > 0)
        || matches!(cc.stale_if_error, Delta::Secs(s) if s > 0);
    if !usable {
        return Err(NotStored::NotExplicit);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Heuristic;
    use crate::facts::{Request, RequestFacts};
    use crate::fields::Field;

    fn check(
        method: &str,
        req: &[Field],
        status: u16,
        resp: &[Field],
        opts: &Options,
    ) -> Result<(), NotStored> {
        let r = Request {
            method: method.as_bytes(),
            scheme: b"http",
            authority: b"a",
            target: b"/",
            fields: req,
            body: false,
        };
        storable(
            &RequestFacts::of(&r),
            &ResponseFacts::of(status, resp),
            Time(1_000_000_000),
            opts,
        )
    }

    #[test]
    fn storable_table() {
        use NotStored::*;
        let d = Options::default();
        let auth: &[Field] = &[(b"Authorization", b"Basic eA==")];
        type Row<'a> = (
            &'a str,
            &'a [Field<'a>],
            u16,
            &'a [Field<'a>],
            Result<(), NotStored>,
            &'a str,
        );
        let rows: &[Row] = &[
            (
                "GET",
                &[],
                200,
                &[(b"Cache-Control", b"max-age=60")],
                Ok(()),
                "§3: explicit freshness",
            ),
            (
                "GET",
                &[],
                200,
                &[(b"Expires", b"Sat, 06 Nov 2094 08:49:37 GMT")],
                Ok(()),
                "§3: Expires",
            ),
            (
                "GET",
                &[],
                200,
                &[(b"ETag", b"\"a\"")],
                Ok(()),
                "§3: heuristically cacheable with a validator",
            ),
            (
                "GET",
                &[],
                302,
                &[(b"ETag", b"\"a\"")],
                Err(NotExplicit),
                "§3: 302 needs explicit freshness",
            ),
            (
                "GET",
                &[],
                302,
                &[(b"Cache-Control", b"max-age=60")],
                Ok(()),
                "§3: any final status with freshness",
            ),
            (
                "GET",
                &[],
                599,
                &[(b"Cache-Control", b"max-age=60")],
                Ok(()),
                "§3: unknown status, no must-understand",
            ),
            (
                "GET",
                &[],
                200,
                &[],
                Err(NotExplicit),
                "§4.2.2: no heuristics by default, no validator",
            ),
            (
                "GET",
                &[],
                200,
                &[(b"Cache-Control", b"public")],
                Err(NotExplicit),
                "public alone, nothing to use it with",
            ),
            (
                "GET",
                &[],
                200,
                &[
                    (b"Cache-Control", b"public"),
                    (b"Last-Modified", b"Sun, 06 Nov 1994 08:49:37 GMT"),
                ],
                Ok(()),
                "§3: public",
            ),
            (
                "POST",
                &[],
                200,
                &[(b"Cache-Control", b"max-age=60")],
                Err(Method),
                "§3: method",
            ),
            (
                "HEAD",
                &[],
                200,
                &[(b"Cache-Control", b"max-age=60")],
                Err(Method),
                "§3: HEAD answers not stored",
            ),
            (
                "GET",
                &[(b"Cache-Control", b"no-store")],
                200,
                &[(b"Cache-Control", b"max-age=60")],
                Err(RequestNoStore),
                "§5.2.1.5",
            ),
            (
                "GET",
                &[],
                206,
                &[(b"Cache-Control", b"max-age=60")],
                Err(Status),
                "§3: partial",
            ),
            (
                "GET",
                &[],
                304,
                &[(b"Cache-Control", b"max-age=60")],
                Err(Status),
                "§3: 304",
            ),
            (
                "GET",
                &[],
                103,
                &[(b"Cache-Control", b"max-age=60")],
                Err(Status),
                "§3: final only",
            ),
            (
                "GET",
                &[],
                200,
                &[(b"Cache-Control", b"max-age=60, no-store")],
                Err(NoStore),
                "§5.2.2.5",
            ),
            (
                "GET",
                &[],
                200,
                &[(b"Cache-Control", b"max-age=60, no-store, must-understand")],
                Ok(()),
                "§5.2.2.3: understood",
            ),
            (
                "GET",
                &[],
                299,
                &[(b"Cache-Control", b"max-age=60, no-store, must-understand")],
                Err(MustUnderstand),
                "§5.2.2.3",
            ),
            (
                "GET",
                &[],
                200,
                &[(b"Cache-Control", b"max-age=60, private")],
                Err(Private),
                "§5.2.2.7",
            ),
            (
                "GET",
                &[],
                200,
                &[(b"Cache-Control", b"max-age=60, private=\"x\"")],
                Err(Private),
                "§5.2.2.7 qualified",
            ),
            (
                "GET",
                auth,
                200,
                &[(b"Cache-Control", b"max-age=60")],
                Err(Authorization),
                "§3.5",
            ),
            (
                "GET",
                auth,
                200,
                &[(b"Cache-Control", b"max-age=60, public")],
                Ok(()),
                "§3.5: public",
            ),
            (
                "GET",
                auth,
                200,
                &[(b"Cache-Control", b"s-maxage=60")],
                Ok(()),
                "§3.5: s-maxage",
            ),
            (
                "GET",
                auth,
                200,
                &[(b"Cache-Control", b"max-age=60, must-revalidate")],
                Ok(()),
                "§3.5: must-revalidate",
            ),
            (
                "GET",
                auth,
                200,
                &[(b"Cache-Control", b"max-age=60, proxy-revalidate")],
                Err(Authorization),
                "§3.5: not proxy-revalidate",
            ),
            (
                "GET",
                &[],
                200,
                &[(b"Cache-Control", b"max-age=60"), (b"Set-Cookie", b"s=1")],
                Err(SetCookie),
                "deception: a cookie is per client",
            ),
            (
                "GET",
                &[],
                200,
                &[
                    (b"Cache-Control", b"max-age=60, public"),
                    (b"Set-Cookie", b"s=1"),
                ],
                Err(SetCookie),
                "public is no consent to replaying one visitor's cookie",
            ),
            (
                "GET",
                &[],
                200,
                &[(b"Cache-Control", b"s-maxage=60"), (b"Set-Cookie", b"s=1")],
                Err(SetCookie),
                "nor is s-maxage",
            ),
            (
                "GET",
                &[],
                200,
                &[(b"Cache-Control", b"max-age=60"), (b"Vary", b"*")],
                Err(Vary),
                "§4.1: Vary * never matches",
            ),
            (
                "GET",
                &[],
                200,
                &[(b"Cache-Control", b"max-age=0")],
                Err(NotExplicit),
                "never usable: no lifetime, no validator",
            ),
            (
                "GET",
                &[],
                200,
                &[(b"Cache-Control", b"max-age=0, stale-if-error=60")],
                Ok(()),
                "RFC 5861: usable on error",
            ),
        ];
        for (method, req, status, resp, want, rule) in rows {
            assert_eq!(
                check(method, req, *status, resp, &d),
                *want,
                "{method} {req:?} {status} {resp:?} ({rule})"
            );
        }
    }

    #[test]
    fn set_cookie_with_explicit_freshness_when_asked() {
        // Options::set_cookie = Explicit: RFC 9111's own reading (Set-Cookie does not inhibit
        // caching), which cache-tests' headers-store-Set-Cookie requires; still not stored
        // on a validator or heuristics alone.
        let explicit = Options {
            set_cookie: SetCookie::Explicit,
            ..Options::default()
        };
        let with = |cc: &'static [u8]| -> Vec<Field<'static>> {
            vec![(b"Set-Cookie", b"s=1"), (b"Cache-Control", cc)]
        };
        assert_eq!(
            check("GET", &[], 200, &with(b"max-age=60"), &explicit),
            Ok(())
        );
        assert_eq!(
            check("GET", &[], 200, &with(b"max-age=60"), &Options::default()),
            Err(NotStored::SetCookie)
        );
        let lm: &[Field] = &[
            (b"Set-Cookie", b"s=1"),
            (b"Last-Modified", b"Sun, 06 Nov 1994 08:49:37 GMT"),
        ];
        assert_eq!(
            check("GET", &[], 200, lm, &explicit),
            Err(NotStored::SetCookie)
        );
        assert_eq!(
            check("GET", &[], 200, &with(b"private, max-age=60"), &explicit),
            Err(NotStored::Private)
        );
    }

    #[test]
    fn a_public_answer_that_sets_a_cookie_is_not_stored_for_the_next_visitor() {
        // Once, `public, max-age=60` with `Set-Cookie: sid=…` was stored and its cookie
        // replayed to the next client. Only the dangerous opt-in stores it.
        let resp: &[Field] = &[
            (b"Cache-Control", b"public, max-age=60"),
            (b"Set-Cookie", b"sid=4f2a"),
        ];
        assert_eq!(
            check("GET", &[], 200, resp, &Options::default()),
            Err(NotStored::SetCookie)
        );
        let explicit = Options {
            set_cookie: SetCookie::Explicit,
            ..Options::default()
        };
        assert_eq!(check("GET", &[], 200, resp, &explicit), Ok(()));
    }

    #[test]
    fn a_get_with_content_is_not_stored() {
        // A GET whose body the origin reads is not the URL's answer for others.
        let r = Request {
            method: b"GET",
            scheme: b"http",
            authority: b"a",
            target: b"/",
            fields: &[(b"Content-Length", b"5")],
            body: true,
        };
        let resp: &[Field] = &[(b"Cache-Control", b"public, max-age=60")];
        assert_eq!(
            storable(
                &RequestFacts::of(&r),
                &ResponseFacts::of(200, resp),
                Time(1_000_000_000),
                &Options::default()
            ),
            Err(NotStored::Body)
        );
        assert_eq!(NotStored::Body.as_str(), "request-body");
    }

    #[test]
    fn set_cookie2_is_not_a_cookie() {
        // RFC 6265 §9.4 obsoletes it; cache-tests' required headers-store-Set-Cookie2.
        let resp: &[Field] = &[(b"Set-Cookie2", b"a=b"), (b"Cache-Control", b"max-age=60")];
        assert_eq!(check("GET", &[], 200, resp, &Options::default()), Ok(()));
    }

    #[test]
    fn account_css_deception_is_not_stored() {
        // Cache deception: `/account/x.css` answered with the account page. Whatever the path
        // looks like, the answer decides: private or a cookie keeps it out.
        let d = Options::default();
        for resp in [
            &[(&b"Cache-Control"[..], &b"private, max-age=600"[..])][..],
            &[
                (b"Set-Cookie", b"session=abc"),
                (b"Last-Modified", b"Sun, 06 Nov 1994 08:49:37 GMT"),
            ],
            &[
                (b"Set-Cookie", b"session=abc"),
                (b"Cache-Control", b"max-age=600"),
            ],
            &[(b"Content-Type", b"text/html")],
        ] {
            assert!(check("GET", &[], 200, resp, &d).is_err(), "{resp:?}");
        }
    }

    #[test]
    fn heuristics_on_store_responses_without_explicit_freshness() {
        // §4.2.2: only heuristically cacheable statuses.
        let on = Options {
            heuristic: Some(Heuristic::default()),
            ..Options::default()
        };
        let lm: &[Field] = &[(b"Last-Modified", b"Sun, 06 Nov 1994 08:49:37 GMT")];
        assert_eq!(check("GET", &[], 200, lm, &on), Ok(()));
        assert_eq!(check("GET", &[], 302, lm, &on), Err(NotStored::NotExplicit));
    }
}
