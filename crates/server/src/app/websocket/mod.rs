//! WebSocket routes (RFC 6455): [`Router::ws`](crate::Router::ws) answers the opening
//! handshake and hands the connection over to a [`WsHandler`], whose messages arrive on the
//! worker that serves the connection, whole and checked (text is UTF-8). A handler answers
//! through [`WsOut`], which writes frames straight into the connection's output.
//!
//! ```no_run
//! use linerate_server::websocket::{Message, WsHandler, WsOut};
//! use linerate_server::Router;
//!
//! struct Echo;
//! impl WsHandler for Echo {
//!     fn on_message(&mut self, msg: Message<'_>, out: &mut WsOut<'_>) {
//!         out.send(msg);
//!     }
//! }
//! let router = Router::new().ws("/ws", |_req, _handshake| Ok(Echo));
//! # drop(router);
//! ```
//!
//! The handshake is checked strictly: a request without `Upgrade: websocket` gets 426 with
//! `Upgrade: websocket`; a version other than 13 gets 426 with `Sec-WebSocket-Version: 13`;
//! a missing or malformed key, a malformed `Sec-WebSocket-Extensions`, a method other than
//! GET, HTTP/1.0 or no `Connection: upgrade` gets 400. The route's layers run before the
//! handshake is accepted (a 401 from an authentication layer refuses it), async ones
//! ([`Router::around`](crate::Router::around)) included: their chain ends in the accept
//! function, and their code after `next` sees the 101 (over HTTP/2 the 200). The accept
//! function may refuse with any answer, choose one of the offered subprotocols, and check
//! `Origin`.
//!
//! The connection's rules are the server's (see the limits in [`WsLimits`]): client frames
//! masked, reserved bits and opcodes refused, control frames answered between fragments,
//! invalid text failing the connection at once (1007), frames and messages over their limits
//! failing it with 1009, pings answered, the close handshake both ways with a timeout, idle
//! connections pinged, 1001 on shutdown, and reading stopped while the output held reaches
//! its limit.
//!
//! To send from elsewhere (another connection's handler, another thread, a future), take the
//! connection's [`WsSender`] with [`WsOut::sender`] (in [`WsHandler::on_open`], say): it is
//! `Send` and cheap to clone, refuses a send with `Full` while 64 KiB of its messages wait
//! for the connection (backpressure reaches the sender; wait with `wait_room` or `ready`),
//! and with `Gone` once the connection ended. [`Broadcast`] is a set of senders across
//! workers that encodes each message once.
//!
//! Compression (permessage-deflate, RFC 7692) is off unless a route turns it on
//! ([`WsOptions::compression`] in [`Router::ws_with`](crate::Router::ws_with)); then the
//! client's first acceptable offer is taken and answered in the 101. The server keeps no
//! compression context between its own messages (it always answers
//! `server_no_context_takeover`): each thread's compressor serves all its connections, a
//! [`Broadcast`] compresses a message once for every member, and messages under
//! [`MIN_DEFLATE_BYTES`] (or that do not shrink) go out as they are. The client's messages
//! are inflated as they arrive, the message limit applying to the inflated size; an
//! inflater (~47 KiB) stays with a connection whose client keeps its context between
//! messages. Off by default: that memory, the CPU, and the risk of compressing secrets
//! beside what an attacker chooses (CRIME, BREACH) are the application's to weigh, as in
//! tokio-tungstenite, axum and uWebSockets, which also leave it off.
//!
//! To serve a connection from a future on the application's runtime instead (the async
//! variant), make a [`stream`] pair in the accept function: the [`StreamHandler`] goes to
//! the server, the [`WsStream`] to a task, which awaits messages with [`WsStream::recv`] and
//! sends with [`WsStream::send`]. Its queue is bounded: while 64 KiB of messages wait for the
//! task, the server stops reading from the client.
//!
//! Over HTTP/2 (RFC 8441), the same routes and handlers serve WebSocket on a stream: where
//! the router has a WebSocket route and no path is proxied, HTTP/2 connections announce
//! `SETTINGS_ENABLE_CONNECT_PROTOCOL`, and an extended CONNECT (`:protocol websocket`) to the
//! route's path is checked like a handshake (version 13, subprotocols, extensions, no key)
//! and answered with a 200; the messages then travel in the stream's DATA, under its flow
//! control, beside the connection's other streams. An extended CONNECT to a path with no
//! WebSocket route gets 404 or 405, one naming another protocol 501. A connection holds at
//! most [`MAX_TUNNEL_STREAMS`](crate::http2::MAX_TUNNEL_STREAMS) of them at once.
#![forbid(unsafe_code)]

