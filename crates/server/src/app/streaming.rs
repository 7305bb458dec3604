//! Response bodies produced over time: the [`BodyWriter`] a handler (or any thread, or a
//! future) writes with, and the [`StreamBody`] its response carries to the worker.
//!
//! Owns the channel between the two and its rules, not the framing: the worker hands each
//! piece to the connection's streamed-answer calls (`start_stream`, `stream_data`,
//! `stream_end`, `stream_abort`: chunked over HTTP/1.1, DATA over HTTP/2), the same calls a
//! proxied answer takes.
//!
//! - **Backpressure.** The channel holds at most [`STREAM_ROOM`] bytes plus one piece: a
//!   write past that is refused with [`WriteError::Full`] (the piece is not taken), and
//!   [`BodyWriter::wait_room`] (blocking) or [`BodyWriter::ready`] (async) waits until the
//!   worker took what was held. The worker takes only while the connection has room itself,
//!   so a slow client holds at most two such rooms per answer (this channel and the
//!   connection's own), whatever the writer does.
//! - **The end is explicit.** [`BodyWriter::end`] completes the body; [`BodyWriter::abort`],
//!   or dropping the writer without ending, cuts it off: HTTP/1.1 closes with the chunked
//!   framing incomplete, HTTP/2 resets the stream. A cut body never looks whole.
//! - **A client that leaves** (the connection closed, the stream reset, the answer dropped
//!   before it went out) makes every later write fail with [`WriteError::Gone`], and wakes a
//!   writer waiting for room.
//!
//! The writer wakes the worker through its inbox, once per batch as deferred answers do: a
//! channel already queued for the worker is not queued again.
#![forbid(unsafe_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use super::deferred::Inbox;
use super::response::{InvalidHeader, Trailers, check_trailer};

/// Bytes a streamed body's channel holds before writes are refused (the connection holds as
/// much again; see the module doc).
pub const STREAM_ROOM: usize = 64 * 1024;

/// Why a write was not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteError {
    /// The channel is full: wait for room ([`BodyWriter::wait_room`], [`BodyWriter::ready`])
    /// and write the piece again.
    Full,
    /// The answer is gone (the client left, the stream was reset, or the answer was never
    /// sent): stop producing it.
    Gone,
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WriteError::Full => "the streamed body is full; wait for room",
            WriteError::Gone => "the client is gone",
        })
    }
}

impl std::error::Error for WriteError {}

/// The answer is gone: nothing more will be sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gone;

impl std::fmt::Display for Gone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the client is gone")
    }
}

impl std::error::Error for Gone {}

/// How the writer finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Finish {
    Open,
    Ended,
    Aborted,
}

/// Where the worker waits for this channel's pieces: set when the answer's head is placed.
struct Link {
    inbox: Arc<Inbox>,
}

struct State {
    /// Bytes written and not yet taken by the worker.
    buf: Vec<u8>,
    finish: Finish,
    gone: bool,
    /// The worker has been told (the channel is in its inbox, or it holds it for a turn).
    queued: bool,
    link: Option<Link>,
    /// The connection's token and request id, once the head is placed.
    at: Option<(u64, u64)>,
    waker: Option<Waker>,
    /// Writers blocked on the condvar (`wait_room`, the `io::Write` impl): only then is it
    /// notified, since a notify costs a system call.
    blocked: u32,
    /// For keep-alive comments (SSE): when a piece was last written.
    last_write: Instant,
    /// Bytes the writer may still write, for a body of known length ([`channel_sized`]).
    owed: Option<u64>,
    /// The trailer fields the writer ended with ([`BodyWriter::end_with_trailers`]).
    trailers: Option<Box<Trailers>>,
    /// A reader other than the worker waiting for pieces (a native route's answer read by a
    /// tower layer, [`Chan::poll_take`]): woken where the worker would be told.
    reader: Option<Waker>,
}

impl State {
    /// Takes `n` bytes off what a body of known length owes; `false` when they are more than
    /// it owes (the body is then cut off: its length would lie).
    fn owe(&mut self, n: usize) -> bool {
        match &mut self.owed {
            Some(owed) if n as u64 > *owed => {
                self.finish = Finish::Aborted;
                false
            }
            Some(owed) => {
                *owed -= n as u64;
                true
            }
            None => true,
        }
    }
}

