//! A mount's rules over the origin's caching fields: [`Valid`], lifetimes
//! for answers the origin gave no freshness (nginx's `proxy_cache_valid`), and [`Ignore`],
//! the origin fields the cache does not obey (nginx's `proxy_ignore_headers`, dangerous).
//! Both are read where the cache reads an answer's facts ([`governed`]); with neither set
//! the facts are the origin's, untouched.

use std::borrow::Cow;

use crate::Options;
use crate::cache_control::ResponseDirectives;
use crate::facts::{Expires, ResponseFacts};
use crate::key::Vary;
use crate::storable::heuristically_cacheable;

/// Lifetimes, in seconds, for answers without explicit freshness (no `s-maxage`, `max-age`
/// or `Expires`): by status, then `any` for the statuses RFC 9110 §15.1 calls cacheable by
/// default (a status named on its own may be another one: the operator chose it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Valid {
    /// `(status, seconds)`, in the order given.
    pub by_status: Vec<(u16, u64)>,
    /// For the other heuristically cacheable statuses.
    pub any: Option<u64>,
}

impl Valid {
    /// The lifetime an answer of `status` without explicit freshness gets, if any.
    pub fn lifetime(&self, status: u16) -> Option<u64> {
        self.by_status
            .iter()
            .find(|(s, _)| *s == status)
            .map(|(_, secs)| *secs)
            .or(self.any.filter(|_| heuristically_cacheable(status)))
    }
}

/// The origin fields the cache does not obey. Every one is dangerous (docs/cache.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ignore {
    /// `Cache-Control` (and `CDN-Cache-Control`): no `no-store`, `private`, `max-age`…;
    /// [`Valid`] decides the lifetime. `no-transform` still binds (it is not about caching).
    pub cache_control: bool,
    /// `Expires`: [`Valid`] decides the lifetime when no `max-age` does.
    pub expires: bool,
    /// `Set-Cookie`: an answer that sets a cookie is stored, and the stored copy never holds
    /// the Set-Cookie (the caller leaves it out of the stored fields): the visitor whose
    /// request filled it gets its cookie, no other visitor does.
    pub set_cookie: bool,
    /// `Vary`: one variant per key, whatever the request's fields.
    pub vary: bool,
}

impl Ignore {
    /// Whether any field is ignored.
    #[inline]
    pub fn any(&self) -> bool {
        self.cache_control || self.expires || self.set_cookie || self.vary
    }
}

/// The facts of an answer as the cache obeys them under `opts`: the origin's own, borrowed,
/// when nothing is ignored (the common case costs one test).
#[inline]
pub fn governed<'a>(resp: &'a ResponseFacts, opts: &Options) -> Cow<'a, ResponseFacts> {
    if !opts.ignore.any() {
        return Cow::Borrowed(resp);
    }
    Cow::Owned(ignored(resp, opts.ignore))
}

/// `resp`'s facts less those `ignore` names (called only when it names one: a hit whose
/// mount ignores nothing pays one test, callgrind).
#[cold]
pub(crate) fn ignored(resp: &ResponseFacts, ignore: Ignore) -> ResponseFacts {
    let mut r = resp.clone();
    if ignore.cache_control {
        r.cc = ResponseDirectives::default();
    }
    if ignore.expires {
        r.expires = Expires::Absent;
    }
    if ignore.set_cookie {
        r.set_cookie = false;
    }
    if ignore.vary {
        r.vary = Vary::None;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Time;
    use crate::freshness::lifetime;
    use crate::storable::storable;
    use crate::{Request, RequestFacts};

    fn facts(status: u16, fields: &[(&[u8], &[u8])]) -> ResponseFacts {
        ResponseFacts::of(status, fields)
    }

    fn get() -> RequestFacts {
        RequestFacts::of(&Request {
            method: b"GET",
            scheme: b"http",
            authority: b"a",
            target: b"/",
            fields: &[],
            body: false,
        })
    }

    fn valid() -> Options {
        Options {
            valid: Some(std::sync::Arc::new(Valid {
                by_status: vec![(200, 600), (301, 600), (302, 30)],
                any: Some(60),
            })),
            ..Options::default()
        }
    }

    #[test]
    fn valid_gives_a_lifetime_only_where_the_origin_gave_none() {
        let now = Time(1_000_000);
        let o = valid();
        assert_eq!(lifetime(&facts(200, &[]), now, &o), 600);
        assert_eq!(lifetime(&facts(404, &[]), now, &o), 60);
        // A status named on its own is taken; `any` covers only the default-cacheable ones.
        assert_eq!(lifetime(&facts(302, &[]), now, &o), 30);
        assert_eq!(lifetime(&facts(500, &[]), now, &o), 0);
        // The origin's freshness wins.
        assert_eq!(
            lifetime(&facts(200, &[(b"cache-control", b"max-age=5")]), now, &o),
            5
        );
        let expired: &[(&[u8], &[u8])] = &[(b"expires", b"Thu, 01 Jan 1970 00:00:00 GMT")];
        assert_eq!(lifetime(&facts(200, expired), now, &o), 0);
        // Stored on it alone, and without it not.
        assert_eq!(storable(&get(), &facts(200, &[]), now, &o), Ok(()));
        assert_eq!(storable(&get(), &facts(302, &[]), now, &o), Ok(()));
        assert!(storable(&get(), &facts(200, &[]), now, &Options::default()).is_err());
        assert!(storable(&get(), &facts(500, &[]), now, &o).is_err());
    }

    #[test]
    fn ignored_fields_are_not_obeyed() {
        let now = Time(1_000_000);
        let o = Options {
            ignore: Ignore {
                cache_control: true,
                expires: true,
                set_cookie: true,
                vary: true,
            },
            ..valid()
        };
        let private: &[(&[u8], &[u8])] = &[
            (b"cache-control", b"private, no-store, max-age=5"),
            (b"expires", b"Thu, 01 Jan 2099 00:00:00 GMT"),
            (b"set-cookie", b"a=b"),
            (b"vary", b"*"),
        ];
        assert!(storable(&get(), &facts(200, private), now, &Options::default()).is_err());
        assert_eq!(storable(&get(), &facts(200, private), now, &o), Ok(()));
        assert_eq!(lifetime(&facts(200, private), now, &o), 600);
        assert_eq!(governed(&facts(200, private), &o).vary, Vary::None);
        // Nothing ignored: the facts are the origin's, borrowed.
        assert!(matches!(
            governed(&facts(200, private), &valid()),
            Cow::Borrowed(_)
        ));
    }
}
