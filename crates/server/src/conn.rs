//! One connection's state machine: read, parse, dispatch to a handler, write, keep-alive,
//! timeouts and lingering close.
//!
//! Owns everything that happens on one socket. A connection holds no buffers while idle:
//! input is read into the worker's scratch buffer and only a partial request is copied into a
//! pooled buffer; responses are built in the worker's output buffer and only unsent bytes are
//! kept. Every complete request found in one read is answered, in order, with one send.
//! Invariant: a connection with unsent output reads nothing more until it is sent, so a client
//! that does not read cannot make the server buffer without bound. A file body is sent with
//! `sendfile` right after its head (sent with MSG_MORE so they share segments); requests
//! pipelined behind it wait in the connection's input until the file is out. Over HTTPS the
//! same happens through a [`Transport`] that encrypts (or lets the kernel do it).
#![forbid(unsafe_code)]

use std::os::fd::OwnedFd;
use std::panic::{AssertUnwindSafe, catch_unwind};

use linerate_http1::{
    BodyDecoder, CONTINUE_100, Framing, Method, ParseError, Parsed, RequestHead, ResponseHead,
    Version, end_head, reason, status_has_no_body, write_field,
};
use rustix::buffer::spare_capacity;
use rustix::io::Errno;
use rustix::net::{RecvFlags, SendFlags, Shutdown};

use std::borrow::Cow;

use crate::access_log::AccessEntry;
use crate::config::FilesMount;
use crate::files::{ALLOW, FileAnswer, HeadView, StaticFiles};
use crate::pool::BUF_SIZE;
use crate::request::{Params, Request};
use crate::response::{Body, FileBody, Response};
use crate::router::{BodySink, Handler, Lookup};
use crate::tls::Transport;
use crate::worker::{Io, Shared};

/// Least free space offered to one recv into a connection's own buffer.
const MIN_READ: usize = 4096;
/// Stop reading more pipelined requests once this much output waits to be sent.
const OUT_HIGH_WATER: usize = 256 * 1024;
/// Most bytes discarded while lingering before the connection is simply closed.
const LINGER_MAX_BYTES: usize = 1 << 20;
/// Most file bytes one `sendfile` call is asked for.
const SENDFILE_CHUNK: usize = 1 << 20;
/// Most file bytes sent for one connection per event, so one fast reader of a large file does
/// not keep the worker from its other connections (level-triggered epoll calls back at once).
const SENDFILE_BUDGET: u64 = 4 << 20;

/// Which deadline a connection is under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timer {
    /// Between requests (or before the first): close quietly when it expires.
    Idle,
    /// A request head has started: 408 when it expires.
    Head,
    /// A request body is being read: 408 when it expires.
    Body,
    /// Output is waiting for the client to read: close when it expires.
    Send,
    /// Draining input after the final response: close when it expires.
    Linger,
    /// The TLS handshake is under way: close when it expires.
    Handshake,
}

/// What the worker must do with the connection after an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    Keep,
    Close,
}

enum Sink {
    Buffer(Vec<u8>),
    Stream(Box<dyn BodySink>),
}

/// A request whose body did not arrive with its head.
struct BodyProgress {
    /// Copy of the head's bytes, parsed again when the body is complete.
    head: Vec<u8>,
    decoder: BodyDecoder,
    sink: Sink,
    received: u64,
    limit: u64,
}

/// A file body whose head is already in the output.
struct PendingFile {
    body: FileBody,
    sent: u64,
}

