//! The cache-aside a handler uses: [`Cache`], a namespace of keys in the memory tier and, when
//! configured, the shared second tier. A get looks in memory, then in the tier (and keeps what
//! the tier had in memory for what is left of its TTL, at most the memory cap); a set writes
//! both; an invalidation removes from both; a purge bumps the namespace's generation.
//!
//! Keys in either tier are `NAMESPACE:GENERATION:KEY`. The generation lives in the tier (key
//! `NAMESPACE:gen`), read again at most every `generation_refresh`, so a purge on one edge
//! reaches the others within that time, memory tiers included (their keys carry it too).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::endpoint::TierConfig;
use crate::memory::Memory;
use crate::stats::Snapshot;
use crate::tier::Tier;

/// The memory tier's default size.
pub const DEFAULT_MEMORY_BYTES: u64 = 64 << 20;
/// With a shared tier, the longest a value stays in an edge's memory tier: the most an edge
/// may serve a value another edge invalidated or changed.
pub const DEFAULT_MEMORY_TTL_WITH_TIER: Duration = Duration::from_secs(1);
/// How often an edge reads the namespace's generation from the shared tier: the most a purge
/// on another edge takes to be seen here.
pub const DEFAULT_GENERATION_REFRESH: Duration = Duration::from_secs(1);

/// Where a hit came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Memory,
    Tier,
}

/// A value found.
#[derive(Clone, Debug)]
pub struct Hit {
    pub value: Arc<[u8]>,
    pub source: Source,
}

/// The counters of a [`Cache`], and of its tier.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub memory_hits: u64,
    pub tier_hits: u64,
    pub misses: u64,
    pub sets: u64,
    pub invalidations: u64,
    pub purges: u64,
    pub tier: Option<Snapshot>,
}

/// How a [`Cache`] is made.
#[derive(Clone, Debug)]
pub struct CacheBuilder {
    namespace: String,
    memory_bytes: u64,
    tier: Option<TierConfig>,
    memory_ttl: Option<Duration>,
    generation_refresh: Duration,
}

impl CacheBuilder {
    /// The memory tier's size in bytes ([`DEFAULT_MEMORY_BYTES`]).
    pub fn memory_bytes(mut self, bytes: u64) -> Self {
        self.memory_bytes = bytes;
        self
    }

    /// A shared second tier behind the memory tier.
    pub fn tier(mut self, config: TierConfig) -> Self {
        self.tier = Some(config);
        self
    }

    /// The longest a value stays in memory (default: its TTL alone without a tier,
    /// [`DEFAULT_MEMORY_TTL_WITH_TIER`] with one; zero: no memory tier).
    pub fn memory_ttl(mut self, cap: Duration) -> Self {
        self.memory_ttl = Some(cap);
        self
    }

    /// How often the generation is read from the tier ([`DEFAULT_GENERATION_REFRESH`]).
    pub fn generation_refresh(mut self, every: Duration) -> Self {
        self.generation_refresh = every;
        self
    }

    /// Starts the tier's thread where there is a tier (it connects on first use).
    pub fn build(self) -> std::io::Result<Cache> {
        let tier = self.tier.map(Tier::start).transpose()?;
        let memory_ttl = self.memory_ttl.unwrap_or(match tier {
            Some(_) => DEFAULT_MEMORY_TTL_WITH_TIER,
            None => Duration::MAX,
        });
        Ok(Cache {
            inner: Arc::new(Inner {
                gen_key: format!("{}:gen", self.namespace),
                namespace: self.namespace,
                memory: Memory::new(self.memory_bytes),
                tier,
                memory_ttl,
                refresh: self.generation_refresh,
                generation: Mutex::new(Generation {
                    value: 0,
                    read_at: None,
                }),
                counters: Default::default(),
            }),
        })
    }
}

struct Generation {
    value: u64,
    /// When it was last read from (or bumped in) the tier; `None`: never.
    read_at: Option<Instant>,
}

#[derive(Default)]
struct Counters {
    memory_hits: AtomicU64,
    tier_hits: AtomicU64,
    misses: AtomicU64,
    sets: AtomicU64,
    invalidations: AtomicU64,
    purges: AtomicU64,
}

struct Inner {
    namespace: String,
    gen_key: String,
    memory: Memory,
    tier: Option<Tier>,
    memory_ttl: Duration,
    refresh: Duration,
    generation: Mutex<Generation>,
    counters: Counters,
}

/// A cache-aside namespace; clones share it.
#[derive(Clone)]
pub struct Cache {
    inner: Arc<Inner>,
}

impl Cache {
    /// A cache for keys under `namespace` (which names its generation in a shared tier:
    /// caches that should purge together share it). Memory only unless given a tier.
    pub fn builder(namespace: &str) -> CacheBuilder {
        CacheBuilder {
            namespace: namespace.to_string(),
            memory_bytes: DEFAULT_MEMORY_BYTES,
            tier: None,
            memory_ttl: None,
            generation_refresh: DEFAULT_GENERATION_REFRESH,
        }
    }

    /// The shared tier, if any.
    pub fn tier(&self) -> Option<&Tier> {
        self.inner.tier.as_ref()
    }

