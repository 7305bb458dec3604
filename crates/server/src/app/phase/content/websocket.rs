//! WebSocket routes: the handshake (an HTTP/1.1 upgrade, or an HTTP/2 extended CONNECT,
//! RFC 8441) checked, the route's accept function asked, and on success the connection (or
//! stream) handed over to the driver (`AppIo::upgrades`).
//!
//! Owns the 101 (over HTTP/2 the 200) and its fields; must not read a body (a handshake with
//! one is refused).
#![forbid(unsafe_code)]

use std::panic::{AssertUnwindSafe, catch_unwind};

use linerate_http1::{Framing, Method};

use crate::app::ConnApp;
use crate::app::deferred::{OwnedHead, Responder};
use crate::app::dispatch::Pending;
use crate::app::phase::headers::text_status;
use crate::app::request::{Params, Request};
use crate::app::response::Response;
use crate::app::router::{DeferredFn, Handler, Lookup, Route};
use crate::h1::{Decision, Exchange};

impl<'a> ConnApp<'a> {
    /// An HTTP/2 extended CONNECT (RFC 8441): `:protocol websocket` to a WebSocket route's
    /// path opens it as a handshake would; the same path without a WebSocket route is 404
    /// or 405 (its `Allow` naming what it takes), another protocol 501.
    #[cold]
    #[inline(never)]
    pub(crate) fn extended_connect<const LAYERED: bool>(
        &mut self,
        req: Exchange<'_>,
    ) -> Decision<Pending> {
        let (app, head) = (self.app, req.head);
        if req.protocol != Some(b"websocket") {
            return self.respond(head, req.buf, text_status(501));
        }
        let path = head.path_bytes(req.buf);
        let mut params = Params::default();
        let lookup = if self.site_app.app {
            app.router.lookup(Method::Get, path, &mut params)
        } else {
            Lookup::NotFound
        };
        match lookup {
            Lookup::Found(index, route) if matches!(route.handler, Handler::WebSocket(_)) => {
                self.route::<LAYERED>(index, route, params, req)
            }
            Lookup::Found(..) | Lookup::MethodNotAllowed(_) => {
                let allow = app.router.allowed(Some(path)).join(", ");
                self.not_allowed(head, req.buf, allow)
            }
            Lookup::NotFound => self.respond(head, req.buf, text_status(404)),
        }
    }

    /// A WebSocket route's request: the handshake checked, the route's accept function
    /// asked, and on success the connection handed over (the driver places the 101 once this
    /// call returns: `AppIo::upgrade`). Out of line: no other route runs its code.
    #[cold]
    #[inline(never)]
    pub(crate) fn websocket(
        &mut self,
        route: &Route,
        params: &Params,
        req: Exchange<'_>,
        ws: &crate::websocket::WsRoute,
    ) -> Decision<Pending> {
        let head = req.head;
        // A handshake carries no body (RFC 6455 §4.1: a GET); one that does is refused
        // rather than read. Over HTTP/2 the stream stays open: what follows is the tunnel's.
        let http2 = req.protocol.is_some();
        let bodiless = matches!(head.framing(), Framing::None | Framing::Length(0));
        let mut hs = match crate::websocket::check(head, req.buf, &ws.options) {
            Ok(hs) if http2 || (bodiless && req.body.is_some()) => hs,
            Ok(_) => return self.respond(head, req.buf, text_status(400).close()),
            Err(refusal) => return self.respond(head, req.buf, refusal),
        };
        if let Some(chain) = &ws.chain {
            return self.websocket_chained(route, *params, req, chain);
        }
        let request = Request {
            head,
            buf: req.buf,
            names: &route.names,
            params,
            body: &[],
            trailers: None,
            ctx: self,
        };
        let accepted = catch_unwind(AssertUnwindSafe(|| (ws.accept)(&request, &mut hs)));
        let handler = match accepted {
            Ok(Ok(handler)) => handler,
            Ok(Err(resp)) => return self.answer(req.id, head, req.buf, resp),
            Err(_) => {
                tracing::error!("WebSocket accept function panicked; answering 500");
                return self.respond(head, req.buf, text_status(500).close());
            }
        };
        let (mut fields, deflate) = crate::websocket::accepted_fields(hs);
        // The 101 (over HTTP/2 the 200) passes through the route's layers like any answer (a
        // request id, CORS fields); what they add goes out with it.
        let mut resp = Response::new(if http2 { 200 } else { 101 });
        if self.app.layered && self.io.layered.active {
            self.io.layered.run_after(&mut resp);
            fields.extend(
                resp.headers
                    .iter()
                    .map(|(n, v)| (n.to_string(), v.to_string())),
            );
        }
        if self.app.timing {
            self.account(head, req.buf, &resp);
        }
        self.io.extras = true;
        self.io.upgrades.push(crate::websocket::Upgrade {
            id: req.id,
            handler,
            fields,
            limits: ws.options.limits,
            deflate,
        });
        Decision::Relay { upgrade: true }
    }

    /// A WebSocket route under async layers (its handshake checked already): the request
    /// handed to its chain (`websocket/chained.rs`) as a deferred one is, its answer to come
    /// back with the upgrade, if the accept function took it. Over HTTP/1.1 nothing after the
    /// handshake is read as HTTP until then (`Decision::Relay { upgrade }`): the 101 makes it
    /// the WebSocket's, any other answer closes the connection after it (RFC 6455 §4.2.2
    /// leaves it to the server). Over HTTP/2 any other answer ends the stream (RFC 8441).
    /// No deferred timeout, as for the other routes whose chain runs at the head: a route
    /// timeout (`Router::timeout`) bounds the time to the upgrade.
    #[cold]
    #[inline(never)]
    fn websocket_chained(
        &mut self,
        route: &Route,
        params: Params,
        req: Exchange<'_>,
        chain: &DeferredFn,
    ) -> Decision<Pending> {
        let head = req.head;
        if self.io.outstanding >= self.app.max_deferred_per_worker {
            self.io.counters.refused();
            let resp = text_status(503).header("Retry-After", "1");
            return self.respond(head, req.buf, resp);
        }
        let meta = self.meta(head, req.buf);
        let ext = meta
            .layered
            .as_ref()
            .map(|l| l.ext.clone())
            .unwrap_or_default();
        self.io.outstanding += 1;
        self.io.counters.set_outstanding(self.io.outstanding);
        // The driver looks for upgrades where this is set (never cleared).
        self.io.extras = true;
        let responder = Responder::new(self.io.inbox.clone(), self.token, req.id, meta);
        let head = OwnedHead::copy(head, req.buf);
        let owned = self.owned_request(route, params, head, (Vec::new(), None), ext);
        if catch_unwind(AssertUnwindSafe(|| chain(owned, responder))).is_err() {
            // Unwinding dropped the Responder: its 500 is on the way.
            tracing::error!("WebSocket route's chain panicked; answering 500");
        }
        Decision::Relay { upgrade: true }
    }
}
