//! The client's side of the wire, one file per protocol: a test request written as the bytes
//! a client sends, and the server's bytes read back into a [`TestResponse`].
//!
//! Owns framing only: no connection, no clock. The engine hands bytes both ways through
//! [`Wire`] and asks for the response once it is whole; a request field that would change
//! the framing never reaches here (the request builder refuses it).
#![forbid(unsafe_code)]

mod h1;
#[cfg(feature = "http2")]
mod h2;

pub(crate) use h1::H1Wire;
#[cfg(feature = "http2")]
pub(crate) use h2::H2Wire;

use super::error::TestError;
use super::response::TestResponse;

/// The authority a request names when it sets no `Host` field.
pub(crate) const DEFAULT_HOST: &str = "localhost";

/// One request, as the builder made it.
pub(crate) struct Outgoing<'a> {
    pub method: &'static str,
    pub target: &'a str,
    /// Fields in order; names as given.
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
}

impl Outgoing<'_> {
    /// The first field named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The `Content-Length` the client adds: for a body, or for a method that carries one
    /// (as curl sends `0` for an empty POST), unless the request frames its body itself.
    pub fn content_length(&self) -> Option<usize> {
        let framed =
            self.header("content-length").is_some() || self.header("transfer-encoding").is_some();
        let carries = matches!(self.method, "POST" | "PUT" | "PATCH");
        (!framed && (carries || !self.body.is_empty())).then_some(self.body.len())
    }
}

/// One exchange's client end, as the engine drives it.
pub(crate) trait Wire {
    /// Bytes to send now (empty: none yet).
    fn outgoing(&mut self) -> Vec<u8>;
    /// Whether [`Wire::outgoing`] has bytes now.
    fn has_output(&self) -> bool;
    /// Bytes the server transmitted.
    fn incoming(&mut self, bytes: &[u8]) -> Result<(), TestError>;
    /// The server's side ended (`reset`: abortively); a body that runs to the close ends here.
    fn closed(&mut self, reset: bool) -> Result<(), TestError>;
    /// The response, once it is whole (taken).
    fn response(&mut self) -> Option<TestResponse>;
}
