//! The layers' `before` hooks (middleware): the router's, after the access phase, and a
//! group's, once its route is found; their `after` hooks run as the answer is finished
//! (`headers.rs`).
//!
//! Owns one request's pass through its layers (`AppIo::layered`); must not be reached by a
//! router without layers (`dispatch::<LAYERED>` is instantiated without this code).
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::panic::{AssertUnwindSafe, catch_unwind};

use linerate_http1::RequestHead;

use crate::app::ConnApp;
use crate::app::layer::Layered;
use crate::app::phase::headers::text_status;
use crate::app::request::{Params, Request};
use crate::app::response::Response;
use crate::app::router::Route;

/// The request as its layers' `before` hooks see it: no extensions (theirs are the `&mut`
/// beside it).
struct LayerView<'c, 'a>(&'c ConnApp<'a>);

impl crate::request::Context for LayerView<'_, '_> {
    fn peer(&self) -> Option<SocketAddr> {
        self.0.client().copied()
    }
    fn client_cert(&self) -> Option<&crate::tls::ClientCert> {
        self.0.client_cert()
    }
    fn extensions(&self) -> &crate::layer::Extensions {
        &crate::layer::NO_EXTENSIONS
    }
    fn state(&self) -> &crate::layer::Extensions {
        &self.0.app.router.state
    }
    fn trace(&self) -> Option<crate::trace::TraceContext> {
        self.0.trace_context()
    }
}

impl<'a> ConnApp<'a> {
    /// Runs `layers`' `before` hooks for the request at hand (a router's, with `route`
    /// `None`, or a group's, with its route's parameters), after any that already ran; their
    /// answer, if one answers. Out of line: a router without layers never calls it.
    #[cold]
    #[inline(never)]
    pub(crate) fn layers_before(
        &mut self,
        layers: &[std::sync::Arc<dyn crate::layer::Layer>],
        route: Option<(&Route, &Params)>,
        head: &RequestHead,
        buf: &[u8],
    ) -> Option<Response> {
        let no_params = Params::default();
        let (names, params): (&[String], &Params) = match route {
            Some((r, p)) => (&r.names, p),
            None => (&[], &no_params),
        };
        // A group's layers go on after the router's; a router's begin a new pass.
        let mut layered = if route.is_some() {
            std::mem::take(&mut *self.io.layered)
        } else {
            Layered::default()
        };
        layered.active = true;
        let request = Request {
            head,
            buf,
            names,
            params,
            body: &[],
            trailers: None,
            // Layers are handed theirs as `&mut`.
            ctx: &LayerView(self),
        };
        let answer = catch_unwind(AssertUnwindSafe(|| layered.before(layers, &request)))
            .unwrap_or_else(|_| {
                tracing::error!("layer panicked; answering 500");
                crate::app::panics::count(crate::app::panics::Panic::Http);
                Some(text_status(500).close())
            });
        *self.io.layered = layered;
        answer
    }
}
