//! The application layer: what to answer. Routing and the handler API, static files,
//! compression, access-log records, deferred answers.
//!
//! Owns every decision about a request's answer and none about bytes on a socket: it is the
//! [`Service`](crate::h1::Service) the connection state machine calls, and it never makes a
//! socket syscall or blocks the worker — a handler that must wait is deferred and answers
//! through a [`Responder`](deferred::Responder). Two things here touch the system, both
//! bounded and off the socket path: the static-file resolver opens and stats files below its
//! root (with a per-worker cache that serves hits without a syscall), and the access log's
//! writer thread writes the lines the workers format.
//!
//! Files: `dispatch` (the per-connection service: the sequence of a request's phases), `phase/`
//! (one file per phase: accept, site, access, layers, rewrite, content, headers, log), `router`,
//! `request`/`response` (the handler API), `around` (async layers, route timeouts),
//! `deferred` (owned requests, `Responder`, the inbox), `incoming` (a request body streamed to
//! a handler elsewhere), `files` (static files), `compress`, `access_log`; `extractors`,
//! `path_params` and `handler` (handlers with typed arguments), `worker_value` (per-worker
//! values).

pub mod access_log;
pub mod around;
pub(crate) mod around_kinds;
#[cfg(feature = "brotli")]
mod br;
#[cfg(not(feature = "brotli"))]
#[path = "br_off.rs"]
mod br;
pub mod compress;
#[cfg(feature = "proxy")]
pub(crate) mod compress_stream;
pub mod deferred;
pub(crate) mod dispatch;
pub mod extract;
pub mod files;
#[cfg(feature = "gzip")]
mod gz;
#[cfg(not(feature = "gzip"))]
#[path = "gz_off.rs"]
mod gz;
pub mod incoming;
pub mod layer;
pub mod layers;
pub(crate) mod panics;
pub(crate) mod phase;
pub(crate) mod redirect;
pub mod request;
pub mod response;
pub mod router;
pub(crate) mod sites;
pub mod sse;
pub(crate) mod static_gz;
pub mod streaming;
#[cfg(feature = "websocket")]
pub mod websocket;
#[cfg(not(feature = "websocket"))]
#[path = "websocket/off.rs"]
pub(crate) mod websocket;
// typed extractors, per-worker values
pub(crate) mod extractors;
pub(crate) mod handler;
mod path_params;
pub(crate) mod worker_value;

use std::sync::Arc;

use crate::config::Config;
use crate::stats::Counters;
use access_log::LogBuffer;
use deferred::{Done, Inbox, Waiting};
use files::StaticFiles;
use response::Response;
use router::Router;

pub(crate) use dispatch::{ConnApp, Pending};

/// What every worker shares, read-only: the routes and the settings answers depend on.
pub(crate) struct App {
    pub router: Router,
    /// The router or one of its routes has layers: without, the dispatcher runs no layer
    /// code at all (one test of this per request).
    pub layered: bool,
    /// The router has state (`Router::with_state`), which deferred requests carry.
    pub stateful: bool,
    /// Largest body for streaming handlers (a site's `max_body_bytes` is for the others).
    pub max_stream_body_bytes: u64,
    /// Deferred requests one worker may have outstanding; beyond, 503 with Retry-After.
    pub max_deferred_per_worker: usize,
    /// The proxies whose fields name the client (none: the connection's peer is the client).
    pub trusted: crate::realip::TrustedProxies,
    /// Count requests for `/metrics` (an admin listener is on).
    pub metrics: bool,
    /// Time requests (metrics, the access log or tracing are on).
    pub timing: bool,
    /// Draw each request's ids (`trace::RequestTrace::begin`): tracing, an access log or a
    /// proxy mount that sends them is on.
    pub ids: bool,
    /// Tracing's sampler, when tracing is on.
    pub sampler: Option<crate::trace::Sampler>,
    /// The field proxied requests carry their request id in (`None`: not sent).
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))]
    pub request_id_field: Option<Box<[u8]>>,
    /// The HTTP-01 challenges in flight, answered below `/.well-known/acme-challenge/` on
    /// every listener (when the ACME challenge is HTTP-01).
    pub http01: Option<Arc<crate::acme::Challenges>>,
}

