//! The headers phase: an answer's finishing — the layers' `after` hooks, the site's fields
//! and error pages, compression — then the log phase. Also the server's own status answers
//! (`text_status`) and the guard on what a handler may send.
//!
//! Owns every answer's last changes before the driver frames it; must not choose an answer
//! (a cache store would plug in here, after compression). Answers that come back later are
//! finished the same way by `AppIo::finish`, from the [`Meta`] made here.
#![forbid(unsafe_code)]

use linerate_http1::{Method, RequestHead};

use crate::app::ConnApp;
use crate::app::compress;
use crate::app::deferred::{Meta, Responder};
use crate::app::dispatch::Pending;
use crate::app::response::{Body, Response, Unsendable, checked};
use crate::h1::Decision;

impl<'a> ConnApp<'a> {
    /// A handler's (or a layer's) answer to request `id`: [`ConnApp::respond`], or a
    /// streamed body's way. Only these can be streamed: the server's own answers never are,
    /// so their path has no test for it, and neither has [`ConnApp`] the request's number.
    #[inline(always)]
    pub(crate) fn answer(
        &mut self,
        id: u64,
        head: &RequestHead,
        buf: &[u8],
        resp: Response,
    ) -> Decision<Pending> {
        if let Body::Stream(_) = resp.body {
            return self.respond_stream(id, head, buf, resp);
        }
        self.respond(head, buf, resp)
    }

    /// An answer decided now: compressed when eligible, logged. A layer's `after` hook or
    /// an error page that turns it into a streamed body is refused with a 500 (they answer
    /// what is decided, not a body produced later).
    #[inline(always)]
    pub(crate) fn respond(
        &mut self,
        head: &RequestHead,
        buf: &[u8],
        mut resp: Response,
    ) -> Decision<Pending> {
        if self.app.layered && self.io.layered.active {
            self.io.layered.run_after(&mut resp);
            unstream(&mut resp);
        }
        let site = self.site_app;
        if site.decorates {
            resp = site.decorate(head.path_bytes(buf), resp, generated);
            unstream(&mut resp);
        }
        // HEAD is compressed too, so its Content-Length matches GET's (RFC 9110 §9.3.2).
        // Eligibility first: most responses (small, binary, files) never look up the field.
        if compress::eligible(&resp, &site.compression) {
            let accept = head.header(buf, "accept-encoding");
            resp = compress::negotiate(resp, accept, &site.compression);
        }
        if self.app.timing {
            self.account(head, buf, &resp);
        }
        Decision::Respond(resp)
    }

    /// A handler answered with a streamed body: it goes the deferred answers' way (through
    /// the worker's inbox, where `Worker::answers` places its head and starts taking its
    /// pieces), so one path finishes every streamed answer.
    #[cold]
    #[inline(never)]
    fn respond_stream(
        &mut self,
        id: u64,
        head: &RequestHead,
        buf: &[u8],
        resp: Response,
    ) -> Decision<Pending> {
        let meta = self.meta(head, buf);
        self.io.outstanding += 1;
        self.io.counters.set_outstanding(self.io.outstanding);
        Responder::new(self.io.inbox.clone(), self.token, id, meta).send(resp);
        Decision::Defer
    }

    /// What the worker needs to finish an answer that comes back later (see `Meta`); the
    /// request's layers move into it.
    pub(crate) fn meta(&mut self, h: &RequestHead, buf: &[u8]) -> Meta {
        let site = self.site_app;
        Meta {
            head: h.method() == Method::Head,
            site: self.site,
            started: self.started,
            path: site.decorates.then(|| h.path_bytes(buf).to_vec()),
            accept_encoding: site
                .compression
                .enabled
                .then(|| h.header(buf, "accept-encoding").map(<[u8]>::to_vec))
                .flatten(),
            log: self.log_meta(h, buf).map(Box::new),
            layered: self.io.layered.take(),
            cancel: None,
        }
    }
}

/// Replaces a handler's answer that cannot go out ([`checked`]) with a 500 that closes the
/// connection, and one log line: a 101 sent as a plain answer would leave the client speaking
/// a protocol this connection never switched to. A 200 without extra fields or trailers
/// (most answers) is let through on three comparisons; the rest is checked out of line
/// (checked inline, the request path of /json grew by 33 instructions, callgrind).
#[inline(always)]
pub(crate) fn guard(resp: &mut Response) {
    if resp.status != 200 || !resp.headers.is_empty() || resp.trailers.is_some() {
        guard_slow(resp);
    }
}

#[inline(never)]
fn guard_slow(resp: &mut Response) {
    if let Err(why) = checked(resp) {
        *resp = unsendable(resp.status, why);
    }
}

#[cold]
#[inline(never)]
fn unsendable(status: u16, why: Unsendable) -> Response {
    match why {
        Unsendable::Status => tracing::error!(
            status,
            "handler answered with a status that is not a final answer (switching protocols needs an API that hands the connection over, which handlers do not have yet); answering 500"
        ),
        Unsendable::Upgrade => tracing::error!(
            status,
            "handler set Upgrade on an answer other than 426 (switching protocols needs an API that hands the connection over, which handlers do not have yet); answering 500"
        ),
        Unsendable::Trailer => tracing::error!(
            status,
            "handler set a trailer field that is invalid or may not be a trailer (RFC 9110 §6.5.1: framing, routing, authentication, caching or content fields); answering 500"
        ),
    }
    text_status(500).close()
}

/// A streamed body where only a decided answer can go (a layer's `after` hook, an error
/// page) becomes a 500 with one log line: sent as it is, it would look like a complete,
/// empty answer. Its writer learns `Gone` when the body is dropped.
#[inline(always)]
pub(crate) fn unstream(resp: &mut Response) {
    if let Body::Stream(_) = resp.body {
        unstreamed(resp);
    }
}

#[cold]
#[inline(never)]
fn unstreamed(resp: &mut Response) {
    tracing::error!(
        status = resp.status,
        "a layer or an error page answered with a streamed body, which only a handler can; answering 500"
    );
    *resp = text_status(500).close();
}

/// A response whose body is the status line's reason.
pub(crate) fn text_status(status: u16) -> Response {
    Response::text(status_body(status)).status(status)
}

/// Whether `resp`'s body is the one [`text_status`] generates for its status (an error page
/// may replace it; a handler's own body stays).
pub(crate) fn generated(resp: &Response) -> bool {
    matches!(&resp.body, Body::Static(b) if *b == status_body(resp.status).as_bytes())
}

/// The body [`text_status`] sends for `status`.
fn status_body(status: u16) -> &'static str {
    match status {
        400 => "Bad Request\n",
        401 => "Unauthorized\n",
        403 => "Forbidden\n",
        404 => "Not Found\n",
        405 => "Method Not Allowed\n",
        413 => crate::h1::TOO_LARGE,
        429 => "Too Many Requests\n",
        500 => "Internal Server Error\n",
        501 => "Not Implemented\n",
        503 => "Service Unavailable\n",
        _ => "",
    }
}
