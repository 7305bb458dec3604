//! Counters a running server exposes: deferred answers outstanding, refused at the cap, timed
//! out, abandoned by their client, and arriving too late to be sent.
//!
//! Owns the counters only. Each worker writes its own (relaxed atomics, touched on the
//! deferred path, never per ordinary request); [`StatsHandle::snapshot`] sums them from any
//! thread.
#![forbid(unsafe_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// One worker's counters.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    outstanding: AtomicU64,
    refused: AtomicU64,
    timed_out: AtomicU64,
    late: AtomicU64,
    abandoned: AtomicU64,
}

impl Counters {
    pub(crate) fn set_outstanding(&self, n: usize) {
        self.outstanding.store(n as u64, Relaxed);
    }
    pub(crate) fn refused(&self) {
        self.refused.fetch_add(1, Relaxed);
    }
    pub(crate) fn timed_out(&self) {
        self.timed_out.fetch_add(1, Relaxed);
    }
    pub(crate) fn late(&self) {
        self.late.fetch_add(1, Relaxed);
    }
    pub(crate) fn abandoned(&self, n: usize) {
        self.abandoned.fetch_add(n as u64, Relaxed);
    }
}

/// The server's counters at one moment, summed over workers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Deferred requests whose `Responder` has not reported back.
    pub deferred_outstanding: u64,
    /// Deferred requests answered 503 because their worker had `max_deferred_per_worker`
    /// outstanding.
    pub deferred_refused: u64,
    /// Deferred requests answered 503 because no answer came within `deferred_timeout`.
    pub deferred_timed_out: u64,
    /// Answers that came back after their client left, their deadline passed or an earlier
    /// answer closed the connection: dropped.
    pub late_answers_dropped: u64,
    /// Deferred requests whose client closed the connection before the answer came (logged
    /// as 499, as nginx does).
    pub deferred_abandoned: u64,
}

/// Reads a server's counters from any thread.
#[derive(Clone, Debug)]
pub struct StatsHandle {
    pub(crate) workers: Arc<Vec<Arc<Counters>>>,
}

impl StatsHandle {
    /// The counters now, summed over workers.
    pub fn snapshot(&self) -> Stats {
        let mut s = Stats::default();
        for c in self.workers.iter() {
            s.deferred_outstanding += c.outstanding.load(Relaxed);
            s.deferred_refused += c.refused.load(Relaxed);
            s.deferred_timed_out += c.timed_out.load(Relaxed);
            s.late_answers_dropped += c.late.load(Relaxed);
            s.deferred_abandoned += c.abandoned.load(Relaxed);
        }
        s
    }
}
