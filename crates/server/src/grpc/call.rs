//! A call as its head defines it: the call definition (linerate-grpc's `CallHead`: content
//! type, `grpc-timeout`, `grpc-encoding`), the client's metadata, the deadline and the peer;
//! and a unary call's one message read from its whole body.
//!
//! Owns reading the request; not the handler's call (`method.rs`) nor the answer
//! (`answer.rs`).
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use linerate_grpc::call::CallHead;
use linerate_grpc::compress;
use linerate_grpc::frame::Decoder;
use linerate_http1::RequestHead;

use super::{Code, MAX_MESSAGE, Metadata, Request, Status};
use crate::app::response::Response;

/// A call's definition, metadata, deadline and peer, read from its head.
#[derive(Debug)]
pub(crate) struct Call {
    pub(crate) head: CallHead,
    pub(crate) metadata: Metadata,
    pub(crate) deadline: Option<Instant>,
    pub(crate) peer: Option<SocketAddr>,
}

impl Call {
    /// Reads a call from its request head; `Err`: the answer that refuses it, and the status
    /// it ends the call with (`None`: HTTP 415, not a gRPC call).
    pub(crate) fn read(
        head: &RequestHead,
        buf: &[u8],
        peer: Option<SocketAddr>,
    ) -> Result<Call, (Option<Code>, Response)> {
        // HTTP/2 and HTTP/3 names are lowercase (their parsers refuse others); an HTTP/1.1
        // client's (gRPC-Web) may not be.
        use linerate_http1::Version;
        let upper = matches!(head.version(), Version::Http10 | Version::Http11)
            && head
                .headers(buf)
                .any(|(n, _)| n.iter().any(u8::is_ascii_uppercase));
        let mut metadata = Metadata::new();
        let mut bad = None;
        let mut take = |n: &[u8], v: &[u8]| {
            if let Err(s) = metadata.take_field(n, v) {
                bad.get_or_insert(s);
            }
        };
        let call = if upper {
            let lower: Vec<(Vec<u8>, &[u8])> = head
                .headers(buf)
                .map(|(n, v)| (n.to_ascii_lowercase(), v))
                .collect();
            CallHead::read_with(lower.iter().map(|(n, v)| (n.as_slice(), *v)), |n, v| {
                take(n, v)
            })
        } else {
            CallHead::read_with(head.headers(buf), take)
        };
        let call = call.map_err(|e| {
            (
                e.code(),
                super::web::refusal(e, head.header(buf, "content-type")),
            )
        })?;
        if let Some(s) = bad {
            return Err((Some(s.code), super::web::failed(call.protocol, &s)));
        }
        Ok(Call {
            deadline: call.timeout.map(deadline_in),
            head: call,
            metadata,
            peer,
        })
    }

    /// Whether the deadline has passed already (a `grpc-timeout` of 0): the call is answered
    /// DEADLINE_EXCEEDED without calling the handler.
    pub(crate) fn expired(&self) -> bool {
        self.deadline.is_some_and(|d| d <= Instant::now())
    }

    /// The handler's request: `message` with the call's metadata, deadline and peer.
    pub(crate) fn request<T>(self, message: T) -> Request<T> {
        Request {
            message,
            metadata: self.metadata,
            deadline: self.deadline,
            peer: self.peer,
        }
    }
}

/// The instant `timeout` from now (a timeout too long to add is no deadline's worth: a
/// century).
fn deadline_in(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400))
}

/// The status of a call that ran past its deadline.
pub(crate) fn deadline_exceeded() -> Status {
    Status::new(Code::DeadlineExceeded, "deadline exceeded")
}

/// A unary (or server-streaming) call's one message, from its whole body, given to `f`
/// (decompressed first when flagged): no message, a second one, or a broken frame is
/// INTERNAL; one over [`MAX_MESSAGE`] RESOURCE_EXHAUSTED.
pub(crate) fn read_unary<R>(
    body: &[u8],
    call: &CallHead,
    f: impl FnOnce(&[u8]) -> R,
) -> Result<R, Status> {
    let mut decoder = Decoder::new(MAX_MESSAGE, call.encoding.compresses());
    let mut input = body;
    let frame_status = |e: linerate_grpc::frame::FrameError| Status::new(e.code(), e.to_string());
    let message = match decoder.next(&mut input) {
        Ok(Some(m)) => m,
        Ok(None) => {
            decoder.finish().map_err(frame_status)?;
            return Err(Status::new(
                Code::Internal,
                "a unary call without a message",
            ));
        }
        Err(e) => return Err(frame_status(e)),
    };
    if !input.is_empty() {
        return Err(Status::new(
            Code::Internal,
            "a unary call with more than one message",
        ));
    }
    if !message.compressed {
        return Ok(f(message.data));
    }
    let mut plain = Vec::new();
    compress::decompress(call.encoding, message.data, MAX_MESSAGE, &mut plain)
        .map_err(|e| Status::new(e.code(), e.to_string()))?;
    Ok(f(&plain))
}
