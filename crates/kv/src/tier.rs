//! A shared second tier (Redis/Valkey or memcached) as the application sees it: get, set with
//! a TTL, delete, and a namespace's generation, each answered as a value or a miss and never
//! as an error. Owns the tier's thread (a current-thread tokio runtime, "linerate-kv", where
//! every call runs, so that a caller on any executor can await it), the timeout on each call,
//! the health ([`crate::health`]), the counters and the one log line per outage.
//!
//! Must not: fail or hang a caller. A call the tier cannot answer in time is a miss.

use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::endpoint::{Endpoint, TierConfig};
use crate::frame;
use crate::health::{Admit, Change, Health};
use crate::link::{Broken, Values};
use crate::memcached::{self, Memcached};
use crate::redis::Redis;
use crate::stats::{Counters, Snapshot};

enum Backend {
    Redis(Box<Redis>),
    Memcached(Memcached),
}

/// How a call went wrong, for the log; `timeout`: the client's own timeout ended it.
struct Failure {
    why: String,
    timeout: bool,
}

impl From<crate::redis::Error> for Failure {
    fn from(e: crate::redis::Error) -> Failure {
        Failure {
            timeout: false,
            why: e.0,
        }
    }
}

impl From<async_memcached::Error> for Failure {
    fn from(e: async_memcached::Error) -> Failure {
        Failure {
            why: e.to_string(),
            timeout: false,
        }
    }
}

struct Inner {
    config: TierConfig,
    backend: Backend,
    /// The server's health, shared with every other handle started for it ([`health_of`]).
    health: Arc<Mutex<Health>>,
    counters: Counters,
    runtime: tokio::runtime::Handle,
    /// Dropped with the last handle: the tier's thread then ends.
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// The health of `config`'s server, one per server in the process: each proxy mount with
/// a tier starts a [`Tier`] of its own, and with a health each, one outage of a server that
/// several mounts share was a warn line (and a count) per mount, a second apart (a quiet
/// mount's purge-log read finds it at most a second later). The first handle's
/// `retry_after` holds while any handle of that server lives.
fn health_of(config: &TierConfig) -> Arc<Mutex<Health>> {
    static HEALTHS: Mutex<Vec<(String, Weak<Mutex<Health>>)>> = Mutex::new(Vec::new());
    let name = config.endpoint.to_string();
    let mut known = HEALTHS.lock().unwrap_or_else(|p| p.into_inner());
    known.retain(|(_, h)| h.strong_count() > 0);
    if let Some(h) = known
        .iter()
        .find(|(n, _)| *n == name)
        .and_then(|(_, h)| h.upgrade())
    {
        return h;
    }
    let h = Arc::new(Mutex::new(Health::new(config.retry_after)));
    known.push((name, Arc::downgrade(&h)));
    h
}

/// What [`Tier::link_spec`] gives: the server's address and the greeting a connection
/// sends first (commands getting `replies` replies).
#[derive(Clone, Debug)]
pub struct LinkSpec {
    pub host: String,
    pub port: u16,
    pub greeting: Vec<u8>,
    pub replies: usize,
}

/// A handle on one tier; clones share it.
#[derive(Clone)]
pub struct Tier {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tier({})", self.inner.config.endpoint)
    }
}

impl Tier {
    /// Starts the tier's thread. Connects on first use, not here: a tier that is down at
    /// start is a tier that is down (misses, and one log line), not a refusal to start.
    pub fn start(config: TierConfig) -> std::io::Result<Tier> {
        let backend = match &config.endpoint {
            Endpoint::Redis(url) => {
                Backend::Redis(Box::new(Redis::new(url).map_err(|e| {
                    std::io::Error::new(std::io::ErrorKind::InvalidInput, e)
                })?))
            }
            Endpoint::Memcached(addr) => Backend::Memcached(Memcached::new(addr)),
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let runtime = rt.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("linerate-kv".into())
            .spawn(move || {
                let _ = rt.block_on(stopped);
            })?;
        Ok(Tier {
            inner: Arc::new(Inner {
                health: health_of(&config),
                config,
                backend,
                counters: Counters::default(),
                runtime,
                _stop: stop,
            }),
        })
    }

    /// Runs `task` on the tier's thread: how a caller without an executor of its own (the
    /// proxy's worker loop) awaits the calls above, handing their results back itself.
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.inner.runtime.spawn(task);
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.inner.config.endpoint
    }

    pub fn counters(&self) -> Snapshot {
        self.inner.counters.snapshot()
    }

