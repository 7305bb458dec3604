//! HTTP/2 upstreams (`protocol = "h2c"`): per worker and server, a few `h2u::Conn`s, each
//! carrying many proxied requests at once as streams, owned by the same loop, backend and
//! timer wheel as the HTTP/1.1 upstream connections (`upstream.rs`, which hands a job here
//! when its upstream speaks HTTP/2).
//!
//! Owns: which connection takes a request (the first of its server's with room; a new one
//! only when none has, `OpenError::NoRoom`, or they are closing), the request's head as
//! pseudo-headers and fields, its body sent as both windows allow, the answer's head, DATA
//! and trailers relayed to the client, flow control end to end (a stream's bytes are
//! reported consumed only while the client's answer has room, so a slow client holds one
//! stream window, never more), cancellation (the client gone: RST_STREAM(CANCEL), paced by
//! `h2u`'s reset budget so a burst never trips the upstream's rapid-reset guard), and the
//! failures: 502 before the head (another try when the server refused the stream or the
//! connection never came up), 504 for the connect and first-byte timeouts, a cut answer
//! after it. It must not block, and it makes no syscall but through the backend.
#![forbid(unsafe_code)]

use std::borrow::Cow;

use super::backend::{Backend, Completion, Submitted, Token};
use super::upstream::{Books, Ended};
use super::upstream_tls::{self, Handshake, UpTls};
use super::{Shared, Worker};
use crate::app::deferred::LogMeta;
use crate::app::sites::SiteSet;
use crate::config::{HealthCheck, Upstream, UpstreamAddr, UpstreamProtocol};
use crate::h1::{Cx, StreamHead};
use crate::h1c::{self, ReqBody};
use crate::h2u::{self, Fields, OpenError, StreamError};
use crate::proxy::grpc_check::{self, Probe};
use crate::proxy::grpc_web::{self, Web};
use crate::proxy::job::Job;
use crate::proxy::pipe::PipeOut;
use crate::response::{Field, Response};
use crate::stats::UpCounters;

/// Tries of one request beyond the upstream's `tries` when an HTTP/2 upstream did not process
/// it (RFC 9113 §8.7: refused, above a GOAWAY's last stream id, or never sent before its
/// connection closed). Nothing was processed, so any method goes again, each time on a
/// connection other than the one that refused it. Servers refuse for a moment at their
/// stream limit and while closing a connection; one that refused four in a row on different
/// connections refuses everything (it is shutting down, or allows no stream), and the client
/// hears 502 rather than the request going round.
pub(crate) const UNPROCESSED_RETRIES: u32 = 4;
/// The most of a relayed request body (one still arriving, through its pipe) kept to send
/// again after such a refusal: a gRPC call's messages or a small upload. Past it the copy is
/// dropped, and a refusal after the body began is the client's 502.
const REPLAY_MAX: usize = crate::proxy::pipe::PIPE_ROOM;

/// An HTTP/2 upstream connection in its slot.
pub(super) struct H2Live {
    conn: h2u::Conn,
    /// Its upstream (index into the sites' upstreams) and server.
    group: usize,
    server: usize,
    /// The pools' epoch it was made in: one from before a reload takes no new stream.
    epoch: u32,
    /// The connect completed (nothing is sent before).
    connected: bool,
    /// The connection broke or ended: nothing more is sent, and it closes.
    dead: bool,
    /// When connecting gives up (ms).
    connect_by: u64,
    /// When its wheel entry fires (ms).
    armed: u64,
    receiving: bool,
    /// The first-byte and between-reads timeout of its streams (ms).
    timeout: u64,
    /// How long it stays open without a stream (the upstream's `idle_timeout`, ms), and
    /// until when it may now (`u64::MAX`: streams are open).
    idle: u64,
    idle_by: u64,
    /// The exchanges on it, one per open stream (few: a linear search is the cheapest).
    links: Vec<Link>,
    /// Its TLS session (`protocol = "h2"`; `upstream_tls.rs`): HTTP/2 bytes pass through it,
    /// and none go out before its handshake chose `h2`.
    tls: Option<Box<UpTls>>,
    /// Requests waiting for its server's SETTINGS (it opens one stream before them, RFC
    /// 9113 §5.1.2's limit being unknown until then): sent on once they came, as many as it
    /// allows here, the rest on another connection.
    #[allow(clippy::vec_box)] // jobs travel boxed: `dispatch` takes them so
    waiting: Vec<Box<Job>>,
    /// An active check's connection (gRPC's health Check, `proxy/grpc_check.rs`): its one
    /// call. Never in the pools' list, so no request is sent on it; its `idle` is the
    /// check's timeout, which covers connecting too.
    probe: Option<Box<Probe>>,
}

impl H2Live {
    /// Whether a request may open a stream on it now.
    fn takes(&self, group: usize, server: usize, epoch: u32) -> bool {
        self.group == group
            && self.server == server
            && self.epoch == epoch
            && !self.dead
            && self.conn.can_open()
    }
}

/// One proxied exchange on a stream.
struct Link {
    stream: u32,
    /// The client's connection and the request's number on it.
    client: Token,
    id: u64,
    site: usize,
    route: usize,
    /// The request, kept until the answer's head for another try.
    job: Option<Box<Job>>,
    /// A body that came whole with the head, and how much of it is sent.
    body: Vec<u8>,
    sent_body: usize,
    /// The body still arriving from the client.
    pipe: Option<PipeOut>,
    /// What of `pipe` went up so far, kept for another try after a refusal (up to
    /// [`REPLAY_MAX`]); `replay_lost` once it outgrew that.
    replay: Vec<u8>,
    replay_lost: bool,
    body_done: bool,
    /// The answer's final head, held until this read's events are all in: a head that ends
    /// the stream (gRPC's Trailers-Only) goes to the client as one block with END_STREAM.
    head: Option<Held>,
    /// The client got the answer's head (a failure now cuts it).
    answered: bool,
    status: u16,
    bytes: u64,
    /// Bytes passed to the client's answer while it was full: reported consumed once it
    /// has room again.
    owed: usize,
    paused: bool,
    head_request: bool,
    /// When the request's head was in, and when it went upstream (µs).
    started: u64,
    sent: u64,
    /// When the first byte, or the next, must have come (ms).
    deadline: u64,
    log: Option<LogMeta>,
    path: Option<Box<[u8]>>,
    /// A gRPC-Web request sent as gRPC (`proxy/grpc_web.rs`): its answer goes back as this.
    web: Option<Web>,
    /// The answer's `grpc-status` (its trailers', or a Trailers-Only head's), for the log.
    grpc_status: Option<&'static str>,
}

/// An answer's head on its way to the client: status, fields, the body's length if known.
type Held = (u16, Vec<(Vec<u8>, Vec<u8>)>, Option<u64>);

/// A request's method, path, authority and fields, as HTTP/2 sends them: slices of the
/// job's head (names as framed; `h2u`'s encoder lowercases them on the way out), so a call
/// allocates only the list.
struct H2Head<'a> {
    method: &'a [u8],
    target: &'a [u8],
    authority: &'a [u8],
    fields: Vec<(&'a [u8], &'a [u8])>,
}

/// Fields a forwarded head usually carries, to size the list once.
const USUAL_FIELDS: usize = 12;

/// What the events of one call left for the driver.
#[derive(Default)]
struct After {
    /// Client connections with output to move.
    clients: Vec<Token>,
    /// Streams to cancel (their client is gone).
    cancel: Vec<u32>,
    /// (stream, bytes) the client's connection took.
    consumed: Vec<(u32, usize)>,
    /// Streams whose body may go on.
    writable: Vec<u32>,
    /// Requests to send again (on another connection).
    #[allow(clippy::vec_box)] // jobs travel boxed: `dispatch` takes them so
    retry: Vec<Box<Job>>,
    /// Client connections that stopped reading a relayed body for room, and the request.
    wake: Vec<(Token, u64)>,
    /// The server failed (passive health counts it).
    server_failed: bool,
    /// Exchanges that left the connection (no longer in flight for `least_conn`).
    ended: usize,
    /// The active check's verdict, once its call ended.
    probe: Option<bool>,
}

