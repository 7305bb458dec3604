//! Why a test request got no response: each variant names what went wrong on the client's
//! side of the exchange, never a status (the server's own answers, 4xx and 5xx alike, are
//! responses).
#![forbid(unsafe_code)]

use std::fmt;
use std::time::Duration;

use linerate_http1::ResponseError;

/// Why [`TestRequest::try_send`](super::TestRequest::try_send) returned no response.
#[derive(Debug)]
#[non_exhaustive]
pub enum TestError {
    /// A request field whose name is not a token, or whose value holds CR, LF, NUL or another
    /// control: it would change the request's framing, so it is never sent.
    InvalidHeader(String),
    /// `Method::Other` has no token to send.
    NoMethodToken,
    /// [`TestRequest::json`](super::TestRequest::json) could not serialize its value.
    Json(serde_json::Error),
    /// The connection ended before the response did.
    Closed {
        /// It ended abortively (a reset), not with a FIN.
        reset: bool,
    },
    /// The HTTP/1.1 response could not be read.
    Response(ResponseError),
    /// HTTP/2: the server reset the request's stream with this error code (RFC 9113 §7).
    StreamReset(u32),
    /// HTTP/2: the server ended the connection with this error code (RFC 9113 §7).
    GoAway(u32),
    /// HTTP/2: a frame the client could not read (what is wrong with it).
    Frame(&'static str),
    /// A static file's range could not be read back.
    File(std::io::Error),
    /// The request went to a proxy mount: the test client reaches no upstream.
    Proxied,
    /// The connection kept transmitting without settling (a server bug).
    Stuck,
    /// No response within the client's time limit (see
    /// [`TestClient::timeout`](super::TestClient::timeout)).
    Timeout(Duration),
}

impl fmt::Display for TestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TestError::InvalidHeader(name) => {
                write!(f, "request field {name:?} is not a valid field")
            }
            TestError::NoMethodToken => f.write_str("Method::Other has no token to send"),
            TestError::Json(e) => write!(f, "request body not serialized: {e}"),
            TestError::Closed { reset: false } => {
                f.write_str("the connection closed before the response ended")
            }
            TestError::Closed { reset: true } => {
                f.write_str("the connection was reset before the response ended")
            }
            TestError::Response(e) => write!(f, "unreadable response: {e}"),
            TestError::StreamReset(code) => write!(f, "the server reset the stream ({code:#x})"),
            TestError::GoAway(code) => write!(f, "the server sent GOAWAY ({code:#x})"),
            TestError::Frame(why) => write!(f, "unreadable HTTP/2 frame: {why}"),
            TestError::File(e) => write!(f, "file body not readable: {e}"),
            TestError::Proxied => {
                f.write_str("the request went to a proxy mount, which the test client cannot reach")
            }
            TestError::Stuck => f.write_str("the connection never stopped transmitting"),
            TestError::Timeout(d) => write!(f, "no response within {d:?}"),
        }
    }
}

impl std::error::Error for TestError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TestError::Json(e) => Some(e),
            TestError::Response(e) => Some(e),
            TestError::File(e) => Some(e),
            _ => None,
        }
    }
}