/// The channel between a [`BodyWriter`] and the worker.
pub(crate) struct Chan {
    state: Mutex<State>,
    room: Condvar,
}

impl Chan {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends `data` when there is room; queues the channel for its worker.
    pub(crate) fn write(self: &Arc<Self>, data: &[u8]) -> Result<(), WriteError> {
        let mut s = self.lock();
        if s.gone || s.finish != Finish::Open {
            return Err(WriteError::Gone);
        }
        if s.buf.len() >= STREAM_ROOM {
            return Err(WriteError::Full);
        }
        if !s.owe(data.len()) {
            self.notify(s);
            return Err(WriteError::Gone);
        }
        s.buf.extend_from_slice(data);
        s.last_write = Instant::now();
        self.notify(s);
        Ok(())
    }

    /// Tells the worker there is something to take (once until it takes it).
    fn notify(self: &Arc<Self>, mut s: MutexGuard<'_, State>) {
        if s.queued {
            return;
        }
        let Some(link) = &s.link else {
            // Not placed yet: the worker takes what is here when it places the head; a
            // reader of its own is woken instead.
            if let Some(w) = s.reader.take() {
                drop(s);
                w.wake();
            }
            return;
        };
        let inbox = link.inbox.clone();
        s.queued = true;
        drop(s);
        inbox.push_stream(self.clone());
    }

    fn finish(self: &Arc<Self>, how: Finish) {
        let mut s = self.lock();
        if s.finish != Finish::Open {
            return;
        }
        // A body of known length ended short is cut off: its length would lie.
        s.finish = match how {
            Finish::Ended if s.owed.is_some_and(|n| n > 0) => Finish::Aborted,
            how => how,
        };
        self.notify(s);
    }

    /// Ends the channel (what [`BodyWriter::end`] does) without consuming a writer.
    #[cfg_attr(not(feature = "websocket"), allow(dead_code))]
    pub(crate) fn end_now(self: &Arc<Self>) {
        self.finish(Finish::Ended);
    }

    /// The worker: the answer's head is placed; pieces now go to `inbox`'s worker.
    pub(crate) fn link(&self, inbox: Arc<Inbox>, token: u64, id: u64) {
        let mut s = self.lock();
        s.at = Some((token, id));
        s.link = Some(Link { inbox });
        s.queued = true; // the worker pumps it right after placing the head
    }

    /// Has the worker visit the connection with nothing to take (a WebSocket handler that
    /// paused reading may read again: the visit asks it).
    #[cfg_attr(not(feature = "websocket"), allow(dead_code))]
    pub(crate) fn poke(self: &Arc<Self>) {
        let s = self.lock();
        self.notify(s);
    }

    /// The worker: as [`Chan::link`], for a channel nobody pumps at once (a WebSocket
    /// connection's sender): its first write tells the worker.
    #[cfg_attr(not(feature = "websocket"), allow(dead_code))]
    pub(crate) fn attach(&self, inbox: Arc<Inbox>, token: u64, id: u64) {
        let mut s = self.lock();
        s.at = Some((token, id));
        s.link = Some(Link { inbox });
    }

    /// The worker: the connection and request this channel feeds.
    pub(crate) fn at(&self) -> Option<(u64, u64)> {
        self.lock().at
    }

    /// The worker: hands what was written to `put` (under the channel's lock: a copy into the
    /// connection's output, so the buffer is kept for the next pieces and nothing is
    /// allocated per piece), empties it, and wakes a writer waiting for room. Returns what
    /// `put` returned and how the writer finished.
    pub(crate) fn drain(&self, put: impl FnOnce(&[u8]) -> bool) -> (bool, Finish) {
        let mut s = self.lock();
        s.queued = false;
        let taken = put(&s.buf);
        if s.buf.capacity() > 2 * STREAM_ROOM {
            s.buf = Vec::new(); // a large piece passed: do not keep its memory
        } else {
            s.buf.clear();
        }
        let finish = s.finish;
        self.wake_writer(s);
        (taken, finish)
    }

