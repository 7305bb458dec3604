//! Freshness (RFC 9111 §4.2): a stored response's lifetime (§4.2.1, heuristics §4.2.2 only
//! when asked for), its current age (§4.2.3), and whether a request may use it now — fresh,
//! stale but allowed (max-stale, stale-while-revalidate, stale-if-error: RFC 5861), or only
//! after validation. "Now" is passed in; no clock is read here.

use crate::cache_control::{Delta, MAX_DELTA};
use crate::entry::{Entry, Timing};
use crate::facts::{Expires, RequestFacts, ResponseFacts};
use crate::origin_rules::{governed, ignored};
use crate::stale::{UseStale, within_max};
use crate::storable::heuristically_cacheable;
use crate::{ClientNoCache, Options, Time};

/// The freshness lifetime a shared cache gives `resp` (§4.2.1), in seconds: `s-maxage`, else
/// `max-age`, else `Expires` − `Date` (the response time standing in for a missing Date),
/// else [`Options::valid`]'s lifetime for its status, else a heuristic when
/// [`Options::heuristic`] is on, else 0 (the fields [`Options::ignore`] names left out). A malformed or conflicting
/// lifetime is 0: stale (§4.2.1).
pub fn lifetime(resp: &ResponseFacts, response_time: Time, opts: &Options) -> u64 {
    if opts.ignore.any() {
        return lifetime_of(&ignored(resp, opts.ignore), response_time, opts);
    }
    lifetime_of(resp, response_time, opts)
}

/// [`lifetime`] of facts already governed by [`Options::ignore`].
#[inline]
fn lifetime_of(resp: &ResponseFacts, response_time: Time, opts: &Options) -> u64 {
    let explicit = |d: Delta| match d {
        Delta::Absent => None,
        Delta::Secs(s) => Some(u64::from(s)),
        Delta::Invalid => Some(0),
    };
    if let Some(s) = explicit(resp.cc.s_maxage).or_else(|| explicit(resp.cc.max_age)) {
        return s;
    }
    let date = resp.date.unwrap_or(response_time);
    match resp.expires {
        Expires::At(t) => t.since(date),
        Expires::Past => 0,
        // Not an `if let` guard: those need Rust 1.95, above the crates' rust-version.
        Expires::Absent => match opts.valid.as_ref().and_then(|v| v.lifetime(resp.status)) {
            Some(secs) => secs,
            None => match (opts.heuristic, resp.last_modified) {
                (Some(h), Some(lm)) if heuristically_cacheable(resp.status) => {
                    (date.since(lm) * u64::from(h.percent) / 100).min(u64::from(h.max))
                }
                _ => 0,
            },
        },
    }
}

/// The current age of a stored response at `now` (§4.2.3), saturating.
pub fn current_age(resp: &ResponseFacts, timing: Timing, now: Time) -> u64 {
    let date = resp.date.unwrap_or(timing.response_time);
    let apparent_age = timing.response_time.since(date);
    let response_delay = timing.response_time.since(timing.request_time);
    let corrected_age_value = resp.age.saturating_add(response_delay);
    let corrected_initial_age = apparent_age.max(corrected_age_value);
    corrected_initial_age.saturating_add(now.since(timing.response_time))
}

/// The value of the Age field on an answer from the cache (§5.1), at most 2^31.
pub fn age_field(age: u64) -> u64 {
    age.min(u64::from(MAX_DELTA))
}

/// How a stored response may serve a request now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reuse {
    /// Fresh: answer from it. `ttl` is the freshness left.
    Fresh { age: u64, ttl: u64 },
    /// Stale, and the client's `max-stale` accepts it (§4.2.4): answer from it.
    StaleAllowed { age: u64, stale: u64 },
    /// Stale within `stale-while-revalidate` (RFC 5861 §3): answer from it, and revalidate in
    /// the background (one request, collapsed).
    StaleWhileRevalidate { age: u64, stale: u64 },
    /// Stale, and the operator's `use_stale = ["updating"]` (within `stale_max`) serves it
    /// while one request refreshes it in the background, as [`Reuse::StaleWhileRevalidate`]
    /// does ([`crate::stale::UseStale::UPDATING`]).
    StaleUpdating { age: u64, stale: u64 },
    /// Usable only after the origin validates it (§4.3): send a conditional request.
    Validate(Why),
}

/// Why a stored response must be validated first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// The request said `no-cache` (or `Pragma: no-cache`) (§5.2.1.4).
    RequestNoCache,
    /// The response said `no-cache` (§5.2.2.4).
    ResponseNoCache,
    /// Older than the request's `max-age` (§5.2.1.1).
    RequestMaxAge,
    /// Less freshness left than the request's `min-fresh` (§5.2.1.3).
    MinFresh,
    /// Stale, and nothing allows serving it so (§4.2.4); `must_revalidate` when
    /// must-revalidate, proxy-revalidate or s-maxage forbids stale answers outright (§5.2.2.2,
    /// §5.2.2.8, §5.2.2.10), which also rules out stale-if-error.
    Stale { must_revalidate: bool },
}