    /// Whether the last call succeeded (a tier not yet used is up).
    pub fn is_up(&self) -> bool {
        self.inner.health.lock().unwrap().is_up()
    }

    /// Whether the engine takes `key` (memcached: at most 250 bytes, no spaces or control
    /// bytes). A key it does not take is a miss here and not stored, never sent.
    pub fn accepts(&self, key: &str) -> bool {
        match self.inner.backend {
            Backend::Redis(_) => !key.is_empty(),
            Backend::Memcached(_) => memcached::valid_key(key),
        }
    }

    /// The value at `key` and how long it has left, or a miss (absent, expired, the tier
    /// down or slow).
    pub async fn get(&self, key: &str) -> Option<(Duration, Vec<u8>)> {
        let (found, answered) = if self.accepts(key) {
            let key = key.to_string();
            match self.call(move |i| async move { i.fetch(&key).await }).await {
                Some(found) => (found, true),
                None => (None, false),
            }
        } else {
            (None, true)
        };
        self.inner.unframe(found, answered)
    }

    /// [`Tier::get`] for a caller without an executor (the proxy's worker loop): the call
    /// runs on the tier's thread as one task, and `done` gets the value there. Cheaper than
    /// spawning a task that awaits `get` (which runs its call as a task of its own, so that
    /// a caller that gives up still leaves the health right: this one never gives up).
    pub fn get_then(&self, key: &str, done: impl FnOnce(Option<Vec<u8>>) + Send + 'static) {
        self.get_many_then(vec![key.to_string()], move |mut values| {
            done(values.pop().flatten())
        });
    }

    /// [`Tier::get_then`] for many keys at once: `done` gets their values (or misses) in
    /// `keys`' order, once, on the tier's thread or at once. The proxy's worker asks for
    /// every key its turn collected in one call, so a turn costs one wake of the tier's
    /// thread, and on Redis one `MGET` of every key (half the server's instructions a key
    /// of pipelined `GET`s), however many requests it holds; a call per key cost a wake and
    /// a write each (2.9 system calls a tier hit, `strace`). On Redis the batch is one call: one timeout,
    /// one outcome for the health and the error counters. On memcached each key is its own
    /// call (a connection each, as before), run side by side.
    pub fn get_many_then(
        &self,
        keys: Vec<String>,
        done: impl FnOnce(Vec<Option<Vec<u8>>>) + Send + 'static,
    ) {
        let inner = &self.inner;
        let miss = |i: &Inner, n: usize| {
            (0..n)
                .map(|_| i.unframe(None, false).map(|(_, v)| v))
                .collect()
        };
        let asked: Vec<usize> = (0..keys.len())
            .filter(|&k| self.accepts(&keys[k]))
            .collect();
        if asked.is_empty() {
            return done(miss(inner, keys.len()));
        }
        if inner.health.lock().unwrap().admit(Instant::now()) == Admit::Skip {
            for _ in &asked {
                Counters::add(&inner.counters.skipped);
            }
            return done(miss(inner, keys.len()));
        }
        let i = inner.clone();
        inner.runtime.spawn(async move {
            let mut found: Vec<Option<Vec<u8>>> = vec![None; keys.len()];
            // Whether the server answered for each key (a key it does not take is absent).
            let mut answered = vec![true; keys.len()];
            match &i.backend {
                Backend::Redis(r) => {
                    let sent: Vec<String> = if asked.len() == keys.len() {
                        keys
                    } else {
                        asked.iter().map(|&k| keys[k].clone()).collect()
                    };
                    let values = i
                        .bounded(async { Ok::<_, Failure>(r.get_many(&sent).await?) })
                        .await;
                    match values {
                        Some(values) => {
                            for (&k, v) in asked.iter().zip(values) {
                                found[k] = v;
                            }
                        }
                        None => asked.iter().for_each(|&k| answered[k] = false),
                    }
                }
                Backend::Memcached(_) if asked.len() == 1 => {
                    match i.bounded(i.fetch(&keys[asked[0]])).await {
                        Some(v) => found[asked[0]] = v,
                        None => answered[asked[0]] = false,
                    }
                }
                Backend::Memcached(_) => {
                    let mut calls = tokio::task::JoinSet::new();
                    for &k in &asked {
                        let (i, key) = (i.clone(), keys[k].clone());
                        calls.spawn(async move { (k, i.bounded(i.fetch(&key)).await) });
                    }
                    for &k in &asked {
                        answered[k] = false;
                    }
                    while let Some(Ok((k, v))) = calls.join_next().await {
                        if let Some(v) = v {
                            found[k] = v;
                            answered[k] = true;
                        }
                    }
                }
            }
            done(
                found
                    .into_iter()
                    .zip(answered)
                    .map(|(f, a)| i.unframe(f, a).map(|(_, v)| v))
                    .collect(),
            );
        });
    }

