//! The content phase: what produces the answer — a route's handler (`route.rs`, answering
//! later: `defer.rs`), a WebSocket route (`websocket.rs`), the site's static files
//! (`files.rs`), the server's answers about methods (`methods.rs`), a unary gRPC call
//! (`grpc.rs`) or a proxy mount (`proxy.rs`); `body.rs` is a body still to come and where it
//! goes.
//!
//! Owns the choice between them; must not finish an answer (`headers.rs` does). A new content
//! handler (gRPC, a cache hit) is one more file here and one more arm in this choice.
#![forbid(unsafe_code)]

pub(crate) mod body;
pub(crate) mod defer;
pub(crate) mod files;
#[cfg(feature = "grpc")]
pub(crate) mod grpc;
#[cfg(not(feature = "grpc"))]
#[path = "grpc_off.rs"]
pub(crate) mod grpc;
pub(crate) mod methods;
#[cfg(feature = "proxy")]
pub(crate) mod proxy;
#[cfg(not(feature = "proxy"))]
#[path = "proxy_off.rs"]
pub(crate) mod proxy;
#[cfg(feature = "proxy")]
pub(crate) mod purge;
pub(crate) mod route;
#[cfg(feature = "websocket")]
pub(crate) mod websocket;
#[cfg(not(feature = "websocket"))]
#[path = "websocket_off.rs"]
pub(crate) mod websocket;

use crate::app::ConnApp;
use crate::app::dispatch::Pending;
use crate::app::request::Params;
use crate::app::router::Lookup;
use crate::h1::{Decision, Exchange};

impl<'a> ConnApp<'a> {
    /// The route that serves the request's path and method; a path routes serve with other
    /// methods only is 405; anything else goes to the site's static files (or 404).
    #[inline(always)]
    pub(crate) fn content<const LAYERED: bool>(&mut self, req: Exchange<'_>) -> Decision<Pending> {
        let app = self.app;
        let head = req.head;
        let path = head.path_bytes(req.buf);
        let mut params = Params::default();
        if self.site_app.app
            && let Some((index, route)) = app.router.first_match(path, &mut params)
        {
            if route.method == head.method() {
                return self.route::<LAYERED>(index, route, params, req);
            }
            return match app
                .router
                .lookup_method(index, head.method(), path, &mut params)
            {
                Lookup::Found(index, route) => self.route::<LAYERED>(index, route, params, req),
                Lookup::NotFound => self.unrouted(head, req.buf),
                Lookup::MethodNotAllowed(allow) => self.not_allowed(head, req.buf, allow),
            };
        }
        self.unrouted(head, req.buf)
    }
}
