//! WebSocket connections on the worker: the hand-over once a route accepted a handshake
//! (over HTTP/1.1 the 101 placed by the HTTP/1.1 connection, then its output and held input
//! moved to the WebSocket state machine, `crate::ws::Conn`; over HTTP/2 the 200 opening a
//! stream's tunnel, `driver::tunnels`), and the adapter between that state machine and the
//! route's [`WsHandler`], whose panics fail the connection with 1011.
#![forbid(unsafe_code)]

use std::panic::{AssertUnwindSafe, catch_unwind};

use super::proto::{Boxed, Drive, Proto};
use super::{Live, Parts};
use crate::app::Pending;
use crate::h1::{Cx, Service, StreamHead, Transmit};
use crate::websocket::{SenderSlot, Upgrade, WsHandler, WsOut, close};
use crate::ws::{self, Message, Sending};
use linerate_http1::RequestHead;

/// A WebSocket connection: the state machine and its handler.
pub(crate) struct WsLive {
    conn: ws::Conn,
    handler: Caught,
    /// A shutdown (TLS's close_notify) is in flight.
    shutting: bool,
}

/// The route's handler, called with panics caught, and the connection's sender.
struct Caught {
    handler: Box<dyn WsHandler>,
    panicked: bool,
    sender: SenderSlot,
}

impl Caught {
    fn open(&mut self, out: &mut Sending) {
        let (handler, sender) = (&mut self.handler, &mut self.sender);
        let called = catch_unwind(AssertUnwindSafe(|| {
            handler.on_open(&mut WsOut { send: out, sender })
        }));
        if called.is_err() {
            tracing::error!(
                "WebSocket handler panicked in on_open; closing its connection with 1011"
            );
            self.panicked = true;
            out.close(close::INTERNAL_ERROR, "");
        }
    }
}

impl ws::Handler for Caught {
    fn message(&mut self, msg: Message<'_>, out: &mut Sending) {
        if self.panicked {
            return;
        }
        let (handler, sender) = (&mut self.handler, &mut self.sender);
        let called = catch_unwind(AssertUnwindSafe(|| {
            handler.on_message(msg, &mut WsOut { send: out, sender })
        }));
        if called.is_err() {
            tracing::error!("WebSocket handler panicked; closing its connection with 1011");
            self.panicked = true;
            out.close(close::INTERNAL_ERROR, "");
        }
    }

    fn paused(&self) -> bool {
        !self.panicked && self.handler.paused()
    }

    fn closed(&mut self, code: Option<u16>) {
        // Senders elsewhere learn it at once (`Gone`).
        if let Some(s) = &self.sender.sender {
            s.chan().gone();
        }
        if self.panicked {
            return;
        }
        let handler = &mut self.handler;
        if catch_unwind(AssertUnwindSafe(|| handler.on_close(code))).is_err() {
            tracing::error!("WebSocket handler panicked in on_close");
        }
    }
}

/// Hands the connection at hand (HTTP/1.1), or the streams (HTTP/2), over to the WebSocket
/// routes that accepted their handshakes in this call (`AppIo::upgrades`). `false`: an
/// HTTP/1.1 connection's 101 could not be placed (the connection closes).
#[cold]
#[inline(never)]
pub(super) fn hand_over<B: super::Backend>(live: &mut Live, p: &mut Parts<'_, B>) -> bool {
    for up in std::mem::take(&mut p.svc.io.upgrades) {
        let handed = match &mut live.conn {
            Proto::Boxed(Boxed::H2(c)) => {
                c.open_tunnel(up, p.token, &p.svc.io.inbox, p.cx);
                true
            }
            _ => upgrade_h1(live, up, p),
        };
        if !handed {
            return false;
        }
    }
    true
}