impl Reuse {
    /// Whether the cache answers from the entry without asking upstream first.
    pub fn answers(&self) -> bool {
        !matches!(self, Reuse::Validate(_))
    }
}

/// Whether stale answers are forbidden outright for this response in a shared cache.
pub(crate) fn must_revalidate(resp: &ResponseFacts) -> bool {
    resp.cc.must_revalidate || resp.cc.proxy_revalidate || resp.cc.s_maxage != Delta::Absent
}

/// How `entry` may serve a request with facts `req` at `now` (§4.2.4, §4.3, §5.2.1, RFC 5861),
/// and the operator's policy: [`Options::client_no_cache`], [`Options::use_stale`]'s
/// `updating` and [`Options::stale_max`], which bounds every stale answer.
pub fn reuse(req: &RequestFacts, entry: &Entry, now: Time, opts: &Options) -> Reuse {
    if opts.ignore.any() {
        let resp = ignored(&entry.facts, opts.ignore);
        return reuse_of(req, &resp, entry.timing, now, opts);
    }
    // A mount that ignores nothing (the common case) reads the stored facts as they are,
    // with no owned copy to drop.
    reuse_of(req, &entry.facts, entry.timing, now, opts)
}

/// [`reuse`] of facts already governed by [`Options::ignore`].
#[inline(always)]
fn reuse_of(
    req: &RequestFacts,
    resp: &ResponseFacts,
    timing: Timing,
    now: Time,
    opts: &Options,
) -> Reuse {
    let age = current_age(resp, timing, now);
    let life = lifetime_of(resp, timing.response_time, opts);
    // A shared cache may leave the client's no-cache and max-age unheeded (nginx and
    // Varnish's builtin VCL do): `ClientNoCache::Ignore`.
    let forced = opts.client_no_cache == ClientNoCache::Revalidate;
    if forced && req.cc.no_cache {
        return Reuse::Validate(Why::RequestNoCache);
    }
    if resp.cc.no_cache {
        return Reuse::Validate(Why::ResponseNoCache);
    }
    if forced && req.cc.max_age.is_some_and(|m| age > u64::from(m)) {
        return Reuse::Validate(Why::RequestMaxAge);
    }
    if life > age {
        let ttl = life - age;
        if req.cc.min_fresh.is_some_and(|m| ttl < u64::from(m)) {
            return Reuse::Validate(Why::MinFresh);
        }
        return Reuse::Fresh { age, ttl };
    }
    // Stale (§4.2: fresh only while lifetime > age).
    let stale = age - life;
    if must_revalidate(resp) {
        return Reuse::Validate(Why::Stale {
            must_revalidate: true,
        });
    }
    if !within_max(stale, opts) {
        return Reuse::Validate(Why::Stale {
            must_revalidate: false,
        });
    }
    if req.cc.max_stale.is_some_and(|m| stale <= u64::from(m)) && req.cc.min_fresh.is_none() {
        return Reuse::StaleAllowed { age, stale };
    }
    if matches!(resp.cc.stale_while_revalidate, Delta::Secs(s) if stale <= u64::from(s)) {
        return Reuse::StaleWhileRevalidate { age, stale };
    }
    if opts.use_stale.has(UseStale::UPDATING) {
        return Reuse::StaleUpdating { age, stale };
    }
    Reuse::Validate(Why::Stale {
        must_revalidate: false,
    })
}

/// Whether `entry` may answer a request because the origin failed (a 500, 502, 503 or 504,
/// or no answer at all): `stale-if-error` from the response or the request (RFC 5861 §4),
/// never when must-revalidate / proxy-revalidate / s-maxage forbid stale answers (§4.2.4) or
/// the response said no-cache, nor past [`Options::stale_max`]. The operator's own reasons are
/// [`crate::stale::on_failure`]'s.
pub fn stale_if_error(req: &RequestFacts, entry: &Entry, now: Time, opts: &Options) -> bool {
    let resp = &*governed(&entry.facts, opts);
    if must_revalidate(resp) || resp.cc.no_cache {
        return false;
    }
    let age = current_age(resp, entry.timing, now);
    let stale = age.saturating_sub(lifetime(resp, entry.timing.response_time, opts));
    if !within_max(stale, opts) {
        return false;
    }
    let by_response = matches!(resp.cc.stale_if_error, Delta::Secs(s) if stale <= u64::from(s));
    let by_request = req.cc.stale_if_error.is_some_and(|s| stale <= u64::from(s));
    by_response || by_request
}

/// Whether an upstream answer counts as an error for `stale-if-error` (RFC 5861 §4).
pub fn is_error_status(status: u16) -> bool {
    matches!(status, 500 | 502 | 503 | 504)
}

#[cfg(test)]
mod tests;
