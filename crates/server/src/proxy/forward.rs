//! The upstream request for a client's request: its request line (the mount's prefix
//! rewritten, always origin-form), its fields (hop-by-hop ones removed, `Host` passed or set,
//! `Via` and the forwarding fields added, the mount's own set or removed) and its framing,
//! written by this server from how the client's body is framed.
#![forbid(unsafe_code)]

use std::net::IpAddr;

use linerate_http1::{
    Framing, Method, RequestHead, TargetForm, Version, literal_field, write_field,
};

use super::{Name, Named};
use crate::h1c::ReqBody;

/// What `Host` the upstream gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum HostPolicy {
    /// The client's (nginx's `proxy_set_header Host $host` with the port: the authority).
    PassThrough,
    /// This value (the upstream's own name, typically).
    Set(String),
}

pub(crate) use crate::config::ForwardedStyle;

/// A proxy mount's rules for requests.
#[derive(Clone, Debug)]
pub(crate) struct Policy {
    /// The mount's path prefix (`/api`), and what replaces it upstream (`""` strips it).
    pub prefix: String,
    pub rewrite: String,
    pub host: HostPolicy,
    pub forwarded: ForwardedStyle,
    /// Incoming forwarding fields come from a proxy this server trusts: they are extended.
    /// Otherwise they are replaced (a client cannot claim another address).
    pub trust_forwarded: bool,
    /// Fields set on every request (replacing the client's of the same name).
    pub set: Vec<(String, String)>,
    /// Fields removed from every request.
    pub remove: Vec<String>,
    /// The Host sent when the client gave none (an HTTP/1.0 request): the upstream's name.
    pub upstream_host: String,
    /// The protocols an upgrade may ask for (lowercase names): `Upgrade` goes upstream with
    /// only these (the driver tunnels a 101); a request offering none of them is plain HTTP,
    /// its `Upgrade` a hop-by-hop field like any other.
    pub upgrades: Vec<String>,
}

/// Facts about the client's connection.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Client<'a> {
    pub addr: Option<IpAddr>,
    /// It came over TLS.
    pub tls: bool,
    /// The certificate its handshake verified (mTLS): named to the upstream in
    /// `X-Forwarded-Client-Cert`.
    pub cert: Option<&'a crate::tls::ClientCert>,
    /// This server's ids for the request, which replace the client's fields of the same
    /// names.
    pub ids: Ids<'a>,
}

/// The ids a request carries upstream.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Ids<'a> {
    /// The request id's field (`X-Request-Id`, or the operator's) and value.
    pub request_id: Option<(&'a [u8], &'a [u8])>,
    /// `traceparent` naming the upstream exchange's span (tracing on), and the client's
    /// `tracestate` to pass with it.
    pub traceparent: Option<&'a [u8]>,
    pub tracestate: Option<&'a [u8]>,
}

impl Ids<'_> {
    /// None: the client's fields pass as they came.
    #[cfg(test)]
    pub(crate) const NONE: Ids<'static> = Ids {
        request_id: None,
        traceparent: None,
        tracestate: None,
    };
}

/// The request as it goes upstream, beside its head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Forwarded {
    pub body: ReqBody,
    pub head_request: bool,
    /// An upgrade (WebSocket) is asked for: a 101 makes the connection a tunnel.
    pub upgrade: bool,
}

