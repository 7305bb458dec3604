//! Shared storage: what the nodes of a fleet share (`[storage]`), on an engine the operator
//! already runs: a directory every node mounts ([`dir`]) or a Redis/Valkey server
//! ([`redis`]). ACME keeps its account, certificates and challenge answers here; TLS ticket
//! keys rotate through it.
//!
//! Owns the [`Storage`] contract every engine meets: whole-value get/put/delete (a put is
//! atomic: a reader sees the old bytes or the new, never half), locks with an expiry and a
//! fencing number, and a watch through which every node learns of a change within seconds.
//! Calls block (short timeouts: an engine that is down is an error, never a hang), so they
//! run on a manager's own thread, never on a worker. Every engine [`open`] makes is counted
//! ([`health`]: errors by operation, and whether it has answered since start).
#![forbid(unsafe_code)]

pub mod dir;
pub mod health;
pub mod redis;
pub mod redis_url;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::config::StorageConfig;

/// The longest key (or lock name) taken.
pub const MAX_KEY: usize = 512;

/// Why a storage operation failed.
#[derive(Debug)]
pub enum StorageError {
    /// A key or lock name outside `[A-Za-z0-9._-]` segments joined by `/`.
    BadKey(String),
    /// The engine could not be reached or refused (the path or the server, and why).
    Io(String),
    /// The engine answered something that is not what was asked.
    Protocol(String),
}

impl std::fmt::Display for StorageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StorageError::BadKey(k) => write!(f, "not a storage key: {k:?}"),
            StorageError::Io(e) => write!(f, "storage: {e}"),
            StorageError::Protocol(e) => write!(f, "storage: unexpected answer: {e}"),
        }
    }
}

impl std::error::Error for StorageError {}

/// A lock held: its name, the random token that proves who holds it, and its fencing
/// number, which only grows from one holder to the next (a write that carries a smaller one
/// than the storage has seen comes from a holder whose lock expired).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lock {
    pub name: String,
    pub token: String,
    pub fence: u64,
}

/// What changed in the storage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// This key was put or deleted (read it again to know which).
    Key(String),
    /// Changes may have been missed (the watch reconnected): read again what matters.
    All,
}

/// The changes another node (or this one) makes, as a thread of the engine learns of them;
/// the thread ends soon after this is dropped.
pub struct Watch {
    pub changes: mpsc::Receiver<Change>,
    stop: Arc<AtomicBool>,
}

