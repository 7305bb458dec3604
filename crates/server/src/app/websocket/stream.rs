//! The async variant of a WebSocket route: a connection served by a future on the
//! application's runtime. [`stream`] makes a pair: the [`StreamHandler`], which the accept
//! function hands to the server, queues each message on the worker; the [`WsStream`], which
//! the application moves into a task, awaits them ([`WsStream::recv`]) and sends
//! ([`WsStream::send`], waiting for room: backpressure reaches the task).
//!
//! The queue between them is bounded ([`MAX_INBOUND_BYTES`] by default): once it holds that
//! much, the handler says it is paused and the server stops reading from the client, until
//! the task takes messages and the queue is under its limit again ([`WsSender::resume`]).
//! What was read in the same read still arrives, so the queue can pass its limit by one
//! read's messages.
//!
//! ```no_run
//! use linerate_server::websocket::{self, WsStream};
//! use linerate_server::Router;
//!
//! async fn echo(mut ws: WsStream) {
//!     while let Some(msg) = ws.recv().await {
//!         if ws.send(msg.as_message()).await.is_err() {
//!             break;
//!         }
//!     }
//! }
//!
//! let rt = tokio::runtime::Runtime::new().unwrap();
//! let spawn = rt.handle().clone();
//! let router = Router::new().ws("/ws", move |_req, _handshake| {
//!     let (handler, ws) = websocket::stream();
//!     spawn.spawn(echo(ws));
//!     Ok(handler)
//! });
//! # drop(router);
//! ```
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Waker};

use super::{Message, WsHandler, WsOut, WsSender};
use crate::streaming::{Gone, WriteError};

/// Bytes of messages a [`WsStream`] holds untaken before the server stops reading from its
/// client (64 KiB, as much as a [`WsSender`] holds the other way).
pub const MAX_INBOUND_BYTES: usize = 64 << 10;

/// A whole message from the client, owned (it outlives the worker's buffer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OwnedMessage {
    Text(String),
    Binary(Vec<u8>),
}

impl OwnedMessage {
    /// The message borrowed, as a handler on the worker sees it.
    pub fn as_message(&self) -> Message<'_> {
        match self {
            OwnedMessage::Text(t) => Message::Text(t),
            OwnedMessage::Binary(b) => Message::Binary(b),
        }
    }

    fn len(&self) -> usize {
        match self {
            OwnedMessage::Text(t) => t.len(),
            OwnedMessage::Binary(b) => b.len(),
        }
    }
}

impl From<Message<'_>> for OwnedMessage {
    fn from(msg: Message<'_>) -> OwnedMessage {
        match msg {
            Message::Text(t) => OwnedMessage::Text(t.to_owned()),
            Message::Binary(b) => OwnedMessage::Binary(b.to_vec()),
        }
    }
}

/// What the two halves share.
struct Shared {
    state: Mutex<State>,
    /// The queue holds its limit or more: read by the worker on every flush of the
    /// connection, so an atomic rather than the lock.
    full: AtomicBool,
    limit: usize,
}

#[derive(Default)]
struct State {
    queue: VecDeque<OwnedMessage>,
    bytes: usize,
    /// The connection's sender, from its opening on.
    sender: Option<WsSender>,
    /// The connection ended, with the client's close code (`None`: none).
    ended: Option<Option<u16>>,
    /// Futures waiting for a message, the opening, or the end.
    waiting: Vec<Waker>,
    /// The [`WsStream`] was dropped: the application is done with the connection.
    dropped: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes every waiting future (after the lock is let go).
    fn wake(&self, mut s: MutexGuard<'_, State>) {
        let waiting = std::mem::take(&mut s.waiting);
        drop(s);
        for w in waiting {
            w.wake();
        }
    }

    fn wait(s: &mut State, waker: &Waker) {
        if !s.waiting.iter().any(|w| w.will_wake(waker)) {
            s.waiting.push(waker.clone());
        }
    }

    fn end(&self, code: Option<u16>) {
        let mut s = self.lock();
        if s.ended.is_none() {
            s.ended = Some(code);
        }
        self.wake(s);
    }
}

/// A pair for one connection, its queue bounded at [`MAX_INBOUND_BYTES`]: the handler for
/// the accept function to return, the stream for a task.
pub fn stream() -> (StreamHandler, WsStream) {
    stream_with_limit(MAX_INBOUND_BYTES)
}

/// As [`stream`], the queue bounded at `limit` bytes of messages (at least one message is
/// always taken).
pub fn stream_with_limit(limit: usize) -> (StreamHandler, WsStream) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State::default()),
        full: AtomicBool::new(false),
        limit: limit.max(1),
    });
    (
        StreamHandler {
            shared: shared.clone(),
        },
        WsStream { shared },
    )
}

/// The server's half of a [`stream`] pair: a [`WsHandler`] that queues messages for the
/// [`WsStream`].
pub struct StreamHandler {
    shared: Arc<Shared>,
}