impl App {
    pub(crate) fn new(
        router: Router,
        config: &Config,
        http01: Option<Arc<crate::acme::Challenges>>,
    ) -> App {
        App {
            http01,
            layered: router.has_layers(),
            stateful: !router.state.is_empty(),
            router,
            max_stream_body_bytes: config.max_stream_body_bytes,
            max_deferred_per_worker: config.max_deferred_per_worker,
            trusted: config.trusted_proxies.clone(),
            metrics: config.admin.is_some(),
            timing: config.admin.is_some() || config.logs() || config.tracing.is_some(),
            ids: config.tracing.is_some()
                || config.logs()
                || (config.request_id_field.is_some() && config.proxies()),
            sampler: config.tracing.as_ref().map(|t| t.sampler.clone()),
            request_id_field: config
                .request_id_field
                .as_ref()
                .map(|f| f.as_bytes().into()),
        }
    }
}

/// One worker's application state.
pub(crate) struct AppIo {
    /// This worker's static-file servers (their own open-file caches), by site and mount.
    pub files: Vec<Vec<StaticFiles>>,
    pub log: Option<LogBuffer>,
    /// Where this worker's deferred answers come back.
    pub inbox: Arc<Inbox>,
    /// Responders handed out and not yet reported back.
    pub outstanding: usize,
    /// The deferred requests still waited for, by (connection token, request id): removed
    /// by their answer or by their timeout's 503, whichever comes first.
    pub waiting: rustc_hash::FxHashMap<(u64, u64), Waiting>,
    /// The `Cancel`s of deferred requests answered, for the next ones.
    pub cancels: deferred::Cancels,
    pub counters: Arc<Counters>,
    /// Metrics are on (`App::metrics`, kept here for the driver's close path).
    pub counters_on: bool,
    /// Static files compressed on the fly, cached.
    pub static_gz: static_gz::StaticGz,
    /// Proxied requests decided in this call, for the driver to send upstream: boxed where
    /// they are made (in a spare box), so a job of several hundred bytes is not moved into
    /// this list, out of it and into its box (two copies, ~250 instructions a proxied
    /// request, callgrind).
    #[allow(clippy::vec_box)] // The box is what the driver keeps.
    pub jobs: Vec<Box<crate::proxy::job::Job>>,
    /// Job boxes and head buffers of proxied exchanges done with, for the next ones.
    #[cfg_attr(not(feature = "proxy"), allow(dead_code))] // Without the proxy, no job.
    pub spares: crate::proxy::job::Spares,
    /// The client of the request at hand as trusted proxies named it (set as each request
    /// begins, only when trusted proxies are configured: see `ConnApp::client`).
    pub real: Option<std::net::SocketAddr>,
    /// The client certificate of the TLS connection at hand (set as each of its events
    /// begins; stale for a plain one, so read only through `ConnApp::client_cert`).
    pub client_cert: Option<Arc<crate::tls::ClientCert>>,
    /// This worker's per-site counters, by site index (empty unless metrics are on).
    pub site_counters: Arc<[crate::stats::SiteCounters]>,
    /// The request at hand's pass through its layers (inactive and empty without layers).
    pub layered: Box<layer::Layered>,
    /// WebSocket handshakes accepted in this call, for the driver to hand their connection
    /// (HTTP/1.1: at most one) or their streams (HTTP/2) over (see `driver::ws`).
    pub upgrades: Vec<websocket::Upgrade>,
    /// The worker proxies or serves QUIC, or one of its connections has had a streamed
    /// answer or a WebSocket handshake: only then does a connection's event look at relays,
    /// streams, upgrades and HTTP/3 (one test in the common server; set where each begins,
    /// never cleared).
    pub extras: bool,
    /// Access-log lines of streamed gRPC answers, written at their end (`grpc_line_end`).
    pub grpc_lines: Vec<GrpcLine>,
    /// Access-log lines of large HTTP/1.x answers, written when their last byte is sent
    /// (`phase/log_sent.rs`).
    pub sent_lines: Vec<phase::log_sent::SentLine>,
    /// The worker's id generator (request ids, trace and span ids).
    pub ids: crate::trace::context::Ids,
    /// The ids of the request at hand (set as each request begins when `App::ids`).
    pub trace: crate::trace::RequestTrace,
}

/// A streamed gRPC answer's access-log line, kept from its head to its end: its
/// `grpc-status` comes in its trailers.
pub(crate) struct GrpcLine {
    /// Its connection's token and request id.
    at: (u64, u64),
    sink: Option<usize>,
    site: usize,
    status: u16,
    bytes: usize,
    /// When its request's head was in (µs).
    started: u64,
    meta: Box<deferred::LogMeta>,
}

