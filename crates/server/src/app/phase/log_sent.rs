//! The log phase's lines for large HTTP/1.x answers, written when their last byte is sent:
//! `$request_time` (and the request's span) then runs to the last byte, as nginx's does,
//! instead of stopping when the answer was decided (a 20 MB cache hit that took its client
//! 59 ms logged 0.000).
//!
//! Owns those lines from the answer to its connection's drain: the log phase keeps one here
//! (its request's fields copied, as for a deferred answer), and the driver writes the lines
//! of a connection once it has nothing left to send, or as it closes. An answer below
//! [`LOG_AT_LAST_BYTE`] is written out in the call that made it, so its line is written at
//! once (no copy); HTTP/2 and HTTP/3 streams, deferred and proxied answers keep their line at
//! the answer's end as handed to the connection.
#![forbid(unsafe_code)]

use linerate_http1::{RequestHead, Version};

use crate::app::deferred::LogMeta;
use crate::app::response::Response;
use crate::app::sites::Sites;
use crate::app::{AppIo, ConnApp};

/// Body bytes from which an HTTP/1.x answer's line waits for its last byte. Smaller answers
/// fit a socket's send buffer and leave in the call that made them.
pub(crate) const LOG_AT_LAST_BYTE: usize = 64 * 1024;

/// A line waiting for its answer's last byte.
pub(crate) struct SentLine {
    /// Its connection's token.
    token: u64,
    sink: Option<usize>,
    site: usize,
    status: u16,
    bytes: usize,
    /// When its request's head was in (µs, `sys::monotonic_us`).
    started: u64,
    grpc_status: Option<&'static str>,
    meta: Box<LogMeta>,
}

/// Whether an answer with `bytes` of body to a request of `version` waits for its last byte.
#[inline(always)]
pub(crate) fn waits_for_last_byte(version: Version, bytes: usize) -> bool {
    bytes >= LOG_AT_LAST_BYTE && matches!(version, Version::Http10 | Version::Http11)
}

impl ConnApp<'_> {
    /// Keeps the line of `resp` (with `bytes` of body) for when its connection has sent it.
    #[cold]
    #[inline(never)]
    pub(crate) fn log_when_sent(
        &mut self,
        head: &RequestHead,
        buf: &[u8],
        resp: &Response,
        bytes: usize,
    ) {
        let Some(mut meta) = self.log_meta(head, buf) else {
            return;
        };
        if let crate::response::Body::Cached(c) = &resp.body {
            meta.cache = Some(c.0.outcome());
        }
        let line = SentLine {
            token: self.token,
            sink: self.site_app.log,
            site: self.site,
            status: resp.status,
            bytes,
            started: self.started,
            grpc_status: crate::grpc::logged_status(resp),
            meta: Box::new(meta),
        };
        self.io.sent_lines.push(line);
    }
}

impl AppIo {
    /// Writes the lines of connection `token`'s answers: it has sent all it had, or it is
    /// closing.
    #[cold]
    #[inline(never)]
    pub(crate) fn lines_sent(&mut self, sites: &Sites, token: u64) {
        let now = crate::sys::monotonic_us();
        let mut i = 0;
        while i < self.sent_lines.len() {
            if self.sent_lines[i].token != token {
                i += 1;
                continue;
            }
            // In the order they were kept: a pipelined connection's lines stay in order.
            let line = self.sent_lines.remove(i);
            let Some(log) = self.log.as_mut() else {
                continue;
            };
            let site = sites.get(line.site);
            let us = now.saturating_sub(line.started);
            let mut entry = (line.meta).entry(line.status, line.bytes, us, &site.server_name, None);
            entry.grpc_status = line.grpc_status;
            log.push(line.sink, &entry);
        }
    }
}