pub(crate) struct Conn {
    pub(crate) sock: OwnedFd,
    /// Plain, user-space TLS, or kernel TLS.
    transport: Transport,
    /// Unprocessed input (a partial request); unallocated when empty.
    inbuf: Vec<u8>,
    /// Unsent output; unallocated when empty.
    outbuf: Vec<u8>,
    out_pos: usize,
    body: Option<Box<BodyProgress>>,
    /// A file body to send after the output; nothing more is answered until it is sent.
    file: Option<Box<PendingFile>>,
    pub(crate) deadline: u64,
    pub(crate) timer: Timer,
    requests: u64,
    /// A final response (with close) is written: no more requests are read.
    closing: bool,
    /// Write side shut down; input is discarded until EOF.
    pub(crate) lingering: bool,
    linger_bytes: usize,
    /// The peer closed its side.
    eof: bool,
    pub(crate) peer: Option<std::net::SocketAddr>,
}

impl Conn {
    pub(crate) fn new(
        sock: OwnedFd,
        transport: Transport,
        peer: Option<std::net::SocketAddr>,
        io: &Io,
        sh: &Shared,
    ) -> Conn {
        let timer = if transport.handshaking() {
            Timer::Handshake
        } else {
            Timer::Idle
        };
        Conn {
            sock,
            transport,
            inbuf: Vec::new(),
            outbuf: Vec::new(),
            out_pos: 0,
            body: None,
            file: None,
            // A fresh connection that sends nothing is closed after the header timeout.
            deadline: io.now_ms + sh.config.header_timeout.as_millis() as u64,
            timer,
            requests: 0,
            closing: false,
            lingering: false,
            linger_bytes: 0,
            eof: false,
            peer,
        }
    }

    /// Whether output is waiting for the socket to become writable.
    pub(crate) fn wants_write(&self) -> bool {
        !self.outbuf.is_empty() || self.file.is_some() || self.transport.wants_write()
    }

    /// TLS holds decrypted input that was read off the socket but not yet answered (reading
    /// stopped at the output high-water mark or behind a file): no readiness event will come
    /// for it, so the worker calls `on_readable` again.
    pub(crate) fn has_buffered_input(&mut self) -> bool {
        !self.lingering
            && !self.closing
            && !self.wants_write()
            && self.transport.has_buffered_input()
    }

    /// Between requests with nothing buffered.
    pub(crate) fn is_idle(&self) -> bool {
        self.inbuf.is_empty() && !self.wants_write() && self.body.is_none() && !self.closing
    }

    /// Gives pooled buffers back before the connection is dropped.
    pub(crate) fn release(&mut self, io: &mut Io) {
        io.pool.put(&mut self.inbuf);
        io.pool.put(&mut self.outbuf);
        self.file = None;
    }

    /// The socket is readable: read, answer every complete request, send.
    pub(crate) fn on_readable(
        &mut self,
        scratch: &mut Vec<u8>,
        head: &mut RequestHead,
        io: &mut Io,
        sh: &Shared,
    ) -> Next {
        if self.lingering {
            return self.linger_read(scratch);
        }
        if self.wants_write() || self.closing {
            return Next::Keep;
        }
        loop {
            let from_stash = !self.inbuf.is_empty();
            let mut buf = if from_stash {
                std::mem::take(&mut self.inbuf)
            } else {
                std::mem::take(scratch)
            };
            if buf.capacity() - buf.len() < MIN_READ {
                buf.reserve(BUF_SIZE);
            }
            let spare = buf.capacity() - buf.len();
            let n = match self.transport.recv(&self.sock, &mut buf) {
                Ok(n) => n,
                Err(e) => {
                    self.put_back(buf, from_stash, scratch);
                    match e {
                        Errno::AGAIN | Errno::INTR => break,
                        _ => return Next::Close,
                    }
                }
            };
            if n == 0 {
                // The peer finished sending. Complete requests were answered as they came; a
                // partial one can never complete. Send what is pending, then close.
                self.put_back(buf, from_stash, scratch);
                self.eof = true;
                self.closing = true;
                break;
            }
            let consumed = self.process(&buf, head, io, sh);
            let rest = buf.len() - consumed;
            if from_stash {
                if rest == 0 || self.closing {
                    io.pool.put(&mut buf);
                } else {
                    buf.drain(..consumed);
                    self.inbuf = buf;
                }
            } else {
                if rest > 0 && !self.closing {
                    let mut stash = io.pool.get();
                    stash.extend_from_slice(&buf[consumed..]);
                    self.inbuf = stash;
                }
                buf.clear();
                *scratch = buf;
            }
            // A short read means the socket is drained (level-triggered epoll reports it
            // again otherwise): no second recv just to see EAGAIN.
            if self.closing || self.file.is_some() || n < spare || io.out.len() > OUT_HIGH_WATER {
                break;
            }
        }
        let next = self.flush(io, sh);
        let next = self.resume(next, head, io, sh);
        self.set_timer(io, sh);
        next
    }

