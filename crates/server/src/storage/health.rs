//! What `/metrics` and `/readyz` know of the shared storage (`[storage]`): its calls' errors
//! by operation (`linerate_storage_errors_total{op}`), and whether it has answered once since
//! the process started (a node whose storage never answered is not ready).
//!
//! Owns `Counted`, the wrapper [`super::open`] puts around every engine (it counts each
//! failed call and passes everything through), and the probe thread that asks a storage that
//! has not answered yet again every [`PROBE_RETRY`]. Kept per process, as the rate limits'
//! counters are: a node opens the fleet's storage once for ACME and once for its ticket keys,
//! and both count here. Never on a worker's path: storage calls run on managers' threads.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{Lock, Storage, StorageError, Watch};

/// The operations counted, as the `op` label names them: the [`Storage`] calls, and `probe`,
/// the readiness probe's own `get`.
pub const OPS: [&str; 9] = [
    "get", "put", "delete", "lock", "extend", "unlock", "list", "watch", "probe",
];
/// How often a storage that has not answered since start is asked again.
pub const PROBE_RETRY: Duration = Duration::from_secs(2);
/// The key the probe reads (nothing writes it: its answer is "none").
const PROBE_KEY: &str = "linerate-probe";

/// An index into [`OPS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Get = 0,
    Put = 1,
    Delete = 2,
    Lock = 3,
    Extend = 4,
    Unlock = 5,
    List = 6,
    Watch = 7,
    Probe = 8,
}

/// This process's storage state (see the module doc).
static TRACKER: Tracker = Tracker::new();

/// Errors by operation, whether the storage has answered, and what was seen before it did.
struct Tracker {
    errors: [AtomicU64; OPS.len()],
    /// Set by the first call that succeeded; never cleared (a storage lost later is the
    /// managers' to ride out with what they hold, not a reason to take the node out).
    answered: AtomicBool,
    /// The engine opened first, and the last error seen while none has answered.
    seen: Mutex<Option<Seen>>,
}

#[derive(Clone, Debug)]
struct Seen {
    engine: String,
    last_error: Option<String>,
}

/// The storage as `/metrics` and `/readyz` see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Health {
    /// The engine, as `dir PATH` or `redis HOST:PORT` (no password).
    pub engine: String,
    /// Failed calls, by [`OPS`].
    pub errors: [u64; OPS.len()],
    /// Whether a call has succeeded since the process started.
    pub answered: bool,
    /// While none has: the last error.
    pub last_error: Option<String>,
}

impl Health {
    /// Why the node is not ready because of the storage; `None` once it has answered.
    pub fn not_ready(&self) -> Option<String> {
        if self.answered {
            return None;
        }
        Some(match &self.last_error {
            Some(e) => format!(
                "[storage] ({}) has not answered since start: {e}",
                self.engine
            ),
            None => format!("[storage] ({}) has not answered yet", self.engine),
        })
    }
}

/// The storage's health; `None` when this process opened none.
pub fn health() -> Option<Health> {
    TRACKER.health()
}

/// `engine` (described as `engine_name`) counted, and probed until the storage answers.
pub(super) fn counted(engine: Arc<dyn Storage>, engine_name: String) -> Arc<dyn Storage> {
    TRACKER.counted(engine, engine_name)
}

impl Tracker {
    const fn new() -> Tracker {
        Tracker {
            errors: [const { AtomicU64::new(0) }; OPS.len()],
            answered: AtomicBool::new(false),
            seen: Mutex::new(None),
        }
    }

    fn health(&self) -> Option<Health> {
        let seen = self
            .seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()?;
        Some(Health {
            engine: seen.engine,
            errors: std::array::from_fn(|i| self.errors[i].load(Relaxed)),
            answered: self.answered.load(Relaxed),
            last_error: seen.last_error,
        })
    }

    /// `result` of `op`, counted: an error by its operation, and (until one call succeeds)
    /// kept as the reason the storage has not answered. A bad key says nothing of the
    /// storage, nor does a watch made: Redis's starts while Redis is down, and subscribes
    /// once it answers.
    fn record<T>(&self, op: Op, result: Result<T, StorageError>) -> Result<T, StorageError> {
        match &result {
            Ok(_) if op == Op::Watch => {}
            Ok(_) => self.answered.store(true, Relaxed),
            Err(e) => {
                self.errors[op as usize].fetch_add(1, Relaxed);
                if !self.answered.load(Relaxed) && !matches!(e, StorageError::BadKey(_)) {
                    let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(s) = seen.as_mut() {
                        s.last_error = Some(e.to_string());
                    }
                }
            }
        }
        result
    }

