//! gRPC routes under layers: a layer's answer that is not a gRPC answer (a 401 from an auth
//! layer) made the gRPC status it means, trailers-only with HTTP 200; and a unary call run as
//! the last step of an async layer chain (`app/around_kinds.rs`), its body read from the
//! request's head on.
//!
//! Owns the HTTP status → gRPC code table (gRPC's doc/http-grpc-status-mapping.md, but 429 is
//! RESOURCE_EXHAUSTED: a server's rate limit is a quota, where the doc reads a proxy's 429)
//! and the bound on `grpc-message`; not the answer's shape (`answer.rs`, `web.rs`).
#![forbid(unsafe_code)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use super::call::{Call, deadline_exceeded, read_unary};
use super::web::{decode_text, failed, protocol_of, unary_answer};
use super::{Code, Protocol, Status, UNARY_BODY_LIMIT, Unary};
use crate::app::around::catch_panic;
use crate::app::deferred::OwnedRequest;
use crate::app::incoming::IncomingBody;
use crate::app::response::Response;

/// The most bytes of a layer's answer body carried in `grpc-message` (before its
/// percent-encoding): enough for a reason, not a page.
pub const MAX_LAYER_MESSAGE: usize = 256;

/// The gRPC code a layer's HTTP answer means (gRPC's doc/http-grpc-status-mapping.md, with
/// 401, 403 and 429 as a server's own refusals).
pub(crate) fn code_of_http(status: u16) -> Code {
    match status {
        400 => Code::Internal,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::Unimplemented,
        // The mapping doc says UNAVAILABLE for a client reading a proxy's 429; a server's
        // rate limit is a quota, which gRPC names RESOURCE_EXHAUSTED.
        429 => Code::ResourceExhausted,
        502..=504 => Code::Unavailable,
        _ => Code::Unknown,
    }
}

/// Whether `resp` is a gRPC (or gRPC-Web) answer already: its content type is one.
fn is_grpc_answer(resp: &Response) -> bool {
    resp.content_type_value()
        .is_some_and(|ct| ct.len() >= 16 && ct[..16].eq_ignore_ascii_case("application/grpc"))
}

/// The protocol of the call `content_type` names (plain gRPC when it names none this server
/// serves, as gRPC's `+json` and the like).
pub(crate) fn protocol_or_grpc(content_type: Option<&[u8]>) -> Protocol {
    protocol_of(content_type).unwrap_or(Protocol::Grpc)
}

/// The protocol of a request that is a gRPC call by its content type (gRPC's, or gRPC-Web's);
/// `None` for anything else, which a gRPC route answers in HTTP (415), layers' answers too.
pub(crate) fn call_protocol(content_type: Option<&[u8]>) -> Option<Protocol> {
    match protocol_of(content_type) {
        Some(p) => Some(p),
        None => super::is_grpc(content_type).then_some(Protocol::Grpc),
    }
}

/// A layer's answer to a call in `protocol`: unchanged when it is a gRPC answer, else the
/// trailers-only answer (HTTP 200) with the status its HTTP status means, its body's text
/// (up to [`MAX_LAYER_MESSAGE`] bytes) as `grpc-message`, and its other fields kept
/// (`www-authenticate`, `retry-after`).
pub(crate) fn layer_answer(protocol: Protocol, resp: Response) -> Response {
    if is_grpc_answer(&resp) {
        return resp;
    }
    let status = Status::new(code_of_http(resp.status_code()), message_of(&resp));
    let mut out = failed(protocol, &status);
    for (name, value) in &resp.headers {
        let reserved = [
            "content-length",
            "content-type",
            "grpc-status",
            "grpc-message",
        ]
        .iter()
        .any(|r| name.eq_ignore_ascii_case(r));
        if !reserved {
            out.headers.push((name.clone(), value.clone()));
        }
    }
    out
}

