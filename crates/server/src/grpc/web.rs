//! gRPC-Web answers (PROTOCOL-WEB.md): the same calls as gRPC, their status and trailing
//! metadata in a trailer frame (flag 0x80) at the body's end instead of HTTP trailers, the
//! whole body base64 for `-text`; and a `-text` request body decoded before its frames are
//! read.
//!
//! Owns the web shape of every answer `answer.rs` makes for gRPC; not when a call ends.
//! A call that fails before any message is answered with the trailer frame alone (not the
//! status in the head): every gRPC-Web client reads it, and a browser needs no
//! `Access-Control-Expose-Headers` to see the status in the body.
#![forbid(unsafe_code)]

use linerate_grpc::call::CallError;
use linerate_grpc::web::{self as wire, Protocol, TextDecoder};

use super::method::Reply;
use super::{Code, Metadata, Status, answer};
use crate::app::response::{Body, Response};

/// The protocol a request's content type names, when it is one this server serves.
pub(crate) fn protocol_of(content_type: Option<&[u8]>) -> Option<Protocol> {
    content_type.and_then(Protocol::from_content_type)
}

/// A unary call's answer in `protocol`: gRPC's, or the message and the trailer frame.
#[inline(always)]
pub(crate) fn unary_answer(protocol: Protocol, result: Result<Reply, Status>) -> Response {
    if protocol.is_web() {
        return web_unary_answer(protocol, result);
    }
    answer::unary_answer(result)
}

#[cold]
#[inline(never)]
fn web_unary_answer(protocol: Protocol, result: Result<Reply, Status>) -> Response {
    match result {
        Ok(reply) => {
            let mut body = reply.frame;
            trailer_frame(&Status::ok(), &reply.trailers, &mut body);
            answer::head_typed(protocol.content_type(), &reply.metadata)
                .body(Body::Owned(encoded(protocol, body)))
        }
        Err(status) => trailers_only(protocol, &status, &Metadata::new(), &Metadata::new()),
    }
}

/// A call that ended before any message, in `protocol`: gRPC's trailers-only answer, or the
/// initial metadata in the head and the trailer frame as the whole body.
pub(crate) fn trailers_only(
    protocol: Protocol,
    status: &Status,
    initial: &Metadata,
    trailers: &Metadata,
) -> Response {
    if !protocol.is_web() {
        return answer::trailers_only(status, initial, trailers);
    }
    let mut body = Vec::new();
    trailer_frame(status, trailers, &mut body);
    answer::head_typed(protocol.content_type(), initial).body(Body::Owned(encoded(protocol, body)))
}

/// A failed call without metadata, in `protocol`.
pub(crate) fn failed(protocol: Protocol, status: &Status) -> Response {
    trailers_only(protocol, status, &Metadata::new(), &Metadata::new())
}

/// The answer to a call refused at its head, in the protocol its content type names (a
/// content type this server does not serve: HTTP 415 either way).
pub(crate) fn refusal(e: CallError, content_type: Option<&[u8]>) -> Response {
    match (e.code(), protocol_of(content_type)) {
        (Some(code), Some(p)) if p.is_web() => {
            let resp = failed(p, &Status::new(code, e.to_string()));
            if code == Code::Unimplemented {
                return resp.header(
                    "grpc-accept-encoding",
                    linerate_grpc::compress::ACCEPT_ENCODING,
                );
            }
            resp
        }
        _ => answer::refusal(e),
    }
}

/// Appends the trailer frame: `grpc-status`, `grpc-message`, details, the status's own
/// metadata, then `trailers` (binary values base64, as in HTTP trailers).
pub(crate) fn trailer_frame(status: &Status, trailers: &Metadata, out: &mut Vec<u8>) {
    let fields: Vec<_> = status.metadata.fields().chain(trailers.fields()).collect();
    let fields: Vec<(&str, &[u8])> = fields
        .iter()
        .map(|(n, v)| (n.as_ref(), v.as_bytes()))
        .collect();
    wire::encode_trailers(status, &fields, out);
}

/// `bytes` as the body carries them: as they are, or base64 for `-text`.
pub(crate) fn encoded(protocol: Protocol, bytes: Vec<u8>) -> Vec<u8> {
    if protocol != Protocol::WebText {
        return bytes;
    }
    let mut text = Vec::with_capacity(bytes.len().div_ceil(3) * 4);
    wire::encode_text(&bytes, &mut text);
    text
}