/// The upstream connection's view of the client side during one call.
struct Relay<'a> {
    links: &'a mut Vec<Link>,
    slots: &'a mut [super::Slot],
    cx: &'a mut Cx,
    sites: &'a SiteSet,
    log: &'a mut Option<crate::app::access_log::LogBuffer>,
    counters: Option<&'a crate::stats::Counters>,
    site_counters: &'a [crate::stats::SiteCounters],
    stats: Option<&'a UpCounters>,
    addr: Option<&'a UpstreamAddr>,
    upstream: &'a str,
    /// This connection's token (a request it refused avoids it next time).
    token: Token,
    /// The connection was established (a failure before is a connect failure: retried).
    connected: bool,
    tries: u32,
    server: usize,
    timeout: u64,
    /// The active check's call, on a check's connection.
    probe: Option<&'a mut Probe>,
    after: &'a mut After,
}

/// The client connection of `token`, if it is still there.
fn client(slots: &mut [super::Slot], token: Token) -> Option<&mut super::Live> {
    let slot = slots.get_mut((token & 0xffff_ffff) as usize)?;
    if slot.generation != (token >> 32) as u32 {
        return None;
    }
    slot.live.as_mut()
}

/// Runs `write` on the client connection of `token`, if it is still there, and keeps what
/// it staged as that connection's own output. One call relays answers to many clients
/// before any of them transmits: a byte left in the worker's `cx.out` would go out on
/// whichever client connection transmits first (another client's answer).
fn to_client<R>(
    slots: &mut [super::Slot],
    token: Token,
    cx: &mut Cx,
    write: impl FnOnce(&mut super::Live, &mut Cx) -> R,
) -> Option<R> {
    let live = client(slots, token)?;
    let r = write(live, cx);
    live.conn.keep_output(cx);
    Some(r)
}

/// The upstream request of `job` as HTTP/2: its head (framed as HTTP/1.1 by
/// `proxy::forward`, with the same fields rules) read back into the method, the target, the
/// authority (`Host`) and the fields; the connection-specific fields are left out (RFC 9113
/// §8.2.2) and `te: trailers` is sent, since the answer's trailers are relayed (gRPC servers
/// ask for it).
fn h2_request(job: &Job) -> Option<H2Head<'_>> {
    let head = &job.head[..];
    let line_end = head.windows(2).position(|w| w == b"\r\n")?;
    let mut parts = head[..line_end].split(|&b| b == b' ');
    let method = parts.next()?;
    let target = parts.next()?;
    let mut authority = &b""[..];
    let mut fields = Vec::with_capacity(USUAL_FIELDS);
    let framed_length = matches!(job.forwarded.body, ReqBody::Length(_));
    for line in head[line_end + 2..].split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
        if is(b"host") {
            authority = value;
        } else if is(b"connection")
            || is(b"keep-alive")
            || is(b"proxy-connection")
            || is(b"transfer-encoding")
            || is(b"upgrade")
            || is(b"te")
            // The length is the body's as it goes up: none for one still arriving chunked.
            || (!framed_length && is(b"content-length"))
        {
        } else {
            fields.push((name, value));
        }
    }
    fields.push((&b"te"[..], &b"trailers"[..]));
    Some(H2Head {
        method,
        target,
        authority,
        fields,
    })
}

impl Relay<'_> {
    fn link(&mut self, stream: u32) -> Option<usize> {
        self.links.iter().position(|l| l.stream == stream)
    }

    /// Link `i` leaves the connection (its exchange is over, or goes elsewhere).
    fn take(&mut self, i: usize) -> Link {
        self.after.ended += 1;
        self.links.swap_remove(i)
    }

    /// Logs and counts an exchange's answer.
    fn account(&mut self, status: u16, bytes: u64, link: &Link) {
        let ended = Ended {
            site: link.site,
            started: link.started,
            sent: link.sent,
            answered: link.answered,
            up_status: link.status,
            log: link.log.as_ref(),
            grpc_status: link.grpc_status,
        };
        let books = Books {
            sites: self.sites,
            log: &mut *self.log,
            counters: self.counters,
            site_counters: self.site_counters,
            stats: self.stats,
            addr: self.addr,
        };
        books.account(status, bytes, ended);
    }

    /// The exchange is over while its body may still be arriving: the client's connection
    /// reads the rest and drops it.
    fn close_pipe(&mut self, link: &mut Link) {
        if link.pipe.take().is_some_and(|p| p.close()) {
            self.after.wake.push((link.client, link.id));
        }
    }

    /// Answers the client with `status` (the site's error page when it has one) and logs it.
    fn answer_error(&mut self, status: u16, link: &mut Link) {
        self.close_pipe(link);
        let site = self.sites.sites.iter().nth(link.site);
        let resp = site
            .and_then(|s| s.error_page(status))
            .unwrap_or_else(|| crate::h1::status_response(status, ""));
        let bytes = if link.head_request {
            0
        } else {
            resp.body.len()
        };
        to_client(self.slots, link.client, self.cx, |live, cx| {
            cx.alt_svc = live.alt_svc;
            live.conn.complete(link.id, resp, cx);
            cx.alt_svc = None;
        });
        self.after.clients.push(link.client);
        self.account(status, bytes, link);
    }

    /// Sends link `i`'s held head to the client as the head of a streamed answer.
    fn flush_head(&mut self, i: usize) {
        let link = &mut self.links[i];
        let Some((status, fields, length)) = link.head.take() else {
            return;
        };
        let fields: Vec<(&[u8], &[u8])> = fields
            .iter()
            .map(|(n, v)| (&n[..], &v[..]))
            .chain([(&b"via"[..], &b"2 linerate"[..])])
            .collect();
        let head = StreamHead {
            status,
            fields: &fields,
            length,
            date: None,
        };
        let started = to_client(self.slots, link.client, self.cx, |live, cx| {
            cx.alt_svc = live.alt_svc;
            let started = live.conn.start_stream(link.id, &head, cx);
            cx.alt_svc = None;
            started
        })
        .unwrap_or(false);
        link.answered = true;
        if started {
            self.after.clients.push(link.client);
        } else {
            self.gone(i);
        }
    }

    /// A link whose answer is whole leaves its stream: bytes still owed are given back (the
    /// stream adds no more to the client's answer), and a request body not yet all sent is
    /// given up (RST_STREAM CANCEL: the server answered early, RFC 9113 §8.1), or the
    /// stream would stay open against the server's MAX_CONCURRENT_STREAMS.
    fn release(&mut self, link: &Link) {
        if link.owed > 0 {
            self.after.consumed.push((link.stream, link.owed));
        }
        if !link.body_done {
            self.after.cancel.push(link.stream);
        }
    }

    /// Link `i`'s client is gone: its stream is cancelled.
    fn gone(&mut self, i: usize) {
        let mut link = self.take(i);
        self.after.cancel.push(link.stream);
        self.close_pipe(&mut link);
        let (status, bytes) = (link.status, link.bytes);
        self.account(status, bytes, &link);
    }

    /// Sends every held head (the read's events are all in: none of them ended its stream).
    fn flush_heads(&mut self) {
        let mut i = 0;
        while i < self.links.len() {
            if self.links[i].head.is_some() {
                let n = self.links.len();
                self.flush_head(i);
                if self.links.len() < n {
                    continue;
                }
            }
            i += 1;
        }
    }

    /// Link `i` fails with `status` (no answer yet) or is cut (answered).
    fn fail(&mut self, i: usize, status: u16, why: &dyn std::fmt::Display) {
        let mut link = self.take(i);
        if link.answered {
            crate::log_limit::warn_limited!("upstream exchange cut", self.upstream, upstream = %self.upstream, error = %why, "HTTP/2 upstream stream failed after its answer began");
            self.close_pipe(&mut link);
            to_client(self.slots, link.client, self.cx, |live, cx| {
                live.conn.stream_abort(link.id, cx);
            });
            self.after.clients.push(link.client);
            let (status, bytes) = (link.status, link.bytes);
            self.account(status, bytes, &link);
        } else {
            crate::log_limit::warn_limited!("upstream exchange failed", self.upstream, upstream = %self.upstream, error = %why, status, "HTTP/2 upstream stream failed");
            self.answer_error(status, &mut link);
        }
    }
}

