//! The [`Tokens`] on Redis: one `GET bank:token:TOKEN` per call (the owner, or nil), over
//! the `redis` crate's multiplexed connection, one per worker runtime (`PerWorker`), opened
//! there on first use and again after a failure. A Redis that does not answer within
//! [`REDIS_TIMEOUT`] fails the call closed (UNAVAILABLE), never open.
//!
//! The `redis` crate rather than linerate-kv: linerate-kv's own RESP connection is private
//! to its cache tiers (its public API stores frames under namespaces, not plain strings).

use std::sync::Arc;
use std::time::Duration;

use linerate_server::runtime::PerWorker;
use redis::aio::MultiplexedConnection;
use tokio::sync::Mutex;

use super::store::{BankError, BoxFuture, Tokens};

/// The longest a token check waits for Redis (connecting included).
pub const REDIS_TIMEOUT: Duration = Duration::from_secs(1);

/// The key a token's owner is kept under.
pub fn token_key(token: &str) -> String {
    format!("bank:token:{token}")
}

/// The [`Tokens`] on Redis (see the module doc).
pub struct RedisTokens {
    client: redis::Client,
    conns: PerWorker<Arc<Mutex<Option<MultiplexedConnection>>>>,
}

impl RedisTokens {
    /// For `url` (`redis://HOST[:PORT][/DB]`); refused at once when it cannot be read.
    pub fn new(url: &str) -> redis::RedisResult<RedisTokens> {
        Ok(RedisTokens {
            client: redis::Client::open(url)?,
            conns: PerWorker::new(|| Arc::new(Mutex::new(None))),
        })
    }
}

impl Tokens for RedisTokens {
    fn owner(&self, token: &str) -> BoxFuture<Result<Option<String>, BankError>> {
        let (client, slot, key) = (self.client.clone(), self.conns.get(), token_key(token));
        Box::pin(async move {
            let ask = async {
                let mut conn = {
                    let mut slot = slot.lock().await;
                    match slot.as_ref() {
                        Some(c) => c.clone(),
                        None => {
                            let c = client.get_multiplexed_async_connection().await?;
                            slot.insert(c).clone()
                        }
                    }
                };
                redis::cmd("GET")
                    .arg(&key)
                    .query_async::<Option<String>>(&mut conn)
                    .await
            };
            match tokio::time::timeout(REDIS_TIMEOUT, ask).await {
                Ok(Ok(owner)) => Ok(owner),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "Redis failed");
                    slot.lock().await.take();
                    Err(BankError::Unavailable("the token store".into()))
                }
                Err(_) => {
                    tracing::warn!("Redis did not answer in time");
                    slot.lock().await.take();
                    Err(BankError::Unavailable("the token store".into()))
                }
            }
        })
    }
}
