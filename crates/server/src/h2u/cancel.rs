//! The reset budget: which cancelled streams get their RST_STREAM(CANCEL) now and which are
//! abandoned until it is safe, so that a client leaving with many calls in flight never trips
//! the upstream's rapid-reset guard (CVE-2023-44487) and costs the other clients on the same
//! connection their calls. Decisions only: `conn.rs` writes the frames and keeps the streams.
//!
//! Invariant: the resets the server may still count against us (streams reset before their
//! response head, not yet known accepted) are at most [`RESET_BUDGET`].
#![forbid(unsafe_code)]

/// Streams reset before their response head that the server may not have accepted yet, at
/// most. hyperium h2 (tonic, hyper) counts RST_STREAMs on streams still waiting for its
/// application's accept and answers more than 20 (`max_pending_accept_reset_streams`) with
/// GOAWAY ENHANCE_YOUR_CALM "too_many_resets", closing every stream on the connection; half
/// of that leaves a margin for a server stricter than its default.
pub(crate) const RESET_BUDGET: usize = 10;
/// Abandoned streams a connection carries at most. They still count against the server's
/// SETTINGS_MAX_CONCURRENT_STREAMS, so at this many (or half the server's limit, if lower)
/// the connection takes no new stream and closes once its live streams are done: closing
/// ends the abandoned ones with no reset at all, and new calls go to another connection.
pub(crate) const MAX_ABANDONED: usize = 50;

/// What to do with a stream given up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Cancel {
    /// RST_STREAM(CANCEL) now.
    Reset,
    /// Keep it open, unreset: nothing of it reaches the caller, and its RST_STREAM goes once
    /// the server has shown it accepted it ([`Cancels::answered`], [`Cancels::next_reset`]).
    Abandon,
}

/// An abandoned stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Abandoned {
    id: u32,
    /// Our END_STREAM went out: a response that ends closes it both ways, with no reset.
    sent_end: bool,
}

/// One connection's cancellations not yet safe to forget. Empty on a connection that never
/// cancels a stream before its answer, so the common path pays one emptiness test.
#[derive(Debug, Default)]
pub(super) struct Cancels {
    /// Streams reset before their response head, above every stream known accepted.
    unproven: Vec<u32>,
    /// Streams cancelled beyond the budget, in the order they were given up.
    abandoned: Vec<Abandoned>,
    /// Every stream at or below this id was accepted by the server's application.
    accepted: u32,
}

impl Cancels {
    /// Nothing held: the common path's test.
    pub(super) fn is_clear(&self) -> bool {
        self.unproven.is_empty() && self.abandoned.is_empty()
    }

    /// Abandoned streams: still open on the wire, so still counted by the server.
    pub(super) fn abandoned(&self) -> usize {
        self.abandoned.len()
    }

    /// Whether the abandoned streams reached their bound for a server allowing
    /// `max_streams`: the connection should take no new stream and close.
    pub(super) fn too_many(&self, max_streams: u32) -> bool {
        let limit = MAX_ABANDONED.min(max_streams as usize / 2).max(1);
        self.abandoned.len() >= limit
    }

    /// Stream `id` is given up. One whose response head came (`headless` false) was accepted
    /// by the server's application, so its reset is never counted as a rapid one: reset. One
    /// without may be waiting for the application's accept: reset within the budget,
    /// abandoned beyond it.
    pub(super) fn cancel(&mut self, id: u32, headless: bool, sent_end: bool) -> Cancel {
        if !headless || id <= self.accepted {
            return Cancel::Reset;
        }
        if self.unproven.len() < RESET_BUDGET {
            self.unproven.push(id);
            return Cancel::Reset;
        }
        self.abandoned.push(Abandoned { id, sent_end });
        Cancel::Abandon
    }

    /// The server's application answered on stream `id` (a header block or DATA came for
    /// it): it accepted `id`, and, accepting in order (streams are taken in the order their
    /// HEADERS arrived, which is their ids' order), every stream below. Resets below it no
    /// longer count. Returns, when `id` was abandoned, whether it is closed both ways by a
    /// response that `ends` (then it is forgotten, never reset); `None`: not abandoned.
    pub(super) fn answered(&mut self, id: u32, ends: bool) -> Option<bool> {
        if id > self.accepted {
            self.accepted = id;
            self.unproven.retain(|&u| u > id);
        }
        let i = self.abandoned.iter().position(|a| a.id == id)?;
        let a = self.abandoned.remove(i);
        Some(ends && a.sent_end)
    }

    /// The next abandoned stream to reset now: one below a stream known accepted (free), else
    /// the lowest while the budget has room. `None`: none may be reset yet.
    pub(super) fn next_reset(&mut self) -> Option<u32> {
        let accepted = self.accepted;
        let (i, a) = self
            .abandoned
            .iter()
            .enumerate()
            .min_by_key(|(_, a)| a.id)?;
        let id = a.id;
        if id > accepted {
            if self.unproven.len() >= RESET_BUDGET {
                return None;
            }
            self.unproven.push(id);
        }
        self.abandoned.remove(i);
        Some(id)
    }