impl h2u::Events for Relay<'_> {
    fn head(&mut self, stream: u32, status: u16, fields: &Fields) {
        let Some(i) = self.link(stream) else {
            return self.probe_event(stream, |p| {
                p.head(status, fields.iter());
                None
            });
        };
        let link = &mut self.links[i];
        if status < 200 {
            link.deadline = self.cx.now + self.timeout;
            // RFC 9110 §15.2: interim answers are forwarded (103 Early Hints), as for
            // HTTP/1.1 upstreams; a 100 answers this hop's own request.
            if status != 100 && link.job.as_ref().is_none_or(|j| j.then.is_none()) {
                let default = crate::proxy::reply::Policy::default();
                let policy = (self.sites.sites.iter().nth(link.site))
                    .and_then(|s| s.proxies.get(link.route))
                    .map_or(&default, |r| &r.response);
                let out: Vec<(&[u8], &[u8])> = fields
                    .iter()
                    .filter(|(n, _)| !matches!(*n, b"date" | b"server") && !policy.names(n))
                    .collect();
                let (client, id) = (link.client, link.id);
                let sent = to_client(self.slots, client, self.cx, |live, cx| {
                    live.conn.interim(id, status, &out, cx)
                });
                if sent == Some(true) {
                    self.after.clients.push(client);
                }
            }
            return;
        }
        link.job = None;
        link.status = status;
        link.deadline = self.cx.now + self.timeout;
        let site = self.sites.sites.iter().nth(link.site);
        let default = crate::proxy::reply::Policy::default();
        let policy = site
            .and_then(|s| s.proxies.get(link.route))
            .map_or(&default, |r| &r.response);
        let mut length = None;
        let mut grpc_status = None;
        let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(fields.len() + 2);
        for (n, v) in fields.iter() {
            match n {
                // Framing, `Date` and `Server` are this server's to write (as nginx does).
                b"content-length" => {
                    length = std::str::from_utf8(v).ok().and_then(|s| s.parse().ok());
                }
                b"date" | b"server" => {}
                _ if policy.names(n) => {}
                // A Trailers-Only answer's status (its head is its trailers).
                b"grpc-status" => {
                    grpc_status = crate::grpc::status_value(v);
                    out.push((n.to_vec(), v.to_vec()));
                }
                _ => out.push((n.to_vec(), v.to_vec())),
            }
        }
        link.grpc_status = grpc_status;
        if let (Some(site), Some(path)) = (site, &link.path) {
            let added = site.proxied_fields(path);
            out.retain(|(n, _)| {
                !added
                    .iter()
                    .any(|(a, _)| n.eq_ignore_ascii_case(a.as_bytes()))
            });
            out.extend(
                added
                    .iter()
                    .filter(|(n, _)| !policy.names(n.as_bytes()))
                    .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec())),
            );
        }
        for (n, v) in &policy.set {
            out.push((n.as_bytes().to_vec(), v.as_bytes().to_vec()));
        }
        if link.head_request {
            length = Some(0);
        }
        if let Some(web) = link.web {
            // gRPC-Web's body is not the upstream's (a trailer frame, or base64).
            grpc_web::answer_fields(web, &mut out);
            length = None;
        }
        link.head = Some((status, out, length));
    }

    fn data(&mut self, stream: u32, data: &[u8]) {
        let Some(mut i) = self.link(stream) else {
            return self.probe_event(stream, |p| {
                p.data(data);
                None
            });
        };
        if self.links[i].head.is_some() {
            let n = self.links.len();
            self.flush_head(i);
            if self.links.len() < n {
                return;
            }
            i = self.link(stream).unwrap_or(i);
        }
        let link = &mut self.links[i];
        link.deadline = self.cx.now + self.timeout;
        let Some(live) = client(self.slots, link.client) else {
            return self.gone(i);
        };
        let web = link.web.and_then(|w| grpc_web::answer_data(w, data));
        let relayed = web.as_deref().unwrap_or(data);
        if !relayed.is_empty() {
            let taken = live.conn.stream_data(link.id, relayed, self.cx);
            live.conn.keep_output(self.cx);
            if !taken {
                return self.gone(i);
            }
        }
        link.bytes += relayed.len() as u64;
        self.after.clients.push(link.client);
        if live.conn.stream_room(link.id) {
            self.after.consumed.push((stream, data.len()));
        } else {
            // Held against this stream's window until the client takes it.
            link.owed += data.len();
            link.paused = true;
        }
    }

    fn trailers(&mut self, stream: u32, fields: &Fields) {
        let Some(i) = self.link(stream) else {
            return self.probe_event(stream, |p| {
                p.trailers(fields.iter());
                Some(p.passed())
            });
        };
        if self.links[i].head.is_some() {
            let n = self.links.len();
            self.flush_head(i);
            if self.links.len() < n {
                return;
            }
        }
        let Some(i) = self.link(stream) else {
            return;
        };
        if let Some((_, v)) = fields.iter().find(|(n, _)| *n == b"grpc-status") {
            self.links[i].grpc_status = crate::grpc::status_value(v);
        }
        if let Some(web) = self.links[i].web {
            // gRPC-Web: the trailers are the body's last frame, and the stream ends bare.
            let frame = grpc_web::trailer_frame(web, fields.iter());
            let link = &mut self.links[i];
            link.bytes += frame.len() as u64;
            let (client_token, id) = (link.client, link.id);
            to_client(self.slots, client_token, self.cx, |live, cx| {
                live.conn.stream_data(id, &frame, cx)
            });
            return self.finish(i, &[]);
        }
        let trailers: Vec<Field> = fields.iter().map(|(n, v)| trailer_field(n, v)).collect();
        self.finish(i, &trailers);
    }

    fn end(&mut self, stream: u32) {
        let Some(i) = self.link(stream) else {
            return self.probe_event(stream, |p| Some(p.passed()));
        };
        let link = &mut self.links[i];
        if let Some((status, mut fields, _)) = link.head.take() {
            // A head that ends the stream (gRPC's Trailers-Only): one block to the client
            // (gRPC-Web: the status in the body's trailer frame).
            let web_body = link.web.map(|w| grpc_web::trailers_only(w, &mut fields));
            let mut resp = Response::new(status);
            for (n, v) in fields {
                let (n, v) = (
                    String::from_utf8_lossy(&n).into_owned(),
                    String::from_utf8_lossy(&v).into_owned(),
                );
                if n == "content-type" {
                    resp = resp.content_type(v);
                } else {
                    resp.headers.push((Cow::Owned(n), Cow::Owned(v)));
                }
            }
            resp.headers
                .push((Cow::Borrowed("via"), Cow::Borrowed("2 linerate")));
            let bytes = web_body.as_ref().map_or(0, |b| b.len() as u64);
            if let Some(body) = web_body {
                resp.body = crate::app::response::Body::Owned(body);
            }
            let mut link = self.take(i);
            link.answered = true;
            self.release(&link);
            self.close_pipe(&mut link);
            to_client(self.slots, link.client, self.cx, |live, cx| {
                cx.alt_svc = live.alt_svc;
                live.conn.complete(link.id, resp, cx);
                cx.alt_svc = None;
            });
            self.after.clients.push(link.client);
            let status = link.status;
            self.account(status, bytes, &link);
            return;
        }
        self.finish(i, &[]);
    }

    fn failed(&mut self, stream: u32, error: StreamError) {
        let Some(i) = self.link(stream) else {
            return self.probe_event(stream, |_| Some(false));
        };
        let link = &mut self.links[i];
        // RFC 9113 §8.7: the server did not process it (on a connection that came up: one
        // that never did is a connect failure, below). Its body goes again from what is kept:
        // the body that came whole, or the copy of what its pipe gave so far.
        let unprocessed = error.retryable()
            && self.connected
            && !link.answered
            && !link.replay_lost
            && link
                .job
                .as_ref()
                .is_some_and(|j| j.unprocessed < UNPROCESSED_RETRIES);
        if unprocessed {
            // Not the server's failure: passive health does not count it.
            let mut link = self.take(i);
            if let Some(mut job) = link.job.take() {
                job.unprocessed += 1;
                job.avoid_conn = Some(self.token);
                job.log = link.log.take();
                job.pipe = link.pipe.take();
                // What went up of it: the body given whole (or kept from an earlier try),
                // then what the pipe gave since; the pipe's rest follows.
                let mut body = std::mem::take(&mut link.body);
                body.extend_from_slice(&link.replay);
                job.body = body;
                self.after.retry.push(job);
            }
            return;
        }
        let body_sent = link.sent_body > 0 || link.pipe.as_ref().is_some_and(|p| p.taken() > 0);
        // A stream the server refused did nothing (RFC 9113 §8.7), nor did one on a
        // connection that never came up: another connection may take it as it is.
        let again = !link.answered
            && !body_sent
            && (error.retryable() || !self.connected)
            && link.job.as_ref().is_some_and(|j| j.tries + 1 < self.tries);
        if !error.retryable() || !self.connected {
            self.after.server_failed = true;
        }
        if let Some(st) = self.stats {
            // The causes `UpCounters::failed` counts (connect, timeout, closed, malformed).
            st.failed(match error {
                _ if !self.connected => 0,
                StreamError::Malformed(_) | StreamError::Protocol(_) => 3,
                _ => 2,
            });
        }
        if again {
            let mut link = self.take(i);
            if let Some(mut job) = link.job.take() {
                job.tries += 1;
                job.failed_server = (!error.retryable() || !self.connected).then_some(self.server);
                job.log = link.log.take();
                job.pipe = link.pipe.take();
                if !link.body.is_empty() {
                    job.body = std::mem::take(&mut link.body);
                }
                self.after.retry.push(job);
            }
            return;
        }
        self.fail(i, 502, &error);
    }

    fn writable(&mut self, stream: u32) {
        self.after.writable.push(stream);
    }

    fn pong(&mut self) {}

    fn goaway(&mut self) {}
}

