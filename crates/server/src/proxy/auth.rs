//! Forward auth (nginx's `auth_request`, caddy's `forward_auth`): the subrequest a proxy
//! mount sends its auth upstream before forwarding a request, and what its answer decides.
//! Pure, like the rest of `proxy/`: the driver sends the subrequest and acts on [`verdict`].
//!
//! The subrequest is a bodiless `GET` of the configured path carrying the client's chosen
//! fields and where the request was going (`X-Forwarded-Method`, `-Uri`, `-Host`, `-Proto`,
//! `-For`), as caddy sends them. A 2xx lets the request go on, with the answer's chosen
//! fields set on it; a 401 or 403 is the client's answer as it came (so a login challenge
//! reaches the browser); anything else is a 500. The fields copied from the answer are
//! always removed from the client's request first, so a client cannot claim them.
#![forbid(unsafe_code)]

use linerate_http1::{FieldSpan, RequestHead, write_field};

use super::forward::Client;
use crate::config::ForwardAuth;

/// A mount's forward auth, ready to frame subrequests.
#[derive(Clone, Debug)]
pub(crate) struct AuthRoute {
    pub conf: ForwardAuth,
    /// Index into the server's upstreams.
    pub upstream: usize,
    /// The `Host` the auth upstream gets: its first server's address.
    pub host: String,
    /// `conf.copy`, shared with each subrequest's job: the verdict reads the list its request
    /// was routed by, whatever a reload made of the mounts since.
    pub copy: std::sync::Arc<[String]>,
}

/// What the auth answer decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Forward the request (with the answer's copied fields).
    Allow,
    /// The auth answer is the client's answer.
    Refuse,
    /// Answer 500.
    Error,
}

/// What an auth answer with `status` decides.
pub(crate) fn verdict(status: u16) -> Verdict {
    match status {
        200..=299 => Verdict::Allow,
        401 | 403 => Verdict::Refuse,
        _ => Verdict::Error,
    }
}

