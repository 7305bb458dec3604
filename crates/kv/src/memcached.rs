//! The memcached driver: Shopify's `async-memcached` client (tokio), one connection per call
//! in flight from a small pool of idle ones. A connection a call holds is owned by that call,
//! so a call cut by the timeout drops it (and its half-read reply) with it; after any failure
//! the idle ones are closed too, since the server they reached may be gone. The caller
//! ([`crate::tier`]) bounds each call and keeps the health.

use std::sync::Mutex;
use std::time::Duration;

use async_memcached::{AsciiProtocol, Client, Error, Status};

/// Idle connections kept for the next calls; more in flight at once are opened and closed.
pub const MAX_IDLE: usize = 16;
/// memcached's key limit (and no spaces or control bytes): a longer key is not sent.
pub const MAX_KEY: usize = 250;
/// memcached reads an expiry above 30 days as a Unix time: longer TTLs are capped there (the
/// frame's own expiry still ends the value on time).
pub const MAX_TTL_SECS: u64 = 30 * 24 * 3600;

pub(crate) struct Memcached {
    addr: String,
    idle: Mutex<Vec<Client>>,
}

/// memcached's expiry for a value kept `ttl`: whole seconds, rounded up, plus one. Its clock
/// moves in whole seconds, and an item stored to expire N seconds on is gone once the clock
/// has ticked N times, which can be a moment after the store: all it surely keeps is N - 1
/// seconds. With N = 1, a 200 ms item (HttpArena's crud TTL) could vanish before a second
/// edge read it (`crud_items_with_a_redis_or_memcached_tier` failed so once under load). The
/// frame's own expiry still ends the value on time.
pub(crate) fn exptime(ttl: Duration) -> i64 {
    let secs = ttl.as_millis().div_ceil(1000) + 1;
    secs.clamp(2, u128::from(MAX_TTL_SECS)) as i64
}

/// Whether memcached takes `key`.
pub fn valid_key(key: &str) -> bool {
    (1..=MAX_KEY).contains(&key.len()) && key.bytes().all(|b| b > b' ' && b != 0x7f)
}

impl Memcached {
    pub fn new(addr: &str) -> Memcached {
        Memcached {
            addr: addr.to_string(),
            idle: Mutex::new(Vec::new()),
        }
    }

    async fn take(&self) -> Result<Client, Error> {
        if let Some(c) = self.idle.lock().unwrap().pop() {
            return Ok(c);
        }
        Client::new(format!("tcp://{}", self.addr)).await
    }

    fn give_back(&self, c: Client) {
        let mut idle = self.idle.lock().unwrap();
        if idle.len() < MAX_IDLE && !c.is_closed() {
            idle.push(c);
        }
    }

    /// Closes the idle connections (after a failure).
    pub fn reset(&self) {
        self.idle.lock().unwrap().clear();
    }

    pub async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        let mut c = self.take().await?;
        let v = c.get(key).await?;
        self.give_back(c);
        Ok(v.and_then(|v| v.data))
    }

    pub async fn set(&self, key: &str, value: &[u8], ttl: Duration) -> Result<(), Error> {
        let mut c = self.take().await?;
        c.set(key, value, Some(exptime(ttl)), None).await?;
        self.give_back(c);
        Ok(())
    }

    pub async fn delete(&self, key: &str) -> Result<(), Error> {
        let mut c = self.take().await?;
        match c.delete(key).await {
            Ok(()) | Err(Error::Protocol(Status::NotFound)) => {}
            Err(e) => return Err(e),
        }
        self.give_back(c);
        Ok(())
    }

    /// The counter at `key`, added as `init` where it is missing.
    pub async fn counter(&self, key: &str, init: u64) -> Result<u64, Error> {
        let mut c = self.take().await?;
        let v = match c.get(key).await? {
            Some(v) => parse_counter(v.data)?,
            None => {
                add(&mut c, key, init).await?;
                match c.get(key).await? {
                    Some(v) => parse_counter(v.data)?,
                    None => init,
                }
            }
        };
        self.give_back(c);
        Ok(v)
    }

    /// The counter at `key` plus one, from `init` where it is missing.
    pub async fn bump(&self, key: &str, init: u64) -> Result<u64, Error> {
        let mut c = self.take().await?;
        let v = match c.increment(key, 1).await {
            Ok(v) => v,
            Err(Error::Protocol(Status::NotFound)) => {
                add(&mut c, key, init).await?;
                c.increment(key, 1).await?
            }
            Err(e) => return Err(e),
        };
        self.give_back(c);
        Ok(v)
    }
}

/// `add` with no expiry: NOT_STORED (another edge added it first) is fine.
async fn add(c: &mut Client, key: &str, init: u64) -> Result<(), Error> {
    match c.add(key, init.to_string().as_str(), None, None).await {
        Ok(()) | Err(Error::Protocol(Status::NotStored)) => Ok(()),
        Err(e) => Err(e),
    }
}

fn parse_counter(data: Option<Vec<u8>>) -> Result<u64, Error> {
    data.as_deref()
        .and_then(|d| std::str::from_utf8(d).ok())
        .and_then(|s| s.trim().parse().ok())
        .ok_or(Error::Protocol(Status::NotFound))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_memcached_takes() {
        assert!(valid_key("ns:1:item:42"));
        assert!(valid_key(&"k".repeat(MAX_KEY)));
        for bad in ["", "a b", "a\r\nget x", "a\u{7f}", &"k".repeat(MAX_KEY + 1)] {
            assert!(!valid_key(bad), "{bad:?}");
        }
    }

    #[test]
    fn the_expiry_outlasts_the_ttl_on_memcacheds_whole_second_clock() {
        // (TTL in ms, seconds sent): one more than the TTL rounded up, so that at least the
        // TTL is left however soon memcached's clock ticks after the store.
        for (ms, secs) in [
            (1, 2),
            (200, 2),
            (999, 2),
            (1000, 2),
            (1001, 3),
            (60_000, 61),
        ] {
            assert_eq!(exptime(Duration::from_millis(ms)), secs, "{ms} ms");
        }
        // Above 30 days memcached reads a Unix time: capped there.
        let month = Duration::from_secs(MAX_TTL_SECS);
        assert_eq!(exptime(month), MAX_TTL_SECS as i64);
        assert_eq!(exptime(month * 2), MAX_TTL_SECS as i64);
    }
}
