//! The access phase: whether the client may go on — the CA's HTTP-01 validation first (a site
//! behind basic auth or an allow list must still prove itself), then the site's access rules,
//! rate limits, basic auth and JWT checks — and, in the same out-of-line call, whether the path
//! is below one of the site's proxy mounts (which `content/proxy.rs` owns).
//!
//! Owns refusals (400, 401, 403, 429); must not route or rewrite. A site with neither rules
//! nor proxy mounts pays one test (`SiteApp::gated`).
#![forbid(unsafe_code)]

use linerate_http1::{Method, RequestHead};

use crate::app::ConnApp;
use crate::app::dispatch::Pending;
use crate::app::phase::headers::text_status;
use crate::app::response::Response;
use crate::h1::Decision;

/// What [`ConnApp::gate`] decided for a request it does not let go on.
pub(crate) enum Gate {
    /// Refused by the site's access rules.
    Answer(Decision<Pending>),
    /// Below this proxy mount.
    Proxy(usize),
}

impl<'a> ConnApp<'a> {
    /// A site with access rules or proxy mounts: the refusal of a client its rules do not
    /// let in, or the proxying of a request below a mount (every method but CONNECT); `None`
    /// when the request goes on to the redirects, routes and files. Out of line: a site with
    /// neither pays only the test of `gated`.
    #[cold]
    #[inline(never)]
    pub(crate) fn gate(&mut self, head: &RequestHead, buf: &[u8]) -> Option<Gate> {
        // The CA's HTTP-01 validation, before the site's rules (a site behind basic auth
        // or an allow list must still prove itself).
        if let Some(resp) = self.http01(head, buf) {
            return Some(Gate::Answer(self.respond(head, buf, resp)));
        }
        if self.site_app.checks {
            use crate::app::sites::Refusal;
            let peer = self.client().map(|p| p.ip());
            let counters = &self.io.counters;
            let admitted = self.site_app.admit(
                head.path_bytes(buf),
                peer,
                |name| head.header(buf, name),
                |name| {
                    let mut named = head
                        .headers(buf)
                        .filter(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()));
                    named.next().is_some() && named.next().is_some()
                },
                || counters.rate_limit_full(),
            );
            if let Err(refusal) = admitted {
                let resp = match refusal {
                    Refusal::BadPath => text_status(400),
                    Refusal::Denied => text_status(403),
                    Refusal::Limited { retry_after_s } => {
                        counters.rate_limited();
                        text_status(429).header("Retry-After", retry_after_s.to_string())
                    }
                    Refusal::Unauthorized(challenge) => {
                        text_status(401).header("WWW-Authenticate", challenge)
                    }
                    Refusal::Bearer { status, challenge } => {
                        text_status(status).header("WWW-Authenticate", challenge)
                    }
                };
                return Some(Gate::Answer(self.respond(head, buf, resp)));
            }
        }
        self.proxy_mount(head, buf).map(Gate::Proxy)
    }

    /// The key authorization of an HTTP-01 challenge in flight, for a GET or HEAD of
    /// `/.well-known/acme-challenge/TOKEN` (RFC 8555 §8.3); `None` for anything else, which
    /// goes on as any request (an operator's own files there included).
    #[cold]
    #[inline(never)]
    pub(crate) fn http01(&self, head: &RequestHead, buf: &[u8]) -> Option<Response> {
        let challenges = self.app.http01.as_ref()?;
        if !matches!(head.method(), Method::Get | Method::Head) {
            return None;
        }
        let path = head.path_bytes(buf);
        let token = path.strip_prefix(crate::acme::HTTP01_PREFIX.as_bytes())?;
        let key_authorization = challenges.http01(std::str::from_utf8(token).ok()?)?;
        Some(Response::text_owned(key_authorization).content_type("application/octet-stream"))
    }
}
