//! Which protocol a connection speaks: the HTTP/1.1 or the HTTP/2 state machine behind one
//! set of driver-facing calls, so the loop, the timers and the transports do not care.
//!
//! HTTP/2 is boxed: an idle HTTP/1.1 connection stays the size it was. A TLS connection starts
//! as HTTP/1.1 and becomes HTTP/2 when ALPN chose `h2` ([`Proto::upgrade`], before any
//! plaintext is read); an h2c listener's connections are HTTP/2 from the start.
#![forbid(unsafe_code)]

use linerate_http1::RequestHead;

use super::quic::H3Live;
use super::tunnels::H2Live;
use super::ws::WsLive;
use crate::app::Pending;
use crate::h1::{Conn, Cx, Service, StreamHead, Timer, Transmit};
use crate::pool::Pool;
use crate::response::{Field, Response};

/// The calls the transmit loop (`Parts::pump`) makes, so it is compiled once per protocol and
/// dispatches on the protocol once per pump instead of once per call.
pub(crate) trait Drive {
    fn poll_transmit(&mut self, cx: &mut Cx) -> Transmit<'_>;
    fn take_output(&mut self, cx: &mut Cx) -> Vec<u8>;
    fn sent(&mut self, n: u64, cx: &mut Cx);
    fn stalled(&mut self, cx: &Cx);
    fn file_sent(&mut self, n: u64, cx: &mut Cx);
    fn file_taken(&mut self);
    fn shutdown_taken(&mut self);
    fn shut(&mut self, cx: &mut Cx);
    fn can_resume(&self, cx: &Cx) -> bool;
    fn resume<S: Service<Pending = Pending>>(
        &mut self,
        head: &mut RequestHead,
        cx: &mut Cx,
        svc: &mut S,
    );
    fn wants_input(&self, cx: &Cx) -> bool;
    /// Everything answered so far has been sent (HTTP/1.x; the others never say so): the
    /// lines of its large answers can be written (`app/phase/log_sent.rs`).
    fn drained(&self, _cx: &Cx) -> bool {
        false
    }
}

impl Drive for Conn<Pending> {
    #[inline(always)]
    fn poll_transmit(&mut self, cx: &mut Cx) -> Transmit<'_> {
        Conn::poll_transmit(self, cx)
    }
    #[inline(always)]
    fn take_output(&mut self, cx: &mut Cx) -> Vec<u8> {
        Conn::take_output(self, cx)
    }
    fn drained(&self, cx: &Cx) -> bool {
        Conn::drained(self, cx)
    }
    #[inline(always)]
    fn sent(&mut self, n: u64, cx: &mut Cx) {
        Conn::sent(self, n, cx)
    }
    fn stalled(&mut self, cx: &Cx) {
        Conn::stalled(self, cx)
    }
    fn file_sent(&mut self, n: u64, cx: &mut Cx) {
        Conn::file_sent(self, n, cx)
    }
    fn file_taken(&mut self) {
        Conn::file_taken(self)
    }
    fn shutdown_taken(&mut self) {
        Conn::shutdown_taken(self)
    }
    fn shut(&mut self, cx: &mut Cx) {
        Conn::shut(self, cx)
    }
    #[inline(always)]
    fn can_resume(&self, cx: &Cx) -> bool {
        Conn::can_resume(self, &cx.cfg)
    }
    fn resume<S: Service<Pending = Pending>>(
        &mut self,
        head: &mut RequestHead,
        cx: &mut Cx,
        svc: &mut S,
    ) {
        Conn::resume(self, head, cx, svc)
    }
    #[inline(always)]
    fn wants_input(&self, cx: &Cx) -> bool {
        Conn::wants_input(self, &cx.cfg)
    }
}

pub(crate) enum Proto {
    H1(Conn<Pending>),
    /// HTTP/2 and WebSocket share one variant, so every call on an HTTP/1.1 connection
    /// stays one test (a third variant cost /json 15 instructions a request in the worker's
    /// loop, callgrind). Each is boxed at its own size.
    Boxed(Boxed),
}

