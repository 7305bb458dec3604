//! HTTP caching (RFC 9111) for linerate, sans I/O: what a shared cache decides, and a bounded
//! memory store. Request and response heads come in as plain data (method, scheme, authority,
//! target, `(name, value)` fields, status) with "now" passed in; decisions come out. No
//! sockets, clocks, threads or async here, and no dependency on the server.
//!
//! - [`key`]: the primary key (scheme, host, path, query) and `Vary`'s secondary keys;
//!   [`key_rules`]: a mount's own key (parts, query parameters, a cookie or field added).
//! - [`origin_rules`]: lifetimes for answers without freshness, origin fields not obeyed.
//! - [`request_rules`]: a mount's bypass and no-store rules on the request.
//! - [`cache_control`], [`facts`]: the heads read once; [`targeted`]: `CDN-Cache-Control`
//!   (RFC 9213), which this gateway cache obeys before `Cache-Control`.
//! - [`storable`]: may it be stored (§3); [`freshness`]: lifetime, age, may it be used (§4.2).
//! - [`validate`]: conditional requests upstream, 304 updates (§4.3), 304s to the client.
//! - [`invalidate`]: what an unsafe method's success invalidates (§4.4).
//! - [`range`]: one byte range of a stored whole (RFC 9110 §14).
//! - [`status`]: the Cache-Status field (RFC 9211).
//! - [`store`]: the bounded memory store (S3-FIFO) and its [`Counters`](store::Counters).
//! - [`shared`]: the bytes an entry keeps, ranges of one reference-counted block.
//! - [`fill`]: a body collected for the store while it streams, dropped past the limit.
//! - [`stale`]: stale answers by the operator's policy (`use_stale`, `stale_max`).
//! - [`collapse`]: collapsed-forwarding bookkeeping (one leader per key, the rest wait).
//! - [`policy`]: [`plan`] before going upstream and [`after`] the answer, composed from the above.
//!
//! docs/cache.md describes the design and what the server does with it.
#![forbid(unsafe_code)]

/// The README's examples, compiled and run with the other doctests (`cargo test --doc`), so
/// that they cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub mod cache_control;
pub mod collapse;
pub mod date;
pub mod entry;
pub mod facts;
pub mod fields;
pub mod fill;
pub mod freshness;
pub mod invalidate;
pub mod key;
pub mod key_rules;
pub mod origin_rules;
pub mod policy;
pub mod range;
pub mod request_rules;
pub mod shared;
pub mod stale;
pub mod status;
pub mod storable;
pub mod store;
pub mod tags;
pub mod targeted;
pub mod validate;

pub use entry::{Entry, Rendered, Timing};
pub use facts::{Method, Request, RequestFacts, Response, ResponseFacts};
pub use freshness::{Reuse, Why};
pub use key::{Key, NoKey, Variant, Vary};
pub use key_rules::{KeyRules, key_for};
pub use origin_rules::{Ignore, Valid};
pub use policy::{After, Bypass, Plan, after, after_failure, plan, plan_keyed, plan_with};
pub use request_rules::{RequestRules, Rule};
pub use shared::Shared;
pub use stale::{Failure, StaleBy, UseStale};
pub use storable::NotStored;

/// An instant, in whole seconds since the Unix epoch: HTTP dates and ages have one-second
/// resolution (RFC 9110 §5.6.7, RFC 9111 §1.2.2). The caller reads the clock and passes it in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub u64);

impl Time {
    /// `self - earlier` in seconds, 0 when `earlier` is later.
    pub fn since(self, earlier: Time) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

/// The cache's policy choices.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Heuristic freshness (§4.2.2) for responses without explicit freshness; off by default:
    /// an origin that says nothing about caching has not agreed to stale answers, and
    /// cache-tests' many tests assume a cache that does not invent lifetimes.
    pub heuristic: Option<Heuristic>,
    /// What lets an answer with Set-Cookie be stored.
    pub set_cookie: SetCookie,
    // stale by policy
    /// The origin's failures (and `updating`) that let a stored answer be served stale beyond
    /// what the origin grants, as nginx's `proxy_cache_use_stale`; none by default. RFC 9111's
    /// limits still win ([`stale`]).
    pub use_stale: UseStale,
    /// The most seconds past freshness that any stale answer may be (the origin's
    /// `stale-if-error` and `stale-while-revalidate`, the request's `max-stale`, the
    /// operator's `use_stale`), as Varnish's grace; `None`: no bound but each grant's own.
    pub stale_max: Option<u32>,
    // what a client may force
    /// What a request's `no-cache`, `max-age` and `Pragma: no-cache` do. The library's
    /// default is RFC 9111's reading ([`ClientNoCache::Revalidate`]); the server's
    /// configuration defaults to [`ClientNoCache::Ignore`].
    pub client_no_cache: ClientNoCache,
    // the key
    /// The mount's own key ([`key_rules`]); `None`: the default key ([`Key::write`]).
    pub key: Option<std::sync::Arc<KeyRules>>,
    // TTL and origin fields
    /// Lifetimes for answers the origin gave no freshness ([`origin_rules`]).
    pub valid: Option<std::sync::Arc<Valid>>,
    /// The origin fields not obeyed ([`origin_rules`]; dangerous).
    pub ignore: Ignore,
    // bypass and no-store rules
    /// Requests not answered from the store, and requests whose answers are not stored
    /// ([`request_rules`]).
    pub rules: Option<std::sync::Arc<RequestRules>>,
}

/// What a request's `Cache-Control: no-cache` / `max-age` (and `Pragma: no-cache`) may make
/// a shared cache do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClientNoCache {
    /// They are not heeded: a stored answer that may be used serves the request, as nginx
    /// and Varnish's builtin VCL do, so that no client can send every request to the origin.
    Ignore,
    /// RFC 9111 §5.2.1.1 and §5.2.1.4: the stored answer is validated first (a conditional
    /// request upstream). The server collapses concurrent ones for a key into one.
    #[default]
    Revalidate,
}

/// Whether a shared cache may store an answer that sets a cookie (RFC 9111 does not forbid
/// it; see [`NotStored::SetCookie`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SetCookie {
    /// Never: such an answer goes to the request that caused it and nowhere else, as nginx
    /// and Varnish's builtin VCL do. Not stored rather than stored without its Set-Cookie:
    /// the page that sets a cookie is usually made for that visitor too. Costs cache-tests'
    /// optimal `other-set-cookie` (a `max-age` answer with a cookie, reused), which also
    /// warned under the former default (stored only with `public` or `s-maxage`); no
    /// required test.
    #[default]
    Never,
    /// Dangerous, for an origin whose cookies are the same for everyone: stored on any
    /// explicit freshness (`max-age`, `s-maxage`, `Expires`) or `public` (RFC 9111's
    /// reading, minus answers stored on a validator or heuristics alone), and the stored
    /// Set-Cookie replayed to every visitor that the entry answers.
    Explicit,
}

/// Heuristic freshness: a fraction of the time since Last-Modified (§4.2.2), capped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heuristic {
    /// The percentage of (Date − Last-Modified) taken as the lifetime; 10 is typical (§4.2.2).
    pub percent: u8,
    /// The longest heuristic lifetime, in seconds.
    pub max: u32,
}

impl Default for Heuristic {
    fn default() -> Self {
        Heuristic {
            percent: 10,
            max: 24 * 3600,
        }
    }
}