    /// How a caller with an event loop of its own reaches this tier itself (a Redis tier
    /// only; `None` for memcached, which is asked on the tier's thread): the proxy's worker
    /// asks its `GET`s on its own socket ([`crate::link`]), with no thread hop each way
    /// (a wake of this thread and one back cost a second-tier hit ~1.3 µs of the edge's CPU).
    /// The caller keeps the rules the calls here keep: [`Tier::admit`] before,
    /// [`Tier::timeout`] on each ask, [`Tier::settle`] after.
    pub fn link_spec(&self) -> Option<LinkSpec> {
        let Backend::Redis(r) = &self.inner.backend else {
            return None;
        };
        let (host, port, greeting, replies) = r.endpoint();
        Some(LinkSpec {
            host: host.to_string(),
            port,
            greeting: greeting.to_vec(),
            replies,
        })
    }

    /// The longest a call may take before it counts as a timeout (and a miss).
    pub fn timeout(&self) -> Duration {
        self.inner.config.timeout
    }

    /// Whether an ask for `keys` keys may go to the server now: not while the tier is down
    /// (then the ask is `keys` misses without I/O, counted as skipped), except the one
    /// probe that finds out whether it is back.
    pub fn admit(&self, keys: usize) -> bool {
        let inner = &self.inner;
        if inner.health.lock().unwrap().admit(Instant::now()) == Admit::Skip {
            for _ in 0..keys {
                Counters::add(&inner.counters.skipped);
            }
            return false;
        }
        true
    }

    /// An ask's outcome on a caller's own link, kept as a call's here is: counted (an error
    /// or a timeout), reported to the health (a failure logged once per outage), and each
    /// value unframed (a hit, or a miss where absent, expired or the ask failed). `keys`
    /// values come back, in order.
    pub fn settle(
        &self,
        outcome: Result<Values, Broken>,
        timed_out: bool,
        keys: usize,
    ) -> Vec<Option<Vec<u8>>> {
        let i = &self.inner;
        let (found, answered) = match outcome {
            Ok(values) if values.len() == keys => {
                i.report(None, false);
                (values, true)
            }
            Ok(_) => {
                Counters::add(&i.counters.errors);
                i.report(
                    Some("an answer with the wrong number of values".into()),
                    false,
                );
                (vec![None; keys], false)
            }
            Err(Broken(why)) => {
                let why = if timed_out {
                    Counters::add(&i.counters.timeouts);
                    format!("no answer within {:?}", i.config.timeout)
                } else {
                    Counters::add(&i.counters.errors);
                    why
                };
                i.report(Some(why), timed_out);
                (vec![None; keys], false)
            }
        };
        found
            .into_iter()
            .map(|f| i.unframe(f, answered).map(|(_, v)| v))
            .collect()
    }

    /// Stores `value` at `key` for `ttl`; whether the tier took it.
    pub async fn set(&self, key: &str, value: &[u8], ttl: Duration) -> bool {
        if !self.accepts(key) || ttl.is_zero() {
            return false;
        }
        let key = key.to_string();
        let framed = frame::encode(value, ttl, frame::now_ms());
        let done = self
            .call(move |i| async move {
                match &i.backend {
                    Backend::Redis(r) => {
                        r.set(
                            &key,
                            &framed,
                            u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX),
                        )
                        .await?
                    }
                    Backend::Memcached(m) => m.set(&key, &framed, ttl).await?,
                }
                Counters::add(&i.counters.sets);
                Ok(())
            })
            .await;
        done.is_some()
    }

    /// Deletes `key`; whether the tier was reached.
    pub async fn delete(&self, key: &str) -> bool {
        if !self.accepts(key) {
            return false;
        }
        let key = key.to_string();
        self.call(move |i| async move {
            match &i.backend {
                Backend::Redis(r) => r.delete(&key).await?,
                Backend::Memcached(m) => m.delete(&key).await?,
            }
            Ok(())
        })
        .await
        .is_some()
    }

    /// The generation counter at `key`, made where missing. Its first value is the current
    /// Unix time in milliseconds, not 0: a counter the server evicted and made again is
    /// then still above every value it had (short of a thousand purges a second), so an
    /// old generation's keys never come back.
    pub async fn generation(&self, key: &str) -> Option<u64> {
        self.counter(key, false).await
    }

    /// The generation counter at `key` plus one: every key of the old generation is then
    /// unreachable, on every edge that reads the counter.
    pub async fn bump_generation(&self, key: &str) -> Option<u64> {
        self.counter(key, true).await
    }

    async fn counter(&self, key: &str, bump: bool) -> Option<u64> {
        if !self.accepts(key) {
            return None;
        }
        let key = key.to_string();
        let init = frame::now_ms();
        self.call(move |i| async move {
            Ok(match (&i.backend, bump) {
                (Backend::Redis(r), false) => r.counter(&key, init).await?,
                (Backend::Redis(r), true) => r.bump(&key, init).await?,
                (Backend::Memcached(m), false) => m.counter(&key, init).await?,
                (Backend::Memcached(m), true) => m.bump(&key, init).await?,
            })
        })
        .await
    }

    /// Runs `op` on the tier's thread within the timeout, keeping the health and the
    /// counters; `None` where it was skipped, failed or timed out.
    async fn call<T, F, Fut>(&self, op: F) -> Option<T>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Inner>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, Failure>> + Send,
    {
        let inner = &self.inner;
        let admit = inner.health.lock().unwrap().admit(Instant::now());
        if admit == Admit::Skip {
            Counters::add(&inner.counters.skipped);
            return None;
        }
        let i = inner.clone();
        // The task does its own accounting, so a caller that gives up (a dropped request)
        // still leaves the health right.
        let task = inner
            .runtime
            .spawn(async move { i.bounded(op(i.clone())).await });
        task.await.ok().flatten()
    }
}