    fn put_back(&mut self, buf: Vec<u8>, from_stash: bool, scratch: &mut Vec<u8>) {
        if from_stash {
            self.inbuf = buf;
        } else {
            *scratch = buf;
        }
    }

    /// The socket is writable: send pending output, then answer requests that were held back
    /// behind a file body.
    pub(crate) fn on_writable(&mut self, head: &mut RequestHead, io: &mut Io, sh: &Shared) -> Next {
        let next = self.flush(io, sh);
        let next = self.resume(next, head, io, sh);
        self.set_timer(io, sh);
        next
    }

    /// Answers complete requests left in the input behind a file body once its bytes are out
    /// (no new input may ever come to trigger them).
    fn resume(&mut self, mut next: Next, head: &mut RequestHead, io: &mut Io, sh: &Shared) -> Next {
        // The common case first: nothing was held back.
        while !self.inbuf.is_empty()
            && next == Next::Keep
            && !self.wants_write()
            && !self.closing
            && !self.lingering
        {
            let mut buf = std::mem::take(&mut self.inbuf);
            let consumed = self.process(&buf, head, io, sh);
            if consumed < buf.len() && !self.closing {
                buf.drain(..consumed);
                self.inbuf = buf;
            } else {
                io.pool.put(&mut buf);
            }
            next = self.flush(io, sh);
            if consumed == 0 {
                break; // a partial request: more input is needed
            }
        }
        next
    }

    /// The connection's deadline passed.
    pub(crate) fn on_timeout(&mut self, io: &mut Io, sh: &Shared) -> Next {
        match self.timer {
            Timer::Idle | Timer::Send | Timer::Linger | Timer::Handshake => Next::Close,
            Timer::Head | Timer::Body => {
                self.body = None;
                io.pool.put(&mut self.inbuf);
                self.write_error(io, sh, 408, "request not received in time");
                let next = self.flush(io, sh);
                self.set_timer(io, sh);
                next
            }
        }
    }

    /// Graceful shutdown reached this connection. An idle one answers a request that already
    /// arrived, if any, and otherwise shuts its write side and drains; a busy one finishes its
    /// request (its response carries `Connection: close`).
    pub(crate) fn begin_drain(
        &mut self,
        scratch: &mut Vec<u8>,
        head: &mut RequestHead,
        io: &mut Io,
        sh: &Shared,
    ) -> Next {
        if !self.is_idle() || self.lingering {
            return Next::Keep;
        }
        if self.on_readable(scratch, head, io, sh) == Next::Close {
            return Next::Close;
        }
        if self.is_idle() {
            self.closing = true;
            let next = self.flush(io, sh);
            self.set_timer(io, sh);
            return next;
        }
        Next::Keep
    }