    /// Wakes a writer waiting for room: a blocked thread (the condvar is notified only then,
    /// since a notify costs a system call) and a waiting future.
    fn wake_writer(&self, mut s: MutexGuard<'_, State>) {
        let waker = s.waker.take();
        let blocked = s.blocked > 0;
        drop(s);
        if blocked {
            self.room.notify_all();
        }
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// A reader that is not the worker (the tower adapter, `tower_native.rs`): what was
    /// written since the last take (the writer woken for more), `Ready(None)` once it ended
    /// with nothing left, `Ready(Some(Err))` when it was cut off; otherwise `cx` is woken at
    /// the next write or end. Never linked to a worker, so every piece comes here.
    #[cfg_attr(not(feature = "tower"), allow(dead_code))]
    pub(crate) fn poll_take(&self, cx: &mut Context<'_>) -> Poll<Option<Result<Vec<u8>, Finish>>> {
        let mut s = self.lock();
        if !s.buf.is_empty() {
            let piece = std::mem::take(&mut s.buf);
            self.wake_writer(s);
            return Poll::Ready(Some(Ok(piece)));
        }
        match s.finish {
            Finish::Ended => Poll::Ready(None),
            Finish::Aborted => Poll::Ready(Some(Err(Finish::Aborted))),
            Finish::Open => {
                s.reader = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    /// The worker: the trailer fields the body ended with, once it ended.
    pub(crate) fn take_trailers(&self) -> Option<Box<Trailers>> {
        self.lock().trailers.take()
    }

    /// The worker: whether there is something to take (bytes, or the end).
    pub(crate) fn pending(&self) -> bool {
        let s = self.lock();
        !s.buf.is_empty() || s.finish != Finish::Open
    }

    /// The worker (or a dropped body): the answer is gone. Wakes a waiting writer.
    pub(crate) fn gone(&self) {
        let mut s = self.lock();
        s.gone = true;
        s.buf = Vec::new();
        self.wake_writer(s);
    }

    /// Whether the writer wrote nothing for `idle` and the answer is still open: a keep-alive
    /// comment is due.
    pub(crate) fn idle_for(&self, idle: Duration) -> bool {
        let s = self.lock();
        !s.gone && s.finish == Finish::Open && s.last_write.elapsed() >= idle
    }

    /// Whether the answer is over (gone, or its writer finished).
    pub(crate) fn over(&self) -> bool {
        let s = self.lock();
        s.gone || s.finish != Finish::Open
    }
}

/// Makes a streamed body: the [`StreamBody`] goes in the response
/// ([`Body::Stream`](crate::Body::Stream)), the [`BodyWriter`] to whoever produces it.
pub fn channel() -> (StreamBody, BodyWriter) {
    channel_of(None)
}

/// [`channel`] for a body whose length is known before it comes: the answer says it
/// (`Content-Length`, also to a HEAD request) instead of chunking. The writer must write
/// exactly `length` bytes: a body ended short is cut off, and bytes past it are not sent.
pub fn channel_sized(length: u64) -> (StreamBody, BodyWriter) {
    channel_of(Some(length))
}

fn channel_of(length: Option<u64>) -> (StreamBody, BodyWriter) {
    let chan = Arc::new(Chan {
        state: Mutex::new(State {
            buf: Vec::new(),
            finish: Finish::Open,
            gone: false,
            queued: false,
            link: None,
            at: None,
            waker: None,
            blocked: 0,
            last_write: Instant::now(),
            owed: length,
            trailers: None,
            reader: None,
        }),
        room: Condvar::new(),
    });
    let claim = Claim {
        chan: chan.clone(),
        taken: AtomicBool::new(false),
        length,
    };
    (StreamBody(Arc::new(claim)), BodyWriter { chan })
}

/// The receiving end of a streamed body, carried by a response. Clones share one claim on
/// the channel: the response sent first takes it, and when the last clone is dropped with
/// none sent, the writer learns the answer is gone. Its drop is an `Arc`'s (a decrement),
/// so dropping any other [`Body`](crate::Body) stays cheap: a drop with its own logic,
/// inlined into every answer's, grew it by 6 instructions (callgrind, pipelined /plaintext).
#[derive(Clone)]
pub struct StreamBody(Arc<Claim>);

/// What the clones of a [`StreamBody`] share.
struct Claim {
    chan: Arc<Chan>,
    taken: AtomicBool,
    /// The body's length, when known before it comes ([`channel_sized`]).
    length: Option<u64>,
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !*self.taken.get_mut() {
            self.chan.gone();
        }
    }
}

impl StreamBody {
    /// The worker takes the channel; `None` if a clone of this body already went out.
    pub(crate) fn adopt(&self) -> Option<Arc<Chan>> {
        (!self.0.taken.swap(true, Ordering::AcqRel)).then(|| self.0.chan.clone())
    }

    /// The body's length, when known before it comes ([`channel_sized`]).
    pub fn length(&self) -> Option<u64> {
        self.0.length
    }
}

impl std::fmt::Debug for StreamBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StreamBody")
    }
}

/// Writes a streamed body from any thread. `Send` and `Sync`: keep it in a set of
/// subscribers, move it into a thread or a future. Dropping it without
/// [`end`](BodyWriter::end) cuts the body off (see [`abort`](BodyWriter::abort)).
pub struct BodyWriter {
    chan: Arc<Chan>,
}

impl BodyWriter {
    /// Writes a piece, whole, when the channel has room; [`WriteError::Full`] leaves it
    /// untaken. A piece of any size is taken while there is room, so keep pieces modest
    /// (the [`std::io::Write`] impl splits large ones).
    pub fn write(&self, data: impl AsRef<[u8]>) -> Result<(), WriteError> {
        self.chan.write(data.as_ref())
    }