use linerate_http1::RequestHead;

use std::sync::{Arc, Mutex, OnceLock};

use linerate_ws::frame::{self, Opcode};

use crate::deferred::Inbox;
use crate::request::Request;
use crate::response::Response;
use crate::streaming::{self, BodyWriter, WriteError};
use crate::ws::Sending;
use crate::ws::deflate::write_message;
use crate::ws::handshake::{self, Offer, Refusal};
use linerate_ws::deflate::{Agreed, MAX_WINDOW_BITS};

mod chained;
mod stream;

pub use crate::ws::close;
pub use crate::ws::{MIN_DEFLATE_BYTES, Message, WsLimits};
pub use stream::{
    MAX_INBOUND_BYTES, OwnedMessage, StreamHandler, WsStream, stream, stream_with_limit,
};

/// A WebSocket route's settings: its limits, and whether it compresses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WsOptions {
    pub limits: WsLimits,
    /// permessage-deflate (RFC 7692): take a client's offer and compress messages both
    /// ways. Off by default (see [the module docs](self) for why).
    pub compression: bool,
    /// With compression: ask every client to compress each message afresh
    /// (`client_no_context_takeover`, RFC 7692 §7.1.1.2), so no inflater stays with an
    /// idle connection (20–48 KiB each otherwise, docs/conformance.md), at the cost of the
    /// client's ratio on runs of similar messages. Off by default: a client that offers it
    /// gets it anyway.
    pub client_no_context_takeover: bool,
}

impl From<WsLimits> for WsOptions {
    fn from(limits: WsLimits) -> WsOptions {
        WsOptions {
            limits,
            ..WsOptions::default()
        }
    }
}

/// A WebSocket connection's application: one per connection, called on the worker that
/// serves it, so it never waits (hand slow work to another thread).
pub trait WsHandler: Send + 'static {
    /// The connection is open (its 101 is placed): the place to take a [`WsSender`] with
    /// [`WsOut::sender`] and register it (a chat room, a subscription).
    fn on_open(&mut self, out: &mut WsOut<'_>) {
        let _ = out;
    }

    /// A whole message from the client.
    fn on_message(&mut self, msg: Message<'_>, out: &mut WsOut<'_>);

    /// The connection ended: the client's close code, or `None` when it ended without one
    /// (a close frame without a code, a connection that dropped, a protocol error, a
    /// timeout). Called once.
    fn on_close(&mut self, code: Option<u16>) {
        let _ = code;
    }

    /// Whether the handler takes no more messages for now (it hands them to a queue that is
    /// full, say). While it is, the server stops reading from this connection, so the
    /// client is held back by TCP's window and nothing piles up on the server, and the idle
    /// ping waits. Call [`WsSender::resume`] once it may take messages again: the server
    /// asks again then (and after each of its own events on the connection). Messages that
    /// arrived in the same read are still delivered. Asked often: keep it cheap (an atomic
    /// load). A closing connection is read whatever this says.
    fn paused(&self) -> bool {
        false
    }
}

/// Sends on the connection at hand: each call stages one whole message (a single frame).
pub struct WsOut<'a> {
    pub(crate) send: &'a mut Sending,
    pub(crate) sender: &'a mut SenderSlot,
}

/// A connection's [`WsSender`], made on first request, and where it sends to.
pub(crate) struct SenderSlot {
    pub sender: Option<WsSender>,
    pub inbox: Arc<Inbox>,
    pub token: u64,
    /// Which of the connection's exchanges it is: 0 over HTTP/1.1 (the connection has one),
    /// the stream over HTTP/2.
    pub id: u64,
    /// The connection's compressor window, where compression was agreed.
    pub deflate: Option<u8>,
}