    /// Parses and answers the requests in `buf`; returns how many bytes were used.
    fn process(&mut self, buf: &[u8], head: &mut RequestHead, io: &mut Io, sh: &Shared) -> usize {
        let mut pos = 0;
        while pos < buf.len() && !self.closing && self.file.is_none() {
            if self.body.is_some() {
                let (used, done) = self.feed_body(&buf[pos..], head, io, sh);
                pos += used;
                if !done {
                    break;
                }
                continue;
            }
            match head.parse(&buf[pos..], &sh.config.limits) {
                Err(e) => {
                    self.parse_error(io, sh, e);
                    break;
                }
                Ok(Parsed::Partial) => {
                    if self.timer != Timer::Head {
                        self.timer = Timer::Head;
                        self.deadline = io.now_ms + sh.config.header_timeout.as_millis() as u64;
                    }
                    break;
                }
                Ok(Parsed::Complete(n)) => {
                    self.requests += 1;
                    let used = self.dispatch(&buf[pos..], n, head, io, sh);
                    pos += n + used;
                    if self.timer == Timer::Head {
                        self.timer = Timer::Idle;
                    }
                }
            }
        }
        pos
    }

    /// Routes one parsed request whose head is `req[..n]`; returns how many body bytes after
    /// the head it used (0 when the body continues in later reads).
    fn dispatch(
        &mut self,
        req: &[u8],
        n: usize,
        head: &RequestHead,
        io: &mut Io,
        sh: &Shared,
    ) -> usize {
        let avail = &req[n..];
        let framing = head.framing();
        // Body bytes that can be skipped when the request is refused without reading its body.
        let skippable = match framing {
            Framing::None => Some(0),
            Framing::Length(len) if avail.len() as u64 >= len => Some(len as usize),
            _ => None,
        };
        let refuse = |this: &mut Conn, io: &mut Io, resp: Response| {
            let resp = if skippable.is_none() {
                resp.close()
            } else {
                resp
            };
            this.respond(req, head, io, sh, resp);
            skippable.unwrap_or(0)
        };
        if matches!(head.method(), Method::Other | Method::Connect) {
            return refuse(self, io, text_status(501));
        }
        let mut params = Params::default();
        let route = match sh
            .router
            .lookup(head.method(), head.path_bytes(req), &mut params)
        {
            Lookup::Found(route) => route,
            Lookup::NotFound => {
                let below_mount = sh
                    .config
                    .files
                    .as_ref()
                    .and_then(|m| Some((m, m.strip(head.path_bytes(req))?)));
                let resp = match (io.files.as_ref(), below_mount) {
                    (Some(files), Some((mount, rest))) => {
                        file_response(files, mount, head, req, rest)
                    }
                    _ => text_status(404),
                };
                return refuse(self, io, resp);
            }
            Lookup::MethodNotAllowed(allow) => {
                let resp = text_status(405)
                    .try_header("Allow", allow)
                    .unwrap_or_else(|_| text_status(405));
                return refuse(self, io, resp);
            }
        };
        let request = Request {
            head,
            buf: req,
            names: &route.names,
            params: &params,
            body: &[],
            trailers: None,
            peer: self.peer,
        };
        let (limit, sink) = match &route.handler {
            Handler::Buffered(h) => {
                if let Framing::Length(len) = framing {
                    if len > sh.config.max_body_bytes {
                        return refuse(self, io, text_status(413).close());
                    }
                    if avail.len() as u64 >= len {
                        let request = Request {
                            body: &avail[..len as usize],
                            ..request
                        };
                        let resp = call(|| h(&request));
                        self.respond(req, head, io, sh, resp);
                        return len as usize;
                    }
                }
                if framing == Framing::None {
                    let resp = call(|| h(&request));
                    self.respond(req, head, io, sh, resp);
                    return 0;
                }
                let capacity = match framing {
                    Framing::Length(len) => len as usize,
                    _ => 0,
                };
                (
                    sh.config.max_body_bytes,
                    Sink::Buffer(Vec::with_capacity(capacity)),
                )
            }
            Handler::Streaming(factory) => {
                if let Framing::Length(len) = framing
                    && len > sh.config.max_stream_body_bytes
                {
                    return refuse(self, io, text_status(413).close());
                }
                let sink = match catch_unwind(AssertUnwindSafe(|| factory(&request))) {
                    Ok(sink) => sink,
                    Err(_) => return refuse(self, io, text_status(500)),
                };
                if framing == Framing::None {
                    let resp = call(move || sink.finish(&request));
                    self.respond(req, head, io, sh, resp);
                    return 0;
                }
                (sh.config.max_stream_body_bytes, Sink::Stream(sink))
            }
        };
        let Some(decoder) = BodyDecoder::new(framing) else {
            return 0;
        };
        if head.expect_continue() && avail.is_empty() {
            // RFC 9110 §10.1.1: the client waits for this before sending the body.
            io.out.extend_from_slice(CONTINUE_100);
        }
        self.body = Some(Box::new(BodyProgress {
            head: req[..n].to_vec(),
            decoder,
            sink,
            received: 0,
            limit,
        }));
        0
    }

