//! The constant-rate schedule (wrk2's method): request k of a thread is *intended* to leave at
//! `start + k / rate`. A request that leaves late keeps its intended time, so a stalled server shows
//! in the latency instead of silently slowing the load (coordinated omission).
#![forbid(unsafe_code)]

/// Intended send times for one thread.
#[derive(Clone, Debug)]
pub struct Schedule {
    start_ns: u64,
    interval_ns: f64,
    next: u64,
}

impl Schedule {
    /// `rate` requests per second starting at `start_ns`.
    pub fn new(start_ns: u64, rate: f64) -> Schedule {
        Schedule {
            start_ns,
            interval_ns: 1e9 / rate,
            next: 0,
        }
    }

    /// Intended time of the next request not yet sent.
    pub fn next_due(&self) -> u64 {
        // f64 keeps sub-nanosecond intervals exact enough: 2^53 ns is 104 days.
        self.start_ns + (self.next as f64 * self.interval_ns) as u64
    }

    /// Marks the next request as sent.
    pub fn advance(&mut self) {
        self.next += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spaced_evenly() {
        let mut s = Schedule::new(1000, 4000.0);
        let mut times = Vec::new();
        for _ in 0..4 {
            times.push(s.next_due());
            s.advance();
        }
        assert_eq!(times, [1000, 251_000, 501_000, 751_000]);
    }
}