/// Writes the upstream request head for the client's request `head` (in `buf`) into `out`.
/// `body`: how the body goes upstream when the caller knows (it read the body whole: its
/// length); `None` derives it from the client's framing (chunked stays chunked).
pub(crate) fn request_head(
    head: &RequestHead,
    buf: &[u8],
    client: Client<'_>,
    policy: &Policy,
    body: Option<ReqBody>,
    out: &mut Vec<u8>,
) -> Forwarded {
    let fields = || head.headers(buf);
    let named = Named::of(fields());
    // RFC 9110 §7.8: an upgrade is asked with both Upgrade and Connection: upgrade; over
    // HTTP/1.1 only (an HTTP/2 request cannot carry either). `Connection` is looked at first:
    // a request without it is no upgrade, and its fields are not searched for `Upgrade`.
    let upgrade_to = (named.lists(b"upgrade")
        && !policy.upgrades.is_empty()
        && head.method() == Method::Get
        && head.version() == Version::Http11)
        .then(|| head.header(buf, "upgrade"))
        .flatten()
        .and_then(|offered| allowed_upgrades(offered, &policy.upgrades));
    out.extend_from_slice(head.method_bytes(buf));
    out.push(b' ');
    target(head, buf, policy, out);
    out.extend_from_slice(b" HTTP/1.1\r\n");

    // RFC 9112 §3.2.2: an absolute-form target's authority is the request's host, not the
    // Host field.
    let client_host = match head.target_form() {
        TargetForm::Absolute => crate::app::sites::absolute_authority(head.target(buf).as_bytes()),
        _ => head.host(buf),
    }
    .filter(|h| !h.is_empty());
    match &policy.host {
        HostPolicy::PassThrough => {
            // RFC 9112 §3.2: the HTTP/1.1 request upstream carries Host even when the
            // client's HTTP/1.0 one had none: the upstream's own name then.
            let h = client_host.unwrap_or(policy.upstream_host.as_bytes());
            literal_field(out, b"Host", h);
        }
        HostPolicy::Set(h) => literal_field(out, b"Host", h.as_bytes()),
    }

    let set = |name: &[u8]| {
        policy
            .set
            .iter()
            .any(|(n, _)| n.as_bytes().eq_ignore_ascii_case(name))
    };
    let removed = |name: &[u8]| {
        policy
            .remove
            .iter()
            .any(|n| n.as_bytes().eq_ignore_ascii_case(name))
    };
    let mut via: Vec<&[u8]> = Vec::new();
    let mut xff: Vec<&[u8]> = Vec::new();
    let mut fwd: Vec<&[u8]> = Vec::new();
    let mut xfcc: Vec<&[u8]> = Vec::new();
    let (mut xfp, mut xfh) = (None, None);
    for (name, value) in fields() {
        let kind = Name::of(name);
        if kind.hop_by_hop()
            || named.lists(name)
            || kind == Name::Host
            // This server answers `Expect: 100-continue` itself when it reads the body.
            || kind == Name::Expect
            || set(name)
            || removed(name)
        {
            continue;
        }
        match kind {
            // This server's own replace them (tracing on; a request id sent).
            Name::TraceParent | Name::TraceState if client.ids.traceparent.is_some() => {}
            Name::XRequestId | Name::Other
                if client.ids.request_id.is_some_and(|(n, _)| {
                    n.len() == name.len() && n.eq_ignore_ascii_case(name)
                }) => {}
            Name::Via => via.push(value),
            // The forwarding fields, and nginx's common `proxy_set_header X-Real-IP`:
            // applications read it as the client's address, so a client must not be able
            // to write it. A client's are dropped (this server writes its own below); a
            // trusted proxy's are extended, or passed.
            Name::XForwardedFor
            | Name::XForwardedProto
            | Name::XForwardedHost
            | Name::Forwarded
            | Name::XForwardedClientCert
            | Name::XRealIp
                if !policy.trust_forwarded => {}
            Name::XForwardedFor => xff.push(value),
            Name::XForwardedProto => xfp = xfp.or(Some(value)),
            Name::XForwardedHost => xfh = xfh.or(Some(value)),
            Name::XForwardedClientCert => xfcc.push(value),
            Name::Forwarded => fwd.push(value),
            // One address, the trusted proxy's finding: passed as it came.
            Name::XRealIp => write_field(out, name, value),
            _ => write_field(out, name, value),
        }
    }
    for (n, v) in &policy.set {
        write_field(out, n.as_bytes(), v.as_bytes());
    }
    if let Some((n, v)) = client.ids.request_id {
        // The default name as a literal: its copy inlined (callgrind).
        if n == crate::trace::REQUEST_ID_FIELD.as_bytes() {
            literal_field(out, b"X-Request-Id", v);
        } else {
            write_field(out, n, v);
        }
    }
    if let Some(tp) = client.ids.traceparent {
        literal_field(out, b"traceparent", tp);
        if let Some(ts) = client.ids.tracestate {
            literal_field(out, b"tracestate", ts);
        }
    }

    // Via (RFC 9110 §7.6.3): the protocol it was received with, then this server's name
    // (each whole, one copy).
    let received: &[u8] = match head.version() {
        Version::Http10 => b"1.0 linerate\r\n",
        Version::Http11 => b"1.1 linerate\r\n",
        Version::Http2 => b"2.0 linerate\r\n",
        Version::Http3 => b"3 linerate\r\n",
    };
    out.extend_from_slice(b"Via: ");
    for v in &via {
        out.extend_from_slice(v);
        out.extend_from_slice(b", ");
    }
    out.extend_from_slice(received);

    let proto: &[u8] = if client.tls { b"https" } else { b"http" };
    let style = policy.forwarded;
    if matches!(style, ForwardedStyle::XForwarded | ForwardedStyle::Both)
        && (!xff.is_empty() || client.addr.is_some())
    {
        // Written in place: formatting an address through `Display` cost more than the
        // rest of the head (callgrind, docs/benchmarks.md).
        out.extend_from_slice(b"X-Forwarded-For: ");
        for (i, v) in xff.iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(b", ");
            }
            out.extend_from_slice(v);
        }
        if let Some(a) = client.addr {
            if !xff.is_empty() {
                out.extend_from_slice(b", ");
            }
            write_ip(out, a);
        }
        out.extend_from_slice(b"\r\n");
    }
    if matches!(style, ForwardedStyle::XForwarded | ForwardedStyle::Both) {
        literal_field(out, b"X-Forwarded-Proto", xfp.unwrap_or(proto));
        if let Some(h) = xfh.or(client_host) {
            literal_field(out, b"X-Forwarded-Host", h);
        }
    }
    if matches!(style, ForwardedStyle::Rfc7239 | ForwardedStyle::Both) {
        // RFC 7239 §4: an IPv6 address is quoted and bracketed; a host is quoted when it is
        // not a token (a port's colon makes it so).
        let mut element = String::new();
        if let Some(a) = client.addr {
            match a {
                IpAddr::V4(v4) => element += &format!("for={v4}"),
                IpAddr::V6(v6) => element += &format!("for=\"[{v6}]\""),
            }
            element.push(';');
        }
        element += &format!("proto={}", if client.tls { "https" } else { "http" });
        if let Some(h) = client_host.and_then(|h| std::str::from_utf8(h).ok()) {
            element += &format!(";host=\"{h}\"");
        }
        let mut list = fwd.join(&b", "[..]);
        if !list.is_empty() {
            list.extend_from_slice(b", ");
        }
        list.extend_from_slice(element.as_bytes());
        literal_field(out, b"Forwarded", &list);
    }

    // Envoy's field for the client's certificate: a client's own is dropped unless it came
    // through a trusted proxy (whose element list this one's is appended to).
    if !xfcc.is_empty() || client.cert.is_some() {
        let mut list = xfcc.join(&b","[..]);
        if let Some(c) = client.cert {
            if !list.is_empty() {
                list.push(b',');
            }
            list.extend_from_slice(c.xfcc.as_bytes());
        }
        literal_field(out, b"X-Forwarded-Client-Cert", &list);
    }

    if let Some(u) = &upgrade_to {
        literal_field(out, b"Connection", b"upgrade");
        literal_field(out, b"Upgrade", u);
    }
    let body = body.unwrap_or(match head.framing() {
        Framing::None => ReqBody::None,
        Framing::Length(n) => ReqBody::Length(n),
        Framing::Chunked => ReqBody::Chunked,
    });
    match body {
        ReqBody::None => {}
        ReqBody::Length(n) => {
            let mut b = itoa::Buffer::new();
            literal_field(out, b"Content-Length", b.format(n).as_bytes());
        }
        ReqBody::Chunked => literal_field(out, b"Transfer-Encoding", b"chunked"),
    }
    out.extend_from_slice(b"\r\n");
    Forwarded {
        body,
        head_request: head.method() == Method::Head,
        upgrade: upgrade_to.is_some(),
    }
}

