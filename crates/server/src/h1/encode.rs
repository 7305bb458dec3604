//! A [`Response`] as bytes on the wire: the head composed by `linerate_http1::ResponseHead`
//! (status line, Server, Date, Content-Type, Content-Length, Connection), the handler's own
//! fields, and the in-memory body unless the request was HEAD or the status has none.
//!
//! Owns only the framing facts of one answer; which answer, and when, is the connection's.
#![forbid(unsafe_code)]

use std::borrow::Cow;

use linerate_http1::{HeadRoom, ResponseHead, Version, end_head, status_has_no_body, write_field};

use crate::response::{Body, Field};

/// The facts of a request that its answer's framing depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Framing {
    /// The request was HEAD: the head says what GET would, no body follows.
    pub head: bool,
    pub version: Version,
}

/// What [`encode`] wrote.
pub(crate) struct Encoded {
    /// A file body must follow the bytes.
    pub file: bool,
}

/// Whether `headers` hold a `Server` field (none usually: the loop is over an empty slice).
#[inline(always)]
pub(crate) fn names_server(headers: &[(Cow<'static, str>, Cow<'static, str>)]) -> bool {
    headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("server"))
}

/// Whether `headers` hold a field named `name` (ASCII lowercase).
pub(crate) fn names_field(headers: &[(Cow<'static, str>, Cow<'static, str>)], name: &str) -> bool {
    headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name))
}

/// The `Alt-Svc` value that announces HTTP/3 on a UDP port (RFC 7838 §3, RFC 9114 §3.1.1),
/// composed on the stack: `h3=":PORT"; ma=86400` (a day, RFC 7838's default freshness).
pub(crate) struct AltSvc {
    buf: [u8; 24],
    len: usize,
}

impl AltSvc {
    pub(crate) fn h3(port: u16) -> AltSvc {
        let mut buf = [0u8; 24];
        let mut n = itoa::Buffer::new();
        let mut len = 0;
        for part in [&b"h3=\":"[..], n.format(port).as_bytes(), b"\"; ma=86400"] {
            buf[len..len + part.len()].copy_from_slice(part);
            len += part.len();
        }
        AltSvc { buf, len }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// The fields the server adds to every answer: `Server` (unless the answer names its own),
/// `Date`, and `Alt-Svc` for a TLS connection whose listener serves HTTP/3 on that UDP port.
#[derive(Clone, Copy)]
pub(crate) struct Stamp<'a> {
    pub server: Option<&'a [u8]>,
    pub date: &'a [u8],
    pub alt_svc: Option<u16>,
}

/// The parts of an answer that go on the wire (a [`Response`] taken apart, so the caller
/// drops its fields one by one instead of calling the whole struct's drop glue).
pub(crate) struct Parts<'r> {
    pub status: u16,
    pub content_type: Option<&'r str>,
    pub headers: &'r [(Cow<'static, str>, Cow<'static, str>)],
    pub body: &'r Body,
    /// Trailer fields (RFC 9110 §6.5): the answer goes chunked to carry them.
    pub trailers: Option<&'r [Field]>,
}

