//! The response a test request got: status, fields and body as the client read them off the
//! wire (HTTP/1.1 field names as sent, HTTP/2's lowercase), with helpers for text and JSON.
#![forbid(unsafe_code)]

use serde::de::DeserializeOwned;

use super::client::Protocol;

/// A response read back from the connection's bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestResponse {
    pub(crate) protocol: Protocol,
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
    /// The trailer fields after the body (a chunked body's trailer section, HTTP/2's
    /// trailing HEADERS).
    pub(crate) trailers: Vec<(String, String)>,
}

impl TestResponse {
    /// The status code.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The first field named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every field, in the order received (over HTTP/2 without the `:status` pseudo-field).
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// The first trailer field named `name` (case-insensitive): one sent after the body
    /// (RFC 9110 §6.5), never one of the head's.
    pub fn trailer(&self, name: &str) -> Option<&str> {
        self.trailers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every trailer field, in the order received.
    pub fn trailers(&self) -> &[(String, String)] {
        &self.trailers
    }

    /// The body: decoded from its framing (Content-Length, chunked, DATA frames), never from
    /// its content coding (a gzip body stays gzip).
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// Takes the body out.
    pub fn into_body(self) -> Vec<u8> {
        self.body
    }

    /// The body as text (invalid UTF-8 replaced by U+FFFD).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body parsed as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }

    /// The protocol it came over.
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }
}
