//! Proxy mounts in a build without the `proxy` feature: a site has none (`crate::features`
//! refuses them at start, and their `Route` cannot be made), so `proxy_mount` finds none and
//! the calls below are dead code the compiler drops. Should one be reached, the answer is
//! 501, never a request lost.
//!
//! Each method has its counterpart's signature in proxy.rs.
#![forbid(unsafe_code)]

use linerate_http1::RequestHead;

use crate::app::ConnApp;
use crate::app::dispatch::Pending;
use crate::app::phase::headers::text_status;
use crate::h1::{Decision, Exchange};

impl<'a> ConnApp<'a> {
    /// None: no site has a proxy mount.
    #[inline(always)]
    pub(crate) fn proxy_mount(&self, _head: &RequestHead, _buf: &[u8]) -> Option<usize> {
        None
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn tunnel_not_proxied(&mut self, req: Exchange<'_>) -> Decision<Pending> {
        self.respond(req.head, req.buf, text_status(501))
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn proxy(&mut self, _route: usize, req: Exchange<'_>) -> Decision<Pending> {
        self.respond(req.head, req.buf, text_status(501))
    }

    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn relay(
        &mut self,
        _route: usize,
        head: &RequestHead,
        buf: &[u8],
        _id: u64,
        _body: Vec<u8>,
        _pipe: Option<crate::proxy::pipe::PipeOut>,
        _h1: bool,
    ) -> Decision<Pending> {
        self.respond(head, buf, text_status(501))
    }
}