/// Appends `resp` to `out`. `close` adds `Connection: close`; an HTTP/1.0 request that stays
/// open gets `Connection: keep-alive`.
#[inline(always)]
pub(crate) fn encode(
    out: &mut Vec<u8>,
    room: &mut HeadRoom,
    resp: Parts<'_>,
    req: Framing,
    close: bool,
    server: Option<&[u8]>,
    date: &[u8],
) -> Encoded {
    if let Body::Cached(c) = resp.body {
        let stamp = Stamp {
            server,
            date,
            alt_svc: None,
        };
        return encode_cached(out, c, req, close, stamp);
    }
    let send_body = !req.head && !status_has_no_body(resp.status);
    let (body, len, file) = resp.body.parts();
    if let Some(trailers) = resp.trailers
        && send_body
        && !file
        && req.version == Version::Http11
    {
        // RFC 9112 §7.1.2: only a chunked body carries a trailer section. An HTTP/1.0
        // client (no chunked coding), HEAD, a status without content and a file body
        // (sent with `sendfile`) get the answer below, without them.
        let head = ResponseHead {
            status: resp.status,
            server: server.filter(|_| !names_server(resp.headers)),
            date,
            content_type: resp.content_type.map(str::as_bytes),
            content_length: len,
            close,
            keep_alive_10: false,
        };
        super::conn::encode_chunked(out, &head, resp.headers, body, trailers);
        return Encoded { file: false };
    }
    let head = ResponseHead {
        status: resp.status,
        server,
        date,
        content_type: resp.content_type.map(str::as_bytes),
        content_length: len,
        close,
        keep_alive_10: !close && req.version == Version::Http10,
    };
    if resp.headers.is_empty() {
        // The common answer: head and (in-memory) body in one go. A file body follows
        // through `sendfile`, so its in-memory bytes are empty.
        head.write_with_body_in(out, if send_body { body } else { b"" }, room);
    } else {
        // A Server field of the answer's own (a site's rule, a handler) replaces the
        // server's: one field, as the docs promise for same-name fields. Asked only here: in
        // the common answer's path above the test cost ~20 instructions a request (callgrind).
        let head = ResponseHead {
            server: server.filter(|_| !names_server(resp.headers)),
            ..head
        };
        head.write_start(out);
        for (name, value) in resp.headers {
            write_field(out, name.as_bytes(), value.as_bytes());
        }
        // RFC 9110 §7.8: the sender of `Upgrade` (only a 426 may carry one: see
        // `response::checked`) lists it in `Connection`, so intermediaries drop it.
        if resp.status == 426
            && resp
                .headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("upgrade"))
        {
            write_field(out, b"Connection", b"upgrade");
        }
        end_head(out);
        if send_body {
            out.extend_from_slice(body);
        }
    }
    Encoded {
        file: send_body && file,
    }
}

/// [`encode`] for a connection whose listener serves HTTP/3 (`stamp.alt_svc`): the answer's
/// fields with `Alt-Svc` first, unless it names its own. Out of line, and the only caller
/// of `encode` that passes it, so the common answer's path is what it was: inlined there,
/// the test made the callers' code lose inlining worth ~30 instructions a plain request
/// (callgrind, /json over 16 connections).
#[inline(never)]
pub(crate) fn encode_announcing(
    out: &mut Vec<u8>,
    room: &mut HeadRoom,
    resp: Parts<'_>,
    req: Framing,
    close: bool,
    stamp: Stamp<'_>,
) -> Encoded {
    if let Body::Cached(c) = resp.body {
        return encode_cached(out, c, req, close, stamp);
    }
    let mut fields = Vec::with_capacity(resp.headers.len() + 1);
    if let Some(port) = stamp.alt_svc
        && !names_field(resp.headers, "alt-svc")
    {
        let value = String::from_utf8_lossy(AltSvc::h3(port).as_bytes()).into_owned();
        fields.push((Cow::Borrowed("Alt-Svc"), Cow::Owned(value)));
    }
    fields.extend(resp.headers.iter().cloned());
    let resp = Parts {
        headers: &fields,
        ..resp
    };
    encode(out, room, resp, req, close, stamp.server, stamp.date)
}

/// A fresh hit from the proxy cache ([`Body::Cached`]): its head and body written whole by
/// the cache's own writer, which keeps the stored fields rendered (HTTP/1.0 and HEAD as for
/// every answer).
#[inline(never)]
fn encode_cached(
    out: &mut Vec<u8>,
    c: &crate::response::Cached,
    req: Framing,
    close: bool,
    stamp: Stamp<'_>,
) -> Encoded {
    let keep_alive_10 = !close && req.version == Version::Http10;
    c.0.write_h1(out, req.head, close, keep_alive_10, stamp);
    Encoded { file: false }
}