    /// Blocks until the channel has room (or the answer is gone).
    pub fn wait_room(&self) -> Result<(), Gone> {
        let mut s = self.chan.lock();
        loop {
            if s.gone || s.finish != Finish::Open {
                return Err(Gone);
            }
            if s.buf.len() < STREAM_ROOM {
                return Ok(());
            }
            s.blocked += 1;
            s = self.chan.room.wait(s).unwrap_or_else(|e| e.into_inner());
            s.blocked -= 1;
        }
    }

    /// Waits, without blocking a thread, until the channel has room (or the answer is gone).
    pub fn ready(&self) -> Ready<'_> {
        Ready { chan: &self.chan }
    }

    /// Writes a piece once there is room (async).
    pub async fn send(&self, data: impl AsRef<[u8]>) -> Result<(), Gone> {
        let data = data.as_ref();
        loop {
            self.ready().await?;
            match self.chan.write(data) {
                Ok(()) => return Ok(()),
                Err(WriteError::Full) => continue,
                Err(WriteError::Gone) => return Err(Gone),
            }
        }
    }

    /// Whether the answer is gone (nothing written from now on will be sent).
    pub fn is_gone(&self) -> bool {
        self.chan.lock().gone
    }

    /// Waits until the answer is gone (the client left, or the worker dropped the body): for
    /// a writer with nothing to write now that must still notice a departed client (gRPC's
    /// health Watch).
    #[cfg_attr(not(feature = "grpc"), allow(dead_code))]
    pub(crate) fn gone(&self) -> GoneWait<'_> {
        GoneWait { chan: &self.chan }
    }

    /// Completes the body: what was written goes out, then the end (the last chunk, or
    /// END_STREAM).
    pub fn end(self) {
        self.chan.finish(Finish::Ended);
    }

    /// Completes the body with trailer fields after it (RFC 9110 §6.5): after the last
    /// chunk over HTTP/1.1, a HEADERS frame after the last DATA over HTTP/2 and HTTP/3.
    /// An HTTP/1.0 client and a body of known length over HTTP/1.1
    /// ([`Response::stream_sized`](crate::Response::stream_sized), sent with
    /// `Content-Length`) get the body without them. A field that is invalid or may not be a
    /// trailer ([`Response::try_trailer`](crate::Response::try_trailer)'s rule) cuts the body
    /// off instead (as [`BodyWriter::abort`]: the head is out, so no 500 can replace it) and
    /// is returned as the error.
    ///
    /// ```
    /// use std::borrow::Cow;
    /// use linerate_server::Response;
    /// let (resp, body) = Response::new(200).content_type("application/grpc").stream();
    /// body.write(b"\0\0\0\0\0").unwrap();
    /// body.end_with_trailers(vec![(Cow::Borrowed("grpc-status"), Cow::Borrowed("0"))])
    ///     .unwrap();
    /// # drop(resp);
    /// ```
    pub fn end_with_trailers(self, trailers: Trailers) -> Result<(), InvalidHeader> {
        if let Some((name, _)) = trailers.iter().find(|(n, v)| check_trailer(n, v).is_err()) {
            tracing::error!(%name, "streamed body ended with a field that may not be a trailer; cut off");
            self.chan.finish(Finish::Aborted);
            return Err(InvalidHeader);
        }
        if !trailers.is_empty() {
            let mut s = self.chan.lock();
            if s.finish == Finish::Open {
                s.trailers = Some(Box::new(trailers));
            }
        }
        self.chan.finish(Finish::Ended);
        Ok(())
    }

    /// Cuts the body off: what was written goes out, then the connection closes (HTTP/1.1)
    /// or the stream is reset (HTTP/2), so the client cannot take it for whole.
    pub fn abort(self) {
        self.chan.finish(Finish::Aborted);
    }

    pub(crate) fn chan(&self) -> &Arc<Chan> {
        &self.chan
    }
}

