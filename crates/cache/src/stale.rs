//! Stale answers by the operator's policy: which failures of the origin let
//! a stored answer be served stale (nginx's `proxy_cache_use_stale`), how far past freshness
//! any stale answer may be (`stale_max`, Varnish's grace), and why one was served (for
//! Cache-Status). RFC 9111's own limits always win: `must-revalidate`, `proxy-revalidate`,
//! `s-maxage` and `no-cache` on the stored response forbid every stale answer (§4.2.4,
//! §5.2.2), whatever the policy says. Nothing here reads a clock.

use crate::entry::Entry;
use crate::facts::RequestFacts;
use crate::freshness::{current_age, is_error_status, lifetime, must_revalidate};
use crate::{Options, Time};

/// The failures of the origin that let a stored answer be served stale, and `updating`
/// (answer stale at once while one request refreshes the entry in the background), as
/// nginx's `proxy_cache_use_stale` names them. A set of flags; empty by default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UseStale(u8);

impl UseStale {
    /// Nothing beyond what the origin grants (`stale-if-error`, `stale-while-revalidate`).
    pub const NONE: UseStale = UseStale(0);
    /// No answer: the connection was refused or reset, or the head could not be read.
    pub const ERROR: UseStale = UseStale(1);
    /// No answer in time (the upstream's connect or read timeout).
    pub const TIMEOUT: UseStale = UseStale(1 << 1);
    /// The entry is being refreshed: answer from it at once, one request goes upstream in
    /// the background (nginx's `updating` with `proxy_cache_background_update on`).
    pub const UPDATING: UseStale = UseStale(1 << 2);
    /// The origin answered 500.
    pub const HTTP_500: UseStale = UseStale(1 << 3);
    /// The origin answered 502.
    pub const HTTP_502: UseStale = UseStale(1 << 4);
    /// The origin answered 503.
    pub const HTTP_503: UseStale = UseStale(1 << 5);
    /// The origin answered 504.
    pub const HTTP_504: UseStale = UseStale(1 << 6);

    /// The names a configuration uses, as nginx's `proxy_cache_use_stale` spells them.
    pub const NAMES: [(&'static str, UseStale); 7] = [
        ("error", UseStale::ERROR),
        ("timeout", UseStale::TIMEOUT),
        ("updating", UseStale::UPDATING),
        ("http_500", UseStale::HTTP_500),
        ("http_502", UseStale::HTTP_502),
        ("http_503", UseStale::HTTP_503),
        ("http_504", UseStale::HTTP_504),
    ];

    /// The flag named `name` (see [`UseStale::NAMES`]).
    pub fn named(name: &str) -> Option<UseStale> {
        UseStale::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, f)| f)
    }

    /// Both sets.
    pub fn with(self, other: UseStale) -> UseStale {
        UseStale(self.0 | other.0)
    }

    /// Whether every flag of `flag` is in the set.
    pub fn has(self, flag: UseStale) -> bool {
        self.0 & flag.0 == flag.0 && flag.0 != 0
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether the set covers `failure`.
    pub fn covers(self, failure: Failure) -> bool {
        match failure {
            Failure::Error => self.has(UseStale::ERROR),
            Failure::Timeout => self.has(UseStale::TIMEOUT),
            Failure::Status(500) => self.has(UseStale::HTTP_500),
            Failure::Status(502) => self.has(UseStale::HTTP_502),
            Failure::Status(503) => self.has(UseStale::HTTP_503),
            Failure::Status(504) => self.has(UseStale::HTTP_504),
            Failure::Status(_) => false,
        }
    }
}

/// How the origin failed a request that had a stored answer to fall back on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// No answer: refused, reset, or a head that could not be read.
    Error,
    /// No answer in time.
    Timeout,
    /// An answer with this status (only 500, 502, 503 and 504 count: RFC 5861 §4).
    Status(u16),
}

/// Why a stale answer was served: what Cache-Status's `detail` says of it, so that a log or
/// a metric can tell the origin's grant from each of the operator's reasons.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StaleBy {
    /// The origin's (or the request's) `stale-if-error` (RFC 5861 §4).
    IfError,
    /// The operator's `use_stale` for this failure.
    Policy(Failure),
    /// The operator's `use_stale = ["updating"]`: answered at once, refreshed behind.
    Updating,
}

impl StaleBy {
    /// Cache-Status's `detail` for it (RFC 9211 §2.8: free text, an sf-token here).
    pub fn detail(self) -> &'static str {
        match self {
            StaleBy::IfError => "stale-if-error",
            StaleBy::Updating => "stale-updating",
            StaleBy::Policy(Failure::Error) => "stale-error",
            StaleBy::Policy(Failure::Timeout) => "stale-timeout",
            StaleBy::Policy(Failure::Status(500)) => "stale-http-500",
            StaleBy::Policy(Failure::Status(502)) => "stale-http-502",
            StaleBy::Policy(Failure::Status(503)) => "stale-http-503",
            StaleBy::Policy(Failure::Status(504)) => "stale-http-504",
            StaleBy::Policy(Failure::Status(_)) => "stale-http",
        }
    }
}

/// Whether an answer `stale` seconds past its freshness is within `stale_max`
/// ([`Options::stale_max`]; none set: no bound but the grant's own).
pub fn within_max(stale: u64, opts: &Options) -> bool {
    opts.stale_max.is_none_or(|m| stale <= u64::from(m))
}

/// Whether `entry` may answer `req` at `now` because the origin failed it with `failure`,
/// and why: the origin's or the request's `stale-if-error` (RFC 5861 §4), else the operator's
/// [`Options::use_stale`]. Never when the stored response forbids stale answers (§4.2.4:
/// must-revalidate, proxy-revalidate, s-maxage; no-cache), nor past [`Options::stale_max`].
pub fn on_failure(
    req: &RequestFacts,
    entry: &Entry,
    now: Time,
    failure: Failure,
    opts: &Options,
) -> Option<StaleBy> {
    let resp = &entry.facts;
    if must_revalidate(resp) || resp.cc.no_cache {
        return None;
    }
    if let Failure::Status(s) = failure
        && !is_error_status(s)
    {
        return None;
    }
    let age = current_age(resp, entry.timing, now);
    let stale = age.saturating_sub(lifetime(resp, entry.timing.response_time, opts));
    if !within_max(stale, opts) {
        return None;
    }
    let by_response = matches!(
        resp.cc.stale_if_error,
        crate::cache_control::Delta::Secs(s) if stale <= u64::from(s)
    );
    let by_request = req.cc.stale_if_error.is_some_and(|s| stale <= u64::from(s));
    if by_response || by_request {
        return Some(StaleBy::IfError);
    }
    opts.use_stale
        .covers(failure)
        .then_some(StaleBy::Policy(failure))
}

#[cfg(test)]
mod tests;