/// A trailer field of the upstream's answer as the client's connection takes it. gRPC's
/// `grpc-status` (every call ends with one) is borrowed from the code's own static text when
/// it is exactly that, so the common trailers cost no copy; any other field is copied.
fn trailer_field(name: &[u8], value: &[u8]) -> Field {
    let owned = |b: &[u8]| Cow::Owned(String::from_utf8_lossy(b).into_owned());
    if name == b"grpc-status"
        && let Some(code) = crate::grpc::status_value(value).filter(|c| c.as_bytes() == value)
    {
        return (Cow::Borrowed("grpc-status"), Cow::Borrowed(code));
    }
    (owned(name), owned(value))
}

impl Relay<'_> {
    /// An event of a stream no exchange has: the active check's call, on a check's own
    /// connection; `f` gives the verdict when this event decides it. Off the relay's path
    /// (an exchange's stream is always found first).
    #[cold]
    fn probe_event(&mut self, stream: u32, f: impl FnOnce(&mut Probe) -> Option<bool>) {
        if let Some(p) = self
            .probe
            .as_deref_mut()
            .filter(|p| p.stream == stream && !p.done)
            && let Some(pass) = f(p)
        {
            p.done = true;
            self.after.probe = Some(pass);
        }
    }

    /// Link `i`'s answer is whole: the client's stream ends (with `trailers`).
    fn finish(&mut self, i: usize, trailers: &[Field]) {
        let mut link = self.take(i);
        self.release(&link);
        self.close_pipe(&mut link);
        to_client(self.slots, link.client, self.cx, |live, cx| {
            live.conn.stream_end_with(link.id, trailers, cx);
        });
        self.after.clients.push(link.client);
        let (status, bytes) = (link.status, if link.head_request { 0 } else { link.bytes });
        self.account(status, bytes, &link);
    }
}

impl<B: Backend> Worker<B> {
    /// Sends `job` to its HTTP/2 upstream: on a stream of an open connection to the server
    /// picked, or of a new one when those have no room.
    pub(super) fn dispatch_h2(&mut self, mut job: Box<Job>, up: &Upstream, sh: &Shared) {
        // Not stored by the cache (HTTP/2 upstreams answer as streams, relayed only).
        job.cache = None;
        let gi = job.upstream;
        let now = self.io.cx.now;
        let server = self.pools.pick(gi, up, now, &job);
        let epoch = self.pools.epoch();
        let found = self.pools.h2.iter().find_map(|&token| {
            let idx = (token & 0xffff_ffff) as u32;
            let slot = self.slots.get(idx as usize)?;
            // A request an upstream connection refused goes on another one.
            (slot.generation == (token >> 32) as u32
                && job.avoid_conn != Some(token)
                && slot.h2.as_ref()?.takes(gi, server, epoch))
            .then_some(idx)
        });
        if found.is_none() {
            // A connection still waiting for its server's SETTINGS takes the request in its
            // line, up to what a server allows when it says nothing.
            let line = self.pools.h2.iter().find_map(|&token| {
                let idx = (token & 0xffff_ffff) as u32;
                let slot = self.slots.get(idx as usize)?;
                let h2 = slot.h2.as_ref()?;
                (slot.generation == (token >> 32) as u32
                    && job.avoid_conn != Some(token)
                    && h2.group == gi
                    && h2.server == server
                    && h2.epoch == epoch
                    && !h2.dead
                    && !h2.conn.settled()
                    && h2.links.len() + h2.waiting.len() < h2u::ASSUMED_MAX_STREAMS as usize)
                    .then_some(idx)
            });
            if let Some(h2) = line.and_then(|idx| self.slots[idx as usize].h2.as_mut()) {
                h2.waiting.push(job);
                return;
            }
        }
        let idx = match found {
            Some(idx) => idx,
            None => match self.connect_h2(gi, server, up) {
                Some(idx) => idx,
                None => {
                    self.pools.server_failed(gi, server, up, now);
                    job.failed_server = Some(server);
                    if job.tries + 1 < up.tries {
                        job.tries += 1;
                        return self.dispatch(job, sh);
                    }
                    return self.refuse(job, 502, sh);
                }
            },
        };
        self.open_h2(idx, job, sh);
    }

    /// A new connection to server `server` of upstream `gi`, in its slot, listed in the
    /// pools for requests.
    fn connect_h2(&mut self, gi: usize, server: usize, up: &Upstream) -> Option<u32> {
        let idx = self.new_h2(gi, server, up)?;
        let token = self.token(idx);
        self.pools.h2.push(token);
        Some(idx)
    }