impl Watch {
    fn new(changes: mpsc::Receiver<Change>, stop: Arc<AtomicBool>) -> Watch {
        Watch { changes, stop }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The contract every engine meets. Values are whole; keys are `/`-separated segments of
/// `[A-Za-z0-9._-]` (not `.` or `..`, none starting with a dot), at most [`MAX_KEY`] bytes.
pub trait Storage: Send + Sync {
    /// The value of `key`, `None` when there is none.
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError>;
    /// Replaces the value of `key` whole, and announces the change to every watch.
    fn put(&self, key: &str, value: &[u8]) -> Result<(), StorageError>;
    /// Removes `key` (none is no error), and announces the change.
    fn delete(&self, key: &str) -> Result<(), StorageError>;
    /// Takes the lock `name` for `ttl` when no one holds it (or its holder's expired):
    /// `None` when another holds it now.
    fn lock(&self, name: &str, ttl: Duration) -> Result<Option<Lock>, StorageError>;
    /// Moves `lock`'s expiry to `ttl` from now while it is still ours; `false` when it is
    /// not (it expired and another took it).
    fn extend(&self, lock: &Lock, ttl: Duration) -> Result<bool, StorageError>;
    /// Releases `lock` when it is still ours; never another holder's.
    fn unlock(&self, lock: &Lock) -> Result<(), StorageError>;
    /// Every key that starts with `prefix` now (in no order): what a watch started later
    /// than a put must read, since the watch reports changes from its start on.
    fn list(&self, prefix: &str) -> Result<Vec<String>, StorageError>;
    /// A new watch of every change, from now on.
    fn watch(&self) -> Result<Watch, StorageError>;
    /// How long a change may take to reach a watch (the dir engine's polling interval).
    fn watch_delay(&self) -> Duration;
}

/// The engine `config` names, its calls counted and its first answer waited for by
/// [`health`] (`/metrics`, `/readyz`).
pub fn open(config: &StorageConfig) -> Result<Arc<dyn Storage>, StorageError> {
    let (engine, name): (Arc<dyn Storage>, String) = match (&config.dir, &config.redis) {
        (Some(d), _) => (
            Arc::new(dir::DirStorage::open(d)?),
            format!("dir {}", d.display()),
        ),
        (None, Some(url)) => (
            Arc::new(redis::RedisStorage::open(url)?),
            format!("redis {}", redis::address(url).unwrap_or_default()),
        ),
        (None, None) => return Err(StorageError::Io("[storage] names no engine".into())),
    };
    Ok(health::counted(engine, name))
}

/// How often [`lock_wait`] tries again.
pub const LOCK_RETRY: Duration = Duration::from_millis(250);

/// Takes the lock `name`, waiting for its holder to release it (or for it to expire) up to
/// `wait`; `None` when `stop` is set or the wait ran out.
pub fn lock_wait(
    storage: &dyn Storage,
    name: &str,
    ttl: Duration,
    wait: Duration,
    stop: &AtomicBool,
) -> Result<Option<Lock>, StorageError> {
    let until = Instant::now() + wait;
    loop {
        if let Some(l) = storage.lock(name, ttl)? {
            return Ok(Some(l));
        }
        if stop.load(Ordering::Relaxed) || Instant::now() >= until {
            return Ok(None);
        }
        std::thread::sleep(LOCK_RETRY);
    }
}

/// A lock kept alive by a thread that extends it every third of its `ttl`, until dropped
/// (then released). `lost()` says when an extension found it taken.
pub struct Held {
    storage: Arc<dyn Storage>,
    lock: Lock,
    stop: Arc<AtomicBool>,
    lost: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Held {
    /// Keeps `lock` (taken with `ttl`) alive.
    pub fn keep(storage: Arc<dyn Storage>, lock: Lock, ttl: Duration) -> Held {
        let stop = Arc::new(AtomicBool::new(false));
        let lost = Arc::new(AtomicBool::new(false));
        let thread = {
            let (storage, lock, stop, lost) =
                (storage.clone(), lock.clone(), stop.clone(), lost.clone());
            std::thread::Builder::new()
                .name("linerate-lock".into())
                .spawn(move || {
                    let every = ttl / 3;
                    let mut last = Instant::now();
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(100).min(every));
                        if last.elapsed() < every {
                            continue;
                        }
                        last = Instant::now();
                        match storage.extend(&lock, ttl) {
                            Ok(true) => {}
                            Ok(false) => {
                                lost.store(true, Ordering::Relaxed);
                                tracing::warn!(lock = %lock.name, "storage: the lock was lost");
                                return;
                            }
                            // Retried at the next third: the lock outlives one failure.
                            Err(e) => tracing::warn!(lock = %lock.name, "storage: {e}"),
                        }
                    }
                })
                .ok()
        };
        Held {
            storage,
            lock,
            stop,
            lost,
            thread,
        }
    }

    pub fn lock(&self) -> &Lock {
        &self.lock
    }

    /// Whether another node took the lock (an extension found it expired and taken).
    pub fn lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Err(e) = self.storage.unlock(&self.lock) {
            tracing::warn!(lock = %self.lock.name, "storage: could not release the lock: {e}");
        }
    }
}

/// `key` when it is a storage key (see [`Storage`]).
pub fn check_key(key: &str) -> Result<&str, StorageError> {
    let ok = !key.is_empty()
        && key.len() <= MAX_KEY
        && key.split('/').all(|seg| {
            !seg.is_empty()
                && !seg.starts_with('.')
                && seg
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_')
        });
    if ok {
        Ok(key)
    } else {
        Err(StorageError::BadKey(key.chars().take(80).collect()))
    }
}