impl WsOut<'_> {
    /// Sends a text message; `false` once the connection is closing (nothing is sent).
    pub fn text(&mut self, text: &str) -> bool {
        self.send.text(text)
    }

    /// Sends a binary message; `false` once the connection is closing.
    pub fn binary(&mut self, data: &[u8]) -> bool {
        self.send.binary(data)
    }

    /// Sends `msg` as it is (an echo).
    pub fn send(&mut self, msg: Message<'_>) -> bool {
        match msg {
            Message::Text(t) => self.text(t),
            Message::Binary(b) => self.binary(b),
        }
    }

    /// Starts the close handshake: a close frame with `code` and `reason` (cut to 123
    /// bytes). The client's close frame is awaited for the close timeout; messages that
    /// arrive meanwhile are dropped.
    pub fn close(&mut self, code: u16, reason: &str) {
        self.send.close(code, reason);
    }

    /// Bytes staged for this connection and not yet sent: a handler that sends much can
    /// watch it (reading from the client stops while it is over the output limit).
    pub fn queued(&self) -> usize {
        self.send.queued()
    }

    /// A handle that sends on this connection from anywhere (another connection's handler,
    /// another thread, a future). The first call makes it; later calls clone it.
    pub fn sender(&mut self) -> WsSender {
        let slot = &mut *self.sender;
        if let Some(s) = &slot.sender {
            return s.clone();
        }
        let (body, writer) = streaming::channel();
        let chan = body.adopt().expect("a new channel is not taken");
        chan.attach(slot.inbox.clone(), slot.token, slot.id);
        let sender = WsSender {
            writer: Arc::new(writer),
            deflate: slot.deflate,
        };
        slot.sender = Some(sender.clone());
        sender
    }
}

/// Sends whole messages on one WebSocket connection from any thread. `Send`, `Sync` and
/// cheap to clone. Backpressure: a send is refused with [`WriteError::Full`] while 64 KiB
/// sent through the handle are still waiting for the connection (wait with
/// [`WsSender::wait_room`] or [`WsSender::ready`]); once the connection has ended, every send
/// is [`WriteError::Gone`]. On a connection that agreed to compression, messages are
/// compressed on the thread that sends them.
#[derive(Clone)]
pub struct WsSender {
    writer: Arc<BodyWriter>,
    /// The connection's compressor window, where compression was agreed.
    deflate: Option<u8>,
}

impl WsSender {
    /// Sends a text message.
    pub fn text(&self, text: &str) -> Result<(), WriteError> {
        self.send_frame(Opcode::Text, text.as_bytes())
    }

    /// Sends a binary message.
    pub fn binary(&self, data: &[u8]) -> Result<(), WriteError> {
        self.send_frame(Opcode::Binary, data)
    }

    fn send_frame(&self, opcode: Opcode, payload: &[u8]) -> Result<(), WriteError> {
        let mut frame = Vec::with_capacity(payload.len() + 10);
        write_message(&mut frame, opcode, payload, self.deflate);
        self.writer.write(&frame)
    }

    /// Sends a message encoded once (see [`Broadcast`]): its compressed form where this
    /// connection compresses with the full window, as it is otherwise.
    pub fn send_encoded(&self, msg: &Encoded) -> Result<(), WriteError> {
        self.writer.write(msg.for_window(self.deflate))
    }

    /// Blocks until a send can be taken (or the connection is gone).
    pub fn wait_room(&self) -> Result<(), streaming::Gone> {
        self.writer.wait_room()
    }

    /// Waits, without blocking a thread, until a send can be taken.
    pub fn ready(&self) -> streaming::Ready<'_> {
        self.writer.ready()
    }

    /// Whether the connection has ended.
    pub fn is_gone(&self) -> bool {
        self.writer.is_gone()
    }

    /// Closes the connection (1000) once what was sent before is out.
    pub fn close(&self) {
        self.writer.chan().end_now();
    }

    /// Has the connection's worker ask its handler's [`WsHandler::paused`] again, and read
    /// from the client if it no longer is.
    pub fn resume(&self) {
        self.writer.chan().poke();
    }

    pub(crate) fn chan(&self) -> &Arc<streaming::Chan> {
        self.writer.chan()
    }
}

impl std::fmt::Debug for WsSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WsSender")
            .field("gone", &self.is_gone())
            .finish()
    }
}

/// A message encoded as a server frame once, to be sent on many connections. Its
/// compressed form is made once too, by the first connection that compresses: the server
/// keeps no context between messages, so the same bytes are right for every connection that
/// compresses with the full window (the usual case). A connection whose client asked for a
/// smaller window gets the message as it is, which is always allowed (RFC 7692 §6).
#[derive(Clone, Debug)]
pub struct Encoded {
    frame: Vec<u8>,
    /// The header's length in `frame`.
    head: usize,
    /// The frame compressed with the full window; `None` inside when it would not shrink.
    deflated: OnceLock<Option<Vec<u8>>>,
}

