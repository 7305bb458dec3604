//! The HTTP/2 server connection, sans I/O (RFC 9113, HPACK RFC 7541): one state machine per
//! connection with the same driver-facing calls as `h1::Conn`, serving the same
//! [`Service`](crate::h1::Service).
//!
//! Files: `conn` (the state machine: frames in, streams, flow control, answers out), `stream`
//! (an open stream, the named limits), `frame` (the wire layout of frames), `fields` (a
//! request's fields checked and written as the HTTP/1.1 head the application reads),
//! `answer_fields` (an answer's fields lowercased, connection-specific ones left out; h3's
//! too). HPACK is
//! the `linerate-hpack` crate.

pub(crate) mod answer_fields;
mod conn;
pub(crate) mod fields;
pub(crate) mod frame;
pub(crate) mod stream;
#[cfg(test)]
mod tests;

pub(crate) use conn::Conn;
#[cfg(feature = "http3")]
pub(crate) use conn::read_file;
pub use stream::{
    MAX_BODY_STREAMS, MAX_CONCURRENT_STREAMS, MAX_CONTINUATIONS, MAX_CONTROL_PER_SEC,
    MAX_HEADER_BLOCK, MAX_RESETS_PER_SEC, MAX_TUNNEL_STREAMS, SMALL_BODY,
};