pub(crate) enum Boxed {
    /// HTTP/2, with the WebSocket streams it carries (see `driver::tunnels`).
    #[cfg_attr(not(feature = "http2"), allow(dead_code))]
    H2(Box<H2Live>),
    /// After a WebSocket route's 101 (see `driver::ws`).
    #[cfg_attr(not(feature = "websocket"), allow(dead_code))]
    Ws(Box<WsLive>),
    /// HTTP/3 over a QUIC connection (see `driver::quic`): its packets come and go through
    /// the worker's UDP socket, not the backend.
    H3(Box<H3Live>),
}

impl Proto {
    pub(crate) fn h1(now: u64, cx: &Cx) -> Proto {
        Proto::H1(Conn::new(now, &cx.cfg))
    }

    /// ALPN chose `h2` on a connection that has read nothing yet.
    pub(crate) fn upgrade(&mut self, now: u64, cx: &Cx) {
        *self = Proto::h2(now, cx);
    }

    #[inline(always)]
    pub(crate) fn deadline(&self) -> u64 {
        match self {
            Proto::H1(c) => c.deadline(),
            Proto::Boxed(b) => match b {
                Boxed::H2(c) => c.deadline(),
                Boxed::Ws(c) => c.deadline(),
                Boxed::H3(c) => c.deadline(),
            },
        }
    }

    pub(crate) fn timer(&self) -> Timer {
        match self {
            Proto::H1(c) => c.timer(),
            Proto::Boxed(b) => match b {
                Boxed::H2(c) => c.timer(),
                Boxed::Ws(_) => Timer::Idle,
                Boxed::H3(c) => c.timer(),
            },
        }
    }

    pub(crate) fn is_idle(&self) -> bool {
        match self {
            Proto::H1(c) => c.is_idle(),
            Proto::Boxed(b) => match b {
                Boxed::H2(c) => c.is_idle(),
                Boxed::Ws(_) => false,
                Boxed::H3(c) => c.conn.is_idle(),
            },
        }
    }

    pub(crate) fn outstanding(&self) -> usize {
        match self {
            Proto::H1(c) => c.outstanding(),
            Proto::Boxed(b) => match b {
                Boxed::H2(c) => c.conn.outstanding(),
                Boxed::Ws(_) => 0,
                Boxed::H3(c) => c.conn.outstanding(),
            },
        }
    }

    pub(crate) fn release(&mut self, pool: &mut Pool) {
        match self {
            Proto::H1(c) => c.release(pool),
            Proto::Boxed(b) => match b {
                Boxed::H2(c) => c.release(pool),
                Boxed::Ws(c) => c.release(pool),
                Boxed::H3(c) => c.release(pool),
            },
        }
    }

    #[inline(always)]
    pub(crate) fn recv<S: Service<Pending = Pending>>(
        &mut self,
        input: &[u8],
        head: &mut RequestHead,
        cx: &mut Cx,
        svc: &mut S,
    ) {
        match self {
            Proto::H1(c) => c.recv(input, head, cx, svc),
            Proto::Boxed(b) => match b {
                Boxed::H2(c) => c.recv(input, head, cx, svc),
                Boxed::Ws(c) => c.recv(input, cx),
                // Its bytes come through QUIC's streams (`driver::quic`).
                Boxed::H3(_) => {}
            },
        }
    }

    pub(crate) fn eof<S: Service<Pending = Pending>>(&mut self, cx: &mut Cx, svc: &mut S) {
        match self {
            Proto::H1(c) => c.eof(cx, svc),
            Proto::Boxed(b) => match b {
                Boxed::H2(c) => c.eof(cx, svc),
                Boxed::Ws(c) => c.eof(),
                Boxed::H3(_) => {}
            },
        }
    }

    pub(crate) fn complete(&mut self, id: u64, resp: Response, cx: &mut Cx) -> bool {
        match self {
            Proto::H1(c) => c.complete(id, resp, cx),
            Proto::Boxed(b) => match b {
                Boxed::H2(c) => c.conn.complete(id, resp, cx),
                Boxed::Ws(_) => false,
                Boxed::H3(c) => c.conn.complete(id, resp, cx),
            },
        }
    }