    /// Feeds body bytes to the request in progress; returns (bytes used, body finished).
    fn feed_body(
        &mut self,
        input: &[u8],
        head: &mut RequestHead,
        io: &mut Io,
        sh: &Shared,
    ) -> (usize, bool) {
        let Some(bp) = self.body.as_mut() else {
            return (0, true);
        };
        let mut pos = 0;
        loop {
            let step = match bp.decoder.decode(&input[pos..], &sh.config.limits) {
                Ok(step) => step,
                Err(e) => {
                    self.body = None;
                    self.parse_error(io, sh, e);
                    return (input.len(), true);
                }
            };
            pos += step.consumed;
            if !step.data.is_empty() {
                bp.received += step.data.len() as u64;
                if bp.received > bp.limit {
                    self.body = None;
                    let resp = text_status(413).close();
                    self.write_simple(io, sh, resp);
                    return (input.len(), true);
                }
                match &mut bp.sink {
                    Sink::Buffer(v) => v.extend_from_slice(step.data),
                    Sink::Stream(s) => {
                        if catch_unwind(AssertUnwindSafe(|| s.data(step.data))).is_err() {
                            self.body = None;
                            self.write_simple(io, sh, text_status(500).close());
                            return (input.len(), true);
                        }
                    }
                }
            }
            if step.done {
                if let Some(bp) = self.body.take() {
                    self.finish_body(*bp, head, io, sh);
                }
                return (pos, true);
            }
            if pos == input.len() {
                return (pos, false);
            }
        }
    }

    /// The body of a request in progress is complete: call its handler and respond.
    fn finish_body(&mut self, bp: BodyProgress, head: &mut RequestHead, io: &mut Io, sh: &Shared) {
        let buf = &bp.head[..];
        if !matches!(head.parse(buf, &sh.config.limits), Ok(Parsed::Complete(_))) {
            // The same bytes parsed before; this cannot fail, but never panic on it.
            self.write_simple(io, sh, text_status(500).close());
            return;
        }
        let mut params = Params::default();
        let Lookup::Found(route) =
            sh.router
                .lookup(head.method(), head.path_bytes(buf), &mut params)
        else {
            self.write_simple(io, sh, text_status(500).close());
            return;
        };
        let (body, stream) = match bp.sink {
            Sink::Buffer(v) => (v, None),
            Sink::Stream(s) => (Vec::new(), Some(s)),
        };
        let request = Request {
            head,
            buf,
            names: &route.names,
            params: &params,
            body: &body,
            trailers: Some(bp.decoder.trailers()),
            peer: self.peer,
        };
        let resp = match (&route.handler, stream) {
            (Handler::Buffered(h), None) => call(|| h(&request)),
            (_, Some(sink)) => call(move || sink.finish(&request)),
            _ => text_status(500).close(),
        };
        self.respond(buf, head, io, sh, resp);
    }

