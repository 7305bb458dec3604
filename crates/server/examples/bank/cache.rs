//! A read-through cache at the two seams, off unless asked for (`bank ADDR CACHE_MS`): an
//! account read, and a bearer token's owner, are kept for `CACHE_MS` milliseconds after the
//! store or Redis gave them, so that a hot account's reads and a caller's repeated calls
//! skip PostgreSQL and Redis. It is what bench/bank-cached.toml measures: the frameworks'
//! cost on a cache hit, the database and Redis clients (the same code on both sides) out of
//! the request. The twin in bench/bank-axum-tonic keeps the same two maps the same way.
//!
//! What it trades: a balance read may be up to `CACHE_MS` old (a transfer through this
//! process forgets both accounts at once; one through another process does not), and a
//! token revoked in Redis, or Redis gone, still passes for up to `CACHE_MS` after its last
//! good check (failing closed then). Only what exists is kept (an unknown account or token
//! is asked again every time), so callers cannot fill it; past [`MAX_ENTRIES`] a map is
//! emptied rather than grown.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::store::{Account, BankError, BoxFuture, NewTransfer, Store, Tokens};

/// The most entries one map holds.
pub const MAX_ENTRIES: usize = 100_000;

/// Values kept for `ttl` after they were put.
pub struct Ttl<K, V> {
    ttl: Duration,
    map: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Eq + Hash, V: Clone> Ttl<K, V> {
    pub fn new(ttl: Duration) -> Ttl<K, V> {
        Ttl {
            ttl,
            map: Mutex::new(HashMap::new()),
        }
    }

    /// `key`'s value, if it was put less than the TTL ago.
    pub fn get<Q>(&self, key: &Q) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        let map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        let (at, value) = map.get(key)?;
        (at.elapsed() < self.ttl).then(|| value.clone())
    }

    pub fn put(&self, key: K, value: V) {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= MAX_ENTRIES {
            map.clear();
        }
        map.insert(key, (Instant::now(), value));
    }

    pub fn forget<Q>(&self, key: &Q)
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
    }
}

/// A [`Store`] whose account reads are kept (see the module doc).
pub struct CachedStore {
    inner: Arc<dyn Store>,
    accounts: Arc<Ttl<i64, Account>>,
}

impl CachedStore {
    pub fn new(inner: Arc<dyn Store>, ttl: Duration) -> CachedStore {
        CachedStore {
            inner,
            accounts: Arc::new(Ttl::new(ttl)),
        }
    }
}

impl Store for CachedStore {
    fn account(&self, id: i64) -> BoxFuture<Result<Option<Account>, BankError>> {
        if let Some(a) = self.accounts.get(&id) {
            return Box::pin(std::future::ready(Ok(Some(a))));
        }
        let (read, accounts) = (self.inner.account(id), self.accounts.clone());
        Box::pin(async move {
            let got = read.await?;
            if let Some(a) = &got {
                accounts.put(id, a.clone());
            }
            Ok(got)
        })
    }

    fn transfer(&self, t: NewTransfer) -> BoxFuture<Result<i64, BankError>> {
        let (run, accounts) = (self.inner.transfer(t), self.accounts.clone());
        Box::pin(async move {
            let done = run.await;
            // Forgotten whatever the outcome: a failed commit may still have happened.
            accounts.forget(&t.from);
            accounts.forget(&t.to);
            done
        })
    }
}

/// [`Tokens`] whose owners are kept (see the module doc).
pub struct CachedTokens {
    inner: Arc<dyn Tokens>,
    owners: Arc<Ttl<String, String>>,
}

impl CachedTokens {
    pub fn new(inner: Arc<dyn Tokens>, ttl: Duration) -> CachedTokens {
        CachedTokens {
            inner,
            owners: Arc::new(Ttl::new(ttl)),
        }
    }
}

impl Tokens for CachedTokens {
    fn owner(&self, token: &str) -> BoxFuture<Result<Option<String>, BankError>> {
        if let Some(owner) = self.owners.get(token) {
            return Box::pin(std::future::ready(Ok(Some(owner))));
        }
        let (ask, owners, token) = (
            self.inner.owner(token),
            self.owners.clone(),
            token.to_string(),
        );
        Box::pin(async move {
            let got = ask.await?;
            if let Some(owner) = &got {
                owners.put(token, owner.clone());
            }
            Ok(got)
        })
    }
}