/// A whole `-text` body decoded; not base64: INTERNAL.
pub(crate) fn decode_text(body: &[u8]) -> Result<Vec<u8>, Status> {
    let mut out = Vec::with_capacity(body.len() / 4 * 3 + 3);
    let mut d = TextDecoder::new();
    d.feed(body, &mut out)
        .and_then(|()| d.finish(&mut out))
        .map_err(|e| Status::new(e.code(), e.to_string()))?;
    Ok(out)
}

/// The decoded prefix of a `-text` body so far (its first 8 characters hold the 5-byte
/// prefix), for judging the message's length as the body arrives; `None` while too short or
/// not base64 (the whole body's decoding reports that).
pub(crate) fn text_prefix(body: &[u8]) -> Option<[u8; linerate_grpc::frame::PREFIX_LEN]> {
    let mut out = Vec::with_capacity(6);
    TextDecoder::new().feed(body.get(..8)?, &mut out).ok()?;
    let mut prefix = [0; linerate_grpc::frame::PREFIX_LEN];
    prefix.copy_from_slice(out.get(..linerate_grpc::frame::PREFIX_LEN)?);
    Some(prefix)
}

/// Whether `resp` is a gRPC answer streamed without a status yet: its access-log line waits
/// for its end (`AppIo::grpc_line_end`), where its trailers carry the status.
pub(crate) fn streamed(resp: &Response) -> bool {
    matches!(resp.body, Body::Stream(_))
        && resp
            .content_type
            .as_deref()
            .is_some_and(|ct| ct.starts_with("application/grpc"))
}

/// A `grpc-status` field's value as the access log writes it (`None`: not a status). A
/// proxied call's comes from its upstream's answer this way.
pub(crate) fn status_value(value: &[u8]) -> Option<&'static str> {
    Some(Code::parse(value)?.as_str())
}

/// The `grpc-status` among a streamed answer's trailer fields, for the access log.
pub(crate) fn trailer_fields_status(fields: &[crate::response::Field]) -> Option<&'static str> {
    let (_, v) = fields
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(linerate_grpc::status::GRPC_STATUS))?;
    status_value(v.as_bytes())
}

/// The `grpc-status` an answer carries, for the access log: in its head (trailers-only), its
/// trailers, or a gRPC-Web body's trailer frame. `None` for an answer that is not gRPC's and
/// for a streamed one (its line is written at its end, with its trailers' status).
pub(crate) fn logged_status(resp: &Response) -> Option<&'static str> {
    let ct = resp.content_type.as_deref()?;
    if !ct.starts_with("application/grpc") {
        return None;
    }
    let value = resp
        .field(linerate_grpc::status::GRPC_STATUS)
        .or_else(|| {
            resp.trailers.as_ref().and_then(|t| {
                t.iter()
                    .find(|(n, _)| n == linerate_grpc::status::GRPC_STATUS)
                    .map(|(_, v)| v.as_ref())
            })
        })
        .map(|v| v.as_bytes().to_vec())
        .or_else(|| {
            let Body::Owned(body) = &resp.body else {
                return None;
            };
            let protocol = Protocol::from_content_type(ct.as_bytes())?;
            match protocol {
                Protocol::Grpc => None,
                Protocol::Web => trailer_status(body),
                Protocol::WebText => trailer_status(&decode_text(body).ok()?),
            }
        })?;
    Some(Code::parse(&value)?.as_str())
}

/// The `grpc-status` value in a gRPC-Web body's trailer frame.
fn trailer_status(body: &[u8]) -> Option<Vec<u8>> {
    let mut d = linerate_grpc::frame::Decoder::web_answer(usize::MAX >> 1, false);
    let mut input = body;
    while let Some(m) = d.next(&mut input).ok()? {
        if m.trailers {
            return wire::trailer_fields(m.data)
                .find(|(n, _)| {
                    n.eq_ignore_ascii_case(linerate_grpc::status::GRPC_STATUS.as_bytes())
                })
                .map(|(_, v)| v.to_vec());
        }
    }
    None
}

#[cfg(test)]
mod tests;
