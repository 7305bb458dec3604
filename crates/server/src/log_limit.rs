//! Repeated warnings of one kind held to one line per key per [`LOG_INTERVAL`] (Linux's
//! printk rate limit, per key): an upstream that refuses every connect under load would
//! otherwise write a line per request (32,185 lines, 6.2 MB in 15 s, as measured).
//! The line that goes out after a quiet spell says how many were held back since the last
//! (`suppressed = N`).
//!
//! Per worker thread (workers share nothing on the request path), keyed by the kind of
//! line and what it is about (an upstream's name): a worker logs each at most once per
//! interval, so a node logs it at most once per worker. Only failure paths call it.
#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use rustc_hash::{FxHashMap, FxHasher};

/// How often one kind of line about one thing is written, at most, per worker.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Keys remembered per worker: past it the oldest half is forgotten (their next line goes
/// out at once), so a stream of distinct keys holds bounded memory.
const MAX_KEYS: usize = 1024;

/// One key's state: when its last line went out, and the lines held back since.
#[derive(Clone, Copy)]
struct Seen {
    at: Instant,
    held: u64,
}

/// The keys of one thread.
#[derive(Default)]
struct Limiter {
    seen: FxHashMap<u64, Seen>,
}

impl Limiter {
    /// `Some(held back since the last line)` when a line about `key` may go out at `now`;
    /// `None` (counted) when one went out within the interval.
    fn admit(&mut self, key: u64, now: Instant) -> Option<u64> {
        if let Some(s) = self.seen.get_mut(&key) {
            if now.duration_since(s.at) < LOG_INTERVAL {
                s.held += 1;
                return None;
            }
            let held = s.held;
            *s = Seen { at: now, held: 0 };
            return Some(held);
        }
        if self.seen.len() >= MAX_KEYS {
            let mut ats: Vec<Instant> = self.seen.values().map(|s| s.at).collect();
            ats.sort_unstable();
            let cut = ats[ats.len() / 2];
            self.seen.retain(|_, s| s.at > cut);
        }
        self.seen.insert(key, Seen { at: now, held: 0 });
        Some(0)
    }
}

thread_local! {
    static LIMITER: RefCell<Limiter> = RefCell::new(Limiter::default());
}

/// Whether a line of `kind` about `about` may be written now on this thread: `Some(n)`, the
/// lines of that key held back since the last one written; `None`, hold this one back.
pub(crate) fn admit(kind: &'static str, about: &str) -> Option<u64> {
    let mut h = FxHasher::default();
    (kind, about).hash(&mut h);
    let key = h.finish();
    LIMITER
        .try_with(|l| l.borrow_mut().admit(key, Instant::now()))
        .unwrap_or(Some(0))
}

/// `tracing::warn!` at most once per [`LOG_INTERVAL`] per worker for the key (`KIND`, a
/// `&'static str` naming the line, and what it is about), with `suppressed`, the lines held
/// back since the last one.
macro_rules! warn_limited {
    ($kind:expr, $about:expr, $($rest:tt)+) => {
        if let Some(suppressed) = $crate::log_limit::admit($kind, $about) {
            tracing::warn!(suppressed, $($rest)+);
        }
    };
}
pub(crate) use warn_limited;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_key_per_interval_then_the_count_held_back() {
        let mut l = Limiter::default();
        let t0 = Instant::now();
        assert_eq!(l.admit(1, t0), Some(0));
        for i in 1..=5 {
            assert_eq!(l.admit(1, t0 + Duration::from_secs(i)), None);
        }
        // Another key is its own.
        assert_eq!(l.admit(2, t0 + Duration::from_secs(1)), Some(0));
        assert_eq!(l.admit(1, t0 + LOG_INTERVAL), Some(5));
        assert_eq!(l.admit(1, t0 + LOG_INTERVAL), None);
    }

    #[test]
    fn the_keys_kept_are_bounded() {
        let mut l = Limiter::default();
        let t0 = Instant::now();
        for k in 0..10 * MAX_KEYS as u64 {
            assert_eq!(l.admit(k, t0 + Duration::from_millis(k)), Some(0));
            assert!(l.seen.len() <= MAX_KEYS);
        }
    }
}
