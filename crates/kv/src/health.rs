//! A second tier's health, sans I/O: whether the next call may go to the server, and the
//! transitions a log line and the `outages` counter follow. No clock of its own (the caller
//! passes `now`), no sockets, no logging.
//!
//! The rule (issue Q): a tier that fails is *down*; while down, calls are answered as misses
//! without I/O, except one probe at a time once `retry_after` has passed since the last
//! failure. The probe's success brings it back up; a success reported while no probe is out
//! is a call admitted before the outage began (its answer came late), which says nothing of
//! the server now and changes nothing. An outage is one Up → Down transition, so it is
//! logged and counted once however many calls fail during it, or answer late.

use std::time::{Duration, Instant};

/// What a call may do now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// The tier is up: go.
    Go,
    /// The tier is down and this call is the one probe: go, and report back.
    Probe,
    /// The tier is down: a miss, without I/O.
    Skip,
}

/// What a reported outcome changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    None,
    /// Up → down: a new outage (log it, count it).
    WentDown,
    /// Down → up (log it).
    CameBack,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Up,
    Down {
        /// When the next probe may go.
        retry_at: Instant,
        /// A probe is out and has not reported.
        probing: bool,
    },
}

/// One tier's health.
#[derive(Debug)]
pub struct Health {
    state: State,
    retry_after: Duration,
}

impl Health {
    pub fn new(retry_after: Duration) -> Health {
        Health {
            state: State::Up,
            retry_after,
        }
    }

    pub fn is_up(&self) -> bool {
        self.state == State::Up
    }

    /// Whether a call at `now` may go to the server.
    pub fn admit(&mut self, now: Instant) -> Admit {
        match &mut self.state {
            State::Up => Admit::Go,
            State::Down { retry_at, probing } => {
                if *probing || now < *retry_at {
                    Admit::Skip
                } else {
                    *probing = true;
                    Admit::Probe
                }
            }
        }
    }

    /// A call succeeded: while down, only the probe's success brings the tier back.
    pub fn succeeded(&mut self) -> Change {
        match self.state {
            State::Up | State::Down { probing: false, .. } => Change::None,
            State::Down { probing: true, .. } => {
                self.state = State::Up;
                Change::CameBack
            }
        }
    }

    /// A call failed (an error or a timeout) at `now`.
    pub fn failed(&mut self, now: Instant) -> Change {
        let was_up = self.is_up();
        self.state = State::Down {
            retry_at: now + self.retry_after,
            probing: false,
        };
        if was_up {
            Change::WentDown
        } else {
            Change::None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RETRY: Duration = Duration::from_millis(100);

    #[test]
    fn an_outage_is_one_transition_however_many_calls_fail() {
        let t0 = Instant::now();
        let mut h = Health::new(RETRY);
        assert_eq!(h.admit(t0), Admit::Go);
        assert_eq!(h.failed(t0), Change::WentDown);
        // Calls that were already out when it went down fail too: no second outage.
        assert_eq!(h.failed(t0), Change::None);
        assert_eq!(h.failed(t0), Change::None);
        assert!(!h.is_up());
        // A probe that fails: still the same outage.
        let t1 = t0 + RETRY;
        assert_eq!(h.admit(t1), Admit::Probe);
        assert_eq!(h.failed(t1), Change::None);
        // Back, then down again: a second outage.
        let t2 = t1 + RETRY;
        assert_eq!(h.admit(t2), Admit::Probe);
        assert_eq!(h.succeeded(), Change::CameBack);
        assert_eq!(h.succeeded(), Change::None);
        assert_eq!(h.admit(t2), Admit::Go);
        assert_eq!(h.failed(t2), Change::WentDown);
    }

    /// A call admitted while the tier was up whose answer comes after another call's
    /// failure took the tier down is late news: it does not end the outage, so the next
    /// failure is not a second outage (the flake of proxy_cache_seen's outage count).
    #[test]
    fn a_late_success_from_before_the_outage_does_not_end_it() {
        let t0 = Instant::now();
        let mut h = Health::new(RETRY);
        assert_eq!(h.admit(t0), Admit::Go); // call A
        assert_eq!(h.admit(t0), Admit::Go); // call B
        assert_eq!(h.failed(t0), Change::WentDown); // A times out
        assert_eq!(h.succeeded(), Change::None); // B's answer, late
        assert!(!h.is_up());
        assert_eq!(h.admit(t0), Admit::Skip);
        assert_eq!(h.failed(t0), Change::None); // a third call, also from before
        // Only the probe's answer brings it back.
        let t1 = t0 + RETRY;
        assert_eq!(h.admit(t1), Admit::Probe);
        assert_eq!(h.succeeded(), Change::CameBack);
        assert!(h.is_up());
    }

    #[test]
    fn a_down_tier_skips_until_retry_after_then_lets_one_probe_through() {
        let t0 = Instant::now();
        let mut h = Health::new(RETRY);
        h.failed(t0);
        // Before retry_after: every call is a miss without I/O.
        assert_eq!(h.admit(t0), Admit::Skip);
        assert_eq!(h.admit(t0 + RETRY - Duration::from_millis(1)), Admit::Skip);
        // At retry_after: one probe, and the others skip while it is out.
        assert_eq!(h.admit(t0 + RETRY), Admit::Probe);
        assert_eq!(h.admit(t0 + RETRY), Admit::Skip);
        assert_eq!(h.admit(t0 + 10 * RETRY), Admit::Skip);
        // The probe failed: the next one waits retry_after from that failure.
        let t1 = t0 + 2 * RETRY;
        h.failed(t1);
        assert_eq!(h.admit(t1), Admit::Skip);
        assert_eq!(h.admit(t1 + RETRY), Admit::Probe);
    }
}
