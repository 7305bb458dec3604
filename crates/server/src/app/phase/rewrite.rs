//! The rewrite phase: the site's redirects and fixed returns, before any content (routes,
//! files, proxy mounts) sees the request.
//!
//! Owns the decision to answer with a redirect or a configured return (`SiteApp::redirect`,
//! templates in `app/redirect.rs`); must not look at routes or files.
#![forbid(unsafe_code)]

use linerate_http1::RequestHead;

use crate::app::ConnApp;
use crate::app::response::Response;

impl<'a> ConnApp<'a> {
    /// The site's redirect or fixed answer for the request, if a rule matches its path.
    #[inline(always)]
    pub(crate) fn rewrite(&self, head: &RequestHead, buf: &[u8]) -> Option<Response> {
        self.site_app.redirect(head, buf)
    }
}
