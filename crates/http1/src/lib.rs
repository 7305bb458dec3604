//! linerate-http1: a strict, sans-I/O HTTP/1.1 codec.
//!
//! Bytes in, facts out: this crate parses request heads ([`RequestHead`]), decodes request
//! bodies ([`BodyDecoder`], Content-Length and chunked), and encodes response heads
//! ([`ResponseHead`]) — the server's side — and reads responses ([`parse_response`],
//! [`ResponseBody`], [`ResponseCounter`]) — a client's side, for the load generator and the lab. It does not take care of network I/O, threads or clocks — the server
//! crate does — so every rule can be tested from byte strings alone.
//!
//! Strictness is the point: every rejection is a [`ParseError`] whose
//! [`status`](ParseError::status) is the answer to send, and after which the connection closes.
//!
//! ```
//! use linerate_http1::{Framing, Limits, Parsed, RequestHead};
//!
//! let buf = b"POST /upload HTTP/1.1\r\nHost: example.com\r\nContent-Length: 5\r\n\r\nhello";
//! let mut head = RequestHead::new();
//! let Parsed::Complete(n) = head.parse(buf, &Limits::default()).unwrap() else { panic!() };
//! assert_eq!(head.path(buf), "/upload");
//! assert_eq!(head.framing(), Framing::Length(5));
//! assert_eq!(&buf[n..], b"hello");
//!
//! let smuggle = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n";
//! assert_eq!(head.parse(smuggle, &Limits::default()).unwrap_err().status(), 400);
//! ```

/// The README's examples, compiled and run with the other doctests (`cargo test --doc`), so
/// that they cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

mod body;
mod chars;
mod date;
mod encode;
mod error;
mod head;
mod limits;
pub mod proxy_protocol;
mod response;
mod simd;

pub use body::{BodyDecoder, ChunkedDecoder, Step, Trailers};
pub use date::{DATE_LEN, DateCache, civil_from_days, fmt_http_date};
pub use encode::{
    CONTINUE_100, HeadRoom, ResponseHead, end_head, literal_field, reason, status_has_no_body,
    write_field,
};
pub use error::ParseError;
pub use head::{Framing, Method, Parsed, RequestHead, TargetForm, Version};
pub use limits::{
    CHUNK_EXT_LIMIT, Limits, MAX_HEAD_BYTES, MAX_HEADERS, MAX_METHOD_BYTES, MAX_TRAILER_BYTES,
    MAX_TRAILERS,
};
pub use response::{
    BodyLength, Counted, FieldSpan, HEAD_CACHE_BYTES, MAX_RESPONSE_HEAD_BYTES, ResponseBody,
    ResponseCounter, ResponseError, ResponseInfo, parse_response, parse_response_strict,
};

/// Whether `value` may be sent as a field value: no CR, LF, NUL or other controls but HTAB.
/// The server uses it so a handler cannot split a response.
pub fn is_valid_field_value(value: &[u8]) -> bool {
    chars::is_field_value(value)
}

/// Whether `name` is a valid field name (a token).
pub fn is_valid_field_name(name: &[u8]) -> bool {
    chars::is_token(name)
}

#[cfg(test)]
mod tests;