impl Drop for BodyWriter {
    fn drop(&mut self) {
        self.chan.finish(Finish::Aborted);
    }
}

impl std::fmt::Debug for BodyWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BodyWriter")
            .field("gone", &self.is_gone())
            .finish()
    }
}

/// Blocking writes, for `std::io::copy`, `serde_json::to_writer` and the like: a write waits
/// for room and takes at most what fits, so a large source never sits whole in memory. A
/// gone client is [`std::io::ErrorKind::BrokenPipe`].
impl std::io::Write for BodyWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        let mut s = self.chan.lock();
        loop {
            if s.gone || s.finish != Finish::Open {
                return Err(std::io::ErrorKind::BrokenPipe.into());
            }
            let room = STREAM_ROOM.saturating_sub(s.buf.len());
            if room > 0 {
                let n = room.min(data.len());
                if !s.owe(n) {
                    self.chan.notify(s);
                    return Err(std::io::ErrorKind::InvalidInput.into());
                }
                s.buf.extend_from_slice(&data[..n]);
                s.last_write = Instant::now();
                self.chan.notify(s);
                return Ok(n);
            }
            s.blocked += 1;
            s = self.chan.room.wait(s).unwrap_or_else(|e| e.into_inner());
            s.blocked -= 1;
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The future of [`BodyWriter::ready`].
pub struct Ready<'a> {
    chan: &'a Arc<Chan>,
}

impl Future for Ready<'_> {
    type Output = Result<(), Gone>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut s = self.chan.lock();
        if s.gone || s.finish != Finish::Open {
            return Poll::Ready(Err(Gone));
        }
        if s.buf.len() < STREAM_ROOM {
            return Poll::Ready(Ok(()));
        }
        s.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// The future of `BodyWriter::gone`. It shares the writer's one waker slot with [`Ready`]:
/// both are the writer's own task, which polls one or the other.
#[cfg_attr(not(feature = "grpc"), allow(dead_code))]
pub(crate) struct GoneWait<'a> {
    chan: &'a Arc<Chan>,
}

