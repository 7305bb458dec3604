//! A call's answer as the engine sends it: a unary call's whole answer (head, message,
//! trailers), a trailers-only answer (one HEADERS: the status in the head), a refused call's
//! (HTTP 415, or the status), and the trailer fields that end a streamed answer.
//!
//! Owns the fields' shape (PROTOCOL-HTTP2.md "Responses"); not when or how they are sent.
#![forbid(unsafe_code)]

use std::borrow::Cow;

use linerate_grpc::call::CallError;
use linerate_grpc::status::{GRPC_MESSAGE, GRPC_STATUS, GRPC_STATUS_DETAILS_BIN};

use super::method::Reply;
use super::{Code, Metadata, Status};
use crate::app::response::{Body, Response};

/// The content type of every answer (the request's `+proto` is the same format).
pub(crate) const CONTENT_TYPE: &str = "application/grpc";

/// The head of an answer with messages: 200, the content type, the initial metadata.
pub(crate) fn head(metadata: &Metadata) -> Response {
    head_typed(CONTENT_TYPE, metadata)
}

/// The head of an answer with messages, of `content_type` (gRPC-Web's, `web.rs`).
pub(crate) fn head_typed(content_type: &'static str, metadata: &Metadata) -> Response {
    let mut resp = Response::new(200).content_type(content_type);
    for (name, value) in metadata.fields() {
        // Names and values were checked when the handler set them.
        resp = match resp.try_header(name, value) {
            Ok(r) => r,
            Err(_) => unreachable!("metadata is checked when set"),
        };
    }
    resp
}

/// A unary call's answer: its message and trailers, or, failed, the trailers-only answer.
pub(crate) fn unary_answer(result: Result<Reply, Status>) -> Response {
    match result {
        Ok(reply) => {
            let resp = head(&reply.metadata).body(Body::Owned(reply.frame));
            with_trailers(resp, &Status::ok(), &reply.trailers)
        }
        Err(status) => trailers_only(&status, &Metadata::new(), &Metadata::new()),
    }
}

/// A call ended before any message: the status, the initial and the trailing metadata in
/// the answer's head, no body (PROTOCOL-HTTP2.md "Trailers-Only").
pub(crate) fn trailers_only(status: &Status, initial: &Metadata, trailers: &Metadata) -> Response {
    let mut resp = Response::new(200).content_type(CONTENT_TYPE);
    let fields = initial
        .fields()
        .chain(status_fields(status))
        .chain(trailers.fields());
    for (name, value) in fields {
        resp = match resp.try_header(name, value) {
            Ok(r) => r,
            Err(_) => unreachable!("status fields and metadata are checked"),
        };
    }
    resp
}

/// `resp` ending with the status and trailing metadata.
pub(crate) fn with_trailers(mut resp: Response, status: &Status, trailers: &Metadata) -> Response {
    if status.code == Code::Ok
        && status.message.is_empty()
        && trailers.is_empty()
        && status.metadata.is_empty()
    {
        // Every successful unary call: one static field, checked as the answer leaves.
        return resp.trailer(GRPC_STATUS, Code::Ok.as_str());
    }
    for (name, value) in status_fields(status).chain(trailers.fields()) {
        resp = match resp.try_trailer(name, value) {
            Ok(r) => r,
            Err(_) => unreachable!("status fields and metadata are checked"),
        };
    }
    resp
}

/// The trailer fields that end a streamed answer.
pub(crate) fn trailer_fields(
    status: &Status,
    trailers: &Metadata,
) -> Vec<(Cow<'static, str>, Cow<'static, str>)> {
    status_fields(status).chain(trailers.fields()).collect()
}

/// `grpc-status`, and `grpc-message`, `grpc-status-details-bin` and the status's own
/// metadata when there are any. An OK status without a message allocates nothing.
fn status_fields(status: &Status) -> impl Iterator<Item = (Cow<'static, str>, Cow<'static, str>)> {
    let code = (
        Cow::Borrowed(GRPC_STATUS),
        Cow::Borrowed(status.code.as_str()),
    );
    let message = (!status.message.is_empty()).then(|| {
        let m = linerate_grpc::status::encode_message(&status.message).into_owned();
        (Cow::Borrowed(GRPC_MESSAGE), Cow::Owned(m))
    });
    let details = (!status.details.is_empty()).then(|| {
        let d = linerate_grpc::metadata::encode_bin(&status.details);
        (Cow::Borrowed(GRPC_STATUS_DETAILS_BIN), Cow::Owned(d))
    });
    std::iter::once(code)
        .chain(message)
        .chain(details)
        .chain(status.metadata.fields())
}

/// The answer to a call refused at its head: a content type this server does not serve is
/// HTTP 415 (PROTOCOL-HTTP2.md: "servers SHOULD respond with HTTP status of 415"), anything
/// else the status it maps to, trailers-only (an unknown `grpc-encoding` with the codings
/// this server takes).
pub(crate) fn refusal(e: CallError) -> Response {
    let Some(code) = e.code() else {
        return Response::new(415)
            .content_type("text/plain")
            .body(Body::Static(b"gRPC needs content-type application/grpc\n"));
    };
    let status = Status::new(code, e.to_string());
    let resp = trailers_only(&status, &Metadata::new(), &Metadata::new());
    if code == Code::Unimplemented {
        return resp.header(
            "grpc-accept-encoding",
            linerate_grpc::compress::ACCEPT_ENCODING,
        );
    }
    resp
}