    pub fn namespace(&self) -> &str {
        &self.inner.namespace
    }

    /// The value at `key`, from memory or the tier; `None` is a miss (also when the tier
    /// is down or slow).
    pub async fn get(&self, key: &str) -> Option<Hit> {
        let i = &self.inner;
        let full = self.full_key(key).await;
        if let Some(value) = i.memory.get(&full) {
            i.counters.memory_hits.fetch_add(1, Relaxed);
            return Some(Hit {
                value,
                source: Source::Memory,
            });
        }
        let found = match &i.tier {
            Some(tier) => tier.get(&full).await,
            None => None,
        };
        if let Some((left, value)) = found {
            let value: Arc<[u8]> = value.into();
            i.memory
                .insert(&full, value.clone(), left.min(i.memory_ttl));
            i.counters.tier_hits.fetch_add(1, Relaxed);
            return Some(Hit {
                value,
                source: Source::Tier,
            });
        }
        i.counters.misses.fetch_add(1, Relaxed);
        None
    }

    /// Keeps `value` at `key` for `ttl`, in memory and in the tier.
    pub async fn set(&self, key: &str, value: impl Into<Arc<[u8]>>, ttl: Duration) {
        let i = &self.inner;
        let value = value.into();
        let full = self.full_key(key).await;
        i.memory.insert(&full, value.clone(), ttl.min(i.memory_ttl));
        if let Some(tier) = &i.tier {
            tier.set(&full, &value, ttl).await;
        }
        i.counters.sets.fetch_add(1, Relaxed);
    }

    /// Drops `key` from memory and from the tier (it changed); whether the tier was
    /// reached (always true without one). Other edges' memory tiers keep their copy for at
    /// most the memory TTL cap.
    pub async fn invalidate(&self, key: &str) -> bool {
        let i = &self.inner;
        let full = self.full_key(key).await;
        i.memory.remove(&full);
        i.counters.invalidations.fetch_add(1, Relaxed);
        match &i.tier {
            Some(tier) => tier.delete(&full).await,
            None => true,
        }
    }

    /// Drops every key of the namespace, here and — through the generation in the tier — on
    /// every edge sharing it (within their generation refresh). Whether the tier was reached;
    /// this process's memory is emptied either way.
    pub async fn purge(&self) -> bool {
        let i = &self.inner;
        i.counters.purges.fetch_add(1, Relaxed);
        i.memory.clear();
        let Some(tier) = &i.tier else {
            i.generation.lock().unwrap().value += 1;
            return true;
        };
        let bumped = tier.bump_generation(&i.gen_key).await;
        if let Some(g) = bumped {
            let mut state = i.generation.lock().unwrap();
            state.value = g;
            state.read_at = Some(Instant::now());
        }
        bumped.is_some()
    }

    pub fn stats(&self) -> CacheStats {
        let c = &self.inner.counters;
        CacheStats {
            memory_hits: c.memory_hits.load(Relaxed),
            tier_hits: c.tier_hits.load(Relaxed),
            misses: c.misses.load(Relaxed),
            sets: c.sets.load(Relaxed),
            invalidations: c.invalidations.load(Relaxed),
            purges: c.purges.load(Relaxed),
            tier: self.inner.tier.as_ref().map(Tier::counters),
        }
    }

    /// `NAMESPACE:GENERATION:KEY`, the generation read from the tier when it is older than
    /// the refresh (by one caller at a time; the others use the value they find).
    async fn full_key(&self, key: &str) -> String {
        let i = &self.inner;
        let read = match &i.tier {
            Some(tier) => {
                let now = Instant::now();
                let mut state = i.generation.lock().unwrap();
                let due = state
                    .read_at
                    .is_none_or(|at| now.duration_since(at) >= i.refresh);
                if due {
                    state.read_at = Some(now);
                }
                due.then(|| tier.clone())
            }
            None => None,
        };
        if let Some(tier) = read {
            match tier.generation(&i.gen_key).await {
                Some(g) => i.generation.lock().unwrap().value = g,
                // The tier is down: the next call tries again.
                None => i.generation.lock().unwrap().read_at = None,
            }
        }
        let g = i.generation.lock().unwrap().value;
        format!("{}:{g}:{key}", i.namespace)
    }
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("namespace", &self.inner.namespace)
            .field("tier", &self.inner.tier)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn memory_only_get_set_invalidate_purge() {
        block_on(async {
            let c = Cache::builder("t").build().unwrap();
            assert!(c.get("a").await.is_none());
            c.set("a", &b"1"[..], Duration::from_secs(60)).await;
            c.set("b", &b"2"[..], Duration::from_secs(60)).await;
            let hit = c.get("a").await.unwrap();
            assert_eq!((&*hit.value, hit.source), (&b"1"[..], Source::Memory));
            assert!(c.invalidate("a").await);
            assert!(c.get("a").await.is_none());
            assert!(c.get("b").await.is_some());
            assert!(c.purge().await);
            assert!(c.get("b").await.is_none());
            let s = c.stats();
            assert_eq!((s.memory_hits, s.misses, s.sets), (2, 3, 2));
            assert_eq!(s.tier, None);
        });
    }
}