    /// Encodes `resp` as the answer to the request `head` (parsed from `buf`).
    fn respond(
        &mut self,
        buf: &[u8],
        head: &RequestHead,
        io: &mut Io,
        sh: &Shared,
        mut resp: Response,
    ) {
        let close = resp.close
            || !head.keep_alive()
            || self.requests >= sh.config.max_requests_per_conn
            || io.draining;
        let send_body = head.method() != Method::Head && !status_has_no_body(resp.status);
        let keep_alive_10 = !close && head.version() == Version::Http10;
        // HEAD is compressed too, so its Content-Length matches GET's (RFC 9110 §9.3.2).
        // Eligibility first: most responses (small, binary, files) never look up the field.
        if crate::compress::eligible(&resp, &sh.config.compression) {
            let accept = head.header(buf, "accept-encoding");
            resp = crate::compress::negotiate(resp, accept, &sh.config.compression);
        }
        let bytes = encode(io, sh, &resp, close, keep_alive_10, send_body);
        if send_body && let Body::File(f) = &resp.body {
            self.file = Some(Box::new(PendingFile {
                body: f.clone(),
                sent: 0,
            }));
        }
        if let Some(log) = io.log.as_mut() {
            log.push(&AccessEntry {
                peer: self.peer,
                method: head.method_str(buf),
                target: head.target(buf),
                version: head.version(),
                status: resp.status,
                bytes,
                referer: head.header(buf, "referer"),
                user_agent: head.header(buf, "user-agent"),
            });
        }
        if close {
            self.closing = true;
        }
        crate::response::recycle(resp.body);
    }

    fn parse_error(&mut self, io: &mut Io, sh: &Shared, e: ParseError) {
        tracing::debug!(error = %e, status = e.status(), "rejecting request");
        self.write_error(io, sh, e.status(), &e.to_string());
    }

    /// Writes an error response that ends the connection.
    fn write_error(&mut self, io: &mut Io, sh: &Shared, status: u16, why: &str) {
        let body = format!("{status} {}: {why}\n", reason(status));
        let resp = Response::new(status)
            .content_type("text/plain")
            .body(crate::Body::Owned(body.into_bytes()))
            .close();
        self.write_simple(io, sh, resp);
    }

    /// Writes a response without a parsed request to answer (errors, timeouts).
    fn write_simple(&mut self, io: &mut Io, sh: &Shared, resp: Response) {
        let bytes = encode(io, sh, &resp, true, false, true);
        if let Some(log) = io.log.as_mut() {
            log.push(&AccessEntry {
                peer: self.peer,
                method: "-",
                target: "",
                version: Version::Http11,
                status: resp.status,
                bytes,
                referer: None,
                user_agent: None,
            });
        }
        self.closing = true;
    }

    /// Sends pending output: the connection's own first, else the worker's output buffer.
    fn flush(&mut self, io: &mut Io, _sh: &Shared) -> Next {
        // The head of a file body goes out with MSG_MORE so it shares segments with the file.
        let flags = if self.file.is_some() {
            SendFlags::NOSIGNAL | SendFlags::MORE
        } else {
            SendFlags::NOSIGNAL
        };
        if !self.outbuf.is_empty() {
            match self
                .transport
                .send(&self.sock, &self.outbuf[self.out_pos..], flags)
            {
                Err(()) => return Next::Close,
                Ok(sent) => self.out_pos += sent,
            }
            if self.out_pos < self.outbuf.len() {
                return Next::Keep;
            }
            io.pool.put(&mut self.outbuf);
            self.out_pos = 0;
        } else if !io.out.is_empty() {
            let sent = self.transport.send(&self.sock, &io.out, flags);
            let Ok(sent) = sent else {
                io.out.clear();
                return Next::Close;
            };
            if sent < io.out.len() {
                let mut rest = io.pool.get();
                rest.extend_from_slice(&io.out[sent..]);
                self.outbuf = rest;
                self.out_pos = 0;
                io.out.clear();
                return Next::Keep;
            }
            io.out.clear();
        }
        match self.send_file(io) {
            Err(()) => return Next::Close,
            Ok(false) => return Next::Keep,
            Ok(true) => {}
        }
        match self.transport.flush(&self.sock) {
            Err(()) => return Next::Close,
            Ok(false) => return Next::Keep,
            Ok(true) => {}
        }
        if self.closing && !self.lingering {
            match self.transport.close_notify(&self.sock) {
                Err(()) => return Next::Close,
                Ok(false) if !self.eof => return Next::Keep,
                Ok(_) => {}
            }
            if self.eof {
                return Next::Close;
            }
            // Lingering close: shut the write side (FIN after the response) and drain input,
            // so unread request bytes do not make the kernel send a reset.
            if rustix::net::shutdown(&self.sock, Shutdown::Write).is_err() {
                return Next::Close;
            }
            self.lingering = true;
        }
        Next::Keep
    }

