//! The cache-aside for handlers (feature `kv`): linerate-kv's [`Cache`] (a memory
//! tier per process, and optionally a shared Redis/Valkey or memcached tier) with `X-Cache:
//! HIT`/`MISS` on the answer. Owns only the glue to [`Response`]; the tiers, their timeouts
//! and their outage rules are linerate-kv's. A tier that is down never fails a request here:
//! it is a miss, and the handler's own answer goes out.
//!
//! ```no_run
//! # async fn load(id: &str) -> Result<Vec<u8>, linerate_server::Response> { Ok(Vec::new()) }
//! use std::time::Duration;
//! use linerate_server::kv::{aside, Cache, TierConfig};
//!
//! let cache = Cache::builder("items")
//!     .tier(TierConfig::parse("redis://127.0.0.1:6379").unwrap())
//!     .build()
//!     .unwrap();
//! # async {
//! // GET: from the cache (HIT) or from `load` (MISS, then kept for a second).
//! let answer = aside(&cache, "42", Duration::from_secs(1), "application/json", || load("42")).await;
//! // PUT: the next GET is a MISS.
//! cache.invalidate("42").await;
//! # };
//! ```
#![forbid(unsafe_code)]

use std::future::Future;
use std::time::Duration;

pub use linerate_kv::{
    BadUrl, Cache, CacheBuilder, CacheStats, Endpoint, Hit, Snapshot, Source, Tier, TierConfig,
};

use crate::{Body, Response};

/// The `X-Cache` field's name (the de-facto header; `Cache-Status`, RFC 9211, is the
/// proxy cache's).
pub const X_CACHE: &str = "x-cache";

/// Whether an answer came from the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XCache {
    Hit,
    Miss,
}

impl XCache {
    pub fn as_str(self) -> &'static str {
        match self {
            XCache::Hit => "HIT",
            XCache::Miss => "MISS",
        }
    }
}

/// `response` with `X-Cache: HIT` or `MISS`.
pub fn x_cache(response: Response, x: XCache) -> Response {
    response.header(X_CACHE, x.as_str())
}

/// The cache-aside in one call: `key`'s bytes from `cache` as a 200 with `content_type` and
/// `X-Cache: HIT`; else `fill`'s bytes, kept for `ttl`, as a 200 with `X-Cache: MISS`. An
/// `Err` from `fill` (a 404, a 503) is the answer as it is, and nothing is kept.
pub async fn aside<F, Fut>(
    cache: &Cache,
    key: &str,
    ttl: Duration,
    content_type: &'static str,
    fill: F,
) -> Response
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<Vec<u8>, Response>>,
{
    if let Some(hit) = cache.get(key).await {
        return x_cache(bytes(content_type, hit.value.to_vec()), XCache::Hit);
    }
    match fill().await {
        Ok(made) => {
            cache.set(key, made.as_slice(), ttl).await;
            x_cache(bytes(content_type, made), XCache::Miss)
        }
        Err(answer) => answer,
    }
}

fn bytes(content_type: &'static str, body: Vec<u8>) -> Response {
    Response::new(200)
        .content_type(content_type)
        .body(Body::Owned(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn miss_then_hit_then_miss_after_an_invalidation() {
        block_on(async {
            let cache = Cache::builder("t").build().unwrap();
            let ttl = Duration::from_secs(60);
            let fills = std::cell::Cell::new(0);
            let fill = || async {
                fills.set(fills.get() + 1);
                Ok(b"{\"id\":1}".to_vec())
            };
            let first = aside(&cache, "1", ttl, "application/json", fill).await;
            assert_eq!(first.field(X_CACHE), Some("MISS"));
            let second = aside(&cache, "1", ttl, "application/json", fill).await;
            assert_eq!(second.field(X_CACHE), Some("HIT"));
            assert_eq!(second.body_bytes(), b"{\"id\":1}");
            assert_eq!(second.content_type_value(), Some("application/json"));
            assert_eq!(fills.get(), 1);
            cache.invalidate("1").await;
            let third = aside(&cache, "1", ttl, "application/json", fill).await;
            assert_eq!(third.field(X_CACHE), Some("MISS"));
            assert_eq!(fills.get(), 2);
        });
    }

    #[test]
    fn a_failed_fill_is_the_answer_and_is_not_kept() {
        block_on(async {
            let cache = Cache::builder("t").build().unwrap();
            let ttl = Duration::from_secs(60);
            let gone = || async { Err(Response::new(404)) };
            let r = aside(&cache, "9", ttl, "application/json", gone).await;
            assert_eq!((r.status_code(), r.field(X_CACHE)), (404, None));
            assert!(cache.get("9").await.is_none());
        });
    }
}