/// A handshake accepted at the end of its route's async layers came back (answer `resp`
/// to request `id`, `websocket/chained.rs`): it is handed over as one accepted in the call
/// is, with the answer's fields as the layers left them. The connection waited for it: over
/// HTTP/1.1 reading nothing after the handshake (`Decision::Relay { upgrade }`), over
/// HTTP/2 with the stream deferred. An answer whose status is no longer the switch (a sync
/// layer's `after` changed it) goes out as any answer, the handler dropped unopened.
#[cold]
#[inline(never)]
pub(super) fn accepted_late<B: super::Backend>(
    live: &mut Live,
    mut up: Upgrade,
    id: u64,
    resp: crate::Response,
    p: &mut Parts<'_, B>,
) {
    let switching = if matches!(live.conn, Proto::H1(_)) {
        101
    } else {
        200
    };
    if resp.status != switching {
        live.conn.complete(id, resp, p.cx);
        return;
    }
    up.id = id;
    up.fields = (resp.headers.iter())
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    p.svc.io.upgrades.push(up);
}

/// The HTTP/1.1 connection's 101 is placed, and its state machine gives way to WebSocket's.
fn upgrade_h1<B: super::Backend>(live: &mut Live, up: Upgrade, p: &mut Parts<'_, B>) -> bool {
    let Proto::H1(c) = &mut live.conn else {
        return false;
    };
    let mut fields: Vec<(&[u8], &[u8])> = vec![(b"Upgrade", b"websocket")];
    fields.extend(up.fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())));
    let head = StreamHead {
        status: 101,
        fields: &fields,
        length: None,
        date: None,
    };
    if !c.start_stream(up.id, &head, p.cx) {
        return false;
    }
    let Some((out, input)) = c.take_upgraded(p.cx) else {
        return false;
    };
    c.release(&mut p.cx.pool);
    let mut ws = WsLive::opened(up, (p.token, 0), &p.svc.io.inbox, out, p.cx);
    if !input.is_empty() {
        ws.conn
            .recv(&input, p.cx.now, &mut p.cx.pool, &mut ws.handler);
    }
    let mut input = input;
    p.cx.pool.put(&mut input);
    live.conn = Proto::Boxed(Boxed::Ws(Box::new(ws)));
    true
}

impl WsLive {
    /// The WebSocket side of an accepted handshake, `out` staged before it (the 101 and what
    /// preceded it over HTTP/1.1; nothing over HTTP/2), its handler told it is open. Its
    /// sender's frames reach it through `inbox` as request `id` of connection `token` (id 0
    /// over HTTP/1.1, the stream over HTTP/2).
    pub(super) fn opened(
        up: Upgrade,
        (token, id): (u64, u64),
        inbox: &std::sync::Arc<crate::app::deferred::Inbox>,
        out: Vec<u8>,
        cx: &Cx,
    ) -> WsLive {
        let conn = ws::Conn::new(cx.now, up.limits)
            .with_deflate(up.deflate)
            .with_output(out);
        let mut ws = WsLive {
            conn,
            handler: Caught {
                handler: up.handler,
                panicked: false,
                sender: SenderSlot {
                    sender: None,
                    inbox: inbox.clone(),
                    token,
                    id,
                    deflate: up.deflate.and_then(|a| a.compress_bits()),
                },
            },
            shutting: false,
        };
        if let Some(out) = ws.conn.sending() {
            ws.handler.open(out);
        }
        ws
    }

    pub(crate) fn recv(&mut self, input: &[u8], cx: &mut Cx) {
        self.conn
            .recv(input, cx.now, &mut cx.pool, &mut self.handler);
    }

    pub(crate) fn eof(&mut self) {
        self.conn.eof(&mut self.handler);
    }

    pub(crate) fn on_timer(&mut self, cx: &mut Cx) {
        self.conn.on_timer(cx.now, &mut self.handler);
    }

    /// Shutdown: close 1001, the client's close awaited for the close timeout.
    pub(crate) fn drain(&mut self, cx: &mut Cx) {
        self.conn
            .close(close::GOING_AWAY, "server shutting down", cx.now);
    }

    pub(crate) fn deadline(&self) -> u64 {
        self.conn.deadline()
    }