    /// Sends the pending file body (after all other output); `Ok(true)` once none is left.
    fn send_file(&mut self, io: &mut Io) -> Result<bool, ()> {
        let Some(p) = self.file.as_mut() else {
            return Ok(true);
        };
        let tls = self.transport.send_file(
            &self.sock,
            &p.body.file,
            (p.body.offset, p.body.len),
            &mut p.sent,
            SENDFILE_BUDGET,
            &mut io.pool,
        );
        if let Some(done) = tls {
            if done == Ok(true) {
                self.file = None;
            }
            return done;
        }
        let mut budget = SENDFILE_BUDGET;
        while p.sent < p.body.len {
            let mut offset = p.body.offset + p.sent;
            let want = (p.body.len - p.sent).min(SENDFILE_CHUNK as u64) as usize;
            match rustix::fs::sendfile(&self.sock, &*p.body.file, Some(&mut offset), want) {
                // The file shrank: the promised Content-Length can no longer be met.
                Ok(0) => return Err(()),
                Ok(n) => {
                    p.sent += n as u64;
                    budget = budget.saturating_sub(n as u64);
                    if budget == 0 && p.sent < p.body.len {
                        return Ok(false);
                    }
                }
                Err(Errno::INTR) => continue,
                Err(Errno::AGAIN) => return Ok(false),
                Err(_) => return Err(()),
            }
        }
        self.file = None;
        Ok(true)
    }

    fn linger_read(&mut self, scratch: &mut Vec<u8>) -> Next {
        scratch.clear();
        match rustix::net::recv(&self.sock, spare_capacity(scratch), RecvFlags::empty()) {
            Ok((0, _)) => Next::Close,
            Ok((n, _)) => {
                scratch.clear();
                self.linger_bytes += n;
                if self.linger_bytes > LINGER_MAX_BYTES {
                    Next::Close
                } else {
                    Next::Keep
                }
            }
            Err(Errno::AGAIN | Errno::INTR) => Next::Keep,
            Err(_) => Next::Close,
        }
    }

    /// Picks the deadline for the state the connection is now in.
    fn set_timer(&mut self, io: &Io, sh: &Shared) {
        let cfg = &sh.config;
        let (timer, after) = if self.lingering {
            if self.timer == Timer::Linger {
                return;
            }
            (Timer::Linger, cfg.linger_timeout)
        } else if self.transport.handshaking() {
            if self.timer == Timer::Handshake {
                return; // the handshake timer runs from the connection's start
            }
            (Timer::Handshake, cfg.header_timeout)
        } else if self.wants_write() {
            (Timer::Send, cfg.send_timeout)
        } else if self.body.is_some() {
            (Timer::Body, cfg.body_timeout)
        } else if !self.inbuf.is_empty() {
            if self.timer == Timer::Head {
                return; // the head timer runs from the request's first byte
            }
            (Timer::Head, cfg.header_timeout)
        } else {
            (Timer::Idle, cfg.keepalive_timeout)
        };
        self.timer = timer;
        self.deadline = io.now_ms + after.as_millis() as u64;
    }
}

