//! WebSocket over HTTP/2 (RFC 8441) on the worker: an HTTP/2 connection with the WebSocket
//! streams it carries. Each stream a route accepted gets the same WebSocket state machine and
//! handler a connection gets over HTTP/1.1 (`driver::ws`); this file moves bytes between the
//! two state machines.
//!
//! Owns when a tunnel's bytes move and how its ends map:
//! - the client's bytes go to the WebSocket side while it takes input, and the stream's window
//!   is given back only as they go;
//! - its output goes out as the stream's DATA while the stream has room;
//! - the WebSocket side's shutdown is END_STREAM, and a WebSocket connection given up
//!   (timeouts) resets the stream with CANCEL;
//! - the client's END_STREAM, a reset, or the connection's end is the WebSocket side's EOF.
//!
//! Bytes move when the driver next asks what to transmit after an event that can move them:
//! input, a timer, a visit from a tunnel's sender (its frames, or a paused handler's
//! `resume`), shutdown, and a send completing while a tunnel waited for room. A connection
//! with no tunnels pays one test.
#![forbid(unsafe_code)]

use std::cell::Cell;
use std::sync::Arc;

use linerate_http1::RequestHead;

use super::proto::{Boxed, Drive, Proto};
use super::ws::WsLive;
use crate::app::Pending;
use crate::app::deferred::Inbox;
use crate::h1::{Cx, Service, StreamHead, Timer, Transmit};
use crate::h2;
use crate::pool::Pool;
use crate::websocket::Upgrade;

/// An HTTP/2 connection and its WebSocket streams.
pub(crate) struct H2Live {
    pub(crate) conn: h2::Conn<Pending>,
    tunnels: Vec<Tunnel>,
    /// Something happened that may move a tunnel's bytes (a `Cell`: a sender's visit is seen
    /// in `stream_room`, which reads).
    stir: Cell<bool>,
    /// A tunnel's output waits for its stream's room: a send completing may make it.
    waiting: bool,
}

impl Proto {
    /// An HTTP/2 connection (an h2c listener's, or ALPN chose `h2`).
    pub(crate) fn h2(now: u64, cx: &Cx) -> Proto {
        Proto::Boxed(Boxed::H2(Box::new(H2Live::new(h2::Conn::new(now, cx)))))
    }
}

/// One WebSocket stream.
struct Tunnel {
    /// The stream's id.
    id: u64,
    ws: WsLive,
}

impl H2Live {
    pub(crate) fn new(conn: h2::Conn<Pending>) -> H2Live {
        H2Live {
            conn,
            tunnels: Vec::new(),
            stir: Cell::new(false),
            waiting: false,
        }
    }

    /// A WebSocket route accepted stream `up.id`'s extended CONNECT: its 200 opens the
    /// tunnel. A stream gone meanwhile (reset with the request) drops the handler unopened.
    #[cfg_attr(not(feature = "websocket"), allow(dead_code))]
    pub(crate) fn open_tunnel(&mut self, up: Upgrade, token: u64, inbox: &Arc<Inbox>, cx: &mut Cx) {
        let fields: Vec<(&[u8], &[u8])> = up
            .fields
            .iter()
            .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
            .collect();
        let head = StreamHead {
            status: 200,
            fields: &fields,
            length: None,
            date: None,
        };
        if !self.conn.start_stream(up.id, &head, cx) {
            return;
        }
        let id = up.id;
        let ws = WsLive::opened(up, (token, id), inbox, Vec::new(), cx);
        self.tunnels.push(Tunnel { id, ws });
        self.move_bytes(cx);
    }

    /// The tunnel on stream `id`, if it is one.
    fn tunnel(&mut self, id: u64) -> Option<&mut WsLive> {
        self.tunnels
            .iter_mut()
            .find(|t| t.id == id)
            .map(|t| &mut t.ws)
    }

    /// Moves every tunnel's bytes both ways; a tunnel that is over is dropped.
    #[inline(never)]
    fn move_bytes(&mut self, cx: &mut Cx) {
        self.move_bytes_with(cx, true);
    }