    /// The head of a streamed answer (see `h1::Conn::start_stream`).
    pub(crate) fn start_stream(&mut self, id: u64, head: &StreamHead<'_>, cx: &mut Cx) -> bool {
        match self {
            Proto::H1(c) => c.start_stream(id, head, cx),
            Proto::Boxed(b) => match b {
                Boxed::H2(c) => c.conn.start_stream(id, head, cx),
                Boxed::Ws(_) => false,
                Boxed::H3(c) => c.conn.start_stream(id, head, cx),
            },
        }
    }

    /// An interim (1xx) answer to request `id` ahead of its final one (see
    /// `h1::Conn::interim`); `false` when it did not go out.
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub(crate) fn interim(
        &mut self,
        id: u64,
        status: u16,
        fields: &[(&[u8], &[u8])],
        cx: &mut Cx,
    ) -> bool {
        match self {
            Proto::H1(c) => c.interim(id, status, fields, cx),
            Proto::Boxed(b) => match b {
                Boxed::H2(c) => c.conn.interim(id, status, fields, cx),
                Boxed::Ws(_) => false,
                Boxed::H3(c) => c.conn.interim(id, status, fields, cx),
            },
        }
    }

    pub(crate) fn stream_data(&mut self, id: u64, data: &[u8], cx: &mut Cx) -> bool {
        match self {
            Proto::H1(c) => c.stream_data(id, data, cx),
            Proto::Boxed(b) => match b {
                Boxed::H2(c) => c.stream_data(id, data, cx),
                Boxed::Ws(c) => c.push_frames(data, cx),
                Boxed::H3(c) => c.conn.stream_data(id, data, cx),
            },
        }
    }

    /// Whether request `id` still waits for its answer (or is receiving it): `false` once an
    /// HTTP/2 client reset its stream. HTTP/1.1's requests end with their connection, which
    /// the driver hears itself; HTTP/3's are not told apart yet (`true`).
    pub(crate) fn awaits(&self, id: u64) -> bool {
        match self {
            Proto::Boxed(Boxed::H2(c)) => c.awaits(id),
            _ => true,
        }
    }

    /// Keeps what the last write staged in the worker's `cx.out` as this connection's own
    /// output: for a caller that writes to several client connections before transmitting
    /// any (an HTTP/2 upstream's relay). WebSocket connections take no such writes, and
    /// HTTP/3's packets leave through the worker's UDP socket.
    #[cfg_attr(not(all(feature = "proxy", feature = "http2")), allow(dead_code))]
    pub(crate) fn keep_output(&mut self, cx: &mut Cx) {
        match self {
            Proto::H1(c) => c.keep_output(cx),
            Proto::Boxed(Boxed::H2(c)) => c.keep_output(cx),
            Proto::Boxed(Boxed::Ws(_) | Boxed::H3(_)) => {}
        }
    }

    pub(crate) fn stream_room(&self, id: u64) -> bool {
        match self {
            Proto::H1(c) => c.stream_room(id),
            Proto::Boxed(b) => match b {
                Boxed::H2(c) => c.stream_room(id),
                Boxed::Ws(c) => c.sendable(),
                Boxed::H3(c) => c.conn.stream_room(id),
            },
        }
    }

    /// The client's bytes for a tunnel (HTTP/1.1 after a 101; HTTP/2 has none).
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub(crate) fn tunnel_input(&self) -> Option<&[u8]> {
        match self {
            Proto::H1(c) => c.tunnel_input(),
            Proto::Boxed(_) => None,
        }
    }

    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub(crate) fn tunnel_used(&mut self, n: usize, pool: &mut Pool) {
        if let Proto::H1(c) = self {
            c.tunnel_used(n, pool);
        }
    }

    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub(crate) fn tunnel_ended(&self) -> bool {
        matches!(self, Proto::H1(c) if c.tunnel_ended())
    }

