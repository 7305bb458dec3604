//! A second tier's health, sans I/O: whether the next call may go to the server, and the
//! transitions a log line and the `outages` counter follow. No clock of its own (the caller
//! passes `now`), no sockets, no logging.
//!
//! The rule: a tier that fails (an error: refused, reset) or times out
//! [`TIMEOUTS_IN_A_ROW`] times in a row (a success between starts the count again) is
//! *down*; while down, calls are answered as misses without I/O, except one probe at a time once `retry_after` has passed since the last
//! failure. The probe's success brings it back up; a success reported while no probe is out
//! is a call admitted before the outage began (its answer came late), which says nothing of
//! the server now and changes nothing. An outage is one Up → Down transition, so it is
//! logged and counted once however many calls fail during it, or answer late.

use std::time::{Duration, Instant};

/// Timeouts in a row that take an up tier down. One late answer on a busy host (the
/// tier's thread or the worker descheduled past the timeout) is not an outage: with one,
/// a 50 ms timeout flapped a healthy Redis down and up. A stopped server still goes down
/// after three calls' timeouts; an error (refused, reset) takes it down at once.
pub const TIMEOUTS_IN_A_ROW: u32 = 3;

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
    Up {
        /// Calls timed out since the last success (or the last outage's end).
        timeouts: u32,
    },
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
            state: State::Up { timeouts: 0 },
            retry_after,
        }
    }

    pub fn is_up(&self) -> bool {
        matches!(self.state, State::Up { .. })
    }

    /// Whether a call at `now` may go to the server.
    pub fn admit(&mut self, now: Instant) -> Admit {
        match &mut self.state {
            State::Up { .. } => Admit::Go,
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

    /// A call succeeded: while up, the timeouts in a row start again from none; while down,
    /// only the probe's success brings the tier back.
    pub fn succeeded(&mut self) -> Change {
        match self.state {
            State::Down { probing: false, .. } => Change::None,
            State::Up { .. } => {
                self.state = State::Up { timeouts: 0 };
                Change::None
            }
            State::Down { probing: true, .. } => {
                self.state = State::Up { timeouts: 0 };
                Change::CameBack
            }
        }
    }

    /// A call timed out at `now`: the tier goes down at the [`TIMEOUTS_IN_A_ROW`]th in a
    /// row; while down, as [`Health::failed`].
    pub fn timed_out(&mut self, now: Instant) -> Change {
        if let State::Up { timeouts } = &mut self.state {
            *timeouts += 1;
            if *timeouts < TIMEOUTS_IN_A_ROW {
                return Change::None;
            }
        }
        self.failed(now)
    }

    /// A call failed (an error: refused, reset, a reply that makes no sense) at `now`: down
    /// at once.
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

    /// Timeouts take the tier down only [`TIMEOUTS_IN_A_ROW`] in a row; a success between
    /// starts the count again; an error takes it down at once; while down, a timed-out probe
    /// keeps it down, one outage.
    #[test]
    fn timeouts_take_the_tier_down_only_several_in_a_row() {
        #[derive(Clone, Copy, Debug)]
        enum Call {
            Answered,
            TimedOut,
            Refused,
        }
        use Call::*;
        // (the calls' outcomes, in order; what each changed; up at the end)
        let table: &[(&[Call], &[Change], bool)] = &[
            (&[TimedOut], &[Change::None], true),
            (&[TimedOut, TimedOut], &[Change::None, Change::None], true),
            (
                &[TimedOut, TimedOut, TimedOut],
                &[Change::None, Change::None, Change::WentDown],
                false,
            ),
            // A success between: the busy host's occasional late answer never adds up.
            (
                &[
                    TimedOut, TimedOut, Answered, TimedOut, TimedOut, Answered, TimedOut,
                ],
                &[Change::None; 7],
                true,
            ),
            // A refused connection is down at once, whatever came before.
            (&[Refused], &[Change::WentDown], false),
            (
                &[TimedOut, Refused, TimedOut, Refused],
                &[Change::None, Change::WentDown, Change::None, Change::None],
                false,
            ),
            // More timeouts once down (calls admitted before it went down): one outage.
            (
                &[TimedOut, TimedOut, TimedOut, TimedOut, TimedOut],
                &[
                    Change::None,
                    Change::None,
                    Change::WentDown,
                    Change::None,
                    Change::None,
                ],
                false,
            ),
        ];
        let t0 = Instant::now();
        for (calls, changes, up) in table {
            let mut h = Health::new(RETRY);
            let got: Vec<Change> = calls
                .iter()
                .map(|c| {
                    assert_eq!(h.admit(t0), if h.is_up() { Admit::Go } else { Admit::Skip });
                    match c {
                        Answered => h.succeeded(),
                        TimedOut => h.timed_out(t0),
                        Refused => h.failed(t0),
                    }
                })
                .collect();
            assert_eq!(&got, changes, "{calls:?}");
            assert_eq!(h.is_up(), *up, "{calls:?}");
        }
        // Down by timeouts: a probe that times out keeps it down; the count starts again
        // from none once the probe's success brings it back.
        let mut h = Health::new(RETRY);
        for _ in 0..TIMEOUTS_IN_A_ROW {
            h.timed_out(t0);
        }
        let t1 = t0 + RETRY;
        assert_eq!(h.admit(t1), Admit::Probe);
        assert_eq!(h.timed_out(t1), Change::None);
        let t2 = t1 + RETRY;
        assert_eq!(h.admit(t2), Admit::Probe);
        assert_eq!(h.succeeded(), Change::CameBack);
        assert_eq!(h.timed_out(t2), Change::None);
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
