//! Which protocol a connection speaks: the HTTP/1.1 or the HTTP/2 state machine behind one
//! set of driver-facing calls, so the loop, the timers and the transports do not care.
//!
//! HTTP/2 is boxed: an idle HTTP/1.1 connection stays the size it was. A TLS connection starts
//! as HTTP/1.1 and becomes HTTP/2 when ALPN chose `h2` ([`Proto::upgrade`], before any
//! plaintext is read); an h2c listener's connections are HTTP/2 from the start.
#![forbid(unsafe_code)]

use linerate_http1::RequestHead;

use crate::app::Pending;
use crate::h1::{Conn, Cx, Service, Timer, Transmit};
use crate::h2;
use crate::pool::Pool;
use crate::response::Response;

pub(crate) enum Proto {
    H1(Conn<Pending>),
    H2(Box<h2::Conn<Pending>>),
}

impl Proto {
    pub(crate) fn h1(now: u64, cx: &Cx) -> Proto {
        Proto::H1(Conn::new(now, &cx.cfg))
    }

    pub(crate) fn h2(now: u64, cx: &Cx) -> Proto {
        Proto::H2(Box::new(h2::Conn::new(now, cx)))
    }

    /// ALPN chose `h2` on a connection that has read nothing yet.
    pub(crate) fn upgrade(&mut self, now: u64, cx: &Cx) {
        *self = Proto::h2(now, cx);
    }

    #[inline(always)]
    pub(crate) fn deadline(&self) -> u64 {
        match self {
            Proto::H1(c) => c.deadline(),
            Proto::H2(c) => c.deadline(),
        }
    }

    pub(crate) fn timer(&self) -> Timer {
        match self {
            Proto::H1(c) => c.timer(),
            Proto::H2(c) => c.timer(),
        }
    }

    #[inline(always)]
    pub(crate) fn wants_input(&self, cx: &Cx) -> bool {
        match self {
            Proto::H1(c) => c.wants_input(&cx.cfg),
            Proto::H2(c) => c.wants_input(),
        }
    }

    #[inline(always)]
    pub(crate) fn can_resume(&self, cx: &Cx) -> bool {
        match self {
            Proto::H1(c) => c.can_resume(&cx.cfg),
            Proto::H2(_) => false,
        }
    }

    pub(crate) fn resume<S: Service<Pending = Pending>>(
        &mut self,
        head: &mut RequestHead,
        cx: &mut Cx,
        svc: &mut S,
    ) {
        if let Proto::H1(c) = self {
            c.resume(head, cx, svc);
        }
    }

    pub(crate) fn is_idle(&self) -> bool {
        match self {
            Proto::H1(c) => c.is_idle(),
            Proto::H2(c) => c.is_idle(),
        }
    }

    pub(crate) fn outstanding(&self) -> usize {
        match self {
            Proto::H1(c) => c.outstanding(),
            Proto::H2(c) => c.outstanding(),
        }
    }

    pub(crate) fn release(&mut self, pool: &mut Pool) {
        match self {
            Proto::H1(c) => c.release(pool),
            Proto::H2(c) => c.release(pool),
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
            Proto::H2(c) => c.recv(input, head, cx, svc),
        }
    }

    pub(crate) fn eof<S: Service<Pending = Pending>>(&mut self, cx: &mut Cx, svc: &mut S) {
        match self {
            Proto::H1(c) => c.eof(cx, svc),
            Proto::H2(c) => c.eof(cx, svc),
        }
    }

    pub(crate) fn complete(&mut self, id: u64, resp: Response, cx: &mut Cx) -> bool {
        match self {
            Proto::H1(c) => c.complete(id, resp, cx),
            Proto::H2(c) => c.complete(id, resp, cx),
        }
    }

    pub(crate) fn on_timer<S: Service<Pending = Pending>>(&mut self, cx: &mut Cx, svc: &mut S) {
        match self {
            Proto::H1(c) => c.on_timer(cx, svc),
            Proto::H2(c) => c.on_timer(cx, svc),
        }
    }

    pub(crate) fn drain(&mut self, cx: &mut Cx) {
        match self {
            Proto::H1(c) => c.drain(cx),
            Proto::H2(c) => c.drain(cx),
        }
    }

    #[inline(always)]
    pub(crate) fn poll_transmit(&mut self, cx: &mut Cx) -> Transmit<'_> {
        match self {
            Proto::H1(c) => c.poll_transmit(cx),
            Proto::H2(c) => c.poll_transmit(cx),
        }
    }

    #[inline(always)]
    pub(crate) fn take_output(&mut self, cx: &mut Cx) -> Vec<u8> {
        match self {
            Proto::H1(c) => c.take_output(cx),
            Proto::H2(c) => c.take_output(cx),
        }
    }

    #[inline(always)]
    pub(crate) fn sent(&mut self, cx: &mut Cx) {
        match self {
            Proto::H1(c) => c.sent(cx),
            Proto::H2(c) => c.sent(cx),
        }
    }

    pub(crate) fn stalled(&mut self, cx: &Cx) {
        match self {
            Proto::H1(c) => c.stalled(cx),
            Proto::H2(c) => c.stalled(cx),
        }
    }

    pub(crate) fn file_sent(&mut self, n: u64, cx: &mut Cx) {
        match self {
            Proto::H1(c) => c.file_sent(n, cx),
            Proto::H2(c) => c.file_sent(n, cx),
        }
    }

    pub(crate) fn file_taken(&mut self) {
        match self {
            Proto::H1(c) => c.file_taken(),
            Proto::H2(c) => c.file_taken(),
        }
    }

    pub(crate) fn shutdown_taken(&mut self) {
        match self {
            Proto::H1(c) => c.shutdown_taken(),
            Proto::H2(c) => c.shutdown_taken(),
        }
    }

    pub(crate) fn shut(&mut self, cx: &mut Cx) {
        match self {
            Proto::H1(c) => c.shut(cx),
            Proto::H2(c) => c.shut(cx),
        }
    }
}
