//! The cache's two decisions for one request, composed from the rule modules: [`plan`] before
//! going upstream (answer from the store, forward, validate, or 504), and [`after`] once the
//! upstream head is in (store it, freshen from a 304, serve stale on error, invalidate). The
//! server's content phase calls these two and does the I/O; nothing here reads a clock.
//!
//! ```
//! use linerate_cache::store::{Limits, Store};
//! use linerate_cache::{After, Entry, Options, Plan, Request, Response, Time, Timing, after, plan};
//!
//! let store = Store::new(Limits::default());
//! let opts = Options::default();
//! let req = Request { method: b"GET", scheme: b"https", authority: b"example.com",
//!                     target: b"/a", fields: &[], body: false };
//! let now = Time(1_700_000_000);
//! // A miss: go upstream.
//! assert!(matches!(plan(&req, &store, now, &opts), Plan::Forward { validate: None, .. }));
//! let resp = Response { status: 200, fields: &[(b"Cache-Control", b"max-age=60")] };
//! let timing = Timing { request_time: now, response_time: now };
//! if let After::Store { key, variant } = after(&req, Some(&resp), None, timing, &store, &opts) {
//!     // ... once the body is whole (and under the limit):
//!     store.insert(Entry::new(key, variant, &resp, b"hello"[..].into(), timing));
//! }
//! // Ten seconds later: a hit, Age: 10.
//! match plan(&req, &store, Time(now.0 + 10), &opts) {
//!     Plan::Answer { entry, age, .. } => assert_eq!((&*entry.body, age), (&b"hello"[..], 10)),
//!     other => panic!("{other:?}"),
//! }
//! ```

use std::sync::Arc;

use crate::entry::{Entry, Timing};
use crate::facts::{Method, Request, RequestFacts, Response, ResponseFacts};
use crate::freshness::{Reuse, Why, age_field, is_error_status, reuse};
use crate::invalidate::invalidated;
use crate::key::{Key, NoKey, Variant};
use crate::stale::{Failure, StaleBy, on_failure};
use crate::status::Fwd;
use crate::storable::{NotStored, storable};
use crate::store::{Lookup, Store};
use crate::validate::{Mismatch, freshen, not_modified};
use crate::{Options, Time};

/// Why a request is not handled by the cache at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bypass {
    /// Not GET or HEAD. An unsafe method still invalidates: call [`after`].
    Method,
    /// The request has no trustworthy key (see [`NoKey`]).
    NoKey(NoKey),
    /// If-Match, If-Unmodified-Since or If-Range: the origin judges them.
    Preconditions,
    /// A GET or HEAD that carries content ([`Request::body`]): the origin may read it and
    /// answer something else than the URL's representation, so it is neither answered from
    /// the store, nor collapsed with other requests, nor stored.
    Body,
    /// A `bypass` rule of the mount matched (nginx's `proxy_cache_bypass`):
    /// not answered from the store nor collapsed; its answer is stored as any other.
    Rule,
}

/// What to do with a request before going upstream.
#[derive(Debug)]
pub enum Plan {
    /// Forward as is; the answer is not stored ([`Bypass::Rule`]'s is, when [`after`] says so).
    Bypass(Bypass),
    /// Answer from `entry` ([`Entry::answer_fields`] and `Age: age`; a 304 with
    /// [`crate::validate::not_modified_fields`] instead when `not_modified`). When
    /// `revalidate` is set (stale-while-revalidate), also start one background validation,
    /// collapsed with any other for the key; `updating` says the stale answer is the
    /// operator's `use_stale = ["updating"]`, not the origin's grant
    /// ([`crate::StaleBy::Updating`]).
    Answer {
        entry: Arc<Entry>,
        age: u64,
        /// Seconds of freshness left: at least 1 when fresh, 0 or less when stale.
        ttl: i64,
        not_modified: bool,
        revalidate: bool,
        updating: bool,
    },
    /// Forward (the client's If-None-Match / If-Modified-Since removed:
    /// [`crate::validate::CLIENT_CONDITIONALS`]); with `validate`, add that entry's
    /// validators ([`crate::validate::conditional_fields`]). A miss or a validation joins
    /// the key's flight ([`crate::collapse`]) unless `fwd` is `Request` (the client asked to
    /// skip the cache: its answer is its own).
    Forward {
        key: Key,
        validate: Option<Arc<Entry>>,
        fwd: Fwd,
    },
    /// `only-if-cached` and nothing usable stored: answer 504 (§5.2.1.7).
    GatewayTimeout,
}

/// Decides how to serve `req` at `now` from `store`.
pub fn plan(req: &Request<'_>, store: &Store, now: Time, opts: &Options) -> Plan {
    plan_with(req, store, None, now, opts)
}

