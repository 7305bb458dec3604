//! A fleet-wide rate limit (`scope = "fleet"`) as a request sees it: a leased
//! token when its key holds one (no trip to Redis), else the node's local share while the
//! key's next lease is on its way, and the local share alone while Redis is down or slow.
//! A request never waits for Redis: the ask goes to the link's thread through a bounded
//! channel (`try_send`) and its answer fills the key's lease for the requests after it.
//!
//! Owns the handles the sites hold ([`Fleet`], [`Link`]); the leases are `ratelimit_lease`'s,
//! the I/O `ratelimit_redis`'s (built with the `kv` feature).
#![forbid(unsafe_code)]
// Without the `kv` feature no link answers (a fleet rule is refused at start).
#![cfg_attr(not(feature = "kv"), allow(dead_code))]

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use crate::ratelimit::{Key, Limiter, Verdict};
use crate::ratelimit_lease::{Ask, Leases};
use crate::ratelimit_metrics::RuleStats;

/// Asks waiting for the link's thread; past it an ask fails at once (its key asks again).
pub const MAX_QUEUED: usize = 4096;

/// One fleet rule's leases and where its counts live in Redis.
pub(crate) struct FleetRule {
    pub leases: Leases,
    /// `linerate:rl:LABEL:INTERVAL:BURST:KEY-KIND:`, before the client's key.
    pub prefix: Vec<u8>,
    /// GCRA's emission interval and tolerance (µs), as the node rule's.
    pub interval_us: u64,
    pub tolerance_us: u64,
}

impl FleetRule {
    /// The Redis key of `key`'s count.
    pub(crate) fn redis_key(&self, key: &Key) -> Vec<u8> {
        let mut k = self.prefix.clone();
        match key {
            Key::Addr(ip) => k.extend_from_slice(ip.to_string().as_bytes()),
            Key::Bytes(b) => k.extend_from_slice(b),
        }
        k
    }
}

/// What the link's thread and the workers share.
pub(crate) struct Shared {
    /// Redis answers: asks go; else every rule applies its local share.
    pub up: AtomicBool,
    /// The rules whose mode `/metrics` shows.
    pub rules: Mutex<Vec<Arc<RuleStats>>>,
}

impl Shared {
    /// Redis went down or came back: every rule's mode follows.
    pub(crate) fn set_up(&self, up: bool) {
        self.up.store(up, Relaxed);
        let mode = if up {
            crate::ratelimit_metrics::FLEET
        } else {
            crate::ratelimit_metrics::LOCAL_SHARE
        };
        for r in self.rules.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            r.mode.store(mode, Relaxed);
        }
    }
}

/// An ask on its way to the link's thread.
pub(crate) type Queued = (Arc<FleetRule>, Ask);

/// The handle on a configuration's link to Redis: its thread ends when the last handle goes
/// (a reload's new configuration starts its own).
pub(crate) struct Link {
    tx: SyncSender<Queued>,
    pub(crate) shared: Arc<Shared>,
}

impl Link {
    /// A link to the Redis at `url` (connected on the first ask).
    pub(crate) fn start(url: &str) -> Result<Arc<Link>, String> {
        let (tx, rx) = std::sync::mpsc::sync_channel(MAX_QUEUED);
        let shared = Arc::new(Shared {
            up: AtomicBool::new(true),
            rules: Mutex::default(),
        });
        spawn(url, rx, Arc::clone(&shared))?;
        Ok(Arc::new(Link { tx, shared }))
    }
}

#[cfg(feature = "kv")]
fn spawn(url: &str, rx: Receiver<Queued>, shared: Arc<Shared>) -> Result<(), String> {
    crate::ratelimit_redis::spawn(url, rx, shared)
}

#[cfg(not(feature = "kv"))]
fn spawn(_: &str, _: Receiver<Queued>, _: Arc<Shared>) -> Result<(), String> {
    Err("scope = \"fleet\" needs linerate built with the `kv` feature".into())
}

/// A fleet rule as a site holds it.
pub(crate) struct Fleet {
    pub rule: Arc<FleetRule>,
    pub link: Arc<Link>,
}

impl Fleet {
    /// Accounts one request for `key` at `now_us`; `local` is the node's share of the limit.
    pub(crate) fn check(&self, key: Key, now_us: u64, local: &Limiter) -> Verdict {
        if !self.link.shared.up.load(Relaxed) {
            return local.check(key, now_us);
        }
        let (verdict, ask) = self.rule.leases.check(key, now_us, local);
        if let Some(ask) = ask {
            match self.link.tx.try_send((Arc::clone(&self.rule), ask)) {
                Ok(()) => {}
                Err(TrySendError::Full((_, ask)) | TrySendError::Disconnected((_, ask))) => {
                    self.rule.leases.failed(&ask.key, ask.debt);
                }
            }
        }
        verdict
    }
}