    /// Frames from the connection's [`WsSender`](crate::websocket::WsSender) can be taken.
    pub(crate) fn sendable(&self) -> bool {
        self.conn.sendable()
    }

    /// Frames from the connection's sender, taken.
    pub(crate) fn push_frames(&mut self, frames: &[u8], cx: &mut Cx) -> bool {
        self.conn.push_frames(frames, &mut cx.pool)
    }

    /// The sender closed the connection (1000).
    pub(crate) fn sender_closed(&mut self, cx: &mut Cx) -> bool {
        self.conn.close(close::NORMAL, "", cx.now);
        true
    }

    /// Output went out: frames the sender wrote while there was no room are read now.
    pub(super) fn requeue(&self) {
        let slot = &self.handler.sender;
        if let Some(s) = &slot.sender
            && s.chan().pending()
        {
            slot.inbox.push_stream(s.chan().clone());
        }
    }

    pub(crate) fn release(&mut self, cx_pool: &mut crate::pool::Pool) {
        self.conn.release(cx_pool, &mut self.handler);
    }

    /// Over HTTP/2 (`driver::tunnels`): what the WebSocket side has to transmit, which the
    /// stream carries (no TLS shutdown of its own, unlike [`Drive::poll_transmit`]).
    #[cfg_attr(not(feature = "http2"), allow(dead_code))]
    pub(super) fn tunnel_transmit(&mut self) -> Transmit<'_> {
        self.conn.poll_transmit()
    }

    /// Over HTTP/2: the frames to put in the stream's DATA.
    #[cfg_attr(not(feature = "http2"), allow(dead_code))]
    pub(super) fn tunnel_output(&mut self, cx: &mut Cx) -> Vec<u8> {
        self.conn.take_output(&mut cx.pool)
    }

    /// Over HTTP/2: the frames taken went into the stream.
    #[cfg_attr(not(feature = "http2"), allow(dead_code))]
    pub(super) fn tunnel_sent(&mut self, cx: &mut Cx) {
        self.conn.sent(cx.now, &mut cx.pool);
    }

    /// Over HTTP/2: the stream's END_STREAM went out.
    #[cfg_attr(not(feature = "http2"), allow(dead_code))]
    pub(super) fn tunnel_shut(&mut self, cx: &mut Cx) {
        self.conn.shut(cx.now);
    }
}

impl Drive for WsLive {
    fn poll_transmit(&mut self, _: &mut Cx) -> Transmit<'_> {
        if self.shutting {
            return Transmit::Idle;
        }
        self.conn.poll_transmit()
    }
    fn take_output(&mut self, cx: &mut Cx) -> Vec<u8> {
        self.conn.take_output(&mut cx.pool)
    }
    fn sent(&mut self, _: u64, cx: &mut Cx) {
        self.conn.sent(cx.now, &mut cx.pool);
        if self.handler.sender.sender.is_some() {
            self.requeue();
        }
    }
    fn stalled(&mut self, _: &Cx) {}
    fn file_sent(&mut self, _: u64, _: &mut Cx) {}
    fn file_taken(&mut self) {}
    fn shutdown_taken(&mut self) {
        self.shutting = true;
    }
    fn shut(&mut self, cx: &mut Cx) {
        self.shutting = false;
        self.conn.shut(cx.now);
    }
    fn can_resume(&self, _: &Cx) -> bool {
        false
    }
    fn resume<S: Service<Pending = Pending>>(
        &mut self,
        _: &mut RequestHead,
        _: &mut Cx,
        _: &mut S,
    ) {
    }
    fn wants_input(&self, _: &Cx) -> bool {
        // A paused handler holds the client back (TCP's window) until it resumes
        // (`WsSender::resume` has the worker ask again); a closing connection is read for
        // the client's close frame whatever the handler's state.
        self.conn.wants_input() && !(self.conn.is_open() && ws::Handler::paused(&self.handler))
    }
}
