//! The [`Tokens`] on Redis: one `GET bank:token:TOKEN` per call (the owner, or nil), over
//! the `redis` crate's multiplexed connection, one per worker runtime (`PerWorker`), opened
//! there on first use and again after a failure. A Redis that does not answer within
//! [`REDIS_TIMEOUT`] fails the call closed (UNAVAILABLE), never open. A failed call drops the
//! connection it used, never a newer one another call has made since ([`Slot`]): under load,
//! thousands of calls queued on one connection time out together, and each dropping whatever
//! connection was there made every call connect again, and time out again.
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

/// A worker's connection, numbered, so that a call that failed on it drops that one only.
pub struct Slot<C> {
    conn: Option<(u64, C)>,
    made: u64,
}

impl<C: Clone> Slot<C> {
    /// No connection yet.
    pub fn new() -> Slot<C> {
        Slot {
            conn: None,
            made: 0,
        }
    }

    /// The connection, and its number, if there is one.
    pub fn current(&self) -> Option<(u64, C)> {
        self.conn.clone()
    }

    /// Keeps `c` as the connection; its number.
    pub fn keep(&mut self, c: C) -> u64 {
        self.made += 1;
        self.conn = Some((self.made, c));
        self.made
    }

    /// Drops connection `number`, if it is still the one kept.
    pub fn drop_failed(&mut self, number: u64) {
        if self.conn.as_ref().is_some_and(|(n, _)| *n == number) {
            self.conn = None;
        }
    }
}

/// The [`Tokens`] on Redis (see the module doc).
pub struct RedisTokens {
    client: redis::Client,
    conns: PerWorker<Arc<Mutex<Slot<MultiplexedConnection>>>>,
}

impl RedisTokens {
    /// For `url` (`redis://HOST[:PORT][/DB]`); refused at once when it cannot be read.
    pub fn new(url: &str) -> redis::RedisResult<RedisTokens> {
        Ok(RedisTokens {
            client: redis::Client::open(url)?,
            conns: PerWorker::new(|| Arc::new(Mutex::new(Slot::new()))),
        })
    }
}

impl Tokens for RedisTokens {
    fn owner(&self, token: &str) -> BoxFuture<Result<Option<String>, BankError>> {
        let (client, slot, key) = (self.client.clone(), self.conns.get(), token_key(token));
        Box::pin(async move {
            let mut used = None;
            let ask = async {
                let (number, mut conn) = {
                    let mut slot = slot.lock().await;
                    match slot.current() {
                        Some(kept) => kept,
                        None => {
                            let c = client.get_multiplexed_async_connection().await?;
                            (slot.keep(c.clone()), c)
                        }
                    }
                };
                used = Some(number);
                redis::cmd("GET")
                    .arg(&key)
                    .query_async::<Option<String>>(&mut conn)
                    .await
            };
            let failed = match tokio::time::timeout(REDIS_TIMEOUT, ask).await {
                Ok(Ok(owner)) => return Ok(owner),
                Ok(Err(e)) => e.to_string(),
                Err(_) => "no answer in time".to_string(),
            };
            tracing::warn!(error = %failed, "Redis failed");
            if let Some(number) = used {
                slot.lock().await.drop_failed(number);
            }
            Err(BankError::Unavailable("the token store".into()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Slot;

    /// A call that failed on a connection drops it, and only it: one made since by another
    /// call stays (under load every queued call timed out and dropped whichever connection
    /// was there, so each new one was dropped as soon as it was made).
    #[test]
    fn redis_failed_calls_drop_only_their_own_connection() {
        let mut slot = Slot::new();
        let old = slot.keep("old");
        slot.drop_failed(old);
        assert_eq!(slot.current(), None, "a failed connection is dropped");
        let new = slot.keep("new");
        // The other calls that were waiting on the old connection fail now.
        for _ in 0..3 {
            slot.drop_failed(old);
        }
        assert_eq!(slot.current(), Some((new, "new")));
        slot.drop_failed(new);
        assert_eq!(slot.current(), None);
    }
}
