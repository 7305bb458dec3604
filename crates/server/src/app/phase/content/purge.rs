//! The `PURGE` method on a caching proxy mount (Varnish's habit): the
//! request's URL purged from the mount's cache (every variant, scheme and port it can be
//! keyed under, `proxy/purge.rs`), here and through the shared tier on every edge, as the
//! admin listener's `POST /purge?url=` does. Only from the addresses the mount's cache
//! `purge_from` names (the client's address as the server resolved it: PROXY protocol or
//! trusted forwarded fields); anyone else gets 405, and with no `purge_from` everyone does.
//! Never forwarded upstream.
//!
//! Owns the check and the answer; must not wait for the tier: the answer comes back through
//! the worker's inbox once the tier has taken the purge (200) or not (202, kept pending).
#![forbid(unsafe_code)]

use linerate_http1::{Method, RequestHead};

use crate::app::ConnApp;
use crate::app::deferred::Responder;
use crate::app::dispatch::Pending;
use crate::app::phase::headers::text_status;
use crate::app::response::Response;
use crate::h1::Decision;

/// The methods a caching mount takes from anyone (`PURGE` is not one): its 405's `Allow`
/// (RFC 9110 §15.5.6). Every other method is the upstream's to answer.
const ALLOW: &str = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS";

/// Whether `head` is a `PURGE` (methods are case-sensitive, RFC 9110 §9.1).
#[inline(always)]
pub(crate) fn is_purge(head: &RequestHead, buf: &[u8]) -> bool {
    head.method() == Method::Other && head.method_bytes(buf) == b"PURGE"
}

impl<'a> ConnApp<'a> {
    /// A `PURGE` of a URL below caching mount `route`: see the module's doc.
    #[cold]
    #[inline(never)]
    pub(crate) fn purge(
        &mut self,
        route: usize,
        head: &RequestHead,
        buf: &[u8],
        id: u64,
    ) -> Decision<Pending> {
        let Some(cache) = self.site_app.proxies[route].cache.clone() else {
            return self.respond(head, buf, text_status(405).header("Allow", ALLOW));
        };
        let allowed = self.client().is_some_and(|a| cache.purge_allowed(a.ip()));
        if !allowed {
            return self.respond(head, buf, text_status(405).header("Allow", ALLOW));
        }
        let target = head.target_bytes(buf);
        let url = match (head.host(buf), target.first()) {
            (Some(host), Some(b'/')) => format!(
                "{}://{}{}",
                if self.tls { "https" } else { "http" },
                String::from_utf8_lossy(host),
                String::from_utf8_lossy(target)
            ),
            _ => return self.respond(head, buf, text_status(400)),
        };
        let Some(keys) =
            crate::proxy::purge::url_keys(&url, &self.sites.ports, cache.opts.key.as_deref())
        else {
            return self.respond(head, buf, text_status(400));
        };
        let meta = self.meta(head, buf);
        self.io.outstanding += 1;
        self.io.counters.set_outstanding(self.io.outstanding);
        let responder = Responder::new(self.io.inbox.clone(), self.token, id, meta);
        cache.purge_keys_then(keys, move |removed, took| {
            // As the admin purge: 202 while the tier has not taken it (kept, done when it is
            // back; RFC 9110 §15.3.3), naming what is pending.
            let (status, body) = if took {
                (200, format!("purged {removed}\n"))
            } else {
                (202, format!("purged {removed}\npending: {url}\n"))
            };
            responder.send(Response::text_owned(body).status(status));
        });
        Decision::Defer
    }
}