    /// A new connection to server `server` of upstream `gi`, in its slot (not listed).
    fn new_h2(&mut self, gi: usize, server: usize, up: &Upstream) -> Option<u32> {
        let now = self.io.cx.now;
        let ms = |d: std::time::Duration| d.as_micros().div_ceil(1000) as u64;
        let tls = match up.protocol {
            UpstreamProtocol::H2 => match tls_session(up, server) {
                Ok(tls) => Some(Box::new(tls)),
                Err(e) => {
                    crate::log_limit::warn_limited!("upstream TLS failed", &up.name, upstream = %up.name, server = %up.servers[server].addr, error = %e, "upstream TLS set-up failed");
                    return None;
                }
            },
            _ => None,
        };
        let (idx, token) = self.alloc_slot(true);
        let addr = super::upstream::up_addr(&up.servers[server].addr);
        let connected = match self.backend.connect(&addr, token) {
            Submitted::Done(()) => true,
            Submitted::Pending => false,
            Submitted::Failed => {
                crate::log_limit::warn_limited!("upstream connect failed", &up.name, upstream = %up.name, server = %up.servers[server].addr, "upstream connect failed");
                self.backend.detach(token);
                self.free.push(idx);
                return None;
            }
        };
        self.slots[idx as usize].h2 = Some(Box::new(H2Live {
            conn: h2u::Conn::new(now, h2u::Settings::default()),
            group: gi,
            server,
            epoch: self.pools.epoch(),
            connected,
            dead: false,
            connect_by: if connected {
                u64::MAX
            } else {
                now + ms(up.connect_timeout)
            },
            armed: u64::MAX,
            receiving: false,
            timeout: ms(up.timeout),
            idle: ms(up.idle_timeout),
            idle_by: u64::MAX,
            links: Vec::new(),
            tls,
            waiting: Vec::new(),
            probe: None,
        }));
        Some(idx)
    }

    /// Sends an active check to server `si` of upstream `gi` (an HTTP/2 one): gRPC's health
    /// Check call naming `check.grpc_service`, on a connection of its own (as the HTTP/1.1
    /// check's), which closes once the answer is in, or when `check.timeout` passes (a
    /// failure). Its verdict goes to `check_done` once.
    pub(super) fn start_grpc_probe(
        &mut self,
        gi: usize,
        si: usize,
        up: &Upstream,
        check: &HealthCheck,
        sh: &Shared,
    ) {
        let Some(idx) = self.new_h2(gi, si, up) else {
            return self.check_done(gi, si, false);
        };
        let authority = up.servers[si].addr.to_string();
        let fields: [(&[u8], &[u8]); 3] = [
            (b"content-type", b"application/grpc"),
            (b"te", b"trailers"),
            (b"user-agent", b"linerate-health-check"),
        ];
        let Some(h2) = self.slots[idx as usize].h2.as_mut() else {
            return;
        };
        let req = h2u::Request {
            method: b"POST",
            scheme: if h2.tls.is_some() { b"https" } else { b"http" },
            authority: authority.as_bytes(),
            path: grpc_check::PATH,
            fields: &fields,
        };
        let stream = match h2.conn.open(&req, false) {
            Ok(stream) => stream,
            Err(_) => {
                self.close_h2(idx);
                return self.check_done(gi, si, false);
            }
        };
        // A few bytes: within the initial windows, so they are all taken.
        h2.conn
            .send(stream, &grpc_check::request_body(&check.grpc_service), true);
        h2.probe = Some(Box::new(Probe::new(stream)));
        h2.idle = check.timeout.as_millis().max(1) as u64;
        h2.connect_by = u64::MAX;
        self.h2_call(idx, sh, &mut |_, _, _| {});
    }

    /// Opens a stream for `job` on the HTTP/2 connection in slot `idx` (another connection
    /// when this one has no room after all).
    fn open_h2(&mut self, idx: u32, mut job: Box<Job>, sh: &Shared) {
        let token = self.token(idx);
        let Some(h2) = self.slots[idx as usize].h2.as_mut() else {
            return;
        };
        let no_body = job.pipe.is_none() && job.body.is_empty();
        let opened = match h2_request(&job) {
            Some(head) => h2.conn.open(
                &h2u::Request {
                    method: head.method,
                    scheme: if h2.tls.is_some() { b"https" } else { b"http" },
                    authority: head.authority,
                    path: head.target,
                    fields: &head.fields,
                },
                no_body,
            ),
            None => return self.refuse(job, 502, sh),
        };
        let pipe = job.pipe.take();
        let stream = match opened {
            Ok(s) => s,
            Err(OpenError::NoRoom | OpenError::Closing) => {
                // Filled or closing since it was picked: a new connection takes it.
                job.pipe = pipe;
                let (gi, si) = (h2.group, h2.server);
                let Some(up) = self.io.sites.upstreams.get(gi).cloned() else {
                    return self.refuse(job, 502, sh);
                };
                return match self.connect_h2(gi, si, &up) {
                    Some(idx) => self.open_h2(idx, job, sh),
                    None => self.refuse(job, 502, sh),
                };
            }
            Err(OpenError::TooLarge) => return self.refuse(job, 502, sh),
        };
        let now = self.io.cx.now;
        let body = std::mem::take(&mut job.body);
        h2.links.push(Link {
            stream,
            client: job.client,
            id: job.id,
            site: job.site,
            route: job.route,
            // A body that came whole with the head is still to send (`feed_bodies`): an
            // HTTP/1.1 client's small POST, every gRPC-Web call (read whole first).
            body_done: pipe.is_none() && body.is_empty(),
            body,
            sent_body: 0,
            pipe,
            replay: Vec::new(),
            replay_lost: false,
            head: None,
            answered: false,
            status: 0,
            bytes: 0,
            owed: 0,
            paused: false,
            head_request: job.forwarded.head_request,
            started: job.started,
            sent: crate::sys::monotonic_us(),
            deadline: now + h2.timeout,
            log: job.log.take(),
            path: job.path.clone(),
            web: job.web,
            grpc_status: None,
            job: Some(job),
        });
        let client_token = h2.links.last().map_or(0, |l| l.client);
        let (gi, si) = (h2.group, h2.server);
        self.pools.in_flight(gi, si, 1);
        if let Some(live) = client(&mut self.slots, client_token) {
            // The client's output moving wakes this connection's paused streams; its close
            // cancels its streams (`drop_orphans`). Listed once per connection.
            let relays = live.relays.get_or_insert_with(Default::default);
            if !relays.0.contains(&token) {
                relays.0.push(token);
            }
        }
        if !self.h2_batching {
            self.h2_call(idx, sh, &mut |_, _, _| {});
        } else if !self.h2_opened.contains(&idx) {
            // One of a client's requests: its body and HEADERS go with the others'.
            self.h2_opened.push(idx);
        }
    }

    /// A client's requests are about to be dispatched: connections they open streams on
    /// wait for [`Worker::h2_batch_end`] to send. `false` inside a batch already (its end
    /// sends them).
    pub(super) fn h2_batch_start(&mut self) -> bool {
        !std::mem::replace(&mut self.h2_batching, true)
    }

    /// The client's requests are dispatched: each connection that took some feeds their
    /// bodies and sends what it holds, once.
    pub(super) fn h2_batch_end(&mut self, sh: &Shared) {
        self.h2_batching = false;
        let mut opened = std::mem::take(&mut self.h2_opened);
        for &idx in &opened {
            self.h2_call(idx, sh, &mut |_, _, _| {});
        }
        opened.clear();
        if self.h2_opened.is_empty() {
            self.h2_opened = opened; // its room, for the next batch
        }
    }