/// A layer's answer's body as text, trimmed and cut at a character boundary within
/// [`MAX_LAYER_MESSAGE`] bytes; `HTTP <status>` for an empty one (or one not in memory).
fn message_of(resp: &Response) -> String {
    let text = String::from_utf8_lossy(resp.body_bytes());
    let text = text.trim();
    if text.is_empty() {
        return format!("HTTP {}", resp.status_code());
    }
    let mut end = text.len().min(MAX_LAYER_MESSAGE);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// The answer to a gRPC call on a route whose chain runs at the head (under async layers)
/// that the worker refuses because [`Config::max_deferred_per_worker`](crate::Config) calls
/// are waiting already: RESOURCE_EXHAUSTED, trailers-only, as a call under no layer gets
/// (`phase/content/grpc.rs`), not the HTTP 503 an HTTP request gets. `None`: not a gRPC call.
pub(crate) fn busy(content_type: Option<&[u8]>) -> Option<Response> {
    let protocol = call_protocol(content_type)?;
    let busy = Status::new(Code::ResourceExhausted, "too many calls waiting");
    Some(failed(protocol, &busy))
}

/// The answer to a call that a route timeout ([`Router::timeout`](crate::Router::timeout))
/// ended: DEADLINE_EXCEEDED, as a client's `grpc-timeout` would.
pub(crate) fn timed_out(content_type: Option<&[u8]>) -> Response {
    failed(protocol_or_grpc(content_type), &deadline_exceeded())
}

/// A unary call at the end of an async layer chain: its body read from `body` (bounded by
/// the unary route's limit, its first prefix judged as it arrives), then the method called
/// and awaited under the call's own deadline, on the chain's runtime.
pub(crate) async fn unary(
    unary: Arc<Unary>,
    req: OwnedRequest,
    mut body: IncomingBody,
) -> Response {
    let content_type = req.header("content-type");
    let protocol = protocol_or_grpc(content_type);
    let mut bytes = Vec::new();
    while let Some(piece) = body.chunk().await {
        let Ok(piece) = piece else {
            let cut = Status::new(Code::Internal, "the call's body was cut off");
            return failed(protocol, &cut);
        };
        bytes.extend_from_slice(&piece);
        if let Some(resp) = super::over_limit(&bytes, || content_type) {
            unary.1.ended(unary.1.start(), Code::ResourceExhausted);
            return resp;
        }
        if bytes.len() as u64 > UNARY_BODY_LIMIT {
            let over = Status::new(Code::ResourceExhausted, "the call's body is over the limit");
            return failed(protocol, &over);
        }
    }
    drop(body);
    call_unary(&unary, &req, &bytes).await
}

/// What `grpc_unary` (`phase/content/grpc.rs`) does on the worker, on an owned request.
async fn call_unary(unary: &Unary, req: &OwnedRequest, body: &[u8]) -> Response {
    let stats = &unary.1;
    let started = stats.start();
    let call = match Call::read(&req.head.head, &req.head.bytes, req.peer) {
        Ok(c) => c,
        Err((code, refused)) => {
            if let Some(code) = code {
                stats.ended(started, code);
            }
            return refused;
        }
    };
    let protocol = call.head.protocol;
    let end = |status: Status| {
        stats.ended(started, status.code);
        failed(protocol, &status)
    };
    if call.expired() {
        return end(deadline_exceeded());
    }
    let text;
    let body = if protocol == Protocol::WebText {
        text = match decode_text(body) {
            Ok(t) => t,
            Err(s) => return end(s),
        };
        &text[..]
    } else {
        body
    };
    let deadline = call.deadline;
    let call_head = call.head;
    let called = read_unary(body, &call_head, |bytes| {
        catch_unwind(AssertUnwindSafe(|| (unary.0)(call, bytes)))
    });
    let fut = match called {
        Ok(Ok(Ok(fut))) => fut,
        Ok(Ok(Err(status))) | Err(status) => return end(status),
        Ok(Err(_)) => return end(stats.panicked()),
    };
    let run = catch_panic(fut);
    let outcome = match deadline {
        None => Some(run.await),
        Some(d) => tokio::time::timeout_at(d.into(), run).await.ok(),
    };
    let result = match outcome {
        Some(Some(result)) => result,
        Some(None) => Err(stats.panicked()),
        None => Err(deadline_exceeded()),
    };
    stats.ended(
        started,
        result.as_ref().map_or_else(|s| s.code, |_| Code::Ok),
    );
    unary_answer(protocol, result)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A layer's refusal on a gRPC route is the status it means, as gRPC's
    /// doc/http-grpc-status-mapping.md says, but 429 (a quota here, not a proxy's).
    #[test]
    fn http_statuses_of_layer_answers_map_to_grpc_codes() {
        let table: &[(u16, Code)] = &[
            (400, Code::Internal),
            (401, Code::Unauthenticated),
            (403, Code::PermissionDenied),
            (404, Code::Unimplemented),
            (429, Code::ResourceExhausted),
            (502, Code::Unavailable),
            (503, Code::Unavailable),
            (504, Code::Unavailable),
            (500, Code::Unknown),
            (418, Code::Unknown),
            (200, Code::Unknown),
        ];
        for (http, code) in table {
            assert_eq!(code_of_http(*http), *code, "HTTP {http}");
        }
    }

    #[test]
    fn a_layer_answer_becomes_a_trailers_only_answer_with_its_text_bounded_and_encoded() {
        let resp = Response::text_owned("no token, é\n".into())
            .status(401)
            .header("www-authenticate", "Bearer");
        let out = layer_answer(Protocol::Grpc, resp);
        assert_eq!(out.status_code(), 200);
        assert_eq!(out.content_type_value(), Some("application/grpc"));
        assert_eq!(out.field("grpc-status"), Some("16"));
        assert_eq!(out.field("grpc-message"), Some("no token, %C3%A9"));
        assert_eq!(out.field("www-authenticate"), Some("Bearer"));
        assert!(out.body_bytes().is_empty());

        let long = "é".repeat(MAX_LAYER_MESSAGE);
        let out = layer_answer(Protocol::Grpc, Response::text_owned(long).status(429));
        assert_eq!(out.field("grpc-status"), Some("8"));
        let encoded = out.field("grpc-message").unwrap();
        // 128 two-byte characters fit the bound, each percent-encoded as 6 characters.
        assert_eq!(encoded.len(), MAX_LAYER_MESSAGE / 2 * 6);

        let empty = layer_answer(Protocol::Grpc, Response::new(503));
        assert_eq!(empty.field("grpc-status"), Some("14"));
        assert_eq!(empty.field("grpc-message"), Some("HTTP 503"));
    }

    #[test]
    fn a_grpc_answer_from_a_layer_is_left_as_it_is_and_grpc_web_gets_its_trailer_frame() {
        let grpc = failed(Protocol::Grpc, &Status::new(Code::NotFound, "x"));
        let out = layer_answer(Protocol::Grpc, grpc);
        assert_eq!(out.field("grpc-status"), Some("5"));
        let web = layer_answer(Protocol::Web, Response::text("nope").status(403));
        assert_eq!(web.status_code(), 200);
        assert_eq!(web.content_type_value(), Some("application/grpc-web+proto"));
        let body = String::from_utf8_lossy(web.body_bytes()).into_owned();
        assert!(body.contains("grpc-status:7"), "{body:?}");
    }
}
