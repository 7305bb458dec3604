//! The server's answers about methods: OPTIONS (RFC 9110 §9.3.7) when no route takes it, and
//! 405 with `Allow` for a path routes serve with other methods.
//!
//! Owns `Allow` (from the routes and the static mounts); must not serve a resource.
#![forbid(unsafe_code)]

use linerate_http1::{Method, RequestHead, TargetForm};

use crate::app::ConnApp;
use crate::app::dispatch::Pending;
use crate::app::phase::headers::text_status;
use crate::app::request::Params;
use crate::app::response::Response;
use crate::app::router::{Lookup, add_method};
use crate::h1::{Decision, Exchange};

impl<'a> ConnApp<'a> {
    /// OPTIONS (RFC 9110 §9.3.7): a route registered for it answers; otherwise the server
    /// does — `204` with `Allow` for a path something serves, `200` with every method the
    /// server takes for `OPTIONS *`, `404` for a path nothing serves.
    #[cold]
    #[inline(never)]
    pub(crate) fn options(&mut self, req: Exchange<'_>) -> Decision<Pending> {
        let (app, head) = (self.app, req.head);
        let site = self.site_app;
        let asterisk = head.target_form() == TargetForm::Asterisk;
        let path = head.path_bytes(req.buf);
        if !asterisk && site.app {
            let mut params = Params::default();
            if let Lookup::Found(index, route) =
                app.router.lookup(Method::Options, path, &mut params)
            {
                return self.route::<true>(index, route, params, req);
            }
        }
        let mut allow = if site.app {
            app.router.allowed((!asterisk).then_some(path))
        } else {
            Vec::new()
        };
        if (asterisk && !site.mounts.is_empty()) || site.mount(path).is_some() {
            add_method(&mut allow, "GET");
            add_method(&mut allow, "HEAD");
        }
        let resp = if allow.is_empty() && !asterisk {
            text_status(404)
        } else {
            add_method(&mut allow, "OPTIONS");
            Response::new(if asterisk { 200 } else { 204 })
                .try_header("Allow", allow.join(", "))
                .unwrap_or_else(|_| text_status(500))
        };
        self.respond(head, req.buf, resp)
    }

    /// A path routes serve, but not with this method: 405 with `Allow`.
    #[cold]
    #[inline(never)]
    pub(crate) fn not_allowed(
        &mut self,
        head: &RequestHead,
        buf: &[u8],
        allow: String,
    ) -> Decision<Pending> {
        let resp = text_status(405)
            .try_header("Allow", allow)
            .unwrap_or_else(|_| text_status(405));
        self.respond(head, buf, resp)
    }
}