impl Future for GoneWait<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = self.chan.lock();
        if s.gone {
            return Poll::Ready(());
        }
        s.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    /// What the worker would copy out, and how the writer finished.
    fn take(chan: &Chan) -> (Vec<u8>, Finish) {
        let mut out = Vec::new();
        let (_, finish) = chan.drain(|d| {
            out.extend_from_slice(d);
            true
        });
        (out, finish)
    }

    fn linked() -> (
        StreamBody,
        BodyWriter,
        Arc<Inbox>,
        Arc<std::sync::atomic::AtomicUsize>,
    ) {
        let wakes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let w = wakes.clone();
        let inbox = Arc::new(Inbox::new(Box::new(move || {
            w.fetch_add(1, Ordering::SeqCst);
        })));
        let (body, writer) = channel();
        let chan = body.adopt().unwrap();
        chan.link(inbox.clone(), 7, 1);
        chan.drain(|_| true); // the worker's pump after placing the head
        (body, writer, inbox, wakes)
    }

    #[test]
    fn writes_queue_the_channel_once_per_batch_and_fill_up_to_the_room() {
        let (_body, w, inbox, wakes) = linked();
        w.write(b"one").unwrap();
        w.write(b"two").unwrap();
        assert_eq!(wakes.load(Ordering::SeqCst), 1);
        let mut got = Vec::new();
        inbox.take_streams(&mut got);
        assert_eq!(got.len(), 1);
        let (data, finish) = take(&got[0]);
        assert_eq!(data, b"onetwo");
        assert_eq!(finish, Finish::Open);
        // One piece may pass the room; the next is refused and left untaken.
        w.write(vec![0u8; STREAM_ROOM + 10]).unwrap();
        assert_eq!(w.write(b"x"), Err(WriteError::Full));
        let (data, _) = take(&got[0]);
        assert_eq!(data.len(), STREAM_ROOM + 10);
        w.write(b"x").unwrap();
    }

    #[test]
    fn a_body_of_known_length_is_cut_off_when_it_ends_short_or_runs_over() {
        let linked_sized = |n| {
            let (body, w) = channel_sized(n);
            assert_eq!(body.length(), Some(n));
            let chan = body.adopt().unwrap();
            (body, w, chan)
        };
        let (_b, w, chan) = linked_sized(6);
        w.write(b"abc").unwrap();
        w.write(b"def").unwrap();
        w.end();
        assert_eq!(take(&chan), (b"abcdef".to_vec(), Finish::Ended));
        let (_b, w, chan) = linked_sized(6);
        w.write(b"abc").unwrap();
        w.end();
        assert_eq!(take(&chan), (b"abc".to_vec(), Finish::Aborted), "short");
        let (_b, w, chan) = linked_sized(4);
        w.write(b"abc").unwrap();
        assert_eq!(w.write(b"de"), Err(WriteError::Gone), "past the length");
        assert_eq!(take(&chan), (b"abc".to_vec(), Finish::Aborted));
        assert_eq!(channel().0.length(), None);
    }

    #[test]
    fn a_dropped_writer_aborts_and_end_is_explicit() {
        let (_b, w, inbox, _) = linked();
        w.write(b"part").unwrap();
        drop(w);
        let mut got = Vec::new();
        inbox.take_streams(&mut got);
        assert_eq!(take(&got[0]), (b"part".to_vec(), Finish::Aborted));
        let (_b, w, inbox, _) = linked();
        w.end();
        let mut got = Vec::new();
        inbox.take_streams(&mut got);
        assert_eq!(take(&got[0]).1, Finish::Ended);
    }

    #[test]
    fn a_body_dropped_before_it_went_out_makes_the_writer_see_gone() {
        let (body, w) = channel();
        let copy = body.clone();
        drop(body);
        assert!(!w.is_gone(), "a clone still holds the answer");
        drop(copy);
        assert!(w.is_gone());
        assert_eq!(w.write(b"x"), Err(WriteError::Gone));
    }

    #[test]
    fn waiting_for_gone_wakes_when_the_answer_is_gone() {
        struct Flag(std::sync::atomic::AtomicBool);
        impl std::task::Wake for Flag {
            fn wake(self: Arc<Self>) {
                self.0.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let (body, w) = channel();
        let chan = body.adopt().unwrap();
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        let mut wait = std::pin::pin!(w.gone());
        // Room and writes do not end the wait; only the answer's end does.
        assert!(wait.as_mut().poll(&mut cx).is_pending());
        w.write(b"x").unwrap();
        assert!(wait.as_mut().poll(&mut cx).is_pending());
        chan.gone();
        assert!(flag.0.load(std::sync::atomic::Ordering::SeqCst), "woken");
        assert!(wait.as_mut().poll(&mut cx).is_ready());
    }

    #[test]
    fn a_waiting_writer_wakes_when_the_worker_takes_or_the_client_leaves() {
        let (body, mut w) = channel();
        let chan = body.adopt().unwrap();
        let big = vec![1u8; STREAM_ROOM * 3];
        let t = std::thread::spawn(move || {
            let r = w.write_all(&big);
            (r.map_err(|e| e.kind()), w)
        });
        let mut taken = 0;
        while taken < STREAM_ROOM * 2 {
            let (d, _) = take(&chan);
            assert!(
                d.len() <= STREAM_ROOM,
                "the io::Write impl splits to the room"
            );
            taken += d.len();
            std::thread::yield_now();
        }
        chan.gone();
        let (r, w) = t.join().unwrap();
        // Either it finished before the gone, or it learned it.
        if r.is_err() {
            assert_eq!(r, Err(std::io::ErrorKind::BrokenPipe));
        }
        assert!(w.wait_room().is_err());
    }
}