    /// As [`H2Live::move_bytes`]; `requeue`: a sender whose frames wait is queued for the
    /// worker once its connection's output moved (not while the worker is taking its frames:
    /// its channel is locked then, and they are all taken).
    fn move_bytes_with(&mut self, cx: &mut Cx, requeue: bool) {
        self.stir.set(false);
        self.waiting = false;
        let mut i = 0;
        while i < self.tunnels.len() {
            match step(&mut self.conn, &mut self.tunnels[i], cx, requeue) {
                Step::Open { waiting } => {
                    self.waiting |= waiting;
                    i += 1;
                }
                Step::Over => {
                    let mut t = self.tunnels.swap_remove(i);
                    t.ws.release(&mut cx.pool);
                }
            }
        }
        self.conn.tunnels_moved(cx);
    }

    /// Bytes may move at the next transmit.
    fn stir(&self) {
        if !self.tunnels.is_empty() {
            self.stir.set(true);
        }
    }

    pub(crate) fn deadline(&self) -> u64 {
        self.tunnels
            .iter()
            .map(|t| t.ws.deadline())
            .fold(self.conn.deadline(), u64::min)
    }

    /// The connection's timer, unless a tunnel's comes first (a WebSocket ping or timeout,
    /// never counted as a deferred answer's).
    pub(crate) fn timer(&self) -> Timer {
        if self.deadline() < self.conn.deadline() {
            Timer::Idle
        } else {
            self.conn.timer()
        }
    }

    pub(crate) fn is_idle(&self) -> bool {
        self.tunnels.is_empty() && self.conn.is_idle()
    }

    pub(crate) fn release(&mut self, pool: &mut Pool) {
        for mut t in self.tunnels.drain(..) {
            t.ws.release(pool);
        }
        self.conn.release(pool);
    }

    pub(crate) fn recv<S: Service<Pending = Pending>>(
        &mut self,
        input: &[u8],
        head: &mut RequestHead,
        cx: &mut Cx,
        svc: &mut S,
    ) {
        self.conn.recv(input, head, cx, svc);
        self.stir();
    }

    pub(crate) fn eof<S: Service<Pending = Pending>>(&mut self, cx: &mut Cx, svc: &mut S) {
        self.conn.eof(cx, svc);
        self.stir();
    }

    pub(crate) fn on_timer<S: Service<Pending = Pending>>(&mut self, cx: &mut Cx, svc: &mut S) {
        if cx.now >= self.conn.deadline() {
            self.conn.on_timer(cx, svc);
        }
        for t in &mut self.tunnels {
            if cx.now >= t.ws.deadline() {
                t.ws.on_timer(cx);
            }
        }
        self.stir();
    }

    /// Shutdown: GOAWAY, and each WebSocket stream closes with 1001.
    pub(crate) fn drain(&mut self, cx: &mut Cx) {
        self.conn.drain(cx);
        for t in &mut self.tunnels {
            t.ws.drain(cx);
        }
        self.stir();
    }

    /// A piece for stream `id`: a tunnel's sender's frames, or a streamed answer's.
    pub(crate) fn stream_data(&mut self, id: u64, data: &[u8], cx: &mut Cx) -> bool {
        let Some(ws) = self.tunnel(id) else {
            return self.conn.stream_data(id, data, cx);
        };
        let taken = ws.push_frames(data, cx);
        self.move_bytes_with(cx, false);
        taken
    }

    /// Whether request `id` still waits for its answer (see `h2::Conn::awaits`).
    pub(crate) fn awaits(&self, id: u64) -> bool {
        self.tunnels.iter().any(|t| t.id == id) || self.conn.awaits(id)
    }

    /// See `h2::Conn::keep_output`.
    pub(crate) fn keep_output(&mut self, cx: &mut Cx) {
        self.conn.keep_output(cx);
    }

    /// Whether stream `id` takes a piece now. Asked of a tunnel when its sender visits (its
    /// frames, or a paused handler's `resume`): the tunnel's bytes move at the next transmit.
    pub(crate) fn stream_room(&self, id: u64) -> bool {
        match self.tunnels.iter().find(|t| t.id == id) {
            Some(t) => {
                self.stir.set(true);
                t.ws.sendable()
            }
            None => self.conn.stream_room(id),
        }
    }

