//! A second tier's counters: plain atomics written with relaxed ordering (each is a count on
//! its own; no reader needs two to agree), and their snapshot.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The counters of one [`crate::Tier`].
#[derive(Debug, Default)]
pub struct Counters {
    pub hits: AtomicU64,
    /// Gets that found nothing, failed, timed out or were skipped (the tier down).
    pub misses: AtomicU64,
    /// Calls the server answered with an error, or whose connection failed.
    pub errors: AtomicU64,
    /// Calls that ran past the timeout.
    pub timeouts: AtomicU64,
    /// Values stored.
    pub sets: AtomicU64,
    /// Calls answered without I/O because the tier was down.
    pub skipped: AtomicU64,
    /// Up → down transitions: each was logged once.
    pub outages: AtomicU64,
    /// Gets the server answered with nothing usable (absent, expired): the misses that are
    /// not skipped, failed or timed out calls.
    pub absent: AtomicU64,
}

/// The counters' values at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub hits: u64,
    pub misses: u64,
    pub errors: u64,
    pub timeouts: u64,
    pub sets: u64,
    pub skipped: u64,
    pub outages: u64,
    pub absent: u64,
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Relaxed);
    }

    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            errors: self.errors.load(Relaxed),
            timeouts: self.timeouts.load(Relaxed),
            sets: self.sets.load(Relaxed),
            skipped: self.skipped.load(Relaxed),
            outages: self.outages.load(Relaxed),
            absent: self.absent.load(Relaxed),
        }
    }
}