/// A random token (32 hex digits): a lock's proof of holding, a temporary file's name.
pub fn token() -> String {
    let mut b = [0u8; 16];
    if aws_lc_rs::rand::fill(&mut b).is_err() {
        // Not expected; the time and the process id still tell holders apart.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        b[..8].copy_from_slice(&(t as u64).to_le_bytes());
        b[8..12].copy_from_slice(&std::process::id().to_le_bytes());
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_segments_that_cannot_leave_the_storage() {
        for good in ["acme/certs/a.test/cert.pem", "tickets/keys", "a_b-c"] {
            assert!(check_key(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "/abs",
            "a//b",
            "../x",
            "a/../b",
            "a/.hidden",
            "a b",
            "a/",
            "é",
        ] {
            assert!(check_key(bad).is_err(), "{bad}");
        }
        assert!(check_key(&"a".repeat(MAX_KEY + 1)).is_err());
        assert_ne!(token(), token());
        assert_eq!(token().len(), 32);
    }
}

/// The behaviour every engine shares, run by each engine's tests against its own.
#[cfg(test)]
pub(crate) mod contract {
    use super::*;

    /// put/get/delete, atomic replacement and the announcement of each change.
    pub fn values(s: &dyn Storage) {
        let w = s.watch().unwrap();
        assert_eq!(s.get("acme/certs/a.test/cert.pem").unwrap(), None);
        s.put("acme/certs/a.test/cert.pem", b"one").unwrap();
        assert_eq!(
            s.get("acme/certs/a.test/cert.pem").unwrap().unwrap(),
            b"one"
        );
        s.put("acme/certs/a.test/cert.pem", b"two").unwrap();
        assert_eq!(
            s.get("acme/certs/a.test/cert.pem").unwrap().unwrap(),
            b"two"
        );
        let seen = |w: &Watch, key: &str| {
            let until = Instant::now() + s.watch_delay() * 5 + Duration::from_secs(2);
            while Instant::now() < until {
                match w.changes.recv_timeout(Duration::from_millis(100)) {
                    Ok(Change::Key(k)) if k == key => return true,
                    _ => {}
                }
            }
            false
        };
        assert!(
            seen(&w, "acme/certs/a.test/cert.pem"),
            "a watcher sees a put"
        );
        s.delete("acme/certs/a.test/cert.pem").unwrap();
        assert_eq!(s.get("acme/certs/a.test/cert.pem").unwrap(), None);
        assert!(
            seen(&w, "acme/certs/a.test/cert.pem"),
            "a watcher sees a delete"
        );
        s.delete("acme/certs/a.test/cert.pem").unwrap();
        assert!(matches!(s.put("../x", b""), Err(StorageError::BadKey(_))));
        // list: the keys under a prefix now, and no other.
        s.put("acme/challenges/http-01/t1", b"a").unwrap();
        s.put("acme/challenges/tls-alpn-01/x.test", b"b").unwrap();
        s.put("acme/certs/b.test/bundle.pem", b"c").unwrap();
        let mut listed = s.list("acme/challenges/").unwrap();
        listed.sort();
        assert_eq!(
            listed,
            [
                "acme/challenges/http-01/t1",
                "acme/challenges/tls-alpn-01/x.test"
            ]
        );
        assert!(s.list("nothing/").unwrap().is_empty());
        for k in [
            "acme/challenges/http-01/t1",
            "acme/challenges/tls-alpn-01/x.test",
            "acme/certs/b.test/bundle.pem",
        ] {
            s.delete(k).unwrap();
        }
        assert!(s.list("acme/").unwrap().is_empty());
    }

    /// Two lockers (`a`, `b`: two nodes' handles on one storage): one wins; an expired lock
    /// is taken over with a larger fence; an unlock or extension with a stale token does
    /// nothing.
    pub fn locks(a: &Arc<dyn Storage>, b: &Arc<dyn Storage>) {
        let long = Duration::from_secs(30);
        let first = a.lock("acme/certs/a.test", long).unwrap().expect("free");
        assert!(
            b.lock("acme/certs/a.test", long).unwrap().is_none(),
            "one wins"
        );
        assert!(a.lock("acme/certs/a.test", long).unwrap().is_none());
        // Another name is another lock.
        let other = b.lock("acme/account", long).unwrap().expect("another name");
        b.unlock(&other).unwrap();
        // A stale token releases nothing and extends nothing.
        let stale = Lock {
            token: token(),
            ..first.clone()
        };
        b.unlock(&stale).unwrap();
        assert!(!b.extend(&stale, long).unwrap());
        assert!(b.lock("acme/certs/a.test", long).unwrap().is_none());
        assert!(a.extend(&first, long).unwrap());
        a.unlock(&first).unwrap();
        let second = b
            .lock("acme/certs/a.test", long)
            .unwrap()
            .expect("released");
        assert!(second.fence > first.fence);
        b.unlock(&second).unwrap();
        // An expired lock is taken over, with a larger fence; its old holder can no longer
        // extend or release it.
        let short = a
            .lock("acme/certs/a.test", Duration::from_millis(300))
            .unwrap()
            .unwrap();
        std::thread::sleep(Duration::from_millis(600));
        let taken = b.lock("acme/certs/a.test", long).unwrap().expect("expired");
        assert!(taken.fence > short.fence);
        assert!(!a.extend(&short, long).unwrap());
        a.unlock(&short).unwrap();
        assert!(a.lock("acme/certs/a.test", long).unwrap().is_none());
        b.unlock(&taken).unwrap();
        // A lock kept alive outlives its ttl.
        let ttl = Duration::from_millis(600);
        let held = Held::keep(
            a.clone(),
            a.lock("acme/certs/b.test", ttl).unwrap().unwrap(),
            ttl,
        );
        std::thread::sleep(ttl * 2);
        assert!(
            b.lock("acme/certs/b.test", ttl).unwrap().is_none(),
            "kept alive"
        );
        assert!(!held.lost());
        drop(held);
        assert!(
            b.lock("acme/certs/b.test", ttl).unwrap().is_some(),
            "released on drop"
        );
    }
}
