//! The pool's counters ([`Pool::metrics`](crate::Pool::metrics)): gauges (sessions in use,
//! requests waiting for one, connections open by kind) held up by [`Held`] guards, so that a
//! dropped future or a closed connection can never leave one counted; and running totals
//! (reconnects, busy refusals, session connections that did not open and the outages they
//! made). Atomics only, shared by every worker's set, and touched only
//! where a connection or a session changes hands: never on [`Pool::get`](crate::Pool::get)'s
//! path.
#![forbid(unsafe_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// A snapshot of a pool's counters, all its sets (every worker's) together. Each figure is
/// read on its own, so one taken while requests come and go may be off by those in flight.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Metrics {
    /// Sessions held by a request, being opened for one, or being reset after one.
    pub sessions_in_use: usize,
    /// Requests waiting for a session because all were in use.
    pub sessions_waiting: usize,
    /// Session connections open (idle or in use).
    pub sessions_open: usize,
    /// Shared (pipelined) connections open.
    pub shared_open: usize,
    /// Listeners' connections open ([`Pool::listen`](crate::Pool::listen)).
    pub listeners_open: usize,
    /// Lost connections (shared ones and listeners') opened again, so far.
    pub reconnects: u64,
    /// Requests told [`Error::Busy`](crate::Error::Busy), so far.
    pub busy: u64,
    /// Session connections that did not open, so far: one per try, and tries back off
    /// while the database is unreachable (not one per request).
    pub session_open_failures: u64,
    /// Outages seen by sessions so far (each logged once for the pool, whatever its workers):
    /// from a session connection that did not open to the next that did.
    pub session_outages: u64,
}

/// What a [`Held`] guard counts.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Gauge {
    SessionsInUse,
    SessionsWaiting,
    SessionsOpen,
    SharedOpen,
    ListenersOpen,
}

/// The live counters of one pool.
#[derive(Default)]
pub(crate) struct Counters {
    gauges: [AtomicUsize; 5],
    reconnects: AtomicU64,
    busy: AtomicU64,
    session_open_failures: AtomicU64,
    session_outages: AtomicU64,
}

impl Counters {
    /// Counts one more under `gauge` until the guard is dropped.
    pub(crate) fn hold(self: &Arc<Counters>, gauge: Gauge) -> Held {
        self.gauges[gauge as usize].fetch_add(1, Ordering::Relaxed);
        Held {
            counters: self.clone(),
            gauge,
        }
    }

    pub(crate) fn reconnected(&self) {
        self.reconnects.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn busy(&self) {
        self.busy.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn session_open_failed(&self) {
        self.session_open_failures.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn session_outage(&self) {
        self.session_outages.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> Metrics {
        let gauge = |g: Gauge| self.gauges[g as usize].load(Ordering::Relaxed);
        Metrics {
            sessions_in_use: gauge(Gauge::SessionsInUse),
            sessions_waiting: gauge(Gauge::SessionsWaiting),
            sessions_open: gauge(Gauge::SessionsOpen),
            shared_open: gauge(Gauge::SharedOpen),
            listeners_open: gauge(Gauge::ListenersOpen),
            reconnects: self.reconnects.load(Ordering::Relaxed),
            busy: self.busy.load(Ordering::Relaxed),
            session_open_failures: self.session_open_failures.load(Ordering::Relaxed),
            session_outages: self.session_outages.load(Ordering::Relaxed),
        }
    }
}

/// One counted under a [`Gauge`] for as long as it lives.
pub(crate) struct Held {
    counters: Arc<Counters>,
    gauge: Gauge,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.counters.gauges[self.gauge as usize].fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gauge_counts_its_guards_and_totals_only_grow() {
        let c = Arc::new(Counters::default());
        let a = c.hold(Gauge::SessionsInUse);
        let b = c.hold(Gauge::SessionsInUse);
        let w = c.hold(Gauge::SessionsWaiting);
        c.busy();
        c.reconnected();
        c.reconnected();
        assert_eq!(
            c.snapshot(),
            Metrics {
                sessions_in_use: 2,
                sessions_waiting: 1,
                reconnects: 2,
                busy: 1,
                ..Metrics::default()
            }
        );
        drop((a, w));
        let s = c.snapshot();
        assert_eq!((s.sessions_in_use, s.sessions_waiting), (1, 0));
        drop(b);
        assert_eq!(c.snapshot().sessions_in_use, 0);
        assert_eq!(c.snapshot().reconnects, 2);
    }
}