/// Writes the subrequest for the client's request `head` (in `buf`) into `out`, with this
/// server's ids for the request (`client.ids`: its request id, and a `traceparent` naming the
/// request's own span, whose child the check is) in place of the client's.
pub(crate) fn subrequest(
    head: &RequestHead,
    buf: &[u8],
    client: Client<'_>,
    auth: &AuthRoute,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(b"GET ");
    out.extend_from_slice(auth.conf.path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    write_field(out, b"Host", auth.host.as_bytes());
    write_field(out, b"X-Forwarded-Method", head.method_str(buf).as_bytes());
    write_field(out, b"X-Forwarded-Uri", head.target(buf).as_bytes());
    if let Some(h) = head.host(buf) {
        write_field(out, b"X-Forwarded-Host", h);
    }
    let proto: &[u8] = if client.tls { b"https" } else { b"http" };
    write_field(out, b"X-Forwarded-Proto", proto);
    if let Some(ip) = client.addr {
        write_field(out, b"X-Forwarded-For", ip.to_string().as_bytes());
    }
    if let Some(c) = client.cert {
        write_field(out, b"X-Forwarded-Client-Cert", c.xfcc.as_bytes());
    }
    let ids = client.ids;
    if let Some((n, v)) = ids.request_id {
        write_field(out, n, v);
    }
    if let Some(tp) = ids.traceparent {
        write_field(out, b"traceparent", tp);
        if let Some(ts) = ids.tracestate {
            write_field(out, b"tracestate", ts);
        }
    }
    for (name, value) in head.headers(buf) {
        // Only the handshake names a client certificate, never the client; ours replace
        // the client's ids.
        if name.eq_ignore_ascii_case(b"x-forwarded-client-cert")
            || ids
                .request_id
                .is_some_and(|(n, _)| n.eq_ignore_ascii_case(name))
            || (ids.traceparent.is_some()
                && (name.eq_ignore_ascii_case(b"traceparent")
                    || name.eq_ignore_ascii_case(b"tracestate")))
        {
            continue;
        }
        if auth
            .conf
            .pass
            .iter()
            .any(|p| p.as_bytes().eq_ignore_ascii_case(name))
        {
            write_field(out, name, value);
        }
    }
    out.extend_from_slice(b"\r\n");
}

/// Sets the auth answer's `copy` fields (from `answer`, its spans `spans`) on the framed
/// upstream request `request`, just before its end.
pub(crate) fn copy_fields(
    request: &mut Vec<u8>,
    answer: &[u8],
    spans: &[FieldSpan],
    copy: &[String],
) {
    debug_assert!(request.ends_with(b"\r\n\r\n"), "a whole framed head");
    let mut added = Vec::new();
    for (name, value) in copied(answer, spans, copy) {
        write_field(&mut added, name, value);
    }
    let at = request.len() - 2;
    request.splice(at..at, added);
}

/// The auth answer's fields that `copy` names (from `answer`, its spans `spans`), in order.
pub(crate) fn copied<'a>(
    answer: &'a [u8],
    spans: &'a [FieldSpan],
    copy: &'a [String],
) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
    spans
        .iter()
        .map(move |f| (&answer[f.name.clone()], &answer[f.value.clone()]))
        .filter(move |(name, _)| copy.iter().any(|c| c.as_bytes().eq_ignore_ascii_case(name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(pass: &[&str], copy: &[&str]) -> AuthRoute {
        AuthRoute {
            conf: ForwardAuth {
                upstream: "auth".into(),
                path: "/verify".into(),
                pass: pass.iter().map(|s| s.to_string()).collect(),
                copy: copy.iter().map(|s| s.to_string()).collect(),
            },
            upstream: 1,
            host: "127.0.0.1:9100".into(),
            copy: copy.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn the_subrequest_carries_the_chosen_fields_and_where_the_request_was_going() {
        let buf = b"POST /api/orders?x=1 HTTP/1.1\r\nHost: shop.example\r\nAuthorization: Bearer t0k\r\nCookie: s=1\r\nContent-Length: 3\r\n\r\n";
        let mut head = RequestHead::new();
        head.parse(buf, &Default::default()).unwrap();
        let mut out = Vec::new();
        let client = Client {
            addr: Some([10, 1, 2, 3].into()),
            tls: true,
            cert: None,
            ids: crate::proxy::forward::Ids::NONE,
        };
        subrequest(
            &head,
            buf,
            client,
            &route(&["authorization"], &[]),
            &mut out,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET /verify HTTP/1.1\r\nHost: 127.0.0.1:9100\r\nX-Forwarded-Method: POST\r\n\
             X-Forwarded-Uri: /api/orders?x=1\r\nX-Forwarded-Host: shop.example\r\n\
             X-Forwarded-Proto: https\r\nX-Forwarded-For: 10.1.2.3\r\n\
             Authorization: Bearer t0k\r\n\r\n",
            "no body, no Cookie (not passed), no Content-Length"
        );
    }

    #[test]
    fn the_subrequest_carries_this_servers_ids_in_place_of_the_clients() {
        let buf = b"GET /a HTTP/1.1\r\nHost: shop.example\r\nX-Request-Id: theirs\r\ntraceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\ntracestate: a=1\r\n\r\n";
        let mut head = RequestHead::new();
        head.parse(buf, &Default::default()).unwrap();
        let tp = b"00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01";
        let client = Client {
            addr: None,
            tls: false,
            cert: None,
            ids: crate::proxy::forward::Ids {
                request_id: Some((b"X-Request-Id", b"5e8bda7a68c23abf520a3387ed9d2197")),
                traceparent: Some(tp),
                tracestate: Some(b"a=1"),
            },
        };
        let mut out = Vec::new();
        let pass = ["x-request-id", "traceparent", "tracestate"];
        subrequest(&head, buf, client, &route(&pass, &[]), &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET /verify HTTP/1.1\r\nHost: 127.0.0.1:9100\r\nX-Forwarded-Method: GET\r\n\
             X-Forwarded-Uri: /a\r\nX-Forwarded-Host: shop.example\r\nX-Forwarded-Proto: http\r\n\
             X-Request-Id: 5e8bda7a68c23abf520a3387ed9d2197\r\n\
             traceparent: 00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01\r\n\
             tracestate: a=1\r\n\r\n",
            "ours once each, the client's dropped even where passed"
        );
    }

    #[test]
    fn copied_fields_go_at_the_end_of_the_forwarded_head() {
        let answer = b"HTTP/1.1 200 OK\r\nX-User-Id: 42\r\nX-Other: no\r\nx-role: admin\r\n\r\n";
        let mut spans = Vec::new();
        let info = linerate_http1::parse_response_strict(answer, Some(&mut spans)).unwrap();
        assert!(info.is_some(), "a whole head");
        let mut request = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
        copy_fields(
            &mut request,
            answer,
            &spans,
            &["X-User-Id".into(), "X-Role".into()],
        );
        assert_eq!(
            String::from_utf8(request).unwrap(),
            "GET /a HTTP/1.1\r\nHost: x\r\nX-User-Id: 42\r\nx-role: admin\r\n\r\n"
        );
    }

    #[test]
    fn only_2xx_allows_and_only_401_and_403_reach_the_client() {
        for (status, want) in [
            (200, Verdict::Allow),
            (204, Verdict::Allow),
            (401, Verdict::Refuse),
            (403, Verdict::Refuse),
            (302, Verdict::Error),
            (404, Verdict::Error),
            (500, Verdict::Error),
        ] {
            assert_eq!(verdict(status), want, "{status}");
        }
    }
}
