//! A proxied request's body on its way up while it is still arriving: the client's
//! connection puts the decoded pieces in ([`PipeIn`], held by the application's pending
//! body), the upstream connection takes them out as its output has room ([`PipeOut`], held
//! by the driver's exchange). Both ends live on one worker thread.
//!
//! Invariant: a pipe holds at most [`PIPE_ROOM`] bytes plus the piece that filled it — the
//! client's connection stops reading when [`PipeIn::put`] says it is full, and the driver
//! wakes it when [`PipeOut::take`] made room. Either end dropped tells the other: the client
//! side's end without [`PipeIn::end`] is a failed body (the exchange is dropped), the
//! upstream side's end is an exchange that is over (pieces still coming are dropped).
#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::rc::Rc;

/// PIPE_ROOM: the most of a request body held between the client and the upstream before
/// the client's connection stops reading (its socket buffers and the upstream's hold the
/// rest, so a slow upstream slows the uploader instead of filling memory).
pub(crate) const PIPE_ROOM: usize = 64 * 1024;

#[derive(Default)]
struct State {
    buf: Vec<u8>,
    /// Bytes the upstream side has taken (once any is taken, the request cannot be tried
    /// again elsewhere: its body is gone).
    taken: u64,
    /// The client's body ended: what is in `buf` is the rest.
    ended: bool,
    /// The client's body failed or its connection went (the exchange must be dropped).
    failed: bool,
    /// The upstream side is gone (its exchange is over): pieces are dropped.
    closed: bool,
    /// The client's connection stopped reading for room.
    waiting: bool,
}

/// The client's end.
pub(crate) struct PipeIn(Rc<RefCell<State>>);

/// The upstream's end.
pub(crate) struct PipeOut(Rc<RefCell<State>>);

/// A new pipe's two ends.
pub(crate) fn pipe() -> (PipeIn, PipeOut) {
    let s = Rc::new(RefCell::new(State::default()));
    (PipeIn(s.clone()), PipeOut(s))
}

impl PipeIn {
    /// Puts a piece of the body in. `false`: the pipe is full, read no more until woken.
    pub(crate) fn put(&self, data: &[u8]) -> bool {
        let mut s = self.0.borrow_mut();
        if s.closed {
            return true; // nobody reads it: the rest of the body is read and dropped
        }
        s.buf.extend_from_slice(data);
        let room = s.buf.len() < PIPE_ROOM;
        s.waiting |= !room;
        room
    }

    /// Whether the client may send more now (after [`PipeIn::put`] said full, the driver's
    /// wake says when).
    pub(crate) fn has_room(&self) -> bool {
        let s = self.0.borrow();
        s.closed || s.buf.len() < PIPE_ROOM
    }

    /// The body ended whole.
    pub(crate) fn end(self) {
        self.0.borrow_mut().ended = true;
    }
}

impl Drop for PipeIn {
    fn drop(&mut self) {
        let mut s = self.0.borrow_mut();
        if !s.ended {
            s.failed = true;
            s.buf = Vec::new();
        }
    }
}

/// What [`PipeOut::take`] found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Taken {
    /// The body is all taken now.
    pub ended: bool,
    /// The client's body failed: drop the exchange.
    pub failed: bool,
    /// The client's connection waits for room, and there is room now: wake it.
    pub wake: bool,
}

impl PipeOut {
    /// Hands up to `max` bytes to `send`.
    pub(crate) fn take(&self, max: usize, send: impl FnOnce(&[u8])) -> Taken {
        let mut s = self.0.borrow_mut();
        if s.failed {
            return Taken {
                failed: true,
                ..Taken::default()
            };
        }
        let n = max.min(s.buf.len());
        if n > 0 {
            send(&s.buf[..n]);
            s.buf.drain(..n);
            s.taken += n as u64;
        }
        let wake = s.waiting && s.buf.len() < PIPE_ROOM;
        s.waiting &= !wake;
        Taken {
            ended: s.ended && s.buf.is_empty(),
            failed: false,
            wake,
        }
    }

    /// The client's body failed (it was refused, or the client went): drop the exchange.
    #[cfg_attr(not(feature = "http2"), allow(dead_code))]
    pub(crate) fn failed(&self) -> bool {
        self.0.borrow().failed
    }

    /// Bytes of the body handed on so far.
    pub(crate) fn taken(&self) -> u64 {
        self.0.borrow().taken
    }

    /// Whether bytes wait to be taken (or the end, or a failure, to be seen).
    pub(crate) fn ready(&self) -> bool {
        let s = self.0.borrow();
        !s.buf.is_empty() || s.ended || s.failed
    }
}

impl Drop for PipeOut {
    /// The exchange is over: what is held is dropped, and so is what still comes.
    fn drop(&mut self) {
        self.close();
    }
}

impl PipeOut {
    /// Ends the upstream side now; `true` when the client's connection waits for room and
    /// must be woken (it reads the rest of its body and drops it).
    pub(crate) fn close(&self) -> bool {
        let mut s = self.0.borrow_mut();
        s.closed = true;
        s.buf = Vec::new();
        std::mem::take(&mut s.waiting)
    }
}

impl std::fmt::Debug for PipeIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PipeIn")
    }
}

impl std::fmt::Debug for PipeOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PipeOut")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_waits_while_full_and_is_woken_once_room_is_made() {
        let (i, o) = pipe();
        assert!(i.put(&[1; PIPE_ROOM - 1]));
        assert!(!i.put(&[2; 10]), "full past PIPE_ROOM");
        assert!(!i.has_room());
        let mut got = Vec::new();
        assert!(!o.take(5, |d| got.extend_from_slice(d)).wake, "still full");
        let t = o.take(15, |d| got.extend_from_slice(d));
        assert_eq!(got, [1; 20]);
        assert!(t.wake, "under PIPE_ROOM again: the waiting client is woken");
        assert!(!o.take(0, |_| {}).wake, "woken once");
        assert_eq!(o.taken(), 20);
        i.end();
        let t = o.take(usize::MAX, |d| got.extend_from_slice(d));
        assert!(t.ended && !t.failed);
        assert_eq!(got.len(), PIPE_ROOM + 9);
    }

    #[test]
    fn a_client_side_dropped_before_its_end_is_a_failure() {
        let (i, o) = pipe();
        i.put(b"abc");
        drop(i);
        let t = o.take(usize::MAX, |_| panic!("a failed body is not sent on"));
        assert!(t.failed);
    }

    #[test]
    fn an_upstream_side_gone_drops_the_rest_and_wakes_a_waiting_client() {
        let (i, o) = pipe();
        assert!(!i.put(&[0; PIPE_ROOM]));
        assert!(o.close(), "the client waited");
        drop(o);
        assert!(i.has_room());
        assert!(i.put(&[0; PIPE_ROOM * 2]), "dropped, never full");
    }
}
