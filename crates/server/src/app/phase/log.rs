//! The log phase: an answer counted (metrics: by kind and by site) and its access-log record
//! written, with the time since its head was in; a request refused before a site took it goes
//! to the default site's log. A large HTTP/1.x answer's line waits for its last byte
//! (`log_sent.rs`).
//!
//! Owns the records; must not change the answer. Runs only when `App::timing` (metrics or a
//! log) is on.
#![forbid(unsafe_code)]

use linerate_http1::ParseError;
use linerate_http1::{Method, RequestHead};

use super::log_sent;
use crate::app::ConnApp;
use crate::app::access_log::{AccessEntry, Fields, RefusedEntry};
use crate::app::body_bytes;
use crate::app::deferred::LogMeta;
use crate::app::response::Response;

impl<'a> ConnApp<'a> {
    /// Counts the answer (metrics) and writes its access-log line, with the time since the
    /// request's head was in.
    #[inline(never)]
    pub(crate) fn account(&mut self, head: &RequestHead, buf: &[u8], resp: &Response) {
        let us = crate::sys::monotonic_us().saturating_sub(self.started);
        let bytes = body_bytes(head.method() == Method::Head, resp);
        if self.app.metrics {
            self.io.counters.answered(resp.status, self.kind, us);
            if let Some(s) = self.io.site_counters.get(self.site) {
                s.answered(resp.status, bytes as u64);
            }
        }
        let site = self.site_app;
        // Nothing to record where the site keeps no log and tracing does not record this
        // request (another site's log made the buffer).
        if self.io.log.is_none() || (site.log.is_none() && !self.io.trace.recorded()) {
            return;
        }
        if log_sent::waits_for_last_byte(head.version(), bytes) {
            return self.log_when_sent(head, buf, resp, bytes);
        }
        let peer = self.client().copied();
        if let Some(log) = self.io.log.as_mut() {
            log.push(
                site.log,
                &AccessEntry {
                    peer,
                    method: head.method_str(buf),
                    target: head.target(buf),
                    version: head.version(),
                    status: resp.status,
                    bytes,
                    referer: head.header(buf, "referer"),
                    user_agent: head.header(buf, "user-agent"),
                    request_time_us: Some(us),
                    tls: self.tls,
                    host: crate::app::sites::request_host_bytes(head, buf),
                    server_name: &site.server_name,
                    fields: Fields::Head(head, buf),
                    upstream: None,
                    grpc_status: crate::grpc::logged_status(resp),
                    // The content phase's fresh hits are the only cached answers here.
                    cache_status: match &resp.body {
                        crate::response::Body::Cached(c) => Some(c.0.outcome()),
                        _ => None,
                    },
                    trace: self.app.ids.then_some(&self.io.trace),
                },
            );
        }
    }

    /// A request refused before a site took it (the connection's 400, 413, 431…): counted,
    /// and written to the default site's log (nginx's default server).
    #[inline(always)]
    pub(crate) fn log_refusal(
        &mut self,
        status: u16,
        error: Option<ParseError>,
        body_bytes: u64,
        request_line: &[u8],
    ) {
        if self.app.metrics {
            self.io.counters.refusal(status, error);
        }
        // Refused before a site took it: the default site's log (nginx's default server).
        let site = self.sites.default_site();
        if let (Some(log), Some(sink)) = (self.io.log.as_mut(), site.log) {
            log.push_refusal(
                sink,
                &RefusedEntry {
                    peer: self.peer.copied(),
                    line: request_line,
                    status,
                    bytes: body_bytes as usize,
                    tls: self.tls,
                    server_name: &site.server_name,
                },
            );
        }
    }

    /// What the access log (and tracing) need of a request answered later, when its site
    /// logs or its spans are recorded.
    pub(crate) fn log_meta(&self, h: &RequestHead, buf: &[u8]) -> Option<LogMeta> {
        let log = self.io.log.as_ref()?;
        if self.site_app.log.is_none() && !self.io.trace.recorded() {
            return None;
        }
        Some(LogMeta::keep(
            log,
            self.client().copied(),
            self.tls,
            h,
            buf,
            &self.io.trace,
        ))
    }
}
