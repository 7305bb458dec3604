//! What the proxy cache did with a request, as the access log writes it: nginx's
//! `$upstream_cache_status` values (`MISS`, `BYPASS`, `EXPIRED`, `STALE`, `UPDATING`,
//! `REVALIDATED`, `HIT`) and the JSON log's `cache_status`.
//!
//! Owns the names only; the cache's decisions (`proxy::cache`) pick the variant. A request
//! no cache handled has none (`-`, and no `cache_status` in JSON), as in nginx.
#![forbid(unsafe_code)]

/// One request's cache outcome, named as nginx names it.
#[cfg_attr(not(feature = "proxy"), allow(dead_code))] // only the proxy's cache makes one
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CacheOutcome {
    /// Nothing usable was stored (or only another variant): the answer came from upstream.
    /// A request that waited on another's flight and found nothing after it goes up alone:
    /// a miss too.
    Miss,
    /// The cache was told, or had, to leave the request alone (`Cache-Control: no-cache`
    /// from the client, a request it cannot key, If-Match and the like, a GET with a body).
    Bypass,
    /// A stored answer was stale: the request went up and a full answer came back.
    Expired,
    /// A stale stored answer was served: the upstream failed or answered 5xx
    /// (`stale-if-error`), the client allowed it (`max-stale`), or it is within
    /// `stale-while-revalidate` and this request starts the background validation (nginx
    /// says STALE for the request that starts its background update too).
    Stale,
    /// A stale stored answer was served within `stale-while-revalidate` while another
    /// request's validation is on its way.
    Updating,
    /// A stale stored answer went up with its validators and came back 304: served
    /// freshened.
    Revalidated,
    /// A fresh stored answer was served: from memory or the second tier, found at once or
    /// after waiting on another request's flight (nginx logs a `proxy_cache_lock` waiter
    /// that then reads the entry as a hit too).
    Hit,
}

impl CacheOutcome {
    /// nginx's `$upstream_cache_status` text.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CacheOutcome::Miss => "MISS",
            CacheOutcome::Bypass => "BYPASS",
            CacheOutcome::Expired => "EXPIRED",
            CacheOutcome::Stale => "STALE",
            CacheOutcome::Updating => "UPDATING",
            CacheOutcome::Revalidated => "REVALIDATED",
            CacheOutcome::Hit => "HIT",
        }
    }

    /// A stored answer served `ttl` seconds from going stale, with another request's
    /// validation on its way when `updating`. A fresh answer's `ttl` is at least 1 (fresh
    /// only while its lifetime exceeds its age, RFC 9111 §4.2); 0 is stale by under a
    /// second (a soft purge's, a refresh's entry just past its lifetime), not a hit.
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub(crate) fn of_answer(ttl: i64, updating: bool) -> CacheOutcome {
        match (ttl > 0, updating) {
            (true, _) => CacheOutcome::Hit,
            (false, true) => CacheOutcome::Updating,
            (false, false) => CacheOutcome::Stale,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CacheOutcome;

    /// `Cache-Status: …; hit; ttl=0; detail=stale-updating` was logged as HIT: a `ttl` of 0
    /// is stale (by under a second), never fresh.
    #[test]
    fn an_answer_is_a_hit_only_while_fresh() {
        // (ttl, another's validation on its way, logged as)
        let table = [
            (60, false, "HIT"),
            (1, false, "HIT"),
            (1, true, "HIT"),
            (0, true, "UPDATING"),
            (0, false, "STALE"),
            (-5, true, "UPDATING"),
            (-5, false, "STALE"),
        ];
        for (ttl, updating, logged) in table {
            assert_eq!(
                CacheOutcome::of_answer(ttl, updating).as_str(),
                logged,
                "ttl={ttl} updating={updating}"
            );
        }
    }
}