/// Appends `resp` to the worker's output: head (managed fields, then the handler's fields)
/// and, when `send_body`, the body. Returns the body bytes written.
#[inline(always)]
fn encode(
    io: &mut Io,
    sh: &Shared,
    resp: &Response,
    close: bool,
    keep_alive_10: bool,
    send_body: bool,
) -> usize {
    let body = resp.body.as_bytes();
    let len = resp.body.len();
    let head = ResponseHead {
        status: resp.status,
        server: sh.server_name.as_deref(),
        date: io.date.get(),
        content_type: resp.content_type.as_deref().map(str::as_bytes),
        content_length: len,
        close,
        keep_alive_10,
    };
    if resp.headers.is_empty() {
        // The common answer: head and (in-memory) body in one go. A file body follows
        // through `sendfile`, so its in-memory bytes are empty.
        head.write_with_body(&mut io.out, if send_body { body } else { b"" });
    } else {
        head.write_start(&mut io.out);
        for (name, value) in &resp.headers {
            write_field(&mut io.out, name.as_bytes(), value.as_bytes());
        }
        end_head(&mut io.out);
        if send_body {
            io.out.extend_from_slice(body);
        }
    }
    if send_body { len as usize } else { 0 }
}

/// Calls a handler; a panic becomes a 500 that closes the connection.
fn call(f: impl FnOnce() -> Response) -> Response {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        tracing::error!("handler panicked; answering 500");
        text_status(500).close()
    })
}

/// A response whose body is the status line's reason.
fn text_status(status: u16) -> Response {
    let body: &'static str = match status {
        400 => "Bad Request\n",
        403 => "Forbidden\n",
        404 => "Not Found\n",
        405 => "Method Not Allowed\n",
        413 => "Content Too Large\n",
        500 => "Internal Server Error\n",
        501 => "Not Implemented\n",
        _ => "",
    };
    Response::text(body).status(status)
}

/// The static-file mount's answer to a request below it (`rest`: the path under the prefix).
fn file_response(
    files: &StaticFiles,
    mount: &FilesMount,
    head: &RequestHead,
    req: &[u8],
    rest: &[u8],
) -> Response {
    if rest.is_empty() {
        // `/static` → `/static/`, so relative links in its index resolve below the mount.
        return redirect(format!("{}/", mount.prefix));
    }
    let fields = |resp: Response, headers: crate::files::Headers| {
        headers.into_iter().fold(resp, |mut r, (name, value)| {
            if name.eq_ignore_ascii_case("content-type") {
                r.content_type = Some(Cow::Owned(value));
            } else if !name.eq_ignore_ascii_case("content-length") {
                // Written from the body's length; the module's fields are generated, not input.
                r.headers.push((Cow::Borrowed(name), Cow::Owned(value)));
            }
            r
        })
    };
    match files.resolve(head.method(), rest, &HeadView { head, buf: req }) {
        FileAnswer::Send {
            status,
            headers,
            file,
            offset,
            len,
            ..
        } => {
            fields(Response::new(status), headers).body(Body::File(FileBody { file, offset, len }))
        }
        FileAnswer::NotModified { headers } => fields(Response::new(304), headers),
        FileAnswer::PreconditionFailed { headers } => fields(Response::new(412), headers),
        FileAnswer::RangeNotSatisfiable { headers } => fields(Response::new(416), headers),
        FileAnswer::Redirect { location } => redirect(location),
        FileAnswer::BadRequest => text_status(400),
        FileAnswer::Forbidden => text_status(403),
        FileAnswer::NotFound => text_status(404),
        FileAnswer::MethodNotAllowed => text_status(405)
            .try_header("Allow", ALLOW)
            .unwrap_or_else(|_| text_status(405)),
        FileAnswer::Error(e) => {
            tracing::warn!(error = %e, "static file could not be served");
            text_status(500)
        }
    }
}

/// `301` to `location`.
fn redirect(location: String) -> Response {
    text_status(301)
        .try_header("Location", location)
        .unwrap_or_else(|_| text_status(400))
}
