//! A request body on its way from its connection to a handler that runs elsewhere (a future
//! on a runtime, a thread): the connection puts the decoded pieces in as they arrive
//! (`Feed`, held by the request's pending body), the handler takes them out
//! ([`IncomingBody`], `Send`), before the client has sent the rest.
//!
//! Owns the hand-off and its backpressure, not the framing (the connections decode it). At
//! most [`INCOMING_ROOM`] bytes plus one piece are held: past that the connection reads no
//! more of the body (`Service::room`), and the handler's next take asks its worker, through
//! the inbox, to read again. Either end dropped tells the other: the connection's end dropped
//! before `Feed::end` is a body cut off (the handler sees [`BodyError`]), the handler's
//! end dropped makes the connection read the rest and throw it away.
#![forbid(unsafe_code)]

use std::future::poll_fn;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::{Bytes, BytesMut};

use super::deferred::Inbox;

/// Bytes of a request body held for its handler before the connection stops reading it (the
/// socket's buffers and the client hold the rest, so a slow handler slows the uploader
/// instead of filling memory).
pub const INCOMING_ROOM: usize = 64 * 1024;

/// A trailer field: name and value, as the client sent them.
pub type Trailer = (Box<[u8]>, Box<[u8]>);

/// Why a request body stopped before its end: the client left, its framing was malformed,
/// or it outgrew the body limit (the connection answered that itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyError;

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body was cut off")
    }
}

impl std::error::Error for BodyError {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Open,
    Ended,
    Failed,
}

/// Where the connection waits for room: its worker's inbox and the request.
struct Link {
    inbox: Arc<Inbox>,
    token: u64,
    id: u64,
}

struct State {
    buf: BytesMut,
    end: End,
    /// The handler's end is gone: pieces are dropped.
    dropped: bool,
    /// The connection stopped reading for room and waits to be told.
    held: bool,
    waker: Option<Waker>,
    link: Option<Link>,
    /// The body's trailer fields (a chunked body's), from its end until taken.
    trailers: Vec<Trailer>,
    /// The length the request declared (Content-Length), and what came so far.
    declared: Option<u64>,
    received: u64,
}

struct Shared(Mutex<State>);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes the handler's task, if it waits.
    fn wake(mut s: MutexGuard<'_, State>) {
        let waker = s.waker.take();
        drop(s);
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// The connection held the body for room, and now has some: tell its worker.
    fn release(mut s: MutexGuard<'_, State>) {
        if !s.held {
            return;
        }
        s.held = false;
        let link = s.link.as_ref().map(|l| (l.inbox.clone(), l.token, l.id));
        drop(s);
        if let Some((inbox, token, id)) = link {
            inbox.push_room(token, id);
        }
    }
}

/// A new body's two ends: `declared` is the request's Content-Length, if it has one;
/// `link` is where a held connection is told it may read again (`None` for a body that came
/// whole with the head).
pub(crate) fn incoming(
    declared: Option<u64>,
    link: Option<(Arc<Inbox>, u64, u64)>,
) -> (Feed, IncomingBody) {
    let shared = Arc::new(Shared(Mutex::new(State {
        buf: BytesMut::new(),
        end: End::Open,
        dropped: false,
        held: false,
        waker: None,
        link: link.map(|(inbox, token, id)| Link { inbox, token, id }),
        trailers: Vec::new(),
        declared,
        received: 0,
    })));
    (Feed(shared.clone()), IncomingBody(shared))
}

/// The connection's end.
pub(crate) struct Feed(Arc<Shared>);

impl Feed {
    /// Puts a piece of the body in (dropped when the handler's end is gone).
    pub(crate) fn put(&self, data: &[u8]) {
        let mut s = self.0.lock();
        s.received += data.len() as u64;
        if s.dropped {
            return;
        }
        s.buf.extend_from_slice(data);
        Shared::wake(s);
    }