impl AppIo {
    /// Turns a deferred answer that came back into the response to send (and whether it
    /// answers a HEAD request): a dropped
    /// `Responder` is a 500; compression and the access-log line happen here, on the worker,
    /// as for any answer.
    pub(crate) fn finish(
        &mut self,
        app: &App,
        sites: &sites::Sites,
        done: Done,
    ) -> (u64, u64, Response, bool, Option<Box<websocket::Upgrade>>) {
        self.outstanding = self.outstanding.saturating_sub(1);
        self.counters.set_outstanding(self.outstanding);
        let Done {
            token,
            id,
            resp,
            mut meta,
            upgrade,
        } = done;
        // A deferred request's layers wait here, unless its timeout took them (then this
        // answer is late: the connection drops it).
        let (layered, given_up) = match meta.cancel.take() {
            Some(cancel) => {
                let layered = self.waiting.remove(&(token, id)).and_then(|w| w.layered);
                let given_up = cancel.is_given_up();
                self.cancels.put(cancel);
                (layered, given_up)
            }
            None => (meta.layered.take(), false),
        };
        let mut resp = match resp {
            // An accepted handshake's 101 is the one answer of that status the worker
            // sends: it hands the connection over with it (`websocket/chained.rs`).
            Some(resp) if upgrade.is_some() && resp.status == 101 => resp,
            Some(mut resp) => {
                dispatch::guard(&mut resp);
                resp
            }
            None => {
                if !given_up {
                    tracing::error!("a deferred handler dropped its Responder without answering");
                }
                // The server's own answer: an error renderer renders it.
                let mut resp = crate::h1::status_response(500, "the handler did not answer");
                resp.rejection = true;
                resp
            }
        };
        if let Some(layered) = layered {
            layered.after(&mut resp);
        }
        let site = sites.get(meta.site);
        if let Some(path) = &meta.path {
            resp = site.decorate(path, resp, dispatch::generated);
        }
        if compress::eligible(&resp, &site.compression) {
            resp = compress::negotiate(resp, meta.accept_encoding.as_deref(), &site.compression);
        }
        let us = crate::sys::monotonic_us().saturating_sub(meta.started);
        if app.metrics {
            self.counters
                .answered(resp.status, crate::stats::Kind::Route, us);
            if let Some(s) = self.site_counters.get(meta.site) {
                s.answered(resp.status, body_bytes(meta.head, &resp) as u64);
            }
        }
        if let Some(log) = self.log.as_mut()
            && let Some(m) = meta.log.take()
        {
            let sink = site.log;
            let bytes = body_bytes(meta.head, &resp);
            let grpc_status = crate::grpc::logged_status(&resp);
            if grpc_status.is_none() && crate::grpc::streamed(&resp) {
                // Its status comes with its trailers: the line is written at its end.
                self.grpc_lines.push(GrpcLine {
                    at: (token, id),
                    sink,
                    site: meta.site,
                    status: resp.status,
                    bytes,
                    started: meta.started,
                    meta: m,
                });
            } else {
                let mut entry = m.entry(resp.status, bytes, us, &site.server_name, None);
                entry.grpc_status = grpc_status;
                log.push(sink, &entry);
            }
        }
        (token, id, resp, meta.head, upgrade)
    }

    /// The streamed answer to request `at` is over: the access-log line of a gRPC one is
    /// written now, with `grpc_status` (its trailers'; `None` when it was cut off or its
    /// client went before them) and its whole time.
    #[cold]
    pub(crate) fn grpc_line_end(
        &mut self,
        sites: &sites::Sites,
        at: (u64, u64),
        grpc_status: Option<&'static str>,
    ) {
        let Some(i) = self.grpc_lines.iter().position(|l| l.at == at) else {
            return;
        };
        let line = self.grpc_lines.swap_remove(i);
        let Some(log) = self.log.as_mut() else {
            return;
        };
        let site = sites.get(line.site);
        let us = crate::sys::monotonic_us().saturating_sub(line.started);
        let mut entry = (line.meta).entry(line.status, line.bytes, us, &site.server_name, None);
        entry.grpc_status = grpc_status;
        log.push(line.sink, &entry);
    }
}

/// Body bytes an answer puts on the wire (for the log): none for HEAD or bodiless statuses.
pub(crate) fn body_bytes(head_request: bool, resp: &Response) -> usize {
    if head_request || linerate_http1::status_has_no_body(resp.status) {
        0
    } else {
        resp.body.len() as usize
    }
}