    /// Ciphertext in on the TLS connection in slot `idx`: its plaintext, and whether the
    /// server closed the session. `None`: the connection fails (logged), as it does when its
    /// handshake ends without `h2` (an HTTP/1.1 server is never spoken HTTP/2 to); a
    /// failure before the handshake's end is a connect failure (nothing went out).
    fn tls_recv(&mut self, idx: u32, data: &[u8]) -> Option<(Vec<u8>, bool)> {
        let h2 = self.slots[idx as usize].h2.as_mut()?;
        let tls = h2.tls.as_deref_mut()?;
        let up = self.io.sites.upstreams.get(h2.group);
        let name = up.map_or("-", |u| u.name.as_str());
        let server = up
            .and_then(|u| u.servers.get(h2.server))
            .map_or_else(|| "-".to_string(), |s| s.addr.to_string());
        let handshaking = tls.handshake() == Handshake::Going;
        let mut plain = Vec::new();
        let closed = match tls.recv(data, &mut plain) {
            Ok(closed) => closed,
            Err(e) => {
                crate::log_limit::warn_limited!("upstream TLS failed", &name, upstream = %name, server = %server, error = %e, "upstream TLS failed");
                h2.connected &= !handshaking;
                return None;
            }
        };
        if handshaking {
            match tls.handshake() {
                Handshake::Going => {}
                Handshake::H2 => h2.connect_by = u64::MAX,
                Handshake::NotH2 => {
                    tracing::warn!(upstream = %name, server = %server, alpn = %tls.alpn(), "upstream did not choose h2 by ALPN: no HTTP/2 is sent to it");
                    h2.connected = false;
                    return None;
                }
            }
        }
        Some((plain, closed))
    }

    /// Fails the streams still on the HTTP/2 connection in slot `idx`, which is closing.
    fn fail_h2(&mut self, idx: u32, sh: &Shared) {
        let Some(h2) = self.slots[idx as usize].h2.as_mut() else {
            return;
        };
        // Nothing more goes out; every stream still open fails (each client hears it).
        h2.dead = true;
        let waiting = std::mem::take(&mut h2.waiting);
        let (gi, si) = (h2.group, h2.server);
        if !h2.links.is_empty() {
            self.h2_call(idx, sh, &mut |conn, _, ev| conn.eof(ev));
        }
        // Requests that waited for its SETTINGS went nowhere: another try where the tries
        // allow (the server failed, as for a connection that never came up), else 502.
        let tries = self.io.sites.upstreams.get(gi).map_or(1, |u| u.tries);
        for mut job in waiting {
            if job.tries + 1 < tries {
                job.tries += 1;
                job.failed_server = Some(si);
                self.dispatch(job, sh);
            } else {
                self.refuse(job, 502, sh);
            }
        }
    }

    /// The slot index of an HTTP/2 upstream connection's token.
    pub(super) fn h2_token(&self, token: Token) -> Option<u32> {
        let idx = (token & 0xffff_ffff) as u32;
        let slot = self.slots.get(idx as usize)?;
        (slot.generation == (token >> 32) as u32 && slot.h2.is_some()).then_some(idx)
    }

    /// Whether slot `idx` holds an HTTP/2 upstream connection.
    pub(super) fn is_h2(&self, idx: u32) -> bool {
        self.slots.get(idx as usize).is_some_and(|s| s.h2.is_some())
    }

    /// A completion for an HTTP/2 upstream connection.
    pub(super) fn h2_event(&mut self, c: Completion, sh: &Shared) {
        let (token, idx) = match &c {
            Completion::Connected { token }
            | Completion::Received { token, .. }
            | Completion::Eof { token }
            | Completion::Sent { token, .. }
            | Completion::Failed { token } => (*token, (*token & 0xffff_ffff) as u32),
            _ => return,
        };
        if self.slots.get(idx as usize).map(|s| s.generation) != Some((token >> 32) as u32) {
            return;
        }
        match c {
            Completion::Connected { .. } => {
                if let Some(h2) = self.slots[idx as usize].h2.as_mut() {
                    h2.connected = true;
                    // Over TLS, connecting ends with the handshake (as nginx times it).
                    if h2.tls.is_none() {
                        h2.connect_by = u64::MAX;
                    }
                }
                self.h2_call(idx, sh, &mut |_, _, _| {});
            }
            Completion::Received { buf, .. } => {
                if self.slots[idx as usize]
                    .h2
                    .as_ref()
                    .is_some_and(|h2| h2.tls.is_some())
                {
                    let plain = self.tls_recv(idx, &buf);
                    self.backend.recycle(buf);
                    return match plain {
                        Some((plain, closed)) => self.h2_call(idx, sh, &mut |conn, now, ev| {
                            if !plain.is_empty() {
                                conn.recv(&plain, now, ev);
                            }
                            if closed {
                                conn.eof(ev);
                            }
                        }),
                        None => {
                            self.fail_h2(idx, sh);
                            self.close_h2(idx);
                        }
                    };
                }
                self.h2_call(idx, sh, &mut |conn, now, ev| conn.recv(&buf, now, ev));
                self.backend.recycle(buf);
            }
            Completion::Sent { mut buf, .. } => {
                self.io.cx.pool.put(&mut buf);
                let h2_out = self.slots[idx as usize]
                    .h2
                    .as_mut()
                    .and_then(|h2| h2.tls.as_mut())
                    .is_none_or(|tls| tls.sent());
                if h2_out {
                    self.h2_call(idx, sh, &mut |conn, _, ev| conn.sent(ev));
                } else {
                    self.pump_h2(idx, sh);
                }
            }
            Completion::Eof { .. } | Completion::Failed { .. } => {
                self.fail_h2(idx, sh);
                self.close_h2(idx);
            }
            _ => {}
        }
    }

    /// A deadline of the HTTP/2 upstream connection in slot `idx` passed: connecting too
    /// long, a stream's first byte or next one too late (504 before its head, cut after),
    /// or the connection's own (SETTINGS, PING).
    pub(super) fn h2_timer(&mut self, idx: u32, sh: &Shared) {
        let now = self.io.cx.now;
        let Some(h2) = self.slots[idx as usize].h2.as_mut() else {
            return;
        };
        h2.armed = u64::MAX;
        if h2.probe.is_some() && h2.idle_by <= now {
            // A check's timeout (connecting, or its answer), or its GOAWAY not out by then.
            return self.close_h2(idx);
        }
        if h2.links.is_empty() && h2.idle_by <= now {
            // Idle for the upstream's idle_timeout: GOAWAY, then closed once it is out.
            h2.conn.goaway();
            h2.idle_by = u64::MAX;
            return self.pump_h2(idx, sh);
        }
        if h2.connect_by <= now {
            tracing::warn!("HTTP/2 upstream connect timed out");
            // (Over TLS the TCP connect may be done: nothing went out on it all the same.)
            h2.connected = false;
            let (gi, si) = (h2.group, h2.server);
            if let Some(up) = self.io.sites.upstreams.get(gi).cloned() {
                self.pools.server_failed(gi, si, &up, now);
            }
            // Its streams never went out: each may try again elsewhere (`failed`).
            self.fail_h2(idx, sh);
            return self.close_h2(idx);
        }
        let late: Vec<u32> = h2
            .links
            .iter()
            .filter(|l| l.deadline <= now)
            .map(|l| l.stream)
            .collect();
        self.h2_call(idx, sh, &mut |conn, now, ev| {
            for &stream in &late {
                if let Some(i) = ev.link(stream) {
                    let status = if ev.links[i].answered { 502 } else { 504 };
                    ev.fail(i, status, &"timed out");
                    ev.after.cancel.push(stream);
                }
            }
            conn.on_timer(now, ev);
        });
    }