    pub(crate) fn stream_end(&mut self, id: u64, cx: &mut Cx) -> bool {
        self.stream_end_with(id, &[], cx)
    }

    /// [`Proto::stream_end`] with trailer fields after the body (a library streamed answer's
    /// [`BodyWriter::end_with_trailers`](crate::streaming::BodyWriter::end_with_trailers)).
    pub(crate) fn stream_end_with(&mut self, id: u64, trailers: &[Field], cx: &mut Cx) -> bool {
        match self {
            Proto::H1(c) => c.stream_end_with(id, trailers, cx),
            Proto::Boxed(b) => match b {
                Boxed::H2(c) => c.stream_end_with(id, trailers, cx),
                Boxed::Ws(c) => c.sender_closed(cx),
                Boxed::H3(c) => c.conn.stream_end_with(id, trailers, cx),
            },
        }
    }

    /// The upstream that request `id`'s relayed body goes to has room again.
    pub(crate) fn body_room<S: Service<Pending = Pending>>(
        &mut self,
        id: u64,
        head: &mut RequestHead,
        cx: &mut Cx,
        svc: &mut S,
    ) {
        match self {
            Proto::H1(c) => c.body_room(head, cx, svc),
            Proto::Boxed(b) => match b {
                Boxed::H2(c) => c.conn.body_room(id, cx),
                // Read again by `Quic::drive`, which follows every visit.
                Boxed::H3(c) => c.conn.body_room(id),
                Boxed::Ws(_) => {}
            },
        }
    }

    pub(crate) fn stream_abort(&mut self, id: u64, cx: &mut Cx) -> bool {
        match self {
            Proto::H1(c) => c.stream_abort(id, cx),
            Proto::Boxed(b) => match b {
                Boxed::H2(c) => c.stream_abort(id, cx),
                Boxed::Ws(_) => true,
                Boxed::H3(c) => c.conn.stream_abort(id, cx),
            },
        }
    }

    pub(crate) fn on_timer<S: Service<Pending = Pending>>(&mut self, cx: &mut Cx, svc: &mut S) {
        match self {
            Proto::H1(c) => c.on_timer(cx, svc),
            Proto::Boxed(b) => match b {
                Boxed::H2(c) => c.on_timer(cx, svc),
                Boxed::Ws(c) => c.on_timer(cx),
                Boxed::H3(c) => c.on_timer(cx, svc),
            },
        }
    }

    pub(crate) fn drain(&mut self, cx: &mut Cx) {
        match self {
            Proto::H1(c) => c.drain(cx),
            Proto::Boxed(b) => match b {
                Boxed::H2(c) => c.drain(cx),
                Boxed::Ws(c) => c.drain(cx),
                Boxed::H3(c) => c.conn.drain(cx),
            },
        }
    }

    #[inline(always)]
    pub(crate) fn sent(&mut self, n: u64, cx: &mut Cx) {
        match self {
            Proto::H1(c) => c.sent(n, cx),
            Proto::Boxed(b) => match b {
                Boxed::H2(c) => Drive::sent(&mut **c, n, cx),
                Boxed::Ws(c) => Drive::sent(&mut **c, n, cx),
                Boxed::H3(_) => {}
            },
        }
    }

    pub(crate) fn file_sent(&mut self, n: u64, cx: &mut Cx) {
        match self {
            Proto::H1(c) => c.file_sent(n, cx),
            Proto::Boxed(b) => {
                if let Boxed::H2(c) = b {
                    Drive::file_sent(&mut **c, n, cx);
                }
            }
        }
    }

    pub(crate) fn shut(&mut self, cx: &mut Cx) {
        match self {
            Proto::H1(c) => c.shut(cx),
            Proto::Boxed(b) => match b {
                Boxed::H2(c) => c.conn.shut(cx),
                Boxed::Ws(c) => Drive::shut(&mut **c, cx),
                Boxed::H3(_) => {}
            },
        }
    }
}
