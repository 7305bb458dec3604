//! The send timer of a response that waits on its client, for HTTP/1.1 and HTTP/2 alike: a
//! gap (`send_timeout` since the last bytes went out) and an average (from the first time the
//! kernel would take no more, `min_send_rate` bytes a second after a first `send_timeout`).
//! The gap alone lets a reader that takes a few bytes before each timeout hold its
//! connection, and the kernel memory queued for it, forever (a slow-read attack); the average
//! ends that within `send_timeout` plus the time the bytes it did read were worth. Bytes the
//! kernel took before the first wait earn nothing: they say nothing of the reader. A client
//! that pauses longer than `send_timeout` meets the gap, as before.
#![forbid(unsafe_code)]

use super::Cx;

/// Where a waiting send stands (ms on the driver's clock, bytes since it started waiting).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SendPace {
    since: u64,
    bytes: u64,
    /// The kernel has refused bytes since [`SendPace::start`]: the average runs.
    waiting: bool,
}

impl SendPace {
    /// Output is pending from now (the send timer starts): its first deadline.
    pub(crate) fn start(&mut self, cx: &Cx) -> u64 {
        self.waiting = false;
        self.begin(cx)
    }

    /// The kernel took no more for now: the first time since [`SendPace::start`], the
    /// average starts from here, and so does the deadline it gives; later, `None` (the
    /// deadline stands).
    pub(crate) fn stall(&mut self, cx: &Cx) -> Option<u64> {
        if self.waiting {
            return None;
        }
        self.waiting = true;
        Some(self.begin(cx))
    }

    fn begin(&mut self, cx: &Cx) -> u64 {
        self.since = cx.now;
        self.bytes = 0;
        cx.now + cx.cfg.send_timeout
    }

    /// `n` more bytes went out: the deadline from now on, the sooner of the two limits.
    pub(crate) fn progress(&mut self, n: u64, cx: &Cx) -> u64 {
        let gap = cx.now + cx.cfg.send_timeout;
        match cx.cfg.min_send_rate {
            0 => gap,
            rate => {
                self.bytes = self.bytes.saturating_add(n);
                let earned = self.bytes.saturating_mul(1000) / rate;
                gap.min(self.since + cx.cfg.send_timeout + earned)
            }
        }
    }
}