    /// Whether the connection may read more now; `false` marks it held until the handler
    /// takes what is here.
    pub(crate) fn has_room(&self) -> bool {
        let mut s = self.0.lock();
        let room = s.dropped || s.buf.len() < INCOMING_ROOM;
        s.held |= !room;
        room
    }

    /// The body ended whole, with `trailers` (name, value) after it.
    pub(crate) fn end<'t>(self, trailers: impl Iterator<Item = (&'t [u8], &'t [u8])>) {
        let mut s = self.0.lock();
        s.end = End::Ended;
        s.trailers = trailers.map(|(n, v)| (n.into(), v.into())).collect();
        Shared::wake(s);
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        let mut s = self.0.lock();
        if s.end == End::Open {
            s.end = End::Failed;
            Shared::wake(s);
        }
    }
}

/// A request body that arrives while its handler runs: take it piece by piece with
/// [`chunk`](IncomingBody::chunk) (or [`poll_chunk`](IncomingBody::poll_chunk)). Each take
/// empties what the connection held, so the client sends more only as the handler takes it.
/// Dropping it before the end makes the connection read the rest and throw it away.
pub struct IncomingBody(Arc<Shared>);

impl IncomingBody {
    /// The next piece (what arrived since the last take, joined), `None` at the end, or
    /// [`BodyError`] when the body was cut off.
    pub fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, BodyError>>> {
        let mut s = self.0.lock();
        if !s.buf.is_empty() {
            let piece = s.buf.split().freeze();
            Shared::release(s);
            return Poll::Ready(Some(Ok(piece)));
        }
        match s.end {
            End::Ended => Poll::Ready(None),
            End::Failed => Poll::Ready(Some(Err(BodyError))),
            End::Open => {
                if !s.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    s.waker = Some(cx.waker().clone());
                }
                // Held with nothing left here (a piece of exactly the room): read on.
                Shared::release(s);
                Poll::Pending
            }
        }
    }

    /// The next piece, `None` at the end, or [`BodyError`] when the body was cut off.
    pub async fn chunk(&mut self) -> Option<Result<Bytes, BodyError>> {
        poll_fn(|cx| self.poll_chunk(cx)).await
    }

    /// Whether the body is over and taken (nothing more will come, trailers included).
    pub fn is_end(&self) -> bool {
        let s = self.0.lock();
        s.buf.is_empty() && s.end == End::Ended && s.trailers.is_empty()
    }

    /// The trailer fields (name, value) that ended a chunked body, once
    /// [`poll_chunk`](IncomingBody::poll_chunk) said the end: taken once (empty before the
    /// end, and for a body without any).
    pub fn take_trailers(&mut self) -> Vec<Trailer> {
        let mut s = self.0.lock();
        if s.end == End::Ended && s.buf.is_empty() {
            std::mem::take(&mut s.trailers)
        } else {
            Vec::new()
        }
    }

    /// The bytes still to come when the request declared its length (Content-Length).
    pub fn remaining(&self) -> Option<u64> {
        let s = self.0.lock();
        s.declared
            .map(|d| d.saturating_sub(s.received) + s.buf.len() as u64)
    }
}

impl IncomingBody {
    /// Whether the whole body has come in (or was cut off): the connection has no more of it
    /// to read, taken by the handler or not.
    pub(crate) fn arrived(&self) -> bool {
        self.0.lock().end != End::Open
    }
}

impl Drop for IncomingBody {
    fn drop(&mut self) {
        let mut s = self.0.lock();
        s.dropped = true;
        s.buf = BytesMut::new();
        s.waker = None;
        Shared::release(s);
    }
}