impl WsHandler for StreamHandler {
    fn on_open(&mut self, out: &mut WsOut<'_>) {
        let sender = out.sender();
        let mut s = self.shared.lock();
        if s.dropped {
            drop(s);
            out.close(super::close::NORMAL, "");
            return;
        }
        s.sender = Some(sender);
        self.shared.wake(s);
    }

    fn on_message(&mut self, msg: Message<'_>, _: &mut WsOut<'_>) {
        let mut s = self.shared.lock();
        if s.dropped {
            return;
        }
        let msg = OwnedMessage::from(msg);
        s.bytes += msg.len();
        s.queue.push_back(msg);
        if s.bytes >= self.shared.limit {
            self.shared.full.store(true, Ordering::Release);
        }
        self.shared.wake(s);
    }

    fn on_close(&mut self, code: Option<u16>) {
        self.shared.end(code);
    }

    fn paused(&self) -> bool {
        self.shared.full.load(Ordering::Acquire)
    }
}

impl Drop for StreamHandler {
    /// A handler dropped unopened (its 101 could not be placed) or after the end: the
    /// stream ends, never waits forever.
    fn drop(&mut self) {
        self.shared.end(None);
    }
}

/// The application's half of a [`stream`] pair: messages from the client, and sending.
/// Its futures work on any runtime.
pub struct WsStream {
    shared: Arc<Shared>,
}

impl WsStream {
    /// The next message; `None` once the connection has ended and every message before the
    /// end was taken.
    pub async fn recv(&mut self) -> Option<OwnedMessage> {
        poll_fn(|cx| {
            let mut s = self.shared.lock();
            if let Some(msg) = s.queue.pop_front() {
                s.bytes -= msg.len();
                if s.bytes < self.shared.limit && self.shared.full.swap(false, Ordering::AcqRel) {
                    // The server stopped reading for this queue: it may read again.
                    if let Some(sender) = s.sender.clone() {
                        drop(s);
                        sender.resume();
                    }
                }
                return Poll::Ready(Some(msg));
            }
            if s.ended.is_some() {
                return Poll::Ready(None);
            }
            Shared::wait(&mut s, cx.waker());
            Poll::Pending
        })
        .await
    }

    /// The connection's sender, once it is open (its 101 placed): to send from other
    /// tasks, or to join a [`Broadcast`](super::Broadcast). `Gone` when it ended first.
    pub async fn sender(&self) -> Result<WsSender, Gone> {
        poll_fn(|cx| {
            let mut s = self.shared.lock();
            if let Some(sender) = &s.sender {
                return Poll::Ready(Ok(sender.clone()));
            }
            if s.ended.is_some() {
                return Poll::Ready(Err(Gone));
            }
            Shared::wait(&mut s, cx.waker());
            Poll::Pending
        })
        .await
    }

    /// Sends a message, waiting while the connection's output is full; `Gone` once the
    /// connection has ended (or is closing).
    pub async fn send(&self, msg: Message<'_>) -> Result<(), Gone> {
        let sender = self.sender().await?;
        loop {
            sender.ready().await?;
            let sent = match msg {
                Message::Text(t) => sender.text(t),
                Message::Binary(b) => sender.binary(b),
            };
            match sent {
                Ok(()) => return Ok(()),
                // Another task filled it between the wait and the send.
                Err(WriteError::Full) => continue,
                Err(WriteError::Gone) => return Err(Gone),
            }
        }
    }

    /// Sends a text message (see [`WsStream::send`]).
    pub async fn text(&self, text: &str) -> Result<(), Gone> {
        self.send(Message::Text(text)).await
    }

    /// Sends a binary message (see [`WsStream::send`]).
    pub async fn binary(&self, data: &[u8]) -> Result<(), Gone> {
        self.send(Message::Binary(data)).await
    }

    /// Closes the connection (1000) once what was sent before is out.
    pub async fn close(&self) {
        if let Ok(sender) = self.sender().await {
            sender.close();
        }
    }

    /// Bytes of messages queued and not yet taken.
    pub fn queued(&self) -> usize {
        self.shared.lock().bytes
    }

    /// The client's close code once the connection has ended (`Some(None)`: it ended
    /// without one); `None` while it is open.
    pub fn ended(&self) -> Option<Option<u16>> {
        self.shared.lock().ended
    }
}

impl Drop for WsStream {
    /// The application is done with the connection: it closes (1000) once what was sent
    /// is out, and what the client sends meanwhile is dropped.
    fn drop(&mut self) {
        let mut s = self.shared.lock();
        s.dropped = true;
        s.queue.clear();
        s.bytes = 0;
        let sender = s.sender.clone();
        drop(s);
        self.shared.full.store(false, Ordering::Release);
        if let Some(sender) = sender {
            sender.close();
        }
    }
}

impl std::fmt::Debug for WsStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.shared.lock();
        f.debug_struct("WsStream")
            .field("queued", &s.queue.len())
            .field("ended", &s.ended)
            .finish()
    }
}
