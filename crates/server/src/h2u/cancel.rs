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