impl Encoded {
    /// A text message.
    pub fn text(text: &str) -> Encoded {
        Encoded::frame(Opcode::Text, text.as_bytes())
    }

    /// A binary message.
    pub fn binary(data: &[u8]) -> Encoded {
        Encoded::frame(Opcode::Binary, data)
    }

    fn frame(opcode: Opcode, payload: &[u8]) -> Encoded {
        let mut v = Vec::with_capacity(payload.len() + 10);
        frame::write_head(&mut v, true, false, opcode, payload.len());
        let head = v.len();
        v.extend_from_slice(payload);
        Encoded {
            frame: v,
            head,
            deflated: OnceLock::new(),
        }
    }

    /// The frame for a connection that compresses with a window of `bits` (`None`: it does
    /// not compress).
    fn for_window(&self, bits: Option<u8>) -> &[u8] {
        if bits != Some(MAX_WINDOW_BITS) {
            return &self.frame;
        }
        let deflated = self.deflated.get_or_init(|| {
            let opcode = if self.frame[0] & 0x0F == Opcode::Text.bits() {
                Opcode::Text
            } else {
                Opcode::Binary
            };
            let mut v = Vec::new();
            write_message(&mut v, opcode, &self.frame[self.head..], bits);
            (v[0] & 0x40 != 0).then_some(v)
        });
        deflated.as_deref().unwrap_or(&self.frame)
    }
}

/// A set of connections a message goes to, across workers: a chat room, a live feed. Each
/// message is encoded once. A connection that has ended leaves the set; one that is full
/// (a client that does not read) misses the message, and is counted in the result.
#[derive(Default)]
pub struct Broadcast {
    members: Mutex<Vec<WsSender>>,
}

/// What one [`Broadcast::send`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Delivered {
    /// Connections that took the message.
    pub sent: usize,
    /// Connections that were full and missed it.
    pub full: usize,
    /// Connections that had ended (now out of the set).
    pub gone: usize,
}

impl Broadcast {
    pub fn new() -> Broadcast {
        Broadcast::default()
    }

    /// Adds a connection.
    pub fn join(&self, member: WsSender) {
        self.lock().push(member);
    }

    /// Connections in the set.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sends `msg` to every connection in the set.
    pub fn send(&self, msg: &Encoded) -> Delivered {
        let mut d = Delivered::default();
        self.lock().retain(|m| match m.send_encoded(msg) {
            Ok(()) => {
                d.sent += 1;
                true
            }
            Err(WriteError::Full) => {
                d.full += 1;
                true
            }
            Err(WriteError::Gone) => {
                d.gone += 1;
                false
            }
        });
        d
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<WsSender>> {
        self.members.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The client's offer, for the route's accept function to look at and answer.
pub struct Handshake<'r> {
    offer: Offer<'r>,
    protocol: Option<String>,
    /// The route compresses (and the accept function has not turned it off).
    compression: bool,
    /// The route asks clients for `client_no_context_takeover`.
    client_no_context_takeover: bool,
}

impl<'r> Handshake<'r> {
    /// The subprotocols the client offers (`Sec-WebSocket-Protocol`), in its order.
    pub fn protocols(&self) -> &[&'r str] {
        &self.offer.protocols
    }

    /// `Origin`, as sent (browsers send it; check it against the origins you serve, since a
    /// page elsewhere can open a WebSocket to your server with the user's cookies).
    pub fn origin(&self) -> Option<&'r [u8]> {
        self.offer.origin
    }

    /// Whether this connection will compress: the route compresses, the client offered
    /// permessage-deflate acceptably, and [`Handshake::decline_compression`] was not called.
    pub fn compression(&self) -> bool {
        self.compression && self.offer.deflate.is_some()
    }

    /// Declines compression for this connection (a client known to compress poorly, a
    /// connection that will carry secrets beside what others choose).
    pub fn decline_compression(&mut self) {
        self.compression = false;
    }

    /// Chooses one of the offered subprotocols; `false` (and nothing chosen) when the
    /// client did not offer it (RFC 6455 §4.2.2: the server picks from the client's list).
    pub fn select_protocol(&mut self, protocol: &str) -> bool {
        let offered = self.offer.protocols.contains(&protocol);
        if offered {
            self.protocol = Some(protocol.to_owned());
        }
        offered
    }
}

/// Decides a handshake: a handler for the connection, or the answer that refuses it.
pub type WsAcceptFn =
    dyn Fn(&Request<'_>, &mut Handshake<'_>) -> Result<Box<dyn WsHandler>, Response> + Send + Sync;

/// A WebSocket route's parts.
pub(crate) struct WsRoute {
    pub accept: Arc<WsAcceptFn>,
    pub options: WsOptions,
    /// The route's async layers ending in its accept function (`chained.rs`), where it is
    /// under any; `None` (the handshake answered in the call) otherwise.
    pub chain: Option<Box<crate::router::DeferredFn>>,
}

/// A handshake accepted in this call: the worker places the 101 and hands the connection
/// over before it goes on (see `driver::ws`).
pub(crate) struct Upgrade {
    /// The request's number on its connection (the 101 answers it), or its HTTP/2 stream.
    pub id: u64,
    pub handler: Box<dyn WsHandler>,
    /// The 101's fields beyond `Upgrade` and `Connection`: `Sec-WebSocket-Accept`, the
    /// chosen subprotocol, and what the route's layers added.
    pub fields: Vec<(String, String)>,
    pub limits: WsLimits,
    /// permessage-deflate, agreed.
    pub deflate: Option<Agreed>,
}

/// Checks the handshake request against a route's settings; the client's offer, or the
/// answer that refuses it.
pub(crate) fn check<'b>(
    head: &RequestHead,
    buf: &'b [u8],
    options: &WsOptions,
) -> Result<Handshake<'b>, Response> {
    match handshake::check(head, buf) {
        Ok(offer) => Ok(Handshake {
            offer,
            protocol: None,
            compression: options.compression,
            client_no_context_takeover: options.client_no_context_takeover,
        }),
        Err(refusal) => Err(refusal_response(refusal)),
    }
}