    /// The server reset stream `id` itself: an abandoned one ends with no reset of ours.
    /// Returns whether it was abandoned.
    pub(super) fn reset_by_server(&mut self, id: u32) -> bool {
        let found = self.abandoned.iter().position(|a| a.id == id);
        found.map(|i| self.abandoned.remove(i)).is_some()
    }

    /// The server's GOAWAY: streams above `last` were never processed (RFC 9113 §6.8), so
    /// neither counted nor open any more.
    pub(super) fn going_away(&mut self, last: u32) {
        self.unproven.retain(|&u| u <= last);
        self.abandoned.retain(|a| a.id <= last);
    }

    /// The connection is closed: nothing is held.
    pub(super) fn clear(&mut self) {
        *self = Cancels::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A budget's worth of headless cancellations: streams 1, 3, … 19, all reset.
    fn spent() -> Cancels {
        let mut c = Cancels::default();
        for i in 0..RESET_BUDGET as u32 {
            assert_eq!(c.cancel(1 + 2 * i, true, true), Cancel::Reset);
        }
        c
    }

    #[test]
    fn decisions() {
        // (what happens, the cancellations after a spent budget: (id, headless), expected)
        type Row = (&'static str, Vec<(u32, bool)>, Vec<Cancel>);
        let rows: Vec<Row> = vec![
            (
                "beyond the budget, a stream without its head is abandoned",
                vec![(21, true), (23, true)],
                vec![Cancel::Abandon, Cancel::Abandon],
            ),
            (
                "a stream whose head came was accepted: reset whatever the budget",
                vec![(21, false)],
                vec![Cancel::Reset],
            ),
        ];
        for (what, cancels, want) in rows {
            let mut c = spent();
            let got: Vec<Cancel> = cancels
                .iter()
                .map(|&(id, headless)| c.cancel(id, headless, true))
                .collect();
            assert_eq!(got, want, "{what}");
        }
    }

    #[test]
    fn an_answer_proves_every_stream_below_accepted() {
        // h2 takes streams in the order their HEADERS came: a head on 21 means 1..19 were
        // accepted, so their resets no longer count and the budget is whole again.
        let mut c = spent();
        assert_eq!(c.cancel(21, true, true), Cancel::Abandon);
        assert_eq!(c.cancel(23, true, true), Cancel::Abandon);
        assert_eq!(c.next_reset(), None, "no room yet");
        assert_eq!(c.answered(25, false), None, "25 was not abandoned");
        // Below the accepted 25: reset for free, lowest first.
        assert_eq!(c.next_reset(), Some(21));
        assert_eq!(c.next_reset(), Some(23));
        assert_eq!(c.next_reset(), None);
        assert!(
            c.is_clear(),
            "resets below an accepted stream are never counted"
        );
        // A stream at or below the accepted one is reset whatever the budget.
        for id in (27..).step_by(2).take(RESET_BUDGET) {
            assert_eq!(c.cancel(id, true, true), Cancel::Reset);
        }
        assert_eq!(c.cancel(5, true, true), Cancel::Reset);
    }

    #[test]
    fn an_abandoned_stream_answered_is_reset_or_forgotten() {
        let mut c = spent();
        c.cancel(21, true, false);
        c.cancel(23, true, true);
        // Its head: reset (our body had not ended).
        assert_eq!(c.answered(21, false), Some(false));
        // A Trailers-Only answer after our END_STREAM: closed both ways, no reset.
        assert_eq!(c.answered(23, true), Some(true));
        assert_eq!(c.abandoned(), 0);
        // The server's own reset, or its GOAWAY below it, forgets one too.
        let mut c = spent();
        c.cancel(21, true, true);
        c.cancel(23, true, true);
        assert!(c.reset_by_server(21));
        assert!(!c.reset_by_server(21));
        c.going_away(21);
        assert_eq!(c.abandoned(), 0);
    }

    #[test]
    fn abandoned_streams_are_bounded() {
        // At MAX_ABANDONED, or half the server's SETTINGS_MAX_CONCURRENT_STREAMS (RFC 9113
        // §5.1.2) when lower.
        let mut c = spent();
        for i in 0..MAX_ABANDONED as u32 {
            assert!(!c.too_many(u32::MAX));
            c.cancel(101 + 2 * i, true, true);
        }
        assert!(c.too_many(u32::MAX));
        let mut c = spent();
        c.cancel(101, true, true);
        assert!(!c.too_many(4));
        c.cancel(103, true, true);
        assert!(c.too_many(4));
    }
}