/// [`plan`], with `held` an entry this request holds apart from the store (a shared second
/// tier's answer to it): chosen as a stored one would be (same key, its Vary matching the
/// request) when the store has none, so the request is answered from it even when the store
/// could not keep it.
pub fn plan_with(
    req: &Request<'_>,
    store: &Store,
    held: Option<&Arc<Entry>>,
    now: Time,
    opts: &Options,
) -> Plan {
    let facts = RequestFacts::of(req);
    if !matches!(facts.method, Method::Get | Method::Head) {
        return Plan::Bypass(Bypass::Method);
    }
    if facts.body {
        return Plan::Bypass(Bypass::Body);
    }
    if opts.rules.as_ref().is_some_and(|r| r.bypass(req)) {
        return Plan::Bypass(Bypass::Rule);
    }
    // The key is built in this thread's buffer and looked up by its bytes: a hit allocates
    // no key (only a plan that goes forward makes one).
    let mut buf = KEY_BUF.take();
    let written = match opts.key.as_deref() {
        None => Key::write(req.scheme, req.authority, req.target, &mut buf),
        Some(rules) => rules.write(req.scheme, req.authority, req.target, req.fields, &mut buf),
    };
    let plan = match written {
        Err(e) => Plan::Bypass(Bypass::NoKey(e)),
        Ok(()) if facts.other_preconditions => Plan::Bypass(Bypass::Preconditions),
        Ok(()) => plan_key(req, &facts, &buf, store, held, now, opts),
    };
    KEY_BUF.set(buf);
    plan
}

/// [`plan_with`] for a request whose key was made before: `key` is the one a [`Plan::Forward`]
/// for this same request gave (a second tier's answer plans the request again), so it is not
/// written again (~475 instructions a request, callgrind).
pub fn plan_keyed(
    req: &Request<'_>,
    key: &Key,
    store: &Store,
    held: Option<&Arc<Entry>>,
    now: Time,
    opts: &Options,
) -> Plan {
    let facts = RequestFacts::of(req);
    if !matches!(facts.method, Method::Get | Method::Head) {
        return Plan::Bypass(Bypass::Method);
    }
    if facts.body {
        return Plan::Bypass(Bypass::Body);
    }
    if facts.other_preconditions {
        return Plan::Bypass(Bypass::Preconditions);
    }
    if opts.rules.as_ref().is_some_and(|r| r.bypass(req)) {
        return Plan::Bypass(Bypass::Rule);
    }
    plan_key(req, &facts, key.as_bytes(), store, held, now, opts)
}