impl Inner {
    /// `op` within the timeout, its outcome counted and reported; `None` where it failed or
    /// timed out.
    async fn bounded<T>(&self, op: impl Future<Output = Result<T, Failure>>) -> Option<T> {
        let outcome = tokio::time::timeout(self.config.timeout, op).await;
        let timed_out = matches!(outcome, Ok(Err(Failure { timeout: true, .. })) | Err(_));
        let failed = match &outcome {
            Ok(Ok(_)) => None,
            Ok(Err(Failure {
                why,
                timeout: false,
            })) => {
                Counters::add(&self.counters.errors);
                Some(why.clone())
            }
            Ok(Err(Failure { timeout: true, .. })) | Err(_) => {
                Counters::add(&self.counters.timeouts);
                Some(format!("no answer within {:?}", self.config.timeout))
            }
        };
        self.report(failed, timed_out);
        outcome.ok().and_then(Result::ok)
    }

    /// The stored bytes at `key`, framed, or `None` (absent).
    async fn fetch(&self, key: &str) -> Result<Option<Vec<u8>>, Failure> {
        Ok(match &self.backend {
            Backend::Redis(r) => r.get(key).await?,
            Backend::Memcached(m) => m.get(key).await?,
        })
    }

    /// A fetched value unframed (in place: no copy), counted as a hit or a miss; a miss
    /// the server `answered` (absent or expired, not skipped, failed or timed out) is also
    /// counted as absent.
    fn unframe(&self, found: Option<Vec<u8>>, answered: bool) -> Option<(Duration, Vec<u8>)> {
        let c = &self.counters;
        let unframed = found.and_then(|mut v| {
            let (left, value) = frame::decode(&v, frame::now_ms())?;
            let len = value.len();
            v.drain(..frame::HEADER);
            v.truncate(len);
            Some((left, v))
        });
        Counters::add(if unframed.is_some() {
            &c.hits
        } else {
            &c.misses
        });
        if unframed.is_none() && answered {
            Counters::add(&c.absent);
        }
        unframed
    }

    /// Records a call's outcome (`failed`, why, and whether by a `timeout`): logs the start
    /// and the end of an outage, once each.
    fn report(&self, failed: Option<String>, timeout: bool) {
        let change = match &failed {
            None => self.health.lock().unwrap().succeeded(),
            Some(_) => {
                // The server may be gone: the next call connects anew.
                match &self.backend {
                    Backend::Redis(r) => r.reset(),
                    Backend::Memcached(m) => m.reset(),
                }
                let mut health = self.health.lock().unwrap();
                if timeout {
                    health.timed_out(Instant::now())
                } else {
                    health.failed(Instant::now())
                }
            }
        };
        let endpoint = &self.config.endpoint;
        match change {
            Change::None => {}
            Change::WentDown => {
                Counters::add(&self.counters.outages);
                tracing::warn!(
                    tier = %endpoint,
                    error = failed.as_deref().unwrap_or(""),
                    "cache tier down: its calls are misses until it answers again"
                );
            }
            Change::CameBack => tracing::info!(tier = %endpoint, "cache tier back"),
        }
    }
}