    /// The end of stream `id`'s answer, with trailer fields (none for a tunnel).
    pub(crate) fn stream_end_with(
        &mut self,
        id: u64,
        trailers: &[crate::response::Field],
        cx: &mut Cx,
    ) -> bool {
        let Some(ws) = self.tunnel(id) else {
            return self.conn.stream_end_with(id, trailers, cx);
        };
        ws.sender_closed(cx);
        self.move_bytes_with(cx, false);
        true
    }

    pub(crate) fn stream_abort(&mut self, id: u64, cx: &mut Cx) -> bool {
        if self.tunnel(id).is_some() {
            return true; // a sender cannot abort a WebSocket connection
        }
        self.conn.stream_abort(id, cx)
    }
}

/// Where a tunnel is after its bytes moved.
enum Step {
    /// `waiting`: its output waits for the stream's room.
    Open {
        waiting: bool,
    },
    Over,
}

/// Moves tunnel `t`'s bytes both ways.
fn step(conn: &mut h2::Conn<Pending>, t: &mut Tunnel, cx: &mut Cx, requeue: bool) -> Step {
    let id = t.id;
    match conn.tunnel_input(id) {
        // Reset by the client, or the connection ended: the WebSocket side's EOF.
        None => t.ws.eof(),
        Some((input, ended)) => {
            let n = input.len();
            let taken = n > 0 && Drive::wants_input(&t.ws, cx);
            if taken {
                t.ws.recv(input, cx);
                conn.tunnel_used(id, n, cx);
            }
            // The client's END_STREAM, once every byte before it is taken.
            if ended && (n == 0 || taken) {
                t.ws.eof();
            }
        }
    }
    loop {
        match t.ws.tunnel_transmit() {
            Transmit::Bytes { .. } => {
                if !conn.stream_room(id) {
                    return Step::Open { waiting: true };
                }
                let mut out = t.ws.tunnel_output(cx);
                conn.tunnel_send(id, &out, cx);
                cx.pool.put(&mut out);
                t.ws.tunnel_sent(cx);
                if requeue {
                    t.ws.requeue();
                }
            }
            Transmit::Shutdown => {
                // The close handshake is done (or the connection failed): END_STREAM, then
                // the client's is awaited for the close timeout.
                conn.stream_end(id, cx);
                t.ws.tunnel_shut(cx);
            }
            Transmit::Close => {
                if conn.tunnel_ended(id) {
                    conn.stream_end(id, cx);
                } else {
                    conn.tunnel_reset(id, cx);
                }
                return Step::Over;
            }
            _ => return Step::Open { waiting: false },
        }
    }
}

impl Drive for H2Live {
    #[inline(always)]
    fn poll_transmit(&mut self, cx: &mut Cx) -> Transmit<'_> {
        if self.stir.get() {
            self.move_bytes(cx);
        }
        self.conn.poll_transmit(cx)
    }
    #[inline(always)]
    fn take_output(&mut self, cx: &mut Cx) -> Vec<u8> {
        self.conn.take_output(cx)
    }
    #[inline(always)]
    fn sent(&mut self, n: u64, cx: &mut Cx) {
        self.conn.sent(n, cx);
        if self.waiting {
            self.stir.set(true);
        }
    }
    fn stalled(&mut self, cx: &Cx) {
        self.conn.stalled(cx)
    }
    fn file_sent(&mut self, n: u64, cx: &mut Cx) {
        self.conn.file_sent(n, cx);
        if self.waiting {
            self.stir.set(true);
        }
    }
    fn file_taken(&mut self) {
        self.conn.file_taken()
    }
    fn shutdown_taken(&mut self) {
        self.conn.shutdown_taken()
    }
    fn shut(&mut self, cx: &mut Cx) {
        self.conn.shut(cx)
    }
    fn can_resume(&self, _: &Cx) -> bool {
        false // every frame read is handled at once
    }
    fn resume<S: Service<Pending = Pending>>(
        &mut self,
        _: &mut RequestHead,
        _: &mut Cx,
        _: &mut S,
    ) {
    }
    fn wants_input(&self, _: &Cx) -> bool {
        self.conn.wants_input()
    }
}
