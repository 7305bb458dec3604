//! The Redis (or Valkey) driver: one multiplexed connection (the `redis` crate's), shared by
//! every call, made on first use and again after a failure. Each call is one command or one
//! pipeline; the caller ([`crate::tier`]) bounds it with the timeout and keeps the health.
//! Knows nothing of frames or namespaces.

use std::sync::Mutex;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client};

use crate::endpoint::BadUrl;

/// The longest TTL given to Redis (30 days, as for memcached): Redis refuses an expiry past
/// its own bound as an error, which would count as an outage; the frame's expiry still ends
/// the value on time.
pub const MAX_TTL_MS: u64 = 30 * 24 * 3600 * 1000;

pub(crate) struct Redis {
    client: Client,
    config: AsyncConnectionConfig,
    /// The connection, once made; `None` after a failure, so the next call connects anew.
    conn: Mutex<Option<MultiplexedConnection>>,
}

impl Redis {
    pub fn new(url: &str, timeout: Duration) -> Result<Redis, BadUrl> {
        let client = Client::open(url).map_err(|e| BadUrl(format!("{url}: {e}")))?;
        Ok(Redis {
            client,
            config: AsyncConnectionConfig::new()
                .set_connection_timeout(timeout)
                .set_response_timeout(timeout),
            conn: Mutex::new(None),
        })
    }

    async fn conn(&self) -> redis::RedisResult<MultiplexedConnection> {
        if let Some(c) = self.conn.lock().unwrap().clone() {
            return Ok(c);
        }
        let c = self
            .client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await?;
        *self.conn.lock().unwrap() = Some(c.clone());
        Ok(c)
    }

    /// Forgets the connection (after a failure or a timeout: the server may be gone).
    pub fn reset(&self) {
        self.conn.lock().unwrap().take();
    }

    pub async fn get(&self, key: &str) -> redis::RedisResult<Option<Vec<u8>>> {
        let mut c = self.conn().await?;
        redis::cmd("GET").arg(key).query_async(&mut c).await
    }

    /// `SET key value PX ttl`: with a `maxmemory-policy` that evicts (`allkeys-lru`, as the
    /// docs ask), a full server makes room rather than refusing.
    pub async fn set(&self, key: &str, value: &[u8], ttl: Duration) -> redis::RedisResult<()> {
        let mut c = self.conn().await?;
        let ms = ttl.as_millis().clamp(1, MAX_TTL_MS as u128) as u64;
        redis::cmd("SET")
            .arg(key)
            .arg(value)
            .arg("PX")
            .arg(ms)
            .query_async(&mut c)
            .await
    }

    pub async fn delete(&self, key: &str) -> redis::RedisResult<()> {
        let mut c = self.conn().await?;
        redis::cmd("DEL").arg(key).query_async(&mut c).await
    }

    /// The counter at `key`, set to `init` first where it is missing (one round trip).
    pub async fn counter(&self, key: &str, init: u64) -> redis::RedisResult<u64> {
        let mut c = self.conn().await?;
        let (v,): (u64,) = redis::pipe()
            .cmd("SET")
            .arg(key)
            .arg(init)
            .arg("NX")
            .ignore()
            .cmd("GET")
            .arg(key)
            .query_async(&mut c)
            .await?;
        Ok(v)
    }

    /// The counter at `key` plus one, from `init` where it is missing (one round trip).
    pub async fn bump(&self, key: &str, init: u64) -> redis::RedisResult<u64> {
        let mut c = self.conn().await?;
        let (v,): (u64,) = redis::pipe()
            .cmd("SET")
            .arg(key)
            .arg(init)
            .arg("NX")
            .ignore()
            .cmd("INCR")
            .arg(key)
            .query_async(&mut c)
            .await?;
        Ok(v)
    }
}