impl std::fmt::Debug for IncomingBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IncomingBody")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn poll(body: &mut IncomingBody, w: &Arc<Count>) -> Poll<Option<Result<Bytes, BodyError>>> {
        let waker = Waker::from(w.clone());
        body.poll_chunk(&mut Context::from_waker(&waker))
    }

    #[test]
    fn pieces_arrive_before_the_end_and_wake_the_waiting_handler() {
        let (feed, mut body) = incoming(Some(6), None);
        let w = Arc::new(Count(AtomicUsize::new(0)));
        assert!(poll(&mut body, &w).is_pending());
        feed.put(b"abc");
        assert_eq!(w.0.load(Ordering::SeqCst), 1);
        assert_eq!(body.remaining(), Some(6));
        assert_eq!(
            poll(&mut body, &w),
            Poll::Ready(Some(Ok(Bytes::from("abc"))))
        );
        assert_eq!(body.remaining(), Some(3));
        feed.put(b"de");
        feed.put(b"f");
        let trailers: [(&[u8], &[u8]); 1] = [(b"checksum", b"abc")];
        feed.end(trailers.into_iter());
        assert!(
            body.take_trailers().is_empty(),
            "not before the data is taken"
        );
        assert_eq!(
            poll(&mut body, &w),
            Poll::Ready(Some(Ok(Bytes::from("def"))))
        );
        assert_eq!(poll(&mut body, &w), Poll::Ready(None));
        assert!(!body.is_end(), "its trailers are still to take");
        let t = body.take_trailers();
        assert_eq!(t.len(), 1);
        assert_eq!((&*t[0].0, &*t[0].1), (&b"checksum"[..], &b"abc"[..]));
        assert!(body.is_end());
        assert!(body.take_trailers().is_empty(), "taken once");
    }

    #[test]
    fn a_feed_dropped_before_the_end_is_a_cut_off_body() {
        let (feed, mut body) = incoming(None, None);
        let w = Arc::new(Count(AtomicUsize::new(0)));
        feed.put(b"part");
        drop(feed);
        assert_eq!(
            poll(&mut body, &w),
            Poll::Ready(Some(Ok(Bytes::from("part"))))
        );
        assert_eq!(poll(&mut body, &w), Poll::Ready(Some(Err(BodyError))));
    }

    #[test]
    fn a_full_body_holds_the_connection_until_the_handler_takes_and_then_wakes_its_worker() {
        let wakes = Arc::new(AtomicUsize::new(0));
        let c = wakes.clone();
        let inbox = Arc::new(Inbox::new(Box::new(move || {
            c.fetch_add(1, Ordering::SeqCst);
        })));
        let (feed, mut body) = incoming(None, Some((inbox.clone(), 7, 3)));
        feed.put(&[0; INCOMING_ROOM - 1]);
        assert!(feed.has_room());
        feed.put(&[0; 2]);
        assert!(
            !feed.has_room(),
            "one piece may pass the room, then it is full"
        );
        assert_eq!(wakes.load(Ordering::SeqCst), 0);
        let w = Arc::new(Count(AtomicUsize::new(0)));
        let Poll::Ready(Some(Ok(piece))) = poll(&mut body, &w) else {
            panic!("a piece is there")
        };
        assert_eq!(piece.len(), INCOMING_ROOM + 1);
        assert_eq!(wakes.load(Ordering::SeqCst), 1, "the worker is told once");
        let mut rooms = Vec::new();
        inbox.take_rooms(&mut rooms);
        assert_eq!(rooms, [(7, 3)]);
        assert!(feed.has_room());
        // Not held: a take tells nobody.
        rooms.clear();
        feed.put(b"x");
        let _ = poll(&mut body, &w);
        inbox.take_rooms(&mut rooms);
        assert!(rooms.is_empty());
    }

    #[test]
    fn a_dropped_handler_end_releases_a_held_connection_and_drops_what_comes() {
        let inbox = Arc::new(Inbox::new(Box::new(|| {})));
        let (feed, body) = incoming(None, Some((inbox.clone(), 1, 1)));
        feed.put(&[0; INCOMING_ROOM]);
        assert!(!feed.has_room());
        drop(body);
        let mut rooms = Vec::new();
        inbox.take_rooms(&mut rooms);
        assert_eq!(rooms, [(1, 1)]);
        feed.put(&[0; INCOMING_ROOM * 2]);
        assert!(
            feed.has_room(),
            "nobody reads it: the rest is read and dropped"
        );
    }
}