thread_local! {
    /// This thread's buffer for the key a plan looks up (see [`plan_with`]).
    static KEY_BUF: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// [`plan_with`] for a request whose key's bytes are `key`.
fn plan_key(
    req: &Request<'_>,
    facts: &RequestFacts,
    key: &[u8],
    store: &Store,
    held: Option<&Arc<Entry>>,
    now: Time,
    opts: &Options,
) -> Plan {
    let mut lookup = store.get_bytes(key, req.fields);
    if let (Lookup::UriMiss | Lookup::VaryMiss, Some(e)) = (&lookup, held)
        && e.key.as_bytes() == key
        && e.variant.matches(req.fields)
    {
        lookup = Lookup::Found(Arc::clone(e));
    }
    let key = || Key::from_bytes(key);
    let (entry, fwd) = match lookup {
        Lookup::Found(e) => (e, Fwd::Stale),
        Lookup::VaryMiss | Lookup::UriMiss if facts.cc.only_if_cached => {
            return Plan::GatewayTimeout;
        }
        Lookup::VaryMiss => {
            return Plan::Forward {
                key: key(),
                validate: None,
                fwd: Fwd::VaryMiss,
            };
        }
        Lookup::UriMiss => {
            return Plan::Forward {
                key: key(),
                validate: None,
                fwd: Fwd::UriMiss,
            };
        }
    };
    let answer = |entry: Arc<Entry>, age: u64, ttl: i64, revalidate: bool, updating: bool| {
        let not_modified = facts.validates && not_modified(req.fields, &entry);
        Plan::Answer {
            entry,
            age: age_field(age),
            ttl,
            not_modified,
            revalidate,
            updating,
        }
    };
    match reuse(facts, &entry, now, opts) {
        Reuse::Fresh { age, ttl } => answer(entry, age, ttl as i64, false, false),
        Reuse::StaleAllowed { age, stale } => answer(entry, age, -(stale as i64), false, false),
        Reuse::StaleWhileRevalidate { age, stale } => {
            answer(entry, age, -(stale as i64), true, false)
        }
        Reuse::StaleUpdating { age, stale } => answer(entry, age, -(stale as i64), true, true),
        Reuse::Validate(_) if facts.cc.only_if_cached => Plan::GatewayTimeout,
        Reuse::Validate(why) => {
            let fwd = match why {
                Why::RequestNoCache | Why::RequestMaxAge | Why::MinFresh => Fwd::Request,
                Why::ResponseNoCache | Why::Stale { .. } => fwd,
            };
            Plan::Forward {
                key: key(),
                validate: Some(entry),
                fwd,
            }
        }
    }
}

/// What to do with the upstream answer.
#[derive(Debug)]
pub enum After {
    /// Store the answer once its body is whole (an [`Entry`] of it: [`Entry::new`]) and
    /// pass it on; a body over the store's limit passes on whole, unstored.
    Store { key: Key, variant: Variant },
    /// A 304 freshened the entry (already stored): answer the client from it (a 304 if its
    /// own conditions match, else the stored 200).
    Freshened(Arc<Entry>),
    /// The origin failed and the entry may be served stale (stale-if-error, RFC 5861 §4, or
    /// the operator's `use_stale`), for the reason given.
    ServeStale(Arc<Entry>, StaleBy),
    /// Pass the answer on, unstored.
    PassOn(Option<NotStored>),
    /// A 304 for another representation: send the request again, unconditionally.
    Refetch,
}

/// Decides what the upstream answer `resp` (to `req`, timed by `timing`; `validated` is the
/// entry a conditional request was sent for) means for the store, and applies what needs no
/// body: invalidation (§4.4) and 304 freshening (§4.3.4). `resp` is `None` when no answer
/// came (connection refused, reset: [`after_failure`] tells a timeout): only a stale answer
/// applies.
pub fn after(
    req: &Request<'_>,
    resp: Option<&Response<'_>>,
    validated: Option<&Arc<Entry>>,
    timing: Timing,
    store: &Store,
    opts: &Options,
) -> After {
    let facts = RequestFacts::of(req);
    let key = crate::key_rules::key_for(
        opts.key.as_deref(),
        req.scheme,
        req.authority,
        req.target,
        req.fields,
    );
    let Some(resp) = resp else {
        return after_failure(req, validated, Failure::Error, timing, opts);
    };
    if let Ok(target) = &key {
        for k in invalidated(facts.method, resp.status, target, resp.fields) {
            store.remove(&k);
        }
    }
    let Ok(key) = key else {
        return After::PassOn(None);
    };
    // A request with conditions the cache does not evaluate (If-Match, If-Unmodified-Since,
    // If-Range) went up as it came (`Plan::Bypass`): its answer (a 412, a 206) answers those
    // conditions, not the next plain request.
    if facts.other_preconditions {
        return After::PassOn(None);
    }
    if let Some(entry) = validated {
        if resp.status == 304 {
            return match freshen(entry, resp.fields, timing) {
                Ok(fresh) => {
                    let fresh = Arc::new(fresh);
                    // The stored response is now the one updated by the 304 (§4.3.4): one
                    // that may no longer be kept (`private`, `no-store` in the 304) answers
                    // this request only, and the old goes.
                    let facts_now = ResponseFacts::of(fresh.status, &fresh.fields);
                    if storable(&facts, &facts_now, timing.response_time, opts).is_ok() {
                        store.insert(Arc::clone(&fresh));
                    } else {
                        store.remove(&key);
                    }
                    After::Freshened(fresh)
                }
                Err(Mismatch::Validator) => After::Refetch,
            };
        }
        if is_error_status(resp.status)
            && let Some(by) = on_failure(
                &facts,
                entry,
                timing.response_time,
                Failure::Status(resp.status),
                opts,
            )
        {
            return After::ServeStale(Arc::clone(entry), by);
        }
    }
    // A `no_store` rule: after the validation's own cases (a 304 answers
    // the cache's validators, not the client, so it freshens the entry as it would).
    if opts.rules.as_ref().is_some_and(|r| r.no_store(req)) {
        return After::PassOn(Some(NotStored::Rule));
    }
    let resp_facts = ResponseFacts::of(resp.status, resp.fields);
    match storable(&facts, &resp_facts, timing.response_time, opts) {
        Ok(()) => After::Store {
            key,
            variant: Variant::of(
                &crate::origin_rules::governed(&resp_facts, opts).vary,
                req.fields,
            ),
        },
        Err(why) => {
            // The stored entry was just replaced upstream by an answer that may not be kept
            // (§4.3.3): the older one is no longer the current representation, so it goes.
            // An error (500, 502, 503, 504) replaces nothing: the origin failed, and the
            // entry stays for the stale answers that are allowed (a failed background
            // refresh leaves it to the next one, within `stale_max`).
            if validated.is_some() && !is_error_status(resp.status) {
                store.remove(&key);
            }
            After::PassOn(Some(why))
        }
    }
}

/// What to do when no answer came from upstream for `req` (`failure`: refused, reset, or
/// timed out; `validated`: the entry a conditional request was sent for): serve it stale if
/// the origin's `stale-if-error` or the operator's `use_stale` allows
/// ([`crate::stale::on_failure`]), else pass the failure on.
pub fn after_failure(
    req: &Request<'_>,
    validated: Option<&Arc<Entry>>,
    failure: Failure,
    timing: Timing,
    opts: &Options,
) -> After {
    let facts = RequestFacts::of(req);
    match validated
        .and_then(|e| on_failure(&facts, e, timing.response_time, failure, opts).map(|b| (e, b)))
    {
        Some((e, by)) => After::ServeStale(Arc::clone(e), by),
        None => After::PassOn(None),
    }
}

#[cfg(test)]
mod tests;
