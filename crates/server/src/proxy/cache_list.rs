//! What a mount's cache holds, as the admin listener's `GET /cache` lists it: each stored
//! answer's key, variant, status, age, TTL left, size, hits and tags (`Surrogate-Key`,
//! `Cache-Tag`: what a tag purge names), by key prefix.
//!
//! Owns the rows only; the store walks its shards one lock at a time
//! (`linerate_cache::Store::list`), and at most [`LIST_LIMIT`] answers come out per cache, so
//! a listing never holds the workers back for more than one shard's walk.
#![forbid(unsafe_code)]

use linerate_cache::freshness::{current_age, lifetime};

use super::cache::MountCache;

/// The most stored answers one listing shows per cache; past it, `truncated` says so.
pub(crate) const LIST_LIMIT: usize = 1000;

/// Up to `max` (at most [`LIST_LIMIT`]) of `cache`'s answers whose key starts with `prefix`,
/// as JSON: `{"entries": [...], "truncated": bool}`.
pub(crate) fn list(cache: &MountCache, prefix: &[u8], max: usize) -> serde_json::Value {
    let (listed, truncated) = cache.store.list(prefix, max.min(LIST_LIMIT));
    let now = super::cache::now();
    let entries: Vec<serde_json::Value> = listed
        .iter()
        .map(|l| {
            let e = &l.entry;
            let age = current_age(&e.facts, e.timing, now);
            let life = lifetime(&e.facts, e.timing.response_time, &cache.opts);
            // Negative: stale by that many seconds.
            let ttl = i64::try_from(life)
                .unwrap_or(i64::MAX)
                .saturating_sub(i64::try_from(age).unwrap_or(i64::MAX));
            let variant: serde_json::Map<String, serde_json::Value> = e
                .variant
                .fields()
                .map(|(n, v)| {
                    let v = v.map(|v| String::from_utf8_lossy(v).into_owned());
                    (String::from_utf8_lossy(n).into_owned(), v.into())
                })
                .collect();
            serde_json::json!({
                "key": String::from_utf8_lossy(e.key.as_bytes()),
                "variant": variant,
                "variants": l.variants,
                "status": e.status,
                "age": age,
                "ttl": ttl,
                "size": l.size,
                "hits": l.hits,
                "tags": linerate_cache::tags::tags(&e.fields)
                    .map(|t| String::from_utf8_lossy(t).into_owned())
                    .collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::json!({ "entries": entries, "truncated": truncated })
}