/// The 101's fields for an accepted handshake (RFC 6455 §4.2.2 item 5; over HTTP/2 the
/// 200's, with no `Sec-WebSocket-Accept`, RFC 8441 §5), and the permessage-deflate
/// parameters agreed, if any.
pub(crate) fn accepted_fields(hs: Handshake<'_>) -> (Vec<(String, String)>, Option<Agreed>) {
    let mut fields = Vec::with_capacity(3);
    if !hs.offer.http2 {
        fields.push((
            "Sec-WebSocket-Accept".to_owned(),
            handshake::accept(hs.offer.key),
        ));
    }
    if let Some(p) = hs.protocol {
        fields.push(("Sec-WebSocket-Protocol".to_owned(), p));
    }
    let mut deflate = hs.offer.deflate.filter(|_| hs.compression);
    if let Some(agreed) = &mut deflate {
        // RFC 7692 §7.1.1.2: the server may ask for it unasked.
        agreed.client_no_context_takeover |= hs.client_no_context_takeover;
        fields.push(("Sec-WebSocket-Extensions".to_owned(), agreed.response()));
    }
    (fields, deflate)
}

fn refusal_response(refusal: Refusal) -> Response {
    let body = format!("{}\n", refusal.reason());
    let resp = Response::text_owned(body).status(refusal.status());
    match refusal {
        // RFC 9110 §15.5.22: a 426 names the protocol to upgrade to (the HTTP/1.1 encoder
        // adds `Connection: upgrade`, §7.8).
        Refusal::NotUpgrade => resp.header("Upgrade", "websocket"),
        // RFC 6455 §4.2.2: the versions the server speaks.
        Refusal::Version => resp
            .header("Upgrade", "websocket")
            .header("Sec-WebSocket-Version", handshake::VERSION),
        Refusal::Method | Refusal::Connection | Refusal::Key | Refusal::Extensions => resp.close(),
    }
}

fn boxed<H: WsHandler>(h: H) -> Box<dyn WsHandler> {
    Box::new(h)
}

/// The accept function `Router::ws` stores.
pub(crate) fn accept_fn<F, H>(f: F) -> Arc<WsAcceptFn>
where
    F: Fn(&Request<'_>, &mut Handshake<'_>) -> Result<H, Response> + Send + Sync + 'static,
    H: WsHandler,
{
    Arc::new(move |req, hs| f(req, hs).map(boxed))
}

pub(crate) use chained::{accept_in_chain, under_layers};
