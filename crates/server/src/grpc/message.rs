//! A call's request and answer as a handler sees them: the message (or the client's stream of
//! messages) with the call's metadata, deadline and peer; the answer's message with its
//! initial and trailing metadata.
//!
//! Owns nothing of the wire: `call.rs` fills a [`Request`] in, `answer.rs` sends a
//! [`Response`].
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::time::Instant;

use super::Metadata;

/// A timeout too long to add to now is a century's worth.
const CENTURY: std::time::Duration = std::time::Duration::from_secs(100 * 365 * 86_400);

/// A call's request: its message (a [`Streaming`](super::Streaming) of them for a
/// client-streaming or bidirectional call), the client's metadata, the deadline it set and
/// its address.
#[derive(Debug)]
pub struct Request<T> {
    pub(crate) message: T,
    pub(crate) metadata: Metadata,
    pub(crate) deadline: Option<Instant>,
    pub(crate) peer: Option<SocketAddr>,
}

impl<T> Request<T> {
    /// A request carrying `message` and no metadata (for calling a service in tests).
    pub fn new(message: T) -> Request<T> {
        Request {
            message,
            metadata: Metadata::new(),
            deadline: None,
            peer: None,
        }
    }

    /// The message.
    pub fn get_ref(&self) -> &T {
        &self.message
    }

    /// The message, mutably (a stream is read through it).
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.message
    }

    /// The message, taken.
    pub fn into_inner(self) -> T {
        self.message
    }

    /// The client's custom metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// The metadata, mutably (for a test, or a layer of the application's own).
    pub fn metadata_mut(&mut self) -> &mut Metadata {
        &mut self.metadata
    }

    /// Carries `cx`'s `traceparent` (a client's call made while handling a traced request,
    /// or under a handler's span): the called service's spans become children of `cx`'s
    /// current span (W3C Trace Context, which gRPC's OpenTelemetry instrumentation reads).
    pub fn set_trace(&mut self, cx: &crate::trace::TraceContext) {
        // A traceparent is ASCII: the insert cannot refuse it.
        let _ = self.metadata.insert("traceparent", cx.traceparent());
    }

    /// When the client gives up (`grpc-timeout`); past it the call's future is dropped.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Gives the call `timeout` from now (a client's request: sent as `grpc-timeout`, and
    /// the call ends DEADLINE_EXCEEDED on this side past it, as tonic's `set_timeout`).
    pub fn set_timeout(&mut self, timeout: std::time::Duration) {
        let now = Instant::now();
        self.deadline = Some(now.checked_add(timeout).unwrap_or(now + CENTURY));
    }

    /// The client's address (behind trusted proxies, the one they name).
    pub fn remote_addr(&self) -> Option<SocketAddr> {
        self.peer
    }
}

/// A call's answer: its message, and the metadata sent before it (initial) and after it
/// (trailing, beside `grpc-status`).
#[derive(Debug)]
pub struct Response<T> {
    pub(crate) message: T,
    pub(crate) metadata: Metadata,
    pub(crate) trailers: Metadata,
}

impl<T> Response<T> {
    /// An answer of `message`, without metadata.
    pub fn new(message: T) -> Response<T> {
        Response {
            message,
            metadata: Metadata::new(),
            trailers: Metadata::new(),
        }
    }

    /// The message.
    pub fn get_ref(&self) -> &T {
        &self.message
    }

    /// The message, taken.
    pub fn into_inner(self) -> T {
        self.message
    }

    /// The initial metadata (sent with the answer's head).
    pub fn metadata_mut(&mut self) -> &mut Metadata {
        &mut self.metadata
    }

    /// The trailing metadata (sent with `grpc-status`).
    pub fn trailers_mut(&mut self) -> &mut Metadata {
        &mut self.trailers
    }

    /// The initial metadata (a client reads the server's here).
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// The trailing metadata (a client of a unary call reads the server's here; a streaming
    /// answer's come with its end, `client::Streaming::trailers`).
    pub fn trailers(&self) -> &Metadata {
        &self.trailers
    }

    /// The message, mutably (a client reads a streaming answer through it).
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.message
    }
}