    /// Runs `f` on the HTTP/2 connection in slot `idx` with its relay, then does what that
    /// left to do and transmits.
    fn h2_call(
        &mut self,
        idx: u32,
        sh: &Shared,
        f: &mut dyn FnMut(&mut h2u::Conn, u64, &mut Relay<'_>),
    ) {
        let token = self.token(idx);
        let Some(mut h2) = self.slots[idx as usize].h2.take() else {
            return;
        };
        let mut after = After::default();
        let now = self.io.cx.now;
        let up = self.io.sites.upstreams.get(h2.group);
        let tries = up.map_or(1, |u| u.tries);
        {
            let counters = sh.app.metrics.then_some(&*self.io.app.counters);
            let mut relay = Relay {
                links: &mut h2.links,
                slots: &mut self.slots,
                cx: &mut self.io.cx,
                sites: &self.io.sites,
                log: &mut self.io.app.log,
                counters,
                site_counters: &self.io.app.site_counters,
                stats: self.pools.stats(h2.group, h2.server),
                addr: up.and_then(|u| u.servers.get(h2.server)).map(|s| &s.addr),
                upstream: up.map_or("-", |u| u.name.as_str()),
                token,
                connected: h2.connected,
                tries,
                server: h2.server,
                timeout: h2.timeout,
                probe: h2.probe.as_deref_mut(),
                after: &mut after,
            };
            f(&mut h2.conn, now, &mut relay);
            relay.flush_heads();
            // The body pieces that may go now (after `writable`, or new room).
            let mut rounds = 0;
            loop {
                rounds += 1;
                let woke = feed_bodies(&mut h2.conn, relay.links, relay.after);
                if !woke || rounds > 4 {
                    break;
                }
            }
            // A body that failed (the client went, or reset its stream, or the body was
            // refused): its stream is cancelled.
            let failed: Vec<u32> = relay
                .links
                .iter()
                .filter(|l| !l.body_done && l.pipe.as_ref().is_some_and(PipeOut::failed))
                .map(|l| l.stream)
                .collect();
            for stream in failed {
                if let Some(i) = relay.link(stream) {
                    relay.gone(i);
                }
            }
        }
        if !h2.waiting.is_empty() && h2.conn.settled() {
            // Its server's SETTINGS came: the requests waiting for them go on (on it while
            // it has room).
            after.retry.append(&mut h2.waiting);
        }
        for &stream in &after.cancel {
            h2.conn.cancel(stream);
        }
        for &(stream, n) in &after.consumed {
            h2.conn.consumed(stream, n);
        }
        if after.probe.is_some() {
            // The check's call is over: so is its connection.
            h2.conn.goaway();
        }
        let (gi, si) = (h2.group, h2.server);
        self.slots[idx as usize].h2 = Some(h2);
        if let Some(pass) = after.probe {
            self.check_done(gi, si, pass);
        }
        if after.server_failed
            && let Some(up) = self.io.sites.upstreams.get(gi).cloned()
        {
            self.pools.server_failed(gi, si, &up, now);
        }
        if after.ended > 0 {
            self.pools.in_flight(gi, si, -(after.ended as isize));
        }
        after.clients.dedup();
        for client in after.clients {
            self.with(client, sh, |_, _| {});
        }
        for (client, id) in after.wake {
            self.with(client, sh, |live, p| {
                live.conn.body_room(id, p.head, p.cx, &mut p.svc);
            });
        }
        for job in after.retry {
            self.dispatch(job, sh);
        }
        self.pump_h2(idx, sh);
    }

    /// Transmits what the HTTP/2 connection in slot `idx` has to send; closes it when it is
    /// done; arms receiving and the timer.
    fn pump_h2(&mut self, idx: u32, sh: &Shared) {
        let token = self.token(idx);
        let Some(h2) = self.slots[idx as usize].h2.as_mut() else {
            return;
        };
        // Nothing goes out before the connect completes.
        let transmit = if !h2.connected || h2.dead {
            h1c::Transmit::Idle
        } else if let Some(tls) = h2.tls.as_deref_mut() {
            tls_transmit(tls, &mut h2.conn)
        } else {
            h2.conn.poll_transmit()
        };
        match transmit {
            h1c::Transmit::Bytes => {
                let buf = match h2.tls.as_deref_mut() {
                    Some(tls) => tls.take_output(self.io.cx.pool.get()),
                    None => h2.conn.take_output(),
                };
                match self.backend.send(token, buf, false) {
                    Submitted::Done(mut buf) => {
                        self.io.cx.pool.put(&mut buf);
                        let h2_out = h2.tls.as_deref_mut().is_none_or(UpTls::sent);
                        if !h2_out {
                            return self.pump_h2(idx, sh);
                        }
                        // Sent: streams waiting for the output's room go on, and what they
                        // add goes out in turn (bounded by the send windows).
                        return self.h2_call(idx, sh, &mut |conn, _, ev| conn.sent(ev));
                    }
                    Submitted::Pending => {}
                    Submitted::Failed => {
                        self.fail_h2(idx, sh);
                        return self.close_h2(idx);
                    }
                }
            }
            h1c::Transmit::Close => {
                // Its streams fail first (each client hears it), then it closes.
                self.fail_h2(idx, sh);
                return self.close_h2(idx);
            }
            h1c::Transmit::Idle => {}
        }
        let epoch = self.pools.epoch();
        let Some(h2) = self.slots[idx as usize].h2.as_mut() else {
            return;
        };
        if h2.links.is_empty() && h2.epoch != epoch && h2.conn.is_idle() {
            // From before a reload: its last stream is done.
            h2.conn.goaway();
        }
        if !h2.links.is_empty() || !h2.waiting.is_empty() {
            h2.idle_by = u64::MAX;
        } else if h2.idle_by == u64::MAX {
            h2.idle_by = self.io.cx.now + h2.idle;
        }
        // A TLS session reads on through its handshake, whatever HTTP/2 wants.
        let handshaking = h2
            .tls
            .as_ref()
            .is_some_and(|t| t.handshake() == Handshake::Going);
        let want = h2.connected && !h2.dead && (h2.conn.wants_input() || handshaking);
        if want != h2.receiving {
            h2.receiving = want;
            self.backend.set_recv(token, want);
        }
        let deadline = h2
            .links
            .iter()
            .map(|l| l.deadline)
            .chain([h2.conn.deadline(), h2.connect_by, h2.idle_by])
            .min()
            .unwrap_or(u64::MAX);
        if deadline < h2.armed {
            h2.armed = self.wheel.arm(idx, deadline);
        }
    }

    /// Closes the HTTP/2 connection in slot `idx`; an exchange still on it is cut.
    pub(super) fn close_h2(&mut self, idx: u32) {
        let token = self.token(idx);
        let Some(mut h2) = self.slots[idx as usize].h2.take() else {
            return;
        };
        self.backend.detach(token);
        self.wheel.cancel(idx);
        if let Some(p) = h2.probe.take() {
            // A check's connection that closed before its answer was whole: a failure.
            self.free.push(idx);
            if !p.done {
                self.check_done(h2.group, h2.server, false);
            }
            return;
        }
        self.pools.h2.retain(|&t| t != token);
        self.pools
            .in_flight(h2.group, h2.server, -(h2.links.len() as isize));
        for link in h2.links.drain(..) {
            let written = to_client(&mut self.slots, link.client, &mut self.io.cx, |live, cx| {
                if link.answered {
                    live.conn.stream_abort(link.id, cx);
                } else {
                    live.conn
                        .complete(link.id, crate::h1::status_response(502, ""), cx);
                }
            });
            if written.is_some() {
                // Its client transmits what it was told at the loop's next turn.
                self.ready.push((link.client & 0xffff_ffff) as u32);
            }
        }
        self.free.push(idx);
    }

    /// Client `client`'s request `id` was cancelled: a request of it waiting for this
    /// connection's SETTINGS is dropped, and its stream, if it has one, cancelled
    /// (RST_STREAM(CANCEL) upstream).
    pub(super) fn cancel_h2(&mut self, idx: u32, client: Token, id: u64, sh: &Shared) {
        if let Some(h2) = self.slots[idx as usize].h2.as_mut() {
            h2.waiting.retain(|j| !(j.client == client && j.id == id));
        }
        self.h2_call(idx, sh, &mut |_, _, ev| {
            if let Some(i) = ev
                .links
                .iter()
                .position(|l| l.client == client && l.id == id)
            {
                ev.gone(i);
            }
        });
    }

    /// The HTTP/2 connection in slot `idx`: streams whose client's answer has room again
    /// report what it took; streams whose client is gone are cancelled.
    pub(super) fn resume_h2(&mut self, idx: u32, sh: &Shared) {
        self.h2_call(idx, sh, &mut |_, _, ev| {
            let mut i = 0;
            while i < ev.links.len() {
                let link = &mut ev.links[i];
                let (client_token, id) = (link.client, link.id);
                let Some(live) = client(ev.slots, client_token).filter(|l| l.conn.awaits(id))
                else {
                    // The client's connection closed, or it reset its stream.
                    ev.gone(i);
                    continue;
                };
                if link.paused && live.conn.stream_room(id) {
                    link.paused = false;
                    ev.after
                        .consumed
                        .push((link.stream, std::mem::take(&mut link.owed)));
                }
                i += 1;
            }
        });
    }
}

/// A TLS connection's next send: the handshake's records, then (once it chose `h2`) the
/// HTTP/2 output encrypted, one buffer with the backend at a time.
fn tls_transmit(tls: &mut UpTls, conn: &mut h2u::Conn) -> h1c::Transmit {
    if tls.sending() {
        return h1c::Transmit::Idle;
    }
    if tls.handshake() == Handshake::H2 {
        match conn.poll_transmit() {
            h1c::Transmit::Bytes => {
                // Held as in flight until this buffer is out (`UpTls::sent`).
                let plain = conn.take_output();
                tls.encrypt(&plain);
            }
            h1c::Transmit::Close if !tls.wants_send() => return h1c::Transmit::Close,
            _ => {}
        }
    }
    if tls.wants_send() {
        h1c::Transmit::Bytes
    } else {
        h1c::Transmit::Idle
    }
}

/// The TLS session of upstream `up`'s server `server`: its roots' configuration (built
/// once), verified as `tls_server_name` or the server's IP address.
fn tls_session(up: &Upstream, server: usize) -> Result<UpTls, String> {
    let config = upstream_tls::client_config(up.tls_ca.as_deref())?;
    let addr = match &up.servers[server].addr {
        UpstreamAddr::Tcp(a) => Some(*a),
        UpstreamAddr::Unix(_) => None,
    };
    let name = upstream_tls::server_name(up.tls_server_name.as_deref(), addr)?;
    UpTls::new(config, name)
}

/// Moves each stream's body into its connection as the windows allow; `true` when some
/// stream's client waited for room and was woken (more may follow at once).
fn feed_bodies(conn: &mut h2u::Conn, links: &mut [Link], after: &mut After) -> bool {
    let mut woke = false;
    for l in links.iter_mut().filter(|l| !l.body_done) {
        let room = conn.send_room(l.stream);
        if l.sent_body < l.body.len() {
            let n = room.min(l.body.len() - l.sent_body);
            let last = l.pipe.is_none() && l.sent_body + n == l.body.len();
            let taken = conn.send(l.stream, &l.body[l.sent_body..l.sent_body + n], last);
            l.sent_body += taken;
            if last && taken == n {
                l.body_done = true;
            }
            continue;
        }
        let Some(pipe) = l.pipe.as_ref() else {
            continue;
        };
        let (replay, lost) = (&mut l.replay, &mut l.replay_lost);
        let taken = pipe.take(room, |piece| {
            conn.send(l.stream, piece, false);
            // Kept for another try after a refusal, while it is small.
            if *lost {
            } else if replay.len() + piece.len() <= REPLAY_MAX {
                replay.extend_from_slice(piece);
            } else {
                *lost = true;
                *replay = Vec::new();
            }
        });
        if taken.failed {
            continue; // seen by the caller
        }
        if taken.ended {
            conn.send(l.stream, &[], true);
            l.body_done = true;
        }
        if taken.wake {
            woke = true;
            after.wake.push((l.client, l.id));
        }
    }
    woke
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A forwarded head as it goes up: method, path, authority and the fields of the header
    /// block `h2u` encodes from it, decoded again (so the names are as on the wire).
    type Up = (Vec<u8>, Vec<u8>, Vec<u8>, Vec<(Vec<u8>, Vec<u8>)>);

    fn translated(head: &str, body: ReqBody) -> Up {
        let mut job = Job::blank(1, 1, 0, 0, 0);
        job.head = head.as_bytes().to_vec();
        job.forwarded.body = body;
        let h = h2_request(&job).expect("a head this server framed");
        let req = h2u::Request {
            method: h.method,
            scheme: b"http",
            authority: h.authority,
            path: h.target,
            fields: &h.fields,
        };
        let mut block = Vec::new();
        h2u::encode_request(&mut block, &req, false);
        let mut fields = Vec::new();
        linerate_hpack::Decoder::new()
            .decode(&block, |n, v| {
                if !n.starts_with(b":") {
                    fields.push((n.to_vec(), v.to_vec()));
                }
            })
            .expect("a block the decoder reads");
        (
            h.method.to_vec(),
            h.target.to_vec(),
            h.authority.to_vec(),
            fields,
        )
    }

    #[test]
    fn the_forwarded_head_becomes_pseudo_headers_and_fields() {
        let (method, path, authority, fields) = translated(
            "POST /pkg.Svc/Call?x=1 HTTP/1.1\r\nHost: api.test:8080\r\nContent-Type: application/grpc\r\n\
             X-Forwarded-For: 10.0.0.1\r\nContent-Length: 9\r\n\r\n",
            ReqBody::Length(9),
        );
        assert_eq!(method, b"POST");
        assert_eq!(path, b"/pkg.Svc/Call?x=1");
        // RFC 9113 §8.3.1: the host goes as :authority, not as a field.
        assert_eq!(authority, b"api.test:8080");
        let names: Vec<&[u8]> = fields.iter().map(|(n, _)| &n[..]).collect();
        assert_eq!(
            names,
            [
                &b"content-type"[..],
                b"x-forwarded-for",
                b"content-length",
                b"te"
            ]
        );
        assert_eq!(
            fields[3].1, b"trailers",
            "the answer's trailers are relayed"
        );
    }

    #[test]
    fn connection_specific_fields_never_go_up() {
        // RFC 9113 §8.2.2: Connection, Keep-Alive, Proxy-Connection, Transfer-Encoding and
        // Upgrade are malformed in HTTP/2; TE only as "trailers" (ours).
        let (_, _, _, fields) = translated(
            "POST / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nKeep-Alive: 5\r\n\
             Proxy-Connection: x\r\nTransfer-Encoding: chunked\r\nUpgrade: h2c\r\nTE: gzip\r\n\r\n",
            ReqBody::Chunked,
        );
        assert_eq!(fields, [(b"te".to_vec(), b"trailers".to_vec())]);
    }

    /// The upstream's trailers reach the client byte for byte; gRPC's status, when it is a
    /// code's exact text, is borrowed (no copy per call), anything else is copied as sent.
    #[test]
    fn trailer_fields_keep_their_bytes_and_borrow_the_status() {
        let rows: &[(&[u8], &[u8], bool)] = &[
            (b"grpc-status", b"0", true),
            (b"grpc-status", b"16", true),
            (b"grpc-status", b"00", false),
            (b"grpc-status", b" 0", false),
            (b"grpc-status", b"17", false),
            (b"grpc-message", b"a%20b", false),
            (b"x-bin", b"AAEC", false),
        ];
        for &(name, value, borrowed) in rows {
            let (n, v) = trailer_field(name, value);
            assert_eq!((n.as_bytes(), v.as_bytes()), (name, value));
            let is_borrowed = matches!((&n, &v), (Cow::Borrowed(_), Cow::Borrowed(_)));
            assert_eq!(
                is_borrowed,
                borrowed,
                "{:?}",
                String::from_utf8_lossy(value)
            );
        }
    }
}