    fn counted(&'static self, engine: Arc<dyn Storage>, name: String) -> Arc<dyn Storage> {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(Seen {
                engine: name,
                last_error: None,
            });
        if !self.answered.load(Relaxed) {
            self.probe(Arc::downgrade(&engine));
        }
        Arc::new(Counted {
            inner: engine,
            tracker: self,
        })
    }

    /// Asks the storage at once, and every [`PROBE_RETRY`] until it (or any other call) has
    /// answered, or until the engine is dropped.
    fn probe(&'static self, engine: std::sync::Weak<dyn Storage>) {
        let spawned = std::thread::Builder::new()
            .name("linerate-storage-probe".into())
            .spawn(move || {
                while !self.answered.load(Relaxed) {
                    let Some(storage) = engine.upgrade() else {
                        return;
                    };
                    if self.record(Op::Probe, storage.get(PROBE_KEY)).is_ok() {
                        return;
                    }
                    drop(storage);
                    std::thread::sleep(PROBE_RETRY);
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(
                "storage: no probe thread ({e}); the first call says whether it answers"
            );
        }
    }
}

/// An engine whose calls are counted (see the module doc).
pub(super) struct Counted {
    inner: Arc<dyn Storage>,
    tracker: &'static Tracker,
}

impl Storage for Counted {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        self.tracker.record(Op::Get, self.inner.get(key))
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<(), StorageError> {
        self.tracker.record(Op::Put, self.inner.put(key, value))
    }

    fn delete(&self, key: &str) -> Result<(), StorageError> {
        self.tracker.record(Op::Delete, self.inner.delete(key))
    }

    fn lock(&self, name: &str, ttl: Duration) -> Result<Option<Lock>, StorageError> {
        self.tracker.record(Op::Lock, self.inner.lock(name, ttl))
    }

    fn extend(&self, lock: &Lock, ttl: Duration) -> Result<bool, StorageError> {
        self.tracker
            .record(Op::Extend, self.inner.extend(lock, ttl))
    }

    fn unlock(&self, lock: &Lock) -> Result<(), StorageError> {
        self.tracker.record(Op::Unlock, self.inner.unlock(lock))
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>, StorageError> {
        self.tracker.record(Op::List, self.inner.list(prefix))
    }

    fn watch(&self) -> Result<Watch, StorageError> {
        self.tracker.record(Op::Watch, self.inner.watch())
    }

    fn watch_delay(&self) -> Duration {
        self.inner.watch_delay()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An engine that fails every call until `up` is set.
    struct Flaky {
        up: AtomicBool,
    }

    impl Flaky {
        fn answer<T>(&self, v: T) -> Result<T, StorageError> {
            if self.up.load(Relaxed) {
                Ok(v)
            } else {
                Err(StorageError::Io("redis 127.0.0.1:1: refused".into()))
            }
        }
    }

    impl Storage for Flaky {
        fn get(&self, _: &str) -> Result<Option<Vec<u8>>, StorageError> {
            self.answer(None)
        }
        fn put(&self, _: &str, _: &[u8]) -> Result<(), StorageError> {
            self.answer(())
        }
        fn delete(&self, _: &str) -> Result<(), StorageError> {
            self.answer(())
        }
        fn lock(&self, _: &str, _: Duration) -> Result<Option<Lock>, StorageError> {
            self.answer(None)
        }
        fn extend(&self, _: &Lock, _: Duration) -> Result<bool, StorageError> {
            self.answer(false)
        }
        fn unlock(&self, _: &Lock) -> Result<(), StorageError> {
            self.answer(())
        }
        fn list(&self, _: &str) -> Result<Vec<String>, StorageError> {
            self.answer(Vec::new())
        }
        /// As Redis's: made while the server is down (it subscribes once it answers).
        fn watch(&self) -> Result<Watch, StorageError> {
            let (_, rx) = std::sync::mpsc::channel();
            Ok(Watch::new(rx, Arc::default()))
        }
        fn watch_delay(&self) -> Duration {
            Duration::ZERO
        }
    }

    /// Errors are counted by operation, the node is not ready (naming the engine and the last
    /// error) until a call succeeds, and ready for good from then on. A tracker of its own:
    /// the process's is shared with every other test that opens a storage.
    #[test]
    fn errors_count_by_operation_and_readiness_waits_for_the_first_answer() {
        let tracker: &'static Tracker = Box::leak(Box::new(Tracker::new()));
        assert_eq!(tracker.health(), None, "nothing opened");
        let flaky = Arc::new(Flaky {
            up: AtomicBool::new(false),
        });
        let s = tracker.counted(flaky.clone(), "redis 127.0.0.1:1".into());
        let lock = Lock {
            name: "a".into(),
            token: "t".into(),
            fence: 1,
        };
        // One call of each operation, each failing.
        let rows: [(Op, bool); 7] = [
            (Op::Get, s.get("a").is_err()),
            (Op::Put, s.put("a", b"v").is_err()),
            (Op::Delete, s.delete("a").is_err()),
            (Op::Lock, s.lock("a", Duration::ZERO).is_err()),
            (Op::Extend, s.extend(&lock, Duration::ZERO).is_err()),
            (Op::Unlock, s.unlock(&lock).is_err()),
            (Op::List, s.list("a").is_err()),
        ];
        // A watch is made while the storage is down: no answer for all that.
        assert!(s.watch().is_ok());
        let h = tracker.health().unwrap();
        for (op, failed) in rows {
            assert!(failed, "{op:?}");
            assert_eq!(h.errors[op as usize], 1, "{op:?}");
        }
        assert_eq!(h.errors[Op::Watch as usize], 0);
        assert_eq!(h.engine, "redis 127.0.0.1:1");
        let why = h.not_ready().expect("not ready while it never answered");
        assert!(
            why.starts_with("[storage] (redis 127.0.0.1:1) has not answered since start: ")
                && why.contains("refused"),
            "{why}"
        );
        // Back: the probe (or the next call) finds it, and the node is ready for good.
        flaky.up.store(true, Relaxed);
        assert!(s.get("a").is_ok());
        flaky.up.store(false, Relaxed);
        assert!(s.get("a").is_err());
        let h = tracker.health().unwrap();
        assert!(h.answered && h.not_ready().is_none(), "{h:?}");
        assert_eq!(
            h.errors[Op::Get as usize],
            2,
            "a failure after the answer counts too"
        );
        assert_eq!(s.watch_delay(), Duration::ZERO);
    }
}
