//! The site phase: which site answers the request (by its authority or Host, once per head),
//! and a listener that sends every request to HTTPS.
//!
//! Owns the choice of `ConnApp::site`; must not look at the path beyond the ACME challenge
//! (the HTTPS redirect answers it), nor add the site's fields to the redirect: they are for
//! its HTTPS answers.
#![forbid(unsafe_code)]

use linerate_http1::RequestHead;

use crate::app::ConnApp;
use crate::app::dispatch::Pending;
use crate::h1::{Decision, Exchange};

impl<'a> ConnApp<'a> {
    /// Picks the site that answers the request at hand. One length test for a server without
    /// configured sites.
    #[inline(always)]
    pub(crate) fn pick_site(&mut self, head: &RequestHead, buf: &[u8]) {
        self.site = self.sites.pick(head, buf);
        self.site_app = self.sites.get(self.site);
    }

    /// A request on a listener that sends everything to HTTPS. The answer is not the site's:
    /// its fields are for its HTTPS answers (HSTS over plain HTTP is forbidden, RFC 6797
    /// §7.2, and an `immutable` Cache-Control would pin the redirect), so none are added.
    #[cold]
    #[inline(never)]
    pub(crate) fn redirect_to_https(&mut self, port: u16, req: Exchange<'_>) -> Decision<Pending> {
        let resp = match self.http01(req.head, req.buf) {
            Some(answer) => answer,
            None => self.site_app.https_redirect(req.head, req.buf, port),
        };
        if self.app.timing {
            self.account(req.head, req.buf, &resp);
        }
        Decision::Respond(resp)
    }
}
