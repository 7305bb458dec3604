//! The per-process memory tier: moka's concurrent cache (TinyLFU admission, LRU eviction),
//! bounded in bytes, each entry with its own TTL. Shared by every worker of the process
//! (one lock-free map, not one per worker: a handler's hit then does not depend on which
//! worker the connection landed on, and an invalidation is one removal).
//!
//! Why moka rather than linerate-cache's store: that store keeps HTTP responses under RFC
//! 9111 keys with freshness in whole seconds; handlers cache bytes under their own keys with
//! TTLs such as HttpArena's 200 ms.

use std::sync::Arc;
use std::time::{Duration, Instant};

use moka::Expiry;

/// Bytes an entry costs beyond its key and value (moka's node, the map's slot, the `Arc`),
/// counted so that many tiny values still stay under the limit.
pub const ENTRY_OVERHEAD: usize = 128;

#[derive(Clone)]
struct Stored {
    value: Arc<[u8]>,
    ttl: Duration,
}

/// Each entry lives its own TTL, from when it was last written.
struct PerEntry;

impl Expiry<String, Stored> for PerEntry {
    fn expire_after_create(&self, _: &String, v: &Stored, _: Instant) -> Option<Duration> {
        Some(v.ttl)
    }

    fn expire_after_update(
        &self,
        _: &String,
        v: &Stored,
        _: Instant,
        _: Option<Duration>,
    ) -> Option<Duration> {
        Some(v.ttl)
    }
}

/// The memory tier; clones share it.
#[derive(Clone)]
pub struct Memory {
    cache: moka::sync::Cache<String, Stored>,
}

impl Memory {
    /// A tier holding at most `capacity` bytes (keys, values and [`ENTRY_OVERHEAD`]).
    pub fn new(capacity: u64) -> Memory {
        Memory {
            cache: moka::sync::Cache::builder()
                .max_capacity(capacity)
                .weigher(|k: &String, v: &Stored| {
                    (k.len() + v.value.len() + ENTRY_OVERHEAD).min(u32::MAX as usize) as u32
                })
                .expire_after(PerEntry)
                .build(),
        }
    }

    pub fn get(&self, key: &str) -> Option<Arc<[u8]>> {
        self.cache.get(key).map(|s| s.value)
    }

    pub fn insert(&self, key: &str, value: Arc<[u8]>, ttl: Duration) {
        if !ttl.is_zero() {
            self.cache.insert(key.to_string(), Stored { value, ttl });
        }
    }

    pub fn remove(&self, key: &str) {
        self.cache.invalidate(key);
    }

    /// The bytes held (keys, values and [`ENTRY_OVERHEAD`]), once moka has applied the
    /// evictions it has pending.
    pub fn bytes(&self) -> u64 {
        self.cache.run_pending_tasks();
        self.cache.weighted_size()
    }

    /// Drops every entry.
    pub fn clear(&self) {
        self.cache.invalidate_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_get_remove() {
        let m = Memory::new(1 << 20);
        m.insert("a", Arc::from(&b"1"[..]), Duration::from_secs(60));
        assert_eq!(m.get("a").as_deref(), Some(&b"1"[..]));
        m.insert("a", Arc::from(&b"2"[..]), Duration::from_secs(60));
        assert_eq!(m.get("a").as_deref(), Some(&b"2"[..]));
        m.remove("a");
        assert_eq!(m.get("a"), None);
        m.insert("z", Arc::from(&b"0"[..]), Duration::ZERO);
        assert_eq!(m.get("z"), None);
        m.insert("b", Arc::from(&b"1"[..]), Duration::from_secs(60));
        m.clear();
        assert_eq!(m.get("b"), None);
    }

    #[test]
    fn it_stays_under_its_byte_limit_and_keeps_the_popular() {
        const CAPACITY: u64 = 64 << 10;
        let m = Memory::new(CAPACITY);
        let value: Arc<[u8]> = vec![0u8; 1000].into();
        // A popular key, read often, then ten times the capacity of one-off keys.
        m.insert("hot", value.clone(), Duration::from_secs(60));
        for i in 0..700 {
            assert!(m.get("hot").is_some() || i > 0);
            m.insert(&format!("k{i}"), value.clone(), Duration::from_secs(60));
            m.get("hot");
        }
        assert!(m.bytes() <= CAPACITY, "{} bytes held", m.bytes());
        assert!(
            m.bytes() > CAPACITY / 2,
            "it should be near full: {}",
            m.bytes()
        );
        assert!(m.get("hot").is_some(), "TinyLFU keeps the key that is read");
        // Not all one-offs fit: TinyLFU turned some away at the door (a scan does not push
        // out what is read) or evicted them.
        let held = (0..700)
            .filter(|i| m.get(&format!("k{i}")).is_some())
            .count();
        assert!(held < 700, "{held} of 700 held in {CAPACITY} bytes");
    }

    #[test]
    fn an_entry_ends_with_its_ttl() {
        let m = Memory::new(1 << 20);
        m.insert("short", Arc::from(&b"1"[..]), Duration::from_millis(1));
        m.insert("long", Arc::from(&b"1"[..]), Duration::from_secs(3600));
        // Behaviour, not timing: poll (bounded) until the short one is gone.
        let mut gone = false;
        for _ in 0..1000 {
            if m.get("short").is_none() {
                gone = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(gone);
        assert!(m.get("long").is_some());
    }
}
