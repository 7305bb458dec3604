//! WebSocket routes in a build without the `websocket` feature: none can be registered, so
//! `websocket` cannot be called (its `WsRoute` cannot be made), and an HTTP/2 extended
//! CONNECT, never announced, is answered 501 as one for an unknown protocol is.
//!
//! Each method has its counterpart's signature in websocket.rs.
#![forbid(unsafe_code)]

use crate::app::ConnApp;
use crate::app::dispatch::Pending;
use crate::app::phase::headers::text_status;
use crate::app::request::Params;
use crate::app::router::Route;
use crate::h1::{Decision, Exchange};

impl<'a> ConnApp<'a> {
    #[cold]
    #[inline(never)]
    pub(crate) fn extended_connect<const LAYERED: bool>(
        &mut self,
        req: Exchange<'_>,
    ) -> Decision<Pending> {
        self.respond(req.head, req.buf, text_status(501))
    }

    pub(crate) fn websocket(
        &mut self,
        _route: &Route,
        _params: &Params,
        _req: Exchange<'_>,
        ws: &crate::websocket::WsRoute,
    ) -> Decision<Pending> {
        match *ws {}
    }
}