/// The protocols of an `Upgrade` value (RFC 9110 §7.8: `#protocol`, each `name[/version]`)
/// that `allowed` names, in the client's order; `None` when none is. h2c is not among the
/// defaults: RFC 9113 §3.1 deprecates it, and a tunnelled h2c connection's requests would
/// pass without this server's forwarding fields or forward auth.
fn allowed_upgrades(offered: &[u8], allowed: &[String]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    for protocol in offered.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
        let name = protocol.split(|&b| b == b'/').next().unwrap_or_default();
        if !name.is_empty()
            && allowed
                .iter()
                .any(|a| name.eq_ignore_ascii_case(a.as_bytes()))
        {
            if !out.is_empty() {
                out.extend_from_slice(b", ");
            }
            out.extend_from_slice(protocol);
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The upstream's request target: the path with the mount's prefix replaced, and the query,
/// in origin-form whatever form the client used (`*` stays `*`).
fn target(head: &RequestHead, buf: &[u8], policy: &Policy, out: &mut Vec<u8>) {
    if head.target_form() == TargetForm::Asterisk {
        out.push(b'*');
        return;
    }
    // Bytes throughout: the parser checked them, and they are copied as they came.
    let path = head.path_bytes(buf);
    match path.strip_prefix(policy.prefix.as_bytes()) {
        Some(rest) if !policy.prefix.is_empty() => {
            // The rewrite and the rest joined by exactly one slash (the client's trailing
            // slash kept: `/api/` is `/v1/`); the prefix alone becomes the rewrite as written
            // (or `/`).
            if rest.is_empty() {
                let alone = if policy.rewrite.is_empty() {
                    "/"
                } else {
                    &policy.rewrite
                };
                out.extend_from_slice(alone.as_bytes());
            } else {
                let rest = rest.strip_prefix(b"/").unwrap_or(rest);
                out.extend_from_slice(policy.rewrite.trim_end_matches('/').as_bytes());
                out.push(b'/');
                out.extend_from_slice(rest);
            }
        }
        _ => out.extend_from_slice(path),
    }
    if let Some(q) = head.query_bytes(buf) {
        out.push(b'?');
        out.extend_from_slice(q);
    }
}

/// Whether `path` has a `.` or `..` segment, raw or percent-encoded (`%2e`). A proxy
/// refuses those rather than forwarding them: the upstream would resolve them after the
/// mount's rewrite (RFC 3986 §5.2.4), so `/api/../admin` under a mount rewritten to `/v1`
/// would reach `/admin`. Browsers resolve dot segments before they send a request.
pub(crate) fn has_dot_segment(path: &[u8]) -> bool {
    path.split(|&b| b == b'/').any(|seg| {
        let mut dots = 0;
        let mut i = 0;
        while i < seg.len() {
            if seg[i] == b'.' {
                i += 1;
            } else if seg[i..].len() >= 3
                && seg[i] == b'%'
                && seg[i + 1] == b'2'
                && seg[i + 2] | 0x20 == b'e'
            {
                i += 3;
            } else {
                return false;
            }
            dots += 1;
        }
        dots == 1 || dots == 2
    })
}

/// An address as `Display` writes it (dotted quad, or RFC 5952 text for IPv6).
pub(super) fn write_ip(out: &mut Vec<u8>, ip: IpAddr) {
    match ip {
        IpAddr::V4(v4) => {
            // Composed on the stack and copied once: a copy per octet cost ~100 instructions
            // a request (callgrind, docs/benchmarks.md).
            let mut text = [0u8; 15];
            let mut n = 0;
            for (i, o) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    text[n] = b'.';
                    n += 1;
                }
                if o >= 100 {
                    text[n] = b'0' + o / 100;
                    n += 1;
                }
                if o >= 10 {
                    text[n] = b'0' + o / 10 % 10;
                    n += 1;
                }
                text[n] = b'0' + o % 10;
                n += 1;
            }
            out.extend_from_slice(&text[..n]);
        }
        IpAddr::V6(v6) => out.extend_from_slice(v6.to_string().as_bytes()),
    }
}
