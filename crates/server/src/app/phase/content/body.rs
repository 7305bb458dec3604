//! A request body still to come: where it goes as the connection reads it (a buffer, a
//! handler's sink, a proxied request's buffer or pipe, a handler called at the head) and the
//! limit it is read to (a route's own, the site's, or the streaming one).
//!
//! Owns the [`Pending`] state the connection holds between events; must not call handlers
//! (the body's end goes back to `route.rs` or `proxy.rs`).
#![forbid(unsafe_code)]

use linerate_http1::RequestHead;

use crate::app::ConnApp;
use crate::app::deferred::OwnedHead;
use crate::app::incoming::Feed;
use crate::app::layer::Layered;
use crate::app::request::Params;
use crate::app::router::{BodySink, Route};
use crate::h1::Decision;
use crate::proxy::pipe::PipeIn;

/// A request whose body is being read: its route, and where the body goes. Boxed, so the
/// [`Decision`] every request returns stays the size of a `Response`.
pub(crate) struct Pending(pub(crate) Box<PendingBody>);

pub(crate) struct PendingBody {
    pub(crate) route: usize,
    pub(crate) site: usize,
    /// When the request's head was in (µs; 0 unless timing).
    pub(crate) started: u64,
    pub(crate) params: Params,
    pub(crate) head: OwnedHead,
    pub(crate) sink: Sink,
    /// The request's layers, whose hooks go on when the body is in.
    pub(crate) layered: Option<Box<Layered>>,
}

pub(crate) enum Sink {
    Buffer(Vec<u8>),
    Stream(Box<dyn BodySink>),
    /// A proxied request's body (`route` in [`PendingBody`] is the site's proxy route).
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    Proxy(Vec<u8>),
    /// A proxied request's body going up as it arrives (the request went up already).
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    Relay(PipeIn),
    /// A [`Router::deferred_incoming`](super::router::Router::deferred_incoming) handler's
    /// body, going to it as it arrives (the handler has the request already).
    Incoming(Feed),
    /// A unary gRPC call's body, read whole; its first message's prefix is judged as soon as
    /// it arrives, so a message over the limit is refused before it is held.
    #[cfg_attr(not(feature = "grpc"), allow(dead_code))]
    Grpc(Vec<u8>),
}

impl<'a> ConnApp<'a> {
    /// The body limit for buffering and deferred handlers on this request's site.
    pub(crate) fn max_body(&self) -> u64 {
        self.site_app.max_body_bytes
    }

    /// The body limit of `route` (a buffering or deferred one): its own
    /// ([`Router::body_limit`](crate::Router::body_limit)), or the site's.
    pub(crate) fn route_limit(&self, route: &Route) -> u64 {
        route.body_limit.unwrap_or(self.site_app.max_body_bytes)
    }

    /// The body is still to come: the connection reads it into `sink`.
    pub(crate) fn read_body(
        &mut self,
        route: usize,
        params: Params,
        head: &RequestHead,
        buf: &[u8],
        sink: Sink,
    ) -> Decision<Pending> {
        // `route` is a route of the router for a handler's body, a proxy route for the rest.
        let own = || self.app.router.at(route).and_then(|r| r.body_limit);
        let limit = match sink {
            Sink::Stream(_) | Sink::Incoming(_) => own().unwrap_or(self.app.max_stream_body_bytes),
            Sink::Buffer(_) | Sink::Grpc(_) => own().unwrap_or_else(|| self.max_body()),
            Sink::Proxy(_) | Sink::Relay(_) => self.max_body(),
        };
        Decision::ReadBody {
            limit,
            pending: Pending(Box::new(PendingBody {
                route,
                site: self.site,
                started: self.started,
                params,
                head: OwnedHead::copy(head, buf),
                sink,
                layered: self.io.layered.take(),
            })),
        }
    }
}
